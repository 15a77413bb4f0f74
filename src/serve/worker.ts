// The engine in a dedicated Web Worker: the worker owns the GPU device, the loaded models and their
// request engines, and answers a page's messages (worker_client.ts is the page's side). The page's
// main thread then never records a GPU step, tokenizes, renders a chat template or detokenizes, so it
// stays responsive while a model loads or generates.
//
// Messages are plain structured-clone data: a checkpoint source is a URL, a Hub id or Files/Blobs
// (cloned by reference, not copied); a request is the OpenAI request object without its AbortSignal
// (the page sends { type: 'abort' } instead); chunks, results and errors come back as plain objects.
//
//   page → worker                                   worker → page
//   load   { id, source, options }                  progress { id, progress }  (downloads, then the upload)
//                                                   loaded   { id, info }
//   create { id, model, api, request }              chunk    { id, chunk }      (stream: true, one per chunk)
//     api: 'chat' | 'completions' (a decoder), 'embeddings' (an encoder: OpenAI's request), 'transcriptions'
//     (a speech model: { pcm: Float32Array of 16 kHz mono samples, language?, task?, timestamps? })
//                                                   result   { id, value }      (the object; a stream's end: undefined)
//   abort  { id }      (a running create)           error    { id, error }      (name, message, OpenAI's fields)
//   unload { id, model }                            result   { id }
import { createEngine, Engine } from '../engine.js';
import type { EngineOptions } from '../core/types.js';
import { check, WebinferError } from '../core/errors.js';
import { loadCheckpoint, type Checkpoint } from '../formats/checkpoint.js';
import type { DownloadProgress } from '../formats/hub.js';
import type { LoadModelOptions } from '../models/model.js';
import { Model } from './model.js';
import type { ModelConfig } from '../models/config.js';
import { quantSettings } from '../formats/hf_quant.js';
import { OpenAIError } from './errors.js';
import { parseSpeculation, type NgramSpeculation } from './speculative.js';

/** A checkpoint as the page names it: a URL or 'hf:' id, GGUF File(s), or a folder's files by path. */
export type WorkerSource = string | File[] | { [path: string]: Blob };

/** What loads a model in the worker: loadCheckpoint's fetch options and loadModel's. */
export interface WorkerLoadOptions {
  dtype?: LoadModelOptions['dtype'];
  kvCache?: LoadModelOptions['kvCache'];
  maxTokensPerStep?: number;
  maxSeqsPerStep?: number;
  /** n-gram speculative decoding where the model can (a decoder-only text model; others load without
   *  it, and WorkerModelInfo.speculative says which). A draft model cannot be sent to a worker. */
  speculative?: NgramSpeculation | false;
  /** loadCheckpoint's: where 'hf:' ids are fetched, and whether downloads are kept in the browser. */
  hubHost?: string;
  cache?: boolean;
}

/** A load's progress: each file's download (or its read from the cache), then the weights' upload. */
export type LoadProgress =
  | ({ phase: 'download' } & DownloadProgress)
  | { phase: 'upload'; loaded: number; total: number };

/** The calls a page makes of a worker's model. */
export type WorkerApi = 'chat' | 'completions' | 'embeddings' | 'transcriptions';

/** What the page learns about a loaded model. */
export interface WorkerModelInfo {
  /** The worker's handle of the model (requests name it). */
  handle: number;
  /** The checkpoint's name (model.id). */
  id: string;
  architecture: string;
  /** What the model serves: 'decoder' (chat, completions), 'encoder' (embeddings), 'speech' (transcriptions). */
  kind: 'decoder' | 'encoder' | 'speech';
  /** A decoder's parsed config (null for encoders and speech models). */
  config: ModelConfig | null;
  weightBytes: number;
  weightDType: string | null;
  /** A decoder's KV cache (null for the others). */
  numBlocks: number | null;
  blockSize: number | null;
  /** The model's width and vocabulary (every kind). */
  hiddenSize: number;
  vocabSize: number;
  checkpoint: {
    format: 'safetensors' | 'gguf';
    /** The safetensors files (a GGUF file's parts are not counted). */
    files?: number;
    /** GGUF: its tensor types and how many of each ({ Q4_K: 113, F32: 33 }). */
    tensorTypes?: Record<string, number>;
    /** An HF quantized checkpoint: its scheme in words ('MLX affine 4-bit, group 64'). */
    quantization?: string;
  };
  /** The tokenizer the model serves text with: where it came from, its model type and vocabulary
   *  size (tokens of its model and added tokens), or null. */
  tokenizer: { source: 'tokenizer.json' | 'gguf'; type: string; size: number } | null;
  /** True when the checkpoint has a chat template (chat requests need one). */
  chatTemplate: boolean;
  /** A vision-language model's image tokens (chat requests may carry image_url parts), or null. */
  vision: { imageTokenId: number } | null;
  /** Its speculative decoding (WorkerLoadOptions.speculative where the model can), or null. */
  speculative: { method: 'ngram'; k: number } | null;
  /** Wall time of the load in the worker (downloads included). */
  loadMs: number;
}

