// The kernel families of a transformer layer in `npm start`'s table (bench/workload.ts runs them after
// the attention rows): GEMV and GEMM per weight type (f32, f16, bf16, Q8_0, Q4_K), RMSNorm, RoPE, MoE
// routing and expert products (bf16 and quantized experts), argmax and sampling. Each row is checked
// once against the float64 reference (src/reference), as tests/cases/*.cases.ts check the same kernels,
// then timed. Shapes are a model's in kind and small in size, so that a CPU adapter (lavapipe,
// SwiftShader) gets through the whole table in a minute or two.
import {
  TOLERANCES, compareToReference, isQuantType, ops, randn, reference, rng, roundToDType,
  type Engine, type QuantType, type Tensor, type Tolerance,
} from 'webinfer';
import { median } from './harness';

export interface WorkloadRow {
  op: string;
  shape: string;
  dtype: string;
  backend: string;
  /** Worst error as a fraction of the SPEC §6 tolerance (pass ≤ 1); 0 for ids equal to the reference's. */
  worst: number;
  pass: boolean;
  medianMs: number;
  /** NaN where FLOPs mean nothing (argmax, sampling). */
  gflops: number;
  gbps: number;
  error?: string;
}

/** What a case reports while it runs ('first run (compiles its pipelines)', 'the float64 reference', 'timing'). */
export type Say = (detail: string) => void;

/** One row of the table: what it is (known before it runs, for the progress line) and how to run it. */
export interface WorkloadCase {
  label: string;
  run(engine: Engine, say: Say): Promise<WorkloadRow>;
}

/** At least this many timed samples, and up to TIME_SAMPLES while they take less than TIME_BUDGET_MS. */
export const TIME_MIN_SAMPLES = 3;
export const TIME_SAMPLES = 5;
/** Software adapters take seconds on some rows: past this, three samples are enough. */
export const TIME_BUDGET_MS = 1500;

/**
 * Wall time of one call of `run` (which records it and returns what to destroy) around a drained
 * queue: one warm-up call, then the median of 3 to 5 samples.
 */
export async function timeCalls(engine: Engine, run: () => Tensor | Tensor[] | void, samples = TIME_SAMPLES): Promise<number> {
  const once = async () => {
    const out = run();
    await engine.sync();
    for (const t of Array.isArray(out) ? out : out ? [out] : []) t.destroy();
  };
  await once();
  const times: number[] = [];
  const start = performance.now();
  while (times.length < samples && (times.length < TIME_MIN_SAMPLES || performance.now() - start < TIME_BUDGET_MS)) {
    const t0 = performance.now();
    await once();
    times.push(performance.now() - t0);
  }
  return median(times);
}

export function failedRow(op: string, shape: string, dtype: string, backend: string, e: unknown): WorkloadRow {
  return { op, shape, dtype, backend, worst: NaN, pass: false, medianMs: NaN, gflops: NaN, gbps: NaN, error: (e as Error).message };
}

/** A row from a check and a time: FLOPs and bytes (the least the kernel must move) per call. */
export function timedRow(r: { op: string; shape: string; dtype: string; backend: string }, check: { worst: number; pass: boolean },
                         ms: number, flops: number, bytes: number): WorkloadRow {
  return { ...r, worst: check.worst, pass: check.pass, medianMs: ms, gflops: flops / (ms * 1e6), gbps: bytes / (ms * 1e6) };
}

/** compareToReference as a row's check: a NaN or infinity where the reference has none is worst Infinity. */
export function closeTo(got: ArrayLike<number>, ref: ArrayLike<number>, tol: Tolerance): { worst: number; pass: boolean } {
  const c = compareToReference(got, ref, tol);
  return { worst: c.badIndex >= 0 ? Infinity : c.worst, pass: c.pass };
}

/**
 * Long sums that cancel far below their terms (and quantized weights with a min, Q4_K ..., whose rows
 * share an offset): within the f32 row, or within twice the error a plain f32 implementation makes
 * (+1e-5), as tests/cases' assertWithinPlain checks them. worst is the smaller of the two ratios.
 */
