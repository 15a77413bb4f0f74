// OpenAI image_url content parts through the chat path (serve/openai.ts with src/vision/tokens.ts), over
// a scripted engine: parts checked and bounded, text parts rendered through the template as HF's
// multimodal templates take them, images decoded in order and their placeholders expanded as HF's
// processors do (gemma3-vision's processor_check), the images and their digest handed to the engine.
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { IMAGE_SOURCES, OpenAIServing, templateTakesParts } from '../../src/serve/openai';
import { OpenAIError } from '../../src/serve/errors';
import { ChatTemplate, TextTokenizer } from '../../src/text/text';
import { decodeImage, type RgbImage } from '../../src/vision/image';
import { qwen2VLImageGrid, readPreprocessorConfig, type Qwen2VLProcessorConfig } from '../../src/vision/processors';
import { expandImageText, expandImageTokens, gemma3VisionTokens, qwen2VLVisionTokens, type VisionTokens } from '../../src/vision/tokens';

const root = join(dirname(fileURLToPath(import.meta.url)), '../../../shared/goldens-arch');
const read = (dir: string, name: string): Buffer => readFileSync(join(root, dir, name));
const json = (dir: string, name: string): Record<string, unknown> => JSON.parse(read(dir, name).toString('utf8')) as Record<string, unknown>;
const dataUrl = (dir: string, name: string): string => `data:image/png;base64,${read(dir, name).toString('base64')}`;
const gemma = json('gemma3-vision', 'golden.json');

/** gemma3-vision's toy tokenizer (word level: `<ti>` is id i) and a template of the shape of Gemma 3's: parts walked, an image written as <start_of_image>. */
const tok = TextTokenizer.create(json('gemma3-vision', 'tokenizer.json'), json('gemma3-vision', 'tokenizer_config.json'));
const partsTemplate = new ChatTemplate("{{ bos_token }}{% for message in messages %}{% if message['content'] is string %} {{ message['content'] }} {% else %}"
  + "{% for item in message['content'] %}{% if item['type'] == 'image' %} <start_of_image> {% elif item['type'] == 'text' %} {{ item['text'] }} {% endif %}{% endfor %}{% endif %}{% endfor %}",
  json('gemma3-vision', 'tokenizer_config.json'));
const stringTemplate = new ChatTemplate('{{ bos_token }}{% for message in messages %} {{ message.content }} {% endfor %}', json('gemma3-vision', 'tokenizer_config.json'));

/** Gemma 3's layout: the placeholder <start_of_image> (253) becomes 253, 16 × 255, 254. */
const gemmaVision: VisionTokens = { imageTokenId: 255, placeholderTokenId: 253, blockBefore: [253], blockAfter: [254], tokensPerImage: () => 16 };
/** Qwen2.5-VL's layout over the same toy vocabulary: <image_soft_token> (255) is its own placeholder, repeated t·h·w/4 times. */
const qwenCfg = readPreprocessorConfig(json('qwen2.5-vl', 'preprocessor_config.json')) as Qwen2VLProcessorConfig;
const qwenVision: VisionTokens = { imageTokenId: 255, tokensPerImage: (w, h) => qwen2VLImageGrid(w, h, qwenCfg).tokens };

interface Submitted { prompt: number[]; encoderInput?: { images: RgbImage[] }; cacheSalt?: string }

/** An OpenAIServing over a scripted engine that records what it was given and answers one token. */
function served(vision: VisionTokens | undefined, template = partsTemplate, images = {}) {
  const got: Submitted[] = [];
  const engine = {
    submit(o: { prompt: Int32Array; encoderInput?: { images: RgbImage[] }; cacheSalt?: string; onTokens?: (i: number, t: number[], l: null) => void }) {
      got.push({ prompt: Array.from(o.prompt), encoderInput: o.encoderInput, cacheSalt: o.cacheSalt });
      o.onTokens?.(0, [41], null);
      return { result: Promise.resolve({ tokens: [[41]], finish: ['length'], promptTokens: o.prompt.length, cachedTokens: 0 }), stopChoice: () => undefined };
    },
  };
  const serving = new OpenAIServing({ engine: engine as never, id: 'toy', vocabSize: 256, capacity: 4096, maxContext: 4096, eosTokenIds: [1], vision }, { tokenizer: tok, template, images });
  return { serving, got };
}

const user = (...content: unknown[]) => ({ messages: [{ role: 'user', content }], max_tokens: 1 });
const text = (t: string) => ({ type: 'text', text: t });
const image = (url: string, more: Record<string, unknown> = {}) => ({ type: 'image_url', image_url: { url, ...more } });

