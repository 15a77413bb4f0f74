// Host-side quantizers for "quantize on load" (dtype 'q8' → Q8_0, 'q4' → Q4_0) and for building test
// weights, writing ggml's block layouts (SPEC §8; src/reference/quant.ts decodes them).
//
// Q8_0 and Q4_0 follow ggml's reference quantizers (quantize_row_q8_0_ref, quantize_row_q4_0_ref) step by
// step in f32 arithmetic (Math.fround after each operation), so they write the bytes ggml writes, up to
// the compiler's freedom to fuse x·id + 8.5 into an FMA:
//   Q8_0: amax = max|x|, d = amax / 127, id = 1/d (0 when d = 0), q = roundf(x·id) (ties away from zero).
//   Q4_0: max = the value of largest magnitude (the first such), d = max / −8, id = 1/d,
//         q = min(15, trunc(x·id + 8.5)); the max maps to −8, its opposite clips to 7.
// d is stored as f16 (round to nearest even); q is computed from the f32 d, as ggml does.
//
// Q4_K and Q6_K here are simple, not ggml's search-based quantizers: ranges are rounded *up* at every
// level so that nothing clips, and every value is then rounded to the nearest level of its sub-block:
//   Q4_K: per sub-block of 32, m = max(0, −min) and the step s = (max + m') / 15, where m' is m as the
//         6-bit code times the f16 super-min (dmin = max m / 63, codes ⌈m / dmin⌉); the 6-bit scale codes
//         are ⌈s / d⌉ with d = max s / 63 (d and dmin rounded up to f16). q = round((x + m') / (d·sc)).
//   Q6_K: per sub-block of 16, s = max|x| / 31, int8 codes ⌈s / d⌉ (1..127) with d = max s / 127 (f16,
//         rounded up), q = clamp(round(x / (d·sc)), −32, 31) + 32.
// Error bound of both: |w − x| <= half the sub-block's step d·sc (plus f32 rounding).
import { QUANT_FORMATS } from '../core/quant.js';
import { f16BitsToF32, f32ToF16Bits } from '../core/dtype.js';
import { fail } from '../core/errors.js';

/** The types quantizeRows writes. */
export type QuantizableType = 'Q8_0' | 'Q4_0' | 'Q4_K' | 'Q6_K';
export const QUANTIZABLE_TYPES: readonly QuantizableType[] = Object.freeze(['Q8_0', 'Q4_0', 'Q4_K', 'Q6_K'] as const);

const fr = Math.fround;

/**
 * Quantizes `rows` rows of K values (row-major `values`, rows × K) to `type`, in the GGUF block layout
 * (rows consecutive; a [N, K] HF weight gives ggml ne = [K, N]). K must be a multiple of the type's
 * block (32 for Q8_0/Q4_0, 256 for Q4_K/Q6_K). Every value must be finite.
 */
export function quantizeRows(type: QuantizableType, values: Float32Array, rows: number, K: number): Uint8Array {
  const op = 'quantizeRows';
  if (!(QUANTIZABLE_TYPES as readonly string[]).includes(type)) fail(op, 'type', `one of ${QUANTIZABLE_TYPES.join(', ')}`, String(type));
  if (!Number.isInteger(rows) || rows < 0) fail(op, 'rows', 'a non-negative integer', rows);
  const f = QUANT_FORMATS[type];
  if (!Number.isInteger(K) || K <= 0 || K % f.blockElems !== 0) fail(op, 'K', `a positive multiple of ${type}'s block of ${f.blockElems}`, K);
  if (!(values instanceof Float32Array)) fail(op, 'values', 'a Float32Array', values);
  if (values.length !== rows * K) fail(op, 'values', `${rows} × ${K} = ${rows * K} elements`, `${values.length}`);
  for (let i = 0; i < values.length; i++) {
    if (!Number.isFinite(values[i]!)) fail(op, `values[${i}]`, 'a finite number', values[i]);
  }
  const nBlocks = (rows * K) / f.blockElems;
  const out = new Uint8Array(nBlocks * f.blockBytes);
  const q = QUANTIZERS[type];
  for (let i = 0; i < nBlocks; i++) q(values, i * f.blockElems, out, i * f.blockBytes);
  return out;
}

type BlockQuantizer = (x: Float32Array, xo: number, out: Uint8Array, o: number) => void;

function putF16(out: Uint8Array, o: number, h: number): void {
  if ((h & 0x7c00) === 0x7c00) fail('quantizeRows', 'values', 'magnitudes whose block scale fits an f16 (<= 65504)', 'a scale of Inf');
  out[o] = h & 0xff;
  out[o + 1] = h >> 8;
}

/** C's roundf: to nearest, ties away from zero. */
function roundAway(v: number): number {
  return v < 0 ? -Math.floor(-v + 0.5) : Math.floor(v + 0.5);
}

/** f16 bits of v >= 0 rounded up: the smallest f16 >= v (v finite, below 65504). */
function f16Up(v: number): number {
  let h = f32ToF16Bits(v);
  if (f16BitsToF32(h) < v) h++;
  return h;
}

function quantQ8_0(x: Float32Array, xo: number, out: Uint8Array, o: number): void {
  let amax = 0;
  for (let j = 0; j < 32; j++) amax = Math.max(amax, Math.abs(x[xo + j]!));
  const d = fr(amax / 127);
  const id = d !== 0 ? fr(1 / d) : 0;
  putF16(out, o, f32ToF16Bits(d));
  for (let j = 0; j < 32; j++) out[o + 2 + j] = roundAway(fr(x[xo + j]! * id)) & 0xff;
}

