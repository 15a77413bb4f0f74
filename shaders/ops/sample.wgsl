// Token choice on the GPU, so a decode step reads back only ids. One workgroup per row of logits
// [rows, V] (V up to ~152k); nothing sorts the vocabulary.
//
// argmax_main: the index of the row's largest logit, ties to the lowest index; NaN never wins (a row of
// NaN gives 0).
//
// sample_main (src/reference/ops.ts, sampleFilterRef / sampleRef, is the same procedure in float64):
//   z = logit · inv_temp (f32, so ties and order are the host reference's), m = max z, p = exp(z − m);
//   top-k: the k-th largest z by a radix select over the order-preserving u32 keys of z, 8 bits per
//     pass, with counts in a 256-bin workgroup histogram (4 passes); tokens z ≥ it are kept (ties too).
//     When k ≤ WG and the kept tokens fit in WG slots (the usual case), they are gathered into
//     workgroup memory and top-p and the draw below run over them there, with no further pass;
//   top-p: the same select over probability mass, each kept token's p/Σp as a 2^30 fixed-point count
//     (u32 atomics; f32 ones do not exist): the largest key whose mass at or above it reaches topP;
//   min-p (sample_rows_main only): first, tokens with z < m + ln(min_p) are out (p below min_p · p_max);
//   draw: u from the counter-based hash of (seed, stream, step) (pcg(step ^ pcg(stream ^ pcg(seed))), top 24
//     bits); the token is the first, in vocabulary order, whose cumulative kept mass exceeds u·Σp: each
//     thread sums the kept p of a contiguous chunk, a scan over the chunks finds the chunk where the
//     cumulative mass passes u·Σp, and its thread walks the chunk.
// A row with no finite maximum (all NaN or -inf, or +inf after scaling) falls back to argmax.
//
// sample_main takes one setting for every row, its stream being the row. sample_rows_main takes each
// row's own from row_params (a serving step's requests, each with its settings, seed and token index),
// so a request's draws do not depend on which row of which step it lands in.
//
// Every pass over the row is latency-bound (one workgroup per row: a batch-1 decode keeps one SM busy),
// so the workgroup is as large as the adapter allows for big vocabularies (WG, specialized), and each
// thread issues EPT consecutive loads before using any.

const WG: u32 = 256u;
const EPT: u32 = 4u;
const NONE: u32 = 0xffffffffu;

struct Params {
  rows: u32, V: u32, top_k: u32, has_top_p: u32,
  inv_temp: f32, top_p: f32, seed: u32, step: u32,
}

/** sample_rows_main's parameters of one row: a request's own sampling settings and random stream. */
struct RowParams {
  inv_temp: f32,       // 0: greedy
  top_k: u32,          // 0: all
  top_p: f32,          // 1: all
  min_p: f32,          // 0: none
  seed: u32,
  step: u32,           // the request's own token index
  stream: u32,         // which of the request's samples (OpenAI's n)
  pad: u32,
}

/** The sampling settings of the row being drawn (from params, or from row_params), passed down as a value so
 *  that the branches on them before barriers stay uniform. */
struct Sampling {
  inv_temp: f32, top_k: u32, has_top_p: u32, top_p: f32, min_p: f32, seed: u32, step: u32, stream: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<i32>;
@group(0) @binding(3) var<storage, read> row_params: array<RowParams>;

var<workgroup> hist: array<atomic<u32>, 256>;
var<workgroup> red_u: array<u32, WG>;
var<workgroup> red_i: array<u32, WG>;
var<workgroup> red_f: array<f32, WG>;
var<workgroup> bc0: u32;
var<workgroup> bc1: u32;
var<workgroup> bcf: f32;
var<workgroup> last_kept: atomic<u32>;
var<workgroup> n_cand: atomic<u32>;
var<workgroup> pick_min: atomic<u32>;


/** Logit j of the row at base, j clamped into the row so a load may be issued before its bound check. */
fn ld(base: u32, j: u32) -> f32 { return logits[base + min(j, params.V - 1u)]; }

fn pcg(x: u32) -> u32 {
  let state = x * 747796405u + 2891336453u;
  let word = ((state >> ((state >> 28u) + 4u)) ^ state) * 277803737u;
  return (word >> 22u) ^ word;
}

/** The (key, index) of the row's largest raw logit, ties to the lower index. Uniform result. */
fn argmax_row(base: u32, lid: u32) -> vec2<u32> {
  var bk = 0u;
  var bi = NONE;
  for (var j0 = lid * EPT; j0 < params.V; j0 += WG * EPT) {
    var xs: array<f32, EPT>;
    for (var c = 0u; c < EPT; c++) { xs[c] = ld(base, j0 + c); }
    for (var c = 0u; c < EPT; c++) {
      let k = key_of(xs[c]);
      if (j0 + c < params.V && k > bk) { bk = k; bi = j0 + c; }     // j rises: a tie keeps the lower index
    }
  }
  red_u[lid] = bk;
  red_i[lid] = bi;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (lid < s) {
      let ok = red_u[lid + s];
      let oi = red_i[lid + s];
      if (ok > red_u[lid] || (ok == red_u[lid] && oi < red_i[lid])) { red_u[lid] = ok; red_i[lid] = oi; }
    }
    workgroupBarrier();
  }
  if (lid == 0u) { bc0 = red_u[0]; bc1 = red_i[0]; }
  return vec2<u32>(workgroupUniformLoad(&bc0), workgroupUniformLoad(&bc1));
}

