// gpt-oss (GptOssForCausalLM) as transformers computes it (SPEC §7; ../shared/goldens-layers README):
// per layer h += o(attn(rope(q(x)), rope(k(x)), v(x))) with x = rmsnorm(h), q/k/v/o with biases, then
// h += moe(rmsnorm(h)). Attention: head_dim^-0.5, a learned sink logit per head (softmax over the
// scores and the sink, the sink's share dropped: planAttention's sinks), a sliding window on the
// layers layer_types names; RoPE rotate-half with YaRN's tables (truncate false: rope.ts).
// MoE in every layer (GptOssMLP): router logits = x·Wᵀ + b in f32, the top-k experts by logit, their
// weights a softmax over those k (ops.route's family 'gpt_oss'); each expert
// out = down(swiglu_oai(gate_up(x) + b_gu)) + b_down with swiglu_oai (clamp(u, ±limit) + 1)·g·sigmoid(1.702·g),
// g = min(gate, limit) (ops.moe's act 'swiglu_oai' and the experts' biases).
//
// Checkpoint layout: gate_up_proj [E, H, 2I] is input-major (x @ W) with gate and up interleaved
// (gate = columns 0, 2, ...), down_proj [E, I, H]; at load both become the experts' [E, 2I, H] (gate rows,
// then up rows) and [E, H, I], the gate_up bias de-interleaved the same way. MXFP4 experts as the
// released checkpoints ship them (formats/hf_mxfp4.ts) arrive already as rows of [E, 2I, H] and [E, H, I] blocks.
import type { Runtime } from '../core/runtime.js';
import type { Tensor } from '../core/tensor.js';
import type { PagedKVCache } from '../attention/paged_cache.js';
import { createGqaCaches, gqaAttention, gqaCacheBytes } from './llama.js';
import { planAttention, type AttentionPlan } from '../attention/paged.js';
import { createLinearOnDevice, linear, linearWeightBytes, type LinearWeight } from '../ops/gemm.js';
import { createExperts, createExpertsOnDevice, createQuantExperts, expertWeightBytes, moe, route, withExpertBiases, type ExpertWeights, type MoeRouting } from '../ops/moe.js';
import { QUANT_FORMATS } from '../core/quant.js';
import { rmsNorm } from '../ops/norm.js';
import type { ModelConfig } from './config.js';
import type { Architecture, StepContext } from './step.js';
import type { WeightDType, WeightReader } from './weights.js';

interface Layer {
  inNorm: Tensor; postNorm: Tensor;
  qkv: LinearWeight; o: LinearWeight;
  /** The sink logit of each query head (host values: a plan option). */
  sinks: Float32Array;
  router: LinearWeight;
  experts: ExpertWeights;
}

/** gate_up_proj [E, H, 2I] (input-major, gate/up interleaved) as [E, 2I, H] gate rows then up rows. */
export function gptOssGateUp(src: Float32Array, E: number, H: number, I: number): Float32Array {
  const out = new Float32Array(E * 2 * I * H);
  for (let e = 0; e < E; e++) {
    const s = e * H * 2 * I, d = e * 2 * I * H;
    for (let k = 0; k < H; k++) {
      for (let n = 0; n < I; n++) {
        out[d + n * H + k] = src[s + k * 2 * I + 2 * n];
        out[d + (I + n) * H + k] = src[s + k * 2 * I + 2 * n + 1];
      }
    }
  }
  return out;
}

/** down_proj [E, I, H] (input-major) as [E, H, I]. */
export function gptOssDown(src: Float32Array, E: number, H: number, I: number): Float32Array {
  const out = new Float32Array(E * H * I);
  for (let e = 0; e < E; e++) for (let n = 0; n < I; n++) for (let c = 0; c < H; c++) out[e * H * I + c * I + n] = src[e * I * H + n * H + c];
  return out;
}

/** gate_up_proj_bias [E, 2I] (interleaved) as [E, 2I] gate then up. */
export function gptOssGateUpBias(src: Float32Array, E: number, I: number): Float32Array {
  const out = new Float32Array(E * 2 * I);
  for (let e = 0; e < E; e++) for (let n = 0; n < I; n++) {
    out[e * 2 * I + n] = src[e * 2 * I + 2 * n];
    out[e * 2 * I + I + n] = src[e * 2 * I + 2 * n + 1];
  }
  return out;
}

