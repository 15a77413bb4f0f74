// The built-in default workload behind `npm start`: each available operation on a few representative
// shapes, checked against the float64 reference, then timed. The benchmark harness (issue 6) and the
// demo grow from the same case shape: setup, run, check, FLOPs and minimum bytes.
import {
  TOLERANCES, compareToReference, randn, reference, roundToDType,
  type Engine, type SdpaBackend, type Tensor,
} from 'webinfer';

export interface WorkloadRow {
  op: string;
  shape: string;
  dtype: string;
  backend: string;
  /** Worst error as a fraction of the SPEC §6 tolerance (pass ≤ 1). */
  worst: number;
  pass: boolean;
  medianMs: number;
  gflops: number;
  gbps: number;
  error?: string;
}

export interface SdpaShape {
  B: number; Hq: number; Hkv: number; Lq: number; Lk: number; D: number; Dv: number;
  dtype: 'f32' | 'f16' | 'bf16'; causal?: boolean; softcap?: number; slidingWindow?: number;
}

const BYTES = { f32: 4, f16: 2, bf16: 2 } as const;

/** Multiply-adds of QKᵀ and PV counted as 2 FLOPs each, over the visible (causal) part. */
export function sdpaFlops(s: SdpaShape): number {
  let pairs = 0;
  for (let i = 0; i < s.Lq; i++) {
    const iAbs = i + s.Lk - s.Lq;
    const lo = s.slidingWindow ? Math.max(0, iAbs - s.slidingWindow + 1) : 0;
    const hi = s.causal ? Math.min(s.Lk - 1, iAbs) : s.Lk - 1;
    if (hi >= lo) pairs += hi - lo + 1;
  }
  return 2 * s.B * s.Hq * pairs * (s.D + s.Dv);
}

/** The least a kernel must move: read q, k, v once, write out. */
export function sdpaMinBytes(s: SdpaShape): number {
  const e = BYTES[s.dtype];
  return e * s.B * (s.Hq * s.Lq * s.D + s.Hkv * s.Lk * (s.D + s.Dv) + s.Hq * s.Lq * s.Dv);
}

export const DEFAULT_SDPA_SHAPES: SdpaShape[] = [
  { B: 1, Hq: 8, Hkv: 8, Lq: 256, Lk: 256, D: 64, Dv: 64, dtype: 'f32' },
  { B: 1, Hq: 8, Hkv: 8, Lq: 256, Lk: 256, D: 64, Dv: 64, dtype: 'f32', causal: true },
  { B: 1, Hq: 8, Hkv: 8, Lq: 256, Lk: 256, D: 64, Dv: 64, dtype: 'f16', causal: true },
  { B: 2, Hq: 8, Hkv: 2, Lq: 128, Lk: 384, D: 128, Dv: 128, dtype: 'bf16', causal: true, softcap: 30, slidingWindow: 192 },
  { B: 4, Hq: 32, Hkv: 8, Lq: 1, Lk: 1024, D: 128, Dv: 128, dtype: 'f16' },
];

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

function shapeLabel(s: SdpaShape): string {
  const opts = [s.causal && 'causal', s.softcap && `softcap ${s.softcap}`, s.slidingWindow && `window ${s.slidingWindow}`].filter(Boolean);
  return `B${s.B} Hq${s.Hq} Hkv${s.Hkv} Lq${s.Lq} Lk${s.Lk} D${s.D}${opts.length ? ` ${opts.join(' ')}` : ''}`;
}

