// gpt-oss's MXFP4 experts (src/formats/hf_mxfp4.ts) into ggml's MXFP4 blocks: blocks and scales are made
// here in HF's layout ([E, N, K/32, 16] codes, two a byte, even positions in the low nibble; E8M0 scales
// [E, N, K/32]), dequantized here by transformers' rule (FP4 table, ldexp by scale − 127, then the
// transpose to [E, K, N]), and compared exactly with the engine's reference decoder on the transcoded
// blocks: every code and every scale byte (0..254) appears; gate_up's interleaved rows come out as gate
// rows then up rows, as gpt_oss.ts lays out the float experts.
import { describe, expect, it } from 'vitest';
import { gateUpRowOf, mxfp4Scheme, mxfp4ToGgml } from '../../src/formats/hf_mxfp4';
import { gptOssDown, gptOssGateUp } from '../../src/models/gpt_oss';
import { dequantizeRows } from '../../src/reference/quant';
import { rng } from '../../src/core/random';
import type { CheckpointTensors } from '../../src/formats/quant_scheme';

/** transformers' FP4_VALUES (E2M1). */
const FP4 = [+0.0, +0.5, +1.0, +1.5, +2.0, +3.0, +4.0, +6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0];

function hfBlocks(rows: number, K: number, seed: number): { blocks: Uint8Array; scales: Uint8Array } {
  const r = rng(seed);
  const blocks = new Uint8Array(rows * (K / 32) * 16);
  for (let i = 0; i < blocks.length; i++) blocks[i] = (r() * 256) >>> 0;
  const scales = new Uint8Array(rows * (K / 32));
  // Every finite E8M0 byte (255 is NaN) across the test's blocks, then random ones around 2^0.
  for (let i = 0; i < scales.length; i++) scales[i] = i < 255 ? i : 112 + ((r() * 24) >>> 0);
  return { blocks, scales };
}

/** transformers' convert_moe_packed_tensors on [rows, K/32, 16] / [rows, K/32]: [rows, K], before its transpose. */
function hfDequant(blocks: Uint8Array, scales: Uint8Array, rows: number, K: number): Float64Array {
  const out = new Float64Array(rows * K);
  const G = K / 32;
  for (let row = 0; row < rows; row++) {
    for (let g = 0; g < G; g++) {
      const e = scales[row * G + g] - 127;
      for (let i = 0; i < 16; i++) {
        const b = blocks[(row * G + g) * 16 + i];
        out[row * K + g * 32 + 2 * i] = FP4[b & 0x0f] * 2 ** e;
        out[row * K + g * 32 + 2 * i + 1] = FP4[b >> 4] * 2 ** e;
      }
    }
  }
  return out;
}

/** The f32 values torch would hold (ldexp in f32: ±6·2^127 overflows to ±Inf, as ggml's f32 does). */
const asF32 = (v: Float64Array) => Float32Array.from(v);
/** Values compared with ===: transformers' code 8 is −0.0, ggml's +0 (kvalues_mxfp4[8] = 0), equal as numbers and in every product. */
const vals = (v: Float32Array | Float64Array) => Array.from(v, (x) => (x === 0 ? 0 : x));

function fakeCheckpoint(t: Record<string, { shape: number[]; bytes: Uint8Array }>): CheckpointTensors {
  const tensors = new Map(Object.entries(t).map(([n, v]) => [n, { dtype: 'U8', shape: v.shape, dataOffsets: [0, v.bytes.length] as [number, number] }]));
  return { tensors: tensors as never, name: 'test', bytes: async (n) => t[n].bytes };
}

