// The Hub's quantized safetensors checkpoints as they ship (SPEC §8): MLX affine, AutoAWQ GEMM, GPTQ
// (AutoGPTQ / gptqmodel, checkpoint formats gptq and gptq_v2) and compressed-tensors pack-quantized,
// each transcoded into the engine's group types (core/quant.ts) without changing a value: the packed
// integers are unpacked and repacked as each block's little-endian bit string, and the scales (and MLX's
// biases, the integer zeros) are copied as their bits into the block heads. Like ggufCheckpoint, the
// checkpoint is presented as one virtual SafetensorsFile: each quantized module `<prefix>` (the tensors
// `<prefix>.qweight`, `.qzeros`, `.scales`, ...) is the one tensor `<prefix>.weight` of HF's shape
// [out, in] with a group type as its dtype, its bytes transcoded when the WeightReader asks for them;
// every other tensor passes through. The checkpoint schema and the WeightReader then run unchanged.
//
// A scheme is one entry of QUANT_SCHEMES (keyed by quantization_config.quant_method): a factory from
// the config's quantization settings to a QuantScheme, which names the quantized modules among the
// checkpoint's tensors and presents each one (shape checks at once, so a malformed checkpoint is refused
// before any GPU memory is taken; bytes on demand). Which modules are quantized is read off the tensors
// present (a module in an ignore list / modules_to_not_convert / MLX's `false` is stored as a float
// `weight`), and every part is checked against the settings.
//
// GPTQ's desc_act (and compressed-tensors' actorder): g_idx scatters a group's input columns along K.
// The columns are sorted by group (a stable sort), which makes each group contiguous, and the weight
// carries the permutation (stored column j holds input column perm[j]); the GEMM gathers its input by
// it (createQuantLinear's perm), a float load puts the dequantized columns back in order.
import { WebinferError, shapeStr } from '../core/errors.js';
import { groupType, QUANT_FORMATS, type GroupBits, type GroupQuantType, type GroupScale, type GroupSize } from '../core/quant.js';
import type { SafetensorsFile, SafetensorsTensorInfo } from './safetensors.js';
import { configGroupFor, configGroups, isObject, ownBytes, type CheckpointTensors, type PresentedWeight, type QuantScheme, type QuantSchemeFactory } from './quant_scheme.js';
import { floatQuantizedScheme, fp8Scheme } from './hf_fp8.js';
import { mxfp4Scheme } from './hf_mxfp4.js';

const OP = 'loadModel';

export type { CheckpointTensors, PresentedWeight, QuantScheme, QuantSchemeFactory } from './quant_scheme.js';

/** The schemes by quant_method. `fp8` (and compressed-tensors' float-quantized, COMPRESSED_TENSORS_FORMATS)
 *  are src/models/hf_fp8.ts's; `mxfp4` (gpt-oss's experts) src/models/hf_mxfp4.ts's. */
export const QUANT_SCHEMES: Record<string, QuantSchemeFactory> = {
  mlx: (qc) => mlxScheme(qc),
  awq: (qc) => awqScheme(qc),
  gptq: (qc) => gptqScheme(qc),
  'compressed-tensors': (qc, config) => compressedTensorsScheme(qc, config),
  fp8: (qc) => fp8Scheme(qc),
  mxfp4: (qc) => mxfp4Scheme(qc),
};

/** compressed-tensors' formats by `format` (pack-quantized here; float-quantized is hf_fp8.ts's). */
export const COMPRESSED_TENSORS_FORMATS: Record<string, QuantSchemeFactory> = {
  'pack-quantized': (qc) => packQuantizedScheme(qc),
  'float-quantized': (qc) => floatQuantizedScheme(qc),
};

// ---------------------------------------------------------------------------------------------
// the virtual checkpoint

/** A SafetensorsFile whose quantized weights may carry a column permutation (WeightReader reads it). */
export interface PermutedSafetensorsFile extends SafetensorsFile {
  /** Stored column j of tensor `name` holds input column perm[j]; undefined where none. */
  perm(name: string): Int32Array | undefined;
}


