// The HTTP transport of `webinfer serve` against a test double of the in-process API: routes, OpenAI's
// error shapes, server-sent events, a client that disconnects, the queue bound, the body cap, close().
// CPU only: the model's side is the double; the golden model behind the same server is server.test.ts.
import OpenAI from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import { serve, type Server, type ServeOptions } from '../../src/serve/http';
import { OpenAIError } from '../../src/serve/errors';

/** The in-process API's contract: create(req) → a result, or with stream: true an async iterable of
 *  chunks; req.signal aborts it. The prompt (or first message) says what this request does. */
class Double {
  readonly id = 'double';
  readonly started: string[] = [];
  readonly aborted: string[] = [];
  readonly requests: Record<string, unknown>[] = [];
  readonly chat = { completions: { create: (req: Record<string, unknown>) => this.create('chat.completion', req) } };
  readonly completions = { create: (req: Record<string, unknown>) => this.create('text_completion', req) };

  private create(object: string, req: Record<string, unknown>): unknown {
    const signal = req.signal as AbortSignal;
    const what = String(req.prompt ?? (req.messages as { content: string }[] | undefined)?.[0]?.content);
    this.requests.push(req);
    this.started.push(what);
    signal.addEventListener('abort', () => this.aborted.push(what));
    const aborted = (): Promise<never> => new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason)));
    if (what === 'bad') throw new OpenAIError("create: temperature: expected a number from 0 to 2, got 9", { status: 400, param: 'temperature' });
    if (what === 'long') throw new OpenAIError('create: prompt: expected at most 512 tokens, got 900', { status: 413, param: 'prompt', code: 'context_length_exceeded' });
    if (what === 'boom') throw new Error('kaput');
    if (!req.stream) return what === 'hang' ? aborted() : Promise.resolve({ id: 'x', object, echo: what });
    return (async function* () {
      if (what === 'full') throw new OpenAIError('the queue is full', { status: 503 });
      yield { object: `${object}.chunk`, i: 0, text: 'a\nb' };
      if (what === 'hang') await aborted();
      if (what === 'fail') throw new Error('failed after the first chunk');
      yield { object: `${object}.chunk`, i: 1 };
      yield { object: `${object}.chunk`, i: 2, usage: { prompt_tokens: 1 } };
    })();
  }
}

let server: Server | null = null;
let double: Double;
afterEach(async () => {
  await server?.close();
  server = null;
});

async function start(o: ServeOptions = {}): Promise<string> {
  double = new Double();
  server = await serve(double, { port: 0, ...o });
  return server.url;
}

const post = (url: string, body: unknown, init: RequestInit = {}): Promise<Response> =>
  fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: typeof body === 'string' ? body : JSON.stringify(body), ...init });

async function until(cond: () => boolean, what: string): Promise<void> {
  for (let t = 0; t < 200 && !cond(); t++) await new Promise((r) => setTimeout(r, 10));
  if (!cond()) throw new Error(`timed out waiting for ${what}`);
}

function shape(j: { error?: unknown }): void {
  expect(Object.keys(j)).toEqual(['error']);
  expect(Object.keys(j.error as object).sort()).toEqual(['code', 'message', 'param', 'type']);
}

