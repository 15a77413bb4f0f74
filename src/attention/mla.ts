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
import { blocksPerPart, checkCacheGeometry, partScales, slotMappingBuffer } from './paged_cache.js';
import { encodePaged, validateMeta, type AttentionMetadata, type HostMeta } from './paged.js';
import { PagedAttentionPlan, wholeSource, type DeviceMeta, type KVSource } from './plan.js';
import type { Kernel } from '../core/pipeline.js';

const WG = 64;
/** Columns and rows a workgroup of the per-head products (qabs_main, vup_main) owns: mla.wgsl's MT, RB. */
const HM_MT = 32, HM_RB = 4;
/** The same for the row-blocked products (qabs_rows_main, vup_rows_main: mla.wgsl's HR_MT, HR_ROWS): each
 *  weight read once per 32 rows, no split-K reduction, but the whole K in one thread's loop. Decode takes
 *  them (engine.tuning.mlaRowProducts 'auto') from HR_MIN_ROWS rows and HR_MIN_GROUPS workgroups on,
 *  by measurement (H200, run 69, bench/notes/mla.md): the q absorption at N 128 batch 32 (512
 *  workgroups, K 128) 0.092 ms against the split-K kernel's 0.248; with fewer workgroups or a longer K
 *  they lost (V up-projection at N 128: 128 workgroups, K 512, 0.267 against 0.135; N 16: 16-64
 *  workgroups, up to 8x slower; batch 8 idles 3/4 of a block: 0.088 against 0.076). */
const HR_MT = 128, HR_ROWS = 32, HR_MIN_ROWS = 16, HR_MIN_GROUPS = 256;
const FLOATS = ['f32', 'f16', 'bf16'];
const CODE: Readonly<Record<string, number>> = { ...DTYPE_CODE, fp8_ds_mla: 4 };

export type MLACacheDType = 'f32' | 'f16' | 'bf16' | 'fp8_ds_mla';

export interface MLACacheOptions { numBlocks: number; blockSize: number; kvLoraRank: number; qkRopeHeadDim: number; dtype?: DType | 'fp8_ds_mla' }

/** Bytes of one fp8_ds_mla row: L e4m3 values, ⌈L/128⌉ f32 scales, R bf16 values (656 for L 512, R 64,
 *  FlashMLA's rows; an L that is not a multiple of 128 gets a last, partial scale group). */
export function fp8DsMlaRowBytes(L: number, R: number): number {
  return L + 4 * Math.ceil(L / 128) + 2 * R;
}

/** One buffer of a latent cache split across buffers: blocks [blockLo, blockLo + blocks), and the scales
 *  buffers its attention reads ([1, 1] then the part's range in blocks, or in slots for sparse decode). */
export interface MLACachePart { data: Tensor; blockLo: number; blocks: number; scales: GPUBuffer; slotScales: GPUBuffer }

export class MLACache {
  readonly numBlocks: number;
  readonly blockSize: number;
  readonly kvLoraRank: number;
  readonly qkRopeHeadDim: number;
  readonly dtype: MLACacheDType;
  /** 4-byte words per row. */
  readonly rowWords: number;
  /** The buffers holding the cache: one unless it is larger than the device's largest storage binding
   *  (whole blocks each, `blocksPerPart` in all but the last; the kernels run once per part). */
  readonly parts: readonly MLACachePart[];
  readonly blocksPerPart: number;
  private readonly pool: Runtime['pool'];

