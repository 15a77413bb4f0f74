// Quantized weights (SPEC §8) in the linear layers and the embedding: every ggml type the engine
// computes with, random valid blocks (src/reference/quant_random.ts), against the float64 reference on
// the dequantized weights (src/reference/quant.ts): the GEMV at M 1..64, the FMA GEMM, the
// subgroup-matrix GEMM where the adapter has it (weights rounded to f16 there: SPEC §6's f16 row),
// rows that are not multiples of any tile, weights split over buffers, fused projections of several
// types, the RMSNorm folded into the GEMV, the embedding gather, and bad arguments.
import { ops, reference, roundToDType, QUANT_DOT_TYPES, QUANT_TYPES, QUANT_FORMATS, type Engine, type QuantType } from '../../src/index';
import { assert, assertClose, assertWithinPlain, defineCases, expectThrows, randn, spreadOverSoftware, type CaseContext } from './harness';

/** The shapes a type is checked at: K two or more blocks, N odd. */
const shapeFor = (t: QuantType) => (QUANT_FORMATS[t].blockElems === 256 ? { N: 37, K: 512 } : { N: 37, K: 96 });

/** maxPartBytes that gives each buffer `rows` whole rows of K values of `type` (with room for the pool's rounding). */
export const partBytes = (type: QuantType, rows: number, K: number) => rows * Math.ceil((K / QUANT_FORMATS[type].blockElems) * QUANT_FORMATS[type].blockBytes / 4) * 4 + 64;

/** A quantized GEMV/GEMM against the float64 reference of its dequantized weights (quant_group.cases.ts too). */
export async function checkQuant(engine: Engine, type: QuantType, M: number, seed: number,
                          o: { plan?: Partial<ops.PlanLinearOptions>; bias?: boolean; maxPartBytes?: number; N?: number; K?: number; tol?: 'f32' | 'f16' } = {}): Promise<void> {
  const s = shapeFor(type);
  const N = o.N ?? s.N, K = o.K ?? s.K;
  const bytes = reference.randomQuantRows(type, N, K, seed);
  const wv = reference.dequantizeRows(type, bytes, N, K);
  const xv = randn(M * K, seed + 1);
  const bias = o.bias ? randn(N, seed + 2) : undefined;
  const w = ops.createQuantLinear(engine, { data: bytes, N, K, type, bias, maxPartBytes: o.maxPartBytes });
  try {
    const plan = o.plan ? ops.planLinear(engine, { M, N, K, dtype: type, ...o.plan }) : undefined;
    const got = await ops.linear(engine, engine.tensor(xv, [M, K]), w, { plan }).toFloat32();
    const ref = reference.linearRef(xv, wv, M, N, K, { bias });
    const label = `linear ${type} M${M} N${N} K${K} ${plan?.kernel ?? ops.planLinear(engine, { M, N, K, dtype: type }).kernel}${o.maxPartBytes ? ` in ${w.parts.length} parts` : ''}`;
    // Formats with a min (Q4_K ...) give rows of a common offset: sums that cancel far below their terms.
    // The matrices take the weights rounded to f16: the reference takes them so too.
    if (o.tol === 'f16') assertClose(label, got, reference.linearRef(xv, roundToDType(Float32Array.from(wv), 'f16'), M, N, K, { bias }), 'f16');
    else assertWithinPlain(label, got, ref, () => reference.linearRef(xv, wv, M, N, K, { bias, precision: 'f32' }));
  } finally {
    w.destroy();
  }
}

/**
 * The quantized GEMV on 8-bit activations (quantPath 'idot') against the float64 reference of the
 * dequantized weights over x quantized as SPEC §8 lets it be (reference.quantizeActivationsQ8): within
 * the f32 row, or twice a plain f32 sum's error + 1e-5 (as assertWithinPlain), plus the most a rounding
 * tie of a quant may move an output (its slack times |w|, summed over the row).
 */
