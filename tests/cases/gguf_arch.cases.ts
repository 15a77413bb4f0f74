// GGUF files of the newer architectures as llama.cpp's convert_hf_to_gguf.py lays them out, written
// from the goldens with writeGGUF: tensor names and ne orders, the metadata the model's config comes
// back from, and each file's quantized tensors. Beside each file, the same model as an f32 HF
// checkpoint whose tensors are the values the file stands for (SPEC §8: a GGUF model is the HF model on
// its dequantized weights); logits within 2e-3·max|logit| of it at every position, greedy identical.
//
// gpt-oss (GGUF `gpt-oss`, llama.cpp's LLM_ARCH_OPENAI_MOE): experts as ggml MXFP4 (type 39: per block
// of 32 one E8M0 byte e, then 16 bytes, value j the low nibble of byte j and value j + 16 its high
// nibble, each a code of E2M1 ×2 under 2^(e − 128)), gate_up split into ffn_gate_exps / ffn_up_exps
// (gate = the checkpoint's even columns) with their biases split the same way, sinks as attn_sinks.weight,
// the router F32 (ffn_gate_inp, which the converter never quantizes), the other matrices Q8_0 (as the
// published gpt-oss-20b file), YaRN keys, the window in attention.sliding_window and no layer types
// (llama.cpp alternates them, sliding first).
//
// qwen3moe, smollm3 and phi3 (../shared/goldens-arch): Qwen3-MoE's router (ffn_gate_inp, F32) and experts
// packed per layer (ffn_{gate,up,down}_exps [·, ·, E], gate/up Q4_0 and down Q8_0), its QK-norms, and its
// dense layer 0 as ffn_gate/up/down (llama.cpp wants experts in every layer; webinfer reads a layer
// without ffn_gate_inp as one of mlp_only_layers); SmolLM3 as LlamaModel writes it (q/k rows permuted
// for interleaved RoPE; no NoPE key: llama.cpp skips RoPE in every 4th layer, as the golden's
// no_rope_layers); Phi-3 with its fused attn_qkv and ffn_up (gate then up), partial rotary in
// rope.dimension_count, and LongRoPE as rope_factors_long/short.weight with
// rope.scaling.original_context_length and attn_factor. Their other matrices Q8_0.
import { loadGGUF, loadSafetensors, encodeSafetensors, quantizeRows, reference, writeGGUF, type EncodableTensor, type SafetensorsFile } from '../../src/index';
import { assert, defineCases, goldenRunsHere, type TestCase } from './harness';
import { golden, dequantizedWant, checkAgainstDequantized, type GoldenModel } from './model.cases';
import { quantizeMxfp4Hf } from './decoders.cases';
import { GPTOSS_SHAPES, gptOssGGUFBytes } from '../../bench/gguf_gptoss';

const f32Bytes = (v: Float32Array) => new Uint8Array(v.buffer, v.byteOffset, v.byteLength);

/**
 * Rows of K values as ggml MXFP4 blocks, and the values they stand for: decoders.cases.ts's quantizer
 * (transformers' layout: code 2i in the low nibble of byte i, 2i + 1 in the high, one E8M0 byte a block
 * apart) with its codes moved as convert_hf_to_gguf.py's repack_mxfp4 moves them: per block of 32 the
 * scale byte, then byte j = code j | code (j + 16) << 4.
 */
export function quantizeMxfp4Ggml(v: Float32Array, rows: number, K: number): { bytes: Uint8Array; values: Float32Array } {
  const q = quantizeMxfp4Hf(v, rows, K);
  const n = rows * (K / 32), bytes = new Uint8Array(n * 17);
  const code = (b: number, j: number) => (q.blocks[b * 16 + (j >> 1)] >> ((j & 1) * 4)) & 0xf;
  for (let b = 0; b < n; b++) {
    bytes[b * 17] = q.scales[b];
    for (let j = 0; j < 16; j++) bytes[b * 17 + 1 + j] = code(b, j) | (code(b, j + 16) << 4);
  }
  return { bytes, values: q.values };
}

