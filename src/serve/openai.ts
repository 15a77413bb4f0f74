// OpenAI's Chat Completions and Completions over a model's request engine (API.md "Serving", SPEC §9):
// model.chat.completions.create(req) and model.completions.create(req) take OpenAI's request objects
// and give back OpenAI's objects, or with `stream: true` an async iterable of its chunks.
//
// Text: prompts are encoded by the model's tokenizer (and chat messages rendered by its template); each
// choice's tokens go through a StreamDecoder (no delta splits a character or rewrites an earlier one)
// and a StopMatcher (stop strings across token boundaries end the choice before them, and free its
// blocks at once). End-of-sequence ids end a choice and are not text.
//
// Every field is checked before anything is queued; a field OpenAI has that this engine does not
// honour is refused with a 400 naming it, never ignored. Tool calls: the template renders `tools`,
// and the reply is parsed in the template's format (Hermes / Qwen <tool_call>, Llama 3 JSON); with
// tools a stream holds the text back until the reply is complete, since a call cannot be told from
// content before then. `tool_choice` naming a function forces one call of it: a grammar of the
// template's call syntax around the function's parameters' schema (tools.ts forcedCallText,
// grammar.ts compileToolCall), so the reply parses back as that call; 'required' forces one call of
// any of the tools (the alternatives of those grammars, compileToolCalls). `response_format` json_schema /
// json_object constrains sampling with a token mask per step (serve/grammar.ts). gpt-oss's harmony output (a template writing <|channel|> headers,
// serve/harmony.ts): `content` is the final channel's text, the analysis channel's `reasoning_content`;
// a stream holds the text back until the reply is complete, as with tools.
//
// Token ids (`return_token_ids`, as vLLM): a whole reply's choices carry `token_ids`, the body
// `prompt_token_ids`; in a stream every choice's chunk carries the ids produced since its previous chunk
// (they concatenate to the whole choice's, end-of-sequence id included) and the first chunk
// `prompt_token_ids`. A model loaded without a tokenizer has no text to send, so there the ids are the
// reply: `return_token_ids` defaults to true, and a stream sends them as the engine produces them.
import { fmt, jsonDepth, preview, WebinferError } from '../core/errors.js';
import { compileResponseFormat, compileToolCall, compileToolCalls, type TokenVocabulary } from './grammar.js';
import { badRequest, MAX_REQUEST_DEPTH, OpenAIError } from './errors.js';
import { checkTokenIds } from '../models/step.js';
import type { FinishReason, RequestEngine, RequestResult, Sampling, TokenLogprob, TokenConstraint } from './engine.js';
import { ChatTemplate, StopMatcher, StreamDecoder, TextTokenizer, type ChatMessage } from '../text/text.js';
import { forcedCallText, parseToolCalls, toolCallFormat, type ToolCall, type ToolCallFormat } from './tools.js';
import { harmonyTokens, isHarmonyTemplate, parseHarmony, type HarmonyTokens } from './harmony.js';
import { decodeImage, DEFAULT_MAX_BYTES, DEFAULT_MAX_PIXELS, type DecodeOptions, type RgbImage } from '../vision/image.js';
import { expandImageText, expandImageTokens, imagesDigest, isVisionTokens, type VisionTokens } from '../vision/tokens.js';

/** What the serving surface needs of a model. */
export interface ServedModel {
  readonly engine: RequestEngine;
  readonly id: string;
  readonly vocabSize: number;
  readonly capacity: number;
  /** The model's context length (max_position_embeddings). */
  readonly maxContext: number;
  /** End-of-sequence ids of the config and generation config. */
  readonly eosTokenIds: readonly number[];
  /** A vision-language model's image tokens (src/vision/tokens.ts); without it, image parts are refused. */
  readonly vision?: VisionTokens;
  /** A vision-language model's image placeholder token (its features come with an image), or null. */
  readonly imageTokenId?: number | null;
  /** A vision model's chat images placed as its sequence input (encoderInput) with their prefix-cache salt. */
  imageInput?(prompt: readonly number[], images: readonly RgbImage[]): Promise<{ encoderInput: unknown; cacheSalt: string }>;
}

export interface TextSetup {
  tokenizer?: TextTokenizer;
  template?: ChatTemplate;
  /** generation_config.json's sampling defaults (temperature, top_p, top_k, repetition_penalty ...). */
  generationConfig?: Record<string, unknown>;
  /** Limits and sources for image_url parts (decodeImage's options; default: its limits, data:, http(s) and paths). */
  images?: DecodeOptions;
}

/**
 * A request's key (a symbol: no JSON body can set it) for where its image_url parts may come from:
 * the HTTP server sets { allowFiles: false }, so a client cannot make it read the server's files.
 */
export const IMAGE_SOURCES: unique symbol = Symbol.for('webinfer.imageSources');

/** Content parts in one message at most, and images in one request at most. */
export const MAX_CONTENT_PARTS = 256;
export const MAX_IMAGES = 16;

/** A message's image parts, as the chat path found them: where, and the URL. */
interface ImagePart { at: string; url: string }

/** Whether a chat template walks a message's content as a list of parts (HF's multimodal templates:
 *  `for item in message['content']`), rather than printing it as a string. */
