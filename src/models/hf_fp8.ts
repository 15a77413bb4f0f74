// FP8 checkpoints as their makers publish them (SPEC §8): block FP8 (`quant_method: fp8`,
// `weight_block_size` [128, 128]: DeepSeek-V3/R1, Qwen3-*-FP8), whose `weight` is float8_e4m3fn and
// `weight_scale_inv` [⌈out/bn⌉, ⌈in/bk⌉] (f32, or bf16 as Qwen3's dense checkpoints store it) the
// multiplier of its block; and compressed-tensors' `float-quantized` FP8 (a per-tensor or per-channel
// `weight_scale`). Both become the engine's F8 group type (core/quant.ts): the E4M3 bytes as they are,
// rows of groups of G values along K, each group's head holding the scale of the block it lies in, in
// the checkpoint's own dtype (a scale shared by rows or columns is written in each group it covers:
// 4 bytes a group, 3% of the bytes at G 128). Nothing is rounded: w = e4m3(q) · s exactly as the
// format's dequantization gives it.
import { WebinferError } from '../core/errors.js';
import { groupType, QUANT_FORMATS, type GroupQuantType, type GroupScale, type GroupSize } from '../core/quant.js';

/** The scale dtypes an FP8 checkpoint may store (safetensors names). */
export const FP8_SCALE_DTYPES: Readonly<Record<string, GroupScale>> = { F32: 'F32', BF16: 'BF16', F16: 'F16' };

/** The group size for K values whose scales change every `bk` columns: the largest of 128, 64, 32
 *  dividing both (K a multiple of 32), or null. */
export function fp8GroupSize(K: number, bk: number): GroupSize | null {
  for (const g of [128, 64, 32] as const) if (K % g === 0 && bk % g === 0) return g;
  return null;
}

/**
 * An FP8 weight [N, K] (`weight`: N·K E4M3 bytes) and its scales (`scale`: the raw bytes of a
 * [⌈N/bn⌉, ⌈K/bk⌉] tensor of `scaleDtype`; a per-channel scale is bn 1, bk K; a per-tensor one bn N,
 * bk K) as F8 group blocks. `what` names the tensor in errors.
 */
export function fp8ToGroups(what: string, weight: Uint8Array, scale: Uint8Array, scaleDtype: GroupScale, N: number, K: number,
                            bn: number, bk: number): { type: GroupQuantType; bytes: Uint8Array } {
  const G = fp8GroupSize(K, bk);
  if (G === null) {
    throw new WebinferError(`loadModel: ${what}: expected an input dimension that is a multiple of 32 and of a group dividing the scale block ${bk}, got ${K}`);
  }
  const type = groupType('F', 8, G, scaleDtype);
  const f = QUANT_FORMATS[type];
  const sb = scaleDtype === 'F32' ? 4 : 2;
  const rowsS = Math.ceil(N / bn), colsS = Math.ceil(K / bk);
  if (weight.length !== N * K) throw new WebinferError(`loadModel: ${what}: expected ${N * K} FP8 bytes (${N} × ${K}), got ${weight.length}`);
  if (scale.length !== rowsS * colsS * sb) {
    throw new WebinferError(`loadModel: ${what}: expected scales of ${rowsS * colsS} ${scaleDtype} values ([${rowsS}, ${colsS}] for blocks of ${bn} × ${bk}), got ${scale.length} bytes`);
  }
  const groups = K / G;
  const out = new Uint8Array(N * groups * f.blockBytes);
  for (let n = 0; n < N; n++) {
    const srow = Math.floor(n / bn) * colsS;
    for (let j = 0; j < groups; j++) {
      const o = (n * groups + j) * f.blockBytes;
      out.set(weight.subarray(n * K + j * G, n * K + (j + 1) * G), o);
      const s = (srow + Math.floor((j * G) / bk)) * sb;
      for (let b = 0; b < sb; b++) out[o + G + b] = scale[s + b];
    }
  }
  return { type, bytes: out };
}
