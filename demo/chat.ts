// The Model section's conversation: each turn is an OpenAI request to the model in the worker
// (chat.completions with the whole history, or a standalone completion), its text streamed into the
// page as chunks arrive, and a line of what the turn cost: tokens/s, the prompt's tokens and how many
// of them came from the prefix cache (usage.prompt_tokens_details.cached_tokens), and, when the model
// speculates, how many proposed tokens its steps accepted (usage.completion_tokens_details). A vision
// model's message may carry an attached image (an image_url part), shown beside the user's text.
import type { WorkerModel } from 'webinfer';
import { el, fmt } from './ui';

export type Mode = 'chat' | 'completion';

/** An image attached to the next chat message: its file name and a data: URL of its bytes. */
export interface Attachment { name: string; url: string }

export interface TurnSettings {
  mode: Mode;
  /** Chat mode: the system message, when not blank. */
  system: string;
  maxTokens: number;
  temperature: number;
  topP: number;
  /** 0: every token (the field is left out). */
  topK: number;
  /** undefined: no seed (a fresh one each request). */
  seed?: number;
  stream: boolean;
}

export interface TurnResult {
  text: string;
  ids: number[];
  stopped: boolean;
  promptTokens: number | null;
  cachedTokens: number | null;
  /** Speculative decoding: proposals verified and accepted (null: the request did not speculate). */
  speculation: { proposed: number; accepted: number } | null;
  completionTokens: number;
  finishReason: string | null;
  tokensPerSecond: number;
  firstTokenMs: number | null;
  wallMs: number;
}

type Json = Record<string, unknown>;
interface Usage {
  prompt_tokens?: number; completion_tokens?: number; prompt_tokens_details?: { cached_tokens?: number } | null;
  /** Speculative decoding's proposals (the model speculated for this request). */
  completion_tokens_details?: { accepted_prediction_tokens?: number; rejected_prediction_tokens?: number } | null;
}

/** A prompt without a tokenizer: token ids separated by spaces or commas, each below the vocabulary size. */
export function parseIds(text: string, vocab: number): number[] {
  const parts = text.trim().split(/[\s,]+/).filter(Boolean);
  if (!parts.length) throw new Error('the prompt is empty: without a tokenizer it is a list of token ids, e.g. "1 17 93"');
  return parts.map((p) => {
    const n = Number(p);
    if (!/^\d+$/.test(p) || n >= vocab) throw new Error(`"${p}" is not a token id in [0, ${vocab}) (this checkpoint has no tokenizer: the prompt is token ids)`);
    return n;
  });
}

/** The conversation: its messages (what the next chat request sends) and their turns on the page. */
export class Conversation {
  readonly messages: { role: 'user' | 'assistant'; content: string | Json[] }[] = [];

  constructor(private readonly log: HTMLElement) {}

  clear(): void {
    this.messages.length = 0;
    this.log.replaceChildren();
  }

  private turn(role: string, label: string, text: string, image?: Attachment): { turn: HTMLElement; body: HTMLElement } {
    const body = el('div', { class: 'text' }, text);
    const turn = el('div', { class: `turn ${role}`, 'data-role': role }, el('div', { class: 'who' }, label),
      ...(image ? [el('img', { class: 'thumb', src: image.url, alt: image.name, title: image.name })] : []), body);
    this.log.append(turn);
    this.log.scrollTop = this.log.scrollHeight;
    return { turn, body };
  }

