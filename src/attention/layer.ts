// vLLM's attention layer (seed-digest §1.1, §1.2, §1.15) as one object: it owns a paged KV cache, writes
// each step's new keys/values into it and attends over it, with options fixed at creation. Two kinds:
//   'decoder'          causal self-attention (the default);
//   'encoder_decoder'  cross-attention: decoder queries over keys/values written once per request (the
//                      encoder's output, given with that request's first step), not causal;
// and KV sharing (`kvSharingTarget`, vLLM's kv_sharing_target_layer_name): a layer that reads an
// earlier layer's cache has no cache of its own and never writes; its forward takes no key/value.
// Encoder-only attention has no cache at all and is not a layer of this kind (models/encoder.ts).
import type { DType } from '../core/dtype.js';
import { check, checkKeys, checkPosInt, fmt } from '../core/errors.js';
import type { Runtime } from '../core/runtime.js';
import { checkTensor, type Tensor } from '../core/tensor.js';
import type { AttentionOptions } from '../core/types.js';
import { validateAttnOptions } from './common.js';
import { pagedAttention, type AttentionMetadata } from './paged.js';
import { checkCache, createPagedKVCache, reshapeAndCache, type PagedKVCache } from './paged_cache.js';

export const ATTENTION_LAYER_TYPES = ['decoder', 'encoder_decoder'] as const;
export type AttentionLayerType = (typeof ATTENTION_LAYER_TYPES)[number];

export interface AttentionLayerOptions extends AttentionOptions {
  /** Query heads (a multiple of the cache's kv heads). */
  numHeads: number;
  /** 'decoder' (causal self-attention, the default) or 'encoder_decoder' (cross-attention, not causal). */
  attnType?: AttentionLayerType;
  /** The layer's own cache (createPagedKVCache's options); none when it shares another layer's. */
  cache?: { numBlocks: number; blockSize: number; numKvHeads: number; headSize: number; headSizeV?: number; dtype?: DType };
  /** An earlier layer whose cache this one reads (and never writes). */
  kvSharingTarget?: AttentionLayer;
  /** A name for messages (vLLM's layer prefix). */
  name?: string;
}

const OPTION_KEYS = ['numHeads', 'attnType', 'cache', 'kvSharingTarget', 'name', 'causal', 'scale', 'softcap', 'slidingWindow', 'alibiSlopes', 'sinks'];

export class AttentionLayer {
  /** The cache this layer reads: its own, or its sharing target's. */
  readonly cache: PagedKVCache;
  /** The layer whose cache this one reads (the first that owns one, when targets share in turn); null: its own. */
  readonly kvSharingTarget: AttentionLayer | null;
  readonly attnType: AttentionLayerType;
  readonly numHeads: number;
  readonly name: string;
  private readonly opts: AttentionOptions;

  constructor(private readonly rt: Runtime, o: AttentionLayerOptions) {
    const op = 'createAttentionLayer';
    rt.assertAlive(op);
    check(o !== null && typeof o === 'object', op, 'o', '{ numHeads, cache | kvSharingTarget, attnType?, ...AttentionOptions }', o);
    checkKeys(op, 'o', o, OPTION_KEYS);
    this.numHeads = checkPosInt(o.numHeads, op, 'o.numHeads');
    this.attnType = o.attnType ?? 'decoder';
    check((ATTENTION_LAYER_TYPES as readonly string[]).includes(this.attnType), op, 'o.attnType', "'decoder' or 'encoder_decoder'", fmt(o.attnType));
    if (o.name !== undefined) check(typeof o.name === 'string', op, 'o.name', 'a string', o.name);
    this.name = o.name ?? 'attention layer';
    const { numHeads: _h, attnType: _t, cache: _c, kvSharingTarget: _k, name: _n, ...attn } = o;
    this.opts = { ...attn, causal: attn.causal ?? this.attnType === 'decoder' };
    let target: AttentionLayer | null = null;
    let geo: { numKvHeads: number; headSize: number };
    if (o.kvSharingTarget !== undefined) {
      const t = o.kvSharingTarget;
      check(t instanceof AttentionLayer, op, 'o.kvSharingTarget', 'an AttentionLayer (createAttentionLayer)', t);
      check(o.cache === undefined, op, 'o.cache', `none: the layer reads ${t.name}'s cache (kvSharingTarget)`, 'a cache of its own');
      check(t.attnType === this.attnType, op, 'o.kvSharingTarget', `a '${this.attnType}' layer (sharing is between layers of one kind)`, `'${t.attnType}' layer ${t.name}`);
      checkCache(t.cache, op);
      target = t.kvSharingTarget ?? t;
      geo = t.cache;
    } else {
      const c = o.cache;
      check(c !== undefined && c !== null && typeof c === 'object', op, 'o.cache', '{ numBlocks, blockSize, numKvHeads, headSize, headSizeV?, dtype? } (or a kvSharingTarget)', c);
      geo = { numKvHeads: checkPosInt(c.numKvHeads, op, 'o.cache.numKvHeads'), headSize: checkPosInt(c.headSize, op, 'o.cache.headSize') };
    }
    check(this.numHeads % geo.numKvHeads === 0, op, 'o.numHeads', `a multiple of the cache's kv heads (${geo.numKvHeads})`, this.numHeads);
    // Every option checked before a cache is taken.
    validateAttnOptions(op, this.opts, geo.headSize, this.numHeads);
    this.kvSharingTarget = target;
    this.cache = target ? target.cache : createPagedKVCache(rt, o.cache!);
  }

  /** Whether the cache is this layer's own (false: it reads its kvSharingTarget's). */
  get ownsCache(): boolean {
    return this.kvSharingTarget === null;
  }

  /**
   * One step: writes key [Tk, Hkv, D] / value [Tk, Hkv, Dv] into the cache at slotMapping [Tk] (a
   * decoder layer: the step's new tokens; a cross-attention layer: a new request's encoder output,
   * once), then attends query [T, Hq, D] over the cache by `meta` → [T, Hq, Dv]. key and value are
   * null where nothing is written: a cross-attention layer's later steps, and always for a layer
   * sharing another's cache.
   */
  forward(query: Tensor, key: Tensor | null, value: Tensor | null, meta: AttentionMetadata, slotMapping?: Tensor | Int32Array): Tensor {
    const op = 'AttentionLayer.forward';
    this.rt.assertAlive(op);
    checkCache(this.cache, op);
    check((key === null) === (value === null), op, key === null ? 'value' : 'key', 'null with the other (both written or neither)', 'a tensor');
    if (key !== null) {
      check(this.ownsCache, op, 'key', `null: ${this.name} reads ${this.kvSharingTarget?.name}'s cache and never writes it`, 'a tensor');
      checkTensor(key, op, 'key');
      check(slotMapping !== undefined, op, 'slotMapping', "the slots of key/value's rows", 'none');
      reshapeAndCache(this.rt, key, value!, this.cache, slotMapping!);
    } else {
      check(slotMapping === undefined, op, 'slotMapping', 'none (no key/value to write)', 'slots');
    }
    return pagedAttention(this.rt, op, query, this.cache, meta, this.opts, false).out;
  }

  /** Frees the layer's own cache; a layer sharing another's leaves it to its owner. */
  destroy(): void {
    if (this.ownsCache) this.cache.destroy();
  }
}

/** A new attention layer (see AttentionLayer). */
export function createAttentionLayer(rt: Runtime, o: AttentionLayerOptions): AttentionLayer {
  return new AttentionLayer(rt, o);
}