describe('MXFP4 (gpt-oss) into ggml MXFP4 blocks', () => {
  it('rows transcode to the values transformers dequantizes, exactly (every code, every finite scale byte)', () => {
    const rows = 24, K = 352;   // 264 blocks: scale bytes 0..254 each once
    const { blocks, scales } = hfBlocks(rows, K, 1);
    const g = mxfp4ToGgml(blocks, scales, rows, K);
    expect(g.length).toBe(rows * (K / 32) * 17);
    const got = dequantizeRows('MXFP4', g, rows, K);
    const want = asF32(hfDequant(blocks, scales, rows, K));
    expect(vals(got)).toEqual(vals(want));
  });

  it('a row order moves whole rows', () => {
    const rows = 6, K = 64;
    const { blocks, scales } = hfBlocks(rows, K, 2);
    const order = [3, 0, 5, 1, 4, 2];
    const got = dequantizeRows('MXFP4', mxfp4ToGgml(blocks, scales, rows, K, (r) => order[r]), rows, K);
    const all = asF32(hfDequant(blocks, scales, rows, K));
    for (let r = 0; r < rows; r++) expect(vals(got.subarray(r * K, (r + 1) * K))).toEqual(vals(all.subarray(order[r] * K, (order[r] + 1) * K)));
  });

  it('gate_up_proj and down_proj as the scheme presents them equal the float layouts gpt_oss.ts builds from transformers\' dequantized experts', async () => {
    const E = 3, H = 64, I = 96;
    const gu = hfBlocks(E * 2 * I, H, 3), dn = hfBlocks(E * H, I, 4);
    const p = 'model.layers.0.mlp.experts.';
    const ckpt = fakeCheckpoint({
      [`${p}gate_up_proj_blocks`]: { shape: [E, 2 * I, H / 32, 16], bytes: gu.blocks },
      [`${p}gate_up_proj_scales`]: { shape: [E, 2 * I, H / 32], bytes: gu.scales },
      [`${p}down_proj_blocks`]: { shape: [E, H, I / 32, 16], bytes: dn.blocks },
      [`${p}down_proj_scales`]: { shape: [E, H, I / 32], bytes: dn.scales },
    });
    const scheme = mxfp4Scheme({ quant_method: 'mxfp4' });
    expect(scheme.modules(ckpt).sort()).toEqual([`${p}down_proj`, `${p}gate_up_proj`]);
    const pg = await scheme.present(`${p}gate_up_proj`, ckpt);
    const pd = await scheme.present(`${p}down_proj`, ckpt);
    expect([pg.type, pg.name, pg.shape, pg.parts]).toEqual(['MXFP4', `${p}gate_up_proj`, [E, 2 * I, H], [`${p}gate_up_proj_blocks`, `${p}gate_up_proj_scales`]]);
    expect([pd.name, pd.shape]).toEqual([`${p}down_proj`, [E, H, I]]);
    // transformers: [E, 2I, H] then transpose(1, 2) -> gate_up_proj [E, H, 2I]; [E, H, I] -> down_proj [E, I, H].
    const transpose = (v: Float32Array, A: number, B: number) => {
      const out = new Float32Array(v.length);
      for (let e = 0; e < E; e++) for (let a = 0; a < A; a++) for (let b = 0; b < B; b++) out[e * A * B + b * A + a] = v[e * A * B + a * B + b];
      return out;
    };
    const hfGateUp = transpose(asF32(hfDequant(gu.blocks, gu.scales, E * 2 * I, H)), 2 * I, H);
    const hfDown = transpose(asF32(hfDequant(dn.blocks, dn.scales, E * H, I)), H, I);
    expect(vals(dequantizeRows('MXFP4', await pg.bytes(), E * 2 * I, H))).toEqual(vals(gptOssGateUp(hfGateUp, E, H, I)));
    expect(vals(dequantizeRows('MXFP4', await pd.bytes(), E * H, I))).toEqual(vals(gptOssDown(hfDown, E, H, I)));
    expect(gateUpRowOf(E, I)(2 * I + I + 1)).toBe(2 * I + 3);
  });

  it('refuses misshapen pairs, naming the tensor', async () => {
    const p = 'model.layers.0.mlp.experts.';
    const scheme = mxfp4Scheme({});
    const ckpt = fakeCheckpoint({
      [`${p}down_proj_blocks`]: { shape: [2, 64, 2, 16], bytes: new Uint8Array(2 * 64 * 2 * 16) },
      [`${p}down_proj_scales`]: { shape: [2, 64, 3], bytes: new Uint8Array(2 * 64 * 3) },
      [`${p}gate_up_proj_blocks`]: { shape: [2, 64, 2, 8], bytes: new Uint8Array(2 * 64 * 2 * 8) },
      [`${p}gate_up_proj_scales`]: { shape: [2, 64, 2], bytes: new Uint8Array(2 * 64 * 2) },
    });
    await expect(scheme.present(`${p}down_proj`, ckpt)).rejects.toThrow(`loadModel: ${p}down_proj_scales: expected shape [2, 64, 2] (one scale a block of ${p}down_proj_blocks), got [2, 64, 3]`);
    await expect(scheme.present(`${p}gate_up_proj`, ckpt)).rejects.toThrow(`loadModel: ${p}gate_up_proj_blocks: expected blocks of 16 bytes (32 values) in the last dimension`);
    expect(() => mxfp4ToGgml(new Uint8Array(16), new Uint8Array(1), 1, 48)).toThrow('expected K a multiple of 32, got 48');
  });
});
