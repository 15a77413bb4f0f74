import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { randInt, randn } from '../../src/core/random';
import { encodeF16, encodeBf16 } from '../../src/core/dtype';
import {
  encodeSafetensors,
  loadSafetensors,
  loadShardedSafetensors,
  tensorByteSize,
  type SafetensorsFile,
} from '../../src/formats/safetensors';
import { loadCheckpoint } from '../../src/formats/checkpoint';

const goldens = join(dirname(fileURLToPath(import.meta.url)), '../../../shared/goldens');
const GOLDEN_NAMES = ['llama-gqa', 'mistral-window8', 'qwen3-qknorm-tied', 'deepseek-v2-moe', 'deepseek-v3-yarn-moe'];

let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'webinfer-st-'));
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

function bytesOf(a: ArrayBufferView): Uint8Array {
  return new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
}

/** A small mixed-dtype checkpoint with fresh random contents. */
function sample(seed: number) {
  const w = randn(6 * 5, seed);
  const h = encodeF16(randn(7, seed + 1));
  const b = encodeBf16(randn(3 * 2, seed + 2));
  const ids = randInt(5, seed + 3, -1000, 1000);
  return {
    'a.weight': { dtype: 'F32' as const, shape: [6, 5], data: w },
    'b.half': { dtype: 'F16' as const, shape: [7], data: h },
    'c.bf': { dtype: 'BF16' as const, shape: [3, 2], data: b },
    'd.ids': { dtype: 'I32' as const, shape: [5], data: ids },
    'e.scalar': { dtype: 'F32' as const, shape: [], data: randn(1, seed + 4) },
  };
}

/** Hand-made file: an 8-byte length, the given header JSON, then `data` bytes of data. */
function rawFile(header: unknown, dataBytes: number, pad = true): Uint8Array<ArrayBuffer> {
  let json = typeof header === 'string' ? header : JSON.stringify(header);
  if (pad) json += ' '.repeat((8 - (json.length % 8)) % 8);
  const enc = new TextEncoder().encode(json);
  const out = new Uint8Array(8 + enc.length + dataBytes);
  new DataView(out.buffer).setUint32(0, enc.length, true);
  out.set(enc, 8);
  for (let i = 0; i < dataBytes; i++) out[8 + enc.length + i] = (i * 37 + 11) & 0xff;
  return out;
}

async function expectRoundTrip(f: SafetensorsFile, tensors: ReturnType<typeof sample>) {
  expect([...f.tensors.keys()]).toEqual(Object.keys(tensors));
  for (const [name, t] of Object.entries(tensors)) {
    expect(f.tensors.get(name)).toEqual({ dtype: t.dtype, shape: t.shape });
    const got = await f.bytes(name);
    expect(got.byteLength).toBe(tensorByteSize(f.tensors.get(name)!));
    expect(Array.from(got)).toEqual(Array.from(bytesOf(t.data)));
  }
}

