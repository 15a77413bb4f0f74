// `webinfer serve` tried as a hostile client would (issue 40): each finding of that review is a test here,
// against loopback only. First the transport with a test double of the model (CPU only): stalled bodies
// and unread streams do not hold queue slots, deep JSON, huge paths and values, malformed escapes,
// HEAD, half-closed clients, oversize bodies read back as 413, Host checks, listen errors naming the
// host. Then the llama-gqa golden served for real, driven by the official openai client and raw
// sockets: an unspellable schema, tools a template cannot render, a 15 MiB prompt, __proto__ fields,
// deep schemas; and a bounded hostile fuzz mixing all of them with good requests, each good one
// answered with HF's greedy tokens and the server answering /health throughout.
import { connect } from 'node:net';
import OpenAI from 'openai';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { create, globals } from 'webgpu';
import { rng } from '../../src/core/random';
import { createEngine, loadCheckpoint, serve, type Engine, type Model, type Server } from '../../src/index';
import { byteTokenizerConfig } from '../cases/text_fixture';
import { checkpointFolder, llamaGqa, statusOf } from './client';

/** What a raw socket got back: the status line's code, the headers and the body, or how it failed. */
interface Raw { status: number; head: string; body: string; error?: string }

/**
 * Sends `request` (bytes or text) on a fresh connection and reads until the server closes or `ms`
 * pass. `halfClose` ends the writing side after the request (FIN), as `nc -N` does.
 */
function raw(port: number, request: string | Uint8Array, o: { halfClose?: boolean; ms?: number } = {}): Promise<Raw> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    const parts: Buffer[] = [];
    let error: string | undefined;
    const done = (): void => {
      clearTimeout(t);
      const text = Buffer.concat(parts).toString('latin1');
      // Interim 1xx responses (the half-close probe's 102) come before the final one.
      const finals = text.split(/(?=HTTP\/1\.1 \d{3})/).filter((r) => !/^HTTP\/1\.1 1\d\d/.test(r));
      const last = finals[0] ?? '';
      const split = last.indexOf('\r\n\r\n');
      const head = split < 0 ? last : last.slice(0, split);
      let body = split < 0 ? '' : last.slice(split + 4);
      if (/transfer-encoding: chunked/i.test(head)) {
        // Chunked: size line, data, CRLF, until the zero-size chunk.
        let out = '';
        for (let at = 0; at < body.length;) {
          const eol = body.indexOf('\r\n', at);
          const size = parseInt(body.slice(at, eol), 16);
          if (!(size > 0)) break;
          out += body.slice(eol + 2, eol + 2 + size);
          at = eol + 2 + size + 2;
        }
        body = out;
      }
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(last)?.[1] ?? 0), head, body, ...(error ? { error } : {}) });
    };
    const t = setTimeout(() => { s.destroy(); }, o.ms ?? 10_000);
    s.on('data', (d) => parts.push(d));
    s.on('error', (e) => { error = (e as NodeJS.ErrnoException).code ?? e.message; });
    s.on('close', done);
    s.write(request, () => { if (o.halfClose) s.end(); });
  });
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

async function until(cond: () => boolean, what: string, ms = 5000): Promise<void> {
  for (let t = 0; t < ms / 10 && !cond(); t++) await sleep(10);
  if (!cond()) throw new Error(`timed out waiting for ${what}`);
}

/** The in-process API's double: 'hang' waits for its abort, 'flood' streams 64 KiB chunks until aborted. */
class Double {
  readonly id = 'double';
  readonly aborted: string[] = [];
  readonly started: string[] = [];
  readonly chat = { completions: { create: (req: Record<string, unknown>) => this.create(req) } };
  readonly completions = { create: (req: Record<string, unknown>) => this.create(req) };
  private create(req: Record<string, unknown>): unknown {
    const signal = req.signal as AbortSignal;
    const what = String(req.prompt);
    this.started.push(what);
    signal.addEventListener('abort', () => this.aborted.push(what));
    const aborted = new Promise<never>((_, reject) => signal.addEventListener('abort', () => reject(signal.reason)));
    aborted.catch(() => undefined);
    if (!req.stream) return what === 'hang' ? aborted : Promise.resolve({ object: 'text_completion', echo: what });
    return (async function* () {
      const big = 'x'.repeat(64 * 1024);
      yield { i: 0 };
      if (what === 'hang') await aborted;
      for (let i = 1; what === 'flood' && !signal.aborted; i++) {
        yield { i, big };
        await sleep(0);
      }
      yield { i: -1 };
    })();
  }
}

