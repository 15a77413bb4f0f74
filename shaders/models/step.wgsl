// A model step's token ids: the host writes each row's id, or -(1 + r) for a sequence whose last token
// is still on the GPU (row r of the previous step's sampled ids), so the next step can be recorded and
// submitted before the previous one's tokens come back to the host.

struct Params { rows: u32, prev_rows: u32, _p0: u32, _p1: u32 }

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> ids_in: array<i32>;
@group(0) @binding(2) var<storage, read> prev: array<i32>;
@group(0) @binding(3) var<storage, read_write> ids_out: array<i32>;

@compute @workgroup_size(64)
fn ids_main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let t = gid.x;
  if (t >= params.rows) { return; }
  let v = ids_in[t];
  var id = v;
  if (v < 0) {
    // Clamped: a bad row never reads outside the previous step's ids.
    id = prev[min(u32(-(v + 1)), max(params.prev_rows, 1u) - 1u)];
  }
  ids_out[t] = id;
}
