// The grouped expert products (moe_io.wgsl) on the subgroup-matrix GEMM (gemm_mma.wgsl): a workgroup
// takes one tile of the sorted pair list (up to BM pairs of one expert, moe_sort.wgsl) times BN rows of
// that expert's weights; tile row r is pair prow[r]: its input row (the token's hidden state, or the
// SiLU-gated [gate | up] row) in, its output row out. The tile's rows are scattered, so every result
// goes through workgroup memory (mma_epilogue).

var<workgroup> prow: array<u32, BM>;
var<private> tile_rows: u32;   // pairs in this tile
var<private> wbase: u32;       // the expert's first weight word in this part

fn mma_x_row(r: u32) -> i32 { return select(-1, i32(in_row(prow[r])), r < tile_rows); }
fn mma_x_load4(row: i32, c4: u32) -> vec4<f32> {
  if (row < 0) { return vec4<f32>(0.0); }
  return x_load4(u32(row), c4);
}
fn mma_w_word(n: u32, c: u32) -> vec4<u32> { return w[wbase + n * (params.K / EPV) + c]; }
fn mma_store(r: u32, n: u32, v: f32) {
  if (r < tile_rows) { out[prow[r] * params.N + n] = v; }
}

@compute @workgroup_size(WG)
fn moe_mma_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) li: u32, @builtin(subgroup_id) sg_id: u32,
                @builtin(subgroup_invocation_id) lane: u32) {
  let lin = wid.y * nwg.x + wid.x;
  let nnt = (params.N + BN - 1u) / BN;
  if (lin >= params.tiles * nnt) { return; }
  let tile = load_tile(lin % params.tiles, li, BM);
  if (tile.z == 0u) { return; }
  let n0 = (lin / params.tiles) * BN;
  wbase = (tile.x - params.e0) * params.N * (params.K / EPV);
  tile_rows = tile.z;
  for (var r = li; r < BM; r += WG) {
    prow[r] = 0u;
    if (r < tile.z) { prow[r] = pair_at(tile.y + r); }
  }
  workgroupBarrier();
  let sg = min(sg_id, NSG - 1u);
  var acc: array<AMat, TMR * TNC>;
  for (var a = 0u; a < TMR * TNC; a++) { acc[a] = AMat(); }
  mma_mainloop(&acc, li, sg, n0);
  mma_epilogue(&acc, sg, lane, n0);
}
