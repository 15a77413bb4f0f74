// The runtime under every operation: the device and what was learned of its adapter, tensors and the
// buffer pool, pipelines, command recording and dispatch, timing, read-back and device loss. Kernel
// modules take a Runtime; the public Engine (src/engine.ts) adds the operations on top.
import { DTYPES, encodeBf16, encodeF16, encodeFp8e4m3, type DType } from './dtype.js';
import { WebinferError, check, fail, fmt, isPosInt, numel, shapeStr } from './errors.js';
import { PipelineCache, packUniform, type Kernel, type KernelSpec } from './pipeline.js';
import { PROGRAMS, SHADER_FILES } from './shaders.js';
import { BufferPool, GPU_ONLY_USAGE, Tensor, tensorByteLength, type TensorHost } from './tensor.js';
import type { EngineFeatures, EngineLimits, EngineOptions, FlashVariantChoice, SubgroupMatrixConfig } from './types.js';

const LIMIT_NAMES: readonly (keyof EngineLimits)[] = [
  'maxComputeWorkgroupStorageSize', 'maxStorageBufferBindingSize', 'maxBufferSize',
  'maxStorageBuffersPerShaderStage', 'maxComputeInvocationsPerWorkgroup', 'maxComputeWorkgroupSizeX',
  'maxComputeWorkgroupsPerDimension', 'maxUniformBufferBindingSize',
];
/** The WebGPU implementation is wgpu (naga compiles the WGSL): Deno, or Firefox. */
const WGPU_IMPLEMENTATION: boolean = (() => {
  const g = globalThis as { Deno?: unknown; navigator?: { userAgent?: string } };
  return g.Deno !== undefined || /\bFirefox\//.test(g.navigator?.userAgent ?? '');
})();

// Subgroup matrices are experimental: Dawn offers them where the GPU object was made with the
// allow_unsafe_apis toggle (Node: create(['enable-dawn-features=allow_unsafe_apis']); Chrome:
// --enable-unsafe-webgpu), and only next to subgroups.
const OPTIONAL_FEATURES: readonly GPUFeatureName[] = ['shader-f16', 'subgroups', 'timestamp-query', 'chromium-experimental-subgroup-matrix'] as GPUFeatureName[];

type HostData = Float32Array | Uint16Array | Uint8Array | Int32Array | Uint32Array;
export type Bindable = GPUBuffer | Tensor;

export interface AdapterSummary {
  vendor: string;
  architecture: string;
  device: string;
  description: string;
  /** A software adapter that runs on the CPU (SwiftShader, lavapipe/llvmpipe, WARP): the adapter says
   *  so (`info.isFallbackAdapter`; Firefox names no vendor) or its name does. */
  software: boolean;
}

const SOFTWARE_NAMES = /swiftshader|llvmpipe|lavapipe|software|microsoft basic render/i;

/**
 * What to install or set for an adapter, for the platform this runs on: a machine without a GPU can
 * still run WebGPU on the CPU through a software Vulkan driver (slowly, but everything works).
 */
export function noAdapterHint(): string {
  const g = globalThis as { process?: { versions?: { node?: string }; platform?: string; env?: Record<string, string | undefined> }; Deno?: { build: { os: string } }; navigator?: { userAgent?: string } };
  const deno = g.Deno;
  const node = g.process?.versions?.node !== undefined && !deno;
  const os = deno ? deno.build.os : node ? g.process!.platform : null;
  if (os === null) {
    const ua = g.navigator?.userAgent ?? '';
    return /Firefox/.test(ua)
      ? 'In Firefox, WebGPU needs version 141 or later on Windows (other platforms: about:config, dom.webgpu.enabled); check about:support for "WebGPU".'
      : 'In Chrome or Edge, check chrome://gpu for "WebGPU: Hardware accelerated"; without a GPU, start the browser with --enable-unsafe-swiftshader (Chrome 134+) or a software Vulkan driver.';
  }
  const env = node ? g.process!.env ?? {} : {};
  const set = env.VK_ICD_FILENAMES ?? env.VK_DRIVER_FILES;
  if (os === 'linux') {
    return (set ? `VK_ICD_FILENAMES is set to ${set}: check that this driver file exists and loads (vulkaninfo --summary). ` : '')
      + "Install a GPU driver with Vulkan, or run on the CPU with Mesa's lavapipe: on Debian or Ubuntu `apt-get install mesa-vulkan-drivers`, then "
      + `${node ? "run with VK_ICD_FILENAMES=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json (Dawn in Node takes Mesa 24 or later: on Debian 12 take the package from bookworm-backports; or Chromium's SwiftShader, VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json after apt-get install chromium)" : 'Deno finds it by itself'}. `
      + '`webinfer serve`, `npm start` and the examples try these software drivers on their own.';
  }
  if (os === 'darwin') return 'On macOS, WebGPU runs on Metal: a Mac from 2016 or later with macOS 13+ has an adapter; in a VM or over SSH without a GPU session there is none.';
  if (os === 'windows' || os === 'win32') return "On Windows, WebGPU runs on Direct3D 12 (or Vulkan): update the GPU driver; without a GPU, Windows' WARP adapter needs the D3D12 runtime of Windows 10 or later.";
  return "Install a GPU driver with Vulkan, or a software Vulkan driver (Mesa's lavapipe) and point VK_ICD_FILENAMES at its ICD file.";
}

/**
 * The device an engine runs on: navigator.gpu's (browser, Deno), the given GPU's (Node: `create([])`
 * from 'webgpu'), or the given device. Requests the adapter's own limits and optional features.
 */
export async function acquireDevice(opts: EngineOptions): Promise<{ device: GPUDevice; info: GPUAdapterInfo | undefined; retained: unknown[]; wgsl: ReadonlySet<string> }> {
  if (opts === null || typeof opts !== 'object') fail('createEngine', 'opts', 'an options object', opts);
  let device = opts.device;
  let info: GPUAdapterInfo | undefined;
  let gpuRef: GPU | undefined;
  let adapterRef: GPUAdapter | undefined;
  if (!device) {
    const gpu = opts.gpu ?? (globalThis as { navigator?: { gpu?: GPU } }).navigator?.gpu;
    if (!gpu) {
      throw new WebinferError('createEngine: gpu: expected a WebGPU entry point (navigator.gpu in a browser or Deno, '
        + "`create([])` from the 'webgpu' package in Node), got none: this runtime has no WebGPU");
    }
    const adapter = await gpu.requestAdapter({ powerPreference: opts.powerPreference });
    if (!adapter) throw new WebinferError(`createEngine: no WebGPU adapter is available (requestAdapter returned null). ${noAdapterHint()}`);
    gpuRef = gpu;
    adapterRef = adapter;
    info = adapter.info;
    const requiredFeatures = OPTIONAL_FEATURES.filter((f) => adapter.features.has(f));
    // The adapter's own limits: WebGPU's defaults (16 KiB workgroup storage, 128 MiB bindings) are
    // below what most adapters offer, and the kernels plan their tiles from these numbers.
    const requiredLimits: Record<string, number> = {};
    for (const name of LIMIT_NAMES) {
      const v = (adapter.limits as unknown as Record<string, number | undefined>)[name];
      if (typeof v === 'number') requiredLimits[name] = v;
    }
    device = await adapter.requestDevice({ requiredFeatures, requiredLimits, label: 'webinfer' });
  } else {
    info = (device as GPUDevice & { adapterInfo?: GPUAdapterInfo }).adapterInfo;
  }
  // The WGSL language features (a property of the implementation, not of the device): the given GPU's,
  // else navigator.gpu's where a device came alone.
  const entry = opts.gpu ?? gpuRef ?? (globalThis as { navigator?: { gpu?: GPU } }).navigator?.gpu;
  const wgsl = new Set<string>((entry as { wgslLanguageFeatures?: Iterable<string> } | undefined)?.wgslLanguageFeatures ?? []);
  // dawn.node tears its instance down when the GPU object is collected, crashing any device made
  // from it: the engine holds on to the objects it was built from for as long as it lives.
  return { device, info, retained: [gpuRef, adapterRef], wgsl };
}


