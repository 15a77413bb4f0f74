// The demo page: finds WebGPU, then wires its sections in the order a newcomer wants them: load a model
// and chat with it, check every operation family (and whole models) against the references, then
// measure (Benchmark, Playground); the adapter's details last. Every failure is shown in the page;
// nothing assumes subgroups or shader-f16.
import { clearWeightCache, DEFAULT_MAX_BYTES, hasWeightCache, weightCacheSize, type Engine } from 'webinfer';
import { renderAdapter, start, type AdapterReport } from './adapter';
import { PRESETS, renderPlots, resultsFileName, resultsJson, runBenchmark, type Ceilings, type DemoResults, type Suite } from './bench';
import { acceptedAbove, casesFor, families, runCheck, shippedFiles, type CheckScope } from './check';
import { Conversation, type Attachment, type Mode, type TurnSettings } from './chat';
import { mb, openCheckpoint, renderInfo, runGoldens, type LoadDType, type Loaded } from './model';
import { audioFileToPcm, embedLines, record, renderSimilarity, renderTranscript } from './speech';
import { FIELDS, OP_LABELS, renderFields, renderPlaygroundResult, runPlayground, type Op } from './playground';
import { byId, el, errorMessage, fmt, hideWhileEmpty, Progress, registerGpuButton, runExclusive, setGpuReady, showError, showMessage } from './ui';

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

// ------------------------------------------------------------------------------------------ model

/** The model the chat talks to (one at a time: loading another frees this one's GPU memory). */
let loaded: Loaded | null = null;
/** The running turn's abort, for Stop. */
let stopper: AbortController | null = null;
let gpuReady = false;
/** The worker that serves the chat's model, started on the first load. */
let worker: Worker | null = null;
const modelWorker = () => (worker ??= new Worker(new URL('./worker.ts', import.meta.url), { type: 'module', name: 'webinfer' }));

const openFolder = byId<HTMLButtonElement>('model-open-folder');
const folderInput = byId<HTMLInputElement>('model-folder');
const ggufInput = byId<HTMLInputElement>('model-gguf');
const openGguf = byId<HTMLButtonElement>('model-open-gguf');
const loadUrl = byId<HTMLButtonElement>('model-load-url');
const loadHf = byId<HTMLButtonElement>('model-load-hf');
const sendButton = byId<HTMLButtonElement>('model-send');
const stopButton = byId<HTMLButtonElement>('model-stop');
const newChat = byId<HTMLButtonElement>('model-new-chat');
const modeSelect = byId<HTMLSelectElement>('model-mode');
const promptBox = byId<HTMLTextAreaElement>('model-prompt');
const cacheClear = byId<HTMLButtonElement>('model-cache-clear');
const loadSample = byId<HTMLButtonElement>('model-load-sample');
for (const b of [loadSample, openFolder, openGguf, loadUrl, loadHf]) registerGpuButton(b);
const loadProgress = new Progress(byId<HTMLProgressElement>('model-load-progress'), byId('model-load-status'));
const conversation = new Conversation(byId('model-chat-log'));

/** Send needs a loaded model besides an idle GPU, which the shared busy lock does not know: it
 *  follows the lock through the body's data-busy attribute instead. */
const embedRun = byId<HTMLButtonElement>('model-embed-run');
const audioOpen = byId<HTMLButtonElement>('model-audio-open');
const audioInput = byId<HTMLInputElement>('model-audio');
const recordButton = byId<HTMLButtonElement>('model-record');
/** Ends a recording in progress (the Record button, pressed again). */
let stopRecording: (() => void) | null = null;

function syncModelControls(): void {
  const busy = document.body.dataset.busy === 'true';
  const kind = loaded?.info.kind;
  byId('model-chat').hidden = !!kind && kind !== 'decoder';
  byId('model-embed').hidden = kind !== 'encoder';
  byId('model-speech').hidden = kind !== 'speech';
  embedRun.disabled = !gpuReady || busy || kind !== 'encoder';
  audioOpen.disabled = !gpuReady || busy || kind !== 'speech';
  recordButton.disabled = !gpuReady || kind !== 'speech' || (busy && !stopRecording);
  sendButton.disabled = !gpuReady || busy || !loaded || kind !== 'decoder';
  newChat.disabled = busy || !loaded;
  cacheClear.disabled = busy;
  const chatOption = modeSelect.querySelector<HTMLOptionElement>('option[value=chat]')!;
  chatOption.disabled = !loaded?.info.chatTemplate;
  if (chatOption.disabled && modeSelect.value === 'chat') modeSelect.value = 'completion';
  // Images go with chat messages to a model with a vision tower.
  const images = !!loaded?.info.vision && modeSelect.value === 'chat';
  byId('model-image-row').hidden = !images;
  if (!images) { attach(null); stopCamera(); }
}

