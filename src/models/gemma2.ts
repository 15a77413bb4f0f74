// Gemma 2 (Gemma2ForCausalLM) as transformers computes it (SPEC §7; ../shared/goldens-layers README):
// the embedding times sqrt(hidden) (the normalizer rounded to f32, as HF's tensor of the hidden dtype),
// then per layer
//   h += post_attention_norm(o(attn(rope(q(x)), rope(k(x)), v(x))))   with x = input_norm(h)
//   h += post_feedforward_norm(down(gelu_tanh(gate(x)) · up(x)))       with x = pre_feedforward_norm(h)
// where every RMSNorm is x / sqrt(mean(x²) + eps) · (1 + w) (the 1 folded into the weight at load, in
// f32 as HF adds it), the post norms apply to the sublayer's output before the residual add, and
// attention scales q·k by query_pre_attn_scalar^-0.5, soft-caps the scores (s -> c·tanh(s/c),
// attn_logit_softcapping, before the mask) and slides a window on the layers layer_types names. The
// final norm, then the lm_head tied to the embedding; the model soft-caps the logits
// (final_logit_softcapping: Architecture.logitSoftcap).
//
// Gemma 3 (gemma3.ts) is this layer with a (1 + w) RMSNorm on each head of q and k before RoPE
// (cfg.qkNorm: q_norm, k_norm) and its own RoPE table in the sliding layers (the `attend` hook).
//
// Projections: q|k|v fused (RoPE on q in its rows and on k on its way into the cache where
// rope_cache.wgsl fits, as llama.ts), gate|up fused; the norms are passes of their own (the post norms
// read a product's output, so they do not fold into the product's prologue).
import type { Runtime } from '../core/runtime.js';
import type { Tensor } from '../core/tensor.js';
import type { PagedKVCache } from '../attention/paged_cache.js';
import { createGqaCaches, gqaAttention, gqaCacheBytes } from './llama.js';
import { planAttention, type AttentionPlan } from '../attention/paged.js';
import { activate, add, gatedAct } from '../ops/elementwise.js';
import { createLinearOnDevice, linear, linearWeightBytes, type LinearWeight } from '../ops/gemm.js';
import { rmsNorm } from '../ops/norm.js';
import type { ModelConfig } from './config.js';
import type { Architecture, StepContext } from './step.js';
import type { WeightDType, WeightReader } from './weights.js';

interface Layer {
  inNorm: Tensor; postAttnNorm: Tensor; preFfNorm: Tensor; postFfNorm: Tensor;
  /** Gemma 3's per-head q and k norms (1 + w, [headDim]); null in Gemma 2. */
  qNorm: Tensor | null; kNorm: Tensor | null;
  qkv: LinearWeight; o: LinearWeight; gateUp: LinearWeight; down: LinearWeight;
}

export class Gemma2Family implements Architecture {
  readonly caches: PagedKVCache[] = [];
  readonly cacheDTypes = ['f32', 'f16', 'bf16', 'fp8e4m3'] as const;
  readonly logitSoftcap: number | null;
  private readonly layers: Layer[] = [];
  /** Norm weights made here (1 + w): destroyed with the model, also after a load that failed partway. */
  private readonly norms: Tensor[] = [];
  private embedW!: LinearWeight;
  private normW!: Tensor;
  private acts: { x: Tensor; qkv: Tensor; attn: Tensor; gu: Tensor; act: Tensor; y: Tensor } | null = null;
  private readonly windows: number[];
  protected plans = new Map<number, AttentionPlan>();

  constructor(protected readonly rt: Runtime, readonly cfg: ModelConfig) {
    this.windows = [...new Set(cfg.layers.map((l) => l.slidingWindow ?? 0))];
    this.logitSoftcap = cfg.finalLogitSoftcap;
  }

  get embed(): LinearWeight { return this.embedW; }
  get lmHead(): LinearWeight { return this.embedW; }

  /** A Gemma RMSNorm weight as the kernels take it: 1 + w, in f32 as HF computes it. */
  private async norm(r: WeightReader, name: string): Promise<Tensor> {
    const w = (await r.read(name, 'f32')) as Float32Array;
    const t = this.rt.tensor(w.map((v) => Math.fround(1 + v)), [w.length], 'f32');
    this.norms.push(t);
    return t;
  }

  private ones(len: number): Tensor {
    const t = this.rt.tensor(new Float32Array(len).fill(1), [len], 'f32');
    this.norms.push(t);
    return t;
  }