export function templateTakesParts(source: string): boolean {
  return /\bfor\s+\w+\s+in\s+\w+(\[\s*['"]content['"]\s*\]|\.content)(?!\w)/.test(source);
}

const SAMPLING_FIELDS = ['max_tokens', 'temperature', 'top_p', 'top_k', 'min_p', 'seed', 'stop', 'n', 'presence_penalty', 'frequency_penalty',
  'repetition_penalty', 'logit_bias', 'stream', 'stream_options', 'signal', 'return_token_ids', 'model', 'user', 'stop_token_ids', 'ignore_eos',
  'response_format', 'logprobs', 'speculative'];
const CHAT_FIELDS = [...SAMPLING_FIELDS, 'messages', 'max_completion_tokens', 'top_logprobs', 'tools', 'tool_choice', 'parallel_tool_calls',
  'chat_template_kwargs', 'add_generation_prompt'];
const COMPLETION_FIELDS = [...SAMPLING_FIELDS, 'prompt', 'echo', 'best_of', 'suffix'];
/** Fields OpenAI has that are refused by name (no silent ignoring). */
const UNSUPPORTED: Record<string, string> = {
  functions: "the legacy 'functions' field; use 'tools'", function_call: "the legacy 'function_call' field; use 'tool_choice'",
  audio: 'audio output', modalities: 'modalities other than text', prediction: 'predicted outputs', store: 'stored completions',
  metadata: 'stored completion metadata', service_tier: 'service tiers', reasoning_effort: 'reasoning effort', web_search_options: 'web search',
};

type Json = Record<string, unknown>;

/** Characters of one stop string at most: the output held back for a stop match is as long as it. */
const MAX_STOP_CHARS = 1024;
/** Tools one request may offer (OpenAI's limit). */
const MAX_TOOLS = 128;
/** Prompts longer than this (UTF-16 units) are tokenized prefix by prefix, the event loop free between
 *  them, and refused as soon as a prefix is past the context: a 15 MiB prompt costs one prefix. */
const PROBE_CHARS = 1 << 16;

/** UTF-8 bytes of a string, counted without encoding it. */
function utf8Bytes(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) { n += 4; i++; }
    else n += 3;
  }
  return n;
}

const nextTick = (): Promise<void> => new Promise((r) => setTimeout(r, 0));

/**
 * A constraint whose failures are its request's: whatever its code throws (a schema the vocabulary
 * cannot spell, a mask over its time budget) becomes a 400 on response_format, which the engine ends
 * that request with, never the others sharing its steps.
 */
/** A tool forced (tool_choice): its name, index and parameters' schema (none: it takes none, {}). */
function forcedFunction(tools: unknown[], at: number): { name: string; index: number; schema: Json } {
  const f = (tools[at] as Json).function as Json;
  const params = f.parameters;
  const schema = isObj(params) ? params : { type: 'object', properties: {}, additionalProperties: false };
  if (schema.type !== 'object') throw badRequest(`tools[${at}].function.parameters`, "an object schema (type: 'object') to force a call of it", schema.type ?? 'no type');
  return { name: f.name as string, index: at, schema };
}

function requestConstraint(make: () => TokenConstraint, param: 'response_format' | 'tool_choice'): () => TokenConstraint {
  const own = (e: unknown): OpenAIError => (e instanceof OpenAIError ? e
    : new OpenAIError(`${param}: the constraint failed while decoding: ${e instanceof Error ? e.message : String(e)}`, { status: 400, param, code: 'constraint_failed' }));
  return () => {
    let c: TokenConstraint;
    try { c = make(); } catch (e) { throw own(e); }
    return {
      fillMask(mask) { try { c.fillMask(mask); } catch (e) { throw own(e); } },
      accept(token) { try { return c.accept(token); } catch (e) { throw own(e); } },
      get done() { return c.done; },
    };
  };
}

interface Parsed {
  prompt: number[];
  maxTokens: number;
  n: number;
  sampling: Sampling;
  stops: string[];
  stopIds: Set<number>;
  logprobs: number | null;
  stream: boolean;
  includeUsage: boolean;
  returnTokenIds: boolean;
  speculative: boolean;
  signal?: AbortSignal;
  constraint?: () => TokenConstraint;
  toolFormat: ToolCallFormat | null;
  /** gpt-oss's harmony output (serve/harmony.ts): content is the final channel, the analysis channel reasoning_content. */
  harmony: HarmonyTokens | null;
  echo: boolean;
  /** The chat's images in order of appearance (their tokens expanded in `prompt`). */
  images: RgbImage[];
}

const isObj = (x: unknown): x is Json => x !== null && typeof x === 'object' && !Array.isArray(x);

function num(r: Json, k: string, lo: number, hi: number, int = false): number | undefined {
  const v = r[k];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isFinite(v) || v < lo || v > hi || (int && !Number.isInteger(v))) {
    throw badRequest(k, `${int ? 'an integer' : 'a number'} in [${lo}, ${hi}]`, v);
  }
  return v;
}

function bool(r: Json, k: string): boolean | undefined {
  const v = r[k];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'boolean') throw badRequest(k, 'a boolean', v);
  return v;
}

/** An async queue: the engine pushes, the caller's for-await pulls; leaving the loop cancels. */
class ChunkStream<T> implements AsyncIterable<T> {
  private items: T[] = [];
  private done = false;
  private error: unknown = null;
  private wake: (() => void) | null = null;
  constructor(private readonly onCancel: () => void) {}
  push(x: T): void { this.items.push(x); this.wake?.(); }
  end(): void { this.done = true; this.wake?.(); }
  fail(e: unknown): void { if (!this.done) { this.error = e ?? new WebinferError('stream failed'); this.done = true; this.wake?.(); } }
  [Symbol.asyncIterator](): AsyncIterator<T> {
    return {
      next: async () => {
        for (;;) {
          if (this.items.length) return { value: this.items.shift()!, done: false };
          if (this.error !== null) { const e = this.error; this.error = null; this.items = []; throw e; }
          if (this.done) return { value: undefined, done: true };
          await new Promise<void>((r) => { this.wake = r; });
          this.wake = null;
        }
      },
      return: async () => {
        if (!this.done) { this.done = true; this.onCancel(); }
        return { value: undefined, done: true };
      },
    };
  }
}

function randomId(prefix: string): string {
  const b = new Uint8Array(12);
  crypto.getRandomValues(b);
  return prefix + Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}

/** Per choice: its decoder, stop matcher, text and tokens. */
interface ChoiceText {
  dec: StreamDecoder | null;
  stop: StopMatcher;
  text: string;
  /** Text held back (tools: until the end). */
  held: string;
  ids: number[];
  lps: TokenLogprob[];
  finish: FinishReason | null;
  ended: boolean;
}

export class OpenAIServing {
  private readonly tok?: TextTokenizer;
  private readonly template?: ChatTemplate;
  private readonly gen: Record<string, unknown>;
  private vocab: TokenVocabulary | null = null;
  private readonly imageOptions: DecodeOptions;

  readonly chat: { completions: { create: (req: unknown) => Promise<Json> | AsyncIterable<Json> } };
  readonly completions: { create: (req: unknown) => Promise<Json> | AsyncIterable<Json> };

  constructor(private readonly m: ServedModel, text: TextSetup = {}) {
    this.tok = text.tokenizer;
    this.template = text.template;
    this.gen = text.generationConfig ?? {};
    this.imageOptions = text.images ?? {};
    this.chat = { completions: { create: (req) => this.create('chat', req) } };
    this.completions = { create: (req) => this.create('completions', req) };
  }

