// A GGUF v3 writer (llama.cpp's model file; ggml's gguf.cpp reads it): for tests and tools that build
// quantized models on the host. Little-endian throughout:
//   header   magic "GGUF", version u32 = 3, tensor count u64, metadata count u64
//   metadata key (string), value type u32, value            string = u64 byte length + UTF-8 bytes
//                                                            array  = item type u32, count u64, items
//   tensors  name (string), n_dims u32, ne[n_dims] u64 (fastest first), ggml type u32, offset u64
//   padding  to `general.alignment` (default 32), then the data section: each tensor's data at its
//            offset (relative to the section, a multiple of the alignment), zero-padded to the alignment.
import { GGML_TYPE_IDS, QUANT_FORMATS, isQuantType } from '../core/quant.js';
import { WebinferError, fail, fmt } from '../core/errors.js';

/** GGUF metadata value types (gguf.h enum gguf_type), by the short names the writer takes. */
export const GGUF_VALUE_TYPES = Object.freeze({
  u8: 0, i8: 1, u16: 2, i16: 3, u32: 4, i32: 5, f32: 6, bool: 7, string: 8, array: 9, u64: 10, i64: 11, f64: 12,
} as const);
export type GGUFValueTypeName = keyof typeof GGUF_VALUE_TYPES;
export type GGUFScalarTypeName = Exclude<GGUFValueTypeName, 'array'>;

/** A value with its type spelled out: { type: 'u32', value: 5 }, { type: 'f32', value: 10000 }. */
export interface GGUFTypedScalar {
  type: GGUFScalarTypeName;
  value: number | bigint | boolean | string;
}
/** An array with its item type spelled out. Items of an 'array' item type are themselves arrays (a
 *  GGUFTypedArray, or a plain or typed JS array whose item type is inferred). */
export interface GGUFTypedArray {
  type: 'array';
  itemType: GGUFValueTypeName;
  value: ArrayLike<unknown>;
}
export type GGUFTypedValue = GGUFTypedScalar | GGUFTypedArray;

export interface GGUFWriteTensor {
  name: string;
  /** ggml type name: 'F32', 'F16', 'BF16', 'Q4_K', ... (GGML_TYPE_IDS). */
  type: string;
  /** ggml ne: fastest dimension first (an HF [out, in] matrix is [in, out]); 1 to 4 dimensions. */
  shape: readonly number[];
  data: Uint8Array;
}

export interface GGUFWriteOptions {
  /**
   * Key-value metadata, in file order. Values are GGUFTypedValue objects, or plain values whose type is
   * inferred: string → string, boolean → bool, bigint → i64 when negative else u64, number → u32 when an
   * integer in [0, 2^32), i32 when a negative integer >= −2^31, u64/i64 for larger integers, else f32 (so a
   * float key with an integral value, e.g. rope_freq_base 10000, needs { type: 'f32', value: 10000 });
   * arrays: a typed array by its element type (Float32Array → f32, Int32Array → i32, ...), a plain array
   * by its items (all strings → string, all booleans → bool, numbers → f32 unless all integers, then
   * u32 / u64 when none is negative, else i32 / i64, by range; arrays → array). The tuple form [key, value, type] gives the type of a plain
   * value directly (for 'array' the item type is still inferred).
   */
  metadata: readonly (readonly [key: string, value: unknown, type?: GGUFValueTypeName])[] | Readonly<Record<string, unknown>>;
  tensors: readonly GGUFWriteTensor[];
  /** Data alignment (a power of two); written as general.alignment (u32) unless 32, ggml's default. */
  alignment?: number;
}

const OP = 'writeGGUF';
const DEFAULT_ALIGNMENT = 32;
/** ggml's GGML_MAX_NAME: tensor names are shorter than this many bytes. */
const MAX_NAME_BYTES = 64;
const MAX_DIMS = 4;

/** Bytes per element of the unblocked ggml types. */
const PLAIN_TYPE_BYTES: Readonly<Record<string, number>> = { F32: 4, F16: 2, BF16: 2, I8: 1, I16: 2, I32: 4, I64: 8, F64: 8 };

