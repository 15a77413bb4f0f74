// The built demo page (dist-demo/) in headless Chromium on SwiftShader, driven as a person would: the
// adapter panel appears, Check passes every case of its slice, a quick Benchmark draws its plots, the
// Playground checks one shape; no console error on the way. Screenshots go to .cache/screenshots/.
import { mkdirSync } from 'node:fs';
import { expect, test, type Page } from '@playwright/test';
import { ORIGIN, serveRepo } from '../browser/serve';

test.describe.configure({ mode: 'serial' });

const SHOTS = '.cache/screenshots';
let page: Page;
const errors: string[] = [];

test.beforeAll(async ({ browser }) => {
  mkdirSync(SHOTS, { recursive: true });
  page = await browser.newPage();
  page.on('console', (m) => { if (m.type() === 'error') errors.push(`console: ${m.text()}`); });
  page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
  await serveRepo(page, ['dist-demo'], '/dist-demo/index.html');
  await page.goto(`${ORIGIN}/dist-demo/index.html`);
});

test.afterAll(async () => {
  await page?.close();
});

test('the adapter panel shows the adapter, its features and limits', async () => {
  await expect(page.locator('#adapter-status')).toHaveAttribute('data-state', 'ready', { timeout: 60_000 });
  await expect(page.locator('#features tbody tr')).toHaveCount(3);
  await expect(page.locator('#features tr[data-feature=subgroups] td').nth(1)).toContainText(/yes|no/);
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
  for (const id of ['#check-run', '#bench-run', '#pg-run']) await expect(p.locator(id)).toBeDisabled();
  await p.screenshot({ path: `${SHOTS}/demo-no-webgpu.png` });
  expect(errs).toEqual([]);
  await p.close();
});