  async load(r: WeightReader, dtype: WeightDType): Promise<void> {
    const c = this.cfg, rt = this.rt;
    this.embedW = await r.linear(rt, ['model.embed_tokens.weight'], dtype);
    for (let i = 0; i < c.numLayers; i++) {
      const p = `model.layers.${i}.`, a = `${p}self_attn.`;
      const bias = c.attentionBias.qkv;
      this.layers.push({
        inNorm: await this.norm(r, `${p}input_layernorm.weight`),
        qkv: await r.linear(rt, [`${a}q_proj.weight`, `${a}k_proj.weight`, `${a}v_proj.weight`], dtype,
          bias ? [`${a}q_proj.bias`, `${a}k_proj.bias`, `${a}v_proj.bias`] : undefined),
        o: await r.linear(rt, [`${a}o_proj.weight`], dtype, c.attentionBias.o ? [`${a}o_proj.bias`] : undefined),
        qNorm: c.qkNorm ? await this.norm(r, `${a}q_norm.weight`) : null,
        kNorm: c.qkNorm ? await this.norm(r, `${a}k_norm.weight`) : null,
        postAttnNorm: await this.norm(r, `${p}post_attention_layernorm.weight`),
        preFfNorm: await this.norm(r, `${p}pre_feedforward_layernorm.weight`),
        gateUp: await r.linear(rt, [`${p}mlp.gate_proj.weight`, `${p}mlp.up_proj.weight`], dtype),
        down: await r.linear(rt, [`${p}mlp.down_proj.weight`], dtype),
        postFfNorm: await this.norm(r, `${p}post_feedforward_layernorm.weight`),
      });
    }
    this.normW = await this.norm(r, 'model.norm.weight');
  }

  /** Random weights made on the GPU (benchmarks): linear weights of standard deviation std, norms (1 + w) ones. */
  initRandom(dtype: WeightDType, seed: number, std = 0.02): void {
    const c = this.cfg, rt = this.rt;
    let n = seed;
    const lin = (N: number, K: number) => createLinearOnDevice(rt, { N, K, dtype, seed: (n++) >>> 0, std });
    const H = c.hiddenSize, D = c.headDim, qw = c.numHeads * D, kvw = 2 * c.numKvHeads * D, I = c.intermediateSize;
    this.embedW = lin(c.vocabSize, H);
    for (let i = 0; i < c.numLayers; i++) {
      this.layers.push({
        inNorm: this.ones(H), postAttnNorm: this.ones(H), preFfNorm: this.ones(H), postFfNorm: this.ones(H),
        qNorm: c.qkNorm ? this.ones(D) : null, kNorm: c.qkNorm ? this.ones(D) : null,
        qkv: lin(qw + kvw, H), o: lin(H, qw), gateUp: lin(2 * I, H), down: lin(H, I),
      });
    }
    this.normW = this.ones(H);
  }

  weightBytes(_batch: number): number {
    let total = linearWeightBytes(this.embedW);
    for (const L of this.layers) total += linearWeightBytes(L.qkv) + linearWeightBytes(L.o) + linearWeightBytes(L.gateUp) + linearWeightBytes(L.down);
    return total;
  }

  storedWeightBytes(): number {
    let total = this.weightBytes(1);
    for (const t of this.norms) total += t.byteLength;
    return total;
  }

  cacheBytes(dtype: string): { perToken: number; perBufferRow: number } {
    return gqaCacheBytes(this.cfg, dtype);
  }

  createCaches(o: { numBlocks: number; blockSize: number; dtype: string }): void {
    this.caches.push(...createGqaCaches(this.rt, this.cfg, o));
  }

  allocate(maxTokens: number): void {
    const c = this.cfg, rt = this.rt;
    const qw = c.numHeads * c.headDim, kvw = 2 * c.numKvHeads * c.headDim, I = c.intermediateSize;
    this.acts = {
      x: rt.zeros([maxTokens, c.hiddenSize]), qkv: rt.zeros([maxTokens, qw + kvw]), attn: rt.zeros([maxTokens, qw]),
      gu: rt.zeros([maxTokens, 2 * I]), act: rt.zeros([maxTokens, I]), y: rt.zeros([maxTokens, c.hiddenSize]),
    };
  }

  /** The last step's plans back to the pool before the step's submit (Architecture.releasePlans). */
  releasePlans(): void {
    for (const p of this.plans.values()) p.destroy();
    this.plans.clear();
  }

