// Checkpoint tensors onto the GPU: read one tensor at a time from its safetensors file (validated
// first, so nothing is taken before a bad checkpoint is refused), converted to the storage dtype the
// model asked for, rows of several tensors concatenated where the model fuses projections (k|v,
// gate|up), with progress reported in checkpoint bytes. Quantized tensors (a GGUF file's, SPEC §8) keep
// their blocks on the GPU (createQuantLinear; a fused projection of several types stacks them), or,
// where the caller asked for a float dtype, are dequantized on the host as ggml does.
import { decodeBf16, decodeF16, encodeBf16, encodeF16 } from '../core/dtype.js';
import { WebinferError } from '../core/errors.js';
import type { Runtime } from '../core/runtime.js';
import type { Tensor } from '../core/tensor.js';
import { createLinear, createQuantLinear, stackLinears, type LinearWeight } from '../ops/gemm.js';
import { createExperts, createQuantExperts, type ExpertWeights } from '../ops/moe.js';
import { isQuantType, QUANT_FORMATS, quantRowBytes, type GgmlQuantType, type QuantType } from '../core/quant.js';
import { dequantizeRows } from '../reference/quant.js';
import { quantizeRows } from './quantize.js';

/**
 * Quantize on load (loadModel's dtype 'q8' | 'q4'): the linear layers (and the embedding) of a 16- or
 * 32-bit checkpoint quantized as they upload. 'q8': ggml's Q8_0 (blocks of 32, an f16 scale: ggml's own
 * rounding). 'q4': Q4_K where K is a multiple of 256 (super-blocks of 8 × 32 with 6-bit scales and
 * mins: src/models/quantize.ts's quantizer, not llama.cpp's search), else Q4_0 (ggml's rounding) where K
 * is a multiple of 32; a layer whose K is neither stays in the float dtype.
 */
export type QuantizeOnLoad = 'q8' | 'q4';

export function quantizeOnLoadType(q: QuantizeOnLoad, K: number): 'Q8_0' | 'Q4_K' | 'Q4_0' | null {
  if (q === 'q8') return K % 32 === 0 ? 'Q8_0' : null;
  return K % 256 === 0 ? 'Q4_K' : K % 32 === 0 ? 'Q4_0' : null;
}
import { tensorByteSize, type SafetensorsFile } from '../formats/safetensors.js';
import type { PermutedSafetensorsFile } from '../formats/hf_quant.js';
import type { ResolvedTensor } from './schema.js';

export type WeightDType = 'f32' | 'f16' | 'bf16';

const SOURCE: Readonly<Record<string, WeightDType>> = { F32: 'f32', F16: 'f16', BF16: 'bf16' };

/**
 * The storage a checkpoint's float weights get when the caller names none: their own dtype (F32 -> f32...),
 * the most common one. `matrices`: count only tensors of 2 dimensions, and give this dtype where there
 * are none (a quantized file's float tensors are its norms).
 */
export function checkpointDType(resolved: ReadonlyMap<string, ResolvedTensor>, matrices?: WeightDType): WeightDType {
  const counts = new Map<WeightDType, number>();
  for (const r of resolved.values()) {
    if (matrices && r.shape.length < 2) continue;
    const d = SOURCE[r.dtype];
    if (d) counts.set(d, (counts.get(d) ?? 0) + r.shape.reduce((a, b) => a * b, 1));
  }
  let best: WeightDType = matrices ?? 'f32', n = -1;
  for (const [d, c] of counts) if (c > n) { best = d; n = c; }
  return best;
}

// NaN and ±Inf are the floats whose exponent bits are all ones: f32 0x7f800000, f16 0x7c00, bf16 0x7f80.
// Masked and offset so that such an exponent carries into the top bit (f16: 0x7c00 + 0x0400 = 0x8000,
// any other exponent stays below), the words of a chunk are OR-ed without a branch and the chunk looked
// at only when its top bit is set: about 4 GB/s of f32 on one core, a fraction of reading the file.
const CHUNK = 4096;

