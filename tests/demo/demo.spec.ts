// The built demo page (dist-demo/) in headless Chromium on SwiftShader, driven as a person would, in the
// page's order: it leads with the model (a tiny model shipped with the page loads in one click and
// chats; Hub ids, folders, URLs, encoders and Whisper follow), then Check passes every case of its
// slice (every operation family and a model golden) and the goldens match HF, then a quick Benchmark
// and the Playground; screenshots at desktop width and at 420 px; no console error on the way.
// Screenshots go to .cache/screenshots/ (the desktop one also to demo/screenshots/).
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Template } from '@huggingface/jinja';
import { expect, test, type ConsoleMessage, type Page } from '@playwright/test';
import { ORIGIN, serveRepo } from '../browser/serve';
import { byteTokenizerConfig, byteTokenizerJson } from '../cases/text_fixture';
import { encodeWav } from '../../src/serve/audio_file';

test.describe.configure({ mode: 'serial' });

const SHOTS = '.cache/screenshots';
let page: Page;
const errors: string[] = [];

/** A checkpoint at a URL is looked for file by file: the optional tokenizer and generation files of a
 *  folder without them answer 404, which Chromium logs as a failed resource. Nothing else may. */
function optionalMissing(m: ConsoleMessage): boolean {
  return /status of 404/.test(m.text()) && /\/(tokenizer|tokenizer_config|generation_config|preprocessor_config)\.json$/.test(m.location().url);
}

test.beforeAll(async ({ browser }) => {
  mkdirSync(SHOTS, { recursive: true });
  page = await browser.newPage();
  page.on('console', (m) => { if (m.type() === 'error' && !optionalMissing(m)) errors.push(`console: ${m.text()} (${m.location().url})`); });
  page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
  await serveRepo(page, ['dist-demo'], '/dist-demo/index.html');
  await page.goto(`${ORIGIN}/dist-demo/index.html`);
});

test.afterAll(async () => {
  await page?.close();
});

// ---------------------------------------------------------------------------------------- helpers

const GOLDENS = join(process.cwd(), '..', 'shared', 'goldens');
interface Golden { prompts: number[][]; greedy: number[][] }
const golden = (name: string) => JSON.parse(readFileSync(join(GOLDENS, name, 'golden.json'), 'utf8')) as Golden;
/**
 * A checkpoint folder as a user has one: llama-gqa's config and weights, with the byte-level tokenizer
 * (each UTF-8 byte a token: the goldens' 256-token vocabulary) and its chat template.
 */
function writeCheckpoint(root: string): string {
  const dir = join(root, 'tiny-llama');
  mkdirSync(dir);
  for (const [name, bytes] of Object.entries(chatCheckpoint())) writeFileSync(join(dir, name), bytes);
  return dir;
}

/** Records every text an element shows (streamed output, progress labels) from now on. */
async function recordTexts(selector: string, key: string): Promise<void> {
  await page.evaluate(([sel, k]) => {
    const e = document.querySelector(sel)!;
    const seen: string[] = [];
    (window as unknown as Record<string, string[]>)[k] = seen;
    new MutationObserver(() => seen.push(e.textContent ?? '')).observe(e, { childList: true, characterData: true, subtree: true });
  }, [selector, key]);
}
const recorded = (key: string) => page.evaluate((k) => (window as unknown as Record<string, string[]>)[k], key);

/** Records every text the conversation's last answer shows from now on (its stream, as painted). */
async function recordAnswer(key: string): Promise<void> {
  await page.evaluate((k) => {
    const log = document.querySelector('#model-chat-log')!;
    const seen: string[] = [];
    (window as unknown as Record<string, string[]>)[k] = seen;
    new MutationObserver(() => {
      const turns = log.querySelectorAll('.turn[data-role=assistant] .text');
      const t = turns[turns.length - 1]?.textContent;
      if (t && t !== seen[seen.length - 1]) seen.push(t);
    }).observe(log, { childList: true, characterData: true, subtree: true });
  }, key);
}

/** The Model section's load finished and passed (a failure would show its message). */
async function expectLoaded(): Promise<void> {
  await expect(page.locator('#model-load-status')).toHaveAttribute('data-state', /pass|fail/, { timeout: 120_000 });
  await expect(page.locator('#model-load-message')).toBeHidden();
  await expect(page.locator('#model-load-status')).toHaveAttribute('data-state', 'pass');
}

/** Loads a checkpoint folder or GGUF file by URL in the Model section and waits for it. */
async function loadFromUrl(url: string): Promise<void> {
  await page.fill('#model-url', url);
  await page.click('#model-load-url');
  await expectLoaded();
}

/** A fact of the loaded model's summary. */
const fact = (k: string) => page.locator(`#model-info dd[data-fact="${k}"]`);

/** The conversation's turns of the model (its answers), oldest first. */
const answers = () => page.locator('#model-chat-log .turn[data-role=assistant]');

/** Sends one message (chat) or prompt (completion), greedy, and waits for its turn to end. */
async function send(o: { text: string; maxNew: number; mode: 'chat' | 'completion'; stream?: boolean }): Promise<void> {
  await page.selectOption('#model-mode', o.mode);
  await page.fill('#model-max-new', String(o.maxNew));
  await page.fill('#model-temperature', '0');
  await page.locator('#model-stream').setChecked(o.stream ?? true);
  await page.fill('#model-prompt', o.text);
  await page.click('#model-send');
  await expect(page.locator('#model-gen-status')).toHaveAttribute('data-state', /ready|stopped|error/, { timeout: 120_000 });
  await expect(page.locator('#model-gen-message')).toBeHidden();
  await expect(page.locator('#model-gen-status')).toHaveAttribute('data-state', 'ready');
}

/** What the last answer shows and reports. */
async function lastAnswer() {
  const t = answers().last();
  const num = async (k: string) => Number(await t.getAttribute(`data-${k}`));
  return {
    text: (await t.locator('.text').textContent()) ?? '', ids: (await t.getAttribute('data-ids')) ?? '',
    promptTokens: await num('prompt-tokens'), cachedTokens: await num('cached-tokens'), completionTokens: await num('completion-tokens'),
    finish: await t.getAttribute('data-finish-reason'), tps: Number(await t.locator('.tps').innerText()),
  };
}

