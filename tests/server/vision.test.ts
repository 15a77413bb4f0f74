// Images over HTTP: the official openai client sends OpenAI image_url content parts (data: URLs) to
// `webinfer serve`. CPU only: the served objects are the real OpenAI surface (serve/openai.ts) over a
// scripted engine, one with a vision model's image tokens (Gemma 3's layout on gemma3-vision's toy
// tokenizer) and one text-only. A text-only model answers an image with a named 400; a vision model
// gets the placeholder expanded and the decoded image; a path is refused from a client, and an http(s)
// URL too unless the server was started to fetch them (imageUrls: a local server hands it the PNG).
import { createServer, type Server as HttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serve, type Server } from '../../src/index';
import { OpenAIServing } from '../../src/serve/openai';
import { ChatTemplate, TextTokenizer } from '../../src/text/text';
import { decodeImage, type RgbImage } from '../../src/vision/image';
import type { VisionTokens } from '../../src/vision/tokens';

const root = join(dirname(fileURLToPath(import.meta.url)), '../../../shared/goldens-arch/gemma3-vision');
const json = (name: string): Record<string, unknown> => JSON.parse(readFileSync(join(root, name), 'utf8')) as Record<string, unknown>;
const png = readFileSync(join(root, 'image.png'));
const dataUrl = `data:image/png;base64,${png.toString('base64')}`;
const processorCheck = (json('golden.json').processor_check as { input_ids: number[] }).input_ids;

const tok = TextTokenizer.create(json('tokenizer.json'), json('tokenizer_config.json'));
const template = new ChatTemplate("{{ bos_token }}{% for message in messages %}{% if message['content'] is string %} {{ message['content'] }} {% else %}"
  + "{% for item in message['content'] %}{% if item['type'] == 'image' %} <start_of_image> {% elif item['type'] == 'text' %} {{ item['text'] }} {% endif %}{% endfor %}{% endif %}{% endfor %}",
  json('tokenizer_config.json'));
const gemmaVision: VisionTokens = { imageTokenId: 255, placeholderTokenId: 253, blockBefore: [253], blockAfter: [254], tokensPerImage: () => 16 };

interface Submitted { prompt: number[]; images?: RgbImage[] }

function servable(id: string, vision?: VisionTokens, images?: { maxPixels: number }): { model: { id: string; chat: OpenAIServing['chat']; completions: OpenAIServing['completions'] }; got: Submitted[] } {
  const got: Submitted[] = [];
  const engine = {
    submit(o: { prompt: Int32Array; encoderInput?: { images: RgbImage[] }; onTokens?: (i: number, t: number[], l: null) => void }) {
      got.push({ prompt: Array.from(o.prompt), images: o.encoderInput?.images });
      o.onTokens?.(0, [41], null);
      return { result: Promise.resolve({ tokens: [[41]], finish: ['length'], promptTokens: o.prompt.length, cachedTokens: 0 }), stopChoice: () => undefined };
    },
  };
  const s = new OpenAIServing({ engine: engine as never, id, vocabSize: 256, capacity: 4096, maxContext: 4096, eosTokenIds: [1], vision }, { tokenizer: tok, template, ...(images ? { images } : {}) });
  return { model: { id, chat: s.chat, completions: s.completions }, got };
}

const parts = (url: string): OpenAI.Chat.Completions.ChatCompletionContentPart[] => [
  { type: 'text', text: '<t17> <t93>' }, { type: 'image_url', image_url: { url } }, { type: 'text', text: '<t41> <t7>' },
];

