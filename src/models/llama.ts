// The Llama family (LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM,
// SmolLM3ForCausalLM: its NoPE layers skip the rotation and still write k/v to the cache;
// Phi3ForCausalLM: fused qkv_proj/gate_up_proj, partial rotary, LongRoPE tables; Qwen3MoeForCausalLM), as
// transformers computes it (SPEC §7): per layer h += o(attn(rope(q(x)), rope(k(x)), v(x))) with
// x = rmsnorm(h), then h += down(silu(gate(x)) · up(x)) with x = rmsnorm(h); the family's variations
// are data (q/k/v biases for Qwen2, q/k norms per head for Qwen3, Mistral's and Qwen's sliding windows,
// the rope type), not branches in kernels. Qwen3-MoE is Qwen3 whose MLP, in its sparse layers
// (cfg.layers[l].moe), is routed experts (ops.route's 'qwen3_moe': softmax over all experts, top-k,
// renormalized when norm_topk_prob; ops.moe runs the experts and adds into h); its dense layers
// (mlp_only_layers, decoder_sparse_step) keep the Llama MLP.
//
// Projections: q|k|v fused (one pass after it rotates q in place in its rows and k on its way into the
// cache, and writes v: rope_cache.wgsl, tuning.fuseRopeCache; attention reads q from the rows), gate|up
// fused (down reads silu(gate)·up from its rows); o and down add into the residual stream h in their
// epilogue. Seven dispatches a layer in decode-sized steps on the GEMV, where both norms fold into the
// product after them (tuning.fuseNorms), six where the context is one KV partition; more elsewhere
// (Qwen3's norms, prefill's norm passes, split-K products). A step that repeats one already recorded
// replays its commands (Model's step graphs).
import type { Runtime } from '../core/runtime.js';
import type { Tensor } from '../core/tensor.js';
import { createPagedKVCache, encodeCacheWrite, encodeRopeCacheWrite, ropeCacheWriteFits, type PagedKVCache } from '../attention/paged_cache.js';
import type { DType } from '../core/dtype.js';
import { planAttention, type AttentionPlan } from '../attention/paged.js';
import { createLinearOnDevice, linear, linearWeightBytes, planLinear, type LinearWeight } from '../ops/gemm.js';
import { createExpertsOnDevice, expertWeightBytes, moe, route, type ExpertWeights, type MoeRouting } from '../ops/moe.js';
import { rmsNorm } from '../ops/norm.js';
import { rope } from '../ops/rope.js';
import type { ModelConfig } from './config.js';
import type { WeightDType, WeightReader } from './weights.js';
import type { Architecture, StepContext } from './step.js';

interface LayerWeights {
  inNorm: Tensor; postNorm: Tensor;
  qkv: LinearWeight; o: LinearWeight;
  qNorm: Tensor | null; kNorm: Tensor | null;
  /** The dense MLP; null in a Qwen3-MoE sparse layer, which has `moe` instead. */
  gateUp: LinearWeight | null; down: LinearWeight | null;
  moe: { router: LinearWeight; experts: ExpertWeights } | null;
}

/** Bytes one token takes in a layer's K and V caches (separate buffers) of Hkv heads of headDim (Llama, Gemma 2, gpt-oss). */
export function gqaCacheBytes(cfg: ModelConfig, dtype: string): { perToken: number; perBufferRow: number } {
  const bytes = { f32: 4, f16: 2, bf16: 2, fp8e4m3: 1 }[dtype as 'f32'] ?? 4;
  const row = cfg.numKvHeads * cfg.headDim * bytes;
  return { perToken: 2 * row, perBufferRow: row };
}

/** One paged K/V cache per layer, of the config's kv heads and head size. */
export function createGqaCaches(rt: Runtime, cfg: ModelConfig, o: { numBlocks: number; blockSize: number; dtype: string }): PagedKVCache[] {
  const out: PagedKVCache[] = [];
  for (let l = 0; l < cfg.numLayers; l++) {
    out.push(createPagedKVCache(rt, { numBlocks: o.numBlocks, blockSize: o.blockSize, numKvHeads: cfg.numKvHeads, headSize: cfg.headDim, dtype: o.dtype as DType }));
  }
  return out;
}

