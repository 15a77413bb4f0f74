// Fills a weight part with pseudo-random values made on the GPU (a benchmark's weights, no upload).
// Element (n, k) of the whole weight is uniform on (-a, a), a = std·√3 (mean 0, standard deviation std):
//   h = pcg(k + pcg(n + pcg(seed))),  u = ((h >> 9) + 0.5) · 2^-22 - 1,  value = u · a
// (u is exact in f32; the product is correctly rounded), then stored as f32, f16 or bf16 (bf16 and f32
// round to nearest even). It depends on (seed, n, k) alone, not on how the rows are split into parts;
// src/ops/gemm.ts mirrors it on the host (randomLinearValues).

override W_DTYPE: u32 = 0u;
override WG: u32 = 256u;

struct InitParams {
  words: u32,     // words of this part
  row0: u32,      // the part's first row in the whole weight
  K: u32,
  seed: u32,
  amp: f32,
}

@group(0) @binding(0) var<uniform> ip: InitParams;
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;

fn pcg(v: u32) -> u32 {
  let s = v * 747796405u + 2891336453u;
  let t = ((s >> ((s >> 28u) + 4u)) ^ s) * 277803737u;
  return (t >> 22u) ^ t;
}

fn init_value(e: u32) -> f32 {
  let n = ip.row0 + e / ip.K;
  let k = e % ip.K;
  let h = pcg(k + pcg(n + pcg(ip.seed)));
  let u = (f32(h >> 9u) + 0.5) * 2.384185791015625e-7 - 1.0;
  return u * ip.amp;
}

@compute @workgroup_size(WG)
fn init_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) li: u32) {
  let i = (wid.y * nwg.x + wid.x) * WG + li;
  if (i >= ip.words) { return; }
  if (W_DTYPE == 0u) {
    dst[i] = bitcast<u32>(init_value(i));
    return;
  }
  dst[i] = pack_pair(init_value(2u * i), init_value(2u * i + 1u), W_DTYPE);
}
