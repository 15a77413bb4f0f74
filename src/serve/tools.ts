// Tool calls in a model's output, in the format its chat template asks for, as OpenAI's `tool_calls`.
// - hermes: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`, one block per call, text around
//   them is content (Hermes 2 Pro, Qwen 2/2.5/3, and their templates).
// - llama3: the whole reply is one JSON object {"name": ..., "parameters": {...}} (Llama 3.1+'s
//   "JSON based tool calling"), possibly after <|python_tag|>; several may be joined by ';'.
// Output that does not parse is content with no calls: a model that meant to call a tool and wrote
// broken JSON is answered as text, never with a call the program cannot run.
import { check, fmt } from '../core/errors.js';

export type ToolCallFormat = 'hermes' | 'llama3';

export interface ToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

export interface ParsedToolCalls {
  /** The text that is not a call, or null when nothing else was written. */
  content: string | null;
  toolCalls: ToolCall[];
}

/** The format a chat template asks tool calls in, or null when it names none this parser knows. */
export function toolCallFormat(template: string): ToolCallFormat | null {
  check(typeof template === 'string', 'toolCallFormat', 'template', 'a chat template string', template);
  if (template.includes('<tool_call>')) return 'hermes';
  // Llama 3.1/3.2/3.3 ask for `{"name": function name, "parameters": dictionary of argument name and
  // its value}` and mark built-in tool calls with <|python_tag|>.
  const llamaHeader = template.includes('<|start_header_id|>');
  if (llamaHeader && (template.includes('"parameters"') || template.includes('<|python_tag|>'))) return 'llama3';
  return null;
}

/** `call_` and 24 random hex digits, as OpenAI's ids look. */
export function toolCallId(): string {
  const bytes = new Uint8Array(12);
  globalThis.crypto.getRandomValues(bytes);
  return `call_${Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('')}`;
}

const isObject = (x: unknown): x is Record<string, unknown> => typeof x === 'object' && x !== null && !Array.isArray(x);

/**
 * A call's JSON as a ToolCall, or null when it is not { name: string, arguments|parameters: object }.
 * Without the tags of the Hermes form, a reply that is merely a JSON object with a name must not read
 * as a call, so there (`needArgs`) the arguments must be written.
 */
function toCall(json: string, needArgs: boolean): ToolCall | null {
  let v: unknown;
  try {
    v = JSON.parse(json);
  } catch {
    return null;
  }
  if (!isObject(v) || typeof v.name !== 'string' || v.name.length === 0) return null;
  if (needArgs && v.arguments === undefined && v.parameters === undefined) return null;
  const args = v.arguments !== undefined ? v.arguments : v.parameters !== undefined ? v.parameters : {};
  let text: string;
  if (isObject(args)) text = JSON.stringify(args);
  else if (typeof args === 'string') {
    // Some models write the arguments already as a JSON string, as OpenAI sends them.
    try {
      if (!isObject(JSON.parse(args))) return null;
    } catch {
      return null;
    }
    text = args;
  } else return null;
  return { id: toolCallId(), type: 'function', function: { name: v.name, arguments: text } };
}

const OPEN = '<tool_call>';
const CLOSE = '</tool_call>';

function parseHermes(text: string): ParsedToolCalls | null {
  const calls: ToolCall[] = [];
  let content = '';
  let pos = 0;
  for (;;) {
    const start = text.indexOf(OPEN, pos);
    if (start < 0) break;
    content += text.slice(pos, start);
    const end = text.indexOf(CLOSE, start + OPEN.length);
    // A last block without its close tag (the reply ended at the model's end token) still counts.
    const body = text.slice(start + OPEN.length, end < 0 ? text.length : end);
    const call = toCall(body.trim(), false);
    if (!call) return null;
    calls.push(call);
    pos = end < 0 ? text.length : end + CLOSE.length;
  }
  if (calls.length === 0) return null;
  content += text.slice(pos);
  const trimmed = content.trim();
  return { content: trimmed.length > 0 ? trimmed : null, toolCalls: calls };
}

/** The end of the JSON object starting at `start` ('{'), or -1: braces counted outside strings. */
function objectEnd(text: string, start: number): number {
  let depth = 0;
  let inString = false;
  for (let i = start; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === '\\') i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === '{') depth++;
    else if (c === '}' && --depth === 0) return i + 1;
  }
  return -1;
}

function parseLlama3(text: string): ParsedToolCalls | null {
  let rest = text.trim();
  if (rest.startsWith('<|python_tag|>')) rest = rest.slice('<|python_tag|>'.length).trim();
  const calls: ToolCall[] = [];
  let pos = 0;
  while (pos < rest.length) {
    if (rest[pos] !== '{') return null;
    const end = objectEnd(rest, pos);
    if (end < 0) return null;
    const call = toCall(rest.slice(pos, end), true);
    if (!call) return null;
    calls.push(call);
    pos = end;
    while (pos < rest.length && /[\s;]/.test(rest[pos]!)) pos++;
  }
  return calls.length > 0 ? { content: null, toolCalls: calls } : null;
}

/**
 * The tool calls in a model's reply, and the rest of it as content. With no calls, or calls that do
 * not parse, the whole text is content (null when empty) and toolCalls is [].
 */
export function parseToolCalls(text: string, format: ToolCallFormat): ParsedToolCalls {
  check(typeof text === 'string', 'parseToolCalls', 'text', 'a string', text);
  check(format === 'hermes' || format === 'llama3', 'parseToolCalls', 'format', "'hermes' or 'llama3'", typeof format === 'string' ? fmt(format) : format);
  const parsed = format === 'hermes' ? parseHermes(text) : parseLlama3(text);
  return parsed ?? { content: text.length > 0 ? text : null, toolCalls: [] };
}

/**
 * The text around a forced call's arguments (tool_choice naming a function), as the format writes one
 * call: the arguments' JSON goes between `prefix` and `suffix`, and parseToolCalls reads the whole back
 * as that call. Hermes in Qwen 2.5/3's layout (newlines inside the tags); Llama 3.1's JSON object.
 */
export function forcedCallText(format: ToolCallFormat, name: string): { prefix: string; suffix: string } {
  check(format === 'hermes' || format === 'llama3', 'forcedCallText', 'format', "'hermes' or 'llama3'", typeof format === 'string' ? fmt(format) : format);
  check(typeof name === 'string' && name.length > 0, 'forcedCallText', 'name', 'a function name', name);
  const n = JSON.stringify(name);
  return format === 'hermes'
    ? { prefix: `${OPEN}\n{"name": ${n}, "arguments": `, suffix: `}\n${CLOSE}` }
    : { prefix: `{"name": ${n}, "parameters": `, suffix: '}' };
}
