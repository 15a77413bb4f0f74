// The one test harness: cases are written once here and run by vitest (Node + dawn.node), by Playwright
// (Chromium page) and by Deno. A case throws to fail; it never depends on the runner.
import type { Engine, EngineOptions } from '../../src/index';
import { compareToReference, randInt, randn, rng, roundToDType, TOLERANCES, type DType, type Tolerance } from '../../src/index';

export interface CaseContext {
  /** A shared engine created with poisonOutputs: true. */
  engine: Engine;
  /** 'node-swiftshader' | 'node-lavapipe' | 'chromium' | 'deno' | ... (set by the runner). */
  runtime: string;
  /** A fresh engine (for lifecycle tests that destroy or lose their device). */
  newEngine(opts?: Omit<EngineOptions, 'gpu'>): Promise<Engine>;
  /** Notes a path the runtime cannot take (the test still runs what it can). */
  note(message: string): void;
  /** A file of the shared folder beside the checkout (`goldens/llama-gqa/config.json`), read the way
   *  the runtime reads files (Node and Deno from disk, a page over HTTP). */
  fixture(path: string): Promise<Uint8Array>;
}

export interface TestCase {
  name: string;
  run(ctx: CaseContext): Promise<void>;
}

/** The adapter is SwiftShader (node-swiftshader; Chromium here). */
export function swiftShader(engine: Engine): boolean {
  const a = engine.adapter as { vendor?: string; architecture?: string; description?: string };
  return /swiftshader/i.test(`${a.vendor} ${a.architecture} ${a.description}`);
}

/** The software runtimes of the CI, in a fixed order (spreadOverSoftware). */
export const SOFTWARE_RUNTIMES = ['node-lavapipe', 'node-swiftshader', 'chromium', 'firefox', 'deno'] as const;

/**
 * On a software adapter, the share of `items` this runtime runs: item k goes to runtime k mod n of
 * `runtimes` (SOFTWARE_RUNTIMES unless given; none to a CI software runtime left out of them, every
 * item to a runtime the CI does not know), so that the CI's software runtimes together run every item
 * once while each compiles its share of the pipelines (each ggml type's decoder is its own pipeline,
 * 5-12 s to compile on lavapipe); on a GPU every item. The note says which ran.
 */
export function spreadOverSoftware<T>(ctx: CaseContext, items: readonly T[], what: string, name: (t: T) => string = String,
  runtimes: readonly string[] = SOFTWARE_RUNTIMES): T[] {
  if (!ctx.engine.adapter.software) return [...items];
  const at = runtimes.indexOf(ctx.runtime);
  if (at < 0) return (SOFTWARE_RUNTIMES as readonly string[]).includes(ctx.runtime) ? [] : [...items];
  const mine = items.filter((_, k) => k % runtimes.length === at);
  ctx.note(`${what}: this software runtime runs ${mine.map(name).join(', ') || 'none'} (the CI's software runtimes ${runtimes.join(', ')} share the ${items.length}; the GPU pass runs all)`);
  return mine;
}

/**
 * The software runtimes a whole-model golden runs on: one Node, one browser and one Deno runtime, all
 * three on lavapipe (Mesa 25 under Dawn; Debian's Mesa 22 under wgpu in Firefox and Deno). Compiling a
 * model's pipelines costs most of a case on a software adapter, and SwiftShader compiles them 3-4x
 * slower than lavapipe: node-swiftshader and the Chromium page (Dawn on SwiftShader, subgroups of 4)
 * run every kernel case, their shares of spreadOverSoftware, and the demo's Check of the goldens.
 */
export const GOLDEN_RUNTIMES = ['node-lavapipe', 'firefox', 'deno'] as const;

/**
 * Whether a whole-model golden runs here: on a GPU always, on a software adapter in GOLDEN_RUNTIMES
 * (Dawn and wgpu, in Node, a page and Deno; the other software runtimes run the same WGSL through
 * the same two compilers). Where it does not, the note says where it runs.
 */
export function goldenRunsHere(ctx: CaseContext, what = 'this golden'): boolean {
  if (!ctx.engine.adapter.software || (GOLDEN_RUNTIMES as readonly string[]).includes(ctx.runtime)) return true;
  if (!(SOFTWARE_RUNTIMES as readonly string[]).includes(ctx.runtime)) return true;
  ctx.note(`${what}: runs in ${GOLDEN_RUNTIMES.join(', ')} and on GPUs, not in ${ctx.runtime}`);
  return false;
}

/** Whole-model cases, run where goldenRunsHere says (the note names where else they run). */
export function wholeModelCases(list: TestCase[]): TestCase[] {
  return list.map((c) => ({
    ...c,
    run: async (ctx: CaseContext) => {
      if (goldenRunsHere(ctx, c.name.split(':')[0])) await c.run(ctx);
    },
  }));
}

