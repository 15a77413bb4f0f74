// Speculative decoding (API.md "Speculative decoding", SPEC §9): where proposals come from and how many a
// request makes. The request engine (engine.ts) verifies them: a speculating request's step row carries
// its last token and k proposals, the target samples every position with that position's keyed draws,
// and the longest run of proposals equal to the target's samples is kept with the sample after it. So
// the output is the target's own, token for token, whatever was proposed; proposals only decide how
// many tokens one step yields.
//
// Proposals come from one of two places:
// - n-gram lookup (prompt lookup decoding) in the request's own prompt and output, on the host (a scan
//   of the sequence's ids: microseconds at the batch sizes where speculation pays, and the ids of a
//   speculating request are on the host anyway, since its next row depends on what was accepted);
// - a draft model sharing the tokenizer: its own request engine, paged cache and steps on the same
//   GPU, asked for k greedy tokens after the sequence's ids. Its prefix cache keeps each sequence's full
//   blocks between rounds, so a round prefills the tokens since the last full block and decodes k - 1.
//
// Policy (per choice): k adapts to what the last verifications accepted (all accepted: one more, up to
// k; else one more than were accepted); a choice whose acceptance stays low stops speculating for a
// stretch that doubles each time; and with many choices decoding the engine proposes fewer tokens, none
// past `maxBatch` (a full batch already reads each weight once for many tokens: a verification row
// only adds work there).
import { check, checkKeys, checkPosInt } from '../core/errors.js';

export interface NgramSpeculation {
  method: 'ngram';
  /** Proposals per step at most (default 4). */
  k?: number;
  /** The shortest and longest suffix looked up (defaults 2 and 4). */
  minMatch?: number;
  maxMatch?: number;
  /** No proposals while more choices than this decode (default 8). */
  maxBatch?: number;
}

/**
 * What speculation needs of a draft model: its request queue (a Model is one: loadModel checks, before
 * the target loads, that the draft is a live decoder-only Model of the same engine).
 */
export interface DraftModel {
  readonly vocabSize: number;
  readonly engine: { submit(o: DraftRequest, op?: string): { readonly result: Promise<{ tokens: number[][] }> } };
}

/** A draft request as the draft's RequestEngine takes it (greedy, no stop tokens). */
export interface DraftRequest {
  prompt: Int32Array;
  maxTokens: number;
  stopTokens?: ReadonlySet<number>;
  cacheSalt?: string;
  speculative?: boolean;
}

export interface DraftSpeculation {
  method: 'draft';
  /** A smaller model sharing the target's tokenizer, loaded on the same engine. */
  draft: DraftModel;
  /** Proposals per step at most (default 4). */
  k?: number;
  /** No proposals while more choices than this decode (default 8). */
  maxBatch?: number;
}

/** What the engine takes: a checked, complete setting. */
export type SpeculationConfig =
  | { method: 'ngram'; k: number; minMatch: number; maxMatch: number; maxBatch: number }
  | { method: 'draft'; draft: DraftModel; k: number; maxBatch: number };

const SHAPES = "{ method: 'ngram', k?, minMatch?, maxMatch?, maxBatch? } or { method: 'draft', draft: Model, k?, maxBatch? }";

/** Checks loadModel's `speculative` option (undefined or false: none). The draft's own checks (a Model of
 *  this engine) are loadModel's. */
