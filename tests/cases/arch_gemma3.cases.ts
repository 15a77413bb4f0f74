// Gemma 3 text (Gemma3ForCausalLM) against HF transformers 5.17 (../shared/goldens-arch/gemma3-text, SPEC
// §7.1): QK-norm (1 + w) before RoPE, layers [sliding, sliding, full, sliding] with window 8 and two RoPE
// bases (1e4 sliding, 1e6 full), scores × query_pre_attn_scalar^-0.5 (24, not head_dim 32), no soft caps.
// Prefill logits at every position within 1e-3·max|logit|, greedy tokens identical together and alone
// (the 41-token prompt alone takes the blocks the three together cached: the engine's prefix-cache
// counters say so), the older config form (rope_theta / rope_local_base_freq / sliding_window_pattern)
// equal, each feature shown to matter, and quantize on load (q8) equal to the model on the dequantized values.
// The GGUF form (`gemma3`, as llama.cpp's converter writes it: its names, norms stored as 1 + w) equals the
// safetensors form.
import { createRandomModel, encodeSafetensors, loadGGUF, loadSafetensors, quantizeRows, reference, writeGGUF, type EncodableTensor } from '../../src/index';
import { assert, type TestCase, wholeModelCases } from './harness';
import { checkAgainstDequantized, checkGreedy, checkLogits, dequantizedWant, golden, quantizedValues, type GoldenModel } from './model.cases';

const NAME = 'gemma3-text';

/** The same weights under `config` must miss HF by more than the bound: the golden sees what it changed. */
async function missesWith(ctx: Parameters<TestCase['run']>[0], g: GoldenModel, config: Record<string, unknown>, what: string): Promise<void> {
  const bad = await ctx.engine.loadModel({ config, weights: await loadSafetensors(g.weights) });
  try {
    let missed = false;
    try { await checkLogits(bad, g, `${NAME} (${what})`); } catch { missed = true; }
    assert(missed, `${NAME}: ${what} still matched HF within 1e-3: the golden does not see it`);
  } finally {
    bad.destroy();
  }
}

/** llama.cpp's names of a Gemma 3 layer's tensors (gguf-py's tensor_mapping for gemma3), by transformers'. */
export const GGUF_LAYER: Readonly<Record<string, string>> = {
  'input_layernorm.weight': 'attn_norm.weight', 'self_attn.q_proj.weight': 'attn_q.weight', 'self_attn.k_proj.weight': 'attn_k.weight',
  'self_attn.v_proj.weight': 'attn_v.weight', 'self_attn.o_proj.weight': 'attn_output.weight', 'self_attn.q_norm.weight': 'attn_q_norm.weight',
  'self_attn.k_norm.weight': 'attn_k_norm.weight', 'post_attention_layernorm.weight': 'post_attention_norm.weight',
  'pre_feedforward_layernorm.weight': 'ffn_norm.weight', 'mlp.gate_proj.weight': 'ffn_gate.weight', 'mlp.up_proj.weight': 'ffn_up.weight',
  'mlp.down_proj.weight': 'ffn_down.weight', 'post_feedforward_layernorm.weight': 'post_ffw_norm.weight',
};

/**
 * The golden as convert_hf_to_gguf.py writes a `gemma3` file: llama.cpp's names (q/k rows as HF has them:
 * only `llama` files permute), matrices of `type`, every norm F32 with the 1 of Gemma3RMSNorm added, the
 * metadata it writes (no sliding pattern, local base or query_pre_attn_scalar: llama.cpp fixes those). Beside
 * it the HF checkpoint on the values the file holds.
 */
