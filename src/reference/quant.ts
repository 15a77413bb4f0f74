// Host-side dequantization of ggml's block formats (SPEC §8): the exact values ggml's dequantize_row_*
// (ggml-quants.c) gives for the bytes a GGUF file stores, layouts as in ggml-common.h's block_* structs.
// The reference every quantized kernel is checked against: weights here, then linearRef on them.
//
// Exactness. ggml dequantizes in f32. In every format each product it forms is exact in f32 (an f16
// scale has 11 significant bits, a sub-block scale at most 8, a quant at most 7: no product needs more
// than 24), so its result is the exact value, or for the formats with a min (Q4_1, Q5_1, Q2_K, Q4_K,
// Q5_K) the exact difference rounded once to f32. Here the same expression is evaluated in float64 (where
// it is exact: a double holds every such product and, as 53 >= 2·24 + 2, rounding the double difference to
// f32 equals rounding the exact one) and rounded once with Math.fround: bit for bit ggml's float, also
// when a compiler fuses `d·q − m` into an FMA (the product is exact either way).
//
// Element order. A row of K values is K / blockElems consecutive blocks; within a block the order is
// ggml's: the 32-value formats hold elements j (low nibble) and j + 16 (high nibble) in byte j; the
// K-quants walk their quants in the interleaved orders spelled out at each decoder below.
import { IQ4_NL_VALUES, MXFP4_VALUES, QUANT_FORMATS, e4m3ToF32, isQuantType, type GroupFormat, type QuantType } from '../core/quant.js';
import { bf16BitsToF32, f16BitsToF32 } from '../core/dtype.js';
import { WebinferError, fail } from '../core/errors.js';

/** A type dequantizeRows reads: a quantized type or one of the plain float types GGUF stores. */
export type DequantType = QuantType | 'F32' | 'F16' | 'BF16';

const PLAIN_BYTES: Readonly<Record<'F32' | 'F16' | 'BF16', number>> = { F32: 4, F16: 2, BF16: 2 };

/** True for the types dequantizeRows knows. */
export function isDequantType(t: unknown): t is DequantType {
  return t === 'F32' || t === 'F16' || t === 'BF16' || isQuantType(t);
}

/** Elements and bytes of one block of `type` (1 element for the plain float types). */
export function quantBlockShape(type: DequantType): { elems: number; bytes: number } {
  if (type === 'F32' || type === 'F16' || type === 'BF16') return { elems: 1, bytes: PLAIN_BYTES[type] };
  const f = QUANT_FORMATS[type];
  return { elems: f.blockElems, bytes: f.blockBytes };
}

/** Bytes of `rows` rows of K values of `type`; throws a WebinferError when K is not a whole number of blocks. */
export function quantRowsBytes(type: DequantType, rows: number, K: number, op = 'quantRowsBytes'): number {
  if (!isDequantType(type)) fail(op, 'type', `one of F32, F16, BF16, ${Object.keys(QUANT_FORMATS).join(', ')}`, String(type));
  if (!Number.isInteger(rows) || rows < 0) fail(op, 'rows', 'a non-negative integer', rows);
  if (!Number.isInteger(K) || K <= 0) fail(op, 'K', 'a positive integer', K);
  const { elems, bytes } = quantBlockShape(type);
  if (K % elems !== 0) fail(op, 'K', `a multiple of ${type}'s block of ${elems} values`, K);
  return rows * (K / elems) * bytes;
}

// ---------------------------------------------------------------------------------------------
// small readers

const f16At = (b: Uint8Array, o: number): number => f16BitsToF32(b[o]! | (b[o + 1]! << 8));
const i8 = (v: number): number => (v << 24) >> 24;

/** ggml_e8m0_to_fp32_half: 2^(e − 128), half the E8M0 scale 2^(e − 127) (MXFP4_VALUES are doubled to
 *  match). For e = 0 and 1 ggml builds the f32 subnormals 2^-128 and 2^-127: the same formula. */
export function e8m0ToF32Half(e: number): number {
  return 2 ** ((e & 0xff) - 128);
}

