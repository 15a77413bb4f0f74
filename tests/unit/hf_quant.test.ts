// The Hub's quantized safetensors formats into group types (src/formats/hf_quant.ts). Each format's
// tensors are made here in the format's own layout from random integers and scales, written out
// independently of the reader (bit by bit, AWQ's nibble order spelled out, GPTQ's zero − 1); the
// transcoded blocks, dequantized by the host reference (dequantizeRows), must equal the format's formula
// evaluated here on the integers (MLX s·q + b, the others (q − z)·s). Then the goldens' folders, checked
// the same way on one module each and against the model schema, and every refusal of a malformed or
// unsupported checkpoint.
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { hfQuantCheckpoint, type PermutedSafetensorsFile } from '../../src/formats/hf_quant';
import { loadSafetensors, type SafetensorsFile } from '../../src/formats/safetensors';
import { dequantizeRows } from '../../src/reference/quant';
import { bf16BitsToF32, f16BitsToF32, f32ToBf16Bits, f32ToF16Bits } from '../../src/core/dtype';
import { rng } from '../../src/core/random';
import { parseConfig } from '../../src/models/config';
import { validateCheckpoint, WEIGHT_DTYPES } from '../../src/models/schema';
import { GROUP_QUANT_TYPES } from '../../src/core/quant';

type Scale = 'F16' | 'BF16' | 'F32';
interface T { dtype: string; shape: number[]; bytes: Uint8Array }

function file(tensors: Record<string, T>, name = 'test.safetensors'): SafetensorsFile {
  return {
    tensors: new Map(Object.entries(tensors).map(([n, t]) => [n, { dtype: t.dtype, shape: t.shape }])),
    metadata: {},
    name,
    bytes: async (n) => tensors[n].bytes,
  };
}

/** Little-endian 32-bit words of a bit string built bit by bit: value i at bits [i·bits, (i+1)·bits). */
function bitString(values: ArrayLike<number>, bits: number, words: number): Uint32Array {
  const w = new Uint32Array(words);
  for (let i = 0; i < values.length; i++) {
    for (let b = 0; b < bits; b++) {
      const pos = i * bits + b;
      if ((values[i] >> b) & 1) w[pos >> 5] |= (1 << (pos & 31)) >>> 0;
    }
  }
  return w;
}
const u8 = (a: ArrayBufferView) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);

function ints(n: number, hi: number, seed: number): Int32Array {
  const r = rng(seed), out = new Int32Array(n);
  for (let i = 0; i < n; i++) out[i] = Math.floor(r() * hi);
  return out;
}

/** Random scales of a dtype: raw bytes and their values. */
function scales(n: number, dtype: Scale, seed: number, signed = true): { bytes: Uint8Array; v: Float64Array } {
  const r = rng(seed), v = new Float64Array(n);
  if (dtype === 'F32') {
    const f = new Float32Array(n);
    for (let i = 0; i < n; i++) { f[i] = (0.001 + r() * 0.1) * (signed && r() < 0.3 ? -1 : 1); v[i] = f[i]; }
    return { bytes: u8(f), v };
  }
  const h = new Uint16Array(n);
  for (let i = 0; i < n; i++) {
    const x = (0.001 + r() * 0.1) * (signed && r() < 0.3 ? -1 : 1);
    h[i] = dtype === 'F16' ? f32ToF16Bits(x) : f32ToBf16Bits(x);
    v[i] = dtype === 'F16' ? f16BitsToF32(h[i]) : bf16BitsToF32(h[i]);
  }
  return { bytes: u8(h), v };
}

/** The module's weight as the engine sees it: dequantized blocks, columns back in input order. */
async function engineValues(ckpt: PermutedSafetensorsFile, name: string): Promise<{ type: string; v: Float64Array }> {
  const t = ckpt.tensors.get(name)!;
  const [N, K] = t.shape;
  const v = dequantizeRows(t.dtype as never, await ckpt.bytes(name), N, K);
  const perm = ckpt.perm(name);
  if (!perm) return { type: t.dtype, v };
  const u = new Float64Array(v.length);
  for (let n = 0; n < N; n++) for (let j = 0; j < K; j++) u[n * K + perm[j]] = v[n * K + j];
  return { type: t.dtype, v: u };
}

function expectEqual(got: Float64Array, want: ArrayLike<number>): void {
  expect(got.length).toBe(want.length);
  let bad = -1;
  for (let i = 0; i < got.length; i++) if (got[i] !== want[i]) { bad = i; break; }
  expect(bad < 0 ? 'equal' : `element ${bad}: ${got[bad]} vs ${want[bad]}`).toBe('equal');
}

