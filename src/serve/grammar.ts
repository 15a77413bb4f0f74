// response_format for the OpenAI surface: `{ type: 'json_schema' }` and `{ type: 'json_object' }` constrain
// sampling so the completion is JSON that satisfies the schema. Each step the engine asks for a token mask
// (bit i set = token i may come next), samples among the allowed tokens and reports the one it took.
//
// Why no library: issue 29 asks for a maintained grammar library that runs in the browser, Deno and Node.
// The candidates, checked in November 2026:
//  - @mlc-ai/web-xgrammar 0.1.27 (xgrammar in wasm, WebLLM's; Apache-2.0) ships a UMD bundle inside a
//    `"type": "module"` package with the wasm inlined as base64 (1.1 MB of JS). `import` fails in Node 20
//    ("require is not defined in ES module scope": without `document` or `location` its wrapper calls
//    `require`), so Deno fails the same way; it only works after copying the file to .cjs. Its mask call is
//    also async (`getNextTokenBitmask(): Promise`), while the engine fills masks inside a synchronous step.
//    Through that .cjs copy it took 2.8 ms per token for a 32k vocabulary and 7.3 ms for 128k (synthetic
//    vocabularies, one CPU core of the development machine; this file: 0.01-1.7 ms, see below).
//  - llguidance (Microsoft's, behind vLLM and llama.cpp) publishes no npm or wasm build; outlines-core
//    neither. Nothing else on npm gives a per-step token mask for a JSON schema.
// So this file holds a compact matcher of its own, with no dependency and no wasm to bundle.
//
// How it works. A schema compiles to a graph of nodes (literal, string, number, array, object), a union
// being a list of alternative nodes. Matching is a nondeterministic pushdown automaton over UTF-16 code
// units: a configuration is an immutable stack of frames (node, state, counter, whitespace run), and the
// matcher keeps the set of configurations the text so far allows. The mask of a set is found by walking
// the vocabulary as a trie (built once per vocabulary) through the configurations, so tokens sharing a
// prefix share the work and a subtree is dropped as soon as no configuration survives it. A mask is the
// union of its configurations' shares (Share below): a frame's own tokens, cached per frame (string,
// number and literal frames per vocabulary, for every format), plus a walk of only the subtrees where the
// frame ends. Masks are cached per set of configurations in the compiled format (shared by every request
// that sends the same format to the same vocabulary), so a state met again costs a copy. Measured on
// synthetic 32k/128k vocabularies: the trie takes 0.1/0.4 s once; a first request averages 1/1.7 ms per
// token (a string body's share, met once per vocabulary, 7/40 ms), later ones 0.01-0.4 ms.
//
// Sound by construction, not complete: every completion satisfies the schema, but some valid documents
// cannot be produced. Object properties come in the schema's order, properties the schema does not name
// are never generated (whatever additionalProperties says), no whitespace precedes or follows the value,
// at most MAX_WS whitespace characters stand between two JSON tokens (punctuation, keys, values), and
// enum/const values are produced as JSON.stringify writes them. Keywords whose constraint this matcher does not enforce
// (pattern, format, minimum, oneOf, ...) are refused with a 400 naming the keyword, never ignored.
//
// Tokens whose decoded text holds U+FFFD (a byte-fallback token: part of a UTF-8 character) are ordinary
// characters here, so the model may emit them inside JSON strings, where any bytes decode to valid JSON.
// A non-ASCII character in an enum or a property name must come from tokens that decode to it whole.
import { check, fmt, isPosInt, jsonDepth, preview } from '../core/errors.js';
import { OpenAIError } from './errors.js';

export interface TokenVocabulary {
  size: number;
  /** The token's decoded text, '' for specials (they are never allowed). */
  tokenText(id: number): string;
  eosIds: number[];
}

export interface TokenConstraint {
  /** Fills `mask` (Uint32Array of ceil(size/32) words, bit i = token i allowed) for the next token. */
  fillMask(mask: Uint32Array): void;
  /** Advances by a sampled token; false if it was not allowed. */
  accept(token: number): boolean;
  /** True once the value is complete and only EOS may follow. */
  readonly done: boolean;
}

/** Whitespace characters allowed in one gap between JSON tokens: enough for indented output, and a
 * model cannot stall on whitespace forever. */
const MAX_WS = 32;
/** Bytes of each mask cache (a format's masks, its object and array shares, a vocabulary's shared ones): 8 MiB, 512 masks of a 128k vocabulary. */
const MASK_CACHE_BYTES = 8 << 20;
/** Compiled formats remembered per vocabulary. */
const FORMATS_PER_VOCAB = 16;

// Bounds on one format's work, so that no request's schema holds the server (OpenAI's own limits on
// structured outputs are of the same order: 1,000 enum values, 120,000 characters of names and values,
// 5,000 properties). Past any of them the format is refused with a 400 before a step runs.
/** Grammar nodes one schema compiles to at most. */
export const MAX_SCHEMA_NODES = 8192;
/** enum and const values in one schema, all together. */
export const MAX_ENUM_VALUES = 1000;
/** Characters of property names and enum/const values (as JSON), all together. */
export const MAX_LITERAL_CHARS = 120_000;
/** Objects and arrays nested in a response_format at most. */
export const MAX_FORMAT_DEPTH = 64;
/** Milliseconds to compile a format and make its first mask; past it, a 400. */
export const COMPILE_BUDGET_MS = 2000;
/** Milliseconds for any later mask (the engine asks for one a step); past it, the request ends with a 400. */
export const MASK_BUDGET_MS = 1000;

/** The time the matcher's work in progress must end by (Infinity: none), and how it is polled. */
let deadline = Infinity;
let ticks = 0;
let budgetFor = '';

/** Runs fn with a time budget; the matcher throws an OpenAIError (400, response_format) once it is spent. */
function withBudget<T>(ms: number, what: string, fn: () => T): T {
  const outer = deadline, outerWhat = budgetFor;
  deadline = performance.now() + ms;
  budgetFor = what;
  try {
    return fn();
  } finally {
    deadline = outer;
    budgetFor = outerWhat;
  }
}

/** Runs fn with its errors naming `param` (the field the grammar came from). */
function forParam<T>(param: string, fn: () => T): T {
  const outer = errorParam;
  errorParam = param;
  try {
    return fn();
  } finally {
    errorParam = outer;
  }
}

/** The request field a grammar comes from, which its errors name: response_format, or tool_choice for a forced call. */
let errorParam = 'response_format';

function overBudget(): never {
  const what = budgetFor;
  deadline = Infinity;
  throw new OpenAIError(`create: ${errorParam}: expected a format whose ${what}, got one that took longer (simplify the schema: fewer alternatives, enum values or nested unions)`,
    { status: 400, param: errorParam, code: `${errorParam}_too_complex` });
}

