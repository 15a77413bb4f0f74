// KVCacheManager.fork (issue 43): a request's other choices start as copies of its first choice once the
// prompt is placed — the full blocks shared and reference-counted, the partial last block a block of
// their own (the caller copies its contents) — and everything goes back when all are freed.
import { describe, expect, it } from 'vitest';
import { KVCacheManager } from '../../src/serve/kv_manager';

describe('KVCacheManager.fork', () => {
  it('shares the full blocks, gives the partial one a copy, and frees them all', () => {
    const kv = new KVCacheManager({ numBlocks: 16, blockSize: 4, prefixCaching: true });
    const prompt = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10];
    kv.addSequence('a', { tokens: prompt });
    kv.schedule([{ id: 'a', numTokens: 10 }]);
    const a = [...kv.blocksOf('a')];
    const copy = kv.fork('a', 'b');
    expect(copy).toEqual([a[2], expect.any(Number)]);
    const b = kv.blocksOf('b');
    expect(b.slice(0, 2)).toEqual(a.slice(0, 2));
    expect(b[2]).toBe(copy![1]);
    expect(a).not.toContain(copy![1]);
    expect(kv.seqLen('b')).toBe(10);
    expect(kv.usedBlocks).toBe(4);
    kv.checkInvariants();
    // Each grows on its own: b's next token goes to its copy, a's to its own block.
    const m = kv.schedule([{ id: 'a', numTokens: 1 }, { id: 'b', numTokens: 1 }]);
    expect(Math.floor(m.slotMapping[0] / 4)).toBe(a[2]);
    expect(Math.floor(m.slotMapping[1] / 4)).toBe(copy![1]);
    kv.appendTokens('a', [11]);
    kv.appendTokens('b', [12]);
    kv.checkInvariants();
    kv.freeSequence('a');
    kv.checkInvariants();
    expect(kv.usedBlocks).toBe(3);
    kv.freeSequence('b');
    kv.checkInvariants();
    expect(kv.usedBlocks).toBe(0);
    // The prompt's full blocks stayed cached: a new request finds them.
    expect(kv.cachedPrefix(prompt)).toBe(8);
  });

  it('a whole number of blocks: nothing to copy; refuses an existing id and a full cache', () => {
    const kv = new KVCacheManager({ numBlocks: 3, blockSize: 4 });
    kv.addSequence('a');
    kv.schedule([{ id: 'a', numTokens: 8 }]);
    expect(kv.fork('a', 'b')).toBeNull();
    expect(kv.blocksOf('b')).toEqual(kv.blocksOf('a'));
    expect(() => kv.fork('a', 'b')).toThrow(/exists/);
    kv.schedule([{ id: 'a', numTokens: 1 }]);     // a takes the last free block
    expect(() => kv.fork('a', 'c')).toThrow(/out of KV cache blocks/);
    expect(kv.has('c')).toBe(false);
    kv.checkInvariants();
  });
});
