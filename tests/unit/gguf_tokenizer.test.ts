import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Tokenizer } from '@huggingface/tokenizers';
import { describe, expect, it } from 'vitest';
import { loadGGUF } from '../../src/formats/gguf';
import { GGUF_PRE_TOKENIZERS, ggufTokenizer, spmMerges } from '../../src/formats/gguf_tokenizer';

const goldensQuant = join(dirname(fileURLToPath(import.meta.url)), '../../../shared/goldens-quant');
const GGUF_GOLDENS = ['llama-q8-0', 'llama-q4-0', 'llama-q4-k-m', 'llama-q5-mix', 'qwen3-q8-0', 'qwen3-q4-0', 'qwen3-q4-k-m', 'qwen3-q5-mix'].map((s) => `gguf-${s}`);
type Json = Record<string, unknown>;

/** Varied text: ASCII, contractions, unicode, emoji, digit runs, whitespace runs, newlines, special tokens' text. */
const TEXTS = [
  'Hello world',
  'the quick brown fox jumps over the lazy dog',
  "I've been told he's there, 'RE you sure? We'Ve a'lL",
  'milo vingth anvito loloru rudeor elisst porun thto toelan neto',
  'naïve café, Ünïcödé — “quotes” ½ ÆØÅ',
  'Здравствуй мир, 你好世界, こんにちは, 안녕하세요, مرحبا',
  'emoji 🦙🚀 😶‍🌫️ ✅ 👍🏽',
  '3 33 333 3333 33333 123456789 3.14 1,000,000',
  '   leading and trailing spaces   ',
  'tabs\tand\t\tmore\ttabs',
  'lines\nand\n\nblank\n\n\nlines\r\nCRLF',
  '  \n \n\n \t \t\t \t\n  \n   \n    \n',
  "''''''```````\"\"\"\"......!!!!!!??????",
  'code: def f(x):\n    return x ** 2  # square',
  '',
];

/** Strings where GGUF-built SentencePiece tokenizers left HF's ids, and their neighbours. */
const HARD_TEXTS = [
  'The quick brown fox.',
  'naïve café — 東京 😀',
  '  spaces\tand\nlines  ',
  'x=1; y = x**2 // ok',
  ' leading space',
  '    four leading spaces',
  'trailing spaces   ',
  'repeated     spaces  between   words',
  ' ',
  '   ',
  '\t',
  '\n',
  'tabs\t\tand\n\nnewlines\r\n',
  'emoji 😀🦙 👍🏽 😶‍🌫️',
  '東京タワー 你好世界 안녕하세요',
  'digits 0 12 345 6789 3.14159 1,000,000',
  'punctuation!?.,;:()[]{}<>-_=+*/\\|@#$%^&~`\'"',
  'x',
  '',
];

