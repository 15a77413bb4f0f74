#!/usr/bin/env node
// The package as its users get it: `npm pack`, then
//   publint                 the package.json fields against the packed files
//   attw (esm-only profile) the declarations under node16/nodenext ESM and bundler resolution
//   two scratch projects    the tarball installed with npm, a small program type-checked by tsc under
//                           "moduleResolution": "nodenext" and "bundler" (each with the `module` it
//                           pairs with), then run by Node on a software adapter: an engine, a dense
//                           attention call checked against the float64 reference.
// Prints one line per check and `N passed, N failed` last; exits non-zero on any failure.
// Run after `npm run build` (scripts/test-all.mjs builds first).
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const work = join(root, '.cache/package');
const bin = (name) => join(root, 'node_modules/.bin', name);
const SWIFTSHADER = '/usr/lib/chromium/vk_swiftshader_icd.json';
const LAVAPIPE25 = join(root, '.cache/lavapipe25/lvp_icd.json');
const LAVAPIPE22 = '/usr/share/vulkan/icd.d/lvp_icd.x86_64.json';

function sh(cmd, args, cwd, env = {}) {
  const r = spawnSync(cmd, args, { cwd, encoding: 'utf8', env: { ...process.env, NO_COLOR: '1', FORCE_COLOR: '0', ...env } });
  return { ok: r.status === 0, out: `${r.stdout ?? ''}${r.stderr ?? ''}${r.error ? String(r.error) : ''}` };
}

// What a new user writes first: an engine, a tensor of each kind, dense attention, and the float64
// reference to check it against. Typed imports from 'webinfer' (values and types) and from 'webgpu'.
const PROGRAM = `import { create, globals } from 'webgpu';
import { createEngine, compareToReference, randn, reference, TOLERANCES, Tensor, type Engine, type DType } from 'webinfer';

Object.assign(globalThis, globals);
const engine: Engine = await createEngine({ gpu: create([]) });
const [B, H, L, D] = [1, 2, 8, 16];
const dtype: DType = 'f32';
const data = [0, 1, 2].map((i) => randn(B * H * L * D, 17 + i));
const [q, k, v] = data.map((a) => engine.tensor(a, [B, H, L, D], dtype));
if (!(q instanceof Tensor)) throw new Error('engine.tensor did not return a Tensor');
const out = await engine.sdpa(q, k, v, { causal: true }).toFloat32();
const ref = reference.sdpaRef(data[0], data[1], data[2], { B, Hq: H, Hkv: H, Lq: L, Lk: L, D, Dv: D }, { causal: true });
const c = compareToReference(out, ref.out, TOLERANCES.f32);
engine.destroy();
if (!c.pass) throw new Error('sdpa differs from the reference: worst ' + c.worst);
console.log('sdpa [' + out.length + '] matches the float64 reference (worst ' + c.worst.toFixed(3) + ' of the tolerance)');
`;

let passed = 0;
let failed = 0;
function report(name, r) {
  if (r.ok) passed++; else failed++;
  console.log(`${r.ok ? 'pass' : 'FAIL'}  package › ${name}`);
  if (!r.ok) console.log(r.out.trim().split('\n').map((l) => `      ${l}`).join('\n'));
}

if (!existsSync(join(root, 'dist/webinfer.js')) || !existsSync(join(root, 'dist/types/index.d.ts'))) {
  report('build present', { ok: false, out: 'dist/ is missing: run `npm run build` first' });
} else {
  rmSync(work, { recursive: true, force: true });
  mkdirSync(work, { recursive: true });
  const pack = sh('npm', ['pack', '--silent', '--pack-destination', work], root);
  const tgz = readdirSync(work).find((f) => f.endsWith('.tgz'));
  report('npm pack', { ok: pack.ok && !!tgz, out: pack.out });
  if (tgz) {
    const tarball = join(work, tgz);
    report('publint (warnings are errors)', sh(bin('publint'), ['run', tarball, '--strict'], root));
    report('attw --profile esm-only', sh(bin('attw'), [tarball, '--profile', 'esm-only', '--no-emoji', '--format', 'table-flipped'], root));
    for (const [name, compilerOptions] of [
      ['nodenext', { module: 'nodenext', moduleResolution: 'nodenext' }],
      ['bundler', { module: 'esnext', moduleResolution: 'bundler' }],
    ]) scratchProject(name, compilerOptions, tarball);
    denoProject(tarball);
  }
  freshClonePack();
}

/** `npm pack` in a fresh clone (no dist/): prepack builds, so the tarball holds the library, its types,
 *  the CLI and its bin. The clone borrows this checkout's node_modules (the same lockfile). */
