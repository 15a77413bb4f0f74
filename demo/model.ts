// Model: whole models in the page. The goldens (tiny models beside the page, with what HF transformers
// computed for them) are run and checked here, in the page's engine, as the test suites check them. A
// user's own checkpoint (a Hugging Face model id, a picked folder or .gguf file, or a URL) is loaded in
// a Web Worker (serveInWorker; WorkerModel is its handle here), which tokenizes, applies the chat
// template, serves the requests and detokenizes: the page only sends OpenAI requests and shows chunks.
import { RUNNABLE_ARCHITECTURES, WorkerModel, loadSafetensors, type Engine, type LoadProgress, type WorkerModelInfo } from 'webinfer';
import { fetchShared } from './check';
import { el, errorMessage, nextFrame, type Progress } from './ui';

const utf8 = new TextDecoder();
const json = (b: Uint8Array): unknown => JSON.parse(utf8.decode(b));

// --------------------------------------------------------------------------------------- goldens

/** The folders of ../shared/goldens (a static server cannot list a folder, so they are named here). */
export const GOLDEN_FOLDERS = ['llama-gqa', 'mistral-window8', 'qwen3-qknorm-tied', 'deepseek-v2-moe', 'deepseek-v3-yarn-moe'] as const;

/** SPEC §7: every prefill logit within this fraction of its row's largest |logit| (HF's row). */
export const LOGIT_BUDGET = 1e-3;

interface Golden {
  architecture: string;
  prompts: number[][];
  prefill_logits: number[][][];
  greedy: number[][];
}

export interface GoldenResult {
  name: string;
  architecture: string;
  status: 'pass' | 'fail' | 'unsupported';
  /** Worst |logit − HF| over every position, as a fraction of 1e-3·max|HF logit| of its row. */
  worst?: number;
  greedySame?: boolean;
  ms: number;
  /** The result cell: pass, FAIL, or why the architecture does not run yet. */
  label: string;
  detail: string;
}

type Json = Record<string, unknown>;

/** Why a golden's architecture does not run yet, from what its config declares (MLA, MoE). */
function unsupportedLabel(config: Json, architecture: string): string {
  const parts = [config.kv_lora_rank != null && 'MLA', config.n_routed_experts != null && 'MoE'].filter(Boolean);
  const family = /deepseek/i.test(architecture) ? 'DeepSeek ' : '';
  return parts.length ? `not yet supported (${family}${parts.join('/')})` : 'not yet supported';
}

/** Loads one golden, checks its prefill logits at every position and its greedy tokens, frees it. */
async function checkGolden(engine: Engine, name: string, config: Json, r: GoldenResult, step: (frac: number, what: string) => void): Promise<void> {
  const [weights, goldenBytes] = await Promise.all([fetchShared(`goldens/${name}/model.safetensors`), fetchShared(`goldens/${name}/golden.json`)]);
  const golden = json(goldenBytes) as Golden;
  step(0.1, 'loading');
  const model = await engine.loadModel({ config, weights: await loadSafetensors(weights) });
  try {
    if (model.architecture !== golden.architecture) throw new Error(`the model loaded as ${model.architecture}, the golden is ${golden.architecture}`);
    const V = model.config.vocabSize;
    let worst = 0, positions = 0, where = '';
    for (const [p, prompt] of golden.prompts.entries()) {
      step(0.2 + 0.5 * p / golden.prompts.length, `prefill logits of prompt ${p + 1} of ${golden.prompts.length}`);
      await nextFrame();
      const got = await model.logits(prompt);
      if (got.length !== prompt.length * V) throw new Error(`logits of prompt ${p}: ${got.length} values, expected ${prompt.length}×${V}`);
      for (let t = 0; t < prompt.length; t++) {
        const ref = golden.prefill_logits[p][t];
        let max = 0;
        for (const x of ref) max = Math.max(max, Math.abs(x));
        const budget = LOGIT_BUDGET * max;
        for (let v = 0; v < V; v++) {
          const e = Math.abs(got[t * V + v] - ref[v]) / budget;
          // NaN compares false: it counts as an infinite error, never as a pass.
          if (!(e <= worst)) {
            worst = Number.isNaN(e) ? Infinity : e;
            where = `prompt ${p}, position ${t}, token ${v}`;
          }
        }
        positions++;
      }
    }
    step(0.75, 'greedy generation, the three prompts together');
    await nextFrame();
    const greedy = await model.generate(golden.prompts, { maxNewTokens: 8, stopTokens: [] });
    const differs: string[] = [];
    for (const [p, want] of golden.greedy.entries()) {
      const got = greedy[p] ?? [];
      const n = Math.max(got.length, want.length);
      for (let s = 0; s < n; s++) {
        if (got[s] === want[s]) continue;
        differs.push(`prompt ${p} step ${s}: ${got[s] ?? 'none'} (HF ${want[s] ?? 'none'})`);
        break;
      }
    }
    r.worst = worst;
    r.greedySame = differs.length === 0;
    r.status = worst <= 1 && r.greedySame ? 'pass' : 'fail';
    r.label = r.status === 'pass' ? 'pass' : 'FAIL';
    const tokens = golden.greedy.reduce((a, g) => a + g.length, 0);
    r.detail = `${golden.prompts.length} prompts, ${positions} positions × ${V} logits (worst at ${where}); ${tokens} greedy tokens`
      + (differs.length ? `; differs at ${differs.join(', ')}` : '');
  } finally {
    model.destroy();
  }
}

