// The flags webinfer gives dawn.node (the `webgpu` package's `create(flags)`) when it makes the GPU
// itself: `webinfer serve`, and the benchmarks. ../shared/RUNTIMES.md: Dawn hides shader-f16 on NVIDIA's
// Vulkan driver unless the adapter is made with `vulkan_enable_f16_on_nvidia`, and offers its subgroup
// matrices (chromium-experimental-subgroup-matrix: the tensor cores, which the linear layers, flash and
// MLA tiles use) only with `allow_unsafe_apis`. Without them an H200's batch-32 decode step of a 1B bf16
// model ran its products on the GEMV: 22.5 ms of GPU time against 5.2 with them (issue 43). Elsewhere
// the toggles change nothing.

export interface DawnNodeFlagOptions {
  /** `allow_unsafe_apis`: Dawn's experimental subgroup matrices (default true). */
  subgroupMatrix?: boolean;
  /** `vulkan_enable_f16_on_nvidia`: shader-f16 on NVIDIA's Vulkan driver (default true). */
  f16?: boolean;
  /** Turn off Dawn's rounding of timestamps to 100 µs (default false: benchmarks set it). */
  exactTimestamps?: boolean;
}

/** dawn.node's flags for these options, one entry a key (its flags hold one value a key, comma-split). */
export function dawnNodeFlags(o: DawnNodeFlagOptions = {}): string[] {
  const enable = [...(o.subgroupMatrix ?? true ? ['allow_unsafe_apis'] : []), ...(o.f16 ?? true ? ['vulkan_enable_f16_on_nvidia'] : [])];
  return [
    ...(enable.length ? [`enable-dawn-features=${enable.join(',')}`] : []),
    ...(o.exactTimestamps ? ['disable-dawn-features=timestamp_quantization'] : []),
  ];
}
