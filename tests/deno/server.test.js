// `webinfer serve` in Deno (Deno.serve) against the built dist/webinfer.js and dist/serve.js: the
// transport against a double of the in-process API (server-sent events, a client that disconnects,
// OpenAI-shaped errors, close()), then the llama-gqa golden served by `deno run -A dist/serve.js` and
// driven by the official openai client. Run by scripts/test-all.mjs with lavapipe as the adapter.
import OpenAI from 'openai';
import { serve } from 'webinfer';

const assert = (cond, message) => { if (!cond) throw new Error(message); };
const eq = (got, want, what) => assert(JSON.stringify(got) === JSON.stringify(want), `${what}: got ${JSON.stringify(got)}, expected ${JSON.stringify(want)}`);

/** An error as the library's OpenAIError presents itself (name, status, toJSON). */
function openAIError(message, status, param = null) {
  const e = new Error(message);
  e.name = 'OpenAIError';
  e.status = status;
  e.toJSON = () => ({ error: { message, type: 'invalid_request_error', param, code: null } });
  return e;
}

/** The in-process API's contract; the prompt says what a request does. */
function double() {
  const d = { id: 'double', started: [], aborted: [] };
  const create = (object) => (req) => {
    const what = String(req.prompt ?? req.messages?.[0]?.content);
    d.started.push(what);
    req.signal.addEventListener('abort', () => d.aborted.push(what));
    const aborted = () => new Promise((_, reject) => req.signal.addEventListener('abort', () => reject(req.signal.reason)));
    if (what === 'bad') throw openAIError('create: temperature: expected a number from 0 to 2, got 9', 400, 'temperature');
    if (!req.stream) return what === 'hang' ? aborted() : Promise.resolve({ object, echo: what });
    return (async function* () {
      yield { object: `${object}.chunk`, i: 0 };
      // 'flood': 64 KiB chunks until the request is aborted (a client that stops reading fills its buffers).
      for (let i = 1; what === 'flood' && !req.signal.aborted; i++) {
        yield { object: `${object}.chunk`, i, big: 'x'.repeat(65536) };
        await new Promise((r) => setTimeout(r, 0));
      }
      if (what === 'hang') await aborted();
      if (what === 'fail') throw new Error('failed after the first chunk');
      yield { object: `${object}.chunk`, i: 1 };
    })();
  };
  d.chat = { completions: { create: create('chat.completion') } };
  d.completions = { create: create('text_completion') };
  return d;
}

async function until(cond, what) {
  for (let t = 0; t < 300 && !cond(); t++) await new Promise((r) => setTimeout(r, 10));
  assert(cond(), `timed out waiting for ${what}`);
}

const post = (url, body, init = {}) => fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: typeof body === 'string' ? body : JSON.stringify(body), ...init });

