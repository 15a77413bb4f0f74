// GGUF, llama.cpp's single-file model format (v2 and v3, little-endian): a header of typed key/value
// metadata (general.*, <arch>.*, tokenizer.*), a tensor index (name, ggml dims, ggml type, offset),
// then the tensor data, each tensor aligned to `general.alignment` (32 by default) from the start of
// the data section. Only the header and index are read up front, in growing chunks, so a multi-GB
// file on disk, behind a URL or in a Blob costs a few MB to open; tensor bytes are read one tensor
// at a time on demand, like the safetensors reader (safetensors.ts) does.
//
// Sources: bytes in memory, a Blob/File, a fetch Response (read as a stream: header first, then
// tensors in file order only), a path (Node, Deno), a URL (range requests), or an array of those
// for a split model (`*-00001-of-0000N.gguf` parts, gguf-split's `split.*` keys).

import { check, fail, fmt, shapeStr } from '../core/errors.js';
import { ggmlTypeName, isQuantType, QUANT_FORMATS } from '../core/quant.js';
import { ggufConfig } from './gguf_config.js';
import { ggufTokenizer } from './gguf_tokenizer.js';
import { hasFileSystem, isUrl, openLocalFile } from './safetensors.js';

const OP = 'loadGGUF';

export interface GGUFTensorInfo {
  /** ggml type name ('Q4_K', 'F32' ...; `type <id>` for an id quant.ts does not know). */
  readonly type: string;
  /**
   * ggml's ne order, the fastest-varying dimension first (as @huggingface/gguf and gguf-py report
   * it): an HF [out, in] matrix is [in, out] here.
   */
  readonly shape: number[];
  readonly typeId: number;
  /** Absolute byte offset in its file. */
  readonly offset: number;
  /**
   * Bytes of the tensor. For a type whose block size is unknown (see ggmlTypeSize) it is the span to
   * the next tensor or the end of the file, so it may include alignment padding.
   */
  readonly byteLength: number;
  /** Index of the split part that holds it (0 for a single file). */
  readonly file: number;
}

export interface GGUFFile {
  /** Every key/value of the header (of part 1 for a split model), in file order. */
  readonly metadata: ReadonlyMap<string, unknown>;
  /** Every tensor (the union of the parts), iterated in file order (part, then offset). */
  readonly tensors: ReadonlyMap<string, GGUFTensorInfo>;
  /** The equivalent HF config.json (see gguf_config.ts); an mmproj file's (architecture clip) is
   *  { mmproj: its projector type }, the model being the pair's (loadModel o.mmproj). */
  readonly config: object;
  /** The equivalent tokenizer.json, for @huggingface/tokenizers (see gguf_tokenizer.ts). */
  readonly tokenizer?: object;
  /** The equivalent tokenizer_config.json: { chat_template, bos_token, eos_token, add_bos_token ... }. */
  readonly tokenizerConfig?: object;
  /** Where it came from (file name, path or URL of part 1), for messages. */
  readonly name: string;
  /**
   * One tensor's raw bytes (exactly byteLength). In-memory sources give a view into the caller's
   * buffer (no copy; its byteOffset need not be aligned). A Response source is a stream: tensors of
   * one part can only be read in file order (the `tensors` map's order), each once.
   */
  tensorBytes(name: string): Promise<Uint8Array>;
  tensorInfo(name: string): GGUFTensorInfo;
  /**
   * Releases file handles and streams. A path's file is held open only while it is read (loadGGUF
   * closes it after the header; tensorBytes opens it again), so a GGUFFile closed here can still be
   * read, and loaded again; a Response's stream is cancelled and cannot. Idempotent. loadModel calls
   * it once the weights are on the GPU.
   */
  close?(): Promise<void>;
}

export type GGUFSource = ArrayBuffer | Uint8Array | Blob | Response | string;

// ---------------------------------------------------------------------------------------------
// ggml types

/**
 * Block geometry of the ggml types outside QUANT_FORMATS (gguf-py's GGML_QUANT_SIZES): unquantized
 * types are blocks of one element; the others are quantized types the engine does not compute with,
 * sized here so that a file holding them can still be opened and listed.
 */
