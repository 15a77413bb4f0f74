// multipart/form-data bodies (RFC 7578), as OpenAI's /v1/audio/transcriptions takes them: each part's
// name, its filename and content type when it is a file, and its bytes. Text fields are UTF-8.
import { WebinferError } from '../core/errors.js';

export interface FormPart {
  name: string;
  filename: string | null;
  contentType: string | null;
  bytes: Uint8Array;
}

/** The boundary of a multipart/form-data content type, or null when the type is something else. */
export function multipartBoundary(contentType: string | null): string | null {
  if (!contentType || !/^\s*multipart\/form-data\s*(;|$)/i.test(contentType)) return null;
  const m = /;\s*boundary=(?:"([^"]+)"|([^\s;]+))/i.exec(contentType);
  return m ? (m[1] ?? m[2]) : null;
}

function indexOf(hay: Uint8Array, needle: Uint8Array, from: number): number {
  const first = needle[0];
  outer: for (let i = hay.indexOf(first, from); i !== -1 && i + needle.length <= hay.length; i = hay.indexOf(first, i + 1)) {
    for (let j = 1; j < needle.length; j++) if (hay[i + j] !== needle[j]) continue outer;
    return i;
  }
  return -1;
}

/** A header parameter (name="x", filename="y"), with RFC 2231's filename*=UTF-8''... form too. */
function param(header: string, key: string): string | null {
  const ext = new RegExp(`;\\s*${key}\\*=(?:UTF-8|utf-8)''([^;]+)`).exec(header);
  if (ext) {
    try { return decodeURIComponent(ext[1].trim()); } catch { /* fall through to the plain form */ }
  }
  const m = new RegExp(`;\\s*${key}=(?:"((?:[^"\\\\]|\\\\.)*)"|([^;\\s]+))`, 'i').exec(header);
  if (!m) return null;
  return m[1] !== undefined ? m[1].replace(/\\(.)/g, '$1') : m[2];
}

/** The parts of a multipart/form-data body; malformed bodies are refused with what was wrong. */
export function parseMultipart(body: Uint8Array, boundary: string): FormPart[] {
  const fail = (m: string): never => { throw new WebinferError(`parseMultipart: body: ${m}`); };
  const enc = new TextEncoder();
  const dec = new TextDecoder();
  const delim = enc.encode(`--${boundary}`);
  let at = indexOf(body, delim, 0);
  if (at < 0) fail(`expected a part starting with --${boundary}, got none`);
  const parts: FormPart[] = [];
  const crlf2 = enc.encode('\r\n\r\n');
  const next = enc.encode(`\r\n--${boundary}`);
  for (;;) {
    at += delim.length;
    if (body[at] === 0x2d && body[at + 1] === 0x2d) break;            // the closing --boundary--
    if (body[at] === 0x0d && body[at + 1] === 0x0a) at += 2;
    const headEnd = indexOf(body, crlf2, at);
    if (headEnd < 0) fail(`expected part ${parts.length}'s headers to end with a blank line, got the end of the body`);
    const headers = dec.decode(body.subarray(at, headEnd)).split('\r\n');
    const start = headEnd + 4;
    const end = indexOf(body, next, start);
    if (end < 0) fail(`expected part ${parts.length} to end with --${boundary}, got the end of the body`);
    const disp = headers.find((h) => /^content-disposition:/i.test(h));
    if (!disp) fail(`expected part ${parts.length} to have a Content-Disposition header, got ${JSON.stringify(headers)}`);
    const name = param(disp!, 'name');
    if (name === null) fail(`expected part ${parts.length}'s Content-Disposition to name the field, got ${JSON.stringify(disp)}`);
    const type = headers.find((h) => /^content-type:/i.test(h));
    parts.push({ name: name!, filename: param(disp!, 'filename'), contentType: type ? type.slice(type.indexOf(':') + 1).trim() : null, bytes: body.subarray(start, end) });
    at = end + 2;
  }
  return parts;
}
