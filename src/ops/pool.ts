// Average pooling of a square grid of feature rows (shaders/ops/pool.wgsl): a vision tower's patch
// grid pooled to fewer image tokens (Gemma 3's projector: AvgPool2d of kernel = stride over [C, G, G]).
import { check, isPosInt, shapeStr } from '../core/errors.js';
import type { Runtime } from '../core/runtime.js';
import { checkTensor, type Tensor } from '../core/tensor.js';

const WG = 256;

/**
 * x: f32 [>= G·G, C], row gy·G + gx the grid's cell (gy, gx). Returns f32 [S·S, C], S = G / window: row
 * ty·S + tx the mean of the window × window cells from (ty·window, tx·window), summed in f32 row by row,
 * then divided by window². o.out: an f32 tensor of at least S·S·C elements to write instead.
 */
export function avgPoolGrid(rt: Runtime, x: Tensor, o: { grid: number; window: number; out?: Tensor }): Tensor {
  const op = 'avgPoolGrid';
  rt.assertAlive(op);
  checkTensor(x, op, 'x');
  check(x.dtype === 'f32' && x.shape.length === 2, op, 'x', 'an f32 tensor [G·G, C]', `${x.dtype} ${shapeStr(x.shape)}`);
  check(typeof o === 'object' && o !== null, op, 'o', '{ grid, window, out? }', o);
  const G = o.grid, k = o.window, C = x.shape[1];
  check(isPosInt(G), op, 'o.grid', 'a positive integer (cells a side)', G);
  check(isPosInt(k) && G % k === 0, op, 'o.window', `a positive integer dividing o.grid=${G}`, k);
  check(x.shape[0] >= G * G, op, 'x', `at least grid² = ${G * G} rows`, shapeStr(x.shape));
  const S = G / k, n = S * S * C;
  let out: Tensor;
  if (o.out !== undefined) {
    checkTensor(o.out, op, 'o.out');
    check(o.out.dtype === 'f32' && o.out.numel >= n, op, 'o.out', `an f32 tensor of at least ${n} elements ([${S * S}, ${C}])`, `${o.out.dtype} ${shapeStr(o.out.shape)}`);
    check(o.out.buffer !== x.buffer, op, 'o.out', 'a tensor other than x', 'x itself');
    out = o.out;
  } else {
    out = rt.emptyTensor([S * S, C], 'f32');
  }
  rt.dispatch(rt.kernel('ops_pool', 'avg_pool_main'), { x, out }, { G, C, KW: k }, Math.ceil(n / WG));
  return out;
}
