// The device benchmark's gpt-oss GGUF writer (bench/make_gguf_gptoss.ts, bench/gguf_gptoss.ts): the
// streamed file is writeGGUF's file byte for byte; it holds the tensors llama.cpp's gpt-oss loader
// creates (names, ne, types) and the keys it reads; webinfer reads it as gpt-oss with MXFP4 experts and
// its checkpoint check passes; the values have the standard deviations the writer says. The GPU step on
// the small file runs in tests/cases/gguf_arch.cases.ts.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadGGUF } from '../../src/formats/gguf';
import { writeGGUFHeader } from '../../src/formats/gguf_write';
import { ggufCheckpoint } from '../../src/models/gguf_weights';
import { parseConfig } from '../../src/models/config';
import { validateCheckpoint, WEIGHT_DTYPES } from '../../src/models/schema';
import { QUANT_TYPES } from '../../src/core/quant';
import { dequantizeRows } from '../../src/reference/quant';
import { ggufConfig } from '../../src/formats/gguf_config';
import { GPTOSS_SHAPES, gptOssGGUFBytes, gptOssMetadata, gptOssTensors } from '../../bench/gguf_gptoss';
import { writeGptOssGGUF } from '../../bench/make_gguf_gptoss';
import { ARCH_SHAPES, archMetadata, archTensors, MMPROJ_SHAPES, mmprojMetadata, mmprojTensors } from '../../bench/gguf_arch_random';
import { gemma3MmprojConfig } from '../../src/formats/gguf_mmproj';
import { mmprojCheckpoint } from '../../src/models/gguf_weights';