/** Checks one SDPA shape against the reference, then times `iters` calls per sample. */
export async function runSdpaCase(engine: Engine, s: SdpaShape, backend: SdpaBackend, opts: { samples?: number; seed?: number } = {}): Promise<WorkloadRow> {
  const seed = opts.seed ?? 1;
  const q = roundToDType(randn(s.B * s.Hq * s.Lq * s.D, seed), s.dtype);
  const k = roundToDType(randn(s.B * s.Hkv * s.Lk * s.D, seed + 1), s.dtype);
  const v = roundToDType(randn(s.B * s.Hkv * s.Lk * s.Dv, seed + 2), s.dtype);
  const tensors: Tensor[] = [
    engine.tensor(q, [s.B, s.Hq, s.Lq, s.D], s.dtype),
    engine.tensor(k, [s.B, s.Hkv, s.Lk, s.D], s.dtype),
    engine.tensor(v, [s.B, s.Hkv, s.Lk, s.Dv], s.dtype),
  ];
  const [tq, tk, tv] = tensors;
  const attn = { causal: s.causal, softcap: s.softcap, slidingWindow: s.slidingWindow };
  const row: WorkloadRow = {
    op: 'sdpa', shape: shapeLabel(s), dtype: s.dtype, backend, worst: NaN, pass: false, medianMs: NaN, gflops: NaN, gbps: NaN,
  };
  try {
    const out = engine.sdpa(tq, tk, tv, { ...attn, backend });
    const got = await out.toFloat32();
    out.destroy();
    const ref = reference.sdpaRef(q, k, v, s, attn);
    const c = compareToReference(got, ref.out, TOLERANCES[s.dtype]);
    row.worst = c.badIndex >= 0 ? Infinity : c.worst;
    row.pass = c.pass;

    // Warm-up, then samples of a few calls each, timed around a drained queue.
    const one = () => engine.sdpa(tq, tk, tv, { ...attn, backend }).destroy();
    one();
    await engine.sync();
    const samples = opts.samples ?? 5;
    const times: number[] = [];
    for (let i = 0; i < samples; i++) {
      const t0 = performance.now();
      one();
      await engine.sync();
      times.push(performance.now() - t0);
    }
    row.medianMs = median(times);
    row.gflops = sdpaFlops(s) / (row.medianMs * 1e6);
    row.gbps = sdpaMinBytes(s) / (row.medianMs * 1e6);
  } catch (e) {
    row.error = (e as Error).message;
  } finally {
    for (const t of tensors) t.destroy();
  }
  return row;
}

export async function runDefaultWorkload(engine: Engine, onRow?: (row: WorkloadRow, i: number, n: number) => void): Promise<WorkloadRow[]> {
  const rows: WorkloadRow[] = [];
  const backends: SdpaBackend[] = ['flash', 'naive'];
  const cases = DEFAULT_SDPA_SHAPES.flatMap((s) => backends.map((b) => [s, b] as const));
  for (const [i, [s, b]] of cases.entries()) {
    const row = await runSdpaCase(engine, s, b, { seed: 1000 + i });
    rows.push(row);
    onRow?.(row, i, cases.length);
  }
  return rows;
}

/** A plain-text table of workload rows. */
export function formatTable(rows: WorkloadRow[]): string {
  const head = ['op', 'backend', 'dtype', 'shape', 'check (err/tol)', 'median ms', 'GFLOP/s', 'GB/s'];
  const body = rows.map((r) => [
    r.op, r.backend, r.dtype, r.shape,
    r.error ? `ERROR: ${r.error}` : `${r.pass ? 'pass' : 'FAIL'} ${r.worst.toFixed(3)}`,
    Number.isFinite(r.medianMs) ? r.medianMs.toFixed(2) : '-',
    Number.isFinite(r.gflops) ? r.gflops.toFixed(1) : '-',
    Number.isFinite(r.gbps) ? r.gbps.toFixed(2) : '-',
  ]);
  const widths = head.map((h, c) => Math.max(h.length, ...body.map((r) => r[c].length)));
  const line = (cells: string[]) => cells.map((x, c) => (c >= 5 ? x.padStart(widths[c]) : x.padEnd(widths[c]))).join('  ');
  return [line(head), widths.map((w) => '-'.repeat(w)).join('  '), ...body.map(line)].join('\n');
}
