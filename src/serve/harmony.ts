// gpt-oss's output format ("harmony", OpenAI's): the model writes messages as
//   <|channel|>analysis<|message|>…reasoning…<|end|><|start|>assistant<|channel|>final<|message|>…answer…<|return|>
// (the first message's header follows the prompt's `<|start|>assistant`). A chat completion's `content`
// is the text of the `final` channel; the `analysis` channel's text is the reasoning, returned as
// `reasoning_content` (vLLM's field for reasoning models). Headers may carry more after the channel
// name (` to=functions.x`, `<|constrain|>json` on commentary-channel tool calls): only the channel's
// first word is read. Messages are found by the special tokens' ids, never by text, so a model that
// writes "<|channel|>" as ordinary text cannot forge one.

/** The ids of harmony's special tokens in a tokenizer's vocabulary. */
export interface HarmonyTokens {
  start: number;
  channel: number;
  message: number;
  /** Tokens that end a message: <|end|>, <|return|>, <|call|> (those the vocabulary has). */
  ends: ReadonlySet<number>;
}

/** Harmony's token ids, or null when the tokenizer lacks <|start|>, <|channel|>, <|message|> or <|end|>. */
export function harmonyTokens(tokenToId: (token: string) => number | undefined): HarmonyTokens | null {
  const id = (t: string) => tokenToId(t);
  const [start, channel, message, end] = ['<|start|>', '<|channel|>', '<|message|>', '<|end|>'].map(id);
  if (start === undefined || channel === undefined || message === undefined || end === undefined) return null;
  const ends = new Set([end, id('<|return|>'), id('<|call|>')].filter((x): x is number => x !== undefined));
  return { start, channel, message, ends };
}

/** Whether a chat template renders harmony (gpt-oss's writes `<|channel|>` headers). */
export function isHarmonyTemplate(source: string): boolean {
  return source.includes('<|channel|>') && source.includes('<|message|>');
}

export interface HarmonyMessage {
  /** The header's channel name ('analysis', 'commentary', 'final'), or null where the header names none. */
  channel: string | null;
  /** The ids of the message's text (between <|message|> and its end, or the output's end). */
  body: number[];
}

/**
 * The messages of a harmony output (generated ids), in order; text outside any message is dropped.
 * `prompt`: the prompt's ids, whose last message may still be open where the output begins (HF's
 * template ends with `<|start|>assistant`, a header; llama.cpp's with `...<|channel|>final<|message|>`, a
 * body): the output continues it. Only generated ids are in the bodies returned.
 */
export function harmonyMessages(ids: readonly number[], t: HarmonyTokens, decode: (ids: number[]) => string, prompt: readonly number[] = []): HarmonyMessage[] {
  const out: HarmonyMessage[] = [];
  let header: number[] = [];
  let body: number[] | null = null;
  let channel: string | null = null;
  // From the prompt's last <|start|> on: what is open when the output begins.
  const from = prompt.lastIndexOf(t.start);
  const tail = from < 0 ? [] : prompt.slice(from);
  const all = [...tail, ...ids];
  for (let i = 0; i < all.length; i++) {
    const id = all[i];
    const generated = i >= tail.length;
    if (body !== null) {
      if (t.ends.has(id)) {
        if (generated) out.push({ channel, body });
        body = null;
        header = [];
      } else if (generated) body.push(id);
      continue;
    }
    if (id === t.start) header = [];
    else if (id === t.message) {
      const at = header.indexOf(t.channel);
      channel = at < 0 ? null : (decode(header.slice(at + 1).filter((x) => x !== t.channel)).trim().split(/\s+/)[0] || null);
      body = [];
    } else header.push(id);
  }
  if (body !== null) out.push({ channel, body });
  return out;
}

/**
 * A harmony output as a chat completion's message: `content` the final channel's text (null when the
 * output has none, e.g. it ended while reasoning), `reasoning` the analysis channel's (null when none).
 * Output with no harmony message at all (a model that did not follow the format) is all content.
 * `prompt`: as harmonyMessages'.
 */
export function parseHarmony(ids: readonly number[], t: HarmonyTokens, decode: (ids: number[]) => string,
                             prompt: readonly number[] = []): { content: string | null; reasoning: string | null } {
  const msgs = harmonyMessages(ids, t, decode, prompt);
  if (!msgs.length) {
    const plain = ids.filter((x) => !t.ends.has(x));
    return { content: plain.length ? decode(plain) : null, reasoning: null };
  }
  const text = (ch: string) => {
    const parts = msgs.filter((m) => m.channel === ch);
    return parts.length ? parts.map((m) => decode(m.body)).join('') : null;
  };
  return { content: text('final'), reasoning: text('analysis') };
}
