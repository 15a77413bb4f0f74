// What every attention kernel family shares on the host (the counterpart of shaders/attention/common.wgsl):
// the option flags, validation of the options every entry point takes, and the per-head parameters.
import type { Runtime } from '../core/runtime.js';
import { check, checkFinite, isPosInt } from '../core/errors.js';
import type { Tensor } from '../core/tensor.js';
import type { AttentionOptions } from '../core/types.js';

/** A dense attention problem after validation (attention/sdpa.ts), as the kernels take it. */
export interface SdpaProblem {
  B: number; Hq: number; Hkv: number; Lq: number; Lk: number; D: number; Dv: number;
  scale: number;
  causal: boolean;
  softcap: number;          // 0 = off
  window: number;           // 0 = off
  /** The window limits keys after the row too: visible iff |i_abs - j| < window (ModernBERT's local layers). */
  windowBothSides?: boolean;
  alibi: Float32Array | null;
  sinks: Float32Array | null;
  mask: Tensor | null;
  maskKind: 'bool' | 'additive' | null;
  maskStrides: [number, number, number, number];
}

/** Option flags of the attention kernels (the FLAG_* of shaders/attention/common.wgsl). */
const FLAGS = { causal: 1, window: 2, softcap: 4, alibi: 8, sinks: 16, maskBool: 32, maskAdd: 64, windowBothSides: 256 } as const;
export const FLAG_MASK_BOOL = FLAGS.maskBool;
/** Paged plans over a source split across buffers (shaders/attention/common.wgsl FLAG_SPLIT). */
export const FLAG_SPLIT = 128;

export interface FlagInputs {
  causal: boolean; window: number; windowBothSides?: boolean; softcap: number; alibi: Float32Array | null; sinks: Float32Array | null;
  maskKind: 'bool' | 'additive' | null;
}

/**
 * The attention option beyond API.md's AttentionOptions that planAttention and sdpa take: a sliding
 * window that also limits the keys after the row (|i_abs - j| < slidingWindow: a bidirectional
 * encoder's local attention, ModernBERT's `local_attention / 2 + 1`). Default false: the window limits
 * only the keys before the row (SPEC §2: i_abs - j < W).
 */
export interface WindowSidesOption {
  windowBothSides?: boolean;
}

export function sdpaFlags(p: FlagInputs): number {
  return (p.causal ? FLAGS.causal : 0) | (p.window ? FLAGS.window : 0) | (p.softcap ? FLAGS.softcap : 0)
    | (p.alibi ? FLAGS.alibi : 0) | (p.sinks ? FLAGS.sinks : 0)
    | (p.maskKind === 'bool' ? FLAGS.maskBool : 0) | (p.maskKind === 'additive' ? FLAGS.maskAdd : 0)
    | (p.window && p.windowBothSides ? FLAGS.windowBothSides : 0);
}

function perHead(x: unknown, n: number, op: string, arg: string): Float32Array {
  const ok = x instanceof Float32Array || (Array.isArray(x) && x.every((e) => typeof e === 'number'));
  check(ok, op, arg, 'a Float32Array or number[]', x);
  const a = Float32Array.from(x as ArrayLike<number>);
  check(a.length === n, op, arg, `${n} values (one per query head)`, `${a.length} values`);
  check(a.every(Number.isFinite), op, arg, 'finite values', 'a non-finite value');
  return a;
}

export interface AttnOptionValues {
  scale: number; causal: boolean; softcap: number; window: number; windowBothSides?: boolean;
  alibi: Float32Array | null; sinks: Float32Array | null;
}

/** Validates the options every attention entry point shares (API.md AttentionOptions). */
export function validateAttnOptions(op: string, opts: AttentionOptions & WindowSidesOption, D: number, Hq: number, causalDefault = false): AttnOptionValues {
  const scale = opts.scale === undefined ? 1 / Math.sqrt(D) : checkFinite(opts.scale, op, 'opts.scale');
  if (opts.causal !== undefined) check(typeof opts.causal === 'boolean', op, 'opts.causal', 'a boolean', opts.causal);
  let softcap = 0;
  if (opts.softcap !== undefined && opts.softcap !== null) {
    softcap = checkFinite(opts.softcap, op, 'opts.softcap');
    if (softcap < 0) softcap = 0;   // SPEC: None or <= 0 means off
  }
  let window = 0;
  if (opts.slidingWindow !== undefined && opts.slidingWindow !== null) {
    check(isPosInt(opts.slidingWindow), op, 'opts.slidingWindow', 'a positive integer', opts.slidingWindow);
    window = opts.slidingWindow;
  }
  let windowBothSides = false;
  if (opts.windowBothSides !== undefined) {
    check(typeof opts.windowBothSides === 'boolean', op, 'opts.windowBothSides', 'a boolean', opts.windowBothSides);
    windowBothSides = opts.windowBothSides;
    check(!windowBothSides || window > 0, op, 'opts.windowBothSides', 'a slidingWindow to apply on both sides', 'no slidingWindow');
  }
  const alibi = opts.alibiSlopes === undefined ? null : perHead(opts.alibiSlopes, Hq, op, 'opts.alibiSlopes');
  const sinks = opts.sinks === undefined ? null : perHead(opts.sinks, Hq, op, 'opts.sinks');
  return { scale, causal: opts.causal ?? causalDefault, softcap, window, windowBothSides, alibi, sinks };
}

/** ALiBi slopes then sinks, one per query head each (zeros where absent), in one small buffer. */
export function headParams(engine: Runtime, Hq: number, alibi: Float32Array | null, sinks: Float32Array | null): GPUBuffer {
  const a = new Float32Array(2 * Hq);
  if (alibi) a.set(alibi, 0);
  if (sinks) a.set(sinks, Hq);
  return engine.smallF32(a, 'head params');
}

