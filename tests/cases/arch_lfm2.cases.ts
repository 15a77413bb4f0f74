// LFM2 (Lfm2ForCausalLM) against HF transformers 5.17 (../shared/goldens-arch/lfm2, SPEC §7.1): short
// gated convolutions with a per-sequence conv state beside the paged cache, attention with per-head q/k
// norms, the adjusted feed-forward width, embedding_norm last. The conv kernel against the float64
// reference (prefill rows with their states, decode rows of many sequences, a fresh row whose slot holds
// garbage, a row with no slot); the golden's prefill logits at every position and greedy tokens,
// together and alone; the engine under preemption, with the prefix cache asked for (off for conv
// models: kv_manager.ts), and with n choices forked from one prompt (the state copied).
import { GREEDY } from '../../src/serve/engine';
import { loadSafetensors, ops, reference, type Model } from '../../src/index';
import { assert, assertClose, defineCases, equalArrays, expectThrows, randn, type TestCase } from './harness';
import { checkGreedy, checkLogits, golden, type GoldenModel } from './model.cases';

const SENTINEL = 777.25;

async function lfm2(ctx: Parameters<TestCase['run']>[0], kvCache?: { numBlocks: number; blockSize: number }, maxSeqsPerStep?: number): Promise<{ g: GoldenModel; model: Model }> {
  const g = await golden(ctx, 'lfm2', 'goldens-arch');
  const model = await ctx.engine.loadModel({ config: g.config, weights: await loadSafetensors(g.weights), ...(kvCache ? { kvCache } : {}), ...(maxSeqsPerStep ? { maxSeqsPerStep } : {}) });
  return { g, model };
}