// ------------------------------------------------------------------------- an attached image

let attached: Attachment | null = null;
const imageInput = byId<HTMLInputElement>('model-image');
const imagePreview = byId<HTMLImageElement>('model-image-preview');

/** Sets (or clears) the image the next chat message carries, and shows it. */
function attach(a: Attachment | null): void {
  attached = a;
  imagePreview.hidden = !a;
  if (a) imagePreview.src = a.url;
  else imagePreview.removeAttribute('src');
  byId('model-image-name').textContent = a ? a.name : '';
  byId('model-image-clear').hidden = !a;
}
byId('model-attach').addEventListener('click', () => imageInput.click());
byId('model-image-clear').addEventListener('click', () => attach(null));
imageInput.addEventListener('change', () => {
  const f = imageInput.files?.[0];
  imageInput.value = '';
  if (!f) return;
  const msg = byId('model-gen-message');
  msg.hidden = true;
  // The worker's decoder checks the bytes and the size again (the library's limit, used here too); this
  // spares sending a file that is not one.
  if (!/^image\/(png|jpeg)$/.test(f.type) || f.size > DEFAULT_MAX_BYTES) {
    showMessage(msg, `${f.name}: expected a PNG or JPEG of at most ${mb(DEFAULT_MAX_BYTES)} MB, got ${f.type || 'a file of unknown type'} of ${mb(f.size)} MB`, 'warn');
    return;
  }
  const r = new FileReader();
  r.onload = () => attach({ name: f.name, url: String(r.result) });
  r.onerror = () => showMessage(msg, `${f.name}: the file could not be read (${r.error?.message ?? 'unknown error'})`, 'warn');
  r.readAsDataURL(f);
});

// A photo from the camera: the live picture beside Capture and Cancel; Capture attaches the frame as a JPEG.
const cameraPanel = byId('model-camera-panel');
const cameraVideo = byId<HTMLVideoElement>('model-camera-video');
let cameraStream: MediaStream | null = null;

/** Stops the camera (its light goes off) and hides the live picture. */
function stopCamera(): void {
  for (const t of cameraStream?.getTracks() ?? []) t.stop();
  cameraStream = null;
  cameraVideo.srcObject = null;
  cameraPanel.hidden = true;
}
byId('model-camera').addEventListener('click', async () => {
  const msg = byId('model-gen-message');
  msg.hidden = true;
  stopCamera();
  if (!navigator.mediaDevices?.getUserMedia) {
    showMessage(msg, 'this browser offers no camera here (getUserMedia needs a secure page: https or localhost)', 'warn');
    return;
  }
  try {
    const stream = await navigator.mediaDevices.getUserMedia({ video: { width: { ideal: 1280 }, height: { ideal: 960 } }, audio: false });
    cameraStream = stream;
    cameraVideo.srcObject = stream;
    cameraPanel.hidden = false;
    await cameraVideo.play();
  } catch (e) {
    stopCamera();
    const err = e as { name?: string; message?: string };
    showMessage(msg, `the camera could not be opened (${err.name ?? 'Error'}: ${err.message ?? String(e)}): allow it in the browser, or attach a file`, 'warn');
  }
});
byId('model-camera-shoot').addEventListener('click', () => {
  const w = cameraVideo.videoWidth, h = cameraVideo.videoHeight;
  if (!cameraStream || !w || !h) {
    showMessage(byId('model-gen-message'), 'the camera has given no picture yet: wait a moment, then Capture again', 'warn');
    return;
  }
  const canvas = document.createElement('canvas');
  canvas.width = w;
  canvas.height = h;
  canvas.getContext('2d')!.drawImage(cameraVideo, 0, 0, w, h);
  stopCamera();
  attach({ name: `camera photo ${w}×${h}`, url: canvas.toDataURL('image/jpeg', 0.92) });
});
byId('model-camera-cancel').addEventListener('click', stopCamera);
new MutationObserver(syncModelControls).observe(document.body, { attributes: true, attributeFilter: ['data-busy'] });