/** The adapter's subgroup-matrix configurations, as plain frozen objects. */
function matrixConfigs(info: GPUAdapterInfo | undefined): readonly SubgroupMatrixConfig[] {
  const list = (info as { subgroupMatrixConfigs?: Iterable<SubgroupMatrixConfig> } | undefined)?.subgroupMatrixConfigs;
  if (!list) return [];
  return Object.freeze([...list].map((c) => Object.freeze({
    componentType: String(c.componentType), resultComponentType: String(c.resultComponentType), M: c.M, N: c.N, K: c.K,
  })));
}

/** The f16 → f32 subgroup-matrix configurations the kernels can use (the flash tile, the GEMM),
 *  preferred first (the largest). */
export function mmaConfigs(features: EngineFeatures): { M: number; N: number; K: number }[] {
  return features.subgroupMatrix
    .filter((c) => c.componentType === 'f16' && c.resultComponentType === 'f32')
    .map(({ M, N, K }) => ({ M, N, K }))
    .sort((a, b) => b.M * b.N * b.K - a.M * a.N * a.K);
}

/**
 * What a subgroup-matrix tile may take here: the subgroup size (the tiles lay rows out by subgroup, so
 * the adapter must have one) and the f16 → f32 configurations whose M divides it, all of mmaConfigs or
 * only entry `config`. No configurations without shader-f16 or subgroups, or with several sizes.
 */
export function mmaTileConfigs(features: EngineFeatures, config?: number): { sgw: number; configs: { M: number; N: number; K: number }[] } {
  const sgw = features.subgroupMinSize ?? 0;
  if (!features.f16 || !features.subgroups || !sgw || sgw !== features.subgroupMaxSize) return { sgw: 0, configs: [] };
  const all = mmaConfigs(features);
  return { sgw, configs: (config === undefined ? all : all.slice(config, config + 1)).filter(({ M }) => M <= sgw && sgw % M === 0) };
}

