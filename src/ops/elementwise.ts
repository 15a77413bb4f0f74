// Elementwise f32 ops of a decoder layer: the residual add and the SiLU-gated MLP product
// (shaders/ops/elementwise.wgsl).
import { check, fmt, isPosInt, numel, shapeStr } from '../core/errors.js';
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

/**
 * The SiLU-gated product of a gated MLP: gu [M, 2I] holding [gate | up] per row (the fused gate/up
 * projection) -> [rows, I] = silu(gate) · up, silu(g) = g / (1 + e^-g).
 */
export function siluMul(rt: Runtime, gu: Tensor, I: number, o: ElementwiseOptions = {}): Tensor {
  const op = 'siluMul';
  rt.assertAlive(op);
  check(typeof o === 'object' && o !== null, op, 'o', 'an options object', o);
  checkF32(gu, op, 'gu');
  check(isPosInt(I), op, 'I', 'a positive integer', I);
  check(gu.shape.length === 2 && gu.shape[1] === 2 * I, op, 'gu', `shape [M, 2·I=${2 * I}]`, shapeStr(gu.shape));
  const rows = rowsOption(o.rows, gu.shape[0], op);
  let out: Tensor;
  if (o.out !== undefined) {
    checkOut(o.out, rows * I, `[rows=${rows}, I=${I}]`, op);
    check(o.out.buffer !== gu.buffer, op, 'o.out', 'a tensor other than gu (the output is half its width)', 'gu itself');
    out = o.out;
  } else {
    out = rt.emptyTensor([rows, I], 'f32');
  }
  const k = rt.kernel('ops_elementwise', 'silu_mul_main');
  rt.dispatch(k, { gu, act: out }, { rows, I, gu_stride: 2 * I }, Math.ceil((rows * I) / WG));
  return out;
}
