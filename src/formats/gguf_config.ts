// The HF config.json a GGUF file's metadata stands for: llama.cpp's convert_hf_to_gguf.py read
// backwards for the architectures the engine runs (GGUF `llama`: Llama and Mistral; `qwen2`; `qwen3`;
// `qwen3moe`; `smollm3`; `phi3`: Phi-3 and Phi-4-mini; `deepseek2`: DeepSeek V2 and V3; `gpt-oss`; `gemma3`: Gemma 3 text,
// with what llama.cpp fixes for it rather than reads from the file; `lfm2`). The result is what parseConfig (models/config.ts) reads, so a GGUF model
// goes through the same validation and defaults as a Hub checkpoint. Where a key is absent the
// default is llama.cpp's (rope.freq_base 10000, head_count_kv = head_count, softmax expert gating
// for DeepSeek V2 files older than expert_gating_func ...).

import { check, fail, fmt } from '../core/errors.js';

const OP = 'ggufConfig';

/** GGUF `general.architecture` values this module maps, and the HF class each becomes. */
export const GGUF_ARCHITECTURES = Object.freeze(['llama', 'qwen2', 'qwen3', 'qwen3moe', 'smollm3', 'phi3', 'deepseek2', 'gpt-oss', 'gemma3', 'lfm2'] as const);
export type GGUFArchitecture = (typeof GGUF_ARCHITECTURES)[number];

/** llama.cpp's llama_expert_gating_func_type. */
const GATING_SOFTMAX = 1;
const GATING_SIGMOID = 2;

/** llama.cpp's llama_ftype values that say what the unquantized tensors were. */
const FILE_TYPE_DTYPE: Readonly<Record<number, string>> = { 0: 'float32', 1: 'float16', 32: 'bfloat16' };

type Meta = ReadonlyMap<string, unknown>;

/**
 * The shortest decimal that rounds to the same float32: GGUF stores floats as f32, HF configs hold the
 * decimal the f32 came from (1e-5, not 9.999999747378752e-6).
 */
export function f32Decimal(x: number): number {
  if (!Number.isFinite(x) || Math.fround(x) !== x) return x;
  for (let p = 1; p <= 9; p++) {
    const d = Number(x.toPrecision(p));
    if (Math.fround(d) === x) return d;
  }
  return x;
}

class MetaReader {
  constructor(
    private readonly m: Meta,
    private readonly arch: string,
    readonly name: string,
  ) {}

  /** `<file> metadata '<key>'`, for messages. */
  where(key: string): string {
    return `${this.name} metadata '${key}'`;
  }

  /** `<arch>.` + key. */
  key(k: string): string {
    return `${this.arch}.${k}`;
  }

  has(k: string): boolean {
    return this.m.has(this.key(k));
  }

  raw(k: string): unknown {
    return this.m.get(this.key(k));
  }

  /** A positive integer (an array of equal ones, as some files store per-layer values, counts too). */
  posInt(k: string, def?: number): number {
    let v = this.raw(k);
    if (Array.isArray(v) && v.length > 0) {
      const first: unknown = v[0];
      if (v.every((x) => x === first)) v = first;
    }
    if (v === undefined && def !== undefined) return def;
    check(typeof v === 'number' && Number.isInteger(v) && v > 0, OP, this.where(this.key(k)), def === undefined ? 'a positive integer (required)' : 'a positive integer (the same for every layer)', v);
    return v as number;
  }

  nonNegInt(k: string, def: number): number {
    const v = this.raw(k) ?? def;
    check(typeof v === 'number' && Number.isInteger(v) && v >= 0, OP, this.where(this.key(k)), 'a non-negative integer', v);
    return v as number;
  }

  optPosInt(k: string): number | undefined {
    return this.has(k) ? this.posInt(k) : undefined;
  }

  num(k: string, def?: number): number {
    const v = this.raw(k) ?? def;
    check(typeof v === 'number' && Number.isFinite(v), OP, this.where(this.key(k)), def === undefined ? 'a number (required)' : 'a number', v);
    return f32Decimal(v as number);
  }

  optNum(k: string): number | undefined {
    return this.has(k) ? this.num(k) : undefined;
  }

  bool(k: string, def: boolean): boolean {
    const v = this.raw(k) ?? def;
    check(typeof v === 'boolean', OP, this.where(this.key(k)), 'true or false', v);
    return v as boolean;
  }

