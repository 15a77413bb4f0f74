// mergeAttnStates (SPEC §4): validation, then the merge kernel.
import { check, fmt, shapeStr } from '../core/errors.js';
import { DTYPE_CODE } from '../core/dtype.js';
import type { Bindable, Runtime } from '../core/runtime.js';
import { checkTensor, type Tensor } from '../core/tensor.js';

export function mergeAttnStates(engine: Runtime, oA: Tensor, lseA: Tensor, oB: Tensor, lseB: Tensor): { out: Tensor; lse: Tensor } {
  const op = 'mergeAttnStates';
  engine.assertAlive(op);
  checkTensor(oA, op, 'oA');
  checkTensor(lseA, op, 'lseA');
  checkTensor(oB, op, 'oB');
  checkTensor(lseB, op, 'lseB');
  check(oA.shape.length === 3, op, 'oA', 'shape [T, H, Dv]', shapeStr(oA.shape));
  const [T, H, Dv] = oA.shape;
  check(['f32', 'f16', 'bf16'].includes(oA.dtype), op, 'oA.dtype', "'f32', 'f16' or 'bf16'", fmt(oA.dtype));
  check(oB.shape.length === 3 && oB.shape[0] === T && oB.shape[1] === H && oB.shape[2] === Dv, op, 'oB',
    `shape [T=${T}, H=${H}, Dv=${Dv}] (that of oA)`, shapeStr(oB.shape));
  check(oB.dtype === oA.dtype, op, 'oB.dtype', `'${oA.dtype}' (the dtype of oA)`, fmt(oB.dtype));
  for (const [name, l] of [['lseA', lseA], ['lseB', lseB]] as const) {
    check(l.shape.length === 2 && l.shape[0] === H && l.shape[1] === T, op, name, `shape [H=${H}, T=${T}]`, shapeStr(l.shape));
    check(l.dtype === 'f32', op, `${name}.dtype`, "'f32'", fmt(l.dtype));
  }
  const out = engine.emptyTensor([T, H, Dv], oA.dtype);
  const lse = engine.emptyTensor([H, T], 'f32');
  encodeMerge(engine, { T, H, Dv, inDtype: oA.dtype as 'f32' | 'f16' | 'bf16', oA, lseA, oB, lseB, nParts: 2 }, out, lse);
  return { out, lse };
}

const WG = 64;

export interface MergeInputs {
  T: number; H: number; Dv: number;
  /** dtype of the partial outputs. */
  inDtype: 'f32' | 'f16' | 'bf16';
  /** Two states in separate buffers, or nParts stacked ([n][T][H][Dv] and [n][H][T]) in oA/lseA. */
  oA: Bindable; lseA: Bindable; oB?: Bindable; lseB?: Bindable; nParts: number;
  /** Merge only tokens [t0, rows) (default [0, T)): the real tokens of a padded batch, or one sequence's. */
  rows?: number;
  t0?: number;
  /** Word offset of the stacked lse in lseA (0 unless o and lse share one workspace). */
  lseBase?: number;
  sinks?: Float32Array | null;
}

/** Records the merge into `out` ([T,H,Dv]) and `lse` ([H,T], f32). */
export function encodeMerge(engine: Runtime, m: MergeInputs, out: Tensor, lse: Tensor): void {
  const kernel = engine.kernel('merge', 'merge_main', {
    overrides: { IN_DTYPE: DTYPE_CODE[m.inDtype], OUT_DTYPE: DTYPE_CODE[out.dtype], WG },
  });
  const n = m.T * m.H * m.Dv;
  const merged = ((m.rows ?? m.T) - (m.t0 ?? 0)) * m.H * m.Dv;
  const outWords = out.dtype === 'f32' ? merged : Math.ceil(merged / 2);
  const two = m.oB !== undefined;
  engine.dispatch(kernel, {
    o_a: m.oA, lse_a: m.lseA, o_b: m.oB ?? engine.dummy, lse_b: m.lseB ?? engine.dummy,
    sinks: m.sinks ? engine.smallF32(m.sinks, 'sinks') : engine.dummy, tok_np: engine.dummy, out, lse_out: lse,
  }, {
    T: m.T, H: m.H, Dv: m.Dv, n_parts: m.nParts, two_buffers: two ? 1 : 0,
    part_stride: n, lse_stride: m.H * m.T, has_sinks: m.sinks ? 1 : 0, out_words: outWords, lse_base: m.lseBase ?? 0, t0: m.t0 ?? 0, tok_parts: 0,
  }, Math.ceil(outWords / WG));
}
