// The linear layer of a transformer: out (+)= x · Wᵀ (+ bias), weights in HF's Linear layout W [N, K]
// (out × in), stored f32, f16 or bf16 (16-bit weights as u32 words of two, decoded in the shader: no
// shader-f16 needed). The GEMV and the FMA GEMM do f32 arithmetic throughout (f32 tolerances for every
// weight dtype); the subgroup-matrix GEMM multiplies f16 by f16 (see below for its accuracy).
//
// Three kernels, chosen by the number of rows M and the adapter (planLinear; thresholds below):
//
// GEMV (shaders/ops/gemv.wgsl; M <= LINEAR_GEMV_MAX_M: decode). Bandwidth-bound: the weight is read
//   exactly once, 16 bytes per load (4 f32 or 8 bf16 per word), with many loads in flight. A workgroup
//   of WG (256) threads = NGRP groups of KT lanes; a group owns R (4) weight rows, its lanes split K
//   (lane l reads chunks l, l+KT, ...: KT·16 contiguous bytes of a row per load instruction). Each
//   lane holds MT vec4s of partial sums, one lane of a vec4 per row of its group (MT·R scalars
//   indexed in nested loops ran M 16 five times slower on an H200, likely from local memory).
//   MT = the x rows of a workgroup, a power of two >= M up to 16; larger M runs as chunks of 16 in
//   neighbouring workgroups, which read the weights they share from L2 after the first. Each weight
//   word meets every x row (the weights are read once per workgroup and shared across M), each x load
//   meets the 4 weight rows. KT starts at 32 and doubles (up to the workgroup; 64 from MT 8 on) while
//   the grid has fewer than LINEAR_GEMV_TARGET_WORKGROUPS workgroups, so small N (k/v projections)
//   splits K over more lanes instead of leaving SMs idle.
//   The KT partials of an output meet by subgroup shuffles (the subgroup size read at run time: within
//   blocks of min(KT, size) lanes, then across blocks through workgroup memory, so 4..128 all work) or,
//   in the portable variant, through workgroup memory alone (PASS x rows at a time, within 16 KiB).
//   Measured on an H200 (Dawn/Vulkan; 4.4 TB/s read ceiling through WebGPU), bf16, M 1: 4.29 TB/s on
//   the 128256×4096 lm_head, 3.5 TB/s on 28672×4096, 3.2 TB/s on 4096×14336, 2.4 TB/s on 4096×4096
//   (32 MiB in 13.7 µs: launch and grid tail count). M 2: 18 µs, M 4: 26 µs, M 8: 59 µs, M 16: 120 µs
//   on 4096×4096: from M 8 on the kernel is far from both the bandwidth and the FMA ceiling; the
//   likely cause is the latency of the x loads (MT rows of x from L2 per chunk, few warps per SM).
//   Next step: stage x blocks in workgroup memory, loaded once per workgroup with wide coalesced loads.
//
// GEMM (shaders/ops/gemm.wgsl; larger M: prefill). Compute-bound: BM×BN output tiles, BK = 16 k per
//   step through workgroup memory, each of NT = 256 threads owning TM×TN outputs as 4×4 blocks strided
//   so neighbouring threads read consecutive vec4s (conflict-free); one k step of a thread is
//   TM/4 + TN/4 vec4 reads for TM·TN FMAs (8×4: 10.7 FMAs per read). The tiles are stored k-major and
//   transposed on the way in (weights decoded from 16 bits once per tile element); the next tile's
//   global loads are issued before the current tile's FMAs. Tiles (LINEAR_GEMM_TILES): 128×64 (8×4
//   per thread, 12 KiB of workgroup memory) when that gives at least LINEAR_GEMM_TARGET_WORKGROUPS
//   workgroups, else 64×64 (4×4 per thread, 8 KiB), else 32×32 where only 64 invocations are allowed;
//   all fit WebGPU's 16 KiB minimum. Output-row tiles run fastest so the workgroups sharing a weight
//   tile run together (L2 reuse).
//   Measured on an H200 (64 TFLOP/s f32 FMA ceiling through WebGPU), N = K = 4096: 128×64 at M 2048
//   28.2 TFLOP/s with bf16 weights (44% of the ceiling), 29.5 with f32, 27.8 at M 512; 64×64 at M 2048
//   21 TFLOP/s, 11 at M 128. Plans with 8 output columns per
//   thread (128×128 8×8, 64×128 4×8) ran at 2.2 TFLOP/s there (the driver's code for them, not the
//   memory system): they are not offered. Below ~512 rows the grid is small (64×64 tiles: one
//   workgroup per SM at M 128, N 4096) and each workgroup's K loop is latency-bound; split-K would help.
//
// GEMM on subgroup matrices (shaders/ops/gemm_mma.wgsl + gemm_mma_linear.wgsl; 16-bit weights, prefill,
//   where the adapter offers f16 → f32 subgroup matrices and engine.tuning.linearMma is 'auto'): tensor
//   units (NVIDIA's cooperative matrices, Apple's simdgroup matrices). Tiles LINEAR_MMA_TILES, vec4<f16>
//   staging, the next tile's loads in flight; x split into hi + lo f16 halves (two products a step, ~22
//   bits of x) unless `split: false` (x rounded to f16). The tensor units sum f16 × f16 products in f32
//   but truncate as they add: at K 14336 the split GEMM errs up to ~15x the f32 tolerance (within SPEC
//   §6's bf16 row). Measured on an H200 (600 TFLOP/s matrix ceiling through WebGPU), Llama-3-8B's
//   layers at M ≥ 2048: split 96-100 TFLOP/s, f16 x 117-123; at M 512 62-87 and 84-107 (run 64;
//   bench/notes/gemm.md). The tile: the first of LINEAR_MMA_TILES with LINEAR_MMA_TARGET_WORKGROUPS. The same
//   core serves ops.moe's grouped products (moe_gemm_mma.wgsl).
//
// Decode-sized steps on subgroup matrices (M from engine.tuning.linearDecodeMmaMinM, 4, or quantDecodeMmaMinM, 3,
//   for quantized weights, to LINEAR_GEMV_MAX_M):
//   the GEMV above reads the weights once per 16 rows of x and, from 8 rows on, is far from both ceilings;
//   the same matrix GEMM over row tiles of 16, 32 or 64 rows (LINEAR_MMA_DECODE_TILES: narrow column tiles
//   so that decode's small N still fills the GPU; a weight tile is read once per row tile) ran Llama-3.2-1B's
//   layers 1.3-5x faster from 16 rows on (H200, run 103). Where the grid is short (o and down, N 2048),
//   K is split over workgroups and a second pass (gemm_splitk.wgsl) adds the splits with the epilogue:
//   down at M 16 went from 0.117 to 0.036 ms (run 106). planLinear takes it where the adapter has f16
//   subgroup matrices, from 4 or 3 rows (linearDecodeMmaMinM, quantDecodeMmaMinM: whole steps measured, issue 45)
//   where its grid has LINEAR_MMA_DECODE_MIN_WORKGROUPS;
//   `npm run bench -- --suite=gemv` times both and says which it picked.
//
// Weights larger than the device's largest storage binding (min of maxStorageBufferBindingSize and
// maxBufferSize) are split into parts of whole rows, one buffer each; each part is its own dispatch
// writing its own output columns (maxPartBytes forces splitting at small sizes for tests).
// Fused prologues: gatherRows (row m of the input is x[gatherRows[m]]: the lm_head on each sequence's
// last token) and act 'silu_mul' (x rows hold [gate | up]; the input is silu(gate)·up, computed on
// load). Fused epilogue: bias, and `accumulate` (out += ...: the residual stream).
// Permuted input columns (LinearWeight.perm, createQuantLinear's `perm`: GPTQ's desc_act checkpoints,
// whose g_idx scatters a group's columns along K; the loader sorts the columns by group so the blocks
// are contiguous): stored column j holds original input column perm[j], so the input is gathered first,
// x'[m, j] = in(m, perm[j]) (shaders/ops/gather_cols.wgsl, with the row gather, the SiLU-gated product
// and a folded RMSNorm applied there), into scratch, and the product runs on x' without a prologue.
import { DTYPE_BYTES, DTYPE_CODE } from '../core/dtype.js';
import { WebinferError, check, checkFinite, fail, fmt, isPosInt, shapeStr } from '../core/errors.js';
import { mmaConfigs, type Runtime } from '../core/runtime.js';
import type { Kernel } from '../core/pipeline.js';
import { BufferPool, checkTensor, type Tensor } from '../core/tensor.js';
import { QUANT_DOT_TYPES, QUANT_FORMATS, QUANT_TYPES, hasQuantDot, isQuantType, quantRowBytes, type QuantType } from '../core/quant.js';
import { packQuantRows, quantPackedBytes, quantPlaneWord } from './quant.js';

export type LinearDType = 'f32' | 'f16' | 'bf16';
const LINEAR_DTYPES: readonly LinearDType[] = ['f32', 'f16', 'bf16'];
/** How a linear weight is stored: a float dtype, or one of ggml's quantized block types (SPEC §8). */
export type LinearStorage = LinearDType | QuantType;
export const isLinearStorage = (d: unknown): d is LinearStorage => LINEAR_DTYPES.includes(d as LinearDType) || isQuantType(d);

/** GPU bytes of `rows` rows of K values stored as `dtype` (quantized: the blocks, padded to a word). */
export function storageBytes(dtype: LinearStorage, rows: number, K: number): number {
  return isQuantType(dtype) ? quantPackedBytes(dtype, rows, K) : rows * K * DTYPE_BYTES[dtype];
}

