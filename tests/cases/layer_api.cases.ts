// The attention layer (engine.createAttentionLayer, vLLM's Attention) against the float64 reference:
// KV sharing (a layer reading an earlier layer's cache has none of its own, never writes it, reads
// it exactly; chains resolve to the owner) and cross-attention (encoder keys/values written once per
// request into the layer's cache, then a mixed batch of a decoding and a prefilling request over
// them, not causal), with every refusal.
import { AttentionLayer, reference, type Engine, type Tensor } from '../../src/index';
import { assert, assertClose, defineCases, expectThrows, randn } from './harness';

const [Hq, Hkv, D, bs, numBlocks] = [4, 2, 16, 4, 10];
const CACHE = { numBlocks, blockSize: bs, numKvHeads: Hkv, headSize: D };
const dims = { Hq, Hkv, D, Dv: D, numBlocks, blockSize: bs };

/** Slots of positions [from, to) of a sequence whose blocks are `blocks`. */
function slotsOf(blocks: number[], from: number, to: number): number[] {
  const s: number[] = [];
  for (let p = from; p < to; p++) s.push(blocks[Math.floor(p / bs)] * bs + (p % bs));
  return s;
}

/** The block table [S, maxB] of sequences' blocks (unused entries 0). */
function table(seqs: number[][], maxB: number): Int32Array {
  const t = new Int32Array(seqs.length * maxB);
  seqs.forEach((b, i) => t.set(b, i * maxB));
  return t;
}

async function bits(t: Tensor): Promise<Uint32Array> {
  return new Uint32Array((await t.toFloat32()).buffer);
}

function sameBits(what: string, a: Uint32Array, b: Uint32Array): void {
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) throw new Error(`${what}: element ${i} changed (bits ${a[i]} -> ${b[i]}): a sharing layer wrote the cache`);
}

