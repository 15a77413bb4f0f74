// Whisper (WhisperForConditionalGeneration), as transformers computes it: 16 kHz PCM -> log-mel features
// (src/ops/audio.ts, on the GPU) -> encoder: conv1 (k 3, pad 1) -> GELU -> conv2 (k 3, stride 2, pad 1)
// -> GELU -> + sinusoidal positions (the checkpoint's table) -> pre-LN layers of non-causal self-attention
// and a GELU MLP -> final LayerNorm; decoder: token + learned positions -> pre-LN layers of causal
// self-attention over a paged KV cache, cross-attention over the encoder's keys/values and a GELU MLP ->
// final LayerNorm -> proj_out tied to embed_tokens. q is scaled by head_dim^-0.5; k projections have no bias.
//
// This module is the forward pass (WhisperRunner): the layer above (serve/whisper.ts) schedules requests
// on the one RequestEngine (serve/engine.ts) and places their tokens with its block manager; the runner is
// handed each step's rows already placed, and knows nothing of requests.
//
// Attention runs on the paged kernels everywhere (planAttention): they read q from a fused q|k|v row with
// a row stride and write [T, heads, head_dim] token-major, so no transposes are needed (the dense sdpa
// wants [B, heads, L, D]). The encoder's self-attention writes its K/V into a scratch paged cache kept for
// the model's life (one for all layers: each layer writes, then reads, before the next) and runs with
// causal false over seqLens = frames. Each decoder layer has one paged cache whose blocks hold both the
// self-attention's keys/values and the cross-attention's: the block manager above hands out both kinds
// from one pool. A sequence's cross keys/values are computed once, when it is placed (writeCross: the
// encoder output times each decoder layer's k|v weights, up to encBatch inputs per encoder pass), into
// blocks of its own; every decoder step then runs its cross-attention causal false over seqLens =
// encoder frames. A step batches sequences at any point (prefills beside decodes).
//
// GPU memory: weights, the caches and the front end's tables are made at load; the encoder's and the
// decoder step's activations are kept by the model, grown to the largest batch seen (never per call);
// the rest a call takes (features, metadata, plans) comes from the engine's buffer pool and goes back to
// it, so a second call of the same shapes creates no buffer (engine.counters.createBuffer; tests/cases/
// whisper). Decoder steps run as the decoder-only models' do: inputs written before the recording,
// a DispatchCache, and the layers replayed from captured commands when a step repeats (see runStep()).
//
// Sampled ids stay on the GPU: a decoding sequence's next input can be the previous step's sampled id,
// read there by the step kernel (shaders/models/step.wgsl, as ModelRunner's steps do), so several steps
// are recorded and submitted before the oldest one's ids reach the host.
import { WebinferError, check, checkKeys, checkPosInt, fail, fmt } from '../core/errors.js';
import { DispatchCache, type Runtime, type StepGraph } from '../core/runtime.js';
import type { Tensor } from '../core/tensor.js';
import { createPagedKVCache, encodeCacheWrite, type PagedKVCache } from '../attention/paged_cache.js';
import { planAttention, type AttentionPlan } from '../attention/paged.js';
import { createLinear, linear, linearWeightBytes, type LinearWeight } from '../ops/gemm.js';
import { layerNorm } from '../ops/norm.js';
import { add } from '../ops/elementwise.js';
import { embedding } from '../ops/embedding.js';
import { channelsFirst, conv1d, geluRows, timeFirst } from '../ops/conv.js';
import { MelFrontEnd, parseMelConfig, type MelConfig } from '../ops/audio.js';
import { TextTokenizer } from '../text/text.js';
import type { SafetensorsFile } from '../formats/safetensors.js';
import { WEIGHT_DTYPES, type ResolvedTensor } from './schema.js';
import { StepSampling, type StepPlacement, type StepProcessing, type StepRecord, type StepRow } from './step.js';
import { checkpointDType, WeightReader, type WeightDType } from './weights.js';

const OP = 'loadWhisperModel';
const ARCH = 'WhisperForConditionalGeneration';
const EPS = 1e-5;

export interface WhisperConfig {
  d: number; vocab: number; nMels: number;
  encLayers: number; encHeads: number; encFfn: number;
  decLayers: number; decHeads: number; decFfn: number;
  /** Encoder positions (frames / 2) and decoder positions. */
  maxSource: number; maxTarget: number;
  decoderStart: number; eos: number[];
}

function parseWhisperConfig(config: unknown): WhisperConfig {
  check(config !== null && typeof config === 'object', OP, 'o.config', 'a parsed config.json object', config);
  const c = config as Record<string, unknown>;
  const archs = c.architectures;
  check(Array.isArray(archs) && archs[0] === ARCH, OP, 'config.architectures', `['${ARCH}']`, fmt(archs));
  const n = (k: string) => checkPosInt(c[k], OP, `config.${k}`);
  const d = n('d_model');
  const cfg: WhisperConfig = {
    d, vocab: n('vocab_size'), nMels: n('num_mel_bins'),
    encLayers: n('encoder_layers'), encHeads: n('encoder_attention_heads'), encFfn: n('encoder_ffn_dim'),
    decLayers: n('decoder_layers'), decHeads: n('decoder_attention_heads'), decFfn: n('decoder_ffn_dim'),
    maxSource: n('max_source_positions'), maxTarget: n('max_target_positions'),
    decoderStart: Number.isInteger(c.decoder_start_token_id) ? c.decoder_start_token_id as number : 50258,
    eos: [c.eos_token_id].flat().filter((x): x is number => Number.isInteger(x)),
  };
  for (const [k, h] of [['encoder_attention_heads', cfg.encHeads], ['decoder_attention_heads', cfg.decHeads]] as const) {
    check(d % h === 0 && (d / h) % 8 === 0 && d / h <= 256, OP, `config.${k}`, `heads of d_model=${d} whose head_dim is a multiple of 8 up to 256 (the paged kernels')`, h);
  }
  if (c.activation_function !== undefined) check(c.activation_function === 'gelu', OP, 'config.activation_function', "'gelu'", fmt(c.activation_function));
  if (c.scale_embedding !== undefined) check(c.scale_embedding === false, OP, 'config.scale_embedding', 'false', fmt(c.scale_embedding));
  return cfg;
}

