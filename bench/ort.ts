// The peer baseline: ONNX Runtime Web's WebGPU execution provider (onnxruntime-web 1.30.0), in the same
// Node process and on the same adapter as webinfer, on the same shapes and the same input values.
// Dense SDPA runs as com.microsoft MultiHeadAttention; paged decode twice: as com.microsoft
// GroupQueryAttention over a dense [batch, Hkv, context, D] cache, and as com.microsoft PagedAttention over a
// paged cache read through a block table (f16 only: the provider registers it for float16 alone).
// Each model is checked against the float64 reference by the caller's check, then timed with ORT's own
// profiler: GPU timestamps per kernel, summed per run, median over runs (inputs and outputs stay on the GPU).
// A case is timed in rounds (PeerCase) so the benchmark can alternate them with webinfer's; one profile,
// read at the end, gives every round's runs.
//
// What it takes to run ORT-web in Node (../shared/RUNTIMES.md): the `onnxruntime-web/webgpu` entry,
// `navigator.gpu` from dawn.node, one wasm thread, SharedArrayBuffer-backed uploads copied before
// dawn.node sees them, and a live timer while V8 compiles the wasm.
import { existsSync, readFileSync } from 'node:fs';
import { setFlagsFromString } from 'node:v8';
import { brotliDecompressSync } from 'node:zlib';
import * as ort from 'onnxruntime-web/webgpu';
import { decodeF16, encodeF16 } from 'webinfer';
import { combineRounds, median, WARMUP_MS } from './harness';
import { gqaDecodeModel, mhaModel, pagedAttentionModel } from './onnx';

/** The wasm binary the `webgpu` build loads (its JS glue is inlined in the bundle). */
export const ORT_WASM_FILE = 'ort-wasm-simd-threaded.asyncify.wasm';

/**
 * The wasm beside the running bundle: brotli-compressed (`.br`, 4.7 MB instead of 27 MB, so the bundle
 * folder stays well inside the GPU machine's carry limit) or plain. Handed to ORT as bytes: the glue
 * inlined in ORT's bundle is its browser build, which cannot read a file: URL in Node, while with
 * `wasmBinary` and one thread ORT uses that glue and fetches nothing. Undefined from the source tree
 * (ORT then finds its own files in node_modules).
 */
function wasmBesideBundle(): Uint8Array | undefined {
  const here = new URL('.', import.meta.url);
  if (here.protocol !== 'file:') return undefined;
  const br = new URL(`${ORT_WASM_FILE}.br`, here), raw = new URL(ORT_WASM_FILE, here);
  if (existsSync(br)) return new Uint8Array(brotliDecompressSync(readFileSync(br)));
  if (existsSync(raw)) return new Uint8Array(readFileSync(raw));
  return undefined;
}
export const ORT_VERSION = '1.30.0';

export interface PeerTiming {
  medianMs: number;
  minMs: number;
  /** Per-run milliseconds of the timed runs. */
  samplesMs: number[];
  /** 'profile': ORT's per-kernel GPU timestamps summed per run; 'wall': wall clock around a drained queue. */
  method: 'profile' | 'wall';
  /** ORT's programs in one run (what the time covers). */
  kernels: string[];
  /** Each round's median, where the case was timed in rounds (medianMs then covers every round). */
  rounds?: number[];
  /** Where the case names kernels to leave out of a second figure (PagedAttention's cache write, which
   *  webinfer's timed decode does not do): the median per-run ms of the other kernels, over every round. */
  restMs?: number;
  /** The kernels restMs leaves out. */
  omitted?: string[];
  /** (max − min of the per-round medians) / medianMs, in percent. */
  spreadPct?: number;
}

/**
 * A peer case set up, run once and checked, then timed round by round beside webinfer (each `round`
 * warms up for `warmupMs`, then takes the case's samples), and `finish`ed: the per-run GPU times of
 * every round come from one profile read at the end; the session is released.
 */
export interface PeerCase<R extends PeerResult = PeerResult> {
  /** The result so far: storage type, check, and an error where setup, the check or a round failed. */
  readonly result: R;
  /** Set up and checked without error: rounds may be timed. */
  readonly ready: boolean;
  round(warmupMs: number): Promise<void>;
  finish(): Promise<R>;
}

export interface PeerResult {
  /** Storage type the peer ran in (f16 falls back to f32 where the adapter has no shader-f16). */
  dtype: 'f32' | 'f16';
  worst: number;
  pass: boolean;
  timing: PeerTiming | null;
  error?: string;
}

/**
 * How long a drain of the peer's queue may take before the peer is given up. Generous: lavapipe compiles
 * ORT's larger kernels on first use for minutes when Mesa's shader cache is cold.
 */
const DRAIN_TIMEOUT_MS = 300_000;