/** Runs every runnable golden (logits and greedy against HF), lists the others as not yet supported. */
export async function runGoldens(engine: Engine, o: { progress: Progress; table: HTMLTableSectionElement }): Promise<GoldenResult[]> {
  o.table.replaceChildren();
  const results: GoldenResult[] = [];
  const total = GOLDEN_FOLDERS.length;
  const t0 = performance.now();
  for (const [i, name] of GOLDEN_FOLDERS.entries()) {
    o.progress.set(i, total, `${name}: reading`);
    await nextFrame();
    const r: GoldenResult = { name, architecture: '?', status: 'fail', ms: 0, label: 'FAIL', detail: '' };
    const c0 = performance.now();
    try {
      const config = json(await fetchShared(`goldens/${name}/config.json`)) as Json;
      r.architecture = String((config.architectures as string[] | undefined)?.[0] ?? '?');
      // Decided by what the library runs, not by name: a golden joins the check once its architecture does.
      if (!(RUNNABLE_ARCHITECTURES as readonly string[]).includes(r.architecture)) {
        r.status = 'unsupported';
        r.label = unsupportedLabel(config, r.architecture);
        r.detail = 'its config and checkpoint are read, but the step runtime does not run this architecture yet';
      } else {
        await checkGolden(engine, name, config, r, (frac, what) => o.progress.set(i + frac, total, `${name}: ${what}`));
      }
    } catch (e) {
      r.status = 'fail';
      r.label = 'FAIL';
      r.detail = errorMessage(e);
    }
    r.ms = performance.now() - c0;
    results.push(r);
    o.table.append(goldenRow(r));
  }
  const ran = results.filter((r) => r.status !== 'unsupported');
  const failed = ran.filter((r) => r.status === 'fail').length;
  const skipped = results.length - ran.length;
  const secs = ((performance.now() - t0) / 1000).toFixed(1);
  const rest = skipped ? `; ${skipped} not yet supported` : '';
  o.progress.finish(failed ? `${failed} of ${ran.length} goldens FAILED${rest} (${secs} s)` : `all ${ran.length} runnable goldens match HF${rest} (${secs} s)`,
    failed ? 'fail' : 'pass');
  return results;
}

function goldenRow(r: GoldenResult): HTMLTableRowElement {
  const cls = r.status === 'pass' ? 'pass' : r.status === 'fail' ? 'fail' : 'absent';
  const worst = r.worst === undefined ? '–' : Number.isFinite(r.worst) ? r.worst.toFixed(4) : 'NaN/Inf';
  const greedy = r.greedySame === undefined ? '–' : r.greedySame ? 'identical' : 'differs';
  return el('tr', { 'data-result': r.status, 'data-model': r.name },
    el('td', {}, r.name),
    el('td', {}, r.architecture),
    el('td', { class: 'num', title: `worst |logit − HF| / (${LOGIT_BUDGET} · max|HF logit| of its row): a pass is ≤ 1` }, worst),
    el('td', { class: r.greedySame === false ? 'fail' : '' }, greedy),
    el('td', { class: cls }, r.label),
    el('td', { class: 'num' }, (r.ms / 1000).toFixed(2)),
    el('td', { class: r.status === 'fail' ? 'detail error' : 'detail' }, r.detail));
}

// ------------------------------------------------------------------------------ own checkpoint

export type LoadDType = 'checkpoint' | 'f32' | 'f16' | 'bf16' | 'q8' | 'q4';

export interface Loaded {
  model: WorkerModel;
  info: WorkerModelInfo;
  /** GPU bytes the upload counted (the weights as they left the checkpoint). */
  totalBytes: number;
  /** The storage asked for. */
  dtype: LoadDType;
  /** Whether speculative decoding was asked for (info.speculative: whether the model took it). */
  speculative: boolean;
  /** Files downloaded, and how many of them came from the browser's cache. */
  downloads: { files: number; cached: number };
}

export const mb = (n: number) => (n / 1e6).toFixed(n < 1e7 ? 1 : 0);

/** The text a load's progress shows: downloads by file, then the upload in MB (as before the worker). */
function progressText(p: LoadProgress): string {
  if (p.phase === 'upload') return `${mb(p.loaded)} MB of ${mb(p.total)} MB`;
  if (p.cached) return `${p.file}: read from this browser's cache (${mb(p.loaded)} MB)`;
  return `downloading ${p.file}: ${mb(p.loaded)} MB${p.total === null ? '' : ` of ${mb(p.total)} MB`}`;
}