export async function checkQuantIdot(engine: Engine, type: QuantType, M: number, seed: number,
                                     o: { plan?: Partial<ops.PlanLinearOptions>; bias?: boolean; N?: number; K?: number; norm?: boolean; act?: boolean } = {}): Promise<void> {
  const s = shapeFor(type);
  const N = o.N ?? s.N, K = o.K ?? s.K;
  const bytes = reference.randomQuantRows(type, N, K, seed);
  const wv = reference.dequantizeRows(type, bytes, N, K);
  const width = o.act ? 2 * K : K;
  const xv = randn(M * width, seed + 1);
  const bias = o.bias ? randn(N, seed + 2) : undefined;
  const nw = o.norm ? randn(K, seed + 3) : undefined;
  const eps = 1e-5;
  const w = ops.createQuantLinear(engine, { data: bytes, N, K, type, bias });
  try {
    const plan = ops.planLinear(engine, { M, N, K, dtype: type, kernel: 'gemv', quantPath: 'idot', ...o.plan });
    assert(plan.kernel === 'gemv' && plan.quantPath === 'idot', `planLinear kept ${type}'s idot path: ${JSON.stringify(plan)}`);
    const got = await ops.linear(engine, engine.tensor(xv, [M, width]), w, {
      plan, act: o.act ? 'silu_mul' : undefined, norm: nw && { weight: engine.tensor(nw, [K]), eps },
    }).toFloat32();
    // What the kernel quantizes: x after the prologue (the folded RMSNorm, or SiLU(gate)·up).
    const xIn = new Float64Array(M * K);
    if (nw) xIn.set(reference.rmsNormRef(xv, nw, eps, { rows: M, n: K }));
    else for (let m = 0; m < M; m++) for (let k = 0; k < K; k++) xIn[m * K + k] = o.act ? reference.siluRef(xv[m * width + k]) * xv[m * width + K + k] : xv[m * K + k];
    const q = reference.quantizeActivationsQ8(xIn, K);
    const ref = reference.linearRef(q.values, wv, M, N, K, { bias });
    const plain = reference.linearRef(q.values, wv, M, N, K, { bias, precision: 'f32' });
    const unquantized = reference.linearRef(xIn, wv, M, N, K, { bias });
    // Each unit's step d = amax/127: a value's rounding moves it at most d/2.
    const step = new Float64Array(M * K);
    for (let b = 0; b < M * K; b += 32) {
      let amax = 0;
      for (let k = b; k < b + 32; k++) amax = Math.max(amax, Math.abs(xIn[k]));
      step.fill(amax / 127, b, b + 32);
    }
    let worst = 0, at = -1, offWorst = 0, offAt = -1;
    for (let m = 0; m < M; m++) {
      for (let n = 0; n < N; n++) {
        const i = m * N + n;
        let slack = 0, half = 0;
        for (let k = 0; k < K; k++) {
          slack += q.slack[m * K + k] * Math.abs(wv[n * K + k]);
          half += step[m * K + k] / 2 * Math.abs(wv[n * K + k]);
        }
        const allowed = Math.max(5e-6 + 5e-5 * Math.abs(ref[i]), 2 * Math.abs(plain[i] - ref[i]) + 1e-5) + slack;
        const err = Math.abs(got[i] - ref[i]) / allowed;
        if (!(err <= worst)) { worst = Number.isNaN(err) ? Infinity : err; at = i; }
        // The quantization itself: against the unquantized x, no output moves past Σ|w|·d/2.
        const off = Math.abs(got[i] - unquantized[i]) / (half + allowed);
        if (!(off <= offWorst)) { offWorst = Number.isNaN(off) ? Infinity : off; offAt = i; }
      }
    }
    const label = `linear ${type} on 8-bit x M${M} N${N} K${K}${nw ? ' norm' : ''}${o.act ? ' silu_mul' : ''} (MT ${plan.MT} KT ${plan.KT} R ${plan.R} CU ${plan.CU})`;
    assert(worst <= 1, `${label}: element ${at} = ${got[at]}, expected ${ref[at]} (${worst.toFixed(2)}× what the f32 row and rounding ties allow)`);
    assert(offWorst <= 1, `${label}: element ${offAt} = ${got[offAt]} is ${offWorst.toFixed(2)}× the rounding bound Σ|w|·d/2 from the unquantized x's ${unquantized[offAt]}`);
  } finally {
    w.destroy();
  }
}

/**
 * The embedding gather from a quantized table of 50 rows of 256 random values of `type` (split over
 * buffers when maxPartBytes is given): gathered rows equal the dequantized table's, ids out of range give
 * zero rows on the GPU (quant_group.cases.ts too).
 */
