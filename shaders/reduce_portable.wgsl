// Row reductions across the TX threads that share a row, through workgroup memory (p_s doubles as
// scratch: it is free between the score phase and the write of P). For adapters without subgroups.
// Must be called from workgroup-uniform control flow (it has barriers).

fn reduce_rows_max(x: array<f32, TM>, tx: u32, ty: u32) -> array<f32, TM> {
  for (var i = 0u; i < TM; i++) { p_s[(ty * TM + i) * TX + tx] = x[i]; }
  workgroupBarrier();
  var r: array<f32, TM>;
  for (var i = 0u; i < TM; i++) {
    var acc = p_s[(ty * TM + i) * TX];
    for (var t = 1u; t < TX; t++) { acc = max(acc, p_s[(ty * TM + i) * TX + t]); }
    r[i] = acc;
  }
  workgroupBarrier();
  return r;
}

fn reduce_rows_sum(x: array<f32, TM>, tx: u32, ty: u32) -> array<f32, TM> {
  for (var i = 0u; i < TM; i++) { p_s[(ty * TM + i) * TX + tx] = x[i]; }
  workgroupBarrier();
  var r: array<f32, TM>;
  for (var i = 0u; i < TM; i++) {
    var acc = 0.0;
    for (var t = 0u; t < TX; t++) { acc += p_s[(ty * TM + i) * TX + t]; }
    r[i] = acc;
  }
  workgroupBarrier();
  return r;
}
