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
// Policy (per choice, SpecState): the number of proposals that yields the most tokens a millisecond at
// the choice's acceptance estimate and the steps' measured costs (SpecCost), or none when plain decoding
// yields more (then a stretch of plain decoding, doubling each time); with many choices decoding the
// engine proposes fewer tokens, none past `maxBatch` (a full batch already reads each weight once for
// many tokens: a verification row only adds work there).
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

/**
 * What steps cost, as the speculation policy weighs them: the ms of decode-only steps carrying
 * verification rows, by the step's tokens (an EMA of each; from planning the step, the draft's proposals
 * included, to its ids back on the host, since a speculating choice waits for them before its next
 * step). Plain decoding's ms a step comes from the engine's StepCost (steps in flight one after another).
 */
export class SpecCost {
  private readonly byTokens: number[] = [];
  constructor(private readonly alpha = 0.3) {}

  observe(tokens: number, ms: number): void {
    if (!(ms > 0) || !Number.isFinite(ms) || !(tokens >= 1)) return;
    const old = this.byTokens[tokens];
    this.byTokens[tokens] = old === undefined ? ms : old + this.alpha * (ms - old);
  }

  /** A verification step of `tokens` tokens: as seen; else between the nearest seen on either side
   *  (linearly); else the nearest seen below it (a verification reads the weights once: its cost grows
   *  slowly with rows); NaN when none is known at or below it. */
  ms(tokens: number): number {
    const t = this.byTokens;
    if (t[tokens] !== undefined) return t[tokens];
    let lo = -1, hi = -1;
    for (let i = tokens - 1; i >= 1; i--) if (t[i] !== undefined) { lo = i; break; }
    for (let i = tokens + 1; i < t.length; i++) if (t[i] !== undefined) { hi = i; break; }
    if (lo < 0) return NaN;
    if (hi < 0) return t[lo];
    return t[lo] + ((t[hi] - t[lo]) * (tokens - lo)) / (hi - lo);
  }
}

/** What the policy weighs a choice's proposals against (RequestEngine: its StepCost and SpecCost). */
export interface SpecCosts {
  /** ms of a plain decode step of the choices decoding (NaN while unknown). */
  plainMs: number;
  /** ms of a verification step of `tokens` tokens (NaN while unknown). */
  verifyMs(tokens: number): number;
}

/** Tokens a verification of k proposals yields on average when each is accepted with probability p
 *  (the accepted run, then the target's own sample): 1 + p + ... + p^k. */
export function expectedTokens(k: number, p: number): number {
  return p >= 1 ? k + 1 : (1 - p ** (k + 1)) / (1 - p);
}

/**
 * A choice's speculation state: its acceptance estimate and when it next speculates.
 *
 * k: the number of proposals with the most tokens a millisecond, expectedTokens(k, p) over a
 * verification step's measured cost, among 1 .. min(cfg.k, the batch's share); none when plain decoding
 * makes more (a verification is slower than a plain step by more than its accepted tokens pay for: the
 * GEMVs of a few rows cost several of one row's on some adapters, and a speculating choice's step is not
 * overlapped with the next). A cost not measured yet counts as a plain step's, so each k is tried.
 * p: accepted proposals over accepted proposals and rejections, both decaying (each verification ends at
 * its first rejection, so this is the chance that a proposal is accepted given that the one before was).
 * When plain decoding wins, or no proposal is found, the choice decodes plainly (pipelined) for a
 * stretch; after a stretch that plain decoding won, one verification measures again, and the next stretch
 * is twice as long if plain decoding still wins.
 */
export class SpecState {
  /** Decayed counts of accepted proposals and of rejections (a prior of p = 0.8). */
  private acc = 4;
  private rej = 1;
  verifications = 0;
  /** Output length before which the choice does not speculate. */
  offUntil = 0;
  private backoff = 16;
  private probed = false;
  private exploring = true;

  constructor(readonly cfg: SpeculationConfig) {}

  /** The estimated chance that a proposal is accepted. */
  get rate(): number { return this.acc / (this.acc + this.rej); }

  /** Proposals to ask for now, given the choice's output length, the choices decoding and (when the engine
   *  knows them) the steps' costs: 0 means decode plainly (a stretch of plain decoding starts when plain
   *  decoding is expected to win). */
  budget(outLen: number, decoding: number, costs?: SpecCosts): number {
    if (outLen < this.offUntil || decoding > this.cfg.maxBatch) return 0;
    // Fewer proposals the more choices share the step.
    const cap = Math.min(this.cfg.k, Math.max(1, Math.floor(this.cfg.k * 2 / Math.max(2, decoding))));
    const plain = costs?.plainMs ?? NaN;
    if (!(plain > 0)) {
      // Plain decoding's cost unknown (nothing decoded plainly yet): after a few verifications, a short
      // plain stretch measures it.
      if (costs && this.verifications >= 4 && !this.probed) {
        this.probed = true;
        this.offUntil = outLen + 6;
        return 0;
      }
      return cap;
    }
    const p = this.rate;
    let best = 1, bestRate = 0;
    for (let k = 1; k <= cap; k++) {
      const ms = costs!.verifyMs(Math.max(1, decoding) + k);
      const r = expectedTokens(k, p) / (ms > 0 ? ms : plain);
      if (r > bestRate) { best = k; bestRate = r; }
    }
    if (bestRate > 1 / plain) return best;
    // Plain decoding wins. Before the first verification and after a stretch of plain decoding, one
    // verification all the same: the acceptance and the costs are measured (again: a text may turn
    // repetitive; a step's cost changes with the batch). It is owed until record() sees it.
    if (this.exploring) return best;
    this.offUntil = outLen + this.backoff;
    this.backoff = Math.min(this.backoff * 2, 1024);
    this.exploring = true;
    return 0;
  }

  /** No proposal was found: a few tokens pass before the next lookup (decoding pipelined meanwhile). */
  pause(outLen: number): void {
    this.offUntil = Math.max(this.offUntil, outLen + 3);
  }

  /** After a verification of `proposed` tokens of which `accepted` were kept. */
  record(proposed: number, accepted: number): void {
    if (proposed <= 0) return;
    this.verifications++;
    this.exploring = false;
    this.acc = 0.8 * this.acc + accepted;
    this.rej = 0.8 * this.rej + (accepted < proposed ? 1 : 0);
  }
}
