// The tokenizer.json (for @huggingface/tokenizers) and tokenizer_config.json a GGUF file's
// `tokenizer.*` metadata stands for. Two vocabulary kinds are built:
//
// - `gpt2`: byte-level BPE (tokens, merges, token types). The pre-tokenizer is chosen by
//   `tokenizer.ggml.pre` as llama.cpp's llama-vocab.cpp chooses it, written in the form the models'
//   own tokenizer.json files use (a Sequence of isolating Splits, then ByteLevel without its regex).
//   CONTROL tokens become special added tokens, USER_DEFINED ones plain added tokens, as they were.
// - `llama`: SentencePiece BPE (tokens, scores, token types, <0xXX> byte tokens), in the shape
//   transformers' LlamaTokenizer gives it today: byte fallback, no normalizer, a Metaspace
//   pre-tokenizer (spaces to '▁', one '▁' before the text unless it starts with a space, none after
//   a special token), the file's merges where it has them, else merges ranked by the merged piece's
//   score and then its id. No GGUF says whether its tokenizer.json was 'legacy' (a normalizer that
//   prepends '▁' to every segment, as llama.cpp does); the current shape is the one transformers 5's
//   LlamaTokenizer builds (legacy=False), and the legacy one turns n leading spaces into n + 1 '▁'.
//
// add_bos/add_eos (from the metadata, else llama.cpp's default for the vocabulary) become a
// TemplateProcessing post-processor, so `encode(text)` adds BOS exactly when llama.cpp would.

import { check } from '../core/errors.js';

const OP = 'ggufTokenizer';

/** llama.cpp's llama_token_type (gguf TokenType). */
const enum TokenType {
  NORMAL = 1,
  UNKNOWN = 2,
  CONTROL = 3,
  USER_DEFINED = 4,
  UNUSED = 5,
  BYTE = 6,
}

/** A pre-tokenizer family of llama-vocab.cpp: its split regexes (tokenizer.json's Oniguruma syntax). */
interface PreTokenizer {
  regexes: readonly string[];
  /** A word that is itself a token is emitted whole (llama.cpp and HF's ignore_merges). */
  ignoreMerges?: boolean;
  /** llama.cpp adds BOS by default for this family. */
  addBos?: boolean;
  /** llama.cpp's clean_spaces (HF's clean_up_tokenization_spaces) is false for this family. */
  keepSpaces?: boolean;
}

const GPT2_REGEX = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
const LLAMA3_REGEX = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const QWEN2_REGEX = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const PORO_REGEX = ' ?[^(\\s|.,!?…。，、।۔،)]+';
const CJK = '[一-龥ࠀ-一가-퟿]+';
const CASED_WORD = '[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]';
const LOWER_WORD = '[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]';

