// MLA decode attention on subgroup matrices (chromium_experimental_subgroup_matrix: tensor cores on
// NVIDIA, simdgroup matrices on Apple), for paged.wgsl's addressing over a latent cache: the
// absorbed path's MQA, N query heads (the rows) over one kv head's latent rows of D = L+R values,
// whose first DV = L values are V. The same jobs, hooks and results as mla_core.wgsl.
//
// The rows are too wide for one subgroup: Q (BR × D, f16) and O (BR × DV, f32) would take over 200
// registers a lane as matrices. So the NSG subgroups of a workgroup share its BR = RB·M heads and split
// the work two ways:
//   - S = Q·Kᵀ over the D reduction: subgroup sg takes k-steps of slice sg % DSPLIT (Q's matrices of
//     that slice stay in its registers, NQS a row block) and score column blocks of slice sg / DSPLIT;
//     the DSPLIT partial scores meet in workgroup memory (s_part);
//   - O += P·V over the output columns: subgroup sg owns NOS result matrices a row block, columns
//     (sg·NOS + j)·N .. + N − 1.
// Each key tile of BC latent rows is staged once in workgroup memory as f16 (raw 16-byte words through
// the addressing's k_w and kv_word_row, zeros past the keys and past D, loaded into registers a tile
// ahead; bf16 and fp8_ds_mla rows decoded on the way and rounded to f16) and serves both products: V
// is K's first DV columns, read from the same staged rows.
// The softmax is the workgroup's: TPR threads a row (consecutive lanes of one subgroup), CPT columns
// each, partial scores summed, the running max moved lazily (FlashAttention-4: only when a tile's max
// passes it by TAU, base 2, so P ≤ 2^TAU), P written in f16. O is rescaled only when some row moved,
// through workgroup memory one matrix a subgroup at a time (a result matrix cannot be scaled by row in
// registers); the final O goes out the same way.
//
// The same tile serves GQA decode over plain K/V caches (SEPV): a kv head's G query heads of one token are
// the rows, V rows come from the V cache and are staged in a tile of their own, after the key tile in
// kv_s (VOFF, row stride VS). Rows of 16 with G live waste matrix work, not bandwidth: the tensor units
// have ample headroom at decode's arithmetic intensity, and what the FMA decode kernel spends on each
// lane's redundant softmax goes away.
//
// Only what MLA decode asks: every key in [k_lo, k_hi) is visible (split caches mask other parts' keys
// through key_in_part), no window, softcap, ALiBi or sinks. The host (PagedAttentionPlan) chooses this
// kernel only then, for 16-bit or fp8_ds_mla latent rows, where the adapter has f16 → f32 subgroup
// matrices.
// Every subgroup-matrix call sits in workgroup-uniform control flow.

const M: u32 = 16u;      // subgroup matrix rows (the adapter's configuration)
const N: u32 = 16u;      // result columns
const K: u32 = 16u;      // reduction depth
const NSG: u32 = 8u;     // subgroups
const SGW: u32 = 32u;    // the adapter's subgroup size: WG is NSG of them
const RB: u32 = 1u;      // row blocks of M heads a workgroup
const BC: u32 = 32u;     // keys a tile (a multiple of N·NSG/DSPLIT and of K)
const DSPLIT: u32 = 4u;  // subgroups splitting the scores' D reduction (divides NSG)
const D: u32 = 576u;
const DV: u32 = 512u;
const SEPV: bool = false;  // V rows from the V cache (GQA decode), staged after K's; else K's first DV columns
// Diagnostics (engine.tuning.mlaMmaProbe; wrong results): 1 leaves out the staged K loads from global
// memory, 2 the softmax (P keeps its contents), 3 the matrix products, 4 everything but the staging
// (the loads and their stores to workgroup memory).
const PROBE: u32 = 0u;

