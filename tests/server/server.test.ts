// `webinfer serve` with a real model: the llama-gqa golden (with the byte tokenizer of text_fixture)
// served over HTTP in Node (dawn.node) and driven by the official openai client as a user's program
// would: concurrent streaming and non-streaming requests give HF's greedy tokens, a repeated prefix
// comes from the cache with the same tokens, a client cancelling mid-stream leaves the server serving,
// bad requests get the client's APIError with OpenAI's statuses. Then the same checkpoint through the
// command line (bin/webinfer.mjs, dist/serve.js), stopped by SIGINT.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import { checkpointFolder, LLAMA_GQA, llamaGqa, servedGolden, statusOf, type ServedGolden } from './client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { create, globals } from 'webgpu';
import { createEngine, loadCheckpoint, serve, type Engine, type Model, type Server } from '../../src/index';

Object.assign(globalThis, globals);
const gpu = create([]);
const root = join(dirname(fileURLToPath(import.meta.url)), '../..');
const golden = llamaGqa();
const ID = 'llama-gqa';

// Fields of vLLM's that the openai client's types do not list: passed as they are, read back as they come.
type Extra = Record<string, unknown>;
interface TokenChoice { token_ids?: number[]; text?: string; finish_reason?: string | null }

/** A completion of `prompt` (token ids), greedy, 8 tokens, its ids as the server returns them. */
async function greedyIds(client: OpenAI, prompt: number[], stream: boolean): Promise<{ ids: number[]; cached: number }> {
  const req = { model: ID, prompt, max_tokens: 8, temperature: 0, return_token_ids: true } as Extra;
  if (!stream) {
    const r = await client.completions.create(req as unknown as OpenAI.CompletionCreateParamsNonStreaming);
    const c = r.choices[0] as unknown as TokenChoice;
    return { ids: c.token_ids ?? [], cached: r.usage?.prompt_tokens_details?.cached_tokens ?? -1 };
  }
  const s = await client.completions.create({ ...req, stream: true, stream_options: { include_usage: true } } as unknown as OpenAI.CompletionCreateParamsStreaming);
  const ids: number[] = [];
  let cached = -1;
  for await (const chunk of s) {
    for (const c of chunk.choices as unknown as TokenChoice[]) ids.push(...(c.token_ids ?? []));
    if (chunk.usage) cached = chunk.usage.prompt_tokens_details?.cached_tokens ?? -1;
  }
  return { ids, cached };
}

