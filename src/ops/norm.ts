// RMSNorm (SPEC §7) and LayerNorm over dense rows or strided views, and the strided-row views RoPE shares: validation,
// then shaders/ops/norm.wgsl (tree reduction) or its subgroup entry point (norm_subgroup.wgsl).
import { check, checkFinite, fmt, isPosInt, numel, shapeStr } from '../core/errors.js';
import { DTYPE_CODE } from '../core/dtype.js';
import type { Runtime } from '../core/runtime.js';
import type { Kernel } from '../core/pipeline.js';
import { checkTensor, type Tensor } from '../core/tensor.js';

/**
 * Rows of an f32 tensor addressed as (token m, head h) at element `offset + m·tokenStride + h·headStride`,
 * for m < rows and h < heads: the heads of q in a fused qkv row, or a slice of a wider row (DeepSeek's
 * latent before its rope part). Activation buffers are sized for the largest step; `rows` says how many
 * tokens a call uses.
 */
export interface StridedRows {
  readonly tensor: Tensor;
  /** Element offset of token 0, head 0 (default 0). */
  readonly offset?: number;
  /** Elements between consecutive tokens. */
  readonly tokenStride: number;
  /** Default 1. */
  readonly heads?: number;
  /** Elements between consecutive heads (default: the row length). */
  readonly headStride?: number;
}

/** A view after validation: everything the kernels take. */
export interface RowLayout {
  readonly tensor: Tensor;
  readonly offset: number;
  readonly ts: number;
  readonly heads: number;
  readonly hs: number;
}

export function isStridedRows(x: unknown): x is StridedRows {
  return typeof x === 'object' && x !== null && 'tensor' in x && 'tokenStride' in x;
}

function isNonNegInt(x: unknown): x is number {
  return typeof x === 'number' && Number.isInteger(x) && x >= 0;
}

/**
 * Validates a view whose rows are `span` elements long (from `offset`), used for `rows` tokens: every
 * element it addresses lies in the tensor, and, when it is written, no two rows overlap.
 */
export function rowLayout(v: StridedRows, span: number, rows: number, op: string, arg: string, written: boolean): RowLayout {
  check(typeof v === 'object' && v !== null, op, arg, 'a Tensor or a strided view { tensor, offset?, tokenStride, heads?, headStride? }', v);
  checkTensor(v.tensor, op, `${arg}.tensor`);
  check(v.tensor.dtype === 'f32', op, `${arg}.tensor.dtype`, "'f32'", fmt(v.tensor.dtype));
  const offset = v.offset ?? 0;
  check(isNonNegInt(offset), op, `${arg}.offset`, 'an integer >= 0', offset);
  const heads = v.heads ?? 1;
  check(isPosInt(heads), op, `${arg}.heads`, 'a positive integer', heads);
  const hs = v.headStride ?? span;
  check(isNonNegInt(hs), op, `${arg}.headStride`, 'an integer >= 0', hs);
  check(isNonNegInt(v.tokenStride), op, `${arg}.tokenStride`, 'an integer >= 0', v.tokenStride);
  const ts = v.tokenStride;
  if (written) {
    if (heads > 1) check(hs >= span, op, `${arg}.headStride`, `>= ${span} (heads written must not overlap)`, hs);
    if (rows > 1) check(ts >= (heads - 1) * hs + span, op, `${arg}.tokenStride`, `>= ${(heads - 1) * hs + span} (tokens written must not overlap)`, ts);
  }
  const end = offset + (rows - 1) * ts + (heads - 1) * hs + span;
  const n = v.tensor.numel;
  check(end <= n, op, arg, `rows within the tensor's ${n} elements (${rows} rows reach element ${end - 1})`,
    `offset ${offset}, tokenStride ${ts}, heads ${heads}, headStride ${hs} over ${shapeStr(v.tensor.shape)}`);
  return { tensor: v.tensor, offset, ts, heads, hs };
}

/** `rows` from the options (default: the first dimension of the tensor), checked against it. */
export function rowsOption(rows: unknown, dim0: number, op: string): number {
  if (rows === undefined) return dim0;
  check(isPosInt(rows), op, 'o.rows', `a positive integer <= ${dim0}`, rows);
  check(rows <= dim0, op, 'o.rows', `at most ${dim0} (the tensor's first dimension)`, rows);
  return rows;
}

export type ReductionVariant = 'auto' | 'subgroup' | 'portable';

/** Which reduction a kernel runs: subgroups where the adapter has them, unless asked otherwise. */
export function reductionVariant(rt: Runtime, v: unknown, op: string): 'subgroup' | 'portable' {
  const want = v ?? 'auto';
  check(want === 'auto' || want === 'subgroup' || want === 'portable', op, 'o.variant', "'auto', 'subgroup' or 'portable'", fmt(want));
  if (want === 'subgroup') check(rt.features.subgroups, op, 'o.variant', "'auto' or 'portable' (the adapter has no subgroups)", fmt(want));
  if (want === 'portable') return 'portable';
  return rt.features.subgroups ? 'subgroup' : 'portable';
}

