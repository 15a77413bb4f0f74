// Fused flash SDPA: the shared SPEC §6 matrix in each variant the runtime has (portable always,
// subgroup where the adapter offers subgroups), at small tiles (fast to compile on software adapters)
// and at the tiles the planner picks from the adapter's own limits; flash against naive on the same
// inputs; linear memory; the fallback of 'auto'.
import { compareToReference, reference, type Engine } from '../../src/index';
import { mmaConfigs } from '../../src/core/runtime';
import { flashMmaFor, flashUnsupported, planFlash, planFlashMma, type FlashVariant } from '../../src/attention/flash';
import { assert, assertClose, defineCases, expectThrows, randn, SOFTWARE_RUNTIMES, type CaseContext, type TestCase, withTuning } from './harness';
import { checkSdpa, type SdpaSpec } from './sdpa';
import { SDPA_MATRIX } from './sdpa_matrix';

/** Small tiles: every plan shares the code, and they compile in well under a second on SwiftShader. */
const SMALL_TILES = 8192;

/**
 * The variant to run: the one asked for, or, where the adapter lacks subgroups, what 'auto' picks
 * instead (the portable kernel), after saying so: the case still checks the path this runtime has.
 */
function variantHere(ctx: CaseContext, v: FlashVariant): FlashVariant | 'auto' {
  if (v === 'subgroup' && !planFlash(ctx.engine.limits, ctx.engine.features, 64, 64, 'subgroup')) {
    ctx.note(`flash subgroup variant: not available here (${ctx.engine.features.subgroups ? 'no subgroup size reported' : 'the adapter has no subgroups'}); its cases ran the portable kernel that 'auto' picks`);
    return 'auto';
  }
  return v;
}

async function runSpec(engine: Engine, spec: SdpaSpec): Promise<void> {
  if (flashUnsupported(spec.D, spec.Dv ?? spec.D)) {
    // Not a flash shape: 'flash' must refuse it, 'auto' must still give the right answer.
    await expectThrows(() => checkSdpa(engine, spec, 'flash'), "opts.backend 'flash'", 'multiples of 8');
    await checkSdpa(engine, spec, 'auto');
  } else {
    await checkSdpa(engine, spec, 'flash');
  }
}

function variantCases(v: FlashVariant): TestCase[] {
  return [
    ...SDPA_MATRIX.map((g): TestCase => ({
      name: `${v}: ${g.name}`,
      async run(ctx) {
        await withTuning(ctx.engine, { flashVariant: variantHere(ctx, v), flashSmemBytes: SMALL_TILES }, async () => {
          for (const spec of g.specs) await runSpec(ctx.engine, spec);
        });
      },
    })),
    {
      name: `${v}: the adapter's own tile plan and a 16 KiB plan (D 64, 128, Dv != D; f32, f16, bf16)`,
      async run(ctx) {
        const here = variantHere(ctx, v);
        for (const cap of [Infinity, 16384]) {
          await withTuning(ctx.engine, { flashVariant: here, flashSmemBytes: cap }, async () => {
            await checkSdpa(ctx.engine, { B: 2, Hq: 4, Hkv: 2, Lq: 70, Lk: 131, D: 64, causal: true, alibi: true, seed: 3000 }, 'flash');
            await checkSdpa(ctx.engine, { Hq: 2, Lq: 65, Lk: 65, D: 64, dtype: 'f16', sinks: true, slidingWindow: 20, seed: 3001 }, 'flash');
            if (cap === Infinity) {
              await checkSdpa(ctx.engine, { Hq: 3, Hkv: 1, Lq: 33, Lk: 100, D: 128, Dv: 64, dtype: 'bf16', softcap: 20, seed: 3002 }, 'flash');
            }
          });
        }
      },
    },
  ];
}

/** Why the subgroup-matrix tile cannot run here, or null where it can. */
function mmaMissing(ctx: CaseContext): string | null {
  const f = ctx.engine.features;
  if (f.subgroupMatrix.length === 0) return 'the adapter offers no subgroup matrices (chromium-experimental-subgroup-matrix; SwiftShader, lavapipe and wgpu do not): they run in the GPU test pass on the GPU machine (bench/results/gpu-tests-*.md)';
  if (mmaConfigs(f).length === 0) return `the adapter's subgroup matrices have no f16 → f32 configuration (${f.subgroupMatrix.map((c) => `${c.componentType}→${c.resultComponentType} ${c.M}×${c.N}×${c.K}`).join(', ')})`;
  if (!planFlashMma(ctx.engine.limits, f, 64, 64)) return `no subgroup-matrix tile plan here (shader-f16 ${f.f16}, subgroup sizes ${f.subgroupMinSize}-${f.subgroupMaxSize})`;
  return null;
}

