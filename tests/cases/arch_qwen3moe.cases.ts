// Qwen3-MoE (Qwen3MoeForCausalLM) against HF transformers 5.17 (../shared/goldens-arch/qwen3-moe, SPEC
// §7.1): head_dim 48 ≠ hidden/heads, QK-norm before RoPE, layer 0 dense (mlp_only_layers), layers 1-2
// routed (softmax over 8 experts, top-2, renormalized: norm_topk_prob), experts in the Hub's per-expert
// layout, the count under `num_local_experts`. Prefill logits at every position within 1e-3·max|logit|,
// greedy tokens identical, the three prompts together equal to each alone. Quantize on load (q8) reads the
// per-expert layout through the same WeightReader.experts: equal to the model on the dequantized values.
import { encodeSafetensors, loadSafetensors } from '../../src/index';
import { assert, type TestCase, wholeModelCases } from './harness';
import { checkAgainstDequantized, checkGreedy, checkLogits, dequantizedWant, golden, quantizedValues } from './model.cases';

export const archCases: TestCase[] = wholeModelCases([{
  name: 'qwen3-moe (goldens-arch): prefill logits at every position within 1e-3·max|logit| of HF; greedy tokens identical, together and alone; norm_topk_prob off misses; q8 on load equals the dequantized model',
  async run(ctx) {
    const g = await golden(ctx, 'qwen3-moe', 'goldens-arch');
    const weights = await loadSafetensors(g.weights);
    const model = await ctx.engine.loadModel({ config: g.config, weights });
    try {
      assert(model.architecture === 'Qwen3MoeForCausalLM', `architecture ${model.architecture}`);
      const worst = await checkLogits(model, g, 'qwen3-moe');
      await checkGreedy(model, g, 'qwen3-moe');
      // Each prompt alone after the three together: the 41-token one reuses the blocks they cached.
      const hits = model.engine.metrics().prefixCacheHits;
      assert(hits > 0, 'qwen3-moe: greedy alone after together took no block from the prefix cache');
      ctx.note(`qwen3-moe: worst logit error ${worst.toExponential(2)} of max|logit|; greedy tokens identical (${hits} prefix-cache hits)`);
    } finally {
      model.destroy();
    }
    // The test sees the renormalization: without it the logits leave the bound (README: 0.31 off).
    const off = await ctx.engine.loadModel({ config: { ...g.config, norm_topk_prob: false }, weights });
    try {
      let missed = false;
      try { await checkLogits(off, g, 'qwen3-moe, norm_topk_prob off'); } catch { missed = true; }
      assert(missed, 'qwen3-moe with norm_topk_prob off: logits still within the bound (the case would not see the renormalization)');
    } finally {
      off.destroy();
    }
    // Quantize on load (Q8_0: every matrix, the router and the experts too) against the same model on
    // the quantized values dequantized on the host and loaded as f32 (SPEC §8: 2e-3·max|logit|, greedy identical).
    const want = await dequantizedWant(ctx, { ...g, weights: encodeSafetensors(await quantizedValues(weights, 'q8')) });
    const q8 = await ctx.engine.loadModel({ config: g.config, weights, dtype: 'q8' });
    try {
      const worst = await checkAgainstDequantized(q8, g, want, 'qwen3-moe q8');
      ctx.note(`qwen3-moe q8 on load: worst logit error ${worst.toExponential(2)} of max|logit| against the dequantized model; greedy identical`);
    } finally {
      q8.destroy();
    }
  },
}]);
