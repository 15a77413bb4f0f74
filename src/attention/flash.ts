// Planning and encoding of the dense flash program (shaders/attention/flash.wgsl + flash_core.wgsl): the tile
// shape comes from the adapter's limits (workgroup storage, invocations) and features (subgroups and their
// smallest size).
import { mmaTileConfigs, type Runtime } from '../core/runtime.js';
import type { EngineFeatures, EngineLimits } from '../core/types.js';
import type { Tensor } from '../core/tensor.js';
import type { Kernel } from '../core/pipeline.js';
import { DTYPE_CODE } from '../core/dtype.js';
import { headParams, sdpaFlags, type SdpaProblem } from './common.js';

export type FlashVariant = 'subgroup' | 'portable';

export interface FlashPlan {
  readonly variant: FlashVariant;
  readonly TX: number; readonly TY: number; readonly TM: number; readonly TN: number;
  readonly DK: number; readonly DVC: number;
  /** Element type of the Q/K/V tiles in workgroup memory: f16 only for f16 data on shader-f16 adapters. */
  readonly tile: 'f32' | 'f16';
  /** Workgroup storage the tile uses, in bytes. */
  readonly smem: number;
}

/**
 * Thread grids by preference, from measurements on an H200 (bench/notes/flash.md): 64×64 tiles of
 * 256 threads first (10.1 TFLOP/s at L 4096 f32), then 8 rows per thread (7.4: register pressure),
 * then the 32×32 tile that 32 KiB adapters get (5.2-5.6); the rest serve small budgets and subgroups
 * of 4 or 8.
 */
const GRIDS: readonly { TX: number; TY: number; TM: number; TN: number; maxDv?: number }[] = [
  { TX: 16, TY: 16, TM: 4, TN: 4 },
  { TX: 16, TY: 8, TM: 8, TN: 4, maxDv: 128 },
  { TX: 8, TY: 8, TM: 4, TN: 4 },
  { TX: 4, TY: 16, TM: 4, TN: 8 },
  { TX: 8, TY: 16, TM: 4, TN: 8 },
  { TX: 4, TY: 8, TM: 4, TN: 8 },
  { TX: 4, TY: 8, TM: 4, TN: 4 },
];

/**
 * Grids for jobs of few rows and wide heads: MLA's absorbed decode, whose rows are the N query heads of
 * one token over 576-wide latent rows and 512-wide outputs. The row tile is sized to the rows (16 or
 * 32, not 64 rows of which 48 idle) and 32 threads share a row, so a thread keeps 4 rows × 16
 * output columns of O. Tried before GRIDS when a plan says its jobs have at most 32 rows.
 */
export const ROW_GRIDS: readonly { TX: number; TY: number; TM: number; TN: number }[] = [
  { TX: 32, TY: 4, TM: 4, TN: 2 },
  { TX: 32, TY: 4, TM: 4, TN: 1 },
  { TX: 32, TY: 8, TM: 4, TN: 2 },
  { TX: 32, TY: 8, TM: 4, TN: 1 },
];

export const FLASH_MAX_HEAD = 256;

/** Why flash cannot serve these head sizes, or null when it can. */
export function flashUnsupported(D: number, Dv: number): string | null {
  if (D % 8 || Dv % 8) return `head sizes D=${D}, Dv=${Dv} are not multiples of 8`;
  if (D > FLASH_MAX_HEAD || Dv > FLASH_MAX_HEAD) return `head sizes D=${D}, Dv=${Dv} exceed ${FLASH_MAX_HEAD}`;
  return null;
}

export function flashSmemBytes(g: { TX: number; TY: number; TM: number; TN: number }, DK: number, DVC: number, tile: 'f32' | 'f16' = 'f32'): number {
  const BR = g.TY * g.TM, BC = g.TX * g.TN, DKP = DK / 4 + 1, t4 = tile === 'f16' ? 8 : 16;
  return t4 * (BR * DKP + BC * DKP + BC * (DVC / 4)) + 16 * Math.max(BC * (BR / 4 + 1), Math.ceil((BR * g.TX) / 4));
}

/**
 * Picks the first thread grid (with the widest D chunk, then the widest Dv chunk) that fits the
 * adapter. D chunks of 8 only where D has no wider divisor: each chunk costs two barriers per key
 * tile, and an 8-wide plan measured 3.5x slower than a 16-wide one on an H200. The subgroup variant
 * needs TX ≤ the smallest subgroup size so a row's threads share one subgroup.
 */
