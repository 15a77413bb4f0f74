// Plan once per step, run per layer (API.md "A serving step"; FlashInfer's plan/run split). A plan
// validates a batch's metadata once, partitions the work once and uploads it once; every run then
// records its kernels against any K/V source of the same geometry (each layer's cache) with nothing
// allocated, nothing uploaded and every bind group found in the runtime's cache.
//
// The plan buffer (i32 words), shared by the host planner below and the GPU planner
// (shaders/attention/plan.wgsl), which produce the same words from the same metadata:
//   header [8]: flash items, decode items, largest partition count, any partition, 0...
//   qsl [S+1] | seqLens [S] | blockTable [S, maxB] | tok_np [T] | flash items | decode items
// A work item is ITEM_WORDS words: sequence, kv head, row tile, partition, first key, end key,
// partial (its state goes to the workspace for the merge), 0. tok_np[t] is the partition count of
// token t's sequence when above 1 (the merge combines those tokens' states), else 0.
//
// Partitioning rules (both planners): a sequence with one new token goes to the decode kernel where
// one applies; the others take row tiles of the flash kernel (BR rows of G·qLen). If the batch's work
// items (base) are fewer than engine.tuning.pagedTargetWorkgroups, every sequence's keys are split into
// `want` partitions (whole 64-key tiles, none shorter than the minimum partition, no more than the
// workspace holds: pCap), computed in parallel and merged by LSE (FlashDecoding). The portable decode
// kernel holds at most PMAX keys of a partition, which may force more partitions; a sequence that
// would then need more than the workspace holds goes to the flash kernel instead.
import { DTYPE_CODE, type DType } from '../core/dtype.js';
import { WebinferError, check, fmt, shapeStr } from '../core/errors.js';
import type { Kernel } from '../core/pipeline.js';
import { mmaTileConfigs, type Runtime } from '../core/runtime.js';
import type { EngineFeatures, EngineLimits } from '../core/types.js';
import { checkTensor, type Tensor } from '../core/tensor.js';
import { FLAG_MASK_BOOL, FLAG_SPLIT, sdpaFlags, type AttnOptionValues } from './common.js';
import { flashMmaFor, flashMmaKernel, flashVariantFor, planFlash } from './flash.js';
import { planDecode, type DecodePlan } from './paged_decode.js';

export const HDR_WORDS = 8;
export const ITEM_WORDS = 8;
const MERGE_WG = 64;

/** Storage code of a K/V source's rows (dtype.wgsl's codes; 4: FlashMLA's fp8_ds_mla rows). */
const KV_CODE: Readonly<Record<string, number>> = { ...DTYPE_CODE, fp8_ds_mla: 4 };

/** What every K/V source a plan runs against shares: a layer's cache may be swapped for another
 *  layer's only when all of this matches. */
export interface KVGeometry {
  Hkv: number; D: number; Dv: number; blockSize: number; numBlocks: number;
  /** Storage of the rows: a cache dtype, or 'fp8_ds_mla' (FlashMLA's 656-byte rows, in `key`). */
  dtype: DType | 'fp8_ds_mla';
  /** Elements between rows of K and of V (D and Dv for K/V caches; L+R for both in a latent cache). */
  kStride: number; vStride: number;
  /** fp8_ds_mla: the latent width and the row length in 4-byte words (0 otherwise). */
  mlaL: number; mlaRowWords: number;
  /** Buffers the source is split across (1: one), whole blocks each. */
  parts: number;
}

/** One buffer of a K/V source: its K and V (one tensor twice for latent rows) and its scales buffer
 *  ([k, v] f32, then [first block, end block, part index] u32: paged_cache.ts CachePart). */
export interface KVPart { key: Tensor; value: Tensor; scales: GPUBuffer }

/** One K/V source: its buffers (one part unless split across buffers) and its geometry. */
export interface KVSource { parts: readonly KVPart[]; geo: KVGeometry }

/** A K/V source of one buffer pair whose scales buffer holds the per-tensor scales. */
export function wholeSource(key: Tensor, value: Tensor, scales: GPUBuffer, geo: Omit<KVGeometry, 'parts'>): KVSource {
  return { parts: [{ key, value, scales }], geo: { ...geo, parts: 1 } };
}

export function geometryString(g: KVGeometry): string {
  return `numBlocks ${g.numBlocks}, blockSize ${g.blockSize}, Hkv ${g.Hkv}, D ${g.D}, Dv ${g.Dv}, ${g.dtype}${g.parts > 1 ? `, ${g.parts} buffers` : ''}`;
}

export function sameGeometry(a: KVGeometry, b: KVGeometry): boolean {
  return a.Hkv === b.Hkv && a.D === b.D && a.Dv === b.Dv && a.blockSize === b.blockSize && a.numBlocks === b.numBlocks
    && a.dtype === b.dtype && a.kStride === b.kStride && a.vStride === b.vStride && a.mlaL === b.mlaL && a.mlaRowWords === b.mlaRowWords
    && a.parts === b.parts;
}

export interface HostMeta { kind: 'host'; S: number; maxB: number; qsl: Int32Array; seqLens: Int32Array; blockTable: Int32Array }
export interface DeviceMeta { kind: 'device'; S: number; maxB: number; qsl: Tensor | null; seqLens: Tensor; blockTable: Tensor }

/** The batch-level inputs of the partitioning rules (the GPU planner's uniforms). */
export interface PlanRules {
  T: number; S: number; maxB: number; bs: number; Hkv: number; G: number;
  /** Rows of a flash row tile. */
  BR: number;
  decodeOk: boolean;
  /** Longest partition the decode kernel holds (0: any). */
  pmax: number;
  target: number; minPart: number; pCap: number;
  /** The source is split across buffers: every token's state is merged (tok_np at least 1). */
  split: boolean;
}

interface SeqPlan { q0: number; qlen: number; seqlen: number; dec: boolean; rt: number; np: number; plen: number }

const ceilDiv = (a: number, b: number) => Math.floor((a + b - 1) / b);
const partLen = (seqlen: number, want: number) => ceilDiv(ceilDiv(Math.max(seqlen, 1), want), 64) * 64;

