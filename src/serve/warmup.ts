// A server's warm-up: before it listens, the request shapes it meets first run once, so their GPU
// pipelines exist when the first client comes. On a software adapter a first request otherwise waits
// minutes for its compiles (issue 40: 880 s for a server's first completion), and a synchronous compile
// (createComputePipeline, while a step is recorded) holds the JS event loop, so every other request,
// timer and signal with it.
//
// Where the device compiles asynchronously (every current runtime), the warm-up does not compile
// while recording: it first traces its requests (PipelineCache.deferCompiles: each kernel a step asks
// for is handed out over a stand-in pipeline that computes nothing), then compiles all of them at
// once with createComputePipelineAsync (the event loop keeps running), then runs the same shapes for
// real on other prompts, which now find every pipeline (and would compile what the trace missed).
//
// What the trace computed is garbage: once it is done, the blocks its prompts left in the prefix cache
// are dropped (KVCacheManager.dropCachedBlocks), so no later prompt can find them; the real pass's
// prompts leave correct blocks, as any request does.
import { WebinferError } from '../core/errors.js';
import { PipelineCache } from '../core/pipeline.js';

export interface WarmupOptions {
  /** One line per phase: what is warming, then the time it took. */
  onProgress?: (line: string) => void;
  /** Stops between requests (the one running is aborted); the trace's pipelines are still compiled first. */
  signal?: AbortSignal;
  /** 'async' (default): trace, compile with createComputePipelineAsync, then run; 'sync': just run the
   *  requests, compiling as a first request would (the event loop waits on each compile). */
  compile?: 'async' | 'sync';
}

export interface WarmupResult {
  /** Wall time of the whole warm-up. */
  ms: number;
  /** Pipelines compiled by it (0 when everything was compiled already). */
  pipelines: number;
}

type Create = (req: unknown) => Promise<unknown> | AsyncIterable<unknown>;

/** What the warm-up uses of a model: the OpenAI surface and a few sizes, all optional. */
interface Warmable {
  readonly id?: string;
  readonly architecture?: string;
  readonly vocabSize?: number;
  readonly maxContext?: number;
  readonly capacity?: number;
  readonly blockSize?: number;
  readonly completions?: { create: Create };
  readonly embeddings?: { create: (req: unknown) => Promise<unknown> };
}

/** One request shape: its name for the progress line, and the call for a prompt seed. */
interface Shape {
  readonly name: string;
  run(seed: number, signal: AbortSignal | undefined): Promise<void>;
}

/**
 * The model's pipeline cache. Models keep their runtime private (a model answers "run this step"
 * and exposes no engine); every model class holds it as `rt`, read here and never written.
 */
function pipelinesOf(model: object): PipelineCache | null {
  const rt = (model as { rt?: { pipelines?: unknown } }).rt;
  return rt?.pipelines instanceof PipelineCache ? rt.pipelines : null;
}

/** `n` pseudo-random ids below `vocab` (an LCG): prompts no client sends by chance. */
function promptIds(n: number, vocab: number, seed: number): number[] {
  const out: number[] = [];
  let x = (seed * 2654435761) >>> 0;
  for (let i = 0; i < n; i++) {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    out.push(x % vocab);
  }
  return out;
}

async function drain(r: Promise<unknown> | AsyncIterable<unknown>): Promise<void> {
  if (Symbol.asyncIterator in Object(r)) {
    for await (const _ of r as AsyncIterable<unknown>) { /* each chunk, as a client reads them */ }
  } else {
    await r;
  }
}

function notSupported(e: unknown): boolean {
  return (e as { code?: unknown } | null)?.code === 'model_not_supported';
}

function decoderShapes(m: Warmable, create: Create): Shape[] {
  const vocab = m.vocabSize ?? 2;
  const limit = Math.min(m.capacity ?? Infinity, m.maxContext ?? Infinity);
  const NEW = 4;
  const fit = (n: number) => Math.max(1, Math.min(n, limit - NEW - 1));
  // Prompts of 3, 6, 12 and ~100 tokens, decodes of 1, 2 and (all at once) 6 rows: the products take
  // a kernel per power of two of rows up to 16 (gemm.ts's GEMV row tiles) and the tiled GEMM and
  // flash attention beyond, where a many-token prefill chunk over several cache blocks runs.
  const long = fit(Math.max(96, 3 * (m.blockSize ?? 16) + 1));
  const base = { max_tokens: NEW, ignore_eos: true };
  const one = (name: string, len: number, extra: Record<string, unknown>): Shape => ({
    name,
    run: (seed, signal) => drain(create({ ...base, ...extra, prompt: promptIds(fit(len), vocab, seed), signal })),
  });
  return [
    one('greedy', 3, { temperature: 0 }),
    one(`a ${long}-token prompt`, long, { temperature: 0 }),
    one('n: 2 sampled with a seed', 6, { n: 2, temperature: 0.8, top_p: 0.95, seed: 1 }),
    one('logprobs', 12, { temperature: 0, logprobs: 2 }),
    one('streamed', 5, { temperature: 0, stream: true, stream_options: { include_usage: true } }),
  ];
}

