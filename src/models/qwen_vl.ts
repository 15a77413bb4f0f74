// Qwen2.5-VL (Qwen2_5_VLForConditionalGeneration) as transformers 5 computes it (SPEC §7.1,
// goldens-arch/README.md "qwen2.5-vl"): a Qwen2 text model whose RoPE is multimodal (M-RoPE: each token
// has positions t, h, w, and the rotary frequencies are split in three sections taking their angle from
// one each), and a ViT whose merged patches replace the embeddings of the prompt's image tokens.
//
// The vision tower runs on the encoder path (models/encoder.ts's way): its patches as rows of the linear
// layers, attention by the paged kernels without a causal mask over a scratch K/V cache, each attention
// segment (a window of 2×2 merged tokens in the windowed blocks, the whole frame in the others) its own
// sequence of the paged batch, so no mask is built and no patch sees another segment's keys.
//   patch_embed: the Conv3d of stride = kernel, a matmul of each [C·T·P·P] row;
//   the rows reordered into windows (HF's window_index, in units of the 4 patches of a merged token), and
//   the 2-D rotary table in the same order (angles r·inv, c·inv of the patch's grid row and column);
//   per block: h += proj(attn(rope(q), rope(k), v)) of x = rmsnorm1(h) (qkv fused with biases), then
//   h += down(silu(gate(x)) · up(x)) of x = rmsnorm2(h) (biases);
//   merger: rmsnorm ln_q per patch, the 4 patches of a merged token as one row, Linear-GELU-Linear;
//   the merged tokens back in row-major order (the inverse of window_index), on the host.
//
// The text side: positions are computed here on the host (mropePositions), the runner turns them into
// rows of its RoPE tables (a text token's t = h = w is an ordinary row; an image token's mixed row is
// written for the step), and decode steps continue at position + rope_delta, carried per sequence.
import { check, fail, WebinferError } from '../core/errors.js';
import type { Runtime } from '../core/runtime.js';
import type { Tensor } from '../core/tensor.js';
import { createPagedKVCache, encodeCacheWrite, type PagedKVCache } from '../attention/paged_cache.js';
import { planAttention, type AttentionPlan } from '../attention/paged.js';
import { createLinear, linear, linearWeightBytes, type LinearWeight } from '../ops/gemm.js';
import { rmsNorm } from '../ops/norm.js';
import { rope } from '../ops/rope.js';
import { activate } from '../ops/elementwise.js';
import type { ModelConfig, QwenVisionConfig } from './config.js';
import { LlamaFamily } from './llama.js';
import { withVisionTower } from './vision_family.js';
import { ropeParameters } from './rope.js';
import type { WeightDType, WeightReader } from './weights.js';

/**
 * One image as Qwen's image processor hands it over (Qwen2VLImageProcessor): `pixelValues` rows of
 * [channel, time, y, x] (C·T·P·P values) per patch, patches in merge-window order (the M×M patches of
 * merged token (0, 0), then (0, 1), ...), `shape` [patches, C·T·P·P], `grid` [t, h, w] in patches
 * (HF's pixel_values and image_grid_thw).
 */
export interface QwenImageInput {
  pixelValues: Float32Array;
  shape: readonly [number, number];
  grid: readonly [number, number, number];
}

/** Whether x looks like a preprocessed image (QwenImageInput) rather than something to decode. */
export function isQwenImageInput(x: unknown): x is QwenImageInput {
  return typeof x === 'object' && x !== null && (x as QwenImageInput).pixelValues instanceof Float32Array;
}

