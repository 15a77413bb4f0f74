// Paged decode with subgroups: one new token per sequence (SPEC §3), built to keep the memory system
// busy. One workgroup per (sequence, kv head, KV partition), split into NGRP groups of KT lanes:
//   - a group owns every NGRP-th key of the partition and streams through its keys with an online
//     softmax in registers (running max, sum and P·V accumulator per query head), so nothing waits
//     on the rest of the workgroup until the very end and a partition may be any length;
//   - the KT lanes of a group share a key row and its value row, 16 bytes per load, CK (CV) loads
//     each, lane-interleaved so a group reads whole rows contiguously; each lane holds the query
//     slices of the G heads its loads meet;
//   - UK keys per step: all their K and V loads are issued before any is used, then the partial dots
//     meet by butterfly shuffles within the group (KT is at most the adapter's smallest subgroup, and
//     KT consecutive invocations share a subgroup, as in reduce_subgroup.wgsl);
//   - HS > 1: HS adjacent groups read the same key rows (one load serves them all), each for G / HS of
//     the query heads, so a lane holds fewer query slices, accumulators and scores (registers);
//   - at the end the group states are merged through workgroup memory, HS heads at a time.
// A cache split across buffers (SPL 1; the kernel runs once per part) walks only its part's keys: the
// workgroup lists the blocks of its key range that lie in the bound part, WG blocks at a time (an
// inclusive scan in workgroup memory, so the order and the sums are deterministic), and streams the
// listed blocks' keys. Without the list each part's pass computed every key of the range, the other
// parts' masked (batch 64 × 32k over 2 buffers: 19.9 ms where one buffer's pass would take ~6).
// Every option but masks (scale, softcap, ALiBi, window; sinks when the state is final). With several
// partitions each writes its state to the workspace and merge.wgsl combines them.
// paged_decode.wgsl is the portable kernel (no subgroups); both take their parameters, bindings and
// cache loads from paged_decode_io.wgsl.

const G: u32 = 4u;       // query heads per kv head
const D: u32 = 128u;
const DV: u32 = 128u;
const EPV: u32 = 8u;     // elements per 16-byte load: 4 f32, 8 f16/bf16, 16 fp8
const WG: u32 = 256u;
const KT: u32 = 16u;     // lanes per key row (a power of two, at most the smallest subgroup)
const UK: u32 = 4u;      // keys per group per step
const PF: u32 = 1u;      // 1: the next step's loads in flight while this one computes
const SPL: u32 = 0u;     // 1: the bound buffer is one part of a split cache (list the part's blocks)
// Benchmark diagnostics (wrong output; bench --explore-paged): 1 loads only; 2 loads, dots and the
// butterfly, no softmax or P·V; 3 all but the butterfly; 4 all but the P·V products.
const PROBE: u32 = 0u;
const HS: u32 = 1u;      // groups sharing each key row, each for G / HS of the query heads (divides G)

const CK: u32 = D / (EPV * KT);    // 16-byte loads per lane per key row
const CV: u32 = DV / (EPV * KT);   // ... per value row
const E4: u32 = EPV / 4u;          // vec4s per load
const NGRP: u32 = WG / KT;         // groups per workgroup
const GH: u32 = G / HS;            // query heads per group
const KG: u32 = NGRP / HS;         // key groups: HS groups (adjacent) read the same key rows
const STEP: u32 = KG * UK;         // keys per workgroup step

var<workgroup> m_s: array<f32, NGRP * GH>;
var<workgroup> l_s: array<f32, NGRP * GH>;
var<workgroup> acc_s: array<f32, NGRP * DV>;
const LCAP: u32 = select(1u, WG, SPL == 1u);
var<workgroup> blist: array<u32, LCAP>;   // split: logical blocks of this chunk in the bound part
var<workgroup> bscan: array<u32, LCAP>;   // split: inclusive scan of 'in part' over the chunk
var<workgroup> bn: u32;                   // split: listed blocks of this chunk

/** Key position of stream index v (v < nv), or -1: v itself over one buffer; over a split cache's part,
 *  key v % bs of the (v / bs)-th listed block, where within [k_lo, k_hi). */
