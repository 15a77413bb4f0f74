// reference.routeRef against transformers 5.17's DeepSeek routers themselves (DeepseekV3TopkRouter,
// DeepseekV2TopkRouter) on seeded random inputs: fixtures/hf_deepseek_routers.json, made on CPU by the
// .py beside it. transformers 5 masks V3's dropped groups with -inf; with negative correction biases
// transformers 4's 0.0 (which the reference and ops.route followed) chose other experts.
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { routeRef, type MoeRouting } from '../../src/reference/moe';

interface HfRouters {
  transformers: string;
  T: number;
  cases: { name: string; family: 'deepseek_v2' | 'deepseek_v3'; E: number; bias: number[] | null; logits: number[]; ids: number[][]; weights: number[][];
           config: { num_experts_per_tok: number; n_group: number | null; topk_group: number | null; routed_scaling_factor: number; norm_topk_prob?: boolean; topk_method?: string } }[];
}

describe('reference.routeRef against transformers 5.17', () => {
  const hf = JSON.parse(readFileSync(join(dirname(fileURLToPath(import.meta.url)), 'fixtures/hf_deepseek_routers.json'), 'utf8')) as HfRouters;
  for (const c of hf.cases) {
    it(`${c.name}: HF's experts for every token, each with its weight within 1e-6`, () => {
      const v3 = c.family === 'deepseek_v3';
      const r: MoeRouting = {
        family: c.family, scoring: v3 ? 'sigmoid' : 'softmax', method: v3 ? 'noaux_tc' : (c.config.topk_method as MoeRouting['method']),
        topK: c.config.num_experts_per_tok, nGroup: c.config.n_group, topkGroup: c.config.topk_group,
        normTopkProb: c.config.norm_topk_prob ?? false, routedScalingFactor: c.config.routed_scaling_factor,
      };
      const K = r.topK;
      const got = routeRef(c.logits, hf.T, c.E, r, c.bias);
      let negative = 0;
      for (let t = 0; t < hf.T; t++) {
        const want = c.ids[t].map((e, j) => [e, c.weights[t][j]] as const).sort((a, b) => a[0] - b[0]);
        const mine = Array.from(got.ids.subarray(t * K, (t + 1) * K), (e, j) => [e, got.weights[t * K + j]] as const).sort((a, b) => a[0] - b[0]);
        expect(mine.map((x) => x[0]), `token ${t}`).toEqual(want.map((x) => x[0]));
        for (let j = 0; j < K; j++) expect(Math.abs(mine[j][1] - want[j][1]), `token ${t} expert ${want[j][0]}`).toBeLessThan(1e-6 * Math.max(1, Math.abs(want[j][1])));
        // A chosen expert whose biased choice is below 0: where the mask's value decides.
        if (v3 && c.bias) negative += want.some(([e]) => 1 / (1 + Math.exp(-c.logits[t * c.E + e])) + c.bias![e] < 0) ? 1 : 0;
      }
      if (c.name.includes('negative')) expect(negative, 'tokens with a chosen expert below 0').toBeGreaterThan(5);
    });
  }
});

