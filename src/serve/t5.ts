// T5 as applications hold it (API.md "Encoders, encoder-decoders, speech"): the encoder and decoder's
// forward pass (models/t5.ts, T5Runner) under the one request engine every model has (engine.ts).
// generate's prompts are requests of that engine, batched with every other caller's: each step runs the
// decoder over every running sequence's new tokens at once.
//
// A sequence's cache is its own (T5Runner.openCache: its self-attention keys/values, a row per position,
// and its cross-attention keys/values of its encoder input), made when the engine places it
// (admitSequence) and freed when it ends or is preempted (freeSequence): T5's attention adds a learned
// relative-position bias per head, which the paged kernels do not take, so its keys/values are not in
// the engine's paged blocks. The block manager still places each sequence's tokens (its blocks are the
// engine's measure of the cache a sequence holds, and what preemption frees: kvCache.numBlocks and
// blockSize set it), with the prefix cache off
// (a prefix's keys/values depend on the encoder input). A decoding sequence's next input can be the
// previous step's sampled id still on the GPU, so tuning.stepsInFlight steps are in flight, as for the
// other models.
import { check, checkKeys, checkPosInt } from '../core/errors.js';
import { DispatchCache, type Runtime } from '../core/runtime.js';
import type { Tensor } from '../core/tensor.js';
import { adjustLogits, argmax, sampleRows } from '../ops/sample.js';
import type { StepProcessing, StepRecord, StepRow } from '../models/step.js';
import { T5Runner, type DecoderCache, type T5Config, type T5RunnerOptions } from '../models/t5.js';
import { RequestEngine, type StepRunner } from './engine.js';
import { KVCacheManager } from './kv_manager.js';

/** What generate hands the engine as a request's encoder input: the ids, and the positions its cache needs. */
interface T5Input { ids: Int32Array; capacity: number }

export class T5Model extends T5Runner implements StepRunner {
  /** The block manager placing each sequence's tokens (no prefix cache). */
  readonly kv: KVCacheManager;
  /** The model's request queue: continuous batching over every caller's requests. */
  readonly engine: RequestEngine;
  private readonly caches = new Map<string, DecoderCache>();
  private step = 0;
  /** Read-backs of steps in flight (dropped at once by destroy). */
  private readonly reads = new Set<GPUBuffer>();
  /** Steps run, the sequences and tokens they held, and the rows whose input was the previous step's id still on the GPU, for tests. */
  readonly decodeStats = { steps: 0, rows: 0, tokens: 0, fromGpu: 0 };

  constructor(rt: Runtime, cfg: T5Config, o: T5RunnerOptions) {
    super(rt, cfg, o);
    this.kv = new KVCacheManager({ numBlocks: o.numBlocks, blockSize: o.blockSize, prefixCaching: false });
    this.engine = new RequestEngine(this);
  }

  get stepNo(): number { return this.step; }

  /** Tokens one sequence may hold (its prompt and reply): the block manager's, not a model limit. */
  get capacity(): number { return this.kv.numBlocks * this.kv.blockSize; }

  /** tuning.stepsInFlight, checked (any number: the sampled-id ring of two is enough, see T5Runner.ring). */
  stepsInFlight(op: string): number {
    this.assertAlive(op);
    const k = this.rt.tuning.stepsInFlight;
    check(Number.isInteger(k) && k >= 1, op, 'engine.tuning.stepsInFlight', 'an integer >= 1', k);
    return k;
  }

  admitSequence(id: string, encoderInput: unknown): boolean {
    const x = encoderInput as T5Input;
    this.caches.set(id, this.openCache(x.ids, x.capacity));
    return true;
  }

  freeSequence(id: string): void {
    const c = this.caches.get(id);
    if (!c) return;
    this.closeCache(c);
    this.caches.delete(id);
  }

  /** Records and submits one step: every row's tokens through the decoder over its cache, then each sampled row's next token on the GPU. */
  recordStep(rows: StepRow[], proc: StepProcessing | null): StepRecord {
    const rt = this.rt, step = this.step++;
    this.kv.schedule(rows.map((r) => ({ id: r.id, numTokens: r.ids.length })));
    const temps: Tensor[] = [];
    try {
      // Through the model's DispatchCache: a step repeats the last one's dispatches position by
      // position, so their uniforms are rewritten only where they changed and their bind groups are
      // the ones made before (one-off dispatches made every bind group anew: 40% of the host's time
      // in T5-small's decode on the H200).
      this.dc ??= new DispatchCache(rt);
      const R0 = rows.filter((r) => r.sample).length;
      const logits = rt.recording(this.dc, () => {
        const lg = this.decodeStep(rows.map((r) => ({ cache: this.caches.get(r.id)!, tokens: Int32Array.from(r.ids), sample: r.sample })), temps, step);
        if (lg) this.sampleStep(lg, R0, proc, temps, this.ring(step).out);
        return lg;
      });
      const sampledRow = new Array<number>(rows.length).fill(-1);
      let R = 0;
      rows.forEach((r, i) => { if (r.sample) sampledRow[i] = R++; });
      const T = rows.reduce((a, r) => a + r.ids.length, 0);
      this.decodeStats.steps++;
      this.decodeStats.rows += rows.length;
      this.decodeStats.tokens += T;
      this.decodeStats.fromGpu += rows.filter((r) => r.ids[0] < 0).length;
      if (!logits) {
        rt.flush();
        return { step, T, sampledRow, ids: Promise.resolve(new ArrayBuffer(0)), logits: null };
      }
      const { out } = this.ring(step);
      return { step, T, sampledRow, ids: rt.readBuffer(out.buffer, 4 * R, 0, this.reads), logits: null };
    } finally {
      // Back to the pool: whatever reuses them is queued after this step.
      for (const t of temps) t.destroy();
    }
  }

