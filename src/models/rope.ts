// Rotary position embeddings as HF transformers 5 computes them (modeling_rope_utils.py and each
// model's RotaryEmbedding): inverse frequencies per rope type, the attention scaling factor that
// multiplies cos and sin, and the cos/sin table a GPU kernel reads.
//
// transformers computes all of this in float32 (inv_freq is an f32 tensor, the position × frequency
// product is an f32 matmul under disabled autocast, cos/sin are f32). Every step below rounds to f32
// where torch does (Math.fround), with torch's promotion rule for a Python scalar meeting an f32
// tensor: the scalar is converted to f32 first. What remains is at most an ulp of libm difference.

import { check, fail } from '../core/errors.js';

export type RopeType = 'default' | 'linear' | 'dynamic' | 'yarn' | 'llama3' | 'longrope';

export const SUPPORTED_ROPE_TYPES: readonly RopeType[] = Object.freeze(['default', 'linear', 'dynamic', 'yarn', 'llama3', 'longrope'] as const);

/** A model's RoPE settings, normalized from either config form (see config.ts). */
export interface RopeConfig {
  type: RopeType;
  /** rope_theta, the base. */
  theta: number;
  /** How many leading dims of a head rotate (even): head_dim, or qk_rope_head_dim for DeepSeek. */
  rotaryDim: number;
  /**
   * Which dims form a rotating pair for frequency i: (2i, 2i+1) when true (DeepSeek: V2 always, V3
   * with rope_interleave), (i, i + rotaryDim/2) when false (rotate_half: Llama, Mistral, Qwen).
   */
  interleaved: boolean;
  /** max_position_embeddings of the config (dynamic NTK's threshold; YaRN's factor when none is given). */
  maxPositionEmbeddings: number;
  /** linear, dynamic, llama3, yarn (yarn: null derives it from the position limits). */
  factor: number | null;
  /** llama3 and yarn: the pretraining context length. */
  originalMaxPositionEmbeddings: number | null;
  lowFreqFactor: number | null; // llama3
  highFreqFactor: number | null; // llama3
  betaFast: number | null; // yarn (null: 32)
  betaSlow: number | null; // yarn (null: 1)
  mscale: number | null; // yarn
  mscaleAllDim: number | null; // yarn; DeepSeek V3 also scales the softmax with it
  attentionFactor: number | null; // yarn: explicit cos/sin scaling
  truncate: boolean; // yarn: floor/ceil the correction range
  /** longrope (Phi3): per-frequency divisors of inv_freq for sequences up to original_max_position_embeddings, and beyond it. */
  shortFactor?: readonly number[];
  longFactor?: readonly number[];
}

/**
 * LongRoPE's inverse frequencies (_compute_longrope_parameters): 1 / (ext[i] · base^(2i/dim)) in f32,
 * ext the short or the long factors; the cos/sin scale is attention_factor, else
 * sqrt(1 + ln(factor) / ln(original_max_position_embeddings)) when factor > 1, else 1.
 */
export function longropeParameters(rope: RopeConfig, long: boolean): { invFreq: Float32Array; attentionScaling: number } {
  const ext = long ? rope.longFactor : rope.shortFactor;
  check(Array.isArray(ext) && ext.length === rope.rotaryDim / 2, 'ropeParameters', long ? 'rope.longFactor' : 'rope.shortFactor', `${rope.rotaryDim / 2} numbers (longrope)`, ext);
  const orig = need(rope, 'originalMaxPositionEmbeddings', 'original_max_position_embeddings');
  const factor = need(rope, 'factor', 'max_position_embeddings / original_max_position_embeddings');
  const pos = posFreqs(rope.theta, rope.rotaryDim);
  const inv = new Float32Array(pos.length);
  for (let i = 0; i < inv.length; i++) inv[i] = f(1 / f(f(ext![i]!) * pos[i]!));
  const attentionScaling = rope.attentionFactor ?? (factor <= 1 ? 1 : Math.sqrt(1 + Math.log(factor) / Math.log(orig)));
  return { invFreq: inv, attentionScaling };
}

const f = Math.fround;

/** YaRN's magnitude correction: 0.1·m·ln(scale) + 1, and 1 when not extending (scale <= 1). */
export function yarnGetMscale(scale: number, mscale = 1): number {
  if (scale <= 1) return 1;
  return 0.1 * mscale * Math.log(scale) + 1;
}

