// Fused flash attention on subgroup matrices (chromium_experimental_subgroup_matrix: tensor cores on
// NVIDIA through VK_KHR_cooperative_matrix, simdgroup matrices on Apple). The same jobs, addressing
// hooks and results as flash_core.wgsl, for f16 data: Q, K, V and P are f16 matrices, every product
// accumulates in f32.
//
// The workgroup is NSG subgroups of SGW lanes (the planner takes adapters of one subgroup size).
// Subgroup sg owns RB row blocks of M rows, rows (sg·RB + rb)·M .. + M - 1 of the tile (BR = NSG·RB·M
// rows; rows are position·G + head-in-group, as in flash_core.wgsl); RB 2 shares each K and V matrix
// it loads between two products:
//   - its Q rows, staged once, stay in registers as DP/K left matrices (D padded with zeros to DP);
//   - per key tile of BC keys (K and V staged in workgroup memory as f16, zeros past the keys' end
//     and past D, Dv), S = Q·Kᵀ is BC/N result matrices (f32), written to workgroup memory;
//   - the subgroup's lanes read S back, a row to SG/M lanes, apply the score transforms
//     (flash_scores.wgsl) and the online softmax, and write P (f16) for the P·V product;
//   - O (M × DVP, f32) stays in registers as DVP/N result matrices: O += P·V.
// K and V tiles are staged in workgroup memory (zeros past the keys, D and Dv): for f16 rows (WORDS:
// the addressing's k_w / v_w views and kv_word_row, dense or through the block table), as raw 16-byte
// words, 8 values a load and no conversions, loaded into registers one tile ahead so the loads are in flight
// while the tile before computes. (Matrix loads straight from k and v, tried on an H200, ran 4x
// slower than the whole kernel staged: bench/notes/flash.md.)
// The rows' running max is updated lazily (FlashAttention-4): it moves only when a tile's max exceeds it
// by more than TAU (base 2), so P ≤ 2^TAU and O needs rescaling only then. A result matrix cannot be
// scaled row by row in registers: it goes through workgroup memory (BC/N matrices at a time), which
// the workgroup does only when some row moved (a flag read with workgroupUniformLoad keeps it uniform).
// The final O goes out the same way. Every subgroup-matrix call sits in workgroup-uniform control flow.
// SPLIT (f32 data; the GEMM's split x, gemm_mma.wgsl): every f32 operand becomes two f16 matrices, hi
// (its top 11 significant bits, by clearing mantissa bits: NVIDIA's compiler folds f32(f16(x)) back to
// x) and lo = f16(x − hi), about 22 bits of it; each product takes three matrix products, the two
// cross terms before hi·hi (lo·lo is below f32's rounding): S = Ql·Kh + Qh·Kl + Qh·Kh and O += Pl·Vh +
// Ph·Vl + Ph·Vh. Q, K, V and P each have a hi and a lo copy in workgroup memory. q, k and v past
// ±65504 (f16's range) are clamped there; P never is (P ≤ 2^TAU). The tensor units
// truncate as they add, so a sum of thousands of keys in one result matrix drifts towards zero (an H200:
// 1.6x the f32 tolerance at 4096 keys of one-signed values): every FL key tiles (and at every rescale)
// the split tile moves O into its lanes' f32 sums (oa) and starts the matrices again from zero.

const M: u32 = 16u;      // subgroup matrix rows (the adapter's configuration)
const N: u32 = 16u;      // result columns
const K: u32 = 16u;      // reduction depth
const NSG: u32 = 4u;     // subgroups
const RB: u32 = 1u;      // row blocks of M rows a subgroup
const SGW: u32 = 32u;    // the adapter's subgroup size: WG is NSG of them
const BC: u32 = 32u;     // keys per tile (a multiple of N and K)
const D: u32 = 64u;
const DV: u32 = 64u;

