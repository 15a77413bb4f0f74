// Mixture-of-experts on the GPU (SPEC §7; DeepSeek V2/V3 and gpt-oss as HF transformers computes them): the router's
// top-k choice (route) and the routed experts (moe), with nothing read back to the host. The float64
// twins are reference.routeRef and reference.moeRef; src/reference/moe.ts states the math, including
// how V2 and V3 differ.
//
// route (shaders/ops/moe_route.wgsl): one workgroup per token; experts ranked by counting (E²/WG
//   comparisons per thread), ids listed by decreasing choice, ties to the lower expert index.
//
// moe: out[t] (+)= Σ_j weights[t, j] · down_e(silu(gate_e(x[t])) · up_e(x[t])), e = ids[t, j], as
//   (gpt-oss: act 'swiglu_oai' in place of silu(gate)·up, and the experts' biases added to gate|up and
//   to down's output where the experts carry them),
//   grouped products over the tokens routed to each expert:
//   1. sort (moe_sort.wgsl, one workgroup): counts per expert, a scan, and a scatter of the (token,
//      slot) pairs into per-expert ranges, plus the list of tiles (up to BM pairs of one expert each).
//   2. gate|up (moe_gemv/moe_gemm): per tile, the expert's [2I, H] rows times its pairs' hidden states,
//      into gu [pairs, 2I] (row = pair).
//   3. down: per tile, the expert's [H, I] rows times silu(gate)·up of its pairs' gu rows (fused on
//      load), into y [pairs, H].
//   4. combine (moe_combine.wgsl): out[t] (+)= Σ_j weights[t, j] · y[t·topK + j], in slot order, so the
//      result does not depend on the order the sort's atomics put pairs in.
//   Grids come from host bounds (pairs P = rows·topK and the experts of a part: at most
//   min(P, ⌊(P + min(E, P)·(BM-1)) / BM⌋) tiles); surplus workgroups exit at once: no indirect dispatch.
//   Two product kernels, chosen by the average pairs per chosen expert (planMoe; threshold below,
//   not yet measured on a GPU):
//     gemv (decode): a tile of up to MT pairs; lanes split K, 16-byte weight loads, each weight word
//       meets every pair of the tile; partial sums meet in workgroup memory (portable, no subgroups).
//     gemm (prefill): 64×64 output tiles, BK 16 through workgroup memory, 4×4 outputs per thread.
//   Workspace (pool scratch, back to the pool at submit): gu and y, (2I + H)·4 bytes per pair, and the
//   sort's lists; rows are processed in chunks when that exceeds maxWorkspaceBytes (default
//   MOE_WORKSPACE_BYTES), the chunks reusing the same buffers in one submission.
// Expert weights (createExperts): gate|up [E, 2I, H] (gate rows first) and down [E, H, I], transformers
// 5's packed layout, f32/f16/bf16 (16-bit decoded in the shader: no shader-f16), split by whole experts
// over several buffers when larger than the device's largest binding; each part is its own dispatch.
// Quantized experts (createQuantExperts: a GGUF's ffn_*_exps, SPEC §8) keep ggml's blocks in the GPU
// layout of src/ops/quant.ts, gate|up and down each of its own type; the product kernels decode them
// in registers (4 values a load, the types' q_load4), the subgroup-matrix GEMM rounding them to f16
// on the way into workgroup memory as the linear one does.
import { DTYPE_CODE } from '../core/dtype.js';
import { hasQuantDot, isQuantType, QUANT_FORMATS, QUANT_TYPES, quantRowBytes, type QuantType } from '../core/quant.js';
import { packQuantRows, quantPlaneWord } from './quant.js';
import { check, checkFinite, fail, fmt, isPosInt, shapeStr } from '../core/errors.js';
import type { Runtime } from '../core/runtime.js';
import { BufferPool, checkTensor, type Tensor } from '../core/tensor.js';
import type { MoeRouting } from '../reference/moe.js';
import { isLinearStorage, LINEAR_GEMM_TARGET_WORKGROUPS, linearMmaUnavailable, linearVectorWidth, MMA_ENABLES, mmaConsts, planMma, storageBytes, weightProgram,
  type GemmMmaPlan, type GemmMmaTile, type LinearDType, type LinearStorage } from './gemm.js';

export type { MoeRouting, MoeFamily, MoeScoring, MoeTopkMethod } from '../reference/moe.js';

export type ExpertDType = LinearDType;
const EXPERT_DTYPES: readonly ExpertDType[] = ['f32', 'f16', 'bf16'];
/** How one of the experts' two weights (gate|up, down) is stored: a float dtype or a quantized type (as a linear layer's). */
export type ExpertStorage = LinearStorage;

/** Experts route() and moe() handle (route's workgroup memory: four arrays of that many words, 8 KiB). */
export const MOE_MAX_EXPERTS = 512;
/** The gemv kernel runs while the pairs per chosen expert average at most this many. */
export const MOE_GEMV_MAX_ROWS = 8;
/** Default cap on each workspace buffer of moe() (gu, y): larger batches run in chunks of rows. */
export const MOE_WORKSPACE_BYTES = 256 * 1024 * 1024;

// ------------------------------------------------------------------------------------------ experts

export interface ExpertPart {
  /** First expert of this part. */
  readonly e0: number;
  readonly experts: number;
  /** [experts, 2I, H]: gate rows 0..I-1, then up rows (quantized: the packed blocks of those rows, u32 words). */
  readonly gateUp: Tensor;
  /** [experts, H, I]. */
  readonly down: Tensor;
}

/** The routed experts of one MoE layer on the GPU, possibly split by whole experts over several parts. */
export interface ExpertWeights {
  readonly E: number;
  readonly H: number;
  readonly I: number;
  /** gate|up's storage (a float dtype, or a quantized type: createQuantExperts). */
  readonly dtype: ExpertStorage;
  /** down's storage: dtype, or another quantized type (GGUF mixes keep down at more bits). */
  readonly downDtype: ExpertStorage;
  readonly parts: readonly ExpertPart[];
  /** gpt-oss's expert biases, f32 [E, 2I] (gate then up, as the rows) and [E, H]; absent or null: none. */
  readonly gateUpBias?: Tensor | null;
  readonly downBias?: Tensor | null;
  destroy(): void;
}