interface Built { gguf: Uint8Array; dequantized: Record<string, EncodableTensor> }

/** The gpt-oss golden as llama.cpp's converter writes it (see the top of this file). */
export async function gptOssGGUF(file: SafetensorsFile, config: Record<string, unknown>): Promise<Built> {
  const c = config as Record<string, number>;
  const H = c.hidden_size, E = c.num_local_experts, I = c.intermediate_size, L = c.num_hidden_layers;
  const read = async (name: string) => new Float32Array((await file.bytes(name)).slice().buffer);
  const dequantized: Record<string, EncodableTensor> = {};
  const tensors: { name: string; type: string; shape: number[]; data: Uint8Array }[] = [];
  const put = (name: string, ne: number[], type: string, data: Uint8Array) => tensors.push({ name, type, shape: ne, data });
  const matrix = async (hf: string, gguf: string) => {
    const [rows, K] = file.tensors.get(hf)!.shape;
    const bytes = quantizeRows('Q8_0', await read(hf), rows, K);
    put(gguf, [K, rows], 'Q8_0', bytes);
    dequantized[hf] = { dtype: 'F32', shape: [rows, K], data: Float32Array.from(reference.dequantizeRows('Q8_0', bytes, rows, K)) };
  };
  /** An F32 tensor kept as it is (ne: the HF shape reversed). */
  const plain = async (hf: string, gguf: string) => {
    const v = await read(hf), shape = file.tensors.get(hf)!.shape;
    put(gguf, shape.slice().reverse(), 'F32', f32Bytes(v));
    dequantized[hf] = { dtype: 'F32', shape, data: v };
  };

  await matrix('model.embed_tokens.weight', 'token_embd.weight');
  for (let i = 0; i < L; i++) {
    const p = `model.layers.${i}.`, a = `${p}self_attn.`, blk = `blk.${i}.`;
    await plain(`${p}input_layernorm.weight`, `${blk}attn_norm.weight`);
    await plain(`${p}post_attention_layernorm.weight`, `${blk}post_attention_norm.weight`);
    for (const [w, g] of [['q', 'attn_q'], ['k', 'attn_k'], ['v', 'attn_v'], ['o', 'attn_output']]) {
      await matrix(`${a}${w}_proj.weight`, `${blk}${g}.weight`);
      await plain(`${a}${w}_proj.bias`, `${blk}${g}.bias`);
    }
    await plain(`${a}sinks`, `${blk}attn_sinks.weight`);
    await plain(`${p}mlp.router.weight`, `${blk}ffn_gate_inp.weight`);
    await plain(`${p}mlp.router.bias`, `${blk}ffn_gate_inp.bias`);
    // gate_up_proj [E, H, 2I] input-major, gate = even columns: as rows [E, I, H] of gate and of up.
    const gu = await read(`${p}mlp.experts.gate_up_proj`);
    const gate = new Float32Array(E * I * H), up = new Float32Array(E * I * H);
    for (let e = 0; e < E; e++) for (let k = 0; k < H; k++) for (let n = 0; n < I; n++) {
      gate[(e * I + n) * H + k] = gu[(e * H + k) * 2 * I + 2 * n];
      up[(e * I + n) * H + k] = gu[(e * H + k) * 2 * I + 2 * n + 1];
    }
    const qg = quantizeMxfp4Ggml(gate, E * I, H), qu = quantizeMxfp4Ggml(up, E * I, H);
    put(`${blk}ffn_gate_exps.weight`, [H, I, E], 'MXFP4', qg.bytes);
    put(`${blk}ffn_up_exps.weight`, [H, I, E], 'MXFP4', qu.bytes);
    const guBack = new Float32Array(E * H * 2 * I);
    for (let e = 0; e < E; e++) for (let k = 0; k < H; k++) for (let n = 0; n < I; n++) {
      guBack[(e * H + k) * 2 * I + 2 * n] = qg.values[(e * I + n) * H + k];
      guBack[(e * H + k) * 2 * I + 2 * n + 1] = qu.values[(e * I + n) * H + k];
    }
    dequantized[`${p}mlp.experts.gate_up_proj`] = { dtype: 'F32', shape: [E, H, 2 * I], data: guBack };
    // down_proj [E, I, H] input-major: as rows [E, H, I].
    const dn = await read(`${p}mlp.experts.down_proj`);
    const down = new Float32Array(E * H * I);
    for (let e = 0; e < E; e++) for (let n = 0; n < I; n++) for (let h = 0; h < H; h++) down[(e * H + h) * I + n] = dn[(e * I + n) * H + h];
    const qd = quantizeMxfp4Ggml(down, E * H, I);
    put(`${blk}ffn_down_exps.weight`, [I, H, E], 'MXFP4', qd.bytes);
    const dnBack = new Float32Array(E * I * H);
    for (let e = 0; e < E; e++) for (let n = 0; n < I; n++) for (let h = 0; h < H; h++) dnBack[(e * I + n) * H + h] = qd.values[(e * H + h) * I + n];
    dequantized[`${p}mlp.experts.down_proj`] = { dtype: 'F32', shape: [E, I, H], data: dnBack };
    // gate_up_proj_bias [E, 2I] interleaved: split as the weights.
    const gub = await read(`${p}mlp.experts.gate_up_proj_bias`);
    const gb = new Float32Array(E * I), ub = new Float32Array(E * I);
    for (let j = 0; j < E * I; j++) { gb[j] = gub[2 * j]; ub[j] = gub[2 * j + 1]; }
    put(`${blk}ffn_gate_exps.bias`, [I, E], 'F32', f32Bytes(gb));
    put(`${blk}ffn_up_exps.bias`, [I, E], 'F32', f32Bytes(ub));
    dequantized[`${p}mlp.experts.gate_up_proj_bias`] = { dtype: 'F32', shape: [E, 2 * I], data: gub };
    await plain(`${p}mlp.experts.down_proj_bias`, `${blk}ffn_down_exps.bias`);
  }
  await plain('model.norm.weight', 'output_norm.weight');
  await matrix('lm_head.weight', 'output.weight');

  const rp = config.rope_parameters as Record<string, number>;
  const arch = 'gpt-oss';
  const metadata: [string, unknown, 'f32'?][] = [
    ['general.architecture', arch],
    ['general.name', 'gpt-oss golden'],
    ['general.file_type', 38], // LLAMA_FTYPE_MOSTLY_MXFP4_MOE
    [`${arch}.block_count`, L],
    [`${arch}.context_length`, c.max_position_embeddings],
    [`${arch}.embedding_length`, H],
    [`${arch}.feed_forward_length`, I],
    [`${arch}.attention.head_count`, c.num_attention_heads],
    [`${arch}.attention.head_count_kv`, c.num_key_value_heads],
    [`${arch}.rope.freq_base`, rp.rope_theta, 'f32'],
    [`${arch}.attention.layer_norm_rms_epsilon`, c.rms_norm_eps, 'f32'],
    [`${arch}.expert_count`, E],
    [`${arch}.expert_used_count`, c.num_experts_per_tok],
    [`${arch}.attention.key_length`, c.head_dim],
    [`${arch}.attention.value_length`, c.head_dim],
    [`${arch}.attention.sliding_window`, c.sliding_window],
    [`${arch}.expert_feed_forward_length`, I],
    [`${arch}.rope.scaling.type`, 'yarn'],
    [`${arch}.rope.scaling.factor`, rp.factor, 'f32'],
    [`${arch}.rope.scaling.original_context_length`, rp.original_max_position_embeddings],
    [`${arch}.vocab_size`, c.vocab_size],
  ];
  return { gguf: writeGGUF({ metadata, tensors }), dequantized };
}

