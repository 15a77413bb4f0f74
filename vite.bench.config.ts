import { copyFileSync, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { builtinModules } from 'node:module';
import { fileURLToPath } from 'node:url';
import { brotliCompressSync, constants } from 'node:zlib';
import { defineConfig, type Plugin } from 'vite';
import { resolve } from './vite.config';

// onnxruntime-web's `webgpu` build (the peer, bench/ort.ts) inlines its JS glue but loads this wasm
// at run time. It travels beside bench.mjs brotli-compressed (27 MB → 4.7 MB: the GPU machine's carry
// limit is shared with the 33 MB runtime folder); bench/ort.ts decompresses it and hands ORT the bytes.
const ORT_WASM = 'ort-wasm-simd-threaded.asyncify.wasm';

function copyOrtWasm(): Plugin {
  return {
    name: 'copy-ort-wasm',
    apply: 'build',
    writeBundle(options) {
      const dir = options.dir ?? '.cache/device';
      const src = fileURLToPath(new URL(`./node_modules/onnxruntime-web/dist/${ORT_WASM}`, import.meta.url));
      // Compressing takes seconds: keep the result beside the package, keyed by the source's size and time.
      const st = statSync(src);
      const cached = fileURLToPath(new URL(`./node_modules/.cache/webinfer-bench/${ORT_WASM}.${st.size}-${Math.round(st.mtimeMs)}.br`, import.meta.url));
      if (!existsSync(cached)) {
        mkdirSync(dirname(cached), { recursive: true });
        writeFileSync(cached, brotliCompressSync(readFileSync(src), { params: { [constants.BROTLI_PARAM_QUALITY]: 9 } }));
      }
      mkdirSync(dir, { recursive: true });
      copyFileSync(cached, `${dir}/${ORT_WASM}.br`);
    },
  };
}

// The benchmark CLI (and the GPU test pass) as self-contained files (webinfer, its WGSL and onnxruntime-web's JS inlined);
// only the `webgpu` package and Node's built-ins stay imports. That file and the wasm beside it are
// what travels to the GPU machine.
export default defineConfig({
  resolve: { alias: { ...(resolve?.alias as Record<string, string>), webinfer: fileURLToPath(new URL('./src/index.ts', import.meta.url)) } },
  ssr: { noExternal: true, external: ['webgpu'] },
  plugins: [copyOrtWasm()],
  build: {
    target: 'node20',
    outDir: '.cache/device',
    emptyOutDir: true,
    minify: false,
    ssr: true,
    assetsInlineLimit: 0,
    rollupOptions: {
      // The GPU test pass (tests/device/run.ts) travels with it: the cases no CPU adapter here runs.
      input: { bench: 'bench/cli.ts', gputest: 'tests/device/run.ts', serve: 'bench/serve.ts', make_gguf: 'bench/make_gguf_gptoss.ts' },
      external: ['webgpu', ...builtinModules, ...builtinModules.map((m) => `node:${m}`)],
      output: { entryFileNames: '[name].mjs', chunkFileNames: '[name]-[hash].mjs', format: 'es' },
    },
  },
});
