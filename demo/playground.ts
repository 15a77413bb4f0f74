// Playground: one operation on a shape of the user's choosing, checked against the float64 reference
// and timed, through the same functions the workload and the benchmark use.
import type { Engine, SdpaBackend } from 'webinfer';
import { runSdpaCase, type SdpaShape } from '../bench/workload';
import { benchSdpaShape } from '../bench/sdpa';
import { benchPagedDecode } from '../bench/paged';
import { benchMlaDecode } from '../bench/mla';
import type { Ceilings } from '../bench/harness';
import { el, fmt, sig } from './ui';

export type Op = 'sdpa' | 'paged' | 'mla';

interface Field { key: string; label: string; value: number | string | boolean; options?: string[]; min?: number; title?: string }

export const FIELDS: Record<Op, Field[]> = {
  sdpa: [
    { key: 'backend', label: 'kernel', value: 'auto', options: ['auto', 'flash', 'naive'] },
    { key: 'dtype', label: 'dtype', value: 'f16', options: ['f32', 'f16', 'bf16'] },
    { key: 'B', label: 'batch B', value: 1, min: 1 },
    { key: 'Hq', label: 'query heads Hq', value: 8, min: 1 },
    { key: 'Hkv', label: 'KV heads Hkv', value: 2, min: 1, title: 'must divide Hq (GQA)' },
    { key: 'Lq', label: 'query length Lq', value: 256, min: 1 },
    { key: 'Lk', label: 'key length Lk', value: 256, min: 1 },
    { key: 'D', label: 'head size D', value: 64, min: 1 },
    { key: 'Dv', label: 'value head size Dv', value: 64, min: 1 },
    { key: 'causal', label: 'causal', value: true },
    { key: 'softcap', label: 'softcap (0: off)', value: 0, min: 0 },
    { key: 'slidingWindow', label: 'sliding window (0: off)', value: 0, min: 0 },
  ],
  paged: [
    { key: 'batch', label: 'sequences', value: 4, min: 1 },
    { key: 'context', label: 'context (tokens)', value: 1024, min: 1 },
    { key: 'Hq', label: 'query heads Hq', value: 32, min: 1 },
    { key: 'Hkv', label: 'KV heads Hkv', value: 8, min: 1 },
    { key: 'D', label: 'head size D', value: 128, min: 8 },
    { key: 'bs', label: 'block size', value: 16, min: 1 },
  ],
  mla: [
    { key: 'N', label: 'heads N', value: 16, min: 1 },
    { key: 'batch', label: 'sequences', value: 2, min: 1 },
    { key: 'context', label: 'context (tokens)', value: 512, min: 1 },
    { key: 'L', label: 'latent rank L', value: 512, min: 8 },
    { key: 'P', label: 'nope head size P', value: 128, min: 8 },
    { key: 'R', label: 'rope head size R', value: 64, min: 8 },
    { key: 'V', label: 'value head size V', value: 128, min: 8 },
    { key: 'bs', label: 'block size', value: 64, min: 1 },
  ],
};

export const OP_LABELS: Record<Op, string> = {
  sdpa: 'Dense attention (sdpa)',
  paged: 'Paged decode (pagedAttention, f16 cache)',
  mla: 'MLA decode (absorbed, f16 latent cache)',
};

/** Builds the inputs of one operation's form. */
export function renderFields(root: HTMLElement, op: Op): void {
  root.replaceChildren();
  for (const f of FIELDS[op]) {
    const id = `pg-${f.key}`;
    let input: HTMLInputElement | HTMLSelectElement;
    if (f.options) {
      input = el('select', { id, name: f.key });
      for (const o of f.options) input.append(el('option', { value: o, selected: o === f.value }, o));
    } else if (typeof f.value === 'boolean') {
      input = el('input', { id, name: f.key, type: 'checkbox', checked: f.value });
    } else {
      input = el('input', { id, name: f.key, type: 'number', value: String(f.value), min: f.min, step: 1 });
    }
    root.append(el('label', { for: id, title: f.title, class: typeof f.value === 'boolean' ? 'check' : '' }, `${f.label} `, input));
  }
}

function read(root: HTMLElement, op: Op): Record<string, number | string | boolean> {
  const out: Record<string, number | string | boolean> = {};
  for (const f of FIELDS[op]) {
    const input = root.querySelector<HTMLInputElement | HTMLSelectElement>(`#pg-${f.key}`);
    if (!input) throw new Error(`playground: no input for ${f.key}`);
    if (f.options) out[f.key] = input.value;
    else if (typeof f.value === 'boolean') out[f.key] = (input as HTMLInputElement).checked;
    else {
      const v = Number(input.value);
      if (!Number.isInteger(v) || v < (f.min ?? 0)) throw new Error(`${f.label}: expected an integer ≥ ${f.min ?? 0}, got '${input.value}'`);
      out[f.key] = v;
    }
  }
  return out;
}

export interface PlaygroundResult {
  what: string;
  ms: number;
  /** Extra timing (MLA: the unabsorbed path). */
  ms2?: { label: string; ms: number };
  gflops?: number;
  gbs?: number;
  pct?: { label: string; value: number };
  worst: number;
  pass: boolean;
  method: string;
  error?: string;
}

/** The float64 reference runs on the CPU, in this page: keep its work to about a second. */
const FULL_REFERENCE_MACS = 2e8;

