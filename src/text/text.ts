// Text in, text out (SPEC.md §9 "Text"): a tokenizer over tokenizer.json (@huggingface/tokenizers),
// the chat template of tokenizer_config.json (@huggingface/jinja), incremental detokenization that
// never splits a character or emits text a later token rewrites, and stop strings matched across
// token boundaries.
import { Tokenizer } from '@huggingface/tokenizers';
import { Template } from '@huggingface/jinja';
import { WebinferError, check, fail, fmt } from '../core/errors.js';

type Json = Record<string, unknown>;

const isObject = (x: unknown): x is Json => typeof x === 'object' && x !== null && !Array.isArray(x);
const isId = (x: unknown): x is number => typeof x === 'number' && Number.isInteger(x) && x >= 0;
const message = (e: unknown): string => (e instanceof Error ? e.message : String(e));
/** A value as an error shows it: fail() prints strings as they are, so a string that came in is quoted. */
const shown = (x: unknown): unknown => (typeof x === 'string' ? fmt(x) : x);

/** A special token as tokenizer_config.json writes it: its text, or an AddedToken object with `content`. */
function tokenText(x: unknown): string | undefined {
  if (typeof x === 'string') return x;
  if (isObject(x) && typeof x.content === 'string') return x.content;
  return undefined;
}

const SPECIAL_TOKEN_KEYS = ['bos_token', 'eos_token', 'unk_token', 'sep_token', 'pad_token', 'cls_token', 'mask_token'] as const;

// ---------------------------------------------------------------------------------------------
// TextTokenizer

export interface EncodeOptions {
  /** Add the post-processor's tokens (BOS ...), as tokenizer.json says. Default true; false for a
   *  rendered chat template, which writes them itself (as transformers' apply_chat_template). */
  addSpecialTokens?: boolean;
}

export interface DecodeOptions {
  /** Leave out the special tokens (added tokens marked special). Default false. */
  skipSpecialTokens?: boolean;
  /** transformers' clean_up_tokenization_spaces (' .' → '.', " 's" → "'s" ...). Default false: it loses
   *  text (code keeps its spaces) and a clean-up across a stream's deltas cannot be undone, so
   *  decoding is lossless, as vLLM's outputs are. */
  cleanUpTokenizationSpaces?: boolean;
}

/** Whatever decodes ids: a TextTokenizer, or anything with its decode. */
export interface TokenDecoder {
  decode(ids: readonly number[], options?: DecodeOptions): string;
}

