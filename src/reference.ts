// The float64 CPU reference for every operation of SPEC.md: the one copy of the math that the unit
// tests, the browser self-test, the benchmark checks and the demo compare the GPU kernels against.
//
// Conventions:
// - Inputs are flat row-major `ArrayLike<number>` already rounded to their storage dtype by the
//   caller; dims are explicit. Every output is a fresh Float64Array.
// - All arithmetic is f64 with max-subtraction; nothing is rounded to f32 on the way.
// - Bad dims or metadata throw an Error naming the argument (a reference must not guess).
// - The only import is the bit-level dtype codec (pure, dependency-free), so the e4m3 / bf16
//   rounding used by the fp8_ds_mla codec is the same one the upload path uses.

import { bf16BitsToF32, f32ToBf16Bits, f32ToFp8e4m3Bits, fp8e4m3BitsToF32 } from './dtype.js';

export interface AttnOptionsRef {
  causal?: boolean;
  scale?: number;
  softcap?: number;
  slidingWindow?: number;
  alibiSlopes?: ArrayLike<number>;
  sinks?: ArrayLike<number>;
}

/** shape broadcastable (numpy right-aligned rules, rank 1..4) to [B,Hq,Lq,Lk]. bool: 0 = excluded. */
export interface MaskRef {
  data: ArrayLike<number>;
  shape: readonly number[];
  kind: 'bool' | 'additive';
}

export interface SdpaDims {
  B: number;
  Hq: number;
  Hkv: number;
  Lq: number;
  Lk: number;
  D: number;
  Dv: number;
}

export interface PagedDims {
  Hq: number;
  Hkv: number;
  D: number;
  Dv: number;
  numBlocks: number;
  blockSize: number;
}

export interface PagedMetaRef {
  queryStartLoc: ArrayLike<number>;
  seqLens: ArrayLike<number>;
  blockTable: ArrayLike<number>;
  maxBlocksPerSeq: number;
}

/** N heads, L kv_lora_rank, P qk_nope_head_dim, R qk_rope_head_dim, V v_head_dim. */
export interface MlaDims {
  N: number;
  L: number;
  P: number;
  R: number;
  V: number;
}

export type MlaCacheDims = MlaDims & { numBlocks: number; blockSize: number };

export interface MlaDecodeMetaRef {
  seqLens: ArrayLike<number>;
  blockTable: ArrayLike<number>;
  maxBlocksPerSeq: number;
}

export interface MlaSparseMetaRef {
  /** [T]: token -> request row of blockTable */
  reqOfToken: ArrayLike<number>;
  blockTable: ArrayLike<number>;
  maxBlocksPerSeq: number;
  /** [T, topk] request-local key positions, -1 = invalid */
  indices: ArrayLike<number>;
}

export interface AttnResultRef {
  out: Float64Array;
  lse: Float64Array;
}

// ---------------------------------------------------------------------------------------------
// validation helpers

function checkInt(v: number, name: string, min: number): void {
  if (!Number.isInteger(v) || v < min) throw new Error(`${name}: expected an integer >= ${min}, got ${v}`);
}

function checkLen(a: ArrayLike<number>, n: number, name: string): void {
  if (a.length !== n) throw new Error(`${name}: expected ${n} elements, got ${a.length}`);
}

function checkMinLen(a: ArrayLike<number>, n: number, name: string): void {
  if (a.length < n) throw new Error(`${name}: expected at least ${n} elements, got ${a.length}`);
}

