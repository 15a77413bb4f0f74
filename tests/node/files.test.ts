// Node only (file handles are the host's): a model loaded from a path keeps no file open, after
// loadModel or after destroy (issue 29: loadSafetensors(path) kept its handle for the life of the
// process), and the same file object loads again. Linux's /proc says which files are open.
import { readdir, readFile, readlink } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { create, globals } from 'webgpu';
import { createEngine, loadCheckpoint, loadGGUF, loadSafetensors, type Engine } from '../../src/index';

Object.assign(globalThis, globals);
const shared = join(dirname(fileURLToPath(import.meta.url)), '../../../shared');
const hasProc = await readdir('/proc/self/fd').then(() => true, () => false);

async function held(path: string): Promise<number> {
  let n = 0;
  for (const fd of await readdir('/proc/self/fd')) {
    try { if (await readlink(`/proc/self/fd/${fd}`) === path) n++; } catch { /* closed meanwhile */ }
  }
  return n;
}

describe.runIf(hasProc)(`${process.env.WEBINFER_RUNTIME ?? 'node'} › files`, () => {
  let engine: Engine;
  beforeAll(async () => { engine = await createEngine({ gpu: create([]) }); });
  afterAll(() => engine?.destroy());

  it('loadSafetensors(path) → loadModel: the file is closed once the weights are on the GPU, and the same file loads again', async () => {
    const dir = join(shared, 'goldens/llama-gqa');
    const path = join(dir, 'model.safetensors');
    const config = JSON.parse(await readFile(join(dir, 'config.json'), 'utf8'));
    const file = await loadSafetensors(path);
    const a = await engine.loadModel({ config, weights: file });
    expect(await held(path)).toBe(0);
    a.destroy();
    const b = await engine.loadModel({ config, weights: file });
    expect(await held(path)).toBe(0);
    expect(b.weightBytes).toBe(a.weightBytes);
    b.destroy();
    expect(await held(path)).toBe(0);
  });

  it('loadCheckpoint(dir) and loadGGUF(path) → loadModel: nothing left open', async () => {
    const ckpt = await loadCheckpoint(join(shared, 'goldens/llama-gqa'));
    const m = await engine.loadModel({ config: ckpt.config, weights: ckpt.weights });
    expect(await held(join(shared, 'goldens/llama-gqa/model.safetensors'))).toBe(0);
    m.destroy();
    const path = join(shared, 'goldens-quant/gguf-llama-q8-0/model.gguf');
    const g = await loadGGUF(path);
    const q = await engine.loadModel({ weights: g });
    expect(await held(path)).toBe(0);
    q.destroy();
  });
});
