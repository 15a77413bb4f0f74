// ops.linear (the GEMV and GEMM kernels) against the float64 reference: f32/f16/bf16 weights, M from 1
// (decode) to a prefill size, odd N and K (multiples of 4 or 8 only), bias, accumulation into the
// residual stream, gathered rows, the fused SiLU-gated input, weights split over several buffers, each
// kernel path and reduction variant forced, GPU-made random weights, and argument validation.
// Sizes stay small (software adapters) and plans repeat, so few pipelines are compiled.
import { ops, reference, roundToDType, type Engine, type Tensor } from '../../src/index';
import { mmaConfigs } from '../../src/core/runtime';
import { assert, assertClose, assertWithinPlain, defineCases, equalArrays, expectThrows, randInt, randn, spreadOverSoftware, type CaseContext, withTuning } from './harness';

type WDType = 'f32' | 'f16' | 'bf16';

interface Problem {
  M: number; N: number; K: number; dtype: WDType;
  xRows?: number; bias?: boolean; silu?: boolean; gather?: number[];
  accumulate?: boolean; outRows?: number; maxPartBytes?: number; seed: number;
  /** Standard deviation of x (default 1). */
  xStd?: number;
}

/**
 * Runs one linear layer on the GPU and checks it against the reference: the weights the reference
 * sees are the rounded ones the GPU holds, so f32 tolerances apply to every weight dtype (the kernels
 * compute in f32). Rows of a given `out` past M must keep what they held.
 */
async function check(engine: Engine, p: Problem, plan?: Partial<ops.PlanLinearOptions>, what = '',
                     tol: 'f32' | 'f16' | 'bf16' | 'f32-plain' = 'f32'): Promise<ops.LinearWeight> {
  const { M, N, K, dtype, seed } = p;
  const width = p.silu ? 2 * K : K;
  const xRows = p.xRows ?? (p.gather ? 9 : M);
  const wv = roundToDType(randn(N * K, seed, 0.5), dtype);
  const xv = randn(xRows * width, seed + 1, p.xStd ?? 1);
  const bias = p.bias ? randn(N, seed + 2) : undefined;
  const w = ops.createLinear(engine, { data: wv, N, K, dtype, bias, maxPartBytes: p.maxPartBytes });
  const x = engine.tensor(xv, [xRows, width]);
  const gather = p.gather ? engine.tensor(Int32Array.from(p.gather), [p.gather.length], 'i32') : undefined;
  let prior: Float32Array | undefined;
  let out: Tensor | undefined;
  if (p.outRows !== undefined || p.accumulate) {
    const rows = p.outRows ?? M;
    prior = randn(rows * N, seed + 3);
    out = engine.tensor(prior, [rows, N]);
  }
  const fullPlan = plan ? ops.planLinear(engine, { M, N, K, dtype, ...plan }) : undefined;
  const r = ops.linear(engine, x, w, { rows: M, out, accumulate: p.accumulate, gatherRows: gather, act: p.silu ? 'silu_mul' : undefined, plan: fullPlan });
  const got = await r.toFloat32();
  const ref = reference.linearRef(xv, wv, M, N, K, {
    bias, accumulateInto: p.accumulate ? prior : undefined, gatherRows: p.gather, act: p.silu ? 'silu_mul' : undefined,
  });
  const label = `linear ${dtype} M${M} N${N} K${K}${plan ? ` ${fullPlan!.kernel}` : ''}${what}`;
  assert(r.shape[0] === (out ? out.shape[0] : M) && r.shape[1] === N, `${label}: out shape ${r.shape}`);
  if (plan?.kernel === 'gemm-mma') assert(fullPlan!.kernel === 'gemm-mma', `${label}: planned ${fullPlan!.kernel}`);
  if (tol === 'f32-plain') {
    const opts = { bias, accumulateInto: p.accumulate ? prior : undefined, gatherRows: p.gather, act: p.silu ? 'silu_mul' as const : undefined };
    assertWithinPlain(label, got.subarray(0, M * N), ref, () => reference.linearRef(xv, wv, M, N, K, { ...opts, precision: 'f32' }));
  } else {
    assertClose(label, got.subarray(0, M * N), ref, tol);
  }
  if (prior) equalArrays(`${label}: rows past M`, got.subarray(M * N), prior.subarray(M * N));
  return w;
}

/** Small M on the GEMV kernel, larger on the GEMM (forced: the default threshold may move). */
const path = (M: number) => ({ kernel: M <= 16 ? 'gemv' as const : 'gemm' as const });

/**
 * Runs fn with the subgroup-matrix GEMM forced, or, where the adapter cannot run it, says why and runs
 * fn with 'auto' plans (the FMA GEMM) so the same checks still run.
 */
