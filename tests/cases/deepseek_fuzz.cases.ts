// Differential fuzz of the DeepSeek path (issue 42): seeded random short prompts (1 to 6 tokens, one of
// them a single token) on the goldens' weights and on variants of them (no q LoRA; other group
// limits), a prefill and then greedy decode steps through the engine, every position's logits against
// the float64 model of src/models/deepseek_reference.ts within SPEC §7's 1e-3·max|logit| (§8's 2e-3 for
// block-FP8 weights, against their dequantized values). The engine is read four ways: Model.logits
// (one prefill step), steps of all prompts together (a prefill step, then decode steps of every
// sequence at its own length: the paged decode plan at context 2 for the one-token prompt), each
// prompt alone the same way, and Model.generate together and alone (its greedy tokens the reference's
// argmax). A disagreement names the path, the position and the router's margins there; a router
// decision closer than 1e-4 (relative) to changing is a genuine near-tie: positions from it on are
// excused and the note says so.
import { deepseekNearTiesRef, deepseekRef, encodeFp8e4m3, loadSafetensors, parseConfig, rng, randn, type DeepseekResultRef, type Model,
  type ModelConfig, type SafetensorsFile, type SafetensorsTensorInfo } from '../../src/index';
import { assert, defineCases, goldenRunsHere, type CaseContext, type TestCase } from './harness';
import { float64Weights } from './deepseek_weights';

const text = (b: Uint8Array) => new TextDecoder().decode(b);

/** A model under test: its config and checkpoint as the engine loads them, the same weights in float64. */
export interface Subject {
  config: Record<string, unknown>;
  files: SafetensorsFile;
  weights: Map<string, Float64Array>;
  /** Logit tolerance as a share of max|logit| (SPEC §7: 1e-3; §8, quantized weights: 2e-3). */
  tol: number;
  /** loadModel's dtype ('checkpoint' keeps FP8 blocks). */
  dtype?: 'f32';
  /** Correction biases meant to put chosen experts below 0: the fuzz checks that some position did. */
  negativeBias?: boolean;
}

/** A SafetensorsFile without the tensors `drop` matches, with `add`'s (raw bytes) beside the rest. */
function edited(file: SafetensorsFile, drop: RegExp, add: Record<string, { info: SafetensorsTensorInfo; bytes: Uint8Array }>): SafetensorsFile {
  const tensors = new Map([...file.tensors].filter(([n]) => !drop.test(n)));
  for (const [n, t] of Object.entries(add)) tensors.set(n, t.info);
  return { tensors, metadata: file.metadata, name: `${file.name} (edited)`, bytes: async (n) => add[n]?.bytes ?? file.bytes(n) };
}

async function goldenFile(ctx: CaseContext, dir: string): Promise<{ config: Record<string, unknown>; file: SafetensorsFile }> {
  const [config, weights] = await Promise.all([ctx.fixture(`${dir}/config.json`), ctx.fixture(`${dir}/model.safetensors`)]);
  return { config: JSON.parse(text(config)), file: await loadSafetensors(weights) };
}

async function subject(file: SafetensorsFile, config: Record<string, unknown>, tol: number, dtype?: 'f32'): Promise<Subject> {
  return { config, files: file, weights: await float64Weights(file), tol, dtype };
}

/** Shapes of q_proj (no q LoRA): [N·(P+R), H]. */
function qProjShape(c: Record<string, unknown>): [number, number] {
  const n = (k: string) => c[k] as number;
  return [n('num_attention_heads') * (n('qk_nope_head_dim') + n('qk_rope_head_dim')), n('hidden_size')];
}

/** The std of a tensor's float64 values (the scale a replacement weight takes). */
function std(v: Float64Array): number {
  let s = 0;
  for (const x of v) s += x * x;
  return Math.sqrt(s / v.length);
}

/**
 * A golden without q LoRA: q_a_proj, q_a_layernorm and q_b_proj replaced by one seeded random q_proj of
 * q_b_proj's scale (f32; or block FP8 with a partial last block of rows, for an FP8 golden), q_lora_rank
 * null; everything else the golden's own.
 */
