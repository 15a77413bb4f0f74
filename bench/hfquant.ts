// The hfquant suite (issue 30): whole models loaded from the Hub's quantized safetensors formats (MLX
// affine, AWQ, GPTQ, block FP8) through loadCheckpoint and loadModel (the transcoding into group types
// included, its time reported), beside the same shapes at Q4_K_M (GGUF files, as issue 28) and in bf16
// (random weights made on the GPU): the model suite's grid on each (decode at batch × context, prefill),
// the share of the read roofline on the bytes the weights take on the GPU (packed), and the issue's
// targets checked from the rows.
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadCheckpoint, loadGGUF, type Engine } from 'webinfer';
import type { Ceilings } from './harness';
import { benchModel, type ModelBench } from './model';
import { HFQ_SHAPES, writeHfQuant, type HfqFormat, type HfqShape } from './hfquant_write';
import { lineChart, type Series } from './plot';

export type HfqKind = HfqFormat | 'q4_k_m' | 'bf16';

/** One model of the suite: where it comes from and what it is. */
export interface HfqEntry {
  kind: HfqKind;
  /** 'hf': a checkpoint folder; 'gguf': a GGUF file; 'random': createRandomModel's bf16 weights. */
  source: 'hf' | 'gguf' | 'random';
  path: string;
  shape: HfqShape | 'other';
  label: string;
  /** Seconds the bench took to write the checkpoint (writeHfQuant), where it wrote it. */
  writeSeconds?: number;
  fileBytes?: number;
}

export interface HfqRun extends ModelBench {
  kind: HfqKind; source: HfqEntry['source']; shape: HfqEntry['shape']; label: string; path: string;
  /** loadCheckpoint (or loadGGUF) + loadModel, seconds; for 'random' the GPU's making of the weights. */
  loadSeconds?: number;
  writeSeconds?: number; fileBytes?: number;
  /** The last row of the logits of a 4-token prompt after the load: finite, and its largest magnitude. */
  logits?: { finite: boolean; maxAbs: number };
  /** Which device call measured it (1, 2, ...: --hfquant-from carries earlier calls' runs) and that call's read ceiling. */
  call?: number; readGBs?: number;
}

export const KIND_LABEL: Record<HfqKind, string> = {
  mlx: 'MLX 4-bit g64', awq: 'AWQ 4-bit g128', gptq: 'GPTQ 4-bit g128', fp8: 'FP8 block 128', q4_k_m: 'Q4_K_M (GGUF)', bf16: 'bf16',
};
const SHAPE_LABEL: Record<string, string> = {
  'llama-1b': 'Llama-3.2-1B', 'llama-8b': 'Llama-3.1-8B', 'dsv2-lite': 'DeepSeek-V2-Lite', 'tiny-llama': 'small Llama', 'tiny-ds': 'small DeepSeek', other: 'other',
};

/** The shape a config has, by its sizes. */
export function shapeOf(c: Record<string, unknown>): HfqShape | 'other' {
  for (const [k, s] of Object.entries(HFQ_SHAPES)) {
    const r = s as Record<string, unknown>;
    if (['hidden_size', 'num_hidden_layers', 'intermediate_size', 'vocab_size'].every((f) => r[f] === c[f])) return k as HfqShape;
  }
  return 'other';
}

/**
 * The entries of the command line: --hfquant-make=FORMAT:SHAPE,... (written into --hfquant-dir first),
 * --hfquant=DIR[:LABEL],... (folders already written), --hfquant-gguf=FILE:SHAPE,... (Q4_K_M),
 * --hfquant-random=SHAPE,... (bf16 made on the GPU).
 */
