// The host side of quantized weights (SPEC §8): ggml dequantization (src/reference/quant.ts), random
// valid blocks (quant_random.ts), the quantizers (src/models/quantize.ts) and the GGUF writer
// (src/formats/gguf_write.ts).
//
// Hand-built blocks are checked against values worked out here from the block layouts of ggml-common.h
// and the formulas of ggml-quants.c's dequantize_row_*. The checksums (CHECKSUMS, GOLDEN_CHECKSUMS,
// QUANTIZED_CHECKSUMS) were computed with gguf-py 0.19.0 (gguf.quants.dequantize / quantize, which llama.cpp
// keeps bit-exact with ggml) on the same bytes: they pin every element, bit for bit (signs of zero too).
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { bf16BitsToF32, f16BitsToF32, f32ToBf16Bits, f32ToF16Bits } from '../../src/core/dtype';
import { WebinferError } from '../../src/core/errors';
import { GGML_TYPE_IDS, QUANT_FORMATS, QUANT_TYPES, ggmlTypeName, type GgmlQuantType, type QuantType } from '../../src/core/quant';
import { randn } from '../../src/core/random';
import { dequantizeRows, type DequantType } from '../../src/reference/quant';
import { randomQuantRows } from '../../src/reference/quant_random';
import { quantizeRows } from '../../src/models/quantize';
import { writeGGUF, writeGGUFHeader, writeGGUFSplit, type GGUFTypedValue, type GGUFWriteTensor } from '../../src/formats/gguf_write';
import { loadGGUF } from '../../src/formats/gguf';

const goldens = join(dirname(fileURLToPath(import.meta.url)), '../../../shared/goldens-quant');

// ---------------------------------------------------------------------------------------------
// helpers

/** A zeroed block of `type` with fields poked in: [offset, byte] pairs and f16 values at offsets. */
function block(type: QuantType, bytes: [number, number][], f16: [number, number][] = []): Uint8Array {
  const b = new Uint8Array(QUANT_FORMATS[type].blockBytes);
  for (const [o, v] of bytes) b[o] = v;
  for (const [o, v] of f16) {
    const h = f32ToF16Bits(v);
    expect(f16BitsToF32(h)).toBe(v); // test values are exact in f16
    b[o] = h & 0xff;
    b[o + 1] = h >> 8;
  }
  return b;
}

function deq(type: DequantType, b: Uint8Array): Float64Array {
  const elems = type === 'F32' || type === 'F16' || type === 'BF16' ? b.length / (type === 'F32' ? 4 : 2) : QUANT_FORMATS[type].blockElems;
  return dequantizeRows(type, b, 1, elems);
}

function expectAt(v: Float64Array, want: Record<number, number>): void {
  for (const [i, x] of Object.entries(want)) expect([Number(i), v[Number(i)]]).toEqual([Number(i), x]);
}

/** Σ bits(f32(v_i)) · (i mod 65521 + 1) mod 2^32: an exact, order-sensitive fingerprint. */
function hashF32(v: ArrayLike<number>): number {
  const f = Float32Array.from(v);
  const u = new Uint32Array(f.buffer);
  let h = 0;
  for (let i = 0; i < u.length; i++) h = (h + Math.imul(u[i]!, (i % 65521) + 1)) >>> 0;
  return h;
}

function hashBytes(b: Uint8Array): number {
  let h = 0;
  for (let i = 0; i < b.length; i++) h = (h + Math.imul(b[i]!, (i % 65521) + 1)) >>> 0;
  return h;
}

// A minimal GGUF reader (independent of src/formats/gguf.ts): metadata as typed values (so a file read
// here can be written back with writeGGUF), tensor infos, alignment and the data section's start.
interface MiniTensor { name: string; shape: number[]; typeId: number; offset: number }
interface MiniGGUF { version: number; metadata: [string, GGUFTypedValue][]; tensors: MiniTensor[]; alignment: number; dataStart: number; bytes: Uint8Array }

const VT = ['u8', 'i8', 'u16', 'i16', 'u32', 'i32', 'f32', 'bool', 'string', 'array', 'u64', 'i64', 'f64'] as const;

function readMiniGGUF(bytes: Uint8Array): MiniGGUF {
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const dec = new TextDecoder();
  let p = 0;
  const u32 = (): number => { p += 4; return dv.getUint32(p - 4, true); };
  const u64 = (): number => { p += 8; return Number(dv.getBigUint64(p - 8, true)); };
  const str = (): string => { const n = u64(); p += n; return dec.decode(bytes.subarray(p - n, p)); };
  const scalar = (t: (typeof VT)[number]): number | bigint | boolean | string => {
    switch (t) {
      case 'u8': p += 1; return dv.getUint8(p - 1);
      case 'i8': p += 1; return dv.getInt8(p - 1);
      case 'u16': p += 2; return dv.getUint16(p - 2, true);
      case 'i16': p += 2; return dv.getInt16(p - 2, true);
      case 'u32': p += 4; return dv.getUint32(p - 4, true);
      case 'i32': p += 4; return dv.getInt32(p - 4, true);
      case 'f32': p += 4; return dv.getFloat32(p - 4, true);
      case 'f64': p += 8; return dv.getFloat64(p - 8, true);
      case 'bool': p += 1; return dv.getUint8(p - 1) === 1;
      case 'u64': p += 8; return dv.getBigUint64(p - 8, true);
      case 'i64': p += 8; return dv.getBigInt64(p - 8, true);
      case 'string': return str();
      default: throw new Error(`scalar ${t}`);
    }
  };
  const value = (t: (typeof VT)[number]): GGUFTypedValue => {
    if (t !== 'array') return { type: t, value: scalar(t) };
    const it = VT[u32()]!;
    const n = u64();
    const items: unknown[] = [];
    for (let i = 0; i < n; i++) items.push(it === 'array' ? value('array') : scalar(it));
    return { type: 'array', itemType: it, value: items };
  };
  expect(dec.decode(bytes.subarray(0, 4))).toBe('GGUF');
  p = 4;
  const version = u32();
  const nT = u64(), nKV = u64();
  const metadata: [string, GGUFTypedValue][] = [];
  for (let i = 0; i < nKV; i++) {
    const k = str();
    metadata.push([k, value(VT[u32()]!)]);
  }
  const tensors: MiniTensor[] = [];
  for (let i = 0; i < nT; i++) {
    const name = str();
    const nd = u32();
    const shape = Array.from({ length: nd }, u64);
    tensors.push({ name, shape, typeId: u32(), offset: u64() });
  }
  const al = metadata.find(([k]) => k === 'general.alignment');
  const alignment = al ? Number(al[1].value) : 32;
  return { version, metadata, tensors, alignment, dataStart: Math.ceil(p / alignment) * alignment, bytes };
}