export class Runtime implements TensorHost {
  readonly device: GPUDevice;
  readonly features: EngineFeatures;
  readonly limits: EngineLimits;
  readonly adapter: AdapterSummary;
  readonly pipelines: PipelineCache;
  readonly pool: BufferPool;
  /** The GPU and adapter objects behind the device, kept alive with the engine. */
  retained: unknown[] = [];
  /**
   * Set by a model while it records a step that verifies speculative proposals (StepRow.sampleAll):
   * products over quantized weights stay on the f32 kernels (the GEMV, the FMA GEMM), off the subgroup
   * matrices, which take such weights rounded to f16. A verification row then computes as a plain
   * step's row does (up to summation order), so that speculation leaves the output as it was (SPEC §9).
   * On an H200 the 8B shape at Q4_K_M changed its greedy output with verification rows on the matrices.
   */
  exactProducts = false;
  /**
   * Set by a model while it records a step of a model that speculates: attention keeps its queries in
   * f32, so one-token rows take the FMA decode kernels and not GQA decode's subgroup-matrix tile, which
   * stages the queries in f16. Verification rows (several a sequence) run the flash kernel on f32
   * queries; with plain rows' queries rounded, a seeded draw at a boundary came out otherwise with
   * speculation than without it (the H200's GPU pass, gguf-llama-q4-k-m).
   */
  exactQueries = false;
  /** Knobs the kernels plan with; tests shrink them to reach rarely taken paths at small sizes. */
  readonly tuning = {
    /** Largest score matrix the naive kernel materializes per chunk of query rows. */
    naiveScoreBytes: 256 * 1024 * 1024,
    /** Which flash tile runs: 'auto' takes the subgroup-matrix tile for f16 data (and f32 data split
     *  into f16 halves, flashMmaSplit) where the adapter has subgroup matrices (else as 'subgroup'),
     *  then subgroups where the adapter has them. */
    flashVariant: 'auto' as FlashVariantChoice,
    /** Holds the subgroup-matrix tiles (flash, MLA decode) to one of the adapter's f16 → f32 configurations (mmaConfigs). */
    flashMmaConfig: undefined as number | undefined,
    /** Holds the subgroup-matrix tile to one shape (flash.ts MMA_SHAPES: subgroups and keys a tile). */
    flashMmaShape: undefined as number | undefined,
    /** Writes the subgroup-matrix tile's constant-trip loops out (src/core/unroll.ts) before compiling:
     *  1.4-1.9x faster on an H200, where NVIDIA's compiler then keeps every matrix in registers. */
    flashMmaUnroll: true,
    /** f32 data on the subgroup-matrix flash tile as hi + lo f16 halves (flash_mma_core.wgsl SPLIT: three
     *  products a step, f32 tolerances) where the call returns no LSE (flash.ts flashMmaFor); false keeps
     *  f32 data on the scalar tiles. */
    flashMmaSplit: true,
    /** The split tile's key tiles between moves of O into the lanes' f32 sums (flash_mma_core.wgsl FL):
     *  the tensor units truncate as they add, so longer runs drift on one-signed values. */
    flashMmaFlush: 8,
    /** The subgroup-matrix tile stages f16 K and V as raw 16-byte words (else through the dtype loaders). */
    flashMmaWords: true,
    /** Diagnostics of the subgroup-matrix tile (flash_mma_core.wgsl PROBE; 0 off): wrong results. */
    flashMmaProbe: 0,
    /** The linear layer for many rows with 16-bit weights: 'auto' takes the subgroup-matrix GEMM
     *  (ops/gemm_mma.wgsl) where the adapter has f16 subgroup matrices, 'off' the FMA GEMM. */
    linearMma: 'auto' as 'auto' | 'off',
    /** The subgroup-matrix GEMM splits f32 activations into hi + lo f16 halves (f32 accuracy, twice the
     *  products); false rounds them to f16 once (f16 activations: f16 tolerances). */
    linearMmaSplit: true,
    /** Holds the subgroup-matrix GEMM to one of gemm.ts LINEAR_MMA_TILES (benchmark exploration). */
    linearMmaTile: undefined as number | undefined,
    /** Diagnostics of the subgroup-matrix GEMM (gemm_mma.wgsl PROBE; 0 off): wrong results. */
    linearMmaProbe: 0,
    /** Decode-sized steps (M ≤ LINEAR_GEMV_MAX_M rows) from linearDecodeMmaMinM rows on: 'auto' runs the
     *  subgroup-matrix GEMM over one row tile of every row (gemm.ts LINEAR_MMA_DECODE_TILES: each weight
     *  tile read once, on the tensor units) where the adapter has f16 subgroup matrices and the grid fills
     *  the GPU; 'off' keeps the GEMV. */
    linearDecodeMma: 'auto' as 'auto' | 'off',
    /** Rows from which decode-sized steps over 16-bit weights may take the subgroup-matrix GEMM (see
     *  linearDecodeMma): 4. On an H200, whole steps of Llama-3.2-1B's shape (bf16, batch 1, the rows of a
     *  speculative verification) took 3.4 ms of GPU time at 6 rows on the matrices against 6.0 on the GEMV,
     *  the same at 4 (3.3 and 3.2), and 2.1 on the GEMV at 2 rows against 3.3 (issue 45's runs,
     *  bench/notes/h200-session4-issue45-*.log; per-layer timings had said 8, run 106). */
    linearDecodeMmaMinM: 4,
    /** The same for quantized weights (the GEMV's dot path): 3. On an H200 the 8B shape at Q4_K_M took
     *  14.1 ms at 2 rows on the GEMV against 19.6 on the matrices, 27.9 against 20.0 at 4 rows and 43.0
     *  against 20.3 at 6 (the GEMV holds each x row's unit in registers: 4 rows of them spill). */
    quantDecodeMmaMinM: 3,
    /** A step verifying speculative proposals attends each verification row as a one-token sequence of
     *  its own (keys up to its position, the same blocks): the decode kernels then serve every row, split
     *  over the context as a plain decode row is, instead of the flash tile holding k + 1 rows of one
     *  sequence (on an H200 the 8B shape's 4-row verification spent 4.7 ms there against 1.0 for a plain
     *  step's attention, issue 45's run 4); MLA's verification rows take the absorbed decode as plain
     *  steps do. false: the rows attend as one causal chunk. */
    verifyRowsAsDecode: true,
    /** The quantized GEMV's dot path over several rows of x a workgroup (the verification steps of
     *  speculative decoding, which keep quantized weights off the matrices: Runtime.exactProducts) meets
     *  each unit of weights with the x rows one at a time, decoding it again for each, instead of holding
     *  every row's x at once (PlanLinearOptions.rowsEach). 'auto': from 4 rows a workgroup, in the steps
     *  that verify (where it was measured; elsewhere the H200's batched steps take the matrices). On an H200
     *  (issue 45's run at 0a2cc6c) the 8B shape's Q4_K_M verification took 22.1 ms of GPU time at 4 rows
     *  against 23.8 with the rows at once, 39.8 against 42.2 at 8, but 12.1 against 10.2 at 2; its layers
     *  at 4 rows 0.047/0.131/0.180/0.926 ms (Q4_K q|o, gate/up, down, lm_head) against 0.057/0.163/0.192/1.175. */
    quantGemvRowsEach: 'auto' as 'auto' | boolean,
    /** Decode-sized steps on the matrix GEMM split K over this many workgroups where the grid is short of
     *  LINEAR_MMA_DECODE_TARGET_WORKGROUPS ('auto': gemm.ts decodeSplitK; 1: never), their partial sums
     *  added by a second pass (gemm_splitk.wgsl). */
    linearDecodeSplitK: 'auto' as 'auto' | number,
    /** Models fold each layer's RMSNorm into the product after it where that product runs on the GEMV
     *  (decode-sized steps below linearDecodeMmaMinM rows, or without subgroup matrices): two passes
     *  fewer a layer. */
    fuseNorms: true,
    /** The quantized GEMV over 8-bit activations with integer dot products (gemv_idot.wgsl: Q8_0, Q4_0,
     *  Q4_K and Q6_K, where the WGSL has dot4I8Packed), as llama.cpp computes. Off by default: on the
     *  GGUF goldens its logits are 3.4-4.8% of max|logit| from the exact ones (llama.cpp's 3-6%), past
     *  SPEC §8's 1e-2 for quantized activations (tests/cases/model.cases.ts idotCase). */
    gemvIntDot: false,
    /** Steps of at most this many rows run quantized experts (Q8_0, Q4_0, Q4_K, Q6_K) on the expert
     *  GEMV's dot path, more rows on its decode path (ops/moe.ts planMoe says why). */
    moeQuantDotMaxRows: 1,
    /** Models rotate q and k and write the cache in one pass after the q|k|v product (rope_cache.wgsl)
     *  instead of a RoPE pass and a cache-write pass. */
    fuseRopeCache: true,
    /** Decode steps a model keeps recorded and submitted before it waits for the oldest one's ids (2-4).
     *  Three, not two: a step's read-back resolves some time after the GPU finishes it (dawn.node
     *  notices on its event loop), and with two the GPU sat idle for it at times (H200, run 118). */
    stepsInFlight: 3,
    /** Models replay a decode step's recorded layers (a StepGraph) when the step repeats one already
     *  recorded (the same tokens a step, attention plan, tables and tuning): the commands only, none of
     *  the JavaScript that chose them. */
    stepGraphs: true,
    /** Holds decode-sized steps on the matrix GEMM to one of gemm.ts LINEAR_MMA_DECODE_TILES (benchmark exploration). */
    linearDecodeMmaTile: undefined as number | undefined,
    /** Caps the flash kernel's workgroup storage below the adapter's (tests reach the small-tile plans). */
    flashSmemBytes: Infinity,
    /** Holds the flash planner to one entry of its grid list (benchmark exploration). */
    flashGrid: undefined as number | undefined,
    /** MLA decode's attention: 'auto' the subgroup-matrix tile (mla_mma_core.wgsl) for f16, bf16 and
     *  fp8_ds_mla latent rows where the adapter has f16 subgroup matrices, else MLA's own tile (mla_core.wgsl) where it fits;
     *  'mla' MLA's own tile; 'flash' the flash tile. */
    mlaDecodeTile: 'auto' as 'auto' | 'mla' | 'flash',
    /** Holds MLA decode's subgroup-matrix tile to one shape (plan.ts MLA_MMA_SHAPES; benchmark exploration). */
    mlaMmaShape: undefined as number | undefined,
    /** Diagnostics of MLA decode's subgroup-matrix tile (mla_mma_core.wgsl PROBE; 0 off): wrong results. */
    mlaMmaProbe: 0,
    /** How far (log2) a row's max must pass its running max before MLA's matrix tile rescales O (the
     *  lazy rescale, FlashAttention-4); tests take 0 to rescale at every move. */
    mlaMmaTau: 8,
    /** MLA decode's q absorption and V up-projection: 'auto' the row-blocked kernels (mla.wgsl
     *  *_rows_main) for many rows and workgroups (mla.ts HR_MIN_ROWS, HR_MIN_GROUPS), else split-K;
     *  'on' / 'off' everywhere. */
    mlaRowProducts: 'auto' as 'auto' | 'on' | 'off',
    /** Heads a thread of MLA decode's tile owns (1, 2 or 4; default 1, the fastest measured). */
    mlaHeadsPerThread: undefined as number | undefined,
    /** Holds jobs of few rows (MLA decode) to one of the row-sized grids (flash.ts ROW_GRIDS), or -1: none. */
    flashRowGrid: undefined as number | undefined,
    /** f16 Q/K/V tiles in workgroup memory for f16 data where the adapter has shader-f16. */
    flashF16Tiles: true,
    /** Write constant-bound loops out before compiling: 'auto' where the implementation is wgpu (Deno,
     *  Firefox) over a hardware GPU, whose loop bounding keeps NVIDIA's compiler from unrolling them
     *  (5-20x slower register tiles, bench/notes/flash.md); not over a software adapter, where nothing is
     *  gained and SwiftShader's compiler takes minutes and many GB on the written-out kernels
     *  (bench/probes/swiftshader-unroll.mjs); 'on' / 'off' anywhere. */
    unrollLoops: 'auto' as 'auto' | 'on' | 'off',
    /** Paged attention splits long contexts into KV partitions until about this many workgroups run. */
    pagedTargetWorkgroups: 512,
    /** ... but no partition is shorter than this many keys. 64 (one key tile): on an H200 a batch-1 step
     *  of Llama-3.2-1B at context 1024 took 1.511 against 1.681 ms of GPU time with 256 (16 partitions
     *  of a sequence against 4; batch 8 and 32 the same; bench/results/gguf-nvidia-h200.md, 7e54388). */
    pagedMinPartition: 64,
    /** The partition workspace of one plan holds at most this many bytes (and the adapter's largest
     *  binding), except where the portable decode kernel's partition limit (PMAX keys) needs more. */
    pagedWorkspaceBytes: 64 * 2 ** 20,
    /** Sequences with one new token use the decode kernel (where the head size allows). */
    pagedDecodeKernel: true,
    /** Holds the decode kernel's key rows in flight per thread (UK) to one value (benchmark exploration). */
    pagedDecodeUK: undefined as number | undefined,
    /** Workgroup size of the decode kernel (at most 256 and the adapter's limits). */
    pagedDecodeWG: 256,
    /** Which decode kernel runs: 'auto' takes GQA decode on MLA's matrix tile (mla_mma_core.wgsl SEPV)
     *  where the adapter has f16 subgroup matrices and the plan allows it (f16/bf16 cache in one buffer,
     *  G ≤ 16, no window, softcap, ALiBi or sinks), else the subgroup kernel where the adapter has
     *  subgroups, else the portable one; 'subgroup-matrix' names auto's first choice (it falls back as
     *  auto does); 'subgroup' and 'portable' hold the decode kernels to that one. */
    pagedDecodeVariant: 'auto' as 'auto' | 'subgroup-matrix' | 'subgroup' | 'portable',
    /** Holds GQA decode's matrix tile to one shape (plan.ts DECODE_MMA_SHAPES; benchmark exploration). */
    pagedDecodeMmaShape: undefined as number | undefined,
    /** Plans whose decode runs on the matrix tile split KV partitions until about this many workgroups
     *  (at most pagedTargetWorkgroups): measured on an H200, 256 took batch 1 × 32k from 0.153 to
     *  0.132 ms and left batch ≥ 16 within 1% (bench/notes/paged.md, runs 80-82). */
    pagedDecodeMmaTarget: 256,
    /** Caps the lanes that share a key row in the subgroup decode kernel (benchmark exploration). */
    pagedDecodeKT: undefined as number | undefined,
    /** Groups of the subgroup decode kernel that share each key row, each for G / HS of a kv head's query
     *  heads (fewer registers a lane; rounded down to a divisor of G). Default 1. */
    pagedDecodeHeadSplit: undefined as number | undefined,
    /** The subgroup decode kernel issues the next step's loads before computing the current one. */
    pagedDecodePrefetch: true,
    /** Benchmark diagnostic (wrong output; bench --explore-paged): the subgroup decode kernel without
     *  parts of its work: 1 loads only; 2 no softmax or P·V; 3 no butterfly; 4 no P·V products. 0: off. */
    pagedDecodeProbe: 0,
    /** Caches (paged K/V, MLA latent) larger than this, or than the device's largest storage binding,
     *  are split across buffers of whole blocks (tests shrink it to reach split caches at small sizes). */
    cacheBindingBytes: Infinity,
    /** MLA prefill up-projects cached context in chunks of this many tokens (rounded to whole blocks). */
    mlaPrefillChunk: 256,
    /** Plans from i32-tensor metadata size their kernels' grids on the GPU (indirect dispatch) rather
     *  than launching the host's bound of workgroups, the surplus exiting at once. */
    pagedIndirect: false,
  };
  private readonly poison: boolean;
  private readonly warn: (m: string) => void;
  private readonly warned = new Set<string>();
  private encoder: GPUCommandEncoder | null = null;
  private pendingUniforms: GPUBuffer[] = [];
  private asyncErrors: Error[] = [];
  private lostMessage: string | null = null;
  private destroyed = false;
  private readonly lostPromise: Promise<never>;
  private dummyBuffer: GPUBuffer | null = null;
  private onesBuffer: GPUBuffer | null = null;
  /** Buffers created while an allocation region runs (allocating), null outside one. */
  private created: Set<GPUBuffer> | null = null;
  /** Staging buffers of read-backs dropped by abandonReads, destroyed while their maps were pending. */
  private readonly abandoned = new WeakSet<GPUBuffer>();
  /** The last allocation region started: the next one waits for it (error scopes are one stack per device). */
  private region: Promise<void> = Promise.resolve();
  private timing: { querySet: GPUQuerySet; next: number; capacity: number; labels: string[]; span: boolean } | null = null;
  /** The compute pass consecutive dispatches share (ended before any copy or clear, and at flush). */
  private pass: GPUComputePassEncoder | null = null;
  /** Bind groups by (layout, buffers), least recently used first: steady-state runs reuse them. */
  private readonly bindGroups = new Map<string, GPUBindGroup>();
  private readonly ids = new WeakMap<object, number>();
  private nextId = 1;
  /** Counts of what the steady state must not do: buffers created (the pool's misses included), bind
   *  groups created, dispatches recorded, and a DispatchCache's uniform rewrites and changed bind-group
   *  sets. Tests and the benchmark read them. */
  readonly counters = { createBuffer: 0, createBindGroup: 0, dispatch: 0, uniformWrite: 0, groupChange: 0 };
  /** While set, dispatch() goes through it (a model step's uniforms and bind groups kept per position). */
  private recorder: DispatchCache | null = null;
  /** While set, every recorded dispatch and GPU-only scratch buffer is kept for a StepGraph. */
  private capturing: StepGraph | null = null;
  /** GPU milliseconds per pass label of the last endTiming(), summed over repeated passes. */
  lastTiming: Record<string, number> = {};
  private poisonBytes = new Uint8Array(0);