/** base ** (arange(0, dim, 2) / dim) in f32, as every rope type starts. */
function posFreqs(theta: number, dim: number): Float32Array {
  const out = new Float32Array(dim / 2);
  const base = f(theta);
  for (let i = 0; i < out.length; i++) out[i] = f(Math.pow(base, f((2 * i) / dim)));
  return out;
}

function defaultInvFreq(theta: number, dim: number): Float32Array {
  const p = posFreqs(theta, dim);
  for (let i = 0; i < p.length; i++) p[i] = f(1 / p[i]!);
  return p;
}

function need(rope: RopeConfig, key: keyof RopeConfig, what: string): number {
  const v = rope[key];
  check(typeof v === 'number' && Number.isFinite(v), 'ropeParameters', `rope.${key}`, `a finite number (${what} of rope type '${rope.type}')`, v);
  return v as number;
}

function checkRope(rope: RopeConfig, op: string): void {
  check(SUPPORTED_ROPE_TYPES.includes(rope.type), op, 'rope.type', `one of ${SUPPORTED_ROPE_TYPES.join(', ')}`, rope.type);
  check(Number.isInteger(rope.rotaryDim) && rope.rotaryDim > 0 && rope.rotaryDim % 2 === 0, op, 'rope.rotaryDim', 'a positive even integer', rope.rotaryDim);
  check(Number.isFinite(rope.theta) && rope.theta > 0, op, 'rope.theta', 'a positive number', rope.theta);
}

/**
 * The inverse frequencies (f32, rotaryDim/2 of them) and the factor transformers multiplies cos and
 * sin by (`attention_scaling`: 1 except for YaRN).
 */
export function ropeParameters(rope: RopeConfig): { invFreq: Float32Array; attentionScaling: number } {
  checkRope(rope, 'ropeParameters');
  const dim = rope.rotaryDim;
  switch (rope.type) {
    case 'longrope':
      return longropeParameters(rope, false);
    case 'default':
      return { invFreq: defaultInvFreq(rope.theta, dim), attentionScaling: 1 };
    case 'dynamic':
      // At sequence lengths up to max_position_embeddings dynamic NTK's base is rope_theta itself
      // (the growth term is exactly 1); ropeTable refuses longer tables.
      need(rope, 'factor', 'the scaling factor');
      return { invFreq: defaultInvFreq(rope.theta, dim), attentionScaling: 1 };
    case 'linear': {
      const factor = f(need(rope, 'factor', 'the scaling factor'));
      const inv = defaultInvFreq(rope.theta, dim);
      for (let i = 0; i < inv.length; i++) inv[i] = f(inv[i]! / factor);
      return { invFreq: inv, attentionScaling: 1 };
    }
    case 'llama3': {
      const factor = need(rope, 'factor', 'the scaling factor');
      const low = need(rope, 'lowFreqFactor', 'low_freq_factor');
      const high = need(rope, 'highFreqFactor', 'high_freq_factor');
      const oldCtx = need(rope, 'originalMaxPositionEmbeddings', 'original_max_position_embeddings');
      const lowWavelen = f(oldCtx / low);
      const highWavelen = f(oldCtx / high);
      const inv = defaultInvFreq(rope.theta, dim);
      const twoPi = f(2 * Math.PI);
      for (let i = 0; i < inv.length; i++) {
        const x = inv[i]!;
        const wavelen = f(twoPi / x);
        // Three bands: short wavelengths keep their frequency, long ones are divided by factor, and
        // the band between interpolates smoothly in old_context_len / wavelen.
        const scaled = wavelen > lowWavelen ? f(x / f(factor)) : x;
        if (!(wavelen < highWavelen) && !(wavelen > lowWavelen)) {
          const smooth = f(f(f(f(oldCtx) / wavelen) - f(low)) / f(high - low));
          inv[i] = f(f(f(f(1 - smooth) * scaled) / f(factor)) + f(smooth * scaled));
        } else inv[i] = scaled;
      }
      return { invFreq: inv, attentionScaling: 1 };
    }
    case 'yarn': {
      const oldCtx = need(rope, 'originalMaxPositionEmbeddings', 'original_max_position_embeddings');
      const factor = rope.factor ?? rope.maxPositionEmbeddings / oldCtx;
      check(Number.isFinite(factor) && factor > 0, 'ropeParameters', 'rope.factor', 'a positive number', factor);
      let attentionScaling: number;
      if (rope.attentionFactor !== null) attentionScaling = rope.attentionFactor;
      else if (rope.mscale && rope.mscaleAllDim) attentionScaling = yarnGetMscale(factor, rope.mscale) / yarnGetMscale(factor, rope.mscaleAllDim);
      else attentionScaling = yarnGetMscale(factor);
      const betaFast = rope.betaFast || 32;
      const betaSlow = rope.betaSlow || 1;
      // The dimension index at which a frequency completes `rotations` turns over the original context.
      const corrDim = (rotations: number) => (dim * Math.log(oldCtx / (rotations * 2 * Math.PI))) / (2 * Math.log(rope.theta));
      let lo = corrDim(betaFast);
      let hi = corrDim(betaSlow);
      if (rope.truncate) {
        lo = Math.floor(lo);
        hi = Math.ceil(hi);
      }
      lo = Math.max(lo, 0);
      hi = Math.min(hi, dim - 1);
      if (lo === hi) hi += 0.001;
      const pos = posFreqs(rope.theta, dim);
      const inv = new Float32Array(dim / 2);
      const fl = f(lo);
      const span = f(hi - lo);
      const ff = f(factor);
      for (let i = 0; i < inv.length; i++) {
        const extrapolation = f(1 / pos[i]!);
        const interpolation = f(1 / f(ff * pos[i]!));
        const ramp = Math.min(1, Math.max(0, f(f(i - fl) / span)));
        const keep = f(1 - ramp); // weight of the unscaled (extrapolated) frequency
        inv[i] = f(f(interpolation * f(1 - keep)) + f(extrapolation * keep));
      }
      return { invFreq: inv, attentionScaling };
    }
  }
}