class Experts implements ExpertWeights {
  gateUpBias: Tensor | null = null;
  downBias: Tensor | null = null;

  constructor(readonly E: number, readonly H: number, readonly I: number, readonly dtype: ExpertStorage,
              readonly parts: readonly ExpertPart[], private readonly owned: boolean, readonly downDtype: ExpertStorage = dtype) {}

  destroy(): void {
    if (!this.owned) return;
    for (const p of this.parts) {
      p.gateUp.destroy();
      p.down.destroy();
    }
    this.gateUpBias?.destroy();
    this.downBias?.destroy();
  }
}

interface ExpertBiases { gateUpBias?: Float32Array; downBias?: Float32Array }

/** Checks gpt-oss's expert biases: f32 [E·2I] and [E·H] values, both or neither. */
function checkBiases(op: string, E: number, H: number, I: number, w: ExpertBiases): void {
  check((w.gateUpBias === undefined) === (w.downBias === undefined), op, w.gateUpBias ? 'downBias' : 'gateUpBias',
    'given with the other bias (both or neither)', 'absent');
  if (w.gateUpBias === undefined) return;
  for (const [name, data, n] of [['gateUpBias', w.gateUpBias, E * 2 * I], ['downBias', w.downBias!, E * H]] as const) {
    check(data instanceof Float32Array && data.length === n, op, name, `a Float32Array of ${name === 'gateUpBias' ? 'E·2I' : 'E·H'} = ${n} values`,
      data instanceof Float32Array ? `${data.length} values` : data);
  }
}

/** Uploads checked biases (checkBiases) onto `x`. */
function attachBiases(rt: Runtime, x: Experts, w: ExpertBiases): Experts {
  const { E, H, I } = x;
  if (w.gateUpBias === undefined) return x;
  x.gateUpBias = rt.tensor(w.gateUpBias, [E, 2 * I], 'f32');
  x.downBias = rt.tensor(w.downBias!, [E, H], 'f32');
  return x;
}

/** Bytes of weights the experts keep on the GPU, and those of `n` experts (a step's reads). */
export function expertWeightBytes(w: ExpertWeights, n = w.E): number {
  return n * (storageBytes(w.dtype, 2 * w.I, w.H) + storageBytes(w.downDtype, w.H, w.I));
}

function checkExpertShape(op: string, E: unknown, H: unknown, I: unknown, dtype: unknown): void {
  check(isPosInt(E), op, 'E', 'a positive integer', E);
  check(isPosInt(H), op, 'H', 'a positive integer', H);
  check(isPosInt(I), op, 'I', 'a positive integer', I);
  check(EXPERT_DTYPES.includes(dtype as ExpertDType), op, 'dtype', "'f32', 'f16' or 'bf16'", fmt(dtype));
  const v = linearVectorWidth(dtype as ExpertDType);
  check((H as number) % v === 0, op, 'H', `a multiple of ${v} for ${dtype} weights (rows are read 16 bytes at a time)`, H);
  check((I as number) % v === 0, op, 'I', `a multiple of ${v} for ${dtype} weights (rows are read 16 bytes at a time)`, I);
}

/** Whole experts per part: as many as fit the device's largest binding (and maxPartBytes), counting the
 *  buffer pool's rounding; gate|up, twice the size of down, decides. */
export function expertsPerPart(rt: Runtime, H: number, I: number, dtype: ExpertStorage, maxPartBytes = Infinity, op = 'createExperts',
                               downDtype: ExpertStorage = dtype): number {
  const bytes = Math.max(storageBytes(dtype, 2 * I, H), storageBytes(downDtype, H, I));
  const deviceMax = Math.min(rt.limits.maxStorageBufferBindingSize, rt.limits.maxBufferSize);
  let n = Math.floor(Math.min(deviceMax, maxPartBytes) / bytes);
  while (n > 0 && BufferPool.sizeClass(n * bytes) > deviceMax) n = Math.min(n - 1, Math.floor(n * 0.99));
  if (n < 1) {
    fail(op, maxPartBytes < deviceMax ? 'maxPartBytes' : 'H', `room for one expert's gate|up of ${bytes} bytes (H=${H}, I=${I} ${dtype})`,
      `${Math.min(deviceMax, maxPartBytes)} bytes per part`);
  }
  return n;
}

function partRanges(E: number, perPart: number): { e0: number; n: number }[] {
  const parts = Math.ceil(E / perPart);
  // Even parts: the dispatches stay alike.
  const base = Math.ceil(E / parts);
  const out: { e0: number; n: number }[] = [];
  for (let e = 0; e < E; e += base) out.push({ e0: e, n: Math.min(base, E - e) });
  return out;
}

/**
 * Uploads the experts of a layer: gateUp [E, 2I, H] (per expert gate rows, then up rows: transformers 5's
 * `mlp.experts.gate_up_proj`) and down [E, H, I] (`mlp.experts.down_proj`), row-major. Float32Array data
 * are rounded to a 16-bit dtype (nearest even); a Uint16Array holds raw f16/bf16 bits.
 */