async function gemma3GGUF(g: GoldenModel, type: 'F32' | 'Q8_0'): Promise<{ gguf: Uint8Array; dequantized: Record<string, EncodableTensor> }> {
  const file = await loadSafetensors(g.weights);
  const c = g.config as Record<string, number>;
  const tensors: { name: string; type: string; shape: number[]; data: Uint8Array }[] = [];
  const dequantized: Record<string, EncodableTensor> = {};
  const bytes = (v: Float32Array) => new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
  for (const [name, info] of file.tensors) {
    const m = /^model\.layers\.(\d+)\.(.+)$/.exec(name);
    const gname = m ? `blk.${m[1]}.${GGUF_LAYER[m[2]]}` : name === 'model.embed_tokens.weight' ? 'token_embd.weight' : 'output_norm.weight';
    assert(name === 'model.norm.weight' || name === 'model.embed_tokens.weight' || (m !== null && GGUF_LAYER[m[2]] !== undefined), `${NAME} GGUF: no llama.cpp name for ${name}`);
    const v = new Float32Array((await file.bytes(name)).slice().buffer);
    if (info.shape.length === 1) {
      tensors.push({ name: gname, type: 'F32', shape: [v.length], data: bytes(v.map((x) => Math.fround(1 + x))) });
      dequantized[name] = { dtype: 'F32', shape: info.shape, data: v };
      continue;
    }
    const [rows, K] = info.shape;
    const q = type === 'F32' ? bytes(v) : quantizeRows(type, v, rows, K);
    tensors.push({ name: gname, type, shape: [K, rows], data: q });
    dequantized[name] = { dtype: 'F32', shape: info.shape, data: type === 'F32' ? v : Float32Array.from(reference.dequantizeRows(type, q, rows, K)) };
  }
  const rp = g.config.rope_parameters as Record<string, { rope_theta: number }>;
  const metadata: [string, unknown, 'f32'?][] = [
    ['general.architecture', 'gemma3'], ['general.name', 'gemma3 golden'], ['general.file_type', type === 'F32' ? 0 : 7],
    ['gemma3.context_length', c.max_position_embeddings], ['gemma3.embedding_length', c.hidden_size], ['gemma3.block_count', c.num_hidden_layers],
    ['gemma3.feed_forward_length', c.intermediate_size], ['gemma3.attention.head_count', c.num_attention_heads],
    ['gemma3.attention.head_count_kv', c.num_key_value_heads], ['gemma3.attention.layer_norm_rms_epsilon', c.rms_norm_eps, 'f32'],
    ['gemma3.attention.key_length', c.head_dim], ['gemma3.attention.value_length', c.head_dim],
    ['gemma3.rope.freq_base', rp.full_attention.rope_theta, 'f32'], ['gemma3.attention.sliding_window', c.sliding_window],
  ];
  return { gguf: writeGGUF({ metadata, tensors }), dequantized };
}

