import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parseConfig, SUPPORTED_ARCHITECTURES, type ModelConfig } from '../../src/models/config';
import { schemaName } from '../../src/models/schema';

const goldens = join(dirname(fileURLToPath(import.meta.url)), '../../../shared/goldens');
type Json = Record<string, unknown>;
const golden = (name: string): Json => JSON.parse(readFileSync(join(goldens, name, 'config.json'), 'utf8')) as Json;

/** The same config in the pre-transformers-5 form: rope_theta at the top, scaling in rope_scaling with the old `type` key. */
function olderForm(cfg: Json): Json {
  const out = { ...cfg };
  const rp = { ...(out.rope_parameters as Json) };
  delete out.rope_parameters;
  out.rope_theta = rp.rope_theta;
  delete rp.rope_theta;
  const type = rp.rope_type;
  delete rp.rope_type;
  out.rope_scaling = type === 'default' ? null : { type, ...rp };
  return out;
}

const window8 = (n: number) => Array.from({ length: n }, () => ({ slidingWindow: 8, moe: false }));

describe('parseConfig: the goldens', () => {
  it('normalizes llama-gqa', () => {
    const c = parseConfig(golden('llama-gqa'));
    expect(c).toMatchObject({
      architecture: 'LlamaForCausalLM',
      family: 'llama',
      vocabSize: 256,
      hiddenSize: 128,
      numLayers: 2,
      numHeads: 8,
      numKvHeads: 2,
      headDim: 16,
      intermediateSize: 256,
      rmsEps: 1e-5,
      tieWordEmbeddings: false,
      attentionBias: { qkv: false, o: false },
      mlpBias: false,
      qkNorm: false,
      maxPositionEmbeddings: 512,
      bosTokenId: 1,
      eosTokenIds: [2],
      padTokenId: null,
      mla: null,
      moe: null,
      dtype: 'float32',
      layers: [
        { slidingWindow: null, moe: false },
        { slidingWindow: null, moe: false },
      ],
    });
    expect(c.rope).toMatchObject({ type: 'default', theta: 10000, rotaryDim: 16, interleaved: false });
    expect(c.attentionScale).toBe(0.25);
  });

  it('normalizes mistral-window8 (MQA, a window on every layer, no biases)', () => {
    const c = parseConfig(golden('mistral-window8'));
    expect(c).toMatchObject({ family: 'mistral', numHeads: 4, numKvHeads: 1, headDim: 32, layers: window8(2), attentionBias: { qkv: false, o: false } });
    expect(c.attentionScale).toBeCloseTo(1 / Math.sqrt(32), 15);
  });

  it('normalizes qwen3-qknorm-tied (q/k norm, tied embedding, theta 1e6, no token ids)', () => {
    const c = parseConfig(golden('qwen3-qknorm-tied'));
    expect(c).toMatchObject({ family: 'qwen3', headDim: 32, qkNorm: true, tieWordEmbeddings: true, bosTokenId: null, eosTokenIds: [] });
    expect(c.rope).toMatchObject({ type: 'default', theta: 1e6, rotaryDim: 32, interleaved: false });
    expect(c.layers.every((l) => l.slidingWindow === null)).toBe(true);
  });

  it('normalizes deepseek-v2-moe (MLA without q LoRA, interleaved RoPE, layer 1 MoE, softmax greedy routing)', () => {
    const c = parseConfig(golden('deepseek-v2-moe'));
    expect(c.family).toBe('deepseek_v2');
    expect(c.mla).toEqual({ qLoraRank: null, kvLoraRank: 64, qkNopeHeadDim: 32, qkRopeHeadDim: 16, vHeadDim: 32, qkHeadDim: 48 });
    expect(c.moe).toEqual({
      numRoutedExperts: 4,
      numExpertsPerTok: 2,
      numSharedExperts: 1,
      moeIntermediateSize: 64,
      firstKDenseReplace: 1,
      moeLayerFreq: 1,
      topkMethod: 'greedy',
      scoringFunc: 'softmax',
      nGroup: null,
      topkGroup: null,
      normTopkProb: false,
      routedScalingFactor: 1,
      eScoreCorrectionBias: false,
      gptOss: null,
    });
    expect(c.layers.map((l) => l.moe)).toEqual([false, true]);
    expect(c.rope).toMatchObject({ type: 'default', rotaryDim: 16, interleaved: true });
    expect(c.attentionScale).toBe(Math.pow(48, -0.5));
  });

  it('normalizes deepseek-v3-yarn-moe (q LoRA, YaRN, mscale² in the softmax scale, grouped sigmoid routing)', () => {
    const c = parseConfig(golden('deepseek-v3-yarn-moe'));
    expect(c.family).toBe('deepseek_v3');
    expect(c.mla).toEqual({ qLoraRank: 48, kvLoraRank: 64, qkNopeHeadDim: 32, qkRopeHeadDim: 16, vHeadDim: 32, qkHeadDim: 48 });
    expect(c.moe).toMatchObject({
      numRoutedExperts: 8,
      numExpertsPerTok: 2,
      topkMethod: 'noaux_tc',
      scoringFunc: 'sigmoid',
      nGroup: 2,
      topkGroup: 1,
      normTopkProb: true,
      routedScalingFactor: 2.5,
      eScoreCorrectionBias: true,
    });
    expect(c.rope).toEqual({
      type: 'yarn',
      theta: 10000,
      rotaryDim: 16,
      interleaved: true,
      maxPositionEmbeddings: 512,
      factor: 4,
      originalMaxPositionEmbeddings: 64,
      lowFreqFactor: null,
      highFreqFactor: null,
      betaFast: 32,
      betaSlow: 1,
      mscale: 1,
      mscaleAllDim: 1,
      attentionFactor: null,
      truncate: true,
    });
    // 48^-0.5 · (0.1·1·ln 4 + 1)², by hand: 0.1443375673 · 1.1386294361² = 0.1443375673 · 1.2964769915 = 0.1871303...
    const m = 0.1 * Math.log(4) + 1;
    expect(c.attentionScale).toBeCloseTo(Math.pow(48, -0.5) * m * m, 15);
    expect(c.attentionScale).toBeCloseTo(0.1871303, 7);
  });

  it('reads the older rope_theta + rope_scaling form of every golden to the same normalized config', () => {
    for (const g of ['llama-gqa', 'mistral-window8', 'qwen3-qknorm-tied', 'deepseek-v2-moe', 'deepseek-v3-yarn-moe']) {
      const older = olderForm(golden(g));
      expect(older.rope_parameters, g).toBeUndefined();
      expect(parseConfig(older), g).toEqual(parseConfig(golden(g)));
    }
    // The Hub's V3 form: integer factor and betas, `type` only.
    const v3 = olderForm(golden('deepseek-v3-yarn-moe'));
    v3.rope_scaling = { type: 'yarn', factor: 4, beta_fast: 32, beta_slow: 1, mscale: 1, mscale_all_dim: 1, original_max_position_embeddings: 64 };
    expect(parseConfig(v3)).toEqual(parseConfig(golden('deepseek-v3-yarn-moe')));
  });

  it('supports exactly these architectures', () => {
    expect([...SUPPORTED_ARCHITECTURES]).toEqual([
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
    ]);
  });
});

