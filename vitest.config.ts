import { defineConfig } from 'vitest/config';
import { resolve } from './vite.config';

// Unit tests (pure CPU: converters, float64 reference) and the GPU cases through dawn.node.
// One worker: dawn.node busy-waits while the GPU works, and the software adapters want both cores.
export default defineConfig({
  resolve,
  test: {
    include: ['tests/unit/**/*.test.ts', 'tests/node/**/*.test.ts'],
    pool: 'forks',
    fileParallelism: false,
    maxWorkers: 1,
    // gpu.test.ts forces garbage collection to check the engine keeps dawn.node's GPU object alive.
    execArgv: ['--expose-gc'],
    // A hang guard, not a speed test: Mesa's lavapipe compiles a decode-kernel variant in 20-70 s on a
    // cold shader cache (a fresh CI machine), and a case compiles several.
    testTimeout: 300_000,
    hookTimeout: 60_000,
  },
});