const WG: u32 = NSG * SGW;
const LPR: u32 = SGW / M;                  // lanes a row in the softmax (M ≤ SGW)
const SR: u32 = RB * M;                     // rows a subgroup
const BR: u32 = NSG * SR;
const DP: u32 = (D + K - 1u) / K * K;       // D padded to whole K steps
const DVP: u32 = (DV + N - 1u) / N * N;     // Dv padded to whole result matrices
const DS: u32 = DP + 8u;                    // row strides in workgroup memory (16 bytes of padding)
const VS: u32 = DVP + 8u;
const SS: u32 = BC + 4u;
const PS: u32 = BC + 8u;
const NQ: u32 = DP / K;                     // Q left matrices a row block
const NS: u32 = BC / N;                     // S result matrices a row block and tile
const NP: u32 = BC / K;                     // P left matrices a row block and tile
const NO: u32 = DVP / N;                    // O result matrices a row block
const NCH: u32 = (NO + NS - 1u) / NS;       // chunks of O through workgroup memory (NS matrices each)
const TAU: f32 = 8.0;
// Diagnostics (engine.tuning.flashMmaProbe; wrong results): 1 leaves out the staged K/V loads from
// global memory (the tiles keep their contents), 2 the score transforms, exponentials and P's stores
// (P keeps its contents), 3 the matrix products.
const PROBE: u32 = 0u;
const WORDS: bool = false;
const SPLIT: bool = false;
const NX: u32 = select(1u, 2u, SPLIT);      // f16 copies of each operand: hi (and lo)
const FL: u32 = 8u;                         // SPLIT: key tiles between moves of O into the lanes' f32 sums
// Q is staged a row block (NSG·M rows) at a time, through the K/V region: hi rows, then (SPLIT) lo rows.
// The K/V region: K hi [BC][DS] | (K lo) | V hi [BC][VS] | (V lo).
const KV_HALVES: u32 = max(NX * NSG * M * DS, NX * BC * (DS + VS));
const Q_LO: u32 = NSG * M * DS;
const K_LO: u32 = BC * DS;
const V_HI: u32 = NX * BC * DS;
const V_LO: u32 = V_HI + BC * VS;
const P_LO: u32 = NSG * SR * PS;            // P's lo copy, after its hi one
const CPL: u32 = BC / LPR;                  // score columns a lane handles a row
const NKW: u32 = (BC * (DP / 8u) + WG - 1u) / WG;    // K words (16 bytes) a thread stages per tile
const NVW: u32 = (BC * (DVP / 8u) + WG - 1u) / WG;   // V words
const NOA: u32 = select(1u, RB * NCH * (CPL / 4u), SPLIT);   // SPLIT: a lane's f32 sums of O (vec4s)

alias QMat = subgroup_matrix_left<f16, K, M>;
alias KMat = subgroup_matrix_right<f16, N, K>;
alias VMat = subgroup_matrix_right<f16, N, K>;
alias SMat = subgroup_matrix_result<f32, N, M>;

/** One workgroup's work, as flash_core.wgsl's. */
struct Job {
  b: u32, g: u32, row0: u32, rows: u32, Lq: u32, Lk: u32, k_lo: u32, k_hi: u32, partial: bool,
}

/** The invocation's place in its workgroup and subgroup, as the entry point receives it. */
struct Lanes {
  @builtin(local_invocation_index) li: u32,
  @builtin(subgroup_id) sg: u32,
  @builtin(subgroup_invocation_id) lane: u32,
}

// Q at first, then K [BC][DS] | V [BC][VS], as vec4<f16> (a store per four values, not one per value:
// 1.15x on an H200 in the GEMM, gemm_mma_vec.wgsl); matrix loads count offsets and strides in vec4s.
var<workgroup> kv_s: array<vec4<f16>, KV_HALVES / 4u>;
// S (and O on its way through), a region a subgroup, and P: as vec4s too (a lane's columns are
// contiguous, CPL a multiple of 4).
var<workgroup> s_s: array<vec4<f32>, NSG * SR * SS / 4u>;
var<workgroup> p_s: array<vec4<f16>, NX * NSG * SR * PS / 4u>;
const_assert CPL % 4u == 0u;
var<workgroup> alpha_s: array<f32, BR>;
var<workgroup> moved_s: array<u32, NSG>;