function checkHeads(Hq: number, Hkv: number): void {
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
function attendRow(
  scores: Float64Array,
  offs: Float64Array,
  n: number,
  sink: number | undefined,
  vals: ArrayLike<number>,
  Dv: number,
  out: Float64Array,
  outOff: number,
): number {
  let m = -Infinity;
  for (let j = 0; j < n; j++) if (scores[j]! > m) m = scores[j]!;
  for (let d = 0; d < Dv; d++) out[outOff + d] = 0;
  if (m === -Infinity) return -Infinity;   // no visible key (a -inf score is no key)
  if (sink !== undefined && sink > m) m = sink;
  let den = sink === undefined ? 0 : Math.exp(sink - m);
  for (let j = 0; j < n; j++) {
    const p = Math.exp(scores[j]! - m);
    if (p === 0) continue;
    den += p;
    const vo = offs[j]!;
    for (let d = 0; d < Dv; d++) out[outOff + d] = out[outOff + d]! + p * vals[vo + d]!;
  }
  const inv = 1 / den;
  for (let d = 0; d < Dv; d++) out[outOff + d] = out[outOff + d]! * inv;
  return m + Math.log(den);
}

interface ScoreOpts {
  scale: number;
  cap: number; // 0: off
  window: number; // 0: off
  causal: boolean;
  alibi: ArrayLike<number> | undefined;
  sinks: ArrayLike<number> | undefined;
}

function scoreOpts(o: AttnOptionsRef, D: number, Hq: number, causalDefault: boolean): ScoreOpts {
  const scale = o.scale ?? 1 / Math.sqrt(D);
  if (!Number.isFinite(scale)) throw new Error(`scale: expected a finite number, got ${scale}`);
  const cap = o.softcap !== undefined && o.softcap > 0 ? o.softcap : 0;
  const window = o.slidingWindow !== undefined && o.slidingWindow > 0 ? o.slidingWindow : 0;
  if (o.alibiSlopes !== undefined) checkLen(o.alibiSlopes, Hq, 'alibiSlopes');
  if (o.sinks !== undefined) checkLen(o.sinks, Hq, 'sinks');
  return { scale, cap, window, causal: o.causal ?? causalDefault, alibi: o.alibiSlopes, sinks: o.sinks };
}

// ---------------------------------------------------------------------------------------------
// SPEC §2: dense sdpa

/**
 * Strides (in elements) of a row-major array of `shape`, viewed as `target` by numpy's
 * right-aligned broadcasting: dims of size 1 (and missing leading dims) get stride 0. Leading
 * dims beyond target's rank must be 1. Throws if not broadcastable.
 */
export function broadcastStrides(shape: readonly number[], target: readonly number[], name = 'mask'): number[] {
  const strides = new Array<number>(target.length).fill(0);
  const off = target.length - shape.length;
  for (let a = 0; a < -off; a++) {
    if (shape[a] !== 1) throw new Error(`${name}: shape [${shape.join(',')}] is not broadcastable to [${target.join(',')}]`);
  }
  let stride = 1;
  for (let a = shape.length - 1; a >= 0; a--) {
    const s = shape[a]!;
    if (!Number.isInteger(s) || s < 1) throw new Error(`${name}: bad dim ${s} in shape [${shape.join(',')}]`);
    const t = a + off;
    if (t >= 0) {
      if (s === target[t]) strides[t] = s === 1 ? 0 : stride;
      else if (s === 1) strides[t] = 0;
      else throw new Error(`${name}: shape [${shape.join(',')}] is not broadcastable to [${target.join(',')}]`);
    }
    stride *= s;
  }
  return strides;
}

/**
 * SPEC §2. q [B,Hq,Lq,D], k [B,Hkv,Lk,D], v [B,Hkv,Lk,Dv] -> out [B,Hq,Lq,Dv], lse [B,Hq,Lq].
 * Score pipeline per (row i, key j): scale*dot -> softcap -> + ALiBi slope[h]*(j - i_abs) -> mask.
 * Visibility: causal j <= i_abs (bottom-right, i_abs = i + Lk - Lq); window i_abs - j < W (only the
 * past side is limited: without causal, keys after i_abs stay visible, as the SPEC's formula says);
 * a bool mask entry of 0 excludes the key.
 */
export function sdpaRef(
  q: ArrayLike<number>,
  k: ArrayLike<number>,
  v: ArrayLike<number>,
  dims: SdpaDims,
  opts: AttnOptionsRef & { mask?: MaskRef } = {},
): AttnResultRef {
  const { B, Hq, Hkv, Lq, Lk, D, Dv } = dims;
  checkInt(B, 'B', 0);
  checkHeads(Hq, Hkv);
  checkInt(Lq, 'Lq', 0);
  checkInt(Lk, 'Lk', 0);
  checkInt(D, 'D', 1);
  checkInt(Dv, 'Dv', 1);
  checkLen(q, B * Hq * Lq * D, 'q');
  checkLen(k, B * Hkv * Lk * D, 'k');
  checkLen(v, B * Hkv * Lk * Dv, 'v');
  const so = scoreOpts(opts, D, Hq, false);
  const mask = opts.mask;
  let ms = [0, 0, 0, 0];
  let boolMask = false;
  if (mask !== undefined) {
    if (mask.shape.length < 1 || mask.shape.length > 4) {
      throw new Error(`mask: expected rank 1..4, got shape [${mask.shape.join(',')}]`);
    }
    ms = broadcastStrides(mask.shape, [B, Hq, Lq, Lk], 'mask');
    checkLen(mask.data, mask.shape.reduce((a, b) => a * b, 1), 'mask.data');
    boolMask = mask.kind === 'bool';
  }
  const out = new Float64Array(B * Hq * Lq * Dv);
  const lse = new Float64Array(B * Hq * Lq);
  const scores = new Float64Array(Lk);
  const offs = new Float64Array(Lk);
  const group = Hq / Hkv;
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < Hq; h++) {
      const g = Math.floor(h / group);
      const kBase = (b * Hkv + g) * Lk;
      const slope = so.alibi === undefined ? 0 : so.alibi[h]!;
      const sink = so.sinks === undefined ? undefined : so.sinks[h]!;
      for (let i = 0; i < Lq; i++) {
        const iAbs = i + Lk - Lq;
        const qOff = ((b * Hq + h) * Lq + i) * D;
        const mRow = b * ms[0]! + h * ms[1]! + i * ms[2]!;
        let n = 0;
        for (let j = 0; j < Lk; j++) {
          if (so.causal && j > iAbs) continue;
          if (so.window > 0 && iAbs - j >= so.window) continue;
          let mv = 0;
          if (mask !== undefined) {
            mv = mask.data[mRow + j * ms[3]!]!;
            if (boolMask && mv === 0) continue;
          }
          const kOff = (kBase + j) * D;
          let dot = 0;
          for (let d = 0; d < D; d++) dot += q[qOff + d]! * k[kOff + d]!;
          let s = so.scale * dot;
          if (so.cap > 0) s = so.cap * Math.tanh(s / so.cap);
          if (so.alibi !== undefined) s += slope * (j - iAbs);
          if (mask !== undefined && !boolMask) s += mv;
          scores[n] = s;
          offs[n] = (kBase + j) * Dv;
          n++;
        }
        const row = (b * Hq + h) * Lq + i;
        lse[row] = attendRow(scores, offs, n, sink, v, Dv, out, row * Dv);
      }
    }
  }
  return { out, lse };
}

// ---------------------------------------------------------------------------------------------
// SPEC §3: paged KV cache

