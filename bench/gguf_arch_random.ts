// Gemma 3 and Qwen3-MoE GGUF files with random weights, for issue 44's device benchmark (Gemma-3-4B's and
// Qwen3-30B-A3B's shapes beside llama.cpp on the same file): the tensors and metadata convert_hf_to_gguf.py
// writes for Gemma3ForCausalLM (GGUF `gemma3`) and Qwen3MoeForCausalLM (`qwen3moe`), the names the GGUF
// cases (tests/cases/arch_gemma3.cases.ts, gguf_arch.cases.ts) check webinfer's reader against. Types as a
// Q4_K_M file mostly has them: every matrix Q4_K, the output matrix (Gemma's tied embedding) Q6_K, the
// router, norms F32. (llama-quantize's Q4_K_M also keeps half the layers' attn_v and ffn_down in Q6_K;
// here they are Q4_K, so the file reads a little fewer bytes than the published one.) The values are
// gguf_gptoss.ts's seeded streams: they mean nothing and stay finite; norms are 1 (Gemma's stored 1 + w).
import type { GGUFValueTypeName } from '../src/formats/gguf_write';
import { randomVocab, type Fill } from './gguf_gptoss';

export interface ArchShape {
  arch: 'gemma3' | 'qwen3moe';
  layers: number; hidden: number; heads: number; kvHeads: number; headDim: number; vocab: number; context: number;
  /** Dense layers' feed-forward width (Gemma), or each expert's (Qwen3-MoE). */
  ffn: number;
  /** Qwen3-MoE: experts, experts a token, and the config's dense width (its intermediate_size; no layer is dense). */
  experts?: number; expertsUsed?: number; denseFfn?: number;
  /** Gemma 3: the sliding window and the RoPE bases (global; local is llama.cpp's fixed 10000). */
  window?: number; ropeBase: number;
  /** Gemma 3: the ids of <start_of_image>, <end_of_image> and <image_soft_token> in its vocabulary (its vision pair's). */
  imageTokens?: { boi: number; eoi: number; image: number };
}

export const ARCH_SHAPES: Readonly<Record<string, ArchShape>> = Object.freeze({
  // google/gemma-3-4b-it's text_config.
  'gemma3-4b': { arch: 'gemma3', layers: 34, hidden: 2560, heads: 8, kvHeads: 4, headDim: 256, vocab: 262208, context: 131072, ffn: 10240, window: 1024, ropeBase: 1e6,
    imageTokens: { boi: 255999, eoi: 256000, image: 262144 } },
  // Qwen/Qwen3-30B-A3B's config.json.
  'qwen3-30b-a3b': { arch: 'qwen3moe', layers: 48, hidden: 2048, heads: 32, kvHeads: 4, headDim: 128, vocab: 151936, context: 40960, ffn: 768, experts: 128, expertsUsed: 8, denseFfn: 6144, ropeBase: 1e6 },
  // Small shapes of the same files, for tests (K a multiple of 256 for the k-quants).
  'gemma3-tiny': { arch: 'gemma3', layers: 6, hidden: 256, heads: 4, kvHeads: 2, headDim: 64, vocab: 512, context: 4096, ffn: 512, window: 16, ropeBase: 1e6,
    imageTokens: { boi: 509, eoi: 510, image: 511 } },
  'qwen3moe-tiny': { arch: 'qwen3moe', layers: 2, hidden: 256, heads: 4, kvHeads: 2, headDim: 64, vocab: 512, context: 4096, ffn: 256, experts: 8, expertsUsed: 2, denseFfn: 512, ropeBase: 1e6 },
});

export interface ArchTensor { name: string; type: string; shape: number[]; fill: Fill }

