// An OpenAI-compatible HTTP server over one loaded model, on the runtime's own HTTP server: `node:http`
// in Node, `Deno.serve` in Deno (API.md "Serving", SPEC §9). The routes call the in-process API
// (model.chat.completions.create, model.completions.create), so a request over HTTP and a call in
// process give the same objects and the same errors. Both runtimes share one handler; each transport
// only moves bytes and reports a client that went away (which cancels its request).
import { check, fmt, jsonDepth, WebinferError } from '../core/errors.js';
import { MAX_REQUEST_DEPTH, OpenAIError } from './errors.js';
import { isBadIPv4, isCorsOrigin } from './addresses.js';
import { audioToPcm } from './audio_file.js';
import { multipartBoundary, parseMultipart, type FormPart } from './multipart.js';
import { renderMetrics } from './metrics.js';
import type { EngineMetrics } from './engine.js';

/** openai.ts's IMAGE_SOURCES (the same registered symbol, without loading the OpenAI surface here). */
const IMAGE_SOURCES = Symbol.for('webinfer.imageSources');

/** What serve() needs of a model: its id and the two create calls (every loaded Model has them), and
 *  embeddings.create for POST /v1/embeddings (an encoder-only model's; a decoder's refuses). */
export interface ServableModel {
  readonly id: string;
  /** A generating model's (every decoder); a model without them answers those routes with 400. */
  readonly chat?: { readonly completions: { create(req: Record<string, unknown>): unknown } };
  readonly completions?: { create(req: Record<string, unknown>): unknown };
  readonly embeddings?: { create(req: Record<string, unknown>): unknown };
  /** A speech model's (Whisper): POST /v1/audio/transcriptions and /v1/audio/translations. */
  transcribe?(pcm: Float32Array, o: { language?: string; task?: 'transcribe' | 'translate'; timestamps?: boolean; signal?: AbortSignal }):
    Promise<{ text: string; tokens: number[]; segments?: { start: number; end: number; text: string; tokens: number[] }[] }>;
  /** The rate transcribe takes PCM at (Whisper: 16000). */
  readonly melConfig?: { samplingRate: number };
  /** A decoder's request engine: GET /metrics writes its metrics() (a model without one answers 404 there). */
  readonly engine?: { metrics(): EngineMetrics };
  /** Positions the model takes, and tokens its cache holds for one sequence: the smaller is a request's
   *  longest prompt and output together, GET /v1/models' max_model_len (left out when either is unknown). */
  readonly maxContext?: number;
  readonly capacity?: number;
}

export interface ServeOptions {
  /** 8000 by default; 0 takes any free port (the returned `port` says which). */
  port?: number;
  /** The address to listen on: '127.0.0.1' by default (this machine only); '0.0.0.0' for every interface. */
  hostname?: string;
  /** Aborting it closes the server, as close() does. */
  signal?: AbortSignal;
  /** Completion requests waiting or running at most (default 256); past it a request gets 503. */
  maxQueue?: number;
  /** When set, /v1/* asks for `Authorization: Bearer <apiKey>` (401 otherwise); /health and /metrics stay
   *  open, as vLLM's do (routers and Prometheus scrape them without a key). */
  apiKey?: string;
  /** The largest request body taken, in bytes (default 16 MiB); a larger one gets 413. */
  maxBodyBytes?: number;
  /** Called with one line per request once it has ended (method, path, status, seconds, and whether its
   *  client went away or the server closed first), for a server's log. */
  log?: (line: string) => void;
  /**
   * Cross-origin access for web pages: an origin ('http://localhost:5173') or '*' (any page). Off by
   * default: a page the user happens to visit must not be able to use a model served on their machine.
   */
  cors?: string;
  /**
   * Host header values taken (names or addresses, without the port). By default a server bound to a
   * loopback address takes only loopback names (localhost, 127.0.0.1, [::1]), so that a page that
   * rebinds its own domain to 127.0.0.1 cannot reach it; a server bound elsewhere takes any. ['*']: any.
   */
  allowedHosts?: string[];
  /** Milliseconds a client has to send its whole body once its headers came (default 30 s); then 408. */
  bodyTimeoutMs?: number;
  /**
   * Milliseconds a stream may wait for its client to take what was sent (the connection's buffers
   * full) before it is ended and its request cancelled (default 30 s): a client that stops reading does
   * not hold its place in the queue.
   */
  streamStallMs?: number;
  /**
   * Whether a client's image_url parts may be http(s) URLs the server downloads (default false: data:
   * URLs only). Fetching lets any client make the server reach any address it can reach (its own
   * network's included) and wait on slow hosts; turn it on for clients you trust.
   */
  imageUrls?: boolean;
}

export interface Server {
  /** http://host:port, the base URL an OpenAI client takes with `/v1` appended. */
  readonly url: string;
  readonly port: number;
  /** Stops accepting, aborts the requests in flight (each gets an error), resolves once all ended. */
  close(): Promise<void>;
}

const OP = 'serve';
const MiB = 1024 * 1024;

// ------------------------------------------------------------------------------ the shared handler

/** A request as both transports present it. */
interface Incoming {
  method: string;
  /** The path without its query. */
  path: string;
  header(name: string): string | null;
  /** The whole body; null when it passes `limit` bytes (the rest drained, within bounds); 'timeout'
   *  when it did not all come within `timeoutMs`. */
  read(limit: number, timeoutMs: number): Promise<Uint8Array | null | 'timeout'>;
  /** From now until the reply is made, a client that goes away aborts the exchange (called only by
   *  requests that wait on the model: Deno warns once about reading a request's signal). */
  watch(): void;
}

type Headers_ = Record<string, string>;
/** A reply: a whole body, or server-sent events (each item one complete `data: ...\n\n` frame). */
type Reply = { status: number; headers: Headers_; body: string } | { status: number; headers: Headers_; events: AsyncGenerator<string, void, undefined> };

/** One request's life: its abort signal (client gone, server closing) and its place in the queue. */
class Exchange {
  readonly ctl = new AbortController();
  /** Set when it counts against maxQueue; released once by finish(). */
  release: (() => void) | null = null;
  readonly done: Promise<void>;
  readonly t0 = Date.now();
  /** 'METHOD /path status', once the reply is made (for the log). */
  summary = '';
  private resolveDone!: () => void;
  private finished = false;

  constructor() {
    this.done = new Promise((r) => (this.resolveDone = r));
  }

  abort(reason: OpenAIError): void {
    if (!this.ctl.signal.aborted) this.ctl.abort(reason);
  }

