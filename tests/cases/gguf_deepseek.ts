// A DeepSeek (`deepseek2`) GGUF written from an HF checkpoint, as llama.cpp's convert_hf_to_gguf.py and
// llama-quantize lay one out: tensor names and ne orders, the experts packed per layer
// (ffn_{gate,up,down}_exps [·, ·, E]), MLA's up-projection split into attn_k_b (W_UK transposed) and
// attn_v_b (the layout since mid-2025) or kept whole as attn_kv_b (older files, with the older
// key_length/value_length metadata), and the metadata the model's config comes back from. Beside the
// file: the same model as an f32 HF checkpoint whose matrices are the dequantized values, the
// reference the quantized model must match (SPEC §8: a GGUF model is the HF model on its dequantized
// weights).
import { QUANT_FORMATS, quantizeRows, reference, writeGGUF, type EncodableTensor, type QuantizableType, type SafetensorsFile } from '../../src/index';

export interface DeepseekGGUF {
  gguf: Uint8Array;
  /** The HF checkpoint on the dequantized values (F32). */
  dequantized: Record<string, EncodableTensor>;
}

/** Types of the file's matrices by role (rows must be whole blocks of each). */
export interface DeepseekGGUFTypes {
  attention: QuantizableType;
  expertsGateUp: QuantizableType;
  expertsDown: QuantizableType;
  dense: QuantizableType;
  /** attn_k_b / attn_v_b, or attn_kv_b. */
  kvB: QuantizableType;
  embedding: QuantizableType;
  output: QuantizableType;
}

const f32Bytes = (v: Float32Array) => new Uint8Array(v.buffer, v.byteOffset, v.byteLength);

