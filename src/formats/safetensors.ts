// The safetensors format (8-byte little-endian header length, a JSON header, then the tensors' bytes)
// read lazily from every source a user has: bytes in memory, a Blob/File (browser file pickers), a
// fetch Response, a path (Node, Deno) or a URL (browser). Only the header is parsed up front; tensor
// bytes are handed out one tensor at a time so a model loader can stream them to the GPU and report
// progress without holding the whole checkpoint twice.

import { check, fail, shapeStr } from '../core/errors.js';

/** Bytes per element of every dtype string the safetensors format defines that we accept. */
export const SAFETENSORS_DTYPE_BYTES: Readonly<Record<string, number>> = Object.freeze({
  F64: 8,
  F32: 4,
  F16: 2,
  BF16: 2,
  I64: 8,
  I32: 4,
  I16: 2,
  I8: 1,
  U64: 8,
  U32: 4,
  U16: 2,
  U8: 1,
  BOOL: 1,
  F8_E4M3: 1,
  F8_E5M2: 1,
});

export interface SafetensorsTensorInfo {
  dtype: string;
  shape: number[];
}

export interface SafetensorsFile {
  readonly tensors: ReadonlyMap<string, SafetensorsTensorInfo>;
  readonly metadata: Record<string, string>;
  /** Where it came from (file name, path or URL), for messages. */
  readonly name: string;
  /**
   * One tensor's raw little-endian bytes. In-memory sources give a view into the caller's buffer (no
   * copy; its byteOffset may not be a multiple of the element size, so copy before viewing it as a
   * wider typed array); Blob and path sources read just that range.
   */
  bytes(tensor: string): Promise<Uint8Array>;
  /**
   * Releases the file handle of a path source; a no-op for the others. A path source holds a handle
   * only while it is read: loadSafetensors reads the header and closes it, the first bytes() opens it
   * again, and so does a bytes() after close() (the file must be unchanged, else that read fails).
   * loadModel calls close() once the weights are on the GPU, so the same SafetensorsFile can be loaded
   * again. Idempotent; reads in flight finish first.
   */
  close?(): Promise<void>;
}

/** numel × element size of a tensor described by a header entry. */
export function tensorByteSize(info: SafetensorsTensorInfo): number {
  let n = SAFETENSORS_DTYPE_BYTES[info.dtype] ?? NaN;
  for (const d of info.shape) n *= d;
  return n;
}

// The reference implementation refuses headers above 100 MB; so do we (a corrupt length would
// otherwise ask for gigabytes).
const MAX_HEADER_BYTES = 100_000_000;

interface ParsedHeader {
  tensors: Map<string, SafetensorsTensorInfo>;
  ranges: Map<string, [number, number]>; // absolute byte offsets in the file
  metadata: Record<string, string>;
  dataStart: number;
}

function headerLength(first8: Uint8Array, name: string, fileSize: number): number {
  const op = 'loadSafetensors';
  check(fileSize >= 8, op, name, 'a safetensors file (8-byte header length, JSON header, data)', `${fileSize} bytes`);
  const dv = new DataView(first8.buffer, first8.byteOffset, 8);
  const lo = dv.getUint32(0, true);
  const hi = dv.getUint32(4, true);
  const n = hi * 2 ** 32 + lo;
  check(n >= 2 && n <= MAX_HEADER_BYTES, op, `${name} header length`, `2..${MAX_HEADER_BYTES} bytes (not a safetensors file?)`, n);
  check(8 + n <= fileSize, op, `${name} header length`, `at most ${fileSize - 8} (the file has ${fileSize} bytes)`, n);
  return n;
}

const isNonNegInt = (x: unknown): x is number => typeof x === 'number' && Number.isInteger(x) && x >= 0;