export function createExperts(rt: Runtime, w: { E: number; H: number; I: number; dtype: ExpertDType; gateUp: Float32Array | Uint16Array;
                                                down: Float32Array | Uint16Array; maxPartBytes?: number;
                                                gateUpBias?: Float32Array; downBias?: Float32Array }): ExpertWeights {
  const op = 'createExperts';
  rt.assertAlive(op);
  check(w !== null && typeof w === 'object', op, 'w', 'an object { E, H, I, dtype, gateUp, down }', w);
  const { E, H, I, dtype } = w;
  checkExpertShape(op, E, H, I, dtype);
  for (const [name, data, n] of [['gateUp', w.gateUp, E * 2 * I * H], ['down', w.down, E * H * I]] as const) {
    if (dtype === 'f32') check(data instanceof Float32Array, op, name, "a Float32Array for dtype 'f32'", data);
    else check(data instanceof Float32Array || data instanceof Uint16Array, op, name, `a Float32Array or a Uint16Array of ${dtype} bits`, data);
    check(data.length === n, op, name, `${name === 'gateUp' ? 'E·2I·H' : 'E·H·I'} = ${n} elements`, `${data.length}`);
  }
  if (w.maxPartBytes !== undefined) check(isPosInt(w.maxPartBytes), op, 'maxPartBytes', 'a positive integer', w.maxPartBytes);
  const gu = 2 * I * H, dn = H * I;
  checkBiases(op, E, H, I, w);
  const parts = partRanges(E, expertsPerPart(rt, H, I, dtype, w.maxPartBytes, op)).map(({ e0, n }) => ({
    e0, experts: n,
    gateUp: rt.tensor(w.gateUp.subarray(e0 * gu, (e0 + n) * gu), [n, 2 * I, H], dtype),
    down: rt.tensor(w.down.subarray(e0 * dn, (e0 + n) * dn), [n, H, I], dtype),
  }));
  return attachBiases(rt, new Experts(E, H, I, dtype, parts, true), w);
}

/**
 * gpt-oss's expert biases (f32 [E·2I]: gate then up, as the rows; [E·H]) added to experts made by
 * createExperts or createQuantExperts (a loader's, e.g. WeightReader.experts) that have none yet;
 * returns the same experts, which then own the biases.
 */
export function withExpertBiases(rt: Runtime, experts: ExpertWeights, b: { gateUpBias: Float32Array; downBias: Float32Array }): ExpertWeights {
  const op = 'withExpertBiases';
  rt.assertAlive(op);
  check(experts instanceof Experts && !experts.gateUpBias, op, 'experts', 'experts from createExperts or createQuantExperts without biases', experts);
  check(b !== null && typeof b === 'object', op, 'b', 'an object { gateUpBias, downBias }', b);
  checkBiases(op, experts.E, experts.H, experts.I, b);
  return attachBiases(rt, experts, b);
}

/**
 * Uploads quantized experts, keeping ggml's blocks (SPEC §8): gateUp the bytes of E·2I rows of H values
 * of gateUpType (per expert its I gate rows, then its I up rows: a GGUF's ffn_gate_exps and
 * ffn_up_exps interleaved by expert), down those of E·H rows of I values of downType (ffn_down_exps).
 */
export function createQuantExperts(rt: Runtime, w: { E: number; H: number; I: number; gateUpType: QuantType; gateUp: Uint8Array;
                                                     downType: QuantType; down: Uint8Array; maxPartBytes?: number;
                                                     gateUpBias?: Float32Array; downBias?: Float32Array }): ExpertWeights {
  const op = 'createQuantExperts';
  rt.assertAlive(op);
  check(w !== null && typeof w === 'object', op, 'w', 'an object { E, H, I, gateUpType, gateUp, downType, down }', w);
  const { E, H, I } = w;
  check(isPosInt(E), op, 'E', 'a positive integer', E);
  check(isPosInt(H), op, 'H', 'a positive integer', H);
  check(isPosInt(I), op, 'I', 'a positive integer', I);
  for (const [arg, type, K] of [['gateUpType', w.gateUpType, H], ['downType', w.downType, I]] as const) {
    check(isQuantType(type), op, arg, `a quantized type (${QUANT_TYPES.join(', ')})`, fmt(type));
    const qk = QUANT_FORMATS[type].blockElems;
    check(K % qk === 0, op, arg === 'gateUpType' ? 'H' : 'I', `a multiple of ${qk} (a ${type} block: rows are whole blocks)`, K);
  }
  const guRow = quantRowBytes(w.gateUpType, H), dnRow = quantRowBytes(w.downType, I);
  for (const [name, data, n] of [['gateUp', w.gateUp, E * 2 * I * guRow], ['down', w.down, E * H * dnRow]] as const) {
    check(data instanceof Uint8Array && data.length === n, op, name, `a Uint8Array of ${n} bytes (${name === 'gateUp' ? `E·2I = ${E * 2 * I} rows of ${guRow}` : `E·H = ${E * H} rows of ${dnRow}`} bytes)`,
      data instanceof Uint8Array ? `${data.length} bytes` : data);
  }
  if (w.maxPartBytes !== undefined) check(isPosInt(w.maxPartBytes), op, 'maxPartBytes', 'a positive integer', w.maxPartBytes);
  checkBiases(op, E, H, I, w);
  const perPart = expertsPerPart(rt, H, I, w.gateUpType, w.maxPartBytes, op, w.downType);
  const parts: ExpertPart[] = [];
  try {
    for (const { e0, n } of partRanges(E, perPart)) {
      const gu = packQuantRows(w.gateUpType, w.gateUp.subarray(e0 * 2 * I * guRow, (e0 + n) * 2 * I * guRow), n * 2 * I, H, op).words;
      const dn = packQuantRows(w.downType, w.down.subarray(e0 * H * dnRow, (e0 + n) * H * dnRow), n * H, I, op).words;
      const gateUp = rt.tensor(gu, [gu.length], 'u32');
      parts.push({ e0, experts: n, gateUp, down: rt.tensor(dn, [dn.length], 'u32') });
    }
  } catch (e) {
    for (const p of parts) { p.gateUp.destroy(); p.down.destroy(); }
    throw e;
  }
  return attachBiases(rt, new Experts(E, H, I, w.gateUpType, parts, true, w.downType), w);
}

/**
 * Experts filled on the GPU with pseudo-random values (benchmarks of real sizes; no upload), uniform with
 * mean 0 and standard deviation std: gate|up of expert e are rows e·2I .. (e+1)·2I - 1 of what
 * createLinearOnDevice writes for K = H and `seed`, down's rows e·H .. of K = I and seed + 1 (mod 2^32)
 * (randomLinearValues gives them on the host), independent of how experts are split into parts.
 */