/** Index of the first NaN or ±Inf in `data` (f32 values, or f16 / bf16 bit patterns as `dtype` says), or -1. */
export function firstNonFinite(data: Float32Array | Uint16Array, dtype: WeightDType): number {
  if (dtype === 'f32') {
    const u = new Uint32Array(data.buffer, data.byteOffset, data.length);
    const M = 0x7f800000, K = 0x00800000;
    let i = 0;
    for (; i + CHUNK <= u.length; i += CHUNK) {
      let acc = 0;
      for (let j = i; j < i + CHUNK; j += 4) acc |= ((u[j] & M) + K) | ((u[j + 1] & M) + K) | ((u[j + 2] & M) + K) | ((u[j + 3] & M) + K);
      if (acc < 0) return firstAllOnes(u, M, i, i + CHUNK);
    }
    return firstAllOnes(u, M, i, u.length);
  }
  const M = dtype === 'f16' ? 0x7c00 : 0x7f80, K = dtype === 'f16' ? 0x0400 : 0x0080;
  const h = data as Uint16Array;
  if (h.byteOffset % 4 !== 0) return firstAllOnes(h, M, 0, h.length);
  // Two values a word.
  const w = new Uint32Array(h.buffer, h.byteOffset, h.length >> 1);
  const M2 = (M | (M << 16)) >>> 0, K2 = K | (K << 16);
  let i = 0;
  for (; i + CHUNK <= w.length; i += CHUNK) {
    let acc = 0;
    for (let j = i; j < i + CHUNK; j += 4) acc |= ((w[j] & M2) + K2) | ((w[j + 1] & M2) + K2) | ((w[j + 2] & M2) + K2) | ((w[j + 3] & M2) + K2);
    if (acc & 0x80008000) return firstAllOnes(h, M, 2 * i, 2 * (i + CHUNK));
  }
  return firstAllOnes(h, M, 2 * i, h.length);
}

function firstAllOnes(a: Uint32Array | Uint16Array, mask: number, from: number, to: number): number {
  for (let i = from; i < to; i++) if (((a[i] & mask) >>> 0) === mask >>> 0) return i;
  return -1;
}

/** Byte offsets of the f16 scale fields (d, and dmin or m) in a block of each type (ggml-common.h). */
const F16_SCALES: Readonly<Record<GgmlQuantType, readonly number[]>> = {
  Q8_0: [0], Q4_0: [0], Q4_1: [0, 2], Q5_0: [0], Q5_1: [0, 2], Q2_K: [80, 82], Q3_K: [108], Q4_K: [0, 2],
  Q5_K: [0, 2], Q6_K: [208], IQ4_NL: [0], IQ4_XS: [0], MXFP4: [],
};

/**
 * The first block of `type` in `bytes` whose scale is NaN or ±Inf (an f16 field with its exponent all
 * ones; MXFP4's E8M0 exponent 0xFF, its NaN), as { block, field: the field's offset in the block }, or
 * null. The other fields are small integers: a block's values are finite when its scales are.
 */
export function firstNonFiniteBlock(type: QuantType, bytes: Uint8Array): { block: number; field: number } | null {
  const { blockBytes } = QUANT_FORMATS[type];
  const n = Math.floor(bytes.byteLength / blockBytes);
  if (type === 'MXFP4') {
    for (let b = 0; b < n; b++) if (bytes[b * blockBytes] === 0xff) return { block: b, field: 0 };
    return null;
  }
  const g = QUANT_FORMATS[type].group;
  if (g) {
    // The head's float fields (s, and A's b), and an FP8 body's NaN bytes (0x7f, 0xff).
    const h = g.bodyBytes, wide = g.scale === 'F32';
    const fields = g.kind === 'A' ? [h, h + (wide ? 4 : 2)] : [h];
    // The byte holding the exponent's top bits, and the mask that is all ones for NaN / ±Inf.
    const [hi, mask] = wide ? [3, 0x7f] : g.scale === 'F16' ? [1, 0x7c] : [1, 0x7f];
    const lo = (o: number) => wide ? (bytes[o + 2] & 0x80) === 0x80 : g.scale === 'F16' ? true : (bytes[o] & 0x80) === 0x80;
    for (let b = 0; b < n; b++) {
      const o = b * blockBytes;
      for (const f of fields) if ((bytes[o + f + hi] & mask) === mask && lo(o + f)) return { block: b, field: f };
      if (g.kind === 'F') for (let i = 0; i < g.bodyBytes; i++) if ((bytes[o + i] & 0x7f) === 0x7f) return { block: b, field: i };
    }
    return null;
  }
  for (const f of F16_SCALES[type as GgmlQuantType]) {
    for (let b = 0, o = f + 1; b < n; b++, o += blockBytes) if ((bytes[o] & 0x7c) === 0x7c) return { block: b, field: f };
  }
  return null;
}

