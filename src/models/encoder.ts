// Encoder-only models (API.md "Encoders, encoder-decoders, speech"): BertModel and ModernBertModel
// loaded from an HF checkpoint, with encode (the last hidden state of every input) and embed (pooled, mask
// aware, optionally L2-normalized). embeddings.create (OpenAI's Embeddings API) is serve/embeddings.ts's.
//
// Inputs of different lengths run as one batch without padding: their tokens are concatenated into T
// rows for the linear layers, and attention sees each input as its own sequence of a paged batch with
// no causal mask (attention/paged.ts planAttention, causal: false) over a scratch K/V cache that every
// layer of the pass reuses, sized for the largest pass so far. An input's rows never see another
// input's keys, and no padded row is computed, so an input gives the same states alone or in any batch.
// Why the paged kernels rather than dense SDPA over a padded [B, H, L, D] batch: no padding work, no
// mask tensor, one plan per pass for every layer, and the two-sided window of ModernBERT's local layers
// (WindowSidesOption) in the same kernels. A batch whose tokens pass maxTokensPerStep is split into
// passes of whole inputs.
import { WebinferError, check, checkKeys, checkPosInt, fail, fmt } from '../core/errors.js';
import type { Runtime } from '../core/runtime.js';
import type { Tensor } from '../core/tensor.js';
import { createPagedKVCache, type PagedKVCache } from '../attention/paged_cache.js';
import { planAttention, type AttentionPlan } from '../attention/paged.js';
import { checkTokenIds } from './step.js';
import { TextTokenizer } from '../text/text.js';
import { isGGUFFile } from './gguf_weights.js';
import type { GGUFFile } from '../formats/gguf.js';
import type { SafetensorsFile } from '../formats/safetensors.js';
import { checkpointDType, WeightReader, type WeightDType } from './weights.js';
import { resolveEncoderTensors, type EncoderArch, type EncoderPass } from './encoder_arch.js';
import { Bert, parseBertConfig } from './bert.js';
import { ModernBert, parseModernBertConfig } from './modernbert.js';

/** The encoder-only architectures loadModel runs (config.architectures[0]). */
export const ENCODER_ARCHITECTURES = Object.freeze(['BertModel', 'ModernBertModel']);

/** Whether a parsed config.json names an encoder-only architecture. */
export function isEncoderConfig(config: unknown): boolean {
  const a = (config as { architectures?: unknown } | null)?.architectures;
  return Array.isArray(a) && ENCODER_ARCHITECTURES.includes(a[0]);
}

/**
 * loadModel's options as an encoder reads them (model.ts LoadModelOptions: the same object). The
 * options about generation (kvCache, maxSeqsPerStep, generationConfig) are refused with an error.
 */
export interface EncoderLoadOptions {
  config?: object;
  weights: SafetensorsFile | readonly SafetensorsFile[] | GGUFFile;
  /** How weights are stored on the GPU: 'checkpoint' (the default) as in the checkpoint, or a float dtype. */
  dtype?: string;
  onProgress?: (loadedBytes: number, totalBytes: number) => void;
  /** tokenizer.json (parsed): embed and embeddings.create then take text. */
  tokenizer?: object;
  tokenizerConfig?: object;
  /** The model's name in embeddings.create's responses (default: the architecture). */
  name?: string;
  /** Tokens one forward pass takes at most (default 8192): a larger batch runs as several passes of
   *  whole inputs (an input longer than this runs alone). */
  maxTokensPerStep?: number;
  allowNonFinite?: boolean;
  kvCache?: unknown;
  maxSeqsPerStep?: unknown;
  generationConfig?: unknown;
  preprocessorConfig?: unknown;
}

const OP = 'loadModel';
const BLOCK = 16;
const KNOWN = ['config', 'weights', 'dtype', 'onProgress', 'tokenizer', 'tokenizerConfig', 'name', 'maxTokensPerStep', 'allowNonFinite',
  'kvCache', 'maxSeqsPerStep', 'generationConfig', 'preprocessorConfig'];
const NOT_FOR_ENCODERS: Readonly<Record<string, string>> = {
  kvCache: 'an encoder-only model keeps no KV cache (each call attends within its inputs)',
  maxSeqsPerStep: 'an encoder-only model serves no request queue (maxTokensPerStep bounds a forward pass)',
  generationConfig: 'an encoder-only model generates nothing (from loadCheckpoint: the folder\'s generation_config.json; leave it out)',
  preprocessorConfig: 'a feature extractor belongs to a speech model',
};