  constructor(device: GPUDevice, info: GPUAdapterInfo | undefined, opts: EngineOptions, wgsl: ReadonlySet<string> = new Set()) {
    this.device = device;
    this.poison = !!opts.poisonOutputs;
    this.warn = opts.onWarning ?? ((m) => console.warn(`webinfer: ${m}`));
    const f = device.features;
    const sgMin = (info as { subgroupMinSize?: number } | undefined)?.subgroupMinSize;
    const sgMax = (info as { subgroupMaxSize?: number } | undefined)?.subgroupMaxSize;
    const subgroups = f.has('subgroups');
    this.features = Object.freeze({
      f16: f.has('shader-f16'),
      subgroups,
      subgroupSize: subgroups && sgMin && sgMin === sgMax ? sgMin : undefined,
      subgroupMinSize: subgroups ? sgMin : undefined,
      subgroupMaxSize: subgroups ? sgMax : undefined,
      timestampQuery: f.has('timestamp-query'),
      subgroupMatrix: subgroups && f.has('chromium-experimental-subgroup-matrix' as GPUFeatureName) ? matrixConfigs(info) : [],
      intDot4: wgsl.has('packed_4x8_integer_dot_product'),
    });
    const lim = {} as Record<keyof EngineLimits, number>;
    for (const name of LIMIT_NAMES) lim[name] = (device.limits as unknown as Record<string, number>)[name];
    this.limits = Object.freeze(lim);
    const names = { vendor: info?.vendor ?? '', architecture: info?.architecture ?? '', device: info?.device ?? '', description: info?.description ?? '' };
    this.adapter = Object.freeze({
      ...names,
      software: !!(info as { isFallbackAdapter?: boolean } | undefined)?.isFallbackAdapter
        || SOFTWARE_NAMES.test(Object.values(names).join(' ')),
    });
    this.pool = new BufferPool(device, undefined, (d) => this.createBuffer(d), Math.min(this.limits.maxBufferSize, this.limits.maxStorageBufferBindingSize));
    this.pipelines = new PipelineCache(device, SHADER_FILES, PROGRAMS, (e) => this.asyncErrors.push(e));
    // prepare() and a trace key their kernels as get() will: with the tuning in force now.
    this.pipelines.onSettings = () => this.syncPipelineSettings();

    this.lostPromise = device.lost.then((lost) => {
      this.lostMessage = `GPU device lost (${lost.reason}${lost.message ? `: ${lost.message}` : ''})`;
      throw new WebinferError(`webinfer: ${this.lostMessage}; create a new engine`);
    });
    this.lostPromise.catch(() => { /* observed by assertAlive and the awaits that race it */ });
    device.addEventListener?.('uncapturederror', (ev) => {
      this.asyncErrors.push(new WebinferError(`GPU error: ${(ev as GPUUncapturedErrorEvent).error.message}`));
    });
  }

  // ------------------------------------------------------------------------------------------ state

  /** Throws a clear error if the device was lost or the engine destroyed. */
  assertAlive(op: string): void {
    if (this.destroyed) throw new WebinferError(`${op}: the engine was destroyed; create a new engine`);
    if (this.lostMessage) throw new WebinferError(`${op}: ${this.lostMessage}; create a new engine`);
  }

  /** Warns once per distinct message. */
  warnOnce(message: string): void {
    if (this.warned.has(message)) return;
    this.warned.add(message);
    this.warn(message);
  }

  private throwAsyncErrors(): void {
    if (!this.asyncErrors.length) return;
    const errs = this.asyncErrors;
    this.asyncErrors = [];
    throw errs.length === 1 ? errs[0] : new WebinferError(errs.map((e) => e.message).join('\n'));
  }

  /**
   * Races a promise against device loss so nothing waits forever on a dead device. A timer stays
   * armed meanwhile: dawn.node resolves GPU promises from its own thread, and Node would otherwise
   * exit mid-await when nothing else keeps its event loop alive.
   */
  private async guard<T>(p: Promise<T>): Promise<T> {
    const keepAlive = setInterval(() => {}, 1000);
    try {
      return await Promise.race([p, this.lostPromise]);
    } finally {
      clearInterval(keepAlive);
    }
  }

  // ---------------------------------------------------------------------------------------- tensors

  private allocBuffer(bytes: number, label?: string): GPUBuffer {
    const usage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST;
    return this.pool.acquire(bytes, usage, label);
  }

