// The built demo page (dist-demo/) in headless Chromium on SwiftShader, driven as a person would: the
// adapter panel appears, Check passes every case of its slice, a quick Benchmark draws its plots, the
// Playground checks one shape, the Model section checks the goldens and loads checkpoints (a folder
// pick and a URL) that generate; no console error on the way. Screenshots go to .cache/screenshots/.
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, test, type ConsoleMessage, type Page } from '@playwright/test';
import { ORIGIN, serveRepo } from '../browser/serve';

test.describe.configure({ mode: 'serial' });

const SHOTS = '.cache/screenshots';
let page: Page;
const errors: string[] = [];

/** A checkpoint at a URL is looked for file by file: the optional tokenizer and generation files of a
 *  folder without them answer 404, which Chromium logs as a failed resource. Nothing else may. */
function optionalMissing(m: ConsoleMessage): boolean {
  return /status of 404/.test(m.text()) && /\/(tokenizer|tokenizer_config|generation_config)\.json$/.test(m.location().url);
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

test('the adapter panel shows the adapter, its features and limits', async () => {
  await expect(page.locator('#adapter-status')).toHaveAttribute('data-state', 'ready', { timeout: 60_000 });
  await expect(page.locator('#features tbody tr')).toHaveCount(4);
  await expect(page.locator('#features tr[data-feature=subgroups] td').nth(1)).toContainText(/yes|no/);
  // SwiftShader offers no subgroup matrices: the row says so and what runs instead.
  await expect(page.locator('#features tr[data-feature=subgroup-matrix] td').nth(1)).toContainText(/yes|no/);
  await expect(page.locator('#features tr[data-feature=subgroup-matrix]')).toContainText(/scalar flash tile|matrix flash tile/);
  await expect(page.locator('#limits')).toContainText('maxComputeWorkgroupStorageSize');
  for (const id of ['#check-run', '#bench-run', '#pg-run']) await expect(page.locator(id)).toBeEnabled();
  await page.screenshot({ path: `${SHOTS}/demo-adapter.png` });
  expect(errors).toEqual([]);
});

test('Check: every case of the slice passes against the float64 reference', async () => {
  const expected = Number(await page.locator('#check-scope option[value=slice]').getAttribute('data-count'));
  expect(expected).toBeGreaterThan(10);
  await page.click('#check-run');
  await expect(page.locator('#bench-run')).toBeDisabled();   // one job at a time
  await expect(page.locator('#check-status')).toHaveAttribute('data-state', /pass|fail/, { timeout: 300_000 });
  const rows = page.locator('#check-rows tr');
  await expect(rows).toHaveCount(expected);
  const failed = await page.locator('#check-rows tr[data-result=fail]').allInnerTexts();
  expect(failed).toEqual([]);
  await expect(page.locator('#check-status')).toHaveAttribute('data-state', 'pass');
  // The worst error per case: a number ≤ 1 where the case compares within a tolerance.
  const worst = await page.locator('#check-rows tr td:nth-child(4)').allInnerTexts();
  const numeric = worst.filter((w) => w !== 'exact').map(Number);
  expect(numeric.length).toBeGreaterThan(expected / 2);
  for (const w of numeric) expect(w).toBeLessThanOrEqual(1);
  await page.locator('#check-section').screenshot({ path: `${SHOTS}/demo-check.png` });
  expect(errors).toEqual([]);
});

test('Benchmark: quick shapes run, the plots render, the results JSON is offered', async () => {
  await page.selectOption('#bench-preset', 'quick');
  await page.click('#bench-run');
  await expect(page.locator('#bench-progress')).toHaveAttribute('value', /.+/);
  await expect(page.locator('#bench-status')).toHaveAttribute('data-state', /pass|fail/, { timeout: 300_000 });
  await expect(page.locator('#bench-message')).toBeHidden();
  await expect(page.locator('#bench-status')).toHaveAttribute('data-state', 'pass');
  const plots = page.locator('#plots figure svg');
  expect(await plots.count()).toBeGreaterThanOrEqual(3);
  // Data, not an empty frame: drawn series (paths) with points (circles).
  await expect(page.locator('#plots figure[data-plot="sdpa-throughput.svg"] svg circle').first()).toBeVisible();
  expect(await page.locator('#plots svg path').count()).toBeGreaterThan(3);
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
  await page.screenshot({ path: `${SHOTS}/demo-full.png`, fullPage: true });
  expect(errors).toEqual([]);
});

// ------------------------------------------------------------------------------------------ Model

const GOLDENS = join(process.cwd(), '..', 'shared', 'goldens');
interface Golden { prompts: number[][]; greedy: number[][] }
const golden = (name: string) => JSON.parse(readFileSync(join(GOLDENS, name, 'golden.json'), 'utf8')) as Golden;
const words = (ids: number[]) => ids.map((i) => `w${i}`).join(' ');

/**
 * A checkpoint folder as a user has one: llama-gqa's config and weights, and a tokenizer written here
 * for its 256-token vocabulary (a word level model over "w0".."w255", split on whitespace, joined by
 * spaces: encode and decode round-trip in @huggingface/tokenizers) with a chat template.
 */
function writeCheckpoint(root: string): string {
  const dir = join(root, 'tiny-llama');
  mkdirSync(dir);
  for (const f of ['config.json', 'model.safetensors']) copyFileSync(join(GOLDENS, 'llama-gqa', f), join(dir, f));
  const vocab = Object.fromEntries(Array.from({ length: 256 }, (_, i) => [`w${i}`, i]));
  writeFileSync(join(dir, 'tokenizer.json'), JSON.stringify({
    version: '1.0', truncation: null, padding: null, added_tokens: [], normalizer: null,
    pre_tokenizer: { type: 'Whitespace' }, post_processor: null, decoder: { type: 'WordPiece', prefix: '##', cleanup: true },
    model: { type: 'WordLevel', vocab, unk_token: 'w0' },
  }));
  writeFileSync(join(dir, 'tokenizer_config.json'), JSON.stringify({
    tokenizer_class: 'PreTrainedTokenizerFast', bos_token: 'w1', eos_token: 'w2', unk_token: 'w0',
    chat_template: "{{ bos_token }}{% for m in messages %} w3 {{ m['content'] }} w4{% endfor %}{% if add_generation_prompt %} w5{% endif %}",
  }));
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

async function generate(o: { prompt: string; maxNew: number; chat?: boolean }): Promise<void> {
  await page.fill('#model-prompt', o.prompt);
  await page.fill('#model-max-new', String(o.maxNew));
  await page.fill('#model-temperature', '0');
  if (!(await page.locator('#model-chat').isDisabled())) await page.locator('#model-chat').setChecked(!!o.chat);
  await page.click('#model-generate');
  await expect(page.locator('#model-gen-status')).toHaveAttribute('data-state', /ready|stopped|error/, { timeout: 120_000 });
  await expect(page.locator('#model-gen-message')).toBeHidden();
  await expect(page.locator('#model-gen-status')).toHaveAttribute('data-state', 'ready');
}

test('Model: the goldens run and match HF in the page', async () => {
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

test('Model: a local checkpoint folder loads and generates streamed text', async () => {
  const root = mkdtempSync(join(tmpdir(), 'webinfer-demo-'));
  try {
    const dir = writeCheckpoint(root);
    await expect(page.locator('#model-generate')).toBeDisabled();   // nothing loaded yet
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
    await expect(fact('architecture')).toHaveText('LlamaForCausalLM');
    await expect(fact('layers')).toHaveText('2');
    await expect(fact('hidden size')).toHaveText('128');
    await expect(fact('vocabulary')).toHaveText('256');
    await expect(fact('weights on the GPU')).toContainText('(f32)');
    await expect(fact('KV cache')).toHaveText(/^\d+ blocks × 16 tokens = \d+ tokens$/);
    await expect(fact('tokenizer')).toHaveText('tokenizer.json (WordLevel, 256 tokens)');
    await expect(fact('chat template')).toHaveText('from tokenizer_config.json');
    await expect(page.locator('#model-chat')).toBeEnabled();
    await expect(page.locator('#model-chat')).toBeChecked();

    // Greedy from golden prompt 0 written as words: the streamed text must be HF's own greedy tokens.
    const g = golden('llama-gqa');
    await generate({ prompt: words(g.prompts[0]), maxNew: 8 });
    const out = page.locator('#model-output');
    await expect(out).toHaveAttribute('data-prompt-ids', g.prompts[0].join(' '));
    const text = (await out.innerText()).trim();
    expect(text).not.toBe('');
    for (const w of text.split(/\s+/)) expect(w).toMatch(/^w(\d|[1-9]\d|1\d\d|2[0-4]\d|25[0-5])$/);
    expect(text).toBe(words(g.greedy[0]));
    await expect(out).toHaveAttribute('data-ids', g.greedy[0].join(' '));
    expect(Number(await page.locator('#model-tps').innerText())).toBeGreaterThan(0);
    await expect(page.locator('#model-gen-stats')).toContainText(/8 tokens in [\d.]+ s: [\d.]+ tokens\/s .* \d+ steps · prompt 7 tokens · greedy · reached 8 new tokens/);

    // The chat template: the user message between the template's words, after BOS, ready for the reply.
    await generate({ prompt: 'w17 w93', maxNew: 6, chat: true });
    await expect(out).toHaveAttribute('data-prompt-ids', '1 3 17 93 4 5');
    const reply = (await out.innerText()).trim().split(/\s+/);
    expect(reply.length).toBeGreaterThan(0);
    expect(reply.length).toBeLessThanOrEqual(6);
    for (const w of reply) expect(w).toMatch(/^w\d+$/);
    const ids = (await out.getAttribute('data-ids'))!.split(' ');
    expect(reply).toEqual(ids.map((i) => `w${i}`));

    // Streaming and Stop: a long generation shows its text while it runs (Stop still enabled), then ends
    // where it was stopped with its tokens so far kept.
    await page.fill('#model-prompt', words(g.prompts[0]));
    await page.locator('#model-chat').setChecked(false);
    await page.fill('#model-max-new', '400');
    await recordTexts('#model-output', 'outTexts');
    await page.click('#model-generate');
    await expect(page.locator('#model-stop')).toBeEnabled();
    await expect.poll(async () => (await out.innerText()).trim().split(/\s+/).filter(Boolean).length, { timeout: 60_000 }).toBeGreaterThanOrEqual(3);
    await expect(page.locator('#model-stop')).toBeEnabled();
    await page.click('#model-stop');
    await expect(page.locator('#model-gen-status')).toHaveAttribute('data-state', /ready|stopped|error/, { timeout: 60_000 });
    await expect(page.locator('#model-gen-status')).toHaveAttribute('data-state', 'stopped');
    await expect(page.locator('#model-gen-message')).toBeHidden();
    const stopped = (await out.innerText()).trim().split(/\s+/);
    expect(stopped.length).toBeLessThan(400);
    await expect(page.locator('#model-gen-status')).toHaveText(`stopped after ${stopped.length} tokens`);
    expect(stopped.slice(0, 8).join(' ')).toBe(words(g.greedy[0]).split(' ').slice(0, stopped.length).join(' '));
    // Every text shown on the way was a prefix of the final one, and there were several.
    const final = stopped.join(' ');
    const partial = [...new Set((await recorded('outTexts')).map((t) => t.trim()).filter((t) => t && t !== final))];
    expect(partial.length).toBeGreaterThan(1);
    for (const t of partial) expect(final.startsWith(t)).toBe(true);
    await expect(page.locator('#model-stop')).toBeDisabled();
    await expect(page.locator('#model-generate')).toBeEnabled();

    await generate({ prompt: words(g.prompts[0]), maxNew: 8 });
    await page.locator('#model-section').screenshot({ path: `${SHOTS}/demo-model.png` });
    expect(errors).toEqual([]);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test('Model: a GGUF file at a URL loads with its quantized blocks, its own tokenizer from the metadata, and generates text', async () => {
  await loadFromUrl('./shared/goldens-quant/gguf-llama-q4-k-m/model.gguf');
  await expect(fact('architecture')).toHaveText('LlamaForCausalLM');
  await expect(fact('checkpoint')).toContainText('GGUF, Q4_K');
  await expect(fact('tokenizer')).toContainText('from the GGUF metadata');
  await generate({ prompt: 'The quick brown fox', maxNew: 8 });
  expect((await page.locator('#model-output').textContent())?.length ?? 0).toBeGreaterThan(0);
  expect(errors).toEqual([]);
});

test('Model: a checkpoint at a URL without a tokenizer takes and prints token ids', async () => {
  // f16 weights: greedy tokens stay HF's (the margins are far above f16 rounding).
  await page.selectOption('#model-dtype', 'f16');
  await loadFromUrl('./shared/goldens/qwen3-qknorm-tied');
  await expect(fact('architecture')).toHaveText('Qwen3ForCausalLM');
  await expect(fact('weights on the GPU')).toContainText('(f16)');
  await expect(fact('tokenizer')).toContainText('prompts are space-separated token ids');
  await expect(page.locator('#model-chat')).toBeDisabled();
  const g = golden('qwen3-qknorm-tied');
  await generate({ prompt: g.prompts[1].join(' '), maxNew: 8 });
  await expect(page.locator('#model-output')).toHaveText(g.greedy[1].join(' '));
  // A bad id is refused in the page, before anything runs.
  await page.fill('#model-prompt', '3 250 999');
  await page.click('#model-generate');
  await expect(page.locator('#model-gen-status')).toHaveAttribute('data-state', 'error');
  await expect(page.locator('#model-gen-message')).toContainText('"999" is not a token id in [0, 256)');
  await page.selectOption('#model-dtype', 'checkpoint');
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
  for (const id of ['#check-run', '#bench-run', '#pg-run', '#model-goldens-run', '#model-open-folder', '#model-open-gguf', '#model-load-url', '#model-generate']) {
    await expect(p.locator(id)).toBeDisabled();
  }
  await p.screenshot({ path: `${SHOTS}/demo-no-webgpu.png` });
  expect(errs).toEqual([]);
  await p.close();
});