type MatType = 'Q8_0' | 'Q4_0';
interface Plan {
  arch: string;
  metadata: [string, unknown, 'f32'?][];
  /** HF name → GGUF name, type and, for q/k of LlamaModel's archs, the heads whose rows llama.cpp permutes. */
  matrices: [string, string, MatType, number?][];
  vectors: [string, string][];
  /** Per-expert HF tensors packed as ffn_{w}_exps: [layer, type of gate/up, type of down]. */
  experts: [number, MatType, MatType][];
  /** Tensors written as they are (Phi-3's LongRoPE factors). */
  extra?: { name: string; type: string; shape: number[]; data: Uint8Array }[];
}

/** A golden written as the GGUF a Plan describes, and the HF checkpoint on its dequantized values. */
export async function planGGUF(file: SafetensorsFile, config: Record<string, unknown>, plan: Plan): Promise<Built> {
  const read = async (name: string) => new Float32Array((await file.bytes(name)).slice().buffer);
  const dequantized: Record<string, EncodableTensor> = {};
  const tensors: { name: string; type: string; shape: number[]; data: Uint8Array }[] = [];
  const used = new Set<string>();
  for (const [hf, gguf, type, heads] of plan.matrices) {
    const [rows, K] = file.tensors.get(hf)!.shape;
    const q = quantizeRows(type, await read(hf), rows, K);
    dequantized[hf] = { dtype: 'F32', shape: [rows, K], data: Float32Array.from(reference.dequantizeRows(type, q, rows, K)) };
    let data = q;
    if (heads) {
      // convert_hf_to_gguf.py's LlamaModel.permute: HF row h·D + j·D/2 + i goes to h·D + 2i + j.
      const D = rows / heads, rb = q.length / rows;
      data = new Uint8Array(q.length);
      for (let h = 0; h < heads; h++) for (let j = 0; j < 2; j++) for (let i = 0; i < D / 2; i++) {
        const from = h * D + j * (D / 2) + i, to = h * D + 2 * i + j;
        data.set(q.subarray(from * rb, (from + 1) * rb), to * rb);
      }
    }
    tensors.push({ name: gguf, type, shape: [K, rows], data });
    used.add(hf);
  }
  for (const [hf, gguf] of plan.vectors) {
    const v = await read(hf), shape = file.tensors.get(hf)!.shape;
    tensors.push({ name: gguf, type: 'F32', shape: shape.slice().reverse(), data: f32Bytes(v) });
    dequantized[hf] = { dtype: 'F32', shape, data: v };
    used.add(hf);
  }
  const c = config as Record<string, number>;
  const E = c.num_local_experts ?? c.num_experts;
  for (const [layer, guType, downType] of plan.experts) {
    const p = `model.layers.${layer}.mlp.experts.`;
    for (const w of ['gate', 'up', 'down'] as const) {
      const [rows, K] = file.tensors.get(`${p}0.${w}_proj.weight`)!.shape;
      const type = w === 'down' ? downType : guType;
      const all = new Float32Array(E * rows * K);
      for (let e = 0; e < E; e++) { all.set(await read(`${p}${e}.${w}_proj.weight`), e * rows * K); used.add(`${p}${e}.${w}_proj.weight`); }
      const q = quantizeRows(type, all, E * rows, K);
      const back = Float32Array.from(reference.dequantizeRows(type, q, E * rows, K));
      tensors.push({ name: `blk.${layer}.ffn_${w}_exps.weight`, type, shape: [K, rows, E], data: q });
      for (let e = 0; e < E; e++) dequantized[`${p}${e}.${w}_proj.weight`] = { dtype: 'F32', shape: [rows, K], data: back.slice(e * rows * K, (e + 1) * rows * K) };
    }
  }
  // Every tensor of the golden is in the file (a plan that forgot one would test less than it says).
  const missed = [...file.tensors.keys()].filter((n) => !used.has(n));
  if (missed.length) throw new Error(`${plan.arch} GGUF plan: golden tensors not written: ${missed.join(', ')}`);
  tensors.unshift(...(plan.extra ?? []));
  return { gguf: writeGGUF({ metadata: [['general.architecture', plan.arch], ['general.name', `${plan.arch} golden`], ...plan.metadata], tensors }), dequantized };
}

