// The request engine's hooks for encoder-decoder runners (serve/engine.ts): per-sequence state made as a
// sequence is placed and freed with its blocks (Whisper's cross-attention caches), waiting when the
// runner has no room; suppressed tokens at every sample and at a choice's first; the random stream a
// request names. Over a runner on the host whose "logits" depend only on a sequence's encoder input and
// its length, so a request's tokens must not depend on what else runs.
import { describe, expect, it } from 'vitest';
import { RequestEngine, type StepRunner } from '../../src/serve/engine';
import { KVCacheManager } from '../../src/serve/kv_manager';
import { ROW_PARAM_WORDS } from '../../src/ops/sample';
import type { StepProcessing, StepRecord, StepRow } from '../../src/models/step';

const V = 16;

class HostRunner implements StepRunner {
  readonly kv: KVCacheManager;
  readonly maxTokensPerStep = 64;
  readonly maxSeqsPerStep = 4;
  readonly vocabSize = V;
  readonly capacity = 64;
  readonly suppress = { always: [3], first: [5] };
  stepNo = 0;
  /** Sequences whose state is live, with their encoder input. */
  readonly live = new Map<string, number>();
  readonly admitted: string[] = [];
  readonly freed: string[] = [];
  /** Per step: each sampled row's sequence and the processing the engine sent. */
  readonly steps: { ids: string[]; proc: StepProcessing | null }[] = [];
  private prev: number[] = [];

  constructor(private readonly room: number, numBlocks = 64) {
    // Prefix caching off: equal prompts over different encoder inputs are different sequences.
    this.kv = new KVCacheManager({ numBlocks, blockSize: 4, prefixCaching: false });
  }

  stepsInFlight(): number { return 2; }
  assertAlive(): void {}

  admitSequence(id: string, input: unknown): boolean {
    expect(this.live.has(id)).toBe(false);
    if (this.live.size >= this.room) return false;
    this.live.set(id, input as number);
    this.admitted.push(id);
    return true;
  }

  freeSequence(id: string): void {
    expect(this.live.delete(id)).toBe(true);
    this.freed.push(id);
  }

  recordStep(rows: StepRow[], proc: StepProcessing | null): StepRecord {
    const step = this.stepNo++;
    this.kv.schedule(rows.map((r) => ({ id: r.id, numTokens: r.ids.length })));
    const sampledRow: number[] = [];
    const out: number[] = [];
    const sampledIds: string[] = [];
    let T = 0;
    rows.forEach((r) => {
      T += r.ids.length;
      // An id still "on the GPU" is a row of the previous step's samples.
      for (const t of r.ids) expect(t >= 0 || -(1 + t) < this.prev.length).toBe(true);
      expect(this.live.has(r.id)).toBe(true);
      if (!r.sample) { sampledRow.push(-1); return; }
      const R = out.length;
      const logits = Array.from({ length: V }, (_, t) => ((this.live.get(r.id)! * 5 + this.kv.seqLen(r.id) + 7 * t) % V));
      if (proc) {
        for (let e = 0; e < proc.nEdits; e++) {
          if (proc.edits[4 * e] !== R) continue;
          const f = new Float32Array(proc.edits.buffer, proc.edits.byteOffset + 16 * e, 4);
          logits[proc.edits[4 * e + 1]] = logits[proc.edits[4 * e + 1]] * f[2] + f[3];
        }
      }
      out.push(logits.indexOf(Math.max(...logits)));
      sampledRow.push(R);
      sampledIds.push(r.id);
    });
    this.prev = out;
    this.steps.push({ ids: sampledIds, proc });
    return { step, T, sampledRow, ids: Promise.resolve(Int32Array.from(out).buffer), logits: null };
  }
}

const prompt = Int32Array.from([1, 2, 6]);

async function alone(input: number, maxTokens: number): Promise<number[]> {
  const e = new RequestEngine(new HostRunner(1));
  const r = await e.submit({ prompt, maxTokens, encoderInput: input }).result;
  return r.tokens[0];
}

describe('RequestEngine hooks for encoder-decoder runners', () => {
  it('makes each sequence\'s state as it is placed with its encoder input, frees it with its blocks, and makes requests wait for room', async () => {
    const m = new HostRunner(2);
    const e = new RequestEngine(m);
    const inputs = [0, 1, 2, 3, 4];
    const got = await Promise.all(inputs.map((x) => e.submit({ prompt, maxTokens: 6, encoderInput: x }).result));
    for (const [i, x] of inputs.entries()) expect(got[i].tokens[0]).toEqual(await alone(x, 6));
    // Five sequences through room for two: each made once and freed once, none left.
    expect(m.admitted.length).toBe(5);
    expect([...m.freed].sort()).toEqual([...m.admitted].sort());
    expect(m.live.size).toBe(0);
    expect(m.kv.freeBlocks).toBe(m.kv.numBlocks);
    // A request that fails (its callback throws) frees its state too.
    const bad = e.submit({ prompt, maxTokens: 6, encoderInput: 9, onTokens: () => { throw new Error('callback'); } });
    await expect(bad.result).rejects.toThrow('callback');
    expect(m.live.size).toBe(0);
  });

  it('a preempted sequence gives its state back and gets it again, from its encoder input, when it is placed again', async () => {
    // 5 blocks of 4: two sequences of 3 + 10 tokens cannot both grow to the end.
    const m = new HostRunner(4, 5);
    const e = new RequestEngine(m);
    const got = await Promise.all([7, 8].map((x) => e.submit({ prompt, maxTokens: 10, encoderInput: x }).result));
    expect(e.counters.preemptions).toBeGreaterThan(0);
    expect(got[0].tokens[0]).toEqual(await alone(7, 10));
    expect(got[1].tokens[0]).toEqual(await alone(8, 10));
    expect(m.admitted.length).toBe(2 + e.counters.preemptions);
    expect(m.live.size).toBe(0);
  });

  it('suppresses the runner\'s tokens at every sample, its first-only tokens at a choice\'s first, and names the request\'s stream', async () => {
    const m = new HostRunner(8);
    const e = new RequestEngine(m);
    const runs = await Promise.all([0, 1, 2, 3, 4, 5, 6, 7].map((x) => e.submit({ prompt, maxTokens: 8, encoderInput: x }).result));
    const all = runs.map((r) => r.tokens[0]);
    expect(all.flat().includes(3)).toBe(false);
    expect(all.some((t) => t.slice(1).includes(5))).toBe(true);
    expect(all.some((t) => t[0] === 5)).toBe(false);
    // Without the edits, token 3 and a first 5 would have come out: the logits put them on top.
    const top = (x: number, len: number) => { const l = Array.from({ length: V }, (_, t) => (x * 5 + len + 7 * t) % V); return l.indexOf(Math.max(...l)); };
    expect([0, 1, 2, 3, 4, 5, 6, 7].some((x) => top(x, 3) === 5)).toBe(true);
    // Seeded choices draw from the request's stream + their index.
    const m2 = new HostRunner(8);
    const e2 = new RequestEngine(m2);
    const sampling = { temperature: 1, topP: 1, topK: 0, minP: 0, seed: 9, presencePenalty: 0, frequencyPenalty: 0, repetitionPenalty: 1 };
    await e2.submit({ prompt, maxTokens: 2, n: 2, sampling, stream: 4, encoderInput: 1 }).result;
    const streams = new Set<number>();
    for (const s of m2.steps) {
      const params = s.proc!.params!;
      for (let r = 0; r < s.ids.length; r++) streams.add(params[r * ROW_PARAM_WORDS + 6]);
    }
    expect([...streams].sort()).toEqual([4, 5]);
  });
});
