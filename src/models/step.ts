// What a model architecture provides to the step runtime (src/models/model.ts), and what it gets from
// it for each step.
import { check, fmt, WebinferError } from '../core/errors.js';
import type { Runtime } from '../core/runtime.js';
import type { Tensor } from '../core/tensor.js';
import { adjustLogits, argmax, maskLogits, sampleRows } from '../ops/sample.js';
import type { LinearWeight } from '../ops/gemm.js';
import type { ModelConfig } from './config.js';
import type { WeightDType, WeightReader } from './weights.js';

/** One step's inputs, all on the GPU (the host wrote them once for the step). */
export interface StepContext {
  /** Tokens of the step (rows of every activation used). */
  T: number;
  /** The residual stream [>= T, hidden], holding the step's embeddings when forward starts. */
  h: Tensor;
  /** i32 [>= T]: each token's position in its sequence. */
  positions: Tensor;
  /** i32 [>= T]: each token's cache slot. */
  slots: Tensor;
  /** RoPE tables, f32 [positions, rotaryDim/2] each. */
  cos: Tensor;
  sin: Tensor;
  /** The batch's attention metadata (host arrays: planned on the host, once per step). */
  meta: { queryStartLoc: Int32Array; seqLens: Int32Array; blockTable: Int32Array; maxBlocksPerSeq: number;
    /** Each row's per-sequence state slot (Architecture.createStates), in the rows' placement order; absent: none. */
    stateSlots?: Int32Array };
  /**
   * The step's attention where it is not the rows' causal attention over `meta` (Gemma 3's image blocks,
   * bidirectional within a block): its own metadata over the same T query rows and caches, and no causal
   * mask (each sequence's keys end where its queries may look). Absent: causal over `meta`.
   */
  attention?: { meta: { queryStartLoc: Int32Array; seqLens: Int32Array; blockTable: Int32Array; maxBlocksPerSeq: number }; causal: false };
}

export interface Architecture {
  readonly cfg: ModelConfig;
  readonly embed: LinearWeight;
  readonly lmHead: LinearWeight;
  /**
   * Soft-capping of the logits the lm_head gives (Gemma2's final_logit_softcapping): logits ->
   * cap·tanh(logits/cap) before they are returned or sampled from; absent or null: none.
   */
  readonly logitSoftcap?: number | null;
  /** The cache dtypes this architecture's layers can keep (the first: for f32 weights; the second: otherwise). */
  readonly cacheDTypes: readonly string[];
  load(r: WeightReader, dtype: WeightDType): Promise<void>;
  initRandom(dtype: WeightDType, seed: number): void;
  /** Bytes of weights one decode step of `batch` sequences reads (MoE: the experts they choose). */
  weightBytes(batch: number): number;
  /** GPU bytes of every weight as stored (Model.weightBytes). */
  storedWeightBytes(): number;
  /** Bytes one token takes in one layer's cache, and in the largest single cache buffer's row. */
  cacheBytes(dtype: string): { perToken: number; perBufferRow: number };
  createCaches(o: { numBlocks: number; blockSize: number; dtype: string }): void;
  /**
   * Per-sequence state beside the paged cache (LFM2's conv state: a recurrence a block table cannot
   * page), made for `slots` sequences; a step names each row's slot (StepContext.meta.stateSlots).
   * Absent: the architecture keeps none.
   */
  createStates?(slots: number): void;
  /** Copies whole states, [from, to] slot pairs (a forked choice starts from its prompt's state). */
  copyStates?(pairs: readonly (readonly [number, number])[]): void;
  /**
   * Whether the states are also kept at each full cache block's end (written as the block's last token
   * is computed): the prefix cache can then serve such a model, a hit restored by restoreStates.
   */
  readonly stateSnapshots?: boolean;
  /** Copies the state kept at a block's end into a slot, [block, slot] pairs (a prefix hit's start). */
  restoreStates?(pairs: readonly (readonly [number, number])[]): void;
  allocate(maxTokens: number): void;
  /** Plans the step's attention (once per step, before forward). */
  plan(s: StepContext): void;
  /**
   * Gives the last step's attention plans back to the pool before the step's submit of earlier work
   * (plan() comes after it): their buffers are then free for this step's plans, which take the same
   * ones in the same order, so step graphs repeat. Optional; plan() releases what is left.
   */
  releasePlans?(): void;
  /**
   * After plan(): a name for what forward(s) will record, equal between steps whose recordings are equal
   * (the model then replays the first one's commands: a StepGraph), or null where it cannot say.
   */
  signature?(s: StepContext): string | null;
  /** Records the layers; returns the final-normed hidden states [>= T, hidden]. */
  forward(s: StepContext): Tensor;
  destroy(): void;
}

