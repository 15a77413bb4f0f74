// Probe WebGPU through Node + npm `webgpu` (dawn.node).
//   VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json node scripts/probe-webgpu.mjs
//   . .cache/lavapipe25/env.sh && node scripts/probe-webgpu.mjs          (Mesa 25 lavapipe)
// Prints adapter info, features and limits, runs a +1 compute kernel and verifies the readback;
// when `subgroups` is offered it also reads the subgroup_size builtin from a kernel.
// Exit code 0 on success. `--no-exit`: do not call process.exit (to test that Node exits by itself).
import { create, globals } from 'webgpu';

Object.assign(globalThis, globals);

const noExit = process.argv.includes('--no-exit');
const finish = (code) => {
  if (noExit) process.exitCode = code;
  else process.exit(code);
};

async function main() {
  let gpu = create([]);
  const adapter = await gpu.requestAdapter();
  if (!adapter) throw new Error('requestAdapter() returned null');
  const info = adapter.info ?? {};
  console.log(`VK_ICD_FILENAMES=${process.env.VK_ICD_FILENAMES ?? ''}`);
  console.log(`adapter: vendor=${info.vendor} architecture=${info.architecture} device=${info.device} description=${info.description}`);
  console.log(`subgroupMinSize=${info.subgroupMinSize} subgroupMaxSize=${info.subgroupMaxSize} isFallbackAdapter=${info.isFallbackAdapter}`);
  const want = ['shader-f16', 'subgroups', 'timestamp-query'];
  console.log('features: ' + want.map((f) => `${f}=${adapter.features.has(f) ? 'yes' : 'no'}`).join(' '));
  console.log(`all features: ${[...adapter.features].sort().join(',')}`);
  const L = adapter.limits;
  console.log(`maxComputeWorkgroupStorageSize=${L.maxComputeWorkgroupStorageSize} maxComputeInvocationsPerWorkgroup=${L.maxComputeInvocationsPerWorkgroup} maxStorageBufferBindingSize=${L.maxStorageBufferBindingSize}`);

  const requiredFeatures = want.filter((f) => adapter.features.has(f));
  const device = await adapter.requestDevice({
    requiredFeatures,
    requiredLimits: { maxComputeWorkgroupStorageSize: L.maxComputeWorkgroupStorageSize },
  });
  device.addEventListener?.('uncapturederror', (e) => console.error('uncaptured:', e.error?.message));

  // +1 kernel
  const N = 1000;
  const input = new Float32Array(N).map((_, i) => i * 0.5);
  const buf = device.createBuffer({ size: N * 4, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST });
  device.queue.writeBuffer(buf, 0, input);
  const module = device.createShaderModule({
    code: `@group(0) @binding(0) var<storage, read_write> a: array<f32>;
      @compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3u) {
        if (g.x < arrayLength(&a)) { a[g.x] = a[g.x] + 1.0; }
      }`,
  });
  const pipeline = device.createComputePipeline({ layout: 'auto', compute: { module, entryPoint: 'main' } });
  const read = device.createBuffer({ size: N * 4, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  const enc = device.createCommandEncoder();
  const pass = enc.beginComputePass();
  pass.setPipeline(pipeline);
  pass.setBindGroup(0, device.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries: [{ binding: 0, resource: { buffer: buf } }] }));
  pass.dispatchWorkgroups(Math.ceil(N / 64));
  pass.end();
  enc.copyBufferToBuffer(buf, 0, read, 0, N * 4);
  device.queue.submit([enc.finish()]);
  await read.mapAsync(GPUMapMode.READ);
  const out = new Float32Array(read.getMappedRange().slice(0));
  read.unmap();
  let bad = 0;
  for (let i = 0; i < N; i++) if (out[i] !== input[i] + 1) bad++;
  console.log(`compute +1: ${bad === 0 ? 'OK' : `FAILED (${bad} wrong)`}`);

  // subgroup size as the shader sees it
  if (device.features.has('subgroups')) {
    const sb = device.createBuffer({ size: 4, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC });
    const sr = device.createBuffer({ size: 4, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    const m = device.createShaderModule({
      code: `enable subgroups;
        @group(0) @binding(0) var<storage, read_write> o: u32;
        @compute @workgroup_size(64) fn main(@builtin(subgroup_size) s: u32, @builtin(local_invocation_index) i: u32) {
          if (i == 0u) { o = s; }
        }`,
    });
    const p = device.createComputePipeline({ layout: 'auto', compute: { module: m, entryPoint: 'main' } });
    const e = device.createCommandEncoder();
    const cp = e.beginComputePass();
    cp.setPipeline(p);
    cp.setBindGroup(0, device.createBindGroup({ layout: p.getBindGroupLayout(0), entries: [{ binding: 0, resource: { buffer: sb } }] }));
    cp.dispatchWorkgroups(1);
    cp.end();
    e.copyBufferToBuffer(sb, 0, sr, 0, 4);
    device.queue.submit([e.finish()]);
    await sr.mapAsync(GPUMapMode.READ);
    console.log(`subgroup_size builtin (in shader): ${new Uint32Array(sr.getMappedRange())[0]}`);
    sr.unmap();
  }
  if (device.features.has('shader-f16')) {
    device.pushErrorScope('validation');
    device.createShaderModule({ code: 'enable f16; @compute @workgroup_size(1) fn main() { var h: f16 = 1.5h; _ = h; }' });
    const err = await device.popErrorScope();
    console.log(`f16 shader: ${err ? 'REJECTED ' + err.message : 'compiles'}`);
  }

  device.destroy();
  gpu = null; // dawn.node keeps Node alive while the object from create() is referenced
  return bad === 0 ? 0 : 1;
}

main().then(finish, (e) => {
  console.error('probe failed:', e?.stack ?? e);
  finish(1);
});
