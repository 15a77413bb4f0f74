// DeepSeek V2 and V3 (DeepseekV2ForCausalLM, DeepseekV3ForCausalLM) as transformers computes them
// (SPEC §5 and §7): multi-head latent attention over a latent paged cache, and mixture-of-experts MLPs
// from first_k_dense_replace on.
//
// Attention: q from q_proj, or q_a_proj -> q_a_layernorm -> q_b_proj (q LoRA); its rows are split at
// load time into a nope projection and a rope projection, so both come out dense. kv_a_proj_with_mqa
// is split the same way into the latent (normed by kv_a_layernorm into the cache) and the shared rope
// key. RoPE rotates only the rope parts (DeepSeek's interleaved pairs; YaRN's scaling is in the
// tables, its softmax factor in the config's attention scale). A decode-only step runs the absorbed
// MLA decode (planned once per step, run by every layer); a step with prompt tokens runs MLA's prefill, which
// up-projects the cached context in chunks. o_proj adds into the residual stream.
//
// MLP: dense layers as Llama's (fused gate|up, down reading silu(gate)·up); MoE layers route each token
// on the GPU (src/ops/moe.ts: V2's softmax top-k, V3's sigmoid scores with the correction bias and
// grouped top-k), run the experts as grouped products over the tokens routed to each, and add the
// always-on shared experts; nothing comes back to the host.
import type { Runtime } from '../core/runtime.js';
import type { Tensor } from '../core/tensor.js';
import { createMLA, createMLACache, fp8DsMlaRowBytes, type MLACache, type MLADecodePlan, type MLALayer } from '../attention/mla.js';
import { createLinearOnDevice, linear, linearWeightBytes, planLinear, type LinearDType, type LinearWeight } from '../ops/gemm.js';
import { createExpertsOnDevice, expertWeightBytes, moe, route, type ExpertWeights, type MoeRouting } from '../ops/moe.js';
import { rmsNorm } from '../ops/norm.js';
import { rope } from '../ops/rope.js';
import type { ModelConfig } from './config.js';
import type { Architecture, StepContext } from './step.js';
import type { WeightDType, WeightReader } from './weights.js';

interface Mlp { gateUp: LinearWeight; down: LinearWeight }

interface Layer {
  inNorm: Tensor; postNorm: Tensor;
  qA: LinearWeight | null; qANorm: Tensor | null;
  qNope: LinearWeight; qPe: LinearWeight;
  kvA: LinearWeight; kPe: LinearWeight; kvANorm: Tensor;
  kvB: Tensor; mla: MLALayer;
  o: LinearWeight;
  dense: Mlp | null;
  moe: { router: LinearWeight; bias: Tensor | null; experts: ExpertWeights; shared: Mlp | null } | null;
}

export class DeepSeekFamily implements Architecture {
  readonly caches: MLACache[] = [];
  readonly cacheDTypes = ['f32', 'f16', 'bf16', 'fp8_ds_mla'] as const;
  private readonly layers: Layer[] = [];
  private embedW!: LinearWeight;
  private normW!: Tensor;
  private lmHeadW!: LinearWeight;
  private acts: Record<'x' | 'qa' | 'qNope' | 'qPe' | 'kvC' | 'kPe' | 'attn' | 'gu' | 'guShared' | 'logits' | 'routeIds' | 'routeWeights', Tensor> | null = null;
  /** A decode-only step's plan, made once and run by every layer. */
  private plan_: MLADecodePlan | null = null;
  private decodeOnly = false;
  private readonly routing: MoeRouting | null;

  constructor(private readonly rt: Runtime, readonly cfg: ModelConfig) {
    const m = cfg.moe;
    this.routing = m ? {
      family: cfg.family as 'deepseek_v2' | 'deepseek_v3', scoring: m.scoringFunc, method: m.topkMethod, topK: m.numExpertsPerTok,
      nGroup: m.nGroup, topkGroup: m.topkGroup, normTopkProb: m.normTopkProb, routedScalingFactor: m.routedScalingFactor,
    } : null;
  }

  get embed(): LinearWeight { return this.embedW; }
  get lmHead(): LinearWeight { return this.lmHeadW; }

