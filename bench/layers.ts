// The layers suite (issue 31): the new model kinds at real sizes with random weights, on one device.
//   - BERT-base's shape (BertModel: 12 layers, hidden 768, 12 heads, MLP 3072, vocab 30522): sentences/s
//     of 128-token inputs at batch 1 and 32 (model.encode's wall time, states read back; GPU time of
//     the same call where the adapter has timestamps), and the share of the f32-FMA and
//     subgroup-matrix ceilings measured in the same run (FLOPs = 2·linear params·tokens + attention's
//     4·L²·H per layer and input).
//   - Whisper-small's shape (12 + 12 layers, d_model 768, 12 heads, FFN 3072, vocab 51865, 80 mels):
//     real-time factor on 30 s clips at batch 1 and 8 (logMel + encoder + a fixed number of decoded
//     tokens: generate with no stop tokens, so a random model's end-of-text cannot cut it short), and the
//     decoder's per-token step at batch 1 beside a decoder-only Llama of the same size (hidden 768, 12
//     layers, 12 heads, MLP 3072, vocab 51865) at the same context: the issue's target is within 1.5×.
//   - gpt-oss-20b's shape at batch 1 (24 layers, hidden 2880, 64/8 heads of 64, 32 experts top-4,
//     vocab 201088, alternating 128-token windows, sinks, YaRN): tokens/s and the share of the read
//     roofline (the bytes a step reads: attention, router, the 4 chosen experts, lm_head: the model's
//     stepBytes), with MXFP4 experts (ggml's blocks: createQuantExperts of random bytes put in place of
//     createRandomModel's bf16 experts before any step; see gptOssMxfp4) and with the bf16 experts.
//   - T5-small's shape (6 + 6 layers, d_model 512, 8 heads of 64, d_ff 2048, vocab 32128; issue 43): generate
//     of N = 32, 64, 128 and 256 tokens after a 64-token input at batch 1, timed whole; the decode time
//     must be linear in N (each step runs its one new token over the cache, no prefix recomputed): the
//     marginal ms per token between the longest pair against the middle pair, and a least-squares line.
//
// Random weights for the encoder and Whisper: a safetensors file written in memory from each loader's
// schema (names and shapes as bert.ts / whisper.ts check them), bf16 values of a seeded xorshift,
// uniform with standard deviation 0.02, LayerNorm weights 1 and biases 0, loaded through loadSafetensors
// and engine.loadModel as a downloaded checkpoint would be (weights stored f16 on the GPU).
// Results: layers-<device>.md and .json, rewritten after each part, so a run cut short keeps what it
// measured. --layers-quick (or --quick) runs tiny shapes of the same kinds (software adapters).
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createRandomModel, encodeSafetensors, loadSafetensors, ops, type Engine, type Model } from 'webinfer';
import { median, type Ceilings } from './harness';

// --------------------------------------------------------------------------------------- shapes

export const BERT_BASE = {
  architectures: ['BertModel'], model_type: 'bert', hidden_size: 768, num_hidden_layers: 12, num_attention_heads: 12,
  intermediate_size: 3072, vocab_size: 30522, max_position_embeddings: 512, type_vocab_size: 2, hidden_act: 'gelu',
  layer_norm_eps: 1e-12, position_embedding_type: 'absolute',
};
const BERT_QUICK = { ...BERT_BASE, hidden_size: 128, num_hidden_layers: 2, num_attention_heads: 4, intermediate_size: 256, vocab_size: 1024, max_position_embeddings: 128 };

export const WHISPER_SMALL = {
  architectures: ['WhisperForConditionalGeneration'], model_type: 'whisper', d_model: 768, encoder_layers: 12, decoder_layers: 12,
  encoder_attention_heads: 12, decoder_attention_heads: 12, encoder_ffn_dim: 3072, decoder_ffn_dim: 3072, vocab_size: 51865,
  num_mel_bins: 80, max_source_positions: 1500, max_target_positions: 448, activation_function: 'gelu', scale_embedding: false,
  decoder_start_token_id: 50258, eos_token_id: 50257, tie_word_embeddings: true,
};
const WHISPER_QUICK = {
  ...WHISPER_SMALL, d_model: 64, encoder_layers: 2, decoder_layers: 2, encoder_attention_heads: 4, decoder_attention_heads: 4,
  encoder_ffn_dim: 128, decoder_ffn_dim: 128, vocab_size: 512, max_source_positions: 100, max_target_positions: 64,
  decoder_start_token_id: 508, eos_token_id: 509,
};

/** The decoder-only step Whisper's decoder is compared with: a Llama of the same size. */
const llamaLike = (w: typeof WHISPER_SMALL) => ({
  architectures: ['LlamaForCausalLM'], hidden_size: w.d_model, intermediate_size: w.decoder_ffn_dim, num_hidden_layers: w.decoder_layers,
  num_attention_heads: w.decoder_attention_heads, num_key_value_heads: w.decoder_attention_heads, head_dim: w.d_model / w.decoder_attention_heads,
  vocab_size: w.vocab_size, rms_norm_eps: 1e-5, max_position_embeddings: 4096, tie_word_embeddings: true, rope_theta: 10000,
  bos_token_id: 1, eos_token_id: 2,
});

export const GPT_OSS_20B = {
  architectures: ['GptOssForCausalLM'], model_type: 'gpt_oss', hidden_size: 2880, intermediate_size: 2880, num_hidden_layers: 24,
  num_attention_heads: 64, num_key_value_heads: 8, head_dim: 64, num_local_experts: 32, num_experts_per_tok: 4, vocab_size: 201088,
  sliding_window: 128, layer_types: Array.from({ length: 24 }, (_, i) => (i % 2 ? 'full_attention' : 'sliding_attention')),
  rms_norm_eps: 1e-5, attention_bias: true, max_position_embeddings: 131072, tie_word_embeddings: false, swiglu_limit: 7.0,
  rope_parameters: { rope_type: 'yarn', factor: 32.0, beta_fast: 32.0, beta_slow: 1.0, truncate: false, original_max_position_embeddings: 4096, rope_theta: 150000 },
  bos_token_id: 199998, eos_token_id: 200002,
};
export const T5_SMALL = {
  architectures: ['T5ForConditionalGeneration'], model_type: 't5', d_model: 512, d_kv: 64, num_heads: 8, d_ff: 2048, num_layers: 6,
  num_decoder_layers: 6, vocab_size: 32128, relative_attention_num_buckets: 32, relative_attention_max_distance: 128,
  feed_forward_proj: 'relu', layer_norm_epsilon: 1e-6, tie_word_embeddings: true, decoder_start_token_id: 0, eos_token_id: 1, pad_token_id: 0,
};
const T5_QUICK = { ...T5_SMALL, d_model: 64, d_kv: 16, num_heads: 4, d_ff: 128, num_layers: 2, num_decoder_layers: 2, vocab_size: 512 };