/** Validates a header strictly (the format's own rules) and turns it into absolute byte ranges. */
function parseHeader(json: Uint8Array, name: string, fileSize: number): ParsedHeader {
  const op = 'loadSafetensors';
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(json);
  } catch {
    fail(op, `${name} header`, 'UTF-8 JSON', 'invalid UTF-8');
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    fail(op, `${name} header`, 'valid JSON', (e as Error).message);
  }
  check(typeof raw === 'object' && raw !== null && !Array.isArray(raw), op, `${name} header`, 'a JSON object', raw);
  const dataStart = 8 + json.byteLength;
  const dataLen = fileSize - dataStart;
  const tensors = new Map<string, SafetensorsTensorInfo>();
  const ranges = new Map<string, [number, number]>();
  const metadata: Record<string, string> = {};
  const spans: { name: string; begin: number; end: number }[] = [];
  for (const [key, v] of Object.entries(raw as Record<string, unknown>)) {
    if (key === '__metadata__') {
      check(typeof v === 'object' && v !== null && !Array.isArray(v), op, `${name} __metadata__`, 'an object of strings', v);
      for (const [mk, mv] of Object.entries(v as Record<string, unknown>)) {
        check(typeof mv === 'string', op, `${name} __metadata__.${mk}`, 'a string', mv);
        metadata[mk] = mv as string;
      }
      continue;
    }
    const where = `${name} tensor '${key}'`;
    check(typeof v === 'object' && v !== null && !Array.isArray(v), op, where, 'an object {dtype, shape, data_offsets}', v);
    const e = v as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
    const size = typeof e.dtype === 'string' ? SAFETENSORS_DTYPE_BYTES[e.dtype] : undefined;
    check(size !== undefined, op, `${where} dtype`, `one of ${Object.keys(SAFETENSORS_DTYPE_BYTES).join(' ')}`, e.dtype);
    check(Array.isArray(e.shape) && e.shape.every(isNonNegInt), op, `${where} shape`, 'an array of non-negative integers', e.shape);
    const off = e.data_offsets;
    check(
      Array.isArray(off) && off.length === 2 && isNonNegInt(off[0]) && isNonNegInt(off[1]) && off[0] <= off[1],
      op,
      `${where} data_offsets`,
      '[begin, end] with 0 <= begin <= end',
      off,
    );
    const [begin, end] = off as [number, number];
    check(end <= dataLen, op, `${where} data_offsets`, `inside the data section (${dataLen} bytes)`, off);
    const shape = (e.shape as number[]).slice();
    let numel = 1;
    for (const d of shape) numel *= d;
    check(numel * size === end - begin, op, `${where} data_offsets`, `${numel * size} bytes (${e.dtype} ${shapeStr(shape)})`, `${end - begin} bytes`);
    tensors.set(key, { dtype: e.dtype as string, shape });
    ranges.set(key, [dataStart + begin, dataStart + end]);
    spans.push({ name: key, begin, end });
  }
  // The format leaves no holes and no overlaps: sorted by offset, each tensor starts where the
  // previous one ended and the last one ends with the file.
  spans.sort((a, b) => a.begin - b.begin || a.end - b.end);
  let at = 0;
  for (const s of spans) {
    if (s.begin !== at) {
      const prev = spans[spans.indexOf(s) - 1];
      if (s.begin < at) fail(op, `${name} tensor '${s.name}' data_offsets`, `not to overlap '${prev!.name}' (which ends at ${at})`, `[${s.begin}, ${s.end}]`);
      fail(op, `${name} tensor '${s.name}' data_offsets`, `to begin at ${at} (no gap after ${prev ? `'${prev.name}'` : 'the header'})`, `[${s.begin}, ${s.end}]`);
    }
    at = s.end;
  }
  check(at === dataLen, op, `${name} data section`, `${at} bytes (what the tensors cover)`, `${dataLen} bytes`);
  return { tensors, ranges, metadata, dataStart };
}

class LazySafetensors implements SafetensorsFile {
  constructor(
    readonly name: string,
    private readonly header: ParsedHeader,
    private readonly read: (begin: number, end: number) => Promise<Uint8Array>,
    private readonly release?: () => Promise<void>,
  ) {}

  get tensors(): ReadonlyMap<string, SafetensorsTensorInfo> {
    return this.header.tensors;
  }

  get metadata(): Record<string, string> {
    return this.header.metadata;
  }

  async bytes(tensor: string): Promise<Uint8Array> {
    const r = this.header.ranges.get(tensor);
    if (!r) fail('SafetensorsFile.bytes', 'tensor', `a tensor of ${this.name} (${this.header.tensors.size} tensors)`, `'${tensor}'`);
    return this.read(r[0], r[1]);
  }

  async close(): Promise<void> {
    await this.release?.();
  }
}

function fromMemory(bytes: Uint8Array, name: string): SafetensorsFile {
  const n = headerLength(bytes.subarray(0, 8), name, bytes.byteLength);
  const header = parseHeader(bytes.subarray(8, 8 + n), name, bytes.byteLength);
  return new LazySafetensors(name, header, async (b, e) => bytes.subarray(b, e));
}

