// The input of a linear layer whose weight's columns are permuted (ops.linear with LinearWeight.perm:
// GPTQ's desc_act checkpoints, their columns sorted by group so each group is contiguous along K):
// xg[m, j] = in(m, perm[j]) for m < M, j < K, where in(m, ·) is what gemm_io.wgsl's prologues would
// have read: row m of x, or row gather[m] (a zero row outside [0, x_rows)), or silu(gate) · up of that
// row's [gate | up] halves, or RMSNorm(x row) · nw (the norm's weight indexed by original columns).
// The product then runs on xg without any prologue. One workgroup a row; WG threads stride over K.

const WG: u32 = 256u;

const G_GATHER: u32 = 1u;
const G_SILU_MUL: u32 = 2u;
const G_RMS: u32 = 4u;

struct Params {
  M: u32,
  K: u32,
  x_stride: u32,   // f32 elements per x row (K, or 2K with silu_mul)
  x_rows: u32,
  flags: u32,
  eps: f32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> perm: array<i32>;
@group(0) @binding(3) var<storage, read> gather: array<i32>;
@group(0) @binding(4) var<storage, read> nw: array<f32>;
@group(0) @binding(5) var<storage, read_write> xg: array<f32>;

var<workgroup> red: array<f32, WG>;

fn silu1(g: f32) -> f32 {
  let e = exp(-abs(g));
  return g * select(e / (1.0 + e), 1.0 / (1.0 + e), g >= 0.0);
}

@compute @workgroup_size(WG)
fn gather_cols_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                    @builtin(local_invocation_index) li: u32) {
  let m = wid.y * nwg.x + wid.x;
  if (m >= params.M) { return; }   // uniform across the workgroup
  var row = i32(m);
  if ((params.flags & G_GATHER) != 0u) {
    let g = gather[m];
    row = select(g, -1, g < 0 || u32(max(g, 0)) >= params.x_rows);
  }
  let base = u32(max(row, 0)) * params.x_stride;
  var inv = 1.0;
  if ((params.flags & G_RMS) != 0u) {
    var ss = 0.0;
    if (row >= 0) {
      for (var k = li; k < params.K; k += WG) { let v = x[base + k]; ss += v * v; }
    }
    red[li] = ss;
    workgroupBarrier();
    for (var h = WG / 2u; h > 0u; h >>= 1u) {
      if (li < h) { red[li] += red[li + h]; }
      workgroupBarrier();
    }
    inv = inverseSqrt(red[0] / f32(params.K) + params.eps);
  }
  let o = m * params.K;
  for (var j = li; j < params.K; j += WG) {
    var v = 0.0;
    if (row >= 0) {
      let k = u32(perm[j]);
      v = x[base + k];
      if ((params.flags & G_SILU_MUL) != 0u) { v = silu1(v) * x[base + params.K + k]; }
      if ((params.flags & G_RMS) != 0u) { v = v * inv * nw[k]; }
    }
    xg[o + j] = v;
  }
}