describe('safetensors: encode and load', () => {
  it('round-trips every dtype through bytes, ArrayBuffer, Blob, Response and a path', async () => {
    const tensors = sample(11);
    const file = encodeSafetensors(tensors, { format: 'pt', note: 'webinfer' });
    const headerLen = new DataView(file.buffer).getUint32(0, true);
    expect(headerLen % 8).toBe(0);
    expect(new DataView(file.buffer).getUint32(4, true)).toBe(0);
    const path = join(tmp, 'rt.safetensors');
    await writeFile(path, file);
    const sources: [string, SafetensorsFile][] = [
      ['Uint8Array', await loadSafetensors(file)],
      ['ArrayBuffer', await loadSafetensors(file.slice().buffer)],
      ['Blob', await loadSafetensors(new Blob([file]))],
      ['Response', await loadSafetensors(new Response(file))],
      ['path', await loadSafetensors(path)],
    ];
    for (const [what, f] of sources) {
      expect(f.metadata, what).toEqual({ format: 'pt', note: 'webinfer' });
      await expectRoundTrip(f, tensors);
      await f.close?.();
    }
    expect(sources[4]![1].name).toBe(path);
  });

  it('hands out views of an in-memory source (no copy) and copies only the range from a Blob', async () => {
    const tensors = sample(12);
    const file = encodeSafetensors(tensors);
    const f = await loadSafetensors(file);
    const v = await f.bytes('c.bf');
    expect(v.buffer).toBe(file.buffer);
    const fb = await loadSafetensors(new Blob([file]));
    const vb = await fb.bytes('c.bf');
    expect(vb.buffer.byteLength).toBe(12);
  });

  it('names the tensor when bytes() is asked for an unknown one; reads again after close, the file unchanged', async () => {
    const f = await loadSafetensors(encodeSafetensors(sample(13)));
    await expect(f.bytes('nope.weight')).rejects.toThrow(/SafetensorsFile\.bytes: tensor: expected a tensor of bytes \(5 tensors\), got 'nope\.weight'/);
    const path = join(tmp, 'closed.safetensors');
    const bytes = encodeSafetensors(sample(14));
    await writeFile(path, bytes);
    const p = await loadSafetensors(path);
    const first = await p.bytes('a.weight');
    await p.close!();
    expect(await p.bytes('a.weight')).toEqual(first);
    await p.close!();
    await writeFile(path, bytes.subarray(0, bytes.length - 4));
    await expect(p.bytes('a.weight')).rejects.toThrow(/loadSafetensors: src: expected a readable safetensors file unchanged since it was opened .*, got '.*closed\.safetensors', since changed/);
  });

  it('reads every golden checkpoint from its path, and its bytes match an independent parse', async () => {
    for (const g of GOLDEN_NAMES) {
      const path = join(goldens, g, 'model.safetensors');
      const raw = new Uint8Array(await readFile(path));
      const n = new DataView(raw.buffer, raw.byteOffset).getUint32(0, true);
      const header = JSON.parse(new TextDecoder().decode(raw.subarray(8, 8 + n))) as Record<string, { dtype: string; shape: number[]; data_offsets: [number, number] }>;
      const f = await loadSafetensors(path);
      const names = Object.keys(header).filter((k) => k !== '__metadata__');
      expect(new Set(f.tensors.keys()), g).toEqual(new Set(names));
      expect(f.metadata).toEqual({ format: 'pt' });
      for (const name of [names[0]!, names[names.length - 1]!, 'model.norm.weight']) {
        const [b, e] = header[name]!.data_offsets;
        expect(Array.from(await f.bytes(name)), `${g} ${name}`).toEqual(Array.from(raw.subarray(8 + n + b, 8 + n + e)));
      }
      const norm = new Float32Array((await f.bytes('model.norm.weight')).slice().buffer);
      expect(norm.every(Number.isFinite)).toBe(true);
      await f.close!();
    }
  });

  it('checks what it encodes', () => {
    expect(() => encodeSafetensors({ x: { dtype: 'F32', shape: [2, 3], data: new Float32Array(5) } })).toThrow(
      /encodeSafetensors: x\.data: expected 6 elements \(\[2, 3\]\), got 5/,
    );
    expect(() => encodeSafetensors({ x: { dtype: 'F16', shape: [2], data: new Float32Array(2) } })).toThrow(/x\.data: expected a Uint16Array for F16/);
    expect(() => encodeSafetensors({ x: { dtype: 'F64' as 'F32', shape: [1], data: new Float32Array(1) } })).toThrow(/x\.dtype: expected one of F32 F16 BF16 I32/);
  });
});