describe('image_url parts over HTTP (openai client)', () => {
  const text = servable('text-only');
  const vision = servable('vision', gemmaVision);
  let servers: Server[] = [];
  let textClient: OpenAI;
  let visionClient: OpenAI;
  beforeAll(async () => {
    servers = [await serve(text.model, { port: 0 }), await serve(vision.model, { port: 0 })];
    textClient = new OpenAI({ baseURL: `${servers[0].url}/v1`, apiKey: 'unused', maxRetries: 0 });
    visionClient = new OpenAI({ baseURL: `${servers[1].url}/v1`, apiKey: 'unused', maxRetries: 0 });
  });
  afterAll(async () => { for (const s of servers) await s.close(); });

  it('a text-only model answers a data: URL image with a 400 naming the part', async () => {
    const e = await textClient.chat.completions.create({ model: 'text-only', messages: [{ role: 'user', content: parts(dataUrl) }] }).then(() => null, (x: unknown) => x);
    expect(e).toBeInstanceOf(OpenAI.BadRequestError);
    const err = e as InstanceType<typeof OpenAI.BadRequestError>;
    expect(err.status).toBe(400);
    expect(err.code).toBe('images_not_supported');
    expect(err.param).toBe('messages[0].content[1]');
    expect(err.message).toMatch(/messages\[0\]\.content\[1\]: this model reads no images/);
    expect(text.got).toEqual([]);
    // Text parts alone are still served.
    const r = await textClient.chat.completions.create({ model: 'text-only', messages: [{ role: 'user', content: [{ type: 'text', text: '<t17>' }] }], max_tokens: 1 });
    expect(r.choices[0].message.content?.trim()).toBe('<t41>');
  });

  it("a vision model gets the image tokens expanded as HF's processor does and the decoded image", async () => {
    const r = await visionClient.chat.completions.create({ model: 'vision', messages: [{ role: 'user', content: parts(dataUrl) }], max_tokens: 1 });
    expect(r.choices[0].message.content?.trim()).toBe('<t41>');
    expect(vision.got.length).toBe(1);
    expect(vision.got[0].prompt).toEqual(processorCheck);
    expect(vision.got[0].images).toEqual([await decodeImage(new Uint8Array(png))]);
  });

  it('a client cannot make the server read its files; a bad data: URL is named', async () => {
    const before = vision.got.length;
    const file = await visionClient.chat.completions.create({ model: 'vision', messages: [{ role: 'user', content: parts(join(root, 'image.png')) }] }).then(() => null, (x: unknown) => x);
    expect(file).toBeInstanceOf(OpenAI.BadRequestError);
    expect((file as Error).message).toMatch(/messages\[0\]\.content\[1\]\.image_url\.url: expected a data: URL \(paths are not read here\)/);
    const gif = await visionClient.chat.completions.create({ model: 'vision', messages: [{ role: 'user', content: parts('data:image/gif;base64,R0lGODlh') }] }).then(() => null, (x: unknown) => x);
    expect((gif as InstanceType<typeof OpenAI.BadRequestError>).param).toBe('messages[0].content[1].image_url.url');
    expect(vision.got.length).toBe(before);
  });

  it("a request's images share one pixel budget: the image past it is refused by name before its decode", async () => {
    const small = servable('vision', gemmaVision, { maxPixels: 64 * 64 + 100 });
    const one = await small.model.chat.completions.create({ model: 'vision', messages: [{ role: 'user', content: parts(dataUrl) }], max_tokens: 1 }) as { choices: { message: { content: string } }[] };
    expect(one.choices[0].message.content.trim()).toBe('<t41>');
    const two = [...parts(dataUrl), { type: 'image_url' as const, image_url: { url: dataUrl } }];
    await expect(small.model.chat.completions.create({ model: 'vision', messages: [{ role: 'user', content: two }], max_tokens: 1 }))
      .rejects.toThrow(/messages\[0\]\.content\[3\]\.image_url\.url: expected an image of at most 100 pixels, got 64 × 64 = 4096 pixels \(the request's images share 4196 pixels; 4096 were taken\)/);
    expect(small.got.length).toBe(1);
  });

  it('an http(s) image URL is fetched only by a server started with imageUrls; otherwise a named 400 and no request goes out', async () => {
    let fetched = 0;
    const images: HttpServer = createServer((_, res) => { fetched++; res.writeHead(200, { 'content-type': 'image/png' }).end(png); });
    await new Promise<void>((r) => images.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(images.address() as AddressInfo).port}/image.png`;
    const fetching = await serve(vision.model, { port: 0, imageUrls: true });
    try {
      const before = vision.got.length;
      const e = await visionClient.chat.completions.create({ model: 'vision', messages: [{ role: 'user', content: parts(url) }] }).then(() => null, (x: unknown) => x);
      expect(e).toBeInstanceOf(OpenAI.BadRequestError);
      expect((e as Error).message).toMatch(/image_url\.url: expected a data: URL \(http\(s\) URLs are not fetched here\)/);
      expect(fetched).toBe(0);
      expect(vision.got.length).toBe(before);
      const client = new OpenAI({ baseURL: `${fetching.url}/v1`, apiKey: 'unused', maxRetries: 0 });
      const r = await client.chat.completions.create({ model: 'vision', messages: [{ role: 'user', content: parts(url) }], max_tokens: 1 });
      expect(r.choices[0].message.content?.trim()).toBe('<t41>');
      expect(fetched).toBe(1);
      expect(vision.got.at(-1)!.images).toEqual([await decodeImage(new Uint8Array(png))]);
    } finally {
      await fetching.close();
      await new Promise((r) => images.close(r));
    }
  });
});
