// A GGUF file seen as the HF checkpoint it stands for (src/models/gguf_weights.ts): names, shapes,
// llama's q/k rows put back in HF's order, and a tensor of a type the engine does not compute with
// refused by the checkpoint check (before any GPU memory is taken), naming the tensor, its type and
// the supported ones.
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { loadGGUF, type GGUFFile } from '../../src/formats/gguf';
import { ggufCheckpoint, unpermuteRows } from '../../src/models/gguf_weights';
import { parseConfig } from '../../src/models/config';
import { validateCheckpoint, WEIGHT_DTYPES } from '../../src/models/schema';
import { QUANT_TYPES } from '../../src/core/quant';

const golden = join(dirname(fileURLToPath(import.meta.url)), '../../../shared/goldens-quant/gguf-llama-q4-k-m/model.gguf');

describe('GGUF weights as an HF checkpoint', () => {
  it('renames every tensor to transformers\' names with HF shapes, and validates against the config\'s schema', async () => {
    const g = await loadGGUF(golden);
    const cfg = parseConfig(g.config);
    const ck = ggufCheckpoint(g, cfg);
    expect(ck.tensors.get('model.layers.1.mlp.down_proj.weight')).toEqual({ dtype: 'Q6_K', shape: [256, 512] });
    expect(ck.tensors.get('model.embed_tokens.weight')!.shape).toEqual([512, 256]);
    const resolved = validateCheckpoint(cfg, [ck], [...WEIGHT_DTYPES, ...QUANT_TYPES]);
    expect(resolved.size).toBe(ck.tensors.size);
  });

  it("puts llama's attn_q / attn_k rows back in HF's order (the converter's permutation undone)", async () => {
    // HF row h·D + j·D/2 + i is GGUF row h·D + 2i + j.
    expect(Array.from(unpermuteRows(1, 8))).toEqual([0, 2, 4, 6, 1, 3, 5, 7]);
    const g = await loadGGUF(golden);
    const ck = ggufCheckpoint(g, parseConfig(g.config));
    const raw = await g.tensorBytes('blk.0.attn_k.weight');
    const hf = await ck.bytes('model.layers.0.self_attn.k_proj.weight');
    const rows = 128, rowBytes = raw.length / rows, order = unpermuteRows(2, 64);
    for (const r of [0, 1, 31, 32, 33, 64, 127]) {
      expect(Array.from(hf.subarray(r * rowBytes, (r + 1) * rowBytes))).toEqual(Array.from(raw.subarray(order[r] * rowBytes, (order[r] + 1) * rowBytes)));
    }
  });

  it('refuses a tensor of a type the engine does not compute with, naming the tensor, its type and the supported ones', async () => {
    const g = await loadGGUF(golden);
    const tensors = new Map(g.tensors);
    tensors.set('blk.1.ffn_up.weight', { ...g.tensors.get('blk.1.ffn_up.weight')!, type: 'IQ2_XXS' });
    const odd = { ...g, metadata: g.metadata, tensors, tensorBytes: g.tensorBytes.bind(g), name: g.name } as GGUFFile;
    const cfg = parseConfig(g.config);
    expect(() => validateCheckpoint(cfg, [ggufCheckpoint(odd, cfg)], [...WEIGHT_DTYPES, ...QUANT_TYPES]))
      .toThrow(/wrong dtype model\.layers\.1\.mlp\.up_proj\.weight: expected one of F32, F16, BF16, Q8_0, .*MXFP4, got IQ2_XXS/);
  });
});