/**
 * Loads a checkpoint in the worker with the load's progress: each file's download (or cache read),
 * then the weights' upload in MB.
 */
export async function openCheckpoint(worker: Worker, src: FileList | File[] | string, o: { dtype: LoadDType; hubHost?: string; cache: boolean; speculative?: boolean; progress: Progress }): Promise<Loaded> {
  o.progress.set(0, 1, src instanceof FileList || Array.isArray(src) ? 'reading the config and the weights\' headers…' : 'fetching the config…');
  let totalBytes = 0;
  const files = new Map<string, boolean>();
  const model = await WorkerModel.load(worker, src, {
    dtype: o.dtype, hubHost: o.hubHost, cache: o.cache, ...(o.speculative ? { speculative: { method: 'ngram' as const, k: 4 } } : {}),
    onProgress: (p) => {
      if (p.phase === 'upload') totalBytes = p.total;
      else files.set(p.url, p.cached);
      o.progress.set(p.loaded, p.total ?? p.loaded + 1, progressText(p));
    },
  });
  const downloads = { files: files.size, cached: [...files.values()].filter(Boolean).length };
  return { model, info: model.info, totalBytes, dtype: o.dtype, speculative: !!o.speculative, downloads };
}

/** What the page shows about a loaded model. */
export function renderInfo(dl: HTMLElement, l: Loaded): void {
  const { info } = l;
  const c = info.config;
  const types = info.checkpoint.tensorTypes
    ? Object.entries(info.checkpoint.tensorTypes).sort((a, b) => b[1] - a[1]).map(([t, n]) => `${t} ×${n}`).join(', ') : '';
  const n = info.checkpoint.files ?? 1;
  const tok = info.tokenizer;
  const facts: [string, string][] = [
    ['checkpoint', info.checkpoint.format === 'gguf'
      ? `${info.id} (GGUF, ${types}, ${mb(l.totalBytes)} MB)`
      : `${info.id} (${n} safetensors file${n > 1 ? 's' : ''}${info.checkpoint.quantization ? `, ${info.checkpoint.quantization}` : ''}, ${mb(l.totalBytes)} MB)`],
    ['architecture', info.architecture],
    ...(c ? [
      ['layers', String(c.numLayers)],
      ['hidden size', String(c.hiddenSize)],
      ['heads', `${c.numHeads} query, ${c.numKvHeads} key/value, head size ${c.headDim}`],
      ['vocabulary', String(c.vocabSize)],
    ] as [string, string][] : [
      ['kind', info.kind === 'encoder' ? 'encoder-only: embeddings (no cache, no generation)' : 'speech recognition: log-mel front end, encoder, decoder with cross-attention'],
      ['hidden size', String(info.hiddenSize)],
      ['vocabulary', String(info.vocabSize)],
    ] as [string, string][]),
    ['weights on the GPU', `${mb(info.weightBytes)} MB${info.weightDType && info.checkpoint.format === 'safetensors' && !/^q/.test(l.dtype) ? ` (${info.weightDType})` : ''}`],
    ...(info.numBlocks !== null && info.blockSize !== null ? [['KV cache', `${info.numBlocks} blocks × ${info.blockSize} tokens = ${info.numBlocks * info.blockSize} tokens`]] as [string, string][] : []),
    ['tokenizer', tok
      ? `${tok.source === 'gguf' ? 'from the GGUF metadata' : 'tokenizer.json'} (${tok.type}${tok.size ? `, ${tok.size} tokens` : ''})`
      : `none: ${c ? 'prompts are space-separated token ids (completions only)' : info.kind === 'encoder' ? 'inputs are space-separated token ids' : 'transcripts are token ids'}`],
    ...(c ? [
      ['chat template', info.chatTemplate ? `from ${info.checkpoint.format === 'gguf' ? 'the GGUF metadata' : 'tokenizer_config.json'}` : 'none: completions only'],
      ['stop tokens', c.eosTokenIds.length ? c.eosTokenIds.join(', ') : 'none'],
      ['speculative decoding', info.speculative ? `n-gram lookup, up to ${info.speculative.k} proposals a step (verified: the output is unchanged)` : l.speculative ? 'off: this model does not verify proposals (its state beside the cache is not rolled back)' : 'off'],
    ] as [string, string][] : []),
    ['downloads', l.downloads.files ? `${l.downloads.files} file${l.downloads.files > 1 ? 's' : ''}, ${l.downloads.cached} from this browser's cache` : 'none (local files)'],
    ['loaded in', `${(info.loadMs / 1000).toFixed(2)} s, in a Web Worker`],
  ];
  dl.replaceChildren(...facts.flatMap(([k, v]) => [el('dt', {}, k), el('dd', { 'data-fact': k }, v)]));
  dl.hidden = false;
}