/** Bytes of a tensor of ggml type `type` with ne `shape`; throws for a type the writer does not size. */
export function ggmlTensorBytes(type: string, shape: readonly number[], op = 'ggmlTensorBytes', what = 'tensor'): number {
  let n = 1;
  for (const s of shape) n *= s;
  if (Object.prototype.hasOwnProperty.call(PLAIN_TYPE_BYTES, type)) return n * PLAIN_TYPE_BYTES[type]!;
  if (isQuantType(type)) {
    const f = QUANT_FORMATS[type];
    if (shape.length === 0 || shape[0]! % f.blockElems !== 0) {
      fail(op, `${what}.shape`, `ne[0] a multiple of ${type}'s block of ${f.blockElems}`, [...shape]);
    }
    return (n / f.blockElems) * f.blockBytes;
  }
  return fail(op, `${what}.type`, `one of ${[...Object.keys(PLAIN_TYPE_BYTES), ...Object.keys(QUANT_FORMATS)].join(', ')}`, String(type));
}

// ---------------------------------------------------------------------------------------------
// a growable little-endian byte sink

class Sink {
  buf = new Uint8Array(1024);
  view = new DataView(this.buf.buffer);
  len = 0;
  private reserve(n: number): number {
    const at = this.len;
    if (at + n > this.buf.length) {
      let cap = this.buf.length * 2;
      while (cap < at + n) cap *= 2;
      const nb = new Uint8Array(cap);
      nb.set(this.buf.subarray(0, at));
      this.buf = nb;
      this.view = new DataView(nb.buffer);
    }
    this.len += n;
    return at;
  }
  // (the offset first: reserve may replace buf and view)
  u8(v: number): void { const at = this.reserve(1); this.view.setUint8(at, v); }
  i8(v: number): void { const at = this.reserve(1); this.view.setInt8(at, v); }
  u16(v: number): void { const at = this.reserve(2); this.view.setUint16(at, v, true); }
  i16(v: number): void { const at = this.reserve(2); this.view.setInt16(at, v, true); }
  u32(v: number): void { const at = this.reserve(4); this.view.setUint32(at, v, true); }
  i32(v: number): void { const at = this.reserve(4); this.view.setInt32(at, v, true); }
  f32(v: number): void { const at = this.reserve(4); this.view.setFloat32(at, v, true); }
  f64(v: number): void { const at = this.reserve(8); this.view.setFloat64(at, v, true); }
  u64(v: bigint): void { const at = this.reserve(8); this.view.setBigUint64(at, v, true); }
  i64(v: bigint): void { const at = this.reserve(8); this.view.setBigInt64(at, v, true); }
  bytes(b: Uint8Array): void { const at = this.reserve(b.length); this.buf.set(b, at); }
  str(s: string): void {
    const b = UTF8.encode(s);
    this.u64(BigInt(b.length));
    this.bytes(b);
  }
  pad(alignment: number): void {
    const n = (alignment - (this.len % alignment)) % alignment;
    this.reserve(n); // fresh bytes are zero
  }
  result(): Uint8Array { return this.buf.slice(0, this.len); }
}
const UTF8 = new TextEncoder();

// ---------------------------------------------------------------------------------------------
// metadata values

interface Resolved { type: GGUFValueTypeName; value: unknown; itemType?: GGUFValueTypeName }

const INT_RANGES: Readonly<Record<string, readonly [bigint, bigint]>> = {
  u8: [0n, 255n], i8: [-128n, 127n], u16: [0n, 65535n], i16: [-32768n, 32767n],
  u32: [0n, 4294967295n], i32: [-2147483648n, 2147483647n],
  u64: [0n, 18446744073709551615n], i64: [-9223372036854775808n, 9223372036854775807n],
};

function isTyped(v: unknown): v is GGUFTypedValue {
  if (typeof v !== 'object' || v === null || Array.isArray(v) || ArrayBuffer.isView(v)) return false;
  const t = (v as { type?: unknown }).type;
  return typeof t === 'string' && 'value' in v && Object.prototype.hasOwnProperty.call(GGUF_VALUE_TYPES, t);
}

