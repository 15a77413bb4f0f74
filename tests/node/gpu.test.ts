// Runs the shared GPU cases in Node through dawn.node (the `webgpu` package). The Vulkan driver is
// chosen by VK_ICD_FILENAMES (SwiftShader or lavapipe) and named by WEBINFER_RUNTIME.
import { beforeAll, afterAll, describe, it } from 'vitest';
import { create, globals } from 'webgpu';
import { createEngine, type Engine } from '../../src/index';
import { allCases, type CaseContext } from '../cases/index';

Object.assign(globalThis, globals);
const gpu = create([]);
const runtime = process.env.WEBINFER_RUNTIME ?? 'node';

describe(runtime, () => {
  let engine: Engine;
  const notes: string[] = [];
  beforeAll(async () => {
    engine = await createEngine({ gpu, poisonOutputs: true });
  });
  afterAll(() => {
    engine?.destroy();
    for (const n of notes) console.log(`[${runtime}] ${n}`);
  });
  const ctx = (): CaseContext => ({
    engine,
    runtime,
    newEngine: (opts) => createEngine({ ...opts, gpu, poisonOutputs: true }),
    note: (m) => notes.push(m),
  });
  for (const c of allCases) it(c.name, () => c.run(ctx()));
});
