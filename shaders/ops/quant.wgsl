// Quantized weights (SPEC §8): ggml's block formats, dequantized in registers. The including program
// declares `w: array<vec4<u32>>` (the weight part's words), `params.K` (values a row) and
// `params.q_plane` (the word where the scale plane starts), and includes one type's decoders from
// ops/quant/ (Q_TYPE, QK, QB, q_load4, q_unit32: QUANT_FORMATS[type].code; none.wgsl: Q_TYPE 0, not
// quantized): one file a type, so a pipeline compiles only the decoder it runs.
//
// Layout on the GPU (src/ops/quant.ts writes it, src/core/quant.ts describes each type): row n's
// blocks are blocks n·BPR .. n·BPR + BPR − 1 of the part, BPR = K / QK; each block keeps its bits, but
// where a block is not a whole number of words its 16-bit scale d (8-bit exponent e for MXFP4) moves
// to a plane after all blocks, so block b's remaining bytes (QB of them) are words b·QB/4 .. and its
// scale is half b of the plane's 16-bit values (byte b of it for MXFP4). Every value is computed as
// ggml's dequantize_row_* computes it, in f32.
//
// q_load4(n, c) gives values 4c .. 4c + 3 of row n: four values never straddle a block or one of its
// 16-value groups, so each call reads one word of quants, its block's scale fields, and (K-quants) the
// sub-block scales of its group. q_unit32(n, u) gives values 32u .. 32u + 31 (the GEMV's unit): Q8_0,
// Q4_0, Q4_K and Q6_K (the types of llama.cpp's common mixes) read it with 16-byte loads (their
// block bodies of 32, 16, 144 and 208 bytes start 16-byte aligned) and decode it with its scales once;
// the other types go through q_load4.

/** Where values 4c .. 4c + 3 of row n lie (q_load4's start, from the type file's QK and QB): block b, the
 *  first value's place i in it, and the block's first word `base` in the block array. */
struct QAt { b: u32, i: u32, base: u32 }
fn q_at(n: u32, c: u32) -> QAt {
  let e = 4u * c;
  let b = n * (params.K / QK) + e / QK;
  return QAt(b, e % QK, b * (QB / 4u));
}

/** Unit u (values 32u .. 32u + 31) of row n as the subgroup matrices take it: q_unit32's values rounded
 *  to f16 (clamped to its range first), 8 values a 16-byte word (W_DTYPE 1). */
fn q_f16_unit(n: u32, u: u32) -> array<vec4<u32>, 4> {
  let v = q_unit32(n, u);
  var o: array<vec4<u32>, 4>;
  for (var j = 0u; j < 4u; j++) {
    let a = clamp(v[2u * j], vec4<f32>(-65504.0), vec4<f32>(65504.0));
    let b = clamp(v[2u * j + 1u], vec4<f32>(-65504.0), vec4<f32>(65504.0));
    o[j] = vec4<u32>(pack2x16float(a.xy), pack2x16float(a.zw), pack2x16float(b.xy), pack2x16float(b.zw));
  }
  return o;
}

/** Word i of the weight part. */
fn qw(i: u32) -> u32 { return w[i >> 2u][i & 3u]; }

/** Byte j (0..3) of a word, and the word's 4 bytes as a vector. */
fn q_byte(word: u32, j: u32) -> u32 { return (word >> (8u * j)) & 0xffu; }
fn q_bytes(word: u32) -> vec4<u32> { return (vec4<u32>(word) >> vec4<u32>(0u, 8u, 16u, 24u)) & vec4<u32>(0xffu); }

/** Byte o of the block whose words start at base. */
fn q_block_byte(base: u32, o: u32) -> u32 { return q_byte(qw(base + (o >> 2u)), o & 3u); }

/** The f16 scale of block b from the plane (split types). */
fn q_plane_f16(b: u32) -> f32 { return unpack2x16float(qw(params.q_plane + (b >> 1u)))[b & 1u]; }

