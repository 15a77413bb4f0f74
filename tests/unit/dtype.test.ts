import { describe, it, expect } from 'vitest';
import {
  DTYPES,
  DTYPE_BYTES,
  isFloatDType,
  f32ToF16Bits,
  f16BitsToF32,
  f32ToBf16Bits,
  bf16BitsToF32,
  f32ToFp8e4m3Bits,
  fp8e4m3BitsToF32,
  encodeF16,
  encodeBf16,
  encodeFp8e4m3,
  decodeF16,
  decodeBf16,
  decodeFp8e4m3,
  roundToDType,
} from '../../src/core/dtype';

import { rng } from '../../src/core/random';

// ---- helpers ------------------------------------------------------------------------------


const sf = new Float32Array(1);
const su = new Uint32Array(sf.buffer);
function bitsToF32(u: number): number {
  su[0] = u >>> 0;
  return sf[0]!;
}
function f32Bits(x: number): number {
  sf[0] = x;
  return su[0]!;
}

/** Reference f16 decode by formula. */
function refF16Value(h: number): number {
  const s = h & 0x8000 ? -1 : 1;
  const e = (h >> 10) & 31;
  const m = h & 1023;
  if (e === 0) return s * m * Math.pow(2, -24);
  if (e === 31) return m ? NaN : s * Infinity;
  return s * (1 + m / 1024) * Math.pow(2, e - 15);
}

/** Slow reference f32 -> f16 bits: pick the nearer of the two neighbours, ties to even mantissa. */
function refF32ToF16Bits(x0: number): number {
  const x = Math.fround(x0);
  if (Number.isNaN(x)) return 0x7e00;
  const sign = x < 0 || Object.is(x, -0) ? 0x8000 : 0;
  const a = Math.abs(x);
  if (a === Infinity) return sign | 0x7c00;
  // exponent of a, clamped to the normal range's bottom (subnormals share 2^-14's ulp)
  let e = -14;
  while (e < 15 && Math.pow(2, e + 1) <= a) e++;
  const ulp = Math.pow(2, e - 10);
  const k = Math.floor(a / ulp); // a / ulp is exact (power-of-two scaling)
  const lo = k * ulp;
  const hi = (k + 1) * ulp;
  let q: number; // chosen integer multiple of ulp
  if (a - lo < hi - a) q = k;
  else if (a - lo > hi - a) q = k + 1;
  else q = k % 2 === 0 ? k : k + 1;
  const v = q * ulp;
  if (v > 65504) return sign | 0x7c00;
  if (v < Math.pow(2, -14)) return sign | (v / Math.pow(2, -24));
  let ev = -14;
  while (Math.pow(2, ev + 1) <= v) ev++;
  const m = (v / Math.pow(2, ev) - 1) * 1024;
  return sign | ((ev + 15) << 10) | m;
}

/** Reference fp8 e4m3fn value by formula. */
function refFp8Value(b: number): number {
  const s = b & 0x80 ? -1 : 1;
  const e = (b >> 3) & 15;
  const m = b & 7;
  if (e === 15 && m === 7) return NaN;
  if (e === 0) return s * m * Math.pow(2, -9);
  return s * (1 + m / 8) * Math.pow(2, e - 7);
}

/** Slow reference f32 -> fp8: brute-force nearest of all non-negative codes, ties to even code, saturating. */
function refF32ToFp8(x0: number): number {
  const x = Math.fround(x0);
  if (Number.isNaN(x)) return 0x7f;
  const sign = x < 0 || Object.is(x, -0) ? 0x80 : 0;
  const a = Math.min(Math.abs(x), 448);
  let best = 0;
  let bestD = Infinity;
  for (let c = 0; c <= 0x7e; c++) {
    const d = Math.abs(refFp8Value(c) - a);
    if (d < bestD || (d === bestD && (c & 1) === 0)) {
      best = c;
      bestD = d;
    }
  }
  return sign | best;
}

