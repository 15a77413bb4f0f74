// The model-building kernel families (GEMM/GEMV, norms, RoPE, activations, embedding, sampling), one
// module per family beside its WGSL in shaders/ops/; exported as `ops` from the package.
export * from './gemm.js';
export * from './norm.js';
export * from './rope.js';
export * from './elementwise.js';
export * from './embedding.js';
export * from './sample.js';
export * from './moe.js';
export * from './quant.js';
export * from './audio.js';
export * from './conv.js';
export * from './short_conv.js';
export * from './pool.js';