/** The vocabulary size a tokenizer.json stands for (largest id + 1), checking its shape on the way. */
function checkTokenizerJson(json: unknown, op: string): { json: Json; vocabSize: number } {
  check(isObject(json), op, 'tokenizerJson', 'an object (a parsed tokenizer.json)', shown(json));
  const model = json.model;
  check(isObject(model), op, 'tokenizerJson.model', 'an object (the tokenizer model: BPE, WordPiece, WordLevel, Unigram)', model);
  const type = model.type;
  check(type === undefined || type === 'BPE' || type === 'WordPiece' || type === 'WordLevel' || type === 'Unigram', op, 'tokenizerJson.model.type', "'BPE', 'WordPiece', 'WordLevel' or 'Unigram'", shown(type));
  let maxId = -1;
  const vocab = model.vocab;
  if (type === 'Unigram' || (type === undefined && Array.isArray(vocab))) {
    check(Array.isArray(vocab), op, 'tokenizerJson.model.vocab', 'an array of [piece, score] (Unigram)', vocab);
    vocab.forEach((e, i) => {
      const ok = Array.isArray(e) && e.length === 2 && typeof e[0] === 'string' && typeof e[1] === 'number';
      check(ok, op, `tokenizerJson.model.vocab[${i}]`, 'a [piece, score] pair', ok ? e : JSON.stringify(e) ?? e);
    });
    maxId = vocab.length - 1;
  } else {
    check(isObject(vocab), op, 'tokenizerJson.model.vocab', 'an object mapping each token to its id', vocab);
    for (const [token, id] of Object.entries(vocab)) {
      check(isId(id), op, `tokenizerJson.model.vocab['${token}']`, 'a non-negative integer id', id);
      if (id > maxId) maxId = id;
    }
    if (type === 'BPE') {
      const merges = model.merges;
      check(Array.isArray(merges), op, 'tokenizerJson.model.merges', "an array of merges ('a b' or ['a', 'b'])", merges);
      merges.forEach((m, i) => {
        const ok = typeof m === 'string' ? m.includes(' ') : Array.isArray(m) && m.length === 2 && typeof m[0] === 'string' && typeof m[1] === 'string';
        if (!ok) fail(op, `tokenizerJson.model.merges[${i}]`, "'a b' or ['a', 'b']", JSON.stringify(m) ?? m);
      });
    }
  }
  const added = json.added_tokens ?? [];
  check(Array.isArray(added), op, 'tokenizerJson.added_tokens', 'an array', added);
  added.forEach((t, i) => {
    check(isObject(t), op, `tokenizerJson.added_tokens[${i}]`, 'an object { id, content, special }', t);
    check(isId(t.id), op, `tokenizerJson.added_tokens[${i}].id`, 'a non-negative integer', t.id);
    check(typeof t.content === 'string' && t.content.length > 0, op, `tokenizerJson.added_tokens[${i}].content`, 'a non-empty string', t.content);
    if (t.id > maxId) maxId = t.id;
  });
  check(maxId >= 0, op, 'tokenizerJson.model.vocab', 'at least one token', 'none');
  // The library wants every component key present; tokenizer.json writes absent ones as null.
  const filled: Json = { ...json, added_tokens: added };
  for (const k of ['normalizer', 'pre_tokenizer', 'post_processor', 'decoder']) if (!(k in filled)) filled[k] = null;
  if (type === 'WordLevel') filled.model = wordLevelAsWordPiece(model, added as Json[], op);
  filled.pre_tokenizer = unicodeWhitespace(filled.pre_tokenizer);
  return { json: filled, vocabSize: maxId + 1 };
}

/**
 * HF's WordLevel model (a word is its vocabulary id, or unk_token's) as the WordPiece model that
 * @huggingface/tokenizers 0.2 has and computes the same ids with, since it has no WordLevel. WordPiece
 * takes the longest vocabulary prefix of a word and then pieces written `continuing_subword_prefix` +
 * rest; a word that cannot be covered is unk_token whole. With a prefix no vocabulary entry (nor added
 * token) starts with, no second piece ever matches: a word is its own entry or unk, WordLevel's rule.
 * max_input_chars_per_word is the longest entry (code points): a longer word is in no vocabulary, and
 * the bound keeps the prefix search's cost per word at most quadratic in that length, not in the
 * word's (a megabyte of letters is one word to the Whitespace pre-tokenizer).
 */
function wordLevelAsWordPiece(model: Json, added: Json[], op: string): Json {
  const unk = model.unk_token ?? '<unk>'; // HF's default for a WordLevel without one
  check(typeof unk === 'string', op, 'tokenizerJson.model.unk_token', 'a string (WordLevel: the token of words not in the vocabulary)', shown(unk));
  const entries = [...Object.keys(model.vocab as Json), ...added.map((t) => t.content as string)];
  let prefix = '\u0000';
  while (entries.some((e) => e.startsWith(prefix))) prefix += '\u0000';
  const longest = entries.reduce((m, e) => Math.max(m, [...e].length), 1);
  return { type: 'WordPiece', vocab: model.vocab, unk_token: unk, continuing_subword_prefix: prefix, max_input_chars_per_word: longest };
}

/** Rust regex's \w (Unicode: Alphabetic, marks, decimal digits, connector punctuation, joiners). */
const WORD = '\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}';

