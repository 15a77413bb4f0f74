// LFM2's short convolution (shaders/ops/short_conv.wgsl): the gated depthwise causal convolution of a
// step's rows, each row one sequence's tokens with the sequence's conv state (its last L − 1 values of
// B·x) read before and written after. One kernel serves a prefill chunk (many tokens of one sequence)
// and a decode step (one token each of many sequences); the float64 reference is
// reference.shortConvRef.
import { check, checkPosInt, fmt, shapeStr } from '../core/errors.js';
import type { Runtime } from '../core/runtime.js';
import { checkTensor, type Tensor } from '../core/tensor.js';

const WG = 64;
/** The widest kernel the shader's private window holds. */
export const SHORT_CONV_MAX_WIDTH = 8;

/** One row of a step: its first token in the step's rows, its token count, its state slot (-1: none),
 *  and whether it starts its sequence (zeros before it, whatever the slot holds). */
export interface ShortConvRow { start: number; tokens: number; slot: number; fresh: boolean }

/** The rows as the kernel reads them: i32 [rows, 4] (start, tokens, slot, fresh). */
export function shortConvMeta(rows: readonly ShortConvRow[]): Int32Array {
  const m = new Int32Array(Math.max(4, 4 * rows.length));
  rows.forEach((r, i) => m.set([r.start, r.tokens, r.slot, r.fresh ? 1 : 0], 4 * i));
  return m;
}

/** The rows of a step from its placement: row i holds tokens [queryStartLoc[i], queryStartLoc[i + 1]),
 *  ends at seqLens[i] and starts its sequence when that equals its token count. */
export function shortConvRows(queryStartLoc: ArrayLike<number>, seqLens: ArrayLike<number>, slots: ArrayLike<number>): ShortConvRow[] {
  const out: ShortConvRow[] = [];
  for (let i = 0; i < seqLens.length; i++) {
    const start = queryStartLoc[i], tokens = queryStartLoc[i + 1] - start;
    out.push({ start, tokens, slot: slots[i], fresh: seqLens[i] === tokens });
  }
  return out;
}

export interface ShortConvOptions {
  /** Channels (hidden size). */
  H: number;
  /** Kernel width (conv_L_cache). */
  L: number;
  /** Rows of the step (sequences). */
  rows: number;
  /** i32 [>= 4·rows]: shortConvMeta of the rows, uploaded. */
  meta: Tensor;
  /** f32 [>= tokens, H]: C · y of every token. */
  out: Tensor;
  /** f32 elements per in row (default 3H). */
  inStride?: number;
  /**
   * The prefix cache's snapshots: where a token's cache slot (`slots`, i32 per token) is the last of its
   * block of `blockSize`, the state after it is also written to `out` [blocks, L − 1, H] at that block.
   */
  snapshots?: { slots: Tensor; blockSize: number; out: Tensor };
}

/**
 * out_t = C_t · Σ_k w[:, k] · (B·x)_{t−(L−1)+k} for every token of every row, from in rows [B | C | x]
 * (bcx, f32), the depthwise weight [H, L] (f32: the checkpoint's conv.conv.weight [H, 1, L]) and the
 * state [slots, L − 1, H] (f32), which ends holding each row's last L − 1 values of B·x.
 */
export function shortConv(rt: Runtime, bcx: Tensor, weight: Tensor, state: Tensor, o: ShortConvOptions): Tensor {
  const op = 'shortConv';
  rt.assertAlive(op);
  check(o !== null && typeof o === 'object', op, 'o', '{ H, L, rows, meta, out, inStride? }', o);
  const H = checkPosInt(o.H, op, 'o.H'), L = checkPosInt(o.L, op, 'o.L'), rows = checkPosInt(o.rows, op, 'o.rows');
  check(L >= 2 && L <= SHORT_CONV_MAX_WIDTH, op, 'o.L', `a width from 2 to ${SHORT_CONV_MAX_WIDTH}`, L);
  const inStride = o.inStride === undefined ? 3 * H : checkPosInt(o.inStride, op, 'o.inStride');
  check(inStride >= 3 * H, op, 'o.inStride', `at least 3·H = ${3 * H} (B, C and x of a token)`, inStride);
  for (const [t, name, dtype] of [[bcx, 'bcx', 'f32'], [weight, 'weight', 'f32'], [state, 'state', 'f32'], [o.meta, 'o.meta', 'i32'], [o.out, 'o.out', 'f32']] as const) {
    checkTensor(t, op, name);
    check(t.dtype === dtype, op, `${name}.dtype`, `'${dtype}'`, fmt(t.dtype));
  }
  check(weight.numel === H * L, op, 'weight', `[H, L] = [${H}, ${L}] (${H * L} values)`, shapeStr(weight.shape));
  check(state.numel % ((L - 1) * H) === 0 && state.numel > 0, op, 'state', `[slots, L − 1, H] = [slots, ${L - 1}, ${H}]`, shapeStr(state.shape));
  check(o.meta.numel >= 4 * rows, op, 'o.meta', `at least 4·rows = ${4 * rows} values`, shapeStr(o.meta.shape));
  check(o.out.numel % H === 0, op, 'o.out', `rows of H = ${H}`, shapeStr(o.out.shape));
  const sn = o.snapshots;
  if (sn !== undefined) {
    check(sn !== null && typeof sn === 'object', op, 'o.snapshots', '{ slots, blockSize, out }', sn);
    checkPosInt(sn.blockSize, op, 'o.snapshots.blockSize');
    checkTensor(sn.slots, op, 'o.snapshots.slots');
    check(sn.slots.dtype === 'i32', op, 'o.snapshots.slots.dtype', "'i32'", fmt(sn.slots.dtype));
    checkTensor(sn.out, op, 'o.snapshots.out');
    check(sn.out.dtype === 'f32' && sn.out.numel % ((L - 1) * H) === 0, op, 'o.snapshots.out', `f32 [blocks, L − 1, H] = [blocks, ${L - 1}, ${H}]`, `${sn.out.dtype} ${shapeStr(sn.out.shape)}`);
  }
  const kernel = rt.kernel('ops_short_conv', 'short_conv_main', { consts: { WG } });
  rt.dispatch(kernel, { bcx, w: weight, row_info: o.meta, state, out: o.out, slots: sn?.slots ?? o.meta, snap: sn?.out ?? rt.dummy },
    { H, L, rows, in_stride: inStride, out_stride: H, block_size: sn?.blockSize ?? 0 }, Math.ceil((rows * H) / WG));
  return o.out;
}
