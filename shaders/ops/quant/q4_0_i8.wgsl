// Q4_0's unit for the GEMV on 8-bit activations (gemv_idot.wgsl): word c's low nibbles are values
// 4c .. 4c + 3, its high ones 16 + 4c ..; each nibble made a byte (0..15, the zero point 8 taken through Σxq).

const QI_Z: f32 = 8.0;

fn q_unit_i8(r: QRaw, u: u32) -> QI {
  let lo = r.q & vec4<u32>(0x0f0f0f0fu);
  let hi = (r.q >> vec4<u32>(4u)) & vec4<u32>(0x0f0f0f0fu);
  return QI(array<u32, 8>(lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w), vec2<f32>(r.d), 0.0);
}
