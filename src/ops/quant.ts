// Quantized weights on the GPU (SPEC §8; shaders/ops/quant.wgsl reads them): the blocks of a GGUF
// tensor keep their bits, but a block that is not a whole number of 4-byte words (Q8_0's 34 bytes,
// Q6_K's 210, ...) gives its scale field to a plane after all blocks, so every block's remaining bytes
// start on a word and the shader reads whole words. Nothing is widened: a part's buffer holds the
// tensor's bytes, reordered, plus at most 3 bytes of padding.
import { check, fmt, isPosInt } from '../core/errors.js';
import { QUANT_FORMATS, isQuantType, quantRowBytes, type QuantType } from '../core/quant.js';

/** A part's GPU layout: the words of `rows` rows and the word where their scale plane starts. */
export interface QuantPacked {
  readonly words: Uint32Array;
  readonly planeWord: number;
}

/** Word at which the scale plane of `rows` rows of K values starts (after every block's body). */
export function quantPlaneWord(type: QuantType, rows: number, K: number): number {
  const f = QUANT_FORMATS[type];
  return (rows * (K / f.blockElems) * (f.blockBytes - (f.split?.bytes ?? 0))) / 4;
}

/** GPU bytes of `rows` rows of K values of `type` (the file's bytes, padded to a word). */
export function quantPackedBytes(type: QuantType, rows: number, K: number): number {
  return Math.ceil((rows * quantRowBytes(type, K)) / 4) * 4;
}

/** Repacks `rows` rows of K values in GGUF's block layout (bytes) into the GPU layout above. */
export function packQuantRows(type: QuantType, bytes: Uint8Array, rows: number, K: number, op = 'packQuantRows'): QuantPacked {
  check(isQuantType(type), op, 'type', `one of ${Object.keys(QUANT_FORMATS).join(', ')}`, fmt(type));
  const f = QUANT_FORMATS[type];
  check(isPosInt(rows), op, 'rows', 'a positive integer', rows);
  check(isPosInt(K) && K % f.blockElems === 0, op, 'K', `a positive multiple of ${f.blockElems} (a ${type} block)`, K);
  const n = rows * quantRowBytes(type, K);
  check(bytes instanceof Uint8Array && bytes.length === n, op, 'bytes', `${n} bytes (${rows} rows × ${K} ${type} values)`,
    bytes instanceof Uint8Array ? `${bytes.length} bytes` : bytes);
  const out = new Uint8Array(quantPackedBytes(type, rows, K));
  const s = f.split;
  if (!s) {
    out.set(bytes);
  } else {
    const blocks = rows * (K / f.blockElems);
    const body = f.blockBytes - s.bytes;
    const plane = blocks * body;
    for (let b = 0; b < blocks; b++) {
      const src = b * f.blockBytes;
      out.set(bytes.subarray(src, src + s.offset), b * body);
      out.set(bytes.subarray(src + s.offset + s.bytes, src + f.blockBytes), b * body + s.offset);
      for (let j = 0; j < s.bytes; j++) out[plane + b * s.bytes + j] = bytes[src + s.offset + j];
    }
  }
  return { words: new Uint32Array(out.buffer), planeWord: quantPlaneWord(type, rows, K) };
}
