// Speculative decoding (issue 45, SPEC §9, API.md "Speculative decoding"): proposals verified in the
// request engine's step change no output. On every golden family (Llama, Qwen3, DeepSeek with MLA, a
// quantized GGUF): greedy output with proposals that are always right (an oracle hook: the plain run's
// own tokens), always wrong, right at a forced rate, and from n-gram lookup, equals plain decoding;
// seeded sampled output is identical with speculation on and off; the counters say what was proposed
// and accepted; a draft model (the same weights in another instance, and another golden of the same
// vocabulary) changes neither greedy nor seeded output. Then, on one model: batched equals alone under
// preemption and the prefix cache with rejected proposals never cached; cancelling mid-verification
// frees every block.
import { rng } from '../../src/core/random';
import { loadGGUF, loadSafetensors, type Model } from '../../src/index';
import type { SpecHooks } from '../../src/serve/engine';
import { ngramProposals, parseSpeculation } from '../../src/serve/speculative';
import { assert, defineCases, equalArrays, expectThrows, GOLDEN_RUNTIMES, spreadOverSoftware, withTuning, type CaseContext, type TestCase } from './harness';
import { golden } from './model.cases';
import { byteTokenizerConfig, byteTokenizerJson } from './text_fixture';

// The mechanism under test, not the policy: every step proposes the batch's cap whatever the steps cost
// (on a software adapter a verification never pays, and the cost-weighing policy would rightly stop
// speculating; tests/unit/speculative.test.ts checks the policy).
const MECHANISM: SpecHooks = { ignoreCosts: true };

const SUBJECTS = ['llama-gqa', 'qwen3-qknorm-tied', 'deepseek-v2-moe', 'gguf-llama-q4-k-m'] as const;
type Subject = typeof SUBJECTS[number];

async function loadSubject(ctx: CaseContext, name: Subject, o: { kvCache?: { numBlocks: number; blockSize: number } } = {}, speculates = true): Promise<Model> {
  const spec = speculates ? { speculative: { method: 'ngram' as const, k: 4 } } : {};
  let m: Model;
  if (name.startsWith('gguf-')) m = await ctx.engine.loadModel({ weights: await loadGGUF(await ctx.fixture(`goldens-quant/${name}/model.gguf`)), ...spec, ...o });
  else {
    const g = await golden(ctx, name);
    m = await ctx.engine.loadModel({ config: g.config, weights: await loadSafetensors(g.weights), ...spec, ...o });
  }
  if (speculates) m.engine.specHooks = MECHANISM;
  return m;
}

/** Prompts of the subject: its golden's, and one that repeats itself (n-gram lookup finds matches in it). */
async function promptsOf(ctx: CaseContext, name: Subject, V: number): Promise<number[][]> {
  const dir = name.startsWith('gguf-') ? `goldens-quant/${name}` : `goldens/${name}`;
  const g = JSON.parse(new TextDecoder().decode(await ctx.fixture(`${dir}/golden.json`))) as { prompts: number[][] };
  const r = rng(45);
  const motif = Array.from({ length: 5 }, () => Math.floor(r() * V));
  return [...g.prompts, [...motif, ...motif, ...motif.slice(0, 3)]];
}

/** An oracle: proposes what `want` (the plain run's outputs, by prompt) says comes next. */
function oracle(prompts: number[][], want: number[][], wrong = false, V = 0): SpecHooks['propose'] {
  const follows = (ids: readonly number[], i: number) => {
    const p = prompts[i];
    if (p.length > ids.length || ids.length > p.length + want[i].length) return false;
    for (let j = 0; j < ids.length; j++) if (ids[j] !== (j < p.length ? p[j] : want[i][j - p.length])) return false;
    return true;
  };
  return (ids, k) => {
    const i = prompts.findIndex((_, i) => follows(ids, i));
    if (i < 0) return [];
    const next = want[i].slice(ids.length - prompts[i].length, ids.length - prompts[i].length + k);
    return wrong ? next.map((t) => (t + 1) % V) : next;
  };
}

