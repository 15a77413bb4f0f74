// Input validation: every message names the operation, the argument, what was expected and what came,
// and is thrown before any GPU work is recorded (API.md, "Errors").

export class WebinferError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'WebinferError';
  }
}

export function fmt(x: unknown): string {
  if (Array.isArray(x)) return `[${x.map(fmt).join(', ')}]`;
  if (ArrayBuffer.isView(x)) return `${x.constructor.name}(${(x as unknown as ArrayLike<unknown>).length})`;
  if (typeof x === 'string') return `'${x}'`;
  if (x === null) return 'null';
  if (typeof x === 'object') return x.constructor?.name ?? 'object';
  return String(x);
}

/** Throws `${op}: ${arg}: expected ${expected}, got ${actual}`. */
export function fail(op: string, arg: string, expected: string, actual: unknown): never {
  throw new WebinferError(`${op}: ${arg}: expected ${expected}, got ${typeof actual === 'string' ? actual : fmt(actual)}`);
}

export function check(cond: boolean, op: string, arg: string, expected: string, actual: unknown): asserts cond {
  if (!cond) fail(op, arg, expected, actual);
}

export function isPosInt(x: unknown): x is number {
  return typeof x === 'number' && Number.isInteger(x) && x > 0;
}

export function checkPosInt(x: unknown, op: string, arg: string): number {
  check(isPosInt(x), op, arg, 'a positive integer', x);
  return x as number;
}

export function checkFinite(x: unknown, op: string, arg: string): number {
  check(typeof x === 'number' && Number.isFinite(x), op, arg, 'a finite number', x);
  return x as number;
}

export function shapeStr(shape: readonly number[]): string {
  return `[${shape.join(', ')}]`;
}

export function numel(shape: readonly number[]): number {
  let n = 1;
  for (const s of shape) n *= s;
  return n;
}

/**
 * Refuses a key of `obj` that `allowed` does not list: a misspelt option (`maxTokens` for
 * `maxNewTokens`) would otherwise be ignored and the call run with the default. The message names the
 * key, the closest known one when there is one, and every known one:
 * `${op}: ${arg}: expected only the options a, b, c, got 'maxTokens' (did you mean 'maxNewTokens'?)`.
 */
export function checkKeys(op: string, arg: string, obj: object, allowed: readonly string[]): void {
  for (const key of Object.keys(obj)) {
    if (allowed.includes(key)) continue;
    const near = didYouMean(key, allowed);
    fail(op, arg, `only the options ${allowed.join(', ')}`, `'${key}'${near === null ? '' : ` (did you mean '${near}'?)`}`);
  }
}

/**
 * The name of `names` a user most likely meant by `word`: the same but for case, else the nearest by
 * edit distance when it is at most a third of the word (two edits for short ones), else one that
 * contains the word or is contained in it (`maxTokens` → `maxTokensPerStep`); null when none is close.
 */
export function didYouMean(word: string, names: readonly string[]): string | null {
  const w = word.toLowerCase();
  const same = names.find((n) => n.toLowerCase() === w);
  if (same !== undefined) return same;
  let best: string | null = null, bestD = Math.max(2, Math.floor(w.length / 3)) + 1;
  for (const n of names) {
    const d = editDistance(w, n.toLowerCase());
    if (d < bestD) { best = n; bestD = d; }
  }
  if (best !== null) return best;
  return w.length >= 3 ? names.find((n) => n.toLowerCase().includes(w) || w.includes(n.toLowerCase())) ?? null : null;
}

/** Levenshtein distance (insertions, deletions, substitutions), one row at a time. */
function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) row[j] = Math.min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = row;
  }
  return prev[b.length];
}
