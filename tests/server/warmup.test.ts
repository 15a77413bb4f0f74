// The server's warm-up (src/serve/warmup.ts) on the llama-gqa golden in Node (dawn.node): it compiles
// the pipelines of the first requests' shapes, a second warm-up and a completion afterwards compile
// none, the model still gives HF's greedy tokens after its traced (garbage) pass, and with compiles
// asynchronous (createComputePipelineAsync after a trace) the event loop keeps ticking where the
// synchronous compiles of the same requests hold it.
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { create, globals } from 'webgpu';
import { createEngine, loadCheckpoint, type Engine, type Model } from '../../src/index';
import { warmup } from '../../src/serve/warmup';

// Mesa's on-disk shader cache would make the second engine's compiles (the synchronous run) nearly
// free: off, both compile what a fresh machine does. Read when the driver starts, after this line.
process.env.MESA_SHADER_CACHE_DISABLE ??= 'true';
Object.assign(globalThis, globals);
const gpu = create([]);
const root = join(dirname(fileURLToPath(import.meta.url)), '../..');
const GOLDEN = join(root, '../shared/goldens/llama-gqa');
const golden = JSON.parse(readFileSync(join(GOLDEN, 'golden.json'), 'utf8')) as { prompts: number[][]; greedy: number[][] };

const made: { engine: Engine; model: Model }[] = [];
async function fresh(): Promise<{ engine: Engine; model: Model }> {
  const engine = await createEngine({ gpu });
  const model = await engine.loadModel({ ...(await loadCheckpoint(GOLDEN)) });
  made.push({ engine, model });
  return { engine, model };
}

/** The longest wait between ticks of a 5 ms interval while `fn` runs: how long the event loop was held. */
async function longestGap<T>(fn: () => Promise<T>): Promise<{ result: T; gapMs: number }> {
  let last = performance.now(), gapMs = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    gapMs = Math.max(gapMs, now - last);
    last = now;
  }, 5);
  try {
    const result = await fn();
    gapMs = Math.max(gapMs, performance.now() - last);
    return { result, gapMs };
  } finally {
    clearInterval(timer);
  }
}

async function greedy(model: Model, prompt: number[]): Promise<number[]> {
  const r = await model.completions.create({ prompt, max_tokens: golden.greedy[0]!.length, temperature: 0, return_token_ids: true }) as { choices: { token_ids?: number[] }[] };
  return r.choices[0]!.token_ids ?? [];
}

describe('warmup(): the first requests\' pipelines compiled before a server listens (llama-gqa, Node)', () => {
  afterAll(() => {
    for (const { engine, model } of made) { model.destroy(); engine.destroy(); }
  });

  let asyncGap = 0;

  it('compiles the shapes\' pipelines asynchronously (trace, then createComputePipelineAsync); again, none; a completion afterwards, none, with HF\'s tokens', async () => {
    const { engine, model } = await fresh();
    const lines: string[] = [];
    const { result: first, gapMs } = await longestGap(() => warmup(model, { onProgress: (l) => lines.push(l) }));
    asyncGap = gapMs;
    console.log(`async warm-up: ${first.ms.toFixed(0)} ms, ${first.pipelines} pipelines, longest event-loop gap ${gapMs.toFixed(0)} ms\n  ${lines.join('\n  ')}`);
    expect(first.pipelines).toBeGreaterThan(0);
    expect(first.pipelines).toBe(engine.pipelines.compiled);
    expect(lines.some((l) => /tracing .*greedy.*n: 2.*logprobs.*streamed/.test(l)), lines.join('\n')).toBe(true);
    expect(lines.some((l) => new RegExp(`^warm-up: compiled ${first.pipelines} pipelines asynchronously \\([\\d.]+ s\\)$`).test(l)), lines.join('\n')).toBe(true);
    // Everything the real pass ran came from the trace: nothing compiled synchronously.
    expect(lines.at(-1)).toMatch(/^warm-up: warmed in [\d.]+ s, \d+ pipelines compiled$/);

    const second = await warmup(model);
    expect(second.pipelines).toBe(0);

    // The golden's prompts (5 to 34 tokens, greedy): the shapes the warm-up ran, so nothing new, and
    // the trace's garbage left nothing behind (its prompts are its own; the stand-ins were replaced).
    const before = engine.pipelines.compiled;
    for (let p = 0; p < golden.prompts.length; p++) expect(await greedy(model, golden.prompts[p]!), `prompt ${p}`).toEqual(golden.greedy[p]);
    expect(engine.pipelines.compiled - before).toBe(0);
  });

  it('the same warm-up compiling synchronously compiles as many pipelines and holds the event loop far longer', async () => {
    const { model } = await fresh();
    const { result, gapMs } = await longestGap(() => warmup(model, { compile: 'sync' }));
    console.log(`sync warm-up: ${result.ms.toFixed(0)} ms, ${result.pipelines} pipelines, longest event-loop gap ${gapMs.toFixed(0)} ms (async: ${asyncGap.toFixed(0)} ms)`);
    expect(result.pipelines).toBeGreaterThan(0);
    expect(asyncGap).toBeLessThan(gapMs);
  });

  it('a model with no completions or embeddings returns at once, saying so; an aborted warm-up rejects', async () => {
    const lines: string[] = [];
    const r = await warmup({ id: 'whisper-like' }, { onProgress: (l) => lines.push(l) });
    expect(r.pipelines).toBe(0);
    expect(lines).toEqual(['warm-up: whisper-like serves neither completions nor embeddings: nothing to warm']);
    const { model } = made[0]!;
    await expect(warmup(model, { signal: AbortSignal.abort() })).rejects.toThrow();
  });
});
