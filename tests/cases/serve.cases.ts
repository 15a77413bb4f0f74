// Serving (SPEC §9, issue 29): the request engine under random arrivals, cancellations, stop tokens and a
// cache small enough to preempt and evict (every request ends with the tokens it gets alone, no block
// leaked or shared wrongly, prefix hits counted); the OpenAI-shaped API over a golden model with a
// byte-level tokenizer (HF's greedy tokens, streaming deltas equal to the final text, stop strings,
// cached tokens, seeded sampling independent of the batch, logprobs, a JSON schema, errors); faults
// (callbacks that throw or reject, aborts, destroy) after which the model still serves the goldens.
import { rng } from '../../src/core/random';
import { OpenAIError, type Model } from '../../src/index';
import { GREEDY, type Sampling, type TokenConstraint, type TokenLogprob } from '../../src/serve/engine';
import { assert, defineCases, equalArrays, expectThrows, goldenRunsHere, type TestCase } from './harness';
import { golden, load, type GoldenModel } from './model.cases';
import { byteTokenizerConfig, byteTokenizerJson } from './text_fixture';

type Json = Record<string, any>;

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** p, or a named failure after ms (the timer cleared either way: Deno's tests check for leaked timers). */
async function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let t: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([p, new Promise<never>((_, rej) => { t = setTimeout(() => rej(new Error(`${what}: no answer in ${ms / 1000} s`)), ms); })]);
  } finally {
    clearTimeout(t);
  }
}

async function withText(ctx: Parameters<TestCase['run']>[0], g: GoldenModel, o: { numBlocks?: number; blockSize?: number } = {}): Promise<Model> {
  const { loadSafetensors } = await import('../../src/index');
  return ctx.engine.loadModel({
    config: g.config, weights: await loadSafetensors(g.weights), tokenizer: byteTokenizerJson(), tokenizerConfig: byteTokenizerConfig(), name: 'golden',
    ...(o.numBlocks ? { kvCache: { numBlocks: o.numBlocks, blockSize: o.blockSize ?? 16 } } : {}),
  });
}

/**
 * The serving cases test the request engine's and the API's JavaScript over kernels the model cases
 * check on every runtime: they run where the whole-model goldens run (goldenRunsHere: Node, Firefox
 * and Deno on lavapipe, and every GPU), not on SwiftShader, whose slow execution made them 69 s of
 * node-swiftshader and 86 s of the Chromium page.
 */
function servedElsewhere(ctx: Parameters<TestCase['run']>[0], what: string): boolean {
  return !goldenRunsHere(ctx, `serving › ${what}`);
}

