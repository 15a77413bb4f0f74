// The demo page: finds WebGPU, describes the adapter, and wires the Check, Benchmark and Playground
// sections. Every failure is shown in the page; nothing assumes subgroups or shader-f16.
import type { Engine } from 'webinfer';
import { renderAdapter, start, type AdapterReport } from './adapter';
import { PRESETS, renderPlots, resultsFileName, resultsJson, runBenchmark, type Ceilings, type DemoResults, type Suite } from './bench';
import { runCheck, sliceNames, type CheckScope } from './check';
import { FIELDS, OP_LABELS, renderFields, renderPlaygroundResult, runPlayground, type Op } from './playground';
import { byId, el, errorMessage, fmt, Progress, registerGpuButton, runExclusive, setGpuReady, showError, showMessage } from './ui';

const pageError = byId('page-error');
function reportPageError(what: string, e: unknown): void {
  showError(pageError, what, e);
}
window.addEventListener('error', (ev) => reportPageError('unexpected error', ev.error ?? ev.message));
window.addEventListener('unhandledrejection', (ev) => reportPageError('unexpected error', ev.reason));

// ------------------------------------------------------------------------------------- warnings

const warnings: string[] = [];
function onWarning(m: string): void {
  warnings.push(m);
  byId('warnings-box').hidden = false;
  byId('warnings-count').textContent = String(warnings.length);
  byId('warnings').append(el('li', {}, m));
}

// ------------------------------------------------------------------------------------------ state

let engine: Engine | null = null;
let report: AdapterReport | null = null;
let lastResults: DemoResults | null = null;
let ceilings: Ceilings | null = null;

// ------------------------------------------------------------------------------------------ check

const checkRun = byId<HTMLButtonElement>('check-run');
registerGpuButton(checkRun);
const checkProgress = new Progress(byId<HTMLProgressElement>('check-progress'), byId('check-status'));
checkRun.addEventListener('click', () => void runExclusive(async () => {
  if (!engine || !report) return;
  const msg = byId('check-message');
  msg.hidden = true;
  checkProgress.reset();
  try {
    await runCheck(engine, {
      scope: byId<HTMLSelectElement>('check-scope').value as CheckScope, software: report.software, progress: checkProgress,
      table: byId<HTMLTableSectionElement>('check-rows'), onWarning,
    });
  } catch (e) {
    checkProgress.finish('the check could not run', 'fail');
    showError(msg, 'Check', e);
  }
}));

// -------------------------------------------------------------------------------------- benchmark

const benchRun = byId<HTMLButtonElement>('bench-run');
const benchCopy = byId<HTMLButtonElement>('bench-copy');
const benchDownload = byId<HTMLButtonElement>('bench-download');
registerGpuButton(benchRun);
const benchProgress = new Progress(byId<HTMLProgressElement>('bench-progress'), byId('bench-status'));
const presetSelect = byId<HTMLSelectElement>('bench-preset');
for (const [key, p] of Object.entries(PRESETS)) presetSelect.append(el('option', { value: key }, p.label));

benchRun.addEventListener('click', () => void runExclusive(async () => {
  if (!engine || !report) return;
  const msg = byId('bench-message');
  msg.hidden = true;
  const suites = (['sdpa', 'paged', 'mla'] as Suite[]).filter((s) => byId<HTMLInputElement>(`bench-${s}`).checked);
  if (!suites.length) {
    showMessage(msg, 'Choose at least one suite.', 'warn');
    return;
  }
  benchProgress.reset();
  benchCopy.disabled = benchDownload.disabled = true;
  const t0 = performance.now();
  try {
    const r = await runBenchmark(engine, report, {
      preset: presetSelect.value as keyof typeof PRESETS, suites, progress: benchProgress,
      tables: {
        sdpa: byId<HTMLTableSectionElement>('bench-sdpa-rows'), paged: byId<HTMLTableSectionElement>('bench-paged-rows'),
        mla: byId<HTMLTableSectionElement>('bench-mla-rows'),
      },
    });
    lastResults = r;
    ceilings = r.ceilings;
    byId('bench-ceilings').textContent = `Ceilings measured in this run: f32 FMA ${fmt(r.ceilings.fmaTflops * 1000, 1)} GFLOP/s, `
      + `copy ${fmt(r.ceilings.copyGBs, 1)} GB/s (read + write), read ${fmt(r.ceilings.readGBs, 1)} GB/s.`
      + (engine.features.timestampQuery ? ' Times are medians of GPU timestamps.' : ' No timestamp-query: times are wall clock around a drained queue.');
    const n = renderPlots(byId('plots'), r);
    byId<HTMLTextAreaElement>('bench-json').value = resultsJson(r);
    benchCopy.disabled = benchDownload.disabled = false;
    const bad = [...(r.sdpa ?? []), ...(r.paged ?? []), ...(r.mla ?? [])].filter((x) => {
      const row = x as { pass?: boolean; error?: string };
      return !row.pass && !row.error?.startsWith('skipped');
    }).length;
    const secs = ((performance.now() - t0) / 1000).toFixed(0);
    benchProgress.finish(bad ? `done in ${secs} s, but ${bad} shapes failed their check (see the tables)` : `done in ${secs} s: ${n} plots`, bad ? 'fail' : 'pass');
  } catch (e) {
    benchProgress.finish('the benchmark stopped', 'fail');
    showError(msg, 'Benchmark', e);
  }
}));