/** The quantization settings of a config.json and the scheme's name, or null for a float checkpoint. */
export function quantSettings(config: object): { method: string; qc: Record<string, unknown> } | null {
  const c = config as Record<string, unknown>;
  const qc = c.quantization_config;
  if (qc !== undefined && qc !== null) {
    if (!isObject(qc)) throw new WebinferError(`${OP}: config.json quantization_config: expected an object, got ${JSON.stringify(qc)}`);
    if (qc.quant_method !== undefined) return { method: String(qc.quant_method), qc };
  }
  // MLX (mlx-lm) writes `quantization` (and mlx-community copies it into quantization_config without a quant_method).
  const mlx = c.quantization ?? qc;
  if (mlx === undefined || mlx === null) return null;
  if (!isObject(mlx)) throw new WebinferError(`${OP}: config.json quantization: expected an object {group_size, bits}, got ${JSON.stringify(mlx)}`);
  return { method: 'mlx', qc: mlx };
}

/**
 * The checkpoint as the engine reads it, where config.json says it is quantized (else null): one
 * virtual file over all of `files`, each quantized module presented as `<prefix>.weight` (or the name the
 * scheme gives: hf_mxfp4.ts's experts) in a group
 * type. Throws a WebinferError naming the scheme and what is wrong (an unsupported scheme or setting,
 * a missing or misshapen part), before anything is uploaded.
 */
export async function hfQuantCheckpoint(config: object, files: readonly SafetensorsFile[]): Promise<PermutedSafetensorsFile | null> {
  const settings = quantSettings(config);
  if (!settings) return null;
  const factory = Object.prototype.hasOwnProperty.call(QUANT_SCHEMES, settings.method) ? QUANT_SCHEMES[settings.method] : undefined;
  if (!factory) {
    throw new WebinferError(`${OP}: quantization_config.quant_method: expected one of ${Object.keys(QUANT_SCHEMES).join(', ')}, got '${settings.method}'`);
  }
  const scheme = factory(settings.qc, config as Record<string, unknown>);
  const where = new Map<string, number>();
  const tensors = new Map<string, SafetensorsTensorInfo>();
  const dups: string[] = [];
  files.forEach((f, i) => {
    for (const [n, info] of f.tensors) {
      if (where.has(n)) dups.push(`${n} (in ${files[where.get(n)!].name} and ${f.name})`);
      else { where.set(n, i); tensors.set(n, info); }
    }
  });
  if (dups.length) throw new WebinferError(`${OP}: the checkpoint holds tensors twice: ${dups.slice(0, 5).join(', ')}${dups.length > 5 ? ` and ${dups.length - 5} more` : ''}`);
  const name = files.length === 1 ? files[0].name : `${files[0]?.name ?? 'checkpoint'} (+${files.length - 1} shards)`;
  const ckpt: CheckpointTensors = { tensors, name, bytes: (n) => files[where.get(n)!].bytes(n) };
  const modules = new Map<string, PresentedWeight>();
  const problems: string[] = [];
  for (const prefix of scheme.modules(ckpt)) {
    try {
      const m = await scheme.present(prefix, ckpt);
      modules.set(m.name ?? `${prefix}.weight`, m);
    } catch (e) {
      if (!(e instanceof WebinferError)) throw e;
      problems.push(e.message.replace(/^loadModel: /, ''));
    }
  }
  if (problems.length) {
    throw new WebinferError(`${OP}: ${scheme.name} checkpoint ${name}: ${problems.length} malformed module${problems.length > 1 ? 's' : ''}:`
      + problems.slice(0, 20).map((p) => `\n  ${p}`).join('') + (problems.length > 20 ? `\n  ... and ${problems.length - 20} more` : ''));
  }
  const hidden = new Set<string>();
  for (const m of modules.values()) for (const p of m.parts) hidden.add(p);
  const out = new Map<string, SafetensorsTensorInfo>();
  for (const [n, info] of tensors) if (!hidden.has(n) && !modules.has(n)) out.set(n, info);
  for (const [n, m] of modules) out.set(n, { dtype: m.type, shape: [...m.shape] });
  return {
    tensors: out,
    metadata: files[0]?.metadata ?? {},
    name,
    bytes: (n) => { const m = modules.get(n); return m ? m.bytes() : ckpt.bytes(n); },
    perm: (n) => modules.get(n)?.perm,
    close: async () => { await Promise.all(files.map((f) => f.close?.())); },
  };
}

// ---------------------------------------------------------------------------------------------
// shared helpers

const SCALE_DTYPES: Readonly<Record<string, GroupScale>> = { F16: 'F16', BF16: 'BF16', F32: 'F32' };
const BITS: readonly number[] = [2, 3, 4, 5, 6, 8];
const SIZES: readonly number[] = [32, 64, 128];