/** The program suffix and W_DTYPE of weights stored as `dtype`: a quantized type's decoder
 *  (`gemv.q4_k` ..., core/shaders.ts) and its words dequantized to f32, or to f16 on their way into the
 *  subgroup matrices (`matrices`); 16/32-bit weights as they are. */
export function weightProgram(dtype: LinearStorage, matrices: boolean): { tail: string; W_DTYPE: number } {
  if (!isQuantType(dtype)) return { tail: '', W_DTYPE: DTYPE_CODE[dtype] };
  return { tail: `.${dtype.toLowerCase()}`, W_DTYPE: matrices ? DTYPE_CODE.f16 : DTYPE_CODE.f32 };
}

export interface LinearPart {
  /** How this part is stored, where it differs from the weight's dtype (stackLinears: a fused
   *  projection of tensors quantized with different types, as GGUF's mixes have them). */
  readonly dtype?: LinearStorage;
  readonly tensor: Tensor;
  /** First row of the whole weight that this part holds. */
  readonly row0: number;
  readonly rows: number;
}

/** A weight W [N, K] on the GPU, possibly split by rows over several buffers, with its optional bias. */
export interface LinearWeight {
  readonly N: number;
  readonly K: number;
  readonly dtype: LinearStorage;
  readonly parts: readonly LinearPart[];
  readonly bias: Tensor | null;
  /** i32 [K], or null: stored column j holds original input column perm[j] (createQuantLinear's perm);
   *  linear gathers its input by it. */
  readonly perm: Tensor | null;
  destroy(): void;
}

class Linear implements LinearWeight {
  /** `permTensors`: the perm tensors this weight frees (a stack's parts each brought their own). */
  constructor(readonly N: number, readonly K: number, readonly dtype: LinearStorage, readonly parts: readonly LinearPart[],
              readonly bias: Tensor | null, private readonly owned: boolean, readonly perm: Tensor | null = null,
              private readonly permTensors: readonly Tensor[] = perm ? [perm] : []) {}

  destroy(): void {
    if (!this.owned) return;
    for (const p of this.parts) p.tensor.destroy();
    this.bias?.destroy();
    for (const t of this.permTensors) t.destroy();
  }
}

/** The host copy of each perm tensor createQuantLinear made (stackLinears compares contents). */
const permHost = new WeakMap<Tensor, Int32Array>();

/** Checks that perm is a permutation of 0..K-1 (an Int32Array of K values). */
function checkPerm(op: string, perm: unknown, K: number): perm is Int32Array {
  if (perm === undefined || perm === null) return false;
  check(perm instanceof Int32Array && perm.length === K, op, 'perm', `an Int32Array of K=${K} values`,
    perm instanceof Int32Array ? `${perm.length} values` : perm);
  const seen = new Uint8Array(K);
  for (let j = 0; j < K; j++) {
    const v = perm[j];
    check(v >= 0 && v < K && !seen[v], op, 'perm', `a permutation of 0..${K - 1} (each input column once)`,
      v >= 0 && v < K ? `column ${v} twice (perm[${j}])` : `perm[${j}] = ${v}`);
    seen[v] = 1;
  }
  return true;
}

/** perm (checked by checkPerm) on the GPU, its host copy kept for stackLinears. */
function uploadPerm(rt: Runtime, perm: Int32Array): Tensor {
  const t = rt.tensor(perm, [perm.length], 'i32');
  permHost.set(t, Int32Array.from(perm));
  return t;
}

/** Whether two weights' perms are the same permutation (both none, one tensor, or equal contents). */
function samePerm(a: Tensor | null, b: Tensor | null): boolean {
  if (a === b) return true;
  if (!a || !b) return false;
  const ha = permHost.get(a), hb = permHost.get(b);
  return !!ha && !!hb && ha.length === hb.length && ha.every((v, i) => v === hb[i]);
}

/** Elements per 16-byte weight load: K must be a multiple of it (every row starts 16-byte aligned).
 *  Quantized weights reach the GEMV and the FMA GEMM as 4 dequantized f32 values a load. */
export function linearVectorWidth(dtype: LinearStorage): number {
  return dtype === 'f32' || isQuantType(dtype) ? 4 : 8;
}

/** Values a plan's kernel reads a weight load (its EPV): 16 bytes' worth, 8 on the matrices, 32 for a
 *  quantized GEMV (a lane's unit). */
function planEPV(kernel: LinearPlan['kernel'], dtype: LinearStorage): number {
  return kernel === 'gemm-mma' ? 8 : kernel === 'gemv' && isQuantType(dtype) ? 32 : linearVectorWidth(dtype);
}

/** GPU bytes of a linear weight's values as stored (its parts; the bias not counted). */
export function linearWeightBytes(w: LinearWeight): number {
  let n = 0;
  for (const p of w.parts) {
    const d = p.dtype ?? w.dtype;
    n += storageBytes(d, p.rows, w.K);
  }
  return n;
}

function checkShapeArgs(op: string, N: unknown, K: unknown, dtype: unknown, float = false): void {
  check(isPosInt(N), op, 'N', 'a positive integer', N);
  check(isPosInt(K), op, 'K', 'a positive integer', K);
  if (float) check(LINEAR_DTYPES.includes(dtype as LinearDType), op, 'dtype', "'f32', 'f16' or 'bf16' (quantized weights: createQuantLinear)", fmt(dtype));
  check(isLinearStorage(dtype), op, 'dtype', `'f32', 'f16', 'bf16' or a quantized type (${QUANT_TYPES.join(', ')})`, fmt(dtype));
  if (isQuantType(dtype)) {
    const qk = QUANT_FORMATS[dtype].blockElems;
    check((K as number) % qk === 0, op, 'K', `a multiple of ${qk} for ${dtype} weights (whole blocks a row)`, K);
    return;
  }
  const v = linearVectorWidth(dtype);
  check((K as number) % v === 0, op, 'K', `a multiple of ${v} for ${dtype} weights (rows are read 16 bytes at a time)`, K);
}

/**
 * Rows per part of a [N, K] weight: as many as fit the device's largest storage binding (and
 * maxPartBytes, when given), counting the buffer pool's rounding of sizes.
 */
export function linearRowsPerPart(rt: Runtime, K: number, dtype: LinearStorage, maxPartBytes = Infinity, op = 'createLinear'): number {
  const rowBytes = storageBytes(dtype, 1, K);
  const deviceMax = Math.min(rt.limits.maxStorageBufferBindingSize, rt.limits.maxBufferSize);
  let rows = Math.floor(Math.min(deviceMax, maxPartBytes) / rowBytes);
  while (rows > 0 && BufferPool.sizeClass(rows * rowBytes) > deviceMax) rows = Math.min(rows - 1, Math.floor(rows * 0.99));
  if (rows < 1) {
    fail(op, maxPartBytes < deviceMax ? 'maxPartBytes' : 'K', `room for one weight row of ${rowBytes} bytes (K=${K} ${dtype})`,
      `${Math.min(deviceMax, maxPartBytes)} bytes per part`);
  }
  return rows;
}

function partRanges(N: number, perPart: number): { row0: number; rows: number }[] {
  const parts = Math.ceil(N / perPart);
  // Even parts (not full ones and a remainder): the dispatches stay alike.
  const base = Math.ceil(N / parts);
  const out: { row0: number; rows: number }[] = [];
  for (let r = 0; r < N; r += base) out.push({ row0: r, rows: Math.min(base, N - r) });
  return out;
}

function uploadBias(rt: Runtime, op: string, bias: unknown, N: number): Tensor | null {
  if (bias === undefined || bias === null) return null;
  check(bias instanceof Float32Array && bias.length === N, op, 'bias', `a Float32Array of N=${N} values`, bias);
  return rt.tensor(bias, [N], 'f32');
}

/**
 * Uploads a weight W [N, K] (row-major, HF Linear layout). data: Float32Array (converted to f16/bf16
 * with round-to-nearest-even when dtype is 16-bit) or Uint16Array of raw f16/bf16 bits. Rows are
 * split over several buffers when the weight exceeds the device's largest storage binding (or
 * maxPartBytes).
 */
export function createLinear(rt: Runtime, w: { data: Float32Array | Uint16Array; N: number; K: number; dtype: LinearDType;
                                               bias?: Float32Array; maxPartBytes?: number }): LinearWeight {
  const op = 'createLinear';
  rt.assertAlive(op);
  check(w !== null && typeof w === 'object', op, 'w', 'an object { data, N, K, dtype }', w);
  const { data, N, K, dtype } = w;
  checkShapeArgs(op, N, K, dtype, true);
  if (dtype === 'f32') check(data instanceof Float32Array, op, 'data', "a Float32Array for dtype 'f32'", data);
  else check(data instanceof Float32Array || data instanceof Uint16Array, op, 'data', `a Float32Array or a Uint16Array of ${dtype} bits`, data);
  check(data.length === N * K, op, 'data', `N·K = ${N * K} elements`, `${data.length}`);
  if (w.maxPartBytes !== undefined) check(isPosInt(w.maxPartBytes), op, 'maxPartBytes', 'a positive integer', w.maxPartBytes);
  const bias = uploadBias(rt, op, w.bias, N);
  const parts = partRanges(N, linearRowsPerPart(rt, K, dtype, w.maxPartBytes, op)).map(({ row0, rows }) => ({
    row0, rows, tensor: rt.tensor(data.subarray(row0 * K, (row0 + rows) * K), [rows, K], dtype),
  }));
  return new Linear(N, K, dtype, parts, bias, true);
}

/**
 * One weight of the rows of several, stacked in order (q | k | v): their parts, renumbered. Quantized
 * weights of different types stack (each part keeps its type); float weights stack with float weights
 * of the same dtype only. The result owns the parts (destroy frees them) and has no bias unless one is
 * given for all N rows.
 */
