// dawnNodeFlags (src/serve/dawn.ts): the toggles `webinfer serve` and the benchmarks give dawn.node, one
// entry a key (dawn.node keeps one value a key and splits it on commas).
import { describe, expect, it } from 'vitest';
import { dawnNodeFlags } from '../../src/index';

describe('dawnNodeFlags', () => {
  it('turns on f16 and the subgroup matrices by default, timestamps left rounded', () => {
    expect(dawnNodeFlags()).toEqual(['enable-dawn-features=allow_unsafe_apis,vulkan_enable_f16_on_nvidia']);
  });
  it('drops what is turned off, and adds the exact timestamps as a disable key of its own', () => {
    expect(dawnNodeFlags({ subgroupMatrix: false })).toEqual(['enable-dawn-features=vulkan_enable_f16_on_nvidia']);
    expect(dawnNodeFlags({ subgroupMatrix: false, f16: false })).toEqual([]);
    expect(dawnNodeFlags({ f16: false, exactTimestamps: true })).toEqual(['enable-dawn-features=allow_unsafe_apis', 'disable-dawn-features=timestamp_quantization']);
  });
});
