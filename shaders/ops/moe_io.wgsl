// What the grouped expert products (moe_gemv.wgsl, moe_gemm.wgsl) share. A workgroup works on one tile:
// up to BM consecutive entries of the sorted pair list that all belong to ONE expert (moe_sort.wgsl), so
// the expert's weight words it reads serve every row of the tile. For tile row r (pair p = sorted[r]):
//   out[p, n] = Σ_k in(p, k) · W_e[n, k],   n < N
// with W_e expert e's [N, K] slice of a part ([experts, N, K], experts e0 .. e1-1), and in(p, ·) row
// in_row0 + p / in_div of x: the hidden state of pair p's token (gate|up: in_div = topK), or, with act
// set, act(first K) · (next K) of pair p's [gate | up] row (down: in_div = 1): act 1 silu(g)·u, act 2
// gpt-oss's swiglu_oai (clamp(u, ±limit) + 1) · g·sigmoid(alpha·g) with g = min(gate, limit).
// With has_bias, out[p, n] also adds bias[e·N + n] (the expert's bias: gpt-oss's gate_up_proj_bias
// [E, 2I] for gate|up, down_proj_bias [E, H] for down), e the part's global expert index.
// Weights are read as 16-byte words (EPV elements: 4 f32 or 8 f16/bf16; K a multiple of EPV); x as vec4.
// Quantized experts (ops/quant.wgsl, one type's decoder; Q_TYPE 0 for 16/32-bit ones) keep their blocks:
// a part holds its experts' rows one after the other, expert e's row n being row (e − e0)·N + n of
// the part's blocks, and moe_w_word decodes 4 values of it to f32 (EPV 4).
// A part's dispatch covers a host bound of tiles (`tiles`); workgroups past the part's real tiles exit.

override W_DTYPE: u32 = 0u;   // 0 f32, 1 f16, 2 bf16 (core/dtype.wgsl)

struct Params {
  N: u32,
  K: u32,
  e0: u32,
  e1: u32,
  tiles: u32,       // tiles this dispatch covers (a bound; the real count is in lists)
  in_div: u32,
  in_row0: u32,
  in_stride: u32,   // vec4s per x row
  act: u32,         // 0: x as it is; 1: silu(gate)·up; 2: swiglu_oai
  o_ts: u32,
  o_te: u32,
  o_tr: u32,
  o_sorted: u32,
  q_plane: u32,     // quantized experts: the word where the part's scale plane starts (ops/quant.wgsl)
  has_bias: u32,
  alpha: f32,       // swiglu_oai's sigmoid slope
  limit: f32,       // swiglu_oai's clamp
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> w: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> lists: array<u32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
@group(0) @binding(5) var<storage, read> bias: array<f32>;

var<workgroup> tile_e: u32;
var<workgroup> tile_r0: u32;
var<workgroup> tile_n: u32;

/**
 * Tile ti of this part as (expert, first sorted position, rows), the same in every invocation (read
 * through workgroup memory, so barriers may follow a test of it); rows 0 for a surplus workgroup.
 */
fn load_tile(ti: u32, li: u32, rows_max: u32) -> vec3<u32> {
  if (li == 0u) {
    let t = lists[params.o_ts + params.e0] + ti;
    var e = 0u;
    var r0 = 0u;
    var n = 0u;
    if (t < lists[params.o_ts + params.e1]) {
      e = lists[params.o_te + t];
      r0 = lists[params.o_tr + t];
      n = min(rows_max, lists[e + 1u] - r0);
    }
    tile_e = e;
    tile_r0 = r0;
    tile_n = n;
  }
  let e = workgroupUniformLoad(&tile_e);
  let r0 = workgroupUniformLoad(&tile_r0);
  let n = workgroupUniformLoad(&tile_n);
  return vec3<u32>(e, r0, n);
}

fn pair_at(r: u32) -> u32 { return lists[params.o_sorted + r]; }

fn in_row(p: u32) -> u32 { return params.in_row0 + p / params.in_div; }

/** SiLU in f32 without overflow: exp only of non-positive arguments. */
fn silu4(g: vec4<f32>) -> vec4<f32> {
  let z = exp(-abs(g));
  return g * select(z / (1.0 + z), 1.0 / (1.0 + z), g >= vec4<f32>(0.0));
}

/** gpt-oss's gated product: (clamp(u, ±limit) + 1) · g · sigmoid(alpha·g), g = min(gate, limit). */
fn swiglu_oai4(gate: vec4<f32>, up: vec4<f32>) -> vec4<f32> {
  let g = min(gate, vec4<f32>(params.limit));
  let u = clamp(up, vec4<f32>(-params.limit), vec4<f32>(params.limit));
  let a = params.alpha * g;
  let z = exp(-abs(a));
  let sig = select(z / (1.0 + z), 1.0 / (1.0 + z), a >= vec4<f32>(0.0));
  return (u + 1.0) * (g * sig);
}

/** Elements 4·c4 .. 4·c4+3 of input row `row`. */
fn x_load4(row: u32, c4: u32) -> vec4<f32> {
  let base = row * params.in_stride + c4;
  if (params.act == 1u) { return silu4(x[base]) * x[base + params.K / 4u]; }
  if (params.act == 2u) { return swiglu_oai4(x[base], x[base + params.K / 4u]); }
  return x[base];
}

/** The bias of output n of the part's expert el (0 without biases). */
fn moe_bias(el: u32, n: u32) -> f32 {
  if (params.has_bias == 0u) { return 0.0; }
  return bias[(params.e0 + el) * params.N + n];
}


/** Word c (EPV values) of row n of the part's expert el (local index): 16 bytes of the 16/32-bit
 *  weights, or of quantized experts (EPV 4) four values decoded to f32. */
fn moe_w_word(el: u32, n: u32, c: u32) -> vec4<u32> {
  let row = el * params.N + n;
  if (Q_TYPE != 0u) { return bitcast<vec4<u32>>(q_load4(row, c)); }
  return w[row * (params.K / EPV) + c];
}
