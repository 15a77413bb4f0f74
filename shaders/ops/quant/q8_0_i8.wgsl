// Q8_0's unit for the GEMV on 8-bit activations (gemv_idot.wgsl): its bytes are the signed quants.

const QI_Z: f32 = 0.0;

fn q_unit_i8(r: QRaw, u: u32) -> QI {
  return QI(array<u32, 8>(r.a.x, r.a.y, r.a.z, r.a.w, r.b.x, r.b.y, r.b.z, r.b.w), vec2<f32>(r.d), 0.0);
}
