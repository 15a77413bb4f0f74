// The group types (core/quant.ts: the HF quantized safetensors formats as the GPU holds them): random
// valid blocks against the float64 reference of their dequantized weights, on the GEMV, the FMA GEMM
// and the subgroup-matrix GEMM (prefill and decode tiles); input-column permutations (GPTQ desc_act:
// LinearWeight.perm) with every option of ops.linear; weights in parts; MoE experts and embedding tables
// of group types; bad permutations.
//
// Compile time: each type's decoder is its own pipeline per kernel shape (~20 s each on lavapipe with a
// cold shader cache), so the linear cases spread the same SAMPLE over the software runtimes with the
// same shapes (N 37, K 256; M 1, 5 and 70): a runtime compiles its two types' GEMV and GEMM once and the
// later cases reuse them (the shared engine keeps its pipelines); experts and tables add one type each.
import { ops, reference, roundToDType, QUANT_FORMATS, type Engine, type QuantType } from '../../src/index';
import { checkQuant, checkQuantEmbedding, partBytes } from './quant.cases';
import { assert, assertClose, assertWithinPlain, defineCases, expectThrows, randn, rng, spreadOverSoftware, type CaseContext } from './harness';

/** One group type's linear layer (N 37, K 256, every case the same shapes: their pipelines are shared). */
function checkGroup(engine: Engine, type: QuantType, M: number, seed: number, kernel: 'gemv' | 'gemm' | 'gemm-mma', decodeTiles = false): Promise<void> {
  return checkQuant(engine, type, M, seed, { N: 37, K: 256, plan: { kernel, decodeTiles }, tol: kernel === 'gemm-mma' ? 'f16' : undefined });
}

/** A seeded random permutation of 0..K-1 (Fisher-Yates). */
function randomPerm(K: number, seed: number): Int32Array {
  const r = rng(seed);
  const p = Int32Array.from({ length: K }, (_, k) => k);
  for (let i = K - 1; i > 0; i--) {
    const j = Math.floor(r() * (i + 1));
    [p[i], p[j]] = [p[j], p[i]];
  }
  return p;
}

/** GPTQ desc_act: g_idx puts each input column in one of K/G groups of G columns, scattered along K; the
 *  loader stores the columns sorted stably by g_idx, so perm (stored column j -> input column) is that order. */
function gptqPerm(K: number, G: number, seed: number): Int32Array {
  const gIdx = randomPerm(K, seed).map((v) => Math.floor(v / G));
  return Int32Array.from(Array.from({ length: K }, (_, k) => k).sort((a, b) => gIdx[a] - gIdx[b] || a - b));
}

/** The weight in original column order: W[n, perm[j]] = stored[n, j]. */
function unpermute(stored: ArrayLike<number>, N: number, K: number, perm: Int32Array): Float64Array {
  const out = new Float64Array(N * K);
  for (let n = 0; n < N; n++) for (let j = 0; j < K; j++) out[n * K + perm[j]] = stored[n * K + j];
  return out;
}

interface PermRun {
  M: number;
  kernel: 'gemv' | 'gemm' | 'gemm-mma';
  decodeTiles?: boolean;
  /** RMSNorm folded (o.norm). */
  norm?: boolean;
  /** act 'silu_mul': x rows [gate | up]. */
  act?: boolean;
  /** out given with a prior (and a row past M that must keep it), accumulate. */
  accumulate?: boolean;
  /** gatherRows (one index outside x: a zero row); x holds more rows than M. */
  gather?: boolean;
}

/**
 * ops.linear on a weight with permuted columns against the float64 reference on `wOrig`, the dequantized
 * weight with its columns put back in original order (bias: the weight's own, given here too): the
 * prologues act on x in original order, the perm only says where each stored column's input is.
 */
