// The paged KV cache (SPEC §3, vLLM's layout) and reshape_and_cache: the cache object, its geometry
// checks, and the kernel (shaders/attention/paged_cache.wgsl) that scatters new tokens' K/V rows into
// their slots.
import { DTYPE_BYTES, DTYPE_CODE, type DType } from '../core/dtype.js';
import { WebinferError, check, checkPosInt, fail, fmt, shapeStr } from '../core/errors.js';
import type { Runtime } from '../core/runtime.js';
import { checkTensor, type Tensor } from '../core/tensor.js';

const CACHE_DTYPES: readonly DType[] = ['f32', 'f16', 'bf16', 'fp8e4m3'];
const CODE = DTYPE_CODE;
const WG = 64;

export interface PagedKVCacheOptions {
  numBlocks: number; blockSize: number; numKvHeads: number; headSize: number;
  headSizeV?: number; dtype?: DType;
  /** fp8e4m3 only: stored = value / scale on write, value = stored · scale on read (per tensor). */
  kScale?: number; vScale?: number;
}

/**
 * One buffer's share of a cache split across buffers: whole blocks [blockLo, blockLo + blocks) as
 * their own tensors, and its scales buffer, which the kernels read as [k scale, v scale] f32 and then
 * [blockLo, blockLo + blocks, part index] u32 (a split cache's kernels run once per part).
 */
export interface CachePart { key: Tensor; value: Tensor; scales: GPUBuffer; blockLo: number; blocks: number }

/** Bytes of the 8 words a part's scales buffer holds. */
const SCALES_BYTES = 32;

/** The scales buffer of a cache part (see CachePart). */
export function partScales(engine: Runtime, kScale: number, vScale: number, lo: number, hi: number, index: number, label: string): GPUBuffer {
  const b = engine.pool.acquire(SCALES_BYTES, GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST, label);
  const img = new ArrayBuffer(SCALES_BYTES);
  new Float32Array(img, 0, 2).set([kScale, vScale]);
  new Uint32Array(img, 8, 3).set([lo, hi, index]);
  engine.device.queue.writeBuffer(b, 0, img);
  return b;
}

/**
 * Blocks per buffer of a cache whose block takes `blockBytes` bytes: all of them in one buffer when
 * they fit the device's largest storage binding (and engine.tuning.cacheBindingBytes, which tests
 * shrink), else as many whole blocks as one binding holds.
 */
export function blocksPerPart(engine: Runtime, op: string, numBlocks: number, blockBytes: number): number {
  const cap = Math.min(engine.limits.maxStorageBufferBindingSize, engine.limits.maxBufferSize, engine.tuning.cacheBindingBytes);
  const per = Math.floor(cap / blockBytes);
  if (per < 1) fail(op, 'blockSize', `blocks of at most ${cap} bytes (the device's largest storage binding)`, `${blockBytes} bytes a block`);
  return Math.min(per, numBlocks);
}

export class PagedKVCache {
  readonly numBlocks: number;
  readonly blockSize: number;
  readonly numKvHeads: number;
  readonly headSize: number;
  readonly headSizeV: number;
  readonly dtype: DType;
  readonly kScale: number;
  readonly vScale: number;
  /**
   * The buffers holding the cache: one part unless the cache is larger than the device's largest
   * storage binding (2 GiB on Dawn/NVIDIA), when each part holds whole blocks (all but the last
   * `blocksPerPart` of them) and the kernels run once per part, merging by LSE.
   */
  readonly parts: readonly CachePart[];
  readonly blocksPerPart: number;

  private readonly pool: Runtime['pool'];

  constructor(engine: Runtime, o: Required<PagedKVCacheOptions>) {
    this.pool = engine.pool;
    this.numBlocks = o.numBlocks; this.blockSize = o.blockSize; this.numKvHeads = o.numKvHeads;
    this.headSize = o.headSize; this.headSizeV = o.headSizeV; this.dtype = o.dtype;
    this.kScale = o.kScale; this.vScale = o.vScale;
    const rowBytes = DTYPE_BYTES[o.dtype] * Math.max(o.headSize, o.headSizeV);
    this.blocksPerPart = blocksPerPart(engine, 'createPagedKVCache', o.numBlocks, o.numKvHeads * o.blockSize * rowBytes);
    const parts: CachePart[] = [];
    for (let lo = 0, i = 0; lo < o.numBlocks; lo += this.blocksPerPart, i++) {
      const n = Math.min(this.blocksPerPart, o.numBlocks - lo);
      const key = engine.emptyTensor([n, o.numKvHeads, o.blockSize, o.headSize], o.dtype, false);
      const value = engine.emptyTensor([n, o.numKvHeads, o.blockSize, o.headSizeV], o.dtype, false);
      // Zeroed, so a slot nobody wrote reads as 0 rather than whatever the pooled buffer held.
      engine.commandEncoder().clearBuffer(key.buffer, 0, key.byteLength);
      engine.commandEncoder().clearBuffer(value.buffer, 0, value.byteLength);
      parts.push({ key, value, blockLo: lo, blocks: n, scales: partScales(engine, o.kScale, o.vScale, lo, lo + n, i, 'kv scales') });
    }
    this.parts = parts;
  }

