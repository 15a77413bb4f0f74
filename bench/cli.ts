// `npm run bench`: the benchmark CLI (Node, through the `webgpu` package). Measures the ceilings
// through WebGPU, runs the suites with progress, prints a table and writes JSON and Markdown results
// and SVG plots, named after the device.
//   --suite=sdpa,paged,mla which suites (comma-separated; default: all)
//   --heads=16,128 --mla-batches=1,8,32 --mla-context=4096   the MLA decode grid
//   --batches=1,16,64 --contexts=1024,4096,32768   the paged decode grid
//   --lengths=1024,2048   sequence lengths of the SDPA suite (default 1024,2048,4096,8192)
//   --quick               small sizes, for software adapters
//   --out=DIR             where results go (default bench/results)
//   --device=NAME         the GPU's name for the results (WebGPU does not report the model)
//   --explore[=L]         also time flash under every variant and storage budget at length L
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { create, globals } from 'webgpu';
import { createEngine } from 'webinfer';
import { measureCeilings } from './harness';
import { benchSdpaShape, mpsSdpaShapes, type SdpaBenchRow } from './sdpa';
import { benchPagedDecode, llamaDecodeShapes, type PagedBenchRow } from './paged';
import { benchMlaDecode, deepseekDecodeShapes, type MlaBenchRow } from './mla';
import { plotResults, type ResultsFile } from './plot';
import { planFlash } from '../src/kernels/sdpa_flash';

Object.assign(globalThis, globals);

const args = new Map(process.argv.slice(2).map((a) => {
  const [k, v] = a.replace(/^--/, '').split('=');
  return [k, v ?? 'true'] as [string, string];
}));
const quick = args.has('quick');
const outDir = args.get('out') ?? 'bench/results';
const suites = (args.get('suite') ?? 'sdpa,paged,mla').split(',');
const lengths = (args.get('lengths') ?? (quick ? '128,256' : '1024,2048,4096,8192')).split(',').map(Number);

// Dawn rounds timestamps to 100 µs unless told otherwise; these are our own measurements.
const gpu = create(['disable-dawn-features=timestamp_quantization']);
const engine = await createEngine({ gpu, powerPreference: 'high-performance' });
const a = engine.adapter;
// WebGPU does not name the GPU model (adapter info gives vendor, architecture and a driver string);
// --device="NVIDIA H200" names it for the results.
const deviceName = args.get('device') ?? ([a.description, a.vendor, a.architecture].filter(Boolean).join(' / ') || 'unknown adapter');
const slug = (args.get('device') ?? (a.description || `${a.vendor}-${a.architecture}`)).toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-|-$/g, '') || 'unknown';
console.log(`device: ${deviceName}`);
console.log(`features: f16 ${engine.features.f16}, subgroups ${engine.features.subgroups} (${engine.features.subgroupMinSize ?? '?'}-${engine.features.subgroupMaxSize ?? '?'}), timestamps ${engine.features.timestampQuery}`);
console.log(`limits: workgroup storage ${engine.limits.maxComputeWorkgroupStorageSize} B`);

const t0 = Date.now();
const ceilings = await measureCeilings(engine, quick ? 1 / 64 : 1);
console.log(`ceilings (WebGPU): f32 FMA ${ceilings.fmaTflops.toFixed(2)} TFLOP/s, copy ${ceilings.copyGBs.toFixed(0)} GB/s (read+write), read ${ceilings.readGBs.toFixed(0)} GB/s`);

const fmt = (x: number, d = 2) => (Number.isFinite(x) ? x.toFixed(d) : '-');
const result: Record<string, unknown> = {
  device: deviceName, adapter: a, features: engine.features, limits: engine.limits,
  date: new Date().toISOString(), runtime: `node ${process.version} + webgpu (dawn.node)`, ceilings,
};

