// Paged KV cache (SPEC §3) against the float64 reference: reshape_and_cache into every cache dtype,
// mixed batches (decode, prefill, chunked prefill with context) over shuffled block tables with
// padding tokens, every attention option, split-KV equal to unsplit, chunked equal to one-shot,
// paged equal to dense, device-side metadata, and every validation error.
import { KVCacheManager, reference, roundToDType, type Engine, type StepRequest, type Tensor } from '../../src/index';
import { DECODE_MMA_SHAPES, decodeMmaFor, planMlaMma, planOnHost } from '../../src/attention/plan';
import { mmaConfigs } from '../../src/core/runtime';
import { planDecode } from '../../src/attention/paged_decode';
import { encodeRopeCacheWrite, ropeCacheWriteFits } from '../../src/attention/paged_cache';
import { flashMmaFor, planFlash } from '../../src/attention/flash';
import { assert, assertClose, defineCases, expectThrows, randn, rng, type TestCase, withTuning } from './harness';

type CacheDtype = 'f32' | 'f16' | 'bf16' | 'fp8e4m3';
type QDtype = 'f32' | 'f16' | 'bf16';

export interface PagedSpec {
  Hq: number; Hkv: number; D: number; Dv?: number; bs: number;
  /** Per sequence: cached context tokens and new (query) tokens. */
  seqs: { ctx: number; q: number }[];
  pad?: number;
  cache?: CacheDtype; qDtype?: QDtype;
  kScale?: number; vScale?: number;
  opts?: { scale?: number; softcap?: number; slidingWindow?: number; alibi?: boolean; sinks?: boolean; causal?: boolean };
  /** Extra unused blocks in the cache. */
  spareBlocks?: number;
  /** The cache must be split across at least this many buffers (engine.tuning.cacheBindingBytes). */
  minParts?: number;
  /** false: pagedAttention (no LSE asked, none checked) instead of pagedAttentionWithLse. */
  lse?: boolean;
  /** Blocks handed out in order (as an allocator's free list does) instead of shuffled. */
  sequential?: boolean;
  /** Where the adapter has timestamps: a kernel whose name starts with this must have run. */
  kernel?: string;
  seed: number;
}

/** Values a cache of this dtype holds for x (fp8: x / scale rounded, times scale, in f32 as the kernel does). */
export function cacheValues(x: Float32Array, dtype: CacheDtype, scale: number): Float32Array {
  if (dtype !== 'fp8e4m3') return roundToDType(x, dtype);
  const inv = Math.fround(1 / scale);
  const q = roundToDType(Float32Array.from(x, (v) => Math.fround(v * inv)), 'fp8e4m3');
  return Float32Array.from(q, (v) => Math.fround(v * scale));
}

/** A checked run (lse: empty where spec.lse is false). */
export interface PagedRun { out: Float32Array; lse: Float32Array; refOut: Float64Array; refLse: Float64Array; T: number; valid: number }

/**
 * Builds a shuffled paged batch, writes context and new tokens with reshapeAndCache (the new ones in
 * the same submission as attention), runs pagedAttentionWithLse and checks out and lse.
 */
export async function checkPaged(engine: Engine, spec: PagedSpec, metaAs: 'host' | 'device' = 'host'): Promise<PagedRun> {
  const { Hq, Hkv, D, bs, seqs, seed } = spec;
  const Dv = spec.Dv ?? D;
  const cdt = spec.cache ?? 'f32', qdt = spec.qDtype ?? 'f32';
  const kScale = spec.kScale ?? 1, vScale = spec.vScale ?? 1;
  const r = rng(seed);
  const S = seqs.length;
  const seqLens = Int32Array.from(seqs, (s) => s.ctx + s.q);
  const maxB = Math.max(1, ...Array.from(seqLens, (l) => Math.ceil(l / bs)));
  const needed = Array.from(seqLens, (l) => Math.ceil(l / bs)).reduce((a, b) => a + b, 0);
  const numBlocks = needed + (spec.spareBlocks ?? 3);
  const order = Array.from({ length: numBlocks }, (_, i) => i);
  if (!spec.sequential) order.sort(() => r() - 0.5);
  const blockTable = new Int32Array(S * maxB).fill(-7);   // unused entries hold junk on purpose
  let nb = 0;
  for (let s = 0; s < S; s++) for (let n = 0; n < Math.ceil(seqLens[s] / bs); n++) blockTable[s * maxB + n] = order[nb++];
  const slotOf = (s: number, pos: number) => blockTable[s * maxB + Math.floor(pos / bs)] * bs + (pos % bs);

  // Context tokens (written first) and new tokens with their queries (written with the attention).
  const ctxSlots: number[] = [], newSlots: number[] = [], qsl = new Int32Array(S + 1);
  for (let s = 0; s < S; s++) {
    for (let p = 0; p < seqs[s].ctx; p++) ctxSlots.push(slotOf(s, p));
    for (let p = seqs[s].ctx; p < seqLens[s]; p++) newSlots.push(slotOf(s, p));
    qsl[s + 1] = qsl[s] + seqs[s].q;
  }
  const pad = spec.pad ?? 0;
  const T = qsl[S] + pad;
  for (let i = 0; i < pad; i++) newSlots.push(-1);
  const cache = engine.createPagedKVCache({ numBlocks, blockSize: bs, numKvHeads: Hkv, headSize: D, headSizeV: Dv, dtype: cdt,
    ...(cdt === 'fp8e4m3' ? { kScale, vScale } : {}) });
  if (spec.minParts) assert(cache.parts.length >= spec.minParts, `expected a cache of at least ${spec.minParts} buffers, got ${cache.parts.length}`);
  const kvIn = (n: number, sd: number, width: number) => roundToDType(randn(n * Hkv * width, sd), qdt);
  const kCtx = kvIn(ctxSlots.length, seed + 1, D), vCtx = kvIn(ctxSlots.length, seed + 2, Dv);
  const kNew = kvIn(newSlots.length, seed + 3, D), vNew = kvIn(newSlots.length, seed + 4, Dv);
  const q = roundToDType(randn(T * Hq * D, seed + 5), qdt);
  const tensors: Tensor[] = [];
  const t = (x: Float32Array, shape: number[]) => { const tt = engine.tensor(x, shape, qdt); tensors.push(tt); return tt; };
  if (ctxSlots.length) engine.reshapeAndCache(t(kCtx, [ctxSlots.length, Hkv, D]), t(vCtx, [ctxSlots.length, Hkv, Dv]), cache, Int32Array.from(ctxSlots));
  await engine.sync();
  const opts = {
    scale: spec.opts?.scale, softcap: spec.opts?.softcap, slidingWindow: spec.opts?.slidingWindow, causal: spec.opts?.causal,
    alibiSlopes: spec.opts?.alibi ? Float32Array.from({ length: Hq }, (_, h) => 2 ** (-(8 * (h + 1)) / Hq)) : undefined,
    sinks: spec.opts?.sinks ? Float32Array.from({ length: Hq }, () => (r() - 0.3) * 3) : undefined,
  };
  let meta;
  if (metaAs === 'host') {
    meta = { queryStartLoc: qsl, seqLens, blockTable, maxBlocksPerSeq: maxB };
  } else {
    const mt = [engine.tensor(qsl, [S + 1], 'i32'), engine.tensor(seqLens, [S], 'i32'), engine.tensor(blockTable, [S, maxB], 'i32')];
    tensors.push(...mt);
    meta = { queryStartLoc: mt[0], seqLens: mt[1], blockTable: mt[2] };
  }
  engine.reshapeAndCache(t(kNew, [newSlots.length, Hkv, D]), t(vNew, [newSlots.length, Hkv, Dv]), cache, Int32Array.from(newSlots));
  const timed = spec.kernel !== undefined && engine.features.timestampQuery;
  if (timed) engine.beginTiming();
  const qt = t(q, [T, Hq, D]);
  const res = spec.lse === false ? { out: engine.pagedAttention(qt, cache, meta, opts), lse: null } : engine.pagedAttentionWithLse(qt, cache, meta, opts);
  if (timed) {
    await engine.endTiming();
    const ran = Object.keys(engine.lastTiming);
    assert(ran.some((k) => k.startsWith(spec.kernel!)), `expected a ${spec.kernel} pass, ran ${ran.join(', ')}`);
  }
  const out = await res.out.toFloat32();
  const lse = res.lse ? await res.lse.toFloat32() : null;

  // Reference: the caches hold exactly what the kernels stored.
  const dims = { Hq, Hkv, D, Dv, numBlocks, blockSize: bs };
  let kc: Float64Array = new Float64Array(numBlocks * Hkv * bs * D), vc: Float64Array = new Float64Array(numBlocks * Hkv * bs * Dv);
  for (const [ks, vs, sl] of [[kCtx, vCtx, ctxSlots], [kNew, vNew, newSlots]] as const) {
    if (!sl.length) continue;
    const w = reference.reshapeAndCacheRef(cacheValues(ks, cdt, kScale), cacheValues(vs, cdt, vScale), Int32Array.from(sl), kc, vc, { ...dims, T: sl.length });
    kc = w.keyCache; vc = w.valueCache;
  }
  const ref = reference.pagedAttentionRef(q, kc, vc, { ...dims, T }, { queryStartLoc: qsl, seqLens, blockTable, maxBlocksPerSeq: maxB }, {
    ...opts, alibiSlopes: opts.alibiSlopes, sinks: opts.sinks,
  });
  const tol = cdt === 'fp8e4m3' ? 'fp8e4m3' : qdt === 'f32' ? cdt : qdt;
  const tag = `paged ${qdt}/${cdt} Hq${Hq} Hkv${Hkv} D${D} Dv${Dv} bs${bs} seqs ${JSON.stringify(seqs)} pad ${pad} seed ${seed}`;
  const valid = qsl[S];
  assertClose(`out (${tag})`, out, ref.out, tol, (i) => Math.floor(i / (Hq * Dv)) >= valid);
  if (lse) assertClose(`lse (${tag})`, lse, ref.lse, tol === 'fp8e4m3' ? 'fp8e4m3' : 'f32', (i) => i % T >= valid);
  // Padding rows are never written: the engine poisoned them with NaN.
  for (let i = valid * Hq * Dv; i < out.length; i++) assert(Number.isNaN(out[i]), `padding row element ${i} was written (${out[i]})`);
  for (const x of [...tensors, res.out, ...(res.lse ? [res.lse] : [])]) x.destroy();
  cache.destroy();
  return { out, lse: lse ?? new Float32Array(0), refOut: ref.out, refLse: ref.lse, T, valid };
}

