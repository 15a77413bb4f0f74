#!/usr/bin/env node
// `npm test`: builds, then runs every suite and prints one plain `N passed, N failed` line last.
//   typecheck        tsc --noEmit over src and tests
//   unit             vitest, pure CPU (converters, float64 reference)
//   node-swiftshader vitest GPU cases through dawn.node on SwiftShader (no shader-f16, subgroups of 4)
//   node-lavapipe    the same on Mesa 25 lavapipe (shader-f16, subgroups of 8), when .ci/install.sh fetched it
//   server           `webinfer serve` in Node: the HTTP transport against a double of the API, then a golden
//                    model served (in process and by the CLI) and driven by the official openai client
//   chromium         Playwright, the cases in a Chromium page on SwiftShader, against dist/webinfer.js
//   deno             Deno (wgpu) on Debian's lavapipe (shader-f16, no subgroups), against dist/webinfer.js;
//                    with the server's Deno test (Deno.serve, dist/serve.js)
//   firefox          Debian's Firefox ESR (Gecko's WebGPU, wgpu) on Debian's lavapipe, driven over WebDriver
//                    BiDi by puppeteer-core: the cases in a page against dist/webinfer.js, then the demo's Check
//   package          the packed tarball as users install it: publint, attw, and scratch projects that
//                    type-check and run a program under nodenext, bundler and Deno (check-package.mjs)
//   demo             builds the demo page (dist-demo/) and drives it in Chromium on SwiftShader: Check, a
//                    quick Benchmark, the Playground (screenshots in .cache/screenshots/)
// Flags: --only=a,b runs a subset; --no-build skips the build.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
process.chdir(root);
const args = process.argv.slice(2);
const only = args.find((a) => a.startsWith('--only='))?.slice(7).split(',');
const results = join(root, '.cache/results');
rmSync(results, { recursive: true, force: true });
mkdirSync(results, { recursive: true });

const SWIFTSHADER = '/usr/lib/chromium/vk_swiftshader_icd.json';
const LAVAPIPE25 = join(root, '.cache/lavapipe25/lvp_icd.json');
const LAVAPIPE22 = '/usr/share/vulkan/icd.d/lvp_icd.x86_64.json';
const bin = (name) => join(root, 'node_modules/.bin', name);

