// Paged addressing for flash_core.wgsl (SPEC §3): queries [T, Hq, D] of a mixed batch (decode, prefill,
// chunked prefill with context), keys and values read through the block table inside the kernel from
// the caches [numBlocks, Hkv, bs, D] / [.., Dv] (f32, f16, bf16 or fp8 e4m3 with per-tensor scales),
// or MLA's latent cache [numBlocks, bs, L+R] (also in FlashMLA's fp8_ds_mla rows) as K and V at once.
//
// One workgroup per work item (sequence, kv head, row tile, partition), planned on the host. (The
// metadata binding is "pmeta": "meta" is a reserved word in WGSL.) Sequence
// s has qLen = qsl[s+1] - qsl[s] new tokens at positions seqLen - qLen .. seqLen - 1: bottom-right
// causal with Lq = qLen, Lk = seqLen, exactly the dense kernel's rule. With partitions (split-KV, for
// long contexts and few rows), every job writes its partition's state (o, lse) to the workspace and a
// merge by LSE follows (merge.wgsl, which also adds the sinks once). Block indices outside the
// cache read as zeros: bad metadata never reads or writes outside a buffer. A cache split across
// buffers (FLAG_SPLIT) runs once per part: keys of other parts' blocks are masked, every job's state
// goes to the workspace (partition slots from part · pslots on) and the merge combines them.

override Q_DTYPE: u32 = 0u;
override KV_DTYPE: u32 = 0u;
override OUT_DTYPE: u32 = 0u;

struct Params {
  T: u32, Hq: u32, Hkv: u32, G: u32,
  flags: u32, window: u32, scale: f32, softcap: f32,
  bs: u32, num_blocks: u32, max_blocks: u32, S: u32,
  hdr_items: u32, off_items: u32, ws_lse: u32, q_stride: u32,   // q_stride: elements between tokens' query rows
  off_qsl: u32, off_seqlens: u32, off_bt: u32, pslots: u32,     // pslots: partition slots of one cache part
  n_dc: u32, n_dk4: u32, n_bc: u32, _p2: u32,
  // Elements between cache rows (D and Dv for K/V caches; L+R for both in MLA's latent cache, whose
  // V is the first L values of the K row), and for KV_DTYPE 4 (FlashMLA's fp8_ds_mla rows) the
  // latent width L and the row length in words.
  k_stride: u32, v_stride: u32, mla_l: u32, mla_row_words: u32,
}

// Groups as in paged_decode_io.wgsl: 0 the plan's, 1 the K/V source's, 2 the run's.
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> pmeta: array<i32>;    // header | qsl [S+1] | seqLens [S] | blockTable [S, max_blocks] | tok_np [T] | items
@group(0) @binding(2) var<storage, read> headp: array<f32>;   // [Hq] ALiBi slopes, then [Hq] sinks
@group(0) @binding(3) var<storage, read_write> ws: array<u32>; // partitions: o [P, T, Hq, Dv] f32, then lse [P, Hq, T]
@group(1) @binding(0) var<storage, read> k_cache: array<u32>;
@group(1) @binding(1) var<storage, read> v_cache: array<u32>;
@group(1) @binding(2) var<storage, read> kv_scale: array<f32>;   // [k scale, v scale], then the part's first and end block and index (u32)
@group(2) @binding(0) var<storage, read> q: array<u32>;
@group(2) @binding(1) var<storage, read_write> out: array<u32>;
@group(2) @binding(2) var<storage, read_write> lse: array<u32>;

var<private> job_q0: u32;     // first token of the job's sequence
var<private> job_part: u32;   // the job's partition

fn q_load4(job: Job, gr: u32, d: u32) -> vec4<f32> {
  let h = job.g * params.G + gr % params.G;
  let w = word4_of((job_q0 + gr / params.G) * params.q_stride + h * D + d, Q_DTYPE);
  if (Q_DTYPE == 0u) { return decode4(vec4<u32>(q[w], q[w + 1u], q[w + 2u], q[w + 3u]), 0u); }
  return decode4(vec4<u32>(q[w], q[w + 1u], 0u, 0u), Q_DTYPE);
}

