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

/** The quantized types the engine computes with (SPEC §8). */
export type QuantType = 'Q8_0' | 'Q4_0' | 'Q4_1' | 'Q5_0' | 'Q5_1' | 'Q2_K' | 'Q3_K' | 'Q4_K' | 'Q5_K' | 'Q6_K'
  | 'IQ4_NL' | 'IQ4_XS' | 'MXFP4';

export interface QuantFormat {
  readonly type: QuantType;
  /** Shader code: the Q_TYPE of its decoder, shaders/ops/quant/<type>.wgsl. */
  readonly code: number;
  readonly blockElems: number;
  readonly blockBytes: number;
  /** The scale field moved to the plane on the GPU: its byte offset in the block and size, or null. */
  readonly split: { readonly offset: number; readonly bytes: 1 | 2 } | null;
}

const fmt = (type: QuantType, code: number, blockElems: number, blockBytes: number,
             split: QuantFormat['split'] = null): QuantFormat => Object.freeze({ type, code, blockElems, blockBytes, split });

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
});

export const QUANT_TYPES: readonly QuantType[] = Object.keys(QUANT_FORMATS) as QuantType[];

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
