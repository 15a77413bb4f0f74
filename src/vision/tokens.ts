// What the chat path needs of a vision-language model, and the placeholder expansion HF's processors do.
//
// A chat template writes one placeholder per image (Qwen2.5-VL: <|vision_start|><|image_pad|><|vision_end|>,
// the placeholder <|image_pad|>; Gemma 3: <start_of_image>). The processor then replaces each placeholder
// with the image's block: Qwen's <|image_pad|> repeated t·h·w/merge² times (it depends on the image's
// size), Gemma 3's "\n\n<start_of_image>" + 256 × <image_soft_token> + "<end_of_image>\n\n". A model
// implements VisionTokens; expandImageTokens does the replacement for it, and a model whose layout
// is not "placeholder → before + image × n + after" supplies its own.
import { fmt, WebinferError } from '../core/errors.js';
import type { RgbImage } from './image.js';
import { qwen2VLImageGrid, type Qwen2VLProcessorConfig } from './processors.js';

export interface VisionTokens {
  /** The token whose embeddings the image features replace, one per feature vector. */
  readonly imageTokenId: number;
  /** Image tokens (feature vectors) for an image of this size. */
  tokensPerImage(width: number, height: number): number;
  /** The token the chat template writes once per image. Default: imageTokenId. */
  readonly placeholderTokenId?: number;
  /** Tokens that replace the placeholder before the image tokens (Gemma 3: "\n\n" and <start_of_image>). Default none. */
  readonly blockBefore?: readonly number[];
  /** Tokens after the image tokens (Gemma 3: <end_of_image> and "\n\n"). Default none. */
  readonly blockAfter?: readonly number[];
  /** Replaces the default expansion (expandImageTokens) where a model lays its images out otherwise. */
  expandImageTokens?(tokens: readonly number[], images: readonly RgbImage[]): number[];
  /**
   * The text the chat template writes once per image (Gemma 3: '<start_of_image>', Qwen2-VL:
   * '<|image_pad|>'). With imageText, the chat path expands each image in the rendered text before
   * tokenizing, as HF's processors do, so the tokens around the block (Gemma 3's "\n\n") come out as
   * the tokenizer reads the whole text.
   */
  readonly placeholderText?: string;
  /** The text an image of n image tokens becomes (Gemma 3: "\n\n<start_of_image>" + n × "<image_soft_token>" + "<end_of_image>\n\n"). */
  imageText?(n: number): string;
}

function bad(op: string, arg: string, expected: string, got: string): never {
  throw new WebinferError(`${op}: ${arg}: expected ${expected}, got ${got}`);
}

/** Whether `x` has what VisionTokens needs (a model exposes it as `model.vision`). */
export function isVisionTokens(x: unknown): x is VisionTokens {
  const v = x as VisionTokens | null | undefined;
  return !!v && typeof v === 'object' && Number.isInteger(v.imageTokenId) && typeof v.tokensPerImage === 'function';
}

/**
 * The prompt with each image's placeholder replaced by its block, images in order of appearance.
 * The number of placeholders must equal the number of images; an image token already in the prompt
 * (where the placeholder is another token) is refused, since it would take a feature vector no image gives.
 */
export function expandImageTokens(vision: VisionTokens, tokens: readonly number[], images: readonly RgbImage[], arg = 'messages'): number[] {
  const op = 'expandImageTokens';
  if (vision.expandImageTokens) return vision.expandImageTokens(tokens, images);
  const placeholder = vision.placeholderTokenId ?? vision.imageTokenId;
  const before = vision.blockBefore ?? [];
  const after = vision.blockAfter ?? [];
  let found = 0;
  for (const t of tokens) {
    if (t === placeholder) found++;
    else if (t === vision.imageTokenId) {
      bad(op, arg, `image tokens (${vision.imageTokenId}) only where an image's placeholder (${placeholder}) is expanded`, 'an image token written in the text');
    }
  }
  if (found !== images.length) {
    bad(op, arg, `one image placeholder (token ${placeholder}) per image, ${images.length} in all`,
      `${found} placeholder${found === 1 ? '' : 's'}${images.length === 0 ? ' and no image' : ''}`);
  }
  const out: number[] = [];
  let k = 0;
  for (const t of tokens) {
    if (t !== placeholder) { out.push(t); continue; }
    const img = images[k++];
    const n = vision.tokensPerImage(img.width, img.height);
    if (!Number.isSafeInteger(n) || n < 1) bad(op, 'vision.tokensPerImage', 'a positive integer', `${fmt(n)} for ${img.width} × ${img.height}`);
    out.push(...before);
    for (let i = 0; i < n; i++) out.push(vision.imageTokenId);
    out.push(...after);
  }
  return out;
}

/**
 * The rendered chat text with each image's placeholder text replaced by its image text, images in
 * order of appearance (HF's processors: Gemma3Processor, Qwen2VLProcessor). Returns the text and the
 * number of image tokens it holds, for a check after tokenizing.
 */
