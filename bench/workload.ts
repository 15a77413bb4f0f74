// The built-in default workload behind `npm start`: every kernel family on a few representative shapes,
// each checked against the float64 reference, then timed: attention (dense SDPA with both kernels, paged
// attention over a mixed batch, MLA decode) here, the layer kernels (GEMV and GEMM per weight type,
// RMSNorm, RoPE, MoE, argmax and sampling) in bench/start_ops.ts. The benchmark harness (issue 6) and
// the demo grow from the same case shape: setup, run, check, FLOPs and minimum bytes. Then a small
// model generates (runModelWorkload). Sizes suit a CPU adapter: the whole of `npm start` takes a few
// minutes on lavapipe or SwiftShader.
import {
  TOLERANCES, checkpointSchema, compareToReference, createRandomModel, encodeSafetensors, loadSafetensors, parseConfig, randn, reference, rng, roundToDType,
  type EncodableTensor, type Engine, type Model, type SdpaBackend, type Tensor,
} from 'webinfer';
import { SMALL_LLAMA } from './model';
import { failedRow, layerCases, timeCalls, type Say, type WorkloadCase, type WorkloadRow } from './start_ops';

export type { Say, WorkloadCase, WorkloadRow } from './start_ops';

export interface SdpaShape {
  B: number; Hq: number; Hkv: number; Lq: number; Lk: number; D: number; Dv: number;
  dtype: 'f32' | 'f16' | 'bf16'; causal?: boolean; softcap?: number; slidingWindow?: number;
}

const BYTES = { f32: 4, f16: 2, bf16: 2 } as const;

/** Multiply-adds of QKᵀ and PV counted as 2 FLOPs each, over the visible (causal) part. */
export function sdpaFlops(s: SdpaShape): number {
  let pairs = 0;
  for (let i = 0; i < s.Lq; i++) {
    const iAbs = i + s.Lk - s.Lq;
    const lo = s.slidingWindow ? Math.max(0, iAbs - s.slidingWindow + 1) : 0;
    const hi = s.causal ? Math.min(s.Lk - 1, iAbs) : s.Lk - 1;
    if (hi >= lo) pairs += hi - lo + 1;
  }
  return 2 * s.B * s.Hq * pairs * (s.D + s.Dv);
}

/** The least a kernel must move: read q, k, v once, write out. */
export function sdpaMinBytes(s: SdpaShape): number {
  const e = BYTES[s.dtype];
  return e * s.B * (s.Hq * s.Lq * s.D + s.Hkv * s.Lk * (s.D + s.Dv) + s.Hq * s.Lq * s.Dv);
}

/** Prefill (causal, both kernels), a Gemma-2-style GQA prefill (softcap, sliding window) and a decode step. */
export const DEFAULT_SDPA_SHAPES: { shape: SdpaShape; backends: SdpaBackend[] }[] = [
  { shape: { B: 1, Hq: 8, Hkv: 8, Lq: 128, Lk: 128, D: 64, Dv: 64, dtype: 'f32', causal: true }, backends: ['flash', 'naive'] },
  { shape: { B: 1, Hq: 8, Hkv: 2, Lq: 128, Lk: 256, D: 128, Dv: 128, dtype: 'bf16', causal: true, softcap: 30, slidingWindow: 96 }, backends: ['flash'] },
  { shape: { B: 4, Hq: 16, Hkv: 4, Lq: 1, Lk: 512, D: 64, Dv: 64, dtype: 'f16' }, backends: ['auto'] },
];

function shapeLabel(s: SdpaShape): string {
  const opts = [s.causal && 'causal', s.softcap && `softcap ${s.softcap}`, s.slidingWindow && `window ${s.slidingWindow}`].filter(Boolean);
  return `B${s.B} Hq${s.Hq} Hkv${s.Hkv} Lq${s.Lq} Lk${s.Lk} D${s.D}${opts.length ? ` ${opts.join(' ')}` : ''}`;
}

