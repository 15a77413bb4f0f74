// webinfer: WebGPU attention engine. Public entry point (API.md).
/// <reference types="@webgpu/types" preserve="true" />
export { createEngine, Engine } from './engine.js';
export type { AdapterSummary, Bindable } from './core/runtime.js';
export { Tensor, BufferPool } from './core/tensor.js';
export { WebinferError } from './core/errors.js';
export type { AttentionOptions, SdpaOptions, SdpaBackend, EngineFeatures, EngineLimits, EngineOptions } from './core/types.js';
export * from './core/dtype.js';
export * as reference from './reference/index.js';
export { formatCompilationMessages } from './core/pipeline.js';
export { TOLERANCES, compareToReference } from './core/check.js';
export type { Tolerance, Comparison } from './core/check.js';
export { rng, randn, randInt } from './core/random.js';
export { PagedKVCache } from './attention/paged_cache.js';
export type { PagedKVCacheOptions } from './attention/paged_cache.js';
export { AttentionPlan } from './attention/paged.js';
export type { AttentionMetadata, PlanAttentionOptions } from './attention/paged.js';
export { KVCacheManager } from './serve/kv_manager.js';
export type { SequenceId, StepRequest, StepMetadata } from './serve/kv_manager.js';
export { MLALayer, MLACache, MLADecodePlan, fp8DsMlaRowBytes } from './attention/mla.js';
export type { MLAOptions, MLACacheOptions, MLACacheDType, MLADecodeMetadata, MLASparseMetadata } from './attention/mla.js';
export * as ops from './ops/index.js';