const layerGoldens = join(dirname(fileURLToPath(import.meta.url)), '../../../shared/goldens-layers');
const layerGolden = (name: string): Json => JSON.parse(readFileSync(join(layerGoldens, name, 'config.json'), 'utf8')) as Json;

describe('parseConfig: the layer-type goldens (Gemma2, gpt-oss)', () => {
  it('normalizes gemma2-softcap-window (soft-capping, query_pre_attn_scalar, alternating windows, scaled embedding, GELU-tanh)', () => {
    const c = parseConfig(layerGolden('gemma2-softcap-window'));
    expect(c).toMatchObject({
      architecture: 'Gemma2ForCausalLM', family: 'gemma2', vocabSize: 256, hiddenSize: 128, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 32,
      intermediateSize: 256, rmsEps: 1e-6, tieWordEmbeddings: true, attentionBias: { qkv: false, o: false }, mlpBias: false, qkNorm: false,
      hiddenAct: 'gelu_tanh', attnSoftcap: 3, finalLogitSoftcap: 8, embedScale: Math.fround(Math.sqrt(128)), sandwichNorms: true, sinks: false,
      bosTokenId: 2, eosTokenIds: [1], padTokenId: 0, mla: null, moe: null,
      layers: [{ slidingWindow: 8, moe: false }, { slidingWindow: null, moe: false }],
    });
    expect(c.attentionScale).toBe(Math.pow(8, -0.5));
    expect(c.rope).toMatchObject({ type: 'default', theta: 10000, rotaryDim: 32, interleaved: false });
  });

  it('normalizes gptoss-sinks-window-moe (biases, sinks, YaRN without truncation, MoE on every layer)', () => {
    const c = parseConfig(layerGolden('gptoss-sinks-window-moe'));
    expect(c).toMatchObject({
      architecture: 'GptOssForCausalLM', family: 'gpt_oss', hiddenSize: 128, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 32,
      rmsEps: 1e-6, tieWordEmbeddings: false, attentionBias: { qkv: true, o: true }, sinks: true, sandwichNorms: false,
      attnSoftcap: null, finalLogitSoftcap: null, embedScale: null, bosTokenId: null, eosTokenIds: [],
      layers: [{ slidingWindow: 8, moe: true }, { slidingWindow: null, moe: true }],
    });
    expect(c.moe).toEqual({
      numRoutedExperts: 4, numExpertsPerTok: 2, numSharedExperts: 0, moeIntermediateSize: 128, firstKDenseReplace: 0, moeLayerFreq: 1,
      topkMethod: 'greedy', scoringFunc: 'softmax', nGroup: null, topkGroup: null, normTopkProb: true, routedScalingFactor: 1,
      eScoreCorrectionBias: false, gptOss: { swigluLimit: 7, swigluAlpha: 1.702, mxfp4: false },
    });
    expect(c.attentionScale).toBe(Math.pow(32, -0.5));
    expect(c.rope).toMatchObject({ type: 'yarn', theta: 150000, factor: 32, originalMaxPositionEmbeddings: 4096, betaFast: 32, betaSlow: 1, truncate: false, interleaved: false });
  });

  it("takes the config classes' defaults: Gemma2 (caps 50 and 30, scalar 256, window 4096, head_dim 256), gpt-oss (YaRN, 128 experts top 4, eps 1e-5, biases)", () => {
    const base = { vocab_size: 64, hidden_size: 64, intermediate_size: 64, num_hidden_layers: 3, num_attention_heads: 4 };
    const g = parseConfig({ architectures: ['Gemma2ForCausalLM'], ...base });
    expect(g).toMatchObject({ attnSoftcap: 50, finalLogitSoftcap: 30, headDim: 256, tieWordEmbeddings: true, bosTokenId: 2, eosTokenIds: [1],
      layers: [{ slidingWindow: 4096 }, { slidingWindow: null }, { slidingWindow: 4096 }] });
    expect(g.attentionScale).toBe(1 / 16);
    expect(parseConfig({ architectures: ['Gemma2ForCausalLM'], ...base, attn_logit_softcapping: null, final_logit_softcapping: null }))
      .toMatchObject({ attnSoftcap: null, finalLogitSoftcap: null });
    expect(() => parseConfig({ architectures: ['Gemma2ForCausalLM'], ...base, hidden_activation: 'relu' })).toThrow("parseConfig: hidden_activation: expected 'gelu_pytorch_tanh', got 'relu'");
    const o = parseConfig({ model_type: 'gpt_oss', ...base });
    expect(o).toMatchObject({ architecture: 'GptOssForCausalLM', headDim: 64, rmsEps: 1e-5, attentionBias: { qkv: true, o: true },
      layers: [{ slidingWindow: 128, moe: true }, { slidingWindow: null, moe: true }, { slidingWindow: 128, moe: true }] });
    expect(o.moe).toMatchObject({ numRoutedExperts: 128, numExpertsPerTok: 4, gptOss: { swigluLimit: 7 } });
    expect(o.rope).toMatchObject({ type: 'yarn', factor: 32, originalMaxPositionEmbeddings: 4096, truncate: false, theta: 150000 });
    expect(() => parseConfig({ model_type: 'gpt_oss', ...base, num_experts_per_tok: 200 })).toThrow('parseConfig: num_experts_per_tok: expected at most num_local_experts (128), got 200');
    expect(() => parseConfig({ model_type: 'gpt_oss', ...base, layer_types: ['full_attention'] })).toThrow('parseConfig: layer_types: expected 3 entries');
  });
});