function seqBasic(r: PlanRules, qsl: ArrayLike<number>, seqLens: ArrayLike<number>, s: number): SeqPlan {
  const clamp = (x: number, lo: number, hi: number) => Math.min(Math.max(x, lo), hi);
  const a = clamp(qsl[s], 0, r.T);
  const b = clamp(qsl[s + 1], a, r.T);
  const qlen = b - a;
  const seqlen = clamp(seqLens[s], 0, r.maxB * r.bs);
  const dec = r.decodeOk && qlen === 1;
  const rt = qlen > 0 ? (dec ? 1 : ceilDiv(r.G * qlen, r.BR)) : 0;
  return { q0: a, qlen, seqlen, dec, rt, np: 0, plen: 0 };
}

function seqFull(r: PlanRules, qsl: ArrayLike<number>, seqLens: ArrayLike<number>, s: number, want: number): SeqPlan {
  const q = seqBasic(r, qsl, seqLens, s);
  if (q.qlen === 0) return q;
  q.plen = partLen(q.seqlen, want);
  q.np = Math.max(1, ceilDiv(q.seqlen, q.plen));
  if (q.dec && r.pmax > 0 && q.plen > r.pmax) {
    q.plen = r.pmax;
    q.np = Math.max(1, ceilDiv(q.seqlen, r.pmax));
    if (q.np > r.pCap) {
      q.dec = false;
      q.rt = ceilDiv(r.G, r.BR);
      q.plen = partLen(q.seqlen, want);
      q.np = Math.max(1, ceilDiv(q.seqlen, q.plen));
    }
  }
  return q;
}

/** How many partitions the batch wants (the same arithmetic as plan.wgsl). */
function wantParts(r: PlanRules, qsl: ArrayLike<number>, seqLens: ArrayLike<number>): number {
  let base = 0, maxSeq = 0;
  for (let s = 0; s < r.S; s++) {
    const q = seqBasic(r, qsl, seqLens, s);
    base += q.rt * r.Hkv;
    if (q.qlen > 0) maxSeq = Math.max(maxSeq, q.seqlen);
  }
  return base > 0 ? Math.max(1, Math.min(ceilDiv(r.target, base), Math.floor(maxSeq / r.minPart), r.pCap)) : 1;
}

/** Offsets of one plan buffer; the item capacities are exact counts (host) or bounds (GPU planning). */
export interface PlanLayout {
  offQsl: number; offSeq: number; offBt: number; offTok: number; offFlash: number; offDecode: number;
  flashCap: number; decodeCap: number; words: number;
}

export function planLayout(r: Pick<PlanRules, 'S' | 'maxB' | 'T'>, flashCap: number, decodeCap: number): PlanLayout {
  const offQsl = HDR_WORDS, offSeq = offQsl + r.S + 1, offBt = offSeq + r.S, offTok = offBt + r.S * r.maxB;
  const offFlash = offTok + r.T, offDecode = offFlash + ITEM_WORDS * flashCap;
  return { offQsl, offSeq, offBt, offTok, offFlash, offDecode, flashCap, decodeCap, words: offDecode + ITEM_WORDS * decodeCap };
}

/**
 * Item capacities that hold whatever lengths the GPU finds: with `want` partitions base·want stays
 * below target + base, base is at most Hkv·(S + ⌈G·T/BR⌉), and the decode kernel's forced partitions
 * are at most pCap per sequence and kv head.
 */
export function deviceCaps(r: PlanRules, maxQueryLen = r.T): { flashCap: number; decodeCap: number } {
  // A decode-only batch (every sequence one new token) gives flash nothing when the decode kernels apply.
  if (maxQueryLen <= 1 && r.decodeOk && r.pmax === 0) return { flashCap: 0, decodeCap: r.target + r.Hkv * r.S };
  const baseMax = r.Hkv * Math.min(r.S * ceilDiv(r.G * Math.min(maxQueryLen, r.T), r.BR), r.S + ceilDiv(r.G * r.T, r.BR));
  const flashCap = r.target + baseMax;
  const decodeCap = !r.decodeOk ? 0 : r.target + r.Hkv * r.S + (r.pmax > 0 ? r.Hkv * r.S * Math.min(r.pCap, ceilDiv(r.maxB * r.bs, r.pmax)) : 0);
  return { flashCap, decodeCap };
}

export interface HostPlan { image: Int32Array; layout: PlanLayout; nFlash: number; nDecode: number; maxNP: number; anyPartial: boolean }

/**
 * The host planner: the plan buffer for host metadata, word for word what plan.wgsl writes for the
 * same metadata (with the capacities as exact counts unless a layout is given).
 */
export function planOnHost(r: PlanRules, qsl: ArrayLike<number>, seqLens: ArrayLike<number>, blockTable: ArrayLike<number>,
                           layout?: PlanLayout): HostPlan {
  const want = wantParts(r, qsl, seqLens);
  const seqs: SeqPlan[] = [];
  let nFlash = 0, nDecode = 0, maxNP = 0;
  for (let s = 0; s < r.S; s++) {
    const q = seqFull(r, qsl, seqLens, s, want);
    seqs.push(q);
    if (q.dec) nDecode += r.Hkv * q.np; else nFlash += q.rt * r.Hkv * q.np;
    maxNP = Math.max(maxNP, q.np);
  }
  const lay = layout ?? planLayout(r, nFlash, nDecode);
  const img = new Int32Array(lay.words);
  img[0] = Math.min(nFlash, lay.flashCap);
  img[1] = Math.min(nDecode, lay.decodeCap);
  img[2] = maxNP;
  img[3] = maxNP > 1 ? 1 : 0;
  for (let i = 0; i <= r.S; i++) img[lay.offQsl + i] = qsl[i];
  for (let i = 0; i < r.S; i++) img[lay.offSeq + i] = seqLens[i];
  for (let i = 0; i < r.S * r.maxB; i++) img[lay.offBt + i] = blockTable[i];
  let fi = 0, di = 0;
  for (let s = 0; s < r.S; s++) {
    const q = seqs[s];
    if (q.np === 0) continue;
    if (q.np > 1 || r.split) img.fill(q.np, lay.offTok + q.q0, lay.offTok + q.q0 + q.qlen);
    for (let g = 0; g < r.Hkv; g++) {
      for (let rt = 0; rt < q.rt; rt++) {
        for (let p = 0; p < q.np; p++) {
          let at: number;
          if (q.dec) {
            if (di >= lay.decodeCap) continue;
            at = lay.offDecode + ITEM_WORDS * di++;
          } else {
            if (fi >= lay.flashCap) continue;
            at = lay.offFlash + ITEM_WORDS * fi++;
          }
          const kLo = Math.min(p * q.plen, q.seqlen);
          img[at] = s; img[at + 1] = g; img[at + 2] = rt; img[at + 3] = p;
          img[at + 4] = kLo; img[at + 5] = Math.min(kLo + q.plen, q.seqlen); img[at + 6] = q.np > 1 ? 1 : 0;
        }
      }
    }
  }
  return { image: img, layout: lay, nFlash, nDecode, maxNP, anyPartial: maxNP > 1 };
}