/** A tensor's bytes, its ggml type name and its [rows, K] view (K = ne[0]). */
function tensorOf(g: MiniGGUF, t: MiniTensor): { type: string; rows: number; K: number; data: Uint8Array } {
  const type = ggmlTypeName(t.typeId);
  const K = t.shape[0]!;
  const rows = t.shape.slice(1).reduce((a, b) => a * b, 1);
  const per = type === 'F32' ? 4 : type === 'F16' || type === 'BF16' ? 2 : NaN;
  const size = Number.isNaN(per) ? (rows * K / QUANT_FORMATS[type as QuantType].blockElems) * QUANT_FORMATS[type as QuantType].blockBytes : rows * K * per;
  const at = g.dataStart + t.offset;
  return { type, rows, K, data: g.bytes.subarray(at, at + size) };
}

// ---------------------------------------------------------------------------------------------
// (a) hand-built blocks

describe('dequantizeRows: hand-built blocks', () => {
  it('F32, F16, BF16', () => {
    const f = new Float32Array([1.5, -0.1, 3e38]);
    expect(Array.from(deq('F32', new Uint8Array(f.buffer)))).toEqual(Array.from(f));
    const h = new Uint16Array([f32ToF16Bits(0.333), 0x8000, 0x7c00]);
    expect(Array.from(deq('F16', new Uint8Array(h.buffer)))).toEqual([f16BitsToF32(h[0]!), -0, Infinity]);
    const bf = new Uint16Array([f32ToBf16Bits(-2.75), f32ToBf16Bits(1e-3)]);
    expect(Array.from(deq('BF16', new Uint8Array(bf.buffer)))).toEqual([-2.75, bf16BitsToF32(bf[1]!)]);
  });

  it('Q8_0: w = d·q, q int8', () => {
    const v = deq('Q8_0', block('Q8_0', [[2, 3], [2 + 5, 0x80], [2 + 31, 127]], [[0, 0.5]]));
    expectAt(v, { 0: 1.5, 1: 0, 5: -64, 31: 63.5 });
  });

  it('Q4_0: low nibbles are elements 0-15, high nibbles 16-31; w = d·(q − 8)', () => {
    const v = deq('Q4_0', block('Q4_0', [[2, 0x1f], [2 + 15, 0x80]], [[0, 0.25]]));
    expectAt(v, { 0: 1.75, 16: -1.75, 15: -2, 31: 0, 1: -2, 17: -2 });
  });

  it('Q4_1: w = d·q + m', () => {
    const v = deq('Q4_1', block('Q4_1', [[4 + 3, 0xa2]], [[0, 0.5], [2, -1]]));
    expectAt(v, { 3: 0, 19: 4, 0: -1, 31: -1 });
  });

  it("Q5_0: qh bit e is element e's fifth bit; w = d·(q − 16)", () => {
    // qh = bit 2 | bit 20 (little-endian u32 at byte 2)
    const qh = (1 << 2) | (1 << 20);
    const v = deq('Q5_0', block('Q5_0', [[2, qh & 0xff], [4, (qh >> 16) & 0xff], [6 + 2, 0x31], [6 + 4, 0x50]], [[0, 0.5]]));
    expectAt(v, {
      2: 0.5 * ((1 | 16) - 16), 18: 0.5 * (3 - 16), // element 18's bit is clear
      4: 0.5 * (0 - 16), 20: 0.5 * ((5 | 16) - 16),
    });
  });

  it('Q5_1: fifth bit of element 31 is qh bit 31; w = d·q + m', () => {
    const v = deq('Q5_1', block('Q5_1', [[4 + 3, 0x80], [8 + 15, 0xf0]], [[0, 0.25], [2, 0.5]]));
    expectAt(v, { 15: 0.5, 31: 31 * 0.25 + 0.5, 0: 0.5 });
  });

  it('Q2_K: 2-bit quants in 4 planes, scale/min nibbles per 16; w = d·sc·q − dmin·m', () => {
    // scales @0, qs @16, d @80, dmin @82
    const v = deq('Q2_K', block('Q2_K', [
      [0, 0x23], [5, 0x1f], [15, 0x40],
      [16 + 0, 0b11],        // element 0: qs[0] bits 0-1
      [16 + 16, 0b10 << 4],  // element 80 = 2·32 + 16: qs[16] bits 4-5
      [16 + 63, 0b01 << 6],  // element 255 = 128 + 3·32 + 31: qs[32 + 31] bits 6-7
    ], [[80, 0.5], [82, 0.25]]));
    expectAt(v, { 0: 0.5 * 3 * 3 - 0.25 * 2, 80: 0.5 * 15 * 2 - 0.25 * 1, 255: 0.5 * 0 * 1 - 0.25 * 4, 1: -0.5 });
  });

  it('Q3_K: signed 6-bit scales (s − 32), inverted high bit from hmask', () => {
    // hmask @0, qs @32, scales @96, d @108. Scales: #0 = 40 (low 8 | high 2), #5 = 3, #13 = 63 (low 15 in
    // the high nibble of byte 5, high 3 in bits 6-7 of byte 8 + 13 % 4 = 9).
    const v = deq('Q3_K', block('Q3_K', [
      [96 + 0, 0x08], [96 + 8, 0x02], [96 + 5, 0xf3], [96 + 9, 0xc0],
      [32 + 0, 0b10], [0, 0b1],        // element 0: lo 2, hmask[0] bit 0 set: q = 2
      // element 1: lo 0, hmask[1] bit 0 clear: q = −4
      [32 + 16, 0b11 << 4],            // element 80 = 2·32 + 16: lo 3, hmask[16] bit 2 clear: q = −1
      [32 + 32 + 23, 0b01 << 4], [23, 1 << 6], // element 215 = 128 + 2·32 + 23: lo 1, hmask[23] bit 4 + 2 set
    ], [[108, 0.5]]));
    expectAt(v, { 0: 0.5 * 8 * 2, 1: 0.5 * 8 * -4, 80: 0.5 * (3 - 32) * -1, 215: 0.5 * 31 * 1, 16: 0.5 * (0 - 32) * -4 });
  });

  // Q4_K / Q5_K scales: sub-block 0: sc 5, m 1; 1: sc 7, m 0; 3: 0, 0; 5: sc 45 = 0b10_1101, m 50 = 0b11_0010;
  // 7: sc 63, m 63. Bytes 0-3 / 4-7 hold sub-blocks 0-3's 6-bit sc / m and in their top 2 bits the high
  // bits of sub-blocks 4-7's sc / m; bytes 8-11 hold sub-blocks 4-7's low nibbles (sc low, m high).
  const kScales: [number, number][] = [
    [0, 5], [4, 1], [1, 0x80 | 7], [5, 0xc0 | 0], [3, 0xc0], [7, 0xc0], [9, (45 & 0xf) | ((50 & 0xf) << 4)], [11, 0xff],
  ];
  it('Q4_K: 6-bit scales and mins (sub-blocks 4-7 split across the packed bytes); w = d·sc·q − dmin·m', () => {
    // d @0, dmin @2, scales @4, qs @16
    const v = deq('Q4_K', block('Q4_K', [
      ...kScales.map(([o, b]): [number, number] => [4 + o, b]),
      [16 + 0, 9],            // element 0: low nibble of qs[0]
      [16 + 8, 4 << 4],       // element 40 = 32 + 8: high nibble of qs[8]
      [16 + 64 + 10, 3 << 4], // element 170 = 2·64 + 32 + 10: high nibble of qs[64 + 10]
      [16 + 32 + 4, 6 << 4],  // element 100 = 64 + 32 + 4: sub-block 3, scale 0
      [16 + 96 + 31, 15 << 4], // element 255
    ], [[0, 0.5], [2, 0.25]]));
    expectAt(v, { 0: 0.5 * 5 * 9 - 0.25, 40: 0.5 * 7 * 4, 170: 0.5 * 45 * 3 - 0.25 * 50, 100: 0, 255: 0.5 * 63 * 15 - 0.25 * 63 });
  });

  it('Q5_K: as Q4_K plus bit (e >> 5) of qh[e % 32]', () => {
    // d @0, dmin @2, scales @4, qh @16, qs @48
    const v = deq('Q5_K', block('Q5_K', [
      ...kScales.map(([o, b]): [number, number] => [4 + o, b]),
      [48 + 0, 9],
      [48 + 8, 4 << 4], [16 + 8, 1 << 1],
      [48 + 64 + 10, 3 << 4], [16 + 10, 1 << 5],
      [48 + 96 + 31, 15 << 4], [16 + 31, 1 << 7],
    ], [[0, 0.5], [2, 0.25]]));
    expectAt(v, { 0: 0.5 * 5 * 9 - 0.25, 40: 0.5 * 7 * 20, 170: 0.5 * 45 * 19 - 0.25 * 50, 255: 0.5 * 63 * 31 - 0.25 * 63 });
  });

  it('Q6_K: ql nibbles and qh 2-bit fields of elements 0, 32, 64, 96, 128, 200; int8 scales', () => {
    // ql @0, qh @128, scales @192 (int8), d @208
    const v = deq('Q6_K', block('Q6_K', [
      [0, 0x5a],            // element 0: low nibble 10; element 64: high nibble 5
      [32, 0x3f],           // element 32: low 15; element 96: high 3
      [128, 0b11_10_01_00], // qh[0]: bits 0-1 → element 0, 2-3 → 32, 4-5 → 64, 6-7 → 96
      [64, 0x07], [128 + 32, 0b10],    // element 128: ql[64] low 7, qh[32] bits 0-1 = 2
      [72, 0xc0], [128 + 40, 0b11 << 4], // element 200 = 128 + 2·32 + 8: ql[64 + 8] high 12, qh[32 + 8] bits 4-5
      [192 + 0, 0xfd], [192 + 2, 127], [192 + 4, 0x80], [192 + 6, 1], [192 + 8, 10], [192 + 12, 0xfe],
    ], [[208, 0.25]]));
    expectAt(v, {
      0: 0.25 * -3 * (10 - 32), 32: 0.25 * 127 * (31 - 32), 64: 0.25 * -128 * (37 - 32), 96: 0.25 * 1 * (51 - 32),
      128: 0.25 * 10 * (39 - 32), 200: 0.25 * -2 * (60 - 32), 1: 0.25 * -3 * -32,
    });
  });

  it('IQ4_NL: nibbles index kvalues_iq4nl', () => {
    const v = deq('IQ4_NL', block('IQ4_NL', [[2, 0xf0], [2 + 7, 0x78]], [[0, 0.5]]));
    expectAt(v, { 0: 0.5 * -127, 16: 0.5 * 113, 7: 0.5 * 1, 23: 0.5 * -10 });
  });

  it('IQ4_XS: 6-bit scales ls − 32 from scales_l nibbles and scales_h pairs', () => {
    // d @0, scales_h @2 (u16), scales_l @4, qs @8. ls: #0 = 32 (h 2), #3 = 37 (l 5 in the high nibble of
    // scales_l[1], h 2 at bits 6-7), #6 = 1, #7 = 63; the others 0.
    const sh = 2 | (2 << 6) | (3 << 14);
    const v = deq('IQ4_XS', block('IQ4_XS', [
      [2, sh & 0xff], [3, sh >> 8], [4, 0x00], [5, 0x50], [7, 0xf1],
      [8 + 5, 0x0f],          // element 5: sub-block 0 (scale 0)
      [8 + 48 + 3, 0x90],     // sub-block 3, byte 3: element 99 (low 0), element 115 (high 9)
      [8 + 96, 0x0c],         // element 192: sub-block 6, low 12
      [8 + 127, 0xa0],        // element 255: sub-block 7, high 10
      [8 + 16, 0x08],         // element 32: sub-block 1 (ls 0), low 8
    ], [[0, 0.25]]));
    expectAt(v, { 5: 0, 99: 0.25 * 5 * -127, 115: 0.25 * 5 * 13, 192: 0.25 * -31 * 53, 255: 0.25 * 31 * 25, 32: 0.25 * -32 * 1 });
  });

  it('MXFP4: E8M0 half scale 2^(e − 128) times kvalues_mxfp4', () => {
    const at = (e: number, q: number): Float64Array => deq('MXFP4', block('MXFP4', [[0, e], [1, q]]));
    expectAt(at(127, 0xf7), { 0: 6, 16: -6 });
    expectAt(at(127, 0x95), { 0: 3, 16: -0.5 });
    expectAt(at(130, 0x21), { 0: 4, 16: 8 });
    expectAt(at(1, 0x01), { 0: 2 ** -127 });           // an f32 subnormal, as ggml builds it
    expectAt(at(0, 0x07), { 0: 12 * 2 ** -128 });
    expectAt(at(255, 0xf1), { 0: 2 ** 127, 16: -Infinity }); // −12·2^127 overflows f32, as in ggml
    expectAt(at(127, 0x88), { 0: 0, 16: 0 });           // code 8 (E2M1's −0) is int8 0: +0
  });

  it('Q4_0 rows of several blocks: each block its own scale, rows consecutive', () => {
    const b = new Uint8Array(18 * 4);
    [0.5, 1, -2, 4].forEach((d, i) => {
      const h = f32ToF16Bits(d);
      b[18 * i] = h & 0xff;
      b[18 * i + 1] = h >> 8;
      b[18 * i + 2] = 0x9a; // elements 0 → 10 − 8 = 2, 16 → 9 − 8 = 1
    });
    const v = dequantizeRows('Q4_0', b, 2, 64);
    expectAt(v, { 0: 1, 16: 0.5, 32: 2, 48: 1, 64: -4, 80: -2, 96: 8, 112: 4 });
  });

  it('names a byte length that disagrees with rows × K, and a K that is not whole blocks', () => {
    expect(() => dequantizeRows('Q4_K', new Uint8Array(100), 1, 256)).toThrow(WebinferError);
    expect(() => dequantizeRows('Q4_K', new Uint8Array(100), 1, 256)).toThrow(/dequantizeRows: bytes: expected 144 bytes .*got 100 bytes/);
    expect(() => dequantizeRows('Q4_K', new Uint8Array(144), 1, 128)).toThrow(/K: expected a multiple of Q4_K's block of 256/);
    expect(() => dequantizeRows('F16', new Uint8Array(6), 2, 2)).toThrow(/expected 8 bytes/);
    expect(() => dequantizeRows('Q7' as never, new Uint8Array(0), 1, 32)).toThrow(/type: expected one of/);
  });
});

// ---------------------------------------------------------------------------------------------
// random blocks, against gguf-py

// randomQuantRows(type, 4, 512, 1): [hashBytes(bytes), hashF32(gguf-py's dequantize(bytes))]
const CHECKSUMS: Record<GgmlQuantType, [number, number]> = {
  Q8_0: [295117280, 2876559680],
  Q4_0: [83025140, 1858541568],
  Q4_1: [99549908, 655308976],
  Q5_0: [125195690, 1717634560],
  Q5_1: [143550224, 270889416],
  Q2_K: [27818581, 1123756608],
  Q3_K: [48795520, 445359552],
  Q4_K: [84192704, 108653084],
  Q5_K: [125136637, 3394894527],
  Q6_K: [178343350, 2919784850],
  IQ4_NL: [83025140, 1295330560],
  IQ4_XS: [75218686, 2581693698],
  MXFP4: [75701536, 1107296256],
};

describe('randomQuantRows and dequantizeRows on random blocks', () => {
  for (const t of QUANT_TYPES) {
    it(`${t}: equals gguf-py bit for bit; finite f32 values`, () => {
      const b = randomQuantRows(t, 4, 512, 1);
      expect(b.length).toBe(4 * (512 / QUANT_FORMATS[t].blockElems) * QUANT_FORMATS[t].blockBytes);
      // a changed generator shows here, a changed decoder in the second
      expect(hashBytes(b)).toBe(CHECKSUMS[t][0]);
      const v = dequantizeRows(t, b, 4, 512);
      expect(hashF32(v)).toBe(CHECKSUMS[t][1]);
      expect(v.every((x) => Number.isFinite(x) && Math.fround(x) === x)).toBe(true);
      expect(randomQuantRows(t, 4, 512, 1)).toEqual(b);
      expect(randomQuantRows(t, 4, 512, 2)).not.toEqual(b);
    });
  }

  it('keeps f16 scales in range with the right signs', () => {
    const b = randomQuantRows('Q4_K', 64, 256, 3);
    for (let i = 0; i < 64; i++) {
      for (const o of [0, 2]) {
        const v = f16BitsToF32(b[144 * i + o]! | (b[144 * i + o + 1]! << 8));
        expect(v).toBeGreaterThanOrEqual(0.99e-3);
        expect(v).toBeLessThanOrEqual(0.1001);
      }
    }
    const q8 = randomQuantRows('Q8_0', 64, 32, 3);
    const ds = Array.from({ length: 64 }, (_, i) => f16BitsToF32(q8[34 * i]! | (q8[34 * i + 1]! << 8)));
    expect(ds.some((d) => d < 0) && ds.some((d) => d > 0)).toBe(true);
    const mx = randomQuantRows('MXFP4', 64, 32, 3);
    const es = Array.from({ length: 64 }, (_, i) => mx[17 * i]!);
    expect(Math.min(...es)).toBe(118);
    expect(Math.max(...es)).toBe(126);
  });
});

// ---------------------------------------------------------------------------------------------
// (b) the goldens' GGUF files

// hash over tensors in file order: H = H·31 + hashF32(gguf-py's dequantize(tensor)) mod 2^32
const GOLDEN_CHECKSUMS: Record<string, number> = {
  'gguf-llama-q4-0': 1883310035,
  'gguf-llama-q4-k-m': 1972375039, // Q4_K, Q6_K, F32
  'gguf-llama-q5-mix': 1464876915, // Q5_K, Q5_0, Q4_1, F32
  'gguf-llama-q8-0': 2739355091,
  'gguf-qwen3-q4-0': 1749991524,
  'gguf-qwen3-q4-k-m': 4093009618,
  'gguf-qwen3-q5-mix': 2752696816,
  'gguf-qwen3-q8-0': 2814060068,
};

describe('dequantizeRows on the goldens (llama.cpp-written GGUF files)', () => {
  for (const [name, want] of Object.entries(GOLDEN_CHECKSUMS)) {
    const file = join(goldens, name, 'model.gguf');
    it.skipIf(!existsSync(file))(`${name}: every tensor equals gguf-py's dequantization; plausible statistics`, () => {
      const g = readMiniGGUF(new Uint8Array(readFileSync(file)));
      expect(g.version).toBe(3);
      let H = 0;
      for (const t of g.tensors) {
        const { type, rows, K, data } = tensorOf(g, t);
        const v = dequantizeRows(type as DequantType, data, rows, K);
        H = (Math.imul(H, 31) + hashF32(v)) >>> 0;
        let s = 0, s2 = 0, amax = 0;
        for (const x of v) { s += x; s2 += x * x; amax = Math.max(amax, Math.abs(x)); }
        expect(Number.isFinite(s2), t.name).toBe(true);
        const mean = s / v.length, std = Math.sqrt(s2 / v.length - mean * mean);
        if (type === 'F32') continue; // norm weights: around 1
        // random init, std ≈ 0.08 in these files
        expect(Math.abs(mean), t.name).toBeLessThan(0.01);
        expect(std, t.name).toBeGreaterThan(0.02);
        expect(std, t.name).toBeLessThan(0.2);
        expect(amax, t.name).toBeLessThan(1);
      }
      expect(H).toBe(want);
    });
  }

  const file = join(goldens, 'gguf-llama-q4-k-m', 'model.gguf');
  it.skipIf(!existsSync(file))('writeGGUF rewrites a llama.cpp file byte for byte from its parsed contents', () => {
    const bytes = new Uint8Array(readFileSync(file));
    const g = readMiniGGUF(bytes);
    const tensors: GGUFWriteTensor[] = g.tensors.map((t) => {
      const { type, data } = tensorOf(g, t);
      return { name: t.name, type, shape: t.shape, data };
    });
    const out = writeGGUF({ metadata: g.metadata, tensors, alignment: g.alignment });
    expect(out.length).toBe(bytes.length);
    expect(Buffer.from(out).equals(Buffer.from(bytes))).toBe(true);
  });
});

// ---------------------------------------------------------------------------------------------
// (c) the writer

describe('writeGGUF', () => {
  const allTensors = (): GGUFWriteTensor[] => [
    ...QUANT_TYPES.map((t, i) => ({ name: `blk.${i}.${t.toLowerCase()}`, type: t, shape: [512, 3], data: randomQuantRows(t, 3, 512, 40 + i) })),
    { name: 'f32', type: 'F32', shape: [5, 2, 3], data: new Uint8Array(new Float32Array(30).map((_, i) => i - 7.5).buffer) },
    { name: 'f16', type: 'F16', shape: [7], data: new Uint8Array(new Uint16Array(7).map((_, i) => f32ToF16Bits(i / 3)).buffer) },
    { name: 'bf16', type: 'BF16', shape: [2, 2, 1, 2], data: new Uint8Array(16).fill(0x3f) },
    { name: 'i32', type: 'I32', shape: [3], data: new Uint8Array(12).fill(1) },
  ];
  const metadata: [string, unknown, ('u16' | 'i16' | 'array')?][] = [
    ['general.architecture', 'llama'],
    ['t.u8', { type: 'u8', value: 200 }], ['t.i8', { type: 'i8', value: -100 }],
    ['t.u16', 60000, 'u16'], ['t.i16', -30000, 'i16'],
    ['t.u32', 4_000_000_000], ['t.i32', -5], ['t.f32', 0.5], ['t.f32int', { type: 'f32', value: 10000 }],
    ['t.bool', true], ['t.u64', 2n ** 63n], ['t.i64', -(2n ** 62n)], ['t.f64', { type: 'f64', value: Math.PI }],
    ['t.str', 'héllo'],
    ['a.str', ['a', 'bé', '']], ['a.i32', [1, -2, 3]], ['a.u32', [1, 2]], ['a.f32', new Float32Array([0.5, -1])],
    ['a.u8', { type: 'array', itemType: 'u8', value: [1, 255] }], ['a.bool', [true, false]],
    ['a.nested', [[1, 2], ['x']]], ['a.empty', { type: 'array', itemType: 'string', value: [] }],
  ];

  it('writes every value type and every tensor type; an independent reader gets them back', () => {
    const tensors = allTensors();
    const bytes = writeGGUF({ metadata, tensors, alignment: 64 });
    const g = readMiniGGUF(bytes);
    expect(g.version).toBe(3);
    expect(g.alignment).toBe(64);
    const m = new Map(g.metadata);
    const typed = (k: string): [string, unknown] => [m.get(k)!.type, m.get(k)!.value];
    expect(typed('general.architecture')).toEqual(['string', 'llama']);
    expect(typed('t.u8')).toEqual(['u8', 200]);
    expect(typed('t.i8')).toEqual(['i8', -100]);
    expect(typed('t.u16')).toEqual(['u16', 60000]);
    expect(typed('t.i16')).toEqual(['i16', -30000]);
    expect(typed('t.u32')).toEqual(['u32', 4_000_000_000]);
    expect(typed('t.i32')).toEqual(['i32', -5]);
    expect(typed('t.f32')).toEqual(['f32', 0.5]);
    expect(typed('t.f32int')).toEqual(['f32', 10000]);
    expect(typed('t.bool')).toEqual(['bool', true]);
    expect(typed('t.u64')).toEqual(['u64', 2n ** 63n]);
    expect(typed('t.i64')).toEqual(['i64', -(2n ** 62n)]);
    expect(typed('t.f64')).toEqual(['f64', Math.PI]);
    expect(typed('t.str')).toEqual(['string', 'héllo']);
    expect(m.get('a.str')).toEqual({ type: 'array', itemType: 'string', value: ['a', 'bé', ''] });
    expect(m.get('a.i32')).toEqual({ type: 'array', itemType: 'i32', value: [1, -2, 3] });
    expect(m.get('a.u32')).toEqual({ type: 'array', itemType: 'u32', value: [1, 2] });
    expect(m.get('a.f32')).toEqual({ type: 'array', itemType: 'f32', value: [0.5, -1] });
    expect(m.get('a.u8')).toEqual({ type: 'array', itemType: 'u8', value: [1, 255] });
    expect(m.get('a.bool')).toEqual({ type: 'array', itemType: 'bool', value: [true, false] });
    expect(m.get('a.nested')).toEqual({
      type: 'array', itemType: 'array',
      value: [{ type: 'array', itemType: 'u32', value: [1, 2] }, { type: 'array', itemType: 'string', value: ['x'] }],
    });
    expect(m.get('a.empty')).toEqual({ type: 'array', itemType: 'string', value: [] });
    expect(typed('general.alignment')).toEqual(['u32', 64]); // added: not the default
    expect(g.metadata.map(([k]) => k)).toEqual([...metadata.map(([k]) => k), 'general.alignment']);

    expect(g.tensors.map((t) => t.name)).toEqual(tensors.map((t) => t.name));
    expect(g.dataStart % 64).toBe(0);
    for (let i = 0; i < tensors.length; i++) {
      const t = g.tensors[i]!;
      expect(ggmlTypeName(t.typeId)).toBe(tensors[i]!.type);
      expect(t.typeId).toBe(GGML_TYPE_IDS[tensors[i]!.type]);
      expect(t.shape).toEqual(tensors[i]!.shape);
      expect(t.offset % 64).toBe(0);
      const at = g.dataStart + t.offset;
      expect(bytes.subarray(at, at + tensors[i]!.data.length)).toEqual(tensors[i]!.data);
    }
    expect(bytes.length % 64).toBe(0);
  });

  it('default alignment 32 writes no general.alignment; a record works as metadata', () => {
    const bytes = writeGGUF({ metadata: { 'general.architecture': 'llama', 'x.n': 3 }, tensors: allTensors().slice(0, 2) });
    const g = readMiniGGUF(bytes);
    expect(g.metadata).toEqual([['general.architecture', { type: 'string', value: 'llama' }], ['x.n', { type: 'u32', value: 3 }]]);
    expect(g.dataStart % 32).toBe(0);
    expect(g.tensors[1]!.offset % 32).toBe(0);
  });

  it("writeGGUFHeader: its header, then each tensor's bytes zero-padded to the alignment, is the file writeGGUF writes", () => {
    for (const alignment of [32, 64]) {
      const tensors = allTensors();
      const whole = writeGGUF({ metadata, tensors, alignment });
      const h = writeGGUFHeader({ metadata, tensors: tensors.map(({ name, type, shape }) => ({ name, type, shape })), alignment });
      expect(h.alignment).toBe(alignment);
      expect(h.header.length % alignment).toBe(0);
      expect(h.sizes).toEqual(tensors.map((t) => t.data.length));
      const parts: number[] = [...h.header];
      tensors.forEach((t, i) => {
        expect(parts.length - h.header.length).toBe(h.offsets[i]);
        parts.push(...t.data, ...new Array((alignment - (t.data.length % alignment)) % alignment).fill(0));
      });
      expect(parts.length - h.header.length).toBe(h.dataBytes);
      expect(new Uint8Array(parts)).toEqual(whole);
    }
    expect(() => writeGGUFHeader({ metadata: {}, tensors: [{ name: 'w', type: 'Q4_K', shape: [128, 2] }] })).toThrow(/ne\[0\] a multiple of Q4_K's block of 256/);
  });

  it('rejects invalid inputs with named errors', () => {
    const t = (o: Partial<GGUFWriteTensor>): GGUFWriteTensor[] => [{ name: 'w', type: 'Q4_K', shape: [256, 2], data: new Uint8Array(288), ...o }];
    expect(() => writeGGUF({ metadata: {}, tensors: t({}) })).not.toThrow();
    expect(() => writeGGUF({ metadata: {}, tensors: t({ data: new Uint8Array(287) }) }))
      .toThrow(/writeGGUF: tensors\[0\]\.data: expected 288 bytes for 'w' of Q4_K with ne \[256, 2\], got 287 bytes/);
    expect(() => writeGGUF({ metadata: {}, tensors: t({ shape: [128, 4] }) })).toThrow(/ne\[0\] a multiple of Q4_K's block of 256/);
    expect(() => writeGGUF({ metadata: {}, tensors: t({ type: 'Q9_Z' }) })).toThrow(WebinferError);
    expect(() => writeGGUF({ metadata: {}, tensors: t({ type: 'IQ2_XXS', shape: [256, 1], data: new Uint8Array(66) }) })).toThrow(/type/);
    expect(() => writeGGUF({ metadata: {}, tensors: [...t({}), ...t({})] })).toThrow(/unique tensor names/);
    expect(() => writeGGUF({ metadata: {}, tensors: t({ name: 'x'.repeat(64) }) })).toThrow(/GGML_MAX_NAME/);
    expect(() => writeGGUF({ metadata: {}, tensors: t({ shape: [256, 1, 1, 1, 2] }) })).toThrow(/shape/);
    expect(() => writeGGUF({ metadata: [['k', 300, 'u8']], tensors: [] })).toThrow(/metadata 'k': expected an integer in \[0, 255\]/);
    expect(() => writeGGUF({ metadata: [['k', 1.5, 'i32']], tensors: [] })).toThrow(WebinferError);
    expect(() => writeGGUF({ metadata: [['k', 1], ['k', 2]], tensors: [] })).toThrow(/unique keys/);
    expect(() => writeGGUF({ metadata: { k: [] }, tensors: [] })).toThrow(/explicit item type/);
    expect(() => writeGGUF({ metadata: { k: [1, 'a'] }, tensors: [] })).toThrow(WebinferError);
    expect(() => writeGGUF({ metadata: { k: { a: 1 } }, tensors: [] })).toThrow(WebinferError);
    expect(() => writeGGUF({ metadata: {}, tensors: [], alignment: 24 })).toThrow(/power of two/);
    expect(() => writeGGUF({ metadata: [['general.alignment', 16, 'u32']], tensors: [], alignment: 64 })).toThrow(/general.alignment/);
  });

  it("round-trips through loadGGUF (src/formats/gguf.ts): metadata values, tensor infos and bytes", async () => {
    const tensors = allTensors();
    const llama: [string, unknown, 'f32'?][] = [
      ['llama.block_count', 1], ['llama.context_length', 128], ['llama.embedding_length', 256],
      ['llama.feed_forward_length', 512], ['llama.attention.head_count', 4], ['llama.attention.head_count_kv', 2],
      ['llama.rope.freq_base', 10000, 'f32'], ['llama.attention.layer_norm_rms_epsilon', 1e-5, 'f32'], ['llama.vocab_size', 512],
    ];
    const bytes = writeGGUF({ metadata: [...metadata, ...llama], tensors, alignment: 64 });
    const f = await loadGGUF(bytes);
    try {
      const m = f.metadata;
      expect(m.get('general.architecture')).toBe('llama');
      expect(m.get('t.u8')).toBe(200);
      expect(m.get('t.i16')).toBe(-30000);
      expect(m.get('t.u32')).toBe(4_000_000_000);
      expect(m.get('t.f32')).toBe(0.5);
      expect(m.get('t.bool')).toBe(true);
      expect(m.get('t.u64')).toBe(2n ** 63n); // beyond 2^53: a bigint
      expect(m.get('t.i64')).toBe(-(2n ** 62n));
      expect(m.get('t.f64')).toBe(Math.PI);
      expect(m.get('t.str')).toBe('héllo');
      expect(Array.from(m.get('a.str') as string[])).toEqual(['a', 'bé', '']);
      expect(Array.from(m.get('a.i32') as ArrayLike<number>)).toEqual([1, -2, 3]);
      expect(Array.from(m.get('a.f32') as ArrayLike<number>)).toEqual([0.5, -1]);
      expect(m.get('llama.rope.freq_base')).toBe(10000);
      expect(m.get('general.alignment')).toBe(64);
      expect([...f.tensors.keys()]).toEqual(tensors.map((t) => t.name));
      for (const t of tensors) {
        const info = f.tensorInfo(t.name);
        expect([info.type, info.shape, info.byteLength]).toEqual([t.type, [...t.shape], t.data.length]);
        expect(await f.tensorBytes(t.name)).toEqual(t.data);
      }
      const q = await f.tensorBytes('blk.7.q4_k');
      expect(dequantizeRows('Q4_K', q, 3, 512)).toEqual(dequantizeRows('Q4_K', randomQuantRows('Q4_K', 3, 512, 47), 3, 512));
    } finally {
      await f.close?.();
    }
  });

  it('writeGGUFSplit: gguf-split keys, metadata in the first file only, every tensor once', () => {
    const tensors = allTensors();
    const files = writeGGUFSplit({ metadata: [['general.architecture', 'llama']], tensors }, 3);
    expect(files.length).toBe(3);
    const names: string[] = [];
    files.forEach((f, i) => {
      const g = readMiniGGUF(f);
      const m = new Map(g.metadata);
      expect(m.get('split.no')).toEqual({ type: 'u16', value: i });
      expect(m.get('split.count')).toEqual({ type: 'u16', value: 3 });
      expect(m.get('split.tensors.count')).toEqual({ type: 'i32', value: tensors.length });
      expect(m.has('general.architecture')).toBe(i === 0);
      expect(g.tensors.length).toBeGreaterThan(0);
      for (const t of g.tensors) {
        names.push(t.name);
        const src = tensors.find((x) => x.name === t.name)!;
        expect(f.subarray(g.dataStart + t.offset, g.dataStart + t.offset + src.data.length)).toEqual(src.data);
      }
    });
    expect(names).toEqual(tensors.map((t) => t.name));
    expect(() => writeGGUFSplit({ metadata: {}, tensors: tensors.slice(0, 2) }, 3)).toThrow(/parts/);
  });
});

// ---------------------------------------------------------------------------------------------
// (d) the quantizers

/** randn(64·512, seed 7, std 0.05), 100 outliers ×20 at every 37th element, and one all-zero block. */
function testValues(): Float32Array {
  const x = randn(64 * 512, 7, 0.05);
  for (let i = 0; i < 100; i++) x[i * 37] = x[i * 37]! * 20;
  x.fill(0, 512, 544);
  return x;
}

// hashBytes of gguf-py's quantize(testValues()) (its Q8_0 and Q4_0 follow ggml's reference quantizers)
const QUANTIZED_CHECKSUMS = { Q8_0: 2488459838, Q4_0: 569569623 };

describe('quantizeRows', () => {
  const x = testValues();
  const f16 = (b: Uint8Array, o: number): number => f16BitsToF32(b[o]! | (b[o + 1]! << 8));

  it('Q8_0: the bytes ggml writes; |w − x| <= d/2 (+ the f16 rounding of d)', () => {
    const b = quantizeRows('Q8_0', x, 64, 512);
    expect(b.length).toBe(64 * 16 * 34);
    expect(hashBytes(b)).toBe(QUANTIZED_CHECKSUMS.Q8_0);
    const w = dequantizeRows('Q8_0', b, 64, 512);
    for (let blk = 0; blk < 64 * 16; blk++) {
      const d = Math.abs(f16(b, 34 * blk));
      let amax = 0;
      for (let j = 0; j < 32; j++) amax = Math.max(amax, Math.abs(x[32 * blk + j]!));
      const d32 = amax / 127; // q was rounded with the f32 d; |d16 − d32| <= 2^-11·d
      for (let j = 0; j < 32; j++) {
        const i = 32 * blk + j;
        expect(Math.abs(w[i]! - x[i]!)).toBeLessThanOrEqual(d32 / 2 + 127 * Math.abs(d - d32) + 1e-7 * amax);
      }
    }
  });

  it('Q4_0: the bytes ggml writes; |w − x| <= d/2, or d where the positive end clips at 7', () => {
    const b = quantizeRows('Q4_0', x, 64, 512);
    expect(b.length).toBe(64 * 16 * 18);
    expect(hashBytes(b)).toBe(QUANTIZED_CHECKSUMS.Q4_0);
    const w = dequantizeRows('Q4_0', b, 64, 512);
    for (let blk = 0; blk < 64 * 16; blk++) {
      const d = Math.abs(f16(b, 18 * blk));
      let amax = 0;
      for (let j = 0; j < 32; j++) amax = Math.max(amax, Math.abs(x[32 * blk + j]!));
      const slack = 8 * 2 ** -11 * d + 1e-7 * amax;
      for (let j = 0; j < 32; j++) {
        const i = 32 * blk + j;
        const q = (b[18 * blk + 2 + (j & 15)]! >> (j < 16 ? 0 : 4)) & 0xf;
        const err = Math.abs(w[i]! - x[i]!);
        expect(err).toBeLessThanOrEqual((q === 15 ? d : d / 2) + slack);
      }
    }
    // a block's largest magnitude maps to −8 exactly
    const one = new Float32Array(32).map((_, j) => (j === 5 ? -3 : j / 32));
    const q = quantizeRows('Q4_0', one, 1, 32);
    expect(f16(q, 0)).toBe(0.375);
    expect(q[2 + 5]! & 0xf).toBe(0);
  });

  for (const [type, sub] of [['Q4_K', 32], ['Q6_K', 16]] as const) {
    it(`${type}: valid blocks; |w − x| <= half the sub-block step; zeros stay zero`, () => {
      const b = quantizeRows(type, x, 64, 512);
      expect(b.length).toBe(64 * 2 * QUANT_FORMATS[type].blockBytes);
      const w = dequantizeRows(type, b, 64, 512);
      let se = 0, sx = 0;
      for (let blk = 0; blk < 128; blk++) {
        const o = QUANT_FORMATS[type].blockBytes * blk;
        const d = f16(b, type === 'Q4_K' ? o : o + 208);
        for (let s = 0; s < 256 / sub; s++) {
          let step: number;
          if (type === 'Q4_K') {
            // this sub-block's scale code, decoded by hand (see the Q4_K hand-built test)
            const sc = s < 4 ? b[o + 4 + s]! & 63 : (b[o + 4 + s + 4]! & 0xf) | ((b[o + 4 + s - 4]! >> 6) << 4);
            step = d * sc;
          } else {
            step = d * ((b[o + 192 + s]! << 24) >> 24);
          }
          for (let l = 0; l < sub; l++) {
            const i = 256 * blk + sub * s + l;
            expect(Math.abs(w[i]! - x[i]!)).toBeLessThanOrEqual(Math.abs(step) / 2 + 1e-6);
          }
        }
        for (let i = 256 * blk; i < 256 * blk + 256; i++) { se += (w[i]! - x[i]!) ** 2; sx += x[i]! ** 2; }
      }
      for (let i = 512; i < 544; i++) expect(w[i]).toBe(0);
      // relative RMS error: about 0.1 for Q4_K and 0.03 for Q6_K on these values
      expect(Math.sqrt(se / sx)).toBeLessThan(type === 'Q4_K' ? 0.15 : 0.05);
    });
  }

  it('validates its inputs', () => {
    expect(() => quantizeRows('Q8_0', new Float32Array(48), 1, 48)).toThrow(/K: expected a positive multiple of Q8_0's block of 32/);
    expect(() => quantizeRows('Q4_K', new Float32Array(256), 2, 256)).toThrow(/values: expected 2 × 256 = 512 elements/);
    expect(() => quantizeRows('Q4_0', new Float32Array(32).fill(NaN), 1, 32)).toThrow(/values\[0\]: expected a finite number/);
    expect(() => quantizeRows('Q5_0' as never, new Float32Array(32), 1, 32)).toThrow(WebinferError);
    expect(() => quantizeRows('Q8_0', new Float32Array(32).fill(1e9), 1, 32)).toThrow(/f16/);
  });
});
