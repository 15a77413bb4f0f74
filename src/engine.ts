// The public engine (API.md): the runtime (src/core/runtime.ts) and the operations on top of it. The
// kernel families live in src/attention/ (and later src/ops/); they take the runtime, never this class,
// so nothing below this module imports it.
import { acquireDevice, Runtime } from './core/runtime.js';
import type { AttentionOptions, EngineOptions, SdpaOptions } from './core/types.js';
import type { Tensor } from './core/tensor.js';
import { sdpa as sdpaOp } from './attention/sdpa.js';
import { mergeAttnStates as mergeOp } from './attention/merge.js';
import { createMLA as createMLAOp, createMLACache as createMLACacheOp, type MLACache, type MLACacheOptions, type MLALayer, type MLAOptions } from './attention/mla.js';
import { createPagedKVCache as createPagedKVCacheOp, reshapeAndCache as reshapeAndCacheOp, type PagedKVCache, type PagedKVCacheOptions } from './attention/paged_cache.js';
import { loadModel as loadModelOp, type Model, type ServeLoadOptions } from './serve/model.js';
import { createAttentionLayer as createAttentionLayerOp, type AttentionLayer, type AttentionLayerOptions } from './attention/layer.js';
import { pagedAttention as pagedOp, planAttention as planAttentionOp, type AttentionMetadata, type AttentionPlan, type PlanAttentionOptions } from './attention/paged.js';

/**
 * Acquires an engine. Browser/Deno: navigator.gpu. Node: pass `{ gpu: create([]) }` from 'webgpu'.
 * An existing GPUDevice may be passed as `{ device }`.
 */
export async function createEngine(opts: EngineOptions = {}): Promise<Engine> {
  const { device, info, retained, wgsl } = await acquireDevice(opts);
  const engine = new Engine(device, info, opts, wgsl);
  engine.retained = retained;
  return engine;
}

export class Engine extends Runtime {

  /** Dense scaled-dot-product attention (SPEC §2): q [B,Hq,Lq,D], k [B,Hkv,Lk,D], v [B,Hkv,Lk,Dv] → [B,Hq,Lq,Dv]. */
  sdpa(q: Tensor, k: Tensor, v: Tensor, opts: SdpaOptions = {}): Tensor {
    const r = sdpaOp(this, 'sdpa', q, k, v, opts, false);
    return r.out;
  }

  /** A paged KV cache (SPEC §3): .key [numBlocks, Hkv, blockSize, D], .value [numBlocks, Hkv, blockSize, Dv]. */
  createPagedKVCache(o: PagedKVCacheOptions): PagedKVCache {
    return createPagedKVCacheOp(this, o);
  }

  /** Writes token t's key/value rows to slot slotMapping[t] of the cache; negative slots are skipped. */
  reshapeAndCache(key: Tensor, value: Tensor, cache: PagedKVCache, slotMapping: Tensor | Int32Array): void {
    reshapeAndCacheOp(this, key, value, cache, slotMapping);
  }

  /** Attention of a mixed batch over the paged cache (SPEC §3): query [T,Hq,D] → [T,Hq,Dv]. */
  pagedAttention(query: Tensor, cache: PagedKVCache, meta: AttentionMetadata, opts: AttentionOptions = {}): Tensor {
    return pagedOp(this, 'pagedAttention', query, cache, meta, opts, false).out;
  }

  /** As pagedAttention, also returning lse [Hq, T] (f32; -inf for rows that see no key). */
  pagedAttentionWithLse(query: Tensor, cache: PagedKVCache, meta: AttentionMetadata, opts: AttentionOptions = {}): { out: Tensor; lse: Tensor } {
    const r = pagedOp(this, 'pagedAttentionWithLse', query, cache, meta, opts, true);
    return { out: r.out, lse: r.lse! };
  }

  /**
   * A serving step's attention, planned once (API.md "A serving step"): validates the metadata and
   * partitions the work once (host metadata on the host; i32-tensor metadata on the GPU, nothing read
   * back), then `run(query, cache)` once per layer against any cache of `o.cache`'s geometry.
   */
  planAttention(meta: AttentionMetadata, o: PlanAttentionOptions): AttentionPlan {
    return planAttentionOp(this, meta, o);
  }

  /**
   * vLLM's attention layer: a paged cache of its own (or, with kvSharingTarget, an earlier layer's,
   * read and never written), options fixed, and forward(query, key, value, meta, slots) writing then
   * attending; 'decoder' (causal) or 'encoder_decoder' (cross-attention over keys/values written once).
   */
  createAttentionLayer(o: AttentionLayerOptions): AttentionLayer {
    return createAttentionLayerOp(this, o);
  }

  /**
   * A whole model from an HF checkpoint (API.md "Whole models"): config.json parsed, its safetensors
   * file(s), checked tensor by tensor before any GPU memory is taken, then uploaded in `dtype`
   * (default: the checkpoint's), with a paged KV cache sized from the device's limits unless told.
   */
  loadModel(o: ServeLoadOptions): Promise<Model> {
    return loadModelOp(this, o);
  }

  /** An MLA layer (SPEC §5) with its absorbed weights, from kv_b_proj [N·(P+V), L]. */
  createMLA(o: MLAOptions): MLALayer {
    return createMLAOp(this, o);
  }

  /** A latent paged cache [numBlocks, blockSize, L+R] (or FlashMLA's fp8_ds_mla rows). */
  createMLACache(o: MLACacheOptions): MLACache {
    return createMLACacheOp(this, o);
  }

  /** Merges two attention states by their LSE (SPEC §4): o [T,H,Dv] and lse [H,T] each. */
  mergeAttnStates(oA: Tensor, lseA: Tensor, oB: Tensor, lseB: Tensor): { out: Tensor; lse: Tensor } {
    return mergeOp(this, oA, lseA, oB, lseB);
  }

  /** As sdpa, also returning the log-sum-exp of each row, lse [B,Hq,Lq] f32 (-inf for rows that see no key). */
  sdpaWithLse(q: Tensor, k: Tensor, v: Tensor, opts: SdpaOptions = {}): { out: Tensor; lse: Tensor } {
    const r = sdpaOp(this, 'sdpaWithLse', q, k, v, opts, true);
    return { out: r.out, lse: r.lse! };
  }
}
