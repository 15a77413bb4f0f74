// LFM2 (Lfm2ForCausalLM) as transformers computes it (SPEC §7.1; ../shared/goldens-arch README): per layer
//   h += op(operator_norm(h));   h += w2(silu(w1 x) · w3 x) with x = ffn_norm(h)
// where op is, in the layers layer_types marks 'conv', the gated short convolution
//   [B | C | x] = in_proj(x);  y = conv(B·x) (depthwise, causal, width conv_L_cache);  out_proj(C · y)
// and in the others attention with RMSNorm on each head of q and k before RoPE, and out_proj. Every
// RMSNorm is x·w (eps norm_eps); the final one is model.embedding_norm; the lm_head is the embedding.
//
// The conv layers keep no paged cache: each sequence has a state slot (its last L − 1 values of B·x per
// conv layer) in Architecture.createStates' buffers, the slot named per row by the block manager
// (serve/kv_manager.ts: taken at admission, freed at finish, abort or preemption, copied for a fork);
// ops.shortConv reads it before the row's tokens and leaves the row's last values in it. A row whose
// first token is its sequence's position 0 starts from zeros whatever its slot held, so a preempted
// sequence recomputed from its prompt rebuilds its state. Only the attention layers have K/V caches.
// For the prefix cache each conv layer also keeps, per cache block, the state at the block's end
// (snapshots [blocks, L − 1, H], written by ops.shortConv as the block's last token is computed); a
// sequence that finds cached blocks starts from its last block's snapshot (restoreStates). Their memory,
// (L − 1)·H f32 a block and conv layer, is within what the cache budget counts for a conv layer
// (cacheBytes counts every layer as an attention layer: 2·Hkv·D values a token) for LFM2's released
// shapes (Hkv·D = H/4 or more) with an f16 cache and blocks of 8 or more (the default is 16).
import type { Runtime } from '../core/runtime.js';
import type { Tensor } from '../core/tensor.js';
import { WebinferError } from '../core/errors.js';
import type { PagedKVCache } from '../attention/paged_cache.js';
import { planAttention, type AttentionPlan } from '../attention/paged.js';
import { createLinearOnDevice, linear, linearWeightBytes, planLinear, type LinearWeight } from '../ops/gemm.js';
import { rmsNorm } from '../ops/norm.js';
import { shortConv, shortConvMeta, shortConvRows } from '../ops/short_conv.js';
import { createGqaCaches, gqaAttention, gqaCacheBytes } from './llama.js';
import type { ModelConfig } from './config.js';
import type { Architecture, StepContext } from './step.js';
import type { WeightDType, WeightReader } from './weights.js';

interface Layer {
  opNorm: Tensor; ffNorm: Tensor;
  /** w1 | w3 fused (rows gate, up), and w2. */
  gateUp: LinearWeight; down: LinearWeight;
  conv: { inProj: LinearWeight; weight: Tensor; outProj: LinearWeight } | null;
  attn: { qkv: LinearWeight; o: LinearWeight; qNorm: Tensor; kNorm: Tensor } | null;
}

export class Lfm2Family implements Architecture {
  /** The attention layers' caches, in layer order (conv layers have none). */
  readonly caches: PagedKVCache[] = [];
  readonly cacheDTypes = ['f32', 'f16', 'bf16', 'fp8e4m3'] as const;
  private readonly layers: Layer[] = [];
  private readonly extra: Tensor[] = [];
  private embedW!: LinearWeight;
  private normW!: Tensor;
  /** Each conv layer's states [slots, L − 1, H], in layer order. */
  private states: Tensor[] = [];
  /** Each conv layer's state at every cache block's end [blocks, L − 1, H] (the prefix cache's). */
  private snapshots: Tensor[] = [];
  private blockSize = 0;
  readonly stateSnapshots = true;
  private acts: { x: Tensor; bcx: Tensor; y: Tensor; qkv: Tensor; attn: Tensor; gu: Tensor; meta: Tensor } | null = null;
  private plan_: AttentionPlan | null = null;
  private rows = 0;
  private readonly L: number;
  /** Each layer's index among its kind (its cache, or its state). */
  private readonly slotOf: number[];

