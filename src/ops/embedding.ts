// Embedding lookup: validation, then shaders/ops/embedding.wgsl once per part of the table.
import { check, fmt, isPosInt, shapeStr } from '../core/errors.js';
import { DTYPE_CODE } from '../core/dtype.js';
import type { Runtime } from '../core/runtime.js';
import { checkTensor, Tensor } from '../core/tensor.js';
import { QUANT_FORMATS, isQuantType } from '../core/quant.js';
import { quantPackedBytes, quantPlaneWord } from './quant.js';

/**
 * A [N, K] matrix split by rows over buffers (a vocabulary too large for one storage binding): part p
 * holds rows row0 .. row0 + rows − 1 as a [rows, K] tensor. The GEMM module's LinearWeight has this
 * shape, so an embedding tied to lm_head reads the very same parts.
 */
export interface RowPartedTable {
  readonly parts: readonly { readonly tensor: Tensor; readonly row0: number; readonly rows: number }[];
  readonly N: number;
  readonly K: number;
  /** f32, f16, bf16, or a quantized type (the parts then hold ggml's blocks as u32 words: ops/quant.ts). */
  readonly dtype: string;
}

export interface EmbeddingOptions {
  /** Tokens looked up (default: all ids). */
  rows?: number;
  /** An f32 tensor of at least [rows, H] (default: a new [rows, H] one). */
  out?: Tensor;
}

/** Host i32 data in a scratch buffer for one submission (ids, positions). */
export function hostI32(rt: Runtime, data: Int32Array, label: string): GPUBuffer {
  const b = rt.scratch(Math.max(16, data.byteLength), label);
  rt.device.queue.writeBuffer(b, 0, data.buffer, data.byteOffset, data.byteLength);
  return b;
}

/**
 * out[r, :] = table[ids[r], :] as f32, for r < rows. table: [V, H] f32/f16/bf16, or split by rows.
 * An id outside [0, V) gives a row of zeros on the GPU (nothing is read outside a buffer); host ids
 * (an Int32Array) are checked here and such an id is an error.
 */
