// The GPU test pass: the shared cases (tests/cases) run on the GPU machine through dawn.node, made
// with the toggles the benchmark uses (f16 and, with allow_unsafe_apis, subgroup matrices), so the
// kernels no CPU adapter runs here (the subgroup-matrix tile) are checked where they run. Bundled with
// the benchmark (`npm run build:bench` → .cache/device/gputest.mjs); on the GPU machine:
//   node .cache/device/gputest.mjs --filter="subgroup-matrix|sdpa flash" --out=/tmp/res --device="NVIDIA H200"
// It prints each case's result and writes gpu-tests-<device>.md (results, notes, adapter) to --out.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createEngine, type Engine } from '../../src/index';
import { allCases } from '../cases/index';

const args = new Map(process.argv.slice(2).map((a) => {
  const i = a.indexOf('=');
  return (i < 0 ? [a.replace(/^--/, ''), 'true'] : [a.slice(0, i).replace(/^--/, ''), a.slice(i + 1)]) as [string, string];
}));
const filter = new RegExp(args.get('filter') ?? '.');
const outDir = args.get('out') ?? 'bench/results';
const toggles = ['enable-dawn-features=allow_unsafe_apis,vulkan_enable_f16_on_nvidia', 'disable-dawn-features=timestamp_quantization'];

const webgpu = await import('webgpu');
Object.assign(globalThis, webgpu.globals);
const gpu = webgpu.create(toggles);
const make = (opts: object = {}): Promise<Engine> => createEngine({ gpu, powerPreference: 'high-performance', poisonOutputs: true, ...opts });
const engine = await make();
const a = engine.adapter;
const device = args.get('device') ?? ([a.description, a.vendor, a.architecture].filter(Boolean).join(' / ') || 'unknown adapter');
const f = engine.features;
const header = [
  `device: ${device} (dawn.node; toggles ${toggles.join(' ')})`,
  `features: f16 ${f.f16}, subgroups ${f.subgroups} (${f.subgroupMinSize}-${f.subgroupMaxSize}), subgroup matrices: ${f.subgroupMatrix.map((c) => `${c.componentType}→${c.resultComponentType} ${c.M}×${c.N}×${c.K}`).join(', ') || 'none'}`,
];
for (const line of header) console.log(line);

const cases = allCases.filter((c) => filter.test(c.name));
const rows: string[] = [];
const notes = new Set<string>();
let passed = 0, failed = 0;
const t0 = Date.now();
for (const c of cases) {
  const t = Date.now();
  let error: string | null = null;
  try {
    await c.run({
      engine, runtime: 'node-gpu', note: (m) => notes.add(m),
      newEngine: (opts) => make(opts ?? {}),
      fixture: async (path) => new Uint8Array(readFileSync(new URL(`../shared/${path}`, `file://${process.cwd()}/`))),
    });
  } catch (e) {
    error = (e as Error).message ?? String(e);
  }
  const s = ((Date.now() - t) / 1000).toFixed(1);
  if (error) failed++; else passed++;
  console.log(`${error ? 'FAIL' : 'ok  '} ${c.name} (${s} s)${error ? `\n     ${error}` : ''}`);
  rows.push(`| ${error ? '**failed**' : 'passed'} | ${c.name.replace(/\|/g, '\\|')} | ${s} |${error ? ` ${error.replace(/\|/g, '\\|').replace(/\n/g, ' ')}` : ''}`);
}
const summary = `${passed} passed, ${failed} failed (${((Date.now() - t0) / 1000).toFixed(0)} s)`;
console.log(summary);
for (const n of notes) console.log(`note: ${n}`);

const slug = device.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-|-$/g, '');
mkdirSync(outDir, { recursive: true });
writeFileSync(`${outDir}/gpu-tests-${slug}.md`, [
  `# GPU test pass: ${device}`, '',
  `Ran ${new Date().toISOString().slice(0, 10)} with \`node .cache/device/gputest.mjs --filter="${filter.source}"\` (tests/device/run.ts: the shared cases of tests/cases, every output buffer poisoned, float64 references).`, '',
  ...header.map((h) => `- ${h}`), '',
  `**${summary}**`, '',
  '| result | case | s | error |', '|---|---|---|---|', ...rows, '',
  ...(notes.size ? ['Notes the cases made:', '', ...[...notes].map((n) => `- ${n}`), ''] : []),
].join('\n'));
engine.destroy();
process.exit(failed ? 1 : 0);
