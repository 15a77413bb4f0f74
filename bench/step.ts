// What a caller pays for a serving step's attention, beside what the GPU spends (issue: "a serving step
// whose host cost vanishes"). Per decode shape (Llama-3-8B attention: Hq 32, Hkv 8, D 128, f16 cache,
// block 16):
//   - GPU time of one run (timestamps), with host metadata and with i32-tensor metadata (planned on the
//     GPU: the planning pass is timed apart, it runs once per step);
//   - encode time per run: the host time to record a run (plan made, nothing submitted);
//   - wall time per run in a pipelined loop (record, submit, next: what a model loop does) and one at
//     a time (record, submit, wait);
//   - a decode step of 32 layers: one plan, 32 runs over 32 caches, one submit; steps submitted back to
//     back (wall per step) against the summed GPU time of a step, and the host's part of a step;
//   - buffers and bind groups created in steady state (counted by the runtime: none expected).
// MLA decode (N 16, batch 1, context 4096) the same way through planDecode.
import { encodeF16, randn, type Engine, type PagedKVCache, type Tensor } from 'webinfer';
import { fillRepeating, median, timeOp, type Timing } from './harness';

export interface StepShape { batch: number; context: number; Hq: number; Hkv: number; D: number; bs: number; layers: number }

export interface StepBenchRow {
  shape: StepShape;
  /** GPU ms of one run: host metadata, tensor metadata (run only), the GPU planning pass. */
  gpuHostMs: number; gpuDeviceMs: number; gpuPlanMs: number;
  /** µs of host time to record one run (host metadata; tensor metadata). */
  encodeUs: number; encodeDeviceUs: number;
  /** µs of host time to make a plan (host metadata). */
  planUs: number;
  /** ms per run: pipelined, and one at a time (record, submit, wait). */
  wallPipelinedMs: number; wallSyncMs: number;
  /** The 32-layer step (when run): wall ms per step pipelined, summed GPU ms per step, host ms per step. */
  stepWallMs?: number; stepGpuMs?: number; stepHostMs?: number; stepSyncWallMs?: number;
  /** Created during the steady-state loops (expected 0). */
  createdBuffers: number; createdBindGroups: number;
  error?: string;
}

const hrUs = () => performance.now() * 1000;

/** n back-to-back calls of `fn`, one submit each, then one wait: wall ms per call. */
async function pipelined(engine: Engine, n: number, fn: (i: number) => void): Promise<number> {
  await engine.sync();
  const t0 = performance.now();
  for (let i = 0; i < n; i++) { fn(i); engine.flush(); }
  await engine.sync();
  return (performance.now() - t0) / n;
}