  /** Uploads host data. f16/bf16 come as Uint16Array bits, fp8e4m3 as Uint8Array; a Float32Array with
   *  dtype f16/bf16/fp8e4m3 is converted (round to nearest even, fp8 saturating). */
  tensor(data: HostData, shape: number[], dtype?: DType): Tensor {
    const op = 'tensor';
    this.assertAlive(op);
    checkShape(shape, op, 'shape');
    if (dtype !== undefined) check(DTYPES.includes(dtype), op, 'dtype', `one of ${DTYPES.join(', ')}`, fmt(dtype));
    check(ArrayBuffer.isView(data) && !(data instanceof DataView), op, 'data', 'a Float32Array, Uint16Array, Uint8Array, Int32Array or Uint32Array', data);
    const dt = dtype ?? defaultDType(data);
    const n = numel(shape);
    check(data.length === n, op, 'data', `${n} elements for shape ${shapeStr(shape)}`, `${data.length} elements`);
    let bytes: Uint8Array;
    const view = (a: ArrayBufferView) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
    const accepts = (ok: boolean, expected: string) => check(ok, op, 'data', `${expected} for dtype '${dt}'`, data);
    switch (dt) {
      case 'f32':
        accepts(data instanceof Float32Array, 'a Float32Array');
        bytes = view(data); break;
      case 'f16': case 'bf16':
        accepts(data instanceof Uint16Array || data instanceof Float32Array, 'a Uint16Array of bit patterns or a Float32Array');
        bytes = view(data instanceof Float32Array ? (dt === 'f16' ? encodeF16(data) : encodeBf16(data)) : data); break;
      case 'fp8e4m3':
        accepts(data instanceof Uint8Array || data instanceof Float32Array, 'a Uint8Array of bit patterns or a Float32Array');
        bytes = view(data instanceof Float32Array ? encodeFp8e4m3(data) : data); break;
      case 'i32':
        accepts(data instanceof Int32Array, 'an Int32Array');
        bytes = view(data); break;
      case 'u32':
        accepts(data instanceof Uint32Array, 'a Uint32Array');
        bytes = view(data); break;
    }
    const t = this.emptyTensor(shape, dt, false);
    // writeBuffer wants a multiple of 4 bytes; pad the tail word with zeros.
    if (bytes.byteLength % 4) {
      const padded = new Uint8Array(Math.ceil(bytes.byteLength / 4) * 4);
      padded.set(bytes);
      bytes = padded;
    }
    this.device.queue.writeBuffer(t.buffer, 0, bytes.buffer, bytes.byteOffset, bytes.byteLength);
    return t;
  }

  zeros(shape: number[], dtype: DType = 'f32'): Tensor {
    const op = 'zeros';
    this.assertAlive(op);
    checkShape(shape, op, 'shape');
    check(DTYPES.includes(dtype), op, 'dtype', `one of ${DTYPES.join(', ')}`, fmt(dtype));
    const t = this.emptyTensor(shape, dtype, false);
    this.commandEncoder().clearBuffer(t.buffer, 0, t.byteLength);
    return t;
  }

  /** A tensor with undefined contents (NaN-poisoned when the engine poisons outputs). For kernels.
   *  A poisoning engine also fills the pool's slack past every tensor's bytes with 0xff (NaN as any
   *  float), so a kernel that reads past a tensor's end and counts on zeros there fails its test,
   *  whatever the pool last kept in that buffer. */
  emptyTensor(shape: readonly number[], dtype: DType, isOutput = true): Tensor {
    const bytes = tensorByteLength(shape, dtype);
    this.checkBindable(shape, dtype, bytes);
    const t = new Tensor(this, this.allocBuffer(bytes), shape, dtype);
    if (this.poison) {
      const from = isOutput ? 0 : Math.ceil(t.byteLength / 4) * 4;
      try {
        if (t.buffer.size > from) this.poisonBuffer(t.buffer, t.buffer.size - from, from);
      } catch (e) {
        t.destroy();   // not left taken by a tensor nobody holds
        throw e;
      }
    }
    return t;
  }

  private checkBindable(shape: readonly number[], dtype: DType, bytes: number): void {
    const max = Math.min(this.limits.maxBufferSize, this.limits.maxStorageBufferBindingSize);
    if (bytes > max) {
      throw new WebinferError(`tensor ${shapeStr(shape)} ${dtype}: ${bytes} bytes exceed the adapter's largest storage binding (${max} bytes)`);
    }
  }

  private poisonBuffer(buffer: GPUBuffer, bytes: number, offset = 0): void {
    if (this.poisonBytes.byteLength < bytes) this.poisonBytes = new Uint8Array(bytes).fill(0xff);
    this.device.queue.writeBuffer(buffer, offset, this.poisonBytes.buffer, 0, bytes);
  }

  releaseBuffer(buffer: GPUBuffer): void {
    if (this.destroyed) return;
    this.pool.release(buffer);
  }

  /** Scratch storage for one operation: returned to the pool once the recorded work is submitted. */
  scratch(bytes: number, label?: string): GPUBuffer {
    const b = this.allocBuffer(bytes, label);
    this.pool.release(b);
    return b;
  }

  /**
   * Scratch that only GPU commands touch (no uploads, clears or mapping): handed back with
   * releaseBuffer once the operation's last command that uses it is recorded, it may serve the next
   * operation of the same recording (the GPU runs the recorded commands in order), so the layers of a
   * step share one instead of each taking its own until the submit (a DeepSeek-V2-Lite prefill of 512
   * tokens made 26 MoE workspaces of 60 MB a step, and its MLA layers their K/V chunks).
   */
  gpuScratch(bytes: number, label?: string): GPUBuffer {
    const b = this.pool.acquire(Math.max(16, bytes), GPU_ONLY_USAGE(), label);
    this.capturing?.scratch.add(b);
    return b;
  }

  /** A tensor on gpuScratch for a kernel's intermediate (not poisoned: nothing may write it from the
   *  host); destroy() hands its buffer back at once. */
  scratchTensor(shape: readonly number[], dtype: DType): Tensor {
    const bytes = tensorByteLength(shape, dtype);
    this.checkBindable(shape, dtype, bytes);
    return new Tensor(this, this.gpuScratch(bytes), shape, dtype);
  }

  /** A small storage buffer bound where a shader declares an optional input that is not used. */
  get dummy(): GPUBuffer {
    if (!this.dummyBuffer) {
      this.dummyBuffer = this.createBuffer({ size: 16, usage: GPUBufferUsage.STORAGE, label: 'webinfer-dummy' });
    }
    return this.dummyBuffer;
  }

  /** Four f32 ones: the K/V scales of a source that has none of its own (unscaled caches). */
  get ones(): GPUBuffer {
    if (!this.onesBuffer) {
      this.onesBuffer = this.createBuffer({ size: 16, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST, label: 'webinfer-ones' });
      this.device.queue.writeBuffer(this.onesBuffer, 0, new Float32Array([1, 1, 1, 1]));
    }
    return this.onesBuffer;
  }

  /** A read-only f32 storage buffer holding small host data (ALiBi slopes, sinks); freed after submit. */
  smallF32(values: ArrayLike<number>, label?: string): GPUBuffer {
    const data = Float32Array.from(values);
    const b = this.scratch(Math.max(16, data.byteLength), label);
    this.device.queue.writeBuffer(b, 0, data);
    return b;
  }

  /** Every buffer the engine creates goes through here, so the steady state can be checked for none. */
  createBuffer(desc: GPUBufferDescriptor): GPUBuffer {
    this.counters.createBuffer++;
    const b = this.device.createBuffer(desc);
    this.created?.add(b);
    return b;
  }