/** A tensor's info, or a named error for a missing one / the wrong dtype or rank. */
function part(ckpt: CheckpointTensors, name: string, dtypes: readonly string[], rank: number): SafetensorsTensorInfo {
  const t = ckpt.tensors.get(name);
  if (!t) throw new WebinferError(`${OP}: missing ${name}`);
  if (!dtypes.includes(t.dtype)) throw new WebinferError(`${OP}: ${name}: expected dtype ${dtypes.join(' or ')}, got ${t.dtype}`);
  if (t.shape.length !== rank) throw new WebinferError(`${OP}: ${name}: expected ${rank} dimension${rank > 1 ? 's' : ''}, got ${shapeStr(t.shape)}`);
  return t;
}

function wantShape(name: string, got: readonly number[], want: readonly number[], why: string): void {
  if (got.length !== want.length || got.some((d, i) => d !== want[i])) {
    throw new WebinferError(`${OP}: ${name}: expected shape ${shapeStr(want)} (${why}), got ${shapeStr(got)}`);
  }
}

/** A copy as 32-bit words. */
async function words(ckpt: CheckpointTensors, name: string): Promise<Uint32Array> {
  return new Uint32Array((await ownBytes(ckpt, name)).buffer);
}

/** Raw scale bits, one per value: u16 (F16/BF16) or u32 (F32). */
async function scaleBits(ckpt: CheckpointTensors, name: string, dtype: GroupScale): Promise<Uint16Array | Uint32Array> {
  const c = await ownBytes(ckpt, name);
  return dtype === 'F32' ? new Uint32Array(c.buffer) : new Uint16Array(c.buffer);
}

/** Values of a small integer tensor (I32 or I64). */
async function ints(ckpt: CheckpointTensors, name: string): Promise<number[]> {
  const t = ckpt.tensors.get(name)!;
  const b = await ckpt.bytes(name);
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const n = t.shape.reduce((a, x) => a * x, 1);
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push(t.dtype === 'I64' ? Number(dv.getBigInt64(8 * i, true)) : dv.getInt32(4 * i, true));
  return out;
}

/** Bits `bits` of a little-endian bit string held in words[at], words[at + stride], ...: value i. */
function bitsAt(w: Uint32Array, at: number, stride: number, i: number, bits: number, mask: number): number {
  const b = i * bits, k = b >>> 5, off = b & 31;
  let v = w[at + k * stride] >>> off;
  if (off + bits > 32) v |= w[at + (k + 1) * stride] << (32 - off);
  return v & mask;
}

function num(qc: Record<string, unknown>, key: string, where: string, allowed: readonly number[], fallback?: number): number {
  const v = qc[key] ?? fallback;
  if (typeof v !== 'number' || !allowed.includes(v)) {
    throw new WebinferError(`${OP}: ${where}.${key}: expected one of ${allowed.join(', ')}, got ${JSON.stringify(v)}`);
  }
  return v;
}


/**
 * Blocks of a Z (integer zero) group type from unpacked values: q [N, K] (one value a byte, input
 * column order), the group of each input column (`groupOf`, length K), and per row n and group g the
 * scale's raw bits and the zero. `perm` (stored column j = input column perm[j]) orders the columns;
 * every block of G stored columns must lie within one group (checked by the caller).
 */
export function encodeZ(o: { bits: number; G: GroupSize; scale: GroupScale; N: number; K: number; q: Uint8Array; groupOf: Int32Array | null;
                              perm?: Int32Array; s(n: number, g: number): number; z(n: number, g: number): number }): { type: GroupQuantType; bytes: Uint8Array } {
  const { bits, G, N, K, q, perm } = o;
  const type = groupType('Z', bits as GroupBits, G, o.scale);
  const f = QUANT_FORMATS[type], gf = f.group!;
  const blocks = K / G;
  const out = new Uint8Array(N * blocks * f.blockBytes);
  const wide = o.scale === 'F32';
  for (let n = 0; n < N; n++) {
    const row = n * K;
    for (let b = 0; b < blocks; b++) {
      let at = (n * blocks + b) * f.blockBytes;
      const c0 = b * G;
      let acc = 0, nb = 0;
      for (let i = 0; i < G; i++) {
        acc |= q[row + (perm ? perm[c0 + i] : c0 + i)] << nb;
        nb += bits;
        while (nb >= 8) { out[at++] = acc & 255; acc >>>= 8; nb -= 8; }
      }
      const k0 = perm ? perm[c0] : c0;
      const g = o.groupOf ? o.groupOf[k0] : 0;
      const s = o.s(n, g), z = o.z(n, g);
      const h = (n * blocks + b) * f.blockBytes + gf.bodyBytes;
      if (wide) { put32(out, h, s); put32(out, h + 4, z); } else { put16(out, h, s); put16(out, h + 2, z); }
    }
  }
  return { type, bytes: out };
}

