// Q6_K (ggml's block_q6_k; shaders/ops/quant.wgsl has the layout on the GPU and the helpers): this
// type's q_load4 and q_unit32, one file a type so that a program compiles only its own decoder.

const Q_TYPE: u32 = 10u;
const QK: u32 = 256u;    // values a block
const QB: u32 = 208u;    // bytes a block keeps in the block array (its scale moved to the plane if split off)

/** Values 4c .. 4c + 3 of row n of the weight part: Q6_K: (d · sc) · (q − 32), q = 4 bits from ql | 2 bits from qh, sc an i8 of the group of 16. */
fn q_load4(n: u32, c: u32) -> vec4<f32> {
  let at = q_at(n, c);
  let h = at.i / 128u;
  let k = (at.i % 128u) / 32u;
  let l = at.i % 32u;
  let ql = q_nibbles(qw(at.base + (h * 64u + l + (k & 1u) * 32u) / 4u), k >= 2u);
  let qh = (q_bytes(qw(at.base + 32u + (h * 32u + l) / 4u)) >> vec4<u32>(2u * k)) & vec4<u32>(3u);
  let sc = bitcast<i32>(q_block_byte(at.base + 48u, at.i / 16u) << 24u) >> 24u;
  return (q_plane_f16(at.b) * f32(sc)) * (vec4<f32>(ql | (qh << vec4<u32>(4u))) - 32.0);
}

/** 16 values of a group: 4 bits from the ql words l (low or high nibbles), 2 from the qh words m (bits
 *  2k), scaled by sc. */
fn q6k_16(l: vec4<u32>, m: vec4<u32>, sc: f32, high: bool, k: u32) -> array<vec4<f32>, 4> {
  let sh = vec4<u32>(2u * k);
  return array<vec4<f32>, 4>(
    sc * (vec4<f32>(q_nibbles(l.x, high) | (((q_bytes(m.x) >> sh) & vec4<u32>(3u)) << vec4<u32>(4u))) - 32.0),
    sc * (vec4<f32>(q_nibbles(l.y, high) | (((q_bytes(m.y) >> sh) & vec4<u32>(3u)) << vec4<u32>(4u))) - 32.0),
    sc * (vec4<f32>(q_nibbles(l.z, high) | (((q_bytes(m.z) >> sh) & vec4<u32>(3u)) << vec4<u32>(4u))) - 32.0),
    sc * (vec4<f32>(q_nibbles(l.w, high) | (((q_bytes(m.w) >> sh) & vec4<u32>(3u)) << vec4<u32>(4u))) - 32.0));
}

/** Values 32u .. 32u + 31 of row n (the GEMV's unit): Q6_K: 32 values of quarter k of half h: 4 bits from ql, 2 from qh, two i8 scales. */
fn q_unit32(n: u32, u: u32) -> array<vec4<f32>, 8> {
  var o: array<vec4<f32>, 8>;
  let units = params.K / 32u;
  let b = n * (units / 8u) + u / 8u;
  let s = u % 8u;
  let h = s / 4u;
  let k = s % 4u;
  let v0 = 13u * b;
  let d = q_plane_f16(b);
  let scw = qv(v0 + 12u);   // the 16 i8 scales
  let g = 2u * s;           // the first of the unit's two groups of 16
  let sw0 = scw[g / 4u];
  let s0 = d * f32(bitcast<i32>(q_byte(sw0, g % 4u) << 24u) >> 24u);
  let s1 = d * f32(bitcast<i32>(q_byte(sw0, g % 4u + 1u) << 24u) >> 24u);
  let qlv = v0 + 4u * h + 2u * (k & 1u);
  let qhv = v0 + 8u + 2u * h;
  let high = k >= 2u;
  let a = q6k_16(qv(qlv), qv(qhv), s0, high, k);
  let c = q6k_16(qv(qlv + 1u), qv(qhv + 1u), s1, high, k);
  o[0] = a[0]; o[1] = a[1]; o[2] = a[2]; o[3] = a[3];
  o[4] = c[0]; o[5] = c[1]; o[6] = c[2]; o[7] = c[3];
  return o;
}

/** The dot path's x scales (gemv_qdot.wgsl): a unit's 6-bit quants are assembled a byte each, at bits 0 and 8 of a half word. */
fn q_xscale(u: u32, j: u32) -> vec4<f32> { return vec4<f32>(1.0, 1.0 / 256.0, 1.0, 1.0 / 256.0); }

/** The dot path's loads of a unit (gemv_qdot.wgsl): its 32 bytes of ql, 32 of qh, the word of its two i8 scales, and d. */
struct QRaw { l0: vec4<u32>, l1: vec4<u32>, h0: vec4<u32>, h1: vec4<u32>, sw: u32, d: f32 }
fn q_raw(n: u32, u: u32) -> QRaw {
  let b = n * (params.K / 256u) + u / 8u;
  let s = u % 8u;
  let v0 = 13u * b;
  let qlv = v0 + 4u * (s / 4u) + 2u * (s & 1u);
  let qhv = v0 + 8u + 2u * (s / 4u);
  return QRaw(qv(qlv), qv(qlv + 1u), qv(qhv), qv(qhv + 1u), qw(4u * (v0 + 12u) + s / 2u), q_plane_f16(b));
}

/** A unit's scales: values 0..15 and 16..31 have one each (bytes 2s, 2s + 1 of the 16), times d. */
fn q6_unit_scales(r: QRaw, u: u32) -> vec2<f32> {
  let sh = 16u * ((u % 8u) % 2u);
  return r.d * vec2<f32>(f32(bitcast<i32>(r.sw << (24u - sh)) >> 24u), f32(bitcast<i32>(r.sw << (16u - sh)) >> 24u));
}

/** A unit's 32 quants as bytes (0..63, before the zero point 32), values 0..15 then 16..31: quarter k of
 *  half h, each byte's 4 low bits from ql (a nibble), 2 high from qh (bits 2k). */
fn q6_unit_bytes(r: QRaw, u: u32) -> array<vec4<u32>, 2> {
  let k = (u % 8u) % 4u;
  let ls = vec4<u32>(select(0u, 4u, k >= 2u));
  let hs = vec4<u32>(2u * k);
  return array<vec4<u32>, 2>(
    ((r.l0 >> ls) & vec4<u32>(0x0f0f0f0fu)) | (((r.h0 >> hs) & vec4<u32>(0x03030303u)) << vec4<u32>(4u)),
    ((r.l1 >> ls) & vec4<u32>(0x0f0f0f0fu)) | (((r.h1 >> hs) & vec4<u32>(0x03030303u)) << vec4<u32>(4u)));
}

/** The dot path's unit (gemv_qdot.wgsl): the quants less 32, with their two scales. */
fn q_unit_q(r: QRaw, u: u32) -> QU {
  var o: QU;
  o.c = q6_unit_scales(r, u);
  let m = vec4<u32>(0xffu, 0xff00u, 0xffu, 0xff00u);
  let z = vec4<f32>(32.0, 8192.0, 32.0, 8192.0);
  let q = q6_unit_bytes(r, u);
  for (var c = 0u; c < 4u; c++) {
    o.q[c] = q_magic(q[0][c], m, z);
    o.q[4u + c] = q_magic(q[1][c], m, z);
  }
  return o;
}
