// The paged decode planner (planDecode) on described adapters, no GPU needed: which kernel serves a
// decode batch and with what workgroup, partition and loads in flight. The kernels themselves run in the
// GPU test pass (tests/cases/paged.cases.ts).
import { describe, expect, it } from 'vitest';
import { planDecode } from '../../src/attention/paged_decode';
import type { Runtime } from '../../src/core/runtime';
import type { EngineFeatures, EngineLimits } from '../../src/core/types';

const limits = { maxComputeWorkgroupStorageSize: 32768, maxComputeInvocationsPerWorkgroup: 256, maxComputeWorkgroupSizeX: 256 } as EngineLimits;
/** Firefox's adapter here: shader-f16, no subgroups. */
const noSubgroups = { f16: true, subgroups: false } as unknown as EngineFeatures;
const engine = (tuning: object = {}, features = noSubgroups) => ({
  features, limits,
  tuning: { pagedDecodeKernel: true, pagedDecodeWG: 256, pagedDecodeVariant: 'auto', flashSmemBytes: Infinity, ...tuning },
}) as unknown as Runtime;

/** Words of workgroup memory the portable kernel declares (paged_decode.wgsl: s_s and red). */
const words = (p: { WG: number; UK: number; PMAX: number; EPV: number }, G: number, Dv: number) =>
  G * p.PMAX + Math.max(p.WG * G * p.UK, (p.WG / (Dv / p.EPV)) * Dv);

describe('the portable decode kernel planner', () => {
  it('keeps the full workgroup and 4 loads in flight where storage allows (32 KiB)', () => {
    expect(planDecode(engine(), 128, 128, 8, 'f32')).toMatchObject({ variant: 'portable', WG: 256 });
    expect(planDecode(engine(), 64, 64, 4, 'f16')).toMatchObject({ variant: 'portable', WG: 256, UK: 4, PMAX: 512 });
  });

  it('shrinks the workgroup under an 8 KiB cap instead of giving up (8 query heads a kv head at D 128)', () => {
    for (const dt of ['f32', 'f16', 'bf16'] as const) {
      const p = planDecode(engine({ flashSmemBytes: 8192 }), 128, 128, 8, dt);
      expect(p, dt).not.toBeNull();
      expect(p!.variant).toBe('portable');
      expect(p!.WG).toBeLessThan(256);
      expect(p!.WG).toBeGreaterThanOrEqual(128);   // covers Dv: one thread per output column
      expect(p!.PMAX % ((p!.WG / (128 / p!.EPV)) * p!.UK)).toBe(0);
      expect(4 * words(p!, 8, 128)).toBeLessThanOrEqual(8192);
    }
    // fp8 rows are 8 loads wide, so the P·V sums alone (WG · 16 words at WG ≥ Dv) fill 8 KiB.
    expect(planDecode(engine({ flashSmemBytes: 8192 }), 128, 128, 8, 'fp8e4m3')).toBeNull();
  });

  it('never plans a workgroup narrower than Dv, nor one that D / EPV lanes do not divide', () => {
    // Dv 256 needs 256 threads; 8 KiB holds no partition for 16 heads then.
    expect(planDecode(engine({ flashSmemBytes: 8192 }), 256, 256, 16, 'f32')).toBeNull();
    for (const cap of [4096, 8192, 16384, 32768]) {
      for (const [D, G] of [[64, 1], [64, 8], [128, 4], [128, 16], [32, 2]]) {
        const p = planDecode(engine({ flashSmemBytes: cap }), D, D, G, 'f16');
        if (!p) continue;
        expect(p.WG).toBeGreaterThanOrEqual(D);
        expect(p.WG % (D / p.EPV)).toBe(0);
        expect(4 * words(p, G, D)).toBeLessThanOrEqual(cap);
        expect(p.PMAX).toBeGreaterThanOrEqual(64);
      }
    }
  });
});
