// POST /v1/audio/transcriptions and /v1/audio/translations with a real model: the Whisper golden of
// ../shared/goldens-layers (its generation config given Whisper's language and task maps over the
// golden's own start tokens, and a small tokenizer over its 384 ids) served over HTTP in Node
// (dawn.node) and driven by the official openai client: a WAV upload gives what the in-process
// transcribe gives the same samples, in every response format; bad uploads and fields get OpenAI's
// errors; a model that does not transcribe is refused with 400.
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI, { toFile } from 'openai';
import { statusOf } from './client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { create, globals } from 'webgpu';
import { createEngine, encodeWav, loadSafetensors, serve, type Engine, type Server } from '../../src/index';
import type { WhisperModel } from '../../src/index';

Object.assign(globalThis, globals);
const gpu = create([]);
const root = join(dirname(fileURLToPath(import.meta.url)), '../..');
const LAYERS = join(root, '../shared/goldens-layers');
const GOLDEN = join(LAYERS, 'whisper-tiny-random');
const ID = 'tiny-whisper';

/** A WordPiece tokenizer.json over the golden's 384 ids: w0 ... w379 and Whisper's special tokens. */
function whisperTokenizer(): object {
  const specials: [string, number][] = [['<|startoftranscript|>', 380], ['<|nospeech|>', 381], ['<|endoftext|>', 382], ['<|pad|>', 383]];
  const vocab: Record<string, number> = { '[UNK]': 0 };
  for (let i = 1; i < 380; i++) vocab[`w${i}`] = i;
  for (const [t, id] of specials) vocab[t] = id;
  return {
    version: '1.0', truncation: null, padding: null, normalizer: null, post_processor: null,
    added_tokens: specials.map(([content, id]) => ({ id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true })),
    pre_tokenizer: { type: 'Whitespace' },
    decoder: { type: 'WordPiece', prefix: '##', cleanup: true },
    model: { type: 'WordPiece', unk_token: '[UNK]', continuing_subword_prefix: '##', max_input_chars_per_word: 100, vocab },
  };
}