/**
 * keyCache [numBlocks,Hkv,bs,D], valueCache [numBlocks,Hkv,bs,Dv]; key [T,Hkv,D], value [T,Hkv,Dv];
 * slotMapping [T]. Returns copies with token t's rows written at (slot // bs, :, slot % bs, :).
 * A negative slot is padding; a slot >= numBlocks*bs is skipped too (the engine never writes
 * outside its buffer, so the reference writes nothing there either). Later tokens win on a
 * repeated slot.
 */
export function reshapeAndCacheRef(
  key: ArrayLike<number>,
  value: ArrayLike<number>,
  slotMapping: ArrayLike<number>,
  keyCache: ArrayLike<number>,
  valueCache: ArrayLike<number>,
  dims: PagedDims & { T: number },
): { keyCache: Float64Array; valueCache: Float64Array } {
  const { T, Hkv, D, Dv, numBlocks, blockSize: bs } = dims;
  checkInt(T, 'T', 0);
  checkInt(Hkv, 'Hkv', 1);
  checkInt(bs, 'blockSize', 1);
  checkInt(numBlocks, 'numBlocks', 0);
  checkLen(key, T * Hkv * D, 'key');
  checkLen(value, T * Hkv * Dv, 'value');
  checkLen(slotMapping, T, 'slotMapping');
  checkLen(keyCache, numBlocks * Hkv * bs * D, 'keyCache');
  checkLen(valueCache, numBlocks * Hkv * bs * Dv, 'valueCache');
  const kc = Float64Array.from(keyCache);
  const vc = Float64Array.from(valueCache);
  for (let t = 0; t < T; t++) {
    const slot = slotMapping[t]!;
    if (!(slot >= 0) || slot >= numBlocks * bs) continue;
    const blk = Math.floor(slot / bs);
    const off = slot % bs;
    for (let g = 0; g < Hkv; g++) {
      const row = (blk * Hkv + g) * bs + off;
      const src = t * Hkv + g;
      for (let d = 0; d < D; d++) kc[row * D + d] = key[src * D + d]!;
      for (let d = 0; d < Dv; d++) vc[row * Dv + d] = value[src * Dv + d]!;
    }
  }
  return { keyCache: kc, valueCache: vc };
}

