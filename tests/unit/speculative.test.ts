// Speculative decoding's host side (serve/speculative.ts, the request engine's verification): n-gram
// lookup, the options' checks, the per-choice policy, the block manager's rollback, and the engine over
// a runner on the host whose next token is a fixed function of the last (so n-gram lookup is right once
// the output cycles): outputs equal plain decoding, the counters add up, and a full batch speculates
// not at all.
import { describe, expect, it } from 'vitest';
import { rng } from '../../src/core/random';
import { RequestEngine, type StepRunner } from '../../src/serve/engine';
import { KVCacheManager } from '../../src/serve/kv_manager';
import { expectedTokens, ngramProposals, parseSpeculation, SpecCost, SpecState } from '../../src/serve/speculative';
import type { StepProcessing, StepRecord, StepRow } from '../../src/models/step';

const V = 32;
/** The "model": token t is always followed by NEXT(t) (cycles of 5 tokens: 0-4, 5-9, ...; 30 and 31 repeat). */
const NEXT = (t: number) => (t >= 30 ? t : t % 5 === 4 ? t - 4 : t + 1);

class HostRunner implements StepRunner {
  /** `next`: the runner's "model" (a draft that disagrees has another). */
  constructor(private readonly next: (t: number) => number = NEXT) {}
  readonly kv = new KVCacheManager({ numBlocks: 64, blockSize: 4, prefixCaching: true });
  readonly maxTokensPerStep = 64;
  readonly maxSeqsPerStep = 16;
  readonly vocabSize = V;
  readonly capacity = 128;
  readonly verifies = true;
  exactAttention = false;
  stepNo = 0;
  /** Per step: its rows (ids and whether every position samples). */
  readonly steps: StepRow[][] = [];
  private prev: number[] = [];

  stepsInFlight(): number { return 2; }
  assertAlive(): void {}

  recordStep(rows: StepRow[], _proc: StepProcessing | null): StepRecord {
    const step = this.stepNo++;
    this.kv.schedule(rows.map((r) => ({ id: r.id, numTokens: r.ids.length })));
    this.steps.push(rows.map((r) => ({ ...r, ids: [...r.ids] })));
    const sampledRow: number[] = [];
    const out: number[] = [];
    let T = 0;
    for (const r of rows) {
      T += r.ids.length;
      const ids = r.ids.map((t) => (t < 0 ? this.prev[-(1 + t)] : t));
      if (!r.sample) { sampledRow.push(-1); continue; }
      sampledRow.push(out.length);
      if (r.sampleAll) for (const t of ids) out.push(this.next(t));
      else for (let k = 0; k < (r.samples ?? 1); k++) out.push(this.next(ids[ids.length - 1]));
    }
    this.prev = out;
    return { step, T, sampledRow, ids: Promise.resolve(Int32Array.from(out).buffer), logits: null };
  }
}

describe('n-gram lookup', () => {
  it('proposes what followed the latest earlier occurrence of the longest suffix that occurs', () => {
    expect(ngramProposals([1, 2, 3, 4, 1, 2], 3, 2, 4)).toEqual([3, 4, 1]);
    // The latest occurrence wins: [5, 6] occurs twice, followed by 7 then by 8.
    expect(ngramProposals([5, 6, 7, 0, 5, 6, 8, 9, 5, 6], 2, 2, 2)).toEqual([8, 9]);
    // Longer suffixes first: [2, 3] after 1 is followed by 9; [3] alone is below minMatch.
    expect(ngramProposals([1, 2, 3, 9, 4, 2, 3, 7, 1, 2, 3], 1, 2, 3)).toEqual([9]);
    expect(ngramProposals([1, 2, 3, 4], 3, 2, 4)).toEqual([]);
    expect(ngramProposals([1, 2, 1, 2], 0, 2, 4)).toEqual([]);
    // At most k, and never past the end.
    expect(ngramProposals([1, 2, 8, 1, 2], 5, 2, 2)).toEqual([8, 1, 2]);
  });
});

