// Gemma 3's vision side (Gemma3ForConditionalGeneration) as transformers 5 computes it (SPEC §7.1,
// goldens-arch/README.md "gemma3-vision"): a SigLIP encoder and the multimodal projector, which turn one
// image's pixel_values [C, S, S] (Gemma3ImageProcessor's) into the tokensPerImage vectors that replace
// the embeddings of its run of image tokens (unscaled: the text embeddings are scaled by sqrt(hidden),
// these are not).
//
// The encoder runs on the encoder path (as models/qwen_vl.ts's tower): patches as rows of the linear
// layers, attention by the paged kernels without a causal mask over a scratch K/V cache, the image one
// sequence.
//   patch_embedding: the Conv2d of stride = kernel, a product of each [C·P·P] row (channel, y, x) with
//   its bias; + position_embedding (patches row-major);
//   per layer: h += out_proj(attn(q, k, v)) of x = layer_norm1(h) (q, k, v fused, biases; scale
//   head_dim^-0.5, bidirectional), then h += fc2(gelu_tanh(fc1(x))) of x = layer_norm2(h);
//   post_layernorm.
// The projector: the patches as a G×G grid, average-pooled in k×k windows to side G / k = sqrt(tokens)
// (on the host, from the encoder's read-back), RMSNorm x·(1 + w) (mm_soft_emb_norm, eps the tower's),
// then x · mm_input_projection_weight ([C, text hidden] as stored: the transposed product).
import { WebinferError } from '../core/errors.js';
import type { Runtime } from '../core/runtime.js';
import type { Tensor } from '../core/tensor.js';
import { moveHeadRows } from '../attention/paged_cache.js';
import { sdpa } from '../attention/sdpa.js';
import { createLinear, linear, linearWeightBytes, type LinearWeight } from '../ops/gemm.js';
import { layerNorm, rmsNorm } from '../ops/norm.js';
import { activate, add } from '../ops/elementwise.js';
import { avgPoolGrid } from '../ops/pool.js';
import type { ModelConfig, SiglipVisionConfig } from './config.js';
import { Gemma3Family } from './gemma3.js';
import { withVisionTower } from './vision_family.js';
import type { WeightDType, WeightReader } from './weights.js';

interface SiglipLayer {
  ln1: [Tensor, Tensor]; ln2: [Tensor, Tensor];
  qkv: LinearWeight; out: LinearWeight; fc1: LinearWeight; fc2: LinearWeight;
}

/** A patch row's length in the product: channels·P·P rounded up to a multiple of 4 (f32 rows load 16 bytes at a time). */
const patchK = (v: SiglipVisionConfig) => Math.ceil((v.numChannels * v.patchSize * v.patchSize) / 4) * 4;

/** Checks one preprocessed image against the tower: pixel values [C, S, S] (channels first). */
export function checkGemmaPixels(v: SiglipVisionConfig, op: string, arg: string, x: unknown): Float32Array {
  const n = v.numChannels * v.imageSize * v.imageSize;
  const px = (x as { pixelValues?: unknown } | null)?.pixelValues;
  if (!(px instanceof Float32Array) || px.length !== n) {
    throw new WebinferError(`${op}: ${arg}: expected a preprocessed image { pixelValues: Float32Array of ${n} values ([${v.numChannels}, ${v.imageSize}, ${v.imageSize}], Gemma3ImageProcessor's) }, got ${px instanceof Float32Array ? `${px.length} values` : typeof x}`);
  }
  return px;
}

/** Gemma 3's SigLIP encoder and projector on the GPU: encode turns one image into its image-token vectors. */
export class SiglipVisionTower {
  private patchEmbed!: LinearWeight;
  private positions!: Tensor;
  private readonly layers: SiglipLayer[] = [];
  private post!: [Tensor, Tensor];
  private projNorm!: Tensor;
  private proj!: LinearWeight;
  /** Calls run one at a time (one image's activations on the GPU at a time). */
  private queue: Promise<unknown> = Promise.resolve();

  constructor(private readonly rt: Runtime, readonly v: SiglipVisionConfig, private readonly textHidden: number) {}

