// T5ForConditionalGeneration (original T5 and flan-T5 style), as transformers computes it: encoder and
// decoder of pre-norm blocks (T5LayerNorm: RMS without mean or bias), attention without q·k scaling and
// with a learned relative position bias (buckets of j - i, bidirectional in the encoder, causal in the
// decoder; owned by each stack's first layer, shared by the others), cross-attention without bias over
// the encoder's output, a ReLU MLP (or gated GELU-tanh for flan-T5's 'gated-gelu'), the decoder output
// scaled by d_model^-0.5 before a tied head (scale_decoder_outputs).
//
// What runs: this module is the forward pass (T5Runner); the layer above (serve/t5.ts) schedules requests
// on the one RequestEngine (serve/engine.ts), batching every caller's. Each attention's projections are
// one linear layer over all heads (self: q|k|v; cross: q, and k|v over the encoder's output; o), and the
// relative bias is one additive mask [1, heads, Lq, Lk] in the dense SDPA kernels. Rows [tokens, heads ×
// d_kv] become SDPA's [heads, tokens, d_kv] and back through the cache write's kernel used as a row
// mover (attention/paged_cache.ts moveHeadRows): a dispatch each way, inside the step's compute pass.
// logits recomputes the decoder over its tokens; a request decodes over a cache of its own (DecoderCache,
// openCache): each layer's self-attention keys and values in SDPA's layout [1, heads, capacity, d_kv]
// (zeroed; the positions past the sequence's length are masked), and its cross-attention keys and values,
// computed once from the encoder's output, so a step runs the decoder over each sequence's new tokens
// only, and a reply costs time linear in its length. A step (decodeStep) batches sequences: the norms,
// projections and MLP run over every sequence's rows at once, the attention per sequence over its own
// cache, all heads in one SDPA. The paged attention kernels have no additive per-head bias, so the
// self-attention cache is not in the engine's paged blocks: it is per-sequence state the engine asks
// for and frees (admitSequence / freeSequence). Until 2026-11-28 each head had linear layers of its own
// and its cache writes were buffer copies, each ending the compute pass: T5-small decoded 30-40 tokens/s
// on an H200 (bench/results/layers-*.md).
import { WebinferError, check, checkKeys, checkPosInt, fail, fmt } from '../core/errors.js';
import type { Runtime } from '../core/runtime.js';
import type { Tensor } from '../core/tensor.js';
import { sdpa } from '../attention/sdpa.js';
import { moveHeadRows, type HeadRows } from '../attention/paged_cache.js';
import { linear, linearWeightBytes, type LinearWeight } from '../ops/gemm.js';
import { embedding } from '../ops/embedding.js';
import { activate, gatedAct } from '../ops/elementwise.js';
import { rmsNorm } from '../ops/norm.js';
import { checkTokenIds } from './step.js';
import { TextTokenizer } from '../text/text.js';
import { isGGUFFile } from './gguf_weights.js';
import type { GGUFFile } from '../formats/gguf.js';
import type { SafetensorsFile } from '../formats/safetensors.js';
import { checkpointDType, WeightReader, type WeightDType } from './weights.js';
import { configBool, configInt, configNumber, resolveEncoderTensors } from './encoder_arch.js';

const OP = 'loadModel';
/** The decoder's rows run in multiples of this (see T5Runner.decode). */
const DEC_ROWS = 16;

export interface T5Config {
  vocabSize: number; dModel: number; dKv: number; numHeads: number; dFf: number;
  encLayers: number; decLayers: number; buckets: number; maxDistance: number; eps: number;
  gated: boolean; act: 'relu' | 'gelu_tanh';
  /** lm_head is shared.weight. */
  tied: boolean;
  /** The decoder output times d_model^-0.5 before the head. */
  scaleOutputs: boolean;
  decoderStart: number;
  eos: number | null;
}

export function parseT5Config(c: Record<string, unknown>): T5Config {
  const ff = c.feed_forward_proj ?? 'relu';
  check(ff === 'relu' || ff === 'gated-gelu', OP, 'config.feed_forward_proj', "'relu' or 'gated-gelu'", fmt(ff));
  const tied = configBool(c, 'tie_word_embeddings', true);
  const eos = c.eos_token_id;
  check(eos === undefined || eos === null || (Number.isInteger(eos) && (eos as number) >= 0), OP, 'config.eos_token_id', 'a token id', fmt(eos));
  const encLayers = configInt(c, 'num_layers');
  const start = c.decoder_start_token_id ?? c.pad_token_id ?? 0;
  check(Number.isInteger(start) && (start as number) >= 0, OP, 'config.decoder_start_token_id', 'a token id', fmt(start));
  return {
    vocabSize: configInt(c, 'vocab_size'), dModel: configInt(c, 'd_model'), dKv: configInt(c, 'd_kv'), numHeads: configInt(c, 'num_heads'),
    dFf: configInt(c, 'd_ff'), encLayers, decLayers: configInt(c, 'num_decoder_layers', encLayers),
    buckets: configInt(c, 'relative_attention_num_buckets', 32), maxDistance: configInt(c, 'relative_attention_max_distance', 128),
    eps: configNumber(c, 'layer_norm_epsilon', 1e-6), gated: ff === 'gated-gelu', act: ff === 'gated-gelu' ? 'gelu_tanh' : 'relu',
    tied, scaleOutputs: configBool(c, 'scale_decoder_outputs', tied), decoderStart: start as number, eos: (eos ?? null) as number | null,
  };
}