const llama = (extra: Json = {}): Json => ({
  architectures: ['LlamaForCausalLM'],
  vocab_size: 100,
  hidden_size: 64,
  intermediate_size: 96,
  num_hidden_layers: 3,
  num_attention_heads: 4,
  ...extra,
});

describe('parseConfig: RoPE settings in both forms', () => {
  it('takes rope_scaling over rope_parameters, rope_theta from inside the dict over the top level', () => {
    const c = parseConfig(
      llama({
        rope_theta: 5e5,
        rope_scaling: { rope_type: 'llama3', factor: 8, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 8192 },
        rope_parameters: { rope_type: 'default', rope_theta: 1234 },
      }),
    );
    expect(c.rope).toMatchObject({ type: 'llama3', theta: 5e5, factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositionEmbeddings: 8192 });
    const d = parseConfig(llama({ rope_theta: 5e5, rope_parameters: { rope_type: 'linear', factor: 2, rope_theta: 1234 } }));
    expect(d.rope).toMatchObject({ type: 'linear', theta: 1234, factor: 2 });
    // An empty rope_scaling dict does not win; no RoPE keys at all means default with theta 10000.
    expect(parseConfig(llama({ rope_scaling: {}, rope_parameters: { rope_type: 'linear', factor: 3 } })).rope).toMatchObject({ type: 'linear', factor: 3 });
    expect(parseConfig(llama()).rope).toMatchObject({ type: 'default', theta: 10000, rotaryDim: 16 });
  });

  it('defaults original_max_position_embeddings as standardize_rope_params does', () => {
    const yarn = { rope_type: 'yarn', factor: 4 };
    expect(parseConfig(llama({ max_position_embeddings: 4096, rope_parameters: yarn })).rope.originalMaxPositionEmbeddings).toBe(4096);
    expect(
      parseConfig(llama({ max_position_embeddings: 4096, original_max_position_embeddings: 1024, rope_parameters: { ...yarn, original_max_position_embeddings: 2048 } })).rope
        .originalMaxPositionEmbeddings,
    ).toBe(1024);
    expect(parseConfig(llama({ rope_parameters: { rope_type: 'linear', factor: 2, original_max_position_embeddings: 77 } })).rope.originalMaxPositionEmbeddings).toBeNull();
  });

  it('rejects unsupported types and missing required keys, naming the key', () => {
    expect(() => parseConfig(llama({ rope_scaling: { type: 'longrope', short_factor: [1], long_factor: [1] } }))).toThrow(
      "parseConfig: rope_scaling.rope_type: expected one of default, linear, dynamic, yarn, llama3 (longrope and others: unsupported), got 'longrope'",
    );
    expect(() => parseConfig(llama({ rope_parameters: { rope_type: 'llama3', factor: 8, high_freq_factor: 4 } }))).toThrow(
      "parseConfig: rope_parameters.low_freq_factor: expected a number (required by rope type 'llama3'), got undefined",
    );
    expect(() => parseConfig(llama({ rope_parameters: { rope_type: 'linear' } }))).toThrow(/rope_parameters\.factor: expected a number \(required by rope type 'linear'\)/);
    expect(() => parseConfig(llama({ rope_parameters: { rope_type: 'yarn' } }))).toThrow(/rope_parameters\.factor: expected a number or null \(required by rope type 'yarn'\)/);
    expect(() => parseConfig(llama({ rope_theta: -1 }))).toThrow('parseConfig: rope_theta: expected a positive number, got -1');
    expect(() => parseConfig(llama({ partial_rotary_factor: 0.5 }))).toThrow(/partial_rotary_factor: expected 1/);
    expect(() => parseConfig(llama({ rope_parameters: { full_attention: { rope_type: 'default' } } }))).toThrow(/rope_parameters\.full_attention: expected one RoPE dict for all layers/);
  });
});

