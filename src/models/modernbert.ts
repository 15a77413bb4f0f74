// ModernBertModel (ModernBERT-base/large and the embedding models saved from it: nomic's modernbert-embed,
// gte-modernbert ...), as transformers computes it: h = LayerNorm(tok[id]); per layer (pre-LN)
// h += Wo(attn(rope(q), rope(k), v)) with q|k|v = Wqkv(LayerNorm(h)) (layer 0: no attention norm, the
// embedding's serves), then h += Wo(act(first half) · second half of Wi(LayerNorm(h))) (GEGLU); a final
// LayerNorm. Layers alternate global attention (every key of the input, RoPE theta 160000) and local
// attention (keys with |i - j| <= local_attention / 2, RoPE theta 10000): a two-sided window.
// Biases and norm biases as the config says (none in the released checkpoints).
import { check, fmt } from '../core/errors.js';
import type { Runtime } from '../core/runtime.js';
import type { Tensor } from '../core/tensor.js';
import { encodeRopeCacheWrite, ropeCacheWriteFits } from '../attention/paged_cache.js';
import { linear, linearWeightBytes, type LinearWeight } from '../ops/gemm.js';
import { embedding } from '../ops/embedding.js';
import { gatedAct, type GatedAct } from '../ops/elementwise.js';
import { layerNorm } from '../ops/norm.js';
import { rope } from '../ops/rope.js';
import { ropeTable, type RopeConfig } from './rope.js';
import type { WeightDType, WeightReader } from './weights.js';
import { baseConfig, configBool, configInt, configNumber, selfAttention, type EncoderArch, type EncoderConfig, type EncoderPass, type EncoderSchema } from './encoder_arch.js';

const ACTS: Readonly<Record<string, GatedAct>> = { gelu: 'gelu', gelu_new: 'gelu_tanh', gelu_pytorch_tanh: 'gelu_tanh', silu: 'silu' };

export interface ModernBertConfig extends EncoderConfig {
  eps: number;
  act: GatedAct;
  attentionBias: boolean;
  mlpBias: boolean;
  normBias: boolean;
  /** Per layer: true for global attention. */
  global: boolean[];
  globalTheta: number;
  localTheta: number;
  /** The two-sided window of local layers: keys with |i - j| < window (local_attention / 2 + 1). */
  window: number;
}

function theta(c: Record<string, unknown>, type: string, legacy: string): number | null {
  const op = 'loadModel';
  const rp = c.rope_parameters;
  if (rp !== undefined && rp !== null) {
    check(typeof rp === 'object', op, 'config.rope_parameters', 'an object', fmt(rp));
    const per = (rp as Record<string, unknown>)[type] ?? rp;
    check(per !== null && typeof per === 'object', op, `config.rope_parameters.${type}`, 'an object { rope_theta, rope_type }', fmt(per));
    const p = per as Record<string, unknown>;
    const t = p.rope_type ?? 'default';
    check(t === 'default', op, `config.rope_parameters.${type}.rope_type`, "'default' (ModernBERT's RoPE)", fmt(t));
    if (p.rope_theta !== undefined && p.rope_theta !== null) {
      check(typeof p.rope_theta === 'number' && p.rope_theta > 0, op, `config.rope_parameters.${type}.rope_theta`, 'a positive number', fmt(p.rope_theta));
      return p.rope_theta;
    }
  }
  const v = c[legacy];
  if (v === undefined || v === null) return null;
  check(typeof v === 'number' && v > 0, op, `config.${legacy}`, 'a positive number', fmt(v));
  return v;
}

export function parseModernBertConfig(c: Record<string, unknown>): ModernBertConfig {
  const op = 'loadModel';
  const base = baseConfig('ModernBertModel', c);
  const act = c.hidden_activation ?? 'gelu';
  check(typeof act === 'string' && act in ACTS, op, 'config.hidden_activation', Object.keys(ACTS).map((a) => `'${a}'`).join(', '), fmt(act));
  let global: boolean[];
  if (c.layer_types !== undefined && c.layer_types !== null) {
    const lt = c.layer_types;
    check(Array.isArray(lt) && lt.length === base.numLayers && lt.every((t) => t === 'full_attention' || t === 'sliding_attention'), op, 'config.layer_types',
      `${base.numLayers} entries of 'full_attention' or 'sliding_attention'`, fmt(lt));
    global = (lt as string[]).map((t) => t === 'full_attention');
  } else {
    const every = configInt(c, 'global_attn_every_n_layers', 1);
    global = Array.from({ length: base.numLayers }, (_, i) => i % every === 0);
  }
  const local = configInt(c, 'local_attention', 128);
  const globalTheta = theta(c, 'full_attention', 'global_rope_theta') ?? 160000;
  const localTheta = theta(c, 'sliding_attention', 'local_rope_theta') ?? globalTheta;
  return {
    ...base, eps: configNumber(c, 'norm_eps', 1e-5), act: ACTS[act as string],
    attentionBias: configBool(c, 'attention_bias', false), mlpBias: configBool(c, 'mlp_bias', false), normBias: configBool(c, 'norm_bias', false),
    global, globalTheta, localTheta, window: Math.floor(local / 2) + 1,
  };
}

