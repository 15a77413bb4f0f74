// Model: whole models in the page. The goldens (tiny models beside the page, with what HF transformers
// computed for them) are run and checked here as the test suites check them; a user's own checkpoint
// (a picked folder or a base URL) is loaded with a progress bar and generates streamed text through its
// tokenizer.json (@huggingface/tokenizers) and chat template (@huggingface/jinja).
import { Template } from '@huggingface/jinja';
import { Tokenizer } from '@huggingface/tokenizers';
import { RUNNABLE_ARCHITECTURES, loadCheckpoint, loadSafetensors, type Checkpoint, type Engine, type GGUFFile, type Model } from 'webinfer';
import { fetchShared } from './check';
import { el, errorMessage, fmt, nextFrame, type Progress } from './ui';

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
  model: Model;
  ckpt: Checkpoint;
  /** null: the folder has no tokenizer.json (or it could not be read); prompts are then token ids. */
  tokenizer: Tokenizer | null;
  tokenizerNote: string;
  template: Template | null;
  templateNote: string;
  /** The tokenizer config's special tokens, as chat templates expect them. */
  specials: { bos_token: string; eos_token: string };
  /** The config's end-of-sequence ids and generation_config.json's (chat models add end-of-turn there). */
  stopTokens: number[];
  loadMs: number;
  totalBytes: number;
  /** The storage asked for. */
  dtype: LoadDType;
}

/** tokenizer_config.json writes special tokens as strings or as AddedToken objects ({ content }). */
function tokenText(v: unknown): string {
  if (typeof v === 'string') return v;
  if (v && typeof v === 'object' && typeof (v as { content?: unknown }).content === 'string') return (v as { content: string }).content;
  return '';
}

/** chat_template is a string, a list of named templates ({ name, template }) or a name → template map. */
export function chatTemplateOf(cfg: Json | undefined): string | null {
  const t = cfg?.chat_template;
  if (typeof t === 'string') return t;
  if (Array.isArray(t)) {
    const named = t as { name?: string; template?: unknown }[];
    const d = named.find((x) => x?.name === 'default') ?? named[0];
    return typeof d?.template === 'string' ? d.template : null;
  }
  if (t && typeof t === 'object') {
    const d = (t as Json).default ?? Object.values(t as Json)[0];
    return typeof d === 'string' ? d : null;
  }
  return null;
}

const ids = (v: unknown): number[] => (Array.isArray(v) ? v : [v]).filter((x): x is number => Number.isInteger(x));

const mb = (n: number) => (n / 1e6).toFixed(n < 1e7 ? 1 : 0);

/**
 * Reads a checkpoint (a folder pick or a base URL), its tokenizer and chat template, and loads the model
 * onto the GPU with the load's progress in MB. The tokenizer is read first: a checkpoint whose
 * tokenizer.json this library cannot read still loads, with prompts as token ids.
 */
export async function openCheckpoint(engine: Engine, src: FileList | File[] | string, dtype: LoadDType, progress: Progress): Promise<Loaded> {
  const t0 = performance.now();
  progress.set(0, 1, 'reading the config and the weights\' headers…');
  const ckpt = await loadCheckpoint(src);
  const tcfg = ckpt.tokenizerConfig as Json | undefined;
  let tokenizer: Tokenizer | null = null;
  let tokenizerNote = Array.isArray(ckpt.weights) ? 'none (no tokenizer.json): prompts are space-separated token ids'
    : 'none in the GGUF metadata (or of a kind not converted): prompts are space-separated token ids';
  if (ckpt.tokenizer) {
    try {
      tokenizer = new Tokenizer(ckpt.tokenizer, tcfg ?? {});
      const type = (ckpt.tokenizer as { model?: { type?: string } }).model?.type ?? 'unknown model type';
      tokenizerNote = `${Array.isArray(ckpt.weights) ? 'tokenizer.json' : 'from the GGUF metadata'} (${type}, ${tokenizer.get_vocab().size} tokens)`;
    } catch (e) {
      tokenizerNote = `tokenizer.json could not be read (${errorMessage(e)}): prompts are token ids`;
    }
  }
  let template: Template | null = null;
  let templateNote = `none in ${Array.isArray(ckpt.weights) ? 'tokenizer_config.json' : 'the GGUF metadata'}`;
  const from = Array.isArray(ckpt.weights) ? 'tokenizer_config.json' : 'the GGUF metadata';
  const source = chatTemplateOf(tcfg);
  if (source !== null && tokenizer) {
    try {
      template = new Template(source);
      templateNote = `from ${from}`;
    } catch (e) {
      templateNote = `the chat_template from ${from} could not be parsed (${errorMessage(e)})`;
    }
  }
  let totalBytes = 0;
  const model = await engine.loadModel({
    config: ckpt.config, weights: ckpt.weights, dtype: dtype === 'checkpoint' ? undefined : dtype,
    onProgress: (done, total) => {
      totalBytes = total;
      progress.set(done, total, `${mb(done)} MB of ${mb(total)} MB`);
    },
  });
  const gen = ckpt.generationConfig as Json | undefined;
  const stopTokens = [...new Set([...model.config.eosTokenIds, ...ids(gen?.eos_token_id)])];
  const fromId = (id: number | null | undefined) => (tokenizer && id != null ? tokenizer.id_to_token(id) ?? '' : '');
  const specials = {
    bos_token: tokenText(tcfg?.bos_token) || fromId(model.config.bosTokenId),
    eos_token: tokenText(tcfg?.eos_token) || fromId(model.config.eosTokenIds[0]),
  };
  return { model, ckpt, tokenizer, tokenizerNote, template, templateNote, specials, stopTokens, loadMs: performance.now() - t0, totalBytes, dtype };
}

