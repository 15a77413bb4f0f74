// Gemma 3 with images (Gemma3ForConditionalGeneration) against HF transformers 5.17
// (../shared/goldens-arch/gemma3-vision, SPEC §7.1): the SigLIP tower and projector from the golden's
// pixel_values against its image_features; prefill logits of both prompts at every position within
// 1e-3·max|logit| with the image (its 16 tokens attending to each other: HF's logits move by 3.7 with
// them causal); greedy tokens identical, together and alone, and with steps of 18 tokens (the engine
// keeps the image block in one step); a text request and an image request in one step; the same tokens
// with another image share no cached block; the checkpoint's preprocessor_config.json preprocessing
// image.png; and the refusals (image tokens with no image, an image with no image tokens, a run of the
// wrong length, a block larger than a step).
import { loadSafetensors, type Model } from '../../src/index';
import { assert, equalArrays, expectThrows, type CaseContext, type TestCase, wholeModelCases } from './harness';
import { golden, type GoldenModel } from './model.cases';

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

/** Every position of both prompts (with the image) within 1e-3 × max|logit| of HF's; the worst ratio. */
async function checkLogits(model: Model, gv: G3Golden, image: Pixels, tag: string): Promise<number> {
  const V = 256;
  let worst = 0;
  for (const [p, prompt] of gv.prompts.entries()) {
    const got = await model.logits(prompt, { images: [image as never] });
    assert(got.length === prompt.length * V, `${tag}: prompt ${p}: ${got.length} logits`);
    for (let t = 0; t < prompt.length; t++) {
      const ref = gv.prefill_logits[p][t];
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
      const worst = await checkLogits(model, gv, image, NAME);
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
      await checkLogits(chunked, gv, image, `${NAME} (steps of 18 tokens)`);
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
}]);