/** Why the written-out (unrolled) kernels are not compiled on SwiftShader. */
export const UNROLL_SKIP = 'SwiftShader takes minutes and many GB to compile the kernels with their loops written out (the form wgpu gets over a GPU; bench/probes/swiftshader-unroll.mjs): every kernel runs that way in the Deno suite, and MLA\'s tile forced on lavapipe';

export function defineCases(suite: string, list: TestCase[]): TestCase[] {
  return list.map((c) => ({ ...c, name: `${suite} › ${c.name}` }));
}

// ------------------------------------------------------------------------------ seeded randomness

export { rng, randn, randInt };

/** Random data already rounded to what a tensor of `dtype` holds (the reference sees the same values). */
export function randFor(dtype: DType, n: number, seed: number, std = 1): Float32Array {
  return roundToDType(randn(n, seed, std), dtype);
}

// ---------------------------------------------------------------------------------- comparisons

export interface CloseReport { worst: number; worstIndex: number; checked: number }

/**
 * Optional observer of every assertClose comparison (worst error as a fraction of the tolerance,
 * Infinity for a NaN/Inf), pass or fail. The demo page sets it to show each case's worst error;
 * comparisons take no `ctx`, so it lives here. Runners that set none see no change.
 */
export const closeObserver: { onCompare?: (what: string, worst: number, dtype: string) => void } = {};

/** SPEC §6 through the library's own comparison; throws with the offending element. */
export function assertClose(what: string, actual: ArrayLike<number>, expected: ArrayLike<number>, dtype: string,
                            skip?: (i: number) => boolean): CloseReport {
  const tol = (TOLERANCES as Record<string, Tolerance>)[dtype];
  if (!tol) throw new Error(`assertClose: no tolerance for dtype ${dtype}`);
  const c = compareToReference(actual, expected, tol, skip);
  closeObserver.onCompare?.(what, c.badIndex >= 0 ? Infinity : c.worst, dtype);
  if (c.badIndex >= 0) {
    throw new Error(`${what}[${c.badIndex}]: got ${actual[c.badIndex]}, expected ${expected[c.badIndex]}`);
  }
  if (c.checked === 0) throw new Error(`${what}: nothing was compared`);
  if (!c.pass) {
    const i = c.worstIndex;
    throw new Error(`${what}: element ${i} = ${actual[i]}, expected ${expected[i]} (|err| ${Math.abs(actual[i] - expected[i]).toExponential(3)}, `
      + `${c.worst.toFixed(2)}× the ${dtype} tolerance atol ${tol.atol} + rtol ${tol.rtol}·|ref|)`);
  }
  return { worst: c.worst, worstIndex: c.worstIndex, checked: c.checked };
}

/**
 * SPEC §6 for inputs whose sums cancel far below their terms (f32 itself errs past the table there):
 * within the f32 tolerance, or within twice the error of a plain f32 implementation (sequential f32
 * sums, `plain()`) + 1e-5.
 */
export function assertWithinPlain(label: string, got: Float32Array, ref: Float64Array | Float32Array, plain: () => Float64Array | Float32Array): void {
  try {
    assertClose(label, got, ref, 'f32');
  } catch (e) {
    const pl = plain();
    let errGpu = 0, errPlain = 0;
    for (let j = 0; j < ref.length; j++) {
      errGpu = Math.max(errGpu, Math.abs(got[j] - ref[j]));
      errPlain = Math.max(errPlain, Math.abs(pl[j] - ref[j]));
    }
    if (!(errGpu <= 2 * errPlain + 1e-5)) throw new Error(`${(e as Error).message}; max error ${errGpu} > 2 × plain f32 ${errPlain} + 1e-5`);
  }
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

/** Runs fn with some engine.tuning values changed, restoring them afterwards (also on failure). */
export async function withTuning<T>(engine: Engine, t: Partial<Engine['tuning']>, fn: () => Promise<T>): Promise<T> {
  const saved = { ...engine.tuning };
  Object.assign(engine.tuning, t);
  try {
    return await fn();
  } finally {
    Object.assign(engine.tuning, saved);
  }
}

export function equalArrays(what: string, a: ArrayLike<number>, b: ArrayLike<number>): void {
  if (a.length !== b.length) throw new Error(`${what}: length ${a.length} vs ${b.length}`);
  for (let i = 0; i < a.length; i++) {
    if (!Object.is(a[i], b[i])) throw new Error(`${what}[${i}]: ${a[i]} vs ${b[i]}`);
  }
}
