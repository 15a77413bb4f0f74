// BertModel (and the sentence-embedding checkpoints saved from it: all-MiniLM, BGE, e5 ...), as
// transformers computes it: embeddings = LayerNorm(word[id] + token_type[0] + position[p]) with p
// restarting at 0 in every input; per layer (post-LN) h = LayerNorm(h + o(attn(q(h), k(h), v(h)))),
// then h = LayerNorm(h + down(act(up(h)))); biases everywhere; the pooler tanh(dense(h[first])).
// Every token's token type is 0 (a single segment, what an embedding model is given).
import { WebinferError, check, fmt } from '../core/errors.js';
import type { Runtime } from '../core/runtime.js';
import type { Tensor } from '../core/tensor.js';
import { linear, linearWeightBytes, type LinearWeight } from '../ops/gemm.js';
import { embedding } from '../ops/embedding.js';
import { add, activate, type Activation } from '../ops/elementwise.js';
import { layerNorm } from '../ops/norm.js';
import type { WeightDType, WeightReader } from './weights.js';
import { baseConfig, configBool, configInt, configNumber, selfAttention, type EncoderArch, type EncoderConfig, type EncoderPass, type EncoderSchema } from './encoder_arch.js';

/** hidden_act of a BERT config -> the pointwise function (transformers' ACT2FN names). */
const BERT_ACTS: Readonly<Record<string, Activation>> = { gelu: 'gelu', gelu_new: 'gelu_tanh', gelu_pytorch_tanh: 'gelu_tanh', relu: 'relu' };

export interface BertConfig extends EncoderConfig {
  eps: number;
  act: Activation;
  typeVocab: number;
}

export function parseBertConfig(c: Record<string, unknown>): BertConfig {
  const op = 'loadModel';
  const base = baseConfig('BertModel', c);
  const act = c.hidden_act ?? 'gelu';
  check(typeof act === 'string' && act in BERT_ACTS, op, 'config.hidden_act', Object.keys(BERT_ACTS).map((a) => `'${a}'`).join(', '), fmt(act));
  const pe = c.position_embedding_type ?? 'absolute';
  check(pe === 'absolute', op, 'config.position_embedding_type', "'absolute' (relative position embeddings are not supported)", fmt(pe));
  check(!configBool(c, 'is_decoder', false), op, 'config.is_decoder', 'false (an encoder)', true);
  check(!configBool(c, 'add_cross_attention', false), op, 'config.add_cross_attention', 'false (an encoder)', true);
  return { ...base, eps: configNumber(c, 'layer_norm_eps', 1e-12), act: BERT_ACTS[act as string], typeVocab: configInt(c, 'type_vocab_size', 2) };
}

interface Layer {
  qkv: LinearWeight; o: LinearWeight; attnNormW: Tensor; attnNormB: Tensor;
  up: LinearWeight; down: LinearWeight; outNormW: Tensor; outNormB: Tensor;
}

export class Bert implements EncoderArch {
  readonly windows = [0];
  readonly prefixes = ['', 'bert.'];
  readonly probe = 'embeddings.word_embeddings.weight';
  private word!: LinearWeight;
  /** position[p] + token_type[0], added on the host once (f32). */
  private posType!: Tensor;
  private embNormW!: Tensor;
  private embNormB!: Tensor;
  private readonly layers: Layer[] = [];
  private poolerW: LinearWeight | null = null;

  constructor(private readonly rt: Runtime, readonly cfg: BertConfig) {}

  get hasPooler(): boolean {
    return this.poolerW !== null;
  }

  schema(): EncoderSchema {
    const c = this.cfg, H = c.hidden, I = c.intermediate;
    const req = new Map<string, number[]>([
      ['embeddings.word_embeddings.weight', [c.vocabSize, H]],
      ['embeddings.position_embeddings.weight', [c.maxPositions, H]],
      ['embeddings.token_type_embeddings.weight', [c.typeVocab, H]],
      ['embeddings.LayerNorm.weight', [H]], ['embeddings.LayerNorm.bias', [H]],
    ]);
    for (let i = 0; i < c.numLayers; i++) {
      const p = `encoder.layer.${i}.`;
      for (const n of ['query', 'key', 'value']) {
        req.set(`${p}attention.self.${n}.weight`, [H, H]);
        req.set(`${p}attention.self.${n}.bias`, [H]);
      }
      req.set(`${p}attention.output.dense.weight`, [H, H]); req.set(`${p}attention.output.dense.bias`, [H]);
      req.set(`${p}attention.output.LayerNorm.weight`, [H]); req.set(`${p}attention.output.LayerNorm.bias`, [H]);
      req.set(`${p}intermediate.dense.weight`, [I, H]); req.set(`${p}intermediate.dense.bias`, [I]);
      req.set(`${p}output.dense.weight`, [H, I]); req.set(`${p}output.dense.bias`, [H]);
      req.set(`${p}output.LayerNorm.weight`, [H]); req.set(`${p}output.LayerNorm.bias`, [H]);
    }
    const optional = new Map<string, number[]>([['pooler.dense.weight', [H, H]], ['pooler.dense.bias', [H]]]);
    // Position ids (a buffer old checkpoints saved) and the pretraining / task heads of BertFor* classes.
    const ignored = (n: string) => n === 'embeddings.position_ids' || n.startsWith('cls.') || n.startsWith('classifier.') || n.startsWith('qa_outputs.');
    return { required: req, optional, ignored };
  }