/** transformers' _relative_position_bucket of rel = j - i, with its float32 arithmetic. */
export function relativeBucket(rel: number, bidirectional: boolean, numBuckets: number, maxDistance: number): number {
  const f = Math.fround;
  let bucket = 0, n = numBuckets, r: number;
  if (bidirectional) {
    n = Math.floor(n / 2);
    if (rel > 0) bucket += n;
    r = Math.abs(rel);
  } else {
    r = -Math.min(rel, 0);
  }
  const maxExact = Math.floor(n / 2);
  if (r < maxExact) return bucket + r;
  const large = maxExact + Math.trunc(f(f(f(Math.log(f(r / maxExact))) / f(Math.log(maxDistance / maxExact))) * (n - maxExact)));
  return bucket + Math.min(large, n - 1);
}

/** Self-attention's weights over all heads: q|k|v stacked (rows [3 · heads · d_kv, d_model]), and o. */
interface SelfAttention { qkv: LinearWeight; o: LinearWeight }
/** Cross-attention's: q over the decoder's rows, k|v stacked over the encoder's, and o. */
interface CrossAttention { q: LinearWeight; kv: LinearWeight; o: LinearWeight }
interface Block { norms: Tensor[]; self: SelfAttention; cross: CrossAttention | null; wi: LinearWeight; wo: LinearWeight }

/** An additive mask's value for keys a query must not see where a whole tile or partition may be masked
 *  (the decode cache's positions past a sequence's length): finite, so no partition's sum is 0/0. */
const MASKED = -1e30;

/** loadModel's options as T5 reads them (model.ts LoadModelOptions: the same object). */
export interface T5LoadOptions {
  config?: object;
  weights: SafetensorsFile | readonly SafetensorsFile[] | GGUFFile;
  dtype?: string;
  onProgress?: (loadedBytes: number, totalBytes: number) => void;
  tokenizer?: object;
  tokenizerConfig?: object;
  generationConfig?: object;
  name?: string;
  allowNonFinite?: boolean;
  kvCache?: { numBlocks?: number; blockSize?: number; dtype?: unknown };
  maxTokensPerStep?: unknown;
  maxSeqsPerStep?: unknown;
  preprocessorConfig?: unknown;
}

/** Builds the runner (or the layer above's class over it) before its weights load. */
export type MakeT5<M extends T5Runner> = (rt: Runtime, cfg: T5Config, o: T5RunnerOptions) => M;

/** The sizes a runner is built with. */
export interface T5RunnerOptions {
  name: string;
  tokenizer?: TextTokenizer;
  maxSeqs: number;
  maxTokens: number;
  /** The block manager's measure of the tokens held at once (default: maxSeqs sequences of 512 tokens in blocks of 16). */
  numBlocks: number;
  blockSize: number;
}

