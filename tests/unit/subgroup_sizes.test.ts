// Subgroup sizes from 1 to 128 (a Pixel 10 reports 128; software adapters here 4 and 8): the planners
// of the kernels that fix a lane count on the host (the flash tile's TX lanes a row, the subgroup
// decode kernel's KT lanes a key row) never give a row more lanes than the smallest subgroup, keep
// whole groups in a workgroup, and fall back to the portable kernels where no subgroup grid fits. The
// kernels that read the size at run time (GEMV, RMSNorm) run at every lane count the test adapters
// have (tests/cases gemm and ops cases); no CPU adapter has subgroups wider than 32.
import { describe, expect, it } from 'vitest';
import { planDecode } from '../../src/attention/paged_decode';
import { flashVariantFor, planFlash, ROW_GRIDS } from '../../src/attention/flash';
import type { Runtime } from '../../src/core/runtime';
import type { EngineFeatures, EngineLimits } from '../../src/core/types';

const limits = { maxComputeInvocationsPerWorkgroup: 256, maxComputeWorkgroupSizeX: 256, maxComputeWorkgroupStorageSize: 49152 } as EngineLimits;   // the H200's
const features = (sg: number): EngineFeatures => ({ f16: false, subgroups: true, subgroupMinSize: sg, subgroupMaxSize: Math.max(sg, 128), timestampQuery: true } as unknown as EngineFeatures);
const engine = (sg: number, tuning: Record<string, unknown> = {}) => ({
  limits, features: features(sg),
  tuning: { pagedDecodeKernel: true, pagedDecodeWG: 256, flashSmemBytes: Infinity, pagedDecodeVariant: 'auto', flashVariant: 'auto', ...tuning },
}) as unknown as Runtime;

describe('subgroup sizes 4 to 128', () => {
  for (const sg of [4, 8, 16, 32, 64, 128]) {
    it(`sgMin ${sg}: decode rows of KT ≤ ${sg} lanes, whole groups a workgroup; flash rows of TX ≤ ${sg} lanes`, () => {
      for (const [D, dt, EPV] of [[64, 'f16', 8], [128, 'f16', 8], [128, 'f32', 4], [256, 'f32', 4], [512, 'f32', 4], [256, 'fp8e4m3', 16]] as const) {
        const p = planDecode(engine(sg), D, D, 4, dt);
        expect(p, `D ${D} ${dt}`).not.toBeNull();
        expect(p!.variant).toBe('subgroup');
        expect(p!.KT).toBe(Math.min(D / EPV, sg));
        expect(p!.WG % p!.KT).toBe(0);
        expect(p!.WG).toBeGreaterThanOrEqual(p!.KT);
      }
      for (const [D, Dv] of [[64, 64], [128, 128], [256, 256], [576, 512]]) {
        const f = planFlash(limits, features(sg), D, Dv, 'subgroup');
        expect(f, `flash D ${D}`).not.toBeNull();
        expect(f!.TX).toBeLessThanOrEqual(sg);
        const rows = planFlash(limits, features(sg), D, Dv, 'subgroup', Infinity, undefined, 'f32', { rows: 16 });
        expect(rows!.TX).toBeLessThanOrEqual(sg);
      }
      // The 32-lane row tiles (MLA decode's 16 heads) are there for adapters whose subgroups hold them.
      const wide = ROW_GRIDS.findIndex((g) => g.TX === 32 && g.TY * g.TM === 16);
      const f32 = planFlash(limits, features(sg), 576, 512, 'subgroup', Infinity, undefined, 'f32', { rows: 16, rowGrid: wide });
      if (sg >= 32) expect(f32?.TX).toBe(32); else expect(f32 === null || f32.TX < 32).toBe(true);
      expect(flashVariantFor(engine(sg))).toBe('subgroup');
    });
  }

  it('subgroups narrower than the narrowest grid (1, 2 lanes) take the portable kernels, not none', () => {
    for (const sg of [1, 2]) {
      expect(flashVariantFor(engine(sg))).toBe('portable');
      expect(planFlash(limits, features(sg), 128, 128, 'portable')).not.toBeNull();
      // planDecode: KT = min(D/EPV, sg) lanes still share a subgroup; a row of 1 lane needs no shuffle.
      const p = planDecode(engine(sg), 128, 128, 4, 'f16');
      expect(p!.KT).toBeLessThanOrEqual(sg);
    }
  });

  it('a lane cap (engine.tuning.pagedDecodeKT) never raises KT past the subgroup', () => {
    for (const sg of [4, 64, 128]) {
      const p = planDecode(engine(sg, { pagedDecodeKT: 256 }), 512, 512, 2, 'f32');
      expect(p!.KT).toBe(Math.min(128, sg));
    }
  });
});
