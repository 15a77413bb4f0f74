// Whole models (API.md "Whole models"): loading a checkpoint onto the GPU, and the step runtime that
// serves sequences over the paged cache with continuous batching.
//
// A step: the block manager places the step's tokens (decodes first, then chunks of prompts under a
// token budget), the host writes the step's ids, positions, slots and sampled rows in four small
// uploads, plans attention once, and records embedding, every layer, the lm_head on each sampled
// sequence's last row, and sampling — through a DispatchCache, so a steady-state step allocates and
// uploads nothing else. Only token ids come back.
//
// generate keeps up to tuning.stepsInFlight steps in flight (three by default): a sequence's next input
// token can be the previous step's sampled id still on the GPU (the step kernel reads it there), so
// step k+1 is recorded and submitted while step k runs and the ids of the steps before travel back. A
// stop token read late costs that sequence a wasted step or two; their output is dropped and its blocks
// are freed once no step in flight uses them. A decode step that repeats one already recorded replays
// its layers' commands (step graphs, tuning.stepGraphs).
import type { DType } from '../core/dtype.js';
import { WebinferError, check, checkKeys, checkPosInt, fail, fmt } from '../core/errors.js';
import { DispatchCache, type Runtime, type StepGraph } from '../core/runtime.js';
import type { Tensor } from '../core/tensor.js';
import { linear } from '../ops/gemm.js';
import { embedding } from '../ops/embedding.js';
import { argmax, sample } from '../ops/sample.js';
import { KVCacheManager } from '../serve/kv_manager.js';
import { parseConfig, type ModelConfig } from './config.js';
import { ropeTable } from './rope.js';
import type { SafetensorsFile } from './safetensors.js';
import { validateCheckpoint, WEIGHT_DTYPES } from './schema.js';
import type { GGUFFile } from './gguf.js';
import { ggufCheckpoint, isGGUFFile } from './gguf_weights.js';
import { QUANT_TYPES } from '../core/quant.js';
import type { Architecture, StepContext } from './step.js';
import { checkpointDType, WeightReader, type QuantizeOnLoad, type WeightDType } from './weights.js';
import { LlamaFamily } from './llama.js';
import { DeepSeekFamily } from './deepseek.js';

/** The most steps in flight tuning.stepsInFlight may ask for (the sampled-id ring's length). */
const MAX_IN_FLIGHT = 4;

/** Architectures the step runtime runs today (parseConfig knows DeepSeek's too). */
export const RUNNABLE_ARCHITECTURES = Object.freeze(['LlamaForCausalLM', 'MistralForCausalLM', 'Qwen2ForCausalLM', 'Qwen3ForCausalLM',
  'DeepseekV2ForCausalLM', 'DeepseekV3ForCausalLM']);

export interface LoadModelOptions {
  /** The parsed config.json of an HF checkpoint (a GGUF file's own config when weights is one). */
  config?: object;
  /** Its safetensors file(s) (loadSafetensors; a sharded checkpoint's shards), or a GGUF file (loadGGUF). */
  weights: SafetensorsFile | readonly SafetensorsFile[] | GGUFFile;
  /** How weights are stored on the GPU: 'checkpoint' (the default) as in the checkpoint, quantized or
   *  not; a float dtype converts (and dequantizes) them; 'q8' | 'q4' quantize a 16/32-bit checkpoint's
   *  linear layers as they upload (QuantizeOnLoad says how). */
  dtype?: 'checkpoint' | WeightDType | QuantizeOnLoad;
  kvCache?: { numBlocks?: number; blockSize?: number; dtype?: DType | 'fp8_ds_mla' };
  onProgress?: (loadedBytes: number, totalBytes: number) => void;
  /** Tokens one step processes at most: decodes plus prompt chunks (default 512). */
  maxTokensPerStep?: number;
  /** Sequences one step serves at most (default 64). */
  maxSeqsPerStep?: number;
  /**
   * Load weights holding NaN or ±Inf as they are (default false). Every tensor is scanned as it
   * uploads, and by default one with a NaN or ±Inf as stored on the GPU (the checkpoint's own, a value
   * past what the storage dtype holds, a quantized block's non-finite scale) is refused with its name:
   * such a model's logits are NaN, and greedy decoding then returns token 0 forever.
   */
  allowNonFinite?: boolean;
}

export interface GenerateOptions {
  maxNewTokens?: number;
  /** 0 (the default): greedy. */
  temperature?: number;
  topK?: number;
  topP?: number;
  seed?: number;
  /** Tokens that end a sequence (kept as its last token); default: the config's eos_token_id. */
  stopTokens?: number[];
  onToken?: (prompt: number, token: number) => void;
  signal?: AbortSignal;
}

/** What the last generate or logits call did, for callers that measure. */
export interface RunStats {
  steps: number;
  /** Tokens placed in the cache (prompts and generated). */
  tokens: number;
  generated: number;
  wallMs: number;
  /** Host time recording steps (scheduling, uploads, encoding). */
  hostMs: number;
}

interface Seq {
  index: number;
  id: string;
  prompt: Int32Array;
  /** Prompt tokens placed in the cache so far. */
  fed: number;
  /** Tokens known on the host. */
  out: number[];
  /** Samples requested so far (known or in flight). */
  issued: number;
  done: boolean;
  /** The step and row of the latest sample requested. */
  lastStep: number;
  lastRow: number;
  /** The newest step whose work includes this sequence. */
  usedBy: number;
  admitted: boolean;
  freed: boolean;
}

