// The grouped expert products (ops.moe) at DeepSeek-V2-Lite's expert shape in prefill: the FMA GEMM
// (moe_gemm.wgsl) against the subgroup-matrix GEMM (moe_gemm_mma.wgsl, x split into hi + lo f16 halves),
// on the same experts (16-bit, made on the GPU), tokens and routing, timed in the same rounds. Each
// contender is checked first against a float64 reference on sampled tokens (their experts' rows from
// ops.randomLinearValues, the host mirror of createExpertsOnDevice).
import { ops, randn, reference, rng, roundToDType, type Engine, type Tensor } from 'webinfer';
import { checkAndTime, contenderCells, planLabel, type GemmContenderResult } from './gemm';

export interface MoeShape { rows: number; E: number; topK: number; H: number; I: number; dtype: 'f16' | 'bf16'; what: string }

/** DeepSeek-V2-Lite's routed experts (64 of hidden 2048, intermediate 1408, 6 a token) at prefill row counts. */
export function deepseekMoeShapes(rows: readonly number[]): MoeShape[] {
  return rows.map((r) => ({ rows: r, E: 64, topK: 6, H: 2048, I: 1408, dtype: 'bf16' as const, what: 'DeepSeek-V2-Lite experts' }));
}

export interface MoeBenchRow { shape: MoeShape; contenders: GemmContenderResult[] }

const SAMPLE_ROWS = 3;

/** Distinct uniformly random experts a token (the balanced routing of a trained router). */
function routing(rows: number, E: number, topK: number, seed: number): { ids: Int32Array; weights: Float32Array } {
  const r = rng(seed);
  const ids = new Int32Array(rows * topK), weights = new Float32Array(rows * topK);
  for (let t = 0; t < rows; t++) {
    const chosen = new Set<number>();
    for (let j = 0; j < topK; j++) {
      let e: number;
      do { e = Math.floor(r() * E); } while (chosen.has(e));
      chosen.add(e);
      ids[t * topK + j] = e;
      weights[t * topK + j] = 0.05 + r() / topK;
    }
  }
  return { ids, weights };
}

export async function benchMoeShape(engine: Engine, s: MoeShape, o: { rounds: number; samples: number; seed?: number }): Promise<MoeBenchRow> {
  const seed = o.seed ?? 11;
  const { rows, E, topK, H, I, dtype } = s;
  const stdGU = 1 / Math.sqrt(H);   // createExpertsOnDevice gives gate|up and down one std
  const experts = ops.createExpertsOnDevice(engine, { E, H, I, dtype, seed, std: stdGU });
  const xv = randn(rows * H, seed + 2);
  const rt = routing(rows, E, topK, seed + 3);
  const x = engine.tensor(xv, [rows, H]);
  const ids = engine.tensor(rt.ids, [rows, topK], 'i32'), weights = engine.tensor(rt.weights, [rows, topK]);
  const out = engine.zeros([rows, H]);
  const row: MoeBenchRow = { shape: s, contenders: [] };
  try {
    // Sampled tokens and their float64 reference, an expert at a time.
    const sample = Array.from({ length: SAMPLE_ROWS }, (_, i) => Math.floor(((i + 0.5) * rows) / SAMPLE_ROWS));
    const ref = sample.map((t) => {
      const acc = new Float64Array(H);
      for (let j = 0; j < topK; j++) {
        const e = rt.ids[t * topK + j];
        const gateUp = roundToDType(ops.randomLinearValues(H, seed, stdGU, e * 2 * I, 2 * I), dtype);
        const down = roundToDType(ops.randomLinearValues(I, (seed + 1) >>> 0, stdGU, e * H, H), dtype);
        const y = reference.moeRef(xv.subarray(t * H, (t + 1) * H), [0], [rt.weights[t * topK + j]], gateUp, down, { rows: 1, E: 1, H, I, topK: 1 });
        for (let c = 0; c < H; c++) acc[c] += y[c];
      }
      return acc;
    });
    const flops = 2 * rows * topK * 3 * H * I;
    const list: { name: string; plan: ops.MoePlan; tol: 'f32' | 'f16' }[] = [
      { name: 'fma', plan: ops.planMoe(engine, { rows, topK, E, H, I, dtype, kernel: 'gemm' }), tol: 'f32' },
    ];
    if (!ops.linearMmaUnavailable(engine, dtype)) list.push({ name: 'mma split', plan: ops.planMoe(engine, { rows, topK, E, H, I, dtype, kernel: 'gemm-mma' }), tol: 'f16' });
    const want = sample.flatMap((t, i) => Array.from(ref[i], (v, col) => [t * H + col, v] as [number, number]));
    row.contenders = await checkAndTime(engine, out, list.map((c) => {
      const p = c.plan;
      const plan = p.kernel === 'gemm-mma' ? planLabel(p) : p.kernel === 'gemm' ? `${p.BM}×${p.BN} tile` : 'gemv';
      return { name: c.name, plan, tol: c.tol, run: () => { ops.moe(engine, x, { ids, weights }, experts, { rows, out, plan: c.plan }); } };
    }), want, flops, o);
  } finally {
    experts.destroy();
    for (const t of [x, ids, weights, out] as Tensor[]) t.destroy();
    await engine.sync();
  }
  return row;
}

/** The MoE rows' Markdown table. */
export function moeLines(rows: readonly MoeBenchRow[], fmt: (x: number, d?: number) => string): string[] {
  const names = [...new Set(rows.flatMap((r) => r.contenders.map((c) => c.name)))];
  const lines = [
    `| experts | tokens | pairs | E | H | I | ${names.map((n) => `${n} ms | ${n} spread | ${n} TFLOP/s`).join(' | ')} | best vs fma | checks |`,
    `|---|---|---|---|---|---|${names.map(() => '---|---|---|').join('')}---|---|`,
  ];
  for (const r of rows) {
    const { cells, checks, vsFma } = contenderCells(r.contenders, names, fmt);
    const s = r.shape;
    lines.push(`| ${s.what} (${s.dtype}) | ${s.rows} | ${s.rows * s.topK} | ${s.E} | ${s.H} | ${s.I} | ${cells.join(' | ')} | ${vsFma} | ${checks} |`);
  }
  return lines;
}
