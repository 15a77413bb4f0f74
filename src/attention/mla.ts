// Multi-head latent attention (SPEC §5): absorbed weights, the latent paged cache (also in FlashMLA's
// fp8_ds_mla rows), absorbed decode and prefill with chunked context. The attention itself is the
// paged flash kernel: for decode, MQA over the latent rows (one kv head, the N query heads tiled so
// each latent row is read once per head tile, the L-wide output split across threads, long contexts
// split into partitions merged by LSE); for prefill, per-head K/V up-projected from the cache.
import { DTYPE_BYTES, DTYPE_CODE, type DType } from '../core/dtype.js';
import { WebinferError, check, checkFinite, checkPosInt, fail, fmt, shapeStr } from '../core/errors.js';
import type { Runtime } from '../core/runtime.js';
import { checkTensor, type Tensor } from '../core/tensor.js';
import { encodeMerge } from './merge.js';
import { checkCacheGeometry, slotMappingBuffer } from './paged_cache.js';
import { encodePaged, validateMeta, type AttentionMetadata, type DeviceMeta, type HostMeta, type PagedKV } from './paged.js';

const WG = 64;
const FLOATS = ['f32', 'f16', 'bf16'];
const CODE: Readonly<Record<string, number>> = { ...DTYPE_CODE, fp8_ds_mla: 4 };

export type MLACacheDType = 'f32' | 'f16' | 'bf16' | 'fp8_ds_mla';

export interface MLACacheOptions { numBlocks: number; blockSize: number; kvLoraRank: number; qkRopeHeadDim: number; dtype?: DType | 'fp8_ds_mla' }

/** Bytes of one fp8_ds_mla row: L e4m3 values, L/128 f32 scales, R bf16 values (656 for L 512, R 64). */
export function fp8DsMlaRowBytes(L: number, R: number): number {
  return L + 4 * (L / 128) + 2 * R;
}

export class MLACache {
  /** [numBlocks, blockSize, L+R] in the cache dtype; for fp8_ds_mla, u32 words [numBlocks, blockSize, rowBytes/4]. */
  readonly data: Tensor;
  readonly numBlocks: number;
  readonly blockSize: number;
  readonly kvLoraRank: number;
  readonly qkRopeHeadDim: number;
  readonly dtype: MLACacheDType;
  /** 4-byte words per row. */
  readonly rowWords: number;

  constructor(engine: Runtime, o: Required<MLACacheOptions> & { dtype: MLACacheDType }) {
    this.numBlocks = o.numBlocks; this.blockSize = o.blockSize; this.kvLoraRank = o.kvLoraRank;
    this.qkRopeHeadDim = o.qkRopeHeadDim; this.dtype = o.dtype;
    const L = o.kvLoraRank, R = o.qkRopeHeadDim;
    this.rowWords = o.dtype === 'fp8_ds_mla' ? fp8DsMlaRowBytes(L, R) / 4 : ((L + R) * DTYPE_BYTES[o.dtype]) / 4;
    this.data = o.dtype === 'fp8_ds_mla'
      ? engine.emptyTensor([o.numBlocks, o.blockSize, this.rowWords], 'u32', false)
      : engine.emptyTensor([o.numBlocks, o.blockSize, L + R], o.dtype, false);
    engine.commandEncoder().clearBuffer(this.data.buffer, 0, this.data.byteLength);
  }

  get slots(): number { return this.numBlocks * this.blockSize; }

  destroy(): void { this.data.destroy(); }
}

