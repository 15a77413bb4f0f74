// Every WGSL source, inlined at build time from shaders/*.wgsl (vite's ?raw), so the very same text
// reaches the browser bundle, Deno (through dist/webinfer.js) and Node (vitest runs through vite).
import sdpaNaive from '../shaders/sdpa_naive.wgsl?raw';

export const SHADER_SOURCES: Readonly<Record<string, string>> = {
  'sdpa_naive.wgsl': sdpaNaive,
};
