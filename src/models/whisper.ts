// Whisper (WhisperForConditionalGeneration), as transformers computes it: 16 kHz PCM -> log-mel features
// (src/ops/audio.ts, on the GPU) -> encoder: conv1 (k 3, pad 1) -> GELU -> conv2 (k 3, stride 2, pad 1)
// -> GELU -> + sinusoidal positions (the checkpoint's table) -> pre-LN layers of non-causal self-attention
// and a GELU MLP -> final LayerNorm; decoder: token + learned positions -> pre-LN layers of causal
// self-attention over a paged KV cache, cross-attention over the encoder's keys/values and a GELU MLP ->
// final LayerNorm -> proj_out tied to embed_tokens. q is scaled by head_dim^-0.5; k projections have no bias.
//
// Attention runs on the paged kernels everywhere (planAttention): they read q from a fused q|k|v row with
// a row stride and write [T, heads, head_dim] token-major, so no transposes are needed (the dense sdpa
// wants [B, heads, L, D]). The encoder's self-attention writes its K/V into a scratch paged cache kept for
// the model's life (one for all layers: each layer writes, then reads, before the next) and runs with
// causal false over seqLens = frames. The cross-attention's keys/values are computed once per request,
// when it is admitted (the encoder output times each decoder layer's k|v weights), and written into that
// layer's cross cache, in blocks of the request's own, freed when it ends; every decoder step then runs
// causal false over seqLens = encoder frames. A step batches requests at any point (prefills of their
// start sequences beside decodes); requests beyond maxSeqsPerStep wait for a slot (continuous batching).
//
// GPU memory: weights, the caches and the front end's tables are made at load; the encoder's and the
// decoder step's activations are kept by the model, grown to the largest batch seen (never per call);
// the rest a call takes (features, metadata, plans) comes from the engine's buffer pool and goes back to
// it, so a second call of the same shapes creates no buffer (engine.counters.createBuffer; tests/cases/
// whisper). Decoder steps run as the decoder-only models' do: inputs written before the recording,
// a DispatchCache, and the layers replayed from captured commands when a step repeats (see step()).
//
// Sampled ids stay on the GPU: a decoding request's next input is the previous step's sampled id, read
// there by the step kernel (shaders/models/step.wgsl, as ModelRunner's steps do), so up to
// tuning.stepsInFlight steps are recorded and submitted before the oldest one's ids reach the host. A
// request's draws are keyed by its seed, its index and its own token count, so neither the batch nor the
// steps in flight change what it samples. A request that stops (a stop token, a callback's error, an
// abort) while later steps that carry it are in flight has their ids dropped; its blocks go back at once,
// since whatever reuses them is queued after those steps.
import { WebinferError, check, checkKeys, checkPosInt, fail, fmt } from '../core/errors.js';
import { DispatchCache, type Runtime, type StepGraph } from '../core/runtime.js';
import type { Tensor } from '../core/tensor.js';
import { createPagedKVCache, encodeCacheWrite, type PagedKVCache } from '../attention/paged_cache.js';
import { planAttention, type AttentionPlan } from '../attention/paged.js';
import { createLinear, linear, linearWeightBytes, type LinearWeight } from '../ops/gemm.js';
import { layerNorm } from '../ops/norm.js';
import { add } from '../ops/elementwise.js';
import { embedding } from '../ops/embedding.js';
import { adjustLogits, argmax, EDIT_WORDS, packRowSampling, ROW_PARAM_WORDS, sampleRows } from '../ops/sample.js';
import { channelsFirst, conv1d, geluRows, timeFirst } from '../ops/conv.js';
import { MelFrontEnd, parseMelConfig, type MelConfig } from '../ops/audio.js';
import { TextTokenizer } from '../text/text.js';
import type { SafetensorsFile } from '../formats/safetensors.js';
import { WEIGHT_DTYPES, type ResolvedTensor } from './schema.js';
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
  /** Each row's sampling parameters, the suppressed tokens' edits. */
  params: Tensor; edits: Tensor;
}

/** Free lists of cache blocks: a request takes blocks as it grows and gives them back when it ends. */
class BlockPool {
  private readonly free: number[];
  constructor(readonly numBlocks: number) {
    this.free = Array.from({ length: numBlocks }, (_, i) => numBlocks - 1 - i);
  }
  get available(): number { return this.free.length; }
  take(n: number): number[] {
    if (n > this.free.length) throw new WebinferError(`whisper: the KV cache is out of blocks (${n} wanted, ${this.free.length} free)`);
    return this.free.splice(this.free.length - n, n).reverse();
  }
  give(blocks: number[]): void {
    for (const b of blocks) this.free.push(b);
    blocks.length = 0;
  }
}