/** Every tensor of a Whisper checkpoint and its shape (proj_out.weight: optional, tied). */
function whisperSchema(c: WhisperConfig): { required: [string, number[]][]; optional: [string, number[]][] } {
  const { d } = c;
  const req: [string, number[]][] = [];
  const attn = (p: string) => {
    for (const x of ['q', 'k', 'v', 'out']) req.push([`${p}.${x}_proj.weight`, [d, d]]);
    for (const x of ['q', 'v', 'out']) req.push([`${p}.${x}_proj.bias`, [d]]);
  };
  const ln = (p: string) => { req.push([`${p}.weight`, [d]], [`${p}.bias`, [d]]); };
  const mlp = (p: string, f: number) => { req.push([`${p}.fc1.weight`, [f, d]], [`${p}.fc1.bias`, [f]], [`${p}.fc2.weight`, [d, f]], [`${p}.fc2.bias`, [d]]); };
  req.push(['model.encoder.conv1.weight', [d, c.nMels, 3]], ['model.encoder.conv1.bias', [d]],
    ['model.encoder.conv2.weight', [d, d, 3]], ['model.encoder.conv2.bias', [d]], ['model.encoder.embed_positions.weight', [c.maxSource, d]]);
  for (let i = 0; i < c.encLayers; i++) {
    const p = `model.encoder.layers.${i}`;
    attn(`${p}.self_attn`); ln(`${p}.self_attn_layer_norm`); mlp(p, c.encFfn); ln(`${p}.final_layer_norm`);
  }
  ln('model.encoder.layer_norm');
  req.push(['model.decoder.embed_tokens.weight', [c.vocab, d]], ['model.decoder.embed_positions.weight', [c.maxTarget, d]]);
  for (let i = 0; i < c.decLayers; i++) {
    const p = `model.decoder.layers.${i}`;
    attn(`${p}.self_attn`); ln(`${p}.self_attn_layer_norm`);
    attn(`${p}.encoder_attn`); ln(`${p}.encoder_attn_layer_norm`);
    mlp(p, c.decFfn); ln(`${p}.final_layer_norm`);
  }
  ln('model.decoder.layer_norm');
  return { required: req, optional: [['proj_out.weight', [c.vocab, d]]] };
}

/** The checkpoint checked against the schema (every problem named at once), each tensor resolved to its file. */
function resolveWhisper(c: WhisperConfig, files: readonly SafetensorsFile[]): Map<string, ResolvedTensor> {
  const found = new Map<string, ResolvedTensor>();
  const problems: string[] = [];
  files.forEach((f, file) => {
    for (const [name, info] of f.tensors) {
      if (found.has(name)) problems.push(`duplicate ${name}`);
      else found.set(name, { file, dtype: info.dtype, shape: info.shape.slice() });
    }
  });
  const { required, optional } = whisperSchema(c);
  const resolved = new Map<string, ResolvedTensor>();
  const accept = ([name, shape]: [string, number[]], must: boolean) => {
    const t = found.get(name);
    if (!t) {
      if (must) problems.push(`missing ${name} [${shape.join(', ')}]`);
      return;
    }
    if (t.shape.length !== shape.length || t.shape.some((s, k) => s !== shape[k])) problems.push(`wrong shape ${name}: expected [${shape.join(', ')}], got [${t.shape.join(', ')}]`);
    else if (!WEIGHT_DTYPES.includes(t.dtype)) problems.push(`wrong dtype ${name}: expected one of ${WEIGHT_DTYPES.join(', ')}, got ${t.dtype}`);
    resolved.set(name, t);
  };
  for (const e of required) accept(e, true);
  for (const e of optional) accept(e, false);
  for (const [name, t] of found) if (!resolved.has(name)) problems.push(`unexpected ${name} [${t.shape.join(', ')}]`);
  if (problems.length) {
    fail(OP, `weights of ${ARCH}`, `the Whisper checkpoint schema of its config (${required.length} tensors)`,
      `${problems.length} problem${problems.length > 1 ? 's' : ''}:${problems.slice(0, 20).map((p) => `\n  ${p}`).join('')}${problems.length > 20 ? `\n  ... and ${problems.length - 20} more` : ''}`);
  }
  return resolved;
}

interface Norm { w: Tensor; b: Tensor }
interface EncLayer { ln1: Norm; qkv: LinearWeight; o: LinearWeight; ln2: Norm; fc1: LinearWeight; fc2: LinearWeight }
interface DecLayer {
  ln1: Norm; qkv: LinearWeight; o: LinearWeight;
  ln2: Norm; cq: LinearWeight; co: LinearWeight; ckv: LinearWeight;
  ln3: Norm; fc1: LinearWeight; fc2: LinearWeight;
}

/** The encoder's activations for `items` inputs. */
interface EncActs { items: number; h: Tensor; x: Tensor; qkv: Tensor; attn: Tensor; f: Tensor; g: Tensor; out: Tensor }

/** A decoder step's buffers (models keep them: a step graph binds them). */
interface StepActs {
  rows: number; seqs: number;
  h: Tensor; x: Tensor; qkv: Tensor; attn: Tensor; q: Tensor; f: Tensor; g: Tensor;
  /** Ids as the host wrote them (negative: a row of the previous step's sampled ids) and as resolved. */
  idsIn: Tensor; ids: Tensor; pos: Tensor; slots: Tensor; last: Tensor; logits: Tensor;
}


export interface TranscribeOptions {
  /** A language code ('en') or token ('<|en|>'); default: none (the model picks). */
  language?: string;
  task?: 'transcribe' | 'translate';
  /** Predict timestamp tokens and return segments (default false: <|notimestamps|>). */
  timestamps?: boolean;
  signal?: AbortSignal;
}

export interface TranscriptSegment { start: number; end: number; text: string; tokens: number[] }

/** What loadWhisperModel reads of loadModel's options (LoadModelOptions, models/model.ts, which imports
 *  this module), and the feature extractor's settings. */
export interface WhisperLoadOptions {
  config?: object;
  weights: SafetensorsFile | readonly SafetensorsFile[] | object;
  dtype?: string;
  kvCache?: { numBlocks?: number; blockSize?: number; dtype?: string };
  onProgress?: (loadedBytes: number, totalBytes: number) => void;
  tokenizer?: object;
  tokenizerConfig?: object;
  generationConfig?: object;
  maxSeqsPerStep?: number;
  allowNonFinite?: boolean;
  /** preprocessor_config.json (parsed): the feature extractor's settings (default: Whisper's, with
   *  windows of the encoder's frames). */
  preprocessorConfig?: object;
  /** The model's id in the OpenAI-shaped API. */
  name?: string;
}

/** The sizes a runner is built with (checked by the loader). */
export interface WhisperRunnerOptions {
  blockSize: number;
  /** Sequences one step serves at most. */
  maxSeqs: number;
  /** Blocks of each decoder layer's cache: self-attention and cross-attention blocks from one pool. */
  numBlocks: number;
  genConfig: Record<string, unknown>;
}

/** Builds the runner (or the layer above's class over it) before its weights load. */
export type MakeWhisper<M extends WhisperRunner> = (rt: Runtime, cfg: WhisperConfig, mel: MelConfig, o: WhisperRunnerOptions) => M;

