// Pointwise activations shared by the programs that apply them (elementwise.wgsl's gated products and
// activations, conv.wgsl's fused GELU): sigmoid and tanh formed from e^-|v| so they never meet an
// infinity; erfc from Numerical Recipes' Chebyshev fit (fractional error below 1.2e-7 everywhere), as
// WGSL has no erf; exact GELU through it and GELU's tanh form.

fn sigmoid(v: f32) -> f32 {
  let e = exp(-abs(v));
  return select(e / (1.0 + e), 1.0 / (1.0 + e), v >= 0.0);
}

fn silu(g: f32) -> f32 { return g * sigmoid(g); }

fn tanh_stable(v: f32) -> f32 {
  let e = exp(-2.0 * abs(v));
  return sign(v) * (1.0 - e) / (1.0 + e);
}

/** erfc(z) for z >= 0. */
fn erfc_pos(z: f32) -> f32 {
  let t = 1.0 / (1.0 + 0.5 * z);
  let p = -1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806
        + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))));
  return t * exp(-z * z + p);
}

fn gelu(v: f32) -> f32 {
  // v/2 · erfc(-v/√2): erfc of a negative argument is 2 - erfc of its magnitude.
  let z = v * 0.70710678118654752;
  let c = erfc_pos(abs(z));
  return 0.5 * v * select(c, 2.0 - c, z > 0.0);
}

fn gelu_tanh(v: f32) -> f32 {
  return 0.5 * v * (1.0 + tanh_stable(0.79788456080286536 * (v + 0.044715 * v * v * v)));
}