async function fromBlob(blob: Blob, name: string): Promise<SafetensorsFile> {
  const first8 = new Uint8Array(await blob.slice(0, Math.min(8, blob.size)).arrayBuffer());
  const n = headerLength(first8, name, blob.size);
  const json = new Uint8Array(await blob.slice(8, 8 + n).arrayBuffer());
  const header = parseHeader(json, name, blob.size);
  return new LazySafetensors(name, header, async (b, e) => new Uint8Array(await blob.slice(b, e).arrayBuffer()));
}

/** The parts of node:fs/promises used here (Node and Deno both provide them). */
interface FileHandleLike {
  read(buffer: Uint8Array, offset: number, length: number, position: number): Promise<{ bytesRead: number }>;
  stat(): Promise<{ size: number; mtimeMs?: number; isDirectory?(): boolean }>;
  close(): Promise<void>;
}
export interface NodeFsLike {
  open(path: string, flags: string): Promise<FileHandleLike>;
  readFile(path: string): Promise<Uint8Array>;
  stat(path: string): Promise<{ size: number; isDirectory?(): boolean }>;
}

/** node:fs/promises, loaded only on the path branch so a browser bundle never asks for it. */
export async function nodeFs(): Promise<NodeFsLike> {
  const specifier = 'node:fs/promises';
  return (await import(/* @vite-ignore */ specifier)) as NodeFsLike;
}

/** A local file read by byte ranges (openLocalFile). */
export interface LocalFile {
  readonly path: string;
  /** Bytes in the file when it was opened. */
  readonly size: number;
  /** Bytes [begin, end); fewer only where the file ends first. */
  read(begin: number, end: number): Promise<Uint8Array>;
  /** Closes the handle once the reads in flight are done (idempotent); the next read opens the file again. */
  close(): Promise<void>;
}

/**
 * A local file for reading, holding its handle from the first read to close() and opening it again
 * at a read after that: a loaded model keeps no file open, and its SafetensorsFile or GGUFFile can
 * still be loaded again. A file that cannot be opened, a directory (said with `directoryNote`), or a
 * file that changed (size or modification time) before it was opened again is op's named error on
 * `src` (expected `what`).
 */
export async function openLocalFile(path: string, op: string, what: string, directoryNote = ''): Promise<LocalFile> {
  const fs = await nodeFs();
  const open = async (): Promise<{ fh: FileHandleLike; size: number; mtimeMs?: number }> => {
    let fh: FileHandleLike;
    try {
      fh = await fs.open(path, 'r');
    } catch (e) {
      // Some systems refuse to open a directory at all; Linux opens it and fails the first read (EISDIR).
      fail(op, 'src', what, `'${path}' (${(e as { code?: string }).code === 'EISDIR' ? `a directory${directoryNote}` : (e as Error).message})`);
    }
    try {
      const st = await fh.stat();
      if (st.isDirectory?.()) fail(op, 'src', what, `'${path}' (a directory${directoryNote})`);
      return { fh, size: st.size, mtimeMs: st.mtimeMs };
    } catch (e) {
      await fh.close().catch(() => {});
      throw e;
    }
  };
  const first = await open();
  const { size, mtimeMs } = first;
  const reopen = async (): Promise<FileHandleLike> => {
    const again = await open();
    if (again.size !== size || (mtimeMs !== undefined && again.mtimeMs !== undefined && again.mtimeMs !== mtimeMs)) {
      await again.fh.close().catch(() => {});
      fail(op, 'src', `${what} unchanged since it was opened (${size} bytes)`, `'${path}', since changed (${again.size} bytes)`);
    }
    return again.fh;
  };
  // The handle in use and its reads in flight: close() ends it when its last read is done.
  interface Use { fh: Promise<FileHandleLike>; reads: number; closing: boolean }
  let use: Use | null = { fh: Promise.resolve(first.fh), reads: 0, closing: false };
  const end = async (u: Use) => {
    await (await u.fh.catch(() => null))?.close();
  };
  return {
    path,
    size,
    async read(b, e) {
      const u = use ??= { fh: reopen(), reads: 0, closing: false };
      u.reads++;
      try {
        let fh: FileHandleLike;
        try {
          fh = await u.fh;
        } catch (err) {
          if (use === u) use = null;   // the next read tries again
          throw err;
        }
        const out = new Uint8Array(Math.max(0, Math.min(e, size) - b));
        let done = 0;
        while (done < out.length) {
          const { bytesRead } = await fh.read(out, done, out.length - done, b + done);
          if (bytesRead === 0) break;   // the file shrank under us; the caller reports the short read
          done += bytesRead;
        }
        return done === out.length ? out : out.subarray(0, done);
      } finally {
        if (--u.reads === 0 && u.closing) await end(u);
      }
    },
    async close() {
      const u = use;
      use = null;
      if (!u || u.closing) return;
      u.closing = true;
      if (u.reads === 0) await end(u);
    },
  };
}