/** The chat checkpoint the Hub route serves: llama-gqa's weights with the byte-level tokenizer (ids
 *  are UTF-8 bytes, the goldens' 256-token vocabulary) and its ChatML-like chat template. */
function chatCheckpoint(): Record<string, Buffer> {
  return {
    'config.json': readFileSync(join(GOLDENS, 'llama-gqa', 'config.json')),
    'model.safetensors': readFileSync(join(GOLDENS, 'llama-gqa', 'model.safetensors')),
    'tokenizer.json': Buffer.from(JSON.stringify(byteTokenizerJson())),
    'tokenizer_config.json': Buffer.from(JSON.stringify(byteTokenizerConfig())),
  };
}

/** The prompt's tokens as the worker must build them: the template rendered, each UTF-8 byte a token. */
function chatPromptTokens(messages: { role: string; content: string }[]): number {
  const cfg = byteTokenizerConfig() as { chat_template: string; bos_token: string; eos_token: string };
  const text = new Template(cfg.chat_template).render({ messages, add_generation_prompt: true, bos_token: cfg.bos_token, eos_token: cfg.eos_token });
  return Buffer.byteLength(text, 'utf8');
}

/** Serves the chat checkpoint as a Hub repository at http://localhost/hub/test-org/tiny-chat, counting requests. */
async function routeHub(p: Page, requests: Map<string, number>): Promise<void> {
  const files = chatCheckpoint();
  await p.route(`${ORIGIN}/hub/**`, async (route) => {
    const m = /^\/hub\/test-org\/tiny-chat\/resolve\/main\/(.+)$/.exec(new URL(route.request().url()).pathname);
    const name = m?.[1] ?? '?';
    requests.set(name, (requests.get(name) ?? 0) + 1);
    const body = m ? files[name] : undefined;
    await route.fulfill(body ? { status: 200, body, contentType: 'application/octet-stream' } : { status: m ? 404 : 401, body: 'Repository Not Found' });
  });
}

const HUB = `${ORIGIN}/hub`;

test('the page leads with the model, says the adapter is ready, and shows no empty table', async () => {
  await expect(page.locator('#adapter-status')).toHaveAttribute('data-state', 'ready', { timeout: 60_000 });
  // Chat first, then Check, then the measurements, the adapter's details last.
  const sections = await page.locator('main > section').evaluateAll((ss) => ss.map((s) => s.id));
  expect(sections).toEqual(['model-section', 'check-section', 'bench-section', 'playground-section', 'adapter-section']);
  // Nothing run yet: no table, progress bar or results box stands empty.
  for (const id of ['#check-table-wrap', '#model-goldens-table-wrap', '#bench-tables', '#bench-share', '#pg-table-wrap', '#check-progress', '#bench-progress', '#model-load-progress']) {
    await expect(page.locator(id)).toBeHidden();
  }
  await expect(page.locator('#features tbody tr')).toHaveCount(4);
  await expect(page.locator('#features tr[data-feature=subgroups] td').nth(1)).toContainText(/yes|no/);
  // SwiftShader offers no subgroup matrices: the row says so and what runs instead.
  await expect(page.locator('#features tr[data-feature=subgroup-matrix] td').nth(1)).toContainText(/yes|no/);
  await expect(page.locator('#features tr[data-feature=subgroup-matrix]')).toContainText(/scalar flash tile|matrix flash tile/);
  await expect(page.locator('#limits')).toContainText('maxComputeWorkgroupStorageSize');
  for (const id of ['#model-load-sample', '#check-run', '#bench-run', '#pg-run']) await expect(page.locator(id)).toBeEnabled();
  await expect(page.locator('#model-send')).toBeDisabled();   // nothing loaded yet
  // Every tiny model the page offers was shipped by the build.
  expect(await page.locator('#model-sample option:disabled').count()).toBe(0);
  await page.screenshot({ path: `${SHOTS}/demo-first-screen.png` });
  expect(errors).toEqual([]);
});

test('Model: a tiny GGUF model shipped with the page loads in one click, with its own tokenizer and chat template, and chats', async () => {
  await page.selectOption('#model-sample', './shared/goldens-quant/gguf-llama-q4-k-m/model.gguf');
  await page.click('#model-load-sample');
  await expectLoaded();
  await expect(fact('architecture')).toHaveText('LlamaForCausalLM');
  await expect(fact('checkpoint')).toContainText('GGUF, Q4_K');
  await expect(fact('tokenizer')).toContainText('from the GGUF metadata');
  await expect(page.locator('#model-mode')).toHaveValue('chat');
  await send({ text: 'Hello', maxNew: 8, mode: 'chat' });
  const r = await lastAnswer();
  expect(r.completionTokens).toBeGreaterThan(0);
  expect(r.promptTokens).toBeGreaterThan(1);
  expect(r.tps).toBeGreaterThan(0);
  await send({ text: 'The quick brown fox', maxNew: 8, mode: 'completion' });
  expect((await lastAnswer()).text.length).toBeGreaterThan(0);
  await page.locator('#model-section').screenshot({ path: `${SHOTS}/demo-chat-tiny.png` });
  // What the URL load kept in the browser goes, so the Hub tests below start from nothing.
  await page.click('#model-cache-clear');
  await expect(page.locator('#model-cache-size')).toHaveText('kept: nothing yet');
  expect(errors).toEqual([]);
});