/**
 * A GQA layer's attention from its fused q|k|v rows [T, (Hq + 2·Hkv)·D]: RoPE on q and k, k and v into
 * the layer's cache (one pass where tuning.fuseRopeCache and the shapes allow: rope_cache.wgsl), then q
 * attends over the cache by the step's plan into attn [T, Hq·D] (Llama, Gemma 2, gpt-oss).
 */
export function gqaAttention(rt: Runtime, s: StepContext, c: ModelConfig, qkv: Tensor, attn: Tensor, cache: PagedKVCache, plan: AttentionPlan, noRope = false): void {
  const T = s.T, Hq = c.numHeads, Hkv = c.numKvHeads, D = c.headDim;
  const W = (Hq + 2 * Hkv) * D;
  if (noRope) {
    // SmolLM3's NoPE layers: q and k as projected; k and v still go into the cache.
    encodeCacheWrite(rt, T, { tensor: qkv, offset: Hq * D, stride: W }, { tensor: qkv, offset: (Hq + Hkv) * D, stride: W }, cache, s.slots);
    plan.run(qkv.view([T, W]), cache, { out: attn.view([T, Hq, D]), qRowStride: W });
    return;
  }
  const rows = { tensor: qkv, qHeads: Hq, stride: W, kOffset: Hq * D, vOffset: (Hq + Hkv) * D };
  const tables = { positions: s.positions, cos: s.cos, sin: s.sin, interleaved: c.rope.interleaved };
  if (rt.tuning.fuseRopeCache && ropeCacheWriteFits(rows, tables, cache)) {
    encodeRopeCacheWrite(rt, T, rows, tables, cache, s.slots);
  } else {
    const qHeads = { tensor: qkv, tokenStride: W, heads: Hq, headStride: D };
    const kHeads = { tensor: qkv, offset: Hq * D, tokenStride: W, heads: Hkv, headStride: D };
    rope(rt, [qHeads, kHeads], s.positions, s.cos, s.sin, { rows: T, pairing: c.rope.interleaved ? 'interleaved' : 'half' });
    encodeCacheWrite(rt, T, { tensor: qkv, offset: Hq * D, stride: W }, { tensor: qkv, offset: (Hq + Hkv) * D, stride: W }, cache, s.slots);
  }
  plan.run(qkv.view([T, W]), cache, { out: attn.view([T, Hq, D]), qRowStride: W });
}

export class LlamaFamily implements Architecture {
  readonly caches: PagedKVCache[] = [];
  readonly cacheDTypes = ['f32', 'f16', 'bf16', 'fp8e4m3'] as const;
  private readonly layers: LayerWeights[] = [];
  private embedW!: LinearWeight;
  private normW!: Tensor;
  private lmHeadW!: LinearWeight;
  private acts: { x: Tensor; qkv: Tensor; attn: Tensor; gu: Tensor; logits: Tensor; routeIds: Tensor; routeWeights: Tensor } | null = null;
  private readonly routing: MoeRouting | null;
  /** Distinct sliding windows of the layers (0: none): one attention plan per window per step. */
  private readonly windows: number[];
  private plans = new Map<number, AttentionPlan>();

  constructor(private readonly rt: Runtime, readonly cfg: ModelConfig) {
    this.windows = [...new Set(cfg.layers.map((l) => l.slidingWindow ?? 0))];
    const m = cfg.moe;
    this.routing = m ? {
      family: 'qwen3_moe', scoring: 'softmax', method: 'greedy', topK: m.numExpertsPerTok, nGroup: null, topkGroup: null,
      normTopkProb: m.normTopkProb, routedScalingFactor: 1,
    } : null;
  }

  get embed(): LinearWeight { return this.embedW; }
  get lmHead(): LinearWeight { return this.lmHeadW; }
  get finalNorm(): Tensor { return this.normW; }