/** Slow reference f32 -> bf16 via double arithmetic on the truncated neighbours. */
function refF32ToBf16(x0: number): number {
  const x = Math.fround(x0);
  const u = f32Bits(x);
  if (Number.isNaN(x)) return -1; // checked separately
  const loBits = u >>> 16;
  const lo = bitsToF32(loBits << 16);
  const hiBits = loBits + 1;
  const hi = bitsToF32(hiBits << 16); // may be Inf (0x7F80) or the next binade
  if (!Number.isFinite(lo)) return loBits; // ±Inf
  const dl = Math.abs(x - lo);
  // distance to hi computed without Inf: hi's magnitude as the ideal value 2^128 when it overflows
  const hiVal = Number.isFinite(hi) ? hi : Math.sign(lo) * Math.pow(2, 128);
  const dh = Math.abs(hiVal - x);
  if (dl < dh) return loBits;
  if (dl > dh) return hiBits;
  return (loBits & 1) === 0 ? loBits : hiBits;
}

// ---- tests --------------------------------------------------------------------------------

describe('dtype table', () => {
  it('sizes and kinds', () => {
    expect(DTYPES).toEqual(['f32', 'f16', 'bf16', 'fp8e4m3', 'i32', 'u32']);
    expect(DTYPES.map((d) => DTYPE_BYTES[d])).toEqual([4, 2, 2, 1, 4, 4]);
    expect(DTYPES.filter(isFloatDType)).toEqual(['f32', 'f16', 'bf16', 'fp8e4m3']);
  });
});