/** Random MXFP4 blocks: rows of K values, codes uniform (xorshift32 from `seed`), every E8M0 scale `e`. */
function randomMxfp4Rows(rows: number, K: number, seed: number, e: number): Uint8Array {
  const bb = QUANT_FORMATS.MXFP4.blockBytes, n = rows * (K / 32);
  const out = new Uint8Array(n * bb);
  const words = new Uint32Array(out.buffer, 0, out.length >>> 2);
  let x = seed | 1;
  for (let i = 0; i < words.length; i++) {
    x ^= x << 13; x ^= x >>> 17; x ^= x << 5;
    words[i] = x;
  }
  for (let b = 0; b < n; b++) out[b * bb] = e;
  return out;
}

/**
 * gpt-oss's experts as random MXFP4 blocks for benchmarks of a real shape: uniform codes (standard
 * deviation 2.9 in E2M1 units) under a scale of 2^-7 (E8M0 120) give weights of standard deviation
 * 0.023, and zero biases.
 */
export function randomMxfp4Experts(rt: Runtime, E: number, H: number, I: number, seed: number): ExpertWeights {
  const gateUp = randomMxfp4Rows(E * 2 * I, H, seed, 120), down = randomMxfp4Rows(E * H, I, (seed ^ 0x9e3779b9) >>> 0, 120);
  return createQuantExperts(rt, { E, H, I, gateUpType: 'MXFP4', gateUp, downType: 'MXFP4', down, gateUpBias: new Float32Array(E * 2 * I), downBias: new Float32Array(E * H) });
}

export class GptOssFamily implements Architecture {
  readonly caches: PagedKVCache[] = [];
  readonly cacheDTypes = ['f32', 'f16', 'bf16', 'fp8e4m3'] as const;
  private readonly layers: Layer[] = [];
  private readonly norms: Tensor[] = [];
  private embedW!: LinearWeight;
  private normW!: Tensor;
  private lmHeadW!: LinearWeight;
  private acts: Record<'x' | 'qkv' | 'attn' | 'logits' | 'routeIds' | 'routeWeights', Tensor> | null = null;
  /** The step's attention plans, one a layer (each layer has its own sinks). */
  private plans: AttentionPlan[] = [];
  private readonly routing: MoeRouting;

  constructor(private readonly rt: Runtime, readonly cfg: ModelConfig) {
    const m = cfg.moe!;
    this.routing = { family: 'gpt_oss', scoring: 'softmax', method: 'greedy', topK: m.numExpertsPerTok, nGroup: null, topkGroup: null, normTopkProb: true, routedScalingFactor: 1 };
  }

  get embed(): LinearWeight { return this.embedW; }
  get lmHead(): LinearWeight { return this.lmHeadW; }

  private async experts(r: WeightReader, p: string, dtype: WeightDType): Promise<ExpertWeights> {
    const c = this.cfg, m = c.moe!, rt = this.rt;
    const E = m.numRoutedExperts, H = c.hiddenSize, I = m.moeIntermediateSize;
    const gub = gptOssGateUpBias((await r.read(`${p}gate_up_proj_bias`, 'f32')) as Float32Array, E, I);
    const db = (await r.read(`${p}down_proj_bias`, 'f32')) as Float32Array;
    if (r.quantized(`${p}gate_up_proj`)) {
      // formats/hf_mxfp4.ts's blocks, already [E, 2I, H] rows (gate then up) and [E, H, I].
      return withExpertBiases(rt, await r.experts(rt, p, E, H, I, dtype), { gateUpBias: gub, downBias: db });
    }
    const gu = gptOssGateUp((await r.read(`${p}gate_up_proj`, 'f32')) as Float32Array, E, H, I);
    const dn = gptOssDown((await r.read(`${p}down_proj`, 'f32')) as Float32Array, E, H, I);
    return createExperts(rt, { E, H, I, dtype, gateUp: gu, down: dn, gateUpBias: gub, downBias: db });
  }