/** ggml's get_scale_min_k4: the 6-bit scale and min of sub-block j (0..7) of a Q4_K/Q5_K block, from the
 *  12 packed bytes at `o`. Sub-blocks 0-3 keep theirs in the low 6 bits of bytes j (scale) and j + 4
 *  (min); sub-blocks 4-7 in the nibbles of byte j + 4 (scale low, min high) with their top 2 bits in the
 *  top bits of bytes j − 4 (scale) and j (min). */
export function scaleMinK4(b: Uint8Array, o: number, j: number): [scale: number, min: number] {
  if (j < 4) return [b[o + j]! & 63, b[o + j + 4]! & 63];
  return [(b[o + j + 4]! & 0xf) | ((b[o + j - 4]! >> 6) << 4), (b[o + j + 4]! >> 4) | ((b[o + j]! >> 6) << 4)];
}

/** Q3_K's 16 signed 6-bit sub-block scales (already minus 32) from the 12 packed bytes at `o`: low nibbles
 *  in bytes 0-7 (scales 0-7 the low nibble, 8-15 the high nibble of byte is mod 8), top 2 bits in bytes
 *  8-11 (scale is: byte 8 + is mod 4, bits 2·⌊is/4⌋). */
export function q3kScales(b: Uint8Array, o: number, out: Int32Array = new Int32Array(16)): Int32Array {
  for (let is = 0; is < 16; is++) {
    const lo = is < 8 ? b[o + is]! & 0xf : b[o + is - 8]! >> 4;
    const hi = (b[o + 8 + (is & 3)]! >> (2 * (is >> 2))) & 3;
    out[is] = (lo | (hi << 4)) - 32;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// one block

/**
 * Dequantizes the block of `type` at bytes[o ..] into out[y .. y + blockElems). Values are ggml's f32
 * results (see the header). For the plain types a "block" is one element.
 */
export function dequantizeBlock(type: DequantType, b: Uint8Array, o: number, out: Float64Array | Float32Array, y: number): void {
  const r = Math.fround;
  switch (type) {
    case 'F32': {
      const u = (b[o]! | (b[o + 1]! << 8) | (b[o + 2]! << 16) | (b[o + 3]! << 24)) >>> 0;
      out[y] = f32FromBits(u);
      return;
    }
    case 'F16': out[y] = f16At(b, o); return;
    case 'BF16': out[y] = bf16BitsToF32(b[o]! | (b[o + 1]! << 8)); return;

    case 'Q8_0': { // d f16 | qs[32] int8: w = d·q
      const d = f16At(b, o);
      for (let j = 0; j < 32; j++) out[y + j] = d * i8(b[o + 2 + j]!);
      return;
    }
    case 'Q4_0': { // d | qs[16]: byte j holds elements j (low nibble) and j + 16 (high); w = d·(q − 8)
      const d = f16At(b, o);
      for (let j = 0; j < 16; j++) {
        const q = b[o + 2 + j]!;
        out[y + j] = d * ((q & 0xf) - 8);
        out[y + j + 16] = d * ((q >> 4) - 8);
      }
      return;
    }
    case 'Q4_1': { // d | m | qs[16]: w = d·q + m
      const d = f16At(b, o), m = f16At(b, o + 2);
      for (let j = 0; j < 16; j++) {
        const q = b[o + 4 + j]!;
        out[y + j] = r(d * (q & 0xf) + m);
        out[y + j + 16] = r(d * (q >> 4) + m);
      }
      return;
    }
    case 'Q5_0': // d | qh u32 | qs[16]: bit e of qh is element e's fifth bit; w = d·(q − 16)
    case 'Q5_1': { // d | m | qh | qs[16]: w = d·q + m
      const one = type === 'Q5_0';
      const d = f16At(b, o), m = one ? 0 : f16At(b, o + 2);
      const h = one ? o + 2 : o + 4, qs = h + 4;
      const qh = (b[h]! | (b[h + 1]! << 8) | (b[h + 2]! << 16) | (b[h + 3]! << 24)) >>> 0;
      for (let j = 0; j < 16; j++) {
        const q = b[qs + j]!;
        const q0 = (q & 0xf) | (((qh >>> j) & 1) << 4);
        const q1 = (q >> 4) | (((qh >>> (j + 16)) & 1) << 4);
        if (one) {
          out[y + j] = d * (q0 - 16);
          out[y + j + 16] = d * (q1 - 16);
        } else {
          out[y + j] = r(d * q0 + m);
          out[y + j + 16] = r(d * q1 + m);
        }
      }
      return;
    }
    case 'Q2_K': {
      // scales[16] (low nibble: scale, high: min) | qs[64] | d | dmin. Element e = 128·h + 32·j + l
      // (h half, j 0..3, l 0..31) is bits 2j..2j+1 of qs[32·h + l]; sub-block e >> 4 has scale byte e >> 4.
      // w = d·sc·q − dmin·m.
      const d = f16At(b, o + 80), dmin = f16At(b, o + 82);
      for (let e = 0; e < 256; e++) {
        const sc = b[o + (e >> 4)]!;
        const q = (b[o + 16 + ((e >> 7) << 5) + (e & 31)]! >> (2 * ((e >> 5) & 3))) & 3;
        out[y + e] = r(d * (sc & 0xf) * q - dmin * (sc >> 4));
      }
      return;
    }
    case 'Q3_K': {
      // hmask[32] | qs[64] | scales[12] | d. Low 2 bits as Q2_K; element e = 128·h + 32·j + l takes bit
      // (4h + j) of hmask[l] as its third bit, stored inverted: a clear bit subtracts 4. w = d·(s − 32)·q,
      // q in [−4, 3], s the 6-bit scale of sub-block e >> 4 (q3kScales).
      const d = f16At(b, o + 108);
      const s = q3kScales(b, o + 96, Q3K_SCRATCH);
      for (let e = 0; e < 256; e++) {
        const h = e >> 7, j = (e >> 5) & 3, l = e & 31;
        const lo = (b[o + 32 + (h << 5) + l]! >> (2 * j)) & 3;
        const hi = (b[o + l]! >> (4 * h + j)) & 1;
        out[y + e] = d * s[e >> 4]! * (lo - (hi ? 0 : 4));
      }
      return;
    }
    case 'Q4_K': // d | dmin | scales[12] | qs[128]
    case 'Q5_K': { // d | dmin | scales[12] | qh[32] | qs[128]
      // Element e = 64·c + 32·t + l (chunk c 0..3, t 0/1, l 0..31) is the low (t = 0) or high (t = 1)
      // nibble of qs[32·c + l]; Q5_K's fifth bit is bit (e >> 5) of qh[l]. Sub-block e >> 5 (scaleMinK4).
      // w = d·sc·q − dmin·m.
      const five = type === 'Q5_K';
      const d = f16At(b, o), dmin = f16At(b, o + 2);
      const qs = o + (five ? 48 : 16);
      for (let sb = 0; sb < 8; sb++) {
        const [sc, m] = scaleMinK4(b, o + 4, sb);
        const dl = d * sc, ml = dmin * m;
        const base = qs + ((sb >> 1) << 5), shift = (sb & 1) * 4;
        for (let l = 0; l < 32; l++) {
          let q = (b[base + l]! >> shift) & 0xf;
          if (five) q |= ((b[o + 16 + l]! >> sb) & 1) << 4;
          out[y + 32 * sb + l] = r(dl * q - ml);
        }
      }
      return;
    }
    case 'Q6_K': {
      // ql[128] | qh[64] | scales[16] int8 | d. Element e = 128·h + 32·g + l (g 0..3, l 0..31): low 4
      // bits from ql[64·h + l + 32·(g & 1)] (low nibble for g < 2, high for g >= 2), top 2 bits from bits
      // 2g..2g+1 of qh[32·h + l]; scale int8 scales[e >> 4]. w = d·sc·(q − 32).
      const d = f16At(b, o + 208);
      for (let e = 0; e < 256; e++) {
        const h = e >> 7, g = (e >> 5) & 3, l = e & 31;
        const lo = (b[o + (h << 6) + l + ((g & 1) << 5)]! >> ((g >> 1) * 4)) & 0xf;
        const hi = (b[o + 128 + (h << 5) + l]! >> (2 * g)) & 3;
        out[y + e] = d * i8(b[o + 192 + (e >> 4)]!) * ((lo | (hi << 4)) - 32);
      }
      return;
    }
    case 'IQ4_NL': { // d | qs[16] as Q4_0, each nibble indexing IQ4_NL_VALUES
      const d = f16At(b, o);
      for (let j = 0; j < 16; j++) {
        const q = b[o + 2 + j]!;
        out[y + j] = d * IQ4_NL_VALUES[q & 0xf]!;
        out[y + j + 16] = d * IQ4_NL_VALUES[q >> 4]!;
      }
      return;
    }
    case 'IQ4_XS': {
      // d | scales_h u16 | scales_l[4] | qs[128]: sub-block ib (0..7) of 32 is an IQ4_NL block of
      // qs[16·ib ..] with scale d·(ls − 32), ls = nibble (ib & 1) of scales_l[ib >> 1] | bits 2ib..2ib+1
      // of scales_h << 4.
      const d = f16At(b, o);
      const sh = b[o + 2]! | (b[o + 3]! << 8);
      for (let ib = 0; ib < 8; ib++) {
        const ls = ((b[o + 4 + (ib >> 1)]! >> (4 * (ib & 1))) & 0xf) | (((sh >> (2 * ib)) & 3) << 4);
        const dl = d * (ls - 32);
        const qs = o + 8 + 16 * ib, yy = y + 32 * ib;
        for (let j = 0; j < 16; j++) {
          const q = b[qs + j]!;
          out[yy + j] = dl * IQ4_NL_VALUES[q & 0xf]!;
          out[yy + j + 16] = dl * IQ4_NL_VALUES[q >> 4]!;
        }
      }
      return;
    }
    case 'MXFP4': { // e (E8M0) | qs[16] as Q4_0, each nibble indexing MXFP4_VALUES (E2M1 doubled)
      const d = e8m0ToF32Half(b[o]!);
      for (let j = 0; j < 16; j++) {
        const q = b[o + 1 + j]!;
        out[y + j] = r(d * MXFP4_VALUES[q & 0xf]!);      // fround: ±12·2^127 overflows f32 as in ggml
        out[y + j + 16] = r(d * MXFP4_VALUES[q >> 4]!);
      }
      return;
    }
    default: {
      const g = isQuantType(type) ? QUANT_FORMATS[type].group : null;
      if (!g) throw new WebinferError(`dequantizeBlock: type: unknown type ${String(type)}`);
      dequantizeGroup(g, b, o, out, y);
    }
  }
}

/**
 * A group type's block (core/quant.ts: body of G values packed as a little-endian bit string, then the
 * head). Each value is the format's expression in f32: A s·q + b (s·q exact for 16-bit scales: 8 + 11
 * significant bits at most; rounded once for f32 ones, as f32 arithmetic does), Z (q − z)·s, F e4m3(q)·s.
 */
function dequantizeGroup(g: GroupFormat, b: Uint8Array, o: number, out: Float64Array | Float32Array, y: number): void {
  const r = Math.fround;
  const h = o + g.bodyBytes;
  const u16 = (at: number) => b[at]! | (b[at + 1]! << 8);
  const u32 = (at: number) => (u16(at) | (u16(at + 2) << 16)) >>> 0;
  const half = g.scale === 'F16' ? f16BitsToF32 : bf16BitsToF32;
  const wide = g.scale === 'F32';
  const s = wide ? f32FromBits(u32(h)) : half(u16(h));
  if (g.kind === 'F') {
    for (let i = 0; i < g.size; i++) out[y + i] = r(e4m3ToF32(b[o + i]!) * s);
    return;
  }
  const second = wide ? (g.kind === 'A' ? f32FromBits(u32(h + 4)) : u32(h + 4)) : (g.kind === 'A' ? half(u16(h + 2)) : u16(h + 2));
  const mask = (1 << g.bits) - 1;
  for (let i = 0; i < g.size; i++) {
    const bit = i * g.bits, at = o + (bit >> 3);
    // Up to 8 bits from at most two bytes (bits ≤ 8).
    const q = ((b[at]! | ((b[at + 1] ?? 0) << 8)) >> (bit & 7)) & mask;
    out[y + i] = g.kind === 'A' ? r(r(s * q) + second) : r((q - second) * s);
  }
}

const Q3K_SCRATCH = new Int32Array(16);
const F32_SCRATCH = new Float32Array(1);
const U32_SCRATCH = new Uint32Array(F32_SCRATCH.buffer);
function f32FromBits(u: number): number {
  U32_SCRATCH[0] = u;
  return F32_SCRATCH[0]!;
}

// ---------------------------------------------------------------------------------------------
// rows

/**
 * Dequantizes `rows` rows of K values of `type` stored consecutively in `bytes` (the GGUF file's own
 * block layout; a matrix with ggml ne = [K, rows], i.e. HF [rows, K]) into a [rows, K] row-major
 * Float64Array holding ggml's f32 values exactly. Throws a WebinferError when K is not a whole number of
 * blocks or the byte length disagrees with rows × K.
 */
export function dequantizeRows(type: DequantType, bytes: Uint8Array, rows: number, K: number): Float64Array {
  const op = 'dequantizeRows';
  const need = quantRowsBytes(type, rows, K, op);
  if (!(bytes instanceof Uint8Array)) fail(op, 'bytes', 'a Uint8Array', bytes);
  if (bytes.length !== need) {
    const { elems, bytes: bb } = quantBlockShape(type);
    fail(op, 'bytes', `${need} bytes for ${rows} × ${K} values of ${type} (${rows} rows × ${K / elems} blocks × ${bb} bytes)`,
      `${bytes.length} bytes`);
  }
  const out = new Float64Array(rows * K);
  const { elems, bytes: bb } = quantBlockShape(type);
  const nBlocks = (rows * K) / elems; // rows are whole blocks, so blocks run on across rows
  for (let i = 0; i < nBlocks; i++) dequantizeBlock(type, bytes, i * bb, out, i * elems);
  return out;
}

/** One row of K values: dequantizeRows(type, bytes, 1, K) as a convenience. */
export function dequantizeRow(type: DequantType, bytes: Uint8Array, K: number): Float64Array {
  return dequantizeRows(type, bytes, 1, K);
}

/**
 * Activations as the quantized GEMV on 8-bit activations takes them (SPEC §8; shaders/ops/gemv_idot.wgsl):
 * each run of 32 values of a row of K (a multiple of 32) scaled by d = amax/127 and rounded to an integer
 * in −127..127; `values` are d·q. A value whose 127·x/amax lies within `tie` of a half may round either way
 * on a GPU (pack4x8snorm's rounding of a half is the implementation's, and its f32 1/amax is not this
 * float64's): `slack` is d there (how far it may move), 0 elsewhere.
 */
export function quantizeActivationsQ8(x: ArrayLike<number>, K: number, tie = 1e-3): { values: Float64Array; slack: Float64Array } {
  if (!Number.isInteger(K) || K <= 0 || K % 32 !== 0) throw new Error(`quantizeActivationsQ8: K: expected a positive multiple of 32, got ${K}`);
  if (x.length % K !== 0) throw new Error(`quantizeActivationsQ8: x: expected a whole number of rows of ${K}, got ${x.length} elements`);
  const values = new Float64Array(x.length), slack = new Float64Array(x.length);
  for (let b = 0; b < x.length; b += 32) {
    let amax = 0;
    for (let i = b; i < b + 32; i++) amax = Math.max(amax, Math.abs(x[i]));
    if (amax === 0) continue;
    const d = amax / 127;
    for (let i = b; i < b + 32; i++) {
      const v = 127 * x[i] / amax;
      values[i] = d * Math.min(127, Math.max(-127, Math.round(v)));
      if (Math.abs(Math.abs(v - Math.trunc(v)) - 0.5) < tie) slack[i] = d;
    }
  }
  return { values, slack };
}