/** The encoder and the decoder's forward pass over paged caches: what serve/whisper.ts schedules. */
export class WhisperRunner {
  readonly architecture = ARCH;
  /** The model's name in the OpenAI-shaped API (loadModel's `name`, else the config's name_or_path, else the architecture). */
  id: string = ARCH;
  readonly cfg: WhisperConfig;
  readonly melConfig: MelConfig;
  tokenizer?: TextTokenizer;
  /** Encoder frames after the stride-2 convolution (= max_source_positions). */
  readonly encoderFrames: number;
  /** Rows of one request's features: [mels × 2·encoderFrames]. */
  readonly featureSize: number;
  readonly blockSize: number;
  readonly maxSeqsPerStep: number;
  /** Blocks of the decoder caches (self-attention and cross-attention together). */
  readonly numBlocks: number;
  /** Blocks one sequence's cross-attention keys/values take (the encoder's frames). */
  readonly crossBlocks: number;
  readonly cacheDType = 'f32';
  private readonly encBatch: number;
  private conv1!: LinearWeight;
  private conv2!: LinearWeight;
  private encPos!: Tensor;
  private encLayers: EncLayer[] = [];
  private encLn!: Norm;
  private embed!: LinearWeight;
  private decPos!: Tensor;
  private decLayers: DecLayer[] = [];
  private decLn!: Norm;
  private fe!: MelFrontEnd;
  private encCache!: PagedKVCache;
  private caches: PagedKVCache[] = [];
  protected readonly genConfig: Record<string, unknown>;
  private destroyed = false;
  /** The sampled ids of the last two decoder steps: step k writes sampled[k % 2] and reads the previous
   *  step's ids from the other (each step's ids are copied for the host as the step is recorded, so the
   *  GPU is done with a slot before the step after next writes it, however many steps are in flight). */
  private sampled: Tensor[] = [];
  /** The next sampling step's number (steps of every row's logits never read the ring). */
  private step = 0;
  /** Read-backs of steps in flight (dropped at once by destroy). */
  private readonly reads = new Set<GPUBuffer>();
  /** generation_config's suppress_tokens and begin_suppress_tokens (ids inside the vocabulary). */
  readonly suppressTokens: readonly number[];
  readonly beginSuppressTokens: readonly number[];
  /** Per-row sampling settings, logit edits, masks and logprob copies of a step's sampled rows. */
  private readonly sampling: StepSampling;

  constructor(protected readonly rt: Runtime, cfg: WhisperConfig, mel: MelConfig, o: WhisperRunnerOptions) {
    this.sampling = new StepSampling(rt);
    this.cfg = cfg;
    this.melConfig = mel;
    this.encoderFrames = cfg.maxSource;
    this.featureSize = cfg.nMels * 2 * cfg.maxSource;
    this.blockSize = o.blockSize;
    this.maxSeqsPerStep = o.maxSeqs;
    this.numBlocks = o.numBlocks;
    this.crossBlocks = Math.ceil(cfg.maxSource / o.blockSize);
    // Encoder inputs batched up to 8 at a time, fewer where the largest activation of a batch (the conv
    // stems' im2col rows, q|k|v, the MLP's hidden rows) would not fit one storage binding.
    const Te = cfg.maxSource;
    const perItem = 4 * Math.max(2 * Te * 3 * cfg.nMels, Te * 3 * cfg.d, Te * cfg.encFfn);
    const bind = Math.min(rt.limits.maxStorageBufferBindingSize, rt.limits.maxBufferSize);
    this.encBatch = Math.max(1, Math.min(o.maxSeqs, 8, Math.floor(bind / perItem)));
    this.genConfig = o.genConfig;
    const ids = (x: unknown) => (Array.isArray(x) ? x.filter((t): t is number => Number.isInteger(t) && t >= 0 && t < cfg.vocab) : []);
    this.suppressTokens = ids(o.genConfig.suppress_tokens);
    this.beginSuppressTokens = ids(o.genConfig.begin_suppress_tokens);
  }

  get vocabSize(): number { return this.cfg.vocab; }
  /** The next sampling step's number. */
  get stepNo(): number { return this.step; }

  /** GPU bytes of every weight as stored. */
  get weightBytes(): number {
    let n = linearWeightBytes(this.conv1) + linearWeightBytes(this.conv2) + linearWeightBytes(this.embed) + this.encPos.byteLength + this.decPos.byteLength;
    const norm = (x: Norm) => x.w.byteLength + x.b.byteLength;
    const lin = (w: LinearWeight) => linearWeightBytes(w) + (w.bias?.byteLength ?? 0);
    for (const L of this.encLayers) n += norm(L.ln1) + norm(L.ln2) + lin(L.qkv) + lin(L.o) + lin(L.fc1) + lin(L.fc2);
    for (const L of this.decLayers) n += norm(L.ln1) + norm(L.ln2) + norm(L.ln3) + lin(L.qkv) + lin(L.o) + lin(L.cq) + lin(L.co) + lin(L.ckv) + lin(L.fc1) + lin(L.fc2);
    return n + norm(this.encLn) + norm(this.decLn) + (this.conv1.bias?.byteLength ?? 0) + (this.conv2.bias?.byteLength ?? 0);
  }

  // ------------------------------------------------------------------------------------------ loading