export async function loadT5With<M extends T5Runner>(rt: Runtime, o: T5LoadOptions, make: MakeT5<M>): Promise<M> {
  rt.assertAlive(OP);
  check(o !== null && typeof o === 'object', OP, 'o', '{ config, weights, dtype?, tokenizer?, ... }', o);
  checkKeys(OP, 'o', o, ['config', 'weights', 'dtype', 'onProgress', 'tokenizer', 'tokenizerConfig', 'generationConfig', 'name', 'allowNonFinite',
    'kvCache', 'maxTokensPerStep', 'maxSeqsPerStep', 'preprocessorConfig']);
  if (o.preprocessorConfig !== undefined) fail(OP, 'o.preprocessorConfig', 'none (a feature extractor belongs to a speech model: WhisperForConditionalGeneration)', 'a preprocessor config');
  const maxSeqs = o.maxSeqsPerStep === undefined ? 8 : checkPosInt(o.maxSeqsPerStep, OP, 'o.maxSeqsPerStep');
  // The blocks the engine measures the sequences' tokens in (each sequence's keys and values are in a
  // cache of its own, sized for its request: the blocks bound how many tokens are held at once).
  const kv = o.kvCache ?? {};
  check(kv !== null && typeof kv === 'object' && !Array.isArray(kv), OP, 'o.kvCache', '{ numBlocks?, blockSize? }', kv);
  checkKeys(OP, 'o.kvCache', kv, ['numBlocks', 'blockSize']);
  const blockSize = kv.blockSize === undefined ? 16 : checkPosInt(kv.blockSize, OP, 'o.kvCache.blockSize');
  const numBlocks = kv.numBlocks === undefined ? maxSeqs * Math.ceil(512 / blockSize) : checkPosInt(kv.numBlocks, OP, 'o.kvCache.numBlocks');
  check(numBlocks * blockSize < 2 ** 31, OP, 'o.kvCache.numBlocks', 'blocks × blockSize below 2^31', numBlocks);
  const maxTokens = o.maxTokensPerStep === undefined ? 512 : checkPosInt(o.maxTokensPerStep, OP, 'o.maxTokensPerStep');
  if (isGGUFFile(o.weights)) fail(OP, 'o.weights', 'safetensors files (T5 is not read from GGUF)', 'a GGUFFile');
  const c = o.config as Record<string, unknown>;
  check(c !== null && typeof c === 'object' && Array.isArray(c.architectures) && c.architectures[0] === 'T5ForConditionalGeneration', OP, 'config.architectures',
    "['T5ForConditionalGeneration']", fmt(c?.architectures));
  const cfg = parseT5Config(c);
  const files = (Array.isArray(o.weights) ? o.weights : [o.weights]) as SafetensorsFile[];
  check(files.length > 0 && files.every((f) => f && f.tensors instanceof Map && typeof f.bytes === 'function'), OP, 'o.weights', 'a SafetensorsFile or an array of them', o.weights);
  const dt = o.dtype ?? 'checkpoint';
  check(['checkpoint', 'f32', 'f16', 'bf16'].includes(dt), OP, 'o.dtype', "'checkpoint', 'f32', 'f16' or 'bf16'", fmt(o.dtype));
  if (o.name !== undefined) check(typeof o.name === 'string' && o.name.length > 0, OP, 'o.name', 'a non-empty string', o.name);
  const tokenizer = o.tokenizer ? TextTokenizer.create(o.tokenizer, o.tokenizerConfig, o.generationConfig as object | undefined) : undefined;
  const model = make(rt, cfg, { name: o.name ?? 'T5ForConditionalGeneration', tokenizer, maxSeqs, maxTokens, numBlocks, blockSize });
  const resolved = resolveEncoderTensors('T5ForConditionalGeneration', model.schema(), '', files);
  const dtype: WeightDType = dt === 'checkpoint' ? checkpointDType(resolved) : dt as WeightDType;
  const reader = new WeightReader(files, resolved, o.onProgress, false, undefined, o.allowNonFinite === true);
  try {
    await rt.allocating(() => model.load(reader, dtype), () => { model.destroy(); reader.destroyLoaded(); },
      (e, oom) => `${OP}: ${oom ? 'the GPU ran out of memory for' : 'the GPU refused an allocation or upload of'} the T5 weights; everything taken is released (${e.message})`);
  } finally {
    await Promise.allSettled(files.map((f) => f.close?.()));
  }
  return model;
}

/** The encoder and decoder's forward pass, over a cache per sequence: what serve/t5.ts schedules. */
export class T5Runner {
  readonly architecture = 'T5ForConditionalGeneration';
  weightBytes = 0;
  readonly id: string;
  readonly tokenizer?: TextTokenizer;
  readonly maxSeqsPerStep: number;
  readonly maxTokensPerStep: number;
  private shared!: LinearWeight;
  private head!: LinearWeight;
  private encBias!: Float32Array;
  private decBias!: Float32Array;
  private encFinal!: Tensor;
  private decFinal!: Tensor;
  private readonly enc: Block[] = [];
  private readonly dec: Block[] = [];
  private readonly owned: { destroy(): void }[] = [];
  private destroyed = false;

  constructor(protected readonly rt: Runtime, readonly cfg: T5Config, o: T5RunnerOptions) {
    this.id = o.name;
    this.tokenizer = o.tokenizer;
    this.maxSeqsPerStep = o.maxSeqs;
    this.maxTokensPerStep = o.maxTokens;
  }

  get vocabSize(): number { return this.cfg.vocabSize; }

  assertAlive(op: string): void {
    if (this.destroyed) throw new WebinferError(`${op}: the model was destroyed`);
    this.rt.assertAlive(op);
  }

