// Issue 44's vision benchmark: time to first token of a Gemma 3 request with an image, and the vision
// tower's share of it. The model is llama.cpp's pair (a gemma3 text GGUF and its mmproj GGUF, random
// weights of Gemma-3-4B's shape: bench/gguf_arch_random.ts, make_gguf.mjs --shape=gemma3-4b and
// gemma3-4b-mmproj), loaded with loadModel({ weights, mmproj }). A seeded random picture at the tower's
// size (896×896 for Gemma-3-4B) as raw RGB, so the processor's resize is the identity and its time is the
// rescale and normalization. Per run, each the best of the last two of three:
// - preprocess: model.preprocessImage (host);
// - tower: model.encodeImage (SigLIP and the projector, its features read back);
// - time to first token: generate of one token for a prompt of text, the image block and text (the image
//   preprocessed and encoded inside, then the prefill and the first sample), wall;
// - the same prompt length without the image (its image tokens as text): the text-only prefill.
import { loadGGUF, type Engine, type Model } from 'webinfer';
import { rng } from '../src/core/random';

export interface VisionBenchOptions {
  pairs: { text: string; mmproj: string; label: string }[];
  device: string; commit: string; cmd: string;
  log(s: string): void;
}

export interface VisionResult {
  label: string; imageSize: number; imageTokens: number; promptTokens: number;
  preprocessMs: number; towerMs: number; ttftMs: number; textOnlyMs: number;
  /** The tower's GPU ms by kernel, dispatches timed one by one (where the adapter has timestamps). */
  towerKernels?: Record<string, number>;
}

const best = (xs: number[]) => Math.min(...xs.slice(1));

async function timed<T>(f: () => Promise<T>): Promise<number> {
  const t0 = performance.now();
  await f();
  return performance.now() - t0;
}

async function benchPair(engine: Engine, p: VisionBenchOptions['pairs'][number], o: VisionBenchOptions): Promise<VisionResult> {
  const model: Model = await engine.loadModel({ weights: await loadGGUF(p.text), mmproj: await loadGGUF(p.mmproj), maxTokensPerStep: 1024 });
  try {
    const v = model.config.siglip;
    const vision = model.vision;
    if (!v || !vision) throw new Error(`vision bench: ${p.label}: the pair loaded without a vision tower`);
    const S = v.imageSize, r = rng(44);
    const image = { width: S, height: S, data: Uint8Array.from({ length: S * S * 3 }, () => Math.floor(r() * 256)) };
    // [bos], 16 text tokens, <start_of_image>, the image tokens, <end_of_image>, 16 text tokens.
    const V = model.config.vocabSize, text = Array.from({ length: 16 }, () => 300 + Math.floor(r() * Math.min(20000, V - 400)));
    const bos = model.config.bosTokenId ?? 2;
    const prompt = [bos, ...text, v.boiTokenId!, ...Array(v.tokensPerImage).fill(v.imageTokenId), v.eoiTokenId!, ...text];
    const textOnly = prompt.map((t) => (t === v.imageTokenId ? text[0] : t));
    const pre: number[] = [], tower: number[] = [], ttft: number[] = [], plain: number[] = [];
    for (let i = 0; i < 3; i++) {
      let px: { pixelValues: Float32Array } | null = null;
      pre.push(await timed(async () => { px = await model.preprocessImage!(image); }));
      tower.push(await timed(() => model.encodeImage(px!)));
      ttft.push(await timed(() => model.generate([prompt], { maxNewTokens: 1, stopTokens: [], images: [[image]] })));
      plain.push(await timed(() => model.generate([textOnly], { maxNewTokens: 1, stopTokens: [] })));
    }
    const res: VisionResult = {
      label: p.label, imageSize: S, imageTokens: v.tokensPerImage, promptTokens: prompt.length,
      preprocessMs: best(pre), towerMs: best(tower), ttftMs: best(ttft), textOnlyMs: best(plain),
    };
    // Where the tower's GPU time goes: one more encode with each dispatch in a timed pass of its own.
    if (engine.features.timestampQuery) {
      const px = await model.preprocessImage!(image);
      engine.beginTiming(4096);
      try {
        await model.encodeImage(px);
      } finally {
        await engine.endTiming();
      }
      res.towerKernels = { ...engine.lastTiming };
    }
    o.log(`${p.label}: ${S}×${S} image (${v.tokensPerImage} tokens), ${prompt.length}-token prompt: time to first token ${res.ttftMs.toFixed(1)} ms `
      + `(preprocess ${res.preprocessMs.toFixed(1)}, tower ${res.towerMs.toFixed(1)} = ${(100 * res.towerMs / res.ttftMs).toFixed(0)}%); the same length without the image ${res.textOnlyMs.toFixed(1)} ms`);
    return res;
  } finally {
    model.destroy();
  }
}

export async function runVision(engine: Engine, o: VisionBenchOptions): Promise<{ results: VisionResult[]; markdown: string }> {
  const results: VisionResult[] = [];
  for (const p of o.pairs) results.push(await benchPair(engine, p, o));
  const lines = [
    `# Time to first token with an image on ${o.device}`, '',
    `Measured ${new Date().toISOString().slice(0, 10)} at commit \`${o.commit}\` with \`${o.cmd}\`. llama.cpp's pair (a gemma3 text GGUF and its mmproj GGUF, random weights) loaded with loadModel({ weights, mmproj }); a seeded random picture at the tower's size as raw RGB; best of the last two of three runs. Time to first token: generate of one token, the image preprocessed and encoded inside; the tower: encodeImage (SigLIP and the projector, read back).`, '',
    '| model | image | image tokens | prompt tokens | preprocess ms | tower ms | time to first token ms | tower share | without the image ms |',
    '|---|---|---|---|---|---|---|---|---|',
    ...results.map((r) => `| ${r.label} | ${r.imageSize}×${r.imageSize} | ${r.imageTokens} | ${r.promptTokens} | ${r.preprocessMs.toFixed(1)} | ${r.towerMs.toFixed(1)} | ${r.ttftMs.toFixed(1)} | ${(100 * r.towerMs / r.ttftMs).toFixed(0)}% | ${r.textOnlyMs.toFixed(1)} |`),
    '',
  ];
  for (const r of results) {
    if (!r.towerKernels) continue;
    const rows = Object.entries(r.towerKernels).sort((a, b) => b[1] - a[1]);
    const total = rows.reduce((t, [, ms]) => t + ms, 0);
    lines.push(`Where the tower's GPU time goes, ${r.label} (dispatches timed one by one: ${total.toFixed(1)} ms in all):`, '',
      '| kernel | ms | share |', '|---|---|---|', ...rows.map(([k, ms]) => `| ${k} | ${ms.toFixed(2)} | ${(100 * ms / total).toFixed(1)}% |`), '');
  }
  return { results, markdown: `${lines.join('\n')}\n` };
}