export async function withoutQLora(ctx: CaseContext, dir: string, seed: number, tol: number, dtype?: 'f32'): Promise<Subject> {
  const { config, file } = await goldenFile(ctx, dir);
  const base = await float64Weights(file);
  const [rows, K] = qProjShape(config);
  const fp8 = (config.quantization_config as { quant_method?: string } | undefined)?.quant_method === 'fp8';
  const add: Record<string, { info: SafetensorsTensorInfo; bytes: Uint8Array }> = {};
  const layers = config.num_hidden_layers as number;
  for (let l = 0; l < layers; l++) {
    const a = `model.layers.${l}.self_attn.`;
    const v = randn(rows * K, seed + l, std(base.get(`${a}q_b_proj.weight`)!));
    if (!fp8) {
      add[`${a}q_proj.weight`] = { info: { dtype: 'F32', shape: [rows, K] }, bytes: new Uint8Array(v.buffer) };
      continue;
    }
    // Block FP8 as DeepSeek ships it: each 128 × 128 block's scale its largest |value| / 448.
    const rb = Math.ceil(rows / 128), cb = Math.ceil(K / 128);
    const scale = new Float32Array(rb * cb);
    for (let i = 0; i < rows; i++) for (let k = 0; k < K; k++) {
      const s = Math.floor(i / 128) * cb + Math.floor(k / 128);
      scale[s] = Math.max(scale[s], Math.abs(v[i * K + k]) / 448);
    }
    const q = new Float32Array(rows * K);
    for (let i = 0; i < rows; i++) for (let k = 0; k < K; k++) q[i * K + k] = v[i * K + k] / scale[Math.floor(i / 128) * cb + Math.floor(k / 128)];
    add[`${a}q_proj.weight`] = { info: { dtype: 'F8_E4M3', shape: [rows, K] }, bytes: encodeFp8e4m3(q) };
    add[`${a}q_proj.weight_scale_inv`] = { info: { dtype: 'F32', shape: [rb, cb] }, bytes: new Uint8Array(scale.buffer) };
  }
  const f = edited(file, /\.q_(a_proj|a_layernorm|b_proj)\./, add);
  return subject(f, { ...config, q_lora_rank: null }, tol, dtype);
}

// ------------------------------------------------------------------------------------------ probes

/** What one path of the engine gave: each sequence's logits at its positions [positions × vocab]. */
type Logits = Float32Array[];

/**
 * Steps through the model by hand (Model.recordStep under the request engine's exclusive turn, as
 * Model.logits does): one step of every prompt (all its tokens), then one decode step of every
 * sequence per further token of `seqs`, the logits of every row kept. Rows sit in the block manager's
 * order (one-token rows first, then the others, each in request order).
 */
async function stepLogits(model: Model, ctx: CaseContext, prompts: number[][], seqs: number[][]): Promise<Logits> {
  const V = model.vocabSize;
  return model.engine.runExclusive(async () => {
    const ids = prompts.map((_, i) => `fuzz${i}`);
    for (const id of ids) model.kv.addSequence(id);
    const out = seqs.map((s) => new Float32Array(s.length * V));
    try {
      const steps = Math.max(...seqs.map((s, i) => s.length - prompts[i].length)) + 1;
      for (let k = 0; k < steps; k++) {
        const rows = seqs.flatMap((s, i) => {
          const lo = k === 0 ? 0 : prompts[i].length + k - 1, hi = k === 0 ? prompts[i].length : lo + 1;
          return hi <= s.length ? [{ i, lo, ids: s.slice(lo, hi) }] : [];
        });
        const order = [...rows.filter((r) => r.ids.length === 1), ...rows.filter((r) => r.ids.length !== 1)];
        const T = rows.reduce((a, r) => a + r.ids.length, 0);
        const all = ctx.engine.emptyTensor([T, V], 'f32');
        try {
          model.recordStep(rows.map((r) => ({ id: ids[r.i], ids: r.ids, sample: false })), null, all);
          const got = await all.toFloat32();
          let at = 0;
          for (const r of order) {
            out[r.i].set(got.subarray(at * V, (at + r.ids.length) * V), r.lo * V);
            at += r.ids.length;
          }
        } finally {
          all.destroy();
        }
      }
    } finally {
      for (const id of ids) model.kv.freeSequence(id);
    }
    return out;
  });
}