const sumLength = (parts: readonly { length: number }[]) => parts.reduce((a, p) => a + p.length, 0);

/** `parts` one after the other in `out` (of their summed length). */
/** Whether two input permutations (createQuantLinear's perm) are the same, none included. */
function samePermutation(a: Int32Array | undefined, b: Int32Array | undefined): boolean {
  return a === b || (!!a && !!b && a.length === b.length && a.every((v, i) => v === b[i]));
}

function joined<T extends Uint8Array | Uint16Array | Float32Array>(parts: readonly (Uint8Array | Uint16Array | Float32Array)[], out: T): T {
  let at = 0;
  for (const p of parts) { out.set(p as never, at); at += p.length; }
  return out;
}

export class WeightReader {
  readonly totalBytes: number;
  private loaded = 0;
  /** Every weight handed out so far: a load that fails partway destroys them (destroyLoaded). */
  private readonly made: { destroy(): void }[] = [];

  /**
   * keepQuantized: linear layers of quantized tensors stay quantized on the GPU (else every tensor is
   * read as the dtype asked for). allowNonFinite: upload NaN and ±Inf weights as they are, where
   * by default every tensor is scanned as it is read and one holding any is refused with its name.
   */
  constructor(private readonly files: readonly SafetensorsFile[], private readonly resolved: ReadonlyMap<string, ResolvedTensor>,
              private readonly onProgress?: (loadedBytes: number, totalBytes: number) => void, private readonly keepQuantized = false,
              private readonly quantize?: QuantizeOnLoad, private readonly allowNonFinite = false) {
    let total = 0;
    for (const r of resolved.values()) {
      total += isQuantType(r.dtype) ? quantRowBytes(r.dtype, r.shape[r.shape.length - 1]) * r.shape.slice(0, -1).reduce((a, b) => a * b, 1) : tensorByteSize(r);
    }
    this.totalBytes = total;
    onProgress?.(0, total);
  }

  private keep<T extends { destroy(): void }>(w: T): T {
    this.made.push(w);
    return w;
  }

  /**
   * Destroys every weight this reader has handed out (each destroy() is idempotent): a load that fails
   * partway, where the architecture may not hold them all yet (a layer's weights are kept once all of
   * that layer's are read).
   */
  destroyLoaded(): void {
    for (const w of this.made.splice(0)) w.destroy();
  }

  has(name: string): boolean {
    return this.resolved.has(name);
  }

  shape(name: string): number[] {
    return this.info(name).shape;
  }

  /** True when tensor `name` is stored quantized in the checkpoint (a GGUF block type or a group type). */
  quantized(name: string): boolean {
    return isQuantType(this.info(name).dtype);
  }

  private info(name: string): ResolvedTensor {
    const r = this.resolved.get(name);
    if (!r) throw new WebinferError(`loadModel: the checkpoint has no tensor '${name}'`);
    return r;
  }

  /** A quantized tensor's column order (formats/hf_quant.ts: GPTQ's desc_act): stored column j holds input column perm[j]. */
  private perm(name: string): Int32Array | undefined {
    const r = this.info(name);
    return (this.files[r.file] as Partial<PermutedSafetensorsFile>).perm?.(name);
  }