/** llama.cpp's per-layer and global names shared by the three plans below. */
function commonPlan(c: Record<string, number & boolean>, arch: string, o: { qkv: 'split' | 'fused'; permute: boolean; qkNorm: boolean; dense: (i: number) => boolean }): Plan {
  const plan: Plan = { arch, metadata: [], matrices: [['model.embed_tokens.weight', 'token_embd.weight', 'Q8_0']], vectors: [['model.norm.weight', 'output_norm.weight']], experts: [] };
  if (!c.tie_word_embeddings) plan.matrices.push(['lm_head.weight', 'output.weight', 'Q8_0']);
  for (let i = 0; i < c.num_hidden_layers; i++) {
    const p = `model.layers.${i}.`, a = `${p}self_attn.`, b = `blk.${i}.`;
    plan.vectors.push([`${p}input_layernorm.weight`, `${b}attn_norm.weight`], [`${p}post_attention_layernorm.weight`, `${b}ffn_norm.weight`]);
    if (o.qkv === 'fused') plan.matrices.push([`${a}qkv_proj.weight`, `${b}attn_qkv.weight`, 'Q8_0']);
    else plan.matrices.push(
      [`${a}q_proj.weight`, `${b}attn_q.weight`, 'Q8_0', o.permute ? c.num_attention_heads : undefined],
      [`${a}k_proj.weight`, `${b}attn_k.weight`, 'Q8_0', o.permute ? c.num_key_value_heads : undefined],
      [`${a}v_proj.weight`, `${b}attn_v.weight`, 'Q8_0'],
    );
    plan.matrices.push([`${a}o_proj.weight`, `${b}attn_output.weight`, 'Q8_0']);
    if (o.qkNorm) plan.vectors.push([`${a}q_norm.weight`, `${b}attn_q_norm.weight`], [`${a}k_norm.weight`, `${b}attn_k_norm.weight`]);
    if (!o.dense(i)) {
      plan.vectors.push([`${p}mlp.gate.weight`, `${b}ffn_gate_inp.weight`]);
      plan.experts.push([i, 'Q4_0', 'Q8_0']);
    } else if (o.qkv === 'fused') {
      plan.matrices.push([`${p}mlp.gate_up_proj.weight`, `${b}ffn_up.weight`, 'Q8_0'], [`${p}mlp.down_proj.weight`, `${b}ffn_down.weight`, 'Q8_0']);
    } else {
      for (const w of ['gate', 'up', 'down']) plan.matrices.push([`${p}mlp.${w}_proj.weight`, `${b}ffn_${w}.weight`, 'Q8_0']);
    }
  }
  const rp = (c as unknown as { rope_parameters: Record<string, number> }).rope_parameters;
  plan.metadata.push(
    [`${arch}.block_count`, c.num_hidden_layers], [`${arch}.context_length`, c.max_position_embeddings],
    [`${arch}.embedding_length`, c.hidden_size], [`${arch}.feed_forward_length`, c.intermediate_size],
    [`${arch}.attention.head_count`, c.num_attention_heads], [`${arch}.attention.head_count_kv`, c.num_key_value_heads],
    [`${arch}.rope.freq_base`, rp.rope_theta, 'f32'], [`${arch}.attention.layer_norm_rms_epsilon`, c.rms_norm_eps, 'f32'],
    [`${arch}.vocab_size`, c.vocab_size],
  );
  // The special tokens as the converter's vocabulary writes them.
  if (typeof c.bos_token_id === 'number') plan.metadata.push(['tokenizer.ggml.bos_token_id', c.bos_token_id]);
  if (typeof c.eos_token_id === 'number') plan.metadata.push(['tokenizer.ggml.eos_token_id', c.eos_token_id]);
  return plan;
}