  async load(r: WeightReader, dtype: WeightDType, made: { destroy(): void }[]): Promise<void> {
    const rt = this.rt, c = this.cfg, d = c.d;
    const keep = <T extends { destroy(): void }>(x: T): T => { made.push(x); return x; };
    // Rows of several tensors stacked (q | k | v), each with its bias or zeros (k has none).
    const lin = async (names: string[], biases: (string | null)[]): Promise<LinearWeight> => {
      const parts: (Float32Array | Uint16Array)[] = [];
      const rows: number[] = [];
      for (const n of names) {
        parts.push(await r.read(n, dtype));
        rows.push(r.shape(n)[0]);
      }
      const N = rows.reduce((a, b) => a + b, 0);
      const K = parts[0].length / rows[0];
      const data = dtype === 'f32' ? new Float32Array(N * K) : new Uint16Array(N * K);
      let at = 0;
      for (const p of parts) { data.set(p as never, at); at += p.length; }
      let bias: Float32Array | undefined;
      if (biases.some((b) => b !== null)) {
        bias = new Float32Array(N);
        let row = 0;
        for (const [i, b] of biases.entries()) {
          if (b) bias.set((await r.read(b, 'f32')) as Float32Array, row);
          row += rows[i];
        }
      }
      return keep(createLinear(rt, { data, N, K, dtype, bias }));
    };
    const vec = async (name: string) => keep(await r.vector(rt, name));
    const norm = async (p: string): Promise<Norm> => ({ w: await vec(`${p}.weight`), b: await vec(`${p}.bias`) });
    const table = async (name: string, rows: number) => keep(rt.tensor((await r.read(name, 'f32')) as Float32Array, [rows, d], 'f32'));
    const attn = async (p: string) => ({
      qkv: await lin([`${p}.q_proj.weight`, `${p}.k_proj.weight`, `${p}.v_proj.weight`], [`${p}.q_proj.bias`, null, `${p}.v_proj.bias`]),
      o: await lin([`${p}.out_proj.weight`], [`${p}.out_proj.bias`]),
    });
    this.conv1 = await lin(['model.encoder.conv1.weight'], ['model.encoder.conv1.bias']);
    this.conv2 = await lin(['model.encoder.conv2.weight'], ['model.encoder.conv2.bias']);
    this.encPos = await table('model.encoder.embed_positions.weight', c.maxSource);
    for (let i = 0; i < c.encLayers; i++) {
      const p = `model.encoder.layers.${i}`;
      const a = await attn(`${p}.self_attn`);
      this.encLayers.push({
        ln1: await norm(`${p}.self_attn_layer_norm`), ...a, ln2: await norm(`${p}.final_layer_norm`),
        fc1: await lin([`${p}.fc1.weight`], [`${p}.fc1.bias`]), fc2: await lin([`${p}.fc2.weight`], [`${p}.fc2.bias`]),
      });
    }
    this.encLn = await norm('model.encoder.layer_norm');
    // proj_out is tied to embed_tokens (the checkpoint's copy, when it has one, holds the same values).
    this.embed = await lin(['model.decoder.embed_tokens.weight'], [null]);
    this.decPos = await table('model.decoder.embed_positions.weight', c.maxTarget);
    for (let i = 0; i < c.decLayers; i++) {
      const p = `model.decoder.layers.${i}`;
      const a = await attn(`${p}.self_attn`);
      const x = `${p}.encoder_attn`;
      this.decLayers.push({
        ln1: await norm(`${p}.self_attn_layer_norm`), ...a,
        ln2: await norm(`${p}.encoder_attn_layer_norm`),
        cq: await lin([`${x}.q_proj.weight`], [`${x}.q_proj.bias`]),
        ckv: await lin([`${x}.k_proj.weight`, `${x}.v_proj.weight`], [null, `${x}.v_proj.bias`]),
        co: await lin([`${x}.out_proj.weight`], [`${x}.out_proj.bias`]),
        ln3: await norm(`${p}.final_layer_norm`),
        fc1: await lin([`${p}.fc1.weight`], [`${p}.fc1.bias`]), fc2: await lin([`${p}.fc2.weight`], [`${p}.fc2.bias`]),
      });
    }
    this.decLn = await norm('model.decoder.layer_norm');
    void d;
  }

  /** The front end's tables and the caches (sizes fixed for the model's life). */
  /** The front end's tables and the caches (sizes fixed for the model's life). */
  allocate(made: { destroy(): void }[]): void {
    const rt = this.rt, c = this.cfg, bs = this.blockSize;
    this.fe = new MelFrontEnd(rt, this.melConfig);
    made.push(this.fe);
    const hdE = c.d / c.encHeads, hdD = c.d / c.decHeads;
    this.encCache = createPagedKVCache(rt, { numBlocks: this.encBatch * this.crossBlocks, blockSize: bs, numKvHeads: c.encHeads, headSize: hdE });
    made.push(this.encCache);
    for (let l = 0; l < c.decLayers; l++) {
      this.caches.push(createPagedKVCache(rt, { numBlocks: this.numBlocks, blockSize: bs, numKvHeads: c.decHeads, headSize: hdD }));
      made.push(this.caches[l]);
    }
    for (let i = 0; i < 2; i++) {
      this.sampled.push(rt.zeros([this.maxSeqsPerStep], 'i32'));
      made.push(this.sampled[i]);
    }
  }

  assertAlive(op: string): void {
    if (this.destroyed) throw new WebinferError(`${op}: the model was destroyed`);
    this.rt.assertAlive(op);
  }

  /** tuning.stepsInFlight, checked (any number: the sampled-id ring of two is enough, see `sampled`). */
  stepsInFlight(op: string): number {
    const k = this.rt.tuning.stepsInFlight;
    check(Number.isInteger(k) && k >= 1, op, 'engine.tuning.stepsInFlight', 'an integer >= 1', k);
    return k;
  }

  // ------------------------------------------------------------------------------------------ front end

  /** Log-mel features of 16 kHz mono PCM: [mels × frames] per window of chunk samples, windows one after the other. */
  async logMel(pcm: Float32Array): Promise<Float32Array> {
    const op = 'WhisperModel.logMel';
    this.assertAlive(op);
    check(pcm instanceof Float32Array, op, 'pcm', 'a Float32Array of 16 kHz mono samples', pcm);
    const t = this.rt.tensor(this.fe.windows(pcm), [Math.max(1, Math.ceil(pcm.length / this.melConfig.chunkSamples)) * this.melConfig.chunkSamples], 'f32');
    const out = this.fe.run(t);
    t.destroy();
    try {
      return Float32Array.from(await out.toFloat32());
    } finally {
      out.destroy();
    }
  }

  // ------------------------------------------------------------------------------------------ encoder

  protected checkFeatures(op: string, arg: string, x: unknown): Float32Array {
    check(x instanceof Float32Array || Array.isArray(x), op, arg, `a Float32Array of log-mel features [${this.cfg.nMels} × ${2 * this.encoderFrames}]`, x);
    const f = x instanceof Float32Array ? x : Float32Array.from(x as number[]);
    check(f.length === this.featureSize, op, arg, `${this.featureSize} values (${this.cfg.nMels} mels × ${2 * this.encoderFrames} frames)`, `${f.length} values`);
    return f;
  }

  /**
   * The encoder over B feature sets (f32 [B, mels, frames]) -> its last hidden states [B·encoderFrames, d]
   * (a pooled tensor the caller destroys).
   */
  private encode(features: Tensor, B: number): Tensor {
    const rt = this.rt, c = this.cfg, d = c.d, Te = this.encoderFrames, bs = this.blockSize;
    const H = c.encHeads, hd = d / H, T = B * Te;
    const e = this.encActs(B);
    const h = e.h.view([T, d]), x = e.x.view([T, d]), qkv = e.qkv.view([T, 3 * d]), attn = e.attn.view([T, d]);
    const f = e.f.view([T, c.encFfn]), g = e.g.view([T, c.encFfn]), out = e.out.view([T, d]);
    // The stem's outputs in buffers free until the layers: conv1's [2T, d] in the MLP's f (ffn >= 2d, as
    // every Whisper has; else a scratch tensor), conv2's [T, d] in attn.
    const y1 = c.encFfn >= 2 * d ? e.f.view([2 * T, d]) : rt.scratchTensor([2 * T, d], 'f32');
    conv1d(rt, channelsFirst(features, B, c.nMels, 2 * Te), this.conv1, { kernel: 3, pad: 1, out: y1 });
    conv1d(rt, timeFirst(y1, B, d, 2 * Te), this.conv2, { kernel: 3, pad: 1, stride: 2, gelu: true, out: attn });
    if (y1.buffer !== e.f.buffer) y1.destroy();
    geluRows(rt, timeFirst(attn, B, d, Te), { out: h, addend: this.encPos });
    // Item b's tokens in blocks b·nb .. (b+1)·nb − 1 of the scratch cache.
    const nb = Math.ceil(Te / bs);
    const qsl = new Int32Array(B + 1), seqLens = new Int32Array(B).fill(Te), bt = new Int32Array(B * nb), slots = new Int32Array(T);
    for (let b = 0; b < B; b++) {
      qsl[b + 1] = (b + 1) * Te;
      for (let i = 0; i < nb; i++) bt[b * nb + i] = b * nb + i;
      for (let t = 0; t < Te; t++) slots[b * Te + t] = b * nb * bs + t;
    }
    const slotT = rt.tensor(slots, [T], 'i32');
    const plan = planAttention(rt, { queryStartLoc: qsl, seqLens, blockTable: bt, maxBlocksPerSeq: nb },
      { cache: this.encCache, numHeads: H, scale: hd ** -0.5, causal: false });
    for (const L of this.encLayers) {
      layerNorm(rt, h, L.ln1.w, L.ln1.b, EPS, { out: x });
      linear(rt, x, L.qkv, { out: qkv });
      encodeCacheWrite(rt, T, { tensor: qkv, offset: d, stride: 3 * d }, { tensor: qkv, offset: 2 * d, stride: 3 * d }, this.encCache, slotT);
      plan.run(qkv, this.encCache, { out: attn.view([T, H, hd]), qRowStride: 3 * d });
      linear(rt, attn, L.o, { out: h, accumulate: true });
      this.mlp(h, x, f, g, L.ln2, L, T);
    }
    layerNorm(rt, h, this.encLn.w, this.encLn.b, EPS, { out });
    plan.destroy();
    slotT.destroy();
    return out;
  }