export async function benchStep(engine: Engine, s: StepShape, samples = 7): Promise<StepBenchRow> {
  const { batch: B, context: C, Hq, Hkv, D, bs } = s;
  const row: StepBenchRow = {
    shape: s, gpuHostMs: NaN, gpuDeviceMs: NaN, gpuPlanMs: NaN, encodeUs: NaN, encodeDeviceUs: NaN, planUs: NaN,
    wallPipelinedMs: NaN, wallSyncMs: NaN, createdBuffers: 0, createdBindGroups: 0,
  };
  const blocksPerSeq = Math.ceil(C / bs);
  const numBlocks = B * blocksPerSeq;
  const caches: PagedKVCache[] = [];
  const tensors: Tensor[] = [];
  try {
    const layers = Math.max(2, s.layers);
    const pat = encodeF16(randn(1 << 20, 41));
    for (let l = 0; l < layers; l++) {
      const c = engine.createPagedKVCache({ numBlocks, blockSize: bs, numKvHeads: Hkv, headSize: D, dtype: 'f16' });
      caches.push(c);
      await fillRepeating(engine, c.key.buffer, c.key.byteLength, pat);
      await fillRepeating(engine, c.value.buffer, c.value.byteLength, pat);
    }
    const meta = {
      queryStartLoc: Int32Array.from({ length: B + 1 }, (_, i) => i), seqLens: new Int32Array(B).fill(C),
      blockTable: Int32Array.from({ length: numBlocks }, (_, i) => i), maxBlocksPerSeq: blocksPerSeq,
    };
    const dmeta = {
      queryStartLoc: engine.tensor(meta.queryStartLoc, [B + 1], 'i32'), seqLens: engine.tensor(meta.seqLens, [B], 'i32'),
      blockTable: engine.tensor(meta.blockTable, [B, blocksPerSeq], 'i32'),
    };
    const q = engine.tensor(randn(B * Hq * D, 42), [B, Hq, D], 'f16');
    const outs = [engine.zeros([B, Hq, D], 'f16'), engine.zeros([B, Hq, D], 'f16')];
    tensors.push(dmeta.queryStartLoc, dmeta.seqLens, dmeta.blockTable, q, ...outs);
    const cacheOf = (i: number) => caches[i % caches.length];

    // Plan cost on the host, then GPU time per run.
    const hostPlan = engine.planAttention(meta, { cache: caches[0], numHeads: Hq });
    // A decode step's serving loop knows every sequence has one new token (vLLM's max_query_len).
    const devPlan = engine.planAttention(dmeta, { cache: caches[0], numHeads: Hq, maxQueryLen: 1 });
    const planTimes: number[] = [];
    for (let i = 0; i < 21; i++) {
      const t0 = hrUs();
      const p = engine.planAttention(meta, { cache: caches[0], numHeads: Hq });
      p.run(q, caches[0], { out: outs[0] });   // a plan prepares at its first run: count that too
      planTimes.push(hrUs() - t0);
      p.destroy();
      engine.flush();
    }
    row.planUs = median(planTimes);
    const timing = (t: Timing) => t.medianMs;
    row.gpuHostMs = timing(await timeOp(engine, (i) => hostPlan.run(q, cacheOf(i), { out: outs[i % 2] }), { samples, perSample: 4 }));
    row.gpuDeviceMs = timing(await timeOp(engine, (i) => devPlan.run(q, cacheOf(i), { out: outs[i % 2] }), { samples, perSample: 4 }));
    // The planning pass alone: a fresh plan's first run records it; subtract a run.
    row.gpuPlanMs = Math.max(0, timing(await timeOp(engine, (i) => {
      const p = engine.planAttention(dmeta, { cache: caches[0], numHeads: Hq, maxQueryLen: 1 });
      p.run(q, cacheOf(i), { out: outs[i % 2] });
      p.destroy();
    }, { samples, perSample: 1 })) - row.gpuDeviceMs);

    // Host encode per run, then wall per run; count creations over all of it.
    await engine.sync();
    const c0 = { ...engine.counters };
    const N = 400;
    for (const [which, plan] of [['host', hostPlan], ['device', devPlan]] as const) {
      const per: number[] = [];
      for (let rep = 0; rep < 5; rep++) {
        const t0 = hrUs();
        for (let i = 0; i < N; i++) plan.run(q, cacheOf(i), { out: outs[i % 2] });
        per.push((hrUs() - t0) / N);
        engine.flush();
        await engine.sync();
      }
      if (which === 'host') row.encodeUs = median(per); else row.encodeDeviceUs = median(per);
    }
    row.wallPipelinedMs = await pipelined(engine, 200, (i) => hostPlan.run(q, cacheOf(i), { out: outs[i % 2] }));
    const syncTimes: number[] = [];
    for (let i = 0; i < 50; i++) {
      const t0 = performance.now();
      hostPlan.run(q, cacheOf(i), { out: outs[i % 2] });
      await engine.sync();
      syncTimes.push(performance.now() - t0);
    }
    row.wallSyncMs = median(syncTimes);
    await engine.sync();
    row.createdBuffers = engine.counters.createBuffer - c0.createBuffer;
    row.createdBindGroups = engine.counters.createBindGroup - c0.createBindGroup;

    if (s.layers >= 2) {
      // A decode step: one plan, a run per layer, one submit.
      const step = () => {
        const p = engine.planAttention(meta, { cache: caches[0], numHeads: Hq });
        for (let l = 0; l < s.layers; l++) p.run(q, caches[l], { out: outs[l % 2] });
        p.destroy();
      };
      for (let i = 0; i < 5; i++) { step(); engine.flush(); }
      await engine.sync();
      // Steady state from here: the warm-up made the step plan's buffers and bind groups.
      const s0 = { ...engine.counters };
      const host: number[] = [];
      const steps = 30;
      await engine.sync();
      const t0 = performance.now();
      for (let i = 0; i < steps; i++) {
        const h0 = performance.now();
        step();
        host.push(performance.now() - h0);
        engine.flush();
      }
      await engine.sync();
      row.stepWallMs = (performance.now() - t0) / steps;
      row.stepHostMs = median(host);
      const sw: number[] = [];
      for (let i = 0; i < 10; i++) { const a = performance.now(); step(); await engine.sync(); sw.push(performance.now() - a); }
      row.stepSyncWallMs = median(sw);
      row.createdBuffers += engine.counters.createBuffer - s0.createBuffer;
      row.createdBindGroups += engine.counters.createBindGroup - s0.createBindGroup;
      // The GPU time of a step as it runs: its passes timed whole (span), not kernel by kernel.
      const gpu = await timeOp(engine, () => step(), { samples: 5, perSample: 1, warmup: 2, span: true });
      row.stepGpuMs = gpu.medianMs;
    }
    hostPlan.destroy();
    devPlan.destroy();
  } catch (e) {
    row.error = (e as Error).message;
  } finally {
    for (const t of tensors) t.destroy();
    for (const c of caches) c.destroy();
    await engine.sync();
    engine.pool.trim();
  }
  return row;
}

