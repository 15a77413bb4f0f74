// What an encoder-only architecture (bert.ts, modernbert.ts) gives the encoder model (encoder.ts), what
// it gets for each forward pass, and the pieces both share: config reading, the checkpoint's tensor
// list, and bidirectional self-attention over a scratch paged K/V.
//
// A pass runs every input of a batch as one set of unpadded rows (T tokens, input i's rows from
// queryStartLoc[i]): the linear layers see T rows, and attention sees each input as its own sequence of
// a paged batch (causal: false), its keys written to a scratch cache that every layer reuses (the GPU
// runs a layer's write and attention before the next layer's write). No padding, so nothing leaks
// between inputs, and no mask.
import { WebinferError, check, fmt, isPosInt, shapeStr } from '../core/errors.js';
import type { Runtime } from '../core/runtime.js';
import type { Tensor } from '../core/tensor.js';
import { encodeCacheWrite, type PagedKVCache } from '../attention/paged_cache.js';
import type { AttentionPlan } from '../attention/paged.js';
import type { WeightDType, WeightReader } from './weights.js';
import type { ResolvedTensor } from './schema.js';

/** The sizes every encoder architecture has (from its config.json). */
export interface EncoderConfig {
  architecture: string;
  vocabSize: number;
  hidden: number;
  numLayers: number;
  numHeads: number;
  headDim: number;
  intermediate: number;
  /** max_position_embeddings: the longest input. */
  maxPositions: number;
  padTokenId: number | null;
}

/** One forward pass's inputs, on the GPU (encoder.ts writes them once per pass). */
export interface EncoderPass {
  /** Tokens of the pass (rows of every activation). */
  T: number;
  /** Inputs of the pass. */
  S: number;
  /** i32 [T]: token ids. */
  ids: Tensor;
  /** i32 [T]: each token's position in its input (0 at its first token). */
  positions: Tensor;
  /** i32 [T]: each token's slot of the scratch cache. */
  slots: Tensor;
  /** i32 [S]: each input's first row. */
  firstRows: Tensor;
  /** The scratch K/V every layer writes and attends over. */
  cache: PagedKVCache;
  /** Each input as one sequence: its rows, its length, its blocks of the scratch cache. */
  meta: { queryStartLoc: Int32Array; seqLens: Int32Array; blockTable: Int32Array; maxBlocksPerSeq: number };
  /** Attention plans by two-sided window (0: every key of the input), made by encoder.ts from
   *  EncoderArch.windows once per pass. */
  plans: ReadonlyMap<number, AttentionPlan>;
  /** Tensors of the pass (freed once its results are read): the architecture's activations go here. */
  temps: Tensor[];
}

/** A checkpoint's tensors as an architecture expects them: name (without the prefix) -> shape. */
export interface EncoderSchema {
  required: Map<string, number[]>;
  optional: Map<string, number[]>;
  /** Tensors a checkpoint may carry that the encoder never reads (task heads, position-id buffers). */
  ignored(name: string): boolean;
}

export interface EncoderArch {
  readonly cfg: EncoderConfig;
  /** The two-sided attention windows of the layers (0: global), one plan per pass each. */
  readonly windows: readonly number[];
  /** Weight-name prefixes a checkpoint of this family may use ('' as saved by the model class, 'bert.'
   *  by a task head's class ...); the first under which `probe` exists is taken. */
  readonly prefixes: readonly string[];
  readonly probe: string;
  schema(): EncoderSchema;
  load(r: WeightReader, dtype: WeightDType, prefix: string): Promise<void>;
  /** Records the layers; returns the last hidden state [>= T, hidden]. */
  forward(p: EncoderPass): Tensor;
  /** Whether pooler() gives anything (a BertModel checkpoint with pooler.dense). */
  readonly hasPooler: boolean;
  /** BERT's pooler over each input's first row (tanh(dense(cls))) as [S, hidden], or null without one. */
  pooler(p: EncoderPass, h: Tensor): Tensor | null;
  /** GPU bytes of every weight as stored. */
  storedWeightBytes(): number;
  destroy(): void;
}

// ------------------------------------------------------------------------------------------ config

const OP = 'loadModel';

/** Reads config[key] as a positive integer (or the first of `keys` present). */
export function configInt(c: Record<string, unknown>, keys: string | readonly string[], fallback?: number): number {
  const list = typeof keys === 'string' ? [keys] : keys;
  for (const k of list) {
    if (c[k] === undefined || c[k] === null) continue;
    check(isPosInt(c[k]), OP, `config.${k}`, 'a positive integer', fmt(c[k]));
    return c[k] as number;
  }
  if (fallback !== undefined) return fallback;
  throw new WebinferError(`${OP}: config.${list[0]}: expected a positive integer, got none`);
}

export function configNumber(c: Record<string, unknown>, key: string, fallback: number): number {
  const v = c[key];
  if (v === undefined || v === null) return fallback;
  check(typeof v === 'number' && Number.isFinite(v), OP, `config.${key}`, 'a finite number', fmt(v));
  return v;
}

