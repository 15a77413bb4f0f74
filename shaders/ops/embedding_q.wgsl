// Embedding lookup from a quantized table (ops/quant.wgsl: ggml's blocks, dequantized here as the
// linear layers do): out[r, :] = table[ids[r], :] as f32, 4 values a thread; one dispatch a part of
// the table, as embedding.wgsl does (ids outside [0, V) give zeros, written by the ZERO_OOB dispatch).

override ZERO_OOB: bool = true;
const WG: u32 = 256u;

struct Params { rows: u32, H: u32, V: u32, row0: u32, part_rows: u32, K: u32, q_plane: u32 }

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> ids: array<i32>;
@group(0) @binding(2) var<storage, read> w: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read_write> out: array<vec4<f32>>;

@compute @workgroup_size(WG)
fn embedding_q_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                    @builtin(local_invocation_index) lid: u32) {
  let i = (wid.y * nwg.x + wid.x) * WG + lid;   // a group of 4 values
  let h4 = params.H / 4u;
  if (i >= params.rows * h4) { return; }
  let r = i / h4;
  let id = ids[r];
  if (id < 0 || u32(id) >= params.V) {
    if (ZERO_OOB) { out[i] = vec4<f32>(0.0); }
    return;
  }
  let lr = u32(id) - params.row0;   // wraps past part_rows for ids below row0
  if (lr >= params.part_rows) { return; }
  out[i] = q_load4(lr, i % h4);
}
