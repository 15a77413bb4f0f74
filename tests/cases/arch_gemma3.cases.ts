// Gemma 3 text (Gemma3ForCausalLM) against HF transformers 5.17 (../shared/goldens-arch/gemma3-text, SPEC
// §7.1): QK-norm (1 + w) before RoPE, layers [sliding, sliding, full, sliding] with window 8 and two RoPE
// bases (1e4 sliding, 1e6 full), scores × query_pre_attn_scalar^-0.5 (24, not head_dim 32), no soft caps.
// Prefill logits at every position within 1e-3·max|logit|, greedy tokens identical together and alone
// (the 41-token prompt alone takes the blocks the three together cached: the engine's prefix-cache
// counters say so), the older config form (rope_theta / rope_local_base_freq / sliding_window_pattern)
// equal, each feature shown to matter, and quantize on load (q8) equal to the model on the dequantized values.
import { encodeSafetensors, loadSafetensors } from '../../src/index';
import { assert, type TestCase } from './harness';
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

export const archGemma3Cases: TestCase[] = [{
  name: 'gemma3-text (goldens-arch): QK-norm, sliding/full layers on two RoPE bases, query_pre_attn_scalar: prefill logits at every position within 1e-3·max|logit| of HF; greedy identical together and alone, alone from the prefix cache; the older config form equal; each feature shown to matter',
  async run(ctx) {
    const g = await golden(ctx, NAME, 'goldens-arch');
    const model = await ctx.engine.loadModel({ config: g.config, weights: await loadSafetensors(g.weights) });
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
}];
