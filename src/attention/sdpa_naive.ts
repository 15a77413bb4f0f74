// Encoding of shaders/attention/sdpa_naive.wgsl: the three-pass baseline, chunked over query rows so the
// materialized score matrix never exceeds the storage-binding limit (or engine.tuning.naiveScoreBytes).
import { WebinferError } from '../core/errors.js';
import type { Runtime } from '../core/runtime.js';
import type { Tensor } from '../core/tensor.js';
import { DTYPE_CODE } from '../core/dtype.js';
import { sdpaFlags, type SdpaProblem } from './common.js';

const SHADER = 'sdpa_naive';
const WG = 64;

export function encodeSdpaNaive(engine: Runtime, p: SdpaProblem, q: Tensor, k: Tensor, v: Tensor, withLse: boolean): { out: Tensor; lse: Tensor | null } {
  const totalRows = p.B * p.Hq * p.Lq;
  const wide = q.dtype === 'f32';
  const budget = Math.min(engine.tuning.naiveScoreBytes, engine.limits.maxStorageBufferBindingSize);
  let chunkRows = Math.min(totalRows, Math.floor(budget / (4 * p.Lk)));
  // 16-bit outputs pack two elements a word: with odd Dv a chunk must hold an even number of rows.
  if (!wide && p.Dv % 2 === 1 && chunkRows < totalRows) chunkRows -= chunkRows % 2;
  if (chunkRows < 1) {
    throw new WebinferError(`sdpa (naive): Lk=${p.Lk} needs a ${4 * p.Lk}-byte score row, above the ${budget}-byte budget; use backend 'flash'`);
  }

  const out = engine.emptyTensor([p.B, p.Hq, p.Lq, p.Dv], q.dtype);
  // lse is always produced (the softmax pass writes it); sdpa simply frees it after use.
  const lse = engine.emptyTensor([p.B, p.Hq, p.Lq], 'f32');
  const scores = engine.scratch(4 * chunkRows * p.Lk, 'sdpa_naive.scores');
  const overrides = { IN_DTYPE: DTYPE_CODE[q.dtype], OUT_DTYPE: DTYPE_CODE[q.dtype], WG };
  const kScores = engine.kernel(SHADER, 'scores_main', { overrides });
  const kSoftmax = engine.kernel(SHADER, 'softmax_main', { overrides: { WG } });
  const kPv = engine.kernel(SHADER, 'pv_main', { overrides });
  const slopes = p.alibi ? engine.smallF32(p.alibi, 'alibi') : engine.dummy;
  const sinks = p.sinks ? engine.smallF32(p.sinks, 'sinks') : engine.dummy;
  const mask = p.mask ? p.mask.buffer : engine.dummy;
  const [msB, msH, msI, msJ] = p.maskStrides;

  const resources = { q, k, v, mask, slopes, sinks, scores, out, lse };
  for (let rowBase = 0; rowBase < totalRows; rowBase += chunkRows) {
    const rows = Math.min(chunkRows, totalRows - rowBase);
    const outWords = wide ? rows * p.Dv : Math.ceil((rows * p.Dv) / 2);
    const outBase = wide ? rowBase * p.Dv : (rowBase * p.Dv) / 2;
    const u = {
      B: p.B, Hq: p.Hq, Hkv: p.Hkv, Lq: p.Lq, Lk: p.Lk, D: p.D, Dv: p.Dv, flags: sdpaFlags(p),
      scale: p.scale, softcap: p.softcap || 1, window: p.window, row_base: rowBase, rows,
      ms_b: msB, ms_h: msH, ms_i: msI, ms_j: msJ, out_words: outWords, out_base: outBase,
    };
    engine.dispatch(kScores, resources, u, Math.ceil((rows * p.Lk) / WG));
    engine.dispatch(kSoftmax, resources, u, rows);
    engine.dispatch(kPv, resources, u, Math.ceil(outWords / WG));
  }
  if (!withLse) {
    lse.destroy();
    return { out, lse: null };
  }
  return { out, lse };
}
