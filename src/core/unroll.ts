// Unrolls WGSL `for` loops whose trip count is known from module-scope constants, before the source
// reaches the implementation. Why: naga (wgpu: Deno, Firefox) bounds every loop with a hidden counter
// of its own (`force_loop_bounding`, on by default since wgpu 25), and with that counter NVIDIA's
// compiler no longer unrolls constant-bound loops, so the register tiles our kernels index by the loop
// counter (function-scope arrays) are demoted to local memory: 5-20x slower than the same WGSL through
// Dawn on an H200 (bench/probes/codegen.mjs, bench/notes/flash.md). With literal indices both run at
// full speed, so the engine writes such loops out where the implementation is wgpu.
//
// A loop is unrolled when its header is `for (var X = INIT; X OP BOUND; UPDATE)` with INIT and BOUND
// constant (literals and module-scope consts), UPDATE one of X++, X--, X += C, X -= C, X <<= C, X >>= C,
// at most MAX_TRIPS iterations, its body neither breaks, continues nor assigns X, and its body indexes
// a register array (a function-scope or parameter array, or a struct's array member; not workgroup or
// storage memory) with an expression of X: loops without one stay loops, which keeps the source small
// (software adapters compile large straight-line kernels very slowly). Each copy is its
// own block that starts `let X = <value>;` (not `const`: an index out of range in a copy a run-time
// condition guards must not become a compile error). Nested loops unroll from the outside in, until
// the source would grow past MAX_GROWTH times its size.

const MAX_TRIPS = 64;
const MAX_GROWTH = 8;

type Num = number | boolean;

/** Evaluates a WGSL constant expression of integer literals, named constants, arithmetic, comparisons,
 *  min/max/select; null if anything else appears (a function-local name, a float, a call). */
export function evalConst(expr: string, consts: ReadonlyMap<string, Num>): Num | null {
  const toks = expr.match(/\d+[iu]?|[A-Za-z_]\w*|<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%()<>!,&|^]/g);
  if (!toks || toks.join('') !== expr.replace(/\s+/g, '')) return null;
  let i = 0;
  const peek = () => toks[i];
  const next = () => toks[i++];
  const num = (v: Num): number => (typeof v === 'boolean' ? (v ? 1 : 0) : v);
  const binary: readonly (readonly string[])[] = [['||'], ['&&'], ['|'], ['^'], ['&'], ['==', '!='], ['<', '<=', '>', '>='], ['<<', '>>'], ['+', '-'], ['*', '/', '%']];
  const apply = (op: string, a: Num, b: Num): Num | null => {
    const x = num(a), y = num(b);
    switch (op) {
      case '||': return !!a || !!b;
      case '&&': return !!a && !!b;
      case '|': return x | y;
      case '^': return x ^ y;
      case '&': return x & y;
      case '==': return x === y;
      case '!=': return x !== y;
      case '<': return x < y;
      case '<=': return x <= y;
      case '>': return x > y;
      case '>=': return x >= y;
      case '<<': return x * 2 ** y;
      case '>>': return Math.floor(x / 2 ** y);
      case '+': return x + y;
      case '-': return x - y;
      case '*': return x * y;
      case '/': return y === 0 ? null : Math.trunc(x / y);
      case '%': return y === 0 ? null : x % y;
      default: return null;
    }
  };
  const parseLevel = (level: number): Num | null => {
    if (level === binary.length) return parseUnary();
    let a = parseLevel(level + 1);
    while (a !== null && binary[level].includes(peek())) {
      const op = next();
      const b = parseLevel(level + 1);
      if (b === null) return null;
      a = apply(op, a, b);
    }
    return a;
  };
  const parseUnary = (): Num | null => {
    const t = next();
    if (t === undefined) return null;
    if (t === '-') { const v = parseUnary(); return v === null ? null : -num(v); }
    if (t === '!') { const v = parseUnary(); return v === null ? null : !v; }
    if (t === '(') {
      const v = parseLevel(0);
      return next() === ')' ? v : null;
    }
    if (/^\d/.test(t)) return Number.parseInt(t, 10);
    if (t === 'true' || t === 'false') return t === 'true';
    if (t === 'min' || t === 'max' || t === 'select' || t === 'u32' || t === 'i32') {
      if (next() !== '(') return null;
      const args: Num[] = [];
      for (;;) {
        const v = parseLevel(0);
        if (v === null) return null;
        args.push(v);
        const sep = next();
        if (sep === ')') break;
        if (sep !== ',') return null;
      }
      if ((t === 'u32' || t === 'i32') && args.length === 1) return num(args[0]);
      if (t === 'min' && args.length === 2) return Math.min(num(args[0]), num(args[1]));
      if (t === 'max' && args.length === 2) return Math.max(num(args[0]), num(args[1]));
      if (t === 'select' && args.length === 3) return args[2] ? args[1] : args[0];
      return null;
    }
    return consts.has(t) ? consts.get(t)! : null;
  };
  const v = parseLevel(0);
  return i === toks.length ? v : null;
}

/** Module-scope `const NAME[: type] = EXPR;` declarations that evaluate to integers or booleans. */
export function moduleConsts(source: string): Map<string, Num> {
  const consts = new Map<string, Num>();
  for (const m of source.matchAll(/^const\s+(\w+)\s*(?::\s*\w+)?\s*=\s*([^;]*);/gm)) {
    const v = evalConst(m[2], consts);
    if (v !== null) consts.set(m[1], v);
  }
  return consts;
}

