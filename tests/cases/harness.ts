// The one test harness: cases are written once here and run by vitest (Node + dawn.node), by Playwright
// (Chromium page) and by Deno. A case throws to fail; it never depends on the runner.
import type { Engine, EngineOptions } from '../../src/index';
import { roundToDType, type DType } from '../../src/index';

export interface CaseContext {
  /** A shared engine created with poisonOutputs: true. */
  engine: Engine;
  /** 'node-swiftshader' | 'node-lavapipe' | 'chromium' | 'deno' | ... (set by the runner). */
  runtime: string;
  /** A fresh engine (for lifecycle tests that destroy or lose their device). */
  newEngine(opts?: Omit<EngineOptions, 'gpu'>): Promise<Engine>;
  /** Notes a path the runtime cannot take (the test still runs what it can). */
  note(message: string): void;
}

export interface TestCase {
  name: string;
  run(ctx: CaseContext): Promise<void>;
}

export function defineCases(suite: string, list: TestCase[]): TestCase[] {
  return list.map((c) => ({ ...c, name: `${suite} › ${c.name}` }));
}

// ------------------------------------------------------------------------------ seeded randomness

/** mulberry32: small, fast, and the same sequence in every runtime. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** n normal samples (Box-Muller), mean 0, standard deviation `std`, never all zero. */
export function randn(n: number, seed: number, std = 1): Float32Array {
  const r = rng(seed);
  const out = new Float32Array(n);
  for (let i = 0; i < n; i += 2) {
    const u = Math.max(r(), 1e-12);
    const v = r();
    const m = std * Math.sqrt(-2 * Math.log(u));
    out[i] = m * Math.cos(2 * Math.PI * v);
    if (i + 1 < n) out[i + 1] = m * Math.sin(2 * Math.PI * v);
  }
  return out;
}

export function randInt(n: number, seed: number, lo: number, hi: number): Int32Array {
  const r = rng(seed);
  return Int32Array.from({ length: n }, () => lo + Math.floor(r() * (hi - lo)));
}

/** Random data already rounded to what a tensor of `dtype` holds (the reference sees the same values). */
export function randFor(dtype: DType, n: number, seed: number, std = 1): Float32Array {
  return roundToDType(randn(n, seed, std), dtype);
}

// ---------------------------------------------------------------------------------- comparisons

export const TOLERANCE: Readonly<Record<string, { atol: number; rtol: number }>> = {
  f32: { atol: 5e-6, rtol: 5e-5 },
  f16: { atol: 5e-3, rtol: 5e-2 },
  bf16: { atol: 5e-3, rtol: 5e-2 },
  fp8e4m3: { atol: 2e-2, rtol: 1e-1 },
};

export interface CloseReport { worst: number; worstIndex: number; checked: number }

/**
 * SPEC §6: |out - ref| <= atol + rtol·|ref| elementwise; NaN/Inf never pass unless the reference holds
 * the same infinity (an lse of -inf). `skip(i)` excludes elements the reference leaves undefined.
 */
export function assertClose(what: string, actual: ArrayLike<number>, expected: ArrayLike<number>, dtype: string,
                            skip?: (i: number) => boolean): CloseReport {
  const tol = TOLERANCE[dtype];
  if (!tol) throw new Error(`assertClose: no tolerance for dtype ${dtype}`);
  if (actual.length !== expected.length) throw new Error(`${what}: length ${actual.length}, expected ${expected.length}`);
  let worst = 0;
  let worstIndex = -1;
  let checked = 0;
  for (let i = 0; i < actual.length; i++) {
    if (skip?.(i)) continue;
    checked++;
    const a = actual[i];
    const e = expected[i];
    if (!Number.isFinite(e)) {
      if (a !== e) throw new Error(`${what}[${i}]: got ${a}, expected ${e}`);
      continue;
    }
    if (!Number.isFinite(a)) throw new Error(`${what}[${i}]: got ${a} (non-finite), expected ${e}`);
    const err = Math.abs(a - e);
    const ratio = err / (tol.atol + tol.rtol * Math.abs(e));
    if (ratio > worst) { worst = ratio; worstIndex = i; }
  }
  if (worst > 1) {
    const i = worstIndex;
    throw new Error(`${what}: element ${i} = ${actual[i]}, expected ${expected[i]} (|err| ${Math.abs(actual[i] - expected[i]).toExponential(3)}, `
      + `${worst.toFixed(2)}× the ${dtype} tolerance atol ${tol.atol} + rtol ${tol.rtol}·|ref|)`);
  }
  if (checked === 0) throw new Error(`${what}: nothing was compared`);
  return { worst, worstIndex, checked };
}

export function assert(cond: unknown, message: string): asserts cond {
  if (!cond) throw new Error(message);
}

/** Expects `fn` to throw an error whose message contains every fragment. */
export async function expectThrows(fn: () => unknown, ...fragments: string[]): Promise<string> {
  let msg: string | null = null;
  try {
    await fn();
  } catch (e) {
    msg = (e as Error).message ?? String(e);
  }
  if (msg === null) throw new Error(`expected an error containing ${fragments.map((f) => `'${f}'`).join(', ')}, but nothing was thrown`);
  for (const f of fragments) {
    if (!msg.includes(f)) throw new Error(`error message lacks '${f}': ${msg}`);
  }
  return msg;
}

export function equalArrays(what: string, a: ArrayLike<number>, b: ArrayLike<number>): void {
  if (a.length !== b.length) throw new Error(`${what}: length ${a.length} vs ${b.length}`);
  for (let i = 0; i < a.length; i++) {
    if (!Object.is(a[i], b[i])) throw new Error(`${what}[${i}]: ${a[i]} vs ${b[i]}`);
  }
}