function withinPlain(got: Float32Array, ref: Float64Array, plain: () => Float64Array): { worst: number; pass: boolean } {
  const c = closeTo(got, ref, TOLERANCES.f32);
  if (c.pass || !Number.isFinite(c.worst)) return c;
  const pl = plain();
  let errGpu = 0, errPlain = 0;
  for (let j = 0; j < ref.length; j++) {
    errGpu = Math.max(errGpu, Math.abs(got[j] - ref[j]));
    errPlain = Math.max(errPlain, Math.abs(pl[j] - ref[j]));
  }
  const worst = Math.min(c.worst, errGpu / (2 * errPlain + 1e-5));
  return { worst, pass: worst <= 1 };
}

const f16Rounded = (v: Float64Array) => roundToDType(Float32Array.from(v), 'f16');

// --------------------------------------------------------------------------------------- GEMV, GEMM

type WeightType = 'f32' | 'f16' | 'bf16' | QuantType;

/**
 * ops.linear at M rows (1: a decode step's GEMV; 128: a prefill's GEMM) over weights of one storage
 * type, against linearRef on the weights the GPU holds (rounded, or dequantized as ggml does).
 */
function linearCase(dtype: WeightType, M: number, N: number, K: number, seed: number): WorkloadCase {
  const shape = `M${M} N${N} K${K}`;
  return {
    label: `linear ${dtype} ${shape}`,
    async run(engine, say) {
      const plan = ops.planLinear(engine, { M, N, K, dtype });
      const r = { op: M === 1 ? 'linear (GEMV)' : 'linear (GEMM)', shape, dtype, backend: plan.kernel };
      const tensors: Tensor[] = [];
      let w: ops.LinearWeight | undefined;
      try {
        say('making weights');
        let wv: Float64Array | Float32Array;
        if (isQuantType(dtype)) {
          const bytes = reference.randomQuantRows(dtype, N, K, seed);
          wv = reference.dequantizeRows(dtype, bytes, N, K);
          w = ops.createQuantLinear(engine, { data: bytes, N, K, type: dtype });
        } else {
          wv = roundToDType(randn(N * K, seed, 0.5), dtype);
          w = ops.createLinear(engine, { data: wv, N, K, dtype });
        }
        const xv = randn(M * K, seed + 1);
        const x = engine.tensor(xv, [M, K]);
        tensors.push(x);
        say('first run (compiles its pipelines)');
        const out = ops.linear(engine, x, w, { plan });
        const got = await out.toFloat32();
        out.destroy();
        say('the float64 reference');
        let check: { worst: number; pass: boolean };
        if (plan.kernel === 'gemm-mma' && (isQuantType(dtype) || !plan.split)) {
          // The matrices take f16 inputs (quantized weights rounded to f16, x unsplit): SPEC §6's f16 row.
          check = closeTo(got, reference.linearRef(xv, isQuantType(dtype) ? f16Rounded(wv as Float64Array) : wv, M, N, K), TOLERANCES.f16);
        } else {
          // The kernels compute in f32; long sums that cancel (and, for weights with a min, rows of a
          // common offset) go within twice a plain f32 implementation's error.
          check = withinPlain(got, reference.linearRef(xv, wv, M, N, K), () => reference.linearRef(xv, wv, M, N, K, { precision: 'f32' }));
        }
        say('timing');
        const wb = w;
        const ms = await timeCalls(engine, () => ops.linear(engine, x, wb, { plan }));
        return timedRow(r, check, ms, 2 * M * N * K, ops.linearWeightBytes(w) + 4 * M * (K + N));
      } catch (e) {
        return failedRow(r.op, shape, dtype, r.backend, e);
      } finally {
        w?.destroy();
        for (const t of tensors) t.destroy();
      }
    },
  };
}

// ------------------------------------------------------------------------------------ RMSNorm, RoPE

