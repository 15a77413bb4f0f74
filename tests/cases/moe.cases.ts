// Mixture-of-experts against the float64 reference: routing of every DeepSeek variant (V2 softmax greedy
// and group-limited, V3 sigmoid with the correction bias and group ranking, normalization on and off,
// the scaling factor, transformers 5's -inf mask), and the routed experts (ops.moe) with f32/f16/bf16
// weights over rows 1, 3, 9 (and 70: more pairs than a tile), E 4, 8, 16, topK 1, 2, 6, on both product
// kernels, accumulating into the residual stream, rows past `rows` untouched, experts split over
// several buffers, experts nobody chose, every token on one expert, invalid ids, workspace chunks,
// GPU-made experts, route → moe without the host, no buffers created in the steady state, gpt-oss's
// routing (softmax over the chosen) and experts (swiglu_oai, expert biases; float and MXFP4), and every
// validation error. Weights the reference sees are the rounded ones the GPU holds; the kernels compute
// in f32, so f32 tolerances apply to every weight dtype.
import { ops, reference, roundToDType, QUANT_DOT_TYPES, QUANT_FORMATS, type Engine, type QuantType, type Tensor } from '../../src/index';
import { assert, assertClose, assertWithinPlain, defineCases, equalArrays, expectThrows, randn, rng, spreadOverSoftware } from './harness';

type WDType = 'f32' | 'f16' | 'bf16';
type Routing = reference.MoeRouting;

const SENTINEL = 777.25;

const v2 = (over: Partial<Routing> = {}): Routing => ({
  family: 'deepseek_v2', scoring: 'softmax', method: 'greedy', topK: 2, nGroup: null, topkGroup: null,
  normTopkProb: false, routedScalingFactor: 1, ...over,
});
const v3 = (over: Partial<Routing> = {}): Routing => ({
  family: 'deepseek_v3', scoring: 'sigmoid', method: 'noaux_tc', topK: 4, nGroup: 4, topkGroup: 2,
  normTopkProb: true, routedScalingFactor: 2.5, ...over,
});

/** Each token's (id, weight) pairs sorted by id. */
function byId(ids: ArrayLike<number>, w: ArrayLike<number>, t: number, K: number): { ids: number[]; w: number[] } {
  const j = Array.from({ length: K }, (_, i) => i).sort((a, b) => ids[t * K + a] - ids[t * K + b]);
  return { ids: j.map((i) => ids[t * K + i]), w: j.map((i) => w[t * K + i]) };
}

/**
 * Routes random logits on the GPU and compares with routeRef: the same set of ids per token, each id
 * with its weight within the f32 tolerance; the rows of given ids/weights tensors past `rows` keep
 * their sentinel. Returns the reference's choice.
 */
async function checkRoute(engine: Engine, what: string, o: { rows: number; E: number; r: Routing; seed: number; std?: number;
                                                            bias?: Float32Array; extraRows?: number }) {
  const { rows, E, r, seed } = o;
  const K = r.topK;
  const total = rows + (o.extraRows ?? 0);
  const lv = randn(total * E, seed, o.std ?? 1.5);
  const logits = engine.tensor(lv, [total, E]);
  const bias = o.bias ? engine.tensor(o.bias, [E]) : undefined;
  let idsT: Tensor | undefined, wT: Tensor | undefined;
  if (o.extraRows) {
    idsT = engine.tensor(new Int32Array(total * K).fill(-7), [total, K], 'i32');
    wT = engine.tensor(new Float32Array(total * K).fill(SENTINEL), [total, K]);
  }
  const got = ops.route(engine, logits, r, { rows, bias, ids: idsT, weights: wT });
  const gi = await got.ids.toArray() as Int32Array;
  const gw = await got.weights.toFloat32();
  const ref = reference.routeRef(lv, rows, E, r, o.bias);
  for (let t = 0; t < rows; t++) {
    const a = byId(gi, gw, t, K), b = byId(ref.ids, ref.weights, t, K);
    equalArrays(`${what}: token ${t} ids`, a.ids, b.ids);
    assertClose(`${what}: token ${t} weights`, a.w, b.w, 'f32');
    assert(new Set(a.ids).size === K, `${what}: token ${t}: ids not distinct: ${a.ids}`);
  }
  if (o.extraRows) {
    equalArrays(`${what}: ids past rows`, gi.subarray(rows * K), new Int32Array(o.extraRows * K).fill(-7));
    equalArrays(`${what}: weights past rows`, gw.subarray(rows * K), new Float32Array(o.extraRows * K).fill(SENTINEL));
  }
  return { ref, lv };
}

/** topK distinct experts per token from a seeded shuffle. */
function randomIds(rows: number, E: number, K: number, seed: number, avoid: number[] = []): Int32Array {
  const r = rng(seed);
  const out = new Int32Array(rows * K);
  for (let t = 0; t < rows; t++) {
    const pool = Array.from({ length: E }, (_, e) => e).filter((e) => !avoid.includes(e));
    for (let i = pool.length - 1; i > 0; i--) {
      const j = Math.floor(r() * (i + 1));
      [pool[i], pool[j]] = [pool[j], pool[i]];
    }
    out.set(pool.slice(0, K), t * K);
  }
  return out;
}

