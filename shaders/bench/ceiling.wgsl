// Ceilings measured through WebGPU itself, the yardsticks of every benchmark:
//   fma_main   f32 FMA rate: 8 independent vec4 accumulators per thread (enough ILP to hide the FMA
//              latency), ITERS rounds; the result is written so nothing is optimized away.
//   copy_main  device bandwidth, read + write: one vec4 per thread per step, grid-strided.
//   read_main  read bandwidth: each thread sums a grid-strided range of vec4 and writes one value.

override WG: u32 = 256u;

struct Params { n4: u32, iters: u32, seed: f32, _pad: u32 }

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> src: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> dst: array<vec4<f32>>;

fn gid(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 { return (wid.y * nwg.x + wid.x) * WG + lid; }

@compute @workgroup_size(WG)
fn fma_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) lid: u32) {
  let t = gid(wid, nwg, lid);
  let x = f32(t & 255u) * 1.0e-3 + params.seed;
  var a0 = vec4<f32>(x, x + 0.1, x + 0.2, x + 0.3);
  var a1 = a0 + 1.0; var a2 = a0 + 2.0; var a3 = a0 + 3.0;
  var a4 = a0 + 4.0; var a5 = a0 + 5.0; var a6 = a0 + 6.0; var a7 = a0 + 7.0;
  let m = vec4<f32>(0.9999);
  let c = vec4<f32>(1.0e-4);
  // Four rounds per trip: the loop's own compare and branch stay under 4% of the instructions.
  for (var i = 0u; i < params.iters; i += 4u) {
    a0 = fma(a0, m, c); a1 = fma(a1, m, c); a2 = fma(a2, m, c); a3 = fma(a3, m, c);
    a4 = fma(a4, m, c); a5 = fma(a5, m, c); a6 = fma(a6, m, c); a7 = fma(a7, m, c);
    a0 = fma(a0, m, c); a1 = fma(a1, m, c); a2 = fma(a2, m, c); a3 = fma(a3, m, c);
    a4 = fma(a4, m, c); a5 = fma(a5, m, c); a6 = fma(a6, m, c); a7 = fma(a7, m, c);
    a0 = fma(a0, m, c); a1 = fma(a1, m, c); a2 = fma(a2, m, c); a3 = fma(a3, m, c);
    a4 = fma(a4, m, c); a5 = fma(a5, m, c); a6 = fma(a6, m, c); a7 = fma(a7, m, c);
    a0 = fma(a0, m, c); a1 = fma(a1, m, c); a2 = fma(a2, m, c); a3 = fma(a3, m, c);
    a4 = fma(a4, m, c); a5 = fma(a5, m, c); a6 = fma(a6, m, c); a7 = fma(a7, m, c);
  }
  let s = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
  if (s.x == 1234.5) { dst[t % params.n4] = s; }   // never true, but the compiler cannot know
}

// Bandwidth kernels keep four 16-byte loads in flight per thread; the host makes n4 a multiple of
// 4 × the grid's thread count, so every thread's four loads of a round are in bounds.
@compute @workgroup_size(WG)
fn copy_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) lid: u32) {
  let stride = nwg.x * nwg.y * WG;
  for (var i = gid(wid, nwg, lid); i + 3u * stride < params.n4; i += 4u * stride) {
    let x0 = src[i]; let x1 = src[i + stride]; let x2 = src[i + 2u * stride]; let x3 = src[i + 3u * stride];
    dst[i] = x0; dst[i + stride] = x1; dst[i + 2u * stride] = x2; dst[i + 3u * stride] = x3;
  }
}

@compute @workgroup_size(WG)
fn read_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) lid: u32) {
  let t = gid(wid, nwg, lid);
  let stride = nwg.x * nwg.y * WG;
  var a0 = vec4<f32>(0.0); var a1 = a0; var a2 = a0; var a3 = a0;
  for (var i = t; i + 3u * stride < params.n4; i += 4u * stride) {
    a0 += src[i]; a1 += src[i + stride]; a2 += src[i + 2u * stride]; a3 += src[i + 3u * stride];
  }
  let acc = a0 + a1 + a2 + a3;
  if (acc.x == 1234.5) { dst[t % params.n4] = acc; }
}
