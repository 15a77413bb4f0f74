// Batched paged attention (SPEC §3) in FlashInfer's plan/run style: the metadata is validated, the
// work partitioned and uploaded once (attention/plan.ts; on the GPU for i32-tensor metadata), then
// each run reads K/V through the block table in the kernels; nothing comes back to the CPU.
import type { DType } from '../core/dtype.js';
import { WebinferError, check, checkPosInt, fail, fmt, isPosInt, shapeStr } from '../core/errors.js';
import type { Runtime } from '../core/runtime.js';
import { checkTensor, type Tensor } from '../core/tensor.js';
import type { AttentionOptions } from '../core/types.js';
import { validateAttnOptions, type AttnOptionValues, type WindowSidesOption } from './common.js';
import { flashUnsupported } from './flash.js';
import { checkCache, type PagedKVCache } from './paged_cache.js';
import { PagedAttentionPlan, type DeviceMeta, type HostMeta, type KVGeometry, type KVSource } from './plan.js';

export type { DeviceMeta, HostMeta } from './plan.js';

// ------------------------------------------------------------------------------------- metadata

export interface AttentionMetadata {
  queryStartLoc: Int32Array | Tensor;
  seqLens: Int32Array | Tensor;
  blockTable: Int32Array | Tensor;
  maxBlocksPerSeq?: number;
}


/**
 * Validates batch metadata against the query and the cache. Host arrays are checked element by
 * element (monotonic queryStartLoc, seqLens covering the new tokens and fitting the table, block
 * indices inside the cache); tensors only by dtype and shape, since reading them back is not allowed:
 * the kernel then clamps what it reads so bad values never leave a buffer.
 */
export function validateMeta(op: string, meta: AttentionMetadata, T: number, cache: { numBlocks: number; blockSize: number }): HostMeta | DeviceMeta {
  // T: the query's tokens (Infinity when planning ahead of any query: each run checks its own).
  check(meta !== null && typeof meta === 'object', op, 'meta', 'an AttentionMetadata object', meta);
  const { queryStartLoc: qsl, seqLens, blockTable } = meta;
  const isHost = (x: unknown) => x instanceof Int32Array;
  const allHost = isHost(qsl) && isHost(seqLens) && isHost(blockTable);
  for (const [name, x] of [['queryStartLoc', qsl], ['seqLens', seqLens], ['blockTable', blockTable]] as const) {
    if (isHost(x)) continue;
    checkTensor(x, op, `meta.${name}`);
    check(x.dtype === 'i32', op, `meta.${name}.dtype`, "'i32' (or an Int32Array)", fmt(x.dtype));
  }
  const S = seqLens instanceof Int32Array ? seqLens.length : (seqLens as Tensor).shape[0];
  check(isPosInt(S), op, 'meta.seqLens', 'at least one sequence', S);
  const qslLen = qsl instanceof Int32Array ? qsl.length : (qsl as Tensor).numel;
  check(qslLen === S + 1, op, 'meta.queryStartLoc', `${S + 1} entries (S+1, S=${S} from seqLens)`, `${qslLen}`);
  let maxB: number;
  const btLen = blockTable instanceof Int32Array ? blockTable.length : (blockTable as Tensor).numel;
  if (meta.maxBlocksPerSeq !== undefined) {
    maxB = checkPosInt(meta.maxBlocksPerSeq, op, 'meta.maxBlocksPerSeq');
  } else if (!(blockTable instanceof Int32Array) && (blockTable as Tensor).shape.length === 2) {
    maxB = (blockTable as Tensor).shape[1];
  } else if (S === 1) {
    maxB = btLen;
  } else {
    return fail(op, 'meta.maxBlocksPerSeq', `a value when blockTable is flat and S=${S} > 1`, 'none');
  }
  check(btLen === S * maxB, op, 'meta.blockTable', `S·maxBlocksPerSeq = ${S}·${maxB} = ${S * maxB} entries`, `${btLen}`);
  if (!allHost) {
    return { kind: 'device', S, maxB, qsl: qsl as Tensor, seqLens: seqLens as Tensor, blockTable: blockTable as Tensor };
  }
  const q = qsl as Int32Array, sl = seqLens as Int32Array, bt = blockTable as Int32Array;
  check(q[0] === 0, op, 'meta.queryStartLoc[0]', '0 (the first sequence starts at token 0)', q[0]);
  for (let s = 0; s < S; s++) {
    if (q[s + 1] < q[s]) fail(op, 'meta.queryStartLoc', `non-decreasing entries (queryStartLoc[${s + 1}] >= queryStartLoc[${s}] = ${q[s]})`, q[s + 1]);
  }
  if (Number.isFinite(T)) check(q[S] <= T, op, 'meta.queryStartLoc', `a last entry at most T=${T} (the query's tokens)`, q[S]);
  for (let s = 0; s < S; s++) {
    const qLen = q[s + 1] - q[s];
    if (!Number.isInteger(sl[s]) || sl[s] < qLen) fail(op, `meta.seqLens[${s}]`, `at least the sequence's ${qLen} new tokens`, sl[s]);
    const need = Math.ceil(sl[s] / cache.blockSize);
    if (need > maxB) fail(op, `meta.seqLens[${s}]`, `at most maxBlocksPerSeq·blockSize = ${maxB * cache.blockSize} tokens (the block table's width)`, sl[s]);
    for (let n = 0; n < need; n++) {
      const blk = bt[s * maxB + n];
      if (blk < 0 || blk >= cache.numBlocks) fail(op, `meta.blockTable[${s}][${n}]`, `a block index in [0, ${cache.numBlocks})`, blk);
    }
  }
  return { kind: 'host', S, maxB, qsl: q, seqLens: sl, blockTable: bt };
}

