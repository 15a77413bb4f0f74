import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

// dist/serve.js: the `webinfer serve` command (src/serve/cli.ts) for Node (bin/webinfer.mjs) and Deno
// (`deno run -A dist/serve.js`). The library stays an import of ./webinfer.js beside it, so the command
// and a program that imports webinfer share one copy of every class and kernel.
const srcIndex = fileURLToPath(new URL('./src/index.ts', import.meta.url));

export default defineConfig({
  build: {
    target: 'es2022',
    outDir: 'dist',
    emptyOutDir: false,
    sourcemap: true,
    minify: false,
    // No PLUGIN_TIMINGS report: a slow machine's plugin times are not the user's business.
    rolldownOptions: { checks: { bundlerTimings: false } },
    lib: { entry: 'src/serve/cli.ts', formats: ['es'], fileName: () => 'serve.js' },
    rollupOptions: { external: ['./webinfer.js'] },
  },
  plugins: [{
    name: 'webinfer-beside',
    enforce: 'pre',
    async resolveId(source, importer) {
      if (!importer) return null;
      const r = await this.resolve(source, importer, { skipSelf: true });
      return r && r.id === srcIndex ? { id: './webinfer.js', external: true } : null;
    },
  }],
});