describe('f16', () => {
  it('known bit patterns', () => {
    expect(f32ToF16Bits(1)).toBe(0x3c00);
    expect(f32ToF16Bits(-2)).toBe(0xc000);
    expect(f32ToF16Bits(0.5)).toBe(0x3800);
    expect(f32ToF16Bits(65504)).toBe(0x7bff);
    expect(f32ToF16Bits(65520)).toBe(0x7c00);
    expect(f32ToF16Bits(65519.99)).toBe(0x7bff);
    expect(f32ToF16Bits(-65520)).toBe(0xfc00);
    expect(f32ToF16Bits(1e6)).toBe(0x7c00);
    expect(f32ToF16Bits(Infinity)).toBe(0x7c00);
    expect(f32ToF16Bits(-Infinity)).toBe(0xfc00);
    expect(f32ToF16Bits(2 ** -14)).toBe(0x0400); // min normal
    expect(f32ToF16Bits(2 ** -14 - 2 ** -24)).toBe(0x03ff); // max subnormal
    expect(f32ToF16Bits(2 ** -24)).toBe(0x0001); // min subnormal
    expect(f32ToF16Bits(2 ** -25)).toBe(0x0000); // tie -> even (0)
    expect(f32ToF16Bits(-(2 ** -25))).toBe(0x8000);
    expect(f32ToF16Bits(2 ** -25 + 2 ** -40)).toBe(0x0001);
    expect(f32ToF16Bits(3 * 2 ** -26)).toBe(0x0001);
    expect(f32ToF16Bits(3 * 2 ** -25)).toBe(0x0002); // 1.5 * 2^-24 tie -> even 2
    expect(f32ToF16Bits(2 ** -14 - 2 ** -25)).toBe(0x0400); // subnormal tie carries into normal
    expect(f32ToF16Bits(1e-10)).toBe(0x0000);
    expect(f32ToF16Bits(0)).toBe(0x0000);
    expect(f32ToF16Bits(-0)).toBe(0x8000);
    expect(f32ToF16Bits(1 + 2 ** -11)).toBe(0x3c00); // tie -> even
    expect(f32ToF16Bits(1 + 3 * 2 ** -11)).toBe(0x3c02); // tie -> even (up)
    expect(f32ToF16Bits(1 + 2 ** -11 + 2 ** -20)).toBe(0x3c01);
    expect(f32ToF16Bits(2 - 2 ** -12)).toBe(0x4000); // rounding carries into the exponent
    const nan = f32ToF16Bits(NaN);
    expect(nan & 0x7e00).toBe(0x7e00);
    expect(Number.isNaN(f16BitsToF32(nan))).toBe(true);
  });

  it('decodes known patterns', () => {
    expect(f16BitsToF32(0x3c00)).toBe(1);
    expect(f16BitsToF32(0xc000)).toBe(-2);
    expect(f16BitsToF32(0x7bff)).toBe(65504);
    expect(f16BitsToF32(0x0001)).toBe(2 ** -24);
    expect(f16BitsToF32(0x03ff)).toBe(1023 * 2 ** -24);
    expect(f16BitsToF32(0x7c00)).toBe(Infinity);
    expect(f16BitsToF32(0xfc00)).toBe(-Infinity);
    expect(Object.is(f16BitsToF32(0x8000), -0)).toBe(true);
    expect(Number.isNaN(f16BitsToF32(0x7e00))).toBe(true);
    expect(Number.isNaN(f16BitsToF32(0x7c01))).toBe(true);
    expect(Number.isNaN(f16BitsToF32(0xfe00))).toBe(true);
  });

  it('exhaustive: all 65536 patterns decode as the formula and non-NaN ones round-trip', () => {
    const all = new Uint16Array(65536);
    for (let h = 0; h < 65536; h++) all[h] = h;
    const dec = decodeF16(all);
    const enc = encodeF16(dec);
    let bad = 0;
    for (let h = 0; h < 65536; h++) {
      const ref = refF16Value(h);
      const v = f16BitsToF32(h);
      if (Number.isNaN(ref)) {
        if (!Number.isNaN(v) || !Number.isNaN(dec[h]!)) bad++;
        if ((f32ToF16Bits(v) & 0x7fff) !== 0x7e00) bad++;
        continue;
      }
      if (!Object.is(v, ref) || !Object.is(dec[h]!, ref)) bad++;
      if (f32ToF16Bits(v) !== h || enc[h] !== h) bad++;
    }
    expect(bad).toBe(0);
  });

  it('randomized f32 -> f16 matches slow reference rounding', () => {
    const rnd = rng(0x5eed1234);
    let bad = 0;
    const fails: string[] = [];
    const check = (x: number): void => {
      const got = f32ToF16Bits(x);
      const want = refF32ToF16Bits(x);
      if (got !== want) {
        bad++;
        if (fails.length < 5) fails.push(`${x}: got ${got.toString(16)} want ${want.toString(16)}`);
      }
    };
    for (let i = 0; i < 200000; i++) {
      // random f32 with exponent spread over and around the f16 range
      const sign = rnd() < 0.5 ? 0x80000000 : 0;
      const exp = 127 - 30 + Math.floor(rnd() * 50); // 2^-30 .. 2^19
      const mant = Math.floor(rnd() * 0x800000);
      const x = bitsToF32(sign | (exp << 23) | mant);
      if (Number.isFinite(x)) check(x);
      // exact ties and near-ties between adjacent f16 values
      const h = Math.floor(rnd() * 0x7bff);
      const lo = refF16Value(h);
      const hi = refF16Value(h + 1);
      const mid = (lo + hi) / 2;
      check(mid);
      check(-mid);
      check(Math.fround(mid) === mid ? bitsToF32(f32Bits(mid) + 1) : mid);
      check(Math.fround(mid) === mid ? bitsToF32(f32Bits(mid) - 1) : mid);
    }
    expect(fails).toEqual([]);
    expect(bad).toBe(0);
  });
});

