// Paged KV cache (SPEC §3): the cache, reshape_and_cache, and batched paged attention in FlashInfer's
// plan/run style: the host validates the metadata, plans the work items (sequence, kv head, row tile,
// KV partition) and uploads everything in one write; the GPU reads K/V through the block table and
// nothing comes back to the CPU.
import { DTYPE_CODE, type DType } from '../core/dtype.js';
import { WebinferError, check, checkPosInt, fail, fmt, isPosInt, shapeStr } from '../core/errors.js';
import type { Runtime } from '../core/runtime.js';
import { checkTensor, type Tensor } from '../core/tensor.js';
import type { AttentionOptions } from '../core/types.js';
import { headParams, sdpaFlags, validateAttnOptions, type AttnOptionValues } from './common.js';
import { flashUnsupported, flashVariantFor, planFlash, type FlashPlan } from './flash.js';
import { encodeMerge } from './merge.js';
import { checkCache, type PagedKVCache } from './paged_cache.js';
import { planDecode, type DecodePlan } from './paged_decode.js';

const CODE = DTYPE_CODE;

// ------------------------------------------------------------------------------------- metadata

export interface AttentionMetadata {
  queryStartLoc: Int32Array | Tensor;
  seqLens: Int32Array | Tensor;
  blockTable: Int32Array | Tensor;
  maxBlocksPerSeq?: number;
}

export interface HostMeta { kind: 'host'; S: number; maxB: number; qsl: Int32Array; seqLens: Int32Array; blockTable: Int32Array }
export interface DeviceMeta { kind: 'device'; S: number; maxB: number; qsl: Tensor; seqLens: Tensor; blockTable: Tensor }

/**
 * Validates batch metadata against the query and the cache. Host arrays are checked element by
 * element (monotonic queryStartLoc, seqLens covering the new tokens and fitting the table, block
 * indices inside the cache); tensors only by dtype and shape, since reading them back is not allowed:
 * the kernel then clamps what it reads so bad values never leave a buffer.
 */
