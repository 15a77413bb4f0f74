// Qwen2.5-VL (Qwen2_5_VLForConditionalGeneration) against HF transformers 5.17 (../shared/goldens-arch/qwen2.5-vl,
// SPEC §7.1): the vision tower (window attention in block 0, full in block 1, 2-D rotary, patch merger) from
// the golden's pixel_values against its image_features; the host's window index and M-RoPE positions
// against HF's; prefill logits of both prompts at every position within 1e-3·max|logit| with the image;
// greedy tokens identical (decode steps at position + rope delta), together and alone; a text request and
// an image request in one step; the same tokens with another image share no cached block; and the
// refusals (an image with no image tokens, image tokens with no image, a run of the wrong length).
import { createRandomModel, loadSafetensors, mropePositions, parseConfig, qwenWindows, type Model, type QwenImageInput } from '../../src/index';
import { assert, equalArrays, expectThrows, type CaseContext, type TestCase, wholeModelCases } from './harness';
import { golden, greedyWithinMargins, type GoldenModel } from './model.cases';
import { byteTokenizerConfig, byteTokenizerJson } from './text_fixture';

interface VLGolden {
  prompts: number[][];
  prefill_logits: number[][][];
  greedy: number[][];
  pixel_values: number[][];
  image_grid_thw: number[][];
  image_features: number[][];
  position_ids: number[][][];
  rope_deltas: number[];
  vision_windows: { window_index: number[]; cu_window_seqlens: number[] };
  image_token_id: number;
}

const NAME = 'qwen2.5-vl';

async function vlGolden(ctx: CaseContext): Promise<{ g: GoldenModel; vl: VLGolden; image: QwenImageInput }> {
  const g = await golden(ctx, NAME, 'goldens-arch');
  const vl = g.golden as unknown as VLGolden;
  const rows = vl.pixel_values.length, width = vl.pixel_values[0].length;
  const image: QwenImageInput = { pixelValues: Float32Array.from(vl.pixel_values.flat()), shape: [rows, width], grid: vl.image_grid_thw[0] as [number, number, number] };
  return { g, vl, image };
}

/** The golden's preprocessor_config.json (parsed) and image.png (its bytes). */
async function vlFiles(ctx: CaseContext): Promise<{ pp: object; png: Uint8Array }> {
  const pp = JSON.parse(new TextDecoder().decode(await ctx.fixture(`goldens-arch/${NAME}/preprocessor_config.json`))) as object;
  return { pp, png: await ctx.fixture(`goldens-arch/${NAME}/image.png`) };
}

async function loadVL(ctx: CaseContext, g: GoldenModel, config: Record<string, unknown> = g.config, o: { maxTokensPerStep?: number; kvCache?: { numBlocks: number; blockSize?: number }; dtype?: 'f16' | 'bf16' | 'q8' } = {}): Promise<Model> {
  return ctx.engine.loadModel({ config, weights: await loadSafetensors(g.weights), ...o });
}

/** Every position of a vision golden's prompts (with the image) within 1e-3 × max|logit| of HF's; the worst ratio. */
export async function checkImageLogits(model: Model, vl: { prompts: number[][]; prefill_logits: number[][][] }, image: unknown, tag: string): Promise<number> {
  const V = 256;
  let worst = 0;
  for (const [p, prompt] of vl.prompts.entries()) {
    const got = await model.logits(prompt, { images: [image as QwenImageInput] });
    assert(got.length === prompt.length * V, `${tag}: prompt ${p}: ${got.length} logits`);
    for (let t = 0; t < prompt.length; t++) {
      const ref = vl.prefill_logits[p][t];
      let max = 0;
      for (const x of ref) max = Math.max(max, Math.abs(x));
      for (let v = 0; v < V; v++) {
        const err = Math.abs(got[t * V + v] - ref[v]);
        if (!(err <= 1e-3 * max)) throw new Error(`${tag}: prompt ${p} position ${t} logit ${v}: got ${got[t * V + v]}, HF ${ref[v]} (|err| ${err.toExponential(2)} > 1e-3 × ${max.toFixed(3)})`);
        worst = Math.max(worst, err / max);
      }
    }
  }
  return worst;
}

/** A second image: the golden's pixels mirrored left-right within each patch row (other values, same grid). */
function otherImage(image: QwenImageInput): QwenImageInput {
  const px = image.pixelValues.slice();
  const K = image.shape[1];
  for (let r = 0; r < image.shape[0]; r++) px.subarray(r * K, (r + 1) * K).reverse();
  return { ...image, pixelValues: px };
}

