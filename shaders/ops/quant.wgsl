// Quantized weights (SPEC §8): ggml's block formats, dequantized in registers. The including program
// declares `w: array<vec4<u32>>` (the weight part's words), `params.K` (values a row) and
// `params.q_plane` (the word where the scale plane starts), and Q_TYPE (0: not quantized).
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
// sub-block scales of its group.

override Q_TYPE: u32 = 0u;   // QUANT_FORMATS[type].code: 1 Q8_0 2 Q4_0 3 Q4_1 4 Q5_0 5 Q5_1 6 Q2_K 7 Q3_K
                             // 8 Q4_K 9 Q5_K 10 Q6_K 11 IQ4_NL 12 IQ4_XS 13 MXFP4

/** Values a block. */
fn q_block_elems() -> u32 { return select(32u, 256u, (Q_TYPE >= 6u && Q_TYPE <= 10u) || Q_TYPE == 12u); }

/** Bytes a block keeps in the block array (its scale moved to the plane where it was split off). */
fn q_body_bytes() -> u32 {
  switch Q_TYPE {
    case 1u: { return 32u; }
    case 2u, 11u, 13u: { return 16u; }
    case 3u, 4u: { return 20u; }
    case 5u: { return 24u; }
    case 6u: { return 84u; }
    case 7u: { return 108u; }
    case 8u: { return 144u; }
    case 9u: { return 176u; }
    case 10u: { return 208u; }
    default: { return 136u; }   // 12 IQ4_XS
  }
}

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

/** Q4_K / Q5_K: sub-block j's 6-bit scale and min from the 12 packed bytes at word sw (ggml's get_scale_min_k4). */
fn q_scale_min_k4(sw: u32, j: u32) -> vec2<f32> {
  if (j < 4u) {
    return vec2<f32>(f32(q_block_byte(sw, j) & 63u), f32(q_block_byte(sw, j + 4u) & 63u));
  }
  let a = q_block_byte(sw, j + 4u);
  return vec2<f32>(f32((a & 0xfu) | ((q_block_byte(sw, j - 4u) >> 6u) << 4u)), f32((a >> 4u) | ((q_block_byte(sw, j) >> 6u) << 4u)));
}