export const ARCH_PLANS: Record<string, { folder: string; hfClass: string; what: string; plan: (c: Record<string, number & boolean>) => Plan }> = {
  qwen3moe: {
    folder: 'qwen3-moe', hfClass: 'Qwen3MoeForCausalLM', what: 'router and packed experts (gate/up Q4_0, down Q8_0), QK-norms, a dense layer 0',
    plan: (c) => {
      const only = (c as unknown as { mlp_only_layers: number[] }).mlp_only_layers;
      const plan = commonPlan(c, 'qwen3moe', { qkv: 'split', permute: false, qkNorm: true, dense: (i) => only.includes(i) });
      plan.metadata.push(
        ['qwen3moe.attention.key_length', c.head_dim], ['qwen3moe.attention.value_length', c.head_dim],
        ['qwen3moe.expert_count', c.num_local_experts], ['qwen3moe.expert_used_count', c.num_experts_per_tok],
        ['qwen3moe.expert_feed_forward_length', c.moe_intermediate_size],
      );
      return plan;
    },
  },
  smollm3: {
    folder: 'smollm3-nope', hfClass: 'SmolLM3ForCausalLM', what: "q/k rows permuted as LlamaModel writes them, llama.cpp's NoPE every 4th layer",
    plan: (c) => {
      const plan = commonPlan(c, 'smollm3', { qkv: 'split', permute: true, qkNorm: false, dense: () => true });
      plan.metadata.push(['smollm3.rope.dimension_count', c.hidden_size / c.num_attention_heads]);
      return plan;
    },
  },
  phi3: {
    folder: 'phi3-longrope', hfClass: 'Phi3ForCausalLM', what: 'fused attn_qkv and ffn_up, partial rotary, LongRoPE factors as tensors',
    plan: (c) => {
      const plan = commonPlan(c, 'phi3', { qkv: 'fused', permute: false, qkNorm: false, dense: () => true });
      const rp = (c as unknown as { rope_parameters: Record<string, number> }).rope_parameters;
      const orig = rp.original_max_position_embeddings, scale = c.max_position_embeddings / orig;
      plan.metadata.push(
        ['phi3.rope.dimension_count', Math.floor(rp.partial_rotary_factor * c.hidden_size) / c.num_attention_heads],
        ['phi3.rope.scaling.original_context_length', orig],
        ['phi3.rope.scaling.attn_factor', Math.sqrt(1 + Math.log(scale) / Math.log(orig)), 'f32'],
      );
      plan.extra = phi3Factors(c);
      return plan;
    },
  },
};