/** True in Node and Deno, where a string names a file; false in a browser, where it is a URL. */
export function hasFileSystem(): boolean {
  const g = globalThis as { Deno?: unknown; process?: { versions?: { node?: string } } };
  return g.Deno !== undefined || typeof g.process?.versions?.node === 'string';
}

/** URLs every runtime fetches; anything else is a path in Node/Deno and a (relative) URL in a browser. */
export function isUrl(s: string): boolean {
  return /^(https?|blob|data):/i.test(s);
}

async function readFully(file: LocalFile, begin: number, end: number): Promise<Uint8Array> {
  const out = await file.read(begin, end);
  if (out.byteLength < end - begin) fail('loadSafetensors', file.path, `${end - begin} bytes at offset ${begin}`, `end of file after ${out.byteLength}`);
  return out;
}

/** A path: the header read now, tensors when asked for; no handle held in between (openLocalFile). */
async function fromPath(path: string): Promise<SafetensorsFile> {
  const file = await openLocalFile(path, 'loadSafetensors', 'a readable safetensors file', ': loadCheckpoint reads a checkpoint folder');
  try {
    const size = file.size;
    const first8 = await readFully(file, 0, Math.min(8, size));
    const n = headerLength(first8, path, size);
    const header = parseHeader(await readFully(file, 8, 8 + n), path, size);
    return new LazySafetensors(path, header, (b, e) => readFully(file, b, e), () => file.close());
  } finally {
    await file.close();
  }
}

async function fromResponse(res: Response, name: string): Promise<SafetensorsFile> {
  check(res.ok, 'loadSafetensors', name, 'a successful response', `HTTP ${res.status} ${res.statusText}`.trim());
  return fromMemory(new Uint8Array(await res.arrayBuffer()), name);
}

/**
 * Opens a safetensors file and parses its header; tensor bytes are read on demand with `bytes()`.
 * A string is a path in Node and Deno (http(s), blob: and data: URLs are fetched everywhere) and a
 * URL in a browser. A Response is read once into memory.
 */
export async function loadSafetensors(src: ArrayBuffer | Uint8Array | Blob | Response | string): Promise<SafetensorsFile> {
  if (typeof src === 'string') {
    if (!isUrl(src) && hasFileSystem()) return fromPath(src);
    let res: Response;
    try {
      res = await fetch(src);
    } catch (e) {
      fail('loadSafetensors', 'src', 'a reachable URL', `'${src}' (${(e as Error).message})`);
    }
    return fromResponse(res, src);
  }
  if (src instanceof Uint8Array) return fromMemory(src, 'bytes');
  if (src instanceof ArrayBuffer) return fromMemory(new Uint8Array(src), 'bytes');
  if (typeof Blob !== 'undefined' && src instanceof Blob) {
    const name = (src as { name?: unknown }).name;
    return fromBlob(src, typeof name === 'string' && name ? name : 'blob');
  }
  if (typeof Response !== 'undefined' && src instanceof Response) return fromResponse(src, src.url || 'response');
  fail('loadSafetensors', 'src', 'an ArrayBuffer, Uint8Array, Blob, Response or string', src);
}

// ---------------------------------------------------------------------------------------------
// Writing

export type EncodableDType = 'F32' | 'F16' | 'BF16' | 'I32';

export interface EncodableTensor {
  dtype: EncodableDType;
  shape: number[];
  /** F32: Float32Array; F16/BF16: Uint16Array bit patterns; I32: Int32Array. */
  data: Float32Array | Uint16Array | Int32Array;
}

const ENCODE_ARRAY: Record<EncodableDType, new (n: number) => EncodableTensor['data']> = { F32: Float32Array, F16: Uint16Array, BF16: Uint16Array, I32: Int32Array };
const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/**
 * Serializes tensors (in the record's order) into one safetensors file. The header is padded with
 * spaces to a multiple of 8 bytes so the data section starts 8-aligned, as the format recommends.
 */