export async function deepseekGGUF(file: SafetensorsFile, config: Record<string, unknown>, types: DeepseekGGUFTypes,
                                   o: { splitKvB: boolean }): Promise<DeepseekGGUF> {
  const c = config as Record<string, number & string & boolean & null>;
  const H = c.hidden_size, N = c.num_attention_heads, P = c.qk_nope_head_dim, R = c.qk_rope_head_dim, V = c.v_head_dim, L = c.kv_lora_rank;
  const E = c.n_routed_experts, I = c.moe_intermediate_size;
  const read = async (name: string) => {
    const b = await file.bytes(name);
    return new Float32Array(b.slice().buffer);
  };
  const dequantized: Record<string, EncodableTensor> = {};
  const tensors: { name: string; type: string; shape: number[]; data: Uint8Array }[] = [];
  /** Rows [rows, K] quantized to `type`: the file's bytes and the dequantized values. */
  const quant = (type: QuantizableType, v: Float32Array, rows: number, K: number) => {
    const bytes = quantizeRows(type, v, rows, K);
    return { bytes, values: Float32Array.from(reference.dequantizeRows(type, bytes, rows, K)) };
  };
  const put = (gguf: string, ne: number[], type: string, data: Uint8Array) => tensors.push({ name: gguf, type, shape: ne, data });
  /** A 2-D HF matrix [rows, K] as GGUF tensor `gguf` of `type`; its dequantized values under `hf`. */
  const matrix = async (hf: string, gguf: string, type: QuantizableType) => {
    const info = file.tensors.get(hf)!;
    const [rows, K] = info.shape;
    const q = quant(type, await read(hf), rows, K);
    put(gguf, [K, rows], type, q.bytes);
    dequantized[hf] = { dtype: 'F32', shape: [rows, K], data: q.values };
  };
  const vector = async (hf: string, gguf: string) => {
    const v = await read(hf);
    put(gguf, [v.length], 'F32', f32Bytes(v));
    dequantized[hf] = { dtype: 'F32', shape: [v.length], data: v };
  };

  await matrix('model.embed_tokens.weight', 'token_embd.weight', types.embedding);
  for (let i = 0; i < c.num_hidden_layers; i++) {
    const p = `model.layers.${i}.`, a = `${p}self_attn.`, blk = `blk.${i}.`;
    await vector(`${p}input_layernorm.weight`, `${blk}attn_norm.weight`);
    await vector(`${p}post_attention_layernorm.weight`, `${blk}ffn_norm.weight`);
    await matrix(`${a}q_proj.weight`, `${blk}attn_q.weight`, types.attention);
    await matrix(`${a}kv_a_proj_with_mqa.weight`, `${blk}attn_kv_a_mqa.weight`, types.attention);
    await vector(`${a}kv_a_layernorm.weight`, `${blk}attn_kv_a_norm.weight`);
    await matrix(`${a}o_proj.weight`, `${blk}attn_output.weight`, types.attention);
    if (o.splitKvB) {
      // kv_b [N(P+V), L] → attn_k_b [N, L, P] (W_UK transposed per head) and attn_v_b [N, V, L].
      const kv = await read(`${a}kv_b_proj.weight`);
      const kb = new Float32Array(N * L * P), vb = new Float32Array(N * V * L);
      for (let h = 0; h < N; h++) {
        for (let j = 0; j < P; j++) for (let l = 0; l < L; l++) kb[(h * L + l) * P + j] = kv[(h * (P + V) + j) * L + l];
        vb.set(kv.subarray((h * (P + V) + P) * L, (h + 1) * (P + V) * L), h * V * L);
      }
      const qk = quant(types.kvB, kb, N * L, P), qv = quant(types.kvB, vb, N * V, L);
      put(`${blk}attn_k_b.weight`, [P, L, N], types.kvB, qk.bytes);
      put(`${blk}attn_v_b.weight`, [L, V, N], types.kvB, qv.bytes);
      const back = new Float32Array(N * (P + V) * L);
      for (let h = 0; h < N; h++) {
        for (let j = 0; j < P; j++) for (let l = 0; l < L; l++) back[(h * (P + V) + j) * L + l] = qk.values[(h * L + l) * P + j];
        back.set(qv.values.subarray(h * V * L, (h + 1) * V * L), (h * (P + V) + P) * L);
      }
      dequantized[`${a}kv_b_proj.weight`] = { dtype: 'F32', shape: [N * (P + V), L], data: back };
    } else {
      await matrix(`${a}kv_b_proj.weight`, `${blk}attn_kv_b.weight`, types.kvB);
    }
    if (i < c.first_k_dense_replace) {
      for (const w of ['gate', 'up', 'down']) await matrix(`${p}mlp.${w}_proj.weight`, `${blk}ffn_${w}.weight`, types.dense);
      continue;
    }
    const router = await read(`${p}mlp.gate.weight`);
    put(`${blk}ffn_gate_inp.weight`, [H, E], 'F32', f32Bytes(router));
    dequantized[`${p}mlp.gate.weight`] = { dtype: 'F32', shape: [E, H], data: router };
    for (const w of ['gate', 'up', 'down']) await matrix(`${p}mlp.shared_experts.${w}_proj.weight`, `${blk}ffn_${w}_shexp.weight`, types.dense);
    for (const w of ['gate', 'up', 'down'] as const) {
      const [rows, K] = w === 'down' ? [H, I] : [I, H];
      const type = w === 'down' ? types.expertsDown : types.expertsGateUp;
      const all = new Float32Array(E * rows * K);
      for (let e = 0; e < E; e++) all.set(await read(`${p}mlp.experts.${e}.${w}_proj.weight`), e * rows * K);
      const q = quant(type, all, E * rows, K);
      put(`${blk}ffn_${w}_exps.weight`, [K, rows, E], type, q.bytes);
      for (let e = 0; e < E; e++) {
        dequantized[`${p}mlp.experts.${e}.${w}_proj.weight`] = { dtype: 'F32', shape: [rows, K], data: q.values.slice(e * rows * K, (e + 1) * rows * K) };
      }
    }
  }
  await vector('model.norm.weight', 'output_norm.weight');
  if (!c.tie_word_embeddings) await matrix('lm_head.weight', 'output.weight', types.output);

  const rope = (c.rope_parameters as unknown as { rope_theta?: number } | undefined)?.rope_theta ?? c.rope_theta ?? 10000;
  const arch = 'deepseek2';
  const metadata: [string, unknown, ('f32' | 'bool')?][] = [
    ['general.architecture', arch],
    ['general.name', 'deepseek golden'],
    [`${arch}.context_length`, c.max_position_embeddings],
    [`${arch}.embedding_length`, H],
    [`${arch}.block_count`, c.num_hidden_layers],
    [`${arch}.feed_forward_length`, c.intermediate_size],
    [`${arch}.attention.head_count`, N],
    [`${arch}.attention.head_count_kv`, o.splitKvB ? 1 : N],
    [`${arch}.rope.freq_base`, rope, 'f32'],
    [`${arch}.attention.layer_norm_rms_epsilon`, c.rms_norm_eps, 'f32'],
    [`${arch}.attention.kv_lora_rank`, L],
    [`${arch}.rope.dimension_count`, R],
    [`${arch}.leading_dense_block_count`, c.first_k_dense_replace],
    [`${arch}.expert_count`, E],
    [`${arch}.expert_used_count`, c.num_experts_per_tok],
    [`${arch}.expert_shared_count`, c.n_shared_experts],
    [`${arch}.expert_feed_forward_length`, I],
    [`${arch}.expert_weights_scale`, c.routed_scaling_factor, 'f32'],
    [`${arch}.expert_weights_norm`, !!c.norm_topk_prob, 'bool'],
    [`${arch}.expert_gating_func`, 1],
    [`${arch}.vocab_size`, c.vocab_size],
    // The MLA layout (split k_b/v_b) stores the attention as MQA over the latent.
    ...(o.splitKvB
      ? [[`${arch}.attention.key_length`, L + R], [`${arch}.attention.value_length`, L],
         [`${arch}.attention.key_length_mla`, P + R], [`${arch}.attention.value_length_mla`, V]] as [string, number][]
      : [[`${arch}.attention.key_length`, P + R], [`${arch}.attention.value_length`, V]] as [string, number][]),
  ];
  for (const t of tensors) {
    const blockElems = t.type === 'F32' ? 1 : QUANT_FORMATS[t.type as QuantizableType].blockElems;
    if (t.shape[0] % blockElems) throw new Error(`deepseekGGUF: ${t.name}: rows of ${t.shape[0]} are not whole ${t.type} blocks`);
  }
  return { gguf: writeGGUF({ metadata, tensors }), dequantized };
}