interface MoeProblem {
  rows: number; E: number; topK: number; H: number; I: number; dtype: WDType; seed: number;
  kernel?: 'gemv' | 'gemm' | 'gemm-mma'; accumulate?: boolean; extraRows?: number; maxPartBytes?: number; ids?: Int32Array;
  maxWorkspaceBytes?: number; parts?: number;
  /** gemm-mma: an entry of MOE_MMA_TILES. */
  tile?: number;
  /** gemv over quantized experts: the path (default planMoe's). */
  quantPath?: 'dot' | 'decode';
  /** Quantized experts (createQuantExperts): random valid blocks of these types; the reference takes
   *  their dequantized values (rounded to f16 on the subgroup-matrix GEMM, as the kernel takes them). */
  quant?: { gateUp: QuantType; down: QuantType };
  /** gpt-oss's experts: act 'swiglu_oai' with this alpha and limit, and random expert biases. */
  oai?: { alpha: number; limit: number };
}

/** Runs ops.moe once and checks it against moeRef; rows of out past `rows` must keep their sentinel. */
async function checkMoe(engine: Engine, p: MoeProblem): Promise<void> {
  const { rows, E, topK, H, I, dtype, seed } = p;
  const total = rows + (p.extraRows ?? 0);
  const xv = randn(total * H, seed);
  const q = p.quant;
  // Scales of a trained model's size (weights ~1/√K), so that the SiLU-gated products stay in f16's
  // range where the subgroup-matrix GEMM splits them into f16 halves.
  const scaleRange: [number, number] = [2e-4, 2e-3];
  const guBytes = q ? reference.randomQuantRows(q.gateUp, E * 2 * I, H, seed + 1, { scaleRange }) : null;
  const dnBytes = q ? reference.randomQuantRows(q.down, E * H, I, seed + 2, { scaleRange }) : null;
  const mmaRound = (v: Float64Array | Float32Array) => (p.kernel === 'gemm-mma' ? roundToDType(Float32Array.from(v), 'f16') : Float32Array.from(v));
  const gateUp = q ? mmaRound(reference.dequantizeRows(q.gateUp, guBytes!, E * 2 * I, H)) : roundToDType(randn(E * 2 * I * H, seed + 1, 1 / Math.sqrt(H)), dtype);
  const down = q ? mmaRound(reference.dequantizeRows(q.down, dnBytes!, E * H, I)) : roundToDType(randn(E * H * I, seed + 2, 1 / Math.sqrt(I)), dtype);
  const ids = p.ids ?? randomIds(total, E, topK, seed + 3);
  const r = rng(seed + 4);
  const wv = Float32Array.from({ length: total * topK }, () => 0.1 + r());
  const prior = p.accumulate ? randn(total * H, seed + 5) : new Float32Array(total * H).fill(SENTINEL);
  const biases = p.oai ? { gateUpBias: randn(E * 2 * I, seed + 6, 0.5), downBias: randn(E * H, seed + 7, 0.5) } : {};
  const experts = q
    ? ops.createQuantExperts(engine, { E, H, I, gateUpType: q.gateUp, gateUp: guBytes!, downType: q.down, down: dnBytes!, maxPartBytes: p.maxPartBytes, ...biases })
    : ops.createExperts(engine, { E, H, I, dtype, gateUp, down, maxPartBytes: p.maxPartBytes, ...biases });
  if (p.parts !== undefined) assert(experts.parts.length === p.parts, `expected ${p.parts} parts, got ${experts.parts.length}`);
  const out = engine.tensor(prior, [total, H]);
  const plan = p.kernel ? ops.planMoe(engine, { rows, topK, E, H, I, dtype: experts.dtype, downDtype: experts.downDtype, kernel: p.kernel, tile: p.tile, quantPath: p.quantPath }) : undefined;
  const routing = { ids: engine.tensor(ids, [total, topK], 'i32'), weights: engine.tensor(wv, [total, topK]) };
  const res = ops.moe(engine, engine.tensor(xv, [total, H]), routing, experts, {
    rows, out, accumulate: p.accumulate, plan, maxWorkspaceBytes: p.maxWorkspaceBytes, ...(p.oai ? { act: 'swiglu_oai', ...p.oai } as const : {}),
  });
  assert(res === out, 'moe returns out');
  const got = await out.toFloat32();
  const oai = p.oai ? { act: 'swiglu_oai', ...p.oai, ...biases } as const : {};
  const ref = reference.moeRef(xv, ids, wv, gateUp, down, { rows, E, H, I, topK, accumulateInto: p.accumulate ? prior : undefined, ...oai });
  const label = `moe ${q ? `${q.gateUp}|${q.down}` : dtype} rows ${rows} E ${E} topK ${topK} ${plan?.kernel ?? 'auto'}${plan?.kernel === 'gemv' ? ` ${plan.quantPath}` : ''}${p.accumulate ? ' accumulate' : ''}${p.oai ? ' swiglu_oai' : ''}`;
  if (q && p.kernel === 'gemm-mma') {
    // The matrices take the weights rounded to f16 (pack2x16float, whose rounding WGSL leaves to the
    // implementation): SPEC §6's f16 row, as the quantized linear layers on the matrices.
    assertClose(label, got.subarray(0, rows * H), ref, 'f16');
  } else if (q) {
    // Random blocks give sums far larger than their results (formats with a min above all): within
    // twice the error a plain f32 implementation makes, as the quantized linear layers are checked.
    assertWithinPlain(label, got.subarray(0, rows * H), ref, () => reference.moeRef(xv, ids, wv, gateUp, down,
      { rows, E, H, I, topK, accumulateInto: p.accumulate ? prior : undefined, precision: 'f32', ...oai }));
  } else {
    assertClose(label, got.subarray(0, rows * H), ref, 'f32');
  }
  if (p.extraRows) equalArrays(`${label}: rows past rows`, got.subarray(rows * H), prior.subarray(rows * H));
  experts.destroy();
}

