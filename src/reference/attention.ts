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
//
// This file: SPEC §2-§4 (dense SDPA, the paged cache and paged attention, merging states); mla.ts: §5.

export type { AttnOptionsRef, PagedMetaRef } from './util.js';
import type { AttnOptionsRef, PagedMetaRef } from './util.js';

/** The window limits the keys after the row too (|i_abs - j| < slidingWindow; attention/common.ts
 *  WindowSidesOption): a bidirectional encoder's local attention. */
export interface WindowSidesRef { windowBothSides?: boolean }
import { attendRow, checkHeads, checkInt, checkLen, checkPagedMeta, rounding, scoreOpts } from './util.js';


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


/** N heads, L kv_lora_rank, P qk_nope_head_dim, R qk_rope_head_dim, V v_head_dim. */
export interface AttnResultRef {
  out: Float64Array;
  lse: Float64Array;
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
 * past side is limited: without causal, keys after i_abs stay visible, as the SPEC's formula says;
 * windowBothSides also drops j - i_abs >= W); a bool mask entry of 0 excludes the key.
 */
export function sdpaRef(
  q: ArrayLike<number>,
  k: ArrayLike<number>,
  v: ArrayLike<number>,
  dims: SdpaDims,
  opts: AttnOptionsRef & WindowSidesRef & { mask?: MaskRef } = {},
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
  const r = rounding(opts.precision);
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
          if (so.window > 0 && opts.windowBothSides && j - iAbs >= so.window) continue;
          let mv = 0;
          if (mask !== undefined) {
            mv = mask.data[mRow + j * ms[3]!]!;
            if (boolMask && mv === 0) continue;
          }
          const kOff = (kBase + j) * D;
          let dot = 0;
          for (let d = 0; d < D; d++) dot = r(dot + r(q[qOff + d]! * k[kOff + d]!));
          let s = r(so.scale * dot);
          if (so.cap > 0) s = r(so.cap * r(Math.tanh(r(s / so.cap))));
          if (so.alibi !== undefined) s = r(s + r(slope * (j - iAbs)));
          if (mask !== undefined && !boolMask) s = r(s + mv);
          scores[n] = s;
          offs[n] = (kBase + j) * Dv;
          n++;
        }
        const row = (b * Hq + h) * Lq + i;
        lse[row] = attendRow(scores, offs, n, sink, v, Dv, out, row * Dv, r);
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


/**
 * SPEC §3. query [T,Hq,D] -> out [T,Hq,Dv], lse [Hq,T]. Sequence i: qLen = qsl[i+1]-qsl[i],
 * context = seqLens[i]-qLen; its query r sits at pos = context+r and sees cached positions
 * j <= pos (causal is the default here; an explicit `causal: false` lets it see all seqLens[i]
 * tokens), limited by the window (pos - j < W; with windowBothSides also j - pos < W). ALiBi adds slope[h]*(j - pos). Position j lives at
 * slot blockTable[i][j // bs]*bs + j % bs. Rows not covered by queryStartLoc (padding) stay NaN.
 */
export function pagedAttentionRef(
  query: ArrayLike<number>,
  keyCache: ArrayLike<number>,
  valueCache: ArrayLike<number>,
  dims: PagedDims & { T: number },
  meta: PagedMetaRef,
  opts: AttnOptionsRef & WindowSidesRef = {},
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
      const jEnd = Math.min(so.causal ? pos : sl - 1, so.window > 0 && opts.windowBothSides ? pos + so.window - 1 : Infinity);
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

