#!/usr/bin/env node
// The shared cases in headless Firefox (Gecko's WebGPU, which is wgpu underneath) and the demo page's
// Check, driven over WebDriver BiDi by puppeteer-core (Playwright's own Firefox build cannot be
// downloaded here; Debian's firefox-esr can). The pages come from a static server on 127.0.0.1
// (a secure context, so navigator.gpu exists), the same files the Chromium suite serves.
//
//   node tests/firefox/run.mjs [--grep=REGEX] [--driver=lavapipe|swiftshader|system] [--no-demo]
//                              [--no-cases] [--case-timeout=SECONDS]
//
// Prints a line per case and, last, `N passed, N failed`; writes .cache/results/firefox.json. A case
// that outruns its time limit fails, and the browser is started anew for the next one (a wedged GPU
// process would otherwise fail every case after it).
import { createServer } from 'node:http';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { dirname, extname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';
import puppeteer from 'puppeteer-core';

const root = join(dirname(fileURLToPath(import.meta.url)), '../..');
const args = process.argv.slice(2);
const opt = (name, dflt) => args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? dflt;
const grep = opt('grep') ? new RegExp(opt('grep')) : null;
const caseTimeoutMs = Number(opt('case-timeout', '600')) * 1000;
const withDemo = !args.includes('--no-demo');
const withCases = !args.includes('--no-cases');

/** Vulkan drivers Firefox's wgpu can run on here. Debian's lavapipe is the default: SwiftShader's
 *  Vulkan driver, used by Chromium, takes minutes and many GB to compile the loops wgpu is given
 *  written out (README, "Firefox"). 'system' leaves VK_ICD_FILENAMES as it is. */
const DRIVERS = {
  lavapipe: '/usr/share/vulkan/icd.d/lvp_icd.x86_64.json',
  swiftshader: '/usr/lib/chromium/vk_swiftshader_icd.json',
  system: process.env.VK_ICD_FILENAMES ?? '',
};
const driver = opt('driver', 'lavapipe');
if (!(driver in DRIVERS)) throw new Error(`--driver: expected one of ${Object.keys(DRIVERS).join(', ')}, got ${driver}`);
const icd = DRIVERS[driver];
if (icd && !existsSync(icd)) {
  console.log(`firefox: the ${driver} Vulkan driver (${icd}) is missing: run .ci/install.sh`);
  finish({ passed: 0, failed: 1, cases: [], why: `${icd} missing` });
}
const FIREFOX = process.env.FIREFOX_PATH ?? '/usr/bin/firefox-esr';
if (!existsSync(FIREFOX)) {
  console.log(`firefox: ${FIREFOX} is missing: run .ci/install.sh (Debian's firefox-esr), or set FIREFOX_PATH`);
  finish({ passed: 0, failed: 1, cases: [], why: `${FIREFOX} missing` });
}

// ------------------------------------------------------------------------------------------ server

const TYPES = {
  '.html': 'text/html', '.js': 'text/javascript', '.mjs': 'text/javascript', '.map': 'application/json',
  '.json': 'application/json', '.css': 'text/css', '.svg': 'image/svg+xml', '.wgsl': 'text/plain',
};
/** Serves these folders of the repository; `shared/` is the folder beside the checkout (goldens). */
const ROOTS = ['tests/browser', 'dist', 'dist-demo', '.cache/bundles', 'shared'];
const server = createServer(async (req, res) => {
  const rel = normalize(decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname)).replace(/^\/+/, '');
  if (rel.includes('..') || !ROOTS.some((r) => rel === r || rel.startsWith(`${r}/`))) {
    res.writeHead(404).end(`not served: ${rel}`);
    return;
  }
  try {
    const body = await readFile(rel.startsWith('shared/') ? join(root, '..', rel) : join(root, rel));
    res.writeHead(200, { 'content-type': TYPES[extname(rel)] ?? 'application/octet-stream', 'cache-control': 'no-store' }).end(body);
  } catch {
    res.writeHead(404).end(`missing: ${rel}`);
  }
});
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const ORIGIN = `http://127.0.0.1:${server.address().port}`;

// ----------------------------------------------------------------------------------------- browser

/** The two prefs a user sets in about:config: WebGPU is off by default in Linux builds, and its
 *  blocklist refuses Mesa (and, headless, any adapter: the GL probe finds no X server). */
const FIREFOX_PREFS = { 'dom.webgpu.enabled': true, 'gfx.webgpu.ignore-blocklist': true };

let browser = null;
let page = null;
const pageErrors = [];

async function launch(url, ready) {
  browser = await puppeteer.launch({
    browser: 'firefox',
    executablePath: FIREFOX,
    headless: true,
    protocol: 'webDriverBiDi',
    extraPrefsFirefox: FIREFOX_PREFS,
    env: { ...process.env, ...(icd ? { VK_ICD_FILENAMES: icd } : {}), MOZ_CRASHREPORTER_DISABLE: '1' },
    protocolTimeout: caseTimeoutMs + 60_000,
  });
  page = await browser.newPage();
  page.on('console', (m) => { if (m.type() === 'error') pageErrors.push(m.text()); });
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  await page.goto(url);
  await page.waitForFunction(ready, { timeout: 120_000, polling: 200 });
}

async function close() {
  const b = browser;
  browser = page = null;
  if (!b) return;
  // A wedged GPU process can keep close() from answering: kill the process after a grace period.
  await Promise.race([b.close(), new Promise((r) => setTimeout(r, 10_000))]).catch(() => {});
  try { b.process()?.kill('SIGKILL'); } catch { /* gone */ }
}