export const serveCases: TestCase[] = defineCases('serving', [
  {
    name: 'request engine fuzz: random arrivals, cancellations and stop tokens over a cache that forces preemption and eviction, prompt chunks of 3 beside decodes; each request gets its tokens alone, no block leaked',
    async run(ctx) {
      if (servedElsewhere(ctx, 'request engine fuzz')) return;
      const g = await golden(ctx, 'llama-gqa');
      const model = await ctx.engine.loadModel({ config: g.config, weights: await (await import('../../src/index')).loadSafetensors(g.weights), kvCache: { numBlocks: 16, blockSize: 4 } });
      try {
        // Prompts that share prefixes: the goldens' and their greedy continuations.
        const base = g.golden.prompts.map((p, i) => [...p, ...g.golden.greedy[i].slice(0, 4)]);
        const prompts = [...g.golden.prompts, ...base, ...g.golden.prompts.map((p) => p.slice(0, Math.max(2, p.length - 3)))];
        const alone = new Map<string, number[]>();
        for (const p of prompts) alone.set(p.join(','), (await model.generate([p], { maxNewTokens: 12, stopTokens: [] }))[0]);
        const r = rng(29);
        const h0 = model.kv.stats.hits;
        const p0 = model.engine.counters.preemptions;
        // Prompt chunks of at most 3 tokens beside decodes (the chunked-prefill budget; issue 43).
        model.engine.prefillBudget = 3;
        const x0 = { ...model.engine.counters };
        const runs: Promise<void>[] = [];
        let checked = 0;
        for (let i = 0; i < 16; i++) {
          const prompt = prompts[Math.floor(r() * prompts.length)];
          const want = alone.get(prompt.join(','))!;
          const maxTokens = 4 + Math.floor(r() * 9);
          const stop = r() < 0.3 ? want[Math.floor(r() * want.length)] : -1;
          const cancelAt = r() < 0.2 ? 1 + Math.floor(r() * 3) : -1;
          const delay = Math.floor(r() * 20);
          runs.push((async () => {
            await sleep(delay);
            const ac = new AbortController();
            let seen = 0;
            const h = model.engine.submit({
              prompt: Int32Array.from(prompt), maxTokens, stopTokens: new Set(stop >= 0 ? [stop] : []), signal: ac.signal,
              onTokens: (_c, toks) => { seen += toks.length; if (cancelAt >= 0 && seen >= cancelAt) ac.abort(new Error('cancelled by the test')); },
            });
            try {
              const res = await h.result;
              assert(cancelAt < 0 || seen < cancelAt, `request ${i} finished though it was cancelled after ${cancelAt} tokens`);
              let expect = want.slice(0, maxTokens);
              const cut = stop >= 0 ? expect.indexOf(stop) : -1;
              if (cut >= 0) expect = expect.slice(0, cut + 1);
              equalArrays(`request ${i} (prompt of ${prompt.length}, max ${maxTokens}, stop ${stop}) against alone`, res.tokens[0], expect);
              assert(res.finish[0] === (cut >= 0 ? 'stop' : 'length'), `request ${i}: finish ${res.finish[0]}`);
              checked++;
            } catch (e) {
              if (!(cancelAt >= 0 && (e as Error).message === 'cancelled by the test')) throw e;
            }
          })());
        }
        await Promise.all(runs);
        assert(checked >= 8, `only ${checked} requests ran to their end`);
        await sleep(0);
        assert(model.engine.pending === 0, `${model.engine.pending} requests still pending`);
        model.kv.checkInvariants();
        assert(model.kv.freeBlocks === model.numBlocks, `blocks leaked: ${model.kv.freeBlocks} of ${model.numBlocks} free`);
        assert(model.engine.counters.preemptions > p0, 'the fuzz never preempted (cache too large for it)');
        assert(model.kv.stats.hits > h0, 'the fuzz never hit the prefix cache');
        const x = model.engine.counters;
        assert(x.mixedSteps > x0.mixedSteps, 'no step held prompt chunks beside decodes');
        assert(x.prefillTokens - x0.prefillTokens + x.decodeTokens - x0.decodeTokens === x.tokens - x0.tokens, 'prompt and decode tokens do not add up to the tokens placed');
        assert(x.chunkBudget === 3, `chunk budget ${x.chunkBudget}, set 3`);
        // Every step's layers were either replayed or recorded (step graphs on), and the host time splits.
        if (ctx.engine.tuning.stepGraphs) {
          const rr = x.recorded - x0.recorded + x.replayed - x0.replayed;
          assert(rr === x.steps - x0.steps && x.replayed > x0.replayed, `${x.steps - x0.steps} steps, ${x.recorded - x0.recorded} recorded + ${x.replayed - x0.replayed} replayed`);
        }
        assert(Math.abs(x.hostMs - x0.hostMs - (x.scheduleMs - x0.scheduleMs) - (x.recordMs - x0.recordMs)) < 1e-6 * Math.max(1, x.hostMs) && x.waitMs > x0.waitMs && x.recordMs > x0.recordMs,
          `host ${x.hostMs - x0.hostMs} ms against schedule ${x.scheduleMs - x0.scheduleMs} + record ${x.recordMs - x0.recordMs}; wait ${x.waitMs - x0.waitMs}`);
        // Requests submitted the moment the one before ends (the engine may be finishing its loop then).
        for (let i = 0; i < 8; i++) {
          const p = prompts[i % prompts.length];
          const res = await within(model.engine.submit({ prompt: Int32Array.from(p), maxTokens: 1 + (i % 3) }).result, 120000, `request ${i} submitted as the one before ended`);
          equalArrays(`back-to-back request ${i}`, res.tokens[0], alone.get(p.join(','))!.slice(0, 1 + (i % 3)));
        }
        // Still the goldens, together.
        equalArrays('greedy after the fuzz', (await model.generate(g.golden.prompts, { maxNewTokens: 8, stopTokens: [] })).flat(), g.golden.greedy.flat());
      } finally {
        model.destroy();
      }
    },
  },
  {
    name: "n choices fork from the prompt's one computation (its partial last block copied): each choice equals a single request of the same seed and stream, greedy, sampled and with logprobs; the prompt's tokens are computed once; no block leaked",
    async run(ctx) {
      if (servedElsewhere(ctx, 'n choices')) return;
      const g = await golden(ctx, 'llama-gqa');
      const { loadSafetensors } = await import('../../src/index');
      // Blocks of 4: prompts of 7 and 9 tokens end in a partial block, 8 in a whole one.
      const model = await ctx.engine.loadModel({ config: g.config, weights: await loadSafetensors(g.weights), kvCache: { numBlocks: 64, blockSize: 4 } });
      try {
        const base = g.golden.prompts.flat();
        let differ = 0;
        for (const len of [7, 8, 9]) {
          const prompt = Int32Array.from(base.slice(0, len));
          const kinds: { name: string; sampling: Sampling; logprobs: number | null }[] = [
            { name: 'greedy', sampling: GREEDY, logprobs: null },
            { name: 'sampled', sampling: { ...GREEDY, temperature: 1, seed: 100 + len }, logprobs: null },
            { name: 'sampled with logprobs', sampling: { ...GREEDY, temperature: 0.8, topK: 20, seed: 7 * len }, logprobs: 2 },
          ];
          for (const k of kinds) {
            const singles: { tokens: number[]; lps: TokenLogprob[] }[] = [];
            for (let i = 0; i < 3; i++) {
              const lps: TokenLogprob[] = [];
              const r = await model.engine.submit({ prompt, maxTokens: 6, sampling: k.sampling, stream: i, logprobs: k.logprobs, cacheSalt: `single ${len} ${k.name} ${i}`,
                onTokens: (_c, _t, l) => { if (l) lps.push(...l); } }).result;
              singles.push({ tokens: r.tokens[0], lps });
            }
            const c0 = { ...model.engine.counters };
            const lps: TokenLogprob[][] = [[], [], []];
            const r = await model.engine.submit({ prompt, maxTokens: 6, n: 3, sampling: k.sampling, logprobs: k.logprobs, cacheSalt: `n ${len} ${k.name}`,
              onTokens: (c, _t, l) => { if (l) lps[c].push(...l); } }).result;
            const what = `prompt of ${len}, ${k.name}`;
            for (let i = 0; i < 3; i++) {
              equalArrays(`${what}: choice ${i} against a single request of stream ${i}`, r.tokens[i], singles[i].tokens);
              if (k.logprobs !== null) {
                assert(lps[i].length === 6 && singles[i].lps.length === 6, `${what}: choice ${i}: ${lps[i].length} logprobs`);
                lps[i].forEach((l, t) => {
                  const s = singles[i].lps[t];
                  assert(l.token === s.token && Math.abs(l.logprob - s.logprob) <= 1e-4 && l.top.length === 2 && l.top.every((x, j) => x.token === s.top[j].token),
                    `${what}: choice ${i} token ${t}: logprob ${l.logprob} (top ${l.top.map((x) => x.token)}) against ${s.logprob} (top ${s.top.map((x) => x.token)})`);
                });
              }
            }
            if (k.name !== 'greedy' && (r.tokens[0].join() !== r.tokens[1].join() || r.tokens[1].join() !== r.tokens[2].join())) differ++;
            const prefill = model.engine.counters.prefillTokens - c0.prefillTokens;
            assert(prefill === len, `${what}: ${prefill} prompt tokens computed for 3 choices of a ${len}-token prompt (once: ${len})`);
            assert(model.engine.counters.decodeTokens - c0.decodeTokens === 3 * 5, `${what}: ${model.engine.counters.decodeTokens - c0.decodeTokens} decode tokens (3 choices × 5)`);
            model.kv.checkInvariants();
            assert(model.kv.usedBlocks === 0, `${what}: ${model.kv.usedBlocks} blocks still held`);
          }
        }
        assert(differ >= 3, `sampled choices were identical in ${6 - differ} of 6 requests: their streams are not apart`);
      } finally {
        model.destroy();
      }
    },
  },
  {
    name: 'OpenAI API: completions give HF\'s greedy tokens concurrently; streamed deltas equal the final text; prefix cache hits report cached tokens; stop strings; seeded sampling independent of the batch; logprobs; json_schema; errors',
    async run(ctx) {
      if (servedElsewhere(ctx, 'OpenAI API')) return;
      const g = await golden(ctx, 'llama-gqa');
      const model = await withText(ctx, g);
      try {
        // Token-id prompts, concurrently, streaming and not.
        const reqs = g.golden.prompts.map((p, i) => ({ prompt: p, max_tokens: 8, temperature: 0, ignore_eos: true, return_token_ids: true, stream: i === 1 }));
        const outs = await Promise.all(reqs.map(async (req) => {
          const r = model.completions.create(req);
          if (!req.stream) return ((await r) as Json).choices[0].token_ids as number[];
          // Each chunk carries the ids produced since the last one (vLLM's return_token_ids).
          const ids: number[] = [];
          for await (const c of r as AsyncIterable<Json>) if (c.choices[0]?.token_ids) ids.push(...c.choices[0].token_ids);
          return ids;
        }));
        outs.forEach((ids, i) => equalArrays(`completion ${i} token ids`, ids, g.golden.greedy[i]));
        // Chat: streaming and not, the same text; the second reports cached tokens.
        const messages = [{ role: 'user', content: 'Héllo, wörld ✓ — 你好 🙂 and a longer first turn to fill blocks' }];
        const first = await model.chat.completions.create({ messages, max_tokens: 12, temperature: 0 }) as Json;
        let streamed = '';
        let usage: Json | null = null;
        let finish: string | null = null;
        for await (const c of model.chat.completions.create({ messages, max_tokens: 12, temperature: 0, stream: true, stream_options: { include_usage: true } }) as AsyncIterable<Json>) {
          if (c.usage) usage = c.usage;
          for (const ch of c.choices) {
            if (typeof ch.delta.content === 'string') {
              assert(!ch.delta.content.includes('\uFFFD') || first.choices[0].message.content.includes('\uFFFD'), `a delta split a character: ${JSON.stringify(ch.delta.content)}`);
              streamed += ch.delta.content;
            }
            if (ch.finish_reason) finish = ch.finish_reason;
          }
        }
        assert(streamed === first.choices[0].message.content, `streamed ${JSON.stringify(streamed)} != ${JSON.stringify(first.choices[0].message.content)}`);
        assert(finish === 'length', `finish ${finish}`);
        assert(usage && usage.prompt_tokens_details.cached_tokens > 0 && usage.prompt_tokens_details.cached_tokens % 16 === 0, `cached tokens ${JSON.stringify(usage)}`);
        assert(first.usage.completion_tokens === 12, `usage ${JSON.stringify(first.usage)}`);
        // A stop string inside the greedy text: the output ends before it.
        const full = await model.completions.create({ prompt: 'The quick brown fox', max_tokens: 16, temperature: 0, ignore_eos: true }) as Json;
        const text: string = full.choices[0].text;
        const stopAt = Math.floor(text.length / 2);
        const stopStr = text.slice(stopAt, stopAt + 2);
        if (stopStr.length === 2 && !stopStr.includes('\uFFFD')) {
          const cut = await model.completions.create({ prompt: 'The quick brown fox', max_tokens: 16, temperature: 0, ignore_eos: true, stop: [stopStr] }) as Json;
          assert(cut.choices[0].text === text.slice(0, text.indexOf(stopStr)), `stop ${JSON.stringify(stopStr)}: got ${JSON.stringify(cut.choices[0].text)} of ${JSON.stringify(text)}`);
          assert(cut.choices[0].finish_reason === 'stop', `stop finish ${cut.choices[0].finish_reason}`);
        }
        // Seeded sampling: the same tokens alone and beside other requests; n choices differ.
        const seeded = { prompt: g.golden.prompts[0], max_tokens: 8, temperature: 1, seed: 1234, ignore_eos: true, return_token_ids: true, n: 2 };
        const lone = await model.completions.create(seeded) as Json;
        const crowd = await Promise.all([model.completions.create(seeded), ...g.golden.prompts.map((p) => model.completions.create({ prompt: p, max_tokens: 6, temperature: 0.7 }))]) as Json[];
        equalArrays('seeded choice 0 alone and in a batch', crowd[0].choices[0].token_ids, lone.choices[0].token_ids);
        equalArrays('seeded choice 1 alone and in a batch', crowd[0].choices[1].token_ids, lone.choices[1].token_ids);
        assert(JSON.stringify(lone.choices[0].token_ids) !== JSON.stringify(lone.choices[1].token_ids), 'two choices drew the same 8 tokens');
        const unseeded = await Promise.all([0, 1].map(() => model.completions.create({ ...seeded, seed: undefined }))) as Json[];
        assert(JSON.stringify(unseeded[0].choices[0].token_ids) !== JSON.stringify(unseeded[1].choices[0].token_ids), 'no seed repeated the same tokens');
        // Logprobs: the chosen token's, and the top ones sorted; greedy picks the top one.
        const lp = await model.chat.completions.create({ messages, max_tokens: 4, temperature: 0, logprobs: true, top_logprobs: 3 }) as Json;
        for (const e of lp.choices[0].logprobs.content) {
          assert(e.top_logprobs.length === 3 && e.top_logprobs[0].logprob >= e.top_logprobs[1].logprob && e.top_logprobs[1].logprob >= e.top_logprobs[2].logprob, 'top logprobs unsorted');
          assert(Math.abs(e.logprob - e.top_logprobs[0].logprob) < 1e-6 && e.logprob <= 0, `greedy logprob ${e.logprob} vs top ${e.top_logprobs[0].logprob}`);
        }
        // A JSON schema: the output parses and follows it.
        const schema = { type: 'object', properties: { ok: { type: 'boolean' }, kind: { enum: ['a', 'bb'] } }, required: ['ok', 'kind'] };
        // (A random model likes the whitespace JSON allows between tokens: room for 32 after each.)
        const js = await model.chat.completions.create({ messages, max_tokens: 200, temperature: 1, seed: 3, response_format: { type: 'json_schema', json_schema: { name: 't', schema } } }) as Json;
        assert(js.choices[0].finish_reason === 'stop', `schema output ended by ${js.choices[0].finish_reason}: ${JSON.stringify(js.choices[0].message.content)}`);
        const obj = JSON.parse(js.choices[0].message.content);
        assert(typeof obj.ok === 'boolean' && ['a', 'bb'].includes(obj.kind), `schema output ${js.choices[0].message.content}`);
        // Errors, OpenAI-shaped.
        const bad = async (req: Json, status: number, param: string) => {
          try {
            await model.completions.create(req);
          } catch (e) {
            assert(e instanceof OpenAIError && e.status === status && e.param === param, `expected ${status} on ${param}, got ${String(e)}`);
            return;
          }
          throw new Error(`expected ${status} on ${param}: no error`);
        };
        await bad({ prompt: 'x', max_tokenz: 3 }, 400, 'max_tokenz');
        await bad({ prompt: 'x', temperature: 9 }, 400, 'temperature');
        await bad({ prompt: [1, 2 ** 32 + 1] }, 400, 'prompt');
        await bad({ prompt: Array.from({ length: model.capacity + 5 }, () => 1) }, 413, 'prompt');
        await bad({ prompt: 'x', functions: [] }, 400, 'functions');
      } finally {
        model.destroy();
      }
    },
  },
  {
    name: 'faults: callbacks and constraints that throw or reject end only their own request, aborts free their blocks, destroy rejects saying so; the model still serves the goldens exactly',
    async run(ctx) {
      if (servedElsewhere(ctx, 'faults')) return;
      const g = await golden(ctx, 'qwen3-qknorm-tied');
      const model = await load(ctx.engine, g);
      const r = rng(7);
      try {
        // A constraint is the request's own code too (a schema the vocabulary cannot spell made its
        // mask throw inside the step loop, and every request in flight got the error): one that throws
        // in its mask, its accept or its factory ends its own request only.
        const kinds = ['throw', 'reject', 'abort', 'mask', 'accept', 'factory', 'ok', 'ok'] as const;
        const V = model.vocabSize;
        const faulty = (kind: string, i: number): TokenConstraint => {
          let masks = 0;
          return {
            fillMask(mask) {
              if (kind === 'mask' && ++masks >= 2) throw new Error(`constraint ${i}: its mask threw`);
              mask.fill(0xffffffff);
              if (V % 32) mask[mask.length - 1] = (1 << (V % 32)) - 1;
            },
            accept() {
              if (kind === 'accept' && ++masks >= 2) throw new Error(`constraint ${i}: accept threw`);
              return true;
            },
            done: false,
          };
        };
        const runs = Array.from({ length: 16 }, (_, i) => {
          const kind = i < kinds.length ? kinds[i] : kinds[Math.floor(r() * kinds.length)];
          const p = g.golden.prompts[i % 3];
          const ac = new AbortController();
          let n = 0;
          const constrained = kind === 'mask' || kind === 'accept' || kind === 'factory';
          const h = model.engine.submit({
            prompt: Int32Array.from(p), maxTokens: 8, signal: ac.signal,
            ...(constrained ? { constraint: () => { if (kind === 'factory') throw new Error(`constraint ${i}: its factory threw`); return faulty(kind, i); } } : {}),
            onTokens: (): void | Promise<void> => {
              if (++n < 2) return;
              if (kind === 'throw') throw new Error(`callback ${i} threw`);
              if (kind === 'reject') return Promise.reject(new Error(`callback ${i} rejected`));
              if (kind === 'abort') ac.abort(new Error(`request ${i} aborted`));
            },
          });
          return h.result.then((res) => {
            assert(kind === 'ok', `request ${i} (${kind}) finished`);
            equalArrays(`request ${i} beside faulty ones`, res.tokens[0], g.golden.greedy[i % 3]);
          }, (e: Error) => {
            assert(kind !== 'ok' && e.message.includes(String(i)), `request ${i} (${kind}) failed with ${e.message}`);
          });
        });
        await Promise.all(runs);
        model.kv.checkInvariants();
        assert(model.kv.freeBlocks === model.numBlocks, `blocks leaked: ${model.kv.freeBlocks} of ${model.numBlocks}`);
        equalArrays('greedy after the faults', (await model.generate(g.golden.prompts, { maxNewTokens: 8, stopTokens: [] })).flat(), g.golden.greedy.flat());
        // generate's onToken that rejects: the call rejects, nothing is left unhandled.
        await expectThrows(() => model.generate(g.golden.prompts, { maxNewTokens: 8, stopTokens: [], onToken: () => { throw new Error('onToken threw'); } }), 'onToken threw');
        const during = model.generate(g.golden.prompts, { maxNewTokens: 64, stopTokens: [] });
        await sleep(1);
        model.destroy();
        await expectThrows(() => during, 'the model was destroyed');
      } finally {
        model.destroy();
      }
    },
  },
]);
