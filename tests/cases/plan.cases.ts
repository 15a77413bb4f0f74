// Plan once, run per layer (API.md "A serving step"): one plan over several layers' caches against the
// float64 reference with host and with i32-tensor metadata, the GPU planner word for word equal to the
// host planner, outputs and lse into given tensors, geometry mismatches rejected before any GPU work,
// 100 runs that create no buffer and no bind group, and MLA decode plans over several latent caches.
import { reference, roundToDType, type Engine, type PagedKVCache, type Tensor } from '../../src/index';
import { planOnHost, type PlanRules } from '../../src/attention/plan';
import { assert, assertClose, defineCases, equalArrays, expectThrows, randn, rng, type TestCase, withTuning } from './harness';
import { cacheValues } from './paged.cases';

type CacheDtype = 'f32' | 'f16' | 'fp8e4m3';

interface Batch {
  Hq: number; Hkv: number; D: number; bs: number;
  /** Per sequence: cached context and new tokens. */
  seqs: { ctx: number; q: number }[];
  pad: number;
}

interface Layer { cache: PagedKVCache; k: Float64Array; v: Float64Array }

/** A batch's metadata over shuffled blocks (unused table entries hold junk), and its query. */
function makeBatch(b: Batch, seed: number) {
  const r = rng(seed);
  const S = b.seqs.length;
  const seqLens = Int32Array.from(b.seqs, (s) => s.ctx + s.q);
  const maxB = Math.max(1, ...Array.from(seqLens, (l) => Math.ceil(l / b.bs)));
  const used = Array.from(seqLens, (l) => Math.ceil(l / b.bs)).reduce((x, y) => x + y, 0);
  const numBlocks = used + 2;
  const order = Array.from({ length: numBlocks }, (_, i) => i).sort(() => r() - 0.5);
  const blockTable = new Int32Array(S * maxB).fill(-5);
  let n = 0;
  for (let s = 0; s < S; s++) for (let j = 0; j < Math.ceil(seqLens[s] / b.bs); j++) blockTable[s * maxB + j] = order[n++];
  const queryStartLoc = new Int32Array(S + 1);
  for (let s = 0; s < S; s++) queryStartLoc[s + 1] = queryStartLoc[s] + b.seqs[s].q;
  const T = queryStartLoc[S] + b.pad;
  return { S, T, numBlocks, maxB, meta: { queryStartLoc, seqLens, blockTable, maxBlocksPerSeq: maxB } };
}

/** One layer's cache with random K/V in every slot (written by reshapeAndCache) and the values it holds. */
function makeLayer(engine: Engine, b: Batch, numBlocks: number, dtype: CacheDtype, seed: number, tensors: Tensor[]): Layer {
  const { Hkv, D, bs } = b;
  const kScale = dtype === 'fp8e4m3' ? 0.25 + 0.1 * (seed % 7) : undefined;
  const vScale = dtype === 'fp8e4m3' ? 0.5 + 0.05 * (seed % 5) : undefined;
  const cache = engine.createPagedKVCache({ numBlocks, blockSize: bs, numKvHeads: Hkv, headSize: D, dtype, kScale, vScale });
  const T = numBlocks * bs;
  const kIn = roundToDType(randn(T * Hkv * D, seed), 'f16'), vIn = roundToDType(randn(T * Hkv * D, seed + 1), 'f16');
  const kt = engine.tensor(kIn, [T, Hkv, D], 'f16'), vt = engine.tensor(vIn, [T, Hkv, D], 'f16');
  tensors.push(kt, vt);
  engine.reshapeAndCache(kt, vt, cache, Int32Array.from({ length: T }, (_, i) => i));
  const dims = { T, Hq: b.Hq, Hkv, D, Dv: D, numBlocks, blockSize: bs };
  const stored = reference.reshapeAndCacheRef(cacheValues(kIn, dtype, kScale ?? 1), cacheValues(vIn, dtype, vScale ?? 1),
    Int32Array.from({ length: T }, (_, i) => i), new Float64Array(T * Hkv * D), new Float64Array(T * Hkv * D), dims);
  return { cache, k: stored.keyCache, v: stored.valueCache };
}

