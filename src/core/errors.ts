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
