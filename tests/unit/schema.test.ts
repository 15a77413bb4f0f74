import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parseConfig, type ModelConfig } from '../../src/models/config';
import { loadSafetensors, type SafetensorsFile } from '../../src/formats/safetensors';
import { checkpointSchema, validateCheckpoint } from '../../src/models/schema';

const goldens = join(dirname(fileURLToPath(import.meta.url)), '../../../shared/goldens');
const GOLDEN_NAMES = ['llama-gqa', 'mistral-window8', 'qwen3-qknorm-tied', 'deepseek-v2-moe', 'deepseek-v3-yarn-moe'];
type Json = Record<string, unknown>;
type Info = { dtype: string; shape: number[] };
type Files = { tensors: ReadonlyMap<string, Info>; name?: string }[];

const goldenConfig = (g: string): Json => JSON.parse(readFileSync(join(goldens, g, 'config.json'), 'utf8')) as Json;
const cfgOf = (g: string, extra: Json = {}): ModelConfig => parseConfig({ ...goldenConfig(g), ...extra });

async function goldenFile(g: string): Promise<SafetensorsFile> {
  return loadSafetensors(join(goldens, g, 'model.safetensors'));
}

/** A header-only checkpoint with exactly the tensors the schema names (per-expert layout). */
function fromSchema(cfg: ModelConfig, dtype = 'F32'): Map<string, Info> {
  const s = checkpointSchema(cfg);
  const m = new Map<string, Info>();
  for (const e of [...s.required, ...s.experts.flatMap((c) => c.perExpert)]) m.set(e.name, { dtype, shape: e.shape });
  return m;
}

/** What transformers 5 writes for a MoE layer: experts packed into gate_up_proj [E, 2I, H] and down_proj [E, H, I]. */
function packExperts(t: ReadonlyMap<string, Info>): Map<string, Info> {
  const out = new Map<string, Info>();
  const layers = new Map<string, { E: number; I: number; H: number }>();
  for (const [name, info] of t) {
    const m = /^(model\.layers\.\d+\.mlp\.experts)\.(\d+)\.(gate|up|down)_proj\.weight$/.exec(name);
    if (!m) {
      out.set(name, info);
      continue;
    }
    const l = layers.get(m[1]!) ?? { E: 0, I: 0, H: 0 };
    l.E = Math.max(l.E, Number(m[2]) + 1);
    if (m[3] === 'gate') [l.I, l.H] = info.shape as [number, number];
    layers.set(m[1]!, l);
  }
  for (const [prefix, { E, I, H }] of layers) {
    out.set(`${prefix}.gate_up_proj`, { dtype: 'F32', shape: [E, 2 * I, H] });
    out.set(`${prefix}.down_proj`, { dtype: 'F32', shape: [E, H, I] });
  }
  return out;
}

function problemsOf(cfg: ModelConfig, files: Files): string {
  try {
    validateCheckpoint(cfg, files);
  } catch (e) {
    return (e as Error).message;
  }
  throw new Error('expected validateCheckpoint to throw');
}