const f32 = Math.fround;

// ------------------------------------------------------------------------------------------- MLX

function mlxModule(prefix: string, N: number, K: number, bits: number, G: number, dtype: Scale, seed: number) {
  const q = ints(N * K, 2 ** bits, seed);
  const W = (K * bits) / 32;
  const w = new Uint32Array(N * W);
  for (let n = 0; n < N; n++) w.set(bitString(q.subarray(n * K, (n + 1) * K), bits, W), n * W);
  const s = scales(N * (K / G), dtype, seed + 1), b = scales(N * (K / G), dtype, seed + 2);
  const want = new Float64Array(N * K);
  for (let n = 0; n < N; n++) for (let k = 0; k < K; k++) {
    const g = n * (K / G) + Math.floor(k / G);
    want[n * K + k] = f32(f32(s.v[g] * q[n * K + k]) + b.v[g]);
  }
  const tensors: Record<string, T> = {
    [`${prefix}.weight`]: { dtype: 'U32', shape: [N, W], bytes: u8(w) },
    [`${prefix}.scales`]: { dtype, shape: [N, K / G], bytes: s.bytes },
    [`${prefix}.biases`]: { dtype, shape: [N, K / G], bytes: b.bytes },
  };
  return { tensors, want };
}

describe('MLX affine', () => {
  it.each([[2, 32, 'BF16'], [3, 64, 'F16'], [4, 64, 'BF16'], [5, 32, 'F32'], [6, 128, 'BF16'], [8, 128, 'F16']] as const)(
    '%i bits, group %i, %s scales (3/5/6 bits straddle words): s·q + b', async (bits, G, dtype) => {
      const m = mlxModule('model.layers.0.mlp.up_proj', 5, 256, bits, G, dtype, 10 * bits + G);
      const ckpt = (await hfQuantCheckpoint({ quantization: { group_size: G, bits } }, [file(m.tensors)]))!;
      expect([...ckpt.tensors.keys()]).toEqual(['model.layers.0.mlp.up_proj.weight']);
      const { type, v } = await engineValues(ckpt, 'model.layers.0.mlp.up_proj.weight');
      expect(type).toBe(`A${bits}G${G}_${dtype}`);
      expectEqual(v, m.want);
    });

  it('per-module settings as mlx-lm writes them: its own {group_size, bits}, false (kept float); other tensors pass through', async () => {
    const a = mlxModule('model.layers.0.self_attn.q_proj', 4, 128, 4, 64, 'BF16', 1);
    const b = mlxModule('model.layers.0.mlp.down_proj', 4, 256, 8, 32, 'BF16', 2);
    const norm = { dtype: 'BF16', shape: [4], bytes: new Uint8Array(8) };
    const float = { dtype: 'BF16', shape: [4, 128], bytes: new Uint8Array(1024) };
    const config = { quantization: { group_size: 64, bits: 4, 'model.layers.0.mlp.down_proj': { group_size: 32, bits: 8 }, 'model.layers.0.mlp.gate_proj': false } };
    const ckpt = (await hfQuantCheckpoint(config, [file({ ...a.tensors, ...b.tensors, 'model.norm.weight': norm, 'model.layers.0.mlp.gate_proj.weight': float })]))!;
    expect(ckpt.tensors.get('model.layers.0.mlp.down_proj.weight')).toEqual({ dtype: 'A8G32_BF16', shape: [4, 256] });
    expect(ckpt.tensors.get('model.layers.0.self_attn.q_proj.weight')).toEqual({ dtype: 'A4G64_BF16', shape: [4, 128] });
    expect(ckpt.tensors.get('model.layers.0.mlp.gate_proj.weight')).toEqual({ dtype: 'BF16', shape: [4, 128] });
    expect(ckpt.tensors.get('model.norm.weight')).toEqual({ dtype: 'BF16', shape: [4] });
    expect(await ckpt.bytes('model.norm.weight')).toBe(norm.bytes);
    expectEqual((await engineValues(ckpt, 'model.layers.0.mlp.down_proj.weight')).v, b.want);
    expectEqual((await engineValues(ckpt, 'model.layers.0.self_attn.q_proj.weight')).v, a.want);
  });

  it('a float checkpoint is none of its business', async () => {
    expect(await hfQuantCheckpoint({ architectures: ['LlamaForCausalLM'] }, [file({})])).toBeNull();
  });
});

