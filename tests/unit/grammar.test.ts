import { describe, expect, it } from 'vitest';
import { OpenAIError } from '../../src/serve/errors';
import { compileResponseFormat, compileToolCall, compileToolCalls, type TokenConstraint, type TokenVocabulary } from '../../src/serve/grammar';
import { forcedCallText, parseToolCalls } from '../../src/serve/tools';
import { rng } from '../../src/core/random';

// A byte-level vocabulary as a tokenizer decodes it: the 128 ASCII bytes as themselves, the other 128 as
// U+FFFD (part of a UTF-8 character), then multi-character tokens that cross JSON's structure, two
// specials that decode to nothing, and EOS.
const EXTRA = [
  '{"', '":', '",', '"}', '"]', '" ', ' "', '": "', '", "', '},', '}}', ']}', '[]', '{}', '[{', '"},', ': ', ', ',
  'true', 'false', 'null', 'tru', 'nul', 'name', 'age', 'tags', 'ok', 'kind', 'cat', 'catfish', 'dog', 'kids', 'v', 'street', 'zip',
  '12', '007', '3.5', 'e+', 'E-1', '-0', '.5e', '\\n', '\\"', '\\u00e9', '\\u', 'é', '日本', '😀', '\uD83D',
  '  ', '    ', '\n  ', '\n', ' \n', 'hello world', '"cat"', '"dog"}', '"a":1}', '1,', '2]', '0}', 'ab"c',
];
const SPECIAL = ['', ''];
const TEXTS = [...Array.from({ length: 256 }, (_, i) => (i < 128 ? String.fromCharCode(i) : '\uFFFD')), ...EXTRA, ...SPECIAL, ''];
const EOS = TEXTS.length - 1;
const vocab: TokenVocabulary = { size: TEXTS.length, tokenText: (id) => TEXTS[id], eosIds: [EOS] };
const WORDS = Math.ceil(vocab.size / 32);
const idOf = (text: string): number => {
  const id = TEXTS.indexOf(text);
  if (id < 0 || id >= 256 + EXTRA.length) throw new Error(`no token '${text}'`);
  return id;
};
const bit = (mask: Uint32Array, t: number): boolean => ((mask[t >>> 5] >>> (t & 31)) & 1) === 1;


type Schema = boolean | { [k: string]: unknown };

/** An independent check of a parsed value against the schema subset the matcher supports. */
function valid(v: unknown, s: Schema, root: Schema): boolean {
  if (s === true) return true;
  if (s === false) return false;
  if (typeof s.$ref === 'string') {
    let cur: unknown = root;
    if (s.$ref !== '#') for (const p of s.$ref.slice(2).split('/')) cur = (cur as Record<string, unknown>)[p];
    return valid(v, cur as Schema, root);
  }
  if (Array.isArray(s.anyOf)) return s.anyOf.some((a) => valid(v, a as Schema, root));
  if (Array.isArray(s.allOf)) return s.allOf.every((a) => valid(v, a as Schema, root));
  const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);
  if ('const' in s) return same(v, s.const);
  if (Array.isArray(s.enum)) return s.enum.some((e) => same(e, v));
  const type = v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v;
  if (s.type !== undefined) {
    const types = ([] as unknown[]).concat(s.type);
    const ok = types.some((t) => t === type || (t === 'integer' && Number.isInteger(v)));
    if (!ok) return false;
  }
  if (typeof v === 'string') {
    const len = [...v].length;
    if (len < ((s.minLength as number) ?? 0) || len > ((s.maxLength as number) ?? Infinity)) return false;
  }
  if (Array.isArray(v)) {
    if (v.length < ((s.minItems as number) ?? 0) || v.length > ((s.maxItems as number) ?? Infinity)) return false;
    if (s.items !== undefined && !v.every((x) => valid(x, s.items as Schema, root))) return false;
  }
  if (type === 'object') {
    const o = v as Record<string, unknown>;
    const props = (s.properties ?? {}) as Record<string, Schema>;
    if (Array.isArray(s.required) && !s.required.every((r) => Object.hasOwn(o, r))) return false;
    for (const [k, x] of Object.entries(o)) {
      if (Object.hasOwn(props, k)) {
        if (!valid(x, props[k], root)) return false;
      } else if (s.additionalProperties === false || (s.additionalProperties !== undefined && !valid(x, s.additionalProperties as Schema, root))) {
        return false;
      }
    }
  }
  return true;
}

