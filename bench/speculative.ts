// Issue 45's benchmark: the mechanism of speculative decoding, since random weights make acceptance
// meaningless. Per model (Llama-3.2-1B's shape in bf16 made on the GPU, and each GGUF file given):
// - the cost of a verification step, a row of k + 1 tokens every position sampled, against a plain step
//   (batch 1, context 1024; Model.profileDecode's verify), wall and GPU;
// - end to end at batch 1, 128 new tokens after a 32-token prompt: plain decoding, then the engine
//   speculating with an oracle's proposals (the plain run's own tokens: acceptance 100%, the ceiling) at
//   k = 2, 4, 8, and at k = 4 with proposals kept at rates 0.5, 0.7 and 0.9 (RequestEngine.specHooks.keep:
//   a right proposal rejected all the same); every run's tokens checked equal to plain decoding's.
// - with a draft model (--spec-draft=TARGET:DRAFT:LABEL, GGUF files): plain decoding of each alone; the
//   draft's own proposals at k = 2, 4, 8 (the same file as its own draft: every proposal right; a smaller
//   model of random weights: hardly any); then the draft running and its proposals replaced by the
//   oracle's at k = 4 kept at rates 1, 0.9, 0.7 and 0.5: the draft's cost in every token.
// The speed-up against acceptance goes to a plot.
import { createRandomModel, loadGGUF, type Engine, type Model } from 'webinfer';
import { rng } from '../src/core/random';
import { parseSpeculation } from '../src/serve/speculative';
import { withTuning } from './harness';
import { lineChart } from './plot';
import { LLAMA_3_2_1B, SMALL_LLAMA } from './model';

export interface SpecBenchOptions {
  quick: boolean;
  /** GGUF files (path, label) benched after the bf16 model. */
  gguf: { path: string; label: string }[];
  /** The bf16 1B model made on the GPU first (default true). */
  bf16?: boolean;
  /** Draft-model setups: a target and a draft GGUF file. */
  drafts?: { target: string; draft: string; label: string }[];
  /** engine.tuning fields the verification steps are timed under a second time (--model-ab). */
  ab?: Partial<Engine['tuning']> | null;
  /** Which end-to-end runs (default all): k and forced acceptance, 'k:rate' (--spec-cases). */
  cases?: { k: number; rate: number }[];
  log(s: string): void;
}

export interface SubjectResult {
  name: string;
  verify: { rows: number; wallMs: number; gpuMs: number | null; wallRatio: number; gpuRatio: number | null; ab?: { wallMs: number; gpuMs: number | null }; kernels?: Record<string, number> }[];
  plain: { tokensPerS: number; wallMs: number };
  runs: { k: number; rate: number; tokensPerS: number; speedup: number; proposed: number; accepted: number; steps: number; draft?: 'own' | 'oracle'; draftMsPerProposal?: number; policy?: boolean;
    /** Runs of the three whose tokens differed from plain decoding's (an exactness failure). */
    changed: number }[];
  /** A draft setup's draft alone, plain decoding. */
  draftPlain?: { tokensPerS: number };
}

export interface SpecResults { subjects: SubjectResult[]; markdown: string; svg: string }

const fmt = (x: number | null, d = 2) => (x === null || !Number.isFinite(x) ? '-' : x.toFixed(d));