if (suites.includes('sdpa')) {
  const shapes = mpsSdpaShapes(lengths);
  const rows: SdpaBenchRow[] = [];
  for (const [i, s] of shapes.entries()) {
    const r = await benchSdpaShape(engine, s, ['flash', 'naive'], ceilings, { samples: quick ? 3 : 7 });
    rows.push(...r);
    const [f, n] = r;
    console.log(`[${i + 1}/${shapes.length}] ${s.dtype} L${s.Lq}${s.causal ? ' causal' : ''}: flash ${fmt(f.timing?.medianMs ?? NaN, 3)} ms `
      + `(${fmt(f.tflops)} TFLOP/s, ${fmt(f.pctFma, 1)}% FMA, check ${f.pass ? 'pass' : `FAIL ${f.error ?? fmt(f.worst)}`}), `
      + `naive ${fmt(n.timing?.medianMs ?? NaN, 3)} ms (check ${n.pass ? 'pass' : `FAIL ${n.error ?? fmt(n.worst)}`}), `
      + `speedup ${fmt((n.timing?.medianMs ?? NaN) / (f.timing?.medianMs ?? NaN), 1)}x`);
  }
  result.sdpa = rows.map((r) => ({
    ...r.shape, backend: r.backend, pass: r.pass, worst: r.worst, error: r.error,
    medianMs: r.timing?.medianMs, minMs: r.timing?.minMs, method: r.timing?.method, tflops: r.tflops, gbs: r.gbs, pctFma: r.pctFma,
  }));
  const lines = [
    `# Dense SDPA: flash vs naive on ${deviceName}`, '',
    `Measured ${new Date().toISOString().slice(0, 10)} with \`npm run bench -- --suite=sdpa\` (${result.runtime}). Ceilings measured through WebGPU in the same run: `
    + `f32 FMA ${fmt(ceilings.fmaTflops)} TFLOP/s, copy ${fmt(ceilings.copyGBs, 0)} GB/s, read ${fmt(ceilings.readGBs, 0)} GB/s. `
    + `Times are medians of GPU timestamps per call, inputs rotated over 3 sets; every case was checked against the float64 reference first.`, '',
    '| dtype | causal | L | flash ms | flash TFLOP/s | % of FMA ceiling | naive ms | speedup | checks |',
    '|---|---|---|---|---|---|---|---|---|',
  ];
  for (let i = 0; i < rows.length; i += 2) {
    const f = rows[i], n = rows[i + 1];
    lines.push(`| ${f.shape.dtype} | ${f.shape.causal ? 'yes' : 'no'} | ${f.shape.Lq} | ${fmt(f.timing?.medianMs ?? NaN, 3)} | ${fmt(f.tflops)} | ${fmt(f.pctFma, 1)} | `
      + `${fmt(n.timing?.medianMs ?? NaN, 3)} | ${fmt((n.timing?.medianMs ?? NaN) / (f.timing?.medianMs ?? NaN), 1)}x | ${f.pass && n.pass ? 'pass' : 'FAIL'} |`);
  }
  mkdirSync(outDir, { recursive: true });
  writeFileSync(join(outDir, `sdpa-${slug}.md`), `${lines.join('\n')}\n`);
  console.log(`\n${lines.slice(4).join('\n')}`);
}

if (suites.includes('paged')) {
  const batches = (args.get('batches') ?? (quick ? '1,4' : '1,16,64')).split(',').map(Number);
  const contexts = (args.get('contexts') ?? (quick ? '256,1024' : '1024,4096,32768')).split(',').map(Number);
  const shapes = llamaDecodeShapes(batches, contexts);
  const rows: PagedBenchRow[] = [];
  for (const [i, sh] of shapes.entries()) {
    const r = await benchPagedDecode(engine, sh, ceilings, quick ? 3 : 7);
    rows.push(r);
    console.log(`[${i + 1}/${shapes.length}] decode batch ${sh.batch} context ${sh.context}: ${r.error ?? `${fmt(r.timing?.medianMs ?? NaN, 3)} ms, `
      + `${fmt(r.gbs, 0)} GB/s of KV (${fmt(r.pctCopy, 1)}% of copy), check ${r.pass ? 'pass' : `FAIL ${fmt(r.worst)}`}`}`);
  }
  result.paged = rows.map((r) => ({ ...r.shape, kvBytes: r.kvBytes, pass: r.pass, worst: r.worst, error: r.error,
    medianMs: r.timing?.medianMs, method: r.timing?.method, gbs: r.gbs, pctCopy: r.pctCopy }));
  const lines = [
    `# Paged decode (Llama-3-8B attention: Hq 32, Hkv 8, D 128, f16 cache, block 16) on ${deviceName}`, '',
    `Measured ${new Date().toISOString().slice(0, 10)} with \`npm run bench -- --suite=paged\` (${result.runtime}). Copy bandwidth measured through WebGPU in the same run: `
    + `${fmt(ceilings.copyGBs, 0)} GB/s (read ${fmt(ceilings.readGBs, 0)} GB/s). KV bytes = batch · context · Hkv · (D + Dv) · 2 B, read once. `
    + 'Median of GPU timestamps per call; small caches rotate over three block sets; sequence 0 checked against the float64 reference first.', '',
    '| batch | context | KV MB | ms | GB/s of KV | % of copy | check |',
    '|---|---|---|---|---|---|---|',
    ...rows.map((r) => `| ${r.shape.batch} | ${r.shape.context} | ${fmt(r.kvBytes / 1e6, 1)} | ${r.error ? r.error : `${fmt(r.timing?.medianMs ?? NaN, 3)} | ${fmt(r.gbs, 0)} | ${fmt(r.pctCopy, 1)} | ${r.pass ? 'pass' : 'FAIL'}`} |`),
  ];
  mkdirSync(outDir, { recursive: true });
  writeFileSync(join(outDir, `paged-${slug}.md`), `${lines.join('\n')}\n`);
  console.log(`\n${lines.slice(4).join('\n')}`);
}