/** A constraint that has read `tokens` (each must be accepted). */
function after(make: () => TokenConstraint, tokens: number[]): TokenConstraint {
  const c = make();
  for (const t of tokens) expect(c.accept(t)).toBe(true);
  return c;
}

/**
 * Samples allowed tokens until the constraint is done, half the time among tokens that close something
 * (so strings and arrays end), then takes EOS. Every `checkEvery` steps, each token's mask bit is compared
 * with what a constraint replayed to this point accepts.
 */
function sample(make: () => TokenConstraint, seed: number, checkEvery = 0): string {
  const rand = rng(seed);
  const c = make();
  const tokens: number[] = [];
  const mask = new Uint32Array(WORDS);
  let text = '';
  for (let step = 0; !c.done; step++) {
    if (step > 3000) throw new Error(`no end after 3000 tokens: ${text.slice(0, 200)}`);
    c.fillMask(mask);
    if (checkEvery > 0 && step % checkEvery === 0) {
      // accept() leaves the state alone when it refuses, so a replay is needed only after a success.
      const wrong: string[] = [];
      let replay = after(make, tokens);
      for (let t = 0; t < vocab.size; t++) {
        const took = replay.accept(t);
        if (took !== bit(mask, t)) wrong.push(`${JSON.stringify(TEXTS[t])}: mask ${bit(mask, t)}`);
        if (took) replay = after(make, tokens);
      }
      expect([text, wrong]).toEqual([text, []]);
    }
    let allowed: number[] = [];
    for (let t = 0; t < vocab.size; t++) if (bit(mask, t)) allowed.push(t);
    expect(allowed.length).toBeGreaterThan(0);
    if (rand() < 0.5) {
      const closing = allowed.filter((t) => t === EOS || /["\]}]/.test(TEXTS[t]));
      if (closing.length > 0) allowed = closing;
    }
    const t = allowed[Math.floor(rand() * allowed.length)];
    expect(c.accept(t)).toBe(true);
    tokens.push(t);
    if (t !== EOS) text += TEXTS[t];
  }
  // Done: only EOS remains, and it is accepted (unless EOS itself ended it).
  c.fillMask(mask);
  for (let t = 0; t < vocab.size; t++) expect(bit(mask, t)).toBe(t === EOS);
  if (tokens[tokens.length - 1] !== EOS) expect(c.accept(EOS)).toBe(true);
  return text;
}

const format = (schema: Schema) => ({ type: 'json_schema', json_schema: { name: 'test', schema } });

const PERSON = {
  type: 'object',
  properties: {
    name: { type: 'string', minLength: 1, maxLength: 12 },
    age: { type: 'integer' },
    score: { type: 'number' },
    ok: { type: 'boolean' },
    kind: { enum: ['cat', 'catfish', 'dog', 7, null] },
    tags: { type: 'array', items: { type: 'string' }, minItems: 1, maxItems: 3 },
    address: { type: 'object', properties: { street: { type: 'string' }, zip: { anyOf: [{ type: 'string' }, { type: 'null' }] } }, required: ['street'] },
    extra: { type: ['integer', 'null'] },
    fixed: { const: { a: [1, 'x'] } },
  },
  required: ['name', 'age', 'kind', 'tags', 'address'],
  additionalProperties: false,
};

const TREE = {
  $defs: { node: { type: 'object', properties: { v: { type: 'integer' }, kids: { type: 'array', items: { $ref: '#/$defs/node' }, maxItems: 2 } }, required: ['v', 'kids'] } },
  $ref: '#/$defs/node',
};

describe('compileResponseFormat', () => {
  it('samples documents that parse and satisfy the schema, with each mask bit equal to what accept takes', async () => {
    const make = (await compileResponseFormat(format(PERSON), vocab))!;
    for (let seed = 1; seed <= 10; seed++) {
      const text = sample(make, seed, seed <= 2 ? 6 : 0);
      const value = JSON.parse(text);
      expect([text, valid(value, PERSON, PERSON)]).toEqual([text, true]);
    }
  });

  it('handles recursion through $ref, any-value schemas and json_object', async () => {
    const cases: [unknown, (v: unknown) => boolean][] = [
      [format(TREE), (v) => valid(v, TREE, TREE)],
      [format({ type: 'object', properties: { any: {}, list: { type: 'array' }, map: { type: 'object', additionalProperties: { type: 'integer' } } }, required: ['any', 'list', 'map'] }),
        (v) => {
          const o = v as { any: unknown; list: unknown; map: Record<string, unknown> };
          return Array.isArray(o.list) && Object.values(o.map).every(Number.isInteger);
        }],
      [{ type: 'json_object' }, (v) => typeof v === 'object' && v !== null && !Array.isArray(v)],
      [format({ type: 'array', items: { type: 'number' } }), (v) => Array.isArray(v) && v.every((x) => typeof x === 'number')],
      [format({ type: 'string', maxLength: 3 }), (v) => typeof v === 'string' && [...v].length <= 3],
    ];
    for (const [f, ok] of cases) {
      const make = (await compileResponseFormat(f, vocab))!;
      for (let seed = 1; seed <= 6; seed++) {
        const text = sample(make, 100 + seed, seed === 1 ? 5 : 0);
        expect([text, ok(JSON.parse(text))]).toEqual([text, true]);
      }
    }
  });

  it('masks forbid what would break the grammar and allow what continues it', async () => {
    const make = (await compileResponseFormat(format(PERSON), vocab))!;
    const allowedAfter = (prefix: string[], token: string): boolean => {
      const mask = new Uint32Array(WORDS);
      after(make, prefix.map(idOf)).fillMask(mask);
      return bit(mask, idOf(token));
    };
    const start: string[] = [];
    // The value starts at once with its brace; EOS waits for the end.
    expect(['{', '{"', ' ', '[', '"', 'null'].map((t) => allowedAfter(start, t))).toEqual([true, true, false, false, false, false]);
    const c = make();
    const mask = new Uint32Array(WORDS);
    c.fillMask(mask);
    expect(bit(mask, EOS)).toBe(false);
    expect(c.accept(EOS)).toBe(false);
    expect(c.accept(idOf('['))).toBe(false);
    expect(c.accept(idOf('{'))).toBe(true);
    // Properties come in the schema's order: name first (required), not age.
    expect(['"', '" ', 'name', ' ', '}'].map((t) => allowedAfter(['{'], t))).toEqual([true, false, false, true, false]);
    const name = ['{"', 'name', '":', '"'];
    // Strings: minLength 1 forbids closing at once; raw control characters no, escapes yes; maxLength 12 counts.
    expect(['"', '"}', 'a', '\n', '\\n', '\\u00e9', 'é', '😀', '\uFFFD', 'hello world'].map((t) => allowedAfter(name, t)))
      .toEqual([false, false, true, false, true, true, true, true, true, true]);
    expect(['a', 'hello world', '"', '",'].map((t) => allowedAfter([...name, 'hello world', 'a'], t))).toEqual([false, false, true, true]);
    // Required age must follow name; integers take no fraction, exponent or leading zero.
    const named = [...name, 'v', '",'];
    expect(['"', 'age', ' "'].map((t) => allowedAfter(named, t))).toEqual([true, false, true]);
    const age = [...named, '"', 'age', '":'];
    expect(['1', '12', '-0', '007', '3.5', '"', 'null'].map((t) => allowedAfter(age, t))).toEqual([true, true, true, false, false, false, false]);
    expect(['0', '.', 'e+', ',', '}', '1,'].map((t) => allowedAfter([...age, '12'], t))).toEqual([true, false, false, true, false, true]);
    expect(['0', '1'].map((t) => allowedAfter([...age, '-0'], t))).toEqual([false, false]);
    // score (a number) may be skipped, since it is optional: the next key is score, ok or kind.
    const ageDone = [...age, '12', ','];
    expect(['"', 's', 'ok', 'kind', 'tags'].map((t) => allowedAfter([...ageDone, '"'], t))).toEqual([false, true, true, true, false]);
    const score = [...ageDone, '"', 's', 'c', 'o', 'r', 'e', '":'];
    expect(['3.5', '.5e', '-0'].map((t) => allowedAfter(score, t))).toEqual([true, false, true]);
    expect(['e+', 'E-1', '1'].map((t) => allowedAfter([...score, '3.5'], t))).toEqual([true, true, true]);
    // Enum members spelled exactly: "cat" may go on to "catfish"; 7 and null are members too.
    const kind = [...ageDone, '"', 'kind', '":'];
    expect(['"cat"', '"dog"}', '7', 'null', 'nul', 'true', '"'].map((t) => allowedAfter(kind, t))).toEqual([true, false, true, true, true, false, true]);
    expect(['f', 'i', '"'].map((t) => allowedAfter([...kind, '"', 'cat'], t))).toEqual([true, false, true]);
    // tags: minItems 1 forbids [] and maxItems 3 forbids a fourth item.
    const tags = [...kind, '"cat"', ',', '"', 'tags', '":'];
    expect(['[]', '[', '[{'].map((t) => allowedAfter(tags, t))).toEqual([false, true, false]);
    const three = [...tags, '[', '"', 'a', '",', '"', 'b', '",', '"', 'c', '"'];
    // ']}' would close the object too, but address is still required.
    expect([',', ']', '"]', ']}'].map((t) => allowedAfter(three, t))).toEqual([false, true, false, false]);
    // Whitespace: at most 32 characters in one gap.
    const spaces = Array<string>(16).fill('  ');
    expect(allowedAfter(['{', ...spaces.slice(1)], ' ')).toBe(true);
    expect(allowedAfter(['{', ...spaces], ' ')).toBe(false);
    expect(allowedAfter(['{', ...spaces], '"')).toBe(true);
  });

  it('ends exactly when the value is complete, with nothing after it', async () => {
    const make = (await compileResponseFormat(format({ type: 'object', properties: { a: { type: 'integer' } } }), vocab))!;
    const c = after(make, ['{"', 'a', '":', '1'].map(idOf));
    expect(c.done).toBe(false);
    expect(c.accept(idOf('0}'))).toBe(true);
    expect(c.done).toBe(true);
    expect(c.accept(idOf(' '))).toBe(false);
    expect(c.accept(idOf('\n'))).toBe(false);
    expect(c.accept(EOS)).toBe(true);
    expect(c.done).toBe(true);
    expect(c.accept(EOS)).toBe(false);
    // A token that completes the value and goes on is refused, and refusal leaves the state as it was.
    const d = after(make, ['{"', 'a', '":', '1'].map(idOf));
    expect(d.accept(idOf('}}'))).toBe(false);
    expect(d.accept(idOf('0}'))).toBe(true);
    expect(d.done).toBe(true);
    // A top-level number may end or go on: EOS is allowed but the constraint is not done.
    const num = (await compileResponseFormat(format({ type: 'integer' }), vocab))!;
    const n = after(num, [idOf('12')]);
    const mask = new Uint32Array(WORDS);
    n.fillMask(mask);
    expect([n.done, bit(mask, EOS), bit(mask, idOf('3'))]).toEqual([false, true, true]);
    // Specials (text '') are never allowed.
    expect(bit(mask, TEXTS.length - 2)).toBe(false);
    expect(n.accept(TEXTS.length - 2)).toBe(false);
    expect(n.accept(vocab.size)).toBe(false);
    expect(n.accept(-1)).toBe(false);
  });

  it('returns null for text, and the compiled format for a repeated one', async () => {
    expect(await compileResponseFormat({ type: 'text' }, vocab)).toBeNull();
    expect(await compileResponseFormat(undefined, vocab)).toBeNull();
    const a = (await compileResponseFormat(format(PERSON), vocab))!;
    const b = (await compileResponseFormat(format(PERSON), vocab))!;
    // Fresh constraints each call, independent of each other.
    const c1 = a();
    const c2 = b();
    expect(c1.accept(idOf('{'))).toBe(true);
    expect(c2.accept(idOf('{"'))).toBe(true);
    expect(c1.accept(idOf('{'))).toBe(false);
  });

  it('refuses bad and unsupported formats with a 400 naming the place', async () => {
    const cases: [unknown, string][] = [
      ['json', "create: response_format: expected an object { type: 'text' | 'json_object' | 'json_schema' }, got 'json'"],
      [{ type: 'xml' }, "create: response_format.type: expected 'text', 'json_object' or 'json_schema', got 'xml'"],
      [{ type: 'text', schema: {} }, "create: response_format: expected only the fields type, got 'schema'"],
      [{ type: 'json_schema' }, 'create: response_format.json_schema: expected { name, schema, description?, strict? }, got undefined'],
      [{ type: 'json_schema', json_schema: { name: 'x' } }, 'create: response_format.json_schema.schema: expected a JSON schema object, got undefined'],
      [{ type: 'json_schema', json_schema: { name: 'a b', schema: {} } }, "create: response_format.json_schema.name: expected letters, digits, _ or -, at most 64, got 'a b'"],
      [format({ type: 'string', pattern: '^a' }), "create: response_format.json_schema.schema: expected only the keywords type, enum, const, properties, required, additionalProperties, items, minItems, maxItems, minLength, maxLength, anyOf, allOf, $ref (and annotations), got 'pattern' (regular expressions are not enforced)"],
      [format({ type: 'object', properties: { n: { type: 'integer', minimum: 0 } } }), "create: response_format.json_schema.schema.properties.n: expected only the keywords"],
      [format({ oneOf: [{ type: 'string' }] }), "got 'oneOf' (oneOf needs exactly one alternative to match"],
      [format({ type: 'strin' }), 'create: response_format.json_schema.schema.type: expected one of object, array, string, number, integer, boolean, null'],
      [format({ type: 'object', properties: {}, required: ['a'] }), "create: response_format.json_schema.schema.required: expected names defined in properties, got 'a'"],
      [format({ type: 'array', minItems: 3, maxItems: 2 }), 'create: response_format.json_schema.schema.maxItems: expected at least minItems (3), got 2'],
      [format({ type: 'string', maxLength: -1 }), 'create: response_format.json_schema.schema.maxLength: expected a non-negative integer, got -1'],
      [format({ $ref: '#/$defs/missing' }), "create: response_format.json_schema.schema.$ref: expected a reference to a schema inside response_format.json_schema.schema, got '#/$defs/missing'"],
      [format({ $ref: 'http://x/s.json' }), "create: response_format.json_schema.schema.$ref: expected a local reference ('#' or '#/...'), got 'http://x/s.json'"],
      [format({ type: 'object', properties: { a: false } }), 'create: response_format.json_schema.schema.properties.a: expected a schema some value satisfies, got false'],
      [format({ enum: [] }), 'create: response_format.json_schema.schema.enum: expected a non-empty array of values, got []'],
      [format({ type: 'string', enum: [1, 2] }), 'create: response_format.json_schema.schema.enum: expected a value of type string, got [1,2]'],
      [format({ enum: ['a'], maxLength: 0 }), 'create: response_format.json_schema.schema: expected enum or const with at most a type beside them'],
      [format({ type: 'string', anyOf: [{ type: 'string' }] }), 'create: response_format.json_schema.schema: expected anyOf without other constraining keywords'],
      [format({ allOf: [{ type: 'string' }, { maxLength: 2 }] }), 'create: response_format.json_schema.schema.allOf: expected an array of exactly one schema'],
      [format({ $defs: { a: { anyOf: [{ $ref: '#/$defs/a' }, { type: 'null' }] } }, $ref: '#/$defs/a' }), 'expected a schema that does not contain itself outside an object or array'],
      [format({ $defs: { a: { $ref: '#/$defs/b' }, b: { $ref: '#/$defs/a' } }, $ref: '#/$defs/a' }), 'the references form a cycle'],
      [format({ type: 'object', properties: { next: { $ref: '#' } }, required: ['next'] }), 'create: response_format.json_schema.schema: expected a schema some finite JSON value satisfies'],
      [format({ type: 'array', items: [{ type: 'string' }] }), 'create: response_format.json_schema.schema.items: expected one schema for every item'],
    ];
    for (const [f, message] of cases) {
      const err = await compileResponseFormat(f, vocab).then(() => null, (e: unknown) => e);
      expect(err, message).toBeInstanceOf(OpenAIError);
      expect((err as OpenAIError).message).toContain(message);
      expect([(err as OpenAIError).status, (err as OpenAIError).param]).toEqual([400, 'response_format']);
    }
    // A schema that is recursive but can end is fine, and so is an optional self-reference.
    await expect(compileResponseFormat(format({ type: 'object', properties: { next: { $ref: '#' } } }), vocab)).resolves.toBeTypeOf('function');
  });

  it('names a vocabulary that cannot spell what comes next, and a mask of the wrong size', async () => {
    // A character no token holds: refused when the format is compiled, with the value's place.
    const small: TokenVocabulary = { size: 4, tokenText: (id) => ['"', 'a', 'b', ''][id], eosIds: [3] };
    const refused = await compileResponseFormat(format({ const: 'x' }), small).then(() => null, (e: unknown) => e);
    expect(refused).toBeInstanceOf(OpenAIError);
    expect((refused as OpenAIError).message).toBe(`create: response_format.json_schema.schema.const: expected text the model's vocabulary can spell, got '"x"' (no token holds "x", so the value could never be generated)`);
    expect((refused as OpenAIError).param).toBe('response_format');
    // Every character is held, but no token starts the value: refused when compiled too.
    const noStart: TokenVocabulary = { size: 3, tokenText: (id) => ['x"', '"y', ''][id], eosIds: [2] };
    await expect(compileResponseFormat(format({ const: 'x' }), noStart)).rejects.toThrow("expected a format the model's vocabulary can begin");
    // Every character is held and the value starts, but no token continues it: the mask says so.
    const stuck: TokenVocabulary = { size: 4, tokenText: (id) => ['"', 'x', 'y"x', ''][id], eosIds: [3] };
    const c = (await compileResponseFormat(format({ const: 'xy' }), stuck))!();
    const mask = new Uint32Array(1);
    c.fillMask(mask);
    expect(mask[0]).toBe(1);
    expect(c.accept(0)).toBe(true);
    c.fillMask(mask);
    expect(mask[0]).toBe(2);
    expect(c.accept(1)).toBe(true);
    expect(() => c.fillMask(mask)).toThrow(`TokenConstraint.fillMask: vocabulary: expected a token that continues the JSON after '"x', got none`);
    expect(() => c.fillMask(new Uint32Array(2))).toThrow('TokenConstraint.fillMask: mask: expected a Uint32Array of 1 words (ceil(4 / 32)), got Uint32Array(2)');
    await expect(compileResponseFormat({ type: 'json_object' }, { size: 4, tokenText: () => 'a', eosIds: [4] })).rejects.toThrow(
      'compileResponseFormat: vocab.eosIds: expected a non-empty array of token ids below 4, got [4]');
  });

  it('bounds a format before it runs: enum values, nesting, nodes, literal text; each refused fast with a 400 naming why', async () => {
    const refuse = async (f: unknown, message: string) => {
      const t0 = performance.now();
      const err = await compileResponseFormat(f, vocab).then(() => null, (e: unknown) => e);
      const ms = performance.now() - t0;
      expect(err, message).toBeInstanceOf(OpenAIError);
      expect((err as OpenAIError).message).toContain(message);
      expect([(err as OpenAIError).status, (err as OpenAIError).param]).toEqual([400, 'response_format']);
      // The refusal costs little whatever the size (the hostile review saw 16 s for a 10k enum).
      expect(ms, message).toBeLessThan(1500);
      // And the message quotes a bounded part of the format, not the whole.
      expect((err as OpenAIError).message.length, message).toBeLessThan(800);
    };
    const words = (n: number) => Array.from({ length: n }, (_, i) => `w${i.toString(36)}`);
    for (const n of [10_000, 30_000, 100_000]) await refuse(format({ enum: words(n) }), `at most 1000 enum and const values in a schema`);
    // Values spread over many properties count together.
    const props = Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`p${i}`, { enum: words(30) }]));
    await refuse(format({ type: 'object', properties: props }), 'at most 1000 enum and const values');
    // Nesting: 1,000 and 3,000 levels of properties are refused for their depth (not a stack overflow,
    // not another reason); 20 levels compile.
    const nest = (d: number): Schema => (d === 0 ? { type: 'string' } : { type: 'object', properties: { a: nest(d - 1) } });
    for (const d of [1000, 3000]) await refuse(format(nest(d)), 'expected a format nested at most 64 deep');
    await expect(compileResponseFormat(format(nest(20)), vocab)).resolves.toBeTypeOf('function');
    // Long property names and values count their characters.
    const long = Object.fromEntries(Array.from({ length: 200 }, (_, i) => [`${'k'.repeat(1000)}${i}`, { type: 'string' }]));
    await refuse(format({ type: 'object', properties: long }), 'at most 120000 characters of property names and enum values');
    // Many parts: 9,000 distinct string types in one anyOf.
    await refuse(format({ anyOf: Array.from({ length: 9000 }, (_, i) => ({ type: 'string', maxLength: i + 1 })) }), 'a schema of at most 8192 parts');
  });
});