/**
 * Runs specs as `dtype` on the subgroup-matrix tile (each one checked to take it: f32 data as hi + lo f16
 * halves, the split tile, through sdpa() since calls that return the LSE keep the scalar tiles, its
 * output under SPEC §6's f32 rules), or says why not and runs 'auto'.
 */
async function runMma(ctx: CaseContext, specs: SdpaSpec[], config?: number, shape?: number, dtype: 'f16' | 'f32' = 'f16'): Promise<void> {
  const why = mmaMissing(ctx);
  const tile = dtype === 'f32' ? 'split tile (f32 data)' : 'tile';
  // Without the tile, 'auto' runs the data on the tiles the other cases cover: one spec a case keeps
  // the check real without growing CI.
  if (why) ctx.note(`flash subgroup-matrix ${tile}: not run here: ${why}; its cases ran the first spec of each on the tile 'auto' picks`);
  await withTuning(ctx.engine, { flashVariant: why ? 'auto' : 'subgroup-matrix', flashMmaConfig: config, flashMmaShape: shape, flashMmaSplit: true }, async () => {
    for (const spec of why ? specs.slice(0, 1) : specs) {
      const sx: SdpaSpec = { ...spec, dtype, ...(dtype === 'f32' ? { lse: false } : {}) };
      const planned = (): ReturnType<typeof flashMmaFor> => flashMmaFor(ctx.engine, dtype, sx.D, sx.Dv ?? sx.D, sx.lse ?? true);
      // The split tile's hi and lo copies fit 48 KiB of workgroup storage up to head size 128; larger
      // f32 heads run the scalar tiles (checked the same).
      const served = dtype === 'f16' || (Math.max(sx.D, sx.Dv ?? sx.D) <= 128 && ctx.engine.limits.maxComputeWorkgroupStorageSize >= 49152);
      if (!why && !flashUnsupported(sx.D, sx.Dv ?? sx.D) && served) {
        const plan = planned();
        assert(plan !== null && plan.split === (dtype === 'f32'), `the subgroup-matrix ${tile} should serve D ${sx.D}, Dv ${sx.Dv ?? sx.D} (config ${config}, shape ${shape}): ${JSON.stringify(plan)}`);
      }
      try {
        await runSpec(ctx.engine, sx);
      } catch (e) {
        const plan = why ? null : planned();
        throw new Error(`${(e as Error).message} [tile ${plan ? JSON.stringify(plan) : 'auto'}]`);
      }
    }
  });
}

/** Shapes that take several key tiles and row tiles, with scores wide enough that rows' maxima move
 *  past the lazy-rescale threshold (q/k standard deviation 4: the O-rescale path runs). */
const MMA_LONG: SdpaSpec[] = [
  { B: 2, Hq: 4, Hkv: 2, Lq: 100, Lk: 333, D: 64, causal: true, std: 4, seed: 3500 },
  { Hq: 2, Lq: 70, Lk: 700, D: 128, std: 4, seed: 3501 },
  { Hq: 3, Hkv: 1, Lq: 33, Lk: 257, D: 72, Dv: 40, std: 2, sinks: true, seed: 3502 },
  { Hq: 2, Lq: 129, Lk: 129, D: 256, causal: true, slidingWindow: 50, seed: 3503 },
  { Hq: 8, Hkv: 1, Lq: 1, Lk: 1000, D: 128, std: 4, seed: 3504 },
];

/** f32 data on the split tile: long rows of keys (the O accumulation over many key tiles), values all
 *  of one sign (no cancellation to hide a biased sum), and wide scores. */
const MMA_SPLIT_LONG: SdpaSpec[] = [
  { Hq: 2, Lq: 64, Lk: 4096, D: 64, seed: 3600 },
  { B: 2, Hq: 4, Hkv: 1, Lq: 130, Lk: 2000, D: 128, causal: true, std: 3, seed: 3601 },
  { Hq: 2, Lq: 48, Lk: 1500, D: 96, Dv: 64, std: 0.3, seed: 3602 },
];

