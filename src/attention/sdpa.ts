// Dense SDPA entry point: validation of every argument and option (SPEC §2), then backend choice.
import { broadcastStrides } from '../reference/attention.js';
import { check, fail, fmt, shapeStr } from '../core/errors.js';
import type { Runtime } from '../core/runtime.js';
import { checkTensor, type Tensor } from '../core/tensor.js';
import type { SdpaOptions } from '../core/types.js';
import { validateAttnOptions, type SdpaProblem, type WindowSidesOption } from './common.js';
import { encodeSdpaNaive } from './sdpa_naive.js';
import { encodeSdpaFlash, encodeSdpaFlashMma, flashMmaFor, flashTileFor, flashUnsupported, flashVariantFor, planFlash } from './flash.js';

const FLOAT_STORAGE = ['f32', 'f16', 'bf16'];
const OPTION_KEYS = new Set(['causal', 'scale', 'softcap', 'slidingWindow', 'windowBothSides', 'alibiSlopes', 'sinks', 'mask', 'backend']);

/** Validates q/k/v and options; returns the normalized problem. Throws before any GPU work. */
export function validateSdpa(op: string, q: Tensor, k: Tensor, v: Tensor, opts: SdpaOptions & WindowSidesOption): SdpaProblem {
  checkTensor(q, op, 'q');
  checkTensor(k, op, 'k');
  checkTensor(v, op, 'v');
  check(opts !== null && typeof opts === 'object', op, 'opts', 'an options object', opts);
  for (const key of Object.keys(opts)) {
    check(OPTION_KEYS.has(key), op, 'opts', `only ${[...OPTION_KEYS].join(', ')}`, `an unknown option '${key}'`);
  }
  check(q.shape.length === 4, op, 'q', 'shape [B, Hq, Lq, D]', shapeStr(q.shape));
  const [B, Hq, Lq, D] = q.shape;
  check(k.shape.length === 4, op, 'k', `shape [B=${B}, Hkv, Lk, D=${D}]`, shapeStr(k.shape));
  const [, Hkv, Lk] = k.shape;
  check(k.shape[0] === B && k.shape[3] === D && Hq % Hkv === 0, op, 'k',
    `shape [B=${B}, Hkv dividing Hq=${Hq}, Lk, D=${D}]`, shapeStr(k.shape));
  check(v.shape.length === 4 && v.shape[0] === B && v.shape[1] === Hkv && v.shape[2] === Lk, op, 'v',
    `shape [B=${B}, Hkv=${Hkv}, Lk=${Lk}, Dv]`, shapeStr(v.shape));
  const Dv = v.shape[3];
  check(FLOAT_STORAGE.includes(q.dtype), op, 'q.dtype', "'f32', 'f16' or 'bf16'", fmt(q.dtype));
  check(k.dtype === q.dtype, op, 'k.dtype', `'${q.dtype}' (the dtype of q)`, fmt(k.dtype));
  check(v.dtype === q.dtype, op, 'v.dtype', `'${q.dtype}' (the dtype of q)`, fmt(v.dtype));

  const { scale, causal, softcap, window, windowBothSides, alibi, sinks } = validateAttnOptions(op, opts, D, Hq);
  let mask: Tensor | null = null;
  let maskKind: SdpaProblem['maskKind'] = null;
  let maskStrides: [number, number, number, number] = [0, 0, 0, 0];
  if (opts.mask !== undefined) {
    checkTensor(opts.mask, op, 'opts.mask');
    mask = opts.mask;
    check(mask.dtype === 'u32' || mask.dtype === 'f32', op, 'opts.mask.dtype', "'u32' (bool, 1 = attend) or 'f32' (additive)", fmt(mask.dtype));
    maskKind = mask.dtype === 'u32' ? 'bool' : 'additive';
    check(mask.shape.length <= 4, op, 'opts.mask', `rank 1..4, broadcastable to [B=${B}, Hq=${Hq}, Lq=${Lq}, Lk=${Lk}]`, shapeStr(mask.shape));
    try {
      maskStrides = broadcastStrides(mask.shape, [B, Hq, Lq, Lk]) as [number, number, number, number];
    } catch {
      fail(op, 'opts.mask', `a shape broadcastable to [B=${B}, Hq=${Hq}, Lq=${Lq}, Lk=${Lk}]`, shapeStr(mask.shape));
    }
  }
  if (opts.backend !== undefined) {
    check(['auto', 'flash', 'naive'].includes(opts.backend), op, 'opts.backend', "'auto', 'flash' or 'naive'", fmt(opts.backend));
  }
  return { B, Hq, Hkv, Lq, Lk, D, Dv, scale, causal, softcap, window, windowBothSides, alibi, sinks, mask, maskKind, maskStrides };
}

export function sdpa(engine: Runtime, op: string, q: Tensor, k: Tensor, v: Tensor, opts: SdpaOptions & WindowSidesOption, withLse: boolean): { out: Tensor; lse: Tensor | null } {
  engine.assertAlive(op);
  const p = validateSdpa(op, q, k, v, opts ?? {});
  const backend = opts?.backend ?? 'auto';
  if (backend === 'naive') return encodeSdpaNaive(engine, p, q, k, v, withLse);
  const mma = flashMmaFor(engine, q.dtype, p.D, p.Dv, withLse);
  if (mma) return encodeSdpaFlashMma(engine, p, mma, q, k, v, withLse);
  const variant = flashVariantFor(engine);
  const why = flashUnsupported(p.D, p.Dv);
  const plan = why ? null : planFlash(engine.limits, engine.features, p.D, p.Dv, variant, engine.tuning.flashSmemBytes, engine.tuning.flashGrid, flashTileFor(engine, q.dtype));
  if (plan) return encodeSdpaFlash(engine, p, plan, q, k, v, withLse);
  const reason = why ?? `no ${variant} flash tile fits ${Math.min(engine.limits.maxComputeWorkgroupStorageSize, engine.tuning.flashSmemBytes)} bytes of workgroup storage`;
  if (backend === 'flash') fail(op, "opts.backend 'flash'", 'a problem the fused kernel serves', reason);
  engine.warnOnce(`${op}: backend 'auto' falls back to the naive kernel: ${reason}`);
  return encodeSdpaNaive(engine, p, q, k, v, withLse);
}
