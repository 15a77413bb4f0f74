// OpenAI's Embeddings API over an encoder-only model (API.md "Encoders": embeddings.create), and the
// refusal of the generation calls an encoder does not serve. The forward pass, encode and embed are
// models/encoder.ts's (EncoderRunner); this layer checks OpenAI's request shapes and answers in them.
import { fmt } from '../core/errors.js';
import { EncoderRunner } from '../models/encoder.js';
import { badRequest, OpenAIError } from './errors.js';

/** OpenAI's embeddings request (webinfer adds `pooling`, as embed's; default 'mean'). A type rather than
 *  an interface: a server passes it as a Record<string, unknown> (ServableModel). */
export type EmbeddingsRequest = {
  input: string | string[] | number[] | number[][];
  model?: string;
  encoding_format?: 'float' | 'base64';
  dimensions?: number;
  user?: string;
  pooling?: 'mean' | 'cls';
  /** webinfer's: aborts the request (a server's client that went away). */
  signal?: AbortSignal;
};

export interface EmbeddingsResponse {
  object: 'list';
  data: { object: 'embedding'; index: number; embedding: number[] | string }[];
  model: string;
  usage: { prompt_tokens: number; total_tokens: number };
}

const REQUEST_KEYS = ['input', 'model', 'encoding_format', 'dimensions', 'user', 'pooling', 'signal'];

/** Little-endian f32 bytes of v as base64 (OpenAI's encoding_format 'base64'). */
function base64F32(v: Float32Array): string {
  const bytes = new Uint8Array(v.length * 4);
  const dv = new DataView(bytes.buffer);
  for (let i = 0; i < v.length; i++) dv.setFloat32(4 * i, v[i], true);
  let s = '';
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(s);
}

/** An encoder-only model as applications and the server hold it: EncoderRunner with OpenAI's embeddings. */
export class EncoderModel extends EncoderRunner {
  /** OpenAI's Embeddings API over this model. */
  readonly embeddings: { create(req: EmbeddingsRequest): Promise<EmbeddingsResponse> } = { create: (req) => this.createEmbeddings(req) };
  /** Not served by an encoder: every call is refused with an OpenAI-shaped error. */
  readonly chat: { completions: { create(req: unknown): Promise<never> } } = { completions: { create: this.refuse('chat.completions.create') } };
  readonly completions: { create(req: unknown): Promise<never> } = { create: this.refuse('completions.create') };

  private refuse(what: string): () => Promise<never> {
    return async (): Promise<never> => {
      throw new OpenAIError(`${what}: the model ${this.id} is an encoder-only model (${this.architecture}): it serves embeddings only`, { status: 400, param: 'model', code: 'model_not_supported' });
    };
  }

  // ------------------------------------------------------------------------------------ embeddings

