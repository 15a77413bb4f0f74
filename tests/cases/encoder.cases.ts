// Encoder-only models (src/models/encoder.ts) against what HF transformers computes
// (../shared/goldens-layers: bert-padded-batch, modernbert-local-global): the last hidden state of every
// input within 1e-3·max|value|, mean-pooled, CLS and BERT's pooler outputs, each input alone equal to
// the batch; ModernBERT's local layers through the two-sided window of the attention kernels, checked
// on its own against the float64 reference; embed and embeddings.create (OpenAI's shape) and their
// errors.
import { encodeSafetensors, loadSafetensors, reference, roundToDType, type EncodableTensor, type Engine } from '../../src/index';
import type { EncoderModel } from '../../src/serve/embeddings';
import type { T5Model } from '../../src/index';
import { assert, assertClose, defineCases, equalArrays, expectThrows, goldenRunsHere, randn, withTuning, type CaseContext, type TestCase } from './harness';
import { moveHeadRows } from '../../src/attention/paged_cache';

const text = (b: Uint8Array) => new TextDecoder().decode(b);

interface EncoderGolden {
  architecture: string;
  inputs: number[][];
  last_hidden_state: number[][][];
  mean_pooled: number[][];
  cls: number[][];
  pooler_output?: number[][];
  attended_span?: { input: number; per_layer: [number, number][][] };
}

interface Folder { config: Record<string, unknown>; weights: Uint8Array; golden: EncoderGolden }

const folders = new Map<string, Promise<Folder>>();

function folder(ctx: CaseContext, name: string): Promise<Folder> {
  let f = folders.get(name);
  if (!f) {
    f = (async () => ({
      config: JSON.parse(text(await ctx.fixture(`goldens-layers/${name}/config.json`))),
      weights: await ctx.fixture(`goldens-layers/${name}/model.safetensors`),
      golden: JSON.parse(text(await ctx.fixture(`goldens-layers/${name}/golden.json`))) as EncoderGolden,
    }))();
    folders.set(name, f);
  }
  return f;
}

/** Through engine.loadModel (which hands encoder configs to loadEncoderModel): the browser and Deno
 *  suites then run the built library's own classes. */
async function load(engine: Engine, f: Folder, extra: Record<string, unknown> = {}): Promise<EncoderModel> {
  return await engine.loadModel({ config: f.config, weights: await loadSafetensors(f.weights), ...extra }) as unknown as EncoderModel;
}

/** got within tol·max|want| of want, element by element; returns the worst error relative to that max. */
function within(what: string, got: ArrayLike<number>, want: ArrayLike<number>, tol: number): number {
  assert(got.length === want.length, `${what}: ${got.length} values, expected ${want.length}`);
  let max = 0;
  for (let i = 0; i < want.length; i++) max = Math.max(max, Math.abs(want[i]));
  let worst = 0;
  for (let i = 0; i < want.length; i++) {
    const err = Math.abs(got[i] - want[i]);
    if (!(err <= tol * max)) throw new Error(`${what}[${i}]: got ${got[i]}, expected ${want[i]} (|err| ${err.toExponential(2)} > ${tol} × max ${max.toFixed(3)})`);
    worst = Math.max(worst, err / max);
  }
  return worst;
}

/** The golden's checks shared by both folders: states, pooled vectors, each input alone. */
async function checkGolden(ctx: CaseContext, name: string, f: Folder, model: EncoderModel): Promise<void> {
  const g = f.golden;
  assert(model.architecture === g.architecture, `architecture ${model.architecture}, golden ${g.architecture}`);
  const states = await model.encode(g.inputs);
  let worst = 0;
  for (const [i, s] of states.entries()) worst = Math.max(worst, within(`${name} last_hidden_state of input ${i}`, s, g.last_hidden_state[i].flat(), 1e-3));
  for (const [i, x] of g.inputs.entries()) {
    const [alone] = await model.encode([Int32Array.from(x)]);
    within(`${name} input ${i} alone against the batch`, alone, states[i], 1e-5);
  }
  const mean = await model.embed(g.inputs, { pooling: 'mean' });
  const cls = await model.embed(g.inputs, { pooling: 'cls' });
  for (const [i] of g.inputs.entries()) {
    worst = Math.max(worst, within(`${name} mean_pooled ${i}`, mean[i], g.mean_pooled[i], 1e-3), within(`${name} cls ${i}`, cls[i], g.cls[i], 1e-3));
  }
  const unit = await model.embed(g.inputs, { normalize: true });
  for (const [i, v] of unit.entries()) {
    let n = 0;
    for (const x of mean[i]) n += x * x;
    within(`${name} normalized mean ${i}`, v, Array.from(mean[i], (x) => x / Math.sqrt(n)), 1e-6);
  }
  if (g.pooler_output) {
    const pooled = await model.embed(g.inputs, { pooling: 'pooler' });
    for (const [i, v] of pooled.entries()) worst = Math.max(worst, within(`${name} pooler_output ${i}`, v, g.pooler_output[i], 1e-3));
  }
  ctx.note(`${name}: worst error ${worst.toExponential(2)} of max|value| (states, mean, cls${g.pooler_output ? ', pooler' : ''}); each input alone equal to the batch`);
}

