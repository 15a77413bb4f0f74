// The linear layer's addressing for the subgroup-matrix GEMM (gemm_mma.wgsl), and its entry point: the
// rows of x (gathered, SiLU-gated) through gemm_io.wgsl, a part's weight rows, its fused epilogue.

var<private> lin_m0: u32;   // the workgroup's first output row

fn mma_x_row(r: u32) -> i32 { return x_src_row(lin_m0 + r); }
fn mma_x_load4(row: i32, c4: u32) -> vec4<f32> { return x_load4(row, c4); }
fn mma_w_word(n: u32, c: u32) -> vec4<u32> { return w[n * (params.K / EPV) + c]; }
fn mma_store(r: u32, n: u32, v: f32) {
  if (lin_m0 + r < params.M) { store_out(lin_m0 + r, n, v); }
}

@diagnostic(off, chromium.subgroup_matrix_uniformity)
@compute @workgroup_size(WG)
fn gemm_mma_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) li: u32, @builtin(subgroup_id) sg_id: u32,
                 @builtin(subgroup_invocation_id) lane: u32) {
  let lin = wid.y * nwg.x + wid.x;
  let nmt = (params.M + BM - 1u) / BM;
  let nnt = (params.N + BN - 1u) / BN;
  if (lin >= nmt * nnt) { return; }   // whole workgroups only: the barriers below stay uniform
  let m0 = (lin % nmt) * BM;
  let n0 = (lin / nmt) * BN;
  lin_m0 = m0;
  // The planner makes every subgroup SGW wide, so there are NSG of them.
  let sg = min(sg_id, NSG - 1u);
  let sr = sg / SGC;
  let sc = sg % SGC;

  // Whole tiles without a bias write their matrices straight to out (accumulating: starting from it).
  let full = m0 + BM <= params.M && n0 + BN <= params.N && (params.flags & F_BIAS) == 0u;
  let obase = (m0 + sr * TMR * SM) * params.out_stride + params.n0 + n0 + sc * TNC * SN;
  var acc: array<AMat, TMR * TNC>;
  for (var a = 0u; a < TMR * TNC; a++) { acc[a] = AMat(); }
  if (full && (params.flags & F_ACCUMULATE) != 0u) {
    for (var a = 0u; a < TMR * TNC; a++) {
      acc[a] = subgroupMatrixLoad<AMat, row_major>(&out, obase + (a / TNC) * SM * params.out_stride + (a % TNC) * SN, params.out_stride);
    }
  }

  mma_mainloop(&acc, li, sg, n0);

  if (full) {
    for (var a = 0u; a < TMR * TNC; a++) {
      subgroupMatrixStore<row_major>(&out, obase + (a / TNC) * SM * params.out_stride + (a % TNC) * SN, acc[a], params.out_stride);
    }
    return;
  }
  // Edge tiles and biases: through workgroup memory and store_out.
  mma_epilogue(&acc, sg, lane, n0);
}