// ----------------------------------------------------------------------------------------- checking

interface Found { excused: string[]; worst: number }

/** The router's view of a position (for a failure's message): each MoE layer's chosen experts and margins. */
function routerAt(ref: DeepseekResultRef, t: number): string {
  return ref.routes.map(({ layer, tokens }) => {
    const d = tokens[t];
    const max = d.choice.reduce((m, v) => (Number.isFinite(v) ? Math.max(m, Math.abs(v)) : m), 0);
    const g = d.groupMargin === null ? '' : `, groups ${d.keptGroups} (margin ${d.groupMargin.toExponential(2)})`;
    return `layer ${layer}: experts ${d.ids} (margin ${d.margin.toExponential(2)}, ${(d.margin / max).toExponential(1)} relative${g})`;
  }).join('; ');
}

/** Every position of `got` within tol·max|ref| of the reference, save those at or after a router near-tie. */
function checkLogits(what: string, got: Float32Array, ref: DeepseekResultRef, V: number, positions: number, tol: number, f: Found): void {
  const ties = deepseekNearTiesRef(ref);
  for (let t = 0; t < positions; t++) {
    let max = 0, err = 0, at = 0;
    for (let v = 0; v < V; v++) {
      max = Math.max(max, Math.abs(ref.logits[t * V + v]));
      const e = Math.abs(got[t * V + v] - ref.logits[t * V + v]);
      if (!(e <= err)) { err = Number.isNaN(e) ? Infinity : e; at = v; }
    }
    if (err <= tol * max) { f.worst = Math.max(f.worst, err / max); continue; }
    const tie = ties.find((x) => x.position <= t);
    const msg = `${what}: position ${t} logit ${at}: got ${got[t * V + at]}, reference ${ref.logits[t * V + at].toFixed(5)} (|err| ${err.toExponential(2)} > ${tol} × max|logit| ${max.toFixed(3)}); router at ${t}: ${routerAt(ref, t)}`;
    if (!tie) throw new Error(msg);
    f.excused.push(`${what} position ${t} (router near-tie at position ${tie.position}, layer ${tie.layer}, ${tie.kind} margin ${tie.relMargin.toExponential(1)})`);
  }
}

/** Greedy tokens: each the reference's argmax at its step, unless the reference's own top two are within tol or a router near-tie precedes it. */
function checkGreedy(what: string, prompt: number[], gen: number[], ref: DeepseekResultRef, V: number, tol: number, f: Found): void {
  const ties = deepseekNearTiesRef(ref);
  gen.forEach((tok, s) => {
    const t = prompt.length - 1 + s;
    const row = ref.logits.subarray(t * V, (t + 1) * V);
    let best = 0, max = 0;
    for (let v = 0; v < V; v++) { if (row[v] > row[best]) best = v; max = Math.max(max, Math.abs(row[v])); }
    if (tok === best) return;
    const gap = row[best] - row[tok];
    if (gap <= 2 * tol * max) { f.excused.push(`${what} step ${s}: token ${tok}, reference argmax ${best} only ${gap.toExponential(1)} above it`); return; }
    const tie = ties.find((x) => x.position <= t);
    const msg = `${what}: step ${s} (position ${t}): token ${tok} (reference logit ${row[tok].toFixed(4)}), reference argmax ${best} (${row[best].toFixed(4)}); router at ${t}: ${routerAt(ref, t)}`;
    if (!tie) throw new Error(msg);
    f.excused.push(`${what} step ${s} (router near-tie at position ${tie.position})`);
  });
}

/** `count` seeded prompts of 1..maxLen tokens (the first one token) over a vocabulary of V. */
export function fuzzPrompts(seed: number, V: number, count = 3, maxLen = 6): number[][] {
  const r = rng(seed);
  return Array.from({ length: count }, (_, i) => Array.from({ length: i === 0 ? 1 : 1 + Math.floor(r() * maxLen) }, () => Math.floor(r() * V)));
}

