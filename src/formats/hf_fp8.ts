// FP8 checkpoints as their makers publish them (SPEC §8): block FP8 (`quant_method: fp8`,
// `weight_block_size` [128, 128]: DeepSeek-V3/R1, Qwen3-*-FP8), whose `weight` is float8_e4m3fn and
// `weight_scale_inv` [⌈out/bn⌉, ⌈in/bk⌉] (f32, or bf16 as Qwen3's dense checkpoints store it) the
// multiplier of its block; and compressed-tensors' `float-quantized` FP8 (a per-tensor or per-channel
// `weight_scale`). Both become the engine's F8 group type (core/quant.ts): the E4M3 bytes as they are,
// rows of groups of G values along K, each group's head holding the scale of the block it lies in, in
// the checkpoint's own dtype (a scale shared by rows or columns is written in each group it covers:
// 4 bytes a group, 3% of the bytes at G 128). Nothing is rounded: w = e4m3(q) · s exactly as the
// format's dequantization gives it.
import { WebinferError, shapeStr } from '../core/errors.js';
import { groupType, QUANT_FORMATS, type GroupQuantType, type GroupScale, type GroupSize } from '../core/quant.js';
import { configGroupFor, configGroups, ownBytes, type CheckpointTensors, type PresentedWeight, type QuantScheme } from './quant_scheme.js';
import type { SafetensorsTensorInfo } from './safetensors.js';

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

// ---------------------------------------------------------------------------------------------
// the schemes (hf_quant.ts's QUANT_SCHEMES.fp8 and COMPRESSED_TENSORS_FORMATS['float-quantized'])

const OP = 'loadModel';

function fp8Part(ckpt: CheckpointTensors, name: string): SafetensorsTensorInfo {
  const t = ckpt.tensors.get(name);
  if (!t) throw new WebinferError(`${OP}: missing ${name}`);
  if (t.dtype !== 'F8_E4M3') throw new WebinferError(`${OP}: ${name}: expected dtype F8_E4M3 (float8_e4m3fn), got ${t.dtype}`);
  if (t.shape.length !== 2) throw new WebinferError(`${OP}: ${name}: expected 2 dimensions [out, in], got ${shapeStr(t.shape)}`);
  return t;
}

function scalePart(ckpt: CheckpointTensors, name: string): SafetensorsTensorInfo & { scale: GroupScale } {
  const t = ckpt.tensors.get(name);
  if (!t) throw new WebinferError(`${OP}: missing ${name}`);
  const scale = FP8_SCALE_DTYPES[t.dtype];
  if (!scale) throw new WebinferError(`${OP}: ${name}: expected dtype ${Object.keys(FP8_SCALE_DTYPES).join(', ')}, got ${t.dtype}`);
  return { ...t, scale };
}

/** The modules of an FP8 checkpoint: every `<m>.weight` of an FP8 dtype (those left out of the
 *  quantization are stored in bf16; an E5M2 one is refused by name when presented). */
function fp8Modules(ckpt: CheckpointTensors): string[] {
  return [...ckpt.tensors].filter(([n, t]) => n.endsWith('.weight') && t.dtype.startsWith('F8_')).map(([n]) => n.slice(0, -'.weight'.length));
}

/** The presented module of an FP8 weight with its scale over blocks of bn × bk. */
function presentFp8(prefix: string, ckpt: CheckpointTensors, scaleName: string, block: (N: number, K: number) => [number, number],
                    why: string, extra: readonly string[]): PresentedWeight {
  const wn = `${prefix}.weight`;
  const w = fp8Part(ckpt, wn);
  const s = scalePart(ckpt, scaleName);
  const [N, K] = w.shape;
  const [bn, bk] = block(N, K);
  const want = [Math.ceil(N / bn), Math.ceil(K / bk)];
  const got = s.shape.length === 0 ? [1, 1] : s.shape.length === 1 ? [s.shape[0], 1] : s.shape;
  if (got.length !== 2 || got[0] !== want[0] || got[1] !== want[1]) {
    throw new WebinferError(`${OP}: ${scaleName}: expected shape ${shapeStr(want)} (${why} of a weight [${N}, ${K}]), got ${shapeStr(s.shape)}`);
  }
  const G = fp8GroupSize(K, bk);
  if (G === null) throw new WebinferError(`${OP}: ${wn}: expected an input dimension that is a multiple of 32, got ${K}`);
  const parts = [scaleName, ...extra.filter((n) => ckpt.tensors.has(n))];
  return {
    type: groupType('F', 8, G, s.scale), shape: [N, K], parts,
    async bytes() {
      return fp8ToGroups(wn, await ownBytes(ckpt, wn), await ownBytes(ckpt, scaleName), s.scale, N, K, bn, bk).bytes;
    },
  };
}

