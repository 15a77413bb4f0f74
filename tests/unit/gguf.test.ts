import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebinferError } from '../../src/core/errors';
import { GGML_TYPE_IDS, QUANT_FORMATS } from '../../src/core/quant';
import { parseConfig, type ModelConfig } from '../../src/models/config';
import { ggmlTypeSize, loadGGUF, type GGUFFile } from '../../src/formats/gguf';
import { f32Decimal, ggufConfig, llama3RopeFromFactors } from '../../src/formats/gguf_config';
import { ropeParameters } from '../../src/models/rope';

const goldensQuant = join(dirname(fileURLToPath(import.meta.url)), '../../../shared/goldens-quant');
const GGUF_GOLDENS = ['llama-q8-0', 'llama-q4-0', 'llama-q4-k-m', 'llama-q5-mix', 'qwen3-q8-0', 'qwen3-q4-0', 'qwen3-q4-k-m', 'qwen3-q5-mix'].map((s) => `gguf-${s}`);
type Json = Record<string, unknown>;
const readJson = (folder: string, file: string): Json => JSON.parse(readFileSync(join(goldensQuant, folder, file), 'utf8')) as Json;
const modelPath = (folder: string) => join(goldensQuant, folder, 'model.gguf');

let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'webinfer-gguf-'));
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

// ---------------------------------------------------------------------------------------------
// A minimal GGUF writer, for malformed and split files.

const T = { U8: 0, I8: 1, U16: 2, I16: 3, U32: 4, I32: 5, F32: 6, BOOL: 7, STRING: 8, ARRAY: 9, U64: 10, I64: 11, F64: 12 } as const;
/** A typed metadata value; an ARRAY's value is [elementType, items] (items typed the same way). */
type KV = [key: string, type: number, value: unknown];
interface TensorSpec {
  name: string;
  shape: number[];
  typeId: number;
  data: Uint8Array;
  /** Offset in the data section; default: the next aligned position. */
  offset?: number;
}

class Bytes {
  private parts: number[] = [];
  get length() {
    return this.parts.length;
  }
  raw(b: ArrayLike<number>) {
    for (let i = 0; i < b.length; i++) this.parts.push(b[i]!);
  }
  num(n: number, bytes: number, set: (dv: DataView, v: number) => void) {
    const dv = new DataView(new ArrayBuffer(bytes));
    set(dv, n);
    this.raw(new Uint8Array(dv.buffer));
  }
  u32(n: number) {
    this.num(n, 4, (dv, v) => dv.setUint32(0, v, true));
  }
  u64(n: number | bigint) {
    const dv = new DataView(new ArrayBuffer(8));
    dv.setBigUint64(0, BigInt(n), true);
    this.raw(new Uint8Array(dv.buffer));
  }
  str(s: string) {
    const b = new TextEncoder().encode(s);
    this.u64(b.length);
    this.raw(b);
  }
  value(type: number, v: unknown) {
    switch (type) {
      case T.U8: return this.num(v as number, 1, (dv, x) => dv.setUint8(0, x));
      case T.I8: return this.num(v as number, 1, (dv, x) => dv.setInt8(0, x));
      case T.U16: return this.num(v as number, 2, (dv, x) => dv.setUint16(0, x, true));
      case T.I16: return this.num(v as number, 2, (dv, x) => dv.setInt16(0, x, true));
      case T.U32: return this.u32(v as number);
      case T.I32: return this.num(v as number, 4, (dv, x) => dv.setInt32(0, x, true));
      case T.F32: return this.num(v as number, 4, (dv, x) => dv.setFloat32(0, x, true));
      case T.F64: return this.num(v as number, 8, (dv, x) => dv.setFloat64(0, x, true));
      case T.BOOL: return this.raw([v ? 1 : 0]);
      case T.STRING: return this.str(v as string);
      case T.U64: return this.u64(v as number | bigint);
      case T.I64: {
        const dv = new DataView(new ArrayBuffer(8));
        dv.setBigInt64(0, BigInt(v as number | bigint), true);
        return this.raw(new Uint8Array(dv.buffer));
      }
      case T.ARRAY: {
        const [et, items] = v as [number, unknown[]];
        this.u32(et);
        this.u64(items.length);
        for (const x of items) this.value(et, x);
        return;
      }
    }
    // Anything else: an invalid type id, written with no value.
  }
  bytes() {
    return new Uint8Array(this.parts);
  }
}

function encodeGGUF(o: { kv: KV[]; tensors: TensorSpec[]; version?: number; alignment?: number; magic?: string }): Uint8Array<ArrayBuffer> {
  const align = o.alignment ?? 32;
  const h = new Bytes();
  h.raw(new TextEncoder().encode(o.magic ?? 'GGUF'));
  h.u32(o.version ?? 3);
  h.u64(o.tensors.length);
  h.u64(o.kv.length);
  for (const [k, t, v] of o.kv) {
    h.str(k);
    h.u32(t);
    h.value(t, v);
  }
  let at = 0;
  const offsets = o.tensors.map((t) => {
    const off = t.offset ?? Math.ceil(at / align) * align;
    at = Math.max(at, off + t.data.byteLength);
    return off;
  });
  o.tensors.forEach((t, i) => {
    h.str(t.name);
    h.u32(t.shape.length);
    for (const d of t.shape) h.u64(d);
    h.u32(t.typeId);
    h.u64(offsets[i]!);
  });
  const header = h.bytes();
  const dataStart = Math.ceil(header.length / align) * align;
  const out = new Uint8Array(dataStart + Math.ceil(at / align) * align);
  out.set(header);
  o.tensors.forEach((t, i) => out.set(t.data, dataStart + offsets[i]!));
  return out;
}

/** Guesses a GGUF type for a metadata value read back by loadGGUF (enough to re-encode a golden). */
function typed(key: string, v: unknown): KV {
  const scalar = (x: unknown): number => {
    if (typeof x === 'string') return T.STRING;
    if (typeof x === 'boolean') return T.BOOL;
    if (typeof x === 'bigint') return T.U64;
    if (typeof x === 'number') return Number.isInteger(x) ? (x < 0 ? T.I32 : T.U32) : T.F32;
    throw new Error(`${key}: ${typeof x}`);
  };
  if (Array.isArray(v)) {
    const et = v.some((x) => typeof x === 'number' && !Number.isInteger(x)) ? T.F32 : scalar(v[0]);
    return [key, T.ARRAY, [et, v]];
  }
  return [key, scalar(v), v];
}

