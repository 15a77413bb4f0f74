// RMSNorm (SPEC §7): y = x / sqrt(mean(x²) + eps) · w over each row of a strided view, in f32 as HF
// does (variance of the f32 row, then x · rsqrt(var + eps), then the weight). Rows are (token m,
// head h) at element x_off + m·x_ts + h·x_hs, n long: a hidden state (heads 1), Qwen3's q_norm/k_norm
// over each head, DeepSeek's q_a/kv_a layernorm over a slice of a wider row. The weight is f32, f16
// or bf16 (two elements per u32 word). Output goes to out (any strided layout) or, IN_PLACE, back
// into x: each thread writes only the elements it read, after the row's reduction, so that is safe.
//
// A workgroup holds WG / T rows, T threads each (T a power of two, about n/16: short rows such as
// head_dim 16 share a workgroup, a hidden row of 7168 gets 512 threads). Each thread keeps NPT
// elements of its row in registers, loaded all at once: a decode step normalizes one row, and that is
// latency-bound, so one round trip to memory per row matters more than anything else; x is read once.
// Rows longer than T·NPT go in chunks (read twice). The row sum is a tree in workgroup memory here (rms_norm);
// norm_subgroup.wgsl adds the subgroup entry point (rms_norm_sg).
//
// layer_norm: LayerNorm as torch computes it, y = (x - mean) / sqrt(var + eps) · w (+ b), the variance
// biased (over n) and taken about the mean in a second pass (not E[x²] - mean², which cancels), the
// bias (HAS_BIAS, dtype BD) f32, f16 or bf16 like the weight. Same rows, layouts and launch shape.

override WD: u32 = 0u;            // weight dtype: 0 f32, 1 f16, 2 bf16
override T: u32 = 32u;            // threads per row
override IN_PLACE: bool = false;
override HAS_BIAS: bool = false;
override BD: u32 = 0u;            // bias dtype (layer_norm)
const WG: u32 = 256u;              // threads per workgroup (specialized)
const NPT: u32 = 4u;              // elements per thread per chunk (specialized)

