// Multi-head latent attention (SPEC §5): everything but the attention itself, which the paged flash
// kernel does over the latent cache.
//   absorb_main   once per layer: kv_b_proj [N·(P+V), L] (f32/f16/bf16) -> W_UK [N, P, L] (the rows
//                 as stored) and W_UV [N, L, V] (transposed: SPEC's layout), f32, so that threads
//                 spread over L (q absorption) or over V (up-projections) read contiguous memory.
//   qabs_main     absorbed query: q[b, n] = [W_UK[n]ᵀ · q_nope[b, n] (L) | q_pe[b, n] (R)], f32 (split-K per head).
//   qcat_main     prefill query: q[t, n] = [q_nope[t, n] (P) | q_pe[t, n] (R)], f32.
//   vup_main      output: out[b, n·V + v] = W_UV[n][v] · o_lat[b, n] (L), in the query's dtype (split-K per head).
//   kvup_main     prefill: for positions c0.. of one sequence, from the paged latent cache:
//                 k[i, n] = [W_UK[n] · kv_c (P) | k_pe (R)], v[i, n] = W_UV[n] · kv_c (V), f32.
//   write_main    cache write (vLLM's concat_and_cache_mla): row [kv_c | k_pe] to each token's slot,
//                 in f32/f16/bf16, or quantized to FlashMLA's fp8_ds_mla rows.
// Dtype codes as dtype.wgsl; CACHE_DTYPE 4 is fp8_ds_mla. A latent cache split across buffers is
// bound one part at a time (blocks [blk_lo, blk_lo + num_blocks)): kvup_main and write_main run once
// per part and touch only rows of its blocks.

override IN_DTYPE: u32 = 0u;
override OUT_DTYPE: u32 = 0u;
override CACHE_DTYPE: u32 = 0u;
override WG: u32 = 64u;

struct Params {
  N: u32, L: u32, P: u32, R: u32,
  V: u32, rows: u32, total: u32, row_words: u32,
  bs: u32, num_blocks: u32, max_blocks: u32, seq: u32,
  c0: u32, blk_lo: u32, first_part: u32, _p2: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> src_a: array<u32>;     // kv_b_proj | q_nope | o_lat | kv_c
@group(0) @binding(2) var<storage, read> src_b: array<u32>;     // q_pe | k_pe | block table
@group(0) @binding(3) var<storage, read> w_uk: array<f32>;
@group(0) @binding(4) var<storage, read> w_uv: array<f32>;
@group(0) @binding(5) var<storage, read_write> dst_a: array<u32>;
@group(0) @binding(6) var<storage, read_write> dst_b: array<u32>;
@group(0) @binding(7) var<storage, read> cache_in: array<u32>;   // the latent cache | slot mapping
@group(0) @binding(8) var<storage, read> w_head: array<f32>;     // decode's per-head products: W_UK or W_UV

fn gid(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 { return (wid.y * nwg.x + wid.x) * WG + lid; }

fn in_a(i: u32) -> f32 { return unpack_elem(src_a[word_of(i, IN_DTYPE)], (i & 1u) == 1u, IN_DTYPE); }
fn in_b(i: u32) -> f32 { return unpack_elem(src_b[word_of(i, IN_DTYPE)], (i & 1u) == 1u, IN_DTYPE); }

@compute @workgroup_size(WG)
fn absorb_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
  let t = gid(wid, nwg, lid);
  let per = params.P + params.V;
  if (t >= params.N * per * params.L) { return; }
  let l = t % params.L;
  let r = (t / params.L) % per;
  let n = t / (params.L * per);
  let x = in_a(t);
  if (r < params.P) { dst_a[(n * params.P + r) * params.L + l] = bitcast<u32>(x); }
  else { dst_b[(n * params.L + l) * params.V + r - params.P] = bitcast<u32>(x); }
}

// ---- Decode's per-head products: out[b, n, m] = Σ_k x[b, n, k] · W[n][k, m], W row-major [K, M] per
// head (W_UK [N, P, L]: K = P, M = L; W_UV [N, L, V]: K = L, M = V). A workgroup owns MT columns of
// one head for RB rows at a time; its HM_WG threads split K into KS slices, so a subgroup reads MT
// contiguous weights of one k (coalesced) and each weight is loaded once per RB rows. The KS partial
// sums meet in workgroup memory. Grid: (⌈M / MT⌉, N, ⌈B / RB⌉).
const MT: u32 = 32u;
const HM_WG: u32 = 256u;
const KS: u32 = HM_WG / MT;
const RB: u32 = 4u;
var<workgroup> hm_part: array<vec4<f32>, HM_WG>;   // [KS][MT]: RB rows' partial sums
var<workgroup> hm_sum: array<f32, RB * MT>;        // [RB][MT]

/** This thread's partial sums of out[b0 .. b0+RB, n, m] over its K slice: x from src_a (q_nope in
 *  IN_DTYPE for the q absorption, else o_lat in f32), W[n] [K, M] from w_head. */
fn hm_acc(qabs: bool, wid: vec3<u32>, li: u32, K: u32, M: u32) -> vec4<f32> {
  let n = wid.y;
  let b0 = wid.z * RB;
  let m = wid.x * MT + li % MT;
  var acc = vec4<f32>(0.0);
  if (m >= M) { return acc; }
  for (var k = li / MT; k < K; k += KS) {
    var x = vec4<f32>(0.0);
    for (var r = 0u; r < RB; r++) {
      if (b0 + r >= params.rows) { continue; }
      let i = ((b0 + r) * params.N + n) * K + k;
      if (qabs) { x[r] = in_a(i); } else { x[r] = bitcast<f32>(src_a[i]); }
    }
    acc += x * w_head[(n * K + k) * M + m];
  }
  return acc;
}

/** Reduces the threads' partial sums (acc: RB rows of column li % MT, slice li / MT) into hm_sum.
 *  Every thread calls it: it has barriers. */
fn hm_reduce(acc: vec4<f32>, li: u32) {
  hm_part[li] = acc;
  workgroupBarrier();
  for (var e = li; e < RB * MT; e += HM_WG) {
    let r = e / MT;
    let c = e % MT;
    var t = 0.0;
    for (var s = 0u; s < KS; s++) { t += hm_part[s * MT + c][r]; }
    hm_sum[e] = t;
  }
  workgroupBarrier();
}

/** Absorbed query: q[b, n] = [W_UK[n]ᵀ · q_nope[b, n] (L) | q_pe[b, n] (R)], f32 (dst_a). */
@compute @workgroup_size(HM_WG)
fn qabs_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  hm_reduce(hm_acc(true, wid, li, params.P, params.L), li);
  let n = wid.y;
  let b0 = wid.z * RB;
  let D = params.L + params.R;
  for (var e = li; e < RB * MT; e += HM_WG) {
    let b = b0 + e / MT;
    let m = wid.x * MT + e % MT;
    if (b < params.rows && m < params.L) { dst_a[(b * params.N + n) * D + m] = bitcast<u32>(hm_sum[e]); }
  }
  // The rope part rides along with the first column tile.
  if (wid.x == 0u) {
    for (var e = li; e < RB * params.R; e += HM_WG) {
      let b = b0 + e / params.R;
      let c = e % params.R;
      if (b < params.rows) { dst_a[(b * params.N + n) * D + params.L + c] = bitcast<u32>(in_b((b * params.N + n) * params.R + c)); }
    }
  }
}