fn write_id(row: u32, idx: u32, lid: u32) {
  if (lid == 0u) { out[row] = i32(select(idx, 0u, idx == NONE)); }
}

@compute @workgroup_size(WG)
fn argmax_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
  let row = wid.y * nwg.x + wid.x;
  if (row >= params.rows) { return; }
  let a = argmax_row(row * params.V, lid);
  write_id(row, a.y, lid);
}

/** Sum of v over the workgroup (uniform result). */
fn sum_f(v: f32, lid: u32) -> f32 {
  red_f[lid] = v;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (lid < s) { red_f[lid] += red_f[lid + s]; }
    workgroupBarrier();
  }
  if (lid == 0u) { bcf = red_f[0]; }
  return workgroupUniformLoad(&bcf);
}

/**
 * Radix select, descending, over the keys of z = logit · inv_temp with key ≥ lo_key: counts (mass false)
 * find the key of the rem-th largest; masses (p / sum as 2^30 fixed point) find the largest key whose
 * mass at or above it reaches top_p of the total. Fewer than rem candidates: 0 (keep them all).
 */
fn radix_select(p: Sampling, base: u32, lid: u32, mass: bool, rem0: u32, lo_key: u32, m: f32, scale: f32) -> u32 {
  var prefix = 0u;
  var rem = rem0;
  for (var ps = 0u; ps < 4u; ps++) {
    let shift = 24u - 8u * ps;
    var hmask = 0u;
    if (ps > 0u) { hmask = 0xffffffffu << (shift + 8u); }
    if (lid < 256u) { atomicStore(&hist[lid], 0u); }
    workgroupBarrier();
    for (var j0 = lid * EPT; j0 < params.V; j0 += WG * EPT) {
      var xs: array<f32, EPT>;
      for (var c = 0u; c < EPT; c++) { xs[c] = ld(base, j0 + c); }
      for (var c = 0u; c < EPT; c++) {
        let z = xs[c] * p.inv_temp;
        let k = key_of(z);
        if (j0 + c < params.V && k != 0u && k >= lo_key && (k & hmask) == prefix) {
          var wgt = 1u;
          if (mass) { wgt = u32(exp(z - m) * scale + 0.5); }
          // Tokens of no mass at this precision change no sum: their atomics are skipped.
          if (wgt != 0u) { atomicAdd(&hist[(k >> shift) & 255u], wgt); }
        }
      }
    }
    workgroupBarrier();
    // Inclusive suffix sums over the 256 digits: red_u[d] = candidates with digit ≥ d.
    if (lid < 256u) { red_u[lid] = atomicLoad(&hist[lid]); }
    workgroupBarrier();
    for (var off = 1u; off < 256u; off <<= 1u) {
      var v = 0u;
      if (lid < 256u) {
        v = red_u[lid];
        if (lid + off < 256u) { v += red_u[lid + off]; }
      }
      workgroupBarrier();
      if (lid < 256u) { red_u[lid] = v; }
      workgroupBarrier();
    }
    if (mass && ps == 0u) {
      // The target: top_p of the total fixed-point mass, at least one unit (the top token).
      if (lid == 0u) { bc1 = red_u[0]; }
      let total = workgroupUniformLoad(&bc1);
      rem = clamp(u32(ceil(p.top_p * f32(total))), 1u, max(total, 1u));
    }
    if (lid == 0u) { bc0 = 0u; bc1 = rem; }
    workgroupBarrier();
    if (lid < 256u) {
      let s = red_u[lid];
      var above = 0u;
      if (lid < 255u) { above = red_u[lid + 1u]; }
      if (s >= rem && above < rem) { bc0 = lid; bc1 = rem - above; }
    }
    let digit = workgroupUniformLoad(&bc0);
    rem = workgroupUniformLoad(&bc1);
    prefix |= digit << shift;
  }
  return prefix;
}