describe('compileToolCall: a forced call (tool_choice naming a function) as a sequence: fixed text, the arguments\' schema, fixed text', () => {
  const WEATHER = {
    type: 'object',
    properties: { city: { type: 'string', minLength: 1, maxLength: 12 }, unit: { enum: ['c', 'f'] }, days: { type: 'integer' } },
    required: ['city', 'unit'],
  };

  it('samples replies that parse back as exactly one call of that function, arguments satisfying its parameters, in either format', async () => {
    for (const format of ['hermes', 'llama3'] as const) {
      const { prefix, suffix } = forcedCallText(format, 'get_weather');
      const make = await compileToolCall({ prefix, suffix, schema: WEATHER, schemaPath: 'tools[0].function.parameters' }, vocab);
      for (let seed = 1; seed <= 6; seed++) {
        const text = sample(make, seed, seed === 1 ? 5 : 0);
        expect(text.startsWith(prefix) && text.endsWith(suffix), text).toBe(true);
        const parsed = parseToolCalls(text, format);
        expect([text, parsed.content, parsed.toolCalls.length, parsed.toolCalls[0]?.function.name]).toEqual([text, null, 1, 'get_weather']);
        const args = JSON.parse(parsed.toolCalls[0]!.function.arguments);
        expect([text, valid(args, WEATHER, WEATHER)]).toEqual([text, true]);
      }
    }
  });

  it('allows only the fixed text where it stands, and nothing after the suffix but EOS', async () => {
    const make = await compileToolCall({ prefix: '<tool_call>\n{"name": "f", "arguments": ', suffix: '}\n</tool_call>', schema: { type: 'object', properties: {}, additionalProperties: false }, schemaPath: 'p' }, vocab);
    const c = make();
    const mask = new Uint32Array(WORDS);
    c.fillMask(mask);
    const allowed = (): string[] => TEXTS.flatMap((t, i) => (bit(mask, i) ? [i === EOS ? 'EOS' : t] : []));
    expect(allowed()).toEqual(['<']);
    expect(c.accept(idOf('{'))).toBe(false);
    for (const ch of '<tool_call>\n{"name": "f", "arguments": ') expect(c.accept(idOf(ch))).toBe(true);
    c.fillMask(mask);
    expect(allowed().sort()).toEqual(['{', '{}'].sort());
    expect(c.accept(idOf('{}'))).toBe(true);
    expect(c.done).toBe(false);
    for (const ch of '}\n</tool_call>') expect(c.accept(idOf(ch))).toBe(true);
    expect(c.done).toBe(true);
    c.fillMask(mask);
    expect(allowed()).toEqual(['EOS']);
  });

  it("refuses a schema it cannot enforce with a 400 on tool_choice naming the tool's parameters", async () => {
    const err = await compileToolCall({ prefix: 'a', suffix: 'b', schema: { type: 'object', properties: { x: { type: 'string', pattern: '^a' } } }, schemaPath: 'tools[2].function.parameters' }, vocab).catch((e) => e);
    expect(err).toBeInstanceOf(OpenAIError);
    expect([err.status, err.param]).toEqual([400, 'tool_choice']);
    expect(err.message).toContain('tools[2].function.parameters.properties.x');
    // A response_format's errors still name response_format.
    const rf = await compileResponseFormat(format({ type: 'string', pattern: 'x' }), vocab).catch((e) => e);
    expect(rf.param).toBe('response_format');
  });
});