export function planFlash(limits: EngineLimits, features: EngineFeatures, D: number, Dv: number,
                          variant: FlashVariant, smemCap = Infinity, grid?: number, tile: 'f32' | 'f16' = 'f32',
                          few?: { rows: number; rowGrid?: number }): FlashPlan | null {
  if (tile === 'f16' && !features.f16) return null;
  const budget = Math.min(limits.maxComputeWorkgroupStorageSize, smemCap);
  const sgMin = features.subgroupMinSize;
  if (variant === 'subgroup' && (!features.subgroups || !sgMin)) return null;
  const dkAll = [32, 16, 8].filter((dk) => D % dk === 0);
  const dks = dkAll.length > 1 ? dkAll.filter((dk) => dk >= 16) : dkAll;
  // Jobs of at most 32 rows with wide outputs (with no grid forced) try the row-sized grids first,
  // smallest tile that holds the rows first; rowGrid holds them to one entry, or (-1) skips them.
  const rowGrids = few && grid === undefined && few.rows <= 32 && Dv > 128 && (few.rowGrid ?? 0) >= 0
    ? ROW_GRIDS.filter((g, i) => (few.rowGrid === undefined || i === few.rowGrid) && g.TY * g.TM >= few.rows)
      .sort((a, b) => a.TY * a.TM - b.TY * b.TM)
    : [];
  type Grid = { TX: number; TY: number; TM: number; TN: number; maxDv?: number };
  const grids: { g: Grid; gi: number }[] = [...rowGrids.map((g) => ({ g, gi: -1 })), ...GRIDS.map((g, gi) => ({ g, gi }))];
  for (const { g, gi } of grids) {
    if (gi >= 0 && grid !== undefined && gi !== grid) continue;
    if (g.maxDv && Dv > g.maxDv) continue;
    if (g.TX * g.TY > limits.maxComputeInvocationsPerWorkgroup || g.TX * g.TY > limits.maxComputeWorkgroupSizeX) continue;
    if (variant === 'subgroup' && g.TX > sgMin!) continue;
    // DVC: a multiple of 4·TX (each thread owns whole 4-column groups), no wider than Dv needs.
    const base = 4 * g.TX;
    const need = Math.ceil(Dv / base) * base;
    const dvcs = [64, 32, 16, 128, 256].filter((c) => c % base === 0 && c <= Math.max(base, need));
    for (const DK of dks) {
      for (const DVC of dvcs) {
        const smem = flashSmemBytes(g, DK, DVC, tile);
        if (smem <= budget) return { variant, TX: g.TX, TY: g.TY, TM: g.TM, TN: g.TN, DK, DVC, tile, smem };
      }
    }
  }
  return null;
}

/** f16 tiles where the data is f16 and the adapter has shader-f16 (engine.tuning.flashF16Tiles can veto). */
export function flashTileFor(engine: Runtime, dtype: string): 'f32' | 'f16' {
  return dtype === 'f16' && engine.features.f16 && engine.tuning.flashF16Tiles ? 'f16' : 'f32';
}

/** The scalar tile's variant (the subgroup-matrix tile is chosen before it, by planFlashMma). */
export function flashVariantFor(engine: Runtime): FlashVariant {
  const pref = engine.tuning.flashVariant;
  if (pref === 'subgroup' || pref === 'portable') return pref;
  // The narrowest subgroup grid has rows of 4 lanes: an adapter whose subgroups may be narrower (the
  // spec allows none, but a driver could report it) takes the portable tile instead of none.
  return engine.features.subgroups && (engine.features.subgroupMinSize ?? 0) >= 4 ? 'subgroup' : 'portable';
}

/** Dispatches a dense flash program (flash.wgsl's addressing) over row tiles of BR rows: out and lse. */
function dispatchDense(engine: Runtime, p: SdpaProblem, kernel: Kernel, BR: number, q: Tensor, k: Tensor, v: Tensor, withLse: boolean,
                       extra: { bindings?: Record<string, Tensor>; chunks?: { n_dc: number; n_dk4: number; n_bc: number } }): { out: Tensor; lse: Tensor | null } {
  const G = p.Hq / p.Hkv;
  const rows = G * p.Lq;
  const rowTiles = Math.ceil(rows / BR);
  const out = engine.emptyTensor([p.B, p.Hq, p.Lq, p.Dv], q.dtype);
  const lse = engine.emptyTensor([p.B, p.Hq, p.Lq], 'f32');
  const [msB, msH, msI, msJ] = p.maskStrides;
  engine.dispatch(kernel, {
    q, k, v, out, lse, ...extra.bindings,
    mask: p.mask ? p.mask.buffer : engine.dummy,
    headp: headParams(engine, p.Hq, p.alibi, p.sinks),
  }, {
    B: p.B, Hq: p.Hq, Hkv: p.Hkv, Lq: p.Lq, Lk: p.Lk, G, rows, row_tiles: rowTiles,
    flags: sdpaFlags(p), window: p.window, scale: p.scale, softcap: p.softcap || 1,
    ms_b: msB, ms_h: msH, ms_i: msI, ms_j: msJ, ...(extra.chunks ?? { n_dc: 0, n_dk4: 0, n_bc: 0 }),
  }, rowTiles * p.B * p.Hkv);
  if (!withLse) {
    lse.destroy();
    return { out, lse: null };
  }
  return { out, lse };
}