/** Byte equality without a per-element diff (vitest's toEqual is slow on MB-sized arrays). */
function expectBytes(a: Uint8Array, b: Uint8Array, what = 'bytes') {
  expect(a.byteLength, what).toBe(b.byteLength);
  expect(Buffer.compare(a, b), what).toBe(0);
}

const fill = (n: number, seed = 1) => Uint8Array.from({ length: n }, (_, i) => (i * 31 + seed * 7) & 0xff);
const Q4_0 = GGML_TYPE_IDS.Q4_0!;
const Q8_0 = GGML_TYPE_IDS.Q8_0!;
const F32 = GGML_TYPE_IDS.F32!;
const q8Bytes = (k: number, rows: number) => (k / 32) * 34 * rows;

/** A small valid llama GGUF (no tokenizer) to break in the error tests. */
function tinyLlama(o: { kv?: KV[]; tensors?: TensorSpec[]; alignment?: number; version?: number; magic?: string } = {}) {
  const kv: KV[] = o.kv ?? tinyLlamaKv();
  const tensors = o.tensors ?? [
    { name: 'token_embd.weight', shape: [64, 32], typeId: Q8_0, data: fill(q8Bytes(64, 32)) },
    { name: 'output_norm.weight', shape: [64], typeId: F32, data: fill(256, 2) },
    { name: 'blk.0.attn_q.weight', shape: [64, 64], typeId: Q4_0, data: fill((64 / 32) * 18 * 64, 3) },
  ];
  return encodeGGUF({ kv, tensors, alignment: o.alignment, version: o.version, magic: o.magic });
}

// ---------------------------------------------------------------------------------------------

