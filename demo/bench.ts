// Benchmark: the suites of bench/ (the same functions `npm run bench` runs), called shape by shape so
// the page can show progress, then plotted with bench/plot.ts and offered as a JSON results file of
// the same layout the CLI writes.
import type { Engine } from 'webinfer';
import { measureCeilings, type Ceilings } from '../bench/harness';
import { benchSdpaShape, mpsSdpaShapes, sdpaJson, type SdpaBenchRow } from '../bench/sdpa';
import { benchPagedDecode, llamaDecodeShapes, pagedJson, type PagedBenchRow } from '../bench/paged';
import { benchMlaDecode, deepseekDecodeShapes, mlaJson, type MlaBenchRow } from '../bench/mla';
import { plotResults, type ResultsFile } from '../bench/plot';
import type { AdapterReport } from './adapter';
import { el, fmt, nextFrame, sig, type Progress } from './ui';

export type Suite = 'sdpa' | 'paged' | 'mla';

export interface Preset {
  label: string;
  /** Scale of the ceiling kernels (1 fills a large GPU). */
  ceilingScale: number;
  samples: number;
  sdpaLengths: number[];
  /** Storage dtypes of the SDPA suite (default f32 and f16, as mps-sdpa). */
  sdpaDtypes?: string[];
  pagedBatches: number[];
  pagedContexts: number[];
  mlaHeads: number[];
  mlaBatches: number[];
  mlaContext: number;
  /** Smaller MLA dimensions than DeepSeek's (software adapters). */
  mlaSmall?: boolean;
}

export const PRESETS: Record<'quick' | 'standard' | 'issue', Preset> = {
  quick: {
    label: 'Quick: small shapes for software adapters (about a minute on SwiftShader)',
    ceilingScale: 1 / 64, samples: 3, sdpaLengths: [16, 32, 64], sdpaDtypes: ['f32'], pagedBatches: [1, 2], pagedContexts: [64, 256],
    mlaHeads: [4], mlaBatches: [1, 2], mlaContext: 64, mlaSmall: true,
  },
  standard: {
    label: 'Standard: real model shapes a laptop GPU runs in a few minutes',
    ceilingScale: 1 / 4, samples: 5, sdpaLengths: [512, 1024, 2048, 4096], pagedBatches: [1, 16], pagedContexts: [1024, 4096, 16384],
    mlaHeads: [16], mlaBatches: [1, 8], mlaContext: 4096,
  },
  issue: {
    label: 'Full: the shapes of the README tables (mps-sdpa, Llama-3-8B decode, DeepSeek MLA); long on anything but a large GPU',
    ceilingScale: 1, samples: 7, sdpaLengths: [1024, 2048, 4096, 8192], pagedBatches: [1, 16, 64], pagedContexts: [1024, 4096, 32768],
    mlaHeads: [16, 128], mlaBatches: [1, 8, 32], mlaContext: 4096,
  },
};

/** The results file: the layout `npm run bench` writes (bench/results/<device>.json), so the two compare. */
export interface DemoResults extends ResultsFile {
  adapter: AdapterReport;
  features: Engine['features'];
  limits: Engine['limits'];
  date: string;
  runtime: string;
  preset: string;
  [suite: string]: unknown;
}

export interface BenchTables {
  sdpa: HTMLTableSectionElement;
  paged: HTMLTableSectionElement;
  mla: HTMLTableSectionElement;
}