/** Key j's words of k (or v) from column d on (the addressing's k_w / v_w and kv_word_row): zeros past
 *  the keys, past the row, or where the row is missing. */
fn k_words(job: Job, j: u32, k_end: u32, d: u32) -> vec4<u32> {
  if (j < k_end && d < D) {
    let row = kv_word_row(job, j);
    if (row >= 0) { return k_w[u32(row) * (D / 8u) + d / 8u]; }
  }
  return vec4<u32>(0u);
}
fn v_words(job: Job, j: u32, k_end: u32, c: u32) -> vec4<u32> {
  if (j < k_end && c < DV) {
    let row = kv_word_row(job, j);
    if (row >= 0) { return v_w[u32(row) * (DV / 8u) + c / 8u]; }
  }
  return vec4<u32>(0u);
}

/** The words of a key tile that one thread stages (WORDS): K's, then V's. */
struct TileWords { kw: array<vec4<u32>, NKW>, vw: array<vec4<u32>, NVW> }

/** Thread li's words of the key tile from k0 on (zeros past k_end): loaded a tile ahead of their use. */
fn tile_words(job: Job, k0: u32, k_end: u32, li: u32) -> TileWords {
  var w: TileWords;
  for (var u = 0u; u < NKW; u++) {
    let e = li + u * WG;
    if (k0 < k_end && e < BC * (DP / 8u)) { w.kw[u] = k_words(job, k0 + e / (DP / 8u), k_end, 8u * (e % (DP / 8u))); }
  }
  for (var u = 0u; u < NVW; u++) {
    let e = li + u * WG;
    if (k0 < k_end && e < BC * (DVP / 8u)) { w.vw[u] = v_words(job, k0 + e / (DVP / 8u), k_end, 8u * (e % (DVP / 8u))); }
  }
  return w;
}

/** Thread li's words of a key tile into the K and V tiles of workgroup memory. */
fn put_tile_words(w: TileWords, li: u32) {
  for (var u = 0u; u < NKW; u++) {
    let e = li + u * WG;
    if (e < BC * (DP / 8u)) { put8((e / (DP / 8u)) * DS + 8u * (e % (DP / 8u)), w.kw[u]); }
  }
  for (var u = 0u; u < NVW; u++) {
    let e = li + u * WG;
    if (e < BC * (DVP / 8u)) { put8(V_HI + (e / (DVP / 8u)) * VS + 8u * (e % (DVP / 8u)), w.vw[u]); }
  }
}

/** Eight f16 values (four words) into an f16 row of workgroup memory (`at` a multiple of 8): two stores. */
fn put8(at: u32, w: vec4<u32>) {
  kv_s[at / 4u] = bitcast<vec4<f16>>(w.xy);
  kv_s[at / 4u + 1u] = bitcast<vec4<f16>>(w.zw);
}

/** Four values into an f16 row of workgroup memory (`at` a multiple of 4): one store; SPLIT: their hi
 *  parts at `at`, their lo parts at `lo`. */
fn put4(at: u32, lo: u32, v: vec4<f32>) {
  if (SPLIT) {
    let c = clamp(v, vec4<f32>(-65504.0), vec4<f32>(65504.0));
    let hv = split_hi4(c);
    kv_s[at / 4u] = vec4<f16>(hv);
    kv_s[lo / 4u] = vec4<f16>(c - hv);
  } else {
    kv_s[at / 4u] = vec4<f16>(v);
  }
}

/** v with the low 13 bits of each mantissa cleared: exact in f16 within its normal range (|v| ≤ 65504),
 *  v − hi exact in f32. */
fn split_hi4(v: vec4<f32>) -> vec4<f32> {
  return bitcast<vec4<f32>>(bitcast<vec4<u32>>(v) & vec4<u32>(0xffffe000u));
}

/**
 * Runs one job. Call from workgroup-uniform control flow. The matrix calls' offsets depend on the
 * subgroup id, uniform in its subgroup, which is what subgroup matrices need; the analysis sees it only
 * through the entry's Lanes struct (non-uniform as a whole, for its local index), hence the filter.
 */