export interface MlaStepRow { N: number; batch: number; context: number; gpuMs: number; encodeUs: number; wallPipelinedMs: number; wallSyncMs: number; createdBuffers: number; error?: string }

/** MLA decode through planDecode: GPU time, encode per run, wall per run (DeepSeek dims, f16 latent cache). */
export async function benchMlaStep(engine: Engine, N: number, B: number, C: number, samples = 7): Promise<MlaStepRow> {
  const [L, P, R, V, bs] = [512, 128, 64, 128, 64];
  const row: MlaStepRow = { N, batch: B, context: C, gpuMs: NaN, encodeUs: NaN, wallPipelinedMs: NaN, wallSyncMs: NaN, createdBuffers: 0 };
  const tensors: Tensor[] = [];
  const blocksPerSeq = Math.ceil(C / bs);
  let cache;
  try {
    const layer = engine.createMLA({ numHeads: N, kvLoraRank: L, qkNopeHeadDim: P, qkRopeHeadDim: R, vHeadDim: V, scale: 1 / Math.sqrt(P + R),
      kvBProj: engine.tensor(randn(N * (P + V) * L, 51, 0.05), [N * (P + V), L], 'f16') });
    tensors.push(layer.wUK, layer.wUV);
    cache = engine.createMLACache({ numBlocks: B * blocksPerSeq, blockSize: bs, kvLoraRank: L, qkRopeHeadDim: R, dtype: 'f16' });
    await fillRepeating(engine, cache.data.buffer, cache.data.byteLength, encodeF16(randn(1 << 20, 52)));
    const plan = layer.planDecode({ seqLens: new Int32Array(B).fill(C), blockTable: Int32Array.from({ length: B * blocksPerSeq }, (_, i) => i), maxBlocksPerSeq: blocksPerSeq });
    const qNope = engine.tensor(randn(B * N * P, 53), [B, N, P], 'f16'), qPe = engine.tensor(randn(B * N * R, 54), [B, N, R], 'f16');
    const out = engine.zeros([B, N * V], 'f16');
    tensors.push(qNope, qPe, out);
    row.gpuMs = (await timeOp(engine, () => plan.run(qNope, qPe, cache!, { out }), { samples, perSample: 4 })).medianMs;
    await engine.sync();
    const c0 = engine.counters.createBuffer;
    const per: number[] = [];
    for (let rep = 0; rep < 5; rep++) {
      const t0 = hrUs();
      for (let i = 0; i < 200; i++) plan.run(qNope, qPe, cache, { out });
      per.push((hrUs() - t0) / 200);
      engine.flush();
      await engine.sync();
    }
    row.encodeUs = median(per);
    row.wallPipelinedMs = await pipelined(engine, 200, () => plan.run(qNope, qPe, cache!, { out }));
    const sw: number[] = [];
    for (let i = 0; i < 30; i++) { const a = performance.now(); plan.run(qNope, qPe, cache, { out }); await engine.sync(); sw.push(performance.now() - a); }
    row.wallSyncMs = median(sw);
    row.createdBuffers = engine.counters.createBuffer - c0;
    plan.destroy();
  } catch (e) {
    row.error = (e as Error).message;
  } finally {
    for (const t of tensors) t.destroy();
    cache?.destroy();
    await engine.sync();
    engine.pool.trim();
  }
  return row;
}