describe('bf16', () => {
  it('known bit patterns', () => {
    expect(f32ToBf16Bits(1)).toBe(0x3f80);
    expect(f32ToBf16Bits(-2)).toBe(0xc000);
    expect(f32ToBf16Bits(0)).toBe(0x0000);
    expect(f32ToBf16Bits(-0)).toBe(0x8000);
    // ties: 1 + 2^-8 is halfway between 1 (0x3F80) and 1 + 2^-7 (0x3F81) -> even 0x3F80
    expect(f32ToBf16Bits(1 + 2 ** -8)).toBe(0x3f80);
    // 1 + 3*2^-8 halfway between 0x3F81 and 0x3F82 -> even 0x3F82
    expect(f32ToBf16Bits(1 + 3 * 2 ** -8)).toBe(0x3f82);
    expect(f32ToBf16Bits(1 + 2 ** -8 + 2 ** -20)).toBe(0x3f81);
    expect(f32ToBf16Bits(bitsToF32(0x3f80_7fff))).toBe(0x3f80);
    expect(f32ToBf16Bits(bitsToF32(0x3f80_8000))).toBe(0x3f80);
    expect(f32ToBf16Bits(bitsToF32(0x3f81_8000))).toBe(0x3f82);
    expect(f32ToBf16Bits(bitsToF32(0x3fff_8000))).toBe(0x4000); // carry into exponent
    // largest finite bf16 0x7F7F = 3.3895e38; f32 values at/above the tie with 2^128 round to Inf
    expect(f32ToBf16Bits(bitsToF32(0x7f7f_0000))).toBe(0x7f7f);
    expect(f32ToBf16Bits(bitsToF32(0x7f7f_7fff))).toBe(0x7f7f);
    expect(f32ToBf16Bits(bitsToF32(0x7f7f_8000))).toBe(0x7f80); // 3.3961e38: tie, odd -> Inf
    expect(f32ToBf16Bits(3.4e38)).toBe(0x7f80);
    expect(f32ToBf16Bits(-3.4e38)).toBe(0xff80);
    expect(f32ToBf16Bits(Infinity)).toBe(0x7f80);
    expect(f32ToBf16Bits(-Infinity)).toBe(0xff80);
    // subnormal tie
    expect(f32ToBf16Bits(bitsToF32(0x0000_8000))).toBe(0x0000);
    expect(f32ToBf16Bits(bitsToF32(0x0001_8000))).toBe(0x0002);
  });

  it('NaN stays a quiet NaN, never Inf', () => {
    for (const u of [0x7fc00000, 0x7f800001, 0x7fffffff, 0xffc00000, 0xff800001, 0x7f80ffff]) {
      const b = f32ToBf16Bits(bitsToF32(u));
      expect((b & 0x7f80) === 0x7f80 && (b & 0x7f) !== 0).toBe(true);
      expect(b & 0x0040).toBe(0x0040);
      expect(Number.isNaN(bf16BitsToF32(b))).toBe(true);
    }
    expect(Number.isNaN(bf16BitsToF32(f32ToBf16Bits(NaN)))).toBe(true);
  });

  it('decodes and round-trips all non-NaN patterns', () => {
    const all = new Uint16Array(65536);
    for (let b = 0; b < 65536; b++) all[b] = b;
    const dec = decodeBf16(all);
    const enc = encodeBf16(dec);
    let bad = 0;
    for (let b = 0; b < 65536; b++) {
      const v = bf16BitsToF32(b);
      if (!Object.is(v, bitsToF32(b << 16)) || !Object.is(dec[b]!, v)) bad++;
      if (Number.isNaN(v)) continue;
      if (f32ToBf16Bits(v) !== b || enc[b] !== b) bad++;
    }
    expect(bad).toBe(0);
    expect(bf16BitsToF32(0x3f80)).toBe(1);
  });

  it('randomized f32 -> bf16 matches slow reference', () => {
    const rnd = rng(77);
    let bad = 0;
    for (let i = 0; i < 200000; i++) {
      const u = Math.floor(rnd() * 4294967296) >>> 0;
      const x = bitsToF32(rnd() < 0.25 ? (u & 0xffff0000) | 0x8000 : u); // many exact ties
      if (Number.isNaN(x)) continue;
      if (f32ToBf16Bits(x) !== refF32ToBf16(x)) bad++;
    }
    expect(bad).toBe(0);
  });
});