describe('checkpoint schema: the goldens', () => {
  it('validates every golden checkpoint and resolves every tensor in it', async () => {
    for (const g of GOLDEN_NAMES) {
      const f = await goldenFile(g);
      const resolved = validateCheckpoint(cfgOf(g), [f]);
      expect(resolved.size, g).toBe(f.tensors.size);
      for (const [name, info] of f.tensors) expect(resolved.get(name), `${g} ${name}`).toEqual({ file: 0, dtype: info.dtype, shape: info.shape });
      await f.close!();
    }
  });

  it('declares the shapes of each family (spot checks against the golden dims)', () => {
    const shape = (cfg: ModelConfig, name: string) => checkpointSchema(cfg).required.find((e) => e.name === name)?.shape;
    const llama = cfgOf('llama-gqa');
    expect(shape(llama, 'model.layers.0.self_attn.q_proj.weight')).toEqual([128, 128]);
    expect(shape(llama, 'model.layers.1.self_attn.k_proj.weight')).toEqual([32, 128]); // 2 kv heads × 16
    expect(shape(llama, 'model.layers.1.mlp.down_proj.weight')).toEqual([128, 256]);
    expect(shape(llama, 'lm_head.weight')).toEqual([256, 128]);
    const qwen3 = cfgOf('qwen3-qknorm-tied');
    expect(shape(qwen3, 'model.layers.0.self_attn.q_norm.weight')).toEqual([32]);
    expect(shape(qwen3, 'lm_head.weight')).toBeUndefined();
    expect(checkpointSchema(qwen3).optional).toEqual([{ name: 'lm_head.weight', shape: [256, 128] }]);
    const v2 = cfgOf('deepseek-v2-moe');
    expect(shape(v2, 'model.layers.0.self_attn.q_proj.weight')).toEqual([4 * 48, 128]);
    expect(shape(v2, 'model.layers.0.self_attn.kv_a_proj_with_mqa.weight')).toEqual([64 + 16, 128]);
    expect(shape(v2, 'model.layers.0.self_attn.kv_b_proj.weight')).toEqual([4 * (32 + 32), 64]);
    expect(shape(v2, 'model.layers.0.mlp.gate_proj.weight')).toEqual([256, 128]); // dense before first_k_dense_replace
    expect(shape(v2, 'model.layers.1.mlp.gate.weight')).toEqual([4, 128]);
    expect(shape(v2, 'model.layers.1.mlp.gate.e_score_correction_bias')).toBeUndefined();
    expect(shape(v2, 'model.layers.1.mlp.shared_experts.down_proj.weight')).toEqual([128, 64]);
    const v3 = cfgOf('deepseek-v3-yarn-moe');
    expect(shape(v3, 'model.layers.0.self_attn.q_proj.weight')).toBeUndefined();
    expect(shape(v3, 'model.layers.0.self_attn.q_a_proj.weight')).toEqual([48, 128]);
    expect(shape(v3, 'model.layers.0.self_attn.q_a_layernorm.weight')).toEqual([48]);
    expect(shape(v3, 'model.layers.0.self_attn.q_b_proj.weight')).toEqual([192, 48]);
    expect(shape(v3, 'model.layers.1.mlp.gate.e_score_correction_bias')).toEqual([8]);
    const experts = checkpointSchema(v3).experts;
    expect(experts.map((c) => c.layer)).toEqual([1]);
    expect(experts[0]!.perExpert).toHaveLength(8 * 3);
    expect(experts[0]!.perExpert[3]).toEqual({ name: 'model.layers.1.mlp.experts.1.gate_proj.weight', shape: [64, 128] });
    expect(experts[0]!.packed).toEqual([
      { name: 'model.layers.1.mlp.experts.gate_up_proj', shape: [8, 128, 128] },
      { name: 'model.layers.1.mlp.experts.down_proj', shape: [8, 128, 64] },
    ]);
  });

  it('accepts the experts packed as transformers 5 writes them, and checkpoints split over shards', async () => {
    for (const g of ['deepseek-v2-moe', 'deepseek-v3-yarn-moe']) {
      const f = await goldenFile(g);
      const packed = packExperts(f.tensors);
      expect(packed.size).toBeLessThan(f.tensors.size);
      const resolved = validateCheckpoint(cfgOf(g), [{ tensors: packed }]);
      expect(resolved.has('model.layers.1.mlp.experts.gate_up_proj')).toBe(true);
      expect(resolved.has('model.layers.1.mlp.experts.0.gate_proj.weight')).toBe(false);
      // Two shards: the resolved map says which file holds what.
      const names = [...f.tensors.keys()];
      const a = new Map(names.slice(0, 10).map((n) => [n, f.tensors.get(n)!]));
      const b = new Map(names.slice(10).map((n) => [n, f.tensors.get(n)!]));
      const r = validateCheckpoint(cfgOf(g), [{ tensors: a }, { tensors: b }]);
      expect(r.get(names[0]!)!.file).toBe(0);
      expect(r.get(names[names.length - 1]!)!.file).toBe(1);
      await f.close!();
    }
  });

  it('takes the biases, norms and tied heads each config asks for', () => {
    const names = (cfg: ModelConfig) => new Set(checkpointSchema(cfg).required.map((e) => e.name));
    const llamaBias = names(cfgOf('llama-gqa', { attention_bias: true, mlp_bias: true }));
    for (const n of ['q_proj.bias', 'k_proj.bias', 'v_proj.bias', 'o_proj.bias']) expect(llamaBias.has(`model.layers.0.self_attn.${n}`)).toBe(true);
    expect(llamaBias.has('model.layers.1.mlp.down_proj.bias')).toBe(true);
    const qwen2 = names(parseConfig({ ...goldenConfig('llama-gqa'), architectures: ['Qwen2ForCausalLM'] }));
    expect(qwen2.has('model.layers.0.self_attn.k_proj.bias')).toBe(true);
    expect(qwen2.has('model.layers.0.self_attn.o_proj.bias')).toBe(false);
    const v3bias = names(cfgOf('deepseek-v3-yarn-moe', { attention_bias: true }));
    expect(v3bias.has('model.layers.0.self_attn.q_a_proj.bias')).toBe(true);
    expect(v3bias.has('model.layers.0.self_attn.kv_a_proj_with_mqa.bias')).toBe(true);
    expect(v3bias.has('model.layers.0.self_attn.o_proj.bias')).toBe(true);
    expect(v3bias.has('model.layers.0.self_attn.q_b_proj.bias')).toBe(false);
    const v2bias = names(cfgOf('deepseek-v2-moe', { attention_bias: true, mlp_bias: true }));
    expect(v2bias.has('model.layers.0.self_attn.q_a_proj.bias')).toBe(false); // no q LoRA
    expect(v2bias.has('model.layers.1.mlp.shared_experts.up_proj.bias')).toBe(true);
    expect(v2bias.has('model.layers.0.mlp.up_proj.bias')).toBe(true);
    const noShared = names(cfgOf('deepseek-v3-yarn-moe', { n_shared_experts: 0 }));
    expect([...noShared].some((n) => n.includes('shared_experts'))).toBe(false);
  });
});