const PRE = {
  default: { regexes: ['[\\p{P}\\$\\+<=>\\^~\\|]+', GPT2_REGEX, '\\p{N}+', '[0-9][0-9][0-9]'] },
  gpt2: { regexes: [GPT2_REGEX] },
  llama3: { regexes: [LLAMA3_REGEX], ignoreMerges: true, addBos: true },
  llama3Regex: { regexes: [LLAMA3_REGEX] },
  qwen2: { regexes: [QWEN2_REGEX], keepSpaces: true },
  qwen2Regex: { regexes: [QWEN2_REGEX] },
  deepseekLlm: {
    // Escaped code points are canonical singletons (U+1F7D, U+2126 ...) an editor's NFC would replace.
    regexes: [
      '[\\r\\n]',
      '\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-\u1F7Dᾀ-ᾴᾶ-ᾼ\u1FBEῂ-ῄῆ-ῌῐ-\u1FD3ῖ-\u1FDBῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤ\u2126ℨ\u212A-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ\u{10400}-\u{1044F}𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+',
      '\\s?[!-/:-~！-／：-～‘-‟　-。]+',
      '\\s+$',
      CJK,
      '\\p{N}+',
    ],
    keepSpaces: true,
  },
  deepseekCoder: { regexes: ['[\\r\\n]', '\\s?\\p{L}+', '\\s?\\p{P}+', CJK, '\\p{N}'], keepSpaces: true },
  deepseekV3: {
    regexes: [
      '\\p{N}{1,3}',
      '[一-龥぀-ゟ゠-ヿ]+',
      "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    ],
    keepSpaces: true,
  },
  falcon: { regexes: ['[\\p{P}\\$\\+<=>\\^~\\|`]+', GPT2_REGEX, '[0-9][0-9][0-9]'] },
  starcoder: { regexes: ['\\p{N}', GPT2_REGEX] },
  poro: { regexes: [PORO_REGEX] },
  viking: { regexes: [PORO_REGEX, '\\p{N}'], keepSpaces: true },
  tekken: {
    regexes: [
      `[^\\r\\n\\p{L}\\p{N}]?${CASED_WORD}*${LOWER_WORD}+|[^\\r\\n\\p{L}\\p{N}]?${CASED_WORD}+${LOWER_WORD}*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+`,
    ],
    ignoreMerges: true,
    addBos: true,
    keepSpaces: true,
  },
  gpt4o: {
    regexes: [
      `[^\\r\\n\\p{L}\\p{N}]?${CASED_WORD}*${LOWER_WORD}+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?${CASED_WORD}+${LOWER_WORD}*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+`,
    ],
    keepSpaces: true,
  },
  seedCoder: {
    regexes: ["(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"],
    keepSpaces: true,
  },
} satisfies Record<string, PreTokenizer>;

const keep = (p: PreTokenizer): PreTokenizer => ({ ...p, keepSpaces: true });

/**
 * `tokenizer.ggml.pre` → pre-tokenizer, as llama-vocab.cpp maps the names. Names it gives custom
 * code (kimi-k2, superbpe, afmoe, bailingmoe, chameleon) have no tokenizer.json form here.
 */
const PRE_BY_NAME: Readonly<Record<string, PreTokenizer>> = {
  default: PRE.default,
  ...Object.fromEntries(['llama3', 'llama-v3', 'llama-bpe', 'falcon3', 'falcon-h1', 'pixtral', 'midm-2.0', 'lfm2', 'jina-v5-nano'].map((n) => [n, PRE.llama3])),
  dbrx: PRE.llama3Regex,
  'smaug-bpe': PRE.llama3Regex,
  glm4: PRE.llama3Regex,
  'chatglm-bpe': PRE.llama3Regex,
  'deepseek-llm': PRE.deepseekLlm,
  'deepseek-coder': PRE.deepseekCoder,
  'deepseek-v3': PRE.deepseekV3,
  'hunyuan-dense': PRE.deepseekV3,
  falcon: PRE.falcon,
  ...Object.fromEntries(['gpt-2', 'phi-2', 'jina-es', 'jina-de', 'gigachat', 'jina-v2-es', 'jina-v2-de', 'a.x-4.0', 'mellum', 'exaone4',
    'jina-v1-en', 'jina-v2-code', 'roberta-bpe', 'mpt', 'olmo', 'jais'].map((n) => [n, PRE.gpt2])),
  trillion: keep(PRE.gpt2),
  'granite-docling': keep(PRE.gpt2),
  ...Object.fromEntries(['starcoder', 'refact', 'codeshell', 'exaone', 'minerva-7b'].map((n) => [n, PRE.starcoder])),
  'command-r': keep(PRE.starcoder),
  smollm: keep(PRE.starcoder),
  ...Object.fromEntries(['qwen2', 'deepseek-r1-qwen', 'kormo', 'hunyuan', 'grok-2'].map((n) => [n, PRE.qwen2])),
  megrez: PRE.qwen2Regex,
  stablelm2: PRE.qwen2Regex,
  'poro-chat': keep(PRE.poro),
  bloom: PRE.poro,
  'gpt3-finnish': PRE.poro,
  viking: PRE.viking,
  tekken: PRE.tekken,
  'gpt-4o': PRE.gpt4o,
  llama4: PRE.gpt4o,
  'minimax-m2': PRE.gpt4o,
  'seed-coder': PRE.seedCoder,
};
/** The `tokenizer.ggml.pre` names with a tokenizer.json form (any other gpt2 name gets llama.cpp's 'default'). */
export const GGUF_PRE_TOKENIZERS: readonly string[] = Object.freeze(Object.keys(PRE_BY_NAME));
/** Names llama.cpp tokenizes with custom code: no tokenizer.json is built for them. */
const CUSTOM_PRE = new Set(['kimi-k2', 'superbpe', 'afmoe', 'bailingmoe', 'bailingmoe2', 'llada-moe', 'chameleon']);

type Meta = ReadonlyMap<string, unknown>;

/** Typed reads of `tokenizer.*` keys; messages name the file and the key. */
class Keys {
  constructor(
    private readonly m: Meta,
    private readonly name: string,
  ) {}

  where(key: string): string {
    return `${this.name} metadata '${key}'`;
  }

  get(key: string): unknown {
    return this.m.get(key);
  }

  strings(key: string): string[] {
    const v = this.m.get(key);
    check(Array.isArray(v) && v.every((x) => typeof x === 'string'), OP, this.where(key), 'an array of strings', v);
    return v as string[];
  }

  /** One number per token, or undefined when absent. */
  numbers(key: string, n: number): number[] | undefined {
    const v = this.m.get(key);
    if (v === undefined) return undefined;
    check(Array.isArray(v) && v.length === n && v.every((x) => typeof x === 'number'), OP, this.where(key), `an array of ${n} numbers (one per token)`, v);
    return v as number[];
  }

  tokenId(key: string, n: number): number | undefined {
    const v = this.m.get(key);
    if (v === undefined) return undefined;
    check(typeof v === 'number' && Number.isInteger(v) && v >= 0 && v < n, OP, this.where(key), `a token id below ${n}`, v);
    return v as number;
  }

  bool(key: string): boolean | undefined {
    const v = this.m.get(key);
    if (v === undefined) return undefined;
    check(typeof v === 'boolean', OP, this.where(key), 'true or false', v);
    return v as boolean;
  }
}

interface AddedToken {
  id: number;
  content: string;
  single_word: false;
  lstrip: false;
  rstrip: false;
  normalized: false;
  special: boolean;
}

const added = (id: number, content: string, special: boolean): AddedToken => ({
  id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special,
});

/** BOS/EOS around each sequence, as tokenizers' TemplateProcessing writes it. */
function templateProcessing(tokens: string[], bos: number | undefined, eos: number | undefined): object | null {
  if (bos === undefined && eos === undefined) return null;
  const special = (id: number | undefined) => (id === undefined ? [] : [{ SpecialToken: { id: tokens[id]!, type_id: 0 } }]);
  const seq = (id: 'A' | 'B', type_id: number) => ({ Sequence: { id, type_id } });
  const specials: Record<string, object> = {};
  for (const id of [bos, eos]) if (id !== undefined) specials[tokens[id]!] = { id: tokens[id]!, ids: [id], tokens: [tokens[id]!] };
  return {
    type: 'TemplateProcessing',
    single: [...special(bos), seq('A', 0), ...special(eos)],
    pair: [...special(bos), seq('A', 0), ...special(eos), ...special(bos), seq('B', 1), ...special(eos)],
    special_tokens: specials,
  };
}

/** `tokenizer.ggml.merges` as pairs. */
function fileMerges(m: Keys): [string, string][] {
  return m.strings('tokenizer.ggml.merges').map((s) => {
    // llama.cpp splits at the first space after the first character.
    const at = s.indexOf(' ', 1);
    check(at > 0, OP, m.where('tokenizer.ggml.merges'), "entries 'left right'", s);
    return [s.slice(0, at), s.slice(at + 1)];
  });
}

/** Byte-level BPE (tokenizer.ggml.model 'gpt2'). */
function gpt2Tokenizer(m: Keys, tokens: string[], types: (id: number) => number, post: object | null, pre: PreTokenizer): object {
  const vocab: Record<string, number> = {};
  const addedTokens: AddedToken[] = [];
  tokens.forEach((t, id) => {
    const type = types(id);
    // Added tokens hold their text as typed (the converter decoded them); the vocabulary holds
    // byte-level strings.
    if (type === TokenType.CONTROL || type === TokenType.USER_DEFINED) addedTokens.push(added(id, t, type === TokenType.CONTROL));
    else vocab[t] = id;
  });
  const merges = fileMerges(m);
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: addedTokens,
    normalizer: null,
    pre_tokenizer: {
      type: 'Sequence',
      pretokenizers: [
        ...pre.regexes.map((r) => ({ type: 'Split', pattern: { Regex: r }, behavior: 'Isolated', invert: false })),
        { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: false },
      ],
    },
    post_processor: post,
    decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: null,
      end_of_word_suffix: null,
      fuse_unk: false,
      byte_fallback: false,
      ignore_merges: pre.ignoreMerges ?? false,
      vocab,
      merges,
    },
  };
}