export async function checkQuantEmbedding(engine: Engine, type: QuantType, seed: number, maxPartBytes?: number): Promise<void> {
  const V = 50, H = 256;
  const bytes = reference.randomQuantRows(type, V, H, seed);
  const table = reference.dequantizeRows(type, bytes, V, H);
  const w = ops.createQuantLinear(engine, { data: bytes, N: V, K: H, type, maxPartBytes });
  try {
    const ids = [0, 49, 17, 3, 17, 33, 34];
    const got = await ops.embedding(engine, Int32Array.from(ids), w).toFloat32();
    assertClose(`embedding ${type} (${w.parts.length} parts)`, got, reference.embeddingRef(ids, table, V, H), 'f32');
    const oob = await ops.embedding(engine, engine.tensor(Int32Array.from([60, -1, 2]), [3], 'i32'), w).toFloat32();
    assert(oob.subarray(0, 2 * H).every((v) => v === 0), `embedding ${type}: ids out of range gave non-zero rows`);
    assertClose(`embedding ${type} row 2`, oob.subarray(2 * H), table.subarray(2 * H, 3 * H), 'f32');
  } finally {
    w.destroy();
  }
}

function mmaWhy(ctx: CaseContext): string | null {
  const why = ops.linearMmaUnavailable(ctx.engine, 'Q4_K');
  if (why) ctx.note(`quantized subgroup-matrix GEMM: not run here: ${why}; it runs in the GPU test pass on the GPU machine`);
  return why;
}

