// The serving benchmark (issue 29), in the manner of vLLM's benchmark_serving: requests with Poisson
// arrivals at several rates, prompts of 128–2048 tokens and outputs of 64–512 (ignore_eos: a random
// model's text means nothing), through the model's request engine; throughput, time to first token
// and time per output token (p50, p99), beside the same requests served one at a time. Then a
// multi-turn chat: the first token of a follow-up over 4k cached tokens, with and without the prefix
// cache, beside a fresh 100-token prompt's. The host's share of a step. The same burst through
// `webinfer serve` with the official `openai` client (its cost per token stated).
//
//   node .cache/device/serve.mjs [--gguf=FILE[:LABEL]] [--no-bf16] [--quick] [--device=NAME] [--out=DIR] [--http=0]
//                                [--parts=rates,burst,multiturn,http] [--rates=2,8,32,inf] [--budget=auto|TOKENS] [--tuning=key=value|...]
//                                (parts also: step, the batch-32 decode step alone with its kernels)
// Models: the Llama-3.2-1B shape in bf16 (random weights made on the GPU) and each --gguf file.
//
// Issue 43's targets, printed as `target` lines: 32 requests in flight at ≥ 8× one request's tokens/s;
// TPOT p50 at Poisson 8/s within 2× the batch-32 decode step (profileDecode, timed in the same run at
// the burst's mean context); the host ≤ 10% of the wall time. Each run also prints the engine's own
// counters (model.engine.counters): per step, host ms scheduling, recording and handing tokens out,
// ms waiting for the ids, tokens, layers recorded vs replayed, and the prompt-chunk budget.
import { mkdirSync, writeFileSync } from 'node:fs';
import OpenAI from 'openai';
import { createEngine, createRandomModel, dawnNodeFlags, loadGGUF, rng, serve, type Engine, type Model } from 'webinfer';
import { LLAMA_3_2_1B, SMALL_LLAMA } from './model';

const args = new Map(process.argv.slice(2).map((a) => { const [k, ...v] = a.replace(/^--/, '').split('='); return [k, v.join('=') || '1'] as [string, string]; }));
const quick = args.has('quick');
/** Which parts run (default all): rates, burst, multiturn, http. */
const parts = new Set((args.get('parts') ?? 'rates,burst,multiturn,http').split(','));
const out = args.get('out') ?? 'bench/results';
const deviceName = args.get('device') ?? 'unknown device';


const pct = (xs: number[], p: number) => { const s = [...xs].sort((a, b) => a - b); return s.length ? s[Math.min(s.length - 1, Math.floor(p * s.length))] : NaN; };

interface Req { prompt: number[]; out: number; at: number }

function workload(n: number, rate: number, vocab: number, seed: number, o = { pMin: 128, pMax: 2048, oMin: 64, oMax: 512 }): Req[] {
  const r = rng(seed);
  let t = 0;
  return Array.from({ length: n }, () => {
    if (Number.isFinite(rate)) t += -Math.log(1 - r()) / rate * 1000;
    const pl = o.pMin + Math.floor(r() * (o.pMax - o.pMin + 1));
    return { prompt: Array.from({ length: pl }, () => 1 + Math.floor(r() * (vocab - 2))), out: o.oMin + Math.floor(r() * (o.oMax - o.oMin + 1)), at: t };
  });
}

/** The engine's counters over a run, per step (ms) or in all. */
interface EngineRun { scheduleMs: number; recordMs: number; waitMs: number; applyMs: number; tokensPerStep: number; decodeTokens: number; prefillTokens: number; mixedSteps: number; chunkBudget: number }

interface RunStats { replayed?: number; recorded?: number; requests: number; wallS: number; outTokens: number; tokPerS: number; reqPerS: number; ttftP50: number; ttftP99: number; tpotP50: number; tpotP99: number; hostPct: number; steps: number; preemptions: number; engine: EngineRun }

/**
 * Serves the requests as they arrive, or with `oneAtATime` each alone after the one before (each with
 * its own cache salt, so none reuses another's prefix): time to first token and per output token.
 */
