// Whole-model benchmark: a model of Llama-3.2-1B's shape (hidden 2048, 16 layers, 32/8 heads of 64, MLP
// 8192, vocab 128256, tied embeddings, llama3 RoPE) with random bf16 weights made on the GPU (nothing
// downloaded), f16 KV cache, block 16. Per decode shape (batch × context; contexts are synthetic: their
// blocks are taken without a prefill, the attention reads them all the same):
//   - tokens/s, the step's wall time (steps recorded and submitted as generate does, two in flight)
//     against its GPU time (its passes timed whole), the host's part of a step;
//   - the share of the bandwidth roofline: bytes of weights and K/V one step reads over the read
//     ceiling measured in the same run, against the GPU time and against the wall time.
// Prefill: tokens/s of a 512-token prompt, and the linear layers' TFLOP/s in it against the FMA ceiling.
// The linear kernels alone: GEMV (M 1) GB/s and GEMM (M 512) TFLOP/s at the model's MLP shape.
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

export interface ModelDecodeRow {
  batch: number; context: number;
  wallMs: number; gpuMs: number | null; hostMs: number;
  tokensPerSecond: number;
  weightBytes: number; kvBytes: number;
  /** Roofline time over the GPU time (and over the wall time), percent. */
  pctRooflineGpu: number; pctRooflineWall: number;
  /** (wall − GPU) / wall, percent. */
  hostOverheadPct: number;
  error?: string;
}

export interface ModelBench {
  name: string; dtype: string; layers: number; params: number;
  decode: ModelDecodeRow[];
  prefill: { tokens: number; wallMs: number; gpuMs: number | null; tokensPerSecond: number; linearTflops: number; pctFma: number; linearMs: number } | null;
  kernels: { what: string; ms: number; gbs?: number; tflops?: number; pct: number }[];
  error?: string;
}

/** The linear layers' FLOPs of a prefill step of T tokens (the lm_head runs on the last token only). */
function prefillLinearFlops(c: typeof LLAMA_3_2_1B, T: number): number {
  const H = c.hidden_size, D = c.head_dim, qw = c.num_attention_heads * D, kvw = 2 * c.num_key_value_heads * D, I = c.intermediate_size;
  const perLayer = H * qw + H * kvw + qw * H + H * 2 * I + I * H;
  return 2 * T * perLayer * c.num_hidden_layers + 2 * c.vocab_size * H;
}

export async function benchModel(engine: Engine, ceilings: Ceilings, o: { config?: typeof LLAMA_3_2_1B; name?: string; batches: number[]; contexts: number[];
  prefill: number; steps: number }): Promise<ModelBench> {
  const config = o.config ?? LLAMA_3_2_1B;
  const maxB = Math.max(...o.batches), maxC = Math.max(...o.contexts);
  const bs = 16;
  const numBlocks = maxB * Math.ceil((maxC + o.steps + 16) / bs) + Math.ceil((o.prefill + 16) / bs);
  const res: ModelBench = { name: o.name ?? 'Llama-3.2-1B shape', dtype: 'bf16', layers: config.num_hidden_layers, params: 0, decode: [], prefill: null, kernels: [] };
  let model: Model | null = null;
  try {
    model = await createRandomModel(engine, { config, dtype: 'bf16', kvCache: { numBlocks, blockSize: bs, dtype: 'f16' }, maxTokensPerStep: Math.max(o.prefill, maxB), maxSeqsPerStep: maxB });
    const wBytes = model.stepBytes(0).weights;
    res.params = wBytes / 2;
    for (const batch of o.batches) {
      for (const context of o.contexts) {
        const row: ModelDecodeRow = { batch, context, wallMs: NaN, gpuMs: null, hostMs: NaN, tokensPerSecond: NaN, weightBytes: wBytes, kvBytes: NaN,
          pctRooflineGpu: NaN, pctRooflineWall: NaN, hostOverheadPct: NaN };
        try {
          const p = await model.profileDecode({ batch, context, steps: o.steps });
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
      const linearMs = Object.entries(p.kernels ?? {}).filter(([k]) => /^(gemm|gemv)/.test(k)).reduce((a, [, v]) => a + v, 0);
      const tf = linearMs ? flops / (linearMs * 1e9) : NaN;
      res.prefill = { tokens: o.prefill, wallMs: p.wallMs, gpuMs: p.gpuMs, tokensPerSecond: (1000 * o.prefill) / p.wallMs, linearMs,
        linearTflops: tf, pctFma: (100 * tf) / ceilings.fmaTflops };
    }
    model.destroy();
    model = null;
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
      res.kernels.push(M <= 64
        ? { what: `GEMV M ${M}, ${N}×${K} bf16`, ms: t.medianMs, gbs, tflops, pct: (100 * gbs) / ceilings.readGBs }
        : { what: `GEMM M ${M}, ${N}×${K} bf16`, ms: t.medianMs, gbs, tflops, pct: (100 * tflops) / ceilings.fmaTflops });
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