// ------------------------------------------------------------------------------------- attention

/** The geometry and buffers of a paged K/V cache, as plans run against it. */
export function cacheSource(cache: PagedKVCache): KVSource {
  return {
    parts: cache.parts,
    geo: { Hkv: cache.numKvHeads, D: cache.headSize, Dv: cache.headSizeV, blockSize: cache.blockSize, numBlocks: cache.numBlocks,
           dtype: cache.dtype, kStride: cache.headSize, vStride: cache.headSizeV, mlaL: 0, mlaRowWords: 0, parts: cache.parts.length },
  };
}

/** Plain K/V caches may take the decode kernels; MLA's shared latent rows and strided sources do not. */
function decodeAllowed(g: KVGeometry): boolean {
  return g.dtype !== 'fp8_ds_mla' && g.kStride === g.D && g.vStride === g.Dv;
}

export interface PlanAttentionOptions extends AttentionOptions, WindowSidesOption {
  /** Gives the geometry every run's cache must share. */
  cache: PagedKVCache;
  /** Query heads (a multiple of the cache's kv heads). */
  numHeads: number;
  /** i32-tensor metadata: the most new tokens any sequence of the batch has, when the host knows it
   *  (vLLM's max_query_len). 1 (a decode-only step) lets the plan skip the prefill kernel. Metadata
   *  that breaks the promise is clamped, never read or written out of bounds, but its extra rows are
   *  not computed. */
  maxQueryLen?: number;
}

/**
 * A serving step's attention (API.md): the metadata validated and partitioned once, then run once
 * per layer against any cache of the same geometry. Options are fixed for the plan.
 */
export function planAttention(rt: Runtime, meta: AttentionMetadata, o: PlanAttentionOptions): AttentionPlan {
  const op = 'planAttention';
  rt.assertAlive(op);
  check(o !== null && typeof o === 'object', op, 'o', '{ cache, numHeads, ...AttentionOptions }', o);
  checkCache(o.cache, op);
  const src = cacheSource(o.cache);
  const Hq = checkPosInt(o.numHeads, op, 'o.numHeads');
  check(Hq % src.geo.Hkv === 0, op, 'o.numHeads', `a multiple of the cache's Hkv=${src.geo.Hkv}`, Hq);
  const why = flashUnsupported(src.geo.D, src.geo.Dv);
  if (why) throw new WebinferError(`${op}: cache: ${why}: paged attention needs multiples of 8 up to 256`);
  const { cache: _c, numHeads: _n, maxQueryLen, ...attnOpts } = o;
  if (maxQueryLen !== undefined) checkPosInt(maxQueryLen, op, 'o.maxQueryLen');
  const a = validateAttnOptions(op, attnOpts, src.geo.D, Hq, true);
  const m = validateMeta(op, meta, Infinity, o.cache);
  return new AttentionPlan(new PagedAttentionPlan(rt, {
    op: 'AttentionPlan', geo: src.geo, Hq, meta: m, attn: a, minPartition: rt.tuning.pagedMinPartition, decodeAllowed: decodeAllowed(src.geo), maxQueryLen,
    exactQueries: rt.exactQueries,
  }));
}

