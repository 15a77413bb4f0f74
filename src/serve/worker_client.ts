// The page's side of a model served in a Web Worker (worker.ts): WorkerModel has the in-process
// model's serving surface (chat.completions.create, completions.create: a Promise of the object, or
// with stream: true an AsyncIterable of chunks), and forwards each call to the worker as a message.
// A request's AbortSignal stays here: when it fires, the page sends { type: 'abort' } and the worker
// aborts its own copy of the request. Errors come back as their class (OpenAIError with its status,
// param and code; WebinferError) and message.
import { WebinferError } from '../core/errors.js';
import type { CheckpointSource } from '../formats/checkpoint.js';
import { badRequest, OpenAIError, type OpenAIErrorType } from './errors.js';
import type { FromWorker, LoadProgress, ToWorker, WorkerApi, WorkerError, WorkerLoadOptions, WorkerModelInfo, WorkerSource } from './worker.js';

/** A Worker, or any port with its messaging (a MessagePort, for tests and shared workers). */
export interface WorkerLike {
  postMessage(message: unknown): void;
  addEventListener(type: string, listener: (ev: Event) => void): void;
  start?(): void;
}

export interface WorkerLoadCallOptions extends WorkerLoadOptions {
  /** Each file's download (or its read from the browser's cache), then the weights' upload to the GPU. */
  onProgress?: (p: LoadProgress) => void;
}

/** A message to the worker before its id is given (Omit over each member of the union). */
type Outgoing = ToWorker extends infer T ? (T extends ToWorker ? Omit<T, 'id'> : never) : never;

type Req = { stream?: boolean | null; signal?: AbortSignal } & Record<string, unknown>;

const OP = 'WorkerModel';

/** The worker's error as the class the in-process API throws. */
export function reviveError(e: WorkerError): Error {
  if (e.name === 'OpenAIError') {
    return new OpenAIError(e.message, { status: e.status, type: e.type as OpenAIErrorType | undefined, param: e.param ?? null, code: e.code ?? null });
  }
  if (e.name === 'WebinferError') return new WebinferError(e.message);
  if (e.name === 'AbortError' && typeof DOMException !== 'undefined') return new DOMException(e.message, 'AbortError');
  const err = new Error(e.message);
  err.name = e.name;
  return err;
}

interface Handler {
  progress?(p: LoadProgress): void;
  loaded?(info: WorkerModelInfo): void;
  chunk?(c: unknown): void;
  result(value: unknown): void;
  error(e: Error): void;
}

/** One per worker: the ids of the calls in flight and the handlers their answers go to. */
class Connection {
  private nextId = 1;
  private readonly pending = new Map<number, Handler>();

  constructor(private readonly worker: WorkerLike) {
    worker.addEventListener('message', (ev) => this.receive((ev as MessageEvent).data as FromWorker));
    // An uncaught error in the worker (its script failed to load, or it threw outside a call): the calls
    // in flight will get no answer, so they end with it.
    worker.addEventListener('error', (ev) => {
      const msg = (ev as ErrorEvent).message || 'the worker failed (its script did not load, or it threw)';
      this.failAll(new WebinferError(`${OP}: the worker: expected a running webinfer worker (serveInWorker), got an error: ${msg}`));
    });
    worker.addEventListener('messageerror', () => {
      this.failAll(new WebinferError(`${OP}: a message from the worker: expected data that deserializes, got a messageerror`));
    });
    worker.start?.();
  }

  private receive(m: FromWorker): void {
    const h = m && this.pending.get(m.id);
    if (!h) return;
    switch (m.type) {
      case 'progress': h.progress?.(m.progress); break;
      case 'chunk': h.chunk?.(m.chunk); break;
      case 'loaded':
        this.pending.delete(m.id);
        h.loaded?.(m.info);
        break;
      case 'result':
        this.pending.delete(m.id);
        h.result(m.value);
        break;
      case 'error':
        this.pending.delete(m.id);
        h.error(reviveError(m.error));
        break;
    }
  }

  private failAll(e: Error): void {
    const all = [...this.pending.values()];
    this.pending.clear();
    for (const h of all) h.error(e);
  }

  /** Posts a call; a message that cannot be cloned throws here, before anything is pending. */
  send(msg: Outgoing, h: Handler): number {
    const id = this.nextId++;
    this.worker.postMessage({ ...msg, id } as ToWorker);
    this.pending.set(id, h);
    return id;
  }

  /** A message with no answer (abort). */
  notify(msg: ToWorker): void {
    this.worker.postMessage(msg);
  }
}

