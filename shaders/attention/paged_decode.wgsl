// Paged decode: one new token per sequence (SPEC §3), memory-bound, so built around reading each K/V
// row once with wide loads. One workgroup per (sequence, kv head, KV partition):
//   1. scores: KT threads share a key row, each loading 16 bytes (EPV elements) of it and taking its
//      partial dot with the G query heads of the kv head (their query slices sit in registers); each
//      thread has UK rows' loads in flight before the partials meet in workgroup memory (one meeting
//      per KPI·UK keys: a load and two barriers per 16 keys left the H200 at 20% of its bandwidth).
//      Scores of the partition's ≤ PMAX keys stay in workgroup memory.
//   2. softmax statistics per head (max, sum) by tree reductions.
//   3. P·V: KTV threads share a value row (16 bytes each), key rows strided over the workgroup; the
//      per-thread sums meet in workgroup memory, one head at a time.
// Every option but masks (scale, softcap, ALiBi, window; sinks when the state is final). With several
// partitions each writes its state to the workspace and merge.wgsl combines them.
// Parameters, bindings and cache loads: paged_decode_io.wgsl.

const G: u32 = 4u;       // query heads per kv head
const D: u32 = 128u;
const DV: u32 = 128u;
const EPV: u32 = 8u;     // elements per 16-byte load: 4 f32, 8 f16/bf16, 16 fp8
const WG: u32 = 256u;
const PMAX: u32 = 512u;  // keys of one partition held in workgroup memory
const UK: u32 = 4u;      // key rows per thread per step: loads in flight before the partial dots meet

const KT: u32 = D / EPV;       // threads per key row (a power of two dividing WG)
const KPI: u32 = WG / KT;      // key rows per step and load slot (KPI · UK per step)
const KTV: u32 = DV / EPV;     // threads per value row (and WG >= DV: one thread per output column)
const KPV: u32 = WG / KTV;     // value rows per step
const E4: u32 = EPV / 4u;      // vec4s per load
const RED: u32 = max(WG * G * UK, KPV * DV);

var<workgroup> s_s: array<f32, G * PMAX>;
var<workgroup> red: array<f32, RED>;