  constructor(private readonly rt: Runtime, readonly cfg: ModelConfig) {
    this.L = cfg.convLCache ?? 0;
    let a = 0, c = 0;
    this.slotOf = cfg.layers.map((l) => (l.conv ? c++ : a++));
  }

  get embed(): LinearWeight { return this.embedW; }
  get lmHead(): LinearWeight { return this.embedW; }

  async load(r: WeightReader, dtype: WeightDType): Promise<void> {
    const c = this.cfg, rt = this.rt;
    this.embedW = await r.linear(rt, ['model.embed_tokens.weight'], dtype);
    for (let i = 0; i < c.numLayers; i++) {
      const p = `model.layers.${i}.`, a = `${p}self_attn.`, f = `${p}feed_forward.`;
      let conv: Layer['conv'] = null, attn: Layer['attn'] = null;
      if (c.layers[i].conv) {
        // conv.conv.weight [H, 1, L]: the depthwise taps as [H, L], in f32 (a few values a channel).
        const w = (await r.read(`${p}conv.conv.weight`, 'f32')) as Float32Array;
        const t = rt.tensor(w, [c.hiddenSize, this.L], 'f32');
        this.extra.push(t);
        conv = { inProj: await r.linear(rt, [`${p}conv.in_proj.weight`], dtype), weight: t, outProj: await r.linear(rt, [`${p}conv.out_proj.weight`], dtype) };
      } else {
        attn = {
          qkv: await r.linear(rt, [`${a}q_proj.weight`, `${a}k_proj.weight`, `${a}v_proj.weight`], dtype),
          o: await r.linear(rt, [`${a}out_proj.weight`], dtype),
          qNorm: await r.vector(rt, `${a}q_layernorm.weight`),
          kNorm: await r.vector(rt, `${a}k_layernorm.weight`),
        };
      }
      this.layers.push({
        opNorm: await r.vector(rt, `${p}operator_norm.weight`), ffNorm: await r.vector(rt, `${p}ffn_norm.weight`),
        gateUp: await r.linear(rt, [`${f}w1.weight`, `${f}w3.weight`], dtype), down: await r.linear(rt, [`${f}w2.weight`], dtype),
        conv, attn,
      });
    }
    this.normW = await r.vector(rt, 'model.embedding_norm.weight');
  }

  /** Random weights (benchmarks): linear weights made on the GPU with standard deviation std, norms ones, conv taps uniform in ±0.5. */
  initRandom(dtype: WeightDType, seed: number, std = 0.02): void {
    const c = this.cfg, rt = this.rt;
    let n = seed;
    const lin = (N: number, K: number) => createLinearOnDevice(rt, { N, K, dtype, seed: (n++) >>> 0, std });
    const host = (len: number, f: (i: number) => number) => {
      const t = rt.tensor(Float32Array.from({ length: len }, (_, i) => f(i)), [len], 'f32');
      this.extra.push(t);
      return t;
    };
    const H = c.hiddenSize, D = c.headDim, qw = c.numHeads * D, kvw = 2 * c.numKvHeads * D, I = c.intermediateSize;
    this.embedW = lin(c.vocabSize, H);
    for (let i = 0; i < c.numLayers; i++) {
      const s = seed + i;
      this.layers.push({
        opNorm: host(H, () => 1), ffNorm: host(H, () => 1), gateUp: lin(2 * I, H), down: lin(H, I),
        conv: c.layers[i].conv ? { inProj: lin(3 * H, H), weight: host(H * this.L, (j) => (((j * 2654435761 + s) >>> 0) / 2 ** 32) - 0.5), outProj: lin(H, H) } : null,
        attn: c.layers[i].conv ? null : { qkv: lin(qw + kvw, H), o: lin(H, qw), qNorm: host(D, () => 1), kNorm: host(D, () => 1) },
      });
    }
    this.normW = host(H, () => 1);
  }

  private linears(L: Layer): LinearWeight[] {
    return [L.gateUp, L.down, ...(L.conv ? [L.conv.inProj, L.conv.outProj] : []), ...(L.attn ? [L.attn.qkv, L.attn.o] : [])];
  }

  weightBytes(_batch: number): number {
    let total = linearWeightBytes(this.embedW);
    for (const L of this.layers) for (const w of this.linears(L)) total += linearWeightBytes(w);
    return total;
  }

