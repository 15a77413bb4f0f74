// gpt-oss's harmony output (src/serve/harmony.ts) read by token ids: the final channel is the content,
// the analysis channel the reasoning; headers with recipients and constraints; an output cut off while
// reasoning; output that never used the format; "<|channel|>" written as ordinary text is text.
import { describe, expect, it } from 'vitest';
import { harmonyTokens, isHarmonyTemplate, parseHarmony } from '../../src/serve/harmony';
import { OpenAIServing } from '../../src/serve/openai';
import { ChatTemplate, TextTokenizer } from '../../src/text/text';
import { byteTokenizerJson } from '../cases/text_fixture';

// A toy vocabulary: specials at 1000+, every other id is the character with that code.
const SPECIAL: Record<string, number> = { '<|start|>': 1000, '<|channel|>': 1001, '<|message|>': 1002, '<|end|>': 1003, '<|return|>': 1004, '<|call|>': 1005, '<|constrain|>': 1006 };
const BY_ID = new Map(Object.entries(SPECIAL).map(([k, v]) => [v, k]));
const enc = (s: string): number[] => {
  const out: number[] = [];
  const re = /<\|[a-z]+\|>/g;
  let at = 0;
  for (const m of s.matchAll(re)) {
    for (const ch of s.slice(at, m.index)) out.push(ch.codePointAt(0)!);
    out.push(SPECIAL[m[0]]);
    at = m.index! + m[0].length;
  }
  for (const ch of s.slice(at)) out.push(ch.codePointAt(0)!);
  return out;
};
/** Decoding as the tokenizer with skip_special_tokens. */
const dec = (ids: number[]) => ids.filter((i) => !BY_ID.has(i)).map((i) => String.fromCodePoint(i)).join('');
const T = harmonyTokens((t) => SPECIAL[t])!;

describe('harmony (gpt-oss) output', () => {
  it('finds its tokens, and only in a vocabulary that has them', () => {
    expect(T.start).toBe(1000);
    expect([...T.ends].sort()).toEqual([1003, 1004, 1005]);
    expect(harmonyTokens((t) => (t === '<|channel|>' ? undefined : SPECIAL[t]))).toBeNull();
    expect(isHarmonyTemplate("{{- '<|start|>assistant<|channel|>final<|message|>' }}")).toBe(true);
    expect(isHarmonyTemplate('<|im_start|>assistant')).toBe(false);
  });

  it('content is the final channel, reasoning the analysis channel', () => {
    const ids = enc('<|channel|>analysis<|message|>The user greets. Reply.<|end|><|start|>assistant<|channel|>final<|message|>Hello! How can I help?<|return|>');
    expect(parseHarmony(ids, T, dec)).toEqual({ content: 'Hello! How can I help?', reasoning: 'The user greets. Reply.' });
  });

  it('reads the channel name only (recipients and constraints after it), and commentary is neither', () => {
    const ids = enc('<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Oslo"}<|call|>');
    expect(parseHarmony(ids, T, dec)).toEqual({ content: null, reasoning: 'Need weather.' });
  });

  it("continues the prompt's open message: a header (HF's `<|start|>assistant`) or a body (llama.cpp's `...final<|message|>`)", () => {
    const hf = enc('<|start|>user<|message|>Hi<|end|><|start|>assistant');
    expect(parseHarmony(enc('<|channel|>analysis<|message|>Hm.<|end|><|start|>assistant<|channel|>final<|message|>Yes.<|return|>'), T, dec, hf))
      .toEqual({ content: 'Yes.', reasoning: 'Hm.' });
    const forced = enc('<|start|>user<|message|>Hi<|end|><|start|>assistant<|channel|>final<|message|>');
    expect(parseHarmony(enc('Straight answer.<|return|>'), T, dec, forced)).toEqual({ content: 'Straight answer.', reasoning: null });
    // A prompt whose last message is closed contributes nothing.
    expect(parseHarmony(enc('<|channel|>final<|message|>Ok.<|return|>'), T, dec, enc('<|start|>user<|message|>Hi<|end|>'))).toEqual({ content: 'Ok.', reasoning: null });
  });

  it('an output cut off while reasoning has reasoning and no content; one that never used the format is all content', () => {
    expect(parseHarmony(enc('<|channel|>analysis<|message|>Thinking about'), T, dec)).toEqual({ content: null, reasoning: 'Thinking about' });
    expect(parseHarmony(enc('Just text.<|return|>'), T, dec)).toEqual({ content: 'Just text.', reasoning: null });
    // The characters of "<|channel|>" written as text are not the special token.
    const textual = [...'<|channel|>final<|message|>x'].map((c) => c.codePointAt(0)!);
    expect(parseHarmony(textual, T, dec)).toEqual({ content: '<|channel|>final<|message|>x', reasoning: null });
  });
});