  /**
   * One turn: the user's text (chat: a new user message after the history; completion: the prompt,
   * text or token ids), the model's answer streamed into the page, its stats under it. A turn that
   * fails leaves the history as it was; a stopped one keeps what came.
   */
  async send(model: WorkerModel, input: string, s: TurnSettings, signal: AbortSignal, image?: Attachment): Promise<TurnResult> {
    const info = model.info;
    const chat = s.mode === 'chat';
    const prompt = chat || info.tokenizer ? input : parseIds(input, info.vocabSize);
    const sampling: Json = { max_tokens: s.maxTokens, temperature: s.temperature, top_p: s.topP };
    if (s.topK > 0) sampling.top_k = s.topK;
    if (s.seed !== undefined) sampling.seed = s.seed;
    if (s.stream) Object.assign(sampling, { stream: true, stream_options: { include_usage: true } });
    // Token ids come back too (vLLM's return_token_ids): a model without a tokenizer shows them.
    sampling.return_token_ids = true;
    const history = [...(chat && s.system.trim() ? [{ role: 'system', content: s.system }] : []), ...this.messages];
    // An attached image goes first in the message, as an OpenAI image_url part (a data: URL).
    const content: string | Json[] = chat && image ? [{ type: 'image_url', image_url: { url: image.url } }, { type: 'text', text: input }] : input;
    const request = chat
      ? { messages: [...history, { role: 'user', content }], ...sampling }
      : { prompt, ...sampling };

    this.turn('user', chat ? 'you' : 'prompt', input, chat ? image : undefined);
    const { turn, body } = this.turn('assistant', chat ? 'model' : 'completion', '');
    turn.dataset.state = 'running';
    const stats = el('p', { class: 'turn-stats small' }, 'waiting for the first token…');
    turn.append(stats);

    let text = '';
    const ids: number[] = [];
    let usage: Usage | null = null;
    let finish: string | null = null;
    let stopped = false;
    const t0 = performance.now();
    let first: number | null = null;
    const show = () => {
      // Without a tokenizer there is no text: the ids are the output.
      body.textContent = info.tokenizer ? text : ids.join(' ');
      turn.dataset.ids = ids.join(' ');
    };
    let pending = false;
    const paint = () => { pending = false; show(); };
    const schedule = () => {
      if (pending) return;
      pending = true;
      // One repaint a frame however fast chunks come; a hidden tab gets no frames, so a timer too.
      requestAnimationFrame(() => { if (pending) paint(); });
      setTimeout(() => { if (pending) paint(); }, 100);
    };
    const take = (choice: Json | undefined) => {
      if (!choice) return;
      const delta = chat ? ((choice.delta ?? choice.message) as Json | undefined)?.content : choice.text;
      if (typeof delta === 'string' && delta) text += delta;
      if (Array.isArray(choice.token_ids)) ids.push(...(choice.token_ids as number[]));
      if (typeof choice.finish_reason === 'string') finish = choice.finish_reason;
      if ((typeof delta === 'string' && delta) || (Array.isArray(choice.token_ids) && choice.token_ids.length)) first ??= performance.now() - t0;
    };
    try {
      const create = chat ? model.chat.completions.create : model.completions.create;
      if (s.stream) {
        for await (const chunk of create({ ...request, stream: true, signal })) {
          take((chunk.choices as Json[] | undefined)?.[0]);
          if (chunk.usage) usage = chunk.usage as Usage;
          schedule();
        }
      } else {
        const r = await create({ ...request, stream: false, signal });
        take((r.choices as Json[] | undefined)?.[0]);
        usage = (r.usage as Usage | undefined) ?? null;
      }
    } catch (e) {
      if (!signal.aborted) {
        turn.dataset.state = 'error';
        stats.textContent = 'failed (see the message below)';
        pending = false;
        show();
        throw e;
      }
      // Stop: what came before it stays.
      stopped = true;
    }
    pending = false;
    show();
    const wallMs = performance.now() - t0;
    const completion = usage?.completion_tokens ?? ids.length;
    const det = usage?.completion_tokens_details;
    const accepted = det?.accepted_prediction_tokens ?? 0, rejected = det?.rejected_prediction_tokens ?? 0;
    const speculation = accepted + rejected > 0 ? { proposed: accepted + rejected, accepted } : null;
    const r: TurnResult = {
      speculation,
      text, ids, stopped, finishReason: finish, wallMs, firstTokenMs: first, completionTokens: completion,
      promptTokens: usage?.prompt_tokens ?? null, cachedTokens: usage?.prompt_tokens_details?.cached_tokens ?? null,
      tokensPerSecond: wallMs > 0 ? (1000 * completion) / wallMs : 0,
    };
    if (chat) this.messages.push({ role: 'user', content }, { role: 'assistant', content: text });
    turn.dataset.state = stopped ? 'stopped' : 'done';
    if (r.promptTokens !== null) turn.dataset.promptTokens = String(r.promptTokens);
    if (r.cachedTokens !== null) turn.dataset.cachedTokens = String(r.cachedTokens);
    turn.dataset.completionTokens = String(completion);
    if (speculation) {
      turn.dataset.specProposed = String(speculation.proposed);
      turn.dataset.specAccepted = String(speculation.accepted);
    }
    if (finish) turn.dataset.finishReason = finish;
    if (stopped && !usage) {
      // A stopped stream ends before its last chunks (token ids, usage): what it showed is what there is.
      stats.textContent = `stopped after ${fmt(wallMs / 1000, 2)} s, ${text.length} characters · first token after ${first === null ? '–' : `${fmt(first / 1000, 2)} s`}`;
      return r;
    }
    stats.replaceChildren(
      `${completion} tokens in ${fmt(wallMs / 1000, 2)} s: `,
      el('strong', { class: 'tps' }, fmt(r.tokensPerSecond, 1)),
      ` tokens/s · first token after ${first === null ? '–' : `${fmt(first / 1000, 2)} s`} · prompt `,
      el('span', { class: 'prompt-tokens' }, r.promptTokens === null ? '–' : String(r.promptTokens)),
      ' tokens, ',
      el('strong', { class: 'cached-tokens' }, r.cachedTokens === null ? '–' : String(r.cachedTokens)),
      ' from the prefix cache · ',
      ...(speculation ? [el('span', { class: 'spec' }, `${speculation.accepted} of ${speculation.proposed} proposed tokens accepted (${fmt((100 * speculation.accepted) / speculation.proposed, 0)}%)`), ' · '] : []),
      `${stopped ? 'stopped' : finish === 'length' ? `reached ${s.maxTokens} tokens` : finish === 'stop' ? 'ended by the model' : finish ?? 'ended'}`
        + `${s.stream ? '' : ' · not streamed'}`,
    );
    return r;
  }
}