/** What the browser keeps: the weight cache's files and bytes. */
async function showCacheSize(): Promise<void> {
  const out = byId('model-cache-size');
  if (!hasWeightCache()) {
    out.textContent = 'this browser offers no Cache Storage here (downloads are not kept)';
    byId<HTMLInputElement>('model-cache').disabled = true;
    return;
  }
  const { files, bytes: n } = await weightCacheSize();
  out.dataset.bytes = String(n);
  out.dataset.files = String(files);
  out.textContent = files ? `kept: ${files} file${files > 1 ? 's' : ''}, ${mb(n)} MB` : 'kept: nothing yet';
}

cacheClear.addEventListener('click', () => void runExclusive(async () => {
  try {
    await clearWeightCache();
  } catch (e) {
    showError(byId('model-load-message'), 'Clear', e);
  }
  await showCacheSize();
}));

/** The prompt box's hint, by mode and by what the model has. */
function syncHint(): void {
  const info = loaded?.info;
  byId('model-prompt-hint').textContent = !info ? '(load a model first)'
    : modeSelect.value === 'chat' ? '(your message; the history goes with it through the chat template)'
      : info.tokenizer ? '(text the model continues; each completion stands alone)'
        : '(token ids separated by spaces: this checkpoint has no tokenizer)';
  promptBox.placeholder = !info || info.tokenizer ? 'Enter sends, Shift+Enter starts a new line' : '1 17 93 5';
}
modeSelect.addEventListener('change', () => { syncHint(); syncModelControls(); });

// -------------------------------------------------------------- embeddings and transcription

embedRun.addEventListener('click', () => void runExclusive(async () => {
  if (!loaded) return;
  const msg = byId('model-embed-message'), status = byId('model-embed-status');
  msg.hidden = true;
  status.textContent = 'embedding…';
  try {
    const r = await embedLines(loaded.model, byId<HTMLTextAreaElement>('model-embed-input').value,
      { pooling: byId<HTMLSelectElement>('model-embed-pooling').value as 'mean' | 'cls' });
    renderSimilarity(byId<HTMLTableElement>('model-embed-table'), r);
    status.textContent = `${r.vectors.length} embeddings in ${r.ms.toFixed(0)} ms`;
  } catch (e) {
    status.textContent = '';
    showError(msg, 'Embed', e);
  }
}));

/** Transcribes samples in the worker with the panel's options and shows the result. */
async function transcribeInto(pcm: Float32Array): Promise<void> {
  if (!loaded) return;
  const status = byId('model-speech-status');
  const language = byId<HTMLInputElement>('model-language').value.trim();
  status.textContent = `transcribing ${(pcm.length / 16000).toFixed(2)} s of audio…`;
  const t0 = performance.now();
  const task = byId<HTMLSelectElement>('model-task').value as '' | 'transcribe' | 'translate';
  const t = await loaded.model.transcribe(pcm, {
    ...(language ? { language } : {}), ...(task ? { task } : {}),
    timestamps: byId<HTMLInputElement>('model-timestamps').checked,
  });
  const ms = performance.now() - t0;
  renderTranscript(byId('model-transcript'), t, pcm.length / 16000, ms);
  status.textContent = `done in ${(ms / 1000).toFixed(2)} s`;
}

audioOpen.addEventListener('click', () => audioInput.click());
audioInput.addEventListener('change', () => {
  const file = audioInput.files?.[0];
  if (!file) return;
  void runExclusive(async () => {
    const msg = byId('model-speech-message');
    msg.hidden = true;
    try {
      await transcribeInto(await audioFileToPcm(file));
    } catch (e) {
      byId('model-speech-status').textContent = '';
      showError(msg, 'Transcribe', e);
    } finally {
      audioInput.value = '';
    }
  });
});

