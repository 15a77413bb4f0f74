import { describe, expect, it } from 'vitest';
import {
  attribute, fieldBytes, fieldFloat, fieldPacked, fieldString, fieldVarint, gqaDecodeModel, mhaModel, pagedAttentionModel, valueInfo, varint,
} from '../../bench/onnx';
import { kernelMsEachRun, kernelMsPerRun, parseProfile } from '../../bench/ort';

const hex = (b: Uint8Array | number[]) => Array.from(b, (x) => x.toString(16).padStart(2, '0')).join(' ');

/** A tiny protobuf reader for the tests: top-level fields of a message as [field, wire type, value]. */
function fields(buf: Uint8Array): [number, number, bigint | Uint8Array][] {
  const out: [number, number, bigint | Uint8Array][] = [];
  let i = 0;
  const readVarint = () => {
    let v = 0n, shift = 0n;
    for (;;) {
      const b = buf[i++];
      v |= BigInt(b & 0x7f) << shift;
      shift += 7n;
      if (!(b & 0x80)) return v;
    }
  };
  while (i < buf.length) {
    const key = Number(readVarint());
    const field = key >> 3, wire = key & 7;
    if (wire === 0) out.push([field, wire, readVarint()]);
    else if (wire === 2) { const n = Number(readVarint()); out.push([field, wire, buf.subarray(i, i + n)]); i += n; }
    else if (wire === 5) { out.push([field, wire, buf.subarray(i, i + 4)]); i += 4; }
    else throw new Error(`wire type ${wire}`);
  }
  return out;
}
const text = (v: bigint | Uint8Array) => new TextDecoder().decode(v as Uint8Array);
const sub = (msg: Uint8Array, field: number) => fields(msg).filter(([f]) => f === field).map(([, , v]) => v as Uint8Array);

