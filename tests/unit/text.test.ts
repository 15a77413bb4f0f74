// The text layer of serving (SPEC.md §9 "Text"): tokenizer round trips, incremental detokenization,
// stop strings across deltas, chat templates and tool-call parsing. CPU only.
import { describe, expect, it } from 'vitest';
import { WebinferError } from '../../src/core/errors';
import { rng } from '../../src/core/random';
import { ggufTokenizer } from '../../src/formats/gguf_tokenizer';
import { ChatTemplate, StopMatcher, StreamDecoder, TextTokenizer, type TokenDecoder } from '../../src/text/text';
import { parseToolCalls, toolCallFormat } from '../../src/serve/tools';
import { BYTE_CHAT_TEMPLATE, byteTokenizerConfig, byteTokenizerJson } from '../cases/text_fixture';

const utf8 = (s: string) => Array.from(new TextEncoder().encode(s));

/** Code point ranges of 1 to 4 UTF-8 bytes: ASCII and whitespace, Latin, Cyrillic, CJK, Hangul, emoji, a ZWJ. */
const RANGES: [number, number][] = [
  [0x20, 0x7e], [0x20, 0x7e], [0x09, 0x0a], [0xa0, 0x17f], [0x400, 0x4ff], [0x4e00, 0x9fff], [0xac00, 0xd7a3], [0x1f300, 0x1faff], [0x200d, 0x200d], [0x300, 0x36f],
];

function randomText(r: () => number, maxLen: number): string {
  const n = Math.floor(r() * maxLen);
  let s = '';
  for (let i = 0; i < n; i++) {
    const [lo, hi] = RANGES[Math.floor(r() * RANGES.length)]!;
    s += String.fromCodePoint(lo + Math.floor(r() * (hi - lo + 1)));
  }
  return s;
}

const byteTok = () => TextTokenizer.create(byteTokenizerJson(), byteTokenizerConfig());

describe('TextTokenizer: the byte-level fixture', () => {
  const tok = byteTok();

  it('is the 256 byte values, none special, no end token of its own', () => {
    expect(tok.vocabSize).toBe(256);
    expect(tok.specialTokenIds.size).toBe(0);
    expect(tok.eosTokenIds).toEqual([]); // '</s>' is four bytes here, not a token
    expect(tok.encode('</s>')).toEqual(utf8('</s>'));
  });

  it('encodes any UTF-8 text to its bytes and decodes it back (seeded random strings)', () => {
    const r = rng(29);
    for (let t = 0; t < 300; t++) {
      const s = randomText(r, 40);
      const ids = tok.encode(s);
      expect(ids, JSON.stringify(s)).toEqual(utf8(s));
      expect(ids.every((id) => id >= 0 && id < 256)).toBe(true);
      expect(tok.decode(ids), JSON.stringify(s)).toBe(s);
      expect(tok.encode(s, { addSpecialTokens: false })).toEqual(ids);
    }
    // Spaces and punctuation survive decoding (no clean-up of ' .' unless asked).
    expect(tok.decode(tok.encode('a . b , c'))).toBe('a . b , c');
    expect(tok.decode(tok.encode('a . b , c'), { cleanUpTokenizationSpaces: true })).toBe('a. b, c');
    expect(tok.decode([])).toBe('');
  });

  it('refuses ids outside the vocabulary before any conversion', () => {
    for (const bad of [256, -1, 1.5, 2 ** 32 + 1, NaN]) {
      expect(() => tok.decode([72, bad]), String(bad)).toThrow(/TextTokenizer.decode: ids\[1\]: expected a token id of the vocabulary \(an integer in \[0, 256\)\)/);
    }
    expect(() => tok.decode('hi' as unknown as number[])).toThrow(WebinferError);
    expect(() => tok.encode(3 as unknown as string)).toThrow(/TextTokenizer.encode: text: expected a string, got 3/);
  });

  it('takes end tokens from the config and generation_config', () => {
    const json = byteTokenizerJson() as { added_tokens: object[]; model: { vocab: Record<string, number> } };
    json.model.vocab['<|end|>'] = 256;
    json.added_tokens.push({ id: 256, content: '<|end|>', special: true, lstrip: false, rstrip: false, normalized: false, single_word: false });
    const t = TextTokenizer.create(json, { ...byteTokenizerConfig(), eos_token: { content: '<|end|>', __type: 'AddedToken' } }, { eos_token_id: [256, 10] });
    expect(t.vocabSize).toBe(257);
    expect(t.eosTokenIds).toEqual([256, 10]);
    expect([...t.specialTokenIds]).toEqual([256]);
    expect(t.encode('hi<|end|>')).toEqual([104, 105, 256]);
    expect(t.decode([104, 105, 256])).toBe('hi<|end|>');
    expect(t.decode([104, 105, 256], { skipSpecialTokens: true })).toBe('hi');
    expect(() => TextTokenizer.create(json, {}, { eos_token_id: 300 })).toThrow(/generationConfig.eos_token_id: expected token ids in \[0, 257\), got 300/);
  });
});