interface Req { seq: Seq; ids: number[]; sample: boolean }

const OP = 'loadModel';
/** The options of kvCache (loadModel, createRandomModel). */
const CACHE_OPTIONS = ['numBlocks', 'blockSize', 'dtype'] as const;

export async function loadModel(rt: Runtime, o: LoadModelOptions): Promise<Model> {
  rt.assertAlive(OP);
  check(o !== null && typeof o === 'object', OP, 'o', '{ config, weights, dtype?, kvCache?, onProgress? }', o);
  // Every option read here, and the rest of loadCheckpoint's Checkpoint (`loadModel({ ...checkpoint })`);
  // any other name is a misspelling, refused rather than ignored. A Record over the options' keys: a
  // new option must be listed here to compile.
  const known: Record<keyof LoadModelOptions | 'tokenizer' | 'tokenizerConfig' | 'generationConfig' | 'name', true> = {
    config: true, weights: true, dtype: true, kvCache: true, onProgress: true, maxTokensPerStep: true, maxSeqsPerStep: true, allowNonFinite: true,
    tokenizer: true, tokenizerConfig: true, generationConfig: true, name: true,
  };
  checkKeys(OP, 'o', o, Object.keys(known));
  const gguf = isGGUFFile(o.weights) ? o.weights : null;
  const config = o.config ?? gguf?.config;
  check(config !== null && typeof config === 'object', OP, 'o.config', "a parsed config.json object (optional with GGUF weights)", config);
  const cfg = parseConfig(config);
  if (!RUNNABLE_ARCHITECTURES.includes(cfg.architecture)) {
    throw new WebinferError(`${OP}: config.architectures: expected one of ${RUNNABLE_ARCHITECTURES.join(', ')} (the architectures the step runtime runs), got ${cfg.architecture}`);
  }
  const files = gguf ? [ggufCheckpoint(gguf, cfg)] : (Array.isArray(o.weights) ? o.weights : [o.weights]) as SafetensorsFile[];
  check(files.length > 0 && files.every((f) => f && f.tensors instanceof Map && typeof f.bytes === 'function'), OP, 'o.weights',
    'a SafetensorsFile or an array of them (loadSafetensors), or a GGUFFile (loadGGUF)', o.weights);
  if (o.dtype !== undefined) check(['checkpoint', 'f32', 'f16', 'bf16', 'q8', 'q4'].includes(o.dtype), OP, 'o.dtype', "'checkpoint', 'f32', 'f16', 'bf16', 'q8' or 'q4'", fmt(o.dtype));
  if (o.onProgress !== undefined) check(typeof o.onProgress === 'function', OP, 'o.onProgress', 'a function (loadedBytes, totalBytes)', o.onProgress);
  if (o.allowNonFinite !== undefined) check(typeof o.allowNonFinite === 'boolean', OP, 'o.allowNonFinite', 'a boolean', fmt(o.allowNonFinite));
  const kvo = o.kvCache ?? {};
  check(kvo !== null && typeof kvo === 'object' && !Array.isArray(kvo), OP, 'o.kvCache', '{ numBlocks?, blockSize?, dtype? }', kvo);
  checkKeys(OP, 'o.kvCache', kvo, CACHE_OPTIONS);
  const maxTokens = o.maxTokensPerStep === undefined ? 512 : checkPosInt(o.maxTokensPerStep, OP, 'o.maxTokensPerStep');
  const maxSeqs = o.maxSeqsPerStep === undefined ? 64 : checkPosInt(o.maxSeqsPerStep, OP, 'o.maxSeqsPerStep');
  // Every name and shape checked before any GPU memory is taken.
  const resolved = validateCheckpoint(cfg, files, gguf ? [...WEIGHT_DTYPES, ...QUANT_TYPES] : WEIGHT_DTYPES);
  const quantize = o.dtype === 'q8' || o.dtype === 'q4' ? o.dtype : undefined;
  const keepQuantized = o.dtype === undefined || o.dtype === 'checkpoint' || quantize !== undefined;
  const dtype = keepQuantized ? checkpointDType(resolved, gguf || quantize ? (quantize ? 'bf16' : 'f16') : undefined) : o.dtype as WeightDType;
  const arch = architectureFor(rt, cfg);
  const cacheDtype = kvo.dtype ?? (dtype === 'f32' ? arch.cacheDTypes[0] : 'f16');
  check(arch.cacheDTypes.includes(cacheDtype), OP, 'o.kvCache.dtype', `one of ${arch.cacheDTypes.map((d) => `'${d}'`).join(', ')} for ${cfg.architecture}`, fmt(cacheDtype));
  const blockSize = kvo.blockSize === undefined ? 16 : checkPosInt(kvo.blockSize, OP, 'o.kvCache.blockSize');
  const numBlocks = kvo.numBlocks === undefined
    ? defaultBlocks(rt, cfg, arch.cacheBytes(cacheDtype), blockSize)
    : checkPosInt(kvo.numBlocks, OP, 'o.kvCache.numBlocks');
  let reader: WeightReader | null = null;
  try {
    return await build(rt, OP, cfg, arch, { numBlocks, blockSize, cacheDtype, maxTokens, maxSeqs, dtype },
      () => arch.load(reader = new WeightReader(files, resolved, o.onProgress, keepQuantized, quantize, o.allowNonFinite === true), dtype), () => reader?.destroyLoaded());
  } finally {
    // File handles go once the weights are on the GPU (or the load failed); a file read again (a
    // second loadModel of the same SafetensorsFile or GGUFFile) opens again (close() in their docs).
    await Promise.allSettled(files.map((f) => f.close?.()));
  }
}