async function run(model: Model, reqs: Req[], o: { oneAtATime?: boolean } = {}): Promise<RunStats> {
  const c0 = { ...model.engine.counters };
  const g0 = { ...model.graphStats };
  const t0 = performance.now();
  const ttft: number[] = [], tpot: number[] = [];
  let outTokens = 0;
  const one = async (q: Req) => {
    const wait = q.at - (performance.now() - t0);
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const s = performance.now();
    let first = 0, n = 0;
    await model.engine.submit({
      prompt: Int32Array.from(q.prompt), maxTokens: q.out, cacheSalt: o.oneAtATime ? `alone${s}` : undefined,
      onTokens: (_c, toks) => { if (!n) first = performance.now(); n += toks.length; },
    }).result;
    const e = performance.now();
    ttft.push(first - s);
    if (n > 1) tpot.push((e - first) / (n - 1));
    outTokens += n;
  };
  if (o.oneAtATime) for (const q of reqs) await one({ ...q, at: 0 });
  else await Promise.all(reqs.map(one));
  const wall = (performance.now() - t0) / 1000;
  const c = model.engine.counters;
  const steps = c.steps - c0.steps;
  const per = (k: 'scheduleMs' | 'recordMs' | 'waitMs' | 'applyMs') => (c[k] - c0[k]) / Math.max(1, steps);
  return {
    requests: reqs.length, wallS: wall, outTokens, tokPerS: outTokens / wall, reqPerS: reqs.length / wall,
    ttftP50: pct(ttft, 0.5), ttftP99: pct(ttft, 0.99), tpotP50: pct(tpot, 0.5), tpotP99: pct(tpot, 0.99),
    hostPct: 100 * (c.hostMs - c0.hostMs) / (wall * 1000), steps, preemptions: c.preemptions - c0.preemptions,
    replayed: model.graphStats.replayed - g0.replayed, recorded: model.graphStats.recorded - g0.recorded,
    engine: {
      scheduleMs: per('scheduleMs'), recordMs: per('recordMs'), waitMs: per('waitMs'), applyMs: per('applyMs'),
      tokensPerStep: (c.tokens - c0.tokens) / Math.max(1, steps), decodeTokens: c.decodeTokens - c0.decodeTokens,
      prefillTokens: c.prefillTokens - c0.prefillTokens, mixedSteps: c.mixedSteps - c0.mixedSteps, chunkBudget: c.chunkBudget,
    },
  };
}

/** Time to the first token of one request (prefix cache on unless salted). */
async function firstToken(model: Model, prompt: number[], salt?: string): Promise<number> {
  const s = performance.now();
  let first = 0;
  await model.engine.submit({ prompt: Int32Array.from(prompt), maxTokens: 2, cacheSalt: salt, onTokens: () => { if (!first) first = performance.now(); } }).result;
  return first - s;
}

async function multiTurn(model: Model, vocab: number, history: number): Promise<Record<string, number>> {
  const r = rng(7);
  const ids = (n: number) => Array.from({ length: n }, () => 1 + Math.floor(r() * (vocab - 2)));
  const hist = ids(history);
  await firstToken(model, hist);                       // turn N-1: its blocks are cached now
  const followUp = [...hist, ...ids(100)];
  const cached: number[] = [], uncached: number[] = [], fresh: number[] = [];
  for (let i = 0; i < 5; i++) {
    cached.push(await firstToken(model, followUp));
    uncached.push(await firstToken(model, followUp, `nocache${i}`));
    fresh.push(await firstToken(model, ids(100), `fresh${i}`));
  }
  const m = (xs: number[]) => pct(xs, 0.5);
  return { historyTokens: history, cachedMs: m(cached), uncachedMs: m(uncached), fresh100Ms: m(fresh), ratioToFresh: m(cached) / m(fresh) };
}