/** Gathers the tokens with key ≥ lo_key as (index in red_i, z in red_f); returns how many there are
 *  (uniform; only the first WG are stored). */
fn gather(p: Sampling, base: u32, lid: u32, lo_key: u32) -> u32 {
  if (lid == 0u) { atomicStore(&n_cand, 0u); }
  workgroupBarrier();
  for (var j0 = lid * EPT; j0 < params.V; j0 += WG * EPT) {
    var xs: array<f32, EPT>;
    for (var c = 0u; c < EPT; c++) { xs[c] = ld(base, j0 + c); }
    for (var c = 0u; c < EPT; c++) {
      let z = xs[c] * p.inv_temp;
      let k = key_of(z);
      if (j0 + c < params.V && k != 0u && k >= lo_key) {
        let slot = atomicAdd(&n_cand, 1u);
        if (slot < WG) { red_i[slot] = j0 + c; red_f[slot] = z; }
      }
    }
  }
  workgroupBarrier();
  if (lid == 0u) { bc0 = atomicLoad(&n_cand); }
  return workgroupUniformLoad(&bc0);
}

/**
 * Top-p and the draw over n ≤ WG gathered tokens, one per thread, in any order: token t stays when the
 * mass of tokens with a larger z is below top_p of the whole (the same set as the radix select keeps),
 * and the choice is the lowest index whose cumulative kept mass, in vocabulary order, exceeds u·Σ.
 */
fn draw_gathered(p: Sampling, row: u32, lid: u32, n: u32, m: f32) -> u32 {
  var zt = 0.0;
  var it = NONE;
  var pt = 0.0;
  if (lid < n) { zt = red_f[lid]; it = red_i[lid]; pt = exp(zt - m); }
  if (lid == 0u) { atomicStore(&pick_min, NONE); atomicStore(&last_kept, 0u); }
  workgroupBarrier();
  if (lid < n) { red_u[lid] = bitcast<u32>(pt); }
  workgroupBarrier();
  var keep = lid < n;
  if (p.has_top_p != 0u) {
    var total = 0.0;
    var above = 0.0;
    for (var c = 0u; c < n; c++) {
      let pc = bitcast<f32>(red_u[c]);
      total += pc;
      if (red_f[c] > zt) { above += pc; }
    }
    keep = keep && above < p.top_p * total;
  }
  workgroupBarrier();
  if (lid < n) { red_u[lid] = bitcast<u32>(select(0.0, pt, keep)); }
  workgroupBarrier();
  var total = 0.0;
  var before = 0.0;
  for (var c = 0u; c < n; c++) {
    let qc = bitcast<f32>(red_u[c]);
    total += qc;
    if (red_i[c] < it) { before += qc; }
  }
  let u = f32(pcg(p.step ^ pcg(p.stream ^ pcg(p.seed))) >> 8u) * (1.0 / 16777216.0);
  if (keep && pt > 0.0) {
    atomicMax(&last_kept, it + 1u);
    if (before + pt > u * total) { atomicMin(&pick_min, it); }
  }
  workgroupBarrier();
  if (lid == 0u) {
    var pick = atomicLoad(&pick_min);
    if (pick == NONE) { pick = atomicLoad(&last_kept) - 1u; }
    bc0 = pick;
  }
  return workgroupUniformLoad(&bc0);
}

@compute @workgroup_size(WG)
fn sample_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
  let row = wid.y * nwg.x + wid.x;
  if (row >= params.rows) { return; }
  sample_row(Sampling(params.inv_temp, params.top_k, params.has_top_p, params.top_p, 0.0, params.seed, params.step, row), row, lid);
}

/** Each row with its own settings (a serving step's requests): row_params[row]. */
@compute @workgroup_size(WG)
fn sample_rows_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                    @builtin(local_invocation_index) lid: u32) {
  let row = wid.y * nwg.x + wid.x;
  if (row >= params.rows) { return; }
  let r = row_params[row];
  let k = select(r.top_k, 0u, r.top_k >= params.V);
  sample_row(Sampling(r.inv_temp, k, select(0u, 1u, r.top_p < 1.0), r.top_p, r.min_p, r.seed, r.step, r.stream), row, lid);
}

