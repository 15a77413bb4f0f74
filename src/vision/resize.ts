// Resampling as the image processors do it: separable convolution with a filter whose support widens
// by the scale when shrinking (antialiasing), the weights of each output pixel normalized to sum 1 —
// PIL's Image.resize and torchvision's resize(antialias=True) both compute this. On 8-bit images both
// run the horizontal pass, round to 8 bits, then the vertical pass, with fixed-point weights: PIL with
// 22 fraction bits, torchvision's uint8 kernel with int16 weights of as many bits as fit. This follows
// torchvision's (the goldens' processors are its backend, and their resize case comes out byte for
// byte); PIL's differs from it by at most one 8-bit level here and there.
import { fmt, WebinferError } from '../core/errors.js';
import type { RgbImage } from './image.js';

export type ResampleFilter = 'bilinear' | 'bicubic';

/** PIL's resample codes (preprocessor_config.json's `resample`) this module implements. */
export const RESAMPLE_CODES: Readonly<Record<number, ResampleFilter>> = { 2: 'bilinear', 3: 'bicubic' };

/** PIL's names of the codes, for messages. */
const PIL_NAMES = ['nearest', 'lanczos', 'bilinear', 'bicubic', 'box', 'hamming'];

export function resampleFilter(op: string, arg: string, code: unknown): ResampleFilter {
  const f = typeof code === 'number' ? RESAMPLE_CODES[code] : undefined;
  if (!f) {
    const name = typeof code === 'number' && PIL_NAMES[code] ? ` (${PIL_NAMES[code]})` : '';
    throw new WebinferError(`${op}: ${arg}: expected 2 (bilinear) or 3 (bicubic), got ${fmt(code)}${name}`);
  }
  return f;
}

const support: Record<ResampleFilter, number> = { bilinear: 1, bicubic: 2 };

/** The filter's kernel at x (bicubic: Keys' cubic with a = -0.5, as PIL and torchvision's antialiased path). */
function kernel(f: ResampleFilter, x: number): number {
  x = Math.abs(x);
  if (f === 'bilinear') return x < 1 ? 1 - x : 0;
  const a = -0.5;
  if (x < 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2) return (((x - 5) * x + 8) * x - 4) * a;
  return 0;
}

/** For each output index: the first input index and the normalized weights. */
function coefficients(f: ResampleFilter, inSize: number, outSize: number): { start: Int32Array; weights: Float64Array[] } {
  const scale = inSize / outSize;
  const filterScale = Math.max(scale, 1);
  const reach = support[f] * filterScale;
  const start = new Int32Array(outSize);
  const weights: Float64Array[] = [];
  for (let o = 0; o < outSize; o++) {
    const center = (o + 0.5) * scale;
    const lo = Math.max(Math.trunc(center - reach + 0.5), 0);
    const hi = Math.min(Math.trunc(center + reach + 0.5), inSize);
    const w = new Float64Array(Math.max(hi - lo, 0));
    let sum = 0;
    for (let i = 0; i < w.length; i++) {
      w[i] = kernel(f, (i + lo - center + 0.5) / filterScale);
      sum += w[i];
    }
    if (sum !== 0) for (let i = 0; i < w.length; i++) w[i] /= sum;
    start[o] = lo;
    weights.push(w);
  }
  return { start, weights };
}

const u8 = (v: number): number => (v <= 0 ? 0 : v >= 255 ? 255 : v);

/**
 * A pass's weights in fixed point as torchvision's uint8 kernel holds them: int16 with as many fraction
 * bits as the largest weight leaves room for, each rounded half away from zero. Its sums start at
 * half a unit and are shifted down (rounding half up), as PIL's 8-bit resampling does with 22 bits.
 */
function fixedPoint(weights: Float64Array[]): { bits: number; ints: Int32Array[] } {
  let most = 0;
  for (const w of weights) for (const v of w) most = Math.max(most, v);
  let bits = 0;
  for (; bits < 22; bits++) if (Math.trunc(0.5 + most * 2 ** (bits + 1)) >= 1 << 15) break;
  const ints = weights.map((w) => Int32Array.from(w, (v) => Math.trunc(v * 2 ** bits + (v >= 0 ? 0.5 : -0.5))));
  return { bits, ints };
}

/** An RGB image resized to width × height with the filter (antialiased when shrinking). */
export function resizeRgb(img: RgbImage, width: number, height: number, filter: ResampleFilter): RgbImage {
  const op = 'resizeRgb';
  for (const [k, v] of [['width', width], ['height', height]] as const) {
    if (!Number.isSafeInteger(v) || v < 1) throw new WebinferError(`${op}: ${k}: expected a positive integer, got ${fmt(v)}`);
  }
  if (img.width === width && img.height === height) return { width, height, data: img.data.slice() };
  let src = img.data;
  let w = img.width;
  if (width !== img.width) {
    const { start, weights } = coefficients(filter, img.width, width);
    const { bits, ints } = fixedPoint(weights);
    const half = 2 ** (bits - 1);
    const out = new Uint8Array(width * img.height * 3);
    for (let y = 0; y < img.height; y++) {
      const row = y * img.width * 3;
      for (let x = 0; x < width; x++) {
        const ws = ints[x];
        let r = half, g = half, b = half;
        for (let i = 0, at = row + start[x] * 3; i < ws.length; i++, at += 3) { r += ws[i] * src[at]; g += ws[i] * src[at + 1]; b += ws[i] * src[at + 2]; }
        const o = (y * width + x) * 3;
        out[o] = u8(Math.floor(r / 2 ** bits)); out[o + 1] = u8(Math.floor(g / 2 ** bits)); out[o + 2] = u8(Math.floor(b / 2 ** bits));
      }
    }
    src = out;
    w = width;
  }
  if (height !== img.height) {
    const { start, weights } = coefficients(filter, img.height, height);
    const { bits, ints } = fixedPoint(weights);
    const half = 2 ** (bits - 1);
    const out = new Uint8Array(w * height * 3);
    for (let y = 0; y < height; y++) {
      const ws = ints[y];
      for (let x = 0; x < w; x++) {
        let r = half, g = half, b = half;
        for (let i = 0, at = ((start[y]) * w + x) * 3; i < ws.length; i++, at += w * 3) { r += ws[i] * src[at]; g += ws[i] * src[at + 1]; b += ws[i] * src[at + 2]; }
        const o = (y * w + x) * 3;
        out[o] = u8(Math.floor(r / 2 ** bits)); out[o + 1] = u8(Math.floor(g / 2 ** bits)); out[o + 2] = u8(Math.floor(b / 2 ** bits));
      }
    }
    src = out;
  }
  return { width, height, data: src };
}
