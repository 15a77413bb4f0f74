// Fused flash attention (FlashAttention-2 style) for every option of SPEC §2.
//
// One workgroup owns BR query rows of one (batch, kv head) and walks the key tiles of BC keys that
// those rows can see, keeping the softmax state (running max m, running sum l, output O) of its rows
// in registers with deferred normalization; nothing of size Lq × Lk ever exists.
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

override IN_DTYPE: u32 = 0u;
override OUT_DTYPE: u32 = 0u;

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

const FLAG_CAUSAL: u32 = 1u;
const FLAG_WINDOW: u32 = 2u;
const FLAG_SOFTCAP: u32 = 4u;
const FLAG_ALIBI: u32 = 8u;
const FLAG_SINKS: u32 = 16u;
const FLAG_MASK_BOOL: u32 = 32u;
const FLAG_MASK_ADD: u32 = 64u;

const MASKED: f32 = -3.0e38;
const VISIBLE_MIN: f32 = -2.0e38;
const NEG_INF_BITS: u32 = 0xff800000u;
const LOG2E: f32 = 1.4426950408889634;
const LN2: f32 = 0.6931471805599453;

struct Params {
  B: u32, Hq: u32, Hkv: u32, Lq: u32,
  Lk: u32, G: u32, rows: u32, row_tiles: u32,
  flags: u32, window: u32, scale: f32, softcap: f32,
  ms_b: u32, ms_h: u32, ms_i: u32, ms_j: u32,
  // Equal to the consts NDC, DK4 and BC. Loops over these index only workgroup memory, and bounding
  // them by uniforms keeps compilers from unrolling them whole: the code stays small enough for
  // software adapters to compile in seconds, while the register tiles stay fully unrolled.
  n_dc: u32, n_dk4: u32, n_bc: u32, _pad: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> q: array<u32>;
@group(0) @binding(2) var<storage, read> k: array<u32>;
@group(0) @binding(3) var<storage, read> v: array<u32>;
@group(0) @binding(4) var<storage, read> mask: array<u32>;
@group(0) @binding(5) var<storage, read> slopes: array<f32>;
@group(0) @binding(6) var<storage, read> sinks: array<f32>;
@group(0) @binding(7) var<storage, read_write> out: array<u32>;
@group(0) @binding(8) var<storage, read_write> lse: array<u32>;

var<workgroup> q_s: array<TILE4, BR * DKP>;
var<workgroup> k_s: array<TILE4, BC * DKP>;
var<workgroup> v_s: array<TILE4, BC * VQ>;
var<workgroup> p_s: array<vec4<f32>, PSV>;

// Four consecutive elements starting at idx (a multiple of 4).
fn q4(idx: u32) -> vec4<f32> {
  if (IN_DTYPE == 0u) {
    return vec4<f32>(bitcast<f32>(q[idx]), bitcast<f32>(q[idx + 1u]), bitcast<f32>(q[idx + 2u]), bitcast<f32>(q[idx + 3u]));
  }
  let w = idx >> 1u;
  return vec4<f32>(unpack_pair(q[w], IN_DTYPE), unpack_pair(q[w + 1u], IN_DTYPE));
}

fn k4(idx: u32) -> vec4<f32> {
  if (IN_DTYPE == 0u) {
    return vec4<f32>(bitcast<f32>(k[idx]), bitcast<f32>(k[idx + 1u]), bitcast<f32>(k[idx + 2u]), bitcast<f32>(k[idx + 3u]));
  }
  let w = idx >> 1u;
  return vec4<f32>(unpack_pair(k[w], IN_DTYPE), unpack_pair(k[w + 1u], IN_DTYPE));
}

fn v4(idx: u32) -> vec4<f32> {
  if (IN_DTYPE == 0u) {
    return vec4<f32>(bitcast<f32>(v[idx]), bitcast<f32>(v[idx + 1u]), bitcast<f32>(v[idx + 2u]), bitcast<f32>(v[idx + 3u]));
  }
  let w = idx >> 1u;
  return vec4<f32>(unpack_pair(v[w], IN_DTYPE), unpack_pair(v[w + 1u], IN_DTYPE));
}

@compute @workgroup_size(WG)
fn flash_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) li: u32) {
  let tile = wid.y * nwg.x + wid.x;
  if (tile >= params.row_tiles * params.B * params.Hkv) { return; }   // whole workgroup: stays uniform
  let rt = tile % params.row_tiles;
  let bg = tile / params.row_tiles;
  let b = bg / params.Hkv;
  let g = bg % params.Hkv;
  let tx = li % TX;
  let ty = li / TX;
  let G = params.G;
  let row0 = rt * BR;
  let shift = i32(params.Lk) - i32(params.Lq);
  let f = params.flags;

  // The rows this thread owns.
  var r_ok: array<bool, TM>;
  var r_h: array<u32, TM>;
  var r_pos: array<u32, TM>;
  for (var i = 0u; i < TM; i++) {
    let r = row0 + ty * TM + i;
    r_ok[i] = r < params.rows;
    let rr = min(r, params.rows - 1u);
    r_pos[i] = rr / G;
    r_h[i] = g * G + rr % G;
  }

  // Keys any row of the tile can see: causal skips tiles above the diagonal, a window those before it.
  let last = min(row0 + BR, params.rows) - 1u;
  var k_end = params.Lk;
  if ((f & FLAG_CAUSAL) != 0u) { k_end = u32(clamp(i32(last / G) + shift + 1, 0, i32(params.Lk))); }
  var k_begin = 0u;
  if ((f & FLAG_WINDOW) != 0u) {
    k_begin = u32(clamp(i32(row0 / G) + shift - i32(params.window) + 1, 0, i32(params.Lk)));
  }
  k_begin = (k_begin / BC) * BC;

  var m: array<f32, TM>;
  var l: array<f32, TM>;
  var o: array<vec4<f32>, TM * OP>;
  for (var i = 0u; i < TM; i++) { m[i] = MASKED; l[i] = 0.0; }
  for (var c = 0u; c < TM * OP; c++) { o[c] = vec4<f32>(0.0); }
  let kv_head = b * params.Hkv + g;

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
        if (gr < params.rows) {
          let h = g * G + gr % G;
          val = q4(((b * params.Hq + h) * params.Lq + gr / G) * D + dc * DK + 4u * c4);
        }
        q_s[r * DKP + c4] = TILE4(val);
      }
      for (var e = li; e < BC * DK4; e += WG) {
        let kr = e / DK4;
        let c4 = e % DK4;
        var val = vec4<f32>(0.0);
        if (kt + kr < params.Lk) { val = k4((kv_head * params.Lk + kt + kr) * D + dc * DK + 4u * c4); }
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
        var visible = r_ok[i] && j < params.Lk;
        if ((f & FLAG_CAUSAL) != 0u && i32(j) > i_abs) { visible = false; }
        if ((f & FLAG_WINDOW) != 0u && i_abs - i32(j) >= i32(params.window)) { visible = false; }
        var x = s[i * TN + n] * params.scale;
        if ((f & FLAG_SOFTCAP) != 0u) { x = params.softcap * tanh(x / params.softcap); }
        if ((f & FLAG_ALIBI) != 0u) { x += slopes[r_h[i]] * f32(i32(j) - i_abs); }
        if (visible && (f & (FLAG_MASK_BOOL | FLAG_MASK_ADD)) != 0u) {
          let mw = mask[b * params.ms_b + r_h[i] * params.ms_h + r_pos[i] * params.ms_i + j * params.ms_j];
          if ((f & FLAG_MASK_BOOL) != 0u) {
            visible = mw != 0u;
          } else if (mw == NEG_INF_BITS) {
            visible = false;
          } else {
            x += bitcast<f32>(mw);
          }
        }
        let x2 = select(MASKED, max(x * LOG2E, -1.0e38), visible);
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
        if (kt + kr < params.Lk && col < DV) { val = v4((kv_head * params.Lk + kt + kr) * DV + col); }
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

  // ---- Learned sinks join the denominator only; normalize; write out and lse.
  for (var i = 0u; i < TM; i++) {
    if (!r_ok[i]) { continue; }
    let h = r_h[i];
    let any_visible = m[i] > VISIBLE_MIN;
    var mf = m[i];
    var lf = l[i];
    var keep = 1.0;
    if (any_visible && (f & FLAG_SINKS) != 0u) {
      let s2 = sinks[h] * LOG2E;
      let mn = max(mf, s2);
      keep = exp2(mf - mn);
      lf = lf * keep + exp2(s2 - mn);
      mf = mn;
    }
    let inv = select(0.0, keep / lf, any_visible);
    let row = (b * params.Hq + h) * params.Lq + r_pos[i];
    for (var vc = 0u; vc < NVC; vc++) {
      for (var pp = 0u; pp < PPT; pp++) {
        let col = vc * DVC + 4u * (tx + TX * pp);
        if (col >= DV) { continue; }
        let val = o[i * OP + vc * PPT + pp] * inv;
        let e = row * DV + col;
        if (OUT_DTYPE == 0u) {
          out[e] = bitcast<u32>(val.x);
          out[e + 1u] = bitcast<u32>(val.y);
          out[e + 2u] = bitcast<u32>(val.z);
          out[e + 3u] = bitcast<u32>(val.w);
        } else {
          out[e >> 1u] = pack_pair(val.x, val.y, OUT_DTYPE);
          out[(e >> 1u) + 1u] = pack_pair(val.z, val.w, OUT_DTYPE);
        }
      }
    }
    if (tx == 0u) {
      lse[row] = select(NEG_INF_BITS, bitcast<u32>((mf + log2(lf)) * LN2), any_visible);
    }
  }
}