  storedWeightBytes(): number {
    let total = this.weightBytes(1) + this.normW.byteLength;
    for (const L of this.layers) for (const t of [L.opNorm, L.ffNorm, L.attn?.qNorm, L.attn?.kNorm]) total += t?.byteLength ?? 0;
    for (const t of this.extra) total += t.byteLength;
    return total;
  }

  cacheBytes(dtype: string): { perToken: number; perBufferRow: number } {
    return gqaCacheBytes(this.cfg, dtype);
  }

  /** K/V caches for the attention layers, block-end state snapshots for the conv layers. */
  createCaches(o: { numBlocks: number; blockSize: number; dtype: string }): void {
    const attention = this.cfg.layers.filter((l) => !l.conv).length;
    this.caches.push(...createGqaCaches(this.rt, { ...this.cfg, numLayers: attention }, o));
    this.blockSize = o.blockSize;
    this.snapshots = this.cfg.layers.filter((l) => l.conv).map(() => this.rt.zeros([o.numBlocks, this.L - 1, this.cfg.hiddenSize]));
  }

  restoreStates(pairs: readonly (readonly [number, number])[]): void {
    if (!pairs.length) return;
    const bytes = (this.L - 1) * this.cfg.hiddenSize * 4;
    const enc = this.rt.commandEncoder();
    this.snapshots.forEach((snap, i) => {
      for (const [block, slot] of pairs) enc.copyBufferToBuffer(snap.buffer, block * bytes, this.states[i].buffer, slot * bytes, bytes);
    });
  }

  createStates(slots: number): void {
    const H = this.cfg.hiddenSize;
    this.states = this.cfg.layers.filter((l) => l.conv).map(() => this.rt.zeros([slots, this.L - 1, H]));
  }

  /** Copies whole states between slots in every conv layer (through a scratch buffer: WebGPU copies nothing within one buffer). */
  copyStates(pairs: readonly (readonly [number, number])[]): void {
    if (!pairs.length || !this.states.length) return;
    const bytes = (this.L - 1) * this.cfg.hiddenSize * 4;
    const tmp = this.rt.scratch(bytes * pairs.length, 'conv state copies');
    const enc = this.rt.commandEncoder();
    for (const s of this.states) {
      pairs.forEach(([from], i) => enc.copyBufferToBuffer(s.buffer, from * bytes, tmp, i * bytes, bytes));
      pairs.forEach(([, to], i) => enc.copyBufferToBuffer(tmp, i * bytes, s.buffer, to * bytes, bytes));
    }
  }

  allocate(maxTokens: number): void {
    const c = this.cfg, rt = this.rt, H = c.hiddenSize;
    const qw = c.numHeads * c.headDim, kvw = 2 * c.numKvHeads * c.headDim;
    this.acts = {
      x: rt.zeros([maxTokens, H]), bcx: rt.zeros([maxTokens, 3 * H]), y: rt.zeros([maxTokens, H]),
      qkv: rt.zeros([maxTokens, qw + kvw]), attn: rt.zeros([maxTokens, qw]), gu: rt.zeros([maxTokens, 2 * c.intermediateSize]),
      // A step has at most one row a token.
      meta: rt.zeros([4 * maxTokens], 'i32'),
    };
  }

  /** The step's attention plan, and its rows' conv meta (first token, tokens, state slot, fresh) uploaded. */
  plan(s: StepContext): void {
    this.plan_?.destroy();
    this.plan_ = null;
    if (this.caches.length) {
      this.plan_ = planAttention(this.rt, s.meta, { cache: this.caches[0], numHeads: this.cfg.numHeads, scale: this.cfg.attentionScale, causal: true });
    }
    this.rows = s.meta.seqLens.length;
    if (this.states.length) {
      const slots = s.meta.stateSlots;
      if (!slots || slots.length !== this.rows) {
        throw new WebinferError(`Lfm2ForCausalLM: step: expected a state slot for each of its ${this.rows} rows (the block manager's stateSlots), got ${slots ? slots.length : 'none'}`);
      }
      const meta = shortConvMeta(shortConvRows(s.meta.queryStartLoc, s.meta.seqLens, slots));
      this.rt.device.queue.writeBuffer(this.acts!.meta.buffer, 0, meta as Int32Array<ArrayBuffer>);
    }
  }

