// An HF config.json normalized into the numbers a model loader needs, with the semantics of
// transformers 5 (its configuration classes' defaults, `convert_rope_params_to_dict` /
// `standardize_rope_params` for RoPE, and what each modeling file builds from the config). Both RoPE
// forms are read: transformers 5's `rope_parameters` and the older `rope_theta` + `rope_scaling`.
//
// Shape-defining keys (vocab_size, hidden_size, intermediate_size, num_hidden_layers,
// num_attention_heads) must be present; every other key takes transformers' default when absent.

import { check, fail, fmt } from '../core/errors.js';
import { SUPPORTED_ROPE_TYPES, yarnGetMscale, type RopeConfig, type RopeType } from './rope.js';

export const SUPPORTED_ARCHITECTURES = Object.freeze([
  'LlamaForCausalLM',
  'MistralForCausalLM',
  'Qwen2ForCausalLM',
  'Qwen3ForCausalLM',
  'DeepseekV2ForCausalLM',
  'DeepseekV3ForCausalLM',
  'Gemma2ForCausalLM',
  'GptOssForCausalLM',
  'SmolLM3ForCausalLM',
  'Phi3ForCausalLM',
  'Qwen3MoeForCausalLM',
  'Gemma3ForCausalLM',
  'Qwen2_5_VLForConditionalGeneration',
  'Lfm2ForCausalLM',
  'Gemma3ForConditionalGeneration',
] as const);

export type Architecture = (typeof SUPPORTED_ARCHITECTURES)[number];
export type ModelFamily = 'llama' | 'mistral' | 'qwen2' | 'qwen3' | 'deepseek_v2' | 'deepseek_v3' | 'gemma2' | 'gpt_oss' | 'smollm3' | 'phi3' | 'qwen3_moe' | 'gemma3' | 'lfm2';

const FAMILY: Record<Architecture, ModelFamily> = {
  LlamaForCausalLM: 'llama',
  MistralForCausalLM: 'mistral',
  Qwen2ForCausalLM: 'qwen2',
  Qwen3ForCausalLM: 'qwen3',
  DeepseekV2ForCausalLM: 'deepseek_v2',
  DeepseekV3ForCausalLM: 'deepseek_v3',
  Gemma2ForCausalLM: 'gemma2',
  GptOssForCausalLM: 'gpt_oss',
  SmolLM3ForCausalLM: 'smollm3',
  Phi3ForCausalLM: 'phi3',
  Qwen3MoeForCausalLM: 'qwen3_moe',
  Gemma3ForCausalLM: 'gemma3',
  // Qwen2.5-VL's text model is Qwen2 with M-RoPE (ModelConfig.mrope); its vision tower is ModelConfig.vision.
  Qwen2_5_VLForConditionalGeneration: 'qwen2',
  Lfm2ForCausalLM: 'lfm2',
  // Gemma 3 with images: the Gemma 3 text model; its SigLIP tower and projector are ModelConfig.siglip.
  Gemma3ForConditionalGeneration: 'gemma3',
};

export interface LayerConfig {
  /** Keys visible to query i: i - j < slidingWindow (SPEC §2, as transformers' mask); null: all. */
  slidingWindow: number | null;
  /** DeepSeek: a mixture-of-experts MLP (layers from first_k_dense_replace on); gpt-oss: every layer; Qwen3-MoE: as qwen3MoeLayers; else dense. */
  moe: boolean;
  /** SmolLM3's NoPE layers (no_rope_layers[i] = 0): q and k are not rotated; absent or false: RoPE. */
  noRope?: boolean;
  /** LFM2's short-convolution layers (layer_types 'conv'): no attention and no KV cache, a conv state per sequence instead. */
  conv?: boolean;
}

/** DeepSeek's multi-head latent attention (SPEC §5). */
export interface MlaConfig {
  qLoraRank: number | null; // null: q_proj; else q_a_proj → q_a_layernorm → q_b_proj
  kvLoraRank: number;
  qkNopeHeadDim: number;
  qkRopeHeadDim: number;
  vHeadDim: number;
  qkHeadDim: number; // nope + rope
}

export interface MoeConfig {
  numRoutedExperts: number;
  numExpertsPerTok: number;
  /** Always-on experts, folded into one MLP of intermediate size numSharedExperts × moeIntermediateSize; 0: none. */
  numSharedExperts: number;
  moeIntermediateSize: number;
  firstKDenseReplace: number;
  moeLayerFreq: number;
  /** V2: greedy | group_limited_greedy over softmax scores; V3: noaux_tc (grouped, bias-corrected sigmoid). */
  topkMethod: 'greedy' | 'group_limited_greedy' | 'noaux_tc';
  scoringFunc: 'softmax' | 'sigmoid';
  nGroup: number | null;
  topkGroup: number | null;
  /** As in config.json; transformers' V2 routing does not read it (the goldens decide). */
  normTopkProb: boolean;
  routedScalingFactor: number;
  /** V3: the router carries `e_score_correction_bias` [numRoutedExperts]. */
  eScoreCorrectionBias: boolean;
  /**
   * gpt-oss's experts (GptOssExperts): the router (`mlp.router`, weight and bias) picks the topK
   * experts by logit, weights = softmax over those K; the routed experts carry biases (gate_up_proj_bias,
   * down_proj_bias), gate and up interleaved in gate_up_proj [E, H, 2I] (input-major), and the
   * activation is swiglu_oai: g = min(gate, limit), u = clamp(up, ±limit), (u + 1)·g·sigmoid(alpha·g).
   * null for DeepSeek.
   */
  gptOss: { swigluLimit: number; swigluAlpha: number; /** quantization_config.quant_method 'mxfp4': the experts ship as MXFP4 blocks (formats/hf_mxfp4.ts). */ mxfp4: boolean } | null;
}