  /**
   * Runs fn, a model's allocations and uploads at load, under out-of-memory and validation error
   * scopes: a GPU allocation that fails becomes one named error instead of thousands of uncaptured ones
   * and invalid buffers used later. fn may await `stage()` between its stages to stop at the first
   * failure (a cache too large for the memory left, before the host builds anything of its size).
   * When the device reports an error, or fn throws, undo releases what fn took (given fn's value when
   * it returned one); after a device error every buffer created meanwhile that is back in the pool is
   * destroyed rather than handed out again (any of them may be invalid), and the error thrown is
   * `describe(error, outOfMemory)` (outOfMemory: the device ran out, rather than refused a call). Scopes are one stack per device and fn awaits, so regions run one at a time per
   * engine; a GPU error of other work on this engine while one runs is reported to that region.
   */
  async allocating<T>(fn: (stage: () => Promise<void>) => Promise<T>, undo: (value: T | undefined) => void,
                      describe: (error: GPUError, outOfMemory: boolean) => string): Promise<T> {
    const before = this.region;
    let leave!: () => void;
    this.region = new Promise<void>((resolve) => { leave = resolve; });
    await before;
    const device = this.device;
    let open = false;
    const push = () => {
      device.pushErrorScope('out-of-memory');
      device.pushErrorScope('validation');
      open = true;
    };
    // The recorded work is submitted inside the scopes: a command on a buffer that failed to allocate
    // fails there too. An out-of-memory error is the cause of any validation error that follows it.
    let outOfMemory = false;
    const pop = async (): Promise<GPUError | null> => {
      open = false;
      let flushed: unknown = null;
      try { this.flush(); } catch (e) { flushed = e; }
      const validation = device.popErrorScope(), oom = device.popErrorScope();
      const [v, o] = await this.guard(Promise.all([validation, oom]));
      if (flushed) throw flushed;
      outOfMemory = o !== null;
      return o ?? v;
    };
    const created = new Set<GPUBuffer>();
    let value: T | undefined, gpu: GPUError | null = null, failure: unknown = null;
    try {
      this.created = created;
      push();
      try {
        value = await fn(async () => {
          gpu = await pop();
          if (gpu) throw new WebinferError(describe(gpu, outOfMemory));
          push();
        });
      } catch (e) {
        failure = e;
      }
      if (open) {
        try {
          gpu ??= await pop();
        } catch (e) {
          failure ??= e;
        }
      }
    } finally {
      this.created = null;
      leave();
    }
    if (failure === null && gpu === null) return value as T;
    try {
      undo(value);
    } catch { /* the cause below matters more than a failure to release after it */ }
    if (gpu) {
      this.pool.discard(created);
      if (this.dummyBuffer && created.has(this.dummyBuffer)) { this.dummyBuffer.destroy(); this.dummyBuffer = null; }
      if (this.onesBuffer && created.has(this.onesBuffer)) { this.onesBuffer.destroy(); this.onesBuffer = null; }
      throw new WebinferError(describe(gpu, outOfMemory));
    }
    throw failure;
  }

  /**
   * Bytes the device's buffers can take at most, where that can be known: a software adapter keeps
   * them in the host's memory (os.totalmem() in Node and Deno). WebGPU tells nothing of a GPU's memory:
   * null there (a GPU allocation that fails is caught by allocating() instead).
   */
  async memoryBytes(): Promise<number | null> {
    const g = globalThis as { Deno?: unknown; process?: { versions?: { node?: string } } };
    if (!this.adapter.software || (g.Deno === undefined && typeof g.process?.versions?.node !== 'string')) return null;
    try {
      const specifier = 'node:os';
      const os = (await import(/* @vite-ignore */ specifier)) as { totalmem(): number };
      const n = os.totalmem();
      return Number.isFinite(n) && n > 0 ? n : null;
    } catch {
      return null;   // Deno without --allow-sys
    }
  }

  /**
   * Copies `byteLength` bytes of `buffer` to the host. `pending`: the caller's set of its read-backs
   * in flight, which holds this one's staging buffer until it settles, so that the caller can drop
   * them all at once (abandonReads) when it goes away with reads outstanding.
   */
  async readBuffer(buffer: GPUBuffer, byteLength: number, offset = 0, pending?: Set<GPUBuffer>): Promise<ArrayBuffer> {
    this.assertAlive('read-back');
    const size = Math.max(4, Math.ceil(byteLength / 4) * 4);
    // Staging buffers come from the pool (mapped, copied out, unmapped, returned): a loop that reads
    // token ids every step creates none.
    const staging = this.pool.acquire(size, GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST, 'webinfer read-back');
    this.commandEncoder().copyBufferToBuffer(buffer, offset, staging, 0, size);
    this.flush();
    pending?.add(staging);
    let mapped = false;
    try {
      await this.guard(staging.mapAsync(GPUMapMode.READ, 0, size));
      mapped = true;
      this.throwAsyncErrors();
      return staging.getMappedRange(0, size).slice(0, byteLength);
    } finally {
      pending?.delete(staging);
      // An abandoned staging buffer is destroyed already: never back into the pool.
      if (!this.abandoned.delete(staging)) {
        if (mapped) staging.unmap();
        this.pool.release(staging);
      }
    }
  }

  /**
   * Destroys the staging buffers of read-backs still in flight (readBuffer's `pending`); each of those
   * reads rejects. A model destroyed with steps in flight drops their read-backs so: returned to the
   * pool whenever their maps resolved, often while the next model's steps already ran, they made the
   * pool take new staging buffers beside them, and its buffers grew with every such destroy.
   */
  abandonReads(pending: Set<GPUBuffer>): void {
    for (const b of pending) {
      this.abandoned.add(b);
      b.destroy();
    }
    pending.clear();
  }

  // --------------------------------------------------------------------------------------- dispatch

  /** The encoder recorded work goes into; any shared compute pass is ended first, so copies and
   *  clears recorded now land after the dispatches before them. */
  commandEncoder(): GPUCommandEncoder {
    // A copy or clear is not a dispatch: a step graph cannot replay it.
    if (this.capturing) this.capturing.taint ??= 'a copy or clear was recorded';
    return this.encoderForPass();
  }

  private encoderForPass(): GPUCommandEncoder {
    this.endPass();
    if (!this.encoder) this.encoder = this.device.createCommandEncoder({ label: 'webinfer' });
    return this.encoder;
  }

  private endPass(): void {
    if (this.pass) {
      this.pass.end();
      this.pass = null;
    }
  }

  /**
   * The compute pass for the next dispatch: shared by consecutive dispatches (WebGPU orders storage
   * writes between the dispatches of a pass), or, while timing, a pass of its own bracketed by
   * timestamps so each dispatch's GPU time can be read.
   */
  private passFor(k: Kernel): GPUComputePassEncoder {
    const t = this.timing;
    if (t && (!t.span || !this.pass)) {
      const label = `${k.shader}:${k.entry}`;
      if (t.next + 2 > t.capacity) throw new WebinferError(`timing: more than ${t.capacity / 2} passes between beginTiming() and endTiming()`);
      const enc = this.encoderForPass();
      t.labels.push(t.span ? 'span' : label);
      const pass = enc.beginComputePass({ label, timestampWrites: { querySet: t.querySet, beginningOfPassWriteIndex: t.next, endOfPassWriteIndex: t.next + 1 } });
      t.next += 2;
      this.pass = pass;
      return pass;
    }
    if (!this.pass) {
      const enc = this.encoderForPass();
      this.pass = enc.beginComputePass({ label: 'webinfer' });
    }
    return this.pass;
  }

  /** A small integer identity per GPU object, for cache keys. */
  idOf(o: object): number {
    let id = this.ids.get(o);
    if (id === undefined) this.ids.set(o, (id = this.nextId++));
    return id;
  }

  /**
   * A bind group of `layout` over whole buffers in binding order, cached by (layout, buffers): made
   * once, then found again whenever the same buffers meet the same layout (each layer's cache, a
   * plan's metadata, a model's persistent activations). At most 4096 are kept, least recently used
   * dropped first; a destroyed buffer's groups simply stop being asked for.
   */
  bindGroup(layout: GPUBindGroupLayout, buffers: readonly GPUBuffer[], slots?: readonly number[]): GPUBindGroup {
    let key = `${this.idOf(layout)}`;
    for (const b of buffers) key += `,${this.idOf(b)}`;
    let bg = this.bindGroups.get(key);
    if (bg) {
      this.bindGroups.delete(key);
    } else {
      this.counters.createBindGroup++;
      bg = this.device.createBindGroup({ layout, entries: buffers.map((buffer, i) => ({ binding: slots ? slots[i] : i, resource: { buffer } })) });
      if (this.bindGroups.size >= 4096) this.bindGroups.delete(this.bindGroups.keys().next().value!);
    }
    this.bindGroups.set(key, bg);
    return bg;
  }

  /** The cached bind group of one group of a kernel, its bindings (uniform buffers included) given by
   *  WGSL name. */
  groupFor(k: Kernel, group: number, resources: Readonly<Record<string, Bindable>>): GPUBindGroup {
    const buffers: GPUBuffer[] = [];
    const slots: number[] = [];
    for (const b of k.bindings) {
      if (b.group !== group) continue;
      const r = resources[b.name];
      if (!r) throw new WebinferError(`${k.shader}:${k.entry}: no resource given for binding '${b.name}'`);
      buffers.push(r instanceof Tensor ? r.buffer : r);
      slots.push(b.binding);
    }
    return this.bindGroup(k.groups[group], buffers, slots);
  }