/** The OpenAIError a call rejects with (its param, code and message), or a failure when it resolves. */
async function refusal(p: Promise<unknown>): Promise<{ param: string | null; code: string | null; status: number; message: string }> {
  try {
    await p;
  } catch (e) {
    if (!(e instanceof OpenAIError)) throw e;
    return { param: e.param, code: e.code, status: e.status, message: e.message };
  }
  throw new Error('expected a refusal, got an answer');
}

describe('image_url content parts', () => {
  it("expands Gemma 3's image as its processor does (processor_check) and hands the engine the decoded image", async () => {
    const { serving, got } = served(gemmaVision);
    const req = user(text('<t17> <t93>'), image(dataUrl('gemma3-vision', 'image.png')), text('<t41> <t7>'));
    const { prompt, images } = await serving.chatPrompt(req);
    expect(prompt).toEqual((gemma.processor_check as { input_ids: number[] }).input_ids);
    expect(images.length).toBe(1);
    expect(images[0]).toEqual(await decodeImage(read('gemma3-vision', 'image.png')));
    const r = await serving.chat.completions.create(req) as { choices: { message: { content: string } }[] };
    expect(r.choices[0].message.content.trim()).toBe('<t41>');
    expect(got[0].prompt).toEqual(prompt);
    expect(got[0].encoderInput?.images).toEqual(images);
    expect(got[0].cacheSalt).toMatch(/^images:[0-9a-f]{64}$/);
  });

  it("expands each of Qwen's image placeholders by its own image's size, in order", async () => {
    const { serving, got } = served(qwenVision, new ChatTemplate("{% for message in messages %}{% for item in message['content'] %}{% if item['type'] == 'image' %} <start_of_image> <image_soft_token> <end_of_image> {% else %} {{ item['text'] }} {% endif %}{% endfor %}{% endfor %}"));
    const a = dataUrl('qwen2.5-vl', 'image.png');              // 64 × 48: 12 tokens
    const b = dataUrl('gemma3-vision', 'image-resize.png');    // 96 × 72: 24 tokens
    const { prompt, images } = await serving.chatPrompt(user(image(a), text('<t17>'), image(b)));
    expect(images.map((i) => [i.width, i.height])).toEqual([[64, 48], [96, 72]]);
    expect(prompt).toEqual([253, ...Array(12).fill(255), 254, 17, 253, ...Array(24).fill(255), 254]);
    // Same tokens, other images: another cache salt; the same images: the same salt.
    await serving.chat.completions.create(user(image(a), text('<t17>'), image(b)));
    await serving.chat.completions.create(user(image(b), text('<t17>'), image(a)));
    await serving.chat.completions.create(user(image(a), text('<t17>'), image(b)));
    expect(got[0].prompt).not.toEqual(got[1].prompt);
    expect(got[0].cacheSalt).not.toBe(got[1].cacheSalt);
    expect(got[2].cacheSalt).toBe(got[0].cacheSalt);
  });

  it('keeps text-only requests as they were: text parts joined, no images, no salt', async () => {
    const { serving, got } = served(undefined, stringTemplate);
    const { prompt, images } = await serving.chatPrompt(user(text('<t17> '), text('<t93>')));
    expect(prompt).toEqual([2, 17, 93]);
    expect(images).toEqual([]);
    await serving.chat.completions.create(user(text('<t17>')));
    expect(got[0].encoderInput).toBeUndefined();
    expect(got[0].cacheSalt).toBeUndefined();
    // A vision model with a plain string message: no placeholder, no image.
    const v = served(gemmaVision);
    expect((await v.serving.chatPrompt({ messages: [{ role: 'user', content: '<t17> <t93>' }] })).prompt).toEqual([2, 17, 93]);
  });

  it('refuses an image for a model without vision, by name (400)', async () => {
    const { serving, got } = served(undefined, stringTemplate);
    const r = await refusal(serving.chat.completions.create(user(text('<t17>'), image(dataUrl('gemma3-vision', 'image.png')))) as Promise<unknown>);
    expect(r).toMatchObject({ status: 400, param: 'messages[0].content[1]', code: 'images_not_supported' });
    expect(r.message).toMatch(/messages\[0\]\.content\[1\]: this model reads no images/);
    expect(got).toEqual([]);
  });

  it('refuses image placeholders without images and image tokens written as text, by name', async () => {
    const { serving } = served(gemmaVision);
    const none = await refusal(serving.chatPrompt(user(text('<t17> <start_of_image> <t41>'))));
    expect(none).toMatchObject({ status: 400, param: 'messages', code: 'invalid_image_tokens' });
    expect(none.message).toMatch(/expected one image placeholder \(token 253\) per image, 0 in all, got 1 placeholder and no image/);
    const extra = await refusal(serving.chatPrompt(user(text('<start_of_image>'), image(dataUrl('gemma3-vision', 'image.png')))));
    expect(extra.message).toMatch(/1 in all, got 2 placeholders/);
    const written = await refusal(serving.chatPrompt(user(text('<t17> <image_soft_token>'))));
    expect(written.message).toMatch(/image tokens \(255\) only where an image's placeholder \(253\) is expanded, got an image token written in the text/);
    // A vision model whose template prints content as a string cannot place images.
    const flat = served(gemmaVision, stringTemplate);
    expect(await refusal(flat.serving.chatPrompt(user(image(dataUrl('gemma3-vision', 'image.png')))))).toMatchObject({ param: 'messages[0].content', code: 'images_not_supported' });
    // expandImageTokens itself, with an image but no placeholder.
    expect(() => expandImageTokens(qwenVision, [1, 2], [{ width: 64, height: 48, data: new Uint8Array(64 * 48 * 3) }])).toThrow(/expected one image placeholder \(token 255\) per image, 1 in all, got 0 placeholders/);
  });

  it('refuses hostile or malformed parts by name; none reaches the engine', async () => {
    const { serving, got } = served(gemmaVision, partsTemplate, { maxBytes: 4096 });
    const png = dataUrl('gemma3-vision', 'image.png');
    const cases: [unknown, string, RegExp][] = [
      [user({ type: 'input_audio', input_audio: {} }), 'messages[0].content[0].type', /expected 'text' or 'image_url', got 'input_audio'/],
      [user({ type: 'text', text: 5 }), 'messages[0].content[0].text', /expected a string, got 5/],
      [user({ type: 'text', text: 'a', cache_control: {} }), 'messages[0].content[0].cache_control', /no field other than type and text/],
      [user(7), 'messages[0].content[0]', /expected a content part/],
      [user({ type: 'image_url', image_url: 'https://x' }), 'messages[0].content[0].image_url', /expected \{ url:/],
      [user(image(png, { detail: 'high' })), 'messages[0].content[0].image_url.detail', /expected 'auto' or none/],
      [user(image(png, { size: 3 })), 'messages[0].content[0].image_url.size', /url and detail only/],
      [user(image('')), 'messages[0].content[0].image_url.url', /expected a URL of 1 to \d+ characters, got '0 characters'/],
      [user(image(`data:image/png;base64,${'A'.repeat(8000)}`)), 'messages[0].content[0].image_url.url', /expected a URL of 1 to 5718 characters, got '8022 characters'/],
      [user(...Array(257).fill(text('a'))), 'messages[0].content', /at most 256 content parts, got '257 parts'/],
      [user(...Array(17).fill(image(png))), 'messages[0].content[16]', /at most 16 images in a request, got 'image 17'/],
      [{ messages: [{ role: 'assistant', content: [image(png)] }] }, 'messages[0].content[0].type', /'text' in a assistant message \(images go in user messages\)/],
      [user(image('data:image/gif;base64,R0lGODlh')), 'messages[0].content[0].image_url.url', /decodeImage: messages\[0\]\.content\[0\]\.image_url\.url: expected a data: URL of image\/png or image\/jpeg/],
      [user(image('data:image/png;base64,iVBORw0KGgo=')), 'messages[0].content[0].image_url.url', /expected a valid PNG image|expected PNG or JPEG bytes/],
      [user(image('ftp://host/a.png')), 'messages[0].content[0].image_url.url', /a URL of scheme 'ftp:'/],
    ];
    for (const [req, param, message] of cases) {
      const r = await refusal(serving.chat.completions.create(req) as Promise<unknown>);
      expect(r.param, JSON.stringify(req).slice(0, 120)).toBe(param);
      expect(r.status).toBe(400);
      expect(r.message).toMatch(message);
    }
    expect(got).toEqual([]);
  });

  it('reads paths in process, and not when the request says files are off (as the server does)', async () => {
    const { serving } = served(gemmaVision);
    const path = join(root, 'gemma3-vision', 'image.png');
    expect((await serving.chatPrompt(user(image(path)))).images[0].width).toBe(64);
    const r = await refusal(serving.chatPrompt({ ...user(image(path)), [IMAGE_SOURCES]: { allowFiles: false } }));
    expect(r).toMatchObject({ param: 'messages[0].content[0].image_url.url', code: 'invalid_image' });
    expect(r.message).toMatch(/paths are not read here/);
    // A serving that reads no http(s) URLs keeps refusing them whatever the request's sources say.
    const closed = served(gemmaVision, partsTemplate, { allowHttp: false });
    const h = await refusal(closed.serving.chatPrompt({ ...user(image('https://example.invalid/a.png')), [IMAGE_SOURCES]: { allowFiles: false } }));
    expect(h.message).toMatch(/http\(s\) URLs are not fetched here/);
  });

  it("gemma3VisionTokens and qwen2VLVisionTokens read the goldens' configs; the text-level expansion gives processor_check", async () => {
    const g = gemma3VisionTokens(json('gemma3-vision', 'config.json'), (id) => tok.idToToken(id));
    expect(g).toMatchObject({ imageTokenId: 255, placeholderTokenId: 253, blockBefore: [253], blockAfter: [254], placeholderText: '<start_of_image>' });
    expect(g.imageText!(2)).toBe('\n\n<start_of_image><image_soft_token><image_soft_token><end_of_image>\n\n');
    const req = user(text('<t17> <t93>'), image(dataUrl('gemma3-vision', 'image.png')), text('<t41> <t7>'));
    const check = (gemma.processor_check as { input_ids: number[] }).input_ids;
    // In the text (as Gemma3Processor: the toy tokenizer drops the newlines), and by tokens without tokenText.
    expect((await served(g).serving.chatPrompt(req)).prompt).toEqual(check);
    expect((await served(gemma3VisionTokens(json('gemma3-vision', 'config.json'))).serving.chatPrompt(req)).prompt).toEqual(check);
    expect(expandImageText(g, 'a <start_of_image> b', [{ width: 1, height: 1, data: new Uint8Array(3) }]).imageTokens).toBe(16);
    // A text part that writes the image token's text is counted after tokenizing and refused.
    const written = await refusal(served(g).serving.chatPrompt(user(text('<image_soft_token>'), image(dataUrl('gemma3-vision', 'image.png')))));
    expect(written.message).toMatch(/messages: expected 16 image tokens \(255\) for 1 image, got 17 after tokenizing/);
    const none = await refusal(served(g).serving.chatPrompt(user(text('<t17> <start_of_image>'))));
    expect(none.message).toMatch(/one image placeholder \('<start_of_image>'\) per image, 0 in all, got 1 placeholder and no image/);

    const q = qwen2VLVisionTokens(json('qwen2.5-vl', 'config.json'), qwenCfg);
    expect(q.imageTokenId).toBe(251);
    expect(q.tokensPerImage(64, 48)).toBe(12);
    expect(q.tokensPerImage(96, 72)).toBe(24);
    // Over the toy vocabulary, with <image_soft_token> (255, an added token) as the image pad: n copies in the text.
    const q255 = qwen2VLVisionTokens({ image_token_id: 255 }, qwenCfg, (id) => tok.idToToken(id));
    const qp = await served(q255, new ChatTemplate("{% for message in messages %}{% for item in message['content'] %}{% if item['type'] == 'image' %} <start_of_image><image_soft_token><end_of_image> {% else %} {{ item['text'] }} {% endif %}{% endfor %}{% endfor %}"))
      .serving.chatPrompt(user(image(dataUrl('qwen2.5-vl', 'image.png')), text('<t17>')));
    expect(qp.prompt).toEqual([253, ...Array(12).fill(255), 254, 17]);
    expect(() => gemma3VisionTokens({})).toThrow(/gemma3VisionTokens: config\.image_token_index: expected a token id, got none/);
    expect(() => gemma3VisionTokens({ ...json('gemma3-vision', 'config.json'), mm_tokens_per_image: 1.5 })).toThrow(/config\.mm_tokens_per_image: expected a non-negative integer, got 1\.5/);
    expect(() => qwen2VLVisionTokens(json('qwen2.5-vl', 'config.json'), readPreprocessorConfig(json('gemma3-vision', 'preprocessor_config.json')) as never)).toThrow(/qwen2VLVisionTokens: processor: expected a Qwen2VLImageProcessor config/);
  });

  it('tells templates that walk content parts from those that print a string', () => {
    expect(templateTakesParts("{% for item in message['content'] %}")).toBe(true);
    expect(templateTakesParts('{%- for content in message.content -%}')).toBe(true);
    expect(templateTakesParts('{{ message.content }}')).toBe(false);
    expect(templateTakesParts("{% for message in messages %}{{ message['content'] }}{% endfor %}")).toBe(false);
  });
});
