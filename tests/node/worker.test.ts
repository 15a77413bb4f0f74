// The worker protocol end to end in one process: serveInWorker on one end of a MessageChannel (as in
// a dedicated Worker), WorkerModel on the other (as in the page), a golden model with the byte-level
// tokenizer between them on dawn.node. What the page sees must be what the in-process API gives:
// streamed deltas that add up to the non-streamed answer, usage with cached tokens, aborts that stop
// only their request, errors of the same class, status and param.
import { readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { create, globals } from 'webgpu';
import { createEngine, serveInWorker, WebinferError, WorkerModel, type Engine, type LoadProgress } from '../../src/index';
import { OpenAIError } from '../../src/serve/errors';
import { byteTokenizerConfig, byteTokenizerJson } from '../cases/text_fixture';

Object.assign(globalThis, globals);
const gpu = create([]);
const golden = join(dirname(fileURLToPath(import.meta.url)), '../../../shared/goldens/llama-gqa');

type Json = Record<string, any>;

describe('serveInWorker ↔ WorkerModel over a MessageChannel', () => {
  let engine: Engine;
  let channel: MessageChannel;
  let model: WorkerModel;
  const progress: LoadProgress[] = [];

  beforeAll(async () => {
    engine = await createEngine({ gpu });
    channel = new MessageChannel();
    serveInWorker(channel.port1 as never, { engine });
    // A folder as a page's picker gives it: files by relative path (Blobs cross the channel by reference).
    const blob = (b: Uint8Array | string) => new Blob([b as BlobPart]);
    model = await WorkerModel.load(channel.port2, {
      'tiny-chat/config.json': blob(await readFile(join(golden, 'config.json'))),
      'tiny-chat/model.safetensors': blob(await readFile(join(golden, 'model.safetensors'))),
      'tiny-chat/tokenizer.json': blob(JSON.stringify(byteTokenizerJson())),
      'tiny-chat/tokenizer_config.json': blob(JSON.stringify(byteTokenizerConfig())),
    }, { onProgress: (p) => progress.push(p) });
  });

  afterAll(() => {
    model?.destroy();
    channel?.port1.close();
    channel?.port2.close();
    engine?.destroy();
  });

  it('loads with the upload reported and the model described', () => {
    const up = progress.filter((p) => p.phase === 'upload');
    expect(up.length).toBeGreaterThan(1);
    expect(up.at(-1)!.loaded).toBe(up.at(-1)!.total);
    expect(model.id).toBe('tiny-chat');
    expect(model.architecture).toBe('LlamaForCausalLM');
    expect(model.info.tokenizer).toEqual({ source: 'tokenizer.json', type: 'BPE', size: 256 });
    expect(model.info.chatTemplate).toBe(true);
    expect(model.info.kind).toBe('decoder');
    expect(model.info.config?.vocabSize).toBe(256);
    expect(model.info.vocabSize).toBe(256);
    expect(model.info.weightBytes).toBeGreaterThan(1_300_000);
  });

  const messages = [{ role: 'user', content: 'Hello there, how are you today?' }];

  it('streams chunks whose deltas add up to the non-streamed answer, usage last', async () => {
    const whole = await model.chat.completions.create({ messages, max_tokens: 10, temperature: 0 }) as Json;
    expect(whole.object).toBe('chat.completion');
    let text = '';
    const chunks: Json[] = [];
    for await (const c of model.chat.completions.create({ messages, max_tokens: 10, temperature: 0, stream: true, stream_options: { include_usage: true } })) {
      chunks.push(c);
      text += (c as Json).choices?.[0]?.delta?.content ?? '';
    }
    expect(chunks.length).toBeGreaterThan(2);
    for (const c of chunks) expect(c.object).toBe('chat.completion.chunk');
    expect(text).toBe(whole.choices[0].message.content);
    const usage = chunks.at(-1)!.usage;
    expect(usage.completion_tokens).toBe(whole.usage.completion_tokens);
    expect(usage.prompt_tokens).toBe(whole.usage.prompt_tokens);
    // The same prompt again: its full blocks come from the prefix cache.
    expect(usage.prompt_tokens_details.cached_tokens).toBeGreaterThan(0);
  });

  it('a completion with a text prompt, not streamed', async () => {
    const r = await model.completions.create({ prompt: 'Once upon a time', max_tokens: 5, temperature: 0 }) as Json;
    expect(r.object).toBe('text_completion');
    expect(typeof r.choices[0].text).toBe('string');
    expect(r.usage.prompt_tokens).toBe('Once upon a time'.length);
  });

  it('an abort on the page ends that request in the worker; a reader that breaks off ends it too', async () => {
    const ac = new AbortController();
    const why = new Error('stopped by the user');
    let n = 0;
    let ended: unknown = null;
    try {
      for await (const c of model.completions.create({ prompt: 'Once', max_tokens: 400, temperature: 0, stream: true, signal: ac.signal })) {
        if ((c as Json).choices?.[0]?.text) n++;
        if (n === 3) ac.abort(why);
      }
    } catch (e) {
      ended = e;
    }
    expect(n).toBeGreaterThanOrEqual(3);
    expect(n).toBeLessThan(400);
    // As in process: the request ends with its signal's reason.
    expect(ended).toBe(why);
    let m = 0;
    for await (const c of model.completions.create({ prompt: 'Once', max_tokens: 400, temperature: 0, stream: true })) {
      if ((c as Json).choices?.[0]?.text && ++m === 2) break;
    }
    // The model still serves, and the aborted requests hold nothing: a full answer comes.
    const r = await model.completions.create({ prompt: 'Once', max_tokens: 6, temperature: 0 }) as Json;
    expect(r.usage.completion_tokens).toBeGreaterThan(0);
  });

  it('errors cross as their class, status and param; what cannot cross is refused on the page', async () => {
    const bad = model.chat.completions.create({ messages, max_tokens: -1 });
    await expect(bad).rejects.toBeInstanceOf(OpenAIError);
    await expect(bad).rejects.toMatchObject({ status: 400, param: 'max_tokens' });
    await expect(model.chat.completions.create({ messages, maxTokens: 5 })).rejects.toMatchObject({ status: 400 });
    await expect(model.chat.completions.create({ messages, signal: 'x' as never })).rejects.toMatchObject({ status: 400, param: 'signal' });
    await expect(model.chat.completions.create({ messages, onToken: () => {} })).rejects.toMatchObject({ status: 400, param: 'onToken' });
    // A stream's error comes when it is read.
    const it = model.chat.completions.create({ messages, max_tokens: -1, stream: true })[Symbol.asyncIterator]();
    await expect(it.next()).rejects.toMatchObject({ status: 400, param: 'max_tokens' });
  });

  it('destroy frees the model in the worker; the handle then refuses requests', async () => {
    const other = await WorkerModel.load(channel.port2, {
      'x/config.json': new Blob([await readFile(join(golden, 'config.json'))]),
      'x/model.safetensors': new Blob([await readFile(join(golden, 'model.safetensors'))]),
    });
    expect(other.info.handle).not.toBe(model.info.handle);
    expect(other.info.tokenizer).toBeNull();
    other.destroy();
    await expect(other.completions.create({ prompt: [1, 2, 3], max_tokens: 2 })).rejects.toThrow(WebinferError);
    await expect(other.completions.create({ prompt: [1, 2, 3], max_tokens: 2 })).rejects.toThrow('the model: expected a loaded model, got one destroyed');
    // The first model is untouched.
    const r = await model.completions.create({ prompt: 'Hi', max_tokens: 2, temperature: 0 }) as Json;
    expect(r.usage.completion_tokens).toBe(2);
  });

  it('n-gram speculation where the model can: the info says so, the tokens are the plain model\'s, usage counts the proposals; a draft is refused by name', async () => {
    const files = async () => ({
      's/config.json': new Blob([await readFile(join(golden, 'config.json'))]),
      's/model.safetensors': new Blob([await readFile(join(golden, 'model.safetensors'))]),
    });
    await expect(WorkerModel.load(channel.port2, await files(), { speculative: { method: 'draft', draft: {} } as never })).rejects.toThrow(/WorkerModel\.load: o\.speculative/);
    const spec = await WorkerModel.load(channel.port2, await files(), { speculative: { method: 'ngram', k: 3 } });
    try {
      expect(spec.info.speculative).toEqual({ method: 'ngram', k: 3 });
      expect(model.info.speculative).toBeNull();
      const req = { prompt: [7, 8, 9, 7, 8, 9, 7, 8, 9, 7, 8], max_tokens: 16, temperature: 0, return_token_ids: true };
      const a = await spec.completions.create(req) as Json;
      const b = await model.completions.create(req) as Json;
      expect(a.choices[0].token_ids).toEqual(b.choices[0].token_ids);
      const d = a.usage.completion_tokens_details;
      expect(d.accepted_prediction_tokens + d.rejected_prediction_tokens).toBeGreaterThan(0);
      expect(b.usage.completion_tokens_details).toBeUndefined();
    } finally {
      spec.destroy();
    }
  });

  it('a load that fails rejects with the worker\'s named error', async () => {
    await expect(WorkerModel.load(channel.port2, { 'config.json': new Blob(['{}']) })).rejects.toThrow(/loadCheckpoint: weights: expected model\.safetensors/);
  });
});
