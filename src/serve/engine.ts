// The request engine (SPEC §9): one per model. Requests arrive at any time; each step the scheduler
// places the running requests' decodes first, then prompt chunks under the token budget (requests that
// have waited first), records the step through the model (serve/model.ts, Model.recordStep: the block
// manager's placement, then models/model.ts's forward pass) and streams the sampled tokens back to each
// request. Up to tuning.stepsInFlight steps are in flight: a request's next input can be the previous
// step's sampled id still on the GPU.
//
// Blocks are taken as sequences grow. When a decode finds none free, the newest running sequences are
// preempted: their blocks go back (the prefix cache usually keeps them) and they wait to be recomputed
// from their prompt and the tokens they had (vLLM's recompute policy). A sequence's draws are keyed by
// its request's seed and its own token index, so neither the batch, the prefix cache nor a preemption
// changes what it samples. A request that could never fit the cache is refused before it starts.
//
// Requests whose sampling needs their own newest token on the host (penalties, a grammar) sit out a step
// when that token is still in flight; the others never wait for the host.
//
// An encoder-decoder's per-sequence state beside its blocks (its cross-attention cache) is the runner's:
// the engine asks for it when it places a sequence (admission, or readmission after a preemption) with
// the request's encoder input, and frees it with the sequence's blocks; a runner with no room for it
// now makes the sequence wait, as a lack of blocks does.
import { check, WebinferError } from '../core/errors.js';
import { EDIT_WORDS, packRowSampling, ROW_PARAM_WORDS } from '../ops/sample.js';
import type { StepProcessing, StepRecord, StepRow } from '../models/step.js';
import type { KVCacheManager } from './kv_manager.js';
import { E2E_BUCKETS, Histogram, ITL_BUCKETS, TTFT_BUCKETS, type EndReason, type EngineMetrics } from './metrics.js';
import { ngramProposals, SpecCost, SpecState, type SpecCosts, type SpeculationConfig } from './speculative.js';

/** Per-request sampling settings (checked by the caller: generate, or the OpenAI layer). */
export interface Sampling {
  /** 0: greedy. */
  temperature: number;
  topP: number;
  topK: number;
  minP: number;
  /** The request's random stream; undefined: a fresh one. */
  seed?: number;
  presencePenalty: number;
  frequencyPenalty: number;
  repetitionPenalty: number;
  /** Added to the logits of these tokens (OpenAI's logit_bias). */
  logitBias?: ReadonlyMap<number, number>;
}

export const GREEDY: Sampling = Object.freeze({ temperature: 0, topP: 1, topK: 0, minP: 0, presencePenalty: 0, frequencyPenalty: 0, repetitionPenalty: 1 });

/** A per-step token mask for a constrained choice (serve/grammar.ts makes them from a response_format). */
export interface TokenConstraint {
  fillMask(mask: Uint32Array): void;
  accept(token: number): boolean;
  readonly done: boolean;
}

export type FinishReason = 'stop' | 'length';

export interface TokenLogprob {
  token: number;
  logprob: number;
  /** The most probable tokens at this position (when asked for). */
  top: { token: number; logprob: number }[];
}

export interface RequestOptions {
  prompt: Int32Array;
  /** New tokens at most, per choice. */
  maxTokens: number;
  /** Choices sampled from the prompt (OpenAI's n); they share its cached blocks. */
  n?: number;
  sampling?: Sampling;
  /** Tokens that end a choice (reported, with finish 'stop'). */
  stopTokens?: ReadonlySet<number>;
  /** null: none; k ≥ 0: each token's logprob and the k most probable. */
  logprobs?: number | null;
  /** Makes each choice's constraint (a grammar). */
  constraint?: () => TokenConstraint;
  signal?: AbortSignal;
  /** Tokens as they come, per choice; throwing (or a rejected promise) ends this request with that error. */
  onTokens?: (choice: number, tokens: number[], logprobs: TokenLogprob[] | null) => void | Promise<void>;
  /** What keeps this request's cached blocks apart from other requests' with equal ids. */
  cacheSalt?: string;
  /** An encoder-decoder's input (Whisper's log-mel features), handed to the runner's admitSequence. */
  encoderInput?: unknown;
  /** The random stream of choice 0 (choice i draws from stream + i; default 0): a caller whose requests
   *  share a seed keeps them apart so (Whisper's generate: the prompt's index in its call). */
  stream?: number;
  /** false: this request never speculates (when the engine does: RequestEngine.speculation). */
  speculative?: boolean;
}

/** A submitted request: its result, and a way to end one choice early (a stop string matched). */
export interface RequestHandle {
  readonly result: Promise<RequestResult>;
  /** Ends choice i with finish 'stop' (its blocks go back at once); the result resolves once all have ended. */
  stopChoice(i: number): void;
}

export interface RequestResult {
  tokens: number[][];
  finish: FinishReason[];
  promptTokens: number;
  /** Prompt tokens the prefix cache gave the first choice. */
  cachedTokens: number;
  /** Proposals its choices' verification rows carried, and those accepted (speculative decoding; 0 and 0 without). */
  specProposed: number;
  specAccepted: number;
}

/** What the model does for the engine: one step recorded and submitted. */
export interface StepRunner {
  readonly kv: KVCacheManager;
  readonly maxTokensPerStep: number;
  readonly maxSeqsPerStep: number;
  readonly vocabSize: number;
  readonly capacity: number;
  /** The KV cache's element type ('f16', 'fp8_ds_mla' ...), for the metrics' cache_config_info. */
  readonly cacheDType?: string;
  /** The step about to be recorded. */
  readonly stepNo: number;
  /** Steps whose layers were replayed and recorded anew (the engine's counters copy them per step). */
  readonly graphStats?: { readonly replayed: number; readonly recorded: number };
  /** Steps in flight, read when the engine starts a run. */
  stepsInFlight(op: string): number;
  assertAlive(op: string): void;
  recordStep(rows: StepRow[], proc: StepProcessing | null): StepRecord;
  /** How many of the next n prompt tokens of sequence `id` from `from` a step may take (at most max) so
   *  that no image block attended to within one step is cut (Gemma 3's); absent: n. */
  imageChunk?(id: string, from: number, n: number, max: number): number;
  /** Whether its steps keep attention's queries in f32 (the engine sets it while it speculates). */
  exactAttention?: boolean;
  /** Makes a sequence's own state beside its blocks (an encoder-decoder's cross-attention cache) from its
   *  request's encoderInput, as the engine places it; `freeBlocks`: the cache's free blocks this step has
   *  not claimed (what the state may take of the engine's blocks); false: no room now (the sequence waits). */
  admitSequence?(id: string, encoderInput: unknown, freeBlocks: number): boolean;
  /** Whether copyBlocks works: a request's choices then fork from its prompt's one computation. */
  canCopyBlocks?(): boolean;
  /** Copies whole cache blocks, [from, to] pairs (a forked choice's copy of the prompt's partial block). */
  copyBlocks?(pairs: readonly (readonly [number, number])[]): void;
  /** Frees what admitSequence made: the sequence finished, failed or was preempted. */
  freeSequence?(id: string): void;
  /** Tokens never sampled (`always`), and not as a choice's first token (`first`): Whisper's
   *  generation_config suppress_tokens and begin_suppress_tokens. */
  readonly suppress?: { readonly always: readonly number[]; readonly first: readonly number[] };
  /** Whether recordStep takes StepRow.sampleAll (verification rows): speculation needs it. */
  readonly verifies?: boolean;
}

