// Fused flash attention (FlashAttention-2 style), the part shared by every addressing mode.
//
// One workgroup owns BR query rows of one (batch or sequence, kv head) and walks the key tiles of BC
// keys those rows can see, keeping the softmax state (running max m, running sum l, output O) of its
// rows in registers with deferred normalization; nothing of size Lq × Lk ever exists.
//
// GQA: the rows of a workgroup are (position, query head) pairs of the G query heads that share one kv
// head, position-major (row r = position·G + head-in-group), so every K/V tile staged in workgroup
// memory serves all G heads and no K/V row is repeated.
//
// Threads form a TY × TX grid. Thread (ty, tx) owns TM rows (ty·TM + i) and, for scores, the TN keys
// tx + TX·n of the tile; for the output, the 4-column groups tx + TX·p of each Dv chunk. Q and K are
// staged DK columns at a time (D is split when the tile would not fit the workgroup storage the
// adapter gives), V in DVC-column chunks; P goes through workgroup memory between the two products,
// key-major with 4 rows per vec4 so the P·V loop reads a thread's TM probabilities in TM/4 loads.
// The row reductions (max, sum) across the TX threads of a row come from reduce_*.wgsl: subgroup
// shuffles, or workgroup memory where subgroups are missing.
//
// The addressing mode (flash.wgsl, paged.wgsl) declares the bindings and Params and
// supplies: q_load4, k_load4, v_load4 (four elements of a row), mask_word, head_slope, head_sink,
// store_out4 and store_lse. Params must have G, flags, window, scale, softcap, n_dc, n_dk4, n_bc.
//
// Scores are kept in base 2 (scaled by log2 e) so the exponentials are exp2. Invisible keys get a
// finite sentinel: WGSL lets implementations assume no infinities.

const TX: u32 = 16u;
const TY: u32 = 16u;
const TM: u32 = 4u;     // multiple of 4
const TN: u32 = 4u;
const DK: u32 = 16u;    // D columns staged per step (multiple of 4, divides D)
const DVC: u32 = 64u;   // Dv columns staged per step (multiple of 4·TX)
const D: u32 = 64u;
const DV: u32 = 64u;

// Element type of the Q, K and V tiles in workgroup memory. vec4<f16> where the adapter has shader-f16
// and the tensors are f16: lossless for f16 data, half the storage, so larger tiles fit. Arithmetic
// stays f32 (tiles are widened on read).
alias TILE4 = vec4<f32>;

const WG: u32 = TX * TY;
const BR: u32 = TY * TM;
const BC: u32 = TX * TN;
const DK4: u32 = DK / 4u;
const DKP: u32 = DK4 + 1u;          // padded row stride of q_s/k_s, in vec4
const NDC: u32 = D / DK;
const VQ: u32 = DVC / 4u;           // 4-column groups per V chunk
const NVC: u32 = (DV + DVC - 1u) / DVC;
const PPT: u32 = VQ / TX;           // groups per thread per chunk
const OP: u32 = NVC * PPT;          // groups per thread per row
const BR4: u32 = BR / 4u;
const BR4P: u32 = BR4 + 1u;         // padded key stride of p_s, in vec4
const PSV: u32 = max(BC * BR4P, (BR * TX + 3u) / 4u);

/** One workgroup's work: a row tile of one (batch or sequence, kv head), over one key range. */
struct Job {
  b: u32,         // batch (dense) or sequence (paged)
  g: u32,         // kv head
  row0: u32,      // first row of the tile; rows are position·G + head-in-group
  rows: u32,      // G · Lq: the rows of this (b, g)
  Lq: u32,
  Lk: u32,
  k_lo: u32,      // keys [k_lo, k_hi) of this job: all of them, or one partition of a split
  k_hi: u32,
  partial: bool,  // a partition's state (no sinks, written for a later merge) rather than the output
}

/** The invocation's place in its workgroup, as the entry point receives it (flash.wgsl, paged.wgsl). */
struct Lanes { @builtin(local_invocation_index) li: u32 }