test('Model: a Hugging Face model id loads in the worker, with its downloads shown and kept in the browser', async () => {
  const requests = new Map<string, number>();
  await routeHub(page, requests);
  await expect(page.locator('#model-cache-size')).toHaveText('kept: nothing yet');
  await page.fill('#model-hub-host', HUB);
  await page.fill('#model-hf', 'test-org/tiny-chat');
  await recordTexts('#model-load-status', 'hubTexts');
  await page.click('#model-load-hf');
  await expectLoaded();
  await expect(page.locator('#model-load-status')).toContainText('loaded tiny-chat: 1.4 MB');
  const texts = await recorded('hubTexts');
  // Downloads by file (model.safetensors in several steps, then whole), then the upload in MB.
  expect(texts.filter((t) => /^downloading model\.safetensors: \d+\.\d MB of 1\.4 MB$/.test(t)).length).toBeGreaterThan(1);
  expect(texts).toContain('downloading model.safetensors: 1.4 MB of 1.4 MB');
  expect(texts).toContain('1.4 MB of 1.4 MB');
  expect(texts.findIndex((t) => t === '1.4 MB of 1.4 MB')).toBeGreaterThan(texts.indexOf('downloading model.safetensors: 1.4 MB of 1.4 MB'));
  await expect(fact('architecture')).toHaveText('LlamaForCausalLM');
  await expect(fact('tokenizer')).toHaveText('tokenizer.json (BPE, 256 tokens)');
  await expect(fact('chat template')).toHaveText('from tokenizer_config.json');
  await expect(fact('downloads')).toHaveText("4 files, 0 from this browser's cache");
  await expect(fact('loaded in')).toContainText('in a Web Worker');
  expect(Object.fromEntries(requests)).toEqual({ 'config.json': 1, 'model.safetensors': 1, 'tokenizer.json': 1, 'tokenizer_config.json': 1, 'generation_config.json': 1 });
  await expect(page.locator('#model-mode')).toHaveValue('chat');
  // The four files are kept (the missing generation_config.json only as a mark, no bytes).
  await expect(page.locator('#model-cache-size')).toHaveText('kept: 4 files, 1.4 MB');
  expect(Number(await page.locator('#model-cache-size').getAttribute('data-bytes'))).toBe(
    Object.values(chatCheckpoint()).reduce((a, b) => a + b.length, 0));
  expect(errors).toEqual([]);
});

test('Model: the chat runs two turns in the worker, streamed; the second reuses the first from the prefix cache', async () => {
  await recordAnswer('chatTexts');
  await send({ text: 'Hello', maxNew: 12, mode: 'chat' });
  const first = await lastAnswer();
  // The worker rendered the template (BOS-free, ChatML-like) and encoded it: one token a byte.
  expect(first.promptTokens).toBe(chatPromptTokens([{ role: 'user', content: 'Hello' }]));
  expect(first.cachedTokens).toBe(0);
  expect(first.completionTokens).toBeGreaterThan(0);
  expect(first.completionTokens).toBeLessThanOrEqual(12);
  expect(first.tps).toBeGreaterThan(0);
  expect(first.ids.split(' ').length).toBe(first.completionTokens);
  // Every text the answer showed while it streamed is a beginning of the final one, and there were several.
  const shown = await recorded('chatTexts');
  expect(shown.length).toBeGreaterThan(2);
  for (const t of shown) expect(first.text.startsWith(t)).toBe(true);
  expect(shown.at(-1)).toBe(first.text);
  // The text is the byte tokens decoded (what the ids say), every byte of it.
  expect(first.text).toBe(Buffer.from(first.ids.split(' ').map(Number)).toString('utf8'));

  await send({ text: 'How are you?', maxNew: 8, mode: 'chat' });
  const second = await lastAnswer();
  const history = [{ role: 'user', content: 'Hello' }, { role: 'assistant', content: first.text }, { role: 'user', content: 'How are you?' }];
  expect(second.promptTokens).toBe(chatPromptTokens(history));
  // The first turn's prompt blocks come from the prefix cache: whole blocks of 16 tokens.
  expect(second.cachedTokens).toBeGreaterThan(0);
  expect(second.cachedTokens % 16).toBe(0);
  expect(second.cachedTokens).toBeLessThan(second.promptTokens);
  await expect(answers()).toHaveCount(2);
  await expect(answers().last().locator('.turn-stats')).toContainText(`${second.cachedTokens} from the prefix cache`);
  await page.locator('#model-section').screenshot({ path: `${SHOTS}/demo-chat.png` });

  // The same first message, not streamed, in a new conversation: the same answer as the streamed deltas
  // made (greedy), and its whole prompt but the last partial block from the cache.
  await page.click('#model-new-chat');
  await expect(answers()).toHaveCount(0);
  await send({ text: 'Hello', maxNew: 12, mode: 'chat', stream: false });
  const again = await lastAnswer();
  expect(again.text).toBe(first.text);
  expect(again.ids).toBe(first.ids);
  expect(again.cachedTokens).toBe(Math.floor(first.promptTokens / 16) * 16);
  expect(errors).toEqual([]);
});

test('Model: Stop ends a running answer in the worker, keeping what came; the page stays responsive meanwhile', async () => {
  await page.selectOption('#model-mode', 'completion');
  await page.locator('#model-stream').setChecked(true);
  await page.fill('#model-max-new', '400');
  await page.fill('#model-prompt', 'Once upon a time');
  await page.click('#model-send');
  await expect(page.locator('#model-stop')).toBeEnabled();
  const running = answers().last();
  await expect.poll(async () => ((await running.locator('.text').textContent()) ?? '').length, { timeout: 60_000 }).toBeGreaterThanOrEqual(3);
  // The main thread answers at once while the worker generates (a timer fires within a frame or two).
  const lag = await page.evaluate(() => new Promise<number>((r) => { const t = performance.now(); setTimeout(() => r(performance.now() - t), 0); }));
  expect(lag).toBeLessThan(100);
  await page.click('#model-stop');
  await expect(page.locator('#model-gen-status')).toHaveAttribute('data-state', /ready|stopped|error/, { timeout: 60_000 });
  await expect(page.locator('#model-gen-status')).toHaveAttribute('data-state', 'stopped');
  await expect(page.locator('#model-gen-message')).toBeHidden();
  await expect(running).toHaveAttribute('data-state', 'stopped');
  // Its text stays; a stream stopped before its end has no usage: the line says how far it got.
  const text = (await running.locator('.text').textContent()) ?? '';
  expect(text.length).toBeGreaterThanOrEqual(3);
  await expect(running.locator('.turn-stats')).toHaveText(new RegExp(`^stopped after [\\d.]+ s, ${text.length} characters`));
  await expect(page.locator('#model-gen-status')).toHaveText('stopped');
  await expect(page.locator('#model-stop')).toBeDisabled();
  await expect(page.locator('#model-send')).toBeEnabled();
  expect(errors).toEqual([]);
});