/**
 * Merges of a SentencePiece BPE vocabulary that has none written: every split of a piece into two
 * pieces of the vocabulary, ranked by the piece's score (highest first), then by its id (lowest
 * first), then by the length of the left part (shortest first). transformers derives them either by
 * score (convert_slow_tokenizer's LlamaConverter, the tokenizer.json files of the Hub) or by id
 * (transformers 5's SentencePieceExtractor, id then left length); a SentencePiece model numbers its
 * pieces in score order, so the two agree there, and where a file's scores say nothing (llama.cpp's
 * converter writes -1000 for every token of a model it read from tokenizer.json) the id decides.
 * Where a string occurs twice, the later id is the one it maps to, as in a Python dict and llama.cpp.
 */
export function spmMerges(tokens: readonly string[], scores: readonly number[]): [string, string][] {
  const ids = new Map<string, number>();
  tokens.forEach((t, i) => ids.set(t, i));
  const all: { l: string; r: string; score: number; id: number; ll: number }[] = [];
  for (const [piece, id] of ids) {
    const cps = Array.from(piece);
    for (let k = 1; k < cps.length; k++) {
      const l = cps.slice(0, k).join('');
      const r = cps.slice(k).join('');
      if (ids.has(l) && ids.has(r)) all.push({ l, r, score: scores[id]!, id, ll: k });
    }
  }
  all.sort((a, b) => b.score - a.score || a.id - b.id || a.ll - b.ll);
  return all.map((x) => [x.l, x.r]);
}