  finish(): void {
    if (this.finished) return;
    this.finished = true;
    this.release?.();
    this.release = null;
    this.resolveDone();
  }
}

const disconnected = (): OpenAIError => new OpenAIError('the client closed the connection', { status: 499, type: 'cancelled', code: 'client_disconnected' });
const stalled = (ms: number): OpenAIError => new OpenAIError(`the client took nothing of the stream for ${ms} ms (streamStallMs): the stream was ended`, { status: 408, type: 'cancelled', code: 'client_stalled' });
const bodyTimedOut = (ms: number): OpenAIError => new OpenAIError(`body: expected the whole body within ${ms} ms of the headers (bodyTimeoutMs), got less`, { status: 408, code: 'request_timeout' });

/** A client's text in a message: at most 120 characters, control characters escaped. */
function quoted(s: string): string {
  const cut = s.length > 120 ? `${s.slice(0, 120)}… (${s.length} characters)` : s;
  return JSON.stringify(cut);
}

/** A path without its trailing slashes, in one pass (a regex anchored at the end retries from every
 *  slash: quadratic on a path of 15,000 of them). */
function trimSlashes(path: string): string {
  let end = path.length;
  while (end > 1 && path.charCodeAt(end - 1) === 47) end--;
  return path.slice(0, end);
}

const LOOPBACK_NAMES = ['localhost', '127.0.0.1', '::1', '[::1]'];
const isLoopback = (host: string): boolean => LOOPBACK_NAMES.includes(host.toLowerCase()) || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host) || host.toLowerCase().endsWith('.localhost');

/** The host of a Host header, without its port. */
function hostOf(header: string): string {
  const h = header.trim();
  if (h.startsWith('[')) {
    const close = h.indexOf(']');
    return close < 0 ? h : h.slice(0, close + 1);
  }
  const colon = h.lastIndexOf(':');
  return colon < 0 || h.indexOf(':') !== colon ? h : h.slice(0, colon);
}
const shuttingDown = (): OpenAIError => new OpenAIError('the server is shutting down', { status: 503, type: 'overloaded_error', code: 'server_shutting_down' });

/** An error thrown by create in OpenAI's shape. Duck-typed as well as by class, so that an OpenAIError
 *  from another copy of the module (a second bundle) keeps its status. */
function asOpenAIError(e: unknown): OpenAIError | null {
  if (e instanceof OpenAIError) return e;
  const o = e as { name?: unknown; status?: unknown; toJSON?: unknown } | null;
  if (e instanceof Error && o!.name === 'OpenAIError' && typeof o!.toJSON === 'function'
      && Number.isInteger(o!.status) && (o!.status as number) >= 400 && (o!.status as number) <= 599) {
    return e as OpenAIError;
  }
  return null;
}

/** The status and OpenAI-shaped body of any error: an OpenAIError keeps its own; anything else is a 500
 *  whose message is kept (it is what the operator needs to see). */
function errorBody(e: unknown): { status: number; json: { error: { message: string; type: string; param: string | null; code: string | null } } } {
  const oe = asOpenAIError(e);
  if (oe) return { status: oe.status, json: oe.toJSON() };
  const message = e instanceof Error ? e.message : `non-Error thrown: ${fmt(e)}`;
  return { status: 500, json: { error: { message, type: 'server_error', param: null, code: null } } };
}

const JSON_TYPE: Headers_ = { 'content-type': 'application/json' };

function json(status: number, value: unknown, extra: Headers_ = {}): Reply {
  return { status, headers: { ...JSON_TYPE, ...extra }, body: JSON.stringify(value) };
}

function errorReply(e: unknown, extra: Headers_ = {}): Reply {
  const { status, json: body } = errorBody(e);
  return json(status, body, extra);
}

const ROUTES: Record<string, 'GET' | 'POST'> = {
  '/health': 'GET',
  '/metrics': 'GET',
  '/v1/models': 'GET',
  '/v1/chat/completions': 'POST',
  '/v1/completions': 'POST',
  '/v1/embeddings': 'POST',
  '/v1/audio/transcriptions': 'POST',
  '/v1/audio/translations': 'POST',
};

/** OpenAI's limit on an uploaded audio file, the audio routes' body limit unless maxBodyBytes says otherwise. */
const AUDIO_BODY_BYTES = 25 * 1024 * 1024;
const AUDIO_FORMATS = ['json', 'text', 'verbose_json', 'srt', 'vtt'];
const AUDIO_FIELDS = ['file', 'model', 'language', 'response_format', 'temperature', 'timestamp_granularities[]', 'timestamp_granularities', 'stream', 'prompt'];

/** Seconds as SRT's 00:00:01,500 or WebVTT's 00:00:01.500. */
function clock(t: number, sep: ',' | '.'): string {
  const ms = Math.round(t * 1000);
  const p = (n: number, w = 2) => String(n).padStart(w, '0');
  return `${p(Math.floor(ms / 3600000))}:${p(Math.floor(ms / 60000) % 60)}:${p(Math.floor(ms / 1000) % 60)}${sep}${p(ms % 1000, 3)}`;
}

function isAsyncIterable(x: unknown): x is AsyncIterable<unknown> {
  return x !== null && (typeof x === 'object' || typeof x === 'function') && typeof (x as { [Symbol.asyncIterator]?: unknown })[Symbol.asyncIterator] === 'function';
}

type HandlerOptions = Required<Pick<ServeOptions, 'maxQueue' | 'maxBodyBytes' | 'bodyTimeoutMs' | 'streamStallMs'>> & ServeOptions & {
  audioBodyBytes?: number;
  /** The address the server listens on (a loopback one restricts Host headers by default). */
  hostname: string;
};

class Handler {
  /** Completion requests counted against maxQueue: those whose bodies have arrived. */
  private queued = 0;
  readonly exchanges = new Set<Exchange>();
  closing = false;
  private readonly created = Math.floor(Date.now() / 1000);
  /** Host header values taken (null: any). */
  private readonly hosts: Set<string> | null;
  /** The engine's metrics when the server started: /metrics counts from them (a warm-up is no client's work). */
  private readonly since: EngineMetrics | undefined;

  constructor(private readonly model: ServableModel, readonly o: HandlerOptions) {
    const allowed = o.allowedHosts ?? (isLoopback(o.hostname) ? LOOPBACK_NAMES : ['*']);
    this.hosts = allowed.includes('*') ? null : new Set(allowed.map((h) => h.toLowerCase()));
    this.since = typeof model.engine?.metrics === 'function' ? model.engine.metrics() : undefined;
  }

