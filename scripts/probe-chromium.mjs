// Probe WebGPU in Debian's Chromium driven by Playwright (SwiftShader adapter).
//   node scripts/probe-chromium.mjs [http|route|about|data]
//   http (default): page served by a localhost server; route: http://localhost/ answered by page.route.
//   about:blank and data: URLs are NOT secure contexts: navigator.gpu is undefined there.
// Exit code 0 when an adapter is found and a +1 compute kernel reads back correctly.
import { chromium } from '@playwright/test';
import http from 'node:http';

export const CHROMIUM_ARGS = [
  '--no-sandbox', '--disable-background-networking', '--disable-component-update', '--disable-sync',
  '--no-first-run', '--disable-quic', '--disable-dev-shm-usage', '--enable-unsafe-webgpu',
  '--use-webgpu-adapter=swiftshader', '--use-angle=swiftshader', '--ignore-gpu-blocklist',
];

async function probeInPage() {
  if (!navigator.gpu) return { ok: false, error: `navigator.gpu missing (isSecureContext=${isSecureContext})` };
  const adapter = await navigator.gpu.requestAdapter();
  if (!adapter) return { ok: false, error: 'requestAdapter() returned null' };
  const i = adapter.info;
  const features = [...adapter.features].sort();
  const want = ['shader-f16', 'subgroups', 'timestamp-query'].filter((f) => adapter.features.has(f));
  const device = await adapter.requestDevice({
    requiredFeatures: want,
    requiredLimits: { maxComputeWorkgroupStorageSize: adapter.limits.maxComputeWorkgroupStorageSize },
  });
  const N = 1000, input = new Float32Array(N).map((_, k) => k * 0.5);
  const buf = device.createBuffer({ size: N * 4, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST });
  device.queue.writeBuffer(buf, 0, input);
  const sub = device.features.has('subgroups');
  const module = device.createShaderModule({ code: `${sub ? 'enable subgroups;' : ''}
    @group(0) @binding(0) var<storage, read_write> a: array<f32>;
    @group(0) @binding(1) var<storage, read_write> s: u32;
    @compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3u${sub ? ', @builtin(subgroup_size) sg: u32' : ''}) {
      if (g.x == 0u) { s = ${sub ? 'sg' : '0u'}; }
      if (g.x < arrayLength(&a)) { a[g.x] = a[g.x] + 1.0; }
    }` });
  const sbuf = device.createBuffer({ size: 4, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC });
  const pipeline = device.createComputePipeline({ layout: 'auto', compute: { module, entryPoint: 'main' } });
  const read = device.createBuffer({ size: N * 4 + 4, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  const enc = device.createCommandEncoder();
  const pass = enc.beginComputePass();
  pass.setPipeline(pipeline);
  pass.setBindGroup(0, device.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries: [
    { binding: 0, resource: { buffer: buf } }, { binding: 1, resource: { buffer: sbuf } }] }));
  pass.dispatchWorkgroups(Math.ceil(N / 64));
  pass.end();
  enc.copyBufferToBuffer(buf, 0, read, 0, N * 4);
  enc.copyBufferToBuffer(sbuf, 0, read, N * 4, 4);
  device.queue.submit([enc.finish()]);
  await read.mapAsync(GPUMapMode.READ);
  const out = new Float32Array(read.getMappedRange().slice(0));
  const sgSize = new Uint32Array(out.buffer)[N];
  let bad = 0;
  for (let k = 0; k < N; k++) if (out[k] !== input[k] + 1) bad++;
  device.destroy();
  return {
    ok: bad === 0, bad, isSecureContext, href: location.href,
    vendor: i.vendor, architecture: i.architecture, device: i.device, description: i.description,
    subgroupMinSize: i.subgroupMinSize, subgroupMaxSize: i.subgroupMaxSize, subgroupSizeInShader: sub ? sgSize : null,
    shaderF16: adapter.features.has('shader-f16'), subgroups: adapter.features.has('subgroups'),
    timestampQuery: adapter.features.has('timestamp-query'),
    maxComputeWorkgroupStorageSize: adapter.limits.maxComputeWorkgroupStorageSize,
    maxComputeInvocationsPerWorkgroup: adapter.limits.maxComputeInvocationsPerWorkgroup,
    features,
  };
}

const mode = process.argv[2] ?? 'http';
let server;
const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: CHROMIUM_ARGS });
let result;
try {
  const page = await browser.newPage();
  if (mode === 'about') await page.goto('about:blank');
  else if (mode === 'data') await page.goto('data:text/html,<title>probe</title>');
  else if (mode === 'route') {
    // no server: Playwright answers a made-up http://localhost URL itself (localhost is a secure context)
    await page.route('http://localhost/**', (r) => r.fulfill({ contentType: 'text/html', body: '<title>probe</title>' }));
    await page.goto('http://localhost/probe.html');
  }
  else {
    server = http.createServer((_, res) => { res.writeHead(200, { 'content-type': 'text/html' }); res.end('<title>probe</title>'); });
    await new Promise((r) => server.listen(0, '127.0.0.1', r));
    await page.goto(`http://127.0.0.1:${server.address().port}/`);
  }
  result = await page.evaluate(probeInPage);
} catch (e) {
  result = { ok: false, error: String(e?.stack ?? e) };
} finally {
  await browser.close();
  server?.close();
}
console.log(`chromium ${browser.version()} (${mode}):`, JSON.stringify(result, null, 1));
process.exit(result.ok ? 0 : 1);