  private async createEmbeddings(req: EmbeddingsRequest): Promise<EmbeddingsResponse> {
    const op = 'embeddings.create';
    if (this.destroyed) throw new OpenAIError(`${op}: the model was destroyed`, { status: 500 });
    if (req === null || typeof req !== 'object' || Array.isArray(req)) throw badRequest('request', 'an object { input, model?, encoding_format?, dimensions? }', req, op);
    for (const k of Object.keys(req)) {
      if (!REQUEST_KEYS.includes(k)) throw new OpenAIError(`${op}: ${k}: not a field of an embeddings request (${REQUEST_KEYS.join(', ')})`, { param: k });
    }
    if (req.model !== undefined && req.model !== null && typeof req.model !== 'string') throw badRequest('model', 'a string', req.model, op);
    if (req.user !== undefined && typeof req.user !== 'string') throw badRequest('user', 'a string', req.user, op);
    const format = req.encoding_format ?? 'float';
    if (format !== 'float' && format !== 'base64') throw badRequest('encoding_format', "'float' or 'base64'", format, op);
    const pooling = req.pooling ?? 'mean';
    if (pooling !== 'mean' && pooling !== 'cls') throw badRequest('pooling', "'mean' or 'cls'", pooling, op);
    const H = this.hiddenSize;
    const dims = req.dimensions;
    if (dims !== undefined && dims !== null && !(Number.isInteger(dims) && dims >= 1 && dims <= H)) throw badRequest('dimensions', `an integer in [1, ${H}] (the model's hidden size)`, dims, op);
    const signal = req.signal;
    if (signal !== undefined && !(typeof AbortSignal !== 'undefined' && signal instanceof AbortSignal)) throw badRequest('signal', 'an AbortSignal', signal, op);
    const inputs = this.requestInputs(op, req.input);
    const cancelled = () => {
      if (!signal?.aborted) return;
      const r: unknown = signal.reason;
      throw r instanceof Error ? r : new OpenAIError(`${op}: the request was cancelled`, { status: 499, type: 'cancelled', code: 'cancelled' });
    };
    cancelled();
    const vecs = await this.pool(op, inputs, pooling, true);
    cancelled();
    let tokens = 0;
    for (const x of inputs) tokens += x.length;
    const data = vecs.map((v, index) => {
      let e = v;
      if (dims && dims < H) {
        // OpenAI's shortened embeddings: the first `dimensions` values, normalized again.
        e = v.slice(0, dims);
        let n = 0;
        for (const x of e) n += x * x;
        const inv = 1 / Math.max(Math.sqrt(n), 1e-12);
        for (let d = 0; d < dims; d++) e[d] *= inv;
      }
      return { object: 'embedding' as const, index, embedding: format === 'base64' ? base64F32(e) : Array.from(e) };
    });
    return { object: 'list', data, model: this.id, usage: { prompt_tokens: tokens, total_tokens: tokens } };
  }

  /** OpenAI's input forms: a string, strings, token ids, or arrays of token ids. */
  private requestInputs(op: string, input: unknown): Int32Array[] {
    const V = this.arch.cfg.vocabSize;
    const ids = (x: unknown, param: string): Int32Array => {
      if (!Array.isArray(x) || x.length === 0) throw badRequest(param, 'a non-empty array of token ids', x, op);
      for (const [i, t] of x.entries()) {
        if (!Number.isInteger(t) || t < 0 || t >= V) throw new OpenAIError(`${op}: ${param}[${i}]: expected a token id in [0, ${V}), got ${fmt(t)}`, { param: 'input' });
      }
      return this.tooLong(op, Int32Array.from(x as number[]));
    };
    const text = (x: string): Int32Array => {
      if (x.length === 0) throw new OpenAIError(`${op}: input: expected non-empty strings, got ''`, { param: 'input' });
      if (!this.tokenizer) throw new OpenAIError(`${op}: input: this model was loaded without a tokenizer, so it cannot read text; give token ids`, { param: 'input', code: 'no_tokenizer' });
      return this.tooLong(op, Int32Array.from(this.tokenizer.encode(x)));
    };
    if (typeof input === 'string') return [text(input)];
    if (!Array.isArray(input) || input.length === 0) throw badRequest('input', 'a string, an array of strings, an array of token ids or an array of such arrays (non-empty)', input, op);
    if (input.every((x) => typeof x === 'string')) return input.map(text);
    if (input.every((x) => typeof x === 'number')) return [ids(input, 'input')];
    if (input.every((x) => Array.isArray(x))) return input.map((x, i) => ids(x, `input[${i}]`));
    throw badRequest('input', 'one kind of element: all strings, all token ids, or all arrays of token ids', input, op);
  }

  private tooLong(op: string, ids: Int32Array): Int32Array {
    if (ids.length > this.maxInputTokens) {
      throw new OpenAIError(`${op}: input: an input of ${ids.length} tokens is longer than this model's ${this.maxInputTokens} (max_position_embeddings)`, { param: 'input', code: 'context_length_exceeded' });
    }
    return ids;
  }
}
