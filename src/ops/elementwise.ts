// Elementwise f32 ops of a transformer layer: the residual add, the gated MLP product (SiLU, GELU,
// GELU-tanh, gpt-oss's clamped SwiGLU) and the pointwise activations (GELU, relu, tanh, soft cap)
// (shaders/ops/elementwise.wgsl).
import { check, checkFinite, checkKeys, fmt, isPosInt, numel, shapeStr } from '../core/errors.js';
import type { Runtime } from '../core/runtime.js';
import { checkTensor, type Tensor } from '../core/tensor.js';
import { rowsOption } from './norm.js';

export interface ElementwiseOptions {
  /** Rows (first dimension) used (default: all of the input's). */
  rows?: number;
  /** An f32 tensor of at least as many elements; for add, a or b itself means in place. */
  out?: Tensor;
}

const WG = 256;

function checkF32(t: Tensor, op: string, arg: string): void {
  checkTensor(t, op, arg);
  check(t.dtype === 'f32', op, `${arg}.dtype`, "'f32'", fmt(t.dtype));
}

function checkOut(out: Tensor, n: number, what: string, op: string): void {
  checkF32(out, op, 'o.out');
  check(out.numel >= n, op, 'o.out', `at least ${n} elements (${what})`, shapeStr(out.shape));
}

/** out = a + b over the first `rows` rows of same-shaped f32 tensors; in place when out is a (or b). */
export function add(rt: Runtime, a: Tensor, b: Tensor, o: ElementwiseOptions = {}): Tensor {
  const op = 'add';
  rt.assertAlive(op);
  check(typeof o === 'object' && o !== null, op, 'o', 'an options object', o);
  checkF32(a, op, 'a');
  checkF32(b, op, 'b');
  check(b.shape.length === a.shape.length && b.shape.every((d, i) => d === a.shape[i]), op, 'b', `shape ${shapeStr(a.shape)} (that of a)`, shapeStr(b.shape));
  const rows = rowsOption(o.rows, a.shape[0], op);
  const n = rows * numel(a.shape.slice(1));
  let out: Tensor;
  if (o.out !== undefined) {
    checkOut(o.out, n, `rows=${rows} of ${shapeStr(a.shape)}`, op);
    out = o.out;
  } else {
    out = rt.emptyTensor([rows, ...a.shape.slice(1)], 'f32');
  }
  // One buffer may not be bound twice when one binding is writable: the written input is x, a repeated
  // input is read through x (a + b = b + a exactly, so swapping is free), and the unused bindings get
  // two different placeholders.
  const [x, y] = out.buffer === b.buffer && out.buffer !== a.buffer ? [b, a] : [a, b];
  const same = x.buffer === y.buffer;
  const inPlace = out.buffer === x.buffer;
  const k = rt.kernel('ops_elementwise', 'add_main', { overrides: { IN_PLACE: inPlace, SAME: same } });
  rt.dispatch(k, { x, y: same ? rt.ones : y, out: inPlace ? rt.dummy : out }, { n }, Math.ceil(n / WG));
  return out;
}

/** The gate activations of gatedAct. */
export const GATED_ACTS = ['silu', 'gelu', 'gelu_tanh', 'swiglu_oai'] as const;
export type GatedAct = (typeof GATED_ACTS)[number];

export interface GatedActOptions extends ElementwiseOptions {
  /** How a row holds gate and up: 'halves' (the default) [gate | up], 'interleaved' g0, u0, g1, u1, ... */
  layout?: 'halves' | 'interleaved';
  /** swiglu_oai: the sigmoid's slope (default 1.702) and the clamp (default 7). */
  alpha?: number;
  limit?: number;
}

/**
 * The gated product of a gated MLP: gu [M, 2I] holding gate and up per row (the fused gate/up
 * projection) -> [rows, I] = act(gate) · up. act: 'silu' g·sigmoid(g); 'gelu' exact (erf) GELU;
 * 'gelu_tanh' GELU's tanh approximation (Gemma's gelu_pytorch_tanh); 'swiglu_oai' gpt-oss's
 * (clamp(up, ±limit) + 1) · g · sigmoid(alpha·g) with g = min(gate, limit).
 */
export function gatedAct(rt: Runtime, gu: Tensor, I: number, kind: GatedAct, o: GatedActOptions = {}): Tensor {
  return gatedProduct(rt, 'gatedAct', gu, I, kind, o);
}

/** silu(gate) · up over [gate | up] rows: gatedAct's 'silu'. */
export function siluMul(rt: Runtime, gu: Tensor, I: number, o: ElementwiseOptions = {}): Tensor {
  return gatedProduct(rt, 'siluMul', gu, I, 'silu', o);
}

