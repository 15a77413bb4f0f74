// gpt-oss GGUF files with random weights for the device benchmark (issue 42: "for gpt-oss, write the GGUF
// with writeGGUF; llama.cpp runs gpt-oss"): the tensors and metadata llama.cpp's convert_hf_to_gguf.py
// writes for GptOssForCausalLM (GGUF `gpt-oss`, llama.cpp's LLM_ARCH_OPENAI_MOE) and the types of the
// published gpt-oss-20b file: experts MXFP4 (ggml type 39), the other matrices Q8_0, the router, norms,
// biases and sinks F32. No host imports: the CLI (make_gguf_gptoss.ts) streams it to disk, the tests build
// the small shape in memory with writeGGUF.
//
// Values (seeded xorshift32, one stream a tensor): Q8_0 blocks of uniform int8 codes under d = 2.7e-4
// (standard deviation 0.020), MXFP4 blocks of uniform E2M1 codes under 2^-7 (E8M0 120: standard deviation
// 0.023, as the layers suite's random gpt-oss experts), F32 matrices and biases uniform with standard
// deviation 0.02, sinks uniform in [-1, 1], norms 1. The vocabulary is make_gguf.py's: a SentencePiece
// ('llama') list of <unk>, <s>, </s>, the 256 byte tokens where they fit, then t<i>.
import { f32ToF16Bits } from '../src/core/dtype';
import { writeGGUF, type GGUFHeaderTensor, type GGUFValueTypeName } from '../src/formats/gguf_write';

export interface GptOssShape {
  layers: number; hidden: number; experts: number; expertsUsed: number; heads: number; kvHeads: number; headDim: number;
  /** Each expert's width (intermediate_size). */
  expertWidth: number; vocab: number; window: number; context: number;
}

export const GPTOSS_SHAPES: Readonly<Record<string, GptOssShape>> = Object.freeze({
  // openai/gpt-oss-20b's config.json.
  '20b': { layers: 24, hidden: 2880, experts: 32, expertsUsed: 4, heads: 64, kvHeads: 8, headDim: 64, expertWidth: 2880, vocab: 201088, window: 128, context: 131072 },
  // The gpt-oss golden's shape (../shared/goldens-layers/gptoss-sinks-window-moe), for tests.
  tiny: { layers: 2, hidden: 128, experts: 4, expertsUsed: 2, heads: 4, kvHeads: 2, headDim: 32, expertWidth: 128, vocab: 256, window: 8, context: 131072 },
});

/** What fills a tensor (see the top of this file; q4k and q6k: bench/gguf_arch_random.ts's files). */
export type Fill = 'q8' | 'mxfp4' | 'q4k' | 'q6k' | 'uniform' | 'sinks' | 'ones' | 'f16';
export interface GptOssTensor extends GGUFHeaderTensor { fill: Fill }

/** The file's tensors in llama.cpp's names and ne orders (fastest first), with their types. */
export function gptOssTensors(s: GptOssShape): GptOssTensor[] {
  const { hidden: H, experts: E, expertWidth: I, heads: N, kvHeads: KV, headDim: D, vocab: V } = s;
  const t = (name: string, type: string, shape: number[], fill: Fill): GptOssTensor => ({ name, type, shape, fill });
  const out = [t('token_embd.weight', 'Q8_0', [H, V], 'q8')];
  for (let i = 0; i < s.layers; i++) {
    const b = `blk.${i}.`;
    out.push(
      t(`${b}attn_norm.weight`, 'F32', [H], 'ones'),
      t(`${b}attn_q.weight`, 'Q8_0', [H, N * D], 'q8'), t(`${b}attn_q.bias`, 'F32', [N * D], 'uniform'),
      t(`${b}attn_k.weight`, 'Q8_0', [H, KV * D], 'q8'), t(`${b}attn_k.bias`, 'F32', [KV * D], 'uniform'),
      t(`${b}attn_v.weight`, 'Q8_0', [H, KV * D], 'q8'), t(`${b}attn_v.bias`, 'F32', [KV * D], 'uniform'),
      t(`${b}attn_output.weight`, 'Q8_0', [N * D, H], 'q8'), t(`${b}attn_output.bias`, 'F32', [H], 'uniform'),
      t(`${b}attn_sinks.weight`, 'F32', [N], 'sinks'),
      t(`${b}post_attention_norm.weight`, 'F32', [H], 'ones'),
      t(`${b}ffn_gate_inp.weight`, 'F32', [H, E], 'uniform'), t(`${b}ffn_gate_inp.bias`, 'F32', [E], 'uniform'),
      t(`${b}ffn_gate_exps.weight`, 'MXFP4', [H, I, E], 'mxfp4'), t(`${b}ffn_gate_exps.bias`, 'F32', [I, E], 'uniform'),
      t(`${b}ffn_up_exps.weight`, 'MXFP4', [H, I, E], 'mxfp4'), t(`${b}ffn_up_exps.bias`, 'F32', [I, E], 'uniform'),
      t(`${b}ffn_down_exps.weight`, 'MXFP4', [I, H, E], 'mxfp4'), t(`${b}ffn_down_exps.bias`, 'F32', [H, E], 'uniform'),
    );
  }
  out.push(t('output_norm.weight', 'F32', [H], 'ones'), t('output.weight', 'Q8_0', [H, V], 'q8'));
  return out;
}

