// A minimal ONNX model writer for the peer baseline (bench/ort.ts): just enough protobuf to describe one
// com.microsoft attention node with typed graph inputs and outputs, so the benchmark needs no model files
// and no protobuf library. Field numbers are those of onnx.proto (IR version 8); every message is written
// with the proto wire format's three encodings we need: varint (0), length-delimited (2), fixed32 (5).

/** Wire types of the protobuf encoding. */
const VARINT = 0, LEN = 2, I32 = 5;

/** Varint bytes of a non-negative integer or a (possibly negative) int64; negatives take ten bytes. */
export function varint(value: number | bigint): number[] {
  let v = BigInt.asUintN(64, BigInt(value));
  const out: number[] = [];
  do {
    const low = Number(v & 0x7fn);
    v >>= 7n;
    out.push(v ? low | 0x80 : low);
  } while (v);
  return out;
}

function key(field: number, wire: number): number[] {
  return varint((field << 3) | wire);
}

export function concat(parts: readonly (Uint8Array | number[])[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) { out.set(p, o); o += p.length; }
  return out;
}

/** An integer field (int32, int64, enum) as a varint. */
export function fieldVarint(field: number, value: number | bigint): Uint8Array {
  return Uint8Array.from([...key(field, VARINT), ...varint(value)]);
}

/** A length-delimited field: bytes, a nested message or a packed repeated scalar. */
export function fieldBytes(field: number, data: Uint8Array): Uint8Array {
  return concat([key(field, LEN), varint(data.length), data]);
}

export function fieldString(field: number, s: string): Uint8Array {
  return fieldBytes(field, new TextEncoder().encode(s));
}

/** A float field: fixed32, little-endian IEEE single. */
export function fieldFloat(field: number, f: number): Uint8Array {
  const k = key(field, I32);
  const b = new Uint8Array(k.length + 4);
  b.set(k);
  new DataView(b.buffer).setFloat32(k.length, f, true);
  return b;
}

/** A repeated integer field in packed form (one length-delimited run of varints). */
export function fieldPacked(field: number, values: readonly (number | bigint)[]): Uint8Array {
  return fieldBytes(field, Uint8Array.from(values.flatMap((v) => varint(v))));
}

// ---- onnx.proto messages -------------------------------------------------------------------------

/** TensorProto.DataType values used here. */
export const ElemType = { float: 1, int32: 6, int64: 7, float16: 10 } as const;
export type ElemTypeName = keyof typeof ElemType;

/** AttributeProto.AttributeType values used here. */
const ATTR_FLOAT = 1, ATTR_INT = 2;

export type Attr = { name: string; int: number } | { name: string; float: number };

/** AttributeProto: name 1, f 2, i 3, type 20. */
export function attribute(a: Attr): Uint8Array {
  return 'int' in a
    ? concat([fieldString(1, a.name), fieldVarint(3, a.int), fieldVarint(20, ATTR_INT)])
    : concat([fieldString(1, a.name), fieldFloat(2, a.float), fieldVarint(20, ATTR_FLOAT)]);
}

/** A dimension: a fixed size (dim_value 1) or a symbolic name (dim_param 2). */
export type Dim = number | string;

/** ValueInfoProto (name 1, type 2) of a tensor: TypeProto.tensor_type 1 → elem_type 1, shape 2 → dim 1. */
export function valueInfo(name: string, elem: ElemTypeName, dims: readonly Dim[]): Uint8Array {
  const shape = concat(dims.map((d) => fieldBytes(1, typeof d === 'number' ? fieldVarint(1, d) : fieldString(2, d))));
  const tensorType = concat([fieldVarint(1, ElemType[elem]), fieldBytes(2, shape)]);
  return concat([fieldString(1, name), fieldBytes(2, fieldBytes(1, tensorType))]);
}

/** TensorProto with raw little-endian data: dims 1 (packed), data_type 2, name 8, raw_data 9. */
export function tensorProto(name: string, elem: ElemTypeName, dims: readonly number[], raw: Uint8Array): Uint8Array {
  return concat([fieldPacked(1, dims), fieldVarint(2, ElemType[elem]), fieldString(8, name), fieldBytes(9, raw)]);
}

export interface NodeSpec {
  opType: string;
  domain?: string;
  name?: string;
  /** Input names in schema order; '' leaves an optional input out while keeping later positions. */
  inputs: string[];
  outputs: string[];
  attributes?: Attr[];
}

