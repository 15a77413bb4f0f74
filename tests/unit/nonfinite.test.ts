// NaN and ±Inf weights are refused at load (issue 29: they loaded silently and greedy decoding gave
// token 0 forever): the scan of every weight format, what it costs beside reading the bytes, and
// WeightReader's messages. The GPU side is in tests/cases/faults.cases.ts.
import { describe, expect, it } from 'vitest';
import { encodeBf16, encodeF16 } from '../../src/core/dtype';
import { QUANT_FORMATS, QUANT_TYPES, type QuantType } from '../../src/core/quant';
import type { SafetensorsFile } from '../../src/formats/safetensors';
import { firstNonFinite, firstNonFiniteBlock, WeightReader } from '../../src/models/weights';
import type { ResolvedTensor } from '../../src/models/schema';

describe('the non-finite scan', () => {
  const F32 = (v: number[]) => Float32Array.from(v);
  it('finds NaN and ±Inf at any place of f32, f16 and bf16 data (inside a chunk, in the tail, first, last)', () => {
    for (const n of [1, 7, 4096, 4099, 3 * 4096 + 5]) {
      for (const at of [0, n >> 1, n - 1]) {
        for (const bad of [NaN, Infinity, -Infinity]) {
          const v = new Float32Array(n).map((_, i) => Math.sin(i) * 3);
          v[at] = bad;
          expect(firstNonFinite(v, 'f32'), `f32 n=${n} at=${at} ${bad}`).toBe(at);
          expect(firstNonFinite(encodeF16(v), 'f16'), `f16 n=${n} at=${at} ${bad}`).toBe(at);
          expect(firstNonFinite(encodeBf16(v), 'bf16'), `bf16 n=${n} at=${at} ${bad}`).toBe(at);
        }
      }
    }
  });
  it('passes every finite value: the largest, subnormals, ±0', () => {
    expect(firstNonFinite(F32([3.4028234663852886e38, -3.4028234663852886e38, 1e-45, -0, 0]), 'f32')).toBe(-1);
    expect(firstNonFinite(Uint16Array.of(0x7bff, 0xfbff, 0x0001, 0x8000, 0x0000), 'f16')).toBe(-1);
    expect(firstNonFinite(Uint16Array.of(0x7f7f, 0xff7f, 0x0001, 0x8000, 0x0000), 'bf16')).toBe(-1);
    // f16's exponent pattern in bf16 bits is a finite bf16 (and the other way round).
    expect(firstNonFinite(Uint16Array.of(0x7c00), 'bf16')).toBe(-1);
    expect(firstNonFinite(Uint16Array.of(0x7f80), 'f16')).toBe(0);
  });
  it('reads 16-bit values at an odd offset (a view into a checkpoint\'s bytes)', () => {
    const buf = new Uint16Array(4099);
    buf[4000] = 0x7e00;
    const view = buf.subarray(1);
    expect(view.byteOffset % 4).toBe(2);
    expect(firstNonFinite(view, 'f16')).toBe(3999);
  });
  it('finds a quantized block whose scale is not finite, in every field and type', () => {
    for (const type of QUANT_TYPES) {
      const { blockBytes, blockElems } = QUANT_FORMATS[type];
      const bytes = new Uint8Array(5 * blockBytes);
      expect(firstNonFiniteBlock(type, bytes), type).toBe(null);
      // Every byte set except the scales' exponents: still finite.
      bytes.fill(0x83);
      expect(firstNonFiniteBlock(type, bytes), `${type} 0x83 everywhere`).toBe(null);
      const fields = type === 'MXFP4' ? [0] : ({ Q4_1: [0, 2], Q5_1: [0, 2], Q4_K: [0, 2], Q5_K: [0, 2], Q2_K: [80, 82], Q3_K: [108], Q6_K: [208] } as Partial<Record<QuantType, number[]>>)[type] ?? [0];
      for (const f of fields) {
        const b = bytes.slice();
        if (type === 'MXFP4') b[3 * blockBytes] = 0xff;
        else { b[3 * blockBytes + f] = 0x00; b[3 * blockBytes + f + 1] = 0x7c; }
        expect(firstNonFiniteBlock(type, b), `${type} field ${f}`).toEqual({ block: 3, field: f });
      }
      expect(blockElems).toBeGreaterThan(0);
    }
  });
  it('costs little beside reading the bytes: a 16M-value f32 tensor and a 16M-value f16 one', () => {
    const n = 16 * 2 ** 20;
    const f = new Float32Array(n).map((_, i) => (i % 1000) * 1e-3);
    const h = encodeF16(f.subarray(0, n));
    const time = (fn: () => unknown) => {
      let best = Infinity;
      for (let k = 0; k < 3; k++) { const t0 = performance.now(); fn(); best = Math.min(best, performance.now() - t0); }
      return best;
    };
    const scan32 = time(() => expect(firstNonFinite(f, 'f32')).toBe(-1));
    const scan16 = time(() => expect(firstNonFinite(h, 'f16')).toBe(-1));
    // What a load does with those bytes anyway: copy them once (WeightReader.read aligns them so).
    const copy = time(() => new Uint8Array(f.byteLength).set(new Uint8Array(f.buffer)));
    console.log(`non-finite scan: ${(f.byteLength / 2 ** 20 / scan32 * 1e3).toFixed(0)} MiB/s of f32 (${scan32.toFixed(0)} ms for 64 MiB), `
      + `${(h.byteLength / 2 ** 20 / scan16 * 1e3).toFixed(0)} MiB/s of f16; one copy of the f32 bytes: ${copy.toFixed(0)} ms`);
    // A loose bound (shared CI machines): the scan must not cost several copies of the data.
    expect(scan32).toBeLessThan(3 * copy + 50);
  });
});

