// reshape_and_cache (SPEC §3): token t's key and value rows go to slot s = slotMapping[t], i.e. block
// s / bs, offset s % bs of the caches [numBlocks, Hkv, bs, D] and [numBlocks, Hkv, bs, Dv]. A negative
// slot is padding and a slot past the cache is skipped: nothing is written outside the cache. A cache
// split across buffers is written one part at a time: blocks [blk_lo, blk_lo + num_blocks) are bound,
// the others skipped.
// One thread per cache word (1 f32, 2 f16/bf16 or 4 fp8 elements), converting from the input dtype;
// fp8 values are divided by the per-tensor scale and rounded to nearest even, saturating at ±448.
// Two tokens mapped to one slot race (as in vLLM): the batch planner never produces that.
// Rows may be strided: token t's key head h starts at element k_off + t·k_stride + h·D of `key` (dense
// [T, Hkv, D] is k_off 0, k_stride Hkv·D), so a model's fused k|v projection writes straight from its
// output, both bindings on one buffer.

override IN_DTYPE: u32 = 0u;
override CACHE_DTYPE: u32 = 0u;
override WG: u32 = 64u;

struct Params {
  T: u32, Hkv: u32, D: u32, Dv: u32,
  bs: u32, num_blocks: u32, wk: u32, wv: u32,
  k_inv_scale: f32, v_inv_scale: f32, blk_lo: u32, _p1: u32,
  k_off: u32, k_stride: u32, v_off: u32, v_stride: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> key: array<u32>;
@group(0) @binding(2) var<storage, read> value: array<u32>;
@group(0) @binding(3) var<storage, read> slots: array<i32>;
@group(0) @binding(4) var<storage, read_write> key_cache: array<u32>;
@group(0) @binding(5) var<storage, read_write> value_cache: array<u32>;

fn in_elem(is_key: bool, i: u32) -> f32 {
  var word: u32;
  if (is_key) { word = key[word_of(i, IN_DTYPE)]; } else { word = value[word_of(i, IN_DTYPE)]; }
  return unpack_elem(word, (i & 1u) == 1u, IN_DTYPE);
}

// The cache word holding elements e0.. of a source row starting at element `src`.
fn cache_word(is_key: bool, src: u32, e0: u32, inv_scale: f32) -> u32 {
  var v: array<f32, 4>;
  for (var j = 0u; j < cache_epw(); j++) { v[j] = in_elem(is_key, src + e0 + j); }
  return pack_cache_word(v, inv_scale);
}

@compute @workgroup_size(WG)
fn cache_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) lid: u32) {
  let w = (wid.y * nwg.x + wid.x) * WG + lid;
  let per = params.wk + params.wv;
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
    key_cache[dst_row * params.wk + r] = cache_word(true, params.k_off + t * params.k_stride + h * params.D, r * epw, params.k_inv_scale);
  } else {
    let rv = r - params.wk;
    value_cache[dst_row * params.wv + rv] = cache_word(false, params.v_off + t * params.v_stride + h * params.Dv, rv * epw, params.v_inv_scale);
  }
}
