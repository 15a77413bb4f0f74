// Whisper (WhisperForConditionalGeneration) against HF transformers (../shared/goldens-layers, its
// README): the log-mel front end on the GPU against WhisperFeatureExtractor's features (within 1e-3 ×
// max|feature|) and its mel filter bank (within f32 rounding); the encoder's last hidden state (1e-3 ×
// max|value|); the decoder's prefill logits (SPEC §7: 1e-3 × the row's max|logit|) and greedy tokens;
// requests batched equal to each alone; cross-attention over per-request encoder caches against the
// float64 reference in a mixed batch; and no GPU buffer created by a second transcription.
// Everything through the package's exports (engine.loadModel, ops.*): the Deno and browser suites run the
// built library, whose classes a direct import of src/models or src/ops would duplicate.
import { loadSafetensors, ops, reference } from '../../src/index';
import type { Model, RequestOptions, T5Model, WhisperModel } from '../../src/index';
import { rng } from '../../src/core/random';
import { loadT5Golden } from './encoder.cases';
import { assert, assertClose, defineCases, equalArrays, expectThrows, goldenRunsHere, randn, withTuning, type CaseContext, type TestCase } from './harness';
import { golden } from './model.cases';

const text = (b: Uint8Array) => new TextDecoder().decode(b);

interface ModelGolden {
  input_features: number[][][]; encoder_last_hidden_state: number[][][]; decoder_input_ids: number[][];
  prefill_logits: number[][][]; greedy: number[][]; step_logits: number[][][];
}

const DIR = 'goldens-layers/whisper-tiny-random';
let tiny: Promise<{ config: Record<string, unknown>; gen: object; weights: Uint8Array; g: ModelGolden }> | null = null;
function tinyGolden(ctx: CaseContext) {
  tiny ??= (async () => ({
    config: JSON.parse(text(await ctx.fixture(`${DIR}/config.json`))),
    gen: JSON.parse(text(await ctx.fixture(`${DIR}/generation_config.json`))),
    weights: await ctx.fixture(`${DIR}/model.safetensors`),
    g: JSON.parse(text(await ctx.fixture(`${DIR}/golden.json`))) as ModelGolden,
  }))();
  return tiny;
}

type TinyOptions = { maxSeqsPerStep?: number; generationConfig?: object; kvCache?: { numBlocks?: number; blockSize?: number } };

/** The tiny model loaded for one case (destroyed by the caller), with its golden; o.generationConfig adds to the folder's. */
async function tinyModel(ctx: CaseContext, o: TinyOptions = {}): Promise<{ model: WhisperModel; g: ModelGolden }> {
  const t = await tinyGolden(ctx);
  const model = await ctx.engine.loadModel({ config: t.config, weights: await loadSafetensors(t.weights), ...o, generationConfig: { ...t.gen, ...o.generationConfig } }) as unknown as WhisperModel;
  return { model, g: t.g };
}

/** Runs fn over the tiny model, destroying it after. */
async function withTiny(ctx: CaseContext, fn: (m: WhisperModel, g: ModelGolden) => Promise<void>, o: TinyOptions = {}): Promise<void> {
  const { model, g } = await tinyModel(ctx, o);
  try {
    await fn(model, g);
  } finally {
    model.destroy();
  }
}

interface FrontGolden { mel_filters: number[][]; waveforms: number[][]; input_features: number[][][]; frames: number; n_mels: number }

let front: Promise<{ pre: unknown; g: FrontGolden }> | null = null;
function frontGolden(ctx: CaseContext) {
  front ??= (async () => ({
    pre: JSON.parse(text(await ctx.fixture('goldens-layers/whisper-frontend/preprocessor_config.json'))),
    g: JSON.parse(text(await ctx.fixture('goldens-layers/whisper-frontend/golden.json'))) as FrontGolden,
  }))();
  return front;
}