const SMALL = { flashSmemBytes: 8192 };

const MIXED = [{ ctx: 0, q: 5 }, { ctx: 9, q: 1 }, { ctx: 20, q: 7 }, { ctx: 3, q: 1 }];

function matrix(name: string, specs: PagedSpec[], tuning: Partial<Engine['tuning']> = SMALL): TestCase {
  return { name, async run({ engine }) { await withTuning(engine, tuning, async () => { for (const s of specs) await checkPaged(engine, s); }); } };
}

/** Decode batches for both decode kernels: GQA 8 at D 128 with softcap and sinks over a long split
 *  context, fp8 with a window, and GQA 7 with Dv != D over an f32 cache with ALiBi and sinks. */
const DECODE_SPECS: PagedSpec[] = [
  { Hq: 8, Hkv: 1, D: 128, bs: 16, seqs: [{ ctx: 700, q: 1 }, { ctx: 33, q: 1 }, { ctx: 0, q: 1 }], qDtype: 'f16', cache: 'f16', opts: { softcap: 20, sinks: true }, seed: 57 },
  { Hq: 4, Hkv: 2, D: 64, bs: 32, seqs: [{ ctx: 300, q: 1 }, { ctx: 64, q: 1 }], qDtype: 'bf16', cache: 'fp8e4m3', kScale: 0.1, vScale: 0.1, opts: { slidingWindow: 100 }, seed: 58 },
  { Hq: 7, Hkv: 1, D: 64, Dv: 32, bs: 16, seqs: [{ ctx: 150, q: 1 }, { ctx: 2, q: 1 }], cache: 'f32', opts: { alibi: true, sinks: true }, seed: 63 },
];

