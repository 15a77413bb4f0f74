// What the Node examples share: an engine on Node's WebGPU (the `webgpu` package, dawn.node). A
// machine without a GPU needs a software Vulkan driver: the error says which to install and set.
import { create, globals } from 'webgpu';
import { createEngine } from 'webinfer';

export async function nodeEngine() {
  Object.assign(globalThis, globals);
  const engine = await createEngine({ gpu: create([]) });
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
