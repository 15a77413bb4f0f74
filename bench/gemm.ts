// The prefill GEMM (ops.linear with many rows) at Llama-3-8B's projection shapes: the FMA kernel
// (gemm.wgsl) against the subgroup-matrix kernel (gemm_mma.wgsl) with x split into hi + lo f16 halves
// (x kept to ~22 bits, the engine's default) and with x rounded to f16 (f16 activations), all on the same
// weights (16-bit, made on the GPU) and inputs, timed in the same rounds. Every contender is checked first
// against a float64 reference on sampled outputs (4 rows × 32 columns: the weights' host mirror,
// ops.randomLinearValues, gives their rows without reading the GPU back).
import { ops, randn, reference, roundToDType, type Engine, type QuantType, type Tensor } from 'webinfer';
import { combineRounds, fillRepeating, roundWarmupMs, timeOp, timeRounds, type Ceilings, type Contender, type Timing } from './harness';

export interface GemmShape { M: number; N: number; K: number; dtype: 'f16' | 'bf16'; what: string }

/** Llama-3-8B's linear layers (hidden 4096, 32/8 heads of 128, MLP 14336) at prefill row counts. */
export function llamaGemmShapes(ms: readonly number[], dtype: 'f16' | 'bf16' = 'bf16'): GemmShape[] {
  const layers = [
    { N: 6144, K: 4096, what: 'qkv' }, { N: 4096, K: 4096, what: 'o' },
    { N: 28672, K: 4096, what: 'gate|up' }, { N: 4096, K: 14336, what: 'down' },
  ];
  return ms.flatMap((M) => layers.map((l) => ({ ...l, M, dtype })));
}

export interface GemmContenderResult {
  name: string;
  plan: string;
  timing: Timing | null;
  tflops: number;
  /** Worst sampled error as a fraction of the tolerance: f32 for the FMA GEMM, the weights' storage
   *  dtype (SPEC §6: bf16) for the matrix GEMM, whose products are f16 × f16 summed by the tensor units. */
  worst: number;
  /** The same error as a fraction of the f32 tolerance. */
  worstF32: number;
  pass: boolean;
  error?: string;
}

export interface GemmBenchRow { shape: GemmShape; contenders: GemmContenderResult[] }

const SAMPLE_ROWS = 4, SAMPLE_COLS = 32;
const POISON = new Uint16Array(1 << 20).fill(0xffff);

/** Plans to time: the FMA GEMM and, where the adapter has f16 subgroup matrices, the matrix GEMM split and not. */
function contendersFor(engine: Engine, s: GemmShape, tile?: number): { name: string; plan: ops.LinearPlan; tol: 'f32' | 'f16' }[] {
  const base = { M: s.M, N: s.N, K: s.K, dtype: s.dtype };
  const list: { name: string; plan: ops.LinearPlan; tol: 'f32' | 'f16' }[] = [{ name: 'fma', plan: ops.planLinear(engine, { ...base, kernel: 'gemm' }), tol: 'f32' }];
  if (!ops.linearMmaUnavailable(engine, s.dtype)) {
    for (const [name, split] of [['mma split', true], ['mma f16 x', false]] as const) {
      try {
        list.push({ name, plan: ops.planLinear(engine, { ...base, kernel: 'gemm-mma', split, tile }), tol: 'f16' });
      } catch (e) {
        if (tile === undefined) throw e;   // a forced tile may not fit this adapter: that contender is left out
      }
    }
  }
  return list;
}

/** Llama-3.2-1B's linear layers (hidden 2048, 32/8 heads of 64, MLP 8192) at decode row counts. */
export function llamaDecodeLinearShapes(ms: readonly number[], dtype: 'f16' | 'bf16' = 'bf16'): GemmShape[] {
  const layers = [
    { N: 3072, K: 2048, what: 'qkv' }, { N: 2048, K: 2048, what: 'o' },
    { N: 16384, K: 2048, what: 'gate|up' }, { N: 2048, K: 8192, what: 'down' },
  ];
  return ms.flatMap((M) => layers.map((l) => ({ ...l, M, dtype })));
}

/**
 * Contenders for a decode-sized step: the GEMV and the subgroup-matrix GEMM over the decode tiles as the
 * planner picks its tile; with `explore`, every decode tile. The matrix GEMM is checked against SPEC §6's row for the weights' dtype, the GEMV against f32's.
 */