const put16 = (b: Uint8Array, o: number, v: number) => { b[o] = v & 255; b[o + 1] = (v >>> 8) & 255; };
const put32 = (b: Uint8Array, o: number, v: number) => { put16(b, o, v & 0xffff); put16(b, o + 2, v >>> 16); };

/**
 * The column order and block size for input columns grouped by `gIdx` (g_idx: the group of each input
 * column; null: column k in group ⌊k/groupSize⌋): a stable sort by group (null where already in order),
 * and the largest block of 128, 64, 32 columns such that every group is a whole number of blocks.
 * Throws a named error when g_idx names groups outside [0, groups) or no such block exists.
 */
export function groupLayout(what: string, K: number, groups: number, gIdx: ArrayLike<number> | null, groupSize: number):
    { perm?: Int32Array; G: GroupSize; groupOf: Int32Array } {
  const groupOf = new Int32Array(K);
  for (let k = 0; k < K; k++) {
    const g = gIdx ? gIdx[k] : Math.floor(k / groupSize);
    if (!(Number.isInteger(g) && g >= 0 && g < groups)) {
      throw new WebinferError(`${OP}: ${what}: expected each input column's group in [0, ${groups}), got ${g} at column ${k}`);
    }
    groupOf[k] = g;
  }
  let sorted = true;
  for (let k = 1; k < K; k++) if (groupOf[k] < groupOf[k - 1]) { sorted = false; break; }
  let perm: Int32Array | undefined;
  if (!sorted) {
    // Counting sort: stable.
    const start = new Int32Array(groups + 1);
    for (let k = 0; k < K; k++) start[groupOf[k] + 1]++;
    for (let g = 0; g < groups; g++) start[g + 1] += start[g];
    perm = new Int32Array(K);
    for (let k = 0; k < K; k++) perm[start[groupOf[k]]++] = k;
  }
  // Runs of one group along the stored order: each a multiple of the block.
  let G: GroupSize | null = null;
  for (const cand of [128, 64, 32] as const) {
    if (K % cand) continue;
    let ok = true;
    for (let j = 0; j < K && ok; j += cand) {
      const g = groupOf[perm ? perm[j] : j];
      for (let i = 1; i < cand; i++) if (groupOf[perm ? perm[j + i] : j + i] !== g) { ok = false; break; }
    }
    if (ok) { G = cand; break; }
  }
  if (G === null) {
    const sizes = new Map<number, number>();
    for (let k = 0; k < K; k++) sizes.set(groupOf[k], (sizes.get(groupOf[k]) ?? 0) + 1);
    throw new WebinferError(`${OP}: ${what}: expected groups of input columns that are whole blocks of 128, 64 or 32 columns once sorted by g_idx, `
      + `got group sizes ${[...new Set(sizes.values())].slice(0, 8).join(', ')} over K = ${K}`);
  }
  return { perm, G, groupOf };
}

// ---------------------------------------------------------------------------------------------
// MLX (mlx-lm's affine quantization)

