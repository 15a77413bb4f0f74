// Average pooling of a square grid held as rows (ops/pool.ts avgPoolGrid): x [G·G, C], row gy·G + gx
// the grid's cell (gy, gx); out [S·S, C] with S = G / KW, cell (ty, tx) the mean of the KW × KW cells
// (ty·KW + dy, tx·KW + dx), summed in f32 in (dy, dx) order, then divided by KW². One thread an output.

const WG: u32 = 256u;

struct PoolParams { G: u32, C: u32, KW: u32 }
@group(0) @binding(0) var<uniform> params: PoolParams;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(WG)
fn avg_pool_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) lid: u32) {
  let i = (wid.y * nwg.x + wid.x) * WG + lid;
  let S = params.G / params.KW;
  if (i >= S * S * params.C) { return; }
  let c = i % params.C;
  let t = i / params.C;
  let ty = t / S;
  let tx = t % S;
  var s = 0.0;
  for (var dy = 0u; dy < params.KW; dy++) {
    for (var dx = 0u; dx < params.KW; dx++) {
      s += x[((ty * params.KW + dy) * params.G + tx * params.KW + dx) * params.C + c];
    }
  }
  out[i] = s / f32(params.KW * params.KW);
}
