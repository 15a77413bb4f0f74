// GET /metrics (serve/metrics.ts) read back through a Prometheus text-format parser (tests/server/
// prometheus.ts): vLLM's names, types, label sets and buckets, histograms whole (cumulative buckets, +Inf
// equal to _count), the route's checks (HEAD, 405, Host, the API key, CORS, a model without an engine),
// counters counted from the server's start. Then the llama-gqa golden served in process: after a known
// sequence of requests (a prefix-cache hit among them: two prompts sharing 32 tokens) every number agrees
// with the requests' own usage and with the engine's counters; gauges while a stream runs; an abort.
import { request } from 'node:http';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { create, globals } from 'webgpu';
import type { Engine, Model, Server } from '../../src/index';
import { serve as serveHttp } from '../../src/serve/http';
import type { EngineMetrics } from '../../src/serve/engine';
import { E2E_BUCKETS, Histogram, ITL_BUCKETS, TTFT_BUCKETS } from '../../src/serve/metrics';
import { llamaGqa, servedGolden, type ServedGolden } from './client';
import { family, histogram, parseExposition, sample, type Family } from './prometheus';

const BASE = ['engine', 'model_name'];
/** Every family /metrics writes: its type and label names (vLLM's). */
const FAMILIES: Record<string, { type: Family['type']; labels: string[] }> = {
  'vllm:num_requests_running': { type: 'GAUGE', labels: BASE },
  'vllm:num_requests_waiting': { type: 'GAUGE', labels: BASE },
  'vllm:kv_cache_usage_perc': { type: 'GAUGE', labels: BASE },
  'vllm:gpu_cache_usage_perc': { type: 'GAUGE', labels: BASE },
  'vllm:cache_config_info': { type: 'GAUGE', labels: ['block_size', 'cache_dtype', 'enable_prefix_caching', 'engine', 'num_gpu_blocks'] },
  'vllm:prefix_cache_queries_total': { type: 'COUNTER', labels: BASE },
  'vllm:prefix_cache_hits_total': { type: 'COUNTER', labels: BASE },
  'vllm:gpu_prefix_cache_queries_total': { type: 'COUNTER', labels: BASE },
  'vllm:gpu_prefix_cache_hits_total': { type: 'COUNTER', labels: BASE },
  'vllm:num_preemptions_total': { type: 'COUNTER', labels: BASE },
  'vllm:prompt_tokens_total': { type: 'COUNTER', labels: BASE },
  'vllm:generation_tokens_total': { type: 'COUNTER', labels: BASE },
  'vllm:spec_decode_num_drafts_total': { type: 'COUNTER', labels: BASE },
  'vllm:spec_decode_num_draft_tokens_total': { type: 'COUNTER', labels: BASE },
  'vllm:spec_decode_num_accepted_tokens_total': { type: 'COUNTER', labels: BASE },
  'vllm:request_success_total': { type: 'COUNTER', labels: ['engine', 'finished_reason', 'model_name'] },
  'vllm:time_to_first_token_seconds': { type: 'HISTOGRAM', labels: BASE },
  'vllm:inter_token_latency_seconds': { type: 'HISTOGRAM', labels: BASE },
  'vllm:time_per_output_token_seconds': { type: 'HISTOGRAM', labels: BASE },
  'vllm:e2e_request_latency_seconds': { type: 'HISTOGRAM', labels: BASE },
};
const BUCKETS: Record<string, readonly number[]> = {
  'vllm:time_to_first_token_seconds': TTFT_BUCKETS, 'vllm:inter_token_latency_seconds': ITL_BUCKETS,
  'vllm:time_per_output_token_seconds': ITL_BUCKETS, 'vllm:e2e_request_latency_seconds': E2E_BUCKETS,
};