  /**
   * The encoder's activations for B inputs, kept (grown to the largest batch, at most encBatch): made
   * afresh for every batch, hundreds of MB of them (Whisper-small at 8 inputs: 550 MB) would go back to
   * the pool at once, past what it keeps free, and the pool would destroy them all for the next batch to
   * make again.
   */
  private encActs(B: number): EncActs {
    if (this.enc && this.enc.items >= B) return this.enc;
    this.dropEnc();
    const rt = this.rt, c = this.cfg, T = B * this.encoderFrames, d = c.d;
    this.enc = {
      items: B, h: rt.zeros([T, d]), x: rt.zeros([T, d]), qkv: rt.zeros([T, 3 * d]), attn: rt.zeros([T, d]),
      f: rt.zeros([T, c.encFfn]), g: rt.zeros([T, c.encFfn]), out: rt.zeros([T, d]),
    };
    return this.enc;
  }

  private enc: EncActs | null = null;

  private dropEnc(): void {
    if (!this.enc) return;
    for (const [k, t] of Object.entries(this.enc)) if (k !== 'items') (t as Tensor).destroy();
    this.enc = null;
  }

  /** h += fc2(gelu(fc1(LN(h)))). */
  private mlp(h: Tensor, x: Tensor, f: Tensor, g: Tensor, n: Norm, L: { fc1: LinearWeight; fc2: LinearWeight }, T: number): void {
    const rt = this.rt;
    layerNorm(rt, h, n.w, n.b, EPS, { out: x, rows: T });
    linear(rt, x, L.fc1, { out: f, rows: T });
    geluRows(rt, timeFirst(f, 1, L.fc1.N, T), { out: g });
    linear(rt, g, L.fc2, { out: h, accumulate: true, rows: T });
  }

  /** The encoder's last hidden state [encoderFrames × d] for one set of features. */
  async encoderStates(encoderInput: Float32Array | number[]): Promise<Float32Array> {
    const op = 'WhisperModel.encoderStates';
    this.assertAlive(op);
    const f = this.checkFeatures(op, 'encoderInput', encoderInput);
    const t = this.rt.tensor(f, [1, this.cfg.nMels, 2 * this.encoderFrames], 'f32');
    const out = this.encode(t, 1);
    t.destroy();
    return Float32Array.from(await out.toFloat32());
  }

  /**
   * Runs the encoder over sequences just placed and writes each one's cross keys/values into the cache
   * slots given (its blocks, taken by the caller), up to encBatch inputs per encoder pass.
   */
  protected writeCross(items: readonly { features: Float32Array; slots: Int32Array }[]): void {
    const rt = this.rt, c = this.cfg, d = c.d, Te = this.encoderFrames;
    for (let i0 = 0; i0 < items.length; i0 += this.encBatch) {
      const group = items.slice(i0, i0 + this.encBatch);
      const B = group.length;
      const feats = new Float32Array(B * this.featureSize);
      group.forEach((r, b) => feats.set(r.features, b * this.featureSize));
      const ft = rt.tensor(feats, [B, c.nMels, 2 * Te], 'f32');
      const enc = this.encode(ft, B);
      ft.destroy();
      const slots = new Int32Array(B * Te);
      group.forEach((r, b) => slots.set(r.slots.subarray(0, Te), b * Te));
      const slotT = rt.tensor(slots, [B * Te], 'i32');
      // Each layer's cross k|v rows in the encoder's q|k|v buffer, free after the encoder.
      const kv = this.enc!.qkv.view([B * Te, 2 * d]);
      this.decLayers.forEach((L, l) => {
        linear(rt, enc, L.ckv, { out: kv });
        encodeCacheWrite(rt, B * Te, { tensor: kv, offset: 0, stride: 2 * d }, { tensor: kv, offset: d, stride: 2 * d }, this.caches[l], slotT);
      });
      slotT.destroy();
    }
  }
  // ------------------------------------------------------------------------------------------ decoder