function rmsNormCase(rows: number, n: number): WorkloadCase {
  const shape = `rows ${rows} n ${n}, bf16 weight`;
  return {
    label: `rmsNorm ${shape}`,
    async run(engine, say) {
      const r = { op: 'rmsNorm', shape, dtype: 'f32', backend: engine.features.subgroups ? 'subgroup' : 'portable' };
      const tensors: Tensor[] = [];
      try {
        const xv = randn(rows * n, 41, 2);
        const wv = roundToDType(randn(n, 42).map((v) => 1 + 0.5 * v), 'bf16');
        const x = engine.tensor(xv, [rows, n]), w = engine.tensor(wv, [n], 'bf16');
        tensors.push(x, w);
        say('first run (compiles its pipelines)');
        const out = ops.rmsNorm(engine, x, w, 1e-6);
        const got = await out.toFloat32();
        out.destroy();
        say('the float64 reference');
        const check = closeTo(got, reference.rmsNormRef(xv, wv, 1e-6, { rows, n }), TOLERANCES.f32);
        say('timing');
        const ms = await timeCalls(engine, () => ops.rmsNorm(engine, x, w, 1e-6));
        // x², the sum, the scale and the weight: 4 FLOPs an element.
        return timedRow(r, check, ms, 4 * rows * n, 8 * rows * n + 2 * n);
      } catch (e) {
        return failedRow(r.op, shape, r.dtype, r.backend, e);
      } finally {
        for (const t of tensors) t.destroy();
      }
    },
  };
}

/** RoPE (half pairing, Llama's) on the q and k heads of a fused qkv buffer, in place, in one call. */
function ropeCase(T: number, Hq: number, Hkv: number, D: number): WorkloadCase {
  const shape = `T${T} q ${Hq} + k ${Hkv} heads of D${D} in a fused qkv row`;
  return {
    label: `rope ${shape}`,
    async run(engine, say) {
      const r = { op: 'rope', shape, dtype: 'f32', backend: 'half' };
      const tensors: Tensor[] = [];
      try {
        const W = (Hq + 2 * Hkv) * D, half = D / 2, P = 4 * T;
        // The table as a model builds it: cos/sin(p · θ^(-i/half)), θ 10000.
        const cos = new Float32Array(P * half), sin = new Float32Array(P * half);
        for (let p = 0; p < P; p++) for (let i = 0; i < half; i++) {
          cos[p * half + i] = Math.cos(p * 1e4 ** (-i / half));
          sin[p * half + i] = Math.sin(p * 1e4 ** (-i / half));
        }
        const rnd = rng(51);
        const pos = Int32Array.from({ length: T }, () => Math.floor(rnd() * P));
        const xv = randn(T * W, 52, 2);
        const buf = engine.tensor(xv, [T, W]), cosT = engine.tensor(cos, [P, half]), sinT = engine.tensor(sin, [P, half]);
        const posT = engine.tensor(pos, [T], 'i32');
        tensors.push(buf, cosT, sinT, posT);
        const qv = { rows: T, heads: Hq, offset: 0, tokenStride: W, headStride: D };
        const kv = { rows: T, heads: Hkv, offset: Hq * D, tokenStride: W, headStride: D };
        const views = [{ tensor: buf, ...qv }, { tensor: buf, ...kv }];
        say('first run (compiles its pipelines)');
        ops.rope(engine, views, posT, cosT, sinT);
        const got = await buf.toFloat32();
        say('the float64 reference');
        // Every element: the rotated q and k, and v left as it was.
        const check = closeTo(got, reference.ropeRef(xv, pos, cos, sin, half, [qv, kv], 'half'), TOLERANCES.f32);
        say('timing');
        const ms = await timeCalls(engine, () => ops.rope(engine, views, posT, cosT, sinT));
        const pairs = T * (Hq + Hkv) * half;
        return timedRow(r, check, ms, 6 * pairs, pairs * (16 + 8) + 4 * T);
      } catch (e) {
        return failedRow(r.op, shape, r.dtype, r.backend, e);
      } finally {
        for (const t of tensors) t.destroy();
      }
    },
  };
}