/** The file's tensors in llama.cpp's names and ne orders (fastest first). */
export function archTensors(s: ArchShape): ArchTensor[] {
  const { hidden: H, heads: N, kvHeads: KV, headDim: D, vocab: V, ffn: I } = s;
  const t = (name: string, type: string, shape: number[], fill: Fill): ArchTensor => ({ name, type, shape, fill });
  const q = (name: string, shape: number[]) => t(name, 'Q4_K', shape, 'q4k');
  const norm = (name: string, n: number) => t(name, 'F32', [n], 'ones');
  const gemma = s.arch === 'gemma3';
  // Gemma ties its output to the embedding: the one matrix is Q6_K, as llama-quantize keeps it.
  const out = [gemma ? t('token_embd.weight', 'Q6_K', [H, V], 'q6k') : q('token_embd.weight', [H, V])];
  for (let i = 0; i < s.layers; i++) {
    const b = `blk.${i}.`;
    out.push(
      norm(`${b}attn_norm.weight`, H),
      q(`${b}attn_q.weight`, [H, N * D]), q(`${b}attn_k.weight`, [H, KV * D]), q(`${b}attn_v.weight`, [H, KV * D]),
      q(`${b}attn_output.weight`, [N * D, H]),
      norm(`${b}attn_q_norm.weight`, D), norm(`${b}attn_k_norm.weight`, D),
    );
    if (gemma) {
      out.push(
        norm(`${b}post_attention_norm.weight`, H), norm(`${b}ffn_norm.weight`, H),
        q(`${b}ffn_gate.weight`, [H, I]), q(`${b}ffn_up.weight`, [H, I]), q(`${b}ffn_down.weight`, [I, H]),
        norm(`${b}post_ffw_norm.weight`, H),
      );
    } else {
      const E = s.experts!;
      out.push(
        norm(`${b}ffn_norm.weight`, H),
        t(`${b}ffn_gate_inp.weight`, 'F32', [H, E], 'uniform'),
        q(`${b}ffn_gate_exps.weight`, [H, I, E]), q(`${b}ffn_up_exps.weight`, [H, I, E]), q(`${b}ffn_down_exps.weight`, [I, H, E]),
      );
    }
  }
  out.push(norm('output_norm.weight', H));
  if (!gemma) out.push(t('output.weight', 'Q6_K', [H, V], 'q6k'));
  return out;
}

/** The metadata convert_hf_to_gguf.py writes for the architecture, and make_gguf.py's vocabulary. */
export function archMetadata(s: ArchShape, name: string): [string, unknown, GGUFValueTypeName?][] {
  const a = s.arch;
  const m: [string, unknown, GGUFValueTypeName?][] = [
    ['general.architecture', a], ['general.name', name],
    ['general.file_type', 15, 'u32'], // LLAMA_FTYPE_MOSTLY_Q4_K_M
    [`${a}.block_count`, s.layers, 'u32'], [`${a}.context_length`, s.context, 'u32'],
    [`${a}.embedding_length`, s.hidden, 'u32'], [`${a}.feed_forward_length`, s.denseFfn ?? s.ffn, 'u32'],
    [`${a}.attention.head_count`, s.heads, 'u32'], [`${a}.attention.head_count_kv`, s.kvHeads, 'u32'],
    [`${a}.attention.key_length`, s.headDim, 'u32'], [`${a}.attention.value_length`, s.headDim, 'u32'],
    [`${a}.rope.freq_base`, s.ropeBase, 'f32'], [`${a}.attention.layer_norm_rms_epsilon`, 1e-6, 'f32'],
  ];
  if (a === 'gemma3') m.push([`${a}.attention.sliding_window`, s.window!, 'u32']);
  else {
    m.push(
      [`${a}.expert_count`, s.experts!, 'u32'], [`${a}.expert_used_count`, s.expertsUsed!, 'u32'],
      [`${a}.expert_feed_forward_length`, s.ffn, 'u32'],
    );
  }
  const it = s.imageTokens;
  return [...m, ...randomVocab(s.vocab, it ? { [it.boi]: '<start_of_image>', [it.eoi]: '<end_of_image>', [it.image]: '<image_soft_token>' } : {})];
}

/** Gemma 3's vision tower and projector as an mmproj file (convert_hf_to_gguf.py --mmproj, projector type gemma3). */
export interface MmprojShape {
  layers: number; hidden: number; ffn: number; heads: number; patch: number; image: number;
  /** The text model's width (the projection's output) and the pooling factor (projector.scale_factor). */
  textHidden: number; scale: number;
}

