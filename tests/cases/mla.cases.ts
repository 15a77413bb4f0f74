// MLA (SPEC §5) against the float64 reference: cache writes in every cache dtype (fp8_ds_mla rows
// decoded with the reference codec), absorbed decode equal to the reference and to ordinary attention
// over decompressed K/V, prefill with chunked context equal to the reference, other MLA shapes, and
// validation.
import { reference, roundToDType, type Engine, type MLACacheDType, type Tensor } from '../../src/index';
import { planFlash, ROW_GRIDS } from '../../src/attention/flash';
import { MLA_MMA_SHAPES, mlaMmaFor, planMlaMma, planMlaTile } from '../../src/attention/plan';
import { mmaConfigs } from '../../src/core/runtime';
import { assertClose, defineCases, expectThrows, randn, rng, spreadOverSoftware, type TestCase, withTuning, swiftShader, UNROLL_SKIP } from './harness';

interface MlaSpec {
  N: number; L: number; P: number; R: number; V: number; bs: number;
  /** Per sequence: cached tokens before this step, and new tokens (1 for decode). */
  seqs: { ctx: number; q: number }[];
  cache: MLACacheDType; qDtype?: 'f32' | 'f16' | 'bf16';
  /** The cache must be split across at least this many buffers (engine.tuning.cacheBindingBytes). */
  minParts?: number;
  seed: number;
}

/** The values a cache row holds after a write: rounded, or fp8_ds_mla encoded then decoded. */
function storedRows(rows: Float32Array, n: number, L: number, R: number, dtype: MLACacheDType): Float64Array {
  if (dtype !== 'fp8_ds_mla') return Float64Array.from(roundToDType(rows, dtype));
  const bytes = new Uint8Array(reference.fp8DsMlaRowBytes(L, R));
  const out = new Float64Array(n * (L + R));
  for (let t = 0; t < n; t++) {
    reference.fp8DsMlaEncodeRow(rows.subarray(t * (L + R), (t + 1) * (L + R)), L, R, bytes, 0);
    reference.fp8DsMlaDecodeRow(bytes, 0, L, R, out, t * (L + R));
  }
  return out;
}

/** Writes every token of every sequence through cacheWrite, then runs decode or prefill and checks;
 *  returns how many stored fp8_ds_mla values the GPU encoded a step from the reference encoder's. */