// --------------------------------------------------------------------------------------------- MoE

/** DeepSeek-V2's routing: softmax over E experts, the topK greedy, against routeRef (same ids, weights in f32). */
function routeCase(rows: number, E: number, topK: number): WorkloadCase {
  const shape = `rows ${rows} E${E} top ${topK}, softmax greedy`;
  return {
    label: `moe.route ${shape}`,
    async run(engine, say) {
      const r = { op: 'moe.route', shape, dtype: 'f32', backend: 'deepseek_v2' };
      const tensors: Tensor[] = [];
      try {
        const routing: reference.MoeRouting = {
          family: 'deepseek_v2', scoring: 'softmax', method: 'greedy', topK, nGroup: null, topkGroup: null, normTopkProb: false, routedScalingFactor: 1,
        };
        const lv = randn(rows * E, 61, 1.5);
        const logits = engine.tensor(lv, [rows, E]);
        tensors.push(logits);
        say('first run (compiles its pipelines)');
        const got = ops.route(engine, logits, routing, { rows });
        const gi = await got.ids.toArray() as Int32Array, gw = await got.weights.toFloat32();
        got.ids.destroy();
        got.weights.destroy();
        say('the float64 reference');
        const ref = reference.routeRef(lv, rows, E, routing);
        // The order of a token's experts is free: compare (id, weight) pairs sorted by id.
        const sorted = (ids: ArrayLike<number>, w: ArrayLike<number>) => {
          const o = { ids: new Int32Array(rows * topK), w: new Float64Array(rows * topK) };
          for (let t = 0; t < rows; t++) {
            const j = Array.from({ length: topK }, (_, i) => t * topK + i).sort((a, b) => ids[a] - ids[b]);
            j.forEach((k, i) => { o.ids[t * topK + i] = ids[k]; o.w[t * topK + i] = w[k]; });
          }
          return o;
        };
        const a = sorted(gi, gw), b = sorted(ref.ids, ref.weights);
        const sameIds = a.ids.every((v, i) => v === b.ids[i]);
        const c = closeTo(a.w, b.w, TOLERANCES.f32);
        const check = sameIds ? c : { worst: Infinity, pass: false };
        say('timing');
        const ms = await timeCalls(engine, () => { const o = ops.route(engine, logits, routing, { rows }); return [o.ids, o.weights]; });
        // exp and sum over the logits, then topK passes of a max.
        return timedRow(r, check, ms, rows * E * (3 + topK), 4 * rows * E + 8 * rows * topK);
      } catch (e) {
        return failedRow(r.op, shape, r.dtype, r.backend, e);
      } finally {
        for (const t of tensors) t.destroy();
      }
    },
  };
}

/** topK distinct experts per token from a seeded shuffle. */
function randomIds(rows: number, E: number, K: number, seed: number): Int32Array {
  const r = rng(seed);
  const out = new Int32Array(rows * K);
  for (let t = 0; t < rows; t++) {
    const pool = Array.from({ length: E }, (_, e) => e);
    for (let i = pool.length - 1; i > 0; i--) {
      const j = Math.floor(r() * (i + 1));
      [pool[i], pool[j]] = [pool[j], pool[i]];
    }
    out.set(pool.slice(0, K), t * K);
  }
  return out;
}

/**
 * ops.moe: each token's topK experts (SiLU-gated gate|up, then down), weighted and summed, against
 * moeRef. Float experts (bf16) or quantized ones (gate|up and down of their own ggml types, as a
 * GGUF's Q4_K_M mixes them).
 */
