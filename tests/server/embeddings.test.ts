// POST /v1/embeddings with a real model: the BERT golden of ../shared/goldens-layers (with a small
// WordPiece tokenizer over its 256 ids) served over HTTP in Node (dawn.node) and driven by the official
// openai client as a user's program would: its embeddings (the client asks for base64 and decodes
// them) equal the in-process embeddings.create's, float and dimensions answer in OpenAI's shape, bad
// requests get the client's APIError with OpenAI's statuses, and a model without embeddings (a
// decoder's API, here a double) is refused with 400.
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import { statusOf } from './client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { create, globals } from 'webgpu';
import { createEngine, loadSafetensors, serve, type Engine, type Server } from '../../src/index';
import type { EmbeddingsResponse, EncoderModel } from '../../src/serve/embeddings';
import { wordPiece } from '../cases/encoder.cases';

Object.assign(globalThis, globals);
const gpu = create([]);
const root = join(dirname(fileURLToPath(import.meta.url)), '../..');
const GOLDEN = join(root, '../shared/goldens-layers/bert-padded-batch');
const ID = 'tiny-bert';

describe('webinfer serve: POST /v1/embeddings, the BERT golden through the openai client (Node)', () => {
  let engine: Engine;
  let model: EncoderModel;
  let server: Server;
  let client: OpenAI;

  beforeAll(async () => {
    engine = await createEngine({ gpu });
    const config = JSON.parse(readFileSync(join(GOLDEN, 'config.json'), 'utf8')) as object;
    const weights = await loadSafetensors(join(GOLDEN, 'model.safetensors'));
    model = await engine.loadModel({ config, weights, tokenizer: wordPiece(), name: ID }) as unknown as EncoderModel;
    server = await serve(model, { port: 0 });
    client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0 });
  }, 120_000);
  afterAll(async () => {
    await server?.close();
    model?.destroy();
    engine?.destroy();
  });

  it("the client's embeddings (base64 on the wire) equal the in-process ones; float, token ids, dimensions and usage in OpenAI's shape", async () => {
    const input = ['w17 w93 w5', 'w20 w21 w22 w23'];
    const local = await model.embeddings.create({ input });
    const r = await client.embeddings.create({ model: ID, input });
    expect(r.object).toBe('list');
    expect(r.model).toBe(ID);
    expect(r.usage).toEqual({ prompt_tokens: 11, total_tokens: 11 });
    expect(r.data.map((d) => [d.object, d.index, d.embedding.length])).toEqual([['embedding', 0, 128], ['embedding', 1, 128]]);
    r.data.forEach((d, i) => expect(Float32Array.from(d.embedding)).toEqual(Float32Array.from(local.data[i].embedding as number[])));
    const f = await client.embeddings.create({ model: ID, input: [[2, 17, 93, 5, 3]], encoding_format: 'float' });
    expect(f.data[0].embedding).toEqual(local.data[0].embedding);
    const short = await client.embeddings.create({ model: ID, input: 'w17 w93 w5', dimensions: 8 });
    expect(short.data[0].embedding.length).toBe(8);
    expect(Math.hypot(...short.data[0].embedding)).toBeCloseTo(1, 5);
    // The raw body: base64 of little-endian f32, as OpenAI's.
    const raw = await fetch(`${server.url}/v1/embeddings`, { method: 'POST', body: JSON.stringify({ model: ID, input: 'w17 w93 w5', encoding_format: 'base64' }) });
    const body = await raw.json() as EmbeddingsResponse;
    const bytes = Uint8Array.from(atob(body.data[0].embedding as string), (c) => c.charCodeAt(0));
    expect(new Float32Array(bytes.buffer)).toEqual(Float32Array.from(local.data[0].embedding as number[]));
  });

  it('bad requests get APIError 404/400 with OpenAI\'s fields; chat on an encoder is refused; still serving after', async () => {
    expect(await statusOf(client.embeddings.create({ model: 'text-embedding-3-small', input: 'w4' }))).toBe(404);
    expect(await statusOf(client.embeddings.create({ model: ID, input: [] }))).toBe(400);
    expect(await statusOf(client.embeddings.create({ model: ID, input: [[2, 300]] }))).toBe(400);
    expect(await statusOf(client.embeddings.create({ model: ID, input: 'w4', dimensions: 1000 }))).toBe(400);
    expect(await statusOf(client.embeddings.create({ model: ID, input: [Array(65).fill(4)] }))).toBe(400);
    const streamed = await client.post('/embeddings', { body: { model: ID, input: 'w4', stream: true } }).catch((e: unknown) => e);
    expect(streamed).toBeInstanceOf(OpenAI.BadRequestError);
    expect(Object.keys((streamed as { error: object }).error).sort()).toEqual(['code', 'message', 'param', 'type']);
    expect(await statusOf(client.chat.completions.create({ model: ID, messages: [{ role: 'user', content: 'w4' }] }))).toBe(400);
    expect((await client.embeddings.create({ model: ID, input: 'w4 w5' })).data.length).toBe(1);
  });

  it('a model without embeddings.create (a decoder-only API) gets 400 model_not_supported', async () => {
    const refuse = async () => { throw new Error('not called'); };
    const double = await serve({ id: 'decoder', chat: { completions: { create: refuse } }, completions: { create: refuse } }, { port: 0 });
    try {
      const r = await fetch(`${double.url}/v1/embeddings`, { method: 'POST', body: JSON.stringify({ model: 'decoder', input: 'hi' }) });
      expect(r.status).toBe(400);
      expect(((await r.json()) as { error: { code: string } }).error.code).toBe('model_not_supported');
    } finally {
      await double.close();
    }
  });
});