/** The fuzz of one subject over `prompts`, `decode` greedy steps each. */
export async function fuzzDeepseek(ctx: CaseContext, name: string, s: Subject, prompts: number[][], decode = 3): Promise<void> {
  const cfg: ModelConfig = parseConfig(s.config);
  const V = cfg.vocabSize;
  const model = await ctx.engine.loadModel({ config: s.config, weights: s.files, ...(s.dtype ? { dtype: s.dtype } : {}) });
  const f: Found = { excused: [], worst: 0 };
  try {
    const together = await model.generate(prompts, { maxNewTokens: decode + 1, stopTokens: [] });
    const seqs = prompts.map((p, i) => [...p, ...together[i].slice(0, decode)]);
    const refs = seqs.map((q) => deepseekRef(cfg, s.weights, q));
    for (const [i, p] of prompts.entries()) {
      const tag = `${name}, prompt ${i} [${p}]`;
      checkGreedy(`${tag}, generate together`, p, together[i], refs[i], V, s.tol, f);
      const [alone] = await model.generate([p], { maxNewTokens: decode + 1, stopTokens: [] });
      const aloneRef = alone.slice(0, decode).every((t, k) => t === together[i][k]) ? refs[i] : deepseekRef(cfg, s.weights, [...p, ...alone.slice(0, decode)]);
      checkGreedy(`${tag}, generate alone`, p, alone, aloneRef, V, s.tol, f);
      checkLogits(`${tag}, logits (one prefill step)`, await model.logits(seqs[i]), refs[i], V, seqs[i].length, s.tol, f);
      const [own] = await stepLogits(model, ctx, [p], [seqs[i]]);
      checkLogits(`${tag}, alone: prefill, then decode steps`, own, refs[i], V, seqs[i].length, s.tol, f);
    }
    const all = await stepLogits(model, ctx, prompts, seqs);
    for (const [i, p] of prompts.entries()) {
      checkLogits(`${name}, prompt ${i} [${p}], together: prefill, then decode steps`, all[i], refs[i], V, seqs[i].length, s.tol, f);
    }
    // Positions where a chosen expert's biased choice is below 0 (V3's -inf mask decides there).
    const below = refs.reduce((n, ref) => n + ref.routes.reduce((m, { tokens }) => m + tokens.filter((d) => d.ids.some((e) => d.choice[e] < 0)).length, 0), 0);
    if (s.negativeBias) assert(below > 0, `${name}: no chosen expert's choice is below 0: the biases test nothing`);
    const ties = refs.flatMap((ref, i) => deepseekNearTiesRef(ref).map((t) => `prompt ${i} position ${t.position} layer ${t.layer} (${t.kind}, ${t.relMargin.toExponential(1)})`));
    ctx.note(`${name}: prompts ${prompts.map((p) => `[${p}]`).join(' ')}, greedy ${together.map((g) => `[${g}]`).join(' ')}; worst logit error ${f.worst.toExponential(2)} of max|logit|`
      + `${below ? `; ${below} routings with a chosen expert below 0` : ''}`
      + `${ties.length ? `; router near-ties: ${ties.join(', ')}` : ''}${f.excused.length ? `; excused: ${f.excused.join('; ')}` : ''}`);
  } finally {
    model.destroy();
  }
  assert(f.worst > 0, `${name}: nothing was compared`);
}

/**
 * The subject with every MoE layer's e_score_correction_bias replaced (f32 values): biases that put a
 * kept group's experts below 0, where transformers 5's -inf mask of the dropped groups (and not
 * transformers 4's 0.0) decides which experts are chosen.
 */
function withBias(s: Subject, bias: number[]): Subject {
  const names = [...s.files.tensors.keys()].filter((n) => n.endsWith('.mlp.gate.e_score_correction_bias'));
  assert(names.length > 0, 'withBias: the checkpoint has no e_score_correction_bias');
  const v = Float32Array.from(bias);
  const add = Object.fromEntries(names.map((n) => [n, { info: { dtype: 'F32', shape: [v.length] }, bytes: new Uint8Array(v.buffer) }]));
  const weights = new Map(s.weights);
  for (const n of names) weights.set(n, Float64Array.from(v));
  return { ...s, files: edited(s.files, /\.mlp\.gate\.e_score_correction_bias$/, add), weights, negativeBias: true };
}