export async function runPlayground(engine: Engine, root: HTMLElement, op: Op, ceilings: Ceilings | null): Promise<PlaygroundResult> {
  const v = read(root, op);
  const c: Ceilings = ceilings ?? { fmaTflops: NaN, copyGBs: NaN, readGBs: NaN };
  if (op === 'sdpa') {
    const s: SdpaShape = {
      B: v.B as number, Hq: v.Hq as number, Hkv: v.Hkv as number, Lq: v.Lq as number, Lk: v.Lk as number, D: v.D as number, Dv: v.Dv as number,
      dtype: v.dtype as SdpaShape['dtype'], causal: v.causal as boolean,
      softcap: (v.softcap as number) || undefined, slidingWindow: (v.slidingWindow as number) || undefined,
    };
    const backend = v.backend as SdpaBackend;
    const what = `sdpa ${backend} ${s.dtype} B${s.B} Hq${s.Hq} Hkv${s.Hkv} Lq${s.Lq} Lk${s.Lk} D${s.D} Dv${s.Dv}`;
    const macs = s.B * s.Hq * s.Lq * s.Lk * (s.D + s.Dv);
    if (macs <= FULL_REFERENCE_MACS) {
      // Small enough to check every element against the reference (timed with the wall clock).
      const r = await runSdpaCase(engine, s, backend, { samples: 5 });
      return { what, ms: r.medianMs, gflops: r.gflops, gbs: r.gbps, worst: r.worst, pass: r.pass && !r.error, error: r.error,
        pct: { label: '% of FMA ceiling', value: (100 * r.gflops) / (c.fmaTflops * 1000) },
        method: 'every output element checked; wall clock around a drained queue' };
    }
    if (s.Lq < 32 || (s.slidingWindow && !s.causal)) {
      throw new Error(`the float64 reference of this shape (${(macs / 1e9).toFixed(1)} G multiply-adds) would block the page for long; `
        + 'reduce B, Hq or the lengths (large shapes are checked on slices of rows, which needs Lq ≥ 32 and a window only with causal)');
    }
    const [r] = await benchSdpaShape(engine, s, [backend], c, { samples: 5 });
    return { what, ms: r.timing?.medianMs ?? NaN, gflops: r.tflops * 1000, gbs: r.gbs, worst: r.worst, pass: r.pass && !r.error, error: r.error,
      pct: { label: '% of FMA ceiling', value: r.pctFma },
      method: `the first and last 16 query rows of heads 0 and Hq−1 checked; ${r.timing?.method === 'timestamp' ? 'GPU timestamps' : 'wall clock'}, median of 5` };
  }
  if (op === 'paged') {
    const s = { batch: v.batch as number, context: v.context as number, Hq: v.Hq as number, Hkv: v.Hkv as number, D: v.D as number, bs: v.bs as number };
    const r = await benchPagedDecode(engine, s, c, 5);
    return { what: `paged decode batch ${s.batch} context ${s.context} Hq${s.Hq} Hkv${s.Hkv} D${s.D} block ${s.bs}`,
      ms: r.timing?.medianMs ?? NaN, gbs: r.gbs, worst: r.worst, pass: r.pass && !r.error, error: r.error,
      pct: { label: '% of copy bandwidth', value: r.pctCopy },
      method: `sequence 0 checked; ${r.timing?.method === 'timestamp' ? 'GPU timestamps' : 'wall clock'}; GB/s of K/V read` };
  }
  const s = { N: v.N as number, batch: v.batch as number, context: v.context as number, L: v.L as number, P: v.P as number, R: v.R as number, V: v.V as number, bs: v.bs as number };
  const r = await benchMlaDecode(engine, s, c, 5);
  return { what: `MLA decode N${s.N} batch ${s.batch} context ${s.context} L${s.L} P${s.P} R${s.R} V${s.V} block ${s.bs}`,
    ms: r.absorbed?.medianMs ?? NaN, ms2: { label: 'unabsorbed ms', ms: r.unabsorbed?.medianMs ?? NaN },
    gflops: r.tflops * 1000, gbs: r.gbs, worst: r.worst, pass: r.pass && !r.error, error: r.error,
    pct: { label: '% of roofline', value: r.pctRoofline },
    method: `sequence 0 checked; ${r.absorbed?.method === 'timestamp' ? 'GPU timestamps' : 'wall clock'}` };
}

export function renderPlaygroundResult(tbody: HTMLTableSectionElement, r: PlaygroundResult, haveCeilings: boolean): void {
  const pct = r.pct && Number.isFinite(r.pct.value) ? `${fmt(r.pct.value, 1)} (${r.pct.label})`
    : haveCeilings ? '–' : 'run the Benchmark once to measure the ceilings';
  const check = el('td', { id: 'pg-check', class: r.pass ? 'pass' : 'fail', 'data-result': r.pass ? 'pass' : 'fail' },
    r.error ? `FAIL: ${r.error}` : `${r.pass ? 'pass' : 'FAIL'} ${Number.isFinite(r.worst) ? r.worst.toFixed(3) : 'NaN/Inf'}`);
  const tr = el('tr', {},
    el('td', {}, r.what),
    el('td', { class: 'num', id: 'pg-ms' }, sig(r.ms)),
    el('td', { class: 'num' }, r.ms2 ? sig(r.ms2.ms) : '–'),
    el('td', { class: 'num' }, sig(r.gflops)),
    el('td', { class: 'num' }, sig(r.gbs)),
    el('td', {}, pct),
    check,
    el('td', { class: 'detail' }, r.method));
  tbody.prepend(tr);
}