  private create(kind: 'chat' | 'completions', req: unknown): Promise<Json> | AsyncIterable<Json> {
    const stream = isObj(req) && req.stream === true;
    if (!stream) {
      return (async () => {
        const p = await this.parse(kind, req);
        return this.run(kind, p, null) as Promise<Json>;
      })();
    }
    // A stream: the request is checked before the first chunk (a server answers 400 before any event).
    let started: Promise<void> | null = null;
    const out = new ChunkStream<Json>(() => ac.abort(new DOMException('the stream was closed by its reader', 'AbortError')));
    const ac = new AbortController();
    const iter: AsyncIterable<Json> = {
      [Symbol.asyncIterator]: () => {
        started ??= (async () => {
          try {
            const p = await this.parse(kind, req);
            const outer = p.signal;
            if (outer) {
              if (outer.aborted) ac.abort(outer.reason);
              else outer.addEventListener('abort', () => ac.abort(outer.reason), { once: true });
            }
            p.signal = ac.signal;
            this.run(kind, p, out).then(() => out.end(), (e) => out.fail(e));
          } catch (e) {
            out.fail(e);
          }
        })();
        return out[Symbol.asyncIterator]();
      },
    };
    return iter;
  }

  /** Checks a request and turns it into the engine's terms. */
  private async parse(kind: 'chat' | 'completions', req: unknown): Promise<Parsed> {
    if (!isObj(req)) throw badRequest('request', 'an object', req);
    const r = req as Json;
    const { signal: _signal, ...fields } = r;
    const deep = jsonDepth(fields, MAX_REQUEST_DEPTH);
    if (deep.depth > MAX_REQUEST_DEPTH) {
      throw new OpenAIError(`${deep.path || 'request'}: expected a request nested at most ${MAX_REQUEST_DEPTH} deep (objects and arrays), got one nested deeper`, { param: deep.path.split(/[.[]/)[0] || null, code: 'too_deep' });
    }
    const allowed = kind === 'chat' ? CHAT_FIELDS : COMPLETION_FIELDS;
    for (const k of Object.keys(r)) {
      if (allowed.includes(k)) continue;
      if (Object.hasOwn(UNSUPPORTED, k)) throw new OpenAIError(`${k}: webinfer does not support ${UNSUPPORTED[k]}`, { param: k, code: 'unsupported_parameter' });
      throw new OpenAIError(`${k.length > 64 ? fmt(k.slice(0, 64)) : k}: unknown field (the ${kind === 'chat' ? 'Chat Completions' : 'Completions'} fields are ${allowed.join(', ')})`, { param: k.slice(0, 64), code: 'unknown_parameter' });
    }
    if (r.model !== undefined && r.model !== null && typeof r.model !== 'string') throw badRequest('model', 'a string', r.model);
    if (r.user !== undefined && r.user !== null && typeof r.user !== 'string') throw badRequest('user', 'a string (an id of the end user)', r.user);
    if (r.signal !== undefined && !(typeof AbortSignal !== 'undefined' && r.signal instanceof AbortSignal)) throw badRequest('signal', 'an AbortSignal', String(r.signal));
    const stream = bool(r, 'stream') ?? false;
    if (r.stream_options !== undefined && r.stream_options !== null) {
      if (!isObj(r.stream_options)) throw badRequest('stream_options', '{ include_usage?: boolean }', r.stream_options);
      if (!stream) throw badRequest('stream_options', 'only with stream: true', r.stream_options);
      for (const k of Object.keys(r.stream_options)) if (k !== 'include_usage' && k !== 'continuous_usage_stats') throw badRequest(`stream_options.${k}`, 'include_usage only', k);
    }
    const includeUsage = isObj(r.stream_options) && r.stream_options.include_usage === true;
    const n = num(r, 'n', 1, 128, true) ?? 1;
    if (kind === 'completions') {
      if ((num(r, 'best_of', 1, 128, true) ?? n) !== n) throw new OpenAIError('best_of: webinfer samples exactly n choices; best_of other than n is not supported', { param: 'best_of' });
      if (r.suffix !== undefined && r.suffix !== null) throw new OpenAIError('suffix: insertion (a suffix after the completion) is not supported', { param: 'suffix' });
    }
    const echo = kind === 'completions' && (bool(r, 'echo') ?? false);
    const limit = Math.min(this.m.capacity, this.m.maxContext);
    // The prompt.
    let prompt: number[];
    let toolFormat: ToolCallFormat | null = null;
    let harmony: HarmonyTokens | null = null;
    /** The functions a call is forced among (tool_choice naming one, or 'required': any of the tools),
     *  each with its index in tools and its parameters' schema. */
    let forced: { name: string; index: number; schema: Json }[] | null = null;
    const images: RgbImage[] = [];
    if (kind === 'chat') {
      if (!Array.isArray(r.messages) || r.messages.length === 0) throw badRequest('messages', 'a non-empty array of { role, content }', r.messages);
      const vision = isVisionTokens(this.m.vision) ? this.m.vision : null;
      const imageParts: ImagePart[] = [];
      // A vision model's template that walks content parts gets them (images as { type: 'image' }, as
      // HF's processors pass them); every other template gets the text parts joined.
      const asParts = vision !== null && !!this.template && templateTakesParts(this.template.source(false));
      const messages = r.messages.map((msg, i) => {
        if (!isObj(msg)) throw badRequest(`messages[${i}]`, '{ role, content }', msg);
        if (!['system', 'user', 'assistant', 'tool', 'developer'].includes(msg.role as string)) throw badRequest(`messages[${i}].role`, "'system', 'developer', 'user', 'assistant' or 'tool'", msg.role);
        let content = msg.content;
        if (Array.isArray(content)) {
          const parts = this.contentParts(content, i, msg.role as string, vision, imageParts);
          content = asParts ? parts : parts.map((p) => (p.type === 'text' ? p.text : '')).join('');
          if (!asParts && parts.some((p) => p.type === 'image')) {
            throw new OpenAIError(`messages[${i}].content: this model's chat template takes text only (it does not walk content parts), so it cannot place images`,
              { param: `messages[${i}].content`, code: 'images_not_supported' });
          }
        }
        if (content !== undefined && content !== null && typeof content !== 'string' && !Array.isArray(content)) throw badRequest(`messages[${i}].content`, 'a string or an array of content parts', content);
        if ((content === undefined || content === null) && !(msg.role === 'assistant' && Array.isArray(msg.tool_calls))) throw badRequest(`messages[${i}].content`, 'a string', content);
        return { ...msg, role: msg.role === 'developer' ? 'system' : msg.role, content: content ?? '' } as ChatMessage;
      });
      if (!this.tok) throw new OpenAIError('messages: this model was loaded without a tokenizer (tokenizer.json or a GGUF\'s), so it cannot read text; use completions with prompt token ids', { param: 'messages', code: 'no_tokenizer' });
      if (!this.template) throw new OpenAIError('messages: this model has no chat template (tokenizer_config.json chat_template); use completions with a prompt', { param: 'messages', code: 'no_chat_template' });
      let tools: unknown[] | undefined;
      if (r.tools !== undefined && r.tools !== null) {
        if (!Array.isArray(r.tools)) throw badRequest('tools', 'an array of { type: "function", function: { name, parameters } }', r.tools);
        if (r.tools.length > MAX_TOOLS) throw badRequest('tools', `at most ${MAX_TOOLS} tools`, `${r.tools.length} tools`);
        r.tools.forEach((t, i) => {
          if (!isObj(t) || t.type !== 'function' || !isObj(t.function) || typeof t.function.name !== 'string') throw badRequest(`tools[${i}]`, '{ type: "function", function: { name, description?, parameters? } }', t);
          const f = t.function;
          if (!/^[A-Za-z0-9_-]{1,64}$/.test(f.name as string)) throw badRequest(`tools[${i}].function.name`, 'letters, digits, _ or -, at most 64', f.name);
          if (f.description !== undefined && f.description !== null && typeof f.description !== 'string') throw badRequest(`tools[${i}].function.description`, 'a string', f.description);
          if (f.parameters !== undefined && f.parameters !== null && !isObj(f.parameters)) throw badRequest(`tools[${i}].function.parameters`, 'a JSON schema object', f.parameters);
        });
        tools = r.tools.length ? r.tools : undefined;
      }
      const choice = r.tool_choice;
      if (isObj(choice)) {
        // A named function: the reply is exactly one call of it, its arguments held to its parameters.
        const fn = choice.function;
        if (choice.type !== 'function' || !isObj(fn) || typeof fn.name !== 'string' || Object.keys(choice).some((k) => k !== 'type' && k !== 'function')) {
          throw badRequest('tool_choice', "'auto', 'none' or { type: 'function', function: { name } }", choice);
        }
        if (!tools) throw new OpenAIError(`tool_choice: names the function ${fmt(fn.name.slice(0, 64))}, but the request offers no tools`, { param: 'tool_choice', code: 'unknown_tool' });
        const at = tools.findIndex((t) => ((t as Json).function as Json).name === fn.name);
        if (at < 0) {
          const names = tools.map((t) => ((t as Json).function as Json).name as string);
          throw new OpenAIError(`tool_choice.function.name: expected one of the tools' names (${names.slice(0, 16).join(', ')}${names.length > 16 ? ', ...' : ''}), got ${fmt(fn.name.slice(0, 64))}`,
            { param: 'tool_choice.function.name', code: 'unknown_tool' });
        }
        forced = [forcedFunction(tools, at)];
      } else if (choice === 'required') {
        // Some call of one of the tools: the reply is one call, its arguments held to that tool's parameters.
        if (!tools) throw new OpenAIError("tool_choice: 'required' asks for a call of one of the tools, but the request offers no tools", { param: 'tool_choice', code: 'unknown_tool' });
        forced = tools.map((_, i) => forcedFunction(tools!, i));
      } else if (choice !== undefined && choice !== null && choice !== 'auto' && choice !== 'none') {
        throw new OpenAIError(`tool_choice: expected 'auto', 'none', 'required' or { type: 'function', function: { name } }, got ${preview(choice, 80)}`, { param: 'tool_choice' });
      }
      if (choice === 'none') tools = undefined;
      if (r.parallel_tool_calls !== undefined && typeof r.parallel_tool_calls !== 'boolean') throw badRequest('parallel_tool_calls', 'a boolean', r.parallel_tool_calls);
      const kwargs = r.chat_template_kwargs ?? {};
      if (!isObj(kwargs)) throw badRequest('chat_template_kwargs', 'an object of template variables', kwargs);
      const addGen = bool(r, 'add_generation_prompt') ?? true;
      // The messages' text alone may already be past the context: refused before the template runs.
      let contentBytes = 0;
      for (const m of messages) {
        if (typeof m.content === 'string') contentBytes += utf8Bytes(m.content);
        else if (Array.isArray(m.content)) for (const p of m.content as { text?: string }[]) if (typeof p.text === 'string') contentBytes += utf8Bytes(p.text);
      }
      this.checkBytes(contentBytes, limit, 'messages');
      let text: string;
      try {
        text = this.template.render(messages, { ...kwargs, addGenerationPrompt: addGen, tools });
      } catch (e) {
        throw new OpenAIError(`messages: the chat template could not render them: ${(e as Error).message}`, { param: 'messages' });
      }
      if (tools) {
        // A template that never mentions the tools would drop them without a word: refused instead.
        let without: string | null = null;
        try { without = this.template.render(messages, { ...kwargs, addGenerationPrompt: addGen }); } catch { /* it needs tools: it renders them */ }
        if (without === text) {
          throw new OpenAIError("tools: this model's chat template does not render tools, so the model would never see them; send the request without tools (or describe them in a message)",
            { param: 'tools', code: 'tools_not_supported' });
        }
      }
      if (vision) {
        // Decoded only now, every other field checked: each within decodeImage's byte and pixel caps.
        // The request's sources (the server's) only narrow the serving's own.
        const sources = (r as Record<symbol, unknown>)[IMAGE_SOURCES];
        const narrow = isObj(sources) ? sources : {};
        const opts: DecodeOptions = {
          ...this.imageOptions, signal: r.signal as AbortSignal | undefined,
          allowFiles: this.imageOptions.allowFiles !== false && narrow.allowFiles !== false,
          allowHttp: this.imageOptions.allowHttp !== false && narrow.allowHttp !== false,
        };
        // The request's images share one pixel budget (decodeImage's maxPixels, read from each header
        // before its decode): sixteen images cost what one may, in memory and in decoding time.
        const budget = opts.maxPixels ?? DEFAULT_MAX_PIXELS;
        let used = 0;
        for (const part of imageParts) {
          // Node's and Deno's decoders run on this thread: other requests' steps go between images.
          if (images.length) await nextTick();
          if (used >= budget) throw new OpenAIError(`${part.at}: expected the request's images to hold at most ${budget} pixels in all, got ${used} before this one`, { param: part.at, code: 'invalid_image' });
          try {
            const img = await decodeImage(part.url, { ...opts, maxPixels: budget - used, name: part.at });
            used += img.width * img.height;
            images.push(img);
          } catch (e) {
            const m = (e as Error).message;
            throw new OpenAIError(used ? `${m} (the request's images share ${budget} pixels; ${used} were taken)` : m, { param: part.at, code: 'invalid_image' });
          }
        }
      }
      const refuse = (e: unknown): OpenAIError => new OpenAIError(`messages: ${(e as Error).message.replace(/^expand\w+: messages: /, '')}${imageParts.length ? ' (the chat template must write one image placeholder per image part; a text part must not write it)' : ''}`,
        { param: 'messages', code: 'invalid_image_tokens' });
      if (vision?.placeholderText && vision.imageText) {
        // As HF's processors: the images expanded in the text, then the whole text tokenized.
        let expanded: { text: string; imageTokens: number };
        try { expanded = expandImageText(vision, text, images); } catch (e) { throw refuse(e); }
        prompt = await this.encodeBounded(expanded.text, false, limit, 'messages');
        const got = prompt.reduce((n, t) => n + (t === vision.imageTokenId ? 1 : 0), 0);
        if (got !== expanded.imageTokens) {
          throw new OpenAIError(`messages: expected ${expanded.imageTokens} image tokens (${vision.imageTokenId}) for ${images.length} image${images.length === 1 ? '' : 's'}, got ${got} after tokenizing (a text part writes the image token?)`,
            { param: 'messages', code: 'invalid_image_tokens' });
        }
      } else {
        prompt = await this.encodeBounded(text, false, limit, 'messages');
        if (vision) { try { prompt = expandImageTokens(vision, prompt, images); } catch (e) { throw refuse(e); } }
      }
      if (tools) toolFormat = toolCallFormat(this.template.source(true));
      if (isHarmonyTemplate(this.template.source(!!tools))) harmony = harmonyTokens((t) => this.tok!.tokenToId(t));
    } else {
      const p = r.prompt;
      if (typeof p === 'string') {
        if (!this.tok) throw new OpenAIError('prompt: this model was loaded without a tokenizer; give the prompt as token ids', { param: 'prompt', code: 'no_tokenizer' });
        prompt = await this.encodeBounded(p, true, limit, 'prompt');
      } else if (Array.isArray(p) && p.length > 0 && p.every((x) => typeof x === 'number')) {
        try {
          prompt = Array.from(checkTokenIds('completions.create', 'prompt', p, this.m.vocabSize));
        } catch (e) {
          throw new OpenAIError((e as Error).message, { param: 'prompt' });
        }
      } else {
        throw badRequest('prompt', 'a string or a non-empty array of token ids (one prompt per request)', p);
      }
    }
    if (prompt.length === 0) throw badRequest(kind === 'chat' ? 'messages' : 'prompt', 'at least one token', '0 tokens');
    // A vision model's image tokens stand for an image's features: without the image they would be read
    // as ordinary embeddings. Images come as chat image_url parts (expanded into their tokens above).
    const img = this.m.imageTokenId ?? null;
    if (img !== null && !images.length && prompt.includes(img)) {
      throw badRequest(kind === 'chat' ? 'messages' : 'prompt', `no image token (id ${img}) without its image (images come as chat image_url parts)`,
        `the image token at position ${prompt.indexOf(img)}`);
    }
    // Lengths: the prompt must leave room for one token.
    if (prompt.length + 1 > limit) {
      throw new OpenAIError(`${kind === 'chat' ? 'messages' : 'prompt'}: the prompt has ${prompt.length} tokens; this model serves at most ${limit - 1} prompt tokens (context ${this.m.maxContext}, cache ${this.m.capacity})`,
        { status: 413, param: kind === 'chat' ? 'messages' : 'prompt', code: 'context_length_exceeded' });
    }
    const maxField = kind === 'chat' && r.max_completion_tokens !== undefined && r.max_completion_tokens !== null ? 'max_completion_tokens' : 'max_tokens';
    const askMax = num(r, maxField, 1, Number.MAX_SAFE_INTEGER, true);
    if (askMax !== undefined && prompt.length + askMax > limit) {
      throw new OpenAIError(`${maxField}: ${askMax} new tokens after a prompt of ${prompt.length} exceed this model's ${limit} tokens (context ${this.m.maxContext}, cache ${this.m.capacity})`,
        { status: 400, param: maxField, code: 'context_length_exceeded' });
    }
    const maxTokens = askMax ?? (kind === 'completions' && this.tok ? Math.min(16, limit - prompt.length) : limit - prompt.length);
    // Sampling: the request's, else the generation config's, else OpenAI's defaults.
    const g = this.gen;
    const gnum = (k: string, d: number) => (typeof g[k] === 'number' ? g[k] as number : d);
    const doSample = g.do_sample !== false;
    const temperature = num(r, 'temperature', 0, 2) ?? (doSample ? gnum('temperature', 1) : 0);
    const topP = num(r, 'top_p', 0, 1) ?? gnum('top_p', 1);
    if (topP === 0) throw badRequest('top_p', 'a number in (0, 1]', 0);
    const topK = num(r, 'top_k', -1, 2 ** 31, true) ?? gnum('top_k', 0);
    const minP = num(r, 'min_p', 0, 1) ?? gnum('min_p', 0);
    const seed = num(r, 'seed', -(2 ** 63), 2 ** 64, true);
    const presence = num(r, 'presence_penalty', -2, 2) ?? 0;
    const frequency = num(r, 'frequency_penalty', -2, 2) ?? 0;
    const repetition = num(r, 'repetition_penalty', Number.MIN_VALUE, 100) ?? gnum('repetition_penalty', 1);
    let logitBias: Map<number, number> | undefined;
    if (r.logit_bias !== undefined && r.logit_bias !== null) {
      if (!isObj(r.logit_bias)) throw badRequest('logit_bias', 'an object of token id → bias in [-100, 100]', r.logit_bias);
      logitBias = new Map();
      for (const [k, v] of Object.entries(r.logit_bias)) {
        const id = Number(k);
        if (!/^\d+$/.test(k) || id >= this.m.vocabSize) throw badRequest(`logit_bias.${k}`, `a token id in [0, ${this.m.vocabSize})`, k);
        if (typeof v !== 'number' || !(v >= -100 && v <= 100)) throw badRequest(`logit_bias.${k}`, 'a number in [-100, 100]', v);
        logitBias.set(id, v);
      }
    }
    // Stops.
    let stops: string[] = [];
    if (r.stop !== undefined && r.stop !== null) {
      const s = typeof r.stop === 'string' ? [r.stop] : r.stop;
      if (!Array.isArray(s) || s.length > 16 || !s.every((x) => typeof x === 'string' && x.length > 0 && x.length <= MAX_STOP_CHARS)) {
        throw badRequest('stop', `a non-empty string of at most ${MAX_STOP_CHARS} characters, or up to 16 of them`, r.stop);
      }
      if (!this.tok) throw new OpenAIError('stop: stop strings need a tokenizer; use stop_token_ids', { param: 'stop' });
      stops = s as string[];
    }
    const stopIds = new Set<number>();
    if (!(bool(r, 'ignore_eos') ?? false)) {
      for (const id of this.m.eosTokenIds) stopIds.add(id);
      for (const id of this.tok?.eosTokenIds ?? []) stopIds.add(id);
    }
    if (r.stop_token_ids !== undefined && r.stop_token_ids !== null) {
      if (!Array.isArray(r.stop_token_ids)) throw badRequest('stop_token_ids', 'an array of token ids', r.stop_token_ids);
      r.stop_token_ids.forEach((id, i) => {
        if (typeof id !== 'number' || !Number.isInteger(id) || id < 0 || id >= this.m.vocabSize) throw badRequest(`stop_token_ids[${i}]`, `a token id in [0, ${this.m.vocabSize})`, id);
        stopIds.add(id);
      });
    }
    // Logprobs.
    let logprobs: number | null = null;
    if (kind === 'chat') {
      if (bool(r, 'logprobs')) logprobs = num(r, 'top_logprobs', 0, 20, true) ?? 0;
      else if (r.top_logprobs !== undefined && r.top_logprobs !== null) throw badRequest('top_logprobs', 'only with logprobs: true', r.top_logprobs);
    } else {
      const lp = num(r, 'logprobs', 0, 20, true);
      if (lp !== undefined) logprobs = lp;
    }
    // A response format.
    let constraint: (() => TokenConstraint) | undefined;
    if (r.response_format !== undefined && r.response_format !== null) {
      const f = await compileResponseFormat(r.response_format, this.vocabulary());
      if (f) constraint = requestConstraint(f, 'response_format');
    }
    if (forced) {
      if (constraint) throw new OpenAIError('tool_choice: a forced call is its own format; send it without response_format', { param: 'tool_choice', code: 'unsupported_parameter' });
      if (!toolFormat) {
        throw new OpenAIError("tool_choice: this model's chat template asks for tool calls in a form webinfer cannot parse (it reads Hermes/Qwen <tool_call> and Llama 3 JSON), so a call cannot be forced; use 'auto'",
          { param: 'tool_choice', code: 'tool_choice_not_supported' });
      }
      const calls = forced.map((f) => ({ ...forcedCallText(toolFormat!, f.name), schema: f.schema, schemaPath: `tools[${f.index}].function.parameters` }));
      constraint = requestConstraint(await (calls.length === 1 ? compileToolCall(calls[0], this.vocabulary()) : compileToolCalls(calls, this.vocabulary())), 'tool_choice');
    }
    if (constraint && (!stopIds.size)) {
      const param = forced ? 'tool_choice' : 'response_format';
      throw new OpenAIError(`${param}: constrained output ends with an end-of-sequence token, and this model names none (eos_token_id); add stop_token_ids`, { param });
    }
    return {
      prompt, maxTokens, n, stops, stopIds, logprobs, stream, includeUsage, toolFormat, harmony, echo, constraint, images,
      returnTokenIds: bool(r, 'return_token_ids') ?? !this.tok,
      // webinfer's own field: false keeps this request out of speculative decoding (loadModel's speculative).
      speculative: bool(r, 'speculative') ?? true,
      signal: r.signal as AbortSignal | undefined,
      sampling: {
        temperature, topP, topK: topK < 0 ? 0 : topK, minP, seed: seed === undefined ? undefined : Number(BigInt.asUintN(32, BigInt(seed))),
        presencePenalty: presence, frequencyPenalty: frequency, repetitionPenalty: repetition, logitBias,
      },
    };
  }

  /**
   * A message's content parts checked: { type: 'text', text } and, in a user message to a vision model,
   * { type: 'image_url', image_url: { url, detail?: 'auto' } } (collected in `images`, in order). Returns
   * the parts as templates read them: { type: 'text', text } and { type: 'image' }.
   */
  private contentParts(content: unknown[], i: number, role: string, vision: VisionTokens | null, images: ImagePart[]): ({ type: 'text'; text: string } | { type: 'image' })[] {
    const where = `messages[${i}].content`;
    if (content.length > MAX_CONTENT_PARTS) throw badRequest(where, `at most ${MAX_CONTENT_PARTS} content parts`, `${content.length} parts`);
    const maxUrl = Math.ceil(((this.imageOptions.maxBytes ?? DEFAULT_MAX_BYTES) * 4) / 3) + 256;
    return content.map((part, j) => {
      const at = `${where}[${j}]`;
      if (!isObj(part) || typeof part.type !== 'string') throw badRequest(at, "a content part { type: 'text', text } or { type: 'image_url', image_url: { url } }", part);
      const extra = Object.keys(part).find((k) => k !== 'type' && k !== (part.type === 'text' ? 'text' : part.type));
      if (extra !== undefined) throw badRequest(`${at}.${extra.slice(0, 64)}`, `no field other than type and ${part.type === 'text' ? 'text' : fmt(String(part.type).slice(0, 32))}`, extra.slice(0, 64));
      if (part.type === 'text') {
        if (typeof part.text !== 'string') throw badRequest(`${at}.text`, 'a string', part.text);
        return { type: 'text', text: part.text };
      }
      if (part.type !== 'image_url') {
        throw new OpenAIError(`${at}.type: expected 'text' or 'image_url', got ${fmt(part.type.slice(0, 64))} (webinfer reads text and images)`, { param: `${at}.type`, code: 'unsupported_content_part' });
      }
      if (!vision) {
        throw new OpenAIError(`${at}: this model reads no images (it has no vision tower); send text parts only, or use a vision-language model (Gemma 3, Qwen2.5-VL)`,
          { param: at, code: 'images_not_supported' });
      }
      if (role !== 'user') throw badRequest(`${at}.type`, `'text' in a ${role} message (images go in user messages)`, 'image_url');
      const iu = part.image_url;
      if (!isObj(iu) || typeof iu.url !== 'string') throw badRequest(`${at}.image_url`, "{ url: 'data:image/png;base64,...' | 'https://...' | path, detail? }", iu);
      for (const k of Object.keys(iu)) if (k !== 'url' && k !== 'detail') throw badRequest(`${at}.image_url.${k.slice(0, 64)}`, 'url and detail only', k.slice(0, 64));
      if (iu.detail !== undefined && iu.detail !== null && iu.detail !== 'auto') {
        throw new OpenAIError(`${at}.image_url.detail: expected 'auto' or none (the model's processor decides the resolution), got ${preview(iu.detail, 40)}`, { param: `${at}.image_url.detail`, code: 'unsupported_parameter' });
      }
      if (iu.url.length === 0 || iu.url.length > maxUrl) throw badRequest(`${at}.image_url.url`, `a URL of 1 to ${maxUrl} characters`, `${iu.url.length} characters`);
      if (images.length >= MAX_IMAGES) throw badRequest(at, `at most ${MAX_IMAGES} images in a request`, `image ${images.length + 1}`);
      images.push({ at: `${at}.image_url.url`, url: iu.url });
      return { type: 'image' };
    });
  }

  /**
   * A chat request's prompt as the engine gets it: the messages rendered by the template, tokenized,
   * each image's placeholder expanded to its image tokens, and the decoded images in order. Every
   * field is checked as create() checks it; nothing is queued.
   */
  async chatPrompt(req: unknown): Promise<{ prompt: number[]; images: RgbImage[] }> {
    const p = await this.parse('chat', req);
    return { prompt: p.prompt, images: p.images };
  }

  /** Refuses (413) a text of more UTF-8 bytes than `limit` tokens can hold, before it is tokenized. */
  private checkBytes(bytes: number, limit: number, param: string): void {
    const per = this.tok!.maxTokenBytes;
    if (bytes > limit * per) {
      throw new OpenAIError(`${param}: the prompt has ${bytes} bytes of text, more than ${limit - 1} tokens can hold (this tokenizer's longest token covers at most ${per} bytes); `
        + `this model serves at most ${limit - 1} prompt tokens (context ${this.m.maxContext}, cache ${this.m.capacity})`,
        { status: 413, param, code: 'context_length_exceeded' });
    }
  }

  /**
   * Token ids of `text`, bounded before the work: a text of more bytes than the context can hold is
   * refused untokenized; a long one is tokenized prefix by prefix (each 4× the last, the event loop
   * free between them) and refused once a prefix is past the context, so no prompt costs much more
   * tokenizing than the context it may fill.
   */
  private async encodeBounded(text: string, addSpecialTokens: boolean, limit: number, param: string): Promise<number[]> {
    const tok = this.tok!;
    this.checkBytes(utf8Bytes(text), limit, param);
    // A prefix reads at most one piece fewer or more than the text up to the same place.
    const slack = Math.ceil(tok.maxTokenBytes / 3) + 2;
    for (let n = PROBE_CHARS; n < text.length; n *= 4) {
      await nextTick();
      let got: number;
      try {
        got = tok.encode(text.slice(0, n), { addSpecialTokens }).length;
      } catch {
        break; // a cut that splits what the tokenizer needs whole: the whole text decides below
      }
      if (got - slack > limit) {
        throw new OpenAIError(`${param}: the prompt has more than ${got - slack} tokens in its first ${n} characters (of ${text.length}); this model serves at most ${limit - 1} prompt tokens (context ${this.m.maxContext}, cache ${this.m.capacity})`,
          { status: 413, param, code: 'context_length_exceeded' });
      }
    }
    if (text.length > PROBE_CHARS) await nextTick();
    try {
      return tok.encode(text, { addSpecialTokens });
    } catch (e) {
      // The tokenizer's failure on this text is this request's, not the server's.
      throw new OpenAIError(`${param}: the tokenizer could not encode the text: ${e instanceof Error ? e.message.slice(0, 200) : String(e).slice(0, 200)}`, { param, code: 'tokenizer_error' });
    }
  }

  /** The grammar library's view of the vocabulary, made once per model (it caches on it). */
  private vocabulary(): TokenVocabulary {
    if (this.vocab) return this.vocab;
    const tok = this.tok;
    if (!tok) throw new OpenAIError('response_format: constrained output needs the model\'s tokenizer', { param: 'response_format' });
    const texts: string[] = [];
    for (let i = 0; i < this.m.vocabSize; i++) {
      texts.push(i < tok.vocabSize && !tok.specialTokenIds.has(i) ? tok.decode([i]) : '');
    }
    const eos = [...new Set([...this.m.eosTokenIds, ...tok.eosTokenIds])];
    this.vocab = { size: this.m.vocabSize, tokenText: (id) => texts[id] ?? '', eosIds: eos };
    return this.vocab;
  }

  /** Runs a parsed request; with `out`, pushes chunks as tokens come and resolves when done. */
  private async run(kind: 'chat' | 'completions', p: Parsed, out: ChunkStream<Json> | null): Promise<Json | void> {
    const id = randomId(kind === 'chat' ? 'chatcmpl-' : 'cmpl-');
    const created = Math.floor(Date.now() / 1000);
    const model = this.m.id;
    const tok = this.tok;
    // Tool calls and harmony's channels are told apart only once the output is whole: its text is held.
    const holdAll = p.toolFormat !== null || p.harmony !== null;
    const choices: ChoiceText[] = Array.from({ length: p.n }, () => ({
      dec: tok ? new StreamDecoder(tok, { prefixIds: p.prompt.slice(-4) }) : null,
      stop: new StopMatcher(p.stops), text: '', held: '', ids: [], lps: [], finish: null, ended: false,
    }));
    const chunkOf = (i: number, delta: string | null, lps: TokenLogprob[] | null, finish: string | null, extra: Json = {}): Json => {
      if (kind === 'chat') {
        const d: Json = delta === null ? {} : { content: delta };
        return { id, object: 'chat.completion.chunk', created, model, choices: [{ index: i, delta: { ...d, ...extra }, logprobs: lps && lps.length ? { content: this.chatLogprobs(lps) } : null, finish_reason: finish }] };
      }
      return { id, object: 'text_completion', created, model, choices: [{ index: i, text: delta ?? '', logprobs: lps && lps.length ? this.completionLogprobs(lps, '') : null, finish_reason: finish }] };
    };
    // A stream's chunks of choice i: with token ids, each carries the ids since the choice's last chunk.
    const sentIds = new Array<number>(p.n).fill(0);
    let first = true;
    const send = (i: number, chunk: Json): void => {
      if (p.returnTokenIds) {
        const c = choices[i];
        (chunk.choices as Json[])[0].token_ids = c.ids.slice(sentIds[i]);
        sentIds[i] = c.ids.length;
        if (first) chunk.prompt_token_ids = p.prompt;
      }
      first = false;
      out!.push(chunk);
    };
    if (out) {
      for (let i = 0; i < p.n; i++) {
        if (kind === 'chat') send(i, chunkOf(i, '', null, null, { role: 'assistant' }));
        else if (p.echo && tok) send(i, chunkOf(i, tok.decode(p.prompt), null, null));
      }
    }
    // Text of new tokens for a choice: end-of-sequence ids are not text; stop strings end it.
    const take = (i: number, tokens: number[], lps: TokenLogprob[] | null): { text: string; stopped: boolean } => {
      const c = choices[i];
      let text = '';
      for (let k = 0; k < tokens.length && !c.ended; k++) {
        const t = tokens[k];
        c.ids.push(t);
        if (lps) c.lps.push(lps[k]);
        if (p.stopIds.has(t)) { c.ended = true; break; }
        if (!c.dec) continue;
        const r = c.stop.push(c.dec.push(t));
        text += r.text;
        if (r.stopped) { c.ended = true; c.finish = 'stop'; return { text, stopped: true }; }
      }
      return { text, stopped: false };
    };
    const closeText = (i: number): string => {
      const c = choices[i];
      if (!c.dec || c.stop.stopped) return '';
      const r = c.stop.push(c.dec.flush());
      return r.text + (r.stopped ? '' : c.stop.flush());
    };
    let handle: { stopChoice(i: number): void } | null = null;
    const h = this.m.engine.submit({
      prompt: Int32Array.from(p.prompt), maxTokens: p.maxTokens, n: p.n, sampling: p.sampling, stopTokens: p.stopIds,
      logprobs: p.logprobs, constraint: p.constraint, signal: p.signal, ...(p.speculative ? {} : { speculative: false }),
      // A request with images: the images go to the model with the request (its admitSequence), and
      // their digest keeps its cached blocks apart from those of the same tokens with other images.
      ...(p.images.length ? (this.m.imageInput ? await this.m.imageInput(p.prompt, p.images) : { encoderInput: { images: p.images }, cacheSalt: await imagesDigest(p.images) }) : {}),
      onTokens: (i, tokens, lps) => {
        const c = choices[i];
        if (c.ended) return;
        const before = c.lps.length;
        const { text, stopped } = take(i, tokens, lps);
        c.text += text;
        if (stopped) handle?.stopChoice(i);
        // Ids without text (no tokenizer, or a character not yet whole) still go out when asked for;
        // a held reply's ids go with its text at the end.
        const newIds = p.returnTokenIds && c.ids.length > sentIds[i];
        if (out && (text || (lps && c.lps.length > before) || newIds)) {
          if (holdAll) c.held += text;
          else send(i, chunkOf(i, text, p.logprobs !== null ? c.lps.slice(before) : null, null));
        }
      },
    }, kind === 'chat' ? 'chat.completions.create' : 'completions.create');
    handle = h;
    // parse() has already held prompt + max tokens to the cache's capacity: the engine refuses nothing here.
    const res: RequestResult = await h.result;
    const finishOf = (i: number): string => choices[i].finish ?? res.finish[i];
    const completionTokens = res.tokens.reduce((a, t) => a + t.length, 0);
    const usage = {
      prompt_tokens: res.promptTokens, completion_tokens: completionTokens, total_tokens: res.promptTokens + completionTokens,
      prompt_tokens_details: { cached_tokens: res.cachedTokens },
      // Speculative decoding's proposals, under OpenAI's names for predicted tokens: accepted ones came
      // with the step that verified them, rejected ones cost a row and were dropped. Only when it speculated.
      ...(res.specProposed ? { completion_tokens_details: { accepted_prediction_tokens: res.specAccepted, rejected_prediction_tokens: res.specProposed - res.specAccepted } } : {}),
    };
    const finals = choices.map((c, i) => {
      const tail = closeText(i);
      c.text += tail;
      let calls: ToolCall[] = [];
      let content: string | null = c.text;
      let reasoning: string | null = null;
      if (p.harmony && tok) {
        ({ content, reasoning } = parseHarmony(c.ids, p.harmony, (ids) => tok.decode(ids, { skipSpecialTokens: true }), p.prompt));
      } else if (p.toolFormat) {
        const parsed = parseToolCalls(c.text, p.toolFormat);
        calls = parsed.toolCalls;
        content = calls.length ? parsed.content : c.text;
      }
      return { tail, calls, content, reasoning, finish: calls.length ? 'tool_calls' : finishOf(i) };
    });
    if (out) {
      finals.forEach((f, i) => {
        if (holdAll) {
          if (f.reasoning) send(i, chunkOf(i, null, null, null, { reasoning_content: f.reasoning }));
          if (f.content) send(i, chunkOf(i, f.content, null, null));
          if (f.calls.length) send(i, chunkOf(i, null, null, null, { tool_calls: f.calls.map((tc, k) => ({ index: k, ...tc })) }));
        } else if (f.tail) {
          send(i, chunkOf(i, f.tail, null, null));
        }
        send(i, chunkOf(i, null, null, f.finish));
      });
      if (p.includeUsage) out.push({ id, object: kind === 'chat' ? 'chat.completion.chunk' : 'text_completion', created, model, choices: [], usage });
      return;
    }
    const body: Json = {
      id, object: kind === 'chat' ? 'chat.completion' : 'text_completion', created, model, usage,
      choices: finals.map((f, i) => {
        const c = choices[i];
        const extra: Json = p.returnTokenIds ? { token_ids: c.ids } : {};
        if (kind === 'chat') {
          const message: Json = { role: 'assistant', content: f.content, refusal: null };
          if (f.reasoning !== null) message.reasoning_content = f.reasoning;
          if (f.calls.length) message.tool_calls = f.calls;
          return { index: i, message, logprobs: p.logprobs !== null ? { content: this.chatLogprobs(c.lps) } : null, finish_reason: f.finish, ...extra };
        }
        const prefix = p.echo && tok ? tok.decode(p.prompt) : '';
        return { index: i, text: prefix + c.text, logprobs: p.logprobs !== null ? this.completionLogprobs(c.lps, prefix) : null, finish_reason: f.finish, ...extra };
      }),
    };
    if (p.returnTokenIds) body.prompt_token_ids = p.prompt;
    return body;
  }

  private tokenText(id: number): string {
    return this.tok && id < this.tok.vocabSize ? this.tok.decode([id]) : `<${id}>`;
  }

  private chatLogprobs(lps: TokenLogprob[]): Json[] {
    const enc = new TextEncoder();
    const one = (token: number, logprob: number) => { const t = this.tokenText(token); return { token: t, logprob, bytes: Array.from(enc.encode(t)) }; };
    return lps.map((l) => ({ ...one(l.token, l.logprob), top_logprobs: l.top.map((t) => one(t.token, t.logprob)) }));
  }

  private completionLogprobs(lps: TokenLogprob[], prefix: string): Json {
    const tokens = lps.map((l) => this.tokenText(l.token));
    let at = prefix.length;
    const offsets = tokens.map((t) => { const o = at; at += t.length; return o; });
    return {
      tokens, token_logprobs: lps.map((l) => l.logprob), text_offset: offsets,
      top_logprobs: lps.map((l) => Object.fromEntries(l.top.map((t) => [this.tokenText(t.token), t.logprob]))),
    };
  }
}