/**
 * HF's Whitespace pre-tokenizer splits on `\w+|[^\w\s]+` with Rust's Unicode classes; the library's
 * matches JavaScript's ASCII \w, so 'café' would be 'caf' and 'é'. Written as the Split it is in HF
 * (the matches kept, the rest removed), with Unicode classes, wherever it stands (Sequence included).
 */
function unicodeWhitespace(pre: unknown): unknown {
  if (!isObject(pre)) return pre;
  if (pre.type === 'Whitespace') {
    return { type: 'Split', pattern: { Regex: `[${WORD}]+|[^${WORD}\\p{White_Space}]+` }, behavior: 'Removed', invert: true };
  }
  if (pre.type === 'Sequence' && Array.isArray(pre.pretokenizers)) return { ...pre, pretokenizers: pre.pretokenizers.map(unicodeWhitespace) };
  return pre;
}

/**
 * A tokenizer.json (with its tokenizer_config.json) through @huggingface/tokenizers: encode, decode
 * (range-checked ids), the special tokens' ids, and the ids that end generation.
 */
export class TextTokenizer implements TokenDecoder {
  /** Largest id of the vocabulary or the added tokens, plus one. */
  readonly vocabSize: number;
  readonly bosTokenId: number | undefined;
  readonly padTokenId: number | undefined;
  readonly unkTokenId: number | undefined;
  /** Ids that end generation: tokenizer_config's eos_token and generation_config's eos_token_id. */
  readonly eosTokenIds: readonly number[];
  /** Added tokens marked special: left out by `skipSpecialTokens`. */
  readonly specialTokenIds: ReadonlySet<number>;
  /** tokenizer_config.json as given ({} without one): a ChatTemplate takes its template and tokens. */
  readonly config: Readonly<Json>;
  private readonly tok: Tokenizer;
  private readonly tokens: (string | undefined)[];

  private constructor(tok: Tokenizer, vocabSize: number, config: Json, eos: number[]) {
    this.tok = tok;
    this.vocabSize = vocabSize;
    this.config = config;
    this.tokens = Array.from({ length: vocabSize }, (_, id) => tok.id_to_token(id));
    const idOf = (key: string): number | undefined => {
      const text = tokenText(config[key]);
      return text === undefined ? undefined : tok.token_to_id(text);
    };
    this.bosTokenId = idOf('bos_token');
    this.padTokenId = idOf('pad_token');
    this.unkTokenId = idOf('unk_token');
    const eosId = idOf('eos_token');
    this.eosTokenIds = [...new Set([...(eosId === undefined ? [] : [eosId]), ...eos])];
    this.specialTokenIds = new Set([...tok.get_added_tokens_decoder()].filter(([, t]) => t.special).map(([id]) => id));
  }

  /**
   * A tokenizer from tokenizer.json's object, tokenizer_config.json's (special tokens, chat template)
   * and generation_config.json's (its eos_token_id also ends generation). Synchronous: the library
   * builds everything in memory.
   */
  static create(tokenizerJson: object, tokenizerConfig?: object, generationConfig?: object): TextTokenizer {
    const op = 'TextTokenizer.create';
    const { json, vocabSize } = checkTokenizerJson(tokenizerJson, op);
    const config = tokenizerConfig ?? {};
    check(isObject(config), op, 'tokenizerConfig', 'an object (a parsed tokenizer_config.json)', shown(config));
    for (const k of SPECIAL_TOKEN_KEYS) {
      const v = config[k];
      check(v === undefined || v === null || tokenText(v) !== undefined, op, `tokenizerConfig.${k}`, 'a string, an AddedToken object { content } or null', shown(v));
    }
    const eos: number[] = [];
    if (generationConfig !== undefined) {
      check(isObject(generationConfig), op, 'generationConfig', 'an object (a parsed generation_config.json)', generationConfig);
      const e = generationConfig.eos_token_id;
      const list = e === undefined || e === null ? [] : Array.isArray(e) ? e : [e];
      for (const id of list) {
        check(isId(id) && id < vocabSize, op, 'generationConfig.eos_token_id', `token ids in [0, ${vocabSize})`, e);
        eos.push(id);
      }
    }
    let tok: Tokenizer;
    try {
      tok = new Tokenizer(json, config);
    } catch (e) {
      throw new WebinferError(`${op}: tokenizerJson: @huggingface/tokenizers cannot build it: ${message(e)}`);
    }
    return new TextTokenizer(tok, vocabSize, config, eos);
  }