export interface ModelConfig {
  architecture: Architecture;
  family: ModelFamily;
  vocabSize: number;
  hiddenSize: number;
  numLayers: number;
  numHeads: number;
  /** Key/value heads (GQA); DeepSeek's MLA ignores it. */
  numKvHeads: number;
  /** head_dim (or hidden/heads). DeepSeek: transformers' head_dim, i.e. qk_rope_head_dim; see mla. */
  headDim: number;
  intermediateSize: number;
  rmsEps: number;
  tieWordEmbeddings: boolean;
  /** Biases of the projections: qkv = q/k/v (DeepSeek: q_a_proj, kv_a_proj_with_mqa), o = o_proj. */
  attentionBias: { qkv: boolean; o: boolean };
  /** Biases on the dense MLP (and DeepSeek V2's shared experts); routed experts never have them. */
  mlpBias: boolean;
  /** Qwen3, Gemma 3: RMSNorm over each head of q and k (q_norm, k_norm [headDim]) before RoPE (Gemma 3's of the form x·(1 + w)). */
  qkNorm: boolean;
  /** The dense MLP's activation: silu, or Gemma2's gelu_pytorch_tanh (act(gate)·up either way). */
  hiddenAct: 'silu' | 'gelu_tanh';
  /**
   * Gemma2: scores s -> cap·tanh(s/cap) before the mask and softmax (attn_logit_softcapping), logits
   * -> cap·tanh(logits/cap) (final_logit_softcapping); null: none.
   */
  attnSoftcap: number | null;
  finalLogitSoftcap: number | null;
  /** Gemma2: the embedding is multiplied by sqrt(hidden_size) (rounded to f32 as HF's normalizer); null: not scaled. */
  embedScale: number | null;
  /** Gemma 2 and 3: four norms a layer (post-attention and post-MLP on the sublayer outputs), RMSNorm as x·(1 + w). */
  sandwichNorms: boolean;
  /** gpt-oss: a learned sink logit per query head (`self_attn.sinks` [numHeads]). */
  sinks: boolean;
  layers: readonly LayerConfig[];
  maxPositionEmbeddings: number;
  bosTokenId: number | null;
  eosTokenIds: number[];
  padTokenId: number | null;
  rope: RopeConfig;
  /**
   * Gemma 3: the RoPE of the sliding-window layers (rope_parameters.sliding_attention, older configs'
   * rope_local_base_freq), `rope` being the full layers'; null: every layer uses `rope`.
   */
  slidingRope: RopeConfig | null;
  /** The softmax scale: headDim^-0.5; DeepSeek qk_head_dim^-0.5, V3 times YaRN's mscale²; Gemma 2 and 3 query_pre_attn_scalar^-0.5. */
  attentionScale: number;
  mla: MlaConfig | null;
  moe: MoeConfig | null;
  /** The config's `dtype` / `torch_dtype` (e.g. 'bfloat16'), or null. */
  dtype: string | null;
  /** LFM2: the short convolutions' kernel width (conv_L_cache; a sequence's state is its last width − 1 inputs); null: no conv layers. */
  convLCache: number | null;
  /**
   * Qwen2.5-VL's multimodal RoPE: each token has positions (t, h, w); of the rotary frequencies the first
   * section[0] take their angle from t, the next section[1] from h, the last section[2] from w. null: 1-D RoPE.
   */
  mrope?: { section: readonly [number, number, number] } | null;
  /** A vision-language model's vision tower and image tokens (Qwen2.5-VL); absent or null: text only. */
  vision?: QwenVisionConfig | null;
  /** Gemma 3's SigLIP vision tower, its projector and image tokens (Gemma3ForConditionalGeneration); absent or null: none. */
  siglip?: SiglipVisionConfig | null;
}

/**
 * Gemma 3's vision side (Gemma3ForConditionalGeneration; goldens-arch README "gemma3-vision"): a SigLIP
 * encoder without pooling head (patch embedding with bias, learned positions, pre-LayerNorm layers of
 * bidirectional attention with biases and a GELU-tanh MLP, post_layernorm), then the projector: the
 * patch grid average-pooled to tokensPerImage tokens, RMSNorm x·(1 + w), and a product to the text width.
 */
export interface SiglipVisionConfig {
  hiddenSize: number;
  intermediateSize: number;
  numLayers: number;
  numHeads: number;
  headDim: number;
  numChannels: number;
  imageSize: number;
  patchSize: number;
  layerNormEps: number;
  /** Image tokens a picture becomes (mm_tokens_per_image: a square number, the pooled grid). */
  tokensPerImage: number;
  imageTokenId: number;
  /** <start_of_image> and <end_of_image>, around each image's run of image tokens in a prompt. */
  boiTokenId: number | null;
  eoiTokenId: number | null;
}

/** Qwen2.5-VL's vision tower (Qwen2_5_VisionTransformerPretrainedModel) and its image tokens. */
export interface QwenVisionConfig {
  depth: number;
  hiddenSize: number;
  numHeads: number;
  headDim: number;
  intermediateSize: number;
  /** The merger's output: the text model's hidden size. */
  outHiddenSize: number;
  inChannels: number;
  patchSize: number;
  temporalPatchSize: number;
  spatialMergeSize: number;
  /** Window attention's window in pixels (window_size / spatial_merge_size / patch_size merged tokens a side). */
  windowSize: number;
  /** Blocks attending over the whole image; the others attend within windows. */
  fullattBlockIndexes: readonly number[];
  /** The 2-D rotary's base. */
  ropeTheta: number;
  rmsEps: number;
  imageTokenId: number;
  visionStartTokenId: number | null;
  visionEndTokenId: number | null;
}

const OP = 'parseConfig';
type Json = Record<string, unknown>;

// Values from the JSON are shown as JSON would show them: a string '100' is not the number 100.
const shown = (x: unknown) => (typeof x === 'string' ? fmt(x) : x);
function chk(cond: boolean, key: string, expected: string, actual: unknown): asserts cond {
  check(cond, OP, key, expected, shown(actual));
}
function bad(key: string, expected: string, actual: unknown): never {
  fail(OP, key, expected, shown(actual));
}

const isObj = (x: unknown): x is Json => typeof x === 'object' && x !== null && !Array.isArray(x);

function posInt(j: Json, key: string, def?: number): number {
  const v = j[key] === undefined ? def : j[key];
  chk(typeof v === 'number' && Number.isInteger(v) && v > 0, key, def === undefined ? 'a positive integer (required)' : 'a positive integer', v);
  return v as number;
}

function nonNegInt(j: Json, key: string, def: number): number {
  const v = j[key] === undefined || j[key] === null ? def : j[key];
  chk(typeof v === 'number' && Number.isInteger(v) && v >= 0, key, 'a non-negative integer', v);
  return v as number;
}

/** A positive integer, or null when the key is null (absent: the default). */
function posIntOrNull(j: Json, key: string, def: number | null): number | null {
  const v = j[key] === undefined ? def : j[key];
  if (v === null) return null;
  chk(typeof v === 'number' && Number.isInteger(v) && v > 0, key, 'a positive integer or null', v);
  return v as number;
}

function posNum(j: Json, key: string, def: number): number {
  const v = j[key] === undefined ? def : j[key];
  chk(typeof v === 'number' && Number.isFinite(v) && v > 0, key, 'a positive number', v);
  return v as number;
}

function bool(j: Json, key: string, def: boolean): boolean {
  const v = j[key] === undefined || j[key] === null ? def : j[key];
  chk(typeof v === 'boolean', key, 'true or false', v);
  return v as boolean;
}

function tokenId(j: Json, key: string, def: number | null): number | null {
  const v = j[key] === undefined ? def : j[key];
  if (v === null) return null;
  chk(typeof v === 'number' && Number.isInteger(v) && v >= 0, key, 'a token id (non-negative integer) or null', v);
  return v as number;
}

function architectureOf(j: Json): Architecture {
  const archs = j.architectures;
  const supported = SUPPORTED_ARCHITECTURES as readonly string[];
  if (Array.isArray(archs) && archs.length > 0) {
    const a = archs.find((x) => supported.includes(x as string));
    if (a) return a as Architecture;
    bad('architectures', `one of ${SUPPORTED_ARCHITECTURES.join(', ')}`, archs);
  }
  // AutoModelForCausalLM falls back on model_type; so do we.
  const byType: Record<string, Architecture> = {
    llama: 'LlamaForCausalLM',
    mistral: 'MistralForCausalLM',
    qwen2: 'Qwen2ForCausalLM',
    qwen3: 'Qwen3ForCausalLM',
    deepseek_v2: 'DeepseekV2ForCausalLM',
    deepseek_v3: 'DeepseekV3ForCausalLM',
    gemma2: 'Gemma2ForCausalLM',
    gpt_oss: 'GptOssForCausalLM',
    smollm3: 'SmolLM3ForCausalLM',
    phi3: 'Phi3ForCausalLM',
    qwen3_moe: 'Qwen3MoeForCausalLM',
    gemma3_text: 'Gemma3ForCausalLM',
    gemma3: 'Gemma3ForConditionalGeneration',
    qwen2_5_vl: 'Qwen2_5_VLForConditionalGeneration',
    lfm2: 'Lfm2ForCausalLM',
  };
  const a = typeof j.model_type === 'string' ? byType[j.model_type] : undefined;
  if (a) return a;
  bad('architectures', `a list naming one of ${SUPPORTED_ARCHITECTURES.join(', ')} (or a matching model_type)`, archs ?? j.model_type);
}

