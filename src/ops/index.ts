// The model-building kernel families (GEMM/GEMV, norms, RoPE, activations, embedding, sampling), one
// module per family beside its WGSL in shaders/ops/; exported as `ops` from the package.
// gemm (helper B1) ↓
// other ops (helper B2) ↓
export {};