export function decodeContenders(engine: Engine, s: GemmShape, explore = false): { name: string; plan: ops.LinearPlan; tol: 'f32' | 'f16' }[] {
  const base = { M: s.M, N: s.N, K: s.K, dtype: s.dtype };
  const list: { name: string; plan: ops.LinearPlan; tol: 'f32' | 'f16' }[] = [{ name: 'gemv', plan: ops.planLinear(engine, { ...base, kernel: 'gemv' }), tol: 'f32' }];
  if (ops.linearMmaUnavailable(engine, s.dtype)) return list;
  const mma = ops.planLinear(engine, { ...base, kernel: 'gemm-mma', decodeTiles: true });
  list.push({ name: 'mma', plan: mma, tol: 'f16' });
  // The same tile without split-K, where the planner splits.
  if (mma.kernel === 'gemm-mma' && mma.KS > 1) list.push({ name: 'mma unsplit', plan: ops.planLinear(engine, { ...base, kernel: 'gemm-mma', decodeTiles: true, kSplit: 1 }), tol: 'f16' });
  if (explore) {
    for (const [ti] of ops.LINEAR_MMA_DECODE_TILES.entries()) {
      try {
        list.push({ name: `tile ${ti}`, plan: ops.planLinear(engine, { ...base, kernel: 'gemm-mma', decodeTiles: true, tile: ti }), tol: 'f16' });
      } catch { /* does not fit this adapter */ }
    }
  }
  return list;
}

/** How a plan reads in the results. */
export function planLabel(p: ops.LinearPlan): string {
  if (p.kernel === 'gemm-mma') return `${p.SM}×${p.SN}×${p.SK}, ${p.BM}×${p.BN} tile${p.VEC ? ' (vec4 staging)' : ''}, ${p.SGR * p.SGC} subgroups of ${p.TMR}×${p.TNC} matrices, BK ${p.BK}, PF ${p.PF}${p.KS > 1 ? `, K split ${p.KS}` : ''}`;
  if (p.kernel === 'gemm') return `${p.BM}×${p.BN} tile, ${p.TM}×${p.TN} a thread`;
  return `GEMV MT ${p.MT} KT ${p.KT}`;
}

export async function benchGemmShape(engine: Engine, s: GemmShape, o: { rounds: number; samples: number; tile?: number; seed?: number; span?: boolean; perSample?: number;
                                      /** Copies of the weights the calls rotate over (the first is checked). */ rot?: number;
                                      contenders?: { name: string; plan: ops.LinearPlan; tol: 'f32' | 'f16' }[] }): Promise<GemmBenchRow> {
  const seed = o.seed ?? 5;
  const std = 0.02;
  const ws = Array.from({ length: o.rot ?? 1 }, (_, i) => ops.createLinearOnDevice(engine, { N: s.N, K: s.K, dtype: s.dtype, seed: seed + i, std }));
  const w = ws[0];
  const xv = randn(s.M * s.K, seed + 1);
  const x = engine.tensor(xv, [s.M, s.K]);
  const out = engine.zeros([s.M, s.N]);
  const row: GemmBenchRow = { shape: s, contenders: [] };
  try {
    // Sampled outputs and their float64 reference.
    const rows = Array.from({ length: SAMPLE_ROWS }, (_, i) => Math.floor(((i + 0.5) * s.M) / SAMPLE_ROWS));
    const cols = Array.from({ length: SAMPLE_COLS }, (_, j) => Math.floor(((j + 0.37) * s.N) / SAMPLE_COLS));
    const ref = new Float64Array(SAMPLE_ROWS * SAMPLE_COLS);
    cols.forEach((n, j) => {
      const wr = roundToDType(ops.randomLinearValues(s.K, seed, std, n, 1), s.dtype);
      rows.forEach((m, i) => {
        let acc = 0;
        for (let k = 0; k < s.K; k++) acc += xv[m * s.K + k] * wr[k];
        ref[i * SAMPLE_COLS + j] = acc;
      });
    });
    const flops = 2 * s.M * s.N * s.K;
    const want = rows.flatMap((m, i) => cols.map((n, j) => [m * s.N + n, ref[i * SAMPLE_COLS + j]] as [number, number]));
    row.contenders = await checkAndTime(engine, out, (o.contenders ?? contendersFor(engine, s, o.tile)).map((c) => ({
      name: c.name, plan: planLabel(c.plan), tol: c.tol, run: (i: number) => { ops.linear(engine, x, ws[i % ws.length], { out, plan: c.plan }); },
    })), want, flops, o);
  } finally {
    for (const v of ws) v.destroy();
    for (const t of [x, out] as Tensor[]) t.destroy();
    await engine.sync();
  }
  return row;
}

