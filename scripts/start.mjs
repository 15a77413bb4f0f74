#!/usr/bin/env node
// `npm start`: the default workload on the default adapter. Each available operation is checked
// against the float64 reference, then timed; a table is printed. Exits 1 if any check fails.
// Adapter: the system's Vulkan driver (a GPU where there is one), or the one VK_ICD_FILENAMES names.
// Where the system offers none that Dawn accepts, the software drivers that .ci/install.sh provides
// are used (Mesa 25 lavapipe, else SwiftShader).
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

// The Vulkan loader reads VK_ICD_FILENAMES once, when dawn.node starts: to fall back to a software
// driver, run this script again in a child with the variable set.
function rerunWithSoftwareAdapter(reason) {
  const soft = [join(root, '.cache/lavapipe25/lvp_icd.json'), '/usr/lib/chromium/vk_swiftshader_icd.json'].find(existsSync);
  if (process.env.VK_ICD_FILENAMES || process.env.VK_DRIVER_FILES || !soft) return false;
  console.log(`${reason}; falling back to the software adapter ${soft}`);
  const r = spawnSync(process.execPath, process.argv.slice(1), { stdio: 'inherit', env: { ...process.env, VK_ICD_FILENAMES: soft } });
  process.exit(r.status ?? 1);
}

const { create, globals } = await import('webgpu');
Object.assign(globalThis, globals);
const { createEngine } = await import('webinfer');
const { runDefaultWorkload, runModelWorkload, formatTable } = await import(join(root, '.cache/bundles/workload.js'));

let engine;
try {
  engine = await createEngine({ gpu: create([]), powerPreference: 'high-performance' });
} catch (e) {
  if (!rerunWithSoftwareAdapter(`no adapter from the system's Vulkan drivers (${e.message})`)) throw e;
}
const f = engine.features;
const a = engine.adapter;
console.log(`adapter: ${[a.vendor, a.architecture, a.description].filter(Boolean).join(' / ') || 'unknown'}`);
console.log(`features: shader-f16 ${f.f16 ? 'yes' : 'no'}, subgroups ${f.subgroups ? `yes (size ${f.subgroupSize ?? `${f.subgroupMinSize}-${f.subgroupMaxSize}`})` : 'no'}, timestamp-query ${f.timestampQuery ? 'yes' : 'no'}`);
console.log(`limits: workgroup storage ${engine.limits.maxComputeWorkgroupStorageSize} B, storage binding ${(engine.limits.maxStorageBufferBindingSize / 2 ** 20).toFixed(0)} MiB`);
const t0 = Date.now();
const rows = await runDefaultWorkload(engine, (row, i, n) => {
  process.stdout.write(`[${i + 1}/${n}] ${row.op} ${row.backend} ${row.dtype} ${row.shape}: ${row.error ? 'error' : row.pass ? 'pass' : 'FAIL'}\n`);
});
console.log(`\n${formatTable(rows)}\n`);
const bad = rows.filter((r) => !r.pass);
console.log(`${rows.length - bad.length} of ${rows.length} checks passed in ${((Date.now() - t0) / 1000).toFixed(1)} s (times: wall clock around a drained queue, median of 5)`);

// A model: a small Llama-shaped one serves a batch of prompts, with bf16 random weights made on the GPU,
// then quantized on load (q4) from random f32 weights.
let modelFailed = false;
for (const dtype of ['bf16', 'q4']) {
  console.log(`\ngenerating with a small Llama-shaped model (${dtype === 'bf16' ? 'bf16 random weights made on the GPU' : 'random weights quantized on load to 4 bits'})...`);
  try {
    const m = await runModelWorkload(engine, { dtype });
    console.log(`model: ${m.config}`);
    console.log(`${m.prompts} prompts (${m.promptTokens} tokens) served together: ${m.generated} new tokens in ${m.seconds.toFixed(2)} s = `
      + `${m.tokensPerSecond.toFixed(0)} tokens/s; ${m.steps} steps of ${m.stepMs.toFixed(2)} ms on average, the host ${(100 * m.hostShare).toFixed(0)}% of a step`);
  } catch (e) {
    modelFailed = true;
    console.log(`model (${dtype}): FAILED: ${e.message}`);
  }
}
engine.destroy();
process.exit(bad.length || modelFailed ? 1 : 0);
