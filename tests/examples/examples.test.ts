// The README's examples (examples/*.mjs) run as a user runs them, `node examples/<name>.mjs <model> ...`,
// against the goldens, and what each prints is checked: the tokens HF computed (llama-gqa), the pooled
// vectors HF computed (BERT), or the same call made in process (the GGUF chat, the server, Whisper).
// The page example (examples/page-worker) is served by its own script and chatted with in Chromium.
// Needs dist/ (npm run build): the examples import the package by its name.
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from '@playwright/test';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { create, globals } from 'webgpu';
import { audioToPcm, createEngine, encodeWav, loadCheckpoint, type Engine } from '../../src/index';
import { CHROMIUM_ARGS } from '../../playwright.config';

Object.assign(globalThis, globals);
const root = join(dirname(fileURLToPath(import.meta.url)), '../..');
const shared = join(root, '../shared');
const GGUF = join(shared, 'goldens-quant/gguf-llama-q4-k-m/model.gguf');

/** Runs an example to its end: exit code, stdout, stderr. */
function run(args: string[], timeoutMs = 240_000): Promise<{ code: number | null; out: string; err: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, args, { cwd: root, env: { ...process.env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    const t = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('exit', (code) => { clearTimeout(t); resolve({ code, out, err }); });
  });
}

let engine: Engine;
let tmp: string;
beforeAll(async () => {
  engine = await createEngine({ gpu: create([]) });
  tmp = mkdtempSync(join(tmpdir(), 'webinfer-examples-'));
});
afterAll(() => {
  engine?.destroy();
  rmSync(tmp, { recursive: true, force: true });
});

