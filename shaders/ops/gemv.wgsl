// The linear layer for few rows (decode: M of 1..64): bandwidth-bound, so the kernel is built around
// reading each weight element exactly once, 16 bytes per load, with many loads in flight.
//   - A workgroup owns NGRP·R weight rows and MT rows of x. Its WG threads form NGRP groups of KT
//     lanes; a group owns R rows, and its lanes split K: lane l reads 16-byte chunks l, l + KT, ...
//     of each row, so a group's loads cover KT·16 contiguous bytes of a row per instruction.
//   - Each lane keeps MT·R partial sums in registers: every weight word it loads meets all MT rows of
//     x (the weights are shared across M), and every x load (from L1/L2: x is small) meets R rows.
//   - A lane's R 16-byte loads of a chunk are issued before any is used.
//   - The KT partial sums of each output then meet in gemv_portable.wgsl (workgroup memory) or
//     gemv_subgroup.wgsl (subgroup shuffles, then workgroup memory across subgroups).
// M beyond MT runs as several x-row chunks; the chunks of a row block are neighbouring workgroups, so
// the weights they share are read from L2 after the first.

const MT: u32 = 1u;     // rows of x per workgroup
const KT: u32 = 32u;    // lanes per group (a power of two)
const WG: u32 = 256u;   // threads per workgroup
const EPV: u32 = 8u;    // elements per 16-byte weight load: 4 f32, 8 f16/bf16
const PASS: u32 = 1u;   // x rows (vec4s of partial sums) reduced per pass through workgroup memory (divides MT)

// R = 4 weight rows per group, held as the four lanes of a vec4: the only register array indexed in
// a loop is acc[MT] (one short loop), which the driver can keep in registers. An earlier form with
// MT·R scalar accumulators indexed in nested loops (rows, x rows, vec4 halves) ran M 16 five times
// slower on an H200 (600 against 120 µs at 4096×4096 bf16), likely from accumulators in local memory.
const R: u32 = 4u;
const NGRP: u32 = WG / KT;
const E4: u32 = EPV / 4u;

var<workgroup> red: array<vec4<f32>, WG * PASS>;

struct GemvTile { valid: bool, mc: u32, rb: u32 }

fn gemv_tile(lin: u32) -> GemvTile {
  let mch = (params.M + MT - 1u) / MT;
  let nrb = (params.N + NGRP * R - 1u) / (NGRP * R);
  return GemvTile(lin < mch * nrb, lin % mch, lin / mch);
}

/** Weight row (local to the part) of row r of group g in row block rb. */
fn gemv_row(rb: u32, g: u32, r: u32) -> u32 { return rb * NGRP * R + r * NGRP + g; }

fn w_word(n: u32, kc: u32, c: u32) -> vec4<u32> {
  if (n >= params.N) { return vec4<u32>(0u); }
  return w_fetch(n, kc, c);
}

/**
 * With F_RMS, the RMSNorm scale of each of the workgroup's x rows, 1 / sqrt(mean(x²) + eps) (SPEC §7, in
 * f32): the norm pass before a decode product folded into it (every workgroup reads its rows of x once
 * more, from L2); without it ones. The workgroup's threads stride over K, then a tree in `red`.
 */
fn gemv_scales(t: GemvTile, li: u32) -> array<f32, MT> {
  var sc: array<f32, MT>;
  for (var i = 0u; i < MT; i++) { sc[i] = 1.0; }
  if ((params.flags & F_RMS) == 0u) { return sc; }
  let k4 = params.K / 4u;
  for (var i = 0u; i < MT; i++) {
    let row = x_src_row(t.mc * MT + i);
    var ss = 0.0;
    if (row >= 0) {
      for (var c = li; c < k4; c += WG) { let v = x[u32(row) * params.x_stride + c]; ss += dot(v, v); }
    }
    red[li] = vec4<f32>(ss, 0.0, 0.0, 0.0);
    workgroupBarrier();
    for (var h = WG / 2u; h > 0u; h >>= 1u) {
      if (li < h) { red[li].x += red[li + h].x; }
      workgroupBarrier();
    }
    sc[i] = inverseSqrt(red[0].x / f32(params.K) + params.eps);
    workgroupBarrier();
  }
  return sc;
}

/** The x rows of the tile's MT rows (x_src_row: -1 for a zero row). */
fn gemv_x_rows(t: GemvTile) -> array<i32, MT> {
  var rows: array<i32, MT>;
  for (var i = 0u; i < MT; i++) { rows[i] = x_src_row(t.mc * MT + i); }
  return rows;
}

/** Values 4·c4 .. 4·c4 + 3 of the product's input row `row`: x_load4, with F_RMS the folded RMSNorm (sc: the
 *  row's scale from gemv_scales). */
fn gemv_x4(row: i32, c4: u32, sc: f32) -> vec4<f32> {
  let v = x_load4(row, c4);
  if ((params.flags & F_RMS) != 0u) { return nw[c4] * (v * sc); }
  return v;
}

/** This lane's partial sums over 16/32-bit weights: acc[i][r] for x row mc·MT + i and weight row r of
 *  its group. The program's gemv_partial (gemv_words.wgsl; gemv_quant.wgsl and gemv_qdot.wgsl for
 *  quantized weights) says which sums a program takes, so that the quantized kernels' x staging is no
 *  part of the 16-bit programs. */
fn gemv_partial_words(t: GemvTile, g: u32, lane: u32, sc: array<f32, MT>) -> array<vec4<f32>, MT> {
  let kc = params.K / EPV;
  let rows = gemv_x_rows(t);
  let n0 = gemv_row(t.rb, g, 0u);
  var acc: array<vec4<f32>, MT>;
  for (var c = lane; c < kc; c += KT) {
    let v0 = w_word(n0, kc, c);
    let v1 = w_word(n0 + NGRP, kc, c);
    let v2 = w_word(n0 + 2u * NGRP, kc, c);
    let v3 = w_word(n0 + 3u * NGRP, kc, c);
    let a0 = w_lo(v0);
    let a1 = w_lo(v1);
    let a2 = w_lo(v2);
    let a3 = w_lo(v3);
    var b0 = vec4<f32>(0.0);
    var b1 = vec4<f32>(0.0);
    var b2 = vec4<f32>(0.0);
    var b3 = vec4<f32>(0.0);
    if (E4 == 2u) {
      b0 = w_hi(v0);
      b1 = w_hi(v1);
      b2 = w_hi(v2);
      b3 = w_hi(v3);
    }
    for (var i = 0u; i < MT; i++) {
      let row = rows[i];
      if (row < 0) { continue; }
      let x0 = gemv_x4(row, c * E4, sc[i]);
      var s = vec4<f32>(dot(x0, a0), dot(x0, a1), dot(x0, a2), dot(x0, a3));
      if (E4 == 2u) {
        let x1 = gemv_x4(row, c * E4 + 1u, sc[i]);
        s += vec4<f32>(dot(x1, b0), dot(x1, b1), dot(x1, b2), dot(x1, b3));
      }
      acc[i] += s;
    }
  }
  return acc;
}

/** Writes the full sum s of x row mc·MT + i and weight row r of group g. */
fn gemv_store(t: GemvTile, g: u32, i: u32, r: u32, s: f32) {
  let m = t.mc * MT + i;
  let n = gemv_row(t.rb, g, r);
  if (m < params.M && n < params.N) { store_out(m, n, s); }
}
