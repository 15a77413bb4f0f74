// Local files are held open only while read, and directories and changed files are refused by name
// (issue 29: loadSafetensors(path) kept its handle after loadModel and destroy, and a directory gave
// EISDIR). Linux's /proc says which files this process holds; tests/node/files.test.ts loads models.
import { mkdir, mkdtemp, readdir, readlink, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeSafetensors, loadSafetensors } from '../../src/formats/safetensors';
import { loadGGUF } from '../../src/formats/gguf';
import { loadCheckpoint } from '../../src/formats/checkpoint';

const shared = join(dirname(fileURLToPath(import.meta.url)), '../../../shared');

/** The paths of the files this process holds open (Linux's /proc). */
async function openPaths(): Promise<string[]> {
  const out: string[] = [];
  for (const fd of await readdir('/proc/self/fd')) {
    try { out.push(await readlink(`/proc/self/fd/${fd}`)); } catch { /* closed meanwhile */ }
  }
  return out;
}
const hasProc = await readdir('/proc/self/fd').then(() => true, () => false);

describe.runIf(hasProc)('local files are held open only while read; directories and changed files are refused by name', () => {
  let tmp: string;
  beforeAll(async () => { tmp = await mkdtemp(join(tmpdir(), 'webinfer-files-')); });
  afterAll(async () => { await rm(tmp, { recursive: true, force: true }); });
  const held = async (path: string) => (await openPaths()).filter((p) => p === path).length;

  it('loadSafetensors(path): no handle after it returns, one while read, none after close(), and reading again reopens it', async () => {
    const path = join(tmp, 'a.safetensors');
    await writeFile(path, encodeSafetensors({ w: { dtype: 'F32', shape: [3], data: Float32Array.of(1, 2, 3) } }));
    const f = await loadSafetensors(path);
    expect(await held(path)).toBe(0);
    const first = await f.bytes('w');
    expect(await held(path)).toBe(1);
    await f.close!();
    await f.close!();
    expect(await held(path)).toBe(0);
    expect(await f.bytes('w')).toEqual(first);
    // close() while reads are in flight: they finish, then the handle goes.
    const reads = [f.bytes('w'), f.bytes('w')];
    const closing = f.close!();
    expect(await Promise.all(reads)).toEqual([first, first]);
    await closing;
    expect(await held(path)).toBe(0);
  });

  it('loadGGUF(path): no handle after it returns or after close(); tensors read again after close', async () => {
    const path = join(shared, 'goldens-quant/gguf-llama-q8-0/model.gguf');
    const g = await loadGGUF(path);
    expect(await held(path)).toBe(0);
    const name = [...g.tensors.keys()][1]!;
    const bytes = await g.tensorBytes(name);
    await g.close!();
    expect(await held(path)).toBe(0);
    expect(await g.tensorBytes(name)).toEqual(bytes);
    await g.close!();
    expect(await held(path)).toBe(0);
  });

  it('a directory is a named error in loadSafetensors, loadGGUF and loadCheckpoint (not EISDIR)', async () => {
    const dir = join(tmp, 'folder');
    await mkdir(join(dir, 'model.safetensors'), { recursive: true });
    await mkdir(join(tmp, 'dir.gguf'), { recursive: true });
    await expect(loadSafetensors(dir)).rejects.toThrow(`loadSafetensors: src: expected a readable safetensors file, got '${dir}' (a directory: loadCheckpoint reads a checkpoint folder)`);
    await expect(loadGGUF(dir)).rejects.toThrow(`loadGGUF: src: expected a readable GGUF file, got '${dir}' (a directory)`);
    await expect(loadCheckpoint(join(tmp, 'dir.gguf'))).rejects.toThrow(`loadGGUF: src: expected a readable GGUF file, got '${join(tmp, 'dir.gguf')}' (a directory)`);
    await writeFile(join(dir, 'config.json'), '{}');
    await expect(loadCheckpoint(dir)).rejects.toThrow(`loadCheckpoint: model.safetensors: expected a safetensors file in directory '${dir}', got a directory`);
    const cfgDir = join(tmp, 'cfgdir');
    await mkdir(join(cfgDir, 'config.json'), { recursive: true });
    await expect(loadCheckpoint(cfgDir)).rejects.toThrow(`loadCheckpoint: config.json: expected a readable file in directory '${cfgDir}', got a directory`);
    // Each call made as it is awaited: three made at once left the later rejections unhandled for a while
    // (an unhandled-rejection error in vitest when one settled first).
    for (const call of [() => loadSafetensors(dir), () => loadGGUF(dir), () => loadCheckpoint(cfgDir)]) await expect(call()).rejects.not.toThrow(/EISDIR/);
  });

  it('loadCheckpoint of a file or of nothing says so', async () => {
    const file = join(tmp, 'model.safetensors');
    await writeFile(file, encodeSafetensors({ w: { dtype: 'F32', shape: [1], data: Float32Array.of(1) } }));
    await expect(loadCheckpoint(file)).rejects.toThrow(
      `loadCheckpoint: src: expected a checkpoint directory (config.json and model.safetensors) or a .gguf file, got '${file}' (a file: loadSafetensors reads one)`);
    await expect(loadCheckpoint(join(tmp, 'absent'))).rejects.toThrow(`loadCheckpoint: src: expected a checkpoint directory (config.json and model.safetensors) or a .gguf file, got '${join(tmp, 'absent')}' (no such directory)`);
  });

  it("loadCheckpoint reads preprocessor_config.json where the model has a processor (a vision tower, Whisper), and not for a text model", async () => {
    const vl = await loadCheckpoint(join(shared, 'goldens-arch', 'qwen2.5-vl'));
    expect((vl.preprocessorConfig as { image_processor_type?: string } | undefined)?.image_processor_type).toMatch(/Qwen2VLImageProcessor/);
    // A text model's folder with a stray preprocessor_config.json: not read (one fewer request in a page).
    const dir = join(tmp, 'text');
    await mkdir(dir);
    await writeFile(join(dir, 'config.json'), JSON.stringify({ architectures: ['LlamaForCausalLM'] }));
    await writeFile(join(dir, 'model.safetensors'), encodeSafetensors({ w: { dtype: 'F32', shape: [1], data: Float32Array.of(1) } }));
    await writeFile(join(dir, 'preprocessor_config.json'), '{}');
    expect((await loadCheckpoint(dir)).preprocessorConfig).toBeUndefined();
  });
});