/** Per-family defaults of transformers 5's configuration classes, where they differ. */
interface FamilyDefaults {
  maxPositionEmbeddings: number;
  bos: number | null;
  eos: number | null;
}
const DEFAULTS: Record<ModelFamily, FamilyDefaults> = {
  llama: { maxPositionEmbeddings: 2048, bos: 1, eos: 2 },
  mistral: { maxPositionEmbeddings: 4096 * 32, bos: 1, eos: 2 },
  qwen2: { maxPositionEmbeddings: 32768, bos: null, eos: null },
  qwen3: { maxPositionEmbeddings: 32768, bos: null, eos: null },
  deepseek_v2: { maxPositionEmbeddings: 2048, bos: 1, eos: 2 },
  deepseek_v3: { maxPositionEmbeddings: 4096, bos: 0, eos: 1 },
  gemma2: { maxPositionEmbeddings: 8192, bos: 2, eos: 1 },
  gpt_oss: { maxPositionEmbeddings: 131072, bos: null, eos: null },
  smollm3: { maxPositionEmbeddings: 32768, bos: 128000, eos: 128001 },
  phi3: { maxPositionEmbeddings: 4096, bos: 1, eos: 32000 },
  qwen3_moe: { maxPositionEmbeddings: 32768, bos: null, eos: null },
  gemma3: { maxPositionEmbeddings: 131072, bos: 2, eos: 1 },
  lfm2: { maxPositionEmbeddings: 128000, bos: 1, eos: 2 },
};

function optNum(rp: Json, key: string, where: string): number | null {
  const v = rp[key];
  if (v === undefined || v === null) return null;
  chk(typeof v === 'number' && Number.isFinite(v), `${where}.${key}`, 'a finite number', v);
  return v as number;
}

/**
 * RoPE settings from either form. transformers 5 takes `rope_scaling` when it is a non-empty dict,
 * else `rope_parameters`; rope_theta comes from inside that dict, else the top-level key, else
 * 10000; a missing rope_type falls back on the old `type`, then 'default'; llama3 and yarn default
 * original_max_position_embeddings to a top-level key of that name, else max_position_embeddings.
 */
function parseRope(j: Json, family: ModelFamily, rotaryDim: number, maxPos: number, given?: { where: string; params: Json }): RopeConfig {
  const scaling = j.rope_scaling;
  const useScaling = isObj(scaling) && Object.keys(scaling).length > 0;
  const where = given?.where ?? (useScaling ? 'rope_scaling' : 'rope_parameters');
  const src = given ? given.params : useScaling ? scaling : j.rope_parameters;
  chk(src === undefined || src === null || isObj(src), where, 'an object or null', src);
  const rp: Json = isObj(src) ? src : {};
  // A dict keyed by layer type (per-layer RoPE) is not a form these architectures use; unknown
  // scalar keys only draw a warning from transformers, so they pass here.
  for (const k of Object.keys(rp)) if (isObj(rp[k])) bad(`${where}.${k}`, 'one RoPE dict for all layers (a number or string)', rp[k]);
  const typeRaw = rp.rope_type ?? rp.type ?? 'default';
  // LongRoPE is read for Phi3 only (the family its goldens check); elsewhere it is refused as before.
  const ropeTypes = family === 'phi3' ? SUPPORTED_ROPE_TYPES : SUPPORTED_ROPE_TYPES.filter((t) => t !== 'longrope');
  chk(
    typeof typeRaw === 'string' && (ropeTypes as readonly string[]).includes(typeRaw),
    `${where}.rope_type`,
    `one of ${ropeTypes.join(', ')} (${family === 'phi3' ? 'others' : 'longrope and others'}: unsupported)`,
    typeRaw,
  );
  const type = typeRaw as RopeType;
  const theta = rp.rope_theta ?? j.rope_theta ?? 10000;
  chk(typeof theta === 'number' && Number.isFinite(theta) && theta > 0, `${rp.rope_theta !== undefined ? `${where}.` : ''}rope_theta`, 'a positive number', theta);
  const prf = rp.partial_rotary_factor ?? j.partial_rotary_factor ?? 1;
  if (family === 'phi3') {
    // Phi3RotaryEmbedding rotates the first int(head_dim · partial_rotary_factor) dims of each head.
    chk(typeof prf === 'number' && prf > 0 && prf <= 1, 'partial_rotary_factor', 'a number in (0, 1]', prf);
    rotaryDim = Math.floor(rotaryDim * (prf as number));
    chk(rotaryDim > 0 && rotaryDim % 2 === 0, 'partial_rotary_factor', 'a factor giving an even rotary dim', prf);
  } else chk(prf === 1, 'partial_rotary_factor', `1 (partial rotary embeddings are not used by ${family})`, prf);

  let original = optNum(rp, 'original_max_position_embeddings', where);
  let longrope: { shortFactor: number[]; longFactor: number[] } | null = null;
  let factorOverride: number | null = null;
  if (type === 'longrope') {
    // _compute_longrope_parameters: factor = max_position_embeddings / original_max_position_embeddings
    // when the config has the latter at its top level (Phi3), else rope_parameters.factor.
    const top = typeof j.original_max_position_embeddings === 'number' ? j.original_max_position_embeddings : null;
    if (top !== null) original = top;
    chk(original !== null && Number.isInteger(original) && original > 0, `${where}.original_max_position_embeddings`, 'a positive integer (required by longrope)', original);
    const list = (k: string) => {
      const v = rp[k];
      chk(Array.isArray(v) && v.length === rotaryDim / 2 && v.every((x) => typeof x === 'number' && Number.isFinite(x) && x > 0),
        `${where}.${k}`, `a list of ${rotaryDim / 2} positive numbers (one per rotary frequency)`, v);
      return v as number[];
    };
    longrope = { shortFactor: list('short_factor'), longFactor: list('long_factor') };
    factorOverride = top !== null || optNum(rp, 'factor', where) === null ? maxPos / original! : optNum(rp, 'factor', where);
  }
  if (type === 'llama3' || type === 'yarn') {
    if (typeof j.original_max_position_embeddings === 'number') original = j.original_max_position_embeddings;
    else if (original === null) original = maxPos;
    chk(Number.isInteger(original) && original > 0, `${where}.original_max_position_embeddings`, 'a positive integer', original);
  }
  const factor = factorOverride ?? optNum(rp, 'factor', where);
  const needKey = (k: string, v: number | null) => chk(v !== null, `${where}.${k}`, `a number (required by rope type '${type}')`, rp[k]);
  if (type === 'linear' || type === 'dynamic' || type === 'llama3') {
    needKey('factor', factor);
    chk(factor! > 0, `${where}.factor`, 'a positive number', factor);
  }
  if (type === 'yarn') chk('factor' in rp, `${where}.factor`, `a number or null (required by rope type 'yarn')`, rp.factor);
  const lowFreqFactor = optNum(rp, 'low_freq_factor', where);
  const highFreqFactor = optNum(rp, 'high_freq_factor', where);
  if (type === 'llama3') {
    needKey('low_freq_factor', lowFreqFactor);
    needKey('high_freq_factor', highFreqFactor);
    chk(highFreqFactor! > lowFreqFactor!, `${where}.high_freq_factor`, `greater than low_freq_factor (${lowFreqFactor})`, highFreqFactor);
  }
  const truncate = rp.truncate ?? true;
  chk(typeof truncate === 'boolean', `${where}.truncate`, 'true or false', truncate);
  return {
    type,
    theta,
    rotaryDim,
    // V2 rotates through complex numbers over adjacent pairs regardless of any flag; V3 reads
    // rope_interleave (default true); the others use rotate_half.
    interleaved: family === 'deepseek_v2' || (family === 'deepseek_v3' && bool(j, 'rope_interleave', true)),
    maxPositionEmbeddings: maxPos,
    factor,
    originalMaxPositionEmbeddings: type === 'llama3' || type === 'yarn' || type === 'longrope' ? original : null,
    lowFreqFactor,
    highFreqFactor,
    betaFast: optNum(rp, 'beta_fast', where),
    betaSlow: optNum(rp, 'beta_slow', where),
    mscale: optNum(rp, 'mscale', where),
    mscaleAllDim: optNum(rp, 'mscale_all_dim', where),
    attentionFactor: optNum(rp, 'attention_factor', where),
    truncate: truncate as boolean,
    ...(longrope ?? {}),
  };
}