describe('parseConfig: per-architecture semantics', () => {
  it('Llama: attention_bias on q/k/v/o, mlp_bias, head_dim default, eos lists', () => {
    const c = parseConfig(llama({ attention_bias: true, mlp_bias: true, num_key_value_heads: 2, eos_token_id: [7, 9], bos_token_id: null }));
    expect(c).toMatchObject({ attentionBias: { qkv: true, o: true }, mlpBias: true, headDim: 16, numKvHeads: 2, eosTokenIds: [7, 9], bosTokenId: null });
    expect(parseConfig(llama({ head_dim: 8 })).headDim).toBe(8);
    expect(parseConfig(llama()).numKvHeads).toBe(4);
  });

  it('Mistral: no biases whatever attention_bias says; sliding_window defaults to 4096, null turns it off', () => {
    const base = { ...llama(), architectures: ['MistralForCausalLM'] };
    expect(parseConfig({ ...base, attention_bias: true }).attentionBias).toEqual({ qkv: false, o: false });
    expect(parseConfig(base).layers.map((l) => l.slidingWindow)).toEqual([4096, 4096, 4096]);
    expect(parseConfig({ ...base, sliding_window: null }).layers.map((l) => l.slidingWindow)).toEqual([null, null, null]);
    expect(parseConfig({ ...base, mlp_bias: true }).mlpBias).toBe(false);
  });

  it('Qwen2: q/k/v biases always, o never; the window on layers >= max_window_layers only when use_sliding_window', () => {
    const base = { ...llama(), architectures: ['Qwen2ForCausalLM'] };
    expect(parseConfig(base).attentionBias).toEqual({ qkv: true, o: false });
    expect(parseConfig({ ...base, attention_bias: false }).attentionBias).toEqual({ qkv: true, o: false });
    const windows = (x: Json) => parseConfig({ ...base, ...x }).layers.map((l) => l.slidingWindow);
    expect(windows({ sliding_window: 32, max_window_layers: 1 })).toEqual([null, null, null]);
    expect(windows({ use_sliding_window: true, sliding_window: 32, max_window_layers: 1 })).toEqual([null, 32, 32]);
    expect(windows({ use_sliding_window: true, sliding_window: 32 })).toEqual([null, null, null]); // max_window_layers 28
    expect(windows({ use_sliding_window: true, max_window_layers: 2 })).toEqual([null, null, 4096]);
    // layer_types wins over max_window_layers, but a window needs use_sliding_window.
    const types = ['sliding_attention', 'full_attention', 'sliding_attention'];
    expect(windows({ use_sliding_window: true, sliding_window: 16, max_window_layers: 0, layer_types: types })).toEqual([16, null, 16]);
    expect(windows({ use_sliding_window: false, sliding_window: 16, layer_types: types })).toEqual([null, null, null]);
    expect(() => windows({ layer_types: ['full_attention'] })).toThrow(/layer_types: expected 3 entries, each 'full_attention' or 'sliding_attention'/);
  });

  it('Qwen3: head_dim defaults to 128 (its config class), attention_bias on q/k/v/o', () => {
    const base = { ...llama(), architectures: ['Qwen3ForCausalLM'] };
    expect(parseConfig(base).headDim).toBe(128);
    expect(parseConfig({ ...base, head_dim: null }).headDim).toBe(16);
    expect(parseConfig({ ...base, attention_bias: true }).attentionBias).toEqual({ qkv: true, o: true });
    expect(parseConfig({ ...base, use_sliding_window: true, sliding_window: 5, max_window_layers: 2 }).layers.map((l) => l.slidingWindow)).toEqual([null, null, 5]);
  });

  it('DeepSeek: transformers defaults, V2 group-limited routing, V3 softmax scale only with mscale_all_dim', () => {
    const v2 = golden('deepseek-v2-moe');
    const g = parseConfig({ ...v2, topk_method: 'group_limited_greedy', n_group: 2, topk_group: 1, mlp_bias: true, attention_bias: true });
    expect(g.moe).toMatchObject({ topkMethod: 'group_limited_greedy', nGroup: 2, topkGroup: 1 });
    expect(g).toMatchObject({ mlpBias: true, attentionBias: { qkv: true, o: true } });
    // V2 never folds mscale into the softmax scale, even with YaRN.
    const yarn = { rope_type: 'yarn', rope_theta: 10000, factor: 4, original_max_position_embeddings: 64, mscale: 0.707, mscale_all_dim: 0.707 };
    expect(parseConfig({ ...v2, rope_parameters: yarn }).attentionScale).toBe(Math.pow(48, -0.5));
    const v3 = golden('deepseek-v3-yarn-moe');
    expect(parseConfig({ ...v3, rope_parameters: { ...yarn, mscale_all_dim: 0 } }).attentionScale).toBe(Math.pow(48, -0.5));
    const m = 0.1 * 0.707 * Math.log(4) + 1;
    expect(parseConfig({ ...v3, rope_parameters: yarn }).attentionScale).toBeCloseTo(Math.pow(48, -0.5) * m * m, 15);
    expect(parseConfig({ ...v3, rope_interleave: false }).rope.interleaved).toBe(false);
    const { q_lora_rank: _q, first_k_dense_replace: _f, ...v3Defaults } = v3;
    const d = parseConfig({ ...v3Defaults, num_hidden_layers: 5 });
    expect(d.mla!.qLoraRank).toBe(1536);
    expect(d.layers.map((l) => l.moe)).toEqual([false, false, false, true, true]);
    expect(parseConfig({ ...v3, first_k_dense_replace: 2 }).moe).toBeNull();
    expect(parseConfig({ ...v3, n_shared_experts: 0 }).moe!.numSharedExperts).toBe(0);
  });
});