@diagnostic(off, chromium.subgroup_matrix_uniformity)
fn flash_tile(job: Job, lanes: Lanes) {
  let li = lanes.li;
  let lane = lanes.lane;
  let G = params.G;
  let f = params.flags;
  let shift = i32(job.Lk) - i32(job.Lq);
  // The planner makes every subgroup SGW wide (adapters of one subgroup size), so there are NSG of
  // them. A subgroup's lanes: row rb·M + r (r = lane % M) of each row block, columns c0·CPL .. c0·CPL + CPL − 1.
  let sgi = min(lanes.sg, NSG - 1u);
  let r = lane % M;
  let c0 = lane / M;
  let sbase = sgi * SR * SS;
  let pbase = sgi * SR * PS;
  var r_ok: array<bool, RB>;
  var pos: array<u32, RB>;
  var hh: array<u32, RB>;
  var i_abs: array<i32, RB>;
  for (var rb = 0u; rb < RB; rb++) {
    let row = job.row0 + sgi * SR + rb * M + r;
    r_ok[rb] = lane < LPR * M && row < job.rows;
    let rr = min(row, job.rows - 1u);
    pos[rb] = rr / G;
    hh[rb] = job.g * G + rr % G;
    i_abs[rb] = i32(pos[rb]) + shift;
  }

  // Keys any row of the tile can see (as flash_core.wgsl).
  let last = min(job.row0 + BR, job.rows) - 1u;
  var k_end = job.k_hi;
  if ((f & FLAG_CAUSAL) != 0u) { k_end = min(k_end, u32(clamp(i32(last / G) + shift + 1, 0, i32(job.Lk)))); }
  if ((f & FLAG_WINDOW_BOTH) != 0u) { k_end = min(k_end, u32(clamp(i32(last / G) + shift + i32(params.window), 0, i32(job.Lk)))); }
  var k_begin = job.k_lo;
  if ((f & FLAG_WINDOW) != 0u) {
    k_begin = max(k_begin, u32(clamp(i32(job.row0 / G) + shift - i32(params.window) + 1, 0, i32(job.Lk))));
  }
  k_begin = job.k_lo + ((k_begin - job.k_lo) / BC) * BC;

  // ---- Q: staged a row block at a time (row rb·M + i of every subgroup), kept as left matrices.
  var qm: array<QMat, NX * RB * NQ>;      // hi row blocks, then (SPLIT) lo ones
  for (var rb = 0u; rb < RB; rb++) {
    workgroupBarrier();
    for (var e = li; e < NSG * M * (DP / 4u); e += WG) {
      let rq = e / (DP / 4u);                          // (subgroup, row) of this block
      let gr = job.row0 + (rq / M) * SR + rb * M + rq % M;
      let d = 4u * (e % (DP / 4u));
      var val = vec4<f32>(0.0);
      if (gr < job.rows && d < D) { val = q_load4(job, gr, d); }
      put4(rq * DS + d, Q_LO + rq * DS + d, val);
    }
    workgroupBarrier();
    for (var i = 0u; i < NQ; i++) {
      qm[rb * NQ + i] = subgroupMatrixLoad<QMat, row_major>(&kv_s, (sgi * M * DS + i * K) / 4u, DS / 4u);
      if (SPLIT) { qm[(RB + rb) * NQ + i] = subgroupMatrixLoad<QMat, row_major>(&kv_s, (Q_LO + sgi * M * DS + i * K) / 4u, DS / 4u); }
    }
  }

  var o: array<SMat, RB * NO>;
  for (var j = 0u; j < RB * NO; j++) { o[j] = SMat(); }
  var m: array<f32, RB>;
  var l: array<f32, RB>;
  for (var rb = 0u; rb < RB; rb++) { m[rb] = MASKED; l[rb] = 0.0; }

  let plain = (f & ~FLAG_CAUSAL) == 0u;   // no transform but scale and causality: the short path
  let causal = (f & FLAG_CAUSAL) != 0u;
  let sl2 = params.scale * LOG2E;
  var tw: TileWords;
  if (WORDS) { tw = tile_words(job, k_begin, k_end, li); }
  // SPLIT: the lane's share of O in f32 (row r of each row block, columns c0·CPL .. of each chunk).
  var oa: array<vec4<f32>, NOA>;
  for (var kt = k_begin; kt < k_end; kt += BC) {
    // ---- K and V tiles (f16, zeros outside the keys and past D, Dv).
    workgroupBarrier();
    if (WORDS) {
      if (PROBE != 1u) {
        put_tile_words(tw, li);
        // The next tile's words, in flight while this one computes.
        tw = tile_words(job, kt + BC, k_end, li);
      }
    } else {
      for (var e = li; e < BC * (DP / 4u); e += WG) {
        let kr = e / (DP / 4u);
        let d = 4u * (e % (DP / 4u));
        var val = vec4<f32>(0.0);
        if (PROBE == 1u) { continue; }
        if (kt + kr < k_end && d < D) { val = k_load4(job, kt + kr, d); }
        put4(kr * DS + d, K_LO + kr * DS + d, val);
      }
      for (var e = li; e < BC * (DVP / 4u); e += WG) {
        let kr = e / (DVP / 4u);
        let c = 4u * (e % (DVP / 4u));
        var val = vec4<f32>(0.0);
        if (PROBE == 1u) { continue; }
        if (kt + kr < k_end && c < DV) { val = v_load4(job, kt + kr, c); }
        put4(V_HI + kr * VS + c, V_LO + kr * VS + c, val);
      }
    }
    workgroupBarrier();

    // ---- S = Q·Kᵀ: Kᵀ's K × N blocks are K's rows read column-major, each serving the RB row blocks.
    for (var n = 0u; n < NS; n++) {
      var acc: array<SMat, RB>;
      for (var rb = 0u; rb < RB; rb++) { acc[rb] = SMat(); }
      for (var i = 0u; i < NQ; i++) {
        if (PROBE != 3u) {
          let kb = subgroupMatrixLoad<KMat, col_major>(&kv_s, (n * N * DS + i * K) / 4u, DS / 4u);
          if (SPLIT) {
            let kl = subgroupMatrixLoad<KMat, col_major>(&kv_s, (K_LO + n * N * DS + i * K) / 4u, DS / 4u);
            for (var rb = 0u; rb < RB; rb++) {
              acc[rb] = subgroupMatrixMultiplyAccumulate(qm[(RB + rb) * NQ + i], kb, acc[rb]);
              acc[rb] = subgroupMatrixMultiplyAccumulate(qm[rb * NQ + i], kl, acc[rb]);
            }
          }
          for (var rb = 0u; rb < RB; rb++) { acc[rb] = subgroupMatrixMultiplyAccumulate(qm[rb * NQ + i], kb, acc[rb]); }
        }
      }
      for (var rb = 0u; rb < RB; rb++) { subgroupMatrixStore<row_major>(&s_s, (sbase + rb * M * SS + n * N) / 4u, acc[rb], SS / 4u); }
    }
    workgroupBarrier();

    // ---- Online softmax of the subgroup's rows (lanes, scores in registers), lazily rescaled.
    var moved = false;
    for (var rb = 0u; rb < RB; rb++) {
      let srow = sbase + (rb * M + r) * SS;
      var xs: array<f32, CPL>;
      var mt = MASKED;
      for (var t4 = 0u; t4 < CPL / 4u; t4++) {
        let sv = s_s[(srow + c0 * CPL) / 4u + t4];
        for (var e = 0u; e < 4u; e++) {
          let j = kt + c0 * CPL + t4 * 4u + e;
          let s = sv[e];
          var x2: f32;
          if (plain) {
            x2 = select(MASKED, s * sl2, r_ok[rb] && j < k_end && (!causal || i32(j) <= i_abs[rb]));
          } else {
            x2 = score_x2(job, s, r_ok[rb] && j < k_end, hh[rb], pos[rb], j, i_abs[rb]);
          }
          if (PROBE == 2u) { x2 = s; }
          xs[t4 * 4u + e] = x2;
          mt = max(mt, x2);
        }
      }
      for (var off = M; off < SGW; off <<= 1u) { mt = max(mt, subgroupShuffleXor(mt, off)); }
      var alpha = 1.0;
      if (mt > m[rb] + TAU) {
        alpha = exp2(m[rb] - mt);
        m[rb] = mt;
      }
      var ls = 0.0;
      let prow = pbase + (rb * M + r) * PS;
      for (var t4 = 0u; t4 < CPL / 4u; t4++) {
        var pv: vec4<f32>;
        for (var e = 0u; e < 4u; e++) {
          let x2 = xs[t4 * 4u + e];
          pv[e] = select(0.0, exp2(x2 - m[rb]), x2 > VISIBLE_MIN);
        }
        if (PROBE != 2u) {
          if (SPLIT) {
            let ph = split_hi4(pv);
            p_s[(prow + c0 * CPL) / 4u + t4] = vec4<f16>(ph);
            p_s[(P_LO + prow + c0 * CPL) / 4u + t4] = vec4<f16>(pv - ph);
          } else {
            p_s[(prow + c0 * CPL) / 4u + t4] = vec4<f16>(pv);
          }
        }
        ls += pv.x + pv.y + pv.z + pv.w;
      }
      for (var off = M; off < SGW; off <<= 1u) { ls += subgroupShuffleXor(ls, off); }
      moved = moved || (alpha < 1.0 && l[rb] > 0.0);
      l[rb] = l[rb] * alpha + ls;
      if (c0 == 0u) { alpha_s[sgi * SR + rb * M + r] = alpha; }
    }
    let any_moved = subgroupAny(moved);
    if (lane == 0u) { moved_s[sgi] = select(0u, 1u, any_moved); }
    // (The barrier of this load also makes P visible.)
    let moved_all = workgroupUniformLoad(&moved_s);
    var rescale = false;
    for (var i = 0u; i < NSG; i++) { rescale = rescale || moved_all[i] != 0u; }

    // ---- Rows whose max moved: O through workgroup memory, NS matrices a row block at a time.
    // (Loops over o[] have constant bounds throughout, so compilers can keep o in registers.)
    // SPLIT: every FL tiles too, O moves into the lanes' f32 sums (scaled as they are) and restarts at 0.
    if (rescale || (SPLIT && ((kt - k_begin) / BC) % FL == FL - 1u)) {
      for (var ch = 0u; ch < NCH; ch++) {
        for (var rb = 0u; rb < RB; rb++) {
          for (var jj = 0u; jj < NS; jj++) {
            if (ch * NS + jj < NO) { subgroupMatrixStore<row_major>(&s_s, (sbase + rb * M * SS + jj * N) / 4u, o[rb * NO + ch * NS + jj], SS / 4u); }
          }
        }
        workgroupBarrier();
        for (var rb = 0u; rb < RB; rb++) {
          let a = alpha_s[sgi * SR + rb * M + r];
          for (var t4 = 0u; t4 < CPL / 4u; t4++) {
            let at = (sbase + (rb * M + r) * SS + c0 * CPL) / 4u + t4;
            if (SPLIT) {
              let ia = (rb * NCH + ch) * (CPL / 4u) + t4;
              oa[ia] = (oa[ia] + s_s[at]) * a;
            } else {
              s_s[at] *= a;
            }
          }
        }
        workgroupBarrier();
        if (!SPLIT) {
          for (var rb = 0u; rb < RB; rb++) {
            for (var jj = 0u; jj < NS; jj++) {
              if (ch * NS + jj < NO) { o[rb * NO + ch * NS + jj] = subgroupMatrixLoad<SMat, row_major>(&s_s, (sbase + rb * M * SS + jj * N) / 4u, SS / 4u); }
            }
          }
          workgroupBarrier();
        }
      }
      if (SPLIT) {
        for (var j = 0u; j < RB * NO; j++) { o[j] = SMat(); }
      }
    }

    // ---- O += P·V, each V matrix serving the RB row blocks.
    for (var kk = 0u; kk < NP; kk++) {
      if (PROBE != 3u) {
        var pm: array<QMat, NX * RB>;         // hi row blocks, then (SPLIT) lo ones
        for (var rb = 0u; rb < RB; rb++) { pm[rb] = subgroupMatrixLoad<QMat, row_major>(&p_s, (pbase + rb * M * PS + kk * K) / 4u, PS / 4u); }
        if (SPLIT) {
          for (var rb = 0u; rb < RB; rb++) { pm[RB + rb] = subgroupMatrixLoad<QMat, row_major>(&p_s, (P_LO + pbase + rb * M * PS + kk * K) / 4u, PS / 4u); }
        }
        for (var j = 0u; j < NO; j++) {
          let vb = subgroupMatrixLoad<VMat, row_major>(&kv_s, (V_HI + kk * K * VS + j * N) / 4u, VS / 4u);
          if (SPLIT) {
            let vl = subgroupMatrixLoad<VMat, row_major>(&kv_s, (V_LO + kk * K * VS + j * N) / 4u, VS / 4u);
            for (var rb = 0u; rb < RB; rb++) {
              o[rb * NO + j] = subgroupMatrixMultiplyAccumulate(pm[RB + rb], vb, o[rb * NO + j]);
              o[rb * NO + j] = subgroupMatrixMultiplyAccumulate(pm[rb], vl, o[rb * NO + j]);
            }
          }
          for (var rb = 0u; rb < RB; rb++) { o[rb * NO + j] = subgroupMatrixMultiplyAccumulate(pm[rb], vb, o[rb * NO + j]); }
        }
      }
    }
  }

  // ---- Sinks join the denominator only (never in a partition); normalize; out and lse, with O
  // going through workgroup memory NS matrices a row block at a time.
  var inv: array<f32, RB>;
  for (var rb = 0u; rb < RB; rb++) {
    let any_visible = m[rb] > VISIBLE_MIN;
    var mf = m[rb];
    var lf = l[rb];
    var keep = 1.0;
    if (r_ok[rb] && any_visible && !job.partial && (f & FLAG_SINKS) != 0u) {
      let s2 = head_sink(hh[rb]) * LOG2E;
      let mn = max(mf, s2);
      keep = exp2(mf - mn);
      lf = lf * keep + exp2(s2 - mn);
      mf = mn;
    }
    inv[rb] = select(0.0, keep / lf, any_visible);
    if (r_ok[rb] && c0 == 0u) {
      store_lse(job, hh[rb], pos[rb], select(NEG_INF_BITS, bitcast<u32>((mf + log2(lf)) * LN2), any_visible));
    }
  }
  for (var ch = 0u; ch < NCH; ch++) {
    workgroupBarrier();
    for (var rb = 0u; rb < RB; rb++) {
      for (var jj = 0u; jj < NS; jj++) {
        if (ch * NS + jj < NO) { subgroupMatrixStore<row_major>(&s_s, (sbase + rb * M * SS + jj * N) / 4u, o[rb * NO + ch * NS + jj], SS / 4u); }
      }
    }
    workgroupBarrier();
    if (SPLIT) {
      // The lanes' f32 sums join what the matrices hold.
      for (var rb = 0u; rb < RB; rb++) {
        for (var t4 = 0u; t4 < CPL / 4u; t4++) {
          s_s[(sbase + (rb * M + r) * SS + c0 * CPL) / 4u + t4] += oa[(rb * NCH + ch) * (CPL / 4u) + t4];
        }
      }
      workgroupBarrier();
    }
    for (var rb = 0u; rb < RB; rb++) {
      for (var c4 = c0; c4 < BC / 4u; c4 += LPR) {
        let col = ch * BC + 4u * c4;
        if (r_ok[rb] && col < DV) {
          let at = sbase + (rb * M + r) * SS + 4u * c4;
          store_out4(job, hh[rb], pos[rb], col, s_s[at / 4u] * inv[rb]);
        }
      }
    }
  }
}
