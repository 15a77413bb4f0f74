// Split-K's second pass (ops.linear on the subgroup-matrix GEMM, gemm_mma_linear.wgsl): output (m, n) is
// the sum of the splits' partials, rows s·M + m of the workspace (N wide), through gemm_io.wgsl's
// epilogue (bias, accumulation into the residual stream) into out. One thread an output.

const WG: u32 = 256u;

@group(1) @binding(3) var<storage, read> ws: array<f32>;

@compute @workgroup_size(WG)
fn splitk_main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = gid.y * nwg.x * WG + gid.x;
  if (i >= params.M * params.N) { return; }
  let m = i / params.N;
  let n = i % params.N;
  var v = 0.0;
  for (var s = 0u; s < params.k_split; s++) { v += ws[(s * params.M + m) * params.N + n]; }
  store_out(m, n, v);
}
