// Every WGSL source, inlined at build time from shaders/*.wgsl (vite's ?raw), so the very same text
// reaches the browser bundle, Deno (through dist/webinfer.js) and Node (vitest runs through vite).
// A program is the concatenation of a few files (shared helpers first); compile errors are mapped
// back to file:line.
import dtype from '../shaders/dtype.wgsl?raw';
import attnCommon from '../shaders/attn_common.wgsl?raw';
import sdpaNaive from '../shaders/sdpa_naive.wgsl?raw';
import flashCore from '../shaders/flash_core.wgsl?raw';
import flashDense from '../shaders/flash_dense.wgsl?raw';
import reducePortable from '../shaders/reduce_portable.wgsl?raw';
import reduceSubgroup from '../shaders/reduce_subgroup.wgsl?raw';
import benchCeiling from '../shaders/bench_ceiling.wgsl?raw';
import mergeStates from '../shaders/merge_states.wgsl?raw';
import pagedCache from '../shaders/paged_cache.wgsl?raw';
import flashPaged from '../shaders/flash_paged.wgsl?raw';
import pagedDecode from '../shaders/paged_decode.wgsl?raw';
import pagedDecodeSg from '../shaders/paged_decode_sg.wgsl?raw';
import pagedDecodeIo from '../shaders/paged_decode_io.wgsl?raw';
import mla from '../shaders/mla.wgsl?raw';

export const SHADER_FILES: Readonly<Record<string, string>> = {
  'dtype.wgsl': dtype,
  'attn_common.wgsl': attnCommon,
  'sdpa_naive.wgsl': sdpaNaive,
  'flash_core.wgsl': flashCore,
  'flash_dense.wgsl': flashDense,
  'reduce_portable.wgsl': reducePortable,
  'reduce_subgroup.wgsl': reduceSubgroup,
  'bench_ceiling.wgsl': benchCeiling,
  'merge_states.wgsl': mergeStates,
  'paged_cache.wgsl': pagedCache,
  'flash_paged.wgsl': flashPaged,
  'paged_decode.wgsl': pagedDecode,
  'paged_decode_sg.wgsl': pagedDecodeSg,
  'paged_decode_io.wgsl': pagedDecodeIo,
  'mla.wgsl': mla,
};

export const PROGRAMS: Readonly<Record<string, readonly string[]>> = {
  sdpa_naive: ['dtype.wgsl', 'attn_common.wgsl', 'sdpa_naive.wgsl'],
  sdpa_flash: ['dtype.wgsl', 'attn_common.wgsl', 'flash_dense.wgsl', 'flash_core.wgsl', 'reduce_portable.wgsl'],
  sdpa_flash_subgroup: ['dtype.wgsl', 'attn_common.wgsl', 'flash_dense.wgsl', 'flash_core.wgsl', 'reduce_subgroup.wgsl'],
  bench_ceiling: ['bench_ceiling.wgsl'],
  merge_states: ['dtype.wgsl', 'merge_states.wgsl'],
  paged_cache: ['dtype.wgsl', 'paged_cache.wgsl'],
  paged_flash: ['dtype.wgsl', 'attn_common.wgsl', 'flash_paged.wgsl', 'flash_core.wgsl', 'reduce_portable.wgsl'],
  mla: ['dtype.wgsl', 'mla.wgsl'],
  paged_decode: ['dtype.wgsl', 'attn_common.wgsl', 'paged_decode_io.wgsl', 'paged_decode.wgsl'],
  paged_decode_sg: ['dtype.wgsl', 'attn_common.wgsl', 'paged_decode_io.wgsl', 'paged_decode_sg.wgsl'],
  paged_flash_subgroup: ['dtype.wgsl', 'attn_common.wgsl', 'flash_paged.wgsl', 'flash_core.wgsl', 'reduce_subgroup.wgsl'],
};
