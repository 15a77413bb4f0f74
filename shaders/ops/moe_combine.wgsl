// The last step of a MoE layer: each token's expert outputs, weighted by the router, summed in slot
// order (so the result does not depend on how pairs were grouped) and written, or added, to out.
//   out[t0 + t] (+)= Σ_j weights[t0 + t, j] · y[t·topK + j]   over slots j whose id is in [0, E)
// One thread per vec4 of an output row.

struct CombineParams {
  rows: u32,
  t0: u32,
  top_k: u32,
  H4: u32,
  E: u32,
  accumulate: u32,
}

@group(0) @binding(0) var<uniform> cp: CombineParams;
@group(0) @binding(1) var<storage, read> ids: array<i32>;
@group(0) @binding(2) var<storage, read> weights: array<f32>;
@group(0) @binding(3) var<storage, read> y: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> out: array<vec4<f32>>;

@compute @workgroup_size(256)
fn combine_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) li: u32) {
  let i = (wid.y * nwg.x + wid.x) * 256u + li;
  if (i >= cp.rows * cp.H4) { return; }
  let t = i / cp.H4;
  let c = i % cp.H4;
  let tg = cp.t0 + t;
  var acc = vec4<f32>(0.0);
  for (var j = 0u; j < cp.top_k; j++) {
    let e = ids[tg * cp.top_k + j];
    if (e >= 0 && u32(e) < cp.E) { acc += weights[tg * cp.top_k + j] * y[(t * cp.top_k + j) * cp.H4 + c]; }
  }
  let o = tg * cp.H4 + c;
  if (cp.accumulate != 0u) { acc += out[o]; }
  out[o] = acc;
}