/**
 * No software adapter has subgroup matrices, so there each subgroup-matrix case runs its fallback: its
 * first spec on the tile 'auto' picks at the adapter's own tile plan (the kernels and plans the portable
 * and subgroup cases check on every runtime). On SwiftShader those pipelines take 3-6 s each (51 s of
 * node-swiftshader and 55 s of chromium for all of them, 3 s on lavapipe), so on a software adapter the
 * fallbacks run on the CI's three lavapipe runtimes, the k-th case's on FALLBACK_RUNTIMES[slot(k) mod 3]:
 * together they still run every one. A runtime not in SOFTWARE_RUNTIMES, and a GPU with or without
 * subgroup matrices, runs them all.
 */
const FALLBACK_RUNTIMES = ['node-lavapipe', 'firefox', 'deno'] as const;
const fallbacksNoted = new WeakSet<Engine>();
function spreadFallbacks(cases: TestCase[], slot: (k: number) => number): TestCase[] {
  const n = FALLBACK_RUNTIMES.length;
  return cases.map((c, k) => ({
    ...c,
    async run(ctx) {
      if (ctx.engine.adapter.software && (SOFTWARE_RUNTIMES as readonly string[]).includes(ctx.runtime) && mmaMissing(ctx)) {
        const at = (FALLBACK_RUNTIMES as readonly string[]).indexOf(ctx.runtime);
        if (!fallbacksNoted.has(ctx.engine)) {
          fallbacksNoted.add(ctx.engine);
          const mine = cases.filter((_, j) => slot(j) % n === at).map((x) => x.name);
          ctx.note(`flash subgroup-matrix cases: not run here (no subgroup matrices); ${mine.length ? `this software runtime runs the fallbacks of ${mine.join('; ')}` : 'their fallbacks run on lavapipe'} (${FALLBACK_RUNTIMES.join(', ')} share the ${cases.length}; a GPU runs them all)`);
        }
        if (slot(k) % n !== at) return;
      }
      await c.run(ctx);
    },
  }));
}

function mmaCases(): TestCase[] {
  // The split block's slots count on 1 past the f16 block's: both blocks list SDPA_MATRIX (15 groups),
  // and the same group's fallbacks would otherwise land on the same runtime.
  const slot = (k: number): number => (k < SDPA_MATRIX.length ? k : k + 1);
  return spreadFallbacks([
    ...SDPA_MATRIX.map((g): TestCase => ({
      name: `subgroup-matrix: ${g.name} (as f16)`,
      run: (ctx) => runMma(ctx, g.specs),
    })),
    ...SDPA_MATRIX.map((g): TestCase => ({
      name: `subgroup-matrix split: ${g.name} (as f32, f32 tolerances)`,
      run: (ctx) => runMma(ctx, g.specs, undefined, undefined, 'f32'),
    })),
    {
      name: 'subgroup-matrix split: several key and row tiles, moving maxima, long rows (4096 keys), D 64..256 (f32 tolerances)',
      run: (ctx) => runMma(ctx, [...MMA_LONG, ...MMA_SPLIT_LONG], undefined, undefined, 'f32'),
    },
    {
      name: 'subgroup-matrix split: calls that return the LSE keep f32 data on the scalar tiles (checked, out and lse)',
      async run(ctx) {
        const why = mmaMissing(ctx);
        if (why) ctx.note(`flash subgroup-matrix split tile: not run here: ${why}; ran 'auto'`);
        await withTuning(ctx.engine, { flashVariant: why ? 'auto' : 'subgroup-matrix', flashMmaSplit: true }, async () => {
          assert(flashMmaFor(ctx.engine, 'f32', 64, 64, true) === null, 'sdpaWithLse on f32 data should not take the split tile');
          await checkSdpa(ctx.engine, { B: 2, Hq: 4, Hkv: 2, Lq: 100, Lk: 333, D: 64, causal: true, dtype: 'f32', seed: 3800 }, 'flash');
        });
      },
    },
    {
      // v shifted by +3, so nearly every value is positive and the output is near 3 at every row: an
      // error that grows with the key count is not averaged away.
      name: 'subgroup-matrix split: values all positive (a biased O sum shows), f32 tolerances',
      run: (ctx) => runMma(ctx, [{ Hq: 2, Lq: 40, Lk: 4096, D: 64, vMean: 3, seed: 3700 }], undefined, undefined, 'f32'),
    },
    {
      name: 'subgroup-matrix: several key and row tiles, moving maxima (the O rescale), D 64..256 and padded D 72 / Dv 40',
      run: (ctx) => runMma(ctx, MMA_LONG),
    },
    {
      name: "subgroup-matrix: every f16 → f32 configuration the adapter offers, and every tile shape that fits",
      async run(ctx) {
        if (mmaMissing(ctx)) return runMma(ctx, MMA_LONG.slice(0, 1));
        const configs = mmaConfigs(ctx.engine.features);
        for (let ci = 0; ci < configs.length; ci++) {
          for (let si = 0; si < 7; si++) {
            if (!planFlashMma(ctx.engine.limits, ctx.engine.features, 128, 128, Infinity, ci, si)) continue;
            await runMma(ctx, MMA_LONG.slice(0, 2), ci, si);
          }
        }
      },
    },
  ], slot);
}