  encode(text: string, options: EncodeOptions = {}): number[] {
    check(typeof text === 'string', 'TextTokenizer.encode', 'text', 'a string', text);
    const enc = this.tok.encode(text, { add_special_tokens: options.addSpecialTokens ?? true });
    const ids: number[] = enc.ids;
    const tokens: string[] = enc.tokens;
    // A word out of the vocabulary when unk_token is not in it either (HF: "Missing unk token").
    const at = ids.findIndex((id) => !isId(id));
    if (at >= 0) fail('TextTokenizer.encode', 'text', 'words of the vocabulary (its unk_token is not in the vocabulary)', fmt(tokens[at] ?? ''));
    return ids;
  }

  decode(ids: readonly number[], options: DecodeOptions = {}): string {
    const op = 'TextTokenizer.decode';
    check(Array.isArray(ids), op, 'ids', 'an array of token ids', ids);
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i];
      // Checked before any conversion: a float, a negative or a huge id must not wrap or truncate.
      if (!isId(id) || id >= this.vocabSize || this.tokens[id] === undefined) {
        fail(op, `ids[${i}]`, `a token id of the vocabulary (an integer in [0, ${this.vocabSize}))`, id);
      }
    }
    if (ids.length === 0) return '';
    return this.tok.decode(ids as number[], {
      skip_special_tokens: options.skipSpecialTokens ?? false,
      clean_up_tokenization_spaces: options.cleanUpTokenizationSpaces ?? false,
    });
  }

  private maxBytes = 0;
  /**
   * UTF-8 bytes of text one token covers at most: 3 per UTF-16 unit of the longest vocabulary entry
   * (a byte-level entry's character is one byte, a SentencePiece one's at most 3). A text of more than
   * n × this bytes is more than n tokens (unless a normalizer deletes text), known before tokenizing it.
   */
  get maxTokenBytes(): number {
    if (this.maxBytes === 0) {
      let longest = 1;
      for (const t of this.tokens) if (t !== undefined && t.length > longest) longest = t.length;
      this.maxBytes = 3 * longest;
    }
    return this.maxBytes;
  }

  /** The token's text in the vocabulary (e.g. 'Ġthe', '▁the', '<0x0A>'), or undefined. */
  idToToken(id: number): string | undefined {
    return isId(id) ? this.tokens[id] : undefined;
  }

  /** The id of a token's vocabulary text, or undefined. */
  tokenToId(token: string): number | undefined {
    return this.tok.token_to_id(token);
  }
}

// ---------------------------------------------------------------------------------------------
// ChatTemplate

/** A chat message as OpenAI's Chat Completions API and transformers' templates take it. */
export interface ChatMessage {
  role: string;
  content?: unknown;
  tool_calls?: unknown[];
  tool_call_id?: string;
  name?: string;
  [key: string]: unknown;
}

export interface RenderOptions {
  /** End with the assistant's turn opening, so the model writes the reply. Default false. */
  addGenerationPrompt?: boolean;
  /** Tools as OpenAI's and transformers' JSON schemas ({ type: 'function', function: {...} }). */
  tools?: readonly unknown[];
  /** More template variables (chat_template_kwargs: enable_thinking ...). */
  [key: string]: unknown;
}