export function stackLinears(rt: Runtime, ws: readonly LinearWeight[], bias?: Float32Array): LinearWeight {
  const op = 'stackLinears';
  rt.assertAlive(op);
  check(Array.isArray(ws) && ws.length > 0, op, 'ws', 'a non-empty array of LinearWeights', ws);
  ws.forEach((w, i) => checkWeight(w, op, `ws[${i}]`));
  const K = ws[0].K;
  const quant = isQuantType(ws[0].dtype);
  ws.forEach((w, i) => {
    check(w.K === K, op, `ws[${i}].K`, `K=${K} (that of ws[0])`, w.K);
    check(isQuantType(w.dtype) === quant && (quant || w.dtype === ws[0].dtype), op, `ws[${i}].dtype`,
      quant ? 'a quantized type (as ws[0])' : `'${ws[0].dtype}' (as ws[0])`, fmt(w.dtype));
    check(w.bias === null, op, `ws[${i}].bias`, 'none (pass the stacked bias)', 'a bias');
    // One input gather serves every row of the stack: the parts must permute K alike.
    const pw = w.perm ?? null, p0 = ws[0].perm ?? null;
    check(samePerm(pw, p0), op, `ws[${i}].perm`, p0 ? 'the same input permutation as ws[0]' : 'none (as ws[0])',
      pw ? (p0 ? 'a different permutation' : 'a permutation') : 'none');
  });
  const parts: LinearPart[] = [];
  let row0 = 0;
  for (const w of ws) {
    for (const p of w.parts) parts.push({ tensor: p.tensor, row0: row0 + p.row0, rows: p.rows, dtype: p.dtype ?? w.dtype });
    row0 += w.N;
  }
  const perms = [...new Set(ws.map((w) => w.perm).filter((t): t is Tensor => !!t))];
  return new Linear(row0, K, ws[0].dtype, parts, uploadBias(rt, op, bias, row0), true, ws[0].perm ?? null, perms);
}

/**
 * Uploads a quantized weight W [N, K] from its GGUF bytes (ggml's blocks, rows one after the other,
 * N · K / QK blocks): the blocks keep their bits on the GPU (src/ops/quant.ts says how they are laid
 * out), split by rows over buffers as createLinear does. perm (a permutation of 0..K-1): the stored
 * column j holds original input column perm[j] (GPTQ desc_act: the columns sorted by g_idx); linear
 * then gathers its input by it.
 */
export function createQuantLinear(rt: Runtime, w: { data: Uint8Array; N: number; K: number; type: QuantType;
                                                    bias?: Float32Array; maxPartBytes?: number; perm?: Int32Array }): LinearWeight {
  const op = 'createQuantLinear';
  rt.assertAlive(op);
  check(w !== null && typeof w === 'object', op, 'w', 'an object { data, N, K, type }', w);
  const { data, N, K, type } = w;
  check(isQuantType(type), op, 'type', `a quantized type (${QUANT_TYPES.join(', ')})`, fmt(type));
  checkShapeArgs(op, N, K, type);
  const rowBytes = quantRowBytes(type, K);
  check(data instanceof Uint8Array && data.length === N * rowBytes, op, 'data', `a Uint8Array of ${N * rowBytes} bytes (N=${N} rows × K=${K} ${type} values)`,
    data instanceof Uint8Array ? `${data.length} bytes` : data);
  if (w.maxPartBytes !== undefined) check(isPosInt(w.maxPartBytes), op, 'maxPartBytes', 'a positive integer', w.maxPartBytes);
  const rowsPerPart = linearRowsPerPart(rt, K, type, w.maxPartBytes, op);
  const permuted = checkPerm(op, w.perm, K);
  const bias = uploadBias(rt, op, w.bias, N);
  const parts = partRanges(N, rowsPerPart).map(({ row0, rows }) => {
    const { words } = packQuantRows(type, data.subarray(row0 * rowBytes, (row0 + rows) * rowBytes), rows, K, op);
    return { row0, rows, tensor: rt.tensor(words, [words.length], 'u32') };
  });
  return new Linear(N, K, type, parts, bias, true, permuted ? uploadPerm(rt, w.perm!) : null);
}

const INIT_WG = 256;

/**
 * A weight W [N, K] filled on the GPU with pseudo-random values (no upload: benchmarks of real model
 * sizes). Element (n, k) is uniform on (-std·√3, std·√3) (mean 0, standard deviation std), a function
 * of (seed, n, k) alone (shaders/ops/gemm_init.wgsl; randomLinearValues mirrors it on the host),
 * then rounded to dtype.
 */
export function createLinearOnDevice(rt: Runtime, o: { N: number; K: number; dtype: LinearDType; seed?: number; std?: number;
                                                       bias?: Float32Array; maxPartBytes?: number }): LinearWeight {
  const op = 'createLinearOnDevice';
  rt.assertAlive(op);
  check(o !== null && typeof o === 'object', op, 'o', 'an object { N, K, dtype }', o);
  const { N, K, dtype } = o;
  checkShapeArgs(op, N, K, dtype, true);
  const seed = o.seed ?? 0;
  check(Number.isInteger(seed) && seed >= 0 && seed < 2 ** 32, op, 'seed', 'an integer in [0, 2^32)', seed);
  const std = checkFinite(o.std ?? 1, op, 'std');
  if (o.maxPartBytes !== undefined) check(isPosInt(o.maxPartBytes), op, 'maxPartBytes', 'a positive integer', o.maxPartBytes);
  const bias = uploadBias(rt, op, o.bias, N);
  const kernel = rt.kernel('gemm_init', 'init_main', { overrides: { W_DTYPE: DTYPE_CODE[dtype], WG: INIT_WG } });
  const parts = partRanges(N, linearRowsPerPart(rt, K, dtype, o.maxPartBytes, op)).map(({ row0, rows }) => {
    const tensor = rt.emptyTensor([rows, K], dtype, false);
    const words = tensor.byteLength / 4;
    rt.dispatch(kernel, { dst: tensor }, { words, row0, K, seed, amp: Math.fround(std * Math.sqrt(3)) }, Math.ceil(words / INIT_WG));
    return { row0, rows, tensor };
  });
  return new Linear(N, K, dtype, parts, bias, true);
}

function pcg(v: number): number {
  const s = (Math.imul(v >>> 0, 747796405) + 2891336453) >>> 0;
  const t = Math.imul(((s >>> ((s >>> 28) + 4)) ^ s) >>> 0, 277803737) >>> 0;
  return ((t >>> 22) ^ t) >>> 0;
}

/** The values createLinearOnDevice writes for rows [row0, row0 + rows) (f32, before rounding to a
 *  16-bit dtype), computed on the host. */
export function randomLinearValues(K: number, seed: number, std = 1, row0 = 0, rows = 1): Float32Array {
  const amp = Math.fround(std * Math.sqrt(3));
  const out = new Float32Array(rows * K);
  for (let r = 0; r < rows; r++) {
    const hn = pcg((row0 + r + pcg(seed)) >>> 0);
    for (let k = 0; k < K; k++) {
      const h = pcg((k + hn) >>> 0);
      const u = ((h >>> 9) + 0.5) * 2 ** -22 - 1;
      out[r * K + k] = Math.fround(u * amp);
    }
  }
  return out;
}

/**
 * Wraps weight tensors made elsewhere (a checkpoint loader's, an embedding tied to the lm_head): one
 * tensor [N, K], or parts [rows, K] covering rows 0..N-1 in order. destroy() frees them only when
 * `owned`.
 */
export function linearFromParts(rt: Runtime, o: { N: number; K: number; dtype: LinearDType; parts: Tensor | readonly Tensor[];
                                                  bias?: Tensor | null; owned?: boolean }): LinearWeight {
  const op = 'linearFromParts';
  rt.assertAlive(op);
  check(o !== null && typeof o === 'object', op, 'o', 'an object { N, K, dtype, parts }', o);
  const { N, K, dtype } = o;
  checkShapeArgs(op, N, K, dtype, true);
  const list = Array.isArray(o.parts) ? o.parts as readonly Tensor[] : [o.parts as Tensor];
  check(list.length > 0, op, 'parts', 'at least one tensor', '[]');
  const parts: LinearPart[] = [];
  let row0 = 0;
  list.forEach((t, i) => {
    checkTensor(t, op, `parts[${i}]`);
    check(t.dtype === dtype, op, `parts[${i}].dtype`, `'${dtype}'`, fmt(t.dtype));
    check(t.shape.length === 2 && t.shape[1] === K && row0 + t.shape[0] <= N, op, `parts[${i}]`,
      `shape [rows <= ${N - row0}, K=${K}]`, shapeStr(t.shape));
    parts.push({ tensor: t, row0, rows: t.shape[0] });
    row0 += t.shape[0];
  });
  check(row0 === N, op, 'parts', `rows adding up to N=${N}`, `${row0} rows`);
  const bias = o.bias ?? null;
  if (bias) {
    checkTensor(bias, op, 'bias');
    check(bias.dtype === 'f32' && bias.shape.length === 1 && bias.shape[0] === N, op, 'bias', `an f32 tensor [N=${N}]`,
      `${bias.dtype} ${shapeStr(bias.shape)}`);
  }
  return new Linear(N, K, dtype, parts, bias, !!o.owned);
}

// ------------------------------------------------------------------------------------------ planning

/** M at or below which the GEMV kernel runs (decode); above it the tiled GEMM (prefill). H200, bf16
 *  N = K = 4096: GEMV 286-349 µs against GEMM 374-471 µs for M 17..64, 758 against 384 at M 128. */