const WG: u32 = NSG * SGW;
const BR: u32 = RB * M;                        // heads a workgroup
const CSPLIT: u32 = NSG / DSPLIT;              // subgroups splitting the score columns
const NQ: u32 = (D + K - 1u) / K;              // k-steps of the scores
const NQS: u32 = (NQ + DSPLIT - 1u) / DSPLIT;  // a subgroup's k-steps (its Q matrices a row block)
const DP: u32 = NQS * DSPLIT * K;              // D padded with zeros to whole slices
const DS: u32 = DP + 8u;                        // staged row stride, f16 (16 bytes of padding)
const NSC: u32 = BC / N;                        // score matrices a row block and tile
const NSCS: u32 = NSC / CSPLIT;                 // a subgroup's
const NOS: u32 = (DV + N * NSG - 1u) / (N * NSG);   // O matrices a row block a subgroup
const NP: u32 = BC / K;                         // P left matrices a row block and tile
const SSP: u32 = BC + 4u;                       // s_part row stride, f32
const PS: u32 = BC + 8u;                        // p_s row stride, f16
const TPR: u32 = WG / BR;                       // softmax threads a row
const CPT: u32 = BC / TPR;                      // score columns a softmax thread
const OG: u32 = M * N / 4u;                     // 4-column groups of a result matrix
const TAU: f32 = 8.0;                           // the lazy rescale's threshold (engine.tuning.mlaMmaTau)
const NKW: u32 = (BC * (DP / 8u) + WG - 1u) / WG;   // 16-byte words a thread stages a tile
const KV_ROWS: u32 = max(BC, M);                // staged rows: a key tile, or a row block of Q
const SCR: u32 = max(DSPLIT * BR * SSP, NSG * M * N);
const DVP: u32 = NOS * NSG * N;                 // DV padded to whole result matrices of every subgroup
const VS: u32 = DVP + 8u;                       // staged V row stride, f16 (SEPV)
const NVW: u32 = select(1u, (BC * (DVP / 8u) + WG - 1u) / WG, SEPV);   // 16-byte V words a thread stages a tile
const VOFF: u32 = select(0u, BC * DS, SEPV);    // the value tile's place in kv_s, f16 (SEPV: after the key tile)
const VST: u32 = select(DS, VS, SEPV);          // its row stride

const_assert NSG % DSPLIT == 0u;
const_assert NSC % CSPLIT == 0u && NSCS >= 1u;
const_assert BC % K == 0u;
const_assert WG % BR == 0u && TPR <= SGW && SGW % TPR == 0u && CPT >= 1u && BC % TPR == 0u;
const_assert SEPV || NOS * NSG * N <= DS;       // P·V reads V columns inside the staged rows
const_assert D % 8u == 0u;

alias QMat = subgroup_matrix_left<f16, K, M>;
alias KMat = subgroup_matrix_right<f16, N, K>;
alias VMat = subgroup_matrix_right<f16, N, K>;
alias SMat = subgroup_matrix_result<f32, N, M>;

/** One workgroup's work, as flash_core.wgsl's (paged.wgsl builds it). */
struct Job {
  b: u32, g: u32, row0: u32, rows: u32, Lq: u32, Lk: u32, k_lo: u32, k_hi: u32, partial: bool,
}

/** The invocation's place in its workgroup and subgroup, as the entry point receives it. */
struct Lanes {
  @builtin(local_invocation_index) li: u32,
  @builtin(subgroup_id) sg: u32,
  @builtin(subgroup_invocation_id) lane: u32,
}

// The key tile [BC][DS] (a row block of Q at first), then with SEPV the value tile [BC][VS]; f16 as vec4s:
// matrix offsets and strides in vec4s.
var<workgroup> kv_s: array<vec4<f16>, max(KV_ROWS * DS, VOFF + select(0u, BC * VS, SEPV)) / 4u>;
// Partial scores [DSPLIT][BR][SSP]; also O's matrices on their way through (M × N a subgroup).
var<workgroup> s_part: array<f32, SCR>;
var<workgroup> p_s: array<f16, BR * PS>;
var<workgroup> alpha_s: array<f32, BR>;
var<workgroup> moved_s: array<u32, NSG>;