async function benchSubject(engine: Engine, name: string, model: Model, o: SpecBenchOptions): Promise<SubjectResult> {
  const ctx = o.quick ? 64 : 1024;
  const res: SubjectResult = { name, verify: [], plain: { tokensPerS: 0, wallMs: 0 }, runs: [] };
  // 1. A verification step's cost.
  for (const rows of [1, 2, 4, 6, 8]) {
    const p = await model.profileDecode({ batch: 1, context: ctx, steps: o.quick ? 4 : 20, verify: rows, perKernel: true });
    const base = res.verify[0];
    res.verify.push({ rows, wallMs: p.wallMs, gpuMs: p.gpuMs, wallRatio: base ? p.wallMs / base.wallMs : 1, gpuRatio: base && base.gpuMs && p.gpuMs ? p.gpuMs / base.gpuMs : base ? null : 1, kernels: p.kernels });
    o.log(`${name}: a step of ${rows} row${rows > 1 ? 's' : ''} (k = ${rows - 1}): ${fmt(p.wallMs, 3)} ms wall, GPU ${fmt(p.gpuMs, 3)} ms, host ${fmt(p.hostMs, 3)} ms, ${p.dispatches} dispatches (${fmt(p.replayed * 100, 0)}% replayed)`);
    if (p.kernels) o.log(`  its kernels (timed one by one): ${kernelLine(p.kernels)}`);
    if (o.ab && rows > 1) {
      const q = await withTuning(engine, o.ab, () => model.profileDecode({ batch: 1, context: ctx, steps: o.quick ? 4 : 20, verify: rows }));
      res.verify[res.verify.length - 1].ab = { wallMs: q.wallMs, gpuMs: q.gpuMs };
      o.log(`${name}: the same under ${JSON.stringify(o.ab)}: ${fmt(q.wallMs, 3)} ms wall, GPU ${fmt(q.gpuMs, 3)} ms`);
    }
  }
  // 2. End to end at batch 1.
  const N = o.quick ? 24 : 128;
  const d = decoder(model, N);
  const { plain, ms: plainMs } = await d.plain();
  res.plain = { tokensPerS: (N * 1000) / plainMs, wallMs: plainMs };
  o.log(`${name}: plain decoding ${fmt(res.plain.tokensPerS, 1)} tokens/s (${N} tokens, ${fmt(plainMs, 1)} ms)`);
  const oracle = oracleOf(d.prompt, plain);
  const eng = model.engine;
  const saved = eng.speculation;
  try {
    // Fixed k (the mechanism: every step k proposals, whatever the costs), then the policy (k up to 8
    // chosen by the steps' measured costs and the acceptance estimate, or plain decoding where it wins).
    const fixed = o.cases ?? [{ k: 2, rate: 1 }, { k: 4, rate: 1 }, { k: 8, rate: 1 }, { k: 4, rate: 0.5 }, { k: 4, rate: 0.7 }, { k: 4, rate: 0.9 }];
    const cases = [...fixed.map((c) => ({ ...c, policy: false })), ...(o.cases ? [] : [0.5, 0.7, 0.9, 1].map((rate) => ({ k: 8, rate, policy: true })))];
    for (const c of cases) {
      eng.speculation = parseSpeculation('bench', { method: 'ngram', k: c.k, maxBatch: 8 });
      eng.specHooks = { propose: oracle, ...keepAt(c.rate, c.k), ignoreCosts: !c.policy };
      const what = `${c.policy ? `the policy (k ≤ ${c.k})` : `k ${c.k}`}, proposals kept at ${c.rate}`;
      const { tps, draftMs: _, ...stats } = await timeSpeculating(d, plain, `${name}: ${what}`, o.log);
      res.runs.push({ k: c.k, rate: c.rate, tokensPerS: tps, speedup: tps / res.plain.tokensPerS, ...stats, policy: c.policy });
      o.log(`${name}: ${what}: ${fmt(tps, 1)} tokens/s (${fmt(tps / res.plain.tokensPerS)}× plain), ${stats.accepted} of ${stats.proposed} accepted in ${stats.steps} steps`);
    }
  } finally {
    eng.specHooks = null;
    eng.speculation = saved;
  }
  return res;
}

/** GPU ms per kernel, the largest first. */
function kernelLine(k: Record<string, number>): string {
  return Object.entries(k).sort((a, b) => b[1] - a[1]).map(([n, ms]) => `${n} ${ms.toFixed(3)}`).join(', ');
}

/** Batch-1 decoding of N tokens after a seeded 32-token prompt: `gen` one run; `plain` the plain run's
 *  tokens and its best time of two after a warm-up. */
function decoder(model: Model, N: number) {
  const V = model.config.vocabSize;
  const r = rng(45);
  const prompt = Array.from({ length: 32 }, () => Math.floor(r() * V));
  const gen = async (spec: boolean) => {
    const t0 = performance.now();
    const [out] = await model.generate([prompt], { maxNewTokens: N, stopTokens: [], speculative: spec });
    return { out, ms: performance.now() - t0 };
  };
  const plain = async () => {
    await gen(false);
    const runs = [await gen(false), await gen(false)];
    return { plain: runs[0].out, ms: Math.min(...runs.map((x) => x.ms)) };
  };
  return { model, N, prompt, gen, plain };
}