  /**
   * The step's recording, named (a step graph replays an equal one): its tokens and rows (the conv
   * kernel's uniforms; its row table is an upload, like the ids), the RoPE tables, the attention plan's run.
   */
  signature(s: StepContext): string | null {
    const c = this.cfg, a = this.acts!;
    const W = (c.numHeads + 2 * c.numKvHeads) * c.headDim;
    let sig = `${s.T}|${this.rows}|${this.rt.idOf(s.cos.buffer)},${this.rt.idOf(s.sin.buffer)}`;
    if (this.plan_) sig += `|${this.plan_.plan.signature(s.T, a.qkv.dtype, a.attn.dtype, W, false)}`;
    return sig;
  }

  forward(s: StepContext): Tensor {
    const c = this.cfg, rt = this.rt, a = this.acts!;
    const { T, h } = s;
    const Hq = c.numHeads, Hkv = c.numKvHeads, D = c.headDim, eps = c.rmsEps, W = (Hq + 2 * Hkv) * D;
    const qHeads = { tensor: a.qkv, tokenStride: W, heads: Hq, headStride: D };
    const kHeads = { tensor: a.qkv, offset: Hq * D, tokenStride: W, heads: Hkv, headStride: D };
    for (let l = 0; l < c.numLayers; l++) {
      const L = this.layers[l];
      if (L.conv) {
        this.normed(h, L.opNorm, L.conv.inProj, T, a.bcx);
        shortConv(rt, a.bcx, L.conv.weight, this.states[this.slotOf[l]], { H: c.hiddenSize, L: this.L, rows: this.rows, meta: a.meta, out: a.y,
          snapshots: { slots: s.slots, blockSize: this.blockSize, out: this.snapshots[this.slotOf[l]] } });
        linear(rt, a.y, L.conv.outProj, { rows: T, out: h, accumulate: true });
      } else {
        const A = L.attn!;
        this.normed(h, L.opNorm, A.qkv, T, a.qkv);
        rmsNorm(rt, qHeads, A.qNorm, eps, { rows: T, out: qHeads });
        rmsNorm(rt, kHeads, A.kNorm, eps, { rows: T, out: kHeads });
        gqaAttention(rt, s, c, a.qkv, a.attn, this.caches[this.slotOf[l]], this.plan_!);
        linear(rt, a.attn, A.o, { rows: T, out: h, accumulate: true });
      }
      this.normed(h, L.ffNorm, L.gateUp, T, a.gu);
      linear(rt, a.gu, L.down, { rows: T, out: h, accumulate: true, act: 'silu_mul' });
    }
    rmsNorm(rt, h, this.normW, eps, { rows: T, out: a.x });
    return a.x;
  }

  /** linear(rmsNorm(h)): the norm folded into a GEMV's prologue (tuning.fuseNorms), else a pass of its own first. */
  private normed(h: Tensor, norm: Tensor, w: LinearWeight, T: number, out: Tensor): void {
    const rt = this.rt, eps = this.cfg.rmsEps;
    const plan = planLinear(rt, { M: T, N: w.N, K: w.K, dtype: w.dtype });
    if (rt.tuning.fuseNorms && plan.kernel === 'gemv') {
      linear(rt, h, w, { rows: T, out, norm: { weight: norm, eps }, plan });
      return;
    }
    rmsNorm(rt, h, norm, eps, { rows: T, out: this.acts!.x });
    linear(rt, this.acts!.x, w, { rows: T, out, plan });
  }

  destroy(): void {
    this.plan_?.destroy();
    this.plan_ = null;
    for (const c of this.caches) c.destroy();
    for (const s of [...this.states, ...this.snapshots]) s.destroy();
    for (const L of this.layers) {
      for (const t of [L.opNorm, L.ffNorm, L.attn?.qNorm, L.attn?.kNorm]) t?.destroy();
      for (const w of this.linears(L)) w.destroy();
    }
    for (const t of this.extra) t.destroy();
    this.embedW?.destroy();
    this.normW?.destroy();
    if (this.acts) for (const t of Object.values(this.acts)) t.destroy();
  }
}
