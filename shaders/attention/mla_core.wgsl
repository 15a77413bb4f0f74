// MLA decode attention: the absorbed path's MQA over latent rows, for paged.wgsl's addressing (it
// supplies Params, the bindings, q_load4, k_load4, store_out4, store_lse and calls flash_tile).
//
// A job is one token's N query heads (rows = heads; one kv head) over a range of keys: one partition
// of a split context, or all of it. The workgroup owns BR = 16·RM heads: 16 row groups of RM heads
// each. Each key tile of BC latent rows (D = L+R wide) is staged in workgroup memory once, decoded to
// f32, and serves both products: the scores read all D columns, P·V the first DV = L. Nothing is
// staged twice and there is one round of barriers per tile, where the general flash tile stages K in
// 16-column chunks (two barriers each) and V again. RM heads a thread (4 for N ≥ 64) reuse every
// staged vec4 RM times in both products, so workgroup-memory reads stop bounding the FMAs.
//
//   scores   16 × BC (row group, key) pairs, SP threads a pair, each a slice of the D columns and
//            the RM heads of its group; q rows read from the (L1-resident) absorbed query
//   softmax  thread r < BR keeps head r's running max and sum, turns the tile's scores into
//            probabilities (base 2, deferred normalization) and the rescale factor
//   P·V      thread (g, c): the RM heads of group g, 4-column groups c, c + TPR, ... of the output,
//            in registers
//
// Only what MLA decode asks is supported: every key in [k_lo, k_hi) is visible (one query token at
// the end of its sequence, or sparse decode's gathered keys), no window, softcap, ALiBi or sinks.
// The host (PagedAttentionPlan) chooses this kernel only then.

const D: u32 = 576u;
const DV: u32 = 512u;
const RM: u32 = 1u;      // heads a thread owns
const BC: u32 = 16u;     // keys a tile stages
const WG: u32 = 256u;

const RG: u32 = 16u;                 // row groups
const BR: u32 = RG * RM;             // heads a workgroup owns
const D4: u32 = D / 4u;
const D4P: u32 = D4 + 1u;            // padded row stride of the tile, in vec4 (breaks bank conflicts)
const DV4: u32 = DV / 4u;
const SP: u32 = WG / (RG * BC);      // threads per (row group, key) pair in the scores
const TPR: u32 = WG / RG;            // threads per row group in P·V
const OC: u32 = (DV4 + TPR - 1u) / TPR;   // 4-column groups a thread owns

/** One workgroup's work, as flash_core.wgsl's (paged.wgsl builds it). */
struct Job {
  b: u32, g: u32, row0: u32, rows: u32, Lq: u32, Lk: u32, k_lo: u32, k_hi: u32, partial: bool,
}

/** The invocation's place in its workgroup, as paged.wgsl's entry point receives it. */
struct Lanes { @builtin(local_invocation_index) li: u32 }

var<workgroup> kv_s: array<vec4<f32>, BC * D4P>;
var<workgroup> s_part: array<f32, BR * BC * SP>;
var<workgroup> p_s: array<f32, BR * BC>;
var<workgroup> alpha_s: array<f32, BR>;
var<workgroup> ml_s: array<vec2<f32>, BR>;