const OTHER_TYPE_SIZES: Readonly<Record<string, readonly [number, number]>> = {
  F32: [1, 4], F16: [1, 2], BF16: [1, 2], F64: [1, 8], I8: [1, 1], I16: [1, 2], I32: [1, 4], I64: [1, 8],
  Q8_1: [32, 36], Q8_K: [256, 292], IQ2_XXS: [256, 66], IQ2_XS: [256, 74], IQ3_XXS: [256, 98], IQ1_S: [256, 50],
  IQ3_S: [256, 110], IQ2_S: [256, 82], IQ1_M: [256, 56], TQ1_0: [256, 54], TQ2_0: [256, 66], NVFP4: [64, 36],
};

/** Elements per block and bytes per block of ggml type `typeId`, or null for an id not known here. */
export function ggmlTypeSize(typeId: number): { blockElems: number; blockBytes: number } | null {
  const name = ggmlTypeName(typeId);
  if (isQuantType(name)) return { blockElems: QUANT_FORMATS[name].blockElems, blockBytes: QUANT_FORMATS[name].blockBytes };
  const s = OTHER_TYPE_SIZES[name];
  return s ? { blockElems: s[0], blockBytes: s[1] } : null;
}

// ---------------------------------------------------------------------------------------------
// Byte sources

/** Random or sequential access to one file's bytes. */
interface ByteSource {
  readonly name: string;
  /** Bytes in the file, or null when not known up front (a stream without Content-Length). */
  readonly size: number | null;
  /** A stream: bytes before the end of the last read are gone. */
  readonly sequential?: boolean;
  /** Bytes [begin, end); fewer only where the file ends first. */
  read(begin: number, end: number): Promise<Uint8Array>;
  close(): Promise<void>;
  /** Lets a handle go that the next read opens again (a path's; loadGGUF's end). */
  release?(): Promise<void>;
}

function memorySource(bytes: Uint8Array, name: string): ByteSource {
  return {
    name,
    size: bytes.byteLength,
    read: async (b, e) => bytes.subarray(Math.min(b, bytes.byteLength), Math.min(e, bytes.byteLength)),
    close: async () => {},
  };
}

function blobSource(blob: Blob, name: string): ByteSource {
  return {
    name,
    size: blob.size,
    read: async (b, e) => new Uint8Array(await blob.slice(b, Math.min(e, blob.size)).arrayBuffer()),
    close: async () => {},
  };
}

/** A path: its handle held only while it is read (openLocalFile). */
async function pathSource(path: string): Promise<ByteSource> {
  const file = await openLocalFile(path, OP, 'a readable GGUF file');
  return { name: path, size: file.size, read: (b, e) => file.read(b, e), close: () => file.close(), release: () => file.close() };
}

/** The file size a response announces (null when it does not, or when the body is re-encoded). */
function announcedSize(res: Response): number | null {
  if (res.headers.get('content-encoding')) return null;
  const n = Number(res.headers.get('content-length') ?? NaN);
  return Number.isSafeInteger(n) && n >= 0 ? n : null;
}

/**
 * A Response body read once, front to back. Reads must come in increasing offsets: bytes before the
 * end of the last read are gone. Only what a read still needs is buffered.
 */
function streamSource(res: Response, name: string): ByteSource {
  check(!res.bodyUsed, OP, name, 'a Response whose body has not been read', 'a used body');
  const reader = res.body?.getReader() ?? null;
  const size = announcedSize(res);
  let chunks: Uint8Array[] = [];
  let start = 0; // file offset of chunks[0][0]
  let buffered = 0;
  let ended = reader === null;
  return {
    name,
    size,
    sequential: true,
    async read(b, e) {
      if (b < start) {
        fail(
          'GGUFFile.tensorBytes',
          name,
          `reads in file order, each tensor once (a Response is read as a stream; pass a Blob, path or URL for random access)`,
          `a read at byte ${b} after byte ${start} was passed`,
        );
      }
      while (start + buffered < e && !ended) {
        const { done, value } = await reader!.read();
        if (done) ended = true;
        else if (value.byteLength) {
          chunks.push(value);
          buffered += value.byteLength;
        }
      }
      const end = Math.min(e, start + buffered);
      const out = new Uint8Array(Math.max(0, end - b));
      let at = start;
      for (const c of chunks) {
        const lo = Math.max(b, at);
        const hi = Math.min(end, at + c.byteLength);
        if (lo < hi) out.set(c.subarray(lo - at, hi - at), lo - b);
        at += c.byteLength;
      }
      // Drop what is consumed: everything before `end`.
      const keep: Uint8Array[] = [];
      at = start;
      for (const c of chunks) {
        if (at + c.byteLength > end) keep.push(at >= end ? c : c.subarray(end - at));
        at += c.byteLength;
      }
      chunks = keep;
      buffered -= Math.max(0, end - start);
      start = Math.max(start, end);
      return out;
    },
    async close() {
      if (!ended) await reader?.cancel().catch(() => {});
      ended = true;
      chunks = [];
    },
  };
}

