// Paged decode benchmark: Llama-3-8B attention shapes (Hq 32, Hkv 8, D 128, f16 cache, block 16),
// batch × context, reporting KV bytes read per second against the copy bandwidth measured in the same
// run. Caches are filled on the GPU by repeating a random pattern (a 64-sequence × 32k batch holds
// 8.6 GB of K/V), blocks are shuffled, small caches rotate over three disjoint block sets so the L2
// cannot hold them, and sequence 0 is checked against the float64 reference before timing.
// With a peer (bench/ort.ts), ONNX Runtime Web's GroupQueryAttention decodes the same query over the same
// K/V values, held in a dense [batch, Hkv, context, D] cache (it has no block table), with the same check.
import { TOLERANCES, compareToReference, encodeF16, decodeF16, randn, reference, rng, type Engine, type Tensor } from 'webinfer';
import { fillRepeating, timeOp, type Ceilings, type Timing } from './harness';
import type { OrtPeer, PeerResult } from './ort';

export interface PagedShape { batch: number; context: number; Hq: number; Hkv: number; D: number; bs: number }

export interface PagedBenchRow {
  shape: PagedShape;
  kvBytes: number;
  worst: number;
  pass: boolean;
  timing: Timing | null;
  gbs: number;
  pctCopy: number;
  nParts?: number;
  error?: string;
  /** The peer's decode of the same step (dense cache), where one was asked for. */
  peer?: PeerResult & { kvBytes: number; gbs: number; pctCopy: number };
}

/**
 * Checks sequence 0's output ([Hq·D]) against the float64 reference over the cache contents: element
 * `index(h, pos, d)` of each cache holds `elem(which, index)` (the repeated fill pattern).
 */
function checkSequence0(got: Float32Array, q16: Float32Array, s: PagedShape, elem: (which: 0 | 1, e: number) => number,
                        index: (h: number, pos: number, d: number) => number): { worst: number; pass: boolean } {
  const { context: L, Hq, Hkv, D } = s;
  const k0 = new Float64Array(L * Hkv * D), v0 = new Float64Array(L * Hkv * D);
  for (let pos = 0; pos < L; pos++) {
    for (let h = 0; h < Hkv; h++) {
      for (let d = 0; d < D; d++) {
        const e = index(h, pos, d);
        k0[(h * L + pos) * D + d] = elem(0, e);
        v0[(h * L + pos) * D + d] = elem(1, e);
      }
    }
  }
  const ref = reference.sdpaRef(q16.subarray(0, Hq * D), k0, v0, { B: 1, Hq, Hkv, Lq: 1, Lk: L, D, Dv: D });
  const c = compareToReference(got.subarray(0, Hq * D), ref.out, TOLERANCES.f16);
  return { worst: c.badIndex >= 0 ? Infinity : c.worst, pass: c.pass };
}

const PATTERN_ELEMS = 1 << 20;   // 2 MiB of f16, a multiple of every row size used
const PATTERN_SEEDS = [11, 13] as const;   // K, V
const Q_SEED = 12;

/** The peer's decode of the same step over the same K/V values and query (run it once webinfer's cache is gone,
 *  so the two caches never hold device memory at once). */
export async function benchPagedPeer(s: PagedShape, ceilings: Ceilings, peer: OrtPeer, samples = 7): Promise<NonNullable<PagedBenchRow['peer']>> {
  const pv = PATTERN_SEEDS.map((seed) => decodeF16(encodeF16(randn(PATTERN_ELEMS, seed)))) as [Float32Array, Float32Array];
  const q16 = decodeF16(encodeF16(randn(s.batch * s.Hq * s.D, Q_SEED)));
  const r = await peer.gqaDecode(s, pv, q16,
    (got, index) => checkSequence0(got, q16, s, (which, e) => pv[which][e % PATTERN_ELEMS], index),
    { samples, perSample: 3, sets: kvBytesOf(s) < ROTATE_BELOW ? 3 : 1 });
  const gbs = r.timing ? r.kvBytes / (r.timing.medianMs * 1e6) : NaN;
  return { ...r, gbs, pctCopy: (100 * gbs) / ceilings.copyGBs };
}

/** KV bytes one decode step reads (f16 K and V rows of every sequence). */
function kvBytesOf(s: PagedShape): number {
  return s.batch * s.context * s.Hkv * 2 * s.D * 2;
}

/** Caches smaller than this rotate over three block sets, so the L2 cannot hold them between calls. */
const ROTATE_BELOW = 512 * 2 ** 20;