fn key_of(v: u32, nv: u32, k_lo: u32, k_hi: u32) -> i32 {
  if (v >= nv) { return -1; }
  var j = v;
  if (SPL == 1u) {
    j = blist[v / params.bs] * params.bs + v % params.bs;
    if (j < k_lo) { return -1; }
  }
  if (j >= k_hi) { return -1; }
  return i32(j);
}

/** The K and V pieces of this lane for the UK keys of stream indices vb + kgrp + KG·u of a step (zeros
 *  where there is no key). Their positions are looked up again where a window or ALiBi needs them,
 *  rather than held in registers across the step. */
struct Step { kw: array<vec4<u32>, UK * CK>, vw: array<vec4<u32>, UK * CV>, ok: array<bool, UK> }

fn load_step(s: u32, g: u32, vb: u32, nv: u32, k_lo: u32, k_hi: u32, kgrp: u32, lane: u32) -> Step {
  var st: Step;
  for (var u = 0u; u < UK; u++) {
    let j = key_of(vb + kgrp + KG * u, nv, k_lo, k_hi);
    var row = -1;
    if (j >= 0) { row = cache_row(s, g, u32(j)); }
    st.ok[u] = row >= 0;
    for (var c = 0u; c < CK; c++) { st.kw[u * CK + c] = vec4<u32>(0u); }
    for (var c = 0u; c < CV; c++) { st.vw[u * CV + c] = vec4<u32>(0u); }
    if (st.ok[u]) {
      for (var c = 0u; c < CK; c++) { st.kw[u * CK + c] = k_cache[u32(row) * (D / EPV) + c * KT + lane]; }
      for (var c = 0u; c < CV; c++) { st.vw[u * CV + c] = v_cache[u32(row) * (DV / EPV) + c * KT + lane]; }
    }
  }
  return st;
}

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
  let lane = li % KT;
  let grp = li / KT;
  let kgrp = grp / HS;
  let h0 = g * G + (grp % HS) * GH;   // the group's first query head

  // The lane's query slices: chunk c of a row covers elements (c·KT + lane)·EPV ..+EPV.
  var qv: array<vec4<f32>, GH * CK * E4>;
  for (var gg = 0u; gg < GH; gg++) {
    for (var c = 0u; c < CK; c++) {
      for (var e = 0u; e < E4; e++) {
        let idx = t * params.q_stride + (h0 + gg) * D + (c * KT + lane) * EPV + 4u * e;
        let w = word4_of(idx, Q_DTYPE);
        var x: vec4<f32>;
        if (Q_DTYPE == 0u) { x = decode4(vec4<u32>(q[w], q[w + 1u], q[w + 2u], q[w + 3u]), 0u); }
        else { x = decode4(vec4<u32>(q[w], q[w + 1u], 0u, 0u), Q_DTYPE); }
        qv[(gg * CK + c) * E4 + e] = x * kv_scale[0];
      }
    }
  }

  var m: array<f32, GH>;
  var l: array<f32, GH>;
  var acc: array<vec4<f32>, GH * CV * E4>;
  for (var gg = 0u; gg < GH; gg++) { m[gg] = MASKED; l[gg] = 0.0; }
  for (var c = 0u; c < GH * CV * E4; c++) { acc[c] = vec4<f32>(0.0); }

  // The key stream: [k_lo, k_hi) over one buffer (one chunk); over a split cache's part, chunks of WG
  // blocks of the range, each listing its blocks in the bound part (workgroup-uniform bounds).
  let b_lo = k_lo / params.bs;
  let b_hi = (k_hi + params.bs - 1u) / params.bs;
  var c0 = b_lo;
  loop {
    var v0 = k_lo;
    var nv = k_hi;
    if (SPL == 1u) {
      if (c0 >= b_hi) { break; }
      let b = c0 + li;
      var inb = 0u;
      if (b < b_hi && block_in_part(s, b)) { inb = 1u; }
      bscan[li] = inb;
      for (var off = 1u; off < WG; off <<= 1u) {
        workgroupBarrier();
        var x = bscan[li];
        if (li >= off) { x += bscan[li - off]; }
        workgroupBarrier();
        bscan[li] = x;
      }
      if (inb == 1u) { blist[bscan[li] - 1u] = b; }
      if (li == WG - 1u) { bn = bscan[li]; }
      v0 = 0u;
      nv = workgroupUniformLoad(&bn) * params.bs;
      c0 += WG;
    }
    // Loads of step vb+STEP are issued before step vb is computed (PF 1), so they overlap the
    // shuffles and exponentials; PF 0 loads each step right before computing it.
    var cur = load_step(s, g, v0, nv, k_lo, k_hi, kgrp, lane);
    for (var vb = v0; vb < nv; vb += STEP) {
      var nxt: Step;
      if (PF == 1u) { nxt = load_step(s, g, vb + STEP, nv, k_lo, k_hi, kgrp, lane); }
      let kw = cur.kw;
      let vw = cur.vw;
      let ok = cur.ok;
      if (PROBE == 1u) {
        var x = vec4<u32>(0u);
        for (var i = 0u; i < UK * CK; i++) { x ^= kw[i]; }
        for (var i = 0u; i < UK * CV; i++) { x ^= vw[i]; }
        acc[0] += bitcast<vec4<f32>>(x & vec4<u32>(0x3f00ffffu));
        if (PF == 1u) { cur = nxt; } else { cur = load_step(s, g, vb + STEP, nv, k_lo, k_hi, kgrp, lane); }
        continue;
      }
      // Partial dots, then the butterfly within the group: every lane ends with the whole scores.
      var sc: array<f32, UK * GH>;
      for (var u = 0u; u < UK; u++) {
        for (var gg = 0u; gg < GH; gg++) {
          var x = 0.0;
          for (var c = 0u; c < CK; c++) {
            for (var e = 0u; e < E4; e++) { x += dot(qv[(gg * CK + c) * E4 + e], decode16(kw[u * CK + c], e)); }
          }
          sc[u * GH + gg] = x;
        }
      }
      if (PROBE != 3u) {
        for (var off = KT / 2u; off > 0u; off >>= 1u) {
          for (var i = 0u; i < UK * GH; i++) { sc[i] += subgroupShuffleXor(sc[i], off); }
        }
      }
      if (PROBE == 2u || PROBE == 4u) {
        // (The values stay loaded: without a use the compiler would drop their loads.)
        var x = vec4<u32>(0u);
        for (var i = 0u; i < UK * CV; i++) { x ^= vw[i]; }
        acc[GH * CV * E4 - 1u] += bitcast<vec4<f32>>(x & vec4<u32>(0x3f00ffffu));
      }
      if (PROBE == 2u) {
        for (var i = 0u; i < UK * GH; i++) { acc[0].x += sc[i]; }
        if (PF == 1u) { cur = nxt; } else { cur = load_step(s, g, vb + STEP, nv, k_lo, k_hi, kgrp, lane); }
        continue;
      }
      // Scores in the log2 domain (masked keys get the sentinel), then the online softmax update.
      for (var u = 0u; u < UK; u++) {
        var j = 0u;
        if ((f & (FLAG_WINDOW | FLAG_ALIBI)) != 0u) { j = u32(max(key_of(vb + kgrp + KG * u, nv, k_lo, k_hi), 0)); }
        var visible = ok[u];
        if ((f & FLAG_WINDOW) != 0u && pos - i32(j) >= i32(params.window)) { visible = false; }
        if ((f & FLAG_WINDOW_BOTH) != 0u && i32(j) - pos >= i32(params.window)) { visible = false; }
        for (var gg = 0u; gg < GH; gg++) {
          var x = sc[u * GH + gg] * params.scale;
          if ((f & FLAG_SOFTCAP) != 0u) { x = params.softcap * tanh(x / params.softcap); }
          if ((f & FLAG_ALIBI) != 0u) { x += headp[h0 + gg] * f32(i32(j) - pos); }
          sc[u * GH + gg] = select(MASKED, max(x * LOG2E, -1.0e38), visible);
        }
      }
      for (var gg = 0u; gg < GH; gg++) {
        var mn = m[gg];
        for (var u = 0u; u < UK; u++) { mn = max(mn, sc[u * GH + gg]); }
        let alpha = exp2(m[gg] - mn);
        m[gg] = mn;
        var lsum = l[gg] * alpha;
        for (var c = 0u; c < CV * E4; c++) { acc[gg * CV * E4 + c] *= alpha; }
        for (var u = 0u; u < UK; u++) {
          let x = sc[u * GH + gg];
          let p = select(0.0, exp2(x - mn), x > VISIBLE_MIN);
          lsum += p;
          if (PROBE == 4u) { acc[gg * CV * E4].x += p; continue; }
          for (var c = 0u; c < CV; c++) {
            for (var e = 0u; e < E4; e++) { acc[(gg * CV + c) * E4 + e] += p * decode16(vw[u * CV + c], e); }
          }
        }
        l[gg] = lsum;
      }
      if (PF == 1u) { cur = nxt; } else { cur = load_step(s, g, vb + STEP, nv, k_lo, k_hi, kgrp, lane); }
    }
    if (SPL == 0u) { break; }
    workgroupBarrier();   // every group done with this chunk's list before the next overwrites it
  }

  // ---- merge the group states, GH rounds of HS heads; then sinks (final states only), normalize and
  // write. Round gg covers heads hh·GH + gg (hh < HS): work item w = hh·DV/2 + cp, column pair cp.
  if (lane == 0u) {
    for (var gg = 0u; gg < GH; gg++) { m_s[grp * GH + gg] = m[gg]; l_s[grp * GH + gg] = l[gg]; }
  }
  for (var gg = 0u; gg < GH; gg++) {
    for (var c = 0u; c < CV; c++) {
      for (var e = 0u; e < E4; e++) {
        let a = acc[(gg * CV + c) * E4 + e];
        let b0 = grp * DV + (c * KT + lane) * EPV + 4u * e;
        acc_s[b0] = a.x; acc_s[b0 + 1u] = a.y; acc_s[b0 + 2u] = a.z; acc_s[b0 + 3u] = a.w;
      }
    }
    workgroupBarrier();
    for (var w = li; w < HS * (DV / 2u); w += WG) {
      let hh = w / (DV / 2u);
      let cp = w % (DV / 2u);
      let h = g * G + hh * GH + gg;
      let hs = head_state(hh, gg, h, it.partial);
      var v2 = vec2<f32>(0.0);
      for (var r = 0u; r < KG; r++) {
        let mr = m_s[(r * HS + hh) * GH + gg];
        let wr = select(0.0, exp2(mr - hs.m), mr > VISIBLE_MIN);
        let a0 = (r * HS + hh) * DV + 2u * cp;
        v2 += wr * vec2<f32>(acc_s[a0], acc_s[a0 + 1u]);
      }
      v2 *= hs.norm;
      if (it.partial) {
        let o = ((part * params.T + t) * params.Hq + h) * DV + 2u * cp;
        ws[o] = bitcast<u32>(v2.x);
        ws[o + 1u] = bitcast<u32>(v2.y);
      } else if (OUT_DTYPE == 0u) {
        let o = (t * params.Hq + h) * DV + 2u * cp;
        out[o] = bitcast<u32>(v2.x);
        out[o + 1u] = bitcast<u32>(v2.y);
      } else {
        out[((t * params.Hq + h) * DV) / 2u + cp] = pack_pair(v2.x, v2.y, OUT_DTYPE);
      }
    }
    if (li < HS) {
      let h = g * G + li * GH + gg;
      let hs = head_state(li, gg, h, it.partial);
      if (it.partial) { ws[params.ws_lse + (part * params.Hq + h) * params.T + t] = hs.lse_bits; }
      else { lse[h * params.T + t] = hs.lse_bits; }
    }
    workgroupBarrier();
  }
}

/** Head h's state merged over the key groups (its max, and the factor its summed P·V takes), from the
 *  states of groups r·HS + hh, head gg of theirs, in workgroup memory. */
struct HeadState { m: f32, norm: f32, lse_bits: u32 }

fn head_state(hh: u32, gg: u32, h: u32, partial: bool) -> HeadState {
  var mmax = MASKED;
  for (var r = 0u; r < KG; r++) { mmax = max(mmax, m_s[(r * HS + hh) * GH + gg]); }
  var lf = 0.0;
  for (var r = 0u; r < KG; r++) {
    let mr = m_s[(r * HS + hh) * GH + gg];
    lf += select(0.0, exp2(mr - mmax) * l_s[(r * HS + hh) * GH + gg], mr > VISIBLE_MIN);
  }
  let fs = final_state(mmax, lf, h, partial);
  return HeadState(mmax, select(0.0, fs.keep * kv_scale[1] / fs.l, fs.visible), fs.lse_bits);
}