async function checkPermRun(engine: Engine, what: string, w: ops.LinearWeight, wOrig: Float64Array, bias: Float32Array | undefined,
                            run: PermRun, seed: number): Promise<void> {
  const { M } = run;
  const { N, K } = w;
  assert(w.perm !== null, `${what}: the weight has no perm`);
  const xRows = M + (run.gather ? 3 : 0);
  const width = run.act ? 2 * K : K;
  const xv = randn(xRows * width, seed, run.act ? 2 : 1);
  const gatherRows = run.gather ? Int32Array.from({ length: M }, (_, m) => (m === 1 ? xRows : (m * 7 + 2) % xRows)) : undefined;
  const nw = run.norm ? randn(K, seed + 1) : undefined;
  const prior = run.accumulate ? randn((M + 1) * N, seed + 2) : undefined;
  const plan = ops.planLinear(engine, { M, N, K, dtype: w.dtype, kernel: run.kernel, decodeTiles: run.decodeTiles });
  const out = prior ? engine.tensor(prior, [M + 1, N]) : undefined;
  const eps = 1e-5;
  const res = ops.linear(engine, engine.tensor(xv, [xRows, width]), w, {
    rows: M, out, accumulate: run.accumulate, act: run.act ? 'silu_mul' : undefined, plan,
    gatherRows: gatherRows && engine.tensor(gatherRows, [M], 'i32'), norm: nw && { weight: engine.tensor(nw, [K]), eps },
  });
  const got = (await res.toFloat32()).subarray(0, M * N);
  const xIn = nw ? reference.rmsNormRef(xv, nw, eps, { rows: xRows, n: K }) : xv;
  const refOpts = { bias, accumulateInto: prior, gatherRows, act: run.act ? 'silu_mul' as const : undefined };
  const label = `${what} M${M} ${plan.kernel}${run.norm ? ' norm' : ''}${run.act ? ' silu_mul' : ''}${run.accumulate ? ' accumulate' : ''}${run.gather ? ' gatherRows' : ''}`;
  if (plan.kernel === 'gemm-mma') {
    assertClose(label, got, reference.linearRef(xIn, roundToDType(Float32Array.from(wOrig), 'f16'), M, N, K, refOpts), 'f16');
  } else {
    assertWithinPlain(label, got, reference.linearRef(xIn, wOrig, M, N, K, refOpts),
      () => reference.linearRef(xIn, wOrig, M, N, K, { ...refOpts, precision: 'f32' }));
  }
  if (prior) {
    const past = (await res.toFloat32()).subarray(M * N);
    assert(past.every((v, n) => v === Math.fround(prior[M * N + n])), `${label}: the row past M changed`);
  }
}

/** A group-type weight with permuted columns: the stored blocks, the weight on the GPU and its
 *  original-order values. */
function permWeight(engine: Engine, type: QuantType, N: number, K: number, perm: Int32Array, seed: number,
                    o: { bias?: Float32Array; maxPartBytes?: number } = {}) {
  const bytes = reference.randomQuantRows(type, N, K, seed);
  const w = ops.createQuantLinear(engine, { data: bytes, N, K, type, perm: Int32Array.from(perm), ...o });
  return { w, wOrig: unpermute(reference.dequantizeRows(type, bytes, N, K), N, K, perm) };
}

/** Bytes of `rows` rows of K values of `type`, as maxPartBytes counts them (word-padded, with slack). */

function mmaWhy(ctx: CaseContext, what: string): string | null {
  const why = ops.linearMmaUnavailable(ctx.engine, 'A4G64_BF16');
  if (why) ctx.note(`${what}: not run here: ${why}; it runs in the GPU test pass on the GPU machine`);
  return why;
}

/** Random distinct experts per token (a seeded shuffle) and their weights. */
function routing(rows: number, E: number, topK: number, seed: number): { ids: Int32Array; weights: Float32Array } {
  const r = rng(seed);
  const ids = new Int32Array(rows * topK);
  for (let t = 0; t < rows; t++) ids.set(randomPerm(E, seed + 1 + t).subarray(0, topK), t * topK);
  return { ids, weights: Float32Array.from({ length: rows * topK }, () => 0.1 + r()) };
}

