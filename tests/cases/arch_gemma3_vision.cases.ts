// Gemma 3 with images (Gemma3ForConditionalGeneration) against HF transformers 5.17
// (../shared/goldens-arch/gemma3-vision, SPEC §7.1): the SigLIP tower and projector from the golden's
// pixel_values against its image_features; prefill logits of both prompts at every position within
// 1e-3·max|logit| with the image (its 16 tokens attending to each other: HF's logits move by 3.7 with
// them causal); greedy tokens identical, together and alone, and with steps of 18 tokens (the engine
// keeps the image block in one step); a text request and an image request in one step; the same tokens
// with another image share no cached block; the checkpoint's preprocessor_config.json preprocessing
// image.png; and the refusals (image tokens with no image, an image with no image tokens, a run of the
// wrong length, a block larger than a step).
import { loadGGUF, loadSafetensors, reference, writeGGUF, type Model } from '../../src/index';
import { ARCH_SHAPES, archMetadata, archTensors, mmprojMetadata, mmprojTensors, type MmprojShape } from '../../bench/gguf_arch_random';
import { tensorChunks } from '../../bench/gguf_gptoss';
import { rng } from '../../src/core/random';
import { assert, equalArrays, expectThrows, type CaseContext, type TestCase, wholeModelCases } from './harness';
import { golden, type GoldenModel } from './model.cases';
import { checkImageLogits } from './arch_qwen_vl.cases';
import { GGUF_LAYER } from './arch_gemma3.cases';

interface G3Golden {
  prompts: number[][];
  prefill_logits: number[][][];
  greedy: number[][];
  pixel_values: number[][][];
  image_features: number[][];
  image_token_id: number;
}

const NAME = 'gemma3-vision';
type Pixels = { pixelValues: Float32Array };

async function g3Golden(ctx: CaseContext): Promise<{ g: GoldenModel; gv: G3Golden; image: Pixels }> {
  const g = await golden(ctx, NAME, 'goldens-arch');
  const gv = g.golden as unknown as G3Golden;
  return { g, gv, image: { pixelValues: Float32Array.from(gv.pixel_values.flat(2)) } };
}

async function loadG3(ctx: CaseContext, g: GoldenModel, o: { maxTokensPerStep?: number; preprocessorConfig?: object } = {}): Promise<Model> {
  return ctx.engine.loadModel({ config: g.config, weights: await loadSafetensors(g.weights), ...o });
}


/** llama.cpp's mmproj names of a SigLIP layer's tensors (gguf-py's tensor_mapping), by transformers'. */
const MMPROJ_LAYER: Readonly<Record<string, string>> = {
  'self_attn.q_proj': 'attn_q', 'self_attn.k_proj': 'attn_k', 'self_attn.v_proj': 'attn_v', 'self_attn.out_proj': 'attn_out',
  'layer_norm1': 'ln1', 'layer_norm2': 'ln2', 'mlp.fc1': 'ffn_up', 'mlp.fc2': 'ffn_down',
};

/**
 * The golden as llama.cpp's pair: a `gemma3` text GGUF (its names, norms stored as 1 + w, the linear RoPE
 * scaling of the full layers, a SentencePiece vocabulary with Gemma 3's image tokens at their ids) and an
 * mmproj GGUF (general.architecture clip, projector type gemma3, clip.vision.* sizes, scale factor 2
 * since the tiny tower's 8×8 patches pool to 4×4, mm.soft_emb_norm as 1 + w, mm.input_projection of
 * `projType` as the converter writes it, F16). Tensor shapes innermost first, as ggml's.
 */