async function get(url: string, init?: RequestInit): Promise<Response> {
  try {
    return await fetch(url, init);
  } catch (e) {
    fail(OP, 'src', 'a reachable URL', `'${url}' (${(e as Error).message})`);
  }
}

/**
 * A URL read with Range requests. When the server ignores Range (200 with the whole file), the body
 * is buffered in memory instead.
 */
async function urlSource(url: string): Promise<ByteSource> {
  const first = 1 << 20;
  const res = await get(url, { headers: { Range: `bytes=0-${first - 1}` } });
  if (res.status === 416) return memorySource(new Uint8Array(0), url); // an empty file
  check(res.ok, OP, url, 'a successful response', `HTTP ${res.status} ${res.statusText}`.trim());
  if (res.status !== 206) return memorySource(new Uint8Array(await res.arrayBuffer()), url);
  const range = /\/(\d+)\s*$/.exec(res.headers.get('content-range') ?? '');
  const head = new Uint8Array(await res.arrayBuffer());
  // Without a total in Content-Range the size is only known once a read comes back short.
  let size: number | null = range ? Number(range[1]) : null;
  return {
    name: url,
    get size() {
      return size;
    },
    async read(b, e) {
      if (size !== null) e = Math.min(e, size);
      if (e <= b) return new Uint8Array(0);
      if (e <= head.byteLength) return head.subarray(b, e);
      const r = await get(url, { headers: { Range: `bytes=${b}-${e - 1}` } });
      if (r.status === 416) return new Uint8Array(0);
      check(r.status === 206, OP, url, `a 206 answer to a range request for bytes ${b}-${e - 1}`, `HTTP ${r.status} ${r.statusText}`.trim());
      const out = new Uint8Array(await r.arrayBuffer());
      if (out.byteLength < e - b && size === null) size = b + out.byteLength;
      return out;
    },
    close: async () => {},
  };
}

function sourceName(src: Blob): string {
  const name = (src as { name?: unknown }).name;
  return typeof name === 'string' && name ? name : 'blob';
}

async function openSource(src: GGUFSource): Promise<ByteSource> {
  if (typeof src === 'string') {
    if (!isUrl(src) && hasFileSystem()) return pathSource(src);
    return urlSource(src);
  }
  if (src instanceof Uint8Array) return memorySource(src, 'bytes');
  if (src instanceof ArrayBuffer) return memorySource(new Uint8Array(src), 'bytes');
  if (typeof Blob !== 'undefined' && src instanceof Blob) return blobSource(src, sourceName(src));
  if (typeof Response !== 'undefined' && src instanceof Response) {
    const name = src.url || 'response';
    check(src.ok, OP, name, 'a successful response', `HTTP ${src.status} ${src.statusText}`.trim());
    return streamSource(src, name);
  }
  fail(OP, 'src', 'an ArrayBuffer, Uint8Array, Blob, Response, string, or an array of Blobs/strings (split parts)', src);
}

// ---------------------------------------------------------------------------------------------
// Header parsing

/** Thrown by the parser when the buffer ends before `end`; the loader reads more and resumes. */
class NeedMore {
  constructor(
    readonly end: number,
    readonly what: string,
  ) {}
}

