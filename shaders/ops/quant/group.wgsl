// The group types (core/quant.ts: the HF quantized safetensors formats, MLX affine, AWQ, GPTQ,
// compressed-tensors, block FP8): one decoder for the family, its parameters set by the constants
// core/shaders.ts writes before this file for each type (Q_TYPE, QK = G values a block, QB = the
// body's bytes, QG_KIND 0 affine s·q + b / 1 integer zero (q − z)·s / 2 FP8 E4M3 e4m3(q)·s, QG_BITS,
// QG_SCALE 0 f16 / 1 bf16 / 2 f32, QG_PW the head's words). Block b's body is words b·QB/4 ..: value i
// at bits [i·bits, (i + 1)·bits) of it, a little-endian bit string; its head is words
// q_plane + b·QG_PW .. (ops/quant.ts moved it there). A GEMV unit of 32 values is `bits` whole words
// of one block (G >= 32), read with 16-byte loads for 4 and 8 bits.

/** Block b's scale and second field (A: the bias, Z: the zero; F: unused). */
fn qg_head(b: u32) -> vec2<f32> {
  let p = params.q_plane + b * QG_PW;
  let h = qw(p);
  if (QG_SCALE == 2u) {
    if (QG_PW == 1u) { return vec2<f32>(bitcast<f32>(h), 0.0); }
    let z = qw(p + 1u);
    return vec2<f32>(bitcast<f32>(h), select(f32(z), bitcast<f32>(z), QG_KIND == 0u));
  }
  var s: f32;
  var t: f32;
  if (QG_SCALE == 0u) {
    let f = unpack2x16float(h);
    s = f.x;
    t = f.y;
  } else {
    s = bitcast<f32>(h << 16u);
    t = bitcast<f32>(h & 0xffff0000u);
  }
  return vec2<f32>(s, select(f32(h >> 16u), t, QG_KIND == 0u));
}

/** FP8 E4M3 (float8_e4m3fn) of four bytes: normals through their bits (exponent rebiased by 120),
 *  subnormals as m·2^-9 (not through f32 subnormals, which a GPU may flush). NaN is refused on load. */
fn qg_e4m3(q: vec4<u32>) -> vec4<f32> {
  let mag = q & vec4<u32>(0x7fu);
  let normal = bitcast<vec4<f32>>((mag << vec4<u32>(20u)) + vec4<u32>(120u << 23u));
  let sub = vec4<f32>(q & vec4<u32>(7u)) * 0.001953125;
  let v = select(sub, normal, (mag >> vec4<u32>(3u)) != vec4<u32>(0u));
  return select(v, -v, (q & vec4<u32>(0x80u)) != vec4<u32>(0u));
}

/** Four quants (as f32 values: the kind's expression) with their block's head. */
fn qg_apply(q: vec4<u32>, hd: vec2<f32>) -> vec4<f32> {
  if (QG_KIND == 2u) { return qg_e4m3(q) * hd.x; }
  if (QG_KIND == 1u) { return (vec4<f32>(q) - hd.y) * hd.x; }
  return hd.x * vec4<f32>(q) + hd.y;
}

/** The QG_BITS-bit value at bit p (< 64) of the 64-bit string hi:lo. */
fn qg_bits(lo: u32, hi: u32, p: u32) -> u32 {
  let mask = (1u << QG_BITS) - 1u;
  if (p >= 32u) { return (hi >> (p - 32u)) & mask; }
  if (p + QG_BITS > 32u) { return ((lo >> p) | (hi << (32u - p))) & mask; }
  return (lo >> p) & mask;
}

/** Values 4c .. 4c + 3 of row n of the weight part. */
fn q_load4(n: u32, c: u32) -> vec4<f32> {
  let at = q_at(n, c);
  let p = at.i * QG_BITS;
  let wi = at.base + p / 32u;
  let sh = p % 32u;
  let lo = qw(wi);
  var hi = 0u;
  if (sh + 4u * QG_BITS > 32u) { hi = qw(wi + 1u); }
  let q = vec4<u32>(qg_bits(lo, hi, sh), qg_bits(lo, hi, sh + QG_BITS), qg_bits(lo, hi, sh + 2u * QG_BITS), qg_bits(lo, hi, sh + 3u * QG_BITS));
  return qg_apply(q, qg_head(at.b));
}

/** Values 32u .. 32u + 31 of row n (the GEMV's unit): QG_BITS whole words of one block. */
fn q_unit32(n: u32, u: u32) -> array<vec4<f32>, 8> {
  var o: array<vec4<f32>, 8>;
  let b = n * (params.K / QK) + (32u * u) / QK;
  let w0 = b * (QB / 4u) + ((32u * u) % QK) * QG_BITS / 32u;
  let hd = qg_head(b);
  if (QG_BITS == 4u) {
    let v = qv(w0 / 4u);
    let s = vec4<u32>(0u, 4u, 8u, 12u);
    let m = vec4<u32>(15u);
    o[0] = qg_apply((vec4<u32>(v.x) >> s) & m, hd); o[1] = qg_apply((vec4<u32>(v.x) >> (s + 16u)) & m, hd);
    o[2] = qg_apply((vec4<u32>(v.y) >> s) & m, hd); o[3] = qg_apply((vec4<u32>(v.y) >> (s + 16u)) & m, hd);
    o[4] = qg_apply((vec4<u32>(v.z) >> s) & m, hd); o[5] = qg_apply((vec4<u32>(v.z) >> (s + 16u)) & m, hd);
    o[6] = qg_apply((vec4<u32>(v.w) >> s) & m, hd); o[7] = qg_apply((vec4<u32>(v.w) >> (s + 16u)) & m, hd);
    return o;
  }
  if (QG_BITS == 8u) {
    let a = qv(w0 / 4u);
    let c = qv(w0 / 4u + 1u);
    o[0] = qg_apply(q_bytes(a.x), hd); o[1] = qg_apply(q_bytes(a.y), hd); o[2] = qg_apply(q_bytes(a.z), hd); o[3] = qg_apply(q_bytes(a.w), hd);
    o[4] = qg_apply(q_bytes(c.x), hd); o[5] = qg_apply(q_bytes(c.y), hd); o[6] = qg_apply(q_bytes(c.z), hd); o[7] = qg_apply(q_bytes(c.w), hd);
    return o;
  }
  // 2, 3, 5, 6 bits: the unit's words, then each value from the word (pair) holding it. Eight words (six
  // at most are used): this code is dead for 8 bits, but a loop written out (tuning.unrollLoops) still
  // indexes ws[7] there, which naga (wgpu: Deno, Firefox) refuses as out of bounds.
  var ws: array<u32, 8>;
  for (var k = 0u; k < QG_BITS; k++) { ws[k] = qw(w0 + k); }
  for (var j = 0u; j < 8u; j++) {
    var q: vec4<u32>;
    for (var t = 0u; t < 4u; t++) {
      let p = (4u * j + t) * QG_BITS;
      let k = p / 32u;
      q[t] = qg_bits(ws[k], ws[min(k + 1u, 6u)], p % 32u);
    }
    o[j] = qg_apply(q, hd);
  }
  return o;
}