export function parseSpeculation(op: string, v: unknown): SpeculationConfig | null {
  if (v === undefined || v === false || v === null) return null;
  check(typeof v === 'object' && !Array.isArray(v), op, 'o.speculative', SHAPES, v);
  const o = v as Record<string, unknown>;
  check(o.method === 'ngram' || o.method === 'draft', op, 'o.speculative.method', "'ngram' or 'draft'", o.method);
  const k = o.k === undefined ? 4 : checkPosInt(o.k, op, 'o.speculative.k');
  check(k <= 16, op, 'o.speculative.k', 'at most 16 proposals a step', k);
  const maxBatch = o.maxBatch === undefined ? 8 : checkPosInt(o.maxBatch, op, 'o.speculative.maxBatch');
  if (o.method === 'draft') {
    checkKeys(op, 'o.speculative', o, ['method', 'draft', 'k', 'maxBatch']);
    const d = o.draft as Partial<DraftModel> | undefined;
    check(!!d && typeof d === 'object' && typeof d.engine?.submit === 'function' && Number.isInteger(d.vocabSize), op, 'o.speculative.draft',
      'a decoder-only Model loaded on the same engine (engine.loadModel)', d);
    return { method: 'draft', draft: d as DraftModel, k, maxBatch };
  }
  checkKeys(op, 'o.speculative', o, ['method', 'k', 'minMatch', 'maxMatch', 'maxBatch']);
  const minMatch = o.minMatch === undefined ? 2 : checkPosInt(o.minMatch, op, 'o.speculative.minMatch');
  const maxMatch = o.maxMatch === undefined ? Math.max(4, minMatch) : checkPosInt(o.maxMatch, op, 'o.speculative.maxMatch');
  check(maxMatch >= minMatch, op, 'o.speculative.maxMatch', `at least minMatch=${minMatch}`, maxMatch);
  check(maxMatch <= 64, op, 'o.speculative.maxMatch', 'at most 64', maxMatch);
  return { method: 'ngram', k, minMatch, maxMatch, maxBatch };
}

/**
 * Prompt lookup: the tokens that followed the latest earlier occurrence of the sequence's last n ids
 * (n from maxMatch down to minMatch, the longest that occurs), at most k of them; [] when none occurs.
 */
export function ngramProposals(ids: ArrayLike<number>, k: number, minMatch: number, maxMatch: number): number[] {
  const L = ids.length;
  if (k <= 0) return [];
  for (let n = Math.min(maxMatch, L - 1); n >= minMatch; n--) {
    // Earlier windows [i, i + n) equal to the suffix [L - n, L), the latest first; i + n < L so that
    // at least one token follows it.
    for (let i = L - n - 1; i >= 0; i--) {
      let j = 0;
      while (j < n && ids[i + j] === ids[L - n + j]) j++;
      if (j < n) continue;
      const out: number[] = [];
      for (let t = i + n; t < L && out.length < k; t++) out.push(ids[t]);
      return out;
    }
  }
  return [];
}

/** A choice's speculation state: its current k and its acceptance record. */
export class SpecState {
  k: number;
  /** Acceptance (accepted / proposed) of recent verifications, a moving average. */
  rate = 1;
  verifications = 0;
  /** Output length before which the choice does not speculate (backing off after low acceptance). */
  offUntil = 0;
  private backoff = 16;

  constructor(readonly cfg: SpeculationConfig) {
    this.k = cfg.k;
  }

  /** Proposals to ask for now, given the choice's output length and the choices decoding. */
  budget(outLen: number, decoding: number): number {
    if (outLen < this.offUntil || decoding > this.cfg.maxBatch) return 0;
    // Fewer proposals the more choices share the step.
    const share = Math.max(1, Math.floor(this.cfg.k * 2 / Math.max(2, decoding)));
    return Math.min(this.k, share);
  }

  /** No proposal was found: a few tokens pass before the next lookup (decoding pipelined meanwhile). */
  pause(outLen: number): void {
    this.offUntil = Math.max(this.offUntil, outLen + 3);
  }

  /** After a verification of `proposed` tokens of which `accepted` were kept. */
  record(proposed: number, accepted: number, outLen: number): void {
    if (proposed <= 0) return;
    this.verifications++;
    this.rate += 0.3 * (accepted / proposed - this.rate);
    this.k = accepted === proposed ? Math.min(this.cfg.k, this.k + 1) : Math.max(1, accepted + 1);
    if (this.verifications >= 4 && this.rate < 0.2) {
      this.offUntil = outLen + this.backoff;
      this.backoff = Math.min(this.backoff * 2, 1024);
      this.rate = 0.5;
      this.verifications = 0;
    }
  }
}
