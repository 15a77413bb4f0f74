// The linear layer's addressing for the subgroup-matrix GEMM (gemm_mma.wgsl, whose gemm_mma_main it feeds):
// the rows of x (gathered, SiLU-gated) through gemm_io.wgsl, a part's weight rows, its fused epilogue.
// Split-K (params.k_split > 1, decode-sized steps over few columns): workgroup lin works on split
// lin / tiles of K, writing plain partial sums to rows split·M.. of `out`, a workspace that
// gemm_splitk.wgsl sums into the output with the epilogue (the caller clears bias and accumulate here).

var<private> lin_m0: u32;   // the workgroup's first output row
var<private> lin_r0: u32;   // its split's first row in the workspace (0 without split-K)

fn mma_x_row(r: u32) -> i32 { return x_src_row(lin_m0 + r); }
fn mma_x_load4(row: i32, c4: u32) -> vec4<f32> { return x_load4(row, c4); }
fn mma_w_word(n: u32, c: u32) -> vec4<u32> {
  return w[n * (params.K / EPV) + c];
}
// Quantized weights come a unit at a time (gemm_mma.wgsl's stage_load), rounded to f16 (W_DTYPE 1).
fn mma_w_unit(n: u32, u: u32) -> array<vec4<u32>, 4> { return q_f16_unit(n, u); }
fn mma_store(r: u32, n: u32, v: f32) {
  if (lin_m0 + r < params.M) { store_out(lin_r0 + lin_m0 + r, n, v); }
}

fn mma_splits() -> u32 { return max(params.k_split, 1u); }

fn mma_k_range(lin: u32, ntiles: u32) -> vec2<u32> {
  let tiles = ((params.M + BM - 1u) / BM) * ((params.N + BN - 1u) / BN);
  let per = (ntiles + mma_splits() - 1u) / mma_splits();
  let s = lin / tiles;
  return vec2<u32>(min(s * per, ntiles), min(s * per + per, ntiles));
}

// Workgroup lin's tile: M tiles fastest, then N tiles, then splits. Whole tiles without a bias go straight
// to out (accumulating: starting from it); edge tiles and biases through the epilogue.
fn mma_tile(lin: u32, li: u32) -> vec3<u32> {
  let nmt = (params.M + BM - 1u) / BM;
  let nnt = (params.N + BN - 1u) / BN;
  if (lin >= nmt * nnt * mma_splits()) { return vec3<u32>(0u); }
  let t = lin % (nmt * nnt);
  let m0 = (t % nmt) * BM;   // (reading lin_m0 back would make the mode non-uniform to WGSL)
  lin_m0 = m0;
  lin_r0 = (lin / (nmt * nnt)) * params.M;
  let n0 = (t / nmt) * BN;
  let full = m0 + BM <= params.M && n0 + BN <= params.N && (params.flags & F_BIAS) == 0u;
  return vec3<u32>(1u, n0, select(0u, select(1u, 2u, (params.flags & F_ACCUMULATE) != 0u), full));
}
fn mma_direct_base(sr: u32, sc: u32, n0: u32) -> u32 {
  return (lin_r0 + lin_m0 + sr * TMR * SM) * params.out_stride + params.n0 + n0 + sc * TNC * SN;
}
fn mma_direct_stride() -> u32 { return params.out_stride; }
