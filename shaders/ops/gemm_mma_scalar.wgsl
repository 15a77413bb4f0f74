// gemm_mma.wgsl's tiles in workgroup memory as f16 arrays: every value a store of its own.

const TE: u32 = 1u;                                              // f16 values an element
var<workgroup> xt: array<f16, NX * BM * XS>;                    // the x tile: hi rows, then lo rows
var<workgroup> wt: array<f16, select(BN * XS, BK * WS, TW)>;     // the weight tile: a row per output column (TW: per k)

/** Four values into the x tile at f16 index `at`. */
fn put_x4(at: u32, h: vec4<f16>) {
  for (var i = 0u; i < 4u; i++) { xt[at + i] = h[i]; }
}

/** The 8 weights of a word (output column n, k from kc) into the weight tile. */
fn put_w_word(n: u32, kc: u32, word: vec4<u32>) {
  for (var i = 0u; i < 4u; i++) {
    let h2 = w_pair(word[i]);
    if (TW) {
      wt[(kc + 2u * i) * WS + n] = h2.x;
      wt[(kc + 2u * i + 1u) * WS + n] = h2.y;
    } else {
      wt[n * XS + kc + 2u * i] = h2.x;
      wt[n * XS + kc + 2u * i + 1u] = h2.y;
    }
  }
}