type Count = number | { indirect: GPUBuffer; offset: number };

/** One kernel of a prepared plan: its pipeline, its plan-owned bind group, how many workgroups. */
interface Stage { k: Kernel; g0: GPUBindGroup; count: Count }

/** Everything a run needs for one (token count, query dtype, output dtype): made at the first run. */
interface Prepared {
  T: number;
  decode: Stage | null;
  flash: Stage | null;
  merge: Stage | null;
  /** lse of runs that do not ask for it. */
  lseScratch: GPUBuffer;
  /** The plan buffer, for tests that compare the two planners. */
  pmeta: GPUBuffer;
  layout: PlanLayout;
  rules: PlanRules;
}

/** Row groups of MLA decode's tile (mla_core.wgsl's RG; its workgroup has 256 threads). */
const MLA_RG = 16;

/** MLA decode's tile: RM heads a thread (BR = 16·RM a workgroup), BC latent rows staged a tile, and
 *  the workgroup storage that takes. */
export interface MlaTile { RM: number; BR: number; BC: number; smem: number }

/**
 * MLA decode's tile (mla_core.wgsl) for jobs of `rows` heads: RM heads a thread (1: 16-head tiles;
 * engine.tuning.mlaHeadsPerThread takes 2 or 4, where each staged vec4 serves that many heads); then
 * the widest key tile that fits the adapter's workgroup storage
 * (and engine.tuning.flashSmemBytes): BC rows of D values in f32 (padded), the scores' partial sums,
 * the probabilities and the per-head state. Null when even 1 row does not fit.
 */
export function planMlaTile(limits: EngineLimits, smemCap: number, D: number, Dv: number, rows = 16, rm?: number): MlaTile | null {
  if (D % 4 || Dv % 4 || Dv > D) return null;
  const budget = Math.min(limits.maxComputeWorkgroupStorageSize, smemCap);
  if (limits.maxComputeInvocationsPerWorkgroup < 256 || limits.maxComputeWorkgroupSizeX < 256) return null;
  // 1 by measurement: 4 heads a thread (64-head tiles) ran 1.4-1.5x slower than 1 at N 128 on an H200
  // (bench/notes/mla.md; its 32 vec4 accumulators a thread cost occupancy); kept as an option.
  const RM = rm ?? 1;
  const BR = MLA_RG * RM;
  for (const BC of [16, 8, 4, 2, 1]) {
    const SP = 256 / (MLA_RG * BC);
    const smem = 16 * BC * (D / 4 + 1) + 4 * BR * BC * SP + 4 * BR * BC + 4 * BR + 8 * BR;
    if (smem <= budget) return { RM, BR, BC, smem };
  }
  return null;
}

/**
 * MLA decode on subgroup matrices (mla_mma_core.wgsl): NSG subgroups of SGW lanes share RB row blocks
 * of M heads (BR a workgroup); DSPLIT of them split the scores' D reduction (the rest split the score
 * columns); each owns an NSG-th of the output columns; BC latent rows a key tile.
 */
export interface MlaMmaPlan {
  readonly variant: 'subgroup-matrix';
  readonly M: number; readonly N: number; readonly K: number;
  readonly NSG: number; readonly SGW: number; readonly RB: number; readonly BC: number; readonly DSPLIT: number;
  readonly BR: number;
  readonly smem: number;
}

/**
 * The matrix tile's shapes, in order of preference (engine.tuning.mlaMmaShape holds one). Each keeps
 * under about 100 registers of matrices a lane at DeepSeek's rows (D 576, Dv 512): Q's slice
 * RB·⌈36/DSPLIT⌉ left matrices, O's RB·512/(16·NSG) result matrices. The order by measurement (H200,
 * run 68, bench/notes/mla.md): 32 heads a tile (RB 2) where a job has that many rows (N 128 batch 32:
 * 0.87 ms of attention against 0.97 for 16), else 8 subgroups × 32 keys with 4 D slices (N 16: half a
 * 32-head tile would idle).
 */
export const MLA_MMA_SHAPES: readonly { NSG: number; DSPLIT: number; RB: number; BC: number }[] = [
  { NSG: 8, DSPLIT: 8, RB: 2, BC: 16 }, { NSG: 8, DSPLIT: 4, RB: 1, BC: 32 }, { NSG: 8, DSPLIT: 8, RB: 1, BC: 16 },
  { NSG: 4, DSPLIT: 4, RB: 1, BC: 32 }, { NSG: 4, DSPLIT: 2, RB: 1, BC: 32 },
];

/**
 * The same tile's shapes for GQA decode over plain K/V caches (SEPV: a kv head's G ≤ 16 query heads of
 * one token are the rows, V staged after K; engine.tuning.pagedDecodeMmaShape holds one), in order of
 * preference. Measured on an H200 at Llama-3-8B's decode shapes (runs 80-82, interleaved rounds,
 * bench/notes/paged.md): 4 subgroups × 32 keys with 2 D slices was the fastest at every batch ≥ 16 and
 * at batch 1 × 32k (16 × 4k 0.217 ms, 16 × 32k 1.38, 64 × 4k 0.715); 8 subgroups × 64 keys next (0.243,
 * 1.57, 0.831); wider tiles or more D slices ran 1.2-1.9x slower than the first.
 */
