// Rotary position embedding (SPEC §7), in place on up to two strided views of one buffer in a single
// dispatch (the q heads and the k heads of a fused qkv row). One thread per (token m, head, pair i):
// table column i rotates the pair (a, b) of the head's rotary part,
//   half pairing (rotate_half: Llama, Mistral, Qwen):   a = i,  b = i + half
//   INTERLEAVED (DeepSeek V2/V3's pairs):               a = 2i, b = 2i + 1
// as x[a] ← x[a]·cos − x[b]·sin, x[b] ← x[b]·cos + x[a]·sin. Views 0 and 1 are rows at
// off + m·ts + h·hs (the rotary offset folded into off) for h < heads0 (view 0), then heads1 (view 1).
// Positions come from the GPU and are clamped to the table (the host checks them when it has them).

override INTERLEAVED: bool = false;
const WG: u32 = 256u;

struct Params {
  rows: u32, half: u32, num_pos: u32,
  heads0: u32, off0: u32, ts0: u32, hs0: u32,
  heads1: u32, off1: u32, ts1: u32, hs1: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read> positions: array<i32>;
@group(0) @binding(3) var<storage, read> cos_t: array<f32>;
@group(0) @binding(4) var<storage, read> sin_t: array<f32>;

@compute @workgroup_size(WG)
fn rope_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) lid: u32) {
  let g = (wid.y * nwg.x + wid.x) * WG + lid;
  let H = params.heads0 + params.heads1;
  if (g >= params.rows * H * params.half) { return; }
  let i = g % params.half;
  let hh = (g / params.half) % H;
  let m = g / (params.half * H);
  var base: u32;
  if (hh < params.heads0) { base = params.off0 + m * params.ts0 + hh * params.hs0; }
  else { base = params.off1 + m * params.ts1 + (hh - params.heads0) * params.hs1; }
  var a = base + i;
  var b = base + i + params.half;
  if (INTERLEAVED) {
    a = base + 2u * i;
    b = a + 1u;
  }
  let p = u32(clamp(positions[m], 0, i32(params.num_pos) - 1));
  let c = cos_t[p * params.half + i];
  let s = sin_t[p * params.half + i];
  let xa = x[a];
  let xb = x[b];
  x[a] = xa * c - xb * s;
  x[b] = xb * c + xa * s;
}
