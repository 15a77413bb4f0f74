// The SPEC §6 matrix for dense SDPA at sizes a software adapter runs in seconds, shared by every
// backend's cases (naive, flash portable, flash subgroup).
import type { SdpaSpec } from './sdpa';

export interface MatrixGroup { name: string; specs: SdpaSpec[] }

function matrix(name: string, specs: SdpaSpec[]): MatrixGroup {
  return { name, specs };
}

export const SDPA_MATRIX: MatrixGroup[] = [
  matrix('head sizes 8..256 (32, 64, 80, 96, 128, 192, 256 and odd multiples of 8)', [
    8, 24, 32, 64, 80, 96, 128, 192, 256,
  ].map((D, i) => ({ Lq: 3, Lk: 5, D, Hq: 2, seed: 100 + i }))),
  matrix('GQA ratios 1, 2, 4, 7, 8 (causal)', [
    { Hq: 2, Hkv: 2 }, { Hq: 4, Hkv: 2 }, { Hq: 4, Hkv: 1 }, { Hq: 14, Hkv: 2 }, { Hq: 8, Hkv: 1 }, { Hq: 32, Hkv: 4 },
  ].map((h, i) => ({ ...h, Lq: 4, Lk: 6, D: 16, causal: true, seed: 200 + i }))),
  matrix('lengths 1, 2, 3, powers of two and odd (Lq == Lk, causal and not)', [
    [1, 1], [2, 2], [3, 3], [16, 16], [33, 33], [64, 64], [1, 17], [5, 129],
  ].flatMap(([Lq, Lk], i) => [false, true].map((causal) => ({ Lq, Lk, D: 16, Hq: 2, causal, seed: 300 + 2 * i + (causal ? 1 : 0) })))),
  matrix('odd lengths 777, 1345, 3141', [
    { Lq: 777, Lk: 777, D: 8, causal: true, seed: 350 }, { Lq: 3, Lk: 1345, D: 8, Hq: 2, Hkv: 1, seed: 351 },
    { Lq: 1, Lk: 3141, D: 16, slidingWindow: 1000, seed: 352 },
  ]),
  matrix('bottom-right causal with Lq > Lk: leading rows see no key (out 0, lse -inf)', [
    { Lq: 7, Lk: 3, D: 16, causal: true, seed: 400 }, { Lq: 9, Lk: 1, D: 8, Hq: 3, causal: true, seed: 401 },
  ]),
  matrix('batch 1..5 and custom scale', [
    { B: 3, Hq: 2, Lq: 3, Lk: 4, D: 16, seed: 500 }, { B: 5, Hq: 1, Lq: 2, Lk: 9, D: 8, scale: 0.37, seed: 501 },
  ]),
  matrix('Dv != D', [
    { Lq: 4, Lk: 7, D: 64, Dv: 32, Hq: 2, seed: 600 }, { Lq: 4, Lk: 7, D: 16, Dv: 96, Hq: 4, Hkv: 2, causal: true, seed: 601 },
    { Lq: 3, Lk: 5, D: 8, Dv: 7, seed: 602 },
  ]),
  matrix('sliding window, with and without causal, Lq < Lk', [
    { Lq: 6, Lk: 10, D: 16, slidingWindow: 3, seed: 700 }, { Lq: 6, Lk: 10, D: 16, slidingWindow: 3, causal: true, seed: 701 },
    { Lq: 10, Lk: 10, D: 8, slidingWindow: 1, causal: true, Hq: 2, seed: 702 },
  ]),
  matrix('softcap, ALiBi and learned sinks, alone and combined', [
    { Lq: 5, Lk: 8, D: 16, softcap: 2.5, std: 3, seed: 800 },
    { Lq: 5, Lk: 8, D: 16, Hq: 4, Hkv: 2, alibi: true, causal: true, seed: 801 },
    { Lq: 5, Lk: 8, D: 16, Hq: 3, sinks: true, seed: 802 },
    { Lq: 9, Lk: 8, D: 16, Hq: 4, Hkv: 1, sinks: true, alibi: true, softcap: 5, causal: true, slidingWindow: 4, seed: 803 },
  ]),
  matrix('bool masks, broadcast from [Lk], [Lq,Lk], [B,1,Lq,Lk], [1,Hq,1,Lk]', [
    { B: 2, Hq: 2, Lq: 3, Lk: 5, D: 8, mask: { shape: [5], kind: 'bool' }, seed: 900 },
    { B: 2, Hq: 2, Lq: 3, Lk: 5, D: 8, mask: { shape: [3, 5], kind: 'bool' }, seed: 901 },
    { B: 2, Hq: 2, Lq: 3, Lk: 5, D: 8, mask: { shape: [2, 1, 3, 5], kind: 'bool' }, causal: true, seed: 902 },
    { B: 2, Hq: 2, Lq: 3, Lk: 5, D: 8, mask: { shape: [1, 2, 1, 5], kind: 'bool' }, seed: 903 },
  ] as SdpaSpec[]),
  matrix('additive masks (finite values, -1e4 and -inf), broadcast', [
    { B: 2, Hq: 2, Lq: 3, Lk: 6, D: 8, mask: { shape: [3, 6], kind: 'additive' }, seed: 1000 },
    { B: 1, Hq: 3, Lq: 4, Lk: 6, D: 8, mask: { shape: [1, 3, 4, 6], kind: 'additive' }, sinks: true, seed: 1001 },
  ] as SdpaSpec[]),
  matrix('fully masked rows give out 0 and lse -inf, also with sinks', [
    { Hq: 2, Lq: 6, Lk: 5, D: 8, mask: { shape: [6, 5], kind: 'bool', emptyRows: true }, seed: 1100 },
    { Hq: 2, Lq: 6, Lk: 5, D: 8, mask: { shape: [6, 5], kind: 'additive', emptyRows: true }, seed: 1101 },
    { Hq: 2, Lq: 6, Lk: 5, D: 8, mask: { shape: [6, 5], kind: 'bool', emptyRows: true }, sinks: true, seed: 1102 },
    { Hq: 2, Lq: 6, Lk: 5, D: 8, mask: { shape: [6, 5], kind: 'bool', keep: 0 }, seed: 1103 },
  ] as SdpaSpec[]),
  matrix('numerical extremes: q/k standard deviation 10 and 1e-4, no NaN or Inf', [
    { Lq: 8, Lk: 8, D: 64, std: 10, seed: 1200 }, { Lq: 8, Lk: 8, D: 64, std: 1e-4, causal: true, seed: 1201 },
    { Lq: 8, Lk: 8, D: 64, std: 10, dtype: 'f16', seed: 1202 }, { Lq: 8, Lk: 8, D: 64, std: 10, dtype: 'bf16', softcap: 30, seed: 1203 },
  ]),
  matrix('f16 storage (loads through unpack2x16float, no shader-f16 needed)', [
    { Lq: 5, Lk: 9, D: 32, Hq: 4, Hkv: 2, dtype: 'f16', causal: true, seed: 1300 },
    { Lq: 3, Lk: 4, D: 8, Dv: 7, Hq: 3, dtype: 'f16', seed: 1301 },
    { Lq: 1, Lk: 1, D: 8, Dv: 1, dtype: 'f16', seed: 1302 },
    { B: 2, Lq: 4, Lk: 4, D: 128, Hq: 2, dtype: 'f16', alibi: true, sinks: true, seed: 1303 },
  ]),
  matrix('bf16 storage', [
    { Lq: 5, Lk: 9, D: 32, Hq: 4, Hkv: 2, dtype: 'bf16', causal: true, seed: 1400 },
    { Lq: 3, Lk: 4, D: 8, Dv: 5, Hq: 3, dtype: 'bf16', slidingWindow: 2, seed: 1401 },
    { B: 2, Lq: 4, Lk: 4, D: 256, Hq: 2, dtype: 'bf16', mask: { shape: [4, 4], kind: 'bool' }, seed: 1402 },
  ] as SdpaSpec[]),
];