/** NodeProto: input 1, output 2, name 3, op_type 4, attribute 5, domain 7. */
export function node(n: NodeSpec): Uint8Array {
  return concat([
    ...n.inputs.map((s) => fieldString(1, s)),
    ...n.outputs.map((s) => fieldString(2, s)),
    fieldString(3, n.name ?? n.opType),
    fieldString(4, n.opType),
    ...(n.attributes ?? []).map((a) => fieldBytes(5, attribute(a))),
    ...(n.domain ? [fieldString(7, n.domain)] : []),
  ]);
}

export interface GraphSpec {
  name: string;
  nodes: NodeSpec[];
  inputs: Uint8Array[];    // valueInfo(...)
  outputs: Uint8Array[];   // valueInfo(...)
  initializers?: Uint8Array[];   // tensorProto(...)
}

/** GraphProto: node 1, name 2, initializer 5, input 11, output 12. */
export function graph(g: GraphSpec): Uint8Array {
  return concat([
    ...g.nodes.map((n) => fieldBytes(1, node(n))),
    fieldString(2, g.name),
    ...(g.initializers ?? []).map((t) => fieldBytes(5, t)),
    ...g.inputs.map((v) => fieldBytes(11, v)),
    ...g.outputs.map((v) => fieldBytes(12, v)),
  ]);
}

/** ModelProto: ir_version 1, producer_name 2, graph 7, opset_import 8 (OperatorSetIdProto: domain 1, version 2). */
export function model(g: GraphSpec, opsets: { domain: string; version: number }[], irVersion = 8): Uint8Array {
  return concat([
    fieldVarint(1, irVersion),
    fieldString(2, 'webinfer-bench'),
    fieldBytes(7, graph(g)),
    ...opsets.map((o) => fieldBytes(8, concat([fieldString(1, o.domain), fieldVarint(2, o.version)]))),
  ]);
}

// ---- the peer models ----------------------------------------------------------------------------------

const OPSETS = [{ domain: '', version: 17 }, { domain: 'com.microsoft', version: 1 }];
const elemOf = (dtype: 'f32' | 'f16'): ElemTypeName => (dtype === 'f16' ? 'float16' : 'float');

export interface MhaModelOptions {
  /** Batch; symbolic ('B') when left out. */
  B?: number;
  H: number;
  D: number;
  /** Sequence length; symbolic ('L') when left out (one session then serves every length). */
  L?: number;
  dtype: 'f32' | 'f16';
  causal?: boolean;
  scale?: number;
}

/**
 * com.microsoft MultiHeadAttention, self-attention without projections: query [B, L, H·D] (BSH: the op's
 * only query layout), key and value [B, H, L, D] (BNSH, which the op takes as already-projected heads and
 * which is webinfer's own layout), output [B, L, H·D]. `unidirectional` 1 is causal (Lq = Lk here, so
 * top-left and bottom-right alignment agree).
 */
export function mhaModel(o: MhaModelOptions): Uint8Array {
  const B: Dim = o.B ?? 'B', L: Dim = o.L ?? 'L', e = elemOf(o.dtype);
  return model({
    name: 'mha',
    nodes: [{
      opType: 'MultiHeadAttention', domain: 'com.microsoft', inputs: ['query', 'key', 'value'], outputs: ['output'],
      attributes: [
        { name: 'num_heads', int: o.H },
        { name: 'scale', float: o.scale ?? 1 / Math.sqrt(o.D) },
        { name: 'unidirectional', int: o.causal ? 1 : 0 },
      ],
    }],
    inputs: [valueInfo('query', e, [B, L, o.H * o.D]), valueInfo('key', e, [B, o.H, L, o.D]), valueInfo('value', e, [B, o.H, L, o.D])],
    outputs: [valueInfo('output', e, [B, L, o.H * o.D])],
  }, OPSETS);
}

export interface GqaDecodeModelOptions {
  Hq: number;
  Hkv: number;
  D: number;
  dtype: 'f32' | 'f16';
  /** Batch; symbolic when left out. */
  batch?: number;
  /** Length of the past/present KV buffers (the cache capacity); symbolic when left out. */
  maxSeq?: number;
  scale?: number;
}

/**
 * com.microsoft GroupQueryAttention for one decode step: query [B, 1, Hq·D], the new token's key and
 * value [B, 1, Hkv·D], past_key/past_value [B, Hkv, maxSeq, D] (BNSH), seqlens_k [B] int32 (each
 * sequence's total length minus one, i.e. the position the new token is written to), and
 * total_sequence_length (a scalar int32). Outputs: output [B, 1, Hq·D] and present_key/present_value,
 * which may be bound to the past buffers so the step appends in place.
 */