export const LINEAR_GEMV_MAX_M = 64;
/** GEMV splits K over more lanes (KT) until the grid has this many workgroups (or KT spans the workgroup). */
export const LINEAR_GEMV_TARGET_WORKGROUPS = 512;
/** The quantized GEMV's dot path splits K over more lanes only while its grid is short of this many
 *  workgroups (about one an SM on an H200). */
export const LINEAR_GEMV_QDOT_MIN_WORKGROUPS = 128;
/** The 128×64 GEMM tile is used when it gives at least this many workgroups; else 64×64. */
export const LINEAR_GEMM_TARGET_WORKGROUPS = 256;

export interface GemmTile { readonly BM: number; readonly BN: number; readonly BK: number; readonly TM: number; readonly TN: number }
/** GEMM tiles by preference (all with BK 16); 256 threads except the last (64). Measured on an H200 (bf16
 *  weights, M 2048, N = K = 4096): 128×64 with 8×4 per thread 28 TFLOP/s, 64×64 with 4×4 21 TFLOP/s;
 *  every plan with 8 columns per thread (128×128 8×8, 64×128 4×8) ran at ~2.2 TFLOP/s there. */
export const LINEAR_GEMM_TILES: readonly GemmTile[] = [
  { BM: 128, BN: 64, BK: 16, TM: 8, TN: 4 },
  { BM: 64, BN: 64, BK: 16, TM: 4, TN: 4 },
  { BM: 32, BN: 32, BK: 16, TM: 4, TN: 4 },
];

/** Subgroup-matrix GEMM tiles (gemm_mma.wgsl): SGR × SGC subgroups, each owning TMR × TNC result
 *  matrices, k advancing BK at a time; the output tile is (SGR·TMR·M) × (SGC·TNC·N) for an M×N×K
 *  configuration. Preferred first (the planner takes the first that fits and fills the GPU). */
export interface GemmMmaTile {
  readonly SGR: number; readonly SGC: number; readonly TMR: number; readonly TNC: number; readonly BK: number;
  /** k tiles whose loads are in flight ahead of the one multiplied (1 or 2). */
  readonly PF: number;
  /** The weight tile stored k-major (right matrices loaded row-major) rather than a row per output column. */
  readonly TW?: boolean;
  /** The tiles as vec4<f16> arrays (gemm_mma_vec.wgsl: a store per four values; not with TW). */
  readonly VEC?: boolean;
}
/**
 * The subgroup-matrix GEMM takes the first tile of LINEAR_MMA_TILES that gives this many workgroups (else
 * the smallest): one 128×256 workgroup fills a SM, and on the H200 (132 SMs; run 63, M 512) 96 of them
 * (N 6144) still beat every smaller tile while 64 (N 4096) left half the GPU idle. LINEAR_GEMM_TARGET_WORKGROUPS,
 * the FMA GEMM's 256, had sent every M 512 layer but gate|up to the 64×64 tile, 1.4-1.6x slower.
 */
export const LINEAR_MMA_TARGET_WORKGROUPS = 96;

export const LINEAR_MMA_TILES: readonly GemmMmaTile[] = [
  // H200, bf16 weights, M 2048, N = K = 4096, x in f16 (runs 48-50): 112 TFLOP/s; the k-major weight tile
  // 95; 128×128 with BK 64 101 (VEC) and 87; two tiles of loads in flight (PF 2) 89; 256×128 92;
  // 4 subgroups of 4×4 53; 64×64 56.
  { SGR: 2, SGC: 4, TMR: 4, TNC: 4, BK: 32, PF: 1, VEC: true },
  { SGR: 2, SGC: 4, TMR: 4, TNC: 2, BK: 64, PF: 1, VEC: true },
  // Grids too small for the 128×256 tile (run 63, M 512, N 4096, 64 of its workgroups on 132 SMs): the
  // 128×128 ones, f16 x at BK 64 (above: 0.19 ms at K 4096 against 0.30), split at BK 32 (0.27 against 0.37).
  { SGR: 2, SGC: 4, TMR: 4, TNC: 2, BK: 32, PF: 1, VEC: true },
  { SGR: 2, SGC: 4, TMR: 4, TNC: 4, BK: 32, PF: 1, TW: true },
  { SGR: 2, SGC: 4, TMR: 4, TNC: 4, BK: 32, PF: 1 },
  { SGR: 2, SGC: 4, TMR: 4, TNC: 2, BK: 64, PF: 1, TW: true },
  { SGR: 2, SGC: 4, TMR: 4, TNC: 4, BK: 32, PF: 2 },
  { SGR: 4, SGC: 2, TMR: 4, TNC: 4, BK: 32, PF: 1 },
  { SGR: 2, SGC: 4, TMR: 4, TNC: 2, BK: 32, PF: 1 },
  { SGR: 2, SGC: 4, TMR: 4, TNC: 2, BK: 64, PF: 1 },
  { SGR: 2, SGC: 4, TMR: 4, TNC: 2, BK: 64, PF: 2 },
  { SGR: 2, SGC: 2, TMR: 4, TNC: 4, BK: 64, PF: 1 },
  { SGR: 2, SGC: 2, TMR: 4, TNC: 4, BK: 32, PF: 1 },
  { SGR: 4, SGC: 2, TMR: 2, TNC: 4, BK: 32, PF: 1 },
  { SGR: 2, SGC: 2, TMR: 2, TNC: 2, BK: 32, PF: 1, VEC: true },
];

/**
 * Subgroup-matrix tiles for decode-sized steps (M ≤ LINEAR_GEMV_MAX_M rows, engine.tuning.linearDecodeMma).
 * The first three are the planner's, for row tiles of 16, 32 and 64 rows (at 16-row matrices); the rest
 * are there for `npm run bench -- --suite=gemv --explore-gemv`. Measured on an H200 (run 103, Llama-3.2-1B's
 * layers, bf16): the 16×64 tile of vec4<f16> staging ran every layer fastest at M 8-64 (qkv at M 64 in
 * 0.040 ms against the GEMV's 0.198; down 0.113 against 0.455) except gate|up from M 32 (N 16384), where
 * 512 or more of its workgroups lose to 256 of 32×64 (0.077 ms) and 64×64 (0.120 ms at M 64); taller
 * tiles with fewer workgroups, more subgroups or deeper k steps were slower. So the planner takes the
 * tallest of the three whose grid still has LINEAR_MMA_DECODE_TARGET_WORKGROUPS workgroups, else 16 rows.
 */
export const LINEAR_MMA_DECODE_TILES: readonly GemmMmaTile[] = [
  { SGR: 1, SGC: 4, TMR: 1, TNC: 1, BK: 64, PF: 1, VEC: true },    // 16 × 64, 4 subgroups
  { SGR: 1, SGC: 4, TMR: 2, TNC: 1, BK: 64, PF: 1, VEC: true },    // 32 × 64
  { SGR: 2, SGC: 4, TMR: 2, TNC: 1, BK: 32, PF: 1 },               // 64 × 64, 8 subgroups
  { SGR: 1, SGC: 4, TMR: 1, TNC: 1, BK: 64, PF: 1 },
  { SGR: 1, SGC: 4, TMR: 1, TNC: 1, BK: 128, PF: 2 },
  { SGR: 1, SGC: 8, TMR: 1, TNC: 1, BK: 64, PF: 1 },               // 16 × 128, 8 subgroups
  { SGR: 1, SGC: 2, TMR: 1, TNC: 1, BK: 128, PF: 1 },              // 16 × 32, 2 subgroups
  { SGR: 1, SGC: 4, TMR: 2, TNC: 1, BK: 64, PF: 1 },
  { SGR: 2, SGC: 4, TMR: 1, TNC: 1, BK: 64, PF: 1 },               // 32 × 64, 8 subgroups
  { SGR: 1, SGC: 2, TMR: 2, TNC: 1, BK: 128, PF: 1 },              // 32 × 32
  { SGR: 1, SGC: 4, TMR: 4, TNC: 1, BK: 64, PF: 1 },               // 64 × 64
  { SGR: 1, SGC: 4, TMR: 4, TNC: 1, BK: 64, PF: 1, VEC: true },
  { SGR: 1, SGC: 2, TMR: 4, TNC: 1, BK: 64, PF: 1 },               // 64 × 32
];
/** The planner's decode tiles: LINEAR_MMA_DECODE_TILES[0..PLANNED) (16, 32 and 64 rows). */
const LINEAR_MMA_DECODE_PLANNED = 3;
/**
 * Below 16 rows decode-sized steps take the matrix GEMM only where its grid (K splits included) has this
 * many workgroups. Without split-K, at M 8 it lost to the GEMV at N 2048 (32 workgroups; H200, run 103);
 * with it, it won at every layer of Llama-3.2-1B from M 8 (o 0.034 ms against 0.037, down 0.036 against
 * 0.066; run 106) and lost at M 4 (down 0.036 against 0.029); whole steps later won from M 4 (runtime.ts
 * linearDecodeMmaMinM says where).
 */
export const LINEAR_MMA_DECODE_MIN_WORKGROUPS = 48;
/** The planner takes the tallest planned tile whose grid has this many workgroups (see LINEAR_MMA_DECODE_TILES). */
export const LINEAR_MMA_DECODE_TARGET_WORKGROUPS = 256;

export interface GemmMmaPlan {
  readonly kernel: 'gemm-mma';
  readonly EPV: number;
  /** The subgroup-matrix configuration (f16 × f16 → f32) and the adapter's subgroup size. */
  readonly SM: number; readonly SN: number; readonly SK: number; readonly SGW: number;
  readonly SGR: number; readonly SGC: number; readonly TMR: number; readonly TNC: number; readonly BK: number; readonly PF: number; readonly TW: boolean; readonly VEC: boolean;
  /** The output tile. */
  readonly BM: number; readonly BN: number;
  /** x as two f16 halves (hi + lo: f32 accuracy) or rounded to f16 once. */
  readonly split: boolean;
  /** Workgroup storage in bytes. */
  readonly smem: number;
  /** K split over this many workgroups (1: none), their partial sums added by gemm_splitk.wgsl. */
  readonly KS: number;
}