  async load(r: WeightReader, dtype: WeightDType, prefix: string): Promise<void> {
    const c = this.cfg, rt = this.rt;
    const e = `${prefix}embeddings.`;
    this.word = await r.linear(rt, [`${e}word_embeddings.weight`], dtype);
    const pos = (await r.read(`${e}position_embeddings.weight`, 'f32')) as Float32Array;
    const tt = (await r.read(`${e}token_type_embeddings.weight`, 'f32')) as Float32Array;
    const pt = new Float32Array(pos.length);
    for (let i = 0; i < pos.length; i++) pt[i] = pos[i] + tt[i % c.hidden];
    this.posType = rt.tensor(pt, [c.maxPositions, c.hidden], 'f32');
    this.embNormW = await r.vector(rt, `${e}LayerNorm.weight`);
    this.embNormB = await r.vector(rt, `${e}LayerNorm.bias`);
    for (let i = 0; i < c.numLayers; i++) {
      const p = `${prefix}encoder.layer.${i}.`;
      const a = `${p}attention.self.`;
      this.layers.push({
        qkv: await r.linear(rt, [`${a}query.weight`, `${a}key.weight`, `${a}value.weight`], dtype, [`${a}query.bias`, `${a}key.bias`, `${a}value.bias`]),
        o: await r.linear(rt, [`${p}attention.output.dense.weight`], dtype, [`${p}attention.output.dense.bias`]),
        attnNormW: await r.vector(rt, `${p}attention.output.LayerNorm.weight`),
        attnNormB: await r.vector(rt, `${p}attention.output.LayerNorm.bias`),
        up: await r.linear(rt, [`${p}intermediate.dense.weight`], dtype, [`${p}intermediate.dense.bias`]),
        down: await r.linear(rt, [`${p}output.dense.weight`], dtype, [`${p}output.dense.bias`]),
        outNormW: await r.vector(rt, `${p}output.LayerNorm.weight`),
        outNormB: await r.vector(rt, `${p}output.LayerNorm.bias`),
      });
    }
    if (r.has(`${prefix}pooler.dense.weight`)) {
      if (!r.has(`${prefix}pooler.dense.bias`)) throw new WebinferError(`loadModel: the checkpoint has ${prefix}pooler.dense.weight but no ${prefix}pooler.dense.bias`);
      this.poolerW = await r.linear(rt, [`${prefix}pooler.dense.weight`], dtype, [`${prefix}pooler.dense.bias`]);
    }
  }

  forward(p: EncoderPass): Tensor {
    const c = this.cfg, rt = this.rt, T = p.T, H = c.hidden, eps = c.eps;
    const t = (shape: number[]) => { const x = rt.emptyTensor(shape, 'f32'); p.temps.push(x); return x; };
    const h = t([T, H]), pe = t([T, H]), qkv = t([T, 3 * H]), attn = t([T, H]), mid = t([T, c.intermediate]);
    embedding(rt, p.ids, this.word, { rows: T, out: h });
    embedding(rt, p.positions, this.posType, { rows: T, out: pe });
    add(rt, h, pe, { out: h });
    layerNorm(rt, h, this.embNormW, this.embNormB, eps, { rows: T, out: h });
    for (const L of this.layers) {
      linear(rt, h, L.qkv, { rows: T, out: qkv });
      selfAttention(rt, p, c, qkv, 3 * H, 0, attn);
      linear(rt, attn, L.o, { rows: T, out: h, accumulate: true });
      layerNorm(rt, h, L.attnNormW, L.attnNormB, eps, { rows: T, out: h });
      linear(rt, h, L.up, { rows: T, out: mid });
      activate(rt, mid, this.cfg.act, { rows: T, out: mid });
      linear(rt, mid, L.down, { rows: T, out: h, accumulate: true });
      layerNorm(rt, h, L.outNormW, L.outNormB, eps, { rows: T, out: h });
    }
    return h;
  }

  pooler(p: EncoderPass, h: Tensor): Tensor | null {
    if (!this.poolerW) return null;
    const out = this.rt.emptyTensor([p.S, this.cfg.hidden], 'f32');
    p.temps.push(out);
    linear(this.rt, h, this.poolerW, { gatherRows: p.firstRows, rows: p.S, out });
    activate(this.rt, out, 'tanh', { out });
    return out;
  }

  storedWeightBytes(): number {
    let n = linearWeightBytes(this.word) + this.posType.byteLength + this.embNormW.byteLength + this.embNormB.byteLength;
    for (const L of this.layers) {
      for (const w of [L.qkv, L.o, L.up, L.down]) n += linearWeightBytes(w) + (w.bias?.byteLength ?? 0);
      for (const v of [L.attnNormW, L.attnNormB, L.outNormW, L.outNormB]) n += v.byteLength;
    }
    if (this.poolerW) n += linearWeightBytes(this.poolerW) + (this.poolerW.bias?.byteLength ?? 0);
    return n;
  }

  destroy(): void {
    this.word?.destroy();
    this.posType?.destroy();
    this.embNormW?.destroy();
    this.embNormB?.destroy();
    for (const L of this.layers) {
      for (const w of [L.qkv, L.o, L.up, L.down]) w.destroy();
      for (const v of [L.attnNormW, L.attnNormB, L.outNormW, L.outNormB]) v.destroy();
    }
    this.poolerW?.destroy();
  }
}
