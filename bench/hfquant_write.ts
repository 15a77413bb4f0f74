// Random-weight checkpoints in the Hub's quantized safetensors formats, for the hfquant benchmark
// (issue 30): each format in its own files, as the Hub ships it (../shared/SPEC.md §8 and
// ../shared/goldens-quant/README.md), config.json with the format's quantization keys, then
// model.safetensors (or shards of at most 4 GiB and model.safetensors.index.json).
//   mlx   MLX affine 4-bit, group 64: `weight` U32 [out, in/8] (values from the lowest bits up), `scales`
//         and `biases` BF16 [out, in/64], w = scales·q + biases; embed_tokens and lm_head quantized too;
//         norms BF16; config `quantization` = `quantization_config` = { group_size: 64, bits: 4 }.
//   awq   AutoAWQ GEMM, 4-bit, group 128: `qweight` I32 [in, out/8], `qzeros` I32 [in/128, out/8],
//         `scales` F16 [in/128, out], w = (q − z)·s; embed, lm_head and norms F16.
//   gptq  GPTQ 4-bit, group 128, sym, desc_act false, checkpoint_format gptq: `qweight` I32 [in/8, out],
//         `qzeros` I32 [in/128, out/8] = 0x77777777 (zero − 1), `scales` F16 [in/128, out], `g_idx` I32 [in].
//   fp8   block FP8 (DeepSeek-V3's layout): every linear layer's `weight` F8_E4M3 [out, in] and
//         `weight_scale_inv` F32 [⌈out/128⌉, ⌈in/128⌉], w = q·s; the router, embed, lm_head and norms BF16.
// Weights are random bytes (any 4-bit word is a valid code; FP8 bytes with their top exponent bit
// cleared, |q| < 2, so never NaN), written in big chunks from one random pool at random offsets so
// several GB take seconds; scales, biases and zeros come from pools of sane values (|w| of a few
// hundredths, as src/reference/quant_random.ts draws them), norms are 1: activations stay finite.
import { closeSync, mkdirSync, openSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { f32ToBf16Bits, f32ToF16Bits } from '../src/core/dtype';
import { rng } from '../src/core/random';
import { DEEPSEEK_V2_LITE, LLAMA_3_2_1B, SMALL_DEEPSEEK, SMALL_LLAMA } from './model';

/** Llama-3.1-8B's shape (make_gguf.py's llama-8b): hidden 4096, 32 layers, head_dim 128, untied. */
export const LLAMA_3_1_8B = {
  ...LLAMA_3_2_1B, hidden_size: 4096, intermediate_size: 14336, num_hidden_layers: 32, num_attention_heads: 32,
  num_key_value_heads: 8, head_dim: 128, tie_word_embeddings: false,
  rope_scaling: { rope_type: 'llama3', factor: 8, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 8192 },
};

export const HFQ_SHAPES = {
  'llama-1b': LLAMA_3_2_1B, 'llama-8b': LLAMA_3_1_8B, 'dsv2-lite': DEEPSEEK_V2_LITE,
  'tiny-llama': SMALL_LLAMA, 'tiny-ds': SMALL_DEEPSEEK,
} as const;
export type HfqShape = keyof typeof HFQ_SHAPES;
export type HfqFormat = 'mlx' | 'awq' | 'gptq' | 'fp8';
export const HFQ_FORMATS: readonly HfqFormat[] = ['mlx', 'awq', 'gptq', 'fp8'];

/** A tensor to write: its header entry and how to make its bytes, chunk by chunk. */
interface Planned { name: string; dtype: string; shape: number[]; bytes: number; fill: (w: ChunkWriter) => void }
type ChunkWriter = (chunk: Uint8Array) => void;

const POOL_BYTES = 64 * 2 ** 20;
const CHUNK = 64 * 2 ** 20;

/** Pools of bytes the tensors are cut from (built once per process). */
interface Pools { raw: Uint8Array; fp8: Uint8Array; scale: Record<string, Uint8Array>; }
let pools: Pools | null = null;

function makePools(): Pools {
  // xorshift128 over 32-bit words: 64 MiB in a few tens of ms.
  const raw = new Uint8Array(POOL_BYTES);
  const w = new Uint32Array(raw.buffer);
  let x = 123456789, y = 362436069, z = 521288629, v = 88675123;
  for (let i = 0; i < w.length; i++) {
    const t = x ^ (x << 11);
    x = y; y = z; z = v;
    v = (v ^ (v >>> 19) ^ (t ^ (t >>> 8))) >>> 0;
    w[i] = v;
  }
  // FP8 E4M3: the top exponent bit cleared (exponent ≤ 7: |q| < 2, never the NaN pattern s.1111.111).
  const fp8 = new Uint8Array(POOL_BYTES);
  for (let i = 0; i < fp8.length; i++) fp8[i] = raw[i]! & 0xbf;
  const n = 2 ** 20, r = rng(7);
  const u16 = (f: (i: number) => number, enc: (x: number) => number) => {
    const a = new Uint16Array(n);
    for (let i = 0; i < n; i++) a[i] = enc(f(i));
    return new Uint8Array(a.buffer);
  };
  const f32 = (f: (i: number) => number) => {
    const a = new Float32Array(n);
    for (let i = 0; i < n; i++) a[i] = f(i);
    return new Uint8Array(a.buffer);
  };
  // MLX: s of either sign, |s| in [2e-3, 6e-3], and a bias pool drawn from the same draws so that,
  // cut at the same offsets, b = −7.5·s·(0.9..1.1): w = s·q + b is centred, |w| ≲ 0.05.
  const ms = Float64Array.from({ length: n }, () => (r() < 0.5 ? -1 : 1) * (2e-3 + 4e-3 * r()));
  const mb = Float64Array.from(ms, (s) => -7.5 * s * (0.9 + 0.2 * r()));
  // Normal(0, 0.02) for the 16-bit matrices that stay unquantized (Box-Muller).
  const normal = () => 0.02 * Math.sqrt(-2 * Math.log(Math.max(r(), 1e-12))) * Math.cos(2 * Math.PI * r());
  const nd = Float64Array.from({ length: n }, normal);
  const zeros = new Uint32Array(n);
  for (let i = 0; i < n; i++) zeros[i] = ((w[i]! & 0x11111111) + 0x77777777) >>> 0; // nibbles 7 or 8
  return {
    raw, fp8,
    scale: {
      mlxScales: u16((i) => ms[i]!, f32ToBf16Bits),
      mlxBiases: u16((i) => mb[i]!, f32ToBf16Bits),
      // AWQ/GPTQ: s > 0 in [1e-3, 4e-3], |q − z| ≤ 15: |w| ≤ 0.06.
      intScales: u16(() => 1e-3 + 3e-3 * r(), f32ToF16Bits),
      awqZeros: new Uint8Array(zeros.buffer),
      // FP8: |q| < 2 times s in [5e-3, 1.5e-2].
      fp8Scales: f32(() => 5e-3 + 1e-2 * r()),
      normalF16: u16((i) => nd[i]!, f32ToF16Bits),
      normalBf16: u16((i) => nd[i]!, f32ToBf16Bits),
    },
  };
}

/** Writes `bytes` bytes cut from `pool` at offsets drawn from `seed` (4-byte aligned). */
function fromPool(pool: Uint8Array, bytes: number, seed: number): (w: ChunkWriter) => void {
  return (w) => {
    const r = rng(seed);
    for (let done = 0; done < bytes;) {
      const len = Math.min(bytes - done, CHUNK, pool.length);
      const off = Math.floor((r() * (pool.length - len)) / 4) * 4;
      w(pool.subarray(off, off + len));
      done += len;
    }
  };
}

function constant(bytes: number, word: number, elem: 2 | 4): (w: ChunkWriter) => void {
  return (w) => {
    const n = Math.min(bytes, CHUNK);
    const c = new Uint8Array(n);
    const dv = new DataView(c.buffer);
    for (let i = 0; i < n; i += elem) elem === 2 ? dv.setUint16(i, word, true) : dv.setUint32(i, word, true);
    for (let done = 0; done < bytes; done += n) w(c.subarray(0, Math.min(n, bytes - done)));
  };
}

const ONE = { BF16: 0x3f80, F16: 0x3c00 } as const;

/** The tensors of `format` for one linear layer `name` (without `.weight`) of [out, in]. */
function linear(format: HfqFormat, P: Pools, name: string, out: number, K: number, seed: number): Planned[] {
  const s = P.scale;
  switch (format) {
    case 'mlx': {
      if (K % 64) throw new Error(`${name}: ${K} inputs are not whole groups of 64`);
      const g = K / 64;
      return [
        { name: `${name}.weight`, dtype: 'U32', shape: [out, K / 8], bytes: out * K / 2, fill: fromPool(P.raw, out * K / 2, seed) },
        { name: `${name}.scales`, dtype: 'BF16', shape: [out, g], bytes: out * g * 2, fill: fromPool(s.mlxScales!, out * g * 2, seed + 1) },
        { name: `${name}.biases`, dtype: 'BF16', shape: [out, g], bytes: out * g * 2, fill: fromPool(s.mlxBiases!, out * g * 2, seed + 1) },
      ];
    }
    case 'awq': case 'gptq': {
      if (K % 128 || out % 8) throw new Error(`${name}: [${out}, ${K}] is not whole groups of 128 and words of 8`);
      const g = K / 128;
      const common: Planned[] = [
        { name: `${name}.qzeros`, dtype: 'I32', shape: [g, out / 8], bytes: g * out / 2,
          fill: format === 'awq' ? fromPool(s.awqZeros!, g * out / 2, seed + 2) : constant(g * out / 2, 0x77777777, 4) },
        { name: `${name}.scales`, dtype: 'F16', shape: [g, out], bytes: g * out * 2, fill: fromPool(s.intScales!, g * out * 2, seed + 1) },
      ];
      if (format === 'awq') return [{ name: `${name}.qweight`, dtype: 'I32', shape: [K, out / 8], bytes: K * out / 2, fill: fromPool(P.raw, K * out / 2, seed) }, ...common];
      const gIdx: (w: ChunkWriter) => void = (w) => {
        const a = new Int32Array(K);
        for (let i = 0; i < K; i++) a[i] = i >> 7;
        w(new Uint8Array(a.buffer));
      };
      return [
        { name: `${name}.qweight`, dtype: 'I32', shape: [K / 8, out], bytes: K * out / 2, fill: fromPool(P.raw, K * out / 2, seed) },
        ...common,
        { name: `${name}.g_idx`, dtype: 'I32', shape: [K], bytes: K * 4, fill: gIdx },
      ];
    }
    case 'fp8': {
      const so = Math.ceil(out / 128), si = Math.ceil(K / 128);
      return [
        { name: `${name}.weight`, dtype: 'F8_E4M3', shape: [out, K], bytes: out * K, fill: fromPool(P.fp8, out * K, seed) },
        { name: `${name}.weight_scale_inv`, dtype: 'F32', shape: [so, si], bytes: so * si * 4, fill: fromPool(s.fp8Scales!, so * si * 4, seed + 1) },
      ];
    }
  }
}

/** The 16-bit dtype a format keeps its unquantized tensors in. */
const denseDtype = (format: HfqFormat) => (format === 'awq' || format === 'gptq' ? 'F16' : 'BF16') as 'F16' | 'BF16';

function dense(format: HfqFormat, P: Pools, name: string, shape: number[], seed: number): Planned {
  const dt = denseDtype(format), bytes = shape.reduce((a, b) => a * b, 2);
  return { name, dtype: dt, shape, bytes, fill: fromPool(dt === 'F16' ? P.scale.normalF16! : P.scale.normalBf16!, bytes, seed) };
}

function norm(format: HfqFormat, name: string, n: number): Planned {
  const dt = denseDtype(format);
  return { name, dtype: dt, shape: [n], bytes: 2 * n, fill: constant(2 * n, ONE[dt], 2) };
}

type Cfg = Record<string, unknown> & { hidden_size: number; intermediate_size: number; num_hidden_layers: number; vocab_size: number;
  num_attention_heads: number; num_key_value_heads: number; tie_word_embeddings: boolean };

/** Every tensor of the checkpoint, in the order written. */
function plan(format: HfqFormat, c: Cfg, P: Pools): Planned[] {
  const H = c.hidden_size, V = c.vocab_size;
  const out: Planned[] = [];
  let seed = 1000;
  const lin = (name: string, rows: number, K: number) => out.push(...linear(format, P, name, rows, K, (seed += 10)));
  // Embeddings and lm_head: MLX quantizes them (mlx-community does); the others keep 16 bits.
  if (format === 'mlx') lin('model.embed_tokens', V, H);
  else out.push(dense(format, P, 'model.embed_tokens.weight', [V, H], (seed += 10)));
  const mla = 'kv_lora_rank' in c;
  for (let i = 0; i < c.num_hidden_layers; i++) {
    const p = `model.layers.${i}.`, a = `${p}self_attn.`;
    out.push(norm(format, `${p}input_layernorm.weight`, H), norm(format, `${p}post_attention_layernorm.weight`, H));
    if (mla) {
      const d = c as unknown as typeof DEEPSEEK_V2_LITE;
      const N = d.num_attention_heads, L = d.kv_lora_rank, R = d.qk_rope_head_dim;
      lin(`${a}q_proj`, N * (d.qk_nope_head_dim + R), H);
      lin(`${a}kv_a_proj_with_mqa`, L + R, H);
      out.push(norm(format, `${a}kv_a_layernorm.weight`, L));
      lin(`${a}kv_b_proj`, N * (d.qk_nope_head_dim + d.v_head_dim), L);
      lin(`${a}o_proj`, H, N * d.v_head_dim);
      if (i < d.first_k_dense_replace) {
        for (const [n, r, k] of [['gate_proj', d.intermediate_size, H], ['up_proj', d.intermediate_size, H], ['down_proj', H, d.intermediate_size]] as const) lin(`${p}mlp.${n}`, r, k);
      } else {
        const I = d.moe_intermediate_size, S = I * d.n_shared_experts;
        out.push(dense(format, P, `${p}mlp.gate.weight`, [d.n_routed_experts, H], (seed += 10)));
        for (let e = 0; e < d.n_routed_experts; e++) {
          for (const [n, r, k] of [['gate_proj', I, H], ['up_proj', I, H], ['down_proj', H, I]] as const) lin(`${p}mlp.experts.${e}.${n}`, r, k);
        }
        for (const [n, r, k] of [['gate_proj', S, H], ['up_proj', S, H], ['down_proj', H, S]] as const) lin(`${p}mlp.shared_experts.${n}`, r, k);
      }
    } else {
      const D = (c.head_dim as number | undefined) ?? H / c.num_attention_heads;
      lin(`${a}q_proj`, c.num_attention_heads * D, H);
      lin(`${a}k_proj`, c.num_key_value_heads * D, H);
      lin(`${a}v_proj`, c.num_key_value_heads * D, H);
      lin(`${a}o_proj`, H, c.num_attention_heads * D);
      lin(`${p}mlp.gate_proj`, c.intermediate_size, H);
      lin(`${p}mlp.up_proj`, c.intermediate_size, H);
      lin(`${p}mlp.down_proj`, H, c.intermediate_size);
    }
  }
  out.push(norm(format, 'model.norm.weight', H));
  if (!c.tie_word_embeddings) {
    if (format === 'mlx') lin('lm_head', V, H);
    else out.push(dense(format, P, 'lm_head.weight', [V, H], (seed += 10)));
  }
  return out;
}

/** The config.json of `format` over a shape's HF config. */
export function hfQuantConfig(format: HfqFormat, shape: object): Record<string, unknown> {
  const c: Record<string, unknown> = { ...shape, torch_dtype: denseDtype(format) === 'F16' ? 'float16' : 'bfloat16' };
  switch (format) {
    case 'mlx':
      c.quantization = { group_size: 64, bits: 4 };
      c.quantization_config = { group_size: 64, bits: 4 };
      break;
    case 'awq':
      c.quantization_config = { quant_method: 'awq', bits: 4, group_size: 128, zero_point: true, version: 'gemm', modules_to_not_convert: null };
      break;
    case 'gptq':
      c.quantization_config = { quant_method: 'gptq', bits: 4, group_size: 128, desc_act: false, sym: true, damp_percent: 0.01,
        true_sequential: true, static_groups: false, checkpoint_format: 'gptq', model_name_or_path: null, model_file_base_name: null };
      break;
    case 'fp8':
      c.quantization_config = { activation_scheme: 'dynamic', fmt: 'e4m3', quant_method: 'fp8', weight_block_size: [128, 128] };
      break;
  }
  return c;
}

export interface HfqWritten { dir: string; format: HfqFormat; shape: HfqShape | object; bytes: number; tensors: number; shards: number; seconds: number }

/**
 * Writes a random checkpoint of `shape` (a name of HFQ_SHAPES, or an HF config of a Llama or DeepSeek-V2
 * without q LoRA) in `format` into `dir` (made if missing): config.json, then
 * one model.safetensors or, past `shardBytes` (default 4 GiB), model-0000i-of-0000n.safetensors shards
 * and model.safetensors.index.json, as the Hub lays them out.
 */
export function writeHfQuant(dir: string, format: HfqFormat, shape: HfqShape | object, o: { shardBytes?: number } = {}): HfqWritten {
  const t0 = performance.now();
  const cfg = typeof shape === 'string' ? HFQ_SHAPES[shape] : shape;
  if (!cfg) throw new Error(`writeHfQuant: unknown shape ${String(shape)} (${Object.keys(HFQ_SHAPES).join(', ')})`);
  if (!HFQ_FORMATS.includes(format)) throw new Error(`writeHfQuant: unknown format ${format} (${HFQ_FORMATS.join(', ')})`);
  pools ??= makePools();
  const tensors = plan(format, cfg as unknown as Cfg, pools);
  // Shards of at most shardBytes of data, in order.
  const limit = o.shardBytes ?? 4 * 2 ** 30;
  const shards: Planned[][] = [[]];
  let size = 0;
  for (const t of tensors) {
    if (size > 0 && size + t.bytes > limit) { shards.push([]); size = 0; }
    shards[shards.length - 1]!.push(t);
    size += t.bytes;
  }
  mkdirSync(dir, { recursive: true });
  const enc = new TextEncoder();
  const cfgText = `${JSON.stringify(hfQuantConfig(format, cfg), null, 1)}\n`;
  const fd0 = openSync(join(dir, 'config.json'), 'w');
  writeSync(fd0, enc.encode(cfgText));
  closeSync(fd0);
  const n = shards.length;
  const fileName = (i: number) => (n === 1 ? 'model.safetensors' : `model-${String(i + 1).padStart(5, '0')}-of-${String(n).padStart(5, '0')}.safetensors`);
  const weightMap: Record<string, string> = {};
  let total = 0;
  for (const [i, list] of shards.entries()) {
    const header: Record<string, unknown> = { __metadata__: { format: format === 'mlx' ? 'mlx' : 'pt' } };
    let off = 0;
    for (const t of list) {
      header[t.name] = { dtype: t.dtype, shape: t.shape, data_offsets: [off, off + t.bytes] };
      off += t.bytes;
      weightMap[t.name] = fileName(i);
    }
    let json = JSON.stringify(header);
    json += ' '.repeat((8 - (enc.encode(json).length % 8)) % 8);
    const hb = enc.encode(json);
    const fd = openSync(join(dir, fileName(i)), 'w');
    try {
      const head = new Uint8Array(8 + hb.length);
      new DataView(head.buffer).setBigUint64(0, BigInt(hb.length), true);
      head.set(hb, 8);
      writeSync(fd, head);
      for (const t of list) {
        let written = 0;
        t.fill((chunk) => {
          for (let at = 0; at < chunk.length;) at += writeSync(fd, chunk, at, chunk.length - at);
          written += chunk.length;
        });
        if (written !== t.bytes) throw new Error(`writeHfQuant: ${t.name}: wrote ${written} bytes, expected ${t.bytes}`);
      }
    } finally {
      closeSync(fd);
    }
    total += off;
  }
  if (n > 1) {
    const fd = openSync(join(dir, 'model.safetensors.index.json'), 'w');
    writeSync(fd, enc.encode(`${JSON.stringify({ metadata: { total_size: total }, weight_map: weightMap }, null, 1)}\n`));
    closeSync(fd);
  }
  return { dir, format, shape, bytes: total, tensors: tensors.length, shards: n, seconds: (performance.now() - t0) / 1000 };
}