const enum ValueType {
  U8 = 0, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64,
}
const VALUE_TYPE_NAMES = ['uint8', 'int8', 'uint16', 'int16', 'uint32', 'int32', 'float32', 'bool', 'string', 'array', 'uint64', 'int64', 'float64'];
const SCALAR_BYTES = [1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8];
const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);
const MIN_SAFE = BigInt(Number.MIN_SAFE_INTEGER);
/** ggml tensors have at most 4 dimensions (GGML_MAX_DIMS). */
const MAX_DIMS = 4;

interface RawTensor {
  name: string;
  shape: number[];
  typeId: number;
  /** Relative to the data section. */
  offset: number;
}

/** What has been parsed so far; parsing resumes from `pos` (always the start of a whole item). */
interface HeaderState {
  pos: number;
  version: number;
  nTensors: number;
  nKv: number;
  metadata: Map<string, unknown>;
  tensors: RawTensor[];
  started: boolean;
}

const utf8 = new TextDecoder('utf-8');

/** Reads little-endian values at `pos`, throwing NeedMore past the end of what has been loaded. */
class Reader {
  private readonly dv: DataView;
  constructor(
    private readonly buf: Uint8Array,
    public pos: number,
    private readonly where: () => string,
  ) {
    this.dv = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  }

  need(n: number, what: string): void {
    if (this.pos + n > this.buf.byteLength) throw new NeedMore(this.pos + n, what);
  }

  u32(what: string): number {
    this.need(4, what);
    const v = this.dv.getUint32(this.pos, true);
    this.pos += 4;
    return v;
  }

  /** A u64 count, size or offset: must be a safe integer. */
  size(what: string): number {
    this.need(8, what);
    const v = this.dv.getBigUint64(this.pos, true);
    check(v <= MAX_SAFE, OP, this.where(), `${what} below 2^53`, v.toString());
    this.pos += 8;
    return Number(v);
  }

  string(what: string): string {
    const n = this.size(`${what} length`);
    this.need(n, what);
    const bytes = this.buf.subarray(this.pos, this.pos + n);
    this.pos += n;
    // Most keys and tokens are ASCII; fromCharCode skips the decoder's per-call cost for them.
    if (n <= 64) {
      let ascii = true;
      for (let i = 0; i < n; i++) if (bytes[i]! >= 0x80) { ascii = false; break; }
      if (ascii) return String.fromCharCode.apply(null, bytes as unknown as number[]);
    }
    return utf8.decode(bytes);
  }

  scalar(type: ValueType, what: string): unknown {
    const n = SCALAR_BYTES[type]!;
    this.need(n, what);
    const p = this.pos;
    this.pos += n;
    const dv = this.dv;
    switch (type) {
      case ValueType.U8: return dv.getUint8(p);
      case ValueType.I8: return dv.getInt8(p);
      case ValueType.U16: return dv.getUint16(p, true);
      case ValueType.I16: return dv.getInt16(p, true);
      case ValueType.U32: return dv.getUint32(p, true);
      case ValueType.I32: return dv.getInt32(p, true);
      case ValueType.F32: return dv.getFloat32(p, true);
      case ValueType.F64: return dv.getFloat64(p, true);
      case ValueType.BOOL: {
        const b = dv.getUint8(p);
        check(b <= 1, OP, this.where(), `${what}: a bool (0 or 1)`, b);
        return b === 1;
      }
      case ValueType.U64: {
        const v = dv.getBigUint64(p, true);
        return v <= MAX_SAFE ? Number(v) : v;
      }
      case ValueType.I64: {
        const v = dv.getBigInt64(p, true);
        return v <= MAX_SAFE && v >= MIN_SAFE ? Number(v) : v;
      }
    }
    fail(OP, this.where(), `${what}: a scalar value type`, type);
  }

  valueType(what: string): ValueType {
    const t = this.u32(what);
    check(t <= ValueType.F64, OP, this.where(), `${what}: a GGUF value type 0..12 (${VALUE_TYPE_NAMES.join(', ')})`, t);
    return t as ValueType;
  }