/** Phi-3's LongRoPE factors as the two F32 tensors convert_hf_to_gguf.py writes (they are config, not weights). */
function phi3Factors(c: Record<string, number & boolean>): { name: string; type: string; shape: number[]; data: Uint8Array }[] {
  const rp = (c as unknown as { rope_parameters: { long_factor: number[]; short_factor: number[] } }).rope_parameters;
  return (['long', 'short'] as const).map((k) => {
    const v = Float32Array.from(k === 'long' ? rp.long_factor : rp.short_factor);
    return { name: `rope_factors_${k}.weight`, type: 'F32', shape: [v.length], data: f32Bytes(v) };
  });
}

/** The golden's layer_types must be llama.cpp's pattern (sliding first, alternating) for the file to stand for it. */
function checkPattern(g: GoldenModel): void {
  const types = g.config.layer_types as string[];
  types.forEach((t, i) => assert(t === (i % 2 === 0 ? 'sliding_attention' : 'full_attention'), `${g.name}: layer ${i} is ${t}: the GGUF form assumes llama.cpp's alternating pattern`));
}

const gptOssCase: TestCase = {
  name: 'gpt-oss GGUF (llama.cpp names, MXFP4 experts of ggml type 39, split gate/up and their biases, sinks, Q8_0 matrices, YaRN and window keys): its config from the metadata; logits within 2e-3·max|logit| of the same model on the dequantized values, greedy identical; experts kept as MXFP4; the benchmark writer\'s random file of that shape runs steps',
  async run(ctx) {
    if (!goldenRunsHere(ctx, 'gpt-oss GGUF')) return;
    const g = await golden(ctx, 'gptoss-sinks-window-moe', 'goldens-layers');
    checkPattern(g);
    const { gguf, dequantized } = await gptOssGGUF(await loadSafetensors(g.weights), g.config);
    const want = await dequantizedWant(ctx, { ...g, weights: encodeSafetensors(dequantized) });
    const model = await ctx.engine.loadModel({ weights: await loadGGUF(gguf) });
    const goldenBytes = model.weightBytes;
    try {
      assert(model.architecture === 'GptOssForCausalLM', `gpt-oss GGUF: architecture ${model.architecture}`);
      // Experts as MXFP4 (17 bytes a block of 32), the other matrices Q8_0 (34 bytes a block of 32).
      const c = g.config as Record<string, number>;
      const experts = c.num_hidden_layers * c.num_local_experts * 3 * c.hidden_size * c.intermediate_size;
      assert(model.weightBytes < want.weightBytes / 3, `gpt-oss GGUF: ${model.weightBytes} bytes of weights, f32 ${want.weightBytes}: expected blocks kept (experts ${experts} values)`);
      const worst = await checkAgainstDequantized(model, g, want, 'gpt-oss GGUF');
      ctx.note(`gpt-oss GGUF: worst logit error ${worst.toExponential(2)} of max|logit| against the dequantized model; greedy identical; ${model.weightBytes} bytes of weights (f32 ${want.weightBytes})`);
    } finally {
      model.destroy();
    }
    // The device benchmark's random gpt-oss file (bench/gguf_gptoss.ts) at the golden's shape: it loads
    // (its own config, tokenizer and MXFP4 experts) and runs prefill and decode steps to finite logits.
    const rnd = await ctx.engine.loadModel({ weights: await loadGGUF(gptOssGGUFBytes(GPTOSS_SHAPES.tiny!, 3)) });
    try {
      assert(rnd.architecture === 'GptOssForCausalLM', `random gpt-oss GGUF: architecture ${rnd.architecture}`);
      assert(rnd.weightBytes === goldenBytes, `random gpt-oss GGUF: ${rnd.weightBytes} bytes of weights, expected the golden's GGUF's ${goldenBytes} (same shape and types)`);
      const logits = await rnd.logits([1, 5, 9, 200]);
      assert(logits.length === 4 * 256 && logits.every(Number.isFinite), 'random gpt-oss GGUF: expected 4 × 256 finite logits');
      const out = await rnd.generate([[1, 5, 9]], { maxNewTokens: 4, stopTokens: [] });
      assert(out[0]!.length === 4, `random gpt-oss GGUF: generated ${out[0]!.length} tokens, expected 4`);
      ctx.note(`random gpt-oss GGUF (the benchmark writer's tiny shape): greedy ${out[0]!.join(' ')}`);
    } finally {
      rnd.destroy();
    }
  },
};