const connections = new WeakMap<object, Connection>();
function connection(worker: WorkerLike): Connection {
  let c = connections.get(worker);
  if (!c) connections.set(worker, (c = new Connection(worker)));
  return c;
}

/** A page-side source as the worker takes it: a FileList becomes its files by relative path (the
 *  folder's layout survives the copy), a relative URL is resolved against the page, not the worker. */
function workerSource(src: CheckpointSource): WorkerSource {
  if (typeof src === 'string') {
    const base = typeof document !== 'undefined' ? document.baseURI : undefined;
    if (!base || src.startsWith('hf:') || /^[a-z][a-z0-9+.-]*:/i.test(src)) return src;
    return new URL(src, base).href;
  }
  const isFileList = typeof FileList !== 'undefined' && src instanceof FileList;
  if (isFileList || Array.isArray(src)) {
    const files = Array.from(src as ArrayLike<File>);
    if (files.length > 0 && files.every((f) => /\.gguf$/i.test(f?.name ?? ''))) return files;
    const out: { [path: string]: Blob } = {};
    for (const f of files) out[(f as { webkitRelativePath?: string }).webkitRelativePath || f.name] = f;
    return out;
  }
  return src as { [path: string]: Blob };
}

/** Which top-level field of a request cannot be structured-cloned (a function, a class instance of the page). */
function uncloneable(req: Record<string, unknown>): string | null {
  for (const [k, v] of Object.entries(req)) {
    try {
      structuredClone(v);
    } catch {
      return k;
    }
  }
  return null;
}

/**
 * A model loaded in a Web Worker running serveInWorker(), with the in-process model's serving API.
 *
 *   const worker = new Worker(new URL('./worker.js', import.meta.url), { type: 'module' });
 *   const model = await WorkerModel.load(worker, 'hf:org/name', { onProgress: (p) => ... });
 *   for await (const c of model.chat.completions.create({ messages, stream: true })) ...
 */
export class WorkerModel {
  /** What the worker reported about the model (config, sizes, tokenizer, chat template). */
  readonly info: WorkerModelInfo;
  private readonly conn: Connection;
  private destroyed = false;

  readonly chat = {
    completions: {
      create: ((req: Req) => this.create('chat', req)) as {
        (req: Req & { stream: true }): AsyncIterable<Record<string, unknown>>;
        (req: Req & { stream?: false | null }): Promise<Record<string, unknown>>;
        (req: Req): Promise<Record<string, unknown>> | AsyncIterable<Record<string, unknown>>;
      },
    },
  };

  readonly completions = {
    create: ((req: Req) => this.create('completions', req)) as {
      (req: Req & { stream: true }): AsyncIterable<Record<string, unknown>>;
      (req: Req & { stream?: false | null }): Promise<Record<string, unknown>>;
      (req: Req): Promise<Record<string, unknown>> | AsyncIterable<Record<string, unknown>>;
    },
  };

  /** An encoder's OpenAI Embeddings call (the in-process model.embeddings.create). */
  readonly embeddings = {
    create: (req: Req): Promise<Record<string, unknown>> => this.create('embeddings', req) as Promise<Record<string, unknown>>,
  };

  /** A speech model's transcription of 16 kHz mono PCM (the in-process model.transcribe). */
  transcribe(pcm: Float32Array, o: { language?: string; task?: 'transcribe' | 'translate'; timestamps?: boolean; signal?: AbortSignal } = {}):
      Promise<{ text: string; tokens: number[]; segments?: { start: number; end: number; text: string; tokens: number[] }[] }> {
    if (!(pcm instanceof Float32Array)) return Promise.reject(new WebinferError(`transcribe: pcm: expected a Float32Array of 16 kHz mono samples, got ${typeof pcm}`));
    return this.create('transcriptions', { ...o, pcm }) as Promise<never>;
  }

  private constructor(conn: Connection, info: WorkerModelInfo) {
    this.conn = conn;
    this.info = info;
  }

  /** The checkpoint's name (the in-process model.id). */
  get id(): string {
    return this.info.id;
  }

  get architecture(): string {
    return this.info.architecture;
  }