/** Checks an image against the tower's config: its row width, its grid, its patch count. */
export function checkQwenImage(v: QwenVisionConfig, op: string, arg: string, x: unknown): QwenImageInput {
  const row = v.inChannels * v.temporalPatchSize * v.patchSize * v.patchSize;
  check(isQwenImageInput(x), op, arg, `a preprocessed image { pixelValues: Float32Array, shape: [patches, ${row}], grid: [t, h, w] }`, x);
  const g = x.grid, s = x.shape;
  check(Array.isArray(g) && g.length === 3 && g.every((n) => Number.isInteger(n) && n > 0), op, `${arg}.grid`, '[t, h, w]: three positive integers (patches)', g);
  const m = v.spatialMergeSize;
  check(g[1] % m === 0 && g[2] % m === 0, op, `${arg}.grid`, `h and w multiples of spatial_merge_size ${m}`, `[${g.join(', ')}]`);
  const n = g[0] * g[1] * g[2];
  check(Array.isArray(s) && s.length === 2 && s[0] === n && s[1] === row, op, `${arg}.shape`, `[${n}, ${row}] (t·h·w patches of C·T·P·P values)`, s);
  check(x.pixelValues.length === n * row, op, `${arg}.pixelValues`, `${n * row} values (shape [${n}, ${row}])`, `${x.pixelValues.length} values`);
  return x;
}

/**
 * A digest of images (their grids and pixel values), 128 bits as hex: what keeps a prompt's cached
 * blocks apart from those of the same tokens with other images (the prefix cache's salt).
 */
export function imageDigest(images: readonly QwenImageInput[]): string {
  // Four 32-bit streams of different seeds and odd multipliers, each word xored in, multiplied, folded.
  const h = [0x811c9dc5, 0x9e3779b9, 0x7f4a7c15, 0x2545f491];
  const MUL = [0x01000193, 0x85ebca6b, 0xc2b2ae35, 0x27d4eb2f];
  const mix = (x: number) => {
    for (let k = 0; k < 4; k++) {
      const v = Math.imul(h[k] ^ x, MUL[k]);
      h[k] = v ^ (v >>> 15);
    }
  };
  for (const im of images) {
    for (const g of im.grid) mix(g);
    const words = new Uint32Array(im.pixelValues.buffer, im.pixelValues.byteOffset, im.pixelValues.length);
    for (let i = 0; i < words.length; i++) mix(words[i]);
    mix(0xffffffff);
  }
  return h.map((x) => (x >>> 0).toString(16).padStart(8, '0')).join('');
}

/** Merged tokens (image tokens in the prompt) of an image of grid [t, h, w]. */
export function qwenImageTokens(v: QwenVisionConfig, grid: readonly number[]): number {
  return (grid[0] * grid[1] * grid[2]) / (v.spatialMergeSize * v.spatialMergeSize);
}

/**
 * HF's get_window_index for one image: the merged tokens in window order (windows of ws×ws merged tokens,
 * ws = window_size / merge / patch, tiled row-major over each frame, empty windows dropped) and the patch
 * boundaries of the windows (cu_window_seqlens, without repeats).
 */
export function qwenWindows(v: QwenVisionConfig, grid: readonly number[]): { windowIndex: Int32Array; cuSeqlens: number[] } {
  const [t, gh, gw] = grid;
  const m = v.spatialMergeSize, ws = v.windowSize / m / v.patchSize, unit = m * m;
  const lh = gh / m, lw = gw / m;
  const nwh = Math.ceil((lh + (ws - (lh % ws))) / ws), nww = Math.ceil((lw + (ws - (lw % ws))) / ws);
  const index: number[] = [];
  const cu = [0];
  for (let f = 0; f < t; f++) {
    for (let a = 0; a < nwh; a++) {
      for (let b = 0; b < nww; b++) {
        let n = 0;
        for (let y = a * ws; y < Math.min((a + 1) * ws, lh); y++) {
          for (let x = b * ws; x < Math.min((b + 1) * ws, lw); x++) { index.push(f * lh * lw + y * lw + x); n++; }
        }
        if (n) cu.push(cu[cu.length - 1] + n * unit);
      }
    }
  }
  return { windowIndex: Int32Array.from(index), cuSeqlens: cu };
}