  /**
   * Records one dispatch of a kernel whose bind groups are already made: the steady-state path of
   * plans and model steps (nothing allocated, nothing uploaded). `workgroups`: a linear count (laid
   * out over x and y), explicit [x, y, z], or an indirect argument buffer written on the GPU.
   */
  record(k: Kernel, groups: readonly GPUBindGroup[], workgroups: number | readonly [number, number, number] | { indirect: GPUBuffer; offset: number }): void {
    if (this.capturing) this.capturing.entries.push({ k, groups, workgroups });
    const pass = this.passFor(k);
    pass.setPipeline(k.pipeline);
    for (let g = 0; g < groups.length; g++) pass.setBindGroup(g, groups[g]);
    this.counters.dispatch++;
    if (typeof workgroups === 'number') {
      const [x, y] = this.grid(workgroups);
      if (x > 0) pass.dispatchWorkgroups(x, y, 1);
    } else if ('indirect' in workgroups) {
      pass.dispatchWorkgroupsIndirect(workgroups.indirect, workgroups.offset);
    } else {
      pass.dispatchWorkgroups(workgroups[0], workgroups[1], workgroups[2]);
    }
    if (this.timing && !this.timing.span) this.endPass();
  }

  kernel(program: string, entry: string, spec?: KernelSpec): Kernel {
    this.syncPipelineSettings();
    return this.pipelines.get(program, entry, spec);
  }

  /** The pipeline cache's settings from the tuning (read at each kernel request: tests change it). */
  private syncPipelineSettings(): void {
    const u = this.tuning.unrollLoops;
    this.pipelines.unrollLoops = u === 'on' || (u === 'auto' && WGPU_IMPLEMENTATION && !this.adapter.software);
  }

  /**
   * Records one dispatch. Resources are bound by their WGSL variable names; uniform values are
   * packed by member name into the entry point's uniform struct. `workgroups` as a single count is
   * laid out over x and y within maxComputeWorkgroupsPerDimension (shaders linearize wid.y·nwg.x + wid.x).
   */
  dispatch(k: Kernel, resources: Readonly<Record<string, Bindable>>, uniforms: Readonly<Record<string, number | readonly number[]>> | null,
           workgroups: number | readonly [number, number, number]): void {
    if (this.recorder) {
      this.recorder.dispatch(k, resources, uniforms, workgroups);
      return;
    }
    if (this.capturing) this.capturing.taint ??= `${k.shader}:${k.entry} was dispatched outside a recording`;
    const where = `${k.shader}:${k.entry}`;
    const groups: GPUBindGroupEntry[][] = k.groups.map(() => []);
    for (const b of k.bindings) {
      let buffer: GPUBuffer;
      if (b.kind === 'uniform') {
        if (!k.uniform) throw new WebinferError(`${where}: no uniform layout`);
        const image = packUniform(k.uniform, uniforms ?? {}, where);
        buffer = this.pool.acquire(image.byteLength, GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST);
        this.device.queue.writeBuffer(buffer, 0, image);
        this.pendingUniforms.push(buffer);
      } else {
        const r = resources[b.name];
        if (!r) throw new WebinferError(`${where}: no resource given for binding '${b.name}'`);
        buffer = r instanceof Tensor ? r.buffer : r;
      }
      groups[b.group].push({ binding: b.binding, resource: { buffer } });
    }
    this.counters.createBindGroup += k.groups.length;
    this.record(k, k.groups.map((layout, g) => this.device.createBindGroup({ layout, entries: groups[g] })), workgroups);
  }

  /**
   * Records what `fn` dispatches through `cache` (see DispatchCache): the same code a one-off call
   * runs, at a fraction of the host cost when it repeats. Returns fn's result.
   */
  recording<T>(cache: DispatchCache, fn: () => T): T {
    const prev = this.recorder;
    cache.begin();
    this.recorder = cache;
    try {
      return fn();
    } finally {
      this.recorder = prev;
    }
  }

  /**
   * Runs `fn` inside a recording (see recording) and keeps what it recorded as a StepGraph: the
   * dispatches, their bind groups and the GPU-only scratch they used. The graph is tainted (never
   * replayed; graph.taint says why) when something in it cannot be replayed: a copy or clear, a buffer
   * taken from the pool for host data, a dispatch outside the recording. A host write into a buffer
   * that already exists (queue.writeBuffer) is not seen: what is captured must make none (a model's
   * layers write nothing from the host; their inputs are written before, once per step).
   */
  capture<T>(fn: () => T): { result: T; graph: StepGraph } {
    const dc = this.recorder;
    if (!dc) throw new WebinferError('capture: not inside recording()');
    if (this.capturing) throw new WebinferError('capture: already capturing');
    const g = new StepGraph(dc, dc.position);
    this.capturing = g;
    this.pool.onAcquire = (usage) => {
      if (usage !== GPU_ONLY_USAGE()) g.taint ??= 'a buffer for host data was taken from the pool';
    };
    try {
      const result = fn();
      g.end = dc.position;
      g.stamp = dc.clock;
      return { result, graph: g };
    } catch (e) {
      g.taint ??= 'the recording threw';
      throw e;
    } finally {
      this.capturing = null;
      this.pool.onAcquire = null;
    }
  }

  /**
   * Records a captured StepGraph again, inside the same recording at the same position, without the
   * code that made it. False (and nothing recorded) when it may not: it is tainted, the recording is
   * elsewhere, a uniform it binds was rewritten since, or its scratch is no longer free in the pool.
   */
  replay(g: StepGraph): boolean {
    const dc = this.recorder;
    if (g.taint || dc !== g.dc || dc.position !== g.start || !dc.unchangedSince(g.start, g.end, g.stamp)) return false;
    const taken: GPUBuffer[] = [];
    for (const b of g.scratch) {
      if (!this.pool.take(b)) {
        for (const t of taken) this.pool.release(t);
        return false;
      }
      taken.push(b);
    }
    for (const e of g.entries) this.record(e.k, e.groups, e.workgroups);
    dc.skip(g.end - g.start);
    for (const t of taken) this.pool.release(t);
    return true;
  }

  /** A uniform buffer holding `values` packed for kernel k, owned by the caller (a plan keeps it for
   *  every run; release it to the pool when done). */
  uniformBuffer(k: Kernel, values: Readonly<Record<string, number | readonly number[]>>): GPUBuffer {
    const where = `${k.shader}:${k.entry}`;
    if (!k.uniform) throw new WebinferError(`${where}: no uniform layout`);
    const image = packUniform(k.uniform, values, where);
    const buffer = this.pool.acquire(image.byteLength, GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST, where);
    this.device.queue.writeBuffer(buffer, 0, image);
    return buffer;
  }

  /** Splits n workgroups over x and y; the shader must ignore linear ids ≥ n. */
  grid(n: number): [number, number] {
    const maxDim = this.limits.maxComputeWorkgroupsPerDimension;
    if (n <= maxDim) return [n, 1];
    const y = Math.ceil(n / maxDim);
    if (y > maxDim) throw new WebinferError(`dispatch of ${n} workgroups exceeds ${maxDim}² (maxComputeWorkgroupsPerDimension²)`);
    return [Math.ceil(n / y), y];
  }

  // ------------------------------------------------------------------------------------------ timing

  /**
   * GPU timing with timestamp queries: every compute pass recorded until endTiming() is bracketed by
   * timestamps. Needs the adapter's 'timestamp-query' feature (engine.features.timestampQuery).
   */
  beginTiming(maxPasses = 2048, o: { span?: boolean } = {}): void {
    if (!this.features.timestampQuery) throw new WebinferError("beginTiming: the adapter lacks 'timestamp-query'");
    if (this.timing) throw new WebinferError('beginTiming: timing already begun');
    this.endPass();
    const capacity = Math.min(4096, 2 * maxPasses);
    // span: dispatches share passes as they do untimed, each pass timed whole (a step's GPU time as it
    // runs, barriers and all); otherwise each dispatch gets a timed pass of its own (a kernel's time).
    this.timing = { querySet: this.device.createQuerySet({ type: 'timestamp', count: capacity }), next: 0, capacity, labels: [], span: !!o.span };
  }

