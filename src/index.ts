// webinfer: WebGPU attention engine. Public entry point (API.md).
/// <reference types="@webgpu/types" preserve="true" />
export { createEngine, Engine } from './engine.js';
export type { AdapterSummary, Bindable } from './engine.js';
export { Tensor, BufferPool } from './tensor.js';
export { WebinferError } from './errors.js';
export type { AttentionOptions, SdpaOptions, SdpaBackend, EngineFeatures, EngineLimits, EngineOptions } from './types.js';
export * from './dtype.js';
export * as reference from './reference.js';
export { formatCompilationMessages } from './pipeline.js';
export { TOLERANCES, compareToReference } from './check.js';
export type { Tolerance, Comparison } from './check.js';
export { rng, randn, randInt } from './random.js';
export { PagedKVCache } from './paged.js';
export type { PagedKVCacheOptions, AttentionMetadata } from './paged.js';
export { KVCacheManager } from './kv_manager.js';
export type { SequenceId, StepRequest, StepMetadata } from './kv_manager.js';
export { MLALayer, MLACache, fp8DsMlaRowBytes } from './mla.js';
export type { MLAOptions, MLACacheOptions, MLACacheDType, MLADecodeMetadata } from './mla.js';