  /** [numBlocks, Hkv, blockSize, D]: the whole key cache, when it is one buffer (see parts). */
  get key(): Tensor {
    return this.whole('key');
  }

  /** [numBlocks, Hkv, blockSize, Dv]: the whole value cache, when it is one buffer (see parts). */
  get value(): Tensor {
    return this.whole('value');
  }

  private whole(which: 'key' | 'value'): Tensor {
    if (this.parts.length > 1) {
      throw new WebinferError(`PagedKVCache.${which}: this cache of ${this.numBlocks} blocks is split across ${this.parts.length} buffers `
        + `(${this.blocksPerPart} blocks each: more than one storage binding holds); read cache.parts[i].${which} (blocks from parts[i].blockLo)`);
    }
    return this.parts[0][which];
  }

  /** Number of token slots. */
  get slots(): number {
    return this.numBlocks * this.blockSize;
  }

  get destroyed(): boolean {
    return this.parts[0].key.destroyed;
  }

  destroy(): void {
    if (this.destroyed) return;
    for (const p of this.parts) {
      p.key.destroy();
      p.value.destroy();
      // Back to the pool, which hands it out again only after the work recorded so far is submitted.
      this.pool.release(p.scales);
    }
  }
}

/** The geometry every paged cache shares: a positive block count and 1..256 slots per block. */
export function checkCacheGeometry(op: string, o: { numBlocks: number; blockSize: number }): { numBlocks: number; blockSize: number } {
  check(o !== null && typeof o === 'object', op, 'o', 'an options object', o);
  const numBlocks = checkPosInt(o.numBlocks, op, 'numBlocks');
  const blockSize = checkPosInt(o.blockSize, op, 'blockSize');
  check(blockSize <= 256, op, 'blockSize', 'an integer from 1 to 256', blockSize);
  return { numBlocks, blockSize };
}

/**
 * A slot mapping for T tokens as a GPU binding: host slots are checked (below `slots`, or negative for
 * padding) and uploaded; an i32 tensor is checked by shape (the kernels skip slots out of range).
 */
export function slotMappingBuffer(engine: Runtime, op: string, slotMapping: Tensor | Int32Array, T: number, slots: number): GPUBuffer | Tensor {
  if (slotMapping instanceof Int32Array) {
    check(slotMapping.length === T, op, 'slotMapping', `${T} slots (one per token)`, `${slotMapping.length}`);
    for (let t = 0; t < T; t++) {
      const s = slotMapping[t];
      if (s >= slots) fail(op, `slotMapping[${t}]`, `a slot below ${slots} (numBlocks·blockSize), or negative for padding`, s);
    }
    return i32Buffer(engine, slotMapping, 'slot mapping');
  }
  checkTensor(slotMapping, op, 'slotMapping');
  check(slotMapping.dtype === 'i32' && slotMapping.shape.length === 1 && slotMapping.shape[0] === T, op, 'slotMapping',
    `an i32 tensor of shape [T=${T}]`, `${fmt(slotMapping.dtype)} ${shapeStr(slotMapping.shape)}`);
  return slotMapping;
}

export function createPagedKVCache(engine: Runtime, o: PagedKVCacheOptions): PagedKVCache {
  const op = 'createPagedKVCache';
  engine.assertAlive(op);
  const { numBlocks, blockSize } = checkCacheGeometry(op, o);
  const numKvHeads = checkPosInt(o.numKvHeads, op, 'numKvHeads');
  const headSize = checkPosInt(o.headSize, op, 'headSize');
  const headSizeV = o.headSizeV === undefined ? headSize : checkPosInt(o.headSizeV, op, 'headSizeV');
  const dtype = o.dtype ?? 'f32';
  check(CACHE_DTYPES.includes(dtype), op, 'dtype', "'f32', 'f16', 'bf16' or 'fp8e4m3'", fmt(dtype));
  // Rows are written a word at a time: a row must fill whole 4-byte words.
  const perWord = 4 / DTYPE_BYTES[dtype];
  for (const [name, d] of [['headSize', headSize], ['headSizeV', headSizeV]] as const) {
    check(d % perWord === 0, op, name, `a multiple of ${perWord} for dtype '${dtype}' (whole 4-byte words per row)`, d);
  }
  let kScale = 1, vScale = 1;
  for (const [name, v] of [['kScale', o.kScale], ['vScale', o.vScale]] as const) {
    if (v === undefined) continue;
    check(dtype === 'fp8e4m3', op, name, "only with dtype 'fp8e4m3'", `${name} with dtype '${dtype}'`);
    check(typeof v === 'number' && Number.isFinite(v) && v > 0, op, name, 'a positive finite number', v);
    if (name === 'kScale') kScale = v; else vScale = v;
  }
  return new PagedKVCache(engine, { numBlocks, blockSize, numKvHeads, headSize, headSizeV, dtype, kScale, vScale });
}

