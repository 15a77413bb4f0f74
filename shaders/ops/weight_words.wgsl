// Weight words of the linear and expert kernels: 16 bytes hold 4 f32 or 8 f16/bf16 values (W_DTYPE,
// an override the including program declares).

/** Elements 0..3 (lo) and 4..7 (hi, 16-bit dtypes only) of a 16-byte weight word. */
fn w_lo(v: vec4<u32>) -> vec4<f32> {
  if (W_DTYPE == 0u) { return bitcast<vec4<f32>>(v); }
  return vec4<f32>(unpack_pair(v.x, W_DTYPE), unpack_pair(v.y, W_DTYPE));
}

fn w_hi(v: vec4<u32>) -> vec4<f32> {
  return vec4<f32>(unpack_pair(v.z, W_DTYPE), unpack_pair(v.w, W_DTYPE));
}
