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
}

export const ARCH_SHAPES: Readonly<Record<string, ArchShape>> = Object.freeze({
  // google/gemma-3-4b-it's text_config.
  'gemma3-4b': { arch: 'gemma3', layers: 34, hidden: 2560, heads: 8, kvHeads: 4, headDim: 256, vocab: 262208, context: 131072, ffn: 10240, window: 1024, ropeBase: 1e6 },
  // Qwen/Qwen3-30B-A3B's config.json.
  'qwen3-30b-a3b': { arch: 'qwen3moe', layers: 48, hidden: 2048, heads: 32, kvHeads: 4, headDim: 128, vocab: 151936, context: 40960, ffn: 768, experts: 128, expertsUsed: 8, denseFfn: 6144, ropeBase: 1e6 },
  // Small shapes of the same files, for tests (K a multiple of 256 for the k-quants).
  'gemma3-tiny': { arch: 'gemma3', layers: 6, hidden: 256, heads: 4, kvHeads: 2, headDim: 64, vocab: 512, context: 4096, ffn: 512, window: 16, ropeBase: 1e6 },
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
  return [...m, ...randomVocab(s.vocab)];
}
