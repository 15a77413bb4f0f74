// Input validation: every message names the operation, the argument, what was expected and what came,
// and is thrown before any GPU work is recorded (API.md, "Errors").

export class WebinferError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'WebinferError';
  }
}

/** Characters of a value a message quotes at most: a bad value of megabytes is named, not echoed. */
export const SHOWN_CHARS = 200;

/** A string cut to `max` characters, saying how long it was. */
function clip(s: string, max: number): string {
  return s.length <= max ? s : `${s.slice(0, max)}… (${s.length} characters)`;
}

/**
 * A value as a message names it: arrays item by item (nested at most 4 deep, at most 16 items shown),
 * strings quoted and cut to SHOWN_CHARS, objects by their class. Never recurses further than that, so
 * a value that a client nested 100,000 deep costs no more than a shallow one.
 */
export function fmt(x: unknown, depth = 0): string {
  if (Array.isArray(x)) {
    if (depth >= 4) return `[…${x.length} items]`;
    const shown = x.slice(0, 16).map((v) => fmt(v, depth + 1)).join(', ');
    return clip(`[${shown}${x.length > 16 ? `, … (${x.length} items)` : ''}]`, SHOWN_CHARS);
  }
  if (ArrayBuffer.isView(x)) return `${x.constructor.name}(${(x as unknown as ArrayLike<unknown>).length})`;
  if (typeof x === 'string') return `'${clip(x, SHOWN_CHARS)}'`;
  if (x === null) return 'null';
  if (typeof x === 'object') {
    const ctor = Object.hasOwn(x, 'constructor') ? undefined : (x as { constructor?: { name?: unknown } }).constructor;
    return typeof ctor?.name === 'string' && ctor.name ? ctor.name : 'object';
  }
  return String(x);
}

/**
 * A JSON value as a message quotes it: JSON text cut to `max` characters, nested at most 8 deep (deeper
 * parts read `…`). Written without JSON.stringify, which recurses as deep as the value does and throws
 * on a cycle or a BigInt: any value a client sends gets a short, finite quote.
 */
export function preview(x: unknown, max = SHOWN_CHARS): string {
  let out = '';
  const seen = new Set<object>();
  const put = (v: unknown, depth: number): void => {
    if (out.length > max) return;
    if (typeof v === 'string') { out += JSON.stringify(clip(v, max)); return; }
    if (typeof v === 'number' || typeof v === 'boolean') { out += String(v); return; }
    if (v === null) { out += 'null'; return; }
    if (typeof v === 'bigint') { out += `${v}n`; return; }
    if (typeof v !== 'object') { out += typeof v; return; }
    if (seen.has(v) || depth >= 8) { out += Array.isArray(v) ? '[…]' : '{…}'; return; }
    seen.add(v);
    if (Array.isArray(v)) {
      out += '[';
      for (let i = 0; i < v.length && out.length <= max; i++) { if (i) out += ','; put(v[i], depth + 1); }
      out += ']';
    } else if (ArrayBuffer.isView(v)) {
      out += `${v.constructor.name}(${(v as unknown as ArrayLike<unknown>).length})`;
    } else {
      out += '{';
      let first = true;
      for (const k of Object.keys(v)) {
        if (out.length > max) break;
        out += `${first ? '' : ','}${JSON.stringify(clip(k, max))}:`;
        first = false;
        put((v as Record<string, unknown>)[k], depth + 1);
      }
      out += '}';
    }
    seen.delete(v);
  };
  put(x, 0);
  return out.length > max ? `${out.slice(0, max)}…` : out;
}

/**
 * How deeply a JSON value nests (a scalar 0, `[]` 1, `[[1]]` 2), counted without recursion and stopping
 * once past `limit` (returns limit + 1 then), with the path to the deepest place it reached.
 */
export function jsonDepth(x: unknown, limit: number): { depth: number; path: string } {
  const stack: { v: unknown; d: number; path: string }[] = [{ v: x, d: 0, path: '' }];
  let best = { depth: 0, path: '' };
  while (stack.length) {
    const { v, d, path } = stack.pop()!;
    if (v === null || typeof v !== 'object' || ArrayBuffer.isView(v)) continue;
    if (d + 1 > best.depth) best = { depth: d + 1, path };
    if (d + 1 > limit) return { depth: best.depth, path: clip(best.path, SHOWN_CHARS) };
    // Only containers are pushed: a flat array of millions of numbers costs one pass and no memory.
    const inner = (x: unknown): boolean => x !== null && typeof x === 'object' && !ArrayBuffer.isView(x);
    if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) if (inner(v[i])) stack.push({ v: v[i], d: d + 1, path: `${path}[${i}]` });
    } else {
      for (const k of Object.keys(v)) {
        const x = (v as Record<string, unknown>)[k];
        if (inner(x)) stack.push({ v: x, d: d + 1, path: path ? `${path}.${k.length > 64 ? `${k.slice(0, 64)}…` : k}` : k });
      }
    }
  }
  return { depth: best.depth, path: clip(best.path, SHOWN_CHARS) };
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
