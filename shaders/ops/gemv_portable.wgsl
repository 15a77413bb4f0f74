// The portable GEMV entry point (no subgroups): the KT partial sums of each output meet in workgroup
// memory, PASS x rows (vec4s over the group's 4 weight rows) per pass, so the buffer stays WG·PASS
// vec4s whatever MT is.

@compute @workgroup_size(WG)
fn gemv_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) li: u32) {
  let t = gemv_tile(wid.y * nwg.x + wid.x);
  if (!t.valid) { return; }   // whole workgroups only: the barriers below stay uniform
  let g = li / KT;
  let lane = li % KT;
  let sc = gemv_scales(t, li);
  let acc = gemv_partial(t, g, lane, sc);
  for (var p = 0u; p < MT / PASS; p++) {
    for (var q = 0u; q < PASS; q++) { red[li * PASS + q] = acc[p * PASS + q]; }
    workgroupBarrier();
    // One thread per output of the pass: (group, x row q, weight row r).
    for (var o = li; o < NGRP * PASS * R; o += WG) {
      let gg = o / (PASS * R);
      let q = (o / R) % PASS;
      let r = o % R;
      var s = 0.0;
      for (var l = 0u; l < KT; l++) { s += red[(gg * KT + l) * PASS + q][r]; }
      gemv_store(t, gg, p * PASS + q, r, s);
    }
    workgroupBarrier();
  }
}