const GPT_OSS_QUICK = {
  ...GPT_OSS_20B, hidden_size: 128, intermediate_size: 128, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, head_dim: 32,
  num_local_experts: 4, num_experts_per_tok: 2, vocab_size: 256, sliding_window: 8, layer_types: ['sliding_attention', 'full_attention'],
};

// ------------------------------------------------------------------------------ random checkpoints

type Shape = [string, number[]];

/** BertModel's tensors (bert.ts schema: the required ones and the pooler). */
function bertTensors(c: typeof BERT_BASE): Shape[] {
  const H = c.hidden_size, I = c.intermediate_size;
  const t: Shape[] = [
    ['embeddings.word_embeddings.weight', [c.vocab_size, H]], ['embeddings.position_embeddings.weight', [c.max_position_embeddings, H]],
    ['embeddings.token_type_embeddings.weight', [c.type_vocab_size, H]], ['embeddings.LayerNorm.weight', [H]], ['embeddings.LayerNorm.bias', [H]],
  ];
  for (let i = 0; i < c.num_hidden_layers; i++) {
    const p = `encoder.layer.${i}.`;
    for (const n of ['query', 'key', 'value']) t.push([`${p}attention.self.${n}.weight`, [H, H]], [`${p}attention.self.${n}.bias`, [H]]);
    t.push([`${p}attention.output.dense.weight`, [H, H]], [`${p}attention.output.dense.bias`, [H]],
      [`${p}attention.output.LayerNorm.weight`, [H]], [`${p}attention.output.LayerNorm.bias`, [H]],
      [`${p}intermediate.dense.weight`, [I, H]], [`${p}intermediate.dense.bias`, [I]],
      [`${p}output.dense.weight`, [H, I]], [`${p}output.dense.bias`, [H]], [`${p}output.LayerNorm.weight`, [H]], [`${p}output.LayerNorm.bias`, [H]]);
  }
  t.push(['pooler.dense.weight', [H, H]], ['pooler.dense.bias', [H]]);
  return t;
}

/** WhisperForConditionalGeneration's tensors (whisper.ts whisperSchema; proj_out tied, left out). */
function whisperTensors(c: typeof WHISPER_SMALL): Shape[] {
  const d = c.d_model;
  const t: Shape[] = [];
  const attn = (p: string) => {
    for (const x of ['q', 'k', 'v', 'out']) t.push([`${p}.${x}_proj.weight`, [d, d]]);
    for (const x of ['q', 'v', 'out']) t.push([`${p}.${x}_proj.bias`, [d]]);
  };
  const ln = (p: string) => { t.push([`${p}.weight`, [d]], [`${p}.bias`, [d]]); };
  const mlp = (p: string, f: number) => { t.push([`${p}.fc1.weight`, [f, d]], [`${p}.fc1.bias`, [f]], [`${p}.fc2.weight`, [d, f]], [`${p}.fc2.bias`, [d]]); };
  t.push(['model.encoder.conv1.weight', [d, c.num_mel_bins, 3]], ['model.encoder.conv1.bias', [d]], ['model.encoder.conv2.weight', [d, d, 3]],
    ['model.encoder.conv2.bias', [d]], ['model.encoder.embed_positions.weight', [c.max_source_positions, d]]);
  for (let i = 0; i < c.encoder_layers; i++) {
    const p = `model.encoder.layers.${i}`;
    attn(`${p}.self_attn`); ln(`${p}.self_attn_layer_norm`); mlp(p, c.encoder_ffn_dim); ln(`${p}.final_layer_norm`);
  }
  ln('model.encoder.layer_norm');
  t.push(['model.decoder.embed_tokens.weight', [c.vocab_size, d]], ['model.decoder.embed_positions.weight', [c.max_target_positions, d]]);
  for (let i = 0; i < c.decoder_layers; i++) {
    const p = `model.decoder.layers.${i}`;
    attn(`${p}.self_attn`); ln(`${p}.self_attn_layer_norm`); attn(`${p}.encoder_attn`); ln(`${p}.encoder_attn_layer_norm`);
    mlp(p, c.decoder_ffn_dim); ln(`${p}.final_layer_norm`);
  }
  ln('model.decoder.layer_norm');
  return t;
}

/** T5ForConditionalGeneration's tensors (t5.ts T5Arch.schema; tied head, non-gated feed-forward). */
function t5Tensors(c: typeof T5_SMALL): Shape[] {
  const d = c.d_model, inner = c.num_heads * c.d_kv, t: Shape[] = [['shared.weight', [c.vocab_size, d]]];
  const attn = (p: string, bias: boolean) => {
    for (const n of ['q', 'k', 'v']) t.push([`${p}.${n}.weight`, [inner, d]]);
    t.push([`${p}.o.weight`, [d, inner]]);
    if (bias) t.push([`${p}.relative_attention_bias.weight`, [c.relative_attention_num_buckets, c.num_heads]]);
  };
  const ff = (p: string) => { t.push([`${p}.DenseReluDense.wi.weight`, [c.d_ff, d]], [`${p}.DenseReluDense.wo.weight`, [d, c.d_ff]], [`${p}.layer_norm.weight`, [d]]); };
  for (let i = 0; i < c.num_layers; i++) {
    const p = `encoder.block.${i}.layer.`;
    attn(`${p}0.SelfAttention`, i === 0); t.push([`${p}0.layer_norm.weight`, [d]]); ff(`${p}1`);
  }
  for (let i = 0; i < c.num_decoder_layers; i++) {
    const p = `decoder.block.${i}.layer.`;
    attn(`${p}0.SelfAttention`, i === 0); t.push([`${p}0.layer_norm.weight`, [d]]);
    attn(`${p}1.EncDecAttention`, false); t.push([`${p}1.layer_norm.weight`, [d]]); ff(`${p}2`);
  }
  t.push(['encoder.final_layer_norm.weight', [d]], ['decoder.final_layer_norm.weight', [d]]);
  return t;
}

/** xorshift32 state -> the next state. */
const xorshift = (x: number) => {
  x ^= x << 13;
  x ^= x >>> 17;
  x ^= x << 5;
  return x >>> 0;
};

/**
 * A safetensors file of bf16 tensors in memory: norm weights (names with "norm" / "LayerNorm", 1-D,
 * ".weight") 1, their biases 0, everything else uniform with standard deviation `std` from a seeded
 * xorshift (the file's bytes, the seconds it took).
 */