async function checkMla(engine: Engine, spec: MlaSpec, mode: 'decode' | 'prefill'): Promise<{ fp8Differs: number; fp8Values: number }> {
  const { N, L, P, R, V, bs, seqs, seed } = spec;
  const qdt = spec.qDtype ?? 'f32';
  const r = rng(seed);
  const S = seqs.length;
  const seqLens = Int32Array.from(seqs, (s) => s.ctx + s.q);
  const maxB = Math.max(1, ...Array.from(seqLens, (l) => Math.ceil(l / bs)));
  const numBlocks = Array.from(seqLens, (l) => Math.ceil(l / bs)).reduce((a, b) => a + b, 0) + 2;
  const order = Array.from({ length: numBlocks }, (_, i) => i).sort(() => r() - 0.5);
  const blockTable = new Int32Array(S * maxB).fill(-3);
  let nb = 0;
  for (let s = 0; s < S; s++) for (let n = 0; n < Math.ceil(seqLens[s] / bs); n++) blockTable[s * maxB + n] = order[nb++];
  const slots: number[] = [];
  for (let s = 0; s < S; s++) for (let p = 0; p < seqLens[s]; p++) slots.push(blockTable[s * maxB + Math.floor(p / bs)] * bs + (p % bs));
  const Tw = slots.length;
  const scale = 1 / Math.sqrt(P + R);
  const kvB = roundToDType(randn(N * (P + V) * L, seed, 0.2), qdt);
  const kvC = roundToDType(randn(Tw * L, seed + 1), qdt), kPe = roundToDType(randn(Tw * R, seed + 2), qdt);
  const tensors: Tensor[] = [];
  const t = (x: Float32Array, shape: number[], dt: 'f32' | 'f16' | 'bf16' = qdt) => { const tt = engine.tensor(x, shape, dt); tensors.push(tt); return tt; };
  const layer = engine.createMLA({ numHeads: N, kvLoraRank: L, qkNopeHeadDim: P, qkRopeHeadDim: R, vHeadDim: V, scale, kvBProj: t(kvB, [N * (P + V), L]) });
  const cache = engine.createMLACache({ numBlocks, blockSize: bs, kvLoraRank: L, qkRopeHeadDim: R, dtype: spec.cache });
  if (spec.minParts && cache.parts.length < spec.minParts) throw new Error(`expected a cache of at least ${spec.minParts} buffers, got ${cache.parts.length}`);
  layer.cacheWrite(t(kvC, [Tw, L]), t(kPe, [Tw, R]), cache, Int32Array.from(slots));

  // Reference cache: the rows as stored.
  const rows = new Float32Array(Tw * (L + R));
  for (let i = 0; i < Tw; i++) { rows.set(kvC.subarray(i * L, (i + 1) * L), i * (L + R)); rows.set(kPe.subarray(i * R, (i + 1) * R), i * (L + R) + L); }
  const stored = storedRows(rows, Tw, L, R, spec.cache);
  const refCache = new Float64Array(numBlocks * bs * (L + R));
  slots.forEach((slot, i) => refCache.set(stored.subarray(i * (L + R), (i + 1) * (L + R)), slot * (L + R)));
  let fp8Differs = 0;
  if (spec.cache === 'fp8_ds_mla') {
    // The kernels read the rows as the GPU encoded them: its division (amax / 448, x / scale: WGSL
    // allows 2.5 ulp) can put a value that falls on a rounding boundary an e4m3 step from the reference
    // encoder's (the cacheWrite case allows that), and one such value in a key that dominates a head's
    // softmax moves that head's output by about the fp8 tolerance. So the reference attends over the
    // rows as stored, read back and decoded by the reference codec, after checking them against the
    // reference encoding within the fp8 tolerance; values a step apart are counted (scales an f32 ulp
    // apart are not).
    const gpu = new Float64Array(refCache.length);
    for (const part of cache.parts) {
      const bytes = new Uint8Array((await part.data.toArray()).buffer as ArrayBuffer);
      for (let r0 = 0; r0 < part.blocks * bs; r0++) reference.fp8DsMlaDecodeRow(bytes, r0 * cache.rowWords * 4, L, R, gpu, (part.blockLo * bs + r0) * (L + R));
    }
    for (const slot of slots) {
      const a = gpu.subarray(slot * (L + R), (slot + 1) * (L + R)), b = refCache.subarray(slot * (L + R), (slot + 1) * (L + R));
      assertClose(`fp8_ds_mla row of slot ${slot} as written`, a, b, 'fp8e4m3');
      for (let c = 0; c < L + R; c++) if (Math.abs(a[c] - b[c]) > 1e-5 * Math.abs(b[c])) fp8Differs++;
    }
    refCache.set(gpu);
  }
  const d = { N, L, P, R, V, numBlocks, blockSize: bs };
  const tol = spec.cache === 'fp8_ds_mla' ? 'fp8e4m3' : qdt === 'f32' ? spec.cache : qdt;
  const tag = `${mode} ${qdt}/${spec.cache} N${N} L${L} P${P} R${R} V${V} bs${bs} ${JSON.stringify(seqs)} seed ${seed}`;
  if (mode === 'decode') {
    const qNope = roundToDType(randn(S * N * P, seed + 3), qdt), qPe = roundToDType(randn(S * N * R, seed + 4), qdt);
    const out = await layer.decode(t(qNope, [S, N, P]), t(qPe, [S, N, R]), cache, { seqLens, blockTable, maxBlocksPerSeq: maxB }).toFloat32();
    const meta = { seqLens, blockTable, maxBlocksPerSeq: maxB };
    const ref = reference.mlaDecodeRef(qNope, qPe, refCache, kvB, { ...d, B: S }, meta, scale);
    assertClose(`out (${tag})`, out, ref.out, tol);
    const un = reference.mlaDecodeUnabsorbedRef(qNope, qPe, refCache, kvB, { ...d, B: S }, meta, scale);
    assertClose(`out vs unabsorbed attention (${tag})`, out, un.out, tol);
  } else {
    const qsl = new Int32Array(S + 1);
    for (let s = 0; s < S; s++) qsl[s + 1] = qsl[s] + seqs[s].q;
    const T = qsl[S] + 1;   // one padding token
    const qNope = roundToDType(randn(T * N * P, seed + 3), qdt), qPe = roundToDType(randn(T * N * R, seed + 4), qdt);
    const meta = { queryStartLoc: qsl, seqLens, blockTable, maxBlocksPerSeq: maxB };
    const out = await layer.prefill(t(qNope, [T, N, P]), t(qPe, [T, N, R]), cache, meta).toFloat32();
    const ref = reference.mlaPrefillRef(qNope, qPe, refCache, kvB, { ...d, T }, meta, scale);
    assertClose(`out (${tag})`, out, ref.out, tol, (i) => Math.floor(i / (N * V)) >= qsl[S]);
    for (let i = qsl[S] * N * V; i < out.length; i++) if (!Number.isNaN(out[i])) throw new Error(`padding row element ${i} was written`);
  }
  for (const x of tensors) x.destroy();
  layer.wUK.destroy();
  layer.wUV.destroy();
  cache.destroy();
  return { fp8Differs, fp8Values: spec.cache === 'fp8_ds_mla' ? Tw * (L + R) : 0 };
}

const SMALL = { flashSmemBytes: 8192 };
const BASE = { N: 4, L: 128, P: 16, R: 16, V: 16, bs: 8 };

/** Sparse decode (FlashMLA sparse) against the reference, under `tuning`: top-k request-local positions
 *  with -1, out-of-range ones, duplicates and a token with none valid. */