  /** GET /metrics: the engine's counters in Prometheus' text format, under vLLM's names (metrics.ts). */
  private metrics(): Reply {
    const engine = this.model.engine;
    if (typeof engine?.metrics !== 'function' || this.since === undefined) {
      return errorReply(new OpenAIError(`GET /metrics: the model '${this.model.id}' keeps no request engine's counters (a decoder's engine does; it serves ${this.serves()})`,
        { status: 404, type: 'invalid_request_error', code: 'metrics_unavailable' }));
    }
    return { status: 200, headers: { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' }, body: renderMetrics({ id: this.model.id }, engine.metrics(), this.since) };
  }

  /** A request's longest prompt and output together, or null when the model does not say. */
  private maxModelLen(): number | null {
    const { maxContext, capacity } = this.model;
    return typeof maxContext === 'number' && typeof capacity === 'number' ? Math.min(maxContext, capacity) : null;
  }

  /** The CORS headers of every reply (none unless the server was started with cors). */
  cors(): Headers_ {
    return this.o.cors === undefined ? {} : { 'access-control-allow-origin': this.o.cors, ...(this.o.cors === '*' ? {} : { vary: 'Origin' }) };
  }

  begin(): Exchange {
    const ex = new Exchange();
    this.exchanges.add(ex);
    void ex.done.then(() => {
      this.exchanges.delete(ex);
      this.logLine(ex);
    });
    if (this.closing) ex.abort(shuttingDown());
    return ex;
  }

  /** Answers one request; never throws (a failure of its own is a 500). */
  async handle(inc: Incoming, ex: Exchange): Promise<Reply> {
    let reply: Reply;
    try {
      reply = await this.route(inc, ex);
    } catch (e) {
      reply = errorReply(e);
    }
    Object.assign(reply.headers, this.cors());
    ex.summary = `${inc.method.slice(0, 16)} ${inc.path.length > 200 ? `${inc.path.slice(0, 200)}…` : inc.path} ${reply.status}${'events' in reply ? ' (stream)' : ''}`;
    return reply;
  }

  /** The log line of an exchange that has ended. */
  private logLine(ex: Exchange): void {
    if (!this.o.log || !ex.summary) return;
    const why = ex.ctl.signal.aborted ? (ex.ctl.signal.reason as OpenAIError).code === 'client_disconnected' ? ', cancelled: the client went away' : ', ended: the server is closing' : '';
    try {
      this.o.log(`${ex.summary} ${((Date.now() - ex.t0) / 1000).toFixed(3)} s${why}`);
    } catch { /* a log callback never takes the server down */ }
  }

  private async route(inc: Incoming, ex: Exchange): Promise<Reply> {
    if (this.hosts) {
      // A page served from another name that resolves here (DNS rebinding) sends its own name as Host.
      const host = hostOf(inc.header('host') ?? '');
      if (!this.hosts.has(host.toLowerCase())) {
        return errorReply(new OpenAIError(`Host: expected one of ${[...this.hosts].join(', ')} (this server listens on ${this.o.hostname}; allowedHosts takes more), got ${quoted(host)}`,
          { status: 403, code: 'host_not_allowed', param: null }));
      }
    }
    const path = trimSlashes(inc.path);
    const shownPath = quoted(inc.path);
    const modelPath = path.startsWith('/v1/models/') ? path : null;
    const method = modelPath ? 'GET' : Object.hasOwn(ROUTES, path) ? ROUTES[path] : undefined;
    if (!method) {
      return json(404, { error: { message: `Invalid URL (${inc.method.slice(0, 16)} ${shownPath}): this server answers ${Object.keys(ROUTES).map((p) => `${ROUTES[p]} ${p}`).join(', ')}`, type: 'invalid_request_error', param: null, code: 'unknown_url' } });
    }
    if (inc.method === 'OPTIONS') {
      if (this.o.cors === undefined) {
        return json(405, { error: { message: `OPTIONS ${shownPath}: cross-origin requests are off on this server (start it with --cors ORIGIN, or serve()'s cors option, to let pages call it)`, type: 'invalid_request_error', param: null, code: 'cors_disabled' } }, { allow: `${method}${method === 'GET' ? ', HEAD' : ''}` });
      }
      // A page's preflight: the headers it asks for (Authorization, the client's own) are allowed.
      const asked = inc.header('access-control-request-headers') ?? 'authorization, content-type';
      return { status: 204, headers: { 'access-control-allow-methods': `${method}, OPTIONS`, 'access-control-allow-headers': asked.slice(0, 1024), 'access-control-max-age': '86400' }, body: '' };
    }
    // HEAD is GET without the body (the transports send no body for it).
    if (inc.method !== method && !(inc.method === 'HEAD' && method === 'GET')) {
      return json(405, { error: { message: `${quoted(inc.method.slice(0, 16))} ${shownPath}: method: expected ${method}${method === 'GET' ? ' or HEAD' : ''}, got ${quoted(inc.method.slice(0, 16))}`, type: 'invalid_request_error', param: null, code: 'method_not_allowed' } }, { allow: `${method}${method === 'GET' ? ', HEAD' : ''}${this.o.cors === undefined ? '' : ', OPTIONS'}` });
    }
    if (this.closing) return errorReply(shuttingDown());
    if (path === '/health') return json(200, { status: 'ok' });
    if (path === '/metrics') return this.metrics();
    if (this.o.apiKey !== undefined && inc.header('authorization') !== `Bearer ${this.o.apiKey}`) {
      return errorReply(new OpenAIError(`${inc.method} ${path}: Authorization: expected 'Bearer <the server's API key>', got ${inc.header('authorization') === null ? 'none' : 'another key'}`,
        { status: 401, type: 'invalid_request_error', code: 'invalid_api_key' }));
    }
    // vLLM's model card: owned_by, and max_model_len (prompt and output tokens of one request at most).
    const maxLen = this.maxModelLen();
    const card = { id: this.model.id, object: 'model', created: this.created, owned_by: 'webinfer', root: this.model.id, parent: null, ...(maxLen === null ? {} : { max_model_len: maxLen }) };
    if (path === '/v1/models') return json(200, { object: 'list', data: [card] });
    if (modelPath) {
      let id: string;
      try {
        id = decodeURIComponent(modelPath.slice('/v1/models/'.length));
      } catch {
        return errorReply(new OpenAIError(`GET ${shownPath}: model id: expected a percent-encoded id (UTF-8), got a malformed escape`, { status: 400, param: 'model', code: 'invalid_url' }));
      }
      return id === this.model.id ? json(200, card) : errorReply(this.notFound(id));
    }
    return this.create(inc, path, ex);
  }

  /** The routes this model answers, for refusals. */
  private serves(): string {
    const m = this.model;
    return [m.chat && 'chat completions', m.completions && 'completions', m.embeddings && 'embeddings', m.transcribe && 'audio transcriptions'].filter(Boolean).join(', ') || 'nothing';
  }

  private notFound(id: unknown): OpenAIError {
    return new OpenAIError(`The model ${fmt(id)} does not exist: this server serves '${this.model.id}'`, { status: 404, type: 'invalid_request_error', param: 'model', code: 'model_not_found' });
  }

  private async create(inc: Incoming, path: string, ex: Exchange): Promise<Reply> {
    const where = `POST ${path}`;
    // The request's own signal: aborted when its client goes away or the server closes.
    const signal = ex.ctl.signal;
    inc.watch();

    // The body first, within its size and time: a client still sending holds no place in the queue.
    const audio = path.startsWith('/v1/audio/');
    const limit = audio && this.o.audioBodyBytes ? this.o.audioBodyBytes : this.o.maxBodyBytes;
    const bytes = await inc.read(limit, this.o.bodyTimeoutMs);
    if (signal.aborted) return errorReply(signal.reason);
    if (bytes === 'timeout') return errorReply(bodyTimedOut(this.o.bodyTimeoutMs), { connection: 'close' });
    if (bytes === null) {
      // The rest of the body was drained (within bounds) before this reply, so the client reads the 413
      // instead of a reset; the connection carries no other request after it.
      return errorReply(new OpenAIError(`${where}: body: expected at most ${limit} bytes, got more`, { status: 413, code: 'request_too_large' }), { connection: 'close' });
    }
    if (this.queued >= this.o.maxQueue) {
      return errorReply(new OpenAIError(`${where}: the server has ${this.queued} requests waiting or running, its limit (maxQueue ${this.o.maxQueue}); retry later`,
        { status: 503, code: 'queue_full' }));
    }
    this.queued++;
    ex.release = () => this.queued--;
    if (audio) return this.audio(inc, path, bytes, signal);
    let body: unknown;
    try {
      body = JSON.parse(new TextDecoder().decode(bytes));
    } catch (e) {
      return errorReply(new OpenAIError(`${where}: body: expected JSON, got invalid JSON (${(e as Error).message.slice(0, 200)})`, { status: 400, code: 'invalid_json' }));
    }
    if (body === null || typeof body !== 'object' || Array.isArray(body)) {
      return errorReply(new OpenAIError(`${where}: body: expected a JSON object, got ${Array.isArray(body) ? 'an array' : fmt(body)}`, { status: 400, code: 'invalid_json' }));
    }
    // Nothing below walks a value deeper than this (JSON.parse itself does not recurse).
    const deep = jsonDepth(body, MAX_REQUEST_DEPTH);
    if (deep.depth > MAX_REQUEST_DEPTH) {
      return errorReply(new OpenAIError(`${where}: ${deep.path}: expected a request nested at most ${MAX_REQUEST_DEPTH} deep (objects and arrays), got one nested deeper`,
        { status: 400, param: deep.path.split(/[.[]/)[0] || null, code: 'too_deep' }));
    }
    const req = body as Record<string, unknown>;
    if (typeof req.model !== 'string') {
      return errorReply(new OpenAIError(`${where}: model: expected the model's id ('${this.model.id}'), got ${req.model === undefined ? 'none' : fmt(req.model)}`, { status: 400, param: 'model', code: 'missing_model' }));
    }
    if (req.model !== this.model.id) return errorReply(this.notFound(req.model));
    if (req.stream !== undefined && req.stream !== null && typeof req.stream !== 'boolean') {
      return errorReply(new OpenAIError(`${where}: stream: expected a boolean, got ${fmt(req.stream)}`, { status: 400, param: 'stream' }));
    }
    const stream = req.stream === true;
    if (path === '/v1/embeddings') {
      if (!this.model.embeddings) {
        return errorReply(new OpenAIError(`${where}: the model '${this.model.id}' serves no embeddings (an encoder-only model does: BertModel, ModernBertModel)`, { status: 400, param: 'model', code: 'model_not_supported' }));
      }
      if (stream) return errorReply(new OpenAIError(`${where}: stream: expected false or none (embeddings come whole), got true`, { status: 400, param: 'stream' }));
      const { stream: _s, ...rest } = req;
      try {
        return json(200, await this.model.embeddings.create({ ...rest, signal }));
      } catch (e) {
        return errorReply(this.closing && signal.aborted ? shuttingDown() : e);
      }
    }
    const api = path === '/v1/chat/completions' ? this.model.chat?.completions : this.model.completions;
    if (!api) {
      return errorReply(new OpenAIError(`${where}: the model '${this.model.id}' generates no text from a prompt (it serves ${this.serves()})`, { status: 400, param: 'model', code: 'model_not_supported' }));
    }
    let result: unknown;
    try {
      // A client's image_url parts are data: URLs (http(s) URLs too with imageUrls), never paths on this machine.
      result = await api.create({ ...req, signal, [IMAGE_SOURCES]: { allowFiles: false, allowHttp: this.o.imageUrls === true } });
    } catch (e) {
      return errorReply(this.closing && signal.aborted ? shuttingDown() : e);
    }
    if (!stream) {
      if (isAsyncIterable(result)) throw new WebinferError(`${where}: create returned a stream for a request without stream: true`);
      return json(200, result);
    }
    if (!isAsyncIterable(result)) throw new WebinferError(`${where}: create returned ${fmt(result)} for stream: true, expected an async iterable of chunks`);
    // The first chunk is awaited before the status is sent: a request refused when it starts (a bad
    // field, a prompt too long, a full queue) gets its own status, not a 200 with an error event.
    const it = result[Symbol.asyncIterator]();
    let first: IteratorResult<unknown>;
    try {
      first = await it.next();
    } catch (e) {
      return errorReply(this.closing && signal.aborted ? shuttingDown() : e);
    }
    return { status: 200, headers: { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', 'x-accel-buffering': 'no' }, events: this.frames(it, first, ex) };
  }

  /**
   * POST /v1/audio/transcriptions and /v1/audio/translations: OpenAI's multipart form (file, model,
   * language, response_format json | text | verbose_json | srt | vtt, temperature 0) over the model's
   * transcribe; the file a WAV (audio_file.ts), resampled to the model's rate.
   */
  private async audio(inc: Incoming, path: string, body: Uint8Array, signal: AbortSignal): Promise<Reply> {
    const where = `POST ${path}`;
    const bad = (param: string, m: string, code: string | null = null) => errorReply(new OpenAIError(`${where}: ${param}: ${m}`, { status: 400, param, code }));
    const boundary = multipartBoundary(inc.header('content-type'));
    if (boundary === null) return bad('body', `expected multipart/form-data (a file and fields, as OpenAI's clients send), got ${fmt(inc.header('content-type') ?? 'no content type')}`, 'invalid_content_type');
    let parts: FormPart[];
    try {
      parts = parseMultipart(body, boundary);
    } catch (e) {
      return bad('body', (e as Error).message.replace(/^parseMultipart: body: /, ''));
    }
    const text = (name: string) => {
      const p = parts.find((x) => x.name === name);
      return p ? new TextDecoder().decode(p.bytes) : undefined;
    };
    for (const p of parts) if (!AUDIO_FIELDS.includes(p.name)) return bad(p.name, `one of the fields ${AUDIO_FIELDS.join(', ')}, not an unknown field`, 'unknown_parameter');
    const model = text('model');
    if (model === undefined) return bad('model', `expected the model's id ('${this.model.id}'), got none`, 'missing_model');
    if (model !== this.model.id) return errorReply(this.notFound(model));
    if (typeof this.model.transcribe !== 'function') {
      return errorReply(new OpenAIError(`${where}: the model '${this.model.id}' transcribes no audio (a speech model does: WhisperForConditionalGeneration)`, { status: 400, param: 'model', code: 'model_not_supported' }));
    }
    const file = parts.find((p) => p.name === 'file');
    if (!file) return bad('file', 'expected an audio file part, got none');
    const format = text('response_format') ?? 'json';
    if (!AUDIO_FORMATS.includes(format)) return bad('response_format', `expected one of ${AUDIO_FORMATS.join(', ')}, got ${fmt(format)}`);
    const temperature = text('temperature');
    if (temperature !== undefined && Number(temperature) !== 0) return bad('temperature', `expected 0 (transcription here is greedy), got ${fmt(temperature)}`);
    const stream = text('stream');
    if (stream !== undefined && stream !== 'false') return bad('stream', `expected false or none (the transcript comes whole), got ${fmt(stream)}`);
    if (text('prompt')) return bad('prompt', 'expected none (prompting with previous text is not supported), got a prompt');
    for (const g of parts.filter((p) => p.name.startsWith('timestamp_granularities'))) {
      const v = new TextDecoder().decode(g.bytes);
      if (v !== 'segment') return bad('timestamp_granularities[]', `expected 'segment' (word timestamps are not supported), got ${fmt(v)}`);
    }
    const language = text('language');
    const task = path.endsWith('/translations') ? 'translate' : 'transcribe';
    if (task === 'translate' && language !== undefined) return bad('language', 'expected none for translations (the output is English), got a language');
    let pcm: Float32Array;
    try {
      pcm = audioToPcm(file.bytes, this.model.melConfig?.samplingRate ?? 16000, file.filename ?? 'file');
    } catch (e) {
      return bad('file', (e as Error).message.replace(/^decodeWav: /, ''), 'invalid_file_format');
    }
    const timestamps = format === 'verbose_json' || format === 'srt' || format === 'vtt';
    let r: Awaited<ReturnType<NonNullable<ServableModel['transcribe']>>>;
    try {
      r = await this.model.transcribe(pcm, { ...(language !== undefined ? { language } : {}), task, timestamps, signal });
    } catch (e) {
      if (e instanceof OpenAIError || asOpenAIError(e)) return errorReply(e);
      // The model's argument errors (an unknown language) are the request's.
      return errorReply(signal.aborted ? (this.closing ? shuttingDown() : signal.reason) : e instanceof WebinferError ? new OpenAIError(`${where}: ${e.message}`, { status: 400 }) : e);
    }
    const segments = r.segments ?? [];
    switch (format) {
      case 'text':
        return { status: 200, headers: { 'content-type': 'text/plain; charset=utf-8' }, body: r.text };
      case 'srt':
      case 'vtt': {
        const sep = format === 'srt' ? ',' : '.';
        const cues = segments.map((g, i) => `${format === 'srt' ? `${i + 1}\n` : ''}${clock(g.start, sep)} --> ${clock(g.end, sep)}\n${g.text.trim()}\n`);
        const out = (format === 'vtt' ? 'WEBVTT\n\n' : '') + cues.join('\n');
        return { status: 200, headers: { 'content-type': `${format === 'srt' ? 'application/x-subrip' : 'text/vtt'}; charset=utf-8` }, body: out };
      }
      case 'verbose_json':
        return json(200, {
          task, language: language ?? null, duration: pcm.length / (this.model.melConfig?.samplingRate ?? 16000), text: r.text,
          segments: segments.map((g, id) => ({ id, start: g.start, end: g.end, text: g.text, tokens: g.tokens, temperature: 0 })),
        });
      default:
        return json(200, { text: r.text });
    }
  }

  /** The SSE frames of a stream: each chunk, then `[DONE]`; an error after the start is one error event. */
  private async *frames(it: AsyncIterator<unknown>, first: IteratorResult<unknown>, ex: Exchange): AsyncGenerator<string, void, undefined> {
    let done = false;
    try {
      let r = first;
      while (!r.done) {
        yield `data: ${JSON.stringify(r.value)}\n\n`;
        r = await it.next();
      }
      done = true;
      yield 'data: [DONE]\n\n';
    } catch (e) {
      done = true;
      yield `data: ${JSON.stringify(errorBody(this.closing && ex.ctl.signal.aborted ? shuttingDown() : e).json)}\n\n`;
    } finally {
      // A consumer that stops early (its client went away) ends the model's stream too.
      if (!done) {
        ex.abort(disconnected());
        try { await it.return?.(); } catch { /* already ending with the abort */ }
      }
    }
  }
}

// ----------------------------------------------------------------------------------- the transports

/** The parts of node:http used here (typed here: the library's types do not depend on @types/node). */
interface NodeIncoming {
  method?: string;
  url?: string;
  headers: Record<string, string | string[] | undefined>;
  readonly complete: boolean;
  readonly socket: { on(event: 'end', f: () => void): unknown; off(event: 'end', f: () => void): unknown } | null;
  on(event: 'data', f: (chunk: Uint8Array) => void): unknown;
  on(event: 'end' | 'close', f: () => void): unknown;
  on(event: 'error', f: (e: Error) => void): unknown;
  removeAllListeners(event: string): unknown;
  resume(): unknown;
}
interface NodeResponse {
  writeHead(status: number, headers: Headers_): unknown;
  write(chunk: string): boolean;
  end(chunk?: string): unknown;
  flushHeaders(): void;
  /** Sends `HTTP/1.1 102 Processing` (an interim response every HTTP/1.1 client reads past). */
  writeProcessing(): void;
  readonly headersSent: boolean;
  destroy(): void;
  on(event: 'close' | 'drain', f: () => void): unknown;
  off(event: 'close' | 'drain', f: () => void): unknown;
  readonly writableFinished: boolean;
  readonly destroyed: boolean;
}
interface NodeHttpServer {
  listen(port: number, hostname: string): unknown;
  once(event: 'listening', f: () => void): unknown;
  once(event: 'error', f: (e: Error & { code?: string }) => void): unknown;
  off(event: 'listening' | 'error', f: (...a: never[]) => void): unknown;
  address(): { port: number } | string | null;
  close(cb?: (e?: Error) => void): unknown;
  closeAllConnections(): void;
  closeIdleConnections(): void;
  /** node:http's own: keep a connection whose client half-closed (sent FIN) until its reply is out. */
  httpAllowHalfOpen?: boolean;
}
interface NodeHttp {
  createServer(handler: (req: NodeIncoming, res: NodeResponse) => void): NodeHttpServer;
}

interface DenoHttpServer {
  shutdown(): Promise<void>;
}
interface DenoLike {
  serve(o: { port: number; hostname: string; onListen(addr: { port: number }): void; onError?(e: unknown): Response },
        handler: (req: Request) => Response | Promise<Response>): DenoHttpServer;
}

/** Bytes past the body limit read and dropped so that the client, still sending, reads its 413 instead
 *  of a reset connection; a larger body gets the 413 at once. */
const DRAIN_BYTES = 64 * MiB;
/** Milliseconds between the bytes that tell a half-closed client from a gone one. */
const PROBE_MS = 250;

/** A listen failure's argument: a host that does not resolve or is not this machine's, else the port. */
function listenError(e: Error & { code?: string }, hostname: string, port: number): WebinferError {
  const hostCodes = ['ENOTFOUND', 'EADDRNOTAVAIL', 'EAI_AGAIN', 'EAI_NONAME', 'EAI_FAIL', 'EINVAL', 'EAFNOSUPPORT'];
  const code = e.code ?? (/AddrNotAvailable|lookup|resolve|name or service|invalid/i.test(e.message) ? 'EADDRNOTAVAIL' : '');
  if (hostCodes.includes(code)) return new WebinferError(`${OP}: hostname: expected an address of this machine or a name that resolves to one, got '${hostname}' (${e.message})`);
  return new WebinferError(`${OP}: port: expected a port free to listen on at ${hostname}, got ${port} (${e.message})`);
}

function nodeRead(req: NodeIncoming, limit: number, timeoutMs: number): Promise<Uint8Array | null | 'timeout'> {
  const declared = Number(req.headers['content-length']);
  return new Promise((resolve) => {
    let settled = false;
    const done = (v: Uint8Array | null | 'timeout'): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(v);
    };
    // A body already past the cap is a 413 whenever its draining stops: too long, or too slow.
    let over = false;
    const timer = setTimeout(() => done(over ? null : 'timeout'), timeoutMs);
    // Past the cap: stop keeping bytes and let the rest drain (up to DRAIN_BYTES more, within the same
    // time) before the 413 goes out, so a client still writing reads it.
    const overflow = (): void => {
      over = true;
      req.removeAllListeners('data');
      req.removeAllListeners('end');
      let dropped = 0;
      req.on('data', (c) => {
        dropped += c.byteLength;
        if (dropped > DRAIN_BYTES) done(null);
      });
      req.on('end', () => done(null));
      req.resume();
    };
    if (Number.isFinite(declared) && declared > limit) {
      if (declared > limit + DRAIN_BYTES) { done(null); req.resume(); return; }
      overflow();
      return;
    }
    const parts: Uint8Array[] = [];
    let n = 0;
    req.on('data', (c) => {
      n += c.byteLength;
      if (n > limit) { parts.length = 0; overflow(); return; }
      parts.push(c);
    });
    req.on('end', () => {
      const out = new Uint8Array(n);
      let at = 0;
      for (const p of parts) { out.set(p, at); at += p.byteLength; }
      done(out);
    });
    // A client gone before its body ended: its exchange is aborted already (the response's 'close').
    req.on('error', () => done(new Uint8Array(0)));
    req.on('close', () => { if (!req.complete) done(new Uint8Array(0)); });
  });
}

/** A bound server: `stop` stops accepting and resolves once every connection is closed; `drop` closes
 *  the connections left (called once no request is in flight). */
interface Bound { port: number; stop(): Promise<void>; drop(): void }

async function serveNode(handler: Handler, http: NodeHttp, port: number, hostname: string): Promise<Bound> {
  const stallMs = handler.o.streamStallMs;
  const server = http.createServer((req, res) => {
    const ex = handler.begin();
    // 'close' comes when the response has gone out or the connection dropped: only the second cancels.
    const closed = new Promise<void>((resolve) => res.on('close', () => {
      if (!res.writableFinished) ex.abort(disconnected());
      resolve();
    }));
    // A client that half-closes (FIN) after its request may still read the reply, or may be gone: the
    // two look alike until something is written. So from then on a byte goes out every PROBE_MS (an
    // interim 102 before the reply, an SSE comment in a stream): a gone client answers with a reset,
    // which closes the response and cancels its request; a half-closed one reads past them.
    let stream = false;
    let probe: ReturnType<typeof setInterval> | null = null;
    const onEnd = (): void => {
      probe ??= setInterval(() => {
        if (res.destroyed || res.writableFinished) return;
        try {
          if (!res.headersSent) res.writeProcessing();
          else if (stream) res.write(': \n\n');
        } catch { /* the close that follows cancels the request */ }
      }, PROBE_MS);
    };
    req.socket?.on('end', onEnd);
    void closed.then(() => { req.socket?.off('end', onEnd); if (probe !== null) clearInterval(probe); });
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const method = req.method ?? 'GET';
    const inc: Incoming = {
      method,
      path: q < 0 ? url : url.slice(0, q),
      header: (name) => { const v = req.headers[name]; return v === undefined ? null : Array.isArray(v) ? v.join(', ') : v; },
      read: (limit, timeoutMs) => nodeRead(req, limit, timeoutMs),
      watch: () => {},
    };
    void (async () => {
      try {
        const reply = await handler.handle(inc, ex);
        if (res.destroyed) {
          if ('events' in reply) await reply.events.return();
          return;
        }
        res.writeHead(reply.status, reply.headers);
        if ('body' in reply) { res.end(method === 'HEAD' ? undefined : reply.body); return; }
        res.flushHeaders();
        stream = true;
        for await (const frame of reply.events) {
          if (res.destroyed) break;
          if (!res.write(frame) && !(await drained(res, stallMs))) {
            // The client took nothing for stallMs with the connection's buffers full: its request ends
            // and its place in the queue frees.
            ex.abort(stalled(stallMs));
            res.destroy();
            break;
          }
        }
        if (!res.destroyed) res.end();
      } catch (e) {
        // Only a transport failure lands here (the handler answers its own errors).
        if (!res.destroyed) { try { res.writeHead(500, JSON_TYPE); } catch { /* headers already sent */ } res.end(); }
        void e;
      } finally {
        // Finished once its bytes are out (or its client gone): close() then drops idle connections only.
        await closed;
        ex.finish();
      }
    })();
  });
  // A client that sent its request and half-closed (FIN) still gets the reply.
  server.httpAllowHalfOpen = true;
  await new Promise<void>((resolve, reject) => {
    const onError = (e: Error & { code?: string }): void => {
      server.off('listening', onListening);
      reject(listenError(e, hostname, port));
    };
    const onListening = (): void => { server.off('error', onError); resolve(); };
    server.once('error', onError);
    server.once('listening', onListening);
    server.listen(port, hostname);
  });
  const addr = server.address();
  const bound = typeof addr === 'object' && addr !== null ? addr.port : port;
  return {
    port: bound,
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
    // Keep-alive connections with no request in flight would hold close() open.
    drop: () => server.closeAllConnections(),
  };
}

/** Resolves true once the response can take more, false after `ms` without that (or once it closed: true). */
function drained(res: NodeResponse, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const go = (ok: boolean): void => { clearTimeout(timer); res.off('drain', onDrain); res.off('close', onDrain); resolve(ok); };
    const onDrain = (): void => go(true);
    const timer = setTimeout(() => go(false), ms);
    res.on('drain', onDrain);
    res.on('close', onDrain);
  });
}

async function denoRead(req: Request, limit: number, timeoutMs: number): Promise<Uint8Array | null | 'timeout'> {
  const declared = Number(req.headers.get('content-length'));
  if (!req.body) return new Uint8Array(0);
  const reader = req.body.getReader();
  let timedOut = false;
  const timer = setTimeout(() => { timedOut = true; void reader.cancel().catch(() => {}); }, timeoutMs);
  try {
    // Past the cap the rest is read and dropped (up to DRAIN_BYTES), so the client reads its 413.
    let over = Number.isFinite(declared) && declared > limit;
    if (over && declared > limit + DRAIN_BYTES) { await reader.cancel().catch(() => {}); return null; }
    const parts: Uint8Array[] = [];
    let n = 0;
    for (;;) {
      let r: ReadableStreamReadResult<Uint8Array>;
      try {
        r = await reader.read();
      } catch {
        return timedOut ? (over ? null : 'timeout') : new Uint8Array(0);
      }
      if (r.done) break;
      n += r.value.byteLength;
      if (over || n > limit) {
        if (!over) { over = true; parts.length = 0; n = r.value.byteLength; }
        if (n > DRAIN_BYTES) { await reader.cancel().catch(() => {}); return null; }
        continue;
      }
      parts.push(r.value);
    }
    if (over) return null;
    if (timedOut) return 'timeout';
    const out = new Uint8Array(n);
    let at = 0;
    for (const p of parts) { out.set(p, at); at += p.byteLength; }
    return out;
  } finally {
    clearTimeout(timer);
  }
}

async function serveDeno(handler: Handler, deno: DenoLike, port: number, hostname: string): Promise<Bound> {
  const encoder = new TextEncoder();
  const stallMs = handler.o.streamStallMs;
  let onListen!: (addr: { port: number }) => void;
  const listening = new Promise<{ port: number }>((r) => (onListen = r));
  let server: DenoHttpServer;
  try {
    server = deno.serve({ port, hostname, onListen }, async (req) => {
      const ex = handler.begin();
      // Until the reply is made, the request's own signal says the client went away (Deno 2 also aborts
      // it after every response sent, hence the listener's removal); a stream's body is then watched by
      // its cancel(), which Deno calls when the connection drops.
      const onAbort = (): void => ex.abort(disconnected());
      let watched = false;
      const url = new URL(req.url);
      const inc: Incoming = {
        method: req.method,
        path: url.pathname,
        header: (name) => req.headers.get(name),
        read: (limit, timeoutMs) => denoRead(req, limit, timeoutMs),
        watch: () => {
          watched = true;
          req.signal.addEventListener('abort', onAbort);
          if (req.signal.aborted) onAbort();
        },
      };
      let reply: Reply;
      try {
        reply = await handler.handle(inc, ex);
      } finally {
        if (watched) req.signal.removeEventListener('abort', onAbort);
      }
      if ('body' in reply) {
        ex.finish();
        return new Response(reply.status === 204 || req.method === 'HEAD' ? null : reply.body, { status: reply.status, headers: reply.headers });
      }
      const events = reply.events;
      // Deno pulls a frame when the connection can take one: a pull that does not come for stallMs
      // while frames wait means the client stopped reading.
      let watchdog: ReturnType<typeof setTimeout> | null = null;
      let ended = false;
      const end = async (): Promise<void> => {
        if (ended) return;
        ended = true;
        if (watchdog !== null) clearTimeout(watchdog);
        await events.return();
        ex.finish();
      };
      const body = new ReadableStream<Uint8Array>({
        async pull(c) {
          if (watchdog !== null) clearTimeout(watchdog);
          const r = await events.next();
          if (r.done) { c.close(); await end(); return; }
          c.enqueue(encoder.encode(r.value));
          watchdog = setTimeout(() => {
            ex.abort(stalled(stallMs));
            try { c.error(stalled(stallMs)); } catch { /* already closed */ }
            void end();
          }, stallMs);
        },
        async cancel() {
          ex.abort(disconnected());
          await end();
        },
      }, { highWaterMark: 0 });
      return new Response(body, { status: reply.status, headers: reply.headers });
    });
  } catch (e) {
    throw listenError(e as Error & { code?: string }, hostname, port);
  }
  const addr = await listening;
  // shutdown() closes idle connections itself and waits for the responses in flight.
  return { port: addr.port, stop: () => server.shutdown(), drop: () => {} };
}

// ---------------------------------------------------------------------------------------- serve()

/**
 * Serves `model` over HTTP with OpenAI's routes: POST /v1/chat/completions, POST /v1/completions,
 * POST /v1/embeddings (an encoder-only model's), POST /v1/audio/transcriptions and /v1/audio/translations
 * (a speech model's, multipart WAV uploads), GET /v1/models (and /v1/models/<id>), GET /health, and GET /metrics
 * (a decoder's engine counters in Prometheus' text format, under vLLM's names: serve/metrics.ts).
 * Node (node:http) and Deno (Deno.serve); a browser has no server to offer and gets a named error.
 */
export async function serve(model: ServableModel, opts: ServeOptions = {}): Promise<Server> {
  check(model !== null && typeof model === 'object', OP, 'model', 'a loaded Model', model);
  check(typeof model.id === 'string' && model.id.length > 0, OP, 'model.id', 'a non-empty string', model.id);
  const serves = typeof model.chat?.completions?.create === 'function' || typeof model.completions?.create === 'function'
    || typeof model.embeddings?.create === 'function' || typeof model.transcribe === 'function';
  check(serves, OP, 'model', 'a model with chat.completions.create and completions.create (a decoder), embeddings.create (an encoder) or transcribe (a speech model)', model);
  check(opts !== null && typeof opts === 'object', OP, 'opts', '{ port?, hostname?, signal?, maxQueue?, apiKey?, maxBodyBytes?, log?, cors?, allowedHosts?, bodyTimeoutMs?, streamStallMs?, imageUrls? }', opts);
  const known = ['port', 'hostname', 'signal', 'maxQueue', 'apiKey', 'maxBodyBytes', 'log', 'cors', 'allowedHosts', 'bodyTimeoutMs', 'streamStallMs', 'imageUrls'];
  for (const k of Object.keys(opts)) check(known.includes(k), OP, `opts.${k}`, `one of the options ${known.join(', ')}`, `an unknown option '${k}'`);
  const port = opts.port ?? 8000;
  check(Number.isInteger(port) && port >= 0 && port <= 65535, OP, 'opts.port', 'an integer from 0 to 65535 (0: any free port)', port);
  const hostname = opts.hostname ?? '127.0.0.1';
  check(typeof hostname === 'string' && hostname.length > 0, OP, 'opts.hostname', "a host name or address ('127.0.0.1', '0.0.0.0', '::')", hostname);
  const maxQueue = opts.maxQueue ?? 256;
  check(Number.isInteger(maxQueue) && maxQueue > 0, OP, 'opts.maxQueue', 'a positive integer', maxQueue);
  const maxBodyBytes = opts.maxBodyBytes ?? 16 * MiB;
  check(Number.isInteger(maxBodyBytes) && maxBodyBytes > 0, OP, 'opts.maxBodyBytes', 'a positive integer', maxBodyBytes);
  if (opts.apiKey !== undefined) check(typeof opts.apiKey === 'string' && opts.apiKey.length > 0, OP, 'opts.apiKey', 'a non-empty string', opts.apiKey);
  if (opts.log !== undefined) check(typeof opts.log === 'function', OP, 'opts.log', 'a function', opts.log);
  if (opts.cors !== undefined) {
    check(typeof opts.cors === 'string' && isCorsOrigin(opts.cors), OP, 'opts.cors',
      "an origin ('http://localhost:5173': scheme, host and port, no path) or '*' (any page)", opts.cors);
  }
  if (opts.allowedHosts !== undefined) {
    check(Array.isArray(opts.allowedHosts) && opts.allowedHosts.length > 0 && opts.allowedHosts.every((h) => typeof h === 'string' && h.length > 0 && !/[\s/]/.test(h)),
      OP, 'opts.allowedHosts', "a non-empty array of host names or addresses without ports ('example.com', '10.0.0.5'), or ['*']", opts.allowedHosts);
  }
  const bodyTimeoutMs = opts.bodyTimeoutMs ?? 30_000;
  check(Number.isInteger(bodyTimeoutMs) && bodyTimeoutMs > 0, OP, 'opts.bodyTimeoutMs', 'a positive integer (milliseconds)', bodyTimeoutMs);
  const streamStallMs = opts.streamStallMs ?? 30_000;
  check(Number.isInteger(streamStallMs) && streamStallMs > 0, OP, 'opts.streamStallMs', 'a positive integer (milliseconds)', streamStallMs);
  if (opts.imageUrls !== undefined) check(typeof opts.imageUrls === 'boolean', OP, 'opts.imageUrls', 'a boolean (true: fetch the http(s) image URLs clients send)', opts.imageUrls);
  check(!isBadIPv4(hostname), OP, 'opts.hostname', 'an IPv4 address of four numbers from 0 to 255', hostname);
  const signal = opts.signal;
  if (signal !== undefined) {
    check(typeof AbortSignal !== 'undefined' && signal instanceof AbortSignal, OP, 'opts.signal', 'an AbortSignal', signal);
    check(!signal.aborted, OP, 'opts.signal', 'a signal not yet aborted', 'an aborted one');
  }

  // Audio uploads may reach OpenAI's 25 MiB unless the caller set a body limit of their own.
  const handler = new Handler(model, { ...opts, hostname, maxQueue, maxBodyBytes, bodyTimeoutMs, streamStallMs, audioBodyBytes: opts.maxBodyBytes ?? AUDIO_BODY_BYTES });
  const deno = (globalThis as { Deno?: DenoLike }).Deno;
  let bound: Bound;
  if (deno && typeof deno.serve === 'function') {
    bound = await serveDeno(handler, deno, port, hostname);
  } else {
    const g = globalThis as { process?: { versions?: { node?: string } } };
    if (typeof g.process?.versions?.node !== 'string') {
      throw new WebinferError(`${OP}: runtime: expected Node (node:http) or Deno (Deno.serve), got a runtime with neither (a browser page cannot listen for HTTP requests)`);
    }
    // Loaded only here, and out of the bundler's sight, so that the library still loads in a page.
    const specifier = 'node:http';
    const http = (await import(/* @vite-ignore */ specifier)) as NodeHttp;
    bound = await serveNode(handler, http, port, hostname);
  }

  let closed: Promise<void> | null = null;
  const close = (): Promise<void> => {
    closed ??= (async () => {
      handler.closing = true;
      const stopped = bound.stop();
      for (const ex of handler.exchanges) ex.abort(shuttingDown());
      await Promise.all([...handler.exchanges].map((ex) => ex.done));
      bound.drop();
      await stopped;
    })();
    return closed;
  };
  signal?.addEventListener('abort', () => void close(), { once: true });
  const host = hostname.includes(':') ? `[${hostname}]` : hostname;
  return { url: `http://${host}:${bound.port}`, port: bound.port, close };
}