export function configBool(c: Record<string, unknown>, key: string, fallback: boolean): boolean {
  const v = c[key];
  if (v === undefined || v === null) return fallback;
  check(typeof v === 'boolean', OP, `config.${key}`, 'a boolean', fmt(v));
  return v;
}

/** hidden_size, heads, their head size and the other sizes every encoder config has. */
export function baseConfig(architecture: string, c: Record<string, unknown>, intermediateKey = 'intermediate_size'): EncoderConfig {
  const hidden = configInt(c, 'hidden_size');
  const numHeads = configInt(c, 'num_attention_heads');
  check(hidden % numHeads === 0, OP, 'config.num_attention_heads', `a divisor of hidden_size ${hidden}`, numHeads);
  const headDim = hidden / numHeads;
  check(headDim % 8 === 0 && headDim <= 256, OP, 'config.hidden_size', 'a head size (hidden_size / num_attention_heads) that is a multiple of 8 up to 256 (the attention kernels\')', `${headDim}`);
  const pad = c.pad_token_id;
  check(pad === undefined || pad === null || (Number.isInteger(pad) && (pad as number) >= 0), OP, 'config.pad_token_id', 'a token id or null', fmt(pad));
  return {
    architecture, vocabSize: configInt(c, 'vocab_size'), hidden, numLayers: configInt(c, 'num_hidden_layers'), numHeads, headDim,
    intermediate: configInt(c, intermediateKey), maxPositions: configInt(c, 'max_position_embeddings'),
    padTokenId: (pad ?? null) as number | null,
  };
}

// ------------------------------------------------------------------------------------- checkpoints

/**
 * Checks the checkpoint's tensors against the architecture's list under `prefix` (every required one
 * present with its shape and a float dtype, none unknown) and resolves each to its file, before any
 * GPU memory is taken. One error names every problem.
 */
export function resolveEncoderTensors(architecture: string, schema: EncoderSchema, prefix: string,
                                      files: readonly { tensors: ReadonlyMap<string, { dtype: string; shape: number[] }>; name?: string }[]): Map<string, ResolvedTensor> {
  const found = new Map<string, ResolvedTensor>();
  const problems: string[] = [];
  files.forEach((f, file) => {
    for (const [name, info] of f.tensors) {
      if (found.has(name)) problems.push(`duplicate ${name}: in files ${found.get(name)!.file} and ${file}`);
      else found.set(name, { file, dtype: info.dtype, shape: info.shape.slice() });
    }
  });
  const resolved = new Map<string, ResolvedTensor>();
  const accept = (name: string, shape: number[], must: boolean) => {
    const t = found.get(prefix + name);
    if (!t) {
      if (must) problems.push(`missing ${prefix}${name} ${shapeStr(shape)}`);
      return;
    }
    if (t.shape.length !== shape.length || t.shape.some((s, k) => s !== shape[k])) problems.push(`wrong shape ${prefix}${name}: expected ${shapeStr(shape)}, got ${shapeStr(t.shape)}`);
    else if (!['F32', 'F16', 'BF16'].includes(t.dtype)) problems.push(`wrong dtype ${prefix}${name}: expected F32, F16 or BF16, got ${t.dtype}`);
    resolved.set(prefix + name, t);
  };
  for (const [n, s] of schema.required) accept(n, s, true);
  for (const [n, s] of schema.optional) accept(n, s, false);
  for (const [name, t] of found) {
    if (resolved.has(name)) continue;
    if (name.startsWith(prefix) && schema.ignored(name.slice(prefix.length))) continue;
    if (!name.startsWith(prefix) && schema.ignored(name)) continue;
    problems.push(`unexpected ${name} ${shapeStr(t.shape)}`);
  }
  if (problems.length) {
    const shown = problems.slice(0, 20).map((p) => `\n  ${p}`).join('');
    const more = problems.length > 20 ? `\n  ... and ${problems.length - 20} more` : '';
    throw new WebinferError(`${OP}: weights of ${architecture}: expected the tensors of its config (${schema.required.size} required), got ${problems.length} problem${problems.length > 1 ? 's' : ''}:${shown}${more}`);
  }
  return resolved;
}

// --------------------------------------------------------------------------------------- attention

/**
 * Bidirectional self-attention of a pass from fused q|k|v rows (qkv [T, W], q at 0, k at kOff, v at
 * vOff, heads of headDim): k and v written to the scratch cache, then the plan of `window` into
 * out [T, numHeads·headDim]. `kvWritten`: the caller wrote the cache already (RoPE fused with the write).
 */
export function selfAttention(rt: Runtime, p: EncoderPass, cfg: EncoderConfig, qkv: Tensor, W: number, window: number, out: Tensor, kvWritten = false): void {
  const H = cfg.numHeads * cfg.headDim;
  if (!kvWritten) {
    encodeCacheWrite(rt, p.T, { tensor: qkv, offset: H, stride: W }, { tensor: qkv, offset: 2 * H, stride: W }, p.cache, p.slots);
  }
  p.plans.get(window)!.run(qkv.view([qkv.shape[0], W]), p.cache, { out: out.view([out.shape[0], cfg.numHeads, cfg.headDim]), qRowStride: W });
}
