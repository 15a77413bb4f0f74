// x through workgroup memory for the quantized GEMVs (gemv_qdot.wgsl, gemv_quant.wgsl; issue 42). A lane
// owns whole 32-value units, so its 8 vec4 loads of a unit's x, read straight from the x buffer, put a
// warp's 32 lanes on 32 different 128-byte lines: 8 times the cache wavefronts of a coalesced read. On
// an H200 the time went with them (R 2, which halves the weight bytes a unit of x meets, ran 1.5x slower
// than R 4; Q8_0 no slower than Q4_0 with half its bytes; the lm_head at 30% of the read kernel). So the
// workgroup stages CU units of each of its MT x rows at a time in `xst` with coalesced loads (the folded
// norm and SiLU·mul applied once a workgroup, not once a group), unit-minor, so that the lanes' reads of
// consecutive units are consecutive there; a row of the array is padded by one vec4 so that the staging
// writes do not meet in one bank. planLinear sizes CU to the workgroup storage beside the reduction.

const CU: u32 = 128u;   // units (of 32 values) of each x row staged at a time
var<workgroup> xst: array<vec4<f32>, MT * 8u * (CU + 1u)>;

/** Stages units c0 .. c0 + cn − 1 of the tile's x rows (every thread of the workgroup calls it, in
 *  uniform control flow: it holds the barriers around the writes). */
fn gemv_stage(rows: array<i32, MT>, sc: array<f32, MT>, li: u32, c0: u32, cn: u32) {
  workgroupBarrier();   // the chunk before is summed by every lane
  for (var v = li; v < MT * 8u * cn; v += WG) {
    let i = v / (8u * cn);
    let w = v % (8u * cn);
    xst[(i * 8u + w % 8u) * (CU + 1u) + w / 8u] = gemv_x4(rows[i], 8u * c0 + w, sc[i]);
  }
  workgroupBarrier();
}

/** The 32 x values of unit u (staged from unit c0 on) of the tile's x row i. */
fn gemv_staged(i: u32, u: u32, c0: u32) -> array<vec4<f32>, 8> {
  var xv: array<vec4<f32>, 8>;
  for (var j = 0u; j < 8u; j++) { xv[j] = xst[(i * 8u + j) * (CU + 1u) + u - c0]; }
  return xv;
}
