// Whisper as applications hold it (API.md "Encoders, encoder-decoders, speech"): the encoder and decoder's
// forward pass (models/whisper.ts, WhisperRunner) under the one request engine every model has
// (engine.ts), with the block manager (kv_manager.ts) placing each step's tokens. generate, transcribe and
// the server's transcriptions are requests of that engine, batched with every other caller's.
//
// A sequence's cache is blocks of the engine's one pool: its self-attention blocks (the block manager
// grows them as it decodes) and, taken when the engine places it (admitSequence), its cross-attention
// blocks, a sequence of their own in the block manager (`<id>#x`) holding the encoder's keys/values of its
// request's audio; both go back when it ends or is preempted (freeSequence). The encoder runs at the next
// step, over every sequence placed since the last one (a batch). The prefix cache is off: the
// cross-attention makes a decoder prefix's keys/values depend on the audio, which its ids do not say.
import { check, checkKeys, checkPosInt, fmt, WebinferError } from '../core/errors.js';
import type { Runtime } from '../core/runtime.js';
import type { MelConfig } from '../ops/audio.js';
import type { StepProcessing, StepRecord, StepRow } from '../models/step.js';
import { WhisperRunner, type TranscribeOptions, type TranscriptSegment, type WhisperConfig, type WhisperRunnerOptions } from '../models/whisper.js';
import { GREEDY, RequestEngine, type StepRunner } from './engine.js';
import { KVCacheManager } from './kv_manager.js';

export interface WhisperGenerateOptions {
  /** Per prompt: its log-mel features [mels × frames] (row-major). */
  encoderInputs?: (Float32Array | number[])[];
  maxNewTokens?: number;
  temperature?: number;
  topK?: number;
  topP?: number;
  seed?: number;
  stopTokens?: number[];
  onToken?: (prompt: number, token: number) => void;
  signal?: AbortSignal;
}

const GEN_OPTIONS = ['encoderInputs', 'maxNewTokens', 'temperature', 'topK', 'topP', 'seed', 'stopTokens', 'onToken', 'signal'];

/** The block manager's id of a sequence's cross-attention blocks. */
const crossId = (id: string) => `${id}#x`;

export class WhisperModel extends WhisperRunner implements StepRunner {
  /** The block manager of the decoder caches (self- and cross-attention blocks; no prefix cache). */
  readonly kv: KVCacheManager;
  /** The model's request queue: continuous batching over every caller's requests. */
  readonly engine: RequestEngine;
  /** Tokens one step places at most: every sequence's whole start sequence at once. */
  readonly maxTokensPerStep: number;
  /** generation_config's suppressed tokens, as the engine applies them to every sampled row. */
  readonly suppress: { readonly always: readonly number[]; readonly first: readonly number[] };
  /** Sequences placed whose cross keys/values the next step writes first: id -> features and slots. */
  private readonly pending = new Map<string, { features: Float32Array; slots: Int32Array }>();
  private nextSeq = 0;

  constructor(rt: Runtime, cfg: WhisperConfig, mel: MelConfig, o: WhisperRunnerOptions) {
    super(rt, cfg, mel, o);
    this.kv = new KVCacheManager({ numBlocks: o.numBlocks, blockSize: o.blockSize, prefixCaching: false });
    this.maxTokensPerStep = o.maxSeqs * cfg.maxTarget;
    this.suppress = { always: this.suppressTokens, first: this.beginSuppressTokens };
    this.engine = new RequestEngine(this);
  }

  /** Tokens one sequence can hold: max_target_positions, within the blocks left beside one cross cache. */
  get capacity(): number {
    return Math.min(this.cfg.maxTarget, (this.numBlocks - this.crossBlocks) * this.blockSize);
  }

  /** The engine places sequence `id`: its cross-attention blocks are taken now (when `free` of the step's blocks allow), written at the next step. */
  admitSequence(id: string, encoderInput: unknown, free: number): boolean {
    if (free < this.crossBlocks) return false;
    const x = crossId(id);
    this.kv.addSequence(x);
    const m = this.kv.schedule([{ id: x, numTokens: this.encoderFrames }]);
    this.pending.set(id, { features: encoderInput as Float32Array, slots: m.slotMapping });
    return true;
  }

