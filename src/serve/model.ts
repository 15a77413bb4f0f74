// The model as applications hold it (API.md "Whole models", "Serving"): the forward pass over the paged
// cache (models/model.ts, ModelRunner) under its request engine (engine.ts), its block manager with the
// prefix cache (kv_manager.ts) and the OpenAI-shaped API (openai.ts). generate, logits and the OpenAI
// calls are requests of the one engine; the forward pass knows nothing of requests, so this module
// sits above models/ and builds on it, never the other way round. loadModel and createRandomModel
// are models/'s loaders, handed the constructors of this layer's objects (the decoder's Model, the
// encoder's EncoderModel in embeddings.ts).
import { check, checkKeys, checkPosInt, fail, fmt, WebinferError } from '../core/errors.js';
import type { Runtime } from '../core/runtime.js';
import type { Tensor } from '../core/tensor.js';
import type { ModelConfig } from '../models/config.js';
import { createRandomModelWith, loadModelWith, ModelRunner, stateSlots, type DecoderText, type LoadModelOptions, type ModelMakers, type RandomModelOptions,
  type RunnerOptions } from '../models/model.js';
import type { Architecture, StepProcessing, StepRecord, StepRow } from '../models/step.js';
import { checkQwenImage, imageDigest, isQwenImageInput, mropePositions, QwenVLFamily, type ImageRun, type QwenImageInput } from '../models/qwen_vl.js';
import { checkGemmaPixels, type Gemma3VLFamily } from '../models/gemma3_vision.js';
import { isGGUFFile } from '../models/gguf_weights.js';
import { gemma3MmprojPreprocessor } from '../formats/gguf_mmproj.js';
import type { ImageInput, RgbImage } from '../vision/image.js';
import { preprocessImage, preprocessRgb, readPreprocessorConfig, type ImageProcessorConfig } from '../vision/processors.js';
import { gemma3VisionTokens, qwen2VLVisionTokens, type VisionTokens } from '../vision/tokens.js';
import type { VisionSequence } from '../models/model.js';
import { PagedKVCache } from '../attention/paged_cache.js';
import { EncoderModel } from './embeddings.js';
import { T5Model } from './t5.js';
import { WhisperModel } from './whisper.js';
import { OpenAIError } from './errors.js';
import { freshSeed, GREEDY, RequestEngine, type StepRunner } from './engine.js';
import { KVCacheManager } from './kv_manager.js';
import { parseSpeculation, type DraftSpeculation, type NgramSpeculation, type SpeculationConfig } from './speculative.js';
import { OpenAIServing } from './openai.js';

export interface GenerateOptions {
  maxNewTokens?: number;
  /** 0 (the default): greedy. */
  temperature?: number;
  topK?: number;
  topP?: number;
  seed?: number;
  /** Tokens that end a sequence (kept as its last token); default: the config's eos_token_id. */
  stopTokens?: number[];
  /**
   * Called with each new token of prompt `prompt`. It may be async: a promise it returns that rejects
   * (or a throw) ends the call with that error, and the call settles only once every promise it
   * returned has.
   */
  onToken?: ((prompt: number, token: number) => void) | ((prompt: number, token: number) => Promise<void>);
  signal?: AbortSignal;
  /** false: these prompts never speculate (when the model does: loadModel's `speculative`). */
  speculative?: boolean;
  /** A vision-language model's images, per prompt, in the order of their runs of image tokens (API.md "Images in"). */
  images?: (readonly (QwenImageInput | ImageInput)[] | undefined)[];
}

const GENERATE_OPTIONS = ['maxNewTokens', 'temperature', 'topK', 'topP', 'seed', 'stopTokens', 'onToken', 'signal', 'speculative', 'images'] as const;

/** A prompt's images as the engine carries them: the sequence's positions and features, and the prefix cache's salt. */
interface PromptImages { seq: VisionSequence; salt: string }

/** Whether a call's images are none (absent, null or empty). */
const noImages = (images: unknown): boolean => images === undefined || images === null || (Array.isArray(images) && images.length === 0);

