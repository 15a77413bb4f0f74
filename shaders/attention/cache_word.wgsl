// What every paged-cache write shares (SPEC §3): where token t's head h lands and how a cache word
// packs its elements. Used by paged_cache.wgsl and rope_cache.wgsl, whose entry points declare
// CACHE_DTYPE, `slots` and a Params with bs, num_blocks, blk_lo and Hkv.

/** Elements per cache word: 1 f32, 2 f16/bf16, 4 fp8 e4m3. */
fn cache_epw() -> u32 { return select(select(2u, 4u, CACHE_DTYPE == 3u), 1u, CACHE_DTYPE == 0u); }

/**
 * The cache row of token t's head h: block slot / bs, offset slot % bs of the part holding blocks
 * [blk_lo, blk_lo + num_blocks); -1 for a padding slot (negative) or a block outside the part.
 */
fn cache_row(t: u32, h: u32) -> i32 {
  let slot = slots[t];
  if (slot < 0) { return -1; }
  let blk = u32(slot) / params.bs;
  if (blk < params.blk_lo || blk - params.blk_lo >= params.num_blocks) { return -1; }
  return i32(((blk - params.blk_lo) * params.Hkv + h) * params.bs + u32(slot) % params.bs);
}

/** One cache word from its cache_epw() values: f32 as is, f16/bf16 packed in pairs, fp8 divided by the
 *  scale, rounded to nearest even and saturated at ±448. */
fn pack_cache_word(v: array<f32, 4>, inv_scale: f32) -> u32 {
  if (CACHE_DTYPE == 0u) { return bitcast<u32>(v[0]); }
  if (CACHE_DTYPE == 3u) {
    var w = 0u;
    for (var j = 0u; j < 4u; j++) { w |= f32_to_e4m3(v[j] * inv_scale) << (8u * j); }
    return w;
  }
  return pack_pair(v[0], v[1], CACHE_DTYPE);
}