/** The step runtime's implementation of a config's architecture. */
function architectureFor(rt: Runtime, cfg: ModelConfig): Architecture {
  return cfg.mla ? new DeepSeekFamily(rt, cfg) : new LlamaFamily(rt, cfg);
}

/**
 * The model on the GPU: weights, the cache, the step buffers. The cache's size is checked before
 * anything is taken, and the allocations run under the device's error scopes (Runtime.allocating): a
 * GPU allocation that fails is one named error, with everything taken so far released (`release`:
 * what the architecture may not hold yet, the weights of a layer read partway).
 */
async function build(rt: Runtime, op: string, cfg: ModelConfig, arch: Architecture,
                     o: { numBlocks: number; blockSize: number; cacheDtype: string; maxTokens: number; maxSeqs: number; dtype: WeightDType },
                     weights: () => Promise<void> | void, release: () => void = () => {}): Promise<Model> {
  // kvCache: { numBlocks: 1e9 } was taken on trust: Dawn printed thousands of out-of-memory errors, and
  // the host then ran out of heap building a list of a billion free blocks. Slots are i32 (slot
  // mappings, block tables), and a software adapter's buffers are the host's memory.
  const perBlock = cfg.numLayers * arch.cacheBytes(o.cacheDtype).perToken * o.blockSize;
  const gib = (b: number) => `${(b / 2 ** 30).toFixed(2)} GiB`;
  const limits: [number, string][] = [[Math.floor((2 ** 31 - 1) / o.blockSize), `cache slots are i32: blocks × blockSize ${o.blockSize} below 2^31`]];
  const memory = await rt.memoryBytes();
  if (memory !== null) {
    limits.push([Math.floor(memory / perBlock), `a software adapter keeps the cache in the host's memory, ${gib(memory)}; a block of ${o.blockSize} tokens takes ${perBlock} bytes over ${cfg.numLayers} layers`]);
  }
  for (const [most, why] of limits) check(o.numBlocks <= most, op, 'o.kvCache.numBlocks', `at most ${most} blocks (${why})`, o.numBlocks);
  let model: Model | null = null;
  return rt.allocating(async (stage) => {
    await weights();
    await stage();
    arch.createCaches({ numBlocks: o.numBlocks, blockSize: o.blockSize, dtype: o.cacheDtype });
    // Before the host builds its block list of the cache's size.
    await stage();
    arch.allocate(o.maxTokens);
    model = new Model(rt, cfg, arch, o);
    return model;
  }, () => {
    if (model) model.destroy();
    else arch.destroy();
    release();
  }, (e, outOfMemory) => outOfMemory
    ? `${op}: the GPU ran out of memory for the model (its weights, a KV cache of ${o.numBlocks} blocks: ${gib(o.numBlocks * perBlock)}, `
      + `steps of ${o.maxTokens} tokens); everything it had taken is released. A smaller kvCache.numBlocks, dtype or maxTokensPerStep may fit (${e.message})`
    : `${op}: the GPU refused an allocation or upload of the model; everything it had taken is released (${e.message})`);
}

/**
 * A model of a config's shape with random weights made on the GPU (nothing read or uploaded): for
 * benchmarks at real model shapes and the default workload. Its outputs mean nothing.
 */
export async function createRandomModel(rt: Runtime, o: { config: object; dtype?: WeightDType; seed?: number;
    kvCache?: { numBlocks?: number; blockSize?: number; dtype?: DType | 'fp8_ds_mla' }; maxTokensPerStep?: number; maxSeqsPerStep?: number }): Promise<Model> {
  const op = 'createRandomModel';
  rt.assertAlive(op);
  check(o !== null && typeof o === 'object', op, 'o', '{ config, dtype?, seed?, kvCache? }', o);
  checkKeys(op, 'o', o, ['config', 'dtype', 'seed', 'kvCache', 'maxTokensPerStep', 'maxSeqsPerStep']);
  const cfg = parseConfig(o.config);
  if (!RUNNABLE_ARCHITECTURES.includes(cfg.architecture)) {
    throw new WebinferError(`${op}: config.architectures: expected one of ${RUNNABLE_ARCHITECTURES.join(', ')}, got ${cfg.architecture}`);
  }
  const dtype = o.dtype ?? 'bf16';
  check(['f32', 'f16', 'bf16'].includes(dtype), op, 'o.dtype', "'f32', 'f16' or 'bf16'", fmt(dtype));
  if (o.seed !== undefined) check(Number.isInteger(o.seed) && o.seed >= 0 && o.seed < 2 ** 32, op, 'o.seed', 'an integer in [0, 2^32)', o.seed);
  const kvo = o.kvCache ?? {};
  check(kvo !== null && typeof kvo === 'object' && !Array.isArray(kvo), op, 'o.kvCache', '{ numBlocks?, blockSize?, dtype? }', kvo);
  checkKeys(op, 'o.kvCache', kvo, CACHE_OPTIONS);
  const blockSize = kvo.blockSize === undefined ? 16 : checkPosInt(kvo.blockSize, op, 'o.kvCache.blockSize');
  const maxTokens = o.maxTokensPerStep === undefined ? 512 : checkPosInt(o.maxTokensPerStep, op, 'o.maxTokensPerStep');
  const maxSeqs = o.maxSeqsPerStep === undefined ? 64 : checkPosInt(o.maxSeqsPerStep, op, 'o.maxSeqsPerStep');
  const arch = architectureFor(rt, cfg);
  const cacheDtype = kvo.dtype ?? (dtype === 'f32' ? arch.cacheDTypes[0] : 'f16');
  check(arch.cacheDTypes.includes(cacheDtype), op, 'o.kvCache.dtype', `one of ${arch.cacheDTypes.map((d) => `'${d}'`).join(', ')} for ${cfg.architecture}`, fmt(cacheDtype));
  const numBlocks = kvo.numBlocks === undefined ? defaultBlocks(rt, cfg, arch.cacheBytes(cacheDtype), blockSize) : checkPosInt(kvo.numBlocks, op, 'o.kvCache.numBlocks');
  return build(rt, op, cfg, arch, { numBlocks, blockSize, cacheDtype, dtype, maxTokens, maxSeqs }, () => arch.initRandom(dtype, o.seed ?? 1));
}