/** The public face of a plan over paged K/V caches (API.md AttentionPlan). */
export class AttentionPlan {
  constructor(readonly plan: PagedAttentionPlan) {}

  /** Attention over one layer's cache: [T, Hq, Dv] (into o.out when given). The query is [T, Hq, D],
   *  or [T, W] rows whose first Hq·D elements are the query (a fused projection's) with qRowStride W. */
  run(query: Tensor, cache: PagedKVCache, o: { out?: Tensor; qRowStride?: number } = {}): Tensor {
    checkCache(cache, 'AttentionPlan.run');
    return this.plan.runSource(query, cacheSource(cache), o, false, 'AttentionPlan.run').out;
  }

  /** As run, also returning lse [Hq, T] (f32; -inf for rows that see no key). */
  runWithLse(query: Tensor, cache: PagedKVCache, o: { out?: Tensor; lse?: Tensor } = {}): { out: Tensor; lse: Tensor } {
    checkCache(cache, 'AttentionPlan.runWithLse');
    const r = this.plan.runSource(query, cacheSource(cache), o, true, 'AttentionPlan.runWithLse');
    return { out: r.out, lse: r.lse! };
  }

  destroy(): void {
    this.plan.destroy();
  }
}

export function pagedAttention(engine: Runtime, op: string, query: Tensor, cache: PagedKVCache, meta: AttentionMetadata,
                               opts: AttentionOptions & WindowSidesOption, withLse: boolean): { out: Tensor; lse: Tensor | null } {
  engine.assertAlive(op);
  checkTensor(query, op, 'query');
  checkCache(cache, op);
  check(opts !== null && typeof opts === 'object', op, 'opts', 'an options object', opts);
  const { numKvHeads: Hkv, headSize: D } = cache;
  check(query.shape.length === 3, op, 'query', `shape [T, Hq, D=${D}]`, shapeStr(query.shape));
  const [T, Hq] = query.shape;
  check(query.shape[2] === D, op, 'query', `shape [T, Hq, D=${D}] (the cache's head size)`, shapeStr(query.shape));
  check(Hq % Hkv === 0, op, 'query', `a head count Hq that is a multiple of the cache's Hkv=${Hkv}`, `Hq=${Hq}`);
  check(['f32', 'f16', 'bf16'].includes(query.dtype), op, 'query.dtype', "'f32', 'f16' or 'bf16'", fmt(query.dtype));
  const a = validateAttnOptions(op, opts, D, Hq, true);
  const m = validateMeta(op, meta, T, cache);
  const why = flashUnsupported(D, cache.headSizeV);
  if (why) throw new WebinferError(`${op}: cache: ${why}: paged attention needs multiples of 8 up to 256`);
  return encodePaged(engine, op, query, cacheSource(cache), m, a, withLse);
}

/**
 * Paged attention over validated inputs as one plan and one run: the plan's buffers return to the
 * pool once the work is submitted. Output [T, Hq, Dv] in `outDtype` (default: the query's).
 */
export function encodePaged(engine: Runtime, op: string, query: Tensor, kv: KVSource, m: HostMeta | DeviceMeta,
                            a: AttnOptionValues, withLse: boolean, outDtype: DType = query.dtype,
                            minPartition = engine.tuning.pagedMinPartition): { out: Tensor; lse: Tensor | null } {
  const plan = new PagedAttentionPlan(engine, { op, geo: kv.geo, Hq: query.shape[1], meta: m, attn: a, minPartition, decodeAllowed: decodeAllowed(kv.geo),
    exactQueries: engine.exactQueries });
  try {
    const out = outDtype === query.dtype ? undefined : engine.emptyTensor([query.shape[0], query.shape[1], kv.geo.Dv], outDtype);
    return plan.runSource(query, kv, { out }, withLse);
  } finally {
    plan.destroy();
  }
}
