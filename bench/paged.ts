// Paged decode benchmark: Llama-3-8B attention shapes (Hq 32, Hkv 8, D 128, f16 cache, block 16),
// batch × context, reporting KV bytes read per second against the copy bandwidth measured in the same
// run. Caches are filled on the GPU by repeating a random pattern (a 64-sequence × 32k batch holds
// 8.6 GB of K/V), blocks are shuffled, small caches rotate over three disjoint block sets so the L2
// cannot hold them, and sequence 0 is checked against the float64 reference before timing.
// With a peer (bench/ort.ts), ONNX Runtime Web decodes the same query over the same K/V values twice, with
// the same check: GroupQueryAttention over a dense [batch, Hkv, context, D] cache, and PagedAttention over a
// paged [blocks, 16, Hkv, D] cache through block tables shuffled as ours (f16 only; it also writes the new
// token's K/V, which its restMs leaves out). A shape is timed in rounds alternating webinfer's decode, its
// portable variant and the two peer ops, where all the caches fit together (TOGETHER_MAX_BYTES); else the
// peer's rounds follow once ours is freed.
import { TOLERANCES, compareToReference, encodeF16, decodeF16, randn, reference, rng, type Engine, type Tensor } from 'webinfer';
import {
  combineRounds, fillRepeating, PORTABLE_TUNING, roundWarmupMs, timeOp, timeRounds, withTuning,
  type Ceilings, type Contender, type PortableResult, type Timing,
} from './harness';
import type { OrtPeer, PeerCase, PeerResult } from './ort';
import { flashMmaFor, flashTileName } from '../src/attention/flash';

export interface PagedShape { batch: number; context: number; Hq: number; Hkv: number; D: number; bs: number }

export interface PagedBenchRow {
  shape: PagedShape;
  kvBytes: number;
  worst: number;
  pass: boolean;
  timing: Timing | null;
  /** Buffers webinfer's cache was split across (1: one storage binding held it). */
  cacheParts?: number;
  gbs: number;
  pctCopy: number;
  nParts?: number;
  error?: string;
  /** The peer's decode of the same step as GroupQueryAttention (dense cache), where a peer was asked for. */
  peer?: PagedPeerResult;
  /** The peer's decode of the same step as PagedAttention (paged cache, block tables), where a peer was asked for. */
  peerPaged?: PagedPeerResult;
  /** The portable decode (engine.tuning pagedDecodeVariant and flashVariant 'portable'), checked and
   *  timed in the same rounds, where asked. */
  portable?: PortableResult;
  /** The decode kernel 'auto' ran (paged_decode_sg, paged_mla_mma: the matrix tile, ...). */
  kernel?: string;
  /** Other tunings (opts.variants), each checked and timed in the same rounds. */
  variants?: Record<string, PortableResult & { kernel?: string }>;
}

/** A tuning timed beside the default in the same rounds (benchPagedDecode opts.variants). */
export interface PagedVariant { name: string; tuning: Record<string, unknown> }

export type PagedPeerResult = PeerResult & {
  kvBytes: number; gbs: number; pctCopy: number;
  /** Timed round by round beside webinfer (both caches alive); false: after webinfer's cache was freed. */
  interleaved: boolean;
};

/** All the caches (ours paged K+V, the peer's dense and paged K+V, rotation sets included) up to this size:
 *  the peer is timed in the same rounds as webinfer; above it, after webinfer's cache is freed. */
export const TOGETHER_MAX_BYTES = 8 * 2 ** 30;

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

/** The peer's ops on a paged shape: GroupQueryAttention over a dense cache, PagedAttention over a paged one. */
export type PagedPeerOp = 'gqa' | 'paged';

/** The peer's decode of the same step over the same K/V values and query as `op`, set up and checked, to be
 *  timed in rounds (PeerCase). */