describe('safetensors: strict header validation', () => {
  const ok = { a: { dtype: 'F32', shape: [2], data_offsets: [0, 8] }, b: { dtype: 'F16', shape: [2, 2], data_offsets: [8, 16] } };

  it('accepts a hand-made header in any key order (ranges sorted), with trailing-space padding', async () => {
    const f = await loadSafetensors(rawFile({ b: ok.b, a: ok.a }, 16));
    expect((await f.bytes('b')).byteLength).toBe(8);
    expect((await f.bytes('a'))[0]).toBe(11);
  });

  const cases: [string, Uint8Array<ArrayBuffer>, RegExp][] = [
    ['too small', new Uint8Array(5), /bytes: expected a safetensors file .*got 5 bytes/],
    ['header longer than the file', (() => {
      const b = rawFile(ok, 16);
      new DataView(b.buffer).setUint32(0, 10_000, true);
      return b;
    })(), /bytes header length: expected at most .*got 10000/],
    ['header length beyond 100 MB', (() => {
      const b = rawFile(ok, 16);
      new DataView(b.buffer).setUint32(4, 1, true);
      return b;
    })(), /bytes header length: expected 2\.\.100000000 bytes/],
    ['not JSON', rawFile('{"a": ', 0), /bytes header: expected valid JSON/],
    ['a JSON array', rawFile('[1,2]', 0), /bytes header: expected a JSON object/],
    ['unknown dtype', rawFile({ a: { dtype: 'F12', shape: [2], data_offsets: [0, 8] } }, 8), /tensor 'a' dtype: expected one of F64 F32 F16 BF16 .*got F12/],
    ['negative shape', rawFile({ a: { dtype: 'F32', shape: [-2], data_offsets: [0, 8] } }, 8), /tensor 'a' shape: expected an array of non-negative integers/],
    ['offsets past the data', rawFile({ a: { dtype: 'F32', shape: [4], data_offsets: [0, 16] } }, 8), /tensor 'a' data_offsets: expected inside the data section \(8 bytes\), got \[0, 16\]/],
    ['size not shape×dtype', rawFile({ a: { dtype: 'F32', shape: [3], data_offsets: [0, 8] } }, 8), /tensor 'a' data_offsets: expected 12 bytes \(F32 \[3\]\), got 8 bytes/],
    ['reversed offsets', rawFile({ a: { dtype: 'F32', shape: [0], data_offsets: [8, 0] } }, 8), /tensor 'a' data_offsets: expected \[begin, end\]/],
    ['a gap', rawFile({ a: { dtype: 'F32', shape: [1], data_offsets: [0, 4] }, b: { dtype: 'F32', shape: [1], data_offsets: [8, 12] } }, 12), /tensor 'b' data_offsets: expected to begin at 4 \(no gap after 'a'\), got \[8, 12\]/],
    ['an overlap', rawFile({ a: { dtype: 'F32', shape: [2], data_offsets: [0, 8] }, b: { dtype: 'F32', shape: [1], data_offsets: [4, 8] } }, 8), /tensor 'b' data_offsets: expected not to overlap 'a' \(which ends at 8\)/],
    ['trailing bytes', rawFile(ok, 20), /bytes data section: expected 16 bytes \(what the tensors cover\), got 20 bytes/],
    ['a data start gap', rawFile({ a: { dtype: 'F32', shape: [1], data_offsets: [4, 8] } }, 8), /tensor 'a' data_offsets: expected to begin at 0 \(no gap after the header\)/],
    ['non-string metadata', rawFile({ __metadata__: { n: 3 }, ...ok }, 16), /__metadata__\.n: expected a string, got 3/],
  ];
  for (const [what, bytes, re] of cases) {
    it(`rejects ${what}`, async () => {
      await expect(loadSafetensors(bytes)).rejects.toThrow(/^loadSafetensors: /);
      await expect(loadSafetensors(bytes)).rejects.toThrow(re);
    });
  }

  it('names the file: a Blob by its name, a path by its path', async () => {
    const bad = rawFile({ a: { dtype: 'F32', shape: [3], data_offsets: [0, 8] } }, 8);
    await expect(loadSafetensors(new File([bad], 'shard-7.safetensors'))).rejects.toThrow(/loadSafetensors: shard-7\.safetensors tensor 'a'/);
    const path = join(tmp, 'bad.safetensors');
    await writeFile(path, bad);
    await expect(loadSafetensors(path)).rejects.toThrow(new RegExp(`loadSafetensors: ${path.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} tensor 'a'`));
    await expect(loadSafetensors(join(tmp, 'absent.safetensors'))).rejects.toThrow(/loadSafetensors: src: expected a readable safetensors file, got .*absent\.safetensors/);
    await expect(loadSafetensors(new Response('nope', { status: 404 }))).rejects.toThrow(/expected a successful response, got HTTP 404/);
    await expect(loadSafetensors(42 as unknown as string)).rejects.toThrow(/loadSafetensors: src: expected an ArrayBuffer, Uint8Array, Blob, Response or string, got 42/);
  });
});

