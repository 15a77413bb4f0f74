// The request engine's chunked-prefill policy and its counters (serve/engine.ts, issue 43): every running
// decode is placed before any prompt chunk; beside decodes, prompt chunks take at most the chunk budget
// (a fixed prefillBudget, or 'auto': the tokens that cost one decode-only step by StepCost); a step
// without decodes takes the whole step budget; a request's tokens do not depend on any of it. Over a
// runner on the host whose "logits" depend only on a sequence's prompt and length.
import { describe, expect, it } from 'vitest';
import { MIN_CHUNK, RequestEngine, StepCost, type StepRunner } from '../../src/serve/engine';
import { KVCacheManager } from '../../src/serve/kv_manager';
import { rng } from '../../src/core/random';
import type { StepProcessing, StepRecord, StepRow } from '../../src/models/step';

const V = 32;

class HostRunner implements StepRunner {
  readonly kv: KVCacheManager;
  readonly vocabSize = V;
  readonly capacity: number;
  stepNo = 0;
  readonly graphStats = { replayed: 0, recorded: 0 };
  /** Per step: each row's sequence, its token count, whether it samples. */
  readonly steps: { id: string; n: number; decode: boolean }[][] = [];
  /** Each sequence's token ids (prompt and generated), for its "logits". */
  private readonly seqs = new Map<string, number[]>();
  private prev: number[] = [];

  constructor(readonly maxTokensPerStep: number, readonly maxSeqsPerStep: number, numBlocks = 256, blockSize = 4) {
    this.kv = new KVCacheManager({ numBlocks, blockSize, prefixCaching: true });
    this.capacity = numBlocks * blockSize;
  }

  stepsInFlight(): number { return 3; }
  assertAlive(): void {}

  recordStep(rows: StepRow[], _proc: StepProcessing | null): StepRecord {
    const step = this.stepNo++;
    for (const r of rows) if (!this.kv.has(r.id)) throw new Error(`row of unknown sequence ${r.id}`);
    const starts = rows.map((r) => this.kv.seqLen(r.id));
    this.kv.schedule(rows.map((r) => ({ id: r.id, numTokens: r.ids.length })));
    const sampledRow: number[] = [];
    const out: number[] = [];
    let T = 0;
    this.steps.push(rows.map((r, i) => ({ id: r.id, n: r.ids.length, decode: r.ids.length === 1 && starts[i] > 0 && r.sample })));
    // Alternate steps "replay".
    if (step % 2) this.graphStats.replayed++; else this.graphStats.recorded++;
    rows.forEach((r, i) => {
      T += r.ids.length;
      let s = this.seqs.get(r.id);
      if (!s || starts[i] === 0) this.seqs.set(r.id, s = []);
      s.length = starts[i];
      for (const t of r.ids) s.push(t >= 0 ? t : this.prev[-(1 + t)]);
      if (!r.sample) { sampledRow.push(-1); return; }
      // A token that depends on the whole sequence: any mistake in placement changes it.
      let h = 7;
      for (const t of s) h = (Math.imul(h, 31) + t + 1) >>> 0;
      sampledRow.push(out.length);
      out.push(h % V);
    });
    this.prev = out;
    return { step, T, sampledRow, ids: Promise.resolve(Int32Array.from(out).buffer), logits: null };
  }
}

function prompt(r: () => number, n: number): Int32Array {
  return Int32Array.from({ length: n }, () => Math.floor(r() * V));
}

async function alone(p: Int32Array, maxTokens: number): Promise<number[]> {
  const m = new HostRunner(1024, 8);
  const e = new RequestEngine(m);
  return (await e.submit({ prompt: p, maxTokens }).result).tokens[0];
}