function metaTensors(engine: Engine, meta: ReturnType<typeof makeBatch>['meta'], S: number, tensors: Tensor[]) {
  const t = (a: Int32Array, shape: number[]) => { const x = engine.tensor(a, shape, 'i32'); tensors.push(x); return x; };
  return {
    queryStartLoc: t(meta.queryStartLoc, [S + 1]), seqLens: t(meta.seqLens, [S]),
    blockTable: t(meta.blockTable, [S, meta.maxBlocksPerSeq]),
  };
}

/** A decode-heavy batch with a long context (partitions), a prefill, a chunked prefill and padding. */
const MIXED: Batch = { Hq: 8, Hkv: 2, D: 32, bs: 16, seqs: [{ ctx: 300, q: 1 }, { ctx: 0, q: 9 }, { ctx: 40, q: 3 }, { ctx: 70, q: 1 }], pad: 2 };
/** Keeps the software adapters' plans small (the GPU planner launches up to target + base workgroups of each
 *  kernel) while the planner still splits these batches' contexts into partitions. */
const SPLIT = { flashSmemBytes: 8192, pagedTargetWorkgroups: 64, pagedMinPartition: 64 };

async function planOverLayers(engine: Engine, b: Batch, dtype: CacheDtype, metaAs: 'host' | 'device', seed: number,
                              opts: { sinks?: boolean; slidingWindow?: number; maxQueryLen?: number } = {}) {
  const tensors: Tensor[] = [];
  const layers: Layer[] = [];
  try {
    const { S, T, numBlocks, meta } = makeBatch(b, seed);
    for (let l = 0; l < 3; l++) layers.push(makeLayer(engine, b, numBlocks, dtype, seed + 10 * l + 1, tensors));
    const sinks = opts.sinks ? Array.from(randn(b.Hq, seed + 5)) : undefined;
    const m = metaAs === 'host' ? meta : { ...metaTensors(engine, meta, S, tensors), maxBlocksPerSeq: meta.maxBlocksPerSeq };
    const plan = engine.planAttention(m, { cache: layers[0].cache, numHeads: b.Hq, sinks, slidingWindow: opts.slidingWindow, maxQueryLen: opts.maxQueryLen });
    const qdt = dtype === 'f32' ? 'f32' : 'f16';
    for (const [l, layer] of layers.entries()) {
      const qv = roundToDType(randn(T * b.Hq * b.D, seed + 100 + l), qdt);
      const q = engine.tensor(qv, [T, b.Hq, b.D], qdt);
      tensors.push(q);
      const { out, lse } = plan.runWithLse(q, layer.cache);
      tensors.push(out, lse);
      const ref = reference.pagedAttentionRef(qv, layer.k, layer.v, { T, Hq: b.Hq, Hkv: b.Hkv, D: b.D, Dv: b.D, numBlocks, blockSize: b.bs }, meta,
        { sinks, slidingWindow: opts.slidingWindow });
      const valid = meta.queryStartLoc[S];
      const tol = dtype === 'fp8e4m3' ? 'fp8e4m3' : qdt;
      const tag = `layer ${l} ${dtype} ${metaAs} seed ${seed}`;
      assertClose(`out (${tag})`, await out.toFloat32(), ref.out, tol, (i) => Math.floor(i / (b.Hq * b.D)) >= valid);
      assertClose(`lse (${tag})`, await lse.toFloat32(), ref.lse, 'f32', (i) => i % T >= valid);
    }
    plan.destroy();
  } finally {
    for (const t of tensors) t.destroy();
    for (const l of layers) l.cache.destroy();
  }
}