export function validateMeta(op: string, meta: AttentionMetadata, T: number, cache: { numBlocks: number; blockSize: number }): HostMeta | DeviceMeta {
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
  check(q[S] <= T, op, 'meta.queryStartLoc', `a last entry at most T=${T} (the query's tokens)`, q[S]);
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

// ---------------------------------------------------------------------------------------- planning

export interface PagedPlan {
  flash: FlashPlan;
  decode: DecodePlan | null;
  /** Work items (sequence, kv head, row tile, partition), 4 i32 each: flash, then decode. */
  flashItems: Int32Array;
  decodeItems: Int32Array;
  nParts: number;
  partLen: number;
}

/**
 * Work items for one batch. Sequences with one new token go to the decode kernel where it applies,
 * the rest to the flash kernel. A long context with few rows to spread it over is split into KV
 * partitions computed in parallel and merged by LSE (FlashDecoding), so that the GPU gets about
 * engine.tuning.pagedTargetWorkgroups workgroups; partitions are whole tiles of 64 keys and at least
 * engine.tuning.pagedMinPartition long, and never longer than the decode kernel can hold.
 */
export function planPaged(engine: Runtime, m: HostMeta | DeviceMeta, T: number, G: number, Hkv: number,
                          flash: FlashPlan, decode: DecodePlan | null = null, minPartition = engine.tuning.pagedMinPartition): PagedPlan {
  const BR = flash.TY * flash.TM;
  const S = m.S;
  const qLen = (s: number) => (m.kind === 'host' ? m.qsl[s + 1] - m.qsl[s] : T);
  // Device metadata: lengths unknown on the host; every sequence may hold all T tokens and the
  // kernel skips tiles past its rows. No decode routing and no partitions then.
  const useDecode = (s: number) => decode !== null && m.kind === 'host' && qLen(s) === 1;
  const rowTiles = Array.from({ length: S }, (_, s) => (useDecode(s) ? 0 : Math.ceil((G * qLen(s)) / BR)));
  const nDecode = Array.from({ length: S }, (_, s) => s).filter(useDecode).length;
  const base = (rowTiles.reduce((a, r) => a + r, 0) + nDecode) * Hkv;
  let nParts = 1;
  let partLen = 0;
  if (m.kind === 'host' && base > 0) {
    const maxSeq = Math.max(0, ...m.seqLens);
    const quantum = 64;
    const minPart = Math.max(quantum, minPartition);
    const want = Math.max(1, Math.min(Math.ceil(engine.tuning.pagedTargetWorkgroups / base), Math.floor(maxSeq / minPart)));
    partLen = Math.ceil(Math.ceil(maxSeq / want) / quantum) * quantum;
    if (decode && nDecode > 0) partLen = Math.min(partLen, decode.PMAX);
    nParts = Math.max(1, Math.ceil(maxSeq / partLen));
    if (nParts === 1) partLen = Math.max(partLen, maxSeq);
  }
  const flashItems = new Int32Array(4 * (base / Hkv - nDecode) * Hkv * nParts);
  const decodeItems = new Int32Array(4 * nDecode * Hkv * nParts);
  let fi = 0, di = 0;
  for (let s = 0; s < S; s++) {
    for (let g = 0; g < Hkv; g++) {
      for (let p = 0; p < nParts; p++) {
        if (useDecode(s)) {
          decodeItems[di++] = s; decodeItems[di++] = g; decodeItems[di++] = 0; decodeItems[di++] = p;
        } else {
          for (let rt = 0; rt < rowTiles[s]; rt++) { flashItems[fi++] = s; flashItems[fi++] = g; flashItems[fi++] = rt; flashItems[fi++] = p; }
        }
      }
    }
  }
  return { flash, decode, flashItems, decodeItems, nParts, partLen };
}

// ------------------------------------------------------------------------------------- attention

/** The K/V source the paged kernels read: a PagedKVCache, or MLA's latent cache as K and V at once. */
export interface PagedKV {
  key: Tensor; value: Tensor;
  /** Storage of the rows: a cache dtype, or 'fp8_ds_mla' (FlashMLA's 656-byte rows, in `key`). */
  dtype: DType | 'fp8_ds_mla';
  Hkv: number; D: number; Dv: number; blockSize: number; numBlocks: number;
  kScale: number; vScale: number;
  /** Elements between rows of K and of V. */
  kStride: number; vStride: number;
  /** fp8_ds_mla: the latent width and the row length in 4-byte words. */
  mlaL?: number; mlaRowWords?: number;
}

export function pagedAttention(engine: Runtime, op: string, query: Tensor, cache: PagedKVCache, meta: AttentionMetadata,
                               opts: AttentionOptions, withLse: boolean): { out: Tensor; lse: Tensor | null } {
  engine.assertAlive(op);
  checkTensor(query, op, 'query');
  checkCache(cache, op);
  check(opts !== null && typeof opts === 'object', op, 'opts', 'an options object', opts);
  const { numKvHeads: Hkv, headSize: D, headSizeV: Dv } = cache;
  check(query.shape.length === 3, op, 'query', `shape [T, Hq, D=${D}]`, shapeStr(query.shape));
  const [T, Hq] = query.shape;
  check(query.shape[2] === D, op, 'query', `shape [T, Hq, D=${D}] (the cache's head size)`, shapeStr(query.shape));
  check(Hq % Hkv === 0, op, 'query', `a head count Hq that is a multiple of the cache's Hkv=${Hkv}`, `Hq=${Hq}`);
  check(['f32', 'f16', 'bf16'].includes(query.dtype), op, 'query.dtype', "'f32', 'f16' or 'bf16'", fmt(query.dtype));
  const a = validateAttnOptions(op, opts, D, Hq, true);
  const m = validateMeta(op, meta, T, cache);
  const why = flashUnsupported(D, Dv);
  if (why) throw new WebinferError(`${op}: cache: ${why}: paged attention needs multiples of 8 up to 256`);
  return encodePaged(engine, op, query, {
    key: cache.key, value: cache.value, dtype: cache.dtype, Hkv, D, Dv, blockSize: cache.blockSize, numBlocks: cache.numBlocks,
    kScale: cache.kScale, vScale: cache.vScale, kStride: D, vStride: Dv,
  }, m, a, withLse);
}

/**
 * Records paged attention over validated inputs: plan, one metadata write, the decode and flash
 * kernels, and the LSE merge of KV partitions. Output [T, Hq, Dv] in `outDtype` (default: the query's).
 */
export function encodePaged(engine: Runtime, op: string, query: Tensor, kv: PagedKV, m: HostMeta | DeviceMeta,
                            a: AttnOptionValues, withLse: boolean, outDtype: DType = query.dtype,
                            minPartition = engine.tuning.pagedMinPartition): { out: Tensor; lse: Tensor | null } {
  const [T, Hq] = query.shape;
  const { Hkv, D, Dv } = kv;
  const variant = flashVariantFor(engine);
  const tile = query.dtype === 'f16' && kv.dtype === 'f16' && engine.features.f16 && engine.tuning.flashF16Tiles ? 'f16' : 'f32';
  const flash = planFlash(engine.limits, engine.features, D, Dv, variant, engine.tuning.flashSmemBytes, engine.tuning.flashGrid, tile);
  if (!flash) throw new WebinferError(`${op}: no ${variant} attention tile fits ${engine.limits.maxComputeWorkgroupStorageSize} bytes of workgroup storage`);
  const G = Hq / Hkv;
  // The decode kernel reads plain K and V caches (V rows of Dv values), not MLA's shared latent rows.
  const plan = planPaged(engine, m, T, G, Hkv, flash, kv.dtype === 'fp8_ds_mla' || kv.kStride !== D || kv.vStride !== Dv ? null : planDecode(engine, D, Dv, G, kv.dtype), minPartition);

  // Metadata and work items in one buffer, one write (device metadata is copied in on the GPU).
  const offQsl = 0, offSeq = m.S + 1, offBt = offSeq + m.S, offItems = offBt + m.S * m.maxB;
  const offDecode = offItems + plan.flashItems.length;
  const host = new Int32Array(offDecode + plan.decodeItems.length);
  if (m.kind === 'host') {
    host.set(m.qsl, offQsl);
    host.set(m.seqLens, offSeq);
    host.set(m.blockTable, offBt);
  }
  host.set(plan.flashItems, offItems);
  host.set(plan.decodeItems, offDecode);
  const metaBuf = engine.scratch(Math.max(16, host.byteLength), 'paged metadata');
  engine.device.queue.writeBuffer(metaBuf, 0, host);
  if (m.kind === 'device') {
    const enc = engine.commandEncoder();
    enc.copyBufferToBuffer(m.qsl.buffer, 0, metaBuf, 4 * offQsl, 4 * (m.S + 1));
    enc.copyBufferToBuffer(m.seqLens.buffer, 0, metaBuf, 4 * offSeq, 4 * m.S);
    enc.copyBufferToBuffer(m.blockTable.buffer, 0, metaBuf, 4 * offBt, 4 * m.S * m.maxB);
  }

  const out = engine.emptyTensor([T, Hq, Dv], outDtype);
  const lse = engine.emptyTensor([Hq, T], 'f32');
  const partial = plan.nParts > 1;
  const ws = partial ? engine.scratch(4 * plan.nParts * T * Hq * (Dv + 1), 'paged partitions') : engine.dummy;
  const wsLse = plan.nParts * T * Hq * Dv;
  const kvCode = kv.dtype === 'fp8_ds_mla' ? 4 : CODE[kv.dtype];
  const flags = sdpaFlags({ causal: a.causal, window: a.window, softcap: a.softcap, alibi: a.alibi, sinks: a.sinks, maskKind: null });
  const nItems = plan.flashItems.length / 4;
  const headp = headParams(engine, Hq, a.alibi, a.sinks);
  const common = {
    T, Hq, Hkv, S: m.S, flags, window: a.window, scale: a.scale, softcap: a.softcap || 1,
    bs: kv.blockSize, num_blocks: kv.numBlocks, max_blocks: m.maxB,
    part_len: plan.partLen, n_parts: plan.nParts, partial: partial ? 1 : 0,
    off_qsl: offQsl, off_seqlens: offSeq, off_bt: offBt, ws_lse: wsLse, k_scale: kv.kScale, v_scale: kv.vScale,
  };
  const resources = { q: query, k_cache: kv.key, v_cache: kv.value, pmeta: metaBuf, headp, out, lse, ws };
  if (plan.decode && plan.decodeItems.length) {
    const dp = plan.decode;
    const overrides = { Q_DTYPE: CODE[query.dtype], KV_DTYPE: kvCode, OUT_DTYPE: CODE[outDtype] };
    const dk = dp.variant === 'subgroup'
      ? engine.kernel('paged_decode_sg', 'decode_main', { overrides, consts: { G, D, DV: Dv, EPV: dp.EPV, WG: dp.WG, KT: dp.KT, UK: dp.UK, PF: engine.tuning.pagedDecodePrefetch ? 1 : 0 }, enables: ['subgroups'] })
      : engine.kernel('paged_decode', 'decode_main', { overrides, consts: { G, D, DV: Dv, EPV: dp.EPV, WG: dp.WG, PMAX: dp.PMAX, UK: dp.UK } });
    const nDec = plan.decodeItems.length / 4;
    engine.dispatch(dk, resources, { ...common, n_items: nDec, off_items: offDecode }, nDec);
  }
  if (nItems > 0) {
    const kernel = engine.kernel(flash.variant === 'subgroup' ? 'paged_flash_subgroup' : 'paged_flash', 'paged_main', {
      overrides: { Q_DTYPE: CODE[query.dtype], KV_DTYPE: kvCode, OUT_DTYPE: CODE[outDtype] },
      consts: { TX: flash.TX, TY: flash.TY, TM: flash.TM, TN: flash.TN, DK: flash.DK, DVC: flash.DVC, D, DV: Dv,
                TILE4: flash.tile === 'f16' ? 'vec4<f16>' : 'vec4<f32>' },
      enables: [...(flash.tile === 'f16' ? ['f16'] : []), ...(flash.variant === 'subgroup' ? ['subgroups'] : [])],
    });
    engine.dispatch(kernel, resources, {
      ...common, G, n_items: nItems, off_items: offItems,
      n_dc: D / flash.DK, n_dk4: flash.DK / 4, n_bc: flash.TX * flash.TN,
      k_stride: kv.kStride, v_stride: kv.vStride, mla_l: kv.mlaL ?? 0, mla_row_words: kv.mlaRowWords ?? 0,
    }, nItems);
  }
  if (partial && m.kind === 'host') {
    encodeMerge(engine, {
      T, H: Hq, Dv, inDtype: 'f32', oA: ws, lseA: ws, nParts: plan.nParts, lseBase: wsLse, rows: m.qsl[m.S], sinks: a.sinks,
    }, out, lse);
  }
  if (!withLse) {
    lse.destroy();
    return { out, lse: null };
  }
  return { out, lse };
}