/** A GGUF file's tensor types with their counts, most common first ('Q4_K ×113, Q6_K ×17, F32 ×33'). */
function ggufTypes(g: GGUFFile): string {
  const n = new Map<string, number>();
  for (const t of g.tensors.values()) n.set(t.type, (n.get(t.type) ?? 0) + 1);
  return [...n].sort((a, b) => b[1] - a[1]).map(([t, c]) => `${t} ×${c}`).join(', ');
}

/** What the page shows about a loaded model. */
export function renderInfo(dl: HTMLElement, l: Loaded): void {
  const c = l.model.config;
  const facts: [string, string][] = [
    ['checkpoint', Array.isArray(l.ckpt.weights)
      ? `${l.ckpt.name} (${l.ckpt.weights.length} safetensors file${l.ckpt.weights.length > 1 ? 's' : ''}, ${mb(l.totalBytes)} MB)`
      : `${l.ckpt.name} (GGUF, ${ggufTypes(l.ckpt.weights)}, ${mb(l.totalBytes)} MB)`],
    ['architecture', l.model.architecture],
    ['layers', String(c.numLayers)],
    ['hidden size', String(c.hiddenSize)],
    ['heads', `${c.numHeads} query, ${c.numKvHeads} key/value, head size ${c.headDim}`],
    ['vocabulary', String(c.vocabSize)],
    ['weights on the GPU', `${mb(l.model.weightBytes)} MB${Array.isArray(l.ckpt.weights) && !/^q/.test(l.dtype) ? ` (${l.model.weightDType})` : ''}`],
    ['KV cache', `${l.model.numBlocks} blocks × ${l.model.blockSize} tokens = ${l.model.numBlocks * l.model.blockSize} tokens`],
    ['tokenizer', l.tokenizerNote],
    ['chat template', l.templateNote],
    ['stop tokens', l.stopTokens.length ? l.stopTokens.join(', ') : 'none'],
    ['loaded in', `${(l.loadMs / 1000).toFixed(2)} s`],
  ];
  dl.replaceChildren(...facts.flatMap(([k, v]) => [el('dt', {}, k), el('dd', { 'data-fact': k }, v)]));
  dl.hidden = false;
}

// ------------------------------------------------------------------------------------- generate

export interface GenerateParams {
  prompt: string;
  chat: boolean;
  maxNewTokens: number;
  temperature: number;
  topK: number;
  topP: number;
  /** undefined: a fresh random seed per call when sampling. */
  seed?: number;
}

/** The prompt as token ids: through the chat template and tokenizer, or parsed as ids without one. */
export function promptIds(l: Loaded, text: string, chat: boolean): { ids: number[]; rendered: string | null } {
  const V = l.model.config.vocabSize;
  if (!l.tokenizer) {
    const parts = text.trim().split(/[\s,]+/).filter(Boolean);
    if (!parts.length) throw new Error('the prompt is empty: without a tokenizer it is a list of token ids, e.g. "1 17 93"');
    const out = parts.map((p) => {
      const n = Number(p);
      if (!/^\d+$/.test(p) || n >= V) throw new Error(`"${p}" is not a token id in [0, ${V}) (this checkpoint has no tokenizer.json: the prompt is token ids)`);
      return n;
    });
    return { ids: out, rendered: null };
  }
  let rendered: string | null = null;
  if (chat && l.template) {
    rendered = l.template.render({ messages: [{ role: 'user', content: text }], add_generation_prompt: true, ...l.specials });
  }
  // A rendered template already holds its special tokens (BOS): encoding it adds none, as transformers'
  // apply_chat_template does.
  const enc = l.tokenizer.encode(rendered ?? text, { add_special_tokens: rendered === null });
  if (!enc.ids.length) throw new Error('the prompt is empty');
  const unknown = enc.ids.findIndex((id) => !Number.isInteger(id));
  if (unknown >= 0) throw new Error(`"${enc.tokens[unknown]}" is not in the tokenizer's vocabulary and it has no unknown token`);
  const big = enc.ids.find((id) => id >= V);
  if (big !== undefined) throw new Error(`the tokenizer gave id ${big}, beyond the model's vocabulary of ${V}`);
  return { ids: enc.ids, rendered };
}

