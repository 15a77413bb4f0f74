// The SwiftShader runaway, reduced (issue 32): Firefox on SwiftShader's Vulkan driver grew to 15.8 GB and
// never finished the flash case "portable: GQA ratios". The cause is one pipeline: the portable flash
// kernel with its constant-bound loops written out (src/core/unroll.ts), which the engine did for any
// wgpu implementation (Firefox, Deno). SwiftShader's shader compiler takes minutes and many GB on it,
// with or without wgpu: here it is compiled through Dawn (Node, the `webgpu` package), once with loops
// as written and once written out, each in a child process whose memory and time are watched.
//
//   VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json node bench/probes/swiftshader-unroll.mjs [limitMB] [limitSeconds]
//
// Against the built dist/webinfer.js (`npm run build`). Seen on this 2-core machine (SwiftShader of
// Chromium 156): as written (20.8 KB of WGSL) 0.9 s, 281 MB; written out (35.6 KB) past 4 GB in 50 s,
// killed (past 6 GB in 66 s with a higher limit). On Mesa 25 lavapipe both forms take 2.3 s and 290 MB.
// The engine now writes loops out only where wgpu runs over a hardware GPU (tuning.unrollLoops).
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const [limitMb = 4000, limitS = 120] = process.argv.slice(2, 4).map(Number);

if (process.env.PROBE_CHILD) {
  // One compile: the flash case's first shape (Hq 2, Lq 4, Lk 6, D 16, causal, f32) on the portable
  // tile at the suites' small-tile cap, with loops as PROBE_CHILD says.
  const { create, globals } = await import('webgpu');
  Object.assign(globalThis, globals);
  const { createEngine } = await import(new URL('../../dist/webinfer.js', import.meta.url).href);
  const engine = await createEngine({ gpu: create([]) });
  Object.assign(engine.tuning, { unrollLoops: process.env.PROBE_CHILD, flashVariant: 'portable', flashSmemBytes: 8192 });
  const q = engine.tensor(new Float32Array(2 * 4 * 16).fill(0.5), [1, 2, 4, 16]);
  const k = engine.tensor(new Float32Array(2 * 6 * 16).fill(0.5), [1, 2, 6, 16]);
  const v = engine.tensor(new Float32Array(2 * 6 * 16).fill(0.5), [1, 2, 6, 16]);
  let sourceBytes = 0;
  const make = engine.device.createShaderModule.bind(engine.device);
  engine.device.createShaderModule = (d) => { sourceBytes = Math.max(sourceBytes, d.code.length); return make(d); };
  const t0 = performance.now();
  const out = engine.sdpa(q, k, v, { causal: true, backend: 'flash' });
  await out.toFloat32();
  console.log(`compiled and ran in ${Math.round(performance.now() - t0)} ms, ${sourceBytes} bytes of WGSL`);
  engine.destroy();
  process.exit(0);
}

function rssMb(pid) {
  try { return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024; } catch { return 0; }
}

async function compileOnce(unroll) {
  const child = spawn(process.execPath, [fileURLToPath(import.meta.url)], { env: { ...process.env, PROBE_CHILD: unroll }, stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '', peak = 0, why = '';
  child.stdout.on('data', (d) => { out += d; });
  const t0 = Date.now();
  const timer = setInterval(() => {
    peak = Math.max(peak, rssMb(child.pid));
    if (peak > limitMb) why = `past ${limitMb} MB`;
    else if (Date.now() - t0 > limitS * 1000) why = `past ${limitS} s`;
    if (why) child.kill('SIGKILL');
  }, 250);
  await new Promise((r) => child.on('close', r));
  clearInterval(timer);
  const s = ((Date.now() - t0) / 1000).toFixed(1);
  console.log(`loops ${unroll === 'on' ? 'written out' : 'as written'}: ${why ? `killed ${why}` : out.trim()} (${s} s, peak ${peak.toFixed(0)} MB)`);
}

console.log(`VK_ICD_FILENAMES=${process.env.VK_ICD_FILENAMES ?? '(unset)'}`);
await compileOnce('off');
await compileOnce('on');
