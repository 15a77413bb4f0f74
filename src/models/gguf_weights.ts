// A GGUF file seen as the HF checkpoint it stands for (SPEC §8: "a GGUF model is the HF model whose
// weights are the dequantized tensors, q/k rows un-permuted"): tensors renamed to transformers' state
// dict names, shapes given outermost first, and for `llama` and `smollm3` (LlamaModel's converter) the
// rows of attn_q and attn_k put back in HF's order. Phi-3's fused attn_qkv and ffn_up (gate then up) are
// its qkv_proj and gate_up_proj; Qwen3-MoE's experts are made up as DeepSeek's (below); tensors the
// config is made from (rope_freqs, rope_factors_long/short) are not weights. It is a SafetensorsFile, so the checkpoint schema validates it and
// the WeightReader streams it like any checkpoint; its dtypes are GGUF's ('Q4_K', 'F16', ...).
// DeepSeek (`deepseek2`) maps onto transformers' DeepSeek V2/V3 names with two tensors made up:
// - `mlp.experts.gate_up_proj` [E, 2I, H] (transformers 5's packed layout): per expert its rows of
//   ffn_gate_exps then those of ffn_up_exps, blocks kept (both must share a type);
// - `self_attn.kv_b_proj.weight` [heads·(nope + v), kv_lora_rank] where a file stores MLA's
//   up-projection split (attn_k_b [heads, rank, nope]: W_UK transposed, and attn_v_b [heads, v, rank],
//   as convert_hf_to_gguf.py writes them since mid-2025): dequantized once on the host to F32, since
//   the model absorbs it at load into 16/32-bit W_UK and W_UV anyway (files with attn_kv_b map it).
// Gemma 3 (`gemma3`) names its four norms a layer as llama.cpp's Gemma files do (ffn_norm is the MLP's
// input norm, post_attention_norm and post_ffw_norm the sublayers' output norms), and its converter
// stores every norm (the four, q/k's, the final one) as 1 + w, the gain Gemma3RMSNorm multiplies by: the
// checkpoint this file stands for holds w, so they come back as F32 v − 1 (the model adds the 1 again,
// in f32: exactly v wherever v >= 0.5, by Sterbenz's lemma and above 2 because 1 is a multiple of v's
// ulp; within 2^-25 of v below that).
//
// gpt-oss (`gpt-oss`) maps onto transformers' GptOss names, its MXFP4 experts as an MXFP4 checkpoint's
// are presented (formats/hf_mxfp4.ts: rows of ggml blocks), with two tensors made up:
// - `mlp.experts.gate_up_proj` [E, 2I, H] from ffn_gate_exps and ffn_up_exps, as DeepSeek's (blocks kept);
// - `mlp.experts.gate_up_proj_bias` [E, 2I] F32 in the checkpoint's interleaved order (gate column 2n,
//   up 2n + 1) from ffn_gate_exps.bias and ffn_up_exps.bias, which convert_hf_to_gguf.py splits it into.
import { QUANT_TYPES } from '../core/quant.js';
import { dequantizeRows, isDequantType } from '../reference/quant.js';
import { WebinferError } from '../core/errors.js';
import type { ModelConfig } from './config.js';
import type { GGUFFile } from '../formats/gguf.js';
import type { SafetensorsFile, SafetensorsTensorInfo } from '../formats/safetensors.js';

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
  // DeepSeek V2/V3 (deepseek2)
  ['self_attn.q_a_proj.weight', 'attn_q_a.weight'],
  ['self_attn.q_a_layernorm.weight', 'attn_q_a_norm.weight'],
  ['self_attn.q_b_proj.weight', 'attn_q_b.weight'],
  ['self_attn.kv_a_proj_with_mqa.weight', 'attn_kv_a_mqa.weight'],
  ['self_attn.kv_a_layernorm.weight', 'attn_kv_a_norm.weight'],
  ['self_attn.kv_b_proj.weight', 'attn_kv_b.weight'],
  ['mlp.gate.weight', 'ffn_gate_inp.weight'],
  ['mlp.gate.e_score_correction_bias', 'exp_probs_b.bias'],
  ['mlp.experts.down_proj', 'ffn_down_exps.weight'],
  ['mlp.shared_experts.gate_proj.weight', 'ffn_gate_shexp.weight'],
  ['mlp.shared_experts.up_proj.weight', 'ffn_up_shexp.weight'],
  ['mlp.shared_experts.down_proj.weight', 'ffn_down_shexp.weight'],
];