  /**
   * Records and submits one decoder step: the rows' tokens placed in the self-attention cache as `m` says
   * (row i's at positions starts[i]...; a negative id -(1 + r) is row r of the previous step's sampled ids,
   * still on the GPU), each sequence's cross-attention over its own blocks (`cross`: crossBlocks block ids
   * per sequence, in m's placement order), then either the logits of every row (`all`: returned as a
   * tensor the caller destroys; the sampled-id ring is not touched) or the sampled ids of the rows that
   * sample (sampled[step % 2], read back). Sampling is greedy unless `proc` gives each sampled row its
   * settings, logit edits and masks; its logprob rows' raw logits come back too.
   *
   * As the decoder-only models' steps (models/model.ts): the step's inputs go into buffers the model
   * keeps (grown to the largest step seen, never per call) in small writes before the recording; the
   * recording runs through the model's DispatchCache (uniforms rewritten only when they change, cached
   * bind groups); and the layers of a step whose recording would equal an earlier one's (its tokens, its
   * attention plans' kernels, bind groups and grids: the pool hands the plans the same buffers step after
   * step) are replayed from the captured commands (StepGraph) instead of recorded.
   */
  protected runStep(rows: readonly StepRow[], m: StepPlacement, starts: readonly number[], cross: Int32Array, proc: StepProcessing | null, all: boolean): StepRecord & { all?: Tensor } {
    const rt = this.rt, c = this.cfg, d = c.d, H = c.decHeads, hd = d / H, V = c.vocab;
    const T = m.numTokens, S = m.seqLens.length;
    const ids = new Int32Array(T), pos = new Int32Array(T), last = new Int32Array(this.maxSeqsPerStep);
    const sampledRow = new Array<number>(rows.length).fill(-1);
    let R = 0, fromGpu = 0;
    rows.forEach((r, i) => {
      const [a] = m.rows[i];
      for (let j = 0; j < r.ids.length; j++) { ids[a + j] = r.ids[j]; pos[a + j] = starts[i] + j; }
      if (r.ids[0] < 0) fromGpu++;
      if (r.sample && !all) {
        last[R] = a + r.ids.length - 1;
        sampledRow[i] = R++;
      }
    });
    const a = this.stepActs(T, S);
    this.sampling.grow(proc, V);
    // The last step's plans go back to the pool before the submit below, which makes their buffers
    // free again: this step's plans then take the same buffers (and bind groups), and the step's
    // layers replay from an earlier step's graph (released after it, they went to a fresh set of
    // buffers each step, and no key ever repeated).
    this.selfPlan?.destroy();
    this.crossPlan?.destroy();
    this.selfPlan = this.crossPlan = null;
    // The uploads run on the queue ahead of what the encoder still holds: submit that first.
    rt.flush();
    // Each plan is prepared (its runs' buffers taken: what signature() does) before the next is made,
    // so that a plan's buffers are taken in one run and given back in reverse: the next step's plans
    // then find exactly these buffers on the pool's free lists (made and prepared interleaved, they
    // came back in another order, and the plans' bind groups never repeated).
    const stepGraphs = rt.tuning.stepGraphs;
    this.selfPlan = planAttention(rt, { queryStartLoc: m.queryStartLoc, seqLens: m.seqLens, blockTable: m.blockTable, maxBlocksPerSeq: m.maxBlocksPerSeq },
      { cache: this.caches[0], numHeads: H, scale: hd ** -0.5, causal: true });
    const selfSig = stepGraphs ? this.selfPlan.plan.signature(T, 'f32', 'f32', 3 * d, false) : '';
    this.crossPlan = planAttention(rt, { queryStartLoc: m.queryStartLoc, seqLens: new Int32Array(S).fill(this.encoderFrames), blockTable: cross, maxBlocksPerSeq: this.crossBlocks },
      { cache: this.caches[0], numHeads: H, scale: hd ** -0.5, causal: false });
    const crossSig = stepGraphs ? this.crossPlan.plan.signature(T, 'f32', 'f32', d, false) : '';
    const queue = rt.device.queue;
    queue.writeBuffer(a.idsIn.buffer, 0, ids);
    queue.writeBuffer(a.pos.buffer, 0, pos);
    queue.writeBuffer(a.slots.buffer, 0, m.slotMapping as Int32Array<ArrayBuffer>);
    if (R) queue.writeBuffer(a.last.buffer, 0, last, 0, R);
    this.sampling.upload(proc, V);
    // Prepared now (not inside a capture, where their first allocations would taint it) and named.
    const key = stepGraphs ? `${T}|${selfSig}|${crossSig}#${JSON.stringify(rt.tuning)}` : null;
    this.dc ??= new DispatchCache(rt);
    const step = this.step;
    const prev = this.sampled[(step + 1) % 2], out = this.sampled[step % 2];
    const logitsAll = rt.recording(this.dc, () => {
      const h = a.h.view([T, d]), x = a.x.view([T, d]), pe = a.q.view([T, d]);
      rt.dispatch(rt.kernel('model_step', 'ids_main'), { ids_in: a.idsIn, prev, ids_out: a.ids }, { rows: T, prev_rows: this.maxSeqsPerStep }, Math.ceil(T / 64));
      embedding(rt, a.ids, this.embed, { rows: T, out: h });
      embedding(rt, a.pos, this.decPos, { rows: T, out: pe });
      add(rt, h, pe, { out: h });
      const hit = key === null ? undefined : this.graphs.get(key);
      if (hit) this.graphs.delete(key!);
      if (hit && rt.replay(hit)) {
        this.graphs.set(key!, hit);
        this.graphStats.replayed++;
      } else {
        const { graph } = rt.capture(() => this.layers(T, a));
        this.graphStats.recorded++;
          if (key !== null && !graph.taint) {
          this.graphs.set(key, graph);
          if (this.graphs.size > 16) this.graphs.delete(this.graphs.keys().next().value!);
        }
      }
      layerNorm(rt, h, this.decLn.w, this.decLn.b, EPS, { out: x });
      if (all) return linear(rt, x, this.embed);
      if (!R) return null;
      linear(rt, x, this.embed, { rows: R, gatherRows: a.last, out: a.logits });
      // The edits carry the suppressed tokens.
      this.sampling.record(a.logits, R, V, proc, out);
      return null;
    });
    if (all) return { step, T, sampledRow, ids: Promise.resolve(new ArrayBuffer(0)), logits: null, all: logitsAll! };
    this.step++;
    this.decodeStats.steps++;
    this.decodeStats.fromGpu += fromGpu;
    // Submits the step and copies its ids (and logprob rows) for the host.
    let got: Promise<ArrayBuffer>;
    if (R) got = rt.readBuffer(out.buffer, 4 * R, 0, this.reads);
    else { rt.flush(); got = Promise.resolve(new ArrayBuffer(0)); }
    const logits = this.sampling.readLogprobs(proc, V, this.reads);
    return { step, T, sampledRow, ids: got, logits };
  }

  /** Sampling decoder steps, and their rows whose input was the previous step's id still on the GPU. */
  readonly decodeStats = { steps: 0, fromGpu: 0 };

  /** The decoder layers over the step's T rows (a.h holds the embeddings): what a StepGraph captures. */
  private layers(T: number, a: StepActs): void {
    const rt = this.rt, c = this.cfg, d = c.d, H = c.decHeads, hd = d / H;
    const h = a.h.view([T, d]), x = a.x.view([T, d]), qkv = a.qkv.view([T, 3 * d]), attn = a.attn.view([T, H, hd]);
    const q = a.q.view([T, H, hd]), f = a.f.view([T, c.decFfn]), g = a.g.view([T, c.decFfn]);
    const attnRows = a.attn.view([T, d]), qRows = a.q.view([T, d]), slots = a.slots.view([T]);
    this.decLayers.forEach((L, l) => {
      layerNorm(rt, h, L.ln1.w, L.ln1.b, EPS, { out: x });
      linear(rt, x, L.qkv, { out: qkv });
      encodeCacheWrite(rt, T, { tensor: qkv, offset: d, stride: 3 * d }, { tensor: qkv, offset: 2 * d, stride: 3 * d }, this.caches[l], slots);
      this.selfPlan!.run(qkv, this.caches[l], { out: attn, qRowStride: 3 * d });
      linear(rt, attnRows, L.o, { out: h, accumulate: true });
      layerNorm(rt, h, L.ln2.w, L.ln2.b, EPS, { out: x });
      linear(rt, x, L.cq, { out: qRows });
      this.crossPlan!.run(q, this.caches[l], { out: attn });
      linear(rt, attnRows, L.co, { out: h, accumulate: true });
      this.mlp(h, x, f, g, L.ln3, L, T);
    });
  }

