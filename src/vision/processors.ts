// The image processors of HF transformers that the vision models read (preprocessor_config.json):
// resize with the checkpoint's resample, rescale, normalize, and for Qwen2-VL / Qwen2.5-VL the
// min/max-pixel rounding (smart_resize) and the patch order its vision tower takes.
//
// Gemma3ImageProcessor: resize to size {height, width} (a no-op when the image already has it),
// pixel = (rgb · rescale − mean) / std, channels first: [3, H, W].
// Qwen2VLImageProcessor: resize to smart_resize(h, w) (multiples of patch·merge within min/max pixels),
// normalize, repeat the frame temporal_patch_size times, cut into patch × patch squares listed in
// merge-window order (the merge × merge patches of merged token (0,0), then (0,1), ...; merged tokens
// row-major), each row channel, time, y, x: [N, C·T·P·P], grid [t, h, w] in patches.
import { fmt, WebinferError } from '../core/errors.js';
import { decodeImage, type DecodeOptions, type ImageInput, type RgbImage } from './image.js';
import { resampleFilter, resizeRgb, type ResampleFilter } from './resize.js';

const isObj = (x: unknown): x is Record<string, unknown> => x !== null && typeof x === 'object' && !Array.isArray(x);

function bad(op: string, arg: string, expected: string, got: unknown): never {
  throw new WebinferError(`${op}: ${arg}: expected ${expected}, got ${fmt(got)}`);
}

interface Normalize {
  doRescale: boolean;
  rescaleFactor: number;
  doNormalize: boolean;
  mean: [number, number, number];
  std: [number, number, number];
  doResize: boolean;
  resample: ResampleFilter;
}

export interface Gemma3ProcessorConfig extends Normalize {
  kind: 'gemma3';
  height: number;
  width: number;
}

export interface Qwen2VLProcessorConfig extends Normalize {
  kind: 'qwen2vl';
  patchSize: number;
  mergeSize: number;
  temporalPatchSize: number;
  minPixels: number;
  maxPixels: number;
}

export type ImageProcessorConfig = Gemma3ProcessorConfig | Qwen2VLProcessorConfig;

/** The image processor classes read, by preprocessor_config.json's image_processor_type (the Fast and
 *  Pil variants compute the same within one 8-bit level of resizing). */
const KINDS: Record<string, ImageProcessorConfig['kind']> = {
  Gemma3ImageProcessor: 'gemma3', Gemma3ImageProcessorFast: 'gemma3', Gemma3ImageProcessorPil: 'gemma3',
  Qwen2VLImageProcessor: 'qwen2vl', Qwen2VLImageProcessorFast: 'qwen2vl', Qwen2VLImageProcessorPil: 'qwen2vl',
};

/**
 * A preprocessor_config.json (parsed, or a processor_config.json holding it under `image_processor`)
 * read into the processor's terms, every field checked by name.
 */
export function readPreprocessorConfig(json: unknown): ImageProcessorConfig {
  const op = 'readPreprocessorConfig';
  if (!isObj(json)) bad(op, 'preprocessorConfig', 'an object (a parsed preprocessor_config.json)', json);
  const c = isObj(json.image_processor) ? json.image_processor : json;
  const type = c.image_processor_type;
  const kind = typeof type === 'string' ? KINDS[type] : undefined;
  if (!kind) bad(op, 'image_processor_type', `one of ${Object.keys(KINDS).join(', ')}`, type);
  const bool = (k: string, d: boolean): boolean => {
    const v = c[k];
    if (v === undefined || v === null) return d;
    if (typeof v !== 'boolean') bad(op, k, 'a boolean', v);
    return v;
  };
  const posNum = (k: string, v: unknown, int: boolean): number => {
    if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0 || (int && !Number.isSafeInteger(v))) bad(op, k, int ? 'a positive integer' : 'a positive number', v);
    return v;
  };
  const triple = (k: string): [number, number, number] => {
    const v = c[k];
    if (!Array.isArray(v) || v.length !== 3 || !v.every((x) => typeof x === 'number' && Number.isFinite(x))) bad(op, k, 'three numbers (R, G, B)', v);
    if (k === 'image_std' && v.some((x) => x === 0)) bad(op, k, 'three nonzero numbers', v);
    return [v[0], v[1], v[2]];
  };
  const doRescale = bool('do_rescale', true);
  const doNormalize = bool('do_normalize', true);
  const doResize = bool('do_resize', true);
  if (c.do_convert_rgb === false) bad(op, 'do_convert_rgb', 'true or absent (images are decoded to RGB)', false);
  const norm: Normalize = {
    doRescale, doNormalize, doResize,
    rescaleFactor: doRescale ? posNum('rescale_factor', c.rescale_factor ?? 1 / 255, false) : 1,
    mean: doNormalize ? triple('image_mean') : [0, 0, 0],
    std: doNormalize ? triple('image_std') : [1, 1, 1],
    resample: resampleFilter(op, 'resample', c.resample ?? (kind === 'gemma3' ? 2 : 3)),
  };
  if (kind === 'gemma3') {
    if (c.do_pan_and_scan === true) bad(op, 'do_pan_and_scan', 'false (pan and scan crops are not implemented)', true);
    const size = c.size;
    if (!isObj(size)) bad(op, 'size', '{ height, width }', size);
    return { kind, ...norm, height: posNum('size.height', size.height, true), width: posNum('size.width', size.width, true) };
  }
  const size = isObj(c.size) ? c.size : {};
  // transformers 5 writes size { shortest_edge: min_pixels, longest_edge: max_pixels }; older files min_pixels / max_pixels.
  const minPixels = posNum('min_pixels', c.min_pixels ?? size.shortest_edge ?? 56 * 56, true);
  const maxPixels = posNum('max_pixels', c.max_pixels ?? size.longest_edge ?? 28 * 28 * 1280, true);
  if (minPixels > maxPixels) bad(op, 'min_pixels', `at most max_pixels (${maxPixels})`, minPixels);
  return {
    kind, ...norm, minPixels, maxPixels,
    patchSize: posNum('patch_size', c.patch_size ?? 14, true),
    mergeSize: posNum('merge_size', c.merge_size ?? 2, true),
    temporalPatchSize: posNum('temporal_patch_size', c.temporal_patch_size ?? 2, true),
  };
}