async function onMma(ctx: CaseContext, what: string, fn: (plan: Partial<ops.PlanLinearOptions> | undefined) => Promise<void>): Promise<void> {
  const why = ops.linearMmaUnavailable(ctx.engine, 'bf16');
  if (why) ctx.note(`linear subgroup-matrix GEMM (${what}): not run here: ${why}; SwiftShader, lavapipe and wgpu offer no subgroup matrices, so it runs in the GPU test pass on the GPU machine (bench/results/gpu-tests-*.md); these checks ran on the FMA GEMM 'auto' picks`);
  await fn(why ? undefined : { kernel: 'gemm-mma' });
}

const both = (ctx: CaseContext) => ctx.engine.features.subgroups ? ['subgroup', 'portable'] as const : ['portable'] as const;

export const gemmCases = defineCases('linear', [
  {
    name: 'bf16 weights, M 1, 2, 3, 7, 16, 33 and 70 (the default plans: GEMV up to 64, GEMM above), bias, N 100, K 136',
    async run({ engine }) {
      for (const [i, M] of [1, 2, 3, 7, 16, 33, 70].entries()) {
        await check(engine, { M, N: 100, K: 136, dtype: 'bf16', bias: true, seed: 10 + i });
      }
    },
  },
  {
    name: 'f32 and f16 weights (f16 also from raw bits), GEMV and GEMM, N 24 / 100, K 40',
    async run({ engine }) {
      for (const [i, M] of [1, 3, 70].entries()) await check(engine, { M, N: 24, K: 40, dtype: 'f32', bias: i === 1, seed: 20 + i });
      for (const [i, M] of [2, 7, 70].entries()) await check(engine, { M, N: 100, K: 40, dtype: 'f16', bias: i !== 1, seed: 30 + i });
      // Uint16Array data are bits, stored as they are.
      const [M, N, K] = [3, 24, 40];
      const bits = new Uint16Array(randInt(N * K, 40, 0, 0x7bff).map((b, j) => (j % 3 === 0 ? b | 0x8000 : b) & ~0x7c00 | 0x3800));
      const wv = ops.createLinear(engine, { data: bits, N, K, dtype: 'f16' });
      const xv = randn(M * K, 41);
      const got = await ops.linear(engine, engine.tensor(xv, [M, K]), wv).toFloat32();
      const f16 = await wv.parts[0].tensor.toArray();
      equalArrays('f16 bits as uploaded', f16 as Uint16Array, bits);
      assertClose('linear f16 from bits', got, reference.linearRef(xv, await wv.parts[0].tensor.toFloat32(), M, N, K), 'f32');
    },
  },
  {
    name: 'accumulate into a pre-filled out (h += x·Wᵀ + b) and a larger out left alone past M, both kernels',
    async run({ engine }) {
      for (const [i, M] of [3, 33].entries()) {
        await check(engine, { M, N: 100, K: 136, dtype: 'bf16', bias: true, accumulate: true, outRows: 40, xRows: 40, seed: 50 + i }, path(M));
        await check(engine, { M, N: 100, K: 136, dtype: 'bf16', outRows: 40, xRows: 45, seed: 60 + i }, path(M));
      }
    },
  },
  {
    name: 'gatherRows: rows picked from a larger x (out-of-range indices read a zero row), both kernels',
    async run({ engine }) {
      const gather = [5, 0, 8, 8, -1, 2, 9, 3];   // x has 9 rows: -1 and 9 read zeros (out = bias)
      await check(engine, { M: 8, N: 100, K: 136, dtype: 'bf16', bias: true, gather, seed: 70 }, { kernel: 'gemv' });
      await check(engine, { M: 8, N: 100, K: 136, dtype: 'bf16', bias: true, gather, seed: 71 }, { kernel: 'gemm' });
      await check(engine, { M: 3, N: 100, K: 136, dtype: 'bf16', gather: [8, 1, 4, 6], seed: 72 });   // rows < gatherRows' length
    },
  },
  {
    name: "act 'silu_mul': input silu(gate)·up of [gate | up] rows, with a large gate range, both kernels",
    async run({ engine }) {
      await check(engine, { M: 2, N: 100, K: 136, dtype: 'bf16', silu: true, accumulate: true, seed: 80 }, path(2));
      await check(engine, { M: 33, N: 100, K: 136, dtype: 'bf16', silu: true, bias: true, seed: 81 }, path(33));
      // Gates far into both tails: silu must neither overflow nor lose its sign.
      const [M, N, K] = [2, 24, 40];
      const xv = randn(M * 2 * K, 82, 40);
      const wv = roundToDType(randn(N * K, 83, 0.5), 'f32');
      const w = ops.createLinear(engine, { data: wv, N, K, dtype: 'f32' });
      const got = await ops.linear(engine, engine.tensor(xv, [M, 2 * K]), w, { act: 'silu_mul' }).toFloat32();
      assertClose('linear silu_mul large gates', got, reference.linearRef(xv, wv, M, N, K, { act: 'silu_mul' }), 'f32');
    },
  },
  {
    name: 'a weight split over 2 and 3 buffers (maxPartBytes) gives the same result, both kernels, with bias and accumulate',
    async run({ engine }) {
      // bf16 rows of K=136 are 272 bytes: 50 rows per part -> 2 parts of N=100; 40 -> 3 parts.
      for (const [parts, bytes] of [[2, 272 * 50], [3, 272 * 40]] as const) {
        for (const [i, M] of [3, 33].entries()) {
          const w = await check(engine, { M, N: 100, K: 136, dtype: 'bf16', bias: true, accumulate: true, maxPartBytes: bytes, seed: 90 + parts * 2 + i }, path(M));
          assert(w.parts.length === parts, `expected ${parts} parts, got ${w.parts.length}`);
          assert(w.parts.every((p, j) => p.row0 === (j ? w.parts[j - 1].row0 + w.parts[j - 1].rows : 0)) && w.parts.reduce((s, p) => s + p.rows, 0) === 100,
            `parts do not tile the rows: ${w.parts.map((p) => `${p.row0}+${p.rows}`).join(', ')}`);
        }
      }
    },
  },
  {
    name: 'each kernel forced at every size: GEMM at M 1, 3; GEMV at M 33, 70 (x-row chunks); both GEMM tiles',
    async run({ engine }) {
      for (const [i, M] of [1, 3].entries()) await check(engine, { M, N: 100, K: 136, dtype: 'bf16', bias: true, seed: 110 + i }, { kernel: 'gemm' });
      for (const [i, M] of [33, 70].entries()) await check(engine, { M, N: 100, K: 136, dtype: 'bf16', bias: true, seed: 120 + i }, { kernel: 'gemv' });
      await check(engine, { M: 70, N: 100, K: 136, dtype: 'bf16', bias: true, seed: 130 }, { kernel: 'gemm', tile: 0 }, ' tile 128×128');
      await check(engine, { M: 70, N: 24, K: 40, dtype: 'f32', seed: 131 }, { kernel: 'gemm', tile: 0 }, ' tile 128×128');
    },
  },
  {
    name: 'subgroup-matrix GEMM, x split into hi + lo f16 (f32 tolerance): f16 and bf16 weights, edges in M, N and K, bias, accumulate, gathered rows, silu_mul, a split weight',
    async run(ctx) {
      const { engine } = ctx;
      await onMma(ctx, 'split x', async (mma) => {
        const plan = mma && { ...mma, split: true };
        await check(engine, { M: 70, N: 100, K: 136, dtype: 'bf16', bias: true, seed: 300 }, plan);
        await check(engine, { M: 200, N: 136, K: 40, dtype: 'f16', seed: 301 }, plan);
        await check(engine, { M: 33, N: 100, K: 136, dtype: 'bf16', bias: true, accumulate: true, outRows: 40, xRows: 40, seed: 302 }, plan);
        await check(engine, { M: 8, N: 100, K: 136, dtype: 'f16', bias: true, gather: [5, 0, 8, 8, -1, 2, 9, 3], seed: 303 }, plan);
        await check(engine, { M: 65, N: 24, K: 72, dtype: 'bf16', silu: true, accumulate: true, seed: 304 }, plan);
        const w = await check(engine, { M: 70, N: 100, K: 136, dtype: 'bf16', bias: true, accumulate: true, maxPartBytes: 272 * 40, seed: 305 }, plan);
        assert(w.parts.length === 3, `expected 3 parts, got ${w.parts.length}`);
      });
    },
  },
  {
    name: 'subgroup-matrix GEMM: whole output tiles (straight to out, accumulating from it) and numerical extremes (x std 1e3 and 1e-4)',
    async run(ctx) {
      const { engine } = ctx;
      await onMma(ctx, 'whole tiles', async (mma) => {
        for (const [i, accumulate] of [false, true].entries()) {
          await check(engine, { M: 256, N: 256, K: 64, dtype: 'bf16', accumulate, seed: 310 + i }, mma && { ...mma, split: true }, ' whole tiles');
        }
        for (const [i, xStd] of [1e3, 1e-4].entries()) {
          // Sums that cancel far below their terms: on the matrix GEMM, SPEC §6's row for the weights'
          // storage dtype (tensor units truncate as they add: an H200 erred 2.05x a plain f32 sum here);
          // on the FMA GEMM, f32 or twice a plain f32 implementation's error.
          await check(engine, { M: 130, N: 136, K: 136, dtype: 'f16', xStd, seed: 315 + i }, mma && { ...mma, split: true }, ` x std ${xStd}`, mma ? 'f16' : 'f32-plain');
        }
      });
    },
  },
  {
    name: 'subgroup-matrix GEMM: every tile and every f16 → f32 configuration the adapter offers, x split and x in f16 (f16 tolerance)',
    async run(ctx) {
      const { engine } = ctx;
      await onMma(ctx, 'tiles and configurations', async (mma) => {
        if (!mma) {
          await check(engine, { M: 130, N: 264, K: 72, dtype: 'bf16', bias: true, seed: 320 });
          return;
        }
        const configs = mmaConfigs(engine.features);
        let ran = 0;
        for (const [ci] of configs.entries()) {
          for (const [ti] of ops.LINEAR_MMA_TILES.entries()) {
            for (const split of [true, false]) {
              let plan: ops.LinearPlan;
              try {
                plan = ops.planLinear(engine, { M: 130, N: 264, K: 72, dtype: 'bf16', kernel: 'gemm-mma', mmaConfig: ci, tile: ti, split });
              } catch {
                continue;   // this tile does not fit the adapter's limits with this configuration
              }
              assert(plan.kernel === 'gemm-mma' && plan.split === split, `planned ${JSON.stringify(plan)}`);
              const c = configs[ci];
              await check(engine, { M: 130, N: 264, K: 72, dtype: ci % 2 ? 'f16' : 'bf16', bias: ti % 2 === 0, seed: 330 + ran },
                { kernel: 'gemm-mma', mmaConfig: ci, tile: ti, split }, ` ${c.M}×${c.N}×${c.K} tile ${ti} split ${split}`, split ? 'f32' : 'f16');
              ran++;
            }
          }
        }
        assert(ran > 0, 'no subgroup-matrix GEMM plan ran');
        ctx.note(`linear subgroup-matrix GEMM: ${ran} plans (${configs.length} configurations × tiles × split) checked`);
      });
    },
  },
  {
    name: 'RMSNorm folded into the GEMV (norm): equals rmsNorm then linear, M 1-16, f32/bf16 weights, both reductions, gathered rows, bias and accumulation; refused off the GEMV',
    async run(ctx) {
      const { engine } = ctx;
      let ran = 0;
      const shapes = [[1, 100, 136, 'bf16'], [3, 24, 40, 'f32'], [7, 72, 264, 'bf16'], [16, 40, 1032, 'f16']] as const;
      // Each shape is its own pipeline a reduction (1.5-3 s each on SwiftShader): the software runtimes
      // share the shapes, each running its own with its reductions; the first shape is listed twice so
      // that Deno (every kernel with its loops written out) runs one too. A GPU runs them all.
      const mine = new Set(spreadOverSoftware(ctx, [0, 1, 2, 3, 0], 'RMSNorm folded into the GEMV', (i) => `M${shapes[i][0]} N${shapes[i][1]} K${shapes[i][2]} ${shapes[i][3]}`));
      for (const variant of both(ctx)) {
        for (const i of mine) {
          const [M, N, K, dtype] = shapes[i];
          const seed = 390 + 10 * i + (variant === 'portable' ? 5 : 0);
          const xRows = M + 2;
          const wv = roundToDType(randn(N * K, seed, 0.5), dtype);
          const xv = randn(xRows * K, seed + 1, 3);
          const gamma = randn(K, seed + 2);
          const eps = [1e-5, 1e-6, 1e-2, 0][i];
          const bias = i % 2 ? randn(N, seed + 3) : undefined;
          const gatherIdx = i === 2 ? Array.from({ length: M }, (_, m) => (m === 3 ? -1 : (m * 5) % xRows)) : undefined;
          const prior = i === 3 ? randn(M * N, seed + 4) : undefined;
          const w = ops.createLinear(engine, { data: wv, N, K, dtype, bias });
          const x = engine.tensor(xv, [xRows, K]);
          const nw = engine.tensor(gamma, [K]);
          const gather = gatherIdx ? engine.tensor(Int32Array.from(gatherIdx), [M], 'i32') : undefined;
          const out = prior ? engine.tensor(prior, [M, N]) : undefined;
          const plan = ops.planLinear(engine, { M, N, K, dtype, kernel: 'gemv', variant });
          const r = ops.linear(engine, x, w, { rows: M, plan, norm: { weight: nw, eps }, gatherRows: gather, out, accumulate: !!prior });
          const got = await r.toFloat32();
          // The reference: the norm of each source row (a zero row for an index outside x), then the product.
          const src = Float64Array.from({ length: M * K }, (_, j) => {
            const m = Math.floor(j / K), s = gatherIdx ? gatherIdx[m] : m;
            return s >= 0 && s < xRows ? xv[s * K + (j % K)] : 0;
          });
          const normed = reference.rmsNormRef(src, gamma, eps, { rows: M, heads: 1, n: K });
          const want = reference.linearRef(normed, wv, M, N, K, { bias, accumulateInto: prior });
          assertClose(`linear norm ${variant} M${M} N${N} K${K} ${dtype}`, got.subarray(0, M * N), want, 'f32');
          for (const t of [w, x, nw, r, ...(gather ? [gather] : [])]) t.destroy();
          ran++;
        }
      }
      // Refused where it cannot run, before any work.
      const w = ops.createLinear(engine, { data: randn(24 * 40, 1), N: 24, K: 40, dtype: 'f32' });
      const x = engine.tensor(randn(70 * 80, 2), [70, 80]);
      const nw = engine.tensor(randn(40, 3), [40]);
      await expectThrows(() => ops.linear(engine, x.view([70, 80]), w, { norm: { weight: nw, eps: 1e-5 }, act: 'silu_mul', plan: ops.planLinear(engine, { M: 70, N: 24, K: 40, dtype: 'f32', kernel: 'gemv' }) }), 'linear: norm: expected no act');
      const x40 = engine.tensor(randn(70 * 40, 4), [70, 40]);
      await expectThrows(() => ops.linear(engine, x40, w, { norm: { weight: nw, eps: 1e-5 } }), "linear: norm: expected a GEMV plan", "picked 'gemm'");
      await expectThrows(() => ops.linear(engine, x40, w, { rows: 2, norm: { weight: engine.tensor(randn(8, 5), [8]), eps: 1e-5 } }), 'linear: norm.weight: expected an f32 tensor of K=40 values');
      await expectThrows(() => ops.linear(engine, x40, w, { rows: 2, norm: { weight: nw, eps: -1 } }), 'linear: norm.eps: expected a number >= 0');
      for (const t of [w, x, nw, x40]) t.destroy();
      ctx.note(`linear: RMSNorm folded into the GEMV: ${ran} runs (${mine.size} of the 4 shapes, ${both(ctx).join(' and ')} reductions)`);
    },
  },
  {
    name: "split-K's second pass (gemm_splitk.wgsl) adds every split's partial sums through the epilogue: bias, accumulation, a part's columns",
    async run({ engine }) {
      // The pass runs on every adapter (the splits' first pass, on subgroup matrices, in the GPU test pass).
      for (const [i, [M, N, S, Ntot, n0, bias, acc]] of ([[3, 40, 4, 40, 0, true, false], [17, 9, 3, 30, 21, false, true], [1, 300, 8, 300, 0, true, true]] as const).entries()) {
        const ws = randn(S * M * N, 360 + i), b = randn(Ntot, 370 + i), prior = randn(M * Ntot, 380 + i);
        const wsT = engine.tensor(ws, [S * M, N]);
        const biasT = engine.tensor(b, [Ntot]);
        const out = engine.tensor(prior, [M, Ntot]);
        const k = engine.kernel('gemm_splitk', 'splitk_main', { consts: { WG: 64 } });
        engine.dispatch(k, { bias: biasT, out, ws: wsT }, { M, N, K: 0, n0, out_stride: Ntot, x_stride: 0, x_rows: 0, flags: (bias ? 1 : 0) | (acc ? 2 : 0), k_split: S },
          Math.ceil((M * N) / 64));
        const got = await out.toFloat32();
        const want = Float64Array.from(prior);
        for (let m = 0; m < M; m++) {
          for (let n = 0; n < N; n++) {
            let v = 0;
            for (let s = 0; s < S; s++) v += ws[(s * M + m) * N + n];
            if (bias) v += b[n0 + n];
            want[m * Ntot + n0 + n] = (acc ? prior[m * Ntot + n0 + n] : 0) + v;
          }
        }
        assertClose(`split-K sum ${i}`, got, want, 'f32');
        for (const t of [wsT, biasT, out]) t.destroy();
      }
    },
  },
  {
    name: 'subgroup-matrix GEMM over the decode tiles (one row tile holds every row of a step): every tile at M 1, 13, 32, 64 with bias, accumulation, the SiLU-gated input and gathered rows; what the planner picks for decode-sized steps',
    async run(ctx) {
      const { engine } = ctx;
      const big = { N: 16384, K: 2048, dtype: 'bf16' as const };
      await onMma(ctx, 'decode tiles', async (mma) => {
        if (!mma) {
          // Without subgroup matrices decode-sized steps keep the GEMV.
          for (const M of [8, 32, 64]) {
            const p = ops.planLinear(engine, { M, ...big });
            assert(p.kernel === 'gemv', `M ${M}: planned ${p.kernel}, expected the GEMV without subgroup matrices`);
          }
          await check(engine, { M: 32, N: 200, K: 136, dtype: 'bf16', bias: true, seed: 340 });
          return;
        }
        // The planner: the GEMV below linearDecodeMmaMinM rows and for f32 weights; from it the fewest rows
        // holding M; 'off' keeps the GEMV.
        assert(ops.planLinear(engine, { M: engine.tuning.linearDecodeMmaMinM - 1, ...big }).kernel === 'gemv', 'the GEMV below linearDecodeMmaMinM');
        assert(ops.planLinear(engine, { M: 32, ...big, dtype: 'f32' }).kernel === 'gemv', 'the GEMV for f32 weights');
        for (const M of [8, 16, 17, 32, 33, 64]) {
          const p = ops.planLinear(engine, { M, ...big });
          // 16-row matrices (NVIDIA): 16, 32 or 64 rows, the fewest that hold M.
          assert(p.kernel === 'gemm-mma' && (p.SM !== 16 || (p.BM >= M && p.BM < 2 * Math.max(M, 16))),
            `M ${M}: planned ${p.kernel === 'gemm-mma' ? `a ${p.BM}-row tile` : p.kernel}, expected the fewest rows holding M`);
        }
        await withTuning(engine, { linearDecodeMma: 'off' }, async () => {
          assert(ops.planLinear(engine, { M: 32, ...big }).kernel === 'gemv', "linearDecodeMma 'off' keeps the GEMV");
        });
        // Split-K: the planner splits decode's few-column layers; K 520 is 9 k tiles of 64 (5 of 128), so
        // 2, 3 and 5 splits leave uneven shares and 16 leaves splits with no k tile at all.
        assert(ops.planLinear(engine, { M: 16, N: 2048, K: 8192, dtype: 'bf16' }).kernel === 'gemm-mma'
          && (ops.planLinear(engine, { M: 16, N: 2048, K: 8192, dtype: 'bf16' }) as ops.GemmMmaPlan).KS > 1, 'down (N 2048, K 8192) at M 16 splits K');
        await withTuning(engine, { linearDecodeSplitK: 1 }, async () => {
          assert((ops.planLinear(engine, { M: 16, N: 2048, K: 8192, dtype: 'bf16' }) as ops.GemmMmaPlan).KS === 1, 'linearDecodeSplitK 1: no split');
        });
        let ran = 0;
        for (const [ti] of ops.LINEAR_MMA_DECODE_TILES.entries()) {
          for (const [i, M] of [1, 13, 32, 64].entries()) {
            const kSplit = [1, 2, 3, 5, 16][(ti + i) % 5];
            const p: Problem = { M, N: 200, K: 520, dtype: ti % 3 === 1 ? 'f16' : 'bf16', bias: ti % 2 === 0, seed: 350 + ran };
            if (i === 1) Object.assign(p, { accumulate: true, outRows: M + 3 });
            if (i === 2) p.silu = true;
            if (i === 3) p.gather = Array.from({ length: M }, (_, j) => (j === 5 ? -1 : (j * 7) % 9));
            // SPEC §6's row for the weights' dtype, as for every matrix GEMM over K in the hundreds (the
            // tensor units truncate as they add: an H200 erred 1.05× the f32 tolerance at K 520).
            await check(engine, p, { kernel: 'gemm-mma', decodeTiles: true, tile: ti, split: true, kSplit }, ` decode tile ${ti} K split ${kSplit}`, p.dtype === 'f32' ? 'f32' : p.dtype);
            ran++;
          }
        }
        // Over a weight split into parts (one dispatch pair each) with the planner's split.
        await check(engine, { M: 24, N: 300, K: 1024, dtype: 'bf16', bias: true, accumulate: true, maxPartBytes: 100 * 1024 * 2, seed: 349 },
          { kernel: 'gemm-mma', decodeTiles: true, kSplit: 4 }, ' parts, K split 4', 'f16');
        ctx.note(`linear subgroup-matrix GEMM over the decode tiles: ${ran} plans checked, K split 1-16`);
      });
    },
  },
  {
    name: 'GEMV reductions: subgroup (lanes per row below and above the subgroup size) and portable',
    async run(ctx) {
      const { engine } = ctx;
      for (const variant of both(ctx)) {
        for (const KT of [4, 16, 256]) {
          await check(engine, { M: 3, N: 100, K: 136, dtype: 'bf16', bias: true, seed: 140 + KT }, { kernel: 'gemv', variant, KT }, ` ${variant} KT${KT}`);
        }
      }
      ctx.note(engine.features.subgroups
        ? `linear: GEMV subgroup and portable reductions ran (subgroup size ${engine.features.subgroupMinSize ?? '?'}..${engine.features.subgroupMaxSize ?? '?'})`
        : 'linear: no subgroups on this adapter: only the portable GEMV reduction ran');
    },
  },
  {
    name: 'long K (2048, f32): within the f32 tolerance, or within twice the error of a plain f32 implementation + 1e-5',
    async run({ engine }) {
      const [N, K] = [24, 2048];
      for (const [i, M] of [2, 33].entries()) {
        const wv = randn(N * K, 150 + i, 0.5);
        const xv = randn(M * K, 160 + i);
        const w = ops.createLinear(engine, { data: wv, N, K, dtype: 'f32' });
        const got = await ops.linear(engine, engine.tensor(xv, [M, K]), w).toFloat32();
        // A sum of 2048 products of size ~0.5 rounds in f32 beyond 5e-6 where the result is near 0.
        assertWithinPlain(`linear long K M${M}`, got, reference.linearRef(xv, wv, M, N, K), () => reference.linearRef(xv, wv, M, N, K, { precision: 'f32' }));
      }
    },
  },
  {
    name: 'createLinearOnDevice: the documented values (host mirror), independent of the split, and usable',
    async run({ engine }) {
      const [N, K, seed, std] = [100, 40, 1234, 0.25];
      for (const dtype of ['bf16', 'f32', 'f16'] as const) {
        const w = ops.createLinearOnDevice(engine, { N, K, dtype, seed, std, maxPartBytes: dtype === 'f32' ? 160 * 40 : 80 * 40 });
        assert(w.parts.length === 3, `${dtype}: expected 3 parts, got ${w.parts.length}`);
        const host = ops.randomLinearValues(K, seed, std, 0, N);
        const got = new Float32Array(N * K);
        for (const p of w.parts) got.set(await p.tensor.toFloat32(), p.row0 * K);
        const want = roundToDType(host, dtype);
        if (dtype === 'f16') assertClose('random f16 weights (pack2x16float rounding may differ by an ulp)', got, want, 'f16');
        else equalArrays(`random ${dtype} weights`, got, want);
        let mean = 0, sq = 0, max = 0;
        for (const v of host) { mean += v; sq += v * v; max = Math.max(max, Math.abs(v)); }
        mean /= host.length;
        const sd = Math.sqrt(sq / host.length - mean * mean);
        assert(Math.abs(mean) < 0.02 && Math.abs(sd - std) < 0.02 && max < std * Math.sqrt(3), `${dtype}: mean ${mean}, std ${sd}, max ${max}`);
        if (dtype === 'bf16') {
          const other = ops.randomLinearValues(K, seed + 1, std, 0, 1);
          assert(other.some((v, j) => v !== host[j]), 'another seed gives other values');
          const xv = randn(3 * K, 170);
          const out = await ops.linear(engine, engine.tensor(xv, [3, K]), w).toFloat32();
          assertClose('linear on GPU-made weights', out, reference.linearRef(xv, got, 3, N, K), 'f32');
        }
        w.destroy();
      }
    },
  },
  {
    name: 'validation: each argument named with what was expected and what came',
    async run({ engine }) {
      const w = ops.createLinear(engine, { data: randn(24 * 40, 1), N: 24, K: 40, dtype: 'f32', bias: randn(24, 2) });
      const x = engine.tensor(randn(3 * 40, 3), [3, 40]);
      await expectThrows(() => ops.linear(engine, engine.tensor(randn(3 * 36, 3), [3, 36]), w), 'linear: x: expected shape [rows, K=40], got [3, 36]');
      await expectThrows(() => ops.linear(engine, x, w, { act: 'silu_mul' }), "linear: x: expected shape [rows, 2K=80]", 'got [3, 40]');
      await expectThrows(() => ops.linear(engine, engine.tensor(randn(3 * 40, 3), [3, 40], 'bf16'), w), "linear: x.dtype: expected 'f32', got 'bf16'");
      await expectThrows(() => ops.linear(engine, x, w, { rows: 4 }), 'linear: rows: expected a positive integer up to 3 (the rows of x), got 4');
      await expectThrows(() => ops.linear(engine, x, w, { out: engine.tensor(randn(3 * 25, 4), [3, 25]) }), 'linear: out: expected shape [>= M=3, N=24], got [3, 25]');
      await expectThrows(() => ops.linear(engine, x, w, { out: engine.tensor(randn(2 * 24, 4), [2, 24]) }), 'linear: out: expected shape [>= M=3, N=24], got [2, 24]');
      await expectThrows(() => ops.linear(engine, x, w, { accumulate: true }), 'linear: accumulate: expected an `out` tensor to accumulate into, got none');
      await expectThrows(() => ops.linear(engine, x, w, { gatherRows: engine.tensor(randn(3, 5), [3]) }), 'linear: gatherRows: expected an i32 tensor [M], got f32 [3]');
      await expectThrows(() => ops.linear(engine, x, w, { act: 'gelu' as never }), "linear: act: expected 'silu_mul' or undefined, got 'gelu'");
      await expectThrows(() => ops.linear(engine, x, {} as never), 'linear: w: expected a LinearWeight');
      await expectThrows(() => ops.createLinear(engine, { data: randn(24 * 36, 1), N: 24, K: 36, dtype: 'bf16' }),
        'createLinear: K: expected a multiple of 8 for bf16 weights', 'got 36');
      await expectThrows(() => ops.createLinear(engine, { data: randn(24 * 40, 1), N: 25, K: 40, dtype: 'f32' }), 'createLinear: data: expected N·K = 1000 elements, got 960');
      await expectThrows(() => ops.createLinear(engine, { data: new Uint16Array(24 * 40), N: 24, K: 40, dtype: 'f32' }), "createLinear: data: expected a Float32Array for dtype 'f32', got Uint16Array(960)");
      await expectThrows(() => ops.createLinear(engine, { data: randn(24 * 40, 1), N: 24, K: 40, dtype: 'fp8e4m3' as never }), "createLinear: dtype: expected 'f32', 'f16' or 'bf16' (quantized weights: createQuantLinear), got 'fp8e4m3'");
      await expectThrows(() => ops.createLinear(engine, { data: randn(24 * 40, 1), N: 24, K: 40, dtype: 'f32', bias: randn(23, 1) }), 'createLinear: bias: expected a Float32Array of N=24 values, got Float32Array(23)');
      await expectThrows(() => ops.createLinear(engine, { data: randn(24 * 40, 1), N: 24, K: 40, dtype: 'f32', maxPartBytes: 100 }), 'createLinear: maxPartBytes: expected room for one weight row of 160 bytes');
      const t = engine.tensor(randn(24 * 40, 1), [24, 40]);
      await expectThrows(() => ops.linearFromParts(engine, { N: 25, K: 40, dtype: 'f32', parts: t }), 'linearFromParts: parts: expected rows adding up to N=25, got 24 rows');
      await expectThrows(() => ops.linearFromParts(engine, { N: 24, K: 40, dtype: 'bf16', parts: [t] }), "linearFromParts: parts[0].dtype: expected 'bf16', got 'f32'");
      await expectThrows(() => ops.planLinear(engine, { M: 0, N: 24, K: 40, dtype: 'f32' }), 'planLinear: M: expected a positive integer, got 0');
      await expectThrows(() => ops.planLinear(engine, { M: 1, N: 24, K: 40, dtype: 'f32', KT: 3 }), 'planLinear: KT: expected a power of two');
      await expectThrows(() => ops.planLinear(engine, { M: 100, N: 24, K: 40, dtype: 'f32', kernel: 'gemm-mma' }),
        "planLinear: kernel: expected 'auto', 'gemv' or 'gemm' (no subgroup-matrix GEMM here: f32 weights (the matrices take f16))", "got 'gemm-mma'");
      const why = ops.linearMmaUnavailable(engine, 'bf16');
      if (why) {
        await expectThrows(() => ops.planLinear(engine, { M: 100, N: 24, K: 40, dtype: 'bf16', kernel: 'gemm-mma' }),
          `planLinear: kernel: expected 'auto', 'gemv' or 'gemm' (no subgroup-matrix GEMM here: ${why})`);
      } else {
        await expectThrows(() => ops.planLinear(engine, { M: 100, N: 24, K: 40, dtype: 'bf16', kernel: 'gemm-mma', tile: 99 }), 'planLinear: tile: expected an index of LINEAR_MMA_TILES');
      }
      // A weight made elsewhere, wrapped: the same result as an uploaded one.
      const xv = randn(2 * 40, 9);
      const wrapped = ops.linearFromParts(engine, { N: 24, K: 40, dtype: 'f32', parts: [t] });
      const a = await ops.linear(engine, engine.tensor(xv, [2, 40]), wrapped).toFloat32();
      assertClose('linear on wrapped parts', a, reference.linearRef(xv, await t.toFloat32(), 2, 24, 40), 'f32');
      wrapped.destroy();
      assert(!t.destroyed, 'destroy() of a wrapped weight that it does not own leaves its tensors');
    },
  },
]);