export const MMPROJ_SHAPES: Readonly<Record<string, MmprojShape>> = Object.freeze({
  // google/gemma-3-4b-it's vision_config (SigLIP-So400m at 896 px) and mm_tokens_per_image 256.
  'gemma3-4b': { layers: 27, hidden: 1152, ffn: 4304, heads: 16, patch: 14, image: 896, textHidden: 2560, scale: 4 },
  // A small one beside gemma3-tiny, for tests.
  'gemma3-tiny': { layers: 2, hidden: 64, ffn: 128, heads: 4, patch: 14, image: 112, textHidden: 256, scale: 2 },
});

/** The mmproj's tensors in llama.cpp's names and ne orders: matrices F16 (the converter's default for
 *  mmproj files), embeddings, biases and norms F32. */
export function mmprojTensors(s: MmprojShape): ArchTensor[] {
  const { hidden: C, ffn: I, patch: P } = s, N = (s.image / P) ** 2;
  const t = (name: string, type: string, shape: number[], fill: Fill): ArchTensor => ({ name, type, shape, fill });
  const out = [t('v.patch_embd.weight', 'F16', [P, P, 3, C], 'f16'), t('v.patch_embd.bias', 'F32', [C], 'uniform'), t('v.position_embd.weight', 'F32', [C, N], 'uniform')];
  for (let i = 0; i < s.layers; i++) {
    const b = `v.blk.${i}.`;
    for (const n of ['attn_q', 'attn_k', 'attn_v', 'attn_out']) out.push(t(`${b}${n}.weight`, 'F16', [C, C], 'f16'), t(`${b}${n}.bias`, 'F32', [C], 'uniform'));
    for (const n of ['ln1', 'ln2']) out.push(t(`${b}${n}.weight`, 'F32', [C], 'ones'), t(`${b}${n}.bias`, 'F32', [C], 'uniform'));
    out.push(t(`${b}ffn_up.weight`, 'F16', [C, I], 'f16'), t(`${b}ffn_up.bias`, 'F32', [I], 'uniform'), t(`${b}ffn_down.weight`, 'F16', [I, C], 'f16'), t(`${b}ffn_down.bias`, 'F32', [C], 'uniform'));
  }
  out.push(t('v.post_ln.weight', 'F32', [C], 'ones'), t('v.post_ln.bias', 'F32', [C], 'uniform'),
    t('mm.soft_emb_norm.weight', 'F32', [C], 'ones'), t('mm.input_projection.weight', 'F16', [s.textHidden, C], 'f16'));
  return out;
}

/** The metadata convert_hf_to_gguf.py writes for Gemma 3's mmproj. */
export function mmprojMetadata(s: MmprojShape, name: string): [string, unknown, GGUFValueTypeName?][] {
  const m: [string, unknown, GGUFValueTypeName?][] = [
    ['general.architecture', 'clip'], ['general.name', name], ['general.file_type', 1, 'u32'],
    ['clip.has_vision_encoder', true], ['clip.projector_type', 'gemma3'], ['clip.use_gelu', true],
    ['clip.vision.image_size', s.image, 'u32'], ['clip.vision.patch_size', s.patch, 'u32'], ['clip.vision.embedding_length', s.hidden, 'u32'],
    ['clip.vision.feed_forward_length', s.ffn, 'u32'], ['clip.vision.block_count', s.layers, 'u32'], ['clip.vision.attention.head_count', s.heads, 'u32'],
    ['clip.vision.attention.layer_norm_epsilon', 1e-6, 'f32'], ['clip.vision.projection_dim', s.textHidden, 'u32'],
    ['clip.vision.image_mean', { type: 'array', itemType: 'f32', value: Float32Array.of(0.5, 0.5, 0.5) }],
    ['clip.vision.image_std', { type: 'array', itemType: 'f32', value: Float32Array.of(0.5, 0.5, 0.5) }],
  ];
  if (s.scale !== 4) m.push(['clip.vision.projector.scale_factor', s.scale, 'u32']);
  return m;
}