// ---------------------------------------------------------------------------------------------------
// Grammar nodes and the matcher

interface NodeBase {
  id: number;
  /** Some finite text completes it (a schema that only nests forever is never entered). */
  productive: boolean;
  /** The frame a configuration starts the node in. */
  init: Frame;
}
interface LitNode extends NodeBase { kind: 'lit'; text: string; codes: number[] }
/** A quoted JSON string of min..max characters (cap: the count at which counting may stop). */
interface StrNode extends NodeBase { kind: 'str'; min: number; max: number; cap: number }
interface NumNode extends NodeBase { kind: 'num'; int: boolean }
interface ArrNode extends NodeBase { kind: 'arr'; item: GNode[]; min: number; max: number; cap: number; canItem: boolean }
interface Prop { key: LitNode; value: GNode[]; required: boolean }
/** Fixed properties in order (mapKey null), or any keys each with a `mapValue` value. */
interface ObjNode extends NodeBase {
  kind: 'obj';
  props: Prop[];
  /** cands[n]: the properties that may come next when the first n are passed. */
  cands: number[][];
  lastRequired: number;
  mapKey: StrNode | null;
  mapValue: GNode[];
  mapOk: boolean;
}
/** Parts one after another, each a union (a forced tool call: fixed text, the arguments' schema, fixed text).
 *  A sequence frame reads no character itself: close() replaces it by its next part's frames. */
interface SeqNode extends NodeBase { kind: 'seq'; parts: GNode[][] }
type GNode = LitNode | StrNode | NumNode | ArrNode | ObjNode | SeqNode;

class Frame {
  constructor(readonly node: GNode, readonly s: number, readonly n: number, readonly w: number) {}
}

class Stack {
  key = '';
  constructor(readonly f: Frame, readonly up: Stack | null) {}
}

function stackKey(st: Stack): string {
  if (st.key === '') {
    const f = st.f;
    st.key = `${f.node.id}.${f.s}.${f.n}.${f.w}` + (st.up ? '/' + stackKey(st.up) : '');
  }
  return st.key;
}

const isWs = (c: number): boolean => c === 32 || c === 10 || c === 13 || c === 9;
const isDigit = (c: number): boolean => c >= 48 && c <= 57;
const isHex = (c: number): boolean => isDigit(c) || (c >= 65 && c <= 70) || (c >= 97 && c <= 102);

// Object and array states: 0 before the bracket; then (array) 1 after '[', 2 after an item, 3 after ',',
// 4 closed; (object) 1 after '{', 2 after ',', 3 after a key, 4 after ':', 5 after a value, 6 closed.
// String states: 0 before '"', 1 in the body, 2 after '\', 3-6 in \uXXXX, 7 closed.
// Number states: 0 start, 1 after '-', 2 a leading 0, 3 integer digits, 4 after '.', 5 fraction digits,
// 6 after 'e', 7 after the exponent's sign, 8 exponent digits.

function gap(f: Frame): Frame | null {
  return f.w < MAX_WS ? new Frame(f.node, f.s, f.n, f.w + 1) : null;
}

/** The frame after consuming code unit c, or null. Returns `f` itself when nothing changes. */
function trans(f: Frame, c: number): Frame | null {
  const node = f.node;
  const s = f.s;
  switch (node.kind) {
    case 'lit':
      return s < node.codes.length && node.codes[s] === c ? new Frame(node, s + 1, 0, 0) : null;
    case 'str': {
      const count = (n: number) => (n < node.cap ? n + 1 : n);
      if (s === 0) return c === 34 ? new Frame(node, 1, 0, 0) : null;
      if (s === 1) {
        if (c === 34) return f.n >= node.min ? new Frame(node, 7, f.n, 0) : null;
        if (c === 92) return f.n < node.max ? new Frame(node, 2, f.n, 0) : null;
        if (c < 32) return null;
        // A low surrogate ends the character its high surrogate already counted.
        if (c >= 0xdc00 && c <= 0xdfff) return f;
        if (f.n >= node.max) return null;
        const n = count(f.n);
        return n === f.n ? f : new Frame(node, 1, n, 0);
      }
      if (s === 2) {
        if (c === 117) return new Frame(node, 3, f.n, 0);
        return c === 34 || c === 92 || c === 47 || c === 98 || c === 102 || c === 110 || c === 114 || c === 116
          ? new Frame(node, 1, count(f.n), 0) : null;
      }
      if (s >= 3 && s <= 6) return isHex(c) ? new Frame(node, s === 6 ? 1 : s + 1, s === 6 ? count(f.n) : f.n, 0) : null;
      return null;
    }
    case 'num': {
      const d = isDigit(c);
      const e = !node.int && (c === 101 || c === 69);
      switch (s) {
        case 0: return c === 45 ? new Frame(node, 1, 0, 0) : c === 48 ? new Frame(node, 2, 0, 0) : d ? new Frame(node, 3, 0, 0) : null;
        case 1: return c === 48 ? new Frame(node, 2, 0, 0) : d ? new Frame(node, 3, 0, 0) : null;
        case 2: return !node.int && c === 46 ? new Frame(node, 4, 0, 0) : e ? new Frame(node, 6, 0, 0) : null;
        case 3: return d ? f : !node.int && c === 46 ? new Frame(node, 4, 0, 0) : e ? new Frame(node, 6, 0, 0) : null;
        case 4: return d ? new Frame(node, 5, 0, 0) : null;
        case 5: return d ? f : e ? new Frame(node, 6, 0, 0) : null;
        case 6: return c === 43 || c === 45 ? new Frame(node, 7, 0, 0) : d ? new Frame(node, 8, 0, 0) : null;
        case 7: return d ? new Frame(node, 8, 0, 0) : null;
        case 8: return d ? f : null;
      }
      return null;
    }
    case 'arr':
      if (s === 0) return c === 91 ? new Frame(node, 1, 0, 0) : null;
      if (s === 4) return null;
      if (isWs(c)) return gap(f);
      if (c === 93) return (s === 1 && node.min === 0) || (s === 2 && f.n >= node.min) ? new Frame(node, 4, f.n, 0) : null;
      if (c === 44 && s === 2 && f.n < node.max && node.canItem) return new Frame(node, 3, f.n, 0);
      return null;
    case 'obj':
      if (s === 0) return c === 123 ? new Frame(node, 1, 0, 0) : null;
      if (s === 6) return null;
      if (isWs(c)) return gap(f);
      if (s === 3) return c === 58 ? new Frame(node, 4, f.n, 0) : null;
      if (c === 125) {
        const closes = node.mapKey ? s === 1 || s === 5 : (s === 1 && node.lastRequired < 0) || (s === 5 && node.lastRequired < f.n);
        return closes ? new Frame(node, 6, 0, 0) : null;
      }
      if (c === 44 && s === 5 && (node.mapKey ? node.mapOk : node.cands[f.n].length > 0)) return new Frame(node, 2, f.n, 0);
      return null;
    case 'seq':
      return null;
  }
}