/** Python's round(): halves to even. */
function roundHalfEven(x: number): number {
  const f = Math.floor(x);
  const d = x - f;
  if (d > 0.5) return f + 1;
  if (d < 0.5) return f;
  return f % 2 === 0 ? f : f + 1;
}

/**
 * Qwen2-VL's smart_resize: height and width rounded to multiples of `factor`, scaled (keeping the
 * aspect) into [minPixels, maxPixels].
 */
export function smartResize(height: number, width: number, factor: number, minPixels: number, maxPixels: number): { height: number; width: number } {
  const op = 'smartResize';
  if (Math.max(height, width) / Math.min(height, width) > 200) {
    bad(op, 'image', 'an aspect ratio of at most 200', `${width} × ${height}`);
  }
  let h = roundHalfEven(height / factor) * factor;
  let w = roundHalfEven(width / factor) * factor;
  if (h * w > maxPixels) {
    const beta = Math.sqrt((height * width) / maxPixels);
    h = Math.max(factor, Math.floor(height / beta / factor) * factor);
    w = Math.max(factor, Math.floor(width / beta / factor) * factor);
  } else if (h * w < minPixels) {
    const beta = Math.sqrt(minPixels / (height * width));
    h = Math.ceil((height * beta) / factor) * factor;
    w = Math.ceil((width * beta) / factor) * factor;
  }
  return { height: h, width: w };
}

function checkRgb(op: string, rgb: RgbImage): void {
  if (!rgb || typeof rgb !== 'object') bad(op, 'image', 'an RGB image { width, height, data } (decodeImage makes one)', rgb);
  if (!Number.isSafeInteger(rgb.width) || rgb.width < 1 || !Number.isSafeInteger(rgb.height) || rgb.height < 1) {
    throw new WebinferError(`${op}: image: expected positive integer width and height, got ${fmt(rgb.width)} × ${fmt(rgb.height)}`);
  }
  if (!(rgb.data instanceof Uint8Array) || rgb.data.length !== rgb.width * rgb.height * 3) {
    const got = rgb.data instanceof Uint8Array ? `${rgb.data.length} bytes` : fmt(rgb.data);
    throw new WebinferError(`${op}: image.data: expected ${rgb.width * rgb.height * 3} bytes of RGB (${rgb.width} × ${rgb.height} × 3), got ${got}`);
  }
}

/** Per channel: value = byte · scale[c] + shift[c], so rescale and normalize are one multiply-add. */
function affine(n: Normalize): { scale: number[]; shift: number[] } {
  const r = n.doRescale ? n.rescaleFactor : 1;
  const scale = [0, 1, 2].map((c) => r / n.std[c]);
  const shift = [0, 1, 2].map((c) => -n.mean[c] / n.std[c]);
  return { scale, shift };
}

