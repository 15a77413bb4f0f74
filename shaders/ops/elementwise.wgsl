// Elementwise f32 kernels of a decoder layer: the residual add and the SiLU-gated product of the MLP.
// One thread per output element.
//   add_main:      out = x + y over n elements. IN_PLACE writes the sum back into x (out unused);
//                  SAME reads y from x (a + a), since one buffer cannot be bound twice when one
//                  binding is writable.
//   silu_mul_main: gu rows hold [gate | up] (I each, row stride gu_stride) -> out [rows, I] =
//                  silu(gate) · up, with silu(g) = g · sigmoid(g), the sigmoid formed from e^-|g| so
//                  it never meets an infinity.

override IN_PLACE: bool = false;
override SAME: bool = false;
const WG: u32 = 256u;

struct AddParams { n: u32 }
@group(0) @binding(0) var<uniform> add_params: AddParams;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read> y: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(WG)
fn add_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) lid: u32) {
  let i = (wid.y * nwg.x + wid.x) * WG + lid;
  if (i >= add_params.n) { return; }
  let a = x[i];
  var b: f32;
  if (SAME) { b = a; } else { b = y[i]; }
  if (IN_PLACE) { x[i] = a + b; } else { out[i] = a + b; }
}

// Binding numbers of their own (reflection binds by name; some compilers reject two variables at one
// binding even in different entry points).
struct SiluParams { rows: u32, I: u32, gu_stride: u32 }
@group(0) @binding(4) var<uniform> silu_params: SiluParams;
@group(0) @binding(5) var<storage, read> gu: array<f32>;
@group(0) @binding(6) var<storage, read_write> act: array<f32>;

fn silu(g: f32) -> f32 {
  let e = exp(-abs(g));
  let sig = select(e / (1.0 + e), 1.0 / (1.0 + e), g >= 0.0);
  return g * sig;
}

@compute @workgroup_size(WG)
fn silu_mul_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) lid: u32) {
  let i = (wid.y * nwg.x + wid.x) * WG + lid;
  let I = silu_params.I;
  if (i >= silu_params.rows * I) { return; }
  let m = i / I;
  let j = i % I;
  let b = m * silu_params.gu_stride;
  act[i] = silu(gu[b + j]) * gu[b + I + j];
}