/** gpt-oss's names where they differ from the table above (llama.cpp's LLM_ARCH_OPENAI_MOE tensors). */
const GPT_OSS_LAYER_NAMES: readonly (readonly [string, string])[] = [
  ['post_attention_layernorm.weight', 'post_attention_norm.weight'],
  ['self_attn.sinks', 'attn_sinks.weight'],
  ['mlp.router.weight', 'ffn_gate_inp.weight'],
  ['mlp.router.bias', 'ffn_gate_inp.bias'],
  ['mlp.experts.down_proj_bias', 'ffn_down_exps.bias'],
];

/** Phi-3's fused projections (llama.cpp's attn_qkv, and ffn_up holding gate then up). */
const PHI3_LAYER_NAMES: readonly (readonly [string, string])[] = [
  ['self_attn.qkv_proj.weight', 'attn_qkv.weight'],
  ['mlp.gate_up_proj.weight', 'ffn_up.weight'],
];

/** Names by architecture where they differ from LAYER_NAMES. */
const ARCH_LAYER_NAMES: Readonly<Record<string, readonly (readonly [string, string])[]>> = {
  'gpt-oss': GPT_OSS_LAYER_NAMES,
  phi3: PHI3_LAYER_NAMES,
  gemma3: [
    ['post_attention_layernorm.weight', 'post_attention_norm.weight'],
    ['pre_feedforward_layernorm.weight', 'ffn_norm.weight'],
    ['post_feedforward_layernorm.weight', 'post_ffw_norm.weight'],
  ],
};

/** Tensors the config is made from (gguf_config.ts), not weights. */
const CONFIG_TENSORS = new Set(['rope_freqs.weight', 'rope_factors_long.weight', 'rope_factors_short.weight']);

/** Architectures whose q/k rows llama.cpp's converter permutes (LlamaModel and its subclasses: interleaved RoPE in llama.cpp). */
const PERMUTED_ARCHS = new Set(['llama', 'smollm3']);

/**
 * LFM2 (`lfm2`) by transformers' names: operator_norm is attn_norm, w1/w3/w2 are ffn_gate/up/down, the
 * conv layers' shortconv.* (conv.conv squeezed to [H, L] by the converter), and the final
 * model.embedding_norm is token_embd_norm (llama.cpp's name for it; output_norm accepted too).
 */
const LFM2_LAYER_NAMES: readonly (readonly [string, string])[] = [
  ['operator_norm.weight', 'attn_norm.weight'],
  ['ffn_norm.weight', 'ffn_norm.weight'],
  ['feed_forward.w1.weight', 'ffn_gate.weight'],
  ['feed_forward.w3.weight', 'ffn_up.weight'],
  ['feed_forward.w2.weight', 'ffn_down.weight'],
  ['self_attn.q_proj.weight', 'attn_q.weight'],
  ['self_attn.k_proj.weight', 'attn_k.weight'],
  ['self_attn.v_proj.weight', 'attn_v.weight'],
  ['self_attn.out_proj.weight', 'attn_output.weight'],
  ['self_attn.q_layernorm.weight', 'attn_q_norm.weight'],
  ['self_attn.k_layernorm.weight', 'attn_k_norm.weight'],
  ['conv.conv.weight', 'shortconv.conv.weight'],
  ['conv.in_proj.weight', 'shortconv.in_proj.weight'],
  ['conv.out_proj.weight', 'shortconv.out_proj.weight'],
];
const LFM2_GLOBAL_NAMES: readonly (readonly [string, string])[] = [
  ['model.embed_tokens.weight', 'token_embd.weight'],
  ['model.embedding_norm.weight', 'token_embd_norm.weight'],
  ['model.embedding_norm.weight', 'output_norm.weight'],
  ['lm_head.weight', 'output.weight'],
];