export function createMLACache(engine: Runtime, o: MLACacheOptions): MLACache {
  const op = 'createMLACache';
  engine.assertAlive(op);
  const { numBlocks, blockSize } = checkCacheGeometry(op, o);
  const L = checkPosInt(o.kvLoraRank, op, 'kvLoraRank');
  const R = checkPosInt(o.qkRopeHeadDim, op, 'qkRopeHeadDim');
  const dtype = (o.dtype ?? 'f32') as MLACacheDType;
  check(['f32', 'f16', 'bf16', 'fp8_ds_mla'].includes(dtype), op, 'dtype', "'f32', 'f16', 'bf16' or 'fp8_ds_mla'", fmt(dtype));
  // Attention reads rows four values at a time; the latent width and rope width are multiples of 8.
  check(L % 8 === 0, op, 'kvLoraRank', 'a multiple of 8', L);
  check(R % 8 === 0, op, 'qkRopeHeadDim', 'a multiple of 8', R);
  if (dtype === 'fp8_ds_mla') check(L % 128 === 0, op, 'kvLoraRank', "a multiple of 128 for 'fp8_ds_mla' (one scale per 128 values)", L);
  return new MLACache(engine, { numBlocks, blockSize, kvLoraRank: L, qkRopeHeadDim: R, dtype });
}

export interface MLAOptions {
  numHeads: number; kvLoraRank: number; qkNopeHeadDim: number; qkRopeHeadDim: number; vHeadDim: number;
  scale: number; kvBProj: Tensor;
}

export interface MLADecodeMetadata { seqLens: Int32Array | Tensor; blockTable: Int32Array | Tensor; maxBlocksPerSeq?: number }

export class MLALayer {
  readonly numHeads: number;
  readonly kvLoraRank: number;
  readonly qkNopeHeadDim: number;
  readonly qkRopeHeadDim: number;
  readonly vHeadDim: number;
  readonly scale: number;
  /** W_UK [N, P, L] (each head's rows of kv_b_proj) and W_UV [N, L, V] (SPEC's layout), f32, absorbed once. */
  readonly wUK: Tensor;
  readonly wUV: Tensor;

  constructor(private readonly engine: Runtime, o: MLAOptions) {
    const op = 'createMLA';
    engine.assertAlive(op);
    check(o !== null && typeof o === 'object', op, 'o', 'an options object', o);
    const N = this.numHeads = checkPosInt(o.numHeads, op, 'numHeads');
    const L = this.kvLoraRank = checkPosInt(o.kvLoraRank, op, 'kvLoraRank');
    const P = this.qkNopeHeadDim = checkPosInt(o.qkNopeHeadDim, op, 'qkNopeHeadDim');
    const R = this.qkRopeHeadDim = checkPosInt(o.qkRopeHeadDim, op, 'qkRopeHeadDim');
    const V = this.vHeadDim = checkPosInt(o.vHeadDim, op, 'vHeadDim');
    this.scale = checkFinite(o.scale, op, 'scale');
    for (const [name, d] of [['kvLoraRank', L], ['qkNopeHeadDim', P], ['qkRopeHeadDim', R], ['vHeadDim', V]] as const) {
      check(d % 8 === 0, op, name, 'a multiple of 8', d);
    }
    checkTensor(o.kvBProj, op, 'kvBProj');
    check(o.kvBProj.shape.length === 2 && o.kvBProj.shape[0] === N * (P + V) && o.kvBProj.shape[1] === L, op, 'kvBProj',
      `shape [N·(P+V), L] = [${N * (P + V)}, ${L}] (the checkpoint's kv_b_proj.weight)`, shapeStr(o.kvBProj.shape));
    check(FLOATS.includes(o.kvBProj.dtype), op, 'kvBProj.dtype', "'f32', 'f16' or 'bf16'", fmt(o.kvBProj.dtype));
    this.wUK = engine.emptyTensor([N, P, L], 'f32', false);
    this.wUV = engine.emptyTensor([N, L, V], 'f32', false);
    const k = engine.kernel('mla', 'absorb_main', { overrides: { IN_DTYPE: DTYPE_CODE[o.kvBProj.dtype], WG } });
    const n = N * (P + V) * L;
    engine.dispatch(k, { src_a: o.kvBProj, dst_a: this.wUK, dst_b: this.wUV }, { N, L, P, R, V }, Math.ceil(n / WG));
  }