/** Qwen2/Qwen3: which layers slide, exactly as their configs and attention modules decide. */
function qwenWindows(j: Json, numLayers: number): (number | null)[] {
  const use = bool(j, 'use_sliding_window', false);
  // The config keeps sliding_window only when use_sliding_window is set.
  const window = use ? posIntOrNull(j, 'sliding_window', 4096) : null;
  const maxWindowLayers = nonNegInt(j, 'max_window_layers', 28);
  let types: unknown = j.layer_types;
  if (types === undefined || types === null) {
    types = Array.from({ length: numLayers }, (_, i) => (window !== null && i >= maxWindowLayers ? 'sliding_attention' : 'full_attention'));
  }
  chk(
    Array.isArray(types) && types.length === numLayers && types.every((t) => t === 'full_attention' || t === 'sliding_attention'),
    'layer_types',
    `${numLayers} entries, each 'full_attention' or 'sliding_attention'`,
    types,
  );
  return (types as string[]).map((t) => (t === 'sliding_attention' ? window : null));
}

function parseMoe(j: Json, family: 'deepseek_v2' | 'deepseek_v3', numLayers: number): { moe: MoeConfig | null; layers: boolean[] } {
  const v3 = family === 'deepseek_v3';
  const firstKDenseReplace = nonNegInt(j, 'first_k_dense_replace', v3 ? 3 : 0);
  const moeLayerFreq = posInt(j, 'moe_layer_freq', 1);
  // transformers makes every layer from first_k_dense_replace on a MoE layer; DeepSeek's own code
  // also skips layers by moe_layer_freq, which only a value of 1 makes agree.
  chk(moeLayerFreq === 1, 'moe_layer_freq', '1 (transformers ignores other values)', moeLayerFreq);
  const layers = Array.from({ length: numLayers }, (_, i) => i >= firstKDenseReplace);
  if (!layers.some(Boolean)) return { moe: null, layers };

  const numRoutedExperts = posInt(j, 'n_routed_experts', v3 ? 256 : 64);
  const numExpertsPerTok = posInt(j, 'num_experts_per_tok', v3 ? 8 : undefined);
  chk(numExpertsPerTok <= numRoutedExperts, 'num_experts_per_tok', `at most n_routed_experts (${numRoutedExperts})`, numExpertsPerTok);
  const numSharedExperts = nonNegInt(j, 'n_shared_experts', v3 ? 1 : 2);
  const moeIntermediateSize = posInt(j, 'moe_intermediate_size', v3 ? 2048 : 1407);
  const routedScalingFactor = posNum(j, 'routed_scaling_factor', v3 ? 2.5 : 1.0);
  const normTopkProb = bool(j, 'norm_topk_prob', v3);
  const scoring = j.scoring_func ?? (v3 ? 'sigmoid' : 'softmax');
  chk(scoring === (v3 ? 'sigmoid' : 'softmax'), 'scoring_func', `'${v3 ? 'sigmoid' : 'softmax'}' (what transformers' ${family} router computes)`, scoring);
  const method = j.topk_method ?? (v3 ? 'noaux_tc' : 'greedy');
  const methods = v3 ? ['noaux_tc'] : ['greedy', 'group_limited_greedy'];
  chk(methods.includes(method as string), 'topk_method', `one of ${methods.join(', ')} for ${family}`, method);
  const grouped = method !== 'greedy';
  let nGroup = posIntOrNull(j, 'n_group', v3 ? 8 : null);
  let topkGroup = posIntOrNull(j, 'topk_group', v3 ? 4 : null);
  if (grouped) {
    chk(nGroup !== null, 'n_group', `a positive integer (topk_method '${method}' groups the experts)`, nGroup);
    chk(topkGroup !== null, 'topk_group', `a positive integer (topk_method '${method}' keeps that many groups)`, topkGroup);
    chk(numRoutedExperts % nGroup! === 0, 'n_group', `a divisor of n_routed_experts (${numRoutedExperts})`, nGroup);
    chk(topkGroup! <= nGroup!, 'topk_group', `at most n_group (${nGroup})`, topkGroup);
    // V3 ranks a group by the sum of its two best scores.
    if (v3) chk(numRoutedExperts / nGroup! >= 2, 'n_group', `at most n_routed_experts / 2 (${numRoutedExperts / 2}): groups are ranked by their two best experts`, nGroup);
    const reachable = topkGroup! * (numRoutedExperts / nGroup!);
    chk(numExpertsPerTok <= reachable, 'num_experts_per_tok', `at most topk_group × experts per group (${reachable})`, numExpertsPerTok);
  } else {
    nGroup = null;
    topkGroup = null;
  }
  return {
    layers,
    moe: {
      numRoutedExperts,
      numExpertsPerTok,
      numSharedExperts,
      moeIntermediateSize,
      firstKDenseReplace,
      moeLayerFreq,
      topkMethod: method as MoeConfig['topkMethod'],
      scoringFunc: v3 ? 'sigmoid' : 'softmax',
      nGroup,
      topkGroup,
      normTopkProb,
      routedScalingFactor,
      eScoreCorrectionBias: v3,
      gptOss: null,
    },
  };
}

/**
 * SmolLM3's NoPE layers as SmolLM3Config: no_rope_layers (1 = RoPE, 0 = NoPE), else every
 * no_rope_layer_interval-th layer (default 4) goes without: int((i + 1) % interval != 0).
 */
function smolNoRope(j: Json, numLayers: number): boolean[] {
  const list = j.no_rope_layers;
  if (list === undefined || list === null) {
    const interval = posInt(j, 'no_rope_layer_interval', 4);
    return Array.from({ length: numLayers }, (_, i) => (i + 1) % interval === 0);
  }
  chk(Array.isArray(list) && list.length === numLayers && list.every((x) => x === 0 || x === 1 || x === true || x === false),
    'no_rope_layers', `a list of ${numLayers} flags (1: RoPE, 0: NoPE)`, list);
  return (list as unknown[]).map((x) => !x);
}