/** Block FP8 (`quant_method: fp8`): weight_block_size [bn, bk], `<m>.weight` E4M3 and `<m>.weight_scale_inv`. */
export function fp8Scheme(qc: Record<string, unknown>): QuantScheme {
  const at = 'quantization_config';
  if (qc.fmt !== undefined && qc.fmt !== 'e4m3') throw new WebinferError(`${OP}: ${at}.fmt: expected 'e4m3' (float8_e4m3fn weights), got ${JSON.stringify(qc.fmt)}`);
  const bs = qc.weight_block_size;
  if (!(Array.isArray(bs) && bs.length === 2 && bs.every((x) => Number.isInteger(x) && x > 0))) {
    throw new WebinferError(`${OP}: ${at}.weight_block_size: expected [rows, columns] of a scale block (e.g. [128, 128]), got ${JSON.stringify(bs)}`);
  }
  const [bn, bk] = bs as [number, number];
  if (bk % 32 !== 0) throw new WebinferError(`${OP}: ${at}.weight_block_size: expected columns a multiple of 32, got ${JSON.stringify(bs)}`);
  if (qc.activation_scheme !== undefined && qc.activation_scheme !== 'dynamic' && qc.activation_scheme !== 'static') {
    throw new WebinferError(`${OP}: ${at}.activation_scheme: expected 'dynamic' or 'static', got ${JSON.stringify(qc.activation_scheme)}`);
  }
  return {
    name: 'fp8',
    modules: fp8Modules,
    async present(prefix, ckpt) {
      // Activations stay f32 (SPEC §8): a static scheme's input_scale is not used.
      return presentFp8(prefix, ckpt, `${prefix}.weight_scale_inv`, () => [bn, bk], `blocks of ${bn} × ${bk}`, [`${prefix}.input_scale`]);
    },
  };
}

/** compressed-tensors' float-quantized FP8: `<m>.weight` E4M3 and `<m>.weight_scale` per tensor, per
 *  channel or per block (`block_structure`). */
export function floatQuantizedScheme(qc: Record<string, unknown>): QuantScheme {
  const groups = configGroups(qc, (_g, w, at) => {
    if (w.type !== 'float') throw new WebinferError(`${OP}: ${at}.weights.type: expected 'float' (float-quantized), got ${JSON.stringify(w.type)}`);
    if (w.num_bits !== 8) throw new WebinferError(`${OP}: ${at}.weights.num_bits: expected 8 (FP8 E4M3), got ${JSON.stringify(w.num_bits)}`);
    const strategy = w.strategy;
    if (strategy !== 'tensor' && strategy !== 'channel' && strategy !== 'block') {
      throw new WebinferError(`${OP}: ${at}.weights.strategy: expected 'tensor', 'channel' or 'block', got ${JSON.stringify(strategy)}`);
    }
    let block: [number, number] | null = null;
    if (strategy === 'block') {
      const b = w.block_structure;
      if (!(Array.isArray(b) && b.length === 2 && b.every((x) => Number.isInteger(x) && x > 0))) {
        throw new WebinferError(`${OP}: ${at}.weights.block_structure: expected [rows, columns], got ${JSON.stringify(b)}`);
      }
      block = b as [number, number];
    }
    return { strategy, block };
  });
  const groupFor = (prefix: string) => configGroupFor(groups, prefix);
  return {
    name: 'compressed-tensors',
    modules: fp8Modules,
    async present(prefix, ckpt) {
      const g = groupFor(prefix);
      const block = (N: number, K: number): [number, number] => g.strategy === 'tensor' ? [N, K] : g.strategy === 'channel' ? [1, K] : g.block!;
      const why = g.strategy === 'tensor' ? 'one scale (tensor strategy)' : g.strategy === 'channel' ? 'a scale per output row (channel strategy)' : `blocks of ${g.block!.join(' × ')}`;
      return presentFp8(prefix, ckpt, `${prefix}.weight_scale`, block, why, [`${prefix}.input_scale`, `${prefix}.weight_zero_point`]);
    },
  };
}
