// MLA decode benchmark (DeepSeek shapes: L 512, P 128, R 64, V 128; N 16 and 128; f16 latent cache,
// block 64): absorbed decode against the unabsorbed path (K/V decompressed per head from the latent
// cache, then attention: the layer's prefill path with the whole context in one chunk), and against
// the roofline max(FLOPs / FMA ceiling, bytes / read bandwidth) measured in the same run. Sequence 0 is
// checked against the float64 reference first.
import { TOLERANCES, compareToReference, decodeF16, encodeF16, randn, reference, type Engine, type Tensor } from 'webinfer';
import { mlaMmaFor } from '../src/attention/plan';
import { combineRounds, fillRepeating, roundWarmupMs, timeOp, timeRounds, withTuning, type Ceilings, type Contender, type Timing } from './harness';

export interface MlaShape { N: number; batch: number; context: number; L: number; P: number; R: number; V: number; bs: number }

export interface MlaBenchRow {
  shape: MlaShape;
  flops: number;
  bytes: number;
  worst: number;
  pass: boolean;
  absorbed: Timing | null;
  unabsorbed: Timing | null;
  tflops: number;
  gbs: number;
  /** Roofline time over measured time, in percent. */
  pctRoofline: number;
  /** GPU ms per pass of one absorbed call (the last timed sample). */
  passes?: Record<string, number>;
  /** The attention tile the default runs (mlaTileName). */
  tile?: string;
  /** Absorbed decode under each attention tile measured (the default's name first), checked like it. */
  tiles?: Record<string, { ms: number; pass: boolean; worst: number }>;
  error?: string;
}

/** MLA decode's attention tile as the benchmark names it: the subgroup-matrix tile (its configuration
 *  and shape) where 'auto' takes it (the suite's f16 latent rows of D values, `heads` heads), else MLA's own tile or the flash tile. */
export function mlaTileName(engine: Engine, D: number, Dv: number, heads: number): string {
  const t = engine.tuning;
  if (t.mlaDecodeTile === 'flash') return 'flash tile';
  const p = mlaMmaFor(engine, D, Dv, heads);
  if (p) return `subgroup-matrix ${p.M}×${p.N}×${p.K}, ${p.NSG} subgroups, ${p.DSPLIT} D slices, ${p.BR} heads × ${p.BC} keys`;
  const rm = t.mlaHeadsPerThread ?? 1;
  return `mla tile, ${rm} head${rm > 1 ? 's' : ''} a thread`;
}

export function mlaDecodeCost(s: MlaShape): { flops: number; bytes: number } {
  const { N, batch: B, context: C, L, P, R, V } = s;
  const flops = 2 * B * N * (P * L + C * (L + R) + C * L + L * V);
  // The latent rows (f16) once per sequence, the absorbed weights (f32) once per call.
  const bytes = B * C * (L + R) * 2 + N * (P + V) * L * 4;
  return { flops, bytes };
}