/** SmolLM3: sliding_attention layers of layer_types slide when use_sliding_window and sliding_window are set (none do in the released models). */
function smolWindows(j: Json, numLayers: number): (number | null)[] {
  const w = bool(j, 'use_sliding_window', false) ? posIntOrNull(j, 'sliding_window', null) : null;
  const types = j.layer_types;
  if (w === null) return Array.from({ length: numLayers }, () => null);
  chk(Array.isArray(types) && types.length === numLayers, 'layer_types', `a list of ${numLayers} layer types`, types);
  return (types as unknown[]).map((t) => (t === 'sliding_attention' ? w : null));
}

/**
 * Qwen3-MoE's routed experts (Qwen3MoeSparseMoeBlock) and which layers have them, as its decoder layer
 * decides: sparse unless listed in mlp_only_layers, and only where (i + 1) % decoder_sparse_step == 0.
 * Router: softmax over all experts, top-k, renormalized to sum 1 when norm_topk_prob; no shared expert.
 * The expert count is `num_experts` (Hub checkpoints) or `num_local_experts` (what transformers 5 writes).
 */
function qwen3Moe(j: Json, numLayers: number): { moe: MoeConfig | null; layers: boolean[] } {
  const key = j.num_experts !== undefined && j.num_experts !== null ? 'num_experts' : j.num_local_experts !== undefined && j.num_local_experts !== null ? 'num_local_experts' : 'num_experts';
  if (key === 'num_experts' && j.num_local_experts !== undefined && j.num_local_experts !== null) {
    chk(j.num_local_experts === j.num_experts, 'num_local_experts', `equal to num_experts (${String(j.num_experts)}) when both are given`, j.num_local_experts);
  }
  const numRoutedExperts = nonNegInt(j, key, 128);
  const step = posInt(j, 'decoder_sparse_step', 1);
  const only = j.mlp_only_layers ?? [];
  chk(Array.isArray(only) && only.every((i) => Number.isInteger(i) && (i as number) >= 0), 'mlp_only_layers', 'a list of layer indices', only);
  const dense = new Set(only as number[]);
  const layers = Array.from({ length: numLayers }, (_, i) => numRoutedExperts > 0 && !dense.has(i) && (i + 1) % step === 0);
  if (!layers.some(Boolean)) return { moe: null, layers };
  const numExpertsPerTok = posInt(j, 'num_experts_per_tok', 8);
  chk(numExpertsPerTok <= numRoutedExperts, 'num_experts_per_tok', `at most ${key} (${numRoutedExperts})`, numExpertsPerTok);
  return {
    layers,
    moe: {
      numRoutedExperts, numExpertsPerTok, numSharedExperts: 0, moeIntermediateSize: posInt(j, 'moe_intermediate_size', 768),
      firstKDenseReplace: 0, moeLayerFreq: step, topkMethod: 'greedy', scoringFunc: 'softmax', nGroup: null, topkGroup: null,
      normTopkProb: bool(j, 'norm_topk_prob', false), routedScalingFactor: 1, eScoreCorrectionBias: false, gptOss: null,
    },
  };
}

/**
 * Gemma 3's two RoPEs as Gemma3TextConfig builds them: rope_parameters keyed by layer type
 * (transformers 5), else the older keys: rope_theta (default 1e6) for the full layers and
 * rope_local_base_freq (default 1e4) for the sliding ones; a rope_scaling dict (Gemma 3 4B-27B's linear
 * factor 8) is merged into the full layers' parameters, the sliding layers keep theirs.
 */
function gemma3Rope(j: Json, headDim: number, maxPos: number): { full: RopeConfig; sliding: RopeConfig } {
  const rp = j.rope_parameters;
  const TYPES = ['full_attention', 'sliding_attention'];
  chk(rp === undefined || rp === null || isObj(rp), 'rope_parameters', "an object keyed by 'full_attention' and 'sliding_attention', or null", rp);
  if (isObj(rp)) {
    for (const k of Object.keys(rp)) {
      chk(TYPES.includes(k), `rope_parameters.${k}`, "no such key: Gemma 3 keys its RoPE by layer type ('full_attention', 'sliding_attention')", rp[k]);
    }
  }
  const part = (type: string): Json => {
    const v = isObj(rp) ? rp[type] : undefined;
    chk(v === undefined || v === null || isObj(v), `rope_parameters.${type}`, 'an object (rope_type, rope_theta, ...) or null', v);
    return isObj(v) ? { ...v } : { rope_type: 'default' };
  };
  const full = part('full_attention'), sliding = part('sliding_attention');
  const scaling = j.rope_scaling;
  chk(scaling === undefined || scaling === null || isObj(scaling), 'rope_scaling', 'an object or null', scaling);
  if (isObj(scaling)) Object.assign(full, scaling);
  full.rope_theta ??= j.rope_theta ?? 1e6;
  sliding.rope_theta ??= j.rope_local_base_freq ?? 1e4;
  return {
    full: parseRope(j, 'gemma3', headDim, maxPos, { where: 'rope_parameters.full_attention', params: full }),
    sliding: parseRope(j, 'gemma3', headDim, maxPos, { where: 'rope_parameters.sliding_attention', params: sliding }),
  };
}

/**
 * Gemma 2, Gemma 3 and gpt-oss: which layers slide: layer_types, else every layer but each period-th
 * (Gemma 2 and gpt-oss: 2, sliding on even layers; Gemma 3: sliding_window_pattern, default 6), as
 * their config classes fill layer_types in.
 */
function alternatingWindows(j: Json, numLayers: number, defaultWindow: number, period = 2): (number | null)[] {
  const window = posInt(j, 'sliding_window', defaultWindow);
  let types: unknown = j.layer_types;
  if (types === undefined || types === null) types = Array.from({ length: numLayers }, (_, i) => ((i + 1) % period ? 'sliding_attention' : 'full_attention'));
  chk(
    Array.isArray(types) && types.length === numLayers && types.every((t) => t === 'full_attention' || t === 'sliding_attention'),
    'layer_types',
    `${numLayers} entries, each 'full_attention' or 'sliding_attention'`,
    types,
  );
  return (types as string[]).map((t) => (t === 'sliding_attention' ? window : null));
}

/** A soft-capping value: a positive number, or null / absent-with-null-default for none. */
function softcap(j: Json, key: string, def: number | null): number | null {
  const v = j[key] === undefined ? def : j[key];
  if (v === null) return null;
  chk(typeof v === 'number' && Number.isFinite(v), key, 'a number or null', v);
  return (v as number) > 0 ? (v as number) : null;
}

/** gpt-oss's routed experts (GptOssMLP: every layer), as MoeConfig. */
function gptOssMoe(j: Json, intermediateSize: number): MoeConfig {
  const numRoutedExperts = posInt(j, 'num_local_experts', 128);
  const numExpertsPerTok = posInt(j, 'num_experts_per_tok', 4);
  chk(numExpertsPerTok <= numRoutedExperts, 'num_experts_per_tok', `at most num_local_experts (${numRoutedExperts})`, numExpertsPerTok);
  return {
    numRoutedExperts, numExpertsPerTok, numSharedExperts: 0, moeIntermediateSize: intermediateSize, firstKDenseReplace: 0, moeLayerFreq: 1,
    // Top-k by logit, then a softmax over the k chosen: the same ids and weights as a softmax over all
    // experts renormalized over the chosen ones.
    topkMethod: 'greedy', scoringFunc: 'softmax', nGroup: null, topkGroup: null, normTopkProb: true, routedScalingFactor: 1,
    eScoreCorrectionBias: false,
    // GptOssExperts: alpha is a constant of the module, the limit a config key.
    gptOss: { swigluLimit: posNum(j, 'swiglu_limit', 7.0), swigluAlpha: 1.702, mxfp4: isObj(j.quantization_config) && j.quantization_config.quant_method === 'mxfp4' },
  };
}

