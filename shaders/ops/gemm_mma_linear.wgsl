// The linear layer's addressing for the subgroup-matrix GEMM (gemm_mma.wgsl, whose gemm_mma_main it feeds):
// the rows of x (gathered, SiLU-gated) through gemm_io.wgsl, a part's weight rows, its fused epilogue.

var<private> lin_m0: u32;   // the workgroup's first output row

fn mma_x_row(r: u32) -> i32 { return x_src_row(lin_m0 + r); }
fn mma_x_load4(row: i32, c4: u32) -> vec4<f32> { return x_load4(row, c4); }
fn mma_w_word(n: u32, c: u32) -> vec4<u32> { return w[n * (params.K / EPV) + c]; }
fn mma_store(r: u32, n: u32, v: f32) {
  if (lin_m0 + r < params.M) { store_out(lin_m0 + r, n, v); }
}

// Workgroup lin's tile: M tiles fastest. Whole tiles without a bias go straight to out (accumulating:
// starting from it); edge tiles and biases through the epilogue.
fn mma_tile(lin: u32, li: u32) -> vec3<u32> {
  let nmt = (params.M + BM - 1u) / BM;
  let nnt = (params.N + BN - 1u) / BN;
  if (lin >= nmt * nnt) { return vec3<u32>(0u); }
  let m0 = (lin % nmt) * BM;   // (reading lin_m0 back would make the mode non-uniform to WGSL)
  lin_m0 = m0;
  let n0 = (lin / nmt) * BN;
  let full = m0 + BM <= params.M && n0 + BN <= params.N && (params.flags & F_BIAS) == 0u;
  return vec3<u32>(1u, n0, select(0u, select(1u, 2u, (params.flags & F_ACCUMULATE) != 0u), full));
}
fn mma_direct_base(sr: u32, sc: u32, n0: u32) -> u32 {
  return (lin_m0 + sr * TMR * SM) * params.out_stride + params.n0 + n0 + sc * TNC * SN;
}
fn mma_direct_stride() -> u32 { return params.out_stride; }