/** Proposals that are the plain run's own tokens (every one right). */
function oracleOf(prompt: readonly number[], plain: readonly number[]) {
  return (ids: readonly number[], k: number) => {
    const at = ids.length - prompt.length;
    return at >= 0 && at < plain.length ? plain.slice(at, at + k) : [];
  };
}

/** SpecHooks.keep rejecting right proposals at a forced rate (none below 1), from its own seeded stream. */
function keepAt(rate: number, k: number): { keep?: () => boolean } {
  if (rate >= 1) return {};
  const keep = rng(7 + k);
  return { keep: () => keep() < rate };
}

/** Three speculating runs, each checked equal to plain decoding: tokens/s (best of the last two) and the
 *  last run's counters. */
async function timeSpeculating(d: ReturnType<typeof decoder>, plain: readonly number[], what: string, log: (s: string) => void) {
  const eng = d.model.engine;
  const times: number[] = [];
  let stats = { proposed: 0, accepted: 0, steps: 0, draftMs: 0 };
  let host = '';
  let changed = 0;
  for (let i = 0; i < 3; i++) {
    const x0 = { ...eng.counters };
    const g = await d.gen(true);
    // A changed output is an exactness failure (SPEC §9): said loudly and kept in the results, the other
    // runs measured all the same.
    if (g.out.join(',') !== plain.join(',')) {
      const at = g.out.findIndex((t, j) => t !== plain[j]);
      log(`  EXACTNESS FAILURE: ${what} changed the output at token ${at} (${g.out[at]} against ${plain[at]})`);
      changed++;
    }
    times.push(g.ms);
    const x = eng.counters;
    stats = { proposed: x.specProposed - x0.specProposed, accepted: x.specAccepted - x0.specAccepted, steps: x.steps - x0.steps, draftMs: x.draftMs - x0.draftMs };
    // Where a step's wall time went (the last run): recording, waiting for ids, scheduling, handing out.
    const per = (k: 'recordMs' | 'waitMs' | 'scheduleMs' | 'applyMs') => fmt((x[k] - x0[k]) / stats.steps, 3);
    host = `a step ${fmt(g.ms / stats.steps, 3)} ms wall: record ${per('recordMs')}, wait ${per('waitMs')}, schedule ${per('scheduleMs')}, apply ${per('applyMs')}; ${x.replayed - x0.replayed} replayed, ${x.recorded - x0.recorded} recorded`;
  }
  log(`  ${what}: ${host}`);
  return { tps: (d.N * 1000) / Math.min(...times.slice(1)), ...stats, changed };
}