Deno.test({
  name: 'webinfer serve (Deno.serve): SSE framing, OpenAI-shaped errors, a disconnected client aborts its request, close() ends the rest',
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const d = double();
    const server = await serve(d, { port: 0 });
    const url = server.url;
    try {
      eq((await (await fetch(`${url}/v1/models`)).json()).data.map((m) => m.id), ['double'], '/v1/models');
      const r = await post(`${url}/v1/completions`, { model: 'double', prompt: 'ok', stream: true });
      eq(r.headers.get('content-type'), 'text/event-stream; charset=utf-8', 'stream content-type');
      eq(await r.text(), 'data: {"object":"text_completion.chunk","i":0}\n\ndata: {"object":"text_completion.chunk","i":1}\n\ndata: [DONE]\n\n', 'the SSE body');
      const f = await post(`${url}/v1/completions`, { model: 'double', prompt: 'fail', stream: true });
      eq(await f.text(), 'data: {"object":"text_completion.chunk","i":0}\n\ndata: {"error":{"message":"failed after the first chunk","type":"server_error","param":null,"code":null}}\n\n', 'an error after the start');
      for (const [body, status] of [['{"model":', 400], [{ model: 'nope', prompt: 'x' }, 404], [{ model: 'double', prompt: 'bad' }, 400]]) {
        const e = await post(`${url}/v1/chat/completions`, body);
        eq(e.status, status, `status for ${JSON.stringify(body)}`);
        eq(Object.keys((await e.json()).error).sort(), ['code', 'message', 'param', 'type'], 'the error shape');
      }

      // A stream whose client goes away: its signal aborts.
      const ac = new AbortController();
      const h = await post(`${url}/v1/completions`, { model: 'double', prompt: 'hang', stream: true }, { signal: ac.signal });
      await h.body.getReader().read();
      ac.abort();
      await until(() => d.aborted.length === 1, 'the stream to be aborted');
      // A request waiting for its result whose client goes away: aborted too.
      const ac2 = new AbortController();
      const pending = post(`${url}/v1/completions`, { model: 'double', prompt: 'hang' }, { signal: ac2.signal }).catch((e) => e.name);
      await until(() => d.started.filter((s) => s === 'hang').length === 2, 'the second request to start');
      ac2.abort();
      eq(await pending, 'AbortError', 'the client side of the abort');
      await until(() => d.aborted.length === 2, 'the waiting request to be aborted');

      // The openai client over Deno's server.
      const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'unused', maxRetries: 0 });
      const bad = await client.completions.create({ model: 'double', prompt: 'bad' }).catch((e) => e);
      assert(bad instanceof OpenAI.BadRequestError && bad.param === 'temperature', `expected a BadRequestError on temperature, got ${bad}`);

      // close(): a stream in flight gets an error event; the server stops.
      const open = await post(`${url}/v1/completions`, { model: 'double', prompt: 'hang', stream: true });
      const text = open.text();
      await until(() => d.started.filter((s) => s === 'hang').length === 3, 'the third request to start');
      await server.close();
      assert((await text).includes('"code":"server_shutting_down"'), 'the stream in flight ends with a shutting-down event');
      eq(d.aborted.length, 3, 'requests aborted');
      let refused = false;
      await fetch(`${url}/health`).catch(() => (refused = true));
      assert(refused, 'the server still answers after close()');
    } finally {
      await server.close();
    }
  },
});

// ------------------------------------------------------------------------- the golden, by the command

const GOLDEN = new URL('../../../shared/goldens/llama-gqa/', import.meta.url);
const ID = 'llama-gqa';

/** The golden's files and the byte tokenizer's in a folder named after the model (its id). */
async function checkpointFolder() {
  const { byteTokenizerJson, byteTokenizerConfig } = await import('../cases/text_fixture.ts');
  const tmp = await Deno.makeTempDir({ prefix: 'webinfer-serve-' });
  const dir = `${tmp}/${ID}`;
  await Deno.mkdir(dir);
  for (const f of ['config.json', 'generation_config.json', 'model.safetensors']) await Deno.symlink(new URL(f, GOLDEN).pathname, `${dir}/${f}`);
  await Deno.writeTextFile(`${dir}/tokenizer.json`, JSON.stringify(byteTokenizerJson()));
  await Deno.writeTextFile(`${dir}/tokenizer_config.json`, JSON.stringify(byteTokenizerConfig()));
  return { dir, remove: () => Deno.remove(tmp, { recursive: true }) };
}

/** A greedy completion of 8 tokens of `prompt` (ids): the ids the server returns, and the cached count. */
async function greedyIds(client, prompt, stream) {
  const req = { model: ID, prompt, max_tokens: 8, temperature: 0, return_token_ids: true };
  if (!stream) {
    const r = await client.completions.create(req);
    return { ids: r.choices[0].token_ids ?? [], cached: r.usage?.prompt_tokens_details?.cached_tokens ?? -1 };
  }
  const ids = [];
  let cached = -1;
  for await (const chunk of await client.completions.create({ ...req, stream: true, stream_options: { include_usage: true } })) {
    for (const c of chunk.choices) ids.push(...(c.token_ids ?? []));
    if (chunk.usage) cached = chunk.usage.prompt_tokens_details?.cached_tokens ?? -1;
  }
  return { ids, cached };
}

async function statusOf(p) {
  try {
    await p;
    return 'no error';
  } catch (e) {
    return e instanceof OpenAI.APIError ? e.status : `not an APIError: ${e}`;
  }
}