/** Checks one SDPA shape against the reference, then times `iters` calls per sample. */
export async function runSdpaCase(engine: Engine, s: SdpaShape, backend: SdpaBackend, opts: { samples?: number; seed?: number; say?: Say } = {}): Promise<WorkloadRow> {
  const seed = opts.seed ?? 1;
  const q = roundToDType(randn(s.B * s.Hq * s.Lq * s.D, seed), s.dtype);
  const k = roundToDType(randn(s.B * s.Hkv * s.Lk * s.D, seed + 1), s.dtype);
  const v = roundToDType(randn(s.B * s.Hkv * s.Lk * s.Dv, seed + 2), s.dtype);
  const tensors: Tensor[] = [
    engine.tensor(q, [s.B, s.Hq, s.Lq, s.D], s.dtype),
    engine.tensor(k, [s.B, s.Hkv, s.Lk, s.D], s.dtype),
    engine.tensor(v, [s.B, s.Hkv, s.Lk, s.Dv], s.dtype),
  ];
  const [tq, tk, tv] = tensors;
  const attn = { causal: s.causal, softcap: s.softcap, slidingWindow: s.slidingWindow };
  const row: WorkloadRow = {
    op: 'sdpa', shape: shapeLabel(s), dtype: s.dtype, backend, worst: NaN, pass: false, medianMs: NaN, gflops: NaN, gbps: NaN,
  };
  try {
    opts.say?.('first run (compiles its pipelines)');
    const out = engine.sdpa(tq, tk, tv, { ...attn, backend });
    const got = await out.toFloat32();
    out.destroy();
    opts.say?.('the float64 reference');
    const ref = reference.sdpaRef(q, k, v, s, attn);
    const c = compareToReference(got, ref.out, TOLERANCES[s.dtype]);
    row.worst = c.badIndex >= 0 ? Infinity : c.worst;
    row.pass = c.pass;

    opts.say?.('timing');
    row.medianMs = await timeCalls(engine, () => engine.sdpa(tq, tk, tv, { ...attn, backend }), opts.samples);
    row.gflops = sdpaFlops(s) / (row.medianMs * 1e6);
    row.gbps = sdpaMinBytes(s) / (row.medianMs * 1e6);
  } catch (e) {
    row.error = (e as Error).message;
  } finally {
    for (const t of tensors) t.destroy();
  }
  return row;
}

/** Paged attention over a mixed batch (two decode sequences, one chunked prefill), f16 cache. */
export async function runPagedCase(engine: Engine, say?: Say): Promise<WorkloadRow> {
  const [Hq, Hkv, D, bs] = [8, 2, 64, 16];
  const seqs = [{ ctx: 300, q: 1 }, { ctx: 120, q: 1 }, { ctx: 40, q: 24 }];
  const shape = `Hq${Hq} Hkv${Hkv} D${D} bs${bs} decode 2 + prefill 24 (context 40-300)`;
  const tensors: Tensor[] = [];
  try {
    const seqLens = Int32Array.from(seqs, (x) => x.ctx + x.q);
    const maxB = Math.max(...Array.from(seqLens, (l) => Math.ceil(l / bs)));
    const numBlocks = seqs.length * maxB;
    const blockTable = Int32Array.from({ length: numBlocks }, (_, i) => (i * 7) % numBlocks);   // shuffled
    const qsl = new Int32Array(seqs.length + 1);
    seqs.forEach((x, i) => { qsl[i + 1] = qsl[i] + x.q; });
    const T = qsl[seqs.length];
    const cache = engine.createPagedKVCache({ numBlocks, blockSize: bs, numKvHeads: Hkv, headSize: D, dtype: 'f16' });
    const slots: number[] = [];
    seqs.forEach((x, s) => { for (let p = 0; p < seqLens[s]; p++) slots.push(blockTable[s * maxB + Math.floor(p / bs)] * bs + (p % bs)); });
    const k = roundToDType(randn(slots.length * Hkv * D, 71), 'f16'), v = roundToDType(randn(slots.length * Hkv * D, 72), 'f16');
    tensors.push(engine.tensor(k, [slots.length, Hkv, D], 'f16'), engine.tensor(v, [slots.length, Hkv, D], 'f16'));
    engine.reshapeAndCache(tensors[0], tensors[1], cache, Int32Array.from(slots));
    const q = roundToDType(randn(T * Hq * D, 73), 'f16');
    const tq = engine.tensor(q, [T, Hq, D], 'f16');
    tensors.push(tq, cache.key, cache.value);
    const meta = { queryStartLoc: qsl, seqLens, blockTable, maxBlocksPerSeq: maxB };
    say?.('first run (compiles its pipelines)');
    const got = await engine.pagedAttention(tq, cache, meta).toFloat32();
    say?.('the float64 reference');
    const dims = { Hq, Hkv, D, Dv: D, numBlocks, blockSize: bs };
    const w = reference.reshapeAndCacheRef(k, v, Int32Array.from(slots), new Float64Array(numBlocks * Hkv * bs * D), new Float64Array(numBlocks * Hkv * bs * D), { ...dims, T: slots.length });
    const ref = reference.pagedAttentionRef(q, w.keyCache, w.valueCache, { ...dims, T }, meta, {});
    const c = compareToReference(got, ref.out, TOLERANCES.f16);
    say?.('timing');
    const ms = await timeCalls(engine, () => engine.pagedAttention(tq, cache, meta));
    const kvBytes = Array.from(seqLens).reduce((a, l) => a + l, 0) * Hkv * 2 * D * 2;
    let pairs = 0;
    seqs.forEach((x) => { for (let i = 0; i < x.q; i++) pairs += x.ctx + i + 1; });
    return { op: 'pagedAttention', shape, dtype: 'f16', backend: 'auto', worst: c.badIndex >= 0 ? Infinity : c.worst, pass: c.pass,
      medianMs: ms, gflops: (4 * Hq * D * pairs) / (ms * 1e6), gbps: kvBytes / (ms * 1e6) };
  } catch (e) {
    return failedRow('pagedAttention', shape, 'f16', 'auto', e);
  } finally {
    for (const t of tensors) t.destroy();
  }
}