export function encodeSdpaFlash(engine: Runtime, p: SdpaProblem, plan: FlashPlan, q: Tensor, k: Tensor, v: Tensor,
                                withLse: boolean): { out: Tensor; lse: Tensor | null } {
  const kernel = engine.kernel(plan.variant === 'subgroup' ? 'sdpa_flash_subgroup' : 'sdpa_flash', 'flash_main', {
    overrides: { IN_DTYPE: DTYPE_CODE[q.dtype], OUT_DTYPE: DTYPE_CODE[q.dtype] },
    consts: { TX: plan.TX, TY: plan.TY, TM: plan.TM, TN: plan.TN, DK: plan.DK, DVC: plan.DVC, D: p.D, DV: p.Dv,
              TILE4: plan.tile === 'f16' ? 'vec4<f16>' : 'vec4<f32>' },
    enables: [...(plan.tile === 'f16' ? ['f16'] : []), ...(plan.variant === 'subgroup' ? ['subgroups'] : [])],
  });
  return dispatchDense(engine, p, kernel, plan.TY * plan.TM, q, k, v, withLse,
    { chunks: { n_dc: p.D / plan.DK, n_dk4: plan.DK / 4, n_bc: plan.TX * plan.TN } });
}

// ------------------------------------------------------------------------------------------------
// The subgroup-matrix tile (shaders/attention/flash_mma_core.wgsl)

/** A plan of the subgroup-matrix tile: the matrix shape, NSG subgroups of SGW lanes, RB row blocks a
 *  subgroup, BC keys a tile. */
export interface FlashMmaPlan {
  readonly variant: 'subgroup-matrix';
  readonly M: number; readonly N: number; readonly K: number;
  readonly NSG: number; readonly SGW: number; readonly BC: number; readonly RB: number;
  /** Rows a workgroup owns (NSG·RB·M). */
  readonly BR: number;
  /** f32 data as hi + lo f16 halves (flash_mma_core.wgsl SPLIT): three products a step. */
  readonly split: boolean;
  readonly smem: number;
}

/**
 * Subgroups a workgroup, keys a tile and row blocks a subgroup, by preference: measured on an H200
 * (f16, L 4096, written-out loops; bench/notes/flash.md, runs 39-41): 4 subgroups × 32 keys 0.61 ms at
 * D 64, before 16 keys (0.70), 8 subgroups × 16 keys and 64 keys (45 KiB of workgroup storage: fewer
 * workgroups a SM); two row blocks a subgroup (each K and V matrix serving two products) ran 1.4-3.6x
 * slower (twice the matrices in registers). Workgroups of 2 subgroups gave NaN there (run 36, not
 * understood): not offered.
 */
const MMA_SHAPES: readonly { NSG: number; BC: number; RB: number }[] = [
  { NSG: 4, BC: 32, RB: 1 }, { NSG: 4, BC: 16, RB: 1 }, { NSG: 8, BC: 16, RB: 1 }, { NSG: 4, BC: 64, RB: 1 },
  { NSG: 8, BC: 32, RB: 1 }, { NSG: 4, BC: 32, RB: 2 }, { NSG: 4, BC: 16, RB: 2 },
];

/** Workgroup storage of the subgroup-matrix tile, in bytes (flash_mma_core.wgsl's arrays; `split`: the
 *  hi and lo copies of Q, K, V and P). */
export function flashMmaSmemBytes(M: number, N: number, K: number, NSG: number, BC: number, D: number, Dv: number, RB = 1,
                                  split = false): number {
  const NX = split ? 2 : 1;
  const DS = Math.ceil(D / K) * K + 8, VS = Math.ceil(Dv / N) * N + 8;
  const kv = NX * Math.max(NSG * M * DS, BC * (DS + VS));
  const pad4 = (b: number) => Math.ceil(b / 4) * 4;
  const rows = NSG * RB * M;
  return pad4(2 * kv) + 4 * rows * (BC + 4) + pad4(2 * NX * rows * (BC + 8)) + 4 * rows + 4 * NSG;
}

/**
 * Plans the subgroup-matrix tile, or returns null where it cannot run: no f16 → f32 configuration, no
 * shader-f16, subgroups of more than one size (the tile's rows are laid out by subgroup), or no shape
 * that fits the workgroup storage. `config` holds it to one of mmaConfigs' entries, `shape` to one of
 * MMA_SHAPES (tests and the benchmark); `split` plans for f32 data as hi + lo f16 halves.
 */