/** One decoder request: its start sequence, what it has generated, its cache blocks. */
interface Request {
  index: number;
  prompt: number[];
  features: Float32Array;
  /** Tokens that reached the host. */
  out: number[];
  /** Tokens sampled, on the host or still in flight (out.length <= issued <= maxNew). */
  issued: number;
  /** The step that sampled its newest token, and that token's row among the step's sampled ids. */
  lastStep: number; lastRow: number;
  /** Tokens in the self-attention cache. */
  len: number;
  selfBlocks: number[];
  crossBlocks: number[];
  maxNew: number;
  done: boolean;
  /** Sampling (temperature 0: greedy), stop tokens, the caller's callbacks. */
  temperature: number; topK: number; topP: number; seed: number;
  stops: ReadonlySet<number>;
  onToken?: (prompt: number, token: number) => void;
  signal?: AbortSignal;
  /** Settles the request's promise (once). */
  finish(err?: unknown): void;
}

export interface WhisperGenerateOptions {
  /** Per prompt: its log-mel features [mels × frames] (row-major). */
  encoderInputs?: (Float32Array | number[])[];
  maxNewTokens?: number;
  temperature?: number;
  topK?: number;
  topP?: number;
  seed?: number;
  stopTokens?: number[];
  onToken?: (prompt: number, token: number) => void;
  signal?: AbortSignal;
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

const GEN_OPTIONS = ['encoderInputs', 'maxNewTokens', 'temperature', 'topK', 'topP', 'seed', 'stopTokens', 'onToken', 'signal'];

export class WhisperModel {
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
  private readonly blockSize: number;
  private readonly maxSeqs: number;
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
  private selfCaches: PagedKVCache[] = [];
  private crossCaches: PagedKVCache[] = [];
  private selfBlocks!: BlockPool;
  private crossBlocks!: BlockPool;
  private genConfig: Record<string, unknown>;
  private destroyed = false;
  /** The sampled ids of the last two decoder steps: step k writes sampled[k % 2] and reads the previous
   *  step's ids from the other (each step's ids are copied for the host as the step is recorded, so the
   *  GPU is done with a slot before the step after next writes it, however many steps are in flight). */
  private sampled: Tensor[] = [];
  /** The next decoder step's number (generate's steps only: logits' never read the ring). */
  private stepNo = 0;
  /** Read-backs of steps in flight (dropped at once by destroy). */
  private readonly reads = new Set<GPUBuffer>();
  /** generation_config's suppress_tokens and begin_suppress_tokens (ids inside the vocabulary). */
  private readonly suppressTokens: number[];
  private readonly beginSuppressTokens: number[];