describe('safetensors: sharded checkpoints', () => {
  const shardA = () => encodeSafetensors({ 'x.weight': { dtype: 'F32', shape: [2], data: randn(2, 21) }, 'y.weight': { dtype: 'F32', shape: [3], data: randn(3, 22) } });
  const shardB = () => encodeSafetensors({ 'z.weight': { dtype: 'F32', shape: [4], data: randn(4, 23) } });

  it('opens each shard once, in file-name order', async () => {
    const shards: Record<string, Uint8Array> = { 'model-00002-of-00002.safetensors': shardB(), 'model-00001-of-00002.safetensors': shardA() };
    const opened: string[] = [];
    const index = {
      metadata: { total_size: 36 },
      weight_map: { 'z.weight': 'model-00002-of-00002.safetensors', 'x.weight': 'model-00001-of-00002.safetensors', 'y.weight': 'model-00001-of-00002.safetensors' },
    };
    const files = await loadShardedSafetensors(index, async (s) => {
      opened.push(s);
      return loadSafetensors(shards[s]!);
    });
    expect(opened).toEqual(['model-00001-of-00002.safetensors', 'model-00002-of-00002.safetensors']);
    expect([...files[0]!.tensors.keys()]).toEqual(['x.weight', 'y.weight']);
    expect([...files[1]!.tensors.keys()]).toEqual(['z.weight']);
  });

  it('names every tensor missing from the shard the index names', async () => {
    const index = { weight_map: { 'x.weight': 's1', 'z.weight': 's1', 'q.weight': 's2' } };
    const shards: Record<string, Uint8Array> = { s1: shardA(), s2: shardB() };
    await expect(loadShardedSafetensors(index, async (s) => loadSafetensors(shards[s]!))).rejects.toThrow(
      /loadShardedSafetensors: index\.weight_map: expected every tensor in the shard it names, got 'z\.weight' is not in s1; 'q\.weight' is not in s2/,
    );
    await expect(loadShardedSafetensors({ weight_map: [] }, async () => loadSafetensors(shardA()))).rejects.toThrow(/index\.weight_map: expected an object/);
    await expect(loadShardedSafetensors({}, async () => loadSafetensors(shardA()))).rejects.toThrow(/index\.weight_map: expected an object/);
  });
});

