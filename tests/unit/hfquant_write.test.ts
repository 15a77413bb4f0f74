// The hfquant benchmark's checkpoint writer (bench/hfquant_write.ts) writes each format as the Hub
// ships it: the same tensor names, dtypes and shapes as ../shared/goldens-quant's folders of that
// format (written here at their config's shape), the same quantization keys, sane values.
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadCheckpoint } from '../../src/formats/checkpoint';
import type { SafetensorsFile } from '../../src/formats/safetensors';
import { bf16BitsToF32, f16BitsToF32 } from '../../src/core/dtype';
import { hfQuantConfig, writeHfQuant, type HfqFormat } from '../../bench/hfquant_write';

const GOLDENS = join(__dirname, '../../../shared/goldens-quant');
const tmp = mkdtempSync(join(tmpdir(), 'hfq-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const header = (files: SafetensorsFile[]) => new Map(files.flatMap((f) => [...f.tensors].map(([k, v]) => [k, `${v.dtype} [${v.shape.join(', ')}]`] as const)));
const strip = (c: Record<string, unknown>) => { const { quantization: _q, quantization_config: _qc, torch_dtype: _t, ...rest } = c; return rest; };

describe.skipIf(!existsSync(GOLDENS))('hfquant_write: the formats as the goldens have them', () => {
  for (const [format, folder] of [['mlx', 'mlx-llama-4bit'], ['awq', 'awq-llama-4bit-g128'], ['gptq', 'gptq-llama-4bit-g128']] as [HfqFormat, string][]) {
    it(`${format}: every tensor of ${folder}, same dtype and shape; the same quantization keys`, async () => {
      const golden = await loadCheckpoint(join(GOLDENS, folder));
      const gc = golden.config as Record<string, unknown>;
      const dir = join(tmp, format);
      const w = writeHfQuant(dir, format, strip(gc));
      expect(w.shards).toBe(1);
      const mine = await loadCheckpoint(dir);
      expect(header(mine.weights as SafetensorsFile[])).toEqual(header(golden.weights as SafetensorsFile[]));
      const mc = mine.config as Record<string, unknown>;
      for (const k of ['quantization', 'quantization_config', 'torch_dtype']) expect([k, mc[k]]).toEqual([k, gc[k]]);
      // Values: MLX w = s·q + b, AWQ/GPTQ (q − z)·s, all finite and a few hundredths at most.
      const f = (mine.weights as SafetensorsFile[])[0]!;
      const b = async (n: string) => new Uint8Array(await f.bytes(n));
      if (format === 'mlx') {
        const s = new Uint16Array((await b('model.layers.0.mlp.down_proj.scales')).buffer), z = new Uint16Array((await b('model.layers.0.mlp.down_proj.biases')).buffer);
        for (let i = 0; i < s.length; i++) {
          const sc = bf16BitsToF32(s[i]!), bi = bf16BitsToF32(z[i]!);
          expect(Math.abs(sc)).toBeGreaterThan(1e-3);
          expect(Math.max(Math.abs(bi), Math.abs(bi + 15 * sc))).toBeLessThan(0.06);
        }
      } else {
        const s = new Uint16Array((await b('model.layers.0.mlp.down_proj.scales')).buffer);
        for (const v of s) expect(f16BitsToF32(v)).toBeGreaterThan(5e-4), expect(f16BitsToF32(v)).toBeLessThan(5e-3);
        const z = new Uint32Array((await b('model.layers.0.mlp.down_proj.qzeros')).buffer);
        if (format === 'gptq') for (const v of z) expect(v).toBe(0x77777777);
        else for (const v of z) for (let k = 0; k < 8; k++) expect([7, 8]).toContain((v >>> (4 * k)) & 15);
      }
      const norm = new Uint16Array((await b('model.norm.weight')).buffer);
      expect([...norm].every((v) => (format === 'mlx' ? bf16BitsToF32(v) : f16BitsToF32(v)) === 1)).toBe(true);
    });
  }

  it('fp8: each matrix F8_E4M3 with its F32 weight_scale_inv of ⌈out/128⌉ × ⌈in/128⌉ blocks, as fp8-deepseek-v3; the rest BF16; no NaN byte', async () => {
    const golden = await loadCheckpoint(join(GOLDENS, 'fp8-deepseek-v3'));
    const gc = golden.config as Record<string, unknown>;
    // The writer makes DeepSeek-V2's attention (no q LoRA, a greedy router): the golden's V3 config made so.
    const dir = join(tmp, 'fp8');
    const cfg = { ...strip(gc), architectures: ['DeepseekV2ForCausalLM'], model_type: 'deepseek_v2', q_lora_rank: null, topk_method: 'greedy', scoring_func: 'softmax' };
    writeHfQuant(dir, 'fp8', cfg);
    const mine = await loadCheckpoint(dir);
    expect((mine.config as Record<string, unknown>).quantization_config).toEqual(gc.quantization_config);
    const mh = header(mine.weights as SafetensorsFile[]), gh = header(golden.weights as SafetensorsFile[]);
    // Every tensor both have (all but the q LoRA's and V3's router bias), identical.
    const common = [...mh.keys()].filter((k) => gh.has(k));
    expect(common.length).toBeGreaterThan(50);
    for (const k of common) expect([k, mh.get(k)]).toEqual([k, gh.get(k)]);
    const f = (mine.weights as SafetensorsFile[])[0]!;
    for (const [k, v] of f.tensors) {
      if (v.dtype === 'F8_E4M3') {
        const s = f.tensors.get(k.replace(/\.weight$/, '.weight_scale_inv'))!;
        expect(s.dtype).toBe('F32');
        expect(s.shape).toEqual([Math.ceil(v.shape[0]! / 128), Math.ceil(v.shape[1]! / 128)]);
        const q = await f.bytes(k);
        expect(q.every((x) => (x & 0x7f) !== 0x7f)).toBe(true);
      } else if (!k.endsWith('weight_scale_inv')) {
        expect([k, v.dtype]).toEqual([k, 'BF16']);
      }
    }
    expect(f.tensors.get('model.layers.1.self_attn.q_proj.weight')?.shape).toEqual([2 * (64 + 32), 256]);
  });

  it('shards past the limit, with an index naming every tensor', async () => {
    const dir = join(tmp, 'sharded');
    const cfg = JSON.parse(readFileSync(join(GOLDENS, 'awq-llama-4bit-g128/config.json'), 'utf8'));
    const w = writeHfQuant(dir, 'awq', strip(cfg), { shardBytes: 300_000 });
    expect(w.shards).toBeGreaterThan(2);
    const ck = await loadCheckpoint(dir);
    expect((ck.weights as SafetensorsFile[]).length).toBe(w.shards);
    expect(hfQuantConfig('awq', {}).quantization_config).toEqual(cfg.quantization_config);
  });
});