/** A golden as it is, or with its config edited (the weights unchanged). */
export async function golden(ctx: CaseContext, dir: string, tol: number, edit: Record<string, unknown> = {}, dtype?: 'f32'): Promise<Subject> {
  const { config, file } = await goldenFile(ctx, dir);
  return subject(file, { ...config, ...edit }, tol, dtype);
}

export const DEEPSEEK_FUZZ_VARIANTS: { name: string; seed: number; make: (ctx: CaseContext) => Promise<Subject> }[] = [
  { name: 'deepseek-v2-moe (no q LoRA, softmax greedy top-2)', seed: 4201, make: (ctx) => golden(ctx, 'goldens/deepseek-v2-moe', 1e-3) },
  { name: 'deepseek-v2-moe as group_limited_greedy (2 groups, 1 kept)', seed: 4202,
    make: (ctx) => golden(ctx, 'goldens/deepseek-v2-moe', 1e-3, { topk_method: 'group_limited_greedy', n_group: 2, topk_group: 1 }) },
  { name: 'deepseek-v3-yarn-moe (q LoRA, YaRN, noaux_tc 2 groups / 1 kept)', seed: 4203, make: (ctx) => golden(ctx, 'goldens/deepseek-v3-yarn-moe', 1e-3) },
  { name: 'deepseek-v3-yarn-moe with 4 groups / 2 kept, top-3', seed: 4204,
    make: (ctx) => golden(ctx, 'goldens/deepseek-v3-yarn-moe', 1e-3, { n_group: 4, topk_group: 2, num_experts_per_tok: 3 }) },
  { name: 'deepseek-v3-yarn-moe without q LoRA (a random q_proj)', seed: 4205, make: (ctx) => withoutQLora(ctx, 'goldens/deepseek-v3-yarn-moe', 4305, 1e-3) },
  { name: 'deepseek-v3-yarn-moe with negative correction biases (a kept group\'s second expert below 0)', seed: 4209,
    make: async (ctx) => withBias(await golden(ctx, 'goldens/deepseek-v3-yarn-moe', 1e-3), [0.95, -0.9, -0.9, -0.9, 0.9, -0.9, -0.9, -0.9]) },
  { name: 'deepseek-v3-yarn-moe with 4 groups / 2 kept, top-3, negative correction biases', seed: 4210,
    make: async (ctx) => withBias(await golden(ctx, 'goldens/deepseek-v3-yarn-moe', 1e-3, { n_group: 4, topk_group: 2, num_experts_per_tok: 3 }),
      [0.4, -0.8, 0.3, -0.9, -0.7, 0.2, 0.5, -0.6]) },
  { name: 'fp8-deepseek-v3 (block FP8, q LoRA)', seed: 4206, make: (ctx) => golden(ctx, 'goldens-quant/fp8-deepseek-v3', 2e-3) },
  { name: 'fp8-deepseek-v3 without q LoRA (a random block-FP8 q_proj)', seed: 4207, make: (ctx) => withoutQLora(ctx, 'goldens-quant/fp8-deepseek-v3', 4307, 2e-3) },
  { name: 'fp8-deepseek-v3 without q LoRA, negative correction biases', seed: 4211,
    make: async (ctx) => withBias(await withoutQLora(ctx, 'goldens-quant/fp8-deepseek-v3', 4307, 2e-3), [0.5, -0.8, 0.4, -0.7]) },
  { name: 'fp8-deepseek-v3 without q LoRA, dequantized (dtype f32)', seed: 4208, make: (ctx) => withoutQLora(ctx, 'goldens-quant/fp8-deepseek-v3', 4307, 1e-3, 'f32') },
];

export const deepseekFuzzCases: TestCase[] = defineCases('deepseek fuzz', DEEPSEEK_FUZZ_VARIANTS.map((v) => ({
  name: `${v.name}: seeded prompts of 1-6 tokens, prefill then greedy decode (generate, logits, steps together and alone): every position's logits within SPEC's tolerance of the float64 model`,
  async run(ctx) {
    if (!goldenRunsHere(ctx, v.name)) return;
    const s = await v.make(ctx);
    await fuzzDeepseek(ctx, v.name, s, fuzzPrompts(v.seed, parseConfig(s.config).vocabSize));
  },
})));