const TOL = { f32: [5e-6, 5e-5], f16: [5e-3, 5e-2] } as const;

/**
 * Checks each contender once (out poisoned with NaN first) against sampled outputs ([index into out,
 * float64 reference] pairs) under its tolerance and the f32 one, then times those that ran in the same
 * rounds. The GEMM's and MoE's suites share it.
 */
export async function checkAndTime(engine: Engine, out: Tensor, list: readonly { name: string; plan: string; tol: 'f32' | 'f16'; run: (i: number) => void; unchecked?: boolean;
                                     /** This contender's own reference (default `want`). */ want?: readonly (readonly [number, number])[] }[],
                                   want: readonly (readonly [number, number])[], flops: number,
                                   o: { rounds: number; samples: number; span?: boolean; perSample?: number }): Promise<GemmContenderResult[]> {
  const per = o.perSample ?? Math.max(1, Math.min(10, Math.round(0.02 / (flops / 1e12))));
  const results: GemmContenderResult[] = [];
  const rounds = new Map<Contender, { r: GemmContenderResult; ts: Timing[] }>();
  for (const c of list) {
    const r: GemmContenderResult = { name: c.name, plan: c.plan, timing: null, tflops: NaN, worst: NaN, worstF32: NaN, pass: false };
    results.push(r);
    try {
      if (c.unchecked) {
        // A yardstick (a read of the same bytes, an empty dispatch): nothing to check; it must run.
        c.run(0);
        await engine.sync();
        r.pass = true;
      } else {
        await fillRepeating(engine, out.buffer, out.byteLength, POISON);   // NaN: an unwritten output fails
        c.run(0);
        const got = await out.toFloat32();
        let worst = 0, worstF32 = 0;
        for (const [at, ref] of c.want ?? want) {
          const abs = Math.abs(got[at] - ref);
          const err = abs / (TOL[c.tol][0] + TOL[c.tol][1] * Math.abs(ref));
          worst = Math.max(worst, Number.isFinite(err) ? err : Infinity);
          worstF32 = Math.max(worstF32, Number.isFinite(abs) ? abs / (TOL.f32[0] + TOL.f32[1] * Math.abs(ref)) : Infinity);
        }
        r.worst = worst;
        r.worstF32 = worstF32;
        r.pass = worst <= 1;
      }
    } catch (e) {
      r.error = (e as Error).message;
      continue;
    }
    const ts: Timing[] = [];
    rounds.set({
      name: c.name,
      round: async (i) => { ts.push(await timeOp(engine, c.run, { samples: o.samples, perSample: per, warmupMs: roundWarmupMs(i), span: o.span })); },
    }, { r, ts });
  }
  await timeRounds([...rounds.keys()], o.rounds, (c, e) => { rounds.get(c)!.r.error = e.message; });
  for (const { r, ts } of rounds.values()) {
    if (!ts.length) continue;
    r.timing = combineRounds(ts);
    r.tflops = flops / (r.timing.medianMs * 1e9);
  }
  return results;
}

/** A row of the GEMM suite, or of ops.moe's (bench/moe.ts), for the results file. */
export function gemmJson(r: { shape: object; contenders: readonly GemmContenderResult[] }): unknown {
  return { shape: r.shape, contenders: r.contenders.map(({ timing, ...c }) => ({ ...c, ms: timing?.medianMs, rounds: timing?.rounds, spreadPct: timing?.spreadPct })) };
}

const ms = (c?: GemmContenderResult) => c?.timing?.medianMs ?? NaN;

/** One row's cells of the contenders named (ms, spread, TFLOP/s), the fastest, and the checks' verdict. */
export function contenderCells(contenders: readonly GemmContenderResult[], names: readonly string[], fmt: (x: number, d?: number) => string) {
  const by = new Map(contenders.map((c) => [c.name, c]));
  const best = contenders.filter((c) => c.timing).reduce<GemmContenderResult | undefined>((b, c) => (!b || ms(c) < ms(b) ? c : b), undefined);
  const cells = names.map((n) => {
    const c = by.get(n);
    return c?.timing ? `${fmt(ms(c), 3)} | ${fmt(c.timing.spreadPct ?? NaN, 1)}% | ${fmt(c.tflops, 1)}` : `${c?.error ?? '-'} | - | -`;
  });
  const checks = contenders.every((c) => c.pass) ? 'pass' : `FAIL (${contenders.filter((c) => !c.pass).map((c) => `${c.name} ${fmt(c.worst)}`).join(', ')})`;
  /** "fma ms / fastest ms" with the fastest's name. */
  const vsFma = best ? `${fmt(ms(by.get('fma')) / ms(best), 2)}x (${best.name})` : '-';
  return { by, best, cells, checks, vsFma };
}