  str(k: string): string | undefined {
    const v = this.raw(k);
    if (v === undefined) return undefined;
    check(typeof v === 'string', OP, this.where(this.key(k)), 'a string', v);
    return v as string;
  }

  /** A global (non-<arch>) token id key, or undefined. */
  tokenId(key: string): number | undefined {
    const v = this.m.get(key);
    if (v === undefined) return undefined;
    check(typeof v === 'number' && Number.isInteger(v) && v >= 0, OP, this.where(key), 'a token id', v);
    return v as number;
  }
}

/** Tensor info as gguf.ts lists it (only `shape` is read here). */
type Tensors = ReadonlyMap<string, { type: string; shape: number[] }>;

/**
 * Llama 3's RoPE scaling from the `rope_freqs.weight` factors convert_hf_to_gguf.py writes for it (the
 * GGUF has no llama3 rope keys). A factor r_i divides frequency i: 1 above the high-frequency cutoff,
 * `factor` below the low one, and 1/((1 - s)/factor + s) between, with s linear in the frequency:
 * s = old_ctx·freq/(2π·(high - low)) - low/(high - low). Only that line matters, so low_freq_factor = 1
 * loses nothing; the line comes from the factors, and the result is checked against every one.
 */
export function llama3RopeFromFactors(factors: Float32Array, theta: number, rotaryDim: number, where = 'rope_freqs.weight'): object | null {
  const n = rotaryDim / 2;
  check(factors.length === n, OP, where, `${n} factors (rotary dim ${rotaryDim} / 2)`, factors.length);
  const freqs = Array.from({ length: n }, (_, i) => Math.pow(theta, (-2 * i) / rotaryDim));
  let factor = 0;
  for (const r of factors) factor = Math.max(factor, r);
  check(factors.every((r) => r >= 1 - 1e-6 && Number.isFinite(r)), OP, where, 'frequency divisors of at least 1', `values from ${Math.min(...factors)}`);
  if (factor <= 1 + 1e-6) return null;
  const tol = 1e-5 * factor;
  const smooth: { freq: number; s: number }[] = [];
  let loEdge = -Infinity; // highest frequency still divided by the full factor
  let hiEdge = Infinity; // lowest frequency left alone
  factors.forEach((r, i) => {
    const freq = freqs[i]!;
    if (Math.abs(r - factor) <= tol) loEdge = Math.max(loEdge, freq);
    else if (Math.abs(r - 1) <= tol) hiEdge = Math.min(hiEdge, freq);
    else smooth.push({ freq, s: (1 / r - 1 / factor) / (1 - 1 / factor) });
  });
  const bad = (why: string): never => fail(OP, where, 'llama3 RoPE scaling factors (as convert_hf_to_gguf.py writes them)', why);
  const expected = (high: number, orig: number) =>
    freqs.map((freq) => {
      const wavelen = (2 * Math.PI) / freq;
      if (wavelen < orig / high) return 1;
      if (wavelen > orig) return factor; // low_freq_factor 1: the low-frequency wavelength is orig
      const s = (orig / wavelen - 1) / (high - 1);
      return 1 / ((1 - s) / factor + s);
    });
  const fits = (high: number, orig: number) => high > 1 && orig > 0 && expected(high, orig).every((r, i) => Math.abs(r - factors[i]!) <= tol);
  // With low = 1, s = (orig·freq/2π - 1)/(high - 1): the original context is an integer and configs
  // use round ones, which pins the line down where the band holds fewer than two frequencies.
  const ROUND = [8192, 4096, 16384, 2048, 32768, 65536, 131072, 1024, 512, 256];
  smooth.sort((x, y) => x.freq - y.freq);
  let origs: number[];
  let highs: (orig: number) => number[];
  const nice = (h: number) => [Number(h.toPrecision(4)), h];
  if (smooth.length >= 2) {
    // Two points fix the line.
    const [p0, p1] = [smooth[0]!, smooth[smooth.length - 1]!];
    const a = (p1.s - p0.s) / (p1.freq - p0.freq);
    const b = p0.s - a * p0.freq;
    if (!(a > 0 && b < 0)) bad('factors that do not fall from the low to the high frequencies');
    origs = [Math.round((-2 * Math.PI * a) / b)];
    highs = () => nice(1 - 1 / b);
  } else if (smooth.length === 1) {
    // A line through the one point, for a given original context.
    const p = smooth[0]!;
    origs = ROUND;
    highs = (orig) => {
      const a = (orig * p.s) / (orig * p.freq - 2 * Math.PI);
      return nice(1 - 1 / (p.s - a * p.freq));
    };
  } else {
    // No frequency in the band: it may sit anywhere between the last full-factor and first untouched one.
    if (!Number.isFinite(loEdge) || !Number.isFinite(hiEdge)) bad('too few distinct factors to place the transition band');
    origs = [...ROUND, Math.floor((2 * Math.PI) / loEdge)];
    highs = (orig) => {
      const max = (orig * hiEdge) / (2 * Math.PI);
      return [4, Math.floor(max * 1000) / 1000].filter((h) => h <= max);
    };
  }
  let hit: [number, number] | undefined;
  for (const orig of origs) {
    const h = highs(orig).find((x) => fits(x, orig));
    if (h !== undefined) {
      hit = [h, orig];
      break;
    }
  }
  if (!hit) bad('factors that no llama3 (factor, low/high frequency factor, original context) reproduces');
  return {
    rope_type: 'llama3',
    factor: f32Decimal(Math.fround(factor)),
    low_freq_factor: 1,
    high_freq_factor: hit![0],
    original_max_position_embeddings: hit![1],
  };
}

