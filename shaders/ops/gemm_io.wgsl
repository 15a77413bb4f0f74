// What the linear-layer kernels (gemv.wgsl, gemm.wgsl) share: parameters, bindings, the input-row
// loads with their fused prologues (row gather, SiLU-gated product) and the fused epilogue (bias,
// accumulation into the output). out[m, n0 + n] (+)= sum_k in(m, k) · W[n, k] (+ bias[n0 + n]), where
// W is one part of a weight ([rows, K] of the HF layout, row n0 onwards) and in(m, ·) is row m of x,
// or row gather[m] of x, or silu(gate) · up of that row's [gate | up] halves.
// Weights are read as 16-byte words: 4 f32 or 8 f16/bf16 elements (EPV), K a multiple of EPV, so
// every row starts on a 16-byte boundary; x is f32 read as vec4 (K a multiple of 4). Quantized weights
// (ops/quant.wgsl, included by the linear programs) are dequantized 4 values at a time into f32 words
// (EPV 4, W_DTYPE 0) for the GEMV and the FMA GEMM, into f16 words (EPV 8, W_DTYPE 1) for the matrices.

override W_DTYPE: u32 = 0u;   // 0 f32, 1 f16, 2 bf16 (core/dtype.wgsl)

const F_BIAS: u32 = 1u;
const F_ACCUMULATE: u32 = 2u;
const F_GATHER: u32 = 4u;
const F_SILU_MUL: u32 = 8u;
const F_RMS: u32 = 16u;   // the GEMV's input is RMSNorm(x) · nw (gemv.wgsl gemv_scales): a norm pass folded in

struct Params {
  M: u32,           // output rows
  N: u32,           // rows of this weight part (output columns of this dispatch)
  K: u32,
  n0: u32,          // the part's first row: its first output column
  out_stride: u32,  // N of the whole weight: elements per output row
  x_stride: u32,    // vec4s per x row (K/4, or 2K/4 with silu_mul)
  x_rows: u32,      // rows x holds: gathered indices outside [0, x_rows) read a zero row
  flags: u32,
  k_split: u32,     // the subgroup-matrix GEMM: K split over this many workgroups (0 or 1: none), each
                    // writing its partial sums to rows split·M.. of `out` (a workspace) for gemm_splitk.wgsl
  eps: f32,         // F_RMS: RMSNorm's epsilon
  q_plane: u32,     // quantized weights (ops/quant.wgsl, Q_TYPE > 0): the word where the part's scale plane starts
}

// Group 0: the weight (constant per layer); group 1: the activations.
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> w: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> bias: array<f32>;
@group(0) @binding(3) var<storage, read> nw: array<vec4<f32>>;   // F_RMS: the norm's weight (f32, K values)
@group(1) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(1) @binding(1) var<storage, read> gather: array<i32>;
@group(1) @binding(2) var<storage, read_write> out: array<f32>;

/** The x row that output row m reads, or -1 for a zero row (m past M, or a gathered index out of range). */
fn x_src_row(m: u32) -> i32 {
  if (m >= params.M) { return -1; }
  if ((params.flags & F_GATHER) != 0u) {
    let g = gather[m];
    if (g < 0 || u32(g) >= params.x_rows) { return -1; }
    return g;
  }
  return i32(m);
}

/** SiLU in f32 without overflow: exp only of non-positive arguments. */
fn silu4(g: vec4<f32>) -> vec4<f32> {
  let e = exp(-abs(g));
  let sig = select(e / (1.0 + e), 1.0 / (1.0 + e), g >= vec4<f32>(0.0));
  return g * sig;
}

/** Elements 4·c4 .. 4·c4+3 of the kernel's input row `row` (zeros for row -1). */
fn x_load4(row: i32, c4: u32) -> vec4<f32> {
  if (row < 0) { return vec4<f32>(0.0); }
  let base = u32(row) * params.x_stride + c4;
  if ((params.flags & F_SILU_MUL) != 0u) {
    return silu4(x[base]) * x[base + params.K / 4u];
  }
  return x[base];
}


/** The epilogue of output (m, n), n local to the part: bias, then accumulation into what out holds. */
fn store_out(m: u32, n: u32, v: f32) {
  var r = v;
  if ((params.flags & F_BIAS) != 0u) { r += bias[params.n0 + n]; }
  let i = m * params.out_stride + params.n0 + n;
  if ((params.flags & F_ACCUMULATE) != 0u) { r += out[i]; }
  out[i] = r;
}