describe('TextTokenizer: a malformed tokenizer.json is refused by name', () => {
  const cases: [string, (j: Record<string, any>) => unknown, RegExp][] = [
    ['not an object', () => 'tokenizer.json', /tokenizerJson: expected an object \(a parsed tokenizer.json\), got 'tokenizer.json'/],
    ['no model', (j) => ({ ...j, model: undefined }), /tokenizerJson.model: expected an object/],
    ['unknown model type', (j) => ({ ...j, model: { ...j.model, type: 'Magic' } }), /tokenizerJson.model.type: expected 'BPE', 'WordPiece', 'WordLevel' or 'Unigram', got 'Magic'/],
    ['vocab not an object', (j) => ({ ...j, model: { ...j.model, vocab: [1, 2] } }), /tokenizerJson.model.vocab: expected an object mapping each token to its id/],
    ['a negative id', (j) => ({ ...j, model: { ...j.model, vocab: { ...j.model.vocab, x: -3 } } }), /tokenizerJson.model.vocab\['x'\]: expected a non-negative integer id, got -3/],
    ['merges not an array', (j) => ({ ...j, model: { ...j.model, merges: 'a b' } }), /tokenizerJson.model.merges: expected an array of merges/],
    ['a bad merge', (j) => ({ ...j, model: { ...j.model, merges: ['ab'] } }), /tokenizerJson.model.merges\[0\]: expected 'a b' or \['a', 'b'\], got "ab"/],
    ['added token without content', (j) => ({ ...j, added_tokens: [{ id: 3 }] }), /tokenizerJson.added_tokens\[0\].content: expected a non-empty string/],
    ['Unigram vocab of strings', (j) => ({ ...j, model: { type: 'Unigram', vocab: ['a'] } }), /tokenizerJson.model.vocab\[0\]: expected a \[piece, score\] pair/],
    ['a bad pre-tokenizer', (j) => ({ ...j, pre_tokenizer: { type: 'NoSuchThing' } }), /TextTokenizer.create: tokenizerJson: @huggingface\/tokenizers cannot build it: /],
  ];
  it.each(cases)('%s', (_, edit, re) => {
    const j = byteTokenizerJson() as Record<string, any>;
    expect(() => TextTokenizer.create(edit(j) as object)).toThrow(re);
  });
  it('a bad config is named too', () => {
    expect(() => TextTokenizer.create(byteTokenizerJson(), [] as unknown as object)).toThrow(/tokenizerConfig: expected an object/);
    expect(() => TextTokenizer.create(byteTokenizerJson(), { eos_token: 2 })).toThrow(/tokenizerConfig.eos_token: expected a string, an AddedToken object/);
  });
  it('components the library needs but the file leaves out are null', () => {
    const { normalizer: _n, pre_tokenizer: _p, post_processor: _q, decoder: _d, ...bare } = byteTokenizerJson() as Record<string, unknown>;
    const t = TextTokenizer.create(bare);
    expect(t.vocabSize).toBe(256);
  });
});

// ---------------------------------------------------------------------------------------------
// Tokenizers whose tokens change with their neighbours, for the stream decoder.

const BYTE_TOKENS = Array.from({ length: 256 }, (_, i) => `<0x${i.toString(16).toUpperCase().padStart(2, '0')}>`);
const SPM_PIECES = ['▁', '▁hello', '▁world', 'hel', 'lo', '▁wor', 'ld', '▁the', 'the', '▁▁', 'h', 'e', 'l', 'o', 'w', 'r', 'd', 't', 'é', '你', '▁你好'];

/** A SentencePiece (llama) tokenizer through ggufTokenizer: '▁' spaces, byte fallback, one leading space stripped. */
function spmTokenizer(): TextTokenizer {
  const tokens = ['<unk>', '<s>', '</s>', ...BYTE_TOKENS, ...SPM_PIECES];
  const meta = new Map<string, unknown>([
    ['tokenizer.ggml.model', 'llama'],
    ['tokenizer.ggml.tokens', tokens],
    ['tokenizer.ggml.scores', tokens.map((_, i) => (i < 259 ? 0 : -i))],
    ['tokenizer.ggml.token_type', tokens.map((_, i) => (i === 0 ? 2 : i < 3 ? 3 : i < 259 ? 6 : 1))],
    ['tokenizer.ggml.bos_token_id', 1],
    ['tokenizer.ggml.eos_token_id', 2],
  ]);
  const g = ggufTokenizer(meta)!;
  return TextTokenizer.create(g.tokenizer!, g.tokenizerConfig);
}

