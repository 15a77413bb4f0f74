// MoE dispatch bookkeeping, on the GPU so no step reads routing back: the (token, slot) pairs of a
// chunk of rows grouped by expert, and the tile list of the grouped products (src/ops/moe.ts).
//
// One workgroup (pairs are few: rows·topK; a decode step has topK per sequence): counts per expert with
// workgroup atomics, an exclusive scan of (count, tiles) over the experts, then each pair is scattered
// into its expert's range. The order of pairs inside a range follows the atomics (not deterministic),
// and nothing depends on it: every pair's rows are computed alone and written to the pair's own row.
//
// lists (u32) after this kernel, E experts, P pairs, BM rows per tile:
//   [0, E]                   offsets: expert e's pairs are sorted[offsets[e] .. offsets[e+1])
//   [o_ts, o_ts + E]         tile_start: expert e's tiles are tiles[tile_start[e] .. tile_start[e+1])
//   [o_te, o_te + P)         tile_expert[t]
//   [o_tr, o_tr + P)         tile_row0[t]: its first position in sorted (it holds min(BM, rest) pairs)
//   [o_sorted, o_sorted + P) sorted: pair indices p (local to the chunk: pair p0 + p of ids)
// Pairs whose id is outside [0, E) are left out (they add nothing).

const EMAX: u32 = 64u;
const WG: u32 = 256u;
const BPT: u32 = (EMAX + WG - 1u) / WG;   // bins each thread scans
const NONE: u32 = 0xffffffffu;

struct SortParams {
  P: u32,
  E: u32,
  BM: u32,
  p0: u32,
  o_ts: u32,
  o_te: u32,
  o_tr: u32,
  o_sorted: u32,
}

@group(0) @binding(0) var<uniform> sp: SortParams;
@group(0) @binding(1) var<storage, read> ids: array<i32>;
@group(0) @binding(2) var<storage, read_write> lists: array<u32>;

var<workgroup> bins: array<atomic<u32>, EMAX>;
var<workgroup> scan: array<vec2<u32>, WG>;

fn expert_of(p: u32) -> u32 {
  let e = ids[sp.p0 + p];
  return select(NONE, u32(e), e >= 0 && u32(e) < sp.E);
}

@compute @workgroup_size(WG)
fn sort_main(@builtin(local_invocation_index) li: u32) {
  for (var e = li; e < EMAX; e += WG) { atomicStore(&bins[e], 0u); }
  workgroupBarrier();
  for (var p = li; p < sp.P; p += WG) {
    let e = expert_of(p);
    if (e != NONE) { atomicAdd(&bins[e], 1u); }
  }
  workgroupBarrier();

  var own = vec2<u32>(0u);
  for (var q = 0u; q < BPT; q++) {
    let e = li * BPT + q;
    if (e < sp.E) {
      let c = atomicLoad(&bins[e]);
      own += vec2<u32>(c, (c + sp.BM - 1u) / sp.BM);
    }
  }
  scan[li] = own;
  workgroupBarrier();
  for (var off = 1u; off < WG; off <<= 1u) {
    var v = scan[li];
    if (li >= off) { v += scan[li - off]; }
    workgroupBarrier();
    scan[li] = v;
    workgroupBarrier();
  }
  var run = scan[li] - own;
  for (var q = 0u; q < BPT; q++) {
    let e = li * BPT + q;
    if (e < sp.E) {
      let c = atomicLoad(&bins[e]);
      let nt = (c + sp.BM - 1u) / sp.BM;
      lists[e] = run.x;
      lists[sp.o_ts + e] = run.y;
      for (var i = 0u; i < nt; i++) {
        lists[sp.o_te + run.y + i] = e;
        lists[sp.o_tr + run.y + i] = run.x + i * sp.BM;
      }
      // The bin becomes the expert's scatter cursor.
      atomicStore(&bins[e], run.x);
      run += vec2<u32>(c, nt);
    }
  }
  if (li == WG - 1u) {
    lists[sp.E] = scan[WG - 1u].x;
    lists[sp.o_ts + sp.E] = scan[WG - 1u].y;
  }
  workgroupBarrier();
  for (var p = li; p < sp.P; p += WG) {
    let e = expert_of(p);
    if (e != NONE) { lists[sp.o_sorted + atomicAdd(&bins[e], 1u)] = p; }
  }
}
