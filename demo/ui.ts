// Small DOM helpers shared by the demo's sections: element creation, one busy lock for the GPU, progress
// bars, error display and number formatting.

type Attrs = Record<string, string | number | boolean | undefined>;

/** Creates an element; string children become text (never parsed as HTML). */
export function el<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Attrs = {}, ...children: (Node | string)[]): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === false) continue;
    if (k === 'class') e.className = String(v);
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children) e.append(c);
  return e;
}

export function byId<T extends HTMLElement = HTMLElement>(id: string): T {
  const e = document.getElementById(id);
  if (!e) throw new Error(`demo: no element #${id} in index.html`);
  return e as T;
}

export function errorMessage(e: unknown): string {
  if (e instanceof Error) return e.message || String(e);
  return String(e);
}

// ------------------------------------------------------------------------------------- busy lock

/** Buttons that start GPU work: all are disabled while any job runs (one device, one queue). */
const gpuButtons = new Set<HTMLButtonElement>();
let busy = false;
let gpuReady = false;

export function registerGpuButton(b: HTMLButtonElement): void {
  gpuButtons.add(b);
  b.disabled = busy || !gpuReady;
}

export function setGpuReady(ready: boolean): void {
  gpuReady = ready;
  for (const b of gpuButtons) b.disabled = busy || !gpuReady;
}

/** Runs one job with every GPU button disabled; a second job while one runs is refused. */
export async function runExclusive<T>(job: () => Promise<T>): Promise<T | undefined> {
  if (busy) return undefined;
  busy = true;
  document.body.dataset.busy = 'true';
  for (const b of gpuButtons) b.disabled = true;
  try {
    return await job();
  } finally {
    busy = false;
    delete document.body.dataset.busy;
    for (const b of gpuButtons) b.disabled = !gpuReady;
  }
}

/** Lets the browser paint between GPU steps (progress bars, table rows). A hidden tab gets no
 *  animation frames, so a timer resolves it too: the work goes on in the background. */
export function nextFrame(): Promise<void> {
  return new Promise((r) => {
    requestAnimationFrame(() => setTimeout(r, 0));
    setTimeout(r, 100);
  });
}

// ---------------------------------------------------------------------------------------- progress

export class Progress {
  private readonly bar: HTMLProgressElement;
  private readonly label: HTMLElement;

  constructor(bar: HTMLProgressElement, label: HTMLElement) {
    this.bar = bar;
    this.label = label;
  }

  set(done: number, total: number, text: string): void {
    this.bar.max = Math.max(1, total);
    this.bar.value = done;
    this.bar.hidden = false;
    this.label.textContent = text;
  }

  finish(text: string, state: 'pass' | 'fail' | 'info' = 'info'): void {
    this.bar.hidden = false;
    this.bar.value = this.bar.max;
    this.label.textContent = text;
    this.label.dataset.state = state;
  }

  reset(): void {
    this.bar.value = 0;
    delete this.label.dataset.state;
  }
}

/** Keeps `boxes` (a table's wrapper, its heading) hidden while `body` has no rows: an empty table
 *  says nothing and takes a screen's width on a phone. */
export function hideWhileEmpty(body: HTMLElement, ...boxes: HTMLElement[]): void {
  const sync = () => { for (const b of boxes) b.hidden = body.childElementCount === 0; };
  new MutationObserver(sync).observe(body, { childList: true });
  sync();
}

/** Shows an error in a section's message box (and never swallows it). */
export function showError(box: HTMLElement, what: string, e: unknown): void {
  box.hidden = false;
  box.className = 'message error';
  box.textContent = `${what}: ${errorMessage(e)}`;
}

export function showMessage(box: HTMLElement, text: string, kind: 'info' | 'warn' | 'error' = 'info'): void {
  box.hidden = false;
  box.className = `message ${kind}`;
  box.textContent = text;
}

// -------------------------------------------------------------------------------------- formatting

export function fmt(x: number | undefined, digits = 2): string {
  return x !== undefined && Number.isFinite(x) ? x.toFixed(digits) : '–';
}

/** Three significant digits for quantities that span orders of magnitude (ms, GFLOP/s). */
export function sig(x: number | undefined): string {
  if (x === undefined || !Number.isFinite(x)) return '–';
  if (x === 0) return '0';
  const a = Math.abs(x);
  return a >= 1000 ? x.toFixed(0) : a >= 1 ? x.toPrecision(3) : x.toPrecision(2);
}

export function bytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  let v = n;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return `${Number.isInteger(v) ? v : v.toFixed(1)} ${units[i]}`;
}

/** The worst error as a fraction of the SPEC §6 tolerance: a pass is ≤ 1. */
export function worstCell(worst: number | undefined, pass: boolean): HTMLTableCellElement {
  const td = el('td', { class: pass ? 'pass' : 'fail', 'data-result': pass ? 'pass' : 'fail' });
  td.textContent = worst === undefined ? (pass ? 'pass' : 'FAIL')
    : `${pass ? 'pass' : 'FAIL'} ${Number.isFinite(worst) ? worst.toFixed(3) : 'NaN/Inf'}`;
  return td;
}
