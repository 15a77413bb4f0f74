// Per-request logits processing before sampling, on the logits of a serving step's sampled rows
// [rows, V]: what the host knows per request, applied in place.
//
// adjust_main: sparse edits, one thread each: entry e = (row, token, rep, add) makes
//   l = l > 0 ? l / rep : l · rep   (HF's repetition penalty; rep 1 leaves it),   then l += add
//   (presence and frequency penalties, logit bias, folded into one add per token by the host).
// mask_main: a bit mask per constrained row (bit t of word t/32 set = token t allowed): the others
//   become -inf. Workgroups (x: V / 256, y: the masked row's index among mask_rows).

struct Params { V: u32, n: u32, neg_inf: f32, }

struct Edit { row: u32, token: u32, rep: f32, add: f32, }

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read_write> logits: array<f32>;
@group(0) @binding(2) var<storage, read> edits: array<Edit>;
@group(0) @binding(3) var<storage, read> masks: array<u32>;
@group(0) @binding(4) var<storage, read> mask_rows: array<u32>;

@compute @workgroup_size(64)
fn adjust_main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let e = gid.y * nwg.x * 64u + gid.x;
  if (e >= params.n) { return; }
  let d = edits[e];
  let i = d.row * params.V + d.token;
  var l = logits[i];
  if (d.rep != 1.0) { l = select(l * d.rep, l / d.rep, l > 0.0); }
  logits[i] = l + d.add;
}

@compute @workgroup_size(256)
fn mask_main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
  let t = gid.x;
  if (t >= params.V || wid.y >= params.n) { return; }
  let W = (params.V + 31u) / 32u;
  let allowed = (masks[wid.y * W + t / 32u] >> (t % 32u)) & 1u;
  // -inf comes from the host: a WGSL constant cannot be infinite.
  if (allowed == 0u) { logits[mask_rows[wid.y] * params.V + t] = params.neg_inf; }
}
