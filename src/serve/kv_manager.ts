// The host side of a serving loop over a paged KV cache: a block allocator and a sequence table that
// turn each step's batch into the metadata paged attention needs (slot mapping, block table, sequence
// lengths, query start locations), decode sequences first as vLLM orders them. Pure host code: the
// metadata goes to the GPU with the attention call, in one write.
//
// Prefix caching (SPEC §9): a full block whose token ids are all known is registered under a chained key
// (its parent's key, its tokens, and the sequence's salt: anything else that decides its contents). A new
// sequence given its prompt takes the longest run of registered blocks matching its first full blocks —
// shared read-only and reference-counted, never copied — and computes only the rest. A block whose last
// user frees it stays registered and evictable: it is handed out again, least recently freed first, only
// when no never-used block is left. Only full blocks are shared, and a sequence always computes at least
// its last prompt token (its logits are needed), so nobody ever writes into a shared block.
//
// Per-sequence state (stateSlots > 0: LFM2's conv layers, a recurrence over all of a sequence's tokens
// that no block holds): a pool of slots beside the blocks, one taken when a sequence is added and given
// back when it is freed (finished, aborted or preempted); a fork takes a slot of its own and the
// parent's state is copied into it (takeStateCopies: the model copies them after the step that wrote
// the parent's). A preempted sequence is recomputed from position 0 in a fresh slot, its state rebuilt
// by the prefill. A block's K/V do not carry the state at the block's end, so the prefix cache needs the
// model to keep that state beside each full block (stateSnapshots: LFM2 writes it as it computes the
// block's last token); a sequence that finds cached blocks then starts from the snapshot of the last
// one, copied into its slot before its first step (takeStateRestores). Without snapshots the prefix
// cache is off for such a model.
import { WebinferError, check, checkPosInt, fmt } from '../core/errors.js';
import type { StepPlacement } from '../models/step.js';

export type SequenceId = number | string;

export interface StepRequest {
  /** A sequence added with addSequence. */
  id: SequenceId;
  /** New tokens this step: 1 for decode, more for (chunked) prefill. */
  numTokens: number;
}

/** A step's placement (models/step.ts) with the sequences behind it. */
export interface StepMetadata extends StepPlacement {
  /** Sequences in batch order: decode (1 token) first, then the others in request order. */
  order: SequenceId[];
  /** Rows of the flattened batch that belong to each request, in request order: [start, end). */
  rows: [number, number][];
}

interface Sequence {
  len: number;
  blocks: number[];
  /** Token ids known so far (the prompt, then generated ones as the caller appends them). */
  tokens: number[];
  /** Leading blocks registered in (or taken from) the prefix cache. */
  hashed: number;
  /** The chained key of each registered block. */
  keys: string[];
  salt: string;
  /** Its per-sequence state slot (-1: the manager keeps none). */
  state: number;
}

interface Block {
  /** Sequences using it. */
  ref: number;
  /** Its prefix-cache key while registered. */
  key: string | null;
}

/** What the prefix cache did since the manager was made. */
export interface PrefixCacheStats {
  /** Prompt tokens looked up (full blocks only). */
  queried: number;
  /** Every token of each prompt looked up, the last one (always computed) included: vLLM's
   *  prefix_cache_queries, which counts request.num_tokens per lookup, so hits / queries is its hit rate. */
  queries: number;
  /** Prompt tokens found. */
  hits: number;
  /** Registered blocks handed out again for new contents. */
  evictions: number;
}

/** FNV-1a over 32-bit words, two independent streams: a 64-bit key part. */
function mix(h: number, x: number): number {
  h ^= x & 0xffff;
  h = Math.imul(h, 16777619);
  h ^= x >>> 16;
  return Math.imul(h, 16777619);
}