export function randomSafetensors(tensors: Shape[], seed = 1, std = 0.02): { bytes: Uint8Array; seconds: number; params: number } {
  const t0 = performance.now();
  const amp = std * Math.sqrt(3);
  let s = seed >>> 0 || 1;
  const f = new Float32Array(1 << 16), u = new Uint32Array(f.buffer);
  const out: Record<string, { dtype: 'BF16'; shape: number[]; data: Uint16Array }> = {};
  let params = 0;
  for (const [name, shape] of tensors) {
    const n = shape.reduce((a, b) => a * b, 1);
    params += n;
    const data = new Uint16Array(n);
    const isNorm = shape.length === 1 && /norm/i.test(name);
    if (isNorm && name.endsWith('.weight')) data.fill(0x3f80);   // bf16 1.0
    else if (!isNorm) {
      for (let at = 0; at < n; at += f.length) {
        const m = Math.min(f.length, n - at);
        for (let i = 0; i < m; i++) {
          s = xorshift(s);
          f[i] = (s * (2 / 4294967296) - 1) * amp;
        }
        for (let i = 0; i < m; i++) data[at + i] = u[i] >>> 16;
      }
    }
    out[name] = { dtype: 'BF16', shape, data };
  }
  const bytes = encodeSafetensors(out, { format: 'pt' });
  return { bytes, seconds: (performance.now() - t0) / 1000, params };
}

// ------------------------------------------------------------------------------------ the models

/** What the suite calls on an encoder model (models/encoder.ts EncoderModel). */
interface EncoderLike {
  weightBytes: number;
  encode(inputs: Int32Array[]): Promise<Float32Array[]>;
  destroy(): void;
}

/** What the suite calls on a T5 model (serve/t5.ts T5Model). */
interface T5Like {
  weightBytes: number;
  generate(prompts: number[][], o: { encoderInputs: number[][]; maxNewTokens: number; stopTokens: number[] }): Promise<number[][]>;
  destroy(): void;
}

/** What the suite calls on a Whisper model (serve/whisper.ts WhisperModel). */
interface WhisperLike {
  weightBytes: number;
  featureSize: number;
  melConfig: { chunkSamples: number; samplingRate?: number };
  logMel(pcm: Float32Array): Promise<Float32Array>;
  generate(prompts: number[][], o: { encoderInputs: Float32Array[]; maxNewTokens: number; stopTokens: number[]; onToken?: (p: number, t: number) => void }): Promise<number[][]>;
  /** Decoder steps whose layers were recorded, and replayed (models/whisper.ts). */
  graphStats?: { recorded: number; replayed: number };
  destroy(): void;
}

export interface LayersResults {
  quick: boolean;
  bert?: Record<string, unknown>;
  whisper?: Record<string, unknown>;
  t5?: Record<string, unknown>;
  gptoss?: Record<string, unknown>[];
  targets: { target: string; measured: string; met: string }[];
  errors: string[];
}

export interface LayersOptions {
  quick: boolean;
  parts: string[];
  outDir: string; slug: string; device: string; commit: string; cmd: string; runtime: string;
  extra: Record<string, unknown>;
  /** gpt-oss expert storages, in order (default mxfp4,bf16). */
  gptossExperts: string[];
  log: (s: string) => void;
}

const fmt = (x: number | null | undefined, d = 2) => (x !== null && x !== undefined && Number.isFinite(x) ? x.toFixed(d) : '-');

/** Ends a timing a failed call left begun (so later timings can begin), ignoring why it cannot. */
async function endTimingQuietly(engine: Engine): Promise<void> {
  try {
    await engine.endTiming();
  } catch {
    // none was begun
  }
}

/** Wall ms of `fn` (median of `samples` after `warmup` calls), and its GPU ms (span timing) where the adapter has timestamps. */
async function timeCall(engine: Engine, fn: () => Promise<unknown>, warmup: number, samples: number): Promise<{ wallMs: number; minMs: number; gpuMs: number | null; samplesMs: number[] }> {
  for (let i = 0; i < warmup; i++) await fn();
  const times: number[] = [];
  for (let i = 0; i < samples; i++) {
    const t0 = performance.now();
    await fn();
    times.push(performance.now() - t0);
  }
  let gpuMs: number | null = null;
  if (engine.features.timestampQuery) {
    try {
      const g: number[] = [];
      for (let i = 0; i < Math.min(3, samples); i++) {
        engine.beginTiming(2048, { span: true });
        await fn();
        g.push(await engine.endTiming());
      }
      gpuMs = median(g);
    } catch {
      gpuMs = null;
      await endTimingQuietly(engine);
    }
  }
  return { wallMs: median(times), minMs: Math.min(...times), gpuMs, samplesMs: times };
}

async function benchBert(engine: Engine, ceilings: Ceilings, quick: boolean, log: (s: string) => void): Promise<Record<string, unknown>> {
  const c = quick ? BERT_QUICK : BERT_BASE;
  const L = quick ? 32 : 128;
  const batches = quick ? [1, 4] : [1, 32];
  const file = randomSafetensors(bertTensors(c), 11);
  log(`bert: checkpoint of ${(file.params / 1e6).toFixed(1)} M parameters written in memory (${(file.bytes.length / 2 ** 20).toFixed(0)} MiB bf16) in ${file.seconds.toFixed(1)} s`);
  const t0 = performance.now();
  const model = await engine.loadModel({ config: c, weights: await loadSafetensors(file.bytes), dtype: 'f16' }) as unknown as EncoderLike;
  const loadSeconds = (performance.now() - t0) / 1000;
  const H = c.hidden_size, I = c.intermediate_size, layers = c.num_hidden_layers;
  const linearParams = layers * (4 * H * H + 2 * H * I);
  const flopsPerInput = 2 * linearParams * L + 4 * L * L * H * layers;
  const rows: Record<string, unknown>[] = [];
  const weightBytes = model.weightBytes;
  try {
    let seed = 5;
    for (const B of batches) {
      const inputs = Array.from({ length: B }, () => Int32Array.from({ length: L }, () => (seed = xorshift(seed)) % c.vocab_size));
      const t = await timeCall(engine, () => model.encode(inputs), 2, quick ? 3 : B === 1 ? 9 : 5);
      const out = await model.encode(inputs);
      const finite = out.every((s) => s.length === L * H && s.every(Number.isFinite));
      const tflopsWall = (B * flopsPerInput) / (t.wallMs * 1e9);
      const tflopsGpu = t.gpuMs ? (B * flopsPerInput) / (t.gpuMs * 1e9) : NaN;
      const row = {
        batch: B, tokens: L, wallMs: t.wallMs, minMs: t.minMs, gpuMs: t.gpuMs, samplesMs: t.samplesMs, sentencesPerSecond: (1000 * B) / t.wallMs,
        gpuSentencesPerSecond: t.gpuMs ? (1000 * B) / t.gpuMs : null, tflopsWall, tflopsGpu,
        pctFmaWall: (100 * tflopsWall) / ceilings.fmaTflops, pctFmaGpu: (100 * tflopsGpu) / ceilings.fmaTflops,
        pctMmaWall: ceilings.mmaTflops ? (100 * tflopsWall) / ceilings.mmaTflops : null, pctMmaGpu: ceilings.mmaTflops && t.gpuMs ? (100 * tflopsGpu) / ceilings.mmaTflops : null,
        finite,
      };
      rows.push(row);
      log(`bert batch ${B} × ${L} tokens: ${fmt(t.wallMs, 2)} ms wall (GPU ${fmt(t.gpuMs, 2)} ms), ${fmt(row.sentencesPerSecond, 1)} sentences/s, `
        + `${fmt(tflopsWall)} TFLOP/s wall = ${fmt(row.pctFmaWall, 1)}% of FMA${ceilings.mmaTflops ? `, ${fmt(row.pctMmaWall, 1)}% of matrix` : ''}${finite ? '' : ' NON-FINITE'}`);
    }
  } finally {
    model.destroy();
    await engine.sync();
    engine.pool.trim();
  }
  return { shape: quick ? 'small BERT (--layers-quick)' : 'BERT-base', config: c, params: file.params, linearParams, flopsPerInput, weightDtype: 'f16',
    weightBytes, checkpointSeconds: file.seconds, loadSeconds, rows };
}