function mlxScheme(qc: Record<string, unknown>): QuantScheme {
  const mode = qc.mode ?? 'affine';
  if (mode !== 'affine') throw new WebinferError(`${OP}: config.json quantization.mode: expected 'affine' (MLX's affine quantization), got ${JSON.stringify(mode)}`);
  const bits = num(qc, 'bits', 'quantization', BITS);
  const groupSize = num(qc, 'group_size', 'quantization', SIZES);
  return {
    name: 'mlx',
    modules: (ckpt) => [...ckpt.tensors.keys()].filter((n) => n.endsWith('.scales')).map((n) => n.slice(0, -'.scales'.length)),
    async present(prefix, ckpt) {
      // mlx-lm's per-module settings: the module's path as a key of `quantization` ({group_size, bits} or false).
      let b = bits, G = groupSize;
      const own = qc[prefix];
      if (own === false) throw new WebinferError(`${OP}: ${prefix}: config.json quantization['${prefix}'] is false (not quantized), yet the checkpoint holds ${prefix}.scales`);
      if (isObject(own)) {
        if (own.mode !== undefined && own.mode !== 'affine') throw new WebinferError(`${OP}: config.json quantization['${prefix}'].mode: expected 'affine', got ${JSON.stringify(own.mode)}`);
        b = num(own, 'bits', `quantization['${prefix}']`, BITS, bits);
        G = num(own, 'group_size', `quantization['${prefix}']`, SIZES, groupSize);
      } else if (own !== undefined && own !== true) {
        throw new WebinferError(`${OP}: config.json quantization['${prefix}']: expected {group_size, bits} or false, got ${JSON.stringify(own)}`);
      }
      const [wn, sn, bn] = [`${prefix}.weight`, `${prefix}.scales`, `${prefix}.biases`];
      const w = part(ckpt, wn, ['U32'], 2);
      const s = part(ckpt, sn, Object.keys(SCALE_DTYPES), 2);
      const bi = part(ckpt, bn, [s.dtype], 2);
      const [N, W] = w.shape;
      const K = (W * 32) / b;
      if (!Number.isInteger(K) || K % G !== 0) {
        throw new WebinferError(`${OP}: ${wn}: expected [out, in·${b}/32] words with in a multiple of group_size ${G}, got ${shapeStr(w.shape)}`);
      }
      wantShape(sn, s.shape, [N, K / G], `[out, in/${G}] for ${b}-bit groups of ${G}`);
      wantShape(bn, bi.shape, [N, K / G], 'as the scales');
      const scale = SCALE_DTYPES[s.dtype];
      const type = groupType('A', b as GroupBits, G as GroupSize, scale);
      return {
        type, shape: [N, K], parts: [wn, sn, bn],
        async bytes() {
          // The weight row is already the blocks' bit string: block g's body is bytes [g·G·b/8, (g+1)·G·b/8) of it.
          const [wb, sb, bb] = [await ckpt.bytes(wn), await ckpt.bytes(sn), await ckpt.bytes(bn)];
          const f = QUANT_FORMATS[type], gf = f.group!;
          const groups = K / G, rowBytes = W * 4, hb = scale === 'F32' ? 4 : 2;
          const out = new Uint8Array(N * groups * f.blockBytes);
          for (let n = 0; n < N; n++) {
            for (let g = 0; g < groups; g++) {
              const o = (n * groups + g) * f.blockBytes, src = n * rowBytes + g * gf.bodyBytes, si = (n * groups + g) * hb;
              out.set(wb.subarray(src, src + gf.bodyBytes), o);
              out.set(sb.subarray(si, si + hb), o + gf.bodyBytes);
              out.set(bb.subarray(si, si + hb), o + gf.bodyBytes + hb);
            }
          }
          return out;
        },
      };
    },
  };
}

// ---------------------------------------------------------------------------------------------
// AutoAWQ (GEMM)

/** AWQ GEMM's nibble order: nibble k of word c holds output column 8c + AWQ_ORDER[k]. */
export const AWQ_ORDER: readonly number[] = [0, 2, 4, 6, 1, 3, 5, 7];