function withTimeout(promise, ms, what) {
  let timer;
  return Promise.race([
    promise.finally(() => clearTimeout(timer)),
    new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`${what}: no answer after ${ms / 1000} s`)), ms); }),
  ]);
}

// ------------------------------------------------------------------------------------------- cases

const results = [];
const notes = new Set();
const casesUrl = `${ORIGIN}/tests/browser/index.html?runtime=firefox`;
const casesReady = () => window.webinferReady === true;
let adapterLine = '';

async function runCases() {
  if (!existsSync(join(root, '.cache/bundles/cases.js')) || !existsSync(join(root, 'dist/webinfer.js'))) {
    results.push({ name: 'cases', ok: false, error: 'dist/webinfer.js or .cache/bundles/cases.js missing: run `npm run build`' });
    return;
  }
  await launch(casesUrl, casesReady);
  adapterLine = await page.evaluate(async () => {
    const a = await navigator.gpu?.requestAdapter();
    if (!a) return 'no adapter';
    return `${navigator.userAgent}; features: ${[...a.features].sort().join(' ')}; workgroup storage ${a.limits.maxComputeWorkgroupStorageSize}`;
  });
  console.log(`firefox: ${adapterLine}`);
  const names = (await page.evaluate(() => window.webinferTests.names)).filter((n) => !grep || grep.test(n));
  for (const name of names) {
    if (!page) await launch(casesUrl, casesReady);
    const t0 = Date.now();
    let r;
    try {
      r = await withTimeout(page.evaluate((n) => window.webinferTests.run(n), name), caseTimeoutMs, name);
    } catch (e) {
      r = { ok: false, error: String(e?.message ?? e) };
      await close();   // start anew: the page or its GPU process may be stuck
    }
    const ms = Date.now() - t0;
    results.push({ name, ok: r.ok, error: r.error, ms });
    console.log(`  ${r.ok ? 'ok  ' : 'FAIL'} ${name} (${(ms / 1000).toFixed(1)} s)${r.ok ? '' : `\n       ${String(r.error).split('\n').slice(0, 6).join('\n       ')}`}`);
  }
  if (page) for (const n of await page.evaluate(() => window.webinferTests.notes)) notes.add(n);
  await close();
}

// -------------------------------------------------------------------------------------- demo Check

/** The demo page as a person opens it in Firefox: the adapter panel, then Check over its slice. */
async function runDemoCheck() {
  const name = 'demo › Check passes every case of its slice';
  if (!existsSync(join(root, 'dist-demo/index.html'))) {
    results.push({ name, ok: false, error: 'dist-demo/ missing: run `npm run build:demo`' });
    return;
  }
  const t0 = Date.now();
  pageErrors.length = 0;
  try {
    await launch(`${ORIGIN}/dist-demo/index.html`, () => document.querySelector('#adapter-status')?.getAttribute('data-state') === 'ready');
    const expected = Number(await page.$eval('#check-scope option[value=slice]', (o) => o.getAttribute('data-count')));
    if (!(expected > 10)) throw new Error(`the slice lists ${expected} cases`);
    await page.select('#check-scope', 'slice');
    await page.click('#check-run');
    await page.waitForFunction(() => /pass|fail/.test(document.querySelector('#check-status')?.getAttribute('data-state') ?? ''),
      { timeout: caseTimeoutMs * 2, polling: 1000 });
    const rows = await page.$$eval('#check-rows tr', (trs) => trs.map((tr) => ({
      result: tr.getAttribute('data-result'), text: [...tr.querySelectorAll('td')].map((td) => td.textContent).join(' | '),
    })));
    const failed = rows.filter((r) => r.result !== 'pass');
    const problems = [];
    if (rows.length !== expected) problems.push(`${rows.length} rows, expected ${expected}`);
    for (const f of failed) problems.push(`failed: ${f.text}`);
    const errors = pageErrors.filter((e) => !/status of 404/.test(e));
    for (const e of errors) problems.push(`console: ${e}`);
    mkdirSync(join(root, '.cache/screenshots'), { recursive: true });
    await (await page.$('#check-section'))?.screenshot({ path: join(root, '.cache/screenshots/demo-check-firefox.png') });
    results.push({ name, ok: problems.length === 0, error: problems.join('\n') || undefined, ms: Date.now() - t0, detail: `${rows.length - failed.length} of ${rows.length} passed` });
  } catch (e) {
    results.push({ name, ok: false, error: String(e?.message ?? e), ms: Date.now() - t0 });
  }
  const r = results.at(-1);
  console.log(`  ${r.ok ? 'ok  ' : 'FAIL'} ${name} (${((r.ms ?? 0) / 1000).toFixed(1)} s)${r.detail ? ` ${r.detail}` : ''}${r.ok ? '' : `\n       ${r.error}`}`);
  await close();
}

// -------------------------------------------------------------------------------------------- main

function finish(summary) {
  const dir = join(root, '.cache/results');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'firefox.json'), JSON.stringify(summary, null, 1));
  console.log(`${summary.passed} passed, ${summary.failed} failed`);
  process.exit(summary.failed ? 1 : 0);
}

try {
  if (withCases) await runCases();
  if (withDemo && (!grep || grep.test('demo'))) await runDemoCheck();
} catch (e) {
  results.push({ name: 'firefox suite', ok: false, error: String(e?.stack ?? e) });
  console.log(`firefox: ${e?.stack ?? e}`);
  await close();
}
server.close();
for (const n of notes) console.log(`[firefox] ${n}`);
const passed = results.filter((r) => r.ok).length;
finish({ passed, failed: results.length - passed, adapter: adapterLine, driver, cases: results });
