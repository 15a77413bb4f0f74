// Host-side dtype definitions and converters (SPEC §1). Dependency-free.
//
// Every float converter first rounds its input to f32 (Math.fround semantics) and then converts
// that f32 value with round-to-nearest, ties-to-even.

export type DType = 'f32' | 'f16' | 'bf16' | 'fp8e4m3' | 'i32' | 'u32';

export const DTYPES: readonly DType[] = Object.freeze([
  'f32',
  'f16',
  'bf16',
  'fp8e4m3',
  'i32',
  'u32',
] as const);

export const DTYPE_BYTES: Readonly<Record<DType, number>> = Object.freeze({
  f32: 4,
  f16: 2,
  bf16: 2,
  fp8e4m3: 1,
  i32: 4,
  u32: 4,
});

export function isFloatDType(d: DType): boolean {
  return d === 'f32' || d === 'f16' || d === 'bf16' || d === 'fp8e4m3';
}

// Shared scratch for f32 <-> u32 bit casts (same element of one buffer: endianness-independent).
const F32 = new Float32Array(1);
const U32 = new Uint32Array(F32.buffer);

// Adding and subtracting 2^52 rounds a double in [0, 2^51] to an integer, ties to even.
const RNE_MAGIC = 4503599627370496;

// ---------------------------------------------------------------------------------------------
// f16 (IEEE binary16)

/** f32 -> f16 bits, RNE; subnormals, overflow -> ±Inf, NaN -> sign | 0x7E00, ±0 keep sign. */
export function f32ToF16Bits(x: number): number {
  F32[0] = x;
  const u = U32[0]!;
  const sign = (u >>> 16) & 0x8000;
  const a = u & 0x7fffffff;
  if (a >= 0x7f800000) return a === 0x7f800000 ? sign | 0x7c00 : sign | 0x7e00;
  if (a >= 0x477ff000) return sign | 0x7c00; // >= 65520: rounds to Inf
  if (a < 0x38800000) {
    // below 2^-14: f16 subnormal (or zero); units of 2^-24, exact scaling in double
    const v = Math.abs(F32[0]!) * 16777216;
    return sign | (v + RNE_MAGIC - RNE_MAGIC);
  }
  // normal: rebias exponent (127 -> 15), keep 10 mantissa bits, RNE on the 13 dropped bits
  let h = (a - 0x38000000) >>> 13;
  const rem = a & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && (h & 1) !== 0)) h++; // carry may bump the exponent
  return sign | h;
}

let F16_TABLE: Float32Array | null = null;
function f16Table(): Float32Array {
  if (F16_TABLE !== null) return F16_TABLE;
  const t = new Float32Array(65536);
  for (let h = 0; h < 65536; h++) {
    const s = h & 0x8000 ? -1 : 1;
    const e = (h >>> 10) & 0x1f;
    const m = h & 0x3ff;
    let v: number;
    if (e === 0) v = m * 5.960464477539063e-8; // 2^-24
    else if (e === 31) v = m === 0 ? Infinity : NaN;
    else v = (1024 + m) * 2 ** (e - 25);
    t[h] = s * v;
  }
  F16_TABLE = t;
  return t;
}

export function f16BitsToF32(h: number): number {
  return f16Table()[h & 0xffff]!;
}

// ---------------------------------------------------------------------------------------------
// bf16

/** f32 -> bf16 bits: RNE on the upper 16 bits; NaN stays a quiet NaN, ±Inf stays, overflow -> ±Inf. */
export function f32ToBf16Bits(x: number): number {
  F32[0] = x;
  const u = U32[0]!;
  if ((u & 0x7fffffff) > 0x7f800000) return (u >>> 16) | 0x0040; // quiet NaN, sign kept
  // u + 0x7FFF + lsb < 2^32 for every non-NaN u, so the double sum is exact
  return (u + 0x7fff + ((u >>> 16) & 1)) >>> 16;
}

export function bf16BitsToF32(b: number): number {
  U32[0] = (b & 0xffff) << 16;
  return F32[0]!;
}

// ---------------------------------------------------------------------------------------------
// fp8 e4m3 (OCP E4M3FN): bias 7, no Inf, S.1111.111 = NaN, max 448, min normal 2^-6, min subnormal 2^-9