  /** The checkpoint's tensors (transformers' names). */
  schema(): { required: Map<string, number[]>; optional: Map<string, number[]>; ignored(n: string): boolean } {
    const c = this.cfg, d = c.dModel, inner = c.numHeads * c.dKv;
    const req = new Map<string, number[]>([['shared.weight', [c.vocabSize, d]], ['encoder.final_layer_norm.weight', [d]], ['decoder.final_layer_norm.weight', [d]]]);
    if (!c.tied) req.set('lm_head.weight', [c.vocabSize, d]);
    const attn = (p: string, bias: boolean) => {
      for (const n of ['q', 'k', 'v']) req.set(`${p}.${n}.weight`, [inner, d]);
      req.set(`${p}.o.weight`, [d, inner]);
      if (bias) req.set(`${p}.relative_attention_bias.weight`, [c.buckets, c.numHeads]);
    };
    const ff = (p: string) => {
      if (c.gated) { req.set(`${p}.DenseReluDense.wi_0.weight`, [c.dFf, d]); req.set(`${p}.DenseReluDense.wi_1.weight`, [c.dFf, d]); } else req.set(`${p}.DenseReluDense.wi.weight`, [c.dFf, d]);
      req.set(`${p}.DenseReluDense.wo.weight`, [d, c.dFf]);
      req.set(`${p}.layer_norm.weight`, [d]);
    };
    for (let i = 0; i < c.encLayers; i++) {
      const p = `encoder.block.${i}.layer.`;
      attn(`${p}0.SelfAttention`, i === 0);
      req.set(`${p}0.layer_norm.weight`, [d]);
      ff(`${p}1`);
    }
    for (let i = 0; i < c.decLayers; i++) {
      const p = `decoder.block.${i}.layer.`;
      attn(`${p}0.SelfAttention`, i === 0);
      req.set(`${p}0.layer_norm.weight`, [d]);
      attn(`${p}1.EncDecAttention`, false);
      req.set(`${p}1.layer_norm.weight`, [d]);
      ff(`${p}2`);
    }
    // Tied copies of shared.weight some checkpoints carry, and the untied head of a tied model.
    const ignored = (n: string) => n === 'encoder.embed_tokens.weight' || n === 'decoder.embed_tokens.weight' || (c.tied && n === 'lm_head.weight');
    return { required: req, optional: new Map(), ignored };
  }

  async load(r: WeightReader, dtype: WeightDType): Promise<void> {
    const c = this.cfg, rt = this.rt;
    const keep = <T extends { destroy(): void }>(x: T): T => { this.owned.push(x); return x; };
    this.shared = await r.linear(rt, ['shared.weight'], dtype);
    this.head = c.tied ? this.shared : await r.linear(rt, ['lm_head.weight'], dtype);
    const lin = async (...names: string[]) => keep(await r.linear(rt, names, dtype));
    const selfAttn = async (p: string): Promise<SelfAttention> => ({ qkv: await lin(`${p}.q.weight`, `${p}.k.weight`, `${p}.v.weight`), o: await lin(`${p}.o.weight`) });
    const crossAttn = async (p: string): Promise<CrossAttention> => ({ q: await lin(`${p}.q.weight`), kv: await lin(`${p}.k.weight`, `${p}.v.weight`), o: await lin(`${p}.o.weight`) });
    const ff = async (p: string) => ({
      wi: c.gated ? await r.linear(rt, [`${p}.DenseReluDense.wi_0.weight`, `${p}.DenseReluDense.wi_1.weight`], dtype) : await r.linear(rt, [`${p}.DenseReluDense.wi.weight`], dtype),
      wo: await r.linear(rt, [`${p}.DenseReluDense.wo.weight`], dtype),
    });
    for (let i = 0; i < c.encLayers; i++) {
      const p = `encoder.block.${i}.layer.`;
      this.enc.push({ norms: [await r.vector(rt, `${p}0.layer_norm.weight`), await r.vector(rt, `${p}1.layer_norm.weight`)], self: await selfAttn(`${p}0.SelfAttention`), cross: null, ...await ff(`${p}1`) });
    }
    for (let i = 0; i < c.decLayers; i++) {
      const p = `decoder.block.${i}.layer.`;
      this.dec.push({
        norms: [await r.vector(rt, `${p}0.layer_norm.weight`), await r.vector(rt, `${p}1.layer_norm.weight`), await r.vector(rt, `${p}2.layer_norm.weight`)],
        self: await selfAttn(`${p}0.SelfAttention`), cross: await crossAttn(`${p}1.EncDecAttention`), ...await ff(`${p}2`),
      });
    }
    this.encFinal = await r.vector(rt, 'encoder.final_layer_norm.weight');
    this.decFinal = await r.vector(rt, 'decoder.final_layer_norm.weight');
    this.encBias = (await r.read('encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight', 'f32')) as Float32Array;
    this.decBias = (await r.read('decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight', 'f32')) as Float32Array;
    let n = linearWeightBytes(this.shared) + (this.head !== this.shared ? linearWeightBytes(this.head) : 0) + this.encFinal.byteLength + this.decFinal.byteLength;
    for (const w of this.owned) n += linearWeightBytes(w as LinearWeight);
    for (const b of [...this.enc, ...this.dec]) n += linearWeightBytes(b.wi) + linearWeightBytes(b.wo) + b.norms.reduce((a, t) => a + t.byteLength, 0);
    this.weightBytes = n + this.encBias.byteLength + this.decBias.byteLength;
  }

  // ------------------------------------------------------------------------------------------ API

