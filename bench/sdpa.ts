// Dense SDPA benchmark: flash against naive on mps-sdpa's shapes (B 1, H 8, D 64, L 1024..8192; f32 and
// f16 storage; causal and not), against the f32 FMA ceiling measured in the same run. Each case is
// checked against the float64 reference (on a slice of rows: the full reference at L 8192 would take
// minutes on the CPU) before it is timed, and inputs rotate between calls. With a peer (bench/ort.ts),
// ONNX Runtime Web runs the same inputs through its MultiHeadAttention and gets the same check. A shape
// is timed in rounds that alternate webinfer's backends, flash's portable variant and the peer.
import {
  TOLERANCES, compareToReference, randn, reference, roundToDType,
  type Engine, type SdpaBackend, type Tensor,
} from 'webinfer';
import { combineRounds, PORTABLE_TUNING, roundWarmupMs, timeOp, timeRounds, withTuning, type Ceilings, type Contender, type PortableResult, type Timing } from './harness';
import type { OrtPeer, PeerCase, PeerTiming } from './ort';
import { sdpaFlops, sdpaMinBytes, type SdpaShape } from './workload';
import { flashMmaFor, flashTileName } from '../src/attention/flash';

export interface SdpaBenchRow {
  shape: SdpaShape;
  /** webinfer's kernels, or 'ort' for the peer. */
  backend: SdpaBackend | 'ort';
  /** Worst error over the checked rows as a fraction of the SPEC §6 tolerance (pass ≤ 1). */
  worst: number;
  pass: boolean;
  timing: Timing | PeerTiming | null;
  tflops: number;
  gbs: number;
  /** Percent of the measured f32 FMA ceiling. */
  pctFma: number;
  /** The peer's storage type where it differs from the shape's (f32 for f16 without shader-f16). */
  peerDtype?: string;
  /** The peer's GPU programs in one call. */
  kernels?: string[];
  error?: string;
  /** Flash only, where asked: the portable variant (engine.tuning.flashVariant 'portable'), checked and
   *  timed in the same rounds. */
  portable?: PortableResult;
  /** Flash where it runs the subgroup-matrix tile, where asked: the same call held to the scalar subgroup
   *  tile (engine.tuning.flashVariant 'subgroup'), checked and timed in the same rounds. */
  scalar?: PortableResult;
  /** Which flash tile ran: 'subgroup-matrix M×N×K' or the scalar tile's variant. */
  tile?: string;
}

const ROTATE = 3;
/** Query rows checked per head: the last rows see every key (bottom-right causal), the first few least. */
const CHECK_ROWS = 16;

function sliceRows(x: Float32Array, H: number, L: number, D: number, h: number, i0: number, n: number): Float32Array {
  return x.slice((h * L + i0) * D, (h * L + i0 + n) * D);
}

/** Checks rows [i0, i0+n) of heads {0, H-1} against the float64 reference of exactly those rows
 *  (B 1; a sliding window only with causal, where slicing keeps each row's position). */
export function checkSlices(got: Float32Array, q: Float32Array, k: Float32Array, v: Float32Array, s: SdpaShape): { worst: number; pass: boolean } {
  let worst = 0, pass = true;
  const heads = [...new Set([0, s.Hq - 1])];
  for (const h of heads) {
    const g = Math.floor(h / (s.Hq / s.Hkv));
    const kh = sliceRows(k, s.Hkv, s.Lk, s.D, g, 0, s.Lk);
    const vh = sliceRows(v, s.Hkv, s.Lk, s.Dv, g, 0, s.Lk);
    for (const i0 of [0, s.Lq - CHECK_ROWS]) {
      const n = Math.min(CHECK_ROWS, s.Lq - i0);
      // Causal: rows i0.. of the Lq-row problem are an n-row problem over the first lk keys (bottom-right
      // alignment keeps each row's i_abs). Without causal every row sees all keys.
      const lk = s.causal ? s.Lk - (s.Lq - i0 - n) : s.Lk;
      const ref = reference.sdpaRef(sliceRows(q, s.Hq, s.Lq, s.D, h, i0, n), kh.subarray(0, lk * s.D), vh.subarray(0, lk * s.Dv),
        { B: 1, Hq: 1, Hkv: 1, Lq: n, Lk: lk, D: s.D, Dv: s.Dv },
        { causal: s.causal, softcap: s.softcap, slidingWindow: s.slidingWindow });
      const c = compareToReference(sliceRows(got, s.Hq, s.Lq, s.Dv, h, i0, n), ref.out, TOLERANCES[s.dtype]);
      worst = Math.max(worst, c.badIndex >= 0 ? Infinity : c.worst);
      pass &&= c.pass;
    }
  }
  return { worst, pass };
}