  async load(r: WeightReader, dtype: WeightDType): Promise<void> {
    const rt = this.rt, v = this.v, C = v.hiddenSize, P = v.patchSize;
    const e = 'vision_tower.embeddings.';
    const bias = async (name: string) => (await r.read(name, 'f32')) as Float32Array;
    // The Conv2d of stride = kernel over one patch is a product with its weight as [C, channels·P·P], in
    // f32 (a small matrix: 2.7 MB at Gemma 3's 1152 × 588) with each row padded to patchK columns (588 is
    // no multiple of the 8 values a 16-byte load of 16-bit weights holds); the patch rows padded alike.
    const K = v.numChannels * P * P, KP = patchK(v);
    const pw = (await r.read(`${e}patch_embedding.weight`, 'f32')) as Float32Array;
    const wp = new Float32Array(C * KP);
    for (let c = 0; c < C; c++) wp.set(pw.subarray(c * K, (c + 1) * K), c * KP);
    this.patchEmbed = createLinear(rt, { data: wp, N: C, K: KP, dtype: 'f32', bias: await bias(`${e}patch_embedding.bias`) });
    const pos = (await r.read(`${e}position_embedding.weight`, 'f32')) as Float32Array;
    this.positions = rt.tensor(pos, [pos.length / C, C], 'f32');
    for (let l = 0; l < v.numLayers; l++) {
      const p = `vision_tower.encoder.layers.${l}.`, a = `${p}self_attn.`;
      this.layers.push({
        ln1: [await r.vector(rt, `${p}layer_norm1.weight`), await r.vector(rt, `${p}layer_norm1.bias`)],
        ln2: [await r.vector(rt, `${p}layer_norm2.weight`), await r.vector(rt, `${p}layer_norm2.bias`)],
        qkv: await r.linear(rt, [`${a}q_proj.weight`, `${a}k_proj.weight`, `${a}v_proj.weight`], dtype, [`${a}q_proj.bias`, `${a}k_proj.bias`, `${a}v_proj.bias`]),
        out: await r.linear(rt, [`${a}out_proj.weight`], dtype, [`${a}out_proj.bias`]),
        fc1: await r.linear(rt, [`${p}mlp.fc1.weight`], dtype, [`${p}mlp.fc1.bias`]),
        fc2: await r.linear(rt, [`${p}mlp.fc2.weight`], dtype, [`${p}mlp.fc2.bias`]),
      });
    }
    this.post = [await r.vector(rt, 'vision_tower.post_layernorm.weight'), await r.vector(rt, 'vision_tower.post_layernorm.bias')];
    // Gemma's RMSNorm x·(1 + w): the 1 folded into the weight.
    const w = (await r.read('multi_modal_projector.mm_soft_emb_norm.weight', 'f32')) as Float32Array;
    this.projNorm = rt.tensor(w.map((x) => x + 1), [C], 'f32');
    // mm_input_projection_weight is [C, text hidden] (x · W, no transpose): the product's [N, K] is its transpose.
    const m = (await r.read('multi_modal_projector.mm_input_projection_weight', 'f32')) as Float32Array;
    const H = this.textHidden, t = new Float32Array(m.length);
    for (let i = 0; i < C; i++) for (let j = 0; j < H; j++) t[j * C + i] = m[i * H + j];
    this.proj = createLinear(rt, { data: t, N: H, K: C, dtype: 'f32' });
  }

  storedWeightBytes(): number {
    let n = linearWeightBytes(this.patchEmbed) + this.positions.byteLength + linearWeightBytes(this.proj) + this.projNorm.byteLength;
    for (const L of this.layers) {
      for (const w of [L.qkv, L.out, L.fc1, L.fc2]) n += linearWeightBytes(w) + (w.bias?.byteLength ?? 0);
      for (const t of [...L.ln1, ...L.ln2]) n += t.byteLength;
    }
    return n + this.post[0].byteLength + this.post[1].byteLength;
  }

  /** One image's image-token vectors [tokensPerImage, text hidden] row-major, from its pixel values [C, S, S]. */
  encode(pixelValues: Float32Array): Promise<Float32Array> {
    const next = this.queue.then(() => this.pass(pixelValues));
    this.queue = next.catch(() => undefined);
    return next;
  }