export function checkCache(cache: unknown, op: string): asserts cache is PagedKVCache {
  check(cache instanceof PagedKVCache, op, 'cache', 'a PagedKVCache (engine.createPagedKVCache)', cache);
  check(!cache.destroyed, op, 'cache', 'a live cache', 'a destroyed cache');
}

/** A small i32 storage buffer with host data, returned to the pool after submission. */
function i32Buffer(engine: Runtime, data: Int32Array, label: string): GPUBuffer {
  const b = engine.scratch(Math.max(16, data.byteLength), label);
  // A copy: the caller's array may view a SharedArrayBuffer, which dawn.node refuses to upload.
  engine.device.queue.writeBuffer(b, 0, new Int32Array(data));
  return b;
}

export function reshapeAndCache(engine: Runtime, key: Tensor, value: Tensor, cache: PagedKVCache, slotMapping: Tensor | Int32Array): void {
  const op = 'reshapeAndCache';
  engine.assertAlive(op);
  checkTensor(key, op, 'key');
  checkTensor(value, op, 'value');
  checkCache(cache, op);
  const { numKvHeads: Hkv, headSize: D, headSizeV: Dv } = cache;
  check(key.shape.length === 3 && key.shape[1] === Hkv && key.shape[2] === D, op, 'key', `shape [T, Hkv=${Hkv}, D=${D}]`, shapeStr(key.shape));
  const T = key.shape[0];
  check(value.shape.length === 3 && value.shape[0] === T && value.shape[1] === Hkv && value.shape[2] === Dv, op, 'value',
    `shape [T=${T}, Hkv=${Hkv}, Dv=${Dv}]`, shapeStr(value.shape));
  check(['f32', 'f16', 'bf16'].includes(key.dtype), op, 'key.dtype', "'f32', 'f16' or 'bf16'", fmt(key.dtype));
  check(value.dtype === key.dtype, op, 'value.dtype', `'${key.dtype}' (the dtype of key)`, fmt(value.dtype));
  const slots = slotMappingBuffer(engine, op, slotMapping, T, cache.slots);
  encodeCacheWrite(engine, T, { tensor: key, offset: 0, stride: Hkv * D }, { tensor: value, offset: 0, stride: Hkv * Dv }, cache, slots);
}

/** Rows of K or V for a cache write: token t's heads start at element offset + t·stride of tensor. */
export interface KVRows { tensor: Tensor; offset: number; stride: number }

/**
 * Records the cache write of T tokens from validated (possibly strided) rows: a model writes K and V
 * straight from its fused projection's output. Slots: an i32 tensor or a checked host buffer.
 */
export function encodeCacheWrite(engine: Runtime, T: number, key: KVRows, value: KVRows, cache: PagedKVCache, slots: GPUBuffer | Tensor): void {
  const { numKvHeads: Hkv, headSize: D, headSizeV: Dv } = cache;
  const perWord = 4 / DTYPE_BYTES[cache.dtype];
  const wk = D / perWord, wv = Dv / perWord;
  const kernel = engine.kernel('paged_cache', 'cache_main', { overrides: { IN_DTYPE: CODE[key.tensor.dtype], CACHE_DTYPE: CODE[cache.dtype], WG } });
  // One dispatch per part of a split cache, each writing the slots of its own blocks.
  for (const part of cache.parts) {
    engine.dispatch(kernel, { key: key.tensor, value: value.tensor, slots, key_cache: part.key, value_cache: part.value }, {
      T, Hkv, D, Dv, bs: cache.blockSize, num_blocks: part.blocks, blk_lo: part.blockLo, wk, wv,
      k_inv_scale: 1 / cache.kScale, v_inv_scale: 1 / cache.vScale,
      k_off: key.offset, k_stride: key.stride, v_off: value.offset, v_stride: value.stride,
    }, Math.ceil((T * Hkv * (wk + wv)) / WG));
  }
}

/** One source of moveHeadRows: token t's head h starts at element off + t·stride + h·D of src (f32), and goes to dst (f32). */
export interface HeadRows { src: Tensor; off: number; stride: number; dst: Tensor }