export function encodeSafetensors(tensors: Record<string, EncodableTensor>, metadata?: Record<string, string>): Uint8Array<ArrayBuffer> {
  const op = 'encodeSafetensors';
  const header: Record<string, unknown> = {};
  if (metadata) {
    for (const [k, v] of Object.entries(metadata)) check(typeof v === 'string', op, `metadata.${k}`, 'a string', v);
    header.__metadata__ = metadata;
  }
  let offset = 0;
  const entries = Object.entries(tensors);
  for (const [name, t] of entries) {
    check(name !== '__metadata__' && name.length > 0, op, 'tensor name', 'a non-empty name other than __metadata__', name);
    const Ctor = ENCODE_ARRAY[t.dtype];
    check(Ctor !== undefined, op, `${name}.dtype`, `one of ${Object.keys(ENCODE_ARRAY).join(' ')}`, t.dtype);
    check(Array.isArray(t.shape) && t.shape.every(isNonNegInt), op, `${name}.shape`, 'an array of non-negative integers', t.shape);
    check(t.data instanceof Ctor, op, `${name}.data`, `a ${Ctor.name} for ${t.dtype}`, t.data);
    let numel = 1;
    for (const d of t.shape) numel *= d;
    check(t.data.length === numel, op, `${name}.data`, `${numel} elements (${shapeStr(t.shape)})`, `${t.data.length}`);
    header[name] = { dtype: t.dtype, shape: t.shape, data_offsets: [offset, offset + t.data.byteLength] };
    offset += t.data.byteLength;
  }
  let json = JSON.stringify(header);
  const enc = new TextEncoder();
  let jsonBytes = enc.encode(json);
  const pad = (8 - (jsonBytes.length % 8)) % 8;
  if (pad) jsonBytes = enc.encode(json + ' '.repeat(pad));
  const out = new Uint8Array(8 + jsonBytes.length + offset);
  const dv = new DataView(out.buffer);
  dv.setUint32(0, jsonBytes.length, true);
  dv.setUint32(4, 0, true);
  out.set(jsonBytes, 8);
  let at = 8 + jsonBytes.length;
  for (const [, t] of entries) {
    const src = new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength);
    if (LITTLE_ENDIAN) out.set(src, at);
    else {
      const w = t.data.BYTES_PER_ELEMENT;
      for (let i = 0; i < src.length; i += w) for (let b = 0; b < w; b++) out[at + i + b] = src[i + w - 1 - b]!;
    }
    at += t.data.byteLength;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Sharded checkpoints (model.safetensors.index.json)

/**
 * Opens the shards a `model.safetensors.index.json` names (each once, in file-name order) and checks
 * that every tensor of its weight_map is in the shard it names.
 */
export async function loadShardedSafetensors(
  index: object,
  open: (shardFile: string) => Promise<SafetensorsFile>,
): Promise<SafetensorsFile[]> {
  const op = 'loadShardedSafetensors';
  const map = (index as { weight_map?: unknown }).weight_map;
  check(
    typeof map === 'object' && map !== null && !Array.isArray(map),
    op,
    'index.weight_map',
    'an object mapping tensor names to shard files',
    map,
  );
  const byShard = new Map<string, string[]>();
  for (const [tensor, shard] of Object.entries(map as Record<string, unknown>)) {
    check(typeof shard === 'string' && shard.length > 0, op, `index.weight_map['${tensor}']`, 'a shard file name', shard);
    let list = byShard.get(shard as string);
    if (!list) byShard.set(shard as string, (list = []));
    list.push(tensor);
  }
  check(byShard.size > 0, op, 'index.weight_map', 'at least one tensor', '{}');
  const shards = [...byShard.keys()].sort();
  const files: SafetensorsFile[] = [];
  const problems: string[] = [];
  try {
    for (const shard of shards) {
      const f = await open(shard);
      files.push(f);
      for (const t of byShard.get(shard)!) if (!f.tensors.has(t)) problems.push(`'${t}' is not in ${shard}`);
    }
  } catch (e) {
    await Promise.all(files.map((f) => f.close?.()));
    throw e;
  }
  if (problems.length) {
    await Promise.all(files.map((f) => f.close?.()));
    const shown = problems.slice(0, 10).join('; ');
    fail(op, 'index.weight_map', 'every tensor in the shard it names', problems.length > 10 ? `${shown}; and ${problems.length - 10} more` : shown);
  }
  return files;
}