@compute @workgroup_size(WG)
fn qcat_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) lid: u32) {
  let t = gid(wid, nwg, lid);
  let D = params.P + params.R;
  if (t >= params.rows * params.N * D) { return; }
  let c = t % D;
  let tn = t / D;
  var x: f32;
  if (c < params.P) { x = in_a(tn * params.P + c); } else { x = in_b(tn * params.R + c - params.P); }
  dst_a[t] = bitcast<u32>(x);
}

/** Output: out[b, n·V + v] = W_UV[n][:, v] · o_lat[b, n] (L), in OUT_DTYPE (16-bit: two columns a word; V is even). */
@compute @workgroup_size(HM_WG)
fn vup_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  hm_reduce(hm_acc(false, wid, li, params.L, params.V), li);
  let n = wid.y;
  let b0 = wid.z * RB;
  let per = select(2u, 1u, OUT_DTYPE == 0u);
  for (var e = li; e < RB * MT / per; e += HM_WG) {
    let r = e / (MT / per);
    let c = (e % (MT / per)) * per;
    let b = b0 + r;
    let v = wid.x * MT + c;
    if (b >= params.rows || v >= params.V) { continue; }
    let i = (b * params.N + n) * params.V + v;
    if (OUT_DTYPE == 0u) { dst_a[i] = bitcast<u32>(hm_sum[r * MT + c]); }
    else { dst_a[i / 2u] = pack_pair(hm_sum[r * MT + c], hm_sum[r * MT + c + 1u], OUT_DTYPE); }
  }
}