/** Each patch's grid row and column, patches in HF's merge-window order (rot_pos_emb's hpos/wpos ids). */
function patchRowsCols(v: QwenVisionConfig, grid: readonly number[]): { r: Int32Array; c: Int32Array } {
  const [t, gh, gw] = grid, m = v.spatialMergeSize;
  const n = t * gh * gw, r = new Int32Array(n), c = new Int32Array(n);
  let i = 0;
  for (let f = 0; f < t; f++) {
    for (let by = 0; by < gh / m; by++) for (let bx = 0; bx < gw / m; bx++) {
      for (let y = 0; y < m; y++) for (let x = 0; x < m; x++) { r[i] = by * m + y; c[i] = bx * m + x; i++; }
    }
  }
  return { r, c };
}

/**
 * An image run of a prompt: `start` its first image token, `count` tokens, taking features
 * [featureRow, featureRow + count) of the sequence's concatenated image features.
 */
export interface ImageRun { start: number; count: number; featureRow: number }

/**
 * A prompt's M-RoPE positions as transformers' get_rope_index computes them for images: text tokens at
 * t = h = w = their running position; an image's tokens (a t × h/M × w/M grid of merged tokens) at
 * t = s + frame, h = s + row, w = s + col from the position s after the text before it (still images:
 * temporal position 0 per frame, as the images' second_per_grid_t is 0); the text after continues at
 * s + max(t, h/M, w/M). ropeDelta = (largest position + 1) − length: decode step k has t = h = w =
 * length + k + ropeDelta. Runs of `imageTokenId` are matched to `grids` in order; any mismatch is
 * refused by name.
 */
export function mropePositions(v: QwenVisionConfig, op: string, arg: string, tokens: ArrayLike<number>, grids: readonly (readonly number[])[]):
    { t: Int32Array; h: Int32Array; w: Int32Array; ropeDelta: number; runs: ImageRun[] } {
  const L = tokens.length, m = v.spatialMergeSize;
  const t = new Int32Array(L), h = new Int32Array(L), w = new Int32Array(L);
  const runs: ImageRun[] = [];
  let next = 0, img = 0, feature = 0;
  for (let i = 0; i < L;) {
    if (tokens[i] !== v.imageTokenId) {
      t[i] = h[i] = w[i] = next++;
      i++;
      continue;
    }
    let end = i;
    while (end < L && tokens[end] === v.imageTokenId) end++;
    if (img >= grids.length) {
      fail(op, arg, `as many runs of the image token ${v.imageTokenId} as images (${grids.length})`, `a run of ${end - i} image tokens at position ${i} with no image left for it`);
    }
    const [gt, gh, gw] = grids[img];
    const lh = gh / m, lw = gw / m, n = gt * lh * lw;
    if (end - i !== n) {
      fail(op, arg, `${n} image tokens for image ${img} (grid [${gt}, ${gh}, ${gw}] merged ${m}×${m})`, `a run of ${end - i} at position ${i}`);
    }
    const s = next;
    let k = i;
    for (let f = 0; f < gt; f++) for (let y = 0; y < lh; y++) for (let x = 0; x < lw; x++) { t[k] = s; h[k] = s + y; w[k] = s + x; k++; }
    runs.push({ start: i, count: n, featureRow: feature });
    feature += n;
    next = s + Math.max(lh, lw);
    img++;
    i = end;
  }
  if (img < grids.length) fail(op, arg, `a run of the image token ${v.imageTokenId} for each of the ${grids.length} images`, `${img} runs`);
  return { t, h, w, ropeDelta: next - L, runs };
}

/**
 * One token's M-RoPE cos/sin row: frequency i takes its angle from t, h or w by mrope_section, in f32
 * as transformers (inv_freq · position, then cos and sin of the f32 angle).
 */
export function mropeRow(cfg: ModelConfig, t: number, h: number, w: number, cos: Float32Array, sin: Float32Array, at: number): void {
  const inv = mropeInv(cfg);
  const [a, b] = cfg.mrope!.section;
  for (let i = 0; i < inv.length; i++) {
    const p = i < a ? t : i < a + b ? h : w;
    const angle = Math.fround(inv[i] * p);
    cos[at + i] = Math.fround(Math.cos(angle));
    sin[at + i] = Math.fround(Math.sin(angle));
  }
}