/**
 * The text of the generated ids. Decoders add or drop a leading space by position (Metaspace,
 * WordPiece, cleanup rules), so the new text is the decode of a few prompt tokens and the generated ones,
 * past the decode of those prompt tokens alone.
 */
export function decodeGenerated(tok: Tokenizer, prompt: number[], gen: number[]): string {
  if (!gen.length) return '';
  const opts = { skip_special_tokens: true };
  const tail = prompt.slice(-8);
  const head = tok.decode(tail, opts);
  const full = tok.decode([...tail, ...gen], opts);
  return full.startsWith(head) ? full.slice(head.length) : tok.decode(gen, opts);
}

export interface GenerateResult {
  promptIds: number[];
  ids: number[];
  text: string;
  aborted: boolean;
  tokensPerSecond: number;
  firstTokenMs: number | null;
  steps: number;
  wallMs: number;
  seed?: number;
}

/**
 * Generates from one prompt, streaming the decoded text into `out` as tokens arrive. The whole
 * generated list is decoded each time (a piece of a multi-byte character decodes only with the rest
 * of it), and while more is coming, trailing replacement characters — such a piece, not yet complete —
 * are held back. Repaints are coalesced to one per frame.
 */
export async function generate(l: Loaded, p: GenerateParams, o: { out: HTMLElement; signal: AbortSignal; onStart?: (promptLen: number) => void }): Promise<GenerateResult> {
  const { ids: prompt } = promptIds(l, p.prompt, p.chat);
  o.onStart?.(prompt.length);
  const gen: number[] = [];
  const text = (done: boolean): string => {
    if (!l.tokenizer) return gen.join(' ');
    // The output shows the completion alone, so the space that separates it from the prompt goes.
    const s = decodeGenerated(l.tokenizer, prompt, gen).replace(/^\s+/, '');
    return done ? s : s.replace(/\uFFFD+$/, '');
  };
  let pending = false;
  const paint = () => {
    pending = false;
    o.out.textContent = text(false);
    o.out.dataset.ids = gen.join(' ');
  };
  const schedule = () => {
    if (pending) return;
    pending = true;
    // A hidden tab gets no animation frames: the timer paints there.
    requestAnimationFrame(() => { if (pending) paint(); });
    setTimeout(() => { if (pending) paint(); }, 100);
  };
  o.out.textContent = '';
  o.out.dataset.promptIds = prompt.join(' ');
  o.out.dataset.ids = '';
  const sampling = p.temperature > 0;
  const seed = sampling ? p.seed ?? crypto.getRandomValues(new Uint32Array(1))[0] : undefined;
  const t0 = performance.now();
  let first: number | null = null;
  let aborted = false;
  try {
    await l.model.generate([prompt], {
      maxNewTokens: p.maxNewTokens, temperature: p.temperature, topK: p.topK, topP: p.topP, seed,
      stopTokens: l.stopTokens, signal: o.signal,
      onToken: (_i, t) => {
        first ??= performance.now() - t0;
        gen.push(t);
        schedule();
      },
    });
  } catch (e) {
    // Stop aborts the call: what came before it stays on the page.
    if (!o.signal.aborted) throw e;
    aborted = true;
  }
  pending = false;
  const final = text(true);
  o.out.textContent = final;
  o.out.dataset.ids = gen.join(' ');
  const run = l.model.lastRun;
  return {
    promptIds: prompt, ids: gen, text: final, aborted, steps: run.steps, wallMs: run.wallMs, firstTokenMs: first, seed,
    tokensPerSecond: run.wallMs > 0 ? (1000 * gen.length) / run.wallMs : 0,
  };
}

/** The line under the output: tokens/s and what the run did. */
export function renderStats(p: HTMLElement, r: GenerateResult, l: Loaded, maxNew: number): void {
  const last = r.ids[r.ids.length - 1];
  const why = r.aborted ? 'stopped'
    : last !== undefined && l.stopTokens.includes(last) && r.ids.length < maxNew ? `ended by stop token ${last}`
      : `reached ${maxNew} new tokens`;
  p.replaceChildren(
    `${r.ids.length} tokens in ${fmt(r.wallMs / 1000, 2)} s: `,
    el('strong', { id: 'model-tps' }, fmt(r.tokensPerSecond, 1)),
    ` tokens/s · first token after ${r.firstTokenMs === null ? '–' : `${fmt(r.firstTokenMs / 1000, 2)} s`} · `
      + `${r.steps} steps · prompt ${r.promptIds.length} tokens · ${r.seed === undefined ? 'greedy' : `sampled, seed ${r.seed}`} · ${why}`,
  );
}