/**
 * Blocks when the caller names none: each layer's K and V caches within the device's largest binding,
 * all layers within 1 GiB, and no more than 8 sequences of the model's full length.
 */
function defaultBlocks(rt: Runtime, cfg: ModelConfig, c: { perToken: number; perBufferRow: number }, bs: number): number {
  const bind = Math.min(rt.limits.maxStorageBufferBindingSize, rt.limits.maxBufferSize);
  const bindTokens = Math.floor(bind / c.perBufferRow);
  const budgetTokens = Math.floor(2 ** 30 / (cfg.numLayers * c.perToken));
  const tokens = Math.min(bindTokens, 8 * cfg.maxPositionEmbeddings, Math.max(budgetTokens, Math.min(cfg.maxPositionEmbeddings, bindTokens)));
  return Math.max(1, Math.floor(tokens / bs));
}

export class Model {
  readonly architecture: string;
  readonly config: ModelConfig;
  readonly weightDType: WeightDType;
  /** GPU bytes of the weights as stored (quantized ones in their blocks). */
  readonly weightBytes: number;
  readonly maxTokensPerStep: number;
  readonly maxSeqsPerStep: number;
  readonly numBlocks: number;
  readonly blockSize: number;
  readonly cacheDType: string;
  /** What the last generate or logits did. */
  lastRun: RunStats = { steps: 0, tokens: 0, generated: 0, wallMs: 0, hostMs: 0 };
  private readonly kv: KVCacheManager;
  private readonly dc: DispatchCache;
  private readonly h: Tensor;
  private readonly idsIn: Tensor;
  private readonly ids: Tensor;
  private readonly pos: Tensor;
  private readonly slots: Tensor;
  private readonly gather: Tensor;
  private readonly logitsT: Tensor;
  /** Each step's sampled ids, a ring of the call's steps in flight: step k writes sampled[k % inFlight]. */
  private readonly sampled: Tensor[];
  private cos: Tensor | null = null;
  private sin: Tensor | null = null;
  private tablePositions = 0;
  private stepNo = 0;
  /** The step number at which the current call began. */
  private runStart = 0;
  private busy = false;
  /** Steps in flight for the running call (tuning.stepsInFlight, read when it starts). */
  private inFlight = 3;
  private destroyed = false;
  private nextSeq = 0;
  /** Recorded layers by the architecture's step signature, least recently used first (tuning.stepGraphs). */
  private readonly graphs = new Map<string, { graph: StepGraph; x: Tensor }>();
  /** Steps whose layers were replayed, and recorded anew, for tests and the benchmark. */
  readonly graphStats: { replayed: number; recorded: number; lastTaint: string | null } = { replayed: 0, recorded: 0, lastTaint: null };

  constructor(private readonly rt: Runtime, cfg: ModelConfig, private readonly arch: Architecture,
              o: { numBlocks: number; blockSize: number; maxTokens: number; maxSeqs: number; dtype: WeightDType; cacheDtype: string }) {
    this.architecture = cfg.architecture;
    this.config = cfg;
    this.weightDType = o.dtype;
    this.weightBytes = arch.storedWeightBytes();
    this.maxTokensPerStep = o.maxTokens;
    this.maxSeqsPerStep = o.maxSeqs;
    this.numBlocks = o.numBlocks;
    this.blockSize = o.blockSize;
    this.cacheDType = o.cacheDtype;
    this.kv = new KVCacheManager({ numBlocks: o.numBlocks, blockSize: o.blockSize });
    this.dc = new DispatchCache(rt);
    const T = o.maxTokens, S = o.maxSeqs;
    this.h = rt.zeros([T, cfg.hiddenSize]);
    this.idsIn = rt.zeros([T], 'i32');
    this.ids = rt.zeros([T], 'i32');
    this.pos = rt.zeros([T], 'i32');
    this.slots = rt.zeros([T], 'i32');
    this.gather = rt.zeros([S], 'i32');
    this.logitsT = rt.zeros([S, cfg.vocabSize]);
    this.sampled = Array.from({ length: MAX_IN_FLIGHT }, () => rt.zeros([S], 'i32'));
  }

  private enter(op: string): void {
    if (this.destroyed) throw new WebinferError(`${op}: the model was destroyed`);
    this.rt.assertAlive(op);
    if (this.busy) throw new WebinferError(`${op}: another logits or generate call of this model is running; await it first`);
    const k = this.rt.tuning.stepsInFlight;
    check(Number.isInteger(k) && k >= 2 && k <= MAX_IN_FLIGHT, op, 'engine.tuning.stepsInFlight', `an integer from 2 to ${MAX_IN_FLIGHT}`, k);
    this.inFlight = k;
    this.busy = true;
  }