function pagedPeerCase(op: PagedPeerOp, s: PagedShape, peer: OrtPeer, samples: number): Promise<PeerCase<PeerResult & { kvBytes: number }>> {
  const pv = PATTERN_SEEDS.map((seed) => decodeF16(encodeF16(randn(PATTERN_ELEMS, seed)))) as [Float32Array, Float32Array];
  const q16 = decodeF16(encodeF16(randn(s.batch * s.Hq * s.D, Q_SEED)));
  const check = (got: Float32Array, index: (h: number, pos: number, d: number) => number) => checkSequence0(got, q16, s, (which, e) => pv[which][e % PATTERN_ELEMS], index);
  return op === 'gqa'
    ? peer.gqaDecodeCase(s, pv, q16, check, { samples, perSample: 3, sets: rotationSets(s) })
    : peer.pagedAttentionCase(s, pv, q16, blockTables(s, rotationSets(s)), check, { samples, perSample: 3 });
}

function peerRow(r: PeerResult & { kvBytes: number }, ceilings: Ceilings, interleaved: boolean): PagedPeerResult {
  const gbs = r.timing ? r.kvBytes / (r.timing.medianMs * 1e6) : NaN;
  return { ...r, gbs, pctCopy: (100 * gbs) / ceilings.copyGBs, interleaved };
}

/** The peer's decode of the same step as `op` alone, in `rounds` rounds back to back (run it once webinfer's
 *  cache is gone, so the caches never hold device memory at once). */
export async function benchPagedPeer(op: PagedPeerOp, s: PagedShape, ceilings: Ceilings, peer: OrtPeer, samples = 7, rounds = 1): Promise<PagedPeerResult> {
  const c = await pagedPeerCase(op, s, peer, samples);
  for (let r = 0; r < rounds && c.ready; r++) await c.round(roundWarmupMs(r)).catch(() => {});
  return peerRow(await c.finish(), ceilings, false);
}

/** KV bytes one decode step reads (f16 K and V rows of every sequence). */
function kvBytesOf(s: PagedShape): number {
  return s.batch * s.context * s.Hkv * 2 * s.D * 2;
}

/** Caches smaller than this rotate over three block sets, so the L2 cannot hold them between calls. */
const ROTATE_BELOW = 512 * 2 ** 20;

/** Rotation sets of a shape's cache (webinfer's and the peer's alike). */
function rotationSets(s: PagedShape): number {
  return kvBytesOf(s) < ROTATE_BELOW ? 3 : 1;
}

/**
 * One block table per rotation set ([batch, ceil(context / bs)] each) over batch · ceil(context / bs) ·
 * sets blocks, shuffled (a seeded permutation, so webinfer and the peer's PagedAttention read through
 * the same tables), the sets disjoint.
 */
function blockTables(s: PagedShape, sets: number): Int32Array[] {
  const n = s.batch * Math.ceil(s.context / s.bs);
  const r = rng(5);
  const perm = Array.from({ length: n * sets }, (_, i) => i);
  for (let i = perm.length - 1; i > 0; i--) { const j = Math.floor(r() * (i + 1)); [perm[i], perm[j]] = [perm[j], perm[i]]; }
  return Array.from({ length: sets }, (_, k) => Int32Array.from(perm.slice(k * n, (k + 1) * n)));
}

/**
 * webinfer's paged decode of one step, checked against the reference, then timed in `opts.rounds`
 * rounds (default 1). Each round times the decode, then (opts.portable) the portable decode, then
 * (opts.peer) the peer's GroupQueryAttention and PagedAttention, each warming up first, where all the
 * caches fit in opts.togetherMaxBytes (default TOGETHER_MAX_BYTES); otherwise the peer's rounds follow
 * once webinfer's cache is freed (interleaved false).
 */
