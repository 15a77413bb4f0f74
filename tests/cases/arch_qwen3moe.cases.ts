// Qwen3-MoE (Qwen3MoeForCausalLM) against HF transformers 5.17 (../shared/goldens-arch/qwen3-moe, SPEC
// §7.1): head_dim 48 ≠ hidden/heads, QK-norm before RoPE, layer 0 dense (mlp_only_layers), layers 1-2
// routed (softmax over 8 experts, top-2, renormalized: norm_topk_prob), experts in the Hub's per-expert
// layout, the count under `num_local_experts`. Prefill logits at every position within 1e-3·max|logit|,
// greedy tokens identical, the three prompts together equal to each alone.
import { loadSafetensors } from '../../src/index';
import { assert, type CaseContext, type TestCase } from './harness';
import { checkGreedy, checkLogits, type GoldenModel } from './model.cases';

const text = (b: Uint8Array) => new TextDecoder().decode(b);

async function archGolden(ctx: CaseContext, name: string): Promise<GoldenModel> {
  const dir = `goldens-arch/${name}`;
  return {
    name,
    config: JSON.parse(text(await ctx.fixture(`${dir}/config.json`))),
    weights: await ctx.fixture(`${dir}/model.safetensors`),
    golden: JSON.parse(text(await ctx.fixture(`${dir}/golden.json`))),
  };
}

export const archCases: TestCase[] = [{
  name: 'qwen3-moe (goldens-arch): prefill logits at every position within 1e-3·max|logit| of HF; greedy tokens identical, together and alone; norm_topk_prob off misses',
  async run(ctx) {
    const g = await archGolden(ctx, 'qwen3-moe');
    const weights = await loadSafetensors(g.weights);
    const model = await ctx.engine.loadModel({ config: g.config, weights });
    try {
      assert(model.architecture === 'Qwen3MoeForCausalLM', `architecture ${model.architecture}`);
      const worst = await checkLogits(model, g, 'qwen3-moe');
      await checkGreedy(model, g, 'qwen3-moe');
      ctx.note(`qwen3-moe: worst logit error ${worst.toExponential(2)} of max|logit|; greedy tokens identical`);
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
  },
}];