/** Checks paged metadata; returns S. Every block a sequence uses must be a valid physical block. */
function checkPagedMeta(meta: PagedMetaRef, T: number, numBlocks: number, bs: number): number {
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

function checkSeqBlocks(bt: ArrayLike<number>, i: number, mb: number, len: number, numBlocks: number, bs: number): void {
  const nb = Math.ceil(len / bs);
  if (nb > mb) throw new Error(`seqLens[${i}]: ${len} tokens need ${nb} blocks, more than maxBlocksPerSeq=${mb}`);
  for (let n = 0; n < nb; n++) {
    const blk = bt[i * mb + n]!;
    if (!Number.isInteger(blk) || blk < 0 || blk >= numBlocks) {
      throw new Error(`blockTable[${i}][${n}]: expected a block in [0, ${numBlocks}), got ${blk}`);
    }
  }
}

/**
 * SPEC §3. query [T,Hq,D] -> out [T,Hq,Dv], lse [Hq,T]. Sequence i: qLen = qsl[i+1]-qsl[i],
 * context = seqLens[i]-qLen; its query r sits at pos = context+r and sees cached positions
 * j <= pos (causal is the default here; an explicit `causal: false` lets it see all seqLens[i]
 * tokens), limited by the window (pos - j < W). ALiBi adds slope[h]*(j - pos). Position j lives at
 * slot blockTable[i][j // bs]*bs + j % bs. Rows not covered by queryStartLoc (padding) stay NaN.
 */
export function pagedAttentionRef(
  query: ArrayLike<number>,
  keyCache: ArrayLike<number>,
  valueCache: ArrayLike<number>,
  dims: PagedDims & { T: number },
  meta: PagedMetaRef,
  opts: AttnOptionsRef = {},
): AttnResultRef {
  const { T, Hq, Hkv, D, Dv, numBlocks, blockSize: bs } = dims;
  checkInt(T, 'T', 0);
  checkHeads(Hq, Hkv);
  checkInt(D, 'D', 1);
  checkInt(Dv, 'Dv', 1);
  checkInt(bs, 'blockSize', 1);
  checkInt(numBlocks, 'numBlocks', 0);
  checkLen(query, T * Hq * D, 'query');
  checkLen(keyCache, numBlocks * Hkv * bs * D, 'keyCache');
  checkLen(valueCache, numBlocks * Hkv * bs * Dv, 'valueCache');
  const S = checkPagedMeta(meta, T, numBlocks, bs);
  const so = scoreOpts(opts, D, Hq, true);
  const { queryStartLoc: qsl, seqLens, blockTable: bt, maxBlocksPerSeq: mb } = meta;
  const out = new Float64Array(T * Hq * Dv).fill(NaN);
  const lse = new Float64Array(Hq * T).fill(NaN);
  let maxLen = 0;
  for (let i = 0; i < S; i++) maxLen = Math.max(maxLen, seqLens[i]!);
  const scores = new Float64Array(maxLen);
  const offs = new Float64Array(maxLen);
  const rowOf = new Float64Array(maxLen); // cache row (block*Hkv*bs + off) of position j, kv head 0
  const group = Hq / Hkv;
  for (let i = 0; i < S; i++) {
    const q0 = qsl[i]!;
    const qLen = qsl[i + 1]! - q0;
    const sl = seqLens[i]!;
    const context = sl - qLen;
    for (let j = 0; j < sl; j++) rowOf[j] = bt[i * mb + Math.floor(j / bs)]! * Hkv * bs + (j % bs);
    for (let r = 0; r < qLen; r++) {
      const t = q0 + r;
      const pos = context + r;
      const jEnd = so.causal ? pos : sl - 1;
      const jStart = so.window > 0 ? Math.max(0, pos - so.window + 1) : 0;
      for (let h = 0; h < Hq; h++) {
        const g = Math.floor(h / group);
        const qOff = (t * Hq + h) * D;
        const slope = so.alibi === undefined ? 0 : so.alibi[h]!;
        let n = 0;
        for (let j = jStart; j <= jEnd; j++) {
          const row = rowOf[j]! + g * bs;
          const kOff = row * D;
          let dot = 0;
          for (let d = 0; d < D; d++) dot += query[qOff + d]! * keyCache[kOff + d]!;
          let s = so.scale * dot;
          if (so.cap > 0) s = so.cap * Math.tanh(s / so.cap);
          if (so.alibi !== undefined) s += slope * (j - pos);
          scores[n] = s;
          offs[n] = row * Dv;
          n++;
        }
        const sink = so.sinks === undefined ? undefined : so.sinks[h]!;
        lse[h * T + t] = attendRow(scores, offs, n, sink, valueCache, Dv, out, (t * Hq + h) * Dv);
      }
    }
  }
  return { out, lse };
}

// ---------------------------------------------------------------------------------------------
// SPEC §4: merging attention states

/**
 * oA/oB [T,H,Dv], lseA/lseB [H,T]. A +inf LSE is an empty state (as vLLM), like -inf; a state
 * with -inf contributes nothing; two empty states give o = 0, lse = -inf.
 */
export function mergeAttnStatesRef(
  oA: ArrayLike<number>,
  lseA: ArrayLike<number>,
  oB: ArrayLike<number>,
  lseB: ArrayLike<number>,
  T: number,
  H: number,
  Dv: number,
): AttnResultRef {
  checkLen(oA, T * H * Dv, 'oA');
  checkLen(oB, T * H * Dv, 'oB');
  checkLen(lseA, H * T, 'lseA');
  checkLen(lseB, H * T, 'lseB');
  const out = new Float64Array(T * H * Dv);
  const lse = new Float64Array(H * T);
  for (let h = 0; h < H; h++) {
    for (let t = 0; t < T; t++) {
      let a = lseA[h * T + t]!;
      let b = lseB[h * T + t]!;
      if (a === Infinity) a = -Infinity;
      if (b === Infinity) b = -Infinity;
      const o = (t * H + h) * Dv;
      const m = Math.max(a, b);
      if (m === -Infinity) {
        lse[h * T + t] = -Infinity; // out stays 0
        continue;
      }
      const wA = Math.exp(a - m);
      const wB = Math.exp(b - m);
      const den = wA + wB;
      const fa = wA / den;
      const fb = wB / den;
      // an empty side's output is never read, so a garbage (even NaN) output there cannot leak in
      for (let d = 0; d < Dv; d++) {
        out[o + d] = (fa === 0 ? 0 : fa * oA[o + d]!) + (fb === 0 ? 0 : fb * oB[o + d]!);
      }
      lse[h * T + t] = m + Math.log(den);
    }
  }
  return { out, lse };
}

// ---------------------------------------------------------------------------------------------
// SPEC §5: MLA
//
// kvBProj is the checkpoint's kv_b_proj.weight [N*(P+V), L] (out x in). For head n:
//   W_UK[n][p][l] = kvBProj[(n*(P+V) + p)     * L + l]   p < P   (k_nope = W_UK[n] · kv_c)
//   W_UV[n][v][l] = kvBProj[(n*(P+V) + P + v) * L + l]   v < V   (v      = W_UV[n] · kv_c)

function checkMlaDims(d: MlaDims): void {
  checkInt(d.N, 'N', 1);
  checkInt(d.L, 'L', 1);
  checkInt(d.P, 'P', 1);
  checkInt(d.R, 'R', 0);
  checkInt(d.V, 'V', 1);
}

function checkMlaCache(cache: ArrayLike<number>, kvBProj: ArrayLike<number>, d: MlaCacheDims): void {
  checkMlaDims(d);
  checkInt(d.numBlocks, 'numBlocks', 0);
  checkInt(d.blockSize, 'blockSize', 1);
  checkLen(cache, d.numBlocks * d.blockSize * (d.L + d.R), 'cache');
  checkLen(kvBProj, d.N * (d.P + d.V) * d.L, 'kvBProj');
}

/**
 * Weight absorption (vLLM's process_weights_after_loading):
 *   wUKT [N,P,L]: wUKT[n,p,l] = W_UK[n][p][l]  (vLLM's W_UK_T; W_UK[n] exactly as stored: P rows of L)
 *   wUV  [N,L,V]: wUV[n,l,v]  = W_UV[n][v][l]  (vLLM's W_UV; the transpose of W_UV[n]'s stored V x L)
 * so q_lat[n] = q_nope[n] · wUKT[n] (L) and out[n] = o_lat[n] · wUV[n] (V).
 */
export function mlaAbsorbRef(kvBProj: ArrayLike<number>, d: MlaDims): { wUKT: Float64Array; wUV: Float64Array } {
  checkMlaDims(d);
  const { N, L, P, V } = d;
  checkLen(kvBProj, N * (P + V) * L, 'kvBProj');
  const wUKT = new Float64Array(N * P * L);
  const wUV = new Float64Array(N * L * V);
  for (let n = 0; n < N; n++) {
    const base = n * (P + V) * L;
    for (let i = 0; i < P * L; i++) wUKT[n * P * L + i] = kvBProj[base + i]!;
    for (let v = 0; v < V; v++) {
      const src = base + (P + v) * L;
      for (let l = 0; l < L; l++) wUV[(n * L + l) * V + v] = kvBProj[src + l]!;
    }
  }
  return { wUKT, wUV };
}

/**
 * vLLM's concat_and_cache_mla on float values: cache [numBlocks, bs, L+R], row = [kv_c (L) | k_pe (R)].
 * kvC [T,L], kPe [T,R]. Negative slots are padding; slots >= numBlocks*bs are skipped (never
 * written outside the buffer). Returns a new cache.
 */
export function mlaCacheWriteRef(
  kvC: ArrayLike<number>,
  kPe: ArrayLike<number>,
  slotMapping: ArrayLike<number>,
  cache: ArrayLike<number>,
  d: MlaDims & { T: number; numBlocks: number; blockSize: number },
): Float64Array {
  const { T, L, R, numBlocks, blockSize: bs } = d;
  checkInt(T, 'T', 0);
  checkInt(L, 'L', 1);
  checkInt(R, 'R', 0);
  checkInt(bs, 'blockSize', 1);
  checkLen(kvC, T * L, 'kvC');
  checkLen(kPe, T * R, 'kPe');
  checkLen(slotMapping, T, 'slotMapping');
  checkLen(cache, numBlocks * bs * (L + R), 'cache');
  const c = Float64Array.from(cache);
  const W = L + R;
  for (let t = 0; t < T; t++) {
    const slot = slotMapping[t]!;
    if (!(slot >= 0) || slot >= numBlocks * bs) continue;
    for (let l = 0; l < L; l++) c[slot * W + l] = kvC[t * L + l]!;
    for (let r = 0; r < R; r++) c[slot * W + L + r] = kPe[t * R + r]!;
  }
  return c;
}

/**
 * Absorbed MQA over explicit latent rows (the FlashMLA "576/512" kernel contract): for each head
 * q_lat = q_nope[n] · wUKT[n]; s_j = scale*(q_lat · kv_c_j + q_pe[n] · k_pe_j) over the given
 * rows; o_lat = softmax · kv_c; out[n] = o_lat · wUV[n]. Writes out[outOff + n*V ..], lse[n*lseStride + lseCol].
 */
function mlaAbsorbedRows(
  qNope: ArrayLike<number>,
  qPe: ArrayLike<number>,
  qRow: number, // token / batch index into qNope [*,N,P], qPe [*,N,R]
  cache: ArrayLike<number>,
  rows: Float64Array, // element offsets of the latent rows in `cache`
  nRows: number,
  wUKT: Float64Array,
  wUV: Float64Array,
  d: MlaDims,
  scale: number,
  scratch: { qLat: Float64Array; oLat: Float64Array; scores: Float64Array },
  out: Float64Array,
  outOff: number,
  lse: Float64Array,
  lseStride: number,
  lseCol: number,
): void {
  const { N, L, P, R, V } = d;
  const { qLat, oLat, scores } = scratch;
  for (let n = 0; n < N; n++) {
    const qn = (qRow * N + n) * P;
    const qp = (qRow * N + n) * R;
    qLat.fill(0);
    for (let p = 0; p < P; p++) {
      const a = qNope[qn + p]!;
      const w = (n * P + p) * L;
      for (let l = 0; l < L; l++) qLat[l] = qLat[l]! + a * wUKT[w + l]!;
    }
    for (let j = 0; j < nRows; j++) {
      const row = rows[j]!;
      let dot = 0;
      for (let l = 0; l < L; l++) dot += qLat[l]! * cache[row + l]!;
      for (let r = 0; r < R; r++) dot += qPe[qp + r]! * cache[row + L + r]!;
      scores[j] = scale * dot;
    }
    lse[n * lseStride + lseCol] = attendRow(scores, rows, nRows, undefined, cache, L, oLat, 0);
    const o = outOff + n * V;
    for (let v = 0; v < V; v++) out[o + v] = 0;
    for (let l = 0; l < L; l++) {
      const a = oLat[l]!;
      if (a === 0) continue;
      const w = (n * L + l) * V;
      for (let v = 0; v < V; v++) out[o + v] = out[o + v]! + a * wUV[w + v]!;
    }
  }
}

function checkMlaQuery(qNope: ArrayLike<number>, qPe: ArrayLike<number>, rows: number, d: MlaDims): void {
  checkLen(qNope, rows * d.N * d.P, 'qNope');
  checkLen(qPe, rows * d.N * d.R, 'qPe');
}

function checkDecodeMeta(meta: MlaDecodeMetaRef, B: number, numBlocks: number, bs: number): void {
  checkInt(meta.maxBlocksPerSeq, 'maxBlocksPerSeq', 0);
  checkLen(meta.seqLens, B, 'seqLens');
  checkMinLen(meta.blockTable, B * meta.maxBlocksPerSeq, 'blockTable');
  for (let b = 0; b < B; b++) {
    const sl = meta.seqLens[b]!;
    if (!Number.isInteger(sl) || sl < 0) throw new Error(`seqLens[${b}]: expected an integer >= 0, got ${sl}`);
    checkSeqBlocks(meta.blockTable, b, meta.maxBlocksPerSeq, sl, numBlocks, bs);
  }
}

/** Element offset of request-row `i`'s position `j` in a latent cache of row width W. */
function latentRow(bt: ArrayLike<number>, i: number, mb: number, j: number, bs: number, W: number): number {
  return (bt[i * mb + Math.floor(j / bs)]! * bs + (j % bs)) * W;
}

/**
 * Absorbed MLA decode. qNope [B,N,P], qPe [B,N,R]; cache [numBlocks,bs,L+R] (float values);
 * sequence b attends to its first seqLens[b] cached tokens (one query at the last position, so no
 * causal mask). -> out [B, N*V], lse [N,B]. seqLens[b] = 0 -> out 0, lse -inf.
 */
export function mlaDecodeRef(
  qNope: ArrayLike<number>,
  qPe: ArrayLike<number>,
  cache: ArrayLike<number>,
  kvBProj: ArrayLike<number>,
  d: MlaDims & { B: number; numBlocks: number; blockSize: number },
  meta: MlaDecodeMetaRef,
  scale: number,
): AttnResultRef {
  const { B, N, L, R, V, blockSize: bs } = d;
  checkInt(B, 'B', 0);
  checkMlaCache(cache, kvBProj, d);
  checkMlaQuery(qNope, qPe, B, d);
  checkDecodeMeta(meta, B, d.numBlocks, bs);
  const { wUKT, wUV } = mlaAbsorbRef(kvBProj, d);
  let maxLen = 0;
  for (let b = 0; b < B; b++) maxLen = Math.max(maxLen, meta.seqLens[b]!);
  const rows = new Float64Array(maxLen);
  const scratch = { qLat: new Float64Array(L), oLat: new Float64Array(L), scores: new Float64Array(maxLen) };
  const out = new Float64Array(B * N * V);
  const lse = new Float64Array(N * B);
  for (let b = 0; b < B; b++) {
    const sl = meta.seqLens[b]!;
    for (let j = 0; j < sl; j++) rows[j] = latentRow(meta.blockTable, b, meta.maxBlocksPerSeq, j, bs, L + R);
    mlaAbsorbedRows(qNope, qPe, b, cache, rows, sl, wUKT, wUV, d, scale, scratch, out, b * N * V, lse, B, b);
  }
  return { out, lse };
}

/** Decompresses latent row `row` for head n: k_nope (P) = W_UK[n]·kv_c, v (V) = W_UV[n]·kv_c. */
function upProject(
  cache: ArrayLike<number>,
  row: number,
  kvBProj: ArrayLike<number>,
  d: MlaDims,
  n: number,
  kOut: Float64Array,
  kOff: number,
  vOut: Float64Array,
  vOff: number,
): void {
  const { L, P, V } = d;
  const base = n * (P + V) * L;
  for (let p = 0; p < P; p++) {
    const w = base + p * L;
    let s = 0;
    for (let l = 0; l < L; l++) s += kvBProj[w + l]! * cache[row + l]!;
    kOut[kOff + p] = s;
  }
  for (let v = 0; v < V; v++) {
    const w = base + (P + v) * L;
    let s = 0;
    for (let l = 0; l < L; l++) s += kvBProj[w + l]! * cache[row + l]!;
    vOut[vOff + v] = s;
  }
}

/**
 * Ordinary multi-head attention over the up-projected keys of one sequence, for the query rows
 * given: kNope [len,N,P] and vals [len,N,V] hold the decompressed tokens 0..len-1, k_pe is read
 * from the latent rows (shared by all heads). Query row qRow sees tokens 0..jEnd.
 */
function mlaUnabsorbedRow(
  qNope: ArrayLike<number>,
  qPe: ArrayLike<number>,
  qRow: number,
  jEnd: number,
  cache: ArrayLike<number>,
  rows: Float64Array,
  kNope: Float64Array,
  vals: Float64Array,
  d: MlaDims,
  scale: number,
  scores: Float64Array,
  offs: Float64Array,
  out: Float64Array,
  lse: Float64Array,
  lseStride: number,
): void {
  const { N, L, P, R, V } = d;
  for (let n = 0; n < N; n++) {
    const qn = (qRow * N + n) * P;
    const qp = (qRow * N + n) * R;
    let cnt = 0;
    for (let j = 0; j <= jEnd; j++) {
      const ko = (j * N + n) * P;
      let dot = 0;
      for (let p = 0; p < P; p++) dot += qNope[qn + p]! * kNope[ko + p]!;
      const row = rows[j]! + L;
      for (let r = 0; r < R; r++) dot += qPe[qp + r]! * cache[row + r]!;
      scores[cnt] = scale * dot;
      offs[cnt] = (j * N + n) * V;
      cnt++;
    }
    lse[n * lseStride + qRow] = attendRow(scores, offs, cnt, undefined, vals, V, out, (qRow * N + n) * V);
  }
}

function decompressSeq(
  cache: ArrayLike<number>,
  rows: Float64Array,
  len: number,
  kvBProj: ArrayLike<number>,
  d: MlaDims,
  kNope: Float64Array,
  vals: Float64Array,
): void {
  for (let j = 0; j < len; j++) {
    for (let n = 0; n < d.N; n++) upProject(cache, rows[j]!, kvBProj, d, n, kNope, (j * d.N + n) * d.P, vals, (j * d.N + n) * d.V);
  }
}

/**
 * mlaDecodeRef computed the unabsorbed way (SPEC §5's equivalence): per head, k = [W_UK[n]·kv_c | k_pe],
 * v = W_UV[n]·kv_c, q = [q_nope | q_pe], the same scale, ordinary attention. Same layouts.
 */
export function mlaDecodeUnabsorbedRef(
  qNope: ArrayLike<number>,
  qPe: ArrayLike<number>,
  cache: ArrayLike<number>,
  kvBProj: ArrayLike<number>,
  d: MlaDims & { B: number; numBlocks: number; blockSize: number },
  meta: MlaDecodeMetaRef,
  scale: number,
): AttnResultRef {
  const { B, N, L, P, R, V, blockSize: bs } = d;
  checkInt(B, 'B', 0);
  checkMlaCache(cache, kvBProj, d);
  checkMlaQuery(qNope, qPe, B, d);
  checkDecodeMeta(meta, B, d.numBlocks, bs);
  let maxLen = 0;
  for (let b = 0; b < B; b++) maxLen = Math.max(maxLen, meta.seqLens[b]!);
  const rows = new Float64Array(maxLen);
  const kNope = new Float64Array(maxLen * N * P);
  const vals = new Float64Array(maxLen * N * V);
  const scores = new Float64Array(maxLen);
  const offs = new Float64Array(maxLen);
  const out = new Float64Array(B * N * V);
  const lse = new Float64Array(N * B);
  for (let b = 0; b < B; b++) {
    const sl = meta.seqLens[b]!;
    for (let j = 0; j < sl; j++) rows[j] = latentRow(meta.blockTable, b, meta.maxBlocksPerSeq, j, bs, L + R);
    decompressSeq(cache, rows, sl, kvBProj, d, kNope, vals);
    mlaUnabsorbedRow(qNope, qPe, b, sl - 1, cache, rows, kNope, vals, d, scale, scores, offs, out, lse, B);
  }
  return { out, lse };
}

/**
 * MLA prefill (the compute-friendly, up-projecting path). qNope [T,N,P], qPe [T,N,R]; meta as in
 * pagedAttentionRef. Each sequence's new tokens are already in the cache; query r of sequence i at
 * pos = context + r attends causally to cached positions 0..pos. -> out [T, N*V], lse [N,T];
 * padding rows (outside queryStartLoc) stay NaN.
 */
export function mlaPrefillRef(
  qNope: ArrayLike<number>,
  qPe: ArrayLike<number>,
  cache: ArrayLike<number>,
  kvBProj: ArrayLike<number>,
  d: MlaDims & { T: number; numBlocks: number; blockSize: number },
  meta: PagedMetaRef,
  scale: number,
): AttnResultRef {
  const { T, N, L, P, R, V, blockSize: bs } = d;
  checkInt(T, 'T', 0);
  checkMlaCache(cache, kvBProj, d);
  checkMlaQuery(qNope, qPe, T, d);
  const S = checkPagedMeta(meta, T, d.numBlocks, bs);
  const { queryStartLoc: qsl, seqLens, blockTable: bt, maxBlocksPerSeq: mb } = meta;
  let maxLen = 0;
  for (let i = 0; i < S; i++) maxLen = Math.max(maxLen, seqLens[i]!);
  const rows = new Float64Array(maxLen);
  const kNope = new Float64Array(maxLen * N * P);
  const vals = new Float64Array(maxLen * N * V);
  const scores = new Float64Array(maxLen);
  const offs = new Float64Array(maxLen);
  const out = new Float64Array(T * N * V).fill(NaN);
  const lse = new Float64Array(N * T).fill(NaN);
  for (let i = 0; i < S; i++) {
    const q0 = qsl[i]!;
    const qLen = qsl[i + 1]! - q0;
    if (qLen === 0) continue;
    const sl = seqLens[i]!;
    const context = sl - qLen;
    for (let j = 0; j < sl; j++) rows[j] = latentRow(bt, i, mb, j, bs, L + R);
    decompressSeq(cache, rows, sl, kvBProj, d, kNope, vals);
    for (let r = 0; r < qLen; r++) {
      mlaUnabsorbedRow(qNope, qPe, q0 + r, context + r, cache, rows, kNope, vals, d, scale, scores, offs, out, lse, T);
    }
  }
  return { out, lse };
}

/**
 * Sparse MLA (FlashMLA sparse), absorbed math. indices [T, topk] holds request-local positions
 * (-1 = invalid); token t belongs to request reqOfToken[t]; position p maps to slot
 * blockTable[req][p // bs]*bs + p % bs. Invalid (never read): p < 0, p // bs >= maxBlocksPerSeq,
 * or a block-table entry outside [0, numBlocks). Attention runs over exactly the valid listed keys
 * (a duplicated index counts twice, as the kernel would gather it twice). No valid key: out 0,
 * lse -inf. -> out [T, N*V], lse [N,T].
 */
export function mlaSparseRef(
  qNope: ArrayLike<number>,
  qPe: ArrayLike<number>,
  cache: ArrayLike<number>,
  kvBProj: ArrayLike<number>,
  d: MlaDims & { T: number; numBlocks: number; blockSize: number; topk: number },
  meta: MlaSparseMetaRef,
  scale: number,
): AttnResultRef {
  const { T, N, L, R, V, numBlocks, blockSize: bs, topk } = d;
  checkInt(T, 'T', 0);
  checkInt(topk, 'topk', 0);
  checkMlaCache(cache, kvBProj, d);
  checkMlaQuery(qNope, qPe, T, d);
  const { reqOfToken, blockTable: bt, maxBlocksPerSeq: mb, indices } = meta;
  checkInt(mb, 'maxBlocksPerSeq', 0);
  checkLen(reqOfToken, T, 'reqOfToken');
  checkLen(indices, T * topk, 'indices');
  const { wUKT, wUV } = mlaAbsorbRef(kvBProj, d);
  const rows = new Float64Array(topk);
  const scratch = { qLat: new Float64Array(L), oLat: new Float64Array(L), scores: new Float64Array(topk) };
  const out = new Float64Array(T * N * V);
  const lse = new Float64Array(N * T);
  for (let t = 0; t < T; t++) {
    const req = reqOfToken[t]!;
    if (!Number.isInteger(req) || req < 0 || (req + 1) * mb > bt.length) {
      throw new Error(`reqOfToken[${t}]: expected a request row of blockTable (${Math.floor(bt.length / Math.max(mb, 1))} rows), got ${req}`);
    }
    let n = 0;
    for (let k = 0; k < topk; k++) {
      const pos = indices[t * topk + k]!;
      if (!(pos >= 0)) continue;
      const bi = Math.floor(pos / bs);
      if (bi >= mb) continue;
      const blk = bt[req * mb + bi]!;
      if (!(blk >= 0 && blk < numBlocks)) continue;
      rows[n++] = (blk * bs + (pos % bs)) * (L + R);
    }
    mlaAbsorbedRows(qNope, qPe, t, cache, rows, n, wUKT, wUV, d, scale, scratch, out, t * N * V, lse, T, t);
  }
  return { out, lse };
}

// ---------------------------------------------------------------------------------------------
// FlashMLA fp8_ds_mla row codec, general L (multiple of 128) and R.
// Row bytes: [0, L) kv_c as e4m3 | [L, L + 4*(L/128)) f32 scales, little-endian, scale g covers
// kv_c[128g .. 128g+127] | then R bf16 k_pe values, little-endian. 656 bytes for L=512, R=64.
// Dequantization multiplies: kv_c[l] = e4m3(byte[l]) * scale[l >> 7] (as upstream FlashMLA).

const F32S = new Float32Array(1);
const U32S = new Uint32Array(F32S.buffer);

function checkRowDims(L: number, R: number): void {
  if (!Number.isInteger(L) || L <= 0 || L % 128 !== 0) throw new Error(`L: expected a positive multiple of 128, got ${L}`);
  checkInt(R, 'R', 0);
}

export function fp8DsMlaRowBytes(L: number, R: number): number {
  checkRowDims(L, R);
  return L + 4 * (L / 128) + 2 * R;
}

/**
 * Quantizes one row [kv_c (L) | k_pe (R)]. Per 128-group: scale = f32(max|x| / 448), stored as is;
 * code = e4m3(f32(x / scale)) with round-to-nearest-even, saturating to ±448. A group whose scale
 * is 0 (all zeros, or so small that max/448 underflows f32) stores scale 0 and all-zero codes, so
 * it decodes to 0 instead of 0/0. k_pe: bf16 round-to-nearest-even of f32(x).
 */
export function fp8DsMlaEncodeRow(row: ArrayLike<number>, L: number, R: number, outBytes: Uint8Array, offset: number): void {
  const nb = fp8DsMlaRowBytes(L, R);
  if (row.length < L + R) throw new Error(`row: expected at least ${L + R} values, got ${row.length}`);
  if (offset < 0 || offset + nb > outBytes.length) {
    throw new Error(`outBytes: a ${nb}-byte row at offset ${offset} does not fit in ${outBytes.length} bytes`);
  }
  const G = L / 128;
  for (let g = 0; g < G; g++) {
    let amax = 0;
    for (let i = g * 128; i < g * 128 + 128; i++) amax = Math.max(amax, Math.abs(Math.fround(row[i]!)));
    const scale = Math.fround(amax / 448);
    for (let i = g * 128; i < g * 128 + 128; i++) {
      outBytes[offset + i] = scale > 0 ? f32ToFp8e4m3Bits(Math.fround(Math.fround(row[i]!) / scale)) : 0;
    }
    F32S[0] = scale;
    const u = U32S[0]!;
    const so = offset + L + 4 * g;
    outBytes[so] = u & 0xff;
    outBytes[so + 1] = (u >>> 8) & 0xff;
    outBytes[so + 2] = (u >>> 16) & 0xff;
    outBytes[so + 3] = u >>> 24;
  }
  const po = offset + L + 4 * G;
  for (let r = 0; r < R; r++) {
    const b = f32ToBf16Bits(row[L + r]!);
    outBytes[po + 2 * r] = b & 0xff;
    outBytes[po + 2 * r + 1] = b >>> 8;
  }
}

/** Decodes one fp8_ds_mla row into out[outOffset .. outOffset + L + R). */
export function fp8DsMlaDecodeRow(bytes: Uint8Array, offset: number, L: number, R: number, out: Float64Array, outOffset: number): void {
  const nb = fp8DsMlaRowBytes(L, R);
  if (offset < 0 || offset + nb > bytes.length) {
    throw new Error(`bytes: a ${nb}-byte row at offset ${offset} does not fit in ${bytes.length} bytes`);
  }
  if (outOffset < 0 || outOffset + L + R > out.length) {
    throw new Error(`out: ${L + R} values at ${outOffset} do not fit in ${out.length}`);
  }
  const G = L / 128;
  for (let g = 0; g < G; g++) {
    const so = offset + L + 4 * g;
    U32S[0] = (bytes[so]! | (bytes[so + 1]! << 8) | (bytes[so + 2]! << 16) | (bytes[so + 3]! << 24)) >>> 0;
    const scale = F32S[0]!;
    for (let i = g * 128; i < g * 128 + 128; i++) out[outOffset + i] = fp8e4m3BitsToF32(bytes[offset + i]!) * scale;
  }
  const po = offset + L + 4 * G;
  for (let r = 0; r < R; r++) out[outOffset + L + r] = bf16BitsToF32(bytes[po + 2 * r]! | (bytes[po + 2 * r + 1]! << 8));
}