describe('ggufTokenizer: the goldens encode and decode as their HF tokenizer.json', () => {
  it.each(GGUF_GOLDENS)('%s', async (folder) => {
    const g = await loadGGUF(join(goldensQuant, folder, 'model.gguf'));
    const hfJson = JSON.parse(readFileSync(join(goldensQuant, folder, 'tokenizer.hf.json'), 'utf8')) as Json;
    const cfg = g.tokenizerConfig as Json;
    const mine = new Tokenizer(g.tokenizer!, cfg);
    const ref = new Tokenizer(hfJson, cfg);
    // The same vocabulary, id for id, and the same special tokens.
    const vocabSize = (g.metadata.get('tokenizer.ggml.tokens') as string[]).length;
    for (let id = 0; id < vocabSize; id++) expect(mine.id_to_token(id), `token ${id}`).toBe(ref.id_to_token(id));
    expect([...mine.get_added_tokens_decoder().keys()]).toEqual([...ref.get_added_tokens_decoder().keys()]);

    const special = [...ref.get_added_tokens_decoder().values()].map((t) => t.content);
    const texts = [...TEXTS, ...HARD_TEXTS, `${special[0]}Hello${special[1]} world${special.at(-1)}\n`, special.join(' ')];
    for (const text of texts) {
      const a = mine.encode(text, { add_special_tokens: false }).ids;
      const b = ref.encode(text, { add_special_tokens: false }).ids;
      expect(a, JSON.stringify(text)).toEqual(b);
      if (a.length) {
        expect(mine.decode(a), JSON.stringify(text)).toBe(ref.decode(b));
        // Byte-level BPE loses nothing.
        expect(mine.decode(a, { clean_up_tokenization_spaces: false })).toBe(text);
      }
    }

    // encode() adds BOS exactly when the metadata says llama.cpp would.
    const bos = g.metadata.get('tokenizer.ggml.bos_token_id') as number;
    const addBos = g.metadata.get('tokenizer.ggml.add_bos_token') as boolean;
    expect(cfg).toMatchObject({ add_bos_token: addBos, add_eos_token: false, bos_token: ref.id_to_token(bos), eos_token: ref.id_to_token(g.metadata.get('tokenizer.ggml.eos_token_id') as number) });
    const ids = mine.encode('Hello world').ids;
    const plain = ref.encode('Hello world', { add_special_tokens: false }).ids;
    expect(ids).toEqual(addBos ? [bos, ...plain] : plain);
    expect(cfg.chat_template).toBe(g.metadata.get('tokenizer.chat_template'));
    // llama-bpe (Llama 3) cleans up spaces when decoding; qwen2 does not (llama.cpp's clean_spaces).
    expect(cfg.clean_up_tokenization_spaces).toBe(folder.includes('llama'));
  });
});

/** A metadata map of a gpt2 vocabulary with the given pre-tokenizer, over a golden's vocabulary. */
function gpt2Meta(base: ReadonlyMap<string, unknown>, pre: string | undefined): Map<string, unknown> {
  const m = new Map(base);
  if (pre === undefined) m.delete('tokenizer.ggml.pre');
  else m.set('tokenizer.ggml.pre', pre);
  m.delete('tokenizer.ggml.add_bos_token');
  return m;
}

describe('ggufTokenizer: pre-tokenizers as llama.cpp chooses them', async () => {
  const g = await loadGGUF(join(goldensQuant, 'gguf-llama-q8-0', 'model.gguf'));
  const split = (pre: string | undefined, text: string) => {
    const t = ggufTokenizer(gpt2Meta(g.metadata, pre))!;
    return new Tokenizer(t.tokenizer!, t.tokenizerConfig).pre_tokenizer!.pre_tokenize(text);
  };

  it.each(GGUF_PRE_TOKENIZERS)('%s compiles and round-trips every text', (pre) => {
    const t = ggufTokenizer(gpt2Meta(g.metadata, pre))!;
    const tok = new Tokenizer(t.tokenizer!, t.tokenizerConfig);
    for (const text of [...TEXTS, ...HARD_TEXTS]) {
      const ids = tok.encode(text, { add_special_tokens: false }).ids;
      if (ids.length) expect(tok.decode(ids, { clean_up_tokenization_spaces: false }), `${pre} ${JSON.stringify(text)}`).toBe(text);
    }
  });

  it('splits digits, letters and newlines per family', () => {
    expect(split('llama-bpe', '1234567 abc')).toEqual(['123', '456', '7', 'Ġabc']);
    expect(split('qwen2', '12345 abc')).toEqual(['1', '2', '3', '4', '5', 'Ġabc']);
    expect(split('deepseek-v3', '12345 abc')).toEqual(['123', '45', 'Ġabc']);
    expect(split('deepseek-llm', 'ab\ncd 12')).toEqual(['ab', 'Ċ', 'cd', 'Ġ', '12']);
    expect(split('gpt-2', "it's  12345")).toEqual(['it', "'s", 'Ġ', 'Ġ12345']);
    expect(split('gpt-4o', "HelloWorld it's")).toEqual(['Hello', 'World', "Ġit's"]);
    // An unknown name, like a missing one, gets llama.cpp's 'default'.
    expect(split('no-such-pre', 'a+b 1234')).toEqual(split('default', 'a+b 1234'));
    expect(split(undefined, 'a+b 1234')).toEqual(split('default', 'a+b 1234'));
  });

  it('llama.cpp defaults: add_bos for the llama3 family, ignore_merges, no tokenizer for custom pre-tokenizers', () => {
    const t = ggufTokenizer(gpt2Meta(g.metadata, 'llama3'))!;
    expect(t.tokenizerConfig).toMatchObject({ add_bos_token: true });
    expect((t.tokenizer as { model: Json }).model.ignore_merges).toBe(true);
    expect(ggufTokenizer(gpt2Meta(g.metadata, 'qwen2'))!.tokenizerConfig).toMatchObject({ add_bos_token: false });
    const kimi = ggufTokenizer(gpt2Meta(g.metadata, 'kimi-k2'))!;
    expect(kimi.tokenizer).toBeUndefined();
    expect(kimi.tokenizerConfig).toMatchObject({ chat_template: g.metadata.get('tokenizer.chat_template') });
    const m = new Map(g.metadata);
    m.delete('tokenizer.ggml.tokens');
    expect(ggufTokenizer(m)).toBeUndefined();
    m.set('tokenizer.ggml.tokens', ['a', 'b']);
    expect(() => ggufTokenizer(m, { name: 'x.gguf' })).toThrow(/ggufTokenizer: x.gguf metadata 'tokenizer.ggml.token_type': expected an array of 2 numbers \(one per token\)/);
  });
});

