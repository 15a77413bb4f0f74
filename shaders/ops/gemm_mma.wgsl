// The linear layer for many rows (prefill) on subgroup matrices (chromium_experimental_subgroup_matrix:
// tensor cores on NVIDIA through VK_KHR_cooperative_matrix, simdgroup matrices on Apple), for 16-bit
// weights (f16, or bf16 converted to f16 on the way in: exact within f16's range; weights past ±65504
// are clamped to it, those below 2^-24 in magnitude flush to zero). The same bindings, fused prologues
// and epilogue as gemm.wgsl (gemm_io.wgsl).
//   - A workgroup of NSG = SGR·SGC subgroups computes a BM×BN output tile; subgroup (sr, sc) owns
//     TMR×TNC result matrices (SM×SN each, f32), rows sr·TMR·SM.., columns sc·TNC·SN.., in registers.
//   - K advances BK at a time through workgroup memory: the x tile as f16 rows [BM][XS] (row-major left
//     matrices) and the weight tile as its rows [BN][XS] (Wᵀ's K×N blocks read column-major), each row
//     padded by 16 bytes. The next tile's global loads (x as vec4, weights as 16-byte words) are issued
//     into registers before the current tile's products.
//   - x is f32: SPLIT writes it as two f16 matrices, hi (x's top 11 significant bits) and lo = f16(x − hi),
//     and multiplies both (x·W = hi·W + lo·W: about 22 bits of x kept, f32 accuracy at twice the products); without
//     SPLIT x is rounded to f16 once (f16 activations: f16 tolerances). Values past ±65504 are clamped.
//   - The result goes straight from the matrices to `out` where the tile lies wholly inside the output
//     and there is no bias (accumulation: the matrices start from what `out` holds); elsewhere it goes
//     through workgroup memory a matrix at a time to gemm_io.wgsl's store_out.
// Every subgroup-matrix call sits in workgroup-uniform control flow; the offsets depend on the subgroup
// id, uniform in its subgroup (hence the diagnostic filter).

const SM: u32 = 16u;     // matrix rows (the adapter's configuration: M)
const SN: u32 = 16u;     // result columns (N)
const SK: u32 = 16u;     // depth (K)
const SGW: u32 = 32u;    // the adapter's subgroup size
const SGR: u32 = 2u;     // subgroups along the tile's rows
const SGC: u32 = 4u;     // ... and columns
const TMR: u32 = 4u;     // row matrices a subgroup
const TNC: u32 = 2u;     // column matrices a subgroup
const BK: u32 = 32u;     // k a tile (a multiple of SK and 8)
const SPLIT: bool = true;
const TW: bool = false;   // the weight tile stored k-major [BK][WS] (right matrices read row-major)
// Diagnostics (engine.tuning.linearMmaProbe; wrong results): 1 leaves out the tiles' stores to workgroup
// memory, 2 the matrix products (and their loads), 3 the global loads.
const PROBE: u32 = 0u;
const PF: u32 = 1u;      // k tiles whose global loads are in flight ahead of the one multiplied (1 or 2)
const EPV: u32 = 8u;     // weight elements a 16-byte word (16-bit weights only)

const NSG: u32 = SGR * SGC;
const WG: u32 = NSG * SGW;
const BM: u32 = SGR * TMR * SM;
const BN: u32 = SGC * TNC * SN;
const XS: u32 = BK + 8u;                    // f16 row stride of both tiles
const WS: u32 = BN + 8u;                    // ... of the k-major weight tile (TW)
const NX: u32 = select(1u, 2u, SPLIT);      // x matrices: hi (and lo)
const XV: u32 = BK / 4u;                    // x vec4s a tile row
const WV: u32 = BK / EPV;                   // weight words a tile row
const XL: u32 = (BM * XV + WG - 1u) / WG;   // x vec4s a thread stages a tile
const WL: u32 = (BN * WV + WG - 1u) / WG;   // weight words a thread stages a tile
// Quantized weights are staged a 32-value unit a thread (mma_w_unit: the block's scales decoded once a
// unit, the quants with 16-byte loads; a word of 8 values a thread through q_load4 read and decoded the
// block's scales for every 4 values): UPR units a tile row, UL a thread, 4 words each.
const UPR: u32 = BK / 32u;
const UL: u32 = (BN * UPR + WG - 1u) / WG;
const WA: u32 = select(WL, max(WL, 4u * UL), Q_TYPE != 0u);   // words a thread holds
const ES: u32 = SN;                         // f32 row stride of the epilogue's scratch (unpadded: it fits the
                                            // split 128×256 tile in 48 KiB; only edge tiles and biases use it)