async function overHttp(model: Model, reqs: Req[]): Promise<{ wallS: number; outTokens: number; tokPerS: number; ttftP50: number; tpotP50: number; inProcTokPerS: number; overheadUsPerToken: number }> {
  const inProc = await run(model, reqs.map((q) => ({ ...q, at: 0 })));
  const srv = await serve(model as unknown as Parameters<typeof serve>[0], { port: 0, maxQueue: 1024 });
  try {
    const client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'none' });
    const t0 = performance.now();
    const ttft: number[] = [], tpot: number[] = [];
    let outTokens = 0;
    await Promise.all(reqs.map(async (q) => {
      const s = performance.now();
      let first = 0, n = 0;
      const stream = await client.completions.create({ model: model.id, prompt: q.prompt as unknown as string, max_tokens: q.out, temperature: 0, stream: true,
        ignore_eos: true } as unknown as OpenAI.Completions.CompletionCreateParamsStreaming);
      for await (const c of stream) { if (c.choices[0]?.text !== undefined && (c.choices[0].text.length || c.choices[0].finish_reason === null)) { if (!n) first = performance.now(); n++; } }
      ttft.push(first - s);
      tpot.push((performance.now() - first) / Math.max(1, n - 1));
      outTokens += q.out;
    }));
    const wall = (performance.now() - t0) / 1000;
    return { wallS: wall, outTokens, tokPerS: outTokens / wall, ttftP50: pct(ttft, 0.5), tpotP50: pct(tpot, 0.5), inProcTokPerS: inProc.tokPerS,
      overheadUsPerToken: 1e6 * (wall - inProc.wallS) / outTokens };
  } finally {
    await srv.close();
  }
}

/** One line of the engine's counters over a run. */
function engineLine(s: RunStats): string {
  const e = s.engine, f = (x: number) => x.toFixed(2);
  return `    engine: ${s.steps} steps, ${e.tokensPerStep.toFixed(1)} tokens a step (${e.decodeTokens} decode, ${e.prefillTokens} prompt; ${e.mixedSteps} steps mixed), `
    + `layers recorded ${s.recorded} / replayed ${s.replayed}; per step ms: schedule ${f(e.scheduleMs)}, record ${f(e.recordMs)}, wait ${f(e.waitMs)}, apply ${f(e.applyMs)}; `
    + `prompt-chunk budget ${e.chunkBudget || '–'}`;
}