/** ops.moe on experts of group types (createQuantExperts) against moeRef on their dequantized weights
 *  (rounded to f16 for the subgroup-matrix GEMM, as it takes them); rows of out past `rows` keep theirs. */
async function checkGroupMoe(engine: Engine, t: { gateUp: QuantType; down: QuantType; H: number; I: number }, rows: number,
                             kernel: 'gemv' | 'gemm' | 'gemm-mma', seed: number, o: { accumulate?: boolean; maxPartBytes?: number; parts?: number } = {}): Promise<void> {
  const E = 6, topK = 2, { H, I } = t;
  const total = rows + 1;
  // Weights of a trained model's size (~1/√K), so SiLU-gated products stay in f16's range on the matrices.
  const scaleRange: [number, number] = [2e-4, 2e-3];
  const guBytes = reference.randomQuantRows(t.gateUp, E * 2 * I, H, seed, { scaleRange });
  const dnBytes = reference.randomQuantRows(t.down, E * H, I, seed + 1, { scaleRange });
  const round = (v: Float64Array) => (kernel === 'gemm-mma' ? roundToDType(Float32Array.from(v), 'f16') : v);
  const gateUp = round(reference.dequantizeRows(t.gateUp, guBytes, E * 2 * I, H));
  const down = round(reference.dequantizeRows(t.down, dnBytes, E * H, I));
  const xv = randn(total * H, seed + 2);
  const r = routing(total, E, topK, seed + 3);
  const prior = randn(total * H, seed + 4);
  const experts = ops.createQuantExperts(engine, { E, H, I, gateUpType: t.gateUp, gateUp: guBytes, downType: t.down, down: dnBytes, maxPartBytes: o.maxPartBytes });
  try {
    if (o.parts !== undefined) assert(experts.parts.length === o.parts, `experts: expected ${o.parts} parts, got ${experts.parts.length}`);
    const out = engine.tensor(prior, [total, H]);
    const plan = ops.planMoe(engine, { rows, topK, E, H, I, dtype: experts.dtype, downDtype: experts.downDtype, kernel });
    ops.moe(engine, engine.tensor(xv, [total, H]), { ids: engine.tensor(r.ids, [total, topK], 'i32'), weights: engine.tensor(r.weights, [total, topK]) },
      experts, { rows, out, accumulate: o.accumulate, plan });
    const got = await out.toFloat32();
    const refOpts = { rows, E, H, I, topK, accumulateInto: o.accumulate ? prior : undefined };
    const label = `moe ${t.gateUp}|${t.down} rows ${rows} ${plan.kernel}${o.accumulate ? ' accumulate' : ''}${o.parts ? ` in ${o.parts} parts` : ''}`;
    const ref = reference.moeRef(xv, r.ids, r.weights, gateUp, down, refOpts);
    if (kernel === 'gemm-mma') assertClose(label, got.subarray(0, rows * H), ref, 'f16');
    else {
      assertWithinPlain(label, got.subarray(0, rows * H), ref,
        () => reference.moeRef(xv, r.ids, r.weights, gateUp, down, { ...refOpts, precision: 'f32' }));
    }
    assert(got.subarray(rows * H).every((v, j) => v === prior[rows * H + j]), `${label}: the row past rows changed`);
  } finally {
    experts.destroy();
  }
}

const SAMPLE: readonly QuantType[] = ['A4G64_BF16', 'Z4G128_F16', 'F8G128_F32', 'A3G32_F16', 'A8G64_BF16', 'F8G64_BF16', 'Z2G64_F16', 'A6G128_F32', 'Z8G32_BF16', 'A5G32_BF16'];