function awqScheme(qc: Record<string, unknown>): QuantScheme {
  const version = String(qc.version ?? 'gemm').toLowerCase();
  if (version !== 'gemm') {
    throw new WebinferError(`${OP}: quantization_config.version: expected 'gemm' (AutoAWQ's GEMM layout; gemv, gemv_fast, exllama, marlin and ipex are not supported), got '${qc.version}'`);
  }
  const bits = num(qc, 'bits', 'quantization_config', [4], qc.w_bit as number | undefined);
  if ((qc.zero_point ?? true) !== true) throw new WebinferError(`${OP}: quantization_config.zero_point: expected true (AWQ without zero points is not supported), got ${JSON.stringify(qc.zero_point)}`);
  const gs = qc.group_size ?? qc.q_group_size;
  if (!(typeof gs === 'number' && (gs === -1 || SIZES.includes(gs)))) throw new WebinferError(`${OP}: quantization_config.group_size: expected one of 32, 64, 128 or -1, got ${JSON.stringify(gs)}`);
  const inv = new Int32Array(8);
  AWQ_ORDER.forEach((col, k) => { inv[col] = k; });
  return {
    name: 'awq',
    modules: (ckpt) => [...ckpt.tensors.keys()].filter((n) => n.endsWith('.qweight')).map((n) => n.slice(0, -'.qweight'.length)),
    async present(prefix, ckpt) {
      const [qn, zn, sn] = [`${prefix}.qweight`, `${prefix}.qzeros`, `${prefix}.scales`];
      const qw = part(ckpt, qn, ['I32'], 2);
      const qz = part(ckpt, zn, ['I32'], 2);
      const s = part(ckpt, sn, Object.keys(SCALE_DTYPES), 2);
      const [K, W] = qw.shape, N = W * 8;
      const groupSize = gs === -1 ? K : gs as number;
      if (K % groupSize) throw new WebinferError(`${OP}: ${qn}: expected [in, out/8] with in a multiple of group_size ${groupSize}, got ${shapeStr(qw.shape)}`);
      const groups = K / groupSize;
      wantShape(zn, qz.shape, [groups, W], `[in/${groupSize}, out/8] for ${qn} ${shapeStr(qw.shape)}`);
      wantShape(sn, s.shape, [groups, N], `[in/${groupSize}, out] for ${qn} ${shapeStr(qw.shape)}`);
      const { G, groupOf } = groupLayout(prefix, K, groups, null, groupSize);
      const scale = SCALE_DTYPES[s.dtype];
      return {
        type: groupType('Z', bits as GroupBits, G, scale), shape: [N, K], parts: [qn, zn, sn],
        async bytes() {
          const [w, z, sc] = [await words(ckpt, qn), await words(ckpt, zn), await scaleBits(ckpt, sn, scale)];
          const q = new Uint8Array(N * K);
          for (let k = 0; k < K; k++) {
            for (let n = 0; n < N; n++) q[n * K + k] = (w[k * W + (n >>> 3)] >>> (4 * inv[n & 7])) & 15;
          }
          return encodeZ({ bits, G, scale, N, K, q, groupOf, s: (n, g) => sc[g * N + n], z: (n, g) => (z[g * W + (n >>> 3)] >>> (4 * inv[n & 7])) & 15 }).bytes;
        },
      };
    },
  };
}

// ---------------------------------------------------------------------------------------------
// GPTQ (AutoGPTQ, gptqmodel, optimum)