  value(type: ValueType, what: string, depth = 0): unknown {
    if (type === ValueType.STRING) return this.string(what);
    if (type !== ValueType.ARRAY) return this.scalar(type, what);
    check(depth < 8, OP, this.where(), `${what}: arrays nested at most 8 deep`, depth);
    const elemType = this.valueType(`${what} element type`);
    const n = this.size(`${what} length`);
    // Ask for the whole array at once when its size is known, at least a length word per string.
    const minBytes = elemType === ValueType.STRING || elemType === ValueType.ARRAY ? 8 : SCALAR_BYTES[elemType]!;
    this.need(n * minBytes, what);
    const out: unknown[] = new Array(n);
    for (let i = 0; i < n; i++) out[i] = this.value(elemType, what, depth + 1);
    return out;
  }
}

/**
 * Parses from `st.pos` to the end of the tensor index; throws NeedMore where `buf` ends first (after
 * saving in `st` every item that was complete, so the next call resumes there).
 */
function parseHeader(buf: Uint8Array, st: HeaderState, name: string): void {
  const where = () => name;
  const r = new Reader(buf, st.pos, where);
  if (!st.started) {
    r.need(4, 'magic');
    const magic = buf.subarray(0, 4);
    const text = String.fromCharCode(...magic);
    check(text === 'GGUF', OP, name, "a GGUF file (magic 'GGUF')", `magic ${fmt(text)} (bytes ${[...magic].map((b) => b.toString(16).padStart(2, '0')).join(' ')})`);
    r.pos = 4;
    const version = r.u32('version');
    // A big-endian file (gguf-py --bigendian) reads here as version << 24.
    if (version >= 1 << 16 && (version >>> 24) > 0 && (version & 0xffff) === 0) {
      fail(OP, name, 'a little-endian GGUF file', `a big-endian one (version ${version >>> 24}), which is not supported`);
    }
    check(version === 2 || version === 3, OP, name, 'GGUF version 2 or 3', version === 1 ? '1 (32-bit counts, not supported)' : version);
    st.version = version;
    st.nTensors = r.size('tensor count');
    st.nKv = r.size('metadata count');
    st.pos = r.pos;
    st.started = true;
  }
  while (st.metadata.size < st.nKv) {
    r.pos = st.pos;
    const i = st.metadata.size;
    const key = r.string(`metadata key ${i}`);
    check(!st.metadata.has(key), OP, name, `unique metadata keys`, `'${key}' twice`);
    const type = r.valueType(`metadata '${key}' type`);
    const value = r.value(type, `metadata '${key}'`);
    st.metadata.set(key, value);
    st.pos = r.pos;
  }
  while (st.tensors.length < st.nTensors) {
    r.pos = st.pos;
    const i = st.tensors.length;
    const tname = r.string(`tensor ${i} name`);
    const nDims = r.u32(`tensor '${tname}' dimension count`);
    check(nDims <= MAX_DIMS, OP, `${name} tensor '${tname}'`, `at most ${MAX_DIMS} dimensions`, nDims);
    const shape: number[] = [];
    for (let d = 0; d < nDims; d++) shape.push(r.size(`tensor '${tname}' dimension ${d}`));
    const typeId = r.u32(`tensor '${tname}' type`);
    const offset = r.size(`tensor '${tname}' offset`);
    st.tensors.push({ name: tname, shape, typeId, offset });
    st.pos = r.pos;
  }
}

/** Reads the header in growing chunks until it parses; returns the state and the data section start. */
async function readHeader(src: ByteSource): Promise<{ st: HeaderState; dataStart: number; alignment: number; prefix: Uint8Array }> {
  const st: HeaderState = { pos: 0, version: 0, nTensors: 0, nKv: 0, metadata: new Map(), tensors: [], started: false };
  let buf = new Uint8Array(0);
  let want = 1 << 20;
  for (;;) {
    if (src.size !== null) want = Math.min(want, src.size);
    if (want > buf.byteLength) {
      const more = await src.read(buf.byteLength, want);
      const next = new Uint8Array(buf.byteLength + more.byteLength);
      next.set(buf);
      next.set(more, buf.byteLength);
      buf = next;
    }
    try {
      parseHeader(buf, st, src.name);
      break;
    } catch (e) {
      if (!(e instanceof NeedMore)) throw e;
      const atEnd = buf.byteLength < want || (src.size !== null && buf.byteLength >= src.size);
      if (atEnd || (src.size !== null && e.end > src.size)) {
        const size = src.size ?? buf.byteLength;
        fail(OP, src.name, `a complete GGUF header (${e.what} needs bytes up to ${e.end})`, `a truncated file of ${size} bytes`);
      }
      want = Math.max(e.end, buf.byteLength * 2);
    }
  }
  const a = st.metadata.get('general.alignment') ?? 32;
  check(
    typeof a === 'number' && Number.isInteger(a) && a > 0 && (a & (a - 1)) === 0,
    OP,
    `${src.name} metadata 'general.alignment'`,
    'a power of two',
    a,
  );
  const dataStart = Math.ceil(st.pos / a) * a;
  return { st, dataStart, alignment: a, prefix: buf };
}