/** Names @huggingface/jinja defines itself: setting them again is an error there. */
const JINJA_GLOBALS = new Set(['false', 'true', 'none', 'raise_exception', 'range', 'strftime_now', 'True', 'False', 'None']);

/**
 * A chat template of tokenizer_config.json: one Jinja string, or several by name ([{ name, template }]
 * as transformers writes them, or { name: template }). render() passes what transformers'
 * apply_chat_template passes: messages, tools, add_generation_prompt, the special tokens' text.
 */
export class ChatTemplate {
  /** The template's names ('default' for a single string). */
  readonly names: readonly string[];
  private readonly sources: ReadonlyMap<string, string>;
  private readonly compiled = new Map<string, Template>();
  private readonly context: Readonly<Json>;

  /**
   * @param template tokenizer_config's chat_template.
   * @param specialTokens the text of bos_token, eos_token ... (a tokenizer_config object serves: the
   *   special token keys and additional_special_tokens are taken from it, nothing else).
   */
  constructor(template: unknown, specialTokens: object = {}) {
    const op = 'ChatTemplate';
    const sources = new Map<string, string>();
    if (typeof template === 'string') sources.set('default', template);
    else if (Array.isArray(template)) {
      template.forEach((t, i) => {
        const ok = isObject(t) && typeof t.name === 'string' && typeof t.template === 'string';
        check(ok, op, `chat_template[${i}]`, 'an object { name, template } with strings', ok ? t : JSON.stringify(t) ?? t);
        sources.set(t.name as string, t.template as string);
      });
    } else if (isObject(template)) {
      for (const [name, t] of Object.entries(template)) {
        check(typeof t === 'string', op, `chat_template['${name}']`, 'a template string', t);
        sources.set(name, t);
      }
    } else fail(op, 'chat_template', 'a template string, [{ name, template }] or { name: template }', template);
    check(sources.size > 0, op, 'chat_template', 'at least one template', 'none');
    this.sources = sources;
    this.names = [...sources.keys()];

    check(isObject(specialTokens), op, 'specialTokens', 'an object (tokenizer_config.json)', specialTokens);
    const context: Json = {};
    for (const k of SPECIAL_TOKEN_KEYS) {
      const text = tokenText(specialTokens[k]);
      if (text !== undefined) context[k] = text;
    }
    const extra = specialTokens.additional_special_tokens;
    if (Array.isArray(extra)) context.additional_special_tokens = extra.map(tokenText).filter((t) => t !== undefined);
    this.context = context;
  }

  /** The chat template of a tokenizer_config.json, or undefined when it has none. */
  static fromConfig(tokenizerConfig: object | undefined): ChatTemplate | undefined {
    if (tokenizerConfig === undefined) return undefined;
    check(isObject(tokenizerConfig), 'ChatTemplate.fromConfig', 'tokenizerConfig', 'an object (a parsed tokenizer_config.json)', tokenizerConfig);
    const t = tokenizerConfig.chat_template;
    return t === undefined || t === null ? undefined : new ChatTemplate(t, tokenizerConfig);
  }

  /** The template render() uses: 'tool_use' when tools are given and it exists, else 'default'. */
  pick(withTools: boolean): string {
    if (withTools && this.sources.has('tool_use')) return 'tool_use';
    if (this.sources.has('default')) return 'default';
    if (this.sources.size === 1) return this.names[0]!;
    return fail('ChatTemplate', 'chat_template', `a 'default' template (or 'tool_use' with tools), among ${fmt(this.names)}`, withTools ? 'a request with tools' : 'a request without tools');
  }

  /** The Jinja source of the template a request with or without tools renders with. */
  source(withTools = false): string {
    return this.sources.get(this.pick(withTools))!;
  }