describe('parseConfig: errors name the key, what was expected and what came', () => {
  const cases: [string, Json, string | RegExp][] = [
    ['an unknown architecture', { ...llama(), architectures: ['GPT2LMHeadModel'] }, `parseConfig: architectures: expected one of ${SUPPORTED_ARCHITECTURES.join(', ')}, got ['GPT2LMHeadModel']`],
    ['no architecture at all', { ...llama(), architectures: undefined }, /architectures: expected a list naming one of LlamaForCausalLM, .* \(or a matching model_type\)/],
    ['a missing hidden_size', { ...llama(), hidden_size: undefined }, 'parseConfig: hidden_size: expected a positive integer (required), got undefined'],
    ['a fractional layer count', llama({ num_hidden_layers: 2.5 }), 'parseConfig: num_hidden_layers: expected a positive integer (required), got 2.5'],
    ['a string size', llama({ vocab_size: '100' }), "parseConfig: vocab_size: expected a positive integer (required), got '100'"],
    ['kv heads not dividing heads', llama({ num_key_value_heads: 3 }), 'parseConfig: num_key_value_heads: expected a divisor of num_attention_heads (4), got 3'],
    ['hidden not a multiple of heads', llama({ hidden_size: 66 }), /hidden_size: expected a multiple of num_attention_heads \(4\) when head_dim is not given, got 66/],
    ['an odd head_dim', llama({ head_dim: 7 }), /head_dim: expected an even number/],
    ['a zero eps', llama({ rms_norm_eps: 0 }), 'parseConfig: rms_norm_eps: expected a positive number, got 0'],
    ['gelu', llama({ hidden_act: 'gelu' }), "parseConfig: hidden_act: expected 'silu', got 'gelu'"],
    ['a bad eos', llama({ eos_token_id: [1, 'x'] }), /eos_token_id: expected a token id, a list of them, or null/],
    ['a non-boolean tie', llama({ tie_word_embeddings: 'yes' }), /tie_word_embeddings: expected true or false/],
    ['moe_layer_freq 2', { ...golden('deepseek-v3-yarn-moe'), moe_layer_freq: 2 }, 'parseConfig: moe_layer_freq: expected 1 (transformers ignores other values), got 2'],
    ['n_group not dividing experts', { ...golden('deepseek-v3-yarn-moe'), n_group: 3 }, 'parseConfig: n_group: expected a divisor of n_routed_experts (8), got 3'],
    ['topk_group above n_group', { ...golden('deepseek-v3-yarn-moe'), topk_group: 3 }, 'parseConfig: topk_group: expected at most n_group (2), got 3'],
    ['unreachable top-k', { ...golden('deepseek-v3-yarn-moe'), num_experts_per_tok: 5 }, 'parseConfig: num_experts_per_tok: expected at most topk_group × experts per group (4), got 5'],
    ['a V3 greedy method', { ...golden('deepseek-v3-yarn-moe'), topk_method: 'greedy' }, 'parseConfig: topk_method: expected one of noaux_tc for deepseek_v3, got \'greedy\''],
    ['V2 sigmoid scoring', { ...golden('deepseek-v2-moe'), scoring_func: 'sigmoid' }, /scoring_func: expected 'softmax'/],
    ['V2 grouped without groups', { ...golden('deepseek-v2-moe'), topk_method: 'group_limited_greedy' }, /n_group: expected a positive integer \(topk_method 'group_limited_greedy' groups the experts\), got null/],
    ['V2 MoE without top-k', { ...golden('deepseek-v2-moe'), num_experts_per_tok: undefined }, 'parseConfig: num_experts_per_tok: expected a positive integer (required), got undefined'],
    ['a bad q_lora_rank', { ...golden('deepseek-v3-yarn-moe'), q_lora_rank: 0 }, 'parseConfig: q_lora_rank: expected a positive integer or null, got 0'],
    ['not an object', [] as unknown as Json, /parseConfig: config: expected a parsed config\.json object/],
  ];
  for (const [what, cfg, msg] of cases) {
    it(`rejects ${what}`, () => {
      expect(() => parseConfig(cfg)).toThrow(msg);
    });
  }

  it('falls back on model_type when architectures is absent', () => {
    const { architectures: _a, ...rest } = golden('mistral-window8');
    expect(parseConfig(rest).architecture).toBe('MistralForCausalLM');
  });
});

