// The subgroup-matrix GEMM's tile choice (planLinear / planMma), on a description of the H200's adapter
// (no GPU needed: the planner reads features, limits and tuning alone).
import { describe, expect, it } from 'vitest';
import { decodeSplitK, gemmMmaSmemBytes, LINEAR_GEMM_TARGET_WORKGROUPS, LINEAR_MMA_DECODE_MIN_WORKGROUPS, LINEAR_MMA_DECODE_TARGET_WORKGROUPS, LINEAR_MMA_DECODE_TILES, LINEAR_MMA_TARGET_WORKGROUPS, LINEAR_MMA_TILES, planLinear, type GemmMmaPlan } from '../../src/ops/gemm';
import { planMoe } from '../../src/ops/moe';
import type { Runtime } from '../../src/core/runtime';

const h200 = {
  features: {
    f16: true, subgroups: true, subgroupMinSize: 32, subgroupMaxSize: 32,
    subgroupMatrix: [{ componentType: 'f16', resultComponentType: 'f32', M: 16, N: 16, K: 16 }, { componentType: 'f16', resultComponentType: 'f32', M: 16, N: 8, K: 16 }],
  },
  limits: { maxComputeWorkgroupStorageSize: 49152, maxComputeInvocationsPerWorkgroup: 1024, maxComputeWorkgroupSizeX: 1024, maxStorageBufferBindingSize: 2 ** 31, maxBufferSize: 2 ** 31 },
  tuning: { linearMma: 'auto', linearMmaSplit: true, linearMmaTile: undefined, linearMmaProbe: 0, linearDecodeMma: 'auto', linearDecodeMmaMinM: 4, quantDecodeMmaMinM: 3, linearDecodeMmaTile: undefined, linearDecodeSplitK: 'auto' },
} as unknown as Runtime;
const withTuning = (t: object) => ({ ...h200, tuning: { ...h200.tuning, ...t } }) as unknown as Runtime;

const mma = (M: number, N: number, split = true) => {
  const p = planLinear(h200, { M, N, K: 4096, dtype: 'bf16', split });
  expect(p.kernel).toBe('gemm-mma');
  return p as GemmMmaPlan;
};
const grid = (p: GemmMmaPlan, M: number, N: number) => Math.ceil(M / p.BM) * Math.ceil(N / p.BN);

describe('the subgroup-matrix GEMM planner', () => {
  it('takes the 128×256 tile where it gives enough workgroups (Llama-3-8B layers from M 512 at N 6144, every layer from M 2048)', () => {
    for (const [M, N] of [[512, 6144], [512, 28672], [2048, 4096], [4096, 14336]]) {
      for (const split of [true, false]) {
        const p = mma(M, N, split);
        expect([p.BM, p.BN, p.VEC], `M ${M} N ${N} split ${split}`).toEqual([128, 256, true]);
        expect(grid(p, M, N)).toBeGreaterThanOrEqual(LINEAR_MMA_TARGET_WORKGROUPS);
      }
    }
  });

  it('takes the 128×128 tiles where 128×256 leaves the GPU half idle (M 512, N 4096): BK 64 for f16 x, BK 32 for split (BK 64 does not fit its two x tiles)', () => {
    const f16x = mma(512, 4096, false), split = mma(512, 4096, true);
    expect([f16x.BM, f16x.BN, f16x.BK, f16x.VEC]).toEqual([128, 128, 64, true]);
    expect([split.BM, split.BN, split.BK, split.VEC]).toEqual([128, 128, 32, true]);
    expect(split.smem).toBeLessThanOrEqual(49152);
    expect(LINEAR_MMA_TILES.indexOf(LINEAR_MMA_TILES.find((t) => t.VEC && t.TMR === 4 && t.TNC === 2 && t.BK === 32)!)).toBe(2);
  });

  it('falls back to the smallest tile where none reaches the target (few rows)', () => {
    const p = planLinear(h200, { M: 64, N: 1024, K: 4096, dtype: 'bf16', kernel: 'gemm-mma' }) as GemmMmaPlan;
    expect(grid(p, 64, 1024)).toBeLessThan(LINEAR_MMA_TARGET_WORKGROUPS);
    expect(p.BM * p.BN).toBe(64 * 64);
  });

  it('keeps MoE on its own target (LINEAR_GEMM_TARGET_WORKGROUPS): the 64×256 tile once the pairs fill it, 64×64 before', () => {
    const big = planMoe(h200, { rows: 2048, topK: 6, E: 64, H: 2048, I: 1408, dtype: 'bf16' });
    expect(big.kernel === 'gemm-mma' && [big.BM, big.BN]).toEqual([64, 256]);
    const small = planMoe(h200, { rows: 128, topK: 6, E: 64, H: 2048, I: 1408, dtype: 'bf16' });
    expect(small.kernel === 'gemm-mma' && [small.BM, small.BN]).toEqual([64, 64]);
    expect(Math.ceil(768 / 64) * Math.ceil(2048 / 256)).toBeLessThan(LINEAR_GEMM_TARGET_WORKGROUPS);
  });
});