/** Eight values as f16 pairs, clamped to f16's finite range (packing past it is indeterminate). */
fn pack8(a: vec4<f32>, b: vec4<f32>) -> vec4<u32> {
  let ca = clamp(a, vec4<f32>(-65504.0), vec4<f32>(65504.0));
  let cb = clamp(b, vec4<f32>(-65504.0), vec4<f32>(65504.0));
  return vec4<u32>(pack2x16float(ca.xy), pack2x16float(ca.zw), pack2x16float(cb.xy), pack2x16float(cb.zw));
}

/** Two e4m3 codes (the low 16 bits of c) as the f16 bits of their values / 256: e4m3's exponent (4 bits,
 *  bias 7) read as f16's (5 bits, bias 15) and its 3 mantissa bits moved up. Exact, subnormals
 *  included; e4m3's NaN code, which cacheWrite never stores (it saturates at ±448), reads as 480. */
fn e4m3x2_f16(c: u32) -> u32 {
  return ((c & 0x7fu) << 7u) | ((c & 0x80u) << 8u) | ((c & 0x7f00u) << 15u) | ((c & 0x8000u) << 16u);
}

/** Eight values of fp8_ds_mla row `row` from column d (a multiple of 8) as f16 pairs: e4m3 codes times
 *  their group's scale, or the bf16 rope values (the row's layout: paged.wgsl ds_mla_scale, ds_mla_rope4). */
fn ds_mla8(row: u32, d: u32) -> vec4<u32> {
  let base = row * params.mla_row_words;
  if (d < params.mla_l) {
    let s = 256.0 * ds_mla_scale(base, d);
    let a = k_cache[base + d / 4u];
    let b = k_cache[base + d / 4u + 1u];
    return pack8(vec4<f32>(unpack2x16float(e4m3x2_f16(a)), unpack2x16float(e4m3x2_f16(a >> 16u))) * s,
                 vec4<f32>(unpack2x16float(e4m3x2_f16(b)), unpack2x16float(e4m3x2_f16(b >> 16u))) * s);
  }
  return pack8(ds_mla_rope4(base, d), ds_mla_rope4(base, d + 4u));
}

/** The cache rows (kv_word_row; -1: missing or past k_end) of the keys of thread li's words of the key
 *  tile from k0 on: looked up a tile before the words are loaded, so a word's load never waits on its
 *  block-table read (the loop's staging was bound by that chain: bench/notes/paged.md, run 81). */
fn tile_rows(job: Job, k0: u32, k_end: u32, li: u32) -> array<i32, NKW> {
  var r: array<i32, NKW>;
  for (var u = 0u; u < NKW; u++) {
    let j = k0 + (li + u * WG) / (DP / 8u);
    r[u] = -1;
    if (j < k_end && (KV_DTYPE == 1u || KV_DTYPE == 4u)) { r[u] = kv_word_row(job, j); }
  }
  return r;
}

/** Thread li's words of the key tile from k0 on (zeros past k_end, past D or where the row is missing):
 *  f16 rows as they are stored (rows: tile_rows of the same k0); FlashMLA's fp8_ds_mla rows decoded
 *  eight values at a time (ds_mla8) and bf16 rows through the addressing's k_load4, rounded to f16. */
fn tile_words(job: Job, k0: u32, k_end: u32, li: u32, rows: array<i32, NKW>) -> array<vec4<u32>, NKW> {
  var w: array<vec4<u32>, NKW>;
  for (var u = 0u; u < NKW; u++) {
    let e = li + u * WG;
    let j = k0 + e / (DP / 8u);
    let d = 8u * (e % (DP / 8u));
    let row = rows[u];
    w[u] = vec4<u32>(0u);
    if (e < BC * (DP / 8u) && j < k_end && d < D) {
      if (KV_DTYPE == 1u) {
        if (row >= 0) { w[u] = k_w[u32(row) * (D / 8u) + d / 8u]; }
      } else if (KV_DTYPE == 4u) {
        if (row >= 0) { w[u] = ds_mla8(u32(row), d); }
      } else {
        w[u] = pack8(k_load4(job, j, d), k_load4(job, j, d + 4u));
      }
    }
  }
  return w;
}