/** Cache row of key position j of the job's sequence in the bound buffer, or -1 when its block index
 *  is bad (or, split, in another part). */
fn cache_row(job: Job, j: u32) -> i32 {
  let blk = pmeta[params.off_bt + job.b * params.max_blocks + j / params.bs];
  if (blk < 0 || u32(blk) >= params.num_blocks) { return -1; }
  var b = u32(blk);
  if ((params.flags & FLAG_SPLIT) != 0u) {
    let lo = bitcast<u32>(kv_scale[2]);
    if (b < lo || b >= bitcast<u32>(kv_scale[3])) { return -1; }
    b -= lo;
  }
  return i32((b * params.Hkv + job.g) * params.bs + j % params.bs);
}

/** Whether key position j is this dispatch's to attend: always, unless the cache is split and its
 *  block lives in another part (or is bad). */
fn key_in_part(job: Job, j: u32) -> bool {
  return (params.flags & FLAG_SPLIT) == 0u || cache_row(job, j) >= 0;
}

fn kv4(from_k: bool, idx: u32) -> vec4<f32> {
  let w = word4_of(idx, KV_DTYPE);
  var ws4: vec4<u32>;
  if (from_k) {
    if (KV_DTYPE == 0u) { ws4 = vec4<u32>(k_cache[w], k_cache[w + 1u], k_cache[w + 2u], k_cache[w + 3u]); }
    else if (KV_DTYPE == 3u) { ws4 = vec4<u32>(k_cache[w], 0u, 0u, 0u); }
    else { ws4 = vec4<u32>(k_cache[w], k_cache[w + 1u], 0u, 0u); }
  } else {
    if (KV_DTYPE == 0u) { ws4 = vec4<u32>(v_cache[w], v_cache[w + 1u], v_cache[w + 2u], v_cache[w + 3u]); }
    else if (KV_DTYPE == 3u) { ws4 = vec4<u32>(v_cache[w], 0u, 0u, 0u); }
    else { ws4 = vec4<u32>(v_cache[w], v_cache[w + 1u], 0u, 0u); }
  }
  return decode4(ws4, KV_DTYPE);
}

// An fp8_ds_mla row (FlashMLA's layout), in words: L e4m3 codes, ⌈L/128⌉ f32 scales, R bf16 rope values.
/** The scale of latent column d (< L) of the fp8_ds_mla row from word `base`. */
fn ds_mla_scale(base: u32, d: u32) -> f32 {
  return bitcast<f32>(k_cache[base + params.mla_l / 4u + d / 128u]);
}

/** Four rope values from column d (L ≤ d, d % 4 == 0) of the fp8_ds_mla row from word `base`. */
fn ds_mla_rope4(base: u32, d: u32) -> vec4<f32> {
  let L = params.mla_l;
  let w = base + L / 4u + (L + 127u) / 128u + (d - L) / 2u;
  return decode4(vec4<u32>(k_cache[w], k_cache[w + 1u], 0u, 0u), 2u);
}

/** Four values from column d (d % 4 == 0) of an fp8_ds_mla row: e4m3 latent · its group's scale, or bf16 rope. */
fn ds_mla4(row: u32, d: u32) -> vec4<f32> {
  let base = row * params.mla_row_words;
  if (d < params.mla_l) { return decode4(vec4<u32>(k_cache[base + d / 4u], 0u, 0u, 0u), 3u) * ds_mla_scale(base, d); }
  return ds_mla_rope4(base, d);
}

fn k_load4(job: Job, j: u32, d: u32) -> vec4<f32> {
  let row = cache_row(job, j);
  if (row < 0) { return vec4<f32>(0.0); }
  if (KV_DTYPE == 4u) { return ds_mla4(u32(row), d); }
  return kv4(true, u32(row) * params.k_stride + d) * kv_scale[0];
}

fn v_load4(job: Job, j: u32, c: u32) -> vec4<f32> {
  let row = cache_row(job, j);
  if (row < 0) { return vec4<f32>(0.0); }
  if (KV_DTYPE == 4u) { return ds_mla4(u32(row), c); }
  return kv4(false, u32(row) * params.v_stride + c) * kv_scale[1];
}