  private get dims() {
    const c = this.cfg, a = c.mla!;
    return { H: c.hiddenSize, N: c.numHeads, P: a.qkNopeHeadDim, R: a.qkRopeHeadDim, V: a.vHeadDim, L: a.kvLoraRank, QL: a.qLoraRank };
  }

  async load(r: WeightReader, dtype: WeightDType): Promise<void> {
    const c = this.cfg, rt = this.rt;
    const { H, N, P, R, L, QL } = this.dims;
    this.embedW = await r.linear(rt, ['model.embed_tokens.weight'], dtype);
    for (let i = 0; i < c.numLayers; i++) {
      const p = `model.layers.${i}.`, a = `${p}self_attn.`;
      const bias = c.attentionBias.qkv;
      let qA: LinearWeight | null = null, qANorm: Tensor | null = null, qSrc: string;
      if (QL !== null) {
        qA = await r.linear(rt, [`${a}q_a_proj.weight`], dtype, bias ? [`${a}q_a_proj.bias`] : undefined);
        qANorm = await r.vector(rt, `${a}q_a_layernorm.weight`);
        qSrc = `${a}q_b_proj.weight`;
      } else {
        qSrc = `${a}q_proj.weight`;
      }
      const [qNope, qPe] = await r.splitLinear(rt, qSrc, N, [P, R], dtype);
      // kv_a_proj_with_mqa: [L + R, H] = the latent rows, then the rope key's (one "head").
      const [kvA, kPe] = await r.splitLinear(rt, `${a}kv_a_proj_with_mqa.weight`, 1, [L, R], dtype, bias ? `${a}kv_a_proj_with_mqa.bias` : undefined);
      // A quantized up-projection is dequantized once, in f32 (the model absorbs it into W_UK and W_UV):
      // its exact values, not rounded again to the float weights' dtype.
      const kvDtype = r.quantized(`${a}kv_b_proj.weight`) ? 'f32' : dtype;
      const kvB = rt.tensor((await r.read(`${a}kv_b_proj.weight`, kvDtype)) as Float32Array, r.shape(`${a}kv_b_proj.weight`), kvDtype);
      const layer: Layer = {
        inNorm: await r.vector(rt, `${p}input_layernorm.weight`),
        qA, qANorm, qNope, qPe, kvA, kPe,
        kvANorm: await r.vector(rt, `${a}kv_a_layernorm.weight`),
        kvB, mla: this.mlaLayer(kvB),
        o: await r.linear(rt, [`${a}o_proj.weight`], dtype, c.attentionBias.o ? [`${a}o_proj.bias`] : undefined),
        postNorm: await r.vector(rt, `${p}post_attention_layernorm.weight`),
        dense: null, moe: null,
      };
      const mb = c.mlpBias;
      const mlp = async (m: string, withBias: boolean): Promise<Mlp> => ({
        gateUp: await r.linear(rt, [`${m}gate_proj.weight`, `${m}up_proj.weight`], dtype, withBias ? [`${m}gate_proj.bias`, `${m}up_proj.bias`] : undefined),
        down: await r.linear(rt, [`${m}down_proj.weight`], dtype, withBias ? [`${m}down_proj.bias`] : undefined),
      });
      if (c.layers[i].moe) {
        const m = c.moe!;
        layer.moe = {
          // The router runs in f32, as transformers does.
          router: await r.linear(rt, [`${p}mlp.gate.weight`], 'f32'),
          bias: m.eScoreCorrectionBias ? await r.vector(rt, `${p}mlp.gate.e_score_correction_bias`) : null,
          experts: await r.experts(rt, `${p}mlp.experts.`, m.numRoutedExperts, H, m.moeIntermediateSize, dtype),
          shared: m.numSharedExperts > 0 ? await mlp(`${p}mlp.shared_experts.`, mb) : null,
        };
      } else {
        layer.dense = await mlp(`${p}mlp.`, mb);
      }
      this.layers.push(layer);
    }
    this.normW = await r.vector(rt, 'model.norm.weight');
    this.lmHeadW = c.tieWordEmbeddings ? this.embedW : await r.linear(rt, ['lm_head.weight'], dtype);
  }

