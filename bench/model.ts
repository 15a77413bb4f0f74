// Whole-model benchmark: a model of Llama-3.2-1B's shape (hidden 2048, 16 layers, 32/8 heads of 64, MLP
// 8192, vocab 128256, tied embeddings, llama3 RoPE) with random bf16 weights made on the GPU (nothing
// downloaded), f16 KV cache, block 16. Per decode shape (batch × context; contexts are synthetic: their
// blocks are taken without a prefill, the attention reads them all the same):
//   - tokens/s, the step's wall time (steps recorded and submitted as generate does, three in flight)
//     against its GPU time (its passes timed whole), the host's part of a step;
//   - the share of the bandwidth roofline: bytes of weights and K/V one step reads over the read
//     ceiling measured in the same run, against the GPU time and against the wall time.
// Prefill: tokens/s of a 512-token prompt, and the linear layers' TFLOP/s in it against the FMA ceiling.
// The linear kernels alone: GEMV (M 1) GB/s and GEMM (M 512) TFLOP/s at the model's MLP shape.
//
// The same for DeepSeek-V2-Lite's shape (MLA over a latent cache, 64 routed experts top-6 + 2 shared),
// its latent cache in f16 and in fp8_ds_mla; a MoE step reads only the experts its tokens chose (the
// roofline counts E·(1 − (1 − k/E)^batch) of them: random weights route near-uniformly).
import { createRandomModel, ops, randn, type Engine, type Model } from 'webinfer';
import { timeOp, type Ceilings } from './harness';

export const LLAMA_3_2_1B = {
  architectures: ['LlamaForCausalLM'], hidden_size: 2048, intermediate_size: 8192, num_hidden_layers: 16,
  num_attention_heads: 32, num_key_value_heads: 8, head_dim: 64, vocab_size: 128256, rms_norm_eps: 1e-5,
  max_position_embeddings: 131072, tie_word_embeddings: true, rope_theta: 500000,
  rope_scaling: { rope_type: 'llama3', factor: 32, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 8192 },
  bos_token_id: 128000, eos_token_id: 128001,
};

/** A much smaller Llama for software adapters (--quick) and the default workload. */
export const SMALL_LLAMA = {
  ...LLAMA_3_2_1B, hidden_size: 256, intermediate_size: 512, num_hidden_layers: 4, num_attention_heads: 8,
  num_key_value_heads: 2, head_dim: 32, vocab_size: 2048, max_position_embeddings: 4096,
};

/** DeepSeek-V2-Lite (15.7 B parameters, 2.4 B active): no q LoRA, MLA 512/64/128/128, MoE 64 experts top-6 + 2 shared. */
export const DEEPSEEK_V2_LITE = {
  architectures: ['DeepseekV2ForCausalLM'], model_type: 'deepseek_v2', hidden_size: 2048, intermediate_size: 10944, num_hidden_layers: 27,
  num_attention_heads: 16, num_key_value_heads: 16, kv_lora_rank: 512, q_lora_rank: null, qk_rope_head_dim: 64, qk_nope_head_dim: 128,
  v_head_dim: 128, n_routed_experts: 64, num_experts_per_tok: 6, n_shared_experts: 2, moe_intermediate_size: 1408,
  first_k_dense_replace: 1, moe_layer_freq: 1, topk_method: 'greedy', scoring_func: 'softmax', norm_topk_prob: false,
  routed_scaling_factor: 1.0, n_group: 1, topk_group: 1, vocab_size: 102400, rms_norm_eps: 1e-6, max_position_embeddings: 163840,
  tie_word_embeddings: false, rope_theta: 10000, attention_bias: false,
  rope_scaling: { type: 'yarn', factor: 40, original_max_position_embeddings: 4096, beta_fast: 32, beta_slow: 1, mscale: 0.707, mscale_all_dim: 0.707 },
  bos_token_id: 100000, eos_token_id: 100001,
};

/** A much smaller DeepSeek for software adapters (--quick). */
export const SMALL_DEEPSEEK = {
  ...DEEPSEEK_V2_LITE, hidden_size: 256, intermediate_size: 512, num_hidden_layers: 3, num_attention_heads: 4, num_key_value_heads: 4,
  kv_lora_rank: 128, qk_rope_head_dim: 16, qk_nope_head_dim: 32, v_head_dim: 32, n_routed_experts: 8, num_experts_per_tok: 2,
  n_shared_experts: 1, moe_intermediate_size: 128, vocab_size: 2048, max_position_embeddings: 8192,
};

type AnyConfig = typeof LLAMA_3_2_1B | typeof DEEPSEEK_V2_LITE;