/** The frame can end here (the configuration pops it). */
function complete(f: Frame): boolean {
  const node = f.node;
  switch (node.kind) {
    case 'lit': return f.s === node.codes.length;
    case 'str': return f.s === 7;
    case 'num': return f.s === 2 || f.s === 3 || f.s === 5 || f.s === 8;
    case 'arr': return f.s === 4;
    case 'obj': return f.s === 6;
    case 'seq': return f.s === node.parts.length;
  }
}

/** The frame consumes no further character (only popping is left). */
function terminal(f: Frame): boolean {
  return f.node.kind === 'num' ? f.node.int && f.s === 2 : complete(f);
}

/** Set by close() when a configuration pops its last frame: the whole value is complete. */
let accepted = false;

/** Adds to `out` every configuration reachable from `st` without consuming a character. */
function close(st: Stack | null, out: Stack[]): void {
  if (st === null) {
    accepted = true;
    return;
  }
  const f = st.f;
  if (f.node.kind === 'seq') {
    // Never a configuration of its own: its next part begins here, or what is below it continues.
    if (f.s === f.node.parts.length) close(st.up, out);
    else pushAll(f.node.parts[f.s], new Frame(f.node, f.s + 1, 0, 0), st.up, out);
    return;
  }
  if (!terminal(f)) {
    if (out.indexOf(st) >= 0) return;
    out.push(st);
  }
  if (complete(f)) {
    close(st.up, out);
    return;
  }
  const node = f.node;
  if (node.kind === 'arr') {
    if ((f.s === 1 && node.max > 0) || f.s === 3) pushAll(node.item, new Frame(node, 2, f.n < node.cap ? f.n + 1 : f.n, 0), st.up, out);
  } else if (node.kind === 'obj') {
    if (f.s === 1 || f.s === 2) {
      if (node.mapKey) {
        if (node.mapOk) close(new Stack(node.mapKey.init, new Stack(new Frame(node, 3, 0, 0), st.up)), out);
      } else {
        for (const m of node.cands[f.s === 1 ? 0 : f.n]) close(new Stack(node.props[m].key.init, new Stack(new Frame(node, 3, m + 1, 0), st.up)), out);
      }
    } else if (f.s === 4) {
      pushAll(node.mapKey ? node.mapValue : node.props[f.n - 1].value, new Frame(node, 5, f.n, 0), st.up, out);
    }
  }
}

function pushAll(alts: GNode[], parent: Frame, up: Stack | null, out: Stack[]): void {
  const base = new Stack(parent, up);
  for (const a of alts) if (a.productive) close(new Stack(a.init, base), out);
}

