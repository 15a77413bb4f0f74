// Runs the shared GPU cases in Deno (wgpu) against the built dist/webinfer.js.
// Built first by `npm run build:tests`; run by scripts/test-all.mjs with lavapipe as the adapter.
import { createEngine } from 'webinfer';
import { allCases } from '../../.cache/bundles/cases.js';

const runtime = 'deno';
let engine = null;
const notes = ["every kernel compiled with its constant-bound loops written out (tuning.unrollLoops 'on'): what wgpu gets over a hardware GPU; 'auto' leaves software adapters' loops as written"];
/** Engines as wgpu over a GPU runs them: loops written out (src/core/unroll.ts). Firefox's suite runs
 *  the loops as written through the same compiler (naga), so both forms are checked. */
const unrolled = (e) => { e.tuning.unrollLoops = 'on'; return e; };
const getEngine = async () => (engine ??= unrolled(await createEngine({ poisonOutputs: true })));

for (const c of allCases) {
  Deno.test({
    name: c.name,
    sanitizeOps: false,
    sanitizeResources: false,
    async fn() {
      const e = await getEngine();
      await c.run({
        engine: e,
        runtime,
        newEngine: async (opts) => unrolled(await createEngine({ ...opts, poisonOutputs: true })),
        note: (m) => notes.push(m),
        fixture: (path) => Deno.readFile(new URL(`../../../shared/${path}`, import.meta.url)),
      });
    },
  });
}

// Teardown outside the test list, so the count holds only real cases.
globalThis.addEventListener('unload', () => {
  engine?.destroy();
  for (const n of notes) console.log(`[deno] ${n}`);
});