  private async pass(pixels: Float32Array): Promise<Float32Array> {
    const rt = this.rt, v = this.v;
    const C = v.hiddenSize, P = v.patchSize, S = v.imageSize, G = S / P, N = G * G, K = patchK(v);
    // Patches row-major, each row (channel, y, x) as the conv weight's (then zeros to K).
    const px = new Float32Array(N * K);
    for (let gy = 0; gy < G; gy++) for (let gx = 0; gx < G; gx++) {
      const row = (gy * G + gx) * K;
      for (let c = 0; c < v.numChannels; c++) for (let y = 0; y < P; y++) {
        const from = (c * S + gy * P + y) * S + gx * P;
        px.set(pixels.subarray(from, from + P), row + (c * P + y) * P);
      }
    }
    const temps: Tensor[] = [];
    const keep = <T extends Tensor>(x: T) => { temps.push(x); return x; };
    try {
      const x = keep(rt.tensor(px, [N, K], 'f32'));
      const H = v.numHeads, D = v.headDim, W = 3 * C;
      const h = keep(rt.emptyTensor([N, C], 'f32')), xn = keep(rt.emptyTensor([N, C], 'f32'));
      const qkv = keep(rt.emptyTensor([N, W], 'f32')), attn = keep(rt.emptyTensor([N, C], 'f32'));
      const mid = keep(rt.emptyTensor([N, v.intermediateSize], 'f32'));
      // Attention over the image's N patches, one sequence without a mask: SDPA's fused kernel over
      // q, k, v moved from the q|k|v rows into its layout [1, heads, N, D] (the subgroup-matrix tile
      // where the adapter has one, f32 values split into hi + lo f16 halves), its output moved back to
      // rows. (Through the paged kernels, one sequence of 4096 patches ran on the scalar f32 flash tile:
      // 982 of the tower's 1049 ms on an H200, bench/results/vision-nvidia-h200.md.)
      const qh = keep(rt.emptyTensor([1, H, N, D], 'f32')), kh = keep(rt.emptyTensor([1, H, N, D], 'f32'));
      const vh = keep(rt.emptyTensor([1, H, N, D], 'f32'));
      const tokens = keep(rt.tensor(Int32Array.from({ length: N }, (_, i) => i), [N], 'i32'));
      const heads = keep(rt.tensor(Int32Array.from({ length: H }, (_, i) => i), [H], 'i32'));
      const sink = keep(rt.zeros([1], 'f32'));
      linear(rt, x, this.patchEmbed, { rows: N, out: h });
      add(rt, h, this.positions, { rows: N, out: h });
      for (const L of this.layers) {
        layerNorm(rt, h, L.ln1[0], L.ln1[1], v.layerNormEps, { rows: N, out: xn });
        linear(rt, xn, L.qkv, { rows: N, out: qkv });
        moveHeadRows(rt, N, H, D, N, tokens, { src: qkv, off: 0, stride: W, dst: qh }, null, sink);
        moveHeadRows(rt, N, H, D, N, tokens, { src: qkv, off: C, stride: W, dst: kh }, { src: qkv, off: 2 * C, stride: W, dst: vh }, sink);
        const o = sdpa(rt, 'Gemma 3 vision tower', qh, kh, vh, { scale: 1 / Math.sqrt(D), causal: false }, false).out;
        moveHeadRows(rt, H, N, D, H, heads, { src: o, off: 0, stride: N * D, dst: attn }, null, sink);
        o.destroy();
        linear(rt, attn, L.out, { rows: N, out: h, accumulate: true });
        layerNorm(rt, h, L.ln2[0], L.ln2[1], v.layerNormEps, { rows: N, out: xn });
        linear(rt, xn, L.fc1, { rows: N, out: mid });
        activate(rt, mid, 'gelu_tanh', { rows: N, out: mid });
        linear(rt, mid, L.fc2, { rows: N, out: h, accumulate: true });
      }
      layerNorm(rt, h, this.post[0], this.post[1], v.layerNormEps, { rows: N, out: xn });
      // The projector: k×k average pooling of the patch grid (as AvgPool2d over [C, G, G]), row-major, on
      // the GPU (on the host it read back 4096 × 1152 values and looped over them, part of the 160 ms the
      // H200's tower spent beside its GPU time at d7e2b44).
      const side = Math.round(Math.sqrt(v.tokensPerImage)), k = G / side, T = side * side;
      const pt = keep(avgPoolGrid(rt, xn, { grid: G, window: k })), pn = keep(rt.emptyTensor([T, C], 'f32'));
      const out = keep(rt.emptyTensor([T, this.textHidden], 'f32'));
      rmsNorm(rt, pt, this.projNorm, v.layerNormEps, { rows: T, out: pn });
      linear(rt, pn, this.proj, { rows: T, out });
      return await out.toFloat32();
    } finally {
      for (const t of temps) t.destroy();
    }
  }

  destroy(): void {
    for (const w of [this.patchEmbed, this.proj]) w?.destroy();
    for (const t of [this.positions, this.projNorm, ...(this.post ?? [])]) t?.destroy();
    for (const L of this.layers) {
      for (const w of [L.qkv, L.out, L.fc1, L.fc2]) w.destroy();
      for (const t of [...L.ln1, ...L.ln2]) t.destroy();
    }
  }
}

/** Gemma 3 with images for the step runtime: the Gemma 3 text model and the SigLIP tower beside it. */
export class Gemma3VLFamily extends withVisionTower(Gemma3Family, (rt, cfg) => {
  if (!cfg.siglip) throw new WebinferError('Gemma3VLFamily: a Gemma3ForConditionalGeneration config (vision_config) is needed (internal error)');
  return new SiglipVisionTower(rt, cfg.siglip, cfg.hiddenSize);
}) {}