/** rope_scaling from `<arch>.rope.scaling.*` (and the older `rope.scale_linear`), or null. */
function ropeScaling(r: MetaReader, maxPos: number): object | null {
  const type = r.str('rope.scaling.type');
  if (type === undefined) {
    const linear = r.optNum('rope.scale_linear');
    return linear !== undefined && linear !== 1 ? { rope_type: 'linear', factor: linear } : null;
  }
  if (type === 'none') return null;
  const factor = r.num('rope.scaling.factor');
  if (type === 'linear') return { rope_type: 'linear', factor };
  if (type === 'yarn') {
    const out: Record<string, number | string> = {
      rope_type: 'yarn',
      factor,
      original_max_position_embeddings: r.posInt('rope.scaling.original_context_length', maxPos),
    };
    const betaFast = r.optNum('rope.scaling.yarn_beta_fast');
    const betaSlow = r.optNum('rope.scaling.yarn_beta_slow');
    const attn = r.optNum('rope.scaling.yarn_attn_factor');
    if (betaFast !== undefined) out.beta_fast = betaFast;
    if (betaSlow !== undefined) out.beta_slow = betaSlow;
    if (attn !== undefined) out.attention_factor = attn;
    return out;
  }
  fail(OP, r.where(r.key('rope.scaling.type')), "'none', 'linear' or 'yarn'", type);
}

function tokenCount(m: Meta): number | undefined {
  const t = m.get('tokenizer.ggml.tokens');
  return Array.isArray(t) ? t.length : undefined;
}

/** The HF class and model_type of the dense and Qwen3-MoE architectures. */
const HF_CLASS: Readonly<Record<string, readonly [string, string]>> = {
  llama: ['LlamaForCausalLM', 'llama'], qwen2: ['Qwen2ForCausalLM', 'qwen2'], qwen3: ['Qwen3ForCausalLM', 'qwen3'],
  qwen3moe: ['Qwen3MoeForCausalLM', 'qwen3_moe'], smollm3: ['SmolLM3ForCausalLM', 'smollm3'], phi3: ['Phi3ForCausalLM', 'phi3'],
  gemma3: ['Gemma3ForCausalLM', 'gemma3_text'],
};

export interface GGUFConfigOptions {
  /** The F32 values of `rope_freqs.weight` when the file has one (Llama 3.1+ RoPE scaling). */
  ropeFreqs?: Float32Array;
  /** Phi-3's LongRoPE factors (`rope_factors_long.weight`, `rope_factors_short.weight`) when the file has them. */
  ropeFactors?: { long?: Float32Array; short?: Float32Array };
  /** The file's name, for messages. */
  name?: string;
}

/**
 * The HF config.json equivalent of a GGUF file's metadata and tensor index. Throws naming the file
 * and key when a required key is missing or the architecture is not one the engine runs.
 */