describe('webinfer serve: the llama-gqa golden through the openai client (Node)', () => {
  let engine: Engine;
  let model: Model;
  let server: Server;
  let client: OpenAI;
  let served: ServedGolden | undefined;

  beforeAll(async () => {
    served = await servedGolden(gpu);
    ({ engine, model, server, client } = served);
  }, 120_000);
  afterAll(() => served?.close());

  type Call = { function: { name: string; arguments: string } };
  /** A forced tool call's request whole (one call, checked; no content) and streamed (its call, checked, and finish reason). */
  async function wholeAndStreamed(req: OpenAI.ChatCompletionCreateParamsNonStreaming, checkCall: (c: Call | undefined) => unknown) {
    const choice = (await client.chat.completions.create(req)).choices[0]!;
    expect(choice.finish_reason).toBe('tool_calls');
    expect(choice.message.tool_calls).toHaveLength(1);
    checkCall(choice.message.tool_calls![0] as OpenAI.ChatCompletionMessageFunctionToolCall);
    expect(choice.message.content).toBeNull();
    let streamed: Call | undefined;
    let finish: string | null = null;
    for await (const chunk of await client.chat.completions.create({ ...req, stream: true })) {
      const d = chunk.choices[0]?.delta;
      if (d?.tool_calls) streamed = d.tool_calls[0] as unknown as Call;
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    checkCall(streamed);
    return { choice, streamed, finish };
  }

  it("concurrent streaming and non-streaming completions of the golden's prompts give HF's greedy tokens; a repeated prompt's blocks come from the cache, same tokens", async () => {
    expect((await client.models.list()).data.map((m) => m.id)).toEqual([ID]);
    const runs = golden.prompts.flatMap((prompt, p) => [false, true].map(async (stream) => ({ p, stream, ...(await greedyIds(client, prompt, stream)) })));
    for (const r of await Promise.all(runs)) expect(r.ids, `prompt ${r.p}, ${r.stream ? 'streamed' : 'whole'}`).toEqual(golden.greedy[r.p]);
    // Prompt 2 (34 tokens) again, alone: its full blocks were cached by the runs above.
    for (const stream of [false, true]) {
      const again = await greedyIds(client, golden.prompts[2]!, stream);
      expect(again.ids).toEqual(golden.greedy[2]);
      expect(again.cached, 'usage.prompt_tokens_details.cached_tokens').toBeGreaterThan(0);
    }
  });

  it('chat completions: the streamed deltas make the text of the same request whole, and of the model called in process', async () => {
    const req = { model: ID, messages: [{ role: 'user' as const, content: 'Hello there' }], max_tokens: 12, temperature: 0 };
    const whole = await client.chat.completions.create(req);
    let streamed = '';
    let finish: string | null = null;
    for await (const chunk of await client.chat.completions.create({ ...req, stream: true })) {
      streamed += chunk.choices[0]?.delta?.content ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect(streamed).toBe(whole.choices[0]!.message.content);
    expect(finish).toBe(whole.choices[0]!.finish_reason);
    const local = await model.chat.completions.create(req) as unknown as OpenAI.ChatCompletion;
    expect(local.choices[0]!.message.content).toBe(whole.choices[0]!.message.content);
    expect(whole.usage!.completion_tokens).toBeGreaterThan(0);
  });

  it("tool_choice naming a function: the reply is one call of it whose arguments satisfy its parameters, whole and streamed; an unknown name is a 400 naming it", async () => {
    // Small, so the byte tokenizer's prompt (the template writes the tools out) leaves room for the call.
    const parameters = { type: 'object', properties: { c: { type: 'string', maxLength: 2 }, u: { enum: ['c', 'f'] } }, required: ['c', 'u'] };
    const tools: OpenAI.ChatCompletionTool[] = [{ type: 'function', function: { name: 'w', parameters } }, { type: 'function', function: { name: 'o' } }];
    // The golden is a random model: left alone it spends the little room the prompt leaves on the
    // whitespace JSON allows between tokens. A bias keeps whitespace to where the call's syntax needs it
    // (the mask then allows nothing else); everything else is the model's greedy choice.
    const logit_bias = { 9: -100, 10: -100, 13: -100, 32: -100 };
    const req = { model: ID, messages: [{ role: 'user' as const, content: 'W?' }], tools, tool_choice: { type: 'function' as const, function: { name: 'w' } }, temperature: 0, logit_bias };
    const checkCall = (call: { function: { name: string; arguments: string } } | undefined) => {
      expect(call?.function.name).toBe('w');
      const args = JSON.parse(call!.function.arguments) as Record<string, unknown>;
      expect(Object.keys(args)).toEqual(['c', 'u']);
      expect(typeof args.c === 'string' && [...(args.c as string)].length <= 2).toBe(true);
      expect(['c', 'f']).toContain(args.u);
    };
    // Whole, then streamed: the same call (greedy), in one tool_calls delta once the reply is whole.
    const { choice, streamed, finish } = await wholeAndStreamed(req, checkCall);
    expect([finish, streamed!.function.arguments]).toEqual(['tool_calls', (choice.message.tool_calls![0] as OpenAI.ChatCompletionMessageFunctionToolCall).function.arguments]);
    // Unknown names, a choice without tools, a malformed choice: 400s naming the field.
    const unknown = await client.chat.completions.create({ ...req, tool_choice: { type: 'function', function: { name: 'nope' } } }).catch((e: unknown) => e);
    expect(unknown).toBeInstanceOf(OpenAI.BadRequestError);
    const u = unknown as InstanceType<typeof OpenAI.BadRequestError>;
    expect([u.status, u.code, u.param]).toEqual([400, 'unknown_tool', 'tool_choice.function.name']);
    expect(u.message).toContain("expected one of the tools' names (w, o), got 'nope'");
    const { tools: _t, ...noTools } = req;
    expect(await statusOf(client.chat.completions.create(noTools))).toBe(400);
    expect(await statusOf(client.chat.completions.create({ ...req, tool_choice: { type: 'function', name: 'w' } as never }))).toBe(400);
    expect(await statusOf(client.chat.completions.create({ ...req, response_format: { type: 'json_object' } }))).toBe(400);
  }, 120_000);

  it("tool_choice 'required': the reply is one call of one of the tools, its arguments satisfying that tool's parameters, whole, streamed and sampled; without tools a 400", async () => {
    const parameters = { type: 'object', properties: { c: { type: 'string', maxLength: 2 }, u: { enum: ['c', 'f'] } }, required: ['c', 'u'] };
    const tools: OpenAI.ChatCompletionTool[] = [{ type: 'function', function: { name: 'w', parameters } }, { type: 'function', function: { name: 'o' } }];
    // As above: whitespace biased away so the little room the byte tokenizer's prompt leaves holds the call.
    const logit_bias = { 9: -100, 10: -100, 13: -100, 32: -100 };
    const req = { model: ID, messages: [{ role: 'user' as const, content: 'W?' }], tools, tool_choice: 'required' as const, temperature: 0, logit_bias };
    const checkCall = (call: { function: { name: string; arguments: string } } | undefined): string => {
      expect(['w', 'o']).toContain(call?.function.name);
      const args = JSON.parse(call!.function.arguments) as Record<string, unknown>;
      if (call!.function.name === 'o') {
        expect(args).toEqual({});
      } else {
        expect(Object.keys(args)).toEqual(['c', 'u']);
        expect(typeof args.c === 'string' && [...(args.c as string)].length <= 2).toBe(true);
        expect(['c', 'f']).toContain(args.u);
      }
      return call!.function.name;
    };
    const { choice, streamed, finish } = await wholeAndStreamed(req, checkCall);
    const w = choice.message.tool_calls![0] as OpenAI.ChatCompletionMessageFunctionToolCall;
    expect([finish, streamed!.function.name, streamed!.function.arguments]).toEqual(['tool_calls', w.function.name, w.function.arguments]);
    // Sampled (n = 4 choices, seeded): every choice is a call of one of the tools.
    const sampled = await client.chat.completions.create({ ...req, temperature: 1, seed: 5, n: 4 });
    expect(sampled.choices).toHaveLength(4);
    for (const c of sampled.choices) {
      expect(c.finish_reason).toBe('tool_calls');
      expect(c.message.tool_calls).toHaveLength(1);
      checkCall(c.message.tool_calls![0] as OpenAI.ChatCompletionMessageFunctionToolCall);
    }
    // Without tools: a 400 on tool_choice.
    const { tools: _t, ...noTools } = req;
    const e = await client.chat.completions.create(noTools).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(OpenAI.BadRequestError);
    expect((e as InstanceType<typeof OpenAI.BadRequestError>).param).toBe('tool_choice');
  }, 120_000);

  it('a client cancelling mid-stream leaves the server serving; bad requests get APIError 400/404/400/413', async () => {
    const ac = new AbortController();
    const generated = model.engine.counters.generated;
    const long = await client.completions.create({ model: ID, prompt: golden.prompts[0]!, max_tokens: 400, temperature: 0, stream: true }, { signal: ac.signal });
    let chunks = 0;
    // The client aborts after its second chunk and stops reading (a chunk the client had already parsed
    // could otherwise still come out of its iterator: seen once under load).
    for await (const _ of long) if (++chunks === 2) { ac.abort(); break; }
    expect(chunks).toBe(2);
    // The server saw the connection close and cancelled the request in the engine, 400 tokens short.
    for (let t = 0; t < 300 && model.engine.pending > 0; t++) await new Promise((r) => setTimeout(r, 10));
    expect(model.engine.pending).toBe(0);
    expect(model.engine.counters.generated - generated).toBeLessThan(400);
    expect((await greedyIds(client, golden.prompts[1]!, true)).ids).toEqual(golden.greedy[1]);

    // The client sends a string body as it is: malformed JSON.
    const malformed = await client.post('/completions', { body: '{"model": "llama-gqa", "prompt": [1, 2' }).catch((e: unknown) => e);
    expect(malformed).toBeInstanceOf(OpenAI.BadRequestError);
    expect(Object.keys((malformed as { error: object }).error).sort()).toEqual(['code', 'message', 'param', 'type']);
    expect(await statusOf(client.completions.create({ model: 'gpt-4o', prompt: [1, 2] }))).toBe(404);
    expect(await statusOf(client.completions.create({ model: ID, prompt: [1, 2], temperature: -1 }))).toBe(400);
    expect(await statusOf(client.chat.completions.create({ model: ID, messages: [{ role: 'user', content: 'x'.repeat(600) }] }))).toBe(413);
    expect(await statusOf(client.completions.create({ model: ID, prompt: Array.from({ length: 600 }, (_, i) => i % 256), stream: true }))).toBe(413);
    // Still serving after all of it.
    expect((await greedyIds(client, golden.prompts[0]!, false)).ids).toEqual(golden.greedy[0]);
  });
});

describe('webinfer serve: a model without a tokenizer answers in token ids (Node)', () => {
  it('a stream sends each choice\'s ids as they are produced (token_ids per chunk, prompt_token_ids first), and a whole reply carries them, without return_token_ids', async () => {
    // The golden's own folder: config and weights, no tokenizer.json.
    const engine = await createEngine({ gpu });
    let model: Model | undefined;
    let server: Server | undefined;
    try {
      model = await engine.loadModel({ ...(await loadCheckpoint(LLAMA_GQA)) });
      expect(model.tokenizer).toBeUndefined();
      server = await serve(model, { port: 0 });
      const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0 });
      const req = { model: 'llama-gqa', prompt: golden.prompts[0]!, max_tokens: 8, temperature: 0 };
      const whole = await client.completions.create(req as unknown as OpenAI.CompletionCreateParamsNonStreaming);
      expect((whole.choices[0] as unknown as TokenChoice).token_ids).toEqual(golden.greedy[0]);
      expect((whole as unknown as Extra).prompt_token_ids).toEqual(golden.prompts[0]);
      const chunks: { ids: number[]; finish: string | null; prompt?: unknown }[] = [];
      for await (const chunk of await client.completions.create({ ...req, stream: true } as unknown as OpenAI.CompletionCreateParamsStreaming)) {
        const c = chunk.choices[0] as unknown as TokenChoice;
        chunks.push({ ids: c.token_ids ?? [], finish: c.finish_reason ?? null, prompt: (chunk as unknown as Extra).prompt_token_ids });
      }
      expect(chunks[0]!.prompt, 'prompt_token_ids on the first chunk').toEqual(golden.prompts[0]);
      expect(chunks.slice(1).every((c) => c.prompt === undefined)).toBe(true);
      expect(chunks.flatMap((c) => c.ids), 'the chunks\' ids concatenated').toEqual(golden.greedy[0]);
      // As produced: the ids come in several chunks before the one that ends the choice, not all at the end.
      const before = chunks.filter((c) => c.finish === null && c.ids.length > 0);
      expect(before.length, 'chunks with ids before the last').toBeGreaterThan(1);
      expect(chunks.at(-1)!.finish).toBe('length');
    } finally {
      await server?.close();
      model?.destroy();
      engine.destroy();
    }
  }, 120_000);
});