// ---- The same products for batches of several rows (the host takes these from HR_MIN_ROWS rows on):
// a workgroup owns one head, HR_MT columns and HR_ROWS rows; each thread 4 adjacent columns of
// HR_RPT rows over the whole K, so each weight is read once per HR_ROWS rows (once a call up to 32
// sequences) and nothing is reduced across threads. A subgroup's lanes share their rows (their x
// loads are one broadcast) and read HR_MT contiguous weights of one k. Grid: (⌈M / HR_MT⌉, N, ⌈B / HR_ROWS⌉).
const HR_Q: u32 = 32u;                 // column quads a workgroup
const HR_MT: u32 = 4u * HR_Q;
const HR_RG: u32 = HM_WG / HR_Q;       // row groups
const HR_RPT: u32 = 4u;                // rows a thread
const HR_ROWS: u32 = HR_RG * HR_RPT;

/** This thread's first row b0 and first column m in the row-blocked products. */
fn hr_origin(wid: vec3<u32>, li: u32) -> vec2<u32> {
  return vec2<u32>(wid.z * HR_ROWS + (li / HR_Q) * HR_RPT, wid.x * HR_MT + 4u * (li % HR_Q));
}

/** out[b0 + i, n, m .. m+3] for this thread's HR_RPT rows (at = hr_origin), over all of K (x as in hm_acc). */
fn hr_acc(qabs: bool, n: u32, at: vec2<u32>, K: u32, M: u32) -> array<vec4<f32>, HR_RPT> {
  let b0 = at.x;
  let m = at.y;
  var acc: array<vec4<f32>, HR_RPT>;
  for (var i = 0u; i < HR_RPT; i++) { acc[i] = vec4<f32>(0.0); }
  if (m >= M) { return acc; }
  for (var k = 0u; k < K; k++) {
    let wi = (n * K + k) * M + m;
    let w = vec4<f32>(w_head[wi], w_head[wi + 1u], w_head[wi + 2u], w_head[wi + 3u]);
    for (var i = 0u; i < HR_RPT; i++) {
      let b = min(b0 + i, params.rows - 1u);
      let xi = (b * params.N + n) * K + k;
      var x: f32;
      if (qabs) { x = in_a(xi); } else { x = bitcast<f32>(src_a[xi]); }
      acc[i] += x * w;
    }
  }
  return acc;
}

/** qabs_main for HR_ROWS rows a workgroup. */
@compute @workgroup_size(HM_WG)
fn qabs_rows_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  let n = wid.y;
  let at = hr_origin(wid, li);
  let acc = hr_acc(true, n, at, params.P, params.L);
  let b0 = at.x;
  let m = at.y;
  let D = params.L + params.R;
  for (var i = 0u; i < HR_RPT; i++) {
    let b = b0 + i;
    if (b >= params.rows || m >= params.L) { continue; }
    let o = (b * params.N + n) * D + m;
    for (var e = 0u; e < 4u; e++) { dst_a[o + e] = bitcast<u32>(acc[i][e]); }
  }
  // The rope part rides along with the first column tile.
  if (wid.x == 0u) {
    for (var e = li; e < HR_ROWS * params.R; e += HM_WG) {
      let b = wid.z * HR_ROWS + e / params.R;
      let c = e % params.R;
      if (b < params.rows) { dst_a[(b * params.N + n) * D + params.L + c] = bitcast<u32>(in_b((b * params.N + n) * params.R + c)); }
    }
  }
}

/** vup_main for HR_ROWS rows a workgroup. */
@compute @workgroup_size(HM_WG)
fn vup_rows_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  let n = wid.y;
  let at = hr_origin(wid, li);
  let acc = hr_acc(false, n, at, params.L, params.V);
  let b0 = at.x;
  let v = at.y;
  for (var i = 0u; i < HR_RPT; i++) {
    let b = b0 + i;
    if (b >= params.rows || v >= params.V) { continue; }
    let o = (b * params.N + n) * params.V + v;
    if (OUT_DTYPE == 0u) {
      for (var e = 0u; e < 4u; e++) { dst_a[o + e] = bitcast<u32>(acc[i][e]); }
    } else {
      dst_a[o / 2u] = pack_pair(acc[i].x, acc[i].y, OUT_DTYPE);
      dst_a[o / 2u + 1u] = pack_pair(acc[i].z, acc[i].w, OUT_DTYPE);
    }
  }
}

// ---- the latent cache: one row [kv_c (L) | k_pe (R)] per slot

/** Element c of the latent row at cache row `row` (the cache is bound as cache_in here). */
fn latent(row: u32, c: u32) -> f32 {
  let L = params.L;
  if (CACHE_DTYPE == 4u) {
    let base = row * params.row_words;
    if (c < L) {
      let scale = bitcast<f32>(cache_in[base + L / 4u + c / 128u]);
      return e4m3_to_f32((cache_in[base + c / 4u] >> (8u * (c % 4u))) & 0xffu) * scale;
    }
    let w = cache_in[base + L / 4u + (L + 127u) / 128u + (c - L) / 2u];
    return unpack_elem(w, ((c - L) & 1u) == 1u, 2u);
  }
  let i = row * (L + params.R) + c;
  return unpack_elem(cache_in[word_of(i, CACHE_DTYPE)], (i & 1u) == 1u, CACHE_DTYPE);
}