export function ggufConfig(metadata: Meta, tensors: Tensors, o: GGUFConfigOptions = {}): object {
  const name = o.name ?? 'gguf';
  const arch = metadata.get('general.architecture');
  check(
    typeof arch === 'string' && (GGUF_ARCHITECTURES as readonly string[]).includes(arch),
    OP,
    `${name} metadata 'general.architecture'`,
    `one of ${GGUF_ARCHITECTURES.join(', ')} (the architectures supported)`,
    arch === undefined ? 'no such key' : typeof arch === 'string' ? fmt(arch) : arch,
  );
  const r = new MetaReader(metadata, arch, name);

  const hidden = r.posInt('embedding_length');
  const numLayers = r.posInt('block_count');
  const numHeads = r.posInt('attention.head_count');
  const maxPos = r.posInt('context_length');
  const embd = tensors.get('token_embd.weight');
  const vocabSize = r.optPosInt('vocab_size') ?? tokenCount(metadata) ?? embd?.shape[1];
  check(vocabSize !== undefined, OP, r.where(r.key('vocab_size')), 'a vocabulary size (or tokenizer.ggml.tokens, or token_embd.weight)', 'none of them');
  const bos = r.tokenId('tokenizer.ggml.bos_token_id');
  // Generation stops at any end-of-generation token llama.cpp knows: eos, and eot/eom where distinct.
  const eos = [...new Set(['eos', 'eot', 'eom'].map((k) => r.tokenId(`tokenizer.ggml.${k}_token_id`)).filter((x): x is number => x !== undefined))];
  const fileType = metadata.get('general.file_type');
  const dtype = typeof fileType === 'number' ? FILE_TYPE_DTYPE[fileType] : undefined;

  const common: Record<string, unknown> = {
    hidden_size: hidden,
    num_hidden_layers: numLayers,
    num_attention_heads: numHeads,
    max_position_embeddings: maxPos,
    vocab_size: vocabSize,
    rms_norm_eps: r.num('attention.layer_norm_rms_epsilon'),
    rope_theta: r.num('rope.freq_base', 10000),
    hidden_act: 'silu',
    tie_word_embeddings: !tensors.has('output.weight'),
  };
  if (bos !== undefined) common.bos_token_id = bos;
  if (eos.length) common.eos_token_id = eos.length === 1 ? eos[0] : eos;
  if (dtype) common.torch_dtype = dtype;

  if (arch === 'deepseek2') return { ...deepseekConfig(r, tensors, maxPos, numHeads), ...common };
  if (arch === 'gpt-oss') return { ...common, ...gptOssConfig(r, tensors, maxPos, numHeads, hidden, numLayers) };
  if (arch === 'lfm2') return lfm2Config(r, common, numLayers, numHeads, hidden);

  // Mixtral-style models are `llama` with experts: not a model the llama family here runs.
  const experts = r.raw('expert_count');
  if (arch !== 'qwen3moe') check(experts === undefined || experts === 0, OP, r.where(r.key('expert_count')), `none (a dense ${arch} model; mixture-of-experts ${arch} is not supported)`, experts);
  const numKv = r.posInt('attention.head_count_kv', numHeads);
  const headDim = r.posInt('attention.key_length', Math.floor(hidden / numHeads));
  const vDim = r.posInt('attention.value_length', headDim);
  check(vDim === headDim, OP, r.where(r.key('attention.value_length')), `${headDim} (the key length: ${arch} uses one head_dim)`, vDim);
  const rotary = r.posInt('rope.dimension_count', headDim);
  let ropeScalingValue = ropeScaling(r, maxPos);
  if (arch === 'phi3' && o.ropeFactors) {
    check(ropeScalingValue === null, OP, `${name} tensor 'rope_factors_long.weight'`, `no ${r.key('rope.scaling.type')} alongside it`, 'both');
    ropeScalingValue = phi3LongRope(r, o.ropeFactors, rotary, common.rope_theta as number);
  } else if (o.ropeFactors) {
    fail(OP, `${name} tensor 'rope_factors_long.weight'`, `none in a ${arch} file (LongRoPE factors belong to phi3)`, 'present');
  }
  if (o.ropeFreqs) {
    check(ropeScalingValue === null, OP, `${name} tensor 'rope_freqs.weight'`, `no ${r.key('rope.scaling.type')} alongside it`, 'both');
    ropeScalingValue = llama3RopeFromFactors(o.ropeFreqs, common.rope_theta as number, rotary, `${name} tensor 'rope_freqs.weight'`);
  }
  const cfg: Record<string, unknown> = {
    architectures: [HF_CLASS[arch]![0]],
    model_type: HF_CLASS[arch]![1],
    intermediate_size: r.posInt('feed_forward_length'),
    num_key_value_heads: numKv,
    head_dim: headDim,
    rope_scaling: ropeScalingValue,
    ...common,
  };
  // parseConfig refuses partial rotary embeddings with its own message.
  if (rotary !== headDim) cfg.partial_rotary_factor = rotary / headDim;
  if (arch === 'gemma3') return { ...cfg, ...gemma3Config(r, numLayers, hidden, numHeads, headDim) };
  if (arch === 'llama' || arch === 'smollm3') {
    cfg.attention_bias = tensors.has('blk.0.attn_q.bias') || tensors.has('blk.0.attn_output.bias');
    cfg.mlp_bias = tensors.has('blk.0.ffn_up.bias');
  } else if (arch === 'qwen3' || arch === 'qwen3moe') {
    cfg.attention_bias = tensors.has('blk.0.attn_q.bias');
  }
  if (arch === 'smollm3') {
    // llama.cpp has no key for SmolLM3's NoPE layers: every 4th layer skips RoPE (its hparams.n_no_rope_layer_step).
    cfg.no_rope_layer_interval = 4;
    cfg.no_rope_layers = Array.from({ length: numLayers }, (_, i) => ((i + 1) % 4 === 0 ? 0 : 1));
  }
  if (arch === 'phi3') {
    const window = r.optPosInt('attention.sliding_window');
    if (window !== undefined) cfg.sliding_window = window;
  }
  if (arch === 'qwen3moe') Object.assign(cfg, qwen3MoeConfig(r, tensors, numLayers));
  return cfg;
}