/** Index of the brace closing the one at `open`, skipping comments; -1 if unbalanced. */
function closingBrace(src: string, open: number): number {
  let depth = 0;
  for (let i = open; i < src.length; i++) {
    const c = src[i];
    if (c === '/' && src[i + 1] === '/') {
      const nl = src.indexOf('\n', i);
      if (nl < 0) return -1;
      i = nl;
    } else if (c === '{') depth++;
    else if (c === '}' && --depth === 0) return i;
  }
  return -1;
}

/** `body` without the bodies of the loops nested in it (a break or continue there is theirs). */
function outsideNestedLoops(body: string): string {
  const text = body.replace(/\/\/[^\n]*/g, '');
  let out = '';
  let i = 0;
  for (const m of text.matchAll(/\b(for|loop|while)\b/g)) {
    if (m.index < i) continue;
    const open = text.indexOf('{', m.index);
    const close = open < 0 ? -1 : closingBrace(text, open);
    if (close < 0) return text;
    out += text.slice(i, m.index);
    i = close + 1;
  }
  return out + text.slice(i);
}

const HEADER = /for\s*\(\s*var\s+(\w+)\s*(?::\s*(\w+))?\s*=\s*([^;]+);\s*\1\s*(<=|>=|<|>|!=)\s*([^;]+);\s*\1\s*(\+\+|--|\+=|-=|<<=|>>=)\s*([^)]*)\)\s*\{/g;

/** The values a loop's counter takes, or null when the header is not one this unroller takes. */
function tripValues(init: Num, cmp: string, bound: Num, op: string, step: Num | null): number[] | null {
  let x = Number(init);
  const b = Number(bound), s = step === null ? 1 : Number(step);
  const out: number[] = [];
  const holds = (v: number) => (cmp === '<' ? v < b : cmp === '<=' ? v <= b : cmp === '>' ? v > b : cmp === '>=' ? v >= b : v !== b);
  while (holds(x)) {
    out.push(x);
    if (out.length > MAX_TRIPS) return null;
    const y = op === '++' ? x + 1 : op === '--' ? x - 1 : op === '+=' ? x + s : op === '-=' ? x - s : op === '<<=' ? x * 2 ** s : Math.floor(x / 2 ** s);
    if (y === x) return null;
    x = y;
  }
  return out;
}

/** The WGSL type a counter is declared with: its annotation, else its initializer's literals, else i32. */
function counterType(annot: string | undefined, init: string, bound: string, consts: string): 'u32' | 'i32' {
  if (annot === 'u32' || annot === 'i32') return annot;
  const lit = (e: string) => (/\d+u\b/.test(e) ? 'u32' : /\d+i\b/.test(e) ? 'i32' : null);
  const constType = (e: string) => {
    const id = /^\s*([A-Za-z_]\w*)/.exec(e)?.[1];
    if (!id) return null;
    const m = new RegExp(`^const\\s+${id}\\s*:\\s*(u32|i32)`, 'm').exec(consts);
    return (m?.[1] as 'u32' | 'i32' | undefined) ?? null;
  };
  return lit(init) ?? constType(init) ?? lit(bound) ?? constType(bound) ?? 'i32';
}

/** Names declared `NAME: array<...>` other than module-scope `var<...>` declarations: function-scope
 *  arrays, array parameters and struct members (what lives in registers). */
export function registerArrays(source: string): Set<string> {
  const all = new Set([...source.matchAll(/\b(\w+)\s*:\s*array</g)].map((m) => m[1]));
  for (const m of source.matchAll(/var<[^>]*>\s+(\w+)\s*:\s*array</g)) all.delete(m[1]);
  return all;
}

/**
 * `source` with its constant-bound loops written out (see the header). Returns the source unchanged
 * where nothing qualifies.
 */
export function unrollConstLoops(source: string): string {
  const consts = moduleConsts(source);
  const arrays = [...registerArrays(source)];
  const indexes = (body: string, name: string) => arrays.some((a) => new RegExp(`\\b${a}\\s*\\[[^\\]]*\\b${name}\\b`).test(body));
  const limit = source.length * MAX_GROWTH;
  let src = source;
  let from = 0;
  for (;;) {
    HEADER.lastIndex = from;
    const m = HEADER.exec(src);
    if (!m) return src;
    const [header, name, annot, initE, cmp, boundE, op, stepE] = m;
    const open = m.index + header.length - 1;
    const close = closingBrace(src, open);
    const skip = () => { from = m.index + header.length; };
    if (close < 0) return src;
    const body = src.slice(open + 1, close);
    const init = evalConst(initE, consts), bound = evalConst(boundE, consts);
    const step = stepE.trim() ? evalConst(stepE, consts) : null;
    const assigns = new RegExp(`\\b${name}\\s*(=[^=]|\\+\\+|--|[-+*/%&|^]=|<<=|>>=)`);
    if (!indexes(body, name) || init === null || bound === null || (stepE.trim() && step === null) || /\b(break|continue)\b/.test(outsideNestedLoops(body)) || assigns.test(body)) {
      skip();
      continue;
    }
    const values = tripValues(init, cmp, bound, op, step);
    if (!values) { skip(); continue; }
    const type = counterType(annot, initE, boundE, source);
    const copies = values.map((v) => `{ let ${name}: ${type} = ${v}${type === 'u32' ? 'u' : 'i'};${body}}`).join(' ');
    const next = src.slice(0, m.index) + copies + src.slice(close + 1);
    if (next.length > limit) { skip(); continue; }
    src = next;
    from = m.index;
  }
}