describe('examples/*.mjs against the goldens (Node)', () => {
  it('chat-gguf.mjs streams the reply the same chat request gives in process (GGUF tokenizer and template)', async () => {
    const r = await run(['examples/chat-gguf.mjs', GGUF, 'Hello there']);
    expect(r.code, r.err).toBe(0);
    const model = await engine.loadModel(await loadCheckpoint(GGUF));
    const want = await model.chat.completions.create({ messages: [{ role: 'user', content: 'Hello there' }], max_tokens: 32, temperature: 0 }) as { choices: { message: { content: string } }[] };
    model.destroy();
    expect(r.out).toBe(`${want.choices[0]!.message.content}\n`);
  }, 300_000);

  it("hf-folder.mjs prints HF's greedy tokens for the golden's prompt", async () => {
    const dir = join(shared, 'goldens/llama-gqa');
    const g = JSON.parse(readFileSync(join(dir, 'golden.json'), 'utf8')) as { prompts: number[][]; greedy: number[][] };
    const r = await run(['examples/hf-folder.mjs', dir, g.prompts[0]!.join(',')]);
    expect(r.code, r.err).toBe(0);
    expect(r.out.trim()).toBe(`prompt ${JSON.stringify(g.prompts[0])} -> ${JSON.stringify(g.greedy[0]!.slice(0, 8))}`);
  }, 300_000);

  it("embeddings.mjs: the cosine of HF's mean-pooled vectors of the golden's inputs", async () => {
    const dir = join(shared, 'goldens-layers/bert-padded-batch');
    const g = JSON.parse(readFileSync(join(dir, 'golden.json'), 'utf8')) as { inputs: number[][]; mean_pooled: number[][] };
    const r = await run(['examples/embeddings.mjs', dir, g.inputs[0]!.join(','), g.inputs[1]!.join(',')]);
    expect(r.code, r.err).toBe(0);
    const [a, b] = [g.mean_pooled[0]!, g.mean_pooled[1]!];
    const dot = (x: number[], y: number[]) => x.reduce((s, v, i) => s + v * y[i]!, 0);
    const cos = dot(a, b) / Math.sqrt(dot(a, a) * dot(b, b));
    expect(r.out).toContain(`2 embeddings of ${a.length} dimensions`);
    const got = Number(/cosine\(0, 1\) = (-?[\d.]+)/.exec(r.out)?.[1]);
    expect(Math.abs(got - cos)).toBeLessThan(1e-3);
  }, 300_000);

  it('transcribe.mjs prints what transcribe gives in process for the same WAV (Whisper golden with a tokenizer)', async () => {
    const golden = join(shared, 'goldens-layers/whisper-tiny-random');
    const dir = join(tmp, 'whisper');
    mkdirSync(dir);
    for (const f of ['config.json', 'generation_config.json', 'model.safetensors', 'preprocessor_config.json']) symlinkSync(join(golden, f), join(dir, f));
    // A WordPiece tokenizer over the golden's 384 ids (as tests/server/transcriptions.test.ts).
    const specials: [string, number][] = [['<|startoftranscript|>', 380], ['<|nospeech|>', 381], ['<|endoftext|>', 382], ['<|pad|>', 383]];
    const vocab: Record<string, number> = { '[UNK]': 0 };
    for (let i = 1; i < 380; i++) vocab[`w${i}`] = i;
    for (const [t, id] of specials) vocab[t] = id;
    writeFileSync(join(dir, 'tokenizer.json'), JSON.stringify({
      version: '1.0', truncation: null, padding: null, normalizer: null, post_processor: null,
      added_tokens: specials.map(([content, id]) => ({ id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true })),
      pre_tokenizer: { type: 'Whitespace' }, decoder: { type: 'WordPiece', prefix: '##', cleanup: true },
      model: { type: 'WordPiece', unk_token: '[UNK]', continuing_subword_prefix: '##', max_input_chars_per_word: 100, vocab },
    }));
    const fe = JSON.parse(readFileSync(join(shared, 'goldens-layers/whisper-frontend/golden.json'), 'utf8')) as { waveforms: number[][] };
    const wav = join(tmp, 'clip.wav');
    writeFileSync(wav, encodeWav(Float32Array.from(fe.waveforms[0]!), 16000, 16));
    const r = await run(['examples/transcribe.mjs', dir, wav]);
    expect(r.code, r.err).toBe(0);
    const model = await engine.loadModel(await loadCheckpoint(dir)) as unknown as { transcribe(p: Float32Array, o: object): Promise<{ text: string }>; destroy(): void };
    const want = await model.transcribe(audioToPcm(new Uint8Array(readFileSync(wav)), 16000, 'clip.wav'), { timestamps: true });
    model.destroy();
    expect(r.out.split('\n')[0]).toBe(JSON.stringify(want.text));
  }, 300_000);

  it('server.mjs: the openai client gets from the served GGUF what the same completion gives in process', async () => {
    const r = await run(['examples/server.mjs', GGUF]);
    expect(r.code, r.err).toBe(0);
    expect(r.err).toMatch(/serving on http:\/\/127\.0\.0\.1:\d+\/v1/);
    const model = await engine.loadModel({ ...(await loadCheckpoint(GGUF)), name: 'local' });
    const want = await model.completions.create({ prompt: 'WebGPU is', max_tokens: 8, temperature: 0 }) as { choices: { text: string }[]; usage: { completion_tokens: number } };
    model.destroy();
    expect(r.out.trim()).toBe(`${JSON.stringify(want.choices[0]!.text)} (${want.usage.completion_tokens} tokens)`);
  }, 300_000);

  it('with no adapter named, an example finds a software driver by itself (or says what to install)', async () => {
    const env = { ...process.env };
    delete env.VK_ICD_FILENAMES;
    delete env.VK_DRIVER_FILES;
    const r = await new Promise<{ code: number | null; out: string; err: string }>((resolve) => {
      const child = spawn(process.execPath, ['examples/hf-folder.mjs', join(shared, 'goldens/llama-gqa')], { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      let err = '';
      child.stdout.on('data', (d) => (out += d));
      child.stderr.on('data', (d) => (err += d));
      child.on('exit', (code) => resolve({ code, out, err }));
    });
    if (r.code === 0) expect(r.err).toMatch(/adapter: /);
    else expect(r.err).toContain('apt-get install mesa-vulkan-drivers');
  }, 300_000);

  it('every example refuses a missing model with its usage line (exit 2)', async () => {
    for (const ex of ['chat-gguf', 'hf-folder', 'embeddings', 'transcribe', 'server']) {
      const r = await run([`examples/${ex}.mjs`]);
      expect([ex, r.code]).toEqual([ex, 2]);
      expect(r.err).toContain(`usage: node examples/${ex}.mjs`);
    }
  }, 120_000);
});

describe('examples/page-worker in Chromium (SwiftShader)', () => {
  it('serve.mjs serves the page and the GGUF golden; the page loads it in a Web Worker and streams a chat reply', async () => {
    const child = spawn(process.execPath, ['examples/page-worker/serve.mjs', GGUF, '--port', '0'], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    const browser = await chromium.launch({ headless: true, executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium', args: CHROMIUM_ARGS });
    try {
      for (let t = 0; t < 100 && !/open (http:\S+)/.test(out); t++) await new Promise((r) => setTimeout(r, 100));
      const url = /open (http:\S+)/.exec(out)?.[1];
      expect(url, out).toBeTruthy();
      const page = await browser.newPage();
      const errors: string[] = [];
      page.on('pageerror', (e) => errors.push(e.message));
      await page.goto(url!);
      await page.waitForFunction(() => /is ready|could not load/.test(document.getElementById('status')!.textContent ?? ''), null, { timeout: 240_000 });
      expect(await page.textContent('#status')).toContain('is ready');
      await page.click('button');
      await page.waitForFunction(() => document.body.dataset.replies === '1', null, { timeout: 240_000 });
      const log = await page.textContent('#log');
      expect(log).toMatch(/^you: Name three rivers\.\nmodel: .+\n$/s);
      expect(log).not.toContain('[error');
      expect(errors).toEqual([]);
    } finally {
      await browser.close();
      child.kill('SIGINT');
    }
  }, 600_000);
});
