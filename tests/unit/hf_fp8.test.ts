// FP8 checkpoints into the F8 group type (src/formats/hf_fp8.ts): the transcoded blocks, dequantized by
// the host reference, equal e4m3(q) · s of the checkpoint's own block, computed here from the format's
// definition: 128 × 128 blocks with partial blocks at the edges (DeepSeek-V3's kv_a_proj 160 rows),
// per-channel and per-tensor scales, f32 and bf16 scales.
import { describe, expect, it } from 'vitest';
import { fp8ToGroups } from '../../src/formats/hf_fp8';
import { dequantizeRows } from '../../src/reference/quant';
import { e4m3ToF32 } from '../../src/core/quant';
import { bf16BitsToF32, f32ToBf16Bits } from '../../src/core/dtype';
import { rng } from '../../src/core/random';

function fp8Bytes(n: number, seed: number): Uint8Array {
  const r = rng(seed);
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i++) {
    let b = (r() * 256) >>> 0;
    if ((b & 0x7f) === 0x7f) b -= 1;   // no NaN
    out[i] = b;
  }
  return out;
}

function scales(n: number, dtype: 'F32' | 'BF16', seed: number): { bytes: Uint8Array; values: number[] } {
  const r = rng(seed);
  const values: number[] = [];
  const bytes = new Uint8Array(n * (dtype === 'F32' ? 4 : 2));
  const dv = new DataView(bytes.buffer);
  for (let i = 0; i < n; i++) {
    const v = Math.exp(Math.log(1e-3) + r() * Math.log(100)) * (r() < 0.5 ? -1 : 1);
    if (dtype === 'F32') { dv.setFloat32(4 * i, v, true); values.push(Math.fround(v)); }
    else { const h = f32ToBf16Bits(v); dv.setUint16(2 * i, h, true); values.push(bf16BitsToF32(h)); }
  }
  return { bytes, values };
}

describe('FP8 checkpoints as F8 group blocks', () => {
  const cases: [string, number, number, number, number, 'F32' | 'BF16', string][] = [
    ['block 128x128, partial rows (kv_a_proj)', 160, 256, 128, 128, 'F32', 'F8G128_F32'],
    ['block 128x128, partial rows and bf16 scales (Qwen3)', 192, 384, 128, 128, 'BF16', 'F8G128_BF16'],
    ['block 128x128, K 96 (groups of 32, partial column block)', 130, 96, 128, 128, 'F32', 'F8G32_F32'],
    ['per channel', 7, 256, 1, 256, 'BF16', 'F8G128_BF16'],
    ['per tensor', 9, 192, 9, 192, 'F32', 'F8G64_F32'],
  ];
  for (const [name, N, K, bn, bk, dt, type] of cases) {
    it(name, () => {
      const w = fp8Bytes(N * K, N + K);
      const rs = Math.ceil(N / bn), cs = Math.ceil(K / bk);
      const s = scales(rs * cs, dt, K);
      const g = fp8ToGroups('t', w, s.bytes, dt, N, K, bn, bk);
      expect(g.type).toBe(type);
      const got = dequantizeRows(g.type, g.bytes, N, K);
      for (let n = 0; n < N; n++) {
        for (let k = 0; k < K; k++) {
          const want = Math.fround(e4m3ToF32(w[n * K + k]) * s.values[Math.floor(n / bn) * cs + Math.floor(k / bk)]);
          if (got[n * K + k] !== want) throw new Error(`(${n}, ${k}): got ${got[n * K + k]}, want ${want}`);
        }
      }
    });
  }
  it('e4m3 decodes the format\'s table: normals, subnormals, signs, NaN', () => {
    expect(e4m3ToF32(0x00)).toBe(0);
    expect(e4m3ToF32(0x01)).toBe(2 ** -9);
    expect(e4m3ToF32(0x08)).toBe(2 ** -6);
    expect(e4m3ToF32(0x38)).toBe(1);
    expect(e4m3ToF32(0x7e)).toBe(448);
    expect(e4m3ToF32(0xfe)).toBe(-448);
    expect(Number.isNaN(e4m3ToF32(0x7f))).toBe(true);
  });
  it('refuses scales of the wrong shape and a K with no group, naming the tensor', () => {
    expect(() => fp8ToGroups('x.weight', new Uint8Array(128 * 128), new Uint8Array(8), 'F32', 128, 128, 128, 128)).toThrow(/x\.weight: expected scales of 1 F32 values \(\[1, 1\]/);
    expect(() => fp8ToGroups('x.weight', new Uint8Array(16 * 48), new Uint8Array(4), 'F32', 16, 48, 128, 128)).toThrow(/x\.weight: expected an input dimension that is a multiple of 32/);
  });
});
