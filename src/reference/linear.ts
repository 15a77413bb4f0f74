// The linear layer (nn.Linear with HF's weight layout W [N, K], out × in) and its fused prologues and
// epilogues, in float64 over the already-rounded inputs: what ops.linear computes.
//   out[m, n] = init[m, n] + sum_k in(m, k) · W[n, k] + bias[n]
//   in(m, ·)  = row src(m) of x, src(m) = gatherRows[m] (a zero row when outside x) or m;
//               with act 'silu_mul' x rows are [gate | up] (2K wide) and in = silu(gate) · up,
//               silu(g) = g / (1 + exp(-g)).
import { checkInt, checkMinLen } from './util.js';

export interface LinearRefOptions {
  /** f32 [N], added to every output row. */
  bias?: ArrayLike<number> | null;
  /** The output's previous contents ([>= M, N], row-major): the result is added to them (h += x·Wᵀ). */
  accumulateInto?: ArrayLike<number> | null;
  /** Row m reads x row gatherRows[m]; indices outside x read a zero row. */
  gatherRows?: ArrayLike<number> | null;
  act?: 'silu_mul' | null;
  /** 'f32': a plain f32 implementation instead (every product and running sum rounded to f32, sums in
   *  k order): the baseline of SPEC §6's "twice the error of a plain f32 implementation" rule. */
  precision?: 'f64' | 'f32';
}

function silu(g: number): number {
  return g / (1 + Math.exp(-g));
}

/** x [rows, K] (or [rows, 2K] with act 'silu_mul'), w [N, K] -> [M, N] (Float64Array; Float32Array-valued
 *  for precision 'f32'). */
export function linearRef(x: ArrayLike<number>, w: ArrayLike<number>, M: number, N: number, K: number,
                          o: LinearRefOptions = {}): Float64Array {
  checkInt(M, 'M', 1);
  checkInt(N, 'N', 1);
  checkInt(K, 'K', 1);
  const width = o.act === 'silu_mul' ? 2 * K : K;
  if (x.length % width !== 0) throw new Error(`x: expected a whole number of rows of ${width}, got ${x.length} elements`);
  const xRows = x.length / width;
  checkMinLen(w, N * K, 'w');
  if (o.bias) checkMinLen(o.bias, N, 'bias');
  if (o.accumulateInto) checkMinLen(o.accumulateInto, M * N, 'accumulateInto');
  if (o.gatherRows) checkMinLen(o.gatherRows, M, 'gatherRows');
  else if (xRows < M) throw new Error(`x: expected at least M=${M} rows, got ${xRows}`);
  const f32 = o.precision === 'f32';
  const r = f32 ? Math.fround : (v: number) => v;
  const out = new Float64Array(M * N);
  const inRow = new Float64Array(K);
  for (let m = 0; m < M; m++) {
    const src = o.gatherRows ? o.gatherRows[m] : m;
    const inside = Number.isInteger(src) && src >= 0 && src < xRows;
    for (let k = 0; k < K; k++) {
      if (!inside) { inRow[k] = 0; continue; }
      const a = x[src * width + k];
      inRow[k] = o.act === 'silu_mul' ? r(r(silu(a)) * x[src * width + K + k]) : a;
    }
    for (let n = 0; n < N; n++) {
      let s = 0;
      for (let k = 0; k < K; k++) s = r(s + r(inRow[k] * w[n * K + k]));
      if (o.bias) s = r(s + o.bias[n]);
      if (o.accumulateInto) s = r(o.accumulateInto[m * N + n] + s);
      out[m * N + n] = s;
    }
  }
  return out;
}