  /** Decoder steps whose layers were recorded, and replayed from an earlier step's commands. */
  readonly graphStats = { recorded: 0, replayed: 0 };
  private dc: DispatchCache | null = null;
  private selfPlan: AttentionPlan | null = null;
  private crossPlan: AttentionPlan | null = null;
  private graphs = new Map<string, StepGraph>();
  private acts: StepActs | null = null;

  /** The step's buffers, for at least T rows and S sequences: kept, grown (to a power of two, at most
   *  maxSeqsPerStep × max_target_positions rows) only when a step needs more. */
  private stepActs(T: number, S: number): StepActs {
    const c = this.cfg, rt = this.rt;
    if (this.acts && this.acts.rows >= T && this.acts.seqs >= S) return this.acts;
    const rows = Math.max(T, Math.min(this.maxSeqsPerStep * c.maxTarget, 2 ** Math.ceil(Math.log2(Math.max(T, 16)))));
    const seqs = Math.max(S, this.maxSeqsPerStep);
    this.dropActs();
    this.dropEnc();
    this.acts = {
      rows, seqs,
      h: rt.zeros([rows, c.d]), x: rt.zeros([rows, c.d]), qkv: rt.zeros([rows, 3 * c.d]), attn: rt.zeros([rows, c.d]), q: rt.zeros([rows, c.d]),
      f: rt.zeros([rows, c.decFfn]), g: rt.zeros([rows, c.decFfn]),
      idsIn: rt.zeros([rows], 'i32'), ids: rt.zeros([rows], 'i32'), pos: rt.zeros([rows], 'i32'), slots: rt.zeros([rows], 'i32'), last: rt.zeros([seqs], 'i32'),
      logits: rt.zeros([seqs, c.vocab]),
    };
    return this.acts;
  }

  private dropActs(): void {
    if (!this.acts) return;
    for (const [k, t] of Object.entries(this.acts)) if (k !== 'rows' && k !== 'seqs') (t as Tensor).destroy();
    this.acts = null;
    // Graphs bound the old buffers.
    this.graphs.clear();
  }


  protected checkPrompt(op: string, arg: string, p: unknown): number[] {
    check(Array.isArray(p) || p instanceof Int32Array, op, arg, 'an array of token ids', p);
    const a = Array.from(p as ArrayLike<number>);
    check(a.length > 0, op, arg, 'at least one token', '[]');
    check(a.length <= this.cfg.maxTarget, op, arg, `at most max_target_positions=${this.cfg.maxTarget} tokens`, `${a.length}`);
    for (const [i, t] of a.entries()) check(Number.isInteger(t) && t >= 0 && t < this.cfg.vocab, op, `${arg}[${i}]`, `a token id in [0, ${this.cfg.vocab})`, t);
    return a;
  }

  // ------------------------------------------------------------------------------------------ transcription

  /** A special token's id: generation_config's maps first, then the tokenizer's vocabulary. */
  protected special(token: string, fromGen?: unknown): number | undefined {
    if (Number.isInteger(fromGen)) return fromGen as number;
    return this.tokenizer?.tokenToId(token);
  }

  /** Whisper's start sequence: <|startoftranscript|> [<|lang|>] [<|task|>] [<|notimestamps|>]. */
  startSequence(o: TranscribeOptions = {}): number[] {
    const op = 'WhisperModel.transcribe';
    const g = this.genConfig;
    const seq = [this.special('<|startoftranscript|>', g.decoder_start_token_id) ?? this.cfg.decoderStart];
    if (o.language !== undefined) {
      check(typeof o.language === 'string', op, 'o.language', "a language code ('en') or token ('<|en|>')", o.language);
      const tok = o.language.startsWith('<|') ? o.language : `<|${o.language.toLowerCase()}|>`;
      const id = this.special(tok, (g.lang_to_id as Record<string, unknown> | undefined)?.[tok]);
      if (id === undefined) fail(op, 'o.language', 'a language the checkpoint knows (generation_config lang_to_id or the tokenizer)', o.language);
      seq.push(id);
    }
    if (o.task !== undefined) {
      check(o.task === 'transcribe' || o.task === 'translate', op, 'o.task', "'transcribe' or 'translate'", fmt(o.task));
      const id = this.special(`<|${o.task}|>`, (g.task_to_id as Record<string, unknown> | undefined)?.[o.task]);
      if (id === undefined) fail(op, 'o.task', 'a task the checkpoint knows (generation_config task_to_id or the tokenizer)', o.task);
      seq.push(id);
    }
    if (!o.timestamps) {
      const id = this.special('<|notimestamps|>', g.no_timestamps_token_id);
      if (id !== undefined) seq.push(id);
    }
    return seq;
  }

  /** The log-mel features of 16 kHz mono PCM, one Float32Array per window of the encoder's frames (transcribe's inputs). */
  protected async windowFeatures(op: string, pcm: Float32Array): Promise<Float32Array[]> {
    const feats = await this.logMel(pcm);
    const n = this.featureSize;
    check(this.fe.frames === 2 * this.encoderFrames, op, 'preprocessor config', `windows of ${2 * this.encoderFrames} frames (the encoder's)`, `${this.fe.frames} frames`);
    return Array.from({ length: feats.length / n }, (_, w) => feats.subarray(w * n, (w + 1) * n));
  }