export function gqaDecodeModel(o: GqaDecodeModelOptions): Uint8Array {
  const B: Dim = o.batch ?? 'B', S: Dim = o.maxSeq ?? 'S', e = elemOf(o.dtype);
  return model({
    name: 'gqa_decode',
    nodes: [{
      opType: 'GroupQueryAttention', domain: 'com.microsoft',
      inputs: ['query', 'key', 'value', 'past_key', 'past_value', 'seqlens_k', 'total_sequence_length'],
      outputs: ['output', 'present_key', 'present_value'],
      attributes: [
        { name: 'num_heads', int: o.Hq },
        { name: 'kv_num_heads', int: o.Hkv },
        { name: 'scale', float: o.scale ?? 1 / Math.sqrt(o.D) },
      ],
    }],
    inputs: [
      valueInfo('query', e, [B, 1, o.Hq * o.D]),
      valueInfo('key', e, [B, 1, o.Hkv * o.D]),
      valueInfo('value', e, [B, 1, o.Hkv * o.D]),
      valueInfo('past_key', e, [B, o.Hkv, S, o.D]),
      valueInfo('past_value', e, [B, o.Hkv, S, o.D]),
      valueInfo('seqlens_k', 'int32', [B]),
      valueInfo('total_sequence_length', 'int32', []),
    ],
    outputs: [
      valueInfo('output', e, [B, 1, o.Hq * o.D]),
      valueInfo('present_key', e, [B, o.Hkv, S, o.D]),
      valueInfo('present_value', e, [B, o.Hkv, S, o.D]),
    ],
  }, OPSETS);
}

export interface PagedAttentionModelOptions {
  Hq: number;
  Hkv: number;
  D: number;
  /** Blocks in the cache and tokens a block holds. */
  numBlocks: number;
  blockSize: number;
  /** Sequences (B) and the block table's width. */
  batch: number;
  maxBlocksPerSeq: number;
  /** New tokens of the step, all sequences together (T); one per sequence when left out (decode). */
  tokens?: number;
  scale?: number;
}

/** PagedAttention's optional inputs before attention_metadata, by schema position, all left out here. */
const PAGED_OPTIONAL = ['cos_cache', 'sin_cache', 'slot_mapping', 'head_sink', 'q_norm_weight', 'k_norm_weight', 'k_scale', 'v_scale'];

/**
 * com.microsoft PagedAttention (causal; f16 only on ORT-web's WebGPU provider): query [T, Hq·D], the new
 * tokens' key and value [T, Hkv·D], key_cache/value_cache [numBlocks, blockSize, Hkv, D],
 * cumulative_sequence_length int32 [B + 1] (token offsets of the sequences), past_seqlens int32 [B] (tokens
 * already cached), block_table int32 [B, maxBlocksPerSeq], and attention_metadata int32 [2] (a CPU input:
 * [max query length, max KV length]; without it the provider reads those bounds back from the GPU every run).
 * Only `output` [T, Hq·D] is a graph output: with no cache outputs the op scatters the new keys and values
 * into the input caches in place (with them, ORT copies both whole caches every run).
 */
export function pagedAttentionModel(o: PagedAttentionModelOptions): Uint8Array {
  const T = o.tokens ?? o.batch, cache = [o.numBlocks, o.blockSize, o.Hkv, o.D];
  return model({
    name: 'paged_attention',
    nodes: [{
      opType: 'PagedAttention', domain: 'com.microsoft',
      inputs: ['query', 'key', 'value', 'key_cache', 'value_cache', 'cumulative_sequence_length', 'past_seqlens', 'block_table',
        ...PAGED_OPTIONAL.map(() => ''), 'attention_metadata'],
      outputs: ['output'],
      attributes: [
        { name: 'num_heads', int: o.Hq },
        { name: 'kv_num_heads', int: o.Hkv },
        { name: 'scale', float: o.scale ?? 1 / Math.sqrt(o.D) },
      ],
    }],
    inputs: [
      valueInfo('query', 'float16', [T, o.Hq * o.D]),
      valueInfo('key', 'float16', [T, o.Hkv * o.D]),
      valueInfo('value', 'float16', [T, o.Hkv * o.D]),
      valueInfo('key_cache', 'float16', cache),
      valueInfo('value_cache', 'float16', cache),
      valueInfo('cumulative_sequence_length', 'int32', [o.batch + 1]),
      valueInfo('past_seqlens', 'int32', [o.batch]),
      valueInfo('block_table', 'int32', [o.batch, o.maxBlocksPerSeq]),
      valueInfo('attention_metadata', 'int32', [2]),
    ],
    outputs: [valueInfo('output', 'float16', [T, o.Hq * o.D])],
  }, OPSETS);
}
