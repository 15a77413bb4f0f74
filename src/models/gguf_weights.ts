// A GGUF file seen as the HF checkpoint it stands for (SPEC §8: "a GGUF model is the HF model whose
// weights are the dequantized tensors, q/k rows un-permuted"): tensors renamed to transformers' state
// dict names, shapes given outermost first, and for the `llama` architecture the rows of attn_q and
// attn_k put back in HF's order. It is a SafetensorsFile, so the checkpoint schema validates it and
// the WeightReader streams it like any checkpoint; its dtypes are GGUF's ('Q4_K', 'F16', ...).
import { WebinferError } from '../core/errors.js';
import type { ModelConfig } from './config.js';
import type { GGUFFile } from './gguf.js';
import type { SafetensorsFile, SafetensorsTensorInfo } from './safetensors.js';

/** Whether a value is a GGUFFile (loadGGUF's). */
export function isGGUFFile(x: unknown): x is GGUFFile {
  const g = x as GGUFFile;
  return g !== null && typeof g === 'object' && g.metadata instanceof Map && g.tensors instanceof Map && typeof g.tensorBytes === 'function';
}

/** GGUF's per-layer names by transformers' (the part after `model.layers.{i}.`). */
const LAYER_NAMES: readonly (readonly [string, string])[] = [
  ['input_layernorm.weight', 'attn_norm.weight'],
  ['post_attention_layernorm.weight', 'ffn_norm.weight'],
  ['self_attn.q_proj.weight', 'attn_q.weight'],
  ['self_attn.q_proj.bias', 'attn_q.bias'],
  ['self_attn.k_proj.weight', 'attn_k.weight'],
  ['self_attn.k_proj.bias', 'attn_k.bias'],
  ['self_attn.v_proj.weight', 'attn_v.weight'],
  ['self_attn.v_proj.bias', 'attn_v.bias'],
  ['self_attn.o_proj.weight', 'attn_output.weight'],
  ['self_attn.o_proj.bias', 'attn_output.bias'],
  ['self_attn.q_norm.weight', 'attn_q_norm.weight'],
  ['self_attn.k_norm.weight', 'attn_k_norm.weight'],
  ['mlp.gate_proj.weight', 'ffn_gate.weight'],
  ['mlp.up_proj.weight', 'ffn_up.weight'],
  ['mlp.down_proj.weight', 'ffn_down.weight'],
];

const GLOBAL_NAMES: readonly (readonly [string, string])[] = [
  ['model.embed_tokens.weight', 'token_embd.weight'],
  ['model.norm.weight', 'output_norm.weight'],
  ['lm_head.weight', 'output.weight'],
];

/** The HF name of a GGUF tensor of the Llama family, or null for one this table does not map. */
function hfName(gguf: string): string | null {
  for (const [hf, g] of GLOBAL_NAMES) if (g === gguf) return hf;
  const m = /^blk\.(\d+)\.(.+)$/.exec(gguf);
  if (!m) return null;
  for (const [hf, g] of LAYER_NAMES) if (g === m[2]) return `model.layers.${m[1]}.${hf}`;
  return null;
}

/**
 * Row order of a `llama` GGUF's attn_q / attn_k ([heads · D] rows): llama.cpp's converter stores HF
 * row h·D + j·D/2 + i at h·D + 2i + j (so that its interleaved RoPE pairs equal HF's rotate-half
 * halves). Returns, for each HF row, the GGUF row holding it.
 */
export function unpermuteRows(heads: number, D: number): Int32Array {
  const src = new Int32Array(heads * D);
  const half = D / 2;
  for (let h = 0; h < heads; h++) {
    for (let j = 0; j < 2; j++) for (let i = 0; i < half; i++) src[h * D + j * half + i] = h * D + 2 * i + j;
  }
  return src;
}

/**
 * The checkpoint a GGUF file stands for, for a config of the Llama family (its own, or one the caller
 * passes): tensors under transformers' names with their GGUF types, rows read on demand.
 */
export function ggufCheckpoint(g: GGUFFile, cfg: ModelConfig): SafetensorsFile {
  if (cfg.mla || cfg.moe) {
    throw new WebinferError(`loadModel: ${g.name}: GGUF weights of ${cfg.architecture} are not supported yet (the Llama family is: `
      + 'llama, qwen2, qwen3); load the HF checkpoint instead');
  }
  const arch = String(g.metadata.get('general.architecture') ?? '');
  const tensors = new Map<string, SafetensorsTensorInfo>();
  const source = new Map<string, string>();
  const unknown: string[] = [];
  for (const [name, t] of g.tensors) {
    const hf = hfName(name);
    if (hf === null) { unknown.push(name); continue; }
    tensors.set(hf, { dtype: t.type, shape: t.shape.slice().reverse() });
    source.set(hf, name);
  }
  // Names the table does not know stay visible to the schema check (reported as unexpected).
  for (const name of unknown) tensors.set(name, { dtype: g.tensors.get(name)!.type, shape: g.tensors.get(name)!.shape.slice().reverse() });
  const permuted = (hf: string): number => {
    if (arch !== 'llama') return 0;
    if (/self_attn\.q_proj\.weight$/.test(hf)) return cfg.numHeads;
    if (/self_attn\.k_proj\.weight$/.test(hf)) return cfg.numKvHeads;
    return 0;
  };
  return {
    tensors,
    metadata: {},
    name: g.name,
    async bytes(hf: string): Promise<Uint8Array> {
      const name = source.get(hf) ?? hf;
      const raw = await g.tensorBytes(name);
      const heads = permuted(hf);
      if (!heads) return raw;
      const rows = tensors.get(hf)!.shape[0];
      const rowBytes = raw.length / rows;
      const order = unpermuteRows(heads, rows / heads);
      const out = new Uint8Array(raw.length);
      for (let r = 0; r < rows; r++) out.set(raw.subarray(order[r] * rowBytes, (order[r] + 1) * rowBytes), r * rowBytes);
      return out;
    },
    close: g.close ? () => g.close!() : undefined,
  };
}