  /**
   * A transcription of windows' tokens (window w's: outs[w], decoded from the start sequence): their tokens
   * without end-of-text, the text through the tokenizer when the model has one (else empty), and with
   * timestamps, segments from the timestamp tokens, offset by each window's start.
   */
  protected transcript(outs: readonly number[][], timestamps: boolean): { text: string; tokens: number[]; segments?: TranscriptSegment[] } {
    const eos = new Set(this.cfg.eos);
    const tokens: number[] = [];
    const segments: TranscriptSegment[] = [];
    const tsBegin = (this.special('<|notimestamps|>', this.genConfig.no_timestamps_token_id) ?? Infinity) + 1;
    const secs = this.melConfig.chunkSamples / this.melConfig.samplingRate;
    const decode = (ids: number[]) => this.tokenizer?.decode(ids.filter((t) => t < tsBegin), { skipSpecialTokens: true }) ?? '';
    outs.forEach((out, w) => {
      const body = out.filter((t) => !eos.has(t));
      tokens.push(...body);
      if (!timestamps) return;
      let t0: number | null = null, cur: number[] = [];
      for (const t of body) {
        if (t < tsBegin) { cur.push(t); continue; }
        const at = w * secs + (t - tsBegin) * 0.02;
        if (t0 === null) t0 = at;
        else {
          segments.push({ start: t0, end: at, text: decode(cur), tokens: cur });
          t0 = null; cur = [];
        }
      }
      if (cur.length) segments.push({ start: t0 ?? w * secs, end: (w + 1) * secs, text: decode(cur), tokens: cur });
    });
    const text = this.tokenizer ? outs.map((out) => decode(out.filter((t) => !eos.has(t)))).join('') : '';
    return timestamps ? { text, tokens, segments } : { text, tokens };
  }

  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    const ws: (LinearWeight | undefined)[] = [this.conv1, this.conv2, this.embed];
    for (const L of this.encLayers) ws.push(L.qkv, L.o, L.fc1, L.fc2);
    for (const L of this.decLayers) ws.push(L.qkv, L.o, L.cq, L.ckv, L.co, L.fc1, L.fc2);
    for (const w of ws) w?.destroy();
    const ts: (Tensor | undefined | null)[] = [this.encPos, this.decPos];
    this.sampling.destroy();
    const norms = [this.encLn, this.decLn, ...this.encLayers.flatMap((L) => [L.ln1, L.ln2]), ...this.decLayers.flatMap((L) => [L.ln1, L.ln2, L.ln3])];
    for (const n of norms) if (n) ts.push(n.w, n.b);
    for (const t of ts) t?.destroy();
    // Steps in flight: their read-backs reject (the engine above ends their requests first).
    this.rt.abandonReads(this.reads);
    for (const t of this.sampled) t.destroy();
    this.fe?.destroy();
    this.dc?.destroy();
    this.dropActs();
    this.dropEnc();
    this.encCache?.destroy();
    for (const c of this.caches) c.destroy();
    // What the model held waits in the pool for a submit: submitted now, a model loaded next takes the same buffers.
    try {
      this.rt.flush();
    } catch { /* a lost device: nothing to submit, and destroy does not throw */ }
  }
}

/**
 * Loads a WhisperForConditionalGeneration checkpoint (loadModel dispatches here by architecture); `make`
 * builds the layer above's model over the runner (serve/whisper.ts). kvCache: blockSize (default 16),
 * numBlocks (the self-attention's; default maxSeqsPerStep × the blocks of max_target_positions): the
 * decoder caches hold that many blocks and maxSeqsPerStep encoder outputs' cross-attention blocks more,
 * one pool for both. maxSeqsPerStep (default 8): sequences decoded together.
 */
export async function loadWhisperWith<M extends WhisperRunner>(rt: Runtime, o: WhisperLoadOptions, make: MakeWhisper<M>): Promise<M> {
  rt.assertAlive(OP);
  check(o !== null && typeof o === 'object', OP, 'o', '{ config, weights, ... }', o);
  const cfg = parseWhisperConfig(o.config);
  const files = (Array.isArray(o.weights) ? o.weights : [o.weights]) as SafetensorsFile[];
  check(files.length > 0 && files.every((f) => f && f.tensors instanceof Map && typeof f.bytes === 'function'), OP, 'o.weights',
    'a SafetensorsFile or an array of them (loadSafetensors)', o.weights);
  const dt = o.dtype ?? 'checkpoint';
  check(['checkpoint', 'f32', 'f16', 'bf16'].includes(dt), OP, 'o.dtype', "'checkpoint', 'f32', 'f16' or 'bf16' (Whisper's weights are not quantized on load)", fmt(dt));
  const resolved = resolveWhisper(cfg, files);
  const dtype: WeightDType = dt === 'checkpoint' ? checkpointDType(resolved, 'f32') : dt as WeightDType;
  if (dtype !== 'f32') check(cfg.d % 8 === 0 && cfg.nMels % 8 === 0, OP, 'o.dtype', `'f32' for d_model=${cfg.d}, mels=${cfg.nMels} (16-bit weights need multiples of 8)`, dtype);
  const kv = o.kvCache ?? {};
  check(kv !== null && typeof kv === 'object', OP, 'o.kvCache', '{ numBlocks?, blockSize? }', kv);
  checkKeys(OP, 'o.kvCache', kv, ['numBlocks', 'blockSize', 'dtype']);
  if (kv.dtype !== undefined) check(kv.dtype === 'f32', OP, 'o.kvCache.dtype', "'f32' (Whisper's caches are f32)", fmt(kv.dtype));
  const blockSize = kv.blockSize === undefined ? 16 : checkPosInt(kv.blockSize, OP, 'o.kvCache.blockSize');
  const maxSeqs = o.maxSeqsPerStep === undefined ? 8 : checkPosInt(o.maxSeqsPerStep, OP, 'o.maxSeqsPerStep');
  const selfBlocks = kv.numBlocks === undefined ? maxSeqs * Math.ceil(cfg.maxTarget / blockSize) : checkPosInt(kv.numBlocks, OP, 'o.kvCache.numBlocks');
  const numBlocks = selfBlocks + maxSeqs * Math.ceil(cfg.maxSource / blockSize);
  check(numBlocks * blockSize < 2 ** 31, OP, 'o.kvCache.numBlocks', 'cache slots within i32 (blocks × blockSize below 2^31)', selfBlocks);
  // The extractor's settings: preprocessor_config.json, else Whisper's (16 kHz, n_fft 400, hop 160) with
  // windows of the encoder's frames.
  const pre = o.preprocessorConfig ?? { feature_size: cfg.nMels, n_samples: 2 * cfg.maxSource * 160, hop_length: 160, n_fft: 400, sampling_rate: 16000 };
  const mel = parseMelConfig(pre, OP);
  check(mel.nMels === cfg.nMels, OP, 'o.preprocessorConfig.feature_size', `num_mel_bins=${cfg.nMels} (the config's)`, mel.nMels);
  const gen = (o.generationConfig ?? {}) as Record<string, unknown>;
  if (Number.isInteger(gen.decoder_start_token_id)) cfg.decoderStart = gen.decoder_start_token_id as number;
  const genEos = [gen.eos_token_id].flat().filter((x): x is number => Number.isInteger(x));
  if (genEos.length) cfg.eos = [...new Set([...cfg.eos, ...genEos])];
  if (o.name !== undefined) check(typeof o.name === 'string' && o.name.length > 0, OP, 'o.name', 'a non-empty string', o.name);
  const nameOrPath = (o.config as Record<string, unknown>)._name_or_path;
  const model = make(rt, cfg, mel, { blockSize, maxSeqs, numBlocks, genConfig: gen });
  model.id = o.name ?? (typeof nameOrPath === 'string' && nameOrPath ? nameOrPath : ARCH);
  const made: { destroy(): void }[] = [];
  const reader = new WeightReader(files, resolved, o.onProgress, false, undefined, !!o.allowNonFinite);
  try {
    await model.load(reader, dtype, made);
    model.allocate(made);
    if (o.tokenizer) model.tokenizer = TextTokenizer.create(o.tokenizer, o.tokenizerConfig, o.generationConfig);
  } catch (e) {
    for (const m of made) m.destroy();
    throw e;
  }
  return model;
}
