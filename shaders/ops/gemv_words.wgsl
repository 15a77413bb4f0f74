// The GEMV's partial sums for 16/32-bit weights (gemv.wgsl's gemv_partial_words): the 16-bit programs
// include this file where the quantized ones include gemv_quant.wgsl or gemv_qdot.wgsl.

fn gemv_partial(t: GemvTile, g: u32, lane: u32, sc: array<f32, MT>) -> array<vec4<f32>, MT> {
  return gemv_partial_words(t, g, lane, sc);
}
