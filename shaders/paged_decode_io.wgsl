// What both decode kernels (paged_decode.wgsl, portable; paged_decode_sg.wgsl, subgroups) share: their
// specialization, parameters and bindings, the 16-byte cache loads and the block-table lookup.

override Q_DTYPE: u32 = 0u;
override KV_DTYPE: u32 = 0u;
override OUT_DTYPE: u32 = 0u;

struct Params {
  T: u32, Hq: u32, Hkv: u32, S: u32,
  flags: u32, window: u32, scale: f32, softcap: f32,
  bs: u32, num_blocks: u32, max_blocks: u32, n_items: u32,
  part_len: u32, n_parts: u32, partial: u32, off_items: u32,
  off_qsl: u32, off_seqlens: u32, off_bt: u32, ws_lse: u32,
  k_scale: f32, v_scale: f32, _p0: u32, _p1: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> q: array<u32>;
@group(0) @binding(2) var<storage, read> k_cache: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> v_cache: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read> pmeta: array<i32>;
@group(0) @binding(5) var<storage, read> headp: array<f32>;
@group(0) @binding(6) var<storage, read_write> out: array<u32>;
@group(0) @binding(7) var<storage, read_write> lse: array<u32>;
@group(0) @binding(8) var<storage, read_write> ws: array<u32>;

/** Four elements (vec4 i of the EPV / 4 in it) of one 16-byte load of the cache. */
fn decode16(w: vec4<u32>, i: u32) -> vec4<f32> {
  if (KV_DTYPE == 0u) { return bitcast<vec4<f32>>(w); }
  if (KV_DTYPE == 3u) { return decode4(vec4<u32>(w[i], 0u, 0u, 0u), 3u); }
  return decode4(vec4<u32>(w[2u * i], w[2u * i + 1u], 0u, 0u), KV_DTYPE);
}

fn cache_row(s: u32, g: u32, j: u32) -> i32 {
  let blk = pmeta[params.off_bt + s * params.max_blocks + j / params.bs];
  if (blk < 0 || u32(blk) >= params.num_blocks) { return -1; }
  return i32((u32(blk) * params.Hkv + g) * params.bs + j % params.bs);
}

