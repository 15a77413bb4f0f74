// Q6_K's unit for the GEMV on 8-bit activations (gemv_idot.wgsl): the quants as bytes (0..63, the zero
// point 32 taken through Σxq), a scale each for values 0..15 and 16..31.

const QI_Z: f32 = 32.0;

fn q_unit_i8(r: QRaw, u: u32) -> QI {
  let q = q6_unit_bytes(r, u);
  return QI(array<u32, 8>(q[0].x, q[0].y, q[0].z, q[0].w, q[1].x, q[1].y, q[1].z, q[1].w), q6_unit_scales(r, u), 0.0);
}