/** Test and benchmark hooks of speculation (RequestEngine.specHooks): none in normal use. */
export interface SpecHooks {
  /** Proposals for a choice whose ids so far are `ids` (prompt then output), at most k: in place of n-gram
   *  lookup's or the draft's (`drafted`: what the draft model proposed, which ran all the same; else null). */
  propose?(ids: readonly number[], k: number, drafted: readonly number[] | null): number[];
  /** Asked at each proposal that equals the target's sample: false rejects it all the same (forcing an
   *  acceptance rate; the output stays exact, only fewer tokens come a step). */
  keep?(): boolean;
  /** true: the policy proposes the batch's cap every step, not weighing the steps' costs (tests of the
   *  mechanism on adapters where a verification never pays, as software ones). */
  ignoreCosts?: boolean;
}

interface Choice {
  req: Req;
  index: number;
  id: string;
  /** What a (re)admission prefills: the prompt, then the tokens it had when preempted. */
  input: number[];
  fed: number;
  out: number[];
  /** Samples requested (known or in flight). */
  issued: number;
  state: 'waiting' | 'running' | 'done';
  lastStep: number;
  lastRow: number;
  seed: number;
  constraint: TokenConstraint | null;
  /** Output token counts (penalties). */
  counts: Map<number, number> | null;
  finish: FinishReason | null;
  arrival: number;
  /** performance.now() when its last token reached the host (-1: none yet): inter-token latency. */
  lastAt: number;
  /** Its speculation (null: it never speculates). */
  spec: SpecState | null;
  /** A draft model's proposals, made when the choice had `at` output tokens (speculative method 'draft'). */
  drafted: { at: number; props: number[] } | null;
}

interface Req {
  o: RequestOptions;
  prompt: number[];
  choices: Choice[];
  sampling: Sampling;
  needsHost: boolean;
  cachedTokens: number;
  specProposed: number;
  specAccepted: number;
  finished: boolean;
  /** performance.now() at submit, and when its first token reached the host (-1: not yet). */
  t0: number;
  firstAt: number;
  resolve: (r: RequestResult) => void;
  reject: (e: unknown) => void;
  onAbort?: () => void;
}

interface InFlight {
  /** Each sampled choice's first sampled row; `props`: the proposals its verification row carried. */
  rec: StepRecord; rows: { c: Choice; row: number; props?: number[] }[]; lpRows: Choice[];
  /** performance.now() once submitted; the step's prompt-chunk tokens (its decode rows are the rest of rec.T). */
  submitted: number; prefill: number; decodes: number;
  /** performance.now() when the loop began the step (before a draft's proposals); whether it verifies;
   *  whether another step was in flight when it was submitted (its time then is a pipelined step's). */
  planned: number; verifies: boolean; pipelined: boolean;
}

/** What the engine has done since it was made (model.engine.counters); differences over a run measure it. */
export interface EngineCounters {
  steps: number;
  /** Tokens placed in the cache: decode rows and prompt chunks. */
  tokens: number;
  generated: number;
  /** Host ms producing steps: scheduleMs + recordMs. */
  hostMs: number;
  preemptions: number;
  /** Host ms choosing each step's rows, blocks and sampling settings (recording excluded). */
  scheduleMs: number;
  /** Host ms in the runner's recordStep: placement, uploads, encoding (or replaying) and submitting. */
  recordMs: number;
  /** Host ms waiting for steps' sampled ids to come back: the GPU's time the host could not hide. */
  waitMs: number;
  /** Host ms handing the tokens to their requests (callbacks, constraints, logprobs). */
  applyMs: number;
  /** Steps whose layers were recorded anew, and replayed (a runner with step graphs; else 0). */
  recorded: number;
  replayed: number;
  /** Tokens of decode rows, and of prompt chunks (tokens = their sum). */
  decodeTokens: number;
  prefillTokens: number;
  /** Steps holding both decode rows and prompt chunks. */
  mixedSteps: number;
  /** The prompt-chunk budget of the last step that had decodes beside waiting prompts (tokens; see
   *  RequestEngine.prefillBudget). */
  chunkBudget: number;
  /** Speculation: verification rows, the proposals they carried, and those accepted (wasted: the rest). */
  specRows: number;
  specProposed: number;
  specAccepted: number;
  /** Host ms waiting for a draft model's proposals (its steps run on the same GPU: the target's waits). */
  draftMs: number;
}

/**
 * The time a step takes as the engine sees it (submitted to its ids back, or from the step before
 * coming back when the GPU was still busy with it), as a decode-only step's time for its number of
 * decode rows plus a cost per prompt-chunk token: moving averages (recent steps weigh most), the
 * decode-only time kept per power-of-two bucket of decode rows (a batch of 32 reads more than one of 1).
 * The chunked-prefill budget is their ratio, the prompt tokens whose cost equals a decode-only step's
 * of the same batch: a step holding decodes and a chunk then takes about twice a decode-only step, so a
 * running request's time per token stays within about 2× the decode step's while prompts still get that
 * share of the GPU.
 */
export class StepCost {
  /** Decode-only step ms by bucket of decode rows (EMA; bucket b: 2^(b-1) < rows <= 2^b), NaN until seen. */
  readonly decodeMsBy: number[] = [];
  /** ms per prompt-chunk token beyond the decode-only time (EMA), NaN until seen. */
  tokenMs = NaN;
  constructor(private readonly alpha = 0.2, private readonly minTokens = 16) {}

  private static bucket(decodes: number): number {
    return decodes <= 1 ? 0 : Math.ceil(Math.log2(decodes));
  }

  /** A decode-only step's ms at `decodes` rows: its bucket's, else the nearest bucket seen's (NaN: none). */
  decodeMs(decodes: number): number {
    const b = StepCost.bucket(decodes), d = this.decodeMsBy;
    for (let k = 0; k < 64; k++) {
      if (d[b + k] !== undefined && !Number.isNaN(d[b + k])) return d[b + k];
      if (k && b - k >= 0 && d[b - k] !== undefined && !Number.isNaN(d[b - k])) return d[b - k];
    }
    return NaN;
  }

  /** Sets a bucket's decode-only time (tests; a caller that measured it). */
  setDecodeMs(decodes: number, ms: number): void {
    this.decodeMsBy[StepCost.bucket(decodes)] = ms;
  }