/**
 * Checks each backend (and the peer) on one shape, then times them in `rounds` rounds that alternate:
 * each round times flash, flash's portable variant (opts.portable), naive, then the peer, each warming
 * up first (harness.timeRounds). Each row's median covers every sample of every round; its `timing.rounds`
 * and `spreadPct` say how far the rounds' medians lie apart.
 */
export async function benchSdpaShape(engine: Engine, s: SdpaShape, backends: SdpaBackend[], ceilings: Ceilings,
                                     opts: { samples?: number; seed?: number; peer?: OrtPeer | null; rounds?: number; portable?: boolean; scalar?: boolean } = {}): Promise<SdpaBenchRow[]> {
  const seed = opts.seed ?? 7;
  const samples = opts.samples ?? 7;
  const nq = s.B * s.Hq * s.Lq * s.D, nk = s.B * s.Hkv * s.Lk * s.D, nv = s.B * s.Hkv * s.Lk * s.Dv;
  const sets: { q: Float32Array; k: Float32Array; v: Float32Array; t: Tensor[] }[] = [];
  for (let r = 0; r < ROTATE; r++) {
    const q = roundToDType(randn(nq, seed + 10 * r), s.dtype);
    const k = roundToDType(randn(nk, seed + 10 * r + 1), s.dtype);
    const v = roundToDType(randn(nv, seed + 10 * r + 2), s.dtype);
    // webinfer's tensors only where a webinfer backend runs (the peer takes the host arrays).
    sets.push({ q, k, v, t: backends.length ? [
      engine.tensor(q, [s.B, s.Hq, s.Lq, s.D], s.dtype),
      engine.tensor(k, [s.B, s.Hkv, s.Lk, s.D], s.dtype),
      engine.tensor(v, [s.B, s.Hkv, s.Lk, s.Dv], s.dtype),
    ] : [] });
  }
  const attn = { causal: s.causal, softcap: s.softcap, slidingWindow: s.slidingWindow };
  const flops = sdpaFlops(s);
  // Calls per sample from the TFLOP per call (amortizes the submission of short kernels).
  const per = Math.max(1, Math.min(20, Math.round(0.02 / Math.max(flops / 1e12, 1e-6))));
  const rows: SdpaBenchRow[] = [];
  const contenders: Contender[] = [];
  /** Where each contender's rounds go, and the error it ends with. */
  const rounds = new Map<Contender, { per: Timing[]; fail: (e: string) => void }>();
  /** A webinfer backend under `tuning` (empty: the engine's own): checked now, a contender for the rounds. */
  const ours = async (backend: SdpaBackend, tuning: Partial<Engine['tuning']>, into: { worst: number; pass: boolean; error?: string }, name: string) => {
    try {
      const checked = await withTuning(engine, tuning, async () => {
        const [tq, tk, tv] = sets[0].t;
        const out = engine.sdpa(tq, tk, tv, { ...attn, backend });
        const got = await out.toFloat32();
        out.destroy();
        return checkSlices(got, sets[0].q, sets[0].k, sets[0].v, s);
      });
      Object.assign(into, checked);
    } catch (e) {
      into.error = (e as Error).message;
      return;
    }
    const c: Contender = {
      name,
      round: async (r) => {
        const t = await withTuning(engine, tuning, () => timeOp(engine, (i) => {
          const [a, b, c2] = sets[i % ROTATE].t;
          engine.sdpa(a, b, c2, { ...attn, backend }).destroy();
        }, { samples, perSample: per, warmupMs: roundWarmupMs(r) }));
        rounds.get(c)!.per.push(t);
      },
    };
    contenders.push(c);
    rounds.set(c, { per: [], fail: (e) => { into.error = e; } });
  };
  const fill = (row: { timing: Timing | PeerTiming | null; tflops: number; gbs: number; pctFma: number }, t: Timing | PeerTiming | null) => {
    row.timing = t;
    if (!t) return;
    row.tflops = flops / (t.medianMs * 1e9);
    row.gbs = sdpaMinBytes(s) / (t.medianMs * 1e6);
    row.pctFma = (100 * row.tflops) / ceilings.fmaTflops;
  };
  let peerCase: PeerCase | undefined;
  const peerRow: SdpaBenchRow = { shape: s, backend: 'ort', worst: NaN, pass: false, timing: null, tflops: NaN, gbs: NaN, pctFma: NaN };
  try {
    for (const backend of backends) {
      const row: SdpaBenchRow = { shape: s, backend, worst: NaN, pass: false, timing: null, tflops: NaN, gbs: NaN, pctFma: NaN };
      rows.push(row);
      await ours(backend, {}, row, backend);
      if (backend === 'flash') {
        const mma = flashMmaFor(engine, s.dtype, s.D, s.Dv);
        row.tile = flashTileName(engine, mma);
        if (mma && opts.scalar) {
          row.scalar = { worst: NaN, pass: false, timing: null };
          await ours(backend, { flashVariant: 'subgroup' }, row.scalar, 'flash scalar');
        }
      }
      if (backend === 'flash' && opts.portable) {
        row.portable = { worst: NaN, pass: false, timing: null };
        await ours(backend, { flashVariant: PORTABLE_TUNING.flashVariant }, row.portable, 'flash portable');
      }
    }
    if (opts.peer) {
      peerCase = await opts.peer.mhaCase(s, sets, (got) => checkSlices(got, sets[0].q, sets[0].k, sets[0].v, s), { samples, perSample: per });
      if (peerCase.ready) {
        const pc = peerCase;
        contenders.push({ name: 'ort', round: (r) => pc.round(roundWarmupMs(r)) });
      }
    }
    await timeRounds(contenders, opts.rounds ?? 1, (c, e) => rounds.get(c)?.fail(e.message));
    for (const row of rows) {
      for (const [c, { per: ts }] of rounds) {
        if (!ts.length) continue;
        if (c.name === row.backend) fill(row, combineRounds(ts));
        if (c.name === 'flash portable' && row.portable) row.portable.timing = combineRounds(ts);
        if (c.name === 'flash scalar' && row.scalar) row.scalar.timing = combineRounds(ts);
      }
    }
    if (peerCase) {
      const r = await peerCase.finish();
      peerCase = undefined;
      Object.assign(peerRow, { worst: r.worst, pass: r.pass, error: r.error, kernels: r.timing?.kernels });
      if (r.dtype !== s.dtype) peerRow.peerDtype = r.dtype;
      fill(peerRow, r.timing);
      rows.push(peerRow);
    }
  } finally {
    await peerCase?.finish();
    for (const set of sets) for (const t of set.t) t.destroy();
  }
  return rows;
}

