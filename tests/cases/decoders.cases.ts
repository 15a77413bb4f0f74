// Issue 31's decoders as whole models against what HF transformers computes (../shared/goldens-layers,
// SPEC §7): Gemma2 (soft-capped attention and logits, query_pre_attn_scalar, alternating windows, four
// norms a layer as x·(1 + w), scaled embeddings, GELU-tanh MLP) and gpt-oss (q/k/v/o biases, learned
// sinks, alternating windows, YaRN without truncation, a biased router and biased swiglu_oai experts
// packed interleaved). Prefill logits at every position within 1e-3 × the row's max|logit|, greedy
// tokens identical, the three prompts together identical to each alone. Each runs where
// goldenRunsHere says (Node, a browser and Deno on software adapters; every GPU).
import { loadSafetensors, type Model } from '../../src/index';
import { assert, defineCases, equalArrays, goldenRunsHere, type CaseContext, type TestCase } from './harness';

interface Golden {
  architecture: string;
  prompts: number[][];
  prefill_logits: number[][][];
  greedy: number[][];
  step_logits: number[][][];
  step_margins: number[][];
}

export interface LayerGolden { name: string; config: Record<string, unknown>; weights: Uint8Array; golden: Golden }

const text = (b: Uint8Array) => new TextDecoder().decode(b);
const cache = new Map<string, Promise<LayerGolden>>();

/** A goldens-layers decoder folder: config, checkpoint bytes and HF's outputs (read once per runtime). */
export function layerGolden(ctx: CaseContext, name: string): Promise<LayerGolden> {
  let g = cache.get(name);
  if (!g) {
    g = (async () => ({
      name,
      config: JSON.parse(text(await ctx.fixture(`goldens-layers/${name}/config.json`))),
      weights: await ctx.fixture(`goldens-layers/${name}/model.safetensors`),
      golden: JSON.parse(text(await ctx.fixture(`goldens-layers/${name}/golden.json`))) as Golden,
    }))();
    cache.set(name, g);
  }
  return g;
}

/** Every position of every prompt within tol × max|logit| of HF's; returns the worst error relative to it. */
export async function checkLayerLogits(model: Model, g: LayerGolden, tag: string, tol = 1e-3): Promise<number> {
  const V = g.config.vocab_size as number;
  let worst = 0;
  for (const [p, prompt] of g.golden.prompts.entries()) {
    const got = await model.logits(prompt);
    assert(got.length === prompt.length * V, `${tag}: logits of prompt ${p}: ${got.length} values, expected ${prompt.length}×${V}`);
    for (let t = 0; t < prompt.length; t++) {
      const ref = g.golden.prefill_logits[p][t];
      let max = 0;
      for (const x of ref) max = Math.max(max, Math.abs(x));
      for (let v = 0; v < V; v++) {
        const err = Math.abs(got[t * V + v] - ref[v]);
        if (!(err <= tol * max)) {
          throw new Error(`${tag}: prompt ${p} position ${t} logit ${v}: got ${got[t * V + v]}, HF ${ref[v]} (|err| ${err.toExponential(2)} > ${tol} × max|logit| ${max.toFixed(3)})`);
        }
        worst = Math.max(worst, err / max);
      }
    }
  }
  return worst;
}

/** Greedy tokens of the three prompts together and of each alone, all identical to HF's. */
export async function checkLayerGreedy(model: Model, g: LayerGolden, tag: string): Promise<void> {
  const same = (what: string, got: number[][], want: number[][]) => {
    assert(got.length === want.length, `${what}: ${got.length} sequences, expected ${want.length}`);
    got.forEach((s, i) => equalArrays(`${what}: prompt ${i}`, s, want[i]));
  };
  same(`${tag} greedy, three prompts together`, await model.generate(g.golden.prompts, { maxNewTokens: 8, stopTokens: [] }), g.golden.greedy);
  for (const [p, prompt] of g.golden.prompts.entries()) {
    same(`${tag} greedy, prompt ${p} alone`, await model.generate([prompt], { maxNewTokens: 8, stopTokens: [] }), [g.golden.greedy[p]]);
  }
}

const DECODERS = [
  ['gemma2-softcap-window', 'Gemma2: attention and final soft-capping, query_pre_attn_scalar, sliding/full layers, four (1 + w) norms a layer, scaled embeddings, GELU-tanh'],
  ['gptoss-sinks-window-moe', 'gpt-oss: learned sinks, sliding/full layers, q/k/v/o biases, YaRN (no truncation), biased router and swiglu_oai experts'],
] as const;

const goldenCases: TestCase[] = DECODERS.map(([name, what]) => ({
  name: `${name}: ${what}; prefill logits within 1e-3·max|logit| of HF at every position, greedy identical together and alone (f32)`,
  async run(ctx) {
    if (!goldenRunsHere(ctx, name)) return;
    const g = await layerGolden(ctx, name);
    const model = await ctx.engine.loadModel({ config: g.config, weights: await loadSafetensors(g.weights) });
    try {
      assert(model.architecture === g.golden.architecture, `architecture ${model.architecture}, golden ${g.golden.architecture}`);
      const worst = await checkLayerLogits(model, g, name);
      await checkLayerGreedy(model, g, name);
      ctx.note(`${name}: worst logit error ${worst.toExponential(2)} of max|logit|; greedy tokens identical`);
    } finally {
      model.destroy();
    }
  },
}));

export const decoderCases = defineCases('decoders', [...goldenCases]);