  /** One step's time: `prefill` prompt-chunk tokens beside `decodes` decode rows. */
  observe(prefill: number, decodes: number, ms: number): void {
    if (!(ms > 0) || !Number.isFinite(ms)) return;
    if (prefill === 0) {
      if (decodes === 0) return;
      const b = StepCost.bucket(decodes), old = this.decodeMsBy[b];
      this.decodeMsBy[b] = old === undefined || Number.isNaN(old) ? ms : old + this.alpha * (ms - old);
      return;
    }
    const base = this.decodeMs(decodes);
    if (prefill < this.minTokens || Number.isNaN(base)) return;
    const per = Math.max(0, ms - base) / prefill;
    this.tokenMs = Number.isNaN(this.tokenMs) ? per : this.tokenMs + this.alpha * (per - this.tokenMs);
  }

  /** Prompt tokens costing one decode-only step of `decodes` rows, or null while unknown. */
  tokensPerDecodeStep(decodes: number): number | null {
    const base = this.decodeMs(decodes);
    if (Number.isNaN(base) || Number.isNaN(this.tokenMs)) return null;
    return this.tokenMs > 0 ? base / this.tokenMs : Infinity;
  }
}

/** The smallest prompt chunk the automatic budget gives a step with decodes: prompts keep moving. */
export const MIN_CHUNK = 64;

/** A draft request's stop tokens: none (it proposes k tokens whatever they are). */
const NO_STOP: ReadonlySet<number> = new Set();

/** A choice's ids so far: its prompt, then its output (proposals follow them). */
const idsOf = (c: { req: { prompt: number[] }; out: number[] }): number[] => (c.out.length ? [...c.req.prompt, ...c.out] : c.req.prompt);

/** How requests ended and the engine's snapshot for GET /metrics: serve/metrics.ts defines them (it
 *  writes them out), so that the engine imports the metrics module and not the other way round. */
export type { EndReason, EngineMetrics } from './metrics.js';

/** A random u32: the seed of a request that names none (SPEC §9: no seed, a fresh stream). */
export function freshSeed(): number {
  const c = (globalThis as { crypto?: Crypto }).crypto;
  if (c?.getRandomValues) return c.getRandomValues(new Uint32Array(1))[0];
  return Math.floor(Math.random() * 2 ** 32) >>> 0;
}

export class RequestEngine {
  readonly counters: EngineCounters = {
    steps: 0, tokens: 0, generated: 0, hostMs: 0, preemptions: 0, scheduleMs: 0, recordMs: 0, waitMs: 0, applyMs: 0,
    recorded: 0, replayed: 0, decodeTokens: 0, prefillTokens: 0, mixedSteps: 0, chunkBudget: 0,
    specRows: 0, specProposed: 0, specAccepted: 0, draftMs: 0,
  };
  /**
   * Speculative decoding for requests submitted from now on (null: none): proposals by n-gram lookup or
   * a draft model, verified in the step (see serve/speculative.ts). Only for runners that verify (StepRunner.verifies);
   * requests with a grammar, penalties or logprobs never speculate (they need each token on the host
   * before the next is drawn).
   */
  get speculation(): SpeculationConfig | null { return this.specCfg; }
  set speculation(v: SpeculationConfig | null) {
    check(v === null || (typeof v === 'object' && (v.method === 'ngram' || v.method === 'draft')), 'RequestEngine', 'speculation', "null or a parsed { method: 'ngram' | 'draft', ... } (parseSpeculation)", v);
    check(v === null || !!this.m.verifies, 'RequestEngine', 'speculation', 'null for a model whose steps do not verify proposals (an encoder-decoder)', v);
    this.specCfg = v;
    // Plain rows then attend on f32 queries as verification rows do (Runtime.exactQueries).
    if (this.m.exactAttention !== undefined) this.m.exactAttention = v !== null;
  }
  private specCfg: SpeculationConfig | null = null;
  /** Test and benchmark hooks (SpecHooks). */
  specHooks: SpecHooks | null = null;
  /**
   * Prompt tokens a step may take beside decode rows (vLLM's chunked prefill: decodes first, then prompt
   * chunks fill the rest). 'auto' (the default): as many as cost one decode-only step by the engine's own
   * timing (StepCost), at least MIN_CHUNK, until measured the runner's maxTokensPerStep; a number: that
   * many. A step without decodes always takes up to maxTokensPerStep.
   */
  get prefillBudget(): number | 'auto' { return this.budgetSetting; }
  set prefillBudget(v: number | 'auto') {
    check(v === 'auto' || (Number.isInteger(v) && v > 0), 'RequestEngine', 'prefillBudget', "'auto' or a positive integer (tokens)", v);
    this.budgetSetting = v;
  }
  private budgetSetting: number | 'auto' = 'auto';
  /** The step timings the automatic budget is made from. */
  readonly stepCost = new StepCost();
  /** Verification steps' costs (the speculation policy's). */
  readonly specCost = new SpecCost();
  private lastDone = 0;
  /** When the loop began the step being planned (InFlight.planned). */
  private planStart = 0;
  /** Whether choices fork (StepRunner.copyBlocks), known at the first step. */
  private forkable: boolean | null = null;
  private readonly waiting: Choice[] = [];
  private readonly running: Choice[] = [];
  private readonly inflight: InFlight[] = [];
  private readonly exclusive: { fn: () => Promise<unknown>; resolve: (v: unknown) => void; reject: (e: unknown) => void }[] = [];
  private driving = false;
  private arrivals = 0;
  private nextId = 0;
  private inFlightSteps = 3;
  private destroyed: string | null = null;
  private paramWords = new Uint32Array(0);
  private editWords = new Uint32Array(0);
  private maskWords = new Uint32Array(0);
  private promptTokens = 0;
  private readonly ended: Record<EndReason, number> = { stop: 0, length: 0, abort: 0, error: 0 };
  private readonly ttft = new Histogram(TTFT_BUCKETS);
  private readonly itl = new Histogram(ITL_BUCKETS);
  private readonly e2e = new Histogram(E2E_BUCKETS);

  constructor(private readonly m: StepRunner) {}

  /** A snapshot of the engine's state and counters (GET /metrics; see EngineMetrics). */
  metrics(): EngineMetrics {
    const running = new Set<Req>();
    for (const c of this.running) running.add(c.req);
    const waiting = new Set<Req>();
    for (const c of this.waiting) if (!running.has(c.req)) waiting.add(c.req);
    const kv = this.m.kv;
    return {
      running: running.size,
      waiting: waiting.size,
      numBlocks: kv.numBlocks,
      blockSize: kv.blockSize,
      cacheDtype: this.m.cacheDType ?? 'auto',
      prefixCaching: kv.prefixCaching,
      kvCacheUsage: kv.usage,
      prefixCacheQueries: kv.stats.queries,
      prefixCacheHits: kv.stats.hits,
      promptTokens: this.promptTokens,
      generationTokens: this.counters.generated,
      preemptions: this.counters.preemptions,
      specDrafts: this.counters.specRows,
      specDraftTokens: this.counters.specProposed,
      specAcceptedTokens: this.counters.specAccepted,
      finished: { ...this.ended },
      ttft: this.ttft.snapshot(),
      itl: this.itl.snapshot(),
      e2e: this.e2e.snapshot(),
    };
  }