export async function benchPagedDecode(engine: Engine, s: PagedShape, ceilings: Ceilings, samples = 7,
                                       opts: { rounds?: number; portable?: boolean; peer?: OrtPeer | null; togetherMaxBytes?: number; variants?: PagedVariant[] } = {}): Promise<PagedBenchRow> {
  const { batch: B, context: L, Hq, Hkv, D, bs } = s;
  const nRounds = opts.rounds ?? 1;
  const kvBytes = kvBytesOf(s);
  const row: PagedBenchRow = { shape: s, kvBytes, worst: NaN, pass: false, timing: null, gbs: NaN, pctCopy: NaN };
  const blocksPerSeq = Math.ceil(L / bs);
  const sets = rotationSets(s);
  const numBlocks = B * blocksPerSeq * sets;
  const cacheBytes = numBlocks * Hkv * bs * D * 2;
  const peer = opts.peer ?? null;
  const together = !!peer && 2 * cacheBytes + peer.gqaCacheBytes(s, sets) + peer.pagedCacheBytes(s, sets) <= (opts.togetherMaxBytes ?? TOGETHER_MAX_BYTES);
  const peerAlone = async () => {
    if (!peer) return;
    row.peer ??= await benchPagedPeer('gqa', s, ceilings, peer, samples, nRounds);
    row.peerPaged ??= await benchPagedPeer('paged', s, ceilings, peer, samples, nRounds);
  };
  // A cache past the adapter's largest storage binding is split across buffers (cache.parts).
  let cache;
  try {
    cache = engine.createPagedKVCache({ numBlocks, blockSize: bs, numKvHeads: Hkv, headSize: D, dtype: 'f16' });
  } catch (e) {
    row.error = `skipped: ${(e as Error).message}`;
    await peerAlone();
    return row;
  }
  const tensors: Tensor[] = [];
  let peerCase: PeerCase<PeerResult & { kvBytes: number }> | undefined, pagedCase: typeof peerCase;
  try {
    // Fill each cache by repeating its own random f16 pattern.
    const pats = PATTERN_SEEDS.map((seed) => encodeF16(randn(PATTERN_ELEMS, seed)));
    for (const part of cache.parts) {
      // Each part's fill starts at its first element's phase, so element e of the whole cache holds pattern[e % n].
      const ph = (part.blockLo * Hkv * bs * D) % PATTERN_ELEMS;
      const rot = (p: Uint16Array) => (ph ? Uint16Array.from([...p.subarray(ph), ...p.subarray(0, ph)]) : p);
      await fillRepeating(engine, part.key.buffer, part.key.byteLength, rot(pats[0]));
      await fillRepeating(engine, part.value.buffer, part.value.byteLength, rot(pats[1]));
    }
    row.cacheParts = cache.parts.length;
    const pv = pats.map((p) => decodeF16(p));
    const cacheElem = (which: 0 | 1, e: number) => pv[which][e % PATTERN_ELEMS];

    // Shuffled block tables, one per rotation set.
    const metas = blockTables(s, sets).map((blockTable) => (
      { queryStartLoc: Int32Array.from({ length: B + 1 }, (_, i) => i), seqLens: new Int32Array(B).fill(L), blockTable, maxBlocksPerSeq: blocksPerSeq }));
    const qv = randn(B * Hq * D, Q_SEED);
    const q = engine.tensor(qv, [B, Hq, D], 'f16');
    tensors.push(q);
    const q16 = decodeF16(encodeF16(qv));
    const c = cache;

    // Check sequence 0 against the reference, gathered from the pattern through its block table.
    const bt = metas[0].blockTable;
    const check = async () => {
      const out = engine.pagedAttention(q, c, metas[0]);
      const got = await out.toFloat32();
      out.destroy();
      return checkSequence0(got, q16, s, cacheElem, (h, pos, d) => ((bt[Math.floor(pos / bs)] * Hkv + h) * bs + (pos % bs)) * D + d);
    };
    const time = (r: number) => timeOp(engine, (i) => engine.pagedAttention(q, c, metas[i % sets]).destroy(), { samples, perSample: 3, warmupMs: roundWarmupMs(r) });
    // The decode kernel a run recorded (the timed passes name the kernels; the merge aside).
    const kernelOf = async (): Promise<string | undefined> => {
      if (!engine.features.timestampQuery) return undefined;
      engine.beginTiming();
      engine.pagedAttention(q, c, metas[0]).destroy();
      await engine.endTiming();
      return Object.keys(engine.lastTiming).find((k) => !k.startsWith('merge')) ?? undefined;
    };
    Object.assign(row, await check());
    row.kernel = await kernelOf();
    const mine: Timing[] = [], portable: Timing[] = [];
    const contenders: Contender[] = [{ name: 'webinfer', round: async (r) => { mine.push(await time(r)); } }];
    const variantTimes = new Map<string, Timing[]>();
    for (const v of opts.variants ?? []) {
      const res: PortableResult & { kernel?: string } = { worst: NaN, pass: false, timing: null };
      (row.variants ??= {})[v.name] = res;
      try {
        Object.assign(res, await withTuning(engine, v.tuning, check));
        res.kernel = await withTuning(engine, v.tuning, kernelOf);
        const times: Timing[] = [];
        variantTimes.set(v.name, times);
        contenders.push({ name: v.name, round: async (r) => { times.push(await withTuning(engine, v.tuning, () => time(r))); } });
      } catch (e) {
        res.error = (e as Error).message;
      }
    }
    if (opts.portable) {
      const p: PortableResult = row.portable = { worst: NaN, pass: false, timing: null };
      try {
        Object.assign(p, await withTuning(engine, PORTABLE_TUNING, check));
        contenders.push({ name: 'portable', round: async (r) => { portable.push(await withTuning(engine, PORTABLE_TUNING, () => time(r))); } });
      } catch (e) {
        p.error = (e as Error).message;
      }
    }
    if (together) {
      const pc = peerCase = await pagedPeerCase('gqa', s, peer!, samples);
      if (pc.ready) contenders.push({ name: 'peer', round: (r) => pc.round(roundWarmupMs(r)) });
      const pp = pagedCase = await pagedPeerCase('paged', s, peer!, samples);
      if (pp.ready) contenders.push({ name: 'peer paged', round: (r) => pp.round(roundWarmupMs(r)) });
    }
    await timeRounds(contenders, nRounds, (who, e) => {
      if (who.name === 'webinfer') row.error = e.message;
      if (who.name === 'portable' && row.portable) row.portable.error = e.message;
      const v = row.variants?.[who.name];
      if (v) v.error = e.message;
    });
    for (const [name, times] of variantTimes) if (times.length) row.variants![name].timing = combineRounds(times);
    if (mine.length) {
      row.timing = combineRounds(mine);
      row.gbs = kvBytes / (row.timing.medianMs * 1e6);
      row.pctCopy = (100 * row.gbs) / ceilings.copyGBs;
    }
    if (portable.length && row.portable) row.portable.timing = combineRounds(portable);
  } catch (e) {
    row.error = (e as Error).message;
  } finally {
    if (peerCase) row.peer = peerRow(await peerCase.finish(), ceilings, true);
    if (pagedCase) row.peerPaged = peerRow(await pagedCase.finish(), ceilings, true);
    for (const t of tensors) t.destroy();
    cache.destroy();
    await engine.sync();
    engine.pool.trim();
  }
  // Too large to hold every cache at once, or webinfer failed before the peer was set up: the peer alone.
  if (peer && (!row.peer || !row.peerPaged)) await peerAlone();
  return row;
}