/** The configurations after code unit c (sets `accepted`). */
function step(stacks: readonly Stack[], c: number): Stack[] {
  if ((ticks += stacks.length) >= 4096) {
    ticks = 0;
    if (performance.now() > deadline) overBudget();
  }
  accepted = false;
  const out: Stack[] = [];
  for (const st of stacks) {
    const f = trans(st.f, c);
    if (f !== null) close(f === st.f ? st : new Stack(f, st.up), out);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------
// Vocabulary trie: children as first-child / next-sibling lists, tokens chained per node.

interface Trie {
  first: Int32Array;
  next: Int32Array;
  code: Uint16Array;
  /** The first token whose text ends at the node, -1 if none; more in tokNext. */
  tok: Int32Array;
  tokNext: Int32Array;
  /** The longest token text, in code units: no token reads more characters than this. */
  maxLen: number;
  /** Bit c set: some token's text (EOS and specials aside) holds UTF-16 code unit c. */
  units: Uint8Array;
}

function buildTrie(vocab: TokenVocabulary): Trie {
  const eos = new Set(vocab.eosIds);
  const ids: number[] = [];
  const texts: string[] = new Array(vocab.size);
  for (let id = 0; id < vocab.size; id++) {
    const t = vocab.tokenText(id);
    check(typeof t === 'string', 'compileResponseFormat', `vocab.tokenText(${id})`, 'a string', t);
    texts[id] = t;
    if (t !== '' && !eos.has(id)) ids.push(id);
  }
  ids.sort((a, b) => (texts[a] < texts[b] ? -1 : texts[a] > texts[b] ? 1 : 0));
  let cap = 1024;
  let first = new Int32Array(cap).fill(-1);
  let next = new Int32Array(cap).fill(-1);
  let code = new Uint16Array(cap);
  let tok = new Int32Array(cap).fill(-1);
  const tokNext = new Int32Array(vocab.size).fill(-1);
  let count = 1;
  // Sorted texts: each token shares its longest common prefix with the previous one, so the path to
  // that prefix is reused and everything after it is new.
  const path = [0];
  let prev = '';
  for (const id of ids) {
    const t = texts[id];
    let l = 0;
    while (l < prev.length && l < t.length && prev.charCodeAt(l) === t.charCodeAt(l)) l++;
    for (let d = l; d < t.length; d++) {
      if (count === cap) {
        cap *= 2;
        const grow = (a: Int32Array<ArrayBuffer>): Int32Array<ArrayBuffer> => {
          const b = new Int32Array(cap).fill(-1);
          b.set(a);
          return b;
        };
        first = grow(first);
        next = grow(next);
        tok = grow(tok);
        const c = new Uint16Array(cap);
        c.set(code);
        code = c;
      }
      const node = count++;
      const parent = path[d];
      code[node] = t.charCodeAt(d);
      next[node] = first[parent];
      first[parent] = node;
      path[d + 1] = node;
    }
    const end = path[t.length];
    tokNext[id] = tok[end];
    tok[end] = id;
    prev = t;
  }
  const maxLen = ids.reduce((m, id) => Math.max(m, texts[id].length), 0);
  const units = new Uint8Array(65536);
  for (const id of ids) for (let i = 0; i < texts[id].length; i++) units[texts[id].charCodeAt(i)] = 1;
  return { first, next, code, tok, tokNext, maxLen, units };
}

function allow(trie: Trie, node: number, mask: Uint32Array): void {
  for (let t = trie.tok[node]; t >= 0; t = trie.tokNext[t]) mask[t >>> 5] |= 1 << (t & 31);
}

/** Sets the bits of the tokens below trie node `node` that the configurations can read. */
function walk(trie: Trie, node: number, stacks: readonly Stack[], mask: Uint32Array): void {
  for (let ch = trie.first[node]; ch >= 0; ch = trie.next[ch]) {
    const nx = step(stacks, trie.code[ch]);
    if (nx.length === 0 && !accepted) continue;
    allow(trie, ch, mask);
    if (nx.length > 0 && trie.first[ch] >= 0) walk(trie, ch, nx, mask);
  }
}

/**
 * One frame's share of a mask, whatever lies below it: the tokens it reads without ending (its children
 * included), and the trie nodes right after which it ends, where the rest of a token belongs to the
 * frames below. A mask is the union of its configurations' shares, so the expensive part of a string
 * body, most of the vocabulary, is walked once per vocabulary and not once per place a string stands.
 */
interface Share {
  mask: Uint32Array;
  ends: number[];
}

function shareWalk(trie: Trie, node: number, stacks: readonly Stack[], share: Share): void {
  for (let ch = trie.first[node]; ch >= 0; ch = trie.next[ch]) {
    const nx = step(stacks, trie.code[ch]);
    // Over a base of null, `accepted` means the frame itself ended with this character.
    if (accepted) share.ends.push(ch);
    if (nx.length === 0) continue;
    allow(trie, ch, share.mask);
    if (trie.first[ch] >= 0) shareWalk(trie, ch, nx, share);
  }
}

/** How far a count stands from its bounds, as far as one token can tell: a token reads at most `len`
 * characters, so counts further than that from both bounds give the same share. */
function room(n: number, min: number, max: number, len: number): string {
  return `${Math.max(0, min - n)},${Math.min(max - n, len + 1)}`;
}

/** A share's key when it depends on nothing of the format (so formats share it), else null. */
function sharedKey(f: Frame, len: number): string | null {
  const node = f.node;
  switch (node.kind) {
    case 'str': return `s${room(f.n, node.min, node.max, len)},${f.s}`;
    case 'num': return `n${node.int ? 1 : 0},${f.s}`;
    case 'lit': return `l${node.text.slice(f.s)}`;
    default: return null;
  }
}

/** A map that forgets its least recently used entries beyond `max`. */
class Lru<V> {
  private readonly map = new Map<string, V>();
  constructor(private readonly max: number) {}
  get(key: string): V | undefined {
    const v = this.map.get(key);
    if (v !== undefined) {
      this.map.delete(key);
      this.map.set(key, v);
    }
    return v;
  }
  set(key: string, v: V): void {
    this.map.set(key, v);
    while (this.map.size > this.max) this.map.delete(this.map.keys().next().value!);
  }
}

// ---------------------------------------------------------------------------------------------------
// Schema compilation

const ANNOTATIONS = new Set(['title', 'description', 'default', 'examples', '$schema', '$id', '$comment', 'deprecated', 'readOnly', 'writeOnly', '$defs', 'definitions']);
const KEYWORDS = new Set(['type', 'enum', 'const', 'properties', 'required', 'additionalProperties', 'items', 'minItems', 'maxItems', 'minLength', 'maxLength', 'anyOf', 'allOf', '$ref']);
const SUPPORTED = [...KEYWORDS].join(', ');
const TYPES = new Set(['object', 'array', 'string', 'number', 'integer', 'boolean', 'null']);
const WHY: Record<string, string> = {
  oneOf: 'oneOf needs exactly one alternative to match, which a token mask cannot promise; use anyOf',
  pattern: 'regular expressions are not enforced',
  format: 'string formats are not enforced',
  minimum: 'numeric bounds are not enforced', maximum: 'numeric bounds are not enforced',
  exclusiveMinimum: 'numeric bounds are not enforced', exclusiveMaximum: 'numeric bounds are not enforced',
  multipleOf: 'numeric bounds are not enforced', prefixItems: 'tuples are not supported; use items',
  nullable: "OpenAPI's nullable is not JSON Schema; use type: [..., 'null']",
};

const isObject = (x: unknown): x is Record<string, unknown> => typeof x === 'object' && x !== null && !Array.isArray(x);

function shown(x: unknown): string {
  return typeof x === 'string' ? fmt(x) : preview(x);
}

function bad(path: string, expected: string, got: unknown, why = ''): never {
  throw new OpenAIError(`create: ${path}: expected ${expected}, got ${shown(got)}${why ? ` (${why})` : ''}`, { status: 400, param: errorParam });
}

class Builder {
  readonly nodes: GNode[] = [];
  private readonly memo = new Map<object, GNode[]>();
  private readonly building = new Set<GNode[]>();
  private readonly resolving = new Set<object>();
  private readonly lits = new Map<string, LitNode>();
  private anyAlts: GNode[] | null = null;
  private anyObj: ObjNode | null = null;
  private enumValues = 0;
  private literalChars = 0;

  /** `missing(text)`: the first character of text no token of the vocabulary holds, or null. */
  constructor(private root: unknown, private rootPath: string, private readonly missing: (text: string) => string | null = () => null) {}

  /** fn compiled with `root` as the document its $refs point into (several tools' schemas in one grammar). */
  withRoot<T>(root: unknown, rootPath: string, fn: () => T): T {
    const was = [this.root, this.rootPath] as const;
    this.root = root;
    this.rootPath = rootPath;
    try {
      return fn();
    } finally {
      [this.root, this.rootPath] = was;
    }
  }

  private add<T extends GNode>(node: Omit<T, 'id' | 'init'>): T {
    if (this.nodes.length >= MAX_SCHEMA_NODES) bad(this.rootPath, `a schema of at most ${MAX_SCHEMA_NODES} parts (types, values, properties)`, 'a larger one');
    const full = node as T;
    full.id = this.nodes.length;
    full.init = new Frame(full, 0, 0, 0);
    this.nodes.push(full);
    return full;
  }

  /** A literal; `path` names where the schema asks for it (enum values and property names are counted). */
  lit(text: string, path?: string): LitNode {
    if (path !== undefined) {
      this.literalChars += text.length;
      if (this.literalChars > MAX_LITERAL_CHARS) bad(path, `at most ${MAX_LITERAL_CHARS} characters of property names and enum values in a schema`, 'more');
    }
    let node = this.lits.get(text);
    if (!node) {
      const gap = this.missing(text);
      if (gap !== null) bad(path ?? this.rootPath, "text the model's vocabulary can spell", text.length > 40 ? `${text.slice(0, 40)}…` : text, `no token holds ${JSON.stringify(gap)}, so the value could never be generated`);
      const codes: number[] = [];
      for (let i = 0; i < text.length; i++) codes.push(text.charCodeAt(i));
      node = this.add<LitNode>({ kind: 'lit', productive: true, text, codes });
      this.lits.set(text, node);
    }
    return node;
  }

  str(min: number, max: number): StrNode {
    return this.add<StrNode>({ kind: 'str', productive: true, min, max, cap: Number.isFinite(max) ? max : min });
  }

  num(int: boolean): NumNode {
    return this.add<NumNode>({ kind: 'num', productive: true, int });
  }

  arr(item: GNode[], min: number, max: number): ArrNode {
    return this.add<ArrNode>({ kind: 'arr', productive: false, item, min, max, cap: Number.isFinite(max) ? max : min, canItem: false });
  }

  seq(parts: GNode[][]): SeqNode {
    return this.add<SeqNode>({ kind: 'seq', productive: false, parts });
  }

  obj(props: Prop[], mapValue: GNode[] | null): ObjNode {
    return this.add<ObjNode>({
      kind: 'obj', productive: false, props, cands: [], lastRequired: -1,
      mapKey: mapValue ? this.str(0, Infinity) : null, mapValue: mapValue ?? [], mapOk: false,
    });
  }

  /** Any JSON value (the schema `true` or `{}`). */
  any(): GNode[] {
    if (!this.anyAlts) {
      const alts: GNode[] = [];
      this.anyAlts = alts;
      this.anyObj = this.obj([], alts);
      alts.push(this.anyObj, this.arr(alts, 0, Infinity), this.str(0, Infinity), this.num(false), this.lit('true'), this.lit('false'), this.lit('null'));
    }
    return this.anyAlts;
  }

  /** Any JSON object (json_object mode). */
  anyObject(): GNode[] {
    this.any();
    return [this.anyObj!];
  }

  /** A schema's alternatives. The list may still be filling when a schema refers to an enclosing one. */
  compile(schema: unknown, path: string): GNode[] {
    if (schema === true) return this.any();
    if (schema === false) bad(path, 'a schema some value satisfies', false);
    if (!isObject(schema)) bad(path, 'a JSON schema (an object)', schema);
    const hit = this.memo.get(schema);
    if (hit) return hit;
    for (const k of Object.keys(schema)) {
      if (!KEYWORDS.has(k) && !ANNOTATIONS.has(k)) bad(path, `only the keywords ${SUPPORTED} (and annotations)`, k, WHY[k] ?? 'not enforced by constrained decoding');
    }
    const constraining = Object.keys(schema).filter((k) => KEYWORDS.has(k));
    const only = (k: string) => {
      if (constraining.length > 1) bad(path, `${k} without other constraining keywords (put them into the referenced or alternative schemas)`, constraining);
    };
    if (schema.$ref !== undefined) {
      only('$ref');
      // A plain reference is the referenced schema's own list: a property may refer to an enclosing schema.
      if (this.resolving.has(schema)) bad(`${path}.$ref`, 'a reference that reaches a schema', schema.$ref, 'the references form a cycle');
      this.resolving.add(schema);
      const alts = this.compile(this.resolve(schema.$ref, `${path}.$ref`), `${path}.$ref`);
      this.resolving.delete(schema);
      this.memo.set(schema, alts);
      return alts;
    }
    const alts: GNode[] = [];
    this.memo.set(schema, alts);
    this.building.add(alts);
    const flat = (sub: unknown, p: string) => {
      const list = this.compile(sub, p);
      if (this.building.has(list)) bad(p, 'a schema that does not contain itself outside an object or array', 'a schema that contains itself', 'it would recurse without consuming text');
      for (const n of list) if (!alts.includes(n)) alts.push(n);
    };
    if (schema.anyOf !== undefined) {
      only('anyOf');
      if (!Array.isArray(schema.anyOf) || schema.anyOf.length === 0) bad(`${path}.anyOf`, 'a non-empty array of schemas', schema.anyOf);
      schema.anyOf.forEach((s, i) => flat(s, `${path}.anyOf[${i}]`));
    } else if (schema.allOf !== undefined) {
      only('allOf');
      if (!Array.isArray(schema.allOf) || schema.allOf.length !== 1) bad(`${path}.allOf`, 'an array of exactly one schema (intersections are not supported)', schema.allOf);
      flat(schema.allOf[0], `${path}.allOf[0]`);
    } else {
      this.typed(schema, path, alts);
    }
    this.building.delete(alts);
    return alts;
  }

  private types(schema: Record<string, unknown>, path: string): string[] {
    const t = schema.type;
    if (t === undefined) return [];
    const list = typeof t === 'string' ? [t] : t;
    if (!Array.isArray(list) || list.length === 0 || !list.every((x) => typeof x === 'string' && TYPES.has(x)) || new Set(list).size !== list.length) {
      bad(`${path}.type`, `one of ${[...TYPES].join(', ')} or a non-empty array of distinct ones`, t);
    }
    return list as string[];
  }

  private count(schema: Record<string, unknown>, path: string, minKey: string, maxKey: string): [number, number] {
    const min = schema[minKey] ?? 0;
    const max = schema[maxKey] ?? Infinity;
    if (!(typeof min === 'number' && Number.isInteger(min) && min >= 0)) bad(`${path}.${minKey}`, 'a non-negative integer', min);
    if (!(max === Infinity || (typeof max === 'number' && Number.isInteger(max) && max >= 0))) bad(`${path}.${maxKey}`, 'a non-negative integer', max);
    if ((min as number) > (max as number)) bad(`${path}.${maxKey}`, `at least ${minKey} (${min})`, max);
    return [min as number, max as number];
  }

  /** Fills `alts` from a schema of types, enum/const, and each type's keywords. */
  private typed(schema: Record<string, unknown>, path: string, alts: GNode[]): void {
    const declared = this.types(schema, path);
    if (schema.enum !== undefined || schema.const !== undefined) {
      const extra = Object.keys(schema).filter((k) => KEYWORDS.has(k) && k !== 'type' && k !== 'enum' && k !== 'const');
      if (extra.length > 0 || (schema.enum !== undefined && schema.const !== undefined)) {
        bad(path, 'enum or const with at most a type beside them', Object.keys(schema).filter((k) => KEYWORDS.has(k)));
      }
      const values = schema.const !== undefined ? [schema.const] : schema.enum;
      const where = schema.const !== undefined ? `${path}.const` : `${path}.enum`;
      if (!Array.isArray(values) || values.length === 0) bad(where, 'a non-empty array of values', values);
      this.enumValues += values.length;
      if (this.enumValues > MAX_ENUM_VALUES) bad(where, `at most ${MAX_ENUM_VALUES} enum and const values in a schema`, `${this.enumValues} so far`);
      const typeOf = (v: unknown) => (v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v === 'number' ? (Number.isInteger(v) ? 'integer' : 'number') : typeof v);
      const fits = (v: unknown) => declared.length === 0 || declared.includes(typeOf(v)) || (typeOf(v) === 'integer' && declared.includes('number'));
      for (const v of values) {
        if (!['null', 'boolean', 'number', 'integer', 'string', 'array', 'object'].includes(typeOf(v)) || (typeof v === 'number' && !Number.isFinite(v))) bad(where, 'JSON values', v);
        if (!fits(v)) continue;
        const node = this.lit(JSON.stringify(v), where);
        if (!alts.includes(node)) alts.push(node);
      }
      if (alts.length === 0) bad(where, `a value of type ${declared.join(' or ')}`, values);
      return;
    }
    const has = (...ks: string[]) => ks.some((k) => schema[k] !== undefined);
    let types = declared;
    if (types.length === 0) {
      // Without a type, each keyword family names the type it constrains; a value of that type is valid,
      // so generating only those is sound. No keyword at all: any value.
      if (has('properties', 'required', 'additionalProperties')) types.push('object');
      if (has('items', 'minItems', 'maxItems')) types.push('array');
      if (has('minLength', 'maxLength')) types.push('string');
      if (types.length === 0) {
        for (const n of this.any()) alts.push(n);
        return;
      }
    }
    if (types.includes('number')) types = types.filter((t) => t !== 'integer');
    for (const t of types) {
      if (t === 'null') alts.push(this.lit('null'));
      else if (t === 'boolean') alts.push(this.lit('true'), this.lit('false'));
      else if (t === 'integer' || t === 'number') alts.push(this.num(t === 'integer'));
      else if (t === 'string') {
        const [min, max] = this.count(schema, path, 'minLength', 'maxLength');
        alts.push(this.str(min, max));
      } else if (t === 'array') {
        const [min, max] = this.count(schema, path, 'minItems', 'maxItems');
        const items = schema.items;
        if (Array.isArray(items)) bad(`${path}.items`, 'one schema for every item', items, 'tuples are not supported');
        alts.push(this.arr(items === undefined ? this.any() : items === false ? [] : this.compile(items, `${path}.items`), min, items === false ? 0 : max));
      } else {
        alts.push(this.object(schema, path));
      }
    }
  }

  private object(schema: Record<string, unknown>, path: string): ObjNode {
    const props = schema.properties ?? {};
    if (!isObject(props)) bad(`${path}.properties`, 'an object of schemas', props);
    const required = schema.required ?? [];
    if (!Array.isArray(required) || !required.every((r) => typeof r === 'string') || new Set(required).size !== required.length) {
      bad(`${path}.required`, 'an array of distinct property names', required);
    }
    const addl = schema.additionalProperties;
    if (addl !== undefined && typeof addl !== 'boolean' && !isObject(addl)) bad(`${path}.additionalProperties`, 'a boolean or a schema', addl);
    const names = Object.keys(props);
    for (const r of required as string[]) {
      if (!names.includes(r)) bad(`${path}.required`, 'names defined in properties', r, 'a property without a schema cannot be generated');
    }
    if (names.length === 0 && addl !== false) {
      return this.obj([], addl === undefined || addl === true ? this.any() : this.compile(addl, `${path}.additionalProperties`));
    }
    // Named properties only: additional ones are allowed at most, so leaving them out is always valid.
    return this.obj(names.map((name) => ({
      key: this.lit(JSON.stringify(name), `${path}.properties.${name.length > 40 ? `${name.slice(0, 40)}…` : name}`),
      value: this.compile(props[name], `${path}.properties.${name}`),
      required: (required as string[]).includes(name),
    })), null);
  }

  /** A local JSON pointer ('#', '#/$defs/x') into the root schema. */
  private resolve(ref: unknown, path: string): unknown {
    if (typeof ref !== 'string' || !(ref === '#' || ref.startsWith('#/'))) bad(path, "a local reference ('#' or '#/...')", ref);
    let cur: unknown = this.root;
    if (ref === '#') return cur;
    for (const raw of ref.slice(2).split('/')) {
      let part: string;
      try {
        part = decodeURIComponent(raw).replaceAll('~1', '/').replaceAll('~0', '~');
      } catch {
        bad(path, 'a valid JSON pointer', ref);
      }
      if (!((isObject(cur) || Array.isArray(cur)) && Object.hasOwn(cur, part))) bad(path, `a reference to a schema inside ${this.rootPath}`, ref);
      cur = (cur as Record<string, unknown>)[part];
    }
    return cur;
  }

  /** Marks what can finish (a fixpoint: recursion may reach a node before its children are known). */
  finish(roots: GNode[], path: string): void {
    const prod = (alts: GNode[]) => alts.some((n) => n.productive);
    for (let changed = true; changed;) {
      changed = false;
      for (const n of this.nodes) {
        if (n.productive) continue;
        if ((n.kind === 'arr' && (n.min === 0 || prod(n.item))) || (n.kind === 'obj' && n.props.every((p) => !p.required || prod(p.value)))
          || (n.kind === 'seq' && n.parts.every(prod))) {
          n.productive = true;
          changed = true;
        }
      }
    }
    for (const n of this.nodes) {
      if (n.kind === 'arr') n.canItem = prod(n.item);
      if (n.kind !== 'obj') continue;
      n.mapOk = prod(n.mapValue);
      n.lastRequired = n.props.reduce((last, p, i) => (p.required ? i : last), -1);
      for (let start = 0; start <= n.props.length; start++) {
        const c: number[] = [];
        for (let m = start; m < n.props.length; m++) {
          if (prod(n.props[m].value)) c.push(m);
          if (n.props[m].required) break;
        }
        n.cands.push(c);
      }
    }
    if (!prod(roots)) bad(path, 'a schema some finite JSON value satisfies', 'one whose every value nests forever');
  }
}

// ---------------------------------------------------------------------------------------------------
// Compiled formats and constraints

interface VocabCache {
  trie: Trie;
  formats: Map<string, CompiledFormat>;
  /** Shares of string, number and literal frames, for every format. */
  shares: Lru<Share>;
}

class CompiledFormat {
  readonly words: number;
  private readonly trie: Trie;
  /** Masks by configuration set, and the shares of this format's object and array frames. */
  private readonly masks: Lru<Uint32Array>;
  private readonly shares: Lru<Share>;
  private readonly start: Stack[];
  constructor(readonly vocab: TokenVocabulary, private readonly cache: VocabCache, roots: GNode[], readonly param: string) {
    this.words = Math.ceil(vocab.size / 32);
    this.trie = cache.trie;
    this.masks = new Lru(masksFor(this.words));
    this.shares = new Lru(masksFor(this.words));
    accepted = false;
    const out: Stack[] = [];
    for (const r of roots) if (r.productive) close(new Stack(r.init, null), out);
    this.start = out;
  }

  constraint(): TokenConstraint {
    return new JsonConstraint(this, this.start);
  }

  private share(f: Frame): Share {
    const node = f.node;
    const shared = sharedKey(f, this.trie.maxLen);
    const cache = shared === null ? this.shares : this.cache.shares;
    const count = node.kind === 'arr' ? room(f.n, node.min, node.max, this.trie.maxLen) : f.n;
    const key = shared ?? `${node.id}.${f.s}.${count}.${f.w}`;
    let share = cache.get(key);
    if (!share) {
      share = { mask: new Uint32Array(this.words), ends: [] };
      shareWalk(this.trie, 0, [new Stack(f, null)], share);
      cache.set(key, share);
    }
    return share;
  }

  /** The mask of a configuration set (`key` names it; `acc`: the value may end here). */
  mask(key: string, stacks: readonly Stack[], acc: boolean): Uint32Array {
    let m = this.masks.get(key);
    if (m) return m;
    m = new Uint32Array(this.words);
    const trie = this.trie;
    for (const st of stacks) {
      const share = this.share(st.f);
      for (let i = 0; i < m.length; i++) m[i] |= share.mask[i];
      if (share.ends.length === 0) continue;
      // Where the frame ends, the frames below read the rest of the token.
      accepted = false;
      const below: Stack[] = [];
      close(st.up, below);
      if (below.length === 0 && !accepted) continue;
      for (const end of share.ends) {
        allow(trie, end, m);
        if (below.length > 0 && trie.first[end] >= 0) walk(trie, end, below, m);
      }
    }
    if (acc) for (const t of this.vocab.eosIds) m[t >>> 5] |= 1 << (t & 31);
    this.masks.set(key, m);
    return m;
  }

}

/** Masks a cache of MASK_CACHE_BYTES holds. */
function masksFor(words: number): number {
  return Math.max(64, Math.floor(MASK_CACHE_BYTES / (words * 4)));
}

class JsonConstraint implements TokenConstraint {
  private stacks: Stack[] = [];
  private acc = false;
  private key = '';
  private ended = false;
  private text = '';

  constructor(private readonly format: CompiledFormat, start: Stack[]) {
    this.set(start, false);
  }

  get done(): boolean {
    return this.ended || (this.acc && this.stacks.length === 0);
  }

  private set(stacks: Stack[], acc: boolean): void {
    // The same configuration reached twice (two alternatives that read alike) is kept once.
    const byKey = new Map<string, Stack>();
    for (const st of stacks) byKey.set(stackKey(st), st);
    const keys = [...byKey.keys()].sort();
    this.stacks = keys.map((k) => byKey.get(k)!);
    this.acc = acc;
    this.key = keys.join('|') + (acc ? '|$' : '');
  }

  fillMask(mask: Uint32Array): void {
    const { words, vocab } = this.format;
    check(mask instanceof Uint32Array && mask.length === words, 'TokenConstraint.fillMask', 'mask', `a Uint32Array of ${words} words (ceil(${vocab.size} / 32))`, mask);
    if (this.ended) {
      mask.fill(0);
      for (const t of vocab.eosIds) mask[t >>> 5] |= 1 << (t & 31);
      return;
    }
    const m = forParam(this.format.param, () => withBudget(MASK_BUDGET_MS, `every mask ends within ${MASK_BUDGET_MS} ms`, () => this.format.mask(this.key, this.stacks, this.acc)));
    mask.set(m);
    check(m.some((w) => w !== 0), 'TokenConstraint.fillMask', 'vocabulary', `a token that continues the JSON after ${shown(this.text.slice(-40))}`, 'none (the vocabulary cannot spell what the schema needs next)');
  }

  accept(token: number): boolean {
    const { vocab } = this.format;
    if (this.ended || !Number.isInteger(token) || token < 0 || token >= vocab.size) return false;
    if (vocab.eosIds.includes(token)) {
      if (!this.acc) return false;
      this.ended = true;
      return true;
    }
    const t = vocab.tokenText(token);
    if (t === '') return false;
    let stacks: Stack[] = this.stacks;
    for (let i = 0; i < t.length; i++) {
      stacks = step(stacks, t.charCodeAt(i));
      if (stacks.length === 0 && (!accepted || i < t.length - 1)) return false;
    }
    this.set(stacks, accepted);
    this.text += t;
    return true;
  }
}

const perVocab = new WeakMap<TokenVocabulary, VocabCache>();

function checkVocab(vocab: TokenVocabulary): void {
  const op = 'compileResponseFormat';
  check(isObject(vocab), op, 'vocab', 'a TokenVocabulary { size, tokenText, eosIds }', vocab);
  check(isPosInt(vocab.size), op, 'vocab.size', 'a positive integer', vocab.size);
  check(typeof vocab.tokenText === 'function', op, 'vocab.tokenText', 'a function', vocab.tokenText);
  check(Array.isArray(vocab.eosIds) && vocab.eosIds.length > 0 && vocab.eosIds.every((t) => Number.isInteger(t) && t >= 0 && t < vocab.size),
    op, 'vocab.eosIds', `a non-empty array of token ids below ${vocab.size}`, vocab.eosIds);
}

function onlyKeys(obj: Record<string, unknown>, path: string, keys: string[]): void {
  for (const k of Object.keys(obj)) if (!keys.includes(k)) bad(path, `only the fields ${keys.join(', ')}`, k);
}

/**
 * Compiles an OpenAI `response_format` for a vocabulary: null for text (or no format), else a factory of
 * fresh constraints (one per request and per `n` choice). A bad or unsupported format throws OpenAIError
 * (400, param 'response_format'). Pass the same vocabulary object for a model: the trie and the compiled
 * formats with their masks are kept per vocabulary object.
 */
export async function compileResponseFormat(format: unknown, vocab: TokenVocabulary): Promise<(() => TokenConstraint) | null> {
  if (format === undefined || format === null) return null;
  const rf = 'response_format';
  if (!isObject(format)) bad(rf, "an object { type: 'text' | 'json_object' | 'json_schema' }", format);
  if (format.type === 'text') {
    onlyKeys(format, rf, ['type']);
    return null;
  }
  if (format.type !== 'json_object' && format.type !== 'json_schema') bad(`${rf}.type`, "'text', 'json_object' or 'json_schema'", format.type);
  checkVocab(vocab);
  const deep = jsonDepth(format, MAX_FORMAT_DEPTH);
  if (deep.depth > MAX_FORMAT_DEPTH) bad(`${rf}.${deep.path}`, `a format nested at most ${MAX_FORMAT_DEPTH} deep`, 'one nested deeper');
  let text: string;
  try {
    text = JSON.stringify(format);
  } catch {
    bad(rf, 'JSON data', 'a value JSON cannot hold (a cycle or a BigInt)');
  }
  return compiled(vocab, text, rf, (missing) => {
    if (format.type === 'json_object') {
      onlyKeys(format, rf, ['type']);
      const builder = new Builder(null, rf);
      const roots = builder.anyObject();
      builder.finish(roots, rf);
      return roots;
    }
    onlyKeys(format, rf, ['type', 'json_schema']);
    const js = format.json_schema;
    const jp = `${rf}.json_schema`;
    if (!isObject(js)) bad(jp, '{ name, schema, description?, strict? }', js);
    onlyKeys(js, jp, ['name', 'description', 'schema', 'strict']);
    if (js.name !== undefined && !(typeof js.name === 'string' && /^[A-Za-z0-9_-]{1,64}$/.test(js.name))) bad(`${jp}.name`, 'letters, digits, _ or -, at most 64', js.name);
    if (js.description !== undefined && typeof js.description !== 'string') bad(`${jp}.description`, 'a string', js.description);
    if (js.strict !== undefined && js.strict !== null && typeof js.strict !== 'boolean') bad(`${jp}.strict`, 'a boolean', js.strict);
    if (!isObject(js.schema)) bad(`${jp}.schema`, 'a JSON schema object', js.schema);
    const builder = new Builder(js.schema, `${jp}.schema`, missing);
    const roots = builder.compile(js.schema, `${jp}.schema`);
    builder.finish(roots, `${jp}.schema`);
    return roots;
  });
}

/**
 * A compiled grammar from the vocabulary's cache by `key`, else built (`build`, given the vocabulary's
 * spelling check), its first mask made within COMPILE_BUDGET_MS, and cached; a factory of constraints.
 */
function compiled(vocab: TokenVocabulary, key: string, where: string, build: (missing: (t: string) => string | null) => GNode[]): () => TokenConstraint {
  let cache = perVocab.get(vocab);
  if (!cache) {
    cache = { trie: buildTrie(vocab), formats: new Map(), shares: new Lru(masksFor(Math.ceil(vocab.size / 32))) };
    perVocab.set(vocab, cache);
  }
  const units = cache.trie.units;
  const missing = (t: string): string | null => {
    for (let i = 0; i < t.length; i++) if (!units[t.charCodeAt(i)]) return t.codePointAt(i) !== undefined ? String.fromCodePoint(t.codePointAt(i)!) : t[i];
    return null;
  };
  let made = cache.formats.get(key);
  if (made) {
    cache.formats.delete(key);
  } else made = withBudget(COMPILE_BUDGET_MS, `compilation and first mask end within ${COMPILE_BUDGET_MS} ms`, () => {
    const f = new CompiledFormat(vocab, cache!, build(missing), errorParam);
    // The first mask now, within the budget: a format too costly to mask is refused before it is queued.
    try {
      f.constraint().fillMask(new Uint32Array(f.words));
    } catch (e) {
      if (e instanceof OpenAIError) throw e;
      bad(where, "a format the model's vocabulary can begin", 'one no token starts', (e as Error).message);
    }
    return f;
  });
  cache.formats.set(key, made);
  while (cache.formats.size > FORMATS_PER_VOCAB) cache.formats.delete(cache.formats.keys().next().value!);
  const c = made;
  return () => c.constraint();
}

/**
 * A forced tool call (tool_choice naming a function): `prefix`, then a JSON value of `schema` (the
 * function's parameters), then `suffix`, then end-of-sequence; the text around the arguments is the
 * chat template's call syntax (serve/tools.ts writes it). Errors are 400s naming `schemaPath` under
 * param 'tool_choice'. A factory of fresh constraints, as compileResponseFormat's.
 */
/** A forced call's fixed texts (non-empty) and its parameters' schema (an object, nested at most MAX_FORMAT_DEPTH deep). */
function checkToolCall(op: string, call: { prefix: string; schema: Record<string, unknown>; suffix: string; schemaPath: string }): void {
  const { prefix, schema, suffix, schemaPath } = call;
  check(typeof prefix === 'string' && prefix.length > 0 && typeof suffix === 'string' && suffix.length > 0, op, 'call', 'a non-empty prefix and suffix', call);
  if (!isObject(schema)) bad(schemaPath, 'a JSON schema object', schema);
  const deep = jsonDepth(schema, MAX_FORMAT_DEPTH);
  if (deep.depth > MAX_FORMAT_DEPTH) bad(`${schemaPath}.${deep.path}`, `a schema nested at most ${MAX_FORMAT_DEPTH} deep`, 'one nested deeper');
}

/**
 * Some one call among several (tool_choice 'required'): the alternatives of compileToolCall's sequences,
 * each with its own fixed text and parameters' schema, then EOS.
 */
export async function compileToolCalls(calls: readonly { prefix: string; schema: Record<string, unknown>; suffix: string; schemaPath: string }[], vocab: TokenVocabulary): Promise<() => TokenConstraint> {
  return forParam('tool_choice', () => {
    checkVocab(vocab);
    check(Array.isArray(calls) && calls.length > 0, 'compileToolCalls', 'calls', 'a non-empty array of calls', calls);
    for (const call of calls) checkToolCall('compileToolCalls', call);
    let key: string;
    try {
      key = `calls ${JSON.stringify(calls.map((c) => [c.prefix, c.suffix, c.schema]))}`;
    } catch {
      bad(calls[0].schemaPath, 'JSON data', 'a value JSON cannot hold (a cycle or a BigInt)');
    }
    return compiled(vocab, key, calls[0].schemaPath, (missing) => {
      const builder = new Builder(calls[0].schema, calls[0].schemaPath, missing);
      const roots = calls.map((c) => builder.withRoot(c.schema, c.schemaPath,
        () => builder.seq([[builder.lit(c.prefix)], builder.compile(c.schema, c.schemaPath), [builder.lit(c.suffix)]])));
      builder.finish(roots, calls[0].schemaPath);
      return roots;
    });
  });
}

export async function compileToolCall(call: { prefix: string; schema: Record<string, unknown>; suffix: string; schemaPath: string }, vocab: TokenVocabulary): Promise<() => TokenConstraint> {
  return forParam('tool_choice', () => {
    checkVocab(vocab);
    checkToolCall('compileToolCall', call);
    const { prefix, schema, suffix, schemaPath } = call;
    let key: string;
    try {
      key = `call ${JSON.stringify([prefix, suffix, schema])}`;
    } catch {
      bad(schemaPath, 'JSON data', 'a value JSON cannot hold (a cycle or a BigInt)');
    }
    return compiled(vocab, key, schemaPath, (missing) => {
      const builder = new Builder(schema, schemaPath, missing);
      const roots = [builder.seq([[builder.lit(prefix)], builder.compile(schema, schemaPath), [builder.lit(suffix)]])];
      builder.finish(roots, schemaPath);
      return roots;
    });
  });
}