  /** Requests not finished. */
  get pending(): number {
    const reqs = new Set<Req>();
    for (const c of [...this.waiting, ...this.running]) reqs.add(c.req);
    return reqs.size;
  }

  /** Tokens a request may hold at most: prompt and new tokens within the cache. */
  get capacity(): number {
    return this.m.capacity;
  }

  /**
   * Adds a request; it joins the running batch at the next step. Its result resolves with every
   * choice's tokens once all have finished; rejects on abort (the signal's reason), a callback's
   * error, or a fault.
   */
  submit(o: RequestOptions, op = 'submit'): RequestHandle {
    const refused = (e: unknown): RequestHandle => {
      const result = Promise.reject(e);
      return { result, stopChoice: () => undefined };
    };
    if (this.destroyed) return refused(new WebinferError(`${op}: ${this.destroyed}`));
    this.m.assertAlive(op);
    const n = o.n ?? 1;
    const total = o.prompt.length + o.maxTokens;
    if (total > this.m.capacity) {
      return refused(new WebinferError(`${op}: the prompt (${o.prompt.length} tokens) and max tokens (${o.maxTokens}) need ${total} tokens; the cache holds ${this.m.capacity}`));
    }
    if (o.signal?.aborted) return refused(o.signal.reason ?? new DOMException('the request was aborted', 'AbortError'));
    const sampling = o.sampling ?? GREEDY;
    const needsHost = !!o.constraint || sampling.presencePenalty !== 0 || sampling.frequencyPenalty !== 0 || sampling.repetitionPenalty !== 1;
    // Each choice's constraint is made before anything is queued: a factory that throws refuses this
    // request alone, with nothing half-added.
    let constraints: (TokenConstraint | null)[];
    try {
      constraints = Array.from({ length: n }, () => (o.constraint ? o.constraint() : null));
    } catch (e) {
      return refused(e);
    }
    let req!: Req;
    const result = new Promise<RequestResult>((resolve, reject) => {
      const prompt = Array.from(o.prompt);
      req = { o, prompt, choices: [], sampling, needsHost, cachedTokens: 0, specProposed: 0, specAccepted: 0, finished: false, t0: performance.now(), firstAt: -1, resolve, reject };
      const seed = sampling.seed ?? freshSeed();
      const arrival = this.arrivals++;
      for (let i = 0; i < n; i++) {
        const c: Choice = {
          req, index: i, id: `r${this.nextId++}`, input: prompt, fed: 0, out: [], issued: 0, state: 'waiting', lastStep: -1, lastRow: -1,
          seed, constraint: constraints[i], counts: needsHost ? new Map() : null, finish: null, arrival, lastAt: -1,
          spec: this.specCfg && o.speculative !== false && !needsHost && o.logprobs == null ? new SpecState(this.specCfg) : null, drafted: null,
        };
        req.choices.push(c);
        this.waiting.push(c);
      }
      if (o.signal) {
        const sig = o.signal;
        req.onAbort = () => this.fail(req, sig.reason ?? new DOMException('the request was aborted', 'AbortError'));
        sig.addEventListener('abort', req.onAbort, { once: true });
      }
      this.drive();
    });
    return {
      result,
      stopChoice: (i: number) => {
        const c = req.choices[i];
        if (!c || c.state === 'done' || req.finished) return;
        this.finish(c, 'stop');
        if (req.choices.every((x) => x.state === 'done')) this.complete(req);
      },
    };
  }

  /**
   * Runs fn with no step in flight and none recorded until it settles (logits, the profilers): they use
   * the model's step buffers and the block manager directly.
   */
  runExclusive<T>(fn: () => Promise<T>): Promise<T> {
    if (this.destroyed) return Promise.reject(new WebinferError(this.destroyed));
    return new Promise<T>((resolve, reject) => {
      this.exclusive.push({ fn, resolve: resolve as (v: unknown) => void, reject });
      this.drive();
    });
  }

  /** Rejects every request and stops: `why` says what happened ("Model.generate: the model was destroyed ..."). */
  destroy(why: string): void {
    if (this.destroyed) return;
    this.destroyed = why;
    const reqs = new Set<Req>([...this.waiting, ...this.running].map((c) => c.req));
    for (const r of reqs) this.fail(r, new WebinferError(why));
    for (const x of this.exclusive.splice(0)) x.reject(new WebinferError(why));
  }

  private drive(): void {
    if (this.driving) return;
    this.driving = true;
    void this.loop();
  }

  private async loop(): Promise<void> {
    try {
      for (;;) {
        if (this.destroyed) return;
        if (this.exclusive.length) {
          // Exclusive work runs between steps, once the steps in flight are back.
          if (this.inflight.length) { await this.apply(); continue; }
          const x = this.exclusive.shift()!;
          try { x.resolve(await x.fn()); } catch (e) { x.reject(e); }
          continue;
        }
        if (!this.waiting.length && !this.running.length) {
          // Finished requests may still have steps in flight: their ids are dropped, but waited for.
          if (this.inflight.length) { await this.apply(); continue; }
          return;
        }
        if (this.inflight.length === 0) this.inFlightSteps = this.m.stepsInFlight('RequestEngine');
        this.planStart = performance.now();
        await this.draftRound();
        if (this.destroyed) return;
        const h0 = performance.now(), rec0 = this.counters.recordMs;
        const planned = this.plan();
        if (!planned) {
          if (this.inflight.length) { await this.apply(); continue; }
          // Nothing can run and nothing is in flight: only possible if a waiting choice cannot fit
          // the empty cache, which submit refuses. Fail them rather than spin.
          const stuck = new Set(this.waiting.map((c) => c.req));
          for (const r of stuck) this.fail(r, new WebinferError(`RequestEngine: no step could be scheduled for a request of ${r.prompt.length} prompt tokens (${this.m.kv.freeBlocks} free blocks)`));
          continue;
        }
        const host = performance.now() - h0;
        this.counters.hostMs += host;
        this.counters.scheduleMs += host - (this.counters.recordMs - rec0);
        if (this.inflight.length >= this.inFlightSteps) await this.apply();
      }
    } catch (e) {
      // A fault (device lost, an internal error): every request ends with it, nothing is left behind.
      for (const f of this.inflight.splice(0)) { await f.rec.ids.catch(() => undefined); await f.rec.logits?.catch(() => undefined); }
      const reqs = new Set<Req>([...this.waiting, ...this.running].map((c) => c.req));
      for (const r of reqs) this.fail(r, e);
      for (const x of this.exclusive.splice(0)) x.reject(e);
    } finally {
      // Cleared as the loop returns, not a microtask later: a request submitted by code that a
      // completion just woke must find the loop stopped and start it again, or it would wait forever.
      this.driving = false;
    }
  }