/**
 * Qwen2.5-VL: the text model's keys (transformers 5 nests them in text_config; Hub configs keep them at
 * the top level) with M-RoPE's mrope_section taken out of the RoPE dict (rope_parameters, or Hub's
 * rope_scaling {"type": "mrope"}), which leaves default RoPE of theta.
 */
function qwenVlText(j: Json): { text: Json; section: [number, number, number] } {
  chk(j.text_config === undefined || j.text_config === null || isObj(j.text_config), 'text_config', 'an object (the text model of Qwen2.5-VL)', j.text_config);
  const text: Json = isObj(j.text_config) ? { ...j, ...j.text_config } : { ...j };
  delete text.text_config;
  delete text.vision_config;
  const useScaling = isObj(text.rope_scaling) && Object.keys(text.rope_scaling).length > 0;
  const where = useScaling ? 'rope_scaling' : 'rope_parameters';
  const rp = useScaling ? text.rope_scaling : text.rope_parameters;
  chk(isObj(rp), where, 'an object with mrope_section (Qwen2.5-VL\'s multimodal RoPE)', rp);
  const sec = rp.mrope_section;
  chk(Array.isArray(sec) && sec.length === 3 && sec.every((x) => Number.isInteger(x) && (x as number) > 0), `${where}.mrope_section`,
    'three positive integers (rotary frequencies taking their angle from t, h and w)', sec);
  const type = rp.rope_type ?? rp.type ?? 'default';
  chk(type === 'default' || type === 'mrope', `${where}.rope_type`, "'default' or 'mrope' (Qwen2.5-VL's M-RoPE over default frequencies)", type);
  const rest: Json = { ...rp, rope_type: 'default' };
  delete rest.mrope_section;
  delete rest.type;
  text[where] = rest;
  return { text, section: sec as [number, number, number] };
}

/** Gemma 3's vision_config (SigLIP) and the top-level image keys (Gemma3ForConditionalGeneration). */
function siglipVision(j: Json): SiglipVisionConfig {
  const v = j.vision_config;
  chk(isObj(v), 'vision_config', 'an object (Gemma 3\'s SigLIP vision tower)', v);
  const at = (k: string) => `vision_config.${k}`;
  const vi = (k: string, def: number) => {
    const x = v[k] === undefined ? def : v[k];
    chk(typeof x === 'number' && Number.isInteger(x) && x > 0, at(k), 'a positive integer', x);
    return x as number;
  };
  const hiddenSize = vi('hidden_size', 1152), numHeads = vi('num_attention_heads', 16);
  chk(hiddenSize % numHeads === 0, at('hidden_size'), `a multiple of num_attention_heads (${numHeads})`, hiddenSize);
  const imageSize = vi('image_size', 896), patchSize = vi('patch_size', 14);
  chk(imageSize % patchSize === 0, at('image_size'), `a multiple of patch_size (${patchSize})`, imageSize);
  const act = v.hidden_act ?? 'gelu_pytorch_tanh';
  chk(act === 'gelu_pytorch_tanh', at('hidden_act'), "'gelu_pytorch_tanh'", act);
  chk(v.vision_use_head === undefined || v.vision_use_head === false, at('vision_use_head'), 'false (Gemma 3 uses no pooling head)', v.vision_use_head);
  const eps = v.layer_norm_eps === undefined ? 1e-6 : v.layer_norm_eps;
  chk(typeof eps === 'number' && eps > 0, at('layer_norm_eps'), 'a positive number', eps);
  const tokens = posInt(j, 'mm_tokens_per_image', 256);
  const side = Math.round(Math.sqrt(tokens)), grid = imageSize / patchSize;
  chk(side * side === tokens && grid % side === 0, 'mm_tokens_per_image', `a square number whose side divides the patch grid's (${grid})`, tokens);
  const imageTokenId = tokenId(j, 'image_token_index', 262144);
  chk(imageTokenId !== null, 'image_token_index', 'a token id', imageTokenId);
  return {
    hiddenSize, intermediateSize: vi('intermediate_size', 4304), numLayers: vi('num_hidden_layers', 27), numHeads, headDim: hiddenSize / numHeads,
    numChannels: vi('num_channels', 3), imageSize, patchSize, layerNormEps: eps, tokensPerImage: tokens, imageTokenId,
    boiTokenId: tokenId(j, 'boi_token_index', 255999), eoiTokenId: tokenId(j, 'eoi_token_index', 256000),
  };
}

/** Qwen2.5-VL's vision_config and the image token ids of the top-level config. */
function qwenVision(j: Json): QwenVisionConfig {
  const v = j.vision_config;
  chk(isObj(v), 'vision_config', 'an object (Qwen2.5-VL\'s vision tower)', v);
  const at = (k: string) => `vision_config.${k}`;
  const vi = (k: string, def?: number) => {
    const x = v[k] === undefined ? def : v[k];
    chk(typeof x === 'number' && Number.isInteger(x) && x > 0, at(k), def === undefined ? 'a positive integer (required)' : 'a positive integer', x);
    return x as number;
  };
  const depth = vi('depth', 32), hiddenSize = vi('hidden_size', 3584), numHeads = vi('num_heads', 16);
  chk(hiddenSize % numHeads === 0, at('hidden_size'), `a multiple of num_heads (${numHeads})`, hiddenSize);
  const headDim = hiddenSize / numHeads;
  chk(headDim % 4 === 0, at('num_heads'), 'heads of a multiple of 4 dims (the 2-D rotary splits a head\'s rotary half between rows and columns)', numHeads);
  const act = v.hidden_act ?? 'silu';
  chk(act === 'silu', at('hidden_act'), "'silu'", act);
  const full = v.fullatt_block_indexes ?? [7, 15, 23, 31];
  chk(Array.isArray(full) && full.every((i) => Number.isInteger(i) && (i as number) >= 0 && (i as number) < depth), at('fullatt_block_indexes'),
    `a list of block indices below depth (${depth})`, full);
  const rp = v.rope_parameters;
  const theta = isObj(rp) && rp.rope_theta !== undefined ? rp.rope_theta : 10000;
  chk(typeof theta === 'number' && theta > 0, at('rope_parameters.rope_theta'), 'a positive number', theta);
  const merge = vi('spatial_merge_size', 2), patch = vi('patch_size', 14), window = vi('window_size', 112);
  chk(window % (merge * patch) === 0, at('window_size'), `a multiple of spatial_merge_size × patch_size (${merge * patch})`, window);
  const outHiddenSize = vi('out_hidden_size', 3584);
  const imageTokenId = tokenId(j, 'image_token_id', 151655);
  chk(imageTokenId !== null, 'image_token_id', 'a token id', imageTokenId);
  return {
    depth, hiddenSize, numHeads, headDim, intermediateSize: vi('intermediate_size', 3420), outHiddenSize, inChannels: vi('in_channels', 3),
    patchSize: patch, temporalPatchSize: vi('temporal_patch_size', 2), spatialMergeSize: merge, windowSize: window,
    fullattBlockIndexes: full as number[], ropeTheta: theta, rmsEps: 1e-6, imageTokenId,
    visionStartTokenId: tokenId(j, 'vision_start_token_id', 151652), visionEndTokenId: tokenId(j, 'vision_end_token_id', 151653),
  };
}