  /** The encoder's last hidden state of input ids, [len × d_model]. */
  async encoderStates(encoderInput: readonly number[] | Int32Array | Float32Array): Promise<Float32Array> {
    const ids = this.ids('encoderStates', 'encoderInput', encoderInput);
    const temps: Tensor[] = [];
    try {
      return await this.runEncoder(ids, temps).toFloat32();
    } finally {
      for (const t of temps) t.destroy();
    }
  }

  /** Decoder logits at every position of `tokens` given the encoder input ids, [len × vocab]. */
  async logits(tokens: readonly number[] | Int32Array, o: { encoderInput?: readonly number[] | Int32Array | Float32Array } = {}): Promise<Float32Array> {
    const op = 'logits';
    check(o !== null && typeof o === 'object', op, 'o', '{ encoderInput }', o);
    checkKeys(op, 'o', o, ['encoderInput']);
    const dec = this.ids(op, 'tokens', tokens);
    if (o.encoderInput === undefined) fail(op, 'o.encoderInput', "the encoder's input ids (T5 is an encoder-decoder model)", 'none');
    const enc = this.ids(op, 'o.encoderInput', o.encoderInput);
    const temps: Tensor[] = [];
    try {
      const e = this.runEncoder(enc, temps);
      return (await this.decode(dec, e, enc.length, temps).toFloat32()).slice(0, dec.length * this.cfg.vocabSize);
    } finally {
      for (const t of temps) t.destroy();
    }
  }

  /** Refused: T5 is not an encoder-only model (encoderStates gives its encoder's output). */
  encode(): Promise<never> {
    return Promise.reject(new WebinferError('encode: T5 is an encoder-decoder model: use encoderStates(ids), logits or generate'));
  }

  /** The encoder stack over one input, [len, d_model] (its tensors go to temps). */
  private runEncoder(ids: Int32Array, temps: Tensor[]): Tensor {
    const c = this.cfg, rt = this.rt, L = ids.length;
    const t = (x: Tensor) => { temps.push(x); return x; };
    const h = t(embedding(rt, ids, this.shared));
    const x = t(rt.emptyTensor([L, c.dModel], 'f32'));
    const mask = this.biasMask(this.encBias, L, L, true, temps);
    for (const b of this.enc) {
      rmsNorm(rt, h, b.norms[0], c.eps, { out: x });
      this.selfRows(x, b.self, mask, h, temps);
      rmsNorm(rt, h, b.norms[1], c.eps, { out: x });
      this.ff(x, b, h, temps);
    }
    return rmsNorm(rt, h, this.encFinal, c.eps, { out: x });
  }

