import { fileURLToPath } from 'node:url';
import { defineConfig, type UserConfig } from 'vite';

// wgsl_reflect's package.json sends Node-style resolution to a CommonJS file inside a "type": "module"
// package, which Node cannot load; its ES module build is the one that works everywhere.
export const resolve: UserConfig['resolve'] = {
  alias: { wgsl_reflect: fileURLToPath(new URL('./node_modules/wgsl_reflect/wgsl_reflect.module.js', import.meta.url)) },
};

// The library: one self-contained ES module (WGSL inlined via ?raw, wgsl_reflect bundled) that a
// browser bundle, Deno and Node all import. Type declarations come from `tsc -p tsconfig.build.json`.
export default defineConfig({
  resolve,
  build: {
    target: 'es2022',
    outDir: 'dist',
    emptyOutDir: false,
    sourcemap: true,
    minify: false,
    // No PLUGIN_TIMINGS report: a slow machine's plugin times are not the user's business.
    // The image decoders (fast-png, jpeg-js: src/vision/image.ts imports them on first use) stay inside
    // the one file: no chunk beside it for a page, a worker or Deno to resolve.
    rolldownOptions: { checks: { bundlerTimings: false }, output: { codeSplitting: false } },
    lib: { entry: 'src/index.ts', formats: ['es'], fileName: () => 'webinfer.js' },
  },
});