  /** One tensor's values in `dtype`'s representation (f32 values, or f16/bf16 bit patterns). */
  async read(name: string, dtype: WeightDType): Promise<Float32Array | Uint16Array> {
    const r = this.info(name);
    const bytes = await this.files[r.file].bytes(r.source ?? name);
    if (isQuantType(r.dtype)) {
      this.checkBlocks(name, r.dtype, bytes);
      const K = r.shape[r.shape.length - 1];
      let f = Float32Array.from(dequantizeRows(r.dtype, bytes, bytes.length / quantRowBytes(r.dtype, K), K));
      const perm = this.perm(name);
      if (perm) {
        // Columns back in input order.
        const u = new Float32Array(f.length);
        for (let o = 0; o < f.length; o += K) for (let j = 0; j < K; j++) u[o + perm[j]] = f[o + j];
        f = u;
      }
      this.progress(bytes.byteLength);
      const out = dtype === 'f32' ? f : dtype === 'f16' ? encodeF16(f) : encodeBf16(f);
      this.checkValues(name, out, dtype, r.dtype, f);
      return out;
    }
    const src = SOURCE[r.dtype];
    if (!src) throw new WebinferError(`loadModel: tensor '${name}': expected F32, F16, BF16 or a quantized type, got ${r.dtype}`);
    // A copy: the bytes may sit at an offset no wider typed array can view.
    const aligned = new Uint8Array(bytes.byteLength);
    aligned.set(bytes);
    let out: Float32Array | Uint16Array, f: Float32Array | null = null;
    if (src === 'f32') {
      f = new Float32Array(aligned.buffer);
      out = dtype === 'f32' ? f : dtype === 'f16' ? encodeF16(f) : encodeBf16(f);
    } else {
      const bits = new Uint16Array(aligned.buffer);
      if (dtype === src) out = bits;
      else {
        f = src === 'f16' ? decodeF16(bits) : decodeBf16(bits);
        out = dtype === 'f32' ? f : dtype === 'f16' ? encodeF16(f) : encodeBf16(f);
      }
    }
    // What goes to the GPU is scanned: the checkpoint's own NaN and ±Inf, and values the storage dtype
    // cannot hold (f32 or bf16 past 65504 as f16).
    this.checkValues(name, out, dtype, r.dtype, f ?? (() => (src === 'f16' ? decodeF16 : decodeBf16)(out as Uint16Array)));
    this.progress(bytes.byteLength);
    return out;
  }

  /**
   * Refuses values of tensor `name` that are not finite as uploaded (`out` in `dtype`), unless the
   * caller allowed them. `source` gives the checkpoint's values (as f32) to tell its own NaN / ±Inf from
   * a value the dtype overflows; it is only computed when one is found.
   */
  private checkValues(name: string, out: Float32Array | Uint16Array, dtype: WeightDType, sourceType: string,
                      source: Float32Array | (() => Float32Array)): void {
    if (this.allowNonFinite) return;
    const i = firstNonFinite(out, dtype);
    if (i < 0) return;
    const v = (typeof source === 'function' ? source() : source)[i];
    const stored = dtype === 'f32' ? (out as Float32Array)[i] : (dtype === 'f16' ? decodeF16 : decodeBf16)(Uint16Array.of((out as Uint16Array)[i]))[0];
    if (Number.isFinite(v)) {
      throw new WebinferError(`loadModel: tensor '${name}': expected values ${dtype} holds (load with dtype 'f32'${dtype === 'f16' ? " or 'bf16'" : ''}, `
        + `or allowNonFinite: true to keep them), got ${v} at element ${i} (${sourceType}), which is ${stored} as ${dtype}`);
    }
    throw new WebinferError(`loadModel: tensor '${name}': expected finite weights (or allowNonFinite: true to load them as they are), `
      + `got ${v} at element ${i}`);
  }

  /** Refuses quantized blocks of tensor `name` whose scale is not finite, unless the caller allowed them. */
  private checkBlocks(name: string, type: QuantType, bytes: Uint8Array, madeHere = false): void {
    if (this.allowNonFinite) return;
    const bad = firstNonFiniteBlock(type, bytes);
    if (!bad) return;
    const { blockElems, blockBytes } = QUANT_FORMATS[type];
    const o = bad.block * blockBytes + bad.field;
    const g = QUANT_FORMATS[type].group;
    const scale = type === 'MXFP4' ? 'NaN (E8M0 0xff)'
      : g && g.kind === 'F' && bad.field < g.bodyBytes ? `NaN (E4M3 0x${bytes[o].toString(16)})`
      : g ? String(g.scale === 'F32' ? new DataView(bytes.buffer, bytes.byteOffset).getFloat32(o, true)
        : (g.scale === 'F16' ? decodeF16 : decodeBf16)(Uint16Array.of(bytes[o] | (bytes[o + 1] << 8)))[0])
      : String(decodeF16(Uint16Array.of(bytes[o] | (bytes[o + 1] << 8)))[0]);
    const what = g && bad.field < g.bodyBytes ? 'value' : 'scale';
    throw new WebinferError(`loadModel: tensor '${name}': expected finite weights (or allowNonFinite: true to load them as they are), got a ${type} block `
      + `(elements ${bad.block * blockElems}..${(bad.block + 1) * blockElems - 1}) whose ${what} at byte ${bad.field} is ${scale}`
      + (madeHere ? ` (quantized on load: its values reach past what the ${type} scale holds; load with a float dtype)` : ''));
  }