// Keep the type exported and usable by a loader.
const _typecheck: (c: ModelConfig) => number = (c) => c.layers.length;
void _typecheck;

describe('parseConfig: Qwen3-MoE', () => {
  const g = JSON.parse(readFileSync(join(goldens, '../goldens-arch/qwen3-moe/config.json'), 'utf8')) as Json;
  it('reads the golden: head_dim 48, QK-norm, layer 0 dense, 8 experts top-2 renormalized', () => {
    const c = parseConfig(g);
    expect([c.family, c.headDim, c.qkNorm, c.layers.map((l) => l.moe)]).toEqual(['qwen3_moe', 48, true, [false, true, true]]);
    expect([c.moe!.numRoutedExperts, c.moe!.numExpertsPerTok, c.moe!.moeIntermediateSize, c.moe!.normTopkProb, c.moe!.numSharedExperts]).toEqual([8, 2, 32, true, 0]);
  });
  it('takes the expert count as num_experts (Hub) or num_local_experts (transformers 5), and honours decoder_sparse_step', () => {
    const { num_local_experts: _, ...hub } = g;
    expect(parseConfig({ ...hub, num_experts: 6 }).moe!.numRoutedExperts).toBe(6);
    expect(() => parseConfig({ ...g, num_experts: 6 })).toThrow('parseConfig: num_local_experts: expected equal to num_experts (6) when both are given, got 8');
    expect(parseConfig({ ...g, mlp_only_layers: [], decoder_sparse_step: 2 }).layers.map((l) => l.moe)).toEqual([false, true, false]);
    expect(parseConfig({ ...g, mlp_only_layers: [0, 1, 2] }).moe).toBe(null);
    expect(() => parseConfig({ ...g, mlp_only_layers: 'none' })).toThrow('parseConfig: mlp_only_layers: expected a list of layer indices');
    expect(() => parseConfig({ ...g, num_experts_per_tok: 9 })).toThrow('parseConfig: num_experts_per_tok: expected at most num_local_experts (8), got 9');
  });
});

describe('parseConfig: Gemma 3 text', () => {
  const g = JSON.parse(readFileSync(join(goldens, '../goldens-arch/gemma3-text/config.json'), 'utf8')) as Json;
  it('reads the golden: QK-norm, [sliding, sliding, full, sliding] window 8, bases 1e4 / 1e6, scale 24^-0.5, no soft caps', () => {
    const c = parseConfig(g);
    expect(c).toMatchObject({
      architecture: 'Gemma3ForCausalLM', family: 'gemma3', headDim: 32, numKvHeads: 2, qkNorm: true, sandwichNorms: true, hiddenAct: 'gelu_tanh',
      attnSoftcap: null, finalLogitSoftcap: null, embedScale: Math.fround(Math.sqrt(128)), tieWordEmbeddings: true, bosTokenId: 2, eosTokenIds: [1],
      layers: [{ slidingWindow: 8 }, { slidingWindow: 8 }, { slidingWindow: null }, { slidingWindow: 8 }],
    });
    expect(c.attentionScale).toBe(Math.pow(24, -0.5));
    expect([c.rope.type, c.rope.theta, c.slidingRope!.type, c.slidingRope!.theta]).toEqual(['default', 1e6, 'default', 1e4]);
  });
  it('reads the older form (rope_theta, rope_local_base_freq, sliding_window_pattern, rope_scaling on the full layers only) and the defaults', () => {
    const { layer_types: _t, rope_parameters: _r, _sliding_window_pattern: _p, ...rest } = g;
    const older = parseConfig({ ...rest, rope_theta: 1e6, rope_local_base_freq: 1e4, sliding_window_pattern: 3 });
    expect(older).toEqual(parseConfig(g));
    // Gemma 3 4B's form: linear scaling 8 on the full layers; the sliding layers stay default.
    const scaled = parseConfig({ ...rest, rope_scaling: { rope_type: 'linear', factor: 8 } });
    expect([scaled.rope.type, scaled.rope.factor, scaled.rope.theta, scaled.slidingRope!.type, scaled.slidingRope!.theta]).toEqual(['linear', 8, 1e6, 'default', 1e4]);
    // Pattern 6 by default (every sixth layer full), window 4096, scalar 256, 4 kv heads.
    const base = { model_type: 'gemma3_text', vocab_size: 64, hidden_size: 64, intermediate_size: 64, num_hidden_layers: 7, num_attention_heads: 8 };
    const d = parseConfig(base);
    expect(d.layers.map((l) => l.slidingWindow)).toEqual([4096, 4096, 4096, 4096, 4096, null, 4096]);
    expect([d.architecture, d.numKvHeads, d.headDim, d.attentionScale, d.attnSoftcap, d.finalLogitSoftcap]).toEqual(['Gemma3ForCausalLM', 4, 256, 1 / 16, null, null]);
    expect(parseConfig({ ...base, final_logit_softcapping: 30 }).finalLogitSoftcap).toBe(30);
  });
  it('refuses what Gemma3ForCausalLM does not compute, by name', () => {
    const rp = g.rope_parameters as Json;
    expect(() => parseConfig({ ...g, rope_parameters: { rope_type: 'default', rope_theta: 1e6 } }))
      .toThrow("parseConfig: rope_parameters.rope_type: expected no such key: Gemma 3 keys its RoPE by layer type ('full_attention', 'sliding_attention'), got 'default'");
    expect(() => parseConfig({ ...g, rope_parameters: { ...rp, sliding_attention: { rope_type: 'longrope', rope_theta: 1e4 } } }))
      .toThrow('parseConfig: rope_parameters.sliding_attention.rope_type: expected one of default, linear, dynamic, yarn, llama3');
    expect(() => parseConfig({ ...g, use_bidirectional_attention: true })).toThrow('parseConfig: use_bidirectional_attention: expected false (Gemma3ForCausalLM attends causally), got true');
    expect(() => parseConfig({ ...g, layer_types: ['sliding_attention'] })).toThrow('parseConfig: layer_types: expected 4 entries');
    expect(() => parseConfig({ ...g, hidden_activation: 'silu' })).toThrow("parseConfig: hidden_activation: expected 'gelu_pytorch_tanh', got 'silu'");
  });
});