export interface RmsNormOptions {
  /** Tokens used (default: the first dimension of x's tensor). */
  rows?: number;
  /** Where y goes: a dense f32 tensor (row (m, h) at (m·heads + h)·n, x itself for in place) or a
   *  strided view (the same view as x for in place). Default: a new [rows, heads·n] tensor. */
  out?: Tensor | StridedRows;
  /** Which reduction runs (default 'auto': subgroups where the adapter has them). */
  variant?: ReductionVariant;
}

/** Elements a thread holds in registers (more, and compilers start spilling them). */
const MAX_NPT = 16;

/**
 * The launch shape for rows of n: T threads per row (a power of two, about n/16 of them, so a row is
 * one round trip of loads; at most the adapter's workgroup, up to 1024), a workgroup of WG = max(256, T)
 * threads holding WG/T rows, NPT elements per thread (rows longer than T·16 go in chunks).
 */
export function normPlan(rt: Runtime, n: number): { T: number; WG: number; NPT: number } {
  const cap = Math.min(1024, rt.limits.maxComputeInvocationsPerWorkgroup, rt.limits.maxComputeWorkgroupSizeX);
  let T = 1;
  while (T < cap && T * MAX_NPT < n) T *= 2;
  return { T, WG: Math.max(256, T), NPT: Math.min(MAX_NPT, Math.ceil(n / T)) };
}

/** The row layouts of a norm over rows of n (x, the output, in place or not), validated. */
function normLayouts(rt: Runtime, op: string, x: Tensor | StridedRows, n: number, eps: number, o: { rows?: number; out?: Tensor | StridedRows }):
    { xl: RowLayout; ol: RowLayout; rows: number; result: Tensor; inPlace: boolean } {
  checkFinite(eps, op, 'eps');
  check(eps >= 0, op, 'eps', 'a number >= 0', eps);
  let xl: RowLayout;
  let rows: number;
  if (isStridedRows(x)) {
    checkTensor(x.tensor, op, 'x.tensor');
    rows = rowsOption(o.rows, x.tensor.shape[0], op);
    xl = rowLayout(x, n, rows, op, 'x', false);
  } else {
    checkTensor(x, op, 'x');
    check(x.dtype === 'f32', op, 'x.dtype', "'f32'", fmt(x.dtype));
    const per = numel(x.shape.slice(1));
    check(x.shape.length >= 2 && per % n === 0, op, 'x',
      `shape [R, ...] with a multiple of n=${n} (the weight's length) elements per row`, shapeStr(x.shape));
    rows = rowsOption(o.rows, x.shape[0], op);
    xl = { tensor: x, offset: 0, ts: per, heads: per / n, hs: n };
  }
  // Output layout; in place when it is x's own.
  let ol: RowLayout;
  let result: Tensor;
  if (o.out === undefined) {
    result = rt.emptyTensor(isStridedRows(x) ? [rows, xl.heads * n] : [rows, ...x.shape.slice(1)], 'f32');
    ol = { tensor: result, offset: 0, ts: xl.heads * n, heads: xl.heads, hs: n };
  } else if (isStridedRows(o.out)) {
    checkTensor(o.out.tensor, op, 'o.out.tensor');
    ol = rowLayout(o.out, n, rows, op, 'o.out', true);
    check(ol.heads === xl.heads, op, 'o.out.heads', `${xl.heads} (those of x)`, ol.heads);
    result = ol.tensor;
  } else {
    checkTensor(o.out, op, 'o.out');
    check(o.out.dtype === 'f32', op, 'o.out.dtype', "'f32'", fmt(o.out.dtype));
    check(o.out.numel >= rows * xl.heads * n, op, 'o.out', `at least ${rows * xl.heads * n} elements ([rows=${rows}, ${xl.heads * n}])`, shapeStr(o.out.shape));
    ol = { tensor: o.out, offset: 0, ts: xl.heads * n, heads: xl.heads, hs: n };
    result = o.out;
  }
  const inPlace = ol.tensor.buffer === xl.tensor.buffer;
  if (inPlace) {
    const same = ol.offset === xl.offset && (rows === 1 || ol.ts === xl.ts) && (xl.heads === 1 || ol.hs === xl.hs);
    check(same, op, 'o.out', "x's own layout (in place) or a buffer other than x's",
      `offset ${ol.offset}, tokenStride ${ol.ts}, headStride ${ol.hs} over x's buffer (x: offset ${xl.offset}, tokenStride ${xl.ts}, headStride ${xl.hs})`);
  }

  return { xl, ol, rows, result, inPlace };
}