export interface ModelDecodeRow {
  batch: number; context: number;
  wallMs: number; gpuMs: number | null; hostMs: number;
  tokensPerSecond: number;
  weightBytes: number; kvBytes: number;
  /** Roofline time over the GPU time (and over the wall time), percent. */
  pctRooflineGpu: number; pctRooflineWall: number;
  /** (wall − GPU) / wall, percent. */
  hostOverheadPct: number;
  /** Dispatches a decode step records (all layers, sampling included). */
  dispatches?: number;
  /** Share of the timed steps whose layers were replayed (a step graph, tuning.stepGraphs). */
  replayed?: number;
  /** GPU ms of one step per kernel (dispatches timed one by one), where measured. */
  kernels?: Record<string, number>;
  error?: string;
}

export interface ModelBench {
  name: string; dtype: string; cache: string; layers: number;
  /** Parameters a batch-1 decode step reads (linear layers; MoE: the experts chosen). */
  params: number;
  decode: ModelDecodeRow[];
  prefill: { tokens: number; wallMs: number; gpuMs: number | null; tokensPerSecond: number; linearTflops: number; pctFma: number; linearMs: number } | null;
  kernels: { what: string; ms: number; gbs?: number; tflops?: number; pct: number }[];
  /** GPU bytes of the weights as stored (Model.weightBytes). */
  weightBytes?: number;
  error?: string;
}

/**
 * The FLOPs of the GEMM/GEMV/expert kernels in a prefill step of T tokens (the lm_head runs on the last
 * token only; MLA's up-projection of the latent runs in its own kernel and is not counted).
 */
function prefillLinearFlops(c: AnyConfig, T: number): number {
  const H = c.hidden_size;
  let perToken = 0;
  if ('kv_lora_rank' in c) {
    const N = c.num_attention_heads, P = c.qk_nope_head_dim, R = c.qk_rope_head_dim, V = c.v_head_dim, L = c.kv_lora_rank;
    const attn = H * N * (P + R) + H * (L + R) + N * V * H;
    const moeLayers = c.num_hidden_layers - c.first_k_dense_replace;
    perToken = c.num_hidden_layers * attn + c.first_k_dense_replace * 3 * H * c.intermediate_size
      + moeLayers * (H * c.n_routed_experts + (c.num_experts_per_tok + c.n_shared_experts) * 3 * H * c.moe_intermediate_size);
  } else {
    const D = c.head_dim, qw = c.num_attention_heads * D, kvw = 2 * c.num_key_value_heads * D, I = c.intermediate_size;
    perToken = c.num_hidden_layers * (H * qw + H * kvw + qw * H + H * 2 * I + I * H);
  }
  return 2 * T * perToken + 2 * c.vocab_size * H;
}

/** What a model of the bench is loaded from, in place of random bf16 weights made on the GPU (a GGUF file). */
export type ModelLoader = (o: { kvCache: { numBlocks: number; blockSize: number; dtype: 'f16' | 'bf16' | 'fp8_ds_mla' }; maxTokensPerStep: number; maxSeqsPerStep: number }) => Promise<Model>;