/** Values 4c .. 4c + 3 of row n of the weight part. */
fn q_load4(n: u32, c: u32) -> vec4<f32> {
  let QK = q_block_elems();
  let e = 4u * c;
  let b = n * (params.K / QK) + e / QK;   // the block
  let i = e % QK;                         // the first value's place in its block
  let base = b * (q_body_bytes() / 4u);   // its first word
  switch Q_TYPE {
    case 1u: {   // Q8_0: d · q
      return q_plane_f16(b) * q_i8x4(qw(base + i / 4u));
    }
    case 2u: {   // Q4_0: d · (q − 8); values 0..15 low nibbles, 16..31 high
      return q_plane_f16(b) * (vec4<f32>(q_nibbles(qw(base + (i % 16u) / 4u), i >= 16u)) - 8.0);
    }
    case 3u: {   // Q4_1: d · q + m
      let dm = unpack2x16float(qw(base));
      return dm.x * vec4<f32>(q_nibbles(qw(base + 1u + (i % 16u) / 4u), i >= 16u)) + dm.y;
    }
    case 4u, 5u: {   // Q5_0: d · (q − 16), Q5_1: d · q + m; bit i of qh is value i's fifth bit
      let one = Q_TYPE == 5u;
      let o = select(0u, 1u, one);
      let qh = qw(base + o);
      let h = ((vec4<u32>(qh) >> (vec4<u32>(i) + vec4<u32>(0u, 1u, 2u, 3u))) & vec4<u32>(1u)) << vec4<u32>(4u);
      let q = vec4<f32>(q_nibbles(qw(base + o + 1u + (i % 16u) / 4u), i >= 16u) | h);
      if (one) {
        let dm = unpack2x16float(qw(base));
        return dm.x * q + dm.y;
      }
      return q_plane_f16(b) * (q - 16.0);
    }
    case 6u: {   // Q2_K: (d · sc) · q − dmin · m, sc | m << 4 the byte of the value's group of 16
      let dm = unpack2x16float(qw(base + 20u));
      let s = q_block_byte(base, i / 16u);
      let q = (q_bytes(qw(base + 4u + ((i / 128u) * 32u + i % 32u) / 4u)) >> vec4<u32>(2u * ((i % 128u) / 32u))) & vec4<u32>(3u);
      return (dm.x * f32(s & 0xfu)) * vec4<f32>(q) - dm.y * f32(s >> 4u);
    }
    case 7u: {   // Q3_K: (d · (sc − 32)) · (q − 4 where the hmask bit is clear)
      let g = i / 16u;
      let lo = (q_block_byte(base + 24u, g % 8u) >> select(4u, 0u, g < 8u)) & 0xfu;
      let hi = (q_block_byte(base + 24u, 8u + g % 4u) >> (2u * (g / 4u))) & 3u;
      let dl = q_plane_f16(b) * f32(i32(lo | (hi << 4u)) - 32);
      let j = (i % 128u) / 32u;
      let l = i % 32u;
      let q = (q_bytes(qw(base + 8u + ((i / 128u) * 32u + l) / 4u)) >> vec4<u32>(2u * j)) & vec4<u32>(3u);
      let m = (q_bytes(qw(base + l / 4u)) >> vec4<u32>((i / 128u) * 4u + j)) & vec4<u32>(1u);
      return dl * (vec4<f32>(q) - select(vec4<f32>(4.0), vec4<f32>(0.0), m == vec4<u32>(1u)));
    }
    case 8u, 9u: {   // Q4_K, Q5_K: (d · sc) · q − dmin · m over sub-blocks of 32
      let dm = unpack2x16float(qw(base));
      let sm = q_scale_min_k4(base + 1u, i / 32u);
      let c64 = i / 64u;
      let l = i % 32u;
      let high = (i % 64u) >= 32u;
      let five = Q_TYPE == 9u;
      var q = q_nibbles(qw(base + select(4u, 12u, five) + (c64 * 32u + l) / 4u), high);
      if (five) {
        let bit = 2u * c64 + select(0u, 1u, high);
        q |= ((q_bytes(qw(base + 4u + l / 4u)) >> vec4<u32>(bit)) & vec4<u32>(1u)) << vec4<u32>(4u);
      }
      return (dm.x * sm.x) * vec4<f32>(q) - dm.y * sm.y;
    }
    case 10u: {   // Q6_K: (d · sc) · (q − 32), q = 4 bits from ql | 2 bits from qh, sc an i8 of the group of 16
      let h = i / 128u;
      let k = (i % 128u) / 32u;
      let l = i % 32u;
      let ql = q_nibbles(qw(base + (h * 64u + l + (k & 1u) * 32u) / 4u), k >= 2u);
      let qh = (q_bytes(qw(base + 32u + (h * 32u + l) / 4u)) >> vec4<u32>(2u * k)) & vec4<u32>(3u);
      let sc = bitcast<i32>(q_block_byte(base + 48u, i / 16u) << 24u) >> 24u;
      return (q_plane_f16(b) * f32(sc)) * (vec4<f32>(ql | (qh << vec4<u32>(4u))) - 32.0);
    }
    case 11u: {   // IQ4_NL: d · table[q]
      return q_plane_f16(b) * q_iq4nl(q_nibbles(qw(base + (i % 16u) / 4u), i >= 16u));
    }
    case 12u: {   // IQ4_XS: (d · (ls − 32)) · table[q], ls 6 bits of sub-block i / 32
      let w0 = qw(base);
      let ib = i / 32u;
      let ls = ((q_block_byte(base + 1u, ib / 2u) >> (4u * (ib % 2u))) & 0xfu) | (((w0 >> (16u + 2u * ib)) & 3u) << 4u);
      let dl = unpack2x16float(w0).x * f32(i32(ls) - 32);
      return dl * q_iq4nl(q_nibbles(qw(base + 2u + (ib * 16u + i % 16u) / 4u), (i % 32u) >= 16u));
    }
    default: {   // 13 MXFP4: table[q] · 2^(e − 128)
      let ew = qw(params.q_plane + (b >> 2u));
      return q_mxfp4(q_nibbles(qw(base + (i % 16u) / 4u), i >= 16u)) * q_e8m0_half(q_byte(ew, b & 3u));
    }
  }
}

/** Word c (EPV values) of weight row n (local to the part), K / EPV words a row: dequantized to f32 words
 *  for quantized weights (EPV 4). */
fn w_fetch(n: u32, kc: u32, c: u32) -> vec4<u32> {
  if (Q_TYPE != 0u) { return bitcast<vec4<u32>>(q_load4(n, c)); }
  return w[n * kc + c];
}