recordButton.addEventListener('click', () => {
  if (stopRecording) {
    stopRecording();
    return;
  }
  void runExclusive(async () => {
    const msg = byId('model-speech-message');
    msg.hidden = true;
    let stop!: () => void;
    const stopped = new Promise<void>((r) => { stop = r; });
    stopRecording = stop;
    recordButton.textContent = 'Stop recording';
    byId('model-speech-status').textContent = 'recording… (press Stop recording to transcribe)';
    syncModelControls();
    try {
      const pcm = await record(stopped);
      stopRecording = null;
      recordButton.textContent = 'Record';
      await transcribeInto(pcm);
    } catch (e) {
      byId('model-speech-status').textContent = '';
      showError(msg, 'Record', e);
    } finally {
      stopRecording = null;
      recordButton.textContent = 'Record';
      syncModelControls();
    }
  });
});

function loadCheckpointInto(src: FileList | string): void {
  void runExclusive(async () => {
    if (!engine) return;
    const msg = byId('model-load-message');
    const info = byId('model-info');
    msg.hidden = true;
    info.hidden = true;
    loadProgress.reset();
    if (loaded) {
      loaded.model.destroy();
      loaded = null;
      conversation.clear();
    }
    try {
      const l = await openCheckpoint(modelWorker(), src, {
        dtype: byId<HTMLSelectElement>('model-dtype').value as LoadDType, hubHost: byId<HTMLInputElement>('model-hub-host').value.trim() || undefined,
        cache: byId<HTMLInputElement>('model-cache').checked, speculative: byId<HTMLInputElement>('model-speculative').checked, progress: loadProgress,
      });
      loaded = l;
      renderInfo(info, l);
      loadProgress.finish(`loaded ${l.info.id}: ${mb(l.totalBytes)} MB in ${(l.info.loadMs / 1000).toFixed(2)} s`, 'pass');
      modeSelect.value = l.info.chatTemplate ? 'chat' : 'completion';
      byId('model-embed-hint').textContent = l.info.tokenizer ? '(text)' : '(token ids separated by spaces: this checkpoint has no tokenizer)';
      byId('model-embed-table').hidden = true;
      byId('model-transcript').hidden = true;
    } catch (e) {
      loadProgress.finish('the checkpoint could not be loaded', 'fail');
      showError(msg, 'Load', e);
    } finally {
      // A second pick of the same folder (or file) fires change again.
      folderInput.value = '';
      ggufInput.value = '';
      syncModelControls();
      syncHint();
      await showCacheSize().catch(() => {});
    }
  });
}

openFolder.addEventListener('click', () => folderInput.click());
openGguf.addEventListener('click', () => ggufInput.click());
ggufInput.addEventListener('change', () => {
  if (ggufInput.files?.length) loadCheckpointInto(ggufInput.files);
});
folderInput.addEventListener('change', () => {
  if (folderInput.files?.length) loadCheckpointInto(folderInput.files);
});
loadSample.addEventListener('click', () => loadCheckpointInto(new URL(byId<HTMLSelectElement>('model-sample').value, location.href).href));
loadUrl.addEventListener('click', () => {
  const u = byId<HTMLInputElement>('model-url').value.trim();
  if (!u) {
    showMessage(byId('model-load-message'), 'Enter the base URL of a checkpoint folder (config.json is fetched from <URL>/config.json) or a .gguf file\'s URL.', 'warn');
    return;
  }
  let url: string;
  try {
    url = new URL(u, location.href).href;
  } catch (e) {
    showError(byId('model-load-message'), 'Load', e);
    return;
  }
  loadCheckpointInto(url);
});
loadHf.addEventListener('click', () => {
  const id = byId<HTMLInputElement>('model-hf').value.trim().replace(/^hf:/, '');
  if (!id) {
    showMessage(byId('model-load-message'), 'Enter a Hugging Face model id: org/name (a checkpoint folder) or org/name/file.gguf.', 'warn');
    return;
  }
  loadCheckpointInto(`hf:${id}`);
});

function turnSettings(): TurnSettings {
  const num = (id: string) => Number(byId<HTMLInputElement>(id).value);
  const seed = byId<HTMLInputElement>('model-seed').value.trim();
  return {
    mode: modeSelect.value as Mode, system: byId<HTMLInputElement>('model-system').value, maxTokens: num('model-max-new'),
    temperature: num('model-temperature'), topK: num('model-topk'), topP: num('model-topp'), seed: seed === '' ? undefined : Number(seed),
    stream: byId<HTMLInputElement>('model-stream').checked,
  };
}