interface Norm { w: Tensor; b: Tensor | null }
interface Layer { attnNorm: Norm | null; qkv: LinearWeight; o: LinearWeight; mlpNorm: Norm; wi: LinearWeight; wo: LinearWeight }

export class ModernBert implements EncoderArch {
  readonly windows: readonly number[];
  readonly prefixes = ['', 'model.'];
  readonly probe = 'embeddings.tok_embeddings.weight';
  private tok!: LinearWeight;
  private embNorm!: Norm;
  private finalNorm!: Norm;
  private readonly layers: Layer[] = [];
  /** RoPE tables [maxPositions, headDim/2] of global and local layers. */
  private tables: { cos: Tensor; sin: Tensor }[] = [];

  constructor(private readonly rt: Runtime, readonly cfg: ModernBertConfig) {
    this.windows = [...new Set(cfg.global.map((g) => (g ? 0 : cfg.window)))];
  }

  schema(): EncoderSchema {
    const c = this.cfg, H = c.hidden, I = c.intermediate;
    const req = new Map<string, number[]>();
    const norm = (n: string) => { req.set(`${n}.weight`, [H]); if (c.normBias) req.set(`${n}.bias`, [H]); };
    const lin = (n: string, shape: number[], bias: boolean) => { req.set(`${n}.weight`, shape); if (bias) req.set(`${n}.bias`, [shape[0]]); };
    req.set('embeddings.tok_embeddings.weight', [c.vocabSize, H]);
    norm('embeddings.norm');
    for (let i = 0; i < c.numLayers; i++) {
      const p = `layers.${i}.`;
      if (i > 0) norm(`${p}attn_norm`);
      lin(`${p}attn.Wqkv`, [3 * H, H], c.attentionBias);
      lin(`${p}attn.Wo`, [H, H], c.attentionBias);
      norm(`${p}mlp_norm`);
      lin(`${p}mlp.Wi`, [2 * I, H], c.mlpBias);
      lin(`${p}mlp.Wo`, [H, I], c.mlpBias);
    }
    norm('final_norm');
    // The heads of ModernBertFor* classes.
    const ignored = (n: string) => n.startsWith('head.') || n.startsWith('decoder.') || n.startsWith('classifier.');
    return { required: req, optional: new Map(), ignored };
  }

  async load(r: WeightReader, dtype: WeightDType, prefix: string): Promise<void> {
    const c = this.cfg, rt = this.rt;
    const norm = async (n: string): Promise<Norm> => ({ w: await r.vector(rt, `${prefix}${n}.weight`), b: c.normBias ? await r.vector(rt, `${prefix}${n}.bias`) : null });
    const lin = (n: string, bias: boolean) => r.linear(rt, [`${prefix}${n}.weight`], dtype, bias ? [`${prefix}${n}.bias`] : undefined);
    this.tok = await r.linear(rt, [`${prefix}embeddings.tok_embeddings.weight`], dtype);
    this.embNorm = await norm('embeddings.norm');
    for (let i = 0; i < c.numLayers; i++) {
      const p = `layers.${i}.`;
      this.layers.push({
        attnNorm: i > 0 ? await norm(`${p}attn_norm`) : null,
        qkv: await lin(`${p}attn.Wqkv`, c.attentionBias), o: await lin(`${p}attn.Wo`, c.attentionBias),
        mlpNorm: await norm(`${p}mlp_norm`), wi: await lin(`${p}mlp.Wi`, c.mlpBias), wo: await lin(`${p}mlp.Wo`, c.mlpBias),
      });
    }
    this.finalNorm = await norm('final_norm');
    for (const th of [c.globalTheta, c.localTheta]) {
      const rc: RopeConfig = {
        type: 'default', theta: th, rotaryDim: c.headDim, interleaved: false, maxPositionEmbeddings: c.maxPositions, factor: null,
        originalMaxPositionEmbeddings: null, lowFreqFactor: null, highFreqFactor: null, betaFast: null, betaSlow: null, mscale: null,
        mscaleAllDim: null, attentionFactor: null, truncate: false,
      };
      const { cos, sin } = ropeTable(rc, c.maxPositions);
      const half = c.headDim / 2;
      this.tables.push({ cos: rt.tensor(cos, [c.maxPositions, half], 'f32'), sin: rt.tensor(sin, [c.maxPositions, half], 'f32') });
    }
  }