test('Model: a second visit reads the Hub model from the browser, and Clear empties it', async () => {
  const requests = new Map<string, number>();
  await routeHub(page, requests);
  await page.reload();
  await expect(page.locator('#adapter-status')).toHaveAttribute('data-state', 'ready', { timeout: 60_000 });
  await expect(page.locator('#model-cache-size')).toHaveText('kept: 4 files, 1.4 MB');
  await page.fill('#model-hub-host', HUB);
  await page.fill('#model-hf', 'test-org/tiny-chat');
  await recordTexts('#model-load-status', 'cachedTexts');
  await page.click('#model-load-hf');
  await expectLoaded();
  await expect(fact('downloads')).toHaveText("4 files, 4 from this browser's cache");
  expect(await recorded('cachedTexts')).toContain("model.safetensors: read from this browser's cache (1.4 MB)");
  // Nothing reached the network: not even the missing generation_config.json.
  expect(Object.fromEntries(requests)).toEqual({});
  await send({ text: 'Hello', maxNew: 4, mode: 'chat' });
  await page.click('#model-cache-clear');
  await expect(page.locator('#model-cache-size')).toHaveText('kept: nothing yet');
  await expect(page.locator('#model-cache-size')).toHaveAttribute('data-bytes', '0');
  expect(errors).toEqual([]);
});

test('Model: an unknown Hub model fails with the Hub\'s answer named', async () => {
  await page.fill('#model-hub-host', HUB);
  await page.fill('#model-hf', 'test-org/no-such-model');
  await page.click('#model-load-hf');
  await expect(page.locator('#model-load-status')).toHaveAttribute('data-state', 'fail', { timeout: 60_000 });
  await expect(page.locator('#model-load-message')).toContainText(
    `config.json: expected a public file at ${HUB}/test-org/no-such-model/resolve/main/config.json, got HTTP 401`);
  await expect(page.locator('#model-send')).toBeDisabled();
  errors.splice(0, errors.length, ...errors.filter((e) => !/status of 401/.test(e)));
  expect(errors).toEqual([]);
});