describe('loadGGUF: the goldens', () => {
  it.each(GGUF_GOLDENS)('%s: tensors, types, shapes and metadata from a path', async (folder) => {
    const g = await loadGGUF(modelPath(folder));
    const golden = readJson(folder, 'golden.json');
    const cfg = readJson(folder, 'config.hf.json');
    const types = golden.gguf_tensor_types as Record<string, string>;
    expect(new Set(g.tensors.keys())).toEqual(new Set(Object.keys(types)));
    for (const [name, t] of g.tensors) expect(t.type, name).toBe(types[name]);

    const hidden = cfg.hidden_size as number;
    const hd = cfg.head_dim as number;
    const inter = cfg.intermediate_size as number;
    const expectShape = (name: string, shape: number[]) => expect(g.tensors.get(name)?.shape, name).toEqual(shape);
    expectShape('token_embd.weight', [hidden, cfg.vocab_size as number]);
    expectShape('output_norm.weight', [hidden]);
    for (let l = 0; l < (cfg.num_hidden_layers as number); l++) {
      // ggml's ne order: an HF [out, in] matrix is [in, out].
      expectShape(`blk.${l}.attn_q.weight`, [hidden, (cfg.num_attention_heads as number) * hd]);
      expectShape(`blk.${l}.attn_k.weight`, [hidden, (cfg.num_key_value_heads as number) * hd]);
      expectShape(`blk.${l}.attn_output.weight`, [(cfg.num_attention_heads as number) * hd, hidden]);
      expectShape(`blk.${l}.ffn_gate.weight`, [hidden, inter]);
      expectShape(`blk.${l}.ffn_down.weight`, [inter, hidden]);
      if (cfg.model_type === 'qwen3') expectShape(`blk.${l}.attn_q_norm.weight`, [hd]);
    }
    expect(g.tensors.has('output.weight')).toBe(!cfg.tie_word_embeddings);

    const arch = cfg.model_type as string;
    expect(g.metadata.get('general.architecture')).toBe(arch);
    expect(g.metadata.get(`${arch}.block_count`)).toBe(cfg.num_hidden_layers);
    expect(g.metadata.get(`${arch}.embedding_length`)).toBe(hidden);
    expect(g.metadata.get('tokenizer.ggml.model')).toBe('gpt2');
    expect(g.metadata.get('tokenizer.ggml.tokens')).toHaveLength(cfg.vocab_size as number);
    expect(g.metadata.get('general.quantization_version')).toBe(2);
    expect(g.name).toBe(modelPath(folder));

    // Every tensor lies where the index says, in order, inside the file.
    const file = readFileSync(modelPath(folder));
    let prevEnd = 0;
    for (const [name, t] of g.tensors) {
      expect(t.offset % 32, name).toBe(0);
      expect(t.offset).toBeGreaterThanOrEqual(prevEnd);
      prevEnd = t.offset + t.byteLength;
      const size = ggmlTypeSize(t.typeId)!;
      expect(t.byteLength).toBe((t.shape.reduce((a, b) => a * b, 1) / size.blockElems) * size.blockBytes);
      const bytes = await g.tensorBytes(name);
      expect(bytes.byteLength).toBe(t.byteLength);
      expect(Buffer.from(bytes).equals(file.subarray(t.offset, t.offset + t.byteLength)), name).toBe(true);
    }
    expect(prevEnd).toBeLessThanOrEqual(file.byteLength);
    expect(g.tensorInfo('output_norm.weight')).toBe(g.tensors.get('output_norm.weight'));
    expect(() => g.tensorInfo('nope')).toThrow(/GGUFFile\.tensorInfo: name: expected a tensor of .* got 'nope'/);
    await expect(g.tensorBytes('nope')).rejects.toThrow(WebinferError);
    await g.close!();
  });

  it.each(GGUF_GOLDENS)("%s: config.json equivalent parses as the folder's config.hf.json", async (folder) => {
    const g = await loadGGUF(modelPath(folder));
    const mine = parseConfig(g.config);
    const ref = parseConfig(readJson(folder, 'config.hf.json'));
    // A quantized GGUF does not record the dtype the model was converted from.
    const strip = (c: ModelConfig) => ({ ...c, dtype: null });
    expect(strip(mine)).toEqual(strip(ref));
    expect(g.config).toMatchObject({ rms_norm_eps: ref.rmsEps, rope_scaling: null });
    await g.close!();
  });

  it.each(GGUF_GOLDENS)('%s: reads the same from bytes, an ArrayBuffer, a Blob and a File as from the path', async (folder) => {
    const bytes = new Uint8Array(readFileSync(modelPath(folder)));
    const ref = await loadGGUF(modelPath(folder));
    const sources: [unknown, string][] = [
      [bytes, 'bytes'],
      [bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength), 'bytes'],
      [new Blob([bytes]), 'blob'],
      [new File([bytes], 'model.gguf'), 'model.gguf'],
    ];
    for (const [src, name] of sources) {
      const g = await loadGGUF(src as Blob);
      expect(g.name).toBe(name);
      expect([...g.tensors]).toEqual([...ref.tensors]);
      expect([...g.metadata]).toEqual([...ref.metadata]);
      expect(g.config).toEqual(ref.config);
      expect(g.tokenizer).toEqual(ref.tokenizer);
      for (const name of ['token_embd.weight', 'blk.1.ffn_down.weight', 'output_norm.weight']) {
        expectBytes(await g.tensorBytes(name), await ref.tensorBytes(name));
      }
    }
    await ref.close!();
  });

  it('streams a Response: tensors in file order, a clear error out of order', async () => {
    // Larger than the first chunk the header is read with (1 MiB), which stays readable in any order.
    const folder = 'gguf-qwen3-q8-0';
    const bytes = new Uint8Array(readFileSync(modelPath(folder)));
    const ref = await loadGGUF(bytes);
    // Small uneven chunks, as a network delivers them.
    const chunked = () => {
      let at = 0;
      return new Response(
        new ReadableStream<Uint8Array>({
          pull(c) {
            if (at >= bytes.length) return c.close();
            const n = 1000 + (at % 777);
            c.enqueue(bytes.slice(at, at + n));
            at += n;
          },
        }),
      );
    };
    const g = await loadGGUF(chunked());
    expect([...g.tensors]).toEqual([...ref.tensors]);
    for (const name of g.tensors.keys()) expectBytes(await g.tensorBytes(name), await ref.tensorBytes(name), name);
    // The first tensors came with the header; a late one is gone once read.
    expectBytes(await g.tensorBytes('token_embd.weight'), await ref.tensorBytes('token_embd.weight'));
    await expect(g.tensorBytes('output_norm.weight')).rejects.toThrow(/GGUFFile\.tensorBytes: response: expected reads in file order, each tensor once .*, got a read at byte \d+ after byte \d+ was passed/);

    const late = [...ref.tensors].filter(([, t]) => t.offset > 1 << 20).map(([n]) => n);
    expect(late.length).toBeGreaterThan(2);
    const h = await loadGGUF(chunked());
    expectBytes(await h.tensorBytes(late[2]!), await ref.tensorBytes(late[2]!));
    await expect(h.tensorBytes(late[0]!)).rejects.toThrow(/a Response is read as a stream; pass a Blob, path or URL for random access/);
    await h.close!();

    await expect(loadGGUF(new Response('nope', { status: 404 }))).rejects.toThrow(/loadGGUF: response: expected a successful response, got HTTP 404/);
    const used = new Response(bytes);
    await used.arrayBuffer();
    await expect(loadGGUF(used)).rejects.toThrow(/expected a Response whose body has not been read, got a used body/);
  });

  describe('over HTTP', () => {
    let server: Server;
    let base: string;
    const requests: { path: string; range?: string }[] = [];
    beforeAll(async () => {
      const file = readFileSync(modelPath('gguf-llama-q8-0'));
      server = createServer((req, res) => {
        requests.push({ path: req.url!, range: req.headers.range });
        if (req.url === '/missing.gguf') return res.writeHead(404).end();
        const m = /^bytes=(\d+)-(\d+)$/.exec(req.headers.range ?? '');
        if (m && req.url === '/model.gguf') {
          const b = Number(m[1]);
          const e = Math.min(Number(m[2]) + 1, file.length);
          if (b >= file.length) return res.writeHead(416).end();
          res.writeHead(206, { 'content-range': `bytes ${b}-${e - 1}/${file.length}`, 'content-length': e - b });
          return res.end(file.subarray(b, e));
        }
        res.writeHead(200, { 'content-length': file.length });
        res.end(file);
      });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      const addr = server.address() as { port: number };
      base = `http://127.0.0.1:${addr.port}`;
    });
    afterAll(async () => {
      await new Promise((r) => server.close(r));
    });

    it('reads the header and single tensors with Range requests', async () => {
      requests.length = 0;
      const ref = await loadGGUF(modelPath('gguf-llama-q8-0'));
      const g = await loadGGUF(`${base}/model.gguf`);
      expect([...g.tensors]).toEqual([...ref.tensors]);
      expect(g.config).toEqual(ref.config);
      expect(requests.every((r) => r.range)).toBe(true);
      const before = requests.length;
      // The first chunk (1 MiB, with token_embd) is kept; a later tensor takes one request of its own.
      expectBytes(await g.tensorBytes('token_embd.weight'), await ref.tensorBytes('token_embd.weight'));
      expectBytes(await g.tensorBytes('output.weight'), await ref.tensorBytes('output.weight'));
      expect(requests.length).toBe(before + 1);
      const out = ref.tensorInfo('output.weight');
      expect(requests.at(-1)!.range).toBe(`bytes=${out.offset}-${out.offset + out.byteLength - 1}`);
    });

    it('falls back to the whole body when the server ignores Range; names a failed request', async () => {
      const g = await loadGGUF(`${base}/norange.gguf`);
      expect(g.tensors.size).toBe(21);
      await expect(loadGGUF(`${base}/missing.gguf`)).rejects.toThrow(/loadGGUF: http:.*missing\.gguf: expected a successful response, got HTTP 404/);
      await expect(loadGGUF('http://127.0.0.1:1/x.gguf')).rejects.toThrow(/loadGGUF: src: expected a reachable URL/);
    });
  });
});

