// IQ4_XS (ggml's block_iq4_xs; shaders/ops/quant.wgsl has the layout on the GPU and the helpers): this
// type's q_load4 and q_unit32, one file a type so that a program compiles only its own decoder.

const Q_TYPE: u32 = 12u;
const QK: u32 = 256u;    // values a block
const QB: u32 = 136u;    // bytes a block keeps in the block array (its scale moved to the plane if split off)

/** Values 4c .. 4c + 3 of row n of the weight part: IQ4_XS: (d · (ls − 32)) · table[q], ls 6 bits of sub-block i / 32. */
fn q_load4(n: u32, c: u32) -> vec4<f32> {
  let at = q_at(n, c);
  let w0 = qw(at.base);
  let ib = at.i / 32u;
  let ls = ((q_block_byte(at.base + 1u, ib / 2u) >> (4u * (ib % 2u))) & 0xfu) | (((w0 >> (16u + 2u * ib)) & 3u) << 4u);
  let dl = unpack2x16float(w0).x * f32(i32(ls) - 32);
  return dl * q_iq4nl(q_nibbles(qw(at.base + 2u + (ib * 16u + at.i % 16u) / 4u), (at.i % 32u) >= 16u));
}

/** Values 32u .. 32u + 31 of row n (the GEMV's unit), through q_load4. */
fn q_unit32(n: u32, u: u32) -> array<vec4<f32>, 8> {
  var o: array<vec4<f32>, 8>;
  for (var j = 0u; j < 8u; j++) { o[j] = q_load4(n, 8u * u + j); }
  return o;
}