/** An error as it crosses: its class name, message, and OpenAIError's fields when it is one. */
export interface WorkerError {
  name: string;
  message: string;
  status?: number;
  type?: string;
  param?: string | null;
  code?: string | null;
}

export type ToWorker =
  | { type: 'load'; id: number; source: WorkerSource; options: WorkerLoadOptions }
  | { type: 'create'; id: number; model: number; api: WorkerApi; request: Record<string, unknown> }
  | { type: 'abort'; id: number }
  | { type: 'unload'; id: number; model: number };

export type FromWorker =
  | { type: 'progress'; id: number; progress: LoadProgress }
  | { type: 'loaded'; id: number; info: WorkerModelInfo }
  | { type: 'chunk'; id: number; chunk: unknown }
  | { type: 'result'; id: number; value?: unknown }
  | { type: 'error'; id: number; error: WorkerError };

/** The part of a dedicated worker's global scope (or a MessagePort) the server uses. */
export interface WorkerScope {
  postMessage(message: FromWorker): void;
  addEventListener(type: 'message', listener: (ev: MessageEvent) => void): void;
}

export function serializeError(e: unknown): WorkerError {
  if (e instanceof Error || (e && typeof e === 'object' && 'message' in e)) {
    const x = e as Error & { status?: unknown; type?: unknown; param?: unknown; code?: unknown };
    const out: WorkerError = { name: x.name || 'Error', message: String(x.message) };
    if (typeof x.status === 'number') out.status = x.status;
    if (typeof x.type === 'string') out.type = x.type;
    if (x.param === null || typeof x.param === 'string') out.param = x.param;
    if (x.code === null || typeof x.code === 'string') out.code = x.code;
    return out;
  }
  return { name: 'Error', message: String(e) };
}

const OP = 'serveInWorker';

/** An HF quantized checkpoint's scheme in words ('MLX affine 4-bit, group 64', 'block FP8 (E4M3, 128 × 128 scales)'), or undefined. */
export function describeQuantization(config: object): string | undefined {
  const q = quantSettings(config);
  if (!q) return undefined;
  const c = q.qc as Record<string, unknown>;
  const bits = c.bits ?? c.w_bit, group = c.group_size ?? c.q_group_size;
  const g = group === -1 ? 'per channel' : `group ${String(group)}`;
  switch (q.method) {
    case 'mlx': return `MLX affine ${String(bits)}-bit, ${g}`;
    case 'awq': return `AWQ ${String(bits)}-bit, ${g}`;
    case 'gptq': return `GPTQ ${String(bits)}-bit, ${g}${c.desc_act ? ', desc_act' : ''}`;
    case 'fp8': return `block FP8 (E4M3, ${Array.isArray(c.weight_block_size) ? c.weight_block_size.join(' × ') : '?'} scales)`;
    case 'compressed-tensors': return `compressed-tensors ${String(c.format ?? '')}`.trim();
    default: return q.method;
  }
}

function tensorTypes(ckpt: Checkpoint): Record<string, number> | undefined {
  if (Array.isArray(ckpt.weights)) return undefined;
  const out: Record<string, number> = {};
  for (const t of ckpt.weights.tensors.values()) out[t.type] = (out[t.type] ?? 0) + 1;
  return out;
}

/** tokenizer.json's vocabulary: its model's (a token → id map, or Unigram's [token, score] list) and added tokens. */
function vocabSize(tok: object | undefined): number {
  const t = tok as { model?: { vocab?: unknown }; added_tokens?: { id?: unknown }[] } | undefined;
  const vocab = t?.model?.vocab;
  const ids = new Set<unknown>(Array.isArray(vocab) ? vocab.map((_, i) => i) : vocab && typeof vocab === 'object' ? Object.values(vocab) : []);
  for (const a of t?.added_tokens ?? []) ids.add(a?.id);
  return ids.size;
}

