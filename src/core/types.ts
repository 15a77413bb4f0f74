// Public option and result types (API.md).
import type { Tensor } from './tensor.js';

export interface AttentionOptions {
  causal?: boolean;
  scale?: number;
  softcap?: number;
  slidingWindow?: number;
  /** With slidingWindow: keys on both sides, |i_abs − j| < slidingWindow (an encoder's local layers, ModernBERT's). */
  windowBothSides?: boolean;
  /** One per query head. */
  alibiSlopes?: Float32Array | number[];
  /** Learned sink logits, one per query head. */
  sinks?: Float32Array | number[];
}

export type SdpaBackend = 'auto' | 'flash' | 'naive';

export interface SdpaOptions extends AttentionOptions {
  /** u32 0/1 (bool, 1 = attend) or f32 additive, broadcastable to [B, Hq, Lq, Lk]. */
  mask?: Tensor;
  backend?: SdpaBackend;
}

export interface EngineFeatures {
  /** `shader-f16` arithmetic is available (f16 storage works everywhere without it). */
  readonly f16: boolean;
  readonly subgroups: boolean;
  /** The adapter's subgroup size when it reports a single one; kernels still read it at run time. */
  readonly subgroupSize?: number;
  readonly subgroupMinSize?: number;
  readonly subgroupMaxSize?: number;
  readonly timestampQuery: boolean;
  /** The subgroup-matrix configurations the device offers (`chromium-experimental-subgroup-matrix`:
   *  tensor cores through Vulkan cooperative matrices, Apple's simdgroup matrices); empty without it. */
  readonly subgroupMatrix: readonly SubgroupMatrixConfig[];
  /** The WGSL language feature packed_4x8_integer_dot_product (dot4I8Packed ...): the quantized GEMV on
   *  8-bit activations (PlanLinearOptions.quantPath 'idot') compiles only where it is. */
  readonly intDot4: boolean;
}

/** Which flash tile runs (engine.tuning.flashVariant): 'auto' picks the subgroup-matrix tile for f16 data
 *  where the adapter has subgroup matrices, then the subgroup tile where it has subgroups, else portable. */
export type FlashVariantChoice = 'auto' | 'subgroup' | 'portable' | 'subgroup-matrix';

/** One subgroup-matrix shape: an M×K `componentType` left times a K×N right, into an M×N `resultComponentType`. */
export interface SubgroupMatrixConfig {
  readonly componentType: string;
  readonly resultComponentType: string;
  readonly M: number;
  readonly N: number;
  readonly K: number;
}

export interface EngineLimits {
  readonly maxComputeWorkgroupStorageSize: number;
  readonly maxStorageBufferBindingSize: number;
  readonly maxBufferSize: number;
  readonly maxStorageBuffersPerShaderStage: number;
  readonly maxComputeInvocationsPerWorkgroup: number;
  readonly maxComputeWorkgroupSizeX: number;
  readonly maxComputeWorkgroupsPerDimension: number;
  readonly maxUniformBufferBindingSize: number;
}

export interface EngineOptions {
  /** The WebGPU entry point; defaults to navigator.gpu. In Node pass `create([])` from 'webgpu'. */
  gpu?: GPU;
  /** Use an existing device (its features and limits are taken as they are). */
  device?: GPUDevice;
  powerPreference?: GPUPowerPreference;
  /** Fill every output buffer with NaN bit patterns before a kernel writes it (tests). */
  poisonOutputs?: boolean;
  /** Receives warnings (for instance an `auto` fallback), once per reason; default console.warn. */
  onWarning?: (message: string) => void;
}