describe('webinfer serve: the HTTP transport (test double)', () => {
  it('routes: /health, /v1/models (OpenAI list shape), CORS preflight, 404 unknown route, 405 wrong method, options refused by name', async () => {
    const url = await start();
    expect(server!.port).toBeGreaterThan(0);
    expect(url).toBe(`http://127.0.0.1:${server!.port}`);
    expect((await fetch(`${url}/health`)).status).toBe(200);
    const models = await fetch(`${url}/v1/models`);
    // Cross-origin access is off unless asked for (a page the user visits must not reach a local model).
    expect(models.headers.get('access-control-allow-origin')).toBe(null);
    const list = await models.json() as { object: string; data: { id: string; object: string }[] };
    expect(list.object).toBe('list');
    expect(list.data.map((m) => [m.id, m.object])).toEqual([['double', 'model']]);
    expect((await (await fetch(`${url}/v1/models/double`)).json() as { id: string }).id).toBe('double');
    expect((await fetch(`${url}/v1/models/other`)).status).toBe(404);

    const preflight = (u: string) => fetch(`${u}/v1/chat/completions`, { method: 'OPTIONS', headers: { origin: 'http://page.test', 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, content-type, x-stainless-os' } });
    const off = await preflight(url);
    expect(off.status).toBe(405);
    expect((await off.json() as { error: { code: string } }).error.code).toBe('cors_disabled');
    const withCors = await serve(double, { port: 0, cors: '*' });
    const pre = await preflight(withCors.url);
    expect((await fetch(`${withCors.url}/v1/models`)).headers.get('access-control-allow-origin')).toBe('*');
    await withCors.close();
    expect(pre.status).toBe(204);
    expect(pre.headers.get('access-control-allow-origin')).toBe('*');
    expect(pre.headers.get('access-control-allow-methods')).toContain('POST');
    expect(pre.headers.get('access-control-allow-headers')).toBe('authorization, content-type, x-stainless-os');

    const unknown = await post(`${url}/v1/images/generations`, {});
    expect(unknown.status).toBe(404);
    const uj = await unknown.json() as { error: { message: string } };
    shape(uj);
    expect(uj.error.message).toContain('/v1/images/generations');
    const wrong = await fetch(`${url}/v1/completions`);
    expect(wrong.status).toBe(405);
    expect(wrong.headers.get('allow')).toContain('POST');
    shape(await wrong.json() as { error: unknown });

    await expect(serve(double, { port: 0, maxTokens: 3 } as ServeOptions)).rejects.toThrow("serve: opts.maxTokens: expected one of the options");
    await expect(serve(double, { port: 70000 })).rejects.toThrow('serve: opts.port: expected an integer from 0 to 65535 (0: any free port), got 70000');
    await expect(serve(double, { port: server!.port })).rejects.toThrow(`serve: port: expected a port free to listen on at 127.0.0.1, got ${server!.port}`);
  });

  it("requests: the body (with its own AbortSignal) reaches create; malformed JSON 400, unknown model 404, create's OpenAIError keeps its status, other errors 500 with their message", async () => {
    const url = await start();
    const ok = await post(`${url}/v1/completions`, { model: 'double', prompt: 'hi', max_tokens: 3 });
    expect(ok.status).toBe(200);
    expect(ok.headers.get('content-type')).toContain('application/json');
    expect(await ok.json()).toEqual({ id: 'x', object: 'text_completion', echo: 'hi' });
    expect(double.requests[0]).toMatchObject({ model: 'double', prompt: 'hi', max_tokens: 3 });
    expect(double.requests[0]!.signal).toBeInstanceOf(AbortSignal);
    const chat = await post(`${url}/v1/chat/completions`, { model: 'double', messages: [{ role: 'user', content: 'hey' }] });
    expect((await chat.json() as { object: string }).object).toBe('chat.completion');

    const cases: [unknown, number, string, string | null][] = [
      ['{"model": "double", "prompt": ', 400, 'body: expected JSON, got invalid JSON', 'invalid_json'],
      [[1, 2], 400, 'body: expected a JSON object, got an array', 'invalid_json'],
      [{ prompt: 'x' }, 400, "model: expected the model's id ('double'), got none", 'missing_model'],
      [{ model: 'gpt-4o', prompt: 'x' }, 404, "The model 'gpt-4o' does not exist", 'model_not_found'],
      [{ model: 'double', prompt: 'x', stream: 'yes' }, 400, "stream: expected a boolean, got 'yes'", null],
      [{ model: 'double', prompt: 'bad' }, 400, 'temperature: expected a number from 0 to 2, got 9', null],
      [{ model: 'double', prompt: 'long', stream: true }, 413, 'expected at most 512 tokens', 'context_length_exceeded'],
      [{ model: 'double', prompt: 'boom' }, 500, 'kaput', null],
      [{ model: 'double', prompt: 'full', stream: true }, 503, 'the queue is full', null],
    ];
    for (const [body, status, message, code] of cases) {
      const r = await post(`${url}/v1/completions`, body);
      const j = await r.json() as { error: { message: string; code: string | null; type: string } };
      expect([r.status, j.error.code], JSON.stringify(body)).toEqual([status, code]);
      shape(j);
      expect(j.error.message).toContain(message);
      if (status === 500) expect(j.error.type).toBe('server_error');
    }
  });

  it('streams: text/event-stream, one `data: <json>` frame per chunk, `data: [DONE]` last; an error after the start is an error event, then the end', async () => {
    const url = await start();
    const r = await post(`${url}/v1/chat/completions`, { model: 'double', messages: [{ role: 'user', content: 'ok' }], stream: true });
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    expect(await r.text()).toBe([
      'data: {"object":"chat.completion.chunk","i":0,"text":"a\\nb"}\n\n',
      'data: {"object":"chat.completion.chunk","i":1}\n\n',
      'data: {"object":"chat.completion.chunk","i":2,"usage":{"prompt_tokens":1}}\n\n',
      'data: [DONE]\n\n',
    ].join(''));
    const f = await post(`${url}/v1/completions`, { model: 'double', prompt: 'fail', stream: true });
    expect(f.status).toBe(200);
    expect(await f.text()).toBe('data: {"object":"text_completion.chunk","i":0,"text":"a\\nb"}\n\n'
      + 'data: {"error":{"message":"failed after the first chunk","type":"server_error","param":null,"code":null}}\n\n');
  });

  it('a client that disconnects cancels its request (stream or not): its signal aborts, the server keeps serving', async () => {
    const url = await start();
    const ac = new AbortController();
    const r = await post(`${url}/v1/completions`, { model: 'double', prompt: 'hang', stream: true }, { signal: ac.signal });
    const reader = r.body!.getReader();
    expect(new TextDecoder().decode((await reader.read()).value)).toContain('"i":0');
    expect(double.aborted).toEqual([]);
    ac.abort();
    await until(() => double.aborted.includes('hang'), 'the streaming request to be aborted');

    const ac2 = new AbortController();
    const pending = post(`${url}/v1/chat/completions`, { model: 'double', messages: [{ role: 'user', content: 'hang' }] }, { signal: ac2.signal }).catch((e: Error) => e.name);
    await until(() => double.started.filter((s) => s === 'hang').length === 2, 'the second request to start');
    ac2.abort();
    expect(await pending).toBe('AbortError');
    await until(() => double.aborted.filter((s) => s === 'hang').length === 2, 'the non-streaming request to be aborted');
    expect((await post(`${url}/v1/completions`, { model: 'double', prompt: 'after' })).status).toBe(200);
  });

  it('bounded queue: past maxQueue requests in flight a request gets 503; a slot frees when one ends', async () => {
    const url = await start({ maxQueue: 2 });
    const acs = [new AbortController(), new AbortController()];
    for (const ac of acs) {
      const r = await post(`${url}/v1/completions`, { model: 'double', prompt: 'hang', stream: true }, { signal: ac.signal });
      await r.body!.getReader().read();
    }
    const full = await post(`${url}/v1/completions`, { model: 'double', prompt: 'x' });
    expect(full.status).toBe(503);
    const j = await full.json() as { error: { code: string; type: string; message: string } };
    expect([j.error.code, j.error.type]).toEqual(['queue_full', 'overloaded_error']);
    expect(j.error.message).toContain('maxQueue 2');
    expect((await fetch(`${url}/health`)).status).toBe(200);
    acs[0]!.abort();
    await until(() => double.aborted.includes('hang'), 'the first request to be aborted');
    let status = 0;
    for (let t = 0; t < 100 && status !== 200; t++) {
      status = (await post(`${url}/v1/completions`, { model: 'double', prompt: 'x' })).status;
      if (status !== 200) await new Promise((r) => setTimeout(r, 10));
    }
    expect(status).toBe(200);
  });

  it('body cap: a body past maxBodyBytes gets 413; apiKey: /v1 asks for the bearer key, /health does not', async () => {
    const url = await start({ maxBodyBytes: 1000, apiKey: 'sekrit' });
    const auth = { authorization: 'Bearer sekrit', 'content-type': 'application/json' };
    const big = await fetch(`${url}/v1/completions`, { method: 'POST', headers: auth, body: JSON.stringify({ model: 'double', prompt: 'x'.repeat(2000) }) });
    expect(big.status).toBe(413);
    expect((await big.json() as { error: { code: string } }).error.code).toBe('request_too_large');
    const noKey = await post(`${url}/v1/completions`, { model: 'double', prompt: 'x' });
    expect(noKey.status).toBe(401);
    expect((await noKey.json() as { error: { code: string } }).error.code).toBe('invalid_api_key');
    expect((await fetch(`${url}/v1/models`)).status).toBe(401);
    expect((await fetch(`${url}/health`)).status).toBe(200);
    expect((await fetch(`${url}/v1/completions`, { method: 'POST', headers: auth, body: JSON.stringify({ model: 'double', prompt: 'x' }) })).status).toBe(200);
  });

  it('the official openai client: results, streams, and its APIError with the status and fields of ours', async () => {
    const url = await start();
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'unused', maxRetries: 0 });
    expect((await client.models.list()).data.map((m) => m.id)).toEqual(['double']);
    const seen: number[] = [];
    for await (const c of await client.completions.create({ model: 'double', prompt: 'ok', stream: true })) seen.push((c as unknown as { i: number }).i);
    expect(seen).toEqual([0, 1, 2]);
    const err = await client.completions.create({ model: 'double', prompt: 'bad' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect([(err as InstanceType<typeof OpenAI.APIError>).status, (err as InstanceType<typeof OpenAI.APIError>).param]).toEqual([400, 'temperature']);
    expect(await client.completions.create({ model: 'nope', prompt: 'x' }).catch((e: unknown) => e)).toBeInstanceOf(OpenAI.NotFoundError);
    const mid = await (async () => { for await (const _ of await client.completions.create({ model: 'double', prompt: 'fail', stream: true })); })().catch((e: unknown) => e);
    expect(mid).toBeInstanceOf(OpenAI.APIError);
    expect((mid as Error).message).toContain('failed after the first chunk');
  });

  it('close() ends the requests in flight (a stream gets an error event) and stops listening; so does the signal option', async () => {
    const ac = new AbortController();
    const url = await start({ signal: ac.signal });
    const r = await post(`${url}/v1/completions`, { model: 'double', prompt: 'hang', stream: true });
    const text = r.text();
    await until(() => double.started.includes('hang'), 'the request to start');
    ac.abort();
    expect(await text).toContain('"code":"server_shutting_down"');
    await server!.close();
    expect(double.aborted).toEqual(['hang']);
    await expect(fetch(`${url}/health`)).rejects.toThrow();
  });
});