export const pagedCases = defineCases('paged', [
  {
    name: 'reshapeAndCache stores exactly the rounded rows (f32, f16, bf16, fp8 with scales), skips slot -1',
    async run({ engine }) {
      for (const [cdt, qdt, bs, seed] of [['f32', 'f32', 16, 1], ['f16', 'f32', 1, 2], ['bf16', 'bf16', 32, 3], ['fp8e4m3', 'f16', 16, 4]] as const) {
        const [T, Hkv, D, Dv] = [11, 2, 16, 8];
        const numBlocks = Math.max(3, Math.ceil(T / bs) + 1);   // enough slots that no two tokens share one
        const kScale = cdt === 'fp8e4m3' ? 0.05 : 1, vScale = cdt === 'fp8e4m3' ? 2 : 1;
        const cache = engine.createPagedKVCache({ numBlocks, blockSize: bs, numKvHeads: Hkv, headSize: D, headSizeV: Dv, dtype: cdt, ...(cdt === 'fp8e4m3' ? { kScale, vScale } : {}) });
        const nSlots = numBlocks * bs;
        const perm = Array.from({ length: nSlots }, (_, i) => i).sort(() => rng(seed)() - 0.5);
        const last = perm.indexOf(nSlots - 1);
        [perm[0], perm[last]] = [perm[last], perm[0]];   // token 0 takes the very last slot
        const slots = Int32Array.from({ length: T }, (_, t) => (t % 4 === 3 ? -1 : perm[t]));
        const k = roundToDType(randn(T * Hkv * D, seed, 30), qdt), v = roundToDType(randn(T * Hkv * Dv, seed + 1, 30), qdt);
        engine.reshapeAndCache(engine.tensor(k, [T, Hkv, D], qdt), engine.tensor(v, [T, Hkv, Dv], qdt), cache, slots);
        const ref = reference.reshapeAndCacheRef(cacheValues(k, cdt, kScale), cacheValues(v, cdt, vScale), slots,
          new Float64Array(numBlocks * Hkv * bs * D), new Float64Array(numBlocks * Hkv * bs * Dv), { Hq: Hkv, Hkv, D, Dv, numBlocks, blockSize: bs, T });
        const gotK = Float64Array.from(await cache.key.toFloat32(), (x) => x * kScale);
        const gotV = Float64Array.from(await cache.value.toFloat32(), (x) => x * vScale);
        for (const [what, a, b] of [['key', gotK, ref.keyCache], ['value', gotV, ref.valueCache]] as const) {
          for (let i = 0; i < a.length; i++) {
            if (Math.abs(a[i] - b[i]) > 1e-6 * Math.abs(b[i])) throw new Error(`${cdt} ${what} cache[${i}] = ${a[i]}, expected ${b[i]}`);
          }
        }
        cache.destroy();
      }
    },
  },
  {
    // A model's step after its fused q|k|v product: q rotated in place, k rotated into the key cache, v
    // copied, in one pass; against ropeRef then reshapeAndCacheRef in float64.
    name: 'RoPE and the cache write in one pass after a fused q|k|v row (rope_cache.wgsl): f32, f16, bf16 and fp8 caches, half and interleaved pairs, a partial rotary part, positions past the table, padding slots, a split cache',
    async run({ engine }) {
      const specs = [['f32', 'half', 16, 0, 1], ['f16', 'interleaved', 16, 0, 2], ['bf16', 'half', 8, 0, 3], ['fp8e4m3', 'half', 16, 0, 4], ['f16', 'half', 16, 3, 5]] as const;
      for (const [cdt, pairing, rd, parts, seed] of specs) {
        const [T, Hq, Hkv, D, bs, numBlocks, P] = [7, 4, 2, 16, 4, 6, 20];
        const half = rd / 2, W = (Hq + 2 * Hkv) * D + 4;
        const kScale = cdt === 'fp8e4m3' ? 0.05 : 1, vScale = cdt === 'fp8e4m3' ? 2 : 1;
        const x = randn(T * W, seed);
        const positions = Int32Array.from({ length: T }, (_, t) => (t === 2 ? P + 3 : Math.floor(rng(seed + t)() * P)));
        const cos = randn(P * half, seed + 10), sin = randn(P * half, seed + 11);
        const slots = Int32Array.of(23, 0, -1, 9, 14, 5, 17);
        const bind = parts ? 2 * Hkv * bs * D * { f32: 4, f16: 2, bf16: 2, fp8e4m3: 1 }[cdt] : Infinity;   // 2 blocks a part
        await withTuning(engine, { cacheBindingBytes: bind }, async () => {
          const cache = engine.createPagedKVCache({ numBlocks, blockSize: bs, numKvHeads: Hkv, headSize: D, dtype: cdt, ...(cdt === 'fp8e4m3' ? { kScale, vScale } : {}) });
          assert(!parts || cache.parts.length === parts, `${cache.parts.length} parts, expected ${parts}`);
          const xt = engine.tensor(x, [T, W]), pt = engine.tensor(positions, [T]), ct = engine.tensor(cos, [P, half]), st = engine.tensor(sin, [P, half]), slt = engine.tensor(slots, [T]);
          const rows = { tensor: xt, qHeads: Hq, stride: W, kOffset: Hq * D, vOffset: (Hq + Hkv) * D };
          const tables = { positions: pt, cos: ct, sin: st, interleaved: pairing === 'interleaved' };
          assert(ropeCacheWriteFits(rows, tables, cache), 'the fused pass refused these rows');
          encodeRopeCacheWrite(engine, T, rows, tables, cache, slt);
          const views = [{ rows: T, offset: 0, tokenStride: W, heads: Hq, headStride: D }, { rows: T, offset: Hq * D, tokenStride: W, heads: Hkv, headStride: D }];
          const rot = reference.ropeRef(x, positions, cos, sin, half, views, pairing);
          // q rotated in place; k and v (and the row padding) left as they were.
          const got = await xt.toFloat32();
          const tag = `${cdt} ${pairing} rotary ${rd} of ${D}${parts ? `, ${parts} parts` : ''}`;
          assertClose(`q heads (${tag})`, got, rot, 'f32', (i) => i % W >= Hq * D);
          for (let i = 0; i < x.length; i++) if (i % W >= Hq * D && got[i] !== x[i]) throw new Error(`${tag}: qkv element ${i} outside q changed: ${got[i]}, was ${x[i]}`);
          const k = new Float32Array(T * Hkv * D), v = new Float32Array(T * Hkv * D);
          for (let t = 0; t < T; t++) {
            for (let e = 0; e < Hkv * D; e++) { k[t * Hkv * D + e] = rot[t * W + Hq * D + e]; v[t * Hkv * D + e] = x[t * W + (Hq + Hkv) * D + e]; }
          }
          const ref = reference.reshapeAndCacheRef(cacheValues(k, cdt, kScale), cacheValues(v, cdt, vScale), slots,
            new Float64Array(numBlocks * Hkv * bs * D), new Float64Array(numBlocks * Hkv * bs * D), { Hq: Hkv, Hkv, D, Dv: D, numBlocks, blockSize: bs, T });
          // Stored values: the reference's rounding of the same value, at most one step of the cache dtype apart.
          const rel = { f32: 1e-6, f16: 1.1e-3, bf16: 8e-3, fp8e4m3: 0.13 }[cdt];
          for (const part of cache.parts) {
            const at = part.blockLo * Hkv * bs * D, n = part.blocks * Hkv * bs * D;
            for (const [what, buf, want, sc] of [['key', part.key, ref.keyCache, kScale], ['value', part.value, ref.valueCache, vScale]] as const) {
              const a = await buf.toFloat32();
              for (let i = 0; i < n; i++) {
                const g = a[i] * sc, w = want[at + i];
                if (!(Math.abs(g - w) <= rel * Math.abs(w) + 1e-6)) throw new Error(`${tag}: ${what} cache[${at + i}] = ${g}, expected ${w}`);
              }
            }
          }
          for (const t of [xt, pt, ct, st, slt]) t.destroy();
          cache.destroy();
        });
      }
    },
  },
  matrix('mixed batch: decode, prefill and chunked prefill with context, shuffled blocks, padding tokens', [
    { Hq: 4, Hkv: 2, D: 32, bs: 16, seqs: MIXED, pad: 3, seed: 10 },
    { Hq: 2, Hkv: 2, D: 16, bs: 1, seqs: MIXED, pad: 1, seed: 11 },
    { Hq: 8, Hkv: 1, D: 16, bs: 32, seqs: [{ ctx: 40, q: 1 }, { ctx: 0, q: 1 }, { ctx: 31, q: 2 }], seed: 12 },
  ]),
  matrix('block sizes 1, 16, 32, 64, 128 and sequences crossing block boundaries', [1, 16, 32, 64, 128].map((bs, i) => ({
    Hq: 2, Hkv: 1, D: 16, bs, seqs: [{ ctx: bs - 1, q: 2 }, { ctx: 2 * bs, q: 1 }, { ctx: 0, q: 1 }], seed: 20 + i,
  }))),
  matrix('GQA ratios 1, 2, 4, 7, 8 and head sizes 32, 64, 128, Dv != D', [
    { Hq: 7, Hkv: 1, D: 32, bs: 16, seqs: MIXED, seed: 30 },
    { Hq: 16, Hkv: 2, D: 64, bs: 16, seqs: [{ ctx: 17, q: 3 }, { ctx: 5, q: 1 }], seed: 31 },
    { Hq: 4, Hkv: 4, D: 128, Dv: 64, bs: 16, seqs: [{ ctx: 10, q: 4 }], seed: 32 },
  ]),
  matrix('options: scale, softcap, ALiBi, sliding window, sinks, non-causal', [
    { Hq: 4, Hkv: 2, D: 16, bs: 16, seqs: MIXED, opts: { scale: 0.3, softcap: 3 }, seed: 40 },
    { Hq: 4, Hkv: 2, D: 16, bs: 16, seqs: MIXED, opts: { alibi: true, sinks: true }, seed: 41 },
    { Hq: 4, Hkv: 2, D: 16, bs: 4, seqs: MIXED, opts: { slidingWindow: 6 }, seed: 42 },
    { Hq: 2, Hkv: 1, D: 16, bs: 16, seqs: MIXED, opts: { causal: false, sinks: true }, seed: 43 },
  ]),
  matrix('dtypes: f16 / bf16 queries and caches, fp8 cache with per-tensor scales', [
    { Hq: 4, Hkv: 2, D: 32, bs: 16, seqs: MIXED, qDtype: 'f16', cache: 'f16', seed: 50 },
    { Hq: 4, Hkv: 2, D: 32, bs: 16, seqs: MIXED, qDtype: 'bf16', cache: 'bf16', seed: 51 },
    { Hq: 4, Hkv: 2, D: 32, bs: 16, seqs: MIXED, qDtype: 'f32', cache: 'f16', seed: 52 },
    { Hq: 4, Hkv: 2, D: 32, bs: 16, seqs: MIXED, qDtype: 'f16', cache: 'fp8e4m3', kScale: 0.02, vScale: 0.5, seed: 53 },
    { Hq: 2, Hkv: 1, D: 16, bs: 8, seqs: MIXED, qDtype: 'f32', cache: 'fp8e4m3', seed: 54 },
  ]),
  {
    name: 'f16 queries over an f16 cache on the subgroup-matrix tile: mixed prefill and decode, GQA, sinks, window, padded D / Dv, KV partitions, a split cache',
    async run({ engine, note }) {
      const here = flashMmaFor(engine, 'f16', 64, 64) !== null;
      const specs: PagedSpec[] = [
        { Hq: 8, Hkv: 2, D: 64, bs: 16, seqs: [{ ctx: 0, q: 70 }, { ctx: 130, q: 33 }, { ctx: 9, q: 1 }, { ctx: 300, q: 5 }], qDtype: 'f16', cache: 'f16', seed: 90 },
        { Hq: 4, Hkv: 1, D: 128, bs: 32, seqs: [{ ctx: 40, q: 100 }, { ctx: 500, q: 17 }], qDtype: 'f16', cache: 'f16', opts: { sinks: true, slidingWindow: 64 }, seed: 91 },
        { Hq: 6, Hkv: 3, D: 72, Dv: 40, bs: 16, seqs: [{ ctx: 20, q: 45 }, { ctx: 0, q: 3 }], qDtype: 'f16', cache: 'f16', opts: { softcap: 15, alibi: true }, seed: 92 },
      ];
      if (!here) {
        // Without the tile, 'auto' runs the scalar one, which the other cases cover: one spec keeps this one real.
        note("paged subgroup-matrix tile: not run here (the adapter offers no f16 subgroup matrices); its first spec ran on the tile 'auto' picks");
        await checkPaged(engine, specs[0]);
        return;
      }
      for (const s of specs) await checkPaged(engine, s);
      // Partitions of the keys (partial states merged by LSE) and a cache split across buffers.
      await withTuning(engine, { pagedTargetWorkgroups: 4096, pagedMinPartition: 16 }, () => checkPaged(engine, { ...specs[0], seed: 93 }));
      const s1 = specs[1];
      await withTuning(engine, { cacheBindingBytes: 4 * s1.Hkv * s1.bs * s1.D * 2 }, () => checkPaged(engine, { ...s1, minParts: 3, seed: 94 }));
    },
  },
  {
    name: 'GQA decode on the subgroup-matrix tile (mla_mma_core.wgsl, V from the V cache): every shape and configuration; G 1, 4, 7, 8, 16; D 128, 64, Dv != D; f16 and bf16 caches; partitions; O rescaled at every move; mixed batches; what it leaves to the decode kernels',
    async run({ engine, note }) {
      const specs: PagedSpec[] = [
        { Hq: 8, Hkv: 2, D: 128, bs: 16, seqs: [{ ctx: 300, q: 1 }, { ctx: 0, q: 1 }, { ctx: 37, q: 1 }, { ctx: 64, q: 1 }], qDtype: 'f16', cache: 'f16', seed: 80 },
        { Hq: 14, Hkv: 2, D: 64, Dv: 40, bs: 32, seqs: [{ ctx: 130, q: 1 }, { ctx: 5, q: 1 }], qDtype: 'bf16', cache: 'bf16', seed: 81 },
        { Hq: 16, Hkv: 1, D: 128, bs: 16, seqs: [{ ctx: 500, q: 1 }, { ctx: 17, q: 1 }], qDtype: 'f16', cache: 'f16', seed: 82 },
        { Hq: 3, Hkv: 3, D: 96, bs: 8, seqs: [{ ctx: 77, q: 1 }, { ctx: 200, q: 1 }], qDtype: 'f16', cache: 'f16', pad: 2, seed: 83 },
      ];
      if (!decodeMmaFor(engine, 128, 128, 4)) {
        note("GQA decode's subgroup-matrix tile: not run here (the adapter offers no f16 subgroup matrices); its first spec ran on the decode kernel 'auto' picks");
        await checkPaged(engine, specs[0]);
        return;
      }
      const part = { pagedMinPartition: 64, pagedTargetWorkgroups: 64 };
      const ran: string[] = [];
      // Every shape on the first two specs (GQA 4 at D 128 in partitions; GQA 7 with Dv 40 over bf16).
      for (const [si] of DECODE_MMA_SHAPES.entries()) {
        const p = planMlaMma(engine.limits, engine.features, 128, 128, 4, Infinity, undefined, si, true);
        if (!p) { note(`GQA decode matrix shape ${si} does not fit this adapter`); continue; }
        ran.push(`shape ${si}: ${p.NSG} subgroups, ${p.DSPLIT} D slices, ${p.BC} keys (${p.smem} B)`);
        await withTuning(engine, { ...part, pagedDecodeMmaShape: si }, async () => {
          for (const s of specs.slice(0, 2)) await checkPaged(engine, { ...s, seed: s.seed + 10 * si });
        });
      }
      for (const [ci, c] of mmaConfigs(engine.features).entries()) {
        if (!planMlaMma(engine.limits, engine.features, 128, 128, 4, Infinity, ci, undefined, true)) { note(`GQA decode matrix tile: no shape at ${c.M}×${c.N}×${c.K}`); continue; }
        ran.push(`configuration ${c.M}×${c.N}×${c.K}`);
        await withTuning(engine, { ...part, flashMmaConfig: ci }, () => checkPaged(engine, { ...specs[0], seed: 90 + ci }));
      }
      // G 16 and 1 (Dv 96 at 8-token blocks, padding tokens), one long unsplit partition, the lazy
      // rescale at every move, and device metadata.
      for (const s of specs.slice(2)) await checkPaged(engine, s);
      await withTuning(engine, { pagedTargetWorkgroups: 1 }, () => checkPaged(engine, { ...specs[2], seqs: [{ ctx: 1300, q: 1 }], seed: 84 }));
      await withTuning(engine, { ...part, mlaMmaTau: 0 }, async () => {
        await checkPaged(engine, { ...specs[0], seed: 85 });
        await checkPaged(engine, { ...specs[1], seed: 86 }, 'device');
      });
      // A mixed batch: its decode items on the matrix tile, its prefill rows on the flash tile.
      await checkPaged(engine, { Hq: 8, Hkv: 2, D: 64, bs: 16, seqs: [{ ctx: 0, q: 20 }, { ctx: 90, q: 1 }, { ctx: 30, q: 6 }, { ctx: 3, q: 1 }], qDtype: 'f16', cache: 'f16', seed: 87 });
      // Which kernel runs (named by the timed passes where the adapter has timestamps): the tile for
      // 16-bit queries, and for f32 queries where no LSE is asked (a model's step: rounding them to f16
      // keeps the output within the f16 cache's tolerance, not the LSE within f32's); the FMA kernel for
      // f32 queries with the LSE and options the tile leaves out; G past 16 goes to the flash tile (no
      // decode kernel holds that many heads).
      await checkPaged(engine, { ...specs[0], kernel: 'paged_mla_mma', seed: 96 });
      await checkPaged(engine, { ...specs[0], qDtype: 'f32', lse: false, kernel: 'paged_mla_mma', seed: 97 });
      await checkPaged(engine, { ...specs[1], qDtype: 'f32', lse: false, kernel: 'paged_mla_mma', seed: 98 });
      await checkPaged(engine, { ...specs[0], qDtype: 'f32', kernel: 'paged_decode_sg', seed: 89 });
      // A speculating model's steps (Runtime.exactQueries): f32 queries stay f32, on the FMA kernel, as its
      // verification rows' (several a sequence, on the flash kernel) do.
      const rt = engine as unknown as { exactQueries: boolean };
      rt.exactQueries = true;
      try {
        await checkPaged(engine, { ...specs[0], qDtype: 'f32', lse: false, kernel: 'paged_decode_sg', seed: 94 });
      } finally {
        rt.exactQueries = false;
      }
      await checkPaged(engine, { ...specs[0], opts: { softcap: 20, sinks: true }, kernel: 'paged_decode_sg', seed: 88 });
      assert(decodeMmaFor(engine, 128, 128, 17) === null, 'no matrix decode for G 17');
      await checkPaged(engine, { ...specs[0], Hq: 34, kernel: 'paged_flash', seed: 99 });
      // Its diagnostics compile and run, and their output is wrong.
      for (const probe of [1, 2, 3, 4]) {
        await withTuning(engine, { ...part, mlaMmaProbe: probe }, () =>
          expectThrows(() => checkPaged(engine, { ...specs[0], seqs: [{ ctx: 90, q: 1 }], seed: 100 + probe }), 'out (paged'));
      }
      note(`GQA decode matrix tile: ${ran.join('; ')}`);
    },
  },
  matrix('decode sequences through the flash kernel instead of the decode kernel', [
    { Hq: 4, Hkv: 2, D: 32, bs: 16, seqs: MIXED, pad: 1, opts: { sinks: true, alibi: true }, seed: 55 },
    { Hq: 8, Hkv: 2, D: 16, bs: 16, seqs: [{ ctx: 90, q: 1 }, { ctx: 3, q: 1 }], cache: 'fp8e4m3', qDtype: 'f16', seed: 56 },
  ], { ...SMALL, pagedDecodeKernel: false }),
  ...(['subgroup', 'portable'] as const).map((variant): TestCase => ({
    name: `${variant} decode kernel: GQA 8 and 7, D 128/64, Dv != D, f32/f16/fp8 caches, long contexts split and merged`,
    async run({ engine, note }) {
      await withTuning(engine, { pagedDecodeVariant: variant, pagedMinPartition: 64, pagedTargetWorkgroups: 64 }, async () => {
        if (variant === 'subgroup' && !engine.features.subgroups) {
          assert(planDecode(engine, 128, 128, 8, 'f16') === null, 'no subgroup decode kernel without subgroups');
          note('no subgroups: the subgroup decode kernel is not planned here; the portable decode kernel runs the same cases');
          return;
        }
        for (const s of DECODE_SPECS) {
          const plan = planDecode(engine, s.D, s.Dv ?? s.D, s.Hq / s.Hkv, s.cache ?? 'f32');
          assert(plan?.variant === variant, `planned the ${variant} decode kernel for ${JSON.stringify(s)}, got ${JSON.stringify(plan)}`);
          await checkPaged(engine, s);
        }
      });
      if (variant !== 'portable') return;
      // Under an 8 KiB storage cap (the demo's on software adapters) GQA 8 at D 128 still decodes on the
      // portable kernel, with a smaller workgroup instead of no plan (Firefox, issue 32).
      await withTuning(engine, { pagedDecodeVariant: variant, flashSmemBytes: 8192, pagedMinPartition: 64, pagedTargetWorkgroups: 64 }, async () => {
        const s = DECODE_SPECS[0];
        const plan = planDecode(engine, s.D, s.D, s.Hq / s.Hkv, s.cache ?? 'f32');
        assert(plan?.variant === 'portable' && plan.WG < 256, `a portable plan with a smaller workgroup in 8 KiB, got ${JSON.stringify(plan)}`);
        await checkPaged(engine, { ...s, seed: 59 });
      });
    },
  })),
  {
    name: 'subgroup decode kernel: one long partition, fewer lanes per row (several loads each), a small workgroup, no prefetch',
    async run({ engine, note }) {
      const spec: PagedSpec = { Hq: 4, Hkv: 1, D: 64, bs: 16, seqs: [{ ctx: 1300, q: 1 }, { ctx: 70, q: 1 }], qDtype: 'f16', cache: 'f16', opts: { softcap: 10 }, seed: 64 };
      if (!engine.features.subgroups) {
        note('no subgroups: the subgroup decode kernel cannot run here; the portable one takes this batch');
        await withTuning(engine, { pagedDecodeVariant: 'subgroup' }, async () => assert(planDecode(engine, 64, 64, 4, 'f16') === null, 'no subgroup plan'));
        await checkPaged(engine, spec);
        return;
      }
      // One partition of 1301 keys: longer than the portable kernel can hold.
      await withTuning(engine, { pagedDecodeVariant: 'subgroup', pagedTargetWorkgroups: 1 }, async () => {
        const plan = planDecode(engine, 64, 64, 4, 'f16')!;
        assert(plan.variant === 'subgroup' && plan.PMAX > 1301, `a subgroup plan without a partition limit, got ${JSON.stringify(plan)}`);
        await checkPaged(engine, spec);
      });
      // Two lanes per row, so each lane loads four 16-byte pieces of K and of V; and an 8 KiB storage
      // budget that shrinks the workgroup.
      await withTuning(engine, { pagedDecodeVariant: 'subgroup', pagedDecodeKT: 2, flashSmemBytes: 8192, pagedTargetWorkgroups: 8, pagedMinPartition: 64 }, async () => {
        const plan = planDecode(engine, 64, 64, 4, 'f16')!;
        assert(plan.variant === 'subgroup' && plan.KT === 2 && plan.WG < 256, `KT 2 and a small workgroup, got ${JSON.stringify(plan)}`);
        await checkPaged(engine, { ...spec, seed: 65 });
      });
      // Each step's loads issued right before it is computed (no prefetch of the next step).
      await withTuning(engine, { pagedDecodeVariant: 'subgroup', pagedDecodePrefetch: false, pagedTargetWorkgroups: 8, pagedMinPartition: 64 }, () =>
        checkPaged(engine, { ...spec, seed: 66 }));
      // Head split: 2 and 4 groups read each key row, each for 2 or 1 of the 4 query heads (ALiBi slopes
      // and sinks found from the group's first head); GQA 8 over merged partitions with 4 groups a row;
      // GQA 7 has no divisor but 1 and 7 below 4, so it keeps one group a row.
      for (const HS of [2, 4]) {
        await withTuning(engine, { pagedDecodeVariant: 'subgroup', pagedDecodeHeadSplit: HS, pagedTargetWorkgroups: 8, pagedMinPartition: 64 }, async () => {
          const plan = planDecode(engine, 64, 64, 4, 'f16')!;
          assert(plan.variant === 'subgroup' && plan.HS === HS, `a head split of ${HS}, got ${JSON.stringify(plan)}`);
          await checkPaged(engine, { ...spec, opts: { alibi: true, sinks: true }, seed: 66 + HS });
        });
      }
      await withTuning(engine, { pagedDecodeVariant: 'subgroup', pagedDecodeHeadSplit: 4, pagedTargetWorkgroups: 64, pagedMinPartition: 64 }, async () => {
        assert(planDecode(engine, 64, 32, 7, 'f32')!.HS === 1, 'GQA 7: no head split');
        await checkPaged(engine, DECODE_SPECS[0]);
        await checkPaged(engine, DECODE_SPECS[2]);
      });
      // The benchmark's diagnostics leave parts of the work out: they compile and run, and their output is wrong.
      for (const probe of [1, 2, 3, 4]) {
        await withTuning(engine, { pagedDecodeVariant: 'subgroup', pagedDecodeProbe: probe, pagedTargetWorkgroups: 8, pagedMinPartition: 64 }, () =>
          expectThrows(() => checkPaged(engine, { ...spec, seqs: [{ ctx: 90, q: 1 }], seed: 70 + probe }), 'out (paged'));
      }
    },
  },
  {
    name: 'the portable decode kernel is only planned where its workgroup covers Dv (else the flash kernel serves)',
    async run({ engine }) {
      const spec: PagedSpec = { Hq: 4, Hkv: 1, D: 128, bs: 16, seqs: [{ ctx: 40, q: 1 }, { ctx: 9, q: 1 }], qDtype: 'f16', cache: 'f16', seed: 59 };
      await withTuning(engine, { pagedDecodeVariant: 'portable' }, async () => assert(planDecode(engine, 128, 128, 4, 'f16') !== null, 'decode kernel planned at the default workgroup'));
      await withTuning(engine, { ...SMALL, pagedDecodeWG: 64, pagedDecodeVariant: 'portable' }, async () => {
        assert(planDecode(engine, 128, 128, 4, 'f16') === null, 'a 64-thread decode workgroup cannot cover Dv 128');
        assert(planDecode(engine, 32, 32, 4, 'f16') !== null, 'a 64-thread decode workgroup covers Dv 32');
        await checkPaged(engine, spec);
        await checkPaged(engine, { ...spec, D: 32, seed: 62 });
      });
    },
  },
  {
    name: 'the portable decode kernel keeps long rows where the workspace cap holds fewer partitions than its key limit needs (one buffer and a split cache, blocks shuffled and in order)',
    async run({ engine, note }) {
      // A workspace cap of one byte holds no partition: the plan must still give the decode kernel the
      // ceil(keys / PMAX) partitions of both rows (before, such rows went to the flash tile, and no decode
      // pass ran).
      const spec: PagedSpec = { Hq: 4, Hkv: 1, D: 64, bs: 16, seqs: [{ ctx: 1300, q: 1 }, { ctx: 700, q: 1 }], qDtype: 'f16', cache: 'f16',
        opts: { sinks: true }, lse: true, kernel: 'paged_decode:', seed: 97 };
      await withTuning(engine, { pagedDecodeVariant: 'portable', pagedWorkspaceBytes: 1, pagedTargetWorkgroups: 1 }, async () => {
        const plan = planDecode(engine, 64, 64, 4, 'f16')!;
        assert(plan.variant === 'portable' && plan.PMAX < 701, `a portable plan that must split 701 and 1301 keys, got ${JSON.stringify(plan)}`);
        await checkPaged(engine, spec);
        await checkPaged(engine, { ...spec, seed: 98 }, 'device');
        await withTuning(engine, { cacheBindingBytes: 32 * 16 * 64 * 2 }, async () => {
          await checkPaged(engine, { ...spec, minParts: 3, seed: 99 });
          // Blocks in order: most partitions have no block in a given part (every key of the pass masked).
          await checkPaged(engine, { ...spec, minParts: 3, sequential: true, seed: 100 });
        });
      });
      if (!engine.features.timestampQuery) note('no timestamps here: the decode kernel is not seen running, only the results checked');
    },
  },
  matrix("the adapter's own tile plan (f32 and f16)", [
    { Hq: 8, Hkv: 2, D: 64, bs: 16, seqs: MIXED, pad: 2, seed: 60 },
    { Hq: 8, Hkv: 2, D: 64, bs: 16, seqs: MIXED, qDtype: 'f16', cache: 'f16', opts: { sinks: true }, seed: 61 },
  ], {}),
  {
    name: 'split-KV decode (partitions merged by LSE) equals unsplit, with sinks and a window',
    async run({ engine }) {
      const spec: PagedSpec = { Hq: 4, Hkv: 1, D: 16, bs: 16, seqs: [{ ctx: 300, q: 1 }, { ctx: 70, q: 1 }, { ctx: 5, q: 2 }], opts: { sinks: true }, seed: 70 };
      const whole = await withTuning(engine, { ...SMALL, pagedTargetWorkgroups: 1 }, () => checkPaged(engine, spec));
      const split = await withTuning(engine, { ...SMALL, pagedTargetWorkgroups: 4096, pagedMinPartition: 16 }, async () => {
        // The planner must really split this batch.
        const flash = planFlash(engine.limits, engine.features, 16, 16, 'portable', 8192)!;
        const plan = planOnHost({ T: 4, S: 3, maxB: 19, bs: 16, Hkv: 1, G: 4, BR: flash.TY * flash.TM, decodeOk: false, pmax: 0,
          target: engine.tuning.pagedTargetWorkgroups, minPart: Math.max(64, engine.tuning.pagedMinPartition), pCap: 64, split: false },
          Int32Array.of(0, 1, 2, 4), Int32Array.of(301, 71, 7), new Int32Array(3 * 19));
        assert(plan.maxNP > 2, `expected several KV partitions, planned ${plan.maxNP}`);
        return checkPaged(engine, spec);
      });
      assertClose('split vs unsplit', split.out.subarray(0, split.valid * 4 * 16), Float64Array.from(whole.out.subarray(0, whole.valid * 4 * 16)), 'f32');
      await withTuning(engine, { ...SMALL, pagedTargetWorkgroups: 4096, pagedMinPartition: 16 }, () =>
        checkPaged(engine, { ...spec, opts: { slidingWindow: 50, alibi: true }, seed: 71 }));
    },
  },
  {
    name: 'caches past one storage binding: split across buffers of whole blocks, written and attended per part, merged by LSE (mixed batch, both decode kernels, fp8, GPU planning)',
    async run({ engine, note }) {
      // engine.tuning.cacheBindingBytes caps a binding at a few blocks, so these small caches split as
      // a 4 GiB cache does at Dawn's 2 GiB binding; shuffled block tables interleave the parts.
      const bind = (s: PagedSpec, blocks: number) => blocks * s.Hkv * s.bs * Math.max(s.D, s.Dv ?? s.D) * { f32: 4, f16: 2, bf16: 2, fp8e4m3: 1 }[s.cache ?? 'f32'];
      const mixed: PagedSpec = { Hq: 4, Hkv: 2, D: 32, bs: 16, seqs: MIXED, pad: 2, cache: 'f16', qDtype: 'f16', opts: { sinks: true, slidingWindow: 12 }, minParts: 3, seed: 90 };
      const decode: PagedSpec = { ...DECODE_SPECS[0], minParts: 6, seed: 91 };
      const fp8: PagedSpec = { ...DECODE_SPECS[1], seqs: [{ ctx: 300, q: 1 }, { ctx: 40, q: 3 }], minParts: 4, seed: 92 };
      // The subgroup kernel lists each part's blocks WG at a time: 175 blocks in one partition at WG 64 take
      // three lists; blocks of 48 keys put partition bounds (multiples of 64) inside blocks.
      const chunks: PagedSpec = { ...decode, bs: 4, minParts: 5, seed: 95 }, offset: PagedSpec = { ...decode, bs: 48, minParts: 5, seed: 96 };
      for (const [spec, blocks, extra] of [[mixed, 3, {}], [decode, 8, {}], [decode, 8, { pagedDecodeVariant: 'portable' }], [fp8, 4, {}],
        [chunks, 32, { pagedTargetWorkgroups: 1, pagedDecodeWG: 64 }], [offset, 3, {}]] as const) {
        await withTuning(engine, { ...SMALL, ...extra, cacheBindingBytes: bind(spec, blocks) }, () => checkPaged(engine, spec));
      }
      await withTuning(engine, { ...SMALL, cacheBindingBytes: bind(mixed, 2) }, () => checkPaged(engine, { ...mixed, minParts: 4 }, 'device'));
      // Writes land in their own part; the whole-cache views refuse, naming the parts.
      await withTuning(engine, { cacheBindingBytes: 2 * 2 * 4 * 16 * 4 }, async () => {
        const [T, Hkv, D, bs, numBlocks] = [9, 2, 16, 4, 7];
        const cache = engine.createPagedKVCache({ numBlocks, blockSize: bs, numKvHeads: Hkv, headSize: D });
        assert(cache.parts.length === 4 && cache.parts[3].blocks === 1 && cache.parts[2].blockLo === 4, `expected parts of 2, 2, 2, 1 blocks, got ${cache.parts.map((p) => p.blocks)}`);
        const slots = Int32Array.of(27, 0, -1, 9, 14, 8, 21, 3, 16);
        const k = randn(T * Hkv * D, 93), v = randn(T * Hkv * D, 94);
        engine.reshapeAndCache(engine.tensor(k, [T, Hkv, D]), engine.tensor(v, [T, Hkv, D]), cache, slots);
        const ref = reference.reshapeAndCacheRef(k, v, slots, new Float64Array(numBlocks * Hkv * bs * D), new Float64Array(numBlocks * Hkv * bs * D),
          { Hq: Hkv, Hkv, D, Dv: D, numBlocks, blockSize: bs, T });
        for (const part of cache.parts) {
          const at = part.blockLo * Hkv * bs * D;
          assertClose(`key part from block ${part.blockLo}`, await part.key.toFloat32(), ref.keyCache.subarray(at, at + part.blocks * Hkv * bs * D), 'f32');
          assertClose(`value part from block ${part.blockLo}`, await part.value.toFloat32(), ref.valueCache.subarray(at, at + part.blocks * Hkv * bs * D), 'f32');
        }
        await expectThrows(() => cache.key, 'PagedKVCache.key: this cache of 7 blocks is split across 4 buffers (2 blocks each: more than one storage binding holds); read cache.parts[i].key (blocks from parts[i].blockLo)');
        cache.destroy();
      });
      note(`split caches: 3-8 buffers; decode kernels ${engine.features.subgroups ? 'subgroup and portable' : 'portable (twice: no subgroups here)'}, flash prefill, fp8, host and GPU planning`);
    },
  },
  {
    name: 'chunked prefill equals one-shot prefill; paged equals dense sdpa on the same data',
    async run({ engine }) {
      await withTuning(engine, SMALL, async () => {
        // One sequence of 40 tokens: all at once, or 25 then 15 with the first 25 as context.
        const once = await checkPaged(engine, { Hq: 2, Hkv: 1, D: 16, bs: 8, seqs: [{ ctx: 0, q: 40 }], seed: 80 });
        const chunked = await checkPaged(engine, { Hq: 2, Hkv: 1, D: 16, bs: 8, seqs: [{ ctx: 25, q: 15 }], seed: 80 });
        // Same seeds give the same first 25 keys only if written identically: compare each to its reference instead,
        // and both references to the dense one (bottom-right causal over the same keys).
        assert(once.valid === 40 && chunked.valid === 15, 'row counts');
        const q = randn(2 * 6 * 16, 81), k = randn(20 * 16, 82), v = randn(20 * 16, 83);
        const dense = engine.sdpa(engine.tensor(q, [1, 2, 6, 16]), engine.tensor(k, [1, 1, 20, 16]), engine.tensor(v, [1, 1, 20, 16]), { causal: true });
        const cache = engine.createPagedKVCache({ numBlocks: 5, blockSize: 4, numKvHeads: 1, headSize: 16 });
        const slots = Int32Array.from({ length: 20 }, (_, i) => [3, 0, 4, 1, 2][Math.floor(i / 4)] * 4 + (i % 4));
        engine.reshapeAndCache(engine.tensor(k, [20, 1, 16]), engine.tensor(v, [20, 1, 16]), cache, slots);
        const qT = new Float32Array(6 * 2 * 16);   // [1,2,6,16] -> [6,2,16]
        for (let h = 0; h < 2; h++) for (let i = 0; i < 6; i++) qT.set(q.subarray((h * 6 + i) * 16, (h * 6 + i + 1) * 16), (i * 2 + h) * 16);
        const paged = await engine.pagedAttention(engine.tensor(qT, [6, 2, 16]), cache, {
          queryStartLoc: Int32Array.of(0, 6), seqLens: Int32Array.of(20), blockTable: Int32Array.of(3, 0, 4, 1, 2),
        }).toFloat32();
        const d = await dense.toFloat32();
        const dT = new Float64Array(6 * 2 * 16);
        for (let h = 0; h < 2; h++) for (let i = 0; i < 6; i++) dT.set(d.subarray((h * 6 + i) * 16, (h * 6 + i + 1) * 16), (i * 2 + h) * 16);
        assertClose('paged vs dense', paged, dT, 'f32');
      });
    },
  },
  {
    name: 'metadata as i32 tensors (no host copy: the kernel clamps) gives the same result',
    async run({ engine }) {
      await withTuning(engine, SMALL, () => checkPaged(engine, { Hq: 4, Hkv: 2, D: 16, bs: 16, seqs: MIXED, pad: 2, seed: 90 }, 'device'));
    },
  },
  {
    name: 'a serving loop: KVCacheManager steps (prefill, decode, free, new sequence) against the dense reference',
    async run({ engine }) {
      await withTuning(engine, SMALL, async () => {
        const [Hq, Hkv, D, bs] = [4, 2, 16, 4];
        const mgr = new KVCacheManager({ numBlocks: 12, blockSize: bs });
        const cache = engine.createPagedKVCache({ numBlocks: 12, blockSize: bs, numKvHeads: Hkv, headSize: D });
        const hist = new Map<string, { k: number[]; v: number[] }>();
        const steps: StepRequest[][] = [
          [{ id: 'a', numTokens: 7 }, { id: 'b', numTokens: 2 }],
          [{ id: 'a', numTokens: 1 }, { id: 'b', numTokens: 5 }],
          [{ id: 'b', numTokens: 1 }, { id: 'a', numTokens: 1 }],
          [{ id: 'c', numTokens: 6 }, { id: 'b', numTokens: 1 }],
        ];
        let seed = 500;
        for (const [n, step] of steps.entries()) {
          if (n === 3) { mgr.freeSequence('a'); hist.delete('a'); }
          for (const r of step) if (!mgr.has(r.id)) { mgr.addSequence(r.id); hist.set(String(r.id), { k: [], v: [] }); }
          const plan = mgr.schedule(step);
          const T = plan.numTokens;
          const q = randn(T * Hq * D, seed++), k = randn(T * Hkv * D, seed++), v = randn(T * Hkv * D, seed++);
          engine.reshapeAndCache(engine.tensor(k, [T, Hkv, D]), engine.tensor(v, [T, Hkv, D]), cache, plan.slotMapping);
          const out = await engine.pagedAttention(engine.tensor(q, [T, Hq, D]), cache, plan).toFloat32();
          for (const [i, r] of step.entries()) {
            const [r0, r1] = plan.rows[i];
            const h = hist.get(String(r.id))!;
            h.k.push(...k.subarray(r0 * Hkv * D, r1 * Hkv * D));
            h.v.push(...v.subarray(r0 * Hkv * D, r1 * Hkv * D));
            const L = h.k.length / (Hkv * D), nq = r1 - r0;
            // Dense reference over this sequence's whole history: [T,H,D] -> [H,T,D] layouts.
            const toHTD = (x: ArrayLike<number>, n: number, H: number) => {
              const y = new Float64Array(n * H * D);
              for (let t = 0; t < n; t++) for (let hh = 0; hh < H; hh++) for (let d = 0; d < D; d++) y[(hh * n + t) * D + d] = x[(t * H + hh) * D + d];
              return y;
            };
            const ref = reference.sdpaRef(toHTD(q.subarray(r0 * Hq * D, r1 * Hq * D), nq, Hq), toHTD(h.k, L, Hkv), toHTD(h.v, L, Hkv),
              { B: 1, Hq, Hkv, Lq: nq, Lk: L, D, Dv: D }, { causal: true });
            const got = toHTD(out.subarray(r0 * Hq * D, r1 * Hq * D), nq, Hq);
            assertClose(`step ${n} sequence ${r.id}`, got, ref.out, 'f32');
          }
        }
        cache.destroy();
      });
    },
  },
  {
    name: 'validation: cache options, shapes, slots, and metadata (block index, seqLen, queryStartLoc, heads)',
    async run({ engine }) {
      const c = (o: object) => () => engine.createPagedKVCache({ numBlocks: 4, blockSize: 16, numKvHeads: 2, headSize: 16, ...o });
      await expectThrows(c({ numBlocks: 0 }), 'createPagedKVCache: numBlocks: expected a positive integer, got 0');
      await expectThrows(c({ blockSize: 300 }), 'createPagedKVCache: blockSize: expected an integer from 1 to 256, got 300');
      await expectThrows(c({ dtype: 'i32' }), "createPagedKVCache: dtype: expected 'f32', 'f16', 'bf16' or 'fp8e4m3', got 'i32'");
      await expectThrows(c({ dtype: 'fp8e4m3', headSize: 18 }), "createPagedKVCache: headSize: expected a multiple of 4 for dtype 'fp8e4m3'");
      await expectThrows(c({ kScale: 2 }), "createPagedKVCache: kScale: expected only with dtype 'fp8e4m3'");
      await expectThrows(c({ dtype: 'fp8e4m3', vScale: -1 }), 'createPagedKVCache: vScale: expected a positive finite number, got -1');
      const cache = engine.createPagedKVCache({ numBlocks: 4, blockSize: 16, numKvHeads: 2, headSize: 16 });
      const kv = engine.tensor(randn(3 * 2 * 16, 1), [3, 2, 16]);
      await expectThrows(() => engine.reshapeAndCache(kv, kv, cache, Int32Array.of(0, 64, 1)), 'reshapeAndCache: slotMapping[1]: expected a slot below 64 (numBlocks·blockSize), or negative for padding, got 64');
      await expectThrows(() => engine.reshapeAndCache(kv, kv, cache, Int32Array.of(0, 1)), 'reshapeAndCache: slotMapping: expected 3 slots (one per token), got 2');
      await expectThrows(() => engine.reshapeAndCache(engine.tensor(randn(48, 1), [3, 1, 16]), kv, cache, Int32Array.of(0, 1, 2)), 'reshapeAndCache: key: expected shape [T, Hkv=2, D=16], got [3, 1, 16]');
      await expectThrows(() => engine.reshapeAndCache(kv, kv, {} as never, Int32Array.of(0, 1, 2)), 'reshapeAndCache: cache: expected a PagedKVCache');
      const q = engine.tensor(randn(2 * 4 * 16, 2), [2, 4, 16]);
      const meta = { queryStartLoc: Int32Array.of(0, 1, 2), seqLens: Int32Array.of(5, 20), blockTable: Int32Array.of(0, 1, 2, 3), maxBlocksPerSeq: 2 };
      const run = (m: object, query = q) => () => engine.pagedAttention(query, cache, { ...meta, ...m });
      await expectThrows(run({ blockTable: Int32Array.of(0, 1, 9, 3) }), 'pagedAttention: meta.blockTable[1][0]: expected a block index in [0, 4), got 9');
      await expectThrows(run({ seqLens: Int32Array.of(5, 40) }), 'pagedAttention: meta.seqLens[1]: expected at most maxBlocksPerSeq·blockSize = 32 tokens');
      await expectThrows(run({ queryStartLoc: Int32Array.of(0, 2, 1) }), 'pagedAttention: meta.queryStartLoc: expected non-decreasing entries');
      await expectThrows(run({ queryStartLoc: Int32Array.of(0, 1, 3) }), 'pagedAttention: meta.queryStartLoc: expected a last entry at most T=2');
      await expectThrows(run({ queryStartLoc: Int32Array.of(0, 1) }), 'pagedAttention: meta.queryStartLoc: expected 3 entries (S+1, S=2 from seqLens), got 2');
      await expectThrows(run({ seqLens: Int32Array.of(0, 20) }), 'pagedAttention: meta.seqLens[0]: expected at least the sequence\'s 1 new tokens, got 0');
      await expectThrows(run({ maxBlocksPerSeq: undefined }), 'pagedAttention: meta.maxBlocksPerSeq: expected a value when blockTable is flat and S=2 > 1');
      await expectThrows(run({}, engine.tensor(randn(2 * 3 * 16, 2), [2, 3, 16])), "pagedAttention: query: expected a head count Hq that is a multiple of the cache's Hkv=2, got Hq=3");
      await expectThrows(run({}, engine.tensor(randn(2 * 4 * 8, 2), [2, 4, 8])), "pagedAttention: query: expected shape [T, Hq, D=16] (the cache's head size), got [2, 4, 8]");
      await expectThrows(run({ seqLens: engine.tensor(Float32Array.of(5, 20), [2]) }), "pagedAttention: meta.seqLens.dtype: expected 'i32' (or an Int32Array), got 'f32'");
      cache.destroy();
      await expectThrows(() => engine.pagedAttention(q, cache, meta), 'pagedAttention: cache: expected a live cache, got a destroyed cache');
    },
  },
]);