test('Model: a local checkpoint folder loads in the worker and continues a golden prompt as HF does', async () => {
  const root = mkdtempSync(join(tmpdir(), 'webinfer-demo-'));
  try {
    const dir = writeCheckpoint(root);
    // With speculative decoding asked for: the model takes it; outputs stay the golden's.
    await page.locator('#model-speculative').setChecked(true);
    await recordTexts('#model-load-status', 'loadTexts');
    await page.setInputFiles('#model-folder', dir);
    await expectLoaded();
    await expect(page.locator('#model-load-status')).toContainText('loaded tiny-llama: 1.4 MB');
    // The bar ran over the weights' bytes and finished; its label counted MB on the way.
    const [value, max] = await page.$eval('#model-load-progress', (p) => [(p as HTMLProgressElement).value, (p as HTMLProgressElement).max]);
    expect(max).toBeGreaterThan(1_300_000);   // the f32 weights' bytes (the 1.38 MB file less its header)
    expect(max).toBeLessThan(1_381_008);
    expect(value).toBe(max);
    const loadTexts = await recorded('loadTexts');
    expect(loadTexts.filter((t) => /^\d+\.\d MB of 1\.4 MB$/.test(t)).length).toBeGreaterThan(1);
    expect(loadTexts).toContain('1.4 MB of 1.4 MB');
    await expect(fact('layers')).toHaveText('2');
    await expect(fact('hidden size')).toHaveText('128');
    await expect(fact('vocabulary')).toHaveText('256');
    await expect(fact('weights on the GPU')).toContainText('(f32)');
    await expect(fact('KV cache')).toHaveText(/^\d+ blocks × 16 tokens = \d+ tokens$/);
    await expect(fact('tokenizer')).toHaveText('tokenizer.json (BPE, 256 tokens)');
    await expect(fact('downloads')).toHaveText('none (local files)');
    await expect(page.locator('#model-chat-log')).toBeEmpty();   // a new model, a new conversation

    // Greedy from golden prompt 2, whose ids are ASCII bytes, written as its text: the worker's tokenizer
    // gives the golden's ids and the model HF's own greedy tokens.
    const g = golden('llama-gqa');
    await send({ text: String.fromCharCode(...g.prompts[2]), maxNew: 8, mode: 'completion' });
    const r = await lastAnswer();
    expect(r.promptTokens).toBe(g.prompts[2].length);
    expect(r.ids).toBe(g.greedy[2].join(' '));
    expect(r.text).toBe(Buffer.from(g.greedy[2]).toString('utf8'));
    expect(r.finish).toBe('length');
    // Text the model goes on repeating (found by trying: its greedy run continues " the cat"): n-gram
    // lookup proposes from the prompt, and the turn's line says how many proposals were accepted.
    await expect(fact('speculative decoding')).toContainText('n-gram lookup, up to 4 proposals a step');
    await send({ text: 'the cat the cat the cat', maxNew: 12, mode: 'completion' });
    const t = answers().last();
    expect(Number(await t.getAttribute('data-spec-proposed'))).toBeGreaterThan(0);
    await expect(t.locator('.spec')).toHaveText(/^\d+ of \d+ proposed tokens accepted \(\d+%\)$/);
    await page.locator('#model-speculative').setChecked(false);
    expect(errors).toEqual([]);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test('Model: a vision-language folder (Qwen2.5-VL) takes an attached image with a chat message and answers as HF does with that image; a camera photo attaches as a JPEG and the camera stops', async () => {
  // qwen2.5-vl's golden with its preprocessor config, the byte-level tokenizer with Qwen2-VL's vision
  // tokens at the config's ids (249-251, bytes UTF-8 text never holds), and a template that writes an
  // image part as <|vision_start|><|image_pad|><|vision_end|>: the golden's second prompt is that block,
  // then bytes 20-39 as text.
  const src = join(process.cwd(), '..', 'shared', 'goldens-arch', 'qwen2.5-vl');
  const g = JSON.parse(readFileSync(join(src, 'golden.json'), 'utf8')) as Golden;
  const root = mkdtempSync(join(tmpdir(), 'webinfer-demo-vl-'));
  try {
    const dir = join(root, 'tiny-vl');
    mkdirSync(dir);
    for (const f of ['config.json', 'model.safetensors', 'preprocessor_config.json']) copyFileSync(join(src, f), join(dir, f));
    const tok = byteTokenizerJson() as { added_tokens: unknown[] };
    tok.added_tokens = [[249, '<|vision_start|>'], [250, '<|vision_end|>'], [251, '<|image_pad|>']].map(([id, content]) => ({
      id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true,
    }));
    writeFileSync(join(dir, 'tokenizer.json'), JSON.stringify(tok));
    const template = "{% for m in messages %}{% if m['content'] is string %}{{ m['content'] }}{% else %}{% for item in m['content'] %}"
      + "{% if item['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>{% elif item['type'] == 'text' %}{{ item['text'] }}{% endif %}"
      + '{% endfor %}{% endif %}{% endfor %}';
    writeFileSync(join(dir, 'tokenizer_config.json'), JSON.stringify({ ...(byteTokenizerConfig() as object), chat_template: template }));
    await page.setInputFiles('#model-folder', dir);
    await expectLoaded();
    await expect(fact('architecture')).toHaveText('Qwen2_5_VLForConditionalGeneration');
    await expect(page.locator('#model-mode')).toHaveValue('chat');
    await expect(page.locator('#model-image-row')).toBeVisible();
    // A photo from the camera (Chromium's fake device): its live picture, then the frame as a JPEG data:
    // URL, the camera's track stopped; removed again before the golden's image.
    await page.click('#model-camera');
    await expect(page.locator('#model-camera-panel')).toBeVisible();
    await expect.poll(() => page.locator('#model-camera-video').evaluate((v: HTMLVideoElement) => v.videoWidth)).toBeGreaterThan(0);
    await page.click('#model-camera-shoot');
    await expect(page.locator('#model-camera-panel')).toBeHidden();
    await expect(page.locator('#model-image-name')).toHaveText(/^camera photo \d+×\d+$/);
    expect(await page.locator('#model-image-preview').getAttribute('src')).toMatch(/^data:image\/jpeg;base64,/);
    expect(await page.locator('#model-camera-video').evaluate((v: HTMLVideoElement) => v.srcObject === null)).toBe(true);
    await page.click('#model-image-clear');
    await expect(page.locator('#model-image-preview')).toBeHidden();
    // Cancel stops it too.
    await page.click('#model-camera');
    await expect(page.locator('#model-camera-panel')).toBeVisible();
    await page.click('#model-camera-cancel');
    await expect(page.locator('#model-camera-panel')).toBeHidden();
    await page.setInputFiles('#model-image', join(src, 'image.png'));
    await expect(page.locator('#model-image-preview')).toBeVisible();
    await expect(page.locator('#model-image-name')).toHaveText('image.png');
    const prompt = g.prompts[1];
    await send({ text: String.fromCharCode(...prompt.slice(prompt.indexOf(250) + 1)), maxNew: g.greedy[1].length, mode: 'chat' });
    const r = await lastAnswer();
    expect(r.promptTokens).toBe(prompt.length);
    expect(r.ids).toBe(g.greedy[1].join(' '));
    // The message shows its image; the attachment is spent.
    await expect(page.locator('#model-chat-log .turn[data-role=user] img.thumb')).toHaveCount(1);
    await expect(page.locator('#model-image-preview')).toBeHidden();
    await page.locator('#model-section').screenshot({ path: `${SHOTS}/demo-chat-image.png` });
    // Completion mode sends no images: the row goes.
    await page.selectOption('#model-mode', 'completion');
    await expect(page.locator('#model-image-row')).toBeHidden();
    expect(errors).toEqual([]);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test('Model: an MLX 4-bit folder at a URL loads with its packed weights as shipped, its tokenizer, and generates text', async () => {
  // The goldens' own check (HF's logits and greedy tokens) is the goldens suite's; here, the page's path.
  await loadFromUrl('./shared/goldens-quant/mlx-llama-4bit');
  await expect(fact('architecture')).toHaveText('LlamaForCausalLM');
  await expect(fact('checkpoint')).toContainText('MLX affine 4-bit, group 64');
  await expect(fact('tokenizer')).toHaveText(/^tokenizer\.json \(BPE, \d+ tokens\)$/);
  await send({ text: 'The quick brown fox', maxNew: 8, mode: 'completion' });
  expect((await lastAnswer()).text.length).toBeGreaterThan(0);
  expect(errors).toEqual([]);
});

test('Model: a checkpoint at a URL without a tokenizer takes and prints token ids', async () => {
  // f16 weights: greedy tokens stay HF's (the margins are far above f16 rounding).
  await page.selectOption('#model-dtype', 'f16');
  await loadFromUrl('./shared/goldens/qwen3-qknorm-tied');
  await expect(fact('architecture')).toHaveText('Qwen3ForCausalLM');
  await expect(fact('weights on the GPU')).toContainText('(f16)');
  await expect(fact('tokenizer')).toContainText('prompts are space-separated token ids');
  await expect(page.locator('#model-mode option[value=chat]')).toBeDisabled();
  await expect(page.locator('#model-mode')).toHaveValue('completion');
  const g = golden('qwen3-qknorm-tied');
  await send({ text: g.prompts[1].join(' '), maxNew: 8, mode: 'completion' });
  await expect(answers().last().locator('.text')).toHaveText(g.greedy[1].join(' '));
  // A bad id is refused in the page, before anything runs.
  await page.fill('#model-prompt', '3 250 999');
  await page.click('#model-send');
  await expect(page.locator('#model-gen-status')).toHaveAttribute('data-state', 'error');
  await expect(page.locator('#model-gen-message')).toContainText('"999" is not a token id in [0, 256)');
  await page.selectOption('#model-dtype', 'checkpoint');
  expect(errors).toEqual([]);
});

test('Model: an encoder at a URL embeds lines in the worker (cosine table as HF\'s pooled states give it); Whisper transcribes a WAV file', async () => {
  const LAYERS = join(GOLDENS, '../goldens-layers');
  const bert = JSON.parse(readFileSync(join(LAYERS, 'bert-padded-batch/golden.json'), 'utf8')) as { inputs: number[][]; mean_pooled: number[][]; cls: number[][] };
  await loadFromUrl('./shared/goldens-layers/bert-padded-batch');
  await expect(fact('architecture')).toHaveText('BertModel');
  await expect(fact('kind')).toContainText('encoder-only');
  await expect(page.locator('#model-chat')).toBeHidden();
  await expect(page.locator('#model-embed')).toBeVisible();
  await expect(page.locator('#model-embed-hint')).toContainText('token ids');
  // Three inputs of the golden, mean and cls pooling: every cosine as HF's pooled vectors give it.
  const cos = (a: number[], b: number[]) => a.reduce((s, x, i) => s + x * b[i], 0) / Math.hypot(...a) / Math.hypot(...b);
  await page.fill('#model-embed-input', bert.inputs.map((t) => t.join(' ')).join('\n'));
  for (const [pooling, want] of [['mean', bert.mean_pooled], ['cls', bert.cls]] as const) {
    await page.selectOption('#model-embed-pooling', pooling);
    await page.click('#model-embed-run');
    await expect(page.locator('#model-embed-status')).toContainText('3 embeddings', { timeout: 180_000 });
    const cells = await page.locator('#model-embed-table td[data-cos]').evaluateAll((tds) => tds.map((td) => Number((td as HTMLElement).dataset.cos)));
    expect(cells.length).toBe(9);
    cells.forEach((c, k) => expect(Math.abs(c - cos(want[Math.floor(k / 3)], want[k % 3]))).toBeLessThan(1e-4));
  }
  await page.screenshot({ path: `${SHOTS}/model-embeddings.png`, fullPage: true });

  // Whisper: the front-end golden's first waveform as a 32-bit float WAV, picked as a file.
  const fe = JSON.parse(readFileSync(join(LAYERS, 'whisper-frontend/golden.json'), 'utf8')) as { waveforms: number[][] };
  await loadFromUrl('./shared/goldens-layers/whisper-tiny-random');
  await expect(fact('architecture')).toHaveText('WhisperForConditionalGeneration');
  await expect(page.locator('#model-speech')).toBeVisible();
  const wav = Buffer.from(encodeWav(Float32Array.from(fe.waveforms[0]), 16000, 32));
  const tokensOf = async () => (await page.locator('#model-transcript').getAttribute('data-tokens'))!.split(' ').map(Number);
  await page.setInputFiles('#model-audio', { name: 'clip.wav', mimeType: 'audio/wav', buffer: wav });
  await expect(page.locator('#model-speech-status')).toContainText('done in', { timeout: 240_000 });
  await expect(page.locator('#model-transcript')).toContainText('2.00 s of audio transcribed');
  await expect(page.locator('#model-transcript')).toContainText('(no tokenizer: token ids)');
  const first = await tokensOf();
  expect(first.length).toBeGreaterThan(0);
  expect(first.every((t) => Number.isInteger(t) && t >= 0 && t < 384)).toBe(true);
  // The same clip at 48 kHz: decoded and resampled to 16 kHz in the page, then transcribed.
  const up = Float32Array.from({ length: fe.waveforms[0].length * 3 }, (_, i) => {
    const x = i / 3, j = Math.floor(x), f = x - j;
    const w = fe.waveforms[0];
    return (w[j] ?? 0) * (1 - f) + (w[j + 1] ?? 0) * f;
  });
  await page.locator('#model-transcript').evaluate((e) => { (e as HTMLElement).dataset.tokens = 'stale'; });
  await page.setInputFiles('#model-audio', { name: 'clip48k.wav', mimeType: 'audio/wav', buffer: Buffer.from(encodeWav(up, 48000, 32)) });
  await expect(page.locator('#model-transcript')).not.toHaveAttribute('data-tokens', 'stale', { timeout: 120_000 });
  expect((await tokensOf()).length).toBeGreaterThan(0);
  await page.screenshot({ path: `${SHOTS}/model-transcription.png`, fullPage: true });
  expect(errors).toEqual([]);
});

test('Check: every case of the slice (every operation family and a model golden) passes against its reference', async () => {
  const expected = Number(await page.locator('#check-scope option[value=slice]').getAttribute('data-count'));
  expect(expected).toBeGreaterThan(30);
  await page.selectOption('#check-scope', 'slice');
  await page.click('#check-run');
  await expect(page.locator('#bench-run')).toBeDisabled();   // one job at a time
  await expect(page.locator('#check-status')).toHaveAttribute('data-state', /pass|fail/, { timeout: 400_000 });
  const rows = page.locator('#check-rows tr');
  await expect(rows).toHaveCount(expected);
  const notPassed = await page.locator('#check-rows tr:not([data-result=pass])').allInnerTexts();
  expect(notPassed).toEqual([]);
  await expect(page.locator('#check-status')).toHaveAttribute('data-state', 'pass');
  await expect(page.locator('#check-status')).toContainText(`all ${expected} cases passed`);
  // Every operation family the page claims: attention, GEMM/GEMV, norms, RoPE, MoE, sampling, a whole model.
  const names = await page.locator('#check-rows tr td:nth-child(2)').allInnerTexts();
  const families = new Set(names.map((n) => n.split(' › ')[0]));
  for (const f of ['sdpa naive', 'sdpa flash', 'merge', 'paged', 'mla', 'linear', 'quant', 'ops', 'moe', 'models']) expect(families).toContain(f);
  for (const what of ['rmsNorm', 'layerNorm', 'rope', 'sample', 'argmax', 'route', 'bf16 weights', 'f32 and f16 weights', 'Q4_K', 'llama-gqa']) {
    expect(names.some((n) => n.includes(what)), what).toBe(true);
  }
  // The worst error per case: a number ≤ 1 where the case compares within a tolerance, or above 1 and
  // starred where SPEC §6's rule for f32 sums accepted it (twice a plain f32 implementation's error).
  const worst = await page.locator('#check-rows tr td:nth-child(4)').allInnerTexts();
  const numeric = worst.filter((w) => w !== 'exact');
  expect(numeric.length).toBeGreaterThan(expected / 2);
  for (const w of numeric) {
    if (w.endsWith('*')) expect(Number(w.slice(0, -1))).toBeGreaterThan(1);
    else expect(Number(w)).toBeLessThanOrEqual(1);
  }
  await expect(page.locator('#check-footnote')).toBeVisible({ visible: numeric.some((w) => w.endsWith('*')) });
  await page.locator('#check-section').screenshot({ path: `${SHOTS}/demo-check.png` });
  expect(errors).toEqual([]);
});

test('Check: a case reads its data beside the page; a file the server lacks is named, and the case needs the test suite', async ({ browser }) => {
  const MEL = 'whisper › mel filter bank';
  const open = async (fallback: boolean) => {
    const p = await browser.newPage();
    const errs: string[] = [];
    p.on('pageerror', (e) => errs.push(e.message));
    await serveRepo(p, ['dist-demo'], '/dist-demo/index.html');
    // A static host that answers a missing path with its index page (a single-page fallback, as `vite
    // preview` does): the fixture loader must name the file, not parse the page as JSON. (The route
    // registered last answers first.)
    if (fallback) {
      await p.route(`${ORIGIN}/dist-demo/shared/goldens-layers/whisper-frontend/golden.json`,
        (route) => route.fulfill({ status: 200, contentType: 'text/html', body: '<!doctype html><html></html>' }));
    }
    await p.goto(`${ORIGIN}/dist-demo/index.html?case=${encodeURIComponent(MEL)}`);
    await expect(p.locator('#adapter-status')).toHaveAttribute('data-state', 'ready', { timeout: 60_000 });
    await expect(p.locator('#check-scope')).toHaveValue(`match:${MEL}`);
    await p.click('#check-run');
    await expect(p.locator('#check-status')).toHaveAttribute('data-state', /pass|fail/, { timeout: 120_000 });
    return { p, errs };
  };
  // Shipped: the Whisper front end's golden (a case that failed in the built page before its data was copied).
  const ok = await open(false);
  await expect(ok.p.locator('#check-rows tr')).toHaveCount(1);
  await expect(ok.p.locator('#check-rows tr')).toHaveAttribute('data-result', 'pass');
  expect(ok.errs).toEqual([]);
  await ok.p.close();
  const missing = await open(true);
  const row = missing.p.locator('#check-rows tr');
  await expect(row).toHaveAttribute('data-result', 'needs-suite');
  await expect(row.locator('td').nth(2)).toHaveText('needs the test suite');
  await expect(row.locator('td').nth(5)).toContainText('goldens-layers/whisper-frontend/golden.json is not shipped with this page (the server answered with an HTML page instead)');
  await expect(row).not.toContainText('JSON');
  await expect(missing.p.locator('#check-status')).toHaveAttribute('data-state', 'pass');
  await expect(missing.p.locator('#check-status')).toContainText('1 need the test suite');
  expect(missing.errs).toEqual([]);
  await missing.p.close();
});

test('Check: the goldens (whole models) run and match HF in the page', async () => {
  await page.click('#model-goldens-run');
  await expect(page.locator('#check-run')).toBeDisabled();   // one job at a time
  await expect(page.locator('#model-goldens-status')).toHaveAttribute('data-state', /pass|fail/, { timeout: 300_000 });
  await expect(page.locator('#model-goldens-rows tr')).toHaveCount(5);
  expect(await page.locator('#model-goldens-rows tr[data-result=fail]').allInnerTexts()).toEqual([]);
  await expect(page.locator('#model-goldens-status')).toHaveAttribute('data-state', 'pass');
  const archs = [['llama-gqa', 'LlamaForCausalLM'], ['mistral-window8', 'MistralForCausalLM'], ['qwen3-qknorm-tied', 'Qwen3ForCausalLM'],
    ['deepseek-v2-moe', 'DeepseekV2ForCausalLM'], ['deepseek-v3-yarn-moe', 'DeepseekV3ForCausalLM']];
  for (const [name, arch] of archs) {
    const cells = await page.locator(`#model-goldens-rows tr[data-model=${name}] td`).allInnerTexts();
    expect(cells[1]).toBe(arch);
    // The worst logit error as a fraction of the 1e-3·max|logit| budget: measured (not exact) and ≤ 1.
    const worst = Number(cells[2]);
    expect(worst).toBeGreaterThanOrEqual(0);
    expect(worst).toBeLessThanOrEqual(1);
    expect(cells[3]).toBe('identical');
    expect(cells[4]).toBe('pass');
    expect(cells[6]).toContain('24 greedy tokens');
  }
  await expect(page.locator('#model-goldens-rows tr[data-result=pass]')).toHaveCount(archs.length);
  await expect(page.locator('#model-goldens-status')).toHaveText(/all 5 runnable goldens match HF \(/);
  await page.locator('#model-goldens-table').screenshot({ path: `${SHOTS}/demo-model-goldens.png` });
  expect(errors).toEqual([]);
});

test('Benchmark: quick shapes run; a suite with 3 or more lengths is plotted, the others are tables; the results JSON is offered', async () => {
  await page.selectOption('#bench-preset', 'quick');
  await page.click('#bench-run');
  await expect(page.locator('#bench-progress')).toHaveAttribute('value', /.+/);
  await expect(page.locator('#bench-status')).toHaveAttribute('data-state', /pass|fail/, { timeout: 300_000 });
  await expect(page.locator('#bench-message')).toBeHidden();
  await expect(page.locator('#bench-status')).toHaveAttribute('data-state', 'pass');
  // SDPA ran 3 lengths: plotted (its throughput only where it is not a flat line far under the FMA
  // ceiling, as on SwiftShader). Paged decode (2 contexts) and MLA (2 batch sizes) would be a segment: tables only.
  const plotted = await page.locator('#plots figure').evaluateAll((fs) => fs.map((f) => f.getAttribute('data-plot')));
  expect(plotted).toContain('sdpa-speedup.svg');
  for (const p of plotted) expect(['sdpa-speedup.svg', 'sdpa-throughput.svg']).toContain(p);
  await expect(page.locator('#plots figure[data-plot="sdpa-speedup.svg"] svg circle').first()).toBeVisible();
  expect(await page.locator('#plots svg path').count()).toBeGreaterThan(1);
  await expect(page.locator('#plots-note')).toBeVisible();
  await expect(page.locator('#plots-note')).toContainText('paged decode (2 contexts), MLA decode (2 batch sizes)');
  if (!plotted.includes('sdpa-throughput.svg')) await expect(page.locator('#plots-note')).toContainText(/a flat line under its ceiling: dense SDPA throughput \(at most [\d.]+ GFLOP\/s/);
  await expect(page.locator('#bench-sdpa-rows tr')).toHaveCount(6);   // 3 lengths, causal and not
  await expect(page.locator('#bench-paged-rows tr')).toHaveCount(4);
  await expect(page.locator('#bench-mla-rows tr')).toHaveCount(2);
  for (const s of ['sdpa', 'paged', 'mla']) await expect(page.locator(`#bench-${s}-rows`)).toBeVisible();
  const json = JSON.parse(await page.locator('#bench-json').inputValue()) as { ceilings: { fmaTflops: number }; sdpa: unknown[] };
  expect(json.ceilings.fmaTflops).toBeGreaterThan(0);
  expect(json.sdpa.length).toBeGreaterThan(0);
  await expect(page.locator('#bench-download')).toBeEnabled();
  const download = page.waitForEvent('download');
  await page.click('#bench-download');
  expect((await download).suggestedFilename()).toMatch(/^webinfer-bench-.*\.json$/);
  await page.locator('#bench-section').screenshot({ path: `${SHOTS}/demo-benchmark.png` });
  expect(errors).toEqual([]);
});

test('Playground: one dense attention shape is timed and passes its check', async () => {
  await page.selectOption('#pg-op', 'sdpa');
  await page.fill('#pg-Lq', '128');
  await page.fill('#pg-Lk', '192');
  await page.click('#pg-run');
  await expect(page.locator('#pg-status')).toHaveAttribute('data-state', /pass|fail|error/, { timeout: 120_000 });
  await expect(page.locator('#pg-message')).toBeHidden();
  await expect(page.locator('#pg-check')).toHaveAttribute('data-result', 'pass');
  expect(Number(await page.locator('#pg-ms').innerText())).toBeGreaterThan(0);
  await page.locator('#playground-section').screenshot({ path: `${SHOTS}/demo-playground.png` });
  expect(errors).toEqual([]);
});

test('screenshots: the page at desktop width, and at 420 px with nothing cut off (tables scroll in their own box)', async () => {
  // The page as it leads: a tiny model loaded and a conversation in its chat (the Whisper panel was last).
  await page.selectOption('#model-sample', './shared/goldens-quant/gguf-llama-q4-k-m/model.gguf');
  await page.click('#model-load-sample');
  await expectLoaded();
  await send({ text: 'Hello', maxNew: 12, mode: 'chat' });
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.screenshot({ path: `${SHOTS}/demo-desktop.png`, fullPage: true });
  mkdirSync('demo/screenshots', { recursive: true });
  copyFileSync(`${SHOTS}/demo-desktop.png`, 'demo/screenshots/demo-chromium-swiftshader.png');
  await page.setViewportSize({ width: 420, height: 900 });
  try {
    // The page itself never scrolls sideways; a wide table scrolls inside its box, which fits the page.
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(420);
    const boxes = await page.locator('.table-wrap:visible').evaluateAll((ws) => ws.map((w) => {
      const r = w.getBoundingClientRect();
      return { id: w.querySelector('table')?.id ?? '', right: r.right, overflow: getComputedStyle(w).overflowX, scrolls: w.scrollWidth > w.clientWidth };
    }));
    expect(boxes.length).toBeGreaterThan(4);
    for (const b of boxes) {
      expect(b.right, b.id).toBeLessThanOrEqual(420);
      expect(b.overflow, b.id).toBe('auto');
    }
    expect(boxes.some((b) => b.scrolls)).toBe(true);   // the check table is wider than a phone
    // Every control is inside the page's width.
    const wide = await page.locator('main button:visible, main select:visible, main input:visible, main textarea:visible')
      .evaluateAll((es) => es.filter((e) => e.getBoundingClientRect().right > 420.5).map((e) => e.id || e.outerHTML.slice(0, 60)));
    expect(wide).toEqual([]);
    await page.screenshot({ path: `${SHOTS}/demo-420.png`, fullPage: true });
    await page.screenshot({ path: `${SHOTS}/demo-420-first-screen.png` });
  } finally {
    await page.setViewportSize({ width: 1280, height: 900 });
  }
  expect(errors).toEqual([]);
});

test('without WebGPU the page says so plainly and offers no button', async ({ browser }) => {
  const p = await browser.newPage();
  const errs: string[] = [];
  p.on('pageerror', (e) => errs.push(e.message));
  p.on('console', (m) => { if (m.type() === 'error') errs.push(m.text()); });
  await p.addInitScript(() => { delete (Navigator.prototype as { gpu?: unknown }).gpu; });
  await serveRepo(p, ['dist-demo'], '/dist-demo/index.html');
  await p.goto(`${ORIGIN}/dist-demo/index.html`);
  await expect(p.locator('#adapter-status')).toHaveAttribute('data-state', 'error');
  await expect(p.locator('#adapter')).toContainText('navigator.gpu is missing');
  await expect(p.locator('#adapter-status')).toContainText('WebGPU is not available here');
  await expect(p.locator('#model-load-message')).toContainText('Needs WebGPU');
  for (const id of ['#model-load-sample', '#check-run', '#bench-run', '#pg-run', '#model-goldens-run', '#model-open-folder', '#model-open-gguf', '#model-load-url', '#model-load-hf', '#model-send']) {
    await expect(p.locator(id)).toBeDisabled();
  }
  await p.screenshot({ path: `${SHOTS}/demo-no-webgpu.png` });
  expect(errs).toEqual([]);
  await p.close();
});
