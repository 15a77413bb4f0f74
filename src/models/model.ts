// Whole models on the GPU (API.md "Whole models"): loading a checkpoint, and the step that runs the
// forward pass over the paged cache (ModelRunner). Scheduling, requests, blocks and the prefix cache are
// the layer above's (serve/model.ts builds the public Model on ModelRunner: serve/engine.ts schedules,
// serve/kv_manager.ts places tokens); a runner is handed each step's rows already placed, and knows
// nothing of requests.
//
// A step (runStep): the host writes the step's ids, positions, slots and sampled rows in four small
// uploads, plans attention once, and records embedding, every layer, the lm_head on each sampled
// sequence's last row, and sampling — through a DispatchCache, so a steady-state step allocates and
// uploads nothing else. Only token ids come back. A step's input id can be a sampled id of the
// previous step still on the GPU (the step kernel reads it there), so the engine keeps up to
// tuning.stepsInFlight steps in flight. A decode step that repeats one already recorded replays its
// layers' commands (step graphs, tuning.stepGraphs).
import type { DType } from '../core/dtype.js';
import { WebinferError, check, checkKeys, checkPosInt, fail, fmt } from '../core/errors.js';
import { DispatchCache, type Runtime, type StepGraph } from '../core/runtime.js';
import type { Tensor } from '../core/tensor.js';
import { linear } from '../ops/gemm.js';
import { embedding } from '../ops/embedding.js';
import { activate } from '../ops/elementwise.js';
import { ChatTemplate, TextTokenizer } from '../text/text.js';
import { parseConfig, type ModelConfig } from './config.js';
import { longropeRow, ropeTable, ropeTableVariants } from './rope.js';
import type { SafetensorsFile } from '../formats/safetensors.js';
import { validateCheckpoint, WEIGHT_DTYPES } from './schema.js';
import type { GGUFFile } from '../formats/gguf.js';
import { ggufCheckpoint, isGGUFFile, mmprojCheckpoint } from './gguf_weights.js';
import { checkMmproj, gemma3MmprojConfig } from '../formats/gguf_mmproj.js';
import { hfQuantCheckpoint } from '../formats/hf_quant.js';
import { GROUP_QUANT_TYPES, QUANT_TYPES } from '../core/quant.js';
import { blockTableOf, checkTokenIds, sequenceOfRow, StepSampling, verificationAsDecode, type Architecture, type StepContext, type StepPlacement, type StepProcessing, type StepRecord, type StepRow } from './step.js';
import { checkpointDType, WeightReader, type QuantizeOnLoad, type WeightDType } from './weights.js';
import { LlamaFamily } from './llama.js';
import { mropeRow, QwenVLFamily, type ImageRun } from './qwen_vl.js';
import { Gemma3VLFamily } from './gemma3_vision.js';
import { isEncoderConfig, loadEncoderModel, type EncoderRunner, type MakeEncoder } from './encoder.js';
import { loadWhisperWith, type MakeWhisper, type WhisperRunner } from './whisper.js';
import { DeepSeekFamily } from './deepseek.js';
import { Gemma2Family } from './gemma2.js';
import { Gemma3Family } from './gemma3.js';
import { GptOssFamily } from './gpt_oss.js';
import { Lfm2Family } from './lfm2.js';
import { loadT5With, type MakeT5, type T5Runner } from './t5.js';

/** A sequence carrying images (Qwen2.5-VL): its prompt's M-RoPE positions, rope delta, image runs and their features [rows, hidden]. */
export interface VisionSequence { t: Int32Array; h: Int32Array; w: Int32Array; ropeDelta: number; runs: readonly ImageRun[]; features: Float32Array }

/** What a vision step adds: own table rows (step rows), their cos/sin, feature rows, the largest position + 1. */
interface VisionStep {
  rows: number[]; cos: Float32Array[]; sin: Float32Array[]; features: { row: number; data: Float32Array }[]; maxPos: number;
  /** Gemma 3's image blocks: the step's attention over per-row sequences (StepContext.attention). */
  attention?: StepContext['attention'];
}

/** The most steps in flight tuning.stepsInFlight may ask for (the sampled-id ring's length). */
const MAX_IN_FLIGHT = 4;

/** Architectures the step runtime runs today (parseConfig knows DeepSeek's too). */
export const RUNNABLE_ARCHITECTURES = Object.freeze(['LlamaForCausalLM', 'MistralForCausalLM', 'Qwen2ForCausalLM', 'Qwen3ForCausalLM',
  'DeepseekV2ForCausalLM', 'DeepseekV3ForCausalLM', 'Gemma2ForCausalLM', 'GptOssForCausalLM',
  'SmolLM3ForCausalLM', 'Phi3ForCausalLM', 'Qwen3MoeForCausalLM', 'Gemma3ForCausalLM', 'Qwen2_5_VLForConditionalGeneration', 'Lfm2ForCausalLM', 'Gemma3ForConditionalGeneration']);

