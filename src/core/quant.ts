// Quantized weight types (SPEC §8): ggml's block formats as GGUF files store them. A row of a weight
// (ggml's ne[0], the input dimension K) is a sequence of blocks of `blockElems` values in `blockBytes`
// bytes; ggml's ggml-common.h block_* structs fix each layout and ggml-quants.c's dequantize_row_*
// the values (src/reference/quant.ts decodes them on the host, shaders/ops/quant.wgsl on the GPU).
//
// On the GPU a weight keeps its blocks' bits, but where a block is not a whole number of 4-byte words
// its one 16-bit (or 8-bit) scale field moves out to a plane after all blocks (`split`): the blocks'
// remaining bytes are then word-aligned and the scale of block b sits at plane[b]. Nothing is widened:
// the bytes on the GPU are the file's bytes, reordered (quant.ts in ops/ does the repacking).

/** ggml's type ids (ggml.h enum ggml_type) of the types GGUF tensors may have. */
export const GGML_TYPE_IDS: Readonly<Record<string, number>> = {
  F32: 0, F16: 1, Q4_0: 2, Q4_1: 3, Q5_0: 6, Q5_1: 7, Q8_0: 8, Q8_1: 9, Q2_K: 10, Q3_K: 11, Q4_K: 12, Q5_K: 13, Q6_K: 14,
  Q8_K: 15, IQ2_XXS: 16, IQ2_XS: 17, IQ3_XXS: 18, IQ1_S: 19, IQ4_NL: 20, IQ3_S: 21, IQ2_S: 22, IQ4_XS: 23, I8: 24, I16: 25,
  I32: 26, I64: 27, F64: 28, IQ1_M: 29, BF16: 30, TQ1_0: 34, TQ2_0: 35, MXFP4: 39, NVFP4: 40,
};

/** The name of ggml type id `id` ('Q4_K'...), or `type <id>` for one this table does not know. */
export function ggmlTypeName(id: number): string {
  for (const [name, v] of Object.entries(GGML_TYPE_IDS)) if (v === id) return name;
  return `type ${id}`;
}

/** ggml's quantized types the engine computes with (SPEC §8). */
export type GgmlQuantType = 'Q8_0' | 'Q4_0' | 'Q4_1' | 'Q5_0' | 'Q5_1' | 'Q2_K' | 'Q3_K' | 'Q4_K' | 'Q5_K' | 'Q6_K'
  | 'IQ4_NL' | 'IQ4_XS' | 'MXFP4';

/**
 * The group types: the HF quantized safetensors formats (MLX affine, AWQ, GPTQ, compressed-tensors,
 * block FP8; src/models/hf_quant.ts reads them) as one family of blocks, a block being one group of G
 * consecutive values of a row (along K) with its scale and zero. Name `<kind><bits>G<G>_<scale>`:
 *   kind A (affine, MLX): w = s·q + b, b a float bias of the scale's dtype;
 *        Z (integer zero, AWQ / GPTQ / compressed-tensors): w = (q − z)·s, z an unsigned integer
 *          (a symmetric checkpoint's implicit zero 2^(bits−1) is written out);
 *        F (FP8 E4M3, bits 8): w = e4m3(q)·s.
 *   bits 2, 3, 4, 5, 6, 8; G 32, 64, 128; scale F16, BF16 or F32 (s, b and z as the checkpoint has them:
 *   nothing is rounded).
 * A block's bytes: the body, G·bits/8 bytes, value i at bits [i·bits, (i + 1)·bits) of it read as a
 * little-endian bit string (MLX's own packing; an FP8 value is byte i), then the head: for 16-bit scales
 * s then b or z as two u16 (an F block: s then 0), for F32 scales s as f32 then b as f32 or z as u32 (an
 * F block: s alone). On the GPU the head moves to the plane (its 4 or 8 bytes are the split field), so
 * bodies stay 16-byte aligned. A scale shared by a larger block of the checkpoint (FP8's 128 × 128, a
 * per-channel or per-tensor scale) is written in every group it covers.
 */
