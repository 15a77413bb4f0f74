// The GEMV entry point with subgroups. The subgroup size s is read at run time (4 to 128, whatever the
// hardware picks): the KT partial sums of an output first meet by butterfly shuffles within aligned
// blocks of min(KT, s) lanes (consecutive invocations of a one-dimensional workgroup share a
// subgroup), then the KT / min(KT, s) block sums meet in workgroup memory (one block when s >= KT).
// The shuffle loop is bounded by the constant KT and every offset shuffles, its value dropped when the
// offset reaches past the subgroup, so the shuffles stay in uniform control flow.

@compute @workgroup_size(WG)
fn gemv_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) li: u32, @builtin(subgroup_size) sg_size: u32) {
  let t = gemv_tile(wid.y * nwg.x + wid.x);
  if (!t.valid) { return; }   // whole workgroups only: barriers and shuffles stay uniform
  let g = li / KT;
  let lane = li % KT;
  let sc = gemv_scales(t, li);
  var acc = gemv_partial(t, g, lane, sc);
  let s = min(KT, sg_size);
  for (var off = 1u; off < min(KT, 128u); off <<= 1u) {
    for (var i = 0u; i < MT; i++) {
      let v = subgroupShuffleXor(acc[i], off);
      if (off < s) { acc[i] += v; }
    }
  }
  let nb = KT / s;
  for (var p = 0u; p < MT / PASS; p++) {
    if (lane % s == 0u) {
      for (var q = 0u; q < PASS; q++) { red[(g * nb + lane / s) * PASS + q] = acc[p * PASS + q]; }
    }
    workgroupBarrier();
    for (var o = li; o < NGRP * PASS * R; o += WG) {
      let gg = o / (PASS * R);
      let q = (o / R) % PASS;
      let r = o % R;
      var sum = 0.0;
      for (var b = 0u; b < nb; b++) { sum += red[(gg * nb + b) * PASS + q][r]; }
      gemv_store(t, gg, p * PASS + q, r, sum);
    }
    workgroupBarrier();
  }
}