async function gemma3VisionPair(g: GoldenModel, projType: 'F32' | 'F16'): Promise<{ text: Uint8Array; mmproj: Uint8Array }> {
  const file = await loadSafetensors(g.weights);
  const c = (g.config as { text_config: Record<string, number> }).text_config;
  const v = (g.config as { vision_config: Record<string, number> }).vision_config;
  const bytes = (x: Float32Array) => new Uint8Array(x.buffer, x.byteOffset, x.byteLength);
  const text: { name: string; type: string; shape: number[]; data: Uint8Array }[] = [];
  const mm: { name: string; type: string; shape: number[]; data: Uint8Array }[] = [];
  for (const [name, info] of file.tensors) {
    const x = new Float32Array((await file.bytes(name)).slice().buffer);
    const ggml = info.shape.slice().reverse();
    const t = /^language_model\.model\.(.+)$/.exec(name);
    if (t) {
      const m = /^layers\.(\d+)\.(.+)$/.exec(t[1]);
      const gname = m ? `blk.${m[1]}.${GGUF_LAYER[m[2]]}` : t[1] === 'embed_tokens.weight' ? 'token_embd.weight' : 'output_norm.weight';
      text.push({ name: gname, type: 'F32', shape: ggml, data: bytes(info.shape.length === 1 ? x.map((y) => Math.fround(1 + y)) : x) });
      continue;
    }
    const l = /^vision_tower\.encoder\.layers\.(\d+)\.(.+)\.(weight|bias)$/.exec(name);
    const fixed: Record<string, string> = {
      'vision_tower.embeddings.patch_embedding.weight': 'v.patch_embd.weight', 'vision_tower.embeddings.patch_embedding.bias': 'v.patch_embd.bias',
      'vision_tower.embeddings.position_embedding.weight': 'v.position_embd.weight', 'vision_tower.post_layernorm.weight': 'v.post_ln.weight',
      'vision_tower.post_layernorm.bias': 'v.post_ln.bias', 'multi_modal_projector.mm_soft_emb_norm.weight': 'mm.soft_emb_norm.weight',
      'multi_modal_projector.mm_input_projection_weight': 'mm.input_projection.weight',
    };
    const gname = l ? `v.blk.${l[1]}.${MMPROJ_LAYER[l[2]]}.${l[3]}` : fixed[name];
    assert(gname !== undefined, `${NAME} mmproj: no llama.cpp name for ${name}`);
    if (gname === 'mm.soft_emb_norm.weight') mm.push({ name: gname, type: 'F32', shape: ggml, data: bytes(x.map((y) => Math.fround(1 + y))) });
    else if (gname === 'mm.input_projection.weight' && projType === 'F16') mm.push({ name: gname, type: 'F16', shape: ggml, data: f16Bytes(x) });
    else mm.push({ name: gname, type: 'F32', shape: ggml, data: bytes(x) });
  }
  const rp = c.rope_parameters as unknown as Record<string, { rope_theta: number; factor?: number }>;
  const toks = Array.from({ length: c.vocab_size }, (_, i) => (i === 0 ? '<pad>' : i === 1 ? '<eos>' : i === 2 ? '<bos>' : i === 3 ? '<unk>'
    : i === 253 ? '<start_of_image>' : i === 254 ? '<end_of_image>' : i === 255 ? '<image_soft_token>' : `<t${i}>`));
  const textMeta: [string, unknown, ('f32' | 'u32')?][] = [
    ['general.architecture', 'gemma3'], ['general.name', 'gemma3-vision golden'], ['general.file_type', 0],
    ['gemma3.context_length', c.max_position_embeddings], ['gemma3.embedding_length', c.hidden_size], ['gemma3.block_count', c.num_hidden_layers],
    ['gemma3.feed_forward_length', c.intermediate_size], ['gemma3.attention.head_count', c.num_attention_heads],
    ['gemma3.attention.head_count_kv', c.num_key_value_heads], ['gemma3.attention.layer_norm_rms_epsilon', c.rms_norm_eps, 'f32'],
    ['gemma3.attention.key_length', c.head_dim], ['gemma3.attention.value_length', c.head_dim],
    ['gemma3.rope.freq_base', rp.full_attention.rope_theta, 'f32'], ['gemma3.rope.scaling.type', 'linear'], ['gemma3.rope.scaling.factor', rp.full_attention.factor, 'f32'],
    ['gemma3.attention.sliding_window', c.sliding_window],
    ['tokenizer.ggml.model', 'llama'], ['tokenizer.ggml.tokens', toks],
    ['tokenizer.ggml.scores', { type: 'array', itemType: 'f32', value: Float32Array.from(toks, (_, i) => -i) }],
    ['tokenizer.ggml.token_type', { type: 'array', itemType: 'i32', value: Int32Array.from(toks, (_, i) => (i < 4 || i >= 253 ? 3 : 1)) }],
    ['tokenizer.ggml.unknown_token_id', 3, 'u32'], ['tokenizer.ggml.bos_token_id', 2, 'u32'], ['tokenizer.ggml.eos_token_id', 1, 'u32'],
  ];
  const mmMeta: [string, unknown, ('f32' | 'u32')?][] = [
    ['general.architecture', 'clip'], ['general.name', 'gemma3-vision golden mmproj'], ['clip.has_vision_encoder', true], ['clip.projector_type', 'gemma3'],
    ['clip.use_gelu', true], ['clip.vision.image_size', v.image_size, 'u32'], ['clip.vision.patch_size', v.patch_size, 'u32'],
    ['clip.vision.embedding_length', v.hidden_size, 'u32'], ['clip.vision.feed_forward_length', v.intermediate_size, 'u32'],
    ['clip.vision.block_count', v.num_hidden_layers, 'u32'], ['clip.vision.attention.head_count', v.num_attention_heads, 'u32'],
    ['clip.vision.attention.layer_norm_epsilon', v.layer_norm_eps, 'f32'], ['clip.vision.projection_dim', c.hidden_size, 'u32'],
    ['clip.vision.projector.scale_factor', 2, 'u32'],
    ['clip.vision.image_mean', { type: 'array', itemType: 'f32', value: Float32Array.of(0.5, 0.5, 0.5) }],
    ['clip.vision.image_std', { type: 'array', itemType: 'f32', value: Float32Array.of(0.5, 0.5, 0.5) }],
  ];
  return { text: writeGGUF({ metadata: textMeta as never, tensors: text }), mmproj: writeGGUF({ metadata: mmMeta as never, tensors: mm }) };
}