describe('parseConfig: Qwen2.5-VL', () => {
  const g = JSON.parse(readFileSync(join(goldens, '../goldens-arch/qwen2.5-vl/config.json'), 'utf8')) as Json;
  const text = g.text_config as Json;
  it('reads the golden: a Qwen2 text model (text_config) with M-RoPE sections [4, 6, 6], and the vision tower', () => {
    const c = parseConfig(g);
    expect([c.architecture, c.family, c.hiddenSize, c.numLayers, c.headDim, c.attentionBias.qkv, c.tieWordEmbeddings, c.rope.type, c.rope.theta])
      .toEqual(['Qwen2_5_VLForConditionalGeneration', 'qwen2', 128, 2, 32, true, false, 'default', 1e6]);
    expect(c.mrope).toEqual({ section: [4, 6, 6] });
    expect(c.vision).toMatchObject({ depth: 2, hiddenSize: 64, numHeads: 4, headDim: 16, intermediateSize: 128, outHiddenSize: 128, patchSize: 8,
      temporalPatchSize: 2, spatialMergeSize: 2, windowSize: 32, fullattBlockIndexes: [1], ropeTheta: 10000, imageTokenId: 251, visionStartTokenId: 249 });
  });
  it('reads the Hub form: text keys at the top level, rope_scaling {type: mrope, mrope_section}', () => {
    const { text_config: _t, ...top } = g;
    const { rope_parameters: _r, ...keys } = text;
    const hub = { ...top, ...keys, model_type: 'qwen2_5_vl', rope_theta: 1e6, rope_scaling: { type: 'mrope', mrope_section: [4, 6, 6] } };
    const c = parseConfig(hub);
    expect([c.hiddenSize, c.rope.type, c.rope.theta, c.mrope]).toEqual([128, 'default', 1e6, { section: [4, 6, 6] }]);
  });
  it('refuses a missing or wrong mrope_section, a missing vision_config, a merger of another width', () => {
    const rp = text.rope_parameters as Json;
    const withRope = (r: Json) => ({ ...g, text_config: { ...text, rope_parameters: r } });
    expect(() => parseConfig(withRope({ rope_theta: 1e6 }))).toThrow('parseConfig: rope_parameters.mrope_section: expected three positive integers');
    expect(() => parseConfig(withRope({ ...rp, mrope_section: [4, 6, 8] }))).toThrow('parseConfig: rope_parameters.mrope_section: expected sections summing to head_dim / 2 (16), got [4, 6, 8]');
    expect(() => parseConfig(withRope({ ...rp, rope_type: 'yarn' }))).toThrow("parseConfig: rope_parameters.rope_type: expected 'default' or 'mrope'");
    const { vision_config: _v, ...noVision } = g;
    expect(() => parseConfig(noVision)).toThrow("parseConfig: vision_config: expected an object (Qwen2.5-VL's vision tower)");
    expect(() => parseConfig({ ...g, vision_config: { ...(g.vision_config as Json), out_hidden_size: 64 } }))
      .toThrow("parseConfig: vision_config.out_hidden_size: expected the text model's hidden_size (128), got 64");
    expect(() => parseConfig({ ...g, vision_config: { ...(g.vision_config as Json), window_size: 20 } }))
      .toThrow('parseConfig: vision_config.window_size: expected a multiple of spatial_merge_size × patch_size (16), got 20');
  });
});

const archGolden = (name: string): Json => JSON.parse(readFileSync(join(goldens, '../goldens-arch', name, 'config.json'), 'utf8')) as Json;

