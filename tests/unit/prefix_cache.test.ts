// The block manager's prefix cache, fuzzed on the host: a simulated cache memory records which token id
// each slot holds, so sharing a block wrongly, reusing one still in use or freeing one twice shows up as
// a sequence whose blocks no longer read back its own tokens.
import { describe, expect, it } from 'vitest';
import { KVCacheManager } from '../../src/serve/kv_manager';
import { rng } from '../../src/core/random';

describe('KVCacheManager prefix caching', () => {
  it('shares the full blocks of a cached prefix, never the last prompt token, and evicts least recently freed', () => {
    const m = new KVCacheManager({ numBlocks: 6, blockSize: 4, prefixCaching: true });
    const p = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10];
    expect(m.addSequence('a', { tokens: p })).toBe(0);
    m.schedule([{ id: 'a', numTokens: 10 }]);
    expect(m.cachedBlocks).toBe(2);
    // Same prompt: both full blocks; a prompt of exactly 8 tokens gets one (its last token is computed).
    expect(m.addSequence('b', { tokens: p })).toBe(8);
    expect(m.blocksOf('b')).toEqual(m.blocksOf('a').slice(0, 2));
    expect(m.addSequence('c', { tokens: p.slice(0, 8) })).toBe(4);
    expect(m.addSequence('d', { tokens: [1, 2, 3, 4, 0, 6, 7, 8, 9] })).toBe(4);
    expect(m.addSequence('e', { tokens: p, salt: 'lora-1' })).toBe(0);
    m.checkInvariants();
    for (const id of ['a', 'b', 'c', 'd', 'e']) m.freeSequence(id);
    m.checkInvariants();
    expect(m.freeBlocks).toBe(6);
    expect(m.cachedBlocks).toBe(2);
    // Generated tokens are cached once the caller reports them.
    m.addSequence('f', { tokens: [9, 9, 9] });
    m.schedule([{ id: 'f', numTokens: 3 }]);
    m.schedule([{ id: 'f', numTokens: 1 }]);
    expect(m.cachedBlocks).toBe(2);
    m.appendTokens('f', [9]);
    expect(m.cachedBlocks).toBe(3);
    m.freeSequence('f');
    // Six blocks, three cached and free: a 24-token sequence takes the never-used ones first, then evicts.
    m.addSequence('g');
    m.schedule([{ id: 'g', numTokens: 12 }]);
    expect(m.stats.evictions).toBe(0);
    m.schedule([{ id: 'g', numTokens: 8 }]);
    expect(m.stats.evictions).toBe(2);
    expect(m.cachedPrefix([9, 9, 9, 9, 1])).toBe(4);
    m.checkInvariants();
  });

  it('fuzz: random prompts over shared prefixes, growth, frees and eviction keep every sequence reading its own tokens', () => {
    let allHits = 0, allEvictions = 0;
    for (let trial = 0; trial < 20; trial++) {
      const r = rng(1000 + trial);
      const bs = 1 + Math.floor(r() * 4);
      const nb = 4 + Math.floor(r() * 20);
      const m = new KVCacheManager({ numBlocks: nb, blockSize: bs, prefixCaching: true });
      const memory = new Int32Array(nb * bs).fill(-1);
      const stems = Array.from({ length: 3 }, () => Array.from({ length: 12 }, () => Math.floor(r() * 5)));
      const live = new Map<string, number[]>();
      let next = 0, hits = 0;
      for (let op = 0; op < 400; op++) {
        const ids = [...live.keys()];
        const x = r();
        if (x < 0.3 || !ids.length) {
          const stem = stems[Math.floor(r() * stems.length)];
          const tokens = [...stem.slice(0, 1 + Math.floor(r() * stem.length)), ...Array.from({ length: Math.floor(r() * 4) }, () => Math.floor(r() * 5))];
          const id = `s${next++}`;
          const cached = m.cachedPrefix(tokens);
          const got = m.addSequence(id, { tokens });
          expect(got).toBe(cached);
          expect(got % bs).toBe(0);
          expect(got).toBeLessThan(tokens.length);
          hits += got;
          // The cached blocks must already hold this prompt's ids.
          m.blocksOf(id).forEach((b, i) => { for (let j = 0; j < bs; j++) expect(memory[b * bs + j]).toBe(tokens[i * bs + j]); });
          const rest = tokens.length - got;
          if (m.blocksToGrow(id, rest) > m.freeBlocks) { m.freeSequence(id); continue; }
          const md = m.schedule([{ id, numTokens: rest }]);
          tokens.slice(got).forEach((t, j) => { memory[md.slotMapping[j]] = t; });
          live.set(id, tokens);
        } else if (x < 0.75) {
          // Decode steps for a few sequences, their new ids known at once or later.
          const batch = ids.filter(() => r() < 0.5).filter((id) => m.blocksToGrow(id, 1) === 0 || r() < 0.7);
          let need = 0;
          const fit = batch.filter((id) => { need += m.blocksToGrow(id, 1); return need <= m.freeBlocks; });
          if (!fit.length) continue;
          const md = m.schedule(fit.map((id) => ({ id, numTokens: 1 })));
          md.order.forEach((id, k) => {
            const t = Math.floor(r() * 5);
            memory[md.slotMapping[k]] = t;
            live.get(id as string)!.push(t);
            m.appendTokens(id, [t]);
          });
        } else {
          const id = ids[Math.floor(r() * ids.length)];
          m.freeSequence(id);
          live.delete(id);
        }
        m.checkInvariants();
        for (const [id, tokens] of live) {
          const blocks = m.blocksOf(id);
          expect(m.seqLen(id)).toBe(tokens.length);
          tokens.forEach((t, p) => expect(memory[blocks[Math.floor(p / bs)] * bs + (p % bs)]).toBe(t));
        }
      }
      expect(m.stats.hits).toBe(hits);
      allHits += hits;
      allEvictions += m.stats.evictions;
      for (const id of live.keys()) m.freeSequence(id);
      m.checkInvariants();
      expect(m.freeBlocks).toBe(nb);
    }
    // The fuzz reached what it is for.
    expect(allHits).toBeGreaterThan(100);
    expect(allEvictions).toBeGreaterThan(10);
  });
});