  constructor(private readonly rt: Runtime, cfg: WhisperConfig, mel: MelConfig, o: { blockSize: number; maxSeqs: number; genConfig: Record<string, unknown> }) {
    this.cfg = cfg;
    this.melConfig = mel;
    this.encoderFrames = cfg.maxSource;
    this.featureSize = cfg.nMels * 2 * cfg.maxSource;
    this.blockSize = o.blockSize;
    this.maxSeqs = o.maxSeqs;
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
  allocate(made: { destroy(): void }[], selfBlocks?: number, crossBlocks?: number): void {
    const rt = this.rt, c = this.cfg, bs = this.blockSize;
    this.fe = new MelFrontEnd(rt, this.melConfig);
    made.push(this.fe);
    const nbEnc = Math.ceil(this.encoderFrames / bs);
    const hdE = c.d / c.encHeads, hdD = c.d / c.decHeads;
    this.encCache = createPagedKVCache(rt, { numBlocks: this.encBatch * nbEnc, blockSize: bs, numKvHeads: c.encHeads, headSize: hdE });
    made.push(this.encCache);
    const nSelf = selfBlocks ?? this.maxSeqs * Math.ceil(c.maxTarget / bs);
    const nCross = crossBlocks ?? this.maxSeqs * nbEnc;
    for (let l = 0; l < c.decLayers; l++) {
      this.selfCaches.push(createPagedKVCache(rt, { numBlocks: nSelf, blockSize: bs, numKvHeads: c.decHeads, headSize: hdD }));
      made.push(this.selfCaches[l]);
      this.crossCaches.push(createPagedKVCache(rt, { numBlocks: nCross, blockSize: bs, numKvHeads: c.decHeads, headSize: hdD }));
      made.push(this.crossCaches[l]);
    }
    this.selfBlocks = new BlockPool(nSelf);
    this.crossBlocks = new BlockPool(nCross);
    for (let i = 0; i < 2; i++) {
      this.sampled.push(rt.zeros([this.maxSeqs], 'i32'));
      made.push(this.sampled[i]);
    }
  }

  private alive(op: string): void {
    if (this.destroyed) throw new WebinferError(`${op}: the model was destroyed`);
    this.rt.assertAlive(op);
  }

  // ------------------------------------------------------------------------------------------ front end

  /** Log-mel features of 16 kHz mono PCM: [mels × frames] per window of chunk samples, windows one after the other. */
  async logMel(pcm: Float32Array): Promise<Float32Array> {
    const op = 'WhisperModel.logMel';
    this.alive(op);
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

  private checkFeatures(op: string, arg: string, x: unknown): Float32Array {
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
    this.alive(op);
    const f = this.checkFeatures(op, 'encoderInput', encoderInput);
    const t = this.rt.tensor(f, [1, this.cfg.nMels, 2 * this.encoderFrames], 'f32');
    const out = this.encode(t, 1);
    t.destroy();
    return Float32Array.from(await out.toFloat32());
  }

  /** Runs the encoder over requests just admitted and writes each one's cross keys/values into its blocks (taken by the caller). */
  private admit(reqs: Request[]): void {
    const rt = this.rt, c = this.cfg, d = c.d, Te = this.encoderFrames, bs = this.blockSize;
    for (let i0 = 0; i0 < reqs.length; i0 += this.encBatch) {
      const group = reqs.slice(i0, i0 + this.encBatch);
      const B = group.length;
      const feats = new Float32Array(B * this.featureSize);
      group.forEach((r, b) => feats.set(r.features, b * this.featureSize));
      const ft = rt.tensor(feats, [B, c.nMels, 2 * Te], 'f32');
      const enc = this.encode(ft, B);
      ft.destroy();
      const slots = new Int32Array(B * Te);
      group.forEach((r, b) => {
        for (let t = 0; t < Te; t++) slots[b * Te + t] = r.crossBlocks[Math.floor(t / bs)] * bs + (t % bs);
      });
      const slotT = rt.tensor(slots, [B * Te], 'i32');
      // Each layer's cross k|v rows in the encoder's q|k|v buffer, free after the encoder.
      const kv = this.enc!.qkv.view([B * Te, 2 * d]);
      this.decLayers.forEach((L, l) => {
        linear(rt, enc, L.ckv, { out: kv });
        encodeCacheWrite(rt, B * Te, { tensor: kv, offset: 0, stride: 2 * d }, { tensor: kv, offset: d, stride: 2 * d }, this.crossCaches[l], slotT);
      });
      slotT.destroy();
    }
  }

  // ------------------------------------------------------------------------------------------ decoder

  /**
   * One decoder step over `feeds[i]` new tokens of reqs[i] (their prefills or one token each; a negative
   * id -(1 + r) is row r of the previous step's sampled ids, still on the GPU): writes their self K/V,
   * returns the logits of every row (allRows: a tensor the caller destroys), or samples each request's
   * next token from its last row into the sampled-id ring and returns the step's number and the read-back
   * of its ids (row s: reqs[s]'s), the step submitted.
   *
   * As the decoder-only models' steps (models/model.ts): the step's inputs go into buffers the model
   * keeps (grown to the largest step seen, never per call) in four small writes before the recording;
   * the recording runs through the model's DispatchCache (uniforms rewritten only when they change,
   * cached bind groups); and the layers of a step whose recording would equal an earlier one's (its
   * tokens, its attention plans' kernels, bind groups and grids: the pool hands the plans the same
   * buffers step after step) are replayed from the captured commands (StepGraph) instead of recorded.
   */
  private step(reqs: Request[], feeds: number[][], allRows: boolean): { logits?: Tensor; step?: number; ids?: Promise<ArrayBuffer> } {
    const rt = this.rt, c = this.cfg, d = c.d, bs = this.blockSize, H = c.decHeads, hd = d / H;
    const S = reqs.length;
    const T = feeds.reduce((a, f) => a + f.length, 0);
    const mbSelf = Math.ceil(c.maxTarget / bs), mbCross = Math.ceil(this.encoderFrames / bs);
    const ids = new Int32Array(T), pos = new Int32Array(T), slots = new Int32Array(T), last = new Int32Array(S);
    const qsl = new Int32Array(S + 1), selfLens = new Int32Array(S), crossLens = new Int32Array(S).fill(this.encoderFrames);
    const selfBT = new Int32Array(S * mbSelf), crossBT = new Int32Array(S * mbCross);
    let row = 0;
    reqs.forEach((r, s) => {
      const n = feeds[s].length;
      const need = Math.ceil((r.len + n) / bs) - r.selfBlocks.length;
      if (need > 0) r.selfBlocks.push(...this.selfBlocks.take(need));
      for (let i = 0; i < n; i++, row++) {
        const p = r.len + i;
        ids[row] = feeds[s][i];
        pos[row] = p;
        slots[row] = r.selfBlocks[Math.floor(p / bs)] * bs + (p % bs);
      }
      r.len += n;
      qsl[s + 1] = row;
      last[s] = row - 1;
      selfLens[s] = r.len;
      selfBT.set(r.selfBlocks, s * mbSelf);
      crossBT.set(r.crossBlocks, s * mbCross);
    });
    const a = this.stepActs(T, S);
    // The uploads run on the queue ahead of what the encoder still holds: submit that first.
    rt.flush();
    const queue = rt.device.queue;
    queue.writeBuffer(a.idsIn.buffer, 0, ids);
    queue.writeBuffer(a.pos.buffer, 0, pos);
    queue.writeBuffer(a.slots.buffer, 0, slots);
    queue.writeBuffer(a.last.buffer, 0, last);
    // Sampling: the next token of each request's last row, with its suppressed tokens, on the GPU.
    const edits = allRows ? null : this.suppressEdits(reqs);
    if (edits) queue.writeBuffer(a.edits.buffer, 0, edits as Uint32Array<ArrayBuffer>);
    const greedy = reqs.every((r) => r.temperature === 0);
    if (!allRows && !greedy) {
      const words = new Uint32Array(S * ROW_PARAM_WORDS);
      reqs.forEach((r, i) => packRowSampling(words, i, { temperature: r.temperature, topK: r.topK, topP: r.topP, minP: 0, seed: r.seed, step: r.issued, stream: r.index }));
      queue.writeBuffer(a.params.buffer, 0, words);
    }
    const old = [this.selfPlan, this.crossPlan];
    this.selfPlan = planAttention(rt, { queryStartLoc: qsl, seqLens: selfLens, blockTable: selfBT, maxBlocksPerSeq: mbSelf },
      { cache: this.selfCaches[0], numHeads: H, scale: hd ** -0.5, causal: true });
    this.crossPlan = planAttention(rt, { queryStartLoc: qsl, seqLens: crossLens, blockTable: crossBT, maxBlocksPerSeq: mbCross },
      { cache: this.crossCaches[0], numHeads: H, scale: hd ** -0.5, causal: false });
    // Prepared now (not inside a capture, where their first allocations would taint it) and named.
    const key = rt.tuning.stepGraphs
      ? `${T}|${this.selfPlan.plan.signature(T, 'f32', 'f32', 3 * d, false)}|${this.crossPlan.plan.signature(T, 'f32', 'f32', d, false)}#${JSON.stringify(rt.tuning)}`
      : null;
    // The last step's plans go back to the pool after this step's took theirs: the pool then hands the
    // next step the buffers this one's predecessor had, so steps alternate between two sets of plan
    // buffers and their graphs repeat (releasing first let the free lists' order rotate them through
    // a dozen sets, more than the graphs kept).
    for (const p of old) p?.destroy();
    this.dc ??= new DispatchCache(rt);
    const stepNo = this.stepNo;
    const prev = this.sampled[(stepNo + 1) % 2], out = this.sampled[stepNo % 2];
    const rec = rt.recording(this.dc, () => {
      const h = a.h.view([T, d]), x = a.x.view([T, d]), pe = a.q.view([T, d]);
      rt.dispatch(rt.kernel('model_step', 'ids_main'), { ids_in: a.idsIn, prev, ids_out: a.ids }, { rows: T, prev_rows: this.maxSeqs }, Math.ceil(T / 64));
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
      if (allRows) return { logits: linear(rt, x, this.embed) };
      const logits = linear(rt, x, this.embed, { rows: S, gatherRows: a.last, out: a.logits.view([S, c.vocab]) });
      if (edits) adjustLogits(rt, logits, a.edits, edits.length / EDIT_WORDS);
      const tokens = out.view([S]);
      if (greedy) argmax(rt, logits, { out: tokens });
      else sampleRows(rt, logits, a.params, { out: tokens });
      return {};
    });
    if (allRows) return rec;
    this.stepNo++;
    // Submits the step and copies its ids for the host.
    return { step: stepNo, ids: rt.readBuffer(out.buffer, 4 * S, 0, this.reads) };
  }

  /** The decoder layers over the step's T rows (a.h holds the embeddings): what a StepGraph captures. */
  private layers(T: number, a: StepActs): void {
    const rt = this.rt, c = this.cfg, d = c.d, H = c.decHeads, hd = d / H;
    const h = a.h.view([T, d]), x = a.x.view([T, d]), qkv = a.qkv.view([T, 3 * d]), attn = a.attn.view([T, H, hd]);
    const q = a.q.view([T, H, hd]), f = a.f.view([T, c.decFfn]), g = a.g.view([T, c.decFfn]);
    const attnRows = a.attn.view([T, d]), qRows = a.q.view([T, d]), slots = a.slots.view([T]);
    this.decLayers.forEach((L, l) => {
      layerNorm(rt, h, L.ln1.w, L.ln1.b, EPS, { out: x });
      linear(rt, x, L.qkv, { out: qkv });
      encodeCacheWrite(rt, T, { tensor: qkv, offset: d, stride: 3 * d }, { tensor: qkv, offset: 2 * d, stride: 3 * d }, this.selfCaches[l], slots);
      this.selfPlan!.run(qkv, this.selfCaches[l], { out: attn, qRowStride: 3 * d });
      linear(rt, attnRows, L.o, { out: h, accumulate: true });
      layerNorm(rt, h, L.ln2.w, L.ln2.b, EPS, { out: x });
      linear(rt, x, L.cq, { out: qRows });
      this.crossPlan!.run(q, this.crossCaches[l], { out: attn });
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
    const rows = Math.max(T, Math.min(this.maxSeqs * c.maxTarget, 2 ** Math.ceil(Math.log2(Math.max(T, 16)))));
    const seqs = Math.max(S, this.maxSeqs);
    this.dropActs();
    this.dropEnc();
    this.acts = {
      rows, seqs,
      h: rt.zeros([rows, c.d]), x: rt.zeros([rows, c.d]), qkv: rt.zeros([rows, 3 * c.d]), attn: rt.zeros([rows, c.d]), q: rt.zeros([rows, c.d]),
      f: rt.zeros([rows, c.decFfn]), g: rt.zeros([rows, c.decFfn]),
      idsIn: rt.zeros([rows], 'i32'), ids: rt.zeros([rows], 'i32'), pos: rt.zeros([rows], 'i32'), slots: rt.zeros([rows], 'i32'), last: rt.zeros([seqs], 'i32'),
      logits: rt.zeros([seqs, c.vocab]), params: rt.zeros([seqs * ROW_PARAM_WORDS], 'u32'),
      edits: rt.zeros([Math.max(1, seqs * (this.suppressTokens.length + this.beginSuppressTokens.length) * EDIT_WORDS)], 'u32'),
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

  private release(r: Request): void {
    this.selfBlocks.give(r.selfBlocks);
    this.crossBlocks.give(r.crossBlocks);
  }

  private checkPrompt(op: string, arg: string, p: unknown): number[] {
    check(Array.isArray(p) || p instanceof Int32Array, op, arg, 'an array of token ids', p);
    const a = Array.from(p as ArrayLike<number>);
    check(a.length > 0, op, arg, 'at least one token', '[]');
    check(a.length <= this.cfg.maxTarget, op, arg, `at most max_target_positions=${this.cfg.maxTarget} tokens`, `${a.length}`);
    for (const [i, t] of a.entries()) check(Number.isInteger(t) && t >= 0 && t < this.cfg.vocab, op, `${arg}[${i}]`, `a token id in [0, ${this.cfg.vocab})`, t);
    return a;
  }

  /** Decoder logits at every position of `tokens` [len × vocab], over the encoder states of o.encoderInput. */
  async logits(tokens: number[] | Int32Array, o: { encoderInput?: Float32Array | number[] } = {}): Promise<Float32Array> {
    const op = 'WhisperModel.logits';
    this.alive(op);
    check(o !== null && typeof o === 'object', op, 'o', '{ encoderInput }', o);
    checkKeys(op, 'o', o, ['encoderInput']);
    const prompt = this.checkPrompt(op, 'tokens', tokens);
    check(o.encoderInput !== undefined, op, 'o.encoderInput', 'the log-mel features the decoder attends to', undefined);
    const r: Request = {
      index: 0, prompt, features: this.checkFeatures(op, 'o.encoderInput', o.encoderInput), out: [], issued: 0, lastStep: -1, lastRow: -1, len: 0, selfBlocks: [], crossBlocks: [], maxNew: 0, done: false,
      temperature: 0, topK: 0, topP: 1, seed: 0, stops: new Set(), finish: () => {},
    };
    try {
      r.selfBlocks = this.selfBlocks.take(Math.ceil(prompt.length / this.blockSize));
      r.crossBlocks = this.crossBlocks.take(Math.ceil(this.encoderFrames / this.blockSize));
      this.admit([r]);
      const lg = this.step([r], [prompt], true).logits!;
      try {
        return Float32Array.from(await lg.toFloat32());
      } finally {
        lg.destroy();
      }
    } finally {
      this.release(r);
    }
  }

  /**
   * New tokens for each start sequence over its own encoder input. Every request of every call joins one
   * queue: they are served together (at most maxSeqsPerStep at once, joining the running batch as others
   * end: concurrent calls, transcriptions included, share steps), each ending at a stop token,
   * maxNewTokens, or max_target_positions.
   */
  async generate(prompts: (number[] | Int32Array)[], o: WhisperGenerateOptions = {}): Promise<number[][]> {
    const op = 'WhisperModel.generate';
    this.alive(op);
    check(Array.isArray(prompts) && prompts.length > 0, op, 'prompts', 'a non-empty array of start sequences', prompts);
    check(o !== null && typeof o === 'object', op, 'o', 'an options object', o);
    checkKeys(op, 'o', o, GEN_OPTIONS);
    const inputs = o.encoderInputs;
    check(Array.isArray(inputs) && inputs.length === prompts.length, op, 'o.encoderInputs', `${prompts.length} feature arrays (one per prompt)`, inputs);
    const maxNew = o.maxNewTokens === undefined ? this.cfg.maxTarget : checkPosInt(o.maxNewTokens, op, 'o.maxNewTokens');
    const temperature = o.temperature ?? 0;
    check(typeof temperature === 'number' && Number.isFinite(temperature) && temperature >= 0, op, 'o.temperature', 'a finite number >= 0', temperature);
    const topK = o.topK ?? 0, topP = o.topP ?? 1, seed = o.seed ?? 0;
    check(Number.isInteger(topK) && topK >= 0, op, 'o.topK', 'an integer >= 0', topK);
    check(typeof topP === 'number' && topP > 0 && topP <= 1, op, 'o.topP', 'a number in (0, 1]', topP);
    check(Number.isInteger(seed) && seed >= 0 && seed < 2 ** 32, op, 'o.seed', 'an integer in [0, 2^32)', seed);
    if (o.stopTokens !== undefined) check(Array.isArray(o.stopTokens) && o.stopTokens.every((t) => Number.isInteger(t)), op, 'o.stopTokens', 'an array of token ids', o.stopTokens);
    if (o.onToken !== undefined) check(typeof o.onToken === 'function', op, 'o.onToken', 'a function', o.onToken);
    if (o.signal !== undefined) check(typeof AbortSignal !== 'undefined' && o.signal instanceof AbortSignal, op, 'o.signal', 'an AbortSignal', o.signal);
    const stops = new Set(o.stopTokens ?? this.cfg.eos);
    const checked = prompts.map((p, i) => ({ prompt: this.checkPrompt(op, `prompts[${i}]`, p), features: this.checkFeatures(op, `o.encoderInputs[${i}]`, inputs[i]) }));
    const promises: Promise<number[]>[] = [];
    const reqs: Request[] = [];
    for (const [i, c] of checked.entries()) {
      let finish!: (err?: unknown) => void;
      const r: Request = {
        index: i, ...c, out: [], issued: 0, lastStep: -1, lastRow: -1, len: 0, selfBlocks: [], crossBlocks: [], done: false,
        maxNew: Math.min(maxNew, this.cfg.maxTarget - c.prompt.length),
        temperature, topK, topP, seed, stops, onToken: o.onToken, signal: o.signal, finish: (e) => finish(e),
      };
      promises.push(new Promise<number[]>((resolve, reject) => {
        let settled = false;
        finish = (e) => {
          if (settled) return;
          settled = true;
          if (e === undefined) resolve(r.out); else reject(e);
        };
      }));
      reqs.push(r);
    }
    for (const r of reqs) {
      if (r.maxNew <= 0) r.finish();
      else this.pending.push(r);
    }
    this.pump();
    return Promise.all(promises);
  }

  private pending: Request[] = [];
  private active: Request[] = [];
  /** Steps submitted whose ids have not reached the host: the requests of their rows, in row order. */
  private inflight: { step: number; reqs: Request[]; ids: Promise<ArrayBuffer> }[] = [];
  private pumping = false;

  /** Runs steps while requests wait, run or have ids in flight (one loop per model, whatever the number of callers). */
  private pump(): void {
    if (this.pumping) return;
    this.pumping = true;
    void (async () => {
      try {
        const k = this.rt.tuning.stepsInFlight;
        check(Number.isInteger(k) && k >= 1, 'WhisperModel.generate', 'engine.tuning.stepsInFlight', 'an integer >= 1', k);
        while (this.pending.length || this.active.length || this.inflight.length) {
          // A step is recorded whenever one can be; the oldest step's ids are waited for only when k
          // steps are in flight or no request can go on without them.
          const recorded = this.stepOnce();
          if (this.inflight.length && (!recorded || this.inflight.length >= k)) await this.apply();
        }
      } catch (e) {
        const err = this.destroyed ? new WebinferError('WhisperModel.generate: the model was destroyed') : e;
        for (const f of this.inflight.splice(0)) await f.ids.catch(() => undefined);
        for (const r of [...this.active.splice(0), ...this.pending.splice(0)]) {
          r.done = true;
          this.release(r);
          r.finish(err);
        }
      } finally {
        this.pumping = false;
      }
    })();
  }

  /** Drops aborted requests, admits waiting ones and records one step of the shared batch; false when no
   *  request can take a step before the oldest step in flight comes back. */
  private stepOnce(): boolean {
    const op = 'WhisperModel.generate';
    this.alive(op);
    const bs = this.blockSize, nbCross = Math.ceil(this.encoderFrames / bs);
    for (const list of [this.pending, this.active]) {
      for (let i = list.length - 1; i >= 0; i--) {
        const r = list[i];
        if (!r.signal?.aborted) continue;
        list.splice(i, 1);
        r.done = true;
        this.release(r);
        r.finish(new WebinferError(`${op}: aborted`));
      }
    }
    // Admission takes a request's cross blocks and every self block it can need, so a step never runs
    // out. A request that cannot fit the caches even alone is refused once nothing else holds blocks.
    const admitted: Request[] = [];
    while (this.pending.length && this.active.length + admitted.length < this.maxSeqs) {
      const r = this.pending[0];
      const need = Math.ceil((r.prompt.length + r.maxNew) / bs);
      if (this.crossBlocks.available < nbCross || this.selfBlocks.available < need) {
        if (!this.active.length && !admitted.length && !this.inflight.length) {
          this.pending.shift();
          r.finish(new WebinferError(`${op}: the KV caches hold too few blocks for one request (${need} self and ${nbCross} cross blocks of ${bs}; raise kvCache.numBlocks)`));
          continue;
        }
        break;
      }
      this.pending.shift();
      r.selfBlocks = this.selfBlocks.take(need);
      r.crossBlocks = this.crossBlocks.take(nbCross);
      admitted.push(r);
    }
    if (admitted.length) this.admit(admitted);
    this.active.push(...admitted);
    // Every request whose newest token is on the host, or in the previous step's ids on the GPU.
    const prev = this.stepNo - 1;
    const reqs = this.active.filter((r) => r.issued < r.maxNew && (r.out.length === r.issued || r.lastStep === prev));
    if (!reqs.length) return false;
    const feeds = reqs.map((r) => (r.len === 0 ? r.prompt : [r.out.length === r.issued ? r.out[r.out.length - 1] : -(1 + r.lastRow)]));
    const { step, ids } = this.step(reqs, feeds, false);
    // Marked handled now: a step in flight when the model is destroyed is never awaited.
    ids!.catch(() => undefined);
    reqs.forEach((r, s) => {
      r.issued++;
      r.lastStep = step!;
      r.lastRow = s;
    });
    this.decodeStats.steps++;
    this.decodeStats.fromGpu += feeds.filter((f) => f[0] < 0).length;
    this.inflight.push({ step: step!, reqs, ids: ids! });
    return true;
  }

  /** Decoder steps of generate, and the rows whose input was the previous step's id still on the GPU. */
  readonly decodeStats = { steps: 0, fromGpu: 0 };

  /** Waits for the oldest step in flight and hands its tokens to their requests. */
  private async apply(): Promise<void> {
    const f = this.inflight.shift()!;
    const got = new Int32Array(await f.ids);
    for (const [s, r] of f.reqs.entries()) {
      // Ended while this step was in flight (a stop, an abort, a callback's error): its id is dropped.
      if (r.done) continue;
      const t = got[s];
      r.out.push(t);
      if (r.stops.has(t) || r.out.length >= r.maxNew) r.done = true;
      try {
        r.onToken?.(r.index, t);
      } catch (e) {
        r.done = true;
        r.finish(e);
      }
    }
    for (let i = this.active.length - 1; i >= 0; i--) {
      const r = this.active[i];
      if (!r.done) continue;
      this.active.splice(i, 1);
      this.release(r);
      r.finish();
    }
  }

  /** generation_config's suppress_tokens at every step and begin_suppress_tokens at a request's first, as
   *  adjustLogits' edits (−inf added), for the rows of `reqs`; null when there are none. */
  private suppressEdits(reqs: Request[]): Uint32Array<ArrayBuffer> | null {
    const all = this.suppressTokens, first = this.beginSuppressTokens;
    if (!all.length && !first.length) return null;
    const edits: number[] = [];
    const negBits = new Uint32Array(new Float32Array([-Infinity]).buffer)[0];
    const one = new Uint32Array(new Float32Array([1]).buffer)[0];
    reqs.forEach((r, s) => {
      for (const t of r.issued === 0 ? [...all, ...first] : all) edits.push(s, t, one, negBits);
    });
    return edits.length ? Uint32Array.from(edits) : null;
  }

  // ------------------------------------------------------------------------------------------ transcription

  /** A special token's id: generation_config's maps first, then the tokenizer's vocabulary. */
  private special(token: string, fromGen?: unknown): number | undefined {
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

  /**
   * Transcribes 16 kHz mono PCM: windows of chunk_length seconds (the last zero-padded), all decoded
   * together from Whisper's start sequence greedily to <|endoftext|>; text through the tokenizer when
   * the model has one (else empty: the tokens are returned). timestamps: segments from the timestamp
   * tokens, offset by each window's start.
   */
  async transcribe(pcm: Float32Array, o: TranscribeOptions = {}): Promise<{ text: string; tokens: number[]; segments?: TranscriptSegment[] }> {
    const op = 'WhisperModel.transcribe';
    this.alive(op);
    check(pcm instanceof Float32Array, op, 'pcm', 'a Float32Array of 16 kHz mono samples', pcm);
    check(o !== null && typeof o === 'object', op, 'o', '{ language, task, timestamps, signal }', o);
    checkKeys(op, 'o', o, ['language', 'task', 'timestamps', 'signal']);
    const start = this.startSequence(o);
    const feats = await this.logMel(pcm);
    const n = this.featureSize;
    check(this.fe.frames === 2 * this.encoderFrames, op, 'preprocessor config', `windows of ${2 * this.encoderFrames} frames (the encoder's)`, `${this.fe.frames} frames`);
    const windows = feats.length / n;
    const inputs = Array.from({ length: windows }, (_, w) => feats.subarray(w * n, (w + 1) * n));
    const outs = await this.generate(inputs.map(() => start), { encoderInputs: inputs, signal: o.signal });
    const eos = new Set(this.cfg.eos);
    const tokens: number[] = [];
    const segments: TranscriptSegment[] = [];
    const tsBegin = (this.special('<|notimestamps|>', this.genConfig.no_timestamps_token_id) ?? Infinity) + 1;
    const secs = this.melConfig.chunkSamples / this.melConfig.samplingRate;
    const decode = (ids: number[]) => this.tokenizer?.decode(ids.filter((t) => t < tsBegin), { skipSpecialTokens: true }) ?? '';
    outs.forEach((out, w) => {
      const body = out.filter((t) => !eos.has(t));
      tokens.push(...body);
      if (!o.timestamps) return;
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
    return o.timestamps ? { text, tokens, segments } : { text, tokens };
  }

  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    const ws: (LinearWeight | undefined)[] = [this.conv1, this.conv2, this.embed];
    for (const L of this.encLayers) ws.push(L.qkv, L.o, L.fc1, L.fc2);
    for (const L of this.decLayers) ws.push(L.qkv, L.o, L.cq, L.ckv, L.co, L.fc1, L.fc2);
    for (const w of ws) w?.destroy();
    const ts: (Tensor | undefined)[] = [this.encPos, this.decPos];
    const norms = [this.encLn, this.decLn, ...this.encLayers.flatMap((L) => [L.ln1, L.ln2]), ...this.decLayers.flatMap((L) => [L.ln1, L.ln2, L.ln3])];
    for (const n of norms) if (n) ts.push(n.w, n.b);
    for (const t of ts) t?.destroy();
    // Steps in flight: their read-backs reject, and the loop ends their requests as destroyed.
    this.rt.abandonReads(this.reads);
    for (const t of this.sampled) t.destroy();
    this.fe?.destroy();
    this.dc?.destroy();
    this.selfPlan?.destroy();
    this.crossPlan?.destroy();
    this.dropActs();
    this.dropEnc();
    this.encCache?.destroy();
    for (const c of [...this.selfCaches, ...this.crossCaches]) c.destroy();
  }
}

/**
 * Loads a WhisperForConditionalGeneration checkpoint (loadModel dispatches here by architecture).
 * kvCache: blockSize (default 16), numBlocks (the self-attention caches'; default maxSeqsPerStep ×
 * the blocks of max_target_positions; the cross caches hold maxSeqsPerStep encoder outputs).
 * maxSeqsPerStep (default 8): requests decoded together.
 */
export async function loadWhisperModel(rt: Runtime, o: WhisperLoadOptions): Promise<WhisperModel> {
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
  const selfBlocks = kv.numBlocks === undefined ? undefined : checkPosInt(kv.numBlocks, OP, 'o.kvCache.numBlocks');
  // The extractor's settings: preprocessor_config.json, else Whisper's (16 kHz, n_fft 400, hop 160) with
  // windows of the encoder's frames.
  const pre = o.preprocessorConfig ?? { feature_size: cfg.nMels, n_samples: 2 * cfg.maxSource * 160, hop_length: 160, n_fft: 400, sampling_rate: 16000 };
  const mel = parseMelConfig(pre, OP);
  check(mel.nMels === cfg.nMels, OP, 'o.preprocessorConfig.feature_size', `num_mel_bins=${cfg.nMels} (the config's)`, mel.nMels);
  const gen = (o.generationConfig ?? {}) as Record<string, unknown>;
  const model = new WhisperModel(rt, cfg, mel, { blockSize, maxSeqs, genConfig: gen });
  if (Number.isInteger(gen.decoder_start_token_id)) model.cfg.decoderStart = gen.decoder_start_token_id as number;
  const genEos = [gen.eos_token_id].flat().filter((x): x is number => Number.isInteger(x));
  if (genEos.length) model.cfg.eos = [...new Set([...model.cfg.eos, ...genEos])];
  if (o.name !== undefined) check(typeof o.name === 'string' && o.name.length > 0, OP, 'o.name', 'a non-empty string', o.name);
  const nameOrPath = (o.config as Record<string, unknown>)._name_or_path;
  model.id = o.name ?? (typeof nameOrPath === 'string' && nameOrPath ? nameOrPath : ARCH);
  const made: { destroy(): void }[] = [];
  const reader = new WeightReader(files, resolved, o.onProgress, false, undefined, !!o.allowNonFinite);
  try {
    await model.load(reader, dtype, made);
    model.allocate(made, selfBlocks);
    if (o.tokenizer) model.tokenizer = TextTokenizer.create(o.tokenizer, o.tokenizerConfig, o.generationConfig);
  } catch (e) {
    for (const m of made) m.destroy();
    throw e;
  }
  return model;
}
