// Checkpoint tensors onto the GPU: read one tensor at a time from its safetensors file (validated
// first, so nothing is taken before a bad checkpoint is refused), converted to the storage dtype the
// model asked for, rows of several tensors concatenated where the model fuses projections (k|v,
// gate|up), with progress reported in checkpoint bytes.
import { decodeBf16, decodeF16, encodeBf16, encodeF16 } from '../core/dtype.js';
import { WebinferError } from '../core/errors.js';
import type { Runtime } from '../core/runtime.js';
import type { Tensor } from '../core/tensor.js';
import { createLinear, type LinearWeight } from '../ops/gemm.js';
import { tensorByteSize, type SafetensorsFile } from './safetensors.js';
import type { ResolvedTensor } from './schema.js';

export type WeightDType = 'f32' | 'f16' | 'bf16';

const SOURCE: Readonly<Record<string, WeightDType>> = { F32: 'f32', F16: 'f16', BF16: 'bf16' };

/** The storage a checkpoint's weights get when the caller names none: their own dtype (F32 -> f32...). */
export function checkpointDType(resolved: ReadonlyMap<string, ResolvedTensor>): WeightDType {
  const counts = new Map<WeightDType, number>();
  for (const r of resolved.values()) {
    const d = SOURCE[r.dtype];
    if (d) counts.set(d, (counts.get(d) ?? 0) + r.shape.reduce((a, b) => a * b, 1));
  }
  let best: WeightDType = 'f32', n = -1;
  for (const [d, c] of counts) if (c > n) { best = d; n = c; }
  return best;
}

export class WeightReader {
  readonly totalBytes: number;
  private loaded = 0;

  constructor(private readonly files: readonly SafetensorsFile[], private readonly resolved: ReadonlyMap<string, ResolvedTensor>,
              private readonly onProgress?: (loadedBytes: number, totalBytes: number) => void) {
    let total = 0;
    for (const r of resolved.values()) total += tensorByteSize(r);
    this.totalBytes = total;
    onProgress?.(0, total);
  }

  has(name: string): boolean {
    return this.resolved.has(name);
  }

  shape(name: string): number[] {
    return this.info(name).shape;
  }

  private info(name: string): ResolvedTensor {
    const r = this.resolved.get(name);
    if (!r) throw new WebinferError(`loadModel: the checkpoint has no tensor '${name}'`);
    return r;
  }

  /** One tensor's values in `dtype`'s representation (f32 values, or f16/bf16 bit patterns). */
  async read(name: string, dtype: WeightDType): Promise<Float32Array | Uint16Array> {
    const r = this.info(name);
    const bytes = await this.files[r.file].bytes(name);
    const src = SOURCE[r.dtype];
    if (!src) throw new WebinferError(`loadModel: tensor '${name}': expected F32, F16 or BF16, got ${r.dtype}`);
    // A copy: the bytes may sit at an offset no wider typed array can view.
    const aligned = new Uint8Array(bytes.byteLength);
    aligned.set(bytes);
    let out: Float32Array | Uint16Array;
    if (src === 'f32') {
      const f = new Float32Array(aligned.buffer);
      out = dtype === 'f32' ? f : dtype === 'f16' ? encodeF16(f) : encodeBf16(f);
    } else {
      const bits = new Uint16Array(aligned.buffer);
      if (dtype === src) out = bits;
      else {
        const f = src === 'f16' ? decodeF16(bits) : decodeBf16(bits);
        out = dtype === 'f32' ? f : dtype === 'f16' ? encodeF16(f) : encodeBf16(f);
      }
    }
    this.loaded += bytes.byteLength;
    this.onProgress?.(this.loaded, this.totalBytes);
    return out;
  }

  /** Several tensors' rows, one after the other (the fused projections), in `dtype`. */
  async concat(names: readonly string[], dtype: WeightDType): Promise<Float32Array | Uint16Array> {
    const parts = [];
    for (const n of names) parts.push(await this.read(n, dtype));
    const len = parts.reduce((a, p) => a + p.length, 0);
    const out = dtype === 'f32' ? new Float32Array(len) : new Uint16Array(len);
    let at = 0;
    for (const p of parts) { out.set(p as never, at); at += p.length; }
    return out;
  }

  /** A linear layer from one or several [rows, K] tensors stacked by rows, with their biases (f32). */
  async linear(rt: Runtime, names: readonly string[], dtype: WeightDType, biases?: readonly string[]): Promise<LinearWeight> {
    const shapes = names.map((n) => this.shape(n));
    const K = shapes[0][1];
    const N = shapes.reduce((a, s) => a + s[0], 0);
    const data = await this.concat(names, dtype);
    const bias = biases ? (await this.concat(biases, 'f32')) as Float32Array : undefined;
    return createLinear(rt, { data, N, K, dtype, bias });
  }

  /** A vector (norm weights) as f32. */
  async vector(rt: Runtime, name: string): Promise<Tensor> {
    const v = (await this.read(name, 'f32')) as Float32Array;
    return rt.tensor(v, [v.length], 'f32');
  }
}