/** f32 -> fp8 e4m3fn bits, RNE, saturating: |x| >= 448 (incl. ±Inf) -> ±448; NaN -> 0x7F. */
export function f32ToFp8e4m3Bits(x: number): number {
  F32[0] = x;
  const u = U32[0]!;
  const sign = (u >>> 24) & 0x80;
  const a = u & 0x7fffffff;
  if (a > 0x7f800000) return 0x7f;
  if (a >= 0x43e00000) return sign | 0x7e; // >= 448 (and Inf): saturate
  if (a < 0x3c800000) {
    // below 2^-6: subnormal (or zero); units of 2^-9
    const v = Math.abs(F32[0]!) * 512;
    return sign | (v + RNE_MAGIC - RNE_MAGIC);
  }
  // normal: rebias exponent (127 -> 7), keep 3 mantissa bits, RNE on the 20 dropped bits
  let r = (a - 0x3c000000) >>> 20;
  const rem = a & 0xfffff;
  if (rem > 0x80000 || (rem === 0x80000 && (r & 1) !== 0)) r++; // a < 448 so r <= 0x7E
  return sign | r;
}

const FP8_TABLE: Float32Array = (() => {
  const t = new Float32Array(256);
  for (let b = 0; b < 256; b++) {
    const s = b & 0x80 ? -1 : 1;
    const e = (b >>> 3) & 0xf;
    const m = b & 7;
    let v: number;
    if (e === 0) v = m * 2 ** -9;
    else if (e === 15 && m === 7) v = NaN;
    else v = (8 + m) * 2 ** (e - 10);
    t[b] = s * v;
  }
  return t;
})();

export function fp8e4m3BitsToF32(b: number): number {
  return FP8_TABLE[b & 0xff]!;
}

// ---------------------------------------------------------------------------------------------
// array converters

export function encodeF16(src: ArrayLike<number>): Uint16Array {
  const n = src.length;
  const out = new Uint16Array(n);
  for (let i = 0; i < n; i++) out[i] = f32ToF16Bits(src[i]!);
  return out;
}

export function encodeBf16(src: ArrayLike<number>): Uint16Array {
  const n = src.length;
  const out = new Uint16Array(n);
  for (let i = 0; i < n; i++) out[i] = f32ToBf16Bits(src[i]!);
  return out;
}

export function encodeFp8e4m3(src: ArrayLike<number>): Uint8Array {
  const n = src.length;
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i++) out[i] = f32ToFp8e4m3Bits(src[i]!);
  return out;
}

export function decodeF16(src: Uint16Array): Float32Array {
  const t = f16Table();
  const n = src.length;
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = t[src[i]!]!;
  return out;
}

export function decodeBf16(src: Uint16Array): Float32Array {
  const n = src.length;
  const out = new Float32Array(n);
  const bits = new Uint32Array(out.buffer);
  for (let i = 0; i < n; i++) bits[i] = src[i]! << 16;
  return out;
}

export function decodeFp8e4m3(src: Uint8Array): Float32Array {
  const n = src.length;
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = FP8_TABLE[src[i]!]!;
  return out;
}

/**
 * Quantize then dequantize: the exact values a tensor of `dtype` holds for `src`.
 * Floats round as the converters above. i32/u32 follow typed-array assignment (ToInt32 / ToUint32:
 * truncate toward zero, wrap modulo 2^32); the result is returned as f32, so integers beyond 2^24
 * are rounded again by the f32 store.
 */
export function roundToDType(src: ArrayLike<number>, dtype: DType): Float32Array {
  const n = src.length;
  const out = new Float32Array(n);
  switch (dtype) {
    case 'f32':
      for (let i = 0; i < n; i++) out[i] = src[i]!;
      break;
    case 'f16': {
      const t = f16Table();
      for (let i = 0; i < n; i++) out[i] = t[f32ToF16Bits(src[i]!)]!;
      break;
    }
    case 'bf16': {
      const bits = new Uint32Array(out.buffer);
      for (let i = 0; i < n; i++) bits[i] = f32ToBf16Bits(src[i]!) << 16;
      break;
    }
    case 'fp8e4m3':
      for (let i = 0; i < n; i++) out[i] = FP8_TABLE[f32ToFp8e4m3Bits(src[i]!)]!;
      break;
    case 'i32':
      for (let i = 0; i < n; i++) out[i] = src[i]! | 0;
      break;
    case 'u32':
      for (let i = 0; i < n; i++) out[i] = src[i]! >>> 0;
      break;
    default: {
      const never: never = dtype;
      throw new Error(`roundToDType: unknown dtype ${String(never)}`);
    }
  }
  return out;
}

/** The code of each storage dtype in the kernels' IN_DTYPE/OUT_DTYPE/KV_DTYPE overrides (core/dtype.wgsl;
 *  fp8e4m3 for caches only). */
export const DTYPE_CODE: Readonly<Record<string, number>> = { f32: 0, f16: 1, bf16: 2, fp8e4m3: 3 };
