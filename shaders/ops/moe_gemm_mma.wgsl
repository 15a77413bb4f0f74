// The grouped expert products (moe_io.wgsl) on the subgroup-matrix GEMM (gemm_mma.wgsl): a workgroup
// takes one tile of the sorted pair list (up to BM pairs of one expert, moe_sort.wgsl) times BN rows of
// that expert's weights; tile row r is pair prow[r]: its input row (the token's hidden state, or the
// gated [gate | up] row) in, its output row out (plus the expert's bias where it has one). The tile's rows are scattered, so every result
// goes through workgroup memory (gemm_mma_main's epilogue).

var<workgroup> prow: array<u32, BM>;
var<private> tile_rows: u32;   // pairs in this tile
var<private> el: u32;          // the tile's expert, local to this part

fn mma_x_row(r: u32) -> i32 { return select(-1, i32(in_row(prow[r])), r < tile_rows); }
fn mma_x_load4(row: i32, c4: u32) -> vec4<f32> {
  if (row < 0) { return vec4<f32>(0.0); }
  return x_load4(u32(row), c4);
}
fn mma_w_word(n: u32, c: u32) -> vec4<u32> {
  let row = el * params.N + n;
  return w[row * (params.K / EPV) + c];
}
// Quantized weights come a unit at a time (gemm_mma.wgsl's stage_load), rounded to f16 (W_DTYPE 1).
fn mma_w_unit(n: u32, u: u32) -> array<vec4<u32>, 4> { return q_f16_unit(el * params.N + n, u); }
fn mma_store(r: u32, n: u32, v: f32) {
  if (r < tile_rows) { out[prow[r] * params.N + n] = v + moe_bias(el, n); }
}

// Workgroup lin's tile: the pair-list tiles fastest, then BN-column blocks; every result through the
// epilogue (the rows are scattered).
fn mma_tile(lin: u32, li: u32) -> vec3<u32> {
  let nnt = (params.N + BN - 1u) / BN;
  if (lin >= params.tiles * nnt) { return vec3<u32>(0u); }
  let tile = load_tile(lin % params.tiles, li, BM);
  if (tile.z == 0u) { return vec3<u32>(0u); }
  el = tile.x - params.e0;
  tile_rows = tile.z;
  for (var r = li; r < BM; r += WG) {
    prow[r] = 0u;
    if (r < tile.z) { prow[r] = pair_at(tile.y + r); }
  }
  workgroupBarrier();
  return vec3<u32>(1u, (lin / params.tiles) * BN, 0u);
}
fn mma_k_range(lin: u32, ntiles: u32) -> vec2<u32> { return vec2<u32>(0u, ntiles); }
fn mma_direct_base(sr: u32, sc: u32, n0: u32) -> u32 { return 0u; }
fn mma_direct_stride() -> u32 { return params.N; }