export async function runBenchmark(engine: Engine, report: AdapterReport, o: {
  preset: keyof typeof PRESETS; suites: Suite[]; progress: Progress; tables: BenchTables;
}): Promise<DemoResults> {
  const p = PRESETS[o.preset];
  const sdpaShapes = o.suites.includes('sdpa') ? mpsSdpaShapes(p.sdpaLengths).filter((s) => !p.sdpaDtypes || p.sdpaDtypes.includes(s.dtype)) : [];
  const pagedShapes = o.suites.includes('paged') ? llamaDecodeShapes(p.pagedBatches, p.pagedContexts) : [];
  const mlaShapes = o.suites.includes('mla')
    ? deepseekDecodeShapes(p.mlaHeads, p.mlaBatches, p.mlaContext).map((s) => (p.mlaSmall ? { ...s, L: 128, P: 16, R: 16, V: 16, bs: 16 } : s))
    : [];
  const total = 1 + sdpaShapes.length + pagedShapes.length + mlaShapes.length;
  let done = 0;
  const step = async (text: string) => { o.progress.set(done, total, `step ${done + 1} of ${total}: ${text}`); await nextFrame(); };
  for (const t of Object.values(o.tables)) t.replaceChildren();

  const deviceName = [report.description, report.vendor, report.architecture].filter(Boolean).join(' / ') || 'unknown adapter';
  await step('measuring the ceilings (f32 FMA rate, copy and read bandwidth)');
  const ceilings = await measureCeilings(engine, p.ceilingScale);
  done++;
  const result: DemoResults = {
    device: deviceName, adapter: report, features: engine.features, limits: engine.limits, date: new Date().toISOString(),
    runtime: `browser: ${navigator.userAgent}`, preset: o.preset, ceilings,
  };

  if (sdpaShapes.length) {
    const rows: SdpaBenchRow[] = [];
    for (const s of sdpaShapes) {
      await step(`dense SDPA ${s.dtype} L${s.Lq}${s.causal ? ' causal' : ''}, flash and naive`);
      const r = await benchSdpaShape(engine, s, ['flash', 'naive'], ceilings, { samples: p.samples });
      rows.push(...r);
      o.tables.sdpa.append(sdpaRow(r));
      done++;
    }
    result.sdpa = rows.map(sdpaJson);
  }
  if (pagedShapes.length) {
    const rows: PagedBenchRow[] = [];
    for (const s of pagedShapes) {
      await step(`paged decode batch ${s.batch}, context ${s.context}`);
      const r = await benchPagedDecode(engine, s, ceilings, p.samples);
      rows.push(r);
      o.tables.paged.append(pagedRow(r));
      done++;
    }
    result.paged = rows.map(pagedJson);
  }
  if (mlaShapes.length) {
    const rows: MlaBenchRow[] = [];
    for (const s of mlaShapes) {
      await step(`MLA decode N${s.N} batch ${s.batch} context ${s.context}`);
      const r = await benchMlaDecode(engine, s, ceilings, p.samples);
      rows.push(r);
      o.tables.mla.append(mlaRow(r));
      done++;
    }
    result.mla = rows.map(mlaJson);
  }
  return result;
}

function checkCell(pass: boolean, worst: number, error?: string): HTMLTableCellElement {
  if (error) return el('td', { class: error.startsWith('skipped') ? 'absent' : 'fail', 'data-result': error.startsWith('skipped') ? 'skipped' : 'fail' }, error);
  return el('td', { class: pass ? 'pass' : 'fail', 'data-result': pass ? 'pass' : 'fail' }, `${pass ? 'pass' : 'FAIL'} ${Number.isFinite(worst) ? worst.toFixed(3) : 'NaN/Inf'}`);
}

const num = (s: string) => el('td', { class: 'num' }, s);

function sdpaRow(r: SdpaBenchRow[]): HTMLTableRowElement {
  const [f, n] = r;
  const speedup = (n.timing?.medianMs ?? NaN) / (f.timing?.medianMs ?? NaN);
  const bad = r.find((x) => x.error || !x.pass);
  return el('tr', {},
    el('td', {}, f.shape.dtype), el('td', {}, f.shape.causal ? 'yes' : 'no'), num(String(f.shape.Lq)),
    num(sig(f.timing?.medianMs)), num(sig(f.tflops * 1000)), num(fmt(f.pctFma, 1)),
    num(sig(n.timing?.medianMs)), num(sig(n.tflops * 1000)), num(`${fmt(speedup, 1)}×`),
    checkCell(!bad, Math.max(f.worst, n.worst), bad?.error));
}

function pagedRow(r: PagedBenchRow): HTMLTableRowElement {
  return el('tr', {},
    num(String(r.shape.batch)), num(String(r.shape.context)), num((r.kvBytes / 1e6).toFixed(1)),
    num(sig(r.timing?.medianMs)), num(sig(r.gbs)), num(fmt(r.pctCopy, 1)),
    checkCell(r.pass, r.worst, r.error));
}

function mlaRow(r: MlaBenchRow): HTMLTableRowElement {
  const a = r.absorbed?.medianMs, u = r.unabsorbed?.medianMs;
  return el('tr', {},
    num(String(r.shape.N)), num(String(r.shape.batch)), num(String(r.shape.context)),
    num(sig(a)), num(fmt(r.pctRoofline, 1)), num(sig(u)), num(`${fmt((u ?? NaN) / (a ?? NaN), 1)}×`),
    checkCell(r.pass, r.worst, r.error));
}

/** A line needs this many distinct x values to say anything: two points are a segment, and under a
 *  ceiling far above them (a software adapter's) a flat one on the x axis. Fewer: the table alone. */
