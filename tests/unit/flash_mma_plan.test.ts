// The dense flash tile on subgroup matrices: which data and calls take it (flashMmaFor) and what the
// split tile for f32 data (hi + lo f16 halves) costs in workgroup storage, on a description of the
// H200's adapter, no GPU needed. The kernels run in the GPU test pass (tests/cases/sdpa_flash.cases.ts).
import { describe, expect, it } from 'vitest';
import { flashMmaFor, flashMmaSmemBytes, planFlashMma } from '../../src/attention/flash';
import type { Runtime } from '../../src/core/runtime';
import type { EngineFeatures, EngineLimits } from '../../src/core/types';

const matrices = (...c: [number, number, number][]) => c.map(([M, N, K]) => ({ componentType: 'f16', resultComponentType: 'f32', M, N, K }));
const h200Features = { f16: true, subgroups: true, subgroupMinSize: 32, subgroupMaxSize: 32, subgroupMatrix: matrices([16, 16, 16], [16, 8, 16], [16, 8, 8]) } as unknown as EngineFeatures;
const limits = { maxComputeWorkgroupStorageSize: 49152, maxComputeInvocationsPerWorkgroup: 1024, maxComputeWorkgroupSizeX: 1024 } as EngineLimits;
const engine = (tuning: object = {}) => ({
  features: h200Features, limits,
  tuning: { flashVariant: 'auto', flashMmaSplit: true, flashSmemBytes: Infinity, flashMmaConfig: undefined, flashMmaShape: undefined, ...tuning },
}) as unknown as Runtime;

describe('the subgroup-matrix flash tile planner', () => {
  it('takes f16 data, and f32 data split into halves only where the call returns no LSE', () => {
    expect(flashMmaFor(engine(), 'f16', 64, 64, true)).toMatchObject({ split: false, NSG: 4, BC: 32 });
    expect(flashMmaFor(engine(), 'f32', 64, 64)).toMatchObject({ split: true, NSG: 4, BC: 32 });
    expect(flashMmaFor(engine(), 'f32', 64, 64, true)).toBeNull();
    expect(flashMmaFor(engine({ flashMmaSplit: false }), 'f32', 64, 64)).toBeNull();
    expect(flashMmaFor(engine({ flashVariant: 'subgroup' }), 'f32', 64, 64)).toBeNull();
    expect(flashMmaFor(engine(), 'bf16', 64, 64)).toBeNull();
  });

  it('sizes the split tile as the kernel declares it: hi and lo copies of Q/K/V and P', () => {
    // flash_mma_core.wgsl at 4 subgroups × 32 keys, D = Dv = 64: kv_s 2 × max(64 rows, 32 × 2 rows) of
    // 72 f16, s_s 64 × 36 f32, p_s 2 × 64 × 40 f16, alpha_s 64 f32, moved_s 4 u32.
    expect(flashMmaSmemBytes(16, 16, 16, 4, 32, 64, 64, 1, true)).toBe(2 * 2 * 64 * 72 + 4 * 64 * 36 + 2 * 2 * 64 * 40 + 4 * 64 + 4 * 4);
    expect(flashMmaSmemBytes(16, 16, 16, 4, 32, 64, 64, 1, false)).toBe(2 * 64 * 72 + 4 * 64 * 36 + 2 * 64 * 40 + 4 * 64 + 4 * 4);
  });

  it('fits the split tile in 48 KiB up to head size 128, and falls back past it', () => {
    for (const D of [8, 64, 96, 128]) {
      const p = planFlashMma(limits, h200Features, D, D, Infinity, undefined, undefined, true);
      expect(p, `D ${D}`).not.toBeNull();
      expect(p!.smem).toBeLessThanOrEqual(49152);
    }
    for (const D of [192, 256]) expect(planFlashMma(limits, h200Features, D, D, Infinity, undefined, undefined, true), `D ${D}`).toBeNull();
    expect(planFlashMma(limits, h200Features, 256, 256)).not.toBeNull();   // f16 data still fits
  });
});