function gatedProduct(rt: Runtime, op: string, gu: Tensor, I: number, kind: GatedAct, o: GatedActOptions): Tensor {
  rt.assertAlive(op);
  check(typeof o === 'object' && o !== null, op, 'o', 'an options object', o);
  checkKeys(op, 'o', o, ['rows', 'out', 'layout', 'alpha', 'limit']);
  check((GATED_ACTS as readonly string[]).includes(kind), op, 'kind', GATED_ACTS.map((k) => `'${k}'`).join(', '), fmt(kind));
  checkF32(gu, op, 'gu');
  check(isPosInt(I), op, 'I', 'a positive integer', I);
  check(gu.shape.length === 2 && gu.shape[1] === 2 * I, op, 'gu', `shape [M, 2·I=${2 * I}]`, shapeStr(gu.shape));
  const layout = o.layout ?? 'halves';
  check(layout === 'halves' || layout === 'interleaved', op, 'o.layout', "'halves' or 'interleaved'", fmt(layout));
  const alpha = o.alpha === undefined ? 1.702 : checkFinite(o.alpha, op, 'o.alpha');
  const limit = o.limit === undefined ? 7 : checkFinite(o.limit, op, 'o.limit');
  if (kind !== 'swiglu_oai') check(o.alpha === undefined && o.limit === undefined, op, 'o.alpha', `no alpha or limit (they belong to 'swiglu_oai', not '${kind}')`, o.alpha ?? o.limit);
  check(limit > 0, op, 'o.limit', 'a number > 0', limit);
  const rows = rowsOption(o.rows, gu.shape[0], op);
  let out: Tensor;
  if (o.out !== undefined) {
    checkOut(o.out, rows * I, `[rows=${rows}, I=${I}]`, op);
    check(o.out.buffer !== gu.buffer, op, 'o.out', 'a tensor other than gu (the output is half its width)', 'gu itself');
    out = o.out;
  } else {
    out = rt.emptyTensor([rows, I], 'f32');
  }
  const k = rt.kernel('ops_elementwise', 'silu_mul_main', { overrides: { GATE: GATED_ACTS.indexOf(kind), INTERLEAVED: layout === 'interleaved' } });
  rt.dispatch(k, { gu, act: out }, { rows, I, gu_stride: 2 * I, alpha, limit }, Math.ceil((rows * I) / WG));
  return out;
}

/** The pointwise functions of activate. */
export const ACTIVATIONS = ['none', 'gelu', 'gelu_tanh', 'relu', 'tanh', 'softcap'] as const;
export type Activation = (typeof ACTIVATIONS)[number];

export interface ActivateOptions extends ElementwiseOptions {
  /** 'softcap': the cap c of c·tanh(x/c) (required, > 0). */
  cap?: number;
  /** Multiplies the result (default 1): Gemma's embedding scale with 'none'. */
  scale?: number;
}

/**
 * out = f(x) · scale over the first `rows` rows of an f32 tensor; in place when out is x. f: 'none'
 * (x), 'gelu' (exact, erf), 'gelu_tanh', 'relu', 'tanh', 'softcap' (cap·tanh(x/cap): Gemma 2's final
 * logits).
 */
export function activate(rt: Runtime, x: Tensor, kind: Activation, o: ActivateOptions = {}): Tensor {
  const op = 'activate';
  rt.assertAlive(op);
  check(typeof o === 'object' && o !== null, op, 'o', 'an options object', o);
  checkKeys(op, 'o', o, ['rows', 'out', 'cap', 'scale']);
  check((ACTIVATIONS as readonly string[]).includes(kind), op, 'kind', ACTIVATIONS.map((k) => `'${k}'`).join(', '), fmt(kind));
  checkF32(x, op, 'x');
  let cap = 1;
  if (kind === 'softcap') {
    check(o.cap !== undefined, op, 'o.cap', "a cap > 0 for 'softcap'", 'none');
    cap = checkFinite(o.cap, op, 'o.cap');
    check(cap > 0, op, 'o.cap', 'a number > 0', cap);
  } else {
    check(o.cap === undefined, op, 'o.cap', `no cap (it belongs to 'softcap', not '${kind}')`, o.cap);
  }
  const scale = o.scale === undefined ? 1 : checkFinite(o.scale, op, 'o.scale');
  const rows = rowsOption(o.rows, x.shape[0], op);
  const n = rows * numel(x.shape.slice(1));
  let out: Tensor;
  if (o.out !== undefined) {
    checkOut(o.out, n, `rows=${rows} of ${shapeStr(x.shape)}`, op);
    out = o.out;
  } else {
    out = rt.emptyTensor([rows, ...x.shape.slice(1)], 'f32');
  }
  const inPlace = out.buffer === x.buffer;
  const k = rt.kernel('ops_elementwise', 'act_main', { overrides: { ACT: ACTIVATIONS.indexOf(kind), IN_PLACE: inPlace } });
  // wgsl_reflect lists add_main's y among act_main's resources too: a placeholder fills it.
  rt.dispatch(k, { x, y: rt.ones, out: inPlace ? rt.dummy : out }, { n, cap, scale }, Math.ceil(n / WG));
  return out;
}
