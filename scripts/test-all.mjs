#!/usr/bin/env node
// `npm test`: builds, then runs every suite and prints one plain `N passed, N failed` line last.
//   typecheck        tsc --noEmit over src and tests
//   unit             vitest, pure CPU (converters, float64 reference)
//   node-swiftshader vitest GPU cases through dawn.node on SwiftShader (no shader-f16, subgroups of 4)
//   node-lavapipe    the same on Mesa 25 lavapipe (shader-f16, subgroups of 8), when .ci/install.sh fetched it
//   examples         the README's examples/*.mjs run as users run them against the goldens, the page one in Chromium
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
// Flags: --only=a,b runs a subset; --no-build skips the build; --jobs=N runs up to N suites at once
// (default 2). Every suite keeps about one core busy (node-swiftshader's cases: 46.9 CPU-s in 46.0 s),
// so on two cores two suites at once each run about 25% slower (two SwiftShader case slices: 46.0 s and
// 36.6 s alone, 58.4 s and 45.6 s side by side) and the whole run takes about 16 minutes less. A suite
// run beside another writes its output to .cache/results/<name>.log as it goes and prints it whole, under
// its own `=== name ===` heading, when it ends; --jobs=1 runs them one after another in the listed order
// with their output live. Each suite's counts come from its own results file or output, so the total
// does not depend on the order they ran in; the summary lists the suites in the order below.
import { spawn } from 'node:child_process';
import { appendFileSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
process.chdir(root);
const args = process.argv.slice(2);
const only = args.find((a) => a.startsWith('--only='))?.slice(7).split(',');
const jobs = Number(args.find((a) => a.startsWith('--jobs='))?.slice(7) ?? 2);
if (!Number.isInteger(jobs) || jobs < 1) {
  console.log(`--jobs: expected a whole number of suites at once, 1 or more, got ${args.find((a) => a.startsWith('--jobs='))}`);
  process.exit(2);
}
const results = join(root, '.cache/results');
rmSync(results, { recursive: true, force: true });
mkdirSync(results, { recursive: true });

const SWIFTSHADER = '/usr/lib/chromium/vk_swiftshader_icd.json';
const LAVAPIPE25 = join(root, '.cache/lavapipe25/lvp_icd.json');
const LAVAPIPE22 = '/usr/share/vulkan/icd.d/lvp_icd.x86_64.json';
const bin = (name) => join(root, 'node_modules/.bin', name);

/** Where a command's output goes: the terminal as it comes (a suite run alone), or a log file as it
 *  comes and a buffer printed whole when the suite ends (a suite run beside another). */
function sink(name, live) {
  const log = join(results, `${name}.log`);
  writeFileSync(log, '');
  let text = '';
  return {
    write(d) {
      appendFileSync(log, d);
      if (live) process.stdout.write(d);
      else text += d;
    },
    text: () => text,
  };
}

function run(out, cmd, argv, env = {}) {
  return new Promise((resolve) => {
    let all = '';
    const child = spawn(cmd, argv, { cwd: root, env: { ...process.env, NO_COLOR: '1', FORCE_COLOR: '0', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    const tee = (d) => { all += d; out.write(d); };
    child.stdout.on('data', tee);
    child.stderr.on('data', tee);
    child.on('close', (code) => resolve({ code: code ?? 1, out: all }));
    child.on('error', (e) => resolve({ code: 1, out: String(e) }));
  });
}

/** The demo page's build, once: the demo and firefox suites both serve dist-demo/, and may run at once. */
let demoBuild = null;
function buildDemo(out) {
  demoBuild ??= run(out, 'npm', ['run', '--silent', 'build:demo']).then((r) => r.code === 0);
  return demoBuild;
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
    async run(out) {
      const r = await run(out, bin('tsc'), ['--noEmit', '-p', 'tsconfig.json']);
      return { passed: r.code === 0 ? 1 : 0, failed: r.code === 0 ? 0 : 1 };
    },
  },
  {
    name: 'unit',
    async run(out) {
      const file = join(results, 'unit.json');
      await run(out, bin('vitest'), ['run', 'tests/unit', '--reporter=default', '--reporter=json', `--outputFile.json=${file}`]);
      return vitestCounts(file);
    },
  },
  {
    name: 'node-swiftshader',
    async run(out) {
      if (!existsSync(SWIFTSHADER)) return { passed: 0, failed: 1, why: `${SWIFTSHADER} missing: run .ci/install.sh` };
      const file = join(results, 'node-swiftshader.json');
      await run(out, bin('vitest'), ['run', 'tests/node', '--reporter=default', '--reporter=json', `--outputFile.json=${file}`],
        { VK_ICD_FILENAMES: SWIFTSHADER, WEBINFER_RUNTIME: 'node-swiftshader' });
      return vitestCounts(file);
    },
  },
  {
    name: 'node-lavapipe',
    async run(out) {
      if (!existsSync(LAVAPIPE25)) {
        return { passed: 0, failed: 0, why: 'Mesa 25 lavapipe was not fetched (backports unreachable): shader-f16 is covered by deno, subgroups by node-swiftshader and chromium' };
      }
      const file = join(results, 'node-lavapipe.json');
      await run(out, bin('vitest'), ['run', 'tests/node', '--reporter=default', '--reporter=json', `--outputFile.json=${file}`],
        { VK_ICD_FILENAMES: LAVAPIPE25, WEBINFER_RUNTIME: 'node-lavapipe' });
      return vitestCounts(file);
    },
  },
  {
    name: 'server',
    async run(out) {
      const icd = existsSync(LAVAPIPE25) ? LAVAPIPE25 : SWIFTSHADER;
      if (!existsSync(icd)) return { passed: 0, failed: 1, why: `${SWIFTSHADER} missing: run .ci/install.sh` };
      const file = join(results, 'server.json');
      await run(out, bin('vitest'), ['run', '-c', 'tests/server/vitest.config.ts', '--reporter=default', '--reporter=json', `--outputFile.json=${file}`],
        { VK_ICD_FILENAMES: icd, WEBINFER_RUNTIME: icd === LAVAPIPE25 ? 'node-lavapipe' : 'node-swiftshader' });
      return vitestCounts(file);
    },
  },
  {
    name: 'examples',
    async run(out) {
      // The README's examples as users run them (node examples/<name>.mjs <model>), the page one in Chromium.
      const icd = existsSync(LAVAPIPE25) ? LAVAPIPE25 : SWIFTSHADER;
      if (!existsSync(icd)) return { passed: 0, failed: 1, why: `${SWIFTSHADER} missing: run .ci/install.sh` };
      const file = join(results, 'examples.json');
      await run(out, bin('vitest'), ['run', '-c', 'tests/examples/vitest.config.ts', '--reporter=default', '--reporter=json', `--outputFile.json=${file}`],
        { VK_ICD_FILENAMES: icd, WEBINFER_RUNTIME: icd === LAVAPIPE25 ? 'node-lavapipe' : 'node-swiftshader' });
      return vitestCounts(file);
    },
  },
  {
    name: 'chromium',
    async run(out) {
      await run(out, bin('playwright'), ['test']);
      const j = readJson(join(results, 'chromium.json'));
      return j ? { passed: j.stats.expected + j.stats.flaky, failed: j.stats.unexpected + (j.errors?.length ? 1 : 0) } : null;
    },
  },
  {
    name: 'demo',
    async run(out) {
      if (!(await buildDemo(out))) return { passed: 0, failed: 1, why: 'the demo build failed' };
      await run(out, bin('playwright'), ['test', '-c', 'tests/demo/playwright.config.ts']);
      const j = readJson(join(results, 'demo.json'));
      return j ? { passed: j.stats.expected + j.stats.flaky, failed: j.stats.unexpected + (j.errors?.length ? 1 : 0) } : null;
    },
  },
  {
    name: 'firefox',
    async run(out) {
      if (!(await buildDemo(out))) return { passed: 0, failed: 1, why: 'the demo build failed' };
      await run(out, process.execPath, ['tests/firefox/run.mjs']);
      const j = readJson(join(results, 'firefox.json'));
      return j ? { passed: j.passed, failed: j.failed, ...(j.why ? { why: j.why } : {}) } : null;
    },
  },
  {
    name: 'package',
    async run(out) {
      const r = await run(out, process.execPath, ['scripts/check-package.mjs']);
      const m = /^(\d+) passed, (\d+) failed$/m.exec(r.out);
      return m ? { passed: Number(m[1]), failed: Number(m[2]) } : null;
    },
  },
  {
    name: 'deno',
    async run(out) {
      // The server's test listens, connects, writes a checkpoint folder and runs dist/serve.js.
      const r = await run(out, bin('deno'), ['test', '--allow-env', '--allow-read', '--allow-net', '--allow-write', '--allow-run', '--no-check', 'tests/deno/'],
        { VK_ICD_FILENAMES: LAVAPIPE22, DENO_NO_UPDATE_CHECK: '1' });
      const m = /(\d+) passed[^\d]+(\d+) failed/.exec(r.out.replace(/\x1b\[[0-9;]*m/g, '').split('\n').filter((l) => /passed.*failed/.test(l)).pop() ?? '');
      return m ? { passed: Number(m[1]), failed: Number(m[2]) } : null;
    },
  },
];

// The order suites start in when run side by side: the two long SwiftShader suites first, one on each
// core, then the rest as cores come free (last run on two cores: node-swiftshader 1056 s, chromium
// 800 s, firefox 288 s, demo 210 s, deno 85 s, node-lavapipe 63-152 s, the others under a minute).
const START_ORDER = ['node-swiftshader', 'chromium', 'typecheck', 'unit', 'node-lavapipe', 'server', 'examples', 'firefox', 'demo', 'deno', 'package'];

if (!args.includes('--no-build')) {
  const b = await run({ write: (d) => process.stdout.write(d) }, 'npm', ['run', '--silent', 'build']);
  if (b.code !== 0) {
    console.log('build failed');
    console.log('0 passed, 1 failed');
    process.exit(1);
  }
}
const chosen = suites.filter((s) => !only || only.includes(s.name));
const rank = (s) => (START_ORDER.includes(s.name) ? START_ORDER.indexOf(s.name) : START_ORDER.length);
const queue = jobs === 1 ? [...chosen] : [...chosen].sort((a, b) => rank(a) - rank(b));
const outcome = new Map();
async function worker() {
  for (let s = queue.shift(); s; s = queue.shift()) {
    const live = jobs === 1;
    if (live) console.log(`\n=== ${s.name} ===`);
    else console.log(`\n--- ${s.name} started (its output: .cache/results/${s.name}.log, printed when it ends)`);
    const out = sink(s.name, live);
    const t0 = Date.now();
    let c;
    try {
      c = (await s.run(out)) ?? { passed: 0, failed: 1, why: 'the runner produced no results (crashed?)' };
    } catch (e) {
      c = { passed: 0, failed: 1, why: `the suite threw: ${e?.stack ?? e}` };
    }
    c.seconds = (Date.now() - t0) / 1000;
    outcome.set(s.name, c);
    if (!live) {
      console.log(`\n=== ${s.name} ===`);
      process.stdout.write(out.text());
      console.log(`--- ${s.name} ended: ${c.passed} passed, ${c.failed} failed, ${c.seconds.toFixed(1)}s`);
    }
  }
}
await Promise.all(Array.from({ length: Math.min(jobs, chosen.length) }, worker));

let passed = 0;
let failed = 0;
console.log('\n=== summary ===');
for (const s of chosen) {
  const c = outcome.get(s.name);
  passed += c.passed;
  failed += c.failed;
  console.log(`${s.name.padEnd(17)} ${String(c.passed).padStart(4)} passed ${String(c.failed).padStart(3)} failed  ${c.seconds.toFixed(1)}s${c.why ? `  (${c.why})` : ''}`);
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed > 0 || passed === 0 ? 1 : 0);