export function hfqEntries(args: Map<string, string>, log: (s: string) => void): HfqEntry[] {
  const list = (k: string) => (args.get(k) ?? '').split(',').filter(Boolean);
  const out: HfqEntry[] = [];
  const dir = args.get('hfquant-dir') ?? '/tmp/hfquant';
  for (const spec of list('hfquant-make')) {
    const [format, shape] = spec.split(':') as [HfqFormat, HfqShape];
    const path = join(dir, `${shape}-${format}`);
    const w = writeHfQuant(path, format, shape);
    log(`wrote ${path}: ${w.tensors} tensors, ${(w.bytes / 2 ** 30).toFixed(2)} GiB in ${w.shards} file(s), ${w.seconds.toFixed(1)} s (${(w.bytes / 1e9 / w.seconds).toFixed(2)} GB/s)`);
    out.push({ kind: format, source: 'hf', path, shape, label: `${SHAPE_LABEL[shape]} ${KIND_LABEL[format]}`, writeSeconds: w.seconds, fileBytes: w.bytes });
  }
  for (const spec of list('hfquant')) {
    const [path, label] = spec.split(':');
    out.push({ kind: 'mlx', source: 'hf', path, shape: 'other', label: label ?? path.replace(/^.*\//, '') });
  }
  for (const spec of list('hfquant-gguf')) {
    const [path, shape = 'other'] = spec.split(':') as [string, HfqShape];
    out.push({ kind: 'q4_k_m', source: 'gguf', path, shape, label: `${SHAPE_LABEL[shape]} ${KIND_LABEL.q4_k_m}` });
  }
  for (const shape of list('hfquant-random') as HfqShape[]) {
    if (!HFQ_SHAPES[shape]) throw new Error(`--hfquant-random: unknown shape ${shape}`);
    out.push({ kind: 'bf16', source: 'random', path: '', shape, label: `${SHAPE_LABEL[shape]} ${KIND_LABEL.bf16}` });
  }
  // By shape, the quickest to load first (the 8B's AWQ and GPTQ transcode longest), and within a shape
  // the baseline (Q4_K_M, bf16) first: a run cut short
  // keeps whole comparisons.
  const order = ['tiny-llama', 'tiny-ds', 'llama-1b', 'dsv2-lite', 'llama-8b', 'other'];
  const base = (e: HfqEntry) => (e.kind === 'q4_k_m' || e.kind === 'bf16' ? 0 : 1);
  return out.map((e, i) => ({ e, i })).sort((x, y) => order.indexOf(x.e.shape) - order.indexOf(y.e.shape) || base(x.e) - base(y.e) || x.i - y.i).map((x) => x.e);
}

/** The kind a checkpoint's config says its weights are in. */
function kindOf(c: Record<string, unknown>): HfqKind {
  const q = (c.quantization_config ?? c.quantization) as Record<string, unknown> | undefined;
  const m = q?.quant_method;
  return m === 'awq' ? 'awq' : m === 'gptq' ? 'gptq' : m === 'fp8' ? 'fp8' : q ? 'mlx' : 'bf16';
}

/**
 * Each entry in turn: loaded (a GGUF file waited for up to `waitSeconds` where another process is still
 * making it), measured, destroyed; `onRun` after each (the results so far, so a run cut short keeps them).
 */
export async function runHfQuant(engine: Engine, ceilings: Ceilings, entries: HfqEntry[], grid: { batches: number[]; contexts: number[]; prefill: number; steps: number },
  log: (s: string) => void, o: { waitSeconds?: number; onRun?: (runs: HfqRun[]) => void; call?: number } = {}): Promise<HfqRun[]> {
  const runs: HfqRun[] = [];
  for (const e of entries) {
    if (e.source === 'gguf' && !existsSync(e.path)) {
      const t0 = performance.now();
      log(`${e.label}: waiting for ${e.path}`);
      while (!existsSync(e.path) && performance.now() - t0 < 1000 * (o.waitSeconds ?? 0)) await new Promise((r) => setTimeout(r, 1000));
      log(`${e.label}: ${existsSync(e.path) ? 'there' : 'still missing'} after ${((performance.now() - t0) / 1000).toFixed(0)} s`);
    }
    let config: Record<string, unknown> | null = null;
    let loadSeconds: number | undefined;
    let logits: HfqRun['logits'];
    const mla = e.shape === 'dsv2-lite' || e.shape === 'tiny-ds' || (e.source === 'gguf' && /dsv2|deepseek/i.test(e.path));
    log(`${e.label}: loading ${e.path || '(random bf16 on the GPU)'}`);
    const r = await benchModel(engine, ceilings, {
      config: e.source === 'random' ? HFQ_SHAPES[e.shape as HfqShape] as never : undefined,
      name: e.label, dtype: KIND_LABEL[e.kind], ...grid, blockSize: mla ? 64 : undefined,
      load: e.source === 'random' ? undefined : async (o) => {
        const t0 = performance.now();
        let m;
        if (e.source === 'gguf') {
          const g = await loadGGUF(e.path);
          config = g.config as Record<string, unknown>;
          m = await engine.loadModel({ weights: g, ...o });
        } else {
          const ck = await loadCheckpoint(e.path);
          config = ck.config as Record<string, unknown>;
          m = await engine.loadModel({ config: ck.config, weights: ck.weights, ...o });
        }
        loadSeconds = (performance.now() - t0) / 1000;
        // The weights give finite logits (a broken transcoding shows here rather than as a fast NaN model).
        const lg = await m.logits([1, 2, 3, 4]);
        let maxAbs = 0, finite = true;
        for (let i = lg.length - m.config.vocabSize; i < lg.length; i++) { const v = lg[i]!; if (!Number.isFinite(v)) finite = false; else maxAbs = Math.max(maxAbs, Math.abs(v)); }
        logits = { finite, maxAbs };
        log(`${e.label}: loaded in ${loadSeconds.toFixed(1)} s, ${(m.weightBytes / 2 ** 30).toFixed(2)} GiB of weights on the GPU; last logits ${finite ? 'finite' : 'NOT FINITE'}, max |logit| ${maxAbs.toPrecision(3)}`);
        return m;
      },
      configOf: () => config,
    });
    const kind = e.source === 'hf' && config ? kindOf(config) : e.kind;
    const shape = e.shape === 'other' && config ? shapeOf(config) : e.shape;
    const label = (o.call ?? 1) > 1 ? `${e.label} (call ${o.call})` : e.label;
    runs.push({ ...r, name: label, kind, source: e.source, shape, label, path: e.path, loadSeconds, logits, writeSeconds: e.writeSeconds, fileBytes: e.fileBytes,
      call: o.call ?? 1, readGBs: ceilings.readGBs });
    const b1 = r.decode.filter((d) => d.batch === 1);
    log(`${e.label}: ${r.error ?? r.decode.map((d) => `b${d.batch} c${d.context} ${d.error ?? `${d.tokensPerSecond.toFixed(0)} tok/s`}`).join(', ')}`
      + `${r.prefill ? `, prefill ${r.prefill.tokensPerSecond.toFixed(0)} tok/s` : ''}; batch 1 ${b1.map((d) => `${d.pctRooflineGpu.toFixed(1)}%`).join(' / ')} of the read roofline (GPU)`);
    o.onRun?.(runs);
  }
  return runs;
}

const f = (x: number | undefined, d = 0) => (x === undefined || !Number.isFinite(x) ? '-' : x.toFixed(d));
const tps = (r: HfqRun, batch: number, context: number) => r.decode.find((d) => d.batch === batch && d.context === context && !d.error)?.tokensPerSecond ?? NaN;

/** The issue's targets, from the runs: one row each, with the numbers and whether it is met. */
export function hfqTargets(runs: HfqRun[]): { target: string; measured: string; met: string }[] {
  const out: { target: string; measured: string; met: string }[] = [];
  const four = runs.filter((r) => ['mlx', 'awq', 'gptq'].includes(r.kind));
  const fp8 = runs.filter((r) => r.kind === 'fp8');
  // 1. Batch-1 decode ≥ 60% of the read roofline on GPU time, every 4-bit format and FP8.
  const roof = [...four, ...fp8].map((r) => ({ r, p: r.decode.filter((d) => d.batch === 1 && !d.error).map((d) => d.pctRooflineGpu) }));
  if (roof.length) {
    out.push({
      target: 'batch-1 decode ≥ 60% of the read roofline on GPU time (every 4-bit format, FP8)',
      measured: roof.map(({ r, p }) => `${r.label} ${p.length ? `${p.map((x) => f(x, 1)).join(' / ')}%` : `not measured (${r.error ?? '-'})`}`).join('; '),
      met: roof.every(({ p }) => p.length && p.every((x) => x >= 60)) ? 'yes' : roof.some(({ p }) => p.some((x) => x >= 60)) ? 'partly' : 'no',
    });
  }
  // 2. Each 4-bit format's tokens/s within 10% of Q4_K_M's on the same shape.
  const ratios: string[] = [];
  let all = true, any = false, compared = false;
  for (const r of four) {
    // The Q4_K_M run of the same shape measured in the same device call, else any.
    const q = runs.find((x) => x.kind === 'q4_k_m' && x.shape === r.shape && x.call === r.call) ?? runs.find((x) => x.kind === 'q4_k_m' && x.shape === r.shape);
    if (!q) { ratios.push(`${r.label}: no Q4_K_M run of its shape`); all = false; continue; }
    const rs = r.decode.map((d) => tps(r, d.batch, d.context) / tps(q, d.batch, d.context)).filter(Number.isFinite);
    if (!rs.length) { ratios.push(`${r.label}: not measured (${r.error ?? q.error ?? '-'})`); all = false; continue; }
    compared = true;
    const lo = Math.min(...rs), hi = Math.max(...rs);
    ratios.push(`${r.label} ${f(lo, 2)}-${f(hi, 2)}x`);
    if (!(lo >= 0.9)) all = false; else any = true;
  }
  if (four.length) out.push({ target: "each 4-bit format's decode tokens/s within 10% of Q4_K_M's on the same shape (≥ 0.9x at every batch and context)", measured: ratios.join('; '), met: compared && all ? 'yes' : any ? 'partly' : 'no' });
  // 3. FP8 DeepSeek ≥ 1.6x its bf16 tokens/s at batch 1.
  for (const r of fp8) {
    const b = runs.find((x) => x.kind === 'bf16' && x.shape === r.shape && x.call === r.call) ?? runs.find((x) => x.kind === 'bf16' && x.shape === r.shape);
    const ctxs = r.decode.filter((d) => d.batch === 1).map((d) => d.context);
    const rs = ctxs.map((c) => tps(r, 1, c) / (b ? tps(b, 1, c) : NaN));
    out.push({
      target: `${r.label}: batch-1 tokens/s ≥ 1.6x its bf16's`,
      measured: !b ? 'no bf16 run of its shape' : !ctxs.length ? `not measured (${r.error ?? '-'})`
        : ctxs.map((c, i) => `ctx ${c}: ${f(tps(r, 1, c))} vs ${f(tps(b, 1, c))} tok/s, ${f(rs[i], 2)}x`).join('; '),
      met: b && rs.length && rs.every((x) => x >= 1.6) ? 'yes' : rs.some((x) => x >= 1.6) ? 'partly' : 'no',
    });
  }
  return out;
}

/** The summary table: one row per run. */
export function hfqSummary(runs: HfqRun[]): string[] {
  const batches = [...new Set(runs.flatMap((r) => r.decode.map((d) => d.batch)))].sort((a, b) => a - b);
  const contexts = [...new Set(runs.flatMap((r) => r.decode.map((d) => d.context)))].sort((a, b) => a - b);
  const cell = (r: HfqRun, b: number) => contexts.map((c) => f(tps(r, b, c))).join(' / ');
  return [
    `| model | GiB on the GPU | load s | ${batches.map((b) => `batch ${b}, ctx ${contexts.join(' / ')}`).join(' | ')} | prefill ${runs.find((r) => r.prefill)?.prefill?.tokens ?? ''} | batch-1 % of read roofline (GPU) | batch-1 step GPU ms |`,
    `|---|---|---|${batches.map(() => '---|').join('')}---|---|---|`,
    ...runs.map((r) => `| ${r.label} | ${f((r.weightBytes ?? NaN) / 2 ** 30, 2)} | ${r.source === 'random' ? '(random)' : f(r.loadSeconds, 1)} | `
      + `${r.error && !r.decode.length ? r.error : batches.map((b) => cell(r, b)).join(' | ')} | ${f(r.prefill?.tokensPerSecond)} | `
      + `${r.decode.filter((d) => d.batch === 1).map((d) => f(d.pctRooflineGpu, 1)).join(' / ')} | ${r.decode.filter((d) => d.batch === 1).map((d) => f(d.gpuMs ?? NaN, 2)).join(' / ')} |`),
  ];
}

/** Tokens/s against batch, one line per run at the smallest context (log axes). */
export function hfqPlot(runs: HfqRun[], device: string): string {
  const colors: Record<HfqKind, string> = { mlx: '#1f77b4', awq: '#d62728', gptq: '#2ca02c', fp8: '#9467bd', q4_k_m: '#ff7f0e', bf16: '#7f7f7f' };
  const dashes: Record<string, string | undefined> = { 'llama-1b': undefined, 'llama-8b': '6 3', 'dsv2-lite': '2 3' };
  const ctx = Math.min(...runs.flatMap((r) => r.decode.map((d) => d.context)));
  const series: Series[] = runs.map((r) => ({
    name: r.label, color: colors[r.kind], dash: dashes[r.shape],
    points: r.decode.filter((d) => d.context === ctx && !d.error).map((d) => [d.batch, d.tokensPerSecond] as [number, number]),
  })).filter((s) => s.points.length);
  return lineChart({
    title: `Quantized checkpoints: decode tokens/s, context ${ctx} — ${device}`, xLabel: 'batch (sequences)', yLabel: 'tokens/s (log)',
    logX: true, logY: true, series, ...(series.length > 8 ? { height: 400 + 16 * (series.length - 8) } : {}),
  });
}

/** Writes hfquant-<slug>.md, .json and -decode.svg. */
export function writeHfQuantResults(o: { runs: HfqRun[]; outDir: string; slug: string; device: string; cmd: string; runtime: string; ceilings: Ceilings;
  perRun: (r: HfqRun) => string[]; extra: Record<string, unknown>; quiet?: boolean }): void {
  const { runs, ceilings } = o;
  const targets = hfqTargets(runs);
  const calls = [...new Set(runs.map((r) => r.call ?? 1))];
  const lines = [
    `# Quantized checkpoints (MLX, AWQ, GPTQ, block FP8) beside Q4_K_M and bf16 on ${o.device}`, '',
    `Measured ${new Date().toISOString().slice(0, 10)} with \`${o.cmd}\` (${o.runtime}). Checkpoints with random weights written by the bench `
    + '(bench/hfquant_write.ts: each format in its own files, config.json with its quantization keys), loaded through loadCheckpoint and loadModel '
    + '(the transcoding into group types included in the load time); Q4_K_M: GGUF files of the same shapes made by make_gguf.py; bf16: random weights made on the GPU. '
    + 'Decode: steps recorded and submitted as generate does, contexts synthetic. Roofline: the bytes of weights (as packed on the GPU) and K/V a step reads '
    + `over the read ceiling measured in the same run (${f(ceilings.readGBs)} GB/s`
    + `${calls.length > 1 ? `; ${calls.map((c) => `call ${c}: ${f(runs.find((r) => r.call === c)?.readGBs)} GB/s`).join(', ')}: runs marked (call N) were measured in a later device call of the same kind, each against its own call's ceiling and baseline` : ''}), `
    + `against the step's GPU time. Tokens/s cells: context ${[...new Set(runs.flatMap((r) => r.decode.map((d) => d.context)))].join(' / ')}.`, '',
    ...hfqSummary(runs), '',
    '## Targets', '', '| target | measured | met |', '|---|---|---|',
    ...targets.map((t) => `| ${t.target} | ${t.measured} | ${t.met} |`), '',
  ];
  for (const r of runs) lines.push(...o.perRun(r), '');
  mkdirSync(o.outDir, { recursive: true });
  writeFileSync(join(o.outDir, `hfquant-${o.slug}.md`), `${lines.join('\n')}\n`);
  writeFileSync(join(o.outDir, `hfquant-${o.slug}.json`), `${JSON.stringify({ ...o.extra, ceilings, targets, hfquant: runs }, null, 1)}\n`);
  if (runs.some((r) => r.decode.some((d) => Number.isFinite(d.tokensPerSecond)))) writeFileSync(join(o.outDir, `hfquant-${o.slug}-decode.svg`), hfqPlot(runs, o.device));
  if (!o.quiet) console.log(`\n${lines.slice(4).join('\n')}`);
}
