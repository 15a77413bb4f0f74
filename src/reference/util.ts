// Helpers every family of the float64 reference shares: argument checks that name what they check,
// the attention state of one row (softmax-weighted sum with the empty-row and sink rules), and the
// checks of paged metadata.
export interface AttnOptionsRef {
  /** 'f32': a plain f32 implementation instead (every product, sum and exponential rounded to f32, in
   *  key order): the baseline of SPEC §6's rule for inputs with large scores. Default 'f64'. */
  precision?: 'f64' | 'f32';
  causal?: boolean;
  scale?: number;
  softcap?: number;
  slidingWindow?: number;
  alibiSlopes?: ArrayLike<number>;
  sinks?: ArrayLike<number>;
}

export interface PagedMetaRef {
  queryStartLoc: ArrayLike<number>;
  seqLens: ArrayLike<number>;
  blockTable: ArrayLike<number>;
  maxBlocksPerSeq: number;
}

// ---------------------------------------------------------------------------------------------
// validation helpers

export function checkInt(v: number, name: string, min: number): void {
  if (!Number.isInteger(v) || v < min) throw new Error(`${name}: expected an integer >= ${min}, got ${v}`);
}

export function checkLen(a: ArrayLike<number>, n: number, name: string): void {
  if (a.length !== n) throw new Error(`${name}: expected ${n} elements, got ${a.length}`);
}

export function checkMinLen(a: ArrayLike<number>, n: number, name: string): void {
  if (a.length < n) throw new Error(`${name}: expected at least ${n} elements, got ${a.length}`);
}

export function checkHeads(Hq: number, Hkv: number): void {
  checkInt(Hq, 'Hq', 1);
  checkInt(Hkv, 'Hkv', 1);
  if (Hq % Hkv !== 0) throw new Error(`Hq: expected a multiple of Hkv=${Hkv}, got ${Hq}`);
}

// ---------------------------------------------------------------------------------------------
// the attention state of one row

/**
 * Softmax-weighted sum over the n candidate keys gathered by the caller: scores[0..n) and the
 * offsets of their value rows in `vals`. Writes out[outOff .. outOff+Dv) and returns the LSE.
 *
 * A -Infinity score (an additive mask of -inf) contributes nothing. When nothing remains, neither a
 * key nor a sink, the row is empty: out = 0, lse = -inf, never NaN.
 *
 * Learned sink (SPEC §2): it joins the max and the denominator only, never the numerator. A row
 * that sees no key is empty whether or not it has a sink: SPEC §2 gives it out = 0 and lse = -inf,
 * so an empty state never carries weight into a merge (§4).
 */
export function attendRow(
  scores: Float64Array,
  offs: Float64Array,
  n: number,
  sink: number | undefined,
  vals: ArrayLike<number>,
  Dv: number,
  out: Float64Array,
  outOff: number,
  r: (x: number) => number = rounding(),
): number {
  let m = -Infinity;
  for (let j = 0; j < n; j++) if (scores[j]! > m) m = scores[j]!;
  for (let d = 0; d < Dv; d++) out[outOff + d] = 0;
  if (m === -Infinity) return -Infinity;   // no visible key (a -inf score is no key)
  if (sink !== undefined && sink > m) m = sink;
  let den = sink === undefined ? 0 : r(Math.exp(r(sink - m)));
  for (let j = 0; j < n; j++) {
    const p = r(Math.exp(r(scores[j]! - m)));
    if (p === 0) continue;
    den = r(den + p);
    const vo = offs[j]!;
    for (let d = 0; d < Dv; d++) out[outOff + d] = r(out[outOff + d]! + r(p * vals[vo + d]!));
  }
  const inv = r(1 / den);
  for (let d = 0; d < Dv; d++) out[outOff + d] = r(out[outOff + d]! * inv);
  return r(m + r(Math.log(den)));
}

/** How a reference rounds each operation's result: not at all (float64, the default), or to f32
 *  (Math.fround: a plain f32 implementation, SPEC §6's baseline for inputs with large scores). */
export function rounding(precision: AttnOptionsRef['precision'] = 'f64'): (x: number) => number {
  return precision === 'f32' ? Math.fround : (x) => x;
}

export interface ScoreOpts {
  scale: number;
  cap: number; // 0: off
  window: number; // 0: off
  causal: boolean;
  alibi: ArrayLike<number> | undefined;
  sinks: ArrayLike<number> | undefined;
}

export function scoreOpts(o: AttnOptionsRef, D: number, Hq: number, causalDefault: boolean): ScoreOpts {
  const scale = o.scale ?? 1 / Math.sqrt(D);
  if (!Number.isFinite(scale)) throw new Error(`scale: expected a finite number, got ${scale}`);
  const cap = o.softcap !== undefined && o.softcap > 0 ? o.softcap : 0;
  const window = o.slidingWindow !== undefined && o.slidingWindow > 0 ? o.slidingWindow : 0;
  if (o.alibiSlopes !== undefined) checkLen(o.alibiSlopes, Hq, 'alibiSlopes');
  if (o.sinks !== undefined) checkLen(o.sinks, Hq, 'sinks');
  return { scale, cap, window, causal: o.causal ?? causalDefault, alibi: o.alibiSlopes, sinks: o.sinks };
}


/** Checks paged metadata; returns S. Every block a sequence uses must be a valid physical block. */
export function checkPagedMeta(meta: PagedMetaRef, T: number, numBlocks: number, bs: number): number {
  const { queryStartLoc: qsl, seqLens, blockTable, maxBlocksPerSeq: mb } = meta;
  const S = qsl.length - 1;
  if (S < 0) throw new Error('queryStartLoc: expected S+1 >= 1 entries, got 0');
  checkInt(mb, 'maxBlocksPerSeq', 0);
  checkLen(seqLens, S, 'seqLens');
  checkMinLen(blockTable, S * mb, 'blockTable');
  if (!(qsl[0]! >= 0)) throw new Error(`queryStartLoc[0]: expected >= 0, got ${qsl[0]}`);
  if (qsl[S]! > T) throw new Error(`queryStartLoc[${S}]: expected <= T=${T}, got ${qsl[S]}`);
  for (let i = 0; i < S; i++) {
    const qLen = qsl[i + 1]! - qsl[i]!;
    if (!(qLen >= 0)) throw new Error(`queryStartLoc: expected non-decreasing, got [${i}]=${qsl[i]}, [${i + 1}]=${qsl[i + 1]}`);
    const sl = seqLens[i]!;
    if (!(sl >= qLen)) throw new Error(`seqLens[${i}]: expected >= qLen=${qLen}, got ${sl}`);
    checkSeqBlocks(blockTable, i, mb, sl, numBlocks, bs);
  }
  return S;
}

export function checkSeqBlocks(bt: ArrayLike<number>, i: number, mb: number, len: number, numBlocks: number, bs: number): void {
  const nb = Math.ceil(len / bs);
  if (nb > mb) throw new Error(`seqLens[${i}]: ${len} tokens need ${nb} blocks, more than maxBlocksPerSeq=${mb}`);
  for (let n = 0; n < nb; n++) {
    const blk = bt[i * mb + n]!;
    if (!Number.isInteger(blk) || blk < 0 || blk >= numBlocks) {
      throw new Error(`blockTable[${i}][${n}]: expected a block in [0, ${numBlocks}), got ${blk}`);
    }
  }
}