describe('webinfer serve against a hostile client: the transport (test double)', () => {
  let server: Server | null = null;
  let double: Double;
  afterEach(async () => {
    await server?.close();
    server = null;
  });
  const start = async (o: Parameters<typeof serve>[1] = {}) => {
    double = new Double();
    server = await serve(double, { port: 0, ...o });
    return server;
  };
  const body = (prompt: string, extra: Record<string, unknown> = {}) => JSON.stringify({ model: 'double', prompt, ...extra });
  const post = (path: string, json: string, headers = '') => `POST ${path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(json)}\r\n${headers}\r\n${json}`;

  it('stalled clients take no queue slot: partial bodies wait outside the queue and get 408 after bodyTimeoutMs', async () => {
    const s = await start({ maxQueue: 2, bodyTimeoutMs: 400 });
    // Four sockets that send headers and half a body, then nothing.
    const partial = Array.from({ length: 4 }, () => raw(s.port, `POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"model":`));
    await sleep(50);
    // Everyone else is still served (the queue counts requests whose bodies came).
    for (let i = 0; i < 3; i++) expect((await fetch(`${s.url}/v1/completions`, { method: 'POST', body: body(`ok${i}`) })).status).toBe(200);
    const got = await Promise.all(partial);
    expect(got.map((g) => g.status)).toEqual([408, 408, 408, 408]);
    expect(JSON.parse(got[0]!.body).error.code).toBe('request_timeout');
    // A body already past the cap that then stalls is too large, whatever its pace: 413, not 408.
    const big = await serve(double, { port: 0, maxBodyBytes: 100, bodyTimeoutMs: 300 });
    const slow = await raw(big.port, `POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1000\r\n\r\n${'x'.repeat(200)}`);
    await big.close();
    expect(slow.status).toBe(413);
  });

  it('streams to clients that stop reading end after streamStallMs, cancelling their request and freeing its slot', async () => {
    const s = await start({ maxQueue: 2, streamStallMs: 300 });
    // Two streams whose clients never read: the server's writes fill the connection's buffers.
    const sockets = Array.from({ length: 2 }, () => {
      const c = connect(s.port, '127.0.0.1');
      c.write(post('/v1/completions', body('flood', { stream: true })));
      c.pause();
      c.on('error', () => undefined);
      return c;
    });
    await until(() => double.aborted.filter((w) => w === 'flood').length === 2, 'both unread streams to be ended', 20_000);
    for (const c of sockets) c.destroy();
    expect((await fetch(`${s.url}/v1/completions`, { method: 'POST', body: body('after') })).status).toBe(200);
  });

  it('deep JSON, huge values and paths, malformed escapes: named 4xx with a bounded message, never a 500, and quick', async () => {
    const s = await start();
    const deep = (n: number) => '['.repeat(n) + ']'.repeat(n);
    for (const n of [1000, 100_000]) {
      const r = await fetch(`${s.url}/v1/completions`, { method: 'POST', body: `{"model":"double","prompt":"x","stop":${deep(n)}}` });
      expect(r.status, `${n} deep`).toBe(400);
      const j = await r.json() as { error: { code: string; message: string } };
      expect(j.error.code).toBe('too_deep');
      expect(j.error.message.length).toBeLessThan(1000);
    }
    // A 2 MB model id is quoted, not echoed whole.
    const bigId = await fetch(`${s.url}/v1/completions`, { method: 'POST', body: JSON.stringify({ model: 'm'.repeat(2_000_000), prompt: 'x' }) });
    expect(bigId.status).toBe(404);
    expect((await bigId.text()).length).toBeLessThan(2000);
    expect((await fetch(`${s.url}/v1/models/%E0%A4%A`)).status).toBe(400);
    const t0 = performance.now();
    const slashes = await raw(s.port, `GET /v1/models${'/'.repeat(15_000)}x HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`);
    expect(slashes.status).toBe(404);
    expect(performance.now() - t0).toBeLessThan(1000);
    expect(slashes.body.length).toBeLessThan(2000);
    const many = await raw(s.port, `GET /v1/models/${'/'.repeat(15_000)} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`);
    expect(many.status).toBe(200);
  });

  it('HEAD on GET routes; a half-closed client gets its reply; a cancelled one still cancels', async () => {
    const s = await start();
    const head = await fetch(`${s.url}/health`, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(await head.text()).toBe('');
    expect((await fetch(`${s.url}/v1/models`, { method: 'HEAD' })).status).toBe(200);
    // The request, then FIN: the reply still comes.
    const half = await raw(s.port, post('/v1/completions', body('half')), { halfClose: true });
    expect(half.status).toBe(200);
    expect(JSON.parse(half.body).echo).toBe('half');
    const halfStream = await raw(s.port, post('/v1/completions', body('stream', { stream: true })), { halfClose: true });
    expect(halfStream.status).toBe(200);
    expect(halfStream.body).toContain('data: [DONE]');
  });

  it('a body past the cap is read and answered 413 (no EPIPE); within the cap it is served on the same server', async () => {
    const s = await start({ maxBodyBytes: 1 << 20 });
    const big = body('x'.repeat(3 << 20));
    const r = await raw(s.port, post('/v1/completions', big));
    expect(r.error).toBeUndefined();
    expect(r.status).toBe(413);
    // fetch (undici) sends the whole body before reading: it sees the 413, not a reset.
    const f = await fetch(`${s.url}/v1/completions`, { method: 'POST', body: big });
    expect(f.status).toBe(413);
    expect((await f.json() as { error: { code: string } }).error.code).toBe('request_too_large');
    expect((await fetch(`${s.url}/v1/completions`, { method: 'POST', body: body('small') })).status).toBe(200);
  });

  it('Host: a loopback server takes loopback names only (DNS rebinding); allowedHosts widens it; CORS only when asked', async () => {
    const s = await start();
    const get = (host: string) => raw(s.port, `GET /v1/models HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
    expect((await get(`localhost:${s.port}`)).status).toBe(200);
    expect((await get(`127.0.0.1:${s.port}`)).status).toBe(200);
    expect((await get(`[::1]:${s.port}`)).status).toBe(200);
    const evil = await get(`evil.test:${s.port}`);
    expect(evil.status).toBe(403);
    expect(JSON.parse(evil.body).error.code).toBe('host_not_allowed');
    expect(evil.head.toLowerCase()).not.toContain('access-control-allow-origin');
    const wide = await serve(double, { port: 0, allowedHosts: ['evil.test'], cors: 'http://page.test' });
    const ok = await raw(wide.port, `GET /v1/models HTTP/1.1\r\nHost: evil.test\r\nConnection: close\r\n\r\n`);
    await wide.close();
    expect(ok.status).toBe(200);
    expect(ok.head.toLowerCase()).toContain('access-control-allow-origin: http://page.test');
  });

  it('listen errors name the host for a bad address and the port for a taken one; bad options by name', async () => {
    await expect(serve(new Double(), { port: 0, hostname: '256.1.1.1' })).rejects.toThrow("serve: opts.hostname: expected an IPv4 address of four numbers from 0 to 255, got 256.1.1.1");
    await expect(serve(new Double(), { port: 0, hostname: 'no-such-host.invalid' })).rejects.toThrow("serve: hostname: expected an address of this machine or a name that resolves to one, got 'no-such-host.invalid'");
    const s = await start();
    await expect(serve(new Double(), { port: s.port })).rejects.toThrow(`serve: port: expected a port free to listen on at 127.0.0.1, got ${s.port}`);
    await expect(serve(new Double(), { port: 0, cors: 'page.test/x' })).rejects.toThrow('serve: opts.cors: expected an origin');
    await expect(serve(new Double(), { port: 0, streamStallMs: 0 })).rejects.toThrow('serve: opts.streamStallMs: expected a positive integer (milliseconds), got 0');
  });
});

// ------------------------------------------------------------------------------------ a real model

Object.assign(globalThis, globals);
const gpu = create([]);
const golden = llamaGqa();
const ID = 'llama-gqa';
type Extra = Record<string, unknown>;

/** A template that never mentions tools (most base models' templates). */
const NO_TOOLS_TEMPLATE = '{% for m in messages %}<|{{ m.role }}|>{{ m.content }}\n{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}';

describe('webinfer serve against a hostile client: the llama-gqa golden (Node)', () => {
  let engine: Engine;
  let model: Model;
  let plain: Model;
  let server: Server;
  let plainServer: Server;
  let client: OpenAI;
  let folder: { dir: string; remove(): void };

  beforeAll(async () => {
    folder = checkpointFolder('webinfer-hostile-');
    engine = await createEngine({ gpu });
    const ckpt = await loadCheckpoint(folder.dir);
    model = await engine.loadModel({ ...ckpt });
    plain = await engine.loadModel({ ...ckpt, tokenizerConfig: { ...byteTokenizerConfig(), chat_template: NO_TOOLS_TEMPLATE }, name: 'plain' });
    server = await serve(model, { port: 0 });
    plainServer = await serve(plain, { port: 0 });
    client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0 });
  }, 120_000);
  afterAll(async () => {
    await server?.close();
    await plainServer?.close();
    model?.destroy();
    plain?.destroy();
    engine?.destroy();
    folder?.remove();
  });

  const greedy = async (i: number) => {
    const r = await client.completions.create({ model: ID, prompt: golden.prompts[i]!, max_tokens: 8, temperature: 0, return_token_ids: true } as Extra as unknown as OpenAI.CompletionCreateParamsNonStreaming);
    return (r.choices[0] as unknown as { token_ids: number[] }).token_ids;
  };
  const errorOf = async (p: Promise<unknown>) => {
    try { await p; return null; } catch (e) { return e as InstanceType<typeof OpenAI.APIError> & { error: { code: string; message: string; param: string } }; }
  };

  it("an enum the vocabulary cannot spell is that request's 400, and requests in flight beside it finish with HF's tokens", async () => {
    const schema = { type: 'object', properties: { city: { enum: ['日本語🙂'] } }, required: ['city'] };
    const others = [0, 1, 2].map((i) => greedy(i));
    const bad = await errorOf(client.chat.completions.create({ model: ID, messages: [{ role: 'user', content: 'where?' }], max_tokens: 20, response_format: { type: 'json_schema', json_schema: { name: 'c', schema } } }));
    expect(bad?.status).toBe(400);
    expect(bad?.error.param).toBe('response_format');
    expect(bad?.message).toContain("expected text the model's vocabulary can spell");
    expect(await Promise.all(others)).toEqual(golden.greedy.slice(0, 3));
  });

  it('tools a chat template does not render are refused (400 tools_not_supported); bad tools by name; a template that renders them takes them', async () => {
    const plainClient = new OpenAI({ baseURL: `${plainServer.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    const tool = { type: 'function' as const, function: { name: 'get_weather', parameters: { type: 'object', properties: {} } } };
    const refused = await errorOf(plainClient.chat.completions.create({ model: 'plain', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, tools: [tool] }));
    expect([refused?.status, refused?.error.code, refused?.error.param]).toEqual([400, 'tools_not_supported', 'tools']);
    const many = Array.from({ length: 5000 }, (_, i) => ({ type: 'function' as const, function: { name: `f${i}` } }));
    expect(await statusOf(plainClient.chat.completions.create({ model: 'plain', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, tools: many }))).toBe(400);
    const stringParams = await errorOf(client.chat.completions.create({ model: ID, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, tools: [{ type: 'function', function: { name: 'f', parameters: '{}' as never } }] }));
    expect([stringParams?.status, stringParams?.error.param]).toEqual([400, 'tools[0].function.parameters']);
    // The golden's own template renders tools: the request runs.
    expect(await statusOf(client.chat.completions.create({ model: ID, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, tools: [tool] }))).toBe('no error');
  });

  it('a 15 MiB prompt is refused 413 before it is tokenized, quickly, and /health answers meanwhile', async () => {
    const prompt = 'the quick brown fox '.repeat(15 * 1024 * 1024 / 20);
    let healthMs = Infinity;
    const t0 = performance.now();
    const pending = errorOf(client.completions.create({ model: ID, prompt, max_tokens: 1 }));
    await sleep(20);
    const h0 = performance.now();
    expect((await fetch(`${server.url}/health`)).status).toBe(200);
    healthMs = performance.now() - h0;
    const e = await pending;
    expect([e?.status, e?.error.code]).toEqual([413, 'context_length_exceeded']);
    expect(performance.now() - t0).toBeLessThan(10_000);
    expect(healthMs).toBeLessThan(3000);
    // Chat: the messages' bytes are counted before the template runs.
    const chat = await errorOf(client.chat.completions.create({ model: ID, messages: [{ role: 'user', content: prompt }], max_tokens: 1 }));
    expect(chat?.status).toBe(413);
  }, 60_000);

  it('__proto__ and constructor are unknown fields; user must be a string; a schema 1,000 deep is refused for its depth', async () => {
    const proto = await fetch(`${server.url}/v1/completions`, { method: 'POST', body: `{"model":"${ID}","prompt":[1,2],"__proto__":{"x":1}}` });
    expect(proto.status).toBe(400);
    const pj = await proto.json() as { error: { message: string; code: string } };
    expect(pj.error.code).toBe('unknown_parameter');
    expect(pj.error.message).toContain('__proto__: unknown field');
    const ctor = await fetch(`${server.url}/v1/completions`, { method: 'POST', body: `{"model":"${ID}","prompt":[1,2],"constructor":1}` });
    expect((await ctor.json() as { error: { message: string } }).error.message).toContain('constructor: unknown field');
    const user = await errorOf(client.completions.create({ model: ID, prompt: [1, 2], max_tokens: 1, user: 5 as never }));
    expect([user?.status, user?.error.param]).toEqual([400, 'user']);
    let schema: Record<string, unknown> = { type: 'string' };
    for (let i = 0; i < 1000; i++) schema = { type: 'object', properties: { a: schema } };
    const deep = await errorOf(client.chat.completions.create({ model: ID, messages: [{ role: 'user', content: 'x' }], max_tokens: 2, response_format: { type: 'json_schema', json_schema: { name: 'd', schema } } }));
    expect([deep?.status, deep?.error.code]).toEqual([400, 'too_deep']);
    // A 2 MB bad value is quoted, not echoed.
    const big = await fetch(`${server.url}/v1/completions`, { method: 'POST', body: JSON.stringify({ model: ID, prompt: [1, 2], stop: ['x'.repeat(2_000_000), 'y'] }) });
    expect(big.status).toBe(400);
    expect((await big.text()).length).toBeLessThan(2000);
  });

  it('hostile fuzz: partial bodies, unread streams, deep JSON, unspellable schemas and huge prompts beside good requests (bounded, loopback)', async () => {
    const r = rng(40);
    const port = server.port;
    const t0 = performance.now();
    const good: Promise<void>[] = [];
    const hostile: Promise<unknown>[] = [];
    let healthWorst = 0;
    for (let i = 0; i < 24; i++) {
      const kind = Math.floor(r() * 6);
      const req = (b: string) => `POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(b)}\r\n\r\n${b}`;
      if (kind === 0) {
        const k = i % 3;
        good.push(greedy(k).then((ids) => { expect(ids, `good request ${i}`).toEqual(golden.greedy[k]); }));
      } else if (kind === 1) {
        // Half a body, then the socket goes away.
        const s = connect(port, '127.0.0.1');
        s.on('error', () => undefined);
        s.write(`POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Length: 500\r\n\r\n{"model":"${ID}",`);
        hostile.push(sleep(50 + r() * 200).then(() => s.destroy()));
      } else if (kind === 2) {
        // A stream never read, dropped later.
        const s = connect(port, '127.0.0.1');
        s.on('error', () => undefined);
        s.pause();
        s.write(req(JSON.stringify({ model: ID, prompt: golden.prompts[0], max_tokens: 30, stream: true })));
        hostile.push(sleep(100 + r() * 300).then(() => s.destroy()));
      } else if (kind === 3) {
        hostile.push(raw(port, req(`{"model":"${ID}","prompt":[1],"logit_bias":${'['.repeat(50_000)}${']'.repeat(50_000)}}`)).then((x) => expect(x.status, `deep ${i}`).toBe(400)));
      } else if (kind === 4) {
        hostile.push(raw(port, req(JSON.stringify({ model: ID, prompt: 'x', max_tokens: 4, response_format: { type: 'json_schema', json_schema: { name: 'u', schema: { enum: [`日本${i}`] } } } })))
          .then((x) => expect(x.status, `unspellable ${i}`).toBe(400)));
      } else {
        hostile.push(raw(port, req(JSON.stringify({ model: ID, prompt: 'ab'.repeat(1 << 20) })), { ms: 20_000 }).then((x) => expect(x.status, `huge ${i}`).toBe(413)));
      }
      const h0 = performance.now();
      expect((await fetch(`${server.url}/health`)).status).toBe(200);
      healthWorst = Math.max(healthWorst, performance.now() - h0);
      await sleep(r() * 30);
    }
    await Promise.all([...good, ...hostile]);
    expect(healthWorst).toBeLessThan(5000);
    expect(performance.now() - t0).toBeLessThan(110_000);
    // Nothing is left behind: the engine drains, and the goldens still come out.
    await until(() => model.engine.pending === 0, 'the engine to drain', 30_000);
    expect(model.kv.freeBlocks).toBe(model.numBlocks);
    expect(await greedy(1)).toEqual(golden.greedy[1]);
  }, 120_000);
});
