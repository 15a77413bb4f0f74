// One checker for dense SDPA cases, shared by every backend's case list: seeded inputs rounded to the
// storage dtype, the float64 reference, poisoned outputs (the engine poisons), SPEC §6 tolerances.
import type { Engine, SdpaBackend, Tensor } from '../../src/index';
import { reference, roundToDType } from '../../src/index';
import { assertClose, randFor, rng, type CloseReport } from './harness';

export interface SdpaSpec {
  B?: number; Hq?: number; Hkv?: number; Lq: number; Lk: number; D: number; Dv?: number;
  dtype?: 'f32' | 'f16' | 'bf16';
  causal?: boolean; scale?: number; softcap?: number; slidingWindow?: number;
  alibi?: boolean; sinks?: boolean;
  /** Mask shape (broadcastable to [B,Hq,Lq,Lk]), kind, and density of attended entries. */
  mask?: { shape: number[]; kind: 'bool' | 'additive'; keep?: number; emptyRows?: boolean };
  std?: number;
  /** Added to every value of v (v is standard normal before): values of one sign, whose sums no
   *  cancellation hides. */
  vMean?: number;
  /** false: run sdpa() (no LSE) and check out alone. Default true: sdpaWithLse(), out and lse. */
  lse?: boolean;
  seed: number;
}

export interface SdpaRun {
  out: Float32Array; lse: Float32Array;
  ref: { out: Float64Array; lse: Float64Array };
  reports: CloseReport[];
}

function maskData(spec: NonNullable<SdpaSpec['mask']>, seed: number, Lk: number): Float32Array {
  const n = spec.shape.reduce((a, b) => a * b, 1);
  const r = rng(seed);
  const keep = spec.keep ?? 0.7;
  const m = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    const on = r() < keep;
    if (spec.kind === 'bool') m[i] = on ? 1 : 0;
    else m[i] = on ? (r() - 0.5) * 4 : (r() < 0.5 ? -Infinity : -1e4);
  }
  if (spec.emptyRows) {
    // Every third row of the mask's last dim masks out all keys.
    const rowLen = spec.shape[spec.shape.length - 1];
    if (rowLen === Lk) for (let row = 0; row * rowLen < n; row += 3) m.fill(spec.kind === 'bool' ? 0 : -Infinity, row * rowLen, (row + 1) * rowLen);
  }
  return m;
}