describe('decode-sized steps on the subgroup-matrix GEMM (LINEAR_MMA_DECODE_TILES)', () => {
  // Llama-3.2-1B's linear layers: qkv, o, gate|up, down, lm_head.
  const layers = [[3072, 2048], [2048, 2048], [16384, 2048], [2048, 8192], [128256, 2048]];

  it('keeps the GEMV below 4 rows (3 for quantized weights) and takes the matrix GEMM from there at every layer of Llama-3.2-1B (split-K fills the grid)', () => {
    for (const [N, K] of layers) {
      for (const M of [1, 2, 3]) expect(planLinear(h200, { M, N, K, dtype: 'bf16' }).kernel, `M ${M} N ${N}`).toBe('gemv');
      for (const M of [1, 2]) expect(planLinear(h200, { M, N, K, dtype: 'Q4_K' }).kernel, `Q4_K M ${M} N ${N}`).toBe('gemv');
      for (const M of [3, 8]) expect(planLinear(h200, { M, N, K, dtype: 'Q4_K' }).kernel, `Q4_K M ${M} N ${N}`).toBe('gemm-mma');
      for (const M of [4, 7, 8, 15, 16, 17, 32, 33, 64]) {
        const p = planLinear(h200, { M, N, K, dtype: 'bf16' }) as GemmMmaPlan;
        expect(p.kernel, `M ${M} N ${N}`).toBe('gemm-mma');
        expect(Math.ceil(M / p.BM) * Math.ceil(N / p.BN) * p.KS).toBeGreaterThanOrEqual(LINEAR_MMA_DECODE_MIN_WORKGROUPS);
      }
    }
    // Past 64 rows the prefill tiles take over.
    expect((planLinear(h200, { M: 65, N: 2048, K: 2048, dtype: 'bf16' }) as GemmMmaPlan).BM).toBeGreaterThanOrEqual(64);
  });

  it('keeps quantized weights off the matrices while a step verifies speculative proposals (Runtime.exactProducts), 16-bit weights not', () => {
    const exact = { ...h200, exactProducts: true } as unknown as Runtime;
    for (const M of [3, 8, 64, 65]) expect(planLinear(exact, { M, N: 8192, K: 2048, dtype: 'Q4_K' }).kernel, `Q4_K M ${M}`).toBe(M <= 64 ? 'gemv' : 'gemm');
    expect(planLinear(h200, { M: 65, N: 8192, K: 2048, dtype: 'Q4_K' }).kernel).toBe('gemm-mma');
    expect(planLinear(exact, { M: 8, N: 8192, K: 2048, dtype: 'bf16' }).kernel).toBe('gemm-mma');
  });

  it('gives a verifying step\'s quantized rows the lanes a row one row would take (KT orders its sums), whatever their number; rowsEach by the tuning (\'auto\': from 4 rows a workgroup of a verifying step)', () => {
    const exact = { ...h200, exactProducts: true } as unknown as Runtime;
    for (const dtype of ['Q4_K', 'Q6_K', 'Q8_0', 'Q4_0'] as const) {
      for (const [N, K] of [[4096, 4096], [28672, 4096], [4096, 14336], [128256, 4096], [1024, 4096], [512, 2048], [64, 256]]) {
        const one = planLinear(exact, { M: 1, N, K, dtype });
        for (const M of [2, 3, 4, 5, 8, 9, 16, 64]) {
          const p = planLinear(exact, { M, N, K, dtype });
          expect(p.kernel === 'gemv' && one.kernel === 'gemv' && [p.KT, p.R, p.WG, p.variant], `${dtype} ${N}x${K} M ${M}`).toEqual([one.kernel === 'gemv' && one.KT, 4, 256, 'subgroup']);
        }
      }
    }
    const each = { ...h200, exactProducts: true, tuning: { ...h200.tuning, quantGemvRowsEach: true } } as unknown as Runtime;
    const auto = { ...h200, exactProducts: true, tuning: { ...h200.tuning, quantGemvRowsEach: 'auto' } } as unknown as Runtime;
    const flag = (rt: Runtime, M: number, o: object = {}) => { const p = planLinear(rt, { M, N: 4096, K: 4096, dtype: 'Q4_K', ...o }); return p.kernel === 'gemv' && p.rowsEach === true; };
    expect([flag(each, 1), flag(each, 2), flag(each, 4), flag(each, 9)]).toEqual([false, true, true, true]);
    expect([flag(auto, 1), flag(auto, 2), flag(auto, 4), flag(auto, 9)]).toEqual([false, false, true, true]);
    const plainAuto = { ...h200, tuning: { ...h200.tuning, quantGemvRowsEach: 'auto' } } as unknown as Runtime;
    expect(flag(plainAuto, 4, { kernel: 'gemv' })).toBe(false);
    expect([flag(exact, 4), flag(exact, 4, { rowsEach: true }), flag(each, 4, { rowsEach: false }), flag(each, 4, { quantPath: 'decode' })]).toEqual([false, true, false, false]);
    expect(() => planLinear(exact, { M: 4, N: 64, K: 256, dtype: 'Q4_K', quantPath: 'decode', rowsEach: true })).toThrow(/rowsEach.*dot path/);
    expect(() => planLinear(exact, { M: 4, N: 64, K: 256, dtype: 'bf16', kernel: 'gemv', rowsEach: true })).toThrow(/rowsEach/);
  });

  it('takes 16-row tiles of vec4 staging, and taller ones where they need fewer row tiles and still fill 256 workgroups (run 103)', () => {
    const tile = (M: number, N: number) => planLinear(h200, { M, N, K: 2048, dtype: 'bf16' }) as GemmMmaPlan;
    for (const M of [8, 16, 32, 64]) expect([tile(M, 3072).BM, tile(M, 3072).BN, tile(M, 3072).VEC], `qkv M ${M}`).toEqual([16, 64, true]);
    for (const M of [16, 64]) expect(tile(M, 2048).BM, `o M ${M}`).toBe(16);
    expect([tile(16, 16384).BM, tile(17, 16384).BM, tile(32, 16384).BM, tile(33, 16384).BM, tile(64, 16384).BM]).toEqual([16, 32, 32, 64, 64]);
    expect(Math.ceil(64 / tile(64, 16384).BM) * Math.ceil(16384 / tile(64, 16384).BN)).toBeGreaterThanOrEqual(LINEAR_MMA_DECODE_TARGET_WORKGROUPS);
  });

  it('keeps the GEMV where the grid would leave the GPU idle below 16 rows, for f32 weights, and when turned off', () => {
    expect(planLinear(h200, { M: 8, N: 256, K: 2048, dtype: 'bf16' }).kernel).toBe('gemv');
    expect(planLinear(h200, { M: 32, N: 16384, K: 2048, dtype: 'f32' }).kernel).toBe('gemv');
    expect(planLinear(withTuning({ linearDecodeMma: 'off' }), { M: 32, N: 16384, K: 2048, dtype: 'bf16' }).kernel).toBe('gemv');
    expect(planLinear(withTuning({ linearMma: 'off' }), { M: 32, N: 16384, K: 2048, dtype: 'bf16' }).kernel).toBe('gemv');
    expect(planLinear(withTuning({ linearDecodeMmaMinM: 33 }), { M: 32, N: 16384, K: 2048, dtype: 'bf16' }).kernel).toBe('gemv');
  });

  it('fits every decode tile in 32 KiB (Apple) with x split, and a forced tile is the one asked for', () => {
    for (const [ti, t] of LINEAR_MMA_DECODE_TILES.entries()) {
      expect(gemmMmaSmemBytes(16, 16, t, true), `tile ${ti}`).toBeLessThanOrEqual(32768);
      const p = planLinear(h200, { M: 20, N: 4096, K: 2048, dtype: 'bf16', kernel: 'gemm-mma', decodeTiles: true, tile: ti }) as GemmMmaPlan;
      expect([p.SGR, p.SGC, p.TMR, p.TNC, p.BK, p.PF, p.VEC]).toEqual([t.SGR, t.SGC, t.TMR, t.TNC, t.BK, t.PF, !!t.VEC]);
      expect(planLinear(withTuning({ linearDecodeMmaTile: ti }), { M: 20, N: 4096, K: 2048, dtype: 'bf16' })).toEqual(p);
    }
    expect(() => planLinear(h200, { M: 20, N: 4096, K: 2048, dtype: 'bf16', kernel: 'gemm-mma', decodeTiles: true, tile: 99 })).toThrow(/LINEAR_MMA_DECODE_TILES/);
  });

  it('splits K where the grid is short of 256 workgroups and each split keeps 4 k tiles (o and down at N 2048), not gate|up', () => {
    const ks = (M: number, N: number, K: number) => (planLinear(h200, { M, N, K, dtype: 'bf16' }) as GemmMmaPlan).KS;
    expect(ks(16, 2048, 8192)).toBe(8);    // down: 32 workgroups of 16×64, 128 k tiles
    expect(ks(16, 2048, 2048)).toBe(8);    // o: 32 workgroups, 32 k tiles of 64: 4 a split
    expect(ks(16, 3072, 2048)).toBe(4);    // qkv: 48 workgroups
    expect(ks(16, 16384, 2048)).toBe(1);   // gate|up: 256 already
    expect(ks(64, 2048, 8192)).toBe(2);    // 4 row tiles: 128 workgroups
    for (const [M, N, K] of [[16, 2048, 8192], [32, 3072, 2048], [64, 2048, 2048]]) {
      const p = planLinear(h200, { M, N, K, dtype: 'bf16' }) as GemmMmaPlan;
      expect(Math.ceil(M / p.BM) * Math.ceil(N / p.BN) * p.KS).toBeLessThanOrEqual(LINEAR_MMA_DECODE_TARGET_WORKGROUPS);
      expect(Math.ceil(K / p.BK) / p.KS).toBeGreaterThanOrEqual(4);
      expect(decodeSplitK(M, N, K, p)).toBe(p.KS);
    }
    expect((planLinear(withTuning({ linearDecodeSplitK: 1 }), { M: 16, N: 2048, K: 8192, dtype: 'bf16' }) as GemmMmaPlan).KS).toBe(1);
    expect((planLinear(h200, { M: 16, N: 2048, K: 8192, dtype: 'bf16', kernel: 'gemm-mma', decodeTiles: true, kSplit: 3 }) as GemmMmaPlan).KS).toBe(3);
    expect(() => planLinear(h200, { M: 16, N: 2048, K: 8192, dtype: 'bf16', kernel: 'gemm-mma', decodeTiles: true, kSplit: 0 })).toThrow(/kSplit/);
    // Prefill tiles never split.
    expect((planLinear(h200, { M: 512, N: 2048, K: 8192, dtype: 'bf16' }) as GemmMmaPlan).KS).toBe(1);
  });
});
