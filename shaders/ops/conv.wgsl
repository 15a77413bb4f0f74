// A 1-d convolution's input as rows of a linear layer (im2col), so that the convolution itself runs on
// the linear layer's GEMM: out[r, j] for r < rows = B·t_out, j < cols = cin·KW, with
//   b = r / t_out, t = r % t_out, c = j / KW, w = j % KW, s = t·stride + w − pad,
//   out[r, j] = act(x[b·x_bs + c·x_cs + s·x_ts]) for 0 <= s < t_in, else 0 (zero padding),
// plus addend[t·cols + j] when flags & 2 (the same for every b). act (flags & 1): exact GELU, x/2 · erfc(−x/√2), applied as the
// value is read (the previous layer's activation, fused), so KW 1 with stride 1 and no padding is a
// pointwise GELU (and add) over any strided [B, t, c] input. The same pipeline serves all of them.
// gelu is activation.wgsl's (prepended to this program).

const WG: u32 = 256u;

struct Params {
  rows: u32, cols: u32, t_out: u32, t_in: u32, kw: u32, stride: u32, pad: u32,
  x_bs: u32, x_cs: u32, x_ts: u32, flags: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> addend: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(WG)
fn im2col_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
  let i = (wid.y * nwg.x + wid.x) * WG + lid;
  if (i >= params.rows * params.cols) { return; }
  let r = i / params.cols;
  let j = i % params.cols;
  let b = r / params.t_out;
  let t = r % params.t_out;
  let c = j / params.kw;
  let w = j % params.kw;
  let s = i32(t * params.stride + w) - i32(params.pad);
  var v = 0.0;
  if (s >= 0 && u32(s) < params.t_in) {
    v = x[b * params.x_bs + c * params.x_cs + u32(s) * params.x_ts];
    if ((params.flags & 1u) != 0u) { v = gelu(v); }
  }
  if ((params.flags & 2u) != 0u) { v += addend[t * params.cols + j]; }
  out[i] = v;
}