/** SentencePiece BPE (tokenizer.ggml.model 'llama') in the shape transformers' LlamaTokenizer has. */
function spmTokenizer(m: Keys, tokens: string[], types: (id: number) => number, post: object | null, unk: number | undefined): object {
  const scores = m.numbers('tokenizer.ggml.scores', tokens.length) ?? tokens.map(() => 0);
  const vocab: Record<string, number> = {};
  tokens.forEach((t, i) => {
    vocab[t] = i;
  });
  const addedTokens: AddedToken[] = [];
  tokens.forEach((t, id) => {
    const type = types(id);
    if (type === TokenType.CONTROL || type === TokenType.UNKNOWN) addedTokens.push(added(id, t, true));
    else if (type === TokenType.USER_DEFINED) addedTokens.push(added(id, t, false));
  });
  // llama.cpp's llm_tokenizer_spm merges by score alone; a file converted from a tokenizer.json may
  // carry that file's own merges, which are then the ones HF applies.
  const merges = m.get('tokenizer.ggml.merges') === undefined ? spmMerges(tokens, scores) : fileMerges(m);
  const addPrefix = m.bool('tokenizer.ggml.add_space_prefix') ?? true;
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: addedTokens,
    normalizer: null,
    pre_tokenizer: { type: 'Metaspace', replacement: '▁', prepend_scheme: addPrefix ? 'first' : 'never', split: false },
    post_processor: post,
    decoder: {
      type: 'Sequence',
      decoders: [
        { type: 'Replace', pattern: { String: '▁' }, content: ' ' },
        { type: 'ByteFallback' },
        { type: 'Fuse' },
        ...(addPrefix ? [{ type: 'Strip', content: ' ', start: 1, stop: 0 }] : []),
      ],
    },
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: unk === undefined ? null : tokens[unk]!,
      continuing_subword_prefix: null,
      end_of_word_suffix: null,
      fuse_unk: true,
      byte_fallback: true,
      ignore_merges: false,
      vocab,
      merges,
    },
  };
}