/** The metadata convert_hf_to_gguf.py writes for gpt-oss (GptOssModel.set_gguf_parameters), and make_gguf.py's vocabulary. */
export function gptOssMetadata(s: GptOssShape, name: string): [string, unknown, GGUFValueTypeName?][] {
  const a = 'gpt-oss';
  return [
    ['general.architecture', a], ['general.name', name],
    ['general.file_type', 38, 'u32'], // LLAMA_FTYPE_MOSTLY_MXFP4_MOE
    [`${a}.block_count`, s.layers, 'u32'], [`${a}.context_length`, s.context, 'u32'],
    [`${a}.embedding_length`, s.hidden, 'u32'], [`${a}.feed_forward_length`, s.expertWidth, 'u32'],
    [`${a}.attention.head_count`, s.heads, 'u32'], [`${a}.attention.head_count_kv`, s.kvHeads, 'u32'],
    [`${a}.rope.freq_base`, 150000, 'f32'], [`${a}.attention.layer_norm_rms_epsilon`, 1e-5, 'f32'],
    [`${a}.expert_count`, s.experts, 'u32'], [`${a}.expert_used_count`, s.expertsUsed, 'u32'],
    [`${a}.attention.key_length`, s.headDim, 'u32'], [`${a}.attention.value_length`, s.headDim, 'u32'],
    [`${a}.attention.sliding_window`, s.window, 'u32'], [`${a}.expert_feed_forward_length`, s.expertWidth, 'u32'],
    [`${a}.rope.scaling.type`, 'yarn'], [`${a}.rope.scaling.factor`, 32, 'f32'], [`${a}.rope.scaling.original_context_length`, 4096, 'u32'],
    [`${a}.vocab_size`, s.vocab, 'u32'],
    ...randomVocab(s.vocab),
  ];
}

/** make_gguf.py's vocabulary as metadata: a SentencePiece ('llama') list of <unk>, <s>, </s>, the 256 byte
 *  tokens where they fit, then t<i>. */
export function randomVocab(vocab: number, named: Readonly<Record<number, string>> = {}): [string, unknown, GGUFValueTypeName?][] {
  const toks = ['<unk>', '<s>', '</s>'], types = [2, 3, 3];
  if (vocab >= 3 + 256 + 1) for (let i = 0; i < 256; i++) { toks.push(`<0x${i.toString(16).toUpperCase().padStart(2, '0')}>`); types.push(6); }
  for (let i = toks.length; i < vocab; i++) { toks.push(`t${i}`); types.push(1); }
  // Control tokens at given ids (Gemma 3's image tokens for its vision pair).
  for (const [i, t] of Object.entries(named)) { toks[Number(i)] = t; types[Number(i)] = 3; }
  return [
    ['tokenizer.ggml.model', 'llama'], ['tokenizer.ggml.tokens', toks],
    ['tokenizer.ggml.scores', { type: 'array', itemType: 'f32', value: Float32Array.from({ length: vocab }, (_, i) => -i) }],
    ['tokenizer.ggml.token_type', { type: 'array', itemType: 'i32', value: Int32Array.from(types) }],
    ['tokenizer.ggml.unknown_token_id', 0, 'u32'], ['tokenizer.ggml.bos_token_id', 1, 'u32'], ['tokenizer.ggml.eos_token_id', 2, 'u32'],
    ['tokenizer.ggml.add_bos_token', true], ['tokenizer.ggml.add_eos_token', false],
  ];
}

/** Bytes a block and values a block of the blocked fills. */
const BLOCK = { q8: [34, 32], mxfp4: [17, 32], q4k: [144, 256], q6k: [210, 256] } as const;
/** Q8_0's d: uniform int8 codes have a standard deviation of 73.9, so 0.02 / 73.9. */
const Q8_D = f32ToF16Bits(0.02 / 73.9);
/** Q4_K's d and dmin (random 6-bit scales and mins, 4-bit codes: values of a few hundredths) and Q6_K's d
 *  (random int8 scales, 6-bit codes centred on 32). The values mean nothing; they stay finite and small. */
