import { fileURLToPath } from 'node:url';
import { defineConfig } from '@playwright/test';
import { CHROMIUM_ARGS } from '../../playwright.config';

// The built demo page (dist-demo/, `npm run build:demo`) in Debian's Chromium on SwiftShader, the same
// browser and flags as the chromium suite. One worker: the page's steps share one GPU device.
export default defineConfig({
  testDir: '.',
  testMatch: /.*\.spec\.ts$/,
  workers: 1,
  fullyParallel: false,
  timeout: 420_000,
  outputDir: fileURLToPath(new URL('../../test-results/demo', import.meta.url)),
  reporter: [['list'], ['json', { outputFile: fileURLToPath(new URL('../../.cache/results/demo.json', import.meta.url)) }]],
  use: {
    headless: true,
    viewport: { width: 1280, height: 900 },
    // Chromium's fake camera, allowed without a prompt: the chat's Take a photo… gets its test pattern.
    launchOptions: { executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
      args: [...CHROMIUM_ARGS, '--use-fake-device-for-media-stream', '--use-fake-ui-for-media-stream'] },
  },
});
