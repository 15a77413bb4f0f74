// Issue 45's benchmark: the mechanism of speculative decoding, since random weights make acceptance
// meaningless. Per model (Llama-3.2-1B's shape in bf16 made on the GPU, and each GGUF file given):
// - the cost of a verification step, a row of k + 1 tokens every position sampled, against a plain step
//   (batch 1, context 1024; Model.profileDecode's verify), wall and GPU;
// - end to end at batch 1, 128 new tokens after a 32-token prompt: plain decoding, then the engine
//   speculating with an oracle's proposals (the plain run's own tokens: acceptance 100%, the ceiling) at
//   k = 2, 4, 8, and at k = 4 with proposals kept at rates 0.5, 0.7 and 0.9 (RequestEngine.specHooks.keep:
//   a right proposal rejected all the same); every run's tokens checked equal to plain decoding's.
// The speed-up against acceptance goes to a plot.
import { createRandomModel, loadGGUF, type Engine, type Model } from 'webinfer';
import { rng } from '../src/core/random';
import { parseSpeculation } from '../src/serve/speculative';
import { lineChart } from './plot';
import { LLAMA_3_2_1B, SMALL_LLAMA } from './model';

export interface SpecBenchOptions {
  quick: boolean;
  /** GGUF files (path, label) benched after the bf16 model. */
  gguf: { path: string; label: string }[];
  /** The bf16 1B model made on the GPU first (default true). */
  bf16?: boolean;
  readFile(path: string): Promise<Uint8Array>;
  log(s: string): void;
}

interface SubjectResult {
  name: string;
  verify: { rows: number; wallMs: number; gpuMs: number | null; wallRatio: number; gpuRatio: number | null }[];
  plain: { tokensPerS: number; wallMs: number };
  runs: { k: number; rate: number; tokensPerS: number; speedup: number; proposed: number; accepted: number; steps: number }[];
}

export interface SpecResults { subjects: SubjectResult[]; markdown: string; svg: string }

const fmt = (x: number | null, d = 2) => (x === null || !Number.isFinite(x) ? '-' : x.toFixed(d));

async function benchSubject(engine: Engine, name: string, model: Model, o: SpecBenchOptions): Promise<SubjectResult> {
  const V = model.config.vocabSize;
  const ctx = o.quick ? 64 : 1024;
  const res: SubjectResult = { name, verify: [], plain: { tokensPerS: 0, wallMs: 0 }, runs: [] };
  // 1. A verification step's cost.
  for (const rows of [1, 2, 4, 6, 8]) {
    const p = await model.profileDecode({ batch: 1, context: ctx, steps: o.quick ? 4 : 20, verify: rows });
    const base = res.verify[0];
    res.verify.push({ rows, wallMs: p.wallMs, gpuMs: p.gpuMs, wallRatio: base ? p.wallMs / base.wallMs : 1, gpuRatio: base && base.gpuMs && p.gpuMs ? p.gpuMs / base.gpuMs : base ? null : 1 });
    o.log(`${name}: a step of ${rows} row${rows > 1 ? 's' : ''} (k = ${rows - 1}): ${fmt(p.wallMs, 3)} ms wall, GPU ${fmt(p.gpuMs, 3)} ms`);
  }
  // 2. End to end at batch 1.
  const r = rng(45);
  const prompt = Array.from({ length: 32 }, () => Math.floor(r() * V));
  const N = o.quick ? 24 : 128;
  const gen = async (spec: boolean) => {
    const t0 = performance.now();
    const [out] = await model.generate([prompt], { maxNewTokens: N, stopTokens: [], speculative: spec });
    return { out, ms: performance.now() - t0 };
  };
  await gen(false);
  const plainRuns = [await gen(false), await gen(false)];
  const plain = plainRuns[0].out;
  const plainMs = Math.min(...plainRuns.map((x) => x.ms));
  res.plain = { tokensPerS: (N * 1000) / plainMs, wallMs: plainMs };
  o.log(`${name}: plain decoding ${fmt(res.plain.tokensPerS, 1)} tokens/s (${N} tokens, ${fmt(plainMs, 1)} ms)`);
  const oracle = (ids: readonly number[], k: number) => {
    const at = ids.length - prompt.length;
    return at >= 0 && at < plain.length ? plain.slice(at, at + k) : [];
  };
  const eng = model.engine;
  const saved = eng.speculation;
  try {
    const cases: { k: number; rate: number }[] = [{ k: 2, rate: 1 }, { k: 4, rate: 1 }, { k: 8, rate: 1 }, { k: 4, rate: 0.5 }, { k: 4, rate: 0.7 }, { k: 4, rate: 0.9 }];
    for (const c of cases) {
      eng.speculation = parseSpeculation('bench', { method: 'ngram', k: c.k, maxBatch: 8 });
      const keep = rng(7 + c.k);
      eng.specHooks = { propose: oracle, ...(c.rate < 1 ? { keep: () => keep() < c.rate } : {}) };
      const times: number[] = [];
      let stats = { proposed: 0, accepted: 0, steps: 0 };
      for (let i = 0; i < 3; i++) {
        const x0 = { ...eng.counters };
        const g = await gen(true);
        if (g.out.join(',') !== plain.join(',')) throw new Error(`${name}: speculation at k ${c.k}, rate ${c.rate} changed the output`);
        times.push(g.ms);
        const x = eng.counters;
        stats = { proposed: x.specProposed - x0.specProposed, accepted: x.specAccepted - x0.specAccepted, steps: x.steps - x0.steps };
      }
      const ms = Math.min(...times.slice(1));
      const tps = (N * 1000) / ms;
      res.runs.push({ k: c.k, rate: c.rate, tokensPerS: tps, speedup: tps / res.plain.tokensPerS, ...stats });
      o.log(`${name}: k ${c.k}, proposals kept at ${c.rate}: ${fmt(tps, 1)} tokens/s (${fmt(tps / res.plain.tokensPerS)}× plain), ${stats.accepted} of ${stats.proposed} accepted in ${stats.steps} steps`);
    }
  } finally {
    eng.specHooks = null;
    eng.speculation = saved;
  }
  return res;
}

