// Benchmark plumbing shared by every suite: the ceilings measured through WebGPU in the same run, and
// timing (GPU timestamps where the adapter has them, else wall clock around a drained queue).
import type { Engine } from 'webinfer';
import { mmaConfigs } from '../src/core/runtime';

export interface Ceilings {
  /** f32 FMA rate, TFLOP/s (an FMA counts 2). */
  fmaTflops: number;
  /** Copy bandwidth, GB/s, bytes read + written. */
  copyGBs: number;
  /** Read bandwidth, GB/s. */
  readGBs: number;
  /** Subgroup-matrix rate (f16 → f32, the largest configuration), TFLOP/s, where the adapter has them. */
  mmaTflops?: number;
  /** That configuration, as M×N×K. */
  mmaConfig?: string;
}

export interface Timing {
  medianMs: number;
  minMs: number;
  samplesMs: number[];
  method: 'timestamp' | 'wall';
  /** Where the shape was timed in rounds (see timeRounds): each round's median; medianMs is then the
   *  median of every sample of every round. */
  rounds?: number[];
  /** (max − min of the per-round medians) / medianMs, in percent. */
  spreadPct?: number;
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
  /** Warm-up lasts at least this long (default WARMUP_MS; later rounds of a shape use ROUND_WARMUP_MS). */
  warmupMs?: number;
}

/** Warm-up before a shape's first timing: GPUs idle at low clocks and need a moment to rise. */
export const WARMUP_MS = 300;
/** Warm-up before each later round of a shape: short, but the clocks do not drop in a gap between contenders. */
export const ROUND_WARMUP_MS = 100;

/** The warm-up a round starts with: WARMUP_MS in the first round, ROUND_WARMUP_MS after. */
export function roundWarmupMs(round: number): number {
  return round === 0 ? WARMUP_MS : ROUND_WARMUP_MS;
}

/**
 * Several rounds of one contender's timing as one: the median and minimum over every sample of every
 * round (the headline), each round's median, and their spread ((max − min) / headline, percent).
 */
export function combineRounds<T extends { medianMs: number; minMs: number; samplesMs: number[] }>(per: readonly T[]): T & { rounds: number[]; spreadPct: number } {
  if (!per.length) throw new Error('combineRounds: no rounds');
  const all = per.flatMap((t) => t.samplesMs);
  const rounds = per.map((t) => t.medianMs);
  const medianMs = median(all);
  return { ...per[0], medianMs, minMs: Math.min(...per.map((t) => t.minMs)), samplesMs: all, rounds,
    spreadPct: (100 * (Math.max(...rounds) - Math.min(...rounds))) / medianMs };
}

/**
 * One contender of a shape timed in rounds (webinfer's kernel, another variant of it, the peer):
 * `round(r)` warms up (roundWarmupMs(r)) and takes one round of samples.
 */
export interface Contender {
  name: string;
  round(r: number): Promise<void>;
}

/**
 * Times the contenders of one shape in `rounds` rounds, alternating: round 0 of each in turn, then
 * round 1 of each, ... so a drift of the GPU's state (clocks, temperature, another device) shows in
 * every contender's spread instead of favouring whichever ran first. A contender whose round throws
 * is dropped from the later rounds and the error handed to `onError`.
 */
export async function timeRounds(contenders: readonly Contender[], rounds: number, onError: (c: Contender, e: Error) => void): Promise<void> {
  const live = new Set(contenders);
  for (let r = 0; r < rounds; r++) {
    for (const c of contenders) {
      if (!live.has(c)) continue;
      try {
        await c.round(r);
      } catch (e) {
        live.delete(c);
        onError(c, e as Error);
      }
    }
  }
}

/** A kernel's other variant, beside its row: the portable path (no subgroups) timed in the same rounds. */
export interface PortableResult {
  worst: number;
  pass: boolean;
  timing: Timing | null;
  error?: string;
}

/** The portable kernels (no subgroups), forced: flash and paged decode. */
export const PORTABLE_TUNING = { flashVariant: 'portable', pagedDecodeVariant: 'portable' } as const;

/** Runs `fn` with `engine.tuning` changed by `t`, then puts the tuning back as it was (also on errors). */
export async function withTuning<T>(engine: Engine, t: Partial<Engine['tuning']>, fn: () => Promise<T>): Promise<T> {
  const saved = { ...engine.tuning };
  Object.assign(engine.tuning, t);
  try {
    return await fn();
  } finally {
    Object.assign(engine.tuning, saved);
  }
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
  // Warm up for at least `warmup` calls and `warmupMs` (300 ms unless told): GPUs idle at low clocks and
  // need a moment to rise. Calls go in batches of `perSample` between waits, as the samples do, so a
  // short kernel keeps the GPU busy rather than idle through each wait. (The warm-up once stopped after
  // 1000 calls, which cut it below 300 ms for kernels shorter than a wait.)
  const warmupMs = opts.warmupMs ?? WARMUP_MS;
  const w0 = performance.now();
  for (let i = 0; i < warmup || performance.now() - w0 < warmupMs; i += per) {
    for (let j = 0; j < per; j++) fn(call++);
    await engine.sync();
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
/** The subgroup-matrix ceiling (shaders/bench/ceiling_mma.wgsl), where the adapter has an f16 → f32 configuration. */
async function measureMmaCeiling(engine: Engine, scale: number): Promise<{ mmaTflops?: number; mmaConfig?: string }> {
  const cfg = mmaConfigs(engine.features)[0];
  const sgw = engine.features.subgroupMaxSize;
  if (!cfg || !sgw || !engine.features.f16) return {};
  const { M, N, K } = cfg;
  const n4 = 1 << 20;
  const usage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST;
  const src = engine.device.createBuffer({ size: 4 * (M * K + K * N), usage });
  engine.device.queue.writeBuffer(src, 0, new Uint16Array(2 * (M * K + K * N)).fill(0x2c00));   // 1/16 in f16
  const dst = engine.device.createBuffer({ size: 4 * n4, usage });
  try {
    const k = engine.kernel('bench_ceiling_mma', 'mma_main', { consts: { M, N, K, SGW: sgw }, enables: ['f16', 'subgroups', 'chromium_experimental_subgroup_matrix'] });
    const groups = Math.max(64, Math.floor(8192 * scale));
    const iters = Math.max(64, Math.floor(2048 * Math.min(1, scale * 4)));
    const t = await timeOp(engine, () => engine.dispatch(k, { src, dst }, { n4, iters, seed: 0 }, groups), { samples: 7 });
    return { mmaTflops: (groups * 4 * iters * 4 * 2 * M * N * K) / (t.medianMs * 1e9), mmaConfig: `${M}×${N}×${K}` };
  } finally {
    await engine.sync();
    src.destroy();
    dst.destroy();
  }
}

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
    const mma = await measureMmaCeiling(engine, scale);
    return { fmaTflops, copyGBs: (2 * bytes) / (tc.medianMs * 1e6), readGBs: bytes / (tr.medianMs * 1e6), ...mma };
  } finally {
    await engine.sync();
    src.destroy();
    dst.destroy();
  }
}