@compute @workgroup_size(WG)
fn decode_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) li: u32) {
  let it = decode_item(wid.y * nwg.x + wid.x);
  if (!it.valid) { return; }
  let s = it.s;
  let g = it.g;
  let part = it.part;
  let t = it.t;
  let pos = it.pos;
  let k_lo = it.k_lo;
  let k_hi = it.k_hi;
  let f = params.flags;

  // ---- 1. scores
  let lane = li % KT;
  let kslot = li / KT;
  var qv: array<vec4<f32>, G * E4>;
  for (var gg = 0u; gg < G; gg++) {
    for (var c = 0u; c < E4; c++) {
      let idx = t * params.q_stride + (g * G + gg) * D + lane * EPV + 4u * c;
      let w = word4_of(idx, Q_DTYPE);
      if (Q_DTYPE == 0u) { qv[gg * E4 + c] = decode4(vec4<u32>(q[w], q[w + 1u], q[w + 2u], q[w + 3u]), 0u); }
      else { qv[gg * E4 + c] = decode4(vec4<u32>(q[w], q[w + 1u], 0u, 0u), Q_DTYPE); }
    }
  }
  for (var kb = k_lo; kb < k_hi; kb += KPI * UK) {
    var w: array<vec4<u32>, UK>;
    var ok: array<bool, UK>;
    for (var u = 0u; u < UK; u++) {
      let j = kb + kslot + KPI * u;
      var row = -1;
      if (j < k_hi) { row = cache_row(s, g, j); }
      ok[u] = row >= 0;
      w[u] = vec4<u32>(0u);
      if (ok[u]) { w[u] = k_cache[u32(row) * KT + lane]; }
    }
    for (var u = 0u; u < UK; u++) {
      var dots: array<f32, G>;
      for (var gg = 0u; gg < G; gg++) { dots[gg] = 0.0; }
      for (var c = 0u; c < E4; c++) {
        let kv = decode16(w[u], c) * kv_scale[0];
        for (var gg = 0u; gg < G; gg++) { dots[gg] += dot(qv[gg * E4 + c], kv); }
      }
      for (var gg = 0u; gg < G; gg++) { red[((kslot + KPI * u) * G + gg) * KT + lane] = dots[gg]; }
    }
    workgroupBarrier();
    for (var e = li; e < KPI * UK * G; e += WG) {
      let kk = e / G;
      let gg = e % G;
      let j2 = kb + kk;
      var x = 0.0;
      for (var l = 0u; l < KT; l++) { x += red[(kk * G + gg) * KT + l]; }
      x *= params.scale;
      if ((f & FLAG_SOFTCAP) != 0u) { x = params.softcap * tanh(x / params.softcap); }
      if ((f & FLAG_ALIBI) != 0u) { x += headp[g * G + gg] * f32(i32(j2) - pos); }
      var visible = j2 < k_hi;
      if (visible && (f & FLAG_SPLIT) != 0u && cache_row(s, g, j2) < 0) { visible = false; }
      if ((f & FLAG_WINDOW) != 0u && pos - i32(j2) >= i32(params.window)) { visible = false; }
      if ((f & FLAG_WINDOW_BOTH) != 0u && i32(j2) - pos >= i32(params.window)) { visible = false; }
      if (j2 < k_lo + PMAX) { s_s[gg * PMAX + j2 - k_lo] = select(MASKED, max(x * LOG2E, -1.0e38), visible); }
    }
    workgroupBarrier();
  }
  let n = k_hi - k_lo;

  // ---- 2. max and sum per head
  var m: array<f32, G>;
  var l: array<f32, G>;
  for (var gg = 0u; gg < G; gg++) {
    var mx = MASKED;
    for (var e = li; e < n; e += WG) { mx = max(mx, s_s[gg * PMAX + e]); }
    red[gg * WG + li] = mx;
  }
  workgroupBarrier();
  for (var st = WG / 2u; st > 0u; st >>= 1u) {
    if (li < st) { for (var gg = 0u; gg < G; gg++) { red[gg * WG + li] = max(red[gg * WG + li], red[gg * WG + li + st]); } }
    workgroupBarrier();
  }
  for (var gg = 0u; gg < G; gg++) { m[gg] = red[gg * WG]; }
  workgroupBarrier();
  for (var gg = 0u; gg < G; gg++) {
    var sum = 0.0;
    for (var e = li; e < n; e += WG) {
      let x = s_s[gg * PMAX + e];
      let p = select(0.0, exp2(x - m[gg]), x > VISIBLE_MIN);
      s_s[gg * PMAX + e] = p;
      sum += p;
    }
    red[gg * WG + li] = sum;
  }
  workgroupBarrier();
  for (var st = WG / 2u; st > 0u; st >>= 1u) {
    if (li < st) { for (var gg = 0u; gg < G; gg++) { red[gg * WG + li] += red[gg * WG + li + st]; } }
    workgroupBarrier();
  }
  for (var gg = 0u; gg < G; gg++) { l[gg] = red[gg * WG]; }
  workgroupBarrier();

  // ---- 3. P·V
  let vl = li % KTV;
  let vslot = li / KTV;
  var acc: array<vec4<f32>, G * E4>;
  for (var c = 0u; c < G * E4; c++) { acc[c] = vec4<f32>(0.0); }
  // Four value rows per trip, loads first, so several are in flight.
  for (var kk = vslot; kk < n; kk += 4u * KPV) {
    var w: array<vec4<u32>, 4>;
    var ok: array<bool, 4>;
    for (var u = 0u; u < 4u; u++) {
      let k2 = kk + KPV * u;
      var row = -1;
      if (k2 < n) { row = cache_row(s, g, k_lo + k2); }
      ok[u] = row >= 0;
      w[u] = vec4<u32>(0u);
      if (ok[u]) { w[u] = v_cache[u32(row) * KTV + vl]; }
    }
    for (var u = 0u; u < 4u; u++) {
      if (ok[u]) {
        let k2 = kk + KPV * u;
        for (var c = 0u; c < E4; c++) {
          let vv = decode16(w[u], c) * kv_scale[1];
          for (var gg = 0u; gg < G; gg++) { acc[gg * E4 + c] += s_s[gg * PMAX + k2] * vv; }
        }
      }
    }
  }
  // Sum the KPV partial rows, one head at a time; thread li < DV then owns column li of that head.
  var col: array<f32, G>;
  for (var gg = 0u; gg < G; gg++) {
    for (var c = 0u; c < E4; c++) {
      let b0 = vslot * DV + vl * EPV + 4u * c;
      red[b0] = acc[gg * E4 + c].x; red[b0 + 1u] = acc[gg * E4 + c].y;
      red[b0 + 2u] = acc[gg * E4 + c].z; red[b0 + 3u] = acc[gg * E4 + c].w;
    }
    workgroupBarrier();
    col[gg] = 0.0;
    if (li < DV) { for (var v2 = 0u; v2 < KPV; v2++) { col[gg] += red[v2 * DV + li]; } }
    workgroupBarrier();
  }

  // ---- finalize: sinks (final states only), normalize, write.
  for (var gg = 0u; gg < G; gg++) {
    let h = g * G + gg;
    let fs = final_state(m[gg], l[gg], h, it.partial);
    let val = select(0.0, col[gg] * fs.keep / fs.l, fs.visible);
    let lse_bits = fs.lse_bits;
    if (it.partial) {
      if (li < DV) { ws[((part * params.T + t) * params.Hq + h) * DV + li] = bitcast<u32>(val); }
      if (li == 0u) { ws[params.ws_lse + (part * params.Hq + h) * params.T + t] = lse_bits; }
    } else {
      if (li == 0u) { lse[h * params.T + t] = lse_bits; }
      if (OUT_DTYPE == 0u) {
        if (li < DV) { out[(t * params.Hq + h) * DV + li] = bitcast<u32>(val); }
      } else {
        // Pairs of columns share a word: assemble through workgroup memory.
        if (li < DV) { red[li] = val; }
        workgroupBarrier();
        if (li < DV / 2u) { out[((t * params.Hq + h) * DV) / 2u + li] = pack_pair(red[2u * li], red[2u * li + 1u], OUT_DTYPE); }
        workgroupBarrier();
      }
    }
  }
}