export const sdpaFlashCases = defineCases('sdpa flash', [
  ...mmaCases(),
  ...variantCases('portable'),
  ...variantCases('subgroup'),
  {
    name: 'shader-f16 path: f16 tiles in workgroup memory agree with f32 tiles and fit larger tiles',
    async run({ engine, note }) {
      const spec = { B: 2, Hq: 4, Hkv: 2, Lq: 45, Lk: 77, D: 64, dtype: 'f16' as const, causal: true, sinks: true, seed: 3100 };
      if (!engine.features.f16) {
        note("shader-f16: not offered by this adapter; f16 data ran with f32 tiles (the portable path), checked against the reference");
        await checkSdpa(engine, spec, 'flash');
        return;
      }
      // 32 KiB (Apple's budget): f16 tiles fit the 64×64 tile that f32 tiles need 44 KiB for.
      const p16 = planFlash(engine.limits, engine.features, 64, 64, 'portable', 32768, undefined, 'f16');
      const p32 = planFlash(engine.limits, engine.features, 64, 64, 'portable', 32768, undefined, 'f32');
      assert(p16 !== null && p32 !== null && p16.tile === 'f16', `plans ${JSON.stringify(p16)} ${JSON.stringify(p32)}`);
      assert(p16.TY * p16.TM * p16.TX * p16.TN > p32.TY * p32.TM * p32.TX * p32.TN,
        `within 32 KiB, f16 tiles should allow a larger tile: ${JSON.stringify(p16)} vs ${JSON.stringify(p32)}`);
      for (const cap of [Infinity, 32768, 16384]) {
        const a = await withTuning(engine, { flashF16Tiles: true, flashSmemBytes: cap, flashVariant: 'portable' }, () => checkSdpa(engine, spec, 'flash'));
        const b = await withTuning(engine, { flashF16Tiles: false, flashSmemBytes: cap, flashVariant: 'portable', flashGrid: undefined }, async () => {
          // Same grid as the f16 run, so only the tile type differs.
          const plan = planFlash(engine.limits, engine.features, 64, 64, 'portable', cap, undefined, 'f16')!;
          const gridIndex = [0, 1, 2, 3, 4, 5, 6].find((gi) => {
            const q = planFlash(engine.limits, engine.features, 64, 64, 'portable', Infinity, gi, 'f32');
            return q && q.TX === plan.TX && q.TY === plan.TY && q.TM === plan.TM && q.TN === plan.TN;
          });
          engine.tuning.flashGrid = gridIndex;
          engine.tuning.flashSmemBytes = Infinity;
          return checkSdpa(engine, spec, 'flash');
        });
        // Same inputs, same grid; the D/Dv chunk widths may differ, so the f32 sums may round
        // differently: agreement within one f16 ulp of the output and f32 rounding of the lse.
        for (const [what, x, y, tol] of [['out', a.out, b.out, { atol: 1e-6, rtol: 2 ** -10 }], ['lse', a.lse, b.lse, { atol: 1e-6, rtol: 1e-6 }]] as const) {
          const c = compareToReference(x, Float64Array.from(y), tol);
          assert(c.pass, `f16-tile vs f32-tile ${what} (cap ${cap}): element ${c.worstIndex} ${x[c.worstIndex]} vs ${y[c.worstIndex]}`);
        }
      }
    },
  },
  {
    name: 'flash equals naive on the same inputs (GQA, causal, mask, sinks)',
    async run({ engine }) {
      const [B, Hq, Hkv, Lq, Lk, D] = [2, 4, 2, 37, 50, 32];
      const q = engine.tensor(randn(B * Hq * Lq * D, 1), [B, Hq, Lq, D]);
      const k = engine.tensor(randn(B * Hkv * Lk * D, 2), [B, Hkv, Lk, D]);
      const v = engine.tensor(randn(B * Hkv * Lk * D, 3), [B, Hkv, Lk, D]);
      const mask = engine.tensor(Float32Array.from(randn(Lq * Lk, 4), (x) => (x > 1.5 ? -Infinity : x)), [Lq, Lk]);
      const opts = { causal: true, mask, sinks: [0.5, -1, 2, 0], softcap: 15 };
      const f = engine.sdpaWithLse(q, k, v, { ...opts, backend: 'flash' });
      const n = engine.sdpaWithLse(q, k, v, { ...opts, backend: 'naive' });
      const [fo, fl, no, nl] = await Promise.all([f.out.toFloat32(), f.lse.toFloat32(), n.out.toFloat32(), n.lse.toFloat32()]);
      assertClose('flash out vs naive', fo, Float64Array.from(no), 'f32');
      assertClose('flash lse vs naive', fl, Float64Array.from(nl), 'f32');
      for (const t of [q, k, v, mask, f.out, f.lse, n.out, n.lse]) t.destroy();
    },
  },
  {
    name: 'GPU memory of a call grows linearly in L for flash (quadratically for naive)',
    async run({ engine }) {
      const bytesFor = async (L: number, backend: 'flash' | 'naive'): Promise<number> => {
        const q = engine.tensor(randn(L * 8, L), [1, 1, L, 8]);
        await engine.sync();
        const before = engine.pool.stats.acquiredBytes;
        const out = engine.sdpa(q, q, q, { backend });
        const used = engine.pool.stats.acquiredBytes - before;
        await out.toFloat32();
        out.destroy(); q.destroy();
        return used;
      };
      const f1 = await bytesFor(512, 'flash'), f2 = await bytesFor(2048, 'flash');
      const n1 = await bytesFor(512, 'naive'), n2 = await bytesFor(2048, 'naive');
      assert(f2 / f1 <= 4.5, `flash: ${f1} B at L 512, ${f2} B at L 2048 (ratio ${(f2 / f1).toFixed(2)}, linear is 4)`);
      assert(n2 / n1 > 10, `naive should be quadratic: ${n1} B then ${n2} B`);
      assert(f2 < 2048 * 8 * 4 * 3, `flash allocated ${f2} B for L 2048: more than out + lse`);
    },
  },
  {
    name: "'auto' runs flash where it applies and warns once per reason when it cannot",
    async run({ newEngine }) {
      const warnings: string[] = [];
      const e = await newEngine({ onWarning: (m) => warnings.push(m) });
      try {
        const q = e.tensor(randn(2 * 4 * 16, 1), [1, 2, 4, 16]);
        const compiled = e.pipelines.compiled;
        const out = await e.sdpa(q, q, q).toFloat32();
        assert(out.every(Number.isFinite), 'finite output');
        assert(warnings.length === 0, `no warning for a flash shape: ${warnings.join(' | ')}`);
        assert(e.pipelines.compiled === compiled + 1, `auto compiled ${e.pipelines.compiled - compiled} pipelines: flash is one`);
        const odd = e.tensor(randn(2 * 4 * 12, 2), [1, 2, 4, 12]);
        const ref = reference.sdpaRef(randn(2 * 4 * 12, 2), randn(2 * 4 * 12, 2), randn(2 * 4 * 12, 2), { B: 1, Hq: 2, Hkv: 2, Lq: 4, Lk: 4, D: 12, Dv: 12 });
        assertClose('auto fallback', await e.sdpa(odd, odd, odd).toFloat32(), ref.out, 'f32');
        await e.sdpa(odd, odd, odd).toFloat32();
        const count = (): number => warnings.length;
        assert(count() === 1 && warnings[0].includes('naive') && warnings[0].includes('D=12'), `one warning naming the reason: ${warnings.join(' | ')}`);
        await expectThrows(() => e.sdpa(odd, odd, odd, { backend: 'flash' }), "sdpa: opts.backend 'flash': expected a problem the fused kernel serves", 'D=12');
        const big = e.tensor(randn(264, 3), [1, 1, 1, 264]);
        await expectThrows(() => e.sdpa(big, big, big, { backend: 'flash' }), 'exceed 256');
      } finally {
        e.destroy();
      }
    },
  },
]);
