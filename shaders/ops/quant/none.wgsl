// No quantized weights (the 16- and 32-bit linear programs): Q_TYPE 0, and decoders that are never
// called (the kernels test Q_TYPE first), so that the shared code compiles without any type's.

const Q_TYPE: u32 = 0u;
const QK: u32 = 32u;
const QB: u32 = 16u;

fn q_load4(n: u32, c: u32) -> vec4<f32> { return vec4<f32>(0.0); }

fn q_unit32(n: u32, u: u32) -> array<vec4<f32>, 8> { return array<vec4<f32>, 8>(); }