export interface GGUFTokenizer {
  /** tokenizer.json; absent for a vocabulary kind or pre-tokenizer with no tokenizer.json form here. */
  tokenizer?: object;
  /** tokenizer_config.json: chat_template, the special tokens' text, add_bos_token / add_eos_token ... */
  tokenizerConfig: object;
}

/**
 * The tokenizer.json and tokenizer_config.json equivalents of a GGUF file's `tokenizer.*` metadata,
 * or undefined when the file has no vocabulary.
 */
export function ggufTokenizer(metadata: Meta, o: { name?: string } = {}): GGUFTokenizer | undefined {
  const m = new Keys(metadata, o.name ?? 'gguf');
  const model = m.get('tokenizer.ggml.model');
  if (model === undefined || !metadata.has('tokenizer.ggml.tokens')) return undefined;
  check(typeof model === 'string', OP, m.where('tokenizer.ggml.model'), 'a string', model);
  const tokens = m.strings('tokenizer.ggml.tokens');
  const n = tokens.length;
  const tokenTypes = m.numbers('tokenizer.ggml.token_type', n);
  const id = (k: string) => m.tokenId(`tokenizer.ggml.${k}`, n);
  const spm = model === 'llama';
  // llama.cpp's defaults where the metadata says nothing (SPM: <unk> 0, <s> 1, </s> 2).
  const bos = id('bos_token_id') ?? (spm ? 1 : undefined);
  const eos = id('eos_token_id') ?? (spm ? 2 : undefined);
  const unk = id('unknown_token_id') ?? (spm ? 0 : undefined);
  const pad = id('padding_token_id');

  const preName = m.get('tokenizer.ggml.pre');
  const pre = model === 'gpt2' && !CUSTOM_PRE.has(preName as string) ? PRE_BY_NAME[preName as string] ?? PRE.default : undefined;
  const addBos = m.bool('tokenizer.ggml.add_bos_token') ?? (spm || (pre?.addBos ?? false));
  const addEos = m.bool('tokenizer.ggml.add_eos_token') ?? false;
  check(!addBos || bos !== undefined, OP, m.where('tokenizer.ggml.bos_token_id'), 'a BOS token (add_bos_token is set)', 'none');
  check(!addEos || eos !== undefined, OP, m.where('tokenizer.ggml.eos_token_id'), 'an EOS token (add_eos_token is set)', 'none');
  const post = templateProcessing(tokens, addBos ? bos : undefined, addEos ? eos : undefined);

  // Without token types, the special ids the metadata names are the control tokens.
  const specials = new Set([bos, eos, pad, id('eot_token_id'), id('eom_token_id')]);
  const typeOf = (i: number) => tokenTypes?.[i] ?? (i === unk ? TokenType.UNKNOWN : specials.has(i) ? TokenType.CONTROL : TokenType.NORMAL);
  let tokenizer: object | undefined;
  if (spm) tokenizer = spmTokenizer(m, tokens, typeOf, post, unk);
  else if (pre) tokenizer = gpt2Tokenizer(m, tokens, typeOf, post, pre);

  const text = (i: number | undefined) => (i === undefined ? null : tokens[i]!);
  const config: Record<string, unknown> = {
    bos_token: text(bos),
    eos_token: text(eos),
    unk_token: text(unk),
    pad_token: text(pad),
    add_bos_token: addBos,
    add_eos_token: addEos,
    clean_up_tokenization_spaces: !spm && !(pre?.keepSpaces ?? false),
  };
  const template = m.get('tokenizer.chat_template');
  if (typeof template === 'string') config.chat_template = template;
  return { tokenizer, tokenizerConfig: config };
}