/** The scalar type inferred for a plain number (see GGUFWriteOptions.metadata). */
function numberType(v: number): GGUFScalarTypeName {
  if (!Number.isInteger(v)) return 'f32';
  if (v >= 0) return v < 2 ** 32 ? 'u32' : 'u64';
  return v >= -(2 ** 31) ? 'i32' : 'i64';
}

/** The item type of a plain or typed JS array. */
function arrayItemType(a: ArrayLike<unknown>, key: string): GGUFValueTypeName {
  if (a instanceof Float32Array) return 'f32';
  if (a instanceof Float64Array) return 'f64';
  if (a instanceof Int32Array) return 'i32';
  if (a instanceof Uint32Array) return 'u32';
  if (a instanceof Int16Array) return 'i16';
  if (a instanceof Uint16Array) return 'u16';
  if (a instanceof Int8Array) return 'i8';
  if (a instanceof Uint8Array) return 'u8';
  if (a instanceof BigInt64Array) return 'i64';
  if (a instanceof BigUint64Array) return 'u64';
  if (!Array.isArray(a)) return fail(OP, `metadata '${key}'`, 'an array', a);
  if (a.length === 0) return fail(OP, `metadata '${key}'`, "an explicit item type for an empty array ({ type: 'array', itemType, value: [] })", '[]');
  const first = a[0];
  if (typeof first === 'string' || typeof first === 'boolean') {
    if (!a.every((x) => typeof x === typeof first)) fail(OP, `metadata '${key}'`, `items all of one type (${typeof first})`, 'mixed items');
    return typeof first === 'string' ? 'string' : 'bool';
  }
  if (typeof first === 'number') {
    let allInt = true, lo = 0, hi = 0;
    for (const x of a) {
      if (typeof x !== 'number') return fail(OP, `metadata '${key}'`, 'items all numbers', 'mixed items');
      if (!Number.isInteger(x)) allInt = false;
      lo = Math.min(lo, x);
      hi = Math.max(hi, x);
    }
    if (!allInt) return 'f32';
    if (lo >= 0) return hi < 2 ** 32 ? 'u32' : 'u64';
    return lo >= -(2 ** 31) && hi < 2 ** 31 ? 'i32' : 'i64';
  }
  if (typeof first === 'bigint') return a.some((x) => typeof x === 'bigint' && x < 0n) ? 'i64' : 'u64';
  if (Array.isArray(first) || ArrayBuffer.isView(first) || isTyped(first)) return 'array';
  return fail(OP, `metadata '${key}'`, 'array items of type string, boolean, number, bigint or array', first);
}

function resolve(v: unknown, key: string, explicit?: GGUFValueTypeName): Resolved {
  if (isTyped(v)) {
    if (explicit !== undefined && explicit !== v.type) fail(OP, `metadata '${key}' type`, `${v.type} (the value's own type)`, explicit);
    if (v.type === 'array') {
      const a = v as GGUFTypedArray;
      if (!Object.prototype.hasOwnProperty.call(GGUF_VALUE_TYPES, a.itemType)) {
        fail(OP, `metadata '${key}'.itemType`, `one of ${Object.keys(GGUF_VALUE_TYPES).join(', ')}`, String(a.itemType));
      }
      return { type: 'array', value: a.value, itemType: a.itemType };
    }
    return { type: v.type, value: v.value };
  }
  if (explicit !== undefined) {
    if (!Object.prototype.hasOwnProperty.call(GGUF_VALUE_TYPES, explicit)) {
      fail(OP, `metadata '${key}' type`, `one of ${Object.keys(GGUF_VALUE_TYPES).join(', ')}`, String(explicit));
    }
    if (explicit === 'array') return { type: 'array', value: v, itemType: arrayItemType(v as ArrayLike<unknown>, key) };
    return { type: explicit, value: v };
  }
  switch (typeof v) {
    case 'string': return { type: 'string', value: v };
    case 'boolean': return { type: 'bool', value: v };
    case 'bigint': return { type: v < 0n ? 'i64' : 'u64', value: v };
    case 'number': return { type: numberType(v), value: v };
    default:
      if (Array.isArray(v) || ArrayBuffer.isView(v)) {
        return { type: 'array', value: v, itemType: arrayItemType(v as ArrayLike<unknown>, key) };
      }
      return fail(OP, `metadata '${key}'`, 'a string, boolean, number, bigint, array or { type, value }', v);
  }
}