  /** Schedules and records one step; false when nothing could be placed. */
  private plan(): boolean {
    const m = this.m, kv = m.kv;
    const rows: StepRow[] = [];
    const who: Choice[] = [];
    let budget = m.maxTokensPerStep;
    let claimed = 0;
    const step = m.stepNo;
    const inStep = new Set<Choice>();
    // Sampled ids this step (at most maxSeqsPerStep); the row where a request's first choice takes its
    // prompt's last chunk; the choices forked from such a row (they draw from its logits).
    let nSampled = 0;
    const lastChunk = new Map<Req, number>();
    const forks = new Map<number, Choice[]>();
    const avail = () => kv.freeBlocks - claimed;
    // Verification rows of speculating choices (by row): the proposals after their last token.
    const spec = new Map<number, number[]>();
    const decoding = this.decodingChoices();
    // Decodes first, oldest requests first.
    this.running.sort((a, b) => a.arrival - b.arrival || a.index - b.index);
    for (let i = 0; i < this.running.length; i++) {
      const c = this.running[i];
      if (rows.length >= m.maxSeqsPerStep || nSampled >= m.maxSeqsPerStep || budget === 0) break;
      if (c.state !== 'running' || c.fed < c.input.length || c.issued >= c.req.o.maxTokens) continue;
      const known = c.out.length === c.issued;
      const want = c.spec ? c.spec.budget(c.out.length, decoding, this.specCosts(decoding)) : 0;
      // A speculating choice waits for its ids on the host: its proposals follow them.
      if (!known && want > 0) continue;
      // A token still on the GPU is read from the previous step's ids only.
      if (!known && (c.lastStep !== step - 1 || c.req.needsHost)) continue;
      let props: number[] = [];
      const k = Math.min(want, c.req.o.maxTokens - c.issued - 1, m.maxSeqsPerStep - nSampled - 1, budget - 1);
      if (k > 0) {
        props = this.propose(c, k);
        if (kv.blocksToGrow(c.id, 1 + props.length) > avail()) props = [];
      }
      const need = kv.blocksToGrow(c.id, 1 + props.length);
      while (need > avail()) {
        // Preempt the newest running choice not in this step (maybe this one).
        const victim = this.newestRunning(inStep);
        if (!victim) break;
        this.preempt(victim);
        if (victim === c) break;
      }
      if (c.state !== 'running' || need > avail()) continue;
      claimed += need;
      if (props.length) spec.set(rows.length, props);
      rows.push({ id: c.id, ids: [known ? c.out[c.out.length - 1] : -(1 + c.lastRow), ...props], sample: true, ...(props.length ? { sampleAll: true } : {}) });
      who.push(c);
      inStep.add(c);
      budget -= 1 + props.length;
      nSampled += 1 + props.length;
    }
    // Then prompt chunks: running prefills, then admissions in arrival order, beside decodes within the
    // chunk budget (prefillBudget), else within the step's.
    const decodes = rows.length;
    let stepTokens = rows.reduce((a, r) => a + r.ids.length, 0);
    if (decodes) {
      budget = Math.min(budget, this.chunkBudget(decodes));
      if (this.waiting.length || this.running.some((c) => c.fed < c.input.length)) this.counters.chunkBudget = budget;
    }
    const chunk = (c: Choice): boolean => {
      let n = Math.min(budget, c.input.length - c.fed);
      // As many tokens as the free blocks hold.
      const room = avail() * kv.blockSize + (kv.seqLen(c.id) % kv.blockSize === 0 ? 0 : kv.blockSize - (kv.seqLen(c.id) % kv.blockSize));
      n = Math.min(n, room);
      // Gemma 3's image blocks stay whole (StepRunner.imageChunk), past the chunk budget if need be,
      // within the step's tokens and the free blocks.
      if (n > 0 && m.imageChunk) n = m.imageChunk(c.id, c.fed, n, Math.min(room, c.input.length - c.fed, m.maxTokensPerStep - stepTokens));
      if (n <= 0) return false;
      claimed += kv.blocksToGrow(c.id, n);
      const last = c.fed + n === c.input.length;
      rows.push({ id: c.id, ids: c.input.slice(c.fed, c.fed + n), sample: last });
      who.push(c);
      inStep.add(c);
      c.fed += n;
      budget = Math.max(0, budget - n);
      stepTokens += n;
      if (last) {
        nSampled++;
        if (c.index === 0 && c.issued === 0 && c.input === c.req.prompt && c.req.choices.length > 1) lastChunk.set(c.req, rows.length - 1);
      }
      return true;
    };
    // A request's other choices, not started, whose first choice takes its prompt's last chunk in this
    // step: they fork from it (KVCacheManager.fork, the partial block copied) and draw their first tokens
    // from the same logits, so the prompt is computed once. Else they wait and are admitted as any
    // request (the prefix cache gives them the prompt's full blocks; the rest is computed again).
    this.forkable ??= !!(m.canCopyBlocks?.() && m.copyBlocks && !m.admitSequence);
    const tryFork = (c: Choice): boolean => {
      const at = lastChunk.get(c.req);
      if (at === undefined || !this.forkable || c.index === 0 || c.issued !== 0 || c.out.length !== 0 || c.input !== c.req.prompt) return false;
      const need = c.req.prompt.length % kv.blockSize ? 1 : 0;
      if (nSampled >= m.maxSeqsPerStep || need > avail() || !kv.canAddSequence()) return false;
      claimed += need;
      nSampled++;
      let f = forks.get(at);
      if (!f) forks.set(at, f = []);
      f.push(c);
      c.state = 'running';
      c.fed = c.input.length;
      this.running.push(c);
      return true;
    };
    for (const c of this.running) {
      if (rows.length >= m.maxSeqsPerStep || budget === 0) break;
      if (c.state === 'running' && c.fed < c.input.length && !inStep.has(c)) chunk(c);
    }
    this.waiting.sort((a, b) => a.arrival - b.arrival || a.index - b.index);
    while (this.waiting.length && Math.max(rows.length, nSampled) < m.maxSeqsPerStep && budget > 0) {
      const c = this.waiting[0];
      if (tryFork(c)) { this.waiting.shift(); continue; }
      // A preempted choice waits for its tokens in flight; a sibling for the first choice's prompt.
      if (c.out.length !== c.issued) break;
      if (c.index > 0 && c.issued === 0) {
        const first = c.req.choices[0];
        if (first.state === 'waiting' || (first.state === 'running' && first.fed < first.input.length)) break;
      }
      // A sequence state slot (LFM2's conv state) must be free, as blocks must.
      if (!kv.canAddSequence()) break;
      // A preempted choice is recomputed from its prompt and every token it had.
      if (c.out.length) c.input = [...c.req.prompt, ...c.out];
      const cached = kv.addSequence(c.id, { tokens: c.input, salt: c.req.o.cacheSalt });
      if (m.admitSequence && !m.admitSequence(c.id, c.req.o.encoderInput, avail())) {
        kv.freeSequence(c.id);
        break;
      }
      c.fed = cached;
      if (!chunk(c)) {
        this.freeSeq(c.id);
        c.fed = 0;
        break;
      }
      if (c.index === 0 && c.issued === 0 && c.input === c.req.prompt) c.req.cachedTokens = cached;
      this.waiting.shift();
      c.state = 'running';
      this.running.push(c);
    }
    // Siblings the step's token budget left waiting fork all the same: they add no tokens.
    for (let i = 0; i < this.waiting.length;) {
      if (lastChunk.size && tryFork(this.waiting[i])) this.waiting.splice(i, 1);
      else i++;
    }
    if (!rows.length) return false;
    this.record(rows, who, rows.length > decodes ? rows.reduce((a, r, i) => a + (i < decodes ? 0 : r.ids.length), 0) : 0, decodes, forks, spec);
    return true;
  }