  async load(r: WeightReader, dtype: WeightDType): Promise<void> {
    const c = this.cfg, rt = this.rt;
    this.embedW = await r.linear(rt, ['model.embed_tokens.weight'], dtype);
    for (let i = 0; i < c.numLayers; i++) {
      const p = `model.layers.${i}.`, a = `${p}self_attn.`;
      const layer: Partial<Layer> = {};
      layer.inNorm = await r.vector(rt, `${p}input_layernorm.weight`);
      layer.qkv = await r.linear(rt, [`${a}q_proj.weight`, `${a}k_proj.weight`, `${a}v_proj.weight`], dtype,
        c.attentionBias.qkv ? [`${a}q_proj.bias`, `${a}k_proj.bias`, `${a}v_proj.bias`] : undefined);
      layer.o = await r.linear(rt, [`${a}o_proj.weight`], dtype, c.attentionBias.o ? [`${a}o_proj.bias`] : undefined);
      layer.sinks = Float32Array.from((await r.read(`${a}sinks`, 'f32')) as Float32Array);
      layer.postNorm = await r.vector(rt, `${p}post_attention_layernorm.weight`);
      // The router runs in f32, as transformers does.
      layer.router = await r.linear(rt, [`${p}mlp.router.weight`], 'f32', [`${p}mlp.router.bias`]);
      layer.experts = await this.experts(r, `${p}mlp.experts.`, dtype);
      this.layers.push(layer as Layer);
    }
    this.normW = await r.vector(rt, 'model.norm.weight');
    this.lmHeadW = c.tieWordEmbeddings ? this.embedW : await r.linear(rt, ['lm_head.weight'], dtype);
  }

  /**
   * Random weights made on the GPU (benchmarks): linear weights and experts of standard deviation std,
   * norms ones, sinks zero. A config with quantization_config mxfp4 gets MXFP4 experts as the released
   * checkpoints keep them (randomMxfp4Experts: made on the host, every block's scale 2^-7, biases zero).
   */
  initRandom(dtype: WeightDType, seed: number, std = 0.02): void {
    const c = this.cfg, rt = this.rt, m = c.moe!;
    let n = seed;
    const lin = (N: number, K: number, dt: WeightDType = dtype) => createLinearOnDevice(rt, { N, K, dtype: dt, seed: (n++) >>> 0, std });
    const ones = (len: number) => {
      const t = rt.tensor(new Float32Array(len).fill(1), [len], 'f32');
      this.norms.push(t);
      return t;
    };
    const H = c.hiddenSize, D = c.headDim, qw = c.numHeads * D, kvw = 2 * c.numKvHeads * D;
    this.embedW = lin(c.vocabSize, H);
    for (let i = 0; i < c.numLayers; i++) {
      this.layers.push({
        inNorm: ones(H), postNorm: ones(H), qkv: lin(qw + kvw, H), o: lin(H, qw), sinks: new Float32Array(c.numHeads),
        router: lin(m.numRoutedExperts, H, 'f32'),
        experts: m.gptOss?.mxfp4
          ? randomMxfp4Experts(rt, m.numRoutedExperts, H, m.moeIntermediateSize, (n++) >>> 0)
          : createExpertsOnDevice(rt, { E: m.numRoutedExperts, H, I: m.moeIntermediateSize, dtype, seed: (n++) >>> 0, std }),
      });
    }
    this.normW = ones(H);
    this.lmHeadW = c.tieWordEmbeddings ? this.embedW : lin(c.vocabSize, H);
  }

  /** Bytes a decode step of `batch` sequences reads: the dense weights, and per layer the experts chosen (deepseek.ts's estimate). */
  weightBytes(batch: number): number {
    let total = linearWeightBytes(this.lmHeadW);
    const k = this.cfg.moe!.numExpertsPerTok;
    for (const l of this.layers) {
      total += linearWeightBytes(l.qkv) + linearWeightBytes(l.o) + linearWeightBytes(l.router);
      const E = l.experts.E;
      total += expertWeightBytes(l.experts, batch <= 1 ? k : E * (1 - (1 - k / E) ** batch));
    }
    return total;
  }

  storedWeightBytes(): number {
    let total = linearWeightBytes(this.embedW) + (this.lmHeadW !== this.embedW ? linearWeightBytes(this.lmHeadW) : 0);
    for (const l of this.layers) {
      total += linearWeightBytes(l.qkv) + linearWeightBytes(l.o) + linearWeightBytes(l.router) + expertWeightBytes(l.experts);
      for (const t of [l.inNorm, l.postNorm, l.qkv.bias, l.o.bias, l.experts.gateUpBias, l.experts.downBias]) total += t?.byteLength ?? 0;
    }
    return total;
  }