/** A quantized GEMV's path (PlanLinearOptions.quantPath). */
export type QuantPath = 'dot' | 'idot' | 'decode';

export type LinearPlan =
  | { readonly kernel: 'gemv'; readonly variant: 'subgroup' | 'portable'; readonly EPV: number; readonly MT: number;
      /** Weight rows per group (the lanes of a vec4): 4 for 16/32-bit weights, 1, 2 or 4 for quantized ones. */
      readonly R: 1 | 2 | 4; readonly KT: number; readonly WG: number; readonly PASS: number;
      /** Quantized weights: the dot path, on 8-bit activations, or the decode path (PlanLinearOptions.quantPath); absent otherwise. */
      readonly quantPath?: QuantPath;
      /** Quantized weights: x units (of 32 values) a row staged in workgroup memory at a time (gemv_xstage.wgsl). */
      readonly CU?: number;
      /** The dot path at MT > 1: each unit meets the x rows one at a time (gemv_qdot.wgsl XR; PlanLinearOptions.rowsEach). */
      readonly rowsEach?: boolean }
  | ({ readonly kernel: 'gemm'; readonly EPV: number } & GemmTile)
  | GemmMmaPlan;

export interface PlanLinearOptions {
  M: number; N: number; K: number; dtype: LinearStorage;
  /** Force a kernel ('auto': GEMV for M <= LINEAR_GEMV_MAX_M, else the subgroup-matrix GEMM for 16-bit
   *  weights where the adapter has it and engine.tuning.linearMma allows, else the FMA GEMM). */
  kernel?: 'auto' | 'gemv' | 'gemm' | 'gemm-mma';
  /** GEMV reduction ('auto': subgroups where the adapter has them). */
  variant?: 'auto' | 'subgroup' | 'portable';
  /** GEMV: force the lanes per weight row (a power of two up to the workgroup size). */
  KT?: number;
  /** GEMV over quantized weights: weight rows per lane group (1, 2 or 4; default 4). */
  R?: 1 | 2 | 4;
  /** GEMV: force the threads a workgroup (a power of two from 32 to the adapter's limit and 256; default
   *  the largest of them). */
  WG?: number;
  /** GEMV over quantized weights: 'dot' (Q8_0, Q4_0, Q4_K, Q6_K: quants meet x unconverted and
   *  unscaled, shaders/ops/gemv_qdot.wgsl; the default where the type has it), 'idot' (the same types:
   *  x quantized to 8 bits a unit of 32 and integer dot products, gemv_idot.wgsl; where the WGSL has
   *  dot4I8Packed; the default where engine.tuning.gemvIntDot is set) or 'decode' (each value decoded to
   *  f32 with its scales first, gemv_quant.wgsl; every type). */
  quantPath?: QuantPath;
  /** GEMV over quantized weights on the dot path, several rows of x a workgroup: true meets each unit
   *  with the x rows one at a time (one row's x in registers), false with all of them at once (default
   *  engine.tuning.quantGemvRowsEach: from 4 rows of a verifying step). Either way a row's sums are the same operations in the same order. */
  rowsEach?: boolean;
  /** GEMM: force an entry of LINEAR_GEMM_TILES (or, for 'gemm-mma', of LINEAR_MMA_TILES). */
  tile?: number;
  /** gemm-mma: one of the adapter's f16 → f32 configurations (an index of mmaConfigs). */
  mmaConfig?: number;
  /** gemm-mma: x as hi + lo f16 halves (default engine.tuning.linearMmaSplit: true) or as f16 alone. */
  split?: boolean;
  /** gemm-mma: plan over LINEAR_MMA_DECODE_TILES (`tile` indexes them). */
  decodeTiles?: boolean;
  /** gemm-mma over the decode tiles: split K over this many workgroups (default: decodeSplitK's choice). */
  kSplit?: number;
}

/** Workgroup storage of gemm_mma.wgsl's arrays, in bytes. */
export function gemmMmaSmemBytes(SM: number, SN: number, t: GemmMmaTile, split: boolean): number {
  const XS = t.BK + 8, BM = t.SGR * t.TMR * SM, BN = t.SGC * t.TNC * SN;
  return 2 * ((split ? 2 : 1) * BM * XS + (t.TW ? t.BK * (BN + 8) : BN * XS)) + 4 * t.SGR * t.SGC * SM * SN;
}

/** Why the subgroup-matrix GEMM cannot run on this adapter for these weights, or null where it can. */
export function linearMmaUnavailable(rt: Runtime, dtype: LinearStorage): string | null {
  const f = rt.features;
  if (dtype === 'f32') return 'f32 weights (the matrices take f16)';
  if (!f.subgroups || !f.f16) return `no ${f.subgroups ? 'shader-f16' : 'subgroups'}`;
  if (mmaConfigs(f).length === 0) return f.subgroupMatrix.length ? 'no f16 → f32 subgroup-matrix configuration' : 'no subgroup matrices (chromium-experimental-subgroup-matrix)';
  if (!f.subgroupMinSize || f.subgroupMinSize !== f.subgroupMaxSize) return `subgroups of more than one size (${f.subgroupMinSize}-${f.subgroupMaxSize})`;
  return null;
}

/** The subgroup-matrix GEMM's plan (see planLinear), or null where no configuration and tile fit. */
function planLinearMma(rt: Runtime, p: PlanLinearOptions, op: string): GemmMmaPlan | null {
  const tile = p.tile ?? rt.tuning.linearMmaTile;
  return planMma(rt, { M: p.M, N: p.N, dtype: p.dtype, tiles: LINEAR_MMA_TILES, tilesName: 'LINEAR_MMA_TILES', split: p.split, mmaConfig: p.mmaConfig, tile }, op);
}

/**
 * The subgroup-matrix GEMM over LINEAR_MMA_DECODE_TILES for a decode-sized M (see there), or null where
 * no tile fits the adapter. `tile` (or engine.tuning.linearDecodeMmaTile) holds it to one.
 */
export function planLinearMmaDecode(rt: Runtime, p: PlanLinearOptions, op = 'planLinear'): GemmMmaPlan | null {
  const q = pickDecodeTile(rt, p, op);
  if (!q) return null;
  const t = rt.tuning.linearDecodeSplitK;
  const KS = p.kSplit ?? (t === 'auto' ? decodeSplitK(p.M, p.N, p.K, q) : t);
  check(isPosInt(KS) && KS <= 64, op, p.kSplit !== undefined ? 'kSplit' : 'engine.tuning.linearDecodeSplitK', 'a whole number of K splits from 1 to 64', KS);
  return KS === 1 ? q : { ...q, KS };
}

/**
 * K splits for a decode-sized step on the matrix GEMM: doubled (up to 8) while the grid stays within
 * LINEAR_MMA_DECODE_TARGET_WORKGROUPS and each split keeps 4 k tiles. Decode's layers of few columns
 * (o and down at N 2048: 32 workgroups of 16×64) otherwise walk all of K in few workgroups: down's 128
 * k tiles ran at 300 GB/s (H200, run 105).
 */
export function decodeSplitK(M: number, N: number, K: number, q: GemmMmaPlan): number {
  const grid = Math.ceil(M / q.BM) * Math.ceil(N / q.BN);
  const ntiles = Math.ceil(K / q.BK);
  let KS = 1;
  while (KS < 8 && 2 * KS * grid <= LINEAR_MMA_DECODE_TARGET_WORKGROUPS && ntiles >= 8 * KS) KS *= 2;
  return KS;
}

function pickDecodeTile(rt: Runtime, p: PlanLinearOptions, op: string): GemmMmaPlan | null {
  const forced = p.tile ?? rt.tuning.linearDecodeMmaTile;
  const tilesName = 'LINEAR_MMA_DECODE_TILES';
  const base = { M: p.M, N: p.N, dtype: p.dtype, tiles: LINEAR_MMA_DECODE_TILES, tilesName, split: p.split, mmaConfig: p.mmaConfig };
  if (forced !== undefined) return planMma(rt, { ...base, tile: forced }, op);
  const workgroups = (q: GemmMmaPlan) => Math.ceil(p.M / q.BM) * Math.ceil(p.N / q.BN);
  let pick: GemmMmaPlan | null = null;
  for (let ti = 0; ti < LINEAR_MMA_DECODE_PLANNED; ti++) {
    const q = planMma(rt, { ...base, tile: ti }, op);
    if (!q) continue;
    // The shortest rows first (the most workgroups); a taller tile where it needs fewer row tiles and
    // its grid still has the target.
    if (!pick) pick = q;
    else if (Math.ceil(p.M / q.BM) < Math.ceil(p.M / pick.BM) && workgroups(q) >= LINEAR_MMA_DECODE_TARGET_WORKGROUPS) pick = q;
  }
  return pick;
}

/**
 * A subgroup-matrix GEMM plan over one of `tiles` (the first that fits this adapter and gives the grid
 * targetWorkgroups workgroups for M × N, by default LINEAR_MMA_TARGET_WORKGROUPS, else the smallest that
 * fits), or null where the adapter cannot run it. The linear layer's and the grouped expert products'
 * planners share it.
 */