  /** Choices decoding (the speculation policy's batch), when some speculate; else 0 (unused). */
  private decodingChoices(): number {
    if (!this.running.some((c) => c.spec && c.state === 'running' && c.fed >= c.input.length)) return 0;
    return this.running.filter((c) => c.state === 'running' && c.fed >= c.input.length).length;
  }

  /** A speculating choice's proposals, at most k (n-gram lookup, the draft's, or the hook's), as vocabulary ids. */
  private propose(c: Choice, k: number): number[] {
    const cfg = c.spec!.cfg, V = this.m.vocabSize;
    const drafted = cfg.method === 'draft' ? (c.drafted?.at === c.out.length ? c.drafted.props : []) : null;
    let got: readonly number[];
    if (this.specHooks?.propose) got = this.specHooks.propose(idsOf(c), k, drafted);
    else if (cfg.method === 'draft') got = drafted!;
    else got = ngramProposals(idsOf(c), k, cfg.minMatch, cfg.maxMatch);
    const props: number[] = [];
    for (const t of got) {
      if (props.length >= k || !Number.isInteger(t) || t < 0 || t >= V) break;
      props.push(t);
    }
    // None: the choice decodes pipelined (its ids read on the GPU) for a few tokens before looking again.
    if (!props.length) c.spec!.pause(c.out.length);
    return props;
  }

  /**
   * A draft model's proposals for every speculating choice the next step may verify (decoding, its ids
   * on the host, none drafted yet at its length): one greedy request of k tokens each to the draft's own
   * request engine, all at once (its steps batch them; its prefix cache keeps each sequence's full blocks
   * from the last round). The target's loop waits for them: at the batch sizes where speculation pays,
   * the next step needs them. A draft that fails proposes nothing; the target decodes on.
   */
  private async draftRound(): Promise<void> {
    const cfg = this.specCfg;
    if (cfg?.method !== 'draft') return;
    const decoding = this.decodingChoices();
    const asks: Promise<void>[] = [];
    for (const c of this.running) {
      if (!c.spec || c.state !== 'running' || c.fed < c.input.length || c.out.length !== c.issued || c.drafted?.at === c.out.length) continue;
      const k = Math.min(c.spec.budget(c.out.length, decoding, this.specCosts(decoding)), c.req.o.maxTokens - c.issued - 1, this.m.maxSeqsPerStep - 1);
      if (k <= 0) continue;
      const at = c.out.length;
      const prompt = Int32Array.from(idsOf(c));
      asks.push(cfg.draft.engine.submit({ prompt, maxTokens: k, stopTokens: NO_STOP, speculative: false, ...(c.req.o.cacheSalt ? { cacheSalt: c.req.o.cacheSalt } : {}) }, 'speculative draft').result
        .then((r) => { c.drafted = { at, props: r.tokens[0] ?? [] }; }, () => { c.drafted = { at, props: [] }; }));
    }
    if (!asks.length) return;
    const t0 = performance.now();
    await Promise.all(asks);
    this.counters.draftMs += performance.now() - t0;
  }

  /** The steps' costs the speculation policy weighs (SpecState.budget). */
  private specCosts(decoding: number): SpecCosts | undefined {
    if (this.specHooks?.ignoreCosts) return undefined;
    return { plainMs: this.stepCost.decodeMs(Math.max(1, decoding)), verifyMs: (t) => this.specCost.ms(t) };
  }

  /** Prompt tokens a step with `decodes` decode rows may take (prefillBudget). */
  private chunkBudget(decodes: number): number {
    const m = this.m;
    if (this.budgetSetting !== 'auto') return this.budgetSetting;
    const t = this.stepCost.tokensPerDecodeStep(decodes);
    if (t === null) return m.maxTokensPerStep;
    return Math.max(MIN_CHUNK, Math.min(m.maxTokensPerStep, Math.floor(t)));
  }

  private newestRunning(exclude: Set<Choice>): Choice | null {
    let v: Choice | null = null;
    for (const c of this.running) {
      if (c.state !== 'running' || exclude.has(c)) continue;
      if (!v || c.arrival > v.arrival || (c.arrival === v.arrival && c.index > v.index)) v = c;
    }
    return v;
  }

  /** A placed sequence's blocks and the runner's state beside them go back. */
  private freeSeq(id: string): void {
    this.m.kv.freeSequence(id);
    this.m.freeSequence?.(id);
  }

  /** Frees a running choice's blocks; it waits to be recomputed from its prompt and the tokens it had. */
  private preempt(c: Choice): void {
    this.freeSeq(c.id);
    this.running.splice(this.running.indexOf(c), 1);
    c.state = 'waiting';
    c.fed = 0;
    c.id = `r${this.nextId++}`;
    this.waiting.push(c);
    this.counters.preemptions++;
  }