describe('speculative options', () => {
  it('are checked by name, with defaults', () => {
    expect(parseSpeculation('loadModel', undefined)).toBeNull();
    expect(parseSpeculation('loadModel', false)).toBeNull();
    expect(parseSpeculation('loadModel', { method: 'ngram' })).toEqual({ method: 'ngram', k: 4, minMatch: 2, maxMatch: 4, maxBatch: 8 });
    expect(() => parseSpeculation('loadModel', { method: 'medusa' })).toThrow(/o\.speculative\.method: expected 'ngram' or 'draft'/);
    expect(() => parseSpeculation('loadModel', { method: 'draft' })).toThrow(/o\.speculative\.draft: expected a decoder-only Model/);
    expect(() => parseSpeculation('loadModel', { method: 'draft', draft: {}, k: 2 })).toThrow(/o\.speculative\.draft/);
    expect(() => parseSpeculation('loadModel', { method: 'draft', draft: new RequestEngine(new HostRunner()) })).toThrow(/o\.speculative\.draft/);
    const draft = { vocabSize: V, engine: new RequestEngine(new HostRunner()) };
    expect(parseSpeculation('loadModel', { method: 'draft', draft })).toEqual({ method: 'draft', draft, k: 4, maxBatch: 8 });
    expect(() => parseSpeculation('loadModel', { method: 'draft', draft, minMatch: 2 })).toThrow(/minMatch/);
    expect(() => parseSpeculation('loadModel', { method: 'ngram', k: 17 })).toThrow(/o\.speculative\.k/);
    expect(() => parseSpeculation('loadModel', { method: 'ngram', minMatch: 3, maxMatch: 2 })).toThrow(/maxMatch/);
    expect(() => parseSpeculation('loadModel', { method: 'ngram', kk: 2 })).toThrow(/kk/);
    expect(() => parseSpeculation('loadModel', 'ngram')).toThrow(/o\.speculative/);
  });
});

