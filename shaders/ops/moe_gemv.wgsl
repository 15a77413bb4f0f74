// Grouped expert product for few rows per expert (decode): bandwidth-bound, so the point is reading each
// chosen expert's weights once, 16 bytes per load, with many loads in flight.
//   A workgroup = one tile (up to MT pairs of one expert) × RW weight rows. Its WG threads form NGRP
//   groups of KT lanes; a group owns 4 weight rows, its lanes split K (lane l reads words l, l+KT, ...),
//   each holding one vec4 of partial sums per tile row (component r: weight row r). Every weight word
//   loaded meets all the tile's rows. The KT partials of an output meet in workgroup memory (a tree
//   per tile row: portable, no subgroups).
//   Workgroups run tile-fastest, so the tiles of one expert (several when it has more than MT pairs)
//   read the same weight rows close together in time (L2).
// The lanes' partial sums come from moe_partial: moe_gemv_words.wgsl (16-byte words of 16/32-bit
// experts, or quantized ones decoded four values at a time) or moe_gemv_qdot.wgsl (the quantized dot path).

const MT: u32 = 1u;
const KT: u32 = 32u;
const WG: u32 = 256u;
const EPV: u32 = 8u;

const E4: u32 = EPV / 4u;
const NGRP: u32 = WG / KT;
const RW: u32 = NGRP * 4u;

var<workgroup> red: array<vec4<f32>, WG>;

@compute @workgroup_size(WG)
fn gemv_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) li: u32) {
  let lin = wid.y * nwg.x + wid.x;
  let nblk = (params.N + RW - 1u) / RW;
  if (lin >= params.tiles * nblk) { return; }
  let tile = load_tile(lin % params.tiles, li, MT);
  if (tile.z == 0u) { return; }
  let g = li / KT;
  let lane = li % KT;
  let n0 = (lin / params.tiles) * RW + g * 4u;
  let el = tile.x - params.e0;

  var rows: array<u32, MT>;
  for (var m = 0u; m < MT; m++) {
    rows[m] = 0u;
    if (m < tile.z) { rows[m] = in_row(pair_at(tile.y + m)); }
  }
  let acc = moe_partial(tile, el, n0, lane, rows);   // moe_gemv_words.wgsl or moe_gemv_qdot.wgsl

  for (var m = 0u; m < MT; m++) {
    red[li] = acc[m];
    workgroupBarrier();
    for (var s = KT / 2u; s > 0u; s >>= 1u) {
      if (lane < s) { red[li] += red[li + s]; }
      workgroupBarrier();
    }
    if (lane == 0u && m < tile.z) {
      let v = red[li];
      let o = pair_at(tile.y + m) * params.N;
      for (var r = 0u; r < 4u; r++) {
        if (n0 + r < params.N) { out[o + n0 + r] = v[r] + moe_bias(el, n0 + r); }
      }
    }
  }
}
