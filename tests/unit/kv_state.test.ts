// KVCacheManager's per-sequence state slots (LFM2's conv states): a slot taken when a sequence is added,
// given back when it is freed, a slot of its own for a fork with the copy asked for, each step's rows
// naming theirs in placement order; none left to take refused by name; the prefix cache off unless the
// model keeps block-end snapshots, and then a hit restores the last cached block's snapshot.
import { describe, expect, it } from 'vitest';
import { KVCacheManager } from '../../src/serve/kv_manager';

describe('KVCacheManager state slots', () => {
  it('takes, names, copies for forks and frees the slots; the prefix cache stays off', () => {
    const kv = new KVCacheManager({ numBlocks: 16, blockSize: 4, prefixCaching: true, stateSlots: 3 });
    expect(kv.prefixCaching).toBe(false);
    expect(kv.stateSlots).toBe(3);
    expect(kv.addSequence('a', { tokens: [1, 2, 3, 4, 5, 6, 7, 8, 9] })).toBe(0);
    kv.addSequence('b');
    expect(kv.freeStateSlots).toBe(1);
    // Decode rows first: b's 1 token before a's prompt.
    const m = kv.schedule([{ id: 'a', numTokens: 9 }, { id: 'b', numTokens: 1 }]);
    expect(m.order).toEqual(['b', 'a']);
    const [sb, sa] = [...m.stateSlots!];
    expect(sa).not.toBe(sb);
    const copy = kv.fork('a', 'c');
    expect(copy).not.toBeNull();
    expect(kv.canAddSequence()).toBe(false);
    const m2 = kv.schedule([{ id: 'c', numTokens: 1 }]);
    const sc = m2.stateSlots![0];
    expect([sa, sb]).not.toContain(sc);
    expect(kv.takeStateCopies()).toEqual([[sa, sc]]);
    expect(kv.takeStateCopies()).toEqual([]);
    expect(() => kv.addSequence('d')).toThrow(/addSequence: out of sequence state slots: all 3/);
    expect(() => kv.fork('a', 'd')).toThrow(/fork: out of sequence state slots/);
    kv.checkInvariants();
    kv.freeSequence('a');
    expect(kv.canAddSequence()).toBe(true);
    kv.addSequence('d');
    expect(kv.schedule([{ id: 'd', numTokens: 2 }]).stateSlots![0]).toBe(sa);
    for (const id of ['b', 'c', 'd']) kv.freeSequence(id);
    expect(kv.freeStateSlots).toBe(3);
    kv.checkInvariants();
  });

  it('drops a fork copy whose sequence is freed before the copy is taken, and keeps no slots by default', () => {
    const kv = new KVCacheManager({ numBlocks: 8, blockSize: 4, stateSlots: 2 });
    kv.addSequence('a');
    kv.schedule([{ id: 'a', numTokens: 3 }]);
    kv.fork('a', 'b');
    kv.freeSequence('b');
    expect(kv.takeStateCopies()).toEqual([]);
    const plain = new KVCacheManager({ numBlocks: 8, blockSize: 4, prefixCaching: true });
    expect(plain.prefixCaching).toBe(true);
    plain.addSequence('x');
    expect(plain.schedule([{ id: 'x', numTokens: 2 }]).stateSlots).toBeUndefined();
    expect(plain.canAddSequence()).toBe(true);
    expect(() => new KVCacheManager({ numBlocks: 8, blockSize: 4, stateSlots: -1 })).toThrow(/stateSlots/);
  });

  it('with block-end snapshots, keeps the prefix cache and restores a hit from its last cached block', () => {
    const kv = new KVCacheManager({ numBlocks: 16, blockSize: 4, prefixCaching: true, stateSlots: 4, stateSnapshots: true });
    expect(kv.prefixCaching).toBe(true);
    const prompt = [5, 6, 7, 8, 9, 10, 11, 12, 13, 14];
    kv.addSequence('a', { tokens: prompt });
    expect(kv.takeStateRestores()).toEqual([]);
    kv.schedule([{ id: 'a', numTokens: 10 }]);
    const blocks = [...kv.blocksOf('a')];
    // Two full blocks cached (the last token is always computed): b starts at 8 from block 1's snapshot.
    expect(kv.addSequence('b', { tokens: prompt })).toBe(8);
    const m = kv.schedule([{ id: 'b', numTokens: 2 }]);
    expect(kv.takeStateRestores()).toEqual([[blocks[1], m.stateSlots![0]]]);
    // A hit freed before its restore is taken asks for none.
    kv.addSequence('c', { tokens: prompt });
    kv.freeSequence('c');
    expect(kv.takeStateRestores()).toEqual([]);
    for (const id of ['a', 'b']) kv.freeSequence(id);
    kv.checkInvariants();
    expect(kv.freeStateSlots).toBe(4);
  });
});
