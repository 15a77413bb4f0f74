// Check: the library's own test cases (tests/cases, the ones every runner uses) in this page, each
// against the float64 reference, with the worst error per case as a fraction of the SPEC §6 tolerance.
import { createEngine, type Engine } from 'webinfer';
import { allCases, type TestCase } from '../tests/cases/index';
import { closeObserver } from '../tests/cases/harness';
import { el, errorMessage, nextFrame, type Progress } from './ui';

/** A file the demo build copied from the shared folder (the goldens), fetched beside the page. */
export async function fetchShared(path: string): Promise<Uint8Array> {
  const r = await fetch(`./shared/${path}`);
  if (!r.ok) throw new Error(`${path}: HTTP ${r.status} (the demo build copies ../shared/goldens into dist-demo/shared/)`);
  return new Uint8Array(await r.arrayBuffer());
}

/**
 * A representative slice of the SPEC §6 matrix for every operation, small enough for a software
 * adapter (about a minute on SwiftShader): dtypes and the tensor round trip, dense SDPA on both
 * kernels (lengths, GQA, options, masks, extremes, f16/bf16), merging, the paged cache (writes, mixed
 * batches, block sizes, split-KV decode, the decode kernel this adapter has) and MLA (cache rows, absorbed decode, prefill, sparse decode).
 * The flash cases run the variant this adapter has ('subgroup' needs the subgroups feature).
 */
export function sliceNames(subgroups: boolean): string[] {
  const v = subgroups ? 'subgroup' : 'portable';
  return [
    "engine › exposes the adapter's features and requests its limits",
    'tensor › f16 / bf16 / fp8e4m3 from bit patterns and from Float32Array (converted RNE on upload)',
    'tensor › known bit patterns survive the GPU round trip (NaN, ±0, subnormals, fp8 saturation)',
    'validation › sdpa(): tensor ranks, shapes and dtypes',
    'sdpa naive › lengths 1, 2, 3, powers of two and odd (Lq == Lk, causal and not)',
    'sdpa naive › softcap, ALiBi and learned sinks, alone and combined',
    'sdpa naive › bool masks, broadcast from [Lk], [Lq,Lk], [B,1,Lq,Lk], [1,Hq,1,Lk]',
    'sdpa naive › fully masked rows give out 0 and lse -inf, also with sinks',
    'sdpa naive › bf16 storage',
    `sdpa flash › ${v}: GQA ratios 1, 2, 4, 7, 8 (causal)`,
    `sdpa flash › ${v}: lengths 1, 2, 3, powers of two and odd (Lq == Lk, causal and not)`,
    `sdpa flash › ${v}: sliding window, with and without causal, Lq < Lk`,
    `sdpa flash › ${v}: softcap, ALiBi and learned sinks, alone and combined`,
    `sdpa flash › ${v}: fully masked rows give out 0 and lse -inf, also with sinks`,
    `sdpa flash › ${v}: numerical extremes: q/k standard deviation 10 and 1e-4, no NaN or Inf`,
    `sdpa flash › ${v}: f16 storage (loads through unpack2x16float, no shader-f16 needed)`,
    'sdpa flash › flash equals naive on the same inputs (GQA, causal, mask, sinks)',
    'merge › random states with empty ones (-inf, +inf, both), f32 / f16 / bf16, odd sizes',
    'merge › merging the states of two key halves equals attention over all keys',
    'paged › reshapeAndCache stores exactly the rounded rows (f32, f16, bf16, fp8 with scales), skips slot -1',
    'paged › mixed batch: decode, prefill and chunked prefill with context, shuffled blocks, padding tokens',
    'paged › block sizes 1, 16, 32, 64, 128 and sequences crossing block boundaries',
    'paged › split-KV decode (partitions merged by LSE) equals unsplit, with sinks and a window',
    `paged › ${v} decode kernel: GQA 8 and 7, D 128/64, Dv != D, f32/f16/fp8 caches, long contexts split and merged`,
    'mla › cacheWrite stores [kv_c | k_pe] rows in f32, f16, bf16 and fp8_ds_mla (656-byte rows for L 512, R 64)',
    'mla › absorbed decode equals the reference and unabsorbed attention (f32, f16, bf16 caches)',
    'mla › prefill with cached context in chunks, merged by LSE, equals the reference (f32, fp8_ds_mla)',
    'mla › sparse decode: top-k request-local positions (-1, out of range, duplicates, none valid) equal the reference',
  ];
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
 * workgroup storage is capped at 8 KiB, as the test suites do there, so its pipelines compile fast.
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