/**
 * Gemma 3 text (GGUF `gemma3`) as llama.cpp runs it. convert_hf_to_gguf.py writes the full layers' RoPE
 * base (rope.freq_base, with rope.scaling.* where the config scales it: Gemma 3 4B-27B's linear 8) and
 * the window (attention.sliding_window); llama.cpp fixes the rest for the architecture and does not read
 * it from the file, and neither does this: every sixth layer full (set_swa_pattern(6), as HF's default
 * sliding_window_pattern), the sliding layers on base 10000 unscaled, and scores × 1/sqrt(head_dim),
 * 1/sqrt(hidden / heads) for the 62-layer 27B (whose query_pre_attn_scalar is 168 = 5376 / 32). No
 * attention soft cap; a final one where the file has one. The norms' 1 (the file holds 1 + w) is
 * models/gguf_weights.ts's to take off.
 */
function gemma3Config(r: MetaReader, numLayers: number, hidden: number, numHeads: number, headDim: number): Record<string, unknown> {
  const cfg: Record<string, unknown> = {
    architectures: ['Gemma3ForCausalLM'],
    model_type: 'gemma3_text',
    hidden_activation: 'gelu_pytorch_tanh',
    sliding_window: r.posInt('attention.sliding_window'),
    sliding_window_pattern: 6,
    rope_local_base_freq: 10000,
    query_pre_attn_scalar: numLayers === 62 ? Math.floor(hidden / numHeads) : headDim,
  };
  const cap = r.optNum('final_logit_softcapping');
  if (cap !== undefined) cfg.final_logit_softcapping = cap;
  return cfg;
}

/**
 * Qwen3-MoE (GGUF `qwen3moe`): the router and packed experts in every layer that has ffn_gate_inp; a
 * layer with a dense MLP instead (HF's mlp_only_layers) comes back as one (llama.cpp itself requires
 * experts in every layer: the released models have them). norm_topk_prob defaults to true, as
 * llama.cpp's qwen3moe graph normalizes the chosen weights; shared experts are Qwen2-MoE's, not this one's.
 */