export function planMma(rt: Runtime, p: { M: number; N: number; dtype: LinearStorage; tiles: readonly GemmMmaTile[]; tilesName: string;
                                         split?: boolean; mmaConfig?: number; tile?: number; targetWorkgroups?: number }, op: string): GemmMmaPlan | null {
  if (linearMmaUnavailable(rt, p.dtype)) return null;
  const lim = rt.limits;
  const SGW = rt.features.subgroupMinSize!;
  const split = p.split ?? rt.tuning.linearMmaSplit;
  check(typeof split === 'boolean', op, 'split', 'a boolean', split);
  const configs = mmaConfigs(rt.features);
  if (p.mmaConfig !== undefined) {
    check(Number.isInteger(p.mmaConfig) && p.mmaConfig >= 0 && p.mmaConfig < configs.length, op, 'mmaConfig',
      `an index of the adapter's ${configs.length} f16 → f32 subgroup-matrix configurations`, p.mmaConfig);
  }
  if (p.tile !== undefined) {
    check(Number.isInteger(p.tile) && p.tile >= 0 && p.tile < p.tiles.length, op, 'tile', `an index of ${p.tilesName} (0..${p.tiles.length - 1})`, p.tile);
  }
  const maxThreads = Math.min(lim.maxComputeInvocationsPerWorkgroup, lim.maxComputeWorkgroupSizeX);
  const plans: GemmMmaPlan[] = [];
  for (const [ci, { M: SM, N: SN, K: SK }] of configs.entries()) {
    if (p.mmaConfig !== undefined && ci !== p.mmaConfig) continue;
    if (SM > SGW || SGW % SM) continue;
    for (const [ti, t] of p.tiles.entries()) {
      if (p.tile !== undefined && ti !== p.tile) continue;
      const smem = gemmMmaSmemBytes(SM, SN, t, split);
      if (t.BK % SK || t.BK % 8 || t.SGR * t.SGC * SGW > maxThreads || smem > lim.maxComputeWorkgroupStorageSize) continue;
      plans.push({ kernel: 'gemm-mma', EPV: 8, SM, SN, SK, SGW, ...t, TW: !!t.TW, VEC: !!t.VEC, BM: t.SGR * t.TMR * SM, BN: t.SGC * t.TNC * SN, split, smem, KS: 1 });
    }
    if (plans.length) break;
  }
  const workgroups = (q: GemmMmaPlan) => Math.ceil(p.M / q.BM) * Math.ceil(p.N / q.BN);
  const target = p.targetWorkgroups ?? LINEAR_MMA_TARGET_WORKGROUPS;
  return plans.find((q) => workgroups(q) >= target) ?? plans.reduce<GemmMmaPlan | null>(
    (best, q) => (!best || q.BM * q.BN < best.BM * best.BN ? q : best), null);
}

/** The WGSL constants of a subgroup-matrix GEMM plan (gemm_mma.wgsl). */
export function mmaConsts(rt: Runtime, plan: GemmMmaPlan): Record<string, number | boolean> {
  return { SM: plan.SM, SN: plan.SN, SK: plan.SK, SGW: plan.SGW, SGR: plan.SGR, SGC: plan.SGC, TMR: plan.TMR, TNC: plan.TNC,
           BK: plan.BK, PF: plan.PF, TW: plan.TW, SPLIT: plan.split, PROBE: rt.tuning.linearMmaProbe };
}

/** The extensions a subgroup-matrix GEMM needs. */
export const MMA_ENABLES: readonly string[] = ['f16', 'subgroups', 'chromium_experimental_subgroup_matrix'];

const pow2floor = (v: number) => 2 ** Math.floor(Math.log2(v));
const pow2ceil = (v: number) => 2 ** Math.ceil(Math.log2(v));

/** planLinear's answers by runtime: a model step plans every linear layer of every layer again, and
 *  the matrix GEMM's planner weighs tiles and configurations (20-80 µs a call on the host). */
const linearPlans = new WeakMap<Runtime, Map<string, LinearPlan>>();

/** The kernel and its shape for an M×N×K linear layer on this device (see the top of this file). */
export function planLinear(rt: Runtime, p: PlanLinearOptions): LinearPlan {
  // Plain objects of numbers and strings: the key is every input and every tuning field that the
  // planners read; anything else (a bad argument) is planned (and refused) without the cache.
  const t = rt.tuning;
  const key = p !== null && typeof p === 'object'
    ? `${p.M},${p.N},${p.K},${p.dtype},${p.kernel},${p.variant},${p.KT},${p.R},${p.tile},${p.mmaConfig},${p.split},${p.decodeTiles},${p.kSplit},${p.quantPath},${p.WG},${p.rowsEach}|${t.linearMma},`
      + `${t.linearMmaSplit},${t.linearMmaTile},${t.linearDecodeMma},${t.linearDecodeMmaMinM},${t.quantDecodeMmaMinM},${t.linearDecodeMmaTile},${t.linearDecodeSplitK},${t.gemvIntDot},${t.quantGemvRowsEach},${rt.exactProducts}` : '';
  let cache = linearPlans.get(rt);
  const hit = key && cache?.get(key);
  if (hit) return hit;
  const plan = Object.freeze(planLinearUncached(rt, p));
  if (key) {
    if (!cache) linearPlans.set(rt, cache = new Map());
    if (cache.size > 4096) cache.clear();
    cache.set(key, plan);
  }
  return plan;
}