const KERNELS = ['gemv', 'gemm'] as const;

/** Quantized experts: type pairs (gate|up, down) as GGUF files mix them, with shapes of whole blocks. */
const QUANT_EXPERTS: readonly { gateUp: QuantType; down: QuantType; H: number; I: number }[] = [
  { gateUp: 'Q4_K', down: 'Q6_K', H: 256, I: 256 },   // llama.cpp's Q4_K_M
  { gateUp: 'Q8_0', down: 'Q5_0', H: 64, I: 96 },     // Q4_K_M's fallback for rows that are not whole super-blocks
  { gateUp: 'Q4_0', down: 'Q8_0', H: 64, I: 96 },
  { gateUp: 'IQ4_NL', down: 'MXFP4', H: 64, I: 64 },
  { gateUp: 'Q5_K', down: 'Q4_1', H: 256, I: 64 },
];

export const moeCases = defineCases('moe', [
  {
    name: 'quantized experts (gate|up and down each of its own ggml type, blocks kept on the GPU): the GEMV and FMA GEMM within the f32 row of the float64 reference on the dequantized weights, the subgroup-matrix GEMM where the adapter has it (f16-rounded weights); experts over several buffers',
    async run(ctx) {
      const { engine } = ctx;
      const why = ops.linearMmaUnavailable(engine, 'f16');
      for (const [i, t] of spreadOverSoftware(ctx, QUANT_EXPERTS, 'quantized experts', (t) => `${t.gateUp}|${t.down}`).entries()) {
        const quant = { gateUp: t.gateUp, down: t.down };
        const base = { E: 6, topK: 2, H: t.H, I: t.I, dtype: 'f32' as const, quant };
        // The expert GEMV's two paths (planMoe takes the dot path at one row, the decode path above).
        await checkMoe(engine, { ...base, rows: 3, kernel: 'gemv', seed: 720 + 10 * i });
        await checkMoe(engine, { ...base, rows: 3, kernel: 'gemv', quantPath: 'dot', seed: 723 + 10 * i });
        await checkMoe(engine, { ...base, rows: 1, kernel: 'gemv', seed: 724 + 10 * i });
        const path = (rows: number) => { const pl = ops.planMoe(engine, { rows, topK: 2, E: 6, H: t.H, I: t.I, dtype: t.gateUp, downDtype: t.down, kernel: 'gemv' }); return pl.kernel === 'gemv' ? pl.quantPath : pl.kernel; };
        const one = [t.gateUp, t.down].some((x) => QUANT_DOT_TYPES.includes(x)) ? 'dot' : 'decode';
        assert(path(1) === one && path(3) === 'decode', `planMoe: the ${one} path at 1 row and the decode path at 3 (${t.gateUp}|${t.down}): ${path(1)}, ${path(3)}`);
        await checkMoe(engine, { ...base, rows: 40, kernel: 'gemm', accumulate: true, extraRows: 1, seed: 721 + 10 * i });
        if (!why) await checkMoe(engine, { ...base, rows: 40, kernel: 'gemm-mma', seed: 722 + 10 * i });
        if (i === 0) {
          // Two experts a buffer (gate|up, the larger, decides): three parts, each with its own scale plane.
          const rowBytes = (type: QuantType, K: number) => (K / QUANT_FORMATS[type].blockElems) * QUANT_FORMATS[type].blockBytes;
          const bytes = Math.max(2 * t.I * rowBytes(t.gateUp, t.H), t.H * rowBytes(t.down, t.I));
          await checkMoe(engine, { ...base, rows: 5, kernel: 'gemv', maxPartBytes: 2 * bytes, parts: 3, seed: 729 });
        }
      }
      if (why) ctx.note(`quantized experts on the subgroup-matrix GEMM: not run here: ${why}; it runs in the GPU test pass`);
    },
  },
  {
    name: 'moe on the subgroup-matrix GEMM (x split into hi + lo f16, f32 tolerance): bf16 and f16 experts, several tiles of one expert, accumulate, experts over 3 buffers, both tiles',
    async run(ctx) {
      const { engine } = ctx;
      const why = ops.linearMmaUnavailable(engine, 'bf16');
      if (why) ctx.note(`moe subgroup-matrix GEMM: not run here: ${why}; SwiftShader, lavapipe and wgpu offer no subgroup matrices, so it runs in the GPU test pass on the GPU machine (bench/results/gpu-tests-*.md); these checks ran on the FMA GEMM`);
      const kernel = why ? 'gemm' as const : 'gemm-mma' as const;
      await checkMoe(engine, { rows: 9, E: 16, topK: 6, H: 64, I: 40, dtype: 'bf16', kernel, seed: 700 });
      await checkMoe(engine, { rows: 70, E: 8, topK: 2, H: 64, I: 40, dtype: 'f16', kernel, ids: Int32Array.from({ length: 140 }, (_, i) => (i % 2 ? 6 : 3)), seed: 701 });
      await checkMoe(engine, { rows: 9, E: 16, topK: 6, H: 64, I: 40, dtype: 'bf16', kernel, maxPartBytes: 10240 * 6, parts: 3, accumulate: true, extraRows: 2, seed: 702 });
      if (!why) {
        for (const [tile] of ops.MOE_MMA_TILES.entries()) {
          const plan = ops.planMoe(engine, { rows: 33, topK: 2, E: 4, H: 64, I: 40, dtype: 'bf16', kernel: 'gemm-mma', tile });
          const t = ops.MOE_MMA_TILES[tile];
          assert(plan.kernel === 'gemm-mma' && plan.BM === t.SGR * t.TMR * plan.SM && plan.BN === t.SGC * t.TNC * plan.SN, `tile ${tile}: ${JSON.stringify(plan)}`);
          await checkMoe(engine, { rows: 33, E: 4, topK: 2, H: 64, I: 40, dtype: 'bf16', kernel: 'gemm-mma', tile, seed: 710 + tile });
        }
        await expectThrows(() => ops.planMoe(engine, { rows: 33, topK: 2, E: 4, H: 64, I: 40, dtype: 'f32', kernel: 'gemm-mma' }),
          "planMoe: kernel: expected 'auto', 'gemv' or 'gemm' (no subgroup-matrix GEMM here: f32 weights (the matrices take f16))");
      }
    },
  },
  {
    name: 'route V2: softmax greedy (topK 1, 2, 6; E 4, 16), scaling factor, norm_topk_prob ignored as transformers does',
    async run({ engine }) {
      await checkRoute(engine, 'v2 greedy E16 k6', { rows: 9, E: 16, r: v2({ topK: 6 }), seed: 1, extraRows: 2 });
      await checkRoute(engine, 'v2 greedy E4 k1', { rows: 3, E: 4, r: v2({ topK: 1 }), seed: 2 });
      const { ref } = await checkRoute(engine, 'v2 greedy E16 k2 scale 16, norm', { rows: 3, E: 16, r: v2({ routedScalingFactor: 16, normTopkProb: true }), seed: 3 });
      // Not normalized: each token's weights sum to 16 × (its two softmax probabilities), below 16.
      for (let t = 0; t < 3; t++) {
        const s = ref.weights[2 * t] + ref.weights[2 * t + 1];
        assert(s < 15.9 && s > 0, `v2 weights are softmax × scale, not normalized (sum ${s})`);
      }
      // Large logits: softmax stays finite.
      await checkRoute(engine, 'v2 greedy large logits', { rows: 3, E: 16, r: v2({ topK: 6 }), seed: 4, std: 40 });
    },
  },
  {
    name: 'route V2: group_limited_greedy (groups ranked by their max score; 4 groups keep 2, and groups of one expert)',
    async run({ engine }) {
      const r = v2({ method: 'group_limited_greedy', nGroup: 4, topkGroup: 2, topK: 3 });
      const { ref, lv } = await checkRoute(engine, 'v2 group-limited E16', { rows: 9, E: 16, r, seed: 10 });
      // The group limit changed some token's choice (the test would see a kernel that ignores it).
      const free = reference.routeRef(lv, 9, 16, v2({ topK: 3 }));
      assert(Array.from(ref.ids).some((e, i) => e !== free.ids[i]), 'the group limit changed no choice: the case tests nothing');
      await checkRoute(engine, 'v2 group-limited groups of 1', { rows: 3, E: 8, r: v2({ method: 'group_limited_greedy', nGroup: 8, topkGroup: 3, topK: 2 }), seed: 11 });
    },
  },
  {
    name: 'route V3: noaux_tc, sigmoid + e_score_correction_bias, groups by their two best, normalized or not, scaling 2.5',
    async run({ engine }) {
      const E = 16;
      const bias = randn(E, 20, 0.3);
      const { ref, lv } = await checkRoute(engine, 'v3 norm', { rows: 9, E, r: v3(), seed: 21, bias, extraRows: 1 });
      // Normalized: each token's weights sum to the scaling factor.
      for (let t = 0; t < 9; t++) {
        const s = ref.weights.subarray(4 * t, 4 * t + 4).reduce((a, b) => a + b, 0);
        assert(Math.abs(s - 2.5) < 1e-9, `v3 normalized weights sum to 2.5, got ${s}`);
      }
      // The bias steers the choice but never the weights: a case without it picks differently.
      const unbiased = reference.routeRef(lv, 9, E, v3());
      assert(Array.from(ref.ids).some((e, i) => e !== unbiased.ids[i]), 'the bias changed no choice: the case tests nothing');
      await checkRoute(engine, 'v3 no norm', { rows: 9, E, r: v3({ normTopkProb: false }), seed: 22, bias });
      await checkRoute(engine, 'v3 without bias', { rows: 3, E, r: v3(), seed: 23 });
      await checkRoute(engine, 'v3 one group (n_group 1)', { rows: 3, E, r: v3({ nGroup: 1, topkGroup: 1, topK: 6 }), seed: 24, bias });
      await checkRoute(engine, 'v3 groups of 2, keep 1', { rows: 3, E: 8, r: v3({ nGroup: 4, topkGroup: 1, topK: 2 }), seed: 25, bias: randn(8, 26, 0.3) });
    },
  },
  {
    name: "route V3: dropped groups' experts are masked to -inf (transformers 5), so with negative biases only kept experts are chosen",
    async run({ engine }) {
      // 8 experts in 4 groups of 2, 3 groups kept: with bias -2 every kept choice is below 0. transformers
      // 5 masks the dropped group with -inf, so the 3 chosen are the best of the 6 kept, each weighted by
      // its own sigmoid score (transformers 4 masked with 0.0, and the dropped group's 2 experts came first).
      const E = 8;
      const r = v3({ nGroup: 4, topkGroup: 3, topK: 3, normTopkProb: false, routedScalingFactor: 1 });
      const { ref, lv } = await checkRoute(engine, 'v3 negative bias', { rows: 3, E, r, seed: 30, bias: new Float32Array(E).fill(-2) });
      for (let t = 0; t < 3; t++) {
        const sig = (e: number) => 1 / (1 + Math.exp(-lv[t * E + e]));
        const gs = [0, 1, 2, 3].map((g) => sig(2 * g) + sig(2 * g + 1));
        const dropped = gs.indexOf(Math.min(...gs));
        const chosen = Array.from(ref.ids.subarray(3 * t, 3 * t + 3));
        assert(!chosen.includes(2 * dropped) && !chosen.includes(2 * dropped + 1), `token ${t}: an expert of the dropped group ${dropped} was chosen (${chosen})`);
        for (const [j, e] of chosen.entries()) assert(Math.abs(ref.weights[3 * t + j] - sig(e)) < 1e-12, `token ${t}: expert ${e}'s weight is not its sigmoid score`);
      }
    },
  },
  {
    name: 'route: 256 experts (DeepSeek-V3: 8 groups keep 4, top 8), and V2 with 64 experts top 6',
    async run({ engine }) {
      await checkRoute(engine, 'v3 E256', { rows: 3, E: 256, r: v3({ nGroup: 8, topkGroup: 4, topK: 8 }), seed: 40, bias: randn(256, 41, 0.1) });
      await checkRoute(engine, 'v2 E64', { rows: 3, E: 64, r: v2({ topK: 6, routedScalingFactor: 1 }), seed: 42 });
    },
  },
  {
    name: 'moe f32 weights: rows 1, 3, 9 × E 4, 8, 16 × topK 1, 2, 6 (H 64, I 40) on both product kernels',
    async run({ engine }) {
      const shapes: [number, number, number][] = [[1, 8, 2], [1, 16, 6], [3, 16, 6], [3, 4, 1], [9, 4, 1], [9, 8, 2], [9, 16, 6]];
      for (const kernel of KERNELS) {
        for (const [i, [rows, E, topK]] of shapes.entries()) await checkMoe(engine, { rows, E, topK, H: 64, I: 40, dtype: 'f32', kernel, seed: 100 + i });
      }
      await checkMoe(engine, { rows: 3, E: 8, topK: 2, H: 64, I: 40, dtype: 'f32', seed: 110 });   // the planner's choice
    },
  },
  {
    name: 'moe f16 and bf16 weights: rows 1, 3, 9, both kernels',
    async run({ engine }) {
      for (const dtype of ['bf16', 'f16'] as const) {
        for (const kernel of KERNELS) {
          for (const [i, [rows, E, topK]] of ([[1, 4, 1], [3, 8, 2], [9, 16, 6]] as const).entries()) {
            await checkMoe(engine, { rows, E, topK, H: 64, I: 40, dtype, kernel, seed: 200 + i });
          }
        }
      }
    },
  },
  {
    name: 'moe accumulates into a pre-filled out (the residual stream); rows of out and x past rows untouched',
    async run({ engine }) {
      for (const kernel of KERNELS) {
        await checkMoe(engine, { rows: 3, E: 8, topK: 2, H: 64, I: 40, dtype: 'bf16', kernel, accumulate: true, extraRows: 4, seed: 300 });
        await checkMoe(engine, { rows: 9, E: 16, topK: 6, H: 64, I: 40, dtype: 'f32', kernel, extraRows: 2, seed: 301 });
      }
    },
  },
  {
    name: 'moe experts split over 2 and 3 buffers (maxPartBytes), both kernels',
    async run({ engine }) {
      // bf16 gate|up of one expert: 2·40·64·2 = 10240 bytes; E 16 at 6 per part -> 3 parts; 8 -> 2.
      for (const kernel of KERNELS) {
        await checkMoe(engine, { rows: 9, E: 16, topK: 6, H: 64, I: 40, dtype: 'bf16', kernel, maxPartBytes: 10240 * 6, parts: 3, accumulate: true, seed: 400 });
        await checkMoe(engine, { rows: 3, E: 16, topK: 2, H: 64, I: 40, dtype: 'bf16', kernel, maxPartBytes: 10240 * 8, parts: 2, seed: 401 });
      }
    },
  },
  {
    name: 'moe: an expert no token chose, every token on one expert (70 tokens: several tiles of it), invalid ids add nothing',
    async run({ engine }) {
      for (const kernel of KERNELS) {
        await checkMoe(engine, { rows: 9, E: 8, topK: 2, H: 64, I: 40, dtype: 'f32', kernel, ids: randomIds(9, 8, 2, 500, [2, 5]), seed: 501 });
        await checkMoe(engine, { rows: 9, E: 8, topK: 1, H: 64, I: 40, dtype: 'f32', kernel, ids: new Int32Array(9).fill(3), seed: 502 });
        await checkMoe(engine, { rows: 70, E: 8, topK: 2, H: 64, I: 40, dtype: 'bf16', kernel, ids: Int32Array.from({ length: 140 }, (_, i) => (i % 2 ? 6 : 3)), seed: 503 });
        const ids = randomIds(3, 8, 2, 504);
        ids[1] = -1;
        ids[4] = 8;
        await checkMoe(engine, { rows: 3, E: 8, topK: 2, H: 64, I: 40, dtype: 'f32', kernel, ids, seed: 505 });
      }
    },
  },
  {
    name: 'moe in workspace chunks (maxWorkspaceBytes: 2 tokens at a time, then 4 of 9) gives the same result',
    async run({ engine }) {
      // A token's workspace: topK · max(2I, H) · 4 = 6 · 80 · 4 = 1920 bytes.
      for (const kernel of KERNELS) {
        await checkMoe(engine, { rows: 9, E: 16, topK: 6, H: 64, I: 40, dtype: 'f32', kernel, maxWorkspaceBytes: 1920 * 2, accumulate: true, seed: 600 });
        await checkMoe(engine, { rows: 9, E: 16, topK: 6, H: 64, I: 40, dtype: 'bf16', kernel, maxWorkspaceBytes: 1920 * 4 + 100, seed: 601 });
      }
    },
  },
  {
    name: "gpt-oss: route family 'gpt_oss' (top-k by logit, softmax over the chosen); experts with swiglu_oai (limit 1.5: both clamps hit) and expert biases on both kernels, f32, bf16 and MXFP4",
    async run({ engine }) {
      const oss: Routing = { family: 'gpt_oss', scoring: 'softmax', method: 'greedy', topK: 2, nGroup: null, topkGroup: null, normTopkProb: true, routedScalingFactor: 1 };
      await checkRoute(engine, 'gpt_oss E8', { rows: 5, E: 8, r: oss, seed: 450 });
      await checkRoute(engine, 'gpt_oss E32 top4', { rows: 3, E: 32, r: { ...oss, topK: 4 }, seed: 451 });
      const oai = { alpha: 1.702, limit: 1.5 };
      for (const kernel of KERNELS) {
        await checkMoe(engine, { rows: 3, E: 4, topK: 2, H: 64, I: 40, dtype: 'f32', kernel, seed: 460, oai, accumulate: true });
        await checkMoe(engine, { rows: 9, E: 8, topK: 2, H: 64, I: 40, dtype: 'bf16', kernel, seed: 461, oai });
        await checkMoe(engine, { rows: 3, E: 4, topK: 2, H: 64, I: 64, dtype: 'f32', kernel, seed: 462, oai, quant: { gateUp: 'MXFP4', down: 'MXFP4' } });
      }
    },
  },
  {
    name: 'route → moe on the GPU (no host round trip) equals routeRef → moeRef; GPU-made experts hold the documented values',
    async run({ engine }) {
      const [rows, E, H, I] = [3, 16, 64, 40];
      const r = v3({ topK: 4 });
      const biasV = randn(E, 700, 0.3);
      const lv = randn(rows * E, 701, 1.5);
      const xv = randn(rows * H, 702);
      const experts = ops.createExpertsOnDevice(engine, { E, H, I, dtype: 'bf16', seed: 703, std: 0.1, maxPartBytes: 10240 * 5 });
      assert(experts.parts.length === 4, `expected 4 parts, got ${experts.parts.length}`);
      const gateUp = roundToDType(ops.randomLinearValues(H, 703, 0.1, 0, E * 2 * I), 'bf16');
      const down = roundToDType(ops.randomLinearValues(I, 704, 0.1, 0, E * H), 'bf16');
      const gotGU = new Float32Array(E * 2 * I * H), gotD = new Float32Array(E * H * I);
      for (const p of experts.parts) {
        gotGU.set(await p.gateUp.toFloat32(), p.e0 * 2 * I * H);
        gotD.set(await p.down.toFloat32(), p.e0 * H * I);
      }
      equalArrays('GPU-made gate|up', gotGU, gateUp);
      equalArrays('GPU-made down', gotD, down);
      const routed = ops.route(engine, engine.tensor(lv, [rows, E]), r, { rows, bias: engine.tensor(biasV, [E]) });
      const out = engine.tensor(new Float32Array(rows * H).fill(SENTINEL), [rows, H]);
      ops.moe(engine, engine.tensor(xv, [rows, H]), routed, experts, { rows, out });
      const ref = reference.routeRef(lv, rows, E, r, biasV);
      const want = reference.moeRef(xv, ref.ids, ref.weights, gateUp, down, { rows, E, H, I, topK: 4 });
      assertClose('route → moe', await out.toFloat32(), want, 'f32');
      experts.destroy();
    },
  },
  {
    name: 'route and moe in the steady state create no buffers (outputs given, workspace from the pool)',
    async run({ engine }) {
      const [rows, E, H, I, K] = [3, 8, 64, 40, 2];
      const experts = ops.createExperts(engine, { E, H, I, dtype: 'bf16', gateUp: randn(E * 2 * I * H, 800, 0.1), down: randn(E * H * I, 801, 0.1) });
      const logits = engine.tensor(randn(rows * E, 802), [rows, E]);
      const x = engine.tensor(randn(rows * H, 803), [rows, H]);
      const ids = engine.tensor(new Int32Array(rows * K), [rows, K], 'i32');
      const weights = engine.tensor(new Float32Array(rows * K), [rows, K]);
      const out = engine.tensor(new Float32Array(rows * H), [rows, H]);
      const step = () => {
        ops.route(engine, logits, v2({ topK: K }), { rows, ids, weights });
        ops.moe(engine, x, { ids, weights }, experts, { rows, out, accumulate: true });
      };
      for (let i = 0; i < 2; i++) { step(); await engine.sync(); }
      const before = engine.counters.createBuffer;
      step();
      await engine.sync();
      assert(engine.counters.createBuffer === before, `a warm step created ${engine.counters.createBuffer - before} buffers`);
      experts.destroy();
    },
  },
  {
    name: "moe layers of one recording share their scratch (three chained, no submit between): each layer's gate|up workspace is the last one's, and every layer equals moeRef on its input",
    async run({ engine }) {
      // I 520 puts gate|up's workspace (21 pairs × 2I f32) in a size class no other case takes.
      const [rows, E, H, I, K] = [7, 8, 64, 520, 3];
      const layers = [0, 1, 2].map((l) => ({
        gateUp: roundToDType(randn(E * 2 * I * H, 820 + l, 1 / Math.sqrt(H)), 'bf16'), down: roundToDType(randn(E * H * I, 830 + l, 1 / Math.sqrt(I)), 'bf16'),
      }));
      const experts = layers.map((w) => ops.createExperts(engine, { E, H, I, dtype: 'bf16', ...w }));
      const ids = randomIds(rows, E, K, 840);
      const r = rng(841);
      const wv = Float32Array.from({ length: rows * K }, () => 0.1 + r());
      const routing = { ids: engine.tensor(ids, [rows, K], 'i32'), weights: engine.tensor(wv, [rows, K]) };
      const acts = [engine.tensor(randn(rows * H, 850), [rows, H]), ...[0, 1, 2].map(() => engine.tensor(new Float32Array(rows * H).fill(SENTINEL), [rows, H]))];
      await engine.sync();
      const labels: string[] = [];
      const create = engine.createBuffer;
      (engine as { createBuffer: typeof create }).createBuffer = (d: GPUBufferDescriptor) => { labels.push(d.label ?? ''); return create.call(engine, d); };
      try {
        for (let l = 0; l < 3; l++) ops.moe(engine, acts[l], routing, experts[l], { rows, out: acts[l + 1], plan: ops.planMoe(engine, { rows, topK: K, E, H, I, dtype: 'bf16', kernel: 'gemm' }) });
      } finally {
        delete (engine as { createBuffer?: unknown }).createBuffer;
      }
      const made = labels.filter((l) => l === 'moe gate|up').length;
      assert(made <= 1, `three layers recorded without a submit created ${made} gate|up workspaces (expected one, shared)`);
      const got = await Promise.all(acts.map((a) => a.toFloat32()));
      for (let l = 0; l < 3; l++) {
        const ref = reference.moeRef(got[l], ids, wv, layers[l].gateUp, layers[l].down, { rows, E, H, I, topK: K });
        assertClose(`moe layer ${l} of a recording`, got[l + 1], ref, 'f32');
      }
      experts.forEach((x) => x.destroy());
    },
  },
  {
    name: 'validation: every argument of route, moe, createExperts and planMoe',
    async run({ engine }) {
      const [E, H, I] = [8, 64, 40];
      const logits = engine.tensor(randn(3 * E, 900), [3, E]);
      await expectThrows(() => ops.route(engine, logits, v2({ topK: 9 }), { rows: 3 }), 'route: r.topK: expected a positive integer up to E=8, got 9');
      await expectThrows(() => ops.route(engine, logits, v2({ scoring: 'relu' as never }), { rows: 3 }), "route: r.scoring: expected 'softmax' or 'sigmoid', got 'relu'");
      await expectThrows(() => ops.route(engine, logits, v2({ method: 'topk' as never }), { rows: 3 }), "route: r.method: expected 'greedy', 'group_limited_greedy' or 'noaux_tc', got 'topk'");
      await expectThrows(() => ops.route(engine, logits, v2({ family: 'mixtral' as never }), { rows: 3 }), "route: r.family: expected 'deepseek_v2', 'deepseek_v3', 'gpt_oss' or 'qwen3_moe', got 'mixtral'");
      await expectThrows(() => ops.route(engine, logits, v3({ nGroup: 3 }), { rows: 3 }), 'route: r.nGroup: expected a divisor of E=8');
      await expectThrows(() => ops.route(engine, logits, v3({ nGroup: 8, topkGroup: 2 }), { rows: 3 }), 'route: r.nGroup: expected at most E/2=4');
      await expectThrows(() => ops.route(engine, logits, v3({ topkGroup: 5 }), { rows: 3 }), 'route: r.topkGroup: expected a positive integer up to nGroup=4, got 5');
      await expectThrows(() => ops.route(engine, logits, v3({ routedScalingFactor: NaN }), { rows: 3 }), 'route: r.routedScalingFactor: expected a finite number, got NaN');
      await expectThrows(() => ops.route(engine, logits, v2(), { rows: 4 }), 'route: o.rows: expected a positive integer up to 3 (the rows of logits), got 4');
      await expectThrows(() => ops.route(engine, logits, v3(), { rows: 3, bias: engine.tensor(new Float32Array(7), [7]) }), 'route: o.bias: expected an f32 tensor of E=8 elements, got f32 [7]');
      await expectThrows(() => ops.route(engine, logits, v2(), { rows: 3, ids: engine.tensor(new Float32Array(6), [3, 2]) }), "route: o.ids.dtype: expected 'i32', got 'f32'");
      await expectThrows(() => ops.route(engine, logits, v2(), { rows: 3, weights: engine.tensor(new Float32Array(5), [5]) }), 'route: o.weights: expected at least rows·topK = 6 elements, got [5]');
      await expectThrows(() => ops.route(engine, engine.tensor(new Int32Array(8), [1, 8]), v2(), { rows: 1 }), "route: logits.dtype: expected 'f32', got 'i32'");
      await expectThrows(() => ops.route(engine, engine.tensor(new Float32Array(1024), [2, 512, 1]), v2(), { rows: 1 }), 'route: logits: expected shape [rows, E], got [2, 512, 1]');

      await expectThrows(() => ops.createExperts(engine, { E, H: 60, I, dtype: 'bf16', gateUp: new Float32Array(E * 2 * I * 60), down: new Float32Array(E * 60 * I) }),
        'createExperts: H: expected a multiple of 8 for bf16 weights');
      await expectThrows(() => ops.createExperts(engine, { E, H, I, dtype: 'f32', gateUp: new Float32Array(5), down: new Float32Array(E * H * I) }),
        `createExperts: gateUp: expected E·2I·H = ${E * 2 * I * H} elements, got 5`);
      await expectThrows(() => ops.createExperts(engine, { E, H, I, dtype: 'f32', gateUp: new Uint16Array(E * 2 * I * H), down: new Float32Array(E * H * I) }),
        "createExperts: gateUp: expected a Float32Array for dtype 'f32'");
      await expectThrows(() => ops.createExperts(engine, { E, H, I, dtype: 'bf16', gateUp: new Float32Array(E * 2 * I * H), down: new Float32Array(E * H * I), maxPartBytes: 100 }),
        "createExperts: maxPartBytes: expected room for one expert's gate|up of 10240 bytes");
      await expectThrows(() => ops.createExpertsOnDevice(engine, { E, H, I, dtype: 'fp8' as never }), "createExpertsOnDevice: dtype: expected 'f32', 'f16' or 'bf16', got 'fp8'");
      await expectThrows(() => ops.createExperts(engine, { E, H, I, dtype: 'f32', gateUp: new Float32Array(E * 2 * I * H), down: new Float32Array(E * H * I), gateUpBias: new Float32Array(E * 2 * I) }),
        'createExperts: downBias: expected given with the other bias (both or neither), got absent');
      await expectThrows(() => ops.createExperts(engine, { E, H, I, dtype: 'f32', gateUp: new Float32Array(E * 2 * I * H), down: new Float32Array(E * H * I),
        gateUpBias: new Float32Array(E * 2 * I), downBias: new Float32Array(E * I) }), `createExperts: downBias: expected a Float32Array of E·H = ${E * H} values, got ${E * I} values`);

      const experts = ops.createExperts(engine, { E, H, I, dtype: 'bf16', gateUp: randn(E * 2 * I * H, 901, 0.1), down: randn(E * H * I, 902, 0.1) });
      const x = engine.tensor(randn(3 * H, 903), [3, H]);
      const routed = ops.route(engine, logits, v2(), { rows: 3 });
      const out = engine.tensor(new Float32Array(3 * H), [3, H]);
      await expectThrows(() => ops.moe(engine, engine.tensor(randn(3 * 32, 1), [3, 32]), routed, experts, { rows: 3, out }), 'moe: x: expected shape [rows, H=64], got [3, 32]');
      await expectThrows(() => ops.moe(engine, x, { ids: routed.weights, weights: routed.weights }, experts, { rows: 3, out }), 'moe: routing.ids: expected an i32 tensor [rows, topK], got f32 [3, 2]');
      await expectThrows(() => ops.moe(engine, x, { ids: routed.ids, weights: engine.tensor(new Float32Array(9), [3, 3]) }, experts, { rows: 3, out }),
        'moe: routing.weights: expected an f32 tensor [rows, topK=2], got f32 [3, 3]');
      await expectThrows(() => ops.moe(engine, x, routed, experts, { rows: 4, out }), 'moe: o.rows: expected a positive integer up to 3 (the rows of x, ids and weights), got 4');
      await expectThrows(() => ops.moe(engine, x, routed, experts, { rows: 3, out: engine.tensor(new Float32Array(2 * H), [2, H]) }), 'moe: o.out: expected shape [>= rows=3, H=64], got [2, 64]');
      await expectThrows(() => ops.moe(engine, x, routed, experts, { rows: 3, out: x }), 'moe: o.out: expected a buffer of its own (not that of x, ids or weights), got a shared buffer');
      await expectThrows(() => ops.moe(engine, x, routed, { E } as never, { rows: 3, out }), 'moe: experts: expected an ExpertWeights');
      await expectThrows(() => ops.moe(engine, x, routed, experts, { rows: 3, out, maxWorkspaceBytes: 100 }), "moe: o.maxWorkspaceBytes: expected room for one token's workspace (640 bytes), got 100");
      await expectThrows(() => ops.moe(engine, x, routed, experts, { rows: 3, out, act: 'gelu' as never }), "moe: o.act: expected 'silu' or 'swiglu_oai', got 'gelu'");
      await expectThrows(() => ops.moe(engine, x, routed, experts, { rows: 3, out, limit: 7 }), "moe: o.alpha: expected no alpha or limit (they belong to act 'swiglu_oai'), got 7");
      await expectThrows(() => ops.moe(engine, x, routed, experts, { rows: 3, out, act: 'swiglu_oai', limit: 0 }), 'moe: o.limit: expected a number > 0, got 0');
      await expectThrows(() => ops.withExpertBiases(engine, experts, { gateUpBias: new Float32Array(3), downBias: new Float32Array(E * H) }),
        `withExpertBiases: gateUpBias: expected a Float32Array of E·2I = ${E * 2 * I} values, got 3 values`);
      await expectThrows(() => ops.planMoe(engine, { rows: 3, topK: 2, E, H, I, dtype: 'bf16', kernel: 'fast' as never }), "planMoe: kernel: expected 'auto', 'gemv', 'gemm' or 'gemm-mma', got 'fast'");
      const noMma = ops.linearMmaUnavailable(engine, 'bf16');
      if (noMma) {
        await expectThrows(() => ops.planMoe(engine, { rows: 3, topK: 2, E, H, I, dtype: 'bf16', kernel: 'gemm-mma' }),
          `planMoe: kernel: expected 'auto', 'gemv' or 'gemm' (no subgroup-matrix GEMM here: ${noMma}), got 'gemm-mma'`);
      }
      await expectThrows(() => ops.planMoe(engine, { rows: 3, topK: 2, E, H, I, dtype: 'f32', kernel: 'gemm-mma' }), "planMoe: kernel: expected 'auto', 'gemv' or 'gemm' (no subgroup-matrix GEMM here:");
      experts.destroy();
    },
  },
]);