// ---------------------------------------------------------------------------------------------
// SentencePiece ('llama') vocabularies, against the tokenizer.json HF builds for the same vocabulary

const BYTE_TOKENS = Array.from({ length: 256 }, (_, i) => `<0x${i.toString(16).toUpperCase().padStart(2, '0')}>`);
const SPECIALS = ['<unk>', '<s>', '</s>'];
const FIRST_PIECE = SPECIALS.length + BYTE_TOKENS.length;

/**
 * Chunks of a line as SentencePiece sees them: spaces become '▁', a piece starts at a '▁', and a run
 * of '▁' before a word leaves its last one to the word.
 */
const chunks = (line: string) => `▁${line.replace(/ /g, '▁')}`.match(/▁+(?=▁[^▁])|▁?[^▁]+|▁+/g) ?? [];

/**
 * A SentencePiece BPE vocabulary trained on `corpus` as SentencePiece lays one out: <unk> <s> </s>,
 * the 256 byte pieces, the merged pieces in merge order, then the characters, most frequent first;
 * scores 0 for the first 259 and minus the rank after. Returns the merges the training made too.
 */
function trainSpm(corpus: string, n: number, charsFirst = false): { tokens: string[]; scores: number[]; types: number[]; merges: [string, string][] } {
  const words = corpus.split('\n').flatMap(chunks).map((w) => Array.from(w));
  const merges: [string, string][] = [];
  for (let m = 0; m < n; m++) {
    const counts = new Map<string, number>();
    for (const w of words) for (let i = 0; i + 1 < w.length; i++) {
      const k = `${w[i]}\u0000${w[i + 1]}`;
      counts.set(k, (counts.get(k) ?? 0) + 1);
    }
    let best = '';
    let most = 1;
    for (const [k, c] of counts) if (c > most) [best, most] = [k, c];
    if (!best) break;
    const [l, r] = best.split('\u0000') as [string, string];
    merges.push([l, r]);
    for (const w of words) for (let i = 0; i + 1 < w.length; i++) if (w[i] === l && w[i + 1] === r) w.splice(i, 2, l + r);
  }
  const pieces = [...new Set(merges.map(([l, r]) => l + r))];
  const freq = new Map<string, number>();
  for (const c of Array.from(corpus.split('\n').flatMap(chunks).join(''))) freq.set(c, (freq.get(c) ?? 0) + 1);
  const chars = [...freq.keys()].filter((c) => !pieces.includes(c)).sort((a, b) => freq.get(b)! - freq.get(a)! || (a < b ? -1 : 1));
  // charsFirst: the layout of a tokenizers-trained tokenizer.json (the alphabet, then each merge's piece).
  const tokens = [...SPECIALS, ...BYTE_TOKENS, ...(charsFirst ? [...chars.sort(), ...pieces] : [...pieces, ...chars])];
  const types = tokens.map((_, i) => (i === 0 ? 2 : i < 3 ? 3 : i < FIRST_PIECE ? 6 : 1));
  const scores = tokens.map((_, i) => (i < FIRST_PIECE ? 0 : -(i - FIRST_PIECE)));
  return { tokens, scores, types, merges };
}