function qwen3MoeConfig(r: MetaReader, tensors: Tensors, numLayers: number): Record<string, unknown> {
  check(!tensors.has('blk.0.ffn_gate_shexp.weight') && !r.has('expert_shared_feed_forward_length'), OP, r.where(r.key('expert_shared_feed_forward_length')),
    'no shared experts (Qwen3-MoE has none)', 'shared experts');
  const dense = Array.from({ length: numLayers }, (_, i) => i).filter((i) => !tensors.has(`blk.${i}.ffn_gate_inp.weight`));
  return {
    num_experts: r.posInt('expert_count'),
    num_experts_per_tok: r.posInt('expert_used_count'),
    moe_intermediate_size: r.posInt('expert_feed_forward_length'),
    norm_topk_prob: r.bool('expert_weights_norm', true),
    decoder_sparse_step: 1,
    mlp_only_layers: dense,
  };
}

/**
 * Phi-3's LongRoPE (convert_hf_to_gguf.py's Phi3MiniModel): the short and long factors as tensors, the
 * original context in rope.scaling.original_context_length, context_length the extended one. The
 * attention factor the converter writes (rope.scaling.attn_factor) is HF's own function of the two
 * lengths, recomputed by the model from them, so it is checked, not carried.
 */
function phi3LongRope(r: MetaReader, f: { long?: Float32Array; short?: Float32Array }, rotary: number, theta: number): object {
  const where = (n: string) => `${r.name} tensor 'rope_factors_${n}.weight'`;
  check(f.long !== undefined && f.short !== undefined, OP, where(f.long ? 'short' : 'long'), 'both LongRoPE factor tensors', 'only one');
  for (const [n, v] of [['long', f.long!], ['short', f.short!]] as const) check(v.length === rotary / 2, OP, where(n), `${rotary / 2} factors (rotary dim ${rotary} / 2)`, v.length);
  const maxPos = r.posInt('context_length');
  const orig = r.posInt('rope.scaling.original_context_length');
  const scale = maxPos / orig;
  const want = scale > 1 ? Math.sqrt(1 + Math.log(scale) / Math.log(orig)) : 1;
  const attn = r.optNum('rope.scaling.attn_factor');
  check(attn === undefined || Math.abs(attn - want) <= 1e-5 * want, OP, r.where(r.key('rope.scaling.attn_factor')), `${want} (LongRoPE's sqrt(1 + ln(${maxPos}/${orig}) / ln ${orig}))`, attn);
  return {
    rope_type: 'longrope',
    long_factor: Array.from(f.long!, f32Decimal),
    short_factor: Array.from(f.short!, f32Decimal),
    original_max_position_embeddings: orig,
    rope_theta: theta,
  };
}

/**
 * DeepSeek V2/V3 (GGUF `deepseek2`). V3 is told apart by its sigmoid expert gating (V3 routes with
 * grouped, bias-corrected sigmoid scores: topk_method noaux_tc). Two MLA layouts exist: files
 * converted since mid-2025 store the attention as MQA over the latent (key_length = kv_lora_rank +
 * rope dims, with key_length_mla / value_length_mla holding the per-head sizes); older ones store
 * key_length = nope + rope dims and value_length = v_head_dim.
 */