fn sample_row(p: Sampling, row: u32, lid: u32) {
  let base = row * params.V;
  let V = params.V;
  let a = argmax_row(base, lid);
  // The scaled maximum: scaling by inv_temp > 0 keeps the order, so it is the raw maximum's.
  let m = value_of(a.x) * p.inv_temp;
  if (p.inv_temp == 0.0 || p.top_k == 1u || a.y == NONE || (bitcast<u32>(m) & 0x7f800000u) == 0x7f800000u) {
    write_id(row, a.y, lid);
    return;
  }

  // min-p first: tokens whose probability is below min_p of the top one's (z < m + ln min_p) are out.
  var keep_from = 1u;
  if (p.min_p > 0.0) { keep_from = max(key_of(m + log(p.min_p)), 1u); }
  if (p.top_k > 0u) {
    keep_from = max(radix_select(p, base, lid, false, p.top_k, keep_from, m, 0.0), keep_from);
    // Usually top-k leaves few tokens (k and its ties): gathered into workgroup memory, top-p and the
    // draw need no further pass over the row. Too many (ties, or k > WG): the passes below.
    if (p.top_k <= WG) {
      let n = gather(p, base, lid, keep_from);
      if (n <= WG) {
        write_id(row, draw_gathered(p, row, lid, n, m), lid);
        return;
      }
    }
  }
  if (p.has_top_p != 0u) {
    var part = 0.0;
    for (var j0 = lid * EPT; j0 < V; j0 += WG * EPT) {
      var xs: array<f32, EPT>;
      for (var c = 0u; c < EPT; c++) { xs[c] = ld(base, j0 + c); }
      for (var c = 0u; c < EPT; c++) {
        let z = xs[c] * p.inv_temp;
        let k = key_of(z);
        if (j0 + c < V && k != 0u && k >= keep_from) { part += exp(z - m); }
      }
    }
    let total = sum_f(part, lid);
    keep_from = max(radix_select(p, base, lid, true, 1u, keep_from, m, 1073741824.0 / total), keep_from);
  }

  // The draw: chunk sums in vocabulary order, their inclusive scan, then a walk in the chunk that
  // crosses u·Σp. Past the end (rounding), the last kept token.
  if (lid == 0u) { atomicStore(&last_kept, 0u); }
  workgroupBarrier();
  let C = (V + WG - 1u) / WG;
  let lo = min(lid * C, V);
  let hi = min(lo + C, V);
  var s = 0.0;
  var last = 0u;
  for (var j0 = lo; j0 < hi; j0 += EPT) {
    var xs: array<f32, EPT>;
    for (var c = 0u; c < EPT; c++) { xs[c] = ld(base, j0 + c); }
    for (var c = 0u; c < EPT; c++) {
      let z = xs[c] * p.inv_temp;
      let k = key_of(z);
      if (j0 + c < hi && k != 0u && k >= keep_from) {
        let p = exp(z - m);
        s += p;
        if (p > 0.0) { last = j0 + c + 1u; }
      }
    }
  }
  atomicMax(&last_kept, last);
  red_f[lid] = s;
  workgroupBarrier();
  for (var off = 1u; off < WG; off <<= 1u) {
    var v = red_f[lid];
    if (lid >= off) { v += red_f[lid - off]; }
    workgroupBarrier();
    red_f[lid] = v;
    workgroupBarrier();
  }
  let incl = red_f[lid];
  var excl = 0.0;
  if (lid > 0u) { excl = red_f[lid - 1u]; }
  let u = f32(pcg(p.step ^ pcg(p.stream ^ pcg(p.seed))) >> 8u) * (1.0 / 16777216.0);
  let goal = u * red_f[WG - 1u];
  if (lid == 0u) { bc0 = atomicLoad(&last_kept); }
  workgroupBarrier();
  if (excl <= goal && goal < incl) {
    var acc = excl;
    var pick = NONE;
    var lastj = NONE;
    for (var j = lo; j < hi; j++) {
      let z = logits[base + j] * p.inv_temp;
      let k = key_of(z);
      if (k != 0u && k >= keep_from) {
        let p = exp(z - m);
        if (p > 0.0) {
          lastj = j;
          acc += p;
          if (acc > goal) { pick = j; break; }
        }
      }
    }
    if (pick == NONE) { pick = lastj; }
    bc0 = pick + 1u;
  }
  let choice = workgroupUniformLoad(&bc0);
  write_id(row, select(choice - 1u, a.y, choice == 0u), lid);
}