const F16_MAX: f32 = 65504.0;

alias LMat = subgroup_matrix_left<f16, SK, SM>;
alias RMat = subgroup_matrix_right<f16, SN, SK>;
alias AMat = subgroup_matrix_result<f32, SN, SM>;

// The program supplies the addressing: mma_x_row(r) (tile row r's input row, -1: zeros), mma_x_load4(row,
// c4), mma_w_word(n, c) (word c of 16-bit weight row n), mma_w_unit(n, u) (quantized: unit u of row n as 4 f16
// words), mma_store(r, n, v) and the tile hooks of gemm_mma_main
// below (gemm_mma_linear.wgsl: the linear layer; moe_gemm_mma.wgsl: the grouped expert products).
// The x tile xt (hi rows, then lo rows) and the weight tile wt, with put_x4 and put_w_word, come from
// gemm_mma_scalar.wgsl (f16 arrays) or gemm_mma_vec.wgsl (vec4<f16> arrays: VEC), with TE, the f16 values an
// element: matrix offsets and strides count elements.
var<workgroup> et: array<f32, NSG * SM * ES>;  // a result matrix a subgroup, on its way to store_out

/** One thread's share of a k tile, loaded a tile ahead of its use. */
struct Stage { xv: array<vec4<f32>, XL>, wv: array<vec4<u32>, WA> }

/** Thread li's global loads of the k tile t: x vec4s (rows xrow, -1: zeros) and weight words (rows wrow;
 *  quantized weights: units, rows urow). */
fn stage_load(t: u32, li: u32, xrow: array<i32, XL>, wrow: array<i32, WL>, urow: array<i32, UL>) -> Stage {
  var s: Stage;
  let kc4 = params.K / 4u;
  let kc = params.K / EPV;
  for (var u = 0u; u < XL; u++) {
    let c4 = t * XV + (li + u * WG) % XV;
    s.xv[u] = vec4<f32>(0.0);
    if (c4 < kc4) { s.xv[u] = mma_x_load4(xrow[u], c4); }
  }
  if (Q_TYPE != 0u) {
    let ku = params.K / 32u;
    for (var k = 0u; k < UL; k++) {
      let u = t * UPR + (li + k * WG) % UPR;
      var ws = array<vec4<u32>, 4>();
      if (urow[k] >= 0 && u < ku) { ws = mma_w_unit(u32(urow[k]), u); }
      for (var j = 0u; j < 4u; j++) { s.wv[4u * k + j] = ws[j]; }
    }
    return s;
  }
  for (var u = 0u; u < WL; u++) {
    let c = t * WV + (li + u * WG) % WV;
    s.wv[u] = vec4<u32>(0u);
    if (wrow[u] >= 0 && c < kc) { s.wv[u] = mma_w_word(u32(wrow[u]), c); }
  }
  return s;
}

/** Two 16-bit weights of a word as f16 (bf16 through f32, clamped to f16's range). */
fn w_pair(word: u32) -> vec2<f16> {
  if (W_DTYPE == 1u) { return bitcast<vec2<f16>>(word); }
  let f = vec2<f32>(bitcast<f32>(word << 16u), bitcast<f32>(word & 0xffff0000u));
  return vec2<f16>(clamp(f, vec2<f32>(-F16_MAX), vec2<f32>(F16_MAX)));
}

