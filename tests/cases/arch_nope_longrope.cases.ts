// Issue 44's Llama-family variants against HF transformers (../shared/goldens-arch, SPEC §7.1):
// SmolLM3's NoPE layers and Phi-4-mini-style Phi3 (fused qkv/gate_up, partial rotary, LongRoPE).
// Each case: prefill logits at every position within 1e-3·max|logit|, greedy 8 tokens identical
// together and alone, and the feature shown to matter (the model with it removed misses the bound).
import { loadSafetensors } from '../../src/index';
import { checkGoldenModel, checkLogits, golden } from './model.cases';
import { assert, type TestCase, wholeModelCases } from './harness';

/** The golden, then the same weights under `broken` (a config without the feature): that must miss HF by more than 1e-3. */
function archCase(name: string, what: string, broken: (cfg: Record<string, unknown>) => Record<string, unknown>, brokenWhat: string): TestCase {
  return {
    name: `${name}: ${what}: prefill logits at every position within 1e-3·max|logit| of HF; greedy tokens identical, together and alone; ${brokenWhat} misses`,
    async run(ctx) {
      const g = await golden(ctx, name, 'goldens-arch');
      await checkGoldenModel(ctx, g);
      const bad = await ctx.engine.loadModel({ config: broken(g.config), weights: await loadSafetensors(g.weights) });
      try {
        let missed = false;
        try { await checkLogits(bad, g, `${name} (${brokenWhat})`); } catch { missed = true; }
        assert(missed, `${name}: ${brokenWhat} still matched HF within 1e-3: the golden does not see the feature`);
      } finally {
        bad.destroy();
      }
    },
  };
}

export const archNopeLongropeCases: TestCase[] = wholeModelCases([
  archCase('smollm3-nope', 'SmolLM3, NoPE in layer 3 (no_rope_layers [1, 1, 1, 0])',
    (c) => ({ ...c, no_rope_layers: (c.no_rope_layers as number[]).map(() => 1) }), 'RoPE in the NoPE layer too'),
  archCase('phi3-longrope', 'Phi3 (Phi-4-mini style): fused qkv/gate_up, partial rotary 0.75, LongRoPE (the 41-token prompt long, the others short)',
    (c) => {
      const rp = c.rope_parameters as Record<string, unknown>;
      return { ...c, rope_parameters: { ...rp, long_factor: rp.short_factor } };
    }, 'short factors on the long prompt'),
]);