/** ggml's E8M0 exponent to f32, halved (ggml_e8m0_to_fp32_half): 2^(e − 128), subnormal below e 2. */
fn q_e8m0_half(e: u32) -> f32 { return bitcast<f32>(select((e - 1u) << 23u, 0x00200000u << e, e < 2u)); }

/** The four nibbles (low or high halves) of a word's four bytes. */
fn q_nibbles(word: u32, high: bool) -> vec4<u32> { return (q_bytes(word) >> vec4<u32>(select(0u, 4u, high))) & vec4<u32>(0xfu); }

/** The four signed bytes of a word. */
fn q_i8x4(word: u32) -> vec4<f32> {
  return vec4<f32>(vec4<i32>(bitcast<i32>(word << 24u), bitcast<i32>(word << 16u), bitcast<i32>(word << 8u), bitcast<i32>(word)) >> vec4<u32>(24u));
}

fn q_iq4nl(q: vec4<u32>) -> vec4<f32> {
  var t = array<f32, 16>(-127.0, -104.0, -83.0, -65.0, -49.0, -35.0, -22.0, -10.0, 1.0, 13.0, 25.0, 38.0, 53.0, 69.0, 89.0, 113.0);
  return vec4<f32>(t[q.x], t[q.y], t[q.z], t[q.w]);
}

fn q_mxfp4(q: vec4<u32>) -> vec4<f32> {
  var t = array<f32, 16>(0.0, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 0.0, -1.0, -2.0, -3.0, -4.0, -6.0, -8.0, -12.0);
  return vec4<f32>(t[q.x], t[q.y], t[q.z], t[q.w]);
}

/** Q4_K / Q5_K: sub-block j's 6-bit scale and min from the 12 packed bytes in words 1..3 of h (the block's
 *  head: d and dmin in word 0): ggml's get_scale_min_k4. */
fn q_scale_min_k4(h: vec4<u32>, j: u32) -> vec2<f32> {
  let k = j % 4u;
  let b = (vec3<u32>(h.y, h.z, h.w) >> vec3<u32>(8u * k)) & vec3<u32>(0xffu);   // bytes k, k + 4, k + 8
  if (j < 4u) { return vec2<f32>(f32(b.x & 63u), f32(b.y & 63u)); }
  return vec2<f32>(f32((b.z & 0xfu) | ((b.x >> 6u) << 4u)), f32((b.z >> 4u) | ((b.y >> 6u) << 4u)));
}


/** Word c (EPV values) of weight row n (local to the part), K / EPV words a row: dequantized to f32 words
 *  for quantized weights (EPV 4). */
fn w_fetch(n: u32, kc: u32, c: u32) -> vec4<u32> {
  if (Q_TYPE != 0u) { return bitcast<vec4<u32>>(q_load4(n, c)); }
  return w[n * kc + c];
}

/** Word-vector i (16 bytes) of the weight part. */
fn qv(i: u32) -> vec4<u32> { return w[i]; }

// The dot path of the GEMVs (gemv_qdot.wgsl says why; moe_gemv_qdot.wgsl too), for the types whose files give
// q_raw, q_unit_q and q_xscale; the programs that run it also include ops/qdot.wgsl (QX, q_xunit, q_dot).

/** One unit of one weight row as q_unit_q gives it: 32 quants less their zero points, each times the power of two
 *  of its place (as floats, exact), the scale c.x of values 0..15 and c.y of 16..31, and the min o (Σx's factor). */
struct QU { q: array<vec4<f32>, 8>, c: vec2<f32>, o: f32 }

/** Four quants of the word w: the low half word and the high one (w >> 16) each twice, masked by m where
 *  the quants lie (within the low 23 bits), less z: exact. */
fn q_magic(w: u32, m: vec4<u32>, z: vec4<f32>) -> vec4<f32> {
  let v = vec4<u32>(w, w, w >> 16u, w >> 16u) & m;
  return bitcast<vec4<f32>>(v | vec4<u32>(0x4B000000u)) - (vec4<f32>(8388608.0) + z);
}
