// Probe WebGPU through Deno (wgpu).
//   VK_ICD_FILENAMES=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json \
//     node_modules/@deno/linux-x64-glibc/deno run --unstable-webgpu scripts/probe-webgpu-deno.js
// Prints adapter info, features and limits, runs a +1 compute kernel and verifies the readback.
// Exit code 0 on success.
async function main() {
  if (!navigator.gpu) throw new Error('navigator.gpu missing (run with --unstable-webgpu?)');
  const adapter = await navigator.gpu.requestAdapter();
  if (!adapter) throw new Error('requestAdapter() returned null');
  const info = adapter.info ?? (await adapter.requestAdapterInfo?.()) ?? {};
  console.log(`VK_ICD_FILENAMES=${Deno.env.get('VK_ICD_FILENAMES') ?? ''}`);
  console.log(`adapter: vendor=${info.vendor} architecture=${info.architecture} device=${info.device} description=${info.description}`);
  console.log(`subgroupMinSize=${info.subgroupMinSize} subgroupMaxSize=${info.subgroupMaxSize} isFallbackAdapter=${info.isFallbackAdapter ?? adapter.isFallbackAdapter}`);
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

  if (device.features.has('shader-f16')) {
    device.pushErrorScope('validation');
    device.createShaderModule({ code: 'enable f16; @compute @workgroup_size(1) fn main() { var h: f16 = 1.5h; _ = h; }' });
    const err = await device.popErrorScope();
    console.log(`f16 shader: ${err ? 'REJECTED ' + err.message : 'compiles'}`);
  }
  device.pushErrorScope('validation');
  device.createShaderModule({ code: 'enable subgroups; @compute @workgroup_size(64) fn main(@builtin(subgroup_size) s: u32) { _ = s; }' });
  const serr = await device.popErrorScope();
  console.log(`'enable subgroups;' shader: ${serr ? 'rejected' : 'compiles'}`);

  device.destroy();
  return bad === 0 ? 0 : 1;
}

main().then((code) => Deno.exit(code), (e) => {
  console.error('probe failed:', e?.stack ?? e);
  Deno.exit(1);
});
