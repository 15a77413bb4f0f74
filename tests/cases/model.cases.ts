// Whole models against what HF transformers computes (../shared/goldens, SPEC §7): prefill logits at
// every position within 1e-3 of the row's largest |logit|, greedy tokens identical, prompts served
// together identical to each alone, f16 and bf16 weights, sharded checkpoints and the older config
// form, bad checkpoints refused before any GPU memory is taken, seeded sampling, streaming, stop
// tokens, abort, and continuous batching under a tight token budget.
import { encodeSafetensors, loadSafetensors, type Engine, type EncodableTensor, type Model, type SafetensorsFile } from '../../src/index';
import { assert, defineCases, equalArrays, expectThrows, type CaseContext, type TestCase } from './harness';

interface Golden {
  architecture: string;
  prompts: number[][];
  prefill_logits: number[][][];
  greedy: number[][];
  step_margins: number[][];
}

interface GoldenModel { name: string; config: Record<string, unknown>; weights: Uint8Array; golden: Golden }

const text = (b: Uint8Array) => new TextDecoder().decode(b);
const cache = new Map<string, Promise<GoldenModel>>();

/** A golden's config, checkpoint bytes and HF outputs (read once per runtime). */
function golden(ctx: CaseContext, name: string): Promise<GoldenModel> {
  let g = cache.get(name);
  if (!g) {
    g = (async () => ({
      name,
      config: JSON.parse(text(await ctx.fixture(`goldens/${name}/config.json`))),
      weights: await ctx.fixture(`goldens/${name}/model.safetensors`),
      golden: JSON.parse(text(await ctx.fixture(`goldens/${name}/golden.json`))) as Golden,
    }))();
    cache.set(name, g);
  }
  return g;
}

async function load(engine: Engine, g: GoldenModel, o: { dtype?: 'f32' | 'f16' | 'bf16'; maxTokensPerStep?: number; maxSeqsPerStep?: number } = {}): Promise<Model> {
  return engine.loadModel({ config: g.config, weights: await loadSafetensors(g.weights), ...o });
}

/** Every position of every prompt within 1e-3 × max|logit| of HF's (SPEC §7). */
async function checkLogits(model: Model, g: GoldenModel, tag: string): Promise<number> {
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
        if (!(err <= 1e-3 * max)) {
          throw new Error(`${tag}: prompt ${p} position ${t} logit ${v}: got ${got[t * V + v]}, HF ${ref[v]} (|err| ${err.toExponential(2)} > 1e-3 × max|logit| ${max.toFixed(3)})`);
        }
        worst = Math.max(worst, err / max);
      }
    }
  }
  return worst;
}

function sameTokens(what: string, got: number[][], want: number[][]): void {
  assert(got.length === want.length, `${what}: ${got.length} sequences, expected ${want.length}`);
  got.forEach((g, i) => equalArrays(`${what}: prompt ${i}`, g, want[i]));
}

const GOLDENS = ['llama-gqa', 'mistral-window8', 'qwen3-qknorm-tied'] as const;

const goldenCases: TestCase[] = GOLDENS.map((name) => ({
  name: `${name}: prefill logits at every position within 1e-3·max|logit| of HF; greedy tokens identical, together and alone (f32 weights)`,
  async run(ctx) {
    const g = await golden(ctx, name);
    const model = await load(ctx.engine, g);
    try {
      assert(model.architecture === g.golden.architecture, `architecture ${model.architecture}, golden ${g.golden.architecture}`);
      const worst = await checkLogits(model, g, name);
      const together = await model.generate(g.golden.prompts, { maxNewTokens: 8, stopTokens: [] });
      sameTokens(`${name} greedy, three prompts together`, together, g.golden.greedy);
      for (const [p, prompt] of g.golden.prompts.entries()) {
        sameTokens(`${name} greedy, prompt ${p} alone`, await model.generate([prompt], { maxNewTokens: 8, stopTokens: [] }), [g.golden.greedy[p]]);
      }
      ctx.note(`${name}: worst logit error ${worst.toExponential(2)} of max|logit|; greedy tokens identical`);
    } finally {
      model.destroy();
    }
  },
}));