/** Byte-level BPE whose extra tokens are byte runs cutting characters anywhere (a CJK char's tail and an emoji's head ...). */
function cutByteTokenizer(seed: number): TextTokenizer {
  const json = byteTokenizerJson() as { model: { vocab: Record<string, number> }; added_tokens: object[] };
  const chars: string[] = [];
  for (const [c, id] of Object.entries(json.model.vocab)) chars[id] = c;
  const bytes = utf8('你好世界🦙😶‍🌫️ héllo, Здравствуй 안녕 ✅');
  const r = rng(seed);
  let id = 256;
  while (id < 320) {
    const start = Math.floor(r() * bytes.length);
    const len = 2 + Math.floor(r() * 5);
    const tok = bytes.slice(start, start + len).map((b) => chars[b]).join('');
    if (!(tok in json.model.vocab)) json.model.vocab[tok] = id++;
  }
  json.model.vocab['<|eot|>'] = id;
  json.added_tokens.push({ id, content: '<|eot|>', special: true, lstrip: false, rstrip: false, normalized: false, single_word: false });
  return TextTokenizer.create(json, {});
}

/** Streams ids through a StreamDecoder, checking after every push that the text so far is what decoding all ids so far begins with. */
function stream(tok: TokenDecoder, ids: number[], o: { skipSpecialTokens?: boolean; prefixIds?: number[] } = {}): { deltas: string[]; text: string } {
  const sd = new StreamDecoder(tok, o);
  const pre = o.prefixIds ?? [];
  const skip = { skipSpecialTokens: o.skipSpecialTokens ?? true };
  const preText = tok.decode(pre, skip);
  const deltas: string[] = [];
  let text = '';
  ids.forEach((id, k) => {
    const d = sd.push(id);
    deltas.push(d);
    text += d;
    // Never a delta a later token rewrites: what came out agrees with the decode of everything so far.
    const full = tok.decode([...pre, ...ids.slice(0, k + 1)], skip);
    expect(full.startsWith(preText + text), `after id ${k}: ${JSON.stringify(preText + text)} vs ${JSON.stringify(full)}`).toBe(true);
    // Held back: only an incomplete character or a window's unstable tail, never text already whole.
    if (!full.endsWith('\uFFFD')) expect((preText + text).length).toBe(full.length);
  });
  const last = sd.flush();
  deltas.push(last);
  text += last;
  expect(sd.flush()).toBe('');
  return { deltas, text };
}

/** No delta starts with a lone low surrogate or ends with a lone high one (a split UTF-16 pair). */
function wellFormed(d: string): boolean {
  return !/^[\uDC00-\uDFFF]/.test(d) && !/[\uD800-\uDBFF]$/.test(d);
}

