// MXFP4 (ggml's block_mxfp4; shaders/ops/quant.wgsl has the layout on the GPU and the helpers): this
// type's q_load4 and q_unit32, one file a type so that a program compiles only its own decoder.

const Q_TYPE: u32 = 13u;
const QK: u32 = 32u;    // values a block
const QB: u32 = 16u;    // bytes a block keeps in the block array (its scale moved to the plane if split off)

/** Values 4c .. 4c + 3 of row n of the weight part: table[q] · 2^(e − 128). */
fn q_load4(n: u32, c: u32) -> vec4<f32> {
  let at = q_at(n, c);
  let ew = qw(params.q_plane + (at.b >> 2u));
  return q_mxfp4(q_nibbles(qw(at.base + (at.i % 16u) / 4u), at.i >= 16u)) * q_e8m0_half(q_byte(ew, at.b & 3u));
}

/** Values 32u .. 32u + 31 of row n (the GEMV's unit), through q_load4. */
fn q_unit32(n: u32, u: u32) -> array<vec4<f32>, 8> {
  var o: array<vec4<f32>, 8>;
  for (var j = 0u; j < 8u; j++) { o[j] = q_load4(n, 8u * u + j); }
  return o;
}