function freshClonePack() {
  const clone = join(work, 'clone');
  const git = sh('git', ['clone', '--quiet', '--no-hardlinks', root, clone], work);
  if (!git.ok) { report('fresh clone: git clone', git); return; }
  symlinkSync(join(root, 'node_modules'), join(clone, 'node_modules'), 'dir');
  const dest = join(work, 'clone-pack');
  mkdirSync(dest, { recursive: true });
  const r = spawnSync('npm', ['pack', '--pack-destination', dest, '--json', '--foreground-scripts=false'], { cwd: clone, encoding: 'utf8', env: { ...process.env, NO_COLOR: '1' } });
  const pack = { ok: r.status === 0, out: `${r.stdout ?? ''}${r.stderr ?? ''}` };
  let files = [];
  // stdout: the prepack script's lines, then the JSON list.
  try { files = JSON.parse(r.stdout.slice(r.stdout.search(/^\[/m))).flatMap((p) => p.files.map((f) => f.path)); } catch { /* reported below */ }
  const need = ['dist/webinfer.js', 'dist/serve.js', 'dist/types/index.d.ts', 'bin/webinfer.mjs', 'README.md'];
  const missing = need.filter((f) => !files.includes(f));
  report(`fresh clone: npm pack builds first, and the tarball holds ${need.join(', ')}`,
    { ok: pack.ok && missing.length === 0, out: `${missing.length ? `missing: ${missing.join(', ')}\n` : ''}${pack.out.slice(-2000)}` });
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);

/** Deno's own resolution: the tarball installed into node_modules, a program importing 'webinfer' that
 *  `deno check` type-checks and `deno run` runs on navigator.gpu (Debian's lavapipe, as the deno suite). */
function denoProject(tarball) {
  const dir = join(work, 'scratch-deno');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'scratch-deno', private: true, type: 'module' }, null, 2));
  writeFileSync(join(dir, 'deno.json'), JSON.stringify({ nodeModulesDir: 'manual', lock: false }, null, 2));
  writeFileSync(join(dir, 'main.ts'), PROGRAM.replace(/^import \{ create, globals \} from 'webgpu';\n/, '')
    .replace("Object.assign(globalThis, globals);\n", '').replace('createEngine({ gpu: create([]) })', 'createEngine()'));
  const install = sh('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error', tarball], dir);
  report('deno: npm install of the tarball', install);
  if (!install.ok) return;
  const deno = bin('deno');
  const env = { DENO_NO_UPDATE_CHECK: '1', DENO_DIR: join(work, 'deno-dir') };
  const check = sh(deno, ['check', 'main.ts'], dir, env);
  report('deno: deno check', check);
  if (!check.ok) return;
  report('deno: deno run', sh(deno, ['run', '--allow-env', '--allow-read', 'main.ts'], dir, { ...env, VK_ICD_FILENAMES: LAVAPIPE22 }));
}

/** A fresh project that installs the tarball, type-checks a program under `compilerOptions` and runs it. */
function scratchProject(name, compilerOptions, tarball) {
  const dir = join(work, `scratch-${name}`);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: `scratch-${name}`, private: true, type: 'module' }, null, 2));
  writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({
    compilerOptions: { target: 'es2022', lib: ['es2022', 'dom'], strict: true, outDir: 'out', skipLibCheck: false, ...compilerOptions },
    include: ['main.ts'],
  }, null, 2));
  writeFileSync(join(dir, 'main.ts'), PROGRAM);
  // The tarball's own dependencies come from npm's cache when they are there (npm ci filled it).
  const install = sh('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error', tarball], dir);
  report(`${name}: npm install of the tarball`, install);
  if (!install.ok) return;
  // The program runs on dawn.node, the Node WebGPU the project itself tests with (not a dependency of
  // the package: users bring their own).
  symlinkSync(join(root, 'node_modules/webgpu'), join(dir, 'node_modules/webgpu'), 'dir');
  const tsc = sh(bin('tsc'), ['-p', 'tsconfig.json'], dir);
  report(`${name}: tsc (module ${compilerOptions.module}, moduleResolution ${compilerOptions.moduleResolution}), strict, skipLibCheck off`, tsc);
  if (!tsc.ok) return;
  const icd = [LAVAPIPE25, SWIFTSHADER].find(existsSync);
  report(`${name}: node runs the compiled program`, sh(process.execPath, ['out/main.js'], dir, icd ? { VK_ICD_FILENAMES: icd } : {}));
  if (name !== 'nodenext') return;
  // The README's example as a user copies it into their project: HF's greedy tokens of the golden.
  mkdirSync(join(dir, 'examples'), { recursive: true });
  for (const f of ['hf-folder.mjs', '_engine.mjs']) copyFileSync(join(root, 'examples', f), join(dir, 'examples', f));
  const golden = join(root, '../shared/goldens/llama-gqa');
  if (!existsSync(golden)) { report(`${name}: examples/hf-folder.mjs on the llama-gqa golden`, { ok: false, out: `${golden} is missing (the shared folder beside the checkout)` }); return; }
  const g = JSON.parse(readFileSync(join(golden, 'golden.json'), 'utf8'));
  const ex = sh(process.execPath, ['examples/hf-folder.mjs', golden, g.prompts[0].join(',')], dir, icd ? { VK_ICD_FILENAMES: icd } : {});
  const want = `prompt ${JSON.stringify(g.prompts[0])} -> ${JSON.stringify(g.greedy[0].slice(0, 8))}`;
  report(`${name}: examples/hf-folder.mjs from the installed package gives HF's greedy tokens of the llama-gqa golden`,
    { ok: ex.ok && ex.out.includes(want), out: `${ex.out}\nexpected a line: ${want}` });
}