describe('webinfer serve: the command line (Node)', () => {
  it('`webinfer serve <folder> --port 0` loads, warms up, prints its URL, answers the openai client with the greedy tokens, and stops on SIGINT', async () => {
    const cli = join(root, 'dist/serve.js');
    if (!existsSync(cli)) throw new Error(`${cli} missing: run npm run build first`);
    const folder = checkpointFolder();
    const child = spawn(process.execPath, [join(root, 'bin/webinfer.mjs'), 'serve', folder.dir, '--port', '0', '--max-queue', '4'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
    try {
      const url = await new Promise<string>((resolve, reject) => {
        const poll = setInterval(() => {
          const m = /serving 'llama-gqa' on (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
          if (m) { clearInterval(poll); resolve(m[1]!); }
        }, 50);
        void exited.then((code) => { clearInterval(poll); reject(new Error(`the command exited (${code}) before serving:\n${out}\n${err}`)); });
      });
      expect(err).toMatch(/loading llama-gqa: 100%/);
      // It warmed up before it listened (on by default): the shapes it ran and the pipelines compiled.
      expect(err).toMatch(/warm-up: llama-gqa: tracing greedy, /);
      expect(err).toMatch(/warm-up: warmed.* in [\d.]+ s, \d+ pipelines? compiled/);
      const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'unused', maxRetries: 0 });
      expect((await greedyIds(client, golden.prompts[1]!, true)).ids).toEqual(golden.greedy[1]);
      // The request's log line comes once its connection has closed.
      for (let t = 0; t < 300 && !/POST \/v1\/completions 200 \(stream\) [\d.]+ s\n/.test(err); t++) await new Promise((r) => setTimeout(r, 10));
      expect(err).toMatch(/POST \/v1\/completions 200 \(stream\) [\d.]+ s\n/);
      child.kill('SIGINT');
      expect(await exited, `exit code; stderr:\n${err}`).toBe(0);
      expect(err).toContain('stopped');
    } finally {
      child.kill('SIGKILL');
      folder.remove();
    }
  }, 400_000);
});
