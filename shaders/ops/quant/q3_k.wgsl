// Q3_K (ggml's block_q3_k; shaders/ops/quant.wgsl has the layout on the GPU and the helpers): this
// type's q_load4 and q_unit32, one file a type so that a program compiles only its own decoder.

const Q_TYPE: u32 = 7u;
const QK: u32 = 256u;    // values a block
const QB: u32 = 108u;    // bytes a block keeps in the block array (its scale moved to the plane if split off)

/** Values 4c .. 4c + 3 of row n of the weight part: Q3_K: (d · (sc − 32)) · (q − 4 where the hmask bit is clear). */
fn q_load4(n: u32, c: u32) -> vec4<f32> {
  let at = q_at(n, c);
  let g = at.i / 16u;
  let lo = (q_block_byte(at.base + 24u, g % 8u) >> select(4u, 0u, g < 8u)) & 0xfu;
  let hi = (q_block_byte(at.base + 24u, 8u + g % 4u) >> (2u * (g / 4u))) & 3u;
  let dl = q_plane_f16(at.b) * f32(i32(lo | (hi << 4u)) - 32);
  let j = (at.i % 128u) / 32u;
  let l = at.i % 32u;
  let q = (q_bytes(qw(at.base + 8u + ((at.i / 128u) * 32u + l) / 4u)) >> vec4<u32>(2u * j)) & vec4<u32>(3u);
  let m = (q_bytes(qw(at.base + l / 4u)) >> vec4<u32>((at.i / 128u) * 4u + j)) & vec4<u32>(1u);
  return dl * (vec4<f32>(q) - select(vec4<f32>(4.0), vec4<f32>(0.0), m == vec4<u32>(1u)));
}

/** Values 32u .. 32u + 31 of row n (the GEMV's unit), through q_load4. */
fn q_unit32(n: u32, u: u32) -> array<vec4<f32>, 8> {
  var o: array<vec4<f32>, 8>;
  for (var j = 0u; j < 8u; j++) { o[j] = q_load4(n, 8u * u + j); }
  return o;
}