export function createExpertsOnDevice(rt: Runtime, o: { E: number; H: number; I: number; dtype: ExpertDType; seed?: number; std?: number;
                                                        maxPartBytes?: number }): ExpertWeights {
  const op = 'createExpertsOnDevice';
  rt.assertAlive(op);
  check(o !== null && typeof o === 'object', op, 'o', 'an object { E, H, I, dtype }', o);
  const { E, H, I, dtype } = o;
  checkExpertShape(op, E, H, I, dtype);
  const seed = o.seed ?? 0;
  check(Number.isInteger(seed) && seed >= 0 && seed < 2 ** 32, op, 'seed', 'an integer in [0, 2^32)', seed);
  const std = checkFinite(o.std ?? 1, op, 'std');
  if (o.maxPartBytes !== undefined) check(isPosInt(o.maxPartBytes), op, 'maxPartBytes', 'a positive integer', o.maxPartBytes);
  const WG = 256;
  const kernel = rt.kernel('gemm_init', 'init_main', { overrides: { W_DTYPE: DTYPE_CODE[dtype], WG } });
  const amp = Math.fround(std * Math.sqrt(3));
  const fill = (t: Tensor, row0: number, K: number, s: number) => {
    const words = t.byteLength / 4;
    rt.dispatch(kernel, { dst: t }, { words, row0, K, seed: s, amp }, Math.ceil(words / WG));
  };
  const parts = partRanges(E, expertsPerPart(rt, H, I, dtype, o.maxPartBytes, op)).map(({ e0, n }) => {
    const gateUp = rt.emptyTensor([n, 2 * I, H], dtype, false);
    const down = rt.emptyTensor([n, H, I], dtype, false);
    fill(gateUp, e0 * 2 * I, H, seed);
    fill(down, e0 * H, I, (seed + 1) >>> 0);
    return { e0, experts: n, gateUp, down };
  });
  return new Experts(E, H, I, dtype, parts, true);
}

/**
 * Wraps expert tensors made elsewhere (a loader's): parts of consecutive experts, each { gateUp
 * [n, 2I, H], down [n, H, I] }, covering experts 0..E-1 in order. destroy() frees them only when `owned`.
 */
export function expertsFromParts(rt: Runtime, o: { E: number; H: number; I: number; dtype: ExpertDType;
                                                   parts: readonly { gateUp: Tensor; down: Tensor }[]; owned?: boolean }): ExpertWeights {
  const op = 'expertsFromParts';
  rt.assertAlive(op);
  check(o !== null && typeof o === 'object', op, 'o', 'an object { E, H, I, dtype, parts }', o);
  const { E, H, I, dtype } = o;
  checkExpertShape(op, E, H, I, dtype);
  check(Array.isArray(o.parts) && o.parts.length > 0, op, 'parts', 'a non-empty array of { gateUp, down }', o.parts);
  const parts: ExpertPart[] = [];
  let e0 = 0;
  o.parts.forEach((p, i) => {
    check(p !== null && typeof p === 'object', op, `parts[${i}]`, 'an object { gateUp, down }', p);
    checkTensor(p.gateUp, op, `parts[${i}].gateUp`);
    checkTensor(p.down, op, `parts[${i}].down`);
    const n = p.gateUp.shape[0];
    for (const [name, t, shape] of [['gateUp', p.gateUp, [n, 2 * I, H]], ['down', p.down, [n, H, I]]] as [string, Tensor, number[]][]) {
      check(t.dtype === dtype, op, `parts[${i}].${name}.dtype`, `'${dtype}'`, fmt(t.dtype));
      check(t.shape.length === 3 && t.shape.every((d: number, j: number) => d === shape[j]) && e0 + n <= E, op, `parts[${i}].${name}`,
        `shape ${shapeStr(shape)} with at most ${E - e0} experts`, shapeStr(t.shape));
    }
    parts.push({ e0, experts: n, gateUp: p.gateUp, down: p.down });
    e0 += n;
  });
  check(e0 === E, op, 'parts', `experts adding up to E=${E}`, `${e0} experts`);
  return new Experts(E, H, I, dtype, parts, !!o.owned);
}

function checkExperts(w: unknown, op: string): asserts w is ExpertWeights {
  const x = w as ExpertWeights;
  check(x !== null && typeof x === 'object' && Array.isArray(x.parts) && isPosInt(x.E) && isPosInt(x.H) && isPosInt(x.I)
    && isLinearStorage(x.dtype) && isLinearStorage(x.downDtype), op, 'experts', 'an ExpertWeights (createExperts, createQuantExperts, createExpertsOnDevice or expertsFromParts)', w);
  for (const [i, p] of x.parts.entries()) {
    checkTensor(p.gateUp, op, `experts.parts[${i}].gateUp`);
    checkTensor(p.down, op, `experts.parts[${i}].down`);
  }
  for (const [name, t, n] of [['gateUpBias', x.gateUpBias, x.E * 2 * x.I], ['downBias', x.downBias, x.E * x.H]] as const) {
    if (t === undefined || t === null) continue;
    checkTensor(t, op, `experts.${name}`);
    check(t.dtype === 'f32' && t.numel === n, op, `experts.${name}`, `an f32 tensor of ${n} values`, `${t.dtype} ${shapeStr(t.shape)}`);
  }
}

// ------------------------------------------------------------------------------------------ routing

const SCORINGS = ['softmax', 'sigmoid'];
const METHODS = ['greedy', 'group_limited_greedy', 'noaux_tc'];
const FAMILIES = ['deepseek_v2', 'deepseek_v3', 'gpt_oss', 'qwen3_moe'];