/** |got − ref| within tol × max|ref| everywhere; returns the worst ratio err / max|ref|. */
function within(what: string, got: ArrayLike<number>, ref: ArrayLike<number>, tol: number): number {
  assert(got.length === ref.length, `${what}: ${got.length} values, expected ${ref.length}`);
  let max = 0;
  for (let i = 0; i < ref.length; i++) max = Math.max(max, Math.abs(ref[i]));
  let worst = 0;
  for (let i = 0; i < ref.length; i++) {
    const err = Math.abs(got[i] - ref[i]);
    if (!(err <= tol * max)) throw new Error(`${what}: element ${i}: got ${got[i]}, HF ${ref[i]} (|err| ${err.toExponential(2)} > ${tol} × max ${max.toFixed(4)})`);
    worst = Math.max(worst, err / max);
  }
  return worst;
}

const flat = (a: number[][]) => Float32Array.from(a.flat());

/** One model kind under the engine fuzz: its requests (a prompt and what the engine hands the runner with it) and their replies alone. */
interface FuzzSubject {
  name: string;
  model: { engine: Model['engine']; kv: Model['kv']; destroy(): void };
  items: { prompt: number[]; encoderInput?: unknown }[];
  /** Item i's greedy reply alone, `max` tokens (no stop token). */
  alone(i: number, max: number): Promise<number[]>;
  /** Whether its cache is small enough that the fuzz must preempt. */
  preempts: boolean;
}

/**
 * The request engine fuzz over one model (serve.cases' decoder-only fuzz, for any kind): a burst of
 * every item at once, then `count` requests at random times of random items, lengths, stop tokens and cancellations, submitted to the
 * model's engine as they come; each that runs to its end gets its reply alone, and afterwards no request
 * is pending, no block is leaked and the block manager's bookkeeping holds.
 */
async function engineFuzz(s: FuzzSubject, seed: number, count: number, max: number): Promise<{ checked: number; preemptions: number }> {
  const r = rng(seed);
  const want: number[][] = [];
  for (let i = 0; i < s.items.length; i++) want.push(await s.alone(i, max));
  const { engine, kv } = s.model;
  const p0 = engine.counters.preemptions;
  // A burst first, every item at once with the longest reply: the cache's pressure whatever the timing.
  const burst = await Promise.all(s.items.map((it) => engine.submit({ prompt: Int32Array.from(it.prompt), maxTokens: max, encoderInput: it.encoderInput }).result));
  burst.forEach((res, i) => equalArrays(`${s.name} item ${i} in a burst of all`, res.tokens[0], want[i]));
  let checked = 0;
  await Promise.all(Array.from({ length: count }, async (_, k) => {
    const i = Math.floor(r() * s.items.length), item = s.items[i], reply = want[i];
    const maxTokens = 3 + Math.floor(r() * (max - 2));
    const stop = r() < 0.3 ? reply[Math.floor(r() * maxTokens)] : -1;
    const cancelAt = r() < 0.2 ? 1 + Math.floor(r() * 3) : -1;
    await new Promise((res) => setTimeout(res, Math.floor(r() * 20)));
    const ac = new AbortController();
    let seen = 0;
    const o: RequestOptions = {
      prompt: Int32Array.from(item.prompt), maxTokens, stopTokens: new Set(stop >= 0 ? [stop] : []), signal: ac.signal, encoderInput: item.encoderInput,
      onTokens: (_c, toks) => { seen += toks.length; if (cancelAt >= 0 && seen >= cancelAt) ac.abort(new Error('cancelled by the test')); },
    };
    try {
      const res = await engine.submit(o).result;
      assert(cancelAt < 0 || seen < cancelAt, `${s.name} request ${k} finished though it was cancelled after ${cancelAt} tokens`);
      let expect = reply.slice(0, maxTokens);
      const cut = stop >= 0 ? expect.indexOf(stop) : -1;
      if (cut >= 0) expect = expect.slice(0, cut + 1);
      equalArrays(`${s.name} request ${k} (item ${i}, max ${maxTokens}, stop ${stop}) against alone`, res.tokens[0], expect);
      checked++;
    } catch (e) {
      if (!(cancelAt >= 0 && (e as Error).message === 'cancelled by the test')) throw e;
    }
  }));
  await new Promise((res) => setTimeout(res, 0));
  assert(engine.pending === 0, `${s.name}: ${engine.pending} requests still pending`);
  kv.checkInvariants();
  assert(kv.freeBlocks === kv.numBlocks, `${s.name}: blocks leaked: ${kv.freeBlocks} of ${kv.numBlocks} free`);
  const preemptions = engine.counters.preemptions - p0;
  if (s.preempts) assert(preemptions > 0, `${s.name}: the fuzz never preempted (cache too large for it)`);
  assert(checked >= count / 3, `${s.name}: only ${checked} of ${count} requests ran to their end`);
  return { checked, preemptions };
}