  /**
   * Loads a checkpoint in the worker: a URL, a Hub id ('hf:org/name'), a folder pick's FileList or
   * picked .gguf File(s); o: loadModel's dtype and cache options, loadCheckpoint's hubHost and cache,
   * and onProgress for downloads and the upload.
   */
  static load(worker: WorkerLike, source: CheckpointSource, o: WorkerLoadCallOptions = {}): Promise<WorkerModel> {
    const { onProgress, ...options } = o ?? {};
    if (onProgress !== undefined && typeof onProgress !== 'function') {
      return Promise.reject(new WebinferError(`${OP}.load: o.onProgress: expected a function, got ${typeof onProgress}`));
    }
    const conn = connection(worker);
    return new Promise<WorkerModel>((resolve, reject) => {
      try {
        conn.send({ type: 'load', source: workerSource(source), options }, {
          progress: (p) => onProgress?.(p),
          loaded: (info) => resolve(new WorkerModel(conn, info)),
          result: () => reject(new WebinferError(`${OP}.load: expected the loaded model, got an empty answer`)),
          error: reject,
        });
      } catch (e) {
        reject(new WebinferError(`${OP}.load: source: expected a URL, Hub id, Files or Blobs, got something the worker cannot receive (${(e as Error).message})`));
      }
    });
  }

  private create(api: WorkerApi, req: Req): Promise<Record<string, unknown>> | AsyncIterable<Record<string, unknown>> {
    const op = { chat: 'chat.completions.create', completions: 'completions.create', embeddings: 'embeddings.create', transcriptions: 'transcribe' }[api];
    const stream = req?.stream === true;
    // Bad calls fail the way the request would: a rejected promise, or a stream that throws when read.
    const refuse = (e: Error) => (stream ? failingStream(e) : Promise.reject(e));
    if (!req || typeof req !== 'object') return refuse(badRequest('request', 'a request object', req, op));
    if (this.destroyed) return refuse(new WebinferError(`${op}: the model: expected a loaded model, got one destroyed (WorkerModel.destroy)`));
    const { signal, ...request } = req;
    if (signal !== undefined && !(typeof AbortSignal !== 'undefined' && signal instanceof AbortSignal)) {
      return refuse(badRequest('signal', 'an AbortSignal', signal, op));
    }
    const bad = uncloneable(request);
    if (bad !== null) return refuse(badRequest(bad, 'data a worker can receive (no functions or page objects)', typeof request[bad], op));

    const conn = this.conn;
    let id = 0;
    const onAbort = () => conn.notify({ type: 'abort', id });
    const start = (h: Handler) => {
      id = conn.send({ type: 'create', model: this.info.handle, api, request }, h);
      if (signal?.aborted) onAbort();
      else signal?.addEventListener('abort', onAbort, { once: true });
    };
    const done = () => signal?.removeEventListener('abort', onAbort);
    // An aborted request ends with its signal's reason, as in process (the worker's copy of the signal
    // was aborted without one).
    const reason = (e: Error): Error => (signal?.aborted && e.name === 'AbortError' ? (signal.reason as Error | undefined) ?? e : e);

    if (!stream) {
      return new Promise((resolve, reject) => {
        start({
          result: (v) => { done(); resolve(v as Record<string, unknown>); },
          error: (e) => { done(); reject(reason(e)); },
        });
      });
    }
    // A stream: chunks queue here until read; the worker's end or error follows the last of them.
    const queue: Record<string, unknown>[] = [];
    let ended = false;
    let error: Error | null = null;
    let wake: (() => void) | null = null;
    const poke = () => { const w = wake; wake = null; w?.(); };
    try {
      start({
        chunk: (c) => { queue.push(c as Record<string, unknown>); poke(); },
        result: () => { ended = true; done(); poke(); },
        error: (e) => { ended = true; error = reason(e); done(); poke(); },
      });
    } catch (e) {
      return failingStream(e as Error);
    }
    let iterated = false;
    return {
      [Symbol.asyncIterator]() {
        if (iterated) throw new WebinferError(`${op}: the stream: expected one reader, got a second for-await over it`);
        iterated = true;
        return {
          async next(): Promise<IteratorResult<Record<string, unknown>>> {
            while (!queue.length && !ended) await new Promise<void>((r) => { wake = r; });
            if (queue.length) return { value: queue.shift()!, done: false };
            if (error) throw error;
            return { value: undefined, done: true };
          },
          // A reader that stops early (break) ends the request in the worker too.
          async return(): Promise<IteratorResult<Record<string, unknown>>> {
            if (!ended) {
              ended = true;
              onAbort();
              done();
            }
            queue.length = 0;
            return { value: undefined, done: true };
          },
        };
      },
    };
  }

  /** Frees the model in the worker (its GPU memory); requests still running there end with an error. */
  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    this.conn.send({ type: 'unload', model: this.info.handle }, { result: () => {}, error: () => {} });
  }
}

function failingStream(e: Error): AsyncIterable<Record<string, unknown>> {
  return {
    [Symbol.asyncIterator]() {
      return {
        next: () => Promise.reject(e),
        return: async () => ({ value: undefined, done: true }),
      };
    },
  };
}