function specCase(name: Subject): TestCase {
  return {
    name: `${name}: greedy output with proposals always right (verification rows as one-token sequences and as one causal chunk), always wrong, right at a forced rate 0.6, from n-gram lookup, and from draft models (itself, another golden of its vocabulary) equals plain decoding, batched and alone; seeded sampling identical with speculation on and off; the counters say what was proposed and accepted; no block leaked`,
    async run(ctx) {
      if (!spreadOverSoftware(ctx, SUBJECTS, 'speculation subjects', String, GOLDEN_RUNTIMES).includes(name)) {
        ctx.note(`${name}: run by another software runtime and in the GPU pass, not here (compile time)`);
        return;
      }
      const model = await loadSubject(ctx, name);
      try {
        const V = model.config.vocabSize;
        const prompts = await promptsOf(ctx, name, V);
        const N = 12;
        const eng = model.engine;
        const plain = await model.generate(prompts, { maxNewTokens: N, stopTokens: [], speculative: false });
        const c0 = { ...eng.counters };
        assert(c0.specRows === 0, 'speculation ran for requests that turned it off');
        const run = async (hooks: SpecHooks | null, what: string) => {
          eng.specHooks = { ...MECHANISM, ...hooks };
          try {
            const x0 = { ...eng.counters };
            const got = await model.generate(prompts, { maxNewTokens: N, stopTokens: [] });
            for (let i = 0; i < prompts.length; i++) equalArrays(`${name}, ${what}: prompt ${i} batched`, got[i], plain[i]);
            const x = eng.counters;
            return { proposed: x.specProposed - x0.specProposed, accepted: x.specAccepted - x0.specAccepted, rows: x.specRows - x0.specRows, steps: x.steps - x0.steps };
          } finally {
            eng.specHooks = MECHANISM;
          }
        };
        const right = await run({ propose: oracle(prompts, plain) }, 'proposals always right');
        assert(right.proposed > 0 && right.accepted === right.proposed, `${name}: always-right proposals: ${right.accepted} of ${right.proposed} accepted`);
        // The same with each verification's rows attending as one causal chunk (the flash tile), not as
        // one-token sequences on the decode kernels (tuning.verifyRowsAsDecode, the default).
        const chunk = await withTuning(ctx.engine, { verifyRowsAsDecode: false }, () => run({ propose: oracle(prompts, plain) }, 'proposals always right, each verification one causal chunk'));
        assert(chunk.proposed > 0 && chunk.accepted === chunk.proposed, `${name}: always-right proposals verified as one chunk: ${chunk.accepted} of ${chunk.proposed} accepted`);
        const wrong = await run({ propose: oracle(prompts, plain, true, V) }, 'proposals always wrong');
        assert(wrong.proposed > 0 && wrong.accepted === 0, `${name}: always-wrong proposals: ${wrong.accepted} of ${wrong.proposed} accepted`);
        // (The GGUF subject skips the forced rate and the alone runs: on a software adapter each new
        // row count compiles the quantized kernels' pipelines again, minutes in all; a GPU runs them.)
        const quick = name.startsWith('gguf-') && ctx.engine.adapter.software;
        const r = rng(7);
        let rateNote = 'not run';
        if (!quick) {
          const rate = await run({ propose: oracle(prompts, plain), keep: () => r() < 0.6 }, 'proposals kept at rate 0.6');
          assert(rate.accepted > 0 && rate.accepted < rate.proposed, `${name}: forced rate 0.6: ${rate.accepted} of ${rate.proposed} accepted`);
          rateNote = `${rate.accepted}/${rate.proposed}`;
        }
        const ngram = await run(null, 'n-gram lookup');
        assert(ngram.accepted <= ngram.proposed, `${name}: n-gram: ${ngram.accepted} accepted of ${ngram.proposed}`);
        // A prompt built so that n-gram lookup is right at once: a prompt's own greedy run s (the first
        // that repeats itself), cut at the first t where the lookup over s[0..t+1] proposes s[t+1]; decoding s[0..t]
        // yields s[t] first, then looks up exactly that context.
        if (!name.startsWith('gguf-')) {
          const longs = await model.generate(prompts, { maxNewTokens: 48, stopTokens: [], speculative: false });
          let q: number[] | null = null;
          for (const [i, p] of prompts.entries()) {
            const seq = [...p, ...longs[i]];
            let t = p.length;
            while (t + 2 < seq.length && ngramProposals(seq.slice(0, t + 1), 1, 2, 4)[0] !== seq[t + 1]) t++;
            if (t + 2 < seq.length) { q = seq.slice(0, t); break; }
          }
          assert(q, `${name}: no prompt's greedy run repeats itself in 48 tokens (no n-gram prompt to build)`);
          const [want] = await model.generate([q], { maxNewTokens: 8, stopTokens: [], speculative: false });
          const x0 = { ...eng.counters };
          const [got] = await model.generate([q], { maxNewTokens: 8, stopTokens: [] });
          equalArrays(`${name}: the n-gram prompt (${q.length} tokens) with lookup`, got, want);
          const prop = eng.counters.specProposed - x0.specProposed, acc = eng.counters.specAccepted - x0.specAccepted;
          assert(acc > 0, `${name}: n-gram prompt: ${acc} of ${prop} proposals accepted`);
          ctx.note(`${name}: a prompt cut where n-gram lookup is right: ${acc} of ${prop} accepted`);
        }
        ctx.note(`${name}: ${quick ? '(forced rate and alone runs on GPUs only) ' : ''}accepted/proposed — right ${right.accepted}/${right.proposed} in ${right.steps} steps; wrong ${wrong.accepted}/${wrong.proposed} in ${wrong.steps}; rate 0.6 ${rateNote}; n-gram ${ngram.accepted}/${ngram.proposed}`);
        // Alone: one prompt at a time, proposals always right.
        eng.specHooks = { ...MECHANISM, propose: oracle(prompts, plain) };
        try {
          for (let i = 0; i < (quick ? 0 : prompts.length); i++) {
            const [alone] = await model.generate([prompts[i]], { maxNewTokens: N, stopTokens: [] });
            equalArrays(`${name}: prompt ${i} alone, proposals always right`, alone, plain[i]);
          }
        } finally {
          eng.specHooks = MECHANISM;
        }
        // Seeded sampling: the oracle proposes the sampled run's tokens, each accepted exactly when the
        // target draws it again at that position with that position's keyed draws: all of them.
        const s = { maxNewTokens: N, stopTokens: [], temperature: 0.9, seed: 1234 };
        const sampledPlain = await model.generate(prompts, { ...s, speculative: false });
        eng.specHooks = { ...MECHANISM, propose: oracle(prompts, sampledPlain) };
        try {
          const x0 = { ...eng.counters };
          const sampledSpec = await model.generate(prompts, s);
          for (let i = 0; i < prompts.length; i++) equalArrays(`${name}: seeded sampling, prompt ${i}, speculation on`, sampledSpec[i], sampledPlain[i]);
          const acc = eng.counters.specAccepted - x0.specAccepted, prop = eng.counters.specProposed - x0.specProposed;
          assert(prop > 0 && acc === prop, `${name}: seeded sampling with its own tokens proposed: ${acc} of ${prop} accepted`);
        } finally {
          eng.specHooks = MECHANISM;
        }
        // A draft model (its own engine, cache and steps on this GPU): the same weights in another
        // instance (its greedy proposals are the target's tokens), then another golden of the same
        // vocabulary (mostly wrong): greedy output plain decoding's, seeded sampling unchanged.
        const other: Subject = name === 'llama-gqa' ? 'qwen3-qknorm-tied' : 'llama-gqa';
        const notes: string[] = [];
        for (const d of [name, other]) {
          const draft = await loadSubject(ctx, d, {}, false);
          try {
            eng.speculation = parseSpeculation('t', { method: 'draft', draft, k: 4 });
            const x0 = { ...eng.counters };
            const got = await model.generate(prompts, { maxNewTokens: N, stopTokens: [] });
            for (let i = 0; i < prompts.length; i++) equalArrays(`${name} with the draft ${d}: prompt ${i} batched`, got[i], plain[i]);
            const prop = eng.counters.specProposed - x0.specProposed, acc = eng.counters.specAccepted - x0.specAccepted;
            assert(prop > 0 && acc <= prop, `${name} with the draft ${d}: ${acc} of ${prop} proposals accepted`);
            // The same weights agree except where the target's rows (verified k + 1 at a time) round
            // differently from the draft's one-token steps by more than a near-tie: nearly all accepted.
            if (d === name) assert(acc >= 0.8 * prop, `${name} with itself as the draft: only ${acc} of ${prop} proposals accepted`);
            const sampled = await model.generate(prompts, s);
            for (let i = 0; i < prompts.length; i++) equalArrays(`${name} with the draft ${d}: seeded sampling, prompt ${i}`, sampled[i], sampledPlain[i]);
            notes.push(`${d === name ? 'itself' : d} ${acc}/${prop} in ${eng.counters.steps - x0.steps} steps`);
            draft.kv.checkInvariants();
          } finally {
            eng.speculation = parseSpeculation('t', { method: 'ngram', k: 4 });
            draft.destroy();
          }
        }
        ctx.note(`${name}: draft models, accepted/proposed: ${notes.join('; ')}`);
        model.kv.checkInvariants();
        assert(model.kv.usedBlocks === 0, `${name}: ${model.kv.usedBlocks} blocks still held`);
      } finally {
        model.destroy();
      }
    },
  };
}