export const layerApiCases = defineCases('attention layer', [
  {
    name: 'KV sharing: a layer reading an earlier layer\'s cache owns none, never writes it, attends over it exactly (other options of its own); chains resolve to the owner; refusals',
    async run({ engine }: { engine: Engine }) {
      const L0 = engine.createAttentionLayer({ numHeads: Hq, cache: CACHE, name: 'layers.0' });
      const L1 = engine.createAttentionLayer({ numHeads: Hq, kvSharingTarget: L0, softcap: 4, slidingWindow: 3, name: 'layers.1' });
      const L2 = engine.createAttentionLayer({ numHeads: Hq, kvSharingTarget: L1, name: 'layers.2' });
      assert(L1.cache === L0.cache && L2.cache === L0.cache, 'sharing layers read the owner\'s cache object');
      assert(L0.ownsCache && !L1.ownsCache && !L2.ownsCache, 'only the owner has a cache of its own');
      assert(L1.kvSharingTarget === L0 && L2.kvSharingTarget === L0, 'a chain of sharing resolves to the layer that owns the cache');

      // Two sequences prefilling 6 and 3 tokens over shuffled blocks.
      const blocks = [[7, 2], [4]];
      const maxB = 2;
      const qsl = Int32Array.from([0, 6, 9]), seqLens = Int32Array.from([6, 3]);
      const bt = table(blocks, maxB);
      const meta = { queryStartLoc: qsl, seqLens, blockTable: bt, maxBlocksPerSeq: maxB };
      const slots = Int32Array.from([...slotsOf(blocks[0], 0, 6), ...slotsOf(blocks[1], 0, 3)]);
      const T = 9;
      const [q0, q1, k, v] = [randn(T * Hq * D, 301), randn(T * Hq * D, 302), randn(T * Hkv * D, 303), randn(T * Hkv * D, 304)];
      const out0 = await L0.forward(engine.tensor(q0, [T, Hq, D]), engine.tensor(k, [T, Hkv, D]), engine.tensor(v, [T, Hkv, D]), meta, slots).toFloat32();
      const w = reference.reshapeAndCacheRef(k, v, slots, new Float64Array(numBlocks * Hkv * bs * D), new Float64Array(numBlocks * Hkv * bs * D), { ...dims, T });
      const metaRef = { queryStartLoc: qsl, seqLens, blockTable: bt, maxBlocksPerSeq: maxB };
      assertClose('owner layer', out0, reference.pagedAttentionRef(q0, w.keyCache, w.valueCache, { ...dims, T }, metaRef, {}).out, 'f32');

      const [kb, vb] = [await bits(L0.cache.key), await bits(L0.cache.value)];
      const out1 = await L1.forward(engine.tensor(q1, [T, Hq, D]), null, null, meta).toFloat32();
      assertClose('sharing layer (softcap 4, window 3)', out1,
        reference.pagedAttentionRef(q1, w.keyCache, w.valueCache, { ...dims, T }, metaRef, { softcap: 4, slidingWindow: 3 }).out, 'f32');
      const out2 = await L2.forward(engine.tensor(q1, [T, Hq, D]), null, null, meta).toFloat32();
      assertClose('sharing chain', out2, reference.pagedAttentionRef(q1, w.keyCache, w.valueCache, { ...dims, T }, metaRef, {}).out, 'f32');
      sameBits('key cache', kb, await bits(L0.cache.key));
      sameBits('value cache', vb, await bits(L0.cache.value));

      const kt = engine.tensor(k, [T, Hkv, D]), vt = engine.tensor(v, [T, Hkv, D]), qt = engine.tensor(q1, [T, Hq, D]);
      await expectThrows(() => L1.forward(qt, kt, vt, meta, slots), "AttentionLayer.forward: key: expected null: layers.1 reads layers.0's cache and never writes it");
      await expectThrows(() => L0.forward(qt, kt, null, meta, slots), 'AttentionLayer.forward: key: expected null with the other');
      await expectThrows(() => L0.forward(qt, kt, vt, meta), "AttentionLayer.forward: slotMapping: expected the slots of key/value's rows, got none");
      await expectThrows(() => L0.forward(qt, null, null, meta, slots), 'AttentionLayer.forward: slotMapping: expected none (no key/value to write)');
      await expectThrows(() => engine.createAttentionLayer({ numHeads: Hq, kvSharingTarget: L0, cache: CACHE }), "createAttentionLayer: o.cache: expected none: the layer reads layers.0's cache");
      await expectThrows(() => engine.createAttentionLayer({ numHeads: Hq, kvSharingTarget: L0, attnType: 'encoder_decoder' }),
        "createAttentionLayer: o.kvSharingTarget: expected a 'encoder_decoder' layer (sharing is between layers of one kind), got 'decoder' layer layers.0");
      await expectThrows(() => engine.createAttentionLayer({ numHeads: 3, kvSharingTarget: L0 }), "createAttentionLayer: o.numHeads: expected a multiple of the cache's kv heads (2), got 3");
      await expectThrows(() => engine.createAttentionLayer({ numHeads: Hq, kvSharingTarget: {} as AttentionLayer }), 'createAttentionLayer: o.kvSharingTarget: expected an AttentionLayer');
      await expectThrows(() => engine.createAttentionLayer({ numHeads: Hq }), 'createAttentionLayer: o.cache: expected { numBlocks, blockSize, numKvHeads, headSize');
      await expectThrows(() => engine.createAttentionLayer({ numHeads: Hq, cache: CACHE, kvShare: L0 } as never), 'createAttentionLayer: o');
      await expectThrows(() => engine.createAttentionLayer({ numHeads: Hq, cache: CACHE, attnType: 'encoder_only' as never }), "createAttentionLayer: o.attnType: expected 'decoder' or 'encoder_decoder', got 'encoder_only'");

      // A sharing layer's destroy leaves the owner's cache; the owner's takes it from every sharer.
      L1.destroy();
      assert(!L0.cache.destroyed, 'destroying a sharing layer must not free the owner\'s cache');
      L0.destroy();
      await expectThrows(() => L2.forward(qt, null, null, meta), 'AttentionLayer.forward: cache: expected a live cache');
    },
  },
  {
    name: 'cross-attention layer: encoder keys/values written once per request, a mixed batch (one request decoding, one prefilling with its first write) over them, not causal',
    async run({ engine }: { engine: Engine }) {
      const X = engine.createAttentionLayer({ numHeads: Hq, attnType: 'encoder_decoder', cache: CACHE, name: 'decoder.layers.0.encoder_attn' });
      // Request A: 9 encoder frames (blocks 5, 1, 8); request B: 6 frames (blocks 3, 0).
      const blocks = [[5, 1, 8], [3, 0]];
      const maxB = 3;
      const bt = table(blocks, maxB);
      const [eA, eB] = [9, 6];
      const [kA, vA, kB, vB] = [randn(eA * Hkv * D, 401), randn(eA * Hkv * D, 402), randn(eB * Hkv * D, 403), randn(eB * Hkv * D, 404)];
      const slotsA = Int32Array.from(slotsOf(blocks[0], 0, eA)), slotsB = Int32Array.from(slotsOf(blocks[1], 0, eB));
      let w = reference.reshapeAndCacheRef(kA, vA, slotsA, new Float64Array(numBlocks * Hkv * bs * D), new Float64Array(numBlocks * Hkv * bs * D), { ...dims, T: eA });

      // Step 1: A's first step writes its encoder K/V and prefills 3 decoder tokens.
      const q1 = randn(3 * Hq * D, 405);
      const meta1 = { queryStartLoc: Int32Array.from([0, 3]), seqLens: Int32Array.from([eA]), blockTable: bt.subarray(0, maxB) };
      const o1 = await X.forward(engine.tensor(q1, [3, Hq, D]), engine.tensor(kA, [eA, Hkv, D]), engine.tensor(vA, [eA, Hkv, D]), meta1, slotsA).toFloat32();
      assertClose('cross step 1 (A prefill)', o1, reference.pagedAttentionRef(q1, w.keyCache, w.valueCache, { ...dims, T: 3 }, { ...meta1, maxBlocksPerSeq: maxB }, { causal: false }).out, 'f32');

      // Step 2: A decodes one token (nothing written for it), B's first step writes its K/V and prefills 2.
      w = reference.reshapeAndCacheRef(kB, vB, slotsB, w.keyCache, w.valueCache, { ...dims, T: eB });
      const q2 = randn(3 * Hq * D, 406);
      const meta2 = { queryStartLoc: Int32Array.from([0, 1, 3]), seqLens: Int32Array.from([eA, eB]), blockTable: bt, maxBlocksPerSeq: maxB };
      const o2 = await X.forward(engine.tensor(q2, [3, Hq, D]), engine.tensor(kB, [eB, Hkv, D]), engine.tensor(vB, [eB, Hkv, D]), meta2, slotsB).toFloat32();
      assertClose('cross step 2 (A decode, B prefill)', o2, reference.pagedAttentionRef(q2, w.keyCache, w.valueCache, { ...dims, T: 3 }, meta2, { causal: false }).out, 'f32');

      // Step 3: both decode, nothing written.
      const q3 = randn(2 * Hq * D, 407);
      const meta3 = { queryStartLoc: Int32Array.from([0, 1, 2]), seqLens: Int32Array.from([eA, eB]), blockTable: bt, maxBlocksPerSeq: maxB };
      const o3 = await X.forward(engine.tensor(q3, [2, Hq, D]), null, null, meta3).toFloat32();
      assertClose('cross step 3 (both decode)', o3, reference.pagedAttentionRef(q3, w.keyCache, w.valueCache, { ...dims, T: 2 }, meta3, { causal: false }).out, 'f32');
      X.destroy();
    },
  },
]);