  freeSequence(id: string): void {
    this.pending.delete(id);
    const x = crossId(id);
    if (this.kv.has(x)) this.kv.freeSequence(x);
  }

  /** Records and submits one step (WhisperRunner.runStep): the encoder for sequences just placed, then the rows placed by the block manager. */
  recordStep(rows: StepRow[], proc: StepProcessing | null): StepRecord {
    return this.place(rows, proc, false);
  }

  private place(rows: StepRow[], proc: StepProcessing | null, all: boolean): ReturnType<WhisperRunner['runStep']> {
    if (this.pending.size) {
      this.writeCross([...this.pending.values()]);
      this.pending.clear();
    }
    const m = this.kv.schedule(rows.map((r) => ({ id: r.id, numTokens: r.ids.length })));
    const nb = this.crossBlocks;
    const cross = new Int32Array(m.order.length * nb);
    m.order.forEach((id, k) => cross.set(this.kv.blocksOf(crossId(String(id))), k * nb));
    return this.runStep(rows, m, rows.map((r) => this.kv.seqLen(r.id) - r.ids.length), cross, proc, all);
  }

  /** Decoder logits at every position of `tokens` [len × vocab], over the encoder states of o.encoderInput. */
  async logits(tokens: number[] | Int32Array, o: { encoderInput?: Float32Array | number[] } = {}): Promise<Float32Array> {
    const op = 'WhisperModel.logits';
    this.assertAlive(op);
    check(o !== null && typeof o === 'object', op, 'o', '{ encoderInput }', o);
    checkKeys(op, 'o', o, ['encoderInput']);
    const prompt = this.checkPrompt(op, 'tokens', tokens);
    check(o.encoderInput !== undefined, op, 'o.encoderInput', 'the log-mel features the decoder attends to', undefined);
    const features = this.checkFeatures(op, 'o.encoderInput', o.encoderInput);
    // Between the engine's steps: the step buffers and the block manager are the call's.
    return this.engine.runExclusive(async () => {
      this.assertAlive(op);
      const id = `w${this.nextSeq++}`;
      const need = this.crossBlocks + Math.ceil(prompt.length / this.blockSize);
      if (need > this.kv.freeBlocks) throw new WebinferError(`${op}: the KV cache has ${this.kv.freeBlocks} free blocks; this call needs ${need} (raise kvCache.numBlocks)`);
      this.kv.addSequence(id);
      try {
        this.admitSequence(id, features, this.kv.freeBlocks);
        const lg = this.place([{ id, ids: prompt, sample: false }], null, true).all!;
        try {
          return Float32Array.from(await lg.toFloat32());
        } finally {
          lg.destroy();
        }
      } finally {
        this.freeSequence(id);
        this.kv.freeSequence(id);
      }
    });
  }