describe('StreamDecoder: concatenated deltas equal the decode of all ids', () => {
  it('byte tokenizer, text of multi-byte characters: no delta splits a character', () => {
    const tok = byteTok();
    const r = rng(7);
    for (let t = 0; t < 100; t++) {
      const s = randomText(r, 30);
      const { deltas, text } = stream(tok, tok.encode(s));
      expect(text).toBe(s);
      for (const d of deltas) {
        expect(d.includes('\uFFFD'), JSON.stringify(d)).toBe(false);
        expect(wellFormed(d)).toBe(true);
      }
    }
    // A 4-byte emoji comes out whole, on its last byte.
    const { deltas } = stream(tok, utf8('a🦙'));
    expect(deltas).toEqual(['a', '', '', '', '🦙', '']);
  });

  it('byte tokenizer, random bytes (invalid UTF-8 too): the invariant holds, U+FFFD only as decode() writes it', () => {
    const tok = byteTok();
    const r = rng(8);
    for (let t = 0; t < 200; t++) {
      const n = Math.floor(r() * 24);
      // Bytes biased to lead and continuation bytes so characters are cut and left unfinished.
      const ids = Array.from({ length: n }, () => (r() < 0.5 ? 0x80 + Math.floor(r() * 0x80) : r() < 0.5 ? 0x41 : Math.floor(r() * 256)));
      expect(stream(tok, ids).text).toBe(tok.decode(ids));
    }
    // An unfinished character at the end comes out at flush, as decode() writes it.
    const sd = new StreamDecoder(tok);
    expect([sd.push(0x41), sd.push(0xe4), sd.push(0xbd)]).toEqual(['A', '', '']);
    expect(sd.flush()).toBe('\uFFFD');
  });

  it('byte-level BPE with tokens cutting characters anywhere, and a special token', () => {
    const tok = cutByteTokenizer(3);
    const r = rng(9);
    const eot = tok.vocabSize - 1;
    for (let t = 0; t < 200; t++) {
      const ids = Array.from({ length: Math.floor(r() * 20) }, () => (r() < 0.05 ? eot : r() < 0.5 ? 256 + Math.floor(r() * 64) : Math.floor(r() * 256)));
      for (const skipSpecialTokens of [true, false]) {
        const { deltas, text } = stream(tok, ids, { skipSpecialTokens });
        expect(text).toBe(tok.decode(ids, { skipSpecialTokens }));
        for (const d of deltas) expect(wellFormed(d)).toBe(true);
      }
    }
  });

  it('SentencePiece: leading spaces and byte-fallback characters over several tokens', () => {
    const tok = spmTokenizer();
    const r = rng(10);
    for (let t = 0; t < 200; t++) {
      // Pieces, byte tokens (some forming whole characters), <s>/</s>.
      const ids = Array.from({ length: Math.floor(r() * 16) }, () => {
        const x = r();
        return x < 0.05 ? 1 + Math.floor(r() * 2) : x < 0.35 ? 3 + Math.floor(r() * 256) : 259 + Math.floor(r() * SPM_PIECES.length);
      });
      for (const skipSpecialTokens of [true, false]) {
        expect(stream(tok, ids, { skipSpecialTokens }).text).toBe(tok.decode(ids, { skipSpecialTokens }));
      }
    }
    const words = ['hello world', ' hello  the world', 'héllo wörld 你好 🦙', 'the\nworld\t你'];
    for (const w of words) {
      const ids = tok.encode(w, { addSpecialTokens: false });
      // The stream gives what decode gives; a text's one leading space is the prefix HF's decoder
      // strips (Metaspace prepends it only where the text has none).
      expect(stream(tok, ids).text, w).toBe(tok.decode(ids));
      expect(tok.decode(ids), w).toBe(w.replace(/^ /, ''));
    }
  });

  it('SentencePiece: decoding token by token would lose the spaces the window keeps', () => {
    // The same check fails for the naive stream (each token decoded alone): it proves the test's teeth.
    const tok = spmTokenizer();
    const ids = tok.encode('hello world the world', { addSpecialTokens: false });
    expect(ids.map((id) => tok.decode([id])).join('')).not.toBe('hello world the world');
    expect(stream(tok, ids).deltas.join('')).toBe('hello world the world');
  });

  it('with the prompt as context, the first token keeps its leading space', () => {
    const tok = spmTokenizer();
    const prompt = tok.encode('hello', { addSpecialTokens: false });
    const out = tok.encode('hello world', { addSpecialTokens: false }).slice(prompt.length);
    expect(tok.decode(out)).toBe('world'); // alone, SentencePiece strips the space
    const { text } = stream(tok, out, { prefixIds: prompt });
    expect(text).toBe(' world');
    const r = rng(11);
    for (let t = 0; t < 100; t++) {
      const ids = Array.from({ length: 1 + Math.floor(r() * 12) }, () => 259 + Math.floor(r() * SPM_PIECES.length));
      const cut = Math.floor(r() * ids.length);
      const pre = ids.slice(0, cut);
      const { text: streamed } = stream(tok, ids.slice(cut), { prefixIds: pre });
      expect(tok.decode(pre) + streamed).toBe(tok.decode(ids));
    }
  });

  it('refuses bad input by name', () => {
    const tok = byteTok();
    expect(() => new StreamDecoder({} as TokenDecoder)).toThrow(/StreamDecoder: decoder: expected a tokenizer with decode/);
    expect(() => new StreamDecoder(tok).push(-1)).toThrow(/StreamDecoder.push: id: expected a non-negative integer token id, got -1/);
    expect(() => new StreamDecoder(tok).push(999)).toThrow(/TextTokenizer.decode: ids\[0\]/);
  });
});

// ---------------------------------------------------------------------------------------------

/** Length of the longest suffix of `s` that is a proper prefix of a stop. */
function heldBack(s: string, stops: string[]): number {
  let best = 0;
  for (const stop of stops) for (let k = 1; k < stop.length && k <= s.length; k++) if (s.endsWith(stop.slice(0, k))) best = Math.max(best, k);
  return best;
}

