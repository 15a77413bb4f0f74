// RoPE and the cache write in one pass after a fused q|k|v projection (a model's step): each token's
// q heads are rotated in place in its row, its k heads are rotated on the way into the key cache and
// its v heads copied into the value cache (reshape_and_cache, SPEC §3; RoPE, SPEC §7), instead of a
// rope pass over q and k and then a cache-write pass.
// Rows: token t's q heads start at element t·stride of qkv, its k heads at k_off + t·stride, its v
// heads at v_off + t·stride (head size D for all three). The rotary part is the first 2·half
// elements of each head; pairs as in ops/rope.wgsl (half pairing (i, i + half), INTERLEAVED (2i, 2i + 1)).
// Threads: first T·q_heads·half, one per q pair; then one per cache word of each token's k and v heads
// (1 f32, 2 f16/bf16 or 4 fp8 elements, converted as paged_cache.wgsl does). A split cache runs once
// per part (blocks [blk_lo, blk_lo + num_blocks)); q_heads is 0 after the first part.

override CACHE_DTYPE: u32 = 0u;
override INTERLEAVED: bool = false;
override WG: u32 = 64u;

struct Params {
  T: u32, q_heads: u32, Hkv: u32, D: u32,
  bs: u32, num_blocks: u32, wk: u32, blk_lo: u32,
  k_inv_scale: f32, v_inv_scale: f32, half: u32, num_pos: u32,
  stride: u32, k_off: u32, v_off: u32, _p0: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read_write> qkv: array<f32>;
@group(0) @binding(2) var<storage, read> slots: array<i32>;
@group(0) @binding(3) var<storage, read> positions: array<i32>;
@group(0) @binding(4) var<storage, read> cos_t: array<f32>;
@group(0) @binding(5) var<storage, read> sin_t: array<f32>;
@group(0) @binding(6) var<storage, read_write> key_cache: array<u32>;
@group(0) @binding(7) var<storage, read_write> value_cache: array<u32>;

fn position(t: u32) -> u32 { return u32(clamp(positions[t], 0, i32(params.num_pos) - 1)); }

/** Element e of the head starting at `base`, rotated for position p (past the rotary part: as is). */
fn rotated(base: u32, e: u32, p: u32) -> f32 {
  if (e >= 2u * params.half) { return qkv[base + e]; }
  var i: u32;
  var partner: u32;
  var second: bool;
  if (INTERLEAVED) {
    i = e >> 1u;
    partner = e ^ 1u;
    second = (e & 1u) == 1u;
  } else {
    second = e >= params.half;
    i = select(e, e - params.half, second);
    partner = select(e + params.half, e - params.half, second);
  }
  let c = cos_t[p * params.half + i];
  let s = sin_t[p * params.half + i];
  // a' = a·cos − b·sin, b' = b·cos + a·sin
  return qkv[base + e] * c + select(-1.0, 1.0, second) * qkv[base + partner] * s;
}

/** The cache word holding elements e0.. of the head at `base` (rotated for a key). */
fn word(is_key: bool, base: u32, e0: u32, p: u32, inv_scale: f32) -> u32 {
  var v: array<f32, 4>;
  for (var j = 0u; j < cache_epw(); j++) {
    if (is_key) { v[j] = rotated(base, e0 + j, p); } else { v[j] = qkv[base + e0 + j]; }
  }
  return pack_cache_word(v, inv_scale);
}

@compute @workgroup_size(WG)
fn rope_cache_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                   @builtin(local_invocation_index) lid: u32) {
  let g = (wid.y * nwg.x + wid.x) * WG + lid;
  let nq = params.T * params.q_heads * params.half;
  if (g < nq) {
    let i = g % params.half;
    let h = (g / params.half) % params.q_heads;
    let t = g / (params.half * params.q_heads);
    let base = t * params.stride + h * params.D;
    var a = base + i;
    var b = base + i + params.half;
    if (INTERLEAVED) {
      a = base + 2u * i;
      b = a + 1u;
    }
    let p = position(t);
    let c = cos_t[p * params.half + i];
    let s = sin_t[p * params.half + i];
    let xa = qkv[a];
    let xb = qkv[b];
    qkv[a] = xa * c - xb * s;
    qkv[b] = xb * c + xa * s;
    return;
  }
  let w = g - nq;
  let per = 2u * params.wk;
  if (w >= params.T * params.Hkv * per) { return; }
  let th = w / per;
  let r = w % per;
  let t = th / params.Hkv;
  let h = th % params.Hkv;
  let row = cache_row(t, h);
  if (row < 0) { return; }
  let dst_row = u32(row);
  let epw = cache_epw();
  if (r < params.wk) {
    key_cache[dst_row * params.wk + r] = word(true, params.k_off + t * params.stride + h * params.D, r * epw, position(t), params.k_inv_scale);
  } else {
    let rv = r - params.wk;
    value_cache[dst_row * params.wk + rv] = word(false, params.v_off + t * params.stride + h * params.D, rv * epw, 0u, params.v_inv_scale);
  }
}
