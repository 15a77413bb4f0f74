// The GEMV's partial sums for the quantized types with a dot path (Q8_0, Q4_0, Q4_K, Q6_K: the types
// of llama.cpp's common mixes; ops/quant/<type>.wgsl gives q_xscale and q_unit_q). The other types
// take gemv_quant.wgsl, which decodes each value to f32 with its scales.
//
// Why: on an H200 the decode-then-dot kernel ran every type at about 2 G values/ms whatever its bytes
// (Q8_0 2.07, Q4_0 1.13, Q4_K 0.81 TB/s at the lm_head shape, bf16 4.07): an instruction-bound loop,
// whose per-value integer-to-float conversion issues at an eighth of the FMA rate on NVIDIA parts.
// Here no value is converted and no value is scaled:
//   - A quant q sits in a float's mantissa: bits (0x4B000000 | q·2^s) are the float 2^23 + q·2^s, so
//     one AND-OR (masking q where it lies in the word, no shift) and one subtraction give q·2^s − z·2^s
//     exactly, z the format's zero point (8 for Q4_0, 128 for Q8_0 after flipping the sign bits, 32 for
//     Q6_K; 0 for Q4_K, whose min is a separate term).
//   - The 2^s of a quant's place is undone on the x side: the lane's 32 x values are scaled by 2^-s
//     once (q_xscale) and serve all R weight rows, so each value costs the mask, the subtraction and
//     one FMA.
//   - A unit's sum is then c·Σ(q·x) − o·Σx: the block scale (and Q4_K's sub-block scale) once a unit,
//     Q4_K's min through Σx, which the lane computes once a unit for all R rows.
// The unit's quants are decoded once and meet every x row of the workgroup (MT of them).

// x comes staged in workgroup memory (gemv_xstage.wgsl). The R rows' loads of a lane's next unit are
// issued before its current unit is summed (two units of weights in flight a lane), the first before
// the staging.
//
// XR 1 (a plan of MT > 1 rows under tuning.quantGemvRowsEach): the unit meets the x rows one at a time,
// each row's 32 scaled values made, met by the R weight units (decoded again for each row) and dropped,
// so a lane holds one row's x instead of MT (at MT 4 the 132 registers of four rows' x spilled on an
// H200: 4 rows cost 4.1 times one). Each row's sums take the same operations in the same order either
// way, so a row's result does not depend on the rows beside it (speculative verification relies on it).
const XR: u32 = 0u;

fn gemv_raw_rows(n0: u32, u: u32) -> array<QRaw, R> {
  var raw: array<QRaw, R>;
  for (var r = 0u; r < R; r++) { raw[r] = q_raw(n0 + r * NGRP, u); }
  return raw;
}

fn gemv_partial(t: GemvTile, g: u32, lane: u32, sc: array<f32, MT>) -> array<vec4<f32>, MT> {
  let units = params.K / 32u;
  let rows = gemv_x_rows(t);
  let n0 = gemv_row(t.rb, g, 0u);
  let li = g * KT + lane;
  var acc: array<vec4<f32>, MT>;
  var u = lane;
  var raw = gemv_raw_rows(n0, min(u, units - 1u));
  for (var c0 = 0u; c0 < units; c0 += CU) {
    let cn = min(CU, units - c0);
    gemv_stage(rows, sc, li, c0, cn);
    for (; u < c0 + cn; u += KT) {
      let next = gemv_raw_rows(n0, min(u + KT, units - 1u));
      if (XR == 1u) {
        for (var i = 0u; i < MT; i++) {
          let xi = q_xunit(gemv_staged(i, u, c0), u);
          for (var r = 0u; r < R; r++) {
            let hot = vec4<u32>(r) == vec4<u32>(0u, 1u, 2u, 3u);
            acc[i] += select(vec4<f32>(0.0), vec4<f32>(q_dot(q_unit_q(raw[r], u), xi)), hot);
          }
        }
      } else {
        var xs: array<QX, MT>;
        for (var i = 0u; i < MT; i++) { xs[i] = q_xunit(gemv_staged(i, u, c0), u); }
        for (var r = 0u; r < R; r++) {
          // Rows past N decode what the bounds give; their sums are never stored (gemv_quant.wgsl says
          // why the row's sum goes in through a select on a one-hot mask).
          let wq = q_unit_q(raw[r], u);
          let hot = vec4<u32>(r) == vec4<u32>(0u, 1u, 2u, 3u);
          for (var i = 0u; i < MT; i++) { acc[i] += select(vec4<f32>(0.0), vec4<f32>(q_dot(wq, xs[i])), hot); }
        }
      }
      raw = next;
    }
  }
  return acc;
}