  /** Reads every weight (validated names and shapes) and uploads it in `dtype`. */
  async load(r: WeightReader, dtype: WeightDType): Promise<void> {
    const c = this.cfg;
    const rt = this.rt;
    this.embedW = await r.linear(rt, ['model.embed_tokens.weight'], dtype);
    for (let i = 0; i < c.numLayers; i++) {
      const p = `model.layers.${i}.`;
      const a = `${p}self_attn.`;
      const bias = c.attentionBias.qkv;
      if (c.family === 'phi3') {
        // Phi3's projections come fused as the engine keeps them: qkv_proj rows q|k|v, gate_up_proj rows gate|up.
        this.layers.push({
          inNorm: await r.vector(rt, `${p}input_layernorm.weight`),
          qkv: await r.linear(rt, [`${a}qkv_proj.weight`], dtype),
          o: await r.linear(rt, [`${a}o_proj.weight`], dtype),
          qNorm: null, kNorm: null,
          postNorm: await r.vector(rt, `${p}post_attention_layernorm.weight`),
          gateUp: await r.linear(rt, [`${p}mlp.gate_up_proj.weight`], dtype),
          down: await r.linear(rt, [`${p}mlp.down_proj.weight`], dtype),
          moe: null,
        });
        continue;
      }
      const sparse = c.layers[i].moe, m = c.moe;
      this.layers.push({
        inNorm: await r.vector(rt, `${p}input_layernorm.weight`),
        qkv: await r.linear(rt, [`${a}q_proj.weight`, `${a}k_proj.weight`, `${a}v_proj.weight`], dtype,
          bias ? [`${a}q_proj.bias`, `${a}k_proj.bias`, `${a}v_proj.bias`] : undefined),
        o: await r.linear(rt, [`${a}o_proj.weight`], dtype, c.attentionBias.o ? [`${a}o_proj.bias`] : undefined),
        qNorm: c.qkNorm ? await r.vector(rt, `${a}q_norm.weight`) : null,
        kNorm: c.qkNorm ? await r.vector(rt, `${a}k_norm.weight`) : null,
        postNorm: await r.vector(rt, `${p}post_attention_layernorm.weight`),
        gateUp: sparse ? null : await r.linear(rt, [`${p}mlp.gate_proj.weight`, `${p}mlp.up_proj.weight`], dtype,
          c.mlpBias ? [`${p}mlp.gate_proj.bias`, `${p}mlp.up_proj.bias`] : undefined),
        down: sparse ? null : await r.linear(rt, [`${p}mlp.down_proj.weight`], dtype, c.mlpBias ? [`${p}mlp.down_proj.bias`] : undefined),
        moe: sparse && m ? {
          // The router runs in f32, as transformers does.
          router: await r.linear(rt, [`${p}mlp.gate.weight`], 'f32'),
          experts: await r.experts(rt, `${p}mlp.experts.`, m.numRoutedExperts, c.hiddenSize, m.moeIntermediateSize, dtype),
        } : null,
      });
    }
    this.normW = await r.vector(rt, 'model.norm.weight');
    this.lmHeadW = c.tieWordEmbeddings ? this.embedW : await r.linear(rt, ['lm_head.weight'], dtype);
  }

  /**
   * Random weights made on the GPU (nothing read or uploaded but the norms): models of a real
   * model's shape for benchmarks and the default workload. Linear weights are uniform with standard
   * deviation `std` (deterministic from `seed`), norms are ones.
   */
  initRandom(dtype: WeightDType, seed: number, std = 0.02): void {
    const c = this.cfg, rt = this.rt;
    let n = seed;
    const lin = (N: number, K: number) => createLinearOnDevice(rt, { N, K, dtype, seed: (n++) >>> 0, std });
    const ones = (len: number) => rt.tensor(new Float32Array(len).fill(1), [len], 'f32');
    const H = c.hiddenSize, D = c.headDim, qw = c.numHeads * D, kvw = 2 * c.numKvHeads * D, I = c.intermediateSize;
    this.embedW = lin(c.vocabSize, H);
    for (let i = 0; i < c.numLayers; i++) {
      const m = c.layers[i].moe ? c.moe : null;
      this.layers.push({
        inNorm: ones(H), qkv: lin(qw + kvw, H), o: lin(H, qw),
        qNorm: c.qkNorm ? ones(D) : null, kNorm: c.qkNorm ? ones(D) : null,
        postNorm: ones(H), gateUp: m ? null : lin(2 * I, H), down: m ? null : lin(H, I),
        moe: m ? {
          router: createLinearOnDevice(rt, { N: m.numRoutedExperts, K: H, dtype: 'f32', seed: (n++) >>> 0, std }),
          experts: createExpertsOnDevice(rt, { E: m.numRoutedExperts, H, I: m.moeIntermediateSize, dtype, seed: (n++) >>> 0, std }),
        } : null,
      });
    }
    this.normW = ones(H);
    this.lmHeadW = c.tieWordEmbeddings ? this.embedW : lin(c.vocabSize, H);
  }

