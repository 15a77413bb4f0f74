import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

// The shared test cases (and the default workload) as ES modules for Deno, Node and the Chromium page. The library itself stays an
// external import of 'webinfer', which those runtimes map to the built dist/webinfer.js: the browser
// and Deno suites test the artifact that users import.
const srcIndex = fileURLToPath(new URL('./src/index.ts', import.meta.url));

export default defineConfig({
  build: {
    target: 'es2022',
    outDir: '.cache/bundles',
    emptyOutDir: true,
    minify: false,
    lib: { entry: { cases: 'tests/cases/index.ts', workload: 'bench/workload.ts', plot: 'bench/plot.ts' }, formats: ['es'], fileName: (_f, name) => `${name}.js` },
    rollupOptions: { external: ['webinfer'] },
  },
  plugins: [{
    name: 'webinfer-external',
    enforce: 'pre',
    async resolveId(source, importer) {
      if (!importer || !source.endsWith('src/index')) return null;
      const r = await this.resolve(source, importer, { skipSelf: true });
      return r && r.id === srcIndex ? { id: 'webinfer', external: true } : null;
    },
  }],
});