  private checkCache(op: string, cache: MLACache): void {
    check(cache instanceof MLACache, op, 'cache', 'an MLACache (engine.createMLACache)', cache);
    check(!cache.data.destroyed, op, 'cache', 'a live cache', 'a destroyed cache');
    check(cache.kvLoraRank === this.kvLoraRank && cache.qkRopeHeadDim === this.qkRopeHeadDim, op, 'cache',
      `kvLoraRank ${this.kvLoraRank} and qkRopeHeadDim ${this.qkRopeHeadDim} (the layer's)`,
      `${cache.kvLoraRank} and ${cache.qkRopeHeadDim}`);
  }

  private checkQuery(op: string, qNope: Tensor, qPe: Tensor): number {
    const { numHeads: N, qkNopeHeadDim: P, qkRopeHeadDim: R } = this;
    checkTensor(qNope, op, 'qNope');
    checkTensor(qPe, op, 'qPe');
    check(qNope.shape.length === 3 && qNope.shape[1] === N && qNope.shape[2] === P, op, 'qNope', `shape [B, N=${N}, P=${P}]`, shapeStr(qNope.shape));
    const B = qNope.shape[0];
    check(qPe.shape.length === 3 && qPe.shape[0] === B && qPe.shape[1] === N && qPe.shape[2] === R, op, 'qPe', `shape [B=${B}, N=${N}, R=${R}]`, shapeStr(qPe.shape));
    check(FLOATS.includes(qNope.dtype), op, 'qNope.dtype', "'f32', 'f16' or 'bf16'", fmt(qNope.dtype));
    check(qPe.dtype === qNope.dtype, op, 'qPe.dtype', `'${qNope.dtype}' (the dtype of qNope)`, fmt(qPe.dtype));
    return B;
  }

  /** vLLM's concat_and_cache_mla: row [kvC[t] | kPe[t]] to slot slotMapping[t]; negative slots skipped. */
  cacheWrite(kvC: Tensor, kPe: Tensor, cache: MLACache, slotMapping: Tensor | Int32Array): void {
    const op = 'MLALayer.cacheWrite';
    this.engine.assertAlive(op);
    this.checkCache(op, cache);
    const { kvLoraRank: L, qkRopeHeadDim: R } = this;
    checkTensor(kvC, op, 'kvC');
    checkTensor(kPe, op, 'kPe');
    check(kvC.shape.length === 2 && kvC.shape[1] === L, op, 'kvC', `shape [T, L=${L}]`, shapeStr(kvC.shape));
    const T = kvC.shape[0];
    check(kPe.shape.length === 2 && kPe.shape[0] === T && kPe.shape[1] === R, op, 'kPe', `shape [T=${T}, R=${R}]`, shapeStr(kPe.shape));
    check(FLOATS.includes(kvC.dtype), op, 'kvC.dtype', "'f32', 'f16' or 'bf16'", fmt(kvC.dtype));
    check(kPe.dtype === kvC.dtype, op, 'kPe.dtype', `'${kvC.dtype}' (the dtype of kvC)`, fmt(kPe.dtype));
    const slots = slotMappingBuffer(this.engine, op, slotMapping, T, cache.slots);
    const k = this.engine.kernel('mla', 'write_main', { overrides: { IN_DTYPE: DTYPE_CODE[kvC.dtype], CACHE_DTYPE: CODE[cache.dtype], WG } });
    this.engine.dispatch(k, { src_a: kvC, src_b: kPe, cache_in: slots, dst_a: cache.data }, {
      N: this.numHeads, L, P: this.qkNopeHeadDim, R, V: this.vHeadDim, rows: T, row_words: cache.rowWords,
      bs: cache.blockSize, num_blocks: cache.numBlocks,
    }, Math.ceil((T * cache.rowWords) / WG));
  }

  private latentKV(cache: MLACache): PagedKV {
    const { kvLoraRank: L, qkRopeHeadDim: R } = this;
    return {
      key: cache.data, value: cache.data, dtype: cache.dtype, Hkv: 1, D: L + R, Dv: L,
      blockSize: cache.blockSize, numBlocks: cache.numBlocks, kScale: 1, vScale: 1,
      kStride: L + R, vStride: L + R, mlaL: L, mlaRowWords: cache.rowWords,
    };
  }