async function checkSparse(engine: Engine, tuning: Partial<Engine['tuning']>): Promise<void> {
  await withTuning(engine, tuning, async () => {
    const { N, L, P, R, V } = BASE;
    const bs = 4, maxB = 6, numBlocks = 12, topk = 7, T = 4;   // two requests: blockTable holds 2 rows
    const scale = 0.15;
    const kvB = randn(N * (P + V) * L, 20, 0.2);
    const layer = engine.createMLA({ numHeads: N, kvLoraRank: L, qkNopeHeadDim: P, qkRopeHeadDim: R, vHeadDim: V, scale, kvBProj: engine.tensor(kvB, [N * (P + V), L]) });
    const cache = engine.createMLACache({ numBlocks, blockSize: bs, kvLoraRank: L, qkRopeHeadDim: R, dtype: 'f16' });
    const blockTable = Int32Array.of(3, 7, 0, 11, 5, -1, /* req 1 */ 2, 9, 4, 1, 99, 6);
    const kvC = randn(numBlocks * bs * L, 21), kPe = randn(numBlocks * bs * R, 22);
    layer.cacheWrite(engine.tensor(kvC, [numBlocks * bs, L]), engine.tensor(kPe, [numBlocks * bs, R]), cache, Int32Array.from({ length: numBlocks * bs }, (_, i) => i));
    const indices = Int32Array.of(
      0, 5, 19, -1, 7, 7, 2,          // token 0, request 0: a duplicate and a -1
      23, 22, 4, 40, 16, 1, 3,        // token 1, request 0: 23 in block 5 (-1 in the table), 40 past the table
      0, 1, 2, 3, 12, 17, 18,         // token 2, request 1: 17 and 18 in block 99 (past the cache)
      -1, -1, 30, 100, -1, -1, -1,    // token 3, request 1: nothing valid
    );
    const reqOfToken = Int32Array.of(0, 0, 1, 1);
    const qNope = randn(T * N * P, 23), qPe = randn(T * N * R, 24);
    const out = await layer.sparseDecode(engine.tensor(qNope, [T, N, P]), engine.tensor(qPe, [T, N, R]), cache,
      { reqOfToken, indices, topk, blockTable, maxBlocksPerSeq: maxB }).toFloat32();
    const rows = new Float32Array(numBlocks * bs * (L + R));
    for (let i = 0; i < numBlocks * bs; i++) { rows.set(kvC.subarray(i * L, (i + 1) * L), i * (L + R)); rows.set(kPe.subarray(i * R, (i + 1) * R), i * (L + R) + L); }
    const ref = reference.mlaSparseRef(qNope, qPe, Float64Array.from(roundToDType(rows, 'f16')), kvB, { N, L, P, R, V, T, numBlocks, blockSize: bs, topk },
      { reqOfToken, blockTable, maxBlocksPerSeq: maxB, indices }, scale);
    assertClose('sparse out', out, ref.out, 'f16');
    if (out.subarray(3 * N * V, 4 * N * V).some((x) => x !== 0)) throw new Error('a token with no valid key must give zeros');
    await expectThrows(() => layer.sparseDecode(engine.tensor(qNope, [T, N, P]), engine.tensor(qPe, [T, N, R]), cache,
      { reqOfToken: Int32Array.of(0, 0, 2, 1), indices, topk, blockTable, maxBlocksPerSeq: maxB }), 'MLALayer.sparseDecode: meta.reqOfToken[2]: expected a request row of blockTable in [0, 2), got 2');
    cache.destroy();
  });
}

function cases(name: string, mode: 'decode' | 'prefill', specs: MlaSpec[], tuning: Partial<Engine['tuning']> = SMALL): TestCase {
  return { name, async run({ engine }) { await withTuning(engine, tuning, async () => { for (const s of specs) await checkMla(engine, s, mode); }); } };
}

