// Errors of the serving surface in OpenAI's shape: { error: { message, type, param, code } } with the
// HTTP status a server answers. The in-process API throws them too, so a program sees the same error
// whether it calls model.chat.completions.create or POSTs to `webinfer serve`.
import { fmt, preview, WebinferError } from '../core/errors.js';

export type OpenAIErrorType = 'invalid_request_error' | 'not_found_error' | 'server_error' | 'overloaded_error' | 'cancelled';

export class OpenAIError extends WebinferError {
  /** The HTTP status a server answers with: 400 bad request, 404 unknown model, 413 prompt too long, 503 queue full, 500. */
  readonly status: number;
  readonly type: OpenAIErrorType;
  /** The request field at fault (OpenAI's `param`), or null. */
  readonly param: string | null;
  readonly code: string | null;

  constructor(message: string, o: { status?: number; type?: OpenAIErrorType; param?: string | null; code?: string | null } = {}) {
    super(message);
    this.name = 'OpenAIError';
    this.status = o.status ?? 400;
    this.type = o.type ?? (this.status === 404 ? 'not_found_error' : this.status === 503 ? 'overloaded_error' : this.status >= 500 ? 'server_error' : 'invalid_request_error');
    this.param = o.param ?? null;
    this.code = o.code ?? null;
  }

  /** The body OpenAI's servers send. */
  toJSON(): { error: { message: string; type: string; param: string | null; code: string | null } } {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } };
  }
}

/** A request's bad field: 400, with the field named as OpenAI's `param`. */
export function badRequest(param: string, expected: string, got: unknown, op = 'create'): OpenAIError {
  // A bounded quote: a client's value may be megabytes long or nested without end.
  const shown = typeof got === 'string' ? fmt(got) : got === undefined ? 'undefined' : preview(got);
  return new OpenAIError(`${op}: ${param}: expected ${expected}, got ${shown}`, { status: 400, param });
}

/** How deeply a request may nest (objects and arrays): deeper is refused before anything walks it, so
 *  no check, template or schema compiler recurses as deep as a client likes. */
export const MAX_REQUEST_DEPTH = 64;