/** Checks the exposition's shape: every family once with its type and labels, histograms whole. */
function checkShape(m: Map<string, Family>, modelName: string): void {
  expect([...m.keys()].sort()).toEqual(Object.keys(FAMILIES).sort());
  for (const [name, want] of Object.entries(FAMILIES)) {
    const f = family(m, name);
    expect(f.type, `${name} type`).toBe(want.type);
    expect(f.help.length, `${name} help`).toBeGreaterThan(0);
    const series = want.type === 'HISTOGRAM' ? f.histograms : f.samples;
    expect(series.length, `${name} series`).toBeGreaterThan(0);
    for (const s of series) {
      expect(Object.keys(s.labels).sort(), `${name} labels`).toEqual(want.labels);
      if (s.labels.model_name !== undefined) expect(s.labels.model_name).toBe(modelName);
      expect(s.labels.engine, `${name} engine`).toBe('0');
    }
  }
  expect(family(m, 'vllm:request_success_total').samples.map((s) => s.labels.finished_reason).sort()).toEqual(['abort', 'error', 'length', 'stop']);
  for (const [name, bounds] of Object.entries(BUCKETS)) {
    const h = histogram(m, name);
    expect(h.buckets.map((b) => b.le), `${name} bucket bounds`).toEqual([...bounds, Infinity]);
    for (let i = 1; i < h.buckets.length; i++) expect(h.buckets[i].count, `${name} bucket ${h.buckets[i].le} ≥ the one before`).toBeGreaterThanOrEqual(h.buckets[i - 1].count);
    expect(h.buckets[h.buckets.length - 1].count, `${name} +Inf bucket = _count`).toBe(h.count);
    expect(h.sum, `${name} _sum`).toBeGreaterThanOrEqual(0);
    if (h.count === 0) expect(h.sum).toBe(0);
  }
}

async function scrape(url: string): Promise<{ status: number; type: string | null; text: string }> {
  const r = await fetch(`${url}/metrics`);
  return { status: r.status, type: r.headers.get('content-type'), text: await r.text() };
}

/** A request engine's metrics as a test double holds them: real histograms, counters set by the test. */
function fakeEngine(): { metrics(): EngineMetrics; m: EngineMetrics; ttft: Histogram; itl: Histogram; e2e: Histogram } {
  const ttft = new Histogram(TTFT_BUCKETS), itl = new Histogram(ITL_BUCKETS), e2e = new Histogram(E2E_BUCKETS);
  const m: EngineMetrics = {
    running: 0, waiting: 0, numBlocks: 64, blockSize: 16, cacheDtype: 'f16', prefixCaching: true, kvCacheUsage: 0,
    prefixCacheQueries: 100, prefixCacheHits: 48, promptTokens: 100, generationTokens: 20, preemptions: 1, specDrafts: 3, specDraftTokens: 12, specAcceptedTokens: 7,
    finished: { stop: 1, length: 2, abort: 0, error: 0 }, ttft: ttft.snapshot(), itl: itl.snapshot(), e2e: e2e.snapshot(),
  };
  return { m, ttft, itl, e2e, metrics: () => ({ ...m, finished: { ...m.finished }, ttft: ttft.snapshot(), itl: itl.snapshot(), e2e: e2e.snapshot() }) };
}