describe('loadGGUF: metadata values', () => {
  it('reads every value type, nested arrays, and 64-bit integers as numbers when safe', async () => {
    const big = 2n ** 60n + 3n;
    const kv: KV[] = [
      ['general.architecture', T.STRING, 'llama'],
      ['v.u8', T.U8, 255],
      ['v.i8', T.I8, -128],
      ['v.u16', T.U16, 65535],
      ['v.i16', T.I16, -32768],
      ['v.u32', T.U32, 4294967295],
      ['v.i32', T.I32, -2147483648],
      ['v.f32', T.F32, 0.1],
      ['v.bool', T.BOOL, true],
      ['v.string', T.STRING, 'héllo ✓ 🦙'],
      ['v.u64.small', T.U64, 12345678901],
      ['v.u64.big', T.U64, big],
      ['v.i64.neg', T.I64, -5],
      ['v.i64.big', T.I64, -big],
      ['v.f64', T.F64, Math.PI],
      ['v.array.i32', T.ARRAY, [T.I32, [1, -2, 3]]],
      ['v.array.str', T.ARRAY, [T.STRING, ['a', '', 'ünï']]],
      ['v.array.nested', T.ARRAY, [T.ARRAY, [[T.U8, [1, 2]], [T.U8, []]]]],
      ['v.array.empty', T.ARRAY, [T.F32, []]],
      ['v.array.u64', T.ARRAY, [T.U64, [1, big]]],
    ];
    const g = await loadGGUF(encodeGGUF({ kv, tensors: [] }).buffer).catch((e: Error) => e);
    // No tensors and no llama keys: the config cannot be built, and says which key is missing.
    expect(g).toBeInstanceOf(WebinferError);
    expect((g as Error).message).toMatch(/ggufConfig: bytes metadata 'llama.embedding_length': expected a positive integer \(required\), got undefined/);

    // The raw reader, through a file whose config does build.
    const full = tinyLlama({ kv: [...(tinyLlamaKv()), ...kv.slice(1)] });
    const f = await loadGGUF(full);
    const m = f.metadata;
    expect(m.get('v.u8')).toBe(255);
    expect(m.get('v.i8')).toBe(-128);
    expect(m.get('v.u16')).toBe(65535);
    expect(m.get('v.i16')).toBe(-32768);
    expect(m.get('v.u32')).toBe(4294967295);
    expect(m.get('v.i32')).toBe(-2147483648);
    expect(m.get('v.f32')).toBe(Math.fround(0.1));
    expect(m.get('v.bool')).toBe(true);
    expect(m.get('v.string')).toBe('héllo ✓ 🦙');
    expect(m.get('v.u64.small')).toBe(12345678901);
    expect(m.get('v.u64.big')).toBe(big);
    expect(m.get('v.i64.neg')).toBe(-5);
    expect(m.get('v.i64.big')).toBe(-big);
    expect(m.get('v.f64')).toBe(Math.PI);
    expect(m.get('v.array.i32')).toEqual([1, -2, 3]);
    expect(m.get('v.array.str')).toEqual(['a', '', 'ünï']);
    expect(m.get('v.array.nested')).toEqual([[1, 2], []]);
    expect(m.get('v.array.empty')).toEqual([]);
    expect(m.get('v.array.u64')).toEqual([1, big]);
    expect([...m.keys()].slice(-3)).toEqual(['v.array.nested', 'v.array.empty', 'v.array.u64']);
    expect(f32Decimal(m.get('v.f32') as number)).toBe(0.1);
  });

  it('honours general.alignment and accepts version 2', async () => {
    const kv: KV[] = [...tinyLlamaKv(), ['general.alignment', T.U32, 64]];
    const g = await loadGGUF(tinyLlama({ kv, alignment: 64, version: 2 }));
    for (const t of g.tensors.values()) expect(t.offset % 64).toBe(0);
    expect(await g.tensorBytes('output_norm.weight')).toEqual(fill(256, 2));
  });
});

function tinyLlamaKv(): KV[] {
  return [
    ['general.architecture', T.STRING, 'llama'],
    ['llama.block_count', T.U32, 1],
    ['llama.context_length', T.U32, 128],
    ['llama.embedding_length', T.U32, 64],
    ['llama.feed_forward_length', T.U32, 128],
    ['llama.attention.head_count', T.U32, 2],
    ['llama.attention.layer_norm_rms_epsilon', T.F32, 1e-5],
    ['llama.vocab_size', T.U32, 32],
  ];
}