/** B different clips of `seconds` s at `rate` Hz: a few seeded tones over noise. */
function clips(B: number, samples: number, rate: number): Float32Array[] {
  let s = 77;
  return Array.from({ length: B }, (_, b) => {
    const x = new Float32Array(samples);
    const f1 = 180 + 37 * b, f2 = 900 + 113 * b;
    for (let i = 0; i < samples; i++) {
      s = xorshift(s);
      x[i] = 0.3 * Math.sin((2 * Math.PI * f1 * i) / rate) + 0.2 * Math.sin((2 * Math.PI * f2 * i) / rate) * Math.sin(i / 4000) + 0.05 * (s / 2 ** 31 - 1);
    }
    return x;
  });
}

async function benchWhisper(engine: Engine, quick: boolean, log: (s: string) => void, onPart: (w: Record<string, unknown>) => void): Promise<Record<string, unknown>> {
  const c = quick ? WHISPER_QUICK : WHISPER_SMALL;
  const file = randomSafetensors(whisperTensors(c), 21);
  log(`whisper: checkpoint of ${(file.params / 1e6).toFixed(1)} M parameters written in memory (${(file.bytes.length / 2 ** 20).toFixed(0)} MiB bf16) in ${file.seconds.toFixed(1)} s`);
  const t0 = performance.now();
  const model = await engine.loadModel({ config: c, weights: await loadSafetensors(file.bytes), dtype: 'f16' }) as unknown as WhisperLike;
  const loadSeconds = (performance.now() - t0) / 1000;
  const rate = 16000;
  const samples = model.melConfig.chunkSamples;
  const audioSeconds = samples / rate;
  const newTokens = quick ? 12 : 100;
  const prompt = quick ? [c.decoder_start_token_id, 1, 2, 3] : [50258, 50259, 50359, 50363];   // <|startoftranscript|><|en|><|transcribe|><|notimestamps|>
  const res: Record<string, unknown> = {
    shape: quick ? 'small Whisper (--layers-quick)' : 'Whisper-small', config: c, params: file.params, weightDtype: 'f16', weightBytes: model.weightBytes,
    checkpointSeconds: file.seconds, loadSeconds, audioSeconds, newTokens, prompt,
    note: `each clip: logMel + encoder + exactly ${newTokens} decoded tokens after a ${prompt.length}-token start sequence (generate with no stop tokens: a random model's end-of-text would otherwise end it anywhere); greedy`,
    rtf: [] as Record<string, unknown>[],
  };
  const all = clips(8, samples, rate);
  try {
    const once = async (B: number, onToken?: (p: number, t: number) => void) => {
      const feats: Float32Array[] = [];
      for (let b = 0; b < B; b++) feats.push(await model.logMel(all[b]));
      const out = await model.generate(Array.from({ length: B }, () => prompt), { encoderInputs: feats, maxNewTokens: newTokens, stopTokens: [], onToken });
      if (!out.every((o) => o.length === newTokens)) throw new Error(`whisper: expected ${newTokens} tokens per clip, got ${out.map((o) => o.length).join(',')}`);
      return out;
    };
    for (const B of quick ? [1, 2] : [1, 8]) {
      const t = await timeCall(engine, () => once(B), 1, quick ? 2 : 3);
      const row = { batch: B, wallMs: t.wallMs, gpuMs: t.gpuMs, samplesMs: t.samplesMs, rtf: t.wallMs / 1000 / (B * audioSeconds), rtfGpu: t.gpuMs ? t.gpuMs / 1000 / (B * audioSeconds) : null };
      (res.rtf as Record<string, unknown>[]).push(row);
      log(`whisper batch ${B} × ${audioSeconds} s: ${fmt(t.wallMs, 1)} ms wall (GPU ${fmt(t.gpuMs, 1)} ms), RTF ${fmt(row.rtf, 4)}`);
      onPart(res);
    }
    // The decoder's step at batch 1: the time between tokens after the first (the first includes the
    // features' upload, the encoder, the cross K/V and the start sequence's prefill).
    const perToken = async () => {
      const at: number[] = [];
      await once(1, () => at.push(performance.now()));
      return (at[at.length - 1] - at[0]) / (at.length - 1);
    };
    await perToken();
    const steps: number[] = [];
    const g0 = { ...(model.graphStats ?? { recorded: NaN, replayed: NaN }) };
    for (let i = 0; i < 3; i++) steps.push(await perToken());
    const graphs = model.graphStats ? { recorded: model.graphStats.recorded - g0.recorded, replayed: model.graphStats.replayed - g0.replayed } : null;
    // GPU time of a step: two generate calls that differ only in the tokens decoded, timed whole.
    let stepGpuMs: number | null = null;
    if (engine.features.timestampQuery) {
      try {
        const feats = [await model.logMel(all[0])];
        const gpu = async (n: number) => {
          engine.beginTiming(2048, { span: true });
          await model.generate([prompt], { encoderInputs: feats, maxNewTokens: n, stopTokens: [] });
          return engine.endTiming();
        };
        const n1 = Math.max(2, Math.floor(newTokens / 5));
        const a: number[] = [], b: number[] = [];
        for (let i = 0; i < 3; i++) {
          a.push(await gpu(n1));
          b.push(await gpu(newTokens));
        }
        stepGpuMs = (median(b) - median(a)) / (newTokens - n1);
      } catch (e) {
        await endTimingQuietly(engine);
        log(`whisper: GPU step time not measured (${(e as Error).message})`);
      }
    }
    res.decoderStep = { wallMs: median(steps), samplesMs: steps, gpuMs: stepGpuMs, graphs, context: `${prompt.length} to ${prompt.length + newTokens} self tokens, ${c.max_source_positions} cross frames` };
    log(`whisper decoder step (batch 1): ${fmt(median(steps), 3)} ms wall per token, GPU ${fmt(stepGpuMs, 3)} ms; layers recorded at ${graphs?.recorded ?? '-'} steps, replayed at ${graphs?.replayed ?? '-'} (3 calls)`);
    onPart(res);
  } finally {
    model.destroy();
    await engine.sync();
    engine.pool.trim();
  }
  // The decoder-only step of the same size, at the same contexts, through generate (as Whisper's) and profileDecode.
  const lc = llamaLike(c);
  const ctx = prompt.length + newTokens / 2;
  let llama: Model | null = null;
  try {
    llama = await createRandomModel(engine, { config: lc, dtype: 'f16', kvCache: { numBlocks: 64, blockSize: 16 }, maxTokensPerStep: 64, maxSeqsPerStep: 1 });
    const perToken = async () => {
      const at: number[] = [];
      await llama!.generate([prompt.map((t) => t % lc.vocab_size)], { maxNewTokens: newTokens, stopTokens: [], onToken: () => at.push(performance.now()) });
      return (at[at.length - 1] - at[0]) / (at.length - 1);
    };
    await perToken();
    const steps: number[] = [];
    for (let i = 0; i < 3; i++) steps.push(await perToken());
    const p = await llama.profileDecode({ batch: 1, context: ctx, steps: quick ? 16 : 64, warmup: 8 });
    res.llamaStep = { config: lc, generateWallMs: median(steps), samplesMs: steps, profileWallMs: p.wallMs, profileGpuMs: p.gpuMs, context: ctx, weightDtype: 'f16' };
    log(`decoder-only Llama of the same size (batch 1): ${fmt(median(steps), 3)} ms per token through generate; profileDecode at context ${ctx}: ${fmt(p.wallMs, 3)} ms wall, GPU ${fmt(p.gpuMs, 3)} ms`);
  } catch (e) {
    res.llamaError = (e as Error).message;
    log(`llama comparison failed: ${(e as Error).message}`);
  } finally {
    llama?.destroy();
    await engine.sync();
    engine.pool.trim();
  }
  return res;
}