export function embedding(rt: Runtime, ids: Tensor | Int32Array, table: Tensor | RowPartedTable, o: EmbeddingOptions = {}): Tensor {
  const op = 'embedding';
  rt.assertAlive(op);
  check(typeof o === 'object' && o !== null, op, 'o', 'an options object', o);
  let V: number, H: number, dtype: string;
  let parts: { tensor: Tensor; row0: number; rows: number }[];
  if (table instanceof Tensor) {
    checkTensor(table, op, 'table');
    check(table.shape.length === 2, op, 'table', 'shape [V, H]', shapeStr(table.shape));
    [V, H] = table.shape;
    dtype = table.dtype;
    parts = [{ tensor: table, row0: 0, rows: V }];
  } else {
    check(typeof table === 'object' && table !== null && Array.isArray(table.parts), op, 'table', 'a Tensor [V, H] or { parts, N, K, dtype }', table);
    check(isPosInt(table.N), op, 'table.N', 'a positive integer', table.N);
    check(isPosInt(table.K), op, 'table.K', 'a positive integer', table.K);
    [V, H, dtype] = [table.N, table.K, table.dtype];
    // A weight whose columns are stored permuted (GPTQ desc_act) would give its rows in stored order.
    const perm = (table as { perm?: unknown }).perm;
    check(perm === undefined || perm === null, op, 'table.perm', 'none (an embedding table\'s columns in order; a desc_act weight is a linear layer\'s)', 'a column permutation');
    check(table.parts.length >= 1, op, 'table.parts', 'at least one part', 'none');
    parts = [...table.parts].sort((a, b) => a.row0 - b.row0);
    let next = 0;
    parts.forEach((p, i) => {
      checkTensor(p.tensor, op, `table.parts[${i}].tensor`);
      check(p.row0 === next, op, `table.parts[${i}].row0`, `${next} (parts cover rows 0..N-1 in order, without gaps)`, p.row0);
      check(isPosInt(p.rows), op, `table.parts[${i}].rows`, 'a positive integer', p.rows);
      if (isQuantType(dtype)) {
        check(p.tensor.dtype === 'u32', op, `table.parts[${i}].tensor.dtype`, `'u32' (the words of ${dtype} blocks)`, fmt(p.tensor.dtype));
        check(H % QUANT_FORMATS[dtype].blockElems === 0 && p.tensor.byteLength >= quantPackedBytes(dtype, p.rows, H), op, `table.parts[${i}].tensor`,
          `${p.rows} rows of ${H} ${dtype} values (H a multiple of ${QUANT_FORMATS[dtype].blockElems})`, `${p.tensor.byteLength} bytes`);
      } else {
        check(p.tensor.dtype === dtype, op, `table.parts[${i}].tensor.dtype`, `'${dtype}' (table.dtype)`, fmt(p.tensor.dtype));
        check(p.tensor.numel >= p.rows * H, op, `table.parts[${i}].tensor`, `at least [${p.rows}, ${H}] elements`, shapeStr(p.tensor.shape));
      }
      next += p.rows;
    });
    check(next === V, op, 'table.parts', `rows adding up to N=${V}`, `${next}`);
  }
  check(['f32', 'f16', 'bf16'].includes(dtype) || (isQuantType(dtype) && !(table instanceof Tensor)), op, 'table.dtype',
    "'f32', 'f16', 'bf16' or (a table in parts) a quantized type", fmt(dtype));

  const nIds = ids instanceof Int32Array ? ids.length : (checkTensor(ids, op, 'ids'), ids.numel);
  if (!(ids instanceof Int32Array)) check(ids.dtype === 'i32', op, 'ids.dtype', "'i32'", fmt(ids.dtype));
  check(nIds >= 1, op, 'ids', 'at least one id', 'none');
  const rows = o.rows ?? nIds;
  check(isPosInt(rows) && rows <= nIds, op, 'o.rows', `a positive integer <= ${nIds} (the number of ids)`, rows);
  if (ids instanceof Int32Array) {
    for (let r = 0; r < rows; r++) check(ids[r] >= 0 && ids[r] < V, op, `ids[${r}]`, `a token id in [0, ${V})`, ids[r]);
  }
  let out: Tensor;
  if (o.out !== undefined) {
    checkTensor(o.out, op, 'o.out');
    check(o.out.dtype === 'f32', op, 'o.out.dtype', "'f32'", fmt(o.out.dtype));
    check(o.out.numel >= rows * H, op, 'o.out', `at least ${rows * H} elements ([rows=${rows}, H=${H}])`, shapeStr(o.out.shape));
    out = o.out;
  } else {
    out = rt.emptyTensor([rows, H], 'f32');
  }

  const idBuf = ids instanceof Int32Array ? hostI32(rt, ids.subarray(0, rows), 'embedding ids') : ids;
  const quant = isQuantType(dtype) ? dtype : null;
  parts.forEach((p, i) => {
    if (quant) {
      const k = rt.kernel(`ops_embedding_q.${quant.toLowerCase()}`, 'embedding_q_main', { overrides: { ZERO_OOB: i === 0 } });
      rt.dispatch(k, { ids: idBuf, w: p.tensor, out }, { rows, H, V, row0: p.row0, part_rows: p.rows, K: H, q_plane: quantPlaneWord(quant, p.rows, H) },
        Math.ceil((rows * H) / 4 / 256));
      return;
    }
    const k = rt.kernel('ops_embedding', 'embedding_main', { overrides: { TD: DTYPE_CODE[dtype as 'f32'], ZERO_OOB: i === 0 } });
    rt.dispatch(k, { ids: idBuf, table: p.tensor, out }, { rows, H, V, row0: p.row0, part_rows: p.rows }, Math.ceil((rows * H) / 256));
  });
  return out;
}