describe('webinfer serve: POST /v1/audio/transcriptions, the Whisper golden through the openai client (Node)', () => {
  let engine: Engine;
  let model: WhisperModel;
  let server: Server;
  let client: OpenAI;
  let pcm: Float32Array;
  let wav: Uint8Array;

  beforeAll(async () => {
    engine = await createEngine({ gpu });
    const read = (f: string) => JSON.parse(readFileSync(join(GOLDEN, f), 'utf8')) as Record<string, unknown>;
    // The golden's start sequences are [380, 300, 310, 320]: Whisper's maps placed on those ids.
    const generationConfig = { ...read('generation_config.json'), lang_to_id: { '<|en|>': 300, '<|de|>': 301 }, task_to_id: { transcribe: 310, translate: 311 }, no_timestamps_token_id: 320 };
    model = await engine.loadModel({
      config: read('config.json'), weights: await loadSafetensors(join(GOLDEN, 'model.safetensors')), generationConfig,
      preprocessorConfig: read('preprocessor_config.json'), tokenizer: whisperTokenizer(), name: ID,
    }) as unknown as WhisperModel;
    const fe = JSON.parse(readFileSync(join(LAYERS, 'whisper-frontend/golden.json'), 'utf8')) as { waveforms: number[][] };
    pcm = Float32Array.from(fe.waveforms[0]);
    wav = encodeWav(pcm, 16000, 32);
    server = await serve(model, { port: 0 });
    client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0 });
  }, 180_000);
  afterAll(async () => {
    await server?.close();
    model?.destroy();
    engine?.destroy();
  });

  it('a WAV upload gives the in-process transcript: json, text, verbose_json (segments), and translations', async () => {
    const local = await model.transcribe(pcm, { language: 'en', task: 'transcribe' });
    expect(local.text.length).toBeGreaterThan(0);
    const r = await client.audio.transcriptions.create({ model: ID, file: await toFile(wav, 'clip.wav'), language: 'en' });
    expect(r).toEqual({ text: local.text });
    const text = await client.audio.transcriptions.create({ model: ID, file: await toFile(wav, 'clip.wav'), language: 'en', response_format: 'text' });
    expect(text).toBe(local.text);
    const timed = await model.transcribe(pcm, { language: 'en', task: 'transcribe', timestamps: true });
    const v = await client.audio.transcriptions.create({ model: ID, file: await toFile(wav, 'clip.wav'), language: 'en', response_format: 'verbose_json' }) as unknown as
      { task: string; language: string; duration: number; text: string; segments: { start: number; end: number; tokens: number[] }[] };
    expect([v.task, v.language, v.duration, v.text]).toEqual(['transcribe', 'en', 2, timed.text]);
    expect(v.segments.map((g) => [g.start, g.end, g.tokens])).toEqual((timed.segments ?? []).map((g) => [g.start, g.end, g.tokens]));
    const tr = await client.audio.translations.create({ model: ID, file: await toFile(wav, 'clip.wav') });
    expect(tr.text).toBe((await model.transcribe(pcm, { task: 'translate' })).text);
  });

  it('bad uploads and fields get OpenAI\'s statuses and fields; a model without transcribe is refused; still serving after', async () => {
    const mp3 = Uint8Array.from([0x49, 0x44, 0x33, 4, 0, 0, 0, 0, 0, 0]);
    const bad = await client.audio.transcriptions.create({ model: ID, file: await toFile(mp3, 'clip.mp3') }).catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(OpenAI.BadRequestError);
    expect((bad as { error: { code: string; message: string } }).error.code).toBe('invalid_file_format');
    expect((bad as { error: { message: string } }).error.message).toContain('got mp3 (ID3) data');
    expect(await statusOf(client.audio.transcriptions.create({ model: 'whisper-1', file: await toFile(wav, 'clip.wav') }))).toBe(404);
    expect(await statusOf(client.audio.transcriptions.create({ model: ID, file: await toFile(wav, 'clip.wav'), temperature: 0.4 }))).toBe(400);
    expect(await statusOf(client.audio.transcriptions.create({ model: ID, file: await toFile(wav, 'clip.wav'), response_format: 'xml' as 'json' }))).toBe(400);
    expect(await statusOf(client.audio.transcriptions.create({ model: ID, file: await toFile(wav, 'clip.wav'), language: 'tlh' }))).toBe(400);
    expect(await statusOf(client.audio.transcriptions.create({ model: ID, file: await toFile(wav, 'clip.wav'), timestamp_granularities: ['word'] }))).toBe(400);
    const json = await fetch(`${server.url}/v1/audio/transcriptions`, { method: 'POST', body: JSON.stringify({ model: ID }) });
    expect(json.status).toBe(400);
    expect(((await json.json()) as { error: { code: string } }).error.code).toBe('invalid_content_type');
    expect(await statusOf(client.chat.completions.create({ model: ID, messages: [{ role: 'user', content: 'hi' }] }))).toBe(400);
    expect((await client.audio.transcriptions.create({ model: ID, file: await toFile(wav, 'clip.wav') })).text).toBeTypeOf('string');

    const refuse = async () => { throw new Error('not called'); };
    const double = await serve({ id: 'decoder', chat: { completions: { create: refuse } }, completions: { create: refuse } }, { port: 0 });
    try {
      const fd = new FormData();
      fd.append('model', 'decoder');
      fd.append('file', new Blob([wav as Uint8Array<ArrayBuffer>]), 'clip.wav');
      const r = await fetch(`${double.url}/v1/audio/transcriptions`, { method: 'POST', body: fd });
      expect(r.status).toBe(400);
      expect(((await r.json()) as { error: { code: string } }).error.code).toBe('model_not_supported');
    } finally {
      await double.close();
    }
  });
});