  /** A quantized tensor's blocks as the checkpoint holds them (GGUF's, or a group type's as formats/hf_quant.ts
   *  presents them), checked for non-finite scales and counted as read. */
  private async blocks(name: string): Promise<Uint8Array> {
    const r = this.info(name);
    const data = await this.files[r.file].bytes(r.source ?? name);
    this.checkBlocks(name, r.dtype as QuantType, data);
    this.progress(data.byteLength);
    return data;
  }

  private progress(bytes: number): void {
    this.loaded += bytes;
    this.onProgress?.(this.loaded, this.totalBytes);
  }

  /** Several tensors' rows, one after the other (the fused projections), in `dtype`. */
  async concat(names: readonly string[], dtype: WeightDType): Promise<Float32Array | Uint16Array> {
    const parts = [];
    for (const n of names) parts.push(await this.read(n, dtype));
    const len = sumLength(parts);
    return joined(parts, dtype === 'f32' ? new Float32Array(len) : new Uint16Array(len));
  }

  /** A linear layer from one or several [rows, K] tensors stacked by rows, with their biases (f32). */
  async linear(rt: Runtime, names: readonly string[], dtype: WeightDType, biases?: readonly string[]): Promise<LinearWeight> {
    const shapes = names.map((n) => this.shape(n));
    const K = shapes[0][1];
    const quantized = names.filter((n) => isQuantType(this.info(n).dtype));
    if (this.keepQuantized && quantized.length) {
      if (quantized.length < names.length) {
        throw new WebinferError(`loadModel: ${names.join(' | ')}: a fused projection mixes quantized and float tensors `
          + `(${names.map((n) => this.info(n).dtype).join(', ')}); load with dtype 'f32', 'f16' or 'bf16' to dequantize it`);
      }
      const bias = biases ? (await this.concat(biases, 'f32')) as Float32Array : undefined;
      // Neighbouring tensors of one type (and one input permutation) go up as one weight, their rows one
      // after the other: the product of a part is a dispatch, and a GGUF's q | k | v and gate | up are
      // separate tensors (the H200's 1B Q4_0 step ran 165 dispatches where bf16's ran 117). Tensors of
      // other types (Q4_K_M's Q6_K attn_v) stack beside them as parts of their own.
      const runs: { type: QuantType; perm: Int32Array | undefined; names: string[]; rows: number }[] = [];
      for (const [i, n] of names.entries()) {
        const type = this.info(n).dtype as QuantType;   // every one of them: checked above
        const perm = this.perm(n);
        const last = runs[runs.length - 1];
        if (last && last.type === type && samePermutation(last.perm, perm)) {
          last.names.push(n);
          last.rows += shapes[i][0];
        } else {
          runs.push({ type, perm, names: [n], rows: shapes[i][0] });
        }
      }
      const parts: LinearWeight[] = [];
      try {
        for (const r of runs) {
          const blocks: Uint8Array[] = [];
          for (const n of r.names) blocks.push(await this.blocks(n));
          const data = blocks.length === 1 ? blocks[0] : joined(blocks, new Uint8Array(sumLength(blocks)));
          parts.push(createQuantLinear(rt, { data, N: r.rows, K, type: r.type, bias: runs.length === 1 ? bias : undefined, perm: r.perm }));
        }
        return this.keep(parts.length === 1 ? parts[0] : stackLinears(rt, parts, bias));
      } catch (e) {
        for (const p of parts) p.destroy();
        throw e;
      }
    }
    const N = shapes.reduce((a, s) => a + s[0], 0);
    const bias = biases ? (await this.concat(biases, 'f32')) as Float32Array : undefined;
    const q = this.quantize ? quantizeOnLoadType(this.quantize, K) : null;
    if (q) {
      const values = (await this.concat(names, 'f32')) as Float32Array;
      const data = quantizeRows(q, values, N, K);
      this.checkBlocks(names.join(' | '), q, data, true);
      return this.keep(createQuantLinear(rt, { data, N, K, type: q, bias }));
    }
    const data = await this.concat(names, dtype);
    return this.keep(createLinear(rt, { data, N, K, dtype, bias }));
  }

