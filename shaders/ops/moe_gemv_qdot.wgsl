// The grouped expert product for few rows per expert (moe_gemv.wgsl) over quantized experts of the
// types with a dot path (Q8_0, Q4_0, Q4_K, Q6_K: ops/quant.wgsl's q_dot, their files' q_raw, q_unit_q
// and q_xscale; gemv_qdot.wgsl says why). moe_gemv.wgsl decodes such experts four values at a time
// through q_load4, reading the block's scales again for every four; here a lane's unit is 32 values of
// a row, as in the dense GEMV: the loads of its 4 weight rows first, then the tile rows' x values (scaled
// as the quants lie, with their sum), then a dot per weight row and tile row. moe_gemv.wgsl (the tile, the
// lanes, the reduction) calls it as its moe_partial.

fn moe_partial(tile: vec3<u32>, el: u32, n0: u32, lane: u32, rows: array<u32, MT>) -> array<vec4<f32>, MT> {
  let units = params.K / 32u;
  var acc: array<vec4<f32>, MT>;
  for (var u = lane; u < units; u += KT) {
    // Rows past N read the expert's last row; their sums are never stored.
    var raw: array<QRaw, 4>;
    for (var r = 0u; r < 4u; r++) { raw[r] = q_raw(el * params.N + min(n0 + r, params.N - 1u), u); }
    var xs: array<QX, MT>;
    for (var m = 0u; m < MT; m++) {
      if (m < tile.z) {
        var v: array<vec4<f32>, 8>;
        for (var j = 0u; j < 8u; j++) { v[j] = x_load4(rows[m], 8u * u + j); }
        xs[m] = q_xunit(v, u);
      }
    }
    for (var r = 0u; r < 4u; r++) {
      let wq = q_unit_q(raw[r], u);
      let hot = vec4<u32>(r) == vec4<u32>(0u, 1u, 2u, 3u);
      for (var m = 0u; m < MT; m++) {
        if (m < tile.z) { acc[m] += select(vec4<f32>(0.0), vec4<f32>(q_dot(wq, xs[m])), hot); }
      }
    }
  }
  return acc;
}