describe('protobuf encoding (bench/onnx.ts)', () => {
  it('writes varints: one byte below 128, seven bits per byte with continuation, negatives in ten bytes', () => {
    expect(varint(0)).toEqual([0]);
    expect(varint(127)).toEqual([0x7f]);
    expect(varint(128)).toEqual([0x80, 0x01]);
    expect(varint(300)).toEqual([0xac, 0x02]);
    expect(varint(2 ** 35)).toEqual([0x80, 0x80, 0x80, 0x80, 0x80, 0x01]);
    expect(varint(-1)).toEqual([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
  });

  it('writes keys, varint, length-delimited, fixed32 and packed fields', () => {
    expect(hex(fieldVarint(1, 150))).toBe('08 96 01');
    expect(hex(fieldString(2, 'testing'))).toBe('12 07 74 65 73 74 69 6e 67');
    // Field 20 needs a two-byte key: (20 << 3) | 0 = 160.
    expect(hex(fieldVarint(20, 2))).toBe('a0 01 02');
    expect(hex(fieldFloat(2, 1))).toBe('15 00 00 80 3f');
    expect(hex(fieldFloat(2, 0.125))).toBe('15 00 00 00 3e');
    expect(hex(fieldPacked(4, [3, 270, 86942]))).toBe('22 06 03 8e 02 9e a7 05');
    expect(hex(fieldBytes(3, fieldVarint(1, 150)))).toBe('1a 03 08 96 01');
  });

  it('encodes ONNX attributes and value infos by hand-computed bytes', () => {
    // name "h" (0a 01 68), i 8 (18 08), type INT (a0 01 02)
    expect(hex(attribute({ name: 'h', int: 8 }))).toBe('0a 01 68 18 08 a0 01 02');
    // name "s" (0a 01 73), f 0.5 (15 00 00 00 3f), type FLOAT (a0 01 01)
    expect(hex(attribute({ name: 's', float: 0.5 }))).toBe('0a 01 73 15 00 00 00 3f a0 01 01');
    // ValueInfo "x": type { tensor_type { elem_type 10, shape { dim { dim_value 2 } dim { dim_param "L" } } } }
    expect(hex(valueInfo('x', 'float16', [2, 'L']))).toBe('0a 01 78 12 0f 0a 0d 08 0a 12 09 0a 02 08 02 0a 03 12 01 4c');
  });
});

describe('peer models', () => {
  it('MultiHeadAttention: ir_version, opsets, one com.microsoft node with its attributes, typed inputs', () => {
    const m = mhaModel({ B: 1, H: 8, D: 64, L: 1024, dtype: 'f16', causal: true });
    const top = fields(m);
    expect(top[0]).toEqual([1, 0, 8n]);
    const opsets = sub(m, 8).map((o) => [text(sub(o, 1)[0] ?? new Uint8Array()), Number(fields(o).find(([f]) => f === 2)![2])]);
    expect(opsets).toEqual([['', 17], ['com.microsoft', 1]]);
    const g = sub(m, 7)[0];
    const [node] = sub(g, 1);
    expect(sub(node, 1).map(text)).toEqual(['query', 'key', 'value']);
    expect(sub(node, 2).map(text)).toEqual(['output']);
    expect(text(sub(node, 4)[0])).toBe('MultiHeadAttention');
    expect(text(sub(node, 7)[0])).toBe('com.microsoft');
    const attrs = Object.fromEntries(sub(node, 5).map((a) => {
      const f = fields(a);
      const name = text(f.find(([n]) => n === 1)![2]);
      const i = f.find(([n]) => n === 3);
      const fl = f.find(([n]) => n === 2);
      return [name, i ? Number(i[2]) : new DataView((fl![2] as Uint8Array).slice().buffer).getFloat32(0, true)];
    }));
    expect(attrs).toEqual({ num_heads: 8, scale: Math.fround(1 / 8), unidirectional: 1 });
    // query [1, 1024, 512] float16
    const q = sub(g, 11)[0];
    expect(text(sub(q, 1)[0])).toBe('query');
    const tensorType = sub(sub(q, 2)[0], 1)[0];
    expect(fields(tensorType)[0]).toEqual([1, 0, 10n]);
    const dims = sub(sub(tensorType, 2)[0], 1).map((d) => Number(fields(d)[0][2]));
    expect(dims).toEqual([1, 1024, 512]);
  });

  it('GroupQueryAttention decode: the seven inputs in schema order, three outputs, head counts', () => {
    const m = gqaDecodeModel({ Hq: 32, Hkv: 8, D: 128, dtype: 'f16', batch: 4, maxSeq: 4096 });
    const g = sub(m, 7)[0];
    const [node] = sub(g, 1);
    expect(sub(node, 1).map(text)).toEqual(['query', 'key', 'value', 'past_key', 'past_value', 'seqlens_k', 'total_sequence_length']);
    expect(sub(node, 2).map(text)).toEqual(['output', 'present_key', 'present_value']);
    const ints = Object.fromEntries(sub(node, 5).map((a) => fields(a)).filter((f) => f.some(([n]) => n === 3))
      .map((f) => [text(f.find(([n]) => n === 1)![2]), Number(f.find(([n]) => n === 3)![2])]));
    expect(ints).toEqual({ num_heads: 32, kv_num_heads: 8 });
    // seqlens_k is int32 [B]; total_sequence_length an int32 scalar (a shape with no dims).
    const inputs = sub(g, 11);
    const elem = (vi: Uint8Array) => Number(fields(sub(sub(vi, 2)[0], 1)[0])[0][2]);
    expect(inputs.map(elem)).toEqual([10, 10, 10, 10, 10, 6, 6]);
    const totalShape = sub(sub(sub(inputs[6], 2)[0], 1)[0], 2)[0];
    expect(totalShape.length).toBe(0);
  });

  it('PagedAttention decode: 17 input slots (optional ones empty, attention_metadata at 16), output only, f16 paged caches', () => {
    const m = pagedAttentionModel({ Hq: 32, Hkv: 8, D: 128, numBlocks: 96, blockSize: 16, batch: 2, maxBlocksPerSeq: 16 });
    const g = sub(m, 7)[0];
    const [node] = sub(g, 1);
    expect(text(sub(node, 4)[0])).toBe('PagedAttention');
    expect(text(sub(node, 7)[0])).toBe('com.microsoft');
    expect(sub(node, 1).map(text)).toEqual(['query', 'key', 'value', 'key_cache', 'value_cache', 'cumulative_sequence_length', 'past_seqlens', 'block_table',
      '', '', '', '', '', '', '', '', 'attention_metadata']);
    // No cache outputs: the op then writes the new token into the input caches in place.
    expect(sub(node, 2).map(text)).toEqual(['output']);
    const attrs = Object.fromEntries(sub(node, 5).map((a) => {
      const f = fields(a);
      const i = f.find(([n]) => n === 3), fl = f.find(([n]) => n === 2);
      return [text(f.find(([n]) => n === 1)![2]), i ? Number(i[2]) : new DataView((fl![2] as Uint8Array).slice().buffer).getFloat32(0, true)];
    }));
    expect(attrs).toEqual({ num_heads: 32, kv_num_heads: 8, scale: Math.fround(1 / Math.sqrt(128)) });
    const inputs = sub(g, 11);
    const tensorType = (vi: Uint8Array) => sub(sub(vi, 2)[0], 1)[0];
    const dims = (vi: Uint8Array) => sub(sub(tensorType(vi), 2)[0], 1).map((d) => Number(fields(d)[0][2]));
    expect(inputs.map((vi) => text(sub(vi, 1)[0]))).toEqual(['query', 'key', 'value', 'key_cache', 'value_cache', 'cumulative_sequence_length', 'past_seqlens',
      'block_table', 'attention_metadata']);
    expect(inputs.map((vi) => Number(fields(tensorType(vi))[0][2]))).toEqual([10, 10, 10, 10, 10, 6, 6, 6, 6]);
    // One token a sequence (T = batch), caches [blocks, block size, Hkv, D], the block table [batch, width].
    expect(inputs.map(dims)).toEqual([[2, 4096], [2, 1024], [2, 1024], [96, 16, 8, 128], [96, 16, 8, 128], [3], [2], [2, 16], [2]]);
    expect(sub(g, 12).map(dims)).toEqual([[2, 4096]]);
  });
});

describe('peer profile parsing (bench/ort.ts)', () => {
  it('sums the provider kernels of each run (µs → ms) and keeps the last runs', () => {
    const ev = (name: string, dur: number) => ({ cat: 'Api', name, dur, ts: 0, args: { cache_key: `${name}[0|1]:64` } });
    const events = [
      { cat: 'Session', name: 'model_run', dur: 999, ts: 0 },
      ev('Copy', 10), ev('Flash', 990),   // run 1 (the check)
      ev('Copy', 20), ev('Flash', 480),   // run 2
      ev('Copy', 30), ev('Flash', 1970),  // run 3
    ];
    const text = `log line\n${JSON.stringify(events)}\n`;
    const parsed = parseProfile(text);
    expect(parsed.length).toBe(7);
    expect(kernelMsPerRun(parsed, 3, 2)).toEqual({ ms: [0.5, 2], kernels: ['Copy', 'Flash'] });
    // Events that do not divide into runs: no per-run answer (the caller falls back to wall clock).
    expect(kernelMsPerRun(parsed, 4, 2)).toBeNull();
    expect(parseProfile('no profile here')).toEqual([]);
  });

  it('names kernels without their variant suffix and leaves the omitted ones out of restMs', () => {
    const ev = (key: string, dur: number) => ({ cat: 'Api', name: 'x', dur, ts: 0, args: { cache_key: key } });
    const events = [
      ev('ScatterKVToPagedCache:1|1|1:3;2|3;2', 100), ev('PagedAttentionPrepareMetadata:1|1:6;1', 10), ev('FlashAttentionPagedDecodeQKV', 890),
      ev('ScatterKVToPagedCache:1|1|1:3;2|3;2', 200), ev('PagedAttentionPrepareMetadata:1|1:6;1', 10), ev('FlashAttentionPagedDecodeQKV', 1790),
    ];
    expect(kernelMsEachRun(events, 2, /^ScatterKVToPagedCache/)).toEqual({
      ms: [1, 2], restMs: [0.9, 1.8], kernels: ['ScatterKVToPagedCache', 'PagedAttentionPrepareMetadata', 'FlashAttentionPagedDecodeQKV'],
    });
    // Without `omit`, restMs is the whole run.
    expect(kernelMsEachRun(events, 2)?.restMs).toEqual([1, 2]);
  });
});