export const DECODE_MMA_SHAPES: readonly { NSG: number; DSPLIT: number; RB: number; BC: number }[] = [
  { NSG: 4, DSPLIT: 2, RB: 1, BC: 32 }, { NSG: 8, DSPLIT: 2, RB: 1, BC: 64 }, { NSG: 4, DSPLIT: 4, RB: 1, BC: 16 },
  { NSG: 8, DSPLIT: 4, RB: 1, BC: 32 }, { NSG: 4, DSPLIT: 2, RB: 1, BC: 64 }, { NSG: 4, DSPLIT: 1, RB: 1, BC: 64 },
  { NSG: 4, DSPLIT: 4, RB: 1, BC: 32 },
];

/** Plain K/V cache dtypes GQA decode's matrix tile stages (as f16). */
export const DECODE_MMA_ROWS: readonly string[] = ['f16', 'bf16'];

/** Latent cache dtypes MLA decode's matrix tile stages (as f16). */
export const MLA_MMA_ROWS: readonly string[] = ['f16', 'bf16', 'fp8_ds_mla'];

/** Workgroup storage of the MLA matrix tile, in bytes (mla_mma_core.wgsl's arrays). */
export function mlaMmaSmemBytes(M: number, N: number, K: number, NSG: number, RB: number, BC: number, DSPLIT: number, D: number,
                                sepDv = 0): number {
  const NQS = Math.ceil(Math.ceil(D / K) / DSPLIT);
  const DS = NQS * DSPLIT * K + 8;
  const BR = RB * M;
  const pad4 = (b: number) => Math.ceil(b / 4) * 4;
  // SEPV (sepDv > 0): the value tile [BC][DVP + 8] after the key tile, DVP being Dv padded to every
  // subgroup's whole result matrices.
  const VS = Math.ceil(sepDv / (N * NSG)) * N * NSG + 8;
  const kv = Math.max(Math.max(BC, M) * DS, sepDv > 0 ? BC * (DS + VS) : 0);
  return 2 * kv + 4 * Math.max(DSPLIT * BR * (BC + 4), NSG * M * N) + pad4(2 * BR * (BC + 8)) + 4 * BR + 4 * NSG;
}

/**
 * Plans MLA decode's matrix tile for latent rows of D values (the first Dv are V) and jobs of `rows`
 * heads, or null where it cannot run: no f16 → f32 configuration, no shader-f16, subgroups of more than
 * one size, or no shape that fits. `config` holds it to one of mmaConfigs' entries, `shape` to one of
 * MLA_MMA_SHAPES.
 */
export function planMlaMma(limits: EngineLimits, features: EngineFeatures, D: number, Dv: number, rows: number, smemCap = Infinity,
                           config?: number, shape?: number, sepV = false): MlaMmaPlan | null {
  // (GQA decode stages V rows in 16-byte words: Dv a multiple of 8.)
  if (D % 8 || (sepV ? Dv % 8 : Dv > D)) return null;
  const { sgw, configs } = mmaTileConfigs(features, config);
  const budget = Math.min(limits.maxComputeWorkgroupStorageSize, smemCap);
  for (const { M, N, K } of configs) {
    for (const [si, { NSG, DSPLIT, RB, BC }] of (sepV ? DECODE_MMA_SHAPES : MLA_MMA_SHAPES).entries()) {
      if (shape !== undefined && si !== shape) continue;
      const WG = NSG * sgw, BR = RB * M, TPR = WG / BR, CSPLIT = NSG / DSPLIT;
      // Several row blocks only for jobs that fill them (unless held to the shape).
      if (shape === undefined && RB > 1 && rows < BR) continue;
      // GQA decode: a work item is one row tile, so it must hold all G heads.
      if (sepV && rows > BR) continue;
      const DS = Math.ceil(Math.ceil(D / K) / DSPLIT) * DSPLIT * K + 8;
      // mla_mma_core.wgsl's const_asserts.
      if (NSG % DSPLIT || BC % N || BC % K || (BC / N) % CSPLIT || WG % BR || TPR > sgw || sgw % TPR || BC % TPR) continue;
      if (!sepV && Math.ceil(Dv / (N * NSG)) * NSG * N > DS) continue;
      if (WG > limits.maxComputeInvocationsPerWorkgroup || WG > limits.maxComputeWorkgroupSizeX) continue;
      const smem = mlaMmaSmemBytes(M, N, K, NSG, RB, BC, DSPLIT, D, sepV ? Dv : 0);
      if (smem <= budget) return { variant: 'subgroup-matrix', M, N, K, NSG, SGW: sgw, RB, BC, DSPLIT, BR, smem };
    }
  }
  return null;
}

/** The matrix tile for MLA decode where the tuning lets 'auto' take it and it runs here (the caller
 *  decides which latent rows it stages: PagedAttentionPlan, MLA_MMA_ROWS). */
export function mlaMmaFor(engine: Runtime, D: number, Dv: number, rows: number): MlaMmaPlan | null {
  if (engine.tuning.mlaDecodeTile !== 'auto') return null;
  return planMlaMma(engine.limits, engine.features, D, Dv, rows, engine.tuning.flashSmemBytes, engine.tuning.flashMmaConfig, engine.tuning.mlaMmaShape);
}

/**
 * GQA decode on MLA's matrix tile (SEPV) where the tuning lets the decode kernels take it and it runs
 * here: the caller checks the rest (one-token sequences of a plain f16/bf16 cache in one buffer, no
 * window, softcap, ALiBi or sinks).
 */
export function decodeMmaFor(engine: Runtime, D: number, Dv: number, G: number): MlaMmaPlan | null {
  const t = engine.tuning;
  if (!t.pagedDecodeKernel || (t.pagedDecodeVariant !== 'auto' && t.pagedDecodeVariant !== 'subgroup-matrix')) return null;
  return planMlaMma(engine.limits, engine.features, D, Dv, G, t.flashSmemBytes, t.flashMmaConfig, t.pagedDecodeMmaShape, true);
}