  /** Refused: T5 is not an encoder-only model. */
  embed(): Promise<never> {
    return Promise.reject(new WebinferError('embed: T5 is an encoder-decoder model: use encoderStates, logits or generate'));
  }

  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    for (const w of this.owned) w.destroy();
    for (const b of [...this.enc, ...this.dec]) {
      b.wi.destroy();
      b.wo.destroy();
      for (const n of b.norms) n.destroy();
    }
    for (const x of this.sampled) x.destroy();
    for (const x of this.iotas.values()) x.destroy();
    this.sink?.destroy();
    if (this.head !== this.shared) this.head?.destroy();
    this.shared?.destroy();
    this.encFinal?.destroy();
    this.decFinal?.destroy();
  }

  // -------------------------------------------------------------------------------------- forward

  protected ids(op: string, arg: string, x: unknown): Int32Array {
    if (this.destroyed) throw new WebinferError(`${op}: the model was destroyed`);
    this.rt.assertAlive(op);
    return checkTokenIds(op, arg, x instanceof Float32Array ? Array.from(x) : x, this.cfg.vocabSize);
  }

  /**
   * The heads' relative position bias as one additive mask [1, heads, Lq, Lk] (the decoder's causal
   * too); the queries are positions q0 ... q0 + Lq - 1, the keys 0 ... Lk - 1, of which the first `valid`
   * hold keys (the rest masked with MASKED: a decode cache's unwritten positions).
   */
  private biasMask(table: Float32Array, Lq: number, Lk: number, bidirectional: boolean, temps: Tensor[], q0 = 0, valid = Lk): Tensor {
    const c = this.cfg, H = c.numHeads;
    const m = new Float32Array(H * Lq * Lk);
    // Each rel = j - (q0 + i)'s bucket once, rel from lo = -(q0 + Lq - 1) to Lk - 1 - q0.
    const lo = -(q0 + Lq - 1), buckets = new Int32Array(Lq + Lk - 1);
    for (let r = 0; r < buckets.length; r++) buckets[r] = relativeBucket(lo + r, bidirectional, c.buckets, c.maxDistance);
    for (let hh = 0; hh < H; hh++) {
      for (let i = 0; i < Lq; i++) {
        const row = (hh * Lq + i) * Lk;
        for (let j = 0; j < Lk; j++) {
          const rel = j - (q0 + i);
          m[row + j] = j >= valid ? MASKED : !bidirectional && rel > 0 ? -Infinity : table[buckets[rel - lo] * H + hh];
        }
      }
    }
    const t = this.rt.tensor(m, [1, H, Lq, Lk], 'f32');
    temps.push(t);
    return t;
  }

  /** An i32 tensor 0 ... n-1, kept (moveHeadRows' slots for a whole transpose). */
  private iota(n: number): Tensor {
    let t = this.iotas.get(n);
    if (!t) this.iotas.set(n, t = this.rt.tensor(Int32Array.from({ length: n }, (_, i) => i), [n], 'i32'));
    return t;
  }

  private readonly iotas = new Map<number, Tensor>();
  private sink: Tensor | null = null;

  /** moveHeadRows with the model's sink. */
  private move(T: number, heads: number, D: number, bs: number, slots: Tensor, a: HeadRows, b: HeadRows | null = null): void {
    this.sink ??= this.rt.zeros([1], 'f32');
    moveHeadRows(this.rt, T, heads, D, bs, slots, a, b, this.sink);
  }

  /** Rows k|v of n tokens (k at off, v at off + heads·d_kv of each row of src) as SDPA's [1, heads, n, d_kv] each. */
  private kvHeads(src: Tensor, off: number, stride: number, n: number, temps: Tensor[]): { k: Tensor; v: Tensor } {
    const c = this.cfg, D = c.dKv, H = c.numHeads;
    const k = this.rt.emptyTensor([1, H, n, D], 'f32'), v = this.rt.emptyTensor([1, H, n, D], 'f32');
    temps.push(k, v);
    this.move(n, H, D, n, this.iota(n), { src, off, stride, dst: k }, { src, off: off + H * D, stride, dst: v });
    return { k, v };
  }

  /**
   * SDPA of the n query rows q (token t's heads at q.off + t·q.stride) over keys/values in SDPA's layout
   * [1, heads, Lk, d_kv], with an additive mask [1, heads, n, Lk] or none: the output as rows [n, heads·d_kv].
   */
  private attendRows(n: number, q: { src: Tensor; off: number; stride: number }, k: Tensor, v: Tensor, Lk: number, mask: Tensor | null, temps: Tensor[]): Tensor {
    const rt = this.rt, D = this.cfg.dKv, H = this.cfg.numHeads;
    const qh = rt.emptyTensor([1, H, n, D], 'f32');
    temps.push(qh);
    this.move(n, H, D, n, this.iota(n), { ...q, dst: qh });
    const out = sdpa(rt, 'T5 attention', qh, k.view([1, H, Lk, D]), v.view([1, H, Lk, D]), { scale: 1, causal: false, ...(mask ? { mask } : {}) }, false).out;
    temps.push(out);
    if (n === 1) return out.view([1, H * D]);
    // [heads, n, d_kv] back to rows: tokens and heads change roles.
    const rows = rt.emptyTensor([n, H * D], 'f32');
    temps.push(rows);
    this.move(H, n, D, H, this.iota(H), { src: out, off: 0, stride: n * D, dst: rows });
    return rows;
  }

  /** h += self-attention of the rows x (all of them one sequence) under `mask`. */
  private selfRows(x: Tensor, a: SelfAttention, mask: Tensor, h: Tensor, temps: Tensor[]): void {
    const rt = this.rt, L = x.shape[0], HD = this.cfg.numHeads * this.cfg.dKv;
    const qkv = linear(rt, x, a.qkv);
    temps.push(qkv);
    const { k, v } = this.kvHeads(qkv, HD, 3 * HD, L, temps);
    linear(rt, this.attendRows(L, { src: qkv, off: 0, stride: 3 * HD }, k, v, L, mask, temps), a.o, { out: h, accumulate: true });
  }

  private ff(x: Tensor, b: Block, h: Tensor, temps: Tensor[]): void {
    const rt = this.rt, c = this.cfg;
    const mid = linear(rt, x, b.wi);
    temps.push(mid);
    let act = mid;
    if (c.gated) {
      act = gatedAct(rt, mid, c.dFf, 'gelu_tanh');
      temps.push(act);
    } else {
      activate(rt, mid, 'relu', { out: mid });
    }
    linear(rt, act, b.wo, { out: h, accumulate: true });
  }

  /**
   * The decoder over `tokens` and the encoder output, recomputed whole: logits of its rows, [>= len,
   * vocab]. The rows run padded to a multiple of DEC_ROWS (pad id 0 after the tokens): the decoder is
   * causal, so no padded row reaches a real one, and calls of nearby lengths share their products' row
   * count (and pipelines).
   */
  private decode(tokens: Int32Array, enc: Tensor, encLen: number, temps: Tensor[]): Tensor {
    const c = this.cfg, rt = this.rt, n = tokens.length, L = Math.ceil(n / DEC_ROWS) * DEC_ROWS;
    const t = (x: Tensor) => { temps.push(x); return x; };
    const padded = new Int32Array(L);
    padded.set(tokens);
    const h = t(embedding(rt, padded, this.shared));
    const x = t(rt.emptyTensor([L, c.dModel], 'f32'));
    const mask = this.biasMask(this.decBias, L, L, false, temps);
    const e = enc.view([encLen, c.dModel]), HD = c.numHeads * c.dKv;
    for (const b of this.dec) {
      rmsNorm(rt, h, b.norms[0], c.eps, { out: x });
      this.selfRows(x, b.self, mask, h, temps);
      rmsNorm(rt, h, b.norms[1], c.eps, { out: x });
      const { k, v } = this.kvHeads(t(linear(rt, e, b.cross!.kv)), 0, 2 * HD, encLen, temps);
      const q = t(linear(rt, x, b.cross!.q));
      linear(rt, this.attendRows(L, { src: q, off: 0, stride: HD }, k, v, encLen, null, temps), b.cross!.o, { out: h, accumulate: true });
      rmsNorm(rt, h, b.norms[2], c.eps, { out: x });
      this.ff(x, b, h, temps);
    }
    rmsNorm(rt, h, this.decFinal, c.eps, { out: x });
    if (c.scaleOutputs) activate(rt, x, 'none', { out: x, scale: Math.fround(c.dModel ** -0.5) });
    return t(linear(rt, x, this.head));
  }

  /**
   * A sequence's decoder cache for `capacity` positions over the encoder's output of `encIds`: the
   * cross-attention keys and values of every layer and head, computed here once, and room for the
   * self-attention ones. closeCache frees it.
   */
  protected openCache(encIds: Int32Array, capacity: number): DecoderCache {
    const c = this.cfg, rt = this.rt, D = c.dKv, H = c.numHeads, E = encIds.length;
    const temps: Tensor[] = [];
    const enc: Tensor[] = [];
    const t = (x: Tensor) => { temps.push(x); return x; };
    try {
      const e = this.runEncoder(encIds, enc).view([E, c.dModel]);
      return {
        // Zeroed: the positions not yet written are masked, and a masked zero adds nothing (no NaN of a pooled buffer's bytes).
        self: this.dec.map(() => ({ k: t(rt.zeros([1, H, capacity, D], 'f32')), v: t(rt.zeros([1, H, capacity, D], 'f32')) })),
        cross: this.dec.map((b) => {
          const kv = linear(rt, e, b.cross!.kv);
          enc.push(kv);
          const k = t(rt.emptyTensor([1, H, E, D], 'f32')), v = t(rt.emptyTensor([1, H, E, D], 'f32'));
          this.move(E, H, D, E, this.iota(E), { src: kv, off: 0, stride: 2 * H * D, dst: k }, { src: kv, off: H * D, stride: 2 * H * D, dst: v });
          return { k, v };
        }),
        capacity,
        encLen: E,
        len: 0,
        temps,
      };
    } catch (err) {
      for (const x of temps) x.destroy();
      throw err;
    } finally {
      // The encoder's own tensors go back to the pool (its work is queued before whatever reuses them).
      for (const x of enc) x.destroy();
    }
  }

  /**
   * The sampled ids of decoder step `step` (out: its argmax or draws go there) and of the step before
   * (prev: what its negative ids read). Two slots are enough however many steps are in flight: each
   * step's ids are copied for the host as it is submitted, before the step after next writes its slot.
   */
  protected ring(step: number): { prev: Tensor; out: Tensor } {
    if (!this.sampled.length) for (let i = 0; i < 2; i++) this.sampled.push(this.rt.zeros([this.maxSeqsPerStep], 'i32'));
    return { prev: this.sampled[(step + 1) % 2], out: this.sampled[step % 2] };
  }

  private readonly sampled: Tensor[] = [];

  protected closeCache(cache: DecoderCache): void {
    for (const x of cache.temps.splice(0)) x.destroy();
  }

  /**
   * One decoder step over several sequences: items[i].tokens are the positions after its cache's, their
   * keys and values join its cache, and the logits of the last token of every item that samples come
   * back, [R, vocab] in item order (null: none samples). The norms, projections and MLP run over every
   * item's rows at once; the attention per item over its own cache, all heads in one SDPA over the
   * cache's capacity (positions past the item's last masked), its rows then placed among the step's (its
   * tensors go to temps).
   */
  protected decodeStep(items: readonly { cache: DecoderCache; tokens: Int32Array; sample: boolean }[], temps: Tensor[], step = 0): Tensor | null {
    const c = this.cfg, rt = this.rt, D = c.dKv, H = c.numHeads, HD = H * D;
    const t = (x: Tensor) => { temps.push(x); return x; };
    const T = items.reduce((a, it) => a + it.tokens.length, 0);
    const ids = new Int32Array(T), starts: number[] = [], gather: number[] = [];
    let at = 0;
    for (const it of items) {
      const n = it.tokens.length, cap = it.cache.capacity;
      check(it.cache.len + n <= cap, 'T5 decode step', 'tokens', `at most ${cap} positions (the sequence's cache)`, it.cache.len + n);
      ids.set(it.tokens, at);
      starts.push(at);
      at += n;
      if (it.sample) gather.push(at - 1);
    }
    // Ids -(1 + r) are row r of the previous step's sampled ids, read on the GPU (shaders/models/step.wgsl).
    const idsIn = t(rt.tensor(ids, [T], 'i32')), idsT = t(rt.emptyTensor([T], 'i32'));
    rt.dispatch(rt.kernel('model_step', 'ids_main'), { ids_in: idsIn, prev: this.ring(step).prev, ids_out: idsT }, { rows: T, prev_rows: this.maxSeqsPerStep }, Math.ceil(T / 64));
    const h = t(embedding(rt, idsT, this.shared));
    const x = t(rt.emptyTensor([T, c.dModel], 'f32'));
    // Per item: its positions in its cache, its rows among the step's, its bias over its cache.
    const single = items.length === 1;
    const at0 = (n: number, from: number) => t(rt.tensor(Int32Array.from({ length: n }, (_, j) => from + j), [n], 'i32'));
    const cacheSlots = items.map((it) => at0(it.tokens.length, it.cache.len));
    const rowSlots = single ? [] : items.map((it, i) => at0(it.tokens.length, starts[i]));
    const masks = items.map((it) => this.biasMask(this.decBias, it.tokens.length, it.cache.capacity, false, temps, it.cache.len, it.cache.len + it.tokens.length));
    // The attention of every item (q: its rows' heads in src at off + t·stride) as the step's rows [T, heads·d_kv].
    const attendAll = (src: Tensor, stride: number, qOff: number, kv: (i: number) => { k: Tensor; v: Tensor; Lk: number; mask: Tensor | null }): Tensor => {
      if (single) {
        const a = kv(0);
        return this.attendRows(T, { src, off: qOff, stride }, a.k, a.v, a.Lk, a.mask, temps);
      }
      const o = t(rt.emptyTensor([T, HD], 'f32'));
      items.forEach((it, i) => {
        const n = it.tokens.length, a = kv(i);
        const rows = this.attendRows(n, { src, off: qOff + starts[i] * stride, stride }, a.k, a.v, a.Lk, a.mask, temps);
        this.move(n, 1, HD, T, rowSlots[i], { src: rows, off: 0, stride: HD, dst: o });
      });
      return o;
    };
    for (const [l, b] of this.dec.entries()) {
      rmsNorm(rt, h, b.norms[0], c.eps, { out: x });
      const qkv = t(linear(rt, x, b.self.qkv));
      items.forEach((it, i) => {
        const kv = it.cache.self[l], off = starts[i] * 3 * HD;
        this.move(it.tokens.length, H, D, it.cache.capacity, cacheSlots[i], { src: qkv, off: off + HD, stride: 3 * HD, dst: kv.k }, { src: qkv, off: off + 2 * HD, stride: 3 * HD, dst: kv.v });
      });
      const self = attendAll(qkv, 3 * HD, 0, (i) => ({ ...items[i].cache.self[l], Lk: items[i].cache.capacity, mask: masks[i] }));
      linear(rt, self, b.self.o, { out: h, accumulate: true });
      rmsNorm(rt, h, b.norms[1], c.eps, { out: x });
      const q = t(linear(rt, x, b.cross!.q));
      const cross = attendAll(q, HD, 0, (i) => ({ ...items[i].cache.cross[l], Lk: items[i].cache.encLen, mask: null }));
      linear(rt, cross, b.cross!.o, { out: h, accumulate: true });
      rmsNorm(rt, h, b.norms[2], c.eps, { out: x });
      this.ff(x, b, h, temps);
    }
    for (const it of items) it.cache.len += it.tokens.length;
    if (!gather.length) return null;
    rmsNorm(rt, h, this.decFinal, c.eps, { out: x });
    if (c.scaleOutputs) activate(rt, x, 'none', { out: x, scale: Math.fround(c.dModel ** -0.5) });
    const rows = t(rt.tensor(Int32Array.from(gather), [gather.length], 'i32'));
    return t(linear(rt, x, this.head, { gatherRows: rows, rows: gather.length }));
  }
}

/** One sequence's decoder keys and values, per decoder layer and head ([positions, d_kv] each, f32). */
export interface DecoderCache {
  /** Per decoder layer, in SDPA's layout [1, heads, capacity, d_kv] (self) and [1, heads, encLen, d_kv] (cross). */
  self: { k: Tensor; v: Tensor }[];
  cross: { k: Tensor; v: Tensor }[];
  capacity: number;
  encLen: number;
  /** Positions cached so far. */
  len: number;
  /** Its tensors (closeCache frees them). */
  temps: Tensor[];
}