export class KVCacheManager {
  readonly numBlocks: number;
  readonly blockSize: number;
  readonly prefixCaching: boolean;
  readonly stats: PrefixCacheStats = { queried: 0, queries: 0, hits: 0, evictions: 0 };
  /** Never-used or unregistered blocks. */
  private readonly free: number[];
  private readonly blocks: Block[];
  /** Registered blocks nobody uses, least recently freed first (a Map keeps insertion order). */
  private readonly evictable = new Map<number, true>();
  /** Registered blocks by key. */
  private readonly cached = new Map<string, number>();
  private readonly seqs = new Map<SequenceId, Sequence>();
  /** Per-sequence state slots (0: none), the free ones, and the copies forks asked for. */
  readonly stateSlots: number;
  private readonly freeStates: number[];
  private stateCopies: [number, number][] = [];
  /** [block, slot]: a prefix hit's state, the snapshot of its last cached block, to copy into its slot. */
  private stateRestores: [number, number][] = [];

  constructor(o: { numBlocks: number; blockSize: number; prefixCaching?: boolean; stateSlots?: number; stateSnapshots?: boolean }) {
    const op = 'KVCacheManager';
    check(o !== null && typeof o === 'object', op, 'o', 'an options object', o);
    this.numBlocks = checkPosInt(o.numBlocks, op, 'numBlocks');
    this.blockSize = checkPosInt(o.blockSize, op, 'blockSize');
    check(o.prefixCaching === undefined || typeof o.prefixCaching === 'boolean', op, 'prefixCaching', 'a boolean', o.prefixCaching);
    check(o.stateSlots === undefined || (Number.isInteger(o.stateSlots) && o.stateSlots >= 0), op, 'stateSlots', 'a non-negative integer', o.stateSlots);
    this.stateSlots = o.stateSlots ?? 0;
    this.freeStates = Array.from({ length: this.stateSlots }, (_, i) => this.stateSlots - 1 - i);
    check(o.stateSnapshots === undefined || typeof o.stateSnapshots === 'boolean', op, 'stateSnapshots', 'a boolean', o.stateSnapshots);
    // No prefix cache where sequences carry state the blocks do not hold and no snapshot keeps it (the header says why).
    this.prefixCaching = (o.prefixCaching ?? false) && (this.stateSlots === 0 || o.stateSnapshots === true);
    // Pop from the end: block 0 is handed out first.
    this.free = Array.from({ length: this.numBlocks }, (_, i) => this.numBlocks - 1 - i);
    this.blocks = Array.from({ length: this.numBlocks }, () => ({ ref: 0, key: null }));
  }

  /** Blocks a step can take: never-used ones and evictable cached ones. */
  get freeBlocks(): number {
    return this.free.length + this.evictable.size;
  }

  /** Blocks some sequence holds (neither never-used nor evictable). */
  get usedBlocks(): number {
    return this.numBlocks - this.freeBlocks;
  }

  /** The fraction of blocks held, 0 to 1: vLLM's kv_cache_usage_perc (a cached block nobody holds counts
   *  as free, as vLLM's block pool counts it: a step can take it). */
  get usage(): number {
    return this.usedBlocks / this.numBlocks;
  }

  /** Registered blocks (in use or evictable). */
  get cachedBlocks(): number {
    return this.cached.size;
  }

  /** Whether a sequence can be added (or forked) now: a state slot is free, or none is kept. */
  canAddSequence(): boolean {
    return this.stateSlots === 0 || this.freeStates.length > 0;
  }

  /** State slots free. */
  get freeStateSlots(): number {
    return this.freeStates.length;
  }

  /** The prefix hits' state restores since the last call, [block, slot] pairs: the caller copies each
   *  block's snapshot into the slot before the step that continues the sequence. */
  takeStateRestores(): [number, number][] {
    const r = this.stateRestores;
    this.stateRestores = [];
    return r;
  }

  /** The state copies forks asked for since the last call, [from, to] slot pairs (the caller copies them on the GPU). */
  takeStateCopies(): [number, number][] {
    const c = this.stateCopies;
    this.stateCopies = [];
    return c;
  }

