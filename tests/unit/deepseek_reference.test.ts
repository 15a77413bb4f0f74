// reference.deepseekRef against what HF transformers computed for the DeepSeek goldens (../shared):
// every position's logits within 1e-4 of max|logit| (the float64 model against HF's f32 one), on f32
// weights and on block-FP8 ones dequantized; and
// routeTokenRef's view of a token (scores, choices, margins) that the DeepSeek fuzz reports.
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/models/config';
import { loadSafetensors } from '../../src/formats/safetensors';
import { deepseekNearTiesRef, deepseekRef } from '../../src/models/deepseek_reference';
import { routeRef, routeTokenRef, type MoeRouting } from '../../src/reference/index';
import { float64Weights } from '../cases/deepseek_weights';

const shared = join(dirname(fileURLToPath(import.meta.url)), '../../../shared');

describe('reference.deepseekRef', () => {
  for (const dir of ['goldens/deepseek-v2-moe', 'goldens/deepseek-v3-yarn-moe', 'goldens-quant/fp8-deepseek-v3']) {
    it(`${dir}: HF's prefill logits at every position within 1e-4·max|logit|`, async () => {
      const config = JSON.parse(readFileSync(join(shared, dir, 'config.json'), 'utf8'));
      const golden = JSON.parse(readFileSync(join(shared, dir, 'golden.json'), 'utf8')) as { prompts: number[][]; prefill_logits: number[][][] };
      const cfg = parseConfig(config);
      const w = await float64Weights(await loadSafetensors(new Uint8Array(readFileSync(join(shared, dir, 'model.safetensors')))));
      for (const [p, prompt] of golden.prompts.entries()) {
        const r = deepseekRef(cfg, w, prompt);
        expect(r.routes.length).toBe(cfg.numLayers - cfg.moe!.firstKDenseReplace);
        for (let t = 0; t < prompt.length; t++) {
          const ref = golden.prefill_logits[p][t];
          const max = ref.reduce((m, x) => Math.max(m, Math.abs(x)), 0);
          let err = 0;
          for (let v = 0; v < cfg.vocabSize; v++) err = Math.max(err, Math.abs(r.logits[t * cfg.vocabSize + v] - ref[v]));
          expect(err / max, `prompt ${p} position ${t}`).toBeLessThan(1e-4);
        }
      }
    });
  }
});

describe('reference.routeTokenRef', () => {
  const v3: MoeRouting = { family: 'deepseek_v3', scoring: 'sigmoid', method: 'noaux_tc', topK: 2, nGroup: 2, topkGroup: 1, normTopkProb: true, routedScalingFactor: 2.5 };
  it('gives routeRef\'s ids and weights, and the margins that decided them', () => {
    const logits = [0.5, -1, 2, 1.5];
    const d = routeTokenRef(logits, 0, 4, v3, [0, 0, 0, 0]);
    const r = routeRef(logits, 1, 4, v3, [0, 0, 0, 0]);
    expect(d.ids).toEqual(Array.from(r.ids));
    expect(d.weights).toEqual(Array.from(r.weights));
    const s = (x: number) => 1 / (1 + Math.exp(-x));
    expect(d.keptGroups).toEqual([1]);
    expect(d.groupMargin).toBeCloseTo(s(2) + s(1.5) - s(0.5) - s(-1), 12);
    // Both kept experts chosen; every other is a dropped group's (-inf): nothing is near changing.
    expect(d.ids).toEqual([2, 3]);
    expect(d.margin).toBe(Infinity);
  });
  it('V3 masks dropped groups with -inf (transformers 5): a kept expert whose bias makes its choice negative is still chosen', () => {
    // Group 1 kept (its two best sum to s(3) + s(0) - 0.9 > 2·s(-2)); expert 3's choice is s(0) - 0.9 < 0.
    const d = routeTokenRef([-2, -2, 3, 0], 0, 4, v3, [0, 0, 0, -0.9]);
    expect(d.keptGroups).toEqual([1]);
    expect(d.ids).toEqual([2, 3]);
    expect(d.choice[0]).toBe(-Infinity);
    expect(d.choice[3]).toBeLessThan(0);
  });
  it('reports an exact tie as margin 0, and deepseekNearTiesRef finds it', () => {
    const v2: MoeRouting = { family: 'deepseek_v2', scoring: 'softmax', method: 'greedy', topK: 1, nGroup: null, topkGroup: null, normTopkProb: false, routedScalingFactor: 1 };
    const d = routeTokenRef([1, 1, 0, 0], 0, 4, v2);
    expect(d.ids).toEqual([0]);
    expect(d.margin).toBe(0);
    const ties = deepseekNearTiesRef({ logits: new Float64Array(0), routes: [{ layer: 1, tokens: [routeTokenRef([0, 1, 2, 3], 0, 4, v2), d] }] });
    expect(ties).toEqual([{ layer: 1, position: 1, relMargin: 0, kind: 'experts' }]);
  });
});