/**
 * LFM2's layer kinds as Lfm2Config builds them: layer_types ('conv' | 'full_attention'), else the older
 * full_attn_idxs (the attention layers' indices; absent: every layer attention). true: a conv layer.
 */
function lfm2ConvLayers(j: Json, numLayers: number): boolean[] {
  const types = j.layer_types;
  if (types !== undefined && types !== null) {
    chk(Array.isArray(types) && types.length === numLayers && types.every((t) => t === 'conv' || t === 'full_attention'),
      'layer_types', `${numLayers} entries, each 'conv' or 'full_attention'`, types);
    return (types as string[]).map((t) => t === 'conv');
  }
  const idx = j.full_attn_idxs ?? Array.from({ length: numLayers }, (_, i) => i);
  chk(Array.isArray(idx) && idx.every((i) => Number.isInteger(i) && (i as number) >= 0 && (i as number) < numLayers),
    'full_attn_idxs', `a list of layer indices below ${numLayers}`, idx);
  const attn = new Set(idx as number[]);
  return Array.from({ length: numLayers }, (_, i) => !attn.has(i));
}

/**
 * LFM2's feed-forward width (Lfm2MLP): with block_auto_adjust_ff_dim, int(2·I/3), times
 * block_ffn_dim_multiplier (int again) when given, rounded up to a multiple of block_multiple_of;
 * else intermediate_size as it is.
 */
function lfm2FfWidth(j: Json, intermediate: number): number {
  if (!bool(j, 'block_auto_adjust_ff_dim', true)) return intermediate;
  let w = Math.trunc((2 * intermediate) / 3);
  const mult = j.block_ffn_dim_multiplier === undefined ? 1.0 : j.block_ffn_dim_multiplier;
  if (mult !== null) {
    chk(typeof mult === 'number' && Number.isFinite(mult) && mult > 0, 'block_ffn_dim_multiplier', 'a positive number or null', mult);
    w = Math.trunc((mult as number) * w);
  }
  const m = posInt(j, 'block_multiple_of', 256);
  w = m * Math.ceil(w / m);
  chk(w > 0, 'intermediate_size', 'a size whose adjusted feed-forward width (block_auto_adjust_ff_dim) is positive', intermediate);
  return w;
}

