import { defineConfig } from '@playwright/test';

// Debian's Chromium with SwiftShader WebGPU (see shared RUNTIMES.md for why each flag is here).
export const CHROMIUM_ARGS = [
  '--no-sandbox', '--disable-background-networking', '--disable-component-update', '--disable-sync',
  '--no-first-run', '--disable-quic', '--disable-dev-shm-usage', '--enable-unsafe-webgpu',
  '--use-webgpu-adapter=swiftshader', '--use-angle=swiftshader', '--ignore-gpu-blocklist',
];

export default defineConfig({
  testDir: 'tests/browser',
  testMatch: /.*\.spec\.ts$/,
  workers: 1,
  fullyParallel: false,
  timeout: 180_000,
  // Its own folder: Playwright empties its outputDir when it starts, and the demo suite (which may run at
  // the same time, scripts/test-all.mjs) keeps its failure artefacts in test-results/demo.
  outputDir: 'test-results/chromium',
  reporter: [['list'], ['json', { outputFile: '.cache/results/chromium.json' }]],
  use: {
    headless: true,
    launchOptions: { executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium', args: CHROMIUM_ARGS },
  },
});
