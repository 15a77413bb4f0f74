// webinfer: WebGPU attention engine. Public entry point (API.md).
export { createEngine, Engine } from './engine';
export type { AdapterSummary, Bindable } from './engine';
export { Tensor, BufferPool } from './tensor';
export { WebinferError } from './errors';
export type { AttentionOptions, SdpaOptions, SdpaBackend, EngineFeatures, EngineLimits, EngineOptions } from './types';
export * from './dtype';
export * as reference from './reference';
export { formatCompilationMessages } from './pipeline';
export { TOLERANCES, compareToReference } from './check';
export type { Tolerance, Comparison } from './check';
export { rng, randn, randInt } from './random';
export { PagedKVCache } from './paged';
export type { PagedKVCacheOptions, AttentionMetadata } from './paged';
export { KVCacheManager } from './kv_manager';
export type { SequenceId, StepRequest, StepMetadata } from './kv_manager';
export { MLALayer, MLACache, fp8DsMlaRowBytes } from './mla';
export type { MLAOptions, MLACacheOptions, MLACacheDType, MLADecodeMetadata } from './mla';