/** Absorbed MLA decode over an f16 latent cache (small MLA dimensions). */
export async function runMlaCase(engine: Engine, say?: Say): Promise<WorkloadRow> {
  const [N, L, P, R, V, bs, B, C] = [8, 128, 32, 32, 32, 16, 2, 200];
  const shape = `N${N} L${L} P${P} R${R} V${V} batch ${B} context ${C}`;
  const tensors: Tensor[] = [];
  try {
    const scale = 1 / Math.sqrt(P + R);
    const kvB = roundToDType(randn(N * (P + V) * L, 81, 0.1), 'f16');
    const kvBProj = engine.tensor(kvB, [N * (P + V), L], 'f16');
    tensors.push(kvBProj);
    const layer = engine.createMLA({ numHeads: N, kvLoraRank: L, qkNopeHeadDim: P, qkRopeHeadDim: R, vHeadDim: V, scale, kvBProj });
    const maxB = Math.ceil(C / bs), numBlocks = B * maxB;
    const cache = engine.createMLACache({ numBlocks, blockSize: bs, kvLoraRank: L, qkRopeHeadDim: R, dtype: 'f16' });
    tensors.push(layer.wUK, layer.wUV, cache.data);
    const blockTable = Int32Array.from({ length: numBlocks }, (_, i) => numBlocks - 1 - i);
    const slots = Int32Array.from({ length: B * C }, (_, i) => blockTable[Math.floor(i / C) * maxB + Math.floor((i % C) / bs)] * bs + ((i % C) % bs));
    const kvC = roundToDType(randn(B * C * L, 82), 'f16'), kPe = roundToDType(randn(B * C * R, 83), 'f16');
    const tkv = engine.tensor(kvC, [B * C, L], 'f16'), tpe = engine.tensor(kPe, [B * C, R], 'f16');
    tensors.push(tkv, tpe);
    layer.cacheWrite(tkv, tpe, cache, slots);
    const qN = roundToDType(randn(B * N * P, 84), 'f16'), qP = roundToDType(randn(B * N * R, 85), 'f16');
    const qNope = engine.tensor(qN, [B, N, P], 'f16'), qPe = engine.tensor(qP, [B, N, R], 'f16');
    tensors.push(qNope, qPe);
    const meta = { seqLens: new Int32Array(B).fill(C), blockTable, maxBlocksPerSeq: maxB };
    say?.('first run (compiles its pipelines)');
    const got = await layer.decode(qNope, qPe, cache, meta).toFloat32();
    say?.('the float64 reference');
    const rows = new Float64Array(numBlocks * bs * (L + R));
    slots.forEach((slot, i) => {
      for (let l = 0; l < L; l++) rows[slot * (L + R) + l] = kvC[i * L + l];
      for (let r = 0; r < R; r++) rows[slot * (L + R) + L + r] = kPe[i * R + r];
    });
    const ref = reference.mlaDecodeRef(qN, qP, rows, kvB, { N, L, P, R, V, B, numBlocks, blockSize: bs }, meta, scale);
    const c = compareToReference(got, ref.out, TOLERANCES.f16);
    say?.('timing');
    const ms = await timeCalls(engine, () => layer.decode(qNope, qPe, cache, meta));
    const flops = 2 * B * N * (P * L + C * (L + R) + C * L + L * V);
    return { op: 'mla.decode', shape, dtype: 'f16', backend: 'absorbed', worst: c.badIndex >= 0 ? Infinity : c.worst, pass: c.pass,
      medianMs: ms, gflops: flops / (ms * 1e6), gbps: (B * C * (L + R) * 2) / (ms * 1e6) };
  } catch (e) {
    return failedRow('mla.decode', shape, 'f16', 'absorbed', e);
  } finally {
    for (const t of tensors) t.destroy();
  }
}