/** MLA decode's matrix tile kernel (paged addressing); sepV: GQA decode, V from the V cache. */
function mlaMmaKernel(engine: Runtime, plan: MlaMmaPlan, D: number, Dv: number, overrides: Record<string, number>, sepV = false): Kernel {
  return engine.kernel('paged_mla_mma', 'paged_main', {
    overrides,
    consts: { M: plan.M, N: plan.N, K: plan.K, NSG: plan.NSG, SGW: plan.SGW, RB: plan.RB, BC: plan.BC, DSPLIT: plan.DSPLIT, D, DV: Dv,
              PROBE: engine.tuning.mlaMmaProbe, TAU: engine.tuning.mlaMmaTau, SEPV: sepV },
    enables: ['f16', 'subgroups', 'chromium_experimental_subgroup_matrix'],
    unroll: engine.tuning.flashMmaUnroll,
  });
}

export interface PlanConfig {
  op: string;
  geo: KVGeometry;
  Hq: number;
  meta: HostMeta | DeviceMeta;
  attn: AttnOptionValues;
  /** No partition shorter than this (MLA's decode takes 64-key partitions). */
  minPartition: number;
  /** Whether the decode kernels may serve one-token sequences (plain K/V caches only). */
  decodeAllowed: boolean;
  /** f32 queries stay f32 (Runtime.exactQueries when the plan was made): no decode matrix tile. */
  exactQueries?: boolean;
  /** For i32-tensor metadata: the most new tokens any sequence has (the host's bound; default T). */
  maxQueryLen?: number;
}

/**
 * A batch's attention, planned once and run per layer. Host metadata is validated and partitioned on
 * the host; i32-tensor metadata is partitioned on the GPU (plan.wgsl) when the first run is recorded,
 * from whatever the tensors hold when that work executes. Options are fixed for the plan.
 */
export class PagedAttentionPlan {
  readonly Hq: number;
  readonly geometry: KVGeometry;
  private readonly prepared = new Map<string, Prepared>();
  private readonly headp: GPUBuffer;
  private readonly sinks: GPUBuffer;
  private readonly owned: GPUBuffer[] = [];
  private destroyed = false;

  constructor(private readonly rt: Runtime, private readonly c: PlanConfig) {
    this.Hq = c.Hq;
    this.geometry = c.geo;
    const a = new Float32Array(2 * c.Hq);
    if (c.attn.alibi) a.set(c.attn.alibi, 0);
    if (c.attn.sinks) a.set(c.attn.sinks, c.Hq);
    this.headp = this.upload(a, 'plan head params');
    this.sinks = c.attn.sinks ? this.upload(c.attn.sinks, 'plan sinks') : rt.dummy;
  }

  private buffer(bytes: number, usage: number, label: string): GPUBuffer {
    const b = this.rt.pool.acquire(Math.max(16, bytes), usage, label);
    this.owned.push(b);
    return b;
  }

  private upload(data: Float32Array | Int32Array, label: string): GPUBuffer {
    const b = this.buffer(data.byteLength, GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC, label);
    this.rt.device.queue.writeBuffer(b, 0, data.buffer as ArrayBuffer, data.byteOffset, data.byteLength);
    return b;
  }

  /** Attention of the plan's batch over one layer's K/V source: out [T, Hq, Dv] and lse [Hq, T]. */
  runSource(query: Tensor, kv: KVSource, o: { out?: Tensor; lse?: Tensor; qRowStride?: number } = {}, withLse = false,
            op = `${this.c.op}.run`): { out: Tensor; lse: Tensor | null } {
    const rt = this.rt;
    if (this.destroyed) throw new WebinferError(`${op}: the plan was destroyed`);
    rt.assertAlive(op);
    const { Hq } = this;
    const { D, Dv } = this.c.geo;
    checkTensor(query, op, 'query');
    // A query may also be the first Hq·D elements of wider rows (a model's fused q|k|v projection):
    // [T, W] with o.qRowStride = W.
    const qs = o.qRowStride;
    if (qs === undefined) {
      check(query.shape.length === 3 && query.shape[1] === Hq && query.shape[2] === D, op, 'query',
        `shape [T, Hq=${Hq}, D=${D}] (the plan's heads and the cache's head size)`, shapeStr(query.shape));
    } else {
      check(query.shape.length === 2 && query.shape[1] === qs && qs >= Hq * D && qs % 8 === 0, op, 'query',
        `shape [T, qRowStride=${qs}] with qRowStride >= Hq·D = ${Hq * D}, a multiple of 8`, shapeStr(query.shape));
    }
    check(['f32', 'f16', 'bf16'].includes(query.dtype), op, 'query.dtype', "'f32', 'f16' or 'bf16'", fmt(query.dtype));
    const T = query.shape[0];
    const m = this.c.meta;
    if (m.kind === 'host') {
      check(m.qsl[m.S] <= T, op, 'query', `at least queryStartLoc[S] = ${m.qsl[m.S]} tokens (the plan's batch)`, `${T} tokens`);
    }
    check(sameGeometry(kv.geo, this.c.geo), op, 'cache', `the plan's geometry (${geometryString(this.c.geo)})`, `(${geometryString(kv.geo)})`);
    let out = o.out;
    if (out !== undefined) {
      checkTensor(out, op, 'o.out');
      check(out.shape.length === 3 && out.shape[0] === T && out.shape[1] === Hq && out.shape[2] === Dv && ['f32', 'f16', 'bf16'].includes(out.dtype),
        op, 'o.out', `an f32, f16 or bf16 tensor of shape [T=${T}, Hq=${Hq}, Dv=${Dv}]`, `${fmt(out.dtype)} ${shapeStr(out.shape)}`);
    }
    if (o.lse !== undefined) {
      checkTensor(o.lse, op, 'o.lse');
      check(o.lse.dtype === 'f32' && o.lse.shape.length === 2 && o.lse.shape[0] === Hq && o.lse.shape[1] === T, op, 'o.lse',
        `an f32 tensor of shape [Hq=${Hq}, T=${T}]`, `${fmt(o.lse.dtype)} ${shapeStr(o.lse.shape)}`);
    }
    const outDtype = out?.dtype ?? query.dtype;
    const p = this.prepare(T, query.dtype, outDtype, qs ?? Hq * D, withLse || o.lse !== undefined);
    out ??= rt.emptyTensor([T, Hq, Dv], outDtype);
    const lse = o.lse ?? (withLse ? rt.emptyTensor([Hq, T], 'f32') : null);
    const lseBuf = lse ? lse.buffer : p.lseScratch;
    const anyKernel = p.decode ?? p.flash;
    if (anyKernel) {
      const g2 = rt.bindGroup(anyKernel.k.groups[2], [query.buffer, out.buffer, lseBuf]);
      // A source split across buffers: the kernels run once per part (each sees its own blocks, the
      // others masked) into the partition workspace, and the merge combines every part's states.
      for (const part of kv.parts) {
        if (p.decode) {
          const g1 = rt.groupFor(p.decode.k, 1, { k_cache: part.key, v_cache: part.value, kv_scale: part.scales, k_w: part.key, v_w: part.value });
          rt.record(p.decode.k, [p.decode.g0, g1, g2], p.decode.count);
        }
        // By name: the subgroup-matrix tiles also read the caches as 16-byte words (paged.wgsl k_w,
        // v_w), and MLA's reads only K's words (the rows hold V too).
        if (p.flash) {
          const g1 = rt.groupFor(p.flash.k, 1, { k_cache: part.key, v_cache: part.value, kv_scale: part.scales, k_w: part.key, v_w: part.value });
          rt.record(p.flash.k, [p.flash.g0, g1, g2], p.flash.count);
        }
      }
      if (p.merge) rt.record(p.merge.k, [p.merge.g0, rt.bindGroup(p.merge.k.groups[1], [out.buffer, lseBuf])], p.merge.count);
    }
    return { out, lse };
  }

