// Q8_0 (ggml's block_q8_0; shaders/ops/quant.wgsl has the layout on the GPU and the helpers): this
// type's q_load4 and q_unit32, one file a type so that a program compiles only its own decoder.

const Q_TYPE: u32 = 1u;
const QK: u32 = 32u;    // values a block
const QB: u32 = 32u;    // bytes a block keeps in the block array (its scale moved to the plane if split off)

/** Values 4c .. 4c + 3 of row n of the weight part: Q8_0: d · q. */
fn q_load4(n: u32, c: u32) -> vec4<f32> {
  let at = q_at(n, c);
  return q_plane_f16(at.b) * q_i8x4(qw(at.base + at.i / 4u));
}

/** Values 32u .. 32u + 31 of row n (the GEMV's unit): Q8_0: a block of 32 is the unit. */
fn q_unit32(n: u32, u: u32) -> array<vec4<f32>, 8> {
  var o: array<vec4<f32>, 8>;
  let units = params.K / 32u;
  let b = n * units + u;
  let d = q_plane_f16(b);
  let lo = qv(2u * b);
  let hi = qv(2u * b + 1u);
  o[0] = d * q_i8x4(lo.x); o[1] = d * q_i8x4(lo.y); o[2] = d * q_i8x4(lo.z); o[3] = d * q_i8x4(lo.w);
  o[4] = d * q_i8x4(hi.x); o[5] = d * q_i8x4(hi.y); o[6] = d * q_i8x4(hi.z); o[7] = d * q_i8x4(hi.w);
  return o;
}

/** The dot path's x scales (gemv_qdot.wgsl): bytes 0 and 2 of a word at bit 0 of a half word, 1 and 3 at bit 8. */
fn q_xscale(u: u32, j: u32) -> vec4<f32> { return vec4<f32>(1.0, 1.0 / 256.0, 1.0, 1.0 / 256.0); }

/** The dot path's loads of a unit (gemv_qdot.wgsl): its 32 bytes and its scale. */
struct QRaw { a: vec4<u32>, b: vec4<u32>, d: f32 }
fn q_raw(n: u32, u: u32) -> QRaw {
  let b = n * (params.K / 32u) + u;
  return QRaw(qv(2u * b), qv(2u * b + 1u), q_plane_f16(b));
}

/** The dot path's unit (gemv_qdot.wgsl): the bytes with their sign bits flipped are q + 128. */
fn q_unit_q(r: QRaw, u: u32) -> QU {
  var o: QU;
  let m = vec4<u32>(0xffu, 0xff00u, 0xffu, 0xff00u);
  let z = vec4<f32>(128.0, 32768.0, 128.0, 32768.0);
  let a = r.a ^ vec4<u32>(0x80808080u);
  let b = r.b ^ vec4<u32>(0x80808080u);
  for (var c = 0u; c < 4u; c++) {
    o.q[c] = q_magic(a[c], m, z);
    o.q[4u + c] = q_magic(b[c], m, z);
  }
  o.c = vec2<f32>(r.d);
  return o;
}