/** f32 values as IEEE half bit patterns (round to nearest even), little-endian bytes. */
function f16Bytes(x: Float32Array): Uint8Array {
  const out = new Uint16Array(x.length);
  const f = new Float32Array(1), u = new Uint32Array(f.buffer);
  for (let i = 0; i < x.length; i++) {
    f[0] = x[i];
    const b = u[0], sign = (b >>> 16) & 0x8000, e = ((b >>> 23) & 0xff) - 127 + 15;
    let m = b & 0x7fffff;
    if (e <= 0) { out[i] = sign; continue; }   // the values here are far from f16's subnormals
    const r = m & 0x1fff;
    m >>>= 13;
    let h = (e << 10) | m;
    if (r > 0x1000 || (r === 0x1000 && (m & 1))) h++;
    out[i] = sign | h;
  }
  return new Uint8Array(out.buffer);
}

/**
 * Gemma 3's tower and projector in float64 from the reference ops (SPEC's): patches as rows, the conv as
 * a product with its bias, positions, pre-LayerNorm layers (bidirectional attention over every patch,
 * GELU-tanh MLP), post-LayerNorm, the k×k average pool, RMSNorm x·(1 + w) and x · W. `t` holds each
 * tensor by its llama.cpp name with its values in HF's layout (outermost first).
 */