benchCopy.addEventListener('click', async () => {
  if (!lastResults) return;
  const text = resultsJson(lastResults);
  const status = byId('bench-share-status');
  try {
    await navigator.clipboard.writeText(text);
    status.textContent = 'Copied to the clipboard.';
  } catch {
    // No clipboard permission (or an insecure context): select the text for a manual copy instead.
    const box = byId<HTMLDetailsElement>('bench-json-box');
    box.open = true;
    const ta = byId<HTMLTextAreaElement>('bench-json');
    ta.focus();
    ta.select();
    const ok = document.execCommand?.('copy') ?? false;
    status.textContent = ok ? 'Copied to the clipboard.' : 'The browser refused clipboard access: the JSON below is selected, press ⌘C / Ctrl+C.';
  }
});

benchDownload.addEventListener('click', () => {
  if (!lastResults) return;
  const url = URL.createObjectURL(new Blob([resultsJson(lastResults)], { type: 'application/json' }));
  const a = el('a', { href: url, download: resultsFileName(lastResults) });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
  byId('bench-share-status').textContent = `Saved as ${resultsFileName(lastResults)}.`;
});

// ------------------------------------------------------------------------------------- playground

const pgRun = byId<HTMLButtonElement>('pg-run');
registerGpuButton(pgRun);
const opSelect = byId<HTMLSelectElement>('pg-op');
for (const op of Object.keys(FIELDS) as Op[]) opSelect.append(el('option', { value: op }, OP_LABELS[op]));
renderFields(byId('pg-fields'), 'sdpa');
opSelect.addEventListener('change', () => renderFields(byId('pg-fields'), opSelect.value as Op));

pgRun.addEventListener('click', () => void runExclusive(async () => {
  if (!engine) return;
  const msg = byId('pg-message');
  const status = byId('pg-status');
  msg.hidden = true;
  status.textContent = 'running…';
  delete status.dataset.state;
  try {
    const r = await runPlayground(engine, byId('pg-fields'), opSelect.value as Op, ceilings);
    renderPlaygroundResult(byId<HTMLTableSectionElement>('pg-rows'), r, !!ceilings);
    status.textContent = r.pass ? 'pass' : 'FAIL';
    status.dataset.state = r.pass ? 'pass' : 'fail';
  } catch (e) {
    status.textContent = 'error';
    status.dataset.state = 'error';
    showError(msg, 'Playground', e);
  }
}));

// ------------------------------------------------------------------------------------------- boot

async function boot(): Promise<void> {
  const status = byId('adapter-status');
  const s = await start(onWarning);
  if (!s.ok) {
    status.dataset.state = 'error';
    status.textContent = 'WebGPU is not available here, so nothing on this page can run.';
    showMessage(byId('adapter'), s.reason, 'error');
    for (const id of ['check-message', 'bench-message', 'pg-message']) showMessage(byId(id), 'Needs WebGPU (see the Adapter section).', 'warn');
    return;
  }
  engine = s.engine;
  report = s.report;
  renderAdapter(byId('adapter'), engine, report);
  presetSelect.value = report.software ? 'quick' : 'standard';
  const sliceOption = byId<HTMLSelectElement>('check-scope').querySelector<HTMLOptionElement>('option[value=slice]');
  if (sliceOption) {
    const n = sliceNames(engine.features.subgroups).length;
    sliceOption.textContent = `a representative slice of every operation (${n} cases)`;
    sliceOption.dataset.count = String(n);
  }
  const absent = [!engine.features.f16 && 'shader-f16', !engine.features.subgroups && 'subgroups', !engine.features.timestampQuery && 'timestamp-query'].filter(Boolean);
  status.dataset.state = 'ready';
  status.textContent = absent.length ? `Ready. Not offered here: ${absent.join(', ')} (see below for what that costs).` : 'Ready: every feature webinfer uses is offered.';
  engine.device.lost.then((lost) => {
    status.dataset.state = 'error';
    status.textContent = `The GPU device was lost (${lost.reason}${lost.message ? `: ${lost.message}` : ''}). Reload the page.`;
    setGpuReady(false);
  });
  setGpuReady(true);
}

boot().catch((e) => {
  byId('adapter-status').dataset.state = 'error';
  byId('adapter-status').textContent = `Start-up failed: ${errorMessage(e)}`;
  reportPageError('start-up', e);
});
