// Dense addressing for flash_core.wgsl (dtypes f32, f16, bf16): q [B,Hq,Lq,D], k [B,Hkv,Lk,D], v [B,Hkv,Lk,Dv] -> out [B,Hq,Lq,Dv],
// lse [B,Hq,Lq]; one workgroup per (row tile, batch, kv head). Masks broadcast by strides.

override IN_DTYPE: u32 = 0u;
override OUT_DTYPE: u32 = 0u;

struct Params {
  B: u32, Hq: u32, Hkv: u32, Lq: u32,
  Lk: u32, G: u32, rows: u32, row_tiles: u32,
  flags: u32, window: u32, scale: f32, softcap: f32,
  ms_b: u32, ms_h: u32, ms_i: u32, ms_j: u32,
  // Equal to the core's NDC, DK4 and BC. Loops over these index only workgroup memory, and bounding
  // them by uniforms keeps compilers from unrolling them whole: the code stays small enough for
  // software adapters to compile in seconds, while the register tiles stay fully unrolled.
  n_dc: u32, n_dk4: u32, n_bc: u32, _pad: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> q: array<u32>;
@group(0) @binding(2) var<storage, read> k: array<u32>;
@group(0) @binding(3) var<storage, read> v: array<u32>;
@group(0) @binding(4) var<storage, read> mask: array<u32>;
@group(0) @binding(5) var<storage, read> headp: array<f32>;   // [Hq] ALiBi slopes, then [Hq] sinks
@group(0) @binding(6) var<storage, read_write> out: array<u32>;
@group(0) @binding(7) var<storage, read_write> lse: array<u32>;

fn q_load4(job: Job, gr: u32, d: u32) -> vec4<f32> {
  let h = job.g * params.G + gr % params.G;
  let w = word4_of(((job.b * params.Hq + h) * params.Lq + gr / params.G) * D + d, IN_DTYPE);
  if (IN_DTYPE == 0u) { return decode4(vec4<u32>(q[w], q[w + 1u], q[w + 2u], q[w + 3u]), 0u); }
  return decode4(vec4<u32>(q[w], q[w + 1u], 0u, 0u), IN_DTYPE);
}

fn k_load4(job: Job, j: u32, d: u32) -> vec4<f32> {
  let w = word4_of(((job.b * params.Hkv + job.g) * params.Lk + j) * D + d, IN_DTYPE);
  if (IN_DTYPE == 0u) { return decode4(vec4<u32>(k[w], k[w + 1u], k[w + 2u], k[w + 3u]), 0u); }
  return decode4(vec4<u32>(k[w], k[w + 1u], 0u, 0u), IN_DTYPE);
}

fn v_load4(job: Job, j: u32, c: u32) -> vec4<f32> {
  let w = word4_of(((job.b * params.Hkv + job.g) * params.Lk + j) * DV + c, IN_DTYPE);
  if (IN_DTYPE == 0u) { return decode4(vec4<u32>(v[w], v[w + 1u], v[w + 2u], v[w + 3u]), 0u); }
  return decode4(vec4<u32>(v[w], v[w + 1u], 0u, 0u), IN_DTYPE);
}

// k and v again as 16-byte words, and key j's row in them (rows of D and Dv elements): the
// subgroup-matrix tile stages f16 rows with them (flash_mma_core.wgsl WORDS; the host binds k and v).
@group(0) @binding(8) var<storage, read> k_w: array<vec4<u32>>;
@group(0) @binding(9) var<storage, read> v_w: array<vec4<u32>>;
fn kv_word_row(job: Job, j: u32) -> i32 { return i32((job.b * params.Hkv + job.g) * params.Lk + j); }

fn mask_word(job: Job, h: u32, pos: u32, j: u32) -> u32 {
  return mask[job.b * params.ms_b + h * params.ms_h + pos * params.ms_i + j * params.ms_j];
}

fn head_slope(h: u32) -> f32 { return headp[h]; }
fn head_sink(h: u32) -> f32 { return headp[params.Hq + h]; }

fn store_out4(job: Job, h: u32, pos: u32, col: u32, val: vec4<f32>) {
  let e = ((job.b * params.Hq + h) * params.Lq + pos) * DV + col;
  if (OUT_DTYPE == 0u) {
    out[e] = bitcast<u32>(val.x);
    out[e + 1u] = bitcast<u32>(val.y);
    out[e + 2u] = bitcast<u32>(val.z);
    out[e + 3u] = bitcast<u32>(val.w);
  } else {
    out[e >> 1u] = pack_pair(val.x, val.y, OUT_DTYPE);
    out[(e >> 1u) + 1u] = pack_pair(val.z, val.w, OUT_DTYPE);
  }
}

fn store_lse(job: Job, h: u32, pos: u32, bits: u32) {
  lse[(job.b * params.Hq + h) * params.Lq + pos] = bits;
}

@compute @workgroup_size(WG)
fn flash_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              lanes: Lanes) {
  let tile = wid.y * nwg.x + wid.x;
  if (tile >= params.row_tiles * params.B * params.Hkv) { return; }   // whole workgroup: stays uniform
  let bg = tile / params.row_tiles;
  flash_tile(Job(bg / params.Hkv, bg % params.Hkv, (tile % params.row_tiles) * BR, params.rows,
                 params.Lq, params.Lk, 0u, params.Lk, false), lanes);
}