  /**
   * Absorbed decode: qNope [B,N,P], qPe [B,N,R], each sequence's new token already written -> [B, N·V]
   * in qNope's dtype. MQA over the latent cache with the layer's scale.
   */
  decode(qNope: Tensor, qPe: Tensor, cache: MLACache, meta: MLADecodeMetadata): Tensor {
    const op = 'MLALayer.decode';
    const e = this.engine;
    e.assertAlive(op);
    this.checkCache(op, cache);
    const B = this.checkQuery(op, qNope, qPe);
    check(meta !== null && typeof meta === 'object', op, 'meta', '{ seqLens, blockTable, maxBlocksPerSeq? }', meta);
    const qsl = Int32Array.from({ length: B + 1 }, (_, i) => i);
    const allHost = meta.seqLens instanceof Int32Array && meta.blockTable instanceof Int32Array;
    // Device metadata wants queryStartLoc on the GPU too; the tensor is freed once the call is recorded.
    const qslT = allHost ? null : e.tensor(qsl, [B + 1], 'i32');
    try {
      const m = validateMeta(op, { queryStartLoc: qslT ?? qsl, seqLens: meta.seqLens, blockTable: meta.blockTable,
        maxBlocksPerSeq: meta.maxBlocksPerSeq }, B, cache);
      check(m.S === B, op, 'meta.seqLens', `${B} entries (one per sequence of qNope)`, `${m.S}`);
      return this.absorbed(op, qNope, qPe, this.latentKV(cache), m);
    } finally {
      qslT?.destroy();
    }
  }

  /**
   * Sparse absorbed decode (FlashMLA sparse): token t of qNope [T,N,P] / qPe [T,N,R] attends only to
   * the request-local positions indices[t·topk ..] (-1 = invalid) of its request reqOfToken[t], mapped
   * to slots through that request's block table row; a position outside the table or cache is
   * invalid too. A token with no valid key gives zeros. Host arrays: the keys are gathered on the host.
   */
  sparseDecode(qNope: Tensor, qPe: Tensor, cache: MLACache,
               meta: { reqOfToken: Int32Array; indices: Int32Array; topk: number; blockTable: Int32Array; maxBlocksPerSeq: number }): Tensor {
    const op = 'MLALayer.sparseDecode';
    const e = this.engine;
    e.assertAlive(op);
    this.checkCache(op, cache);
    const T = this.checkQuery(op, qNope, qPe);
    check(meta !== null && typeof meta === 'object', op, 'meta', '{ reqOfToken, indices, topk, blockTable, maxBlocksPerSeq }', meta);
    const topk = checkPosInt(meta.topk, op, 'meta.topk');
    const maxB = checkPosInt(meta.maxBlocksPerSeq, op, 'meta.maxBlocksPerSeq');
    for (const [name, a, n] of [['reqOfToken', meta.reqOfToken, T], ['indices', meta.indices, T * topk]] as const) {
      check(a instanceof Int32Array && a.length === n, op, `meta.${name}`, `an Int32Array of ${n} entries`, a instanceof Int32Array ? `${a.length} entries` : a);
    }
    check(meta.blockTable instanceof Int32Array && meta.blockTable.length % maxB === 0, op, 'meta.blockTable',
      `an Int32Array of requests × maxBlocksPerSeq=${maxB} entries`, meta.blockTable);
    const nReq = meta.blockTable.length / maxB;
    // Each token becomes a one-query "sequence" over its valid keys' slots (the cache viewed as blocks of 1).
    const slots = new Int32Array(T * topk).fill(-1);
    const counts = new Int32Array(T);
    for (let t = 0; t < T; t++) {
      const req = meta.reqOfToken[t];
      if (req < 0 || req >= nReq) fail(op, `meta.reqOfToken[${t}]`, `a request row of blockTable in [0, ${nReq})`, req);
      for (let k = 0; k < topk; k++) {
        const pos = meta.indices[t * topk + k];
        if (pos < 0 || Math.floor(pos / cache.blockSize) >= maxB) continue;
        const blk = meta.blockTable[req * maxB + Math.floor(pos / cache.blockSize)];
        if (blk < 0 || blk >= cache.numBlocks) continue;
        slots[t * topk + counts[t]++] = blk * cache.blockSize + (pos % cache.blockSize);
      }
    }
    const m: HostMeta = { kind: 'host', S: T, maxB: topk, qsl: Int32Array.from({ length: T + 1 }, (_, i) => i), seqLens: counts, blockTable: slots };
    return this.absorbed(op, qNope, qPe, { ...this.latentKV(cache), blockSize: 1, numBlocks: cache.slots }, m, false);
  }