// ------------------------------------------------------------------------------------------- AWQ

function awqModule(prefix: string, N: number, K: number, G: number, dtype: Scale, seed: number) {
  const q = ints(K * N, 16, seed), z = ints((K / G) * N, 16, seed + 1);   // [in, out] and [in/G, out]
  const order = [0, 2, 4, 6, 1, 3, 5, 7];
  const pack = (vals: Int32Array, rows: number) => {
    const w = new Uint32Array(rows * (N / 8));
    for (let r = 0; r < rows; r++) for (let c = 0; c < N / 8; c++) {
      let word = 0;
      for (let k = 0; k < 8; k++) word |= vals[r * N + 8 * c + order[k]] << (4 * k);
      w[r * (N / 8) + c] = word >>> 0;
    }
    return w;
  };
  const s = scales((K / G) * N, dtype, seed + 2, false);
  const want = new Float64Array(N * K);
  for (let n = 0; n < N; n++) for (let k = 0; k < K; k++) {
    const g = Math.floor(k / G) * N + n;
    want[n * K + k] = f32((q[k * N + n] - z[g]) * s.v[g]);
  }
  const tensors: Record<string, T> = {
    [`${prefix}.qweight`]: { dtype: 'I32', shape: [K, N / 8], bytes: u8(pack(q, K)) },
    [`${prefix}.qzeros`]: { dtype: 'I32', shape: [K / G, N / 8], bytes: u8(pack(z, K / G)) },
    [`${prefix}.scales`]: { dtype, shape: [K / G, N], bytes: s.bytes },
  };
  return { tensors, want };
}

const AWQ = { quant_method: 'awq', bits: 4, group_size: 128, zero_point: true, version: 'gemm' };

describe('AWQ GEMM', () => {
  it.each([[128, 'F16'], [64, 'F16'], [32, 'BF16']] as const)('group %i, %s scales: nibble order 0,2,4,6,1,3,5,7; (q − z)·s', async (G, dtype) => {
    const m = awqModule('model.layers.0.self_attn.o_proj', 24, 256, G, dtype, G);
    const ckpt = (await hfQuantCheckpoint({ quantization_config: { ...AWQ, group_size: G } }, [file(m.tensors)]))!;
    const { type, v } = await engineValues(ckpt, 'model.layers.0.self_attn.o_proj.weight');
    expect(type).toBe(`Z4G${G}_${dtype}`);
    expect(ckpt.tensors.get('model.layers.0.self_attn.o_proj.weight')!.shape).toEqual([24, 256]);
    expectEqual(v, m.want);
  });
});

// ------------------------------------------------------------------------------------------ GPTQ

/** A GPTQ module: q [in, out] values, zeros [groups, out], g_idx as given; qweight packed along in. */
function gptqModule(prefix: string, N: number, K: number, bits: number, G: number, gIdx: Int32Array, format: 'gptq' | 'gptq_v2', dtype: Scale, seed: number) {
  const groups = Math.ceil(K / G);
  const q = ints(K * N, 2 ** bits, seed);
  const stored = ints(groups * N, 2 ** bits, seed + 1);
  // checkpoint_format gptq stores zero − 1: the zero is the stored value + 1 (the sym 4-bit 7 is 8).
  const zero = (g: number, n: number) => stored[g * N + n] + (format === 'gptq' ? 1 : 0);
  const qweight = new Uint32Array((K * bits / 32) * N);
  for (let n = 0; n < N; n++) {
    const col = bitString(Array.from({ length: K }, (_, k) => q[k * N + n]), bits, K * bits / 32);
    for (let r = 0; r < col.length; r++) qweight[r * N + n] = col[r];
  }
  const ZW = N * bits / 32;
  const qzeros = new Uint32Array(groups * ZW);
  for (let g = 0; g < groups; g++) qzeros.set(bitString(stored.subarray(g * N, (g + 1) * N), bits, ZW), g * ZW);
  const s = scales(groups * N, dtype, seed + 2, false);
  const want = new Float64Array(N * K);
  for (let n = 0; n < N; n++) for (let k = 0; k < K; k++) want[n * K + k] = f32((q[k * N + n] - zero(gIdx[k], n)) * s.v[gIdx[k] * N + n]);
  const tensors: Record<string, T> = {
    [`${prefix}.qweight`]: { dtype: 'I32', shape: [K * bits / 32, N], bytes: u8(qweight) },
    [`${prefix}.qzeros`]: { dtype: 'I32', shape: [groups, ZW], bytes: u8(qzeros) },
    [`${prefix}.scales`]: { dtype, shape: [groups, N], bytes: s.bytes },
    [`${prefix}.g_idx`]: { dtype: 'I32', shape: [K], bytes: u8(gIdx) },
  };
  return { tensors, want };
}