  /**
   * Linear layers from the rows of one [heads · Σ sizes, K] tensor: layer j takes, of every head h, the
   * sizes[j] rows after those of the layers before it (DeepSeek's q and kv_a projections, whose heads
   * interleave nope and rope rows). Quantized rows keep their blocks; a bias is split the same way.
   */
  async splitLinear(rt: Runtime, name: string, heads: number, sizes: readonly number[], dtype: WeightDType, biasName?: string): Promise<LinearWeight[]> {
    const [rows, K] = this.shape(name);
    const per = sizes.reduce((a, b) => a + b, 0);
    if (rows !== heads * per) {
      throw new WebinferError(`loadModel: tensor '${name}': expected ${heads * per} rows (${heads} heads of ${sizes.join(' + ')}), got ${rows}`);
    }
    const bias = biasName ? (await this.read(biasName, 'f32')) as Float32Array : undefined;
    const part = <T extends Uint8Array | Float32Array | Uint16Array>(src: T, unit: number, j: number): T => {
      const off = sizes.slice(0, j).reduce((a, b) => a + b, 0), n = sizes[j];
      const out = new (src.constructor as new (len: number) => T)(heads * n * unit);
      for (let h = 0; h < heads; h++) out.set(src.subarray((h * per + off) * unit, (h * per + off + n) * unit) as never, h * n * unit);
      return out;
    };
    const info = this.info(name);
    const out: LinearWeight[] = [];
    try {
      if (this.keepQuantized && isQuantType(info.dtype)) {
        const type = info.dtype;
        const data = await this.blocks(name);
        const perm = this.perm(name);
        sizes.forEach((n, j) => out.push(createQuantLinear(rt, { data: part(data, quantRowBytes(type, K), j), N: heads * n, K, type, bias: bias && part(bias, 1, j), perm })));
      } else {
        const q = this.quantize ? quantizeOnLoadType(this.quantize, K) : null;
        const values = await this.read(name, q ? 'f32' : dtype);
        sizes.forEach((n, j) => {
          const rowsOf = part(values, K, j), b = bias && part(bias, 1, j);
          if (!q) {
            out.push(createLinear(rt, { data: rowsOf, N: heads * n, K, dtype, bias: b }));
            return;
          }
          const data = quantizeRows(q, rowsOf as Float32Array, heads * n, K);
          this.checkBlocks(name, q, data, true);
          out.push(createQuantLinear(rt, { data, N: heads * n, K, type: q, bias: b }));
        });
      }
    } catch (e) {
      for (const w of out) w.destroy();
      throw e;
    }
    for (const w of out) this.keep(w);
    return out;
  }