function planLinearUncached(rt: Runtime, p: PlanLinearOptions): LinearPlan {
  const op = 'planLinear';
  check(isPosInt(p.M), op, 'M', 'a positive integer', p.M);
  checkShapeArgs(op, p.N, p.K, p.dtype);
  const kernel = p.kernel ?? 'auto';
  check(['auto', 'gemv', 'gemm', 'gemm-mma'].includes(kernel), op, 'kernel', "'auto', 'gemv', 'gemm' or 'gemm-mma'", fmt(kernel));
  const variant = p.variant ?? 'auto';
  check(['auto', 'subgroup', 'portable'].includes(variant), op, 'variant', "'auto', 'subgroup' or 'portable'", fmt(variant));
  if (variant === 'subgroup') check(rt.features.subgroups, op, 'variant', "'portable' or 'auto' (the adapter has no subgroups)", "'subgroup'");
  const EPV = linearVectorWidth(p.dtype);
  const lim = rt.limits;
  const maxThreads = Math.min(lim.maxComputeInvocationsPerWorkgroup, lim.maxComputeWorkgroupSizeX);
  const smem = lim.maxComputeWorkgroupStorageSize;

  // Decode-sized steps of many rows on the tensor units: every row in one row tile, the weights read once.
  // Quantized weights too (H200, issue 28's runs 4-5: Q4_K at batch 8 and 32 took 8.1 and 11.7 ms a step on
  // the matrices, 12.6 and 40.1 on the quantized GEMV in chunks of 4 rows).
  // Quantized weights enter the matrices rounded to f16: not while a step verifies (Runtime.exactProducts).
  const matrices = !(rt.exactProducts && isQuantType(p.dtype));
  const minM = isQuantType(p.dtype) ? rt.tuning.quantDecodeMmaMinM : rt.tuning.linearDecodeMmaMinM;
  const decodeMma = kernel === 'auto' && matrices && p.M <= LINEAR_GEMV_MAX_M && p.M >= minM
    && rt.tuning.linearDecodeMma === 'auto' && rt.tuning.linearMma === 'auto' ? planLinearMmaDecode(rt, p, op) : null;
  if (decodeMma && (p.M >= 16 || Math.ceil(p.M / decodeMma.BM) * Math.ceil(p.N / decodeMma.BN) * decodeMma.KS >= LINEAR_MMA_DECODE_MIN_WORKGROUPS)) return decodeMma;
  if (kernel === 'gemm-mma' && p.decodeTiles) {
    const q = planLinearMmaDecode(rt, p, op);
    if (q) return q;
    fail(op, 'kernel', "'auto', 'gemv' or 'gemm' (no subgroup-matrix GEMM over the decode tiles here: "
      + `${linearMmaUnavailable(rt, p.dtype) ?? 'no tile fits the adapter\'s limits'})`, "'gemm-mma'");
  }

  if (kernel === 'gemv' || (kernel === 'auto' && p.M <= LINEAR_GEMV_MAX_M)) {
    // Quantized weights: a lane's unit is 32 values (gemv_quant.wgsl), whose x values it holds for up
    // to 4 rows of x (more rows run as more chunks, the weights shared through L2).
    const quant = isQuantType(p.dtype);
    const EPV = quant ? 32 : linearVectorWidth(p.dtype);
    const kc = p.K / EPV;
    const MT = Math.min(quant ? 4 : 16, pow2ceil(p.M));
    if (p.R !== undefined) check(quant && [1, 2, 4].includes(p.R), op, 'R', quant ? '1, 2 or 4' : '4 or nothing (rows per group vary for quantized weights only)', p.R);
    const R = p.R ?? 4;
    let WG = pow2floor(Math.min(256, maxThreads));
    if (p.WG !== undefined) {
      check(isPosInt(p.WG) && pow2floor(p.WG) === p.WG && p.WG >= 32 && p.WG <= WG, op, 'WG', `a power of two from 32 to ${WG}`, p.WG);
      WG = p.WG;
    }
    const mChunks = Math.ceil(p.M / MT);
    // A verifying step's rows (Runtime.exactProducts) take the lanes a row that one chunk of rows would:
    // KT orders a row's sums, which must not depend on how many rows run beside it.
    const groups = (kt: number) => Math.ceil(p.N / ((WG / kt) * R)) * (rt.exactProducts ? 1 : mChunks);
    // KT: 32, doubled while the grid is short of LINEAR_GEMV_TARGET_WORKGROUPS; at most 64 from MT 8 on
    // (H200, bf16 4096×4096: M 1 best at KT 128, M 8 and 16 at KT 64 of 16/32/64).
    const maxKT = MT >= 8 ? 64 : WG;
    let KT = Math.max(1, Math.min(32, WG, pow2floor(kc)));
    // The quantized dot path (x staged once a workgroup, gemv_qdot.wgsl) wants more rows a workgroup
    // than the rule below gives: on an H200 (bench/results/qgemv-span-nvidia-h200.md) KT 32 beat 64 and
    // 128 wherever it left about a workgroup an SM, and 64 won from K 8192 (256 units) on.
    const dotPath = quant && hasQuantDot(p.dtype) && p.quantPath !== 'decode';
    const target = dotPath ? LINEAR_GEMV_QDOT_MIN_WORKGROUPS : LINEAR_GEMV_TARGET_WORKGROUPS;
    if (dotPath && kc >= 256) KT = Math.min(64, WG);
    while (KT < Math.min(WG, maxKT) && 2 * KT <= kc && groups(KT) < target) KT *= 2;
    if (p.KT !== undefined) {
      check(isPosInt(p.KT) && pow2floor(p.KT) === p.KT && p.KT <= WG, op, 'KT', `a power of two up to ${WG}`, p.KT);
      KT = p.KT;
    }
    let PASS = MT;
    while (PASS > 1 && WG * PASS * 16 > Math.min(smem, 16384)) PASS /= 2;
    const sg = variant === 'subgroup' || (variant === 'auto' && rt.features.subgroups);
    const plan = { kernel: 'gemv' as const, variant: sg ? 'subgroup' as const : 'portable' as const, EPV, MT, R, KT, WG, PASS };
    if (!quant) {
      check(p.quantPath === undefined, op, 'quantPath', `nothing for ${p.dtype} weights (it picks a quantized GEMV's path)`, p.quantPath);
      check(p.rowsEach === undefined, op, 'rowsEach', `nothing for ${p.dtype} weights (it orders a quantized GEMV's rows)`, p.rowsEach);
      return plan;
    }
    const dot = hasQuantDot(p.dtype);
    const idot = dot && rt.features.intDot4;
    if (p.quantPath !== undefined) {
      check(p.quantPath === 'decode' || (p.quantPath === 'dot' && dot) || (p.quantPath === 'idot' && idot), op, 'quantPath',
        !dot ? `'decode' (${p.dtype} has no dot path: ${QUANT_DOT_TYPES.join(', ')} have)`
          : idot ? "'dot', 'idot' or 'decode'" : "'dot' or 'decode' (no 'idot': this WGSL has no packed_4x8_integer_dot_product)", fmt(p.quantPath));
    }
    const quantPath: QuantPath = p.quantPath ?? (idot && rt.tuning.gemvIntDot ? 'idot' : dot ? 'dot' : 'decode');
    // Every path stages CU units of each x row in workgroup memory (gemv_xstage.wgsl), 'idot' their
    // 8-bit words and scales beside (gemv_idot.wgsl): as many as fit beside the reduction's buffer, a
    // power of two, at most 128 (4096 values).
    const unitBytes = quantPath === 'idot' ? 16 * 8 + 4 * 8 + 16 : 16 * 8;
    const CU = Math.min(128, pow2floor(Math.floor((smem - WG * PASS * 16) / (unitBytes * MT)) - 1));
    if (CU < 1) throw new WebinferError(`${op}: the quantized GEMV's x staging does not fit ${smem} bytes of workgroup storage`);
    if (p.rowsEach !== undefined) check(typeof p.rowsEach === 'boolean' && (!p.rowsEach || quantPath === 'dot'), op, 'rowsEach', "a boolean, true only on the dot path", p.rowsEach);
    const each = rt.tuning.quantGemvRowsEach;
    const rowsEach = quantPath === 'dot' && MT > 1 && (p.rowsEach ?? (each === 'auto' ? MT >= 4 && rt.exactProducts : each));
    return { ...plan, quantPath, CU, ...(rowsEach ? { rowsEach } : {}) };
  }

  if (kernel === 'gemm-mma' || (kernel === 'auto' && matrices && rt.tuning.linearMma === 'auto')) {
    const mma = planLinearMma(rt, p, op);
    if (mma) return mma;
    if (kernel === 'gemm-mma') {
      fail(op, 'kernel', "'auto', 'gemv' or 'gemm' (no subgroup-matrix GEMM here: "
        + `${linearMmaUnavailable(rt, p.dtype) ?? 'no tile fits the adapter\'s limits'})`, "'gemm-mma'");
    }
  }
  const fits = (t: GemmTile) => (t.BM / t.TM) * (t.BN / t.TN) <= maxThreads && t.BK * (t.BM + t.BN) * 4 <= smem;
  let tile: GemmTile | undefined;
  if (p.tile !== undefined) {
    check(Number.isInteger(p.tile) && p.tile >= 0 && p.tile < LINEAR_GEMM_TILES.length && fits(LINEAR_GEMM_TILES[p.tile]), op, 'tile',
      `an index of LINEAR_GEMM_TILES that fits this adapter`, p.tile);
    tile = LINEAR_GEMM_TILES[p.tile];
  } else {
    const workgroups = (t: GemmTile) => Math.ceil(p.M / t.BM) * Math.ceil(p.N / t.BN);
    const usable = LINEAR_GEMM_TILES.filter(fits);
    tile = usable.find((t) => workgroups(t) >= LINEAR_GEMM_TARGET_WORKGROUPS && t.BM * t.BN > 64 * 64) ?? usable.find((t) => t.BM * t.BN <= 64 * 64);
    if (!tile) throw new WebinferError(`${op}: no GEMM tile fits this adapter (${maxThreads} invocations, ${smem} bytes of workgroup storage)`);
  }
  return { kernel: 'gemm', EPV, ...tile };
}

/** The pipeline of a plan for weights stored as `dtype` (PipelineCache keeps it). Quantized weights
 *  are dequantized to f32 words for the GEMV and the FMA GEMM, to f16 words for the matrices. */
function linearKernel(rt: Runtime, plan: LinearPlan, dtype: LinearStorage): Kernel {
  const { tail, W_DTYPE } = weightProgram(dtype, plan.kernel === 'gemm-mma');
  const overrides = { W_DTYPE };
  // A fused projection's parts may be of other types than the one planned for: each takes the dot
  // path where its type has one, unless the plan asked for the decode path.
  const dq = plan.kernel !== 'gemv' || !hasQuantDot(dtype) ? '' : plan.quantPath === 'decode' ? '_dq' : plan.quantPath === 'idot' ? '_idot' : '';
  return plan.kernel === 'gemv'
    ? rt.kernel(`${plan.variant === 'subgroup' ? 'gemv_subgroup' : 'gemv'}${dq}${tail}`, 'gemv_main', {
      overrides,
      consts: { MT: plan.MT, KT: plan.KT, WG: plan.WG, EPV: plan.EPV, PASS: plan.PASS, R: plan.R, ...(isQuantType(dtype) ? { CU: plan.CU ?? 128 } : {}),
        ...(plan.rowsEach && dq === '' && hasQuantDot(dtype) ? { XR: 1 } : {}) },
      enables: plan.variant === 'subgroup' ? ['subgroups'] : [],
    })
    : plan.kernel === 'gemm-mma'
      ? rt.kernel(`${plan.VEC ? 'gemm_mma_vec' : 'gemm_mma'}${tail}`, 'gemm_mma_main', {
        overrides,
        consts: mmaConsts(rt, plan),
        enables: MMA_ENABLES,
        unroll: true,
      })
      : rt.kernel(`gemm${tail}`, 'gemm_main', {
        overrides,
        consts: { BM: plan.BM, BN: plan.BN, BK: plan.BK, TM: plan.TM, TN: plan.TN, EPV: plan.EPV },
      });
}

/**
 * The matrix GEMM with K split over plan.KS workgroups a tile: each writes its partial sums to a
 * workspace (rows s·M.., shared by the layers of a recording), then gemm_splitk.wgsl adds them with the
 * epilogue (bias, accumulation) into out.
 */
function linearSplitK(rt: Runtime, x: Tensor, w: LinearWeight, plan: GemmMmaPlan,
                      a: { M: number; N: number; K: number; width: number; flags: number; g: Tensor | undefined; dst: Tensor }): void {
  const reduce = rt.kernel('gemm_splitk', 'splitk_main', { consts: { WG: SPLITK_WG } });
  const { M, N, K, flags } = a;
  for (const part of w.parts) {
    const kernel = linearKernel(rt, plan, part.dtype ?? w.dtype);
    const ws = rt.gpuScratch(plan.KS * M * part.rows * 4, 'linear split-K');
    rt.dispatch(kernel, { w: part.tensor, bias: rt.dummy, x, gather: a.g ?? rt.dummy, out: ws }, {
      M, N: part.rows, K, n0: 0, out_stride: part.rows, x_stride: a.width / 4, x_rows: x.shape[0],
      flags: flags & ~(F_BIAS | F_ACCUMULATE), k_split: plan.KS, q_plane: planeWord(part.dtype ?? w.dtype, part.rows, K),
    }, Math.ceil(M / plan.BM) * Math.ceil(part.rows / plan.BN) * plan.KS);
    rt.dispatch(reduce, { bias: w.bias ?? rt.dummy, out: a.dst, ws }, {
      M, N: part.rows, K, n0: part.row0, out_stride: N, x_stride: 0, x_rows: 0, flags: flags & (F_BIAS | F_ACCUMULATE), k_split: plan.KS,
    }, Math.ceil((M * part.rows) / SPLITK_WG));
    rt.releaseBuffer(ws);
  }
}
const SPLITK_WG = 256;