/** A small WordPiece tokenizer.json over the BERT golden's 256 ids: [PAD] 0, [UNK] 1, [CLS] 2, [SEP] 3, w4 ... w255. */
export function wordPiece(): object {
  const vocab: Record<string, number> = { '[PAD]': 0, '[UNK]': 1, '[CLS]': 2, '[SEP]': 3 };
  for (let i = 4; i < 256; i++) vocab[`w${i}`] = i;
  const added = ['[PAD]', '[UNK]', '[CLS]', '[SEP]'].map((content, id) => ({ id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true }));
  return {
    version: '1.0', truncation: null, padding: null, added_tokens: added, normalizer: null,
    pre_tokenizer: { type: 'Whitespace' },
    post_processor: {
      type: 'TemplateProcessing',
      single: [{ SpecialToken: { id: '[CLS]', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }, { SpecialToken: { id: '[SEP]', type_id: 0 } }],
      pair: [{ SpecialToken: { id: '[CLS]', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }, { SpecialToken: { id: '[SEP]', type_id: 0 } }, { Sequence: { id: 'B', type_id: 1 } }, { SpecialToken: { id: '[SEP]', type_id: 1 } }],
      special_tokens: { '[CLS]': { id: '[CLS]', ids: [2], tokens: ['[CLS]'] }, '[SEP]': { id: '[SEP]', ids: [3], tokens: ['[SEP]'] } },
    },
    decoder: { type: 'WordPiece', prefix: '##', cleanup: true },
    model: { type: 'WordPiece', unk_token: '[UNK]', continuing_subword_prefix: '##', max_input_chars_per_word: 100, vocab },
  };
}

const base64F32 = (s: string): Float32Array => {
  const b = Uint8Array.from(atob(s), (ch) => ch.charCodeAt(0));
  const dv = new DataView(b.buffer);
  return Float32Array.from({ length: b.length / 4 }, (_, i) => dv.getFloat32(4 * i, true));
};

interface T5Golden {
  encoder_input_ids: number[][];
  encoder_last_hidden_state: number[][][];
  decoder_input_ids: number[][];
  prefill_logits: number[][][];
  greedy: number[][];
  step_logits: number[][][];
}

/** The t5-relbias golden (goldens-layers) and its model, loaded on the case's engine (with `extra` loadModel options). */
export async function loadT5Golden(ctx: CaseContext, extra: { maxSeqsPerStep?: number; kvCache?: { numBlocks?: number; blockSize?: number } } = {}): Promise<{ golden: T5Golden; model: T5Model; config: Uint8Array; weights: Uint8Array }> {
  const name = 'goldens-layers/t5-relbias';
  const [config, weights, g] = await Promise.all(['config.json', 'model.safetensors', 'golden.json'].map((f) => ctx.fixture(`${name}/${f}`)));
  const golden = JSON.parse(text(g)) as T5Golden;
  const model = await ctx.engine.loadModel({ config: JSON.parse(text(config)), weights: await loadSafetensors(weights), ...extra }) as unknown as T5Model;
  return { golden, model, config, weights };
}

export const encoderCases: TestCase[] = defineCases('encoder', [
  {
    // The kernels' two-sided window (ModernBERT's local layers) on the model's geometry (4 heads of 32,
    // f32), so the golden cases reuse its pipelines: inputs of several lengths as one paged batch with no
    // causal mask, one of a single token (the decode kernel), one with cached context (the window
    // centred on i_abs), against the float64 reference. On a GPU also f16 queries over an f16 cache: the
    // subgroup-matrix tile where the adapter has one.
    name: 'two-sided sliding window (|i_abs - j| < W) in paged attention without a causal mask, flash and decode kernels (GPU: f16 on the matrix tile), against the float64 reference',
    async run(ctx) {
      // With the encoder goldens, whose pipelines it shares (Chromium's SwiftShader takes the subgroup kernels).
      if (!goldenRunsHere(ctx, 'the two-sided window cases')) return;
      const engine = ctx.engine;
      const [H, D, bs, W] = [4, 32, 16, 5];
      const seqs = [{ ctx: 0, q: 11 }, { ctx: 0, q: 1 }, { ctx: 0, q: 27 }, { ctx: 6, q: 9 }];
      const S = seqs.length;
      const seqLens = Int32Array.from(seqs, (s) => s.ctx + s.q);
      const maxB = Math.max(...Array.from(seqLens, (l) => Math.ceil(l / bs)));
      const numBlocks = Array.from(seqLens, (l) => Math.ceil(l / bs)).reduce((a, b) => a + b, 0) + 1;
      const blockTable = new Int32Array(S * maxB);
      const qsl = new Int32Array(S + 1);
      const slots: number[] = [];
      for (let s = 0, b = numBlocks - 1; s < S; s++) {
        for (let n = 0; n < Math.ceil(seqLens[s] / bs); n++) blockTable[s * maxB + n] = b--;   // blocks handed out backwards
        for (let p = 0; p < seqLens[s]; p++) slots.push(blockTable[s * maxB + Math.floor(p / bs)] * bs + (p % bs));
        qsl[s + 1] = qsl[s] + seqs[s].q;
      }
      const Tk = slots.length, T = qsl[S];
      for (const dt of engine.adapter.software ? ['f32'] as const : ['f32', 'f16'] as const) {
        const k = roundToDType(randn(Tk * H * D, 71), dt), v = roundToDType(randn(Tk * H * D, 72), dt), q = roundToDType(randn(T * H * D, 73, 2), dt);
        const cache = engine.createPagedKVCache({ numBlocks, blockSize: bs, numKvHeads: H, headSize: D, dtype: dt });
        const kt = engine.tensor(k, [Tk, H, D], dt), vt = engine.tensor(v, [Tk, H, D], dt), qt = engine.tensor(q, [T, H, D], dt);
        engine.reshapeAndCache(kt, vt, cache, Int32Array.from(slots));
        const meta = { queryStartLoc: qsl, seqLens, blockTable, maxBlocksPerSeq: maxB };
        const plan = engine.planAttention(meta, { cache, numHeads: H, causal: false, slidingWindow: W, windowBothSides: true });
        const got = await plan.runWithLse(qt, cache);
        const out = await got.out.toFloat32(), lse = await got.lse.toFloat32();
        const ref0 = reference.reshapeAndCacheRef(k, v, Int32Array.from(slots), new Float64Array(numBlocks * H * bs * D), new Float64Array(numBlocks * H * bs * D),
          { Hq: H, Hkv: H, D, Dv: D, numBlocks, blockSize: bs, T: Tk });
        const dims = { Hq: H, Hkv: H, D, Dv: D, numBlocks, blockSize: bs, T };
        const ref = reference.pagedAttentionRef(q, ref0.keyCache, ref0.valueCache, dims, meta, { causal: false, slidingWindow: W, windowBothSides: true });
        assertClose(`two-sided window out (${dt})`, out, ref.out, dt);
        assertClose(`two-sided window lse (${dt})`, lse, ref.lse, 'f32');
        // The window did cut: the one-sided and unwindowed references differ from it.
        const wide = reference.pagedAttentionRef(q, ref0.keyCache, ref0.valueCache, dims, meta, { causal: false, slidingWindow: W });
        let apart = 0;
        for (let i = 0; i < out.length; i++) apart = Math.max(apart, Math.abs(wide.out[i] - ref.out[i]));
        assert(apart > 0.05, `the two-sided window changed nothing against the one-sided one (${apart})`);
        plan.destroy();
        for (const x of [kt, vt, qt, got.out, got.lse]) x.destroy();
        cache.destroy();
      }
    },
  },
  {
    // Dense SDPA's two kernels with the same window, Lq < Lk (i_abs = i + Lk - Lq): head size 16 as T5's
    // attention compiles it, so the flash pipeline is shared.
    name: 'two-sided sliding window in dense SDPA (flash and naive), Lq < Lk, against the float64 reference',
    async run(ctx) {
      if (!goldenRunsHere(ctx, 'the two-sided window cases')) return;
      const engine = ctx.engine;
      const [B, H, Lq, Lk, D, W] = [2, 2, 9, 13, 16, 3];
      const q = randn(B * H * Lq * D, 81, 2), k = randn(B * H * Lk * D, 82), v = randn(B * H * Lk * D, 83);
      const qt = engine.tensor(q, [B, H, Lq, D]), kt = engine.tensor(k, [B, H, Lk, D]), vt = engine.tensor(v, [B, H, Lk, D]);
      const ref = reference.sdpaRef(q, k, v, { B, Hq: H, Hkv: H, Lq, Lk, D, Dv: D }, { slidingWindow: W, windowBothSides: true });
      const oneSided = reference.sdpaRef(q, k, v, { B, Hq: H, Hkv: H, Lq, Lk, D, Dv: D }, { slidingWindow: W });
      assert(ref.out.some((x, i) => Math.abs(x - oneSided.out[i]) > 0.05), 'the two-sided window changed nothing against the one-sided one');
      for (const backend of ['flash', 'naive'] as const) {
        const r = engine.sdpaWithLse(qt, kt, vt, { slidingWindow: W, windowBothSides: true, backend } as never);
        assertClose(`dense ${backend} two-sided window out`, await r.out.toFloat32(), ref.out, 'f32');
        assertClose(`dense ${backend} two-sided window lse`, await r.lse.toFloat32(), ref.lse, 'f32');
        r.out.destroy();
        r.lse.destroy();
      }
      for (const x of [qt, kt, vt]) x.destroy();
    },
  },
  {
    name: 'windowBothSides without slidingWindow, or not a boolean, is refused',
    async run({ engine }) {
      const cache = engine.createPagedKVCache({ numBlocks: 1, blockSize: 16, numKvHeads: 1, headSize: 32, dtype: 'f32' });
      const meta = { queryStartLoc: Int32Array.of(0, 3), seqLens: Int32Array.of(3), blockTable: Int32Array.of(0), maxBlocksPerSeq: 1 };
      await expectThrows(() => engine.planAttention(meta, { cache, numHeads: 1, causal: false, windowBothSides: true }), 'windowBothSides', 'slidingWindow');
      await expectThrows(() => engine.planAttention(meta, { cache, numHeads: 1, slidingWindow: 4, windowBothSides: 1 as unknown as boolean }), 'windowBothSides', 'a boolean');
      cache.destroy();
    },
  },
  ...(['bert-padded-batch', 'modernbert-local-global'] as const).map((name): TestCase => ({
    name: `${name}: last hidden states within 1e-3·max|value| of HF${name.startsWith('bert') ? ', mean, CLS and pooler outputs (f16 weights: 1e-2)' : ' (local layers: |i - j| <= 4), mean and CLS'}; each input alone equal to the batch`,
    async run(ctx) {
      if (!goldenRunsHere(ctx, name)) return;
      const f = await folder(ctx, name);
      const span = f.golden.attended_span;
      if (span) {
        // The config's layer types and local_attention read as HF's attention saw them.
        const L = f.golden.inputs[span.input].length;
        const types = f.config.layer_types as string[], half = (f.config.local_attention as number) / 2;
        span.per_layer.forEach((rows, l) => rows.forEach(([a, b], i) => {
          const want = types[l] === 'full_attention' ? [0, L - 1] : [Math.max(0, i - half), Math.min(L - 1, i + half)];
          assert(a === want[0] && b === want[1], `attended_span layer ${l} row ${i}: HF [${a}, ${b}], the window gives [${want}]`);
        }));
      }
      const model = await load(ctx.engine, f);
      try {
        await checkGolden(ctx, name, f, model);
      } finally {
        model.destroy();
      }
      // 16-bit weights on the GPU (activations and the scratch K/V stay f32): within f16's rounding. Their
      // products are pipelines of their own: on GPUs, and of the software runtimes in Deno (the quickest to
      // compile them).
      if (name.startsWith('bert') && ctx.engine.adapter.software && ctx.runtime !== 'deno') {
        ctx.note(`${name} with f16 weights: runs on GPUs and in deno`);
      } else if (name.startsWith('bert')) {
        const half = await load(ctx.engine, f, { dtype: 'f16' });
        try {
          assert(half.weightBytes < 0.6 * (await folder(ctx, name)).weights.length, `f16 weights take ${half.weightBytes} bytes`);
          let worst = 0;
          for (const [i, s] of (await half.encode(f.golden.inputs)).entries()) worst = Math.max(worst, within(`${name} f16 weights: input ${i}`, s, f.golden.last_hidden_state[i].flat(), 1e-2));
          ctx.note(`${name} with f16 weights: worst error ${worst.toExponential(2)} of max|value|`);
        } finally {
          half.destroy();
        }
      }
    },
  })),
  {
    name: 'embed and embeddings.create: text through the tokenizer, OpenAI\'s response shape (float and base64), dimensions, usage; every bad request refused',
    async run(ctx) {
      if (!goldenRunsHere(ctx, 'embeddings over the BERT golden')) return;
      const f = await folder(ctx, 'bert-padded-batch');
      const model = await load(ctx.engine, f, { tokenizer: wordPiece(), name: 'tiny-bert' });
      try {
        assert(model.tokenizer !== undefined && model.id === 'tiny-bert', 'the tokenizer and name are kept');
        const words = 'w17 w93 w5', ids = [2, 17, 93, 5, 3];
        const [fromText] = await model.embed([words], { normalize: true });
        const [fromIds] = await model.embed([ids], { normalize: true });
        within('text and its ids embed the same', fromText, fromIds, 0);
        const r = await model.embeddings.create({ input: [words, 'w20 w21'] });
        assert(r.object === 'list' && r.model === 'tiny-bert' && r.data.length === 2, `response ${JSON.stringify(r).slice(0, 200)}`);
        assert(r.usage.prompt_tokens === 9 && r.usage.total_tokens === 9, `usage ${JSON.stringify(r.usage)}`);
        r.data.forEach((d, i) => assert(d.object === 'embedding' && d.index === i && Array.isArray(d.embedding) && d.embedding.length === 128, `data[${i}]`));
        within('embeddings.create float = embed(normalize)', r.data[0].embedding as number[], fromIds, 1e-6);
        const b = await model.embeddings.create({ input: ids, encoding_format: 'base64' });
        within('base64 decodes to the float vector', base64F32(b.data[0].embedding as string), fromIds, 0);
        const short = await model.embeddings.create({ input: [ids, [2, 250, 3]], dimensions: 16, model: 'tiny-bert' });
        const e = short.data[0].embedding as number[];
        let n = 0;
        for (const x of e) n += x * x;
        assert(e.length === 16 && Math.abs(n - 1) < 1e-5, `dimensions 16: ${e.length} values of norm² ${n}`);
        within('dimensions: the first values, normalized again', e, Array.from(fromIds.slice(0, 16), (x) => x / Math.hypot(...fromIds.slice(0, 16))), 1e-5);
        for (const [req, ...frag] of [
          [{ input: [] }, 'input'], [{ input: '' }, 'non-empty'], [{ input: [2, 300] }, 'input[1]', '[0, 256)'],
          [{ input: ids, encoding_format: 'f16' }, 'encoding_format'], [{ input: ids, dimensions: 129 }, 'dimensions'],
          [{ input: ids, temperature: 1 }, 'temperature'], [{ input: [1, 'a'] }, 'input'], [{ input: Array(65).fill(4) }, '64'],
        ] as [Record<string, unknown>, ...string[]][]) {
          await expectThrows(() => model.embeddings.create(req as never), ...frag);
        }
        await expectThrows(() => model.embed(['w4'], { pooling: 'max' as never }), 'pooling');
        await expectThrows(() => model.encode([[2, 256]]), 'inputs[0][1]', '[0, 256)');
        await expectThrows(() => model.encode([[]]), 'inputs[0]', 'non-empty');
        await expectThrows(() => model.logits(), 'encoder-only');
        await expectThrows(() => model.generate(), 'encoder-only');
        await expectThrows(() => model.chat.completions.create({}), 'encoder-only');
        assert((await model.encode([])).length === 0, 'no inputs, no states');
      } finally {
        model.destroy();
      }
      const noTok = await load(ctx.engine, f);
      try {
        await expectThrows(() => noTok.embed(['w4']), 'tokenizer');
        await expectThrows(() => noTok.embeddings.create({ input: 'w4' }), 'tokenizer');
      } finally {
        noTok.destroy();
      }
      await expectThrows(async () => (await load(ctx.engine, (await folder(ctx, 'modernbert-local-global')))).embed([[1, 2]], { pooling: 'pooler' }), 'pooler');
    },
  },
  {
    // The golden's greedy loop recomputes the decoder over start + tokens so far and takes the last row's
    // argmax; the decoder being causal, one pass over start + HF's 8 tokens gives every step's logits at
    // once (row len(start) - 1 + s): each within 1e-3·max and its argmax HF's token is the greedy check,
    // and generate's own loop runs two steps of it.
    name: 't5-relbias: encoder states, prefill and step logits within 1e-3·max of HF (relative position bias, cross-attention, scaled tied head); greedy tokens identical',
    async run(ctx) {
      if (!goldenRunsHere(ctx, 't5-relbias')) return;
      const { golden, model, config, weights } = await loadT5Golden(ctx);
      try {
        let worst = 0;
        for (const [c, ids] of golden.encoder_input_ids.entries()) {
          worst = Math.max(worst, within(`t5 encoder states ${c}`, await model.encoderStates(ids), golden.encoder_last_hidden_state[c].flat(), 1e-3));
          const dec = golden.decoder_input_ids[c], want = golden.greedy[c];
          const logits = await model.logits([...dec, ...want.slice(0, -1)], { encoderInput: ids });
          const V = golden.prefill_logits[c][0].length;
          const row = (t: number) => logits.subarray(t * V, (t + 1) * V);
          golden.prefill_logits[c].forEach((ref, t) => { worst = Math.max(worst, within(`t5 case ${c} prefill logits at ${t}`, row(t), ref, 1e-3)); });
          want.forEach((token, s) => {
            const r = row(dec.length - 1 + s);
            worst = Math.max(worst, within(`t5 case ${c} step ${s} logits`, r, golden.step_logits[c][s], 1e-3));
            const top = r.indexOf(Math.max(...r));
            assert(top === token, `t5 case ${c} greedy step ${s}: argmax ${top}, HF ${token}`);
          });
        }
        const two = await model.generate([golden.decoder_input_ids[1]], { encoderInputs: [golden.encoder_input_ids[1]], maxNewTokens: 2, stopTokens: [] });
        assert(two[0].join() === golden.greedy[1].slice(0, 2).join(), `t5 generate: ${two[0]}, HF ${golden.greedy[1].slice(0, 2)}`);
        ctx.note(`t5-relbias: worst error ${worst.toExponential(2)} of max|value| (encoder states, prefill and step logits); greedy tokens identical`);
      } finally {
        model.destroy();
      }
      // The same weights as an untied checkpoint (lm_head.weight, a copy of shared.weight) that still
      // scales its decoder output: the head is read from lm_head, and the logits are the golden's.
      const file = await loadSafetensors(weights);
      const tensors: Record<string, EncodableTensor> = {};
      for (const [n, info] of file.tensors) {
        const b = await file.bytes(n);
        tensors[n] = { dtype: 'F32', shape: info.shape, data: new Float32Array(b.slice().buffer) };
      }
      tensors['lm_head.weight'] = { ...tensors['shared.weight'] };
      const untied = await ctx.engine.loadModel({ config: { ...JSON.parse(text(config)), tie_word_embeddings: false, scale_decoder_outputs: true },
        weights: await loadSafetensors(encodeSafetensors(tensors)) }) as unknown as T5Model;
      try {
        const ids = golden.encoder_input_ids[1], dec = golden.decoder_input_ids[1];
        const logits = await untied.logits(dec, { encoderInput: ids });
        const V = golden.prefill_logits[1][0].length;
        golden.prefill_logits[1].forEach((row, t) => within(`untied t5 prefill logits at ${t}`, logits.subarray(t * V, (t + 1) * V), row, 1e-3));
        await expectThrows(() => untied.logits(dec), 'encoderInput');
        await expectThrows(() => untied.logits(dec, { encoderInput: [5, 300] }), 'encoderInput[1]', '[0, 256)');
        await expectThrows(() => untied.embed(), 'encoder-decoder');
      } finally {
        untied.destroy();
      }
    },
  },
  {
    // T5's transposes (models/t5.ts): rows [tokens, heads·D] (strided, at an offset, two sources at once)
    // into SDPA's [heads, bs, D] at given positions, a negative slot skipped; SDPA's output back into
    // rows (tokens and heads in each other's roles); whole rows to other rows. Destinations poisoned.
    name: 'moveHeadRows (the cache write kernel as T5\'s row mover): rows to heads at slots, heads back to rows, rows to rows, against the host; skipped slots and the rest left alone',
    async run(ctx) {
      const e = ctx.engine, T = 5, H = 3, D = 4, bs = 7, stride = 2 * H * D + 3, off = 5;
      const src = randn(off + T * stride, 31);
      const slots = [6, 0, -1, 3, 2];
      const POISON = 1234.5;
      const poisoned = (n: number) => e.tensor(new Float32Array(n).fill(POISON), [n], 'f32');
      const s = e.tensor(src, [src.length], 'f32'), sl = e.tensor(Int32Array.from(slots), [T], 'i32'), sink = e.zeros([1], 'f32');
      const k = poisoned(H * bs * D), v = poisoned(H * bs * D);
      const heads = H * T * D, back = poisoned(T * H * D), rows = poisoned(9 * 2 * D);
      const o = e.tensor(randn(heads, 32), [heads], 'f32'), iotaH = e.tensor(Int32Array.from({ length: H }, (_, i) => i), [H], 'i32');
      const rowSlots = e.tensor(Int32Array.from([8, 1, 4]), [3], 'i32');
      try {
        moveHeadRows(e, T, H, D, bs, sl, { src: s, off, stride, dst: k }, { src: s, off: off + H * D, stride, dst: v }, sink);
        moveHeadRows(e, H, T, D, H, iotaH, { src: o, off: 0, stride: T * D, dst: back }, null, sink);
        moveHeadRows(e, 3, 1, 2 * D, 9, rowSlots, { src: s, off, stride, dst: rows }, null, sink);
        const [gk, gv, gb, gr] = await Promise.all([k.toFloat32(), v.toFloat32(), back.toFloat32(), rows.toFloat32()]);
        const ek = new Float32Array(H * bs * D).fill(POISON), ev = new Float32Array(H * bs * D).fill(POISON);
        slots.forEach((slot, t) => {
          if (slot < 0) return;
          for (let h = 0; h < H; h++) for (let d = 0; d < D; d++) {
            ek[(h * bs + slot) * D + d] = src[off + t * stride + h * D + d];
            ev[(h * bs + slot) * D + d] = src[off + H * D + t * stride + h * D + d];
          }
        });
        const oh = await o.toFloat32(), eb = new Float32Array(T * H * D);
        for (let t = 0; t < T; t++) for (let h = 0; h < H; h++) for (let d = 0; d < D; d++) eb[(t * H + h) * D + d] = oh[(h * T + t) * D + d];
        const er = new Float32Array(9 * 2 * D).fill(POISON);
        [8, 1, 4].forEach((r, t) => { for (let j = 0; j < 2 * D; j++) er[r * 2 * D + j] = src[off + t * stride + j]; });
        equalArrays('keys in heads layout', gk, ek);
        equalArrays('values in heads layout', gv, ev);
        equalArrays('heads back to rows', gb, eb);
        equalArrays('rows to rows', gr, er);
      } finally {
        for (const x of [s, sl, sink, k, v, back, rows, o, iotaH, rowSlots]) x.destroy();
      }
    },
  },
  {
    // generate decodes over its request's cache (each step the decoder over its new token); logits
    // recomputes the decoder over every token. The recompute's greedy chain, a step at a time, is the
    // reference, 24 tokens long: past 16 positions back the relative bias falls into the log buckets.
    name: 't5-relbias: generate over a cache equals the recompute at every step (greedy, 24 tokens, both requests together, HF\'s 8 first); a stop token ends its reply',
    async run(ctx) {
      if (!goldenRunsHere(ctx, 't5-relbias')) return;
      const { golden, model } = await loadT5Golden(ctx);
      try {
        const N = 24;
        const got = await model.generate(golden.decoder_input_ids, { encoderInputs: golden.encoder_input_ids, maxNewTokens: N, stopTokens: [] });
        for (const [c, ids] of golden.encoder_input_ids.entries()) {
          const seq = [...golden.decoder_input_ids[c]], chain: number[] = [];
          const V = golden.prefill_logits[c][0].length;
          while (chain.length < N) {
            const logits = await model.logits(seq, { encoderInput: ids });
            const r = logits.subarray((seq.length - 1) * V, seq.length * V);
            const top = r.indexOf(Math.max(...r));
            chain.push(top);
            seq.push(top);
          }
          assert(got[c].join() === chain.join(), `t5 case ${c}: generate over the cache ${got[c]}, the recompute ${chain}`);
          assert(chain.slice(0, golden.greedy[c].length).join() === golden.greedy[c].join(), `t5 case ${c}: recompute ${chain}, HF ${golden.greedy[c]}`);
          const stop = chain[2];
          const ended = await model.generate([golden.decoder_input_ids[c]], { encoderInputs: [ids], maxNewTokens: N, stopTokens: [stop] });
          assert(ended[0].join() === chain.slice(0, chain.indexOf(stop) + 1).join(), `t5 case ${c}: stop token ${stop}: ${ended[0]}`);
        }
      } finally {
        model.destroy();
      }
    },
  },
  {
    // T5's requests are the one RequestEngine's: the decoder step runs every running sequence's rows
    // together (each over its own cache), so a reply must not depend on what else runs beside it.
    name: 't5-relbias on the request engine: requests batched (steps in flight reading ids on the GPU, or one), and one joining another mid-way, equal each alone; a second call creates no GPU buffer',
    async run(ctx) {
      if (!goldenRunsHere(ctx, 't5-relbias')) return;
      const { golden, model } = await loadT5Golden(ctx);
      try {
        const e = ctx.engine, N = 12;
        // Every decoder prompt with every encoder input: four requests of different lengths and inputs.
        const pairs = golden.decoder_input_ids.flatMap((p) => golden.encoder_input_ids.map((ids) => ({ p, ids })));
        const alone: number[][] = [];
        for (const { p, ids } of pairs) alone.push((await model.generate([p], { encoderInputs: [ids], maxNewTokens: N, stopTokens: [] }))[0]);
        const s0 = { ...model.decodeStats };
        const all = await withTuning(e, { stepsInFlight: 3 }, () => model.generate(pairs.map((x) => x.p), { encoderInputs: pairs.map((x) => x.ids), maxNewTokens: N, stopTokens: [] }));
        pairs.forEach((_, i) => assert(all[i].join() === alone[i].join(), `t5 request ${i} batched: ${all[i]}, alone ${alone[i]}`));
        // Steps in flight: every decode step after a request's first token read its input id on the GPU.
        assert(model.decodeStats.fromGpu - s0.fromGpu === pairs.length * (N - 1), `rows fed from the GPU: ${model.decodeStats.fromGpu - s0.fromGpu} of ${pairs.length * (N - 1)}`);
        // Batched: the four requests' rows shared steps (a step per token, not per request and token; the
        // first request's first steps, up to the three in flight, may run before the call has submitted the others).
        assert(model.decodeStats.steps - s0.steps <= N + 3, `four requests of ${N} tokens took ${model.decodeStats.steps - s0.steps} steps`);
        assert(model.decodeStats.rows - s0.rows === pairs.length * N, `rows ${model.decodeStats.rows - s0.rows}`);
        // One step in flight: each step waits for the last one's ids on the host; the same replies.
        const s1 = { ...model.decodeStats };
        const one = await withTuning(e, { stepsInFlight: 1 }, () => model.generate(pairs.map((x) => x.p), { encoderInputs: pairs.map((x) => x.ids), maxNewTokens: N, stopTokens: [] }));
        pairs.forEach((_, i) => assert(one[i].join() === alone[i].join(), `t5 request ${i} batched, one step in flight: ${one[i]}, alone ${alone[i]}`));
        assert(model.decodeStats.fromGpu === s1.fromGpu, `one step in flight fed ${model.decodeStats.fromGpu - s1.fromGpu} rows from the GPU`);
        // Request 3 joins request 0 after its third step: its prompt's rows run beside 0's decodes.
        const first = model.generate([pairs[0].p], { encoderInputs: [pairs[0].ids], maxNewTokens: N, stopTokens: [] });
        let firstDone = false;
        void first.then(() => { firstDone = true; }, () => undefined);
        const steps0 = model.decodeStats.steps;
        while (model.decodeStats.steps < steps0 + 3) await new Promise((r) => setTimeout(r, 1));
        assert(!firstDone, 'request 0 ended before request 3 joined');
        const late = model.generate([pairs[3].p], { encoderInputs: [pairs[3].ids], maxNewTokens: N, stopTokens: [] });
        const [[a], [b]] = await Promise.all([first, late]);
        assert(a.join() === alone[0].join(), `t5 request 0 with request 3 joining: ${a}, alone ${alone[0]}`);
        assert(b.join() === alone[3].join(), `t5 request 3 joining request 0: ${b}, alone ${alone[3]}`);
        // The same call again: every tensor a step takes comes back from the pool.
        await model.generate(pairs.map((x) => x.p), { encoderInputs: pairs.map((x) => x.ids), maxNewTokens: N, stopTokens: [] });
        await e.sync();
        const before = e.counters.createBuffer;
        const again = await model.generate(pairs.map((x) => x.p), { encoderInputs: pairs.map((x) => x.ids), maxNewTokens: N, stopTokens: [] });
        await e.sync();
        assert(e.counters.createBuffer === before, `a second batched generate created ${e.counters.createBuffer - before} GPU buffers`);
        pairs.forEach((_, i) => assert(again[i].join() === alone[i].join(), `t5 request ${i} in the second call: ${again[i]}`));
        model.kv.checkInvariants();
        assert(model.kv.freeBlocks === model.kv.numBlocks && model.engine.pending === 0, `after the calls: ${model.kv.freeBlocks} of ${model.kv.numBlocks} blocks free, ${model.engine.pending} pending`);
      } finally {
        model.destroy();
      }
    },
  },
  {
    name: 'loading an encoder refuses generation options, quantized dtypes and checkpoints that miss a tensor, before any GPU memory is taken',
    async run(ctx) {
      const f = await folder(ctx, 'bert-padded-batch');
      const w = await loadSafetensors(f.weights);
      for (const [extra, ...frag] of [
        [{ kvCache: { numBlocks: 4 } }, 'kvCache', 'no KV cache'], [{ maxSeqsPerStep: 4 }, 'maxSeqsPerStep'],
        [{ generationConfig: {} }, 'generationConfig'], [{ dtype: 'q8' }, 'dtype'], [{ bogus: 1 }, 'bogus'],
      ] as [Record<string, unknown>, ...string[]][]) {
        await expectThrows(() => ctx.engine.loadModel({ config: f.config, weights: w, ...extra } as never), ...frag);
      }
      await expectThrows(() => ctx.engine.loadModel({ config: { ...f.config, num_hidden_layers: 3 }, weights: w }), 'missing encoder.layer.2');
      await expectThrows(() => ctx.engine.loadModel({ config: { ...f.config, hidden_act: 'swish' }, weights: w }), 'hidden_act');
      await expectThrows(() => ctx.engine.loadModel({ config: { ...f.config, architectures: ['BertForMaskedLM'] }, weights: w }), 'architectures');
    },
  },
]);