// ---------------------------------------------------------------------------------------------
// Tensor layout

function tensorBytesOf(t: RawTensor, where: string): number | null {
  const size = ggmlTypeSize(t.typeId);
  if (!size) return null;
  const ne0 = t.shape[0] ?? 1;
  check(
    ne0 % size.blockElems === 0,
    OP,
    `${where} shape`,
    `a first dimension that is a multiple of ${ggmlTypeName(t.typeId)}'s block of ${size.blockElems}`,
    shapeStr(t.shape),
  );
  let n = 1;
  for (const d of t.shape) n *= d;
  const bytes = (n / size.blockElems) * size.blockBytes;
  check(Number.isSafeInteger(bytes), OP, `${where} shape`, 'a tensor of fewer than 2^53 bytes', shapeStr(t.shape));
  return bytes;
}

/** Absolute ranges of one part's tensors (in file order), checked against each other, the alignment and the file size. */
function layOut(
  st: HeaderState,
  dataStart: number,
  alignment: number,
  src: ByteSource,
  file: number,
): { name: string; info: GGUFTensorInfo }[] {
  const name = src.name;
  const entries = st.tensors.map((t) => {
    const where = `${name} tensor '${t.name}'`;
    check(t.offset % alignment === 0, OP, `${where} offset`, `a multiple of general.alignment (${alignment})`, t.offset);
    return { t, where, bytes: tensorBytesOf(t, where), begin: dataStart + t.offset };
  });
  entries.sort((a, b) => a.begin - b.begin);
  const size = src.size;
  const out: { name: string; info: GGUFTensorInfo }[] = [];
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i]!;
    const next = entries[i + 1];
    let bytes = e.bytes;
    if (bytes === null) {
      // Unknown block size: the tensor runs to the next one (or the end of the file).
      const end = next ? next.begin : size;
      if (end === null) {
        fail(OP, `${e.where} type`, 'a ggml type of known size for the last tensor of a stream of unknown length', ggmlTypeName(e.t.typeId));
      }
      bytes = end - e.begin;
    }
    const end = e.begin + bytes;
    const desc = `${ggmlTypeName(e.t.typeId)} ${shapeStr(e.t.shape)}: ${bytes} bytes at byte ${e.begin}`;
    if (next && end > next.begin) {
      fail(OP, e.where, `to end before tensor '${next.t.name}' at byte ${next.begin} (its size follows from its type and shape)`, `${desc}, overlapping it`);
    }
    if (size !== null && end > size) fail(OP, e.where, `data inside the file (${size} bytes)`, `${desc}, past the end of the file`);
    const info = { type: ggmlTypeName(e.t.typeId), shape: e.t.shape.slice(), typeId: e.t.typeId, offset: e.begin, byteLength: bytes, file };
    out.push({ name: e.t.name, info: Object.freeze(info) });
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Opening one part, split models, the GGUFFile

interface Part {
  src: ByteSource;
  metadata: Map<string, unknown>;
  /** In file order. */
  tensors: { name: string; info: GGUFTensorInfo }[];
}

/**
 * A stream source whose first bytes (read for the header, usually with some tensor data past it) are
 * served from memory, so the first tensors can still be read after the header.
 */
function withPrefix(src: ByteSource, prefix: Uint8Array): ByteSource {
  const n = prefix.byteLength;
  return {
    name: src.name,
    get size() {
      return src.size;
    },
    sequential: true,
    async read(b, e) {
      if (e <= n) return prefix.subarray(b, e);
      if (b >= n) return src.read(b, e);
      const rest = await src.read(n, e);
      const out = new Uint8Array(n - b + rest.byteLength);
      out.set(prefix.subarray(b));
      out.set(rest, n - b);
      return out;
    },
    close: () => src.close(),
  };
}