  private takeState(op: string): number {
    if (this.stateSlots === 0) return -1;
    const slot = this.freeStates.pop();
    if (slot === undefined) throw new WebinferError(`${op}: out of sequence state slots: all ${this.stateSlots} are held by sequences; free one first (canAddSequence)`);
    return slot;
  }

  /** New blocks a sequence needs to grow by `numTokens`. */
  blocksToGrow(id: SequenceId, numTokens: number): number {
    const s = this.get('blocksToGrow', id);
    return Math.max(0, Math.ceil((s.len + numTokens) / this.blockSize) - s.blocks.length);
  }

  /** The prompt tokens a new sequence would find in the prefix cache now (a multiple of blockSize). */
  cachedPrefix(tokens: ArrayLike<number>, salt = ''): number {
    let n = 0;
    this.walkPrefix(tokens, salt, () => { n += this.blockSize; });
    return n;
  }

  /** Calls `hit(block, key)` for each leading full block of `tokens` that is cached, leaving the last token out. */
  private walkPrefix(tokens: ArrayLike<number>, salt: string, hit: (block: number, key: string) => void): void {
    if (!this.prefixCaching) return;
    const full = Math.floor((tokens.length - 1) / this.blockSize);
    let key = salt;
    for (let b = 0; b < full; b++) {
      key = this.keyOf(key, tokens, b * this.blockSize);
      const block = this.cached.get(key);
      if (block === undefined) return;
      hit(block, key);
    }
  }

  /**
   * The key of the block of `tokens` starting at `at`, chained to its parent's key. Two 32-bit FNV-1a
   * streams and the block's own ids: a collision needs the same 64-bit hash and parent, and the ids are
   * in the key, so none can pass off one block's contents as another's.
   */
  private keyOf(parent: string, tokens: ArrayLike<number>, at: number): string {
    let h1 = 0x811c9dc5, h2 = 0x01000193 ^ parent.length;
    for (let i = 0; i < parent.length; i++) { h1 = mix(h1, parent.charCodeAt(i)); }
    const ids: number[] = [];
    for (let i = at; i < at + this.blockSize; i++) { h2 = mix(h2, tokens[i]); ids.push(tokens[i]); }
    return `${(h1 >>> 0).toString(36)}.${(h2 >>> 0).toString(36)}:${ids.join(',')}`;
  }

  has(id: SequenceId): boolean {
    return this.seqs.has(id);
  }

  /** Tokens cached for a sequence so far (its length after the steps scheduled). */
  seqLen(id: SequenceId): number {
    return this.get('seqLen', id).len;
  }

  /** The physical blocks of a sequence, in logical order. */
  blocksOf(id: SequenceId): readonly number[] {
    return this.get('blocksOf', id).blocks;
  }

  /**
   * Adds a sequence. Given its prompt (with prefix caching on), it starts with the longest cached prefix
   * of the prompt's full blocks already in place, and returns how many tokens that is (0 otherwise); the
   * caller then schedules only the rest. `salt` keeps apart sequences whose equal ids would not give
   * equal cache contents.
   */
  addSequence(id: SequenceId, o: { tokens?: ArrayLike<number>; salt?: string } = {}): number {
    const op = 'addSequence';
    check(typeof id === 'number' || typeof id === 'string', op, 'id', 'a number or string', id);
    if (this.seqs.has(id)) throw new WebinferError(`${op}: id: expected a new sequence id, got ${fmt(id)}, which exists`);
    const s: Sequence = { len: 0, blocks: [], tokens: o.tokens ? Array.from(o.tokens) : [], hashed: 0, keys: [], salt: o.salt ?? '', state: this.takeState(op) };
    if (o.tokens && this.prefixCaching) {
      this.stats.queried += Math.floor((s.tokens.length - 1) / this.blockSize) * this.blockSize;
      this.stats.queries += s.tokens.length;
      this.walkPrefix(s.tokens, s.salt, (block, key) => {
        const b = this.blocks[block];
        if (b.ref++ === 0) this.evictable.delete(block);
        s.blocks.push(block);
        s.keys.push(key);
      });
      s.hashed = s.blocks.length;
      s.len = s.blocks.length * this.blockSize;
      this.stats.hits += s.len;
      if (s.len > 0 && s.state >= 0) this.stateRestores.push([s.blocks[s.blocks.length - 1], s.state]);
    }
    this.seqs.set(id, s);
    return s.len;
  }