export type Check = (got: Float32Array) => { worst: number; pass: boolean };
/** gqaDecode's check: sequence 0's output and where each (head, position, column) of its cache lies. */
export type GqaCheck = (got: Float32Array, kvIndex: (h: number, pos: number, d: number) => number) => { worst: number; pass: boolean };
type MhaShape = { B: number; Hq: number; Hkv: number; Lq: number; Lk: number; D: number; Dv: number; dtype: string; causal?: boolean };
type GqaShape = { batch: number; context: number; Hq: number; Hkv: number; D: number };
type PagedShape = GqaShape & { bs: number };
/** PagedAttention's cache write: the new token's key and value scattered into the paged cache. */
const PAGED_SCATTER = /^ScatterKVToPagedCache/;

type Dtype = 'f32' | 'f16';
type Feeds = Record<string, ort.Tensor>;

let writeBufferPatched = false;
let liftoffOnly = false;

/** dawn.node rejects writeBuffer from a SharedArrayBuffer (ORT's wasm heap): hand it a private copy. */
function patchWriteBuffer(): void {
  if (writeBufferPatched) return;
  writeBufferPatched = true;
  const proto = GPUQueue.prototype as GPUQueue;
  const original = proto.writeBuffer;
  proto.writeBuffer = function (this: GPUQueue, buffer: GPUBuffer, offset: number, data: BufferSource | SharedArrayBuffer,
                                dataOffset?: number, size?: number) {
    if (ArrayBuffer.isView(data) && data.buffer instanceof SharedArrayBuffer) {
      // Offsets and sizes count elements of a typed array, bytes of a DataView.
      const view = data as unknown as { slice?: (a: number, b?: number) => ArrayBufferView; length?: number };
      if (typeof view.slice === 'function' && typeof view.length === 'number') {
        const start = dataOffset ?? 0;
        return original.call(this, buffer, offset, view.slice(start, size === undefined ? undefined : start + size) as BufferSource);
      }
      const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
      const start = dataOffset ?? 0;
      return original.call(this, buffer, offset, bytes.slice(start, size === undefined ? undefined : start + size));
    }
    if (data instanceof SharedArrayBuffer) {
      const start = dataOffset ?? 0;
      return original.call(this, buffer, offset, new Uint8Array(data).slice(start, size === undefined ? undefined : start + size));
    }
    return original.call(this, buffer, offset, data as BufferSource, dataOffset, size);
  } as GPUQueue['writeBuffer'];
}

/**
 * A `navigator.gpu` stand-in whose adapters hide `subgroups`. ORT's subgroup flash kernel computes wrong
 * results at subgroup sizes 4 and 8 (SwiftShader, lavapipe: errors of 1e-2 where 1e-7 is due); without
 * the feature it takes its portable kernel. The adapter is a proxy over the real one so dawn.node still sees its own object as `this`.
 */