export function planFlashMma(limits: EngineLimits, features: EngineFeatures, D: number, Dv: number, smemCap = Infinity,
                             config?: number, shape?: number, split = false): FlashMmaPlan | null {
  const { sgw, configs } = mmaTileConfigs(features, config);
  const budget = Math.min(limits.maxComputeWorkgroupStorageSize, smemCap);
  for (const { M, N, K } of configs) {
    for (const [si, { NSG, BC, RB }] of MMA_SHAPES.entries()) {
      if (shape !== undefined && si !== shape) continue;
      // (BC / (sgw / M)) % 4: each lane's softmax columns are whole vec4s (flash_mma_core.wgsl CPL).
      if (BC % N || BC % K || (BC / (sgw / M)) % 4 || NSG * sgw > limits.maxComputeInvocationsPerWorkgroup || NSG * sgw > limits.maxComputeWorkgroupSizeX) continue;
      const smem = flashMmaSmemBytes(M, N, K, NSG, BC, D, Dv, RB, split);
      if (smem <= budget) return { variant: 'subgroup-matrix', M, N, K, NSG, SGW: sgw, BC, RB, BR: NSG * RB * M, split, smem };
    }
  }
  return null;
}

/**
 * The subgroup-matrix plan for f16 data, and for f32 data split into f16 halves (tuning.flashMmaSplit)
 * where the call returns no LSE, where 'auto' (or the tuning) asks for it and it runs here. The split
 * tile's scores carry about 22 bits of q and k: its output holds SPEC §6's f32 rules, but with large
 * scores its LSE (the max score plus a log) erred 3.5x a plain f32 implementation's on an H100 (run 90),
 * so calls that return the LSE keep the scalar tiles.
 */
export function flashMmaFor(engine: Runtime, dtype: string, D: number, Dv: number, withLse = false): FlashMmaPlan | null {
  const pref = engine.tuning.flashVariant;
  if (pref !== 'auto' && pref !== 'subgroup-matrix') return null;
  const split = dtype === 'f32' && engine.tuning.flashMmaSplit && !withLse;
  if ((dtype !== 'f16' && !split) || flashUnsupported(D, Dv)) return null;
  return planFlashMma(engine.limits, engine.features, D, Dv, engine.tuning.flashSmemBytes, engine.tuning.flashMmaConfig,
    engine.tuning.flashMmaShape, split);
}

/** The flash tile that runs, as the benchmark names it: the subgroup-matrix plan `mma` (flashMmaFor),
 *  or where there is none the scalar tile's variant. */
export function flashTileName(engine: Runtime, mma: FlashMmaPlan | null): string {
  return mma ? `subgroup-matrix ${mma.M}×${mma.N}×${mma.K}${mma.split ? ' split' : ''}` : flashVariantFor(engine);
}

/** The subgroup-matrix tile's kernel for an addressing mode ('sdpa_flash_mma', 'paged_flash_mma'); `words`:
 *  f16 rows staged as 16-byte words (contiguous key rows: dense addressing). */
export function flashMmaKernel(engine: Runtime, program: string, entry: string, plan: FlashMmaPlan, D: number, Dv: number,
                               overrides: Record<string, number>, words: boolean): Kernel {
  return engine.kernel(program, entry, {
    overrides,
    consts: {
      M: plan.M, N: plan.N, K: plan.K, NSG: plan.NSG, RB: plan.RB, SGW: plan.SGW, BC: plan.BC, D, DV: Dv,
      PROBE: engine.tuning.flashMmaProbe, WORDS: words, SPLIT: plan.split, FL: engine.tuning.flashMmaFlush,
    },
    enables: ['f16', 'subgroups', 'chromium_experimental_subgroup_matrix'],
    unroll: engine.tuning.flashMmaUnroll,
  });
}

export function encodeSdpaFlashMma(engine: Runtime, p: SdpaProblem, plan: FlashMmaPlan, q: Tensor, k: Tensor, v: Tensor,
                                   withLse: boolean): { out: Tensor; lse: Tensor | null } {
  // f16 rows staged as 16-byte words (flash_mma_core.wgsl WORDS; D and Dv are multiples of 8).
  const kernel = flashMmaKernel(engine, 'sdpa_flash_mma', 'flash_main', plan, p.D, p.Dv,
    { IN_DTYPE: DTYPE_CODE[q.dtype], OUT_DTYPE: DTYPE_CODE[q.dtype] }, engine.tuning.flashMmaWords && q.dtype === 'f16');
  return dispatchDense(engine, p, kernel, plan.BR, q, k, v, withLse, { bindings: { k_w: k, v_w: v } });
}
