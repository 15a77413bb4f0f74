// Grouped expert product for many rows per expert (prefill): compute-bound, tiled.
//   A workgroup computes a BM×BN output tile: up to BM pairs of one expert (a tile of the sorted list)
//   × BN weight rows. K advances BK at a time through two k-major tiles in workgroup memory,
//   xs[k][m] and ws[k][n] (weights decoded from 16 bits or their quantized blocks once, on the way in), and each of the
//   (BM/4)·(BN/4) threads owns a 4×4 block of outputs: one k step is two vec4 reads for 16 FMAs.
//   Neighbouring threads read neighbouring ws vec4s (no bank conflicts) and share xs vec4s (broadcast).
//   Workgroups run tile-fastest, so the tiles of one expert read each weight tile close together (L2).

const BM: u32 = 64u;
const BN: u32 = 64u;
const BK: u32 = 16u;
const EPV: u32 = 8u;

const TX: u32 = BN / 4u;
const NT: u32 = (BM / 4u) * TX;
const E4: u32 = EPV / 4u;
const XKB: u32 = BK / 4u;           // x blocks (4 rows × 4 k) along k
const XB: u32 = (BM / 4u) * XKB;
const WKB: u32 = BK / EPV;          // weight blocks (4 rows × EPV k) along k
const WB: u32 = (BN / 4u) * WKB;

var<workgroup> xs: array<vec4<f32>, BK * BM / 4u>;
var<workgroup> ws: array<vec4<f32>, BK * BN / 4u>;
var<workgroup> prow: array<u32, BM>;

@compute @workgroup_size(NT)
fn gemm_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) li: u32) {
  let lin = wid.y * nwg.x + wid.x;
  let nnt = (params.N + BN - 1u) / BN;
  if (lin >= params.tiles * nnt) { return; }
  let tile = load_tile(lin % params.tiles, li, BM);
  if (tile.z == 0u) { return; }
  let n0 = (lin / params.tiles) * BN;
  let kc = params.K / EPV;
  let kc4 = params.K / 4u;
  let el = tile.x - params.e0;
  for (var r = li; r < BM; r += NT) {
    prow[r] = 0u;
    if (r < tile.z) { prow[r] = pair_at(tile.y + r); }
  }
  workgroupBarrier();
  let tx = li % TX;
  let ty = li / TX;

  var acc: array<vec4<f32>, 4>;
  for (var k0 = 0u; k0 < params.K; k0 += BK) {
    for (var b = li; b < XB; b += NT) {
      let mb = b / XKB;
      let c4 = k0 / 4u + b % XKB;
      var v: array<vec4<f32>, 4>;
      for (var i = 0u; i < 4u; i++) {
        v[i] = vec4<f32>(0.0);
        let m = mb * 4u + i;
        if (m < tile.z && c4 < kc4) { v[i] = x_load4(in_row(prow[m]), c4); }
      }
      for (var j = 0u; j < 4u; j++) {
        xs[((b % XKB) * 4u + j) * (BM / 4u) + mb] = vec4<f32>(v[0][j], v[1][j], v[2][j], v[3][j]);
      }
    }
    for (var b = li; b < WB; b += NT) {
      let nb = b / WKB;
      let kb = b % WKB;
      let c = k0 / EPV + kb;
      var d: array<array<vec4<f32>, E4>, 4>;
      for (var i = 0u; i < 4u; i++) {
        let n = n0 + nb * 4u + i;
        var word = vec4<u32>(0u);
        if (n < params.N && c < kc) { word = moe_w_word(el, n, c); }
        d[i][0] = w_lo(word);
        if (E4 == 2u) { d[i][E4 - 1u] = w_hi(word); }
      }
      for (var e = 0u; e < E4; e++) {
        for (var j = 0u; j < 4u; j++) {
          ws[(kb * EPV + e * 4u + j) * (BN / 4u) + nb] = vec4<f32>(d[0][e][j], d[1][e][j], d[2][e][j], d[3][e][j]);
        }
      }
    }
    workgroupBarrier();
    for (var k = 0u; k < BK; k++) {
      let a = xs[k * (BM / 4u) + ty];
      let bv = ws[k * (BN / 4u) + tx];
      for (var i = 0u; i < 4u; i++) { acc[i] = fma(vec4<f32>(a[i]), bv, acc[i]); }
    }
    workgroupBarrier();
  }

  for (var i = 0u; i < 4u; i++) {
    let m = ty * 4u + i;
    if (m < tile.z) {
      let o = prow[m] * params.N;
      for (var j = 0u; j < 4u; j++) {
        let n = n0 + tx * 4u + j;
        if (n < params.N) { out[o + n] = acc[i][j] + moe_bias(el, n); }
      }
    }
  }
}