describe('GET /metrics: the exposition and the route (a test double of the engine, CPU only)', () => {
  it("vLLM's families, types, labels and buckets; counters and histograms from the server's start, gauges as they are", async () => {
    const engine = fakeEngine();
    // Before the server starts (a warm-up): not counted.
    engine.ttft.observe(0.5);
    engine.e2e.observe(1);
    const model = { id: 'tiny "model"\\x', completions: { create: () => ({}) }, engine, maxContext: 512, capacity: 1024 };
    const server = await serveHttp(model, { port: 0 });
    try {
      let r = await scrape(server.url);
      expect(r.status).toBe(200);
      expect(r.type).toBe('text/plain; version=0.0.4; charset=utf-8');
      let m = parseExposition(r.text);
      checkShape(m, model.id);
      expect(sample(m, 'vllm:prompt_tokens_total')).toBe(0);
      expect(sample(m, 'vllm:request_success_total', { finished_reason: 'length' })).toBe(0);
      expect(histogram(m, 'vllm:e2e_request_latency_seconds').count).toBe(0);
      expect(sample(m, 'vllm:cache_config_info', { block_size: '16', num_gpu_blocks: '64', cache_dtype: 'f16', enable_prefix_caching: 'True' })).toBe(1);

      engine.m.running = 3;
      engine.m.waiting = 2;
      engine.m.kvCacheUsage = 0.375;
      engine.m.prefixCacheQueries += 40;
      engine.m.prefixCacheHits += 32;
      engine.m.promptTokens += 40;
      engine.m.generationTokens += 7;
      const finished = engine.m.finished as Record<string, number>;
      finished.stop += 2;
      finished.abort += 1;
      for (const t of [0.003, 0.02, 3000]) engine.ttft.observe(t);
      for (const t of [0.01, 0.011, 0.3]) engine.itl.observe(t);
      engine.e2e.observe(0.3);
      r = await scrape(server.url);
      m = parseExposition(r.text);
      checkShape(m, model.id);
      expect(sample(m, 'vllm:num_requests_running')).toBe(3);
      expect(sample(m, 'vllm:num_requests_waiting')).toBe(2);
      expect(sample(m, 'vllm:kv_cache_usage_perc')).toBe(0.375);
      expect(sample(m, 'vllm:gpu_cache_usage_perc')).toBe(0.375);
      expect(sample(m, 'vllm:prefix_cache_queries_total')).toBe(40);
      expect(sample(m, 'vllm:prefix_cache_hits_total')).toBe(32);
      expect([sample(m, 'vllm:gpu_prefix_cache_queries_total'), sample(m, 'vllm:gpu_prefix_cache_hits_total')]).toEqual([40, 32]);
      expect(sample(m, 'vllm:prompt_tokens_total')).toBe(40);
      expect(sample(m, 'vllm:generation_tokens_total')).toBe(7);
      expect(sample(m, 'vllm:num_preemptions_total')).toBe(0);
      expect(family(m, 'vllm:request_success_total').samples.map((s) => [s.labels.finished_reason, s.value])).toEqual([['stop', 2], ['length', 0], ['abort', 1], ['error', 0]]);
      const ttft = histogram(m, 'vllm:time_to_first_token_seconds');
      expect(ttft.count).toBe(3);
      expect(ttft.sum).toBeCloseTo(3000.023, 9);
      // 0.003 in le=0.005, 0.02 in le=0.02 (a bound holds its own value), 3000 only in +Inf.
      const at = (le: number) => ttft.buckets.find((b) => b.le === le)!.count;
      expect([at(0.001), at(0.005), at(0.01), at(0.02), at(2560), at(Infinity)]).toEqual([0, 1, 1, 2, 2, 3]);
      const itl = histogram(m, 'vllm:inter_token_latency_seconds');
      expect(histogram(m, 'vllm:time_per_output_token_seconds')).toEqual(itl);
      expect([itl.buckets[0].count, itl.buckets[1].count, itl.count]).toEqual([1, 2, 3]);
      expect(histogram(m, 'vllm:e2e_request_latency_seconds').buckets[0].count).toBe(1);
    } finally {
      await server.close();
    }
  });

  it('goes through the same checks as /health: HEAD, 405 with Allow, a rebinding Host 403, open without the API key, CORS; 404 without an engine', async () => {
    const engine = fakeEngine();
    const model = { id: 'tiny', completions: { create: () => ({}) }, engine };
    const server = await serveHttp(model, { port: 0, apiKey: 'k', cors: '*' });
    const bare = await serveHttp({ id: 'enc', embeddings: { create: () => ({}) } }, { port: 0 });
    try {
      const head = await fetch(`${server.url}/metrics`, { method: 'HEAD' });
      expect([head.status, head.headers.get('content-type'), await head.text()]).toEqual([200, 'text/plain; version=0.0.4; charset=utf-8', '']);
      const post = await fetch(`${server.url}/metrics`, { method: 'POST', body: '{}' });
      expect([post.status, post.headers.get('allow'), (await post.json()).error.code]).toEqual([405, 'GET, HEAD, OPTIONS', 'method_not_allowed']);
      // fetch sets Host itself: node:http sends the one a rebinding page's browser would.
      const host = await new Promise<{ status: number; body: string }>((resolve, reject) => {
        request({ host: '127.0.0.1', port: server.port, path: '/metrics', headers: { host: 'evil.test' } }, (res) => {
          let body = '';
          res.on('data', (d) => (body += d));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        }).on('error', reject).end();
      });
      expect([host.status, JSON.parse(host.body).error.code]).toEqual([403, 'host_not_allowed']);
      // Open, as /health: routers and Prometheus scrape without the key; /v1 still asks for it.
      const open = await fetch(`${server.url}/metrics/`);
      expect([open.status, open.headers.get('access-control-allow-origin')]).toEqual([200, '*']);
      expect((await fetch(`${server.url}/v1/models`)).status).toBe(401);
      const none = await fetch(`${bare.url}/metrics`);
      const err = (await none.json()).error;
      expect([none.status, err.code]).toEqual([404, 'metrics_unavailable']);
      expect(err.message).toContain("the model 'enc' keeps no request engine's counters");
      // The model card: owned_by, and max_model_len only where the model says both of its limits.
      const card = await (await fetch(`${bare.url}/v1/models/enc`)).json();
      expect([card.owned_by, 'max_model_len' in card]).toEqual(['webinfer', false]);
    } finally {
      await server.close();
      await bare.close();
    }
  });
});

