// Planning of the paged decode kernels (shaders/attention/paged_decode*.wgsl): which of the two kernels
// serves sequences with one new token on this adapter, and with what shape.
import { DTYPE_BYTES, type DType } from '../core/dtype.js';
import type { Runtime } from '../core/runtime.js';

export interface DecodePlan {
  /** 'subgroup': groups of KT lanes stream keys with an online softmax (paged_decode_sg.wgsl);
   *  'portable': partial dots meet in workgroup memory, scores held there (paged_decode.wgsl). */
  variant: 'subgroup' | 'portable';
  /** Elements per 16-byte load of the cache dtype. */
  EPV: number;
  WG: number;
  /** Key rows per thread (portable) or per group (subgroup) per step: loads in flight. */
  UK: number;
  /** Lanes that share a key row (subgroup variant; the portable kernel uses D / EPV). */
  KT: number;
  /** Groups of KT lanes that read the same key rows, each for G / HS of the query heads (subgroup variant; 1 otherwise). */
  HS: number;
  /** Keys of one partition the kernel can hold (the portable kernel keeps scores in workgroup memory). */
  PMAX: number;
}

/**
 * The decode kernels serve sequences with one new token when a cache row splits into a power-of-two
 * number of 16-byte loads. The subgroup kernel needs the adapter's subgroups (KT lanes of a row within
 * its smallest subgroup) and takes partitions of any length; the portable one needs a workgroup that
 * covers Dv and partitions that fit workgroup memory. `split`: the cache is split across buffers (the
 * subgroup kernel then lists each part's blocks in workgroup memory, two words a thread).
 */
export function planDecode(engine: Runtime, D: number, Dv: number, G: number, kvDtype: DType, split = false): DecodePlan | null {
  const t = engine.tuning;
  if (!t.pagedDecodeKernel) return null;
  const EPV = 16 / DTYPE_BYTES[kvDtype];
  const WG = Math.min(t.pagedDecodeWG, 256, engine.limits.maxComputeInvocationsPerWorkgroup, engine.limits.maxComputeWorkgroupSizeX);
  const pow2 = (x: number) => Number.isInteger(x) && x >= 1 && (x & (x - 1)) === 0;
  if (D % EPV || Dv % EPV || !pow2(D / EPV) || !pow2(Dv / EPV) || G > 16) return null;
  const budget = Math.min(engine.limits.maxComputeWorkgroupStorageSize, t.flashSmemBytes) / 4;
  const sgMin = engine.features.subgroupMinSize;
  if (t.pagedDecodeVariant !== 'portable' && engine.features.subgroups && sgMin && pow2(sgMin)) {
    const KT = Math.min(D / EPV, Dv / EPV, sgMin, t.pagedDecodeKT ?? Infinity);
    // Registers: the accumulators grow with G, so fewer keys in flight for wide groups.
    const UK = t.pagedDecodeUK ?? (G <= 4 ? 4 : G <= 8 ? 2 : 1);
    // Heads a group serves: G / HS (HS divides G and the groups of a workgroup).
    const hsWant = t.pagedDecodeHeadSplit ?? 1;
    // Workgroup memory: the group states merged at the end (max and sum per head, one Dv row per group),
    // and over a split cache the block list and its scan.
    const words = (wg: number) => (wg / KT) * (2 * G + Dv) + (split ? 2 * wg + 1 : 0);
    let wg = WG;
    while (wg > KT && words(wg) > budget) wg /= 2;
    let HS = Math.max(1, Math.min(hsWant, G));
    while (HS > 1 && (G % HS || (wg / KT) % HS)) HS--;
    if (pow2(KT) && wg >= KT && words(wg) <= budget) return { variant: 'subgroup', EPV, WG: wg, UK, KT, HS, PMAX: Infinity };
  }
  if (t.pagedDecodeVariant === 'subgroup') return null;
  // The portable kernel's last phase gives each output column a thread: the workgroup must cover Dv.
  // Loads in flight (UK) first, then the longest partition, within the workgroup storage. UK 4 and 2
  // measured best on an H200 (bench/notes/paged.md); 8 costs occupancy (-15% at batch 16). Where even
  // UK 1 leaves no room for scores (8 query heads a kv head at D 128 in 8 KiB), a smaller workgroup
  // shrinks the reduction buffer (WG·G·UK words) until the scores fit, as long as it still covers Dv.
  for (let wg = WG; wg >= D / EPV && wg >= Dv; wg /= 2) {
    const KPV = wg / (Dv / EPV);
    const KPI = wg / (D / EPV);
    for (const UK of t.pagedDecodeUK ? [t.pagedDecodeUK] : [4, 2, 1]) {
      const red = Math.max(wg * G * UK, KPV * Dv);
      let PMAX = Math.min(512, Math.floor((budget - red) / G / 64) * 64);
      PMAX -= PMAX % (KPI * UK);
      if (PMAX >= 128 || (UK === 1 && PMAX >= 64)) return { variant: 'portable', EPV, WG: wg, UK, KT: D / EPV, HS: 1, PMAX };
    }
    if (!pow2(wg)) break;
  }
  return null;
}

