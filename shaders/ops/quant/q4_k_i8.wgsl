// Q4_K's unit for the GEMV on 8-bit activations (gemv_idot.wgsl): sub-block s of its super-block, the
// low nibbles of the pair's 32 bytes for an even s, the high ones for an odd s; (d · sc) · q − dmin · m.

const QI_Z: f32 = 0.0;

fn q_unit_i8(r: QRaw, u: u32) -> QI {
  let s = u % 8u;
  let dm = unpack2x16float(r.h.x);
  let sm = q_scale_min_k4(r.h, s);
  let sh = vec4<u32>(4u * (s & 1u));
  let a = (r.a >> sh) & vec4<u32>(0x0f0f0f0fu);
  let b = (r.b >> sh) & vec4<u32>(0x0f0f0f0fu);
  return QI(array<u32, 8>(a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w), vec2<f32>(dm.x * sm.x), dm.y * sm.y);
}
