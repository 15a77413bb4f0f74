// Naive scaled-dot-product attention: the "stock" three-pass baseline (SPEC §2).
//   scores:  S[r, j] = scale·q·k (+ softcap, ALiBi, mask, visibility)   one thread per (row, key)
//   softmax: P[r, j] = exp(S - m) / den, lse = m + log(den)            one workgroup per row
//   pv:      out[r, :] = Σ_j P[r, j] · v[j, :]                          one thread per output word
// Rows are processed in chunks of `rows` starting at `row_base`, so the S buffer stays within the
// storage-binding limit at any length. Everything accumulates in f32 whatever the storage dtype.
//
// Storage dtypes are pipeline-overridable constants (codes of dtype.wgsl, which is prepended).

override IN_DTYPE: u32 = 0u;
override OUT_DTYPE: u32 = 0u;
override WG: u32 = 64u;

struct Params {
  B: u32, Hq: u32, Hkv: u32, Lq: u32,
  Lk: u32, D: u32, Dv: u32, flags: u32,
  scale: f32, softcap: f32, window: u32, row_base: u32,
  rows: u32, ms_b: u32, ms_h: u32, ms_i: u32,
  ms_j: u32, out_words: u32, out_base: u32, _pad: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> q: array<u32>;
@group(0) @binding(2) var<storage, read> k: array<u32>;
@group(0) @binding(3) var<storage, read> v: array<u32>;
@group(0) @binding(4) var<storage, read> mask: array<u32>;
@group(0) @binding(5) var<storage, read> slopes: array<f32>;
@group(0) @binding(6) var<storage, read> sinks: array<f32>;
@group(0) @binding(7) var<storage, read_write> scores: array<f32>;
@group(0) @binding(8) var<storage, read_write> out: array<u32>;
@group(0) @binding(9) var<storage, read_write> lse: array<u32>;

fn load_q(i: u32) -> f32 { return unpack_elem(q[word_of(i, IN_DTYPE)], (i & 1u) == 1u, IN_DTYPE); }
fn load_k(i: u32) -> f32 { return unpack_elem(k[word_of(i, IN_DTYPE)], (i & 1u) == 1u, IN_DTYPE); }
fn load_v(i: u32) -> f32 { return unpack_elem(v[word_of(i, IN_DTYPE)], (i & 1u) == 1u, IN_DTYPE); }

fn linear_id(wid: vec3<u32>, nwg: vec3<u32>, lid: u32, wg: u32) -> u32 {
  return (wid.y * nwg.x + wid.x) * wg + lid;
}

// Absolute query row r = ((b·Hq + h)·Lq + i); decomposes into (b, h, i).
fn row_coords(r: u32) -> vec3<u32> {
  let i = r % params.Lq;
  let bh = r / params.Lq;
  return vec3<u32>(bh / params.Hq, bh % params.Hq, i);
}

@compute @workgroup_size(WG)
fn scores_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
  let t = linear_id(wid, nwg, lid, WG);
  if (t >= params.rows * params.Lk) { return; }
  let local_row = t / params.Lk;
  let j = t % params.Lk;
  let rc = row_coords(params.row_base + local_row);
  let b = rc.x; let h = rc.y; let i = rc.z;
  let g = h / (params.Hq / params.Hkv);
  let i_abs = i32(i) + i32(params.Lk) - i32(params.Lq);
  let f = params.flags;

  var visible = true;
  if ((f & FLAG_CAUSAL) != 0u && i32(j) > i_abs) { visible = false; }
  if ((f & FLAG_WINDOW) != 0u && i_abs - i32(j) >= i32(params.window)) { visible = false; }
  if ((f & FLAG_WINDOW_BOTH) != 0u && i32(j) - i_abs >= i32(params.window)) { visible = false; }
  var mask_add = 0.0;
  if ((f & (FLAG_MASK_BOOL | FLAG_MASK_ADD)) != 0u) {
    let mw = mask[b * params.ms_b + h * params.ms_h + i * params.ms_i + j * params.ms_j];
    if ((f & FLAG_MASK_BOOL) != 0u) {
      if (mw == 0u) { visible = false; }
    } else if (mw == NEG_INF_BITS) {
      visible = false;   // an additive -inf is "not visible", decided on bits (no inf arithmetic)
    } else {
      mask_add = bitcast<f32>(mw);
    }
  }
  var s = MASKED;
  if (visible) {
    let qb = ((b * params.Hq + h) * params.Lq + i) * params.D;
    let kb = ((b * params.Hkv + g) * params.Lk + j) * params.D;
    var acc = 0.0;
    for (var d = 0u; d < params.D; d++) { acc += load_q(qb + d) * load_k(kb + d); }
    s = acc * params.scale;
    if ((f & FLAG_SOFTCAP) != 0u) { s = params.softcap * tanh(s / params.softcap); }
    if ((f & FLAG_ALIBI) != 0u) { s += slopes[h] * f32(i32(j) - i_abs); }
    s += mask_add;
    s = max(s, -1.0e38);  // a huge additive mask stays visible, but never reaches the sentinel
  }
  scores[t] = s;
}