  /**
   * Prepares the run of T query rows now (what the first run would) and names what runs of it record:
   * the kernels, the plan's bind groups and the workgroup counts. Equal names over the same caches,
   * queries and outputs mean equal commands (a model's step graph keys on it).
   */
  signature(T: number, qDtype: DType, outDtype: DType, qStride: number, wantLse: boolean): string {
    const p = this.prepare(T, qDtype, outDtype, qStride, wantLse);
    const id = (o: object) => this.rt.idOf(o);
    const st = (s: Stage | null) => !s ? '-'
      : `${id(s.k.pipeline)}:${id(s.g0)}:${typeof s.count === 'number' ? s.count : `${id(s.count.indirect)}+${s.count.offset}`}`;
    return `${st(p.decode)}/${st(p.flash)}/${st(p.merge)}/${id(p.lseScratch)}`;
  }

  /** The plan buffer of the first prepared run and the rules it was made by (tests compare the GPU
   *  planner with the host's). */
  planBuffer(): { buffer: GPUBuffer; layout: PlanLayout; rules: PlanRules } | null {
    const p = this.prepared.values().next().value;
    return p ? { buffer: p.pmeta, layout: p.layout, rules: p.rules } : null;
  }

  /** wantLse: the run returns the LSE (f32 queries then keep the FMA decode kernels: see decodeMma). */
  private prepare(T: number, qDtype: DType, outDtype: DType, qStride: number, wantLse: boolean): Prepared {
    const key = `${T}|${qDtype}|${outDtype}|${qStride}|${wantLse}`;
    let p = this.prepared.get(key);
    if (p) return p;
    const rt = this.rt;
    const { op, geo, Hq, meta: m, attn: a } = this.c;
    const { Hkv, D, Dv } = geo;
    const G = Hq / Hkv;
    const variant = flashVariantFor(rt);
    const tile = qDtype === 'f16' && geo.dtype === 'f16' && rt.features.f16 && rt.tuning.flashF16Tiles ? 'f16' : 'f32';
    // MLA decode (latent rows, one query token a sequence, none of the options it never takes) runs
    // its own tile when one fits; otherwise, and for everything else, the flash tile.
    // Latent rows in 16 bits or FlashMLA's fp8 take the subgroup-matrix tile where the adapter has one
    // (staged as f16: bf16 and fp8_ds_mla values decoded and rounded, and the absorbed query, computed in
    // f32, rounded as the rows are, within the tolerances those cache dtypes set); f32 rows keep f32.
    const mlaOk = geo.mlaL > 0 && this.c.maxQueryLen === 1 && rt.tuning.mlaDecodeTile !== 'flash'
      && !a.window && !a.softcap && !a.alibi && !a.sinks;
    const mlaMma = mlaOk && MLA_MMA_ROWS.includes(geo.dtype) ? mlaMmaFor(rt, D, Dv, G) : null;
    const mla = mlaOk && !mlaMma ? planMlaTile(rt.limits, rt.tuning.flashSmemBytes, D, Dv, G, rt.tuning.mlaHeadsPerThread) : null;
    const few = this.c.maxQueryLen !== undefined ? { rows: G * this.c.maxQueryLen, rowGrid: rt.tuning.flashRowGrid } : undefined;
    // f16 queries over an f16 K/V cache take the subgroup-matrix tile where the adapter has one.
    const mma = !mla && !mlaMma && qDtype === 'f16' && geo.dtype === 'f16' && geo.mlaL === 0 ? flashMmaFor(rt, 'f16', D, Dv) : null;
    const flash = mla || mlaMma || mma ? null : planFlash(rt.limits, rt.features, D, Dv, variant, rt.tuning.flashSmemBytes, rt.tuning.flashGrid, tile, few);
    if (!mla && !mlaMma && !mma && !flash) throw new WebinferError(`${op}: no ${variant} attention tile fits ${rt.limits.maxComputeWorkgroupStorageSize} bytes of workgroup storage`);
    const BR = mlaMma ? mlaMma.BR : mla ? mla.BR : mma ? mma.BR : flash!.TY * flash!.TM;
    // One-token sequences of a plain cache in one buffer, without the options the matrix tile leaves out,
    // take GQA decode on subgroup matrices where the adapter has them; else the decode kernels. The tile
    // stages Q in f16: f32 queries take it only where the run returns no LSE (a model's step), since
    // rounding them costs the LSE its f32 tolerance; the output's, the 16-bit cache's, it keeps.
    const decodeMma = this.c.decodeAllowed && geo.parts === 1 && geo.mlaL === 0 && DECODE_MMA_ROWS.includes(geo.dtype) && (qDtype !== 'f32' || (!wantLse && !this.c.exactQueries))
      && !a.window && !a.softcap && !a.alibi && !a.sinks ? decodeMmaFor(rt, D, Dv, G) : null;
    const decode: DecodePlan | null = this.c.decodeAllowed && !decodeMma ? planDecode(rt, D, Dv, G, geo.dtype as DType, geo.parts > 1) : null;
    const rowBytes = T * Hq * (Dv + 1) * 4;
    const bindMax = Math.min(rt.limits.maxStorageBufferBindingSize, rt.limits.maxBufferSize);
    const wsCap = Math.min(rt.tuning.pagedWorkspaceBytes, bindMax);
    // A split source keeps every part's partition states: NP times the workspace of one.
    const NP = geo.parts, split = NP > 1;
    if (split && NP * rowBytes > bindMax) {
      throw new WebinferError(`${op}: a cache split across ${NP} buffers needs ${NP * rowBytes} bytes of workspace for ${T} tokens `
        + `(more than one storage binding, ${bindMax} bytes): attend fewer tokens per call`);
    }
    // The portable decode kernel holds at most PMAX keys of a partition. The workspace gets the partitions
    // the longest sequence the block table allows then needs (up to the largest binding), since a decode
    // row sent to the flash tile instead wastes all but G of its rows: batch 64 × 32k of Llama-3-8B ran
    // 50x slower there than on the subgroup kernel, its 64 partitions past the 64 MiB cap (run 93).
    const pmax = decode && Number.isFinite(decode.PMAX) ? decode.PMAX : 0;
    const pmaxParts = pmax ? ceilDiv(m.maxB * geo.blockSize, pmax) : 0;
    const pCap = Math.max(1, Math.floor(wsCap / (NP * rowBytes)), Math.min(pmaxParts, Math.floor(bindMax / (NP * rowBytes))));
    const rules: PlanRules = {
      T, S: m.S, maxB: m.maxB, bs: geo.blockSize, Hkv, G, BR, decodeOk: decode !== null || decodeMma !== null, pmax,
      // The matrix decode tile wants fewer, longer partitions (its per-partition start and the merge).
      target: decodeMma ? Math.min(rt.tuning.pagedTargetWorkgroups, rt.tuning.pagedDecodeMmaTarget) : rt.tuning.pagedTargetWorkgroups,
      minPart: Math.max(64, this.c.minPartition), pCap, split,
    };
    const STORAGE = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC;
    let layout: PlanLayout, pmeta: GPUBuffer, parts: number, counts: { flash: Count; decode: Count; merge: Count };
    const outWords = outDtype === 'f32' ? T * Hq * Dv : Math.ceil((T * Hq * Dv) / 2);
    const mergeGroups = ceilDiv(outWords, MERGE_WG);
    if (m.kind === 'host') {
      const hp = planOnHost(rules, m.qsl, m.seqLens, m.blockTable);
      layout = hp.layout;
      pmeta = this.upload(hp.image, 'plan metadata');
      parts = hp.maxNP;
      counts = { flash: hp.nFlash, decode: hp.nDecode, merge: hp.anyPartial || split ? mergeGroups : 0 };
    } else {
      const caps = deviceCaps(rules, this.c.maxQueryLen);
      layout = planLayout(rules, caps.flashCap, caps.decodeCap);
      pmeta = this.buffer(4 * layout.words, STORAGE, 'plan metadata');
      const indirect = rt.tuning.pagedIndirect;
      // (Not the runtime's dummy when unused: a buffer bound read-write may not also be bound read-only,
      // as the dummy is for an implicit queryStartLoc.)
      const args = this.buffer(48, GPUBufferUsage.STORAGE | (indirect ? GPUBufferUsage.INDIRECT : 0) | GPUBufferUsage.COPY_SRC, 'plan dispatch sizes');
      const k = rt.kernel('paged_plan', 'plan_main', { overrides: { WRITE_ARGS: indirect } });
      rt.dispatch(k, { src_qsl: m.qsl ?? rt.dummy, src_seqlens: m.seqLens, src_bt: m.blockTable, pmeta, args }, {
        T, S: m.S, max_blocks: m.maxB, bs: geo.blockSize, Hkv, G, BR: rules.BR, decode_ok: rules.decodeOk ? 1 : 0,
        pmax: rules.pmax, target_wg: rules.target, min_part: rules.minPart, p_cap: rules.pCap,
        off_qsl: layout.offQsl, off_seqlens: layout.offSeq, off_bt: layout.offBt, off_tok: layout.offTok,
        off_flash: layout.offFlash, off_decode: layout.offDecode, flash_cap: layout.flashCap, decode_cap: layout.decodeCap,
        qsl_implicit: m.qsl ? 0 : 1, merge_groups: mergeGroups, max_dim: rt.limits.maxComputeWorkgroupsPerDimension, split: split ? 1 : 0,
      }, 1);
      parts = rules.pCap;
      // Dawn validates each indirect dispatch with a pass of its own (measured on an H200, bench/notes/
      // step.md); by default the kernels launch the host's bound of workgroups instead and those past the
      // plan header's count return at once.
      counts = indirect
        ? { flash: { indirect: args, offset: 0 }, decode: { indirect: args, offset: 12 }, merge: { indirect: args, offset: 24 } }
        : { flash: layout.flashCap, decode: layout.decodeCap, merge: mergeGroups };
    }
    const nonzero = (c: Count) => typeof c !== 'number' || c > 0;
    const merged = parts > 1 || split;
    const ws = this.buffer(merged ? NP * parts * rowBytes : 16, STORAGE, 'plan partitions');
    const wsLse = NP * parts * T * Hq * Dv;
    const lseScratch = this.buffer(4 * Hq * T, STORAGE, 'plan lse');
    const kvCode = KV_CODE[geo.dtype];
    const overrides = { Q_DTYPE: DTYPE_CODE[qDtype], KV_DTYPE: kvCode, OUT_DTYPE: DTYPE_CODE[outDtype] };
    const common = {
      T, Hq, Hkv, S: m.S, flags: sdpaFlags({ ...a, maskKind: null }) | (split ? FLAG_SPLIT : 0), window: a.window, scale: a.scale, softcap: a.softcap || 1,
      bs: geo.blockSize, num_blocks: geo.numBlocks, max_blocks: m.maxB,
      off_qsl: layout.offQsl, off_seqlens: layout.offSeq, off_bt: layout.offBt, ws_lse: wsLse, q_stride: qStride, pslots: parts,
    };
    const stage = (k: Kernel, u: Record<string, number>, count: Count): Stage => {
      const params = this.rt.uniformBuffer(k, u);
      this.owned.push(params);
      return { k, g0: rt.groupFor(k, 0, { params, pmeta, headp: this.headp, ws }), count };
    };
    const flashParams = {
      k_stride: geo.kStride, v_stride: geo.vStride, mla_l: geo.mlaL, mla_row_words: geo.mlaRowWords,
    };
    let decodeStage: Stage | null = null;
    if (decodeMma && nonzero(counts.decode)) {
      // The decode items (one row tile each: all G heads) through paged.wgsl's entry, as MLA's jobs run.
      decodeStage = stage(mlaMmaKernel(rt, decodeMma, D, Dv, overrides, true),
        { ...common, ...flashParams, G, hdr_items: 1, off_items: layout.offDecode, n_dc: 0, n_dk4: 0, n_bc: 0 }, counts.decode);
    }
    if (decode && nonzero(counts.decode)) {
      const dp = decode;
      const dk = dp.variant === 'subgroup'
        ? rt.kernel('paged_decode_sg', 'decode_main', { overrides, consts: { G, D, DV: Dv, EPV: dp.EPV, WG: dp.WG, KT: dp.KT, UK: dp.UK, HS: dp.HS, PF: rt.tuning.pagedDecodePrefetch ? 1 : 0, SPL: split ? 1 : 0, PROBE: rt.tuning.pagedDecodeProbe }, enables: ['subgroups'] })
        : rt.kernel('paged_decode', 'decode_main', { overrides, consts: { G, D, DV: Dv, EPV: dp.EPV, WG: dp.WG, PMAX: dp.PMAX, UK: dp.UK } });
      decodeStage = stage(dk, { ...common, hdr_items: 1, off_items: layout.offDecode }, counts.decode);
    }
    let flashStage: Stage | null = null;
    if (nonzero(counts.flash)) {
      const fk = mlaMma ? mlaMmaKernel(rt, mlaMma, D, Dv, overrides)
        : mla ? rt.kernel('paged_mla', 'paged_main', { overrides, consts: { D, DV: Dv, RM: mla.RM, BC: mla.BC } })
        : mma ? flashMmaKernel(rt, 'paged_flash_mma', 'paged_main', mma, D, Dv, overrides, rt.tuning.flashMmaWords)
        : rt.kernel(flash!.variant === 'subgroup' ? 'paged_flash_subgroup' : 'paged_flash', 'paged_main', {
          overrides,
          consts: { TX: flash!.TX, TY: flash!.TY, TM: flash!.TM, TN: flash!.TN, DK: flash!.DK, DVC: flash!.DVC, D, DV: Dv,
                    TILE4: flash!.tile === 'f16' ? 'vec4<f16>' : 'vec4<f32>' },
          enables: [...(flash!.tile === 'f16' ? ['f16'] : []), ...(flash!.variant === 'subgroup' ? ['subgroups'] : [])],
        });
      flashStage = stage(fk, {
        // Split: keys outside the part go through the flash tile's mask hook (paged.wgsl mask_word).
        ...common, G, hdr_items: 0, off_items: layout.offFlash, flags: common.flags | (split ? FLAG_MASK_BOOL : 0),
        n_dc: flash ? D / flash.DK : 0, n_dk4: flash ? flash.DK / 4 : 0, n_bc: flash ? flash.TX * flash.TN : 0,
        ...flashParams,
      }, counts.flash);
    }
    let mergeStage: Stage | null = null;
    if (merged && nonzero(counts.merge)) {
      const mk = rt.kernel('merge', 'merge_main', { overrides: { IN_DTYPE: 0, OUT_DTYPE: DTYPE_CODE[outDtype], WG: MERGE_WG } });
      const params = rt.uniformBuffer(mk, {
        T, H: Hq, Dv, n_parts: parts, n_split: NP, two_buffers: 0, part_stride: T * Hq * Dv, lse_stride: Hq * T,
        has_sinks: a.sinks ? 1 : 0, out_words: outWords, lse_base: wsLse, t0: 0, tok_parts: layout.offTok,
      });
      this.owned.push(params);
      mergeStage = {
        k: mk, count: counts.merge,
        g0: rt.groupFor(mk, 0, { params, o_a: ws, o_b: rt.dummy, lse_a: ws, lse_b: rt.dummy, sinks: this.sinks, tok_np: pmeta }),
      };
    }
    p = { T, decode: decodeStage, flash: flashStage, merge: mergeStage, lseScratch, pmeta, layout, rules };
    this.prepared.set(key, p);
    return p;
  }

  /** Returns the plan's buffers to the pool (after the work recorded so far is submitted). Idempotent. */
  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    // Last acquired, first released: the pool then hands the next plan the same buffers in the same
    // order, so the bind groups made for this one are found again.
    for (let i = this.owned.length - 1; i >= 0; i--) this.rt.pool.release(this.owned[i]);
    this.owned.length = 0;
    this.prepared.clear();
  }
}