/**
 * T5 decode time against the number of tokens (issue 43: linear). Each N is one generate call of
 * exactly N tokens (no stop tokens) after the same 64-token encoder input, timed whole (wall and GPU),
 * median of 3 after a warm-up. Linear: the marginal ms per token between the two longest N within
 * 1.25× of that between the middle two (attention over a cache of up to 256 tokens adds a little).
 */
async function benchT5(engine: Engine, quick: boolean, log: (s: string) => void): Promise<Record<string, unknown>> {
  const c = quick ? T5_QUICK : T5_SMALL;
  const file = randomSafetensors(t5Tensors(c), 31);
  log(`t5: checkpoint of ${(file.params / 1e6).toFixed(1)} M parameters written in memory in ${file.seconds.toFixed(1)} s`);
  const model = await engine.loadModel({ config: c, weights: await loadSafetensors(file.bytes), dtype: 'f16' }) as unknown as T5Like;
  const Ns = quick ? [8, 16, 32, 64] : [32, 64, 128, 256];
  const input = Array.from({ length: quick ? 16 : 64 }, (_, i) => 2 + ((i * 7919) % (c.vocab_size - 2)));
  const res: Record<string, unknown> = { shape: quick ? 'small T5 (--layers-quick)' : 'T5-small', config: c, params: file.params, weightBytes: model.weightBytes, inputTokens: input.length, rows: [] as Record<string, number | null>[] };
  try {
    for (const N of Ns) {
      const t = await timeCall(engine, async () => {
        const out = await model.generate([[c.decoder_start_token_id]], { encoderInputs: [input], maxNewTokens: N, stopTokens: [] });
        if (out[0].length !== N) throw new Error(`t5: expected ${N} tokens, got ${out[0].length}`);
      }, 1, 3);
      (res.rows as Record<string, number | null>[]).push({ tokens: N, wallMs: t.wallMs, gpuMs: t.gpuMs, msPerToken: t.wallMs / N });
      log(`t5 generate of ${N} tokens: ${fmt(t.wallMs, 1)} ms wall (GPU ${fmt(t.gpuMs, 1)} ms), ${fmt(t.wallMs / N, 3)} ms a token`);
    }
    const rows = res.rows as { tokens: number; wallMs: number }[];
    const marg = (a: { tokens: number; wallMs: number }, b: { tokens: number; wallMs: number }) => (b.wallMs - a.wallMs) / (b.tokens - a.tokens);
    // The shortest call's fixed costs (the encoder, the first step's records) blur its pair: the
    // comparison is between the middle pair and the longest.
    res.marginalFirst = marg(rows[1], rows[2]);
    res.marginalLast = marg(rows[rows.length - 2], rows[rows.length - 1]);
    // Least squares wall = a + b·N, and its R².
    const n = rows.length, mx = rows.reduce((x, r) => x + r.tokens, 0) / n, my = rows.reduce((x, r) => x + r.wallMs, 0) / n;
    const sxy = rows.reduce((x, r) => x + (r.tokens - mx) * (r.wallMs - my), 0), sxx = rows.reduce((x, r) => x + (r.tokens - mx) ** 2, 0);
    const b = sxy / sxx, a = my - b * mx;
    const ssr = rows.reduce((x, r) => x + (r.wallMs - a - b * r.tokens) ** 2, 0), sst = rows.reduce((x, r) => x + (r.wallMs - my) ** 2, 0);
    Object.assign(res, { fitMsPerToken: b, fitInterceptMs: a, r2: 1 - ssr / sst });
    log(`t5: marginal ${fmt(res.marginalFirst as number, 3)} ms a token (${Ns[1]}→${Ns[2]}) vs ${fmt(res.marginalLast as number, 3)} (${Ns[n - 2]}→${Ns[n - 1]}); fit ${fmt(b, 3)} ms/token + ${fmt(a, 1)} ms, R² ${fmt(1 - ssr / sst, 4)}`);
  } finally {
    model.destroy();
    await engine.sync();
    engine.pool.trim();
  }
  return res;
}

/**
 * gpt-oss's experts as MXFP4 (ggml's blocks: an E8M0 scale byte, then 16 bytes of E2M1 pairs per 32
 * values), put in place of createRandomModel's bf16 experts before any step: the first layer's made by
 * createQuantExperts from random blocks (scale 2^-7: values up to ±0.047, about the std 0.02 of the bf16
 * ones; no biases, as initRandom's), every other layer's a GPU copy of them in buffers of its own (the
 * same bytes at other addresses: no cache sees them as shared; packing the blocks on the host for every
 * layer would take minutes). Reaches into the model (Model.arch, GptOssFamily.layers):
 * createRandomModel makes float experts only (GptOssFamily.initRandom).
 */
