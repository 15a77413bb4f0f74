// Q4_K (ggml's block_q4_k; shaders/ops/quant.wgsl has the layout on the GPU and the helpers): this
// type's q_load4 and q_unit32, one file a type so that a program compiles only its own decoder.

const Q_TYPE: u32 = 8u;
const QK: u32 = 256u;    // values a block
const QB: u32 = 144u;    // bytes a block keeps in the block array (its scale moved to the plane if split off)

/** Values 4c .. 4c + 3 of row n of the weight part: (d · sc) · q − dmin · m over sub-blocks of 32. */
fn q_load4(n: u32, c: u32) -> vec4<f32> {
  let at = q_at(n, c);
  let dm = unpack2x16float(qw(at.base));
  let sm = q_scale_min_k4(qv(at.base >> 2u), at.i / 32u);
  let c64 = at.i / 64u;
  let l = at.i % 32u;
  let high = (at.i % 64u) >= 32u;
  let q = q_nibbles(qw(at.base + 4u + (c64 * 32u + l) / 4u), high);
  return (dm.x * sm.x) * vec4<f32>(q) - dm.y * sm.y;
}

/** Values 32u .. 32u + 31 of row n (the GEMV's unit): Q4_K: sub-block s of super-block sb; its 32 quants are one half (nibble) of 32 bytes. */
fn q_unit32(n: u32, u: u32) -> array<vec4<f32>, 8> {
  var o: array<vec4<f32>, 8>;
  let units = params.K / 32u;
  let sb = n * (units / 8u) + u / 8u;
  let s = u % 8u;
  let v0 = 9u * sb;   // the block's first word-vector: d, dmin, scales[0..11]
  let head = qv(v0);
  let dm = unpack2x16float(head.x);
  let sm = q_scale_min_k4(head, s);
  let d1 = dm.x * sm.x;
  let m1 = dm.y * sm.y;
  let high = (s & 1u) == 1u;
  let a = qv(v0 + 1u + 2u * (s / 2u));
  let c = qv(v0 + 2u + 2u * (s / 2u));
  o[0] = d1 * vec4<f32>(q_nibbles(a.x, high)) - m1; o[1] = d1 * vec4<f32>(q_nibbles(a.y, high)) - m1;
  o[2] = d1 * vec4<f32>(q_nibbles(a.z, high)) - m1; o[3] = d1 * vec4<f32>(q_nibbles(a.w, high)) - m1;
  o[4] = d1 * vec4<f32>(q_nibbles(c.x, high)) - m1; o[5] = d1 * vec4<f32>(q_nibbles(c.y, high)) - m1;
  o[6] = d1 * vec4<f32>(q_nibbles(c.z, high)) - m1; o[7] = d1 * vec4<f32>(q_nibbles(c.w, high)) - m1;
  return o;
}

/** The dot path's x scales (gemv_qdot.wgsl): an even sub-block's quants are low nibbles (bits 0 and 8 of a half word), an odd one's high (4 and 12). */
fn q_xscale(u: u32, j: u32) -> vec4<f32> {
  return select(vec4<f32>(1.0, 1.0 / 256.0, 1.0, 1.0 / 256.0), vec4<f32>(1.0 / 16.0, 1.0 / 4096.0, 1.0 / 16.0, 1.0 / 4096.0), (u & 1u) == 1u);
}

/** The dot path's loads of a unit (gemv_qdot.wgsl): the super-block's head (d, dmin, the 12 bytes of scales) and the 32 bytes of the unit's pair of sub-blocks. */
struct QRaw { h: vec4<u32>, a: vec4<u32>, b: vec4<u32> }
fn q_raw(n: u32, u: u32) -> QRaw {
  let v0 = 9u * (n * (params.K / 256u) + u / 8u);
  let p = v0 + 1u + 2u * ((u % 8u) / 2u);
  return QRaw(qv(v0), qv(p), qv(p + 1u));
}

/** The dot path's unit (gemv_qdot.wgsl): sub-block s of its super-block, (d · sc) · q − dmin · m. */
fn q_unit_q(r: QRaw, u: u32) -> QU {
  var o: QU;
  let s = u % 8u;
  let dm = unpack2x16float(r.h.x);
  let sm = q_scale_min_k4(r.h, s);
  let m = select(vec4<u32>(0xfu, 0xf00u, 0xfu, 0xf00u), vec4<u32>(0xf0u, 0xf000u, 0xf0u, 0xf000u), (s & 1u) == 1u);
  for (var c = 0u; c < 4u; c++) {
    o.q[c] = q_magic(r.a[c], m, vec4<f32>(0.0));
    o.q[4u + c] = q_magic(r.b[c], m, vec4<f32>(0.0));
  }
  o.c = vec2<f32>(dm.x * sm.x);
  o.o = dm.y * sm.y;
  return o;
}
