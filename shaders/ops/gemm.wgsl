// The linear layer for many rows (prefill): a tiled GEMM, compute-bound, f32 FMA throughout.
//   - A workgroup computes a BM×BN tile of the output; its NT = (BM/TM)·(BN/TN) threads each own
//     TM×TN outputs as TM/4 × TN/4 blocks of 4×4, strided so that the vec4 reads of a k step from
//     workgroup memory are consecutive across neighbouring threads (no bank conflicts).
//   - K advances BK at a time through two tiles in workgroup memory, both transposed to k-major
//     (xs[k][m], ws[k][n]) so one k step is TM/4 + TN/4 vec4 reads for TM·TN FMAs. Weights arrive as
//     16-byte loads (4 rows × EPV k per thread block), are decoded from f16/bf16 once, on the way in.
//   - The next k tile's global loads are issued into registers before the current tile is computed
//     (one buffer in workgroup memory, its latency hidden behind the FMAs).
//   - Output-row tiles run fastest across workgroups, so the workgroups that share a weight tile run
//     together and read it from L2 after the first.

const BM: u32 = 128u;
const BN: u32 = 128u;
const BK: u32 = 16u;
const TM: u32 = 8u;
const TN: u32 = 8u;
const EPV: u32 = 8u;     // elements per 16-byte weight load: 4 f32, 8 f16/bf16

const TX: u32 = BN / TN;
const TY: u32 = BM / TM;
const NT: u32 = TX * TY;
const XKB: u32 = BK / 4u;                  // x blocks (4 rows × 4 k) per 4 rows of a k tile
const WKB: u32 = BK / EPV;                 // weight blocks (4 rows × EPV k) per 4 rows
const XB: u32 = (BM / 4u) * XKB;
const WB: u32 = (BN / 4u) * WKB;
const XPT: u32 = (XB + NT - 1u) / NT;      // x blocks per thread
const WPT: u32 = (WB + NT - 1u) / NT;      // weight blocks per thread
const E4: u32 = EPV / 4u;

var<workgroup> xs: array<vec4<f32>, BK * BM / 4u>;
var<workgroup> ws: array<vec4<f32>, BK * BN / 4u>;

@compute @workgroup_size(NT)
fn gemm_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) li: u32) {
  let lin = wid.y * nwg.x + wid.x;
  let nmt = (params.M + BM - 1u) / BM;
  let nnt = (params.N + BN - 1u) / BN;
  if (lin >= nmt * nnt) { return; }   // whole workgroups only: the barriers below stay uniform
  let m0 = (lin % nmt) * BM;
  let n0 = (lin / nmt) * BN;
  let tx = li % TX;
  let ty = li / TX;
  let kc = params.K / EPV;
  let kc4 = params.K / 4u;

  // The rows behind this thread's load blocks stay the same for every k tile.
  var xrow: array<i32, XPT * 4u>;
  for (var p = 0u; p < XPT; p++) {
    let b = li + p * NT;
    for (var i = 0u; i < 4u; i++) {
      xrow[p * 4u + i] = -1;
      if (b < XB) { xrow[p * 4u + i] = x_src_row(m0 + (b / XKB) * 4u + i); }
    }
  }
  var wrow: array<i32, WPT * 4u>;
  for (var p = 0u; p < WPT; p++) {
    let b = li + p * NT;
    for (var i = 0u; i < 4u; i++) {
      let n = n0 + (b / WKB) * 4u + i;
      wrow[p * 4u + i] = select(-1, i32(n), b < WB && n < params.N);
    }
  }

  var xr: array<vec4<f32>, XPT * 4u>;
  var wr: array<vec4<u32>, WPT * 4u>;
  var acc: array<vec4<f32>, TM * TN / 4u>;
  let ntiles = (params.K + BK - 1u) / BK;
  for (var t = 0u; t <= ntiles; t++) {
    if (t > 0u) {
      workgroupBarrier();
      for (var p = 0u; p < XPT; p++) {
        let b = li + p * NT;
        if (b < XB) {
          let mb = b / XKB;
          let kb = b % XKB;
          for (var j = 0u; j < 4u; j++) {
            xs[(kb * 4u + j) * (BM / 4u) + mb] = vec4<f32>(xr[p * 4u][j], xr[p * 4u + 1u][j], xr[p * 4u + 2u][j], xr[p * 4u + 3u][j]);
          }
        }
      }
      for (var p = 0u; p < WPT; p++) {
        let b = li + p * NT;
        if (b < WB) {
          let nb = b / WKB;
          let kb = b % WKB;
          var d: array<array<vec4<f32>, E4>, 4>;
          for (var i = 0u; i < 4u; i++) {
            d[i][0] = w_lo(wr[p * 4u + i]);
            if (E4 == 2u) { d[i][E4 - 1u] = w_hi(wr[p * 4u + i]); }
          }
          for (var e = 0u; e < E4; e++) {
            for (var j = 0u; j < 4u; j++) {
              ws[(kb * EPV + e * 4u + j) * (BN / 4u) + nb] = vec4<f32>(d[0][e][j], d[1][e][j], d[2][e][j], d[3][e][j]);
            }
          }
        }
      }
      workgroupBarrier();
    }
    if (t < ntiles) {
      // The next tile's loads, in flight while this one is computed.
      for (var p = 0u; p < XPT; p++) {
        let c4 = t * (BK / 4u) + (li + p * NT) % XKB;
        for (var i = 0u; i < 4u; i++) {
          xr[p * 4u + i] = vec4<f32>(0.0);
          if (c4 < kc4) { xr[p * 4u + i] = x_load4(xrow[p * 4u + i], c4); }
        }
      }
      for (var p = 0u; p < WPT; p++) {
        let c = t * WKB + (li + p * NT) % WKB;
        for (var i = 0u; i < 4u; i++) {
          wr[p * 4u + i] = vec4<u32>(0u);
          let n = wrow[p * 4u + i];
          if (n >= 0 && c < kc) { wr[p * 4u + i] = w_fetch(u32(n), kc, c); }
        }
      }
    }
    if (t > 0u) {
      for (var k = 0u; k < BK; k++) {
        var a: array<vec4<f32>, TM / 4u>;
        var bv: array<vec4<f32>, TN / 4u>;
        for (var g = 0u; g < TM / 4u; g++) { a[g] = xs[k * (BM / 4u) + g * TY + ty]; }
        for (var h = 0u; h < TN / 4u; h++) { bv[h] = ws[k * (BN / 4u) + h * TX + tx]; }
        for (var g = 0u; g < TM / 4u; g++) {
          for (var i = 0u; i < 4u; i++) {
            for (var h = 0u; h < TN / 4u; h++) {
              let ai = (g * 4u + i) * (TN / 4u) + h;
              acc[ai] = fma(vec4<f32>(a[g][i]), bv[h], acc[ai]);
            }
          }
        }
      }
    }
  }

  for (var g = 0u; g < TM / 4u; g++) {
    for (var i = 0u; i < 4u; i++) {
      let m = m0 + (g * TY + ty) * 4u + i;
      if (m >= params.M) { continue; }
      for (var h = 0u; h < TN / 4u; h++) {
        let v = acc[(g * 4u + i) * (TN / 4u) + h];
        for (var j = 0u; j < 4u; j++) {
          let n = n0 + (h * TX + tx) * 4u + j;
          if (n < params.N) { store_out(m, n, v[j]); }
        }
      }
    }
  }
}
