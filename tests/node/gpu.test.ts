// Runs the shared GPU cases in Node through dawn.node (the `webgpu` package). The Vulkan driver is
// chosen by VK_ICD_FILENAMES (SwiftShader or lavapipe) and named by WEBINFER_RUNTIME.
import { readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
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
    fixture: async (path) => new Uint8Array(await readFile(join(dirname(fileURLToPath(import.meta.url)), '../../../shared', path))),
  });
  for (const c of allCases) it(c.name, () => c.run(ctx()));

  // Node only: dawn.node destroys its instance when the object from create() is collected; an
  // engine made from an otherwise unreferenced create([]) must keep working through a full GC.
  it('node › the engine keeps the GPU object it was made from alive across garbage collection', async () => {
    const gc = (globalThis as { gc?: () => void }).gc;
    if (!gc) throw new Error('run with --expose-gc (vitest.config.ts sets it)');
    const e = await createEngine({ gpu: create([]) });
    for (let i = 0; i < 3; i++) { gc(); await new Promise((r) => setTimeout(r, 10)); }
    const back = await e.tensor(new Float32Array([1, 2, 3]), [3]).toArray();
    if (back[2] !== 3) throw new Error(`read back ${Array.from(back)}`);
    e.destroy();
  });
});