function siglipRef(t: Map<string, Float32Array>, s: MmprojShape, pixels: Float32Array): Float64Array {
  const C = s.hidden, P = s.patch, S = s.image, G = S / P, N = G * G, K = 3 * P * P, H = s.heads, D = C / H, I = s.ffn;
  const px = new Float64Array(N * K);
  for (let gy = 0; gy < G; gy++) for (let gx = 0; gx < G; gx++) {
    for (let c = 0; c < 3; c++) for (let y = 0; y < P; y++) for (let x = 0; x < P; x++) px[(gy * G + gx) * K + (c * P + y) * P + x] = pixels[(c * S + gy * P + y) * S + gx * P + x];
  }
  const lin = (x: ArrayLike<number>, w: string, b: string | null, M: number, n: number, k: number) => reference.linearRef(x, t.get(w)!, M, n, k, { bias: b ? t.get(b)! : null });
  let h = reference.addRef(lin(px, 'v.patch_embd.weight', 'v.patch_embd.bias', N, C, K), t.get('v.position_embd.weight')!);
  const rows = { rows: N, n: C };
  for (let l = 0; l < s.layers; l++) {
    const b = `v.blk.${l}.`;
    const x = reference.layerNormRef(h, t.get(`${b}ln1.weight`)!, t.get(`${b}ln1.bias`)!, 1e-6, rows);
    // [N, C] rows as [1, H, N, D] heads for the dense reference, and back.
    const heads = (m: Float64Array) => { const o = new Float64Array(N * C); for (let n = 0; n < N; n++) for (let hh = 0; hh < H; hh++) for (let d = 0; d < D; d++) o[(hh * N + n) * D + d] = m[n * C + hh * D + d]; return o; };
    const [q, k, v] = ['attn_q', 'attn_k', 'attn_v'].map((n) => heads(lin(x, `${b}${n}.weight`, `${b}${n}.bias`, N, C, C)));
    const a = reference.sdpaRef(q, k, v, { B: 1, Hq: H, Hkv: H, Lq: N, Lk: N, D, Dv: D }, { scale: 1 / Math.sqrt(D), causal: false }).out;
    const attn = new Float64Array(N * C);
    for (let n = 0; n < N; n++) for (let hh = 0; hh < H; hh++) for (let d = 0; d < D; d++) attn[n * C + hh * D + d] = a[(hh * N + n) * D + d];
    h = reference.addRef(h, lin(attn, `${b}attn_out.weight`, `${b}attn_out.bias`, N, C, C));
    const x2 = reference.layerNormRef(h, t.get(`${b}ln2.weight`)!, t.get(`${b}ln2.bias`)!, 1e-6, rows);
    const mid = lin(x2, `${b}ffn_up.weight`, `${b}ffn_up.bias`, N, I, C).map(reference.geluTanhRef);
    h = reference.addRef(h, lin(mid, `${b}ffn_down.weight`, `${b}ffn_down.bias`, N, C, I));
  }
  h = reference.layerNormRef(h, t.get('v.post_ln.weight')!, t.get('v.post_ln.bias')!, 1e-6, rows);
  const side = G / s.scale, T = side * side, pooled = new Float64Array(T * C);
  for (let ty = 0; ty < side; ty++) for (let tx = 0; tx < side; tx++) for (let dy = 0; dy < s.scale; dy++) for (let dx = 0; dx < s.scale; dx++) {
    for (let c = 0; c < C; c++) pooled[(ty * side + tx) * C + c] += h[((ty * s.scale + dy) * G + tx * s.scale + dx) * C + c] / (s.scale * s.scale);
  }
  // The file's norm is 1 + w already; its projection [C, text] as HF stores it (x · W).
  const normed = reference.rmsNormRef(pooled, t.get('mm.soft_emb_norm.weight')!, 1e-6, { rows: T, n: C });
  const W = t.get('mm.input_projection.weight')!, out = new Float64Array(T * s.textHidden);
  for (let r = 0; r < T; r++) for (let j = 0; j < s.textHidden; j++) { let acc = 0; for (let c = 0; c < C; c++) acc += normed[r * C + c] * W[c * s.textHidden + j]; out[r * s.textHidden + j] = acc; }
  return out;
}