/** Cache row of position j of the prefill's sequence (block table in src_b) in the bound part; -1 for
 *  a bad block (the first part writes its zeros), -2 for another part's block (left to that part). */
fn latent_row(j: u32) -> i32 {
  let blk = bitcast<i32>(src_b[params.seq * params.max_blocks + j / params.bs]);
  if (blk < 0 || u32(blk) >= params.total) { return -1; }
  if (u32(blk) < params.blk_lo || u32(blk) - params.blk_lo >= params.num_blocks) { return -2; }
  return (blk - i32(params.blk_lo)) * i32(params.bs) + i32(j % params.bs);
}

// One thread per output element of k [rows, N, P+R] then v [rows, N, V].
@compute @workgroup_size(WG)
fn kvup_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) lid: u32) {
  let t = gid(wid, nwg, lid);
  let DK = params.P + params.R;
  let nk = params.rows * params.N * DK;
  if (t >= nk + params.rows * params.N * params.V) { return; }
  var x = 0.0;
  if (t < nk) {
    let c = t % DK;
    let n = (t / DK) % params.N;
    let i = t / (DK * params.N);
    let row = latent_row(params.c0 + i);
    if (row == -2 || (row == -1 && params.first_part == 0u)) { return; }
    if (row >= 0) {
      if (c < params.P) {
        for (var l = 0u; l < params.L; l++) { x += latent(u32(row), l) * w_uk[(n * params.P + c) * params.L + l]; }
      } else {
        x = latent(u32(row), params.L + c - params.P);
      }
    }
    dst_a[t] = bitcast<u32>(x);
  } else {
    let u = t - nk;
    let v = u % params.V;
    let n = (u / params.V) % params.N;
    let i = u / (params.V * params.N);
    let row = latent_row(params.c0 + i);
    if (row == -2 || (row == -1 && params.first_part == 0u)) { return; }
    if (row >= 0) {
      for (var l = 0u; l < params.L; l++) { x += latent(u32(row), l) * w_uv[(n * params.L + l) * params.V + v]; }
    }
    dst_b[u] = bitcast<u32>(x);
  }
}

fn row_value(t: u32, c: u32) -> f32 {
  if (c < params.L) { return in_a(t * params.L + c); }
  return in_b(t * params.R + c - params.L);
}

// One thread per cache word of a token's row. For fp8_ds_mla the words are the L/4 code words, then
// the ⌈L/128⌉ scales (a last partial group when L is not a multiple of 128), then the R/2 bf16 pairs;
// each code or scale word finds its group's max |x| itself.
// src_a holds kv_c, src_b k_pe, cache_in the slot mapping (i32 bits), dst_a the cache.
@compute @workgroup_size(WG)
fn write_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) lid: u32) {
  let w = gid(wid, nwg, lid);
  if (w >= params.rows * params.row_words) { return; }
  let t = w / params.row_words;
  let r = w % params.row_words;
  let slot = bitcast<i32>(cache_in[t]);
  if (slot < 0) { return; }
  let blk = u32(slot) / params.bs;
  if (blk < params.blk_lo || blk - params.blk_lo >= params.num_blocks) { return; }
  let dst = (u32(slot) - params.blk_lo * params.bs) * params.row_words + r;
  let L = params.L;
  if (CACHE_DTYPE == 4u) {
    let groups = (L + 127u) / 128u;
    if (r < L / 4u + groups) {
      let g = select(r - L / 4u, (4u * r) / 128u, r < L / 4u);
      var amax = 0.0;
      for (var c = g * 128u; c < min(g * 128u + 128u, L); c++) { amax = max(amax, abs(row_value(t, c))); }
      let scale = amax / 448.0;
      if (r >= L / 4u) { dst_a[dst] = bitcast<u32>(scale); return; }
      var word = 0u;
      if (scale > 0.0) {
        for (var e = 0u; e < 4u; e++) { word |= f32_to_e4m3(row_value(t, 4u * r + e) / scale) << (8u * e); }
      }
      dst_a[dst] = word;
      return;
    }
    let c = L + 2u * (r - L / 4u - groups);
    dst_a[dst] = f32_to_bf16_bits(row_value(t, c)) | (f32_to_bf16_bits(row_value(t, c + 1u)) << 16u);
    return;
  }
  if (CACHE_DTYPE == 0u) { dst_a[dst] = bitcast<u32>(row_value(t, r)); return; }
  let c = 2u * r;
  dst_a[dst] = pack_pair(row_value(t, c), row_value(t, c + 1u), CACHE_DTYPE);
}