const Q4K_D = f32ToF16Bits(2e-5), Q4K_DMIN = f32ToF16Bits(1e-5), Q6K_D = f32ToF16Bits(4e-6);
/** Uniform in [-a, a] has standard deviation a/√3. */
const UNIFORM_A = 0.02 * Math.sqrt(3);

/** A tensor's bytes in chunks of at most about `chunkBytes` (whole blocks), from its own xorshift32 stream. */
export function* tensorChunks(t: GptOssTensor, seed: number, index: number, chunkBytes = 1 << 24): Generator<Uint8Array> {
  let x = (Math.imul(seed ^ 0x5bd1e995, 0x01000193) ^ Math.imul(index + 1, 0x9e3779b1)) >>> 0 || 1;
  const n = t.shape.reduce((a, b) => a * b, 1);
  if (t.fill === 'q8' || t.fill === 'mxfp4' || t.fill === 'q4k' || t.fill === 'q6k') {
    const [bb, be] = BLOCK[t.fill];
    const blocks = n / be, per = Math.max(1, Math.floor(chunkBytes / bb / 4) * 4);
    for (let b0 = 0; b0 < blocks; b0 += per) {
      const nb = Math.min(per, blocks - b0);
      const out = new Uint8Array(nb * bb);
      const words = new Uint32Array(out.buffer, 0, out.length >>> 2);
      for (let i = 0; i < words.length; i++) { x ^= x << 13; x ^= x >>> 17; x ^= x << 5; words[i] = x; }
      for (let i = words.length * 4; i < out.length; i++) { x ^= x << 13; x ^= x >>> 17; x ^= x << 5; out[i] = x & 0xff; }
      if (t.fill === 'q8') {
        for (let b = 0; b < nb; b++) {
          const o = b * bb;
          out[o] = Q8_D & 0xff; out[o + 1] = Q8_D >> 8;
          for (let j = 2; j < bb; j++) if (out[o + j] === 0x80) out[o + j] = 0x81; // −128 → −127: ggml's codes stay in ±127
        }
      } else if (t.fill === 'q4k') {
        for (let b = 0; b < nb; b++) {
          const o = b * bb;
          out[o] = Q4K_D & 0xff; out[o + 1] = Q4K_D >> 8; out[o + 2] = Q4K_DMIN & 0xff; out[o + 3] = Q4K_DMIN >> 8;
        }
      } else if (t.fill === 'q6k') {
        for (let b = 0; b < nb; b++) { const o = b * bb + 208; out[o] = Q6K_D & 0xff; out[o + 1] = Q6K_D >> 8; }
      } else {
        for (let b = 0; b < nb; b++) out[b * bb] = 120;
      }
      yield out;
    }
    return;
  }
  if (t.fill === 'f16') {
    // Uniform values as F16 bit patterns (bench/gguf_arch_random.ts's mmproj matrices).
    const per = Math.max(1, chunkBytes >>> 1);
    for (let i0 = 0; i0 < n; i0 += per) {
      const v = new Uint16Array(Math.min(per, n - i0));
      for (let i = 0; i < v.length; i++) { x ^= x << 13; x ^= x >>> 17; x ^= x << 5; v[i] = f32ToF16Bits(((x >>> 0) / 2 ** 32 * 2 - 1) * UNIFORM_A); }
      yield new Uint8Array(v.buffer);
    }
    return;
  }
  const per = Math.max(1, chunkBytes >>> 2);
  for (let i0 = 0; i0 < n; i0 += per) {
    const v = new Float32Array(Math.min(per, n - i0));
    if (t.fill === 'ones') v.fill(1);
    else {
      const a = t.fill === 'sinks' ? 1 : UNIFORM_A;
      for (let i = 0; i < v.length; i++) { x ^= x << 13; x ^= x >>> 17; x ^= x << 5; v[i] = ((x >>> 0) / 2 ** 32 * 2 - 1) * a; }
    }
    yield new Uint8Array(v.buffer);
  }
}

/** The whole file in memory (small shapes: tests), through writeGGUF. */
export function gptOssGGUFBytes(s: GptOssShape, seed = 0, name = 'gpt-oss random'): Uint8Array {
  const tensors = gptOssTensors(s).map((t, i) => {
    const parts = [...tensorChunks(t, seed, i)];
    const data = new Uint8Array(parts.reduce((a, p) => a + p.length, 0));
    let at = 0;
    for (const p of parts) { data.set(p, at); at += p.length; }
    return { name: t.name, type: t.type, shape: t.shape, data };
  });
  return writeGGUF({ metadata: gptOssMetadata(s, name), tensors });
}
