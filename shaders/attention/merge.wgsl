// Merging attention states by their log-sum-exp (SPEC §4): the associative operator behind
// mergeAttnStates and the split-KV decode. States are (o [T, H, Dv], lse [H, T]).
//   n_parts states come either as two buffers (o_a/lse_a, o_b/lse_b: the public two-state merge) or
//   stacked in one workspace (o_a/lse_a with strides, lse from word lse_base: the partitions of a
//   split-KV decode, where o_a and lse_a bind the same buffer). A paged plan over a cache split across
//   n_split buffers stacks n_split groups of n_parts partition slots; token t's states are the first
//   tok_np[t] slots of each group.
// A state whose lse is -inf, +inf (an empty chunk, as vLLM treats it) or NaN contributes nothing;
// when no state contributes, o = 0 and lse = -inf. Learned sinks, when given, join the denominator
// once here (the partitions leave them out).

override IN_DTYPE: u32 = 0u;
override OUT_DTYPE: u32 = 0u;
override WG: u32 = 64u;

struct Params {
  T: u32, H: u32, Dv: u32, n_parts: u32,
  two_buffers: u32, part_stride: u32, lse_stride: u32, has_sinks: u32,
  out_words: u32, lse_base: u32, t0: u32, tok_parts: u32,
  n_split: u32, _p0: u32, _p1: u32, _p2: u32,
}

// Group 0: the states and what says how to merge them; group 1: where the merged state goes.
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> o_a: array<u32>;
@group(0) @binding(2) var<storage, read> o_b: array<u32>;
@group(0) @binding(3) var<storage, read> lse_a: array<u32>;
@group(0) @binding(4) var<storage, read> lse_b: array<u32>;
@group(0) @binding(5) var<storage, read> sinks: array<f32>;
// tok_parts > 0: a paged plan's buffer; word tok_parts + t holds token t's partition count (0: the
// token's state is final already and is left alone; 1 too, unless the cache is split).
@group(0) @binding(6) var<storage, read> tok_np: array<i32>;
@group(1) @binding(0) var<storage, read_write> out: array<u32>;
@group(1) @binding(1) var<storage, read_write> lse_out: array<u32>;

fn part_lse(p: u32, h: u32, t: u32) -> f32 {
  var bits: u32;
  if (p == 1u && params.two_buffers == 1u) { bits = lse_b[h * params.T + t]; }
  else { bits = lse_a[params.lse_base + p * params.lse_stride + h * params.T + t]; }
  // -inf, +inf and NaN all mean "empty": return a finite sentinel below any real lse.
  if ((bits & 0x7f800000u) == 0x7f800000u) { return -3.0e38; }
  return bitcast<f32>(bits);
}

fn part_o(p: u32, e: u32) -> f32 {
  if (p == 1u && params.two_buffers == 1u) {
    return unpack_elem(o_b[word_of(e, IN_DTYPE)], (e & 1u) == 1u, IN_DTYPE);
  }
  let i = p * params.part_stride + e;
  return unpack_elem(o_a[word_of(i, IN_DTYPE)], (i & 1u) == 1u, IN_DTYPE);
}

struct Merged { value: f32, lse_bits: u32 }