/** Every row of the default workload: attention first, then the layer kernels (bench/start_ops.ts). */
export function defaultCases(): WorkloadCase[] {
  const sdpa = DEFAULT_SDPA_SHAPES.flatMap(({ shape, backends }, i) => backends.map((b): WorkloadCase => ({
    label: `sdpa ${b} ${shape.dtype} ${shapeLabel(shape)}`,
    run: (engine, say) => runSdpaCase(engine, shape, b, { seed: 1000 + i, say }),
  })));
  return [
    ...sdpa,
    { label: 'pagedAttention f16 decode 2 + prefill 24', run: runPagedCase },
    { label: 'mla.decode f16 batch 2 context 200', run: runMlaCase },
    ...layerCases(),
  ];
}

export interface WorkloadProgress {
  /** Before case i of n runs. */
  onStart?: (label: string, i: number, n: number) => void;
  /** What the running case does now. */
  onProgress?: (detail: string) => void;
  /** After case i of n ran. */
  onRow?: (row: WorkloadRow, i: number, n: number) => void;
}

export async function runDefaultWorkload(engine: Engine, o: WorkloadProgress = {}): Promise<WorkloadRow[]> {
  const cases = defaultCases();
  const rows: WorkloadRow[] = [];
  for (const [i, c] of cases.entries()) {
    o.onStart?.(c.label, i, cases.length);
    const row = await c.run(engine, (detail) => o.onProgress?.(detail));
    rows.push(row);
    o.onRow?.(row, i, cases.length);
  }
  return rows;
}

/** Three significant digits whatever the size (a CPU adapter's 0.00213 GFLOP/s and a GPU's 41200 alike). */
export function sig3(x: number): string {
  if (!Number.isFinite(x)) return '-';
  if (x === 0) return '0';
  const a = Math.abs(x);
  return a >= 100 ? x.toFixed(0) : x.toPrecision(3);
}

/** A plain-text table of workload rows. */
export function formatTable(rows: WorkloadRow[]): string {
  const head = ['op', 'backend', 'dtype', 'shape', 'check (err/tol)', 'median ms', 'GFLOP/s', 'GB/s'];
  const body = rows.map((r) => [
    r.op, r.backend, r.dtype, r.shape,
    r.error ? `ERROR: ${r.error}` : `${r.pass ? 'pass' : 'FAIL'} ${r.worst.toFixed(3)}`,
    Number.isFinite(r.medianMs) ? sig3(r.medianMs) : '-',
    sig3(r.gflops),
    sig3(r.gbps),
  ]);
  const widths = head.map((h, c) => Math.max(h.length, ...body.map((r) => r[c].length)));
  const line = (cells: string[]) => cells.map((x, c) => (c >= 5 ? x.padStart(widths[c]) : x.padEnd(widths[c]))).join('  ');
  return [line(head), widths.map((w) => '-'.repeat(w)).join('  '), ...body.map(line)].join('\n');
}

export interface ModelWorkload {
  config: string; prompts: number; promptTokens: number; generated: number;
  seconds: number; tokensPerSecond: number; steps: number; stepMs: number; hostShare: number;
}

