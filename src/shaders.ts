// Every WGSL source, inlined at build time from shaders/*.wgsl (vite's ?raw), so the very same text
// reaches the browser bundle, Deno (through dist/webinfer.js) and Node (vitest runs through vite).
// A program is the concatenation of a few files (shared helpers first); compile errors are mapped
// back to file:line.
import dtype from '../shaders/dtype.wgsl?raw';
import sdpaNaive from '../shaders/sdpa_naive.wgsl?raw';

export const SHADER_FILES: Readonly<Record<string, string>> = {
  'dtype.wgsl': dtype,
  'sdpa_naive.wgsl': sdpaNaive,
};

export const PROGRAMS: Readonly<Record<string, readonly string[]>> = {
  sdpa_naive: ['dtype.wgsl', 'sdpa_naive.wgsl'],
};