var<workgroup> q_s: array<TILE4, BR * DKP>;
var<workgroup> k_s: array<TILE4, BC * DKP>;
var<workgroup> v_s: array<TILE4, BC * VQ>;
var<workgroup> p_s: array<vec4<f32>, PSV>;

/** Runs one job. Call from workgroup-uniform control flow. */
fn flash_tile(job: Job, lanes: Lanes) {
  let li = lanes.li;
  let tx = li % TX;
  let ty = li / TX;
  let G = params.G;
  let row0 = job.row0;
  let g = job.g;
  let shift = i32(job.Lk) - i32(job.Lq);
  let f = params.flags;

  // The rows this thread owns.
  var r_ok: array<bool, TM>;
  var r_h: array<u32, TM>;
  var r_pos: array<u32, TM>;
  for (var i = 0u; i < TM; i++) {
    let r = row0 + ty * TM + i;
    r_ok[i] = r < job.rows;
    let rr = min(r, job.rows - 1u);
    r_pos[i] = rr / G;
    r_h[i] = g * G + rr % G;
  }

  // Keys any row of the tile can see: causal skips tiles above the diagonal, a window those before it
  // (and, two-sided, those after it).
  let last = min(row0 + BR, job.rows) - 1u;
  var k_end = job.k_hi;
  if ((f & FLAG_CAUSAL) != 0u) { k_end = min(k_end, u32(clamp(i32(last / G) + shift + 1, 0, i32(job.Lk)))); }
  if ((f & FLAG_WINDOW_BOTH) != 0u) { k_end = min(k_end, u32(clamp(i32(last / G) + shift + i32(params.window), 0, i32(job.Lk)))); }
  var k_begin = job.k_lo;
  if ((f & FLAG_WINDOW) != 0u) {
    k_begin = max(k_begin, u32(clamp(i32(row0 / G) + shift - i32(params.window) + 1, 0, i32(job.Lk))));
  }
  k_begin = job.k_lo + ((k_begin - job.k_lo) / BC) * BC;

  var m: array<f32, TM>;
  var l: array<f32, TM>;
  var o: array<vec4<f32>, TM * OP>;
  for (var i = 0u; i < TM; i++) { m[i] = MASKED; l[i] = 0.0; }
  for (var c = 0u; c < TM * OP; c++) { o[c] = vec4<f32>(0.0); }

  for (var kt = k_begin; kt < k_end; kt += BC) {
    // ---- S = Q·Kᵀ for this key tile, D staged DK columns at a time.
    var s: array<f32, TM * TN>;
    for (var c = 0u; c < TM * TN; c++) { s[c] = 0.0; }
    for (var dc = 0u; dc < params.n_dc; dc++) {
      workgroupBarrier();
      for (var e = li; e < BR * DK4; e += WG) {
        let r = e / DK4;
        let c4 = e % DK4;
        let gr = row0 + r;
        var val = vec4<f32>(0.0);
        if (gr < job.rows) { val = q_load4(job, gr, dc * DK + 4u * c4); }
        q_s[r * DKP + c4] = TILE4(val);
      }
      for (var e = li; e < BC * DK4; e += WG) {
        let kr = e / DK4;
        let c4 = e % DK4;
        var val = vec4<f32>(0.0);
        if (kt + kr < k_end) { val = k_load4(job, kt + kr, dc * DK + 4u * c4); }
        k_s[kr * DKP + c4] = TILE4(val);
      }
      workgroupBarrier();
      for (var c4 = 0u; c4 < params.n_dk4; c4++) {
        var a: array<vec4<f32>, TM>;
        for (var i = 0u; i < TM; i++) { a[i] = vec4<f32>(q_s[(ty * TM + i) * DKP + c4]); }
        for (var n = 0u; n < TN; n++) {
          let kv = vec4<f32>(k_s[(tx + TX * n) * DKP + c4]);
          for (var i = 0u; i < TM; i++) { s[i * TN + n] += dot(a[i], kv); }
        }
      }
    }

    // ---- Score transforms and visibility, then the row max of the tile.
    var mt: array<f32, TM>;
    for (var i = 0u; i < TM; i++) {
      mt[i] = MASKED;
      let i_abs = i32(r_pos[i]) + shift;
      for (var n = 0u; n < TN; n++) {
        let j = kt + tx + TX * n;
        let x2 = score_x2(job, s[i * TN + n], r_ok[i] && j < k_end, r_h[i], r_pos[i], j, i_abs);
        s[i * TN + n] = x2;
        mt[i] = max(mt[i], x2);
      }
    }
    mt = reduce_rows_max(mt, tx, ty);

    // ---- Online softmax update: rescale the state, P = exp2(S - m).
    var ls: array<f32, TM>;
    var alpha: array<f32, TM>;
    for (var i = 0u; i < TM; i++) {
      let mn = max(m[i], mt[i]);
      alpha[i] = exp2(m[i] - mn);
      m[i] = mn;
      ls[i] = 0.0;
      for (var n = 0u; n < TN; n++) {
        let x = s[i * TN + n];
        let p = select(0.0, exp2(x - mn), x > VISIBLE_MIN);
        s[i * TN + n] = p;
        ls[i] += p;
      }
    }
    ls = reduce_rows_sum(ls, tx, ty);
    for (var i = 0u; i < TM; i++) {
      l[i] = l[i] * alpha[i] + ls[i];
      for (var c = 0u; c < OP; c++) { o[i * OP + c] *= alpha[i]; }
      for (var n = 0u; n < TN; n++) { p_s[(tx + TX * n) * BR4P + (ty * TM + i) / 4u][i % 4u] = s[i * TN + n]; }
    }

    // ---- O += P·V, Dv staged DVC columns at a time.
    for (var vc = 0u; vc < NVC; vc++) {
      workgroupBarrier();
      for (var e = li; e < BC * VQ; e += WG) {
        let kr = e / VQ;
        let c = e % VQ;
        let col = vc * DVC + 4u * c;
        var val = vec4<f32>(0.0);
        if (kt + kr < k_end && col < DV) { val = v_load4(job, kt + kr, col); }
        v_s[kr * VQ + c] = TILE4(val);
      }
      workgroupBarrier();
      for (var kk = 0u; kk < params.n_bc; kk++) {
        var pr: array<vec4<f32>, TM / 4u>;
        for (var i4 = 0u; i4 < TM / 4u; i4++) { pr[i4] = p_s[kk * BR4P + ty * (TM / 4u) + i4]; }
        for (var pp = 0u; pp < PPT; pp++) {
          let vv = vec4<f32>(v_s[kk * VQ + tx + TX * pp]);
          for (var i = 0u; i < TM; i++) { o[i * OP + vc * PPT + pp] += pr[i / 4u][i % 4u] * vv; }
        }
      }
    }
  }

  // ---- Learned sinks join the denominator only (never in a partition: the merge adds them once);
  // normalize; write out and lse.
  for (var i = 0u; i < TM; i++) {
    if (r_ok[i]) {
      let h = r_h[i];
      let any_visible = m[i] > VISIBLE_MIN;
      var mf = m[i];
      var lf = l[i];
      var keep = 1.0;
      if (any_visible && !job.partial && (f & FLAG_SINKS) != 0u) {
        let s2 = head_sink(h) * LOG2E;
        let mn = max(mf, s2);
        keep = exp2(mf - mn);
        lf = lf * keep + exp2(s2 - mn);
        mf = mn;
      }
      let inv = select(0.0, keep / lf, any_visible);
      for (var vc = 0u; vc < NVC; vc++) {
        for (var pp = 0u; pp < PPT; pp++) {
          let col = vc * DVC + 4u * (tx + TX * pp);
          if (col < DV) { store_out4(job, h, r_pos[i], col, o[i * OP + vc * PPT + pp] * inv); }
        }
      }
      if (tx == 0u) {
        store_lse(job, h, r_pos[i], select(NEG_INF_BITS, bitcast<u32>((mf + log2(lf)) * LN2), any_visible));
      }
    }
  }
}