export const whisperCases: TestCase[] = defineCases('whisper', [
  {
    name: 'mel filter bank (Slaney scale and norm) equals the extractor\'s within f32 rounding',
    async run(ctx) {
      const { pre, g } = await frontGolden(ctx);
      const c = ops.parseMelConfig(pre);
      const f = ops.melFilterBank(c.nFft / 2 + 1, c.nMels, c.samplingRate);
      const ref = g.mel_filters.flat();
      assert(f.length === ref.length, `filters: ${f.length} values, expected ${ref.length}`);
      for (let i = 0; i < ref.length; i++) {
        const a = Math.fround(f[i]), b = Math.fround(ref[i]);
        if (!(Math.abs(a - b) <= 2 ** -23 * Math.abs(b))) throw new Error(`filters[${Math.floor(i / c.nMels)}][${i % c.nMels}]: ${a}, HF ${b}`);
      }
    },
  },
  {
    name: 'log-mel front end on the GPU: both waveforms within 1e-3 × max of WhisperFeatureExtractor\'s',
    async run(ctx) {
      const { pre, g } = await frontGolden(ctx);
      const fe = new ops.MelFrontEnd(ctx.engine, ops.parseMelConfig(pre));
      try {
        // Both waveforms in one dispatch (two windows), the second shorter than a window (zero-padded).
        const pcm = new Float32Array(2 * fe.cfg.chunkSamples);
        pcm.set(fe.windows(Float32Array.from(g.waveforms[0])));
        pcm.set(fe.windows(Float32Array.from(g.waveforms[1])), fe.cfg.chunkSamples);
        const t = ctx.engine.tensor(pcm, [pcm.length], 'f32');
        const out = fe.run(t);
        const got = await out.toFloat32();
        t.destroy(); out.destroy();
        const n = fe.cfg.nMels * fe.frames;
        let worst = 0;
        for (let k = 0; k < 2; k++) worst = Math.max(worst, within(`features of waveform ${k}`, got.subarray(k * n, (k + 1) * n), flat(g.input_features[k]), 1e-3));
        ctx.note(`front end: worst |err| ${worst.toExponential(2)} × max|feature|`);
      } finally {
        fe.destroy();
      }
    },
  },
  {
    name: 'encoder states of both golden inputs within 1e-3 × max|value| of HF\'s',
    async run(ctx) {
      if (!goldenRunsHere(ctx, 'the Whisper goldens')) return;
      await withTiny(ctx, async (model, g) => {
        let worst = 0;
        for (let c = 0; c < 2; c++) {
          const got = await model.encoderStates(flat(g.input_features[c]));
          worst = Math.max(worst, within(`encoder states of case ${c}`, got, flat(g.encoder_last_hidden_state[c]), 1e-3));
        }
        ctx.note(`encoder: worst |err| ${worst.toExponential(2)} × max|value|`);
      });
    },
  },
  {
    name: 'decoder prefill logits (SPEC §7) and step logits of a full recompute; greedy tokens identical; both requests batched equal each alone',
    async run(ctx) {
      if (!goldenRunsHere(ctx, 'the Whisper goldens')) return;
      await withTiny(ctx, async (model, g) => {
        const V = model.cfg.vocab;
        let worst = 0;
        const row = (what: string, got: Float32Array, ref: number[]) => { worst = Math.max(worst, within(what, got, Float32Array.from(ref), 1e-3)); };
        for (let c = 0; c < 2; c++) {
          const ids = g.decoder_input_ids[c], feats = flat(g.input_features[c]);
          const lg = await model.logits(ids, { encoderInput: feats });
          assert(lg.length === ids.length * V, `logits of case ${c}: ${lg.length} values`);
          for (let t = 0; t < ids.length; t++) row(`case ${c} position ${t}`, lg.subarray(t * V, (t + 1) * V), g.prefill_logits[c][t]);
          // The golden's greedy loop recomputes from scratch: the logits of start + greedy[..s] at its last row.
          const all = await model.logits([...ids, ...g.greedy[c].slice(0, -1)], { encoderInput: feats });
          for (let s = 0; s < g.greedy[c].length; s++) {
            const t = ids.length - 1 + s;
            row(`case ${c} step ${s}`, all.subarray(t * V, (t + 1) * V), g.step_logits[c][s]);
          }
        }
        ctx.note(`decoder logits: worst |err| ${worst.toExponential(2)} × max|logit|`);
        const inputs = [0, 1].map((c) => flat(g.input_features[c]));
        const alone = [];
        const r0 = model.graphStats.replayed;
        for (let c = 0; c < 2; c++) {
          const [out] = await model.generate([g.decoder_input_ids[c]], { encoderInputs: [inputs[c]], maxNewTokens: 8, stopTokens: [] });
          equalArrays(`greedy tokens of case ${c}`, out, g.greedy[c]);
          alone.push(out);
        }
        // Each call: a prefill and 7 decode steps, whose layers replay once the plans' buffers come
        // round again (the first two decode steps of a call record).
        const replayed = model.graphStats.replayed - r0;
        if (ctx.engine.tuning.stepGraphs) assert(replayed >= 2 * (7 - 3), `decoder steps replayed: ${replayed} of 14 (expected at least 8)`);
        ctx.note(`decoder steps replayed from a step graph: ${replayed} of 14`);
        const both = await model.generate(g.decoder_input_ids, { encoderInputs: inputs, maxNewTokens: 8, stopTokens: [] });
        for (let c = 0; c < 2; c++) equalArrays(`case ${c} batched with the other`, both[c], alone[c]);
        // Two calls share the model's steps: case 1 arrives after case 0's first token, so it prefills
        // (and its cross keys/values are written) in the same steps as case 0 decodes.
        let late: Promise<number[][]> | null = null;
        const early = model.generate([g.decoder_input_ids[0]], {
          encoderInputs: [inputs[0]], maxNewTokens: 8, stopTokens: [],
          onToken: () => { late ??= model.generate([g.decoder_input_ids[1]], { encoderInputs: [inputs[1]], maxNewTokens: 8, stopTokens: [] }); },
        });
        const [e0] = await early;
        const [l1] = await late!;
        equalArrays('case 0 with case 1 joining mid-way', e0, alone[0]);
        equalArrays('case 1 joining case 0 mid-way', l1, alone[1]);
      });
    },
  },
  {
    name: 'decode steps read the previous step\'s ids on the GPU, steps in flight: greedy and seeded tokens equal one step in flight\'s, batched and with a call joining; a stop or an abort mid-way drops the ids in flight',
    async run(ctx) {
      if (!goldenRunsHere(ctx, 'the Whisper goldens')) return;
      await withTiny(ctx, async (model, g) => {
        const inputs = [0, 1].map((c) => flat(g.input_features[c]));
        const seeded = { maxNewTokens: 8, stopTokens: [], temperature: 1, seed: 7 };
        // One step in flight: every step waits for its ids on the host (the reference chain).
        const ref = await withTuning(ctx.engine, { stepsInFlight: 1 }, async () => {
          const before = model.decodeStats.fromGpu;
          const greedy = await model.generate(g.decoder_input_ids, { encoderInputs: inputs, maxNewTokens: 8, stopTokens: [] });
          const sampled = await model.generate(g.decoder_input_ids, { encoderInputs: inputs, ...seeded });
          assert(model.decodeStats.fromGpu === before, `one step in flight fed ${model.decodeStats.fromGpu - before} rows from the GPU`);
          return { greedy, sampled };
        });
        for (let c = 0; c < 2; c++) equalArrays(`greedy tokens of case ${c}, one step in flight`, ref.greedy[c], g.greedy[c]);
        await withTuning(ctx.engine, { stepsInFlight: 3 }, async () => {
          const s0 = { ...model.decodeStats };
          const greedy = await model.generate(g.decoder_input_ids, { encoderInputs: inputs, maxNewTokens: 8, stopTokens: [] });
          // Each request's 7 decode steps after its prefill read their input id on the GPU.
          assert(model.decodeStats.fromGpu - s0.fromGpu === 2 * 7, `rows fed from the GPU: ${model.decodeStats.fromGpu - s0.fromGpu} of ${2 * 7}`);
          const sampled = await model.generate(g.decoder_input_ids, { encoderInputs: inputs, ...seeded });
          for (let c = 0; c < 2; c++) {
            equalArrays(`greedy case ${c}, steps in flight`, greedy[c], ref.greedy[c]);
            equalArrays(`seeded case ${c}, steps in flight`, sampled[c], ref.sampled[c]);
          }
          // A call joining mid-way (its prefill beside the other's decodes in flight) changes neither.
          let late: Promise<number[][]> | null = null;
          const early = model.generate(g.decoder_input_ids, {
            encoderInputs: inputs, ...seeded,
            onToken: (i) => { if (i === 0) late ??= model.generate([g.decoder_input_ids[1]], { encoderInputs: [inputs[1]], maxNewTokens: 8, stopTokens: [] }); },
          });
          const e = await early;
          const [l] = await late!;
          for (let c = 0; c < 2; c++) equalArrays(`seeded case ${c} with a call joining`, e[c], ref.sampled[c]);
          equalArrays('greedy case 1 joining seeded requests', l, ref.greedy[1]);
          // A stop token ends its request at that token, its later ids in flight dropped.
          const stop = ref.greedy[0][2];
          const [cut] = await model.generate([g.decoder_input_ids[0]], { encoderInputs: [inputs[0]], maxNewTokens: 8, stopTokens: [stop] });
          equalArrays('stopped at its stop token', cut, ref.greedy[0].slice(0, ref.greedy[0].indexOf(stop) + 1));
          // An abort after two tokens rejects that call alone; the blocks come back and the next call is whole.
          const ac = new AbortController();
          let seen = 0;
          await expectThrows(() => model.generate([g.decoder_input_ids[0]], {
            encoderInputs: [inputs[0]], maxNewTokens: 8, stopTokens: [], signal: ac.signal, onToken: () => { if (++seen === 2) ac.abort(); },
          }), 'WhisperModel.generate: aborted');
          const again = await model.generate(g.decoder_input_ids, { encoderInputs: inputs, maxNewTokens: 8, stopTokens: [] });
          for (let c = 0; c < 2; c++) equalArrays(`greedy case ${c} after an abort`, again[c], ref.greedy[c]);
        });
        ctx.note(`decode steps ${JSON.stringify(model.decodeStats)}`);
      });
    },
  },
  {
    name: 'refusals: checkpoints that do not match the config, features and tokens of the wrong size, unknown languages',
    async run(ctx) {
      const t = await tinyGolden(ctx);
      const file = await loadSafetensors(t.weights);
      const without = (drop: string) => ({ ...file, tensors: new Map([...file.tensors].filter(([n]) => n !== drop)), bytes: (n: string) => file.bytes(n) });
      await expectThrows(() => ctx.engine.loadModel({ config: t.config, weights: without('model.decoder.layers.1.encoder_attn.v_proj.bias') }),
        'missing model.decoder.layers.1.encoder_attn.v_proj.bias');
      await expectThrows(() => ctx.engine.loadModel({ config: { ...t.config, num_mel_bins: 128 }, weights: file }), 'wrong shape model.encoder.conv1.weight');
      await expectThrows(() => ctx.engine.loadModel({ config: { ...t.config, d_model: 60 }, weights: file }), 'config.encoder_attention_heads');
      const { model, g } = await tinyModel(ctx);
      try {
        const feats = flat(g.input_features[0]);
        await expectThrows(() => model.logits([380], { encoderInput: feats.subarray(1) }), 'o.encoderInput', '16000 values');
        await expectThrows(() => model.logits([380, 384], { encoderInput: feats }), 'tokens[1]', '[0, 384)');
        await expectThrows(() => model.logits(new Array(33).fill(380), { encoderInput: feats }), 'max_target_positions=32');
        await expectThrows(() => model.generate([[380]], {}), 'o.encoderInputs');
        await expectThrows(() => model.generate([[380]], { encoderInputs: [feats], temperature: -1 }), 'o.temperature');
        await expectThrows(() => model.transcribe(new Float32Array(100), { language: 'en' }), 'o.language');
        await expectThrows(() => model.transcribe(new Float32Array(100), { task: 'summarize' as 'transcribe' }), 'o.task');
      } finally {
        model.destroy();
      }
      await expectThrows(() => model.logits([380], { encoderInput: flat(g.input_features[0]) }), 'destroyed');
    },
  },
  {
    name: 'cross-attention over per-request encoder caches (own blocks, scattered) in a mixed batch (one prefilling, one decoding) against float64',
    async run(ctx) {
      const e = ctx.engine;
      const H = 4, D = 16, bs = 16, Te = 37, numBlocks = 8;
      const cache = e.createPagedKVCache({ numBlocks, blockSize: bs, numKvHeads: H, headSize: D });
      // Request A's encoder keys/values in blocks 5, 1, 6; B's in 0, 7, 3 (what a request's admission takes).
      const blocks = [[5, 1, 6], [0, 7, 3]];
      const k = randn(2 * Te * H * D, 31), v = randn(2 * Te * H * D, 32);
      const slots = new Int32Array(2 * Te);
      for (let r = 0; r < 2; r++) for (let t = 0; t < Te; t++) slots[r * Te + t] = blocks[r][Math.floor(t / bs)] * bs + (t % bs);
      const kt = e.tensor(k, [2 * Te, H, D]), vt = e.tensor(v, [2 * Te, H, D]);
      e.reshapeAndCache(kt, vt, cache, slots);
      // A prefills 5 decoder tokens, B decodes its 1; both see all Te encoder frames.
      const T = 6;
      const q = randn(T * H * D, 33);
      const meta = { queryStartLoc: new Int32Array([0, 5, 6]), seqLens: new Int32Array([Te, Te]), blockTable: new Int32Array(blocks.flat()), maxBlocksPerSeq: 3 };
      const qt = e.tensor(q, [T, H, D]);
      const plan = e.planAttention(meta, { cache, numHeads: H, scale: D ** -0.5, causal: false });
      const out = plan.run(qt, cache);
      const got = await out.toFloat32();
      const kc = reference.reshapeAndCacheRef(k, v, slots, new Float64Array(numBlocks * H * bs * D), new Float64Array(numBlocks * H * bs * D),
        { T: 2 * Te, Hq: H, Hkv: H, D, Dv: D, numBlocks, blockSize: bs });
      const ref = reference.pagedAttentionRef(q, kc.keyCache, kc.valueCache, { T, Hq: H, Hkv: H, D, Dv: D, numBlocks, blockSize: bs }, meta, { causal: false, scale: D ** -0.5 });
      assertClose('cross-attention', got, ref.out, 'f32');
      plan.destroy();
      for (const t of [kt, vt, qt, out]) t.destroy();
      cache.destroy();
    },
  },
  {
    name: 'transcription from PCM: start sequence from generation_config, HF\'s greedy tokens; no GPU buffer created by a second transcription (2.5 s: two windows) or a second batched generate; suppressed tokens',
    async run(ctx) {
      if (!goldenRunsHere(ctx, 'the Whisper goldens')) return;
      const { g } = await frontGolden(ctx);
      await withTiny(ctx, async (model, mg) => {
        const e = ctx.engine;
        const pcm = new Float32Array(40000);
        pcm.set(Float32Array.from(g.waveforms[0]));
        pcm.set(Float32Array.from(g.waveforms[1]).subarray(0, 8000), 32000);
        // The golden's start sequence [380, 300, 310, 320] as <|startoftranscript|> <|en|> <|transcribe|> <|notimestamps|>
        // (this generation config's maps), so the transcription of waveform 0 begins with HF's greedy tokens.
        equalArrays('start sequence', model.startSequence({ language: 'en', task: 'transcribe' }), mg.decoder_input_ids[0]);
        const one = await model.transcribe(Float32Array.from(g.waveforms[0]), { language: 'en', task: 'transcribe' });
        equalArrays('transcription of waveform 0 (first 8 tokens)', one.tokens.slice(0, 8), mg.greedy[0]);
        // Two windows (2.5 s) with timestamps, twice: no <|notimestamps|>; ids from it + 1 on are times
        // (0.02 s a step from each window's start), pairs of them bracket segments; the repeat creates no buffer.
        const first = await model.transcribe(pcm, { timestamps: true });
        await e.sync();
        const before = e.counters.createBuffer;
        const second = await model.transcribe(pcm, { timestamps: true });
        await e.sync();
        assert(e.counters.createBuffer === before, `a second transcription created ${e.counters.createBuffer - before} GPU buffers`);
        equalArrays('tokens of the second transcription', second.tokens, first.tokens);
        assert(Array.isArray(first.segments), 'segments with timestamps: true');
        for (const sg of first.segments!) assert(sg.start <= sg.end + 1e-9 && sg.end <= 2 * 2 + 1e-9 && sg.text === '', `segment ${JSON.stringify(sg)}`);
        equalArrays('segment tokens', first.segments!.flatMap((sg) => sg.tokens), first.tokens.filter((t) => t < 321));
        const inputs = [0, 1].map((c) => flat(mg.input_features[c]));
        await model.generate(mg.decoder_input_ids, { encoderInputs: inputs, maxNewTokens: 6 });
        await e.sync();
        const mid = e.counters.createBuffer;
        await model.generate(mg.decoder_input_ids, { encoderInputs: inputs, maxNewTokens: 6 });
        await e.sync();
        assert(e.counters.createBuffer === mid, `a second generate created ${e.counters.createBuffer - mid} GPU buffers`);
        // Decode steps of one shape replay their layers' commands (step graphs), as the decoder-only models' do.
        if (e.tuning.stepGraphs) assert(model.graphStats.replayed > 0, `no decoder step replayed (${JSON.stringify(model.graphStats)})`);
        ctx.note(`transcription of 2 windows: ${first.tokens.length} tokens; ${before} buffers created in all before the second; decoder steps ${JSON.stringify(model.graphStats)}`);
      }, { generationConfig: { lang_to_id: { '<|en|>': 300 }, task_to_id: { transcribe: 310 }, no_timestamps_token_id: 320 } });
      // generation_config's suppress_tokens never come out; begin_suppress_tokens not first.
      await withTiny(ctx, async (model, mg) => {
        const [out] = await model.generate([mg.decoder_input_ids[0]], { encoderInputs: [flat(mg.input_features[0])], maxNewTokens: 8, stopTokens: [] });
        assert(!out.includes(367) && out[0] !== 257, `suppressed tokens 367 (every step) and 257 (first step) came out: ${out}`);
      }, { generationConfig: { suppress_tokens: [367], begin_suppress_tokens: [257] } });
    },
  },
  {
    // Every kind of model is the one RequestEngine's: the same fuzz (random arrivals, lengths, stop
    // tokens and cancellations) runs at once over a decoder-only model, Whisper (self- and cross-attention
    // blocks from one pool small enough to preempt: a preempted sequence is recomputed, its audio's cross
    // keys/values written again) and T5 (a cache per sequence, made again when a preempted one returns),
    // each on its own engine on one device.
    name: 'request engine fuzz over a mix of model kinds (decoder-only, Whisper, T5) at once: every request that runs to its end equals its reply alone; no block leaked; each kind preempts',
    async run(ctx) {
      if (!goldenRunsHere(ctx, 'the Whisper, T5 and llama-gqa goldens')) return;
      const subjects: FuzzSubject[] = [];
      try {
        const gl = await golden(ctx, 'llama-gqa');
        const llama = await ctx.engine.loadModel({ config: gl.config, weights: await loadSafetensors(gl.weights), kvCache: { numBlocks: 16, blockSize: 4 } });
        subjects.push({
          name: 'llama-gqa', model: llama, items: gl.golden.prompts.map((prompt) => ({ prompt })), preempts: true,
          alone: async (i, max) => (await llama.generate([gl.golden.prompts[i]], { maxNewTokens: max, stopTokens: [] }))[0],
        });
        // Cross-attention takes 25 blocks of 4 (100 encoder frames), a prompt and reply up to 4 more: two
        // sequences at once overrun the 4 + 2 × 25 blocks as they grow.
        const { model: whisper, g } = await tinyModel(ctx, { maxSeqsPerStep: 2, kvCache: { numBlocks: 4, blockSize: 4 } });
        const feats = [0, 1].map((c) => flat(g.input_features[c]));
        const wItems = [...g.decoder_input_ids, [380]].flatMap((prompt) => feats.map((f) => ({ prompt, encoderInput: f })));
        subjects.push({
          name: 'whisper', model: whisper, items: wItems, preempts: true,
          alone: async (i, max) => (await whisper.generate([wItems[i].prompt], { encoderInputs: [wItems[i].encoderInput], maxNewTokens: max, stopTokens: [] }))[0],
        });
        // T5's caches are its sequences' own; its blocks measure the tokens held at once: 6 of 4 for four
        // requests of up to 15 tokens each.
        const { golden: gt, model: t5 } = await loadT5Golden(ctx, { kvCache: { numBlocks: 6, blockSize: 4 } });
        const tItems = gt.decoder_input_ids.flatMap((prompt) => gt.encoder_input_ids.map((ids) => ({ prompt, ids })));
        subjects.push({
          name: 't5', model: t5 as T5Model, preempts: true,
          items: tItems.map(({ prompt, ids }) => ({ prompt, encoderInput: { ids: Int32Array.from(ids), capacity: prompt.length + 12 } })),
          alone: async (i, max) => (await t5.generate([tItems[i].prompt], { encoderInputs: [tItems[i].ids], maxNewTokens: max, stopTokens: [] }))[0],
        });
        const got = await Promise.all(subjects.map((s, k) => engineFuzz(s, 43 + k, 12, 12)));
        ctx.note(`engine fuzz over model kinds: ${subjects.map((s, k) => `${s.name} ${got[k].checked} requests checked, ${got[k].preemptions} preemptions`).join('; ')}`);
        // Still the goldens afterwards.
        equalArrays('whisper greedy after the fuzz', (await whisper.generate(g.decoder_input_ids, { encoderInputs: feats, maxNewTokens: 8, stopTokens: [] })).flat(), g.greedy.flat());
      } finally {
        for (const s of subjects) s.model.destroy();
      }
    },
  },
]);