/** One row of the results file: the shape, the check, the timing, and the peer's where it ran. */
export function pagedJson(r: PagedBenchRow) {
  return {
    ...r.shape, kvBytes: r.kvBytes, cacheParts: r.cacheParts, pass: r.pass, worst: r.worst, error: r.error,
    medianMs: r.timing?.medianMs, method: r.timing?.method, rounds: r.timing?.rounds, spreadPct: r.timing?.spreadPct, gbs: r.gbs, pctCopy: r.pctCopy,
    kernel: r.kernel,
    ...(r.variants ? { variants: Object.fromEntries(Object.entries(r.variants).map(([k, v]) => [k, {
      ms: v.timing?.medianMs, rounds: v.timing?.rounds, spreadPct: v.timing?.spreadPct, pass: v.pass, worst: v.worst, kernel: v.kernel, error: v.error,
    }])) } : {}),
    ...(r.portable ? {
      portableMs: r.portable.timing?.medianMs, portableRounds: r.portable.timing?.rounds, portableSpreadPct: r.portable.timing?.spreadPct,
      portableRatio: (r.portable.timing?.medianMs ?? NaN) / (r.timing?.medianMs ?? NaN), portablePass: r.portable.pass, portableWorst: r.portable.worst,
      portableError: r.portable.error,
    } : {}),
    ...(r.peer ? { ortMs: r.peer.timing?.medianMs, ortRounds: r.peer.timing?.rounds, ortSpreadPct: r.peer.timing?.spreadPct, interleaved: r.peer.interleaved,
      ortGbs: r.peer.gbs, ortPctCopy: r.peer.pctCopy, ortPass: r.peer.pass, ortWorst: r.peer.worst,
      ortError: r.peer.error, ortDtype: r.peer.dtype, ortKvBytes: r.peer.kvBytes, ortMethod: r.peer.timing?.method, ortKernels: r.peer.timing?.kernels } : {}),
    // PagedAttention: ortPagedMs covers every kernel of its step, the cache write included; ortPagedAttnMs
    // leaves out the kernels ortPagedOmitted names (that write), as webinfer's timed decode writes nothing.
    ...(r.peerPaged ? { ortPagedMs: r.peerPaged.timing?.medianMs, ortPagedAttnMs: r.peerPaged.timing?.restMs, ortPagedOmitted: r.peerPaged.timing?.omitted,
      ortPagedRounds: r.peerPaged.timing?.rounds, ortPagedSpreadPct: r.peerPaged.timing?.spreadPct, ortPagedInterleaved: r.peerPaged.interleaved,
      ortPagedGbs: r.peerPaged.gbs, ortPagedPctCopy: r.peerPaged.pctCopy, ortPagedPass: r.peerPaged.pass, ortPagedWorst: r.peerPaged.worst,
      ortPagedError: r.peerPaged.error, ortPagedDtype: r.peerPaged.dtype, ortPagedKvBytes: r.peerPaged.kvBytes, ortPagedMethod: r.peerPaged.timing?.method,
      ortPagedKernels: r.peerPaged.timing?.kernels } : {}),
  };
}