/**
 * transformers' generate_merges, transcribed: every split of each piece into two pieces of the
 * vocabulary; with scores (convert_slow_tokenizer, the Hub's files) ranked by score, then longer
 * left and right parts; without (transformers 5's SentencePieceExtractor) by id, then shorter parts.
 */
function hfGenerateMerges(tokens: readonly string[], scores?: readonly number[]): [string, string][] {
  const vocab = new Map(tokens.map((t, i) => [t, i]));
  const all: [string, string, number][] = [];
  tokens.forEach((piece, i) => {
    const cps = Array.from(piece);
    const local: [string, string, number][] = [];
    for (let k = 1; k < cps.length; k++) {
      const l = cps.slice(0, k).join('');
      const r = cps.slice(k).join('');
      if (vocab.has(l) && vocab.has(r)) local.push([l, r, scores ? scores[i]! : i]);
    }
    local.sort((a, b) => vocab.get(a[0])! - vocab.get(b[0])! || vocab.get(a[1])! - vocab.get(b[1])!);
    all.push(...local);
  });
  const len = (s: string) => Array.from(s).length;
  const cmp = (a: [string, string, number], b: [string, string, number]) => a[2] - b[2] || len(a[0]) - len(b[0]) || len(a[1]) - len(b[1]);
  // Python's sorted(reverse=True) keeps equal keys in their order, as a reversed comparator does.
  all.sort(scores ? (a, b) => cmp(b, a) : cmp);
  return all.map(([l, r]) => [l, r]);
}

type Prepend = 'first' | 'never' | 'legacy';

