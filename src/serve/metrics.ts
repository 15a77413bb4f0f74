// GET /metrics: the request engine's counters in Prometheus' text exposition format (version 0.0.4),
// under vLLM's metric names and meanings, so that the routers and dashboards written for vLLM servers
// read a webinfer server as one of theirs (SGLang's model gateway, vLLM's production-stack router, the
// Gateway API Inference Extension). Names, help texts' meanings, label sets and histogram buckets follow
// vLLM's v1 engine (vllm/v1/metrics/loggers.py, 0.11): labels model_name (the served id) and engine
// ('0': one engine per server); counters end in _total as prometheus_client writes them.
//
// The engine keeps the numbers (RequestEngine.metrics(), KVCacheManager's block pool and prefix-cache
// stats); this file only observes latencies into buckets and writes the text.

/** How requests ended (vLLM's finished_reason): a choice's finish (engine.ts's FinishReason), cancelled by its signal, or failed. */
export type EndReason = 'stop' | 'length' | 'abort' | 'error';

/**
 * The engine's state and counters at one moment, as vLLM's metrics count them (serve/metrics.ts writes
 * them for GET /metrics). Counters and histograms only grow over the engine's life; a copy, not a view.
 */
export interface EngineMetrics {
  /** Requests with a choice in the running batch (vLLM: num_requests_running). */
  running: number;
  /** Requests not yet admitted, or preempted and waiting to be recomputed (num_requests_waiting). */
  waiting: number;
  numBlocks: number;
  blockSize: number;
  cacheDtype: string;
  prefixCaching: boolean;
  /** Blocks held by sequences over all blocks, 0 to 1 (a cached block nobody holds is free). */
  kvCacheUsage: number;
  /** Every prompt token of each prefix-cache lookup (vLLM counts request.num_tokens), and those found. */
  prefixCacheQueries: number;
  prefixCacheHits: number;
  /** Each request's prompt, counted once when its first token comes (as vLLM counts prompt_tokens). */
  promptTokens: number;
  /** Tokens sampled and handed to requests, every choice's. */
  generationTokens: number;
  preemptions: number;
  /** Speculative decoding: verifications, the proposals they carried, and those accepted. */
  specDrafts: number;
  specDraftTokens: number;
  specAcceptedTokens: number;
  /** Requests ended, by how (a request's reason is its first choice's). */
  finished: Readonly<Record<EndReason, number>>;
  /** Seconds from submit to the request's first token on the host. */
  ttft: HistogramSnapshot;
  /** Seconds between two tokens of one choice reaching the host. */
  itl: HistogramSnapshot;
  /** Seconds from submit to the request's end (every ending: finished, aborted, failed). */
  e2e: HistogramSnapshot;
}

/** vLLM's buckets for time to first token (seconds). */
export const TTFT_BUCKETS: readonly number[] = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560];
/** vLLM's buckets for the time between two output tokens of a request (seconds). */
export const ITL_BUCKETS: readonly number[] = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80];
/** vLLM's buckets for a request's whole life (seconds). */
export const E2E_BUCKETS: readonly number[] = [0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680];

/** A histogram's state: per bucket (upper bounds `bounds`, then +Inf) the observations that fell in it. */
export interface HistogramSnapshot {
  readonly bounds: readonly number[];
  /** Not cumulative: counts[i] observations were ≤ bounds[i] and > bounds[i - 1]; the last is +Inf's. */
  readonly counts: readonly number[];
  readonly sum: number;
  readonly count: number;
}

/** Observations into fixed buckets (a bucket holds values ≤ its bound, as Prometheus' `le`). */
export class Histogram {
  private readonly counts: number[];
  private sum = 0;
  private count = 0;

  constructor(readonly bounds: readonly number[]) {
    this.counts = new Array<number>(bounds.length + 1).fill(0);
  }

  observe(v: number): void {
    // A clock that stepped back gives a negative interval: it counts as 0, never as a bad bucket.
    const x = Number.isFinite(v) && v > 0 ? v : 0;
    let i = 0;
    while (i < this.bounds.length && x > this.bounds[i]) i++;
    this.counts[i]++;
    this.sum += x;
    this.count++;
  }

  snapshot(): HistogramSnapshot {
    return { bounds: this.bounds, counts: [...this.counts], sum: this.sum, count: this.count };
  }
}

/** What the exposition says about the served model besides the engine's numbers. */
export interface MetricsModel {
  /** The id clients send: the model_name label. */
  id: string;
}

/** A label value escaped as the text format asks (backslash, double quote, newline). */
function labelValue(s: string): string {
  return s.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}

function labels(o: Record<string, string>): string {
  return `{${Object.entries(o).map(([k, v]) => `${k}="${labelValue(v)}"`).join(',')}}`;
}

/** A sample value as Go and Python clients write it (integers without a fraction, +Inf spelled out). */
function num(x: number): string {
  if (x === Infinity) return '+Inf';
  if (x === -Infinity) return '-Inf';
  if (Number.isNaN(x)) return 'NaN';
  return String(x);
}

const minus = (a: HistogramSnapshot, b: HistogramSnapshot | undefined): HistogramSnapshot => (b === undefined ? a
  : { bounds: a.bounds, counts: a.counts.map((c, i) => c - (b.counts[i] ?? 0)), sum: a.sum - b.sum, count: a.count - b.count });

/**
 * The exposition of `now` (an engine's metrics()): gauges as they are, counters and histograms counted
 * from `since` (the engine's metrics when the server started: a warm-up before it is no client's work).
 */
