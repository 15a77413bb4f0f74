// SPEC §6's correctness contract as code: tolerances by storage dtype and the elementwise comparison
// against a float64 reference, shared by the tests, the default workload, the benchmark and the demo.

export interface Tolerance { readonly atol: number; readonly rtol: number }

export const TOLERANCES: Readonly<Record<'f32' | 'f16' | 'bf16' | 'fp8e4m3', Tolerance>> = Object.freeze({
  f32: { atol: 5e-6, rtol: 5e-5 },
  f16: { atol: 5e-3, rtol: 5e-2 },
  bf16: { atol: 5e-3, rtol: 5e-2 },
  fp8e4m3: { atol: 2e-2, rtol: 1e-1 },
});

export interface Comparison {
  /** Largest |out - ref| / (atol + rtol·|ref|): the check passes when ≤ 1. */
  readonly worst: number;
  readonly worstIndex: number;
  readonly checked: number;
  /** First element that is NaN/Inf where the reference is finite (or the reverse), -1 if none. */
  readonly badIndex: number;
  readonly pass: boolean;
}

/**
 * Compares `actual` with the float64 `expected`, elementwise |out - ref| ≤ atol + rtol·|ref|. NaN and
 * Inf never pass, except an infinity the reference holds too (the -inf lse of an empty row).
 * `skip(i)` leaves out elements the reference does not define (padding rows).
 */
export function compareToReference(actual: ArrayLike<number>, expected: ArrayLike<number>, tol: Tolerance,
                                   skip?: (i: number) => boolean): Comparison {
  if (actual.length !== expected.length) throw new Error(`compareToReference: ${actual.length} values, reference has ${expected.length}`);
  let worst = 0, worstIndex = -1, checked = 0, badIndex = -1;
  for (let i = 0; i < actual.length; i++) {
    if (skip?.(i)) continue;
    checked++;
    const a = actual[i], e = expected[i];
    if (!Number.isFinite(e) || !Number.isFinite(a)) {
      if (a !== e && badIndex < 0) badIndex = i;
      continue;
    }
    const ratio = Math.abs(a - e) / (tol.atol + tol.rtol * Math.abs(e));
    if (ratio > worst) { worst = ratio; worstIndex = i; }
  }
  return { worst, worstIndex, checked, badIndex, pass: badIndex < 0 && worst <= 1 && checked > 0 };
}