function gpuWithoutSubgroups(gpu: GPU): GPU {
  const wrapAdapter = (a: GPUAdapter): GPUAdapter => new Proxy(a, {
    get(target, prop) {
      // Also subgroup-size-control and subgroups-f16: Dawn turns subgroups on with either.
      if (prop === 'features') return new Set([...target.features].filter((f) => !f.includes('subgroup')));
      const v = Reflect.get(target, prop, target) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
  return new Proxy(gpu, {
    get(target, prop) {
      if (prop === 'requestAdapter') {
        return async (o?: GPURequestAdapterOptions) => {
          const a = await target.requestAdapter(o);
          return a && wrapAdapter(a);
        };
      }
      const v = Reflect.get(target, prop, target) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}

/**
 * Runs `fn` with stdout captured: ORT's wasm build prints a session's profile (a JSON array) there when
 * profiling ends (endProfiling, or release of a profiled session). The benchmark runs one thing at a
 * time, so nothing else writes meanwhile.
 */
async function captureStdout(fn: () => unknown): Promise<string> {
  const chunks: string[] = [];
  const write = process.stdout.write;
  process.stdout.write = ((chunk: string | Uint8Array) => {
    chunks.push(typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8'));
    return true;
  }) as typeof process.stdout.write;
  try {
    await fn();
  } finally {
    process.stdout.write = write;
  }
  return chunks.join('');
}

/** ORT's errors carry its call and error code before the message. */
function shortError(e: unknown): string {
  return `ORT: ${String((e as Error)?.message ?? e).split('\n')[0].replace(/^.*ERROR_MESSAGE: /, '')}`;
}

interface ProfileEvent { cat: string; name: string; dur: number; ts: number; args?: { cache_key?: string } }

/** ORT's profile: Session, Node and (from the WebGPU provider) 'Api' events, one per GPU program, µs. */
export function parseProfile(text: string): ProfileEvent[] {
  const i = text.indexOf('['), j = text.lastIndexOf(']');
  if (i < 0 || j < i) return [];
  try {
    return JSON.parse(text.slice(i, j + 1)) as ProfileEvent[];
  } catch {
    return [];
  }
}

/**
 * Per-run GPU milliseconds from the provider's kernel events, given that the session ran `runs` times
 * with the same programs each time (then events divide evenly into runs); the last `last` runs.
 */
export function kernelMsPerRun(events: ProfileEvent[], runs: number, last: number): { ms: number[]; kernels: string[] } | null {
  const all = kernelMsEachRun(events, runs);
  return all && { ms: all.ms.slice(runs - last), kernels: all.kernels };
}

/**
 * Per-run GPU milliseconds of every one of `runs` runs (as kernelMsPerRun), in run order; with `omit`,
 * also each run's milliseconds without the kernels it matches (`restMs`).
 */
export function kernelMsEachRun(events: ProfileEvent[], runs: number, omit?: RegExp): { ms: number[]; restMs: number[]; kernels: string[] } | null {
  const k = events.filter((e) => e.cat === 'Api');
  if (!k.length || k.length % runs) return null;
  const per = k.length / runs;
  // A program's cache key is its name, then its variant ('[...]' or ':...', e.g. ScatterKVToPagedCache:1|1:3;2).
  const name = (e: ProfileEvent) => (e.args?.cache_key ?? e.name).split(/[[:]/)[0];
  const ms: number[] = [], restMs: number[] = [];
  for (let r = 0; r < runs; r++) {
    let us = 0, rest = 0;
    for (let i = r * per; i < (r + 1) * per; i++) {
      us += k[i].dur;
      if (!omit?.test(name(k[i]))) rest += k[i].dur;
    }
    ms.push(us / 1000);
    restMs.push(rest / 1000);
  }
  return { ms, restMs, kernels: k.slice((runs - 1) * per).map(name) };
}

export class OrtPeer {
  private keepAlive: ReturnType<typeof setInterval> | undefined;
  private readonly buffers: GPUBuffer[] = [];

  /** Set once an ORT kernel never finished: the peer's queue is stuck, so nothing more is sent to it. */
  dead: string | undefined;

  private constructor(
    /** Held for the peer's lifetime: ORT keeps its WebGPU device while a session lives, and makes a new
     *  one for the next session once none does (the buffers made here would then belong to a dead device). */
    private anchor: ort.InferenceSession | undefined,
    readonly device: GPUDevice,
    /** Does the peer's device have shader-f16 (else f16 cases run in f32 storage)? */
    readonly f16: boolean,
    /** Said in the results: how the peer was set up here. */
    readonly notes: string[],
    keepAlive: ReturnType<typeof setInterval>,
  ) {
    this.keepAlive = keepAlive;
  }

  /**
   * Loads ORT-web's wasm and makes its WebGPU device (ORT creates its own device from `gpu`, on the
   * adapter webinfer uses). `withholdSubgroups` hides the subgroups feature from ORT (software adapters).
   * Pass the GPU object webinfer's engine was made from: dawn.node gives every adapter and device made
   * from it the Dawn toggles it was created with (`create([...])`; GPUAdapter::requestDevice chains them),
   * so the peer sees the same features (shader-f16 on NVIDIA with vulkan_enable_f16_on_nvidia).
   */
  static async create(gpu: GPU, opts: { withholdSubgroups: boolean }): Promise<OrtPeer> {
    patchWriteBuffer();
    const notes = [`onnxruntime-web ${ort.env.versions.web ?? ORT_VERSION}, WebGPU provider, kernel time from ORT's GPU profiler`];
    // The peer now lives beside webinfer's measurements: keep V8 from optimizing ORT's 27 MB of wasm in
    // background threads meanwhile (Liftoff, its baseline compiler, only). On a 2-core machine with
    // SwiftShader that compile made the next webinfer timings up to 2.7x slower; ORT's GPU kernel times
    // do not depend on how its host code was compiled. Set before ORT compiles its wasm (below).
    if (!liftoffOnly) {
      liftoffOnly = true;
      setFlagsFromString('--liftoff-only');
    }
    notes.push("ORT's wasm compiled by V8's baseline compiler only (no background optimizing compile beside the measurements)");
    const peerGpu = opts.withholdSubgroups ? gpuWithoutSubgroups(gpu) : gpu;
    if (opts.withholdSubgroups) notes.push("subgroups withheld from ORT (its subgroup flash kernel is wrong at this adapter's subgroup size)");
    // Node 21+ defines a read-only navigator; replace it for ORT's probe of navigator.gpu.
    Object.defineProperty(globalThis, 'navigator', { value: { gpu: peerGpu }, configurable: true, writable: true });
    ort.env.wasm.numThreads = 1;
    ort.env.webgpu.powerPreference = 'high-performance';
    const wasm = wasmBesideBundle();
    if (wasm) ort.env.wasm.wasmBinary = wasm;
    // Node stalls while V8 compiles the wasm unless a timer keeps its event loop turning.
    const keepAlive = setInterval(() => {}, 50);
    try {
      // A first tiny session initializes the runtime and the provider's device.
      const anchor = await ort.InferenceSession.create(mhaModel({ B: 1, H: 1, D: 8, L: 4, dtype: 'f32' }), sessionOptions(false));
      const device = await ort.env.webgpu.device as GPUDevice;
      return new OrtPeer(anchor, device, device.features.has('shader-f16'), notes, keepAlive);
    } catch (e) {
      clearInterval(keepAlive);
      throw e;
    }
  }

  async destroy(): Promise<void> {
    for (const b of this.buffers.splice(0)) b.destroy();
    if (!this.dead) await this.anchor?.release();
    this.anchor = undefined;
    if (this.keepAlive) clearInterval(this.keepAlive);
    this.keepAlive = undefined;
  }

  /**
   * Waits for the peer's queue to drain, at most `DRAIN_TIMEOUT_MS`: a kernel that never finishes is
   * recorded as the peer's error and the benchmark carries on without it.
   */
  private async drain(): Promise<void> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<'timeout'>((resolve) => { timer = setTimeout(() => resolve('timeout'), DRAIN_TIMEOUT_MS); });
    const r = await Promise.race([this.device.queue.onSubmittedWorkDone(), timeout]);
    clearTimeout(timer);
    if (r === 'timeout') {
      this.dead = `an ORT kernel did not finish within ${DRAIN_TIMEOUT_MS / 1000} s`;
      throw new Error(this.dead);
    }
  }

  private peerDtype(d: Dtype): Dtype {
    return d === 'f16' && !this.f16 ? 'f32' : d;
  }

  private buffer(bytes: number): GPUBuffer {
    const usage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST;
    const b = this.device.createBuffer({ size: Math.max(16, Math.ceil(bytes / 16) * 16), usage });
    this.buffers.push(b);
    return b;
  }

  private freeBuffers(): void {
    for (const b of this.buffers.splice(0)) b.destroy();
  }

  private upload(values: Float32Array | Int32Array, dtype: Dtype | 'int32'): GPUBuffer {
    const data = dtype === 'f16' ? encodeF16(values as Float32Array) : values;
    const b = this.buffer(data.byteLength);
    this.device.queue.writeBuffer(b, 0, data.buffer as ArrayBuffer, data.byteOffset, data.byteLength);
    return b;
  }

  /** Fills `bytes` of `target` by repeating `pattern` (GPU copies; multi-gigabyte caches need no upload). */
  private async fillRepeating(target: GPUBuffer, bytes: number, pattern: Uint8Array): Promise<void> {
    const src = this.device.createBuffer({ size: pattern.byteLength, usage: GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST });
    this.device.queue.writeBuffer(src, 0, pattern.buffer as ArrayBuffer, pattern.byteOffset, pattern.byteLength);
    const enc = this.device.createCommandEncoder();
    for (let off = 0; off < bytes; off += pattern.byteLength) enc.copyBufferToBuffer(src, 0, target, off, Math.min(pattern.byteLength, bytes - off));
    this.device.queue.submit([enc.finish()]);
    await this.drain();
    src.destroy();
  }

  private async read(b: GPUBuffer, count: number, dtype: Dtype): Promise<Float32Array> {
    const bytes = count * (dtype === 'f16' ? 2 : 4);
    const staging = this.device.createBuffer({ size: Math.ceil(bytes / 4) * 4, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    const enc = this.device.createCommandEncoder();
    enc.copyBufferToBuffer(b, 0, staging, 0, staging.size);
    this.device.queue.submit([enc.finish()]);
    await staging.mapAsync(GPUMapMode.READ);
    const raw = staging.getMappedRange().slice(0, bytes);
    staging.unmap();
    staging.destroy();
    return dtype === 'f16' ? decodeF16(new Uint16Array(raw)) : new Float32Array(raw);
  }

  /** After a case: the session released (its profile, printed on release, swallowed), buffers freed. */
  private async settle(session: ort.InferenceSession | undefined): Promise<void> {
    if (this.dead) return;   // a stuck queue: leave everything as it is
    await captureStdout(() => session?.release());
    await this.drain().catch(() => {});
    this.freeBuffers();
  }

  private tensor(b: GPUBuffer, dtype: Dtype | 'int32', dims: number[]): ort.Tensor {
    return ort.Tensor.fromGpuBuffer(b, { dataType: dtype === 'f16' ? 'float16' : dtype === 'int32' ? 'int32' : 'float32', dims });
  }

  /**
   * A checked session's timing, round by round: `round(warmupMs)` warms up (≥ 3 runs and ≥ warmupMs,
   * so clocks rise) and takes `samples` × `perSample` runs rotating over the feed sets; `timing()` ends
   * the profile and splits its per-run GPU times into the rounds (wall clock per sample where the
   * profile does not divide into runs). `runs` counts every run of the session, the check's included.
   * `omit`: kernels that the timing's restMs leaves out.
   */
  private rounds(session: ort.InferenceSession, feeds: Feeds[], fetches: Feeds[], samples: number, perSample: number, runsSoFar: number, omit?: RegExp) {
    let runs = runsSoFar;
    const done: { first: number; count: number; wall: number[] }[] = [];
    const run = async () => {
      await session.run(feeds[runs % feeds.length], fetches[runs % fetches.length]);
      runs++;
    };
    return {
      round: async (warmupMs: number) => {
        const w0 = performance.now();
        for (let i = 0; i < 3 || performance.now() - w0 < warmupMs; i++) {
          await run();
          await this.drain();
        }
        const first = runs, wall: number[] = [];
        for (let s = 0; s < samples; s++) {
          const t0 = performance.now();
          for (let i = 0; i < perSample; i++) await run();
          await this.drain();
          wall.push((performance.now() - t0) / perSample);
        }
        done.push({ first, count: samples * perSample, wall });
      },
      timing: async (): Promise<PeerTiming | null> => {
        if (!done.length) return null;
        // A stuck queue: no profile to ask for (the session is left alone), wall clock of the rounds taken.
        const prof = this.dead ? null : kernelMsEachRun(parseProfile(await captureStdout(() => session.endProfiling())), runs, omit);
        const per = done.map((r) => {
          const ms = prof ? prof.ms.slice(r.first, r.first + r.count) : r.wall;
          return { medianMs: median(ms), minMs: Math.min(...ms), samplesMs: ms };
        });
        const rest = omit && prof ? { restMs: median(done.flatMap((r) => prof.restMs.slice(r.first, r.first + r.count))), omitted: [...new Set(prof.kernels.filter((k) => omit.test(k)))] } : {};
        return { ...combineRounds(per), method: prof ? 'profile' : 'wall', kernels: prof?.kernels ?? [], ...rest };
      },
    };
  }

  /**
   * Wraps a session set up and checked (or failed) as a PeerCase; `finish` reads the timing, releases
   * the session and frees the case's buffers.
   */
  private makeCase<R extends PeerResult>(res: R, session: ort.InferenceSession | undefined,
                                         timer: ReturnType<OrtPeer['rounds']> | null): PeerCase<R> {
    let finished = false;
    const peer = this;
    return {
      result: res,
      get ready() { return !!timer && !res.error && !finished && !peer.dead; },
      round: async (warmupMs: number) => {
        if (!timer || finished) throw new Error('peer case not ready');
        try {
          await timer.round(warmupMs);
        } catch (e) {
          res.error = shortError(e);
          throw new Error(res.error);
        }
      },
      finish: async () => {
        if (finished) return res;
        finished = true;
        try {
          if (timer) res.timing = await timer.timing();
        } catch (e) {
          res.error ??= shortError(e);
        } finally {
          await this.settle(session);
        }
        return res;
      },
    };
  }

  /** A case timed in one round (warm-up WARMUP_MS), for callers that do not interleave. */
  private async once<R extends PeerResult>(c: PeerCase<R>): Promise<R> {
    if (c.ready) await c.round(WARMUP_MS).catch(() => {});
    return c.finish();
  }

  /**
   * Dense SDPA as MultiHeadAttention. `sets` hold webinfer's inputs ([B, H, L, D], B 1, values already
   * rounded to the storage type); the peer gets q as [B, L, H·D] (its only query layout) and k, v as
   * BNSH. `check` receives the output back in [B, H, L, D].
   */
  async mha(s: MhaShape, sets: { q: Float32Array; k: Float32Array; v: Float32Array }[], check: Check, opts: { samples: number; perSample: number }): Promise<PeerResult> {
    return this.once(await this.mhaCase(s, sets, check, opts));
  }

  /** As mha, set up and checked but not yet timed: the caller times it in rounds (PeerCase). */
  async mhaCase(s: MhaShape, sets: { q: Float32Array; k: Float32Array; v: Float32Array }[], check: Check,
                opts: { samples: number; perSample: number }): Promise<PeerCase> {
    const dtype = this.peerDtype(s.dtype === 'f16' ? 'f16' : 'f32');
    const res: PeerResult = { dtype, worst: NaN, pass: false, timing: null };
    const fail = (error: string) => this.makeCase({ ...res, error }, undefined, null);
    if (this.dead) return fail(`skipped: ${this.dead} earlier`);
    if (s.dtype !== 'f32' && s.dtype !== 'f16') return fail(`ORT-web's WebGPU provider has no ${s.dtype} attention`);
    if (s.Hq !== s.Hkv || s.Lq !== s.Lk || s.D !== s.Dv) return fail('MultiHeadAttention here covers Hq = Hkv, Lq = Lk, D = Dv only');
    const { B, Hq: H, Lq: L, D } = s;
    const maxBind = this.device.limits.maxStorageBufferBindingSize;
    if (B * H * L * D * (dtype === 'f16' ? 2 : 4) > maxBind) return fail('skipped: an input exceeds the peer device\'s largest storage binding');
    let session: ort.InferenceSession | undefined;
    try {
      session = await ort.InferenceSession.create(mhaModel({ B, H, D, L, dtype, causal: s.causal }), sessionOptions(true));
      const toBLHD = (x: Float32Array) => {
        const y = new Float32Array(x.length);
        for (let h = 0; h < H; h++) for (let i = 0; i < L; i++) y.set(x.subarray((h * L + i) * D, (h * L + i + 1) * D), (i * H + h) * D);
        return y;
      };
      const out = this.buffer(B * L * H * D * 4);
      const outT = this.tensor(out, dtype, [B, L, H * D]);
      const feeds = sets.map((x) => ({
        query: this.tensor(this.upload(toBLHD(x.q), dtype), dtype, [B, L, H * D]),
        key: this.tensor(this.upload(x.k, dtype), dtype, [B, H, L, D]),
        value: this.tensor(this.upload(x.v, dtype), dtype, [B, H, L, D]),
      }));
      const fetches = [{ output: outT }];
      // The check: one run, its output read back.
      await session.run(feeds[0], fetches[0]);
      await this.drain();
      const got = await this.read(out, B * L * H * D, dtype);
      // Back to [B, H, L, D] for the caller's check.
      const bhld = new Float32Array(got.length);
      for (let h = 0; h < H; h++) for (let i = 0; i < L; i++) bhld.set(got.subarray((i * H + h) * D, (i * H + h + 1) * D), (h * L + i) * D);
      Object.assign(res, check(bhld));
      return this.makeCase(res, session, this.rounds(session, feeds, fetches, opts.samples, opts.perSample, 1));
    } catch (e) {
      res.error = shortError(e);
      return this.makeCase(res, session, null);
    }
  }

  /**
   * One decode step as GroupQueryAttention over a dense [batch, Hkv, context, D] cache filled by
   * repeating `patterns` (K, V; element e holds pattern[e % length]), present bound to past so the new
   * token is written in place at position context-1. The new key/value are the cache's own values there,
   * so every run sees the same cache. `q` is [batch, Hq, D]. `check` receives sequence 0's output
   * [Hq·D]; `kvAt(which, h, pos, d)` tells it the dense cache element the check should gather.
   */
  async gqaDecode(s: GqaShape, patterns: [Float32Array, Float32Array], q: Float32Array, check: GqaCheck,
                  opts: { samples: number; perSample: number; sets: number }): Promise<PeerResult & { kvBytes: number }> {
    return this.once(await this.gqaDecodeCase(s, patterns, q, check, opts));
  }

  /** Device bytes of gqaDecode's dense K and V caches over `sets` rotation sets. */
  gqaCacheBytes(s: GqaShape, sets: number): number {
    return 2 * sets * s.batch * s.Hkv * s.context * s.D * (this.peerDtype('f16') === 'f16' ? 2 : 4);
  }

  /** As gqaDecode, set up and checked but not yet timed: the caller times it in rounds (PeerCase). */
  async gqaDecodeCase(s: GqaShape, patterns: [Float32Array, Float32Array], q: Float32Array, check: GqaCheck,
                      opts: { samples: number; perSample: number; sets: number }): Promise<PeerCase<PeerResult & { kvBytes: number }>> {
    const dtype = this.peerDtype('f16');
    const { batch: B, context: L, Hq, Hkv, D } = s;
    const esize = dtype === 'f16' ? 2 : 4;
    const cacheBytes = B * Hkv * L * D * esize;
    const res: PeerResult & { kvBytes: number } = { dtype, worst: NaN, pass: false, timing: null, kvBytes: 2 * cacheBytes };
    if (this.dead) return this.makeCase({ ...res, error: `skipped: ${this.dead} earlier` }, undefined, null);
    const maxBind = Math.min(this.device.limits.maxStorageBufferBindingSize, this.device.limits.maxBufferSize);
    if (cacheBytes > maxBind) {
      res.error = `skipped: a ${(cacheBytes / 2 ** 30).toFixed(2)} GiB dense K cache exceeds the peer device's largest storage binding (${(maxBind / 2 ** 30).toFixed(2)} GiB)`;
      return this.makeCase(res, undefined, null);
    }
    let session: ort.InferenceSession | undefined;
    try {
      session = await ort.InferenceSession.create(gqaDecodeModel({ Hq, Hkv, D, dtype, batch: B, maxSeq: L }), sessionOptions(true));
      const P = patterns[0].length;
      const rawPattern = (p: Float32Array) => (dtype === 'f16' ? new Uint8Array(encodeF16(p).buffer) : new Uint8Array(p.slice().buffer));
      const kvIndex = (b: number, h: number, pos: number, d: number) => ((b * Hkv + h) * L + pos) * D + d;
      // The new token's key and value: the cache's own contents at position L-1 of each sequence.
      const kNew = new Float32Array(B * Hkv * D), vNew = new Float32Array(B * Hkv * D);
      for (let b = 0; b < B; b++) for (let h = 0; h < Hkv; h++) for (let d = 0; d < D; d++) {
        kNew[(b * Hkv + h) * D + d] = patterns[0][kvIndex(b, h, L - 1, d) % P];
        vNew[(b * Hkv + h) * D + d] = patterns[1][kvIndex(b, h, L - 1, d) % P];
      }
      const qT = this.tensor(this.upload(q, dtype), dtype, [B, 1, Hq * D]);
      const kT = this.tensor(this.upload(kNew, dtype), dtype, [B, 1, Hkv * D]);
      const vT = this.tensor(this.upload(vNew, dtype), dtype, [B, 1, Hkv * D]);
      const seqlensK = new ort.Tensor('int32', new Int32Array(B).fill(L - 1), [B]);
      const total = new ort.Tensor('int32', Int32Array.of(L), []);
      const out = this.buffer(B * Hq * D * esize);
      const outT = this.tensor(out, dtype, [B, 1, Hq * D]);
      const feeds: Feeds[] = [], fetches: Feeds[] = [];
      const kvDims = [B, Hkv, L, D];
      for (let r = 0; r < opts.sets; r++) {
        const kc = this.buffer(cacheBytes), vc = this.buffer(cacheBytes);
        await this.fillRepeating(kc, cacheBytes, rawPattern(patterns[0]));
        await this.fillRepeating(vc, cacheBytes, rawPattern(patterns[1]));
        feeds.push({ query: qT, key: kT, value: vT, past_key: this.tensor(kc, dtype, kvDims), past_value: this.tensor(vc, dtype, kvDims),
          seqlens_k: seqlensK, total_sequence_length: total });
        fetches.push({ output: outT, present_key: this.tensor(kc, dtype, kvDims), present_value: this.tensor(vc, dtype, kvDims) });
      }
      // The check: one run, sequence 0's output read back.
      await session.run(feeds[0], fetches[0]);
      await this.drain();
      const got = await this.read(out, Hq * D, dtype);
      Object.assign(res, check(got, (h, pos, d) => kvIndex(0, h, pos, d)));
      return this.makeCase(res, session, this.rounds(session, feeds, fetches, opts.samples, opts.perSample, 1));
    } catch (e) {
      res.error = shortError(e);
      return this.makeCase(res, session, null);
    }
  }

  /** Device bytes of pagedAttentionCase's K and V caches: every rotation set's blocks (none without shader-f16: the case is skipped). */
  pagedCacheBytes(s: PagedShape, sets: number): number {
    return this.f16 ? 2 * sets * s.batch * Math.ceil(s.context / s.bs) * s.bs * s.Hkv * s.D * 2 : 0;
  }

  /**
   * One decode step as PagedAttention over a paged [numBlocks, bs, Hkv, D] f16 cache, numBlocks = batch ·
   * ceil(context / bs) · sets, filled by repeating `patterns` as gqaDecode's and read through
   * `blockTables` (one [batch, ceil(context / bs)] table per rotation set). Each sequence has context - 1
   * tokens cached (past_seqlens); the new token's key and value are the cache's own values at the slot the
   * op scatters them to (its set's table), so every run sees the same cache. `q` is [batch, Hq, D], the
   * op's [T, Hq·D] with one token a sequence. `check` as gqaDecode's, its index through set 0's table.
   * The timing covers every kernel of the step; its restMs leaves the scatter out (webinfer's timed decode
   * writes nothing).
   */
  async pagedAttentionCase(s: PagedShape, patterns: [Float32Array, Float32Array], q: Float32Array, blockTables: Int32Array[],
                           check: GqaCheck, opts: { samples: number; perSample: number }): Promise<PeerCase<PeerResult & { kvBytes: number }>> {
    const { batch: B, context: L, Hq, Hkv, D, bs } = s;
    const M = Math.ceil(L / bs), sets = blockTables.length, numBlocks = B * M * sets;
    const cacheBytes = numBlocks * bs * Hkv * D * 2;
    // The bytes a step reads: the same f16 K and V rows webinfer's decode reads.
    const res: PeerResult & { kvBytes: number } = { dtype: 'f16', worst: NaN, pass: false, timing: null, kvBytes: B * L * Hkv * 2 * D * 2 };
    const fail = (error: string) => this.makeCase({ ...res, error }, undefined, null);
    if (this.dead) return fail(`skipped: ${this.dead} earlier`);
    // Checked here: ORT would otherwise fail at its first run ("Program ScatterKVToPagedCache requires f16").
    if (!this.f16) return fail("skipped: ORT's PagedAttention needs shader-f16, which the peer's device lacks");
    const maxBind = Math.min(this.device.limits.maxStorageBufferBindingSize, this.device.limits.maxBufferSize);
    if (cacheBytes > maxBind) {
      return fail(`skipped: a ${(cacheBytes / 2 ** 30).toFixed(2)} GiB paged K cache exceeds the peer device's largest storage binding (${(maxBind / 2 ** 30).toFixed(2)} GiB)`);
    }
    let session: ort.InferenceSession | undefined;
    try {
      session = await ort.InferenceSession.create(pagedAttentionModel({ Hq, Hkv, D, numBlocks, blockSize: bs, batch: B, maxBlocksPerSeq: M }), sessionOptions(true));
      const P = patterns[0].length;
      const kvIndex = (bt: Int32Array, b: number, h: number, pos: number, d: number) => ((bt[b * M + Math.floor(pos / bs)] * bs + (pos % bs)) * Hkv + h) * D + d;
      const kc = this.buffer(cacheBytes), vc = this.buffer(cacheBytes);
      await this.fillRepeating(kc, cacheBytes, new Uint8Array(encodeF16(patterns[0]).buffer));
      await this.fillRepeating(vc, cacheBytes, new Uint8Array(encodeF16(patterns[1]).buffer));
      const cacheDims = [numBlocks, bs, Hkv, D];
      const common: Feeds = {
        query: this.tensor(this.upload(q, 'f16'), 'f16', [B, Hq * D]),
        key_cache: this.tensor(kc, 'f16', cacheDims),
        value_cache: this.tensor(vc, 'f16', cacheDims),
        cumulative_sequence_length: this.tensor(this.upload(Int32Array.from({ length: B + 1 }, (_, i) => i), 'int32'), 'int32', [B + 1]),
        past_seqlens: this.tensor(this.upload(new Int32Array(B).fill(L - 1), 'int32'), 'int32', [B]),
        // A CPU input: the step's bounds (one query token, L keys) without a read-back.
        attention_metadata: new ort.Tensor('int32', Int32Array.of(1, L), [2]),
      };
      const feeds = blockTables.map((bt): Feeds => {
        const kNew = new Float32Array(B * Hkv * D), vNew = new Float32Array(B * Hkv * D);
        for (let b = 0; b < B; b++) for (let h = 0; h < Hkv; h++) for (let d = 0; d < D; d++) {
          kNew[(b * Hkv + h) * D + d] = patterns[0][kvIndex(bt, b, h, L - 1, d) % P];
          vNew[(b * Hkv + h) * D + d] = patterns[1][kvIndex(bt, b, h, L - 1, d) % P];
        }
        return { ...common, key: this.tensor(this.upload(kNew, 'f16'), 'f16', [B, Hkv * D]), value: this.tensor(this.upload(vNew, 'f16'), 'f16', [B, Hkv * D]),
          block_table: this.tensor(this.upload(bt, 'int32'), 'int32', [B, M]) };
      });
      const out = this.buffer(B * Hq * D * 2);
      const fetches = [{ output: this.tensor(out, 'f16', [B, Hq * D]) }];
      // The check: one run, sequence 0's output read back.
      await session.run(feeds[0], fetches[0]);
      await this.drain();
      const got = await this.read(out, Hq * D, 'f16');
      Object.assign(res, check(got, (h, pos, d) => kvIndex(blockTables[0], 0, h, pos, d)));
      return this.makeCase(res, session, this.rounds(session, feeds, fetches, opts.samples, opts.perSample, 1, PAGED_SCATTER));
    } catch (e) {
      res.error = shortError(e);
      return this.makeCase(res, session, null);
    }
  }
}

function sessionOptions(profile: boolean): ort.InferenceSession.SessionOptions {
  return {
    executionProviders: ['webgpu'],
    enableProfiling: profile,
    // A node the WebGPU provider cannot take must fail, not run on the CPU and get timed.
    extra: { session: { disable_cpu_ep_fallback: '1' } },
  };
}