const archCases: TestCase[] = Object.entries(ARCH_PLANS).map(([arch, a]) => ({
  name: `${arch} GGUF (${a.what}; the ${a.folder} golden in llama.cpp's names and metadata): its config from the metadata; logits within 2e-3·max|logit| of the same model on the dequantized values, greedy identical`,
  async run(ctx) {
    if (!goldenRunsHere(ctx, `${arch} GGUF`)) return;
    const g = await golden(ctx, a.folder, 'goldens-arch');
    const { gguf, dequantized } = await planGGUF(await loadSafetensors(g.weights), g.config, a.plan(g.config as Record<string, number & boolean>));
    const want = await dequantizedWant(ctx, { ...g, weights: encodeSafetensors(dequantized) });
    const model = await ctx.engine.loadModel({ weights: await loadGGUF(gguf) });
    try {
      assert(model.architecture === a.hfClass, `${arch} GGUF: architecture ${model.architecture}, expected ${a.hfClass}`);
      assert(model.weightBytes < want.weightBytes / 3, `${arch} GGUF: ${model.weightBytes} bytes of weights, f32 ${want.weightBytes}: expected the blocks kept`);
      const worst = await checkAgainstDequantized(model, g, want, `${arch} GGUF`);
      ctx.note(`${arch} GGUF: worst logit error ${worst.toExponential(2)} of max|logit| against the dequantized model; greedy identical; ${model.weightBytes} bytes of weights (f32 ${want.weightBytes})`);
    } finally {
      model.destroy();
    }
  },
}));

export const ggufArchCases: TestCase[] = defineCases('gguf-arch', [gptOssCase, ...archCases]);
