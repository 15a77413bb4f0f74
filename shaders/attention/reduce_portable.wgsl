// Row reductions across the TX threads that share a row, through workgroup memory (p_s doubles as
// scratch: it is free between the score phase and the write of P). For adapters without subgroups.
// Must be called from workgroup-uniform control flow (it has barriers).

fn reduce_rows_max(x: array<f32, TM>, tx: u32, ty: u32) -> array<f32, TM> {
  for (var i = 0u; i < TM; i++) { let e = (ty * TM + i) * TX + tx; p_s[e / 4u][e % 4u] = x[i]; }
  workgroupBarrier();
  var r: array<f32, TM>;
  for (var i = 0u; i < TM; i++) {
    let e0 = (ty * TM + i) * TX;
    var acc = p_s[e0 / 4u][e0 % 4u];
    for (var t = 1u; t < TX; t++) { let e = e0 + t; acc = max(acc, p_s[e / 4u][e % 4u]); }
    r[i] = acc;
  }
  workgroupBarrier();
  return r;
}

fn reduce_rows_sum(x: array<f32, TM>, tx: u32, ty: u32) -> array<f32, TM> {
  for (var i = 0u; i < TM; i++) { let e = (ty * TM + i) * TX + tx; p_s[e / 4u][e % 4u] = x[i]; }
  workgroupBarrier();
  var r: array<f32, TM>;
  for (var i = 0u; i < TM; i++) {
    let e0 = (ty * TM + i) * TX;
    var acc = 0.0;
    for (var t = 0u; t < TX; t++) { let e = e0 + t; acc += p_s[e / 4u][e % 4u]; }
    r[i] = acc;
  }
  workgroupBarrier();
  return r;
}