if (suites.includes('mla')) {
  const heads = (args.get('heads') ?? (quick ? '4' : '16,128')).split(',').map(Number);
  const batches = (args.get('mla-batches') ?? (quick ? '1,2' : '1,8,32')).split(',').map(Number);
  const context = Number(args.get('mla-context') ?? (quick ? 128 : 4096));
  const shapes = deepseekDecodeShapes(heads, batches, context).map((s) => (quick ? { ...s, L: 128, P: 16, R: 16, V: 16, bs: 16 } : s));
  const rows: MlaBenchRow[] = [];
  for (const [i, sh] of shapes.entries()) {
    const r = await benchMlaDecode(engine, sh, ceilings, quick ? 3 : 5);
    rows.push(r);
    console.log(`[${i + 1}/${shapes.length}] MLA decode N${sh.N} batch ${sh.batch} context ${sh.context}: ${r.error ?? `absorbed ${fmt(r.absorbed?.medianMs ?? NaN, 3)} ms `
      + `(${fmt(r.tflops)} TFLOP/s, ${fmt(r.gbs, 0)} GB/s, ${fmt(r.pctRoofline, 1)}% of roofline), unabsorbed ${fmt(r.unabsorbed?.medianMs ?? NaN, 3)} ms, check ${r.pass ? 'pass' : `FAIL ${fmt(r.worst)}`}`}`
      + ` [${Object.entries(r.passes ?? {}).map(([k, v]) => `${k} ${fmt(v, 3)}`).join(', ')}]`);
  }
  result.mla = rows.map((r) => ({ ...r.shape, flops: r.flops, bytes: r.bytes, pass: r.pass, worst: r.worst, error: r.error,
    absorbedMs: r.absorbed?.medianMs, unabsorbedMs: r.unabsorbed?.medianMs, passes: r.passes, tflops: r.tflops, gbs: r.gbs, pctRoofline: r.pctRoofline }));
  const lines = [
    `# MLA decode (L 512, P 128, R 64, V 128, f16 latent cache, block 64) on ${deviceName}`, '',
    `Measured ${new Date().toISOString().slice(0, 10)} with \`npm run bench -- --suite=mla\` (${result.runtime}). Ceilings measured through WebGPU in the same run: `
    + `f32 FMA ${fmt(ceilings.fmaTflops)} TFLOP/s, read ${fmt(ceilings.readGBs, 0)} GB/s. Roofline = max(FLOPs / FMA, bytes / read); FLOPs count q absorption, `
    + 'scores, P·V and the V up-projection; bytes the latent rows (f16) once per sequence and the absorbed weights (f32) once per call. '
    + 'Unabsorbed: each sequence\'s context decompressed per head (W_UK, W_UV), then attention. Sequence 0 checked against the float64 reference first.', '',
    '| N | batch | context | absorbed ms | TFLOP/s | GB/s | % of roofline | unabsorbed ms | absorbed speedup | check |',
    '|---|---|---|---|---|---|---|---|---|---|',
    ...rows.map((r) => `| ${r.shape.N} | ${r.shape.batch} | ${r.shape.context} | ${r.error ? r.error : `${fmt(r.absorbed?.medianMs ?? NaN, 3)} | ${fmt(r.tflops)} | ${fmt(r.gbs, 0)} | `
      + `${fmt(r.pctRoofline, 1)} | ${fmt(r.unabsorbed?.medianMs ?? NaN, 3)} | ${fmt((r.unabsorbed?.medianMs ?? NaN) / (r.absorbed?.medianMs ?? NaN), 1)}x | ${r.pass ? 'pass' : 'FAIL'}`} |`),
  ];
  mkdirSync(outDir, { recursive: true });
  writeFileSync(join(outDir, `mla-${slug}.md`), `${lines.join('\n')}\n`);
  console.log(`\n${lines.slice(4).join('\n')}`);
}