/** Sends `request` on a fresh connection, optionally half-closing after it; reads until the server closes. */
async function raw(port, request, { halfClose = false, ms = 10000 } = {}) {
  const conn = await Deno.connect({ hostname: '127.0.0.1', port });
  const enc = typeof request === 'string' ? new TextEncoder().encode(request) : request;
  let error;
  const timer = setTimeout(() => { try { conn.close(); } catch { /* closed */ } }, ms);
  const chunks = [];
  try {
    for (let at = 0; at < enc.length;) at += await conn.write(enc.subarray(at));
    if (halfClose) await conn.closeWrite();
    const buf = new Uint8Array(65536);
    for (;;) {
      const n = await conn.read(buf);
      if (n === null) break;
      chunks.push(buf.slice(0, n));
    }
  } catch (e) {
    error = e.name;
  } finally {
    clearTimeout(timer);
    try { conn.close(); } catch { /* closed */ }
  }
  const text = new TextDecoder('latin1').decode(new Uint8Array(chunks.flatMap((c) => [...c])));
  const finals = text.split(/(?=HTTP\/1\.1 \d{3})/).filter((r) => !/^HTTP\/1\.1 1\d\d/.test(r));
  const last = finals[0] ?? '';
  const split = last.indexOf('\r\n\r\n');
  return { status: Number(/^HTTP\/1\.1 (\d{3})/.exec(last)?.[1] ?? 0), head: split < 0 ? last : last.slice(0, split), body: split < 0 ? '' : last.slice(split + 4), error };
}

Deno.test({
  name: 'webinfer serve (Deno.serve) against a hostile client: partial bodies outside the queue (408), unread streams ended, deep JSON 400, bounded errors, HEAD, half-close, 413 read back, Host checks, CORS off',
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const d = double();
    const server = await serve(d, { port: 0, maxQueue: 2, bodyTimeoutMs: 400, streamStallMs: 300, maxBodyBytes: 1 << 20 });
    const url = server.url;
    const port = server.port;
    const body = (prompt, extra = {}) => JSON.stringify({ model: 'double', prompt, ...extra });
    const req = (b, headers = '') => `POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${new TextEncoder().encode(b).length}\r\n${headers}\r\n${b}`;
    try {
      // Partial bodies: no queue slot while they dribble, 408 after the body timeout.
      const partial = Array.from({ length: 4 }, () => raw(port, 'POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100\r\n\r\n{"model":', { ms: 2000 }));
      await new Promise((r) => setTimeout(r, 50));
      for (let i = 0; i < 3; i++) eq((await post(`${url}/v1/completions`, body(`ok${i}`))).status, 200, `request ${i} beside stalled bodies`);
      eq((await Promise.all(partial)).map((g) => g.status), [408, 408, 408, 408], 'stalled bodies');
      // Deep JSON and big values: bounded 400s; a malformed escape: 400; CORS off by default.
      const deep = await post(`${url}/v1/completions`, `{"model":"double","prompt":"x","stop":${'['.repeat(100000)}${']'.repeat(100000)}}`);
      eq(deep.status, 400, '100k-deep array');
      eq((await deep.json()).error.code, 'too_deep', '100k-deep array code');
      const big = await post(`${url}/v1/completions`, { model: 'm'.repeat(900000), prompt: 'x' });
      eq(big.status, 404, '900 kB model id');
      assert((await big.text()).length < 2000, 'a 900 kB id is quoted, not echoed');
      eq((await fetch(`${url}/v1/models/%E0%A4%A`)).status, 400, 'malformed escape');
      const models = await fetch(`${url}/v1/models`);
      eq(models.headers.get('access-control-allow-origin'), null, 'no CORS header by default');
      await models.body?.cancel();
      // HEAD, Host.
      const head = await fetch(`${url}/health`, { method: 'HEAD' });
      eq([head.status, await head.text()], [200, ''], 'HEAD /health');
      eq((await raw(port, `GET /health HTTP/1.1\r\nHost: evil.test\r\nConnection: close\r\n\r\n`)).status, 403, 'a rebinding Host');
      // Half-close: the reply still comes.
      const half = await raw(port, req(body('half'), 'Connection: close\r\n'), { halfClose: true });
      eq([half.status, half.error], [200, undefined], 'a half-closed client');
      // A body past the cap is read back as 413.
      const over = await raw(port, req(body('x'.repeat(3 << 20)), 'Connection: close\r\n'), { ms: 3000 });
      eq([over.status, over.error], [413, undefined], 'a body past the cap');
      // A stream whose client never reads is ended after streamStallMs, its request cancelled.
      const idle = await Deno.connect({ hostname: '127.0.0.1', port });
      await idle.write(new TextEncoder().encode(req(body('flood', { stream: true }))));
      await until(() => d.aborted.includes('flood'), 'the unread stream to be ended');
      idle.close();
      // A stream whose client goes away is cancelled.
      const conn = await Deno.connect({ hostname: '127.0.0.1', port });
      const flood = new TextEncoder().encode(req(body('hang', { stream: true })));
      await conn.write(flood);
      await until(() => d.started.includes('hang'), 'the unread stream to start');
      conn.close();
      await until(() => d.aborted.includes('hang'), 'the closed stream to be cancelled');
      // Listen errors name the host.
      let msg = '';
      try { await serve(d, { port: 0, hostname: 'no-such-host.invalid' }); } catch (e) { msg = e.message; }
      assert(msg.includes("serve: hostname: expected an address of this machine or a name that resolves to one, got 'no-such-host.invalid'"), `listen error: ${msg}`);
    } finally {
      await server.close();
    }
  },
});