/** Runs one SDPA problem on `backend` and checks out and lse against the float64 reference. */
export async function checkSdpa(engine: Engine, spec: SdpaSpec, backend: SdpaBackend = 'naive'): Promise<SdpaRun> {
  const { Lq, Lk, D, seed } = spec;
  const B = spec.B ?? 1, Hq = spec.Hq ?? 1, Hkv = spec.Hkv ?? Hq, Dv = spec.Dv ?? D;
  const dtype = spec.dtype ?? 'f32';
  const std = spec.std ?? 1;
  const q = randFor(dtype, B * Hq * Lq * D, seed, std);
  const k = randFor(dtype, B * Hkv * Lk * D, seed + 1, std);
  const v = randFor(dtype, B * Hkv * Lk * Dv, seed + 2);
  if (spec.vMean) v.set(roundToDType(v.map((x) => x + spec.vMean!), dtype));
  const r = rng(seed + 3);
  const alibi = spec.alibi ? Float32Array.from({ length: Hq }, (_, h) => 2 ** (-(8 * (h + 1)) / Hq)) : undefined;
  const sinks = spec.sinks ? Float32Array.from({ length: Hq }, () => (r() - 0.3) * 4) : undefined;
  const md = spec.mask ? maskData(spec.mask, seed + 4, Lk) : undefined;

  const tq = engine.tensor(q, [B, Hq, Lq, D], dtype);
  const tk = engine.tensor(k, [B, Hkv, Lk, D], dtype);
  const tv = engine.tensor(v, [B, Hkv, Lk, Dv], dtype);
  let tm: Tensor | undefined;
  if (spec.mask && md) {
    tm = spec.mask.kind === 'bool'
      ? engine.tensor(Uint32Array.from(md), spec.mask.shape, 'u32')
      : engine.tensor(md, spec.mask.shape, 'f32');
  }
  const opts = {
    causal: spec.causal, scale: spec.scale, softcap: spec.softcap, slidingWindow: spec.slidingWindow,
    alibiSlopes: alibi, sinks, mask: tm, backend,
  };
  const withLse = spec.lse ?? true;
  const res = withLse ? engine.sdpaWithLse(tq, tk, tv, opts) : { out: engine.sdpa(tq, tk, tv, opts), lse: null };
  const out = await res.out.toFloat32();
  const lse = res.lse ? await res.lse.toFloat32() : new Float32Array(0);
  for (const t of [tq, tk, tv, tm, res.out, res.lse]) t?.destroy();

  const refOpts = {
    causal: spec.causal, scale: spec.scale, softcap: spec.softcap, slidingWindow: spec.slidingWindow,
    alibiSlopes: alibi ? roundToDType(alibi, 'f32') : undefined, sinks: sinks ? roundToDType(sinks, 'f32') : undefined,
    mask: spec.mask && md ? { data: md, shape: spec.mask.shape, kind: spec.mask.kind } : undefined,
  };
  const ref = reference.sdpaRef(q, k, v, { B, Hq, Hkv, Lq, Lk, D, Dv }, refOpts);
  const tag = `${backend} ${dtype} B${B} Hq${Hq} Hkv${Hkv} Lq${Lq} Lk${Lk} D${D} Dv${Dv} seed ${seed}`;
  let reports: CloseReport[];
  try {
    reports = [assertClose(`out (${tag})`, out, ref.out, dtype)];
    if (withLse) reports.push(assertClose(`lse (${tag})`, lse, ref.lse, dtype));
  } catch (e) {
    // SPEC §6: with large scores (|scale·q·k| beyond ~10) f32 arithmetic itself errs past the table;
    // there the kernel's largest error may be twice a plain f32 implementation's, plus 1e-5.
    const scale = spec.scale ?? 1 / Math.sqrt(D);
    if (dtype !== 'f32' || maxScore(q, k, B, Hq, Hkv, Lq, Lk, D, scale) <= 10) throw e;
    const plain = reference.sdpaRef(q, k, v, { B, Hq, Hkv, Lq, Lk, D, Dv }, { ...refOpts, precision: 'f32' });
    const pairs = [['out', out, ref.out, plain.out], ['lse', lse, ref.lse, plain.lse]] as const;
    for (const [what, got, want, pl] of withLse ? pairs : pairs.slice(0, 1)) {
      let errGpu = 0, errPlain = 0;
      for (let i = 0; i < want.length; i++) {
        if (!Number.isFinite(want[i])) continue;   // empty rows: the table's check (lse -inf, out 0) already held
        errGpu = Math.max(errGpu, Math.abs(got[i] - want[i]));
        errPlain = Math.max(errPlain, Math.abs(pl[i] - want[i]));
      }
      if (!(errGpu <= 2 * errPlain + 1e-5)) {
        throw new Error(`${(e as Error).message}; large scores, and ${what}'s max error ${errGpu.toExponential(3)} > 2 × plain f32 ${errPlain.toExponential(3)} + 1e-5`);
      }
    }
    reports = [];
  }
  return { out, lse, ref, reports };
}

/** The largest |scale·q·k| of a problem, over every query and key (SPEC §6's "large scores"). */
function maxScore(q: Float32Array, k: Float32Array, B: number, Hq: number, Hkv: number, Lq: number, Lk: number, D: number, scale: number): number {
  let best = 0;
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < Hq; h++) {
      const g = Math.floor(h / (Hq / Hkv));
      for (let i = 0; i < Lq; i++) {
        const qo = ((b * Hq + h) * Lq + i) * D;
        for (let j = 0; j < Lk; j++) {
          const ko = ((b * Hkv + g) * Lk + j) * D;
          let dot = 0;
          for (let d = 0; d < D; d++) dot += q[qo + d] * k[ko + d];
          best = Math.max(best, Math.abs(scale * dot));
        }
      }
    }
  }
  return best;
}