  render(messages: readonly ChatMessage[], options: RenderOptions = {}): string {
    const op = 'ChatTemplate.render';
    check(Array.isArray(messages), op, 'messages', 'an array of { role, content }', messages);
    messages.forEach((m, i) => {
      check(isObject(m), op, `messages[${i}]`, 'an object { role, content }', m);
      check(typeof m.role === 'string', op, `messages[${i}].role`, 'a string', m.role);
      check(m.tool_calls === undefined || m.tool_calls === null || Array.isArray(m.tool_calls), op, `messages[${i}].tool_calls`, 'an array', m.tool_calls);
    });
    const { addGenerationPrompt = false, tools, ...extra } = options;
    check(typeof addGenerationPrompt === 'boolean', op, 'addGenerationPrompt', 'a boolean', addGenerationPrompt);
    check(tools === undefined || tools === null || Array.isArray(tools), op, 'tools', 'an array of tool schemas', tools);
    const withTools = Array.isArray(tools) && tools.length > 0;
    const name = this.pick(withTools);

    const vars: Json = { ...this.context };
    for (const [k, v] of Object.entries(extra)) {
      if (v === undefined) continue;
      check(!JINJA_GLOBALS.has(k) && k !== 'messages', op, k, 'a template variable other than the built-in ones', k);
      vars[k] = v;
    }
    vars.messages = messages.map(templateMessage);
    vars.add_generation_prompt = addGenerationPrompt;
    // transformers passes tools=None without tools; an empty list reads the same in `{% if tools %}`.
    if (withTools) vars.tools = tools;

    let template = this.compiled.get(name);
    if (!template) {
      try {
        template = new Template(this.sources.get(name)!);
      } catch (e) {
        throw new WebinferError(`${op}: chat_template '${name}': @huggingface/jinja cannot parse it: ${message(e)}`);
      }
      this.compiled.set(name, template);
    }
    try {
      return template.render(vars);
    } catch (e) {
      // raise_exception(...) in the template lands here with the template's own words.
      throw new WebinferError(`${op}: chat_template '${name}' failed: ${message(e)}`);
    }
  }
}

/**
 * A message as templates read it. OpenAI sends a tool call's arguments as a JSON string; the models'
 * templates (Qwen, Llama 3.1, Hermes) write `arguments | tojson`, which would quote the string again,
 * so arguments that parse as a JSON object are passed as that object (as vLLM does).
 */
function templateMessage(m: ChatMessage): ChatMessage {
  if (!Array.isArray(m.tool_calls)) return m;
  const toolCalls = m.tool_calls.map((c) => {
    if (!isObject(c) || !isObject(c.function) || typeof c.function.arguments !== 'string') return c;
    let args: unknown;
    try {
      args = JSON.parse(c.function.arguments);
    } catch {
      return c;
    }
    return isObject(args) ? { ...c, function: { ...c.function, arguments: args } } : c;
  });
  return { ...m, tool_calls: toolCalls };
}

// ---------------------------------------------------------------------------------------------
// StreamDecoder

/**
 * Incremental detokenization. Each push decodes a short window of ids twice, from `prefix` (ids
 * already emitted) to `read` and to the end, and emits what the second adds to the first: a decoder
 * that changes a token's text by its neighbours (SentencePiece's leading space, a word in several
 * tokens) treats the window's first token as it treated it before, so an emitted delta is never
 * rewritten. Text ending in U+FFFD is an incomplete UTF-8 character (bytes split across tokens) and is
 * held back until a later token completes it, or until flush().
 *
 * Invariant: the deltas (pushes and flush) concatenated equal decode(prefixIds ++ ids) less
 * decode(prefixIds), i.e. decode(ids) without prefixIds.
 */
export class StreamDecoder {
  private readonly ids: number[];
  private prefix = 0;
  private read: number;
  private readonly decoder: TokenDecoder;
  private readonly options: DecodeOptions;