export const quantGroupCases = defineCases('quant', [
  {
    name: 'group types (MLX affine, AWQ/GPTQ integer zeros, FP8 blocks) on the GEMV and the FMA GEMM against the float64 reference of their dequantized weights',
    async run(ctx) {
      for (const type of spreadOverSoftware(ctx, SAMPLE, 'group types')) {
        const i = SAMPLE.indexOf(type);
        await checkGroup(ctx.engine, type, 1, 700 + 10 * i, 'gemv');
        await checkGroup(ctx.engine, type, 5, 701 + 10 * i, 'gemv');
        await checkGroup(ctx.engine, type, 70, 702 + 10 * i, 'gemm');
      }
    },
  },
  {
    name: 'permuted input columns (GPTQ desc_act: a random permutation and a shuffled g_idx sorted by group) on the GEMV (M 1, 5) and the FMA GEMM (M 70): bias, gatherRows, accumulate, the RMSNorm folded, silu_mul; stacked parts sharing a perm, one in several buffers',
    async run(ctx) {
      const { engine } = ctx;
      const N = 37, K = 256;
      for (const type of spreadOverSoftware(ctx, SAMPLE, 'group types with permuted columns')) {
        const i = SAMPLE.indexOf(type);
        const G = QUANT_FORMATS[type].blockElems;
        const s = 800 + 40 * i;
        // Any permutation: the prologues that keep x as it is.
        const bias = randn(N, s);
        const a = permWeight(engine, type, N, K, randomPerm(K, s + 1), s + 2, { bias });
        try {
          for (const [j, run] of ([{ M: 1, kernel: 'gemv' }, { M: 5, kernel: 'gemv', gather: true }, { M: 70, kernel: 'gemm', accumulate: true }] as PermRun[]).entries()) {
            await checkPermRun(engine, `${type} random perm, bias`, a.w, a.wOrig, bias, run, s + 3 + j);
          }
        } finally {
          a.w.destroy();
        }
        // desc_act's layout, with the model's calls: the input norm folded (decode), the down projection's silu_mul + accumulate.
        const perm = gptqPerm(K, G, s + 10);
        const b = permWeight(engine, type, N, K, perm, s + 11);
        try {
          const runs: PermRun[] = [{ M: 1, kernel: 'gemv', norm: true }, { M: 5, kernel: 'gemv', act: true, accumulate: true },
            { M: 70, kernel: 'gemm', act: true }, { M: 70, kernel: 'gemm', norm: true, gather: true }];
          for (const [j, run] of runs.entries()) await checkPermRun(engine, `${type} g_idx G${G}`, b.w, b.wOrig, undefined, run, s + 12 + j);
        } finally {
          b.w.destroy();
        }
        // q | k | v of one layer: every part sorted by the same g_idx (equal copies), the first in 3 buffers.
        const p1 = permWeight(engine, type, 24, K, perm, s + 20, { maxPartBytes: partBytes(type, 8, K) });
        const p2 = permWeight(engine, type, 13, K, perm, s + 21);
        const sb = randn(N, s + 22);
        const st = ops.stackLinears(engine, [p1.w, p2.w], sb);
        try {
          assert(p1.w.parts.length === 3 && st.parts.length === 4, `stacked: expected 3 + 1 parts, got ${p1.w.parts.length} + ${p2.w.parts.length}`);
          const wOrig = new Float64Array(N * K);
          wOrig.set(p1.wOrig);
          wOrig.set(p2.wOrig, 24 * K);
          for (const [j, run] of ([{ M: 1, kernel: 'gemv', norm: true }, { M: 70, kernel: 'gemm', act: true, accumulate: true }] as PermRun[]).entries()) {
            await checkPermRun(engine, `${type} stacked 24 | 13 rows sharing a g_idx perm`, st, wOrig, sb, run, s + 23 + j);
          }
        } finally {
          st.destroy();
        }
      }
    },
  },
  {
    name: 'group types on the subgroup-matrix GEMM where the adapter has it (weights rounded to f16 on the way in: the f16 row): prefill and decode tiles, and a g_idx perm with silu_mul',
    async run(ctx) {
      const { engine } = ctx;
      if (mmaWhy(ctx, 'group types on the subgroup-matrix GEMM')) return;
      // Every type runs before the case fails, so one pass says which ones are wrong.
      const failed: string[] = [];
      for (const type of spreadOverSoftware(ctx, SAMPLE, 'group types on the matrices')) {
        const i = SAMPLE.indexOf(type);
        try {
          await checkGroup(engine, type, 70, 900 + 10 * i, 'gemm-mma');
          await checkGroup(engine, type, 16, 901 + 10 * i, 'gemm-mma', true);
          const perm = gptqPerm(256, QUANT_FORMATS[type].blockElems, 902 + 10 * i);
          const b = permWeight(engine, type, 37, 256, perm, 903 + 10 * i);
          try {
            await checkPermRun(engine, `${type} g_idx`, b.w, b.wOrig, undefined, { M: 70, kernel: 'gemm-mma', act: true, accumulate: true }, 904 + 10 * i);
            await checkPermRun(engine, `${type} g_idx`, b.w, b.wOrig, undefined, { M: 16, kernel: 'gemm-mma', decodeTiles: true, norm: true }, 905 + 10 * i);
          } finally {
            b.w.destroy();
          }
        } catch (e) {
          failed.push((e as Error).message);
        }
      }
      assert(failed.length === 0, failed.join('\n'));
    },
  },
  {
    name: 'group types in parts (weights split over buffers of whole rows) on the GEMV and the FMA GEMM',
    async run(ctx) {
      const N = 37, K = 256;
      for (const type of spreadOverSoftware(ctx, SAMPLE, 'group types in parts')) {
        const i = SAMPLE.indexOf(type);
        for (const [M, kernel] of [[5, 'gemv'], [70, 'gemm']] as const) {
          const bytes = reference.randomQuantRows(type, N, K, 1000 + 10 * i + M);
          const wv = reference.dequantizeRows(type, bytes, N, K);
          const bias = randn(N, 1001 + 10 * i + M);
          const w = ops.createQuantLinear(ctx.engine, { data: bytes, N, K, type, bias, maxPartBytes: partBytes(type, 10, K) });
          try {
            assert(w.parts.length === 4 && w.perm === null, `${type}: expected 4 parts and no perm, got ${w.parts.length} parts`);
            const xv = randn(M * K, 1002 + 10 * i + M);
            const plan = ops.planLinear(ctx.engine, { M, N, K, dtype: type, kernel });
            const got = await ops.linear(ctx.engine, ctx.engine.tensor(xv, [M, K]), w, { plan }).toFloat32();
            assertWithinPlain(`linear ${type} M${M} ${kernel} in ${w.parts.length} parts`, got, reference.linearRef(xv, wv, M, N, K, { bias }),
              () => reference.linearRef(xv, wv, M, N, K, { bias, precision: 'f32' }));
          } finally {
            w.destroy();
          }
        }
      }
    },
  },
  {
    name: 'group types as MoE experts (createQuantExperts; the GEMV, the FMA GEMM, the matrices where the adapter has them; experts over several buffers) and as an embedding table (one and several parts)',
    async run(ctx) {
      const { engine } = ctx;
      const why = ops.linearMmaUnavailable(engine, 'f16');
      // One family a model (MLX, AWQ/GPTQ and FP8 checkpoints quantize every expert alike); H = I so one
      // pipeline a kernel serves gate|up and down.
      const pairs = (['A4G64_BF16', 'Z4G128_F16', 'F8G128_F32', 'A8G32_F16', 'Z8G64_BF16'] as const).map((t) => ({ gateUp: t, down: t, H: 128, I: 128 }));
      // A software adapter compiles ~20 s a pipeline here: it runs one product kernel a pair (the GEMV for
      // the even ones, the FMA GEMM for the odd ones), a GPU both.
      const soft = engine.adapter.software;
      for (const t of spreadOverSoftware(ctx, pairs, 'group-type experts', (p) => p.gateUp)) {
        const i = pairs.indexOf(t);
        const gemv = !soft || i % 2 === 0, gemm = !soft || i % 2 === 1;
        if (gemv) await checkGroupMoe(engine, t, 3, 'gemv', 1100 + 10 * i);
        if (gemm) await checkGroupMoe(engine, t, 40, 'gemm', 1101 + 10 * i, { accumulate: true });
        // Two experts a buffer: three parts, each with its own scale plane.
        await checkGroupMoe(engine, t, gemv ? 5 : 33, gemv ? 'gemv' : 'gemm', 1102 + 10 * i, { maxPartBytes: 2 * partBytes(t.gateUp, 2 * t.I, t.H), parts: 3 });
        if (!why) await checkGroupMoe(engine, t, 40, 'gemm-mma', 1103 + 10 * i);
      }
      if (soft) ctx.note('group-type experts: a software adapter runs the GEMV for the even pairs, the FMA GEMM for the odd ones (the GPU pass both)');
      if (why) ctx.note(`group-type experts on the subgroup-matrix GEMM: not run here: ${why}; it runs in the GPU test pass`);
      const tables = ['Z4G128_F16', 'A4G64_BF16', 'F8G64_BF16', 'A3G32_F16', 'Z8G32_BF16'] as const;
      for (const type of spreadOverSoftware(ctx, tables, 'group-type embedding')) {
        const i = tables.indexOf(type);
        for (const maxPartBytes of [undefined, partBytes(type, 17, 256)]) await checkQuantEmbedding(engine, type, 1200 + i, maxPartBytes);
      }
    },
  },
  {
    name: 'bad input permutations are refused with named errors (wrong length, not a permutation, not an Int32Array, stacks mixing perms or perm and none)',
    async run({ engine }) {
      const type = 'Z4G128_F16', N = 4, K = 256;
      const bytes = reference.randomQuantRows(type, N, K, 1300);
      const make = (perm: unknown) => ops.createQuantLinear(engine, { data: bytes, N, K, type, perm: perm as Int32Array });
      await expectThrows(() => make(randomPerm(K - 1, 1301)), 'createQuantLinear', 'perm', `K=${K}`);
      await expectThrows(() => make(Float32Array.from(randomPerm(K, 1302))), 'createQuantLinear', 'perm', 'Int32Array');
      const twice = randomPerm(K, 1303);
      twice[7] = twice[100];
      await expectThrows(() => make(twice), 'createQuantLinear', 'perm', 'permutation', 'twice');
      const outside = randomPerm(K, 1304);
      outside[3] = K;
      await expectThrows(() => make(outside), 'createQuantLinear', 'perm', 'permutation', `perm[3] = ${K}`);
      outside[3] = -1;
      await expectThrows(() => make(outside), 'createQuantLinear', 'perm', 'permutation');
      const p = gptqPerm(K, 128, 1305);
      const a = make(p), b = make(Int32Array.from(p)), c = make(gptqPerm(K, 128, 1306)), d = make(undefined);
      try {
        assert(d.perm === null && a.perm !== null, 'perm: a weight made without one has perm null');
        await expectThrows(() => ops.stackLinears(engine, [a, c]), 'stackLinears', 'ws[1].perm', 'same input permutation');
        await expectThrows(() => ops.stackLinears(engine, [a, d]), 'stackLinears', 'ws[1].perm');
        await expectThrows(() => ops.stackLinears(engine, [d, a]), 'stackLinears', 'ws[1].perm', 'none');
        const st = ops.stackLinears(engine, [a, b]);
        assert(st.perm !== null && st.N === 2 * N, 'stackLinears: parts sharing a perm keep it');
        st.destroy();   // frees a's and b's parts and perms
      } finally {
        c.destroy();
        d.destroy();
      }
    },
  },
]);
