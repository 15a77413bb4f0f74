// moe_gemv.wgsl's partial sums over 16-byte weight words: 16/32-bit experts, and quantized experts of the
// types without a dot path, decoded four values at a time (moe_io.wgsl's moe_w_word). Lane `lane` reads
// words lane, lane + KT, ... of its group's 4 weight rows; each word meets every tile row.

fn moe_partial(tile: vec3<u32>, el: u32, n0: u32, lane: u32, rows: array<u32, MT>) -> array<vec4<f32>, MT> {
  let kc = params.K / EPV;
  var acc: array<vec4<f32>, MT>;
  for (var c = lane; c < kc; c += KT) {
    var lo: array<vec4<f32>, 4>;
    var hi: array<vec4<f32>, 4>;
    for (var r = 0u; r < 4u; r++) {
      var word = vec4<u32>(0u);
      if (n0 + r < params.N) { word = moe_w_word(el, n0 + r, c); }
      lo[r] = w_lo(word);
      if (E4 == 2u) { hi[r] = w_hi(word); }
    }
    for (var m = 0u; m < MT; m++) {
      if (m < tile.z) {
        let xa = x_load4(rows[m], c * E4);
        var s = vec4<f32>(dot(lo[0], xa), dot(lo[1], xa), dot(lo[2], xa), dot(lo[3], xa));
        if (E4 == 2u) {
          let xb = x_load4(rows[m], c * E4 + 1u);
          s += vec4<f32>(dot(hi[0], xb), dot(hi[1], xb), dot(hi[2], xb), dot(hi[3], xb));
        }
        acc[m] += s;
      }
    }
  }
  return acc;
}