export function llamaDecodeShapes(batches: number[], contexts: number[]): PagedShape[] {
  return batches.flatMap((batch) => contexts.map((context) => ({ batch, context, Hq: 32, Hkv: 8, D: 128, bs: 16 })));
}

/** Paged prefill: one sequence's L new tokens over an f16 cache, f16 queries (the tile 'auto' picks, and
 *  the scalar subgroup tile beside it: engine.tuning.flashVariant 'subgroup'), bottom-right causal. */
export interface PagedPrefillRow {
  L: number; Hq: number; Hkv: number; D: number; bs: number; tile: string;
  worst: number; pass: boolean; ms: number; tflops: number; scalarMs: number; scalarPass: boolean; error?: string;
  /** (max − min of the rounds' medians) / ms, percent; the same for the scalar tile. */
  spreadPct?: number; scalarSpreadPct?: number;
}

export async function benchPagedPrefill(engine: Engine, L: number, o: { Hq?: number; Hkv?: number; D?: number; bs?: number; samples?: number; rounds?: number } = {}): Promise<PagedPrefillRow> {
  const Hq = o.Hq ?? 32, Hkv = o.Hkv ?? 8, D = o.D ?? 128, bs = o.bs ?? 16;
  const row: PagedPrefillRow = { L, Hq, Hkv, D, bs, tile: '', worst: NaN, pass: false, ms: NaN, tflops: NaN, scalarMs: NaN, scalarPass: false };
  const numBlocks = Math.ceil(L / bs);
  const cache = engine.createPagedKVCache({ numBlocks, blockSize: bs, numKvHeads: Hkv, headSize: D, dtype: 'f16' });
  const tensors: Tensor[] = [];
  try {
    // The sequence's keys and values, written through the cache's own path.
    const kv = (seed: number) => decodeF16(encodeF16(randn(L * Hkv * D, seed)));
    const kh = kv(21), vh = kv(22), qh = decodeF16(encodeF16(randn(L * Hq * D, 23)));
    const [q, k, v] = [engine.tensor(qh, [L, Hq, D], 'f16'), engine.tensor(kh, [L, Hkv, D], 'f16'), engine.tensor(vh, [L, Hkv, D], 'f16')];
    tensors.push(q, k, v);
    const slots = engine.tensor(Int32Array.from({ length: L }, (_, i) => i), [L], 'i32');
    tensors.push(slots);
    engine.reshapeAndCache(k, v, cache, slots);
    const meta = { queryStartLoc: Int32Array.of(0, L), seqLens: Int32Array.of(L), blockTable: Int32Array.from({ length: numBlocks }, (_, i) => i), maxBlocksPerSeq: numBlocks };
    // Check the last CHECK rows of heads 0 and Hq-1 (they see the most keys) against the float64 reference.
    const CHECK = 8, G = Hq / Hkv;
    const check = async (): Promise<{ worst: number; pass: boolean }> => {
      const out = engine.pagedAttention(q, cache, meta);
      const got = await out.toFloat32();
      out.destroy();
      let worst = 0, pass = true;
      for (const h of [0, Hq - 1]) {
        const g = Math.floor(h / G);
        const pick = (src: Float32Array, H: number, hh: number, i0: number, n: number) => {
          const r = new Float32Array(n * D);
          for (let i = 0; i < n; i++) r.set(src.subarray(((i0 + i) * H + hh) * D, ((i0 + i) * H + hh + 1) * D), i * D);
          return r;
        };
        const ref = reference.sdpaRef(pick(qh, Hq, h, L - CHECK, CHECK), pick(kh, Hkv, g, 0, L), pick(vh, Hkv, g, 0, L),
          { B: 1, Hq: 1, Hkv: 1, Lq: CHECK, Lk: L, D, Dv: D }, { causal: true });
        const c = compareToReference(pick(got, Hq, h, L - CHECK, CHECK), ref.out, TOLERANCES.f16);
        worst = Math.max(worst, c.badIndex >= 0 ? Infinity : c.worst);
        pass &&= c.pass;
      }
      return { worst, pass };
    };
    // The tile and (where that is the subgroup-matrix one) the scalar tile, checked, then timed in
    // alternating rounds: a single timing straight after the check ran 2-3x slow at times (runs 53, 55).
    const mma = flashMmaFor(engine, 'f16', D, D);
    row.tile = flashTileName(engine, mma);
    Object.assign(row, await check());
    const scalar = <T>(fn: () => Promise<T>) => withTuning(engine, { flashVariant: 'subgroup' }, fn);
    if (mma) row.scalarPass = (await scalar(check)).pass;
    const ts: Timing[] = [], scalarTs: Timing[] = [];
    const time = (r: number) => timeOp(engine, () => engine.pagedAttention(q, cache, meta).destroy(), { samples: o.samples ?? 5, perSample: 1, warmupMs: roundWarmupMs(r) });
    const contenders: Contender[] = [{ name: 'tile', round: async (r) => { ts.push(await time(r)); } }];
    if (mma) contenders.push({ name: 'scalar', round: async (r) => { scalarTs.push(await scalar(() => time(r))); } });
    await timeRounds(contenders, o.rounds ?? 3, (_, e) => { row.error = e.message; });
    const t = combineRounds(ts);
    row.ms = t.medianMs;
    row.spreadPct = t.spreadPct;
    row.tflops = (2 * 2 * Hq * D * (L * (L + 1)) / 2) / (row.ms * 1e9);
    if (scalarTs.length) {
      const st = combineRounds(scalarTs);
      row.scalarMs = st.medianMs;
      row.scalarSpreadPct = st.spreadPct;
    }
  } catch (e) {
    row.error = (e as Error).message;
  } finally {
    for (const t of tensors) t.destroy();
    cache.destroy();
  }
  return row;
}