export const modelCases: TestCase[] = defineCases('models', [
  ...goldenCases,
  {
    name: 'greedy tokens identical with f16 and with bf16 weights (the three goldens)',
    async run(ctx) {
      for (const name of GOLDENS) {
        const g = await golden(ctx, name);
        for (const dtype of ['f16', 'bf16'] as const) {
          const model = await load(ctx.engine, g, { dtype });
          try {
            assert(model.weightDType === dtype, `weights stored as ${model.weightDType}, asked for ${dtype}`);
            sameTokens(`${name} greedy with ${dtype} weights`, await model.generate(g.golden.prompts, { maxNewTokens: 8, stopTokens: [] }), g.golden.greedy);
          } finally {
            model.destroy();
          }
        }
      }
    },
  },
  {
    name: 'a sharded checkpoint and the older config form (rope_theta + rope_scaling) give the same logits',
    async run(ctx) {
      const g = await golden(ctx, 'llama-gqa');
      const whole = await loadSafetensors(g.weights);
      // Two shards: every tensor's bytes re-encoded from the original, split by name.
      const names = [...whole.tensors.keys()].sort();
      const shard = async (part: string[]) => {
        const t: Record<string, EncodableTensor> = {};
        for (const n of part) {
          const info = whole.tensors.get(n)!;
          const b = await whole.bytes(n);
          t[n] = { dtype: 'F32', shape: info.shape, data: new Float32Array(b.slice().buffer) };
        }
        return loadSafetensors(encodeSafetensors(t));
      };
      const shards: SafetensorsFile[] = [await shard(names.slice(0, 9)), await shard(names.slice(9))];
      const { rope_parameters: rp, ...rest } = g.config as { rope_parameters: { rope_theta: number } };
      const older = { ...rest, rope_theta: rp.rope_theta, rope_scaling: null };
      const a = await ctx.engine.loadModel({ config: g.config, weights: whole });
      const b = await ctx.engine.loadModel({ config: older, weights: shards });
      try {
        const prompt = g.golden.prompts[2];
        equalArrays('logits: sharded + older config vs one file + transformers 5 config', await b.logits(prompt), await a.logits(prompt));
      } finally {
        a.destroy();
        b.destroy();
      }
    },
  },
  {
    name: 'bad checkpoints (missing, extra, wrong-shaped tensors; unsupported architecture) are refused before any GPU memory is taken',
    async run(ctx) {
      const { engine } = ctx;
      const g = await golden(ctx, 'llama-gqa');
      const whole = await loadSafetensors(g.weights);
      const rebuild = async (edit: (t: Record<string, EncodableTensor>) => void) => {
        const t: Record<string, EncodableTensor> = {};
        for (const [n, info] of whole.tensors) t[n] = { dtype: 'F32', shape: info.shape, data: new Float32Array((await whole.bytes(n)).slice().buffer) };
        edit(t);
        return loadSafetensors(encodeSafetensors(t));
      };
      const before = engine.counters.createBuffer;
      const missing = await rebuild((t) => { delete t['model.layers.1.mlp.up_proj.weight']; });
      await expectThrows(() => engine.loadModel({ config: g.config, weights: missing }), 'model.layers.1.mlp.up_proj.weight', 'missing', '[256, 128]');
      const extra = await rebuild((t) => { t['model.layers.0.self_attn.extra.weight'] = { dtype: 'F32', shape: [2, 2], data: new Float32Array(4) }; });
      await expectThrows(() => engine.loadModel({ config: g.config, weights: extra }), 'model.layers.0.self_attn.extra.weight');
      const wrong = await rebuild((t) => { t['model.layers.0.self_attn.k_proj.weight'] = { dtype: 'F32', shape: [16, 128], data: new Float32Array(16 * 128) }; });
      await expectThrows(() => engine.loadModel({ config: g.config, weights: wrong }), 'model.layers.0.self_attn.k_proj.weight', '[32, 128]', '[16, 128]');
      await expectThrows(() => engine.loadModel({ config: { ...g.config, architectures: ['GPT2LMHeadModel'] }, weights: whole }),
        'GPT2LMHeadModel', 'LlamaForCausalLM', 'Qwen3ForCausalLM');
      await expectThrows(() => engine.loadModel({ config: g.config, weights: whole, dtype: 'f8' as never }), "loadModel: o.dtype: expected 'f32', 'f16' or 'bf16'");
      assert(engine.counters.createBuffer === before, `refused loads created ${engine.counters.createBuffer - before} GPU buffers`);
    },
  },
  {
    name: 'continuous batching under a tight budget (prompt chunks of 5 tokens beside decodes, 2 sequences a step) gives the same greedy tokens',
    async run(ctx) {
      const g = await golden(ctx, 'mistral-window8');
      const model = await load(ctx.engine, g, { maxTokensPerStep: 5, maxSeqsPerStep: 2 });
      try {
        const got = await model.generate(g.golden.prompts, { maxNewTokens: 8, stopTokens: [] });
        sameTokens('greedy under a 5-token, 2-sequence budget', got, g.golden.greedy);
        assert(model.lastRun.steps > 12, `expected many small steps, ran ${model.lastRun.steps}`);
        // logits() takes the same chunks.
        await checkLogits(model, g, 'logits in 5-token chunks');
      } finally {
        model.destroy();
      }
    },
  },
  {
    name: 'streaming, stop tokens, seeded sampling, abort, and errors',
    async run(ctx) {
      const g = await golden(ctx, 'qwen3-qknorm-tied');
      const model = await load(ctx.engine, g);
      try {
        const streamed: [number, number][] = [];
        const out = await model.generate(g.golden.prompts, { maxNewTokens: 8, stopTokens: [], onToken: (p, t) => streamed.push([p, t]) });
        for (let p = 0; p < 3; p++) equalArrays(`onToken stream of prompt ${p}`, streamed.filter((s) => s[0] === p).map((s) => s[1]), out[p]);
        // A stop token ends its sequence and is kept as its last token.
        const stop = g.golden.greedy[1][2];
        const stopped = await model.generate(g.golden.prompts, { maxNewTokens: 8, stopTokens: [stop] });
        for (let p = 0; p < 3; p++) {
          const full = g.golden.greedy[p];
          const cut = full.indexOf(stop);
          equalArrays(`stop token ${stop}, prompt ${p}`, stopped[p], cut < 0 ? full : full.slice(0, cut + 1));
        }
        // Seeded sampling: reproducible, and top-k 1 is greedy whatever the temperature.
        const s1 = await model.generate(g.golden.prompts, { maxNewTokens: 8, stopTokens: [], temperature: 1.5, seed: 7 });
        const s2 = await model.generate(g.golden.prompts, { maxNewTokens: 8, stopTokens: [], temperature: 1.5, seed: 7 });
        sameTokens('same seed, same tokens', s2, s1);
        const s3 = await model.generate(g.golden.prompts, { maxNewTokens: 8, stopTokens: [], temperature: 1.5, seed: 8 });
        assert(JSON.stringify(s3) !== JSON.stringify(s1), 'another seed drew the same 24 tokens');
        assert(JSON.stringify(s1) !== JSON.stringify(g.golden.greedy), 'temperature 1.5 drew the greedy tokens');
        sameTokens('top-k 1 is greedy', await model.generate(g.golden.prompts, { maxNewTokens: 8, stopTokens: [], temperature: 0.8, topK: 1, seed: 3 }), g.golden.greedy);
        // Abort: the call rejects, its blocks come back, the model serves again.
        const ac = new AbortController();
        let n = 0;
        await expectThrows(() => model.generate(g.golden.prompts, { maxNewTokens: 8, stopTokens: [], signal: ac.signal, onToken: () => { if (++n === 4) ac.abort(); } }), 'abort');
        sameTokens('after an abort', await model.generate(g.golden.prompts, { maxNewTokens: 8, stopTokens: [] }), g.golden.greedy);
        await expectThrows(() => model.generate([[1, 2, 999]]), 'Model.generate: prompts[0][2]: expected a token id in [0, 256), got 999');
        await expectThrows(() => model.generate([]), 'Model.generate: prompts: expected a non-empty array');
        await expectThrows(() => model.logits([]), 'Model.logits: tokens: expected a non-empty');
        await expectThrows(() => model.generate([[1]], { maxNewTokens: 10 ** 7 }), 'Model.generate: prompts[0]: expected a prompt that fits the cache');
        const busy = model.generate([[1, 2]], { maxNewTokens: 2 });
        await expectThrows(() => model.logits([1]), 'another logits or generate call of this model is running');
        await busy;
      } finally {
        model.destroy();
      }
      await expectThrows(() => model.logits([1]), 'Model.logits: the model was destroyed');
    },
  },
]);