function run(cmd, argv, env = {}) {
  return new Promise((resolve) => {
    let out = '';
    const child = spawn(cmd, argv, { cwd: root, env: { ...process.env, NO_COLOR: '1', FORCE_COLOR: '0', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    const tee = (stream) => (d) => { out += d; stream.write(d); };
    child.stdout.on('data', tee(process.stdout));
    child.stderr.on('data', tee(process.stderr));
    child.on('close', (code) => resolve({ code: code ?? 1, out }));
    child.on('error', (e) => resolve({ code: 1, out: String(e) }));
  });
}

function readJson(path) {
  try { return JSON.parse(readFileSync(path, 'utf8')); } catch { return null; }
}

const vitestCounts = (file) => {
  const j = readJson(file);
  return j ? { passed: j.numPassedTests, failed: j.numFailedTests + (j.numTotalTestSuites && !j.success && j.numFailedTests === 0 ? 1 : 0) } : null;
};

const suites = [
  {
    name: 'typecheck',
    async run() {
      const r = await run(bin('tsc'), ['--noEmit', '-p', 'tsconfig.json']);
      return { passed: r.code === 0 ? 1 : 0, failed: r.code === 0 ? 0 : 1 };
    },
  },
  {
    name: 'unit',
    async run() {
      const file = join(results, 'unit.json');
      await run(bin('vitest'), ['run', 'tests/unit', '--reporter=default', '--reporter=json', `--outputFile.json=${file}`]);
      return vitestCounts(file);
    },
  },
  {
    name: 'node-swiftshader',
    async run() {
      if (!existsSync(SWIFTSHADER)) return { passed: 0, failed: 1, why: `${SWIFTSHADER} missing: run .ci/install.sh` };
      const file = join(results, 'node-swiftshader.json');
      await run(bin('vitest'), ['run', 'tests/node', '--reporter=default', '--reporter=json', `--outputFile.json=${file}`],
        { VK_ICD_FILENAMES: SWIFTSHADER, WEBINFER_RUNTIME: 'node-swiftshader' });
      return vitestCounts(file);
    },
  },
  {
    name: 'node-lavapipe',
    async run() {
      if (!existsSync(LAVAPIPE25)) {
        return { passed: 0, failed: 0, why: 'Mesa 25 lavapipe was not fetched (backports unreachable): shader-f16 is covered by deno, subgroups by node-swiftshader and chromium' };
      }
      const file = join(results, 'node-lavapipe.json');
      await run(bin('vitest'), ['run', 'tests/node', '--reporter=default', '--reporter=json', `--outputFile.json=${file}`],
        { VK_ICD_FILENAMES: LAVAPIPE25, WEBINFER_RUNTIME: 'node-lavapipe' });
      return vitestCounts(file);
    },
  },
  {
    name: 'server',
    async run() {
      const icd = existsSync(LAVAPIPE25) ? LAVAPIPE25 : SWIFTSHADER;
      if (!existsSync(icd)) return { passed: 0, failed: 1, why: `${SWIFTSHADER} missing: run .ci/install.sh` };
      const file = join(results, 'server.json');
      await run(bin('vitest'), ['run', '-c', 'tests/server/vitest.config.ts', '--reporter=default', '--reporter=json', `--outputFile.json=${file}`],
        { VK_ICD_FILENAMES: icd, WEBINFER_RUNTIME: icd === LAVAPIPE25 ? 'node-lavapipe' : 'node-swiftshader' });
      return vitestCounts(file);
    },
  },
  {
    name: 'chromium',
    async run() {
      await run(bin('playwright'), ['test']);
      const j = readJson(join(results, 'chromium.json'));
      return j ? { passed: j.stats.expected + j.stats.flaky, failed: j.stats.unexpected + (j.errors?.length ? 1 : 0) } : null;
    },
  },
  {
    name: 'demo',
    async run() {
      const b = await run('npm', ['run', '--silent', 'build:demo']);
      if (b.code !== 0) return { passed: 0, failed: 1, why: 'the demo build failed' };
      await run(bin('playwright'), ['test', '-c', 'tests/demo/playwright.config.ts']);
      const j = readJson(join(results, 'demo.json'));
      return j ? { passed: j.stats.expected + j.stats.flaky, failed: j.stats.unexpected + (j.errors?.length ? 1 : 0) } : null;
    },
  },
  {
    name: 'firefox',
    async run() {
      if (!existsSync(join(root, 'dist-demo/index.html'))) {
        const b = await run('npm', ['run', '--silent', 'build:demo']);
        if (b.code !== 0) return { passed: 0, failed: 1, why: 'the demo build failed' };
      }
      await run(process.execPath, ['tests/firefox/run.mjs']);
      const j = readJson(join(results, 'firefox.json'));
      return j ? { passed: j.passed, failed: j.failed, ...(j.why ? { why: j.why } : {}) } : null;
    },
  },
  {
    name: 'package',
    async run() {
      const r = await run(process.execPath, ['scripts/check-package.mjs']);
      const m = /^(\d+) passed, (\d+) failed$/m.exec(r.out);
      return m ? { passed: Number(m[1]), failed: Number(m[2]) } : null;
    },
  },
  {
    name: 'deno',
    async run() {
      // The server's test listens, connects, writes a checkpoint folder and runs dist/serve.js.
      const r = await run(bin('deno'), ['test', '--allow-env', '--allow-read', '--allow-net', '--allow-write', '--allow-run', '--no-check', 'tests/deno/'],
        { VK_ICD_FILENAMES: LAVAPIPE22, DENO_NO_UPDATE_CHECK: '1' });
      const m = /(\d+) passed[^\d]+(\d+) failed/.exec(r.out.replace(/\x1b\[[0-9;]*m/g, '').split('\n').filter((l) => /passed.*failed/.test(l)).pop() ?? '');
      return m ? { passed: Number(m[1]), failed: Number(m[2]) } : null;
    },
  },
];

let passed = 0;
let failed = 0;
const summary = [];
if (!args.includes('--no-build')) {
  const b = await run('npm', ['run', '--silent', 'build']);
  if (b.code !== 0) {
    console.log('build failed');
    console.log('0 passed, 1 failed');
    process.exit(1);
  }
}
for (const s of suites) {
  if (only && !only.includes(s.name)) continue;
  console.log(`\n=== ${s.name} ===`);
  const t0 = Date.now();
  const c = (await s.run()) ?? { passed: 0, failed: 1, why: 'the runner produced no results (crashed?)' };
  passed += c.passed;
  failed += c.failed;
  summary.push(`${s.name.padEnd(17)} ${String(c.passed).padStart(4)} passed ${String(c.failed).padStart(3)} failed  ${((Date.now() - t0) / 1000).toFixed(1)}s${c.why ? `  (${c.why})` : ''}`);
}
console.log('\n=== summary ===');
for (const l of summary) console.log(l);
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed > 0 || passed === 0 ? 1 : 0);
