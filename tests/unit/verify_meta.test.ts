import { describe, expect, it } from 'vitest';
import { KVCacheManager } from '../../src/serve/kv_manager';
import { sequenceOfRow, verificationAsDecode, type StepRow } from '../../src/models/step';

// A verifying step's attention metadata (tuning.verifyRowsAsDecode): each verification row's positions
// become one-token sequences. Whatever the placement, every query token must keep its blocks and the keys
// causal attention gave it (a token j of a sequence of q new tokens and length L sees L − q + j + 1 keys).

type Meta = { queryStartLoc: Int32Array; seqLens: Int32Array; blockTable: Int32Array; maxBlocksPerSeq: number };

/** Per query token: its block table row and the number of keys it sees under causal attention. */
function visible(m: Meta, T: number): { blocks: number[]; keys: number }[] {
  const out: { blocks: number[]; keys: number }[] = new Array(T);
  const B = m.maxBlocksPerSeq;
  for (let k = 0; k + 1 < m.queryStartLoc.length; k++) {
    const a = m.queryStartLoc[k], q = m.queryStartLoc[k + 1] - a, L = m.seqLens[k];
    const keys = (j: number) => L - q + j + 1;
    const blocks = Array.from(m.blockTable.subarray(k * B, k * B + Math.ceil(L / 4)));
    for (let j = 0; j < q; j++) out[a + j] = { blocks: blocks.slice(0, Math.ceil(keys(j) / 4)), keys: keys(j) };
  }
  return out;
}

function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
}

describe('verificationAsDecode', () => {
  it('splits each verification row into one-token sequences over its blocks and keeps every token\'s keys (seeded placements)', () => {
    const r = rng(45);
    for (let trial = 0; trial < 50; trial++) {
      const kv = new KVCacheManager({ numBlocks: 64, blockSize: 4 });
      const n = 1 + Math.floor(r() * 5);
      const rows: StepRow[] = [];
      const batch: { id: string; numTokens: number }[] = [];
      for (let i = 0; i < n; i++) {
        const id = `s${i}`;
        kv.addSequence(id);
        const ctx = Math.floor(r() * 13);
        if (ctx) kv.schedule([{ id, numTokens: ctx }]);
        const kind = r();
        // A verification (k + 1 of 1..6 rows), a plain decode row, or a prefill chunk.
        const t = kind < 0.5 ? 1 + Math.floor(r() * 6) : kind < 0.75 ? 1 : 2 + Math.floor(r() * 5);
        rows.push({ id, ids: new Array(t).fill(1), sample: kind < 0.75 || r() < 0.5, ...(kind < 0.5 ? { sampleAll: true } : {}) });
        batch.push({ id, numTokens: t });
      }
      const m = kv.schedule(batch);
      const seq = sequenceOfRow(m);
      rows.forEach((_, i) => expect(m.queryStartLoc[seq[i]]).toBe(m.rows[i][0]));
      const split = verificationAsDecode(rows, m);
      expect(visible(split, m.numTokens)).toEqual(visible(m, m.numTokens));
      // Verification rows are one-token sequences; every other row keeps its sequence whole.
      const starts = new Set(split.queryStartLoc);
      rows.forEach((row, i) => {
        const [a, b] = m.rows[i];
        for (let t = a + 1; t < b; t++) expect(starts.has(t), `row ${i} token ${t}`).toBe(!!row.sampleAll);
      });
      const verifyTokens = rows.reduce((s, row, i) => s + (row.sampleAll ? m.rows[i][1] - m.rows[i][0] - 1 : 0), 0);
      expect(split.seqLens.length).toBe(m.seqLens.length + verifyTokens);
    }
  });

  it('finds rows placed out of order (one-token rows first)', () => {
    const kv = new KVCacheManager({ numBlocks: 8, blockSize: 4 });
    for (const id of ['a', 'b']) kv.addSequence(id);
    kv.schedule([{ id: 'a', numTokens: 5 }, { id: 'b', numTokens: 2 }]);
    const m = kv.schedule([{ id: 'a', numTokens: 3 }, { id: 'b', numTokens: 1 }]);
    expect(Array.from(sequenceOfRow(m))).toEqual([1, 0]);
    const rows: StepRow[] = [{ id: 'a', ids: [1, 2, 3], sample: true, sampleAll: true }, { id: 'b', ids: [4], sample: true }];
    const s = verificationAsDecode(rows, m);
    expect(Array.from(s.queryStartLoc)).toEqual([0, 1, 2, 3, 4]);
    expect(Array.from(s.seqLens)).toEqual([3, 6, 7, 8]);
    const B = m.maxBlocksPerSeq;
    const a = Array.from(m.blockTable.subarray(B, 2 * B));
    expect(Array.from(s.blockTable)).toEqual([...Array.from(m.blockTable.subarray(0, B)), ...a, ...a, ...a]);
  });
});