describe('speculation policy', () => {
  const cfg = parseSpeculation('t', { method: 'ngram', k: 6, maxBatch: 8 })!;
  it('proposes less in a fuller batch and none past maxBatch; pauses when no proposal is found', () => {
    const s = new SpecState(cfg);
    expect(s.budget(10, 1)).toBe(6);
    expect(s.budget(10, 4)).toBe(3);
    expect(s.budget(10, 9)).toBe(0);
    s.pause(2000);
    expect(s.budget(2001, 1)).toBe(0);
    expect(s.budget(2003, 1)).toBe(6);
  });

  it('estimates acceptance from accepted runs and rejections, forgetting old verifications', () => {
    const s = new SpecState(cfg);
    expect(s.rate).toBeCloseTo(0.8, 10);
    for (let i = 0; i < 40; i++) s.record(4, 4);
    expect(s.rate).toBeGreaterThan(0.95);
    // Runs of 2 accepted then a rejection: p = 2 / 3.
    for (let i = 0; i < 60; i++) s.record(4, 2);
    expect(s.rate).toBeCloseTo(2 / 3, 3);
    expect(expectedTokens(4, 1)).toBe(5);
    expect(expectedTokens(2, 0.5)).toBeCloseTo(1.75, 12);
  });

  it('takes the k with the most tokens a millisecond at the measured costs, and none when plain decoding yields more', () => {
    // A plain step 5 ms; verification steps as an H200 ran the 8B Q4_K_M shape (ms by tokens).
    const cost = new SpecCost();
    for (const [t, ms] of [[2, 14], [3, 20], [5, 20], [9, 20.5]] as const) cost.observe(t, ms);
    expect(cost.ms(4)).toBe(20);
    expect(cost.ms(7)).toBeCloseTo(20.25, 12);
    expect(cost.ms(12)).toBe(20.5);
    expect(new SpecCost().ms(3)).toBeNaN();
    const costs = { plainMs: 5, verifyMs: (t: number) => cost.ms(t) };
    // Every proposal accepted: 7 tokens for 20.5 ms beat 1 for 5.
    const high = new SpecState(cfg);
    for (let i = 0; i < 30; i++) high.record(6, 6);
    expect(high.budget(10, 1, costs)).toBe(6);
    // At p = 0.7 no k pays: plain decoding for a stretch of 16 tokens; then one verification (at the best
    // k) measures again; then 32 plain tokens if plain decoding still wins.
    const low = new SpecState(cfg);
    for (let i = 0; i < 60; i++) low.record(4, i % 10 < 7 ? 4 : 0);
    const p = low.rate;
    expect(expectedTokens(6, p) / 20.5).toBeLessThan(1 / 5);
    expect(low.budget(100, 1, costs)).toBe(0);
    expect(low.budget(115, 1, costs)).toBe(0);
    expect(low.offUntil).toBe(116);
    expect(low.budget(116, 1, costs)).toBe(6);
    // Owed until a verification is recorded (the step may not take the choice at once).
    expect(low.budget(116, 1, costs)).toBe(6);
    low.record(6, 1);
    expect(low.budget(118, 1, costs)).toBe(0);
    expect(low.offUntil).toBe(118 + 32);
    // Cheap verifications (a step of k + 1 tokens costing a plain step's 1.1x): k = 6 again.
    const cheap = { plainMs: 5, verifyMs: (t: number) => 5 * (1 + 0.02 * t) };
    expect(new SpecState(cfg).budget(10, 1, cheap)).toBe(6);
    // A new choice verifies once before plain decoding can win (its acceptance is measured).
    const fresh = new SpecState(cfg);
    expect(fresh.budget(0, 1, costs)).toBe(6);
    fresh.record(6, 0);
    expect(fresh.budget(1, 1, costs)).toBe(0);
    // A cost not measured yet counts as a plain step's (so each k is tried).
    expect(new SpecState(cfg).budget(10, 1, { plainMs: 5, verifyMs: () => NaN })).toBe(6);
  });

  it('decodes plainly for a short stretch to measure plain decoding when its cost is unknown', () => {
    const s = new SpecState(cfg);
    const unknown = { plainMs: NaN, verifyMs: () => 20 };
    for (let i = 0; i < 4; i++) { expect(s.budget(10 + i, 1, unknown)).toBe(6); s.record(6, 6); }
    expect(s.budget(14, 1, unknown)).toBe(0);
    expect(s.budget(19, 1, unknown)).toBe(0);
    expect(s.budget(20, 1, unknown)).toBe(6);
  });
});

describe('KVCacheManager.rollback', () => {
  it('takes back positions whose ids are not known, returning the blocks past the new end', () => {
    const kv = new KVCacheManager({ numBlocks: 8, blockSize: 4, prefixCaching: true });
    kv.addSequence('a', { tokens: [1, 2, 3] });
    kv.schedule([{ id: 'a', numTokens: 3 }]);
    kv.appendTokens('a', [4]);
    // Last token plus 6 proposals: positions 3..9, three blocks.
    kv.schedule([{ id: 'a', numTokens: 7 }]);
    expect(kv.blocksOf('a').length).toBe(3);
    const free = kv.freeBlocks;
    kv.rollback('a', 5);
    expect(kv.seqLen('a')).toBe(5);
    expect(kv.blocksOf('a').length).toBe(2);
    expect(kv.freeBlocks).toBe(free + 1);
    kv.checkInvariants();
    // Known ids (and registered blocks) are never taken back: the accepted proposal and the sample after it.
    kv.appendTokens('a', [9, 7]);
    expect(() => kv.rollback('a', 1)).toThrow(/rollback: n/);
    expect(() => kv.rollback('a', -1)).toThrow(/rollback: n/);
    kv.freeSequence('a');
    kv.checkInvariants();
  });
});

