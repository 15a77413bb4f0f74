import { builtinModules } from 'node:module';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';
import { resolve } from './vite.config';

// The benchmark CLI as one self-contained file (webinfer and its WGSL inlined); only the `webgpu`
// package and Node's built-ins stay imports. That file is what travels to the GPU machine.
export default defineConfig({
  resolve: { alias: { ...(resolve?.alias as Record<string, string>), webinfer: fileURLToPath(new URL('./src/index.ts', import.meta.url)) } },
  build: {
    target: 'node20',
    outDir: '.cache/device',
    emptyOutDir: true,
    minify: false,
    ssr: true,
    rollupOptions: {
      input: 'bench/cli.ts',
      external: ['webgpu', ...builtinModules, ...builtinModules.map((m) => `node:${m}`)],
      output: { entryFileNames: 'bench.mjs', format: 'es' },
    },
  },
});