async function openPart(src: ByteSource, file: number): Promise<Part> {
  try {
    const { st, dataStart, alignment, prefix } = await readHeader(src);
    const tensors = layOut(st, dataStart, alignment, src, file);
    return { src: src.sequential ? withPrefix(src, prefix) : src, metadata: st.metadata, tensors };
  } catch (e) {
    await src.close();
    throw e;
  }
}

const SPLIT_NAME = /-(\d{5})-of-(\d{5})\.gguf$/i;

/** The names of all parts when `s` names part 1 of N (llama.cpp's `<prefix>-00001-of-0000N.gguf`). */
function splitSiblings(s: string): string[] | null {
  const m = SPLIT_NAME.exec(s);
  if (!m || Number(m[1]) !== 1 || Number(m[2]) <= 1) return null;
  const n = Number(m[2]);
  const prefix = s.slice(0, m.index);
  const suffix = s.slice(m.index + m[0].length);
  return Array.from({ length: n }, (_, i) => `${prefix}-${String(i + 1).padStart(5, '0')}-of-${m[2]}.gguf${suffix}`);
}

const int = (x: unknown): number | null => (typeof x === 'number' && Number.isInteger(x) ? x : null);

/** Checks the parts against their split.* keys and each other. */
function checkSplit(parts: Part[]): void {
  const n = parts.length;
  const first = parts[0]!;
  const count = int(first.metadata.get('split.count'));
  if (n === 1) {
    check(
      count === null || count <= 1,
      OP,
      first.src.name,
      'a complete model (or every part of a split one, in order, as an array)',
      `part 1 of ${count} (split.count)`,
    );
    return;
  }
  check(count === n, OP, `${first.src.name} metadata 'split.count'`, `${n} (the number of parts given)`, count ?? first.metadata.get('split.count'));
  let total = 0;
  parts.forEach((p, i) => {
    const no = int(p.metadata.get('split.no'));
    check(no === i, OP, `${p.src.name} metadata 'split.no'`, `${i} (part ${i + 1} of ${n}: pass the parts in order)`, no ?? p.metadata.get('split.no'));
    const c = int(p.metadata.get('split.count'));
    check(c === n, OP, `${p.src.name} metadata 'split.count'`, `${n}`, c ?? p.metadata.get('split.count'));
    total += p.tensors.length;
  });
  const expected = int(first.metadata.get('split.tensors.count'));
  check(expected === null || expected === total, OP, `${first.src.name} metadata 'split.tensors.count'`, `${total} (the tensors of all ${n} parts)`, expected);
}

/**
 * A tensor the config needs (Llama 3's rope_freqs, Phi-3's rope_factors_long / rope_factors_short), read at
 * load and kept so that a stream source can still hand it out. convert_hf_to_gguf.py writes them first,
 * inside the header's chunk.
 */
async function readConfigTensor(parts: Part[], tensors: Map<string, GGUFTensorInfo>, cache: Map<string, Uint8Array>, name: string): Promise<Float32Array | undefined> {
  const info = tensors.get(name);
  if (!info) return undefined;
  check(info.type === 'F32', OP, `${parts[info.file]!.src.name} tensor '${name}' type`, 'F32', info.type);
  const bytes = await readTensor(parts, info, name);
  cache.set(name, bytes);
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  return Float32Array.from({ length: bytes.byteLength / 4 }, (_, i) => dv.getFloat32(4 * i, true));
}

async function readTensor(parts: Part[], info: GGUFTensorInfo, name: string): Promise<Uint8Array> {
  const src = parts[info.file]!.src;
  const out = await src.read(info.offset, info.offset + info.byteLength);
  check(
    out.byteLength === info.byteLength,
    'GGUFFile.tensorBytes',
    `${src.name} tensor '${name}'`,
    `${info.byteLength} bytes at byte ${info.offset}`,
    `end of file after ${out.byteLength} (a truncated file)`,
  );
  return out;
}