  constructor(engine: Runtime, o: Required<MLACacheOptions> & { dtype: MLACacheDType }) {
    this.pool = engine.pool;
    this.numBlocks = o.numBlocks; this.blockSize = o.blockSize; this.kvLoraRank = o.kvLoraRank;
    this.qkRopeHeadDim = o.qkRopeHeadDim; this.dtype = o.dtype;
    const L = o.kvLoraRank, R = o.qkRopeHeadDim, bs = o.blockSize;
    this.rowWords = o.dtype === 'fp8_ds_mla' ? fp8DsMlaRowBytes(L, R) / 4 : ((L + R) * DTYPE_BYTES[o.dtype]) / 4;
    this.blocksPerPart = blocksPerPart(engine, 'createMLACache', o.numBlocks, 4 * bs * this.rowWords);
    const parts: MLACachePart[] = [];
    for (let lo = 0, i = 0; lo < o.numBlocks; lo += this.blocksPerPart, i++) {
      const n = Math.min(this.blocksPerPart, o.numBlocks - lo);
      const data = o.dtype === 'fp8_ds_mla'
        ? engine.emptyTensor([n, bs, this.rowWords], 'u32', false)
        : engine.emptyTensor([n, bs, L + R], o.dtype, false);
      engine.commandEncoder().clearBuffer(data.buffer, 0, data.byteLength);
      parts.push({ data, blockLo: lo, blocks: n, scales: partScales(engine, 1, 1, lo, lo + n, i, 'latent part'),
                   slotScales: partScales(engine, 1, 1, lo * bs, (lo + n) * bs, i, 'latent part (slots)') });
    }
    this.parts = parts;
  }

  /** [numBlocks, blockSize, L+R] in the cache dtype; for fp8_ds_mla, u32 words [numBlocks, blockSize, rowBytes/4]:
   *  the whole cache, when it is one buffer (see parts). */
  get data(): Tensor {
    if (this.parts.length > 1) {
      throw new WebinferError(`MLACache.data: this cache of ${this.numBlocks} blocks is split across ${this.parts.length} buffers `
        + `(${this.blocksPerPart} blocks each: more than one storage binding holds); read cache.parts[i].data (blocks from parts[i].blockLo)`);
    }
    return this.parts[0].data;
  }

  get slots(): number { return this.numBlocks * this.blockSize; }

  get destroyed(): boolean { return this.parts[0].data.destroyed; }

  destroy(): void {
    if (this.destroyed) return;
    for (const p of this.parts) {
      p.data.destroy();
      this.pool.release(p.scales);
      this.pool.release(p.slotScales);
    }
  }
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
  return new MLACache(engine, { numBlocks, blockSize, kvLoraRank: L, qkRopeHeadDim: R, dtype });
}

export interface MLAOptions {
  numHeads: number; kvLoraRank: number; qkNopeHeadDim: number; qkRopeHeadDim: number; vHeadDim: number;
  scale: number; kvBProj: Tensor;
}

