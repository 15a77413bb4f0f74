// The grouped expert products (ops.moe) at DeepSeek-V2-Lite's expert shape in prefill: the FMA GEMM
// (moe_gemm.wgsl) against the subgroup-matrix GEMM (moe_gemm_mma.wgsl, x split into hi + lo f16 halves),
// on the same experts (16-bit, made on the GPU), tokens and routing, timed in the same rounds. Each
// contender is checked first against a float64 reference on sampled tokens (their experts' rows from
// ops.randomLinearValues, the host mirror of createExpertsOnDevice).
import { ops, randn, reference, rng, roundToDType, type Engine, type Tensor } from 'webinfer';
import { combineRounds, fillRepeating, roundWarmupMs, timeOp, timeRounds, type Contender, type Timing } from './harness';
import type { GemmContenderResult } from './gemm';

export interface MoeShape { rows: number; E: number; topK: number; H: number; I: number; dtype: 'f16' | 'bf16'; what: string }

/** DeepSeek-V2-Lite's routed experts (64 of hidden 2048, intermediate 1408, 6 a token) at prefill row counts. */
export function deepseekMoeShapes(rows: readonly number[]): MoeShape[] {
  return rows.map((r) => ({ rows: r, E: 64, topK: 6, H: 2048, I: 1408, dtype: 'bf16' as const, what: 'DeepSeek-V2-Lite experts' }));
}

export interface MoeBenchRow { shape: MoeShape; contenders: GemmContenderResult[] }

const SAMPLE_ROWS = 3;
const POISON = new Uint16Array(1 << 20).fill(0xffff);

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
    const TOL = { f32: [5e-6, 5e-5], f16: [5e-3, 5e-2] } as const;
    const flops = 2 * rows * topK * 3 * H * I;
    const per = Math.max(1, Math.min(10, Math.round(0.02 / (flops / 1e12))));
    const list: { name: string; plan: ops.MoePlan; tol: 'f32' | 'f16' }[] = [
      { name: 'fma', plan: ops.planMoe(engine, { rows, topK, E, H, I, dtype, kernel: 'gemm' }), tol: 'f32' },
    ];
    if (!ops.linearMmaUnavailable(engine, dtype)) list.push({ name: 'mma split', plan: ops.planMoe(engine, { rows, topK, E, H, I, dtype, kernel: 'gemm-mma' }), tol: 'f16' });
    const rounds = new Map<Contender, { r: GemmContenderResult; ts: Timing[] }>();
    for (const c of list) {
      const p = c.plan;
      const label = p.kernel === 'gemm-mma' ? `${p.SM}×${p.SN}×${p.SK}, ${p.BM}×${p.BN} tile, BK ${p.BK}` : p.kernel === 'gemm' ? `${p.BM}×${p.BN} tile` : 'gemv';
      const r: GemmContenderResult = { name: c.name, plan: label, timing: null, tflops: NaN, worst: NaN, worstF32: NaN, pass: false };
      row.contenders.push(r);
      const run = () => { ops.moe(engine, x, { ids, weights }, experts, { rows, out, plan: c.plan }); };
      try {
        await fillRepeating(engine, out.buffer, out.byteLength, POISON);   // NaN: an unwritten output fails
        run();
        const got = await out.toFloat32();
        let worst = 0, worstF32 = 0;
        sample.forEach((t, i) => {
          for (let col = 0; col < H; col++) {
            const want = ref[i][col];
            const abs = Math.abs(got[t * H + col] - want);
            const err = abs / (TOL[c.tol][0] + TOL[c.tol][1] * Math.abs(want));
            worst = Math.max(worst, Number.isFinite(err) ? err : Infinity);
            worstF32 = Math.max(worstF32, Number.isFinite(abs) ? abs / (TOL.f32[0] + TOL.f32[1] * Math.abs(want)) : Infinity);
          }
        });
        r.worst = worst;
        r.worstF32 = worstF32;
        r.pass = worst <= 1;
      } catch (e) {
        r.error = (e as Error).message;
        continue;
      }
      const ts: Timing[] = [];
      rounds.set({
        name: c.name,
        round: async (i) => { ts.push(await timeOp(engine, run, { samples: o.samples, perSample: per, warmupMs: roundWarmupMs(i) })); },
      }, { r, ts });
    }
    await timeRounds([...rounds.keys()], o.rounds, (c, e) => { rounds.get(c)!.r.error = e.message; });
    for (const { r, ts } of rounds.values()) {
      if (!ts.length) continue;
      r.timing = combineRounds(ts);
      r.tflops = flops / (r.timing.medianMs * 1e9);
    }
  } finally {
    experts.destroy();
    for (const t of [x, ids, weights, out] as Tensor[]) t.destroy();
    await engine.sync();
  }
  return row;
}

export function moeJson(r: MoeBenchRow): unknown {
  return { shape: r.shape, contenders: r.contenders.map(({ timing, ...c }) => ({ ...c, ms: timing?.medianMs, rounds: timing?.rounds, spreadPct: timing?.spreadPct })) };
}

/** The MoE rows' Markdown table. */
export function moeLines(rows: readonly MoeBenchRow[], fmt: (x: number, d?: number) => string): string[] {
  const names = [...new Set(rows.flatMap((r) => r.contenders.map((c) => c.name)))];
  const lines = [
    `| experts | tokens | pairs | E | H | I | ${names.map((n) => `${n} ms | ${n} spread | ${n} TFLOP/s`).join(' | ')} | best vs fma | checks |`,
    `|---|---|---|---|---|---|${names.map(() => '---|---|---|').join('')}---|---|`,
  ];
  for (const r of rows) {
    const by = new Map(r.contenders.map((c) => [c.name, c]));
    const ms = (c?: GemmContenderResult) => c?.timing?.medianMs ?? NaN;
    const timed = r.contenders.filter((c) => c.timing);
    const best = timed.reduce<GemmContenderResult | undefined>((b, c) => (!b || ms(c) < ms(b) ? c : b), undefined);
    const cells = names.map((n) => {
      const c = by.get(n);
      return c?.timing ? `${fmt(ms(c), 3)} | ${fmt(c.timing.spreadPct ?? NaN, 1)}% | ${fmt(c.tflops, 1)}` : `${c?.error ?? '-'} | - | -`;
    });
    const checks = r.contenders.every((c) => c.pass) ? 'pass' : `FAIL (${r.contenders.filter((c) => !c.pass).map((c) => `${c.name} ${fmt(c.worst)}`).join(', ')})`;
    const s = r.shape;
    lines.push(`| ${s.what} (${s.dtype}) | ${s.rows} | ${s.rows * s.topK} | ${s.E} | ${s.H} | ${s.I} | ${cells.join(' | ')} | ${best ? `${fmt(ms(by.get('fma')) / ms(best), 2)}x (${best.name})` : '-'} | ${checks} |`);
  }
  return lines;
}