/** webinfer's paged decode of one step, checked against the reference, then timed. */
export async function benchPagedDecode(engine: Engine, s: PagedShape, ceilings: Ceilings, samples = 7): Promise<PagedBenchRow> {
  const { batch: B, context: L, Hq, Hkv, D, bs } = s;
  const kvBytes = kvBytesOf(s);
  const row: PagedBenchRow = { shape: s, kvBytes, worst: NaN, pass: false, timing: null, gbs: NaN, pctCopy: NaN };
  const blocksPerSeq = Math.ceil(L / bs);
  const sets = kvBytes < ROTATE_BELOW ? 3 : 1;
  const numBlocks = B * blocksPerSeq * sets;
  const cacheBytes = numBlocks * Hkv * bs * D * 2;
  const maxBind = Math.min(engine.limits.maxStorageBufferBindingSize, engine.limits.maxBufferSize);
  if (cacheBytes > maxBind) {
    row.error = `skipped: a ${(cacheBytes / 2 ** 30).toFixed(2)} GiB K cache exceeds the adapter's largest storage binding (${(maxBind / 2 ** 30).toFixed(2)} GiB)`;
    return row;
  }
  let cache;
  try {
    cache = engine.createPagedKVCache({ numBlocks, blockSize: bs, numKvHeads: Hkv, headSize: D, dtype: 'f16' });
  } catch (e) {
    row.error = `skipped: ${(e as Error).message}`;
    return row;
  }
  const tensors: Tensor[] = [];
  try {
    // Fill each cache by repeating its own random f16 pattern.
    const pats = PATTERN_SEEDS.map((seed) => encodeF16(randn(PATTERN_ELEMS, seed)));
    await fillRepeating(engine, cache.key.buffer, cache.key.byteLength, pats[0]);
    await fillRepeating(engine, cache.value.buffer, cache.value.byteLength, pats[1]);
    const pv = pats.map((p) => decodeF16(p));
    const cacheElem = (which: 0 | 1, e: number) => pv[which][e % PATTERN_ELEMS];

    // Shuffled block tables, one per rotation set.
    const r = rng(5);
    const perm = Array.from({ length: numBlocks }, (_, i) => i);
    for (let i = perm.length - 1; i > 0; i--) { const j = Math.floor(r() * (i + 1)); [perm[i], perm[j]] = [perm[j], perm[i]]; }
    const metas = Array.from({ length: sets }, (_, r) => {
      const blockTable = new Int32Array(B * blocksPerSeq);
      for (let i = 0; i < B * blocksPerSeq; i++) blockTable[i] = perm[r * B * blocksPerSeq + i];
      return { queryStartLoc: Int32Array.from({ length: B + 1 }, (_, i) => i), seqLens: new Int32Array(B).fill(L), blockTable, maxBlocksPerSeq: blocksPerSeq };
    });
    const qv = randn(B * Hq * D, Q_SEED);
    const q = engine.tensor(qv, [B, Hq, D], 'f16');
    tensors.push(q);
    const q16 = decodeF16(encodeF16(qv));

    // Check sequence 0 against the reference, gathered from the pattern through its block table.
    const out = engine.pagedAttention(q, cache, metas[0]);
    const got = await out.toFloat32();
    out.destroy();
    const bt = metas[0].blockTable;
    Object.assign(row, checkSequence0(got, q16, s, cacheElem, (h, pos, d) => ((bt[Math.floor(pos / bs)] * Hkv + h) * bs + (pos % bs)) * D + d));

    row.timing = await timeOp(engine, (i) => engine.pagedAttention(q, cache!, metas[i % sets]).destroy(), { samples, perSample: 3 });
    row.gbs = kvBytes / (row.timing.medianMs * 1e6);
    row.pctCopy = (100 * row.gbs) / ceilings.copyGBs;
  } catch (e) {
    row.error = (e as Error).message;
  } finally {
    for (const t of tensors) t.destroy();
    cache.destroy();
    await engine.sync();
    engine.pool.trim();
  }
  return row;
}

/** One row of the results file: the shape, the check, the timing, and the peer's where it ran. */
export function pagedJson(r: PagedBenchRow) {
  return {
    ...r.shape, kvBytes: r.kvBytes, pass: r.pass, worst: r.worst, error: r.error,
    medianMs: r.timing?.medianMs, method: r.timing?.method, gbs: r.gbs, pctCopy: r.pctCopy,
    ...(r.peer ? { ortMs: r.peer.timing?.medianMs, ortGbs: r.peer.gbs, ortPctCopy: r.peer.pctCopy, ortPass: r.peer.pass, ortWorst: r.peer.worst,
      ortError: r.peer.error, ortDtype: r.peer.dtype, ortKvBytes: r.peer.kvBytes, ortMethod: r.peer.timing?.method, ortKernels: r.peer.timing?.kernels } : {}),
  };
}

export function llamaDecodeShapes(batches: number[], contexts: number[]): PagedShape[] {
  return batches.flatMap((batch) => contexts.map((context) => ({ batch, context, Hq: 32, Hkv: 8, D: 128, bs: 16 })));
}
