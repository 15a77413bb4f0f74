// The host side of a serving loop over a paged KV cache: a block allocator and a sequence table that
// turn each step's batch into the metadata paged attention needs (slot mapping, block table, sequence
// lengths, query start locations), decode sequences first as vLLM orders them. Pure host code: the
// metadata goes to the GPU with the attention call, in one write.
import { WebinferError, check, checkPosInt, fmt } from '../core/errors.js';

export type SequenceId = number | string;

export interface StepRequest {
  /** A sequence added with addSequence. */
  id: SequenceId;
  /** New tokens this step: 1 for decode, more for (chunked) prefill. */
  numTokens: number;
}

export interface StepMetadata {
  /** Sequences in batch order: decode (1 token) first, then the others in request order. */
  order: SequenceId[];
  /** Rows of the flattened batch that belong to each request, in request order: [start, end). */
  rows: [number, number][];
  numTokens: number;
  queryStartLoc: Int32Array;
  seqLens: Int32Array;
  blockTable: Int32Array;
  maxBlocksPerSeq: number;
  /** Cache slot of every new token, in batch order (for reshapeAndCache). */
  slotMapping: Int32Array;
}

interface Sequence { len: number; blocks: number[] }

export class KVCacheManager {
  readonly numBlocks: number;
  readonly blockSize: number;
  private readonly free: number[];
  private readonly seqs = new Map<SequenceId, Sequence>();

  constructor(o: { numBlocks: number; blockSize: number }) {
    const op = 'KVCacheManager';
    check(o !== null && typeof o === 'object', op, 'o', 'an options object', o);
    this.numBlocks = checkPosInt(o.numBlocks, op, 'numBlocks');
    this.blockSize = checkPosInt(o.blockSize, op, 'blockSize');
    // Pop from the end: block 0 is handed out first.
    this.free = Array.from({ length: this.numBlocks }, (_, i) => this.numBlocks - 1 - i);
  }

  get freeBlocks(): number {
    return this.free.length;
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

  addSequence(id: SequenceId): void {
    check(typeof id === 'number' || typeof id === 'string', 'addSequence', 'id', 'a number or string', id);
    if (this.seqs.has(id)) throw new WebinferError(`addSequence: id: expected a new sequence id, got ${fmt(id)}, which exists`);
    this.seqs.set(id, { len: 0, blocks: [] });
  }

  /** Removes a sequence and returns its blocks to the pool. */
  freeSequence(id: SequenceId): void {
    const s = this.get('freeSequence', id);
    for (let i = s.blocks.length - 1; i >= 0; i--) this.free.push(s.blocks[i]);
    this.seqs.delete(id);
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
    if (need > this.free.length) {
      throw new WebinferError(`${op}: out of KV cache blocks: this step needs ${need} new blocks and ${this.free.length} of ${this.numBlocks} are free; `
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
      while (s.blocks.length * this.blockSize < s.len) s.blocks.push(this.free.pop()!);
      for (let p = start, t = queryStartLoc[k]; p < s.len; p++, t++) {
        slotMapping[t] = s.blocks[Math.floor(p / this.blockSize)] * this.blockSize + (p % this.blockSize);
      }
      queryStartLoc[k + 1] = queryStartLoc[k] + r.numTokens;
      seqLens[k] = s.len;
      rows[i] = [queryStartLoc[k], queryStartLoc[k + 1]];
      maxBlocksPerSeq = Math.max(maxBlocksPerSeq, s.blocks.length);
    }
    const blockTable = new Int32Array(S * maxBlocksPerSeq);
    for (const [k, i] of ordered.entries()) blockTable.set(this.seqs.get(batch[i].id)!.blocks, k * maxBlocksPerSeq);
    return { order: ordered.map((i) => batch[i].id), rows, numTokens, queryStartLoc, seqLens, blockTable, maxBlocksPerSeq, slotMapping };
  }
}
