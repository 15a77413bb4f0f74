// gemm_mma.wgsl's tiles in workgroup memory as vec4<f16> arrays (VEC): four values a store. Matrix
// loads count offsets and strides in elements (TE = 4 values: every row starts on a multiple of 4).
// Rows per output column only.

const_assert !TW;
const TE: u32 = 4u;                                              // f16 values an element
var<workgroup> xt: array<vec4<f16>, NX * BM * XS / 4u>;          // the x tile: hi rows, then lo rows
var<workgroup> wt: array<vec4<f16>, BN * XS / 4u>;               // the weight tile: a row per output column

/** Four values into the x tile at f16 index `at` (a multiple of 4). */
fn put_x4(at: u32, h: vec4<f16>) {
  xt[at / 4u] = h;
}

/** The 8 weights of a word (output column n, k from kc, a multiple of 8) into the weight tile. */
fn put_w_word(n: u32, kc: u32, word: vec4<u32>) {
  wt[(n * XS + kc) / 4u] = vec4<f16>(w_pair(word.x), w_pair(word.y));
  wt[(n * XS + kc) / 4u + 1u] = vec4<f16>(w_pair(word.z), w_pair(word.w));
}