describe("compileToolCalls: tool_choice 'required', some one call of any of the tools", () => {
  const TOOLS: { name: string; schema: Schema }[] = [
    { name: 'get_weather', schema: { type: 'object', properties: { city: { type: 'string', maxLength: 8 }, unit: { enum: ['c', 'f'] } }, required: ['city', 'unit'] } },
    { name: 'get_time', schema: { type: 'object', properties: { zone: { $ref: '#/$defs/zone' } }, required: ['zone'], $defs: { zone: { enum: ['utc', 'cet'] } } } },
    { name: 'ping', schema: { type: 'object', properties: {}, additionalProperties: false } },
  ];

  it('samples replies that parse back as exactly one call of one of the tools, its arguments satisfying that tool\'s parameters (each $ref in its own schema); every tool is reached', async () => {
    for (const format of ['hermes', 'llama3'] as const) {
      const calls = TOOLS.map((t, i) => ({ ...forcedCallText(format, t.name), schema: t.schema as Record<string, unknown>, schemaPath: `tools[${i}].function.parameters` }));
      const make = await compileToolCalls(calls, vocab);
      const seen = new Set<string>();
      for (let seed = 1; seed <= 30; seed++) {
        const text = sample(make, seed, seed <= 2 ? 7 : 0);
        const parsed = parseToolCalls(text, format);
        expect([text, parsed.content, parsed.toolCalls.length]).toEqual([text, null, 1]);
        const name = parsed.toolCalls[0]!.function.name;
        const tool = TOOLS.find((t) => t.name === name);
        expect([text, tool !== undefined]).toEqual([text, true]);
        const args = JSON.parse(parsed.toolCalls[0]!.function.arguments);
        expect([text, valid(args, tool!.schema, tool!.schema)]).toEqual([text, true]);
        seen.add(name);
      }
      expect([...seen].sort()).toEqual(TOOLS.map((t) => t.name).sort());
    }
  });

  it('allows only the calls\' common text, then one name: another function\'s name, free text and EOS are refused', async () => {
    const calls = TOOLS.map((t, i) => ({ ...forcedCallText('llama3', t.name), schema: t.schema as Record<string, unknown>, schemaPath: `tools[${i}].function.parameters` }));
    const c = (await compileToolCalls(calls, vocab))();
    for (const ch of '{"name": "get_') expect(c.accept(idOf(ch))).toBe(true);
    expect(c.accept(idOf('p'))).toBe(false);
    expect(c.accept(EOS)).toBe(false);
    for (const ch of 'time", "parameters": {"zone": ') expect(c.accept(idOf(ch))).toBe(true);
    // Only get_time's zones now: its $ref resolved in its own schema.
    expect(c.accept(idOf('"'))).toBe(true);
    expect(c.accept(idOf('f'))).toBe(false);     // get_weather's unit, not a zone
    for (const ch of 'utc"}') expect(c.accept(idOf(ch))).toBe(true);
    expect(c.done).toBe(false);
    expect(c.accept(idOf('}'))).toBe(true);
    expect(c.done).toBe(true);
  });

  it("refuses a tool's schema it cannot enforce with a 400 on tool_choice naming that tool's parameters", async () => {
    const calls = [{ prefix: 'a', suffix: 'b', schema: { type: 'object' }, schemaPath: 'tools[0].function.parameters' },
      { prefix: 'c', suffix: 'd', schema: { type: 'object', properties: { x: { type: 'string', pattern: '^a' } } }, schemaPath: 'tools[1].function.parameters' }];
    const err = await compileToolCalls(calls, vocab).catch((e) => e);
    expect(err).toBeInstanceOf(OpenAIError);
    expect([err.status, err.param]).toEqual([400, 'tool_choice']);
    expect(err.message).toContain('tools[1].function.parameters.properties.x');
  });
});
