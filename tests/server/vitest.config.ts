import { defineConfig } from 'vitest/config';
import base from '../../vitest.config';

// The HTTP server's tests (`webinfer serve`): the transport against a test double (CPU only) and the
// goldens served and driven by the official openai client (GPU, through dawn.node). The main config's
// settings (one worker: the software adapters want both cores) with this folder's files only.
export default defineConfig({ ...base, test: { ...base.test, include: ['tests/server/**/*.test.ts'] } });
