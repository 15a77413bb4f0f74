import { describe, expect, it } from 'vitest';
import { KVCacheManager } from '../../src/serve/kv_manager';

describe('KVCacheManager', () => {
  it('schedules decode first, maps slots through the blocks, and frees blocks back', () => {
    const m = new KVCacheManager({ numBlocks: 6, blockSize: 4 });
    m.addSequence('a');
    m.addSequence('b');
    const p = m.schedule([{ id: 'a', numTokens: 6 }, { id: 'b', numTokens: 3 }]);
    expect(p.order).toEqual(['a', 'b']);
    expect(Array.from(p.queryStartLoc)).toEqual([0, 6, 9]);
    expect(Array.from(p.seqLens)).toEqual([6, 3]);
    expect(p.maxBlocksPerSeq).toBe(2);
    const [a0, a1] = m.blocksOf('a');
    const [b0] = m.blocksOf('b');
    expect(Array.from(p.slotMapping)).toEqual([a0 * 4, a0 * 4 + 1, a0 * 4 + 2, a0 * 4 + 3, a1 * 4, a1 * 4 + 1, b0 * 4, b0 * 4 + 1, b0 * 4 + 2]);
    expect(Array.from(p.blockTable)).toEqual([a0, a1, b0, 0]);
    // A decode step for b and a prefill chunk for a: b goes first.
    const d = m.schedule([{ id: 'a', numTokens: 3 }, { id: 'b', numTokens: 1 }]);
    expect(d.order).toEqual(['b', 'a']);
    expect(d.rows).toEqual([[1, 4], [0, 1]]);
    expect(Array.from(d.seqLens)).toEqual([4, 9]);
    expect(d.slotMapping[0]).toBe(b0 * 4 + 3);
    expect(m.freeBlocks).toBe(6 - 4);
    m.freeSequence('a');
    expect(m.freeBlocks).toBe(5);
    expect(m.has('a')).toBe(false);
    expect(new Set([...m.blocksOf('b')]).size).toBe(1);
  });

  it('running out of blocks is a clear error that changes nothing', () => {
    const m = new KVCacheManager({ numBlocks: 3, blockSize: 2 });
    m.addSequence(1);
    m.addSequence(2);
    m.schedule([{ id: 1, numTokens: 3 }]);
    const before = { free: m.freeBlocks, len1: m.seqLen(1), len2: m.seqLen(2), blocks: [...m.blocksOf(1)] };
    expect(() => m.schedule([{ id: 1, numTokens: 1 }, { id: 2, numTokens: 3 }])).toThrow(
      'schedule: out of KV cache blocks: this step needs 2 new blocks and 1 of 3 are free');
    expect({ free: m.freeBlocks, len1: m.seqLen(1), len2: m.seqLen(2), blocks: [...m.blocksOf(1)] }).toEqual(before);
    m.schedule([{ id: 1, numTokens: 1 }, { id: 2, numTokens: 2 }]);
    expect(m.freeBlocks).toBe(0);
  });

  it('rejects bad requests with the argument, the expectation and what came', () => {
    const m = new KVCacheManager({ numBlocks: 3, blockSize: 2 });
    m.addSequence('x');
    expect(() => m.addSequence('x')).toThrow("addSequence: id: expected a new sequence id, got 'x', which exists");
    expect(() => m.schedule([{ id: 'y', numTokens: 1 }])).toThrow("schedule: id: expected a sequence added with addSequence, got 'y'");
    expect(() => m.schedule([{ id: 'x', numTokens: 0 }])).toThrow('schedule: batch[0].numTokens: expected a positive integer, got 0');
    expect(() => m.schedule([{ id: 'x', numTokens: 1 }, { id: 'x', numTokens: 1 }])).toThrow("schedule: batch[1].id: expected each sequence once per step, got 'x' again");
    expect(() => m.schedule([])).toThrow('schedule: batch: expected a non-empty array');
    expect(() => m.freeSequence('nope')).toThrow("freeSequence: id: expected a sequence added with addSequence, got 'nope'");
    expect(() => new KVCacheManager({ numBlocks: 0, blockSize: 2 })).toThrow('KVCacheManager: numBlocks: expected a positive integer, got 0');
  });

  it("dropCachedBlocks forgets the cached blocks no sequence holds (a warm-up's garbage), keeps those in use", () => {
    const m = new KVCacheManager({ numBlocks: 8, blockSize: 2, prefixCaching: true });
    const traced = [5, 6, 7, 8, 9];
    m.addSequence('trace', { tokens: traced });
    m.schedule([{ id: 'trace', numTokens: 5 }]);
    m.freeSequence('trace');
    const live = [1, 2, 3, 4];
    m.addSequence('live', { tokens: live });
    m.schedule([{ id: 'live', numTokens: 4 }]);
    expect(m.cachedPrefix(traced)).toBe(4);
    expect(m.cachedBlocks).toBe(4);
    expect(m.dropCachedBlocks()).toBe(2);
    // The trace's prompt finds nothing now; the live sequence's blocks stay registered and findable.
    expect(m.cachedPrefix(traced)).toBe(0);
    expect(m.cachedPrefix(live)).toBe(2);   // a prompt leaves its last token out of the cache
    expect(m.freeBlocks).toBe(8 - 2);
    m.checkInvariants();
    expect(m.addSequence('again', { tokens: traced })).toBe(0);
    m.checkInvariants();
  });
});
