// The float64 reference of SPEC §5 (MLA): absorption, the latent cache (also FlashMLA's fp8_ds_mla
// rows), absorbed and unabsorbed decode, prefill with context, sparse decode. Conventions as in
// attention.ts.
import { bf16BitsToF32, f32ToBf16Bits, f32ToFp8e4m3Bits, fp8e4m3BitsToF32 } from '../core/dtype.js';
import type { AttnResultRef } from './attention.js';
import type { PagedMetaRef } from './util.js';
import { attendRow, checkInt, checkLen, checkMinLen, checkPagedMeta, checkSeqBlocks } from './util.js';

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
// FlashMLA fp8_ds_mla row codec, general L (a multiple of 8; a last, partial scale group when L is not
// a multiple of 128, an extension of FlashMLA's format, which has L 512) and R.
// Row bytes: [0, L) kv_c as e4m3 | [L, L + 4*(L/128)) f32 scales, little-endian, scale g covers
// kv_c[128g .. 128g+127] | then R bf16 k_pe values, little-endian. 656 bytes for L=512, R=64.
// Dequantization multiplies: kv_c[l] = e4m3(byte[l]) * scale[l >> 7] (as upstream FlashMLA).

const F32S = new Float32Array(1);
const U32S = new Uint32Array(F32S.buffer);

function checkRowDims(L: number, R: number): void {
  if (!Number.isInteger(L) || L <= 0 || L % 8 !== 0) throw new Error(`L: expected a positive multiple of 8, got ${L}`);
  checkInt(R, 'R', 0);
}

export function fp8DsMlaRowBytes(L: number, R: number): number {
  checkRowDims(L, R);
  return L + 4 * Math.ceil(L / 128) + 2 * R;
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
  const G = Math.ceil(L / 128);
  for (let g = 0; g < G; g++) {
    let amax = 0;
    const end = Math.min(g * 128 + 128, L);
    for (let i = g * 128; i < end; i++) amax = Math.max(amax, Math.abs(Math.fround(row[i]!)));
    const scale = Math.fround(amax / 448);
    for (let i = g * 128; i < end; i++) {
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
  const G = Math.ceil(L / 128);
  for (let g = 0; g < G; g++) {
    const so = offset + L + 4 * g;
    U32S[0] = (bytes[so]! | (bytes[so + 1]! << 8) | (bytes[so + 2]! << 16) | (bytes[so + 3]! << 24)) >>> 0;
    const scale = F32S[0]!;
    for (let i = g * 128; i < Math.min(g * 128 + 128, L); i++) out[outOffset + i] = fp8e4m3BitsToF32(bytes[offset + i]!) * scale;
  }
  const po = offset + L + 4 * G;
  for (let r = 0; r < R; r++) out[outOffset + L + r] = bf16BitsToF32(bytes[po + 2 * r]! | (bytes[po + 2 * r + 1]! << 8));
}