/** What an encoder runner is built with. */
export interface EncoderRunnerOptions { name: string; tokenizer?: TextTokenizer; maxTokens: number }

/** Builds the runner (or a class over it: serve/embeddings.ts) once the weights are on the GPU. */
export type MakeEncoder<E extends EncoderRunner> = (rt: Runtime, arch: EncoderArch, o: EncoderRunnerOptions) => E;

/** Loads an encoder-only checkpoint (BertModel, ModernBertModel): checked before any GPU memory is taken. */
export async function loadEncoderModel<E extends EncoderRunner>(rt: Runtime, o: EncoderLoadOptions, make: MakeEncoder<E>): Promise<E> {
  rt.assertAlive(OP);
  check(o !== null && typeof o === 'object', OP, 'o', '{ config, weights, dtype?, tokenizer?, ... }', o);
  checkKeys(OP, 'o', o, KNOWN);
  for (const [k, why] of Object.entries(NOT_FOR_ENCODERS)) {
    if ((o as unknown as Record<string, unknown>)[k] !== undefined) fail(OP, `o.${k}`, `none: ${why}`, (o as unknown as Record<string, unknown>)[k]);
  }
  if (isGGUFFile(o.weights)) fail(OP, 'o.weights', 'safetensors files (an encoder-only model is not read from GGUF)', 'a GGUFFile');
  const config = o.config;
  check(config !== null && typeof config === 'object' && !Array.isArray(config), OP, 'o.config', 'a parsed config.json object', config);
  const c = config as Record<string, unknown>;
  const archs = c.architectures;
  check(Array.isArray(archs) && ENCODER_ARCHITECTURES.includes(archs[0]), OP, 'config.architectures', `[${ENCODER_ARCHITECTURES.map((a) => `'${a}'`).join(' | ')}]`, fmt(archs));
  if (c.quantization_config !== undefined || c.quantization !== undefined) {
    fail(OP, 'config.quantization_config', 'none (quantized encoder checkpoints are not supported; load a float checkpoint)', fmt(c.quantization_config ?? c.quantization));
  }
  const files = (Array.isArray(o.weights) ? o.weights : [o.weights]) as SafetensorsFile[];
  check(files.length > 0 && files.every((f) => f && f.tensors instanceof Map && typeof f.bytes === 'function'), OP, 'o.weights',
    'a SafetensorsFile or an array of them (loadSafetensors)', o.weights);
  const dt = o.dtype ?? 'checkpoint';
  check(['checkpoint', 'f32', 'f16', 'bf16'].includes(dt), OP, 'o.dtype', "'checkpoint', 'f32', 'f16' or 'bf16' (an encoder's weights stay float)", fmt(o.dtype));
  if (o.onProgress !== undefined) check(typeof o.onProgress === 'function', OP, 'o.onProgress', 'a function (loadedBytes, totalBytes)', o.onProgress);
  if (o.allowNonFinite !== undefined) check(typeof o.allowNonFinite === 'boolean', OP, 'o.allowNonFinite', 'a boolean', fmt(o.allowNonFinite));
  if (o.name !== undefined) check(typeof o.name === 'string' && o.name.length > 0, OP, 'o.name', 'a non-empty string', o.name);
  const maxTokens = o.maxTokensPerStep === undefined ? 8192 : checkPosInt(o.maxTokensPerStep, OP, 'o.maxTokensPerStep');
  if (o.tokenizer !== undefined) check(o.tokenizer !== null && typeof o.tokenizer === 'object', OP, 'o.tokenizer', 'a parsed tokenizer.json object', o.tokenizer);
  if (o.tokenizerConfig !== undefined) check(o.tokenizerConfig !== null && typeof o.tokenizerConfig === 'object', OP, 'o.tokenizerConfig', 'a parsed tokenizer_config.json object', o.tokenizerConfig);
  const tokenizer = o.tokenizer ? TextTokenizer.create(o.tokenizer, o.tokenizerConfig) : undefined;

  const arch: EncoderArch = archs[0] === 'BertModel' ? new Bert(rt, parseBertConfig(c)) : new ModernBert(rt, parseModernBertConfig(c));
  const has = (n: string) => files.some((f) => f.tensors.has(n));
  const prefix = arch.prefixes.find((p) => has(p + arch.probe)) ?? '';
  const resolved = resolveEncoderTensors(arch.cfg.architecture, arch.schema(), prefix, files);
  const dtype: WeightDType = dt === 'checkpoint' ? checkpointDType(resolved) : dt as WeightDType;
  if (tokenizer && tokenizer.vocabSize > arch.cfg.vocabSize) {
    fail(OP, 'o.tokenizer', `a vocabulary within the model's ${arch.cfg.vocabSize} embeddings`, `${tokenizer.vocabSize} tokens`);
  }
  let reader: WeightReader | null = null;
  try {
    await rt.allocating(async () => {
      reader = new WeightReader(files, resolved, o.onProgress, false, undefined, o.allowNonFinite === true);
      await arch.load(reader, dtype, prefix);
    }, () => {
      arch.destroy();
      reader?.destroyLoaded();
    }, (e, oom) => `${OP}: ${oom ? 'the GPU ran out of memory for' : 'the GPU refused an allocation or upload of'} the ${arch.cfg.architecture} weights; everything taken is released (${e.message})`);
  } finally {
    await Promise.allSettled(files.map((f) => f.close?.()));
  }
  return make(rt, arch, { name: o.name ?? arch.cfg.architecture, tokenizer, maxTokens });
}