/** The suite's Markdown table. */
export function gemmLines(rows: readonly GemmBenchRow[], ceilings: Ceilings, fmt: (x: number, d?: number) => string): string[] {
  const names = [...new Set(rows.flatMap((r) => r.contenders.map((c) => c.name)))];
  const lines = [
    `| layer | M | N | K | weights | ${names.map((n) => `${n} ms | ${n} spread | ${n} TFLOP/s`).join(' | ')} | best % of matrix ceiling | best % of FMA ceiling | best vs fma | checks |`,
    `|---|---|---|---|---|${names.map(() => '---|---|---|').join('')}---|---|---|---|`,
  ];
  for (const r of rows) {
    const { best, cells, checks, vsFma } = contenderCells(r.contenders, names, fmt);
    lines.push(`| ${r.shape.what} | ${r.shape.M} | ${r.shape.N} | ${r.shape.K} | ${r.shape.dtype} | ${cells.join(' | ')} | `
      + `${ceilings.mmaTflops && best ? fmt((100 * best.tflops) / ceilings.mmaTflops, 1) : '-'} | ${best ? fmt((100 * best.tflops) / ceilings.fmaTflops, 1) : '-'} | `
      + `${vsFma} | ${checks} |`);
  }
  return lines;
}

/** A quantized GEMV shape: weights of `type` (random valid blocks), M rows of x. */
export interface QuantGemvShape { M: number; N: number; K: number; type: QuantType; what: string }

/**
 * The quantized GEMV at one shape: the planner's pick, then (explore) every lanes-per-row KT and
 * rows-per-group R the kernel takes, each checked on sampled outputs against a float64 reference of
 * the dequantized weights (f32 tolerance) before it is timed. GB/s on the packed bytes.
 */
export interface QuantGemvOptions {
  rounds: number; samples: number; explore: boolean; seed?: number; kts?: readonly number[]; rs?: readonly (1 | 2 | 4)[];
  /** Workgroup sizes the exploration tries (default the planner's). */
  wgs?: readonly number[];
  /** The exploration also tries each KT and R on 8-bit activations (quantPath 'idot'), where the WGSL has dot4I8Packed. */
  idotExplore?: boolean;
  /** Time each sample's calls in one pass, as a model's step runs them (not a pass a dispatch, whose
   *  timestamps add the pass's own cost to a few-microsecond kernel). */
  span?: boolean;
  /** Calls a sample (default by the FLOPs). */
  perSample?: number;
  /** Copies of the weights the calls rotate over (default 1): with 4+, a weight of tens of MB is not
   *  found in L2 by the next call, as in a model's step. */
  rot?: number;
  /** The RMSNorm folded into the product (ops.linear's `norm`), as a model's q|k|v and gate|up run. */
  rms?: boolean;
  /** Yardsticks beside the contenders: `read` (the read-ceiling kernel over the same bytes, same
   *  rotation) and `empty` (a one-workgroup dispatch that reads nothing: the floor a dispatch costs). */
  yardsticks?: boolean;
}