export const archQwenVLCases: TestCase[] = wholeModelCases([{
  name: 'qwen2.5-vl (goldens-arch): window index and M-RoPE positions as HF; vision tower (window attention, 2-D rotary, merger) equals image_features within 1e-5',
  async run(ctx) {
    const { g, vl, image } = await vlGolden(ctx);
    const v = parseConfig(g.config).vision!;
    const w = qwenWindows(v, image.grid);
    equalArrays('window_index', Array.from(w.windowIndex), vl.vision_windows.window_index);
    equalArrays('cu_window_seqlens', w.cuSeqlens, vl.vision_windows.cu_window_seqlens);
    for (const [p, prompt] of vl.prompts.entries()) {
      const pos = mropePositions(v, 'test', 'prompt', prompt, [image.grid]);
      equalArrays(`prompt ${p} t`, Array.from(pos.t), vl.position_ids[p][0]);
      equalArrays(`prompt ${p} h`, Array.from(pos.h), vl.position_ids[p][1]);
      equalArrays(`prompt ${p} w`, Array.from(pos.w), vl.position_ids[p][2]);
      assert(pos.ropeDelta === vl.rope_deltas[p], `prompt ${p}: rope delta ${pos.ropeDelta}, HF ${vl.rope_deltas[p]}`);
    }
    const model = await loadVL(ctx, g);
    try {
      const got = await model.encodeImage(image);
      const want = vl.image_features.flat();
      assert(got.length === want.length, `image features: ${got.length} values, HF ${want.length}`);
      let worst = 0;
      for (let i = 0; i < want.length; i++) {
        const err = Math.abs(got[i] - want[i]);
        if (!(err <= 1e-5 * Math.max(1, Math.abs(want[i])))) throw new Error(`image feature ${Math.floor(i / 128)}, ${i % 128}: got ${got[i]}, HF ${want[i]}`);
        worst = Math.max(worst, err);
      }
      ctx.note(`qwen2.5-vl image features: worst |err| ${worst.toExponential(2)}`);
    } finally {
      model.destroy();
    }
  },
}, {
  name: 'qwen2.5-vl (goldens-arch): prefill logits with the image at every position within 1e-3·max|logit|; greedy identical (M-RoPE decode deltas), together and alone, and in chunks of 5 tokens; other M-RoPE sections miss',
  async run(ctx) {
    const { g, vl, image } = await vlGolden(ctx);
    const model = await loadVL(ctx, g);
    try {
      assert(model.architecture === 'Qwen2_5_VLForConditionalGeneration', `architecture ${model.architecture}`);
      const worst = await checkImageLogits(model, vl, image, NAME);
      const images = vl.prompts.map(() => [image]);
      const together = await model.generate(vl.prompts, { maxNewTokens: 8, stopTokens: [], images });
      vl.greedy.forEach((want, p) => equalArrays(`${NAME} greedy together, prompt ${p}`, together[p], want));
      for (const [p, prompt] of vl.prompts.entries()) {
        const [alone] = await model.generate([prompt], { maxNewTokens: 8, stopTokens: [], images: [[image]] });
        equalArrays(`${NAME} greedy alone, prompt ${p}`, alone, vl.greedy[p]);
      }
      ctx.note(`${NAME}: worst logit error ${worst.toExponential(2)} of max|logit|; greedy identical together and alone`);
    } finally {
      model.destroy();
    }
    // Prompts in chunks of 5 tokens: image runs split over steps (their features and M-RoPE rows placed per chunk).
    const chunked = await loadVL(ctx, g, g.config, { maxTokensPerStep: 5 });
    try {
      await checkImageLogits(chunked, vl, image, `${NAME} (chunks of 5 tokens)`);
      const [p1] = await chunked.generate([vl.prompts[1]], { maxNewTokens: 8, stopTokens: [], images: [[image]] });
      equalArrays(`${NAME} greedy, prompt 1 in chunks of 5`, p1, vl.greedy[1]);
    } finally {
      chunked.destroy();
    }
    // The case sees M-RoPE: the same model with every token at its 1-D position misses (README: 1.11 off).
    const t = g.config.text_config as Record<string, unknown>;
    const rp = t.rope_parameters as Record<string, unknown>;
    // [1, 1, 14] takes most frequencies' angles from w: the image tokens' rotations change, the text's do not.
    const flat2 = await loadVL(ctx, g, { ...g.config, text_config: { ...t, rope_parameters: { ...rp, mrope_section: [1, 1, 14] } } });
    try {
      let missed = false;
      try { await checkImageLogits(flat2, vl, image, `${NAME} (sections [1, 1, 14])`); } catch { missed = true; }
      assert(missed, `${NAME}: other mrope sections still matched HF: the case does not see M-RoPE's sections`);
    } finally {
      flat2.destroy();
    }
  },
}, {
  name: 'qwen2.5-vl (goldens-arch): a text request and an image request in one step; the same tokens with another image share no cached block; refusals by name',
  async run(ctx) {
    const { g, vl, image } = await vlGolden(ctx);
    const model = await loadVL(ctx, g);
    try {
      // A text prompt beside an image prompt: the text one equals itself alone, the image one HF's greedy.
      const text = [5, 17, 93, 41, 7, 66, 12, 200];
      const [textAlone] = await model.generate([text], { maxNewTokens: 8, stopTokens: [] });
      const s0 = model.engine.counters.steps;
      await model.generate([text, text.map((x) => x + 1)], { maxNewTokens: 8, stopTokens: [] });
      const s1 = model.engine.counters.steps;
      const both = await model.generate([text, vl.prompts[1]], { maxNewTokens: 8, stopTokens: [], images: [undefined, [image]] });
      // Both prompts fit the first step (42 tokens of 512): the pair takes the steps two text requests take
      // together (one after the other would take twice a request's 8).
      const texts = s1 - s0, mixed = model.engine.counters.steps - s1;
      assert(mixed === texts && mixed < 16, `a text and an image request took ${mixed} steps, two text requests ${texts}: not served in the same steps`);
      equalArrays('text prompt beside an image prompt', both[0], textAlone);
      equalArrays('image prompt beside a text prompt', both[1], vl.greedy[1]);

      // The same 34 tokens (two full blocks) with the same image: cached; with another image: not.
      const prompt = vl.prompts[1];
      const hits0 = model.engine.metrics().prefixCacheHits;
      const [again] = await model.generate([prompt], { maxNewTokens: 8, stopTokens: [], images: [[image]] });
      equalArrays('the image prompt again (from the prefix cache)', again, vl.greedy[1]);
      const hits1 = model.engine.metrics().prefixCacheHits;
      assert(hits1 > hits0, 'the same tokens and image again took no block from the prefix cache (the next check would prove nothing)');
      const other = otherImage(image);
      const [withOther] = await model.generate([prompt], { maxNewTokens: 8, stopTokens: [], images: [[other]] });
      const hits2 = model.engine.metrics().prefixCacheHits;
      assert(hits2 === hits1, `the same tokens with another image took ${hits2 - hits1} cached blocks of the first image`);
      // And what it computed is that image's own: equal to a fresh prefill of it.
      const logits = await model.logits(prompt, { images: [other] });
      const V = 256, last = prompt.length - 1;
      let best = 0;
      for (let v = 1; v < V; v++) if (logits[last * V + v] > logits[last * V + best]) best = v;
      assert(withOther[0] === best, `another image: first token ${withOther[0]}, its own prefill's argmax ${best}`);
      assert(withOther.join() !== vl.greedy[1].join(), 'another image gave the golden image\'s tokens');

      // Refusals, naming the argument.
      await expectThrows(() => model.logits(text, { images: [image] }), 'o.images', 'a run of the image token 251 for each of the 1 images', '0 runs');
      await expectThrows(() => model.logits(vl.prompts[0]), 'o.images', 'an image for the image tokens (id 251)', 'image token at position 4');
      await expectThrows(() => model.generate([vl.prompts[0]], { maxNewTokens: 2 }), 'o.images[0]', 'image token at position 4');
      const short = vl.prompts[0].filter((_, i) => i !== 5);
      await expectThrows(() => model.logits(short, { images: [image] }), 'o.images', '12 image tokens for image 0', 'a run of 11 at position 4');
      await expectThrows(() => model.logits(vl.prompts[0], { images: [image, image] }), 'o.images', 'a run of the image token 251 for each of the 2 images', '1 runs');
      await expectThrows(() => model.logits(vl.prompts[0], { images: [new Uint8Array(4) as unknown as QwenImageInput] }), 'o.images[0]', 'pixelValues');
      await expectThrows(() => model.logits(vl.prompts[0], { images: [{ ...image, grid: [1, 6, 10] }] }), 'o.images[0].shape', '[60, 384]');
      await expectThrows(() => model.completions.create({ model: model.id, prompt: vl.prompts[0], max_tokens: 2 }), 'prompt', 'no image token (id 251) without its image', 'position 4');
      await expectThrows(() => createRandomModel(ctx.engine, { config: g.config, dtype: 'f32' }), 'createRandomModel', 'Qwen2_5_VLForConditionalGeneration', 'load one');
    } finally {
      model.destroy();
    }
  },
}, {
  name: 'qwen2.5-vl (goldens-arch): greedy with the image under f16, bf16 and q8-on-load weights (the vision tower\'s too): identical, except after a step HF decided by less than the rounding (1e-3, 1e-2, 1e-2 of max|logit|)',
  async run(ctx) {
    const { g, vl, image } = await vlGolden(ctx);
    const ties: string[] = [];
    for (const [dtype, bound] of [['f16', 1e-3], ['bf16', 1e-2], ['q8', 1e-2]] as const) {
      const model = await loadVL(ctx, g, g.config, { dtype });
      try {
        if (dtype !== 'q8') assert(model.weightDType === dtype, `weights stored as ${model.weightDType}, asked for ${dtype}`);
        const got = await model.generate(vl.prompts, { maxNewTokens: 8, stopTokens: [], images: vl.prompts.map(() => [image]) });
        for (const t of greedyWithinMargins(`${NAME} greedy with ${dtype} weights`, got, g, bound)) ties.push(`${dtype}: ${t}`);
      } finally {
        model.destroy();
      }
    }
    ctx.note(ties.length ? `${NAME}: diverged after near-ties: ${ties.join('; ')}` : `${NAME}: every greedy token identical under f16, bf16 and q8 weights`);
  },
}, {
  name: 'qwen2.5-vl (goldens-arch): image requests preempted under an 18-block cache of 4-token blocks and recomputed give the tokens they give with room (the rope delta and features kept per sequence)',
  async run(ctx) {
    const { g, vl, image } = await vlGolden(ctx);
    const images = vl.prompts.map(() => [image]);
    const roomy = await loadVL(ctx, g);
    let want: number[][];
    try {
      want = await roomy.generate(vl.prompts, { maxNewTokens: 16, stopTokens: [], images });
    } finally {
      roomy.destroy();
    }
    vl.greedy.forEach((gr, p) => equalArrays(`${NAME} 16 tokens, prompt ${p}: HF's first 8`, want[p].slice(0, 8), gr));
    // 22 + 15 and 34 + 15 placed tokens: 10 and 13 blocks of 4, 23 in all; with 18 the second is preempted as both grow.
    const tight = await loadVL(ctx, g, g.config, { kvCache: { numBlocks: 18, blockSize: 4 } });
    try {
      const p0 = tight.engine.counters.preemptions;
      const got = await tight.generate(vl.prompts, { maxNewTokens: 16, stopTokens: [], images });
      const preempted = tight.engine.counters.preemptions - p0;
      assert(preempted > 0, `${NAME}: no preemption under an 18-block cache of 4-token blocks (the case would prove nothing)`);
      want.forEach((w, p) => equalArrays(`${NAME} under preemption, prompt ${p}`, got[p], w));
      ctx.note(`${NAME}: ${preempted} preemptions, tokens unchanged`);
    } finally {
      tight.destroy();
    }
  },
}, {
  name: 'qwen2.5-vl (goldens-arch) with its preprocessor_config.json: model.preprocessImage of image.png equals pixel_values; vision.tokensPerImage as the processor rounds; generate and logits take the PNG bytes as they come and give the golden greedy tokens; without the config, a named refusal',
  async run(ctx) {
    const { g, vl } = await vlGolden(ctx);
    const { pp, png } = await vlFiles(ctx);
    const model = await ctx.engine.loadModel({ config: g.config, weights: await loadSafetensors(g.weights), preprocessorConfig: pp });
    try {
      const pre = await model.preprocessImage!(png);
      const want = vl.pixel_values.flat();
      assert(pre.pixelValues.length === want.length, `pixel values: ${pre.pixelValues.length}, golden ${want.length}`);
      let worst = 0;
      for (let i = 0; i < want.length; i++) worst = Math.max(worst, Math.abs(pre.pixelValues[i] - want[i]));
      assert(worst <= 1e-6, `preprocessImage differs from the golden's pixel_values by ${worst}`);
      equalArrays('grid', pre.grid!, vl.image_grid_thw[0]);
      const vision = model.vision!;
      assert(vision && vision.imageTokenId === vl.image_token_id, `vision.imageTokenId ${vision?.imageTokenId}`);
      assert(vision.tokensPerImage(64, 48) === 12, `tokensPerImage(64, 48) = ${vision.tokensPerImage(64, 48)}, expected 12`);
      const out = await model.generate(vl.prompts, { images: vl.prompts.map(() => [png]), maxNewTokens: vl.greedy[0].length, stopTokens: [] });
      vl.prompts.forEach((_, p) => equalArrays(`greedy of prompt ${p} from the PNG bytes`, out[p], vl.greedy[p]));
      const lg = await model.logits(vl.prompts[0], { images: [png] });
      const ref = await model.logits(vl.prompts[0], { images: [{ pixelValues: Float32Array.from(want), shape: [vl.pixel_values.length, vl.pixel_values[0].length], grid: vl.image_grid_thw[0] as [number, number, number] }] });
      let d = 0;
      for (let i = 0; i < lg.length; i++) d = Math.max(d, Math.abs(lg[i] - ref[i]));
      assert(d <= 1e-4, `logits from the PNG differ from those of the golden's pixel_values by ${d}`);
      ctx.note(`qwen2.5-vl: preprocessImage within ${worst.toExponential(2)} of pixel_values; logits from the PNG within ${d.toExponential(2)} of the golden pixels'`);
    } finally {
      model.destroy();
    }
    const bare = await ctx.engine.loadModel({ config: g.config, weights: await loadSafetensors(g.weights) });
    try {
      assert(bare.vision === undefined, 'a model loaded without its preprocessor config has vision tokens');
      await expectThrows(() => bare.generate([vl.prompts[0]], { images: [[png]], maxNewTokens: 1 }), 'preprocessor_config');
    } finally {
      bare.destroy();
    }
  },
}, {
  name: "qwen2.5-vl (goldens-arch) through chat.completions: an image_url part (the PNG as a data: URL) and a text part, rendered by the chat template as <|vision_start|><|image_pad|><|vision_end|> and text, tokenized, the pad expanded to the image's tokens, the image decoded and processed: HF's greedy tokens of the golden's second prompt",
  async run(ctx) {
    const { g, vl } = await vlGolden(ctx);
    const { pp, png } = await vlFiles(ctx);
    // The byte-level tokenizer with Qwen2-VL's three vision tokens at the config's ids (249-251: bytes
    // that never occur in UTF-8 text), and a template that writes the parts in order, nothing around them.
    const tok = byteTokenizerJson() as { added_tokens: unknown[] };
    tok.added_tokens = [[249, '<|vision_start|>'], [250, '<|vision_end|>'], [251, '<|image_pad|>']].map(([id, content]) => ({
      id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true,
    }));
    const template = "{% for m in messages %}{% for item in m['content'] %}{% if item['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
      + "{% elif item['type'] == 'text' %}{{ item['text'] }}{% endif %}{% endfor %}{% endfor %}";
    const model = await ctx.engine.loadModel({
      config: g.config, weights: await loadSafetensors(g.weights), preprocessorConfig: pp,
      tokenizer: tok, tokenizerConfig: { ...(byteTokenizerConfig() as object), chat_template: template }, name: 'vl',
    });
    try {
      // The second prompt: the image block, then bytes 20-39 as text.
      const prompt = vl.prompts[1];
      const textIds = prompt.slice(prompt.indexOf(250) + 1);
      assert(prompt[0] === 249 && textIds.every((t) => t < 128), `the golden's second prompt starts ${prompt.slice(0, 3)}`);
      let b64 = '';
      for (const x of png) b64 += String.fromCharCode(x);
      const url = `data:image/png;base64,${btoa(b64)}`;
      const r = await model.chat.completions.create({
        model: 'vl', max_tokens: vl.greedy[1].length, temperature: 0, return_token_ids: true,
        messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url } }, { type: 'text', text: String.fromCharCode(...textIds) }] }],
      } as never) as { choices: { token_ids: number[] }[]; usage: { prompt_tokens: number }; prompt_token_ids?: number[] };
      assert(r.usage.prompt_tokens === prompt.length, `the chat path's prompt: ${r.usage.prompt_tokens} tokens, the golden's ${prompt.length}`);
      equalArrays('greedy through chat.completions with the image', r.choices[0].token_ids, vl.greedy[1]);
    } finally {
      model.destroy();
    }
  },
}]);
