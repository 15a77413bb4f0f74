// Order-preserving u32 keys of f32 values, for top-k and argmax by integer compares and atomics
// (sampling's filters, MoE routing).

/** Order-preserving key of an f32: larger value, larger key; -0 as +0; NaN is 0, below -inf's key. */
fn key_of(v: f32) -> u32 {
  var b = bitcast<u32>(v);
  if ((b & 0x7fffffffu) > 0x7f800000u) { return 0u; }
  if (b == 0x80000000u) { b = 0u; }
  return select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u);
}

fn value_of(k: u32) -> f32 {
  return bitcast<f32>(select(~k, k & 0x7fffffffu, (k & 0x80000000u) != 0u));
}