/** One row of the results file (bench/results/<device>.json): the shape, the check and the timing. */
export function sdpaJson(r: SdpaBenchRow) {
  return {
    ...r.shape, backend: r.backend, pass: r.pass, worst: r.worst, error: r.error,
    medianMs: r.timing?.medianMs, minMs: r.timing?.minMs, method: r.timing?.method, rounds: r.timing?.rounds, spreadPct: r.timing?.spreadPct,
    tflops: r.tflops, gbs: r.gbs, pctFma: r.pctFma,
    ...(r.backend === 'ort' ? { peerDtype: r.peerDtype, kernels: r.kernels } : {}),
    ...(r.tile ? { tile: r.tile } : {}),
    ...(r.scalar ? {
      scalarMs: r.scalar.timing?.medianMs, scalarRounds: r.scalar.timing?.rounds, scalarSpreadPct: r.scalar.timing?.spreadPct,
      scalarRatio: (r.scalar.timing?.medianMs ?? NaN) / (r.timing?.medianMs ?? NaN), scalarPass: r.scalar.pass, scalarWorst: r.scalar.worst, scalarError: r.scalar.error,
    } : {}),
    ...(r.portable ? {
      portableMs: r.portable.timing?.medianMs, portableRounds: r.portable.timing?.rounds, portableSpreadPct: r.portable.timing?.spreadPct,
      portableRatio: (r.portable.timing?.medianMs ?? NaN) / (r.timing?.medianMs ?? NaN), portablePass: r.portable.pass, portableWorst: r.portable.worst,
      portableError: r.portable.error,
    } : {}),
  };
}

/** mps-sdpa's shapes: B 1, H 8, D 64; f32 and f16; causal and not. */
export function mpsSdpaShapes(lengths: number[]): SdpaShape[] {
  const out: SdpaShape[] = [];
  for (const dtype of ['f32', 'f16'] as const) {
    for (const causal of [false, true]) {
      for (const L of lengths) out.push({ B: 1, Hq: 8, Hkv: 8, Lq: L, Lk: L, D: 64, Dv: 64, dtype, causal });
    }
  }
  return out;
}