class GGUFFileImpl implements GGUFFile {
  constructor(
    private readonly parts: Part[],
    readonly metadata: ReadonlyMap<string, unknown>,
    readonly tensors: ReadonlyMap<string, GGUFTensorInfo>,
    readonly config: object,
    readonly tokenizer: object | undefined,
    readonly tokenizerConfig: object | undefined,
    /** Bytes read at load time (rope_freqs, rope_factors_*), served from memory so stream sources can read them again. */
    private readonly cached: Map<string, Uint8Array>,
  ) {}

  get name(): string {
    return this.parts[0]!.src.name;
  }

  tensorInfo(name: string): GGUFTensorInfo {
    const info = this.tensors.get(name);
    if (!info) fail('GGUFFile.tensorInfo', 'name', `a tensor of ${this.name} (${this.tensors.size} tensors)`, `'${name}'`);
    return info;
  }

  async tensorBytes(name: string): Promise<Uint8Array> {
    const info = this.tensors.get(name);
    if (!info) fail('GGUFFile.tensorBytes', 'name', `a tensor of ${this.name} (${this.tensors.size} tensors)`, `'${name}'`);
    return this.cached.get(name) ?? readTensor(this.parts, info, name);
  }

  async close(): Promise<void> {
    await Promise.all(this.parts.map((p) => p.src.close()));
  }
}

/**
 * Opens a GGUF file: parses the header and tensor index and builds the equivalent HF config.json and
 * tokenizer.json; tensor bytes are read on demand with `tensorBytes()`.
 *
 * A string is a path in Node and Deno (http(s), blob: and data: URLs are fetched everywhere, with
 * Range requests) and a URL in a browser; a path or URL naming part 1 of a split model
 * (`-00001-of-0000N.gguf`) opens the other parts too. A Response is read as a stream, so its tensors
 * must then be read in file order. An array is the parts of a split model, in order.
 */
export async function loadGGUF(src: GGUFSource | (Blob | string)[]): Promise<GGUFFile> {
  let list: GGUFSource[];
  if (Array.isArray(src)) {
    check(src.length > 0, OP, 'src', 'at least one part', '[]');
    list = src;
  } else {
    list = typeof src === 'string' ? (splitSiblings(src) ?? [src]) : [src];
  }
  const parts: Part[] = [];
  try {
    for (let i = 0; i < list.length; i++) parts.push(await openPart(await openSource(list[i]!), i));
    checkSplit(parts);
    const tensors = new Map<string, GGUFTensorInfo>();
    for (const p of parts) {
      for (const { name, info } of p.tensors) {
        const prev = tensors.get(name);
        if (prev) {
          fail(OP, `${p.src.name} tensor '${name}'`, 'a name no other tensor has', `a duplicate (also in ${parts[prev.file]!.src.name})`);
        }
        tensors.set(name, info);
      }
    }
    const metadata = parts[0]!.metadata;
    const cached = new Map<string, Uint8Array>();
    const ropeFreqs = await readConfigTensor(parts, tensors, cached, 'rope_freqs.weight');
    const long = await readConfigTensor(parts, tensors, cached, 'rope_factors_long.weight');
    const short = await readConfigTensor(parts, tensors, cached, 'rope_factors_short.weight');
    // llama.cpp's mmproj files (architecture `clip`: a vision tower and projector beside a text GGUF,
    // formats/gguf_mmproj.ts) stand for no model of their own: their config names the projector only.
    const clip = metadata.get('general.architecture') === 'clip';
    const config = clip ? { mmproj: metadata.get('clip.projector_type') ?? null }
      : ggufConfig(metadata, tensors, { ropeFreqs, ropeFactors: long || short ? { long, short } : undefined, name: parts[0]!.src.name });
    const tok = clip ? null : ggufTokenizer(metadata, { name: parts[0]!.src.name });
    // No file stays open between here and the first tensor read.
    await Promise.all(parts.map((p) => p.src.release?.()));
    return new GGUFFileImpl(parts, metadata, tensors, config, tok?.tokenizer, tok?.tokenizerConfig, cached);
  } catch (e) {
    await Promise.all(parts.map((p) => p.src.close()));
    throw e;
  }
}