export type GroupKind = 'A' | 'Z' | 'F';
export type GroupBits = 2 | 3 | 4 | 5 | 6 | 8;
export type GroupSize = 32 | 64 | 128;
export type GroupScale = 'F16' | 'BF16' | 'F32';
export type GroupQuantType = `${'A' | 'Z'}${GroupBits}G${GroupSize}_${GroupScale}` | `F8G${GroupSize}_${GroupScale}`;

/** The quantized types the engine computes with (SPEC §8). */
export type QuantType = GgmlQuantType | GroupQuantType;

/** A group type's parameters (QuantFormat.group). */
export interface GroupFormat {
  readonly kind: GroupKind;
  readonly bits: GroupBits;
  readonly size: GroupSize;
  readonly scale: GroupScale;
  /** Bytes of a block's packed values and of its head. */
  readonly bodyBytes: number;
  readonly headBytes: number;
}

export interface QuantFormat {
  readonly type: QuantType;
  /** Shader code: the Q_TYPE of its decoder, shaders/ops/quant/<type>.wgsl. */
  readonly code: number;
  readonly blockElems: number;
  readonly blockBytes: number;
  /** The scale field moved to the plane on the GPU: its byte offset in the block and size, or null. */
  readonly split: { readonly offset: number; readonly bytes: 1 | 2 | 4 | 8 } | null;
  /** A group type's parameters (null for ggml's types). */
  readonly group: GroupFormat | null;
}

const fmt = (type: QuantType, code: number, blockElems: number, blockBytes: number,
             split: QuantFormat['split'] = null, group: GroupFormat | null = null): QuantFormat =>
  Object.freeze({ type, code, blockElems, blockBytes, split, group });

const GROUP_BITS: readonly GroupBits[] = [2, 3, 4, 5, 6, 8];
const GROUP_SIZES: readonly GroupSize[] = [32, 64, 128];
const GROUP_SCALES: readonly GroupScale[] = ['F16', 'BF16', 'F32'];
/** Shader codes (Q_TYPE) of the group types start here; ggml's types use 1..13. */
export const GROUP_CODE_BASE = 64;

/** The name of a group type (groupType('Z', 4, 128, 'F16') = 'Z4G128_F16'). */
export function groupType(kind: GroupKind, bits: GroupBits, size: GroupSize, scale: GroupScale): GroupQuantType {
  return `${kind}${bits}G${size}_${scale}` as GroupQuantType;
}

function groupFormats(): Record<GroupQuantType, QuantFormat> {
  const out = {} as Record<GroupQuantType, QuantFormat>;
  let code = GROUP_CODE_BASE;
  for (const kind of ['A', 'Z', 'F'] as const) {
    for (const bits of kind === 'F' ? [8 as const] : GROUP_BITS) {
      for (const size of GROUP_SIZES) {
        for (const scale of GROUP_SCALES) {
          const type = groupType(kind, bits, size, scale);
          const bodyBytes = (size * bits) / 8;
          const headBytes = scale !== 'F32' || kind === 'F' ? 4 : 8;
          const g: GroupFormat = Object.freeze({ kind, bits, size, scale, bodyBytes, headBytes });
          out[type] = fmt(type, code++, size, bodyBytes + headBytes, { offset: bodyBytes, bytes: headBytes as 4 | 8 }, g);
        }
      }
    }
  }
  return out;
}