  /**
   * A new sequence `id` starting as a copy of `parent` (a request's other choices, forked once its
   * prompt is placed): it shares the parent's full blocks (reference-counted, read-only) and gets a
   * block of its own for the parent's last partial block, whose contents the caller copies on the GPU:
   * returns that [from, to] pair, or null when the parent's length is a whole number of blocks. Needs
   * one free block then (check freeBlocks).
   */
  fork(parent: SequenceId, id: SequenceId): [number, number] | null {
    const op = 'fork';
    const p = this.get(op, parent);
    check(typeof id === 'number' || typeof id === 'string', op, 'id', 'a number or string', id);
    if (this.seqs.has(id)) throw new WebinferError(`${op}: id: expected a new sequence id, got ${fmt(id)}, which exists`);
    const partial = p.len % this.blockSize !== 0;
    if (partial && this.freeBlocks === 0) throw new WebinferError(`${op}: out of KV cache blocks: the copy of the partial block needs one and none is free`);
    const s: Sequence = { len: p.len, blocks: [...p.blocks], tokens: [...p.tokens], hashed: p.hashed, keys: [...p.keys], salt: p.salt, state: this.takeState(op) };
    if (s.state >= 0) this.stateCopies.push([p.state, s.state]);
    const shared = partial ? s.blocks.length - 1 : s.blocks.length;
    for (let i = 0; i < shared; i++) this.blocks[s.blocks[i]].ref++;
    let copy: [number, number] | null = null;
    if (partial) {
      const to = this.take();
      copy = [s.blocks[shared], to];
      s.blocks[shared] = to;
    }
    this.seqs.set(id, s);
    return copy;
  }

  /** Token ids of a sequence now known on the host (generated ones), in order: its full blocks can then be cached. */
  appendTokens(id: SequenceId, tokens: ArrayLike<number>): void {
    const s = this.get('appendTokens', id);
    for (let i = 0; i < tokens.length; i++) s.tokens.push(tokens[i]);
    this.register(s);
  }

  /**
   * Takes back the last n positions of a sequence (a speculative step's rejected proposals): its length
   * drops by n and the blocks past it go back to the pool, their contents never read; the slots of the
   * block it ends in are overwritten by the next tokens. Only positions whose ids are not known yet
   * (appendTokens) may go: no registered block ever holds a rejected token.
   */
  rollback(id: SequenceId, n: number): void {
    const op = 'rollback';
    const s = this.get(op, id);
    check(Number.isInteger(n) && n >= 0 && n <= s.len, op, 'n', `an integer in [0, ${s.len}] (the sequence's length)`, n);
    check(s.len - n >= s.tokens.length - 1 && s.len - n >= s.hashed * this.blockSize, op, 'n',
      `at most ${s.len - Math.max(s.tokens.length - 1, s.hashed * this.blockSize)} (positions whose ids are not known)`, n);
    s.len -= n;
    while (s.blocks.length * this.blockSize >= s.len + this.blockSize) {
      const block = s.blocks.pop()!;
      const b = this.blocks[block];
      // Past the known ids: never registered, never shared.
      b.ref = 0;
      this.free.push(block);
    }
  }

  /** Registers the sequence's full blocks whose ids are known and whose contents are scheduled. */
  private register(s: Sequence): void {
    if (!this.prefixCaching) return;
    const bs = this.blockSize;
    while ((s.hashed + 1) * bs <= Math.min(s.len, s.tokens.length)) {
      const key = this.keyOf(s.hashed ? s.keys[s.hashed - 1] : s.salt, s.tokens, s.hashed * bs);
      const block = s.blocks[s.hashed];
      // Another sequence computed the same block first: this copy stays private and is freed unregistered.
      if (!this.cached.has(key)) {
        this.blocks[block].key = key;
        this.cached.set(key, block);
      }
      s.keys.push(key);
      s.hashed++;
    }
  }