  forward(p: EncoderPass): Tensor {
    const c = this.cfg, rt = this.rt, T = p.T, H = c.hidden, eps = c.eps, W = 3 * H;
    const t = (shape: number[]) => { const x = rt.emptyTensor(shape, 'f32'); p.temps.push(x); return x; };
    const h = t([T, H]), x = t([T, H]), qkv = t([T, W]), attn = t([T, H]), gu = t([T, 2 * c.intermediate]), act = t([T, c.intermediate]);
    embedding(rt, p.ids, this.tok, { rows: T, out: h });
    layerNorm(rt, h, this.embNorm.w, this.embNorm.b, eps, { rows: T, out: h });
    const qHeads = { tensor: qkv, tokenStride: W, heads: c.numHeads, headStride: c.headDim };
    const kHeads = { tensor: qkv, offset: H, tokenStride: W, heads: c.numHeads, headStride: c.headDim };
    c.global.forEach((global, l) => {
      const L = this.layers[l];
      let xin = h;
      if (L.attnNorm) xin = layerNorm(rt, h, L.attnNorm.w, L.attnNorm.b, eps, { rows: T, out: x });
      linear(rt, xin, L.qkv, { rows: T, out: qkv });
      const tab = this.tables[global ? 0 : 1];
      const rows = { tensor: qkv, qHeads: c.numHeads, stride: W, kOffset: H, vOffset: 2 * H };
      const tables = { positions: p.positions, cos: tab.cos, sin: tab.sin, interleaved: false };
      let written = false;
      if (rt.tuning.fuseRopeCache && ropeCacheWriteFits(rows, tables, p.cache)) {
        encodeRopeCacheWrite(rt, T, rows, tables, p.cache, p.slots);
        written = true;
      } else {
        rope(rt, [qHeads, kHeads], p.positions, tab.cos, tab.sin, { rows: T, pairing: 'half' });
      }
      selfAttention(rt, p, c, qkv, W, global ? 0 : c.window, attn, written);
      linear(rt, attn, L.o, { rows: T, out: h, accumulate: true });
      layerNorm(rt, h, L.mlpNorm.w, L.mlpNorm.b, eps, { rows: T, out: x });
      linear(rt, x, L.wi, { rows: T, out: gu });
      gatedAct(rt, gu, c.intermediate, c.act, { rows: T, out: act });
      linear(rt, act, L.wo, { rows: T, out: h, accumulate: true });
    });
    layerNorm(rt, h, this.finalNorm.w, this.finalNorm.b, eps, { rows: T, out: h });
    return h;
  }

  readonly hasPooler = false;

  pooler(): Tensor | null {
    return null;
  }

  storedWeightBytes(): number {
    const lin = (w: LinearWeight) => linearWeightBytes(w) + (w.bias?.byteLength ?? 0);
    const norm = (n: Norm | null) => (n ? n.w.byteLength + (n.b?.byteLength ?? 0) : 0);
    let n = lin(this.tok) + norm(this.embNorm) + norm(this.finalNorm);
    for (const L of this.layers) n += norm(L.attnNorm) + norm(L.mlpNorm) + lin(L.qkv) + lin(L.o) + lin(L.wi) + lin(L.wo);
    return n;
  }

  destroy(): void {
    const norm = (n: Norm | null | undefined) => { n?.w.destroy(); n?.b?.destroy(); };
    this.tok?.destroy();
    norm(this.embNorm);
    norm(this.finalNorm);
    for (const L of this.layers) {
      norm(L.attnNorm);
      norm(L.mlpNorm);
      for (const w of [L.qkv, L.o, L.wi, L.wo]) w.destroy();
    }
    for (const tb of this.tables) { tb.cos.destroy(); tb.sin.destroy(); }
  }
}