/** Thread li's share of a k tile into workgroup memory (x split or rounded to f16). */
fn stage_put(s: Stage, li: u32) {
  for (var u = 0u; u < XL; u++) {
    let e = li + u * WG;
    if (e < BM * XV) {
      let at = (e / XV) * XS + 4u * (e % XV);
      let v = clamp(s.xv[u], vec4<f32>(-F16_MAX), vec4<f32>(F16_MAX));
      if (SPLIT) {
        // hi: v with its low 13 mantissa bits cleared (exact in f16 within its normal range); lo = v − hi,
        // exact in f32, then rounded to f16. (Bits, not f32(f16(v)): compilers fold that round trip to v.)
        let hi = bitcast<vec4<f32>>(bitcast<vec4<u32>>(v) & vec4<u32>(0xffffe000u));
        put_x4(at, vec4<f16>(hi));
        put_x4(BM * XS + at, vec4<f16>(v - hi));
      } else {
        put_x4(at, vec4<f16>(v));
      }
    }
  }
  if (Q_TYPE != 0u) {
    for (var k = 0u; k < UL; k++) {
      let e = li + k * WG;
      if (e < BN * UPR) {
        for (var j = 0u; j < 4u; j++) { put_w_word(e / UPR, 32u * (e % UPR) + 8u * j, s.wv[4u * k + j]); }
      }
    }
    return;
  }
  for (var u = 0u; u < WL; u++) {
    let e = li + u * WG;
    if (e < BN * WV) { put_w_word(e / WV, EPV * (e % WV), s.wv[u]); }
  }
}