/** embed's options. */
export interface EmbedOptions {
  /** 'mean' (the default): the mean of the input's states (its real tokens only); 'cls': its first
   *  token's state; 'pooler' (BertModel with a pooler): tanh(pooler.dense(first state)), what
   *  transformers returns as pooler_output. */
  pooling?: 'mean' | 'cls' | 'pooler';
  /** L2-normalize each vector (default false). */
  normalize?: boolean;
}

const EMBED_KEYS = ['pooling', 'normalize'];

function noGeneration(arch: string, what: string): never {
  throw new WebinferError(`${what}: an encoder-only model (${arch}) has no language-model head and generates nothing; use encode, embed or embeddings.create`);
}

/**
 * An encoder-only model on the GPU (loadEncoderModel): encode and embed. OpenAI's embeddings API over
 * it is the layer above's (serve/embeddings.ts, EncoderModel).
 */
export class EncoderRunner {
  readonly architecture: string;
  /** GPU bytes of the weights as stored. */
  readonly weightBytes: number;
  /** The model's name in embeddings.create's responses, and the id a server serves it under. */
  id: string;
  /** The checkpoint's tokenizer, when one was given: embed and embeddings.create then take text. */
  readonly tokenizer?: TextTokenizer;
  /** Hidden size: the length of every state and embedding. */
  readonly hiddenSize: number;
  /** The longest input (max_position_embeddings). */
  readonly maxInputTokens: number;
  readonly maxTokensPerStep: number;
  private cache: PagedKVCache | null = null;
  /** Calls run one at a time (they share the scratch cache). */
  private queue: Promise<unknown> = Promise.resolve();
  protected destroyed = false;

  constructor(private readonly rt: Runtime, protected readonly arch: EncoderArch, o: EncoderRunnerOptions) {
    this.architecture = arch.cfg.architecture;
    this.weightBytes = arch.storedWeightBytes();
    this.id = o.name;
    this.tokenizer = o.tokenizer;
    this.hiddenSize = arch.cfg.hidden;
    this.maxInputTokens = arch.cfg.maxPositions;
    this.maxTokensPerStep = o.maxTokens;
  }

  /** The last hidden state of every input, [len × hidden] row-major each. Inputs run as one batch. */
  async encode(inputs: readonly (readonly number[] | Int32Array)[]): Promise<Float32Array[]> {
    const ids = this.checkIds('encode', inputs);
    return (await this.run(ids, false)).states;
  }