  /** Removes a sequence: each of its blocks no other sequence uses goes back to the pool (cached ones stay findable). */
  freeSequence(id: SequenceId): void {
    const s = this.get('freeSequence', id);
    // Last block first: a sequence's tail is evicted before its head, which more requests share.
    for (let i = s.blocks.length - 1; i >= 0; i--) {
      const block = s.blocks[i];
      const b = this.blocks[block];
      if (b.ref <= 0) throw new WebinferError(`freeSequence: block ${block} of sequence ${fmt(id)} freed twice (internal error)`);
      if (--b.ref > 0) continue;
      if (b.key !== null) this.evictable.set(block, true);
      else this.free.push(block);
    }
    if (s.state >= 0) {
      this.freeStates.push(s.state);
      // A fork's copy or a hit's restore not yet made has nothing to copy into any more.
      this.stateCopies = this.stateCopies.filter(([, to]) => to !== s.state);
      this.stateRestores = this.stateRestores.filter(([, to]) => to !== s.state);
    }
    this.seqs.delete(id);
  }

  /**
   * Forgets every cached block no sequence holds: their keys go, the blocks return to the free pool,
   * and no later prompt finds them. For work whose results must never be reused (a warm-up's trace
   * computes garbage into its blocks). Returns how many were forgotten.
   */
  dropCachedBlocks(): number {
    let n = 0;
    for (const block of this.evictable.keys()) {
      this.cached.delete(this.blocks[block].key!);
      this.blocks[block].key = null;
      this.free.push(block);
      n++;
    }
    this.evictable.clear();
    return n;
  }

  /** A block for new contents: a never-used one, else the least recently freed cached one (unregistered). */
  private take(): number {
    let block = this.free.pop();
    if (block === undefined) {
      block = this.evictable.keys().next().value as number;
      this.evictable.delete(block);
      this.cached.delete(this.blocks[block].key!);
      this.blocks[block].key = null;
      this.stats.evictions++;
    }
    this.blocks[block].ref = 1;
    return block;
  }

  /**
   * Checks the manager's bookkeeping (for tests): every block is free, evictable or used by exactly the
   * sequences holding it; registered keys point at their blocks; no block is held twice by a sequence.
   */
  checkInvariants(): void {
    const refs = new Array<number>(this.numBlocks).fill(0);
    for (const [id, s] of this.seqs) {
      const mine = new Set(s.blocks);
      if (mine.size !== s.blocks.length) throw new WebinferError(`sequence ${fmt(id)} holds a block twice`);
      if (s.blocks.length !== Math.ceil(s.len / this.blockSize)) throw new WebinferError(`sequence ${fmt(id)}: ${s.blocks.length} blocks for ${s.len} tokens`);
      for (const b of s.blocks) refs[b]++;
    }
    const freeSet = new Set(this.free);
    if (freeSet.size !== this.free.length) throw new WebinferError('a block is on the free list twice');
    for (let b = 0; b < this.numBlocks; b++) {
      const blk = this.blocks[b];
      const where = [freeSet.has(b), this.evictable.has(b), refs[b] > 0].filter(Boolean).length;
      if (where !== 1) throw new WebinferError(`block ${b}: free ${freeSet.has(b)}, evictable ${this.evictable.has(b)}, used by ${refs[b]}`);
      if (refs[b] !== blk.ref) throw new WebinferError(`block ${b}: refcount ${blk.ref}, used by ${refs[b]} sequences`);
      if (this.evictable.has(b) && blk.key === null) throw new WebinferError(`block ${b}: evictable but not cached`);
      if (freeSet.has(b) && blk.key !== null) throw new WebinferError(`block ${b}: free but still cached`);
      if (blk.key !== null && this.cached.get(blk.key) !== b) throw new WebinferError(`block ${b}: its key points elsewhere`);
    }
    for (const [key, b] of this.cached) if (this.blocks[b].key !== key) throw new WebinferError(`cached key of block ${b} is stale`);
    const states = [...this.seqs.values()].map((s) => s.state).filter((x) => x >= 0);
    const all = new Set([...states, ...this.freeStates]);
    if (all.size !== states.length + this.freeStates.length || all.size !== this.stateSlots) {
      throw new WebinferError(`state slots: ${states.length} held and ${this.freeStates.length} free of ${this.stateSlots}, some twice or missing`);
    }
  }