export const planCases: TestCase[] = defineCases('plan', [
  {
    name: 'one plan, run over three layers\' caches (f32, f16, fp8 with per-layer scales): host metadata',
    async run({ engine }) {
      await withTuning(engine, SPLIT, async () => {
        await planOverLayers(engine, MIXED, 'f32', 'host', 300);
        await planOverLayers(engine, MIXED, 'f16', 'host', 310, { sinks: true });
        await planOverLayers(engine, { ...MIXED, seqs: [{ ctx: 90, q: 1 }, { ctx: 20, q: 4 }] }, 'fp8e4m3', 'host', 320, { slidingWindow: 50 });
      });
    },
  },
  {
    name: 'one plan, run over three layers\' caches: i32-tensor metadata planned on the GPU (decode routing, partitions)',
    async run({ engine }) {
      await withTuning(engine, SPLIT, async () => {
        await planOverLayers(engine, MIXED, 'f32', 'device', 330);
        await withTuning(engine, { pagedIndirect: true }, () => planOverLayers(engine, MIXED, 'f32', 'device', 335));
        // A decode-only step whose host promises it (maxQueryLen 1): no prefill kernel at all.
        await planOverLayers(engine, { ...MIXED, seqs: [{ ctx: 300, q: 1 }, { ctx: 9, q: 1 }, { ctx: 0, q: 1 }] }, 'f32', 'device', 336, { maxQueryLen: 1 });
        await planOverLayers(engine, MIXED, 'f16', 'device', 340, { sinks: true });
        await planOverLayers(engine, { ...MIXED, seqs: [{ ctx: 90, q: 1 }, { ctx: 20, q: 4 }] }, 'fp8e4m3', 'device', 350, { slidingWindow: 50 });
      });
    },
  },
  {
    name: 'the GPU planner writes, word for word, the plan the host planner makes from the same metadata',
    async run({ engine, note }) {
      const batches: [string, Batch, Partial<Engine['tuning']>][] = [
        ['mixed, partitions', MIXED, SPLIT],
        ['mixed, partitions, indirect dispatch', MIXED, { ...SPLIT, pagedIndirect: true }],
        ['decodes only, long contexts', { Hq: 8, Hkv: 2, D: 32, bs: 16, seqs: [{ ctx: 500, q: 1 }, { ctx: 33, q: 1 }, { ctx: 0, q: 1 }], pad: 0 }, SPLIT],
        ['no partitions (target reached)', MIXED, { ...SPLIT, pagedTargetWorkgroups: 1 }],
        ['portable decode kernel, forced partitions', { Hq: 4, Hkv: 1, D: 32, bs: 16, seqs: [{ ctx: 700, q: 1 }, { ctx: 5, q: 2 }], pad: 1 },
          { ...SPLIT, pagedDecodeVariant: 'portable', pagedDecodeWG: 64 }],
        ['many sequences (more than one per invocation)', { Hq: 4, Hkv: 2, D: 16, bs: 4, pad: 3,
          seqs: Array.from({ length: 300 }, (_, i) => ({ ctx: (i * 37) % 50, q: 1 + (i % 3 === 0 ? 2 : 0) })) }, SPLIT],
      ];
      for (const [what, b, tuning] of batches) {
        await withTuning(engine, tuning, async () => {
          const tensors: Tensor[] = [];
          try {
            const { S, T, numBlocks, meta } = makeBatch(b, 400);
            const layer = makeLayer(engine, b, numBlocks, 'f32', 401, tensors);
            const plan = engine.planAttention({ ...metaTensors(engine, meta, S, tensors), maxBlocksPerSeq: meta.maxBlocksPerSeq },
              { cache: layer.cache, numHeads: b.Hq });
            const q = engine.tensor(randn(T * b.Hq * b.D, 402), [T, b.Hq, b.D]);
            tensors.push(q, plan.run(q, layer.cache));
            layer.cache.destroy();
            const pb = plan.plan.planBuffer()!;
            const gpu = new Int32Array(await engine.readBuffer(pb.buffer, 4 * pb.layout.words));
            const host = planOnHost(pb.rules as PlanRules, meta.queryStartLoc, meta.seqLens, meta.blockTable, pb.layout);
            const nF = host.image[0], nD = host.image[1];
            assert(host.nFlash === nF && host.nDecode === nD, `${what}: the host's capacities hold its items`);
            const L = pb.layout;
            equalArrays(`${what}: header and metadata`, gpu.subarray(0, L.offFlash), host.image.subarray(0, L.offFlash));
            equalArrays(`${what}: flash items`, gpu.subarray(L.offFlash, L.offFlash + 8 * nF), host.image.subarray(L.offFlash, L.offFlash + 8 * nF));
            equalArrays(`${what}: decode items`, gpu.subarray(L.offDecode, L.offDecode + 8 * nD), host.image.subarray(L.offDecode, L.offDecode + 8 * nD));
            note(`GPU plan ${what}: ${nF} flash items, ${nD} decode items, up to ${host.maxNP} partitions`);
            plan.destroy();
          } finally {
            for (const t of tensors) t.destroy();
          }
        });
      }
    },
  },
  {
    name: 'runs write into given out and lse tensors; runWithLse equals run; a query read from wider rows (qRowStride)',
    async run({ engine }) {
      await withTuning(engine, SPLIT, async () => {
        const tensors: Tensor[] = [];
        try {
          const { T, numBlocks, meta } = makeBatch(MIXED, 500);
          const layer = makeLayer(engine, MIXED, numBlocks, 'f32', 501, tensors);
          const plan = engine.planAttention(meta, { cache: layer.cache, numHeads: MIXED.Hq });
          const q = engine.tensor(randn(T * MIXED.Hq * MIXED.D, 502), [T, MIXED.Hq, MIXED.D]);
          const out = engine.tensor(new Float32Array(T * MIXED.Hq * MIXED.D).fill(NaN), [T, MIXED.Hq, MIXED.D]);
          const lse = engine.tensor(new Float32Array(MIXED.Hq * T).fill(NaN), [MIXED.Hq, T]);
          tensors.push(q, out, lse);
          const r = plan.runWithLse(q, layer.cache, { out, lse });
          assert(r.out === out && r.lse === lse, 'the given tensors come back');
          const again = plan.run(q, layer.cache);
          tensors.push(again);
          const ref = reference.pagedAttentionRef(await q.toFloat32(), layer.k, layer.v,
            { T, Hq: MIXED.Hq, Hkv: MIXED.Hkv, D: MIXED.D, Dv: MIXED.D, numBlocks, blockSize: MIXED.bs }, meta);
          const valid = meta.queryStartLoc[meta.seqLens.length];
          const skip = (i: number) => Math.floor(i / (MIXED.Hq * MIXED.D)) >= valid;
          assertClose('out into the given tensor', await out.toFloat32(), ref.out, 'f32', skip);
          assertClose('lse into the given tensor', await lse.toFloat32(), ref.lse, 'f32', (i) => i % T >= valid);
          equalArrays('run equals runWithLse', Array.from(await again.toFloat32()).filter((_, i) => !skip(i)),
            Array.from(await out.toFloat32()).filter((_, i) => !skip(i)));
          // The query as the first Hq·D elements of wider rows (a fused q|k|v projection's): same result.
          const W = MIXED.Hq * MIXED.D + 24;
          const qv = await q.toFloat32();
          const wide = randn(T * W, 503);
          for (let t = 0; t < T; t++) wide.set(qv.subarray(t * MIXED.Hq * MIXED.D, (t + 1) * MIXED.Hq * MIXED.D), t * W);
          const fused = engine.tensor(wide, [T, W]);
          const strided = plan.run(fused, layer.cache, { qRowStride: W });
          tensors.push(fused, strided);
          equalArrays('query read from wider rows (qRowStride)', Array.from(await strided.toFloat32()).filter((_, i) => !skip(i)),
            Array.from(await out.toFloat32()).filter((_, i) => !skip(i)));
          await expectThrows(() => plan.run(fused, layer.cache, { qRowStride: W - 8 }), 'AttentionPlan.run: query: expected shape [T, qRowStride=');
          plan.destroy();
          layer.cache.destroy();
        } finally {
          for (const t of tensors) t.destroy();
        }
      });
    },
  },
  {
    name: 'a run against another geometry, a wrong query or output, or a destroyed plan fails before any GPU work',
    async run({ engine }) {
      const tensors: Tensor[] = [];
      const b = MIXED;
      const { T, numBlocks, meta } = makeBatch(b, 600);
      const layer = makeLayer(engine, b, numBlocks, 'f32', 601, tensors);
      const caches = [
        engine.createPagedKVCache({ numBlocks: numBlocks + 1, blockSize: b.bs, numKvHeads: b.Hkv, headSize: b.D }),
        engine.createPagedKVCache({ numBlocks, blockSize: b.bs, numKvHeads: b.Hkv, headSize: b.D, dtype: 'f16' }),
        engine.createPagedKVCache({ numBlocks, blockSize: b.bs / 2, numKvHeads: b.Hkv, headSize: b.D }),
      ];
      try {
        const plan = engine.planAttention(meta, { cache: layer.cache, numHeads: b.Hq });
        const q = engine.tensor(randn(T * b.Hq * b.D, 602), [T, b.Hq, b.D]);
        tensors.push(q);
        await engine.sync();
        const before = engine.counters.dispatch;
        for (const c of caches) await expectThrows(() => plan.run(q, c), "AttentionPlan.run: cache: expected the plan's geometry");
        await expectThrows(() => plan.run(engine.tensor(randn(T * 4 * b.D, 603), [T, 4, b.D]), layer.cache), 'AttentionPlan.run: query: expected shape [T, Hq=8, D=32]');
        await expectThrows(() => plan.run(engine.tensor(randn(2 * b.Hq * b.D, 604), [2, b.Hq, b.D]), layer.cache), 'query: expected at least queryStartLoc[S] = 14 tokens');
        await expectThrows(() => plan.run(q, layer.cache, { out: engine.zeros([T, b.Hq, 16]) }), 'AttentionPlan.run: o.out: expected an f32, f16 or bf16 tensor of shape');
        await expectThrows(() => plan.runWithLse(q, layer.cache, { lse: engine.zeros([T, b.Hq]) }), 'AttentionPlan.runWithLse: o.lse: expected an f32 tensor of shape [Hq=8');
        assert(engine.counters.dispatch === before, `nothing was recorded (${engine.counters.dispatch - before} dispatches)`);
        await expectThrows(() => engine.planAttention(meta, { cache: layer.cache, numHeads: 5 }), 'planAttention: o.numHeads: expected a multiple of the cache\'s Hkv=2, got 5');
        await expectThrows(() => engine.planAttention({ ...meta, blockTable: meta.blockTable.map((x) => x + numBlocks) }, { cache: layer.cache, numHeads: b.Hq }),
          'planAttention: meta.blockTable[0][0]: expected a block index in [0,');
        await expectThrows(() => engine.planAttention(meta, { cache: layer.cache, numHeads: b.Hq, sinks: [1, 2] }), 'planAttention: opts.sinks: expected 8 values');
        plan.destroy();
        await expectThrows(() => plan.run(q, layer.cache), 'the plan was destroyed');
        await engine.sync();
      } finally {
        for (const t of tensors) t.destroy();
        for (const c of [...caches, layer.cache]) c.destroy();
      }
    },
  },
  {
    name: '100 runs over two layers create no buffer and no bind group (host and tensor metadata; given and pooled outputs)',
    async run({ engine }) {
      // A small target keeps the GPU-planned runs' grids small on software adapters (still split: 3 parts).
      await withTuning(engine, { ...SPLIT, pagedTargetWorkgroups: 8 }, async () => {
        for (const metaAs of ['host', 'device'] as const) {
          const tensors: Tensor[] = [];
          // Small, so 200 runs stay quick on a software adapter; long enough to be split and merged.
          const b: Batch = { Hq: 4, Hkv: 1, D: 16, bs: 16, seqs: [{ ctx: 200, q: 1 }, { ctx: 0, q: 3 }], pad: 1 };
          const { S, T, numBlocks, meta } = makeBatch(b, 700);
          const layers = [makeLayer(engine, b, numBlocks, 'f32', 701, tensors), makeLayer(engine, b, numBlocks, 'f32', 702, tensors)];
          try {
            const m = metaAs === 'host' ? meta : { ...metaTensors(engine, meta, S, tensors), maxBlocksPerSeq: meta.maxBlocksPerSeq };
            const plan = engine.planAttention(m, { cache: layers[0].cache, numHeads: b.Hq });
            const q = engine.tensor(randn(T * b.Hq * b.D, 703), [T, b.Hq, b.D]);
            const outs = [engine.zeros([T, b.Hq, b.D]), engine.zeros([T, b.Hq, b.D])];
            tensors.push(q, ...outs);
            // Warm-up as the loops below run: the plan prepares, pipelines compile, bind groups are made,
            // the pool fills with a step's worth of outputs.
            for (let i = 0; i < 20; i++) {
              plan.run(q, layers[i % 2].cache, { out: outs[i % 2] });
              plan.run(q, layers[i % 2].cache).destroy();
              if (i % 10 === 9) engine.flush();
            }
            await engine.sync();
            const c0 = { ...engine.counters };
            for (let i = 0; i < 50; i++) plan.run(q, layers[i % 2].cache, { out: outs[i % 2] });
            engine.flush();
            for (let i = 0; i < 50; i++) {
              plan.run(q, layers[i % 2].cache).destroy();
              if (i % 10 === 9) engine.flush();   // a step's submission: released outputs come back to the pool
            }
            await engine.sync();
            const c1 = engine.counters;
            assert(c1.createBuffer === c0.createBuffer, `${metaAs}: 100 runs created ${c1.createBuffer - c0.createBuffer} buffers`);
            assert(c1.createBindGroup === c0.createBindGroup, `${metaAs}: 100 runs created ${c1.createBindGroup - c0.createBindGroup} bind groups`);
            // Each run: the decode kernel, the flash kernel and the merge of the split context.
            assert(c1.dispatch - c0.dispatch === 300, `${metaAs}: 100 runs recorded ${c1.dispatch - c0.dispatch} dispatches, expected 300`);
            // And the last output is still right.
            const ref = reference.pagedAttentionRef(await q.toFloat32(), layers[1].k, layers[1].v,
              { T, Hq: b.Hq, Hkv: b.Hkv, D: b.D, Dv: b.D, numBlocks, blockSize: b.bs }, meta);
            const valid = meta.queryStartLoc[S];
            assertClose(`${metaAs}: output after 100 runs`, await outs[1].toFloat32(), ref.out, 'f32', (i) => Math.floor(i / (b.Hq * b.D)) >= valid);
            plan.destroy();
          } finally {
            for (const t of tensors) t.destroy();
            for (const l of layers) l.cache.destroy();
          }
        }
      });
    },
  },
  {
    name: 'MLA: one decode plan over three layers (their own absorbed weights and latent caches; host and tensor metadata), and a sparse decode plan',
    async run({ engine }) {
      const [N, L, P, R, V, bs] = [4, 32, 16, 8, 16, 8];
      const seqLens = Int32Array.of(70, 5, 33);
      const B = seqLens.length;
      const maxB = Math.max(...Array.from(seqLens, (l) => Math.ceil(l / bs)));
      const numBlocks = B * maxB + 1;
      const r = rng(800);
      const order = Array.from({ length: numBlocks }, (_, i) => i).sort(() => r() - 0.5);
      const blockTable = new Int32Array(B * maxB).fill(-1);
      let n = 0;
      for (let s = 0; s < B; s++) for (let j = 0; j < Math.ceil(seqLens[s] / bs); j++) blockTable[s * maxB + j] = order[n++];
      const tensors: Tensor[] = [];
      const t = (x: Float32Array | Int32Array, shape: number[]) => { const y = x instanceof Int32Array ? engine.tensor(x, shape, 'i32') : engine.tensor(x, shape); tensors.push(y); return y; };
      const scale = 1 / Math.sqrt(P + R);
      const kvB = randn(N * (P + V) * L, 801, 0.2);
      const layer = engine.createMLA({ numHeads: N, kvLoraRank: L, qkNopeHeadDim: P, qkRopeHeadDim: R, vHeadDim: V, scale, kvBProj: t(kvB, [N * (P + V), L]) });
      // Layers 1 and 2 of a model: the same shape, other weights; layer 0's plan runs them all.
      const kvBs = [kvB, randn(N * (P + V) * L, 802, 0.2), randn(N * (P + V) * L, 803, 0.2)];
      const layers = [layer, ...kvBs.slice(1).map((w) => engine.createMLA({ numHeads: N, kvLoraRank: L, qkNopeHeadDim: P, qkRopeHeadDim: R, vHeadDim: V, scale, kvBProj: t(w, [N * (P + V), L]) }))];
      const slotsN = numBlocks * bs;
      const caches = [0, 1, 2].map((l) => {
        const cache = engine.createMLACache({ numBlocks, blockSize: bs, kvLoraRank: L, qkRopeHeadDim: R });
        const kvC = randn(slotsN * L, 810 + l), kPe = randn(slotsN * R, 820 + l);
        layer.cacheWrite(t(kvC, [slotsN, L]), t(kPe, [slotsN, R]), cache, Int32Array.from({ length: slotsN }, (_, i) => i));
        const rows = new Float64Array(slotsN * (L + R));
        for (let i = 0; i < slotsN; i++) { rows.set(kvC.subarray(i * L, (i + 1) * L), i * (L + R)); rows.set(kPe.subarray(i * R, (i + 1) * R), i * (L + R) + L); }
        return { cache, rows };
      });
      const d = { N, L, P, R, V, numBlocks, blockSize: bs };
      try {
        for (const metaAs of ['host', 'device'] as const) {
          const meta = metaAs === 'host' ? { seqLens, blockTable, maxBlocksPerSeq: maxB } : { seqLens: t(seqLens, [B]), blockTable: t(blockTable, [B, maxB]) };
          const plan = layer.planDecode(meta);
          for (const [l, c] of caches.entries()) {
            const qNope = randn(B * N * P, 830 + l), qPe = randn(B * N * R, 840 + l);
            const out = await plan.runLayer(layers[l], t(qNope, [B, N, P]), t(qPe, [B, N, R]), c.cache).toFloat32();
            const ref = reference.mlaDecodeRef(qNope, qPe, c.rows, kvBs[l], { ...d, B }, { seqLens, blockTable, maxBlocksPerSeq: maxB }, scale);
            assertClose(`MLA decode plan, layer ${l}, ${metaAs} metadata`, out, ref.out, 'f32');
          }
          plan.destroy();
        }
        const topk = 6;
        const reqOfToken = Int32Array.of(0, 2, 1);
        const indices = Int32Array.from({ length: 3 * topk }, (_, i) => (i % topk === 5 ? -1 : (i * 11) % 30));
        const sparse = layer.planSparseDecode({ reqOfToken, indices, topk, blockTable, maxBlocksPerSeq: maxB });
        for (const [l, c] of caches.entries()) {
          const qNope = randn(3 * N * P, 850 + l), qPe = randn(3 * N * R, 860 + l);
          const out = await sparse.run(t(qNope, [3, N, P]), t(qPe, [3, N, R]), c.cache).toFloat32();
          const ref = reference.mlaSparseRef(qNope, qPe, c.rows, kvB, { ...d, T: 3, topk }, { reqOfToken, indices, blockTable, maxBlocksPerSeq: maxB }, scale);
          assertClose(`MLA sparse decode plan, layer ${l}`, out, ref.out, 'f32');
        }
        sparse.destroy();
        const other = engine.createMLACache({ numBlocks: numBlocks + 3, blockSize: bs, kvLoraRank: L, qkRopeHeadDim: R });
        const p2 = layer.planDecode({ seqLens, blockTable, maxBlocksPerSeq: maxB });
        p2.run(t(randn(B * N * P, 870), [B, N, P]), t(randn(B * N * R, 871), [B, N, R]), caches[0].cache).destroy();
        await expectThrows(() => p2.run(t(randn(B * N * P, 872), [B, N, P]), t(randn(B * N * R, 873), [B, N, R]), other),
          "MLADecodePlan.run: cache: expected the plan's geometry (numBlocks");
        const wider = engine.createMLA({ numHeads: N, kvLoraRank: L, qkNopeHeadDim: P, qkRopeHeadDim: R, vHeadDim: V, scale: 2 * scale, kvBProj: t(kvB, [N * (P + V), L]) });
        tensors.push(...[...layers, wider].flatMap((x) => [x.wUK, x.wUV]));
        await expectThrows(() => p2.runLayer(wider, t(randn(B * N * P, 874), [B, N, P]), t(randn(B * N * R, 875), [B, N, R]), caches[0].cache),
          "MLADecodePlan.run: layer: expected an MLA layer of the plan's shape");
        p2.destroy();
        other.destroy();
      } finally {
        for (const x of tensors) x.destroy();
        for (const c of caches) c.cache.destroy();
      }
    },
  },
]);