  /** Bytes of weights a decode step reads: every linear layer once (the embedding: a row per token);
   *  of a sparse layer's E experts, the expected number a batch touches, E·(1 − (1 − k/E)^batch). */
  weightBytes(batch: number): number {
    const bytes = (w: LinearWeight | null) => (w ? linearWeightBytes(w) : 0);
    let total = bytes(this.lmHeadW);
    for (const L of this.layers) {
      total += bytes(L.qkv) + bytes(L.o) + bytes(L.gateUp) + bytes(L.down);
      if (L.moe) {
        const E = L.moe.experts.E, k = this.cfg.moe!.numExpertsPerTok;
        total += bytes(L.moe.router) + expertWeightBytes(L.moe.experts) * (1 - Math.pow(1 - k / E, Math.max(1, batch)));
      }
    }
    return total;
  }

  storedWeightBytes(): number {
    let total = linearWeightBytes(this.embedW) + (this.lmHeadW !== this.embedW ? linearWeightBytes(this.lmHeadW) : 0) + this.normW.byteLength;
    for (const L of this.layers) {
      for (const w of [L.qkv, L.o, L.gateUp, L.down, L.moe?.router]) if (w) total += linearWeightBytes(w);
      if (L.moe) total += expertWeightBytes(L.moe.experts);
      for (const t of [L.inNorm, L.postNorm, L.qNorm, L.kNorm, L.qkv.bias, L.o.bias, L.gateUp?.bias, L.down?.bias]) total += t?.byteLength ?? 0;
    }
    return total;
  }

  cacheBytes(dtype: string): { perToken: number; perBufferRow: number } {
    return gqaCacheBytes(this.cfg, dtype);
  }

  createCaches(o: { numBlocks: number; blockSize: number; dtype: string }): void {
    this.caches.push(...createGqaCaches(this.rt, this.cfg, o));
  }

  /** Activations for steps of up to maxTokens tokens, kept for the model's life. */
  allocate(maxTokens: number): void {
    const c = this.cfg, rt = this.rt;
    const qw = c.numHeads * c.headDim, kvw = 2 * c.numKvHeads * c.headDim;
    this.acts = {
      x: rt.zeros([maxTokens, c.hiddenSize]), qkv: rt.zeros([maxTokens, qw + kvw]),
      attn: rt.zeros([maxTokens, qw]), gu: rt.zeros([maxTokens, 2 * c.intermediateSize]),
      // Qwen3-MoE's router logits and choices (kept for the model's life: a step's recording takes no buffer).
      logits: rt.zeros([maxTokens, c.moe?.numRoutedExperts ?? 1]),
      routeIds: rt.zeros([maxTokens, c.moe?.numExpertsPerTok ?? 1], 'i32'), routeWeights: rt.zeros([maxTokens, c.moe?.numExpertsPerTok ?? 1]),
    };
  }

  /** The last step's plans back to the pool before the step's submit (Architecture.releasePlans). */
  releasePlans(): void {
    for (const p of this.plans.values()) p.destroy();
    this.plans.clear();
  }

  /** The step's attention plans (one per distinct window): made once per step, run in every layer. */
  plan(s: StepContext): void {
    for (const p of this.plans.values()) p.destroy();
    this.plans.clear();
    this.planSigs.clear();
    const c = this.cfg, a = this.acts!, W = (c.numHeads + 2 * c.numKvHeads) * c.headDim;
    for (const w of this.windows) {
      const p = planAttention(this.rt, s.meta, {
        cache: this.caches[0], numHeads: this.cfg.numHeads, scale: this.cfg.attentionScale, causal: true,
        ...(w ? { slidingWindow: w } : {}),
      });
      this.plans.set(w, p);
      // Prepared (its buffers taken) before the next plan is made: each plan's buffers then go back to
      // the pool in one run, and the next step's plans find the same ones, so step graphs repeat (made
      // and prepared interleaved, several plans' buffers came back in another order every step: Whisper's
      // two plans and gpt-oss's one a layer never replayed on the H200).
      this.planSigs.set(w, p.plan.signature(s.T, a.qkv.dtype, a.attn.dtype, W, false));
    }
  }