export const MIN_PLOT_POINTS = 3;

/** Below this fraction of its ceiling a throughput line lies on the x axis of a chart that reaches the ceiling. */
const FLAT_FRACTION = 0.05;

/** Each suite's x axis in the plots (bench/plot.ts): SDPA against length, paged against context, MLA against batch. */
const PLOT_AXES = {
  sdpa: { x: (r: Record<string, unknown>) => r.Lq, what: 'lengths' },
  paged: { x: (r: Record<string, unknown>) => r.context, what: 'contexts' },
  mla: { x: (r: Record<string, unknown>) => r.batch, what: 'batch sizes' },
} as const;

/**
 * Draws the plots of a results file into `root` (SVG made by bench/plot.ts from numbers only), for the
 * suites with at least MIN_PLOT_POINTS distinct x values; `note` says which suites are tables only.
 */
export function renderPlots(root: HTMLElement, note: HTMLElement, result: DemoResults): number {
  root.replaceChildren();
  const plotted: DemoResults = { ...result };
  const tablesOnly: string[] = [];
  for (const [suite, axis] of Object.entries(PLOT_AXES)) {
    const rows = result[suite] as Record<string, unknown>[] | undefined;
    if (!rows?.length) continue;
    const xs = new Set(rows.map(axis.x)).size;
    if (xs >= MIN_PLOT_POINTS) continue;
    delete plotted[suite];
    tablesOnly.push(`${suite === 'sdpa' ? 'dense SDPA' : suite === 'paged' ? 'paged decode' : 'MLA decode'} (${xs} ${axis.what})`);
  }
  const plots = plotResults(plotted);
  // A chart's y axis reaches its ceiling line: measured values far below it (a software adapter's) lie
  // flat on the x axis, so such a chart is left out too.
  const flat: string[] = [];
  const maxOf = (rows: Record<string, unknown>[] | undefined, k: string) => Math.max(0, ...(rows ?? []).map((r) => Number(r[k])).filter(Number.isFinite));
  for (const [name, what, peak, ceiling, unit, scale] of [
    ['sdpa-throughput.svg', 'dense SDPA throughput', maxOf(plotted.sdpa, 'tflops'), result.ceilings.fmaTflops, 'GFLOP/s', 1000],
    ['paged-decode.svg', 'paged decode bandwidth', maxOf(plotted.paged, 'gbs'), result.ceilings.copyGBs, 'GB/s', 1],
  ] as const) {
    if (!plots[name] || !(peak < FLAT_FRACTION * ceiling)) continue;
    delete plots[name];
    flat.push(`${what} (at most ${sig(peak * scale)} ${unit}, ${fmt((100 * peak) / ceiling, 1)}% of the ceiling this run measured)`);
  }
  const notes = [
    tablesOnly.length ? `Not plotted, too few points for a line (a plot needs ${MIN_PLOT_POINTS} or more): ${tablesOnly.join(', ')}.` : '',
    flat.length ? `Not plotted, a flat line under its ceiling: ${flat.join(', ')}.` : '',
  ].filter(Boolean);
  note.hidden = !notes.length;
  note.textContent = notes.length ? `${notes.join(' ')} Their numbers are in the tables.` : '';
  const captions: Record<string, string> = {
    'sdpa-throughput.svg': 'Dense SDPA throughput against sequence length, flash (solid) and naive (dashed), under the f32 FMA ceiling measured in this run.',
    'sdpa-speedup.svg': 'How many times faster the flash kernel is than the naive three-pass kernel.',
    'paged-decode.svg': 'Paged decode: GB/s of K/V read against context length, under the copy bandwidth measured in this run.',
    'mla-decode.svg': 'MLA decode: milliseconds per call, absorbed (solid) against unabsorbed (dashed).',
  };
  for (const [name, svg] of Object.entries(plots)) {
    const fig = el('figure', { 'data-plot': name });
    // The SVG text comes from bench/plot.ts, which escapes every label it writes.
    fig.innerHTML = svg;
    fig.append(el('figcaption', {}, captions[name] ?? name));
    root.append(fig);
  }
  return Object.keys(plots).length;
}

export function resultsJson(r: DemoResults): string {
  return `${JSON.stringify(r, null, 1)}\n`;
}

export function resultsFileName(r: DemoResults): string {
  const slug = r.device.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-|-$/g, '') || 'unknown';
  return `webinfer-bench-${slug}-${r.date.slice(0, 10)}.json`;
}

export type { Ceilings };