function deepseekConfig(r: MetaReader, tensors: Tensors, maxPos: number, numHeads: number): Record<string, unknown> {
  const gating = r.nonNegInt('expert_gating_func', GATING_SOFTMAX);
  check(gating === GATING_SOFTMAX || gating === GATING_SIGMOID || gating === 0, OP, r.where(r.key('expert_gating_func')), `${GATING_SOFTMAX} (softmax) or ${GATING_SIGMOID} (sigmoid)`, gating);
  const v3 = gating === GATING_SIGMOID;
  const rope = r.posInt('rope.dimension_count');
  const kvLoraRank = r.posInt('attention.kv_lora_rank');
  const mlaLayout = r.has('attention.key_length_mla');
  const qkHead = mlaLayout ? r.posInt('attention.key_length_mla') : r.posInt('attention.key_length');
  const vHead = mlaLayout ? r.posInt('attention.value_length_mla') : r.posInt('attention.value_length');
  check(qkHead > rope, OP, r.where(r.key(mlaLayout ? 'attention.key_length_mla' : 'attention.key_length')), `more than the rope dims (${rope})`, qkHead);
  const nGroup = r.optPosInt('expert_group_count');
  const topkGroup = r.optPosInt('expert_group_used_count');
  const cfg: Record<string, unknown> = {
    architectures: [v3 ? 'DeepseekV3ForCausalLM' : 'DeepseekV2ForCausalLM'],
    model_type: v3 ? 'deepseek_v3' : 'deepseek_v2',
    intermediate_size: r.posInt('feed_forward_length'),
    num_key_value_heads: numHeads,
    q_lora_rank: r.optPosInt('attention.q_lora_rank') ?? null,
    kv_lora_rank: kvLoraRank,
    qk_rope_head_dim: rope,
    qk_nope_head_dim: qkHead - rope,
    v_head_dim: vHead,
    first_k_dense_replace: r.nonNegInt('leading_dense_block_count', 0),
    moe_layer_freq: 1,
    attention_bias: false,
    rope_scaling: deepseekRopeScaling(r, maxPos),
  };
  if (r.has('expert_count')) {
    Object.assign(cfg, {
      n_routed_experts: r.posInt('expert_count'),
      num_experts_per_tok: r.posInt('expert_used_count'),
      n_shared_experts: r.nonNegInt('expert_shared_count', 0),
      moe_intermediate_size: r.posInt('expert_feed_forward_length'),
      // llama.cpp reads 0 (absent) as no scaling.
      routed_scaling_factor: r.num('expert_weights_scale', 0) || 1,
      norm_topk_prob: r.bool('expert_weights_norm', false),
      scoring_func: v3 ? 'sigmoid' : 'softmax',
      topk_method: v3 ? 'noaux_tc' : (nGroup ?? 1) > 1 ? 'group_limited_greedy' : 'greedy',
      n_group: nGroup ?? 1,
      topk_group: topkGroup ?? 1,
    });
  } else {
    // A dense model in DeepSeek's layout (no routed experts): every layer dense.
    cfg.first_k_dense_replace = r.posInt('block_count');
  }
  if (v3) check(
    !cfg.n_routed_experts || tensors.has(`blk.${cfg.first_k_dense_replace}.exp_probs_b.bias`),
    OP,
    `${r.name} tensor 'blk.${cfg.first_k_dense_replace}.exp_probs_b.bias'`,
    'the router score correction bias of a sigmoid-gated (DeepSeek V3) MoE layer',
    'no such tensor',
  );
  return cfg;
}

/**
 * DeepSeek's YaRN. convert_hf_to_gguf.py writes yarn_log_multiplier = 0.1·mscale_all_dim; DeepSeek
 * configs carry mscale = mscale_all_dim (V2 0.707, V3 1.0), whose ratio is what the rotary
 * embedding scales by, so both come back from it.
 */
function deepseekRopeScaling(r: MetaReader, maxPos: number): object | null {
  const base = ropeScaling(r, maxPos) as Record<string, unknown> | null;
  if (!base || base.rope_type !== 'yarn') return base;
  const logMul = r.optNum('rope.scaling.yarn_log_multiplier');
  if (logMul !== undefined && logMul !== 0) {
    const m = Number((logMul / 0.1).toPrecision(6));
    base.mscale = m;
    base.mscale_all_dim = m;
  }
  base.beta_fast ??= 32;
  base.beta_slow ??= 1;
  return base;
}

/**
 * gpt-oss (GGUF `gpt-oss`, llama.cpp's LLM_ARCH_OPENAI_MOE) as convert_hf_to_gguf.py writes it: the
 * experts' width in expert_feed_forward_length (feed_forward_length is the same number), the window in
 * attention.sliding_window, and no layer types: llama.cpp alternates them (set_swa_pattern(2): layers
 * 0, 2, ... slide, 1, 3, ... attend to everything), as the released checkpoints' layer_types do. RoPE is
 * YaRN (the converter refuses anything else) without truncation (GptOssConfig's). The experts are ggml
 * MXFP4 blocks (the converter repacks the checkpoint's blocks without rounding): they come back as an
 * MXFP4 checkpoint's (quantization_config mxfp4); experts of another type are refused by name.
 */
