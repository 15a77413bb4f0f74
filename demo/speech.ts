// The Model section's panels for the models that do not chat: an encoder's embeddings (each line an
// input, one batch, the cosine similarity of every pair as a shaded table) and a speech model's
// transcription (an audio file or a recording, decoded and resampled to the model's 16 kHz in the
// page, transcribed in the worker).
import { decodeWav, resample, type WorkerModel } from 'webinfer';
import { el } from './ui';

/** Space-separated token ids of one line, each checked against the vocabulary. */
function ids(line: string, vocab: number): number[] {
  const out = line.trim().split(/\s+/).map(Number);
  const bad = out.find((t) => !Number.isInteger(t) || t < 0 || t >= vocab);
  if (bad !== undefined) throw new Error(`the input '${line}': expected token ids from 0 to ${vocab - 1} separated by spaces (this checkpoint has no tokenizer), got ${bad}`);
  return out;
}

export interface EmbedResult {
  vectors: number[][];
  inputs: string[];
  tokens: number;
  ms: number;
}

/** Embeds the non-empty lines of `text` in one request (embeddings.create, OpenAI's shape), pooled as asked. */
export async function embedLines(model: WorkerModel, text: string, o: { pooling: 'mean' | 'cls' }): Promise<EmbedResult> {
  const inputs = text.split('\n').map((l) => l.trim()).filter(Boolean);
  if (!inputs.length) throw new Error('Enter at least one input (one a line).');
  const input = model.info.tokenizer ? inputs : inputs.map((l) => ids(l, model.info.vocabSize));
  const t0 = performance.now();
  const r = await model.embeddings.create({ input, pooling: o.pooling, encoding_format: 'float' }) as { data: { embedding: number[] }[]; usage: { prompt_tokens: number } };
  return { vectors: r.data.map((d) => d.embedding), inputs, tokens: r.usage.prompt_tokens, ms: performance.now() - t0 };
}

const cosine = (a: number[], b: number[]) => {
  let d = 0, na = 0, nb = 0;
  for (let i = 0; i < a.length; i++) { d += a[i] * b[i]; na += a[i] * a[i]; nb += b[i] * b[i]; }
  return d / Math.sqrt(na * nb);
};

/** The cosine similarity of every pair of inputs, each cell shaded by its value. */
export function renderSimilarity(table: HTMLTableElement, r: EmbedResult): void {
  const short = (s: string) => (s.length > 24 ? `${s.slice(0, 23)}…` : s);
  const head = el('tr', {}, el('th', {}, ''), ...r.inputs.map((s, j) => el('th', { title: s }, `${j + 1}. ${short(s)}`)));
  const rows = r.vectors.map((a, i) => el('tr', {},
    el('th', { title: r.inputs[i] }, `${i + 1}. ${short(r.inputs[i])}`),
    ...r.vectors.map((b, j) => {
      const c = cosine(a, b);
      const shade = Math.round(Math.max(0, Math.min(1, (c + 1) / 2)) * 100);
      return el('td', { class: 'num', 'data-cos': c.toFixed(6), style: `background: color-mix(in srgb, #4a7bd0 ${shade}%, transparent)`, title: `cos(${i + 1}, ${j + 1})` }, c.toFixed(3));
    })));
  table.replaceChildren(el('caption', {}, `cosine similarity of ${r.vectors.length} embeddings of ${r.vectors[0].length} values (${r.tokens} tokens, ${r.ms.toFixed(0)} ms)`),
    el('thead', {}, head), el('tbody', {}, ...rows));
  table.hidden = false;
}

/**
 * An audio file's samples as 16 kHz mono: WAV through the library's reader (any rate, resampled with a
 * low-pass), anything else the browser can play (mp3, ogg, webm, m4a) through decodeAudioData.
 */
export async function audioFileToPcm(file: Blob, rate = 16000): Promise<Float32Array> {
  const bytes = new Uint8Array(await file.arrayBuffer());
  const riff = bytes.length > 12 && String.fromCharCode(...bytes.subarray(0, 4)) === 'RIFF';
  if (riff) {
    const a = decodeWav(bytes, (file as File).name ?? 'file');
    return resample(a.pcm, a.sampleRate, rate);
  }
  const ctx = new AudioContext();
  try {
    const buf = await ctx.decodeAudioData(bytes.buffer.slice(0) as ArrayBuffer);
    const mono = new Float32Array(buf.length);
    for (let c = 0; c < buf.numberOfChannels; c++) {
      const ch = buf.getChannelData(c);
      for (let i = 0; i < ch.length; i++) mono[i] += ch[i] / buf.numberOfChannels;
    }
    return resample(mono, buf.sampleRate, rate);
  } catch (e) {
    throw new Error(`${(file as File).name ?? 'the file'}: this browser cannot decode it as audio (${(e as Error).message}); WAV always works`);
  } finally {
    void ctx.close();
  }
}

/** Records from the microphone until `stop` resolves; the recording as 16 kHz mono PCM. */
export async function record(stop: Promise<void>, rate = 16000): Promise<Float32Array> {
  if (!navigator.mediaDevices?.getUserMedia || typeof MediaRecorder === 'undefined') {
    throw new Error('this browser offers no microphone recording here (getUserMedia and MediaRecorder need a secure page: https or localhost)');
  }
  const stream = await navigator.mediaDevices.getUserMedia({ audio: { channelCount: 1 } });
  try {
    const rec = new MediaRecorder(stream);
    const chunks: Blob[] = [];
    rec.addEventListener('dataavailable', (ev) => chunks.push(ev.data));
    const ended = new Promise<void>((r) => rec.addEventListener('stop', () => r()));
    rec.start();
    await stop;
    rec.stop();
    await ended;
    return audioFileToPcm(new Blob(chunks, { type: rec.mimeType }), rate);
  } finally {
    for (const t of stream.getTracks()) t.stop();
  }
}

export interface Transcript {
  text: string;
  tokens: number[];
  segments?: { start: number; end: number; text: string; tokens: number[] }[];
}

/** What the transcript box shows: the text (or, without a tokenizer, the token ids), segments with their times. */
export function renderTranscript(box: HTMLElement, t: Transcript, seconds: number, ms: number): void {
  const lines = [`${seconds.toFixed(2)} s of audio transcribed in ${(ms / 1000).toFixed(2)} s (real-time factor ${(ms / 1000 / seconds).toFixed(3)})`, ''];
  lines.push(t.text ? t.text.trim() : `(no tokenizer: token ids) ${t.tokens.join(' ')}`);
  for (const g of t.segments ?? []) lines.push(`[${g.start.toFixed(2)} → ${g.end.toFixed(2)}] ${g.text.trim() || g.tokens.join(' ')}`);
  box.textContent = lines.join('\n');
  box.dataset.tokens = t.tokens.join(' ');
  box.hidden = false;
}