const invCache = new WeakMap<ModelConfig, Float32Array>();
function mropeInv(cfg: ModelConfig): Float32Array {
  let inv = invCache.get(cfg);
  if (!inv) invCache.set(cfg, inv = ropeParameters(cfg.rope).invFreq);
  return inv;
}

/**
 * Segments [cu[i], cu[i+1]) of an encoder's rows as sequences of a scratch paged cache of `block`-token
 * blocks (consecutive blocks from 0): their paged metadata, every row's slot, and the blocks taken.
 */
export function attentionSegments(cu: readonly number[], block: number): { meta: { queryStartLoc: Int32Array; seqLens: Int32Array; blockTable: Int32Array; maxBlocksPerSeq: number }; slots: Int32Array; blocks: number } {
  const S = cu.length - 1;
  const qsl = Int32Array.from(cu), seqLens = new Int32Array(S);
  let maxB = 1, blocks = 0;
  for (let i = 0; i < S; i++) { seqLens[i] = cu[i + 1] - cu[i]; maxB = Math.max(maxB, Math.ceil(seqLens[i] / block)); }
  const blockTable = new Int32Array(S * maxB), slots = new Int32Array(cu[S]);
  for (let i = 0; i < S; i++) {
    const nb = Math.ceil(seqLens[i] / block);
    for (let n = 0; n < nb; n++) blockTable[i * maxB + n] = blocks + n;
    for (let p = 0; p < seqLens[i]; p++) slots[cu[i] + p] = blocks * block + p;
    blocks += nb;
  }
  return { meta: { queryStartLoc: qsl, seqLens, blockTable, maxBlocksPerSeq: maxB }, slots, blocks };
}

interface VisionBlock {
  norm1: Tensor; norm2: Tensor;
  qkv: LinearWeight; proj: LinearWeight;
  gateUp: LinearWeight; down: LinearWeight;
}

const BLOCK = 16;

/** Qwen2.5-VL's vision tower and merger on the GPU: encode turns one image into its merged tokens. */
export class QwenVisionTower {
  private patchEmbed!: LinearWeight;
  private readonly blocks: VisionBlock[] = [];
  private lnQ!: Tensor;
  private fc1!: LinearWeight;
  private fc2!: LinearWeight;
  private cache: PagedKVCache | null = null;

  constructor(private readonly rt: Runtime, readonly v: QwenVisionConfig) {}

  async load(r: WeightReader, dtype: WeightDType): Promise<void> {
    const rt = this.rt, v = this.v;
    const K = v.inChannels * v.temporalPatchSize * v.patchSize * v.patchSize;
    // The Conv3d of stride = kernel over one patch is a product with its weight as [hidden, C·T·P·P].
    this.patchEmbed = createLinear(rt, { data: await r.read('visual.patch_embed.proj.weight', dtype), N: v.hiddenSize, K, dtype });
    for (let b = 0; b < v.depth; b++) {
      const p = `visual.blocks.${b}.`;
      this.blocks.push({
        norm1: await r.vector(rt, `${p}norm1.weight`),
        norm2: await r.vector(rt, `${p}norm2.weight`),
        qkv: await r.linear(rt, [`${p}attn.qkv.weight`], dtype, [`${p}attn.qkv.bias`]),
        proj: await r.linear(rt, [`${p}attn.proj.weight`], dtype, [`${p}attn.proj.bias`]),
        gateUp: await r.linear(rt, [`${p}mlp.gate_proj.weight`, `${p}mlp.up_proj.weight`], dtype, [`${p}mlp.gate_proj.bias`, `${p}mlp.up_proj.bias`]),
        down: await r.linear(rt, [`${p}mlp.down_proj.weight`], dtype, [`${p}mlp.down_proj.bias`]),
      });
    }
    this.lnQ = await r.vector(rt, 'visual.merger.ln_q.weight');
    this.fc1 = await r.linear(rt, ['visual.merger.mlp.0.weight'], dtype, ['visual.merger.mlp.0.bias']);
    this.fc2 = await r.linear(rt, ['visual.merger.mlp.2.weight'], dtype, ['visual.merger.mlp.2.bias']);
  }

