// The subgroup entry point of RMSNorm (norm.wgsl holds the rest). A row's T threads are consecutive
// invocations aligned to T, and subgroups are consecutive invocations aligned to their size (as the
// attention kernels assume), so: T ≤ the subgroup size → a butterfly within the row's lanes; T larger
// → subgroupAdd over whole subgroups, then their sums meet in workgroup memory. The size is read at
// run time (4 and 8 on software adapters, 32 to 128 on GPUs); it is uniform in a compute shader.

fn row_sum_subgroup(v: f32, lid: u32, sg: u32) -> f32 {
  var r = v;
  if (T >= sg) {
    r = subgroupAdd(v);
  } else {
    for (var off = T / 2u; off > 0u; off >>= 1u) { r += subgroupShuffleXor(r, off); }
  }
  if (T > sg) {
    if (lid % sg == 0u) { red[lid / sg] = r; }
    workgroupBarrier();
    let per = T / sg;
    let f0 = (lid / T) * per;
    r = 0.0;
    for (var i = 0u; i < per; i++) { r += red[f0 + i]; }
  }
  return r;
}

@compute @workgroup_size(WG)
fn rms_norm_sg(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32, @builtin(subgroup_size) sg: u32) {
  let r = row_of(wid, nwg, lid);
  let p = sum_squares(r);
  write_row(r, p, row_sum_subgroup(p.ss, lid, sg));
}