export async function benchQuantGemv(engine: Engine, s: QuantGemvShape, o: QuantGemvOptions): Promise<GemmBenchRow & { bytes: number }> {
  const seed = o.seed ?? 9;
  // Scales near a trained model's (weights of ~1/√K): sums that do not cancel far below their terms.
  const bytes = reference.randomQuantRows(s.type, s.N, s.K, seed, { scaleRange: [2e-4, 2e-3] });
  const rot = o.rot ?? 1;
  const ws = Array.from({ length: rot }, () => ops.createQuantLinear(engine, { data: bytes, N: s.N, K: s.K, type: s.type }));
  const xv = randn(s.M * s.K, seed + 1);
  const x = engine.tensor(xv, [s.M, s.K]);
  const out = engine.zeros([s.M, s.N]);
  const nw = engine.tensor(new Float32Array(s.K).fill(1), [s.K]);
  const eps = 1e-5;
  const norm = o.rms ? { weight: nw, eps } : undefined;
  const rowBytes = bytes.length / s.N;
  const sticks = o.yardsticks ? yardsticks(engine, bytes.length, rot) : null;
  try {
    const rows = Array.from({ length: Math.min(SAMPLE_ROWS, s.M) }, (_, i) => Math.floor(((i + 0.5) * s.M) / Math.min(SAMPLE_ROWS, s.M)));
    const cols = Array.from({ length: SAMPLE_COLS }, (_, j) => Math.floor(((j + 0.37) * s.N) / SAMPLE_COLS));
    // The reference, and the one of the matrices, which take the weights rounded to f16 (SPEC §6's f16
    // row holds against that: a quantized row's sum cancels far below its terms, so the rounding of the
    // weights alone can exceed the f16 row against the unrounded weights).
    const want: [number, number][] = [];
    const wantF16: [number, number][] = [];
    // The 8-bit-activation path (quantPath 'idot') is checked against the reference over x quantized as
    // it takes it (reference.quantizeActivationsQ8), under the f16 row (a rounding tie may move a quant).
    const wantQ8: [number, number][] = [];
    const xq = new Map(rows.map((m) => {
      let ss = 0;
      for (let k = 0; k < s.K; k++) ss += xv[m * s.K + k] ** 2;
      const scale = o.rms ? 1 / Math.sqrt(ss / s.K + eps) : 1;
      return [m, reference.quantizeActivationsQ8(Array.from(xv.subarray(m * s.K, (m + 1) * s.K), (v) => v * scale), s.K).values];
    }));
    for (const n of cols) {
      const wr = reference.dequantizeRows(s.type, bytes.subarray(n * rowBytes, (n + 1) * rowBytes), 1, s.K);
      const wh = roundToDType(Float32Array.from(wr), 'f16');
      for (const m of rows) {
        let acc = 0, acch = 0, ss = 0;
        for (let k = 0; k < s.K; k++) ss += xv[m * s.K + k] ** 2;
        const scale = o.rms ? 1 / Math.sqrt(ss / s.K + eps) : 1;
        for (let k = 0; k < s.K; k++) {
          acc += xv[m * s.K + k] * scale * wr[k];
          acch += xv[m * s.K + k] * scale * wh[k];
        }
        want.push([m * s.N + n, acc]);
        wantF16.push([m * s.N + n, acch]);
        const q = xq.get(m)!;
        let accq = 0;
        for (let k = 0; k < s.K; k++) accq += q[k] * wr[k];
        wantQ8.push([m * s.N + n, accq]);
      }
    }
    const base = { M: s.M, N: s.N, K: s.K, dtype: s.type, kernel: 'gemv' as const };
    const picked = ops.planLinear(engine, base);
    const tolOf = (p: ops.LinearPlan) => (p.kernel === 'gemv' && p.quantPath === 'idot' ? 'q8' : 'f32');
    const list: { name: string; plan: ops.LinearPlan; tol: 'f32' | 'f16' | 'q8' }[] = [{ name: 'picked', plan: picked, tol: tolOf(picked) }];
    // What a model's step runs at this M, where the planner leaves the GEMV (the matrices at 8+ rows).
    const auto = ops.planLinear(engine, { M: s.M, N: s.N, K: s.K, dtype: s.type });
    // (Not with the norm folded: only the GEMV folds it.)
    if (auto.kernel !== 'gemv' && !o.rms) list.push({ name: 'auto', plan: auto, tol: 'f16' });
    // The A/B of the quantized GEMV's two paths at the same plan (the decode path: each value to f32 first).
    if (picked.kernel === 'gemv' && picked.quantPath !== 'decode') {
      list.push({ name: 'decode path', plan: ops.planLinear(engine, { ...base, quantPath: 'decode' }), tol: 'f32' });
      // ... and of the dot path on f32 x against 8-bit x with integer dot products, where the WGSL has them.
      if (picked.quantPath === 'idot') list.push({ name: 'dot path', plan: ops.planLinear(engine, { ...base, quantPath: 'dot' }), tol: 'f32' });
      else if (engine.features.intDot4) list.push({ name: 'idot path', plan: ops.planLinear(engine, { ...base, quantPath: 'idot' }), tol: 'q8' });
    }
    // ... and of the dot path's two forms at several rows of x (tuning.quantGemvRowsEach: each unit meets
    // the rows at once, or one at a time).
    if (picked.kernel === 'gemv' && picked.quantPath === 'dot' && picked.MT > 1) {
      list.push({ name: picked.rowsEach ? 'rows at once' : 'rows each', plan: ops.planLinear(engine, { ...base, rowsEach: !picked.rowsEach }), tol: 'f32' });
    }
    if (o.explore && picked.kernel === 'gemv') {
      for (const WG of o.wgs ?? [picked.WG]) {
        for (const KT of o.kts ?? [8, 16, 32, 64, 128]) {
          if (KT * 32 > s.K || KT > WG) continue;
          for (const R of o.rs ?? [1, 2, 4] as const) {
            if (KT === picked.KT && R === picked.R && WG === picked.WG) continue;
            list.push({ name: `KT ${KT} R ${R}${WG !== picked.WG ? ` WG ${WG}` : ''}`, plan: ops.planLinear(engine, { ...base, KT, R, WG }), tol: tolOf(picked) });
            if (o.idotExplore && picked.kernel === 'gemv' && picked.quantPath !== 'idot' && engine.features.intDot4) {
              list.push({ name: `idot KT ${KT} R ${R}${WG !== picked.WG ? ` WG ${WG}` : ''}`, plan: ops.planLinear(engine, { ...base, KT, R, WG, quantPath: 'idot' }), tol: 'q8' });
            }
          }
        }
      }
    }
    // The planner's plan once more at the end: the first contender of a shape has been seen to time
    // slower than the same plan later (its rounds' warm-up follows the weights' upload).
    if (o.explore) list.push({ name: 'picked again', plan: picked, tol: tolOf(picked) });
    const contenders = await checkAndTime(engine, out, [...list.map((c) => ({
      name: c.name, plan: c.plan.kernel === 'gemv' ? `GEMV ${c.plan.quantPath ?? ''} MT ${c.plan.MT} KT ${c.plan.KT} R ${c.plan.R} WG ${c.plan.WG}` : planLabel(c.plan),
      tol: c.tol === 'q8' ? 'f16' as const : c.tol,
      want: c.tol === 'f16' ? wantF16 : c.tol === 'q8' ? wantQ8 : want,
      run: (i: number) => { ops.linear(engine, x, ws[i % rot], { out, plan: c.plan, norm }); },
    })), ...(sticks?.list ?? [])], want, 2 * s.M * s.N * s.K, o);
    return { shape: { ...s, dtype: 'bf16' } as unknown as GemmShape, contenders, bytes: bytes.length };
  } finally {
    for (const w of ws) w.destroy();
    for (const t of [x, out, nw] as Tensor[]) t.destroy();
    sticks?.destroy();
    await engine.sync();
  }
}

