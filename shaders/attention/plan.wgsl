// The GPU planner of paged attention (src/attention/plan.ts has the host twin: same rules, same output,
// word for word). When a serving loop keeps its metadata on the GPU (i32 tensors), the host knows only
// bounds (token count T, sequences S, blocks per sequence); this pass reads the lengths, routes each
// sequence with one new token to the decode kernel, splits long contexts into KV partitions, writes
// the work items into the plan buffer and the dispatch sizes into an indirect-argument buffer, so the
// attention kernels that follow run exactly as if the host had planned. Nothing is read back.
//
// One workgroup. Each invocation owns a contiguous run of sequences; the decisions that depend on the
// whole batch (how many partitions the GPU needs) meet through workgroup atomics; item offsets come
// from an exclusive scan of per-invocation counts.

const WG: u32 = 256u;
/** Write the kernels' grid sizes for indirect dispatch (else they launch the host's bound). */
override WRITE_ARGS: bool = false;

struct Params {
  T: u32, S: u32, max_blocks: u32, bs: u32,
  Hkv: u32, G: u32, BR: u32, decode_ok: u32,
  pmax: u32, target_wg: u32, min_part: u32, p_cap: u32,
  off_qsl: u32, off_seqlens: u32, off_bt: u32, off_tok: u32,
  off_flash: u32, off_decode: u32, flash_cap: u32, decode_cap: u32,
  qsl_implicit: u32, merge_groups: u32, max_dim: u32, split: u32,   // split: a cache split across buffers (every token merged)
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> src_qsl: array<i32>;
@group(0) @binding(2) var<storage, read> src_seqlens: array<i32>;
@group(0) @binding(3) var<storage, read> src_bt: array<i32>;
@group(0) @binding(4) var<storage, read_write> pmeta: array<i32>;
@group(0) @binding(5) var<storage, read_write> args: array<u32>;   // [flash xyz | decode xyz | merge xyz]

var<workgroup> w_base: atomic<u32>;
var<workgroup> w_maxseq: atomic<u32>;
var<workgroup> w_maxnp: atomic<u32>;
var<workgroup> scan_f: array<u32, WG>;
var<workgroup> scan_d: array<u32, WG>;

fn qsl_at(i: u32) -> i32 {
  if (params.qsl_implicit == 1u) { return i32(i); }
  return src_qsl[i];
}

struct Seq { q0: u32, qlen: u32, seqlen: u32, dec: bool, rt: u32, np: u32, plen: u32 }

fn ceil_div(a: u32, b: u32) -> u32 { return (a + b - 1u) / b; }

/** Token range, length, route and row tiles of sequence s (clamped to what the buffers hold). */
fn seq_basic(s: u32) -> Seq {
  var q: Seq;
  let a = u32(clamp(qsl_at(s), 0, i32(params.T)));
  let b = u32(clamp(qsl_at(s + 1u), i32(a), i32(params.T)));
  q.q0 = a;
  q.qlen = b - a;
  q.seqlen = u32(clamp(src_seqlens[s], 0, i32(params.max_blocks * params.bs)));
  q.dec = params.decode_ok == 1u && q.qlen == 1u;
  q.rt = 0u;
  if (q.qlen > 0u) { q.rt = select(ceil_div(params.G * q.qlen, params.BR), 1u, q.dec); }
  q.np = 0u;
  q.plen = 0u;
  return q;
}

/** Partition length of a sequence: its keys over `want` parts, whole tiles of 64 keys. */
fn part_len(seqlen: u32, want: u32) -> u32 { return ceil_div(ceil_div(max(seqlen, 1u), want), 64u) * 64u; }

/** ... plus its partitions, given how many the batch wants; the decode kernel's longest partition (pmax)
 *  may force more, and a sequence that would need more than the workspace holds goes to flash. */
fn seq_full(s: u32, want: u32) -> Seq {
  var q = seq_basic(s);
  if (q.qlen == 0u) { return q; }
  q.plen = part_len(q.seqlen, want);
  q.np = max(1u, ceil_div(q.seqlen, q.plen));
  if (q.dec && params.pmax > 0u && q.plen > params.pmax) {
    q.plen = params.pmax;
    q.np = max(1u, ceil_div(q.seqlen, params.pmax));
    if (q.np > params.p_cap) {
      q.dec = false;
      q.rt = ceil_div(params.G, params.BR);
      q.plen = part_len(q.seqlen, want);
      q.np = max(1u, ceil_div(q.seqlen, q.plen));
    }
  }
  return q;
}

fn write_args(at: u32, n: u32) {
  let x = min(n, params.max_dim);
  args[at] = x;
  args[at + 1u] = select(ceil_div(n, params.max_dim), 0u, n == 0u);
  args[at + 2u] = 1u;
}

@compute @workgroup_size(WG)
fn plan_main(@builtin(local_invocation_index) li: u32) {
  let S = params.S;
  // The metadata itself goes into the plan buffer, where the attention kernels read it.
  for (var i = li; i <= S; i += WG) { pmeta[params.off_qsl + i] = qsl_at(i); }
  for (var i = li; i < S; i += WG) { pmeta[params.off_seqlens + i] = src_seqlens[i]; }
  for (var i = li; i < S * params.max_blocks; i += WG) { pmeta[params.off_bt + i] = src_bt[i]; }
  for (var i = li; i < params.T; i += WG) { pmeta[params.off_tok + i] = 0; }
  if (li == 0u) {
    atomicStore(&w_base, 0u);
    atomicStore(&w_maxseq, 0u);
    atomicStore(&w_maxnp, 0u);
  }
  storageBarrier();   // the zeroed tok_np before any invocation writes a sequence's counts
  workgroupBarrier();

  let chunk = ceil_div(S, WG);
  let s0 = min(li * chunk, S);
  let s1 = min(s0 + chunk, S);
  var base = 0u;
  var maxseq = 0u;
  for (var s = s0; s < s1; s++) {
    let q = seq_basic(s);
    base += q.rt * params.Hkv;
    if (q.qlen > 0u) { maxseq = max(maxseq, q.seqlen); }
  }
  atomicAdd(&w_base, base);
  atomicMax(&w_maxseq, maxseq);
  workgroupBarrier();
  let total = atomicLoad(&w_base);
  var want = 1u;
  if (total > 0u) {
    want = max(1u, min(min(ceil_div(params.target_wg, total), atomicLoad(&w_maxseq) / params.min_part), params.p_cap));
  }

  var nf = 0u;
  var nd = 0u;
  var maxnp = 0u;
  for (var s = s0; s < s1; s++) {
    let q = seq_full(s, want);
    if (q.dec) { nd += params.Hkv * q.np; } else { nf += q.rt * params.Hkv * q.np; }
    maxnp = max(maxnp, q.np);
  }
  scan_f[li] = nf;
  scan_d[li] = nd;
  atomicMax(&w_maxnp, maxnp);
  storageBarrier();
  workgroupBarrier();
  if (li == 0u) {
    var af = 0u;
    var ad = 0u;
    for (var i = 0u; i < WG; i++) {
      let f = scan_f[i];
      let d = scan_d[i];
      scan_f[i] = af;
      scan_d[i] = ad;
      af += f;
      ad += d;
    }
    let n_flash = min(af, params.flash_cap);
    let n_decode = min(ad, params.decode_cap);
    let mnp = atomicLoad(&w_maxnp);
    pmeta[0] = i32(n_flash);
    pmeta[1] = i32(n_decode);
    pmeta[2] = i32(mnp);
    pmeta[3] = select(0, 1, mnp > 1u);
    for (var i = 4u; i < 8u; i++) { pmeta[i] = 0; }
    if (WRITE_ARGS) {
      write_args(0u, n_flash);
      write_args(3u, n_decode);
      write_args(6u, select(0u, params.merge_groups, mnp > 1u || params.split != 0u));
    }
  }
  workgroupBarrier();

  // Items: s, g, row tile, partition, first key, end key, partial, 0 — sequence by sequence, then kv
  // head, row tile, partition, as the host writes them.
  var fi = scan_f[li];
  var di = scan_d[li];
  for (var s = s0; s < s1; s++) {
    let q = seq_full(s, want);
    if (q.np == 0u) { continue; }
    if (q.np > 1u || params.split != 0u) {
      for (var t = q.q0; t < q.q0 + q.qlen; t++) { pmeta[params.off_tok + t] = i32(q.np); }
    }
    for (var g = 0u; g < params.Hkv; g++) {
      for (var rt = 0u; rt < q.rt; rt++) {
        for (var p = 0u; p < q.np; p++) {
          var at: u32;
          if (q.dec) {
            if (di >= params.decode_cap) { continue; }
            at = params.off_decode + ITEM_WORDS * di;
            di++;
          } else {
            if (fi >= params.flash_cap) { continue; }
            at = params.off_flash + ITEM_WORDS * fi;
            fi++;
          }
          let k_lo = min(p * q.plen, q.seqlen);
          pmeta[at] = i32(s);
          pmeta[at + 1u] = i32(g);
          pmeta[at + 2u] = i32(rt);
          pmeta[at + 3u] = i32(p);
          pmeta[at + 4u] = i32(k_lo);
          pmeta[at + 5u] = i32(min(k_lo + q.plen, q.seqlen));
          pmeta[at + 6u] = select(0, 1, q.np > 1u);
          pmeta[at + 7u] = 0;
        }
      }
    }
  }
}