describe('the request engine speculating', () => {
  const cycle = (start: number, n: number) => { const o: number[] = []; let t = start; for (let i = 0; i < n; i++) o.push(t = NEXT(t)); return o; };

  it('gives plain decoding\'s tokens in fewer steps once n-gram lookup finds the cycle; the counters add up; no block leaked', async () => {
    const m = new HostRunner();
    const e = new RequestEngine(m);
    e.speculation = parseSpeculation('t', { method: 'ngram', k: 4 });
    // The prompt already holds a cycle: lookup is right from the first decode.
    const prompt = [1, ...cycle(1, 7)];
    const res = await e.submit({ prompt: Int32Array.from(prompt), maxTokens: 30 }).result;
    expect(res.tokens[0]).toEqual(cycle(prompt[prompt.length - 1], 30));
    const c = e.counters;
    expect(c.specRows).toBeGreaterThan(0);
    expect(c.specAccepted).toBe(c.specProposed);
    expect(c.generated).toBe(30);
    expect(c.steps).toBeLessThan(15);
    expect(m.steps.flat().filter((r) => r.sampleAll).every((r) => r.ids.length <= 5)).toBe(true);
    m.kv.checkInvariants();
    expect(m.kv.usedBlocks).toBe(0);
    // Off for this request: one token a step.
    const s0 = e.counters.steps;
    const off = await e.submit({ prompt: Int32Array.from(prompt), maxTokens: 10, speculative: false }).result;
    expect(off.tokens[0]).toEqual(cycle(prompt[prompt.length - 1], 10));
    expect(e.counters.steps - s0).toBe(10);
  });

  it('keeps its runner\'s attention on f32 queries while it speculates (StepRunner.exactAttention), and lets it go after', () => {
    const m = new HostRunner();
    const e = new RequestEngine(m);
    expect(m.exactAttention).toBe(false);
    e.speculation = parseSpeculation('t', { method: 'ngram', k: 3 });
    expect(m.exactAttention).toBe(true);
    e.speculation = null;
    expect(m.exactAttention).toBe(false);
  });

  it('with more choices decoding than maxBatch, proposes nothing', async () => {
    const m = new HostRunner();
    const e = new RequestEngine(m);
    e.speculation = parseSpeculation('t', { method: 'ngram', k: 4, maxBatch: 2 });
    const prompts = [3, 7, 11].map((s) => [s, ...cycle(s, 6)]);
    const res = await Promise.all(prompts.map((p) => e.submit({ prompt: Int32Array.from(p), maxTokens: 12 }).result));
    res.forEach((r, i) => expect(r.tokens[0]).toEqual(cycle(prompts[i][prompts[i].length - 1], 12)));
    // Three decode together until they finish: no verification row ever ran beside another decode.
    for (const rows of m.steps) if (rows.filter((r) => r.ids.length === 1 || r.sampleAll).length > 2) expect(rows.some((r) => r.sampleAll)).toBe(false);
    m.kv.checkInvariants();
    expect(m.kv.usedBlocks).toBe(0);
  });

  it('with a draft model (its own engine and cache): plain decoding\'s tokens; an agreeing draft has all accepted in fewer steps, a disagreeing one none; nothing leaked in either', async () => {
    const prompts = [[1, 2], [5, 6, 7], [12]];
    const want = prompts.map((p) => cycle(p[p.length - 1], 20));
    for (const agree of [true, false]) {
      const dm = new HostRunner(agree ? NEXT : (t) => (t + 7) % V);
      const draft = { vocabSize: V, engine: new RequestEngine(dm) };
      const m = new HostRunner();
      const e = new RequestEngine(m);
      e.speculation = parseSpeculation('t', { method: 'draft', draft, k: 3 });
      const res = await Promise.all(prompts.map((p) => e.submit({ prompt: Int32Array.from(p), maxTokens: 20 }).result));
      res.forEach((r, i) => expect(r.tokens[0], `agree ${agree}, prompt ${i}`).toEqual(want[i]));
      const c = e.counters;
      expect(c.specRows).toBeGreaterThan(0);
      expect(c.generated).toBe(60);
      if (agree) {
        expect(c.specAccepted).toBe(c.specProposed);
        expect(c.steps).toBeLessThan(20);
      } else {
        expect(c.specAccepted).toBe(0);
      }
      // The draft was asked for at most k tokens a round, greedy, never speculating itself.
      expect(draft.engine.counters.generated).toBeGreaterThan(0);
      expect(draft.engine.counters.specRows).toBe(0);
      for (const r of [m, dm]) {
        r.kv.checkInvariants();
        expect(r.kv.usedBlocks).toBe(0);
      }
    }
  });

  it('with a draft model, under random arrivals, cancellations and a cache that forces preemption: each finished request gets plain decoding\'s tokens, each cancelled one its reason, and neither cache keeps a block', async () => {
    const rnd = rng(451);
    // The draft agrees below token 16 and proposes wrong tokens above: some proposals kept, some not.
    const dm = new HostRunner((t) => (t < 16 ? NEXT(t) : (t + 3) % V));
    const draft = { vocabSize: V, engine: new RequestEngine(dm) };
    const m = new HostRunner();
    // A cache of 8 blocks of 4 for 8 requests of up to 20 tokens each, arriving together: preemption happens.
    (m as { kv: KVCacheManager }).kv = new KVCacheManager({ numBlocks: 8, blockSize: 4, prefixCaching: true });
    const e = new RequestEngine(m);
    e.speculation = parseSpeculation('t', { method: 'draft', draft, k: 3 });
    // Submitted together (the runner is synchronous: requests apart would run one after another); a
    // third cancelled after a few of their tokens, some while a verification or a draft is in flight.
    const runs = Array.from({ length: 8 }, async (_, i) => {
      const start = Math.floor(rnd() * V);
      const prompt = [start, NEXT(start)];
      const max = 6 + Math.floor(rnd() * 10);
      const ac = new AbortController();
      const cancelAt = rnd() < 0.35 ? 1 + Math.floor(rnd() * 4) : -1;
      let seen = 0;
      const h = e.submit({
        prompt: Int32Array.from(prompt), maxTokens: max, signal: ac.signal,
        onTokens: (_c, t) => { seen += t.length; if (cancelAt > 0 && seen >= cancelAt) ac.abort(new Error(`cancelled ${i}`)); },
      });
      try {
        const r = await h.result;
        expect(r.tokens[0], `request ${i}`).toEqual(cycle(prompt[1], max));
        return 'done';
      } catch (err) {
        expect(cancelAt > 0, `request ${i} failed uncancelled: ${(err as Error).message}`).toBe(true);
        expect((err as Error).message).toBe(`cancelled ${i}`);
        return 'cancelled';
      }
    });
    const outcomes = await Promise.all(runs);
    expect(outcomes.filter((o) => o === 'done').length, outcomes.join(' ')).toBeGreaterThan(0);
    expect(outcomes.filter((o) => o === 'cancelled').length, outcomes.join(' ')).toBeGreaterThan(0);
    expect(e.counters.specProposed).toBeGreaterThan(0);
    expect(e.counters.preemptions, JSON.stringify({ ...e.counters, outcomes })).toBeGreaterThan(0);
    // The draft's requests end within a round of their target's: let the last ones finish.
    await new Promise((r) => setTimeout(r, 20));
    for (const r of [m, dm]) {
      r.kv.checkInvariants();
      expect(r.kv.usedBlocks).toBe(0);
    }
  });

  it('with a draft that fails, decodes on without proposals', async () => {
    const draft = { vocabSize: V, engine: { submit: () => ({ result: Promise.reject(new Error('the draft was destroyed')) }) } };
    const m = new HostRunner();
    const e = new RequestEngine(m);
    e.speculation = parseSpeculation('t', { method: 'draft', draft });
    const res = await e.submit({ prompt: Int32Array.from([3, 4]), maxTokens: 12 }).result;
    expect(res.tokens[0]).toEqual(cycle(4, 12));
    expect(e.counters.specProposed).toBe(0);
    expect(m.kv.usedBlocks).toBe(0);
  });

  it('is refused for a runner whose steps do not verify', () => {
    const m = new HostRunner();
    (m as { verifies: boolean }).verifies = false;
    const e = new RequestEngine(m);
    expect(() => { e.speculation = parseSpeculation('t', { method: 'ngram' }); }).toThrow(/speculation/);
  });
});