function writeScalar(s: Sink, type: GGUFScalarTypeName, v: unknown, where: string): void {
  const bad = (expected: string): never => fail(OP, where, expected, typeof v === 'bigint' ? `${v}n` : v);
  switch (type) {
    case 'string':
      if (typeof v !== 'string') bad('a string');
      s.str(v as string);
      return;
    case 'bool':
      if (typeof v !== 'boolean') bad('a boolean');
      s.u8(v ? 1 : 0);
      return;
    case 'f32':
    case 'f64':
      if (typeof v !== 'number') bad(`a number (${type})`);
      if (type === 'f32') s.f32(v as number); else s.f64(v as number);
      return;
    default: {
      // integers: numbers or bigints, range-checked
      let b: bigint;
      if (typeof v === 'bigint') b = v;
      else if (typeof v === 'number' && Number.isSafeInteger(v)) b = BigInt(v);
      else return bad(`an integer (${type})`);
      const [lo, hi] = INT_RANGES[type]!;
      if (b < lo || b > hi) bad(`an integer in [${lo}, ${hi}] (${type})`);
      switch (type) {
        case 'u8': s.u8(Number(b)); return;
        case 'i8': s.i8(Number(b)); return;
        case 'u16': s.u16(Number(b)); return;
        case 'i16': s.i16(Number(b)); return;
        case 'u32': s.u32(Number(b)); return;
        case 'i32': s.i32(Number(b)); return;
        case 'u64': s.u64(b); return;
        case 'i64': s.i64(b); return;
      }
    }
  }
}

