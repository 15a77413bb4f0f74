// Naive SDPA across the SPEC §6 matrix, at sizes a software adapter runs in seconds.
import { reference } from '../../src/index';
import { assert, assertClose, defineCases, equalArrays, randn, type TestCase } from './harness';
import { checkSdpa, type SdpaSpec } from './sdpa';

const b = 'naive' as const;

function matrix(name: string, specs: SdpaSpec[]): TestCase {
  return { name, async run({ engine }) { for (const s of specs) await checkSdpa(engine, s, b); } };
}

export const sdpaNaiveCases = defineCases('sdpa naive', [
  matrix('head sizes 8..256 (32, 64, 80, 96, 128, 192, 256 and odd multiples of 8)', [
    8, 24, 32, 64, 80, 96, 128, 192, 256,
  ].map((D, i) => ({ Lq: 3, Lk: 5, D, Hq: 2, seed: 100 + i }))),
  matrix('GQA ratios 1, 2, 4, 7, 8 (causal)', [
    { Hq: 2, Hkv: 2 }, { Hq: 4, Hkv: 2 }, { Hq: 4, Hkv: 1 }, { Hq: 14, Hkv: 2 }, { Hq: 8, Hkv: 1 }, { Hq: 32, Hkv: 4 },
  ].map((h, i) => ({ ...h, Lq: 4, Lk: 6, D: 16, causal: true, seed: 200 + i }))),
  matrix('lengths 1, 2, 3, powers of two and odd (Lq == Lk, causal and not)', [
    [1, 1], [2, 2], [3, 3], [16, 16], [33, 33], [64, 64], [1, 17], [5, 129],
  ].flatMap(([Lq, Lk], i) => [false, true].map((causal) => ({ Lq, Lk, D: 16, Hq: 2, causal, seed: 300 + 2 * i + (causal ? 1 : 0) })))),
  matrix('odd length 777 (one head)', [{ Lq: 777, Lk: 777, D: 8, causal: true, seed: 350 }]),
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
  {
    name: 'row chunking: a small score budget gives the same result (f32 and f16 with odd Dv)',
    async run({ engine }) {
      const saved = engine.tuning.naiveScoreBytes;
      try {
        engine.tuning.naiveScoreBytes = 4 * 7 * 3;   // 3 rows of Lk 7 per chunk
        await checkSdpa(engine, { B: 2, Hq: 3, Lq: 5, Lk: 7, D: 8, causal: true, seed: 1500 }, b);
        await checkSdpa(engine, { B: 1, Hq: 3, Lq: 5, Lk: 7, D: 8, Dv: 3, dtype: 'f16', seed: 1501 }, b);
        engine.tuning.naiveScoreBytes = 4 * 6;        // below one row: a clear error
        const q = engine.tensor(randn(8, 1), [1, 1, 1, 8]);
        const k = engine.tensor(randn(56, 2), [1, 1, 7, 8]);
        let msg = '';
        try { engine.sdpa(q, k, k, { backend: b }); } catch (e) { msg = (e as Error).message; }
        assert(msg.includes('Lk=7') && msg.includes('budget'), `expected a budget error, got '${msg}'`);
      } finally {
        engine.tuning.naiveScoreBytes = saved;
      }
    },
  },
  {
    name: 'sdpa equals sdpaWithLse.out; defaults (auto) run and warn once',
    async run({ engine, newEngine }) {
      const warnings: string[] = [];
      const e2 = await newEngine({ onWarning: (m) => warnings.push(m) });
      try {
        const q = e2.tensor(randn(2 * 3 * 16, 1), [1, 2, 3, 16]);
        const k = e2.tensor(randn(2 * 5 * 16, 2), [1, 2, 5, 16]);
        const a = await e2.sdpa(q, k, k, { causal: true }).toFloat32();
        const b2 = await e2.sdpaWithLse(q, k, k, { causal: true, backend: 'naive' }).out.toFloat32();
        equalArrays('sdpa vs sdpaWithLse', a, b2);
        await e2.sdpa(q, k, k).toFloat32();
        assert(warnings.length <= 1, `expected at most one warning per reason, got ${warnings.length}: ${warnings.join(' | ')}`);
      } finally {
        e2.destroy();
      }
      void engine;
    },
  },
  {
    name: 'recorded work keeps reading its inputs after they are destroyed and their buffers reused',
    async run({ engine }) {
      const shape = [1, 2, 4, 16];
      const q = randn(128, 1), k = randn(128, 2), v = randn(128, 3);
      const tq = engine.tensor(q, shape), tk = engine.tensor(k, shape), tv = engine.tensor(v, shape);
      const out = engine.sdpa(tq, tk, tv, { backend: b });   // recorded, not submitted
      tk.destroy(); tv.destroy();
      const junk = [engine.tensor(randn(128, 9), shape), engine.tensor(randn(128, 10), shape)];
      const ref = reference.sdpaRef(q, k, v, { B: 1, Hq: 2, Hkv: 2, Lq: 4, Lk: 4, D: 16, Dv: 16 });
      assertClose('out', await out.toFloat32(), ref.out, 'f32');
      for (const t of [tq, out, ...junk]) t.destroy();
    },
  },
]);