export interface MLADecodeMetadata { seqLens: Int32Array | Tensor; blockTable: Int32Array | Tensor; maxBlocksPerSeq?: number }
export interface MLASparseMetadata { reqOfToken: Int32Array; indices: Int32Array; topk: number; blockTable: Int32Array; maxBlocksPerSeq: number }

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

  /** @internal */
  checkCache(op: string, cache: MLACache): void {
    check(cache instanceof MLACache, op, 'cache', 'an MLACache (engine.createMLACache)', cache);
    check(!cache.destroyed, op, 'cache', 'a live cache', 'a destroyed cache');
    check(cache.kvLoraRank === this.kvLoraRank && cache.qkRopeHeadDim === this.qkRopeHeadDim, op, 'cache',
      `kvLoraRank ${this.kvLoraRank} and qkRopeHeadDim ${this.qkRopeHeadDim} (the layer's)`,
      `${cache.kvLoraRank} and ${cache.qkRopeHeadDim}`);
  }

  /** @internal */
  checkQuery(op: string, qNope: Tensor, qPe: Tensor): number {
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
    for (const part of cache.parts) {
      this.engine.dispatch(k, { src_a: kvC, src_b: kPe, cache_in: slots, dst_a: part.data }, {
        N: this.numHeads, L, P: this.qkNopeHeadDim, R, V: this.vHeadDim, rows: T, row_words: cache.rowWords,
        bs: cache.blockSize, num_blocks: part.blocks, blk_lo: part.blockLo,
      }, Math.ceil((T * cache.rowWords) / WG));
    }
  }

  /** The latent cache as a K/V source: one kv head whose K is the whole L+R row and V its first L values. */
  latentSource(cache: MLACache, sparse = false): KVSource {
    const { kvLoraRank: L, qkRopeHeadDim: R } = this;
    return {
      parts: cache.parts.map((p) => ({ key: p.data, value: p.data, scales: sparse ? p.slotScales : p.scales })),
      geo: { Hkv: 1, D: L + R, Dv: L, blockSize: sparse ? 1 : cache.blockSize, numBlocks: sparse ? cache.slots : cache.numBlocks,
             dtype: cache.dtype, kStride: L + R, vStride: L + R, mlaL: L, mlaRowWords: cache.rowWords, parts: cache.parts.length },
    };
  }

  /**
   * Absorbed decode: qNope [B,N,P], qPe [B,N,R], each sequence's new token already written -> [B, N·V]
   * in qNope's dtype. MQA over the latent cache with the layer's scale. One plan and one run.
   */
  decode(qNope: Tensor, qPe: Tensor, cache: MLACache, meta: MLADecodeMetadata): Tensor {
    const plan = this.planDecode(meta, 'MLALayer.decode');
    try {
      return plan.run(qNope, qPe, cache);
    } finally {
      plan.destroy();
    }
  }

  /**
   * A decode step planned once (API.md "A serving step"): the metadata is validated and partitioned
   * at the first run (the latent cache gives the geometry; every later run takes a cache of the same
   * geometry: each layer's), then each run records q absorption, attention and the V up-projection
   * with nothing allocated but its output.
   */
  planDecode(meta: MLADecodeMetadata, op = 'MLALayer.planDecode'): MLADecodePlan {
    this.engine.assertAlive(op);
    check(meta !== null && typeof meta === 'object', op, 'meta', '{ seqLens, blockTable, maxBlocksPerSeq? }', meta);
    return new MLADecodePlan(this, this.engine, op === 'MLALayer.planDecode' ? 'MLADecodePlan.run' : op, (cache) => {
      const B = meta.seqLens instanceof Int32Array ? meta.seqLens.length : (meta.seqLens as Tensor)?.shape?.[0];
      check(Number.isInteger(B) && B > 0, op, 'meta.seqLens', 'an Int32Array or i32 tensor of one length per sequence', meta.seqLens);
      const allHost = meta.seqLens instanceof Int32Array && meta.blockTable instanceof Int32Array;
      const qsl = Int32Array.from({ length: B + 1 }, (_, i) => i);
      if (allHost) {
        const m = validateMeta(op, { queryStartLoc: qsl, seqLens: meta.seqLens, blockTable: meta.blockTable, maxBlocksPerSeq: meta.maxBlocksPerSeq }, B, cache);
        return { m, src: this.latentSource(cache), causal: true };
      }
      // Device metadata: validated by dtype and shape; queryStartLoc is implicit (one token each).
      const dm = validateMeta(op, { queryStartLoc: qsl, seqLens: meta.seqLens, blockTable: meta.blockTable, maxBlocksPerSeq: meta.maxBlocksPerSeq }, B, cache);
      const m: DeviceMeta = { kind: 'device', S: dm.S, maxB: dm.maxB, qsl: null, seqLens: dm.seqLens as Tensor, blockTable: dm.blockTable as Tensor };
      return { m, src: this.latentSource(cache), causal: true };
    });
  }

  /**
   * Sparse absorbed decode (FlashMLA sparse): token t of qNope [T,N,P] / qPe [T,N,R] attends only to
   * the request-local positions indices[t·topk ..] (-1 = invalid) of its request reqOfToken[t], mapped
   * to slots through that request's block table row; a position outside the table or cache is
   * invalid too. A token with no valid key gives zeros. Host arrays: the keys are gathered on the host.
   */
  sparseDecode(qNope: Tensor, qPe: Tensor, cache: MLACache, meta: MLASparseMetadata): Tensor {
    const plan = this.planSparseDecode(meta, 'MLALayer.sparseDecode');
    try {
      return plan.run(qNope, qPe, cache);
    } finally {
      plan.destroy();
    }
  }

  /** Sparse decode planned once (the keys gathered through the block table at the first run), run per layer. */
  planSparseDecode(meta: MLASparseMetadata, op = 'MLALayer.planSparseDecode'): MLADecodePlan {
    this.engine.assertAlive(op);
    check(meta !== null && typeof meta === 'object', op, 'meta', '{ reqOfToken, indices, topk, blockTable, maxBlocksPerSeq }', meta);
    const topk = checkPosInt(meta.topk, op, 'meta.topk');
    const maxB = checkPosInt(meta.maxBlocksPerSeq, op, 'meta.maxBlocksPerSeq');
    check(meta.reqOfToken instanceof Int32Array, op, 'meta.reqOfToken', 'an Int32Array', meta.reqOfToken);
    const T = meta.reqOfToken.length;
    check(meta.indices instanceof Int32Array && meta.indices.length === T * topk, op, 'meta.indices', `an Int32Array of ${T * topk} entries`,
      meta.indices instanceof Int32Array ? `${meta.indices.length} entries` : meta.indices);
    check(meta.blockTable instanceof Int32Array && meta.blockTable.length % maxB === 0, op, 'meta.blockTable',
      `an Int32Array of requests × maxBlocksPerSeq=${maxB} entries`, meta.blockTable);
    const nReq = meta.blockTable.length / maxB;
    for (let t = 0; t < T; t++) {
      const req = meta.reqOfToken[t];
      if (req < 0 || req >= nReq) fail(op, `meta.reqOfToken[${t}]`, `a request row of blockTable in [0, ${nReq})`, req);
    }
    return new MLADecodePlan(this, this.engine, op === 'MLALayer.planSparseDecode' ? 'MLADecodePlan.run' : op, (cache) => {
      // Each token becomes a one-query "sequence" over its valid keys' slots (the cache viewed as blocks of 1).
      const slots = new Int32Array(T * topk).fill(-1);
      const counts = new Int32Array(T);
      for (let t = 0; t < T; t++) {
        const req = meta.reqOfToken[t];
        for (let k = 0; k < topk; k++) {
          const pos = meta.indices[t * topk + k];
          if (pos < 0 || Math.floor(pos / cache.blockSize) >= maxB) continue;
          const blk = meta.blockTable[req * maxB + Math.floor(pos / cache.blockSize)];
          if (blk < 0 || blk >= cache.numBlocks) continue;
          slots[t * topk + counts[t]++] = blk * cache.blockSize + (pos % cache.blockSize);
        }
      }
      const m: HostMeta = { kind: 'host', S: T, maxB: topk, qsl: Int32Array.from({ length: T + 1 }, (_, i) => i), seqLens: counts, blockTable: slots };
      return { m, src: this.latentSource(cache, true), causal: false, sparse: true };
    }, T);
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
    // q, k and v are written and read by the dispatches below alone: GPU-only scratch (Runtime.gpuScratch).
    const q = e.scratchTensor([T, N, DK], 'f32');
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
        const k = e.scratchTensor([n, N, DK], 'f32');
        const v = e.scratchTensor([n, N, V], 'f32');
        // Each part of a split cache writes the rows of its own blocks.
        for (const [i, part] of cache.parts.entries()) {
          e.dispatch(kvup, { src_b: btBuf, cache_in: part.data, w_uk: this.wUK, w_uv: this.wUV, dst_a: k, dst_b: v }, {
            N, L, P, R, V, rows: n, row_words: cache.rowWords, bs: cache.blockSize, num_blocks: part.blocks, total: cache.numBlocks,
            blk_lo: part.blockLo, first_part: i === 0 ? 1 : 0, max_blocks: m.maxB, seq: s, c0,
          }, Math.ceil((n * N * (DK + V)) / WG));
        }
        // The chunk as a paged cache of n one-token blocks in order, one sequence: this one's queries.
        const chunkMeta: HostMeta = { kind: 'host', S: 1, maxB: n, qsl: Int32Array.of(q0, q1), seqLens: Int32Array.of(n),
          blockTable: Int32Array.from({ length: n }, (_, i) => i) };
        const r = encodePaged(e, op, q, wholeSource(k, v, e.ones, { Hkv: N, D: DK, Dv: V, blockSize: 1, numBlocks: n,
          dtype: 'f32', kStride: DK, vStride: V, mlaL: 0, mlaRowWords: 0 }), chunkMeta, { ...attn, causal }, true, 'f32');
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

/**
 * A planned MLA decode (absorbed, or sparse over gathered keys): q absorption into the latent space,
 * MQA over the latent rows through an PagedAttentionPlan, the V up-projection. The plan's metadata is
 * validated and partitioned at the first run, whose cache gives the geometry; later runs take any
 * cache of that geometry. Workspaces and parameters are the plan's own.
 */
export class MLADecodePlan {
  private attn: PagedAttentionPlan | null = null;
  private geoCache: MLACache | null = null;
  private sparse = false;
  private qLat: Tensor | null = null;
  private oLat: Tensor | null = null;
  private readonly uniforms = new Map<string, GPUBuffer>();
  private destroyed = false;

  /** op: the name errors of a run carry ('MLADecodePlan.run', or the one-shot call's). */
  constructor(private readonly layer: MLALayer, private readonly rt: Runtime, private readonly op: string,
              private readonly build: (cache: MLACache) => { m: HostMeta | DeviceMeta; src: KVSource; causal: boolean; sparse?: boolean },
              private readonly rows?: number) {}

  private params(k: Kernel, values: Record<string, number>): GPUBuffer {
    let u = this.uniforms.get(k.key);
    if (!u) this.uniforms.set(k.key, (u = this.rt.uniformBuffer(k, values)));
    return u;
  }

  /** qNope [B,N,P], qPe [B,N,R] -> [B, N·V] in qNope's dtype (into o.out when given). */
  run(qNope: Tensor, qPe: Tensor, cache: MLACache, o: { out?: Tensor } = {}): Tensor {
    return this.runLayer(this.layer, qNope, qPe, cache, o);
  }

  /**
   * run() for another layer of the same shape and scale (its own absorbed weights and cache): a
   * model's decode step plans once and runs every layer through the one plan.
   */
  runLayer(layer: MLALayer, qNope: Tensor, qPe: Tensor, cache: MLACache, o: { out?: Tensor } = {}): Tensor {
    const op = this.op;
    const rt = this.rt;
    if (this.destroyed) throw new WebinferError(`${op}: the plan was destroyed`);
    rt.assertAlive(op);
    const L = layer;
    const a = this.layer;
    // Compared field by field (this runs for every layer of every step); the text only for the error.
    if (L !== a && (L.numHeads !== a.numHeads || L.kvLoraRank !== a.kvLoraRank || L.qkNopeHeadDim !== a.qkNopeHeadDim
        || L.qkRopeHeadDim !== a.qkRopeHeadDim || L.vHeadDim !== a.vHeadDim || L.scale !== a.scale)) {
      const shape = (x: MLALayer) => `N ${x.numHeads}, L ${x.kvLoraRank}, P ${x.qkNopeHeadDim}, R ${x.qkRopeHeadDim}, V ${x.vHeadDim}, scale ${x.scale}`;
      fail(op, 'layer', `an MLA layer of the plan's shape (${shape(a)})`, `(${shape(L)})`);
    }
    L.checkCache(op, cache);
    const B = L.checkQuery(op, qNope, qPe);
    const { numHeads: N, vHeadDim: V } = L;
    const r = this.ready(cache, B, qNope.dtype);
    let out = o.out;
    if (out !== undefined) {
      checkTensor(out, op, 'o.out');
      check(out.dtype === qNope.dtype && out.shape.length === 2 && out.shape[0] === B && out.shape[1] === N * V, op, 'o.out',
        `a ${qNope.dtype} tensor of shape [B=${B}, N·V=${N * V}]`, `${fmt(out.dtype)} ${shapeStr(out.shape)}`);
    }
    rt.record(r.qk, [rt.groupFor(r.qk, 0, { params: r.qParams, src_a: qNope, src_b: qPe, w_head: L.wUK, dst_a: this.qLat! })], r.qg);
    this.attn!.runSource(this.qLat!, L.latentSource(cache, this.sparse), { out: this.oLat! });
    out ??= rt.emptyTensor([B, N * V], qNope.dtype);
    rt.record(r.vk, [rt.groupFor(r.vk, 0, { params: r.vParams, src_a: this.oLat!, w_head: L.wUV, dst_a: out })], r.vg);
    return out;
  }

  /**
   * What runs of B rows over caches like `cache` need, made at the first: the attention plan over the
   * latent rows, the absorbed query and latent output, the two products' kernels, grids and uniforms.
   */
  private ready(cache: MLACache, B: number, dtype: DType): { qk: Kernel; qg: [number, number, number]; qParams: GPUBuffer; vk: Kernel; vg: [number, number, number]; vParams: GPUBuffer } {
    const op = this.op, rt = this.rt, L = this.layer;
    const { numHeads: N, kvLoraRank: Lr, qkNopeHeadDim: P, qkRopeHeadDim: R, vHeadDim: V } = L;
    if (!this.attn) {
      const { m, src, causal, sparse } = this.build(cache);
      check(m.S === B, op, 'qNope', `${m.S} rows (one per ${this.rows === undefined ? 'sequence' : 'token'} of the plan)`, `${B}`);
      this.sparse = !!sparse;
      this.geoCache = cache;
      // Taken before the attention plan's buffers and handed back after them (destroy): the next plan
      // then gets the same buffers in the same places, and a model's step graph finds its key again.
      this.qLat = rt.emptyTensor([B, N, Lr + R], 'f32', false);
      this.oLat = rt.emptyTensor([B, N, Lr], 'f32', false);
      this.attn = new PagedAttentionPlan(rt, {
        op: this.op, geo: src.geo, Hq: N, meta: m, minPartition: Math.min(64, rt.tuning.pagedMinPartition), decodeAllowed: false, maxQueryLen: 1,
        attn: { scale: L.scale, causal, softcap: 0, window: 0, alibi: null, sinks: null },
      });
    } else {
      check(B === this.qLat!.shape[0], op, 'qNope', `${this.qLat!.shape[0]} rows (the plan's)`, `${B}`);
    }
    const g = this.geoCache!;
    check(cache.numBlocks === g.numBlocks && cache.blockSize === g.blockSize && cache.dtype === g.dtype, op, 'cache',
      `the plan's geometry (numBlocks ${g.numBlocks}, blockSize ${g.blockSize}, ${g.dtype})`, `(numBlocks ${cache.numBlocks}, blockSize ${cache.blockSize}, ${cache.dtype})`);
    const dims = { N, L: Lr, P, R, V, rows: B };
    // Per product (M output columns a head): the row-blocked kernel or the split-K one, and its grid.
    const product = (entry: string, M: number): [string, [number, number, number]] => {
      const pref = rt.tuning.mlaRowProducts;
      const rows = pref === 'on' || (pref === 'auto' && B >= HR_MIN_ROWS && Math.ceil(M / HR_MT) * N * Math.ceil(B / HR_ROWS) >= HR_MIN_GROUPS);
      return rows ? [`${entry}_rows_main`, [Math.ceil(M / HR_MT), N, Math.ceil(B / HR_ROWS)]] : [`${entry}_main`, [Math.ceil(M / HM_MT), N, Math.ceil(B / HM_RB)]];
    };
    const [qe, qg] = product('qabs', Lr);
    const qk = rt.kernel('mla', qe, { overrides: { IN_DTYPE: DTYPE_CODE[dtype], WG } });
    const [ve, vg] = product('vup', V);
    const vk = rt.kernel('mla', ve, { overrides: { OUT_DTYPE: DTYPE_CODE[dtype], WG } });
    return { qk, qg, qParams: this.params(qk, dims), vk, vg, vParams: this.params(vk, dims) };
  }

  /**
   * Prepares runs of B rows of `dtype` queries over caches like `cache` now (what the first run would
   * make) and names what each run records, as PagedAttentionPlan.signature does: a model's step graph
   * keys on it.
   */
  signature(cache: MLACache, B: number, dtype: DType): string {
    const r = this.ready(cache, B, dtype);
    const id = (o: object) => this.rt.idOf(o);
    const L = this.layer;
    return `${id(r.qk.pipeline)}:${id(r.qParams)}:${r.qg}/${id(r.vk.pipeline)}:${id(r.vParams)}:${r.vg}/${id(this.qLat!.buffer)},${id(this.oLat!.buffer)}/`
      + this.attn!.signature(B, 'f32', 'f32', L.numHeads * (L.kvLoraRank + L.qkRopeHeadDim), false);
  }

  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    // The reverse of the order they were taken in (see ready).
    this.attn?.destroy();
    for (const u of [...this.uniforms.values()].reverse()) this.rt.pool.release(u);
    this.uniforms.clear();
    this.oLat?.destroy();
    this.qLat?.destroy();
  }
}
