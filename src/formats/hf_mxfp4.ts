// gpt-oss's MXFP4 experts as the released checkpoints ship them (config.json's quantization_config
// {quant_method: 'mxfp4'}; SPEC §8): every routed expert tensor X is a pair X_blocks (uint8
// [E, N, K/32, 16]) and X_scales (uint8 [E, N, K/32]), N output rows of K inputs in blocks of 32:
//   value k of a block = FP4[nibble k] · 2^(scale − 127),  nibble 2i the low 4 bits of byte i, 2i+1 the high
// with FP4 = E2M1 {0, .5, 1, 1.5, 2, 3, 4, 6, −0, −.5, ..., −6} (transformers' integrations/mxfp4.py,
// convert_moe_packed_tensors: lut[lo] at even positions, lut[hi] at odd ones, ldexp by scale − 127, then
// transposed to the float layout [E, K, N]).
// The engine holds them as ggml's MXFP4 (core/quant.ts: block_mxfp4 { e; qs[16] }, element j the low
// nibble of qs[j] and element j + 16 its high nibble, value kvalues_mxfp4[q] · 2^(e − 128) with the
// doubled table {0, 1, 2, 3, 4, 6, 8, 12, ...}): the same E8M0 byte, the same 4-bit codes in another
// nibble order, the same values exactly. Transcoding only moves nibbles: nothing is rounded.
//
// Presented tensors (what the schema and WeightReader.experts see): `<...>.mlp.experts.gate_up_proj`
// MXFP4 [E, 2I, H] with gate rows first, then up rows (the checkpoint's rows interleave them: gate rows
// 0, 2, ..., up rows 1, 3, ...), and `<...>.mlp.experts.down_proj` MXFP4 [E, H, I] (rows as stored).
import { WebinferError, shapeStr } from '../core/errors.js';
import { QUANT_FORMATS } from '../core/quant.js';
import { ownBytes, type CheckpointTensors, type PresentedWeight, type QuantScheme } from './quant_scheme.js';

const OP = 'loadModel';
/** Values a block, and bytes of its codes (two a byte). */
const QK = 32, QB = 16;

/**
 * HF MXFP4 rows as ggml MXFP4 blocks: `blocks` (rows·K/32·16 bytes) and `scales` (rows·K/32 bytes) of
 * `rows` rows of K values; output row r is input row `rowOf(r)` (default r). ggml's blocks are 17 bytes:
 * the scale byte, then qs[j] = code j | code (j + 16) << 4.
 */
export function mxfp4ToGgml(blocks: Uint8Array, scales: Uint8Array, rows: number, K: number, rowOf: (r: number) => number = (r) => r): Uint8Array {
  if (K % QK !== 0) throw new WebinferError(`${OP}: MXFP4 rows: expected K a multiple of ${QK}, got ${K}`);
  const nb = K / QK;
  if (blocks.length !== rows * nb * QB) throw new WebinferError(`${OP}: MXFP4 blocks: expected ${rows * nb * QB} bytes (${rows} rows of ${nb} blocks of 16), got ${blocks.length}`);
  if (scales.length !== rows * nb) throw new WebinferError(`${OP}: MXFP4 scales: expected ${rows * nb} bytes (${rows} rows of ${nb} blocks), got ${scales.length}`);
  const bb = QUANT_FORMATS.MXFP4.blockBytes;   // 17
  const out = new Uint8Array(rows * nb * bb);
  for (let r = 0; r < rows; r++) {
    const src = rowOf(r) * nb;
    for (let b = 0; b < nb; b++) {
      const o = (r * nb + b) * bb, i = (src + b) * QB;
      out[o] = scales[src + b];
      // Code j sits in byte j >> 1 (low nibble for even j); codes j and j + 16 share ggml's byte j.
      for (let j = 0; j < QB; j++) {
        const sh = (j & 1) * 4;
        out[o + 1 + j] = ((blocks[i + (j >> 1)] >> sh) & 0xf) | (((blocks[i + 8 + (j >> 1)] >> sh) & 0xf) << 4);
      }
    }
  }
  return out;
}

/** Output row r of gate_up_proj (gate rows 0..I-1, then up rows) is checkpoint row 2r or 2(r − I) + 1 of its expert. */
export function gateUpRowOf(E: number, I: number): (r: number) => number {
  return (r) => {
    const e = Math.floor(r / (2 * I)), n = r % (2 * I);
    return e * 2 * I + (n < I ? 2 * n : 2 * (n - I) + 1);
  };
}

function tensor(ckpt: CheckpointTensors, name: string, rank: number): readonly number[] {
  const t = ckpt.tensors.get(name);
  if (!t) throw new WebinferError(`${OP}: missing ${name}`);
  if (t.dtype !== 'U8') throw new WebinferError(`${OP}: ${name}: expected dtype U8, got ${t.dtype}`);
  if (t.shape.length !== rank) throw new WebinferError(`${OP}: ${name}: expected ${rank} dimensions, got ${shapeStr(t.shape)}`);
  return t.shape;
}

/** quantization_config {quant_method: 'mxfp4'}: every `X_blocks` / `X_scales` pair of the checkpoint is one MXFP4 tensor X. */
export function mxfp4Scheme(_qc: Record<string, unknown>): QuantScheme {
  return {
    name: 'mxfp4',
    modules(ckpt: CheckpointTensors): string[] {
      const out: string[] = [];
      for (const n of ckpt.tensors.keys()) if (n.endsWith('_blocks')) out.push(n.slice(0, -'_blocks'.length));
      return out;
    },
    async present(prefix: string, ckpt: CheckpointTensors): Promise<PresentedWeight> {
      const bn = `${prefix}_blocks`, sn = `${prefix}_scales`;
      const bs = tensor(ckpt, bn, 4);
      const ss = tensor(ckpt, sn, 3);
      const [E, N, G, B] = bs;
      if (B !== QB) throw new WebinferError(`${OP}: ${bn}: expected blocks of ${QB} bytes (32 values) in the last dimension, got ${shapeStr(bs)}`);
      if (ss[0] !== E || ss[1] !== N || ss[2] !== G) throw new WebinferError(`${OP}: ${sn}: expected shape ${shapeStr([E, N, G])} (one scale a block of ${bn}), got ${shapeStr(ss)}`);
      const gateUp = /(^|\.)gate_up_proj$/.test(prefix);
      if (!gateUp && !/(^|\.)down_proj$/.test(prefix)) {
        throw new WebinferError(`${OP}: ${bn}: expected MXFP4 only on the experts' gate_up_proj and down_proj (gpt-oss), got ${prefix}`);
      }
      if (gateUp && N % 2 !== 0) throw new WebinferError(`${OP}: ${bn}: expected an even number of rows (gate and up interleaved), got ${shapeStr(bs)}`);
      const K = G * QK;
      return {
        type: 'MXFP4',
        name: prefix,
        shape: [E, N, K],
        parts: [bn, sn],
        async bytes() {
          const blocks = await ownBytes(ckpt, bn), scales = await ownBytes(ckpt, sn);
          return mxfp4ToGgml(blocks, scales, E * N, K, gateUp ? gateUpRowOf(E, N / 2) : undefined);
        },
      };
    },
  };
}