function moeCase(rows: number, E: number, topK: number, H: number, I: number, w: 'bf16' | { gateUp: QuantType; down: QuantType }, seed: number): WorkloadCase {
  const q = typeof w === 'object' ? w : null;
  const dtype = q ? `${q.gateUp}|${q.down}` : 'bf16';
  const shape = `rows ${rows} E${E} top ${topK} H${H} I${I}`;
  return {
    label: `moe ${dtype} ${shape}`,
    async run(engine, say) {
      const plan = ops.planMoe(engine, { rows, topK, E, H, I, dtype: q ? q.gateUp : 'bf16', downDtype: q ? q.down : 'bf16' });
      const r = { op: 'moe (experts)', shape, dtype, backend: plan.kernel };
      const tensors: Tensor[] = [];
      let experts: ops.ExpertWeights | undefined;
      try {
        say('making experts');
        // Scales of a trained model's size (weights ~1/√K), as tests/cases/moe.cases.ts makes them.
        const scaleRange: [number, number] = [2e-4, 2e-3];
        let gateUp: Float32Array | Float64Array, down: Float32Array | Float64Array;
        if (q) {
          const gu = reference.randomQuantRows(q.gateUp, E * 2 * I, H, seed + 1, { scaleRange });
          const dn = reference.randomQuantRows(q.down, E * H, I, seed + 2, { scaleRange });
          gateUp = reference.dequantizeRows(q.gateUp, gu, E * 2 * I, H);
          down = reference.dequantizeRows(q.down, dn, E * H, I);
          experts = ops.createQuantExperts(engine, { E, H, I, gateUpType: q.gateUp, gateUp: gu, downType: q.down, down: dn });
          if (plan.kernel === 'gemm-mma') { gateUp = f16Rounded(gateUp); down = f16Rounded(down); }
        } else {
          gateUp = roundToDType(randn(E * 2 * I * H, seed + 1, 1 / Math.sqrt(H)), 'bf16');
          down = roundToDType(randn(E * H * I, seed + 2, 1 / Math.sqrt(I)), 'bf16');
          experts = ops.createExperts(engine, { E, H, I, dtype: 'bf16', gateUp: gateUp as Float32Array, down: down as Float32Array });
        }
        const xv = randn(rows * H, seed);
        const ids = randomIds(rows, E, topK, seed + 3);
        const rnd = rng(seed + 4);
        const wv = Float32Array.from({ length: rows * topK }, () => 0.1 + rnd());
        const x = engine.tensor(xv, [rows, H]), out = engine.tensor(new Float32Array(rows * H), [rows, H]);
        const routing = { ids: engine.tensor(ids, [rows, topK], 'i32'), weights: engine.tensor(wv, [rows, topK]) };
        tensors.push(x, out, routing.ids, routing.weights);
        say('first run (compiles its pipelines)');
        const ex = experts;
        ops.moe(engine, x, routing, ex, { rows, out, plan });
        const got = await out.toFloat32();
        say('the float64 reference');
        const dims = { rows, E, H, I, topK };
        const ref = reference.moeRef(xv, ids, wv, gateUp, down, dims);
        const check = q && plan.kernel === 'gemm-mma' ? closeTo(got, ref, TOLERANCES.f16)
          : q ? withinPlain(got, ref, () => reference.moeRef(xv, ids, wv, gateUp, down, { ...dims, precision: 'f32' }))
            : closeTo(got, ref, TOLERANCES.f32);
        say('timing');
        const ms = await timeCalls(engine, () => { ops.moe(engine, x, routing, ex, { rows, out, plan }); });
        const chosen = new Set(ids).size;
        return timedRow(r, check, ms, 2 * rows * topK * 3 * H * I, ops.expertWeightBytes(experts, chosen) + 8 * rows * H);
      } catch (e) {
        return failedRow(r.op, shape, dtype, r.backend, e);
      } finally {
        experts?.destroy();
        for (const t of tensors) t.destroy();
      }
    },
  };
}

// ------------------------------------------------------------------------------- argmax, sampling