  cacheBytes(dtype: string): { perToken: number; perBufferRow: number } {
    return gqaCacheBytes(this.cfg, dtype);
  }

  createCaches(o: { numBlocks: number; blockSize: number; dtype: string }): void {
    this.caches.push(...createGqaCaches(this.rt, this.cfg, o));
  }

  allocate(maxTokens: number): void {
    const c = this.cfg, rt = this.rt, m = c.moe!;
    const qw = c.numHeads * c.headDim, kvw = 2 * c.numKvHeads * c.headDim;
    this.acts = {
      x: rt.zeros([maxTokens, c.hiddenSize]), qkv: rt.zeros([maxTokens, qw + kvw]), attn: rt.zeros([maxTokens, qw]),
      logits: rt.zeros([maxTokens, m.numRoutedExperts]),
      routeIds: rt.zeros([maxTokens, m.numExpertsPerTok], 'i32'), routeWeights: rt.zeros([maxTokens, m.numExpertsPerTok]),
    };
  }

  /** The last step's plans back to the pool before the step's submit (Architecture.releasePlans). */
  releasePlans(): void {
    for (const p of this.plans) p.destroy();
    this.plans = [];
  }

  plan(s: StepContext): void {
    for (const p of this.plans) p.destroy();
    const c = this.cfg, a = this.acts!, W = (c.numHeads + 2 * c.numKvHeads) * c.headDim;
    this.planSigs = [];
    this.plans = this.layers.map((L, l) => {
      const w = c.layers[l].slidingWindow;
      const p = planAttention(this.rt, s.meta, {
        cache: this.caches[l], numHeads: c.numHeads, scale: c.attentionScale, causal: true, sinks: L.sinks, ...(w ? { slidingWindow: w } : {}),
      });
      // Prepared before the next layer's plan is made, so each plan's buffers come back to the pool in
      // one run and the next step's plans take the same ones (see LlamaFamily.plan): made all first and
      // prepared after, the 24 plans' buffers rotated and no step graph ever replayed (the H200's grid).
      this.planSigs.push(p.plan.signature(s.T, a.qkv.dtype, a.attn.dtype, W, false));
      return p;
    });
  }

  private planSigs: string[] = [];

  signature(s: StepContext): string | null {
    return `${s.T}|${this.rt.idOf(s.cos.buffer)},${this.rt.idOf(s.sin.buffer)}|${this.planSigs.join('|')}`;
  }

  forward(s: StepContext): Tensor {
    const c = this.cfg, rt = this.rt, a = this.acts!, m = c.moe!.gptOss!;
    const { T, h } = s;
    const eps = c.rmsEps;
    for (let l = 0; l < c.numLayers; l++) {
      const L = this.layers[l];
      rmsNorm(rt, h, L.inNorm, eps, { rows: T, out: a.x });
      linear(rt, a.x, L.qkv, { rows: T, out: a.qkv });
      gqaAttention(rt, s, c, a.qkv, a.attn, this.caches[l], this.plans[l]);
      linear(rt, a.attn, L.o, { rows: T, out: h, accumulate: true });
      rmsNorm(rt, h, L.postNorm, eps, { rows: T, out: a.x });
      linear(rt, a.x, L.router, { rows: T, out: a.logits });
      const routed = route(rt, a.logits, this.routing, { rows: T, ids: a.routeIds, weights: a.routeWeights });
      moe(rt, a.x, routed, L.experts, { rows: T, out: h, accumulate: true, act: 'swiglu_oai', alpha: m.swigluAlpha, limit: m.swigluLimit });
    }
    rmsNorm(rt, h, this.normW, eps, { rows: T, out: a.x });
    return a.x;
  }

  destroy(): void {
    for (const p of this.plans) p.destroy();
    this.plans = [];
    for (const c of this.caches) c.destroy();
    for (const l of this.layers) {
      for (const t of [l.inNorm, l.postNorm]) t?.destroy();
      for (const w of [l.qkv, l.o, l.router]) w?.destroy();
      l.experts?.destroy();
    }
    for (const t of this.norms) t.destroy();
    if (this.lmHeadW !== this.embedW) this.lmHeadW?.destroy();
    this.embedW?.destroy();
    this.normW?.destroy();
    if (this.acts) for (const t of Object.values(this.acts)) t.destroy();
  }
}
