// How much two runs differ: this run's sdpa and paged times against an earlier results file
// (`npm run bench -- --compare=bench/results/<device>.json`), shape by shape, for every time both
// files hold (webinfer's backends, the portable variant, the peer). The rounds' spread says how much a
// shape moves within a run; this says how much it moves between runs.

interface SdpaLike { dtype: string; causal?: boolean; Lq: number; backend: string; medianMs?: number | null; portableMs?: number | null; spreadPct?: number | null }
interface PagedLike { batch: number; context: number; medianMs?: number | null; portableMs?: number | null; ortMs?: number | null; ortPagedMs?: number | null; spreadPct?: number | null }
export interface RunLike { date?: string; sdpa?: SdpaLike[]; paged?: PagedLike[] }

export interface CompareRow {
  what: string;
  beforeMs: number;
  afterMs: number;
  /** (after − before) / before, percent. */
  changePct: number;
}

export interface Comparison {
  rows: CompareRow[];
  /** Median and largest |changePct| over the rows. */
  medianAbsPct: number;
  maxAbsPct: number;
}

function times(r: RunLike): Map<string, number> {
  const m = new Map<string, number>();
  const put = (k: string, v: number | null | undefined) => {
    if (typeof v === 'number' && Number.isFinite(v) && v > 0) m.set(k, v);
  };
  for (const x of r.sdpa ?? []) {
    const shape = `sdpa ${x.dtype}${x.causal ? ' causal' : ''} L${x.Lq}`;
    put(`${shape} ${x.backend}`, x.medianMs);
    put(`${shape} ${x.backend} portable`, x.portableMs);
  }
  for (const x of r.paged ?? []) {
    const shape = `paged batch ${x.batch} context ${x.context}`;
    put(`${shape} webinfer`, x.medianMs);
    put(`${shape} portable`, x.portableMs);
    put(`${shape} ort`, x.ortMs);
    put(`${shape} ort paged`, x.ortPagedMs);
  }
  return m;
}

/** Every time both runs hold, in this run's order. */
export function compareRuns(before: RunLike, after: RunLike): Comparison {
  const b = times(before), a = times(after);
  const rows: CompareRow[] = [];
  for (const [what, afterMs] of a) {
    const beforeMs = b.get(what);
    if (beforeMs !== undefined) rows.push({ what, beforeMs, afterMs, changePct: (100 * (afterMs - beforeMs)) / beforeMs });
  }
  const abs = rows.map((r) => Math.abs(r.changePct)).sort((x, y) => x - y);
  const mid = abs.length % 2 ? abs[(abs.length - 1) / 2] : (abs[abs.length / 2 - 1] + abs[abs.length / 2]) / 2;
  return { rows, medianAbsPct: abs.length ? mid : NaN, maxAbsPct: abs.length ? abs[abs.length - 1] : NaN };
}