export async function runSpeculative(engine: Engine, o: SpecBenchOptions & { device: string; commit: string; cmd: string }): Promise<SpecResults> {
  const subjects: SubjectResult[] = [];
  const config = o.quick ? SMALL_LLAMA : LLAMA_3_2_1B;
  const opts = { kvCache: { numBlocks: o.quick ? 64 : 256, blockSize: 16 }, maxTokensPerStep: 512, maxSeqsPerStep: 16 };
  if (o.bf16 !== false) {
    const m = await createRandomModel(engine, { config, dtype: 'bf16', ...opts });
    try {
      subjects.push(await benchSubject(engine, o.quick ? 'small Llama bf16 (--quick)' : 'Llama-3.2-1B shape, bf16', m, o));
    } finally {
      m.destroy();
    }
  }
  for (const f of o.gguf) {
    const model = await engine.loadModel({ weights: await loadGGUF(await o.readFile(f.path)), ...opts });
    try {
      subjects.push(await benchSubject(engine, f.label, model, o));
    } finally {
      model.destroy();
    }
  }
  const lines = [
    `# Speculative decoding's mechanism on ${o.device}`, '',
    `Measured ${new Date().toISOString().slice(0, 10)} at commit \`${o.commit}\` with \`${o.cmd}\`. Random weights make acceptance meaningless, so the proposals here are an oracle's (the plain run's own tokens: every one right) and a hook rejects right ones at a forced rate (RequestEngine.specHooks); every run's tokens equal plain decoding's (checked). Batch 1, a 32-token prompt, 128 new tokens, best of the last two of three runs; verification steps at context 1024 (Model.profileDecode with verify = k + 1).`, '',
  ];
  for (const s of subjects) {
    lines.push(`## ${s.name}`, '', '| rows (k + 1) | step wall ms | step GPU ms | wall vs plain | GPU vs plain |', '|---|---|---|---|---|');
    for (const v of s.verify) lines.push(`| ${v.rows} | ${fmt(v.wallMs, 3)} | ${fmt(v.gpuMs, 3)} | ${fmt(v.wallRatio)}× | ${fmt(v.gpuRatio)}× |`);
    lines.push('', `Plain decoding: ${fmt(s.plain.tokensPerS, 1)} tokens/s.`, '', '| k | acceptance (forced) | tokens/s | speed-up | accepted / proposed | steps |', '|---|---|---|---|---|---|');
    for (const r of s.runs) lines.push(`| ${r.k} | ${r.rate} | ${fmt(r.tokensPerS, 1)} | ${fmt(r.speedup)}× | ${r.accepted} / ${r.proposed} | ${r.steps} |`);
    const v4 = s.verify.find((v) => v.rows === 4);
    const at7 = s.runs.find((r) => r.k === 4 && r.rate === 0.7);
    lines.push('', `Targets: a verification of 4 rows ≤ 1.3× a plain step: ${fmt(v4?.wallRatio ?? null)}× wall, ${fmt(v4?.gpuRatio ?? null)}× GPU; at acceptance 0.7 and k = 4 ≥ 1.8× plain: ${fmt(at7?.speedup ?? null)}× (the issue names the 8B Q4_K_M shape for it).`, '');
  }
  const svg = lineChart({
    title: 'Speculative decoding: speed-up against acceptance (k = 4, batch 1)', xLabel: 'acceptance rate (forced)', yLabel: 'speed-up over plain decoding',
    series: subjects.map((s, i) => ({
      name: s.name, color: ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e'][i % 4],
      points: s.runs.filter((r) => r.k === 4).map((r) => [r.rate, r.speedup] as [number, number]).sort((a, b) => a[0] - b[0]),
    })),
    ceiling: { value: 1, label: 'plain decoding' },
  });
  return { subjects, markdown: `${lines.join('\n')}\n`, svg };
}
