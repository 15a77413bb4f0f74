// The GEMV's partial sums on 8-bit activations (PlanLinearOptions.quantPath 'idot'; issue 42), for the
// types whose files give q_unit_i8 (ops/quant/<type>_i8.wgsl: Q8_0, Q4_0, Q4_K, Q6_K).
//
// As llama.cpp's Vulkan and CUDA mat-vec kernels do, x is quantized to 8 bits a unit of 32 values with
// a scale of its own (SPEC §8 lets a kernel do so where the 1e-2 tolerance on logits holds; the README
// says which kernels do), and a unit's sum becomes integer dot products: dot4I8Packed takes four
// products and their sum in one instruction where the GPU has one (NVIDIA's and AMD's do; Apple's do
// not, where the WGSL compiler writes it out). Per unit and weight row that is 8 dot products and the
// type's unpacking (a mask, a shift) instead of 32 quants made floats and 32 FMAs (gemv_qdot.wgsl).
//   - Each chunk of x is staged as f32 (gemv_xstage.wgsl: coalesced, the folded norm and SiLU·mul
//     applied), then quantized once a workgroup: a unit's scale is amax / 127, its values
//     round(127 · x / amax) (pack4x8snorm), and the integer sums of its halves are kept beside it.
//   - The unit's sum is dx · (c.x · (Σ_a q·xq − z·Σ_a xq) + c.y · (Σ_b q·xq − z·Σ_b xq) − o · Σ xq), a
//     and b its values 0..15 and 16..31, z the type's zero point (QI_Z), c the scales of the halves
//     and o the min (Q4_K): the same sum as the float64 reference of the dequantized weights takes
//     over the quantized x.
// As in gemv_qdot.wgsl, the R rows' loads of a lane's next unit are issued before its current unit is
// summed.

/** One unit of one weight row: 32 quants as 8 words of four bytes (values 4j .. 4j + 3 in word j, byte
 *  order), the scales of values 0..15 and 16..31, and the min (Σx's factor). */
struct QI { q: array<u32, 8>, c: vec2<f32>, o: f32 }

var<workgroup> xq: array<u32, MT * 8u * (CU + 1u)>;
/** A staged unit's scale, and the sums of its quantized values 0..15 and 16..31. */
var<workgroup> xqs: array<vec4<f32>, MT * (CU + 1u)>;

/** Quantizes the staged chunk's cn units of every x row to 8 bits (every thread calls it, in uniform control flow). */
fn gemv_quantize(li: u32, cn: u32) {
  for (var v = li; v < MT * cn; v += WG) {
    let i = v / cn;
    let w = v % cn;
    var xv: array<vec4<f32>, 8>;
    var m = vec4<f32>(0.0);
    for (var j = 0u; j < 8u; j++) {
      xv[j] = xst[(i * 8u + j) * (CU + 1u) + w];
      m = max(m, abs(xv[j]));
    }
    let amax = max(max(m.x, m.y), max(m.z, m.w));
    let inv = select(0.0, 1.0 / amax, amax > 0.0);
    var sa = 0i;
    var sb = 0i;
    for (var j = 0u; j < 8u; j++) {
      let p = pack4x8snorm(xv[j] * inv);
      xq[(i * 8u + j) * (CU + 1u) + w] = p;
      let s = dot4I8Packed(p, 0x01010101u);
      if (j < 4u) { sa += s; } else { sb += s; }
    }
    xqs[i * (CU + 1u) + w] = vec4<f32>(amax / 127.0, f32(sa), f32(sb), 0.0);
  }
  workgroupBarrier();
}

fn gemv_raw_rows(n0: u32, u: u32) -> array<QRaw, R> {
  var raw: array<QRaw, R>;
  for (var r = 0u; r < R; r++) { raw[r] = q_raw(n0 + r * NGRP, u); }
  return raw;
}

fn gemv_partial(t: GemvTile, g: u32, lane: u32, sc: array<f32, MT>) -> array<vec4<f32>, MT> {
  let units = params.K / 32u;
  let rows = gemv_x_rows(t);
  let n0 = gemv_row(t.rb, g, 0u);
  let li = g * KT + lane;
  var acc: array<vec4<f32>, MT>;
  var u = lane;
  var raw = gemv_raw_rows(n0, min(u, units - 1u));
  for (var c0 = 0u; c0 < units; c0 += CU) {
    let cn = min(CU, units - c0);
    gemv_stage(rows, sc, li, c0, cn);
    gemv_quantize(li, cn);
    for (; u < c0 + cn; u += KT) {
      let next = gemv_raw_rows(n0, min(u + KT, units - 1u));
      var xw: array<array<u32, 8>, MT>;
      var xs: array<vec4<f32>, MT>;
      for (var i = 0u; i < MT; i++) {
        for (var j = 0u; j < 8u; j++) { xw[i][j] = xq[(i * 8u + j) * (CU + 1u) + u - c0]; }
        xs[i] = xqs[i * (CU + 1u) + u - c0];
      }
      for (var r = 0u; r < R; r++) {
        // Rows past N decode what the bounds give; their sums are never stored (gemv_quant.wgsl).
        let wq = q_unit_i8(raw[r], u);
        let hot = vec4<u32>(r) == vec4<u32>(0u, 1u, 2u, 3u);
        for (var i = 0u; i < MT; i++) {
          var a = 0i;
          var b = 0i;
          for (var j = 0u; j < 4u; j++) {
            a += dot4I8Packed(wq.q[j], xw[i][j]);
            b += dot4I8Packed(wq.q[4u + j], xw[i][4u + j]);
          }
          let s = xs[i].x * (wq.c.x * (f32(a) - QI_Z * xs[i].y) + wq.c.y * (f32(b) - QI_Z * xs[i].z) - wq.o * (xs[i].y + xs[i].z));
          acc[i] += select(vec4<f32>(0.0), vec4<f32>(s), hot);
        }
      }
      raw = next;
    }
  }
  return acc;
}