struct Params {
  rows: u32, heads: u32, n: u32, eps: f32,
  x_off: u32, x_ts: u32, x_hs: u32,
  o_off: u32, o_ts: u32, o_hs: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

@group(0) @binding(4) var<storage, read> bias: array<u32>;

var<workgroup> red: array<f32, WG>;

struct Row { live: bool, m: u32, h: u32, lane: u32, xb: u32 }

fn row_of(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> Row {
  let item = (wid.y * nwg.x + wid.x) * (WG / T) + lid / T;
  let m = item / params.heads;
  let h = item % params.heads;
  return Row(item < params.rows * params.heads, m, h, lid % T, params.x_off + m * params.x_ts + h * params.x_hs);
}

/** Elements lane + c·T of chunk j0 (zeros past the row's end or for a row past the last). */
fn load_chunk(r: Row, j0: u32) -> array<f32, NPT> {
  var xs: array<f32, NPT>;
  if (r.live) {
    for (var c = 0u; c < NPT; c++) {
      let j = j0 + r.lane + c * T;
      xs[c] = select(0.0, x[r.xb + min(j, params.n - 1u)], j < params.n);
    }
  }
  return xs;
}

fn weight_at(j: u32) -> f32 {
  return unpack_elem(w[word_of(j, WD)], (j & 1u) == 1u, WD);
}

fn store_chunk(r: Row, j0: u32, xs: array<f32, NPT>, inv: f32) {
  let o = params.o_off + r.m * params.o_ts + r.h * params.o_hs;
  for (var c = 0u; c < NPT; c++) {
    let j = j0 + r.lane + c * T;
    if (j < params.n) {
      let y = weight_at(j) * (xs[c] * inv);
      if (IN_PLACE) { x[r.xb + j] = y; } else { out[o + j] = y; }
    }
  }
}

struct Partial { ss: f32, xs: array<f32, NPT> }

/** This thread's share of the row's sum of squares, and its elements when the row is one chunk. */
fn sum_squares(r: Row) -> Partial {
  var p: Partial;
  p.ss = 0.0;
  for (var j0 = 0u; j0 < params.n; j0 += T * NPT) {
    p.xs = load_chunk(r, j0);
    for (var c = 0u; c < NPT; c++) { p.ss += p.xs[c] * p.xs[c]; }
  }
  return p;
}

fn write_row(r: Row, p: Partial, total: f32) {
  if (!r.live) { return; }
  let inv = inverseSqrt(total / f32(params.n) + params.eps);
  if (params.n <= T * NPT) {
    store_chunk(r, 0u, p.xs, inv);
    return;
  }
  for (var j0 = 0u; j0 < params.n; j0 += T * NPT) { store_chunk(r, j0, load_chunk(r, j0), inv); }
}

/** Sum over the T threads of a row, through workgroup memory (no subgroups needed). */
fn row_sum_tree(v: f32, lid: u32) -> f32 {
  red[lid] = v;
  workgroupBarrier();
  let lane = lid % T;
  for (var s = T / 2u; s > 0u; s >>= 1u) {
    if (lane < s) { red[lid] += red[lid + s]; }
    workgroupBarrier();
  }
  return red[lid - lane];
}

@compute @workgroup_size(WG)
fn rms_norm(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) lid: u32) {
  let r = row_of(wid, nwg, lid);
  let p = sum_squares(r);
  write_row(r, p, row_sum_tree(p.ss, lid));
}

fn bias_at(j: u32) -> f32 {
  if (!HAS_BIAS) { return 0.0; }
  return unpack_elem(bias[word_of(j, BD)], (j & 1u) == 1u, BD);
}

/** Sum of (x - mean)² over this thread's elements of chunk xs (those past the row's end left out). */
fn centered_squares(r: Row, j0: u32, xs: array<f32, NPT>, mean: f32) -> f32 {
  var s = 0.0;
  for (var c = 0u; c < NPT; c++) {
    let d = xs[c] - mean;
    if (j0 + r.lane + c * T < params.n) { s += d * d; }
  }
  return s;
}

fn store_layer(r: Row, j0: u32, xs: array<f32, NPT>, mean: f32, inv: f32) {
  let o = params.o_off + r.m * params.o_ts + r.h * params.o_hs;
  for (var c = 0u; c < NPT; c++) {
    let j = j0 + r.lane + c * T;
    if (j < params.n) {
      let y = (xs[c] - mean) * inv * weight_at(j) + bias_at(j);
      if (IN_PLACE) { x[r.xb + j] = y; } else { out[o + j] = y; }
    }
  }
}

@compute @workgroup_size(WG)
fn layer_norm(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) lid: u32) {
  let r = row_of(wid, nwg, lid);
  let one = params.n <= T * NPT;
  var xs: array<f32, NPT>;
  var s = 0.0;
  for (var j0 = 0u; j0 < params.n; j0 += T * NPT) {
    xs = load_chunk(r, j0);
    for (var c = 0u; c < NPT; c++) { s += xs[c]; }
  }
  let mean = row_sum_tree(s, lid) / f32(params.n);
  workgroupBarrier();   // every thread has read the sum before red is written again
  var v = 0.0;
  if (one) {
    v = centered_squares(r, 0u, xs, mean);
  } else {
    for (var j0 = 0u; j0 < params.n; j0 += T * NPT) { v += centered_squares(r, j0, load_chunk(r, j0), mean); }
  }
  let variance = row_sum_tree(v, lid) / f32(params.n);
  if (!r.live) { return; }
  let inv = inverseSqrt(variance + params.eps);
  if (one) {
    store_layer(r, 0u, xs, mean, inv);
    return;
  }
  for (var j0 = 0u; j0 < params.n; j0 += T * NPT) { store_layer(r, j0, load_chunk(r, j0), mean, inv); }
}