  storedWeightBytes(): number {
    let n = linearWeightBytes(this.patchEmbed) + this.lnQ.byteLength;
    for (const w of [this.fc1, this.fc2]) n += linearWeightBytes(w) + (w.bias?.byteLength ?? 0);
    for (const B of this.blocks) {
      for (const w of [B.qkv, B.proj, B.gateUp, B.down]) n += linearWeightBytes(w) + (w.bias?.byteLength ?? 0);
      n += B.norm1.byteLength + B.norm2.byteLength;
    }
    return n;
  }

  private scratch(blocks: number): PagedKVCache {
    if (!this.cache || this.cache.numBlocks < blocks) {
      const numBlocks = Math.max(blocks, 2 * (this.cache?.numBlocks ?? 0));
      this.cache?.destroy();
      this.cache = null;
      this.cache = createPagedKVCache(this.rt, { numBlocks, blockSize: BLOCK, numKvHeads: this.v.numHeads, headSize: this.v.headDim, dtype: 'f32' });
    }
    return this.cache;
  }

  /** Calls run one at a time (they share the scratch cache). */
  private queue: Promise<unknown> = Promise.resolve();

  /** One image's merged tokens [count, out_hidden] row-major (the features that replace its image tokens). */
  encode(image: QwenImageInput): Promise<Float32Array> {
    const next = this.queue.then(() => this.pass(image));
    this.queue = next.catch(() => undefined);
    return next;
  }

