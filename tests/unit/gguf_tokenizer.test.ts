import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Tokenizer } from '@huggingface/tokenizers';
import { describe, expect, it } from 'vitest';
import { loadGGUF } from '../../src/models/gguf';
import { GGUF_PRE_TOKENIZERS, ggufTokenizer, spmMerges } from '../../src/models/gguf_tokenizer';

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
    const texts = [...TEXTS, `${special[0]}Hello${special[1]} world${special.at(-1)}\n`, special.join(' ')];
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
    for (const text of TEXTS) {
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
// SentencePiece ('llama') vocabularies

const BYTE_TOKENS = Array.from({ length: 256 }, (_, i) => `<0x${i.toString(16).toUpperCase().padStart(2, '0')}>`);

/** A small SentencePiece BPE vocabulary trained on `corpus` (pieces reachable by merges; scores = -rank). */
function trainSpm(corpus: string, merges: number): { tokens: string[]; scores: number[]; types: number[] } {
  const words = corpus.split(/\s+/).filter(Boolean).map((w) => Array.from(`▁${w}`));
  const pieces: string[] = [];
  for (let m = 0; m < merges; m++) {
    const counts = new Map<string, number>();
    for (const w of words) for (let i = 0; i + 1 < w.length; i++) {
      const k = `${w[i]}\u0000${w[i + 1]}`;
      counts.set(k, (counts.get(k) ?? 0) + 1);
    }
    let best = '';
    let n = 0;
    for (const [k, c] of counts) if (c > n) [best, n] = [k, c];
    if (!n) break;
    const [l, r] = best.split('\u0000') as [string, string];
    pieces.push(l + r);
    for (const w of words) for (let i = 0; i + 1 < w.length; i++) if (w[i] === l && w[i + 1] === r) w.splice(i, 2, l + r);
  }
  const chars = [...new Set(Array.from(corpus.replace(/\s+/g, '▁')))].sort();
  const tokens = ['<unk>', '<s>', '</s>', ...BYTE_TOKENS, ...pieces, ...chars.filter((c) => !pieces.includes(c))];
  const types = tokens.map((t, i) => (i === 0 ? 2 : i < 3 ? 3 : i < 259 ? 6 : 1));
  const scores = tokens.map((_, i) => (i < 259 ? 0 : -i));
  return { tokens, scores, types };
}

/** llama.cpp's SPM tokenizer: merge the best-scoring adjacent pair (leftmost on ties), bytes for the rest. */
function referenceSpm(text: string, tokens: string[], scores: number[]): number[] {
  const ids = new Map(tokens.map((t, i) => [t, i]));
  const syms = Array.from(`▁${text.replace(/ /g, '▁')}`);
  for (;;) {
    let best = -1;
    let bestScore = -Infinity;
    for (let i = 0; i + 1 < syms.length; i++) {
      const id = ids.get(syms[i]! + syms[i + 1]!);
      if (id !== undefined && id >= 259 && scores[id]! > bestScore) [best, bestScore] = [i, scores[id]!];
    }
    if (best < 0) break;
    syms.splice(best, 2, syms[best]! + syms[best + 1]!);
  }
  return syms.flatMap((s) => {
    const id = ids.get(s);
    if (id !== undefined && id >= 259) return [id];
    return [...new TextEncoder().encode(s)].map((b) => 3 + b);
  });
}

const CORPUS = 'hello world the quick brown fox jumps over the lazy dog hello there world of words wonderful worlds ' +
  'the theory of everything there is nothing here hello hello help helpful';

function spmMeta(extra: [string, unknown][] = []): Map<string, unknown> {
  const { tokens, scores, types } = trainSpm(CORPUS, 60);
  return new Map<string, unknown>([
    ['tokenizer.ggml.model', 'llama'],
    ['tokenizer.ggml.tokens', tokens],
    ['tokenizer.ggml.scores', scores],
    ['tokenizer.ggml.token_type', types],
    ['tokenizer.ggml.bos_token_id', 1],
    ['tokenizer.ggml.eos_token_id', 2],
    ['tokenizer.ggml.unknown_token_id', 0],
    ...extra,
  ]);
}

describe('ggufTokenizer: SentencePiece (llama) vocabularies', () => {
  const meta = spmMeta();
  const tokens = meta.get('tokenizer.ggml.tokens') as string[];
  const scores = meta.get('tokenizer.ggml.scores') as number[];
  const t = ggufTokenizer(meta)!;
  const tok = new Tokenizer(t.tokenizer!, t.tokenizerConfig);

  it('encodes as llama.cpp does, with byte fallback, and decodes back', () => {
    const texts = ['hello world', 'the theory of everything', 'helpful wonderful worlds', 'hello  there', 'zebra qxj', 'héllo wörld 🦙', '12 + 34 = 46', 'tabs\tand\nnewlines\n', ' leading space'];
    for (const text of texts) {
      const ids = tok.encode(text, { add_special_tokens: false }).ids;
      expect(ids, JSON.stringify(text)).toEqual(referenceSpm(text, tokens, scores));
      expect(tok.decode(ids), JSON.stringify(text)).toBe(text);
    }
    expect(tok.encode('hello world', { add_special_tokens: false }).tokens).toEqual(['▁hello', '▁world']);
    expect(tok.encode('é', { add_special_tokens: false }).tokens).toEqual(['▁', '<0xC3>', '<0xA9>']);
  });

  it('adds BOS by default (llama.cpp SPM), special tokens stay whole, the config names them', () => {
    const ids = tok.encode('hello world').ids;
    expect(ids[0]).toBe(1);
    expect(ids.slice(1)).toEqual(tok.encode('hello world', { add_special_tokens: false }).ids);
    expect(tok.encode('<s>hello</s>', { add_special_tokens: false }).ids).toEqual([1, ...referenceSpm('hello', tokens, scores), 2]);
    expect(tok.decode(ids, { skip_special_tokens: true })).toBe('hello world');
    expect(t.tokenizerConfig).toEqual({
      bos_token: '<s>', eos_token: '</s>', unk_token: '<unk>', pad_token: null, add_bos_token: true, add_eos_token: false, clean_up_tokenization_spaces: false,
    });
    const eos = ggufTokenizer(spmMeta([['tokenizer.ggml.add_bos_token', false], ['tokenizer.ggml.add_eos_token', true]]))!;
    expect(new Tokenizer(eos.tokenizer!, eos.tokenizerConfig).encode('hello').ids).toEqual([...referenceSpm('hello', tokens, scores), 2]);
  });

  it('without token types, the special ids are the control tokens', () => {
    const m = spmMeta();
    m.delete('tokenizer.ggml.token_type');
    const nt = ggufTokenizer(m)!;
    const added = (nt.tokenizer as { added_tokens: { id: number; special: boolean }[] }).added_tokens;
    expect(added.map((a) => [a.id, a.special])).toEqual([[0, true], [1, true], [2, true]]);
    const tk = new Tokenizer(nt.tokenizer!, nt.tokenizerConfig);
    expect(tk.encode('<s>hello world').ids).toEqual(tok.encode('<s>hello world').ids);
  });

  it('without add_space_prefix no ▁ is prepended', () => {
    const np = ggufTokenizer(spmMeta([['tokenizer.ggml.add_space_prefix', false]]))!;
    const tk = new Tokenizer(np.tokenizer!, np.tokenizerConfig);
    expect(tk.encode('hello world', { add_special_tokens: false }).tokens[0]).not.toBe('▁hello');
    expect(tk.decode(tk.encode('hello world', { add_special_tokens: false }).ids)).toBe('hello world');
  });

  it('derives merges as transformers does: by score, then longer left and right parts, then ids', () => {
    // ▁ab splits as ▁+ab and ▁a+b: equal score, the longer left part first.
    const toks = ['▁', 'a', 'b', 'ab', '▁a', '▁ab', 'c', 'bc', 'abc'];
    const sc = [0, 0, 0, -1, -2, -3, 0, -4, -5];
    expect(spmMerges(toks, sc)).toEqual([
      ['a', 'b'],
      ['▁', 'a'],
      ['▁a', 'b'],
      ['▁', 'ab'],
      ['b', 'c'],
      ['ab', 'c'],
      ['a', 'bc'],
    ]);
  });
});
