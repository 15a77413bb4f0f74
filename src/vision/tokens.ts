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