/** Runs one job. Call from workgroup-uniform control flow. */
fn flash_tile(job: Job, lanes: Lanes) {
  let li = lanes.li;
  // Scores: pair = (row group sg, key sj), this thread's slice sp of the D columns.
  let pair = li / SP;
  let sp = li % SP;
  let sg = pair / BC;
  let sj = pair % BC;
  var s_ok: array<bool, RM>;
  var s_row: array<u32, RM>;
  for (var i = 0u; i < RM; i++) {
    s_ok[i] = job.row0 + sg * RM + i < job.rows;
    s_row[i] = min(job.row0 + sg * RM + i, job.rows - 1u);
  }
  // P·V: the heads of group pg, groups pc + TPR·o.
  let pg = li / TPR;
  let pc = li % TPR;

  var m = MASKED;      // running max (base 2) and sum of head li (threads li < BR)
  var l = 0.0;
  var o: array<vec4<f32>, RM * OC>;
  for (var c = 0u; c < RM * OC; c++) { o[c] = vec4<f32>(0.0); }

  for (var kt = job.k_lo; kt < job.k_hi; kt += BC) {
    let n = min(BC, job.k_hi - kt);
    workgroupBarrier();
    for (var e = li; e < BC * D4; e += WG) {
      let j = e / D4;
      let c4 = e % D4;
      var val = vec4<f32>(0.0);
      if (j < n) { val = k_load4(job, kt + j, 4u * c4); }
      kv_s[j * D4P + c4] = val;
    }
    workgroupBarrier();

    var acc: array<f32, RM>;
    for (var i = 0u; i < RM; i++) { acc[i] = 0.0; }
    if (sj < n) {
      for (var c4 = sp; c4 < D4; c4 += SP) {
        let kv = kv_s[sj * D4P + c4];
        for (var i = 0u; i < RM; i++) { acc[i] += dot(q_load4(job, s_row[i], 4u * c4), kv); }
      }
    }
    for (var i = 0u; i < RM; i++) { s_part[((sg * RM + i) * BC + sj) * SP + sp] = select(0.0, acc[i], s_ok[i]); }
    workgroupBarrier();

    if (li < BR) {
      var mt = MASKED;
      var sc: array<f32, BC>;
      for (var j = 0u; j < BC; j++) {
        var x = 0.0;
        for (var t = 0u; t < SP; t++) { x += s_part[(li * BC + j) * SP + t]; }
        sc[j] = select(MASKED, max(x * params.scale * LOG2E, -1.0e38), j < n && key_in_part(job, kt + j));
        mt = max(mt, sc[j]);
      }
      let mn = max(m, mt);
      let alpha = exp2(m - mn);
      var ls = 0.0;
      for (var j = 0u; j < BC; j++) {
        let p = select(0.0, exp2(sc[j] - mn), sc[j] > VISIBLE_MIN);
        p_s[j * BR + li] = p;
        ls += p;
      }
      m = mn;
      l = l * alpha + ls;
      alpha_s[li] = alpha;
    }
    workgroupBarrier();

    for (var i = 0u; i < RM; i++) {
      let alpha = alpha_s[pg * RM + i];
      for (var c = 0u; c < OC; c++) { o[i * OC + c] *= alpha; }
    }
    for (var j = 0u; j < n; j++) {
      var p: array<f32, RM>;
      for (var i = 0u; i < RM; i++) { p[i] = p_s[j * BR + pg * RM + i]; }
      for (var c = 0u; c < OC; c++) {
        let g4 = pc + TPR * c;
        if (g4 < DV4) {
          let kv = kv_s[j * D4P + g4];
          for (var i = 0u; i < RM; i++) { o[i * OC + c] += p[i] * kv; }
        }
      }
    }
  }

  if (li < BR) { ml_s[li] = vec2<f32>(m, l); }
  workgroupBarrier();
  for (var i = 0u; i < RM; i++) {
    let row = job.row0 + pg * RM + i;
    if (row < job.rows) {
      let ml = ml_s[pg * RM + i];
      let any_visible = ml.x > VISIBLE_MIN;
      let inv = select(0.0, 1.0 / ml.y, any_visible);
      let h = job.g * params.G + row % params.G;
      let pos = row / params.G;
      for (var c = 0u; c < OC; c++) {
        let g4 = pc + TPR * c;
        if (g4 < DV4) { store_out4(job, h, pos, 4u * g4, o[i * OC + c] * inv); }
      }
      if (pc == 0u) { store_lse(job, h, pos, select(NEG_INF_BITS, bitcast<u32>((ml.x + log2(ml.y)) * LN2), any_visible)); }
    }
  }
}
