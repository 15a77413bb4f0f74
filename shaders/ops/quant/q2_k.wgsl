// Q2_K (ggml's block_q2_k; shaders/ops/quant.wgsl has the layout on the GPU and the helpers): this
// type's q_load4 and q_unit32, one file a type so that a program compiles only its own decoder.

const Q_TYPE: u32 = 6u;
const QK: u32 = 256u;    // values a block
const QB: u32 = 84u;    // bytes a block keeps in the block array (its scale moved to the plane if split off)

/** Values 4c .. 4c + 3 of row n of the weight part: Q2_K: (d · sc) · q − dmin · m, sc | m << 4 the byte of the value's group of 16. */
fn q_load4(n: u32, c: u32) -> vec4<f32> {
  let at = q_at(n, c);
  let dm = unpack2x16float(qw(at.base + 20u));
  let s = q_block_byte(at.base, at.i / 16u);
  let q = (q_bytes(qw(at.base + 4u + ((at.i / 128u) * 32u + at.i % 32u) / 4u)) >> vec4<u32>(2u * ((at.i % 128u) / 32u))) & vec4<u32>(3u);
  return (dm.x * f32(s & 0xfu)) * vec4<f32>(q) - dm.y * f32(s >> 4u);
}

/** Values 32u .. 32u + 31 of row n (the GEMV's unit), through q_load4. */
fn q_unit32(n: u32, u: u32) -> array<vec4<f32>, 8> {
  var o: array<vec4<f32>, 8>;
  for (var j = 0u; j < 8u; j++) { o[j] = q_load4(n, 8u * u + j); }
  return o;
}