export interface LoadModelOptions {
  /** The parsed config.json of an HF checkpoint (a GGUF file's own config when weights is one). */
  config?: object;
  /** Its safetensors file(s) (loadSafetensors; a sharded checkpoint's shards), or a GGUF file (loadGGUF). */
  weights: SafetensorsFile | readonly SafetensorsFile[] | GGUFFile;
  /** llama.cpp's vision pair: beside a text GGUF in `weights`, its mmproj GGUF (loadGGUF; projector
   *  types formats/gguf_mmproj.ts MMPROJ_PROJECTORS): the model is then the vision-language model of the two. */
  mmproj?: GGUFFile;
  /** How weights are stored on the GPU: 'checkpoint' (the default) as in the checkpoint, quantized or
   *  not; a float dtype converts (and dequantizes) them; 'q8' | 'q4' quantize a 16/32-bit checkpoint's
   *  linear layers as they upload (QuantizeOnLoad says how). */
  dtype?: 'checkpoint' | WeightDType | QuantizeOnLoad;
  kvCache?: { numBlocks?: number; blockSize?: number; dtype?: DType | 'fp8_ds_mla' };
  onProgress?: (loadedBytes: number, totalBytes: number) => void;
  /** tokenizer.json (parsed), for text in and out (a GGUF file's own by default). */
  tokenizer?: object;
  /** tokenizer_config.json (parsed): the chat template and special tokens (a GGUF file's own by default). */
  tokenizerConfig?: object;
  /** generation_config.json (parsed): end-of-sequence ids and sampling defaults. */
  generationConfig?: object;
  /** preprocessor_config.json (parsed): a speech model's feature extractor (Whisper; loadCheckpoint reads it). */
  preprocessorConfig?: object;
  /** The model's name in the OpenAI-shaped API (`model` of its responses); default: the config's name_or_path or architecture. */
  name?: string;
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

/** What the layer above makes of a loaded decoder, encoder and encoder-decoders (serve/model.ts: the
 *  served Model and EncoderModel; serve/whisper.ts: WhisperModel; serve/t5.ts: T5Model). */
export interface ModelMakers<D extends ModelRunner, E extends EncoderRunner, W extends WhisperRunner = WhisperRunner, T extends T5Runner = T5Runner> {
  decoder: MakeRunner<D>;
  encoder: MakeEncoder<E>;
  whisper: MakeWhisper<W>;
  t5: MakeT5<T>;
}

/** The sizes a runner is built with (checked by the loaders). */
export interface RunnerOptions { numBlocks: number; blockSize: number; maxTokens: number; maxSeqs: number; dtype: WeightDType; cacheDtype: string }

/** Builds the runner (or a class over it) once the weights and caches are on the GPU. */
export type MakeRunner<M extends ModelRunner> = (rt: Runtime, cfg: ModelConfig, arch: Architecture, o: RunnerOptions) => M;

/** The text side of a decoder: what serve/openai.ts's TextSetup reads, and the model's name. */
export interface DecoderText {
  tokenizer?: TextTokenizer;
  template?: ChatTemplate;
  generationConfig?: Record<string, unknown>;
  name?: string;
}

const OP = 'loadModel';
/** The options of kvCache (loadModel, createRandomModel). */
const CACHE_OPTIONS = ['numBlocks', 'blockSize', 'dtype'] as const;

/**
 * Loads a checkpoint's model, its kind read from the config: a decoder (make.decoder over a ModelRunner),
 * an encoder (make.encoder), Whisper or T5.
 */
export async function loadModelWith<D extends ModelRunner, E extends EncoderRunner, W extends WhisperRunner, T extends T5Runner>(rt: Runtime, o: LoadModelOptions, make: ModelMakers<D, E, W, T>): Promise<D | E | W | T> {
  rt.assertAlive(OP);
  check(o !== null && typeof o === 'object', OP, 'o', '{ config, weights, dtype?, kvCache?, onProgress? }', o);
  // Every option read here, and the rest of loadCheckpoint's Checkpoint (`loadModel({ ...checkpoint })`);
  // any other name is a misspelling, refused rather than ignored. A Record over the options' keys: a
  // new option must be listed here to compile.
  const known: Record<keyof LoadModelOptions | 'tokenizer' | 'tokenizerConfig' | 'generationConfig' | 'name', true> = {
    config: true, weights: true, dtype: true, kvCache: true, onProgress: true, maxTokensPerStep: true, maxSeqsPerStep: true, allowNonFinite: true,
    tokenizer: true, tokenizerConfig: true, generationConfig: true, preprocessorConfig: true, name: true, mmproj: true,
  };
  checkKeys(OP, 'o', o, Object.keys(known));
  // Encoder-only and encoder-decoder models have their own loaders and model objects (API.md
  // "Encoders, encoder-decoders, speech"); they answer the decoder's calls with a clear error.
  const archs = (o.config as { architectures?: unknown } | undefined)?.architectures;
  // Whisper's file handles go once the weights are on the GPU (or the load failed), as the encoders'
  // and T5's do in their loaders: they were left to the garbage collector (Node's DEP0137 warning).
  const closing = async <M>(load: Promise<M>): Promise<M> => {
    try {
      return await load;
    } finally {
      const fs = (Array.isArray(o.weights) ? o.weights : [o.weights]) as { close?: () => Promise<void> }[];
      await Promise.allSettled(fs.map((f) => f?.close?.()));
    }
  };
  if (isEncoderConfig(o.config)) return loadEncoderModel(rt, o, make.encoder);
  if (Array.isArray(archs) && archs[0] === 'WhisperForConditionalGeneration') return closing(loadWhisperWith(rt, o, make.whisper));
  if (Array.isArray(archs) && archs[0] === 'T5ForConditionalGeneration') return loadT5With(rt, o, make.t5);
  if (o.preprocessorConfig !== undefined) fail(OP, 'o.preprocessorConfig', 'none (a feature extractor belongs to a speech model: WhisperForConditionalGeneration)', 'a preprocessor config');
  const gguf = isGGUFFile(o.weights) ? o.weights : null;
  const mmproj = o.mmproj === undefined ? null : o.mmproj;
  if (mmproj !== null) {
    check(isGGUFFile(mmproj), OP, 'o.mmproj', 'a GGUFFile (loadGGUF of llama.cpp\'s mmproj file)', mmproj);
    check(gguf !== null, OP, 'o.weights', 'a GGUFFile (the text model beside o.mmproj)', o.weights);
    check(o.config === undefined, OP, 'o.config', 'none (the GGUF pair makes its own config)', 'a config');
    checkMmproj(mmproj);
  }
  if (gguf && mmproj === null && gguf.metadata.get('general.architecture') === 'clip') {
    fail(OP, 'o.weights', 'a model\'s GGUF (an mmproj file goes in o.mmproj, beside its text GGUF in o.weights)', `the mmproj file ${gguf.name}`);
  }
  const config = o.config ?? (gguf && mmproj ? gemma3MmprojConfig(gguf, mmproj) : gguf?.config);
  check(config !== null && typeof config === 'object', OP, 'o.config', "a parsed config.json object (optional with GGUF weights)", config);
  const cfg = parseConfig(config);
  if (!RUNNABLE_ARCHITECTURES.includes(cfg.architecture)) {
    throw new WebinferError(`${OP}: config.architectures: expected one of ${RUNNABLE_ARCHITECTURES.join(', ')} (the architectures the step runtime runs), got ${cfg.architecture}`);
  }
  let files = gguf ? [ggufCheckpoint(gguf, cfg), ...(mmproj ? [mmprojCheckpoint(mmproj)] : [])] : (Array.isArray(o.weights) ? o.weights : [o.weights]) as SafetensorsFile[];
  check(files.length > 0 && files.every((f) => f && f.tensors instanceof Map && typeof f.bytes === 'function'), OP, 'o.weights',
    'a SafetensorsFile or an array of them (loadSafetensors), or a GGUFFile (loadGGUF)', o.weights);
  // A quantized HF checkpoint (config.json's quantization_config, MLX's quantization): its modules as group types (formats/hf_quant.ts).
  const hfQuant = gguf ? null : await hfQuantCheckpoint(config, files);
  if (hfQuant) files = [hfQuant];
  if (o.dtype !== undefined) check(['checkpoint', 'f32', 'f16', 'bf16', 'q8', 'q4'].includes(o.dtype), OP, 'o.dtype', "'checkpoint', 'f32', 'f16', 'bf16', 'q8' or 'q4'", fmt(o.dtype));
  if (o.onProgress !== undefined) check(typeof o.onProgress === 'function', OP, 'o.onProgress', 'a function (loadedBytes, totalBytes)', o.onProgress);
  if (o.allowNonFinite !== undefined) check(typeof o.allowNonFinite === 'boolean', OP, 'o.allowNonFinite', 'a boolean', fmt(o.allowNonFinite));
  const kvo = o.kvCache ?? {};
  check(kvo !== null && typeof kvo === 'object' && !Array.isArray(kvo), OP, 'o.kvCache', '{ numBlocks?, blockSize?, dtype? }', kvo);
  checkKeys(OP, 'o.kvCache', kvo, CACHE_OPTIONS);
  const maxTokens = o.maxTokensPerStep === undefined ? 512 : checkPosInt(o.maxTokensPerStep, OP, 'o.maxTokensPerStep');
  const maxSeqs = o.maxSeqsPerStep === undefined ? 64 : checkPosInt(o.maxSeqsPerStep, OP, 'o.maxSeqsPerStep');
  // Every name and shape checked before any GPU memory is taken.
  // A GGUF's tensors have ggml's types; an HF quantized checkpoint's quantized modules come as group types.
  const resolved = validateCheckpoint(cfg, files, gguf ? [...WEIGHT_DTYPES, ...QUANT_TYPES] : [...WEIGHT_DTYPES, ...GROUP_QUANT_TYPES]);
  const quantize = o.dtype === 'q8' || o.dtype === 'q4' ? o.dtype : undefined;
  const keepQuantized = o.dtype === undefined || o.dtype === 'checkpoint' || quantize !== undefined;
  const dtype = keepQuantized ? checkpointDType(resolved, gguf || hfQuant || quantize ? (quantize ? 'bf16' : 'f16') : undefined) : o.dtype as WeightDType;
  const arch = architectureFor(rt, cfg);
  const cacheDtype = kvo.dtype ?? (dtype === 'f32' ? arch.cacheDTypes[0] : 'f16');
  check(arch.cacheDTypes.includes(cacheDtype), OP, 'o.kvCache.dtype', `one of ${arch.cacheDTypes.map((d) => `'${d}'`).join(', ')} for ${cfg.architecture}`, fmt(cacheDtype));
  const blockSize = kvo.blockSize === undefined ? 16 : checkPosInt(kvo.blockSize, OP, 'o.kvCache.blockSize');
  const numBlocks = kvo.numBlocks === undefined
    ? defaultBlocks(rt, cfg, arch.cacheBytes(cacheDtype), blockSize)
    : checkPosInt(kvo.numBlocks, OP, 'o.kvCache.numBlocks');
  // The tokenizer and template are checked before any GPU memory is taken too.
  const text = textSetup(o, gguf, cfg);
  let reader: WeightReader | null = null;
  try {
    const model = await build(rt, OP, cfg, arch, { numBlocks, blockSize, cacheDtype, maxTokens, maxSeqs, dtype },
      () => arch.load(reader = new WeightReader(files, resolved, o.onProgress, keepQuantized, quantize, o.allowNonFinite === true), dtype),
      make.decoder, () => reader?.destroyLoaded());
    model.useText(text);
    return model;
  } finally {
    // File handles go once the weights are on the GPU (or the load failed); a file read again (a
    // second loadModel of the same SafetensorsFile or GGUFFile) opens again (close() in their docs).
    await Promise.allSettled(files.map((f) => f.close?.()));
  }
}

/**
 * The text side of a model: its tokenizer (the options', else a GGUF file's), chat template, generation
 * config, and the name its OpenAI-shaped responses carry. A malformed tokenizer.json or template is
 * refused here, before the weights load.
 */
function textSetup(o: LoadModelOptions, gguf: GGUFFile | null, cfg: ModelConfig): DecoderText & { name: string } {
  const tokJson = o.tokenizer ?? gguf?.tokenizer;
  const tokConfig = o.tokenizerConfig ?? gguf?.tokenizerConfig;
  if (tokJson !== undefined) check(tokJson !== null && typeof tokJson === 'object', OP, 'o.tokenizer', 'a parsed tokenizer.json object', tokJson);
  if (tokConfig !== undefined) check(tokConfig !== null && typeof tokConfig === 'object', OP, 'o.tokenizerConfig', 'a parsed tokenizer_config.json object', tokConfig);
  if (o.generationConfig !== undefined) check(o.generationConfig !== null && typeof o.generationConfig === 'object', OP, 'o.generationConfig', 'a parsed generation_config.json object', o.generationConfig);
  if (o.name !== undefined) check(typeof o.name === 'string' && o.name.length > 0, OP, 'o.name', 'a non-empty string', o.name);
  const tokenizer = tokJson ? TextTokenizer.create(tokJson, tokConfig, o.generationConfig) : undefined;
  const template = tokConfig ? ChatTemplate.fromConfig(tokConfig) : undefined;
  const gname = gguf?.metadata.get('general.name');
  const name = o.name ?? (typeof gname === 'string' && gname ? gname : cfg.architecture);
  return { tokenizer, template, generationConfig: o.generationConfig as Record<string, unknown> | undefined, name };
}

/** The step runtime's implementation of a config's architecture. */
function architectureFor(rt: Runtime, cfg: ModelConfig): Architecture {
  if (cfg.mla) return new DeepSeekFamily(rt, cfg);
  if (cfg.family === 'gemma2') return new Gemma2Family(rt, cfg);
  if (cfg.siglip) return new Gemma3VLFamily(rt, cfg);
  if (cfg.family === 'gemma3') return new Gemma3Family(rt, cfg);
  if (cfg.family === 'gpt_oss') return new GptOssFamily(rt, cfg);
  if (cfg.vision) return new QwenVLFamily(rt, cfg);
  if (cfg.family === 'lfm2') return new Lfm2Family(rt, cfg);
  return new LlamaFamily(rt, cfg);
}

/**
 * Per-sequence state slots of an architecture that keeps them (LFM2's conv states): twice the
 * sequences a step serves, so a step's worth of sequences can run while as many more are admitted;
 * the block manager holds a sequence beyond them back until one frees (serve/kv_manager.ts).
 */
export function stateSlots(arch: Architecture, maxSeqs: number): number {
  return arch.createStates ? 2 * maxSeqs : 0;
}

/**
 * The model on the GPU: weights, the cache, the step buffers. The cache's size is checked before
 * anything is taken, and the allocations run under the device's error scopes (Runtime.allocating): a
 * GPU allocation that fails is one named error, with everything taken so far released (`release`:
 * what the architecture may not hold yet, the weights of a layer read partway).
 */
async function build<M extends ModelRunner>(rt: Runtime, op: string, cfg: ModelConfig, arch: Architecture, o: RunnerOptions,
                     weights: () => Promise<void> | void, make: MakeRunner<M>, release: () => void = () => {}): Promise<M> {
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
  let model: M | null = null;
  return rt.allocating(async (stage) => {
    await weights();
    await stage();
    arch.createCaches({ numBlocks: o.numBlocks, blockSize: o.blockSize, dtype: o.cacheDtype });
    // Before the host builds its block list of the cache's size.
    await stage();
    arch.createStates?.(stateSlots(arch, o.maxSeqs));
    arch.allocate(o.maxTokens);
    model = make(rt, cfg, arch, o);
    return model;
  }, () => {
    if (model) (model as M).destroy();
    else arch.destroy();
    release();
  }, (e, outOfMemory) => outOfMemory
    ? `${op}: the GPU ran out of memory for the model (its weights, a KV cache of ${o.numBlocks} blocks: ${gib(o.numBlocks * perBlock)}, `
      + `steps of ${o.maxTokens} tokens); everything it had taken is released. A smaller kvCache.numBlocks, dtype or maxTokensPerStep may fit (${e.message})`
    : `${op}: the GPU refused an allocation or upload of the model; everything it had taken is released (${e.message})`);
}

/** createRandomModel's options. */
export interface RandomModelOptions {
  config: object; dtype?: WeightDType; seed?: number;
  kvCache?: { numBlocks?: number; blockSize?: number; dtype?: DType | 'fp8_ds_mla' }; maxTokensPerStep?: number; maxSeqsPerStep?: number;
}

/**
 * A model of a config's shape with random weights made on the GPU (nothing read or uploaded): for
 * benchmarks at real model shapes and the default workload. Its outputs mean nothing.
 */
export async function createRandomModelWith<M extends ModelRunner>(rt: Runtime, o: RandomModelOptions, make: MakeRunner<M>): Promise<M> {
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
  return build(rt, op, cfg, arch, { numBlocks, blockSize, cacheDtype, dtype, maxTokens, maxSeqs }, () => arch.initRandom(dtype, o.seed ?? 1), make);
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

/**
 * The model on the GPU for the step runtime: weights, the cache, the step buffers, and the step itself
 * (runStep). The layer above places each step's tokens and schedules requests (serve/model.ts's Model
 * extends this class).
 */
export class ModelRunner {
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
  /** The model's name in OpenAI-shaped responses (`model`), and the id `webinfer serve` serves it under. */
  id: string;
  /** The checkpoint's tokenizer (tokenizer.json or a GGUF's), when it has one. */
  tokenizer?: TextTokenizer;
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
  protected readonly rt: Runtime;
  protected readonly arch: Architecture;
  private cos: Tensor | null = null;
  private sin: Tensor | null = null;
  private tablePositions = 0;
  /** The next step's number (the sampled-id ring's index). */
  protected step = 0;
  /** Steps in flight (tuning.stepsInFlight, read when the engine starts a run): the sampled-id ring in use. */
  protected inFlight = 3;
  /** Per-row sampling settings, logit edits, masks and logprob copies of the step's sampled rows. */
  private readonly sampling: StepSampling;
  private destroyed = false;
  /** Staging buffers of the steps' read-backs in flight (Runtime.readBuffer's `pending`): destroy drops them. */
  private readonly reads = new Set<GPUBuffer>();
  /** Recorded layers by the architecture's step signature, least recently used first (tuning.stepGraphs). */
  private readonly graphs = new Map<string, { graph: StepGraph; x: Tensor }>();
  /**
   * Sequences of a vision-language model that carry images (Qwen2.5-VL), by sequence id: their prompt's
   * M-RoPE positions, rope delta, image runs and features (the layer above sets them as it places the
   * sequence: serve/model.ts). A sequence not here is text: t = h = w = its index.
   */
  protected readonly visionSeqs = new Map<string, VisionSequence>();
  /** Whether its steps keep attention's queries in f32 (Runtime.exactQueries): the request engine sets it
   *  while the model speculates, so that verification rows and plain rows attend alike. */
  exactAttention = false;
  /** Image features of a step's image tokens at their rows, copied over the embeddings (vision models). */
  private imageRows: Tensor | null = null;
  /** Steps whose layers were replayed, and recorded anew, for tests and the benchmark. */
  readonly graphStats: { replayed: number; recorded: number; lastTaint: string | null } = { replayed: 0, recorded: 0, lastTaint: null };

  constructor(rt: Runtime, cfg: ModelConfig, arch: Architecture, o: RunnerOptions) {
    this.rt = rt;
    this.sampling = new StepSampling(rt);
    this.arch = arch;
    this.architecture = cfg.architecture;
    this.config = cfg;
    this.weightDType = o.dtype;
    this.weightBytes = arch.storedWeightBytes();
    this.maxTokensPerStep = o.maxTokens;
    this.maxSeqsPerStep = o.maxSeqs;
    this.numBlocks = o.numBlocks;
    this.blockSize = o.blockSize;
    this.cacheDType = o.cacheDtype;
    this.id = cfg.architecture;
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

  get vocabSize(): number { return this.config.vocabSize; }
  get maxContext(): number { return this.config.maxPositionEmbeddings; }
  get eosTokenIds(): readonly number[] { return this.config.eosTokenIds; }

  /** Gives the model its text side (loadModel does): tokenizer, chat template, generation defaults, name. */
  useText(t: DecoderText): void {
    this.tokenizer = t.tokenizer;
    if (t.name) this.id = t.name;
  }
  /** Tokens one sequence can hold: the cache's. */
  get capacity(): number { return this.numBlocks * this.blockSize; }
  get stepNo(): number { return this.step; }

  assertAlive(op: string): void {
    if (this.destroyed) throw new WebinferError(`${op}: the model was destroyed`);
    this.rt.assertAlive(op);
  }

  /** tuning.stepsInFlight, checked; the engine reads it when it starts a run of steps. */
  stepsInFlight(op: string): number {
    const k = this.rt.tuning.stepsInFlight;
    check(Number.isInteger(k) && k >= 2 && k <= MAX_IN_FLIGHT, op, 'engine.tuning.stepsInFlight', `an integer from 2 to ${MAX_IN_FLIGHT}`, k);
    this.inFlight = k;
    return k;
  }

  /** Every id range-checked as a number before any conversion (2^32 + 1 must not wrap to 1). */
  protected checkTokens(op: string, arg: string, t: unknown): Int32Array {
    return checkTokenIds(op, arg, t, this.config.vocabSize);
  }

  protected blocksFor(tokens: number): number {
    return Math.ceil(tokens / this.blockSize);
  }

  /** Grows the RoPE tables to cover positions [0, n). */
  private ensurePositions(n: number): void {
    if (n <= this.tablePositions) return;
    const P = Math.min(Math.max(n, 2 * this.tablePositions, 256), Math.max(n, this.config.maxPositionEmbeddings * 4));
    const t = ropeTable(this.config.rope, P);
    this.cos?.destroy();
    this.sin?.destroy();
    const rows = P * ropeTableVariants(this.config.rope);
    const half = t.cos.length / rows;
    // M-RoPE: a row per token of a step after the positions' rows, for the tokens whose t, h and w differ.
    const extra = this.config.mrope ? this.maxTokensPerStep : 0;
    const grow = (a: Float32Array) => { if (!extra) return a; const b = new Float32Array((rows + extra) * half); b.set(a); return b; };
    this.cos = this.rt.tensor(grow(t.cos), [rows + extra, half], 'f32');
    this.sin = this.rt.tensor(grow(t.sin), [rows + extra, half], 'f32');
    this.tablePositions = P;
  }


  /**
   * Records and submits step number `step`: the rows' tokens, placed in the cache as `m` says (row i's
   * tokens at positions starts[i]...), the forward pass, and either logits of every row (`all`) or the
   * sampled ids of the rows that sample (written to sampled[step % inFlight], read back). Sampling is
   * greedy unless `proc` gives each sampled row its settings, logit edits and masks; its logprob rows'
   * raw logits come back too.
   */
  protected runStep(step: number, rows: StepRow[], m: StepPlacement, starts: readonly number[], proc: StepProcessing | null, all: Tensor | null): StepRecord {
    const rt = this.rt;
    const T = m.numTokens;
    const idsIn = new Int32Array(T), pos = new Int32Array(T), gather = new Int32Array(this.maxSeqsPerStep);
    const sampledRow = new Array<number>(rows.length).fill(-1);
    let R = 0, maxPos = 0;
    rows.forEach((r, i) => {
      const [a] = m.rows[i];
      const start = starts[i];
      for (let j = 0; j < r.ids.length; j++) { idsIn[a + j] = r.ids[j]; pos[a + j] = start + j; }
      maxPos = Math.max(maxPos, start + r.ids.length);
      if (r.sample && r.sampleAll) {
        // A verification row: every position samples, in order.
        sampledRow[i] = R;
        for (let j = 0; j < r.ids.length; j++) gather[R++] = a + j;
      } else if (r.sample) {
        gather[R] = a + r.ids.length - 1;
        sampledRow[i] = R++;
        // More draws from the same row (a request's other choices): consecutive places after the first.
        for (let k = 1; k < (r.samples ?? 1); k++) gather[R++] = a + r.ids.length - 1;
      }
    });
    if (R > this.maxSeqsPerStep) throw new WebinferError(`recordStep: rows: expected at most maxSeqsPerStep=${this.maxSeqsPerStep} sampled positions in a step, got ${R}`);
    const mixed = this.config.mrope && this.visionSeqs.size ? this.visionPositions(rows, m, starts, pos)
      : this.config.siglip && this.visionSeqs.size ? this.imageBlocks(rows, m, starts) : null;
    if (mixed) maxPos = Math.max(maxPos, mixed.maxPos);
    this.ensurePositions(maxPos);
    if (mixed) for (const k of mixed.rows) pos[k] += this.tablePositions;
    if (this.config.rope.type === 'longrope') {
      // LongRoPE picks short or long factors per sequence, as HF per forward pass: long where the
      // sequence's last position in this step + 1 exceeds original_max_position_embeddings. The
      // table holds the long rows after the short ones. Keys already in the cache keep the factors
      // they were written with (as HF's cache): a sequence that crosses the threshold while decoding
      // attends from long-rotated queries to its earlier short-rotated keys, exactly as HF's
      // generate does; a prompt longer than the threshold split over prefill chunks rotates its
      // early chunks the short way, unlike HF's one-pass prefill (the goldens' prompts fit one step),
      // and the prefix cache (opt-in) does not key blocks by the factors they were rotated with.
      rows.forEach((r, i) => {
        const [a] = m.rows[i];
        const last = starts[i] + r.ids.length - 1;
        for (let j = 0; j < r.ids.length; j++) pos[a + j] = longropeRow(this.config.rope, starts[i] + j, last, this.tablePositions);
      });
    }
    const V = this.config.vocabSize;
    this.sampling.grow(proc, V);
    // The last step's plans go back first: the submit below frees their buffers for this step's plans.
    this.arch.releasePlans?.();
    // Uploads run on the queue ahead of anything still in the encoder: submit that first (the clears
    // of freshly made buffers, say), so the step's inputs land after it.
    rt.flush();
    const q = rt.device.queue;
    q.writeBuffer(this.idsIn.buffer, 0, idsIn);
    q.writeBuffer(this.pos.buffer, 0, pos);
    q.writeBuffer(this.slots.buffer, 0, m.slotMapping as Int32Array<ArrayBuffer>);
    if (R) q.writeBuffer(this.gather.buffer, 0, gather, 0, R);
    this.sampling.upload(proc, V);
    if (mixed) this.uploadVision(mixed);
    const verifying = rows.some((r) => r.sample && r.sampleAll);
    const split = verifying && rt.tuning.verifyRowsAsDecode && !m.stateSlots ? verificationAsDecode(rows, m) : null;
    const ctx: StepContext = {
      T, h: this.h, positions: this.pos, slots: this.slots, cos: this.cos!, sin: this.sin!,
      meta: split ?? { queryStartLoc: m.queryStartLoc, seqLens: m.seqLens, blockTable: m.blockTable, maxBlocksPerSeq: m.maxBlocksPerSeq,
        ...(m.stateSlots ? { stateSlots: m.stateSlots } : {}) },
      ...(mixed?.attention ? { attention: mixed.attention } : {}),
    };
    // A step verifying speculative proposals plans its products exactly (Runtime.exactProducts).
    // A speculating model's steps keep attention's queries in f32 (Runtime.exactQueries), verifying or not.
    rt.exactProducts = verifying;
    rt.exactQueries = this.exactAttention;
    try {
      return this.recordPlanned(step, ctx, T, R, V, proc, all, mixed, verifying, sampledRow);
    } finally {
      rt.exactProducts = false;
      rt.exactQueries = false;
    }
  }

  private recordPlanned(step: number, ctx: StepContext, T: number, R: number, V: number, proc: StepProcessing | null, all: Tensor | null,
                        mixed: VisionStep | null, verifying: boolean, sampledRow: number[]): StepRecord {
    const rt = this.rt;
    this.arch.plan(ctx);
    const sig = rt.tuning.stepGraphs && this.arch.signature ? this.arch.signature(ctx) : null;
    const key = sig === null ? null : `${sig}#${verifying ? 'verify#' : ''}${this.exactAttention ? 'exactq#' : ''}${JSON.stringify(rt.tuning)}`;
    const k = this.inFlight;
    const prev = this.sampled[(step + k - 1) % k], out = this.sampled[step % k];
    rt.recording(this.dc, () => {
      rt.dispatch(rt.kernel('model_step', 'ids_main'), { ids_in: this.idsIn, prev, ids_out: this.ids }, { rows: T, prev_rows: this.maxSeqsPerStep }, Math.ceil(T / 64));
      embedding(rt, this.ids, this.arch.embed, { rows: T, out: this.h });
      if (mixed?.features.length) this.copyImageRows(mixed.features);
      const x = key === null ? this.arch.forward(ctx) : this.layers(key, ctx);
      const cap = this.arch.logitSoftcap;
      if (all) {
        linear(rt, x, this.arch.lmHead, { rows: T, out: all });
        if (cap) activate(rt, all, 'softcap', { cap, rows: T, out: all });
      } else if (R > 0) {
        linear(rt, x, this.arch.lmHead, { rows: R, gatherRows: this.gather, out: this.logitsT });
        // Gemma 2's final_logit_softcapping: cap·tanh(logits/cap), before logprobs and sampling see them.
        if (cap) activate(rt, this.logitsT, 'softcap', { cap, rows: R, out: this.logitsT });
        this.sampling.record(this.logitsT, R, V, proc, out);
      }
    });
    // Submits the step and copies its ids (and logprob rows) for the host.
    let ids: Promise<ArrayBuffer>;
    if (R) ids = rt.readBuffer(out.buffer, 4 * R, 0, this.reads);
    else { rt.flush(); ids = Promise.resolve(new ArrayBuffer(0)); }
    const logits = this.sampling.readLogprobs(proc, V, this.reads);
    return { step, T, sampledRow, ids, logits };
  }

  /**
   * A vision model's step: each token's M-RoPE position. A text token (t = h = w, the prompt's text and
   * every decoded token at index + rope delta) takes that position's row of the tables; an image token
   * takes a row of its own after them (`rows`: its index in the step, offset by the table's positions
   * once they are known), its cos/sin computed here. `features`: the step's image-token rows and the
   * sequence feature rows that replace their embeddings.
   */
  private visionPositions(rows: StepRow[], m: StepPlacement, starts: readonly number[], pos: Int32Array): VisionStep | null {
    const H = this.config.hiddenSize, half = this.config.rope.rotaryDim / 2;
    const out: VisionStep = { rows: [], cos: [], sin: [], features: [], maxPos: 0 };
    rows.forEach((r, i) => {
      const vs = this.visionSeqs.get(r.id);
      if (!vs) return;
      const [a] = m.rows[i];
      const L = vs.t.length;
      for (let j = 0; j < r.ids.length; j++) {
        const idx = starts[i] + j;
        if (idx >= L) {
          pos[a + j] = idx + vs.ropeDelta;
          out.maxPos = Math.max(out.maxPos, pos[a + j] + 1);
          continue;
        }
        const t = vs.t[idx], h = vs.h[idx], w = vs.w[idx];
        out.maxPos = Math.max(out.maxPos, t + 1, h + 1, w + 1);
        if (t === h && h === w) { pos[a + j] = t; continue; }
        const c = new Float32Array(half), sn = new Float32Array(half);
        mropeRow(this.config, t, h, w, c, sn, 0);
        pos[a + j] = a + j;
        out.rows.push(a + j);
        out.cos.push(c);
        out.sin.push(sn);
      }
      // Image tokens of this chunk: their feature rows over their embeddings.
      const lo = starts[i], hi = starts[i] + r.ids.length;
      for (const run of vs.runs) {
        const s = Math.max(lo, run.start), e = Math.min(hi, run.start + run.count);
        if (s >= e) continue;
        out.features.push({ row: a + (s - lo), data: vs.features.subarray((run.featureRow + s - run.start) * H, (run.featureRow + e - run.start) * H) });
      }
    });
    return out.rows.length || out.features.length || out.maxPos ? out : null;
  }

  /** Writes a vision step's own table rows and image-feature rows (before the step's commands run). */
  /**
   * Gemma 3's image step: the feature rows of the image tokens it holds (divided by the embedding scale,
   * which forward applies to every row: HF places the features unscaled), and, where it holds any, its
   * attention over per-row sequences without a causal mask (StepContext.attention): each image block's
   * tokens one sequence whose keys end at the block's end (so they see each other, and a sliding
   * layer's window still counts back from each token's own position), every other token a sequence
   * of its own ending at it (causal). A block must lie in one step (the engine's chunks keep it whole:
   * RequestEngine via imageChunk).
   */
  private imageBlocks(rows: StepRow[], m: StepPlacement, starts: readonly number[]): VisionStep | null {
    const H = this.config.hiddenSize, scale = this.config.embedScale ?? 1;
    const out: VisionStep = { rows: [], cos: [], sin: [], features: [], maxPos: 0 };
    const qsl = [0], lens: number[] = [], owner: number[] = [];
    let any = false;
    rows.forEach((r, i) => {
      const vs = this.visionSeqs.get(r.id);
      const lo = starts[i], hi = starts[i] + r.ids.length;
      let idx = lo;
      while (idx < hi) {
        const run = vs?.runs.find((x) => x.start <= idx && idx < x.start + x.count);
        if (!run) {
          qsl.push(qsl[qsl.length - 1] + 1); lens.push(idx + 1); owner.push(i);
          idx++;
          continue;
        }
        const end = run.start + run.count;
        if (end > hi) throw new WebinferError(`recordStep: rows[${i}]: an image block (positions ${run.start}..${end - 1}) cut by the step's end at ${hi} (internal error: the engine keeps blocks whole)`);
        any = true;
        qsl.push(qsl[qsl.length - 1] + (end - idx)); lens.push(end); owner.push(i);
        const data = vs!.features.subarray((run.featureRow + idx - run.start) * H, (run.featureRow + run.count) * H).map((x) => Math.fround(x / scale));
        out.features.push({ row: m.rows[i][0] + (idx - lo), data });
        idx = end;
      }
    });
    if (!any) return null;
    const seq = sequenceOfRow(m);
    const bt = blockTableOf(m, owner.map((i) => seq[i]));
    out.attention = { meta: { queryStartLoc: Int32Array.from(qsl), seqLens: Int32Array.from(lens), blockTable: bt, maxBlocksPerSeq: m.maxBlocksPerSeq }, causal: false };
    return out;
  }

  private uploadVision(v: VisionStep): void {
    const q = this.rt.device.queue, half = this.config.rope.rotaryDim / 2, H = this.config.hiddenSize;
    v.rows.forEach((row, k) => {
      const at = (this.tablePositions + row) * half * 4;   // after the positions' rows
      q.writeBuffer(this.cos!.buffer, at, v.cos[k] as Float32Array<ArrayBuffer>);
      q.writeBuffer(this.sin!.buffer, at, v.sin[k] as Float32Array<ArrayBuffer>);
    });
    if (!v.features.length) return;
    if (!this.imageRows) {
      this.imageRows = this.rt.zeros([this.maxTokensPerStep, H]);
      // Its clear is recorded: submitted before the rows are written over it.
      this.rt.flush();
    }
    for (const f of v.features) q.writeBuffer(this.imageRows.buffer, f.row * H * 4, f.data as Float32Array<ArrayBuffer>);
  }

  /** After the embedding: the image tokens' rows of h replaced by their features. */
  private copyImageRows(features: VisionStep['features']): void {
    const enc = this.rt.commandEncoder(), H = this.config.hiddenSize;
    for (const f of features) enc.copyBufferToBuffer(this.imageRows!.buffer, f.row * H * 4, this.h.buffer, f.row * H * 4, f.data.length * 4);
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

  /**
   * Bytes one decode step of `batch` sequences reads: the weights (a MoE model: the experts they
   * choose), and the cache rows of `tokens` cached tokens.
   */
  stepBytes(tokens: number, batch = 1): { weights: number; kv: number } {
    return { weights: this.arch.weightBytes(batch), kv: tokens * this.config.numLayers * this.arch.cacheBytes(this.cacheDType).perToken };
  }

  /** API.md's encoder call: refused by a decoder-only model. */
  encode(_inputs: unknown): Promise<Float32Array[]> {
    return Promise.reject(this.notEncoder('encode'));
  }

  /** API.md's encoder call: refused by a decoder-only model. */
  embed(_inputs: unknown, _o?: unknown): Promise<Float32Array[]> {
    return Promise.reject(this.notEncoder('embed'));
  }

  private notEncoder(op: string): WebinferError {
    return new WebinferError(`${op}: model: expected an encoder-only model (BertModel, ModernBertModel), got ${this.architecture}, a decoder (use logits, generate or chat.completions)`);
  }

  /** What the layer above ends before the GPU memory goes (serve/model.ts: its requests). */
  protected onDestroy(): void {}

  /** Frees the model's GPU memory. */
  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    this.onDestroy();
    this.graphs.clear();
    this.dc.destroy();
    this.arch.destroy();
    for (const t of [this.h, this.idsIn, this.ids, this.pos, this.slots, this.gather, this.logitsT, ...this.sampled, this.cos, this.sin, this.imageRows]) t?.destroy();
    this.visionSeqs.clear();
    this.sampling.destroy();
    // Steps still in flight: their ids are wanted by no one, and their staging buffers would come back
    // to the pool only once their maps resolve (after the next model's first steps, often), the pool
    // taking new ones meanwhile: one more live buffer every few such destroys (issue 40).
    this.rt.abandonReads(this.reads);
    // What the model held waits in the pool for a submit (BufferPool.release): submitted now, a model
    // loaded next takes the same buffers instead of a second set.
    try {
      this.rt.flush();
    } catch { /* a lost device: nothing to submit, and destroy does not throw */ }
  }
}