export const speculativeCases: TestCase[] = defineCases('speculative', [
  ...SUBJECTS.map((name) => specCase(name)),
  {
    name: 'llama-gqa: under preemption and the prefix cache, requests arriving together and apart with proposals right at a forced rate equal plain decoding alone; rejected proposals are never cached (prompts extending a run whose proposals were all rejected hit its blocks and still equal plain); cancelling mid-verification frees every block',
    async run(ctx) {
      const model = await loadSubject(ctx, 'llama-gqa', { kvCache: { numBlocks: 14, blockSize: 4 } });
      try {
        const V = model.config.vocabSize;
        const eng = model.engine;
        const base = await promptsOf(ctx, 'llama-gqa', V);
        const N = 16;
        const plain: number[][] = [];
        for (const p of base) plain.push((await model.generate([p], { maxNewTokens: N, stopTokens: [], speculative: false }))[0]);
        // Together over a cache that cannot hold them all: preemption, recompute, forced rate 0.7.
        const r = rng(3);
        eng.specHooks = { ...MECHANISM, propose: oracle(base, plain), keep: () => r() < 0.7 };
        const p0 = eng.counters.preemptions, s0 = eng.counters.specAccepted;
        const got = await Promise.all(base.map(async (p, i) => {
          await new Promise((res) => setTimeout(res, 3 * i));
          return (await model.generate([p], { maxNewTokens: N, stopTokens: [] }))[0];
        }));
        base.forEach((_, i) => equalArrays(`prompt ${i} together under preemption`, got[i], plain[i]));
        assert(eng.counters.preemptions > p0, 'nothing was preempted (cache too large for the test)');
        assert(eng.counters.specAccepted > s0, 'no proposal was accepted');
        model.kv.checkInvariants();
        // All rejected: then prompts that extend those runs by their plain tokens hit the blocks the
        // runs left in the prefix cache. A block holding a rejected proposal would change their outputs.
        for (const [i, p] of base.entries()) {
          eng.specHooks = { ...MECHANISM, propose: oracle(base, plain, true, V) };
          const w0 = eng.counters.specProposed;
          equalArrays(`prompt ${i}, proposals all rejected`, (await model.generate([p], { maxNewTokens: N, stopTokens: [] }))[0], plain[i]);
          assert(eng.counters.specProposed > w0, `prompt ${i}: nothing proposed`);
          eng.specHooks = MECHANISM;
          const h0 = model.kv.stats.hits;
          const ext = [...p, ...plain[i].slice(0, 10)];
          const [cont] = await model.generate([ext], { maxNewTokens: 4, stopTokens: [], speculative: false });
          equalArrays(`prompt ${i} extended by 10 of its tokens (cached blocks)`, cont, plain[i].slice(10, 14));
          assert(model.kv.stats.hits - h0 >= 4 * Math.floor((p.length + 8) / 4) - 4, `prompt ${i} extended: ${model.kv.stats.hits - h0} tokens from the prefix cache`);
        }
        // Cancelled while a verification is in flight.
        eng.specHooks = { ...MECHANISM, propose: oracle(base, plain) };
        const ac = new AbortController();
        // Aborted a macrotask after the first token: the engine has recorded the first verification by
        // then and waits on it.
        const v0 = eng.counters.specRows;
        const h = eng.submit({
          prompt: Int32Array.from(base[base.length - 1]), maxTokens: N, signal: ac.signal,
          onTokens: () => { setTimeout(() => ac.abort(new Error('cancelled mid-verification')), 0); },
        });
        await expectThrows(() => h.result, 'cancelled mid-verification');
        eng.specHooks = MECHANISM;
        assert(eng.counters.specRows > v0, 'no verification was recorded before the cancel');
        await new Promise((res) => setTimeout(res, 0));
        // Steps still in flight come back; then nothing is held.
        await model.generate([[1, 2, 3]], { maxNewTokens: 1, stopTokens: [] });
        model.kv.checkInvariants();
        assert(model.kv.usedBlocks === 0, `${model.kv.usedBlocks} blocks held after the cancel`);
      } finally {
        model.destroy();
      }
    },
  },
  {
    name: 'the OpenAI surface: a completion with speculation equals the same request with speculative: false, text and tokens; the counters and /metrics families move; its usage counts its accepted and rejected proposals (completion_tokens_details); a non-boolean speculative field is a named 400',
    async run(ctx) {
      const g = await golden(ctx, 'llama-gqa');
      const model = await ctx.engine.loadModel({
        config: g.config, weights: await loadSafetensors(g.weights), tokenizer: byteTokenizerJson(), tokenizerConfig: byteTokenizerConfig(),
        name: 'golden', speculative: { method: 'ngram', k: 3 },
      });
      model.engine.specHooks = MECHANISM;
      try {
        type Json = Record<string, any>;
        const req = { prompt: 'abcabcabcabcabc', max_tokens: 24, temperature: 0, return_token_ids: true };
        const off = await model.completions.create({ ...req, speculative: false }) as Json;
        const m0 = model.engine.metrics();
        const on = await model.completions.create(req) as Json;
        assert(on.choices[0].text === off.choices[0].text, `text with speculation ${JSON.stringify(on.choices[0].text)}, without ${JSON.stringify(off.choices[0].text)}`);
        equalArrays('token ids with and without speculation', on.choices[0].token_ids, off.choices[0].token_ids);
        const m1 = model.engine.metrics();
        assert(m1.specDrafts > m0.specDrafts && m1.specDraftTokens > m0.specDraftTokens && m1.specAcceptedTokens <= m1.specDraftTokens, `speculation counters: ${JSON.stringify([m0.specDrafts, m1.specDrafts, m1.specDraftTokens, m1.specAcceptedTokens])}`);
        ctx.note(`completion of 24 tokens: ${m1.specDrafts - m0.specDrafts} verifications, ${m1.specAcceptedTokens - m0.specAcceptedTokens} of ${m1.specDraftTokens - m0.specDraftTokens} proposals accepted`);
        // Its own proposals in its usage, under OpenAI's names for predicted tokens; none without speculation.
        const d = on.usage.completion_tokens_details as Json | undefined;
        assert(d && d.accepted_prediction_tokens === m1.specAcceptedTokens - m0.specAcceptedTokens
          && d.accepted_prediction_tokens + d.rejected_prediction_tokens === m1.specDraftTokens - m0.specDraftTokens,
          `usage.completion_tokens_details ${JSON.stringify(d)}, the counters ${m1.specAcceptedTokens - m0.specAcceptedTokens} of ${m1.specDraftTokens - m0.specDraftTokens}`);
        assert(off.usage.completion_tokens_details === undefined, `without speculation: usage.completion_tokens_details ${JSON.stringify(off.usage.completion_tokens_details)}`);
        await expectThrows(() => model.completions.create({ ...req, speculative: 'off' }), 'speculative', 'a boolean');
      } finally {
        model.destroy();
      }
    },
  },
  {
    name: 'refusals: loadModel speculative options checked by name before loading (a draft: a live Model of this engine); generate speculative a boolean',
    async run(ctx) {
      const g = await golden(ctx, 'llama-gqa');
      const file = await loadSafetensors(g.weights);
      await expectThrows(() => ctx.engine.loadModel({ config: g.config, weights: file, speculative: { method: 'medusa' } as never }), 'o.speculative.method', "'ngram'");
      await expectThrows(() => ctx.engine.loadModel({ config: g.config, weights: file, speculative: { method: 'ngram', k: 0 } }), 'o.speculative.k');
      await expectThrows(() => ctx.engine.loadModel({ config: g.config, weights: file, speculative: { method: 'ngram', minMatch: 5, maxMatch: 3 } }), 'o.speculative.maxMatch');
      await expectThrows(() => ctx.engine.loadModel({ config: g.config, weights: file, speculative: { method: 'ngram', depth: 2 } as never }), 'depth');
      // A draft: a Model of this engine, alive; checked before the target loads.
      await expectThrows(() => ctx.engine.loadModel({ config: g.config, weights: file, speculative: { method: 'draft' } as never }), 'o.speculative.draft', 'a decoder-only Model');
      await expectThrows(() => ctx.engine.loadModel({ config: g.config, weights: file, speculative: { method: 'draft', draft: { engine: {}, vocabSize: 256 } } as never }), 'o.speculative.draft');
      const gone = await ctx.engine.loadModel({ config: g.config, weights: file });
      gone.destroy();
      await expectThrows(() => ctx.engine.loadModel({ config: g.config, weights: file, speculative: { method: 'draft', draft: gone } }), 'o.speculative.draft', 'a destroyed Model');
      const other = await ctx.newEngine();
      try {
        const foreign = await other.loadModel({ config: g.config, weights: file });
        await expectThrows(() => ctx.engine.loadModel({ config: g.config, weights: file, speculative: { method: 'draft', draft: foreign } }), 'o.speculative.draft', 'another engine');
      } finally {
        other.destroy();
      }
      const model = await ctx.engine.loadModel({ config: g.config, weights: file, speculative: { method: 'ngram' } });
      try {
        await expectThrows(() => model.generate([[1, 2]], { speculative: 'no' as never }), 'o.speculative', 'a boolean');
      } finally {
        model.destroy();
      }
    },
  },
]);