async function benchDraft(target: Model, draft: Model, label: string, o: SpecBenchOptions): Promise<SubjectResult> {
  const N = o.quick ? 24 : 128;
  const res: SubjectResult = { name: label, verify: [], plain: { tokensPerS: 0, wallMs: 0 }, runs: [] };
  const t = decoder(target, N);
  const { plain, ms: plainMs } = await t.plain();
  res.plain = { tokensPerS: (N * 1000) / plainMs, wallMs: plainMs };
  res.draftPlain = { tokensPerS: (N * 1000) / (await decoder(draft, N).plain()).ms };
  o.log(`${label}: plain decoding ${fmt(res.plain.tokensPerS, 1)} tokens/s; the draft alone ${fmt(res.draftPlain.tokensPerS, 1)} tokens/s`);
  const oracle = oracleOf(t.prompt, plain);
  const eng = target.engine;
  const saved = eng.speculation;
  try {
    const cases: { k: number; rate: number; draft: 'own' | 'oracle' }[] = [
      { k: 2, rate: 1, draft: 'own' }, { k: 4, rate: 1, draft: 'own' }, { k: 8, rate: 1, draft: 'own' },
      { k: 4, rate: 1, draft: 'oracle' }, { k: 4, rate: 0.9, draft: 'oracle' }, { k: 4, rate: 0.7, draft: 'oracle' }, { k: 4, rate: 0.5, draft: 'oracle' },
    ];
    for (const c of cases) {
      eng.speculation = parseSpeculation('bench', { method: 'draft', draft, k: c.k, maxBatch: 8 });
      eng.specHooks = c.draft === 'own' ? { ignoreCosts: true } : { propose: oracle, ...keepAt(c.rate, c.k), ignoreCosts: true };
      const { tps, draftMs, ...counts } = await timeSpeculating(t, plain, `${label}: the draft at k ${c.k} (${c.draft}, rate ${c.rate})`, o.log);
      // The oracle runs measure the mechanism at a forced acceptance; the draft's own proposals say
      // what these random weights accept (none, unless the draft is the target's file).
      const rate = c.draft === 'own' ? (counts.proposed ? counts.accepted / counts.proposed : 0) : c.rate;
      const perProposal = counts.proposed ? draftMs / counts.proposed : 0;
      res.runs.push({ k: c.k, rate, tokensPerS: tps, speedup: tps / res.plain.tokensPerS, ...counts, draft: c.draft, draftMsPerProposal: perProposal });
      o.log(`${label}: k ${c.k}, ${c.draft === 'own' ? "the draft's own proposals" : `the oracle's, kept at ${c.rate}`}: ${fmt(tps, 1)} tokens/s (${fmt(tps / res.plain.tokensPerS)}× plain), ${counts.accepted} of ${counts.proposed} accepted in ${counts.steps} steps, the draft ${fmt(perProposal, 3)} ms a proposal`);
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
    const model = await engine.loadModel({ weights: await loadGGUF(f.path), ...opts });
    try {
      subjects.push(await benchSubject(engine, f.label, model, o));
    } finally {
      model.destroy();
    }
  }
  for (const f of o.drafts ?? []) {
    const draft = await engine.loadModel({ weights: await loadGGUF(f.draft), ...opts });
    try {
      const target = await engine.loadModel({ weights: await loadGGUF(f.target), ...opts });
      try {
        subjects.push(await benchDraft(target, draft, f.label, o));
      } finally {
        target.destroy();
      }
    } finally {
      draft.destroy();
    }
  }
  return { subjects, ...renderSpec(subjects, o) };
}

/** The results' Markdown and plot from measured subjects (also --spec-render: from a results JSON). */
export function renderSpec(subjects: SubjectResult[], o: { device: string; commit: string; cmd: string; ab?: Partial<Engine['tuning']> | null }): { markdown: string; svg: string } {
  const lines = [
    `# Speculative decoding's mechanism on ${o.device}`, '',
    `Measured ${new Date().toISOString().slice(0, 10)} at commit \`${o.commit}\` with \`${o.cmd}\`. Random weights make acceptance meaningless, so the proposals here are an oracle's (the plain run's own tokens: every one right) and a hook rejects right ones at a forced rate (RequestEngine.specHooks); each run's tokens are compared with plain decoding's (the output column: a difference is an exactness failure). Batch 1, a 32-token prompt, 128 new tokens, best of the last two of three runs; verification steps at context 1024 (Model.profileDecode with verify = k + 1).`, '',
  ];
  for (const s of subjects) {
    if (s.draftPlain) {
      lines.push(`## ${s.name}`, '', `Plain decoding: ${fmt(s.plain.tokensPerS, 1)} tokens/s; the draft alone ${fmt(s.draftPlain.tokensPerS, 1)} tokens/s. Every run below has the draft model make its proposals (its steps, its cache, its time in the wall time); "oracle" runs then replace them with the plain run's own tokens, kept at the forced rate.`, '',
        '| k | proposals | acceptance | tokens/s | speed-up | accepted / proposed | steps | draft ms a proposal | output |', '|---|---|---|---|---|---|---|---|---|');
      for (const r of s.runs) lines.push(`| ${r.k} | ${r.draft === 'own' ? "the draft's" : 'oracle (forced)'} | ${fmt(r.rate)} | ${fmt(r.tokensPerS, 1)} | ${fmt(r.speedup)}× | ${r.accepted} / ${r.proposed} | ${r.steps} | ${fmt(r.draftMsPerProposal ?? null, 3)} | ${r.changed ? `**changed in ${r.changed} of 3 runs**` : 'plain decoding\'s'} |`);
      lines.push('');
      continue;
    }
    const ab = o.ab ? ` under ${JSON.stringify(o.ab)}` : '';
    lines.push(`## ${s.name}`, '', `| rows (k + 1) | step wall ms | step GPU ms | wall vs plain | GPU vs plain |${ab ? ` wall ms${ab} | GPU ms${ab} |` : ''}`, `|---|---|---|---|---|${ab ? '---|---|' : ''}`);
    for (const v of s.verify) lines.push(`| ${v.rows} | ${fmt(v.wallMs, 3)} | ${fmt(v.gpuMs, 3)} | ${fmt(v.wallRatio)}× | ${fmt(v.gpuRatio)}× |${ab ? ` ${fmt(v.ab?.wallMs ?? null, 3)} | ${fmt(v.ab?.gpuMs ?? null, 3)} |` : ''}`);
    // Where the GPU time of a plain step and of a verification of 4 rows goes.
    const one = s.verify.find((v) => v.rows === 1)?.kernels, four = s.verify.find((v) => v.rows === 4)?.kernels;
    if (one && four) {
      const names = [...new Set([...Object.keys(one), ...Object.keys(four)])].sort((a, b) => (four[b] ?? 0) - (four[a] ?? 0));
      lines.push('', 'Where a step\'s GPU time goes (ms, dispatches timed one by one, so a little more than the step):', '', '| kernel | 1 row | 4 rows |', '|---|---|---|');
      for (const n of names) lines.push(`| ${n} | ${fmt(one[n] ?? null, 3)} | ${fmt(four[n] ?? null, 3)} |`);
    }
    lines.push('', `Plain decoding: ${fmt(s.plain.tokensPerS, 1)} tokens/s. "k" a number: that many proposals every step (the mechanism); "≤ 8, policy": as many as the policy chooses by the steps' measured costs and the acceptance it has seen, none where plain decoding wins (serve/speculative.ts).`, '',
      '| k | acceptance (forced) | tokens/s | speed-up | accepted / proposed | steps | output |', '|---|---|---|---|---|---|---|');
    for (const r of s.runs) lines.push(`| ${r.policy ? `≤ ${r.k}, policy` : r.k} | ${r.rate} | ${fmt(r.tokensPerS, 1)} | ${fmt(r.speedup)}× | ${r.accepted} / ${r.proposed} | ${r.steps} | ${r.changed ? `**changed in ${r.changed} of 3 runs**` : 'plain decoding\'s'} |`);
    const v4 = s.verify.find((v) => v.rows === 4);
    const at7 = s.runs.find((r) => r.k === 4 && r.rate === 0.7 && !r.policy);
    lines.push('', `Targets: a verification of 4 rows ≤ 1.3× a plain step: ${fmt(v4?.wallRatio ?? null)}× wall, ${fmt(v4?.gpuRatio ?? null)}× GPU; at acceptance 0.7 and k = 4 ≥ 1.8× plain: ${fmt(at7?.speedup ?? null)}× (the issue names the 8B Q4_K_M shape for it).`, '');
  }
  const svg = lineChart({
    title: 'Speculative decoding: speed-up against acceptance (batch 1)', xLabel: 'acceptance rate (forced)', yLabel: 'speed-up over plain decoding',
    series: subjects.flatMap((s, i) => {
      const color = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e'][i % 4];
      const pts = (f: (r: SubjectResult['runs'][number]) => boolean) => s.runs.filter(f).map((r) => [r.rate, r.speedup] as [number, number]).sort((a, b) => a[0] - b[0]);
      const fixed = { name: `${s.name}${s.draftPlain ? ' (draft running, oracle proposals)' : ''}, k = 4`, color, points: pts((r) => r.k === 4 && r.draft !== 'own' && !r.policy) };
      const policy = { name: `${s.name}, the policy (k ≤ 8)`, color, dashed: true, points: pts((r) => !!r.policy) };
      return policy.points.length ? [fixed, policy] : [fixed];
    }),
    ceiling: { value: 1, label: 'plain decoding' },
  });
  return { markdown: `${lines.join('\n')}\n`, svg };
}
