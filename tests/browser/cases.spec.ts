// The shared cases in headless Chromium (SwiftShader WebGPU): one Playwright test per case, all in
// one page so pipelines compile once.
import { test, type Page } from '@playwright/test';
import { allCases } from '../../.cache/bundles/cases.js';
import { ORIGIN, serveRepo } from './serve';

test.describe.configure({ mode: 'serial' });

let page: Page;
const consoleErrors: string[] = [];

test.beforeAll(async ({ browser }) => {
  page = await browser.newPage();
  page.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(m.text()); });
  page.on('pageerror', (e) => consoleErrors.push(String(e)));
  await serveRepo(page, ['tests/browser', 'dist', '.cache/bundles', 'shared'], '/tests/browser/index.html');
  await page.goto(`${ORIGIN}/`);
  await page.waitForFunction(() => (window as unknown as { webinferReady?: boolean }).webinferReady === true, null, { timeout: 60_000 });
});

test.afterAll(async () => {
  const notes = await page.evaluate(() => (window as unknown as { webinferTests: { notes: string[] } }).webinferTests.notes);
  for (const n of notes) console.log(`[chromium] ${n}`);
  await page.close();
});

for (const c of allCases as { name: string }[]) {
  test(c.name, async () => {
    const r = await page.evaluate((name) => (window as unknown as {
      webinferTests: { run(n: string): Promise<{ ok: boolean; error?: string }> };
    }).webinferTests.run(name), c.name);
    if (!r.ok) throw new Error(r.error);
  });
}