export async function benchMlaDecode(engine: Engine, s: MlaShape, ceilings: Ceilings, samples = 5, unabsorbed = true, rounds = 3): Promise<MlaBenchRow> {
  const { N, batch: B, context: C, L, P, R, V, bs } = s;
  const { flops, bytes } = mlaDecodeCost(s);
  const row: MlaBenchRow = { shape: s, flops, bytes, worst: NaN, pass: false, absorbed: null, unabsorbed: null, tflops: NaN, gbs: NaN, pctRoofline: NaN };
  const tensors: Tensor[] = [];
  const blocksPerSeq = Math.ceil(C / bs);
  const numBlocks = B * blocksPerSeq;
  const scale = 1 / Math.sqrt(P + R);
  let cache;
  try {
    const kvB = randn(N * (P + V) * L, 31, 0.05);
    const layer = engine.createMLA({ numHeads: N, kvLoraRank: L, qkNopeHeadDim: P, qkRopeHeadDim: R, vHeadDim: V, scale,
      kvBProj: engine.tensor(kvB, [N * (P + V), L], 'f16') });
    tensors.push(layer.wUK, layer.wUV);
    cache = engine.createMLACache({ numBlocks, blockSize: bs, kvLoraRank: L, qkRopeHeadDim: R, dtype: 'f16' });
    // Fill the latent cache by repeating a random f16 pattern.
    const pat = encodeF16(randn(1 << 20, 32));
    for (const part of cache.parts) await fillRepeating(engine, part.data.buffer, part.data.byteLength, pat);
    const pv = decodeF16(pat);
    const blockTable = Int32Array.from({ length: numBlocks }, (_, i) => i);
    const seqLens = new Int32Array(B).fill(C);
    const qN = randn(B * N * P, 33), qP = randn(B * N * R, 34);
    const qNope = engine.tensor(qN, [B, N, P], 'f16'), qPe = engine.tensor(qP, [B, N, R], 'f16');
    tensors.push(qNope, qPe);
    const meta = { seqLens, blockTable, maxBlocksPerSeq: blocksPerSeq };

    // Check sequence 0 (its blocks are 0 .. blocksPerSeq-1).
    const out = layer.decode(qNope, qPe, cache, meta);
    const got = await out.toFloat32();
    out.destroy();
    const rows0 = new Float64Array(blocksPerSeq * bs * (L + R));
    for (let i = 0; i < rows0.length; i++) rows0[i] = pv[i % pv.length];
    const f16 = (x: Float32Array) => decodeF16(encodeF16(x));
    const ref = reference.mlaDecodeRef(f16(qN.subarray(0, N * P)), f16(qP.subarray(0, N * R)), rows0, f16(kvB),
      { N, L, P, R, V, B: 1, numBlocks: blocksPerSeq, blockSize: bs }, { seqLens: Int32Array.of(C), blockTable: Int32Array.from({ length: blocksPerSeq }, (_, i) => i), maxBlocksPerSeq: blocksPerSeq }, scale);
    const c = compareToReference(got.subarray(0, N * V), ref.out, TOLERANCES.f16);
    row.worst = c.badIndex >= 0 ? Infinity : c.worst;
    row.pass = c.pass;

    // Timed in `rounds` alternating rounds: the other attention tiles first, each checked as the default
    // is, then the default last in each round, so the per-pass split below is the default's. Where the
    // default is the subgroup-matrix tile, MLA's own (FMA) tile at every shape; with 64 heads or more,
    // the flash tile too (and, without the matrix tile, MLA's tile with 4 heads a thread).
    const time = (r: number) => timeOp(engine, () => layer.decode(qNope, qPe, cache!, meta).destroy(), { samples, perSample: 2, warmupMs: roundWarmupMs(r) });
    const contenders: Contender[] = [];
    const tileTimes = new Map<string, { ts: Timing[]; pass: boolean; worst: number }>();
    const mma = mlaMmaFor(engine, L + R, L, N);
    row.tile = mlaTileName(engine, L + R, L, N);
    const others: [string, Partial<Engine['tuning']>][] = [];
    if (engine.tuning.mlaDecodeTile === 'auto' && engine.tuning.mlaHeadsPerThread === undefined) {
      if (mma) others.push(['mla tile, 1 head a thread', { mlaDecodeTile: 'mla' }]);
      else if (N >= 64) others.push(['mla tile, 4 heads a thread', { mlaHeadsPerThread: 4 }]);
      if (N >= 64) others.push(['flash tile', { mlaDecodeTile: 'flash' }]);
    }
    for (const [name, t] of others) {
      const cc = await withTuning(engine, t, async () => {
        const o = layer.decode(qNope, qPe, cache!, meta);
        const res = compareToReference((await o.toFloat32()).subarray(0, N * V), ref.out, TOLERANCES.f16);
        o.destroy();
        return res;
      });
      const entry = { ts: [] as Timing[], pass: cc.pass, worst: cc.badIndex >= 0 ? Infinity : cc.worst };
      tileTimes.set(name, entry);
      contenders.push({ name, round: async (r) => { entry.ts.push(await withTuning(engine, t, () => time(r))); } });
    }
    const ts: Timing[] = [];
    contenders.push({ name: 'default', round: async (r) => { ts.push(await time(r)); } });
    await timeRounds(contenders, rounds, (c, e) => { throw new Error(`${c.name}: ${e.message}`); });
    row.absorbed = combineRounds(ts);
    if (tileTimes.size) {
      row.tiles = { [`${row.tile} (default)`]: { ms: row.absorbed.medianMs, pass: row.pass, worst: row.worst } };
      for (const [name, e] of tileTimes) row.tiles[name] = { ms: combineRounds(e.ts).medianMs, pass: e.pass, worst: e.worst };
    }
    row.passes = Object.fromEntries(Object.entries(engine.lastTiming).map(([k, v]) => [k, v / 2]));
    row.tflops = flops / (row.absorbed.medianMs * 1e9);
    row.gbs = bytes / (row.absorbed.medianMs * 1e6);
    const roofMs = Math.max(flops / (ceilings.fmaTflops * 1e9), bytes / (ceilings.readGBs * 1e6));
    row.pctRoofline = (100 * roofMs) / row.absorbed.medianMs;
    // Unabsorbed: decompress each sequence's whole context per head, then attention (one chunk).
    if (!unabsorbed) return row;
    const savedChunk = engine.tuning.mlaPrefillChunk;
    engine.tuning.mlaPrefillChunk = C + bs;
    try {
      const pmeta = { queryStartLoc: Int32Array.from({ length: B + 1 }, (_, i) => i), seqLens, blockTable, maxBlocksPerSeq: blocksPerSeq };
      row.unabsorbed = await timeOp(engine, () => layer.prefill(qNope, qPe, cache!, pmeta).destroy(), { samples: 3, perSample: 1 });
    } finally {
      engine.tuning.mlaPrefillChunk = savedChunk;
    }
  } catch (e) {
    row.error = (e as Error).message;
  } finally {
    for (const t of tensors) t.destroy();
    cache?.destroy();
    await engine.sync();
    engine.pool.trim();
  }
  return row;
}

/** One row of the results file: the shape, FLOPs and bytes, the check, both timings and the per-pass split. */
export function mlaJson(r: MlaBenchRow) {
  return {
    ...r.shape, flops: r.flops, bytes: r.bytes, pass: r.pass, worst: r.worst, error: r.error,
    tile: r.tile, absorbedMs: r.absorbed?.medianMs, absorbedSpreadPct: r.absorbed?.spreadPct, absorbedRounds: r.absorbed?.rounds, unabsorbedMs: r.unabsorbed?.medianMs, passes: r.passes, tiles: r.tiles, tflops: r.tflops, gbs: r.gbs, pctRoofline: r.pctRoofline,
  };
}

export function deepseekDecodeShapes(heads: number[], batches: number[], context: number): MlaShape[] {
  return heads.flatMap((N) => batches.map((batch) => ({ N, batch, context, L: 512, P: 128, R: 64, V: 128, bs: 64 })));
}