describe('chat.completions over a harmony model (a scripted engine)', () => {
  const names = ['<|start|>', '<|channel|>', '<|message|>', '<|end|>', '<|return|>', '<|call|>'];
  const json = byteTokenizerJson() as { added_tokens: object[] };
  json.added_tokens = names.map((content, i) => ({ id: 256 + i, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true }));
  const tok = TextTokenizer.create(json, {}, { eos_token_id: [260] });
  // The shape of gpt-oss's template: messages (an assistant's in the final channel), then the generation prompt `<|start|>assistant`.
  const template = new ChatTemplate("{% for m in messages %}{% if m.role == 'assistant' %}<|start|>assistant<|channel|>final<|message|>{{ m.content }}<|end|>"
    + "{% else %}<|start|>{{ m.role }}<|message|>{{ m.content }}<|end|>{% endif %}{% endfor %}{% if add_generation_prompt %}<|start|>assistant{% endif %}");
  const reply = '<|channel|>analysis<|message|>Greeting.<|end|><|start|>assistant<|channel|>final<|message|>Hi there!<|return|>';
  const out = tok.encode(reply, { addSpecialTokens: false });
  let prompt: number[] = [];
  const engine = {
    submit(o: { prompt: Int32Array; onTokens?: (i: number, t: number[], l: null) => void }) {
      prompt = Array.from(o.prompt);
      o.onTokens?.(0, out, null);
      return { result: Promise.resolve({ tokens: [out], finish: ['stop'], promptTokens: o.prompt.length, cachedTokens: 0 }), stopChoice: () => undefined };
    },
  };
  const serving = new OpenAIServing({ engine: engine as never, id: 'toy', vocabSize: 262, capacity: 4096, maxContext: 4096, eosTokenIds: [260] }, { tokenizer: tok, template });

  it('the reply splits into content (final) and reasoning_content (analysis); the prompt ends with the generation prompt', async () => {
    expect(out.filter((i) => i >= 256).length).toBe(7);
    const r = await serving.chat.completions.create({ messages: [{ role: 'user', content: 'Hello' }] }) as { choices: { message: Record<string, unknown>; finish_reason: string }[] };
    expect(r.choices[0].message).toMatchObject({ role: 'assistant', content: 'Hi there!', reasoning_content: 'Greeting.' });
    expect(tok.decode(prompt)).toBe('<|start|>user<|message|>Hello<|end|><|start|>assistant');
  });

  it('a stream holds the text back, then sends the reasoning and the content', async () => {
    const chunks: { choices: { delta: Record<string, unknown> }[] }[] = [];
    for await (const c of serving.chat.completions.create({ messages: [{ role: 'user', content: 'Hello' }], stream: true }) as AsyncIterable<never>) chunks.push(c);
    const deltas = chunks.map((c) => c.choices[0]?.delta ?? {});
    expect(deltas.filter((d) => d.reasoning_content).map((d) => d.reasoning_content)).toEqual(['Greeting.']);
    expect(deltas.filter((d) => typeof d.content === 'string' && d.content).map((d) => d.content)).toEqual(['Hi there!']);
  });
});