/** Runs a norm kernel over its validated rows: `rowsPerGroup` (heads of) rows to a workgroup. */
function dispatchNorm(rt: Runtime, k: Kernel, res: Record<string, Tensor>, l: { xl: RowLayout; ol: RowLayout; rows: number; inPlace: boolean },
                      n: number, eps: number, rowsPerGroup: number): void {
  const { xl, ol, rows, inPlace } = l;
  rt.dispatch(k, { ...res, out: inPlace ? rt.dummy : ol.tensor }, {
    rows, heads: xl.heads, n, eps,
    x_off: xl.offset, x_ts: xl.ts, x_hs: xl.hs, o_off: ol.offset, o_ts: ol.ts, o_hs: ol.hs,
  }, Math.ceil((rows * xl.heads) / rowsPerGroup));
}

/**
 * RMSNorm, y = x / sqrt(mean(x²) + eps) · w, over rows of length n = weight length (f32, f16 or bf16
 * weight). x is a dense f32 tensor [R, ...] whose trailing elements hold heads·n per token (a hidden
 * state [R, H], or q as [R, Hq, D] for a per-head norm), or a strided view. Returns the output tensor.
 */
export function rmsNorm(rt: Runtime, x: Tensor | StridedRows, weight: Tensor, eps: number, o: RmsNormOptions = {}): Tensor {
  const op = 'rmsNorm';
  rt.assertAlive(op);
  check(typeof o === 'object' && o !== null, op, 'o', 'an options object', o);
  checkTensor(weight, op, 'weight');
  check(['f32', 'f16', 'bf16'].includes(weight.dtype), op, 'weight.dtype', "'f32', 'f16' or 'bf16'", fmt(weight.dtype));
  const n = weight.numel;
  const { xl, ol, rows, result, inPlace } = normLayouts(rt, op, x, n, eps, o);
  const variant = reductionVariant(rt, o.variant, op);

  const { T, WG, NPT } = normPlan(rt, n);
  const spec = { overrides: { WD: DTYPE_CODE[weight.dtype], T, IN_PLACE: inPlace }, consts: { WG, NPT } };
  const k = variant === 'subgroup'
    ? rt.kernel('ops_norm_subgroup', 'rms_norm_sg', { ...spec, enables: ['subgroups'] })
    : rt.kernel('ops_norm', 'rms_norm', spec);
  dispatchNorm(rt, k, { x: xl.tensor, w: weight }, { xl, ol, rows, inPlace }, n, eps, WG / T);
  return result;
}

export interface LayerNormOptions {
  /** Tokens used (default: the first dimension of x's tensor). */
  rows?: number;
  /** Where y goes, as rmsNorm's `out` (x itself: in place). */
  out?: Tensor | StridedRows;
}

/**
 * LayerNorm as torch.nn.LayerNorm computes it: y = (x - mean) / sqrt(var + eps) · w + b over rows of
 * length n = weight length, the variance biased; bias null: none (ModernBERT's norms). Weight and bias
 * f32, f16 or bf16; x and the output as rmsNorm's. Returns the output tensor.
 */
export function layerNorm(rt: Runtime, x: Tensor | StridedRows, weight: Tensor, bias: Tensor | null, eps: number, o: LayerNormOptions = {}): Tensor {
  const op = 'layerNorm';
  rt.assertAlive(op);
  check(typeof o === 'object' && o !== null, op, 'o', 'an options object', o);
  checkTensor(weight, op, 'weight');
  check(['f32', 'f16', 'bf16'].includes(weight.dtype), op, 'weight.dtype', "'f32', 'f16' or 'bf16'", fmt(weight.dtype));
  const n = weight.numel;
  if (bias !== null) {
    checkTensor(bias, op, 'bias');
    check(['f32', 'f16', 'bf16'].includes(bias.dtype), op, 'bias.dtype', "'f32', 'f16' or 'bf16'", fmt(bias.dtype));
    check(bias.numel === n, op, 'bias', `${n} elements (the weight's)`, shapeStr(bias.shape));
  }
  const { xl, ol, rows, result, inPlace } = normLayouts(rt, op, x, n, eps, o);
  const { T, WG, NPT } = normPlan(rt, n);
  const k = rt.kernel('ops_norm', 'layer_norm', {
    overrides: { WD: DTYPE_CODE[weight.dtype], BD: DTYPE_CODE[(bias ?? weight).dtype], HAS_BIAS: bias !== null, T, IN_PLACE: inPlace },
    consts: { WG, NPT },
  });
  dispatchNorm(rt, k, { x: xl.tensor, w: weight, bias: bias ?? weight }, { xl, ol, rows, inPlace }, n, eps, WG / T);
  return result;
}