function gptqScheme(qc: Record<string, unknown>): QuantScheme {
  const bits = num(qc, 'bits', 'quantization_config', [2, 3, 4, 8]);
  const gs = qc.group_size ?? -1;
  if (!(typeof gs === 'number' && (gs === -1 || (Number.isInteger(gs) && gs > 0)))) throw new WebinferError(`${OP}: quantization_config.group_size: expected a positive integer or -1, got ${JSON.stringify(gs)}`);
  const format = String(qc.checkpoint_format ?? qc.format ?? 'gptq');
  if (format !== 'gptq' && format !== 'gptq_v2') {
    throw new WebinferError(`${OP}: quantization_config.checkpoint_format: expected 'gptq' or 'gptq_v2' (marlin, bitblas, ipex and qqq layouts are not supported), got '${format}'`);
  }
  if (isObject(qc.dynamic) && Object.keys(qc.dynamic).length) {
    throw new WebinferError(`${OP}: quantization_config.dynamic: per-module GPTQ settings are not supported, got ${Object.keys(qc.dynamic).length} rule(s)`);
  }
  // checkpoint_format 'gptq' stores zero − 1 (AutoGPTQ's off-by-one: the sym 4-bit zero 8 is stored 7).
  const zeroOffset = format === 'gptq' ? 1 : 0;
  const mask = (1 << bits) - 1;
  return {
    name: 'gptq',
    modules: (ckpt) => [...ckpt.tensors.keys()].filter((n) => n.endsWith('.qweight')).map((n) => n.slice(0, -'.qweight'.length)),
    async present(prefix, ckpt) {
      const [qn, zn, sn, gn] = [`${prefix}.qweight`, `${prefix}.qzeros`, `${prefix}.scales`, `${prefix}.g_idx`];
      const qw = part(ckpt, qn, ['I32'], 2);
      const qz = part(ckpt, zn, ['I32'], 2);
      const s = part(ckpt, sn, Object.keys(SCALE_DTYPES), 2);
      const [R, N] = qw.shape, K = (R * 32) / bits;
      if (!Number.isInteger(K)) throw new WebinferError(`${OP}: ${qn}: expected [in·${bits}/32, out], got ${shapeStr(qw.shape)}`);
      const groupSize = gs === -1 ? K : gs as number;
      const groups = Math.ceil(K / groupSize);
      const ZW = (N * bits) / 32;
      if (!Number.isInteger(ZW)) throw new WebinferError(`${OP}: ${zn}: expected out·${bits}/32 words a row, got out = ${N}`);
      wantShape(zn, qz.shape, [groups, ZW], `[⌈in/${groupSize}⌉, out·${bits}/32] for ${qn} ${shapeStr(qw.shape)}`);
      wantShape(sn, s.shape, [groups, N], `[⌈in/${groupSize}⌉, out] for ${qn} ${shapeStr(qw.shape)}`);
      let gIdx: number[] | null = null;
      const parts = [qn, zn, sn];
      if (ckpt.tensors.has(gn)) {
        const gi = part(ckpt, gn, ['I32', 'I64'], 1);
        wantShape(gn, gi.shape, [K], `[in] for ${qn} ${shapeStr(qw.shape)}`);
        gIdx = await ints(ckpt, gn);
        parts.push(gn);
      }
      const { perm, G, groupOf } = groupLayout(prefix, K, groups, gIdx, groupSize);
      const scale = SCALE_DTYPES[s.dtype];
      return {
        type: groupType('Z', bits as GroupBits, G, scale), shape: [N, K], parts, perm,
        async bytes() {
          const [w, z, sc] = [await words(ckpt, qn), await words(ckpt, zn), await scaleBits(ckpt, sn, scale)];
          // Column n of qweight is the little-endian bit string of input column n's values (3 bits straddle words).
          const q = new Uint8Array(N * K);
          if (32 % bits === 0) {
            // 2, 4, 8 bits: whole values a word, row r of qweight holding input columns r·pf ...
            const pf = 32 / bits;
            for (let r = 0; r < R; r++) {
              for (let n = 0; n < N; n++) {
                const word = w[r * N + n], o = n * K + r * pf;
                for (let j = 0; j < pf; j++) q[o + j] = (word >>> (j * bits)) & mask;
              }
            }
          } else {
            for (let n = 0; n < N; n++) for (let k = 0; k < K; k++) q[n * K + k] = bitsAt(w, n, N, k, bits, mask);
          }
          return encodeZ({ bits, G, scale, N, K, q, groupOf, perm, s: (n, g) => sc[g * N + n], z: (n, g) => bitsAt(z, g * ZW, 1, n, bits, mask) + zeroOffset }).bytes;
        },
      };
    },
  };
}

// ---------------------------------------------------------------------------------------------
// compressed-tensors (llm-compressor)

function compressedTensorsScheme(qc: Record<string, unknown>, config: Record<string, unknown>): QuantScheme {
  const format = qc.format;
  const factory = typeof format === 'string' && Object.prototype.hasOwnProperty.call(COMPRESSED_TENSORS_FORMATS, format) ? COMPRESSED_TENSORS_FORMATS[format] : undefined;
  if (!factory) {
    throw new WebinferError(`${OP}: quantization_config.format (compressed-tensors): expected one of ${Object.keys(COMPRESSED_TENSORS_FORMATS).join(', ')}, got ${JSON.stringify(format)}`);
  }
  return factory(qc, config);
}

interface CtGroup { targets: string[]; bits: number; symmetric: boolean; strategy: 'group' | 'channel'; groupSize: number }