function gptOssMxfp4(engine: Engine, model: Model): { before: number; after: number; seconds: number } {
  const t0 = performance.now();
  const arch = (model as unknown as { arch: { layers?: { experts: ops.ExpertWeights }[] } }).arch;
  const layers = arch.layers;
  if (!layers?.length) throw new Error('gpt-oss MXFP4: the model has no layers to reach (Model.arch.layers)');
  const { E, H, I } = layers[0].experts;
  if (H % 32 || I % 32) throw new Error(`gpt-oss MXFP4: H ${H} and I ${I} must be multiples of 32`);
  let s = 99;
  const fill = (n: number) => {
    const b = new Uint8Array(n);
    const w = new Uint32Array(b.buffer, 0, n >>> 2);
    for (let i = 0; i < w.length; i++) w[i] = s = xorshift(s);
    for (let i = 0; i < n; i += 17) b[i] = 120;   // E8M0 scale 2^(120-127)
    return b;
  };
  const first = ops.createQuantExperts(engine, { E, H, I, gateUpType: 'MXFP4', gateUp: fill(E * 2 * I * (H / 32) * 17), downType: 'MXFP4', down: fill(E * H * (I / 32) * 17) });
  let before = 0, after = 0;
  for (const [l, L] of layers.entries()) {
    const old = L.experts;
    before += ops.expertWeightBytes(old);
    if (l === 0) {
      L.experts = first;
    } else {
      const enc = engine.commandEncoder();
      const copy = (t: { shape: readonly number[]; dtype: string; buffer: GPUBuffer; byteLength: number }) => {
        const c = engine.emptyTensor(t.shape, t.dtype as 'u32', false);
        enc.copyBufferToBuffer(t.buffer, 0, c.buffer, 0, t.byteLength);
        return c;
      };
      const parts = first.parts.map((p) => ({ e0: p.e0, experts: p.experts, gateUp: copy(p.gateUp), down: copy(p.down) }));
      L.experts = {
        E, H, I, dtype: first.dtype, downDtype: first.downDtype, parts, gateUpBias: null, downBias: null,
        destroy: () => { for (const p of parts) { p.gateUp.destroy(); p.down.destroy(); } },
      };
    }
    after += ops.expertWeightBytes(L.experts);
    old.destroy();
  }
  return { before, after, seconds: (performance.now() - t0) / 1000 };
}

async function benchGptOss(engine: Engine, ceilings: Ceilings, quick: boolean, experts: string, log: (s: string) => void): Promise<Record<string, unknown>> {
  const c = quick ? GPT_OSS_QUICK : GPT_OSS_20B;
  const contexts = quick ? [32, 128] : [1024, 8192];
  const steps = quick ? 8 : 48;
  const bs = 16;
  const numBlocks = Math.ceil((Math.max(...contexts) + steps + 64 + 32) / bs) + 8;
  const res: Record<string, unknown> = { shape: quick ? 'small gpt-oss (--layers-quick)' : 'gpt-oss-20b', experts, config: c, contexts, rows: [] as Record<string, unknown>[] };
  let model: Model | null = null;
  try {
    const t0 = performance.now();
    model = await createRandomModel(engine, { config: c, dtype: 'bf16', kvCache: { numBlocks, blockSize: bs, dtype: 'bf16' }, maxTokensPerStep: 64, maxSeqsPerStep: 1 });
    res.createSeconds = (performance.now() - t0) / 1000;
    let stored = model.weightBytes;
    if (experts === 'mxfp4') {
      const m = gptOssMxfp4(engine, model);
      await engine.sync();
      m.seconds = (performance.now() - t0) / 1000 - (res.createSeconds as number);
      stored += m.after - m.before;
      res.mxfp4 = m;
      log(`gpt-oss: experts as MXFP4 blocks in ${m.seconds.toFixed(1)} s (${(m.before / 2 ** 30).toFixed(2)} GiB of bf16 experts -> ${(m.after / 2 ** 30).toFixed(2)} GiB)`);
    }
    res.weightBytes = stored;
    const wBytes = model.stepBytes(0, 1).weights;
    res.stepWeightBytes = wBytes;
    for (const context of contexts) {
      const row: Record<string, unknown> = { batch: 1, context };
      try {
        const p = await model.profileDecode({ batch: 1, context, steps, warmup: quick ? 4 : 16, perKernel: context === contexts[0] });
        const kv = model.stepBytes(context + steps / 2, 1).kv;
        const rooflineMs = (wBytes + kv) / (ceilings.readGBs * 1e6);
        Object.assign(row, {
          wallMs: p.wallMs, gpuMs: p.gpuMs, hostMs: p.hostMs, dispatches: p.dispatches, replayed: p.replayed, tokensPerSecond: 1000 / p.wallMs,
          weightBytes: wBytes, kvBytes: kv, rooflineMs, pctRooflineWall: (100 * rooflineMs) / p.wallMs, pctRooflineGpu: p.gpuMs ? (100 * rooflineMs) / p.gpuMs : null,
          kernels: p.kernels ? Object.fromEntries(Object.entries(p.kernels).sort((a, b) => b[1] - a[1]).slice(0, 12)) : undefined,
        });
        log(`gpt-oss ${experts} experts, batch 1, context ${context}: ${fmt(p.wallMs, 3)} ms wall (GPU ${fmt(p.gpuMs, 3)}), ${fmt(1000 / p.wallMs, 1)} tokens/s, `
          + `${fmt((wBytes + kv) / 2 ** 30, 2)} GiB read a step: ${fmt(row.pctRooflineWall as number, 1)}% of the read roofline (wall), ${fmt(row.pctRooflineGpu as number, 1)}% (GPU)`);
      } catch (e) {
        row.error = (e as Error).message;
        log(`gpt-oss ${experts} context ${context}: ${row.error}`);
      }
      (res.rows as Record<string, unknown>[]).push(row);
    }
  } catch (e) {
    res.error = (e as Error).message;
    log(`gpt-oss ${experts}: ${res.error}`);
  } finally {
    model?.destroy();
    await engine.sync();
    engine.pool.trim();
  }
  return res;
}

// ---------------------------------------------------------------------------------------- results