describe('parseConfig: Gemma 3 with images (goldens-arch/gemma3-vision)', () => {
  const g = archGolden('gemma3-vision');
  it('reads the text model from text_config and the SigLIP tower, projector and image tokens from the top level', () => {
    const c = parseConfig(g);
    expect(c.architecture).toBe('Gemma3ForConditionalGeneration');
    expect(c.family).toBe('gemma3');
    expect([c.numLayers, c.hiddenSize, c.numHeads, c.numKvHeads, c.headDim, c.vocabSize]).toEqual([3, 128, 4, 2, 32, 256]);
    expect(c.layers.map((l) => l.slidingWindow)).toEqual([8, null, 8]);
    expect(c.tieWordEmbeddings).toBe(true);
    expect(c.vision ?? null).toBeNull();
    expect(c.siglip).toEqual({ hiddenSize: 64, intermediateSize: 128, numLayers: 2, numHeads: 4, headDim: 16, numChannels: 3, imageSize: 64, patchSize: 8,
      layerNormEps: 1e-6, tokensPerImage: 16, imageTokenId: 255, boiTokenId: 253, eoiTokenId: 254 });
  });
  it('names the checkpoint layouts of the Hub and of transformers as the schema does, and refuses bad vision keys by name', () => {
    const c = parseConfig(g);
    expect(schemaName(c, 'language_model.model.layers.0.mlp.up_proj.weight')).toBe('model.layers.0.mlp.up_proj.weight');
    expect(schemaName(c, 'model.language_model.norm.weight')).toBe('model.norm.weight');
    expect(schemaName(c, 'language_model.lm_head.weight')).toBe('lm_head.weight');
    expect(schemaName(c, 'vision_tower.vision_model.post_layernorm.bias')).toBe('vision_tower.post_layernorm.bias');
    expect(schemaName(c, 'model.vision_tower.vision_model.encoder.layers.1.mlp.fc1.weight')).toBe('vision_tower.encoder.layers.1.mlp.fc1.weight');
    expect(schemaName(c, 'model.multi_modal_projector.mm_soft_emb_norm.weight')).toBe('multi_modal_projector.mm_soft_emb_norm.weight');
    expect(schemaName(parseConfig(archGolden('gemma3-text')), 'language_model.model.norm.weight')).toBe('language_model.model.norm.weight');
    expect(() => parseConfig({ ...g, mm_tokens_per_image: 15 })).toThrow(/mm_tokens_per_image: expected a square number whose side divides the patch grid's \(8\), got 15/);
    expect(() => parseConfig({ ...g, vision_config: { ...(g.vision_config as Json), hidden_act: 'relu' } })).toThrow(/vision_config\.hidden_act: expected 'gelu_pytorch_tanh'/);
    expect(() => parseConfig({ ...g, text_config: undefined })).toThrow(/text_config: expected an object/);
  });
});

describe('parseConfig: LFM2 (goldens-arch/lfm2)', () => {
  it('reads the conv layers, the kernel width, norm_eps, the adjusted feed-forward width and the q/k norms', () => {
    const c = parseConfig(archGolden('lfm2'));
    expect(c.architecture).toBe('Lfm2ForCausalLM');
    expect(c.layers.map((l) => !!l.conv)).toEqual([true, true, false, true]);
    expect(c.convLCache).toBe(3);
    expect(c.rmsEps).toBe(1e-5);
    // int(2·160/3) = 106, × 1.0, up to a multiple of 32: 128 (README).
    expect(c.intermediateSize).toBe(128);
    expect(c.qkNorm).toBe(true);
    expect(c.tieWordEmbeddings).toBe(true);
    expect(c.rope.theta).toBe(1e6);
    expect(c.headDim).toBe(32);
  });

  it('applies the feed-forward rule as Lfm2MLP (multiplier, multiple, auto-adjust off) and the older full_attn_idxs', () => {
    const base = archGolden('lfm2');
    expect(parseConfig({ ...base, block_ffn_dim_multiplier: 1.5 }).intermediateSize).toBe(160); // int(1.5·106) = 159 → 160
    expect(parseConfig({ ...base, block_multiple_of: 256 }).intermediateSize).toBe(256);
    expect(parseConfig({ ...base, block_ffn_dim_multiplier: null }).intermediateSize).toBe(128);
    expect(parseConfig({ ...base, block_auto_adjust_ff_dim: false }).intermediateSize).toBe(160);
    const old = { ...base, layer_types: undefined, full_attn_idxs: [2] };
    expect(parseConfig(old).layers.map((l) => !!l.conv)).toEqual([true, true, false, true]);
    const allAttn = parseConfig({ ...base, layer_types: undefined, full_attn_idxs: null });
    expect(allAttn.layers.every((l) => !l.conv)).toBe(true);
    expect(allAttn.convLCache).toBe(null);
  });

  it('refuses what it does not run, naming the key', () => {
    const base = archGolden('lfm2');
    expect(() => parseConfig({ ...base, conv_bias: true })).toThrow(/conv_bias/);
    expect(() => parseConfig({ ...base, conv_L_cache: 1 })).toThrow(/conv_L_cache/);
    expect(() => parseConfig({ ...base, layer_types: ['conv', 'mamba', 'conv', 'conv'] })).toThrow(/layer_types/);
    expect(() => parseConfig({ ...base, layer_types: undefined, full_attn_idxs: [9] })).toThrow(/full_attn_idxs/);
  });
});