// Paged attention has no mask of its own; a split cache's plan sets FLAG_MASK_BOOL to mask other parts' keys.
fn mask_word(job: Job, h: u32, pos: u32, j: u32) -> u32 { return select(0u, 1u, key_in_part(job, j)); }
// The caches again as 16-byte words, and key j's row in them (-1: missing): the subgroup-matrix tile
// stages f16 rows with them (flash_mma_core.wgsl WORDS; the host binds k_cache and v_cache; rows of K/V
// caches are D and Dv elements, 16-byte aligned).
@group(1) @binding(3) var<storage, read> k_w: array<vec4<u32>>;
@group(1) @binding(4) var<storage, read> v_w: array<vec4<u32>>;
fn kv_word_row(job: Job, j: u32) -> i32 { return cache_row(job, j); }
fn head_slope(h: u32) -> f32 { return headp[h]; }
fn head_sink(h: u32) -> f32 { return headp[params.Hq + h]; }

fn store_out4(job: Job, h: u32, pos: u32, col: u32, val: vec4<f32>) {
  let t = job_q0 + pos;
  if (job.partial) {
    let e = ((job_part * params.T + t) * params.Hq + h) * DV + col;
    ws[e] = bitcast<u32>(val.x);
    ws[e + 1u] = bitcast<u32>(val.y);
    ws[e + 2u] = bitcast<u32>(val.z);
    ws[e + 3u] = bitcast<u32>(val.w);
    return;
  }
  let e = (t * params.Hq + h) * DV + col;
  if (OUT_DTYPE == 0u) {
    out[e] = bitcast<u32>(val.x);
    out[e + 1u] = bitcast<u32>(val.y);
    out[e + 2u] = bitcast<u32>(val.z);
    out[e + 3u] = bitcast<u32>(val.w);
  } else {
    out[e >> 1u] = pack_pair(val.x, val.y, OUT_DTYPE);
    out[(e >> 1u) + 1u] = pack_pair(val.z, val.w, OUT_DTYPE);
  }
}

fn store_lse(job: Job, h: u32, pos: u32, bits: u32) {
  let t = job_q0 + pos;
  if (job.partial) { ws[params.ws_lse + (job_part * params.Hq + h) * params.T + t] = bits; }
  else { lse[h * params.T + t] = bits; }
}

@compute @workgroup_size(WG)
fn paged_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              lanes: Lanes) {
  let item = wid.y * nwg.x + wid.x;
  if (item >= u32(pmeta[params.hdr_items])) { return; }   // whole workgroup: stays uniform
  let base = params.off_items + ITEM_WORDS * item;
  let s = u32(pmeta[base]);
  let g = u32(pmeta[base + 1u]);
  let rt = u32(pmeta[base + 2u]);
  let part = u32(pmeta[base + 3u]);
  if (s >= params.S || g >= params.Hkv) { return; }
  let q0 = pmeta[params.off_qsl + s];
  let q1 = pmeta[params.off_qsl + s + 1u];
  // Clamp what metadata says to what the buffers hold: never read or write outside them.
  let cap = i32(params.max_blocks * params.bs);
  let seq_len = u32(clamp(pmeta[params.off_seqlens + s], 0, cap));
  if (q0 < 0 || q1 <= q0 || u32(q1) > params.T) { return; }
  // More queries than keys is legitimate (bottom-right causal leaves the first rows empty; without
  // causal every row sees every key, as MLA's prefill asks of its context chunks).
  let q_len = u32(q1 - q0);
  let rows = params.G * q_len;
  if (rt * BR >= rows) { return; }
  job_q0 = u32(q0);
  let split = (params.flags & FLAG_SPLIT) != 0u;
  job_part = part + select(0u, bitcast<u32>(kv_scale[4]) * params.pslots, split);
  let k_lo = min(u32(max(pmeta[base + 4u], 0)), seq_len);
  let k_hi = clamp(u32(max(pmeta[base + 5u], 0)), k_lo, seq_len);
  flash_tile(Job(s, g, rt * BR, rows, q_len, seq_len, k_lo, k_hi, pmeta[base + 6u] != 0 || split), lanes);
}
