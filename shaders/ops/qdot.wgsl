// The x side and the sum of the quantized GEMVs' dot path (gemv_qdot.wgsl, moe_gemv_qdot.wgsl), for the
// types whose files give q_xscale and q_unit_q (ops/quant.wgsl has QU and q_magic, which those files use).

/** A lane's x values of one unit for one x row: scaled as the type's quants lie (q_xscale), and their plain sum. */
struct QX { v: array<vec4<f32>, 8>, s: f32 }

/** A unit's 32 x values (unit u of a row, as loaded) for the dot path: scaled by q_xscale, with their sum. */
fn q_xunit(v: array<vec4<f32>, 8>, u: u32) -> QX {
  var o: QX;
  var s = vec4<f32>(0.0);
  for (var j = 0u; j < 8u; j++) {
    s += v[j];
    o.v[j] = v[j] * q_xscale(u, j);
  }
  o.s = s.x + s.y + s.z + s.w;
  return o;
}

/** Σ over the unit of w·x for one x row. */
fn q_dot(w: QU, x: QX) -> f32 {
  let a = dot(w.q[0], x.v[0]) + dot(w.q[1], x.v[1]) + dot(w.q[2], x.v[2]) + dot(w.q[3], x.v[3]);
  let b = dot(w.q[4], x.v[4]) + dot(w.q[5], x.v[5]) + dot(w.q[6], x.v[6]) + dot(w.q[7], x.v[7]);
  return w.c.x * a + w.c.y * b - w.o * x.s;
}