// The entry point. The program supplies mma_k_range(lin, ntiles) -> the k tiles [x, y) workgroup lin
// multiplies (all ntiles, or a share of them: split-K; a function of lin alone, so uniform), and
// mma_tile(lin, li) -> (active, n0, mode) for workgroup lin (it
// may set private state and use barriers: it is called in workgroup-uniform control flow, and its
// `active` must be uniform), mode 0 for the epilogue through workgroup memory, 1 for the matrices straight
// to out at mma_direct_base(sr, sc, n0) (row stride mma_direct_stride()), 2 the same starting from what
// out holds (accumulating). One function, with no pointers to the matrices: run 55 measured the split
// GEMM 17% slower with the main loop and epilogue as functions over a pointer to acc.
@diagnostic(off, chromium.subgroup_matrix_uniformity)
@compute @workgroup_size(WG)
fn gemm_mma_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) li: u32, @builtin(subgroup_id) sg_id: u32,
                 @builtin(subgroup_invocation_id) lane: u32) {
  let tile = mma_tile(wid.y * nwg.x + wid.x, li);
  if (tile.x == 0u) { return; }   // whole workgroups only: the barriers below stay uniform
  let n0 = tile.y;
  // The planner makes every subgroup SGW wide, so there are NSG of them.
  let sg = min(sg_id, NSG - 1u);
  let sr = sg / SGC;
  let sc = sg % SGC;
  let obase = mma_direct_base(sr, sc, n0);
  let ostride = mma_direct_stride();
  var acc: array<AMat, TMR * TNC>;
  for (var a = 0u; a < TMR * TNC; a++) { acc[a] = AMat(); }
  if (tile.z == 2u) {
    for (var a = 0u; a < TMR * TNC; a++) {
      acc[a] = subgroupMatrixLoad<AMat, row_major>(&out, obase + (a / TNC) * SM * ostride + (a % TNC) * SN, ostride);
    }
  }

  // The rows behind this thread's loads stay the same for every k tile.
  var xrow: array<i32, XL>;
  for (var u = 0u; u < XL; u++) {
    let e = li + u * WG;
    xrow[u] = -1;
    if (e < BM * XV) { xrow[u] = mma_x_row(e / XV); }
  }
  var wrow: array<i32, WL>;
  for (var u = 0u; u < WL; u++) {
    let e = li + u * WG;
    let n = n0 + e / WV;
    wrow[u] = select(-1, i32(n), e < BN * WV && n < params.N);
  }
  var urow: array<i32, UL>;
  for (var k = 0u; k < UL; k++) {
    let e = li + k * WG;
    let n = n0 + e / UPR;
    urow[k] = select(-1, i32(n), e < BN * UPR && n < params.N);
  }

  // The k tiles [kr.x, kr.y) of this workgroup: all of them, or a split's share (split-K).
  let kr = mma_k_range(wid.y * nwg.x + wid.x, (params.K + BK - 1u) / BK);
  // PF tiles' loads in flight: s0 holds even tiles' (counted from kr.x), s1 odd ones' (PF 2); the step
  // loop's h picks one (a constant-trip loop, so no register array is indexed at run time).
  var s0 = stage_load(kr.x, li, xrow, wrow, urow);
  var s1: Stage;
  if (PF == 2u && kr.y > kr.x + 1u) { s1 = stage_load(kr.x + 1u, li, xrow, wrow, urow); }
  for (var t0 = kr.x; t0 < kr.y; t0 += PF) {
   for (var h = 0u; h < PF; h++) {
    let t = t0 + h;
    if (t >= kr.y) { break; }
    workgroupBarrier();
    if (PROBE != 1u) { if (h == 0u) { stage_put(s0, li); } else { stage_put(s1, li); } }
    workgroupBarrier();
    // Tile t + PF's loads, in flight while this one is multiplied.
    if (t + PF < kr.y && PROBE != 3u) {
      if (h == 0u) { s0 = stage_load(t + PF, li, xrow, wrow, urow); } else { s1 = stage_load(t + PF, li, xrow, wrow, urow); }
    }
    for (var kk = 0u; kk < select(BK / SK, 0u, PROBE == 2u); kk++) {
      var rm: array<RMat, TNC>;
      for (var j = 0u; j < TNC; j++) {
        if (TW) {
          rm[j] = subgroupMatrixLoad<RMat, row_major>(&wt, (kk * SK * WS + (sc * TNC + j) * SN) / TE, WS / TE);
        } else {
          rm[j] = subgroupMatrixLoad<RMat, col_major>(&wt, ((sc * TNC + j) * SN * XS + kk * SK) / TE, XS / TE);
        }
      }
      for (var i = 0u; i < TMR; i++) {
        let xa = (sr * TMR + i) * SM * XS + kk * SK;
        let hi = subgroupMatrixLoad<LMat, row_major>(&xt, xa / TE, XS / TE);
        for (var j = 0u; j < TNC; j++) { acc[i * TNC + j] = subgroupMatrixMultiplyAccumulate(hi, rm[j], acc[i * TNC + j]); }
        if (SPLIT) {
          let lo = subgroupMatrixLoad<LMat, row_major>(&xt, (BM * XS + xa) / TE, XS / TE);
          for (var j = 0u; j < TNC; j++) { acc[i * TNC + j] = subgroupMatrixMultiplyAccumulate(lo, rm[j], acc[i * TNC + j]); }
        }
      }
    }
   }
  }

  if (tile.z != 0u) {
    for (var a = 0u; a < TMR * TNC; a++) {
      subgroupMatrixStore<row_major>(&out, obase + (a / TNC) * SM * ostride + (a % TNC) * SN, acc[a], ostride);
    }
    return;
  }
  // Elsewhere: a matrix at a time through workgroup memory, each output (tile row r, column n < N)
  // through the program's mma_store.
  for (var a = 0u; a < TMR * TNC; a++) {
    workgroupBarrier();
    subgroupMatrixStore<row_major>(&et, sg * SM * ES, acc[a], ES);
    workgroupBarrier();
    let rb = (sr * TMR + a / TNC) * SM;
    let nb = n0 + (sc * TNC + a % TNC) * SN;
    for (var e = lane; e < SM * SN; e += SGW) {
      let n = nb + e % SN;
      if (n < params.N) { mma_store(rb + e / SN, n, et[sg * SM * ES + (e / SN) * ES + e % SN]); }
    }
  }
}
