// Writes a GGUF with random weights for the device benchmark, streamed to disk: writeGGUFHeader's header,
// then each tensor's bytes as they are made (the gpt-oss-20b file is 12 GiB, Qwen3-30B-A3B's 17: never
// held whole). gpt-oss shapes (bench/gguf_gptoss.ts: MXFP4 experts) and Gemma 3 / Qwen3-MoE shapes
// (bench/gguf_arch_random.ts: Q4_K matrices). Built beside bench.mjs (vite.bench.config.ts) as
// .cache/device/make_gguf.mjs, for the GPU machine (issue42-grid.sh's FILES group gpt-oss-20b:mxfp4).
//
//   node .cache/device/make_gguf.mjs [--shape=20b|tiny|gemma3-4b|qwen3-30b-a3b|gemma3-tiny|qwen3moe-tiny|gemma3-4b-mmproj|gemma3-tiny-mmproj] [--out=DIR] [--seed=N]
// writes DIR/gpt-oss-<shape>-mxfp4.gguf, DIR/<shape>-q4_k.gguf or DIR/<shape>-f16.gguf (an mmproj: Gemma 3's
// vision tower and projector, the pair of <shape>-q4_k.gguf) (default DIR '.'); prints the size and the time taken.
import { closeSync, mkdirSync, openSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { writeGGUFHeader } from '../src/formats/gguf_write';
import { GPTOSS_SHAPES, gptOssMetadata, gptOssTensors, tensorChunks } from './gguf_gptoss';
import { ARCH_SHAPES, archMetadata, archTensors, MMPROJ_SHAPES, mmprojMetadata, mmprojTensors } from './gguf_arch_random';

export interface Written { path: string; bytes: number; tensors: number; seconds: number }

/** Streams the file of shape `shape` (a GPTOSS_SHAPES key) to `dir`; the same bytes as gptOssGGUFBytes. */
export function writeGptOssGGUF(dir: string, shape: string, seed = 0, log: (s: string) => void = () => {}): Written {
  const g = GPTOSS_SHAPES[shape], a = ARCH_SHAPES[shape], mm = shape.endsWith('-mmproj') ? MMPROJ_SHAPES[shape.slice(0, -'-mmproj'.length)] : undefined;
  if (!g && !a && !mm) {
    const all = [...Object.keys(GPTOSS_SHAPES), ...Object.keys(ARCH_SHAPES), ...Object.keys(MMPROJ_SHAPES).map((k) => `${k}-mmproj`)];
    throw new Error(`make_gguf: --shape: expected one of ${all.join(', ')}, got ${shape}`);
  }
  const t0 = performance.now();
  const tensors = g ? gptOssTensors(g) : a ? archTensors(a) : mmprojTensors(mm!);
  const metadata = g ? gptOssMetadata(g, `gpt-oss-${shape} random`) : a ? archMetadata(a, `${shape} random`) : mmprojMetadata(mm!, `${shape} random`);
  const head = writeGGUFHeader({ metadata, tensors: tensors.map(({ name, type, shape: ne }) => ({ name, type, shape: ne })) });
  mkdirSync(dir, { recursive: true });
  const path = join(dir, g ? `gpt-oss-${shape}-mxfp4.gguf` : a ? `${shape}-q4_k.gguf` : `${shape}-f16.gguf`);
  const fd = openSync(path, 'w');
  let at = 0;
  const put = (b: Uint8Array) => {
    let off = 0;
    while (off < b.length) off += writeSync(fd, b, off, b.length - off);
    at += b.length;
  };
  try {
    put(head.header);
    const zeros = new Uint8Array(head.alignment);
    tensors.forEach((t, i) => {
      let n = 0;
      for (const c of tensorChunks(t, seed, i)) { put(c); n += c.length; }
      if (n !== head.sizes[i]) throw new Error(`make_gguf: ${t.name}: made ${n} bytes, expected ${head.sizes[i]}`);
      put(zeros.subarray(0, (head.alignment - (n % head.alignment)) % head.alignment));
      if (i % 40 === 0) log(`  ${i + 1}/${tensors.length} tensors, ${(at / 2 ** 30).toFixed(2)} GiB, ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    });
  } finally {
    closeSync(fd);
  }
  const want = head.header.length + head.dataBytes;
  if (at !== want) throw new Error(`make_gguf: ${path}: wrote ${at} bytes, expected ${want}`);
  return { path, bytes: at, tensors: tensors.length, seconds: (performance.now() - t0) / 1000 };
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const args = new Map(process.argv.slice(2).map((a) => {
    const m = /^--([^=]+)(?:=(.*))?$/.exec(a);
    if (!m) throw new Error(`make_gguf: expected --key=value arguments, got ${a}`);
    return [m[1]!, m[2] ?? ''] as const;
  }));
  for (const k of args.keys()) if (!['shape', 'out', 'seed'].includes(k)) throw new Error(`make_gguf: unknown option --${k} (expected --shape, --out, --seed)`);
  const seed = Number(args.get('seed') ?? 0);
  if (!Number.isInteger(seed)) throw new Error(`make_gguf: --seed: expected an integer, got ${args.get('seed')}`);
  const w = writeGptOssGGUF(args.get('out') || '.', args.get('shape') || '20b', seed, (s) => console.log(s));
  console.log(`wrote ${w.path}: ${w.tensors} tensors, ${(w.bytes / 2 ** 30).toFixed(2)} GiB in ${w.seconds.toFixed(1)} s`);
}