describe('GET /metrics: the llama-gqa golden served in process, numbers against the requests and the engine', () => {
  Object.assign(globalThis, globals);
  let engine: Engine;
  let model: Model;
  let server: Server;
  let client: OpenAI;
  let served: ServedGolden | undefined;
  const golden = llamaGqa();

  beforeAll(async () => {
    served = await servedGolden(create([]), 'webinfer-metrics-');
    ({ engine, model, server, client } = served);
  }, 120_000);
  afterAll(() => served?.close());

  it('after a known sequence (a prefix-cache hit, a stop, a chat) every counter and histogram count agrees with the usage and the engine', async () => {
    const e0 = model.engine.metrics();
    const card = (await client.models.list()).data[0] as unknown as Record<string, unknown>;
    expect([card.owned_by, card.max_model_len]).toEqual(['webinfer', Math.min(512, model.numBlocks * model.blockSize)]);

    // A: 40 fresh tokens; B: A's first 32 (two blocks of 16) and 8 others, after A has finished.
    const a = Array.from({ length: 40 }, (_, i) => 100 + i);
    const b = [...a.slice(0, 32), ...Array.from({ length: 8 }, (_, i) => 200 + i)];
    const usages: { prompt: number; completion: number; finish: string }[] = [];
    const ra = await client.completions.create({ model: 'llama-gqa', prompt: a, max_tokens: 5, temperature: 0 });
    usages.push({ prompt: ra.usage!.prompt_tokens, completion: ra.usage!.completion_tokens, finish: ra.choices[0]!.finish_reason });
    let cached = -1;
    let finish = '';
    for await (const c of await client.completions.create({ model: 'llama-gqa', prompt: b, max_tokens: 5, temperature: 0, stream: true, stream_options: { include_usage: true } })) {
      finish = c.choices[0]?.finish_reason ?? finish;
      if (c.usage) {
        usages.push({ prompt: c.usage.prompt_tokens, completion: c.usage.completion_tokens, finish });
        cached = c.usage.prompt_tokens_details?.cached_tokens ?? -1;
      }
    }
    expect(cached, "B's cached tokens").toBe(32);
    // The golden's prompt 1 greedily gives 14, 14, 232: stopping at 232 ends it with 'stop'.
    expect(golden.greedy[1]!.slice(0, 3)).toEqual([14, 14, 232]);
    const rd = await client.completions.create({ model: 'llama-gqa', prompt: golden.prompts[1]!, max_tokens: 8, temperature: 0, stop_token_ids: [232] } as OpenAI.CompletionCreateParamsNonStreaming);
    usages.push({ prompt: rd.usage!.prompt_tokens, completion: rd.usage!.completion_tokens, finish: rd.choices[0]!.finish_reason });
    const rc = await client.chat.completions.create({ model: 'llama-gqa', messages: [{ role: 'user', content: 'Hello there' }], max_tokens: 6, temperature: 0 });
    usages.push({ prompt: rc.usage!.prompt_tokens, completion: rc.usage!.completion_tokens, finish: rc.choices[0]!.finish_reason });
    expect(usages.map((u) => u.finish)).toEqual(['length', 'length', 'stop', 'length']);

    const r = await scrape(server.url);
    const m = parseExposition(r.text);
    checkShape(m, 'llama-gqa');
    const e1 = model.engine.metrics();
    const sum = (f: (u: (typeof usages)[number]) => number) => usages.reduce((s, u) => s + f(u), 0);
    const prompts = sum((u) => u.prompt);
    // Against the requests' own numbers.
    expect(sample(m, 'vllm:prompt_tokens_total')).toBe(prompts);
    expect(sample(m, 'vllm:generation_tokens_total')).toBe(sum((u) => u.completion));
    // vLLM counts every prompt token of each lookup as a query; the hit is B's two blocks.
    expect(sample(m, 'vllm:prefix_cache_queries_total')).toBe(prompts);
    expect(sample(m, 'vllm:prefix_cache_hits_total')).toBe(32);
    expect([sample(m, 'vllm:gpu_prefix_cache_queries_total'), sample(m, 'vllm:gpu_prefix_cache_hits_total')], 'the deprecated names, as production-stack reads them').toEqual([prompts, 32]);
    expect(family(m, 'vllm:request_success_total').samples.map((s) => [s.labels.finished_reason, s.value])).toEqual([['stop', 1], ['length', 3], ['abort', 0], ['error', 0]]);
    expect(histogram(m, 'vllm:time_to_first_token_seconds').count).toBe(4);
    expect(histogram(m, 'vllm:e2e_request_latency_seconds').count).toBe(4);
    expect(histogram(m, 'vllm:inter_token_latency_seconds').count).toBe(sum((u) => u.completion - 1));
    // Idle now: nothing running or waiting, every block back (cached blocks nobody holds are free).
    expect([sample(m, 'vllm:num_requests_running'), sample(m, 'vllm:num_requests_waiting'), sample(m, 'vllm:kv_cache_usage_perc')]).toEqual([0, 0, 0]);
    expect(sample(m, 'vllm:cache_config_info', { block_size: String(model.blockSize), num_gpu_blocks: String(model.numBlocks), enable_prefix_caching: 'True', cache_dtype: model.cacheDType })).toBe(1);
    // Against the engine's own counters (the server started with e0's values: it counts from there).
    expect(sample(m, 'vllm:prompt_tokens_total')).toBe(e1.promptTokens - e0.promptTokens);
    expect(sample(m, 'vllm:generation_tokens_total')).toBe(e1.generationTokens - e0.generationTokens);
    expect(sample(m, 'vllm:prefix_cache_queries_total')).toBe(e1.prefixCacheQueries - e0.prefixCacheQueries);
    expect(sample(m, 'vllm:prefix_cache_hits_total')).toBe(e1.prefixCacheHits - e0.prefixCacheHits);
    expect(sample(m, 'vllm:num_preemptions_total')).toBe(e1.preemptions - e0.preemptions);
    for (const [name, h] of [['vllm:time_to_first_token_seconds', e1.ttft], ['vllm:inter_token_latency_seconds', e1.itl], ['vllm:e2e_request_latency_seconds', e1.e2e]] as const) {
      const got = histogram(m, name);
      expect(got.count, `${name} _count`).toBe(h.count);
      expect(got.sum, `${name} _sum`).toBeCloseTo(h.sum, 6);
      let cum = 0;
      expect(got.buckets.map((x) => x.count), `${name} buckets`).toEqual(h.counts.map((c) => (cum += c)));
    }
    // Every request took longer from start to end than to its first token.
    expect(histogram(m, 'vllm:e2e_request_latency_seconds').sum).toBeGreaterThanOrEqual(histogram(m, 'vllm:time_to_first_token_seconds').sum);
  });

  it('while a stream runs: one request running, its blocks in use; cancelled: counted as abort, blocks back', async () => {
    const ac = new AbortController();
    const s = await client.completions.create({ model: 'llama-gqa', prompt: golden.prompts[2]!, max_tokens: 400, temperature: 0, stream: true }, { signal: ac.signal });
    const it = s[Symbol.asyncIterator]();
    await it.next();
    const busy = parseExposition((await scrape(server.url)).text);
    expect(sample(busy, 'vllm:num_requests_running')).toBe(1);
    expect(sample(busy, 'vllm:num_requests_waiting')).toBe(0);
    // 34 prompt tokens and at least one new one: three blocks of 16 or more.
    expect(sample(busy, 'vllm:kv_cache_usage_perc')).toBeGreaterThanOrEqual(3 / model.numBlocks);
    expect(sample(busy, 'vllm:kv_cache_usage_perc')).toBe(sample(busy, 'vllm:gpu_cache_usage_perc'));
    const abort0 = sample(busy, 'vllm:request_success_total', { finished_reason: 'abort' });
    ac.abort();
    await it.return?.();
    for (let t = 0; t < 300 && model.engine.pending > 0; t++) await new Promise((r) => setTimeout(r, 10));
    expect(model.engine.pending).toBe(0);
    const after = parseExposition((await scrape(server.url)).text);
    expect(sample(after, 'vllm:request_success_total', { finished_reason: 'abort' })).toBe(abort0 + 1);
    expect([sample(after, 'vllm:num_requests_running'), sample(after, 'vllm:kv_cache_usage_perc')]).toEqual([0, 0]);
    expect(histogram(after, 'vllm:e2e_request_latency_seconds').count).toBe(histogram(busy, 'vllm:e2e_request_latency_seconds').count + 1);
  });
});
