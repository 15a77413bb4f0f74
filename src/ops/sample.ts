// Token choice on the GPU (shaders/ops/sample.wgsl): argmax and temperature / top-k / top-p sampling,
// one workgroup per row, so a decode step reads back only i32 ids. The float64 twin, with the same
// PRNG, is reference.sampleRef.
import { check, fmt, isPosInt, shapeStr } from '../core/errors.js';
import type { Runtime } from '../core/runtime.js';
import { checkTensor, type Tensor } from '../core/tensor.js';
import { rowsOption } from './norm.js';

export interface TokenOptions {
  /** Rows of logits used (default: all). */
  rows?: number;
  /** An i32 tensor of at least `rows` elements (default: a new [rows] one). */
  out?: Tensor;
}

export interface SamplingParams {
  /** 0 = greedy (argmax). Default 1. */
  temperature?: number;
  /** Keep the topK largest logits (ties at the k-th kept too); 0 = all, 1 = greedy. Default 0. */
  topK?: number;
  /** Then keep the smallest set of most probable tokens whose mass reaches topP (ties kept); 1 = all. Default 1. */
  topP?: number;
  /** PRNG seed, an integer in [0, 2^32). Default 0. */
  seed?: number;
  /** The decode step, an integer in [0, 2^32): a new draw per step. Default 0. */
  step?: number;
}

function prepare(rt: Runtime, op: string, logits: Tensor, o: TokenOptions): { rows: number; V: number; out: Tensor } {
  rt.assertAlive(op);
  check(typeof o === 'object' && o !== null, op, 'o', 'an options object', o);
  checkTensor(logits, op, 'logits');
  check(logits.dtype === 'f32', op, 'logits.dtype', "'f32'", fmt(logits.dtype));
  check(logits.shape.length === 2, op, 'logits', 'shape [rows, V]', shapeStr(logits.shape));
  const rows = rowsOption(o.rows, logits.shape[0], op);
  let out: Tensor;
  if (o.out !== undefined) {
    checkTensor(o.out, op, 'o.out');
    check(o.out.dtype === 'i32', op, 'o.out.dtype', "'i32'", fmt(o.out.dtype));
    check(o.out.numel >= rows, op, 'o.out', `at least rows=${rows} elements`, shapeStr(o.out.shape));
    out = o.out;
  } else {
    out = rt.emptyTensor([rows], 'i32');
  }
  return { rows, V: logits.shape[1], out };
}

/** i32 [rows]: each row's largest logit, ties to the lowest index; NaN never wins (a row of NaN gives 0). */
export function argmax(rt: Runtime, logits: Tensor, o: TokenOptions = {}): Tensor {
  const { rows, V, out } = prepare(rt, 'argmax', logits, o);
  rt.dispatch(rt.kernel('ops_sample', 'argmax_main', { consts: { WG: workgroupSize(rt, V) } }), { logits, out }, { rows, V }, rows);
  return out;
}

/**
 * Threads per row: one workgroup reads the whole row several times, latency-bound, so a vocabulary of
 * model size takes the largest workgroup the adapter allows (up to 1024; 256 is WebGPU's guaranteed
 * minimum); a small one keeps 256, where more threads would mostly wait at barriers.
 */
function workgroupSize(rt: Runtime, V: number): number {
  const cap = Math.min(1024, rt.limits.maxComputeInvocationsPerWorkgroup, rt.limits.maxComputeWorkgroupSizeX);
  let wg = 256;
  while (wg * 2 <= cap && wg * 64 < V) wg *= 2;
  return wg;
}

function u32Param(v: unknown, op: string, arg: string): number {
  check(typeof v === 'number' && Number.isInteger(v) && v >= 0 && v < 2 ** 32, op, arg, 'an integer in [0, 2^32)', v);
  return v as number;
}

/**
 * i32 [rows]: a token per row drawn from softmax(logits / temperature) restricted to the topK largest,
 * then to the top-p nucleus, renormalized (reference.sampleFilterRef says exactly which tokens stay).
 * The draw is the inverse CDF, in vocabulary order, at u = reference.sampleUniform(seed, row, step): the
 * same (seed, row, step) gives the same token on every run. temperature 0 or topK 1 is argmax.
 */
export function sample(rt: Runtime, logits: Tensor, p: SamplingParams, o: TokenOptions = {}): Tensor {
  const op = 'sample';
  check(typeof p === 'object' && p !== null, op, 'p', 'sampling parameters { temperature, topK, topP, seed, step }', p);
  const temperature = p.temperature ?? 1;
  check(typeof temperature === 'number' && Number.isFinite(temperature) && temperature >= 0, op, 'p.temperature', 'a finite number >= 0', temperature);
  const topK = p.topK ?? 0;
  check(topK === 0 || isPosInt(topK), op, 'p.topK', 'an integer >= 0', topK);
  const topP = p.topP ?? 1;
  check(typeof topP === 'number' && topP > 0 && topP <= 1, op, 'p.topP', 'a number in (0, 1]', topP);
  const seed = u32Param(p.seed ?? 0, op, 'p.seed');
  const step = u32Param(p.step ?? 0, op, 'p.step');
  const greedy = temperature === 0 || topK === 1;
  const invT = greedy ? 0 : Math.fround(1 / temperature);
  if (!greedy) check(Number.isFinite(invT), op, 'p.temperature', '0 or a temperature whose inverse is a finite f32', temperature);
  const { rows, V, out } = prepare(rt, op, logits, o);
  if (greedy) {
    rt.dispatch(rt.kernel('ops_sample', 'argmax_main', { consts: { WG: workgroupSize(rt, V) } }), { logits, out }, { rows, V }, rows);
    return out;
  }
  rt.dispatch(rt.kernel('ops_sample', 'sample_main', { consts: { WG: workgroupSize(rt, V) } }), { logits, out }, {
    rows, V, top_k: topK < V ? topK : 0, has_top_p: topP < 1 ? 1 : 0, inv_temp: invT, top_p: topP, seed, step,
  }, rows);
  return out;
}