/** GGUF tensors a made-up HF tensor is built from (see the top of this file). */
const MADE_UP = new Set(['attn_k_b.weight', 'attn_v_b.weight', 'ffn_gate_exps.weight', 'ffn_up_exps.weight', 'ffn_gate_exps.bias', 'ffn_up_exps.bias']);

const GLOBAL_NAMES: readonly (readonly [string, string])[] = [
  ['model.embed_tokens.weight', 'token_embd.weight'],
  ['model.norm.weight', 'output_norm.weight'],
  ['lm_head.weight', 'output.weight'],
];

/** The HF name of a GGUF tensor of architecture `arch`, or null for one these tables do not map. */
function hfName(gguf: string, arch: string): string | null {
  const [global, layer] = arch === 'lfm2' ? [LFM2_GLOBAL_NAMES, LFM2_LAYER_NAMES] : [GLOBAL_NAMES, LAYER_NAMES];
  for (const [hf, g] of global) if (g === gguf) return hf;
  const m = /^blk\.(\d+)\.(.+)$/.exec(gguf);
  if (!m) return null;
  for (const [hf, g] of ARCH_LAYER_NAMES[arch] ?? []) if (g === m[2]) return `model.layers.${m[1]}.${hf}`;
  for (const [hf, g] of layer) if (g === m[2]) return `model.layers.${m[1]}.${hf}`;
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
 * The checkpoint a GGUF file stands for, for a config of an architecture gguf_config.ts reads (its own, or one the caller
 * passes): tensors under transformers' names with their GGUF types, rows read on demand.
 */
export function ggufCheckpoint(g: GGUFFile, cfg: ModelConfig): SafetensorsFile {
  const arch = String(g.metadata.get('general.architecture') ?? '');
  const tensors = new Map<string, SafetensorsTensorInfo>();
  const source = new Map<string, string>();
  const madeUp = new Map<string, () => Promise<Uint8Array>>();
  const unknown: string[] = [];
  const hfShape = (name: string) => g.tensors.get(name)!.shape.slice().reverse();
  const packedExperts = cfg.mla !== null || arch === 'gpt-oss' || arch === 'qwen3moe';
  for (const [name, t] of g.tensors) {
    if (CONFIG_TENSORS.has(name)) continue;
    const hf = hfName(name, arch);
    if (hf === null) {
      const m = /^blk\.(\d+)\.(.+)$/.exec(name);
      if (!(packedExperts && m && MADE_UP.has(m[2]))) unknown.push(name);
      continue;
    }
    if (arch === 'gemma3' && hf.endsWith('norm.weight')) {
      // Gemma 3's norms as the checkpoint holds them: w, the file's 1 + w less 1 (see the top of this file).
      tensors.set(hf, { dtype: 'F32', shape: hfShape(name) });
      madeUp.set(hf, () => lessOne(g, name));
      continue;
    }
    let shape = hfShape(name);
    // LFM2's depthwise taps: the converter squeezed HF's [H, 1, L] to [H, L] (same bytes).
    if (arch === 'lfm2' && hf.endsWith('conv.conv.weight') && shape.length === 2) shape = [shape[0], 1, shape[1]];
    // Two GGUF names for one HF tensor (LFM2's token_embd_norm and output_norm): the second is unexpected.
    if (tensors.has(hf)) {
      unknown.push(name);
      continue;
    }
    tensors.set(hf, { dtype: t.type, shape });
    source.set(hf, name);
  }
  if (packedExperts) {
    for (let i = 0; i < cfg.numLayers; i++) {
      const blk = `blk.${i}.`, p = `model.layers.${i}.`;
      const [kb, vb] = [`${blk}attn_k_b.weight`, `${blk}attn_v_b.weight`];
      if (cfg.mla && g.tensors.has(kb) && g.tensors.has(vb) && !g.tensors.has(`${blk}attn_kv_b.weight`)) {
        const name = `${p}self_attn.kv_b_proj.weight`;
        const { numHeads: N, mla } = cfg;
        const { qkNopeHeadDim: P, vHeadDim: V, kvLoraRank: L } = mla;
        const want = (t: string, shape: number[]) => {
          const got = hfShape(t);
          if (got.length !== 3 || got.some((d, j) => d !== shape[j])) {
            throw new WebinferError(`loadModel: ${g.name}: tensor '${t}': expected shape [${shape.join(', ')}] (heads, then MLA's up-projection), got [${got.join(', ')}]`);
          }
        };
        want(kb, [N, L, P]);
        want(vb, [N, V, L]);
        tensors.set(name, { dtype: 'F32', shape: [N * (P + V), L] });
        madeUp.set(name, async () => kvBFromSplit(await floatRows(g, kb), await floatRows(g, vb), N, P, V, L));
      }
      const [gate, up] = [`${blk}ffn_gate_exps.weight`, `${blk}ffn_up_exps.weight`];
      if (g.tensors.has(gate) && g.tensors.has(up)) {
        const name = `${p}mlp.experts.gate_up_proj`;
        const [tg, tu] = [g.tensors.get(gate)!.type, g.tensors.get(up)!.type];
        const [sg, su] = [hfShape(gate), hfShape(up)];
        if (tg !== tu || sg.length !== 3 || sg.some((d, j) => d !== su[j])) {
          throw new WebinferError(`loadModel: ${g.name}: layer ${i}: ffn_gate_exps (${tg} [${sg.join(', ')}]) and ffn_up_exps (${tu} [${su.join(', ')}]) `
            + 'must share a type and shape to run as one gate|up product');
        }
        const [E, I, H] = sg;
        tensors.set(name, { dtype: tg, shape: [E, 2 * I, H] });
        madeUp.set(name, async () => interleaveExperts(await g.tensorBytes(gate), await g.tensorBytes(up), E));
      }
      const [gb, ub] = [`${blk}ffn_gate_exps.bias`, `${blk}ffn_up_exps.bias`];
      if (g.tensors.has(gb) && g.tensors.has(ub)) {
        const name = `${p}mlp.experts.gate_up_proj_bias`;
        const [sg, su] = [hfShape(gb), hfShape(ub)];
        if (sg.length !== 2 || su.length !== 2 || sg[0] !== su[0] || sg[1] !== su[1]) {
          throw new WebinferError(`loadModel: ${g.name}: layer ${i}: ffn_gate_exps.bias [${sg.join(', ')}] and ffn_up_exps.bias [${su.join(', ')}] `
            + 'must share a shape [experts, width]');
        }
        const [E, I] = sg;
        tensors.set(name, { dtype: 'F32', shape: [E, 2 * I] });
        madeUp.set(name, async () => interleaveColumns(await floatRows(g, gb), await floatRows(g, ub), E * I));
      }
    }
  }
  // Names the table does not know stay visible to the schema check (reported as unexpected).
  for (const name of unknown) tensors.set(name, { dtype: g.tensors.get(name)!.type, shape: hfShape(name) });
  const permuted = (hf: string): number => {
    if (!PERMUTED_ARCHS.has(arch)) return 0;
    if (/self_attn\.q_proj\.weight$/.test(hf)) return cfg.numHeads;
    if (/self_attn\.k_proj\.weight$/.test(hf)) return cfg.numKvHeads;
    return 0;
  };
  return renamedCheckpoint(g, tensors, source, madeUp, (hf, raw) => {
    const heads = permuted(hf);
    if (!heads) return raw;
    const rows = tensors.get(hf)!.shape[0];
    const rowBytes = raw.length / rows;
    const order = unpermuteRows(heads, rows / heads);
    const out = new Uint8Array(raw.length);
    for (let r = 0; r < rows; r++) out.set(raw.subarray(order[r] * rowBytes, (order[r] + 1) * rowBytes), r * rowBytes);
    return out;
  });
}

/**
 * A GGUF file seen as a checkpoint in HF's names: `tensors` as HF names them, each read from the GGUF
 * tensor `source` names (else the same name), made by `madeUp` where it is assembled from several, and
 * passed through `transform` (llama.cpp's q/k row permutation undone, say) where given.
 */
function renamedCheckpoint(g: GGUFFile, tensors: Map<string, SafetensorsTensorInfo>, source: ReadonlyMap<string, string>,
                           madeUp: ReadonlyMap<string, () => Promise<Uint8Array>>,
                           transform?: (hf: string, raw: Uint8Array) => Uint8Array): SafetensorsFile {
  return {
    tensors,
    metadata: {},
    name: g.name,
    async bytes(hf: string): Promise<Uint8Array> {
      const make = madeUp.get(hf);
      if (make) return make();
      const raw = await g.tensorBytes(source.get(hf) ?? hf);
      return transform ? transform(hf, raw) : raw;
    },
    close: g.close ? () => g.close!() : undefined,
  };
}

/** A Gemma norm as the checkpoint holds it: the file's 1 + w less 1, as f32 bytes. */
async function lessOne(g: GGUFFile, name: string): Promise<Uint8Array> {
  const v = await floatRows(g, name);
  for (let i = 0; i < v.length; i++) v[i] = v[i] - 1;
  return new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
}

/** A GGUF tensor's values as f32 (dequantized as ggml does where it is quantized). */
async function floatRows(g: GGUFFile, name: string): Promise<Float32Array> {
  const t = g.tensors.get(name)!;
  if (!isDequantType(t.type)) {
    throw new WebinferError(`loadModel: ${g.name}: tensor '${name}' is ${t.type}: expected F32, F16, BF16 or one of ${QUANT_TYPES.join(', ')}`);
  }
  const rows = t.shape.slice(1).reduce((a, b) => a * b, 1);
  return Float32Array.from(dequantizeRows(t.type, await g.tensorBytes(name), rows, t.shape[0]));
}

/** HF's kv_b_proj [N·(P + V), L] (per head its P rows of W_UK, then V rows of W_UV) from attn_k_b
 *  [N, L, P] (W_UK transposed) and attn_v_b [N, V, L], as f32 bytes. */
export function kvBFromSplit(kb: Float32Array, vb: Float32Array, N: number, P: number, V: number, L: number): Uint8Array {
  const out = new Float32Array(N * (P + V) * L);
  for (let h = 0; h < N; h++) {
    const o = h * (P + V) * L;
    for (let l = 0; l < L; l++) for (let j = 0; j < P; j++) out[o + j * L + l] = kb[(h * L + l) * P + j];
    out.set(vb.subarray(h * V * L, (h + 1) * V * L), o + P * L);
  }
  return new Uint8Array(out.buffer);
}

/** Gate and up biases as one row of 2n values, gate value j at column 2j and up value j at 2j + 1, as f32 bytes. */
function interleaveColumns(gate: Float32Array, up: Float32Array, n: number): Uint8Array {
  const out = new Float32Array(2 * n);
  for (let j = 0; j < n; j++) {
    out[2 * j] = gate[j]!;
    out[2 * j + 1] = up[j]!;
  }
  return new Uint8Array(out.buffer);
}

/** Expert e's gate rows then its up rows, for every expert: [E, 2I, ·] from two [E, I, ·] tensors' bytes. */
function interleaveExperts(gate: Uint8Array, up: Uint8Array, E: number): Uint8Array {
  const per = gate.length / E;
  const out = new Uint8Array(2 * gate.length);
  for (let e = 0; e < E; e++) {
    out.set(gate.subarray(e * per, (e + 1) * per), 2 * e * per);
    out.set(up.subarray(e * per, (e + 1) * per), (2 * e + 1) * per);
  }
  return out;
}

/** An mmproj (projector type gemma3) tensor's name in the checkpoint schema (schema.ts siglipSchema), or null. */
function mmprojName(name: string): string | null {
  const fixed: Record<string, string> = {
    'v.patch_embd.weight': 'vision_tower.embeddings.patch_embedding.weight', 'v.patch_embd.bias': 'vision_tower.embeddings.patch_embedding.bias',
    'v.position_embd.weight': 'vision_tower.embeddings.position_embedding.weight',
    'v.post_ln.weight': 'vision_tower.post_layernorm.weight', 'v.post_ln.bias': 'vision_tower.post_layernorm.bias',
    'mm.input_projection.weight': 'multi_modal_projector.mm_input_projection_weight', 'mm.soft_emb_norm.weight': 'multi_modal_projector.mm_soft_emb_norm.weight',
  };
  if (fixed[name]) return fixed[name];
  const m = /^v\.blk\.(\d+)\.(attn_q|attn_k|attn_v|attn_out|ln1|ln2)\.(weight|bias)$/.exec(name);
  if (!m) return null;
  const part = { attn_q: 'self_attn.q_proj', attn_k: 'self_attn.k_proj', attn_v: 'self_attn.v_proj', attn_out: 'self_attn.out_proj', ln1: 'layer_norm1', ln2: 'layer_norm2' }[m[2]];
  return `vision_tower.encoder.layers.${m[1]}.${part}.${m[3]}`;
}

/**
 * The Gemma 3 vision tower and projector an mmproj GGUF (projector type gemma3) stands for, under the
 * checkpoint schema's names: shapes outermost first; the MLP's two products named by their shapes
 * (fc1 [intermediate, hidden] and fc2 [hidden, intermediate], whichever of ffn_up and ffn_down holds
 * which); mm.soft_emb_norm as the checkpoint holds it, w (the converter stores 1 + w, as the text
 * file's norms). Tensors it does not know are left visible to the schema check.
 */
export function mmprojCheckpoint(g: GGUFFile): SafetensorsFile {
  const tensors = new Map<string, SafetensorsTensorInfo>();
  const source = new Map<string, string>();
  const madeUp = new Map<string, () => Promise<Uint8Array>>();
  const hfShape = (name: string) => g.tensors.get(name)!.shape.slice().reverse();
  for (const [name, t] of g.tensors) {
    const ffn = /^v\.blk\.(\d+)\.(ffn_up|ffn_down)\.(weight|bias)$/.exec(name);
    let hf = mmprojName(name);
    if (ffn) {
      // fc1 widens (its weight [I, C], bias [I]), fc2 narrows back: told apart by the other's shape.
      const w = hfShape(`v.blk.${ffn[1]}.${ffn[2]}.weight`), other = g.tensors.get(`v.blk.${ffn[1]}.${ffn[2] === 'ffn_up' ? 'ffn_down' : 'ffn_up'}.weight`);
      const widens = w.length === 2 && (!other || w[0] > w[1] || (w[0] === w[1] && ffn[2] === 'ffn_up'));
      hf = `vision_tower.encoder.layers.${ffn[1]}.mlp.${widens ? 'fc1' : 'fc2'}.${ffn[3]}`;
    }
    if (hf === null) {
      tensors.set(name, { dtype: t.type, shape: hfShape(name) });
      continue;
    }
    if (name === 'mm.soft_emb_norm.weight') {
      tensors.set(hf, { dtype: 'F32', shape: hfShape(name) });
      madeUp.set(hf, () => lessOne(g, name));
      continue;
    }
    tensors.set(hf, { dtype: t.type, shape: hfShape(name) });
    source.set(hf, name);
  }
  return renamedCheckpoint(g, tensors, source, madeUp);
}