/**
 * A checkpoint of SMALL_LLAMA's shape with random f32 weights (N(0, 0.02), norms 1) made on the host, as
 * safetensors bytes: what quantize-on-load reads.
 */
function randomSmallCheckpoint(): Uint8Array {
  const tensors: Record<string, EncodableTensor> = {};
  for (const [k, e] of checkpointSchema(parseConfig(SMALL_LLAMA)).required.entries()) {
    const n = e.shape.reduce((a, b) => a * b, 1);
    tensors[e.name] = { dtype: 'F32', shape: e.shape, data: e.shape.length === 1 ? new Float32Array(n).fill(1) : randn(n, 900 + k, 0.02) };
  }
  return encodeSafetensors(tensors);
}

/**
 * The default workload's model: a small Llama-shaped model (SMALL_LLAMA in bench/model.ts) serves a batch
 * of prompts together (continuous batching, greedy): bf16 random weights made on the GPU, or ('q4') an
 * f32 checkpoint of random weights quantized as it loads (Q4_K). Six prompts of 8 to 40 tokens and 24
 * new tokens each: about 25 steps, a few seconds on lavapipe, under a minute on SwiftShader. Reports
 * tokens/s, the mean step time and the host's share of it; onProgress says what it does meanwhile.
 */
export async function runModelWorkload(engine: Engine, o: { prompts?: number; maxNewTokens?: number; dtype?: 'bf16' | 'q4'; onProgress?: (detail: string) => void } = {}): Promise<ModelWorkload> {
  const n = o.prompts ?? 6, maxNew = o.maxNewTokens ?? 24;
  const q4 = o.dtype === 'q4';
  const say = o.onProgress ?? (() => {});
  say(q4 ? 'making a random f32 checkpoint' : 'making bf16 random weights on the GPU');
  const opts = { config: SMALL_LLAMA, maxSeqsPerStep: 16, maxTokensPerStep: 256 };
  const model: Model = q4
    ? await engine.loadModel({ ...opts, weights: await loadSafetensors(randomSmallCheckpoint()), dtype: 'q4',
      onProgress: (done, total) => say(`quantizing on load to Q4_K: ${(100 * done / total).toFixed(0)}% of ${(total / 2 ** 20).toFixed(1)} MiB`) })
    : await createRandomModel(engine, { ...opts, dtype: 'bf16', seed: 5 });
  try {
    const r = rng(77);
    const prompts = Array.from({ length: n }, (_, i) => Array.from({ length: 8 + ((i * 37) % 33) }, () => Math.floor(r() * SMALL_LLAMA.vocab_size)));
    say('compiling pipelines (a short first generation; up to a minute on a software adapter the first time)');
    await model.generate([prompts[0].slice(0, 8)], { maxNewTokens: 4, stopTokens: [] });
    const total = n * maxNew;
    let done = 0;
    say(`generating: 0 of ${total} new tokens`);
    const out = await model.generate(prompts, { maxNewTokens: maxNew, stopTokens: [], onToken: () => { done++; say(`generating: ${done} of ${total} new tokens`); } });
    const s = model.lastRun;
    const generated = out.reduce((a, x) => a + x.length, 0);
    return {
      config: `Llama-shaped, hidden ${SMALL_LLAMA.hidden_size}, ${SMALL_LLAMA.num_hidden_layers} layers, ${SMALL_LLAMA.num_attention_heads}/${SMALL_LLAMA.num_key_value_heads} heads, vocab ${SMALL_LLAMA.vocab_size}, `
        + `${q4 ? `random weights quantized on load to Q4_K (${(model.weightBytes / 2 ** 20).toFixed(2)} MiB on the GPU)` : `bf16 random weights (${(model.weightBytes / 2 ** 20).toFixed(2)} MiB)`}`,
      prompts: n, promptTokens: prompts.reduce((a, p) => a + p.length, 0), generated,
      seconds: s.wallMs / 1000, tokensPerSecond: (1000 * generated) / s.wallMs, steps: s.steps, stepMs: s.wallMs / s.steps, hostShare: s.hostMs / s.wallMs,
    };
  } finally {
    model.destroy();
  }
}