export const archGemma3VisionCases: TestCase[] = wholeModelCases([{
  name: 'gemma3-vision (goldens-arch): SigLIP tower and projector equal image_features within 1e-5; prefill logits with the image at every position within 1e-3·max|logit| (image tokens bidirectional within their block); greedy identical together and alone, and in steps of 18 tokens',
  async run(ctx) {
    const { g, gv, image } = await g3Golden(ctx);
    const model = await loadG3(ctx, g);
    try {
      assert(model.architecture === 'Gemma3ForConditionalGeneration', `architecture ${model.architecture}`);
      const got = await model.encodeImage(image);
      const want = gv.image_features.flat();
      assert(got.length === want.length, `image features: ${got.length} values, HF ${want.length}`);
      let fw = 0;
      for (let i = 0; i < want.length; i++) {
        const err = Math.abs(got[i] - want[i]);
        if (!(err <= 1e-5 * Math.max(1, Math.abs(want[i])))) throw new Error(`image feature ${Math.floor(i / 128)}, ${i % 128}: got ${got[i]}, HF ${want[i]}`);
        fw = Math.max(fw, err);
      }
      const worst = await checkImageLogits(model, gv, image, NAME);
      const images = gv.prompts.map(() => [image as never]);
      const together = await model.generate(gv.prompts, { maxNewTokens: 8, stopTokens: [], images });
      gv.greedy.forEach((w, p) => equalArrays(`${NAME} greedy together, prompt ${p}`, together[p], w));
      for (const [p, prompt] of gv.prompts.entries()) {
        const [alone] = await model.generate([prompt], { maxNewTokens: 8, stopTokens: [], images: [[image as never]] });
        equalArrays(`${NAME} greedy alone, prompt ${p}`, alone, gv.greedy[p]);
      }
      ctx.note(`${NAME}: image features worst |err| ${fw.toExponential(2)}; logits worst ${worst.toExponential(2)} of max|logit|; greedy identical together and alone`);
    } finally {
      model.destroy();
    }
    // Steps of 18 tokens: a chunk that would end inside the 16-token block stops before it, the block
    // takes the next step whole (its tokens see each other), then the rest.
    const chunked = await loadG3(ctx, g, { maxTokensPerStep: 18 });
    try {
      await checkImageLogits(chunked, gv, image, `${NAME} (steps of 18 tokens)`);
      const s0 = chunked.engine.counters.steps;
      const [p0] = await chunked.generate([gv.prompts[0]], { maxNewTokens: 8, stopTokens: [], images: [[image as never]] });
      equalArrays(`${NAME} greedy, prompt 0 in steps of 18`, p0, gv.greedy[0]);
      // 26 prompt tokens as [0, 4) (the chunk to 18 would cut the block at 4..19), [4, 20), [20, 26): three
      // prefill steps, then 7 decode steps.
      const steps = chunked.engine.counters.steps - s0;
      assert(steps === 10, `${NAME}: prompt 0 in steps of 18 took ${steps} steps, expected 3 prefill steps and 7 decodes`);
      await expectThrows(() => loadG3(ctx, g, { maxTokensPerStep: 12 }).then(async (m) => { try { await m.logits(gv.prompts[0], { images: [image as never] }); } finally { m.destroy(); } }),
        'o.images', 'images of at most maxTokensPerStep=12 image tokens', '16 tokens an image');
    } finally {
      chunked.destroy();
    }
  },
}, {
  name: 'gemma3-vision (goldens-arch): a text request and an image request in one step; the same tokens with another image share no cached block; refusals by name; its preprocessor_config.json preprocesses image.png to the golden\'s tokens',
  async run(ctx) {
    const { g, gv, image } = await g3Golden(ctx);
    const pp = JSON.parse(new TextDecoder().decode(await ctx.fixture(`goldens-arch/${NAME}/preprocessor_config.json`))) as object;
    const model = await loadG3(ctx, g, { preprocessorConfig: pp });
    try {
      const text = [2, 17, 93, 41, 7, 66, 12, 200];
      const [textAlone] = await model.generate([text], { maxNewTokens: 8, stopTokens: [] });
      const s0 = model.engine.counters.steps;
      const both = await model.generate([text, gv.prompts[1]], { maxNewTokens: 8, stopTokens: [], images: [undefined as never, [image as never]] });
      const steps = model.engine.counters.steps - s0;
      assert(steps < 16, `a text and an image request took ${steps} steps: not served in the same steps`);
      equalArrays('text prompt beside an image prompt', both[0], textAlone);
      equalArrays('image prompt beside a text prompt', both[1], gv.greedy[1]);

      // The same 33 tokens with the same image: cached blocks; with another image (the pixels mirrored): none.
      const prompt = gv.prompts[1];
      const hits0 = model.engine.metrics().prefixCacheHits;
      const [again] = await model.generate([prompt], { maxNewTokens: 8, stopTokens: [], images: [[image as never]] });
      equalArrays('the image prompt again (from the prefix cache)', again, gv.greedy[1]);
      const hits1 = model.engine.metrics().prefixCacheHits;
      assert(hits1 > hits0, 'the same tokens and image again took no block from the prefix cache (the next check would prove nothing)');
      const other = { pixelValues: image.pixelValues.slice().reverse() };
      const [withOther] = await model.generate([prompt], { maxNewTokens: 8, stopTokens: [], images: [[other as never]] });
      assert(model.engine.metrics().prefixCacheHits === hits1, 'the same tokens with another image took cached blocks of the first image');
      const logits = await model.logits(prompt, { images: [other as never] });
      const V = 256, last = prompt.length - 1;
      let best = 0;
      for (let v = 1; v < V; v++) if (logits[last * V + v] > logits[last * V + best]) best = v;
      assert(withOther[0] === best, `another image: first token ${withOther[0]}, its own prefill's argmax ${best}`);

      // The PNG as it comes, through the checkpoint's processor: the golden's tokens.
      const png = await ctx.fixture(`goldens-arch/${NAME}/image.png`);
      const pre = await model.preprocessImage!(png);
      let worst = 0;
      for (let i = 0; i < image.pixelValues.length; i++) worst = Math.max(worst, Math.abs(pre.pixelValues[i] - image.pixelValues[i]));
      assert(worst <= 1e-6, `preprocessImage differs from the golden's pixel_values by ${worst}`);
      const [fromPng] = await model.generate([gv.prompts[0]], { maxNewTokens: 8, stopTokens: [], images: [[png]] });
      equalArrays(`${NAME} greedy from image.png`, fromPng, gv.greedy[0]);

      // Refusals, naming the argument.
      await expectThrows(() => model.logits(text, { images: [image as never] }), 'o.images', 'a run of the image token 255 for each of the 1 images', '0 runs');
      await expectThrows(() => model.logits(gv.prompts[0]), 'o.images', 'an image for the image tokens (id 255)', 'image token at position 4');
      await expectThrows(() => model.generate([gv.prompts[0]], { maxNewTokens: 2 }), 'o.images[0]', 'image token at position 4');
      const short = gv.prompts[0].filter((_, i) => i !== 5);
      await expectThrows(() => model.logits(short, { images: [image as never] }), 'o.images', '16 image tokens for image 0', 'a run of 15 at position 4');
      await expectThrows(() => model.logits(gv.prompts[0], { images: [{ pixelValues: new Float32Array(5) } as never] }), 'o.images[0]', 'Float32Array of 12288 values', '5 values');
    } finally {
      model.destroy();
    }
  },
}, {
  name: "gemma3-vision (goldens-arch) through chat.completions: an image_url part (image.png as a data: URL) between text parts, the template's <start_of_image> expanded as Gemma3Processor does (its toy tokenizer drops the newlines), the image decoded and processed: HF's greedy tokens of the golden's first prompt",
  async run(ctx) {
    const { g, gv } = await g3Golden(ctx);
    const file = async (f: string) => JSON.parse(new TextDecoder().decode(await ctx.fixture(`goldens-arch/${NAME}/${f}`))) as Record<string, unknown>;
    const template = "{% for m in messages %}{% for item in m['content'] %}{% if item['type'] == 'image' %}<start_of_image>"
      + "{% elif item['type'] == 'text' %}{{ item['text'] }}{% endif %}{% endfor %}{% endfor %}";
    const model = await ctx.engine.loadModel({
      config: g.config, weights: await loadSafetensors(g.weights), preprocessorConfig: await file('preprocessor_config.json'),
      tokenizer: await file('tokenizer.json'), tokenizerConfig: { ...(await file('tokenizer_config.json')), chat_template: template }, name: 'g3',
    });
    try {
      const vision = model.vision!;
      assert(vision && vision.imageTokenId === gv.image_token_id && vision.tokensPerImage(640, 480) === 16, `vision ${JSON.stringify(vision && { id: vision.imageTokenId, n: vision.tokensPerImage(640, 480) })}`);
      // The first prompt: <bos> <t17> <t93>, the image block, <t41> <t7> <t66> <t12> <t200>.
      const prompt = gv.prompts[0];
      const words = (ids: number[]) => ids.map((i) => (i === 2 ? '<bos>' : `<t${i}>`)).join(' ');
      const png = await ctx.fixture(`goldens-arch/${NAME}/image.png`);
      let b64 = '';
      for (const x of png) b64 += String.fromCharCode(x);
      const r = await model.chat.completions.create({
        model: 'g3', max_tokens: gv.greedy[0].length, temperature: 0, return_token_ids: true,
        messages: [{ role: 'user', content: [
          { type: 'text', text: `${words(prompt.slice(0, 3))} ` },
          { type: 'image_url', image_url: { url: `data:image/png;base64,${btoa(b64)}` } },
          { type: 'text', text: ` ${words(prompt.slice(prompt.indexOf(254) + 1))}` },
        ] }],
      } as never) as { choices: { token_ids: number[] }[]; usage: { prompt_tokens: number } };
      assert(r.usage.prompt_tokens === prompt.length, `the chat path's prompt: ${r.usage.prompt_tokens} tokens, the golden's ${prompt.length}`);
      equalArrays('greedy through chat.completions with the image', r.choices[0].token_ids, gv.greedy[0]);
    } finally {
      model.destroy();
    }
  },
}, {
  name: "gemma3-vision (goldens-arch) as llama.cpp's pair, a gemma3 text GGUF and its mmproj GGUF (projector type gemma3, written with writeGGUF in llama.cpp's names): its own config; with F32 tensors equal to the safetensors form under llama.cpp's fixed layer pattern and scale (logits bit for bit, greedy identical); the F16 input projection llama.cpp writes within 1e-3·max|logit|; the mmproj's processor; refusals by name",
  async run(ctx) {
    const { g, gv, image } = await g3Golden(ctx);
    const tc = g.config.text_config as Record<string, unknown>;
    // llama.cpp runs every sixth layer full (three layers: all sliding) and scores × head_dim^-0.5.
    const asLlamaCpp = { ...g.config, text_config: { ...tc, layer_types: ['sliding_attention', 'sliding_attention', 'sliding_attention'], query_pre_attn_scalar: tc.head_dim } };
    const ref = await ctx.engine.loadModel({ config: asLlamaCpp, weights: await loadSafetensors(g.weights) });
    try {
      const pair32 = await gemma3VisionPair(g, 'F32');
      const m32 = await ctx.engine.loadModel({ weights: await loadGGUF(pair32.text), mmproj: await loadGGUF(pair32.mmproj) });
      try {
        assert(m32.architecture === 'Gemma3ForConditionalGeneration', `the pair's architecture: ${m32.architecture}`);
        for (const [p, prompt] of gv.prompts.entries()) {
          const a = await m32.logits(prompt, { images: [image as never] }), b = await ref.logits(prompt, { images: [image as never] });
          for (let i = 0; i < b.length; i++) if (a[i] !== b[i]) throw new Error(`${NAME} GGUF pair, prompt ${p}: logit ${i} ${a[i]}, safetensors form ${b[i]}`);
        }
        const want = await ref.generate(gv.prompts, { maxNewTokens: 8, stopTokens: [], images: gv.prompts.map(() => [image as never]) });
        const got = await m32.generate(gv.prompts, { maxNewTokens: 8, stopTokens: [], images: gv.prompts.map(() => [image as never]) });
        want.forEach((w, p) => equalArrays(`${NAME} GGUF pair greedy, prompt ${p}`, got[p], w));
        // The mmproj's image size, mean and std make the processor: image.png as it comes.
        const png = await ctx.fixture(`goldens-arch/${NAME}/image.png`);
        const pre = await m32.preprocessImage!(png);
        let worst = 0;
        for (let i = 0; i < image.pixelValues.length; i++) worst = Math.max(worst, Math.abs(pre.pixelValues[i] - image.pixelValues[i]));
        assert(worst <= 1e-6, `the mmproj's processor differs from the golden's pixel_values by ${worst}`);
      } finally {
        m32.destroy();
      }
      const pair16 = await gemma3VisionPair(g, 'F16');
      const m16 = await ctx.engine.loadModel({ weights: await loadGGUF(pair16.text), mmproj: await loadGGUF(pair16.mmproj) });
      try {
        let worst = 0;
        for (const prompt of gv.prompts) {
          const a = await m16.logits(prompt, { images: [image as never] }), b = await ref.logits(prompt, { images: [image as never] });
          for (let t = 0; t < prompt.length; t++) {
            let max = 0, err = 0;
            for (let v = 0; v < 256; v++) { max = Math.max(max, Math.abs(b[t * 256 + v])); err = Math.max(err, Math.abs(a[t * 256 + v] - b[t * 256 + v])); }
            assert(err <= 1e-3 * max, `${NAME} GGUF pair with an F16 input projection: position ${t} off by ${err} (max|logit| ${max})`);
            worst = Math.max(worst, err / max);
          }
        }
        ctx.note(`${NAME} GGUF pair: F32 bit for bit; F16 input projection worst ${worst.toExponential(2)} of max|logit|`);
      } finally {
        m16.destroy();
      }
      await expectThrows(async () => ctx.engine.loadModel({ weights: await loadGGUF(pair32.mmproj), mmproj: await loadGGUF(pair32.mmproj) }), 'o.weights', 'a gemma3 text GGUF', 'clip');
      await expectThrows(async () => ctx.engine.loadModel({ weights: await loadGGUF(pair32.text), mmproj: await loadGGUF(pair32.text) }), 'o.mmproj', "general.architecture: expected 'clip'", 'gemma3');
      await expectThrows(async () => ctx.engine.loadModel({ weights: await loadSafetensors(g.weights), config: g.config, mmproj: await loadGGUF(pair32.mmproj) }), 'o.weights', 'a GGUFFile (the text model beside o.mmproj)');
      await expectThrows(async () => ctx.engine.loadModel({ weights: await loadGGUF(pair32.mmproj) }), 'o.weights', 'an mmproj file goes in o.mmproj');
      const qwenProj = writeGGUF({ metadata: [['general.architecture', 'clip'], ['clip.projector_type', 'qwen2.5vl_merger']] as never, tensors: [] });
      await expectThrows(async () => ctx.engine.loadModel({ weights: await loadGGUF(pair32.text), mmproj: await loadGGUF(qwenProj) }), 'o.mmproj', 'clip.projector_type: expected one of gemma3', 'qwen2.5vl_merger');
    } finally {
      ref.destroy();
    }
  },
}, {
  name: "gemma3-vision tower at Gemma 3's own patch size (14 pixels: 588-value patch rows, no multiple of 8, so the patch product runs in f32) from an mmproj of random F32 weights beside a Q4_K text file: image features within 1e-4·max of the float64 SigLIP and projector",
  async run(ctx) {
    // A tiny tower of Gemma-3-4B's patch (14) over a 56-pixel image: a 4×4 grid pooled 2×2, beside the
    // random gemma3-tiny text file (its vocabulary holds the image tokens).
    const shape: MmprojShape = { layers: 2, hidden: 32, ffn: 64, heads: 2, patch: 14, image: 56, textHidden: ARCH_SHAPES['gemma3-tiny'].hidden, scale: 2 };
    const r = rng(144);
    const values = new Map<string, Float32Array>();
    const mm = mmprojTensors(shape).map((t) => {
      const n = t.shape.reduce((a, b) => a * b, 1);
      const v = Float32Array.from({ length: n }, () => (t.fill === 'ones' ? 1 + 0.2 * (r() - 0.5) : 0.3 * (r() - 0.5)));
      values.set(t.name, v);
      return { name: t.name, type: 'F32', shape: t.shape, data: new Uint8Array(v.buffer) };
    });
    const text = archTensors(ARCH_SHAPES['gemma3-tiny']).map((t, i) => {
      const parts = [...tensorChunks(t, 7, i)];
      const data = new Uint8Array(parts.reduce((a, p) => a + p.length, 0));
      let at = 0;
      for (const p of parts) { data.set(p, at); at += p.length; }
      return { name: t.name, type: t.type, shape: t.shape, data };
    });
    const model = await ctx.engine.loadModel({
      weights: await loadGGUF(writeGGUF({ metadata: archMetadata(ARCH_SHAPES['gemma3-tiny'], 'gemma3-tiny random'), tensors: text })),
      mmproj: await loadGGUF(writeGGUF({ metadata: mmprojMetadata(shape, 'tiny mmproj, 14-pixel patches'), tensors: mm })),
    });
    try {
      assert(model.config.siglip!.tokensPerImage === 4, `tokens per image ${model.config.siglip!.tokensPerImage}`);
      const pixels = Float32Array.from({ length: 3 * 56 * 56 }, () => 2 * r() - 1);
      const got = await model.encodeImage({ pixelValues: pixels });
      const want = siglipRef(values, shape, pixels);
      assert(got.length === want.length, `features: ${got.length} values, the reference ${want.length}`);
      let max = 0, err = 0;
      for (let i = 0; i < want.length; i++) { max = Math.max(max, Math.abs(want[i])); err = Math.max(err, Math.abs(got[i] - want[i])); }
      assert(err <= 1e-4 * max, `features off the float64 reference by ${err} (max ${max})`);
      ctx.note(`gemma3 tower at 14-pixel patches: worst |err| ${(err / max).toExponential(2)} of max`);
    } finally {
      model.destroy();
    }
  },
}]);