function checkRouting(op: string, r: unknown, E: number): asserts r is MoeRouting {
  check(r !== null && typeof r === 'object', op, 'r', 'a MoeRouting { scoring, method, topK, nGroup, topkGroup, normTopkProb, routedScalingFactor, family }', r);
  const m = r as MoeRouting;
  check(SCORINGS.includes(m.scoring), op, 'r.scoring', "'softmax' or 'sigmoid'", fmt(m.scoring));
  check(METHODS.includes(m.method), op, 'r.method', "'greedy', 'group_limited_greedy' or 'noaux_tc'", fmt(m.method));
  check(FAMILIES.includes(m.family), op, 'r.family', "'deepseek_v2', 'deepseek_v3', 'gpt_oss' or 'qwen3_moe'", fmt(m.family));
  check(isPosInt(m.topK) && m.topK <= E, op, 'r.topK', `a positive integer up to E=${E}`, m.topK);
  check(typeof m.normTopkProb === 'boolean', op, 'r.normTopkProb', 'a boolean', m.normTopkProb);
  checkFinite(m.routedScalingFactor, op, 'r.routedScalingFactor');
  if (m.method === 'greedy') return;
  check(isPosInt(m.nGroup) && E % m.nGroup === 0, op, 'r.nGroup', `a divisor of E=${E} (method '${m.method}' groups the experts)`, m.nGroup);
  check(isPosInt(m.topkGroup) && m.topkGroup <= m.nGroup, op, 'r.topkGroup', `a positive integer up to nGroup=${m.nGroup}`, m.topkGroup);
  if (m.method === 'noaux_tc') {
    check(E / m.nGroup >= 2, op, 'r.nGroup', `at most E/2=${E / 2} (method 'noaux_tc' ranks a group by its two best experts)`, m.nGroup);
  }
}

function checkRouteOut(op: string, arg: string, t: unknown, dtype: 'i32' | 'f32', n: number): asserts t is Tensor {
  checkTensor(t, op, arg);
  check(t.dtype === dtype, op, `${arg}.dtype`, `'${dtype}'`, fmt(t.dtype));
  check(t.numel >= n, op, arg, `at least rows·topK = ${n} elements`, shapeStr(t.shape));
}

const pow2ceil = (v: number) => 2 ** Math.ceil(Math.log2(v));

/**
 * Each token's topK experts and their weights from its router logits (logits: f32 [>= rows, E], gate(x)
 * in f32), as HF transformers' DeepSeek V2 / V3 routers compute them (reference.routeRef, with the
 * math and the V2/V3 differences, at the top of src/reference/moe.ts). bias: f32 [E], V3's
 * e_score_correction_bias (selection only). ids: i32 [rows, topK], listed by decreasing choice (ties to
 * the lower expert index); weights: f32 [rows, topK]. Given ids/weights tensors (at least rows·topK
 * elements) are written instead of new ones.
 */
export function route(rt: Runtime, logits: Tensor, r: MoeRouting, o: { rows: number; bias?: Tensor; ids?: Tensor; weights?: Tensor }): { ids: Tensor; weights: Tensor } {
  const op = 'route';
  rt.assertAlive(op);
  checkTensor(logits, op, 'logits');
  check(logits.dtype === 'f32', op, 'logits.dtype', "'f32'", fmt(logits.dtype));
  check(logits.shape.length === 2, op, 'logits', 'shape [rows, E]', shapeStr(logits.shape));
  const E = logits.shape[1];
  check(E <= MOE_MAX_EXPERTS, op, 'logits', `at most ${MOE_MAX_EXPERTS} experts (columns)`, shapeStr(logits.shape));
  checkRouting(op, r, E);
  check(o !== null && typeof o === 'object', op, 'o', 'an options object { rows, bias?, ids?, weights? }', o);
  check(isPosInt(o.rows) && o.rows <= logits.shape[0], op, 'o.rows', `a positive integer up to ${logits.shape[0]} (the rows of logits)`, o.rows);
  const rows = o.rows, K = r.topK;
  if (o.bias !== undefined) {
    checkTensor(o.bias, op, 'o.bias');
    check(o.bias.dtype === 'f32' && o.bias.numel === E, op, 'o.bias', `an f32 tensor of E=${E} elements`, `${o.bias.dtype} ${shapeStr(o.bias.shape)}`);
  }
  if (o.ids !== undefined) checkRouteOut(op, 'o.ids', o.ids, 'i32', rows * K);
  if (o.weights !== undefined) checkRouteOut(op, 'o.weights', o.weights, 'f32', rows * K);
  const inputs = [logits.buffer, o.bias?.buffer];
  check(!o.ids || !inputs.includes(o.ids.buffer), op, 'o.ids', 'a buffer of its own (not that of logits or bias)', 'a shared buffer');
  check(!o.weights || (!inputs.includes(o.weights.buffer) && o.weights.buffer !== o.ids?.buffer), op, 'o.weights',
    'a buffer of its own (not that of logits, bias or ids)', 'a shared buffer');
  const ids = o.ids ?? rt.emptyTensor([rows, K], 'i32');
  const weights = o.weights ?? rt.emptyTensor([rows, K], 'f32');
  const EMAX = Math.max(64, pow2ceil(E));
  const kernel = rt.kernel('ops_moe_route', 'route_main', { consts: { EMAX, WG: Math.min(256, EMAX) } });
  const groupMode = r.method === 'greedy' ? 0 : r.method === 'group_limited_greedy' ? 1 : 2;
  const flags = (r.scoring === 'sigmoid' ? 1 : 0) | (o.bias ? 2 : 0) | ((r.family === 'deepseek_v3' && r.normTopkProb) || r.family === 'gpt_oss' || (r.family === 'qwen3_moe' && r.normTopkProb) ? 4 : 0);
  rt.dispatch(kernel, { logits, bias: o.bias ?? rt.dummy, ids, weights }, {
    rows, E, top_k: K, n_group: groupMode ? r.nGroup! : 1, topk_group: groupMode ? r.topkGroup! : 1, group_mode: groupMode, flags,
    scale: r.routedScalingFactor,
  }, rows);
  return { ids, weights };
}