/** Gemma 3's processor: [3, H, W] channels first. */
export function gemma3ImageProcessor(rgb: RgbImage, config: Gemma3ProcessorConfig | unknown): { pixelValues: Float32Array; shape: [number, number, number] } {
  const op = 'gemma3ImageProcessor';
  const c = isGemma(config) ? config : readPreprocessorConfig(config);
  if (c.kind !== 'gemma3') bad(op, 'preprocessorConfig', 'a Gemma3ImageProcessor config', c.kind);
  checkRgb(op, rgb);
  const img = c.doResize ? resizeRgb(rgb, c.width, c.height, c.resample) : rgb;
  const { width: W, height: H } = img;
  const { scale, shift } = affine(c);
  const out = new Float32Array(3 * H * W);
  for (let ch = 0; ch < 3; ch++) {
    for (let i = 0; i < H * W; i++) out[ch * H * W + i] = img.data[i * 3 + ch] * scale[ch] + shift[ch];
  }
  return { pixelValues: out, shape: [3, H, W] };
}

const isGemma = (c: unknown): c is Gemma3ProcessorConfig => isObj(c) && c.kind === 'gemma3';
const isQwen = (c: unknown): c is Qwen2VLProcessorConfig => isObj(c) && c.kind === 'qwen2vl';

/** The size Qwen's processor resizes an image of width × height to, its patch grid, and its image tokens. */
export function qwen2VLImageGrid(width: number, height: number, config: Qwen2VLProcessorConfig): { width: number; height: number; grid: [number, number, number]; tokens: number } {
  const c = config;
  const s = smartResize(height, width, c.patchSize * c.mergeSize, c.minPixels, c.maxPixels);
  const grid: [number, number, number] = [1, s.height / c.patchSize, s.width / c.patchSize];
  return { width: s.width, height: s.height, grid, tokens: (grid[0] * grid[1] * grid[2]) / (c.mergeSize * c.mergeSize) };
}

/** Qwen2-VL / Qwen2.5-VL's processor: patches [N, C·T·P·P] in merge-window order, the grid [t, h, w] and the image tokens t·h·w / merge². */
export function qwen2VLImageProcessor(rgb: RgbImage, config: Qwen2VLProcessorConfig | unknown): {
  pixelValues: Float32Array; shape: [number, number]; grid: [number, number, number]; imageTokens: number;
} {
  const op = 'qwen2VLImageProcessor';
  const c = isQwen(config) ? config : readPreprocessorConfig(config);
  if (c.kind !== 'qwen2vl') bad(op, 'preprocessorConfig', 'a Qwen2VLImageProcessor config', c.kind);
  checkRgb(op, rgb);
  const g = qwen2VLImageGrid(rgb.width, rgb.height, c);
  const img = c.doResize ? resizeRgb(rgb, g.width, g.height, c.resample) : rgb;
  const P = c.patchSize, M = c.mergeSize, T = c.temporalPatchSize;
  if (img.width % (P * M) !== 0 || img.height % (P * M) !== 0) {
    bad(op, 'image', `a size in multiples of patch_size · merge_size = ${P * M} (do_resize is false)`, `${img.width} × ${img.height}`);
  }
  const gh = img.height / P, gw = img.width / P;
  const { scale, shift } = affine(c);
  const row = 3 * T * P * P;
  const n = gh * gw;
  const out = new Float32Array(n * row);
  let r = 0;
  // Merged tokens row-major; within each, its M × M patches row-major; within a patch, c, t, y, x.
  for (let by = 0; by < gh / M; by++) {
    for (let bx = 0; bx < gw / M; bx++) {
      for (let my = 0; my < M; my++) {
        for (let mx = 0; mx < M; mx++, r++) {
          const py = (by * M + my) * P, px = (bx * M + mx) * P;
          let o = r * row;
          for (let ch = 0; ch < 3; ch++) {
            for (let t = 0; t < T; t++) {   // one image: every temporal slice is the same frame
              for (let y = 0; y < P; y++) {
                for (let x = 0; x < P; x++) out[o++] = img.data[((py + y) * img.width + px + x) * 3 + ch] * scale[ch] + shift[ch];
              }
            }
          }
        }
      }
    }
  }
  return { pixelValues: out, shape: [n, row], grid: [1, gh, gw], imageTokens: n / (M * M) };
}

/** Either processor by its config: what a vision model's preprocessImage returns. */
export function preprocessRgb(rgb: RgbImage, config: ImageProcessorConfig): { pixelValues: Float32Array; shape: number[]; grid?: [number, number, number] } {
  return config.kind === 'gemma3' ? gemma3ImageProcessor(rgb, config) : qwen2VLImageProcessor(rgb, config);
}

/**
 * An ImageInput decoded and preprocessed as the checkpoint's processor does (API.md's
 * model.preprocessImage): Gemma 3 [3, H, W]; Qwen2-VL [N, C·T·P·P] with its grid.
 */
export async function preprocessImage(image: ImageInput, config: ImageProcessorConfig | unknown, o: DecodeOptions = {}): Promise<{ pixelValues: Float32Array; shape: number[]; grid?: [number, number, number] }> {
  const c = isGemma(config) || isQwen(config) ? config : readPreprocessorConfig(config);
  return preprocessRgb(await decodeImage(image, o), c);
}