  /** One attention plan per distinct window (soft-capped, Gemma's scale), run by the layers that have it. */
  plan(s: StepContext): void {
    for (const p of this.plans.values()) p.destroy();
    this.plans.clear();
    const c = this.cfg;
    const a = this.acts!, W = (c.numHeads + 2 * c.numKvHeads) * c.headDim;
    this.planSigs.clear();
    for (const w of this.windows) {
      // A step with its own attention (StepContext.attention: Gemma 3's image blocks) plans it without a causal mask.
      const p = planAttention(this.rt, s.attention?.meta ?? s.meta, {
        cache: this.caches[0], numHeads: c.numHeads, scale: c.attentionScale, causal: !s.attention,
        ...(c.attnSoftcap ? { softcap: c.attnSoftcap } : {}), ...(w ? { slidingWindow: w } : {}),
      });
      this.plans.set(w, p);
      // Prepared before the next plan is made, so its buffers come back to the pool in one run and the
      // next step's plans take the same ones (see LlamaFamily.plan).
      this.planSigs.set(w, p.plan.signature(s.T, a.qkv.dtype, a.attn.dtype, W, false));
    }
  }

  private readonly planSigs = new Map<number, string>();

  signature(s: StepContext): string | null {
    // A step with its own attention is not recorded for replay (its plans differ in their causal mask).
    if (s.attention) return null;
    let sig = `${s.T}|${this.rt.idOf(s.cos.buffer)},${this.rt.idOf(s.sin.buffer)}`;
    for (const w of this.windows) sig += `|${this.planSigs.get(w)}`;
    return sig;
  }

  forward(s: StepContext): Tensor {
    const c = this.cfg, rt = this.rt, a = this.acts!;
    const { T, h } = s;
    const eps = c.rmsEps, I = c.intermediateSize;
    const y = a.y.shape[0] === h.shape[0] ? a.y : a.y.view([h.shape[0], c.hiddenSize]);
    const W = (c.numHeads + 2 * c.numKvHeads) * c.headDim;
    const qHeads = { tensor: a.qkv, tokenStride: W, heads: c.numHeads, headStride: c.headDim };
    const kHeads = { tensor: a.qkv, offset: c.numHeads * c.headDim, tokenStride: W, heads: c.numKvHeads, headStride: c.headDim };
    if (c.embedScale !== null) activate(rt, h, 'none', { rows: T, out: h, scale: c.embedScale });
    for (let l = 0; l < c.numLayers; l++) {
      const L = this.layers[l];
      rmsNorm(rt, h, L.inNorm, eps, { rows: T, out: a.x });
      linear(rt, a.x, L.qkv, { rows: T, out: a.qkv });
      if (L.qNorm && L.kNorm) {
        rmsNorm(rt, qHeads, L.qNorm, eps, { rows: T, out: qHeads });
        rmsNorm(rt, kHeads, L.kNorm, eps, { rows: T, out: kHeads });
      }
      this.attend(s, l, a.qkv, a.attn);
      linear(rt, a.attn, L.o, { rows: T, out: y });
      rmsNorm(rt, y, L.postAttnNorm, eps, { rows: T, out: y });
      add(rt, h, y, { rows: T, out: h });
      rmsNorm(rt, h, L.preFfNorm, eps, { rows: T, out: a.x });
      linear(rt, a.x, L.gateUp, { rows: T, out: a.gu });
      gatedAct(rt, a.gu, I, 'gelu_tanh', { rows: T, out: a.act });
      linear(rt, a.act, L.down, { rows: T, out: y });
      rmsNorm(rt, y, L.postFfNorm, eps, { rows: T, out: y });
      add(rt, h, y, { rows: T, out: h });
    }
    rmsNorm(rt, h, this.normW, eps, { rows: T, out: a.x });
    return a.x;
  }

  /** Layer l's attention from its q|k|v rows into attn: RoPE by the step's tables, the cache write, the layer's plan. */
  protected attend(s: StepContext, l: number, qkv: Tensor, attn: Tensor): void {
    gqaAttention(this.rt, s, this.cfg, qkv, attn, this.caches[l], this.plans.get(this.cfg.layers[l].slidingWindow ?? 0)!);
  }

  destroy(): void {
    for (const p of this.plans.values()) p.destroy();
    this.plans.clear();
    for (const c of this.caches) c.destroy();
    for (const L of this.layers) for (const w of [L.qkv, L.o, L.gateUp, L.down]) w.destroy();
    for (const t of this.norms) t.destroy();
    this.embedW?.destroy();
    if (this.acts) for (const t of Object.values(this.acts)) t.destroy();
  }
}
