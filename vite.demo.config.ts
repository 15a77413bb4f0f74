import { cpSync, existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { defineConfig, type Plugin } from 'vite';
import { resolve } from './vite.config.ts';

// The demo page (demo/): the library, the shared test cases and the benchmark suites bundled from
// source into dist-demo/ (a build output, gitignored). `base: './'` keeps every URL relative, so the
// folder can be served from any path (and the Playwright suite serves it under /dist-demo/).
/** The goldens (tiny models and what HF computes for them) beside the page, for its Model section, and
 *  quantized goldens the page can open by URL: a GGUF file and an MLX 4-bit folder; an encoder and a
 *  speech model of goldens-layers. */
function copyGoldens(): Plugin {
  return {
    name: 'copy-goldens',
    apply: 'build',
    writeBundle(options) {
      const src = fileURLToPath(new URL('../shared/goldens', import.meta.url));
      if (!existsSync(src)) throw new Error(`the demo's Model section needs ${src} (the shared folder beside the checkout)`);
      cpSync(src, `${options.dir}/shared/goldens`, { recursive: true });
      for (const q of ['gguf-llama-q4-k-m', 'mlx-llama-4bit']) {
        const dir = fileURLToPath(new URL(`../shared/goldens-quant/${q}`, import.meta.url));
        if (existsSync(dir)) cpSync(dir, `${options.dir}/shared/goldens-quant/${q}`, { recursive: true });
      }
      // An encoder and a speech model for the Embeddings and Transcription panels.
      for (const q of ['bert-padded-batch', 'whisper-tiny-random']) {
        const dir = fileURLToPath(new URL(`../shared/goldens-layers/${q}`, import.meta.url));
        if (existsSync(dir)) cpSync(dir, `${options.dir}/shared/goldens-layers/${q}`, { recursive: true });
      }
    },
  };
}

export default defineConfig({
  plugins: [copyGoldens()],
  root: fileURLToPath(new URL('./demo', import.meta.url)),
  base: './',
  resolve: { alias: { ...(resolve?.alias as Record<string, string>), webinfer: fileURLToPath(new URL('./src/index.ts', import.meta.url)) } },
  // The Model section's Web Worker (demo/worker.ts) is an ES module worker: the library it bundles
  // splits into chunks (its Node-only imports stay dynamic), which the classic format cannot load.
  worker: { format: 'es' },
  build: {
    target: 'es2022',
    outDir: fileURLToPath(new URL('./dist-demo', import.meta.url)),
    emptyOutDir: true,
    sourcemap: true,
    minify: false,
  },
  preview: { port: 4173, strictPort: false },
});
