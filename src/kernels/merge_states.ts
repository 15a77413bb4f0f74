// Encoding of shaders/merge_states.wgsl: two states from two buffers, or n stacked partitions.
import type { Engine, Bindable } from '../engine.js';
import type { Tensor } from '../tensor.js';
import { DTYPE_CODE } from './sdpa_naive.js';

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
export function encodeMerge(engine: Engine, m: MergeInputs, out: Tensor, lse: Tensor): void {
  const kernel = engine.kernel('merge_states', 'merge_main', {
    overrides: { IN_DTYPE: DTYPE_CODE[m.inDtype], OUT_DTYPE: DTYPE_CODE[out.dtype], WG },
  });
  const n = m.T * m.H * m.Dv;
  const merged = ((m.rows ?? m.T) - (m.t0 ?? 0)) * m.H * m.Dv;
  const outWords = out.dtype === 'f32' ? merged : Math.ceil(merged / 2);
  const two = m.oB !== undefined;
  engine.dispatch(kernel, {
    o_a: m.oA, lse_a: m.lseA, o_b: m.oB ?? engine.dummy, lse_b: m.lseB ?? engine.dummy,
    sinks: m.sinks ? engine.smallF32(m.sinks, 'sinks') : engine.dummy, out, lse_out: lse,
  }, {
    T: m.T, H: m.H, Dv: m.Dv, n_parts: m.nParts, two_buffers: two ? 1 : 0,
    part_stride: n, lse_stride: m.H * m.T, has_sinks: m.sinks ? 1 : 0, out_words: outWords, lse_base: m.lseBase ?? 0, t0: m.t0 ?? 0,
  }, Math.ceil(outWords / WG));
}
