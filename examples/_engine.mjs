// What the Node examples share: an engine on Node's WebGPU (the `webgpu` package, dawn.node). With no
// GPU driver, it runs on the CPU through a software Vulkan driver when one is installed (Mesa's
// lavapipe, as .ci/install.sh unpacks it, or Chromium's SwiftShader); otherwise the error says what
// to install and set.
import { existsSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { create, globals } from 'webgpu';
import { createEngine } from 'webinfer';

const SOFTWARE = [new URL('../.cache/lavapipe25/lvp_icd.json', import.meta.url).pathname, '/usr/lib/chromium/vk_swiftshader_icd.json'];

export async function nodeEngine() {
  Object.assign(globalThis, globals);
  // Mesa's drivers print "XDG_RUNTIME_DIR is invalid" when it names no folder (containers, CI, su).
  if (!process.env.XDG_RUNTIME_DIR || !existsSync(process.env.XDG_RUNTIME_DIR)) {
    const dir = join(tmpdir(), `webinfer-runtime-${process.getuid?.() ?? 'user'}`);
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    process.env.XDG_RUNTIME_DIR = dir;
  }
  let engine;
  try {
    engine = await createEngine({ gpu: create([]) });
  } catch (e) {
    const driver = SOFTWARE.find(existsSync);
    if (process.env.VK_ICD_FILENAMES || !driver || !/no WebGPU adapter/.test(e.message)) throw e;
    // The Vulkan loader reads the variable whenever an instance is made: a new one finds the driver.
    process.env.VK_ICD_FILENAMES = driver;
    console.error(`no GPU adapter: running on the CPU with ${driver} (slow)`);
    engine = await createEngine({ gpu: create([]) });
  }
  const a = engine.adapter;
  console.error(`adapter: ${a.description || a.vendor || 'unknown'}${a.software ? ' (software: slow)' : ''}`);
  return engine;
}

/** The first argument, or the usage line and exit 2. */
export function modelArg(usage) {
  const m = process.argv[2];
  if (!m || m === '-h' || m === '--help') {
    console.error(`usage: ${usage}`);
    process.exit(2);
  }
  return m;
}