// ------------------------------------------------------------------------------------------------
// The step contract as the request engine sees it (serve/engine.ts): the rows it places, how their
// sampled rows are processed, and what comes back.

/**
 * Where a step's tokens go, as the block manager placed them (serve/kv_manager.ts's StepMetadata extends
 * this shape): row i's tokens are rows[i] of the flattened batch.
 */
export interface StepPlacement {
  rows: readonly (readonly [number, number])[];
  numTokens: number;
  queryStartLoc: Int32Array;
  seqLens: Int32Array;
  blockTable: Int32Array;
  maxBlocksPerSeq: number;
  /** Cache slot of every new token, in batch order. */
  slotMapping: Int32Array;
  /** Each row's per-sequence state slot, in the order of seqLens (where the architecture keeps states). */
  stateSlots?: Int32Array;
}

export interface StepRow {
  id: string;
  /** Ids to place; a negative id -(1 + r) is row r of the previous step's sampled ids (still on the GPU). */
  ids: number[];
  sample: boolean;
  /** Draws from the row's last logits (default 1): a request's n choices sampled from its prompt's one
   *  computation (serve/engine.ts forks them); they take consecutive places among the sampled ids. */
  samples?: number;
  /** Draws at every position of the row, not only the last (a speculating request's verification: its
   *  last token and k proposals, each position sampled with its own keyed draws); they take consecutive
   *  places among the sampled ids, position order. A runner that has it says so (StepRunner.verifies). */
  sampleAll?: boolean;
}

/** The sampled rows' own settings, edits, masks and logprob copies (null: all greedy, nothing else). */
export interface StepProcessing {
  params: Uint32Array | null;
  edits: Uint32Array;
  nEdits: number;
  masks: Uint32Array;
  maskRows: Int32Array;
  nMasks: number;
  /** Sampled rows whose raw logits come back. */
  logprobRows: number[];
}

export interface StepRecord {
  step: number;
  /** Tokens placed. */
  T: number;
  /** Each row's place among the step's sampled ids (-1: none). */
  sampledRow: number[];
  ids: Promise<ArrayBuffer>;
  /** The raw logits of the logprob rows, in their order. */
  logits: Promise<ArrayBuffer> | null;
}

/** Checks a token id list as numbers before any conversion (2^32 + 1 must not wrap to 1). */
export function checkTokenIds(op: string, arg: string, t: unknown, vocab: number): Int32Array {
  const ok = (Array.isArray(t) || t instanceof Int32Array) && (t as ArrayLike<number>).length > 0;
  check(ok, op, arg, 'a non-empty number[] or Int32Array of token ids', t);
  const a = t as ArrayLike<unknown>;
  for (let i = 0; i < a.length; i++) {
    const x = a[i];
    if (typeof x !== 'number' || !Number.isInteger(x) || x < 0 || x >= vocab) {
      throw new WebinferError(`${op}: ${arg}[${i}]: expected a token id in [0, ${vocab}), got ${fmt(x)}`);
    }
  }
  return Int32Array.from(a as ArrayLike<number>);
}

/**
 * A step's sampling of its logit rows, shared by the runners (models/model.ts, whisper.ts): the per-row
 * settings, logit edits, masks and logprob copies on the GPU (grown on demand), uploaded with the step's
 * inputs, then the commands that turn the rows into ids.
 */
export class StepSampling {
  private rowParams: Tensor | null = null;
  private edits: Tensor | null = null;
  private masks: Tensor | null = null;
  private maskRows: Tensor | null = null;
  private lpCopy: Tensor | null = null;

  constructor(private readonly rt: Runtime) {}

  /** Grows the buffers for `proc` over a vocabulary of V (before the step's flush: they may be made). */
  grow(proc: StepProcessing | null, V: number): void {
    if (!proc) return;
    if (proc.params) this.rowParams = this.grown(this.rowParams, proc.params.length);
    if (proc.nEdits) this.edits = this.grown(this.edits, proc.nEdits * 4);
    if (proc.nMasks) {
      this.masks = this.grown(this.masks, proc.nMasks * Math.ceil(V / 32));
      this.maskRows = this.grown(this.maskRows, proc.nMasks, 'i32');
    }
    if (proc.logprobRows.length) this.lpCopy = this.grown(this.lpCopy, proc.logprobRows.length * V, 'f32');
  }

  /** Uploads `proc` (after the step's flush, with its other inputs). */
  upload(proc: StepProcessing | null, V: number): void {
    if (!proc) return;
    const q = this.rt.device.queue;
    if (proc.params) q.writeBuffer(this.rowParams!.buffer, 0, proc.params as Uint32Array<ArrayBuffer>);
    if (proc.nEdits) q.writeBuffer(this.edits!.buffer, 0, proc.edits as Uint32Array<ArrayBuffer>, 0, proc.nEdits * 4);
    if (proc.nMasks) {
      q.writeBuffer(this.masks!.buffer, 0, proc.masks as Uint32Array<ArrayBuffer>, 0, proc.nMasks * Math.ceil(V / 32));
      q.writeBuffer(this.maskRows!.buffer, 0, proc.maskRows as Int32Array<ArrayBuffer>);
    }
  }