// ---------------------------------------------------------------------------------------------- moe

export type MoePlan =
  | { readonly kernel: 'gemv'; /** pairs per tile */ readonly MT: number; readonly WG: number;
      /** lanes per weight row for gate|up (K = H) and for down (K = I) */ readonly KT1: number; readonly KT2: number;
      /** Quantized experts of the types with a dot path (Q8_0, Q4_0, Q4_K, Q6_K): 'dot' (a lane a
       *  32-value unit, moe_gemv_qdot.wgsl) or 'decode' (four values a load, moe_gemv_words.wgsl). */
      readonly quantPath: 'dot' | 'decode' }
  | { readonly kernel: 'gemm'; readonly BM: 64; readonly BN: 64; readonly BK: 16 }
  /** The subgroup-matrix GEMM (moe_gemm_mma.wgsl over gemm_mma.wgsl): BM pairs a tile. */
  | GemmMmaPlan;

/** Subgroup-matrix tiles of the grouped products (vec4 tiles only: moe_gemm_mma.wgsl): 64 pairs a tile
 *  (an expert's pairs rarely fill more), preferred first. */
export const MOE_MMA_TILES: readonly GemmMmaTile[] = [
  { SGR: 2, SGC: 4, TMR: 2, TNC: 4, BK: 32, PF: 1, VEC: true },
  { SGR: 2, SGC: 2, TMR: 2, TNC: 2, BK: 32, PF: 1, VEC: true },
];

export interface PlanMoeOptions {
  rows: number; topK: number; E: number; H: number; I: number;
  /** gate|up's storage, and down's (default: the same). */
  dtype: ExpertStorage; downDtype?: ExpertStorage;
  /** Force a kernel ('auto': gemv while pairs per chosen expert average at most MOE_GEMV_MAX_ROWS, then
   *  the subgroup-matrix GEMM for 16-bit experts where the adapter has it and engine.tuning.linearMma
   *  allows, else the FMA GEMM). */
  kernel?: 'auto' | 'gemv' | 'gemm' | 'gemm-mma';
  /** gemm-mma: an entry of MOE_MMA_TILES. */
  tile?: number;
  /** gemv over quantized experts with a dot path: 'dot' or 'decode' (default: 'dot' up to
   *  engine.tuning.moeQuantDotMaxRows rows, else 'decode'). */
  quantPath?: 'dot' | 'decode';
}

const pow2floor = (v: number) => 2 ** Math.floor(Math.log2(v));

/** The product kernel and its shape for a MoE layer of these sizes (see the top of this file). */
export function planMoe(rt: Runtime, p: PlanMoeOptions): MoePlan {
  const op = 'planMoe';
  check(p !== null && typeof p === 'object', op, 'p', 'an object { rows, topK, E, H, I, dtype }', p);
  check(isPosInt(p.rows), op, 'rows', 'a positive integer', p.rows);
  check(isPosInt(p.topK), op, 'topK', 'a positive integer', p.topK);
  const downDtype = p.downDtype ?? p.dtype;
  if (isQuantType(p.dtype) || isQuantType(downDtype)) {
    check(isPosInt(p.E), op, 'E', 'a positive integer', p.E);
    for (const [arg, d, K] of [['dtype', p.dtype, p.H], ['downDtype', downDtype, p.I]] as const) {
      check(isLinearStorage(d), op, arg, `'f32', 'f16', 'bf16' or a quantized type (${QUANT_TYPES.join(', ')})`, fmt(d));
      const unit = isQuantType(d) ? QUANT_FORMATS[d].blockElems : linearVectorWidth(d);
      check(isPosInt(K) && K % unit === 0, op, arg === 'dtype' ? 'H' : 'I', `a multiple of ${unit} for ${d} weights`, K);
    }
  } else {
    checkExpertShape(op, p.E, p.H, p.I, p.dtype);
    check(downDtype === p.dtype, op, 'downDtype', `'${p.dtype}' (float experts share one dtype)`, fmt(downDtype));
  }
  const kernel = p.kernel ?? 'auto';
  check(['auto', 'gemv', 'gemm', 'gemm-mma'].includes(kernel), op, 'kernel', "'auto', 'gemv', 'gemm' or 'gemm-mma'", fmt(kernel));
  const P = p.rows * p.topK;
  const perExpert = P / Math.min(p.E, P);
  if (kernel === 'gemv' || (kernel === 'auto' && perExpert <= MOE_GEMV_MAX_ROWS)) {
    // The dot path (a lane a 32-value unit) reads each unit's x straight from the x rows, 8 vec4 loads a
    // lane: at one row the fastest (H200, DeepSeek-V2-Lite Q4_K_M at batch 1: its experts 0.92 ms a
    // step against 1.72 on the decode path), but with more rows those loads are uncoalesced: at batch
    // 8 and 32 the experts took 2.5-3.5x the decode path's time (bench/notes/qgemv.md §9).
    if (p.quantPath !== undefined) check(p.quantPath === 'dot' || p.quantPath === 'decode', op, 'quantPath', "'dot' or 'decode'", fmt(p.quantPath));
    const dot = (hasQuantDot(p.dtype) || hasQuantDot(downDtype)) && (p.quantPath ?? (p.rows <= rt.tuning.moeQuantDotMaxRows ? 'dot' : 'decode')) === 'dot';
    // Lanes per weight row: at most 32, and no more than the row has words (16/32-bit experts, the
    // decode path) or 32-value units (the dot path, ops/moe_gemv_qdot.wgsl).
    const KT = (K: number, d: ExpertStorage) => Math.max(1, Math.min(32, pow2floor(K / (dot && hasQuantDot(d) ? 32 : linearVectorWidth(d)))));
    // A token's ids are distinct, so no expert gets more pairs than there are rows. The dot path holds
    // each tile row's 32 x values in registers: at most 4 rows a tile there.
    const MT = Math.min(dot ? 4 : 8, pow2ceil(p.rows));
    return { kernel: 'gemv', MT, WG: 256, KT1: KT(p.H, p.dtype), KT2: KT(p.I, downDtype), quantPath: dot ? 'dot' : 'decode' };
  }
  // Quantized experts enter the matrices as f16 (rounded on the way into workgroup memory): not while a
  // step verifies speculative proposals (Runtime.exactProducts).
  if (kernel === 'gemm-mma' || (kernel === 'auto' && !(rt.exactProducts && isQuantType(p.dtype)) && rt.tuning.linearMma === 'auto')) {
    const mmaDtype = p.dtype === 'f32' || downDtype === 'f32' ? 'f32' : isQuantType(p.dtype) ? 'f16' : p.dtype;
    const mma = planMma(rt, { M: P, N: Math.min(p.H, 2 * p.I), dtype: mmaDtype, tiles: MOE_MMA_TILES, tilesName: 'MOE_MMA_TILES', tile: p.tile,
      targetWorkgroups: LINEAR_GEMM_TARGET_WORKGROUPS }, op);
    if (mma) return mma;
    if (kernel === 'gemm-mma') {
      fail(op, 'kernel', `'auto', 'gemv' or 'gemm' (no subgroup-matrix GEMM here: ${linearMmaUnavailable(rt, mmaDtype) ?? 'no tile fits the adapter\'s limits'})`, "'gemm-mma'");
    }
  }
  return { kernel: 'gemm', BM: 64, BN: 64, BK: 16 };
}

