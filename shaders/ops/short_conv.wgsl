// LFM2's short convolution over a step's rows (src/ops/short_conv.ts): a row is one sequence's tokens in
// the step (a prefill chunk, or one decode token), with its conv state: the last L − 1 values of Bx the
// sequence saw, oldest first. For token t of a row, from in = [B | C | x] (the in_proj's output row):
//   Bx_t = B_t · x_t;   y_t = Σ_k w[c, k] · Bx_{t-(L-1)+k}   (k < L; values before the sequence's start are 0)
//   out_t = C_t · y_t
// and the row's last L − 1 values of Bx become its state. One thread per (row, channel) walks the row's
// tokens in order with the window in registers: the state is read once and written once, by the same
// thread, so a step needs no second pass and no barrier; the work per token is L multiply-adds, so the
// serial walk costs little even for a prefill chunk (its parallelism is the channels).
// Snapshots (the prefix cache's): where a token is the last of its cache block (its slot in the paged
// cache is block·block_size + block_size − 1), the window after it — the sequence's state at the block's
// end — is also written to snap[block], so a later sequence that finds the block cached starts from it.

const WG: u32 = 64u;
// The most taps a kernel holds (the host checks L <= LMAX): the window is a private array.
const LMAX: u32 = 8u;

struct Params {
  H: u32,          // channels
  L: u32,          // kernel width (conv_L_cache)
  rows: u32,
  in_stride: u32,  // f32 elements per in row (3H for a dense in_proj output)
  out_stride: u32,
  block_size: u32,  // 0: no snapshots
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> bcx: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;          // [H, L]
// Per row: first token, tokens, state slot (-1: none), fresh (1: the row starts its sequence: zeros before it).
@group(0) @binding(3) var<storage, read> row_info: array<i32>;
@group(0) @binding(4) var<storage, read_write> state: array<f32>; // [slots, L - 1, H]
@group(0) @binding(5) var<storage, read_write> out: array<f32>;
@group(0) @binding(6) var<storage, read> slots: array<i32>;       // each token's cache slot
@group(0) @binding(7) var<storage, read_write> snap: array<f32>;  // [blocks, L - 1, H]

@compute @workgroup_size(WG)
fn short_conv_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                   @builtin(local_invocation_index) li: u32) {
  let g = (wid.y * nwg.x + wid.x) * WG + li;
  let H = params.H;
  let L = params.L;
  if (g >= params.rows * H) { return; }
  let r = g / H;
  let c = g % H;
  let start = u32(row_info[4u * r]);
  let n = u32(row_info[4u * r + 1u]);
  let slot = row_info[4u * r + 2u];
  let fresh = row_info[4u * r + 3u] != 0;
  var win: array<f32, LMAX>;
  let sbase = u32(max(slot, 0)) * (L - 1u) * H + c;
  for (var k = 0u; k < L - 1u; k++) {
    win[k] = select(state[sbase + k * H], 0.0, fresh || slot < 0);
  }
  for (var t = 0u; t < n; t++) {
    let i = (start + t) * params.in_stride;
    let bx = bcx[i + c] * bcx[i + 2u * H + c];
    var y = w[c * L + L - 1u] * bx;
    for (var k = 0u; k < L - 1u; k++) { y += w[c * L + k] * win[k]; }
    out[(start + t) * params.out_stride + c] = bcx[i + H + c] * y;
    for (var k = 0u; k + 2u < L; k++) { win[k] = win[k + 1u]; }
    win[L - 2u] = bx;
    if (params.block_size != 0u) {
      let slot_t = slots[start + t];
      if (slot_t >= 0 && u32(slot_t) % params.block_size == params.block_size - 1u) {
        let b = (u32(slot_t) / params.block_size) * (L - 1u) * H + c;
        for (var k = 0u; k < L - 1u; k++) { snap[b + k * H] = win[k]; }
      }
    }
  }
  if (slot >= 0) {
    for (var k = 0u; k < L - 1u; k++) { state[sbase + k * H] = win[k]; }
  }
}
