// Storage dtypes, shared by every kernel. Dtype codes: 0 f32, 1 f16, 2 bf16. 16-bit tensors are bound
// as arrays of u32 words holding two elements (low half first), so no shader-f16 feature is needed to
// read or write them; arithmetic stays f32.

/** The bits of -inf, written where an lse is -inf (never computed: WGSL may assume no infinities). */
const NEG_INF_BITS: u32 = 0xff800000u;

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

// ---- fp8 e4m3 (OCP E4M3FN; dtype code 3): four elements per word, KV-cache storage only.

/** e4m3 bits -> f32 (S.1111.111 is NaN; no infinities). */
fn e4m3_to_f32(c: u32) -> f32 {
  let e = (c >> 3u) & 0xfu;
  let m = c & 7u;
  var v: f32;
  if (e == 0u) { v = ldexp(f32(m), -9); } else { v = ldexp(f32(8u + m), i32(e) - 10); }
  // NaN from a run-time value: a NaN constant would be a shader-creation error.
  if (e == 15u && m == 7u) { v = bitcast<f32>(0x7fc00000u + (c & 0u)); }
  return select(v, -v, (c & 0x80u) != 0u);
}

/** f32 -> e4m3 bits: round to nearest even, saturating at ±448 (infinities too), NaN -> 0x7f. */
fn f32_to_e4m3(x: f32) -> u32 {
  let b = bitcast<u32>(x);
  let sign = (b >> 24u) & 0x80u;
  let a = b & 0x7fffffffu;
  if (a > 0x7f800000u) { return sign | 0x7fu; }
  if (a >= 0x43e00000u) { return sign | 0x7eu; }            // |x| >= 448
  let e = i32(a >> 23u) - 127;
  if (e < -6) {
    // Subnormal range: |x| / 2^-9 rounded half to even (WGSL's round); 8 lands on the smallest normal.
    return sign | u32(round(bitcast<f32>(a) * 512.0));
  }
  let mant = a & 0x7fffffu;
  var r = (u32(e + 7) << 3u) | (mant >> 20u);
  let rest = mant & 0xfffffu;
  if (rest > 0x80000u || (rest == 0x80000u && (r & 1u) == 1u)) { r += 1u; }
  return sign | min(r, 0x7eu);
}

/** Index of the word that starts a group of four elements beginning at element i (i % 4 == 0). */
fn word4_of(i: u32, dtype: u32) -> u32 {
  if (dtype == 0u) { return i; }
  if (dtype == 3u) { return i >> 2u; }
  return i >> 1u;
}

/** Four elements from the words that hold them (f32: 4 words, 16-bit: 2, fp8: 1). */
fn decode4(w: vec4<u32>, dtype: u32) -> vec4<f32> {
  if (dtype == 0u) { return bitcast<vec4<f32>>(w); }
  if (dtype == 3u) {
    return vec4<f32>(e4m3_to_f32(w.x & 0xffu), e4m3_to_f32((w.x >> 8u) & 0xffu),
                     e4m3_to_f32((w.x >> 16u) & 0xffu), e4m3_to_f32(w.x >> 24u));
  }
  return vec4<f32>(unpack_pair(w.x, dtype), unpack_pair(w.y, dtype));
}

/** Number of words holding four elements of a dtype. */
fn words4(dtype: u32) -> u32 {
  if (dtype == 0u) { return 4u; }
  if (dtype == 3u) { return 1u; }
  return 2u;
}
