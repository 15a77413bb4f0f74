// Elementwise f32 kernels of a transformer layer: the residual add, the gated product of an MLP and
// the pointwise activations. One thread per output element.
//   add_main:      out = x + y over n elements. IN_PLACE writes the sum back into x (out unused);
//                  SAME reads y from x (a + a), since one buffer cannot be bound twice when one
//                  binding is writable.
//   silu_mul_main: gu rows hold gate and up (row stride gu_stride; [gate | up], I each, or
//                  INTERLEAVED g0,u0,g1,u1 ...) -> out [rows, I] = act(gate) · up, act by GATE:
//                  0 silu(g) = g · sigmoid(g); 1 exact GELU, g/2 · erfc(-g/√2); 2 GELU's tanh form;
//                  3 gpt-oss's clamped SwiGLU, (clamp(up, ±limit) + 1) · g · sigmoid(alpha · g) with
//                  g = min(gate, limit).
//   act_main:      out = f(x) · scale over n elements (IN_PLACE: back into x), f by ACT: 0 none,
//                  1 exact GELU, 2 GELU's tanh form, 3 relu, 4 tanh, 5 soft cap, cap · tanh(x / cap).
// The activations themselves are activation.wgsl's (prepended to this program).

override IN_PLACE: bool = false;
override SAME: bool = false;
override GATE: u32 = 0u;
override INTERLEAVED: bool = false;
override ACT: u32 = 0u;
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
struct SiluParams { rows: u32, I: u32, gu_stride: u32, alpha: f32, limit: f32 }
@group(0) @binding(4) var<uniform> silu_params: SiluParams;
@group(0) @binding(5) var<storage, read> gu: array<f32>;
@group(0) @binding(6) var<storage, read_write> act: array<f32>;

fn gated(g: f32, u: f32) -> f32 {
  switch (GATE) {
    case 1u: { return gelu(g) * u; }
    case 2u: { return gelu_tanh(g) * u; }
    case 3u: {
      let gc = min(g, silu_params.limit);
      let uc = clamp(u, -silu_params.limit, silu_params.limit);
      return (uc + 1.0) * gc * sigmoid(silu_params.alpha * gc);
    }
    default: { return silu(g) * u; }
  }
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
  if (INTERLEAVED) {
    act[i] = gated(gu[b + 2u * j], gu[b + 2u * j + 1u]);
  } else {
    act[i] = gated(gu[b + j], gu[b + I + j]);
  }
}

struct ActParams { n: u32, cap: f32, scale: f32 }
@group(0) @binding(7) var<uniform> act_params: ActParams;

fn activation(v: f32) -> f32 {
  switch (ACT) {
    case 1u: { return gelu(v); }
    case 2u: { return gelu_tanh(v); }
    case 3u: { return max(v, 0.0); }
    case 4u: { return tanh_stable(v); }
    case 5u: { return act_params.cap * tanh_stable(v / act_params.cap); }
    default: { return v; }
  }
}

@compute @workgroup_size(WG)
fn act_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) lid: u32) {
  let i = (wid.y * nwg.x + wid.x) * WG + lid;
  if (i >= act_params.n) { return; }
  let y = activation(x[i]) * act_params.scale;
  if (IN_PLACE) { x[i] = y; } else { out[i] = y; }
}