const trivial = (K: number, G: number) => Int32Array.from({ length: K }, (_, k) => Math.floor(k / G));
/** desc_act's g_idx: the columns in a random order, group i·G.. of that order. */
function shuffledGroups(K: number, G: number, seed: number): Int32Array {
  const r = rng(seed), order = Array.from({ length: K }, (_, k) => k);
  for (let i = K - 1; i > 0; i--) { const j = Math.floor(r() * (i + 1)); [order[i], order[j]] = [order[j], order[i]]; }
  const g = new Int32Array(K);
  order.forEach((k, i) => { g[k] = Math.floor(i / G); });
  return g;
}
const GPTQ = { quant_method: 'gptq', bits: 4, group_size: 128, desc_act: false, sym: true, checkpoint_format: 'gptq' };

describe('GPTQ', () => {
  it.each([[4, 128, 'gptq'], [4, 64, 'gptq_v2'], [2, 32, 'gptq'], [3, 128, 'gptq'], [8, 32, 'gptq_v2']] as const)(
    '%i bits, group %i, %s (zero − 1 vs zero as is), trivial g_idx: (q − z)·s', async (bits, G, format) => {
      const K = 256, N = 64;
      const m = gptqModule('model.layers.1.mlp.gate_proj', N, K, bits, G, trivial(K, G), format, 'F16', bits * 7 + G);
      const ckpt = (await hfQuantCheckpoint({ quantization_config: { ...GPTQ, bits, group_size: G, checkpoint_format: format } }, [file(m.tensors)]))!;
      const { type, v } = await engineValues(ckpt, 'model.layers.1.mlp.gate_proj.weight');
      expect(type).toBe(`Z${bits}G${G}_F16`);
      expect(ckpt.perm('model.layers.1.mlp.gate_proj.weight')).toBeUndefined();
      expectEqual(v, m.want);
    });

  it('the sym 4-bit gptq zeros 0x77777777 are zero 8', async () => {
    const K = 128, N = 8;
    const m = gptqModule('p', N, K, 4, 128, trivial(K, 128), 'gptq', 'F16', 5);
    m.tensors['p.qzeros'].bytes = u8(Uint32Array.of(0x77777777));
    const ckpt = (await hfQuantCheckpoint({ quantization_config: GPTQ }, [file(m.tensors)]))!;
    const bytes = await ckpt.bytes('p.weight');
    // Each block's zero (the u16 after the scale) is 8.
    for (let b = 0; b < N; b++) expect(bytes[b * 68 + 66] | (bytes[b * 68 + 67] << 8)).toBe(8);
  });

  it.each([[4, 128], [3, 64], [8, 32]] as const)('desc_act: %i bits, group %i, g_idx shuffled: columns sorted by group, perm given, values exact', async (bits, G) => {
    const K = 256, N = 32;
    const g = shuffledGroups(K, G, bits + G);
    const m = gptqModule('model.layers.0.mlp.down_proj', N, K, bits, G, g, 'gptq', 'F16', 3 * bits + G);
    const ckpt = (await hfQuantCheckpoint({ quantization_config: { ...GPTQ, bits, group_size: G, desc_act: true } }, [file(m.tensors)]))!;
    const perm = ckpt.perm('model.layers.0.mlp.down_proj.weight')!;
    expect(perm).toBeInstanceOf(Int32Array);
    expect([...perm].sort((a, b) => a - b)).toEqual(Array.from({ length: K }, (_, k) => k));
    for (let j = 1; j < K; j++) expect(g[perm[j]] >= g[perm[j - 1]]).toBe(true);
    const { type, v } = await engineValues(ckpt, 'model.layers.0.mlp.down_proj.weight');
    expect(type).toBe(`Z${bits}G${G}_F16`);
    expectEqual(v, m.want);
    expect(ckpt.tensors.has('model.layers.0.mlp.down_proj.g_idx')).toBe(false);
  });

  it('group_size −1: one group a row, blocks of the largest of 128/64/32 dividing K with the scale repeated', async () => {
    const K = 192, N = 16;
    const m = gptqModule('p', N, K, 4, K, new Int32Array(K), 'gptq', 'BF16', 77);
    const ckpt = (await hfQuantCheckpoint({ quantization_config: { ...GPTQ, group_size: -1 } }, [file(m.tensors)]))!;
    const { type, v } = await engineValues(ckpt, 'p.weight');
    expect(type).toBe('Z4G64_BF16');
    expectEqual(v, m.want);
  });

  it('without g_idx: column k in group ⌊k/G⌋', async () => {
    const m = gptqModule('p', 16, 256, 4, 128, trivial(256, 128), 'gptq_v2', 'F32', 8);
    delete m.tensors['p.g_idx'];
    const ckpt = (await hfQuantCheckpoint({ quantization_config: { ...GPTQ, checkpoint_format: 'gptq_v2' } }, [file(m.tensors)]))!;
    const { type, v } = await engineValues(ckpt, 'p.weight');
    expect(type).toBe('Z4G128_F32');
    expectEqual(v, m.want);
  });
});