  /**
   * New tokens for each start sequence over its own encoder input. Every prompt is a request of the
   * model's engine, served with every other caller's (concurrent calls, transcriptions included, share
   * steps; at most maxSeqsPerStep sequences a step), each ending at a stop token, maxNewTokens, or
   * max_target_positions. Greedy unless a temperature is given; prompt i draws from the seed's stream i.
   */
  async generate(prompts: (number[] | Int32Array)[], o: WhisperGenerateOptions = {}): Promise<number[][]> {
    const op = 'WhisperModel.generate';
    this.assertAlive(op);
    check(Array.isArray(prompts) && prompts.length > 0, op, 'prompts', 'a non-empty array of start sequences', prompts);
    check(o !== null && typeof o === 'object', op, 'o', 'an options object', o);
    checkKeys(op, 'o', o, GEN_OPTIONS);
    const inputs = o.encoderInputs;
    check(Array.isArray(inputs) && inputs.length === prompts.length, op, 'o.encoderInputs', `${prompts.length} feature arrays (one per prompt)`, inputs);
    const maxNew = o.maxNewTokens === undefined ? this.cfg.maxTarget : checkPosInt(o.maxNewTokens, op, 'o.maxNewTokens');
    const temperature = o.temperature ?? 0;
    check(typeof temperature === 'number' && Number.isFinite(temperature) && temperature >= 0, op, 'o.temperature', 'a finite number >= 0', temperature);
    const topK = o.topK ?? 0, topP = o.topP ?? 1, seed = o.seed ?? 0;
    check(Number.isInteger(topK) && topK >= 0, op, 'o.topK', 'an integer >= 0', topK);
    check(typeof topP === 'number' && topP > 0 && topP <= 1, op, 'o.topP', 'a number in (0, 1]', topP);
    check(Number.isInteger(seed) && seed >= 0 && seed < 2 ** 32, op, 'o.seed', 'an integer in [0, 2^32)', seed);
    if (o.stopTokens !== undefined) check(Array.isArray(o.stopTokens) && o.stopTokens.every((t) => Number.isInteger(t)), op, 'o.stopTokens', 'an array of token ids', o.stopTokens);
    if (o.onToken !== undefined) check(typeof o.onToken === 'function', op, 'o.onToken', 'a function', o.onToken);
    if (o.signal !== undefined) check(typeof AbortSignal !== 'undefined' && o.signal instanceof AbortSignal, op, 'o.signal', 'an AbortSignal', fmt(o.signal));
    const stops = new Set(o.stopTokens ?? this.cfg.eos);
    const checked = prompts.map((p, i) => ({ prompt: this.checkPrompt(op, `prompts[${i}]`, p), features: this.checkFeatures(op, `o.encoderInputs[${i}]`, inputs[i]) }));
    if (o.signal?.aborted) throw new WebinferError(`${op}: aborted`);
    this.stepsInFlight(op);
    const sampling = temperature > 0 ? { ...GREEDY, temperature, topK, topP, seed } : undefined;
    // The call's own abort: the caller's signal, or one prompt's failure, ends every prompt.
    const acs = checked.map(() => new AbortController());
    let aborted = false;
    const abortAll = (why: unknown) => {
      if (aborted) return;
      aborted = true;
      for (const ac of acs) ac.abort(why);
    };
    const onAbort = () => abortAll(new WebinferError(`${op}: aborted`));
    o.signal?.addEventListener('abort', onAbort, { once: true });
    try {
      const results = await Promise.all(checked.map(({ prompt, features }, i) => {
        // At most max_target_positions tokens in all.
        const maxTokens = Math.min(maxNew, this.cfg.maxTarget - prompt.length);
        if (maxTokens <= 0) return Promise.resolve([]);
        return this.engine.submit({
          prompt: Int32Array.from(prompt), maxTokens, stopTokens: stops, signal: acs[i].signal, sampling, stream: i, encoderInput: features,
          onTokens: o.onToken ? (_c, toks) => { for (const t of toks) o.onToken!(i, t); } : undefined,
        }, op).result.then((r) => r.tokens[0], (e: unknown) => { abortAll(e); throw e; });
      }));
      return results;
    } finally {
      o.signal?.removeEventListener('abort', onAbort);
    }
  }

  /**
   * Transcribes 16 kHz mono PCM: windows of chunk_length seconds (the last zero-padded), all decoded
   * together from Whisper's start sequence greedily to <|endoftext|>; text through the tokenizer when
   * the model has one (else empty: the tokens are returned). timestamps: segments from the timestamp
   * tokens, offset by each window's start.
   */
  async transcribe(pcm: Float32Array, o: TranscribeOptions = {}): Promise<{ text: string; tokens: number[]; segments?: TranscriptSegment[] }> {
    const op = 'WhisperModel.transcribe';
    this.assertAlive(op);
    check(pcm instanceof Float32Array, op, 'pcm', 'a Float32Array of 16 kHz mono samples', pcm);
    check(o !== null && typeof o === 'object', op, 'o', '{ language, task, timestamps, signal }', o);
    checkKeys(op, 'o', o, ['language', 'task', 'timestamps', 'signal']);
    const start = this.startSequence(o);
    const inputs = await this.windowFeatures(op, pcm);
    const outs = await this.generate(inputs.map(() => start), { encoderInputs: inputs, signal: o.signal });
    return this.transcript(outs, !!o.timestamps);
  }

  /** Ends every request (as destroyed), then frees the model's GPU memory. */
  override destroy(): void {
    this.engine.destroy('WhisperModel.generate: the model was destroyed');
    super.destroy();
  }
}