function gptOssConfig(r: MetaReader, tensors: Tensors, maxPos: number, numHeads: number, hidden: number, numLayers: number): Record<string, unknown> {
  const gate = tensors.get('blk.0.ffn_gate_exps.weight');
  check(gate !== undefined, OP, `${r.name} tensor 'blk.0.ffn_gate_exps.weight'`, "gpt-oss's routed experts (gate)", 'no such tensor');
  check(gate!.type === 'MXFP4', OP, `${r.name} tensor 'blk.0.ffn_gate_exps.weight'`, 'MXFP4 experts (as convert_hf_to_gguf.py writes gpt-oss)', gate!.type);
  const headDim = r.posInt('attention.key_length', Math.floor(hidden / numHeads));
  const vDim = r.posInt('attention.value_length', headDim);
  check(vDim === headDim, OP, r.where(r.key('attention.value_length')), `${headDim} (the key length: gpt-oss uses one head_dim)`, vDim);
  const rotary = r.posInt('rope.dimension_count', headDim);
  check(rotary === headDim, OP, r.where(r.key('rope.dimension_count')), `${headDim} (gpt-oss rotates whole heads)`, rotary);
  const moeWidth = r.posInt('expert_feed_forward_length');
  const theta = r.num('rope.freq_base', 150000);
  const scaling = ropeScaling(r, maxPos) as Record<string, unknown> | null;
  let rope: Record<string, unknown>;
  if (scaling === null) rope = { rope_type: 'default', rope_theta: theta };
  else {
    check(scaling.rope_type === 'yarn', OP, r.where(r.key('rope.scaling.type')), "'yarn' (gpt-oss's RoPE)", scaling.rope_type);
    rope = { beta_fast: 32, beta_slow: 1, ...scaling, truncate: false, rope_theta: theta };
  }
  const window = r.posInt('attention.sliding_window');
  return {
    architectures: ['GptOssForCausalLM'],
    model_type: 'gpt_oss',
    intermediate_size: moeWidth,
    num_local_experts: r.posInt('expert_count'),
    num_experts_per_tok: r.posInt('expert_used_count'),
    num_key_value_heads: r.posInt('attention.head_count_kv', numHeads),
    head_dim: headDim,
    sliding_window: window,
    layer_types: Array.from({ length: numLayers }, (_, i) => (i % 2 === 0 ? 'sliding_attention' : 'full_attention')),
    attention_bias: tensors.has('blk.0.attn_q.bias'),
    rope_theta: theta,
    rope_scaling: null,
    rope_parameters: rope,
    quantization_config: { quant_method: 'mxfp4' },
  };
}

/**
 * LFM2 (GGUF `lfm2`), as convert_hf_to_gguf.py's LFM2Model writes it: attention.head_count_kv per layer
 * with 0 on the conv layers (the only record of which layers are which), shortconv.l_cache,
 * feed_forward_length already the adjusted width (so the config says block_auto_adjust_ff_dim false),
 * and the RMSNorm epsilon under Lfm2Config's name norm_eps.
 */
function lfm2Config(r: MetaReader, common: Record<string, unknown>, numLayers: number, numHeads: number, hidden: number): Record<string, unknown> {
  const kvRaw = r.raw('attention.head_count_kv');
  const where = r.where(r.key('attention.head_count_kv'));
  const perLayer = Array.isArray(kvRaw) ? kvRaw : Array.from({ length: numLayers }, () => kvRaw ?? numHeads);
  check(perLayer.length === numLayers && perLayer.every((k) => typeof k === 'number' && Number.isInteger(k) && k >= 0), OP, where,
    `a head count per layer (${numLayers}; 0 on the conv layers)`, kvRaw);
  const attn = (perLayer as number[]).filter((k) => k > 0);
  check(attn.every((k) => k === attn[0]), OP, where, 'one kv head count on every attention layer', kvRaw);
  const headDim = r.posInt('attention.key_length', Math.floor(hidden / numHeads));
  const { rms_norm_eps: eps, ...rest } = common;
  return {
    architectures: ['Lfm2ForCausalLM'],
    model_type: 'lfm2',
    ...rest,
    norm_eps: eps,
    intermediate_size: r.posInt('feed_forward_length'),
    block_auto_adjust_ff_dim: false,
    num_key_value_heads: attn[0] ?? numHeads,
    head_dim: headDim,
    layer_types: (perLayer as number[]).map((k) => (k === 0 ? 'conv' : 'full_attention')),
    conv_L_cache: r.posInt('shortconv.l_cache'),
    conv_bias: false,
  };
}