function writeValue(s: Sink, r: Resolved, where: string): void {
  if (r.type !== 'array') {
    writeScalar(s, r.type, r.value, where);
    return;
  }
  const a = r.value as ArrayLike<unknown>;
  if (a === null || typeof a !== 'object' || typeof a.length !== 'number') fail(OP, where, 'an array', a);
  const itemType = r.itemType!;
  s.u32(GGUF_VALUE_TYPES[itemType]);
  s.u64(BigInt(a.length));
  for (let i = 0; i < a.length; i++) {
    const item = a[i];
    if (itemType === 'array') {
      // a nested array: its own item type, count and items
      const inner = isTyped(item) ? resolve(item, `${where}[${i}]`) : resolve(item, `${where}[${i}]`, 'array');
      if (inner.type !== 'array') fail(OP, `${where}[${i}]`, 'an array', item);
      writeValue(s, inner, `${where}[${i}]`);
    } else {
      writeScalar(s, itemType, item, `${where}[${i}]`);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// the file

/** Writes a GGUF v3 file. Throws a WebinferError naming the entry for invalid metadata or tensors (a
 *  data length that disagrees with the type and shape, a duplicate or over-long name, ...). */
export function writeGGUF(o: GGUFWriteOptions): Uint8Array {
  if (o === null || typeof o !== 'object') fail(OP, 'options', 'an object', o);
  const tensors = o.tensors ?? [];
  if (!Array.isArray(tensors)) fail(OP, 'tensors', 'an array', tensors);
  const head = ggufHeader(o, (t, what) => {
    if (!(t.data instanceof Uint8Array)) fail(OP, `${what}.data`, 'a Uint8Array', t.data);
    return t.data.length;
  });
  const s = new Sink();
  s.bytes(head.header);
  for (const t of tensors) {
    s.bytes(t.data);
    s.pad(head.alignment);
  }
  return s.result();
}

/** A tensor as writeGGUFHeader takes it: its data comes later, from the caller. */
export type GGUFHeaderTensor = Omit<GGUFWriteTensor, 'data'>;

export interface GGUFHeader {
  /** The header (magic to tensor infos), zero-padded to the alignment: the data section starts after it. */
  header: Uint8Array;
  /** Each tensor's offset in the data section, and its byte length (ggmlTensorBytes). */
  offsets: number[];
  sizes: number[];
  alignment: number;
  /** The data section's length: every tensor padded to the alignment. */
  dataBytes: number;
}

/**
 * The header of the GGUF v3 file writeGGUF writes for these tensors, without their data: for files
 * too large to hold (a writer streams each tensor's bytes after it, each padded with zeros to
 * `alignment`, in the order given). Checks as writeGGUF does.
 */
export function writeGGUFHeader(o: Omit<GGUFWriteOptions, 'tensors'> & { tensors: readonly GGUFHeaderTensor[] }): GGUFHeader {
  if (o === null || typeof o !== 'object') fail(OP, 'options', 'an object', o);
  return ggufHeader(o, null);
}

function ggufHeader(o: Omit<GGUFWriteOptions, 'tensors'> & { tensors: readonly GGUFHeaderTensor[] }, dataLength: ((t: GGUFWriteTensor, what: string) => number) | null): GGUFHeader {
  const entries: [string, unknown, GGUFValueTypeName | undefined][] = Array.isArray(o.metadata)
    ? (o.metadata as readonly (readonly [string, unknown, GGUFValueTypeName?])[]).map(([k, v, t]) => [k, v, t])
    : Object.entries(o.metadata ?? {}).map(([k, v]) => [k, v, undefined]);
  const tensors = o.tensors ?? [];
  if (!Array.isArray(tensors)) fail(OP, 'tensors', 'an array', tensors);

  // alignment: the option, else a general.alignment entry, else 32; they must agree
  const alignEntry = entries.find(([k]) => k === 'general.alignment');
  let alignment = o.alignment;
  if (alignEntry !== undefined) {
    const r = resolve(alignEntry[1], 'general.alignment', alignEntry[2]);
    const v = typeof r.value === 'bigint' ? Number(r.value) : r.value;
    if (r.type !== 'u32') fail(OP, "metadata 'general.alignment'", 'a u32', `${r.type}`);
    if (alignment !== undefined && v !== alignment) fail(OP, "metadata 'general.alignment'", `${alignment} (the alignment option)`, v);
    alignment = v as number;
  }
  alignment ??= DEFAULT_ALIGNMENT;
  if (!Number.isInteger(alignment) || alignment <= 0 || (alignment & (alignment - 1)) !== 0) {
    fail(OP, 'alignment', 'a power of two', alignment);
  }
  if (alignEntry === undefined && alignment !== DEFAULT_ALIGNMENT) entries.push(['general.alignment', alignment, 'u32']);

  const keys = new Set<string>();
  for (const [k] of entries) {
    if (typeof k !== 'string' || k.length === 0) fail(OP, 'metadata key', 'a non-empty string', k);
    if (keys.has(k)) fail(OP, `metadata '${k}'`, 'unique keys', 'a duplicate');
    keys.add(k);
  }

  // tensors: validate, and lay out the data section
  const names = new Set<string>();
  const offsets: bigint[] = [];
  const sizes: number[] = [];
  let dataLen = 0;
  tensors.forEach((t, i) => {
    const what = `tensors[${i}]`;
    if (t === null || typeof t !== 'object') fail(OP, what, 'an object', t);
    if (typeof t.name !== 'string' || t.name.length === 0) fail(OP, `${what}.name`, 'a non-empty string', t.name);
    const nameBytes = UTF8.encode(t.name).length;
    if (nameBytes >= MAX_NAME_BYTES) fail(OP, `${what}.name`, `fewer than ${MAX_NAME_BYTES} bytes (ggml's GGML_MAX_NAME)`, `'${t.name}' (${nameBytes} bytes)`);
    if (names.has(t.name)) fail(OP, `${what}.name`, 'unique tensor names', `a second '${t.name}'`);
    names.add(t.name);
    if (typeof t.type !== 'string' || !Object.prototype.hasOwnProperty.call(GGML_TYPE_IDS, t.type)) {
      fail(OP, `${what}.type`, 'a ggml type name (GGML_TYPE_IDS)', t.type);
    }
    if (!Array.isArray(t.shape) || t.shape.length < 1 || t.shape.length > MAX_DIMS
        || !t.shape.every((d: unknown) => Number.isSafeInteger(d) && (d as number) >= 0)) {
      fail(OP, `${what}.shape`, `1 to ${MAX_DIMS} non-negative integers (ggml ne, fastest first)`, t.shape);
    }
    const got = dataLength ? dataLength(t as GGUFWriteTensor, what) : null;
    const need = ggmlTensorBytes(t.type, t.shape, OP, what);
    if (got !== null && got !== need) {
      throw new WebinferError(`${OP}: ${what}.data: expected ${need} bytes for '${t.name}' of ${t.type} with ne ${fmt([...t.shape])}, got ${got} bytes`);
    }
    sizes.push(need);
    offsets.push(BigInt(dataLen));
    dataLen += need + ((alignment! - (need % alignment!)) % alignment!);
  });

  const s = new Sink();
  s.bytes(UTF8.encode('GGUF'));
  s.u32(3);
  s.u64(BigInt(tensors.length));
  s.u64(BigInt(entries.length));
  for (const [k, v, t] of entries) {
    s.str(k);
    const r = resolve(v, k, t);
    s.u32(GGUF_VALUE_TYPES[r.type]);
    writeValue(s, r, `metadata '${k}'`);
  }
  tensors.forEach((t, i) => {
    s.str(t.name);
    s.u32(t.shape.length);
    for (const d of t.shape) s.u64(BigInt(d));
    s.u32(GGML_TYPE_IDS[t.type]!);
    s.u64(offsets[i]!);
  });
  s.pad(alignment);
  return { header: s.result(), offsets: offsets.map(Number), sizes, alignment, dataBytes: dataLen };
}

/**
 * The files of a split GGUF (llama.cpp's gguf-split layout): `parts` files, tensors in order, cut where
 * the running data size passes each 1/parts share (every file holds at least one tensor, so parts is at
 * most the tensor count). Every file carries split.no (u16), split.count (u16) and split.tensors.count
 * (i32, the total over all files); the first file alone carries the rest of the metadata.
 */
export function writeGGUFSplit(o: GGUFWriteOptions, parts: number): Uint8Array[] {
  const n = o.tensors.length;
  if (!Number.isInteger(parts) || parts < 1 || parts > Math.max(1, n)) fail('writeGGUFSplit', 'parts', `an integer in [1, ${Math.max(1, n)}] (the tensor count)`, parts);
  const sizes = o.tensors.map((t) => t.data.length);
  const total = sizes.reduce((a, b) => a + b, 0);
  // file p takes tensors in order until the running size would pass (p + 1)/parts of the total, or until
  // only as many tensors are left as later files need
  const groups: GGUFWriteTensor[][] = Array.from({ length: parts }, () => []);
  let p = 0, acc = 0;
  for (let i = 0; i < n; i++) {
    const later = parts - p - 1;
    if (groups[p]!.length > 0 && later > 0 && (acc + sizes[i]! > (total * (p + 1)) / parts || n - i <= later)) p++;
    groups[p]!.push(o.tensors[i]!);
    acc += sizes[i]!;
  }
  const base: [string, unknown, GGUFValueTypeName?][] = Array.isArray(o.metadata)
    ? (o.metadata as readonly (readonly [string, unknown, GGUFValueTypeName?])[]).map(([k, v, t]) => [k, v, t])
    : Object.entries(o.metadata ?? {}).map(([k, v]) => [k, v]);
  const align = base.find(([k]) => k === 'general.alignment');
  return groups.map((g, part) => {
    const split: [string, unknown, GGUFValueTypeName?][] = [
      ['split.no', part, 'u16'], ['split.count', parts, 'u16'], ['split.tensors.count', n, 'i32'],
    ];
    // later files repeat only the alignment (their data section needs it)
    const meta = part === 0 ? [...base, ...split] : [...(align ? [align] : []), ...split];
    return writeGGUF({ metadata: meta, tensors: g, ...(o.alignment !== undefined ? { alignment: o.alignment } : {}) });
  });
}