/** Words of one row's parameters in sampleRows' `params` (RowParams in shaders/ops/sample.wgsl). */
export const ROW_PARAM_WORDS = 8;

/** One row's sampling settings, as sampleRows reads them. */
export interface RowSampling {
  /** 0: greedy. */
  temperature: number;
  /** 0: all. */
  topK: number;
  /** 1: all. */
  topP: number;
  /** 0: none. Tokens less probable than minP × the top token's are out (before top-k and top-p). */
  minP: number;
  seed: number;
  /** The request's own token index: a new draw per token. */
  step: number;
  /** Which of the request's samples (its draws differ from its siblings'). */
  stream: number;
}

/** Writes row `i`'s settings into a RowParams array (u32 words, f32 fields bit-cast). */
export function packRowSampling(words: Uint32Array, i: number, s: RowSampling): void {
  const f = new Float32Array(words.buffer, words.byteOffset, words.length);
  const o = i * ROW_PARAM_WORDS;
  f[o] = s.temperature === 0 ? 0 : Math.fround(1 / s.temperature);
  words[o + 1] = s.topK >>> 0;
  f[o + 2] = s.topP;
  f[o + 3] = s.minP;
  words[o + 4] = s.seed >>> 0;
  words[o + 5] = s.step >>> 0;
  words[o + 6] = s.stream >>> 0;
  words[o + 7] = 0;
}

/**
 * i32 [rows]: each row drawn with its own settings, `params` a u32 tensor of rows × ROW_PARAM_WORDS
 * (packRowSampling): the same procedure as sample, with min-p first, and the draw at
 * u = reference.sampleUniform(seed, stream, step). No validation of the packed values: the request
 * engine builds them from checked requests.
 */
export function sampleRows(rt: Runtime, logits: Tensor, params: Tensor, o: TokenOptions = {}): Tensor {
  const op = 'sampleRows';
  const { rows, V, out } = prepare(rt, op, logits, o);
  checkTensor(params, op, 'params');
  check(params.numel >= rows * ROW_PARAM_WORDS, op, 'params', `at least ${rows * ROW_PARAM_WORDS} words (rows × ${ROW_PARAM_WORDS})`, shapeStr(params.shape));
  rt.dispatch(rt.kernel('ops_sample', 'sample_rows_main', { consts: { WG: workgroupSize(rt, V) } }), { logits, out, row_params: params },
    { rows, V, top_k: 0, has_top_p: 0, inv_temp: 0, top_p: 1, seed: 0, step: 0 }, rows);
  return out;
}

/** Words of one edit in adjustLogits' `edits`: (row, token, rep as f32, add as f32). */
export const EDIT_WORDS = 4;

/**
 * In place: `n` sparse edits of logits [rows, V], each (row, token, rep, add) making l = (l > 0 ? l / rep :
 * l · rep) + add — repetition penalty, presence and frequency penalties and logit bias folded per token.
 */
export function adjustLogits(rt: Runtime, logits: Tensor, edits: Tensor, n: number): void {
  const op = 'adjustLogits';
  checkTensor(logits, op, 'logits');
  checkTensor(edits, op, 'edits');
  check(edits.numel >= n * EDIT_WORDS, op, 'edits', `at least ${n * EDIT_WORDS} words`, shapeStr(edits.shape));
  if (n === 0) return;
  const groups = Math.ceil(n / 64);
  const x = Math.min(groups, 65535);
  rt.dispatch(rt.kernel('ops_logits', 'adjust_main'), { logits, edits }, { V: logits.shape[1], n, neg_inf: -Infinity }, [x, Math.ceil(groups / x), 1]);
}

/**
 * In place: for each of `n` masked rows, mask_rows[i] names the row of logits and masks[i × ⌈V/32⌉ ...]
 * its allowed tokens (bit t); the others become -inf.
 */
export function maskLogits(rt: Runtime, logits: Tensor, masks: Tensor, maskRows: Tensor, n: number): void {
  const op = 'maskLogits';
  checkTensor(logits, op, 'logits');
  const V = logits.shape[1];
  check(masks.numel >= n * Math.ceil(V / 32), op, 'masks', `at least ${n} rows of ${Math.ceil(V / 32)} words`, shapeStr(masks.shape));
  if (n === 0) return;
  rt.dispatch(rt.kernel('ops_logits', 'mask_main'), { logits, masks, mask_rows: maskRows }, { V, n, neg_inf: -Infinity }, [Math.ceil(V / 256), n, 1]);
}