/** Every quantized type, by name. */
export const QUANT_FORMATS: Readonly<Record<QuantType, QuantFormat>> = Object.freeze({
  Q8_0: fmt('Q8_0', 1, 32, 34, { offset: 0, bytes: 2 }),        // d f16, qs[32] i8
  Q4_0: fmt('Q4_0', 2, 32, 18, { offset: 0, bytes: 2 }),        // d, qs[16]
  Q4_1: fmt('Q4_1', 3, 32, 20),                                 // d, m, qs[16]
  Q5_0: fmt('Q5_0', 4, 32, 22, { offset: 0, bytes: 2 }),        // d, qh[4], qs[16]
  Q5_1: fmt('Q5_1', 5, 32, 24),                                 // d, m, qh[4], qs[16]
  Q2_K: fmt('Q2_K', 6, 256, 84),                                // scales[16], qs[64], d, dmin
  Q3_K: fmt('Q3_K', 7, 256, 110, { offset: 108, bytes: 2 }),    // hmask[32], qs[64], scales[12], d
  Q4_K: fmt('Q4_K', 8, 256, 144),                               // d, dmin, scales[12], qs[128]
  Q5_K: fmt('Q5_K', 9, 256, 176),                               // d, dmin, scales[12], qh[32], qs[128]
  Q6_K: fmt('Q6_K', 10, 256, 210, { offset: 208, bytes: 2 }),   // ql[128], qh[64], scales[16] i8, d
  IQ4_NL: fmt('IQ4_NL', 11, 32, 18, { offset: 0, bytes: 2 }),   // d, qs[16]
  IQ4_XS: fmt('IQ4_XS', 12, 256, 136),                          // d, scales_h u16, scales_l[4], qs[128]
  MXFP4: fmt('MXFP4', 13, 32, 17, { offset: 0, bytes: 1 }),     // e (E8M0), qs[16]
  ...groupFormats(),
});

/** ggml's types (the GGUF block formats). */
export const QUANT_TYPES: readonly GgmlQuantType[] = Object.keys(QUANT_FORMATS).filter((t) => !QUANT_FORMATS[t as QuantType].group) as GgmlQuantType[];

/** The types whose GEMV takes the dot path (shaders/ops/gemv_qdot.wgsl: quants meet x unconverted and
 *  unscaled); the others decode each value to f32 first (gemv_quant.wgsl). */
export const QUANT_DOT_TYPES: readonly QuantType[] = ['Q8_0', 'Q4_0', 'Q4_K', 'Q6_K'];

/** Whether `t` is a quantized type whose GEMVs take the dot path (QUANT_DOT_TYPES). */
export const hasQuantDot = (t: unknown): t is QuantType => QUANT_DOT_TYPES.includes(t as QuantType);

/** The group types (the HF quantized safetensors formats as the GPU holds them). */
export const GROUP_QUANT_TYPES: readonly GroupQuantType[] = Object.keys(QUANT_FORMATS).filter((t) => QUANT_FORMATS[t as QuantType].group) as GroupQuantType[];

/** What a quantized type argument may be, for error messages. */
export const QUANT_TYPES_TEXT = `${QUANT_TYPES.join(', ')} or a group type <A|Z><2|3|4|5|6|8>G<32|64|128>_<F16|BF16|F32> / F8G<32|64|128>_<F16|BF16|F32>`;

export function isGroupQuantType(t: unknown): t is GroupQuantType {
  return isQuantType(t) && QUANT_FORMATS[t].group !== null;
}

/** FP8 E4M3 (float8_e4m3fn: no infinities, 0x7f / 0xff NaN) to its value. */
export function e4m3ToF32(b: number): number {
  const s = b & 0x80 ? -1 : 1, e = (b >> 3) & 15, m = b & 7;
  if (e === 15 && m === 7) return NaN;
  return s * (e === 0 ? m * 2 ** -9 : (1 + m / 8) * 2 ** (e - 7));
}

export function isQuantType(t: unknown): t is QuantType {
  return typeof t === 'string' && Object.prototype.hasOwnProperty.call(QUANT_FORMATS, t);
}

/** Bytes of a row of K values of `type` (K a multiple of its block). */
export function quantRowBytes(type: QuantType, K: number): number {
  const f = QUANT_FORMATS[type];
  return (K / f.blockElems) * f.blockBytes;
}

/** ggml's non-linear 4-bit table of IQ4_NL and IQ4_XS (kvalues_iq4nl). */
export const IQ4_NL_VALUES: readonly number[] = Object.freeze([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113]);

/** MXFP4's E2M1 values, doubled (ggml's kvalues_mxfp4: the E8M0 scale is halved to match). */
export const MXFP4_VALUES: readonly number[] = Object.freeze([0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12]);