// ----------------------------------------------------------------------------- compressed-tensors

/** A pack-quantized module: signed q in [−2^(b−1), 2^(b−1)), stored + 2^(b−1), 32/b a word along in (padded). */
function ctModule(prefix: string, N: number, K: number, bits: number, G: number, symmetric: boolean, gIdx: Int32Array | null, dtype: Scale, seed: number) {
  const off = 2 ** (bits - 1), pf = Math.floor(32 / bits);
  const groups = Math.ceil(K / G);
  const q = ints(N * K, 2 ** bits, seed).map((x) => x - off);          // signed
  const zp = symmetric ? new Int32Array(N * groups) : ints(N * groups, 2 ** bits, seed + 1).map((x) => x - off);
  const PW = Math.ceil(K / pf);
  const packed = new Uint32Array(N * PW);
  for (let n = 0; n < N; n++) for (let k = 0; k < K; k++) packed[n * PW + Math.floor(k / pf)] |= ((q[n * K + k] + off) << (bits * (k % pf))) >>> 0;
  const ZR = Math.ceil(N / pf);
  const zpacked = new Uint32Array(ZR * groups);
  for (let n = 0; n < N; n++) for (let g = 0; g < groups; g++) zpacked[Math.floor(n / pf) * groups + g] |= ((zp[n * groups + g] + off) << (bits * (n % pf))) >>> 0;
  const s = scales(N * groups, dtype, seed + 2, false);
  const gi = gIdx ?? trivial(K, G);
  const want = new Float64Array(N * K);
  for (let n = 0; n < N; n++) for (let k = 0; k < K; k++) want[n * K + k] = f32((q[n * K + k] - zp[n * groups + gi[k]]) * s.v[n * groups + gi[k]]);
  const tensors: Record<string, T> = {
    [`${prefix}.weight_packed`]: { dtype: 'I32', shape: [N, PW], bytes: u8(packed) },
    [`${prefix}.weight_scale`]: { dtype, shape: [N, groups], bytes: s.bytes },
    [`${prefix}.weight_shape`]: { dtype: 'I32', shape: [2], bytes: u8(Int32Array.of(N, K)) },
  };
  if (!symmetric) tensors[`${prefix}.weight_zero_point`] = { dtype: 'I32', shape: [ZR, groups], bytes: u8(zpacked) };
  if (gIdx) tensors[`${prefix}.weight_g_idx`] = { dtype: 'I32', shape: [K], bytes: u8(gIdx) };
  return { tensors, want };
}

const ct = (bits: number, strategy: string, G: number | null, symmetric: boolean, extra: object = {}) => ({
  quantization_config: {
    quant_method: 'compressed-tensors', format: 'pack-quantized', ignore: ['lm_head'],
    config_groups: { group_0: { targets: ['Linear'], input_activations: null, weights: { num_bits: bits, type: 'int', symmetric, strategy, group_size: G, ...extra } } },
  },
});