/**
 * The yardsticks of a GEMV's time: `read`, the read-ceiling kernel (shaders/bench/ceiling.wgsl) over
 * `bytes` (rounded down to its grid) in `rot` buffers taken in turn; `empty`, one workgroup of it
 * reading nothing (what a dispatch costs in a pass, barrier included: it writes its output).
 */
function yardsticks(engine: Engine, bytes: number, rot: number) {
  const WG = 256;
  const n4all = Math.floor(bytes / 16);
  const groups = Math.max(1, Math.min(1024, Math.floor(n4all / (4 * WG))));
  const n4 = Math.floor(n4all / (4 * WG * groups)) * 4 * WG * groups;
  const usage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST;
  const srcs = Array.from({ length: rot }, () => engine.device.createBuffer({ size: Math.max(16, n4 * 16), usage }));
  const dst = engine.device.createBuffer({ size: groups * WG * 16, usage });
  const k = engine.kernel('bench_ceiling', 'read_main', { overrides: { WG } });
  const plan = `bench_ceiling read_main, ${groups} workgroups, ${((n4 * 16) / 1e6).toFixed(1)} MB`;
  return {
    list: [
      { name: 'read', plan, tol: 'f32' as const, unchecked: true, run: (i: number) => engine.dispatch(k, { src: srcs[i % rot], dst }, { n4, iters: 0, seed: 0 }, groups) },
      { name: 'empty', plan: 'bench_ceiling read_main, 1 workgroup, nothing read', tol: 'f32' as const, unchecked: true,
        run: () => engine.dispatch(k, { src: srcs[0], dst }, { n4: 0, iters: 0, seed: 0 }, 1) },
    ],
    destroy: () => { for (const b of [...srcs, dst]) b.destroy(); },
  };
}
