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

Deno.test({
  name: "webinfer serve (deno run dist/serve.js): the llama-gqa golden through the openai client: concurrent streamed and whole completions give HF's greedy tokens, cached prefix, cancel mid-stream, errors, SIGINT stops",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const golden = JSON.parse(await Deno.readTextFile(new URL('golden.json', GOLDEN)));
    const folder = await checkpointFolder();
    const cli = new URL('../../dist/serve.js', import.meta.url).pathname;
    const child = new Deno.Command(Deno.execPath(), {
      args: ['run', '-A', '--no-check', cli, folder.dir, '--port', '0'],
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
      // The client ends its iteration quietly once its own signal aborts.
      for await (const _ of long) if (++chunks === 2) ac.abort();
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