/** The parts of an encoder's or a speech model's object the worker reads (they are not a decoder's Model). */
interface OtherModel {
  id?: string;
  architecture: string;
  weightBytes: number;
  tokenizer?: unknown;
  embeddings?: { create(req: Record<string, unknown>): Promise<unknown> };
  transcribe?(pcm: Float32Array, o: Record<string, unknown>): Promise<unknown>;
}

function kindOf(model: Model): WorkerModelInfo['kind'] {
  if (model instanceof Model) return 'decoder';
  return typeof (model as unknown as OtherModel).transcribe === 'function' ? 'speech' : 'encoder';
}

function describe(handle: number, model: Model, ckpt: Checkpoint, loadMs: number): WorkerModelInfo {
  const kind = kindOf(model);
  const other = model as unknown as OtherModel;
  // An encoder's or speech model's sizes as config.json gives them (BERT's hidden_size, Whisper's d_model).
  const raw = ckpt.config as Record<string, unknown>;
  const gguf = !Array.isArray(ckpt.weights);
  const tokType = (ckpt.tokenizer as { model?: { type?: unknown } } | undefined)?.model?.type;
  const template = (ckpt.tokenizerConfig as { chat_template?: unknown } | undefined)?.chat_template;
  const types = tensorTypes(ckpt);
  const quantization = gguf ? undefined : describeQuantization(ckpt.config);
  return {
    handle,
    id: model.id ?? other.id ?? ckpt.name,
    architecture: model.architecture,
    kind,
    config: kind === 'decoder' ? model.config : null,
    weightBytes: model.weightBytes,
    weightDType: kind === 'decoder' ? model.weightDType : null,
    numBlocks: kind === 'decoder' ? model.numBlocks : null,
    blockSize: kind === 'decoder' ? model.blockSize : null,
    hiddenSize: kind === 'decoder' ? model.config.hiddenSize : Number(raw.hidden_size ?? raw.d_model ?? 0),
    vocabSize: kind === 'decoder' ? model.config.vocabSize : Number(raw.vocab_size ?? 0),
    checkpoint: {
      format: gguf ? 'gguf' : 'safetensors',
      ...(Array.isArray(ckpt.weights) ? { files: ckpt.weights.length } : {}),
      ...(types ? { tensorTypes: types } : {}),
      ...(quantization ? { quantization } : {}),
    },
    tokenizer: model.tokenizer
      ? { source: gguf ? 'gguf' : 'tokenizer.json', type: typeof tokType === 'string' ? tokType : 'unknown', size: vocabSize(ckpt.tokenizer) }
      : null,
    chatTemplate: kind === 'decoder' && template !== undefined && template !== null && !!model.tokenizer,
    vision: kind === 'decoder' && model.vision ? { imageTokenId: model.vision.imageTokenId } : null,
    speculative: kind === 'decoder' && model.engine.speculation?.method === 'ngram' ? { method: 'ngram', k: model.engine.speculation.k } : null,
    loadMs,
  };
}

/**
 * Serves webinfer inside a dedicated Worker: call it once from the worker's module
 * (`serveInWorker()`), and drive it from the page with WorkerModel (worker_client.ts). The engine is
 * created on the first load (`o.engine`: createEngine's options, or an engine to use); each load adds
 * a model, until the page unloads it. `scope` may also be one end of a MessageChannel.
 */