Deno.test({
  name: "webinfer serve (deno run dist/serve.js): the llama-gqa golden through the openai client: concurrent streamed and whole completions give HF's greedy tokens, cached prefix, cancel mid-stream, errors, SIGINT stops",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const golden = JSON.parse(await Deno.readTextFile(new URL('golden.json', GOLDEN)));
    const folder = await checkpointFolder();
    const cli = new URL('../../dist/serve.js', import.meta.url).pathname;
    const child = new Deno.Command(Deno.execPath(), {
      // No warm-up: the Node suite checks it; here the first requests compile what they need.
      args: ['run', '-A', '--no-check', cli, folder.dir, '--port', '0', '--no-warmup'],
      stdout: 'piped', stderr: 'piped', env: { DENO_NO_UPDATE_CHECK: '1' },
    }).spawn();
    let out = '';
    let err = '';
    const dec = new TextDecoder();
    const pump = async (stream, add) => { for await (const b of stream) add(dec.decode(b)); };
    const pumped = Promise.all([pump(child.stdout, (t) => (out += t)), pump(child.stderr, (t) => (err += t))]);
    let exited = false;
    const status = child.status.then((s) => { exited = true; return s; });
    try {
      let url;
      for (let t = 0; t < 1200 && !url && !exited; t++) {
        url = /serving 'llama-gqa' on (http:\/\/127\.0\.0\.1:\d+)/.exec(out)?.[1];
        if (!url) await new Promise((r) => setTimeout(r, 100));
      }
      assert(url, `the command did not print its URL (exited: ${exited}):\n${out}\n${err}`);
      const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'unused', maxRetries: 0 });

      const runs = golden.prompts.flatMap((prompt, p) => [false, true].map(async (stream) => ({ p, stream, ...(await greedyIds(client, prompt, stream)) })));
      for (const r of await Promise.all(runs)) eq(r.ids, golden.greedy[r.p], `prompt ${r.p}, ${r.stream ? 'streamed' : 'whole'}`);
      const again = await greedyIds(client, golden.prompts[2], true);
      eq(again.ids, golden.greedy[2], 'prompt 2 again');
      assert(again.cached > 0, `prompt 2 again: cached_tokens ${again.cached}, expected > 0`);

      let streamed = '';
      const chat = { model: ID, messages: [{ role: 'user', content: 'Hello there' }], max_tokens: 12, temperature: 0 };
      for await (const c of await client.chat.completions.create({ ...chat, stream: true })) streamed += c.choices[0]?.delta?.content ?? '';
      eq(streamed, (await client.chat.completions.create(chat)).choices[0].message.content, 'the chat stream against the whole reply');

      const ac = new AbortController();
      const long = await client.completions.create({ model: ID, prompt: golden.prompts[0], max_tokens: 400, temperature: 0, stream: true }, { signal: ac.signal });
      let chunks = 0;
      // The client aborts after its second chunk and stops reading.
      for await (const _ of long) if (++chunks === 2) { ac.abort(); break; }
      eq(chunks, 2, 'chunks of the cancelled stream');
      // The server's log line for it, once the model's stream has ended with the cancellation.
      const cancelled = /POST \/v1\/completions 200 \(stream\) [\d.]+ s, cancelled: the client went away/;
      for (let t = 0; t < 300 && !cancelled.test(err); t++) await new Promise((r) => setTimeout(r, 10));
      assert(cancelled.test(err), `the server logs the request cancelled:\n${err}`);
      eq((await greedyIds(client, golden.prompts[1], false)).ids, golden.greedy[1], 'prompt 1 after the cancelled stream');

      // The client sends a string body as it is: malformed JSON.
      eq(await statusOf(client.post('/completions', { body: '{"model": ' })), 400, 'malformed JSON');
      eq(await statusOf(client.completions.create({ model: 'gpt-4o', prompt: [1, 2] })), 404, 'unknown model');
      eq(await statusOf(client.completions.create({ model: ID, prompt: [1, 2], temperature: -1 })), 400, 'bad parameter');
      eq(await statusOf(client.completions.create({ model: ID, prompt: Array.from({ length: 600 }, (_, i) => i % 256) })), 413, 'over-long prompt');
      // Hostile requests (issue 40): each is its own 4xx, and requests beside them keep HF's tokens.
      const beside = golden.prompts.map((prompt) => greedyIds(client, prompt, false));
      const schema = { type: 'object', properties: { city: { enum: ['日本語🙂'] } }, required: ['city'] };
      eq(await statusOf(client.chat.completions.create({ model: ID, messages: [{ role: 'user', content: 'x' }], max_tokens: 8, response_format: { type: 'json_schema', json_schema: { name: 'c', schema } } })), 400, 'an unspellable enum');
      const t0 = performance.now();
      eq(await statusOf(client.completions.create({ model: ID, prompt: 'the quick brown fox '.repeat(786432), max_tokens: 1 })), 413, 'a 15 MiB prompt');
      assert(performance.now() - t0 < 10000, `a 15 MiB prompt took ${performance.now() - t0} ms to refuse`);
      const proto = await fetch(`${url}/v1/completions`, { method: 'POST', body: `{"model":"${ID}","prompt":[1,2],"__proto__":{"x":1}}` });
      eq([proto.status, (await proto.json()).error.code], [400, 'unknown_parameter'], '__proto__ field');
      eq(await statusOf(client.completions.create({ model: ID, prompt: [1, 2], max_tokens: 1, user: 5 })), 400, 'user: 5');
      for (const [i, r] of (await Promise.all(beside)).entries()) eq(r.ids, golden.greedy[i], `prompt ${i} beside the hostile requests`);

      // GET /metrics through Deno.serve, read by the Prometheus text-format parser the Node suite uses.
      const { parseExposition, sample, histogram } = await import('../server/prometheus.ts');
      const res = await fetch(`${url}/metrics`);
      eq([res.status, res.headers.get('content-type')], [200, 'text/plain; version=0.0.4; charset=utf-8'], 'GET /metrics');
      const m = parseExposition(await res.text());
      const head = await fetch(`${url}/metrics`, { method: 'HEAD' });
      eq([head.status, await head.text()], [200, ''], 'HEAD /metrics');
      eq([sample(m, 'vllm:num_requests_running'), sample(m, 'vllm:num_requests_waiting'), sample(m, 'vllm:kv_cache_usage_perc')], [0, 0, 0], 'idle gauges');
      assert(sample(m, 'vllm:prefix_cache_hits_total') > 0, 'prompt 2 again hit the prefix cache');
      eq(sample(m, 'vllm:request_success_total', { finished_reason: 'abort' }), 1, 'the cancelled stream, counted as abort');
      // 6 + 1 + 2 + 1 + 3 requests above ended with their tokens (the refused ones never reached the engine).
      const ended = ['stop', 'length', 'abort', 'error'].map((r) => sample(m, 'vllm:request_success_total', { finished_reason: r }));
      assert(ended[0] + ended[1] >= 13, `requests finished: ${ended}`);
      eq(histogram(m, 'vllm:e2e_request_latency_seconds').count, ended.reduce((x, y) => x + y, 0), 'e2e observations, one per ended request');
      const info = m.get('vllm:cache_config_info').samples[0].labels;
      const card = (await client.models.list()).data[0];
      eq([card.owned_by, card.max_model_len], ['webinfer', Math.min(512, Number(info.num_gpu_blocks) * Number(info.block_size))], 'the model card');

      child.kill('SIGINT');
      eq((await status).code, 0, `exit code after SIGINT (stderr:\n${err})`);
      assert(err.includes('stopped'), `stderr says it stopped:\n${err}`);
    } finally {
      if (!exited) child.kill('SIGKILL');
      await status;
      await pumped;
      await folder.remove();
    }
  },
});