  private mlaLayer(kvB: Tensor): MLALayer {
    const { N, P, R, V, L } = this.dims;
    return createMLA(this.rt, { numHeads: N, kvLoraRank: L, qkNopeHeadDim: P, qkRopeHeadDim: R, vHeadDim: V, scale: this.cfg.attentionScale, kvBProj: kvB });
  }

  initRandom(dtype: WeightDType, seed: number, std = 0.02): void {
    const c = this.cfg, rt = this.rt;
    const { H, N, P, R, V, L, QL } = this.dims;
    let n = seed;
    const lin = (rows: number, K: number, dt: LinearDType = dtype) => createLinearOnDevice(rt, { N: rows, K, dtype: dt, seed: (n++) >>> 0, std });
    const ones = (len: number) => rt.tensor(new Float32Array(len).fill(1), [len], 'f32');
    this.embedW = lin(c.vocabSize, H);
    for (let i = 0; i < c.numLayers; i++) {
      const qK = QL ?? H;
      const kvBW = lin(N * (P + V), L);
      const kvB = kvBW.parts[0].tensor;
      const layer: Layer = {
        inNorm: ones(H), postNorm: ones(H),
        qA: QL !== null ? lin(QL, H) : null, qANorm: QL !== null ? ones(QL) : null,
        qNope: lin(N * P, qK), qPe: lin(N * R, qK), kvA: lin(L, H), kPe: lin(R, H), kvANorm: ones(L),
        kvB, mla: this.mlaLayer(kvB), o: lin(H, N * V), dense: null, moe: null,
      };
      if (c.layers[i].moe) {
        const m = c.moe!;
        layer.moe = {
          router: lin(m.numRoutedExperts, H, 'f32'), bias: m.eScoreCorrectionBias ? rt.zeros([m.numRoutedExperts]) : null,
          experts: createExpertsOnDevice(rt, { E: m.numRoutedExperts, H, I: m.moeIntermediateSize, dtype, seed: (n++) >>> 0, std }),
          shared: m.numSharedExperts > 0 ? { gateUp: lin(2 * m.numSharedExperts * m.moeIntermediateSize, H), down: lin(H, m.numSharedExperts * m.moeIntermediateSize) } : null,
        };
      } else {
        layer.dense = { gateUp: lin(2 * c.intermediateSize, H), down: lin(H, c.intermediateSize) };
      }
      this.layers.push(layer);
    }
    this.normW = ones(H);
    this.lmHeadW = c.tieWordEmbeddings ? this.embedW : lin(c.vocabSize, H);
  }

  /**
   * Bytes of weights a decode step of `batch` sequences reads: every dense weight once, and per MoE
   * layer the experts chosen: topK at batch 1, else the expected number of distinct experts when each
   * token picks topK of E at random, E·(1 − (1 − topK/E)^batch) (random weights route near-uniformly).
   */
  weightBytes(batch: number): number {
    let total = linearWeightBytes(this.lmHeadW);
    for (const l of this.layers) {
      total += this.layerDenseBytes(l);
      if (l.moe) {
        const e = l.moe.experts, k = this.cfg.moe!.numExpertsPerTok;
        const chosen = batch <= 1 ? k : e.E * (1 - (1 - k / e.E) ** batch);
        total += expertWeightBytes(e, chosen);
      }
    }
    return total;
  }

  /** A layer's bytes of weights besides the routed experts: every linear layer, the absorbed W_UK and W_UV (f32). */
  private layerDenseBytes(l: Layer): number {
    const { N, P, V, L } = this.dims;
    return [l.qA, l.qNope, l.qPe, l.kvA, l.kPe, l.o, l.dense?.gateUp, l.dense?.down, l.moe?.router, l.moe?.shared?.gateUp, l.moe?.shared?.down]
      .reduce((a, w) => a + (w ? linearWeightBytes(w) : 0), 0) + 4 * N * (P + V) * L;
  }

