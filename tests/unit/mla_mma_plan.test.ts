// MLA decode's subgroup-matrix tile: the planner's choice (planMlaMma / mlaMmaFor) on a description of
// the H200's adapter and of an Apple GPU's (8×8 simdgroup matrices), no GPU needed: the planner reads
// features, limits and tuning alone. The kernel itself runs in the GPU test pass (tests/cases/mla.cases.ts).
import { describe, expect, it } from 'vitest';
import { DECODE_MMA_SHAPES, decodeMmaFor, MLA_MMA_SHAPES, mlaMmaFor, mlaMmaSmemBytes, planMlaMma } from '../../src/attention/plan';
import type { Runtime } from '../../src/core/runtime';
import type { EngineFeatures, EngineLimits } from '../../src/core/types';

const matrices = (...c: [number, number, number][]) => c.map(([M, N, K]) => ({ componentType: 'f16', resultComponentType: 'f32', M, N, K }));
const h200Features = { f16: true, subgroups: true, subgroupMinSize: 32, subgroupMaxSize: 32, subgroupMatrix: matrices([16, 16, 16], [16, 8, 16], [16, 8, 8]) } as unknown as EngineFeatures;
const limits = { maxComputeWorkgroupStorageSize: 49152, maxComputeInvocationsPerWorkgroup: 1024, maxComputeWorkgroupSizeX: 1024 } as EngineLimits;
const engine = (tuning: object = {}) => ({
  features: h200Features, limits,
  tuning: { mlaDecodeTile: 'auto', flashSmemBytes: Infinity, flashMmaConfig: undefined, mlaMmaShape: undefined, ...tuning },
}) as unknown as Runtime;

