// The score of one (row, key) pair as the flash tiles use it (flash_core.wgsl, flash_mma_core.wgsl):
// scaled, soft-capped, ALiBi-biased and masked, in base 2 (times log2 e), or MASKED where the key is
// invisible to the row. `visible` is what the caller knows (row and key in range); causality, the
// window (one- or two-sided) and the mask are applied here. i_abs is the row's position counted in keys (bottom-right
// causal). Needs the addressing's mask_word and head_slope and Params' flags, window, scale, softcap.
fn score_x2(job: Job, s: f32, visible_in: bool, h: u32, pos: u32, j: u32, i_abs: i32) -> f32 {
  let f = params.flags;
  var visible = visible_in;
  if ((f & FLAG_CAUSAL) != 0u && i32(j) > i_abs) { visible = false; }
  if ((f & FLAG_WINDOW) != 0u && i_abs - i32(j) >= i32(params.window)) { visible = false; }
  if ((f & FLAG_WINDOW_BOTH) != 0u && i32(j) - i_abs >= i32(params.window)) { visible = false; }
  var x = s * params.scale;
  if ((f & FLAG_SOFTCAP) != 0u) { x = params.softcap * tanh(x / params.softcap); }
  if ((f & FLAG_ALIBI) != 0u) { x += head_slope(h) * f32(i32(j) - i_abs); }
  if (visible && (f & (FLAG_MASK_BOOL | FLAG_MASK_ADD)) != 0u) {
    let mw = mask_word(job, h, pos, j);
    if ((f & FLAG_MASK_BOOL) != 0u) {
      visible = mw != 0u;
    } else if (mw == NEG_INF_BITS) {
      visible = false;
    } else {
      x += bitcast<f32>(mw);
    }
  }
  return select(MASKED, max(x * LOG2E, -1.0e38), visible);
}
