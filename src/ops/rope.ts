// Rotary position embedding (SPEC §7), in place on strided views: validation, then shaders/ops/rope.wgsl.
// Two views of one buffer (q and k heads of a fused qkv row) share a dispatch; views of different
// buffers take one each.
import { check, fmt, shapeStr } from '../core/errors.js';
import type { Runtime } from '../core/runtime.js';
import { checkTensor, Tensor } from '../core/tensor.js';
import { isStridedRows, rowLayout, rowsOption, type RowLayout, type StridedRows } from './norm.js';
import { hostI32 } from './embedding.js';

/** A view whose heads carry a rotary part: `rotaryDim` (2 · the table's width) elements from `rotaryOffset`. */
export interface RopeView extends StridedRows {
  /** Where the rotary part starts inside each head (default 0): DeepSeek's q_pe after q_nope. */
  readonly rotaryOffset?: number;
}

/**
 * How table column i pairs elements of a head's rotary part (d = rotaryDim):
 * - 'half': (i, i + d/2), rotate_half (Llama, Mistral, Qwen2/3);
 * - 'interleaved': (2i, 2i + 1), DeepSeek V2's complex product on pairs. HF's DeepSeek V3 with
 *   rope_interleave computes the same values but stores them de-interleaved (pair i's results at i and
 *   i + d/2); q and k get the same permutation, so attention scores are identical. This op keeps each
 *   result where its pair was.
 */
export type RopePairing = 'half' | 'interleaved';

export interface RopeOptions {
  /** Default 'half'. */
  pairing?: RopePairing;
  /** Tokens used (default: the first dimension of the first view's tensor). */
  rows?: number;
}

/**
 * Rotates `x` in place: for token m (position positions[m]), each head's rotary pair (a, b) of column i
 * becomes (a·cos − b·sin, b·cos + a·sin) with cos/sin = table[position][i]. cos and sin are f32
 * [numPositions, rotaryDim/2] (built on the host, attention scaling folded in); positions are i32
 * (a Tensor: clamped to the table on the GPU; an Int32Array: checked here). x: a view, an f32 tensor
 * [R, heads, headDim] or [R, headDim], or a list of them (all rotated with the same positions).
 */
export function rope(rt: Runtime, x: Tensor | RopeView | readonly (Tensor | RopeView)[], positions: Tensor | Int32Array,
                     cos: Tensor, sin: Tensor, o: RopeOptions = {}): void {
  const op = 'rope';
  rt.assertAlive(op);
  check(typeof o === 'object' && o !== null, op, 'o', 'an options object', o);
  const pairing = o.pairing ?? 'half';
  check(pairing === 'half' || pairing === 'interleaved', op, 'o.pairing', "'half' or 'interleaved'", fmt(pairing));
  checkTensor(cos, op, 'cos');
  checkTensor(sin, op, 'sin');
  check(cos.dtype === 'f32', op, 'cos.dtype', "'f32'", fmt(cos.dtype));
  check(cos.shape.length === 2, op, 'cos', 'shape [numPositions, rotaryDim/2]', shapeStr(cos.shape));
  const [P, half] = cos.shape;
  check(sin.dtype === 'f32', op, 'sin.dtype', "'f32'", fmt(sin.dtype));
  check(sin.shape.length === 2 && sin.shape[0] === P && sin.shape[1] === half, op, 'sin', `shape [${P}, ${half}] (that of cos)`, shapeStr(sin.shape));
  const rd = 2 * half;

  const list = Array.isArray(x) ? x as readonly (Tensor | RopeView)[] : [x as Tensor | RopeView];
  check(list.length >= 1, op, 'x', 'at least one view', 'an empty list');
  const arg = (i: number) => (Array.isArray(x) ? `x[${i}]` : 'x');
  const first = list[0];
  const firstTensor = first instanceof Tensor ? first : isStridedRows(first) ? first.tensor : undefined;
  checkTensor(firstTensor, op, Array.isArray(x) ? 'x[0]' : 'x');
  const rows = rowsOption(o.rows, firstTensor.shape[0], op);

  const layouts: RowLayout[] = list.map((v, i) => {
    if (v instanceof Tensor) {
      check(v.dtype === 'f32', op, `${arg(i)}.dtype`, "'f32'", fmt(v.dtype));
      check(v.shape.length === 2 || v.shape.length === 3, op, arg(i), '[R, heads, headDim] or [R, headDim]', shapeStr(v.shape));
      const heads = v.shape.length === 3 ? v.shape[1] : 1;
      const D = v.shape[v.shape.length - 1];
      check(D >= rd, op, arg(i), `a head size >= rotaryDim=${rd} (2 · the table's width)`, shapeStr(v.shape));
      check(rows <= v.shape[0], op, 'o.rows', `at most ${v.shape[0]} (${arg(i)}'s first dimension)`, rows);
      return { tensor: v, offset: 0, ts: heads * D, heads, hs: D };
    }
    check(isStridedRows(v), op, arg(i), 'a Tensor or a strided view { tensor, offset?, tokenStride, heads?, headStride?, rotaryOffset? }', v);
    const ro = v.rotaryOffset ?? 0;
    check(Number.isInteger(ro) && ro >= 0, op, `${arg(i)}.rotaryOffset`, 'an integer >= 0', ro);
    const l = rowLayout({ ...v, offset: (v.offset ?? 0) + ro }, rd, rows, op, arg(i), true);
    return l;
  });

  let posBuf: GPUBuffer | Tensor;
  if (positions instanceof Int32Array) {
    check(positions.length >= rows, op, 'positions', `at least rows=${rows} entries`, `${positions.length}`);
    for (let m = 0; m < rows; m++) {
      const p = positions[m];
      check(p >= 0 && p < P, op, `positions[${m}]`, `a position in [0, ${P}) (the table's rows)`, p);
    }
    posBuf = hostI32(rt, positions.subarray(0, rows), 'rope positions');
  } else {
    checkTensor(positions, op, 'positions');
    check(positions.dtype === 'i32', op, 'positions.dtype', "'i32'", fmt(positions.dtype));
    check(positions.numel >= rows, op, 'positions', `at least rows=${rows} elements`, shapeStr(positions.shape));
    posBuf = positions;
  }

  const k = rt.kernel('ops_rope', 'rope_main', { overrides: { INTERLEAVED: pairing === 'interleaved' } });
  // Views of one buffer go together, two per dispatch (one binding may not be written twice).
  const byBuffer = new Map<GPUBuffer, RowLayout[]>();
  for (const l of layouts) {
    const b = l.tensor.buffer;
    if (!byBuffer.has(b)) byBuffer.set(b, []);
    byBuffer.get(b)!.push(l);
  }
  for (const group of byBuffer.values()) {
    for (let i = 0; i < group.length; i += 2) {
      const v0 = group[i], v1 = group[i + 1];
      rt.dispatch(k, { x: v0.tensor, positions: posBuf, cos_t: cos, sin_t: sin }, {
        rows, half, num_pos: P,
        heads0: v0.heads, off0: v0.offset, ts0: v0.ts, hs0: v0.hs,
        heads1: v1 ? v1.heads : 0, off1: v1?.offset ?? 0, ts1: v1?.ts ?? 0, hs1: v1?.hs ?? 0,
      }, Math.ceil((rows * (v0.heads + (v1?.heads ?? 0)) * half) / 256));
    }
  }
}