export const mlaCases = defineCases('mla', [
  {
    name: 'cacheWrite stores [kv_c | k_pe] rows in f32, f16, bf16 and fp8_ds_mla (656-byte rows for L 512, R 64; a partial scale group for L 192 and 64)',
    async run({ engine }) {
      for (const [dtype, L, R] of [['f32', 128, 16], ['bf16', 64, 8], ['fp8_ds_mla', 128, 16], ['fp8_ds_mla', 512, 64], ['fp8_ds_mla', 192, 16], ['fp8_ds_mla', 64, 16]] as const) {
        const T = 5, bs = 4, numBlocks = 3, N = 2, P = 8, V = 8;
        const layer = engine.createMLA({ numHeads: N, kvLoraRank: L, qkNopeHeadDim: P, qkRopeHeadDim: R, vHeadDim: V, scale: 0.1,
          kvBProj: engine.tensor(randn(N * (P + V) * L, 1), [N * (P + V), L]) });
        const cache = engine.createMLACache({ numBlocks, blockSize: bs, kvLoraRank: L, qkRopeHeadDim: R, dtype });
        if (dtype === 'fp8_ds_mla') {
          // FlashMLA's 656-byte rows at L 512; L e4m3 bytes, one f32 scale per (started) 128 values, R bf16.
          const want = L === 512 ? 656 : L + 4 * Math.ceil(L / 128) + 2 * R;
          if (cache.rowWords * 4 !== want) throw new Error(`fp8_ds_mla row of ${cache.rowWords * 4} bytes at L ${L}, expected ${want}`);
        }
        const kvC = randn(T * L, 2, 3), kPe = randn(T * R, 3);
        kvC.fill(0, 2 * L, 2 * L + Math.min(128, L));        // an all-zero group: scale 0, codes 0
        const slots = Int32Array.of(11, -1, 0, 5, 7);
        layer.cacheWrite(engine.tensor(kvC, [T, L]), engine.tensor(kPe, [T, R]), cache, slots);
        const rows = new Float32Array(T * (L + R));
        for (let i = 0; i < T; i++) { rows.set(kvC.subarray(i * L, (i + 1) * L), i * (L + R)); rows.set(kPe.subarray(i * R, (i + 1) * R), i * (L + R) + L); }
        const expected = storedRows(rows, T, L, R, dtype);
        let got: Float64Array;
        if (dtype === 'fp8_ds_mla') {
          const bytes = new Uint8Array((await cache.data.toArray()).buffer as ArrayBuffer);
          got = new Float64Array(numBlocks * bs * (L + R));
          for (let s = 0; s < numBlocks * bs; s++) reference.fp8DsMlaDecodeRow(bytes, s * cache.rowWords * 4, L, R, got, s * (L + R));
        } else {
          got = Float64Array.from(await cache.data.toFloat32());
        }
        slots.forEach((slot, i) => {
          if (slot < 0) return;
          assertClose(`${dtype} L${L} row of token ${i}`, got.subarray(slot * (L + R), (slot + 1) * (L + R)), expected.subarray(i * (L + R), (i + 1) * (L + R)),
            dtype === 'fp8_ds_mla' ? 'fp8e4m3' : dtype);
        });
        // Slot 3 was skipped (token 1 had slot -1) and nothing else was written there: still zero.
        if (got.subarray(3 * (L + R), 4 * (L + R)).some((x) => x !== 0)) throw new Error(`${dtype}: an unwritten slot is not zero`);
        cache.destroy();
      }
    },
  },
  cases('absorbed decode equals the reference and unabsorbed attention (f32, f16, bf16 caches)', 'decode', [
    { ...BASE, seqs: [{ ctx: 20, q: 1 }, { ctx: 0, q: 1 }, { ctx: 7, q: 1 }], cache: 'f32', seed: 1 },
    { ...BASE, seqs: [{ ctx: 33, q: 1 }, { ctx: 2, q: 1 }], cache: 'f16', qDtype: 'f16', seed: 2 },
    { ...BASE, seqs: [{ ctx: 15, q: 1 }], cache: 'bf16', qDtype: 'bf16', seed: 3 },
  ]),
  cases('absorbed decode of many sequences on the row-blocked q absorption and V up-projection (tuning.mlaRowProducts on; 37 sequences: a full and a partial 32-row block; 9: one), f32, f16 and bf16 queries', 'decode', [
    { N: 3, L: 128, P: 16, R: 16, V: 24, bs: 8, seqs: Array.from({ length: 37 }, (_, i) => ({ ctx: (i * 7) % 23, q: 1 })), cache: 'f32', seed: 15 },
    { N: 5, L: 64, P: 8, R: 8, V: 8, bs: 16, seqs: Array.from({ length: 9 }, (_, i) => ({ ctx: (i * 5) % 19, q: 1 })), cache: 'f16', qDtype: 'f16', seed: 16 },
    { N: 2, L: 136, P: 24, R: 8, V: 16, bs: 8, seqs: Array.from({ length: 33 }, (_, i) => ({ ctx: (i * 3) % 11, q: 1 })), cache: 'bf16', qDtype: 'bf16', seed: 17 },
  ], { mlaRowProducts: 'on' }),
  cases('absorbed decode over fp8_ds_mla rows, and long contexts split into partitions merged by LSE', 'decode', [
    { ...BASE, seqs: [{ ctx: 40, q: 1 }, { ctx: 3, q: 1 }], cache: 'fp8_ds_mla', seed: 4 },
    { ...BASE, N: 8, seqs: [{ ctx: 300, q: 1 }, { ctx: 90, q: 1 }], cache: 'f32', seed: 5 },
  ], { ...SMALL, pagedTargetWorkgroups: 64, pagedMinPartition: 64 }),
  cases('other MLA shapes: N 3, L 64, P 8, R 8, V 24; L+R 128 (rows the paged decode kernel must not take); N 16 with a 16 KiB plan; fp8_ds_mla at L 64 and 192 (a partial scale group)', 'decode', [
    { N: 4, L: 64, P: 8, R: 64, V: 8, bs: 16, seqs: [{ ctx: 30, q: 1 }, { ctx: 4, q: 1 }], cache: 'f32', seed: 11 },
    { N: 2, L: 64, P: 8, R: 8, V: 8, bs: 16, seqs: [{ ctx: 12, q: 1 }, { ctx: 2, q: 1 }], cache: 'fp8_ds_mla', seed: 12 },
    { N: 2, L: 192, P: 8, R: 16, V: 8, bs: 8, seqs: [{ ctx: 20, q: 1 }], cache: 'fp8_ds_mla', seed: 13 },
    { N: 3, L: 64, P: 8, R: 8, V: 24, bs: 16, seqs: [{ ctx: 17, q: 1 }, { ctx: 40, q: 1 }], cache: 'f32', seed: 6 },
    { N: 16, L: 128, P: 16, R: 16, V: 16, bs: 16, seqs: [{ ctx: 9, q: 1 }], cache: 'f16', seed: 7 },
  ], { flashSmemBytes: 16384 }),
  {
    name: 'absorbed decode through MLA\'s own tile at every key-tile width (16 to 1 latent rows staged; 1 to 16 threads a score), 16-head tiles of N 20, partitions',
    async run({ engine, note }) {
      // flashSmemBytes caps the storage, so the planner takes a narrower key tile: each width's score
      // split (SP threads a (head, key) pair) and its partial last tile run. N 20: two 16-head tiles,
      // the second 4 heads full. Contexts over several tiles, split into 64-key partitions.
      const base = { N: 20, L: 128, P: 16, R: 16, V: 24, bs: 16 };
      const seqs = [{ ctx: 150, q: 1 }, { ctx: 0, q: 1 }, { ctx: 37, q: 1 }];
      const widths: number[] = [];
      for (const [i, cap] of [Infinity, 8000, 6000, 3000, 2000].entries()) {
        const tile = planMlaTile(engine.limits, cap, base.L + base.R, base.L);
        if (!tile) { note(`no MLA tile fits ${cap} B`); continue; }
        widths.push(tile.BC);
        const cache = (['f32', 'f16', 'bf16', 'fp8_ds_mla', 'f16'] as const)[i];
        await withTuning(engine, { mlaDecodeTile: 'mla', flashSmemBytes: cap, pagedMinPartition: 64, pagedTargetWorkgroups: 8 },
          () => checkMla(engine, { ...base, seqs, cache, qDtype: cache === 'bf16' ? 'bf16' : 'f32', seed: 40 + i }, 'decode'));
      }
      if (new Set(widths).size < 5) throw new Error(`expected 5 key-tile widths, planned ${widths.join(', ')}`);
      note(`MLA tile key widths run: ${widths.join(', ')}`);
    },
  },
  {
    name: "MLA's own tile, the q absorption and V up-projection with constant-bound loops written out, as wgpu gets them (tuning.unrollLoops 'on')",
    async run({ engine, note }) {
      // (Every suite runs its kernels written out in Deno, where that is the default; here, forced, the
      // same source goes through Dawn. SwiftShader takes minutes to compile it, lavapipe's cold cache
      // minutes for the flash and decode kernels: only MLA's tile, which compiles in seconds.)
      if (swiftShader(engine)) { note(UNROLL_SKIP); return; }
      await withTuning(engine, { mlaDecodeTile: 'mla', unrollLoops: 'on', pagedMinPartition: 64, pagedTargetWorkgroups: 8 },
        () => checkMla(engine, { N: 20, L: 128, P: 16, R: 16, V: 24, bs: 16, seqs: [{ ctx: 150, q: 1 }, { ctx: 37, q: 1 }], cache: 'f16', qDtype: 'f32', seed: 48 }, 'decode'));
    },
  },
  {
    name: 'absorbed decode with several heads a thread (MLA\'s tile with 4 heads a thread: 64-head workgroups; 2 heads: 32): N 70 in a full and a partial tile, N 128, N 40, partitions',
    async run(ctx) {
      const { engine, note } = ctx;
      const base = { L: 128, P: 16, R: 16, V: 24, bs: 16 };
      const seqs = [{ ctx: 150, q: 1 }, { ctx: 0, q: 1 }, { ctx: 37, q: 1 }];
      if (planMlaTile(engine.limits, Infinity, base.L + base.R, base.L, 128)?.RM !== 1) throw new Error('the default MLA tile takes 1 head a thread');
      // Each configuration is its own set of pipelines (3-4 s on SwiftShader): the software runtimes share
      // them (the first two listed twice, so that each of the five runs one); a GPU runs them all.
      const configs = [[70, 4, 'f16', 45], [128, 4, 'fp8_ds_mla', 46], [40, 2, 'bf16', 47]] as const;
      const mine = new Set(spreadOverSoftware(ctx, [0, 1, 2, 0, 1], 'MLA tile with several heads a thread', (i) => `N ${configs[i][0]}, ${configs[i][1]} heads a thread, ${configs[i][2]} cache`));
      for (const [N, rm, cache, seed] of configs.filter((_, i) => mine.has(i))) {
        const tile = planMlaTile(engine.limits, Infinity, base.L + base.R, base.L, N, rm);
        if (!tile) throw new Error(`no MLA tile fits N ${N}`);
        if (tile.RM !== rm) throw new Error(`N ${N}: expected ${rm} heads a thread, planned ${tile.RM}`);
        await withTuning(engine, { mlaDecodeTile: 'mla', mlaHeadsPerThread: rm, pagedMinPartition: 64, pagedTargetWorkgroups: 8 },
          () => checkMla(engine, { ...base, N, seqs, cache, qDtype: cache === 'bf16' ? 'bf16' : 'f32', seed }, 'decode'));
        note(`N ${N}: ${tile.RM} heads a thread, ${tile.BR}-head tiles, ${tile.BC} keys a tile`);
      }
    },
  },
  {
    name: 'absorbed decode on the subgroup-matrix tile: every shape and configuration; DeepSeek\'s 576/512 rows at N 16, 40 and 128, N 20 over padded 144-wide rows; partitions, O rescaled at every move of a max; bf16 and fp8_ds_mla rows; split caches; sparse decode',
    async run({ engine, note }) {
      const deep = { L: 512, P: 16, R: 64, V: 16, bs: 16 };
      const specs: MlaSpec[] = [
        { ...deep, N: 16, seqs: [{ ctx: 150, q: 1 }, { ctx: 0, q: 1 }, { ctx: 37, q: 1 }, { ctx: 300, q: 1 }], cache: 'f16', qDtype: 'f16', seed: 60 },
        { N: 20, L: 128, P: 16, R: 16, V: 24, bs: 16, seqs: [{ ctx: 90, q: 1 }, { ctx: 5, q: 1 }], cache: 'f16', seed: 61 },
        { ...deep, N: 128, seqs: [{ ctx: 70, q: 1 }, { ctx: 33, q: 1 }], cache: 'f16', qDtype: 'f16', seed: 62 },
      ];
      const plan = mlaMmaFor(engine, 576, 512, 16);
      if (!plan) {
        note("MLA's subgroup-matrix tile: not run here (the adapter offers no f16 subgroup matrices); its first spec ran on the tile 'auto' picks");
        await checkMla(engine, specs[0], 'decode');
        return;
      }
      const part = { pagedMinPartition: 64, pagedTargetWorkgroups: 64 };
      // Every shape, then every configuration, on the first two specs; the first also in partitions.
      const ran: string[] = [];
      for (const [si] of MLA_MMA_SHAPES.entries()) {
        const p = planMlaMma(engine.limits, engine.features, 576, 512, 16, Infinity, undefined, si);
        if (!p) { note(`MLA matrix shape ${si} does not fit this adapter`); continue; }
        ran.push(`shape ${si}: ${p.NSG} subgroups, ${p.DSPLIT} D slices, ${p.BR} heads, ${p.BC} keys (${p.smem} B)`);
        await withTuning(engine, { ...part, mlaMmaShape: si }, async () => {
          for (const s of specs.slice(0, 2)) await checkMla(engine, { ...s, seed: s.seed + 10 * si }, 'decode');
        });
      }
      for (const [ci, c] of mmaConfigs(engine.features).entries()) {
        if (!planMlaMma(engine.limits, engine.features, 576, 512, 16, Infinity, ci)) { note(`MLA matrix tile: no shape at ${c.M}×${c.N}×${c.K}`); continue; }
        ran.push(`configuration ${c.M}×${c.N}×${c.K}`);
        await withTuning(engine, { ...part, flashMmaConfig: ci }, () => checkMla(engine, { ...specs[0], seed: 70 + ci }, 'decode'));
      }
      // N 128 and 40 (32-head tiles, the second 8 heads full) and long contexts in partitions; then O
      // rescaled whenever a row's max moves (the lazy threshold at 0, so every partition's later tiles
      // take that path); a cache split across buffers; sparse decode.
      const big = mlaMmaFor(engine, 576, 512, 128)!;
      if (big.BR !== 32) throw new Error(`expected 32-head tiles for 128 heads, planned ${big.BR}`);
      await withTuning(engine, part, async () => {
        await checkMla(engine, specs[2], 'decode');
        await checkMla(engine, { ...specs[2], N: 40, seqs: [{ ctx: 700, q: 1 }, { ctx: 260, q: 1 }], seed: 63 }, 'decode');
      });
      await withTuning(engine, { ...part, mlaMmaTau: 0 }, async () => {
        await checkMla(engine, { ...specs[0], seqs: [{ ctx: 700, q: 1 }, { ctx: 260, q: 1 }], seed: 64 }, 'decode');
        await checkMla(engine, { ...specs[1], seqs: [{ ctx: 400, q: 1 }], seed: 66 }, 'decode');
      });
      // bf16 and FlashMLA's fp8_ds_mla rows, decoded as they are staged (rounded to f16).
      await withTuning(engine, part, async () => {
        const a = await checkMla(engine, { ...specs[0], cache: 'fp8_ds_mla', qDtype: 'f32', seed: 67 }, 'decode');
        const b = await checkMla(engine, { ...specs[2], cache: 'fp8_ds_mla', qDtype: 'f16', seed: 68 }, 'decode');
        note(`fp8_ds_mla rows: ${a.fp8Differs + b.fp8Differs} of ${a.fp8Values + b.fp8Values} stored values an e4m3 step from the reference encoder's (the reference attends over the rows as stored)`);
        await checkMla(engine, { ...specs[1], cache: 'bf16', qDtype: 'bf16', seed: 69 }, 'decode');
      });
      const s1 = specs[1];
      const split = { ...s1, seqs: [{ ctx: 150, q: 1 }, { ctx: 0, q: 1 }, { ctx: 37, q: 1 }], minParts: 4 };
      await withTuning(engine, { ...part, cacheBindingBytes: 3 * s1.bs * (s1.L + s1.R) * 2 }, () => checkMla(engine, { ...split, seed: 65 }, 'decode'));
      await withTuning(engine, { ...part, cacheBindingBytes: 3 * s1.bs * reference.fp8DsMlaRowBytes(s1.L, s1.R) }, () =>
        checkMla(engine, { ...split, cache: 'fp8_ds_mla', seed: 71 }, 'decode'));
      await checkSparse(engine, {});
      note(`MLA matrix tile: ${ran.join('; ')}`);
    },
  },
  {
    name: 'absorbed decode through the flash tile: each row-sized tile that fits (16 and 32 heads a tile, 32 lanes a row; portable reductions), batch 5 in the per-head products',
    async run({ engine, note }) {
      // Latent width 136 (> 128: the wide-output rule that picks these tiles; a partial DVC chunk), V 24
      // (a partial column tile of the V up-projection), 5 sequences (two row blocks of the per-head
      // products), contexts over several key tiles and split into partitions. Tiles of 16 rows take
      // 16 heads, tiles of 32 take 20 (rows past the heads idle).
      const specs: MlaSpec[] = [
        { N: 16, L: 136, P: 16, R: 8, V: 24, bs: 16, seqs: [{ ctx: 130, q: 1 }, { ctx: 0, q: 1 }, { ctx: 64, q: 1 }, { ctx: 200, q: 1 }, { ctx: 17, q: 1 }], cache: 'f16', qDtype: 'f16', seed: 31 },
        { N: 20, L: 136, P: 8, R: 8, V: 16, bs: 8, seqs: [{ ctx: 90, q: 1 }, { ctx: 3, q: 1 }], cache: 'fp8_ds_mla', seed: 32 },
      ];
      const ran: string[] = [];
      for (let rowGrid = 0; rowGrid < ROW_GRIDS.length; rowGrid++) {
        const g = ROW_GRIDS[rowGrid];
        const spec = specs[g.TY * g.TM === 16 ? 0 : 1];
        const fits = planFlash(engine.limits, engine.features, spec.L + spec.R, spec.L, 'portable', Infinity, undefined, 'f32', { rows: spec.N, rowGrid });
        if (!fits || fits.TX !== g.TX || fits.TY !== g.TY || fits.TN !== g.TN) {
          note(`row tile ${rowGrid} (${g.TY * g.TM} rows × ${g.TX * g.TN} keys) needs more than this adapter's ${engine.limits.maxComputeWorkgroupStorageSize} B of workgroup storage: not run here`);
          continue;
        }
        ran.push(`${g.TY * g.TM}×${g.TX * g.TN}`);
        await withTuning(engine, { mlaDecodeTile: 'flash', flashVariant: 'portable', flashRowGrid: rowGrid, pagedMinPartition: 64, pagedTargetWorkgroups: 16 }, () => checkMla(engine, spec, 'decode'));
      }
      if (ran.length === 0) throw new Error('no row-sized tile fits this adapter: the case would not test them');
      note(`row tiles run: ${ran.join(', ')}`);
    },
  },
  cases('prefill with cached context in chunks, merged by LSE, equals the reference (f32, fp8_ds_mla)', 'prefill', [
    { ...BASE, seqs: [{ ctx: 0, q: 6 }, { ctx: 21, q: 3 }, { ctx: 5, q: 1 }], cache: 'f32', seed: 8 },
    { ...BASE, seqs: [{ ctx: 17, q: 4 }], cache: 'fp8_ds_mla', seed: 9 },
    { ...BASE, L: 64, seqs: [{ ctx: 6, q: 3 }], cache: 'fp8_ds_mla', seed: 14 },
    { ...BASE, seqs: [{ ctx: 9, q: 2 }], cache: 'bf16', qDtype: 'bf16', seed: 10 },
  ], { ...SMALL, mlaPrefillChunk: 8 }),
  {
    name: 'a latent cache past one storage binding: split across buffers, written per part; decode (own tile and flash tile), prefill chunks and sparse decode read every part',
    async run({ engine }) {
      // engine.tuning.cacheBindingBytes caps a binding at 3 blocks; shuffled block tables interleave the parts.
      const rowBytes = (c: MLACacheDType, L: number, R: number) => (c === 'fp8_ds_mla' ? reference.fp8DsMlaRowBytes(L, R) : (L + R) * (c === 'f32' ? 4 : 2));
      const bind = (s: MlaSpec) => 3 * s.bs * rowBytes(s.cache, s.L, s.R);
      const dec: MlaSpec = { N: 20, L: 128, P: 16, R: 16, V: 24, bs: 16, seqs: [{ ctx: 150, q: 1 }, { ctx: 0, q: 1 }, { ctx: 37, q: 1 }], cache: 'f16', minParts: 4, seed: 95 };
      const fp8: MlaSpec = { ...dec, cache: 'fp8_ds_mla', seed: 96 };
      const pre: MlaSpec = { ...BASE, seqs: [{ ctx: 21, q: 3 }, { ctx: 0, q: 4 }, { ctx: 30, q: 1 }], cache: 'bf16', minParts: 3, seed: 97 };
      for (const [spec, mode, extra] of [[dec, 'decode', {}], [fp8, 'decode', {}], [dec, 'decode', { mlaDecodeTile: 'flash' }], [pre, 'prefill', { mlaPrefillChunk: 8 }]] as const) {
        await withTuning(engine, { ...SMALL, pagedMinPartition: 64, pagedTargetWorkgroups: 8, ...extra, cacheBindingBytes: bind(spec) }, () => checkMla(engine, spec, mode));
      }
      // Sparse decode views the cache as blocks of one slot: each part's range in slots.
      await withTuning(engine, { ...SMALL, cacheBindingBytes: 2 * 4 * rowBytes('f16', BASE.L, BASE.R) }, async () => {
        const { N, L, P, R, V } = BASE;
        const bs = 4, maxB = 4, numBlocks = 7, topk = 6, T = 2;
        const kvB = randn(N * (P + V) * L, 98, 0.2);
        const layer = engine.createMLA({ numHeads: N, kvLoraRank: L, qkNopeHeadDim: P, qkRopeHeadDim: R, vHeadDim: V, scale: 0.2, kvBProj: engine.tensor(kvB, [N * (P + V), L]) });
        const cache = engine.createMLACache({ numBlocks, blockSize: bs, kvLoraRank: L, qkRopeHeadDim: R, dtype: 'f16' });
        if (cache.parts.length !== 4) throw new Error(`expected 4 buffers, got ${cache.parts.length}`);
        const kvC = randn(numBlocks * bs * L, 99), kPe = randn(numBlocks * bs * R, 100);
        layer.cacheWrite(engine.tensor(kvC, [numBlocks * bs, L]), engine.tensor(kPe, [numBlocks * bs, R]), cache, Int32Array.from({ length: numBlocks * bs }, (_, i) => i));
        const blockTable = Int32Array.of(6, 1, 4, 2, /* req 1 */ 3, 0, 5, -1);
        const indices = Int32Array.of(0, 5, 9, 14, 3, -1, /* token 1 */ 1, 6, 11, 4, 12, 2);
        const reqOfToken = Int32Array.of(0, 1);
        const qNope = randn(T * N * P, 101), qPe = randn(T * N * R, 102);
        const out = await layer.sparseDecode(engine.tensor(qNope, [T, N, P]), engine.tensor(qPe, [T, N, R]), cache, { reqOfToken, indices, topk, blockTable, maxBlocksPerSeq: maxB }).toFloat32();
        const rows = new Float32Array(numBlocks * bs * (L + R));
        for (let i = 0; i < numBlocks * bs; i++) { rows.set(kvC.subarray(i * L, (i + 1) * L), i * (L + R)); rows.set(kPe.subarray(i * R, (i + 1) * R), i * (L + R) + L); }
        const ref = reference.mlaSparseRef(qNope, qPe, Float64Array.from(roundToDType(rows, 'f16')), kvB, { N, L, P, R, V, T, numBlocks, blockSize: bs, topk },
          { reqOfToken, blockTable, maxBlocksPerSeq: maxB, indices }, 0.2);
        assertClose('sparse out over a split cache', out, ref.out, 'f16');
        await expectThrows(() => cache.data, 'MLACache.data: this cache of 7 blocks is split across 4 buffers');
        cache.destroy();
      });
    },
  },
  {
    name: 'sparse decode: top-k request-local positions (-1, out of range, duplicates, none valid) equal the reference',
    async run({ engine }) { await checkSparse(engine, SMALL); },
  },
  {
    name: 'validation: weights, cache options, query shapes, metadata',
    async run({ engine }) {
      const kv = engine.tensor(randn(2 * 16 * 64, 1), [32, 64]);
      const o = { numHeads: 2, kvLoraRank: 64, qkNopeHeadDim: 8, qkRopeHeadDim: 8, vHeadDim: 8, scale: 0.1, kvBProj: kv };
      await expectThrows(() => engine.createMLA({ ...o, numHeads: 3 }), 'createMLA: kvBProj: expected shape [N·(P+V), L] = [48, 64]');
      await expectThrows(() => engine.createMLA({ ...o, vHeadDim: 6 }), 'createMLA: vHeadDim: expected a multiple of 8, got 6');
      await expectThrows(() => engine.createMLA({ ...o, scale: Number.NaN }), 'createMLA: scale: expected a finite number, got NaN');
      await expectThrows(() => engine.createMLACache({ numBlocks: 2, blockSize: 4, kvLoraRank: 64, qkRopeHeadDim: 8, dtype: 'fp8e4m3' }),
        "createMLACache: dtype: expected 'f32', 'f16', 'bf16' or 'fp8_ds_mla', got 'fp8e4m3'");
      const layer = engine.createMLA(o);
      const cache = engine.createMLACache({ numBlocks: 2, blockSize: 4, kvLoraRank: 64, qkRopeHeadDim: 8 });
      const other = engine.createMLACache({ numBlocks: 2, blockSize: 4, kvLoraRank: 128, qkRopeHeadDim: 8 });
      const qn = engine.tensor(randn(2 * 2 * 8, 2), [2, 2, 8]), qp = engine.tensor(randn(2 * 2 * 8, 3), [2, 2, 8]);
      const meta = { seqLens: Int32Array.of(3, 4), blockTable: Int32Array.of(0, 1), maxBlocksPerSeq: 1 };
      await expectThrows(() => layer.decode(qn, qp, other, meta), 'MLALayer.decode: cache: expected kvLoraRank 64 and qkRopeHeadDim 8');
      await expectThrows(() => layer.decode(engine.tensor(randn(16, 2), [2, 1, 8]), qp, cache, meta), 'MLALayer.decode: qNope: expected shape [B, N=2, P=8], got [2, 1, 8]');
      await expectThrows(() => layer.decode(qn, engine.tensor(randn(16, 2), [1, 2, 8]), cache, meta), 'MLALayer.decode: qPe: expected shape [B=2, N=2, R=8], got [1, 2, 8]');
      await expectThrows(() => layer.decode(qn, qp, cache, { ...meta, seqLens: Int32Array.of(3, 9) }), 'MLALayer.decode: meta.seqLens[1]: expected at most maxBlocksPerSeq·blockSize = 4 tokens');
      await expectThrows(() => layer.decode(qn, qp, cache, { ...meta, blockTable: Int32Array.of(0, 5) }), 'MLALayer.decode: meta.blockTable[1][0]: expected a block index in [0, 2), got 5');
      await expectThrows(() => layer.cacheWrite(engine.tensor(randn(64, 1), [1, 64]), engine.tensor(randn(8, 1), [1, 8]), cache, Int32Array.of(8)),
        'MLALayer.cacheWrite: slotMapping[0]: expected a slot below 8 (numBlocks·blockSize), or negative for padding, got 8');
      await expectThrows(() => layer.prefill(qn, qp, cache, { queryStartLoc: engine.tensor(Int32Array.of(0, 1, 2), [3], 'i32'), seqLens: Int32Array.of(3, 4), blockTable: Int32Array.of(0, 1), maxBlocksPerSeq: 1 }),
        'MLALayer.prefill: meta: expected host arrays (Int32Array)');
      cache.destroy();
      other.destroy();
    },
  },
]);
