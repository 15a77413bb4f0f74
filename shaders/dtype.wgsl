// Storage dtypes, shared by every kernel. Dtype codes: 0 f32, 1 f16, 2 bf16. 16-bit tensors are bound
// as arrays of u32 words holding two elements (low half first), so no shader-f16 feature is needed to
// read or write them; arithmetic stays f32.

fn unpack_elem(word: u32, hi: bool, dtype: u32) -> f32 {
  if (dtype == 0u) { return bitcast<f32>(word); }
  if (dtype == 1u) { return unpack2x16float(word)[select(0u, 1u, hi)]; }
  return bitcast<f32>(select(word << 16u, word & 0xffff0000u, hi));
}

/** Both halves of a 16-bit word as f32 (dtype 1 or 2). */
fn unpack_pair(word: u32, dtype: u32) -> vec2<f32> {
  if (dtype == 1u) { return unpack2x16float(word); }
  return vec2<f32>(bitcast<f32>(word << 16u), bitcast<f32>(word & 0xffff0000u));
}

/** Index of the word holding element i. */
fn word_of(i: u32, dtype: u32) -> u32 { return select(i >> 1u, i, dtype == 0u); }

/** f32 -> bf16 bits, round to nearest even; NaN stays NaN. */
fn f32_to_bf16_bits(x: f32) -> u32 {
  let b = bitcast<u32>(x);
  if ((b & 0x7fffffffu) > 0x7f800000u) { return 0x7fc0u; }
  return (b + 0x7fffu + ((b >> 16u) & 1u)) >> 16u;
}

/** Two elements packed into one word of a 16-bit dtype (1 f16, 2 bf16). */
fn pack_pair(a: f32, b: f32, dtype: u32) -> u32 {
  if (dtype == 1u) { return pack2x16float(vec2<f32>(a, b)); }
  return f32_to_bf16_bits(a) | (f32_to_bf16_bits(b) << 16u);
}