/**
 * The cache write's kernel as a row mover (f32 to f32, one dispatch): T tokens of `heads` heads of D
 * values each (a: its rows, b: a second source beside it, e.g. v beside k) go to row
 * (slot / bs · heads + h) · bs + slot % bs of dst, slot = slots[t] (an i32 tensor of T; negative: skipped).
 * With slots 0..T-1 and bs = T that turns rows [T, heads·D] into [heads, T, D] (SDPA's layout); with
 * the roles of tokens and heads swapped (T = heads, heads = tokens, stride = tokens·D, bs = heads) it
 * turns SDPA's output back into rows; with one head of D values it copies whole rows to other rows of a
 * tensor. `sink`: a small f32 tensor bound as the second destination when there is no b (written by no one).
 */
export function moveHeadRows(engine: Runtime, T: number, heads: number, D: number, bs: number, slots: Tensor, a: HeadRows, b: HeadRows | null, sink: Tensor): void {
  const kernel = engine.kernel('paged_cache', 'cache_main', { overrides: { IN_DTYPE: CODE.f32, CACHE_DTYPE: CODE.f32, WG } });
  const wv = b ? D : 0;
  engine.dispatch(kernel, { key: a.src, value: (b ?? a).src, slots, key_cache: a.dst, value_cache: b ? b.dst : sink }, {
    T, Hkv: heads, D, Dv: wv, bs, num_blocks: Math.max(1, Math.ceil(a.dst.shape.reduce((x, y) => x * y, 1) / (heads * bs * D))), blk_lo: 0, wk: D, wv,
    k_inv_scale: 1, v_inv_scale: 1, k_off: a.off, k_stride: a.stride, v_off: b ? b.off : 0, v_stride: b ? b.stride : 0,
  }, Math.ceil((T * heads * (D + wv)) / WG));
}

/** A fused q|k|v projection's rows, as ropeCacheWrite reads them: token t's q heads at t·stride, its
 *  k heads at kOffset + t·stride, its v heads at vOffset + t·stride, every head `cache.headSize` wide. */
export interface QkvRows { tensor: Tensor; qHeads: number; stride: number; kOffset: number; vOffset: number }

/** The RoPE of ropeCacheWrite: per-token positions (i32), the f32 tables [positions, half], the pairing. */
export interface RopeTables { positions: Tensor; cos: Tensor; sin: Tensor; interleaved: boolean }

/**
 * Whether ropeCacheWrite serves these rows and cache: f32 rows, K and V heads of one size, a rotary
 * part that fits a head, a cache word that divides it. Otherwise a model rotates, then writes.
 */
export function ropeCacheWriteFits(qkv: QkvRows, rope: RopeTables, cache: PagedKVCache): boolean {
  const D = cache.headSize, half = rope.cos.shape[1];
  return qkv.tensor.dtype === 'f32' && cache.headSizeV === D && 2 * half <= D && D % (4 / DTYPE_BYTES[cache.dtype]) === 0
    && rope.cos.dtype === 'f32' && rope.sin.dtype === 'f32' && rope.positions.dtype === 'i32';
}

/**
 * One pass after a fused q|k|v projection: rotates the q heads of T tokens in place, rotates their k
 * heads into the key cache and copies their v heads into the value cache (rope_cache.wgsl), where a
 * model would run rope over q and k and then encodeCacheWrite. The caller checks ropeCacheWriteFits.
 */
export function encodeRopeCacheWrite(engine: Runtime, T: number, qkv: QkvRows, rope: RopeTables, cache: PagedKVCache, slots: Tensor): void {
  const { numKvHeads: Hkv, headSize: D } = cache;
  if (!ropeCacheWriteFits(qkv, rope, cache)) throw new WebinferError('ropeCacheWrite: rows, tables or cache it does not serve (see ropeCacheWriteFits)');
  const wk = D / (4 / DTYPE_BYTES[cache.dtype]);
  const [P, half] = rope.cos.shape;
  const kernel = engine.kernel('rope_cache', 'rope_cache_main', { overrides: { CACHE_DTYPE: CODE[cache.dtype], INTERLEAVED: rope.interleaved, WG } });
  cache.parts.forEach((part, i) => {
    const qh = i === 0 ? qkv.qHeads : 0;
    engine.dispatch(kernel, {
      qkv: qkv.tensor, slots, positions: rope.positions, cos_t: rope.cos, sin_t: rope.sin, key_cache: part.key, value_cache: part.value,
    }, {
      T, q_heads: qh, Hkv, D, bs: cache.blockSize, num_blocks: part.blocks, wk, blk_lo: part.blockLo,
      k_inv_scale: 1 / cache.kScale, v_inv_scale: 1 / cache.vScale, half, num_pos: P,
      stride: qkv.stride, k_off: qkv.kOffset, v_off: qkv.vOffset,
    }, Math.ceil((T * (qh * half + 2 * Hkv * wk)) / WG));
  });
}