/**
 * cos and sin of position × inverse frequency, each [numPositions, rotaryDim/2] row-major, already
 * multiplied by the attention scaling factor as transformers does. Frequency i rotates the pair the
 * rope's `interleaved` flag names.
 */
export function ropeTable(rope: RopeConfig, numPositions: number): { cos: Float32Array; sin: Float32Array } {
  check(Number.isInteger(numPositions) && numPositions >= 0 && numPositions <= 1 << 24, 'ropeTable', 'numPositions', 'an integer in [0, 2^24]', numPositions);
  if (rope.type === 'dynamic' && numPositions > rope.maxPositionEmbeddings) {
    fail(
      'ropeTable',
      'numPositions',
      `at most max_position_embeddings (${rope.maxPositionEmbeddings}) for dynamic NTK RoPE (beyond it transformers recomputes the frequencies per sequence length; unsupported)`,
      numPositions,
    );
  }
  // LongRoPE: the short factors' rows [0, P), then the long factors' rows [P, 2P) (longropeRows).
  const variants = rope.type === 'longrope' ? [longropeParameters(rope, false), longropeParameters(rope, true)] : [ropeParameters(rope)];
  const half = variants[0]!.invFreq.length;
  const cos = new Float32Array(variants.length * numPositions * half);
  const sin = new Float32Array(variants.length * numPositions * half);
  variants.forEach(({ invFreq, attentionScaling }, v) => fillTable(invFreq, attentionScaling, numPositions, cos.subarray(v * numPositions * half), sin.subarray(v * numPositions * half)));
  return { cos, sin };
}

/** How many table rows ropeTable makes per position: 2 for LongRoPE (short rows, then long rows), else 1. */
export function ropeTableVariants(rope: RopeConfig): number {
  return rope.type === 'longrope' ? 2 : 1;
}

/**
 * LongRoPE: the table row of a token at `position` of a sequence whose largest position in this
 * forward pass is `seqMaxPosition` (HF's seq_len = max(position_ids) + 1 against
 * original_max_position_embeddings): the long rows (offset by the table's positions) beyond it.
 */
export function longropeRow(rope: RopeConfig, position: number, seqMaxPosition: number, tablePositions: number): number {
  return seqMaxPosition + 1 > rope.originalMaxPositionEmbeddings! ? position + tablePositions : position;
}

function fillTable(invFreq: Float32Array, attentionScaling: number, numPositions: number, cos: Float32Array, sin: Float32Array): void {
  const half = invFreq.length;
  const s = f(attentionScaling);
  for (let p = 0; p < numPositions; p++) {
    for (let i = 0; i < half; i++) {
      const angle = f(invFreq[i]! * p);
      const c = f(Math.cos(angle));
      const sn = f(Math.sin(angle));
      cos[p * half + i] = s === 1 ? c : f(c * s);
      sin[p * half + i] = s === 1 ? sn : f(sn * s);
    }
  }
}