describe('WeightReader refuses non-finite weights by name, unless allowed', () => {
  function reader(name: string, dtype: string, shape: number[], bytes: Uint8Array, allow = false): WeightReader {
    const file: SafetensorsFile = { tensors: new Map(), metadata: {}, name: 'test', bytes: async () => bytes };
    const resolved = new Map<string, ResolvedTensor>([[name, { file: 0, dtype, shape }]]);
    return new WeightReader([file], resolved, undefined, false, undefined, allow);
  }
  const f32 = (v: number[]) => new Uint8Array(Float32Array.from(v).buffer);
  it('f32, as f32 and converted; a value past f16 is named as such', async () => {
    await expect(reader('w', 'F32', [4], f32([1, 2, NaN, 4])).read('w', 'f32')).rejects.toThrow(
      "loadModel: tensor 'w': expected finite weights (or allowNonFinite: true to load them as they are), got NaN at element 2");
    await expect(reader('w', 'F32', [4], f32([1, Infinity, 3, 4])).read('w', 'bf16')).rejects.toThrow('got Infinity at element 1');
    await expect(reader('w', 'F32', [4], f32([1, 2, 3, 7e4])).read('w', 'f16')).rejects.toThrow(
      "loadModel: tensor 'w': expected values f16 holds (load with dtype 'f32' or 'bf16', or allowNonFinite: true to keep them), got 70000 at element 3 (F32), which is Infinity as f16");
    expect(Array.from(await reader('w', 'F32', [4], f32([1, 2, 3, 7e4])).read('w', 'bf16') as Uint16Array)).toEqual(Array.from(encodeBf16(Float32Array.of(1, 2, 3, 7e4))));
    const kept = await reader('w', 'F32', [4], f32([1, 2, NaN, 4]), true).read('w', 'f32');
    expect(Number.isNaN(kept[2])).toBe(true);
  });
  it('f16 and bf16 checkpoints, kept as they are', async () => {
    const h = encodeF16(Float32Array.of(1, -Infinity, 3));
    await expect(reader('h', 'F16', [3], new Uint8Array(h.buffer)).read('h', 'f16')).rejects.toThrow("tensor 'h'", );
    await expect(reader('h', 'F16', [3], new Uint8Array(h.buffer)).read('h', 'f16')).rejects.toThrow('got -Infinity at element 1');
    const b = encodeBf16(Float32Array.of(NaN, 2));
    await expect(reader('b', 'BF16', [2], new Uint8Array(b.buffer)).read('b', 'f32')).rejects.toThrow('got NaN at element 0');
  });
  it('a quantized tensor: its block scale, named with the block', async () => {
    const { blockBytes } = QUANT_FORMATS.Q8_0;
    const bytes = new Uint8Array(2 * blockBytes);
    bytes[blockBytes + 1] = 0x7c;   // block 1's d = +Inf
    await expect(reader('q', 'Q8_0', [64], bytes).read('q', 'f32')).rejects.toThrow(
      "loadModel: tensor 'q': expected finite weights (or allowNonFinite: true to load them as they are), got a Q8_0 block (elements 32..63) whose scale at byte 0 is Infinity");
  });
});