function encoderShapes(m: Warmable, create: (req: unknown) => Promise<unknown>): Shape[] {
  const vocab = m.vocabSize ?? 2;
  const long = Math.max(2, Math.min(96, (m.maxContext ?? 96)));
  return [
    { name: 'an 8-token input', run: (seed) => create({ input: [promptIds(Math.min(8, long), vocab, seed)] }).then(() => undefined) },
    { name: `a batch with a ${long}-token input`, run: (seed) => create({ input: [promptIds(long, vocab, seed), promptIds(3, vocab, seed + 1)] }).then(() => undefined) },
  ];
}

/**
 * Runs the request shapes a server meets first (through the model's own OpenAI surface, with
 * token-id prompts: no tokenizer needed) so that their pipelines are compiled before it listens: a
 * greedy completion, one of a long prompt (a many-token prefill chunk), an `n: 2` sampled one with a
 * seed, one with logprobs, a streamed one, each alone and then all together (a batch of prefills and
 * decodes). An encoder warms embeddings; a model with neither returns at once, saying so.
 */
export async function warmup(model: object, o: WarmupOptions = {}): Promise<WarmupResult> {
  const t0 = performance.now();
  const progress = o.onProgress ?? (() => undefined);
  let mark = t0;
  /** A line, with the time since the last one (the phase it ended) when asked. */
  const say = (line: string, timed = false): void => {
    const now = performance.now();
    progress(timed ? `${line} (${((now - mark) / 1000).toFixed(1)} s)` : line);
    mark = now;
  };
  const signal = o.signal;
  const m = model as Warmable;
  const name = m.id ?? m.architecture ?? 'the model';
  const cache = pipelinesOf(model);
  const before = cache?.compiled ?? 0;
  const done = (what: string): WarmupResult => {
    const ms = performance.now() - t0;
    const pipelines = (cache?.compiled ?? 0) - before;
    say(`warm-up: ${what} in ${(ms / 1000).toFixed(1)} s, ${pipelines} pipeline${pipelines === 1 ? '' : 's'} compiled`);
    return { ms, pipelines };
  };

  let shapes: Shape[] = [];
  const probe = m.completions?.create;
  if (typeof probe === 'function') shapes = decoderShapes(m, probe);
  const embed = m.embeddings?.create;
  const encoder = typeof embed === 'function' ? encoderShapes(m, embed) : [];
  if (!shapes.length && !encoder.length) {
    say(`warm-up: ${name} serves neither completions nor embeddings: nothing to warm`);
    return { ms: performance.now() - t0, pipelines: 0 };
  }

  /** Runs each shape alone, then (decoders) all of them at once; false when the model refuses the kind. */
  const pass = async (list: Shape[], seed: number): Promise<boolean> => {
    for (let i = 0; i < list.length; i++) {
      signal?.throwIfAborted();
      try {
        await list[i]!.run(seed + i, signal);
      } catch (e) {
        if (i === 0 && notSupported(e)) return false;
        throw e;
      }
    }
    signal?.throwIfAborted();
    if (list.length > 2) await Promise.all(list.map((s, i) => s.run(seed + 100 + i, signal)));
    return true;
  };
  /** The shapes the model serves: completions, else (an encoder refuses them) embeddings. */
  const run = async (seed: number): Promise<boolean> => {
    if (shapes.length && await pass(shapes, seed)) return true;
    shapes = [];
    return encoder.length > 0 && pass(encoder, seed);
  };

  const list = (): string => (shapes.length ? shapes : encoder).map((s) => s.name).join(', ');
  const useAsync = o.compile !== 'sync' && cache !== null && cache.canCompileAsync && !cache.deferring;
  if (!useAsync) {
    say(`warm-up: ${name}: ${list()}`);
    if (!await run(1)) return done(`${name} serves no completions or embeddings: nothing warmed`);
    return done('warmed');
  }

  // The trace: every kernel the shapes ask for, none compiled (whatever the requests return is garbage).
  say(`warm-up: ${name}: tracing ${list()}`);
  let served = false;
  let traceError: unknown = null;
  cache.deferCompiles();
  try {
    served = await run(1_000_001);
  } catch (e) {
    traceError = e;
  } finally {
    // Always: the traced kernels hold stand-ins until compiled, and other parts of the model keep them.
    say(`warm-up: traced; compiling ${cache.pendingCompiles} pipeline${cache.pendingCompiles === 1 ? '' : 's'} asynchronously`, true);
    const n = await cache.compileDeferred();
    say(`warm-up: compiled ${n} pipeline${n === 1 ? '' : 's'} asynchronously`, true);
    // The trace's blocks hold garbage: no prompt may find them in the prefix cache.
    (model as { kv?: { dropCachedBlocks?: () => number } }).kv?.dropCachedBlocks?.();
  }
  if (traceError !== null) {
    if (signal?.aborted) throw traceError;
    // A trace that failed (its garbage reached a check) still compiled what it saw: the real pass
    // compiles the rest synchronously.
    say(`warm-up: the trace stopped early (${(traceError as Error)?.message ?? traceError}); running for real`);
  }
  if (!served && traceError === null) return done(`${name} serves no completions or embeddings: nothing warmed`);
  const late = cache.compiled;
  say(`warm-up: running ${list()}`);
  if (!await run(1)) throw new WebinferError(`warmup: ${name} refused a request its trace ran`);
  const missed = cache.compiled - late;
  return done(missed ? `warmed (${missed} pipeline${missed === 1 ? '' : 's'} the trace missed compiled synchronously)` : 'warmed');
}
