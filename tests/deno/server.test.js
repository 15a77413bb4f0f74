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