export async function benchModel(engine: Engine, ceilings: Ceilings, o: { config?: AnyConfig; name?: string; batches: number[]; contexts: number[];
  prefill: number; steps: number; cache?: 'f16' | 'bf16' | 'fp8_ds_mla'; blockSize?: number; kernels?: boolean;
  /** Load the model (its weights' label in `dtype`) instead of making random bf16 weights of `config`'s shape. */
  load?: ModelLoader; dtype?: string;
  /** With `load`: the loaded model's HF config (for the shape's parameter and FLOP counts), once loaded. */
  configOf?: () => object | null }): Promise<ModelBench> {
  let config: AnyConfig = o.config ?? LLAMA_3_2_1B;
  const cache = o.cache ?? 'f16';
  const maxB = Math.max(...o.batches), maxC = Math.max(...o.contexts);
  const bs = o.blockSize ?? 16;
  const numBlocks = maxB * Math.ceil((maxC + o.steps + 16) / bs) + Math.ceil((o.prefill + 16) / bs);
  const res: ModelBench = { name: o.name ?? 'Llama-3.2-1B shape', dtype: o.dtype ?? 'bf16', cache, layers: config.num_hidden_layers, params: 0, decode: [], prefill: null, kernels: [] };
  let model: Model | null = null;
  try {
    const kvCache = { numBlocks, blockSize: bs, dtype: cache }, maxTokensPerStep = Math.max(o.prefill, maxB), maxSeqsPerStep = maxB;
    model = o.load ? await o.load({ kvCache, maxTokensPerStep, maxSeqsPerStep })
      : await createRandomModel(engine, { config, dtype: 'bf16', kvCache, maxTokensPerStep, maxSeqsPerStep });
    res.weightBytes = model.weightBytes;
    const loaded = o.configOf?.();
    if (loaded) {
      config = loaded as AnyConfig;
      res.layers = config.num_hidden_layers;
    }
    // Parameters a batch-1 step reads: its weights' bytes at 16 bits, or counted from the shape.
    res.params = o.load ? (prefillLinearFlops(config, 1) - 2 * config.vocab_size * config.hidden_size) / 2 + config.vocab_size * config.hidden_size
      : model.stepBytes(0, 1).weights / 2;
    for (const batch of o.batches) {
      for (const context of o.contexts) {
        const wBytes = model.stepBytes(0, batch).weights;
        const row: ModelDecodeRow = { batch, context, wallMs: NaN, gpuMs: null, hostMs: NaN, tokensPerSecond: NaN, weightBytes: wBytes, kvBytes: NaN,
          pctRooflineGpu: NaN, pctRooflineWall: NaN, hostOverheadPct: NaN };
        try {
          const p = await model.profileDecode({ batch, context, steps: o.steps, warmup: 24, perKernel: batch === o.batches[0] || batch === maxB });
          const kv = model.stepBytes(batch * (context + o.steps / 2)).kv;
          const rooflineMs = (wBytes + kv) / (ceilings.readGBs * 1e6);
          Object.assign(row, {
            ...p, kvBytes: kv, tokensPerSecond: (1000 * batch) / p.wallMs,
            pctRooflineGpu: p.gpuMs ? (100 * rooflineMs) / p.gpuMs : NaN, pctRooflineWall: (100 * rooflineMs) / p.wallMs,
            hostOverheadPct: p.gpuMs ? (100 * Math.max(0, p.wallMs - p.gpuMs)) / p.wallMs : NaN,
          });
        } catch (e) {
          row.error = (e as Error).message;
        }
        res.decode.push(row);
      }
    }
    if (o.prefill > 0) {
      const p = await model.profilePrefill({ tokens: o.prefill, perKernel: true });
      const flops = prefillLinearFlops(config, o.prefill);
      const linearMs = Object.entries(p.kernels ?? {}).filter(([k]) => /^(gemm|gemv|ops_moe_gemm|ops_moe_gemv)[:_]/.test(k)).reduce((a, [, v]) => a + v, 0);
      const tf = linearMs ? flops / (linearMs * 1e9) : NaN;
      res.prefill = { tokens: o.prefill, wallMs: p.wallMs, gpuMs: p.gpuMs, tokensPerSecond: (1000 * o.prefill) / p.wallMs, linearMs,
        linearTflops: tf, pctFma: (100 * tf) / ceilings.fmaTflops };
    }
    model.destroy();
    model = null;
    if (o.kernels === false || o.load || 'kv_lora_rank' in config) return res;
    // The linear kernels alone, at the model's MLP shape (gate|up: N = 2·I, K = H), bf16 weights.
    const N = 2 * config.intermediate_size, K = config.hidden_size;
    const w = ops.createLinearOnDevice(engine, { N, K, dtype: 'bf16', seed: 9, std: 0.02 });
    for (const M of [1, 8, 32, o.prefill]) {
      const x = engine.tensor(randn(M * K, 10 + M), [M, K]);
      const out = engine.zeros([M, N]);
      const t = await timeOp(engine, () => { ops.linear(engine, x, w, { out }); }, { samples: 7, perSample: 10 });
      const bytes = N * K * 2 + M * (K + N) * 4;
      const tflops = (2 * M * N * K) / (t.medianMs * 1e9);
      const gbs = bytes / (t.medianMs * 1e6);
      const kernel = { gemv: 'GEMV', gemm: 'GEMM', 'gemm-mma': 'matrix GEMM' }[ops.planLinear(engine, { M, N, K, dtype: 'bf16' }).kernel];
      res.kernels.push(M <= 64
        ? { what: `${kernel} M ${M}, ${N}×${K} bf16`, ms: t.medianMs, gbs, tflops, pct: (100 * gbs) / ceilings.readGBs }
        : { what: `${kernel} M ${M}, ${N}×${K} bf16`, ms: t.medianMs, gbs, tflops, pct: (100 * tflops) / ceilings.fmaTflops });
      x.destroy();
      out.destroy();
    }
    w.destroy();
  } catch (e) {
    res.error = (e as Error).message;
  } finally {
    model?.destroy();
    await engine.sync();
    engine.pool.trim();
  }
  return res;
}