var<workgroup> red: array<f32, WG>;

fn reduce_max(lid: u32, x: f32) -> f32 {
  red[lid] = x;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (lid < s) { red[lid] = max(red[lid], red[lid + s]); }
    workgroupBarrier();
  }
  let r = red[0];
  workgroupBarrier();
  return r;
}

fn reduce_sum(lid: u32, x: f32) -> f32 {
  red[lid] = x;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (lid < s) { red[lid] = red[lid] + red[lid + s]; }
    workgroupBarrier();
  }
  let r = red[0];
  workgroupBarrier();
  return r;
}

// WG must be a power of two (the tree reductions above).
@compute @workgroup_size(WG)
fn softmax_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) lid: u32) {
  let local_row = wid.y * nwg.x + wid.x;
  if (local_row >= params.rows) { return; }   // uniform per workgroup: barriers stay uniform
  let r = params.row_base + local_row;
  let h = row_coords(r).y;
  let base = local_row * params.Lk;

  var m = MASKED;
  for (var j = lid; j < params.Lk; j += WG) { m = max(m, scores[base + j]); }
  m = reduce_max(lid, m);
  let any_visible = m > VISIBLE_MIN;
  var mx = m;
  if ((params.flags & FLAG_SINKS) != 0u) { mx = max(mx, sinks[h]); }

  var den_part = 0.0;
  for (var j = lid; j < params.Lk; j += WG) {
    let s = scores[base + j];
    den_part += select(0.0, exp(s - mx), s > VISIBLE_MIN);
  }
  var den = reduce_sum(lid, den_part);
  if ((params.flags & FLAG_SINKS) != 0u) { den += exp(sinks[h] - mx); }

  let inv = select(0.0, 1.0 / den, any_visible);
  for (var j = lid; j < params.Lk; j += WG) {
    let s = scores[base + j];
    scores[base + j] = select(0.0, exp(s - mx) * inv, s > VISIBLE_MIN);
  }
  if (lid == 0u) {
    lse[r] = select(NEG_INF_BITS, bitcast<u32>(mx + log(den)), any_visible);
  }
}

fn pv_elem(e: u32) -> f32 {
  // e indexes the chunk's slice of out: row = e / Dv relative to row_base.
  let local_row = e / params.Dv;
  let d = e % params.Dv;
  let rc = row_coords(params.row_base + local_row);
  let g = rc.y / (params.Hq / params.Hkv);
  let vb = (rc.x * params.Hkv + g) * params.Lk * params.Dv + d;
  let pb = local_row * params.Lk;
  var acc = 0.0;
  for (var j = 0u; j < params.Lk; j++) {
    let p = scores[pb + j];
    if (p != 0.0) { acc += p * load_v(vb + j * params.Dv); }
  }
  return acc;
}

// One thread per output word. For 16-bit outputs a word holds two consecutive elements, which may
// belong to two rows when Dv is odd; chunks hold an even number of rows then, so a word never
// straddles two chunks.
@compute @workgroup_size(WG)
fn pv_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lid: u32) {
  let w = linear_id(wid, nwg, lid, WG);
  if (w >= params.out_words) { return; }
  let n = params.rows * params.Dv;
  if (OUT_DTYPE == 0u) {
    out[params.out_base + w] = bitcast<u32>(pv_elem(w));
    return;
  }
  let e0 = 2u * w;
  var b2 = 0.0;   // the upper half of the tensor's last word is padding when the count is odd
  if (e0 + 1u < n) { b2 = pv_elem(e0 + 1u); }
  out[params.out_base + w] = pack_pair(pv_elem(e0), b2, OUT_DTYPE);
}