/** The tokenizer.json transformers' LlamaTokenizer(Fast) writes for a vocabulary and its merges. */
function hfLlamaJson(tokens: readonly string[], merges: [string, string][], prepend: Prepend): object {
  const special = SPECIALS.map((content, id) => ({ id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true }));
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: special,
    // Legacy: a normalizer that prepends '▁' to every text between special tokens.
    normalizer: prepend === 'legacy' ? { type: 'Sequence', normalizers: [{ type: 'Prepend', prepend: '▁' }, { type: 'Replace', pattern: { String: ' ' }, content: '▁' }] } : null,
    pre_tokenizer: prepend === 'legacy' ? null : { type: 'Metaspace', replacement: '▁', prepend_scheme: prepend, split: false },
    post_processor: {
      type: 'TemplateProcessing',
      single: [{ SpecialToken: { id: '<s>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
      pair: [{ SpecialToken: { id: '<s>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }, { SpecialToken: { id: '<s>', type_id: 1 } }, { Sequence: { id: 'B', type_id: 1 } }],
      special_tokens: { '<s>': { id: '<s>', ids: [1], tokens: ['<s>'] } },
    },
    decoder: {
      type: 'Sequence',
      decoders: [
        { type: 'Replace', pattern: { String: '▁' }, content: ' ' },
        { type: 'ByteFallback' },
        { type: 'Fuse' },
        ...(prepend === 'never' ? [] : [{ type: 'Strip', content: ' ', start: 1, stop: 0 }]),
      ],
    },
    model: {
      type: 'BPE', dropout: null, unk_token: '<unk>', continuing_subword_prefix: null, end_of_word_suffix: null,
      fuse_unk: true, byte_fallback: true, ignore_merges: false, vocab: Object.fromEntries(tokens.map((t, i) => [t, i])), merges,
    },
  };
}

const HF_CONFIG = { bos_token: '<s>', eos_token: '</s>', unk_token: '<unk>', add_bos_token: true, add_eos_token: false, clean_up_tokenization_spaces: false };

const CORPUS = [
  'The quick brown fox jumps over the lazy dog.',
  'the theory of everything: there is nothing here, hello hello help helpful',
  'x = 1; y = x ** 2  # ok; z = y // 3',
  'def f(x):',
  '    return x + 1',
  '        return [1, 2, 3]',
  'naïve café, déjà vu; 東京 東京都 京都',
  'numbers 10 100 1000 2024 3.14',
  '  two leading spaces   and runs   of spaces',
  'Hello World! Hello there, world of words and wonderful worlds.',
].join('\n');

const SPM = trainSpm(CORPUS, 300);
/** The same training laid out as a tokenizers-trained tokenizer.json lays it out. */
const HF_LAYOUT = trainSpm(CORPUS, 300, true);

function spmMeta(extra: [string, unknown][] = [], scores: readonly number[] = SPM.scores, vocab = SPM): Map<string, unknown> {
  return new Map<string, unknown>([
    ['tokenizer.ggml.model', 'llama'],
    ['tokenizer.ggml.tokens', vocab.tokens],
    ['tokenizer.ggml.scores', scores],
    ['tokenizer.ggml.token_type', vocab.types],
    ['tokenizer.ggml.bos_token_id', 1],
    ['tokenizer.ggml.eos_token_id', 2],
    ['tokenizer.ggml.unknown_token_id', 0],
    ...extra,
  ]);
}

const build = (meta: Map<string, unknown>) => {
  const t = ggufTokenizer(meta)!;
  return new Tokenizer(t.tokenizer!, t.tokenizerConfig);
};

/** Every text, alone, after a special token, and with BOS: the same ids and the same decoding. */
function expectSameAsHf(mine: Tokenizer, ref: Tokenizer, label: string) {
  const texts = [...HARD_TEXTS, ...TEXTS, ...CORPUS.split('\n'), CORPUS, '<s>hello</s> world', 'a</s>  b<unk>'];
  for (const text of texts) {
    const what = `${label} ${JSON.stringify(text)}`;
    const a = mine.encode(text, { add_special_tokens: false });
    const b = ref.encode(text, { add_special_tokens: false });
    expect(a.tokens, what).toEqual(b.tokens);
    expect(a.ids, what).toEqual(b.ids);
    expect(mine.encode(text).ids, what).toEqual(ref.encode(text).ids);
    if (!a.ids.length) continue;
    expect(mine.decode(a.ids), what).toBe(ref.decode(b.ids));
    expect(mine.decode(mine.encode(text).ids, { skip_special_tokens: true }), what).toBe(ref.decode(ref.encode(text).ids, { skip_special_tokens: true }));
  }
}

describe('ggufTokenizer: SentencePiece (llama) vocabularies encode as the tokenizer.json HF builds', () => {
  const ref = new Tokenizer(hfLlamaJson(SPM.tokens, hfGenerateMerges(SPM.tokens), 'first'), HF_CONFIG);

  it('the vocabulary is rich: merged pieces with ▁ runs, CJK and digits, and byte fallback for the rest', () => {
    expect(SPM.tokens.length).toBeGreaterThan(350);
    for (const p of ['▁▁', '▁▁▁▁', '▁the', '▁東京', '▁1']) expect(SPM.tokens, p).toContain(p);
    expect(ref.encode('😀', { add_special_tokens: false }).tokens).toEqual(['▁', '<0xF0>', '<0x9F>', '<0x98>', '<0x80>']);
    // transformers' two orders of derived merges tokenize this corpus alike (its scores follow its ids).
    const byScore = new Tokenizer(hfLlamaJson(SPM.tokens, hfGenerateMerges(SPM.tokens, SPM.scores), 'first'), HF_CONFIG);
    for (const text of [...HARD_TEXTS, ...CORPUS.split('\n')]) expect(byScore.encode(text).ids, text).toEqual(ref.encode(text).ids);
  });

  it('scores from a SentencePiece model (merges derived)', () => {
    expectSameAsHf(build(spmMeta()), ref, 'scores');
  });

  it("scores llama.cpp's converter writes from a tokenizer.json (-1000 for every token): the ids rank the merges", () => {
    expectSameAsHf(build(spmMeta([], SPM.tokens.map(() => -1000))), ref, '-1000');
  });

  it("merges written in the file are the ones applied (a tokenizer.json's own, not the vocabulary's derived)", () => {
    const trained = new Tokenizer(hfLlamaJson(SPM.tokens, SPM.merges, 'first'), HF_CONFIG);
    const meta = spmMeta([['tokenizer.ggml.merges', SPM.merges.map(([l, r]) => `${l} ${r}`)]], SPM.tokens.map(() => 0));
    expectSameAsHf(build(meta), trained, 'merges');
  });

  it('a tokenizers-trained vocabulary (alphabet first) converted by llama.cpp (-1000 scores), with and without its merges', () => {
    const minus1000 = HF_LAYOUT.tokens.map(() => -1000);
    const derived = new Tokenizer(hfLlamaJson(HF_LAYOUT.tokens, hfGenerateMerges(HF_LAYOUT.tokens), 'first'), HF_CONFIG);
    expectSameAsHf(build(spmMeta([], minus1000, HF_LAYOUT)), derived, 'alphabet first, derived');
    const trained = new Tokenizer(hfLlamaJson(HF_LAYOUT.tokens, HF_LAYOUT.merges, 'first'), HF_CONFIG);
    const withMerges = spmMeta([['tokenizer.ggml.merges', HF_LAYOUT.merges.map(([l, r]) => `${l} ${r}`)]], minus1000, HF_LAYOUT);
    expectSameAsHf(build(withMerges), trained, 'alphabet first, merges');
  });

  it('without add_space_prefix no ▁ is prepended and decoding strips nothing', () => {
    const never = new Tokenizer(hfLlamaJson(SPM.tokens, hfGenerateMerges(SPM.tokens), 'never'), HF_CONFIG);
    const mine = build(spmMeta([['tokenizer.ggml.add_space_prefix', false]]));
    expectSameAsHf(mine, never, 'no prefix');
    expect(mine.encode('hello world', { add_special_tokens: false }).tokens[0]).not.toMatch(/^▁/);
  });

  it('leading spaces and special tokens: one ▁ before the text only, as HF (not the legacy normalizer, not llama.cpp)', () => {
    const mine = build(spmMeta());
    const tokens = (s: string) => mine.encode(s, { add_special_tokens: false }).tokens;
    expect(tokens('  spaces').join('')).toBe('▁▁spaces');
    expect(tokens('hello').join('')).toBe('▁hello');
    expect(tokens('<s>hello').slice(1).join('')).toBe('hello');
    const legacy = new Tokenizer(hfLlamaJson(SPM.tokens, hfGenerateMerges(SPM.tokens), 'legacy'), HF_CONFIG);
    expect(legacy.encode('  spaces', { add_special_tokens: false }).tokens.join('')).toBe('▁▁▁spaces');
  });

  it('decodes back: ▁ to spaces, byte pieces fused into UTF-8, the one prepended space stripped', () => {
    const mine = build(spmMeta());
    for (const text of [...HARD_TEXTS, ...TEXTS]) {
      const ids = mine.encode(text, { add_special_tokens: false }).ids;
      if (!ids.length) continue;
      // A leading space becomes the ▁ HF would have prepended, and decoding strips it.
      expect(mine.decode(ids), JSON.stringify(text)).toBe(text.startsWith(' ') ? text.slice(1) : text);
    }
    expect(mine.encode('ß', { add_special_tokens: false }).tokens).toEqual(['▁', '<0xC3>', '<0x9F>']);
    expect(mine.decode(mine.encode('naïve café — 東京 😀').ids, { skip_special_tokens: true })).toBe('naïve café — 東京 😀');
  });

  it('adds BOS by default (llama.cpp SPM), special tokens stay whole, the config names them', () => {
    const tok = build(spmMeta());
    const ids = tok.encode('hello world').ids;
    expect(ids[0]).toBe(1);
    expect(ids.slice(1)).toEqual(tok.encode('hello world', { add_special_tokens: false }).ids);
    expect(tok.encode('<s>hello</s>', { add_special_tokens: false }).ids).toEqual([1, ...ref.encode('<s>hello', { add_special_tokens: false }).ids.slice(1), 2]);
    expect(tok.decode(ids, { skip_special_tokens: true })).toBe('hello world');
    expect(ggufTokenizer(spmMeta())!.tokenizerConfig).toEqual({
      bos_token: '<s>', eos_token: '</s>', unk_token: '<unk>', pad_token: null, add_bos_token: true, add_eos_token: false, clean_up_tokenization_spaces: false,
    });
    const eos = build(spmMeta([['tokenizer.ggml.add_bos_token', false], ['tokenizer.ggml.add_eos_token', true]]));
    expect(eos.encode('hello').ids).toEqual([...ref.encode('hello', { add_special_tokens: false }).ids, 2]);
  });

  it('without token types, the special ids are the control tokens', () => {
    const m = spmMeta();
    m.delete('tokenizer.ggml.token_type');
    const nt = ggufTokenizer(m)!;
    const addedTokens = (nt.tokenizer as { added_tokens: { id: number; special: boolean }[] }).added_tokens;
    expect(addedTokens.map((a) => [a.id, a.special])).toEqual([[0, true], [1, true], [2, true]]);
    expect(new Tokenizer(nt.tokenizer!, nt.tokenizerConfig).encode('<s>hello world').ids).toEqual(build(spmMeta()).encode('<s>hello world').ids);
  });

  it('derives merges by score, then the piece id, then the shorter left part', () => {
    // ▁ab splits as ▁+ab and ▁a+b: the same piece, the shorter left part first.
    const toks = ['▁', 'a', 'b', 'ab', '▁a', '▁ab', 'c', 'bc', 'abc'];
    const sc = [0, 0, 0, -1, -2, -3, 0, -4, -5];
    const expected: [string, string][] = [['a', 'b'], ['▁', 'a'], ['▁', 'ab'], ['▁a', 'b'], ['b', 'c'], ['a', 'bc'], ['ab', 'c']];
    expect(spmMerges(toks, sc)).toEqual(expected);
    // Equal scores: the id decides, as transformers 5 ranks them.
    expect(spmMerges(toks, toks.map(() => -1000))).toEqual(hfGenerateMerges(toks));
  });

  it('equal scores: an earlier piece is merged before a longer left part (ranked by length, "quick" lost "ui")', () => {
    const tokens = [...SPECIALS, ...BYTE_TOKENS, '▁', 'q', 'u', 'i', 'c', 'k', '▁q', 'ui', '▁qu', 'ck', '▁quick'];
    const types = tokens.map((_, i) => (i === 0 ? 2 : i < 3 ? 3 : i < FIRST_PIECE ? 6 : 1));
    const meta = spmMeta([['tokenizer.ggml.tokens', tokens], ['tokenizer.ggml.token_type', types]], tokens.map(() => -1000));
    const ref = new Tokenizer(hfLlamaJson(tokens, hfGenerateMerges(tokens), 'first'), HF_CONFIG);
    for (const text of ['qui', 'quick', 'quick quick', ' qu']) {
      expect(build(meta).encode(text).ids, text).toEqual(ref.encode(text).ids);
    }
    expect(build(meta).encode('qui', { add_special_tokens: false }).tokens).toEqual(['▁q', 'ui']);
  });
});
