// Benchmark plumbing shared by every suite: the ceilings measured through WebGPU in the same run, and
// timing (GPU timestamps where the adapter has them, else wall clock around a drained queue).
import type { Engine } from 'webinfer';

export interface Ceilings {
  /** f32 FMA rate, TFLOP/s (an FMA counts 2). */
  fmaTflops: number;
  /** Copy bandwidth, GB/s, bytes read + written. */
  copyGBs: number;
  /** Read bandwidth, GB/s. */
  readGBs: number;
}

export interface Timing {
  medianMs: number;
  minMs: number;
  samplesMs: number[];
  method: 'timestamp' | 'wall';
}

export interface TimeOptions {
  warmup?: number;
  samples?: number;
  /** Calls per sample (amortizes submission overhead in wall-clock mode). */
  perSample?: number;
  /** Force wall-clock timing even where timestamps exist. */
  wall?: boolean;
  /** Time whole passes as they run untimed (a step's span) instead of each dispatch in a pass of its own. */
  span?: boolean;
}

/**
 * Fills `bytes` bytes of `target` by repeating `pattern` (copies on the GPU: a multi-gigabyte cache
 * needs no host upload). Element e of the target then holds pattern[e % pattern.length].
 */
export async function fillRepeating(engine: Engine, target: GPUBuffer, bytes: number, pattern: Uint16Array): Promise<void> {
  const src = engine.device.createBuffer({ size: pattern.byteLength, usage: GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST });
  engine.device.queue.writeBuffer(src, 0, pattern.buffer as ArrayBuffer, pattern.byteOffset, pattern.byteLength);
  const enc = engine.commandEncoder();
  for (let off = 0; off < bytes; off += pattern.byteLength) enc.copyBufferToBuffer(src, 0, target, off, Math.min(pattern.byteLength, bytes - off));
  await engine.sync();
  src.destroy();
}

export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  if (!s.length) return NaN;
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

/**
 * Times `fn` (which records GPU work; it receives the call index so inputs can rotate): warm-up
 * calls, then `samples` samples of `perSample` calls, reporting milliseconds per call.
 */
export async function timeOp(engine: Engine, fn: (i: number) => void, opts: TimeOptions = {}): Promise<Timing> {
  const warmup = opts.warmup ?? 3, samples = opts.samples ?? 10, per = opts.perSample ?? 1;
  let call = 0;
  // Warm up for at least `warmup` calls and 300 ms: GPUs idle at low clocks and need a moment to rise.
  const w0 = performance.now();
  for (let i = 0; i < warmup || performance.now() - w0 < 300; i++) {
    fn(call++);
    await engine.sync();
    if (i > 1000) break;
  }
  const useTs = engine.features.timestampQuery && !opts.wall;
  const times: number[] = [];
  for (let s = 0; s < samples; s++) {
    if (useTs) {
      engine.beginTiming(2048, { span: opts.span });
      for (let i = 0; i < per; i++) fn(call++);
      times.push((await engine.endTiming()) / per);
    } else {
      const t0 = performance.now();
      for (let i = 0; i < per; i++) fn(call++);
      await engine.sync();
      times.push((performance.now() - t0) / per);
    }
  }
  return { medianMs: median(times), minMs: Math.min(...times), samplesMs: times, method: useTs ? 'timestamp' : 'wall' };
}

/**
 * Measures the FMA rate and the copy and read bandwidth through WebGPU. Sizes adapt to the adapter:
 * `scale` 1 fills a large GPU; software adapters pass a small scale to finish in seconds.
 */
export async function measureCeilings(engine: Engine, scale = 1): Promise<Ceilings> {
  const maxBytes = Math.min(engine.limits.maxStorageBufferBindingSize, engine.limits.maxBufferSize);
  const WG = 256;
  // Bandwidth grid: a fixed number of workgroups, the buffer a whole number of 4-load rounds of it.
  const bwGroups = Math.max(64, Math.floor(8192 * Math.min(1, scale * 8)));
  const round = 16 * 4 * bwGroups * WG;
  const bytes = Math.max(round, Math.floor(Math.min(maxBytes, scale * 1024 * 1024 * 1024) / round) * round);
  const n4 = bytes / 16;
  const usage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST;
  const src = engine.device.createBuffer({ size: bytes, usage });
  const dst = engine.device.createBuffer({ size: bytes, usage });
  const fill = new Float32Array(Math.min(n4 * 4, 1 << 22)).map((_, i) => (i % 97) * 0.01);
  for (let off = 0; off < bytes; off += fill.byteLength) {
    engine.device.queue.writeBuffer(src, off, fill, 0, Math.min(fill.length, (bytes - off) / 4));
  }
  try {
    const fma = engine.kernel('bench_ceiling', 'fma_main', { overrides: { WG } });
    const copy = engine.kernel('bench_ceiling', 'copy_main', { overrides: { WG } });
    const read = engine.kernel('bench_ceiling', 'read_main', { overrides: { WG } });
    // FMA: enough threads to fill any GPU, enough rounds to dwarf launch costs.
    const fmaGroups = Math.max(64, Math.floor(4096 * scale));
    const iters = 4 * Math.max(16, Math.floor(1024 * Math.min(1, scale * 4)));   // a multiple of the kernel's 4 rounds
    const tf = await timeOp(engine, () => engine.dispatch(fma, { src, dst }, { n4, iters, seed: 0.5 }, fmaGroups), { samples: 7 });
    const fmaTflops = (fmaGroups * WG * iters * 8 * 4 * 2) / (tf.medianMs * 1e9);
    // Bandwidth: a grid-strided pass over the whole buffer, a few waves of workgroups.
    const tc = await timeOp(engine, () => engine.dispatch(copy, { src, dst }, { n4, iters: 0, seed: 0 }, bwGroups), { samples: 7 });
    const tr = await timeOp(engine, () => engine.dispatch(read, { src, dst }, { n4, iters: 0, seed: 0 }, bwGroups), { samples: 7 });
    return { fmaTflops, copyGBs: (2 * bytes) / (tc.medianMs * 1e6), readGBs: bytes / (tr.medianMs * 1e6) };
  } finally {
    await engine.sync();
    src.destroy();
    dst.destroy();
  }
}