describe('fp8 e4m3fn', () => {
  it("every code but NaN, read as f16 bits (exponent and mantissa moved into f16's fields), is its value / 256 exactly: MLA's matrix tile stages fp8_ds_mla rows so (mla_mma_core.wgsl e4m3x2_f16)", () => {
    let checked = 0;
    for (let c = 0; c < 256; c++) {
      if ((c & 0x7f) === 0x7f) continue;
      expect(f16BitsToF32(((c & 0x7f) << 7) | ((c & 0x80) << 8)) * 256, `code 0x${c.toString(16)}`).toBe(fp8e4m3BitsToF32(c));
      checked++;
    }
    expect(checked).toBe(254);
  });

  it('known bit patterns', () => {
    expect(f32ToFp8e4m3Bits(1)).toBe(0x38);
    expect(f32ToFp8e4m3Bits(-1)).toBe(0xb8);
    expect(f32ToFp8e4m3Bits(448)).toBe(0x7e);
    expect(f32ToFp8e4m3Bits(-448)).toBe(0xfe);
    expect(f32ToFp8e4m3Bits(416)).toBe(0x7d);
    expect(f32ToFp8e4m3Bits(432)).toBe(0x7e); // tie 416/448 -> even 0x7E
    expect(f32ToFp8e4m3Bits(450)).toBe(0x7e);
    expect(f32ToFp8e4m3Bits(463.9)).toBe(0x7e);
    expect(f32ToFp8e4m3Bits(464)).toBe(0x7e);
    expect(f32ToFp8e4m3Bits(480)).toBe(0x7e);
    expect(f32ToFp8e4m3Bits(1e9)).toBe(0x7e);
    expect(f32ToFp8e4m3Bits(Infinity)).toBe(0x7e);
    expect(f32ToFp8e4m3Bits(-Infinity)).toBe(0xfe);
    expect(f32ToFp8e4m3Bits(-1e9)).toBe(0xfe);
    expect(f32ToFp8e4m3Bits(NaN)).toBe(0x7f);
    expect(f32ToFp8e4m3Bits(-NaN)).toBe(0x7f);
    expect(f32ToFp8e4m3Bits(2 ** -6)).toBe(0x08); // min normal
    expect(f32ToFp8e4m3Bits(7 * 2 ** -9)).toBe(0x07); // max subnormal
    expect(f32ToFp8e4m3Bits(7.5 * 2 ** -9)).toBe(0x08); // subnormal tie carries into normal
    expect(f32ToFp8e4m3Bits(2 ** -9)).toBe(0x01); // min subnormal
    expect(f32ToFp8e4m3Bits(2 ** -10)).toBe(0x00); // tie -> even (0)
    expect(f32ToFp8e4m3Bits(-(2 ** -10))).toBe(0x80);
    expect(f32ToFp8e4m3Bits(2 ** -10 + 2 ** -30)).toBe(0x01);
    expect(f32ToFp8e4m3Bits(2 ** -10 - 2 ** -30)).toBe(0x00);
    expect(f32ToFp8e4m3Bits(3 * 2 ** -10)).toBe(0x02); // 1.5 * 2^-9 tie -> even 2
    expect(f32ToFp8e4m3Bits(1.0625)).toBe(0x38); // tie 1 / 1.125 -> even
    expect(f32ToFp8e4m3Bits(1.1875)).toBe(0x3a); // tie 1.125 / 1.25 -> even
    expect(f32ToFp8e4m3Bits(1.07)).toBe(0x39);
    expect(f32ToFp8e4m3Bits(1.9375)).toBe(0x40); // tie 1.875 / 2 -> carries into exponent
    expect(f32ToFp8e4m3Bits(0)).toBe(0x00);
    expect(f32ToFp8e4m3Bits(-0)).toBe(0x80);
    expect(f32ToFp8e4m3Bits(1e-30)).toBe(0x00);
  });

  it('decodes known patterns', () => {
    expect(fp8e4m3BitsToF32(0x38)).toBe(1);
    expect(fp8e4m3BitsToF32(0x7e)).toBe(448);
    expect(fp8e4m3BitsToF32(0xfe)).toBe(-448);
    expect(fp8e4m3BitsToF32(0x08)).toBe(2 ** -6);
    expect(fp8e4m3BitsToF32(0x01)).toBe(2 ** -9);
    expect(fp8e4m3BitsToF32(0x78)).toBe(256);
    expect(Object.is(fp8e4m3BitsToF32(0x80), -0)).toBe(true);
    expect(Number.isNaN(fp8e4m3BitsToF32(0x7f))).toBe(true);
    expect(Number.isNaN(fp8e4m3BitsToF32(0xff))).toBe(true);
  });

  it('exhaustive: all 256 patterns decode as the formula and round-trip', () => {
    const all = new Uint8Array(256);
    for (let b = 0; b < 256; b++) all[b] = b;
    const dec = decodeFp8e4m3(all);
    const enc = encodeFp8e4m3(dec);
    for (let b = 0; b < 256; b++) {
      const ref = refFp8Value(b);
      expect(Object.is(fp8e4m3BitsToF32(b), ref) || (Number.isNaN(ref) && Number.isNaN(dec[b]!))).toBe(true);
      if (Number.isNaN(ref)) {
        expect(enc[b]).toBe(0x7f);
        continue;
      }
      expect(Object.is(dec[b]!, ref)).toBe(true);
      expect(f32ToFp8e4m3Bits(ref)).toBe(b);
      expect(enc[b]).toBe(b);
    }
  });

  it('randomized and all midpoints match brute-force nearest code', () => {
    const rnd = rng(4242);
    let bad = 0;
    const xs: number[] = [];
    for (let c = 0; c < 0x7e; c++) {
      const mid = (refFp8Value(c) + refFp8Value(c + 1)) / 2;
      xs.push(mid, -mid, bitsToF32(f32Bits(mid) + 1), bitsToF32(f32Bits(mid) - 1));
    }
    for (let i = 0; i < 50000; i++) {
      const sign = rnd() < 0.5 ? 0x80000000 : 0;
      const exp = 127 - 14 + Math.floor(rnd() * 25); // 2^-14 .. 2^10
      xs.push(bitsToF32(sign | (exp << 23) | Math.floor(rnd() * 0x800000)));
    }
    for (const x of xs) if (f32ToFp8e4m3Bits(x) !== refF32ToFp8(x)) bad++;
    expect(bad).toBe(0);
  });
});