/** Greedy decoding's argmax over a vocabulary, against argmaxRef: every id equal. */
function argmaxCase(rows: number, V: number): WorkloadCase {
  const shape = `rows ${rows} V${V}`;
  return {
    label: `argmax ${shape}`,
    async run(engine, say) {
      const r = { op: 'argmax', shape, dtype: 'f32', backend: 'auto' };
      const tensors: Tensor[] = [];
      try {
        const lv = randn(rows * V, 71, 3);
        const logits = engine.tensor(lv, [rows, V]);
        tensors.push(logits);
        say('first run (compiles its pipelines)');
        const out = ops.argmax(engine, logits);
        const got = await out.toArray() as Int32Array;
        out.destroy();
        say('the float64 reference');
        const ref = reference.argmaxRef(lv, rows, V);
        const same = got.every((v, i) => v === ref[i]);
        say('timing');
        const ms = await timeCalls(engine, () => ops.argmax(engine, logits));
        return { ...timedRow(r, { worst: same ? 0 : Infinity, pass: same }, ms, 0, 4 * rows * V), gflops: NaN };
      } catch (e) {
        return failedRow(r.op, shape, r.dtype, r.backend, e);
      } finally {
        for (const t of tensors) t.destroy();
      }
    },
  };
}

/**
 * ops.sample with temperature, top-k and top-p against sampleRef's inverse-CDF draw: each id equal to
 * the reference's, or (its uniform within 1e-5 of a CDF boundary, or the top-p cut within 1e-4 of topP:
 * f32 against float64 may fall either side) a token the reference keeps.
 */
function sampleCase(rows: number, V: number): WorkloadCase {
  const o = { temperature: 0.8, topK: 40, topP: 0.9, seed: 7, step: 3 };
  const shape = `rows ${rows} V${V}, temperature ${o.temperature} top-k ${o.topK} top-p ${o.topP}`;
  return {
    label: `sample ${shape}`,
    async run(engine, say) {
      const r = { op: 'sample', shape, dtype: 'f32', backend: 'auto' };
      const tensors: Tensor[] = [];
      try {
        const lv = randn(rows * V, 72, 3);
        const logits = engine.tensor(lv, [rows, V]);
        tensors.push(logits);
        say('first run (compiles its pipelines)');
        const out = ops.sample(engine, logits, o);
        const got = await out.toArray() as Int32Array;
        out.destroy();
        say('the float64 reference');
        const ref = reference.sampleRef(lv, rows, V, o);
        let ok = true;
        for (let i = 0; i < rows && ok; i++) {
          if (got[i] === ref.ids[i]) continue;
          const f = reference.sampleFilterRef(lv.subarray(i * V, (i + 1) * V), o);
          const near = ref.margin[i] < 1e-5 || ref.topPMargin[i] < 1e-4;
          ok = near && !!f.probs && got[i] >= 0 && got[i] < V && f.probs[got[i]] > 0;
        }
        say('timing');
        const ms = await timeCalls(engine, () => ops.sample(engine, logits, o));
        return { ...timedRow(r, { worst: ok ? 0 : Infinity, pass: ok }, ms, 0, 4 * rows * V), gflops: NaN };
      } catch (e) {
        return failedRow(r.op, shape, r.dtype, r.backend, e);
      } finally {
        for (const t of tensors) t.destroy();
      }
    },
  };
}

/**
 * The layer kernels of the default workload, in a layer's order: GEMV (decode) and GEMM (prefill) per
 * weight type, RMSNorm, RoPE, MoE routing and experts, then argmax and sampling over a vocabulary.
 */
export function layerCases(): WorkloadCase[] {
  // The GEMM's shape is smaller than the GEMV's: SwiftShader takes ~2 s for 134 MFLOP (M128 N512 K1024).
  const types: WeightType[] = ['f32', 'f16', 'bf16', 'Q8_0', 'Q4_K'];
  return [
    ...types.flatMap((t, i) => [linearCase(t, 1, 512, 1024, 300 + 10 * i), linearCase(t, 128, 256, 512, 305 + 10 * i)]),
    rmsNormCase(128, 1024),
    ropeCase(128, 8, 2, 64),
    routeCase(64, 64, 6),
    moeCase(64, 8, 2, 256, 256, 'bf16', 400),
    moeCase(4, 8, 2, 256, 256, { gateUp: 'Q4_K', down: 'Q6_K' }, 410),
    argmaxCase(8, 32000),
    sampleCase(8, 32000),
  ];
}