  private record(rows: StepRow[], who: Choice[], prefill: number, decodes: number, forks: Map<number, Choice[]>, spec: Map<number, number[]>): void {
    const m = this.m, kv = m.kv;
    for (const [i, f] of forks) rows[i].samples = 1 + f.length;
    // Sampled rows' settings, edits and masks, in the order the step samples them (request order; a
    // row's forked choices right after it; a verification row's positions in order, position j drawing
    // its choice's token issued + j).
    const sampled = who.flatMap((c, i) => (!rows[i].sample ? []
      : spec.has(i) ? Array.from({ length: 1 + spec.get(i)!.length }, (_, j) => ({ c, j }))
        : [{ c, j: 0 }, ...(forks.get(i) ?? []).map((x) => ({ c: x, j: 0 }))]));
    let proc: StepProcessing | null = null;
    const failed = new Map<Req, unknown>();
    const sup = m.suppress;
    const special = !!(sup && (sup.always.length || sup.first.length)) || sampled.some(({ c }) => c.req.sampling !== GREEDY || c.req.o.logprobs != null || c.constraint);
    if (special) {
      const R = sampled.length;
      if (this.paramWords.length < R * ROW_PARAM_WORDS) this.paramWords = new Uint32Array(R * ROW_PARAM_WORDS * 2);
      const edits: number[][] = [];
      const masked: number[] = [];
      const W = Math.ceil(m.vocabSize / 32);
      sampled.forEach(({ c, j }, r) => {
        const s = c.req.sampling;
        packRowSampling(this.paramWords, r, { temperature: s.temperature, topK: s.topK, topP: s.topP, minP: s.minP, seed: c.seed, step: c.issued + j, stream: (c.req.o.stream ?? 0) + c.index });
        const e = this.editsFor(c);
        for (const [tok, rep, add] of e) edits.push([r, tok, rep, add]);
        if (c.constraint) masked.push(r);
      });
      if (this.editWords.length < edits.length * EDIT_WORDS) this.editWords = new Uint32Array(edits.length * EDIT_WORDS * 2);
      const ef = new Float32Array(this.editWords.buffer);
      edits.forEach(([r, t, rep, add], i) => { this.editWords[4 * i] = r; this.editWords[4 * i + 1] = t; ef[4 * i + 2] = rep; ef[4 * i + 3] = add; });
      if (this.maskWords.length < masked.length * W) this.maskWords = new Uint32Array(masked.length * W * 2);
      masked.forEach((r, i) => {
        const view = this.maskWords.subarray(i * W, (i + 1) * W);
        view.fill(0);
        // A constraint that throws (a schema the vocabulary cannot spell, a grammar over its budget) is
        // its request's failure, not the step's: the row samples unmasked, and the request ends with the
        // error once the step is recorded (its blocks must outlive the recording).
        try {
          sampled[r].c.constraint!.fillMask(view);
        } catch (e) {
          view.fill(0xffffffff);
          failed.set(sampled[r].c.req, e);
        }
      });
      proc = {
        params: this.paramWords.subarray(0, R * ROW_PARAM_WORDS), edits: this.editWords, nEdits: edits.length,
        masks: this.maskWords, maskRows: Int32Array.from(masked), nMasks: masked.length,
        logprobRows: sampled.flatMap(({ c }, r) => (c.req.o.logprobs != null ? [r] : [])),
      };
    }
    const g = m.graphStats, g0 = g ? g.replayed : 0, r0 = g ? g.recorded : 0;
    const t0 = performance.now();
    const rec = m.recordStep(rows, proc);
    const submitted = performance.now();
    this.counters.recordMs += submitted - t0;
    if (g) { this.counters.replayed += g.replayed - g0; this.counters.recorded += g.recorded - r0; }
    // Marked handled now: a step still in flight when the model is destroyed is never awaited, and its
    // read-back rejecting later (the device going away) must not be an unhandled rejection.
    rec.ids.catch(() => undefined);
    rec.logits?.catch(() => undefined);
    // The forked choices' sequences: the first choice's blocks, the partial one copied after the step
    // that wrote it and before any step that writes the copies.
    if (forks.size) {
      const pairs: [number, number][] = [];
      for (const [i, f] of forks) for (const c of f) { const p = kv.fork(who[i].id, c.id); if (p) pairs.push(p); }
      m.copyBlocks!(pairs);
    }
    const out: { c: Choice; row: number; props?: number[] }[] = [];
    const place = (c: Choice, row: number, props?: number[]) => {
      // After a verification the next input is whichever sample ends the accepted run: known only on
      // the host, so no step reads it from this one's ids on the GPU (lastStep -1).
      c.lastStep = props ? -1 : rec.step;
      c.lastRow = row;
      c.issued += 1 + (props?.length ?? 0);
      out.push(props ? { c, row, props } : { c, row });
    };
    who.forEach((c, i) => {
      if (!rows[i].sample) return;
      const props = spec.get(i);
      if (props) {
        this.counters.specRows++;
        this.counters.specProposed += props.length;
      }
      place(c, rec.sampledRow[i], props);
      forks.get(i)?.forEach((x, k) => place(x, rec.sampledRow[i] + 1 + k));
    });
    this.counters.steps++;
    this.counters.tokens += rec.T;
    this.counters.prefillTokens += prefill;
    this.counters.decodeTokens += rec.T - prefill;
    if (prefill && decodes) this.counters.mixedSteps++;
    this.inflight.push({ rec, rows: out, lpRows: proc ? proc.logprobRows.map((r) => sampled[r].c) : [], submitted, prefill, decodes, planned: this.planStart, verifies: spec.size > 0, pipelined: this.inflight.length > 0 });
    for (const [req, e] of failed) this.fail(req, e);
  }

  /**
   * A choice's logit edits: per token (rep, add) — repetition penalty over prompt and output (HF's), then
   * presence and frequency penalties over output counts (OpenAI's), then logit bias.
   */
  private editsFor(c: Choice): [number, number, number][] {
    const s = c.req.sampling;
    const map = new Map<number, [number, number]>();
    const at = (t: number) => { let v = map.get(t); if (!v) { v = [1, 0]; map.set(t, v); } return v; };
    if (s.repetitionPenalty !== 1) {
      for (const t of c.req.prompt) at(t)[0] = s.repetitionPenalty;
      for (const t of c.out) at(t)[0] = s.repetitionPenalty;
    }
    if (c.counts && (s.presencePenalty !== 0 || s.frequencyPenalty !== 0)) {
      for (const [t, k] of c.counts) at(t)[1] -= s.presencePenalty + s.frequencyPenalty * k;
    }
    if (s.logitBias) for (const [t, b] of s.logitBias) at(t)[1] += b;
    const sup = this.m.suppress;
    if (sup) {
      for (const t of sup.always) at(t)[1] = -Infinity;
      if (c.issued === 0) for (const t of sup.first) at(t)[1] = -Infinity;
    }
    return [...map].map(([t, [rep, add]]) => [t, rep, add]);
  }

  /** Waits for the oldest step in flight and hands its tokens to their requests. */
  private async apply(): Promise<void> {
    const f = this.inflight.shift()!;
    const w0 = performance.now();
    const ids = new Int32Array(await f.rec.ids);
    const lp = f.rec.logits ? new Float32Array(await f.rec.logits) : null;
    const done = performance.now();
    this.counters.waitMs += done - w0;
    // The step's time: from its submission, or from the step before it coming back if the GPU was still
    // busy then (steps in flight run one after another). A verification step's goes to the speculation
    // policy instead, from the loop beginning it (its proposals made) to its ids back: nothing overlaps it.
    // A decode-only step submitted with none in flight (the first after a verification or an idle engine)
    // waited for its own recording and read-back: not a pipelined step's time, so not observed.
    if (f.verifies) {
      if (f.prefill === 0) this.specCost.observe(f.rec.T, done - f.planned);
    } else if (f.pipelined || f.prefill > 0) {
      this.stepCost.observe(f.prefill, f.decodes, done - Math.max(f.submitted, this.lastDone));
    }
    this.lastDone = done;
    try {
      this.handOut(f, ids, lp);
    } finally {
      this.counters.applyMs += performance.now() - done;
    }
  }

