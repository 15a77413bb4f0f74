// Check: the library's own test cases (tests/cases, the ones every runner uses) in this page, each
// against the float64 reference, with the worst error per case as a fraction of the SPEC §6 tolerance.
import { createEngine, type Engine } from 'webinfer';
import { allCases, type TestCase } from '../tests/cases/index';
import { closeObserver } from '../tests/cases/harness';
import { el, errorMessage, nextFrame, type Progress } from './ui';
import { sliceNames } from './slice';

export { sliceNames };

/** A file the demo build copied from the shared folder (the goldens), fetched beside the page. */
export async function fetchShared(path: string): Promise<Uint8Array> {
  const r = await fetch(`./shared/${path}`);
  if (!r.ok) throw new Error(`${path}: HTTP ${r.status} (the demo build copies ../shared/goldens into dist-demo/shared/)`);
  return new Uint8Array(await r.arrayBuffer());
}

export type CheckScope = 'slice' | 'all';

export function casesFor(scope: CheckScope, subgroups: boolean): { cases: TestCase[]; missing: string[] } {
  if (scope === 'all') return { cases: allCases, missing: [] };
  const byName = new Map(allCases.map((c) => [c.name, c]));
  const names = sliceNames(subgroups);
  return { cases: names.flatMap((n) => byName.get(n) ?? []), missing: names.filter((n) => !byName.has(n)) };
}

export interface CaseResult {
  name: string;
  pass: boolean;
  /** Worst error over the case's tolerance comparisons, as a fraction of the tolerance; undefined
   *  when the case compares exactly (bit patterns, error messages) instead. */
  worst?: number;
  comparisons: number;
  ms: number;
  error?: string;
  notes: string[];
}

let checkEngine: Engine | null = null;

/**
 * The engine the cases run on: the page's device, with output poisoning (an unwritten element reads
 * NaN and fails) as every runner of the cases uses. On a software adapter the flash kernel's
 * workgroup storage is capped at 8 KiB, as the test suites do there, so its pipelines compile fast
 * (the paged decode planner then takes a smaller workgroup: Firefox, without subgroups, needs it).
 */
async function engineForCases(base: Engine, software: boolean, onWarning: (m: string) => void): Promise<Engine> {
  if (!checkEngine) {
    checkEngine = await createEngine({ device: base.device, poisonOutputs: true, onWarning });
    if (software) checkEngine.tuning.flashSmemBytes = 8192;
  }
  return checkEngine;
}

export async function runCheck(base: Engine, opts: {
  scope: CheckScope; software: boolean; progress: Progress; table: HTMLTableSectionElement;
  onWarning: (m: string) => void;
}): Promise<CaseResult[]> {
  const { cases, missing } = casesFor(opts.scope, base.features.subgroups);
  const engine = await engineForCases(base, opts.software, opts.onWarning);
  const results: CaseResult[] = [];
  opts.table.replaceChildren();
  const total = cases.length + missing.length;
  for (const name of missing) {
    // A renamed case must not silently shrink the check.
    const r: CaseResult = { name, pass: false, comparisons: 0, ms: 0, error: 'no test case has this name (was it renamed in tests/cases?)', notes: [] };
    results.push(r);
    opts.table.append(resultRow(r, results.length));
  }
  const t0 = performance.now();
  for (const c of cases) {
    opts.progress.set(results.length, total, `case ${results.length + 1} of ${total}: ${c.name}`);
    await nextFrame();
    const r: CaseResult = { name: c.name, pass: false, comparisons: 0, ms: 0, notes: [] };
    let worst = 0;
    closeObserver.onCompare = (_what, w) => { worst = Math.max(worst, w); r.comparisons++; };
    const c0 = performance.now();
    try {
      await c.run({
        engine,
        runtime: 'browser-demo',
        newEngine: (o) => createEngine({ ...o, poisonOutputs: true }),
        note: (m) => r.notes.push(m),
        fixture: fetchShared,
      });
      r.pass = true;
    } catch (e) {
      r.error = errorMessage(e);
    } finally {
      closeObserver.onCompare = undefined;
    }
    r.ms = performance.now() - c0;
    if (r.comparisons) r.worst = worst;
    results.push(r);
    opts.table.append(resultRow(r, results.length));
  }
  const failed = results.filter((r) => !r.pass).length;
  const secs = ((performance.now() - t0) / 1000).toFixed(1);
  opts.progress.finish(failed ? `${failed} of ${total} cases FAILED (${secs} s)` : `all ${total} cases passed (${secs} s)`, failed ? 'fail' : 'pass');
  return results;
}

function resultRow(r: CaseResult, i: number): HTMLTableRowElement {
  const worstText = r.worst === undefined ? (r.pass ? 'exact' : '–') : Number.isFinite(r.worst) ? r.worst.toFixed(3) : 'NaN/Inf';
  const detail = r.error ?? r.notes.join(' ');
  return el('tr', { 'data-result': r.pass ? 'pass' : 'fail' },
    el('td', { class: 'num' }, String(i)),
    el('td', {}, r.name),
    el('td', { class: r.pass ? 'pass' : 'fail' }, r.pass ? 'pass' : 'FAIL'),
    el('td', { class: 'num', title: r.worst === undefined ? 'this case compares exactly (bit patterns, error messages), not within a tolerance'
      : `worst |err| / (atol + rtol·|ref|) over ${r.comparisons} comparisons` }, worstText),
    el('td', { class: 'num' }, (r.ms / 1000).toFixed(2)),
    el('td', { class: r.error ? 'detail error' : 'detail' }, detail));
}