export function renderMetrics(model: MetricsModel, now: EngineMetrics, since?: EngineMetrics): string {
  const base = { model_name: model.id, engine: '0' };
  const out: string[] = [];
  const head = (name: string, type: 'gauge' | 'counter' | 'histogram', help: string): void => {
    out.push(`# HELP ${name} ${help.replace(/\\/g, '\\\\').replace(/\n/g, '\\n')}`, `# TYPE ${name} ${type}`);
  };
  const gauge = (name: string, help: string, v: number): void => {
    head(name, 'gauge', help);
    out.push(`${name}${labels(base)} ${num(v)}`);
  };
  const counter = (name: string, help: string, v: number, was: number | undefined): void => {
    head(`${name}_total`, 'counter', help);
    out.push(`${name}_total${labels(base)} ${num(v - (was ?? 0))}`);
  };
  const histogram = (name: string, help: string, h: HistogramSnapshot): void => {
    head(name, 'histogram', help);
    let cum = 0;
    h.bounds.forEach((b, i) => {
      cum += h.counts[i];
      out.push(`${name}_bucket${labels({ ...base, le: num(b) })} ${cum}`);
    });
    cum += h.counts[h.bounds.length];
    out.push(`${name}_bucket${labels({ ...base, le: '+Inf' })} ${cum}`, `${name}_sum${labels(base)} ${num(h.sum)}`, `${name}_count${labels(base)} ${h.count}`);
  };

  gauge('vllm:num_requests_running', 'Number of requests in model execution batches.', now.running);
  gauge('vllm:num_requests_waiting', 'Number of requests waiting to be processed.', now.waiting);
  gauge('vllm:kv_cache_usage_perc', 'KV-cache usage. 1 means 100 percent usage.', now.kvCacheUsage);
  gauge('vllm:gpu_cache_usage_perc', 'GPU KV-cache usage. 1 means 100 percent usage. DEPRECATED: Use vllm:kv_cache_usage_perc instead.', now.kvCacheUsage);
  // An info metric as vLLM writes it: a gauge of 1 whose labels carry the cache's configuration.
  head('vllm:cache_config_info', 'gauge', 'Information of the LLMEngine CacheConfig');
  out.push(`vllm:cache_config_info${labels({
    block_size: String(now.blockSize), cache_dtype: now.cacheDtype, enable_prefix_caching: now.prefixCaching ? 'True' : 'False',
    engine: '0', num_gpu_blocks: String(now.numBlocks),
  })} 1`);
  counter('vllm:prefix_cache_queries', 'Prefix cache queries, in terms of number of queried tokens.', now.prefixCacheQueries, since?.prefixCacheQueries);
  counter('vllm:prefix_cache_hits', 'Prefix cache hits, in terms of number of cached tokens.', now.prefixCacheHits, since?.prefixCacheHits);
  // vLLM 0.9's names for the same two counters, which it still wrote through 0.10: vLLM's production-stack
  // router reads these (vllm_router/stats/engine_stats.py), not the new ones.
  counter('vllm:gpu_prefix_cache_queries', 'GPU prefix cache queries, in terms of number of queried tokens. DEPRECATED: Use vllm:prefix_cache_queries instead.', now.prefixCacheQueries, since?.prefixCacheQueries);
  counter('vllm:gpu_prefix_cache_hits', 'GPU prefix cache hits, in terms of number of cached tokens. DEPRECATED: Use vllm:prefix_cache_hits instead.', now.prefixCacheHits, since?.prefixCacheHits);
  counter('vllm:num_preemptions', 'Cumulative number of preemption from the engine.', now.preemptions, since?.preemptions);
  counter('vllm:prompt_tokens', 'Number of prefill tokens processed.', now.promptTokens, since?.promptTokens);
  counter('vllm:generation_tokens', 'Number of generation tokens processed.', now.generationTokens, since?.generationTokens);
  // vLLM's speculative-decoding counters (v1 spec_decode metrics): drafts verified, tokens proposed, tokens accepted.
  counter('vllm:spec_decode_num_drafts', 'Number of spec decoding drafts.', now.specDrafts, since?.specDrafts);
  counter('vllm:spec_decode_num_draft_tokens', 'Number of draft tokens.', now.specDraftTokens, since?.specDraftTokens);
  counter('vllm:spec_decode_num_accepted_tokens', 'Number of accepted tokens.', now.specAcceptedTokens, since?.specAcceptedTokens);
  head('vllm:request_success_total', 'counter', 'Count of successfully processed requests.');
  for (const reason of ['stop', 'length', 'abort', 'error'] as const) {
    out.push(`vllm:request_success_total${labels({ ...base, finished_reason: reason })} ${num(now.finished[reason] - (since?.finished[reason] ?? 0))}`);
  }
  histogram('vllm:time_to_first_token_seconds', 'Histogram of time to first token in seconds.', minus(now.ttft, since?.ttft));
  histogram('vllm:inter_token_latency_seconds', 'Histogram of inter-token latency in seconds.', minus(now.itl, since?.itl));
  // vLLM 0.11 renamed it inter_token_latency and writes both, the same observations, until it drops this one.
  histogram('vllm:time_per_output_token_seconds', 'Histogram of time per output token in seconds. DEPRECATED: Use vllm:inter_token_latency_seconds instead.', minus(now.itl, since?.itl));
  histogram('vllm:e2e_request_latency_seconds', 'Histogram of e2e request latency in seconds.', minus(now.e2e, since?.e2e));
  return `${out.join('\n')}\n`;
}