  storedWeightBytes(): number {
    let total = linearWeightBytes(this.embedW) + (this.lmHeadW !== this.embedW ? linearWeightBytes(this.lmHeadW) : 0);
    for (const l of this.layers) {
      total += this.layerDenseBytes(l);
      if (l.moe) total += expertWeightBytes(l.moe.experts);
    }
    return total;
  }

  cacheBytes(dtype: string): { perToken: number; perBufferRow: number } {
    const { L, R } = this.dims;
    const row = dtype === 'fp8_ds_mla' ? fp8DsMlaRowBytes(L, R) : (L + R) * ({ f32: 4, f16: 2, bf16: 2 }[dtype as 'f32'] ?? 4);
    return { perToken: row, perBufferRow: row };
  }

  createCaches(o: { numBlocks: number; blockSize: number; dtype: string }): void {
    const { L, R } = this.dims;
    for (let l = 0; l < this.cfg.numLayers; l++) {
      this.caches.push(createMLACache(this.rt, { numBlocks: o.numBlocks, blockSize: o.blockSize, kvLoraRank: L, qkRopeHeadDim: R, dtype: o.dtype as 'f32' }));
    }
  }

  allocate(maxTokens: number): void {
    const c = this.cfg, rt = this.rt;
    const { H, N, P, R, V, L, QL } = this.dims;
    const I = c.intermediateSize, IS = Math.max(1, (c.moe?.numSharedExperts ?? 0) * (c.moe?.moeIntermediateSize ?? 0));
    this.acts = {
      x: rt.zeros([maxTokens, H]), qa: rt.zeros([maxTokens, QL ?? 1]), qNope: rt.zeros([maxTokens, N * P]), qPe: rt.zeros([maxTokens, N * R]),
      kvC: rt.zeros([maxTokens, L]), kPe: rt.zeros([maxTokens, R]), attn: rt.zeros([maxTokens, N * V]), gu: rt.zeros([maxTokens, 2 * I]),
      guShared: rt.zeros([maxTokens, 2 * IS]),
      logits: rt.zeros([maxTokens, c.moe?.numRoutedExperts ?? 1]),
      // The router's choices, kept for the model's life (a step's recording then takes no buffer).
      routeIds: rt.zeros([maxTokens, c.moe?.numExpertsPerTok ?? 1], 'i32'), routeWeights: rt.zeros([maxTokens, c.moe?.numExpertsPerTok ?? 1]),
    };
  }

  plan(s: StepContext): void {
    this.plan_?.destroy();
    const { queryStartLoc: qsl, seqLens, blockTable, maxBlocksPerSeq } = s.meta;
    const S = seqLens.length;
    this.decodeOnly = s.T === S && qsl.every((v, i) => v === i);
    this.plan_ = this.decodeOnly ? this.layers[0].mla.planDecode({ seqLens, blockTable, maxBlocksPerSeq }) : null;
  }

  /** A decode step's recording, named: its rows, the MLA decode plan's runs (prepared now), the RoPE
   *  tables. Prefill steps (MLA's chunked up-projection takes scratch of its own) are not named. */
  signature(s: StepContext): string | null {
    if (!this.decodeOnly || !this.plan_) return null;
    const id = (o: object) => this.rt.idOf(o);
    return `${s.T}|${id(s.cos.buffer)},${id(s.sin.buffer)}|${this.plan_.signature(this.caches[0], s.T, this.acts!.qNope.dtype)}`;
  }