function targets(r: LayersResults): LayersResults['targets'] {
  const out: LayersResults['targets'] = [];
  const bertRows = (r.bert?.rows ?? []) as Record<string, number>[];
  if (r.bert) {
    out.push({
      target: 'BERT-base shape, 128-token inputs at batch 1 and 32: sentences/s and share of the FMA / matrix ceiling',
      measured: bertRows.map((x) => `batch ${x.batch}: ${fmt(x.sentencesPerSecond, 1)}/s, ${fmt(x.pctFmaWall, 1)}% FMA${x.pctMmaWall !== null ? ` / ${fmt(x.pctMmaWall, 1)}% matrix` : ''} (wall)`).join('; ') || '-',
      met: bertRows.length === 2 && bertRows.every((x) => Number.isFinite(x.sentencesPerSecond) && x.finite) ? 'measured' : 'not measured',
    });
  }
  if (r.whisper) {
    const rtf = (r.whisper.rtf ?? []) as Record<string, number>[];
    out.push({
      target: 'Whisper-small shape: real-time factor on 30 s of audio at batch 1 and 8',
      measured: rtf.map((x) => `batch ${x.batch}: RTF ${fmt(x.rtf, 4)}`).join('; ') || '-',
      met: rtf.length === 2 ? 'measured' : 'not measured',
    });
    const w = r.whisper.decoderStep as { wallMs: number; gpuMs: number | null } | undefined;
    const l = r.whisper.llamaStep as { generateWallMs: number; profileWallMs: number; profileGpuMs: number | null } | undefined;
    if (w && l) {
      const ratio = w.wallMs / l.generateWallMs;
      const gpuRatio = w.gpuMs && l.profileGpuMs ? w.gpuMs / l.profileGpuMs : NaN;
      out.push({
        target: 'Whisper decoder step (batch 1) within 1.5× of a decoder-only step of the same size',
        measured: `${fmt(w.wallMs, 3)} ms vs ${fmt(l.generateWallMs, 3)} ms per token through generate: ${fmt(ratio, 2)}×`
          + (Number.isFinite(gpuRatio) ? `; GPU ${fmt(w.gpuMs, 3)} vs ${fmt(l.profileGpuMs, 3)} ms: ${fmt(gpuRatio, 2)}×` : ''),
        met: ratio <= 1.5 ? 'met' : 'not met',
      });
    } else {
      out.push({ target: 'Whisper decoder step (batch 1) within 1.5× of a decoder-only step of the same size', measured: '-', met: 'not measured' });
    }
  }
  if (r.t5) {
    const t = r.t5 as Record<string, number>;
    const ok = Number.isFinite(t.marginalFirst) && Number.isFinite(t.marginalLast);
    out.push({
      target: 'T5: decode time linear in the number of tokens (marginal ms a token, 128→256 within 1.25× of 64→128)',
      measured: ok ? `${fmt(t.marginalFirst, 3)} ms → ${fmt(t.marginalLast, 3)} ms a token (${fmt(t.marginalLast / t.marginalFirst, 2)}×); least squares R² ${fmt(t.r2, 4)}` : '-',
      met: !ok ? 'not measured' : t.marginalLast <= 1.25 * t.marginalFirst ? 'met' : 'not met',
    });
  }
  for (const g of r.gptoss ?? []) {
    const rows = (g.rows ?? []) as Record<string, number>[];
    out.push({
      target: `gpt-oss-20b shape at batch 1 (${g.experts === 'mxfp4' ? 'MXFP4' : 'bf16'} experts): tokens/s and read-roofline share`,
      measured: rows.filter((x) => Number.isFinite(x.tokensPerSecond)).map((x) => `context ${x.context}: ${fmt(x.tokensPerSecond, 1)} tokens/s, ${fmt(x.pctRooflineWall, 1)}% (wall) / ${fmt(x.pctRooflineGpu, 1)}% (GPU)`).join('; ')
        || String(g.error ?? '-'),
      met: rows.some((x) => Number.isFinite(x.tokensPerSecond)) ? 'measured' : 'not measured',
    });
  }
  return out;
}