export const quantCases = defineCases('quant', [
  {
    name: 'every quantized type on the GEMV (M 1, 5 and 64, bias), dequantized exactly as ggml does: within the f32 row of the float64 reference',
    async run(ctx) {
      for (const type of spreadOverSoftware(ctx, QUANT_TYPES, 'quantized GEMV')) {
        const i = QUANT_TYPES.indexOf(type);
        for (const [j, M] of [1, 5, 64].entries()) await checkQuant(ctx.engine, type, M, 100 + 10 * i + j, { plan: { kernel: 'gemv' }, bias: j === 1 });
      }
    },
  },
  {
    name: "the quantized GEMV's two paths for the types that have both (dot: quants meet x unconverted; decode: each value to f32 first), rows per group 1, 2 and 4, K of one and of odd many units a lane",
    async run(ctx) {
      // The dot path is the planner's default for these types (the case above runs it); here the decode
      // path beside it, and both at lanes-per-row KT that leave a lane several units, or part of one row.
      for (const type of spreadOverSoftware(ctx, QUANT_DOT_TYPES, 'quantized GEMV paths')) {
        const i = QUANT_DOT_TYPES.indexOf(type);
        const K = QUANT_FORMATS[type].blockElems === 256 ? 768 : 224;
        for (const [j, quantPath] of (['dot', 'decode'] as const).entries()) {
          const plan = ops.planLinear(ctx.engine, { M: 3, N: 29, K, dtype: type, kernel: 'gemv', quantPath, R: ([1, 2, 4] as const)[(i + j) % 3], KT: 4 });
          assert(plan.kernel === 'gemv' && plan.quantPath === quantPath, `planLinear kept ${type}'s ${quantPath} path: ${JSON.stringify(plan)}`);
          await checkQuant(ctx.engine, type, 3, 820 + 10 * i + j, { plan: { kernel: 'gemv', quantPath, R: plan.R, KT: 4 }, N: 29, K, bias: j === 0 });
          await checkQuant(ctx.engine, type, 1, 840 + 10 * i + j, { plan: { kernel: 'gemv', quantPath }, N: 29, K });
        }
        // The dot path stages x in chunks of CU units a row (128 at one row, fewer at four): K of 136
        // units runs a whole chunk and part of one, at M 1 and at M 3 with a bias.
        await checkQuant(ctx.engine, type, 1, 860 + i, { plan: { kernel: 'gemv' }, N: 7, K: 4352 });
        await checkQuant(ctx.engine, type, 3, 870 + i, { plan: { kernel: 'gemv', KT: 8 }, N: 5, K: 4352, bias: true });
      }
      const e = ctx.engine;
      assert(ops.planLinear(e, { M: 1, N: 8, K: 256, dtype: 'Q5_K', kernel: 'gemv' }).kernel === 'gemv', 'Q5_K plans a GEMV');
      const q5 = ops.planLinear(e, { M: 1, N: 8, K: 256, dtype: 'Q5_K', kernel: 'gemv' });
      assert(q5.kernel === 'gemv' && q5.quantPath === 'decode', `Q5_K takes the decode path (it has no dot path): ${JSON.stringify(q5)}`);
      await expectThrows(() => ops.planLinear(e, { M: 1, N: 8, K: 256, dtype: 'Q5_K', quantPath: 'dot' }), 'planLinear', 'quantPath', "'decode'", 'Q5_K has no dot path');
      await expectThrows(() => ops.planLinear(e, { M: 1, N: 8, K: 256, dtype: 'bf16', quantPath: 'decode' }), 'planLinear', 'quantPath', 'bf16');
      await expectThrows(() => ops.planLinear(e, { M: 1, N: 8, K: 256, dtype: 'Q4_K', quantPath: 'fast' as never }), 'planLinear', 'quantPath', "'dot'", "or 'decode'", "'fast'");
    },
  },
  {
    name: "the quantized GEMV's rows do not depend on the rows beside them while a step verifies (Runtime.exactProducts): 2, 4, 5 and 8 rows together, each unit meeting the x rows at once and one at a time (rowsEach), equal each row alone bit for bit",
    async run(ctx) {
      // Speculative decoding keeps a seeded request's tokens only if a verification row's logits are
      // exactly those of the plain step that would have computed that position.
      const e = ctx.engine as Engine & { exactProducts: boolean };
      for (const type of spreadOverSoftware(ctx, QUANT_DOT_TYPES, 'quantized GEMV rows')) {
        const i = QUANT_DOT_TYPES.indexOf(type);
        const N = 29, K = QUANT_FORMATS[type].blockElems === 256 ? 768 : 224, M = 8;
        const w = ops.createQuantLinear(e, { data: reference.randomQuantRows(type, N, K, 980 + i), N, K, type });
        const xv = randn(M * K, 990 + i);
        e.exactProducts = true;
        try {
          const alone: Float32Array[] = [];
          for (let m = 0; m < M; m++) alone.push(await ops.linear(e, e.tensor(xv.slice(m * K, (m + 1) * K), [1, K]), w).toFloat32());
          for (const rows of [2, 4, 5, 8]) {
            for (const rowsEach of [false, true]) {
              const plan = ops.planLinear(e, { M: rows, N, K, dtype: type, rowsEach });
              assert(plan.kernel === 'gemv' && plan.quantPath === 'dot' && !!plan.rowsEach === rowsEach, `${type}: ${rows} rows plan the dot path's GEMV, rowsEach ${rowsEach}: ${JSON.stringify(plan)}`);
              const got = await ops.linear(e, e.tensor(xv.slice(0, rows * K), [rows, K]), w, { plan }).toFloat32();
              for (let m = 0; m < rows; m++) {
                for (let n = 0; n < N; n++) {
                  const a = got[m * N + n], b = alone[m][n];
                  assert(Object.is(a, b), `${type}, ${rows} rows (MT ${plan.MT}, rowsEach ${rowsEach}): row ${m} output ${n} is ${a}, alone ${b}`);
                }
              }
            }
          }
        } finally {
          e.exactProducts = false;
          w.destroy();
        }
      }
    },
  },
  {
    name: "the quantized GEMV on 8-bit activations with integer dot products (quantPath 'idot': Q8_0, Q4_0, Q4_K, Q6_K), rows 1-5, rows per group 1, 2 and 4, K of one and of odd many units a lane, a staged chunk and part of one",
    async run(ctx) {
      const e = ctx.engine;
      if (!e.features.intDot4) {
        ctx.note("quantized GEMV on 8-bit activations: not run here: this WGSL has no packed_4x8_integer_dot_product (planLinear refuses 'idot', checked)");
        await expectThrows(() => ops.planLinear(e, { M: 1, N: 8, K: 256, dtype: 'Q4_K', quantPath: 'idot' }), 'planLinear', 'quantPath', 'packed_4x8_integer_dot_product');
        return;
      }
      for (const type of spreadOverSoftware(ctx, QUANT_DOT_TYPES, 'quantized GEMV on 8-bit activations')) {
        const i = QUANT_DOT_TYPES.indexOf(type);
        const K = QUANT_FORMATS[type].blockElems === 256 ? 768 : 224;
        await checkQuantIdot(e, type, 1, 900 + 10 * i, { N: 29, K });
        await checkQuantIdot(e, type, 3, 901 + 10 * i, { plan: { R: ([1, 2, 4] as const)[i % 3], KT: 4 }, N: 29, K, bias: true });
        await checkQuantIdot(e, type, 5, 902 + 10 * i, { plan: { R: ([1, 2, 4] as const)[(i + 1) % 3] }, N: 11, K });
        // K of 136 units: a whole staged chunk (CU 128 at one row) and part of one.
        await checkQuantIdot(e, type, 1, 903 + 10 * i, { N: 7, K: 4352 });
      }
      // The folded RMSNorm and SiLU·mul are applied as x is staged, before it is quantized.
      await checkQuantIdot(e, 'Q4_K', 2, 950, { N: 13, K: 512, norm: true });
      await checkQuantIdot(e, 'Q8_0', 3, 951, { N: 13, K: 96, act: true, bias: true });
      await expectThrows(() => ops.planLinear(e, { M: 1, N: 8, K: 256, dtype: 'Q5_K', quantPath: 'idot' }), 'planLinear', 'quantPath', "'decode'");
      await expectThrows(() => ops.planLinear(e, { M: 1, N: 8, K: 256, dtype: 'bf16', quantPath: 'idot' }), 'planLinear', 'quantPath', 'bf16');
      const p = ops.planLinear(e, { M: 1, N: 8, K: 256, dtype: 'Q4_K', quantPath: 'idot' });
      assert(p.kernel === 'gemv' && p.quantPath === 'idot', `planLinear takes quantPath 'idot' at M 1: ${JSON.stringify(p)}`);
    },
  },
  {
    name: 'every quantized type on the FMA GEMM (M 70, a tile and a remainder), and weights split over buffers (parts of whole rows)',
    async run(ctx) {
      const { engine } = ctx;
      for (const type of spreadOverSoftware(ctx, QUANT_TYPES, 'quantized FMA GEMM')) await checkQuant(engine, type, 70, 300 + QUANT_TYPES.indexOf(type), { plan: { kernel: 'gemm' } });
      for (const [i, type] of spreadOverSoftware(ctx, ['Q4_0', 'Q6_K', 'MXFP4'] as const, 'quantized weights in parts').entries()) {
        const { K } = shapeFor(type);
        await checkQuant(engine, type, 3, 350 + i, { maxPartBytes: partBytes(type, 11, K), plan: { kernel: 'gemv' } });
        await checkQuant(engine, type, 70, 360 + i, { maxPartBytes: partBytes(type, 11, K), plan: { kernel: 'gemm' } });
      }
    },
  },
  {
    name: 'every quantized type on the subgroup-matrix GEMM where the adapter has it (weights rounded to f16 on the way in: the f16 row), prefill and decode tiles',
    async run(ctx) {
      const { engine } = ctx;
      const why = mmaWhy(ctx);
      // Every type runs before the case fails, so one pass says which ones are wrong.
      const failed: string[] = [];
      for (const type of spreadOverSoftware(ctx, QUANT_TYPES, 'quantized matrix GEMM (the FMA GEMM here)')) {
        const i = QUANT_TYPES.indexOf(type);
        const runs: [number, Partial<ops.PlanLinearOptions> | undefined, 'f32' | 'f16' | undefined][] = why
          ? [[70, undefined, undefined]] : [[70, { kernel: 'gemm-mma' }, 'f16'], [16, { kernel: 'gemm-mma', decodeTiles: true }, 'f16']];
        for (const [M, plan, tol] of runs) {
          try {
            await checkQuant(engine, type, M, 400 + 20 * i + M, { plan, tol });
          } catch (e) {
            failed.push((e as Error).message);
          }
        }
      }
      assert(failed.length === 0, failed.join('\n'));
    },
  },
  {
    name: 'a fused projection of several types (Q4_K | Q6_K | Q8_0 rows, as GGUF mixes have them) and the RMSNorm folded into the quantized GEMV',
    async run({ engine }) {
      const K = 256;
      const types = ['Q4_K', 'Q6_K', 'Q8_0'] as const;
      const rows = [24, 8, 5];
      const bytes = types.map((t, i) => reference.randomQuantRows(t, rows[i], K, 500 + i));
      const parts = types.map((t, i) => ops.createQuantLinear(engine, { data: bytes[i], N: rows[i], K, type: t }));
      const bias = randn(37, 510);
      const w = ops.stackLinears(engine, parts, bias);
      const wv = new Float64Array(37 * K);
      let at = 0;
      types.forEach((t, i) => { wv.set(reference.dequantizeRows(t, bytes[i], rows[i], K), at); at += rows[i] * K; });
      const mma = !ops.linearMmaUnavailable(engine, 'Q4_K');
      const runs: [number, 'auto' | 'gemv' | 'gemm' | 'gemm-mma'][] = [[1, 'gemv'], [9, 'gemv'], [70, 'gemm'], [9, 'auto'], [70, 'auto']];
      if (mma) runs.push([70, 'gemm-mma']);
      for (const [M, kernel] of runs) {
        const xv = randn(M * K, 520 + M);
        const plan = ops.planLinear(engine, { M, N: 37, K, dtype: 'Q4_K', kernel });
        const got = await ops.linear(engine, engine.tensor(xv, [M, K]), w, { plan }).toFloat32();
        const label = `stacked Q4_K|Q6_K|Q8_0 M${M} ${plan.kernel}`;
        if (plan.kernel === 'gemm-mma') assertClose(label, got, reference.linearRef(xv, roundToDType(Float32Array.from(wv), 'f16'), M, 37, K, { bias }), 'f16');
        else assertWithinPlain(label, got, reference.linearRef(xv, wv, M, 37, K, { bias }), () => reference.linearRef(xv, wv, M, 37, K, { bias, precision: 'f32' }));
      }
      // RMSNorm folded into the GEMV (decode): x / rms(x) · g, then the product.
      const M = 3;
      const xv = randn(M * K, 530);
      const g = randn(K, 531);
      const normed = reference.rmsNormRef(xv, g, 1e-5, { rows: M, n: K });
      const got = await ops.linear(engine, engine.tensor(xv, [M, K]), w, { norm: { weight: engine.tensor(g, [K]), eps: 1e-5 } }).toFloat32();
      assertWithinPlain('stacked, RMSNorm folded', got, reference.linearRef(normed, wv, M, 37, K, { bias }),
        () => reference.linearRef(normed, wv, M, 37, K, { bias, precision: 'f32' }));
      w.destroy();
    },
  },
  {
    name: 'the embedding gather from a quantized table (one and several parts; ids out of range give zeros on the GPU)',
    async run(ctx) {
      const { engine } = ctx;
      const all = ['Q8_0', 'Q4_K', 'Q6_K', 'IQ4_XS', 'MXFP4'] as const;
      for (const type of spreadOverSoftware(ctx, all, 'quantized embedding')) {
        const i = all.indexOf(type);
        await checkQuantEmbedding(engine, type, 600 + i, i % 2 ? partBytes(type, 17, 256) : undefined);
      }
    },
  },
  {
    name: 'bad quantized weights are refused with named errors (type, K not whole blocks, byte count, stacking float with quantized)',
    async run({ engine }) {
      const bytes = reference.randomQuantRows('Q4_0', 4, 64, 700);
      await expectThrows(() => ops.createQuantLinear(engine, { data: bytes, N: 4, K: 64, type: 'Q3_0' as never }), 'createQuantLinear', 'type');
      await expectThrows(() => ops.createQuantLinear(engine, { data: bytes, N: 4, K: 48, type: 'Q4_0' }), 'createQuantLinear', 'K', 'multiple of 32');
      await expectThrows(() => ops.createQuantLinear(engine, { data: bytes.subarray(1), N: 4, K: 64, type: 'Q4_0' }), 'createQuantLinear', 'data', '144 bytes');
      const q = ops.createQuantLinear(engine, { data: bytes, N: 4, K: 64, type: 'Q4_0' });
      const f = ops.createLinear(engine, { data: randn(4 * 64, 701), N: 4, K: 64, dtype: 'bf16' });
      await expectThrows(() => ops.stackLinears(engine, [q, f]), 'stackLinears', 'ws[1].dtype');
      q.destroy();
      f.destroy();
    },
  },
]);
