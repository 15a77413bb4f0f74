// Q5_K (ggml's block_q5_k; shaders/ops/quant.wgsl has the layout on the GPU and the helpers): this
// type's q_load4 and q_unit32, one file a type so that a program compiles only its own decoder.

const Q_TYPE: u32 = 9u;
const QK: u32 = 256u;    // values a block
const QB: u32 = 176u;    // bytes a block keeps in the block array (its scale moved to the plane if split off)

/** Values 4c .. 4c + 3 of row n of the weight part: (d · sc) · (q + 16·qh bit) − dmin · m over sub-blocks of 32. */
fn q_load4(n: u32, c: u32) -> vec4<f32> {
  let at = q_at(n, c);
  let dm = unpack2x16float(qw(at.base));
  let sm = q_scale_min_k4(qv(at.base >> 2u), at.i / 32u);
  let c64 = at.i / 64u;
  let l = at.i % 32u;
  let high = (at.i % 64u) >= 32u;
  let bit = 2u * c64 + select(0u, 1u, high);
  let q = q_nibbles(qw(at.base + 12u + (c64 * 32u + l) / 4u), high) | (((q_bytes(qw(at.base + 4u + l / 4u)) >> vec4<u32>(bit)) & vec4<u32>(1u)) << vec4<u32>(4u));
  return (dm.x * sm.x) * vec4<f32>(q) - dm.y * sm.y;
}

/** Values 32u .. 32u + 31 of row n (the GEMV's unit), through q_load4. */
fn q_unit32(n: u32, u: u32) -> array<vec4<f32>, 8> {
  var o: array<vec4<f32>, 8>;
  for (var j = 0u; j < 8u; j++) { o[j] = q_load4(n, 8u * u + j); }
  return o;
}