export interface MoeOptions {
  /** Tokens: rows of x, ids and weights used. */
  rows: number;
  /** f32 [>= rows, H]; rows past `rows` are left alone. */
  out: Tensor;
  /** Add into out (the residual stream) instead of overwriting it. */
  accumulate?: boolean;
  /** A plan from planMoe (default: planMoe's choice). */
  plan?: MoePlan;
  /** Cap on each workspace buffer (default MOE_WORKSPACE_BYTES and the device's largest binding). */
  maxWorkspaceBytes?: number;
  /** The gated product between gate|up and down: 'silu' (the default) silu(gate)·up; 'swiglu_oai' gpt-oss's
   *  (clamp(up, ±limit) + 1) · g · sigmoid(alpha·g), g = min(gate, limit) (alpha 1.702, limit 7 by default). */
  act?: 'silu' | 'swiglu_oai';
  alpha?: number;
  limit?: number;
}

/**
 * out[t] (+)= Σ_j weights[t, j] · down_e(silu(gate_e(x[t])) · up_e(x[t])), e = ids[t, j], for t < rows
 * (o.act 'swiglu_oai': gpt-oss's gated product in place of silu(gate)·up; experts with biases add them
 * to gate|up before it and to down's output)
 * (reference.moeRef); x f32 [>= rows, H]; routing.ids i32 [>= rows, topK] (an id outside [0, E) adds
 * nothing), routing.weights f32 [>= rows, topK] (route() gives both). Recorded on the GPU; returns out.
 */
