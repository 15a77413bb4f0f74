// 1-d convolution (Whisper's stem: kernel 3, padding 1, stride 1 and 2) as the linear layer over an
// im2col gather (shaders/ops/conv.wgsl): the gather writes each output position's receptive field as a
// row [cin·KW] (zeros where the padding is), and the GEMM of src/ops/gemm.ts multiplies it by the
// weight [cout, cin·KW] (torch's Conv1d weight [cout, cin, KW] as it is stored), bias in its epilogue.
// Why not a direct convolution kernel: the stem is 85% of a Whisper encoder's non-attention FLOPs at
// the first layers' width (conv2 of large-v3: 1500 × 1280 × 3840), and the tuned GEMM (tiles, subgroup
// matrices, split parts) does them at its speed with no new product kernel; the gather costs one read
// and one write of 3× the input. The gather applies GELU to what it reads (the previous convolution's
// activation, fused), and with KW 1 it is a pointwise GELU (+ an addend) over strided rows: the
// encoder's GELU + positions and the MLP's GELU use the same pipeline.
import { check, checkPosInt, fmt, shapeStr } from '../core/errors.js';
import type { Runtime } from '../core/runtime.js';
import { checkTensor, type Tensor } from '../core/tensor.js';
import { linear, type LinearWeight } from './gemm.js';

const WG = 256;
const F_GELU = 1, F_ADD = 2;

/** An input of B items of `channels` × `length` values: element (b, c, t) at b·batchStride + c·channelStride + t·timeStride. */
export interface ConvInput {
  tensor: Tensor;
  batch: number;
  channels: number;
  length: number;
  batchStride: number;
  channelStride: number;
  timeStride: number;
}

/** [B, channels, length] row-major (Whisper's features). */
export function channelsFirst(tensor: Tensor, batch: number, channels: number, length: number): ConvInput {
  return { tensor, batch, channels, length, batchStride: channels * length, channelStride: length, timeStride: 1 };
}

/** [B, length, channels] row-major (a linear layer's rows: time-major). */
export function timeFirst(tensor: Tensor, batch: number, channels: number, length: number): ConvInput {
  return { tensor, batch, channels, length, batchStride: channels * length, channelStride: 1, timeStride: channels };
}

function checkInput(op: string, x: ConvInput): void {
  check(x !== null && typeof x === 'object', op, 'x', 'a ConvInput { tensor, batch, channels, length, strides }', x);
  checkTensor(x.tensor, op, 'x.tensor');
  check(x.tensor.dtype === 'f32', op, 'x.tensor.dtype', "'f32'", fmt(x.tensor.dtype));
  for (const k of ['batch', 'channels', 'length'] as const) checkPosInt(x[k], op, `x.${k}`);
  const last = (x.batch - 1) * x.batchStride + (x.channels - 1) * x.channelStride + (x.length - 1) * x.timeStride;
  check(last < x.tensor.numel, op, 'x', `strides inside the tensor (last element ${last})`, shapeStr(x.tensor.shape));
}

/** Output length of a convolution: floor((length + 2·pad − kernel) / stride) + 1. */
export function convLength(length: number, kernel: number, stride: number, pad: number): number {
  return Math.floor((length + 2 * pad - kernel) / stride) + 1;
}

/**
 * out[b·tOut + t, :] = act(x) ⋆ W (+ bias): a 1-d convolution of kernel `kernel` (weight as a linear layer
 * [cout, cin·kernel]), into rows [B·tOut, cout] (time-major). o.gelu: GELU applied to x as it is read.
 */
export function conv1d(rt: Runtime, x: ConvInput, w: LinearWeight, o: { kernel: number; stride?: number; pad?: number; gelu?: boolean; out?: Tensor }): Tensor {
  const op = 'conv1d';
  rt.assertAlive(op);
  checkInput(op, x);
  const kw = checkPosInt(o.kernel, op, 'o.kernel');
  const stride = checkPosInt(o.stride ?? 1, op, 'o.stride');
  const pad = o.pad ?? 0;
  check(Number.isInteger(pad) && pad >= 0 && pad < kw, op, 'o.pad', `an integer in [0, kernel=${kw})`, pad);
  check(w.K === x.channels * kw, op, 'w.K', `channels·kernel = ${x.channels}·${kw}`, w.K);
  const tOut = convLength(x.length, kw, stride, pad);
  check(tOut >= 1, op, 'x.length', `at least kernel − 2·pad = ${kw - 2 * pad}`, x.length);
  const rows = x.batch * tOut;
  const cols = w.K;
  const col = rt.scratchTensor([rows, cols], 'f32');
  gather(rt, x, col, { rows, cols, tOut, kw, stride, pad, flags: o.gelu ? F_GELU : 0, addend: null });
  const out = linear(rt, col, w, { rows, out: o.out });
  col.destroy();
  return out;
}

/**
 * out = gelu(x) (+ addend) over rows [B·length, channels] (time-major; x given as any strided ConvInput; addend
 * [length, channels], the same for every item):
 * the convolution stem's last activation plus the encoder's positions, the MLP's GELU.
 */
export function geluRows(rt: Runtime, x: ConvInput, o: { out: Tensor; addend?: Tensor }): Tensor {
  const op = 'geluRows';
  rt.assertAlive(op);
  checkInput(op, x);
  const rows = x.batch * x.length, cols = x.channels;
  checkTensor(o.out, op, 'o.out');
  check(o.out.dtype === 'f32' && o.out.numel >= rows * cols, op, 'o.out', `an f32 tensor of at least ${rows}·${cols} elements`, `${o.out.dtype} ${shapeStr(o.out.shape)}`);
  check(o.out.buffer !== x.tensor.buffer, op, 'o.out', 'a buffer other than x\'s', 'the same buffer');
  if (o.addend) {
    checkTensor(o.addend, op, 'o.addend');
    check(o.addend.dtype === 'f32' && o.addend.numel >= x.length * cols, op, 'o.addend', `an f32 tensor of at least ${x.length}·${cols} elements (length × channels)`, `${o.addend.dtype} ${shapeStr(o.addend.shape)}`);
  }
  gather(rt, x, o.out, { rows, cols, tOut: x.length, kw: 1, stride: 1, pad: 0, flags: F_GELU | (o.addend ? F_ADD : 0), addend: o.addend ?? null });
  return o.out;
}

function gather(rt: Runtime, x: ConvInput, out: Tensor,
                a: { rows: number; cols: number; tOut: number; kw: number; stride: number; pad: number; flags: number; addend: Tensor | null }): void {
  const k = rt.kernel('ops_conv', 'im2col_main', { consts: { WG } });
  rt.dispatch(k, { x: x.tensor, addend: a.addend ?? rt.dummy, out }, {
    rows: a.rows, cols: a.cols, t_out: a.tOut, t_in: x.length, kw: a.kw, stride: a.stride, pad: a.pad,
    x_bs: x.batchStride, x_cs: x.channelStride, x_ts: x.timeStride, flags: a.flags,
  }, Math.ceil((a.rows * a.cols) / WG));
}
