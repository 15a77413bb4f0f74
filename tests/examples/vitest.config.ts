import { defineConfig } from 'vitest/config';
import base from '../../vitest.config';

// The README's examples run as users run them (node examples/<name>.mjs <model>), and the page example
// in Chromium: the main config's settings (one worker) with this folder's files only.
export default defineConfig({ ...base, test: { ...base.test, include: ['tests/examples/**/*.test.ts'] } });