export function expandImageText(vision: VisionTokens, text: string, images: readonly RgbImage[], arg = 'messages'): { text: string; imageTokens: number } {
  const op = 'expandImageText';
  const ph = vision.placeholderText;
  if (!ph || !vision.imageText) return bad(op, 'vision', 'placeholderText and imageText', 'a model without them');
  const pieces = text.split(ph);
  const found = pieces.length - 1;
  if (found !== images.length) {
    bad(op, arg, `one image placeholder (${fmt(ph)}) per image, ${images.length} in all`, `${found} placeholder${found === 1 ? '' : 's'}${images.length === 0 ? ' and no image' : ''}`);
  }
  let out = pieces[0];
  let imageTokens = 0;
  images.forEach((img, k) => {
    const n = vision.tokensPerImage(img.width, img.height);
    if (!Number.isSafeInteger(n) || n < 1) bad(op, 'vision.tokensPerImage', 'a positive integer', `${fmt(n)} for ${img.width} × ${img.height}`);
    imageTokens += n;
    out += vision.imageText!(n) + pieces[k + 1];
  });
  return { text: out, imageTokens };
}

function configInt(op: string, config: Record<string, unknown>, keys: string[], fallback?: number): number {
  for (const k of keys) {
    const v = config[k];
    if (v === undefined || v === null) continue;
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) bad(op, `config.${k}`, 'a non-negative integer', fmt(v));
    return v;
  }
  if (fallback !== undefined) return fallback;
  return bad(op, `config.${keys[0]}`, 'a token id', 'none');
}

const isObj = (x: unknown): x is Record<string, unknown> => x !== null && typeof x === 'object' && !Array.isArray(x);

/**
 * Gemma 3's image tokens from its config.json (image_token_index, boi_token_index, eoi_token_index,
 * mm_tokens_per_image): the template writes <start_of_image>, which becomes "\n\n<start_of_image>",
 * mm_tokens_per_image × <image_soft_token>, "<end_of_image>\n\n". `tokenText` (the tokenizer's
 * idToToken) gives the text form; without it the expansion is by tokens, without the newlines.
 */
export function gemma3VisionTokens(config: unknown, tokenText?: (id: number) => string | undefined): VisionTokens {
  const op = 'gemma3VisionTokens';
  if (!isObj(config)) return bad(op, 'config', 'an object (a parsed config.json)', fmt(config));
  const image = configInt(op, config, ['image_token_index', 'image_token_id']);
  const boi = configInt(op, config, ['boi_token_index', 'boi_token_id']);
  const eoi = configInt(op, config, ['eoi_token_index', 'eoi_token_id']);
  const n = configInt(op, config, ['mm_tokens_per_image']);
  if (n < 1) bad(op, 'config.mm_tokens_per_image', 'a positive integer', String(n));
  const v: VisionTokens = { imageTokenId: image, placeholderTokenId: boi, blockBefore: [boi], blockAfter: [eoi], tokensPerImage: () => n };
  const [ti, tb, te] = [image, boi, eoi].map((id) => tokenText?.(id));
  if (ti && tb && te) return { ...v, placeholderText: tb, imageText: (k) => `\n\n${tb}${ti.repeat(k)}${te}\n\n` };
  return v;
}

/**
 * Qwen2-VL's and Qwen2.5-VL's image tokens from config.json (image_token_id) and the image processor:
 * the template writes <|vision_start|><|image_pad|><|vision_end|>, and <|image_pad|> becomes
 * t·h·w/merge² copies of itself, h and w the patch grid of the image after smart_resize.
 */
export function qwen2VLVisionTokens(config: unknown, processor: Qwen2VLProcessorConfig, tokenText?: (id: number) => string | undefined): VisionTokens {
  const op = 'qwen2VLVisionTokens';
  if (!isObj(config)) return bad(op, 'config', 'an object (a parsed config.json)', fmt(config));
  if (!isObj(processor) || processor.kind !== 'qwen2vl') bad(op, 'processor', 'a Qwen2VLImageProcessor config (readPreprocessorConfig)', fmt(processor));
  const image = configInt(op, config, ['image_token_id', 'image_token_index']);
  const v: VisionTokens = { imageTokenId: image, tokensPerImage: (w, h) => qwen2VLImageGrid(w, h, processor).tokens };
  const t = tokenText?.(image);
  return t ? { ...v, placeholderText: t, imageText: (k) => t.repeat(k) } : v;
}

/**
 * A digest of images (each one's size and pixels, SHA-256): the prefix-cache salt of a request with
 * images, so two requests with the same tokens and different images never share cached blocks. A
 * cryptographic hash, since a client who could make a colliding image could read another's cache.
 */
export async function imagesDigest(images: readonly RgbImage[]): Promise<string> {
  const parts: string[] = [];
  for (const img of images) {
    const head = new Uint8Array(new Uint32Array([img.width, img.height]).buffer);
    const buf = new Uint8Array(8 + img.data.length);
    buf.set(head, 0);
    buf.set(img.data, 8);
    const d = new Uint8Array(await crypto.subtle.digest('SHA-256', buf));
    parts.push(Array.from(d, (x) => x.toString(16).padStart(2, '0')).join(''));
  }
  return `images:${parts.join(',')}`;
}