export function moe(rt: Runtime, x: Tensor, routing: { ids: Tensor; weights: Tensor }, experts: ExpertWeights, o: MoeOptions): Tensor {
  const op = 'moe';
  rt.assertAlive(op);
  checkExperts(experts, op);
  const { E, H, I } = experts;
  check(E <= MOE_MAX_EXPERTS, op, 'experts.E', `at most ${MOE_MAX_EXPERTS}`, E);
  checkTensor(x, op, 'x');
  check(x.dtype === 'f32', op, 'x.dtype', "'f32'", fmt(x.dtype));
  check(x.shape.length === 2 && x.shape[1] === H, op, 'x', `shape [rows, H=${H}]`, shapeStr(x.shape));
  check(routing !== null && typeof routing === 'object', op, 'routing', 'an object { ids, weights } (from route)', routing);
  const { ids, weights } = routing;
  checkTensor(ids, op, 'routing.ids');
  check(ids.dtype === 'i32' && ids.shape.length === 2, op, 'routing.ids', 'an i32 tensor [rows, topK]', `${ids.dtype} ${shapeStr(ids.shape)}`);
  const topK = ids.shape[1];
  checkTensor(weights, op, 'routing.weights');
  check(weights.dtype === 'f32' && weights.shape.length === 2 && weights.shape[1] === topK, op, 'routing.weights',
    `an f32 tensor [rows, topK=${topK}]`, `${weights.dtype} ${shapeStr(weights.shape)}`);
  check(o !== null && typeof o === 'object', op, 'o', 'an options object { rows, out, accumulate? }', o);
  const act = o.act ?? 'silu';
  check(act === 'silu' || act === 'swiglu_oai', op, 'o.act', "'silu' or 'swiglu_oai'", fmt(act));
  if (act !== 'swiglu_oai') check(o.alpha === undefined && o.limit === undefined, op, 'o.alpha', "no alpha or limit (they belong to act 'swiglu_oai')", o.alpha ?? o.limit);
  const alpha = o.alpha === undefined ? 1.702 : checkFinite(o.alpha, op, 'o.alpha');
  const limit = o.limit === undefined ? 7 : checkFinite(o.limit, op, 'o.limit');
  check(limit > 0, op, 'o.limit', 'a number > 0', limit);
  const avail = Math.min(x.shape[0], ids.shape[0], weights.shape[0]);
  check(isPosInt(o.rows) && o.rows <= avail, op, 'o.rows', `a positive integer up to ${avail} (the rows of x, ids and weights)`, o.rows);
  const rows = o.rows;
  const out = o.out;
  checkTensor(out, op, 'o.out');
  check(out.dtype === 'f32', op, 'o.out.dtype', "'f32'", fmt(out.dtype));
  check(out.shape.length === 2 && out.shape[1] === H && out.shape[0] >= rows, op, 'o.out', `shape [>= rows=${rows}, H=${H}]`, shapeStr(out.shape));
  check(![x.buffer, ids.buffer, weights.buffer].includes(out.buffer), op, 'o.out', 'a buffer of its own (not that of x, ids or weights)', 'a shared buffer');
  const deviceMax = Math.min(rt.limits.maxStorageBufferBindingSize, rt.limits.maxBufferSize);
  const cap = Math.min(deviceMax, o.maxWorkspaceBytes ?? MOE_WORKSPACE_BYTES);
  if (o.maxWorkspaceBytes !== undefined) check(isPosInt(o.maxWorkspaceBytes), op, 'o.maxWorkspaceBytes', 'a positive integer', o.maxWorkspaceBytes);
  const rowBytes = topK * Math.max(2 * I, H) * 4;
  const chunk = Math.min(rows, Math.floor(cap / rowBytes));
  check(chunk >= 1, op, 'o.maxWorkspaceBytes', `room for one token's workspace (${rowBytes} bytes)`, cap);
  let plan = o.plan;
  if (plan) {
    check(plan !== null && typeof plan === 'object' && ['gemv', 'gemm', 'gemm-mma'].includes(plan.kernel)
      && (plan.kernel !== 'gemm-mma' || (experts.dtype !== 'f32' && experts.downDtype !== 'f32')), op, 'o.plan', `a plan from planMoe for ${experts.dtype} experts`, plan);
  } else {
    plan = planMoe(rt, { rows, topK, E, H, I, dtype: experts.dtype, downDtype: experts.downDtype });
  }

  const BM = plan.kernel === 'gemv' ? plan.MT : plan.BM;
  const EMAX = Math.max(64, pow2ceil(E));
  const sortK = rt.kernel('ops_moe_sort', 'sort_main', { consts: { EMAX } });
  const combineK = rt.kernel('ops_moe_combine', 'combine_main');
  // A stage's program carries its weights' decoder (core/shaders.ts); quantized words are f32 (EPV 4),
  // or f16 on their way into the subgroup matrices.
  const stageK = (KT: number, st: ExpertStorage) => {
    const { tail, W_DTYPE } = weightProgram(st, plan.kernel === 'gemm-mma');
    const EPV = linearVectorWidth(st);
    return plan.kernel === 'gemv'
      ? rt.kernel(`ops_moe_gemv${hasQuantDot(st) && plan.quantPath === 'decode' ? '_dq' : ''}${tail}`, 'gemv_main', { overrides: { W_DTYPE }, consts: { MT: plan.MT, KT, WG: plan.WG, EPV } })
      : plan.kernel === 'gemm-mma'
        ? rt.kernel(`ops_moe_gemm_mma${tail}`, 'gemm_mma_main', { overrides: { W_DTYPE }, consts: mmaConsts(rt, plan), enables: MMA_ENABLES, unroll: true })
        : rt.kernel(`ops_moe_gemm${tail}`, 'gemm_main', { overrides: { W_DTYPE }, consts: { BM: plan.BM, BN: plan.BN, BK: plan.BK, EPV } });
  };
  const k1 = stageK(plan.kernel === 'gemv' ? plan.KT1 : 0, experts.dtype);
  const k2 = stageK(plan.kernel === 'gemv' ? plan.KT2 : 0, experts.downDtype);
  const columnBlocks = (N: number, KT: number) => Math.ceil(N / (plan.kernel === 'gemv' ? 4 * plan.WG / KT : plan.BN));

  const P0 = chunk * topK;
  // Written and read by these dispatches alone: the next layer's moe may take them before the submit.
  const lists = rt.gpuScratch((2 * E + 2 + 3 * P0) * 4, 'moe lists');
  const gu = rt.gpuScratch(P0 * 2 * I * 4, 'moe gate|up');
  const y = rt.gpuScratch(P0 * H * 4, 'moe expert outputs');
  for (let t0 = 0; t0 < rows; t0 += chunk) {
    const n = Math.min(chunk, rows - t0);
    const P = n * topK;
    const o_ts = E + 1, o_te = 2 * E + 2, o_tr = o_te + P, o_sorted = o_tr + P;
    rt.dispatch(sortK, { ids, lists }, { P, E, BM, p0: t0 * topK, o_ts, o_te, o_tr, o_sorted }, 1);
    const stage = (k: typeof k1, which: 'gateUp' | 'down', src: Tensor | GPUBuffer, dst: GPUBuffer) => {
      const bias = which === 'gateUp' ? experts.gateUpBias : experts.downBias;
      const N = which === 'gateUp' ? 2 * I : H;
      const K = which === 'gateUp' ? H : I;
      const KT = plan.kernel === 'gemv' ? (which === 'gateUp' ? plan.KT1 : plan.KT2) : 0;
      const st = which === 'gateUp' ? experts.dtype : experts.downDtype;
      for (const part of experts.parts) {
        const tiles = Math.min(P, Math.floor((P + Math.min(part.experts, P) * (BM - 1)) / BM));
        rt.dispatch(k, { w: part[which], x: src, lists, out: dst, bias: bias ?? rt.dummy }, {
          N, K, e0: part.e0, e1: part.e0 + part.experts, tiles,
          in_div: which === 'gateUp' ? topK : 1, in_row0: which === 'gateUp' ? t0 : 0, in_stride: (which === 'gateUp' ? H : 2 * I) / 4,
          act: which === 'gateUp' ? 0 : act === 'silu' ? 1 : 2, o_ts, o_te, o_tr, o_sorted, q_plane: isQuantType(st) ? quantPlaneWord(st, part.experts * N, K) : 0,
          has_bias: bias ? 1 : 0, alpha, limit,
        }, tiles * columnBlocks(N, KT));
      }
    };
    stage(k1, 'gateUp', x, gu);
    stage(k2, 'down', gu, y);
    rt.dispatch(combineK, { ids, weights, y, out }, { rows: n, t0, top_k: topK, H4: H / 4, E, accumulate: o.accumulate ? 1 : 0 },
      Math.ceil((n * H) / 4 / 256));
  }
  for (const b of [lists, gu, y]) rt.releaseBuffer(b);
  return out;
}