  private checkTokens(op: string, arg: string, t: unknown): Int32Array {
    const ok = (Array.isArray(t) || t instanceof Int32Array) && (t as ArrayLike<number>).length > 0;
    check(ok, op, arg, 'a non-empty number[] or Int32Array of token ids', t);
    // Every id checked as the number it is before it becomes an i32: Int32Array.from wraps 2^32 + 1
    // to 1, truncates 1.5 and converts '3'.
    const src = t as ArrayLike<unknown>, V = this.config.vocabSize;
    const a = new Int32Array(src.length);
    for (let i = 0; i < src.length; i++) {
      const x = src[i];
      if (typeof x !== 'number' || !Number.isInteger(x) || x < 0 || x >= V) fail(op, `${arg}[${i}]`, `a token id in [0, ${V})`, fmt(x));
      a[i] = x;
    }
    return a;
  }

  private blocksFor(tokens: number): number {
    return Math.ceil(tokens / this.blockSize);
  }

  /** Grows the RoPE tables to cover positions [0, n). */
  private ensurePositions(n: number): void {
    if (n <= this.tablePositions) return;
    const P = Math.min(Math.max(n, 2 * this.tablePositions, 256), Math.max(n, this.config.maxPositionEmbeddings * 4));
    const t = ropeTable(this.config.rope, P);
    this.cos?.destroy();
    this.sin?.destroy();
    this.cos = this.rt.tensor(t.cos, [P, t.cos.length / P], 'f32');
    this.sin = this.rt.tensor(t.sin, [P, t.sin.length / P], 'f32');
    this.tablePositions = P;
  }

  /**
   * Records one step: the requests' tokens placed in the cache (the block manager's order), the forward
   * pass, and either logits of every row (`all`) or the sampled ids of the requests that sample
   * (written to sampled[step % inFlight]). Returns the rows the samples landed on, in request order.
   */
  private recordStep(reqs: Req[], gen: GenerateOptions | null, all: Tensor | null): { T: number; R: number } {
    const rt = this.rt;
    const step = this.stepNo++;
    const m = this.kv.schedule(reqs.map((r) => ({ id: r.seq.id, numTokens: r.ids.length })));
    const T = m.numTokens;
    const idsIn = new Int32Array(T), pos = new Int32Array(T), gather = new Int32Array(this.maxSeqsPerStep);
    let R = 0, maxPos = 0;
    reqs.forEach((r, i) => {
      const [a] = m.rows[i];
      const start = this.kv.seqLen(r.seq.id) - r.ids.length;
      for (let j = 0; j < r.ids.length; j++) { idsIn[a + j] = r.ids[j]; pos[a + j] = start + j; }
      maxPos = Math.max(maxPos, start + r.ids.length);
      r.seq.usedBy = step;
      if (r.sample) {
        gather[R] = a + r.ids.length - 1;
        r.seq.lastStep = step;
        r.seq.lastRow = R++;
      }
    });
    this.ensurePositions(maxPos);
    // Uploads run on the queue ahead of anything still in the encoder: submit that first (the clears
    // of freshly made buffers, say), so the step's inputs land after it.
    rt.flush();
    const q = rt.device.queue;
    q.writeBuffer(this.idsIn.buffer, 0, idsIn);
    q.writeBuffer(this.pos.buffer, 0, pos);
    q.writeBuffer(this.slots.buffer, 0, m.slotMapping as Int32Array<ArrayBuffer>);
    if (R) q.writeBuffer(this.gather.buffer, 0, gather, 0, R);
    const ctx: StepContext = {
      T, h: this.h, positions: this.pos, slots: this.slots, cos: this.cos!, sin: this.sin!,
      meta: { queryStartLoc: m.queryStartLoc, seqLens: m.seqLens, blockTable: m.blockTable, maxBlocksPerSeq: m.maxBlocksPerSeq },
    };
    this.arch.plan(ctx);
    const sig = rt.tuning.stepGraphs && this.arch.signature ? this.arch.signature(ctx) : null;
    const key = sig === null ? null : `${sig}#${JSON.stringify(rt.tuning)}`;
    const k = this.inFlight;
    const prev = this.sampled[(step + k - 1) % k], out = this.sampled[step % k];
    rt.recording(this.dc, () => {
      rt.dispatch(rt.kernel('model_step', 'ids_main'), { ids_in: this.idsIn, prev, ids_out: this.ids }, { rows: T, prev_rows: this.maxSeqsPerStep }, Math.ceil(T / 64));
      embedding(rt, this.ids, this.arch.embed, { rows: T, out: this.h });
      const x = key === null ? this.arch.forward(ctx) : this.layers(key, ctx);
      if (all) {
        linear(rt, x, this.arch.lmHead, { rows: T, out: all });
      } else if (R > 0) {
        linear(rt, x, this.arch.lmHead, { rows: R, gatherRows: this.gather, out: this.logitsT });
        const temperature = gen?.temperature ?? 0;
        if (temperature === 0) argmax(rt, this.logitsT, { rows: R, out });
        // Draws depend on (seed, row, the call's step): the same call repeats its tokens.
        else sample(rt, this.logitsT, { temperature, topK: gen?.topK, topP: gen?.topP, seed: gen?.seed ?? 0, step: (step - this.runStart) >>> 0 }, { rows: R, out });
      }
    });
    return { T, R };
  }

