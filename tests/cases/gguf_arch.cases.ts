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
import { loadGGUF, loadSafetensors, encodeSafetensors, quantizeRows, reference, writeGGUF, type EncodableTensor, type SafetensorsFile } from '../../src/index';
import { assert, defineCases, goldenRunsHere, type TestCase } from './harness';
import { golden, dequantizedWant, checkAgainstDequantized, type GoldenModel } from './model.cases';
import { GPTOSS_SHAPES, gptOssGGUFBytes } from '../../bench/gguf_gptoss';

const f32Bytes = (v: Float32Array) => new Uint8Array(v.buffer, v.byteOffset, v.byteLength);

/** E2M1 magnitudes of codes 0..7 (8..15 are their negatives). */
const FP4 = [0, 0.5, 1, 1.5, 2, 3, 4, 6];

/**
 * Rows of K values as ggml MXFP4 blocks, and the values they stand for. Per block of 32 the smallest
 * E8M0 exponent e with max|v| ≤ 6·2^(e − 127), each value the nearest E2M1 code under 2^(e − 127) (ties
 * to the smaller magnitude); ggml's byte j holds code j (low nibble) and code j + 16 (high nibble).
 */
export function quantizeMxfp4Ggml(v: Float32Array, rows: number, K: number): { bytes: Uint8Array; values: Float32Array } {
  const G = K / 32;
  const bytes = new Uint8Array(rows * G * 17), values = new Float32Array(rows * K);
  for (let b = 0; b < rows * G; b++) {
    const o = b * 32;
    let amax = 0;
    for (let j = 0; j < 32; j++) amax = Math.max(amax, Math.abs(v[o + j]));
    const e = amax === 0 ? 127 : Math.min(254, Math.max(1, Math.ceil(Math.log2(amax / 6)) + 127));
    const s = 2 ** (e - 127);
    bytes[b * 17] = e;
    for (let j = 0; j < 32; j++) {
      const x = v[o + j] / s;
      let best = 0;
      for (let c = 1; c < 8; c++) if (Math.abs(Math.abs(x) - FP4[c]) < Math.abs(Math.abs(x) - FP4[best])) best = c;
      const code = best | (x < 0 && best ? 8 : 0);
      values[o + j] = (code & 8 ? -1 : 1) * FP4[best] * s;
      bytes[b * 17 + 1 + (j & 15)] |= code << (j < 16 ? 0 : 4);
    }
  }
  return { bytes, values };
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

export const ggufArchCases: TestCase[] = defineCases('gguf-arch', [gptOssCase]);