/** SEPV: the cache rows of the keys of thread li's words of the value tile, as tile_rows. */
fn v_tile_rows(job: Job, k0: u32, k_end: u32, li: u32) -> array<i32, NVW> {
  var r: array<i32, NVW>;
  for (var u = 0u; u < NVW; u++) {
    let j = k0 + (li + u * WG) / (DVP / 8u);
    r[u] = -1;
    if (SEPV && j < k_end && KV_DTYPE == 1u) { r[u] = kv_word_row(job, j); }
  }
  return r;
}

/** SEPV: thread li's words of the value tile from k0 on (zeros past k_end, past DV or where the row is
 *  missing): f16 rows as stored (rows: v_tile_rows of the same k0), others through the addressing's
 *  v_load4, rounded to f16. */
fn v_tile_words(job: Job, k0: u32, k_end: u32, li: u32, rows: array<i32, NVW>) -> array<vec4<u32>, NVW> {
  var w: array<vec4<u32>, NVW>;
  for (var u = 0u; u < NVW; u++) {
    let e = li + u * WG;
    let j = k0 + e / (DVP / 8u);
    let d = 8u * (e % (DVP / 8u));
    let row = rows[u];
    w[u] = vec4<u32>(0u);
    if (SEPV && e < BC * (DVP / 8u) && j < k_end && d < DV) {
      if (KV_DTYPE == 1u) {
        if (row >= 0) { w[u] = v_w[u32(row) * (DV / 8u) + d / 8u]; }
      } else {
        w[u] = pack8(v_load4(job, j, d), v_load4(job, j, d + 4u));
      }
    }
  }
  return w;
}

/** SEPV: thread li's words into the value tile (kv_s from VOFF). */
fn put_v_words(w: array<vec4<u32>, NVW>, li: u32) {
  for (var u = 0u; u < NVW; u++) {
    let e = li + u * WG;
    if (SEPV && e < BC * (DVP / 8u)) {
      let at = VOFF + (e / (DVP / 8u)) * VS + 8u * (e % (DVP / 8u));
      kv_s[at / 4u] = bitcast<vec4<f16>>(w[u].xy);
      kv_s[at / 4u + 1u] = bitcast<vec4<f16>>(w[u].zw);
    }
  }
}