describe('StopMatcher: stop strings across deltas', () => {
  it('random texts and splits: the output is the text before the first stop, emitted as early as possible', () => {
    const r = rng(12);
    const stopSets = [['abc'], ['ab', 'bca'], ['aab', 'abab', 'c'], ['🦙x', '\n\n'], ['a'], ['bb', 'abbb'], ['c', 'ab']];
    for (let t = 0; t < 600; t++) {
      const stops = stopSets[t % stopSets.length]!;
      // A small alphabet so partial matches are everywhere.
      const alphabet = ['a', 'b', 'c', 'x', '\n', '🦙', 'é'];
      let text = '';
      const n = Math.floor(r() * 30);
      for (let i = 0; i < n; i++) text += alphabet[Math.floor(r() * alphabet.length)];
      let first = -1;
      for (const s of stops) {
        const i = text.indexOf(s);
        if (i >= 0 && (first < 0 || i < first)) first = i;
      }
      const expected = first < 0 ? text : text.slice(0, first);
      // Deltas on code point boundaries, as a StreamDecoder gives them.
      const cps = Array.from(text);
      const deltas: string[] = [];
      for (let i = 0; i < cps.length;) {
        const len = Math.floor(r() * 4);
        deltas.push(cps.slice(i, i + len).join(''));
        i += len;
      }
      const m = new StopMatcher(stops);
      let out = '';
      let seen = '';
      let stopped = false;
      for (const d of deltas) {
        const res = m.push(d);
        seen += d;
        out += res.text;
        // Never text that is later taken back: the output is always a prefix of the final one.
        expect(expected.startsWith(out), `${JSON.stringify(stops)} ${JSON.stringify(text)}`).toBe(true);
        for (const s of stops) expect(res.text.includes(s)).toBe(false);
        if (res.stopped) {
          stopped = true;
          break;
        }
        // Everything that cannot begin a stop is out already.
        expect(out.length).toBe(seen.length - heldBack(seen, stops));
      }
      if (!stopped) out += m.flush();
      expect(out, `${JSON.stringify(stops)} ${JSON.stringify(text)}`).toBe(expected);
      expect(stopped).toBe(first >= 0);
      expect(m.stopped).toBe(first >= 0);
    }
  });

  it('after a stop nothing more comes out; without stops everything passes at once', () => {
    const m = new StopMatcher(['END']);
    expect(m.push('abcEN')).toEqual({ text: 'abc', stopped: false });
    expect(m.push('Dxyz')).toEqual({ text: '', stopped: true });
    expect(m.push('more')).toEqual({ text: '', stopped: true });
    expect(m.flush()).toBe('');
    const held = new StopMatcher(['END']);
    expect(held.push('xE')).toEqual({ text: 'x', stopped: false });
    expect(held.push('N')).toEqual({ text: '', stopped: false });
    expect(held.flush()).toBe('EN');
    // The earliest stop in the text ends it, whatever the order of the list.
    expect(new StopMatcher(['b', 'xyz']).push('abxyz')).toEqual({ text: 'a', stopped: true });
    const none = new StopMatcher([]);
    expect(none.push('anything')).toEqual({ text: 'anything', stopped: false });
  });

  it('refuses empty stops by name', () => {
    expect(() => new StopMatcher(['ok', ''])).toThrow(/StopMatcher: stops\[1\]: expected a non-empty string, got ''/);
    expect(() => new StopMatcher('stop' as unknown as string[])).toThrow(/StopMatcher: stops: expected an array of strings/);
  });
});

// ---------------------------------------------------------------------------------------------