  private handOut(f: InFlight, ids: Int32Array, lp: Float32Array | null): void {
    if (this.destroyed) return;
    const V = this.m.vocabSize;
    const now = performance.now();
    const events = new Map<Req, Map<number, { tokens: number[]; lps: TokenLogprob[] | null }>>();
    rows: for (const { c, row, props } of f.rows) {
      if (c.state === 'done' || c.req.finished) continue;
      let toks: ArrayLike<number>;
      if (props) {
        // The longest run of proposals equal to the target's own samples, then the sample after it:
        // the tokens plain decoding would have given (SPEC §9). The rejected positions' slots go back.
        let a = 0;
        while (a < props.length && props[a] === ids[row + a] && (this.specHooks?.keep?.() ?? true)) a++;
        toks = ids.subarray(row, row + a + 1);
        c.issued -= props.length - a;
        if (c.state === 'running') this.m.kv.rollback(c.id, props.length - a);
        this.counters.specAccepted += a;
        c.req.specProposed += props.length;
        c.req.specAccepted += a;
        c.spec!.record(props.length, a);
      } else {
        toks = ids.subarray(row, row + 1);
      }
      for (let t = 0; t < toks.length; t++) {
        if ((c.state as Choice['state']) === 'done') break;
        const tok = toks[t];
        let logprob: TokenLogprob | null = null;
        if (lp && c.req.o.logprobs != null) {
          const k = f.lpRows.indexOf(c);
          logprob = logprobOf(lp.subarray(k * V, (k + 1) * V), tok, c.req.o.logprobs);
        }
        if (c.constraint) {
          // The request's own code: a throw ends this request, never the others in the step.
          try {
            c.constraint.accept(tok);
          } catch (e) {
            this.fail(c.req, e);
            continue rows;
          }
        }
        c.out.push(tok);
        if (c.req.firstAt < 0) {
          c.req.firstAt = now;
          this.ttft.observe((now - c.req.t0) / 1000);
          this.promptTokens += c.req.prompt.length;
        }
        if (c.lastAt >= 0) this.itl.observe((now - c.lastAt) / 1000);
        c.lastAt = now;
        if (c.counts) c.counts.set(tok, (c.counts.get(tok) ?? 0) + 1);
        if (c.state === 'running') this.m.kv.appendTokens(c.id, [tok]);
        this.counters.generated++;
        let e = events.get(c.req);
        if (!e) events.set(c.req, e = new Map());
        let ce = e.get(c.index);
        if (!ce) e.set(c.index, ce = { tokens: [], lps: logprob ? [] : null });
        ce.tokens.push(tok);
        if (logprob) ce.lps!.push(logprob);
        if (c.req.o.stopTokens?.has(tok)) this.finish(c, 'stop');
        else if (c.out.length >= c.req.o.maxTokens) this.finish(c, 'length');
      }
    }
    for (const [req, e] of events) {
      if (req.finished) continue;
      if (req.o.onTokens) {
        for (const [choice, { tokens, lps }] of e) {
          try {
            const p = req.o.onTokens(choice, tokens, lps);
            if (p && typeof (p as Promise<void>).then === 'function') (p as Promise<void>).then(undefined, (err) => this.fail(req, err));
          } catch (err) {
            this.fail(req, err);
            break;
          }
        }
      }
      if (!req.finished && req.choices.every((c) => c.state === 'done')) this.complete(req);
    }
  }

  private finish(c: Choice, why: FinishReason): void {
    c.finish = why;
    this.retire(c);
  }

  /** Takes a choice out of the queues; its blocks go back at once (steps still in flight that used them
   *  run before any step that reuses them: the queue keeps submission order). */
  private retire(c: Choice): void {
    if (c.state === 'running') {
      this.freeSeq(c.id);
      this.running.splice(this.running.indexOf(c), 1);
    } else if (c.state === 'waiting') {
      this.waiting.splice(this.waiting.indexOf(c), 1);
    }
    c.state = 'done';
  }

  /** Counts a request's end: how, and its whole time. */
  private countEnd(req: Req, why: EndReason): void {
    this.ended[why]++;
    this.e2e.observe((performance.now() - req.t0) / 1000);
  }

  private complete(req: Req): void {
    req.finished = true;
    this.countEnd(req, req.choices[0].finish ?? 'length');
    if (req.onAbort) req.o.signal?.removeEventListener('abort', req.onAbort);
    req.resolve({ tokens: req.choices.map((c) => c.out), finish: req.choices.map((c) => c.finish ?? 'length'), promptTokens: req.prompt.length, cachedTokens: req.cachedTokens,
      specProposed: req.specProposed, specAccepted: req.specAccepted });
  }

  /** Ends a request with an error: its choices leave the queues and their blocks go back. */
  private fail(req: Req, e: unknown): void {
    if (req.finished) return;
    req.finished = true;
    // Its client's signal: cancelled (a client gone, a stop); anything else is a failure.
    this.countEnd(req, req.o.signal?.aborted ? 'abort' : 'error');
    for (const c of req.choices) if (c.state !== 'done') this.retire(c);
    if (req.onAbort) req.o.signal?.removeEventListener('abort', req.onAbort);
    req.reject(e);
  }
}

/** log-softmax of one row at `tok`, and its k most probable tokens (float64 on the host). */
export function logprobOf(row: Float32Array, tok: number, k: number): TokenLogprob {
  let mx = -Infinity;
  for (let i = 0; i < row.length; i++) if (row[i] > mx) mx = row[i];
  let s = 0;
  for (let i = 0; i < row.length; i++) s += Math.exp(row[i] - mx);
  const lse = mx + Math.log(s);
  const top: { token: number; logprob: number }[] = [];
  if (k > 0) {
    // A small sorted list: k is at most 20.
    for (let i = 0; i < row.length; i++) {
      const v = row[i];
      if (top.length === k && v <= top[k - 1].logprob) continue;
      let j = top.length < k ? top.length : k - 1;
      if (top.length < k) top.push({ token: i, logprob: v });
      while (j > 0 && top[j - 1].logprob < v) { top[j] = top[j - 1]; j--; }
      top[j] = { token: i, logprob: v };
    }
    for (const t of top) t.logprob -= lse;
  }
  return { token: tok, logprob: row[tok] - lse, top };
}
