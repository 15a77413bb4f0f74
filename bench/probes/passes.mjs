// Per-pass GPU time of paged decode (Llama-3-8B attention, f16 cache, block 16): which pass holds a
// call's time (decode kernel, LSE merge). Runs in Deno (navigator.gpu) or Node (the `webgpu` package)
// against the built dist/webinfer.js:
//   deno run -A bench/probes/passes.mjs [portable|auto] [batch:context,...] [shuffle] [span] [rot]
// (shuffle: block tables shuffled; span: each call's passes timed as they run, not a pass a dispatch;
// rot: as the benchmark times, three calls a sample over three disjoint block sets.)
//   node bench/probes/passes.mjs ...
const isDeno = typeof Deno !== 'undefined';
const argv = isDeno ? Deno.args : process.argv.slice(2);
const { createEngine } = await import(new URL('../../dist/webinfer.js', import.meta.url).href);
let opts = {};
if (!isDeno) {
  const { create, globals } = await import('webgpu');
  Object.assign(globalThis, globals);
  opts = { gpu: create(['enable-dawn-features=allow_unsafe_apis,vulkan_enable_f16_on_nvidia', 'disable-dawn-features=timestamp_quantization']) };
}
const engine = await createEngine(opts);
const variant = argv[0] ?? 'portable';
if (variant !== 'auto') engine.tuning.pagedDecodeVariant = variant;
const shapes = (argv[1] ?? '1:1024,1:4096,1:32768,16:4096').split(',').map((s) => s.split(':').map(Number));
const shuffle = argv.includes('shuffle'), span = argv.includes('span'), rot = argv.includes('rot');
const sets = rot ? 3 : 1;
let seed = 1;
const rand = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32);
const [Hq, Hkv, D, bs] = [32, 8, 128, 16];
const f32 = new Float32Array(1), u32 = new Uint32Array(f32.buffer);
/** f16 bits of x (round toward zero; |x| < 65504 and not subnormal for N(0, 1) draws but a few). */
function f16bits(x) {
  f32[0] = x;
  const b = u32[0], sign = (b >>> 16) & 0x8000, e = ((b >>> 23) & 0xff) - 127 + 15;
  if (e <= 0) return sign;
  return sign | (Math.min(e, 30) << 10) | ((b >>> 13) & 0x3ff);
}
for (const [B, ctx] of shapes) {
  const per = ctx / bs, nb = B * per * sets;
  const cache = engine.createPagedKVCache({ numBlocks: nb, blockSize: bs, numKvHeads: Hkv, headSize: D, dtype: 'f16' });
  // The cache holds random f16 values (N(0, 1), as the benchmark's): a cache of zeros reads faster on
  // NVIDIA (compressed memory), which would flatter the kernels.
  for (const part of cache.parts) {
    for (const buf of [part.key.buffer, part.value.buffer]) {
      const chunk = 1 << 22;
      const words = new Uint16Array(chunk);
      for (let i = 0; i < chunk; i++) {
        const x = Math.sqrt(-2 * Math.log(rand() + 1e-12)) * Math.cos(2 * Math.PI * rand());
        words[i] = f16bits(x);
      }
      for (let o = 0; o < buf.size; o += 2 * chunk) engine.device.queue.writeBuffer(buf, o, words, 0, Math.min(chunk, (buf.size - o) / 2));
    }
  }
  await engine.sync();
  const q = engine.tensor(new Float32Array(B * Hq * D).map(() => Math.random() - 0.5), [B, Hq, D], 'f16');
  const order = Array.from({ length: nb }, (_, i) => i).sort(() => (shuffle ? rand() - 0.5 : 0));
  const metas = Array.from({ length: sets }, (_, k) => ({
    queryStartLoc: Int32Array.from({ length: B + 1 }, (_, i) => i), seqLens: new Int32Array(B).fill(ctx),
    blockTable: Int32Array.from(order.slice(k * B * per, (k + 1) * B * per)), maxBlocksPerSeq: per,
  }));
  const sums = {};
  const reps = 20;
  for (let r = 0; r < reps + 3; r++) {
    engine.beginTiming(2048, { span });
    for (let k = 0; k < sets; k++) engine.pagedAttention(q, cache, metas[k]).destroy();
    await engine.endTiming();
    await engine.sync();
    if (r >= 3) for (const [k, v] of Object.entries(engine.lastTiming)) sums[k] = (sums[k] ?? 0) + v / reps / sets;
  }
  console.log(`${isDeno ? 'deno' : 'node'} ${variant}${shuffle ? ' shuffled' : ''}${span ? ' span' : ''}${rot ? ' rot' : ''} batch ${B} context ${ctx}: ${Object.entries(sums).map(([k, v]) => `${k} ${v.toFixed(4)} ms`).join(', ')}`);
  cache.destroy();
  q.destroy();
}
engine.destroy();
