// Embedding lookup: out[r, :] = table[ids[r], :] as f32, for a table of f32, f16 or bf16 (16-bit
// tables as u32 words of two elements). A huge table (an lm_head-sized vocabulary) is split over
// buffers by rows; one dispatch serves one part [row0, row0 + part_rows) and writes only the output
// rows whose id falls in it, and the dispatch with ZERO_OOB also writes zeros for ids outside
// [0, V), so together the parts write every row once and nothing reads outside a buffer.

override TD: u32 = 0u;            // table dtype: 0 f32, 1 f16, 2 bf16
override ZERO_OOB: bool = true;
const WG: u32 = 256u;

struct Params { rows: u32, H: u32, V: u32, row0: u32, part_rows: u32 }

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> ids: array<i32>;
@group(0) @binding(2) var<storage, read> table: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(WG)
fn embedding_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                  @builtin(local_invocation_index) lid: u32) {
  let i = (wid.y * nwg.x + wid.x) * WG + lid;
  if (i >= params.rows * params.H) { return; }
  let r = i / params.H;
  let j = i % params.H;
  let id = ids[r];
  if (id < 0 || u32(id) >= params.V) {
    if (ZERO_OOB) { out[i] = 0.0; }
    return;
  }
  let lr = u32(id) - params.row0;   // wraps past part_rows for ids below row0
  if (lr >= params.part_rows) { return; }
  let e = lr * params.H + j;
  out[i] = unpack_elem(table[word_of(e, TD)], (e & 1u) == 1u, TD);
}