describe("MLA decode's subgroup-matrix tile planner", () => {
  it('takes 32-head tiles for 32 heads or more and 16-head tiles below (DeepSeek rows: D 576, Dv 512)', () => {
    for (const N of [32, 40, 128]) expect(mlaMmaFor(engine(), 576, 512, N)).toMatchObject({ M: 16, N: 16, K: 16, NSG: 8, DSPLIT: 8, RB: 2, BC: 16, BR: 32 });
    for (const N of [1, 16, 31]) expect(mlaMmaFor(engine(), 576, 512, N)).toMatchObject({ NSG: 8, DSPLIT: 4, RB: 1, BC: 32, BR: 16 });
  });

  it('fits every shape in 48 KiB at DeepSeek rows, and sizes the storage as the kernel declares it', () => {
    for (const [si, s] of MLA_MMA_SHAPES.entries()) {
      const p = planMlaMma(limits, h200Features, 576, 512, 128, Infinity, 0, si);
      expect(p, `shape ${si}`).not.toBeNull();
      expect(p!.smem).toBeLessThanOrEqual(49152);
      expect([p!.NSG, p!.DSPLIT, p!.RB, p!.BC]).toEqual([s.NSG, s.DSPLIT, s.RB, s.BC]);
    }
    // mla_mma_core.wgsl at 8 subgroups, 4 D slices, 16 heads, 32 keys: kv_s 32 rows of 584 f16, s_part
    // 4 × 16 × 36 f32, p_s 16 × 40 f16, alpha_s 16 f32, moved_s 8 u32.
    expect(mlaMmaSmemBytes(16, 16, 16, 8, 1, 32, 4, 576)).toBe(2 * 32 * 584 + 4 * 4 * 16 * 36 + 2 * 16 * 40 + 4 * 16 + 4 * 8);
  });

  it('pads D to whole slices (144-wide rows: 9 k-steps over 4 slices)', () => {
    const p = planMlaMma(limits, h200Features, 144, 128, 16, Infinity, 0, 1)!;
    expect(p.smem).toBe(mlaMmaSmemBytes(16, 16, 16, 8, 1, 32, 4, 144));
    expect(mlaMmaSmemBytes(16, 16, 16, 8, 1, 32, 4, 144)).toBe(2 * 32 * (192 + 8) + 4 * Math.max(4 * 16 * 36, 8 * 256) + 2 * 16 * 40 + 64 + 32);
  });

  it("plans Apple's 8×8×8 simdgroup matrices (32-wide subgroups, 32 KiB of workgroup storage)", () => {
    const apple = { f16: true, subgroups: true, subgroupMinSize: 32, subgroupMaxSize: 32, subgroupMatrix: matrices([8, 8, 8]) } as unknown as EngineFeatures;
    const p = planMlaMma({ ...limits, maxComputeWorkgroupStorageSize: 32768 }, apple, 576, 512, 16);
    expect(p).not.toBeNull();
    expect([p!.M, p!.N, p!.K]).toEqual([8, 8, 8]);
    expect(p!.smem).toBeLessThanOrEqual(32768);
  });

  it('plans nothing without f16 subgroup matrices, with subgroups of several sizes, or where the tuning says otherwise', () => {
    expect(planMlaMma(limits, { ...h200Features, subgroupMatrix: [] }, 576, 512, 16)).toBeNull();
    expect(planMlaMma(limits, { ...h200Features, f16: false }, 576, 512, 16)).toBeNull();
    expect(planMlaMma(limits, { ...h200Features, subgroupMinSize: 16 }, 576, 512, 16)).toBeNull();
    expect(mlaMmaFor(engine({ mlaDecodeTile: 'mla' }), 576, 512, 16)).toBeNull();
    expect(mlaMmaFor(engine({ flashSmemBytes: 8192 }), 576, 512, 16)).toBeNull();
    expect(mlaMmaFor(engine({ mlaMmaShape: 3 }), 576, 512, 128)).toMatchObject({ NSG: 4, DSPLIT: 4, RB: 1, BC: 32 });
  });

  it("plans GQA decode on the same tile (V staged after K): the measured shape first, every G up to a row block, the tuning's holds", () => {
    const t = (o: object = {}) => engine({ pagedDecodeKernel: true, pagedDecodeVariant: 'auto', pagedDecodeMmaShape: undefined, ...o });
    for (const G of [1, 4, 8, 16]) expect(decodeMmaFor(t(), 128, 128, G)).toMatchObject({ M: 16, N: 16, K: 16, NSG: 4, DSPLIT: 2, RB: 1, BC: 32, BR: 16 });
    expect(decodeMmaFor(t(), 128, 128, 17)).toBeNull();
    // kv_s: the key tile 32 × (128 + 8) f16, then the value tile 32 × (128 + 8); s_part 2 × 16 × 36 f32.
    expect(decodeMmaFor(t(), 128, 128, 4)!.smem).toBe(2 * 32 * (136 + 136) + 4 * Math.max(2 * 16 * 36, 4 * 256) + 2 * 16 * 40 + 64 + 16);
    // Dv padded to every subgroup's result matrices (4 × 16): Dv 40 stages 64 + 8 columns.
    expect(mlaMmaSmemBytes(16, 16, 16, 4, 1, 32, 2, 64, 40)).toBe(2 * 32 * (72 + 72) + 4 * Math.max(2 * 16 * 36, 4 * 256) + 2 * 16 * 40 + 64 + 16);
    for (const [si, s] of DECODE_MMA_SHAPES.entries()) {
      const p = planMlaMma(limits, h200Features, 128, 128, 4, Infinity, 0, si, true);
      expect(p, `shape ${si}`).not.toBeNull();
      expect([p!.NSG, p!.DSPLIT, p!.RB, p!.BC]).toEqual([s.NSG, s.DSPLIT, s.RB, s.BC]);
    }
    expect(decodeMmaFor(t({ pagedDecodeMmaShape: 1 }), 128, 128, 4)).toMatchObject({ NSG: 8, DSPLIT: 2, BC: 64 });
    expect(decodeMmaFor(t({ pagedDecodeVariant: 'subgroup' }), 128, 128, 4)).toBeNull();
    expect(decodeMmaFor(t({ pagedDecodeVariant: 'portable' }), 128, 128, 4)).toBeNull();
    expect(decodeMmaFor(t({ pagedDecodeKernel: false }), 128, 128, 4)).toBeNull();
    expect(decodeMmaFor(t({ pagedDecodeVariant: 'subgroup-matrix' }), 128, 128, 4)).not.toBeNull();
  });
});