describe('loadGGUF: malformed files give named errors', () => {
  const good = tinyLlama();

  it('loads the unbroken file', async () => {
    const g = await loadGGUF(good);
    expect([...g.tensors.keys()]).toEqual(['token_embd.weight', 'output_norm.weight', 'blk.0.attn_q.weight']);
    expect(g.config).toMatchObject({ architectures: ['LlamaForCausalLM'], vocab_size: 32, head_dim: 32, tie_word_embeddings: true });
    expect(g.tokenizer).toBeUndefined();
  });

  const cases: [string, () => Uint8Array | ArrayBuffer | Blob, RegExp][] = [
    ['bad magic', () => tinyLlama({ magic: 'GGML' }), /loadGGUF: bytes: expected a GGUF file \(magic 'GGUF'\), got magic 'GGML'/],
    ['a safetensors file', () => new Uint8Array([8, 0, 0, 0, 0, 0, 0, 0, 123, 125, 32, 32, 32, 32, 32, 32]), /expected a GGUF file \(magic 'GGUF'\)/],
    ['an empty file', () => new Uint8Array(0), /loadGGUF: bytes: expected a complete GGUF header \(magic needs bytes up to 4\), got a truncated file of 0 bytes/],
    ['version 1', () => tinyLlama({ version: 1 }), /expected GGUF version 2 or 3, got 1 \(32-bit counts, not supported\)/],
    ['version 4', () => tinyLlama({ version: 4 }), /expected GGUF version 2 or 3, got 4/],
    ['big-endian', () => tinyLlama({ version: 0x03000000 }), /expected a little-endian GGUF file, got a big-endian one \(version 3\), which is not supported/],
    ['a truncated header', () => good.slice(0, 150), /loadGGUF: bytes: expected a complete GGUF header \(.* needs bytes up to \d+\), got a truncated file of 150 bytes/],
    ['a truncated tensor index', () => good.slice(0, 360), /expected a complete GGUF header \(tensor .*\), got a truncated file of 360 bytes/],
    ['tensor data past the end', () => good.slice(0, good.length - 40), /loadGGUF: bytes tensor 'blk.0.attn_q.weight': expected data inside the file \(\d+ bytes\), got Q4_0 \[64, 64\]: 2304 bytes at byte \d+, past the end of the file/],
    ['a huge string length', () => corruptFirstKeyLength(good), /expected a complete GGUF header \(metadata key 0 needs bytes up to \d+\), got a truncated file/],
    ['a size mismatch (row not a whole number of blocks)', () => tinyLlama({ tensors: [{ name: 'w', shape: [48, 2], typeId: Q4_0, data: fill(64) }] }), /loadGGUF: bytes tensor 'w' shape: expected a first dimension that is a multiple of Q4_0's block of 32, got \[48, 2\]/],
    ['overlapping tensors (size from type and shape)', () => tinyLlama({ tensors: [
      { name: 'a', shape: [64, 2], typeId: Q8_0, data: fill(q8Bytes(64, 2)), offset: 0 },
      { name: 'b', shape: [64], typeId: F32, data: fill(256), offset: 128 },
    ] }), /loadGGUF: bytes tensor 'a': expected to end before tensor 'b' at byte \d+ \(its size follows from its type and shape\), got Q8_0 \[64, 2\]: 136 bytes at byte \d+, overlapping it/],
    ['a misaligned offset', () => tinyLlama({ tensors: [
      { name: 'a', shape: [8], typeId: F32, data: fill(32), offset: 0 },
      { name: 'b', shape: [8], typeId: F32, data: fill(32), offset: 48 },
    ] }), /loadGGUF: bytes tensor 'b' offset: expected a multiple of general.alignment \(32\), got 48/],
    ['a bad alignment', () => tinyLlama({ kv: [...tinyLlamaKv(), ['general.alignment', T.U32, 48]] }), /metadata 'general.alignment': expected a power of two, got 48/],
    ['duplicate tensor names', () => tinyLlama({ tensors: [
      { name: 'a', shape: [8], typeId: F32, data: fill(32) },
      { name: 'a', shape: [8], typeId: F32, data: fill(32) },
    ] }), /loadGGUF: bytes tensor 'a': expected a name no other tensor has, got a duplicate \(also in bytes\)/],
    ['duplicate metadata keys', () => tinyLlama({ kv: [...tinyLlamaKv(), ['llama.block_count', T.U32, 2]] }), /expected unique metadata keys, got 'llama.block_count' twice/],
    ['an unknown value type', () => tinyLlama({ kv: [...tinyLlamaKv(), ['x', 13, 0]] }), /metadata 'x' type: a GGUF value type 0..12 .*, got 13/],
    ['too many dimensions', () => tinyLlama({ tensors: [{ name: 'w', shape: [1, 1, 1, 1, 8], typeId: F32, data: fill(32) }] }), /loadGGUF: bytes tensor 'w': expected at most 4 dimensions, got 5/],
    ['an unknown architecture', () => tinyLlama({ kv: [['general.architecture', T.STRING, 'gemma2'], ...tinyLlamaKv().slice(1)] }), /ggufConfig: bytes metadata 'general.architecture': expected one of llama, qwen2, qwen3, qwen3moe, smollm3, phi3, deepseek2, gpt-oss, gemma3, lfm2 \(the architectures supported\), got 'gemma2'/],
    ['no architecture', () => tinyLlama({ kv: tinyLlamaKv().slice(1) }), /metadata 'general.architecture': expected one of llama, qwen2, qwen3, qwen3moe, smollm3, phi3, deepseek2, gpt-oss, gemma3, lfm2 .*, got no such key/],
    ['a Mixtral-style llama', () => tinyLlama({ kv: [...tinyLlamaKv(), ['llama.expert_count', T.U32, 8]] }), /ggufConfig: bytes metadata 'llama.expert_count': expected none \(a dense llama model; mixture-of-experts llama is not supported\), got 8/],
    ['a missing required key', () => tinyLlama({ kv: tinyLlamaKv().filter(([k]) => k !== 'llama.attention.layer_norm_rms_epsilon') }), /ggufConfig: bytes metadata 'llama.attention.layer_norm_rms_epsilon': expected a number \(required\), got undefined/],
    ['a Blob with the same flaw', () => new File([tinyLlama({ magic: 'GGML' })], 'broken.gguf'), /loadGGUF: broken.gguf: expected a GGUF file/],
  ];
  it.each(cases)('%s', async (_, make, re) => {
    const err = await loadGGUF(make() as Uint8Array).then(() => null, (e: unknown) => e);
    expect(err).toBeInstanceOf(WebinferError);
    expect((err as Error).message).toMatch(re);
  });

  it('names a missing path and a bad source', async () => {
    await expect(loadGGUF(join(tmp, 'nope.gguf'))).rejects.toThrow(/loadGGUF: src: expected a readable GGUF file, got '.*nope\.gguf' \(ENOENT/);
    await expect(loadGGUF(42 as unknown as string)).rejects.toThrow(/loadGGUF: src: expected an ArrayBuffer, Uint8Array, Blob, Response, string, or an array/);
    await expect(loadGGUF([])).rejects.toThrow(/loadGGUF: src: expected at least one part, got \[\]/);
  });

  it('reads a truncated file from disk and names the short tensor', async () => {
    const p = join(tmp, 'short.gguf');
    await writeFile(p, good.slice(0, good.length - 40));
    await expect(loadGGUF(p)).rejects.toThrow(/short\.gguf tensor 'blk.0.attn_q.weight': expected data inside the file/);
  });
});

function corruptFirstKeyLength(good: Uint8Array): Uint8Array {
  const b = good.slice();
  new DataView(b.buffer).setBigUint64(24, 2n ** 40n, true);
  return b;
}

describe('ggmlTypeSize', () => {
  it('knows every ggml type of the table, agreeing with QUANT_FORMATS', () => {
    for (const [name, id] of Object.entries(GGML_TYPE_IDS)) {
      const s = ggmlTypeSize(id);
      expect(s, name).not.toBeNull();
      const q = (QUANT_FORMATS as Record<string, { blockElems: number; blockBytes: number }>)[name];
      if (q) expect(s).toEqual({ blockElems: q.blockElems, blockBytes: q.blockBytes });
    }
    expect(ggmlTypeSize(GGML_TYPE_IDS.F16!)).toEqual({ blockElems: 1, blockBytes: 2 });
    expect(ggmlTypeSize(GGML_TYPE_IDS.IQ2_XXS!)).toEqual({ blockElems: 256, blockBytes: 66 });
    expect(ggmlTypeSize(GGML_TYPE_IDS.Q8_K!)).toEqual({ blockElems: 256, blockBytes: 292 });
    expect(ggmlTypeSize(99)).toBeNull();
  });

  it('opens files with types the engine does not compute with, and unknown ids (sized by the next offset)', async () => {
    const g = await loadGGUF(tinyLlama({ tensors: [
      { name: 'iq', shape: [256, 2], typeId: GGML_TYPE_IDS.IQ2_XXS!, data: fill(132) },
      { name: 'odd', shape: [10], typeId: 99, data: fill(40) },
      { name: 'last', shape: [4], typeId: F32, data: fill(16) },
    ] }));
    expect(g.tensorInfo('iq')).toMatchObject({ type: 'IQ2_XXS', byteLength: 132 });
    expect(g.tensorInfo('odd')).toMatchObject({ type: 'type 99', typeId: 99, byteLength: 64 }); // 40 bytes + alignment padding
    expect((await g.tensorBytes('odd')).subarray(0, 40)).toEqual(fill(40));
    expect(await g.tensorBytes('last')).toEqual(fill(16));
  });
});

// ---------------------------------------------------------------------------------------------
// Split files

/** Cuts a parsed GGUF into parts as gguf-split does: all metadata in part 1, split.* in every part. */
async function split(g: GGUFFile, cuts: number[]): Promise<Uint8Array<ArrayBuffer>[]> {
  const names = [...g.tensors.keys()];
  const bounds = [0, ...cuts, names.length];
  const count = bounds.length - 1;
  const parts: Uint8Array<ArrayBuffer>[] = [];
  for (let i = 0; i < count; i++) {
    const splitKv: KV[] = [
      ['split.no', T.U16, i],
      ['split.count', T.U16, count],
      ['split.tensors.count', T.I32, names.length],
    ];
    const kv = i === 0 ? [...[...g.metadata].map(([k, v]) => typed(k, v)), ...splitKv] : splitKv;
    const tensors: TensorSpec[] = [];
    for (const name of names.slice(bounds[i], bounds[i + 1])) {
      const t = g.tensorInfo(name);
      tensors.push({ name, shape: t.shape, typeId: t.typeId, data: (await g.tensorBytes(name)).slice() });
    }
    parts.push(encodeGGUF({ kv, tensors }));
  }
  return parts;
}

describe('loadGGUF: split files', () => {
  it('reads the parts of a split golden as one model (paths, Blobs, part 1 alone)', async () => {
    const ref = await loadGGUF(modelPath('gguf-qwen3-q5-mix'));
    const parts = await split(ref, [5, 14]);
    const paths = parts.map((_, i) => join(tmp, `qwen-0000${i + 1}-of-00003.gguf`));
    await Promise.all(parts.map((p, i) => writeFile(paths[i]!, p)));
    const blobs = parts.map((p, i) => new File([p], `part${i}.gguf`));
    for (const src of [paths, blobs, paths[0]!]) {
      const g = await loadGGUF(src);
      expect(new Set(g.tensors.keys())).toEqual(new Set(ref.tensors.keys()));
      expect([...g.tensors.values()].map((t) => t.file)).toEqual([...Array(5).fill(0), ...Array(9).fill(1), ...Array(ref.tensors.size - 14).fill(2)]);
      expect(g.config).toEqual(ref.config);
      expect(g.tokenizer).toEqual(ref.tokenizer);
      expect(g.metadata.get('split.count')).toBe(3);
      for (const name of ref.tensors.keys()) {
        expect(g.tensorInfo(name).shape).toEqual(ref.tensorInfo(name).shape);
        expectBytes(await g.tensorBytes(name), await ref.tensorBytes(name), name);
      }
      await g.close!();
    }
    expect(paths[0]).toMatch(/-00001-of-00003\.gguf$/);
  });

  it('names wrong orders, missing parts and duplicate tensors', async () => {
    const ref = await loadGGUF(modelPath('gguf-llama-q4-0'));
    const [a, b] = await split(ref, [10]);
    await expect(loadGGUF([b!, a!].map((p) => new Blob([p])))).rejects.toThrow(/loadGGUF: blob metadata 'split.no': expected 0 \(part 1 of 2: pass the parts in order\), got 1/);
    await expect(loadGGUF([new Blob([a!])])).rejects.toThrow(/loadGGUF: blob: expected a complete model \(or every part of a split one, in order, as an array\), got part 1 of 2 \(split.count\)/);
    await expect(loadGGUF(a!)).rejects.toThrow(/got part 1 of 2/);
    await expect(loadGGUF([a!, a!].map((p) => new Blob([p])))).rejects.toThrow(/loadGGUF: blob metadata 'split.no': expected 1 \(part 2 of 2: pass the parts in order\), got 0/);
    const [c, d, e] = await split(ref, [5, 10]);
    await expect(loadGGUF([c!, d!].map((p) => new Blob([p])))).rejects.toThrow(/metadata 'split.count': expected 2 \(the number of parts given\), got 3/);
    const p1 = join(tmp, 'm-00001-of-00003.gguf');
    await writeFile(p1, c!);
    await writeFile(join(tmp, 'm-00003-of-00003.gguf'), e!);
    await expect(loadGGUF(p1)).rejects.toThrow(/loadGGUF: src: expected a readable GGUF file, got '.*m-00002-of-00003\.gguf'/);
  });
});

// ---------------------------------------------------------------------------------------------
// Config

/** rope_freqs.weight as convert_hf_to_gguf.py writes it for a llama3 rope_scaling. */
function llama3Factors(theta: number, dim: number, factor: number, low: number, high: number, orig: number): Float32Array {
  const out = new Float32Array(dim / 2);
  for (let i = 0; i < dim / 2; i++) {
    const freq = 1 / Math.pow(theta, (2 * i) / dim);
    const wavelen = (2 * Math.PI) / freq;
    if (wavelen < orig / high) out[i] = 1;
    else if (wavelen > orig / low) out[i] = factor;
    else {
      const s = (orig / wavelen - low) / (high - low);
      out[i] = 1 / ((1 - s) / factor + s);
    }
  }
  return out;
}

function expectSameFreqs(a: Float32Array, b: Float32Array) {
  expect(a.length).toBe(b.length);
  for (let i = 0; i < a.length; i++) expect(Math.abs(a[i]! - b[i]!) / b[i]!, `frequency ${i}`).toBeLessThan(1e-6);
}

describe('ggufConfig', () => {
  it('recovers Llama 3.1 and 3.2 rope scaling from rope_freqs.weight', () => {
    expect(llama3RopeFromFactors(llama3Factors(500000, 128, 8, 1, 4, 8192), 500000, 128)).toEqual({
      rope_type: 'llama3', factor: 8, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 8192,
    });
    expect(llama3RopeFromFactors(llama3Factors(500000, 64, 32, 1, 4, 8192), 500000, 64)).toEqual({
      rope_type: 'llama3', factor: 32, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 8192,
    });
    expect(llama3RopeFromFactors(new Float32Array(32).fill(1), 10000, 64)).toBeNull();
    expect(() => llama3RopeFromFactors(new Float32Array(16).fill(2), 10000, 64)).toThrow(/ggufConfig: rope_freqs.weight: expected 32 factors \(rotary dim 64 \/ 2\), got 16/);
    const bumpy = llama3Factors(500000, 128, 8, 1, 4, 8192);
    bumpy[40] = 3;
    expect(() => llama3RopeFromFactors(bumpy, 500000, 128)).toThrow(/ggufConfig: rope_freqs.weight: expected llama3 RoPE scaling factors \(as convert_hf_to_gguf.py writes them\), got factors that/);
  });

  it('any llama3 setting comes back as one with the same frequencies', () => {
    const theta = 500000;
    const dim = 128;
    const rope = llama3RopeFromFactors(llama3Factors(theta, dim, 16, 2, 6, 4096), theta, dim) as Json;
    const cfg = parseConfig({ architectures: ['LlamaForCausalLM'], vocab_size: 8, hidden_size: 256, intermediate_size: 8, num_hidden_layers: 1, num_attention_heads: 2, rope_theta: theta, rope_scaling: rope });
    const ref = parseConfig({ architectures: ['LlamaForCausalLM'], vocab_size: 8, hidden_size: 256, intermediate_size: 8, num_hidden_layers: 1, num_attention_heads: 2, rope_theta: theta, rope_scaling: { rope_type: 'llama3', factor: 16, low_freq_factor: 2, high_freq_factor: 6, original_max_position_embeddings: 4096 } });
    expectSameFreqs(ropeParameters(cfg.rope).invFreq, ropeParameters(ref.rope).invFreq);
  });

  it('a llama GGUF with rope_freqs.weight gets llama3 rope_scaling', async () => {
    const factors = llama3Factors(500000, 32, 8, 1, 4, 8192);
    const kv: KV[] = [...tinyLlamaKv(), ['llama.rope.freq_base', T.F32, 500000], ['llama.rope.dimension_count', T.U32, 32]];
    const bytes = tinyLlama({ kv, tensors: [
      { name: 'rope_freqs.weight', shape: [16], typeId: F32, data: new Uint8Array(factors.buffer) },
      { name: 'token_embd.weight', shape: [64, 32], typeId: Q8_0, data: fill(q8Bytes(64, 32)) },
    ] });
    const g = await loadGGUF(new Response(bytes));
    const rope = parseConfig(g.config).rope;
    expect(rope).toMatchObject({ type: 'llama3', theta: 500000, factor: 8, lowFreqFactor: 1 });
    // 16 frequencies leave one in the transition band: another line through it, the same frequencies.
    const ref = parseConfig({ ...g.config, rope_scaling: { rope_type: 'llama3', factor: 8, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 8192 } }).rope;
    expectSameFreqs(ropeParameters(rope).invFreq, ropeParameters(ref).invFreq);
    // Read at load, still served (even from a stream).
    expect(new Float32Array((await g.tensorBytes('rope_freqs.weight')).slice().buffer)).toEqual(factors);
    expect((await g.tensorBytes('token_embd.weight')).byteLength).toBe(q8Bytes(64, 32));
  });

  it('linear and YaRN scaling, eot tokens and dtypes', () => {
    const meta = new Map<string, unknown>([
      ['general.architecture', 'qwen2'],
      ['general.file_type', 1],
      ['qwen2.block_count', 2],
      ['qwen2.context_length', 131072],
      ['qwen2.embedding_length', 128],
      ['qwen2.feed_forward_length', 256],
      ['qwen2.attention.head_count', 4],
      ['qwen2.attention.head_count_kv', 2],
      ['qwen2.attention.layer_norm_rms_epsilon', Math.fround(1e-6)],
      ['qwen2.rope.freq_base', 1000000],
      ['qwen2.rope.scaling.type', 'yarn'],
      ['qwen2.rope.scaling.factor', 4],
      ['qwen2.rope.scaling.original_context_length', 32768],
      ['tokenizer.ggml.tokens', Array.from({ length: 100 }, (_, i) => `t${i}`)],
      ['tokenizer.ggml.eos_token_id', 97],
      ['tokenizer.ggml.eot_token_id', 98],
      ['tokenizer.ggml.bos_token_id', 96],
    ]);
    const tensors = new Map([['output.weight', { type: 'F16', shape: [128, 100] }]]);
    const c = ggufConfig(meta, tensors) as Json;
    expect(c).toMatchObject({
      architectures: ['Qwen2ForCausalLM'], model_type: 'qwen2', vocab_size: 100, head_dim: 32, num_key_value_heads: 2, rms_norm_eps: 1e-6,
      rope_theta: 1000000, rope_scaling: { rope_type: 'yarn', factor: 4, original_max_position_embeddings: 32768 },
      eos_token_id: [97, 98], bos_token_id: 96, torch_dtype: 'float16', tie_word_embeddings: false,
    });
    const p = parseConfig(c);
    expect(p).toMatchObject({ family: 'qwen2', eosTokenIds: [97, 98], attentionBias: { qkv: true, o: false }, rope: { type: 'yarn', factor: 4 } });
    meta.set('qwen2.rope.scaling.type', 'linear');
    expect((ggufConfig(meta, tensors) as Json).rope_scaling).toEqual({ rope_type: 'linear', factor: 4 });
    meta.set('qwen2.rope.scaling.type', 'longrope');
    expect(() => ggufConfig(meta, tensors, { name: 'x.gguf' })).toThrow(/ggufConfig: x.gguf metadata 'qwen2.rope.scaling.type': expected 'none', 'linear' or 'yarn', got longrope/);
  });

  // Gemma 3: what convert_hf_to_gguf.py writes for Gemma 3 4B (its text model) and 27B, and what llama.cpp
  // fixes for the architecture (pattern 6, local base 1e4, the 27B's scale from hidden / heads).
  it('gemma3: the config llama.cpp runs the file as', () => {
    const gemma3 = (layers: number, hidden: number, heads: number, headDim: number) => new Map<string, unknown>([
      ['general.architecture', 'gemma3'], ['gemma3.block_count', layers], ['gemma3.context_length', 131072],
      ['gemma3.embedding_length', hidden], ['gemma3.feed_forward_length', 4 * hidden], ['gemma3.attention.head_count', heads],
      ['gemma3.attention.head_count_kv', heads / 2], ['gemma3.attention.key_length', headDim], ['gemma3.attention.value_length', headDim],
      ['gemma3.attention.layer_norm_rms_epsilon', Math.fround(1e-6)], ['gemma3.rope.freq_base', 1000000], ['gemma3.attention.sliding_window', 1024],
      ['gemma3.rope.scaling.type', 'linear'], ['gemma3.rope.scaling.factor', 8],
      ['tokenizer.ggml.tokens', Array.from({ length: 300 }, (_, i) => `t${i}`)], ['tokenizer.ggml.bos_token_id', 2],
      ['tokenizer.ggml.eos_token_id', 1], ['tokenizer.ggml.eot_token_id', 106],
    ]);
    const b4 = parseConfig(ggufConfig(gemma3(34, 2560, 8, 256), new Map()));
    expect(b4).toMatchObject({
      architecture: 'Gemma3ForCausalLM', family: 'gemma3', numLayers: 34, numKvHeads: 4, headDim: 256, qkNorm: true, sandwichNorms: true,
      hiddenAct: 'gelu_tanh', tieWordEmbeddings: true, attnSoftcap: null, finalLogitSoftcap: null, vocabSize: 300, bosTokenId: 2, eosTokenIds: [1, 106],
      rope: { type: 'linear', factor: 8, theta: 1e6 }, slidingRope: { type: 'default', theta: 1e4 },
    });
    expect(b4.attentionScale).toBe(Math.pow(256, -0.5));
    expect(b4.layers.map((l) => l.slidingWindow === null ? 'F' : 'S').join('')).toBe('SSSSSF'.repeat(5) + 'SSSS');
    const b27 = parseConfig(ggufConfig(gemma3(62, 5376, 32, 128), new Map()));
    expect(b27.attentionScale).toBe(Math.pow(168, -0.5));
    const noWindow = gemma3(34, 2560, 8, 256);
    noWindow.delete('gemma3.attention.sliding_window');
    expect(() => ggufConfig(noWindow, new Map(), { name: 'g.gguf' })).toThrow("ggufConfig: g.gguf metadata 'gemma3.attention.sliding_window': expected a positive integer (required), got undefined");
  });

  // DeepSeek: the metadata convert_hf_to_gguf.py writes for the engine's DeepSeek goldens, read back.
  const deepseekGoldens: [string, string][] = [
    ['goldens/deepseek-v2-moe', 'config.json'],
    ['goldens/deepseek-v3-yarn-moe', 'config.json'],
    ['goldens-quant/fp8-deepseek-v3', 'config.json'],
  ];
  it.each(deepseekGoldens)('deepseek2 metadata of %s parses as its config (both MLA layouts)', (folder) => {
    const hf = JSON.parse(readFileSync(join(goldensQuant, '..', folder, 'config.json'), 'utf8')) as Json;
    for (const mlaLayout of [true, false]) {
      const { meta, tensors } = deepseekMetadata(hf, mlaLayout);
      const mine = parseConfig(ggufConfig(meta, tensors));
      const ref = parseConfig(hf);
      expect({ ...mine, dtype: null }).toEqual({ ...ref, dtype: null });
    }
  });

  it('deepseek2: a sigmoid-gated file without the router bias is refused', () => {
    const hf = JSON.parse(readFileSync(join(goldensQuant, 'fp8-deepseek-v3', 'config.json'), 'utf8')) as Json;
    const { meta } = deepseekMetadata(hf, true);
    expect(() => ggufConfig(meta, new Map(), { name: 'ds.gguf' })).toThrow(/ggufConfig: ds.gguf tensor 'blk.1.exp_probs_b.bias': expected the router score correction bias/);
  });
});

/** What convert_hf_to_gguf.py's DeepseekV2Model writes for an HF DeepSeek config (the facts it records). */
function deepseekMetadata(hf: Json, mlaLayout: boolean) {
  const a = 'deepseek2';
  const rp = (hf.rope_parameters ?? {}) as Json;
  const rope = { ...rp, ...((hf.rope_scaling as Json | null) ?? {}) };
  const nope = hf.qk_nope_head_dim as number;
  const ropeDim = hf.qk_rope_head_dim as number;
  const kvLora = hf.kv_lora_rank as number;
  const meta = new Map<string, unknown>([
    ['general.architecture', a],
    [`${a}.block_count`, hf.num_hidden_layers],
    [`${a}.context_length`, hf.max_position_embeddings],
    [`${a}.embedding_length`, hf.hidden_size],
    [`${a}.feed_forward_length`, hf.intermediate_size],
    [`${a}.attention.head_count`, hf.num_attention_heads],
    [`${a}.attention.head_count_kv`, mlaLayout ? 1 : hf.num_attention_heads],
    [`${a}.rope.freq_base`, Math.fround((rope.rope_theta ?? hf.rope_theta) as number)],
    [`${a}.attention.layer_norm_rms_epsilon`, Math.fround(hf.rms_norm_eps as number)],
    [`${a}.leading_dense_block_count`, hf.first_k_dense_replace],
    [`${a}.vocab_size`, hf.vocab_size],
    [`${a}.attention.kv_lora_rank`, kvLora],
    [`${a}.attention.key_length`, mlaLayout ? kvLora + ropeDim : nope + ropeDim],
    [`${a}.attention.value_length`, mlaLayout ? kvLora : hf.v_head_dim],
    [`${a}.expert_feed_forward_length`, hf.moe_intermediate_size],
    [`${a}.expert_count`, hf.n_routed_experts],
    [`${a}.expert_used_count`, hf.num_experts_per_tok],
    [`${a}.expert_shared_count`, hf.n_shared_experts],
    [`${a}.expert_weights_scale`, Math.fround(hf.routed_scaling_factor as number)],
    [`${a}.rope.dimension_count`, ropeDim],
    ['tokenizer.ggml.bos_token_id', hf.bos_token_id],
    ['tokenizer.ggml.eos_token_id', hf.eos_token_id],
  ]);
  if (mlaLayout) {
    meta.set(`${a}.attention.key_length_mla`, nope + ropeDim);
    meta.set(`${a}.attention.value_length_mla`, hf.v_head_dim);
  }
  if (hf.q_lora_rank !== null && hf.q_lora_rank !== undefined) meta.set(`${a}.attention.q_lora_rank`, hf.q_lora_rank);
  if (hf.norm_topk_prob) meta.set(`${a}.expert_weights_norm`, true);
  if (hf.n_group !== null && hf.n_group !== undefined) meta.set(`${a}.expert_group_count`, hf.n_group);
  if (hf.topk_group !== null && hf.topk_group !== undefined) meta.set(`${a}.expert_group_used_count`, hf.topk_group);
  const v3 = hf.model_type === 'deepseek_v3';
  if (v3) meta.set(`${a}.expert_gating_func`, 2);
  if (rope.rope_type === 'yarn' || rope.type === 'yarn') {
    meta.set(`${a}.rope.scaling.type`, 'yarn');
    meta.set(`${a}.rope.scaling.factor`, Math.fround(rope.factor as number));
    meta.set(`${a}.rope.scaling.original_context_length`, rope.original_max_position_embeddings);
    meta.set(`${a}.rope.scaling.yarn_log_multiplier`, Math.fround(0.1 * (rope.mscale_all_dim as number)));
  }
  const tensors = new Map<string, { type: string; shape: number[] }>([['output.weight', { type: 'BF16', shape: [hf.hidden_size as number, hf.vocab_size as number] }]]);
  const moeLayer = hf.first_k_dense_replace as number;
  if (v3) tensors.set(`blk.${moeLayer}.exp_probs_b.bias`, { type: 'F32', shape: [hf.n_routed_experts as number] });
  return { meta, tensors };
}