  /**
   * The ids of logit rows [R, V] into out: the argmax where the step asks nothing of them; else the raw
   * logits of the logprob rows copied first, then the edits and masks, then each row's own draw.
   */
  record(logits: Tensor, R: number, V: number, proc: StepProcessing | null, out: Tensor): void {
    const rt = this.rt;
    if (!proc) {
      argmax(rt, logits, { rows: R, out });
      return;
    }
    if (proc.logprobRows.length) {
      const enc = rt.commandEncoder();
      proc.logprobRows.forEach((r, i) => enc.copyBufferToBuffer(logits.buffer, r * V * 4, this.lpCopy!.buffer, i * V * 4, V * 4));
    }
    if (proc.nEdits) adjustLogits(rt, logits, this.edits!, proc.nEdits);
    if (proc.nMasks) maskLogits(rt, logits, this.masks!, this.maskRows!, proc.nMasks);
    if (proc.params) sampleRows(rt, logits, this.rowParams!, { rows: R, out });
    else argmax(rt, logits, { rows: R, out });
  }

  /** The read-back of the logprob rows' raw logits (after the step's submit), or null where none. */
  readLogprobs(proc: StepProcessing | null, V: number, pending: Set<GPUBuffer>): Promise<ArrayBuffer> | null {
    const n = proc?.logprobRows.length ?? 0;
    return n ? this.rt.readBuffer(this.lpCopy!.buffer, n * V * 4, 0, pending) : null;
  }

  destroy(): void {
    for (const t of [this.rowParams, this.edits, this.masks, this.maskRows, this.lpCopy]) t?.destroy();
    this.rowParams = this.edits = this.masks = this.maskRows = this.lpCopy = null;
  }

  private grown(t: Tensor | null, words: number, dtype: 'u32' | 'i32' | 'f32' = 'u32'): Tensor {
    if (t && t.numel >= words) return t;
    t?.destroy();
    return this.rt.zeros([Math.max(words, 2 * (t?.numel ?? 0), 64)], dtype);
  }
}

/** Each row's sequence in the placement's order (KVCacheManager.schedule places one-token rows first):
 *  the sequence whose queries start at the row's first token. */
export function sequenceOfRow(m: StepPlacement): Int32Array {
  const at = new Map<number, number>();
  for (let k = 0; k + 1 < m.queryStartLoc.length; k++) at.set(m.queryStartLoc[k], k);
  return Int32Array.from(m.rows, ([a]) => at.get(a) ?? -1);
}

/**
 * A verifying step's attention metadata with each verification row's k + 1 positions as one-token
 * sequences over the row's blocks, position j's keys ending at it (tuning.verifyRowsAsDecode): the same
 * query rows in the same order, each causal as before, so every row attends as a plain decode row of
 * that length does. Other rows keep their sequences.
 */
export function verificationAsDecode(rows: readonly StepRow[], m: StepPlacement): StepContext['meta'] {
  const B = m.maxBlocksPerSeq, S = m.seqLens.length, seq = sequenceOfRow(m);
  const verify = new Uint8Array(S);
  rows.forEach((r, i) => { if (r.sample && r.sampleAll && seq[i] >= 0) verify[seq[i]] = 1; });
  const qsl = [0], lens: number[] = [], from: number[] = [];
  for (let k = 0; k < S; k++) {
    const q = m.queryStartLoc[k + 1] - m.queryStartLoc[k];
    if (!verify[k] || q <= 1) { qsl.push(m.queryStartLoc[k + 1]); lens.push(m.seqLens[k]); from.push(k); continue; }
    for (let j = 0; j < q; j++) { qsl.push(m.queryStartLoc[k] + j + 1); lens.push(m.seqLens[k] - q + j + 1); from.push(k); }
  }
  return { queryStartLoc: Int32Array.from(qsl), seqLens: Int32Array.from(lens), blockTable: blockTableOf(m, from), maxBlocksPerSeq: B };
}

/** A block table whose row s is the placement's sequence from[s]'s (its width m.maxBlocksPerSeq). */
export function blockTableOf(m: StepPlacement, from: readonly number[]): Int32Array {
  const B = m.maxBlocksPerSeq, bt = new Int32Array(from.length * B);
  from.forEach((k, s) => bt.set(m.blockTable.subarray(k * B, (k + 1) * B), s * B));
  return bt;
}