/** Thread li's words into the key tile. */
fn put_tile_words(w: array<vec4<u32>, NKW>, li: u32) {
  for (var u = 0u; u < NKW; u++) {
    let e = li + u * WG;
    if (e < BC * (DP / 8u)) {
      let at = (e / (DP / 8u)) * DS + 8u * (e % (DP / 8u));
      kv_s[at / 4u] = bitcast<vec4<f16>>(w[u].xy);
      kv_s[at / 4u + 1u] = bitcast<vec4<f16>>(w[u].zw);
    }
  }
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
  // The planner makes every subgroup SGW wide (adapters of one subgroup size), so there are NSG.
  let sgi = min(lanes.sg, NSG - 1u);
  let dsl = sgi % DSPLIT;        // the scores' k-step slice
  let csl = sgi / DSPLIT;        // the scores' column slice
  // Softmax: row srow of the tile, columns sp·CPT .. sp·CPT + CPT − 1.
  let srow = li / TPR;
  let sp = li % TPR;
  let s_ok = job.row0 + srow < job.rows;

  // ---- Q: staged a row block at a time (zeros past the heads and past D), kept as left matrices.
  var qm: array<QMat, RB * NQS>;
  for (var rb = 0u; rb < RB; rb++) {
    workgroupBarrier();
    for (var e = li; e < M * (DP / 4u); e += WG) {
      let r = e / (DP / 4u);
      let d = 4u * (e % (DP / 4u));
      let gr = job.row0 + rb * M + r;
      var val = vec4<f32>(0.0);
      if (gr < job.rows && d < D) { val = q_load4(job, gr, d); }
      kv_s[(r * DS + d) / 4u] = vec4<f16>(val);
    }
    workgroupBarrier();
    for (var i = 0u; i < NQS; i++) {
      qm[rb * NQS + i] = subgroupMatrixLoad<QMat, row_major>(&kv_s, ((dsl * NQS + i) * K) / 4u, DS / 4u);
    }
  }

  var o: array<SMat, RB * NOS>;
  for (var j = 0u; j < RB * NOS; j++) { o[j] = SMat(); }
  var m = MASKED;   // row srow's running max (base 2) and sum, the same in each of its TPR threads
  var l = 0.0;
  let sl2 = params.scale * LOG2E;
  let k_end = job.k_hi;
  var tw = tile_words(job, job.k_lo, k_end, li, tile_rows(job, job.k_lo, k_end, li));
  var vw = v_tile_words(job, job.k_lo, k_end, li, v_tile_rows(job, job.k_lo, k_end, li));
  var tr = tile_rows(job, job.k_lo + BC, k_end, li);
  var vr = v_tile_rows(job, job.k_lo + BC, k_end, li);
  for (var kt = job.k_lo; kt < k_end; kt += BC) {
    // ---- The key (and value) tile (this thread's words, loaded a tile ago), then the next tile's words
    // in flight (their rows looked up a tile ago), then the rows of the tile after.
    workgroupBarrier();
    if (PROBE != 1u) {
      put_tile_words(tw, li);
      tw = tile_words(job, kt + BC, k_end, li, tr);
      tr = tile_rows(job, kt + 2u * BC, k_end, li);
      if (SEPV) {
        put_v_words(vw, li);
        vw = v_tile_words(job, kt + BC, k_end, li, vr);
        vr = v_tile_rows(job, kt + 2u * BC, k_end, li);
      }
    }
    workgroupBarrier();
    if (PROBE == 4u) { continue; }

    // ---- Partial scores: this subgroup's k-steps of its column blocks, each K matrix serving RB row blocks.
    for (var n = 0u; n < NSCS; n++) {
      let cb = csl * NSCS + n;
      var acc: array<SMat, RB>;
      for (var rb = 0u; rb < RB; rb++) { acc[rb] = SMat(); }
      for (var i = 0u; i < NQS; i++) {
        if (PROBE != 3u) {
          let kb = subgroupMatrixLoad<KMat, col_major>(&kv_s, (cb * N * DS + (dsl * NQS + i) * K) / 4u, DS / 4u);
          for (var rb = 0u; rb < RB; rb++) { acc[rb] = subgroupMatrixMultiplyAccumulate(qm[rb * NQS + i], kb, acc[rb]); }
        }
      }
      for (var rb = 0u; rb < RB; rb++) {
        subgroupMatrixStore<row_major>(&s_part, (dsl * BR + rb * M) * SSP + cb * N, acc[rb], SSP);
      }
    }
    workgroupBarrier();

    // ---- Online softmax, row srow: the partial scores summed, the max moved lazily, P in f16.
    var xs: array<f32, CPT>;
    var mt = MASKED;
    for (var c = 0u; c < CPT; c++) {
      let col = sp * CPT + c;
      let j = kt + col;
      var x = 0.0;
      for (var t = 0u; t < DSPLIT; t++) { x += s_part[(t * BR + srow) * SSP + col]; }
      xs[c] = select(MASKED, x * sl2, s_ok && j < k_end && key_in_part(job, j));
      if (PROBE == 2u) { xs[c] = x; }
      mt = max(mt, xs[c]);
    }
    for (var off = 1u; off < TPR; off <<= 1u) { mt = max(mt, subgroupShuffleXor(mt, off)); }
    var alpha = 1.0;
    if (mt > m + TAU) {
      alpha = exp2(m - mt);
      m = mt;
    }
    var ls = 0.0;
    for (var c = 0u; c < CPT; c++) {
      let p = select(0.0, exp2(xs[c] - m), xs[c] > VISIBLE_MIN);
      if (PROBE != 2u) { p_s[srow * PS + sp * CPT + c] = f16(p); }
      ls += p;
    }
    for (var off = 1u; off < TPR; off <<= 1u) { ls += subgroupShuffleXor(ls, off); }
    let moved = alpha < 1.0 && l > 0.0;
    l = l * alpha + ls;
    if (sp == 0u) { alpha_s[srow] = alpha; }
    let any_moved = subgroupAny(moved);
    if (lane == 0u) { moved_s[sgi] = select(0u, 1u, any_moved); }
    // (The barrier of this load also makes P and alpha visible.)
    let moved_all = workgroupUniformLoad(&moved_s);
    var rescale = false;
    for (var i = 0u; i < NSG; i++) { rescale = rescale || moved_all[i] != 0u; }

    // ---- Rows whose max moved: O through workgroup memory, a matrix a subgroup at a time.
    if (rescale) {
      for (var j = 0u; j < RB * NOS; j++) {
        subgroupMatrixStore<row_major>(&s_part, sgi * M * N, o[j], N);
        workgroupBarrier();
        let rb = j / NOS;
        for (var g = lane; g < OG; g += SGW) {
          let at = sgi * M * N + 4u * g;
          let a = alpha_s[rb * M + (4u * g) / N];
          for (var e = 0u; e < 4u; e++) { s_part[at + e] *= a; }
        }
        workgroupBarrier();
        o[j] = subgroupMatrixLoad<SMat, row_major>(&s_part, sgi * M * N, N);
        workgroupBarrier();
      }
    }

    // ---- O += P·V: V's K × N blocks are the staged value rows (SEPV) or the staged rows' first DV
    // columns, each serving RB row blocks.
    for (var kk = 0u; kk < NP; kk++) {
      if (PROBE != 3u) {
        var pm: array<QMat, RB>;
        for (var rb = 0u; rb < RB; rb++) { pm[rb] = subgroupMatrixLoad<QMat, row_major>(&p_s, rb * M * PS + kk * K, PS); }
        for (var j = 0u; j < NOS; j++) {
          let vb = subgroupMatrixLoad<VMat, row_major>(&kv_s, (VOFF + kk * K * VST + (sgi * NOS + j) * N) / 4u, VST / 4u);
          for (var rb = 0u; rb < RB; rb++) { o[rb * NOS + j] = subgroupMatrixMultiplyAccumulate(pm[rb], vb, o[rb * NOS + j]); }
        }
      }
    }
  }

  // ---- Normalize; lse by the row's first softmax thread; O out a matrix a subgroup at a time.
  let any_visible = m > VISIBLE_MIN;
  let hs = job.g * params.G + (job.row0 + srow) % params.G;
  let ps = (job.row0 + srow) / params.G;
  workgroupBarrier();
  if (sp == 0u) {
    alpha_s[srow] = select(0.0, 1.0 / l, any_visible);
    if (s_ok) { store_lse(job, hs, ps, select(NEG_INF_BITS, bitcast<u32>((m + log2(l)) * LN2), any_visible)); }
  }
  for (var j = 0u; j < RB * NOS; j++) {
    workgroupBarrier();
    subgroupMatrixStore<row_major>(&s_part, sgi * M * N, o[j], N);
    workgroupBarrier();
    let rb = j / NOS;
    let col0 = (sgi * NOS + j % NOS) * N;
    for (var g = lane; g < OG; g += SGW) {
      let r = (4u * g) / N;
      let col = col0 + (4u * g) % N;
      let row = job.row0 + rb * M + r;
      if (row < job.rows && col < DV) {
        let at = sgi * M * N + 4u * g;
        let v = vec4<f32>(s_part[at], s_part[at + 1u], s_part[at + 2u], s_part[at + 3u]);
        store_out4(job, job.g * params.G + row % params.G, row / params.G, col, v * alpha_s[rb * M + r]);
      }
    }
  }
}
