// Engine lifecycle: features and limits, the pipeline cache, compile errors, device loss.
import { createEngine, DispatchCache, WebinferError } from '../../src/index';
import { assert, defineCases, equalArrays, expectThrows, goldenRunsHere, randInt, randn } from './harness';
import { golden, load } from './model.cases';

export const engineCases = defineCases('engine', [
  {
    name: "exposes the adapter's features and requests its limits",
    async run({ engine, runtime, note }) {
      const f = engine.features;
      assert(typeof f.f16 === 'boolean' && typeof f.subgroups === 'boolean' && typeof f.timestampQuery === 'boolean', 'feature flags');
      assert(f.f16 === engine.device.features.has('shader-f16'), 'f16 flag matches the device');
      assert(f.subgroups === engine.device.features.has('subgroups'), 'subgroups flag matches the device');
      if (f.subgroups && f.subgroupSize !== undefined) {
        assert([4, 8, 16, 32, 64, 128].includes(f.subgroupSize), `subgroup size ${f.subgroupSize}`);
      }
      // WebGPU's defaults are 16 KiB of workgroup storage; every adapter here offers 32 KiB and the
      // engine must have asked for it.
      assert(engine.limits.maxComputeWorkgroupStorageSize >= 16384, 'workgroup storage');
      assert(engine.limits.maxComputeWorkgroupStorageSize === engine.device.limits.maxComputeWorkgroupStorageSize, 'limits mirror the device');
      if (runtime !== 'deno') {
        assert(engine.limits.maxComputeWorkgroupStorageSize >= 32768, `requested the adapter's 32 KiB, got ${engine.limits.maxComputeWorkgroupStorageSize}`);
      }
      note(`adapter ${engine.adapter.vendor}/${engine.adapter.architecture} f16=${f.f16} subgroups=${f.subgroups}(${f.subgroupSize ?? '?'}) timestamps=${f.timestampQuery}`);
    },
  },
  {
    name: "the adapter summary says whether it runs on the CPU; 'auto' writes loops out only for wgpu over a GPU",
    async run({ engine, runtime, note }) {
      const a = engine.adapter;
      assert(typeof a.software === 'boolean', `adapter.software: expected a boolean, got ${a.software}`);
      // Every runner of CI has a software adapter (SwiftShader or lavapipe); the GPU test pass has none.
      const known: Record<string, boolean> = { 'node-swiftshader': true, 'node-lavapipe': true, chromium: true, deno: true, firefox: true, 'node-gpu': false };
      if (runtime in known) assert(a.software === known[runtime], `${runtime}: adapter.software ${a.software}, expected ${known[runtime]}`);
      const g = globalThis as { Deno?: unknown; navigator?: { userAgent?: string } };
      const wgpu = g.Deno !== undefined || /\bFirefox\//.test(g.navigator?.userAgent ?? '');
      if (['deno', 'firefox'].includes(runtime)) assert(wgpu, `${runtime} is wgpu`);
      const before = engine.tuning.unrollLoops;
      try {
        for (const [u, want] of [['auto', wgpu && !a.software], ['on', true], ['off', false]] as const) {
          engine.tuning.unrollLoops = u;
          engine.kernel('sdpa_naive', 'pv_main', { overrides: { IN_DTYPE: 0, OUT_DTYPE: 0, WG: 64 } });
          assert(engine.pipelines.unrollLoops === want, `unrollLoops '${u}' on ${wgpu ? 'wgpu' : 'Dawn'} (software ${a.software}): written out ${engine.pipelines.unrollLoops}, expected ${want}`);
        }
      } finally {
        engine.tuning.unrollLoops = before;
      }
      note(`adapter software=${a.software}; loops written out by default: ${wgpu && !a.software}`);
    },
  },
  {
    name: 'pipelines are cached by shader, entry point and override constants',
    async run({ engine }) {
      const a = engine.kernel('sdpa_naive', 'pv_main', { overrides: { IN_DTYPE: 0, OUT_DTYPE: 0, WG: 64 } });
      const n = engine.pipelines.compiled;
      const b = engine.kernel('sdpa_naive', 'pv_main', { overrides: { WG: 64, OUT_DTYPE: 0, IN_DTYPE: 0 } });
      assert(a === b && engine.pipelines.compiled === n, 'same constants in another order hit the cache');
      const c = engine.kernel('sdpa_naive', 'pv_main', { overrides: { IN_DTYPE: 1, OUT_DTYPE: 1, WG: 64 } });
      assert(c !== a && engine.pipelines.compiled === n + 1, 'other constants compile a new pipeline');
      const names = a.bindings.map((x) => `${x.name}:${x.kind}`).sort().join(',');
      assert(names === 'out:storage,params:uniform,scores:storage,v:read-only-storage', `reflected bindings of pv_main: ${names}`);
      await expectThrows(() => engine.kernel('sdpa_naive', 'pv_main', { overrides: { NOPE: 1 } }), "unknown override constant 'NOPE'");
      await expectThrows(() => engine.kernel('sdpa_naive', 'nope'), "no compute entry point 'nope'");
      await expectThrows(() => engine.kernel('missing', 'main'), "unknown shader 'missing'");
      await expectThrows(() => engine.kernel('sdpa_naive', 'pv_main', { consts: { NOPE: 1 } }), "no module-scope const 'NOPE'");
    },
  },
  {
    name: "a shader that fails to compile is reported with the shader's name and line",
    async run({ newEngine }) {
      const e = await newEngine();
      try {
        // Parses (so reflection works) but fails type checking on line 4.
        e.pipelines.register('broken.wgsl', [
          '@group(0) @binding(0) var<storage, read_write> buf: array<f32>;',
          '@compute @workgroup_size(1)',
          'fn main() {',
          '  buf[0] = vec2<f32>(1.0, 2.0);',
          '}',
        ].join('\n'));
        e.kernel('broken.wgsl', 'main');
        await expectThrows(() => e.sync(), 'broken.wgsl', ':4:');
      } finally {
        e.destroy();
      }
    },
  },
  {
    name: 'asynchronous compiles: prepare() fills the cache get() reads; a trace\'s stand-ins become the real pipelines; a broken shader rejects with its line',
    async run({ newEngine }) {
      const e = await newEngine();
      try {
        e.pipelines.register('twice.wgsl', [
          '@group(0) @binding(0) var<storage, read_write> buf: array<f32>;',
          'override K: f32 = 2.0;',
          '@compute @workgroup_size(1)',
          'fn main(@builtin(global_invocation_id) g: vec3<u32>) { buf[g.x] = buf[g.x] * K; }',
        ].join('\n'));
        const n = e.pipelines.compiled;
        assert(await e.pipelines.prepare([{ shader: 'twice.wgsl', entry: 'main' }, { shader: 'twice.wgsl', entry: 'main' }]) === 1, 'one distinct kernel compiled');
        const k = e.kernel('twice.wgsl', 'main');
        assert(e.pipelines.compiled === n + 1 && await e.pipelines.prepare([{ shader: 'twice.wgsl', entry: 'main' }]) === 0, 'get() found the prepared pipeline');

        // Traced: dispatching the stand-in computes nothing; after compileDeferred the same kernel object does.
        const t = e.tensor(new Float32Array([1, 2, 3, 4]), [4]);
        e.pipelines.deferCompiles();
        const k3 = e.kernel('twice.wgsl', 'main', { overrides: { K: 3 } });
        assert(e.pipelines.pendingCompiles === 1 && e.pipelines.compiled === n + 1, 'traced, not compiled');
        e.dispatch(k3, { buf: t }, null, 4);
        equalArrays('a stand-in computes nothing', await t.toArray(), [1, 2, 3, 4]);
        assert(await e.pipelines.compileDeferred() === 1 && !e.pipelines.deferring, 'compiled after the trace');
        assert(e.kernel('twice.wgsl', 'main', { overrides: { K: 3 } }) === k3, 'the same kernel object');
        e.dispatch(k3, { buf: t }, null, 4);
        e.dispatch(k, { buf: t }, null, 4);
        equalArrays('the real pipelines', await t.toArray(), [6, 12, 18, 24]);

        e.pipelines.register('broken.wgsl', [
          '@group(0) @binding(0) var<storage, read_write> buf: array<f32>;',
          '@compute @workgroup_size(1)',
          'fn main() {',
          '  buf[0] = vec2<f32>(1.0, 2.0);',
          '}',
        ].join('\n'));
        await expectThrows(() => e.pipelines.prepare([{ shader: 'broken.wgsl', entry: 'main' }]), 'pipeline broken.wgsl:main failed to compile', 'broken.wgsl:4:');
        await e.sync();
      } finally {
        e.destroy();
      }
    },
  },
  {
    name: 'a lost device makes every later call fail with a clear error, not a hang',
    async run({ newEngine }) {
      const e = await newEngine();
      const t = e.tensor(randn(16, 1), [1, 1, 2, 8]);
      await t.toArray();
      e.device.destroy();            // the device is lost ('destroyed')
      await e.device.lost;
      await expectThrows(() => e.tensor(randn(4, 1), [4]), 'tensor', 'GPU device lost');
      await expectThrows(() => e.sdpa(t, t, t), 'sdpa', 'GPU device lost');
      await expectThrows(() => t.toArray(), 'GPU device lost');
      await expectThrows(() => e.sync(), 'GPU device lost');
    },
  },
  {
    name: 'a destroyed engine refuses work with a clear error',
    async run({ newEngine }) {
      const e = await newEngine();
      e.destroy();
      e.destroy();
      await expectThrows(() => e.zeros([2]), 'zeros', 'engine was destroyed');
    },
  },
  {
    name: 'createEngine accepts an existing GPUDevice',
    async run({ engine }) {
      const e = await createEngine({ device: engine.device });
      const x = randn(12, 3);
      const back = await e.tensor(x, [12]).toArray();
      assert(back.length === 12 && back[5] === x[5], 'round trip through the shared device');
      assert(e.device === engine.device, 'same device');
    },
  },
  {
    name: 'createEngine without any WebGPU entry point explains itself',
    async run() {
      const nav = (globalThis as { navigator?: { gpu?: unknown } }).navigator;
      if (nav?.gpu) {
        // This runtime has navigator.gpu: pass an object that offers no adapter instead.
        const gpu = { requestAdapter: async () => null } as unknown as GPU;
        await expectThrows(() => createEngine({ gpu }), 'createEngine', 'no WebGPU adapter');
      } else {
        await expectThrows(() => createEngine({}), 'createEngine: gpu:', 'no WebGPU');
      }
      await expectThrows(() => createEngine(null as never), 'createEngine: opts: expected an options object');
      assert(new WebinferError('x') instanceof Error, 'WebinferError is an Error');
    },
  },
  {
    // A model's decode step replays its layers' recorded commands (Runtime.capture / replay); what may
    // break a replay must refuse it rather than run stale commands.
    name: 'step graphs: a captured recording replays with the buffers\' current contents; a rewritten uniform, a copy, a moved position or scratch held elsewhere refuses the replay',
    async run({ engine }) {
      const k = engine.kernel('model_step', 'ids_main');
      const N = 8;
      const a = engine.tensor(Int32Array.from(randInt(N, 11, 0, 1000)), [N], 'i32');
      const o1 = engine.tensor(new Int32Array(N).fill(-7), [N], 'i32');
      const o2 = engine.tensor(new Int32Array(N).fill(-7), [N], 'i32');
      const dc = new DispatchCache(engine);
      const poison = (t: typeof o2) => engine.device.queue.writeBuffer(t.buffer, 0, new Int32Array(N).fill(-7));
      const first = () => engine.dispatch(k, { ids_in: a, prev: a, ids_out: o1 }, { rows: N, prev_rows: N }, 1);
      try {
        // Recorded once first: a position's first recording takes its uniform buffer from the pool,
        // which taints a capture (a graph replays only what the steady state records).
        const second = () => engine.dispatch(k, { ids_in: a, prev: a, ids_out: o2 }, { rows: 5, prev_rows: N }, 1);
        const cold = engine.recording(dc, () => { first(); return engine.capture(second).graph; });
        assert(cold.taint !== null, 'a capture that took a new uniform buffer was not tainted');
        const graph = engine.recording(dc, () => {
          first();
          return engine.capture(second).graph;
        });
        assert(graph.taint === null && graph.entries.length === 1, `a clean capture of one dispatch (taint ${graph.taint}, ${graph.entries.length} entries)`);
        const before = Array.from(await o2.toArray());
        equalArrays('the captured dispatch ran', before, [...Array.from(await a.toArray()).slice(0, 5), -7, -7, -7]);
        // New inputs, the output poisoned: the replay runs the captured commands (5 rows) on them.
        const b = Int32Array.from(randInt(N, 12, 0, 1000));
        engine.device.queue.writeBuffer(a.buffer, 0, b);
        poison(o2);
        const d0 = engine.counters.dispatch;
        const ok = engine.recording(dc, () => { first(); return engine.replay(graph); });
        assert(ok, 'the replay was refused');
        assert(engine.counters.dispatch - d0 === 2, `${engine.counters.dispatch - d0} dispatches recorded, expected 2`);
        equalArrays('the replayed dispatch', Array.from(await o2.toArray()), [...Array.from(b).slice(0, 5), -7, -7, -7]);
        // At another position: refused, nothing recorded.
        const d1 = engine.counters.dispatch;
        assert(!engine.recording(dc, () => engine.replay(graph)), 'a replay at position 0 of a graph captured at 1 was accepted');
        assert(engine.counters.dispatch === d1, 'a refused replay recorded dispatches');
        // The same position recorded with other uniform values: the graph's uniform is gone.
        engine.recording(dc, () => { first(); engine.dispatch(k, { ids_in: a, prev: a, ids_out: o2 }, { rows: 3, prev_rows: N }, 1); });
        assert(!engine.recording(dc, () => { first(); return engine.replay(graph); }), 'a replay over a rewritten uniform was accepted');
        // A copy or clear cannot be replayed.
        const copy = engine.recording(dc, () => engine.capture(() => engine.commandEncoder().clearBuffer(o1.buffer)).graph);
        assert(copy.taint !== null, 'a capture holding a clear was not tainted');
        assert(!engine.recording(dc, () => engine.replay(copy)), 'a tainted graph was replayed');
        // GPU-only scratch: replayed only while the pool still holds it free.
        const scratchGraph = engine.recording(dc, () => engine.capture(() => {
          const s = engine.gpuScratch(4 * N, 'test scratch');
          engine.dispatch(k, { ids_in: a, prev: a, ids_out: s }, { rows: N, prev_rows: N }, 1);
          engine.dispatch(k, { ids_in: s, prev: a, ids_out: o2 }, { rows: N, prev_rows: N }, 1);
          engine.releaseBuffer(s);
        }).graph);
        assert(scratchGraph.taint === null && scratchGraph.scratch.size === 1, `scratch capture: taint ${scratchGraph.taint}, ${scratchGraph.scratch.size} scratch buffers`);
        const [held] = [...scratchGraph.scratch];
        assert(engine.pool.take(held), 'the scratch buffer was not free after the capture');
        assert(!engine.recording(dc, () => engine.replay(scratchGraph)), 'a graph whose scratch is held elsewhere was replayed');
        engine.releaseBuffer(held);
        poison(o2);
        assert(engine.recording(dc, () => engine.replay(scratchGraph)), 'the scratch graph was refused with its scratch free');
        equalArrays('the scratch graph', Array.from(await o2.toArray()), Array.from(b));
        assert(engine.pool.take(held), 'the replay did not hand its scratch back');
        engine.releaseBuffer(held);
        await expectThrows(() => engine.capture(() => 0), 'capture: not inside recording()');
      } finally {
        await engine.sync();
        dc.destroy();
        for (const t of [a, o1, o2]) t.destroy();
      }
    },
  },
  {
    name: 'generate: an async onToken that rejects ends the call with its error, even at the last token, and nothing is left unhandled; the model then serves the goldens (issue 40)',
    async run(ctx) {
      // The engine's and generate's JavaScript over kernels every runtime checks: it runs where the
      // goldens run (lavapipe), not on SwiftShader, where its steps take most of a minute.
      if (!goldenRunsHere(ctx, 'engine › an async onToken')) return;
      const g = await golden(ctx, 'llama-gqa');
      const model = await load(ctx.engine, g);
      const unhandled = watchUnhandled();
      try {
        const greedy = (i: number) => g.golden.greedy[i].slice(0, 4);
        let n = 0;
        const beside = model.generate([g.golden.prompts[1]], { maxNewTokens: 4, stopTokens: [] });
        await expectThrows(() => model.generate(g.golden.prompts, {
          maxNewTokens: 4, stopTokens: [], onToken: async (p) => { if (p === 0 && ++n === 2) throw new Error('onToken rejected'); },
        }), 'onToken rejected');
        equalArrays('a call beside the failed one', (await beside)[0], greedy(1));
        // Rejected after the request's last token was handed over: the call still ends with it.
        await expectThrows(() => model.generate([g.golden.prompts[0]], {
          maxNewTokens: 2, stopTokens: [], onToken: (_p, t) => new Promise<void>((_, reject) => setTimeout(() => reject(new Error(`late rejection of ${t}`)), 5)),
        }), 'late rejection of');
        // Resolved promises hold the call until they settle, and change nothing.
        const order: string[] = [];
        const got = await model.generate([g.golden.prompts[2]], {
          maxNewTokens: 4, stopTokens: [], onToken: (_p, t) => new Promise<void>((resolve) => setTimeout(() => { order.push(`token ${t}`); resolve(); }, 2)),
        });
        order.push('returned');
        equalArrays('an async onToken that resolves', got[0], greedy(2));
        assert(order.length === 5 && order[4] === 'returned', `generate returned before its callbacks settled: ${order.join(', ')}`);
        await new Promise((r) => setTimeout(r, 30));
        assert(unhandled.seen.length === 0, `unhandled rejections: ${unhandled.seen.map(String).join('; ')}`);
        equalArrays('greedy after', (await model.generate(g.golden.prompts, { maxNewTokens: 4, stopTokens: [] })).flat(), [0, 1, 2].flatMap(greedy));
      } finally {
        unhandled.stop();
        model.destroy();
      }
    },
  },
  {
    name: 'generate with 12 prompts adds a bounded number of abort listeners to any one signal (no MaxListenersExceededWarning in Node) (issue 40)',
    async run(ctx) {
      const g = await golden(ctx, 'llama-gqa');
      const model = await load(ctx.engine, g);
      // Every abort listener added to and removed from any AbortSignal meanwhile, counted per signal.
      const proto = AbortSignal.prototype as AbortSignal & Record<string, unknown>;
      const live = new Map<AbortSignal, number>();
      let most = 0;
      const add = EventTarget.prototype.addEventListener, remove = EventTarget.prototype.removeEventListener;
      const patched = ['addEventListener', 'removeEventListener'].filter((k) => !Object.prototype.hasOwnProperty.call(proto, k));
      Object.defineProperty(proto, 'addEventListener', {
        configurable: true, writable: true,
        value(this: AbortSignal, type: string, fn: EventListenerOrEventListenerObject | null, o?: AddEventListenerOptions | boolean) {
          if (type === 'abort' && fn) { const k = (live.get(this) ?? 0) + 1; live.set(this, k); most = Math.max(most, k); }
          return add.call(this, type, fn, o);
        },
      });
      Object.defineProperty(proto, 'removeEventListener', {
        configurable: true, writable: true,
        value(this: AbortSignal, type: string, fn: EventListenerOrEventListenerObject | null, o?: EventListenerOptions | boolean) {
          if (type === 'abort' && fn && live.get(this)) live.set(this, live.get(this)! - 1);
          return remove.call(this, type, fn, o);
        },
      });
      // Node: the warning itself, which is what a user sees.
      const proc = (globalThis as { process?: { on?(e: string, f: (w: Error) => void): void; off?(e: string, f: (w: Error) => void): void } }).process;
      const warnings: string[] = [];
      const onWarning = (w: Error) => { if (w.name === 'MaxListenersExceededWarning') warnings.push(w.message); };
      proc?.on?.('warning', onWarning);
      try {
        const prompts = Array.from({ length: 12 }, (_, i) => g.golden.prompts[i % 3]);
        const caller = new AbortController();
        const got = await model.generate(prompts, { maxNewTokens: 2, stopTokens: [], signal: caller.signal });
        got.forEach((t, i) => equalArrays(`prompt ${i}`, t, g.golden.greedy[i % 3].slice(0, 2)));
        await new Promise((r) => setTimeout(r, 10));
        assert(warnings.length === 0, `Node warned: ${warnings.join('; ')}`);
        assert(most <= 2, `one signal had ${most} abort listeners at once for a generate of 12 prompts`);
        assert(live.get(caller.signal) === 0, `the caller's signal keeps ${live.get(caller.signal)} listeners after the call`);
      } finally {
        proc?.off?.('warning', onWarning);
        for (const k of ['addEventListener', 'removeEventListener']) {
          if (patched.includes(k)) Reflect.deleteProperty(proto, k);
        }
        model.destroy();
      }
    },
  },
  {
    name: 'Model.destroy with steps in flight leaves no read-back buffer behind: live GPU buffers stay at their baseline over cycles of load, generate, destroy mid-run while another model serves (issue 40)',
    async run(ctx) {
      // The engine's and generate's JavaScript over kernels every runtime checks: it runs where the
      // goldens run (lavapipe), not on SwiftShader, where its steps take most of a minute.
      if (!goldenRunsHere(ctx, 'engine › Model.destroy with steps in flight')) return;
      const { engine } = ctx;
      const g = await golden(ctx, 'llama-gqa');
      // Live buffers: those the engine creates from here on (Runtime.createBuffer; the pool's
      // included), less those destroyed.
      const live = new Map<GPUBuffer, string>();
      const create = engine.createBuffer;
      engine.createBuffer = (d: GPUBufferDescriptor): GPUBuffer => {
        const b = create.call(engine, d);
        live.set(b, d.label ?? '');
        const destroy = b.destroy;
        b.destroy = () => { live.delete(b); destroy.call(b); };
        return b;
      };
      const settle = async () => { await engine.sync(); await new Promise((r) => setTimeout(r, 20)); await engine.sync(); };
      const greedy = g.golden.greedy.map((t) => t.slice(0, 4)).flat();
      // A model that stays, and one loaded, run and destroyed at its k-th token with steps in flight,
      // the other starting its requests at once (a server swapping models): the destroyed model's
      // read-backs, still pending, came back to the pool after the other's steps had taken new staging
      // buffers beside them.
      const stays = await load(engine, g);
      const swap = async (k: number) => {
        const model = await load(engine, g);
        let n = 0;
        let next: Promise<number[][]> | null = null;
        try {
          const during = model.generate(g.golden.prompts, {
            maxNewTokens: 24, stopTokens: [], onToken: () => {
              if (++n !== k) return;
              model.destroy();
              next = stays.generate(g.golden.prompts, { maxNewTokens: 4, stopTokens: [] });
            },
          });
          await expectThrows(() => during, 'the model was destroyed');
        } finally {
          model.destroy();
        }
        equalArrays('the model beside the destroyed one', (await next!).flat(), greedy);
        await settle();
      };
      try {
        // Two models' steps interleave in the first swaps: the pool grows to what that takes.
        for (let i = 0; i < 4; i++) await swap(1 + (i % 4));
        const base = live.size;
        const counts: number[] = [];
        for (let i = 0; i < 6; i++) {
          await swap(1 + (i % 3));
          counts.push(live.size);
        }
        const readBacks = [...live.values()].filter((l) => l === 'webinfer read-back').length;
        assert(readBacks <= engine.tuning.stepsInFlight, `${readBacks} read-back staging buffers live, for ${engine.tuning.stepsInFlight} steps in flight at most`);
        // A leak grows with every cycle. The pool may still take one buffer more, once, where the two models'
        // steps interleave another way than in the warm-up (Deno under CI load: 58, then 59 six times).
        const rises = counts.filter((c, i) => c > (i ? counts[i - 1] : base)).length;
        assert(Math.max(...counts) <= base + 1 && rises <= 1,
          `live GPU buffers: ${base}, then after each destroy with steps in flight ${counts.join(', ')} (at most one more, once)`);
      } finally {
        Reflect.deleteProperty(engine, 'createBuffer');
        stays.destroy();
      }
    },
  },
]);

/** Unhandled promise rejections while it watches (Node's process event, or the web's and Deno's), kept rather than fatal. */
function watchUnhandled(): { seen: unknown[]; stop(): void } {
  const seen: unknown[] = [];
  const g = globalThis as { addEventListener?: (t: string, f: (e: PromiseRejectionEvent) => void) => void; removeEventListener?: (t: string, f: (e: PromiseRejectionEvent) => void) => void;
    process?: { on(e: string, f: (r: unknown) => void): void; off(e: string, f: (r: unknown) => void): void } };
  if (typeof g.addEventListener === 'function') {
    const f = (e: PromiseRejectionEvent) => { seen.push(e.reason); e.preventDefault(); };
    g.addEventListener('unhandledrejection', f);
    return { seen, stop: () => g.removeEventListener!('unhandledrejection', f) };
  }
  const f = (r: unknown) => { seen.push(r); };
  g.process!.on('unhandledRejection', f);
  return { seen, stop: () => g.process!.off('unhandledRejection', f) };
}