  /** q absorption, MQA over the latent rows, V up-projection. */
  private absorbed(op: string, qNope: Tensor, qPe: Tensor, kv: PagedKV, m: HostMeta | DeviceMeta, causal = true): Tensor {
    const e = this.engine;
    const B = qNope.shape[0];
    const { numHeads: N, kvLoraRank: L, qkNopeHeadDim: P, qkRopeHeadDim: R, vHeadDim: V } = this;
    const q = e.emptyTensor([B, N, L + R], 'f32');
    e.dispatch(e.kernel('mla', 'qabs_main', { overrides: { IN_DTYPE: DTYPE_CODE[qNope.dtype], WG } }),
      { src_a: qNope, src_b: qPe, w_uk: this.wUK, dst_a: q }, { N, L, P, R, V, rows: B }, Math.ceil((B * N * (L + R)) / WG));
    // One query row per head and sequence: short partitions (64 keys) so that even batch 1 spreads
    // its context over enough workgroups (16 with 256-key partitions measured 0.86 ms at N 16, 4k).
    const attn = encodePaged(e, op, q, kv, m, { scale: this.scale, causal, softcap: 0, window: 0, alibi: null, sinks: null }, false, 'f32',
      Math.min(64, e.tuning.pagedMinPartition));
    q.destroy();
    const out = e.emptyTensor([B, N * V], qNope.dtype);
    const words = qNope.dtype === 'f32' ? B * N * V : (B * N * V) / 2;
    e.dispatch(e.kernel('mla', 'vup_main', { overrides: { OUT_DTYPE: DTYPE_CODE[qNope.dtype], WG } }),
      { src_a: attn.out, w_uv: this.wUV, dst_a: out }, { N, L, P, R, V, rows: B }, Math.ceil(words / WG));
    attn.out.destroy();
    return out;
  }