  /** The sampled ids of the step's R sampling rows of `logits` into `out`. */
  private sampleStep(logits: Tensor, R: number, proc: StepProcessing | null, temps: Tensor[], out: Tensor): void {
    const rt = this.rt;
    if (!proc) {
      argmax(rt, logits, { rows: R, out });
      return;
    }
    check(proc.nMasks === 0 && proc.logprobRows.length === 0, 'T5Model', 'a request', 'no grammar and no logprobs (T5 samples plainly)', 'one');
    if (proc.nEdits) {
      const e = rt.tensor(proc.edits.slice(0, proc.nEdits * 4), [proc.nEdits * 4], 'u32');
      temps.push(e);
      adjustLogits(rt, logits, e, proc.nEdits);
    }
    if (proc.params) {
      const p = rt.tensor(proc.params, [proc.params.length], 'u32');
      temps.push(p);
      sampleRows(rt, logits, p, { rows: R, out });
    } else {
      argmax(rt, logits, { rows: R, out });
    }
  }

  private dc: DispatchCache | null = null;

  /**
   * Greedy continuations of each decoder prompt (default [decoder_start_token_id]) given its encoder
   * input: each prompt is a request of the model's engine, batched with every other caller's; each step
   * runs the decoder over its new token and its sequence's cache (the prompt's keys and values first,
   * all in one pass), and the next token is the argmax of the last position's logits.
   */
  async generate(prompts: readonly (readonly number[] | Int32Array)[], o: { encoderInputs?: readonly (readonly number[] | Int32Array | Float32Array)[];
    maxNewTokens?: number; stopTokens?: number[]; temperature?: number } = {}): Promise<number[][]> {
    const op = 'generate';
    check(Array.isArray(prompts) && prompts.length > 0, op, 'prompts', 'a non-empty array of decoder prompts', prompts);
    check(o !== null && typeof o === 'object', op, 'o', '{ encoderInputs, maxNewTokens?, stopTokens? }', o);
    checkKeys(op, 'o', o, ['encoderInputs', 'maxNewTokens', 'stopTokens', 'temperature']);
    if (o.temperature !== undefined) check(o.temperature === 0, op, 'o.temperature', '0 (T5 decodes greedily here)', o.temperature);
    check(Array.isArray(o.encoderInputs) && o.encoderInputs.length === prompts.length, op, 'o.encoderInputs', `${prompts.length} encoder inputs (one per prompt)`, o.encoderInputs);
    const max = o.maxNewTokens === undefined ? 16 : checkPosInt(o.maxNewTokens, op, 'o.maxNewTokens');
    const stops = o.stopTokens ?? (this.cfg.eos === null ? [] : [this.cfg.eos]);
    check(Array.isArray(stops) && stops.every((t) => Number.isInteger(t)), op, 'o.stopTokens', 'an array of token ids', stops);
    const ps = prompts.map((p, i) => this.ids(op, `prompts[${i}]`, p));
    const es = o.encoderInputs.map((e, i) => this.ids(op, `o.encoderInputs[${i}]`, e));
    for (const [i, p] of ps.entries()) {
      check(p.length + max <= this.capacity, op, `prompts[${i}]`, `a prompt that fits ${this.capacity} tokens with maxNewTokens=${max}`, `${p.length} tokens`);
    }
    const stopSet = new Set(stops);
    // One prompt's failure ends the call's others.
    const acs = ps.map(() => new AbortController());
    return Promise.all(ps.map((prompt, i) => this.engine.submit({
      prompt, maxTokens: max, stopTokens: stopSet, signal: acs[i].signal, encoderInput: { ids: es[i], capacity: prompt.length + max } satisfies T5Input,
    }, `T5Model.${op}`).result.then((r) => r.tokens[0], (e: unknown) => { for (const ac of acs) ac.abort(e); throw e; })));
  }

  /** Ends every request (as destroyed), then frees the model's GPU memory. */
  override destroy(): void {
    this.engine.destroy('T5Model.generate: the model was destroyed');
    for (const id of [...this.caches.keys()]) this.freeSequence(id);
    // Steps in flight: their ids are wanted by no one.
    this.rt.abandonReads(this.reads);
    this.dc?.destroy();
    this.dc = null;
    super.destroy();
  }
}