const tmp = mkdtempSync(join(tmpdir(), 'gptoss-gguf-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const std = (v: ArrayLike<number>) => {
  let s = 0, s2 = 0;
  for (let i = 0; i < v.length; i++) { s += v[i]!; s2 += v[i]! * v[i]!; }
  return Math.sqrt(s2 / v.length - (s / v.length) ** 2);
};

describe('make_gguf_gptoss', () => {
  it('streams the tiny file: writeGGUF\'s bytes; read back as gpt-oss with MXFP4 experts; the checkpoint check passes', async () => {
    const w = writeGptOssGGUF(tmp, 'tiny', 7);
    const bytes = new Uint8Array(readFileSync(w.path));
    expect(bytes.length).toBe(w.bytes);
    expect(bytes).toEqual(gptOssGGUFBytes(GPTOSS_SHAPES.tiny!, 7, 'gpt-oss-tiny random'));
    const g = await loadGGUF(w.path);
    const s = GPTOSS_SHAPES.tiny!;
    // llama.cpp's create_tensors for LLM_ARCH_OPENAI_MOE (ne fastest first), layer 1 as an example.
    const want: Record<string, [string, number[]]> = {
      'token_embd.weight': ['Q8_0', [128, 256]], 'output.weight': ['Q8_0', [128, 256]], 'output_norm.weight': ['F32', [128]],
      'blk.1.attn_norm.weight': ['F32', [128]], 'blk.1.post_attention_norm.weight': ['F32', [128]],
      'blk.1.attn_q.weight': ['Q8_0', [128, 128]], 'blk.1.attn_k.weight': ['Q8_0', [128, 64]], 'blk.1.attn_v.weight': ['Q8_0', [128, 64]],
      'blk.1.attn_output.weight': ['Q8_0', [128, 128]], 'blk.1.attn_q.bias': ['F32', [128]], 'blk.1.attn_k.bias': ['F32', [64]],
      'blk.1.attn_v.bias': ['F32', [64]], 'blk.1.attn_output.bias': ['F32', [128]], 'blk.1.attn_sinks.weight': ['F32', [4]],
      'blk.1.ffn_gate_inp.weight': ['F32', [128, 4]], 'blk.1.ffn_gate_inp.bias': ['F32', [4]],
      'blk.1.ffn_gate_exps.weight': ['MXFP4', [128, 128, 4]], 'blk.1.ffn_up_exps.weight': ['MXFP4', [128, 128, 4]],
      'blk.1.ffn_down_exps.weight': ['MXFP4', [128, 128, 4]], 'blk.1.ffn_gate_exps.bias': ['F32', [128, 4]],
      'blk.1.ffn_up_exps.bias': ['F32', [128, 4]], 'blk.1.ffn_down_exps.bias': ['F32', [128, 4]],
    };
    for (const [n, [type, shape]] of Object.entries(want)) expect([n, g.tensors.get(n)?.type, g.tensors.get(n)?.shape]).toEqual([n, type, shape]);
    expect(g.tensors.size).toBe(3 + 19 * s.layers);
    // The keys llama.cpp's loader requires for gpt-oss.
    for (const k of ['attention.layer_norm_rms_epsilon', 'expert_feed_forward_length', 'attention.sliding_window', 'expert_count', 'expert_used_count', 'attention.head_count'])
      expect([k, g.metadata.has(`gpt-oss.${k}`)]).toEqual([k, true]);
    const cfg = parseConfig(g.config);
    expect(cfg.architecture).toBe('GptOssForCausalLM');
    expect(cfg.moe?.gptOss?.mxfp4).toBe(true);
    expect(cfg.layers.map((l) => l.slidingWindow)).toEqual([8, null]);
    const ck = ggufCheckpoint(g, cfg);
    expect(ck.tensors.get('model.layers.0.mlp.experts.gate_up_proj')).toEqual({ dtype: 'MXFP4', shape: [4, 256, 128] });
    expect(ck.tensors.get('model.layers.0.mlp.experts.gate_up_proj_bias')).toEqual({ dtype: 'F32', shape: [4, 256] });
    validateCheckpoint(cfg, [ck], [...WEIGHT_DTYPES, ...QUANT_TYPES]);
    // Values: Q8_0 and MXFP4 about 0.02 and 0.023, F32 uniform 0.02, norms 1, everything finite.
    const q = dequantizeRows('Q8_0', await g.tensorBytes('blk.0.attn_q.weight'), 128, 128);
    const m = dequantizeRows('MXFP4', await g.tensorBytes('blk.0.ffn_down_exps.weight'), 512, 128);
    const b = new Float32Array((await g.tensorBytes('blk.0.ffn_gate_inp.weight')).slice().buffer);
    expect([...q, ...m, ...b].every(Number.isFinite)).toBe(true);
    expect(std(q)).toBeGreaterThan(0.018); expect(std(q)).toBeLessThan(0.022);
    expect(std(m)).toBeGreaterThan(0.020); expect(std(m)).toBeLessThan(0.026);
    expect(std(b)).toBeGreaterThan(0.017); expect(std(b)).toBeLessThan(0.023);
    expect([...new Float32Array((await g.tensorBytes('output_norm.weight')).slice().buffer)].every((x) => x === 1)).toBe(true);
    await g.close?.();
  });

  it('the 20b plan: gpt-oss-20b\'s tensors, 12.1 GB (MXFP4 experts, Q8_0 matrices), headed by writeGGUFHeader', () => {
    const s = GPTOSS_SHAPES['20b']!;
    const ts = gptOssTensors(s);
    const h = writeGGUFHeader({ metadata: gptOssMetadata(s, 'x'), tensors: ts.map(({ name, type, shape }) => ({ name, type, shape })) });
    const gib = (h.header.length + h.dataBytes) / 2 ** 30;
    expect(gib).toBeGreaterThan(11.1);
    expect(gib).toBeLessThan(11.4);
    const experts = ts.filter((t) => t.type === 'MXFP4').reduce((a, t) => a + t.shape.reduce((x, y) => x * y, 1), 0);
    expect(experts).toBe(24 * 32 * 3 * 2880 * 2880);
    expect(() => writeGptOssGGUF(tmp, '7b')).toThrow(/--shape: expected one of 20b, tiny, gemma3-4b, qwen3-30b-a3b, gemma3-tiny, qwen3moe-tiny, gemma3-4b-mmproj, gemma3-tiny-mmproj, got 7b/);
  });

  it("ggufConfig for gpt-oss: GptOssConfig's keys from llama.cpp's; experts of another type, or RoPE other than YaRN, refused by name", () => {
    const s = GPTOSS_SHAPES.tiny!;
    const meta = (edit: Record<string, unknown> = {}) => new Map<string, unknown>([...gptOssMetadata(s, 'x').map(([k, v]) => [k, (v as { value?: unknown })?.value ?? v] as [string, unknown]), ...Object.entries(edit)]);
    const tensors = (type = 'MXFP4') => new Map(gptOssTensors(s).map((t) => [t.name, { type: t.name.includes("_exps.weight") ? type : t.type, shape: [...t.shape] }]));
    const c = ggufConfig(meta(), tensors(), { name: 'f' }) as Record<string, unknown>;
    expect(c).toMatchObject({
      architectures: ['GptOssForCausalLM'], model_type: 'gpt_oss', hidden_size: 128, intermediate_size: 128, num_hidden_layers: 2,
      num_attention_heads: 4, num_key_value_heads: 2, head_dim: 32, num_local_experts: 4, num_experts_per_tok: 2, sliding_window: 8,
      layer_types: ['sliding_attention', 'full_attention'], attention_bias: true, rms_norm_eps: 1e-5, tie_word_embeddings: false, vocab_size: 256,
      rope_parameters: { rope_type: 'yarn', factor: 32, original_max_position_embeddings: 4096, beta_fast: 32, beta_slow: 1, truncate: false, rope_theta: 150000 },
      quantization_config: { quant_method: 'mxfp4' },
    });
    expect(() => ggufConfig(meta(), tensors('Q8_0'), { name: 'f' })).toThrow(/ggufConfig: f tensor 'blk.0.ffn_gate_exps.weight': expected MXFP4 experts \(as convert_hf_to_gguf.py writes gpt-oss\), got Q8_0/);
    expect(() => ggufConfig(meta({ 'gpt-oss.rope.scaling.type': 'linear' }), tensors(), { name: 'f' })).toThrow(/f metadata 'gpt-oss.rope.scaling.type': expected 'yarn' \(gpt-oss's RoPE\), got linear/);
    expect(() => ggufConfig(meta({ 'gpt-oss.attention.sliding_window': undefined }), tensors(), { name: 'f' })).toThrow(/f metadata 'gpt-oss.attention.sliding_window': expected a positive integer \(required\)/);
    const noScaling = meta();
    noScaling.delete('gpt-oss.rope.scaling.type');
    expect((ggufConfig(noScaling, tensors(), { name: 'f' }) as Record<string, unknown>).rope_parameters).toEqual({ rope_type: 'default', rope_theta: 150000 });
  });
});

describe('make_gguf: Gemma 3 and Qwen3-MoE shapes (bench/gguf_arch_random.ts)', () => {
  it('streams the tiny files; webinfer reads them as their architectures with Q4_K matrices (Q6_K output), the checkpoint check passes and the values stay finite', async () => {
    for (const [shape, arch] of [['gemma3-tiny', 'Gemma3ForCausalLM'], ['qwen3moe-tiny', 'Qwen3MoeForCausalLM']] as const) {
      const w = writeGptOssGGUF(tmp, shape, 3);
      const s = ARCH_SHAPES[shape]!;
      const g = await loadGGUF(w.path);
      expect(g.tensors.size).toBe(archTensors(s).length);
      expect(g.tensors.get('blk.0.attn_q.weight')).toMatchObject({ type: 'Q4_K', shape: [s.hidden, s.heads * s.headDim] });
      expect(g.tensors.get(arch === 'Gemma3ForCausalLM' ? 'token_embd.weight' : 'output.weight')).toMatchObject({ type: 'Q6_K', shape: [s.hidden, s.vocab] });
      if (s.experts) expect(g.tensors.get('blk.1.ffn_down_exps.weight')).toMatchObject({ type: 'Q4_K', shape: [s.ffn, s.hidden, s.experts] });
      const cfg = parseConfig(g.config);
      expect([shape, cfg.architecture]).toEqual([shape, arch]);
      validateCheckpoint(cfg, [ggufCheckpoint(g, cfg)], [...WEIGHT_DTYPES, ...QUANT_TYPES]);
      const q4 = dequantizeRows('Q4_K', await g.tensorBytes('blk.0.attn_q.weight'), s.heads * s.headDim, s.hidden);
      const q6 = dequantizeRows('Q6_K', await g.tensorBytes(arch === 'Gemma3ForCausalLM' ? 'token_embd.weight' : 'output.weight'), s.vocab, s.hidden);
      expect([...q4, ...q6].every(Number.isFinite)).toBe(true);
      expect(std(q4)).toBeGreaterThan(1e-3); expect(std(q4)).toBeLessThan(0.1);
      expect(std(q6)).toBeGreaterThan(1e-4); expect(std(q6)).toBeLessThan(0.1);
      await g.close?.();
    }
  });

  it("streams Gemma 3's vision pair (gemma3-tiny and its mmproj): the pair's config is Gemma3ForConditionalGeneration with the image tokens found in the text file's vocabulary, the checkpoint check passes over both files; the 4B mmproj is SigLIP-So400m's size", async () => {
    const text = await loadGGUF(writeGptOssGGUF(tmp, 'gemma3-tiny', 5).path);
    const mm = await loadGGUF(writeGptOssGGUF(tmp, 'gemma3-tiny-mmproj', 5).path);
    expect(mm.config).toEqual({ mmproj: 'gemma3' });
    expect(mm.tensors.get('v.blk.0.ffn_up.weight')).toMatchObject({ type: 'F16', shape: [64, 128] });
    const cfg = parseConfig(gemma3MmprojConfig(text, mm));
    expect(cfg.architecture).toBe('Gemma3ForConditionalGeneration');
    expect(cfg.siglip).toMatchObject({ hiddenSize: 64, intermediateSize: 128, numLayers: 2, patchSize: 14, imageSize: 112, tokensPerImage: 16, imageTokenId: 511, boiTokenId: 509, eoiTokenId: 510 });
    validateCheckpoint(cfg, [ggufCheckpoint(text, cfg), mmprojCheckpoint(mm)], [...WEIGHT_DTYPES, ...QUANT_TYPES]);
    await text.close?.();
    await mm.close?.();
    const s = MMPROJ_SHAPES['gemma3-4b']!;
    const h = writeGGUFHeader({ metadata: mmprojMetadata(s, 'x'), tensors: mmprojTensors(s).map(({ name, type, shape: ne }) => ({ name, type, shape: ne })) });
    const gb = (h.header.length + h.dataBytes) / 1e9;
    expect(gb).toBeGreaterThan(0.8); expect(gb).toBeLessThan(0.9);
  });

  it('the benchmark shapes: Gemma-3-4B about 2.4 GB, Qwen3-30B-A3B about 17 GB', () => {
    const gb = (shape: string) => {
      const s = ARCH_SHAPES[shape]!;
      const h = writeGGUFHeader({ metadata: archMetadata(s, 'x'), tensors: archTensors(s).map(({ name, type, shape: ne }) => ({ name, type, shape: ne })) });
      return (h.header.length + h.dataBytes) / 1e9;
    };
    expect(gb('gemma3-4b')).toBeGreaterThan(2.2); expect(gb('gemma3-4b')).toBeLessThan(2.8);
    expect(gb('qwen3-30b-a3b')).toBeGreaterThan(16); expect(gb('qwen3-30b-a3b')).toBeLessThan(18.5);
  });
});