describe('chunked prefill under a token budget', () => {
  it('a fixed budget: decodes first, prompt chunks of at most the budget beside them, the whole step budget without them; tokens as alone', async () => {
    const r = rng(43);
    const m = new HostRunner(96, 16);
    const e = new RequestEngine(m);
    e.prefillBudget = 10;
    // The first starts alone (a step without decodes), the others join as it decodes.
    const short = Array.from({ length: 4 }, (_, i) => prompt(r, i ? 3 + Math.floor(r() * 5) : 30));
    const long = prompt(r, 70);
    const want = await Promise.all([...short.map((p) => alone(p, 30)), alone(long, 8)]);
    const hs = short.map((p) => e.submit({ prompt: p, maxTokens: 30 }));
    // The long prompt arrives once the short ones decode: as a fifth request gets its first token.
    let hl: ReturnType<RequestEngine['submit']> | null = null;
    const started = new Promise<void>((res) => {
      const h = e.submit({ prompt: short[0], maxTokens: 1, onTokens: () => { hl = e.submit({ prompt: long, maxTokens: 8 }); res(); } });
      void h.result;
    });
    await started;
    const got = await Promise.all([...hs.map((h) => h.result), hl!.result]);
    got.forEach((g, i) => expect(g.tokens[0], `request ${i} against alone`).toEqual(want[i]));
    // Every step: decode rows first; beside any decode, at most 10 prompt tokens; without decodes up to 96.
    let sawChunkBeside = false, sawBigAlone = false;
    for (const st of m.steps) {
      const d = st.filter((x) => x.decode).length;
      const firstPrompt = st.findIndex((x) => !x.decode);
      if (firstPrompt >= 0) expect(st.slice(firstPrompt).every((x) => !x.decode), 'decodes come first').toBe(true);
      const promptTokens = st.filter((x) => !x.decode).reduce((a, x) => a + x.n, 0);
      if (d) {
        expect(promptTokens).toBeLessThanOrEqual(10);
        if (promptTokens > 0 && st.some((x) => x.n === 10)) sawChunkBeside = true;
      } else {
        expect(promptTokens).toBeLessThanOrEqual(96);
        if (promptTokens > 10) sawBigAlone = true;
      }
    }
    expect(sawChunkBeside, 'the long prompt went in chunks of 10 beside decodes').toBe(true);
    expect(sawBigAlone, 'a step without decodes took more than the chunk budget').toBe(true);
    // The counters add up.
    const c = e.counters;
    expect(c.steps).toBe(m.steps.length);
    expect(c.decodeTokens + c.prefillTokens).toBe(c.tokens);
    expect(c.tokens).toBe(m.steps.flat().reduce((a, x) => a + x.n, 0));
    expect(c.mixedSteps).toBe(m.steps.filter((st) => st.some((x) => x.decode) && st.some((x) => !x.decode)).length);
    expect(c.replayed + c.recorded).toBe(c.steps);
    expect(c.replayed).toBe(m.graphStats.replayed);
    expect(c.chunkBudget).toBe(10);
    expect(c.hostMs).toBeCloseTo(c.scheduleMs + c.recordMs, 6);
    for (const k of ['scheduleMs', 'recordMs', 'waitMs', 'applyMs'] as const) expect(c[k]).toBeGreaterThanOrEqual(0);
    m.kv.checkInvariants();
    expect(m.kv.usedBlocks).toBe(0);
  });

  it("'auto': the budget is the prompt tokens that cost one decode-only step (at least MIN_CHUNK, at most the step's)", async () => {
    const r = rng(7);
    // (The last: the step's 200 tokens less its one decode.)
    for (const [decodeMs, tokenMs, want] of [[6, 0.05, 120], [1, 0.05, MIN_CHUNK], [6, 0.001, 199]] as const) {
      const m = new HostRunner(200, 16, 512);
      const e = new RequestEngine(m);
      // The estimate held fixed (alpha 0): the host runner's own steps take no measurable time.
      const cost = new StepCost(0);
      cost.setDecodeMs(1, decodeMs);
      cost.tokenMs = tokenMs;
      (e as unknown as { stepCost: StepCost }).stepCost = cost;
      const long = prompt(r, 400);
      const first = e.submit({ prompt: prompt(r, 5), maxTokens: 40 });
      let hl: ReturnType<RequestEngine['submit']> | null = null;
      await new Promise<void>((res) => {
        void e.submit({ prompt: prompt(r, 3), maxTokens: 1, onTokens: () => { hl = e.submit({ prompt: long, maxTokens: 2 }); res(); } }).result;
      });
      await Promise.all([first.result, hl!.result]);
      const beside = m.steps.filter((st) => st.some((x) => x.decode)).map((st) => st.filter((x) => !x.decode).reduce((a, x) => a + x.n, 0)).filter((n) => n > 0);
      expect(Math.max(...beside), `decode ${decodeMs} ms, ${tokenMs} ms a token`).toBe(want);
      expect(e.counters.chunkBudget).toBe(want);
    }
  });

  it('StepCost: decode-only steps set the base of their batch size, steps with chunks the cost per token; unknown until both are seen', () => {
    const c = new StepCost(0.5, 16);
    expect(c.tokensPerDecodeStep(1)).toBeNull();
    c.observe(100, 1, 20);                    // a chunk before any decode-only step: no base yet, ignored
    expect(c.tokensPerDecodeStep(1)).toBeNull();
    c.observe(0, 1, 4);
    c.observe(0, 1, 6);                       // EMA: 4 + 0.5 (6 - 4) = 5
    expect(c.decodeMs(1)).toBeCloseTo(5);
    expect(c.decodeMs(32)).toBeCloseTo(5);    // no batch of 32 seen: the nearest bucket's
    c.observe(8, 1, 50);                      // fewer than 16 tokens: too small to say
    expect(c.tokensPerDecodeStep(1)).toBeNull();
    c.observe(100, 1, 15);                    // (15 - 5) / 100 = 0.1 ms a token
    expect(c.tokenMs).toBeCloseTo(0.1);
    expect(c.tokensPerDecodeStep(1)).toBeCloseTo(50);
    c.observe(0, 1, NaN);
    c.observe(0, 1, -1);
    c.observe(0, 0, 9);                       // an empty step says nothing
    expect(c.decodeMs(1)).toBeCloseTo(5);
    c.observe(200, 1, 3);                     // faster than the base: costs nothing more
    expect(c.tokenMs).toBeCloseTo(0.05);
    // A batch of 32 (bucket 17..32) has its own base; 33 rows fall in the next bucket, the nearest seen is 32's.
    c.observe(0, 32, 12);
    expect(c.decodeMs(32)).toBeCloseTo(12);
    expect(c.decodeMs(17)).toBeCloseTo(12);
    expect(c.decodeMs(33)).toBeCloseTo(12);
    expect(c.decodeMs(2)).toBeCloseTo(5);
    expect(c.tokensPerDecodeStep(32)).toBeCloseTo(240);
    c.observe(120, 32, 18);                   // (18 - 12) / 120 = 0.05: unchanged
    expect(c.tokenMs).toBeCloseTo(0.05);
  });

  it('prefillBudget refuses what is not a positive integer or auto', () => {
    const e = new RequestEngine(new HostRunner(64, 4));
    for (const v of [0, -1, 1.5, NaN, 'x']) expect(() => { e.prefillBudget = v as number; }).toThrow(/prefillBudget/);
    e.prefillBudget = 12;
    expect(e.prefillBudget).toBe(12);
  });
});