if (args.has('explore-paged')) {
  // The decode kernel with each number of key rows in flight per thread (UK), on three shapes.
  const explorePaged: Record<string, unknown>[] = [];
  for (const sh of llamaDecodeShapes([1, 16, 64], [4096, 32768]).filter((x) => x.batch * x.context <= 16 * 32768)) {
    for (const [UK, WG] of (args.get('uk') ?? '1,2,4,8').split(',').map(Number).flatMap((uk) => (args.get('wg') ?? '256').split(',').map((wg) => [uk, Number(wg)]))) {
      engine.tuning.pagedDecodeUK = UK;
      engine.tuning.pagedDecodeWG = WG;
      const r = await benchPagedDecode(engine, sh, ceilings, 5);
      // The passes of the last timed sample (3 calls): decode kernel against the merge.
      const per = Object.entries(engine.lastTiming).map(([k, v]) => `${k} ${fmt(v / 3, 3)} ms`).join(', ');
      explorePaged.push({ ...sh, UK, WG, gbs: r.gbs, ms: r.timing?.medianMs, pass: r.pass, error: r.error, passes: engine.lastTiming });
      console.log(`explore-paged batch ${sh.batch} context ${sh.context} UK ${UK} WG ${WG}: ${r.error ?? `${fmt(r.timing?.medianMs ?? NaN, 3)} ms, ${fmt(r.gbs, 0)} GB/s ${r.pass ? '' : 'FAIL'} [${per}]`}`);
    }
  }
  engine.tuning.pagedDecodeUK = undefined;
  engine.tuning.pagedDecodeWG = 256;
  result.explorePaged = explorePaged;
}

if (args.has('explore')) {
  // Flash under each variant and storage budget the planner can be held to, on one shape: which plan
  // the adapter's limits should pick (notes for tuning, not part of the committed table).
  const L = Number(args.get('explore') === 'true' ? 4096 : args.get('explore'));
  const explore: Record<string, unknown>[] = [];
  for (const flashVariant of ['subgroup', 'portable'] as const) {
    for (const [flashSmemBytes, grids] of [[Infinity, [0, 1, 2, 3, 4, 5, 6]], [32768, [undefined]], [16384, [undefined]]] as const) {
      for (const flashGrid of grids) {
        Object.assign(engine.tuning, { flashVariant, flashSmemBytes, flashGrid });
        const plan = planFlash(engine.limits, engine.features, 64, 64, flashVariant, flashSmemBytes, flashGrid);
        if (!plan) continue;
        const [f] = await benchSdpaShape(engine, { B: 1, Hq: 8, Hkv: 8, Lq: L, Lk: L, D: 64, Dv: 64, dtype: 'f32' }, ['flash'], ceilings, { samples: 5 });
        explore.push({ flashVariant, flashSmemBytes, flashGrid, plan, ms: f.timing?.medianMs, tflops: f.tflops, pass: f.pass });
        console.log(`explore L${L} ${flashVariant} smem<=${flashSmemBytes} grid ${flashGrid ?? 'auto'}: ${JSON.stringify(plan)} -> ${fmt(f.timing?.medianMs ?? NaN, 3)} ms, ${fmt(f.tflops)} TFLOP/s ${f.pass ? '' : `FAIL ${f.error ?? ''}`}`);
      }
    }
  }
  Object.assign(engine.tuning, { flashVariant: 'auto', flashSmemBytes: Infinity, flashGrid: undefined });
  result.explore = explore;
}

mkdirSync(outDir, { recursive: true });
const file = join(outDir, `${slug}.json`);
writeFileSync(file, `${JSON.stringify(result, null, 1)}\n`);
for (const [name, svg] of Object.entries(plotResults(result as unknown as ResultsFile))) {
  writeFileSync(join(outDir, `${slug}-${name}`), svg);
}
console.log(`\nwrote ${file} in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
engine.destroy();