export function serveInWorker(scope: WorkerScope = self as unknown as WorkerScope, o: { engine?: EngineOptions | Engine } = {}): void {
  check(scope !== null && typeof scope === 'object' && typeof scope.postMessage === 'function' && typeof scope.addEventListener === 'function',
    OP, 'scope', "a worker's global scope or a MessagePort", scope);
  check(o !== null && typeof o === 'object', OP, 'o', '{ engine? }', o);
  const given = o.engine instanceof Engine ? o.engine : null;
  let engine: Promise<Engine> | null = given ? Promise.resolve(given) : null;
  const models = new Map<number, Model>();
  const running = new Map<number, AbortController>();
  let nextHandle = 1;
  const post = (m: FromWorker) => scope.postMessage(m);
  const postError = (id: number, e: unknown) => post({ type: 'error', id, error: serializeError(e) });

  async function load(id: number, source: WorkerSource, options: WorkerLoadOptions): Promise<void> {
    const t0 = performance.now();
    const { hubHost, cache, speculative, ...modelOptions } = options ?? {};
    // Checked before anything is fetched; set once the model is known to verify proposals.
    const spec = parseSpeculation('WorkerModel.load', speculative);
    check(spec === null || spec.method === 'ngram', 'WorkerModel.load', 'o.speculative.method', "'ngram' (a draft Model cannot be sent to a worker)", spec?.method);
    // Download reports come a chunk at a time: a few a frame is what a progress bar shows.
    let lastPost = 0;
    const ckpt = await loadCheckpoint(source, {
      ...(hubHost !== undefined ? { hubHost } : {}),
      ...(cache !== undefined ? { cache } : {}),
      onDownload: (p) => {
        const now = performance.now();
        if (p.loaded !== p.total && now - lastPost < 30) return;
        lastPost = now;
        post({ type: 'progress', id, progress: { phase: 'download', ...p } });
      },
    });
    engine ??= createEngine(o.engine as EngineOptions | undefined);
    let model: Model;
    try {
      model = await (await engine).loadModel({
        ...ckpt, ...modelOptions,
        onProgress: (loaded, total) => post({ type: 'progress', id, progress: { phase: 'upload', loaded, total } }),
      });
    } catch (e) {
      // A failed engine start is not kept: the next load tries again.
      await engine.catch(() => { engine = null; });
      throw e;
    }
    if (spec && model instanceof Model && model.verifies) model.engine.speculation = spec;
    const handle = nextHandle++;
    models.set(handle, model);
    post({ type: 'loaded', id, info: describe(handle, model, ckpt, performance.now() - t0) });
  }

  async function create(id: number, handle: number, api: WorkerApi, request: Record<string, unknown>): Promise<void> {
    const m = models.get(handle);
    if (!m) throw new WebinferError(`${OP}: create: expected a loaded model, got model ${handle}, which was unloaded (or never loaded)`);
    const ac = new AbortController();
    running.set(id, ac);
    try {
      const req = { ...request, signal: ac.signal };
      if (api === 'embeddings' || api === 'transcriptions') {
        const o = m as unknown as OtherModel;
        if (api === 'embeddings') {
          if (kindOf(m) !== 'encoder' || !o.embeddings) throw new OpenAIError(`embeddings.create: the model '${m.id}' (${m.architecture}) serves no embeddings (an encoder-only model does)`, { status: 400, param: 'model', code: 'model_not_supported' });
          post({ type: 'result', id, value: await o.embeddings.create(req) });
        } else {
          if (typeof o.transcribe !== 'function') throw new OpenAIError(`transcribe: the model '${m.id}' (${m.architecture}) transcribes no audio (a speech model does: WhisperForConditionalGeneration)`, { status: 400, param: 'model', code: 'model_not_supported' });
          const { pcm, ...opts } = req as Record<string, unknown>;
          post({ type: 'result', id, value: await o.transcribe(pcm as Float32Array, opts) });
        }
        return;
      }
      const out = api === 'chat' ? m.chat.completions.create(req) : m.completions.create(req);
      if (request.stream === true) {
        for await (const chunk of out as AsyncIterable<unknown>) post({ type: 'chunk', id, chunk });
        post({ type: 'result', id });
      } else {
        post({ type: 'result', id, value: await out });
      }
    } finally {
      running.delete(id);
    }
  }

  scope.addEventListener('message', (ev: MessageEvent) => {
    const m = ev.data as ToWorker;
    if (!m || typeof m !== 'object' || typeof m.id !== 'number') return;
    switch (m.type) {
      case 'load':
        load(m.id, m.source, m.options).catch((e) => postError(m.id, e));
        break;
      case 'create':
        create(m.id, m.model, m.api, m.request).catch((e) => postError(m.id, e));
        break;
      case 'abort':
        running.get(m.id)?.abort();
        break;
      case 'unload': {
        const entry = models.get(m.model);
        models.delete(m.model);
        try {
          entry?.destroy();
          post({ type: 'result', id: m.id });
        } catch (e) {
          postError(m.id, e);
        }
        break;
      }
      default:
        postError((m as { id: number }).id, new WebinferError(`${OP}: message type: expected 'load', 'create', 'abort' or 'unload', got '${String((m as { type?: unknown }).type)}'`));
    }
  });
  // A MessagePort delivers to addEventListener only once started (a worker's scope has no start).
  (scope as { start?: () => void }).start?.();
}
