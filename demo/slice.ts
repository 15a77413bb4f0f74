// The Check section's default slice of the test cases, by name: kept apart from the page's code so a
// unit test can hold every name against tests/cases (a renamed case fails there, in seconds).

/**
 * A slice of the SPEC §6 matrix covering every operation family, small enough for a software adapter
 * (about two minutes on SwiftShader, each case a few seconds): dtypes and the tensor round trip; dense
 * SDPA on both kernels (lengths, GQA, options, masks, extremes, f16/bf16) and merging; the paged cache
 * (writes, mixed batches, block sizes, split-KV decode, the decode kernel this adapter has); MLA (cache
 * rows, absorbed decode, prefill, sparse decode); GEMV/GEMM over f32, f16 and bf16 weights and over
 * quantized ones (Q4_K, Q6_K and Q8_0 rows, the RMSNorm folded in); RMSNorm and LayerNorm; RoPE (half
 * and interleaved pairs, YaRN); MoE routing and experts; argmax and sampling; and one whole model
 * against HF transformers (llama-gqa, its fixture shipped beside the page).
 * The flash cases run the variant this adapter has ('subgroup' needs the subgroups feature).
 */
export function sliceNames(subgroups: boolean): string[] {
  const v = subgroups ? 'subgroup' : 'portable';
  return [
    "engine › exposes the adapter's features and requests its limits",
    'tensor › f16 / bf16 / fp8e4m3 from bit patterns and from Float32Array (converted RNE on upload)',
    'tensor › known bit patterns survive the GPU round trip (NaN, ±0, subnormals, fp8 saturation)',
    'validation › sdpa(): tensor ranks, shapes and dtypes',
    'sdpa naive › lengths 1, 2, 3, powers of two and odd (Lq == Lk, causal and not)',
    'sdpa naive › softcap, ALiBi and learned sinks, alone and combined',
    'sdpa naive › bool masks, broadcast from [Lk], [Lq,Lk], [B,1,Lq,Lk], [1,Hq,1,Lk]',
    'sdpa naive › fully masked rows give out 0 and lse -inf, also with sinks',
    'sdpa naive › bf16 storage',
    `sdpa flash › ${v}: GQA ratios 1, 2, 4, 7, 8 (causal)`,
    `sdpa flash › ${v}: lengths 1, 2, 3, powers of two and odd (Lq == Lk, causal and not)`,
    `sdpa flash › ${v}: sliding window, with and without causal, Lq < Lk`,
    `sdpa flash › ${v}: softcap, ALiBi and learned sinks, alone and combined`,
    `sdpa flash › ${v}: fully masked rows give out 0 and lse -inf, also with sinks`,
    `sdpa flash › ${v}: numerical extremes: q/k standard deviation 10 and 1e-4, no NaN or Inf`,
    `sdpa flash › ${v}: f16 storage (loads through unpack2x16float, no shader-f16 needed)`,
    'sdpa flash › flash equals naive on the same inputs (GQA, causal, mask, sinks)',
    'merge › random states with empty ones (-inf, +inf, both), f32 / f16 / bf16, odd sizes',
    'merge › merging the states of two key halves equals attention over all keys',
    'paged › reshapeAndCache stores exactly the rounded rows (f32, f16, bf16, fp8 with scales), skips slot -1',
    'paged › mixed batch: decode, prefill and chunked prefill with context, shuffled blocks, padding tokens',
    'paged › block sizes 1, 16, 32, 64, 128 and sequences crossing block boundaries',
    'paged › split-KV decode (partitions merged by LSE) equals unsplit, with sinks and a window',
    `paged › ${v} decode kernel: GQA 8 and 7, D 128/64, Dv != D, f32/f16/fp8 caches, long contexts split and merged`,
    'mla › cacheWrite stores [kv_c | k_pe] rows in f32, f16, bf16 and fp8_ds_mla (656-byte rows for L 512, R 64; a partial scale group for L 192 and 64)',
    'mla › absorbed decode equals the reference and unabsorbed attention (f32, f16, bf16 caches)',
    'mla › prefill with cached context in chunks, merged by LSE, equals the reference (f32, fp8_ds_mla)',
    'mla › sparse decode: top-k request-local positions (-1, out of range, duplicates, none valid) equal the reference',
    'linear › f32 and f16 weights (f16 also from raw bits), GEMV and GEMM, N 24 / 100, K 40',
    'linear › bf16 weights, M 1, 2, 3, 7, 16, 33 and 70 (the default plans: GEMV up to 64, GEMM above), bias, N 100, K 136',
    'quant › a fused projection of several types (Q4_K | Q6_K | Q8_0 rows, as GGUF mixes have them) and the RMSNorm folded into the quantized GEMV',
    'ops › rmsNorm: dense rows of several lengths, f32/f16/bf16 weights, rows < tensor rows, both reductions',
    'ops › layerNorm: dense rows (one chunk and chunked), f32/bf16 weight and bias, no bias, strided in place, offset mean, validation',
    'ops › rope: half pairing on the q and k heads of a fused qkv buffer in one call, host and device positions (clamped), rows < tensor rows',
    'ops › rope: interleaved pairs (DeepSeek): q_pe after q_nope in each head, k_pe after the latent, a YaRN-scaled table',
    'moe › route V2: softmax greedy (topK 1, 2, 6; E 4, 16), scaling factor, norm_topk_prob ignored as transformers does',
    'moe › moe f32 weights: rows 1, 3, 9 × E 4, 8, 16 × topK 1, 2, 6 (H 64, I 40) on both product kernels',
    'ops › argmax: ties to the lowest index, NaN never wins, -inf and +-0 rows, rows < tensor rows',
    'ops › sample: the reference draw exactly, with temperature, topK, topP and both, hazard rows; greedy settings are argmax',
    'models › llama-gqa: prefill logits at every position within 1e-3·max|logit| of HF; greedy tokens identical, together and alone (f32 weights)',
  ];
}