describe('loadCheckpoint', () => {
  it('reads a golden folder from its directory: config, weights, generation config', async () => {
    const ck = await loadCheckpoint(join(goldens, 'llama-gqa'));
    expect(ck.name).toBe('llama-gqa');
    expect((ck.config as { architectures: string[] }).architectures).toEqual(['LlamaForCausalLM']);
    expect((ck.weights as SafetensorsFile[])).toHaveLength(1);
    expect((ck.weights as SafetensorsFile[])[0]!.tensors.has('model.layers.1.mlp.down_proj.weight')).toBe(true);
    expect(ck.generationConfig).toBeTypeOf('object');
    expect(ck.tokenizer).toBeUndefined();
    await (ck.weights as SafetensorsFile[])[0]!.close!();
  });

  it('reads a folder picker FileList-like File[] (webkitRelativePath) and a name → Blob map', async () => {
    const dir = join(goldens, 'qwen3-qknorm-tied');
    const names = (await readdir(dir)).filter((n) => n !== 'golden.json');
    const files = await Promise.all(
      names.map(async (n) => {
        const f = new File([await readFile(join(dir, n))], n);
        Object.defineProperty(f, 'webkitRelativePath', { value: `qwen3-qknorm-tied/${n}` });
        return f;
      }),
    );
    // A stray config.json deeper down must not move the folder.
    const stray = new File(['{}'], 'config.json');
    Object.defineProperty(stray, 'webkitRelativePath', { value: 'qwen3-qknorm-tied/sub/config.json' });
    const ck = await loadCheckpoint([stray, ...files]);
    expect(ck.name).toBe('qwen3-qknorm-tied');
    expect((ck.config as { architectures: string[] }).architectures).toEqual(['Qwen3ForCausalLM']);
    expect((ck.weights as SafetensorsFile[])[0]!.tensors.size).toBe(24);
    const map = Object.fromEntries(files.map((f) => [f.name, f as Blob]));
    const ck2 = await loadCheckpoint(map);
    expect((ck2.weights as SafetensorsFile[])[0]!.tensors.size).toBe(24);
    expect(ck2.generationConfig).toEqual(ck.generationConfig);
  });

  it('reads a sharded folder with tokenizer files, from a directory and from a base URL', async () => {
    const dir = join(tmp, 'sharded-model');
    await rm(dir, { recursive: true, force: true });
    await mkdir(dir);
    const a = encodeSafetensors({ 'x.weight': { dtype: 'F32', shape: [2], data: randn(2, 31) } });
    const b = encodeSafetensors({ 'y.weight': { dtype: 'BF16', shape: [2], data: encodeBf16(randn(2, 32)) } });
    const files: Record<string, Uint8Array<ArrayBuffer> | string> = {
      'config.json': JSON.stringify({ architectures: ['LlamaForCausalLM'] }),
      'model.safetensors.index.json': JSON.stringify({ weight_map: { 'x.weight': 'model-00001-of-00002.safetensors', 'y.weight': 'model-00002-of-00002.safetensors' } }),
      'model-00001-of-00002.safetensors': a,
      'model-00002-of-00002.safetensors': b,
      'tokenizer.json': JSON.stringify({ model: { type: 'BPE' } }),
      'tokenizer_config.json': JSON.stringify({ bos_token: '<s>' }),
    };
    for (const [n, v] of Object.entries(files)) await writeFile(join(dir, n), v);
    const ck = await loadCheckpoint(dir + '/');
    expect(ck.name).toBe('sharded-model');
    expect((ck.weights as SafetensorsFile[]).map((w) => [...w.tensors.keys()])).toEqual([['x.weight'], ['y.weight']]);
    expect(ck.tokenizer).toEqual({ model: { type: 'BPE' } });
    expect(ck.tokenizerConfig).toEqual({ bos_token: '<s>' });
    expect(ck.generationConfig).toBeUndefined();
    for (const w of (ck.weights as SafetensorsFile[])) await w.close!();

    const requested: string[] = [];
    const fetchStub = vi.fn(async (url: string) => {
      requested.push(url);
      const name = url.slice('https://models.test/org/sharded-model/'.length);
      const body = files[name];
      return body === undefined ? new Response('not found', { status: 404 }) : new Response(body);
    });
    vi.stubGlobal('fetch', fetchStub);
    try {
      const web = await loadCheckpoint('https://models.test/org/sharded-model');
      expect(web.name).toBe('sharded-model');
      expect(Array.from(await (web.weights as SafetensorsFile[])[1]!.bytes('y.weight'))).toEqual(Array.from(b.subarray(b.length - 4)));
      expect(requested[1]).toBe('https://models.test/org/sharded-model/model.safetensors');
      expect(requested).toContain('https://models.test/org/sharded-model/model-00002-of-00002.safetensors');
    } finally {
      vi.unstubAllGlobals();
    }
  });

  it('says what was looked for and where when files are missing', async () => {
    const empty = join(tmp, 'empty-model');
    await mkdir(empty, { recursive: true });
    await expect(loadCheckpoint(empty)).rejects.toThrow(`loadCheckpoint: config.json: expected a file named config.json in directory '${empty}', got none`);
    await writeFile(join(empty, 'config.json'), '{"architectures": ["LlamaForCausalLM"]}');
    await expect(loadCheckpoint(empty)).rejects.toThrow(`loadCheckpoint: weights: expected model.safetensors or model.safetensors.index.json in directory '${empty}', got neither`);
    await writeFile(join(empty, 'model.safetensors.index.json'), '{"weight_map": {"x": "model-00001.safetensors"}}');
    await expect(loadCheckpoint(empty)).rejects.toThrow(/loadCheckpoint: model-00001\.safetensors: expected the shard model\.safetensors\.index\.json names, in directory '.*empty-model', got none/);
    await writeFile(join(empty, 'config.json'), '{"architectures": ');
    await expect(loadCheckpoint(empty)).rejects.toThrow(/loadCheckpoint: config\.json in directory '.*empty-model': expected valid JSON/);
    const blobs = { 'config.json': new Blob(['{}']), 'notes.txt': new Blob(['x']) };
    await expect(loadCheckpoint(blobs)).rejects.toThrow(/weights: expected model\.safetensors or model\.safetensors\.index\.json in the given blobs \(2\), got neither \(found: config\.json, notes\.txt\)/);
  });
});