  /**
   * The layers of a step with a signature: the commands of the last step with the same one again where
   * they may be replayed (Runtime.replay), else forward recorded and kept for the next such step.
   */
  private layers(key: string, ctx: StepContext): Tensor {
    const rt = this.rt;
    const hit = this.graphs.get(key);
    if (hit) {
      this.graphs.delete(key);
      if (rt.replay(hit.graph)) {
        this.graphs.set(key, hit);
        this.graphStats.replayed++;
        return hit.x;
      }
    }
    const { result: x, graph } = rt.capture(() => this.arch.forward(ctx));
    this.graphStats.recorded++;
    this.graphStats.lastTaint = graph.taint;
    if (!graph.taint) {
      this.graphs.set(key, { graph, x });
      if (this.graphs.size > 8) this.graphs.delete(this.graphs.keys().next().value!);
    }
    return x;
  }

  private newSeq(index: number, prompt: Int32Array): Seq {
    return { index, id: `s${this.nextSeq++}`, prompt, fed: 0, out: [], issued: 0, done: false, lastStep: -1, lastRow: -1, usedBy: -1, admitted: false, freed: false };
  }

  /** Prefill of one fresh sequence: the logits at every position, [tokens.length × vocab] row-major. */
  async logits(tokens: number[] | Int32Array): Promise<Float32Array> {
    const op = 'Model.logits';
    const t = this.checkTokens(op, 'tokens', tokens);
    this.enter(op);
    const V = this.config.vocabSize;
    if (this.blocksFor(t.length) > this.numBlocks) {
      this.busy = false;
      fail(op, 'tokens', `at most ${this.numBlocks * this.blockSize} tokens (the cache's ${this.numBlocks} blocks of ${this.blockSize})`, `${t.length} tokens`);
    }
    const seq = this.newSeq(0, t);
    this.kv.addSequence(seq.id);
    const result = new Float32Array(t.length * V);
    const t0 = performance.now();
    let host = 0, steps = 0;
    // One logits buffer for every step: a buffer taken and handed back each step would move the
    // attention plans' buffers around in the pool, and their step graphs with them.
    const chunk = this.rt.emptyTensor([Math.min(this.maxTokensPerStep, t.length), V], 'f32');
    try {
      for (let at = 0; at < t.length; at += this.maxTokensPerStep) {
        const n = Math.min(this.maxTokensPerStep, t.length - at);
        const h0 = performance.now();
        this.recordStep([{ seq, ids: Array.from(t.subarray(at, at + n)), sample: false }], null, n === chunk.shape[0] ? chunk : chunk.view([n, V]));
        host += performance.now() - h0;
        steps++;
        const got = await chunk.toFloat32();
        result.set(n === chunk.shape[0] ? got : got.subarray(0, n * V), at * V);
      }
    } finally {
      chunk.destroy();
      this.kv.freeSequence(seq.id);
      this.busy = false;
    }
    this.lastRun = { steps, tokens: t.length, generated: 0, wallMs: performance.now() - t0, hostMs: host };
    return result;
  }