  private async pass(image: QwenImageInput): Promise<Float32Array> {
    const rt = this.rt, v = this.v;
    const N = image.shape[0], K = image.shape[1], C = v.hiddenSize, unit = v.spatialMergeSize ** 2;
    const { windowIndex, cuSeqlens } = qwenWindows(v, image.grid);
    const { r, c } = patchRowsCols(v, image.grid);
    // The rows and their rotary angles in window order.
    const px = new Float32Array(N * K);
    const half = v.headDim / 2, quarter = half / 2;
    const cos = new Float32Array(N * half), sin = new Float32Array(N * half);
    const inv = new Float32Array(quarter);
    for (let i = 0; i < quarter; i++) inv[i] = Math.fround(1 / Math.fround(Math.pow(v.ropeTheta, Math.fround((2 * i) / half))));
    for (let k = 0; k < windowIndex.length; k++) {
      for (let u = 0; u < unit; u++) {
        const from = windowIndex[k] * unit + u, to = k * unit + u;
        px.set(image.pixelValues.subarray(from * K, (from + 1) * K), to * K);
        for (let i = 0; i < quarter; i++) {
          const ar = Math.fround(r[from] * inv[i]), ac = Math.fround(c[from] * inv[i]);
          cos[to * half + i] = Math.fround(Math.cos(ar));
          sin[to * half + i] = Math.fround(Math.sin(ar));
          cos[to * half + quarter + i] = Math.fround(Math.cos(ac));
          sin[to * half + quarter + i] = Math.fround(Math.sin(ac));
        }
      }
    }
    const frame = image.grid[1] * image.grid[2];
    const fullCu = Array.from({ length: image.grid[0] + 1 }, (_, i) => i * frame);
    const windows = attentionSegments(cuSeqlens, BLOCK), full = attentionSegments(fullCu, BLOCK);
    const cache = this.scratch(Math.max(windows.blocks, full.blocks));
    const temps: Tensor[] = [];
    const keep = <T extends Tensor>(x: T) => { temps.push(x); return x; };
    const plans: AttentionPlan[] = [];
    try {
      const x = keep(rt.tensor(px, [N, K], 'f32'));
      const positions = keep(rt.tensor(Int32Array.from({ length: N }, (_, i) => i), [N], 'i32'));
      const cosT = keep(rt.tensor(cos, [N, half], 'f32')), sinT = keep(rt.tensor(sin, [N, half], 'f32'));
      const slotsW = keep(rt.tensor(windows.slots, [N], 'i32')), slotsF = keep(rt.tensor(full.slots, [N], 'i32'));
      const opts = { cache, numHeads: v.numHeads, scale: 1 / Math.sqrt(v.headDim), causal: false };
      const planW = planAttention(rt, windows.meta, opts);
      plans.push(planW);
      const planF = planAttention(rt, full.meta, opts);
      plans.push(planF);
      const h = keep(rt.emptyTensor([N, C], 'f32')), xn = keep(rt.emptyTensor([N, C], 'f32'));
      const qkv = keep(rt.emptyTensor([N, 3 * C], 'f32')), attn = keep(rt.emptyTensor([N, C], 'f32'));
      const gu = keep(rt.emptyTensor([N, 2 * v.intermediateSize], 'f32'));
      linear(rt, x, this.patchEmbed, { rows: N, out: h });
      const H = v.numHeads, D = v.headDim, W = 3 * C;
      const qHeads = { tensor: qkv, tokenStride: W, heads: H, headStride: D };
      const kHeads = { tensor: qkv, offset: C, tokenStride: W, heads: H, headStride: D };
      this.blocks.forEach((B, b) => {
        const isFull = v.fullattBlockIndexes.includes(b);
        rmsNorm(rt, h, B.norm1, v.rmsEps, { rows: N, out: xn });
        linear(rt, xn, B.qkv, { rows: N, out: qkv });
        rope(rt, [qHeads, kHeads], positions, cosT, sinT, { rows: N, pairing: 'half' });
        encodeCacheWrite(rt, N, { tensor: qkv, offset: C, stride: W }, { tensor: qkv, offset: 2 * C, stride: W }, cache, isFull ? slotsF : slotsW);
        (isFull ? planF : planW).run(qkv.view([N, W]), cache, { out: attn.view([N, H, D]), qRowStride: W });
        linear(rt, attn, B.proj, { rows: N, out: h, accumulate: true });
        rmsNorm(rt, h, B.norm2, v.rmsEps, { rows: N, out: xn });
        linear(rt, xn, B.gateUp, { rows: N, out: gu });
        linear(rt, gu, B.down, { rows: N, out: h, accumulate: true, act: 'silu_mul' });
      });
      // The merger: ln_q per patch, a merged token's patches as one row, Linear-GELU-Linear.
      const M = N / unit, MC = unit * C;
      rmsNorm(rt, h, this.lnQ, v.rmsEps, { rows: N, out: xn });
      const mid = keep(rt.emptyTensor([M, MC], 'f32')), out = keep(rt.emptyTensor([M, v.outHiddenSize], 'f32'));
      linear(rt, xn.view([M, MC]), this.fc1, { rows: M, out: mid });
      activate(rt, mid, 'gelu', { rows: M, out: mid });
      linear(rt, mid, this.fc2, { rows: M, out });
      const got = await out.toFloat32();
      // Back from window order to the merged tokens' row-major order.
      const O = v.outHiddenSize, feats = new Float32Array(M * O);
      for (let k = 0; k < M; k++) feats.set(got.subarray(k * O, (k + 1) * O), windowIndex[k] * O);
      return feats;
    } finally {
      for (const p of plans) p.destroy();
      for (const t of temps) t.destroy();
    }
  }

  destroy(): void {
    this.cache?.destroy();
    this.cache = null;
    this.patchEmbed?.destroy();
    this.fc1?.destroy();
    this.fc2?.destroy();
    this.lnQ?.destroy();
    for (const B of this.blocks) {
      for (const w of [B.qkv, B.proj, B.gateUp, B.down]) w.destroy();
      B.norm1.destroy();
      B.norm2.destroy();
    }
  }
}

/** Qwen2.5-VL's architecture for the step runtime: the Qwen2 text model (LlamaFamily) and the vision tower beside it. */
export class QwenVLFamily extends withVisionTower(LlamaFamily, (rt, cfg) => {
  if (!cfg.vision || !cfg.mrope) throw new WebinferError('QwenVLFamily: a Qwen2.5-VL config (vision_config and mrope_section) is needed (internal error)');
  return new QwenVisionTower(rt, cfg.vision);
}) {}
