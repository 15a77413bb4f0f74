// bench/probes/host.mjs in a Chromium page (Debian's chromium, SwiftShader WebGPU, headless, driven by
// Playwright): what one dispatch and a decode step cost the page's thread. Against dist/webinfer.js:
//   node bench/probes/host-browser.mjs [--json=path]
// In a browser each WebGPU call also crosses to the GPU process; this measures that path.
import { readFile, writeFile } from 'node:fs/promises';
import { extname, join, normalize } from 'node:path';
import { chromium } from '@playwright/test';

const root = join(import.meta.dirname, '..', '..');
const args = ['--no-sandbox', '--disable-dev-shm-usage', '--enable-unsafe-webgpu', '--use-webgpu-adapter=swiftshader', '--use-angle=swiftshader', '--ignore-gpu-blocklist'];
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium', args, headless: true });
try {
  const page = await browser.newPage();
  page.on('console', (m) => console.log(`[page] ${m.text()}`));
  await page.route('http://localhost/**', async (route) => {
    const rel = normalize(decodeURIComponent(new URL(route.request().url()).pathname)).replace(/^\/+/, '');
    if (rel === '') return route.fulfill({ status: 200, contentType: 'text/html', body: '<!doctype html><title>host probe</title>' });
    if (!/^(dist|bench\/probes)\//.test(rel) || rel.includes('..')) return route.fulfill({ status: 404, body: 'not served' });
    const type = { '.js': 'text/javascript', '.mjs': 'text/javascript', '.map': 'application/json' }[extname(rel)] ?? 'application/octet-stream';
    return route.fulfill({ status: 200, contentType: type, body: await readFile(join(root, rel)) });
  });
  await page.goto('http://localhost/');
  const r = await page.evaluate(async () => {
    const m = await import('/bench/probes/host.mjs');
    const out = await m.run(navigator.gpu, { runtime: `chromium ${navigator.userAgent.match(/Chrome\/([\d.]+)/)?.[1] ?? ''}`, dist: '/dist/webinfer.js' });
    return { out, text: m.format(out) };
  });
  console.log(r.text);
  const json = process.argv.find((a) => a.startsWith('--json='))?.slice(7);
  if (json) await writeFile(json, `${JSON.stringify(r.out, null, 1)}\n`);
} finally {
  await browser.close();
}