  /**
   * New tokens for each prompt, all prompts served together (continuous batching). Greedy unless a
   * temperature is given; a stop token ends its sequence and is its last token.
   */
  async generate(prompts: (number[] | Int32Array)[], o: GenerateOptions = {}): Promise<number[][]> {
    const op = 'Model.generate';
    check(Array.isArray(prompts) && prompts.length > 0, op, 'prompts', 'a non-empty array of token arrays', prompts);
    check(o !== null && typeof o === 'object', op, 'o', 'an options object', o);
    const seqPrompts = prompts.map((p, i) => this.checkTokens(op, `prompts[${i}]`, p));
    const maxNew = o.maxNewTokens === undefined ? 16 : checkPosInt(o.maxNewTokens, op, 'o.maxNewTokens');
    const temperature = o.temperature ?? 0;
    check(typeof temperature === 'number' && Number.isFinite(temperature) && temperature >= 0, op, 'o.temperature', 'a finite number >= 0', temperature);
    if (o.topK !== undefined) check(Number.isInteger(o.topK) && o.topK >= 0, op, 'o.topK', 'an integer >= 0 (0: all)', o.topK);
    if (o.topP !== undefined) check(typeof o.topP === 'number' && o.topP > 0 && o.topP <= 1, op, 'o.topP', 'a number in (0, 1]', o.topP);
    if (o.seed !== undefined) check(Number.isInteger(o.seed) && o.seed >= 0 && o.seed < 2 ** 32, op, 'o.seed', 'an integer in [0, 2^32)', o.seed);
    const stops = new Set(o.stopTokens ?? this.config.eosTokenIds);
    if (o.stopTokens !== undefined) check(Array.isArray(o.stopTokens) && o.stopTokens.every(Number.isInteger), op, 'o.stopTokens', 'an array of token ids', o.stopTokens);
    if (o.onToken !== undefined) check(typeof o.onToken === 'function', op, 'o.onToken', 'a function (prompt, token)', o.onToken);
    for (const [i, p] of seqPrompts.entries()) {
      const need = this.blocksFor(p.length + maxNew);
      if (need > this.numBlocks) {
        fail(op, `prompts[${i}]`, `a prompt that fits the cache with maxNewTokens=${maxNew} (${this.numBlocks * this.blockSize} tokens)`, `${p.length} tokens`);
      }
    }
    if (o.signal?.aborted) throw o.signal.reason ?? new DOMException('generate was aborted', 'AbortError');
    this.enter(op);
    this.runStart = this.stepNo;
    const seqs = seqPrompts.map((p, i) => this.newSeq(i, p));
    const waiting = [...seqs];
    const active: Seq[] = [];
    let reserved = 0;
    const inflight: { step: number; rows: { seq: Seq; row: number }[]; ids: Promise<ArrayBuffer> }[] = [];
    let completedStep = -1;
    let host = 0, steps = 0, placed = 0;
    const t0 = performance.now();
    const free = (s: Seq) => {
      if (!s.freed && s.admitted) {
        this.kv.freeSequence(s.id);
        reserved -= this.blocksFor(s.prompt.length + maxNew);
      }
      s.freed = true;
    };
    const apply = async () => {
      const f = inflight.shift()!;
      const got = new Int32Array(await f.ids);
      completedStep = f.step;
      for (const { seq, row } of f.rows) {
        if (seq.done) continue;
        const tok = got[row];
        seq.out.push(tok);
        o.onToken?.(seq.index, tok);
        if (stops.has(tok) || seq.out.length >= maxNew) seq.done = true;
      }
      for (const s of active) if (s.done && s.usedBy <= completedStep) free(s);
    };
    try {
      for (;;) {
        if (o.signal?.aborted) throw o.signal.reason ?? new DOMException('generate was aborted', 'AbortError');
        // Admit waiting prompts while every admitted sequence's whole length (prompt and new tokens)
        // fits the cache: a sequence never waits for blocks once it runs.
        while (waiting.length && reserved + this.blocksFor(waiting[0].prompt.length + maxNew) <= this.numBlocks) {
          const s = waiting.shift()!;
          this.kv.addSequence(s.id);
          s.admitted = true;
          reserved += this.blocksFor(s.prompt.length + maxNew);
          active.push(s);
        }
        const reqs: Req[] = [];
        let budget = this.maxTokensPerStep;
        // Decodes first: one token each, its id on the host or still on the GPU (the step in flight).
        for (const s of active) {
          if (reqs.length >= this.maxSeqsPerStep || budget === 0) break;
          if (s.done || s.fed < s.prompt.length || s.issued >= maxNew) continue;
          const known = s.out.length === s.issued;
          // A token still on the GPU is read from the previous step's ids only: one sampled earlier
          // (the sequence sat out a step) waits until its step's ids are back. This scheduler never
          // leaves a decoding sequence out (the decodes of a step always fit the next one: a step's
          // decodes are its previous decodes and finished prompts, within its request and token
          // counts); the check keeps the read right for one that would.
          if (!known && s.lastStep !== this.stepNo - 1) continue;
          reqs.push({ seq: s, ids: [known ? s.out[s.out.length - 1] : -(1 + s.lastRow)], sample: true });
          s.issued++;
          budget--;
        }
        // Then prompt chunks under the remaining budget.
        for (const s of active) {
          if (reqs.length >= this.maxSeqsPerStep || budget === 0) break;
          if (s.done || s.fed >= s.prompt.length) continue;
          const n = Math.min(budget, s.prompt.length - s.fed);
          const last = s.fed + n === s.prompt.length;
          reqs.push({ seq: s, ids: Array.from(s.prompt.subarray(s.fed, s.fed + n)), sample: last });
          s.fed += n;
          if (last) s.issued++;
          budget -= n;
        }
        if (!reqs.length) {
          if (!inflight.length) {
            if (active.every((s) => s.done || s.freed) && !waiting.length) break;
            throw new WebinferError(`${op}: no step could be scheduled (${waiting.length} prompts waiting for cache blocks)`);
          }
          await apply();
          continue;
        }
        const h0 = performance.now();
        const { T, R } = this.recordStep(reqs, { ...o, temperature }, null);
        const step = this.stepNo - 1;
        const rows = reqs.filter((r) => r.sample).map((r) => ({ seq: r.seq, row: r.seq.lastRow }));
        // Submits the step and copies its ids for the host.
        const ids = this.rt.readBuffer(this.sampled[step % this.inFlight].buffer, 4 * R);
        host += performance.now() - h0;
        steps++;
        placed += T;
        inflight.push({ step, rows, ids });
        // inFlight steps at most: the next step's inputs are the newest step's ids.
        if (inflight.length >= this.inFlight) await apply();
      }
    } catch (e) {
      // Leave nothing behind: wait for the work in flight, then free every sequence's blocks.
      for (const f of inflight) await f.ids.catch(() => undefined);
      throw e;
    } finally {
      for (const s of seqs) free(s);
      this.busy = false;
      this.lastRun = { steps, tokens: placed, generated: seqs.reduce((a, s) => a + s.out.length, 0), wallMs: performance.now() - t0, hostMs: host };
    }
    return seqs.map((s) => s.out);
  }

  /**
   * Bytes one decode step of `batch` sequences reads: the weights (a MoE model: the experts they
   * choose), and the cache rows of `tokens` cached tokens.
   */
  stepBytes(tokens: number, batch = 1): { weights: number; kv: number } {
    return { weights: this.arch.weightBytes(batch), kv: tokens * this.config.numLayers * this.arch.cacheBytes(this.cacheDType).perToken };
  }