function send(): void {
  void runExclusive(async () => {
    const l = loaded;
    if (!l) return;
    const msg = byId('model-gen-message');
    const status = byId('model-gen-status');
    msg.hidden = true;
    delete status.dataset.state;
    const input = promptBox.value;
    if (!input.trim()) {
      showMessage(msg, 'Write a message first.', 'warn');
      return;
    }
    status.textContent = 'generating…';
    const ac = new AbortController();
    stopper = ac;
    stopButton.disabled = false;
    try {
      const r = await conversation.send(l.model, input, turnSettings(), ac.signal, attached ?? undefined);
      promptBox.value = '';
      attach(null);
      status.textContent = r.stopped ? 'stopped' : 'done';
      status.dataset.state = r.stopped ? 'stopped' : 'ready';
    } catch (e) {
      status.textContent = 'error';
      status.dataset.state = 'error';
      showError(msg, 'Send', e);
    } finally {
      stopper = null;
      stopButton.disabled = true;
    }
  });
}
sendButton.addEventListener('click', send);
promptBox.addEventListener('keydown', (ev) => {
  if (ev.key !== 'Enter' || ev.shiftKey || ev.isComposing) return;
  ev.preventDefault();
  if (!sendButton.disabled) send();
});
stopButton.addEventListener('click', () => stopper?.abort());
newChat.addEventListener('click', () => {
  conversation.clear();
  byId('model-gen-status').textContent = '';
  byId('model-gen-message').hidden = true;
});

// ------------------------------------------------------------------------------------------ check

const checkRun = byId<HTMLButtonElement>('check-run');
registerGpuButton(checkRun);
const checkProgress = new Progress(byId<HTMLProgressElement>('check-progress'), byId('check-status'));
hideWhileEmpty(byId('check-rows'), byId('check-table-wrap'));
checkRun.addEventListener('click', () => void runExclusive(async () => {
  if (!engine || !report) return;
  const msg = byId('check-message');
  msg.hidden = true;
  checkProgress.reset();
  try {
    byId('check-footnote').hidden = true;
    const results = await runCheck(engine, {
      scope: byId<HTMLSelectElement>('check-scope').value as CheckScope, software: report.software, progress: checkProgress,
      table: byId<HTMLTableSectionElement>('check-rows'), onWarning,
    });
    byId('check-footnote').hidden = !results.some(acceptedAbove);
  } catch (e) {
    checkProgress.finish('the check could not run', 'fail');
    showError(msg, 'Check', e);
  }
}));

// Whole models: the goldens against what HF transformers computed for them.
const goldensRun = byId<HTMLButtonElement>('model-goldens-run');
registerGpuButton(goldensRun);
const goldensProgress = new Progress(byId<HTMLProgressElement>('model-goldens-progress'), byId('model-goldens-status'));
hideWhileEmpty(byId('model-goldens-rows'), byId('model-goldens-table-wrap'));
goldensRun.addEventListener('click', () => void runExclusive(async () => {
  if (!engine) return;
  const msg = byId('model-goldens-message');
  msg.hidden = true;
  goldensProgress.reset();
  try {
    await runGoldens(engine, { progress: goldensProgress, table: byId<HTMLTableSectionElement>('model-goldens-rows') });
  } catch (e) {
    goldensProgress.finish('the goldens could not be checked', 'fail');
    showError(msg, 'Goldens', e);
  }
}));

// -------------------------------------------------------------------------------------- benchmark

