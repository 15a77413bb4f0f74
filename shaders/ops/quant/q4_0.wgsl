// Q4_0 (ggml's block_q4_0; shaders/ops/quant.wgsl has the layout on the GPU and the helpers): this
// type's q_load4 and q_unit32, one file a type so that a program compiles only its own decoder.

const Q_TYPE: u32 = 2u;
const QK: u32 = 32u;    // values a block
const QB: u32 = 16u;    // bytes a block keeps in the block array (its scale moved to the plane if split off)

/** Values 4c .. 4c + 3 of row n of the weight part: Q4_0: d · (q − 8); values 0..15 low nibbles, 16..31 high. */
fn q_load4(n: u32, c: u32) -> vec4<f32> {
  let at = q_at(n, c);
  return q_plane_f16(at.b) * (vec4<f32>(q_nibbles(qw(at.base + (at.i % 16u) / 4u), at.i >= 16u)) - 8.0);
}

/** Values 32u .. 32u + 31 of row n (the GEMV's unit): Q4_0: values 0..15 the low nibbles of the 16 bytes, 16..31 the high. */
fn q_unit32(n: u32, u: u32) -> array<vec4<f32>, 8> {
  var o: array<vec4<f32>, 8>;
  let units = params.K / 32u;
  let b = n * units + u;
  let d = q_plane_f16(b);
  let q = qv(b);
  o[0] = d * (vec4<f32>(q_nibbles(q.x, false)) - 8.0); o[1] = d * (vec4<f32>(q_nibbles(q.y, false)) - 8.0);
  o[2] = d * (vec4<f32>(q_nibbles(q.z, false)) - 8.0); o[3] = d * (vec4<f32>(q_nibbles(q.w, false)) - 8.0);
  o[4] = d * (vec4<f32>(q_nibbles(q.x, true)) - 8.0); o[5] = d * (vec4<f32>(q_nibbles(q.y, true)) - 8.0);
  o[6] = d * (vec4<f32>(q_nibbles(q.z, true)) - 8.0); o[7] = d * (vec4<f32>(q_nibbles(q.w, true)) - 8.0);
  return o;
}

/** The dot path's x scales (gemv_qdot.wgsl): values 0..15 are low nibbles, at bits 0 and 8 of each half word; 16..31 high, at 4 and 12. */
fn q_xscale(u: u32, j: u32) -> vec4<f32> {
  return select(vec4<f32>(1.0, 1.0 / 256.0, 1.0, 1.0 / 256.0), vec4<f32>(1.0 / 16.0, 1.0 / 4096.0, 1.0 / 16.0, 1.0 / 4096.0), j >= 4u);
}

/** The dot path's loads of a unit (gemv_qdot.wgsl): its 16 bytes of quants and its scale. */
struct QRaw { q: vec4<u32>, d: f32 }
fn q_raw(n: u32, u: u32) -> QRaw {
  let b = n * (params.K / 32u) + u;
  return QRaw(qv(b), q_plane_f16(b));
}

/** The dot path's unit (gemv_qdot.wgsl): word c's bytes 4c .. 4c + 3 hold values 4c .. 4c + 3 (low nibbles) and 16 + 4c .. (high), less 8. */
fn q_unit_q(r: QRaw, u: u32) -> QU {
  var o: QU;
  let lo = vec4<u32>(0xfu, 0xf00u, 0xfu, 0xf00u);
  let zl = vec4<f32>(8.0, 2048.0, 8.0, 2048.0);
  let zh = vec4<f32>(128.0, 32768.0, 128.0, 32768.0);
  for (var c = 0u; c < 4u; c++) {
    o.q[c] = q_magic(r.q[c], lo, zl);
    o.q[c + 4u] = q_magic(r.q[c], lo << vec4<u32>(4u), zh);
  }
  o.c = vec2<f32>(r.d);
  return o;
}
