// Row reductions across the TX threads that share a row, with subgroup shuffles. The planner makes
// TX a power of two no larger than the adapter's smallest subgroup size, so the TX consecutive
// invocations of a row always sit in one subgroup, whatever size the hardware picks at run time.

fn reduce_rows_max(x: array<f32, TM>, tx: u32, ty: u32) -> array<f32, TM> {
  var r = x;
  for (var off = TX / 2u; off > 0u; off >>= 1u) {
    for (var i = 0u; i < TM; i++) { r[i] = max(r[i], subgroupShuffleXor(r[i], off)); }
  }
  return r;
}

fn reduce_rows_sum(x: array<f32, TM>, tx: u32, ty: u32) -> array<f32, TM> {
  var r = x;
  for (var off = TX / 2u; off > 0u; off >>= 1u) {
    for (var i = 0u; i < TM; i++) { r[i] += subgroupShuffleXor(r[i], off); }
  }
  return r;
}