describe('compressed-tensors pack-quantized', () => {
  it.each([
    ['W4A16 group 128, symmetric', 4, 128, true, 'group'],
    ['W4A16 group 32, asymmetric (zero points packed along out)', 4, 32, false, 'group'],
    ['W8A16 channel, symmetric', 8, 0, true, 'channel'],
    ['W8A16 group 64, asymmetric', 8, 64, false, 'group'],
    ['3 bits (10 a word, 2 bits unused), group 64, asymmetric', 3, 64, false, 'group'],
  ] as const)('%s', async (_, bits, G, symmetric, strategy) => {
    const K = 256, N = 40;
    const m = ctModule('model.layers.0.self_attn.v_proj', N, K, bits, strategy === 'channel' ? K : G, symmetric, null, 'BF16', bits * 3 + G);
    const ckpt = (await hfQuantCheckpoint(ct(bits, strategy, strategy === 'channel' ? null : G, symmetric), [file(m.tensors)]))!;
    const { type, v } = await engineValues(ckpt, 'model.layers.0.self_attn.v_proj.weight');
    expect(type).toBe(`Z${bits}G${strategy === 'channel' ? 128 : G}_BF16`);
    expect([...ckpt.tensors.keys()]).toEqual(['model.layers.0.self_attn.v_proj.weight']);
    expectEqual(v, m.want);
  });

  it('actorder group: weight_g_idx shuffled, columns sorted by group with a perm', async () => {
    const K = 256, N = 16, G = 64;
    const g = shuffledGroups(K, G, 4);
    const m = ctModule('p', N, K, 4, G, true, g, 'F16', 9);
    const ckpt = (await hfQuantCheckpoint(ct(4, 'group', G, true, { actorder: 'group' }), [file(m.tensors)]))!;
    expect(ckpt.perm('p.weight')).toBeInstanceOf(Int32Array);
    expectEqual((await engineValues(ckpt, 'p.weight')).v, m.want);
  });
});

// ------------------------------------------------------------------------------ the goldens' folders

const goldens = join(dirname(fileURLToPath(import.meta.url)), '../../../shared/goldens-quant');

describe("the goldens' checkpoints", () => {
  it.each(['mlx-llama-4bit', 'mlx-llama-8bit', 'awq-llama-4bit-g128', 'gptq-llama-4bit-g128'])(
    '%s: every module presented as HF names and shapes the schema accepts; one module equals the format computed from its files', async (folder) => {
      const config = JSON.parse(readFileSync(join(goldens, folder, 'config.json'), 'utf8'));
      const raw = await loadSafetensors(readFileSync(join(goldens, folder, 'model.safetensors')));
      const ckpt = (await hfQuantCheckpoint(config, [raw]))!;
      const resolved = validateCheckpoint(parseConfig(config), [ckpt], [...WEIGHT_DTYPES, ...GROUP_QUANT_TYPES]);
      expect(resolved.get('model.layers.0.self_attn.q_proj.weight')!.shape).toEqual([256, 256]);
      const p = 'model.layers.1.mlp.down_proj';   // [256, 512]
      const N = 256, K = 512;
      const words = async (n: string) => { const b = Uint8Array.from(await raw.bytes(n)); return new Uint32Array(b.buffer); };
      const halfs = async (n: string) => { const b = Uint8Array.from(await raw.bytes(n)); return new Uint16Array(b.buffer); };
      const want = new Float64Array(N * K);
      if (folder.startsWith('mlx')) {
        const bits = config.quantization.bits, G = 64;
        const [w, s, b] = [await words(`${p}.weight`), await halfs(`${p}.scales`), await halfs(`${p}.biases`)];
        const W = (K * bits) / 32;
        for (let n = 0; n < N; n++) for (let k = 0; k < K; k++) {
          const pos = k * bits;
          let q = 0;
          for (let j = 0; j < bits; j++) q |= ((w[n * W + ((pos + j) >> 5)] >>> ((pos + j) & 31)) & 1) << j;
          const g = n * (K / G) + Math.floor(k / G);
          want[n * K + k] = f32(bf16BitsToF32(s[g]) * q + bf16BitsToF32(b[g]));
        }
      } else if (folder.startsWith('awq')) {
        const [w, z, s] = [await words(`${p}.qweight`), await words(`${p}.qzeros`), await halfs(`${p}.scales`)];
        const order = [0, 2, 4, 6, 1, 3, 5, 7];
        const nib = (word: number, n: number) => (word >>> (4 * order.indexOf(n % 8))) & 15;
        for (let n = 0; n < N; n++) for (let k = 0; k < K; k++) {
          const g = Math.floor(k / 128);
          want[n * K + k] = f32((nib(w[k * (N / 8) + Math.floor(n / 8)], n) - nib(z[g * (N / 8) + Math.floor(n / 8)], n)) * f16BitsToF32(s[g * N + n]));
        }
      } else {
        const [w, z, s] = [await words(`${p}.qweight`), await words(`${p}.qzeros`), await halfs(`${p}.scales`)];
        for (let n = 0; n < N; n++) for (let k = 0; k < K; k++) {
          const g = Math.floor(k / 128);
          const q = (w[Math.floor(k / 8) * N + n] >>> (4 * (k % 8))) & 15;
          const zero = ((z[g * (N / 8) + Math.floor(n / 8)] >>> (4 * (n % 8))) & 15) + 1;
          expect(zero).toBe(8);
          want[n * K + k] = f32((q - zero) * f16BitsToF32(s[g * N + n]));
        }
      }
      expectEqual((await engineValues(ckpt, `${p}.weight`)).v, want);
    });
});

