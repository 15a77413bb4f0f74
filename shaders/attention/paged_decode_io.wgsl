// What both decode kernels (paged_decode.wgsl, portable; paged_decode_sg.wgsl, subgroups) share: their
// specialization, parameters and bindings, their work items, the 16-byte cache loads and the
// block-table lookup.

override Q_DTYPE: u32 = 0u;
override KV_DTYPE: u32 = 0u;
override OUT_DTYPE: u32 = 0u;

struct Params {
  T: u32, Hq: u32, Hkv: u32, S: u32,
  flags: u32, window: u32, scale: f32, softcap: f32,
  bs: u32, num_blocks: u32, max_blocks: u32, hdr_items: u32,
  off_items: u32, off_qsl: u32, off_seqlens: u32, off_bt: u32,
  ws_lse: u32, q_stride: u32, pslots: u32, _p2: u32,   // q_stride: elements between tokens' query rows; pslots: partition slots of one cache part
}

// Group 0: what the plan owns (parameters, the plan buffer, per-head parameters, the partition
// workspace); group 1: the K/V source (a layer's cache and its scales); group 2: what one run reads and
// writes. A plan makes group 0 once; the others come from the runtime's bind-group cache.
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> pmeta: array<i32>;   // header | qsl | seqLens | blockTable | tok_np | items (attention/plan.ts)
@group(0) @binding(2) var<storage, read> headp: array<f32>;
@group(0) @binding(3) var<storage, read_write> ws: array<u32>;
@group(1) @binding(0) var<storage, read> k_cache: array<vec4<u32>>;
@group(1) @binding(1) var<storage, read> v_cache: array<vec4<u32>>;
@group(1) @binding(2) var<storage, read> kv_scale: array<f32>;   // [k scale, v scale] (fp8 caches; ones otherwise), then the part's first and end block and index (u32)
@group(2) @binding(0) var<storage, read> q: array<u32>;
@group(2) @binding(1) var<storage, read_write> out: array<u32>;
@group(2) @binding(2) var<storage, read_write> lse: array<u32>;

/** Four elements (vec4 i of the EPV / 4 in it) of one 16-byte load of the cache. */
fn decode16(w: vec4<u32>, i: u32) -> vec4<f32> {
  if (KV_DTYPE == 0u) { return bitcast<vec4<f32>>(w); }
  if (KV_DTYPE == 3u) { return decode4(vec4<u32>(w[i], 0u, 0u, 0u), 3u); }
  return decode4(vec4<u32>(w[2u * i], w[2u * i + 1u], 0u, 0u), KV_DTYPE);
}

/** Whether physical block index blk is good and in the bound buffer (for a cache split across
 *  buffers: in the bound part). */
fn block_ok(blk: i32) -> bool {
  if (blk < 0 || u32(blk) >= params.num_blocks) { return false; }
  if ((params.flags & FLAG_SPLIT) != 0u) {
    return u32(blk) >= bitcast<u32>(kv_scale[2]) && u32(blk) < bitcast<u32>(kv_scale[3]);
  }
  return true;
}

/** Whether logical block b of sequence s lies in the bound buffer. */
fn block_in_part(s: u32, b: u32) -> bool {
  return block_ok(pmeta[params.off_bt + s * params.max_blocks + b]);
}

/** Cache row of key position j of sequence s in the bound buffer, or -1 when its block index is bad
 *  (or, for a cache split across buffers, in another part: such keys are masked). */
fn cache_row(s: u32, g: u32, j: u32) -> i32 {
  let blk = pmeta[params.off_bt + s * params.max_blocks + j / params.bs];
  if (!block_ok(blk)) { return -1; }
  var b = u32(blk);
  if ((params.flags & FLAG_SPLIT) != 0u) { b -= bitcast<u32>(kv_scale[2]); }
  return i32((b * params.Hkv + g) * params.bs + j % params.bs);
}


/** A decode work item (attention/plan.ts: s, g, row tile, partition, k_lo, k_hi, partial): sequence s,
 *  kv head g, partition part over keys [k_lo, k_hi); the sequence's token row t and position pos;
 *  partial: a partition's state for the merge rather than the output. Not valid: out of range. */
struct Item { valid: bool, s: u32, g: u32, part: u32, t: u32, pos: i32, k_lo: u32, k_hi: u32, partial: bool }

fn decode_item(item: u32) -> Item {
  var it: Item;
  it.valid = false;
  if (item >= u32(pmeta[params.hdr_items])) { return it; }
  let base = params.off_items + ITEM_WORDS * item;
  it.s = u32(pmeta[base]);
  it.g = u32(pmeta[base + 1u]);
  it.part = u32(pmeta[base + 3u]);
  if (it.s >= params.S || it.g >= params.Hkv) { return it; }
  let q0 = pmeta[params.off_qsl + it.s];
  if (q0 < 0 || u32(q0) >= params.T) { return it; }
  it.t = u32(q0);
  let seq_len = u32(clamp(pmeta[params.off_seqlens + it.s], 1, i32(params.max_blocks * params.bs)));
  it.pos = i32(seq_len) - 1;
  it.k_lo = min(u32(max(pmeta[base + 4u], 0)), seq_len);
  it.k_hi = clamp(u32(max(pmeta[base + 5u], 0)), it.k_lo, seq_len);
  it.partial = pmeta[base + 6u] != 0;
  // A split cache: every item's state goes to the merge, in its part's partition slots.
  if ((params.flags & FLAG_SPLIT) != 0u) {
    it.partial = true;
    it.part += bitcast<u32>(kv_scale[4]) * params.pslots;
  }
  it.valid = true;
  return it;
}

/** Head h's final softmax state from its max m and sum l (log2 domain). The learned sink is folded in
 *  where the state is final (a partition's state is merged first): keep rescales the accumulated
 *  P·V, l is the sum to divide by, lse_bits the natural-log LSE (-inf when nothing was visible). */
struct Final { visible: bool, keep: f32, l: f32, lse_bits: u32 }

fn final_state(m: f32, l: f32, h: u32, partial: bool) -> Final {
  var fs = Final(m > VISIBLE_MIN, 1.0, l, NEG_INF_BITS);
  if (!fs.visible) { return fs; }
  var mf = m;
  if (!partial && (params.flags & FLAG_SINKS) != 0u) {
    let s2 = headp[params.Hq + h] * LOG2E;
    let mn = max(mf, s2);
    fs.keep = exp2(mf - mn);
    fs.l = l * fs.keep + exp2(s2 - mn);
    mf = mn;
  }
  fs.lse_bits = bitcast<u32>((mf + log2(fs.l)) * LN2);
  return fs;
}