async function main(): Promise<void> {
  // dawn.node does not always hold the event loop open while a read-back is pending: without this,
  // Node can find nothing left to run and exit in the middle of a request.
  setInterval(() => undefined, 1000);
  const webgpu = await import('webgpu');
  Object.assign(globalThis, webgpu.globals);
  // The GPU as `webinfer serve` makes it (f16 and subgroup matrices on NVIDIA), timestamps unrounded.
  const engine: Engine = await createEngine({ gpu: webgpu.create(dawnNodeFlags({ exactTimestamps: true })), powerPreference: 'high-performance' });
  // --tuning=key=value|...: engine.tuning fields the whole run takes (an A/B across calls).
  for (const kv of (args.get('tuning') ?? '').split('|').filter(Boolean)) {
    const [k, v] = kv.split('=');
    if (!(k in engine.tuning)) throw new Error(`--tuning: ${k} is no engine.tuning field`);
    (engine.tuning as Record<string, unknown>)[k] = v === 'true' ? true : v === 'false' ? false : Number.isFinite(Number(v)) && v !== '' ? Number(v) : v;
  }
  const models: { label: string; make: () => Promise<Model> }[] = [];
  const cfg = quick ? SMALL_LLAMA : LLAMA_3_2_1B;
  const cache = { numBlocks: quick ? 256 : 4096, blockSize: 16 };
  if (!args.has('no-bf16')) models.push({ label: `Llama-3.2-1B shape bf16${quick ? ' (small, --quick)' : ''}`, make: () => createRandomModel(engine, { config: cfg, dtype: quick ? 'f32' : 'bf16', kvCache: cache, maxSeqsPerStep: 64, maxTokensPerStep: 2048 }) });
  for (const spec of (args.get('gguf') ?? '').split(',').filter(Boolean)) {
    const [file, label] = spec.split(':');
    models.push({ label: label ?? file, make: async () => engine.loadModel({ weights: await loadGGUF(file), kvCache: cache, maxSeqsPerStep: 64, maxTokensPerStep: 2048 }) });
  }
  const lens = quick ? { pMin: 16, pMax: 64, oMin: 8, oMax: 32 } : { pMin: 128, pMax: 2048, oMin: 64, oMax: 512 };
  const rates = args.get('rates')?.split(',').map((x) => (/^inf/i.test(x) ? Infinity : Number(x))) ?? (quick ? [8, Infinity] : [2, 8, 32, Infinity]);
  const budget = args.get('budget') ?? 'auto';
  const N = quick ? 8 : 64;
  const results: Record<string, unknown>[] = [];
  for (const m of models) {
    console.log(`\n${m.label}: loading`);
    const model = await m.make();
    const vocab = model.config.vocabSize;
    try {
      model.engine.prefillBudget = budget === 'auto' ? 'auto' : Number(budget);
      await run(model, workload(4, Infinity, vocab, 1, { ...lens, pMax: lens.pMin, oMax: lens.oMin }));   // pipelines compile
      const seq = !parts.has('rates') && !parts.has('burst') ? null : await run(model, workload(quick ? 2 : 6, Infinity, vocab, 2, lens), { oneAtATime: true });
      if (seq) console.log(`  one at a time: ${seq.tokPerS.toFixed(1)} tok/s, TTFT p50 ${seq.ttftP50.toFixed(1)} ms, TPOT p50 ${seq.tpotP50.toFixed(2)} ms`);
      const byRate: Record<string, RunStats> = {};
      for (const rate of parts.has('rates') ? rates : []) {
        const s = await run(model, workload(N, rate, vocab, 3, lens));
        byRate[String(rate)] = s;
        console.log(`  rate ${rate} req/s: ${s.tokPerS.toFixed(1)} tok/s (${(s.tokPerS / seq!.tokPerS).toFixed(1)}× one at a time), TTFT p50/p99 ${s.ttftP50.toFixed(0)}/${s.ttftP99.toFixed(0)} ms, TPOT p50/p99 ${s.tpotP50.toFixed(2)}/${s.tpotP99.toFixed(2)} ms, host ${s.hostPct.toFixed(1)}%, ${s.preemptions} preemptions`);
        console.log(engineLine(s));
      }
      // 32 requests in flight at once, equal lengths: the throughput target's own shape.
      const burst32 = !parts.has('burst') ? null : await run(model, workload(32, Infinity, vocab, 4, { pMin: 256, pMax: 256, oMin: quick ? 32 : 256, oMax: quick ? 32 : 256 }));
      const one = !parts.has('burst') ? null : await run(model, workload(1, Infinity, vocab, 5, { pMin: 256, pMax: 256, oMin: quick ? 32 : 256, oMax: quick ? 32 : 256 }));
      if (burst32 && one) {
        console.log(`  32 in flight: ${burst32.tokPerS.toFixed(1)} tok/s vs one request ${one.tokPerS.toFixed(1)} tok/s: ${(burst32.tokPerS / one.tokPerS).toFixed(1)}× (target ≥ 8×); host ${burst32.hostPct.toFixed(1)}% of wall; ${burst32.steps} steps, layers replayed ${burst32.replayed}, recorded ${burst32.recorded}; TPOT p50 ${burst32.tpotP50.toFixed(2)} ms`);
        console.log(engineLine(burst32));
        console.log(`    one request: ${engineLine(one).trim()}`);
      }
      // The batch-32 decode step timed alone (three in flight, ids fed back on the GPU) at the burst's
      // mean context, in this run: the yardstick of the TPOT target and of the burst's own steps.
      let step32: { context: number; wallMs: number; gpuMs: number | null; hostMs: number; interleaved: { wallMs: number; gpuMs: number | null } } | null = null;
      if (parts.has('burst') || parts.has('rates') || parts.has('step')) {
        const context = quick ? 48 : 384;
        const p = await model.profileDecode({ batch: 32, context, steps: quick ? 8 : 64, warmup: quick ? 3 : 16, perKernel: true });
        // The same step over blocks laid out as the engine's requests lay theirs (a block of each in
        // turn): if this one is slower, the burst's steps are too for that reason alone.
        const q = await model.profileDecode({ batch: 32, context, steps: quick ? 8 : 64, warmup: quick ? 3 : 16, interleave: true });
        step32 = { context, wallMs: p.wallMs, gpuMs: p.gpuMs, hostMs: p.hostMs, interleaved: { wallMs: q.wallMs, gpuMs: q.gpuMs } };
        const g = (x: number | null) => (x === null ? '–' : x.toFixed(2));
        console.log(`  batch-32 decode step (profileDecode, context ${context}): ${p.wallMs.toFixed(2)} ms wall, GPU ${g(p.gpuMs)} ms, host ${p.hostMs.toFixed(2)} ms; `
          + `blocks interleaved as the engine's: ${q.wallMs.toFixed(2)} ms wall, GPU ${g(q.gpuMs)} ms`);
        // Where that step's GPU time goes (its dispatches timed one by one).
        if (p.kernels) {
          const ks = Object.entries(p.kernels).sort((a, b) => b[1] - a[1]);
          const all = ks.reduce((t, [, v]) => t + v, 0);
          console.log(`    its kernels (timed one by one, ${all.toFixed(2)} ms): ${ks.slice(0, 10).map(([k, v]) => `${k} ${v.toFixed(3)}`).join('; ')}`);
        }
      }
      const targets: string[] = [];
      if (burst32 && one) {
        const x = burst32.tokPerS / one.tokPerS;
        targets.push(`32 requests in flight: ${x.toFixed(1)}× one request's tokens/s (${burst32.tokPerS.toFixed(1)} vs ${one.tokPerS.toFixed(1)}; target ≥ 8×): ${x >= 8 ? 'met' : 'not met'}`);
        targets.push(`host: ${burst32.hostPct.toFixed(1)}% of the wall time with 32 in flight (target ≤ 10%): ${burst32.hostPct <= 10 ? 'met' : 'not met'}`);
        if (step32) targets.push(`32 in flight: TPOT p50 ${burst32.tpotP50.toFixed(2)} ms against the batch-32 decode step's ${step32.wallMs.toFixed(2)} ms (${step32.interleaved.wallMs.toFixed(2)} ms over interleaved blocks): ${(burst32.tpotP50 / step32.wallMs).toFixed(2)}× (not a target: where the engine's step stands)`);
      }
      const r8 = byRate['8'];
      if (r8 && step32) {
        const x = r8.tpotP50 / step32.wallMs;
        targets.push(`TPOT p50 at Poisson 8/s: ${r8.tpotP50.toFixed(2)} ms, ${x.toFixed(2)}× the batch-32 decode step (${step32.wallMs.toFixed(2)} ms; target ≤ 2×): ${x <= 2 ? 'met' : 'not met'}`);
        targets.push(`host at Poisson 8/s: ${r8.hostPct.toFixed(1)}% of the wall time (target ≤ 10%): ${r8.hostPct <= 10 ? 'met' : 'not met'}`);
      }
      for (const t of targets) console.log(`  target: ${t}`);
      const mt = !parts.has('multiturn') ? null : await multiTurn(model, vocab, quick ? 256 : 4096);
      if (mt) console.log(`  follow-up over ${mt.historyTokens} cached tokens: first token ${mt.cachedMs.toFixed(1)} ms (${mt.uncachedMs.toFixed(1)} ms without the prefix cache); a fresh 100-token prompt ${mt.fresh100Ms.toFixed(1)} ms: ${mt.ratioToFresh.toFixed(2)}× (target ≤ 1.2×)`);
      let http: Record<string, number> | null = null;
      if (args.get('http') !== '0' && parts.has('http')) {
        http = await overHttp(model, workload(quick ? 4 : 32, Infinity, vocab, 6, { pMin: 256, pMax: 256, oMin: quick ? 16 : 128, oMax: quick ? 16 : 128 }));
        console.log(`  over HTTP (openai client, streaming): ${http.tokPerS.toFixed(1)} tok/s vs ${http.inProcTokPerS.toFixed(1)} in process; ${http.overheadUsPerToken.toFixed(1)} µs a token more; TTFT p50 ${http.ttftP50.toFixed(1)} ms`);
      }
      results.push({ model: m.label, sequential: seq, byRate, burst32, one, ratio32: burst32 && one ? burst32.tokPerS / one.tokPerS : null, multiTurn: mt, http, weightBytes: model.weightBytes,
        step32, targets, budget });
    } finally {
      model.destroy();
    }
  }
  mkdirSync(out, { recursive: true });
  const slug = deviceName.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-|-$/g, '');
  writeFileSync(`${out}/serve-${slug}.json`, JSON.stringify({ device: deviceName, date: new Date().toISOString(), commit: process.env.WEBINFER_COMMIT ?? null, results }, null, 1));
  const f = (x: number, d = 1) => (Number.isFinite(x) ? x.toFixed(d) : '–');
  const lines = [`# Serving benchmark — ${deviceName}`, '', `Measured ${new Date().toISOString().slice(0, 10)} at commit ${process.env.WEBINFER_COMMIT ?? '(unknown)'} with \`node .cache/device/serve.mjs\` (bench/serve.ts): ${N} requests a rate, Poisson arrivals, prompts ${lens.pMin}–${lens.pMax} tokens, outputs ${lens.oMin}–${lens.oMax} (ignore_eos), KV cache ${cache.numBlocks} blocks of ${cache.blockSize}.`, ''];
  for (const r of results as { model: string; sequential: RunStats | null; byRate: Record<string, RunStats>; burst32: RunStats | null; one: RunStats | null; ratio32: number; multiTurn: Record<string, number> | null; http: Record<string, number> | null; targets: string[]; budget: string }[]) {
    lines.push(`## ${r.model}`, '');
    if (r.sequential && Object.keys(r.byRate).length) {
      lines.push('| arrivals | requests/s | output tok/s | × one at a time | TTFT p50 / p99 ms | TPOT p50 / p99 ms | host % of wall | preemptions |', '|---|---|---|---|---|---|---|---|');
      const row = (name: string, s: RunStats) => lines.push(`| ${name} | ${f(s.reqPerS, 2)} | ${f(s.tokPerS)} | ${f(s.tokPerS / r.sequential!.tokPerS, 1)} | ${f(s.ttftP50, 0)} / ${f(s.ttftP99, 0)} | ${f(s.tpotP50, 2)} / ${f(s.tpotP99, 2)} | ${f(s.hostPct)} | ${s.preemptions} |`);
      row('one at a time', r.sequential);
      for (const [rate, s] of Object.entries(r.byRate)) row(rate === 'Infinity' ? 'all at once' : `Poisson ${rate}/s`, s);
      lines.push('');
    }
    if (r.burst32 && r.one) lines.push(`- **32 requests in flight** (prompts 256, outputs ${r.burst32.outTokens / 32}): ${f(r.burst32.tokPerS)} tok/s against one request's ${f(r.one.tokPerS)}: **${f(r.ratio32)}×** (target ≥ 8×). Host: ${f(r.burst32.hostPct)}% of the wall time (target ≤ 10%). ${r.burst32.steps} steps; the layers replayed at ${r.burst32.replayed} of them, recorded at ${r.burst32.recorded}.`);
    if (Object.keys(r.byRate).length || r.burst32) {
      lines.push('', `Engine counters (model.engine.counters; prompt-chunk budget setting: ${r.budget}), per step:`, '',
        '| run | steps | tokens a step | prompt tokens | mixed steps | recorded / replayed | schedule ms | record ms | wait ms | apply ms | chunk budget |', '|---|---|---|---|---|---|---|---|---|---|---|');
      const erow = (name: string, s: RunStats) => lines.push(`| ${name} | ${s.steps} | ${f(s.engine.tokensPerStep)} | ${s.engine.prefillTokens} | ${s.engine.mixedSteps} | ${s.recorded} / ${s.replayed} | ${f(s.engine.scheduleMs, 2)} | ${f(s.engine.recordMs, 2)} | ${f(s.engine.waitMs, 2)} | ${f(s.engine.applyMs, 2)} | ${s.engine.chunkBudget || '–'} |`);
      for (const [rate, s] of Object.entries(r.byRate)) erow(rate === 'Infinity' ? 'all at once' : `Poisson ${rate}/s`, s);
      if (r.burst32) erow('32 in flight', r.burst32);
      if (r.one) erow('one request', r.one);
      lines.push('');
    }
    for (const t of r.targets) lines.push(`- target: ${t}`);
    if (r.multiTurn) lines.push(`- **Follow-up turn** over ${r.multiTurn.historyTokens} cached tokens (+100 new): first token in ${f(r.multiTurn.cachedMs)} ms; ${f(r.multiTurn.uncachedMs)} ms without the prefix cache; a fresh 100-token prompt ${f(r.multiTurn.fresh100Ms)} ms: **${f(r.multiTurn.ratioToFresh, 2)}×** (target ≤ 1.2×).`);
    if (r.http) lines.push(`- **Over HTTP** (\`webinfer serve\`'s serve(), the official \`openai\` client, 32 streaming completions): ${f(r.http.tokPerS)} tok/s against ${f(r.http.inProcTokPerS)} in process: ${f(r.http.overheadUsPerToken)} µs more per token; TTFT p50 ${f(r.http.ttftP50)} ms.`);
    lines.push('');
  }
  writeFileSync(`${out}/serve-${slug}.md`, lines.join('\n'));
  console.log(`\nwrote ${out}/serve-${slug}.md`);
  process.exit(0);
}

main().catch((e) => { console.error(e); process.exit(1); });
