import { copyFileSync, existsSync, mkdirSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { defineConfig, type Plugin } from 'vite';
import { resolve } from './vite.config.ts';

// The demo page (demo/): the library, the shared test cases and the benchmark suites bundled from
// source into dist-demo/ (a build output, gitignored). `base: './'` keeps every URL relative, so the
// folder can be served from any path (and the Playwright suite serves it under /dist-demo/).

/** Whole folders of ../shared the page opens by URL: the goldens (the Check's whole-model table, a tiny
 *  model to chat with) and the other tiny models its Model section offers (a GGUF file, an MLX 4-bit
 *  folder, an encoder and a speech model). */
const PAGE_FOLDERS = ['goldens', 'goldens-quant/gguf-llama-q4-k-m', 'goldens-quant/mlx-llama-4bit', 'goldens-layers/bert-padded-batch',
  'goldens-layers/whisper-tiny-random'];

/** The files tests/cases fetch through ctx.fixture (grep `fixture(` there: model.cases' golden() and
 *  quantFolder(), the DeepSeek fuzz, the GGUF, Whisper and encoder cases, faults), so every case the Check lists runs in
 *  the page. A file ../shared lacks is left out of the manifest; its case says it needs the test suite. */
const CASE_FIXTURES: [folders: string[], files: string[]][] = [
  [['llama-gqa', 'mistral-window8', 'qwen3-qknorm-tied', 'deepseek-v2-moe', 'deepseek-v3-yarn-moe'].map((n) => `goldens/${n}`),
    ['config.json', 'model.safetensors', 'golden.json']],
  [['llama-q8-0', 'llama-q4-0', 'llama-q4-k-m', 'llama-q5-mix', 'qwen3-q8-0', 'qwen3-q4-0', 'qwen3-q4-k-m', 'qwen3-q5-mix'].map((n) => `goldens-quant/gguf-${n}`),
    ['config.hf.json', 'golden.json', 'model.gguf']],
  [['mlx-llama-4bit', 'awq-llama-4bit-g128', 'gptq-llama-4bit-g128', 'mlx-llama-8bit', 'fp8-qwen3', 'fp8-deepseek-v3'].map((n) => `goldens-quant/${n}`),
    ['config.json', 'model.safetensors', 'golden.json']],
  [['gemma2-softcap-window', 'gptoss-sinks-window-moe', 'bert-padded-batch', 'modernbert-local-global', 't5-relbias'].map((n) => `goldens-layers/${n}`),
    ['config.json', 'model.safetensors', 'golden.json']],
  [['goldens-layers/whisper-tiny-random'], ['config.json', 'generation_config.json', 'model.safetensors', 'golden.json']],
  [['goldens-layers/whisper-frontend'], ['preprocessor_config.json', 'golden.json']],
];

/** Every file of a folder, relative to `root`. */
function filesUnder(root: string, dir: string): string[] {
  return readdirSync(join(root, dir), { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? filesUnder(root, `${dir}/${e.name}`) : [`${dir}/${e.name}`]));
}

/** Copies what the page fetches from ../shared into <out>/shared/, with shared/manifest.json listing
 *  every file copied: the page's fixture loader names a file that is not there rather than fetching a
 *  server's fallback page. */
function copyGoldens(): Plugin {
  return {
    name: 'copy-goldens',
    apply: 'build',
    writeBundle(options) {
      const src = fileURLToPath(new URL('../shared', import.meta.url));
      if (!existsSync(join(src, 'goldens'))) throw new Error(`the demo needs ${join(src, 'goldens')} (the shared folder beside the checkout)`);
      const files = new Set<string>();
      for (const dir of PAGE_FOLDERS) if (existsSync(join(src, dir))) for (const f of filesUnder(src, dir)) files.add(f);
      const lacking: string[] = [];
      for (const [dirs, names] of CASE_FIXTURES) {
        for (const f of dirs.flatMap((d) => names.map((n) => `${d}/${n}`))) (existsSync(join(src, f)) ? files.add(f) : lacking.push(f));
      }
      let bytes = 0;
      for (const f of files) {
        mkdirSync(dirname(join(options.dir!, 'shared', f)), { recursive: true });
        copyFileSync(join(src, f), join(options.dir!, 'shared', f));
        bytes += statSync(join(src, f)).size;
      }
      writeFileSync(join(options.dir!, 'shared', 'manifest.json'), `${JSON.stringify({ files: [...files].sort() }, null, 1)}\n`);
      if (lacking.length) this.warn(`../shared lacks ${lacking.length} files the cases read (${lacking.slice(0, 3).join(', ')}…): the Check lists their cases as needing the test suite`);
      if (bytes > 80e6) this.warn(`the demo ships ${(bytes / 1e6).toFixed(0)} MB of shared files`);
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
    // No PLUGIN_TIMINGS report (as the library's build): a slow machine's plugin times are nobody's business.
    rolldownOptions: { checks: { bundlerTimings: false } },
  },
  preview: { port: 4173, strictPort: false },
});
