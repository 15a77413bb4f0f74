// MoE routing: one workgroup per token turns its router logits [E] into topK expert ids and weights, the
// procedure of src/reference/moe.ts (routeRef), HF transformers' DeepSeek V2 and V3 routers:
//   scores (softmax or sigmoid) -> choice = score + bias -> optional group limit (groups ranked by their
//   max, or by the sum of their two best choices; dropped groups' experts get choice 0.0 when ranked by
//   the max (V2), -inf when by the two best (V3: transformers 5's masked_fill, so a kept expert whose
//   bias makes its choice negative still outranks them)) -> the topK largest choices -> weights from the
//   unbiased scores (V3: normalized when asked), times the scale.
// Every ranking compares order-preserving u32 keys of f32 values (NaN lowest, -0 as +0) and breaks
// ties by the lower index, so each rank is taken by exactly one expert: the ids of a row are distinct
// and valid whatever the logits hold. Slot j holds the expert of rank j (largest choice first).
// Selection by rank counting (each expert counts the experts before it): E²/WG comparisons per thread,
// no sort, no atomics; E up to EMAX (specialized), at most 512 (16 KiB of workgroup memory).

const EMAX: u32 = 64u;
const WG: u32 = 64u;

const F_SIGMOID: u32 = 1u;
const F_BIAS: u32 = 2u;
const F_NORMALIZE: u32 = 4u;

struct RouteParams {
  rows: u32,
  E: u32,
  top_k: u32,
  n_group: u32,
  topk_group: u32,
  group_mode: u32,   // 0 none, 1 ranked by the group's max choice, 2 by the sum of its two best
  flags: u32,
  scale: f32,        // routed_scaling_factor
}

@group(0) @binding(0) var<uniform> rp: RouteParams;
@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(2) var<storage, read> bias: array<f32>;
@group(0) @binding(3) var<storage, read_write> ids: array<i32>;
@group(0) @binding(4) var<storage, read_write> weights: array<f32>;

var<workgroup> score: array<f32, EMAX>;
var<workgroup> ckey: array<u32, EMAX>;
var<workgroup> gkey: array<u32, EMAX>;
/** First the kept flag of each group, then the chosen scores by slot. */
var<workgroup> tmp: array<u32, EMAX>;
var<workgroup> red: array<f32, WG>;
var<workgroup> bcf: f32;


/** Whether key a at index ia ranks before key b at index ib. */
fn before(a: u32, ia: u32, b: u32, ib: u32) -> bool {
  return a > b || (a == b && ia < ib);
}

fn reduce(v: f32, li: u32, is_max: bool) -> f32 {
  red[li] = v;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (li < s) {
      if (is_max) { red[li] = max(red[li], red[li + s]); } else { red[li] += red[li + s]; }
    }
    workgroupBarrier();
  }
  if (li == 0u) { bcf = red[0]; }
  return workgroupUniformLoad(&bcf);
}

@compute @workgroup_size(WG)
fn route_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) li: u32) {
  let row = wid.y * nwg.x + wid.x;
  if (row >= rp.rows) { return; }
  let E = rp.E;
  let base = row * E;

  if ((rp.flags & F_SIGMOID) != 0u) {
    for (var e = li; e < E; e += WG) {
      let l = logits[base + e];
      // exp of a non-positive argument only: no overflow at either tail.
      let z = exp(-abs(l));
      score[e] = select(z / (1.0 + z), 1.0 / (1.0 + z), l >= 0.0);
    }
  } else {
    var m = -3.4028234663852886e38;
    for (var e = li; e < E; e += WG) { m = max(m, logits[base + e]); }
    m = reduce(m, li, true);
    var s = 0.0;
    for (var e = li; e < E; e += WG) {
      let p = exp(logits[base + e] - m);
      score[e] = p;
      s += p;
    }
    s = reduce(s, li, false);
    for (var e = li; e < E; e += WG) { score[e] = score[e] / s; }
  }
  for (var e = li; e < E; e += WG) {
    var c = score[e];
    if ((rp.flags & F_BIAS) != 0u) { c += bias[e]; }
    ckey[e] = key_of(c);
  }
  workgroupBarrier();

  if (rp.group_mode != 0u) {
    let gs = E / rp.n_group;
    for (var g = li; g < rp.n_group; g += WG) {
      var k1 = 0u;
      var i1 = 0u;
      for (var i = 0u; i < gs; i++) {
        let k = ckey[g * gs + i];
        if (i == 0u || k > k1) { k1 = k; i1 = i; }
      }
      var gk = k1;
      if (rp.group_mode == 2u) {
        var k2 = 0u;
        var found = false;
        for (var i = 0u; i < gs; i++) {
          let k = ckey[g * gs + i];
          if (i != i1 && (!found || k > k2)) { k2 = k; found = true; }
        }
        gk = key_of(value_of(k1) + value_of(k2));
      }
      gkey[g] = gk;
    }
    workgroupBarrier();
    for (var g = li; g < rp.n_group; g += WG) {
      var rank = 0u;
      for (var h = 0u; h < rp.n_group; h++) { rank += select(0u, 1u, before(gkey[h], h, gkey[g], g)); }
      tmp[g] = select(0u, 1u, rank < rp.topk_group);
    }
    workgroupBarrier();
    // transformers 5's masked_fill(~mask, ...): V2's 0.0 (below every softmax score); V3's -inf, since
    // with 0.0 a dropped expert outranked a kept one whose negative bias put its choice below 0.
    // (0x007fffff is key_of(-inf), written out: a const-expression may not make an infinity.)
    let dropped = select(key_of(0.0), 0x007fffffu, rp.group_mode == 2u);
    for (var e = li; e < E; e += WG) {
      if (tmp[e / gs] == 0u) { ckey[e] = dropped; }
    }
    workgroupBarrier();
  }

  for (var e = li; e < E; e += WG) {
    let k = ckey[e];
    var rank = 0u;
    for (var f = 0u; f < E; f++) { rank += select(0u, 1u, before(ckey[f], f, k, e)); }
    if (rank < rp.top_k) {
      ids[row * rp.top_k + rank] = i32(e);
      tmp[rank] = bitcast<u32>(score[e]);
    }
  }
  workgroupBarrier();

  for (var j = li; j < rp.top_k; j += WG) {
    var w = bitcast<f32>(tmp[j]);
    if ((rp.flags & F_NORMALIZE) != 0u) {
      var s = 0.0;
      for (var q = 0u; q < rp.top_k; q++) { s += bitcast<f32>(tmp[q]); }
      w = w / (s + 1e-20);
    }
    weights[row * rp.top_k + j] = w * rp.scale;
  }
}