  forward(s: StepContext): Tensor {
    const c = this.cfg, rt = this.rt, a = this.acts!;
    const { T, h } = s;
    const { N, P, R, V, L } = this.dims;
    const eps = c.rmsEps;
    const pairing = c.rope.interleaved ? 'interleaved' : 'half';
    for (let i = 0; i < c.numLayers; i++) {
      const l = this.layers[i];
      // The input norm folds into the products that read it where they all run on the GEMV (decode
      // steps, tuning.fuseNorms): each recomputes the row's scale, one pass a layer fewer.
      const fold = rt.tuning.fuseNorms && [l.qA ?? l.qNope, l.qPe, l.kvA, l.kPe].every((w) => planLinear(rt, { M: T, N: w.N, K: w.K, dtype: w.dtype }).kernel === 'gemv');
      const xIn = fold ? h : a.x;
      const norm = fold ? { weight: l.inNorm, eps } : undefined;
      if (!fold) rmsNorm(rt, h, l.inNorm, eps, { rows: T, out: a.x });
      let qIn = xIn, qNorm = norm;
      if (l.qA && l.qANorm) {
        linear(rt, xIn, l.qA, { rows: T, out: a.qa, norm });
        rmsNorm(rt, a.qa, l.qANorm, eps, { rows: T, out: a.qa });
        qIn = a.qa;
        qNorm = undefined;
      }
      linear(rt, qIn, l.qNope, { rows: T, out: a.qNope, norm: qNorm });
      linear(rt, qIn, l.qPe, { rows: T, out: a.qPe, norm: qNorm });
      linear(rt, xIn, l.kvA, { rows: T, out: a.kvC, norm });
      linear(rt, xIn, l.kPe, { rows: T, out: a.kPe, norm });
      rmsNorm(rt, a.kvC, l.kvANorm, eps, { rows: T, out: a.kvC });
      rope(rt, { tensor: a.qPe, tokenStride: N * R, heads: N, headStride: R }, s.positions, s.cos, s.sin, { rows: T, pairing });
      rope(rt, { tensor: a.kPe, tokenStride: R, heads: 1, headStride: R }, s.positions, s.cos, s.sin, { rows: T, pairing });
      l.mla.cacheWrite(a.kvC.view([T, L]), a.kPe.view([T, R]), this.caches[i], s.slots.view([T]));
      const qNope = a.qNope.view([T, N, P]), qPe = a.qPe.view([T, N, R]);
      if (this.decodeOnly) {
        this.plan_!.runLayer(l.mla, qNope, qPe, this.caches[i], { out: a.attn.view([T, N * V]) });
        linear(rt, a.attn, l.o, { rows: T, out: h, accumulate: true });
      } else {
        const attn = l.mla.prefill(qNope, qPe, this.caches[i], s.meta);
        linear(rt, attn, l.o, { rows: T, out: h, accumulate: true });
        attn.destroy();
      }
      rmsNorm(rt, h, l.postNorm, eps, { rows: T, out: a.x });
      if (l.dense) {
        linear(rt, a.x, l.dense.gateUp, { rows: T, out: a.gu });
        linear(rt, a.gu, l.dense.down, { rows: T, out: h, accumulate: true, act: 'silu_mul' });
      } else {
        const m = l.moe!;
        linear(rt, a.x, m.router, { rows: T, out: a.logits });
        const routed = route(rt, a.logits, this.routing!, { rows: T, bias: m.bias ?? undefined, ids: a.routeIds, weights: a.routeWeights });
        moe(rt, a.x, routed, m.experts, { rows: T, out: h, accumulate: true });
        if (m.shared) {
          linear(rt, a.x, m.shared.gateUp, { rows: T, out: a.guShared });
          linear(rt, a.guShared, m.shared.down, { rows: T, out: h, accumulate: true, act: 'silu_mul' });
        }
      }
    }
    rmsNorm(rt, h, this.normW, eps, { rows: T, out: a.x });
    return a.x;
  }

  destroy(): void {
    this.plan_?.destroy();
    this.plan_ = null;
    for (const c of this.caches) c.destroy();
    for (const l of this.layers) {
      for (const t of [l.inNorm, l.postNorm, l.qANorm, l.kvANorm, l.kvB, l.mla.wUK, l.mla.wUV, l.moe?.bias]) t?.destroy();
      for (const w of [l.qA, l.qNope, l.qPe, l.kvA, l.kPe, l.o, l.dense?.gateUp, l.dense?.down, l.moe?.router, l.moe?.shared?.gateUp, l.moe?.shared?.down]) w?.destroy();
      l.moe?.experts.destroy();
    }
    if (this.lmHeadW !== this.embedW) this.lmHeadW?.destroy();
    this.embedW?.destroy();
    this.normW?.destroy();
    if (this.acts) for (const t of Object.values(this.acts)) t.destroy();
  }
}