function quantQ4_0(x: Float32Array, xo: number, out: Uint8Array, o: number): void {
  let amax = 0, max = 0;
  for (let j = 0; j < 32; j++) {
    const v = x[xo + j]!;
    if (amax < Math.abs(v)) { amax = Math.abs(v); max = v; }
  }
  const d = fr(max / -8);
  const id = d !== 0 ? fr(1 / d) : 0;
  putF16(out, o, f32ToF16Bits(d));
  for (let j = 0; j < 16; j++) {
    const q0 = Math.min(15, Math.trunc(fr(fr(x[xo + j]! * id) + 8.5)));
    const q1 = Math.min(15, Math.trunc(fr(fr(x[xo + 16 + j]! * id) + 8.5)));
    out[o + 2 + j] = q0 | (q1 << 4);
  }
}

function quantQ4_K(x: Float32Array, xo: number, out: Uint8Array, o: number): void {
  // sub-block ranges: the min offset m >= 0 (w = step·q − m) and the max
  const mins = new Float64Array(8), maxs = new Float64Array(8);
  let maxMin = 0;
  for (let sb = 0; sb < 8; sb++) {
    let lo = 0, hi = 0;
    for (let l = 0; l < 32; l++) {
      const v = x[xo + 32 * sb + l]!;
      if (v < lo) lo = v;
      if (v > hi) hi = v;
    }
    mins[sb] = -lo;
    maxs[sb] = hi;
    if (-lo > maxMin) maxMin = -lo;
  }
  const hMin = maxMin > 0 ? f16Up(maxMin / 63) : 0;
  const dmin = f16BitsToF32(hMin);
  const lm = new Uint8Array(8), steps = new Float64Array(8);
  let maxStep = 0;
  for (let sb = 0; sb < 8; sb++) {
    lm[sb] = dmin > 0 ? Math.min(63, Math.ceil(mins[sb]! / dmin)) : 0;
    const m = fr(dmin * lm[sb]!);
    steps[sb] = (maxs[sb]! + m) / 15;
    if (steps[sb]! > maxStep) maxStep = steps[sb]!;
  }
  const hD = maxStep > 0 ? f16Up(maxStep / 63) : 0;
  const d = f16BitsToF32(hD);
  const ls = new Uint8Array(8);
  for (let sb = 0; sb < 8; sb++) ls[sb] = d > 0 ? Math.min(63, Math.ceil(steps[sb]! / d)) : 0;
  putF16(out, o, hD);
  putF16(out, o + 2, hMin);
  // pack the 6-bit codes (the inverse of scaleMinK4 in reference/quant.ts)
  for (let j = 0; j < 8; j++) {
    if (j < 4) {
      out[o + 4 + j] = ls[j]!;
      out[o + 8 + j] = lm[j]!;
    } else {
      out[o + 8 + j] = (ls[j]! & 0xf) | ((lm[j]! & 0xf) << 4);
      out[o + 4 + j - 4] |= (ls[j]! >> 4) << 6;
      out[o + 4 + j] |= (lm[j]! >> 4) << 6;
    }
  }
  for (let sb = 0; sb < 8; sb++) {
    const dl = fr(d * ls[sb]!), ml = fr(dmin * lm[sb]!);
    const qo = o + 16 + 32 * (sb >> 1), shift = (sb & 1) * 4;
    for (let l = 0; l < 32; l++) {
      const q = dl > 0 ? Math.max(0, Math.min(15, Math.round((x[xo + 32 * sb + l]! + ml) / dl))) : 0;
      out[qo + l] |= q << shift;
    }
  }
}

function quantQ6_K(x: Float32Array, xo: number, out: Uint8Array, o: number): void {
  const s = new Float64Array(16);
  let maxS = 0;
  for (let sb = 0; sb < 16; sb++) {
    let amax = 0;
    for (let l = 0; l < 16; l++) amax = Math.max(amax, Math.abs(x[xo + 16 * sb + l]!));
    s[sb] = amax / 31;
    if (s[sb]! > maxS) maxS = s[sb]!;
  }
  const hD = maxS > 0 ? f16Up(maxS / 127) : 0;
  const d = f16BitsToF32(hD);
  putF16(out, o + 208, hD);
  for (let sb = 0; sb < 16; sb++) {
    const sc = d > 0 ? Math.min(127, Math.ceil(s[sb]! / d)) : 0;
    out[o + 192 + sb] = sc;
    const dl = fr(d * sc);
    for (let l = 0; l < 16; l++) {
      const e = 16 * sb + l;
      const q = (dl > 0 ? Math.max(-32, Math.min(31, Math.round(x[xo + e]! / dl))) : 0) + 32;
      // the inverse of the Q6_K decoder: e = 128·h + 32·g + l'
      const h = e >> 7, g = (e >> 5) & 3, li = e & 31;
      out[o + (h << 6) + li + ((g & 1) << 5)] |= (q & 0xf) << ((g >> 1) * 4);
      out[o + 128 + (h << 5) + li] |= (q >> 4) << (2 * g);
    }
  }
}

const QUANTIZERS: Readonly<Record<QuantizableType, BlockQuantizer>> = {
  Q8_0: quantQ8_0,
  Q4_0: quantQ4_0,
  Q4_K: quantQ4_K,
  Q6_K: quantQ6_K,
};