/** Normalizes a parsed config.json of a supported architecture; throws naming the key on anything invalid. */
export function parseConfig(json: object): ModelConfig {
  chk(isObj(json), 'config', 'a parsed config.json object', json);
  let j = json as Json;
  const architecture = architectureOf(j);
  const family = FAMILY[architecture];
  let mrope: ModelConfig['mrope'] = null, vision: QwenVisionConfig | null = null, siglip: SiglipVisionConfig | null = null;
  if (architecture === 'Qwen2_5_VLForConditionalGeneration') {
    vision = qwenVision(j);
    const { text, section } = qwenVlText(j);
    j = text;
    mrope = { section };
  }
  if (architecture === 'Gemma3ForConditionalGeneration') {
    siglip = siglipVision(j);
    // The text model's keys nest in text_config (the top level's tie_word_embeddings and token ids apply too).
    chk(isObj(j.text_config), 'text_config', 'an object (Gemma 3\'s text model)', j.text_config);
    const text: Json = { ...j, ...j.text_config };
    delete text.text_config;
    delete text.vision_config;
    j = text;
  }
  const deepseek = family === 'deepseek_v2' || family === 'deepseek_v3';
  const gemma2 = family === 'gemma2', gemma3 = family === 'gemma3', gptOss = family === 'gpt_oss';
  // Gemma 2 and 3 share the layer: (1 + w) norms, four a layer, the scaled embedding, GELU-tanh, query_pre_attn_scalar.
  const gemma = gemma2 || gemma3;
  const d = DEFAULTS[family];
  // GptOssConfig's RoPE when the config names none: the released checkpoints' YaRN.
  if (gptOss && !isObj(j.rope_scaling) && !isObj(j.rope_parameters)) {
    j = { ...j, rope_parameters: { rope_type: 'yarn', factor: 32.0, beta_fast: 32.0, beta_slow: 1.0, truncate: false, original_max_position_embeddings: 4096, rope_theta: j.rope_theta ?? 150000 } };
  }

  const vocabSize = posInt(j, 'vocab_size');
  const hiddenSize = posInt(j, 'hidden_size');
  const lfm2 = family === 'lfm2';
  const intermediateSize = lfm2 ? lfm2FfWidth(j, posInt(j, 'intermediate_size')) : posInt(j, 'intermediate_size');
  const numLayers = posInt(j, 'num_hidden_layers');
  const numHeads = posInt(j, 'num_attention_heads');
  // Gemma3TextConfig's own default is 4 key/value heads; elsewhere as many as the query heads.
  const numKvHeads = j.num_key_value_heads === undefined || j.num_key_value_heads === null ? (gemma3 ? 4 : numHeads) : posInt(j, 'num_key_value_heads');
  if (!deepseek) chk(numHeads % numKvHeads === 0, 'num_key_value_heads', `a divisor of num_attention_heads (${numHeads})`, numKvHeads);
  let hiddenAct: 'silu' | 'gelu_tanh' = 'silu';
  if (gemma) {
    // Gemma2MLP and Gemma3MLP apply ACT2FN[hidden_activation].
    const act = j.hidden_activation ?? 'gelu_pytorch_tanh';
    chk(act === 'gelu_pytorch_tanh', 'hidden_activation', "'gelu_pytorch_tanh'", act);
    hiddenAct = 'gelu_tanh';
  } else if (!gptOss) {
    // (gpt-oss's experts use their own activation whatever hidden_act says.)
    const act = j.hidden_act ?? 'silu';
    chk(act === 'silu', 'hidden_act', "'silu'", act);
  }
  const maxPositionEmbeddings = posInt(j, 'max_position_embeddings', d.maxPositionEmbeddings);
  // Lfm2Config names its RMSNorm epsilon norm_eps.
  const rmsEps = lfm2 ? posNum(j, 'norm_eps', 1e-5) : posNum(j, 'rms_norm_eps', gptOss ? 1e-5 : 1e-6);
  const tieWordEmbeddings = bool(j, 'tie_word_embeddings', gemma || lfm2);
  let convLayers: boolean[] | null = null;
  let convLCache: number | null = null;
  if (lfm2) {
    convLayers = lfm2ConvLayers(j, numLayers);
    convLCache = posInt(j, 'conv_L_cache', 3);
    chk(convLCache >= 2, 'conv_L_cache', 'at least 2 (a convolution over the previous inputs)', convLCache);
    // conv_bias puts biases on in_proj, the convolution and out_proj; no released LFM2 has them.
    chk(!bool(j, 'conv_bias', false), 'conv_bias', 'false (convolution biases are not supported)', j.conv_bias);
    if (!convLayers.some(Boolean)) convLCache = null;
  }

  let mla: MlaConfig | null = null;
  let headDim: number;
  if (deepseek) {
    const qkNopeHeadDim = posInt(j, 'qk_nope_head_dim', 128);
    const qkRopeHeadDim = posInt(j, 'qk_rope_head_dim', 64);
    chk(qkRopeHeadDim % 2 === 0, 'qk_rope_head_dim', 'an even number', qkRopeHeadDim);
    mla = {
      qLoraRank: posIntOrNull(j, 'q_lora_rank', 1536),
      kvLoraRank: posInt(j, 'kv_lora_rank', 512),
      qkNopeHeadDim,
      qkRopeHeadDim,
      vHeadDim: posInt(j, 'v_head_dim', 128),
      qkHeadDim: qkNopeHeadDim + qkRopeHeadDim,
    };
    headDim = qkRopeHeadDim; // both DeepSeek configs overwrite head_dim with it
  } else if (j.head_dim !== undefined && j.head_dim !== null) {
    headDim = posInt(j, 'head_dim');
  } else if ((family === 'qwen3' || gemma || gptOss) && j.head_dim === undefined) {
    headDim = gemma ? 256 : gptOss ? 64 : 128; // the config classes' own defaults, not hidden/heads
  } else {
    chk(hiddenSize % numHeads === 0, 'hidden_size', `a multiple of num_attention_heads (${numHeads}) when head_dim is not given`, hiddenSize);
    headDim = hiddenSize / numHeads;
  }
  if (!deepseek) chk(headDim % 2 === 0, 'head_dim', 'an even number (RoPE rotates pairs)', headDim);

  let rope: RopeConfig, slidingRope: RopeConfig | null = null;
  if (gemma3) {
    ({ full: rope, sliding: slidingRope } = gemma3Rope(j, headDim, maxPositionEmbeddings));
    // EmbeddingGemma's encoder (Gemma3TextModel) attends both ways; a causal LM never does.
    chk(bool(j, 'use_bidirectional_attention', false) === false, 'use_bidirectional_attention', 'false (Gemma3ForCausalLM attends causally)', j.use_bidirectional_attention);
  } else rope = parseRope(j, family, headDim, maxPositionEmbeddings);

  let attentionScale = Math.pow(headDim, -0.5);
  if (gemma) attentionScale = Math.pow(posNum(j, 'query_pre_attn_scalar', 256), -0.5);
  if (mla) {
    attentionScale = Math.pow(mla.qkHeadDim, -0.5);
    // DeepseekV3Attention (not V2) folds YaRN's mscale² into the softmax scale for any scaled rope.
    if (family === 'deepseek_v3' && rope.type !== 'default' && rope.mscaleAllDim) {
      chk(rope.factor !== null, 'rope_parameters.factor', 'a number (mscale_all_dim scales the softmax by it)', rope.factor);
      const m = yarnGetMscale(rope.factor!, rope.mscaleAllDim);
      attentionScale = attentionScale * m * m;
    }
  }

  const attnBiasFlag = bool(j, 'attention_bias', gptOss);
  const attentionBias =
    family === 'qwen2'
      ? { qkv: true, o: false }
      : family === 'mistral'
        ? { qkv: false, o: false }
        : { qkv: attnBiasFlag, o: attnBiasFlag };
  const mlpBias = family === 'llama' || family === 'deepseek_v2' || family === 'smollm3' ? bool(j, 'mlp_bias', false) : false;

  let windows: (number | null)[];
  if (family === 'mistral') {
    const w = posIntOrNull(j, 'sliding_window', 4096);
    windows = Array.from({ length: numLayers }, () => w);
  } else if (family === 'qwen2' || family === 'qwen3' || family === 'qwen3_moe') windows = qwenWindows(j, numLayers);
  else if (gemma2 || gptOss) windows = alternatingWindows(j, numLayers, gemma2 ? 4096 : 128);
  else if (gemma3) {
    // Gemma3TextConfig fills layer_types in from sliding_window_pattern (transformers 5 writes it as _sliding_window_pattern).
    const key = j.sliding_window_pattern !== undefined ? 'sliding_window_pattern' : '_sliding_window_pattern';
    windows = alternatingWindows(j, numLayers, 4096, posInt(j, key, 6));
  }
  else if (family === 'smollm3') windows = smolWindows(j, numLayers);
  else windows = Array.from({ length: numLayers }, () => null);
  const noRope = family === 'smollm3' ? smolNoRope(j, numLayers) : null;

  let moe: MoeConfig | null = null;
  let moeLayers: boolean[] = Array.from({ length: numLayers }, () => false);
  if (family === 'deepseek_v2' || family === 'deepseek_v3') ({ moe, layers: moeLayers } = parseMoe(j, family, numLayers));
  if (gptOss) {
    moe = gptOssMoe(j, intermediateSize);
    moeLayers = moeLayers.map(() => true);
  }
  if (family === 'qwen3_moe') ({ moe, layers: moeLayers } = qwen3Moe(j, numLayers));

  const eos = j.eos_token_id === undefined ? d.eos : j.eos_token_id;
  const eosTokenIds: number[] = [];
  if (eos !== null) {
    const list = Array.isArray(eos) ? eos : [eos];
    for (const e of list) {
      chk(typeof e === 'number' && Number.isInteger(e) && e >= 0, 'eos_token_id', 'a token id, a list of them, or null', eos);
      eosTokenIds.push(e as number);
    }
  }
  const dtype = j.dtype ?? j.torch_dtype ?? null;
  if (mrope) {
    const sum = mrope.section[0] + mrope.section[1] + mrope.section[2];
    chk(sum === rope.rotaryDim / 2, 'rope_parameters.mrope_section', `sections summing to head_dim / 2 (${rope.rotaryDim / 2})`, mrope.section);
    chk(vision!.outHiddenSize === hiddenSize, 'vision_config.out_hidden_size', `the text model's hidden_size (${hiddenSize})`, vision!.outHiddenSize);
  }

  return {
    architecture,
    family,
    vocabSize,
    hiddenSize,
    numLayers,
    numHeads,
    numKvHeads,
    headDim,
    intermediateSize,
    rmsEps,
    tieWordEmbeddings,
    attentionBias,
    mlpBias,
    qkNorm: family === 'qwen3' || family === 'qwen3_moe' || gemma3 || lfm2,
    hiddenAct,
    // Gemma 3 has no soft caps by default (and none in the released checkpoints); its modules apply them when set.
    attnSoftcap: gemma ? softcap(j, 'attn_logit_softcapping', gemma2 ? 50.0 : null) : null,
    finalLogitSoftcap: gemma ? softcap(j, 'final_logit_softcapping', gemma2 ? 30.0 : null) : null,
    embedScale: gemma ? Math.fround(Math.sqrt(hiddenSize)) : null,
    sandwichNorms: gemma,
    sinks: gptOss,
    layers: windows.map((slidingWindow, i) => ({ slidingWindow, moe: moeLayers[i]!, ...(noRope?.[i] ? { noRope: true } : {}), ...(convLayers?.[i] ? { conv: true } : {}) })),
    maxPositionEmbeddings,
    bosTokenId: tokenId(j, 'bos_token_id', d.bos),
    eosTokenIds,
    padTokenId: tokenId(j, 'pad_token_id', null),
    rope,
    slidingRope,
    attentionScale,
    mla,
    moe,
    dtype: typeof dtype === 'string' ? dtype : null,
    mrope,
    vision,
    siglip,
    convLCache,
  };
}