  private readonly planSigs = new Map<number, string>();

  /** The step's recording, named: its rows, its attention plans' runs (prepared now), the RoPE tables. */
  signature(s: StepContext): string | null {
    let sig = `${s.T}|${this.rt.idOf(s.cos.buffer)},${this.rt.idOf(s.sin.buffer)}`;
    for (const w of this.windows) sig += `|${this.planSigs.get(w)}`;
    return sig;
  }

  /** From the residual stream h (the embeddings) to x = the final norm of every row. */
  forward(s: StepContext): Tensor {
    const c = this.cfg, rt = this.rt, a = this.acts!;
    const { T, h } = s;
    const Hq = c.numHeads, Hkv = c.numKvHeads, D = c.headDim, eps = c.rmsEps;
    const W = (Hq + 2 * Hkv) * D;
    const qHeads = { tensor: a.qkv, tokenStride: W, heads: Hq, headStride: D };
    const kHeads = { tensor: a.qkv, offset: Hq * D, tokenStride: W, heads: Hkv, headStride: D };
    for (let l = 0; l < c.numLayers; l++) {
      const L = this.layers[l];
      this.normed(h, L.inNorm, L.qkv, T, { out: a.qkv });
      if (L.qNorm && L.kNorm) {
        rmsNorm(rt, qHeads, L.qNorm, eps, { rows: T, out: qHeads });
        rmsNorm(rt, kHeads, L.kNorm, eps, { rows: T, out: kHeads });
      }
      gqaAttention(rt, s, c, a.qkv, a.attn, this.caches[l], this.plans.get(c.layers[l].slidingWindow ?? 0)!, c.layers[l].noRope);
      linear(rt, a.attn, L.o, { rows: T, out: h, accumulate: true });
      if (L.moe) {
        rmsNorm(rt, h, L.postNorm, eps, { rows: T, out: a.x });
        linear(rt, a.x, L.moe.router, { rows: T, out: a.logits });
        const routed = route(rt, a.logits, this.routing!, { rows: T, ids: a.routeIds, weights: a.routeWeights });
        moe(rt, a.x, routed, L.moe.experts, { rows: T, out: h, accumulate: true });
      } else {
        this.normed(h, L.postNorm, L.gateUp!, T, { out: a.gu });
        linear(rt, a.gu, L.down!, { rows: T, out: h, accumulate: true, act: 'silu_mul' });
      }
    }
    rmsNorm(rt, h, this.normW, eps, { rows: T, out: a.x });
    return a.x;
  }

  /** linear(rmsNorm(h)): the norm folded into the product's prologue where the product runs on the
   *  GEMV (tuning.fuseNorms), else a norm pass into the activations first. */
  private normed(h: Tensor, norm: Tensor, w: LinearWeight, T: number, o: { out: Tensor }): void {
    const rt = this.rt, eps = this.cfg.rmsEps;
    const plan = planLinear(rt, { M: T, N: w.N, K: w.K, dtype: w.dtype });
    if (rt.tuning.fuseNorms && plan.kernel === 'gemv') {
      linear(rt, h, w, { rows: T, out: o.out, norm: { weight: norm, eps }, plan });
      return;
    }
    rmsNorm(rt, h, norm, eps, { rows: T, out: this.acts!.x });
    linear(rt, this.acts!.x, w, { rows: T, out: o.out, plan });
  }

  destroy(): void {
    for (const p of this.plans.values()) p.destroy();
    this.plans.clear();
    for (const c of this.caches) c.destroy();
    for (const L of this.layers) {
      for (const t of [L.inNorm, L.postNorm, L.qNorm, L.kNorm]) t?.destroy();
      for (const w of [L.qkv, L.o, L.gateUp, L.down, L.moe?.router]) w?.destroy();
      L.moe?.experts.destroy();
    }
    if (this.lmHeadW !== this.embedW) this.lmHeadW?.destroy();
    this.embedW?.destroy();
    this.normW?.destroy();
    if (this.acts) for (const t of Object.values(this.acts)) t.destroy();
  }
}
