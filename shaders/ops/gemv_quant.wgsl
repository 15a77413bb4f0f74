// The GEMV's partial sums for quantized weights (ops/quant.wgsl and one type's decoder; the plan's EPV
// is 32: a lane's unit of work is 32 values of a row, q_unit32). Lane l of a group works on units l,
// l + KT, ... of its R rows: it reads the unit's 32 values of each x row once (8 vec4s a row, staged in
// workgroup memory by gemv_xstage.wgsl), then decodes each row's unit and meets it with them. As the 16-bit GEMV, every
// weight is read once a step for the workgroup's MT rows of x. A row's sums go into lane r of the
// accumulators through a select on a one-hot mask, not an index (an accumulator indexed by a loop
// variable went to local memory: gemv.wgsl) and not a product with 0/1 (a row past N decodes whatever
// bytes the bounds give, and NaN × 0 would spread into the real rows' sums), and the row loop stays a loop: the decoder is compiled once, not four
// times (software drivers take minutes over the written-out form).

fn gemv_partial(t: GemvTile, g: u32, lane: u32, sc: array<f32, MT>) -> array<vec4<f32>, MT> {
  let units = params.K / 32u;
  let rows = gemv_x_rows(t);
  let n0 = gemv_row(t.rb, g, 0u);
  var acc: array<vec4<f32>, MT>;
  var u = lane;
  for (var c0 = 0u; c0 < units; c0 += CU) {
    gemv_stage(rows, sc, g * KT + lane, c0, min(CU, units - c0));
    for (; u < min(c0 + CU, units); u += KT) {
      var xs: array<array<vec4<f32>, 8>, MT>;
      for (var i = 0u; i < MT; i++) { xs[i] = gemv_staged(i, u, c0); }
      for (var r = 0u; r < R; r++) {
        // Rows past N read what the bounds give; their sums are never stored.
        let wv = q_unit32(n0 + r * NGRP, u);
        let hot = vec4<u32>(r) == vec4<u32>(0u, 1u, 2u, 3u);
        for (var i = 0u; i < MT; i++) {
          var s = 0.0;
          for (var j = 0u; j < 8u; j++) { s += dot(wv[j], xs[i][j]); }
          acc[i] += select(vec4<f32>(0.0), vec4<f32>(s), hot);
        }
      }
    }
  }
  return acc;
}