  /**
   * For benchmarks: `steps` decode steps of `batch` sequences, each over a synthetic context of
   * `context` tokens (its blocks taken without a prefill: their contents mean nothing and the work does
   * not depend on them), recorded and submitted as generate does (three steps in flight, greedy ids fed
   * back on the GPU). Per step: wall and host milliseconds, and (with timestamps) the GPU time of one
   * step, its passes timed whole.
   */
  async profileDecode(o: { batch: number; context: number; steps: number; warmup?: number; perKernel?: boolean }): Promise<{ wallMs: number; hostMs: number; gpuMs: number | null; dispatches: number; replayed: number; kernels?: Record<string, number> }> {
    const op = 'Model.profileDecode';
    const B = checkPosInt(o.batch, op, 'o.batch'), C = checkPosInt(o.context, op, 'o.context'), N = checkPosInt(o.steps, op, 'o.steps');
    const warm = o.warmup ?? 3;
    check(B <= this.maxSeqsPerStep && B <= this.maxTokensPerStep, op, 'o.batch', `at most ${Math.min(this.maxSeqsPerStep, this.maxTokensPerStep)} (the step limits)`, B);
    const need = B * this.blocksFor(C + N + warm + 4);
    check(need <= this.numBlocks, op, 'o', `batch × context within the cache's ${this.numBlocks} blocks`, `${need} blocks`);
    this.enter(op);
    const seqs = Array.from({ length: B }, (_, i) => this.newSeq(i, new Int32Array(1)));
    try {
      for (const s of seqs) this.kv.addSequence(s.id);
      this.kv.schedule(seqs.map((s) => ({ id: s.id, numTokens: C })));
      let first = true;
      // One decode step of every sequence, fed its last greedy id (the first step a fixed id).
      const record = () => {
        this.recordStep(seqs.map((s) => ({ seq: s, ids: [first ? 1 : -(1 + s.lastRow)], sample: true })), null, null);
        first = false;
      };
      const steps = async (n: number) => {
        const inflight: Promise<ArrayBuffer>[] = [];
        let host = 0;
        for (let i = 0; i < n; i++) {
          const h0 = performance.now();
          record();
          inflight.push(this.rt.readBuffer(this.sampled[(this.stepNo - 1) % this.inFlight].buffer, 4 * B));
          host += performance.now() - h0;
          if (inflight.length >= this.inFlight) await inflight.shift();
        }
        await Promise.all(inflight);
        return host;
      };
      await steps(warm);
      // Dispatches one step records (counted on the host).
      const d0 = this.rt.counters.dispatch;
      await steps(1);
      const dispatches = this.rt.counters.dispatch - d0;
      const r0 = this.graphStats.replayed;
      const t0 = performance.now();
      const host = await steps(N);
      const wallMs = (performance.now() - t0) / N;
      const replayed = (this.graphStats.replayed - r0) / N;
      let gpuMs: number | null = null;
      if (this.rt.features.timestampQuery) {
        const times: number[] = [];
        for (let i = 0; i < 3; i++) {
          this.rt.beginTiming(4096, { span: true });
          record();
          times.push(await this.rt.endTiming());
        }
        gpuMs = times.sort((a, b) => a - b)[1];
      }
      let kernels: Record<string, number> | undefined;
      if (o.perKernel && this.rt.features.timestampQuery) {
        this.rt.beginTiming(4096);
        record();
        await this.rt.endTiming();
        kernels = { ...this.rt.lastTiming };
      }
      return { wallMs, hostMs: host / N, gpuMs, dispatches, replayed, kernels };
    } finally {
      for (const s of seqs) this.kv.freeSequence(s.id);
      this.busy = false;
    }
  }

  /**
   * For benchmarks: the prefill of one `tokens`-long prompt (chunks of maxTokensPerStep): wall ms, the
   * GPU ms of its steps, and with perKernel the GPU ms of each kernel (dispatches timed one by one).
   */
  async profilePrefill(o: { tokens: number; perKernel?: boolean }): Promise<{ wallMs: number; gpuMs: number | null; kernels?: Record<string, number> }> {
    const op = 'Model.profilePrefill';
    const n = checkPosInt(o.tokens, op, 'o.tokens');
    check(this.blocksFor(n) <= this.numBlocks, op, 'o.tokens', `at most ${this.numBlocks * this.blockSize}`, n);
    this.enter(op);
    const prompt = Int32Array.from({ length: n }, (_, i) => (i * 7919) % this.config.vocabSize);
    const once = async (timed: boolean, span = true) => {
      const seq = this.newSeq(0, prompt);
      this.kv.addSequence(seq.id);
      try {
        if (timed) this.rt.beginTiming(4096, { span });
        const t0 = performance.now();
        for (let at = 0; at < n; at += this.maxTokensPerStep) {
          const k = Math.min(this.maxTokensPerStep, n - at);
          this.recordStep([{ seq, ids: Array.from(prompt.subarray(at, at + k)), sample: at + k === n }], null, null);
        }
        await this.rt.readBuffer(this.sampled[(this.stepNo - 1) % this.inFlight].buffer, 4);
        const wall = performance.now() - t0;
        return timed ? await this.rt.endTiming() : wall;
      } finally {
        this.kv.freeSequence(seq.id);
      }
    };
    try {
      await once(false);
      const walls = [await once(false), await once(false), await once(false)].sort((a, b) => a - b);
      const gpuMs = this.rt.features.timestampQuery ? await once(true) : null;
      let kernels: Record<string, number> | undefined;
      if (o.perKernel && this.rt.features.timestampQuery) {
        await once(true, false);
        kernels = { ...this.rt.lastTiming };
      }
      return { wallMs: walls[1], gpuMs, kernels };
    } finally {
      this.busy = false;
    }
  }

  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    this.graphs.clear();
    this.dc.destroy();
    this.arch.destroy();
    for (const t of [this.h, this.idsIn, this.ids, this.pos, this.slots, this.gather, this.logitsT, ...this.sampled, this.cos, this.sin]) t?.destroy();
  }
}