  /** Ends timing; resolves to the summed GPU time of the timed passes, in milliseconds. */
  async endTiming(): Promise<number> {
    const t = this.timing;
    if (!t) throw new WebinferError('endTiming: beginTiming() was not called');
    this.timing = null;
    if (t.next === 0) {
      t.querySet.destroy();
      return 0;
    }
    const bytes = 8 * t.next;
    const resolve = this.pool.acquire(bytes, GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC, 'timestamps');
    this.commandEncoder().resolveQuerySet(t.querySet, 0, t.next, resolve, 0);
    try {
      const ns = new BigUint64Array(await this.readBuffer(resolve, bytes));
      let total = 0;
      const per: Record<string, number> = {};
      for (let i = 0; i + 1 < ns.length; i += 2) {
        const ms = ns[i + 1] > ns[i] ? Number(ns[i + 1] - ns[i]) / 1e6 : 0;
        total += ms;
        const label = t.labels[i / 2];
        per[label] = (per[label] ?? 0) + ms;
      }
      this.lastTiming = per;
      return total;
    } finally {
      this.pool.release(resolve);
      t.querySet.destroy();
    }
  }

  // -------------------------------------------------------------------------------------- submission

  /** Submits the recorded work. */
  flush(): void {
    this.assertAlive('flush');
    this.endPass();
    if (this.encoder) {
      const cb = this.encoder.finish();
      this.encoder = null;
      this.device.queue.submit([cb]);
      for (const u of this.pendingUniforms) this.pool.release(u);
      this.pendingUniforms = [];
    }
    // With nothing recorded and unsubmitted, released buffers are safe to hand out again.
    this.pool.onSubmit();
  }

  /** Resolves when all submitted work is done; rethrows any asynchronous GPU or compile error. */
  async sync(): Promise<void> {
    this.flush();
    await this.guard(this.device.queue.onSubmittedWorkDone());
    await this.guard(this.pipelines.settled());
    this.throwAsyncErrors();
  }

  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    this.encoder = null;
    this.pass = null;
    this.bindGroups.clear();
    this.pool.destroyAll();
    this.dummyBuffer?.destroy();
    this.onesBuffer?.destroy();
    this.device.destroy();
  }
}

function defaultDType(data: HostData): DType {
  if (data instanceof Float32Array) return 'f32';
  if (data instanceof Int32Array) return 'i32';
  if (data instanceof Uint32Array) return 'u32';
  if (data instanceof Uint8Array) return 'fp8e4m3';
  return fail('tensor', 'dtype', "a dtype ('f16' or 'bf16') for Uint16Array data", 'none');
}

function checkShape(shape: unknown, op: string, arg: string): void {
  check(Array.isArray(shape) && shape.length >= 1 && shape.every(isPosInt), op, arg,
    'a non-empty array of positive integers', Array.isArray(shape) ? shapeStr(shape as number[]) : fmt(shape));
}

/**
 * Dispatches of a sequence that repeats (a model's step, layer after layer, step after step): the n-th
 * dispatch of a recording keeps its own uniform buffer, rewritten only when its values change, and its
 * bind groups come from the runtime's cache, so a steady-state step uploads and allocates nothing but
 * what changed. Each recording starts by submitting what was recorded before it: a uniform rewritten
 * now must not reach commands still waiting in the encoder.
 */
export class DispatchCache {
  private readonly slots: { buffer: GPUBuffer | null; image: Uint8Array; kernel: Kernel | null; bufs: GPUBuffer[]; cur: GPUBuffer[]; groups: GPUBindGroup[] }[] = [];
  private cursor = 0;
  private scratch = new Uint8Array(256);
  /** Ticks at each uniform rewrite; slot i's stamp is the tick of its last one (or of a new buffer). */
  clock = 0;
  private stamps: number[] = [];

  constructor(private readonly rt: Runtime) {}

  begin(): void {
    this.rt.flush();
    this.cursor = 0;
  }

  /** The position of the next dispatch in the recording. */
  get position(): number { return this.cursor; }

  /** Moves past n positions a replayed graph covered (their slots keep what they hold). */
  skip(n: number): void { this.cursor += n; }

  /** Whether no slot in [start, end) had its uniform rewritten or replaced after tick `stamp`. */
  unchangedSince(start: number, end: number, stamp: number): boolean {
    for (let i = start; i < end; i++) if ((this.stamps[i] ?? 0) > stamp) return false;
    return true;
  }

  dispatch(k: Kernel, resources: Readonly<Record<string, Bindable>>, uniforms: Readonly<Record<string, number | readonly number[]>> | null,
           workgroups: number | readonly [number, number, number]): void {
    const rt = this.rt;
    let slot = this.slots[this.cursor];
    if (!slot) slot = this.slots[this.cursor] = { buffer: null, image: new Uint8Array(0), kernel: null, bufs: [], cur: [], groups: [] };
    this.cursor++;
    if (k.uniform) {
      // Packed into scratch words and compared: a steady-state step allocates nothing here.
      const size = k.uniform.size;
      if (this.scratch.byteLength < size) this.scratch = new Uint8Array(size);
      const image = this.scratch.subarray(0, size);
      packUniform(k.uniform, uniforms ?? {}, () => `${k.shader}:${k.entry}`, new DataView(image.buffer, 0, size));
      if (!slot.buffer || slot.buffer.size < size) {
        if (slot.buffer) rt.pool.release(slot.buffer);
        slot.buffer = rt.pool.acquire(size, GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST, 'uniforms');
        slot.image = new Uint8Array(0);
        slot.kernel = null;
      }
      if (!sameBytes(slot.image, image)) {
        slot.image = image.slice();
        this.stamps[this.cursor - 1] = ++this.clock;
        rt.counters.uniformWrite++;
        rt.device.queue.writeBuffer(slot.buffer, 0, slot.image as Uint8Array<ArrayBuffer>);
      }
    }
    // The buffers of every binding in order; when they are the ones this position bound last time,
    // its bind groups are used as they are (no cache keys built, nothing looked up).
    const bindings = k.bindings;
    const cur = slot.cur.length === bindings.length ? slot.cur : (slot.cur = new Array<GPUBuffer>(bindings.length));
    let same = slot.kernel === k;
    for (let i = 0; i < bindings.length; i++) {
      const b = bindings[i];
      let buf: GPUBuffer;
      if (b.kind === 'uniform') buf = slot.buffer!;
      else {
        const r = resources[b.name];
        if (!r) throw new WebinferError(`${k.shader}:${k.entry}: no resource given for binding '${b.name}'`);
        buf = r instanceof Tensor ? r.buffer : r;
      }
      cur[i] = buf;
      if (same && slot.bufs[i] !== buf) same = false;
    }
    if (!same) {
      rt.counters.groupChange++;
      slot.groups = [];
      for (let g = 0; g < k.groups.length; g++) {
        const gb: GPUBuffer[] = [], gs: number[] = [];
        for (let i = 0; i < bindings.length; i++) if (bindings[i].group === g) { gb.push(cur[i]); gs.push(bindings[i].binding); }
        slot.groups.push(rt.bindGroup(k.groups[g], gb, gs));
      }
      slot.kernel = k;
      slot.bufs = cur.slice();
    }
    rt.record(k, slot.groups, workgroups);
  }

  destroy(): void {
    for (const s of this.slots) if (s.buffer) this.rt.pool.release(s.buffer);
    this.slots.length = 0;
  }
}

/**
 * What a captured recording did (Runtime.capture): its dispatches in order, with their bind groups and
 * workgroup counts, the GPU-only scratch buffers they bound, and the span of DispatchCache positions
 * whose uniform buffers they bound. Replayed by Runtime.replay while those uniforms stay as they were.
 * It owns nothing: the buffers it binds belong to their makers (a model, a plan, the pool).
 */
export class StepGraph {
  readonly entries: { k: Kernel; groups: readonly GPUBindGroup[]; workgroups: number | readonly [number, number, number] | { indirect: GPUBuffer; offset: number } }[] = [];
  readonly scratch = new Set<GPUBuffer>();
  /** Why it cannot be replayed, or null. */
  taint: string | null = null;
  end = 0;
  stamp = 0;
  constructor(readonly dc: DispatchCache, readonly start: number) {}
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.byteLength !== b.byteLength) return false;
  for (let i = 0; i < a.byteLength; i++) if (a[i] !== b[i]) return false;
  return true;
}