/** The word where a part of `rows` rows keeps its scale plane (quantized weights; 0 otherwise). */
function planeWord(dtype: LinearStorage, rows: number, K: number): number {
  return isQuantType(dtype) ? quantPlaneWord(dtype, rows, K) : 0;
}

// ------------------------------------------------------------------------------------------- running

export interface LinearOptions {
  /** f32 [>= M, N]; allocated [M, N] when not given. */
  out?: Tensor;
  /** Rows to compute (default: gatherRows' length, else x's rows); x may hold more. */
  rows?: number;
  /** Add the result into `out` (which must be given): out += x·Wᵀ (+ bias). */
  accumulate?: boolean;
  /** i32 [>= M]: row m of the input is x[gatherRows[m]] (indices outside x read a zero row). */
  gatherRows?: Tensor;
  /** 'silu_mul': x rows hold [gate | up] (2K wide); the input is silu(gate) · up. */
  act?: 'silu_mul';
  /** A plan from planLinear (default: planLinear's choice for these sizes). */
  plan?: LinearPlan;
  /** RMSNorm folded into the product (the GEMV only: decode-sized steps; any kernel for a weight with a
   *  perm, whose input gather applies it): the input is
   *  x / sqrt(mean(x²) + eps) · weight, row by row, as rmsNorm computes it (weight f32 [K]). */
  norm?: { weight: Tensor; eps: number };
}

const F_BIAS = 1, F_ACCUMULATE = 2, F_GATHER = 4, F_SILU_MUL = 8, F_RMS = 16;

function checkWeight(w: unknown, op: string, arg = 'w'): asserts w is LinearWeight {
  const lw = w as LinearWeight;
  check(lw !== null && typeof lw === 'object' && Array.isArray(lw.parts) && isPosInt(lw.N) && isPosInt(lw.K)
    && isLinearStorage(lw.dtype), op, arg, 'a LinearWeight (createLinear, createQuantLinear, createLinearOnDevice or linearFromParts)', w);
  for (const [i, p] of lw.parts.entries()) checkTensor(p.tensor, op, `${arg}.parts[${i}].tensor`);
  if (lw.perm) {
    checkTensor(lw.perm, op, `${arg}.perm`);
    check(lw.perm.dtype === 'i32' && lw.perm.numel === lw.K, op, `${arg}.perm`, `an i32 tensor of K=${lw.K} values`, `${lw.perm.dtype} ${shapeStr(lw.perm.shape)}`);
  }
}

/**
 * out[m, :] (+)= in(m) · Wᵀ (+ bias) for m < M (see LinearOptions), recorded on the GPU; returns out.
 */
export function linear(rt: Runtime, x: Tensor, w: LinearWeight, o: LinearOptions = {}): Tensor {
  const op = 'linear';
  rt.assertAlive(op);
  checkWeight(w, op);
  checkTensor(x, op, 'x');
  check(o !== null && typeof o === 'object', op, 'o', 'an options object', o);
  const { N, K } = w;
  const silu = o.act !== undefined;
  if (silu) check(o.act === 'silu_mul', op, 'act', "'silu_mul' or undefined", fmt(o.act));
  const width = silu ? 2 * K : K;
  check(x.dtype === 'f32', op, 'x.dtype', "'f32'", fmt(x.dtype));
  check(x.shape.length === 2 && x.shape[1] === width, op, 'x',
    `shape [rows, ${silu ? `2K=${width}` : `K=${K}`}]${silu ? " ([gate | up] for act 'silu_mul')" : ''}`, shapeStr(x.shape));
  const g = o.gatherRows;
  if (g !== undefined) {
    checkTensor(g, op, 'gatherRows');
    check(g.dtype === 'i32' && g.shape.length === 1, op, 'gatherRows', 'an i32 tensor [M]', `${g.dtype} ${shapeStr(g.shape)}`);
  }
  const available = g ? g.shape[0] : x.shape[0];
  const M = o.rows ?? available;
  check(isPosInt(M) && M <= available, op, 'rows', `a positive integer up to ${available} (the rows of ${g ? 'gatherRows' : 'x'})`, o.rows);
  const out = o.out;
  if (out !== undefined) {
    checkTensor(out, op, 'out');
    check(out.dtype === 'f32', op, 'out.dtype', "'f32'", fmt(out.dtype));
    check(out.shape.length === 2 && out.shape[1] === N && out.shape[0] >= M, op, 'out', `shape [>= M=${M}, N=${N}]`, shapeStr(out.shape));
    check(out.buffer !== x.buffer && out.buffer !== g?.buffer && out.buffer !== w.bias?.buffer, op, 'out',
      'a buffer of its own (not that of x, gatherRows or the bias)', 'a shared buffer');
  }
  if (o.accumulate) check(out !== undefined, op, 'accumulate', 'an `out` tensor to accumulate into', 'none');
  let plan = o.plan;
  if (plan) check(plan.EPV === planEPV(plan.kernel, w.dtype) && ['gemv', 'gemm', 'gemm-mma'].includes(plan.kernel)
    && (plan.kernel !== 'gemm-mma' || w.dtype !== 'f32'), op, 'plan', `a plan from planLinear for ${w.dtype} weights`, plan.kernel);
  else plan = planLinear(rt, { M, N, K, dtype: w.dtype });
  const norm = o.norm;
  if (norm !== undefined) {
    check(norm !== null && typeof norm === 'object', op, 'norm', 'an object { weight, eps }', norm);
    checkTensor(norm.weight, op, 'norm.weight');
    check(norm.weight.dtype === 'f32' && norm.weight.numel === K, op, 'norm.weight', `an f32 tensor of K=${K} values`, `${norm.weight.dtype} ${shapeStr(norm.weight.shape)}`);
    checkFinite(norm.eps, op, 'norm.eps');
    check(norm.eps >= 0, op, 'norm.eps', 'a number >= 0', norm.eps);
    check(!silu, op, 'norm', "no act (the norm reads x's rows as they are)", "act 'silu_mul'");
    // With a perm the norm is applied by the input gather, before any kernel.
    check(plan.kernel === 'gemv' || !!w.perm, op, 'norm', `a GEMV plan (the norm is folded into the GEMV only; planLinear picked '${plan.kernel}' for M=${M}: run rmsNorm first there)`, plan.kernel);
  }

  const dst = out ?? rt.emptyTensor([M, N], 'f32');
  const epilogue = (w.bias ? F_BIAS : 0) | (o.accumulate ? F_ACCUMULATE : 0);
  if (w.perm) {
    // The input gathered in stored column order (with its prologues) into scratch, then the product
    // on it alone; the scratch goes back to the pool once recorded (the GPU runs commands in order).
    const xg = rt.scratchTensor([M, K], 'f32');
    gatherColumns(rt, x, w.perm, xg, { M, K, width, g, silu, norm });
    linearProduct(rt, xg, w, plan, { M, N, K, width: K, flags: epilogue, g: undefined, norm: undefined, dst });
    xg.destroy();
    return dst;
  }
  const flags = epilogue | (g ? F_GATHER : 0) | (silu ? F_SILU_MUL : 0) | (norm ? F_RMS : 0);
  linearProduct(rt, x, w, plan, { M, N, K, width, flags, g, norm, dst });
  return dst;
}

const GATHER_WG = 256;

/** xg[m, j] = in(m, perm[j]) for m < M (shaders/ops/gather_cols.wgsl): the input of a weight with
 *  permuted columns, the row gather, SiLU-gated product and RMSNorm applied on the way. */
function gatherColumns(rt: Runtime, x: Tensor, perm: Tensor, xg: Tensor,
                       a: { M: number; K: number; width: number; g: Tensor | undefined; silu: boolean; norm: LinearOptions['norm'] }): void {
  const kernel = rt.kernel('ops_gather_cols', 'gather_cols_main', { consts: { WG: GATHER_WG } });
  rt.dispatch(kernel, { x, perm, gather: a.g ?? rt.dummy, nw: a.norm?.weight ?? rt.dummy, xg }, {
    M: a.M, K: a.K, x_stride: a.width, x_rows: x.shape[0], flags: (a.g ? 1 : 0) | (a.silu ? 2 : 0) | (a.norm ? 4 : 0), eps: a.norm?.eps ?? 0,
  }, a.M);
}

/** The product's dispatches (one a part, or split-K's pairs) once the plan and the flags are settled. */
function linearProduct(rt: Runtime, x: Tensor, w: LinearWeight, plan: LinearPlan,
                       a: { M: number; N: number; K: number; width: number; flags: number; g: Tensor | undefined; norm: LinearOptions['norm']; dst: Tensor }): void {
  const { M, N, K, width, flags, g, norm, dst } = a;
  if (plan.kernel === 'gemm-mma' && plan.KS > 1) {
    linearSplitK(rt, x, w, plan, { M, N, K, width, flags, g, dst });
    return;
  }
  for (const part of w.parts) {
    const kernel = linearKernel(rt, plan, part.dtype ?? w.dtype);
    const workgroups = plan.kernel === 'gemv'
      ? Math.ceil(M / plan.MT) * Math.ceil(part.rows / ((plan.WG / plan.KT) * plan.R))
      : Math.ceil(M / plan.BM) * Math.ceil(part.rows / plan.BN);
    rt.dispatch(kernel, { w: part.tensor, bias: w.bias ?? rt.dummy, nw: norm?.weight ?? rt.dummy, x, gather: g ?? rt.dummy, out: dst }, {
      M, N: part.rows, K, n0: part.row0, out_stride: N, x_stride: width / 4, x_rows: x.shape[0], flags, eps: norm?.eps ?? 0,
      q_plane: planeWord(part.dtype ?? w.dtype, part.rows, K),
    }, workgroups);
  }
}