export const archLfm2Cases: TestCase[] = defineCases('lfm2', [
  {
    name: 'shortConv: prefill rows with their states, decode rows of many sequences, a fresh row over a garbage slot, a row with no slot; widths 2, 3 and 4; out and states against the float64 reference, unused rows and slots untouched',
    async run(ctx) {
      const rt = ctx.engine;
      for (const L of [2, 3, 4]) {
        const H = 40, slots = 7, seed = 100 * L;
        // Rows: a prefill of 5 tokens continuing slot 2; 1-token decodes of slots 0, 4, 5; a fresh prompt
        // of 4 tokens in slot 6 (which holds garbage); a fresh row of 2 tokens with no slot; a 1-token
        // row starting its sequence in slot 3 (fresh with one token).
        const rows = [
          { start: 0, tokens: 1, slot: 0, fresh: false }, { start: 1, tokens: 1, slot: 4, fresh: false }, { start: 2, tokens: 1, slot: 5, fresh: false },
          { start: 3, tokens: 5, slot: 2, fresh: false }, { start: 8, tokens: 4, slot: 6, fresh: true }, { start: 12, tokens: 2, slot: -1, fresh: true },
          { start: 14, tokens: 1, slot: 3, fresh: true },
        ];
        const T = 15, Tpad = 17, inStride = 3 * H + 5;
        const bcx = randn(Tpad * inStride, seed);
        const w = randn(H * L, seed + 1);
        const st0 = randn(slots * (L - 1) * H, seed + 2);
        // Slot 1 is no row's: it must keep its values.
        const state = rt.tensor(st0, [slots, L - 1, H], 'f32');
        const out = rt.tensor(new Float32Array(Tpad * H).fill(SENTINEL), [Tpad, H], 'f32');
        const meta = rt.tensor(ops.shortConvMeta(rows), [4 * rows.length], 'i32');
        const x = rt.tensor(bcx, [Tpad, inStride], 'f32'), wt = rt.tensor(w, [H, L], 'f32');
        try {
          ops.shortConv(rt, x, wt, state, { H, L, rows: rows.length, meta, out, inStride });
          const refState = Float64Array.from(st0);
          const ref = reference.shortConvRef(bcx, w, refState, rows, H, L, inStride);
          const got = await out.toFloat32();
          assertClose(`shortConv L=${L} out`, got.subarray(0, T * H), ref, 'f32');
          for (let i = T * H; i < Tpad * H; i++) assert(got[i] === SENTINEL, `shortConv L=${L}: out[${i}] past the rows written (${got[i]})`);
          const gotState = await state.toFloat32();
          assertClose(`shortConv L=${L} states`, gotState, refState, 'f32');
          for (let i = 0; i < (L - 1) * H; i++) assert(gotState[(L - 1) * H + i] === st0[(L - 1) * H + i], `shortConv L=${L}: slot 1 (no row's) changed`);
          // The decode of a row continues a prefill exactly: the state of slot 2 after its 5 tokens is
          // its last L − 1 values of B·x (the reference's), checked above; a fresh row ignored slot 6's garbage.
          const fresh = reference.shortConvRef(bcx, w, new Float64Array(slots * (L - 1) * H), [{ ...rows[4], slot: -1 }], H, L, inStride);
          assertClose(`shortConv L=${L}: the fresh row equals one over zeros`, got.subarray(8 * H, 12 * H), fresh.subarray(8 * H, 12 * H), 'f32');
        } finally {
          for (const t of [state, out, meta, x, wt]) t.destroy();
        }
      }
      const t = rt.tensor(new Float32Array(12), [4, 3], 'f32'), m = rt.tensor(new Int32Array(4), [4], 'i32'), w6 = rt.tensor(new Float32Array(6), [2, 3], 'f32');
      try {
        await expectThrows(() => ops.shortConv(rt, t, t, t, { H: 1, L: 9, rows: 1, meta: m, out: t }), 'o.L', 'from 2 to 8');
        await expectThrows(() => ops.shortConv(rt, t, t, t, { H: 4, L: 2, rows: 1, meta: m, out: t }), 'weight', '[4, 2]');
        await expectThrows(() => ops.shortConv(rt, t, t, t, { H: 4, L: 3, rows: 1, meta: m, out: t }), 'state', '[slots, 2, 4]');
        await expectThrows(() => ops.shortConv(rt, t, w6, t, { H: 2, L: 3, rows: 2, meta: m, out: t }), 'o.meta', '8 values');
        await expectThrows(() => ops.shortConv(rt, t, m, t, { H: 4, L: 3, rows: 1, meta: m, out: t }), 'weight.dtype');
      } finally {
        for (const x of [t, m, w6]) x.destroy();
      }
    },
  },
  {
    name: 'lfm2 (goldens-arch): prefill logits at every position within 1e-3·max|logit| of HF; greedy tokens identical (decode steps read the conv state), together and alone; no state slot leaked',
    async run(ctx) {
      const { g, model } = await lfm2(ctx);
      try {
        assert(model.architecture === 'Lfm2ForCausalLM', `architecture ${model.architecture}`);
        assert(model.config.intermediateSize === 128, `feed-forward width ${model.config.intermediateSize}, HF's 128 (block_auto_adjust_ff_dim)`);
        const worst = await checkLogits(model, g, 'lfm2');
        await checkGreedy(model, g, 'lfm2');
        model.kv.checkInvariants();
        assert(model.kv.freeStateSlots === model.kv.stateSlots, `${model.kv.stateSlots - model.kv.freeStateSlots} conv state slots still held`);
        ctx.note(`lfm2: worst logit error ${worst.toExponential(2)} of max|logit|; greedy tokens identical together and alone`);
      } finally {
        model.destroy();
      }
    },
  },
  {
    name: 'lfm2 engine: output unchanged under preemption (a cache of 14 blocks of 4), with the prefix cache asked for (off for conv layers: no hits, repeats equal), and with n = 3 choices forked from one prompt (greedy and sampled equal to single requests); no block or state slot leaked',
    async run(ctx) {
      const { g, model } = await lfm2(ctx, { numBlocks: 14, blockSize: 4 });
      try {
        assert(!model.kv.prefixCaching && model.kv.stateSlots > 0, `prefix caching ${model.kv.prefixCaching}, state slots ${model.kv.stateSlots}`);
        // The three prompts (7, 3, 41 tokens + 8 each) need 4 + 3 + 13 blocks: some must be preempted.
        const p0 = model.engine.counters.preemptions;
        const got = await model.generate(g.golden.prompts, { maxNewTokens: 8, stopTokens: [] });
        got.forEach((t, i) => equalArrays(`lfm2 under preemption: prompt ${i}`, t, g.golden.greedy[i]));
        const preempted = model.engine.counters.preemptions - p0;
        assert(preempted > 0, 'lfm2: the three prompts together were never preempted (cache too large for the case)');
        // The same prompts again (a prefix cache would hit their blocks): still HF's tokens, and no hits.
        const again = await model.generate([g.golden.prompts[0], g.golden.prompts[0]], { maxNewTokens: 8, stopTokens: [] });
        again.forEach((t, i) => equalArrays(`lfm2 repeat ${i}`, t, g.golden.greedy[0]));
        assert(model.engine.metrics().prefixCacheHits === 0, `lfm2: ${model.engine.metrics().prefixCacheHits} prefix-cache hits (off for conv models)`);
        // n choices: the prompt computed once, each choice's conv state a copy of the prompt's.
        for (const [p, prompt] of [[0, g.golden.prompts[0]], [1, g.golden.prompts[1]]] as const) {
          const c0 = { ...model.engine.counters };
          const r = await model.engine.submit({ prompt: Int32Array.from(prompt), maxTokens: 8, n: 3, sampling: GREEDY }).result;
          for (let i = 0; i < 3; i++) equalArrays(`lfm2 n=3 greedy, prompt ${p}, choice ${i}`, r.tokens[i], g.golden.greedy[p]);
          assert(model.engine.counters.prefillTokens - c0.prefillTokens === prompt.length, `lfm2 n=3: ${model.engine.counters.prefillTokens - c0.prefillTokens} prompt tokens computed (once: ${prompt.length})`);
          const sampling = { ...GREEDY, temperature: 1, seed: 11 + p };
          const singles: number[][] = [];
          for (let i = 0; i < 3; i++) singles.push((await model.engine.submit({ prompt: Int32Array.from(prompt), maxTokens: 8, sampling, stream: i }).result).tokens[0]);
          const n = await model.engine.submit({ prompt: Int32Array.from(prompt), maxTokens: 8, n: 3, sampling }).result;
          for (let i = 0; i < 3; i++) equalArrays(`lfm2 n=3 sampled, prompt ${p}, choice ${i} against a single request of stream ${i}`, n.tokens[i], singles[i]);
        }
        model.kv.checkInvariants();
        assert(model.kv.usedBlocks === 0, `${model.kv.usedBlocks} blocks still held`);
        assert(model.kv.freeStateSlots === model.kv.stateSlots, `${model.kv.stateSlots - model.kv.freeStateSlots} conv state slots still held`);
        ctx.note(`lfm2 engine: ${preempted} preemptions, greedy unchanged; repeats equal with no prefix-cache hits; n=3 forks equal single requests`);
      } finally {
        model.destroy();
      }
    },
  },
  {
    name: 'lfm2 engine: requests beyond the free conv state slots (maxSeqsPerStep 2: 4 slots, 3 held) wait for a slot and get their tokens alone',
    async run(ctx) {
      const { g, model } = await lfm2(ctx, undefined, 2);
      try {
        assert(model.kv.stateSlots === 4, `state slots ${model.kv.stateSlots}`);
        // Three of the four slots held by sequences that never run: the three prompts, submitted at once,
        // can only run one at a time, each waiting for the slot the one before frees.
        const holds = ['hold0', 'hold1', 'hold2'];
        for (const h of holds) model.kv.addSequence(h);
        let least = model.kv.stateSlots, most = 0;
        try {
          const got = await Promise.all(g.golden.prompts.map((p) => model.engine.submit({ prompt: Int32Array.from(p), maxTokens: 8, sampling: GREEDY,
            onTokens: () => { least = Math.min(least, model.kv.freeStateSlots); most = Math.max(most, model.engine.pending); } }).result));
          got.forEach((r, i) => equalArrays(`lfm2 with one free slot: prompt ${i}`, r.tokens[0], g.golden.greedy[i]));
        } finally {
          for (const h of holds) model.kv.freeSequence(h);
        }
        assert(least === 0 && most === 3, `lfm2 with one free slot: ${least} slots free at least, ${most} requests pending at most`);
        assert(model.kv.freeStateSlots === 4, `${4 - model.kv.freeStateSlots} slots still held`);
        model.kv.checkInvariants();
      } finally {
        model.destroy();
      }
    },
  },
]);