  /**
   * Prefill through up-projection: qNope [T,N,P], qPe [T,N,R]; each sequence's new tokens already
   * written to the cache -> [T, N·V] in qNope's dtype. New tokens attend causally to themselves; the
   * cached context is up-projected in page-aligned chunks of engine.tuning.mlaPrefillChunk tokens
   * (a bounded workspace) attended without a mask, and the states are merged by LSE.
   */
  prefill(qNope: Tensor, qPe: Tensor, cache: MLACache, meta: AttentionMetadata): Tensor {
    const op = 'MLALayer.prefill';
    const e = this.engine;
    e.assertAlive(op);
    this.checkCache(op, cache);
    const T = this.checkQuery(op, qNope, qPe);
    const mm = validateMeta(op, meta, T, cache);
    if (mm.kind !== 'host') {
      throw new WebinferError(`${op}: meta: expected host arrays (Int32Array): prefill plans its context chunks on the host, got i32 tensors`);
    }
    const m: HostMeta = mm;
    const { numHeads: N, kvLoraRank: L, qkNopeHeadDim: P, qkRopeHeadDim: R, vHeadDim: V } = this;
    const DK = P + R;
    const q = e.emptyTensor([T, N, DK], 'f32');
    e.dispatch(e.kernel('mla', 'qcat_main', { overrides: { IN_DTYPE: DTYPE_CODE[qNope.dtype], WG } }),
      { src_a: qNope, src_b: qPe, dst_a: q }, { N, L, P, R, V, rows: T }, Math.ceil((T * N * DK) / WG));
    const btBuf = e.scratch(Math.max(16, 4 * m.blockTable.length), 'block table');
    e.device.queue.writeBuffer(btBuf, 0, new Int32Array(m.blockTable));
    const chunk = Math.max(cache.blockSize, Math.floor(e.tuning.mlaPrefillChunk / cache.blockSize) * cache.blockSize);
    const kvup = e.kernel('mla', 'kvup_main', { overrides: { CACHE_DTYPE: CODE[cache.dtype], WG } });
    const out = e.emptyTensor([T, N * V], qNope.dtype);
    const attn = { scale: this.scale, softcap: 0, window: 0, alibi: null, sinks: null };
    for (let s = 0; s < m.S; s++) {
      const q0 = m.qsl[s], q1 = m.qsl[s + 1];
      if (q1 === q0) continue;
      const ctx = m.seqLens[s] - (q1 - q0);
      // Context chunks [c0, c1) without a mask, then the new tokens, causal among themselves.
      const ranges: [number, number, boolean][] = [];
      for (let c0 = 0; c0 < ctx; c0 += chunk) ranges.push([c0, Math.min(ctx, c0 + chunk), false]);
      ranges.push([ctx, m.seqLens[s], true]);
      let state: { out: Tensor; lse: Tensor } | null = null;
      for (const [c0, c1, causal] of ranges) {
        const n = c1 - c0;
        const k = e.emptyTensor([n, N, DK], 'f32');
        const v = e.emptyTensor([n, N, V], 'f32');
        e.dispatch(kvup, { src_b: btBuf, cache_in: cache.data, w_uk: this.wUK, w_uv: this.wUV, dst_a: k, dst_b: v }, {
          N, L, P, R, V, rows: n, row_words: cache.rowWords, bs: cache.blockSize, num_blocks: cache.numBlocks,
          max_blocks: m.maxB, seq: s, c0,
        }, Math.ceil((n * N * (DK + V)) / WG));
        // The chunk as a paged cache of n one-token blocks in order, one sequence: this one's queries.
        const chunkMeta: HostMeta = { kind: 'host', S: 1, maxB: n, qsl: Int32Array.of(q0, q1), seqLens: Int32Array.of(n),
          blockTable: Int32Array.from({ length: n }, (_, i) => i) };
        const r = encodePaged(e, op, q, { key: k, value: v, dtype: 'f32', Hkv: N, D: DK, Dv: V, blockSize: 1, numBlocks: n,
          kScale: 1, vScale: 1, kStride: DK, vStride: V }, chunkMeta, { ...attn, causal }, true, 'f32');
        k.destroy();
        v.destroy();
        const last = causal;
        if (!state && last) {
          // One chunk: the state is the answer, converted to the output dtype by a one-part merge.
          const lse = e.emptyTensor([N, T], 'f32');
          encodeMerge(e, { T, H: N, Dv: V, inDtype: 'f32', oA: r.out, lseA: r.lse!, nParts: 1, t0: q0, rows: q1 }, out, lse);
          lse.destroy();
        } else if (!state) {
          state = { out: r.out, lse: r.lse! };
          continue;
        } else {
          const target = last ? out : e.emptyTensor([T, N, V], 'f32');
          const lse = e.emptyTensor([N, T], 'f32');
          encodeMerge(e, { T, H: N, Dv: V, inDtype: 'f32', oA: state.out, lseA: state.lse, oB: r.out, lseB: r.lse!, nParts: 2, t0: q0, rows: q1 }, target, lse);
          state.out.destroy();
          state.lse.destroy();
          state = last ? null : { out: target, lse };
          if (last) lse.destroy();
        }
        r.out.destroy();
        r.lse?.destroy();
      }
    }
    q.destroy();
    return out;
  }
}

export function createMLA(engine: Runtime, o: MLAOptions): MLALayer {
  return new MLALayer(engine, o);
}