function isAbortSignal(x: unknown): x is AbortSignal {
  return typeof AbortSignal !== 'undefined' && x instanceof AbortSignal;
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

/** What this layer makes of what models/ loads: a decoder under the request engine, an encoder with OpenAI's embeddings. */
const MAKERS: ModelMakers<Model, EncoderModel, WhisperModel, T5Model> = {
  decoder: (rt, cfg, arch, o) => new Model(rt, cfg, arch, o),
  encoder: (rt, arch, o) => new EncoderModel(rt, arch, o),
  whisper: (rt, cfg, mel, o) => new WhisperModel(rt, cfg, mel, o),
  t5: (rt, cfg, o) => new T5Model(rt, cfg, o),
};

/** loadModel's options at this layer: the checkpoint's (models/model.ts), and how its requests are served. */
export type ServeLoadOptions = LoadModelOptions & {
  /** Speculative decoding for the model's requests (API.md "Speculative decoding"; serve/speculative.ts). */
  speculative?: NgramSpeculation | DraftSpeculation | false;
};

/** A draft model must be a live decoder-only Model of the target's engine: checked before the target loads. */
function checkDraft(op: string, rt: Runtime, spec: SpeculationConfig | null): void {
  if (spec?.method !== 'draft') return;
  const d = spec.draft as unknown;
  const expected = 'a decoder-only Model loaded on the same engine (engine.loadModel)';
  if (!(d instanceof Model)) fail(op, 'o.speculative.draft', expected, d);
  if (!d.runsOn(rt)) fail(op, 'o.speculative.draft', expected, `a Model of another engine ('${d.id}')`);
  try {
    d.assertAlive(op);
  } catch {
    fail(op, 'o.speculative.draft', expected, `a destroyed Model ('${d.id}')`);
  }
}

/** Engine.loadModel: a checkpoint's model, its kind read from the config (API.md "Whole models"; encoders and encoder-decoders answer as their own objects). */
export async function loadModel(rt: Runtime, o: ServeLoadOptions): Promise<Model> {
  const { speculative, ...rest } = (o ?? {}) as ServeLoadOptions;
  // Checked before anything is read or uploaded.
  const spec = o !== null && typeof o === 'object' ? parseSpeculation('loadModel', speculative) : null;
  checkDraft('loadModel', rt, spec);
  // A vision-language model's image processor (preprocessor_config.json) is this layer's: the models'
  // loader takes a feature extractor for speech models only.
  const cfgJson = rest.config as Record<string, unknown> | undefined;
  let processor: ImageProcessorConfig | null = null;
  // llama.cpp's vision pair: the mmproj's image size, mean and std are its processor's.
  if (rest.mmproj !== undefined && rest.preprocessorConfig === undefined && isGGUFFile(rest.mmproj) && rest.mmproj.metadata.get('clip.projector_type') === 'gemma3') {
    processor = readPreprocessorConfig(gemma3MmprojPreprocessor(rest.mmproj));
  }
  if (rest.preprocessorConfig !== undefined && cfgJson && typeof cfgJson === 'object' && cfgJson.vision_config !== undefined) {
    const pp = readPreprocessorConfig(rest.preprocessorConfig);
    // Gemma 3's tower takes Gemma3ImageProcessor's pixels, Qwen2.5-VL's Qwen2VLImageProcessor's patches.
    const gemma = Array.isArray(cfgJson.architectures) && cfgJson.architectures[0] === 'Gemma3ForConditionalGeneration';
    const want = gemma ? 'gemma3' : 'qwen2vl';
    if (pp.kind !== want) fail('loadModel', 'o.preprocessorConfig', `a ${gemma ? 'Gemma3ImageProcessor' : 'Qwen2VLImageProcessor'} config (the model's vision tower is ${gemma ? "Gemma 3's" : "Qwen2.5-VL's"})`, pp.kind);
    processor = pp;
    delete rest.preprocessorConfig;
  }
  const m = await loadModelWith(rt, rest, MAKERS) as unknown;
  if (processor && m instanceof Model) m.useImageProcessor(processor);
  if (spec && !(m instanceof Model && m.verifies)) {
    (m as { destroy(): void }).destroy();
    fail('loadModel', 'o.speculative', 'no speculation for this model (decoder-only models verify proposals; not encoders, encoder-decoders, LFM2\'s convolutions or vision models)', speculative);
  }
  if (spec) (m as Model).engine.speculation = spec;
  return m as Model;
}

/**
 * A model of a config's shape with random weights made on the GPU (nothing read or uploaded): for
 * benchmarks at real model shapes and the default workload. Its outputs mean nothing.
 */
export async function createRandomModel(rt: Runtime, o: RandomModelOptions & { speculative?: NgramSpeculation | DraftSpeculation | false }): Promise<Model> {
  const { speculative, ...rest } = (o ?? {}) as RandomModelOptions & { speculative?: NgramSpeculation | DraftSpeculation | false };
  const spec = o !== null && typeof o === 'object' ? parseSpeculation('createRandomModel', speculative) : null;
  checkDraft('createRandomModel', rt, spec);
  const m = await createRandomModelWith(rt, rest, MAKERS.decoder);
  if (spec && !m.verifies) {
    m.destroy();
    fail('createRandomModel', 'o.speculative', 'no speculation for this model (LFM2\'s convolutions and vision models do not verify proposals)', speculative);
  }
  m.engine.speculation = spec;
  return m;
}

/**
 * A decoder-only model served: the step runtime (ModelRunner) with the block manager that places each
 * step's tokens, the request engine that schedules every caller's requests, and the OpenAI surface.
 */
export class Model extends ModelRunner implements StepRunner {
  /** OpenAI's Chat Completions over this model's request queue (serve/openai.ts). */
  readonly chat: OpenAIServing['chat'];
  /** OpenAI's Completions over this model's request queue. */
  readonly completions: OpenAIServing['completions'];
  /** API.md's encoder calls: a decoder-only model refuses them (loadModel returns an encoder model for
   *  BertModel / ModernBertModel checkpoints). */
  readonly embeddings = {
    create: (_req: unknown): Promise<never> => Promise.reject(new OpenAIError(`embeddings.create: the model '${this.id}' (${this.architecture}) serves no embeddings (an encoder-only model does: BertModel, ModernBertModel)`,
      { status: 400, param: 'model', code: 'model_not_supported' })),
  };
  private serving: OpenAIServing;
  /** What the last generate or logits did. */
  lastRun: RunStats = { steps: 0, tokens: 0, generated: 0, wallMs: 0, hostMs: 0 };
  /** The block manager (with the prefix cache) the request engine schedules through. */
  readonly kv: KVCacheManager;
  /** The model's request queue: continuous batching over every caller's requests. */
  readonly engine: RequestEngine;
  private nextSeq = 0;
  /** Whether this model runs on `rt` (a draft model's check: the target's engine). */
  runsOn(rt: Runtime): boolean {
    return this.rt === rt;
  }

  /**
   * Its steps verify proposals (StepRow.sampleAll): the engine may speculate. Not LFM2's: a rejected
   * proposal would stay in the short convolutions' state, which a rollback of the cache's slots does
   * not undo; nor a vision model's (its image rows and M-RoPE positions are not verified with proposals).
   */
  get verifies(): boolean {
    return !this.config.convLCache && !this.config.vision && !this.config.siglip;
  }

  constructor(rt: Runtime, cfg: ModelConfig, arch: Architecture, o: RunnerOptions) {
    super(rt, cfg, arch, o);
    // An architecture with per-sequence state (LFM2's conv layers) gets its slots in the block manager;
    // the prefix cache serves it where the architecture keeps the state at each block's end (kv_manager.ts).
    this.kv = new KVCacheManager({ numBlocks: o.numBlocks, blockSize: o.blockSize, prefixCaching: true, stateSlots: stateSlots(arch, o.maxSeqs),
      stateSnapshots: arch.stateSnapshots === true });
    this.engine = new RequestEngine(this);
    this.serving = new OpenAIServing(this);
    // Late-bound: useText replaces the serving object when a tokenizer comes.
    this.chat = { completions: { create: (req: unknown) => this.serving.chat.completions.create(req) } };
    this.completions = { create: (req: unknown) => this.serving.completions.create(req) };
    if (cfg.vision || cfg.siglip) {
      // A vision model's sequences carry their images' positions and features beside their blocks, set
      // as the engine places a sequence (admission, readmission after a preemption) and dropped with its
      // blocks. (Only vision models have these: a request's choices then do not fork from one prefill.)
      this.admitSequence = (id, input) => {
        if (input) this.visionSeqs.set(id, input as VisionSequence);
        return true;
      };
      this.freeSequence = (id) => { this.visionSeqs.delete(id); };
    }
    if (cfg.siglip) {
      this.imageChunk = (id, from, n, max) => {
        const run = this.visionSeqs.get(id)?.runs.find((r) => r.start < from + n && from + n < r.start + r.count);
        if (!run) return n;
        if (run.start > from) return run.start - from;
        const whole = run.start + run.count - from;
        return whole <= max ? whole : 0;
      };
    }
  }

  /** A vision model's image placeholder token, or null (the OpenAI layer refuses it without an image). */
  get imageTokenId(): number | null { return this.config.vision?.imageTokenId ?? this.config.siglip?.imageTokenId ?? null; }

  private imageProcessor: ImageProcessorConfig | null = null;
  private visionTokens: VisionTokens | undefined;

  /** Gives a vision model its image processor (loadModel does, from preprocessor_config.json). */
  useImageProcessor(p: ImageProcessorConfig): void {
    this.imageProcessor = p;
    this.visionTokens = undefined;
  }

  /**
   * A vision model's image tokens (API.md: imageTokenId, tokensPerImage), which the chat path expands its
   * images by; undefined for a text model or a vision model loaded without its preprocessor config.
   */
  get vision(): VisionTokens | undefined {
    const v = this.config.vision, g = this.config.siglip;
    if (g && this.imageProcessor) {
      // Gemma 3: the template's <start_of_image> becomes "\n\n<start_of_image>", the image tokens, "<end_of_image>\n\n".
      this.visionTokens ??= gemma3VisionTokens({ image_token_index: g.imageTokenId, boi_token_index: g.boiTokenId, eoi_token_index: g.eoiTokenId, mm_tokens_per_image: g.tokensPerImage },
        (id) => this.tokenizer?.idToToken(id));
      return this.visionTokens;
    }
    if (!v || !this.imageProcessor || this.imageProcessor.kind !== 'qwen2vl') return undefined;
    this.visionTokens ??= qwen2VLVisionTokens({ image_token_id: v.imageTokenId }, this.imageProcessor, (id) => this.tokenizer?.idToToken(id));
    return this.visionTokens;
  }

  /** An image as the checkpoint's processor makes it (API.md preprocessImage): decoded, resized, normalized, in patch order. */
  async preprocessImage(image: ImageInput): Promise<{ pixelValues: Float32Array; shape: number[]; grid?: [number, number, number] }> {
    const op = 'Model.preprocessImage';
    this.assertAlive(op);
    if (!this.config.vision && !this.config.siglip) fail(op, 'image', `none: ${this.architecture} reads no images`, 'an image');
    if (!this.imageProcessor) fail(op, 'image', 'a model loaded with its preprocessor_config.json (loadModel o.preprocessorConfig)', 'none given');
    return preprocessImage(image, this.imageProcessor);
  }

  /** The OpenAI layer's: a chat's decoded images placed as the model's sequence input, and their prefix-cache salt. */
  async imageInput(prompt: readonly number[], images: readonly RgbImage[]): Promise<{ encoderInput: unknown; cacheSalt: string }> {
    if (!this.imageProcessor) fail('Model.chat', 'messages', 'a model loaded with its preprocessor_config.json', 'none given');
    const pre = images.map((rgb) => preprocessRgb(rgb, this.imageProcessor!));
    const got = await this.promptImages('chat.completions.create', 'messages', Int32Array.from(prompt), pre);
    return { encoderInput: got!.seq, cacheSalt: got!.salt };
  }

  /**
   * StepRunner's: how many of the next n prompt tokens of sequence `id` (from position `from`) a step may
   * take so that no Gemma 3 image block is cut (its tokens attend to each other: one step computes it):
   * n, or fewer to stop before a block, or more (up to max) to finish one, or 0 when the block does not
   * fit in max. Absent for other models.
   */
  imageChunk?: (id: string, from: number, n: number, max: number) => number;

  /** StepRunner's: a vision model's sequence placed with its images (see the constructor). */
  admitSequence?: (id: string, encoderInput: unknown, freeBlocks: number) => boolean;
  /** StepRunner's: the images of a sequence whose blocks went back. */
  freeSequence?: (id: string) => void;

  /**
   * A vision model's image features: the merged tokens the vision tower makes of one preprocessed image,
   * [tokens × hidden] row-major (what replaces its run of image tokens).
   */
  encodeImage(image: QwenImageInput | { pixelValues: Float32Array }): Promise<Float32Array> {
    const op = 'Model.encodeImage';
    this.assertAlive(op);
    const g = this.config.siglip;
    if (g) return (this.arch as Gemma3VLFamily).tower.encode(checkGemmaPixels(g, op, 'image', image));
    const v = this.config.vision;
    if (!v) fail(op, 'image', `none: ${this.architecture} reads no images`, 'an image');
    return (this.arch as QwenVLFamily).tower.encode(checkQwenImage(v, op, 'image', image));
  }

  /**
   * A prompt's images checked against its image tokens and encoded: null for a text prompt. Refused by
   * name: images for a model that reads none, image tokens with no image, an image with no image
   * tokens, a run whose length is not its image's token count.
   */
  /**
   * A vision model's images of a prompt, each preprocessed where it is not yet (bytes, a URL or path, raw
   * pixels through the checkpoint's processor): null for none, refused by name where the prompt holds
   * the image token without one.
   */
  private async readyImages(op: string, arg: string, tokens: Int32Array, imageTokenId: number, images: unknown, shape: string): Promise<unknown[] | null> {
    if (noImages(images)) {
      const at = tokens.indexOf(imageTokenId);
      if (at >= 0) fail(op, arg, `an image for the image tokens (id ${imageTokenId}) of the prompt`, `none, and the image token at position ${at}`);
      return null;
    }
    check(Array.isArray(images), op, arg, `an array of images (ImageInput, or preprocessed: ${shape})`, images);
    const ready: unknown[] = [];
    for (const [i, x] of (images as unknown[]).entries()) {
      if (isQwenImageInput(x) || (typeof x === 'object' && x !== null && 'pixelValues' in x)) ready.push(x);
      else if (!this.imageProcessor) fail(op, `${arg}[${i}]`, `a preprocessed image ${shape} (or a model loaded with its preprocessor_config.json, which preprocesses images as they come)`, x);
      else ready.push(await this.preprocessImage(x as ImageInput));
    }
    return ready;
  }

  private async promptImages(op: string, arg: string, tokens: Int32Array, images: unknown, encoded = new Map<string, Float32Array>()): Promise<PromptImages | null> {
    if (this.config.siglip) return this.gemmaImages(op, arg, tokens, images, encoded);
    const v = this.config.vision;
    if (!v) {
      if (!noImages(images)) fail(op, arg, `no images: ${this.architecture} reads no images`, images);
      return null;
    }
    const ready = await this.readyImages(op, arg, tokens, v.imageTokenId, images, '{ pixelValues, shape, grid }');
    if (!ready) return null;
    const list = ready.map((x, i) => checkQwenImage(v, op, `${arg}[${i}]`, x));
    const pos = mropePositions(v, op, arg, tokens, list.map((x) => x.grid));
    const parts: Float32Array[] = [];
    // An image the call has encoded already (the same image in several prompts) is encoded once.
    for (const im of list) {
      const key = imageDigest([im]);
      let f = encoded.get(key);
      if (!f) encoded.set(key, f = await (this.arch as QwenVLFamily).tower.encode(im));
      parts.push(f);
    }
    const H = this.config.hiddenSize;
    const features = new Float32Array(parts.reduce((a, p) => a + p.length, 0));
    let at = 0;
    for (const p of parts) { features.set(p, at); at += p.length; }
    if (features.length !== pos.runs.reduce((a, r) => a + r.count, 0) * H) {
      throw new Error(`${op}: ${features.length / H} feature rows for ${pos.runs.reduce((a, r) => a + r.count, 0)} image tokens (internal error)`);
    }
    return { seq: { t: pos.t, h: pos.h, w: pos.w, ropeDelta: pos.ropeDelta, runs: pos.runs, features }, salt: `img:${imageDigest(list)}` };
  }

  /**
   * Gemma 3's images of a prompt: each a run of tokensPerImage image tokens (as Gemma3Processor expands
   * <start_of_image>), the runs matched to the images in order, each image preprocessed (where not yet)
   * and encoded by the SigLIP tower and projector. Refused by name as promptImages says, and a run of
   * another length.
   */
  private async gemmaImages(op: string, arg: string, tokens: Int32Array, images: unknown, encoded: Map<string, Float32Array>): Promise<PromptImages | null> {
    const v = this.config.siglip!;
    const ready = await this.readyImages(op, arg, tokens, v.imageTokenId, images, '{ pixelValues }');
    if (!ready) return null;
    const list = ready.map((x, i) => checkGemmaPixels(v, op, `${arg}[${i}]`, x));
    const runs: ImageRun[] = [];
    for (let i = 0; i < tokens.length;) {
      if (tokens[i] !== v.imageTokenId) { i++; continue; }
      let end = i;
      while (end < tokens.length && tokens[end] === v.imageTokenId) end++;
      if (runs.length >= list.length) fail(op, arg, `as many runs of the image token ${v.imageTokenId} as images (${list.length})`, `a run of ${end - i} image tokens at position ${i} with no image left for it`);
      if (end - i !== v.tokensPerImage) fail(op, arg, `${v.tokensPerImage} image tokens for image ${runs.length} (mm_tokens_per_image)`, `a run of ${end - i} at position ${i}`);
      runs.push({ start: i, count: end - i, featureRow: runs.length * v.tokensPerImage });
      i = end;
    }
    if (runs.length < list.length) fail(op, arg, `a run of the image token ${v.imageTokenId} for each of the ${list.length} images`, `${runs.length} runs`);
    // A block is attended to within one step: it must fit one.
    if (v.tokensPerImage > this.maxTokensPerStep) fail(op, arg, `images of at most maxTokensPerStep=${this.maxTokensPerStep} image tokens (a block is computed in one step)`, `${v.tokensPerImage} tokens an image`);
    const H = this.config.hiddenSize, features = new Float32Array(list.length * v.tokensPerImage * H);
    const digests: string[] = [];
    for (const [k, px] of list.entries()) {
      const key = imageDigest([{ pixelValues: px, shape: [1, px.length], grid: [1, v.imageSize, v.imageSize] }]);
      digests.push(key);
      let f = encoded.get(key);
      if (!f) encoded.set(key, f = await (this.arch as Gemma3VLFamily).tower.encode(px));
      features.set(f, k * v.tokensPerImage * H);
    }
    const empty = new Int32Array(0);
    return { seq: { t: empty, h: empty, w: empty, ropeDelta: 0, runs, features }, salt: `img:${digests.join('')}` };
  }

  /** Gives the model its text side (loadModel does): tokenizer, chat template, generation defaults, name. */
  override useText(t: DecoderText): void {
    super.useText(t);
    this.serving = new OpenAIServing(this, t);
  }

  /**
   * Records and submits one step (ModelRunner.runStep): the block manager places the rows' tokens in the
   * cache first, in its order.
   */
  recordStep(rows: StepRow[], proc: StepProcessing | null, all: Tensor | null = null): StepRecord {
    const step = this.step++;
    const m = this.kv.schedule(rows.map((r) => ({ id: r.id, numTokens: r.ids.length })));
    // Prefix hits of a model with per-sequence state start from their last cached block's snapshot,
    // copied now: before this step's commands, after those of the steps that wrote it.
    const restores = this.kv.takeStateRestores();
    if (restores.length) this.arch.restoreStates!(restores);
    return this.runStep(step, rows, m, rows.map((r) => this.kv.seqLen(r.id) - r.ids.length), proc, all);
  }

  /** Whether copyBlocks can copy this model's cache blocks (every layer's cache a plain paged K/V cache). */
  canCopyBlocks(): boolean {
    const caches = (this.arch as { caches?: unknown }).caches;
    return Array.isArray(caches) && caches.length > 0 && caches.every((c) => c instanceof PagedKVCache);
  }

  /**
   * Copies whole cache blocks, [from, to] pairs, in every layer's K and V (a forked choice's copy of its
   * prompt's partial block): recorded now, so it runs after the steps submitted before and before the
   * next (its uploads submit what is recorded first).
   */
  copyBlocks(pairs: readonly (readonly [number, number])[]): void {
    // The forks' per-sequence states (LFM2's conv states) go with their blocks.
    const states = this.kv.takeStateCopies();
    if (states.length) this.arch.copyStates!(states);
    if (!pairs.length) return;
    const caches = (this.arch as { caches?: unknown }).caches as PagedKVCache[];
    const at = (c: PagedKVCache, b: number) => c.parts.find((p) => b >= p.blockLo && b < p.blockLo + p.blocks)!;
    // Through a scratch buffer: WebGPU copies nothing within one buffer.
    const most = Math.max(...caches.flatMap((c) => c.parts.flatMap((p) => [p.key.byteLength / p.blocks, p.value.byteLength / p.blocks])));
    const tmp = this.rt.scratch(most * pairs.length, 'block copies');
    const enc = this.rt.commandEncoder();
    for (const c of caches) {
      for (const k of ['key', 'value'] as const) {
        pairs.forEach(([from], i) => {
          const a = at(c, from), bytes = a[k].byteLength / a.blocks;
          enc.copyBufferToBuffer(a[k].buffer, (from - a.blockLo) * bytes, tmp, i * bytes, bytes);
        });
        pairs.forEach(([, to], i) => {
          const z = at(c, to), bytes = z[k].byteLength / z.blocks;
          enc.copyBufferToBuffer(tmp, i * bytes, z[k].buffer, (to - z.blockLo) * bytes, bytes);
        });
      }
    }
  }

  /** Runs fn between the engine's steps (the profilers and logits use the step buffers directly). */
  private exclusive<T>(op: string, fn: () => Promise<T>): Promise<T> {
    this.assertAlive(op);
    return this.engine.runExclusive(async () => {
      this.assertAlive(op);
      this.stepsInFlight(op);
      return fn();
    });
  }

  private seqId(): string {
    return `x${this.nextSeq++}`;
  }

  /** Prefill of one fresh sequence: the logits at every position, [tokens.length × vocab] row-major. */
  async logits(tokens: number[] | Int32Array, o: { images?: readonly (QwenImageInput | ImageInput)[] } = {}): Promise<Float32Array> {
    const op = 'Model.logits';
    this.assertAlive(op);
    const t = this.checkTokens(op, 'tokens', tokens);
    check(o !== null && typeof o === 'object' && !Array.isArray(o), op, 'o', '{ images? }', o);
    checkKeys(op, 'o', o, ['images']);
    const V = this.config.vocabSize;
    if (this.blocksFor(t.length) > this.numBlocks) {
      fail(op, 'tokens', `at most ${this.numBlocks * this.blockSize} tokens (the cache's ${this.numBlocks} blocks of ${this.blockSize})`, `${t.length} tokens`);
    }
    const images = await this.promptImages(op, 'o.images', t, o.images);
    return this.exclusive(op, async () => {
      const id = this.seqId();
      this.kv.addSequence(id);
      if (images) this.visionSeqs.set(id, images.seq);
      const result = new Float32Array(t.length * V);
      const t0 = performance.now();
      let host = 0, steps = 0;
      // One logits buffer for every step: a buffer taken and handed back each step would move the
      // attention plans' buffers around in the pool, and their step graphs with them.
      const chunk = this.rt.emptyTensor([Math.min(this.maxTokensPerStep, t.length), V], 'f32');
      try {
        for (let at = 0, n = 0; at < t.length; at += n) {
          // Chunks of maxTokensPerStep, Gemma 3's image blocks kept whole (promptImages checked they fit).
          n = Math.min(this.maxTokensPerStep, t.length - at);
          if (this.imageChunk) n = this.imageChunk(id, at, n, Math.min(this.maxTokensPerStep, t.length - at));
          if (n <= 0) throw new WebinferError(`${op}: an image block at position ${at} does not fit a step of ${this.maxTokensPerStep} tokens (internal error: promptImages checks it)`);
          const h0 = performance.now();
          this.recordStep([{ id, ids: Array.from(t.subarray(at, at + n)), sample: false }], null, n === chunk.shape[0] ? chunk : chunk.view([n, V]));
          host += performance.now() - h0;
          steps++;
          const got = await chunk.toFloat32();
          result.set(n === chunk.shape[0] ? got : got.subarray(0, n * V), at * V);
        }
      } finally {
        chunk.destroy();
        this.kv.freeSequence(id);
        this.visionSeqs.delete(id);
      }
      this.lastRun = { steps, tokens: t.length, generated: 0, wallMs: performance.now() - t0, hostMs: host };
      return result;
    });
  }

  /**
   * New tokens for each prompt: each prompt is a request of the model's engine, served with any other
   * caller's (continuous batching). Greedy unless a temperature is given; a stop token ends its
   * sequence and is its last token. With a seed, prompt i's draws are reproducible whatever else runs;
   * without one, each call draws afresh.
   */
  async generate(prompts: (number[] | Int32Array)[], o: GenerateOptions = {}): Promise<number[][]> {
    const op = 'Model.generate';
    this.assertAlive(op);
    check(Array.isArray(prompts) && prompts.length > 0, op, 'prompts', 'a non-empty array of token arrays', prompts);
    check(o !== null && typeof o === 'object' && !Array.isArray(o), op, 'o', 'an options object', o);
    checkKeys(op, 'o', o, GENERATE_OPTIONS);
    const seqPrompts = prompts.map((p, i) => this.checkTokens(op, `prompts[${i}]`, p));
    const maxNew = o.maxNewTokens === undefined ? 16 : checkPosInt(o.maxNewTokens, op, 'o.maxNewTokens');
    const temperature = o.temperature ?? 0;
    check(typeof temperature === 'number' && Number.isFinite(temperature) && temperature >= 0, op, 'o.temperature', 'a finite number >= 0', temperature);
    if (o.topK !== undefined) check(Number.isInteger(o.topK) && o.topK >= 0, op, 'o.topK', 'an integer >= 0 (0: all)', o.topK);
    if (o.topP !== undefined) check(typeof o.topP === 'number' && o.topP > 0 && o.topP <= 1, op, 'o.topP', 'a number in (0, 1]', o.topP);
    if (o.seed !== undefined) check(Number.isInteger(o.seed) && o.seed >= 0 && o.seed < 2 ** 32, op, 'o.seed', 'an integer in [0, 2^32)', o.seed);
    if (o.stopTokens !== undefined) check(Array.isArray(o.stopTokens) && o.stopTokens.every(Number.isInteger), op, 'o.stopTokens', 'an array of token ids', o.stopTokens);
    const stops = new Set(o.stopTokens ?? this.config.eosTokenIds);
    if (o.onToken !== undefined) check(typeof o.onToken === 'function', op, 'o.onToken', 'a function (prompt, token)', o.onToken);
    if (o.signal !== undefined) check(isAbortSignal(o.signal), op, 'o.signal', 'an AbortSignal', fmt(o.signal));
    if (o.speculative !== undefined) check(typeof o.speculative === 'boolean', op, 'o.speculative', 'a boolean (false: no speculation)', o.speculative);
    if (o.images !== undefined) check(Array.isArray(o.images) && o.images.length === prompts.length, op, 'o.images', `${prompts.length} lists of images (one per prompt; an empty list or undefined for a text prompt)`, o.images);
    for (const [i, p] of seqPrompts.entries()) {
      if (p.length + maxNew > this.capacity) {
        fail(op, `prompts[${i}]`, `a prompt that fits the cache with maxNewTokens=${maxNew} (${this.capacity} tokens)`, `${p.length} tokens`);
      }
    }
    const promptImages: (PromptImages | null)[] = [];
    const encoded = new Map<string, Float32Array>();
    for (const [i, p] of seqPrompts.entries()) promptImages.push(await this.promptImages(op, `o.images[${i}]`, p, o.images?.[i], encoded));
    if (o.signal?.aborted) throw o.signal.reason ?? new DOMException('generate was aborted', 'AbortError');
    this.stepsInFlight(op);
    const sampled = temperature > 0 && o.topK !== 1;
    // No seed: a fresh one per call (SPEC §9); prompt i draws from the seed's stream i.
    const seed = o.seed ?? freshSeed();
    // The call's own abort: the caller's signal, or one prompt's failure, ends every prompt. A signal of
    // its own per prompt, all aborted from here: one signal shared by every request had one listener
    // per prompt, and Node warned (MaxListenersExceededWarning) past 10 prompts.
    const acs = seqPrompts.map(() => new AbortController());
    let aborted = false;
    const abortAll = (why: unknown) => {
      if (aborted) return;
      aborted = true;
      for (const ac of acs) ac.abort(why);
    };
    const onAbort = () => abortAll(o.signal!.reason ?? new DOMException('generate was aborted', 'AbortError'));
    o.signal?.addEventListener('abort', onAbort, { once: true });
    // Promises an async onToken returned: each rejection ends its prompt (the engine's onTokens) and so
    // the call; the call settles only after all of them, so none rejects unobserved after it returned.
    const callbacks: Promise<void>[] = [];
    const onTokens = (i: number) => (_c: number, toks: number[]): void | Promise<void> => {
      let returned: PromiseLike<void>[] | null = null;
      for (const t of toks) {
        let r: unknown;
        try {
          r = o.onToken!(i, t);
        } catch (e) {
          // The engine ends the request with the throw; what earlier tokens' calls returned is dropped, observed.
          for (const q of returned ?? []) q.then(undefined, () => undefined);
          throw e;
        }
        if (r !== null && (typeof r === 'object' || typeof r === 'function') && typeof (r as PromiseLike<void>).then === 'function') (returned ??= []).push(r as PromiseLike<void>);
      }
      if (!returned) return;
      const p = Promise.all(returned).then(() => undefined);
      p.catch(() => undefined);   // observed: the engine ends the request with it, and the call awaits it
      callbacks.push(p);
      return p;
    };
    const c0 = { ...this.engine.counters };
    const t0 = performance.now();
    try {
      const handles = seqPrompts.map((prompt, i) => this.engine.submit({
        prompt, maxTokens: maxNew, stopTokens: stops, signal: acs[i].signal,
        sampling: sampled ? { ...GREEDY, temperature, topK: o.topK ?? 0, topP: o.topP ?? 1, seed: (seed + Math.imul(i, 0x9e3779b9)) >>> 0 } : undefined,
        onTokens: o.onToken ? onTokens(i) : undefined,
        ...(o.speculative === false ? { speculative: false } : {}),
        ...(promptImages[i] ? { encoderInput: promptImages[i]!.seq, cacheSalt: promptImages[i]!.salt } : {}),
      }, op));
      const results = await Promise.all(handles.map((h) => h.result.catch((e: unknown) => { abortAll(e); throw e; })));
      // A request finishes as its last tokens are handed over: their callbacks may still be running.
      await Promise.all(callbacks);
      return results.map((r) => r.tokens[0]);
    } finally {
      o.signal?.removeEventListener('abort', onAbort);
      const c = this.engine.counters;
      this.lastRun = { steps: c.steps - c0.steps, tokens: c.tokens - c0.tokens, generated: c.generated - c0.generated, wallMs: performance.now() - t0, hostMs: c.hostMs - c0.hostMs };
    }
  }

  /**
   * For benchmarks: `steps` decode steps of `batch` sequences, each over a synthetic context of
   * `context` tokens (its blocks taken without a prefill: their contents mean nothing and the work does
   * not depend on them; `interleave`: laid out as requests decoding together lay theirs), recorded and
   * submitted as generate does (three steps in flight, greedy ids fed
   * back on the GPU). Per step: wall and host milliseconds, and (with timestamps) the GPU time of one
   * step, its passes timed whole.
   */
  async profileDecode(o: { batch: number; context: number; steps: number; warmup?: number; perKernel?: boolean; interleave?: boolean; verify?: number }): Promise<{ wallMs: number; hostMs: number; gpuMs: number | null; dispatches: number; replayed: number; kernels?: Record<string, number> }> {
    const op = 'Model.profileDecode';
    const B = checkPosInt(o.batch, op, 'o.batch'), C = checkPosInt(o.context, op, 'o.context'), N = checkPosInt(o.steps, op, 'o.steps');
    const warm = o.warmup ?? 3;
    // verify = k + 1: each sequence's row is a speculative verification, its last token and k proposals,
    // every position sampled (the engine's verification rows).
    const v = o.verify === undefined ? 1 : checkPosInt(o.verify, op, 'o.verify');
    check(B * v <= this.maxSeqsPerStep && B * v <= this.maxTokensPerStep, op, 'o.batch', `batch × verify at most ${Math.min(this.maxSeqsPerStep, this.maxTokensPerStep)} (the step limits)`, B * v);
    const need = B * this.blocksFor(C + (N + warm + 8) * v);
    check(need <= this.numBlocks, op, 'o', `batch × context within the cache's ${this.numBlocks} blocks`, `${need} blocks`);
    return this.exclusive(op, async () => {
    const seqs = Array.from({ length: B }, () => this.seqId());
    try {
      for (const s of seqs) this.kv.addSequence(s);
      // interleave: the contexts grown a block at a time, every sequence in turn, so a sequence's blocks
      // lie `batch` apart as those of requests decoding side by side in the engine do; else each
      // sequence's blocks are consecutive.
      const bs = this.blockSize;
      if (o.interleave) for (let t = 0; t < C; t += bs) this.kv.schedule(seqs.map((s) => ({ id: s, numTokens: Math.min(bs, C - t) })));
      else this.kv.schedule(seqs.map((s) => ({ id: s, numTokens: C })));
      let first = true;
      // One decode step of every sequence, fed its last greedy id (the first step a fixed id); sequence
      // i samples into row i.
      const record = () => {
        const r = this.recordStep(seqs.map((s, i) => (v === 1 ? { id: s, ids: [first ? 1 : -(1 + i)], sample: true }
          : { id: s, ids: [first ? 1 : -(1 + i * v), ...Array.from({ length: v - 1 }, (_, j) => 2 + j)], sample: true, sampleAll: true })), null, null);
        first = false;
        return r.ids;
      };
      const steps = async (n: number) => {
        const inflight: Promise<ArrayBuffer>[] = [];
        let host = 0;
        for (let i = 0; i < n; i++) {
          const h0 = performance.now();
          inflight.push(record());
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
      for (const s of seqs) this.kv.freeSequence(s);
    }
    });
  }

  /**
   * For benchmarks: the prefill of one `tokens`-long prompt (chunks of maxTokensPerStep): wall ms, the
   * GPU ms of its steps, and with perKernel the GPU ms of each kernel (dispatches timed one by one).
   */
  async profilePrefill(o: { tokens: number; perKernel?: boolean }): Promise<{ wallMs: number; gpuMs: number | null; kernels?: Record<string, number> }> {
    const op = 'Model.profilePrefill';
    const n = checkPosInt(o.tokens, op, 'o.tokens');
    check(this.blocksFor(n) <= this.numBlocks, op, 'o.tokens', `at most ${this.numBlocks * this.blockSize}`, n);
    const prompt = Int32Array.from({ length: n }, (_, i) => (i * 7919) % this.config.vocabSize);
    const once = async (timed: boolean, span = true) => {
      const id = this.seqId();
      this.kv.addSequence(id);
      try {
        if (timed) this.rt.beginTiming(4096, { span });
        const t0 = performance.now();
        let ids: Promise<ArrayBuffer> | null = null;
        for (let at = 0; at < n; at += this.maxTokensPerStep) {
          const k = Math.min(this.maxTokensPerStep, n - at);
          ids = this.recordStep([{ id, ids: Array.from(prompt.subarray(at, at + k)), sample: at + k === n }], null, null).ids;
        }
        await ids;
        const wall = performance.now() - t0;
        return timed ? await this.rt.endTiming() : wall;
      } finally {
        this.kv.freeSequence(id);
      }
    };
    return this.exclusive(op, async () => {
      await once(false);
      const walls = [await once(false), await once(false), await once(false)].sort((a, b) => a - b);
      const gpuMs = this.rt.features.timestampQuery ? await once(true) : null;
      let kernels: Record<string, number> | undefined;
      if (o.perKernel && this.rt.features.timestampQuery) {
        await once(true, false);
        kernels = { ...this.rt.lastTiming };
      }
      return { wallMs: walls[1], gpuMs, kernels };
    });
  }

  /** Frees the model's GPU memory; requests still running are rejected, saying so. */
  protected override onDestroy(): void {
    this.engine.destroy('the model was destroyed (Model.destroy) while this request ran');
  }
}