// ------------------------------------------------------------------------------------- refusals

async function refused(config: object, tensors: Record<string, T>, message: RegExp): Promise<void> {
  await expect(hfQuantCheckpoint(config, [file(tensors)])).rejects.toThrow(message);
}

describe('refused, naming the scheme and the field, before anything is uploaded', () => {
  const mlx = () => mlxModule('m', 4, 128, 4, 64, 'BF16', 1).tensors;
  const awq = () => awqModule('a', 16, 256, 128, 'F16', 2).tensors;
  const gptq = () => gptqModule('g', 16, 256, 4, 128, trivial(256, 128), 'gptq', 'F16', 3).tensors;
  const cts = () => ctModule('c', 16, 256, 4, 128, false, null, 'BF16', 4).tensors;

  it('an unknown quant_method', () => refused({ quantization_config: { quant_method: 'bitsandbytes' } }, {},
    /quantization_config\.quant_method: expected one of mlx, awq, gptq, compressed-tensors, fp8, mxfp4, got 'bitsandbytes'/));
  it('MLX: unsupported bits / group / mode', async () => {
    await refused({ quantization: { group_size: 64, bits: 7 } }, mlx(), /quantization\.bits: expected one of 2, 3, 4, 5, 6, 8, got 7/);
    await refused({ quantization: { group_size: 16, bits: 4 } }, mlx(), /quantization\.group_size: expected one of 32, 64, 128, got 16/);
    await refused({ quantization: { group_size: 32, bits: 4, mode: 'mxfp4' } }, mlx(), /quantization\.mode: expected 'affine'/);
  });
  it('MLX: scales of the wrong shape, biases missing, a quantized module marked false, weight not U32', async () => {
    const t = mlx();
    t['m.scales'] = { ...t['m.scales'], shape: [4, 4] };
    await refused({ quantization: { group_size: 64, bits: 4 } }, t, /mlx checkpoint .*m\.scales: expected shape \[4, 2\]/s);
    const u = mlx();
    delete u['m.biases'];
    await refused({ quantization: { group_size: 64, bits: 4 } }, u, /missing m\.biases/);
    await refused({ quantization: { group_size: 64, bits: 4, m: false } }, mlx(), /quantization\['m'\] is false/);
    const v = mlx();
    v['m.weight'] = { ...v['m.weight'], dtype: 'I32' };
    await refused({ quantization: { group_size: 64, bits: 4 } }, v, /m\.weight: expected dtype U32, got I32/);
  });
  it('AWQ: gemv, zero_point false, bits 8, a missing qzeros, wrong packed shapes', async () => {
    await refused({ quantization_config: { ...AWQ, version: 'gemv' } }, awq(), /quantization_config\.version: expected 'gemm'.*got 'gemv'/);
    await refused({ quantization_config: { ...AWQ, zero_point: false } }, awq(), /quantization_config\.zero_point: expected true/);
    await refused({ quantization_config: { ...AWQ, bits: 8 } }, awq(), /quantization_config\.bits: expected one of 4, got 8/);
    const t = awq();
    delete t['a.qzeros'];
    await refused({ quantization_config: AWQ }, t, /awq checkpoint .*missing a\.qzeros/s);
    const u = awq();
    u['a.qweight'] = { ...u['a.qweight'], shape: [256, 3] };
    await refused({ quantization_config: AWQ }, u, /a\.qzeros: expected shape \[2, 3\] \(\[in\/128, out\/8\] for a\.qweight \[256, 3\]\)/);
    const w = awq();
    w['a.qzeros'] = { ...w['a.qzeros'], shape: [1, 2] };
    await refused({ quantization_config: AWQ }, w, /a\.qzeros: expected shape \[2, 2\]/);
  });
  it('AWQ: scales shape disagreeing with qweight', async () => {
    const t = awq();
    t['a.scales'] = { ...t['a.scales'], shape: [1, 16] };
    await refused({ quantization_config: AWQ }, t, /a\.scales: expected shape \[2, 16\] \(\[in\/128, out\]/);
  });
  it('GPTQ: marlin format, dynamic rules, bits 5, a missing scales, g_idx of the wrong length, groups not whole blocks, g_idx out of range', async () => {
    await refused({ quantization_config: { ...GPTQ, checkpoint_format: 'marlin' } }, gptq(), /quantization_config\.checkpoint_format: expected 'gptq' or 'gptq_v2'.*got 'marlin'/);
    await refused({ quantization_config: { ...GPTQ, dynamic: { '-:.*gate.*': {} } } }, gptq(), /quantization_config\.dynamic/);
    await refused({ quantization_config: { ...GPTQ, bits: 5 } }, gptq(), /quantization_config\.bits: expected one of 2, 3, 4, 8, got 5/);
    const t = gptq();
    delete t['g.scales'];
    await refused({ quantization_config: GPTQ }, t, /missing g\.scales/);
    const u = gptq();
    u['g.g_idx'] = { dtype: 'I32', shape: [128], bytes: new Uint8Array(512) };
    await refused({ quantization_config: GPTQ }, u, /g\.g_idx: expected shape \[256\]/);
    const v = gptq();
    const g = trivial(256, 128);
    g[5] = 1;   // group 0 now has 127 columns, group 1 129
    v['g.g_idx'] = { dtype: 'I32', shape: [256], bytes: u8(g) };
    await refused({ quantization_config: GPTQ }, v, /expected groups of input columns that are whole blocks of 128, 64 or 32 columns once sorted by g_idx, got group sizes 127, 129/);
    const w = gptq();
    w['g.g_idx'] = { dtype: 'I32', shape: [256], bytes: u8(trivial(256, 64)) };
    await refused({ quantization_config: GPTQ }, w, /expected each input column's group in \[0, 2\), got 2 at column 128/);
    const x = gptq();
    x['g.qweight'] = { ...x['g.qweight'], shape: [16, 32] };
    await refused({ quantization_config: GPTQ }, x, /g\.qzeros: expected shape \[1, 4\]|g\.qzeros: expected shape/);
  });
  it('compressed-tensors: another format, activations quantized, a float type, tensor strategy, a missing zero point, a packed shape off weight_shape', async () => {
    await refused({ quantization_config: { ...ct(4, 'group', 128, false).quantization_config, format: 'naive-quantized' } }, cts(),
      /quantization_config\.format \(compressed-tensors\): expected one of pack-quantized, float-quantized, got "naive-quantized"/);
    const acts = ct(4, 'group', 128, false);
    (acts.quantization_config.config_groups.group_0 as Record<string, unknown>).input_activations = { num_bits: 8 };
    await refused(acts, cts(), /config_groups\.group_0\.input_activations: expected null/);
    await refused(ct(4, 'group', 128, false, { type: 'float' }), cts(), /weights\.type: expected 'int'/);
    await refused(ct(4, 'tensor', null, false), cts(), /weights\.strategy: expected 'group' or 'channel', got "tensor"/);
    const t = cts();
    delete t['c.weight_zero_point'];
    await refused(ct(4, 'group', 128, false), t, /missing c\.weight_zero_point/);
    const u = cts();
    u['c.weight_shape'] = { dtype: 'I32', shape: [2], bytes: u8(Int32Array.of(16, 512)) };
    await refused(ct(4, 'group', 128, false), u, /c\.weight_packed: expected shape \[16, 64\]/);
  });
  it('fp8 settings it cannot read (hf_fp8.ts), and quantization_config not an object', async () => {
    await refused({ quantization_config: { quant_method: 'fp8', fmt: 'e5m2', weight_block_size: [128, 128] } }, {}, /quantization_config\.fmt: expected 'e4m3'/);
    await refused({ quantization_config: { quant_method: 'fp8' } }, {}, /quantization_config\.weight_block_size: expected \[rows, columns\]/);
    const w = { dtype: 'F8_E4M3', shape: [256, 256], bytes: new Uint8Array(256 * 256) };
    await refused({ quantization_config: { quant_method: 'fp8', weight_block_size: [128, 128] } },
      { 'm.weight': w, 'm.weight_scale_inv': { dtype: 'F32', shape: [2, 1], bytes: new Uint8Array(8) } },
      /m\.weight_scale_inv: expected shape \[2, 2\] \(blocks of 128 × 128 of a weight \[256, 256\]\), got \[2, 1\]/);
    await refused({ quantization_config: { quant_method: 'fp8', weight_block_size: [128, 128] } }, { 'm.weight': w }, /missing m\.weight_scale_inv/);
    await refused({ quantization_config: 'awq' }, {}, /quantization_config: expected an object/);
  });
});