describe('arrays and roundToDType', () => {
  it('array converters agree with scalar ones', () => {
    const src = [0, -0, 1, -2.5, 0.1, 1e-7, 70000, -448.5, NaN, Infinity, 3.14159];
    expect(Array.from(encodeF16(src))).toEqual(src.map(f32ToF16Bits));
    expect(Array.from(encodeBf16(src))).toEqual(src.map(f32ToBf16Bits));
    expect(Array.from(encodeFp8e4m3(src))).toEqual(src.map(f32ToFp8e4m3Bits));
  });

  it('roundToDType gives the values each dtype holds', () => {
    const src = [0.1, -1.0625, 1 + 2 ** -11, 500, 2 ** -25, 3.7, -3.7, 1e10];
    expect(Array.from(roundToDType(src, 'f32'))).toEqual(src.map(Math.fround));
    expect(Array.from(roundToDType(src, 'f16'))).toEqual(src.map((x) => f16BitsToF32(f32ToF16Bits(x))));
    expect(Array.from(roundToDType(src, 'bf16'))).toEqual(src.map((x) => bf16BitsToF32(f32ToBf16Bits(x))));
    expect(Array.from(roundToDType(src, 'fp8e4m3'))).toEqual(
      src.map((x) => fp8e4m3BitsToF32(f32ToFp8e4m3Bits(x))),
    );
    expect(Array.from(roundToDType(src, 'i32'))).toEqual(Array.from(new Float32Array(new Int32Array(src))));
    expect(Array.from(roundToDType(src, 'u32'))).toEqual(Array.from(new Float32Array(new Uint32Array(src))));
    const f16 = roundToDType([0.1], 'f16')[0]!;
    expect(f16).toBe(f16BitsToF32(0x2e66));
    expect(roundToDType([500], 'fp8e4m3')[0]).toBe(448);
    expect(Number.isNaN(roundToDType([NaN], 'bf16')[0]!)).toBe(true);
  });
});
