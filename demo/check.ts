// Check: the library's own test cases (tests/cases, the ones every runner uses) in this page, each
// against the float64 reference, with the worst error per case as a fraction of the SPEC §6 tolerance.
import { createEngine, type Engine } from 'webinfer';
import { allCases, type TestCase } from '../tests/cases/index';
import { closeObserver } from '../tests/cases/harness';
import { el, errorMessage, nextFrame, type Progress } from './ui';
import { sliceNames } from './slice';

export { sliceNames };

/** A file of the shared folder this page does not have: the case that wanted it needs the test suite
 *  (which reads ../shared beside the checkout), not a failure of the GPU or the library. */
export class MissingFixture extends Error {
  constructor(readonly path: string, why: string) {
    super(`${path} is not shipped with this page (${why}); the test suite reads it from ../shared beside the checkout`);
    this.name = 'MissingFixture';
  }
}

let manifest: Promise<Set<string> | null> | null = null;

/** The files the demo build copied beside the page (shared/manifest.json, written by vite.demo.config.ts),
 *  or null where the page is served without one. */
export function shippedFiles(): Promise<Set<string> | null> {
  manifest ??= fetch('./shared/manifest.json').then(async (r) => {
    if (!r.ok || !/json/.test(r.headers.get('content-type') ?? '')) return null;
    return new Set((await r.json() as { files: string[] }).files);
  }).catch(() => null);
  return manifest;
}

/**
 * A file the demo build copied from the shared folder (goldens, the cases' fixtures), fetched beside the
 * page. A file that is not there is a MissingFixture naming it, also where the server answers a missing
 * path with its index page (a single-page fallback, as `vite preview` does) rather than with a 404.
 */
export async function fetchShared(path: string): Promise<Uint8Array> {
  const files = await shippedFiles();
  if (files && !files.has(path)) throw new MissingFixture(path, 'the demo build found no such file in ../shared');
  let r: Response;
  try {
    r = await fetch(`./shared/${path}`);
  } catch (e) {
    throw new Error(`${path}: could not be fetched (${errorMessage(e)})`);
  }
  if (r.status === 404) throw new MissingFixture(path, 'the server answered 404');
  if (!r.ok) throw new Error(`${path}: HTTP ${r.status}${r.statusText ? ` ${r.statusText}` : ''}`);
  if (/^text\/html/i.test(r.headers.get('content-type') ?? '') && !/\.html?$/.test(path)) {
    throw new MissingFixture(path, 'the server answered with an HTML page instead');
  }
  return new Uint8Array(await r.arrayBuffer());
}

/** 'slice', 'all', one family of cases (`family:models`, the name's prefix before ' › '), or the cases
 *  whose name contains a text (`match:rope`: the page's ?case= parameter, a link to one case). */
export type CheckScope = 'slice' | 'all' | `family:${string}` | `match:${string}`;

/** A case's family: its name's prefix ('sdpa flash', 'linear', 'models', …). */
export const familyOf = (name: string) => name.split(' › ')[0];

/** Every family of cases, in the order the runners list them, with how many cases each has. */
export function families(): [string, number][] {
  const n = new Map<string, number>();
  for (const c of allCases) n.set(familyOf(c.name), (n.get(familyOf(c.name)) ?? 0) + 1);
  return [...n];
}

export function casesFor(scope: CheckScope, subgroups: boolean): { cases: TestCase[]; missing: string[] } {
  if (scope === 'all') return { cases: allCases, missing: [] };
  if (scope.startsWith('family:')) return { cases: allCases.filter((c) => familyOf(c.name) === scope.slice('family:'.length)), missing: [] };
  if (scope.startsWith('match:')) return { cases: allCases.filter((c) => c.name.includes(scope.slice('match:'.length))), missing: [] };
  const byName = new Map(allCases.map((c) => [c.name, c]));
  const names = sliceNames(subgroups);
  return { cases: names.flatMap((n) => byName.get(n) ?? []), missing: names.filter((n) => !byName.has(n)) };
}

export interface CaseResult {
  name: string;
  pass: boolean;
  /** The case needs data this page does not ship (MissingFixture): neither a pass nor a failure here. */
  needsSuite?: boolean;
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
      r.needsSuite = e instanceof MissingFixture;
    } finally {
      closeObserver.onCompare = undefined;
    }
    r.ms = performance.now() - c0;
    if (r.comparisons) r.worst = worst;
    results.push(r);
    opts.table.append(resultRow(r, results.length));
  }
  const failed = results.filter((r) => !r.pass && !r.needsSuite).length;
  const elsewhere = results.filter((r) => r.needsSuite).length;
  const secs = ((performance.now() - t0) / 1000).toFixed(1);
  const rest = elsewhere ? `; ${elsewhere} need the test suite (their data is not shipped with this page)` : '';
  opts.progress.finish(failed ? `${failed} of ${total} cases FAILED${rest} (${secs} s)`
    : `${elsewhere ? `${total - elsewhere} of ${total}` : `all ${total}`} cases passed${rest} (${secs} s)`, failed ? 'fail' : 'pass');
  return results;
}

/** A case that passed with a comparison above its tolerance: SPEC §6's rule for sums whose f32
 *  arithmetic itself errs past the table (long dot products, large scores) accepted it. */
export const acceptedAbove = (r: CaseResult) => r.pass && r.worst !== undefined && r.worst > 1;

function resultRow(r: CaseResult, i: number): HTMLTableRowElement {
  const worstText = r.worst === undefined ? (r.pass ? 'exact' : '–') : Number.isFinite(r.worst) ? `${r.worst.toFixed(3)}${acceptedAbove(r) ? '*' : ''}` : 'NaN/Inf';
  const detail = r.error ?? r.notes.join(' ');
  const result = r.pass ? 'pass' : r.needsSuite ? 'needs-suite' : 'fail';
  return el('tr', { 'data-result': result, 'data-accepted': acceptedAbove(r) || undefined },
    el('td', { class: 'num' }, String(i)),
    el('td', {}, r.name),
    el('td', { class: r.pass ? 'pass' : r.needsSuite ? 'absent' : 'fail' }, r.pass ? 'pass' : r.needsSuite ? 'needs the test suite' : 'FAIL'),
    el('td', { class: 'num', title: r.worst === undefined ? 'this case compares exactly (bit patterns, error messages), not within a tolerance'
      : `worst |err| / (atol + rtol·|ref|) over ${r.comparisons} comparisons${acceptedAbove(r) ? '; above 1, within twice the error of a plain f32 implementation + 1e-5 (SPEC §6)' : ''}` }, worstText),
    el('td', { class: 'num' }, (r.ms / 1000).toFixed(2)),
    el('td', { class: r.error && !r.needsSuite ? 'detail error' : 'detail' }, detail));
}