  /**
   * A MoE layer's routed experts (E of [2I, H] gate|up and [H, I] down) under `prefix` (`...mlp.experts.`):
   * transformers 5's packed gate_up_proj / down_proj, or per-expert {e}.gate_proj.weight ... Quantized
   * packed tensors (a GGUF's) keep their blocks; quantize-on-load quantizes float ones.
   */
  async experts(rt: Runtime, prefix: string, E: number, H: number, I: number, dtype: WeightDType): Promise<ExpertWeights> {
    const packed = this.has(`${prefix}gate_up_proj`);
    if (packed && this.keepQuantized) {
      const [gu, dn] = [this.info(`${prefix}gate_up_proj`), this.info(`${prefix}down_proj`)];
      if (isQuantType(gu.dtype) || isQuantType(dn.dtype)) {
        if (!isQuantType(gu.dtype) || !isQuantType(dn.dtype)) {
          throw new WebinferError(`loadModel: ${prefix}gate_up_proj (${gu.dtype}) and down_proj (${dn.dtype}): experts mix quantized and float weights; `
            + "load with dtype 'f32', 'f16' or 'bf16' to dequantize them");
        }
        const gateUp = await this.blocks(`${prefix}gate_up_proj`);
        const down = await this.blocks(`${prefix}down_proj`);
        return this.keep(createQuantExperts(rt, { E, H, I, gateUpType: gu.dtype, gateUp, downType: dn.dtype, down }));
      }
    }
    // (Experts whose columns are permuted, formats/hf_quant.ts's desc_act, are dequantized below: the expert products take no perm.)
    const permuted = () => Array.from({ length: E }, (_, e) => ['gate_proj', 'up_proj', 'down_proj'].some((m) => this.perm(`${prefix}${e}.${m}.weight`))).some(Boolean);
    if (!packed && this.keepQuantized && isQuantType(this.info(`${prefix}0.gate_proj.weight`).dtype) && !permuted()) {
      // Per-expert quantized tensors (an HF quantized checkpoint's, e.g. DeepSeek-V3's FP8 experts):
      // their blocks stacked as createQuantExperts takes them, gate rows then up rows of each expert.
      const names = (e: number) => ['gate_proj', 'up_proj', 'down_proj'].map((m) => `${prefix}${e}.${m}.weight`);
      const [gt, , dt] = names(0).map((n) => this.info(n).dtype);
      const gateUp: Uint8Array[] = [], down: Uint8Array[] = [];
      for (let e = 0; e < E; e++) {
        const ns = names(e);
        ns.forEach((n, j) => {
          const t = this.info(n).dtype;
          if (t !== (j < 2 ? gt : dt)) {
            throw new WebinferError(`loadModel: ${n}: expected ${j < 2 ? gt : dt} as ${names(0)[j]} (the experts of a layer share their storage), got ${t}`);
          }
        });
        for (const [j, n] of ns.entries()) (j < 2 ? gateUp : down).push(await this.blocks(n));
      }
      return this.keep(createQuantExperts(rt, { E, H, I, gateUpType: gt as QuantType, gateUp: joined(gateUp, new Uint8Array(sumLength(gateUp))),
        downType: dt as QuantType, down: joined(down, new Uint8Array(sumLength(down))) }));
    }
    const q = this.quantize ? [quantizeOnLoadType(this.quantize, H), quantizeOnLoadType(this.quantize, I)] : null;
    const as: WeightDType = q && q[0] && q[1] ? 'f32' : dtype;
    let gateUp: Float32Array | Uint16Array, down: Float32Array | Uint16Array;
    if (packed) {
      // transformers 5's packed layout: [E, 2I, H] gate rows first, and [E, H, I].
      gateUp = await this.read(`${prefix}gate_up_proj`, as);
      down = await this.read(`${prefix}down_proj`, as);
    } else {
      gateUp = as === 'f32' ? new Float32Array(E * 2 * I * H) : new Uint16Array(E * 2 * I * H);
      down = as === 'f32' ? new Float32Array(E * H * I) : new Uint16Array(E * H * I);
      for (let e = 0; e < E; e++) {
        const x = `${prefix}${e}.`;
        gateUp.set((await this.read(`${x}gate_proj.weight`, as)) as never, e * 2 * I * H);
        gateUp.set((await this.read(`${x}up_proj.weight`, as)) as never, (e * 2 * I + I) * H);
        down.set((await this.read(`${x}down_proj.weight`, as)) as never, e * H * I);
      }
    }
    if (q && q[0] && q[1]) {
      const gu = quantizeRows(q[0], gateUp as Float32Array, E * 2 * I, H), dn = quantizeRows(q[1], down as Float32Array, E * H, I);
      this.checkBlocks(`${prefix}gate_up_proj`, q[0], gu, true);
      this.checkBlocks(`${prefix}down_proj`, q[1], dn, true);
      return this.keep(createQuantExperts(rt, { E, H, I, gateUpType: q[0], gateUp: gu, downType: q[1], down: dn }));
    }
    return this.keep(createExperts(rt, { E, H, I, dtype, gateUp, down }));
  }

  /** A vector (norm weights) as f32. */
  async vector(rt: Runtime, name: string): Promise<Tensor> {
    const v = (await this.read(name, 'f32')) as Float32Array;
    return this.keep(rt.tensor(v, [v.length], 'f32'));
  }
}