describe('checkpoint schema: broken checkpoints get one error naming every problem', () => {
  it('names missing, unexpected and wrongly shaped tensors with expected and actual shapes', async () => {
    const cfg = cfgOf('llama-gqa');
    const f = await goldenFile('llama-gqa');
    const t = new Map(f.tensors);
    t.delete('model.layers.1.self_attn.v_proj.weight');
    t.set('model.layers.0.self_attn.k_proj.weight', { dtype: 'F32', shape: [64, 128] });
    t.set('model.layers.0.self_attn.q_proj.bias', { dtype: 'F32', shape: [128] });
    const msg = problemsOf(cfg, [{ tensors: t }]);
    expect(msg).toMatch(/^validateCheckpoint: weights of LlamaForCausalLM: expected the checkpoint schema of its config \(21 tensors besides routed experts\), got 3 problems:/);
    expect(msg).toContain('\n  missing model.layers.1.self_attn.v_proj.weight [32, 128]');
    expect(msg).toContain('\n  wrong shape model.layers.0.self_attn.k_proj.weight: expected [32, 128], got [64, 128] (file 0)');
    expect(problemsOf(cfg, [{ tensors: t, name: 'shard-a.safetensors' }])).toContain('got [64, 128] (file 0: shard-a.safetensors)');
    expect(msg).toContain('\n  unexpected model.layers.0.self_attn.q_proj.bias [128] (file 0)');
    await f.close!();
  });

  it('names wrong dtypes and tensors present in two files', () => {
    const cfg = cfgOf('mistral-window8');
    const t = fromSchema(cfg, 'BF16');
    t.set('model.norm.weight', { dtype: 'I32', shape: [128] });
    const dup = new Map([['model.embed_tokens.weight', { dtype: 'BF16', shape: [256, 128] }]]);
    const msg = problemsOf(cfg, [{ tensors: t }, { tensors: dup }]);
    expect(msg).toContain('got 2 problems:');
    expect(msg).toContain('wrong dtype model.norm.weight: expected one of F32, F16, BF16, got I32 (file 0)');
    expect(msg).toContain('duplicate model.embed_tokens.weight: in file 0 and file 1');
  });

  it('checks a tied model\'s optional lm_head and ignores what transformers ignores', () => {
    const qwen3 = cfgOf('qwen3-qknorm-tied');
    const t = fromSchema(qwen3);
    t.set('lm_head.weight', { dtype: 'F32', shape: [256, 128] });
    t.set('model.layers.0.self_attn.rotary_emb.inv_freq', { dtype: 'F32', shape: [16] });
    const r = validateCheckpoint(qwen3, [{ tensors: t }]);
    expect(r.has('lm_head.weight')).toBe(true);
    expect(r.has('model.layers.0.self_attn.rotary_emb.inv_freq')).toBe(false);
    t.set('lm_head.weight', { dtype: 'F32', shape: [255, 128] });
    expect(problemsOf(qwen3, [{ tensors: t }])).toContain('wrong shape lm_head.weight: expected [256, 128], got [255, 128]');
    // An untied model must have it.
    const llama = cfgOf('llama-gqa');
    const l = fromSchema(llama);
    l.delete('lm_head.weight');
    expect(problemsOf(llama, [{ tensors: l }])).toContain('missing lm_head.weight [256, 128]');
    // DeepSeek V3's multi-token-prediction layer (index num_hidden_layers) is dropped; V2 has none to drop.
    const v3 = cfgOf('deepseek-v3-yarn-moe');
    const m = fromSchema(v3);
    m.set('model.layers.2.eh_proj.weight', { dtype: 'F32', shape: [128, 256] });
    m.set('model.layers.2.self_attn.q_a_proj.weight', { dtype: 'F32', shape: [48, 128] });
    expect(validateCheckpoint(v3, [{ tensors: m }]).size).toBe(m.size - 2);
    const v2 = cfgOf('deepseek-v2-moe');
    const n = fromSchema(v2);
    n.set('model.layers.2.eh_proj.weight', { dtype: 'F32', shape: [128, 256] });
    expect(problemsOf(v2, [{ tensors: n }])).toContain('unexpected model.layers.2.eh_proj.weight [128, 256]');
  });

  it('names missing or mixed routed experts, and incomplete layouts tensor by tensor', () => {
    const v3 = cfgOf('deepseek-v3-yarn-moe');
    const per = fromSchema(v3);
    const none = new Map([...per].filter(([k]) => !k.includes('.mlp.experts.')));
    expect(problemsOf(v3, [{ tensors: none }])).toContain(
      'missing routed experts of layer 1: expected model.layers.1.mlp.experts.{0..7}.{gate,up,down}_proj.weight, or packed model.layers.1.mlp.experts.gate_up_proj [8, 128, 128] and model.layers.1.mlp.experts.down_proj [8, 128, 64]',
    );
    const mixed = new Map(per);
    mixed.set('model.layers.1.mlp.experts.gate_up_proj', { dtype: 'F32', shape: [8, 128, 128] });
    const msg = problemsOf(v3, [{ tensors: mixed }]);
    expect(msg).toContain('mixed expert layouts in layer 1');
    expect(msg).toContain('got 1 problem:');
    const partial = new Map(per);
    partial.delete('model.layers.1.mlp.experts.5.up_proj.weight');
    expect(problemsOf(v3, [{ tensors: partial }])).toContain('missing model.layers.1.mlp.experts.5.up_proj.weight [64, 128]');
    const packed = packExperts(per);
    packed.set('model.layers.1.mlp.experts.down_proj', { dtype: 'F32', shape: [8, 64, 128] });
    expect(problemsOf(v3, [{ tensors: packed }])).toContain('wrong shape model.layers.1.mlp.experts.down_proj: expected [8, 128, 64], got [8, 64, 128]');
  });

  it('lists the first 20 problems and says how many more', () => {
    const cfg = cfgOf('deepseek-v3-yarn-moe');
    const msg = problemsOf(cfg, [{ tensors: new Map([['stray.weight', { dtype: 'F32', shape: [1] }]]) }]);
    const total = checkpointSchema(cfg).required.length + 1 /* experts */ + 1; /* stray */
    expect(msg).toContain(`got ${total} problems:`);
    expect(msg.split('\n').filter((l) => l.startsWith('  ') && !l.startsWith('  ...'))).toHaveLength(20);
    expect(msg).toContain(`\n  ... and ${total - 20} more`);
  });
});