function packQuantizedScheme(qc: Record<string, unknown>): QuantScheme {
  const groups: CtGroup[] = configGroups(qc, (g, w, at) => {
    if (g.format !== undefined && g.format !== null && g.format !== 'pack-quantized') {
      throw new WebinferError(`${OP}: ${at}.format: expected 'pack-quantized', got ${JSON.stringify(g.format)}`);
    }
    if (g.input_activations !== undefined && g.input_activations !== null) {
      throw new WebinferError(`${OP}: ${at}.input_activations: expected null (weight-only quantization: activations stay float), got ${JSON.stringify(g.input_activations)}`);
    }
    if ((w.type ?? 'int') !== 'int') throw new WebinferError(`${OP}: ${at}.weights.type: expected 'int' (pack-quantized), got ${JSON.stringify(w.type)}`);
    const bits = num(w, 'num_bits', `${at}.weights`, BITS);
    const strategy = w.strategy;
    if (strategy !== 'group' && strategy !== 'channel') throw new WebinferError(`${OP}: ${at}.weights.strategy: expected 'group' or 'channel', got ${JSON.stringify(strategy)}`);
    let groupSize = 0;
    if (strategy === 'group') {
      if (!(typeof w.group_size === 'number' && Number.isInteger(w.group_size) && w.group_size > 0)) throw new WebinferError(`${OP}: ${at}.weights.group_size: expected a positive integer, got ${JSON.stringify(w.group_size)}`);
      groupSize = w.group_size;
    }
    return { bits, symmetric: w.symmetric !== false, strategy, groupSize };
  });
  const groupFor = (prefix: string): CtGroup => configGroupFor(groups, prefix);
  return {
    name: 'compressed-tensors',
    modules: (ckpt) => [...ckpt.tensors.keys()].filter((n) => n.endsWith('.weight_packed')).map((n) => n.slice(0, -'.weight_packed'.length)),
    async present(prefix, ckpt) {
      const grp = groupFor(prefix);
      const { bits, symmetric } = grp;
      const [pn, sn, zn, gn, shn] = ['packed', 'scale', 'zero_point', 'g_idx', 'shape'].map((x) => `${prefix}.weight_${x}`);
      const pw = part(ckpt, pn, ['I32'], 2);
      const s = part(ckpt, sn, Object.keys(SCALE_DTYPES), 2);
      const parts = [pn, sn];
      const pf = Math.floor(32 / bits);
      let N = pw.shape[0], K = pw.shape[1] * pf;
      if (ckpt.tensors.has(shn)) {
        const sh = part(ckpt, shn, ['I32', 'I64'], 1);
        wantShape(shn, sh.shape, [2], '[out, in]');
        [N, K] = await ints(ckpt, shn);
        parts.push(shn);
      }
      wantShape(pn, pw.shape, [N, Math.ceil(K / pf)], `[out, ⌈in/${pf}⌉] for ${bits}-bit values of a weight [${N}, ${K}]`);
      const groupSize = grp.strategy === 'channel' ? K : grp.groupSize;
      const ng = Math.ceil(K / groupSize);
      wantShape(sn, s.shape, [N, ng], grp.strategy === 'channel' ? '[out, 1] (channel strategy)' : `[out, ⌈in/${groupSize}⌉]`);
      const mask = (1 << bits) - 1;
      let zp: string | null = null;
      if (!symmetric) {
        const z = part(ckpt, zn, ['I32'], 2);
        wantShape(zn, z.shape, [Math.ceil(N / pf), ng], `[⌈out/${pf}⌉, ${ng}]: asymmetric zero points packed along the output dimension`);
        zp = zn;
        parts.push(zn);
      } else if (ckpt.tensors.has(zn)) {
        parts.push(zn);   // a symmetric group's zero is 0 (stored 2^(bits−1) with the values' offset)
      }
      let gIdx: number[] | null = null;
      if (ckpt.tensors.has(gn)) {
        const gi = part(ckpt, gn, ['I32', 'I64'], 1);
        wantShape(gn, gi.shape, [K], '[in]');
        gIdx = await ints(ckpt, gn);
        parts.push(gn);
      }
      const { perm, G, groupOf } = groupLayout(prefix, K, ng, gIdx, groupSize);
      const scale = SCALE_DTYPES[s.dtype];
      const PW = pw.shape[1];
      return {
        type: groupType('Z', bits as GroupBits, G, scale), shape: [N, K], parts, perm,
        async bytes() {
          const [w, sc] = [await words(ckpt, pn), await scaleBits(ckpt, sn, scale)];
          const z = zp ? await words(ckpt, zp) : null;
          // Values stored unsigned (offset by 2^(bits−1)), pf of them a word from the lowest bits up.
          const q = new Uint8Array(N * K);
          for (let n = 0; n < N; n++) for (let k = 0; k < K; k++) q[n * K + k] = (w[n * PW + Math.floor(k / pf)] >>> (bits * (k % pf))) & mask;
          const offset = 1 << (bits - 1);
          return encodeZ({ bits, G, scale, N, K, q, groupOf, perm, s: (n, g) => sc[n * ng + g],
            z: z ? (n, g) => (z[Math.floor(n / pf) * ng + g] >>> (bits * (n % pf))) & mask : () => offset }).bytes;
        },
      };
    },
  };
}