  /** One vector per input (token ids, or text with a tokenizer), pooled as o.pooling says. */
  async embed(inputs: readonly (readonly number[] | Int32Array | string)[], o: EmbedOptions = {}): Promise<Float32Array[]> {
    const op = 'embed';
    check(o !== null && typeof o === 'object', op, 'o', '{ pooling?, normalize? }', o);
    checkKeys(op, 'o', o, EMBED_KEYS);
    const pooling = o.pooling ?? 'mean';
    check(pooling === 'mean' || pooling === 'cls' || pooling === 'pooler', op, 'o.pooling', "'mean', 'cls' or 'pooler'", fmt(pooling));
    if (o.normalize !== undefined) check(typeof o.normalize === 'boolean', op, 'o.normalize', 'a boolean', fmt(o.normalize));
    const ids = this.checkInputs(op, inputs);
    return this.pool(op, ids, pooling, o.normalize ?? false);
  }

  /** Prefill logits: refused (an encoder has no language-model head). */
  logits(): Promise<never> {
    return Promise.reject(noGeneration(this.architecture, 'logits'));
  }

  /** Refused: an encoder generates nothing. */
  generate(): Promise<never> {
    return Promise.reject(noGeneration(this.architecture, 'generate'));
  }

  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    this.cache?.destroy();
    this.cache = null;
    this.arch.destroy();
  }

  // ---------------------------------------------------------------------------------------- inputs

  private alive(op: string): void {
    if (this.destroyed) throw new WebinferError(`${op}: the model was destroyed`);
    this.rt.assertAlive(op);
  }

  private checkIds(op: string, inputs: unknown): Int32Array[] {
    this.alive(op);
    check(Array.isArray(inputs), op, 'inputs', 'an array of inputs (each a number[] or Int32Array of token ids)', inputs);
    return (inputs as unknown[]).map((x, i) => this.checkLength(op, `inputs[${i}]`, checkTokenIds(op, `inputs[${i}]`, x, this.arch.cfg.vocabSize)));
  }

  private checkLength(op: string, arg: string, ids: Int32Array): Int32Array {
    check(ids.length <= this.maxInputTokens, op, arg, `at most ${this.maxInputTokens} tokens (the model's max_position_embeddings)`, `${ids.length} tokens`);
    return ids;
  }

  /** Token ids or text (tokenized with the special tokens, as sentence-transformers does). */
  private checkInputs(op: string, inputs: unknown): Int32Array[] {
    this.alive(op);
    check(Array.isArray(inputs), op, 'inputs', 'an array of inputs (strings, or number[] / Int32Array of token ids)', inputs);
    return (inputs as unknown[]).map((x, i) => {
      if (typeof x !== 'string') return this.checkLength(op, `inputs[${i}]`, checkTokenIds(op, `inputs[${i}]`, x, this.arch.cfg.vocabSize));
      if (!this.tokenizer) fail(op, `inputs[${i}]`, 'token ids (this model was loaded without a tokenizer, so it cannot read text)', 'a string');
      check(x.length > 0, op, `inputs[${i}]`, 'a non-empty string', "''");
      return this.checkLength(op, `inputs[${i}]`, Int32Array.from(this.tokenizer.encode(x)));
    });
  }

  // ------------------------------------------------------------------------------------- pooling

  protected async pool(op: string, ids: Int32Array[], pooling: 'mean' | 'cls' | 'pooler', normalize: boolean): Promise<Float32Array[]> {
    if (pooling === 'pooler' && !this.arch.hasPooler) {
      fail(op, 'o.pooling', `'mean' or 'cls' ('pooler' needs a BertModel checkpoint with pooler.dense)`, "'pooler'");
    }
    const r = await this.run(ids, pooling === 'pooler');
    const H = this.hiddenSize;
    return ids.map((x, i) => {
      let v: Float32Array;
      if (pooling === 'pooler') v = r.pooled!.slice(i * H, (i + 1) * H);
      else if (pooling === 'cls') v = r.states[i].slice(0, H);
      else {
        const acc = new Float64Array(H), s = r.states[i];
        for (let t = 0; t < x.length; t++) for (let d = 0; d < H; d++) acc[d] += s[t * H + d];
        v = Float32Array.from(acc, (a) => a / x.length);
      }
      if (normalize) {
        let n = 0;
        for (const e of v) n += e * e;
        const inv = 1 / Math.max(Math.sqrt(n), 1e-12);   // as torch.nn.functional.normalize's eps
        for (let d = 0; d < H; d++) v[d] *= inv;
      }
      return v;
    });
  }

  // -------------------------------------------------------------------------------------- forward

  /** Every input's last hidden state (and BERT's pooler outputs), in passes of at most maxTokensPerStep tokens. */
  private run(ids: Int32Array[], pooler: boolean): Promise<{ states: Float32Array[]; pooled: Float32Array | null }> {
    const next = this.queue.then(async () => {
      const states: Float32Array[] = [];
      const pooled = pooler ? new Float32Array(ids.length * this.hiddenSize) : null;
      for (let a = 0; a < ids.length;) {
        let b = a + 1, T = ids[a].length;
        while (b < ids.length && T + ids[b].length <= this.maxTokensPerStep) T += ids[b++].length;
        const r = await this.pass(ids.slice(a, b), pooler);
        states.push(...r.states);
        if (pooled) pooled.set(r.pooled!, a * this.hiddenSize);
        a = b;
      }
      return { states, pooled };
    });
    this.queue = next.catch(() => undefined);
    return next;
  }

  private scratch(blocks: number): PagedKVCache {
    if (!this.cache || this.cache.numBlocks < blocks) {
      const c = this.arch.cfg;
      const numBlocks = Math.max(blocks, 2 * (this.cache?.numBlocks ?? 0));
      this.cache?.destroy();
      this.cache = null;
      this.cache = createPagedKVCache(this.rt, { numBlocks, blockSize: BLOCK, numKvHeads: c.numHeads, headSize: c.headDim, dtype: 'f32' });
    }
    return this.cache;
  }

  /** One forward pass over `inputs` (one batch, unpadded). */
  private async pass(inputs: Int32Array[], pooler: boolean): Promise<{ states: Float32Array[]; pooled: Float32Array | null }> {
    this.alive('encode');
    const rt = this.rt, c = this.arch.cfg, H = c.hidden;
    const S = inputs.length;
    const qsl = new Int32Array(S + 1), seqLens = new Int32Array(S);
    let blocks = 0, maxB = 1;
    for (let i = 0; i < S; i++) {
      seqLens[i] = inputs[i].length;
      qsl[i + 1] = qsl[i] + inputs[i].length;
      const nb = Math.ceil(inputs[i].length / BLOCK);
      blocks += nb;
      maxB = Math.max(maxB, nb);
    }
    const T = qsl[S];
    const blockTable = new Int32Array(S * maxB);
    const ids = new Int32Array(T), positions = new Int32Array(T), slots = new Int32Array(T), firstRows = qsl.slice(0, S);
    for (let i = 0, b0 = 0; i < S; i++) {
      const nb = Math.ceil(inputs[i].length / BLOCK);
      for (let n = 0; n < nb; n++) blockTable[i * maxB + n] = b0 + n;
      for (let p = 0; p < inputs[i].length; p++) {
        ids[qsl[i] + p] = inputs[i][p];
        positions[qsl[i] + p] = p;
        slots[qsl[i] + p] = b0 * BLOCK + p;
      }
      b0 += nb;
    }
    const cache = this.scratch(blocks);
    const temps: Tensor[] = [];
    const i32 = (a: Int32Array) => { const t = rt.tensor(a, [a.length], 'i32'); temps.push(t); return t; };
    const meta = { queryStartLoc: qsl, seqLens, blockTable, maxBlocksPerSeq: maxB };
    const plans = new Map<number, AttentionPlan>();
    try {
      for (const w of this.arch.windows) {
        plans.set(w, planAttention(rt, meta, {
          cache, numHeads: c.numHeads, scale: 1 / Math.sqrt(c.headDim), causal: false, ...(w ? { slidingWindow: w, windowBothSides: true } : {}),
        }));
      }
      const p: EncoderPass = { T, S, ids: i32(ids), positions: i32(positions), slots: i32(slots), firstRows: i32(firstRows), cache, meta, plans, temps };
      const h = this.arch.forward(p);
      const pooledT = pooler ? this.arch.pooler(p, h) : null;
      for (const plan of plans.values()) plan.destroy();
      plans.clear();
      const all = await h.toFloat32();
      const states = inputs.map((_, i) => all.slice(qsl[i] * H, qsl[i + 1] * H));
      return { states, pooled: pooledT ? await pooledT.toFloat32() : null };
    } finally {
      for (const plan of plans.values()) plan.destroy();
      for (const t of temps) t.destroy();
    }
  }
}