describe('checkpoint schema: Gemma2 and gpt-oss (../shared/goldens-layers)', () => {
  const layers = join(dirname(fileURLToPath(import.meta.url)), '../../../shared/goldens-layers');
  const cfgOfLayer = (g: string, extra: Json = {}) => parseConfig({ ...(JSON.parse(readFileSync(join(layers, g, 'config.json'), 'utf8')) as Json), ...extra });

  it("accepts both goldens' checkpoints as they are (Gemma2's four norms, gpt-oss's sinks, router and packed experts with biases)", async () => {
    for (const g of ['gemma2-softcap-window', 'gptoss-sinks-window-moe']) {
      const file = await loadSafetensors(join(layers, g, 'model.safetensors'));
      expect(validateCheckpoint(cfgOfLayer(g), [file]).size).toBe(file.tensors.size);
    }
  });

  it('names a missing sink, a missing post-feedforward norm, and MXFP4 experts that are not MXFP4', async () => {
    const oss = await loadSafetensors(join(layers, 'gptoss-sinks-window-moe', 'model.safetensors'));
    const t = new Map(oss.tensors);
    t.delete('model.layers.1.self_attn.sinks');
    expect(() => validateCheckpoint(cfgOfLayer('gptoss-sinks-window-moe'), [{ tensors: t }])).toThrow('missing model.layers.1.self_attn.sinks [4]');
    const gem = await loadSafetensors(join(layers, 'gemma2-softcap-window', 'model.safetensors'));
    const u = new Map(gem.tensors);
    u.delete('model.layers.0.post_feedforward_layernorm.weight');
    expect(() => validateCheckpoint(cfgOfLayer('gemma2-softcap-window'), [{ tensors: u }])).toThrow('missing model.layers.0.post_feedforward_layernorm.weight [128]');
    // quant_method mxfp4: the experts as hf_mxfp4.ts presents them, [E, 2I, H] and [E, H, I] of MXFP4, and nothing else.
    const mx = cfgOfLayer('gptoss-sinks-window-moe', { quantization_config: { quant_method: 'mxfp4' } });
    const v = new Map(oss.tensors);
    for (const l of [0, 1]) {
      v.set(`model.layers.${l}.mlp.experts.gate_up_proj`, { dtype: 'MXFP4', shape: [4, 256, 128] } as never);
      v.set(`model.layers.${l}.mlp.experts.down_proj`, { dtype: 'MXFP4', shape: [4, 128, 128] } as never);
    }
    expect(validateCheckpoint(mx, [{ tensors: v }]).get('model.layers.1.mlp.experts.down_proj')?.dtype).toBe('MXFP4');
    v.set('model.layers.1.mlp.experts.down_proj', { dtype: 'F32', shape: [4, 128, 128] } as never);
    expect(() => validateCheckpoint(mx, [{ tensors: v }], ['F32', 'MXFP4'])).toThrow('wrong dtype model.layers.1.mlp.experts.down_proj: expected one of MXFP4, got F32');
  });
});