const benchRun = byId<HTMLButtonElement>('bench-run');
const benchCopy = byId<HTMLButtonElement>('bench-copy');
const benchDownload = byId<HTMLButtonElement>('bench-download');
registerGpuButton(benchRun);
const benchProgress = new Progress(byId<HTMLProgressElement>('bench-progress'), byId('bench-status'));
const presetSelect = byId<HTMLSelectElement>('bench-preset');
for (const s of ['sdpa', 'paged', 'mla']) {
  const rows = byId(`bench-${s}-rows`);
  hideWhileEmpty(rows, rows.closest<HTMLElement>('.bench-table')!);
}
const benchTables = byId('bench-tables');
new MutationObserver(() => { benchTables.hidden = !benchTables.querySelector('tbody tr'); }).observe(benchTables, { childList: true, subtree: true });
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
    const n = renderPlots(byId('plots'), byId('plots-note'), r);
    byId<HTMLTextAreaElement>('bench-json').value = resultsJson(r);
    byId('bench-share').hidden = false;
    benchCopy.disabled = benchDownload.disabled = false;
    const bad = [...(r.sdpa ?? []), ...(r.paged ?? []), ...(r.mla ?? [])].filter((x) => {
      const row = x as { pass?: boolean; error?: string };
      return !row.pass && !row.error?.startsWith('skipped');
    }).length;
    const secs = ((performance.now() - t0) / 1000).toFixed(0);
    benchProgress.finish(bad ? `done in ${secs} s, but ${bad} shapes failed their check (see the tables)` : `done in ${secs} s: ${n ? `${n} plot${n > 1 ? 's' : ''} and ` : ''}the tables below`, bad ? 'fail' : 'pass');
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
hideWhileEmpty(byId('pg-rows'), byId('pg-table-wrap'));
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
    status.textContent = `WebGPU is not available here, so nothing on this page can run. ${s.reason}`;
    showMessage(byId('adapter'), s.reason, 'error');
    for (const id of ['model-load-message', 'check-message', 'model-goldens-message', 'bench-message', 'pg-message']) showMessage(byId(id), 'Needs WebGPU (see the Adapter section).', 'warn');
    return;
  }
  engine = s.engine;
  report = s.report;
  renderAdapter(byId('adapter'), engine, report);
  presetSelect.value = report.software ? 'quick' : 'standard';
  const scope = byId<HTMLSelectElement>('check-scope');
  const sliceOption = scope.querySelector<HTMLOptionElement>('option[value=slice]');
  if (sliceOption) {
    const n = casesFor('slice', engine.features.subgroups).cases.length;
    sliceOption.textContent = `a slice of every operation family (${n} cases, about two minutes on a software adapter)`;
    sliceOption.dataset.count = String(n);
  }
  const allOption = scope.querySelector<HTMLOptionElement>('option[value=all]');
  if (allOption) allOption.dataset.count = String(casesFor('all', engine.features.subgroups).cases.length);
  for (const [family, n] of families()) scope.append(el('option', { value: `family:${family}`, 'data-count': n }, `only ${family} (${n} case${n > 1 ? 's' : ''})`));
  // ?case=<text>: the cases whose name contains it, chosen (a link to one case, as a bug report gives it).
  const wanted = new URLSearchParams(location.search).get('case');
  if (wanted) {
    const n = casesFor(`match:${wanted}`, engine.features.subgroups).cases.length;
    scope.append(el('option', { value: `match:${wanted}`, 'data-count': n }, `cases whose name contains “${wanted}” (${n})`));
    scope.value = `match:${wanted}`;
  }
  // The tiny models this build did not ship cannot be picked.
  const files = await shippedFiles();
  for (const o of Array.from(byId<HTMLSelectElement>('model-sample').options)) {
    const path = o.value.replace(/^\.\/shared\//, '');
    o.disabled = !!files && ![...files].some((f) => f === path || f.startsWith(`${path}/`));
  }
  const absent = [!engine.features.f16 && 'shader-f16', !engine.features.subgroups && 'subgroups', !engine.features.timestampQuery && 'timestamp-query'].filter(Boolean);
  status.dataset.state = 'ready';
  status.textContent = absent.length ? `Ready. Not offered here: ${absent.join(', ')} (the Adapter section says what that costs).` : 'Ready: every feature webinfer uses is offered.';
  engine.device.lost.then((lost) => {
    status.dataset.state = 'error';
    status.textContent = `The GPU device was lost (${lost.reason}${lost.message ? `: ${lost.message}` : ''}). Reload the page.`;
    setGpuReady(false);
    gpuReady = false;
    syncModelControls();
  });
  setGpuReady(true);
  gpuReady = true;
  syncModelControls();
  await showCacheSize();
}

boot().catch((e) => {
  byId('adapter-status').dataset.state = 'error';
  byId('adapter-status').textContent = `Start-up failed: ${errorMessage(e)}`;
  reportPageError('start-up', e);
});