  private get(op: string, id: SequenceId): Sequence {
    const s = this.seqs.get(id);
    if (!s) throw new WebinferError(`${op}: id: expected a sequence added with addSequence, got ${fmt(id)}`);
    return s;
  }

  /**
   * Schedules one step: appends each request's new tokens to its sequence, taking blocks as needed,
   * and returns the step's metadata. Validates everything and counts the blocks first: when the
   * cache runs out it throws and nothing changes (no sequence grows, no block is taken).
   */
  schedule(batch: readonly StepRequest[]): StepMetadata {
    const op = 'schedule';
    check(Array.isArray(batch) && batch.length > 0, op, 'batch', 'a non-empty array of { id, numTokens }', batch);
    const seen = new Set<SequenceId>();
    let need = 0;
    for (const [i, r] of batch.entries()) {
      const s = this.get(op, r?.id);
      if (seen.has(r.id)) throw new WebinferError(`${op}: batch[${i}].id: expected each sequence once per step, got ${fmt(r.id)} again`);
      seen.add(r.id);
      checkPosInt(r.numTokens, op, `batch[${i}].numTokens`);
      need += Math.ceil((s.len + r.numTokens) / this.blockSize) - s.blocks.length;
    }
    if (need > this.freeBlocks) {
      throw new WebinferError(`${op}: out of KV cache blocks: this step needs ${need} new blocks and ${this.freeBlocks} of ${this.numBlocks} are free; `
        + 'free finished sequences or schedule fewer tokens');
    }
    // Decode first (vLLM's order), the rest as requested.
    const idx = batch.map((_, i) => i);
    const ordered = [...idx.filter((i) => batch[i].numTokens === 1), ...idx.filter((i) => batch[i].numTokens !== 1)];
    const S = batch.length;
    const numTokens = batch.reduce((a, r) => a + r.numTokens, 0);
    const queryStartLoc = new Int32Array(S + 1);
    const seqLens = new Int32Array(S);
    const slotMapping = new Int32Array(numTokens);
    const rows: [number, number][] = new Array(S);
    let maxBlocksPerSeq = 1;
    for (const [k, i] of ordered.entries()) {
      const r = batch[i];
      const s = this.seqs.get(r.id)!;
      const start = s.len;
      s.len += r.numTokens;
      while (s.blocks.length * this.blockSize < s.len) s.blocks.push(this.take());
      for (let p = start, t = queryStartLoc[k]; p < s.len; p++, t++) {
        slotMapping[t] = s.blocks[Math.floor(p / this.blockSize)] * this.blockSize + (p % this.blockSize);
      }
      queryStartLoc[k + 1] = queryStartLoc[k] + r.numTokens;
      seqLens[k] = s.len;
      rows[i] = [queryStartLoc[k], queryStartLoc[k + 1]];
      maxBlocksPerSeq = Math.max(maxBlocksPerSeq, s.blocks.length);
      this.register(s);
    }
    const blockTable = new Int32Array(S * maxBlocksPerSeq);
    for (const [k, i] of ordered.entries()) blockTable.set(this.seqs.get(batch[i].id)!.blocks, k * maxBlocksPerSeq);
    const meta: StepMetadata = { order: ordered.map((i) => batch[i].id), rows, numTokens, queryStartLoc, seqLens, blockTable, maxBlocksPerSeq, slotMapping };
    if (this.stateSlots) meta.stateSlots = Int32Array.from(ordered, (i) => this.seqs.get(batch[i].id)!.state);
    return meta;
  }
}