// Element e = (t·H + h)·Dv + d of the merged output, and the merged lse of its row: over the first
// n_parts slots of each of the n_split groups of params.n_parts slots. States go four at a time, so
// their loads are in flight together: with few output elements (one token's heads) each thread's
// walk over the partitions is the whole kernel, and one state after the other left it waiting on
// each load in turn.
fn merge_elem(e: u32, n_parts: u32, n_split: u32) -> Merged {
  let row = e / params.Dv;
  let t = row / params.H;
  let h = row % params.H;
  // (Nested loops: a division per state measured 2.7x slower on an H200 at 64 partitions.)
  var m4 = vec4<f32>(-3.0e38);
  for (var gs = 0u; gs < n_split; gs++) {
    let lo = gs * params.n_parts;
    var p = lo;
    for (; p + 4u <= lo + n_parts; p += 4u) {
      m4 = max(m4, vec4<f32>(part_lse(p, h, t), part_lse(p + 1u, h, t), part_lse(p + 2u, h, t), part_lse(p + 3u, h, t)));
    }
    for (; p < lo + n_parts; p++) { m4.x = max(m4.x, part_lse(p, h, t)); }
  }
  let m = max(max(m4.x, m4.y), max(m4.z, m4.w));
  if (m <= -2.0e38) { return Merged(0.0, NEG_INF_BITS); }
  var den4 = vec4<f32>(0.0);
  var acc4 = vec4<f32>(0.0);
  for (var gs = 0u; gs < n_split; gs++) {
    let lo = gs * params.n_parts;
    var p = lo;
    for (; p + 4u <= lo + n_parts; p += 4u) {
      let l = vec4<f32>(part_lse(p, h, t), part_lse(p + 1u, h, t), part_lse(p + 2u, h, t), part_lse(p + 3u, h, t));
      let o = vec4<f32>(part_o(p, e), part_o(p + 1u, e), part_o(p + 2u, e), part_o(p + 3u, e));
      // An empty state adds nothing, whatever its o holds.
      let live = l > vec4<f32>(-2.0e38);
      let w = select(vec4<f32>(0.0), exp(l - m), live);
      den4 += w;
      acc4 += w * select(vec4<f32>(0.0), o, live);
    }
    for (; p < lo + n_parts; p++) {
      let l = part_lse(p, h, t);
      if (l <= -2.0e38) { continue; }
      let w = exp(l - m);
      den4.x += w;
      acc4.x += w * part_o(p, e);
    }
  }
  var den = (den4.x + den4.y) + (den4.z + den4.w);
  var acc = (acc4.x + acc4.y) + (acc4.z + acc4.w);
  var mm = m;
  if (params.has_sinks == 1u) {
    let s = sinks[h];
    mm = max(m, s);
    let k = exp(m - mm);
    den = den * k + exp(s - mm);
    acc *= k;
  }
  return Merged(acc / den, bitcast<u32>(mm + log(den)));
}

// One thread per output word (two elements for 16-bit outputs). out_words may cover only tokens
// [t0, ..) (the real ones of a padded batch, or one sequence's); T stays the token stride of every
// [.., T] layout.
@compute @workgroup_size(WG)
fn merge_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) lid: u32) {
  let n = params.T * params.H * params.Dv;
  // Words from token t0 on (t0·H·Dv is even: Dv is a multiple of 8 wherever t0 > 0).
  let w0 = select(params.t0 * params.H * params.Dv / 2u, params.t0 * params.H * params.Dv, OUT_DTYPE == 0u);
  let w = (wid.y * nwg.x + wid.x) * WG + lid + w0;
  if (w >= w0 + params.out_words) { return; }
  var e0 = w;
  if (OUT_DTYPE != 0u) { e0 = 2u * w; }
  // A word's two 16-bit elements share a token (H·Dv is even).
  var n_parts = params.n_parts;
  let n_split = max(params.n_split, 1u);
  if (params.tok_parts > 0u) {
    n_parts = u32(max(tok_np[params.tok_parts + e0 / (params.H * params.Dv)], 0));
    if (n_parts == 0u || (n_parts == 1u && n_split == 1u)) { return; }
    n_parts = min(n_parts, params.n_parts);
  }
  let a = merge_elem(e0, n_parts, n_split);
  if (e0 % params.Dv == 0u) { lse_out[(e0 / params.Dv) % params.H * params.T + e0 / params.Dv / params.H] = a.lse_bits; }
  if (OUT_DTYPE == 0u) {
    out[w] = bitcast<u32>(a.value);
    return;
  }
  var bv = 0.0;
  if (e0 + 1u < n) {
    let b = merge_elem(e0 + 1u, n_parts, n_split);
    bv = b.value;
    if ((e0 + 1u) % params.Dv == 0u) { lse_out[((e0 + 1u) / params.Dv) % params.H * params.T + (e0 + 1u) / params.Dv / params.H] = b.lse_bits; }
  }
  out[w] = pack_pair(a.value, bv, OUT_DTYPE);
}