export const archGemma3Cases: TestCase[] = wholeModelCases([{
  name: 'gemma3-text (goldens-arch): QK-norm, sliding/full layers on two RoPE bases, query_pre_attn_scalar: prefill logits at every position within 1e-3·max|logit| of HF; greedy identical together and alone, alone from the prefix cache; the older config form equal; each feature shown to matter; the random model of the config runs',
  async run(ctx) {
    const g = await golden(ctx, NAME, 'goldens-arch');
    const model = await ctx.engine.loadModel({ config: g.config, weights: await loadSafetensors(g.weights) });
    const loadedBytes = model.weightBytes;
    try {
      assert(model.architecture === 'Gemma3ForCausalLM', `architecture ${model.architecture}`);
      const worst = await checkLogits(model, g, NAME);
      const before = model.engine.metrics().prefixCacheHits;
      await checkGreedy(model, g, NAME);
      const hits = model.engine.metrics().prefixCacheHits - before;
      assert(hits > 0, `${NAME}: greedy alone after together took no block from the prefix cache`);
      ctx.note(`${NAME}: worst logit error ${worst.toExponential(2)} of max|logit|; greedy identical together and alone (${hits} tokens from the prefix cache)`);
    } finally {
      model.destroy();
    }
    // The form of configs written before transformers 5: the full layers' base as rope_theta, the
    // sliding layers' as rope_local_base_freq, the layers from sliding_window_pattern (3: layer 2 full).
    const { layer_types: _t, rope_parameters: _r, _sliding_window_pattern: _p, ...rest } = g.config;
    const older = await ctx.engine.loadModel({
      config: { ...rest, rope_theta: 1e6, rope_local_base_freq: 1e4, rope_scaling: null, sliding_window_pattern: 3 },
      weights: await loadSafetensors(g.weights),
    });
    try {
      await checkLogits(older, g, `${NAME} (older config form)`);
    } finally {
      older.destroy();
    }
    const rp = g.config.rope_parameters as Record<string, Record<string, unknown>>;
    await missesWith(ctx, g, { ...g.config, rope_parameters: { ...rp, sliding_attention: rp.full_attention } }, 'sliding layers on the full layers\' RoPE base');
    await missesWith(ctx, g, { ...g.config, query_pre_attn_scalar: g.config.head_dim }, 'head_dim^-0.5 instead of query_pre_attn_scalar^-0.5');
    await missesWith(ctx, g, { ...g.config, sliding_window: 4096 }, 'no window in the sliding layers');
    // The benchmarks' random model of the config: the same weights' bytes (the QK-norms included), and a
    // prompt past the window decodes to finite logits.
    const rnd = await createRandomModel(ctx.engine, { config: g.config, dtype: 'f32', seed: 5 });
    try {
      assert(rnd.weightBytes === loadedBytes, `${NAME} random model: ${rnd.weightBytes} bytes of weights, the loaded model ${loadedBytes}`);
      const [seq] = await rnd.generate([Array.from({ length: 12 }, (_, i) => 10 + i)], { maxNewTokens: 4, stopTokens: [] });
      const logits = await rnd.logits([...Array.from({ length: 12 }, (_, i) => 10 + i), ...seq]);
      assert(seq.length === 4 && logits.every(Number.isFinite), `${NAME} random model: ${seq.length} tokens, finite logits ${logits.every(Number.isFinite)}`);
    } finally {
      rnd.destroy();
    }
  },
}, {
  name: 'gemma3-text q8 on load (every matrix Q8_0, the QK-norms and the four norms a layer as (1 + w) f32): logits within 2e-3·max|logit| of the same model on the dequantized values, greedy identical',
  async run(ctx) {
    const g = await golden(ctx, NAME, 'goldens-arch');
    const file = await loadSafetensors(g.weights);
    const want = await dequantizedWant(ctx, { ...g, weights: encodeSafetensors(await quantizedValues(file, 'q8')) });
    const q8 = await ctx.engine.loadModel({ config: g.config, weights: file, dtype: 'q8' });
    try {
      assert(q8.weightBytes < want.weightBytes / 2.5, `${NAME} q8: ${q8.weightBytes} bytes of weights, f32 ${want.weightBytes}`);
      const worst = await checkAgainstDequantized(q8, g, want, `${NAME} q8`);
      ctx.note(`${NAME} q8 on load: worst logit error ${worst.toExponential(2)} of max|logit| against the dequantized model; greedy identical; ${q8.weightBytes} bytes of weights (f32 ${want.weightBytes})`);
    } finally {
      q8.destroy();
    }
  },
}, {
  name: "gemma3-text GGUF (gemma3: llama.cpp's names, norms stored as 1 + w, F32 and Q8_0): with the HF config, logits within 2e-3·max|logit| of the safetensors model on the file's values (F32: of HF too), greedy identical; its own config is what llama.cpp runs (every sixth layer full, local base 1e4, head_dim^-0.5) and equals the safetensors model under that config",
  async run(ctx) {
    const g = await golden(ctx, NAME, 'goldens-arch');
    for (const type of ['F32', 'Q8_0'] as const) {
      const what = `${NAME} GGUF ${type}`;
      const { gguf, dequantized } = await gemma3GGUF(g, type);
      const want = await dequantizedWant(ctx, { ...g, weights: encodeSafetensors(dequantized) });
      const model = await ctx.engine.loadModel({ config: g.config, weights: await loadGGUF(gguf) });
      try {
        assert(model.architecture === 'Gemma3ForCausalLM', `${what}: architecture ${model.architecture}`);
        const worst = await checkAgainstDequantized(model, g, want, what);
        const hf = type === 'F32' ? await checkLogits(model, g, what) : null;
        ctx.note(`${what} with the HF config: worst logit error ${worst.toExponential(2)} of max|logit| against the safetensors model on its values${hf === null ? '' : `, ${hf.toExponential(2)} against HF`}; greedy identical`);
      } finally {
        model.destroy();
      }
      if (type !== 'F32') continue;
      // The file's own config: what llama.cpp makes of the metadata (the golden's [s, s, f, s], scalar 24
      // are not in it), held to the safetensors model under the HF config that says the same.
      const own = await ctx.engine.loadModel({ weights: await loadGGUF(gguf) });
      try {
        const cfg = own.config;
        assert(JSON.stringify(cfg.layers.map((l) => l.slidingWindow)) === '[8,8,8,8]', `${what}: own config's windows ${JSON.stringify(cfg.layers.map((l) => l.slidingWindow))}, llama.cpp's pattern 6 makes [8,8,8,8]`);
        assert(cfg.attentionScale === Math.pow(32, -0.5) && cfg.rope.theta === 1e6 && cfg.slidingRope?.theta === 1e4 && cfg.qkNorm && cfg.finalLogitSoftcap === null,
          `${what}: own config: scale ${cfg.attentionScale}, bases ${cfg.rope.theta} / ${cfg.slidingRope?.theta}, qkNorm ${cfg.qkNorm}, final cap ${cfg.finalLogitSoftcap}`);
        const asLlamaCpp = { ...g, config: { ...g.config, layer_types: Array(4).fill('sliding_attention'), query_pre_attn_scalar: 32 } };
        const worst = await checkAgainstDequantized(own, asLlamaCpp, await dequantizedWant(ctx, asLlamaCpp), `${what}, its own config`);
        ctx.note(`${what}, its own config (every sixth layer full, scale 32^-0.5): worst logit error ${worst.toExponential(2)} of max|logit| against the safetensors model under the same config; greedy identical`);
      } finally {
        own.destroy();
      }
    }
  },
}]);