  /**
   * @param options.skipSpecialTokens leave special tokens out of the text (default true, as vLLM's
   *   outputs: an end-of-turn token is not text).
   * @param options.prefixIds ids before the first pushed one (the prompt's last few): the first
   *   tokens then decode in context (a SentencePiece '▁word' keeps its space after a prompt).
   */
  constructor(decoder: TokenDecoder, options: { skipSpecialTokens?: boolean; prefixIds?: readonly number[] } = {}) {
    check(isObject(decoder) && typeof (decoder as Json).decode === 'function', 'StreamDecoder', 'decoder', 'a tokenizer with decode(ids)', decoder);
    const prefixIds = options.prefixIds ?? [];
    check(Array.isArray(prefixIds) && prefixIds.every(isId), 'StreamDecoder', 'options.prefixIds', 'an array of token ids', prefixIds);
    this.decoder = decoder;
    this.options = { skipSpecialTokens: options.skipSpecialTokens ?? true };
    this.ids = [...prefixIds];
    this.read = this.ids.length;
  }

  /** The text a new token adds ('' while held back). */
  push(id: number): string {
    check(isId(id), 'StreamDecoder.push', 'id', 'a non-negative integer token id', id);
    this.ids.push(id);
    const before = this.decoder.decode(this.ids.slice(this.prefix, this.read), this.options);
    const after = this.decoder.decode(this.ids.slice(this.prefix), this.options);
    if (after.length <= before.length || after.endsWith('\uFFFD')) return '';
    this.prefix = this.read;
    this.read = this.ids.length;
    return after.slice(before.length);
  }

  /** The held-back text at the end of the stream (an incomplete character decodes as U+FFFD). */
  flush(): string {
    if (this.read === this.ids.length) return '';
    const before = this.decoder.decode(this.ids.slice(this.prefix, this.read), this.options);
    const after = this.decoder.decode(this.ids.slice(this.prefix), this.options);
    this.prefix = this.read;
    this.read = this.ids.length;
    return after.slice(before.length);
  }
}

// ---------------------------------------------------------------------------------------------
// StopMatcher

/**
 * Stop strings over a stream of text deltas: a stop may span deltas. push() emits only text that
 * cannot begin a stop (the longest tail that is a stop's prefix is held back); when a stop appears,
 * the text before it is emitted and the stream has stopped. The output never contains a stop string.
 */
export class StopMatcher {
  private readonly stops: readonly string[];
  private held = '';
  private done = false;

  constructor(stops: readonly string[]) {
    check(Array.isArray(stops), 'StopMatcher', 'stops', 'an array of strings', stops);
    stops.forEach((s, i) => check(typeof s === 'string' && s.length > 0, 'StopMatcher', `stops[${i}]`, 'a non-empty string', shown(s)));
    this.stops = [...stops];
  }

  /** Whether a stop string has been seen. */
  get stopped(): boolean {
    return this.done;
  }

  push(delta: string): { text: string; stopped: boolean } {
    check(typeof delta === 'string', 'StopMatcher.push', 'delta', 'a string', delta);
    if (this.done) return { text: '', stopped: true };
    const text = this.held + delta;
    // The earliest stop: the text before it is the output, whichever stop it is.
    let at = -1;
    for (const s of this.stops) {
      const i = text.indexOf(s);
      if (i >= 0 && (at < 0 || i < at)) at = i;
    }
    if (at >= 0) {
      this.done = true;
      this.held = '';
      return { text: text.slice(0, at), stopped: true };
    }
    let keep = 0;
    for (const s of this.stops) {
      for (let k = Math.min(s.length - 1, text.length); k > keep; k--) {
        if (text.endsWith(s.slice(0, k))) {
          keep = k;
          break;
        }
      }
    }
    this.held = text.slice(text.length - keep);
    return { text: text.slice(0, text.length - keep), stopped: false };
  }

  /** The held-back text when the stream ends without a stop ('' after a stop). */
  flush(): string {
    const t = this.held;
    this.held = '';
    return t;
  }
}