function write(r: LayersResults, o: LayersOptions, ceilings: Ceilings): void {
  r.targets = targets(r);
  const lines = [
    `# Issue 31's models (BERT, Whisper, T5, gpt-oss) with random weights on ${o.device}`, '',
    `Measured ${new Date().toISOString().slice(0, 10)} at commit \`${o.commit}\` with \`${o.cmd}\` (${o.runtime}). Ceilings measured through WebGPU in the same run: `
    + `f32 FMA ${fmt(ceilings.fmaTflops)} TFLOP/s, read ${fmt(ceilings.readGBs, 0)} GB/s, copy ${fmt(ceilings.copyGBs, 0)} GB/s`
    + (ceilings.mmaTflops ? `, subgroup matrix (f16 → f32 ${ceilings.mmaConfig}) ${fmt(ceilings.mmaTflops, 1)} TFLOP/s` : ', no subgroup matrices') + '. '
    + 'BERT and Whisper: random checkpoints written in memory as safetensors (bf16, uniform with std 0.02, LayerNorm weights 1 and biases 0) and loaded through '
    + 'loadSafetensors and engine.loadModel with dtype \'f16\' (weights f16 on the GPU, activations f32). gpt-oss: createRandomModel (bf16), its experts replaced by MXFP4 blocks where marked. '
    + (r.quick ? '**--layers-quick: tiny shapes of the same kinds, not the issue\'s sizes.** ' : ''), '',
    '## Targets', '', '| target | measured | met |', '|---|---|---|', ...r.targets.map((t) => `| ${t.target} | ${t.measured} | ${t.met} |`), '',
  ];
  if (r.bert) {
    const b = r.bert;
    lines.push(`## ${b.shape} (BertModel): encode`, '',
      `${fmt((b.params as number) / 1e6, 1)} M parameters (${fmt((b.linearParams as number) / 1e6, 1)} M in the encoder's linear layers); `
      + `FLOPs per input = 2·linear params·L + 4·L²·H·layers = ${fmt((b.flopsPerInput as number) / 1e9, 2)} GFLOP. Wall: model.encode(inputs) to the states read back, median of `
      + 'several calls after two warm-ups; GPU: the same call\'s passes timed whole (span timestamps), median of 3. Loaded in ' + `${fmt(b.loadSeconds as number, 1)} s.`, '',
      '| batch | tokens | wall ms | GPU ms | sentences/s | TFLOP/s (wall) | % FMA (wall) | % matrix (wall) | % FMA (GPU) | % matrix (GPU) | finite |',
      '|---|---|---|---|---|---|---|---|---|---|---|',
      ...((b.rows ?? []) as Record<string, number | null | boolean>[]).map((x) => `| ${x.batch} | ${x.tokens} | ${fmt(x.wallMs as number, 2)} | ${fmt(x.gpuMs as number, 2)} | `
        + `${fmt(x.sentencesPerSecond as number, 1)} | ${fmt(x.tflopsWall as number)} | ${fmt(x.pctFmaWall as number, 1)} | ${fmt(x.pctMmaWall as number, 1)} | ${fmt(x.pctFmaGpu as number, 1)} | ${fmt(x.pctMmaGpu as number, 1)} | ${x.finite ? 'yes' : 'NO'} |`), '');
  }
  if (r.whisper) {
    const w = r.whisper;
    const ds = w.decoderStep as Record<string, number> | undefined, ls = w.llamaStep as Record<string, number> | undefined;
    lines.push(`## ${w.shape} (WhisperForConditionalGeneration): transcription-shaped generate`, '',
      `${fmt((w.params as number) / 1e6, 1)} M parameters, f16 weights (${fmt((w.weightBytes as number) / 2 ** 20, 0)} MiB on the GPU). ${w.note}. `
      + `Clips of ${w.audioSeconds} s (16 kHz, different per request); batch B = B requests in one generate call. RTF = wall seconds / (B × ${w.audioSeconds} s); `
      + 'wall from the PCM to the tokens (logMel of each clip included), median of the samples after a warm-up.', '',
      '| batch | wall ms | GPU ms | RTF | RTF (GPU) |', '|---|---|---|---|---|',
      ...((w.rtf ?? []) as Record<string, number>[]).map((x) => `| ${x.batch} | ${fmt(x.wallMs, 1)} | ${fmt(x.gpuMs, 1)} | ${fmt(x.rtf, 4)} | ${fmt(x.rtfGpu, 4)} |`), '');
    if (ds) {
      lines.push('Decoder step at batch 1: wall ms between tokens after the first (median of 3 calls); GPU ms = (GPU time of a generate of N tokens − one of N/5) / (N − N/5). '
        + 'Beside it, a LlamaForCausalLM of the same size (hidden, layers, heads, MLP, vocab; f16 weights, random) through generate with the same start sequence and tokens, '
        + 'and its profileDecode step (three in flight, GPU span timing) at the middle context. Whisper\'s step also attends over the encoder\'s frames (cross-attention), which the Llama has not.', '',
        '| | wall ms / token | GPU ms / token |', '|---|---|---|',
        `| Whisper decoder (${ds.context}) | ${fmt(ds.wallMs, 3)} | ${fmt(ds.gpuMs, 3)} |`,
        ...(ls ? [`| Llama, generate | ${fmt(ls.generateWallMs, 3)} | - |`, `| Llama, profileDecode (context ${ls.context}) | ${fmt(ls.profileWallMs, 3)} | ${fmt(ls.profileGpuMs, 3)} |`]
          : [`| Llama | ${w.llamaError ?? '-'} | - |`]), '');
    }
  }
  if (r.t5) {
    const t = r.t5 as Record<string, unknown>;
    lines.push(`## ${t.shape} (T5ForConditionalGeneration): decode time against tokens`, '',
      `${fmt((t.params as number) / 1e6, 1)} M parameters, f16 weights. One generate call of exactly N tokens (no stop tokens) after the same ${t.inputTokens}-token encoder input, batch 1, `
      + 'timed whole (wall: median of 3 after a warm-up; GPU: span timestamps). Marginal = the difference of two calls\' wall over their difference in N.', '',
      '| tokens | wall ms | GPU ms | ms a token |', '|---|---|---|---|',
      ...((t.rows ?? []) as Record<string, number>[]).map((x) => `| ${x.tokens} | ${fmt(x.wallMs, 1)} | ${fmt(x.gpuMs, 1)} | ${fmt(x.msPerToken, 3)} |`), '',
      `Least squares: ${fmt(t.fitMsPerToken as number, 3)} ms a token + ${fmt(t.fitInterceptMs as number, 1)} ms, R² ${fmt(t.r2 as number, 4)}.`, '');
  }
  for (const g of r.gptoss ?? []) {
    lines.push(`## ${g.shape} (GptOssForCausalLM), ${g.experts === 'mxfp4' ? 'MXFP4' : 'bf16'} experts: decode at batch 1`, '',
      `Random weights (createRandomModel, bf16 dense layers and lm_head, router f32${g.experts === 'mxfp4' ? '; experts replaced by random MXFP4 blocks (ggml layout, E8M0 scale 2^-7) before any step: layer 0\'s from createQuantExperts, the others GPU copies of them in buffers of their own' : ''}), bf16 KV cache. `
      + `${fmt((g.weightBytes as number) / 2 ** 30, 2)} GiB of weights on the GPU; a batch-1 step reads ${fmt((g.stepWeightBytes as number) / 2 ** 30, 3)} GiB of them `
      + `(attention, router, the ${(g.config as { num_experts_per_tok: number }).num_experts_per_tok} chosen experts, lm_head: Model.stepBytes) plus its K/V. Steps recorded and submitted as generate does (profileDecode), contexts synthetic; `
      + `roofline = bytes read / the read ceiling.${g.error ? ` Error: ${g.error}` : ''}`, '',
      '| context | wall ms | GPU ms | tokens/s | GiB read | % roofline (wall) | % roofline (GPU) |', '|---|---|---|---|---|---|---|',
      ...((g.rows ?? []) as Record<string, number | string>[]).map((x) => (x.error ? `| ${x.context} | ${x.error} | - | - | - | - | - |`
        : `| ${x.context} | ${fmt(x.wallMs as number, 3)} | ${fmt(x.gpuMs as number, 3)} | ${fmt(x.tokensPerSecond as number, 1)} | ${fmt(((x.weightBytes as number) + (x.kvBytes as number)) / 2 ** 30, 3)} | `
          + `${fmt(x.pctRooflineWall as number, 1)} | ${fmt(x.pctRooflineGpu as number, 1)} |`)), '');
  }
  if (r.errors.length) lines.push('## Errors', '', ...r.errors.map((e) => `- ${e}`), '');
  mkdirSync(o.outDir, { recursive: true });
  writeFileSync(join(o.outDir, `layers-${o.slug}.md`), `${lines.join('\n')}\n`);
  writeFileSync(join(o.outDir, `layers-${o.slug}.json`), `${JSON.stringify({ ...o.extra, commit: o.commit, cmd: o.cmd, ceilings, ...r }, null, 1)}\n`);
}

/** The suite: each part in turn (o.parts: bert, whisper, t5, gptoss), the results rewritten after each. */
export async function runLayers(engine: Engine, ceilings: Ceilings, o: LayersOptions): Promise<LayersResults> {
  const r: LayersResults = { quick: o.quick, targets: [], errors: [] };
  const save = () => write(r, o, ceilings);
  const part = async (name: string, fn: () => Promise<void>) => {
    if (!o.parts.includes(name)) return;
    const t0 = performance.now();
    try {
      await fn();
    } catch (e) {
      r.errors.push(`${name}: ${(e as Error).message}`);
      o.log(`${name} failed: ${(e as Error).stack ?? (e as Error).message}`);
    }
    o.log(`${name}: ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    save();
  };
  save();
  await part('bert', async () => { r.bert = await benchBert(engine, ceilings, o.quick, o.log); });
  await part('whisper', async () => { r.whisper = await benchWhisper(engine, o.quick, o.log, (w) => { r.whisper = w; save(); }); });
  await part('t5', async () => { r.t5 = await benchT5(engine, o.quick, o.log); });
  await part('gptoss', async () => {
    r.gptoss = [];
    for (const experts of o.gptossExperts) {
      r.gptoss.push(await benchGptOss(engine, ceilings, o.quick, experts, o.log));
      save();
    }
  });
  o.log(`\n${r.targets.map((t) => `${t.target}: ${t.measured} [${t.met}]`).join('\n')}`);
  return r;
}
