// The float64 CPU reference of every operation (SPEC.md), one module per family; `reference` in the
// public API. The only copy of the math that tests, the workload, the benchmark and the demo check against.
export * from './attention.js';
export * from './mla.js';
export * from './linear.js';
export * from './ops.js';
export * from './moe.js';
export * from './quant.js';
export * from './quant_random.js';