describe('ChatTemplate', () => {
  const cfg = byteTokenizerConfig() as Record<string, unknown>;
  const chat = ChatTemplate.fromConfig(cfg)!;
  const tools = [{ type: 'function', function: { name: 'get_weather', description: 'Weather now', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }];

  it('renders with and without the generation prompt', () => {
    const msgs = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hi 🦙' }];
    expect(chat.render(msgs)).toBe('<|system|>\nBe brief.\n<|user|>\nHi 🦙\n');
    expect(chat.render(msgs, { addGenerationPrompt: true })).toBe('<|system|>\nBe brief.\n<|user|>\nHi 🦙\n<|assistant|>\n');
    // A past assistant turn ends with the config's eos_token.
    expect(chat.render([{ role: 'user', content: 'a' }, { role: 'assistant', content: 'b' }])).toBe('<|user|>\na\n<|assistant|>\nb</s>\n');
    // The prompt is bytes to the fixture tokenizer: ids the goldens take.
    expect(byteTok().encode(chat.render(msgs, { addGenerationPrompt: true })).every((id) => id < 256)).toBe(true);
  });

  it('renders tools, assistant tool calls (arguments as OpenAI sends them) and tool results', () => {
    const out = chat.render([
      { role: 'user', content: 'Weather in Paris?' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris"}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: '18C' },
    ], { tools, addGenerationPrompt: true });
    expect(out).toBe(
      '<|system|>\nYou may call functions. Their signatures:\n<tools>\n' +
        '{"type": "function", "function": {"name": "get_weather", "description": "Weather now", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}\n' +
        '</tools>\nFor each call reply with <tool_call>{"name": <function-name>, "arguments": <args-json-object>}</tool_call>\n' +
        '<|user|>\nWeather in Paris?\n<|assistant|>\n<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call></s>\n' +
        '<|tool|>\n<tool_response>18C</tool_response>\n<|assistant|>\n',
    );
    // An empty tool list is no tools.
    expect(chat.render([{ role: 'user', content: 'x' }], { tools: [] })).toBe('<|user|>\nx\n');
  });

  it('a template that tojson-es the arguments gets an object, not a quoted string', () => {
    const t = new ChatTemplate('{% for m in messages %}{% for c in m.tool_calls %}{{ c.function.arguments | tojson }}{% endfor %}{% endfor %}');
    expect(t.render([{ role: 'assistant', tool_calls: [{ type: 'function', function: { name: 'f', arguments: '{"a": [1, 2]}' } }] }])).toBe('{"a": [1, 2]}');
    // Not JSON: passed as written.
    expect(t.render([{ role: 'assistant', tool_calls: [{ type: 'function', function: { name: 'f', arguments: 'oops' } }] }])).toBe('"oops"');
  });

  it('special tokens, extra variables and named templates', () => {
    const t = ChatTemplate.fromConfig({
      bos_token: { content: '<B>', __type: 'AddedToken' },
      eos_token: '<E>',
      chat_template: [
        { name: 'default', template: '{{ bos_token }}{{ messages[0].content }}{% if enable_thinking %}+think{% endif %}{{ eos_token }}' },
        { name: 'tool_use', template: 'TOOLS {{ tools | length }}: {{ messages[0].content }}' },
      ],
    })!;
    expect(t.names).toEqual(['default', 'tool_use']);
    expect(t.render([{ role: 'user', content: 'q' }])).toBe('<B>q<E>');
    expect(t.render([{ role: 'user', content: 'q' }], { enable_thinking: true })).toBe('<B>q+think<E>');
    expect(t.render([{ role: 'user', content: 'q' }], { tools })).toBe('TOOLS 1: q');
    expect(t.source(true)).toContain('TOOLS');
    const onlyTools = new ChatTemplate({ tool_use: 'x', rag: 'y' });
    expect(() => onlyTools.render([])).toThrow(/ChatTemplate: chat_template: expected a 'default' template \(or 'tool_use' with tools\), among \['tool_use', 'rag'\]/);
    expect(onlyTools.render([], { tools })).toBe('x');
    expect(ChatTemplate.fromConfig({ eos_token: 'x' })).toBeUndefined();
  });

  it('template errors are WebinferErrors that name the template', () => {
    expect(() => chat.render([{ role: 'user', content: 'a' }, { role: 'system', content: 'late' }])).toThrow(/ChatTemplate.render: chat_template 'default' failed: a system message must come first/);
    expect(() => chat.render([{ role: 'robot', content: 'a' }])).toThrow(/unknown role robot/);
    const broken = new ChatTemplate('{% if messages %}unclosed');
    expect(() => broken.render([])).toThrow(/ChatTemplate.render: chat_template 'default': @huggingface\/jinja cannot parse it/);
    expect(() => new ChatTemplate(42)).toThrow(/ChatTemplate: chat_template: expected a template string, \[\{ name, template \}\] or \{ name: template \}, got 42/);
    expect(() => new ChatTemplate([{ name: 'a' }])).toThrow(/chat_template\[0\]: expected an object \{ name, template \}/);
    expect(() => chat.render([{ content: 'x' } as never])).toThrow(/messages\[0\].role: expected a string/);
    expect(() => chat.render([], { raise_exception: 1 })).toThrow(/ChatTemplate.render: raise_exception: expected a template variable other than the built-in ones/);
    expect(() => chat.render([], { tools: 'x' as never })).toThrow(/tools: expected an array of tool schemas/);
  });
});

// ---------------------------------------------------------------------------------------------

const LLAMA31_TOOLS =
  '{{- "<|start_header_id|>user<|end_header_id|>\\n\\n" -}}{{- \'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.\' }}' +
  "{%- if builtin_tools is defined %}{{- '<|python_tag|>' }}{% endif %}";

describe('tool calls', () => {
  const ID = /^call_[0-9a-f]{24}$/;

  it('the format comes from the template', () => {
    expect(toolCallFormat(BYTE_CHAT_TEMPLATE)).toBe('hermes');
    expect(toolCallFormat(LLAMA31_TOOLS)).toBe('llama3');
    expect(toolCallFormat('{% for m in messages %}{{ m.content }}{% endfor %}')).toBeNull();
    // "parameters" alone (no Llama 3 header) is no format.
    expect(toolCallFormat('{{ "parameters" }}')).toBeNull();
  });

  it('hermes: every <tool_call> block, the rest is content', () => {
    const one = parseToolCalls('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>', 'hermes');
    expect(one.content).toBeNull();
    expect(one.toolCalls).toHaveLength(1);
    expect(one.toolCalls[0]).toMatchObject({ type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } });
    expect(one.toolCalls[0]!.id).toMatch(ID);

    const two = parseToolCalls('Let me check.\n<tool_call>{"name": "a", "arguments": {}}</tool_call>\n<tool_call>{"name": "b", "arguments": "{\\"x\\": 1}"}</tool_call>', 'hermes');
    expect(two.content).toBe('Let me check.');
    expect(two.toolCalls.map((c) => [c.function.name, c.function.arguments])).toEqual([['a', '{}'], ['b', '{"x": 1}']]);
    expect(two.toolCalls[0]!.id).not.toBe(two.toolCalls[1]!.id);

    // The reply ended before the close tag.
    expect(parseToolCalls('<tool_call>{"name": "a", "arguments": {"k": [1]}}', 'hermes').toolCalls[0]!.function.arguments).toBe('{"k":[1]}');
  });

  it('hermes: broken JSON, a missing name or bad arguments leave the text as content', () => {
    for (const text of [
      '<tool_call>{"name": "a", "arguments": {</tool_call>',
      '<tool_call>{"arguments": {}}</tool_call>',
      '<tool_call>{"name": "a", "arguments": [1]}</tool_call>',
      '<tool_call>{"name": "a", "arguments": {}}</tool_call><tool_call>not json</tool_call>',
      'no calls here',
    ]) {
      expect(parseToolCalls(text, 'hermes'), text).toEqual({ content: text, toolCalls: [] });
    }
    expect(parseToolCalls('', 'hermes')).toEqual({ content: null, toolCalls: [] });
  });

  it('llama3: the reply is the JSON object, after <|python_tag|> or not; several joined by ;', () => {
    const a = parseToolCalls(' {"name": "get_weather", "parameters": {"city": "Paris; France"}} ', 'llama3');
    expect(a.content).toBeNull();
    expect(a.toolCalls.map((c) => c.function)).toEqual([{ name: 'get_weather', arguments: '{"city":"Paris; France"}' }]);
    expect(a.toolCalls[0]!.id).toMatch(ID);
    const b = parseToolCalls('<|python_tag|>{"name": "f", "arguments": {"q": "}{"}}; {"name": "g", "parameters": {}}', 'llama3');
    expect(b.toolCalls.map((c) => c.function)).toEqual([{ name: 'f', arguments: '{"q":"}{"}' }, { name: 'g', arguments: '{}' }]);
  });

  it('llama3: anything else is content', () => {
    for (const text of [
      'The weather is fine.',
      '{"name": "f", "parameters": {"a": 1}',
      '{"name": "f", "parameters": {}} and then some words',
      '{"name": "Bob", "age": 3}',
      'Sure: {"name": "f", "parameters": {}}',
    ]) {
      expect(parseToolCalls(text, 'llama3'), text).toEqual({ content: text, toolCalls: [] });
    }
  });

  it('refuses bad input by name', () => {
    expect(() => parseToolCalls('x', 'json' as never)).toThrow(/parseToolCalls: format: expected 'hermes' or 'llama3', got 'json'/);
    expect(() => toolCallFormat(undefined as never)).toThrow(/toolCallFormat: template: expected a chat template string/);
  });
});

describe('TextTokenizer: WordLevel (HF semantics: a word is its vocabulary id or unk_token)', () => {
  // As HF tokenizers writes a WordLevel tokenizer.json (WordLevelTrainer's output): the Whitespace
  // pre-tokenizer (\w+|[^\w\s]+, Unicode classes), [UNK], a post-processor adding [CLS]/[SEP], no decoder.
  const vocab: Record<string, number> = { '[UNK]': 0, '[CLS]': 1, '[SEP]': 2, hello: 3, world: 4, ',': 5, '!': 6, the: 7, café: 8, '42': 9, '?!': 10, do: 11, "'": 12, 'n': 13, t: 14 };
  const json = (model: Record<string, unknown> = {}, pre: unknown = { type: 'Whitespace' }) => ({
    version: '1.0', truncation: null, padding: null,
    added_tokens: [
      { id: 1, content: '[CLS]', single_word: false, lstrip: false, rstrip: false, normalized: false, special: true },
      { id: 2, content: '[SEP]', single_word: false, lstrip: false, rstrip: false, normalized: false, special: true },
    ],
    normalizer: null, pre_tokenizer: pre,
    post_processor: { type: 'TemplateProcessing', single: [{ SpecialToken: { id: '[CLS]', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }, { SpecialToken: { id: '[SEP]', type_id: 0 } }],
      pair: [], special_tokens: { '[CLS]': { id: '[CLS]', ids: [1], tokens: ['[CLS]'] }, '[SEP]': { id: '[SEP]', ids: [2], tokens: ['[SEP]'] } } },
    decoder: null,
    model: { type: 'WordLevel', vocab, unk_token: '[UNK]', ...model },
  });

  it('encodes each word to its id and every other word to [UNK], whole (no pieces), with the post-processor\'s tokens', () => {
    const tok = TextTokenizer.create(json());
    expect(tok.vocabSize).toBe(15);
    expect(tok.unkTokenId).toBeUndefined(); // no tokenizer_config.json naming it
    // Whitespace: runs of word characters, runs of other non-space characters ('?!' one word, "'" one).
    expect(tok.encode('hello, world!')).toEqual([1, 3, 5, 4, 6, 2]);
    expect(tok.encode('hello, world!', { addSpecialTokens: false })).toEqual([3, 5, 4, 6]);
    expect(tok.encode('the   café?!\n42', { addSpecialTokens: false })).toEqual([7, 8, 10, 9]);
    // Out of the vocabulary: one [UNK] per word, even where a prefix ('hello', 'the') is an entry.
    expect(tok.encode('helloworld thecat, Hello', { addSpecialTokens: false })).toEqual([0, 0, 5, 0]);
    // "don't" is do·n·'·t to no one: \w+ takes 'don' (not in the vocabulary), then "'" and 't'.
    expect(tok.encode("don't", { addSpecialTokens: false })).toEqual([0, 12, 14]);
    // Unicode word characters are word characters (Rust's \w): 'café' is one word, 'cafés' one unknown one.
    expect(tok.encode('cafés café', { addSpecialTokens: false })).toEqual([0, 8]);
    // A word longer than any entry is unknown at once, however long.
    expect(tok.encode(`${'a'.repeat(100_000)} the`, { addSpecialTokens: false })).toEqual([0, 7]);
    // No decoder: tokens joined by spaces (HF's default).
    expect(tok.decode([3, 5, 4, 6])).toBe('hello , world !');
    expect(tok.decode([1, 3, 2], { skipSpecialTokens: true })).toBe('hello');
  });

  it('an entry that starts with the characters WordPiece would read as a continuation is still only itself', () => {
    const tok = TextTokenizer.create(json({ vocab: { ...vocab, '\u0000x': 15, '##ld': 16 } }, { type: 'WhitespaceSplit' }));
    expect(tok.encode('wor##ld hello##ld', { addSpecialTokens: false })).toEqual([0, 0]);
    expect(tok.encode('\u0000x hello', { addSpecialTokens: false })).toEqual([15, 3]);
  });

  it("unk_token defaults to '<unk>' as in HF; an unknown word without an unk entry is refused by name", () => {
    const { unk_token: _u, ...rest } = json().model;
    const tok = TextTokenizer.create({ ...json(), model: rest });
    expect(tok.encode('hello world', { addSpecialTokens: false })).toEqual([3, 4]);
    expect(() => tok.encode('hello there', { addSpecialTokens: false })).toThrow("TextTokenizer.encode: text: expected words of the vocabulary (its unk_token is not in the vocabulary), got '<unk>'");
    expect(() => TextTokenizer.create(json({ unk_token: 3 }))).toThrow('tokenizerJson.model.unk_token: expected a string');
  });
});
