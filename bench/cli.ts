// `npm run bench`: the benchmark CLI (Node, through the `webgpu` package). Measures the ceilings
// through WebGPU, runs the suites with progress, prints a table and writes JSON and Markdown results
// and SVG plots, named after the device.
//   --suite=sdpa,paged,mla,gemm,step,model,deepseek which suites (comma-separated; default: all); step: what a caller
//                         pays per run and per 32-layer decode step (plan/run) against the GPU time;
//                         model: a Llama-3.2-1B-shaped model with random bf16 weights, decode and prefill;
//                         deepseek: the same for DeepSeek-V2-Lite's shape, f16 and fp8_ds_mla latent caches
//                         gemm: the prefill GEMM, FMA vs subgroup matrices, at Llama-3-8B's shapes (--gemm-m=512,2048,4096 rows;
//                         --gemm-tile=I holds the matrix GEMM to gemm.ts LINEAR_MMA_TILES[I]; --explore-gemm[=M,N,K] first times every tile;
//                         then ops.moe at DeepSeek-V2-Lite's experts, --moe-rows=512,2048 tokens)
//                         gemv: decode-sized linear layers (--gemv-m=1,4,8,16,32,64 rows) at Llama-3.2-1B's shapes, the GEMV
//                         against the subgroup-matrix GEMM over one row tile, and planLinear's pick (--explore-gemv: every decode tile)
//                         qgemv: the quantized GEMV at the same shapes and the lm_head, --qgemv-types=Q4_0,Q8_0,Q4_K,Q6_K beside bf16,
//                         --qgemv-m=1 rows, --explore-qgemv: every lanes-per-row KT and rows-per-group R
//   --model-ab=key=value|...  model, deepseek and gguf suites: run again with these engine.tuning fields (an A/B in one call)
//   --heads=16,128 --mla-batches=1,8,32 --mla-context=4096   the MLA decode grid
//   --batches=1,16,64 --contexts=1024,4096,32768   the paged decode grid
//   --lengths=1024,2048   sequence lengths of the SDPA suite (default 1024,2048,4096,8192)
//   --quick               small sizes, for software adapters
//   --out=DIR             where results go (default bench/results)
//   --device=NAME         the GPU's name for the results (WebGPU does not report the model)
//   --explore[=L]         also time flash under every variant and storage budget at length L
//   --explore-paged       also time the decode kernels under several configurations (--explore-configs=variant:KT:UK:target:prefetch:probe:HS:WG:shape[|tuning=value...];...;
//                         variant 'flash': decode through the flash tile, the subgroup-matrix one for f16 where the adapter has it)
//   --explore-mma=U:P:S:C:T:F;...  first time the subgroup-matrix flash tile (D --mma-heads (64,128), --mma-lengths) unrolled or not (U), with a probe (P),
//                         a shape (S: flash.ts MMA_SHAPES), a configuration (C: mmaConfigs), data type (T: f16, or f32 on the split tile)
//                         and the split tile's flush interval (F: tuning.flashMmaFlush)
//   --paged-prefill=L,..  with the paged suite: paged prefill of one L-token sequence (default 4096; --quick 256)
//   --subgroup-matrix=off without Dawn's allow_unsafe_apis toggle: no subgroup matrices (default on)
//   --explore-mla[=C,..]  first time MLA decode under each attention tile (mla: its own; -1: flash; 0-3: flash ROW_GRIDS;
//                         mmaS.C.P: the subgroup-matrix tile, plan.ts MLA_MMA_SHAPES[S], mmaConfigs[C], probe P, each part optional),
//                         at --explore-mla-heads (default 16) × --mla-batches, then run the fastest
//   --peer=ort|none       the peer measured beside webinfer on the same shapes (default ort: ONNX Runtime
//                         Web's WebGPU provider; MultiHeadAttention for sdpa; GroupQueryAttention (dense
//                         cache) and PagedAttention (paged cache, f16 only) for paged)
//   --rounds=N            sdpa and paged: each shape timed in N rounds (default 3; --quick 2), each round
//                         webinfer, its portable variant, then the peer, each after a warm-up; the median
//                         covers every round, the spread is (max − min of the rounds' medians) / median
//   --portable[=on|off]   also time the portable kernels (no subgroups: flashVariant and pagedDecodeVariant
//                         'portable') in the same rounds (default: on where the adapter has subgroups)
//   --together-gib=8      paged: the peer runs in the same rounds as webinfer where all the caches together take
//                         at most this many GiB; above, after webinfer's cache is freed (interleaved: false)
//   --llamacpp=LIBDIR:GGUF[:LABEL]  after the model suite, llama.cpp on the same shapes in the same call: its C API
//                         through ../shared/peers/llamacpp/bench_ctypes.py (--llamacpp-script=PATH; python3) on a GGUF
//                         of the same shape (make_gguf.py); its rows go to the results file and a table beside webinfer's
//   --llamacpp-deepseek=LIBDIR:GGUF[:LABEL]  the same after the deepseek suite, on a deepseek2 GGUF (make_gguf.py dsv2-lite)
//   --suite=gguf --gguf=FILE[:LABEL],...  whole models loaded from GGUF files (quantized weights kept in their blocks),
//                         the model suite's grid on each; --gguf-llamacpp=LIBDIR runs llama.cpp on each same file after it
//   --suite=hfquant       issue 30: whole models from the Hub's quantized safetensors formats, loaded through loadCheckpoint
//                         and loadModel (bench/hfquant.ts): --hfquant-make=FORMAT:SHAPE,... writes random checkpoints first
//                         (bench/hfquant_write.ts; FORMAT mlx, awq, gptq, fp8; SHAPE llama-1b, llama-8b, dsv2-lite, tiny-llama,
//                         tiny-ds) into --hfquant-dir (default /tmp/hfquant); --hfquant=DIR[:LABEL],... folders already there;
//                         beside them --hfquant-gguf=FILE:SHAPE,... (Q4_K_M GGUF files) and --hfquant-random=SHAPE,... (bf16
//                         made on the GPU; --hfquant-wait=S waits S s for a GGUF file still being made; --hfquant-from=JSON,...
//                         keeps earlier calls' runs in the results written); the model suite's grid
//                         on each, the issue's targets checked (hfquant-<device>.md/.json, rewritten after each model)
//   --suite=spec          issue 45 (bench/speculative.ts): speculative decoding's verification step against a plain one,
//                         and batch-1 decoding with an oracle's proposals at forced acceptance rates; --spec-gguf=FILE[:LABEL],...
//                         (--spec-no-bf16: the GGUF files only; --spec-tag=T: spec-T-<device>.md);
//                         --spec-draft=TARGET:DRAFT[:LABEL],...: draft-model setups of two GGUF files;
//                         --spec-cases=k:rate,...: the end-to-end runs (default 2:1,4:1,8:1,4:0.5,4:0.7,4:0.9);
//                         --spec-render=RESULTS.json: its Markdown and plot again from a results file (no GPU)
//   --suite=vision        issue 44 (bench/vision.ts): time to first token with an image and the vision tower's share,
//                         --vision=TEXT.gguf:MMPROJ.gguf[:LABEL],... (llama.cpp's pairs: make_gguf.mjs --shape=gemma3-4b, gemma3-4b-mmproj)
//   --suite=layers        issue 31 (bench/layers.ts): BERT-base's shape (encode, 128-token inputs, batch 1 and 32: sentences/s,
//                         share of the FMA / matrix ceilings), Whisper-small's (RTF on 30 s clips at batch 1 and 8, a fixed
//                         number of tokens; its decoder step beside a Llama of the same size) and gpt-oss-20b's at batch 1
//                         (MXFP4 and bf16 experts: tokens/s, read-roofline share); random weights (safetensors written in memory
//                         for BERT and Whisper); --layers-parts=bert,whisper,t5,gptoss --layers-gptoss=mxfp4,bf16 --commit=SHA
//                         (named in the results) --layers-quick tiny shapes; layers-<device>.md/.json, rewritten after each part
//   --compare=FILE        say how much this run differs from an earlier results file, shape by shape
//   --f16-toggle=on|off   create the adapter with Dawn's vulkan_enable_f16_on_nvidia (default on: Dawn
//                         otherwise hides shader-f16 on NVIDIA; harmless elsewhere)
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createEngine, dawnNodeFlags, loadGGUF, ops, type QuantType } from 'webinfer';
import { measureCeilings, withTuning } from './harness';
import { benchSdpaShape, mpsSdpaShapes, sdpaJson, type SdpaBenchRow } from './sdpa';
import { benchPagedDecode, benchPagedPrefill, llamaDecodeShapes, pagedJson, TOGETHER_MAX_BYTES, type PagedBenchRow, type PagedPrefillRow } from './paged';
import { benchMlaDecode, deepseekDecodeShapes, mlaJson, type MlaBenchRow } from './mla';
import { benchGemmShape, benchQuantGemv, decodeContenders, gemmJson, gemmLines, llamaDecodeLinearShapes, llamaGemmShapes, planLabel, type GemmBenchRow, type GemmContenderResult } from './gemm';
import { benchMoeShape, deepseekMoeShapes, moeLines, type MoeBenchRow } from './moe';
import { benchMlaStep, benchStep, type MlaStepRow, type StepBenchRow } from './step';
import { benchModel, DEEPSEEK_V2_LITE, SMALL_DEEPSEEK, SMALL_LLAMA, type ModelBench } from './model';
import { plotResults, type ResultsFile } from './plot';
import { hfqEntries, runHfQuant, writeHfQuantResults, type HfqRun } from './hfquant';
import { runLayers } from './layers';
import { renderSpec, runSpeculative, type SubjectResult } from './speculative';
import { runVision } from './vision';
import { OrtPeer } from './ort';
import { compareRuns, type RunLike } from './compare';
import { planFlash } from '../src/attention/flash';
import { decodeMmaFor } from '../src/attention/plan';

// In Deno (wgpu: no subgroups, shader-f16) WebGPU is built in: `deno run -A .cache/device/bench.mjs
// --peer=none` (../shared/device/prepare.sh deno on the GPU machine); in Node it comes from dawn.node.
const deno = (globalThis as { Deno?: { version: { deno: string } } }).Deno;

const args = new Map(process.argv.slice(2).map((a) => {
  const i = a.indexOf('='), k = (i < 0 ? a : a.slice(0, i)).replace(/^--/, ''), v = i < 0 ? undefined : a.slice(i + 1);
  return [k, v ?? 'true'] as [string, string];
}));
const quick = args.has('quick');
const outDir = args.get('out') ?? 'bench/results';
const suites = (args.get('suite') ?? 'sdpa,paged,mla,gemm,step,model,deepseek').split(',');
const lengths = (args.get('lengths') ?? (quick ? '128,256' : '1024,2048,4096,8192')).split(',').map(Number);

/** --model-ab=key=value|...: engine.tuning fields (booleans and numbers parsed). */
function tuningAb(v: string | undefined): Record<string, unknown> | null {
  return v ? Object.fromEntries(v.split('|').map((kv) => {
    const [k, x] = kv.split('=');
    return [k, x === 'true' ? true : x === 'false' ? false : Number.isFinite(Number(x)) && x !== '' ? Number(x) : x];
  })) : null;
}

// --spec-render=RESULTS.json: the spec suite's Markdown and plot again from a results file (no GPU), with
// the --commit, --device, --spec-tag and --model-ab of the run that wrote it.
if (args.has('spec-render')) {
  const file = args.get('spec-render')!;
  const j = JSON.parse(readFileSync(file, 'utf8')) as { speculative?: SubjectResult[]; device?: string };
  if (!Array.isArray(j.speculative)) throw new Error(`--spec-render: expected a results JSON with a 'speculative' list, got none in ${file}`);
  const ab = tuningAb(args.get('model-ab'));
  const device = args.get('device') ?? j.device ?? 'unknown';
  const r = renderSpec(j.speculative, { device, commit: args.get('commit') ?? 'unknown', cmd: args.get('spec-cmd') ?? `npm run bench -- --suite=spec (rendered from ${file.split('/').pop()})`, ab });
  const tag = args.get('spec-tag') ? `-${args.get('spec-tag')}` : '';
  const slug = device.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-|-$/g, '');
  mkdirSync(outDir, { recursive: true });
  writeFileSync(join(outDir, `spec${tag}-${slug}.md`), r.markdown);
  writeFileSync(join(outDir, `spec${tag}-${slug}.svg`), r.svg);
  console.log(`wrote ${join(outDir, `spec${tag}-${slug}.md`)} and .svg`);
  process.exit(0);
}

// Dawn rounds timestamps to 100 µs unless told otherwise; these are our own measurements. Dawn hides
// shader-f16 on NVIDIA's Vulkan driver unless the adapter is made with vulkan_enable_f16_on_nvidia
// (../shared/RUNTIMES.md); elsewhere the toggle does nothing. The peer (bench/ort.ts) makes its device
// from this same GPU object, and dawn.node hands every adapter and device made from it these toggles.
const f16Toggle = args.get('f16-toggle') ?? 'on';
if (!['on', 'off', 'true'].includes(f16Toggle)) throw new Error(`--f16-toggle: expected on or off, got ${f16Toggle}`);
// allow_unsafe_apis: Dawn offers its experimental subgroup matrices (chromium-experimental-subgroup-matrix)
// only then; --subgroup-matrix=off measures without them (flash then runs its scalar tiles).
const sgmArg = args.get('subgroup-matrix') ?? 'on';
if (!['on', 'off', 'true'].includes(sgmArg)) throw new Error(`--subgroup-matrix: expected on or off, got ${sgmArg}`);
const dawnToggles = deno ? [] : dawnNodeFlags({ subgroupMatrix: sgmArg !== 'off', f16: f16Toggle !== 'off', exactTimestamps: true });
let gpu: GPU;
if (deno) {
  if ((args.get('peer') ?? 'ort') !== 'none') throw new Error('--peer: ONNX Runtime Web runs here in Node only (dawn.node); pass --peer=none in Deno');
  gpu = navigator.gpu;
} else {
  const webgpu = await import('webgpu');
  Object.assign(globalThis, webgpu.globals);
  gpu = webgpu.create(dawnToggles);
}
const engine = await createEngine({ gpu, powerPreference: 'high-performance' });
const a = engine.adapter;
// WebGPU does not name the GPU model (adapter info gives vendor, architecture and a driver string);
// --device="NVIDIA H200" names it for the results.
const deviceName = args.get('device') ?? ([a.description, a.vendor, a.architecture].filter(Boolean).join(' / ') || 'unknown adapter');
const slug = (args.get('device') ?? (a.description || `${a.vendor}-${a.architecture}`)).toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-|-$/g, '') || 'unknown';
console.log(`device: ${deviceName} (Dawn toggles: ${dawnToggles.join(' ') || 'none'})`);
console.log(`features: f16 ${engine.features.f16}, subgroups ${engine.features.subgroups} (${engine.features.subgroupMinSize ?? '?'}-${engine.features.subgroupMaxSize ?? '?'}), timestamps ${engine.features.timestampQuery}, `
  + `subgroup matrices ${engine.features.subgroupMatrix.map((c) => `${c.componentType}→${c.resultComponentType} ${c.M}×${c.N}×${c.K}`).join(', ') || 'none'}`);
console.log(`limits: workgroup storage ${engine.limits.maxComputeWorkgroupStorageSize} B`);

const t0 = Date.now();
const ceilings = await measureCeilings(engine, quick ? 1 / 64 : 1);
console.log(`ceilings (WebGPU): f32 FMA ${ceilings.fmaTflops.toFixed(2)} TFLOP/s, copy ${ceilings.copyGBs.toFixed(0)} GB/s (read+write), read ${ceilings.readGBs.toFixed(0)} GB/s`
  + (ceilings.mmaTflops ? `, subgroup matrix (f16 → f32 ${ceilings.mmaConfig}) ${ceilings.mmaTflops.toFixed(1)} TFLOP/s` : ', no subgroup matrices'));

/** The command that ran this benchmark, for the results' text. */
const benchCmd = deno ? 'deno run -A .cache/device/bench.mjs' : 'npm run bench --';
const fmt = (x: number, d = 2) => (Number.isFinite(x) ? x.toFixed(d) : '-');
const result: Record<string, unknown> = {
  device: deviceName, adapter: a, features: engine.features, limits: engine.limits, dawnToggles,
  date: new Date().toISOString(), runtime: deno ? `deno ${deno.version.deno} (wgpu)` : `node ${process.version} + webgpu (dawn.node)`, ceilings,
};

// Rounds and the portable path (sdpa and paged suites).
const rounds = Number(args.get('rounds') ?? (quick ? 2 : 3));
if (!Number.isInteger(rounds) || rounds < 1) throw new Error(`--rounds: expected a whole number ≥ 1, got ${args.get('rounds')}`);
const portableArg = args.get('portable');
if (portableArg !== undefined && !['on', 'off', 'true', 'false'].includes(portableArg)) throw new Error(`--portable: expected on or off, got ${portableArg}`);
// The issue's target is the portable path within 2x of the subgroup path: measured where there is a subgroup path.
const portable = portableArg === undefined ? engine.features.subgroups : portableArg === 'on' || portableArg === 'true';
const sdpaSamples = quick ? 3 : 7, pagedSamples = quick ? 3 : 7;
// Paged decode: the peer in the same rounds where both caches together take at most this much.
const togetherMaxBytes = Number(args.get('together-gib') ?? TOGETHER_MAX_BYTES / 2 ** 30) * 2 ** 30;
if (!(togetherMaxBytes >= 0)) throw new Error(`--together-gib: expected a number, got ${args.get('together-gib')}`);
result.rounds = rounds;
result.portable = portable;
if (portable && !engine.features.subgroups) console.log('portable: this adapter has no subgroups, so the default path is already the portable one (the ratio is ~1 by construction)');

const peerName = args.get('peer') ?? 'ort';
if (peerName !== 'ort' && peerName !== 'none') throw new Error(`--peer: expected ort or none, got ${peerName}`);
let peer: OrtPeer | null = null;
let peerError: string | undefined;
const speedup = (peerMs: number | undefined, ms: number | undefined) => fmt((peerMs ?? NaN) / (ms ?? NaN), 2);

/** A timing's spread over its rounds (max − min of the rounds' medians, over the median), as text. */
const spread = (t?: { spreadPct?: number } | null) => (t?.spreadPct === undefined ? '-' : `${fmt(t.spreadPct, 1)}%`);
const sdpaShapes = suites.includes('sdpa') ? mpsSdpaShapes(lengths) : [];
const pagedShapes: ReturnType<typeof llamaDecodeShapes> = [];
if (suites.includes('paged')) {
  const batches = (args.get('batches') ?? (quick ? '1,4' : '1,16,64')).split(',').map(Number);
  const contexts = (args.get('contexts') ?? (quick ? '256,1024' : '1024,4096,32768')).split(',').map(Number);
  pagedShapes.push(...llamaDecodeShapes(batches, contexts));
}

// The peer: ONNX Runtime Web on the same adapter, in the same process, on the same shapes and inputs,
// timed in the same rounds as webinfer (sdpa and paged). It lives from here to the end of the paged
// suite; the suites after that run without its device. (Runs 16-22 timed it after every webinfer
// number instead: a second device on the GPU perturbed short kernels measured beside it, run 15,
// bench/notes/peer.md. The rounds' spread now shows such an effect where it happens.)
let peerInfo: { notes: string[]; f16: boolean } | undefined;
if (peerName === 'ort' && (sdpaShapes.length || pagedShapes.length)) {
  // ORT's subgroup flash kernel is wrong at subgroup sizes 4 and 8 (software adapters); at 32 it is right.
  const withholdSubgroups = engine.features.subgroups && (engine.features.subgroupMinSize ?? 32) < 16;
  try {
    peer = await OrtPeer.create(gpu, { withholdSubgroups });
    peerInfo = { notes: peer.notes, f16: peer.f16 };
  } catch (e) {
    peerError = `ORT could not start: ${(e as Error).message.split('\n')[0]}`;
  }
  result.peer = { name: 'onnxruntime-web', notes: peer?.notes, f16: peer?.f16, error: peerError };
  console.log(`peer: ${peer ? `${peer.notes.join('; ')}; shader-f16 ${peer.f16 ? 'yes' : 'no (f16 cases run in f32 storage)'}` : peerError}`);
  if (peer && peer.f16 !== engine.features.f16) console.log(`peer: NOTE its device ${peer.f16 ? 'has' : 'lacks'} shader-f16 while webinfer's ${engine.features.f16 ? 'has' : 'lacks'} it`);
}

const ms = (r?: SdpaBenchRow) => r?.timing?.medianMs ?? NaN;
const check = (r: { pass: boolean; error?: string; worst: number }) => (r.pass ? 'pass' : `FAIL ${r.error ?? fmt(r.worst)}`);
if (args.has('explore-mma')) {
  // The subgroup-matrix flash tile under several settings, non-causal at --mma-lengths (default 4096),
  // D 64 and 128: --explore-mma='unroll:probe:shape:config:dtype:flush;...' (unroll 0/1, probe 0-3 (flash_mma_core.wgsl
  // PROBE; probes give wrong results), shape an index of flash.ts MMA_SHAPES, config one of mmaConfigs,
  // dtype f16 (default) or f32 (the split tile), flush tuning.flashMmaFlush; empty fields keep the default).
  const cfgs = (args.get('explore-mma') === 'true' ? '0:0::;1:0::' : args.get('explore-mma')!).split(';');
  const Ls = (args.get('mma-lengths') ?? '4096').split(',').map(Number);
  const Ds = (args.get('mma-heads') ?? '64,128').split(',').map(Number);
  for (const cfg of cfgs) {
    const [u, pr, sh, co, dt, fl] = cfg.split(':');
    const dtype = (dt || 'f16') as 'f16' | 'f32';
    if (dtype !== 'f16' && dtype !== 'f32') throw new Error(`--explore-mma ${cfg}: dtype expected f16 or f32, got ${dtype}`);
    const tuning: Partial<typeof engine.tuning> = {
      flashMmaUnroll: u === '1', flashMmaProbe: Number(pr || 0),
      flashMmaShape: sh ? Number(sh) : undefined, flashMmaConfig: co ? Number(co) : undefined,
      ...(fl ? { flashMmaFlush: Number(fl) } : {}),
    };
    for (const D of Ds) {
      for (const L of Ls) {
        const shape = { B: 1, Hq: 8, Hkv: 8, Lq: L, Lk: L, D, Dv: D, dtype, causal: false };
        const [f] = await withTuning(engine, tuning, () => benchSdpaShape(engine, shape, ['flash'], ceilings, { samples: 5 }));
        console.log(`explore-mma ${cfg} D${D} L${L}: ${f.error ?? `${fmt(ms(f), 3)} ms (${fmt(f.tflops)} TFLOP/s) tile ${f.tile} check ${check(f)}`}`);
      }
    }
  }
}

const sdpaRows: SdpaBenchRow[] = [];
const byShape: { f: SdpaBenchRow; n: SdpaBenchRow; o?: SdpaBenchRow }[] = [];
{
  const shapes = sdpaShapes, rows = sdpaRows;
  for (const [i, s] of shapes.entries()) {
    const r = await benchSdpaShape(engine, s, ['flash', 'naive'], ceilings, { samples: sdpaSamples, rounds, portable, peer, scalar: true });
    rows.push(...r);
    const [f, n, o] = r;
    byShape.push({ f, n, o });
    const p = f.portable, sc = f.scalar;
    console.log(`[${i + 1}/${shapes.length}] ${s.dtype} L${s.Lq}${s.causal ? ' causal' : ''}: flash (${f.tile}) ${fmt(ms(f), 3)} ms, spread ${spread(f.timing)} `
      + `(${fmt(f.tflops)} TFLOP/s, ${fmt(f.pctFma, 1)}% FMA${ceilings.mmaTflops ? `, ${fmt((100 * f.tflops) / ceilings.mmaTflops, 1)}% of matrix` : ''}, check ${check(f)}), `
      + (sc ? `scalar tile ${sc.timing ? `${fmt(sc.timing.medianMs, 3)} ms, spread ${spread(sc.timing)} (${fmt(sc.timing.medianMs / ms(f), 2)}x, check ${check(sc)})` : sc.error ?? '-'}, ` : '')
      + (p ? `portable ${p.timing ? `${fmt(p.timing.medianMs, 3)} ms, spread ${spread(p.timing)} (${fmt(p.timing.medianMs / ms(f), 2)}x of subgroup, check ${check(p)})` : p.error ?? '-'}, ` : '')
      + `naive ${fmt(ms(n), 3)} ms, spread ${spread(n.timing)} (check ${check(n)}), speedup ${fmt(ms(n) / ms(f), 1)}x`
      + (o ? `; ORT ${o.error && !o.timing ? o.error : `${fmt(ms(o), 3)} ms${o.peerDtype ? ` (${o.peerDtype})` : ''}, spread ${spread(o.timing)} `
        + `(${fmt(o.tflops)} TFLOP/s, check ${check(o)}, ${o.timing?.method}), flash ${speedup(ms(o), ms(f))}x vs ORT`}` : ''));
  }
}

const pagedRows: PagedBenchRow[] = [];
if (args.has('explore-mla')) {
  // MLA decode's attention tile, absorbed decode only: --explore-mla=mla,-1,0,1,mma0,mma1.2 ('mla' its own
  // tile, mla_core.wgsl; a number the flash tile with engine.tuning.flashRowGrid: -1 the general 64-row
  // tile, else one of flash.ts ROW_GRIDS; 'mma' the subgroup-matrix tile, mla_mma_core.wgsl, with a shape,
  // configuration and probe after it, dot-separated). The suites after it run the fastest (summed over
  // the shapes), which the results record.
  const choices = (args.get('explore-mla') || 'mla,-1,0,1').split(',');
  const heads = (args.get('explore-mla-heads') ?? '16').split(',').map(Number);
  const shapes = deepseekDecodeShapes(heads, (args.get('mla-batches') ?? '1,8,32').split(',').map(Number), Number(args.get('mla-context') ?? 4096));
  const opt = (x: string | undefined) => (x === undefined || x === '' ? undefined : Number(x));
  const set = (c: string) => {
    const t = engine.tuning;
    const [S, C, P] = c.startsWith('mma') ? c.slice(3).split('.') : [];
    t.mlaDecodeTile = c === 'mla' ? 'mla' : c.startsWith('mma') ? 'auto' : 'flash';
    t.flashRowGrid = c === 'mla' || c.startsWith('mma') ? undefined : Number(c);
    t.mlaMmaShape = opt(S);
    t.flashMmaConfig = opt(C);
    t.mlaMmaProbe = opt(P) ?? 0;
  };
  const label = (c: string) => (c === 'mla' ? 'mla tile' : c.startsWith('mma') ? `matrix tile ${c}` : `flash rowGrid ${c}`);
  let best: { c: string; ms: number } | null = null;
  for (const c of choices) {
    set(c);
    let sum = 0;
    for (const sh of shapes) {
      const r = await benchMlaDecode(engine, sh, ceilings, 5, false, 1);
      sum += r.absorbed?.medianMs ?? Infinity;
      if (!r.pass) sum = Infinity;
      console.log(`explore-mla ${label(c)} N${sh.N} batch ${sh.batch} context ${sh.context}: ${r.error ?? `${fmt(r.absorbed?.medianMs ?? NaN, 4)} ms (${fmt(r.pctRoofline, 1)}% of roofline) check ${r.pass ? 'pass' : `FAIL ${fmt(r.worst)}`}`}`
        + ` [${Object.entries(r.passes ?? {}).map(([k, v]) => `${k} ${fmt(v, 4)}`).join(', ')}]`);
    }
    if (!best || sum < best.ms) best = { c, ms: sum };
  }
  set(best!.c);
  (result as Record<string, unknown>).mlaTile = label(best!.c);
  console.log(`explore-mla: the suites below run the ${label(best!.c)} (fastest here)`);
}

if (pagedShapes.length) {
  const shapes = pagedShapes, rows = pagedRows;
  for (const [i, sh] of shapes.entries()) {
    // Where 'auto' decodes on the matrix tile, the FMA subgroup kernel is timed beside it in the same rounds.
    const variants = decodeMmaFor(engine, sh.D, sh.D, sh.Hq / sh.Hkv) ? [{ name: 'fma', tuning: { pagedDecodeVariant: 'subgroup' } }] : [];
    const r = await benchPagedDecode(engine, sh, ceilings, pagedSamples, { rounds, portable, peer, togetherMaxBytes, variants });
    rows.push(r);
    const p = r.portable, o = r.peer, op = r.peerPaged, t = r.timing?.medianMs ?? NaN;
    console.log(`[${i + 1}/${shapes.length}] decode batch ${sh.batch} context ${sh.context}: ${r.error ?? `${fmt(t, 3)} ms, spread ${spread(r.timing)}, `
      + `${fmt(r.gbs, 0)} GB/s of KV (${fmt(r.pctCopy, 1)}% of copy), check ${r.pass ? 'pass' : `FAIL ${fmt(r.worst)}`}, ${r.kernel ?? '?'}`}`
      + (r.variants?.fma ? `; FMA kernel ${r.variants.fma.timing ? `${fmt(r.variants.fma.timing.medianMs, 3)} ms, spread ${spread(r.variants.fma.timing)} (check ${check(r.variants.fma)})` : r.variants.fma.error ?? '-'}` : '')
      + (p ? `; portable ${p.timing ? `${fmt(p.timing.medianMs, 3)} ms, spread ${spread(p.timing)} (${fmt(p.timing.medianMs / t, 2)}x of subgroup, check ${check(p)})` : p.error ?? '-'}` : '')
      + (o ? `; ORT ${o.error && !o.timing ? o.error : `${fmt(o.timing?.medianMs ?? NaN, 3)} ms, spread ${spread(o.timing)} (${o.dtype} cache, ${fmt(o.gbs, 0)} GB/s, `
        + `check ${o.pass ? 'pass' : `FAIL ${o.error ?? fmt(o.worst)}`}, ${o.timing?.method}, ${o.interleaved ? 'interleaved' : 'not interleaved: after webinfer\'s cache was freed'}), `
        + `webinfer ${speedup(o.timing?.medianMs, r.timing?.medianMs)}x vs ORT`}` : '')
      + (op ? `; ORT PagedAttention ${op.error && !op.timing ? op.error : `${fmt(op.timing?.medianMs ?? NaN, 3)} ms (${fmt(op.timing?.restMs ?? NaN, 3)} without its cache write), `
        + `spread ${spread(op.timing)} (${fmt(op.gbs, 0)} GB/s, check ${op.pass ? 'pass' : `FAIL ${op.error ?? fmt(op.worst)}`}, ${op.timing?.method}, `
        + `${op.interleaved ? 'interleaved' : 'not interleaved'}; ${op.timing?.kernels.join(' + ') || '?'}), webinfer ${speedup(op.timing?.medianMs, r.timing?.medianMs)}x vs it`}` : ''));
  }
}
// Paged prefill (one sequence of L new tokens, Llama-3-8B attention, f16 queries and cache): the tile
// 'auto' picks, and the scalar tile beside it where that is the subgroup-matrix one.
const prefillRows: PagedPrefillRow[] = [];
if (suites.includes('paged')) {
  for (const L of (args.get('paged-prefill') ?? (quick ? '256' : '4096')).split(',').filter(Boolean).map(Number)) {
    const r = await benchPagedPrefill(engine, L, { samples: quick ? 3 : 5, rounds });
    prefillRows.push(r);
    console.log(`paged prefill L${L}: ${r.error ?? `${fmt(r.ms, 3)} ms, spread ${fmt(r.spreadPct ?? NaN, 1)}% (${fmt(r.tflops)} TFLOP/s, tile ${r.tile}, check ${r.pass ? 'pass' : `FAIL ${fmt(r.worst)}`})`
      + (Number.isFinite(r.scalarMs) ? `, scalar tile ${fmt(r.scalarMs, 3)} ms (${fmt(r.scalarMs / r.ms, 2)}x, check ${r.scalarPass ? 'pass' : 'FAIL'})` : '')}`);
  }
  (result as Record<string, unknown>).pagedPrefill = prefillRows;
}

// The suites below run without the peer's device on the GPU.
await peer?.destroy();

if (suites.includes('mla')) {
  const heads = (args.get('heads') ?? (quick ? '4' : '16,128')).split(',').map(Number);
  const batches = (args.get('mla-batches') ?? (quick ? '1,2' : '1,8,32')).split(',').map(Number);
  const context = Number(args.get('mla-context') ?? (quick ? 128 : 4096));
  const shapes = deepseekDecodeShapes(heads, batches, context).map((s) => (quick ? { ...s, L: 128, P: 16, R: 16, V: 16, bs: 16 } : s));
  const rows: MlaBenchRow[] = [];
  for (const [i, sh] of shapes.entries()) {
    const r = await benchMlaDecode(engine, sh, ceilings, quick ? 3 : 5, true, rounds);
    rows.push(r);
    console.log(`[${i + 1}/${shapes.length}] MLA decode N${sh.N} batch ${sh.batch} context ${sh.context}: ${r.error ?? `absorbed ${fmt(r.absorbed?.medianMs ?? NaN, 3)} ms `
      + `(${fmt(r.tflops)} TFLOP/s, ${fmt(r.gbs, 0)} GB/s, ${fmt(r.pctRoofline, 1)}% of roofline), unabsorbed ${fmt(r.unabsorbed?.medianMs ?? NaN, 3)} ms, check ${r.pass ? 'pass' : `FAIL ${fmt(r.worst)}`}`}`
      + ` [${Object.entries(r.passes ?? {}).map(([k, v]) => `${k} ${fmt(v, 3)}`).join(', ')}]`
      + (r.tiles ? `; tiles: ${Object.entries(r.tiles).map(([k, v]) => `${k} ${fmt(v.ms, 3)} ms${v.pass ? '' : ' FAIL'}`).join(', ')}` : ''));
  }
  result.mla = rows.map(mlaJson);
  const lines = [
    `# MLA decode (L 512, P 128, R 64, V 128, f16 latent cache, block 64) on ${deviceName}`, '',
    `Measured ${new Date().toISOString().slice(0, 10)} with \`${benchCmd} --suite=mla\` (${result.runtime}). Ceilings measured through WebGPU in the same run: `
    + `f32 FMA ${fmt(ceilings.fmaTflops)} TFLOP/s, read ${fmt(ceilings.readGBs, 0)} GB/s. Roofline = max(FLOPs / FMA, bytes / read); FLOPs count q absorption, `
    + 'scores, P·V and the V up-projection; bytes the latent rows (f16) once per sequence and the absorbed weights (f32) once per call. '
    + 'Unabsorbed: each sequence\'s context decompressed per head (W_UK, W_UV), then attention. Sequence 0 checked against the float64 reference first. '
    + 'The attention tile is the one \'auto\' takes (for f16, bf16 and fp8_ds_mla latent rows the subgroup-matrix tile where the adapter has one); '
    + (ceilings.mmaTflops ? `% of matrix roofline puts the FLOPs against the subgroup-matrix ceiling (${fmt(ceilings.mmaTflops, 0)} TFLOP/s, same run) instead of FMA; ` : '')
    + '"other tiles" are timed in the same rounds and checked alike. '
    + `Absorbed decode timed in ${rounds} rounds (alternating with the other attention tiles), ${quick ? 3 : 5} samples a round of 2 calls each, `
    + 'after a warm-up (≥ 300 ms, then ≥ 100 ms); ms is the median over every round, spread = (max − min of the rounds\' medians) / ms; unabsorbed is one round of 3 samples. '
    + 'No peer here: ONNX Runtime Web has no MLA operator (its WebGPU provider offers MultiHeadAttention and GroupQueryAttention, not latent attention).', '',
    '| N | batch | context | attention tile | absorbed ms | spread | TFLOP/s | GB/s | % of roofline | % of matrix roofline | other tiles (ms) | unabsorbed ms | absorbed speedup | check |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|',
    ...rows.map((r) => {
      const matrixPct = ceilings.mmaTflops && r.absorbed ? (100 * Math.max(r.flops / (ceilings.mmaTflops * 1e9), r.bytes / (ceilings.readGBs * 1e6))) / r.absorbed.medianMs : NaN;
      const others = Object.entries(r.tiles ?? {}).filter(([k]) => !k.endsWith('(default)')).map(([k, v]) => `${k} ${fmt(v.ms, 3)}${v.pass ? '' : ' FAIL'}`).join('; ') || '-';
      return `| ${r.shape.N} | ${r.shape.batch} | ${r.shape.context} | ${r.tile ?? '-'} | ${r.error ? r.error : `${fmt(r.absorbed?.medianMs ?? NaN, 3)} | ${fmt(r.absorbed?.spreadPct ?? NaN, 1)}% | ${fmt(r.tflops)} | ${fmt(r.gbs, 0)} | `
        + `${fmt(r.pctRoofline, 1)} | ${fmt(matrixPct, 1)} | ${others} | ${fmt(r.unabsorbed?.medianMs ?? NaN, 3)} | ${fmt((r.unabsorbed?.medianMs ?? NaN) / (r.absorbed?.medianMs ?? NaN), 1)}x | ${r.pass ? 'pass' : 'FAIL'}`} |`;
    }),
  ];
  mkdirSync(outDir, { recursive: true });
  writeFileSync(join(outDir, `mla-${slug}.md`), `${lines.join('\n')}\n`);
  console.log(`\n${lines.slice(4).join('\n')}`);
}

if (suites.includes('gemm')) {
  // The prefill GEMM: FMA vs subgroup matrices (x split, x in f16) at Llama-3-8B's shapes.
  const gemmMs = (args.get('gemm-m') ?? (quick ? '70,130' : '512,2048,4096')).split(',').map(Number);
  const shapes = quick ? gemmMs.map((M) => ({ M, N: 264, K: 136, dtype: 'bf16' as const, what: 'small' })) : llamaGemmShapes(gemmMs);
  const tileArg = args.get('gemm-tile');
  if (args.has('explore-gemm')) {
    // Every subgroup-matrix tile on one shape (one round): which the planner should prefer.
    const [M, N, K] = (args.get('explore-gemm') === 'true' ? '2048,4096,4096' : args.get('explore-gemm')!).split(',').map(Number);
    const explore: unknown[] = [];
    for (const [ti] of ops.LINEAR_MMA_TILES.entries()) {
      const r = await benchGemmShape(engine, { M, N, K, dtype: 'bf16', what: `tile ${ti}` }, { rounds: 1, samples: 5, tile: ti });
      explore.push(gemmJson(r));
      console.log(`explore-gemm M${M} N${N} K${K} tile ${ti}: ${r.contenders.filter((c) => c.name !== 'fma').map((c) => `${c.name} ${c.error ?? `${fmt(c.timing?.medianMs ?? NaN, 3)} ms ${fmt(c.tflops, 1)} TFLOP/s${c.pass ? '' : ` FAIL ${fmt(c.worst)}`}`} [${c.plan}]`).join('; ')}`);
    }
    // The probes (gemm_mma.wgsl PROBE: wrong results) on one tile: where its time goes.
    const pt = Number(args.get('gemm-probe-tile') ?? 0);
    for (const linearMmaProbe of [1, 2, 3]) {
      await withTuning(engine, { linearMmaProbe }, async () => {
        const r = await benchGemmShape(engine, { M, N, K, dtype: 'bf16', what: `probe ${linearMmaProbe}` }, { rounds: 1, samples: 5, tile: pt });
        explore.push({ probe: linearMmaProbe, ...(gemmJson(r) as object) });
        console.log(`explore-gemm M${M} N${N} K${K} tile ${pt} probe ${linearMmaProbe}: ${r.contenders.filter((c) => c.name !== 'fma').map((c) => `${c.name} ${c.error ?? `${fmt(c.timing?.medianMs ?? NaN, 3)} ms`}`).join('; ')}`);
      });
    }
    result.exploreGemm = explore;
  }
  const rows: GemmBenchRow[] = [];
  for (const [i, sh] of shapes.entries()) {
    const r = await benchGemmShape(engine, sh, { rounds, samples: quick ? 3 : 5, tile: tileArg === undefined ? undefined : Number(tileArg) });
    rows.push(r);
    console.log(`[${i + 1}/${shapes.length}] GEMM ${sh.what} M${sh.M} N${sh.N} K${sh.K} ${sh.dtype}: ${r.contenders.map((c) => `${c.name} ${c.error ?? `${fmt(c.timing?.medianMs ?? NaN, 3)} ms `
      + `${fmt(c.tflops, 1)} TFLOP/s (spread ${fmt(c.timing?.spreadPct ?? NaN, 1)}%) ${c.pass ? 'pass' : `FAIL ${fmt(c.worst)}`} (${fmt(c.worstF32)}× f32 tol)`}`).join('; ')}`);
  }
  result.gemm = rows.map(gemmJson);
  // The grouped expert products (ops.moe) on the same two kernels, at DeepSeek-V2-Lite's experts.
  const moeTokens = (args.get('moe-rows') ?? (quick ? '20' : '512,2048')).split(',').map(Number);
  const moeShapes = quick ? moeTokens.map((r) => ({ rows: r, E: 8, topK: 2, H: 128, I: 72, dtype: 'bf16' as const, what: 'small experts' })) : deepseekMoeShapes(moeTokens);
  const moeRows: MoeBenchRow[] = [];
  for (const [i, sh] of moeShapes.entries()) {
    const r = await benchMoeShape(engine, sh, { rounds, samples: quick ? 3 : 5 });
    moeRows.push(r);
    console.log(`[${i + 1}/${moeShapes.length}] MoE ${sh.what} ${sh.rows} tokens × ${sh.topK} of ${sh.E} H${sh.H} I${sh.I}: ${r.contenders.map((c) => `${c.name} ${c.error ?? `${fmt(c.timing?.medianMs ?? NaN, 3)} ms `
      + `${fmt(c.tflops, 1)} TFLOP/s (spread ${fmt(c.timing?.spreadPct ?? NaN, 1)}%) ${c.pass ? 'pass' : `FAIL ${fmt(c.worst)}`} (${fmt(c.worstF32)}× f32 tol) [${c.plan}]`}`).join('; ')}`);
  }
  result.moe = moeRows.map(gemmJson);
  const plans = [...new Set(rows.flatMap((r) => r.contenders.map((c) => `${c.name}: ${c.plan}`)))];
  const lines = [
    `# Prefill GEMM (Llama-3-8B's linear layers, bf16 weights) on ${deviceName}`, '',
    `Measured ${new Date().toISOString().slice(0, 10)} with \`${benchCmd} --suite=gemm\` (${result.runtime}). Ceilings measured through WebGPU in the same run: `
    + `f32 FMA ${fmt(ceilings.fmaTflops)} TFLOP/s${ceilings.mmaTflops ? `, subgroup matrix (f16 → f32 ${ceilings.mmaConfig}) ${fmt(ceilings.mmaTflops, 1)} TFLOP/s` : ' (no subgroup matrices here)'}. `
    + 'ops.linear, out = x·Wᵀ, x f32 [M, K], W bf16 [N, K] made on the GPU, out f32; TFLOP/s count 2·M·N·K. fma: the FMA GEMM (gemm.wgsl, f32 arithmetic). '
    + 'mma split: the subgroup-matrix GEMM (gemm_mma.wgsl) with x split into hi + lo f16 halves (two products a step, x kept to ~22 bits; the engine\'s default); '
    + 'mma f16 x: the same with x rounded to f16 once (f16 activations). fma is checked against the f32 tolerance, the matrix GEMM against SPEC §6\'s row for its bf16 weights '
    + '(the tensor units sum f16 × f16 products in f32 but truncate as they add, so at K ≥ 4096 the split GEMM errs up to ~15× the f32 tolerance: JSON worstF32). Each contender checked first against a float64 reference on 4 × 32 sampled outputs '
    + `(output poisoned with NaN before). GPU timestamps per call. Each shape timed in ${rounds} rounds alternating the contenders (warm-ups ≥ 300 ms, then ≥ 100 ms); `
    + 'ms is the median of every sample of every round; spread = (max − min of the rounds\' medians) / ms; "best vs fma" = fma ms / the fastest\'s ms. '
    + `Plans: ${plans.join('; ')}.`, '',
    ...gemmLines(rows, ceilings, fmt),
    '', '## Grouped expert products (ops.moe)', '',
    'ops.moe on random distinct experts a token (the balanced routing of a trained router), bf16 experts made on the GPU, x f32; TFLOP/s count 2 · pairs · 3·H·I '
    + '(gate|up and down); the time is the whole call (pair sort, both products, SiLU gate, weighted combine). fma: moe_gemm.wgsl; mma split: moe_gemm_mma.wgsl '
    + '(the GEMM above on the sorted pairs, x split). Checked first against a float64 reference on 3 sampled tokens, the same tolerances as above.', '',
    ...moeLines(moeRows, fmt),
  ];
  mkdirSync(outDir, { recursive: true });
  writeFileSync(join(outDir, `gemm-${slug}.md`), `${lines.join('\n')}\n`);
  console.log(`\n${lines.slice(4).join('\n')}`);
}

if (suites.includes('gemv')) {
  // Decode-sized steps (1 to 64 rows) at Llama-3.2-1B's linear layers: the GEMV against the
  // subgroup-matrix GEMM over one row tile (gemm.ts LINEAR_MMA_DECODE_TILES), and what planLinear picks.
  const ms = (args.get('gemv-m') ?? (quick ? '1,8,20' : '1,4,8,16,32,64')).split(',').map(Number);
  const shapes = quick ? ms.map((M) => ({ M, N: 264, K: 136, dtype: 'bf16' as const, what: 'small' })) : llamaDecodeLinearShapes(ms);
  const explore = args.has('explore-gemv');
  const rows: (GemmBenchRow & { picked: string })[] = [];
  for (const [i, sh] of shapes.entries()) {
    const picked = ops.planLinear(engine, { M: sh.M, N: sh.N, K: sh.K, dtype: sh.dtype });
    const r = await benchGemmShape(engine, sh, { rounds: sh.M >= 8 && explore ? 1 : rounds, samples: quick ? 3 : 7, contenders: decodeContenders(engine, sh, explore && sh.M >= 8) });
    const label = picked.kernel === 'gemm-mma' ? `mma (${planLabel(picked)})` : `gemv (${planLabel(picked)})`;
    rows.push({ ...r, picked: label });
    console.log(`[${i + 1}/${shapes.length}] decode linear ${sh.what} M${sh.M} N${sh.N} K${sh.K}: picked ${label}; ${r.contenders.map((c) => `${c.name} ${c.error ?? `${fmt(c.timing?.medianMs ?? NaN, 4)} ms `
      + `${fmt((sh.N * sh.K * 2) / ((c.timing?.medianMs ?? NaN) * 1e6), 0)} GB/s ${c.pass ? 'pass' : `FAIL ${fmt(c.worst)}`}`} [${c.plan}]`).join('; ')}`);
  }
  result.gemv = rows.map((r) => ({ ...(gemmJson(r) as object), picked: r.picked }));
  const names = [...new Set(rows.flatMap((r) => r.contenders.map((c) => c.name)))].filter((n) => n === 'gemv' || n === 'mma' || n === 'mma unsplit');
  const lines = [
    `# Decode-sized linear layers (Llama-3.2-1B's, bf16 weights) on ${deviceName}`, '',
    `Measured ${new Date().toISOString().slice(0, 10)} with \`${benchCmd} --suite=gemv\` (${result.runtime}). Read ceiling measured through WebGPU in the same run: `
    + `${fmt(ceilings.readGBs, 0)} GB/s${ceilings.mmaTflops ? `; subgroup matrix ${fmt(ceilings.mmaTflops, 1)} TFLOP/s` : ''}. ops.linear, out = x·Wᵀ, x f32 [M, K], W bf16 [N, K] `
    + 'made on the GPU. gemv: gemv.wgsl (f32 arithmetic; each 16 rows of x read the weights again). mma: the subgroup-matrix GEMM over one row tile '
    + 'tiles of 16-64 rows (gemm.ts LINEAR_MMA_DECODE_TILES), K split over workgroups where the grid is short (a second pass adds the splits); mma unsplit: the same tile without split-K. x split into hi + lo f16 halves. GB/s: the weights\' bytes / ms '
    + `(the roofline is the read ceiling). Each checked first against a float64 reference on sampled outputs. "picked": planLinear's choice. ${rounds} rounds, median.`, '',
    `| layer | M | N | K | ${names.map((n) => `${n} ms | ${n} GB/s`).join(' | ')} | best % of read | picked | checks |`,
    `|---|---|---|---|${names.map(() => '---|---|').join('')}---|---|---|`,
  ];
  for (const r of rows) {
    const by = new Map(r.contenders.map((c) => [c.name, c]));
    const gbs = (c?: GemmContenderResult) => (c?.timing ? (r.shape.N * r.shape.K * 2) / (c.timing.medianMs * 1e6) : NaN);
    const best = Math.max(...names.map((n) => gbs(by.get(n))).filter(Number.isFinite));
    lines.push(`| ${r.shape.what} | ${r.shape.M} | ${r.shape.N} | ${r.shape.K} | ${names.map((n) => { const c = by.get(n); return c?.timing ? `${fmt(c.timing.medianMs, 4)} | ${fmt(gbs(c), 0)}` : `${c?.error ?? '-'} | -`; }).join(' | ')} | `
      + `${fmt((100 * best) / ceilings.readGBs, 1)} | ${r.picked} | ${r.contenders.every((c) => c.pass) ? 'pass' : `FAIL (${r.contenders.filter((c) => !c.pass).map((c) => c.name).join(', ')})`} |`);
  }
  if (explore) {
    lines.push('', '## Every decode tile (--explore-gemv; one round)', '', '| layer | M | tile | ms | GB/s | plan |', '|---|---|---|---|---|---|');
    for (const r of rows) {
      for (const c of r.contenders.filter((x) => x.name.startsWith('tile '))) {
        lines.push(`| ${r.shape.what} | ${r.shape.M} | ${c.name} | ${fmt(c.timing?.medianMs ?? NaN, 4)} | ${fmt((r.shape.N * r.shape.K * 2) / ((c.timing?.medianMs ?? NaN) * 1e6), 0)} | ${c.plan} |`);
      }
    }
  }
  mkdirSync(outDir, { recursive: true });
  writeFileSync(join(outDir, `gemv-${slug}.md`), `${lines.join('\n')}\n`);
  console.log(`\n${lines.slice(4).join('\n')}`);
}

/** Contenders of the qgemv suite that are yardsticks, not kernels (bench/gemm.ts, yardsticks). */
const YARDSTICKS = ['read', 'empty'];
if (suites.includes('qgemv')) {
  // The quantized GEMV at Llama-3.2-1B's decode shapes (and its lm_head), each type against the bf16
  // GEMV on the same shape: GB/s on the bytes each reads (--qgemv-types, --qgemv-m; --explore-qgemv:
  // every KT and R the kernel takes).
  const types = (args.get('qgemv-types') ?? 'Q4_0,Q8_0,Q4_K,Q6_K').split(',') as QuantType[];
  const ms = (args.get('qgemv-m') ?? '1').split(',').map(Number);
  const explore = args.has('explore-qgemv');
  // --qgemv-kt=32,64 and --qgemv-r=2,4: the lanes per row and rows per group --explore-qgemv tries (default all).
  const kts = args.get('qgemv-kt')?.split(',').map(Number);
  const rs = args.get('qgemv-r')?.split(',').map(Number) as (1 | 2 | 4)[] | undefined;
  // --qgemv-span: each sample's calls in one pass, as a step runs them (else a pass a dispatch);
  // --qgemv-rot=N: calls rotate over N copies of the weights (out of L2, as in a step); --qgemv-rms:
  // the RMSNorm folded in, as q|k|v and gate|up run; --qgemv-per=N calls a sample; --qgemv-yardsticks:
  // the read kernel over the same bytes and an empty dispatch beside.
  const span = args.has('qgemv-span'), rms = args.has('qgemv-rms'), yard = args.has('qgemv-yardsticks');
  const rot = Number(args.get('qgemv-rot') ?? 1);
  // --qgemv-wg=64,256: the workgroup sizes --explore-qgemv tries (default the planner's).
  const wgs = args.get('qgemv-wg')?.split(',').map(Number);
  const per = args.has('qgemv-per') ? Number(args.get('qgemv-per')) : undefined;
  // --qgemv-idot: --explore-qgemv also tries each KT and R on 8-bit activations (quantPath 'idot').
  const idotExplore = args.has('qgemv-idot');
  if (!Number.isInteger(rot) || rot < 1 || rot > 16) throw new Error(`--qgemv-rot: expected an integer 1..16, got ${args.get('qgemv-rot')}`);
  if (per !== undefined && (!Number.isInteger(per) || per < 1 || per > 200)) throw new Error(`--qgemv-per: expected an integer 1..200, got ${args.get('qgemv-per')}`);
  // --qgemv-shapes: 8b (Llama-3.1-8B's layers and lm_head, issue 42's targets), 1b (Llama-3.2-1B's), or both.
  const SHAPES: Record<string, { N: number; K: number; what: string }[]> = {
    '8b': [{ N: 4096, K: 4096, what: '8B q|o' }, { N: 14336, K: 4096, what: '8B gate/up' }, { N: 4096, K: 14336, what: '8B down' }, { N: 128256, K: 4096, what: '8B lm_head' }],
    '1b': [{ N: 3072, K: 2048, what: 'q|k|v' }, { N: 2048, K: 2048, what: 'o' }, { N: 16384, K: 2048, what: 'gate|up' }, { N: 2048, K: 8192, what: 'down' }, { N: 128256, K: 2048, what: 'lm_head' }],
  };
  const shapeSets = (args.get('qgemv-shapes') ?? '8b').split(',');
  for (const s of shapeSets) if (!SHAPES[s]) throw new Error(`--qgemv-shapes: expected 8b, 1b or both (comma-separated), got ${s}`);
  const layers = quick ? [{ N: 264, K: 512, what: 'small' }] : shapeSets.flatMap((s) => SHAPES[s]);
  const rows: { what: string; M: number; N: number; K: number; type: string; bytes: number; contenders: GemmContenderResult[] }[] = [];
  let i = 0;
  const total = ms.length * layers.length * (types.length + 1);
  for (const M of ms) {
    for (const l of layers) {
      const bf = await benchGemmShape(engine, { M, N: l.N, K: l.K, dtype: 'bf16', what: l.what }, { rounds, samples: quick ? 3 : 7, span, rot, perSample: per,
        contenders: [{ name: 'picked', plan: ops.planLinear(engine, { M, N: l.N, K: l.K, dtype: 'bf16', kernel: 'gemv' }), tol: 'f32' }] });
      rows.push({ what: l.what, M, N: l.N, K: l.K, type: 'bf16', bytes: 2 * l.N * l.K, contenders: bf.contenders });
      console.log(`[${++i}/${total}] qgemv ${l.what} M${M} bf16: ${bf.contenders.map((c) => `${c.name} ${fmt(c.timing?.medianMs ?? NaN, 4)} ms`).join('; ')}`);
      for (const type of types) {
        const r = await benchQuantGemv(engine, { M, N: l.N, K: l.K, type, what: l.what }, { rounds, samples: quick ? 3 : 7, explore, kts, rs, wgs, span, rot, rms, perSample: per, yardsticks: yard, idotExplore });
        rows.push({ what: l.what, M, N: l.N, K: l.K, type, bytes: r.bytes, contenders: r.contenders });
        const best = r.contenders.filter((c) => c.timing && !YARDSTICKS.includes(c.name)).sort((a, b) => a.timing!.medianMs - b.timing!.medianMs)[0];
        console.log(`[${++i}/${total}] qgemv ${l.what} M${M} ${type}: ${r.contenders.map((c) => `${c.name} ${c.error ?? `${fmt(c.timing?.medianMs ?? NaN, 4)} ms ${c.pass ? '' : 'FAIL'}`}`).join('; ')}; best ${best?.name} ${fmt(r.bytes / ((best?.timing?.medianMs ?? NaN) * 1e6), 0)} GB/s`);
      }
    }
  }
  const gbs = (r: typeof rows[number], c?: GemmContenderResult) => (c?.timing ? r.bytes / (c.timing.medianMs * 1e6) : NaN);
  result.qgemv = rows.map((r) => ({ ...r, contenders: r.contenders.map(({ timing, ...c }) => ({ ...c, ms: timing?.medianMs, gbs: timing ? r.bytes / (timing.medianMs * 1e6) : undefined })) }));
  const lines = [
    `# The quantized GEMV at ${shapeSets.map((x) => (x === '8b' ? 'Llama-3.1-8B' : 'Llama-3.2-1B')).join(' and ')}'s decode shapes on ${deviceName}`, '',
    `Measured ${new Date().toISOString().slice(0, 10)} at commit ${args.get('commit') ?? 'unknown'} with \`${benchCmd} ${process.argv.slice(2).join(' ')}\` (${result.runtime}). Read ceiling measured through WebGPU in the same run: `
    + `${fmt(ceilings.readGBs, 0)} GB/s. ops.linear, x f32 [M, K], W [N, K] in ggml blocks (random valid blocks) or bf16, GEMV kernel; GB/s: the bytes the weights take / ms. `
    + `Each checked first against a float64 reference of the dequantized weights on sampled outputs. ${rounds} rounds, median. `
    + `${span ? `Timed as a step runs: ${per ?? 'up to 10'} calls a sample in one pass` : 'Timed a pass a dispatch'}${rot > 1 ? `, the calls rotating over ${rot} copies of the weights` : ''}`
    + `${rms ? ', the RMSNorm folded in' : ''}.${yard ? ' Yardsticks beside: `read`, the read-ceiling kernel over the same bytes; `empty`, a dispatch of one workgroup that reads nothing.' : ''}`, '',
    `| layer | M | N | K | weights | MB | picked ms | picked GB/s | % of read | best | best ms | best GB/s |${yard ? ' read ms | empty ms |' : ''}`,
    `|---|---|---|---|---|---|---|---|---|---|---|---|${yard ? '---|---|' : ''}`,
  ];
  for (const r of rows) {
    const picked = r.contenders.find((c) => c.name === 'picked');
    const best = r.contenders.filter((c) => c.timing && c.pass && !YARDSTICKS.includes(c.name)).sort((a, b) => a.timing!.medianMs - b.timing!.medianMs)[0];
    const stick = (n: string) => fmt(r.contenders.find((c) => c.name === n)?.timing?.medianMs ?? NaN, 4);
    lines.push(`| ${r.what} | ${r.M} | ${r.N} | ${r.K} | ${r.type} | ${fmt(r.bytes / 1e6, 1)} | ${fmt(picked?.timing?.medianMs ?? NaN, 4)} | ${fmt(gbs(r, picked), 0)} | `
      + `${fmt((100 * gbs(r, picked)) / ceilings.readGBs, 1)} | ${best?.name ?? '-'}${best && best.name !== 'picked' ? ` (${best.plan})` : ''} | ${fmt(best?.timing?.medianMs ?? NaN, 4)} | ${fmt(gbs(r, best), 0)} |`
      + `${yard && r.type !== 'bf16' ? ` ${stick('read')} | ${stick('empty')} |` : yard ? ' | |' : ''}`);
  }
  mkdirSync(outDir, { recursive: true });
  writeFileSync(join(outDir, `qgemv-${slug}.md`), `${lines.join('\n')}\n`);
  console.log(`\n${lines.slice(4).join('\n')}`);
}

if (suites.includes('step')) {
  const batches = (args.get('step-batches') ?? (quick ? '1,4' : '1,16,64')).split(',').map(Number);
  const contexts = (args.get('step-contexts') ?? (quick ? '256,1024' : '4096,32768')).split(',').map(Number);
  const stepLayers = Number(args.get('step-layers') ?? (quick ? 4 : 32));
  const rows: StepBenchRow[] = [];
  const shapes = batches.flatMap((batch) => contexts.map((context) => ({ batch, context, Hq: 32, Hkv: 8, D: 128, bs: 16,
    // The 32-layer step where 32 caches fit comfortably (the targets are at batch 1, context 4096).
    layers: batch * context <= 16 * 4096 ? stepLayers : 0 })))
    .filter((sh) => sh.batch * sh.context * sh.Hkv * sh.D * 2 <= Math.min(engine.limits.maxStorageBufferBindingSize, engine.limits.maxBufferSize));
  for (const [i, sh] of shapes.entries()) {
    const r = await benchStep(engine, sh, quick ? 3 : 7);
    rows.push(r);
    console.log(`[${i + 1}/${shapes.length}] step batch ${sh.batch} context ${sh.context}: ${r.error ?? `GPU ${fmt(r.gpuHostMs, 4)} ms (tensor metadata ${fmt(r.gpuDeviceMs, 4)} ms, `
      + `${fmt(r.gpuDeviceMs / r.gpuHostMs, 2)}x; planning pass ${fmt(r.gpuPlanMs, 4)} ms), encode ${fmt(r.encodeUs, 1)} µs/run (tensor ${fmt(r.encodeDeviceUs, 1)}), `
      + `plan ${fmt(r.planUs, 1)} µs, wall ${fmt(r.wallPipelinedMs, 4)} ms/run pipelined, ${fmt(r.wallSyncMs, 4)} ms with a wait`
      + `${r.stepWallMs !== undefined ? `; ${sh.layers}-layer step wall ${fmt(r.stepWallMs, 3)} ms vs GPU ${fmt(r.stepGpuMs ?? NaN, 3)} ms `
        + `(+${fmt(100 * ((r.stepWallMs ?? NaN) / (r.stepGpuMs ?? NaN) - 1), 1)}%), host ${fmt(r.stepHostMs ?? NaN, 3)} ms, with a wait ${fmt(r.stepSyncWallMs ?? NaN, 3)} ms` : ''}`
      + `; created ${r.createdBuffers} buffers, ${r.createdBindGroups} bind groups`}`);
  }
  const mlaRows: MlaStepRow[] = [];
  for (const [N, B, C] of quick ? [[4, 1, 256]] : [[16, 1, 4096], [128, 32, 4096]]) {
    const r = await benchMlaStep(engine, N, B, C, quick ? 3 : 7);
    mlaRows.push(r);
    console.log(`MLA plan N${N} batch ${B} context ${C}: ${r.error ?? `GPU ${fmt(r.gpuMs, 4)} ms, encode ${fmt(r.encodeUs, 1)} µs/run, wall ${fmt(r.wallPipelinedMs, 4)} ms/run pipelined, `
      + `${fmt(r.wallSyncMs, 4)} ms with a wait; created ${r.createdBuffers} buffers`}`);
  }
  result.step = rows.map((r) => ({ ...r.shape, ...r, shape: undefined }));
  result.mlaStep = mlaRows;
  const lines = [
    `# A serving step's host cost (Llama-3-8B attention: Hq 32, Hkv 8, D 128, f16 cache, block 16) on ${deviceName}`, '',
    `Measured ${new Date().toISOString().slice(0, 10)} with \`${benchCmd} --suite=step\` (${result.runtime}). GPU: timestamps, median; `
    + 'encode: host µs to record one run of a plan; pipelined: record, submit, next, one wait at the end; with a wait: record, submit, wait. '
    + `Step: one plan, a run per layer over its own cache, one submit; steps back to back (wall) against the GPU time of one step, its passes timed whole. `
    + 'Created: buffers and bind groups made during the steady-state loops (the runtime counts every createBuffer and createBindGroup).', '',
    '| batch | context | GPU ms (host meta) | GPU ms (tensor meta) | ratio | planning pass ms | encode µs/run | encode µs/run (tensor) | plan µs | wall ms/run pipelined | wall ms/run with wait | step layers | step wall ms | step GPU ms | wall over GPU | step host ms | created buffers / bind groups |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|',
    ...rows.map((r) => `| ${r.shape.batch} | ${r.shape.context} | ${r.error ? `${r.error} |` : `${fmt(r.gpuHostMs, 4)} | ${fmt(r.gpuDeviceMs, 4)} | ${fmt(r.gpuDeviceMs / r.gpuHostMs, 2)}x | ${fmt(r.gpuPlanMs, 4)} | `
      + `${fmt(r.encodeUs, 1)} | ${fmt(r.encodeDeviceUs, 1)} | ${fmt(r.planUs, 1)} | ${fmt(r.wallPipelinedMs, 4)} | ${fmt(r.wallSyncMs, 4)} | ${r.shape.layers || '-'} | `
      + `${r.stepWallMs !== undefined ? `${fmt(r.stepWallMs, 3)} | ${fmt(r.stepGpuMs ?? NaN, 3)} | +${fmt(100 * ((r.stepWallMs ?? NaN) / (r.stepGpuMs ?? NaN) - 1), 1)}% | ${fmt(r.stepHostMs ?? NaN, 3)}` : '- | - | - | -'} | `
      + `${r.createdBuffers} / ${r.createdBindGroups} |`}`),
    '', '| MLA decode plan | batch | context | GPU ms | encode µs/run | wall ms/run pipelined | wall ms/run with wait | created buffers |', '|---|---|---|---|---|---|---|---|',
    ...mlaRows.map((r) => `| N ${r.N} | ${r.batch} | ${r.context} | ${r.error ?? `${fmt(r.gpuMs, 4)} | ${fmt(r.encodeUs, 1)} | ${fmt(r.wallPipelinedMs, 4)} | ${fmt(r.wallSyncMs, 4)} | ${r.createdBuffers}`} |`),
  ];
  mkdirSync(outDir, { recursive: true });
  writeFileSync(join(outDir, `step-${slug}.md`), `${lines.join('\n')}\n`);
  console.log(`\n${lines.slice(4).join('\n')}`);
}

/** The Markdown table of one whole-model run. */
function modelLines(r: ModelBench, suite: string): string[] {
  const ok = (x: number, d = 1) => fmt(x, d);
  return [
    `# ${r.name}, random ${r.dtype} weights, ${r.cache} KV cache, on ${deviceName}`, '',
    `Measured ${new Date().toISOString().slice(0, 10)} with \`${benchCmd} --suite=${suite}\` (${result.runtime}). ${r.layers} layers, ${(r.params / 1e9).toFixed(2)} B parameters read by a batch-1 step (linear layers; MoE: the experts chosen). `
    + 'Decode: steps recorded and submitted as generate does (three in flight, ids fed back on the GPU), contexts synthetic (blocks taken without a prefill). '
    + `GPU: a step's passes timed whole. Roofline: bytes of weights and K/V a step reads over the read ceiling (${fmt(ceilings.readGBs, 0)} GB/s, same run). `
    + 'Host overhead: (wall − GPU) / wall.', '',
    ...(r.error ? [`error: ${r.error}`, ''] : []),
    '| batch | context | tokens/s | step wall ms | step GPU ms | host ms / step | host overhead | dispatches a step (a layer) | layers replayed | weights + KV MB | % of roofline (GPU) | % of roofline (wall) |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|',
    ...r.decode.map((d) => (d.error ? `| ${d.batch} | ${d.context} | ${d.error} |` : `| ${d.batch} | ${d.context} | ${ok(d.tokensPerSecond, 0)} | ${fmt(d.wallMs, 3)} | ${fmt(d.gpuMs ?? NaN, 3)} | ${fmt(d.hostMs, 3)} | `
      + `${ok(d.hostOverheadPct)}% | ${d.dispatches ?? '-'}${d.dispatches ? ` (${fmt(d.dispatches / r.layers, 1)})` : ''} | ${d.replayed === undefined ? '-' : `${Math.round(100 * d.replayed)}%`} | ${fmt((d.weightBytes + d.kvBytes) / 1e6, 0)} | ${ok(d.pctRooflineGpu)}% | ${ok(d.pctRooflineWall)}% |`)),
    '',
    ...(r.prefill ? [`Prefill of a ${r.prefill.tokens}-token prompt: ${ok(r.prefill.tokensPerSecond, 0)} tokens/s (wall ${fmt(r.prefill.wallMs, 2)} ms, GPU ${fmt(r.prefill.gpuMs ?? NaN, 2)} ms); `
      + `its linear layers ${fmt(r.prefill.linearMs, 2)} ms = ${fmt(r.prefill.linearTflops)} TFLOP/s, ${ok(r.prefill.pctFma)}% of the FMA ceiling (${fmt(ceilings.fmaTflops)} TFLOP/s)`
      + `${ceilings.mmaTflops ? `, ${fmt((100 * r.prefill.linearTflops) / ceilings.mmaTflops, 1)}% of the subgroup-matrix ceiling (${fmt(ceilings.mmaTflops, 1)} TFLOP/s: the planners put prefill's 16-bit products on the matrices)` : ''}.`, ''] : []),
    ...r.decode.filter((d) => d.kernels && d.context === Math.max(...r.decode.map((x) => x.context))).flatMap((d) => {
      const k = Object.entries(d.kernels ?? {}).sort((a, b) => b[1] - a[1]);
      const total = k.reduce((a, [, v]) => a + v, 0);
      return [`Where a step's GPU time goes, batch ${d.batch}, context ${d.context} (dispatches timed one by one: ${fmt(total, 3)} ms in all):`, '',
        '| kernel | ms | share |', '|---|---|---|', ...k.slice(0, 12).map(([n, v]) => `| ${n} | ${fmt(v, 3)} | ${ok((100 * v) / total)}% |`),
        ...(k.length > 12 ? [`| ${k.length - 12} others | ${fmt(k.slice(12).reduce((a, [, v]) => a + v, 0), 3)} | |`] : []), ''];
    }),
    ...(r.kernels.length ? ['| linear kernel alone | ms | GB/s | TFLOP/s | % of ceiling |', '|---|---|---|---|---|',
      ...r.kernels.map((k) => `| ${k.what} | ${fmt(k.ms, 4)} | ${fmt(k.gbs ?? NaN, 0)} | ${fmt(k.tflops ?? NaN)} | ${ok(k.pct)}% of ${/ M (\d+),/.test(k.what) && Number(/ M (\d+),/.exec(k.what)![1]) <= 64 ? 'read' : 'FMA'} |`)] : []),
  ];
}

const modelGrid = () => ({
  batches: (args.get('model-batches') ?? (quick ? '1,4' : '1,8,32')).split(',').map(Number),
  contexts: (args.get('model-contexts') ?? (quick ? '128,512' : '1024,4096')).split(',').map(Number),
  prefill: Number(args.get('model-prefill') ?? (quick ? 64 : 512)),
  steps: quick ? 4 : 96,
});

/**
 * llama.cpp on a model suite's shapes, run now, in this call (--llamacpp=LIBDIR:GGUF[:LABEL] after the
 * model suite, --llamacpp-deepseek=... after the deepseek suite, on a GGUF of that shape): its rows
 * into result[key], and the lines of a table of both engines' tokens/s. `extra`: further arguments of
 * bench_ctypes.py (DeepSeek's: fewer tokens and repeats, as the peer's README measured it).
 */
function llamaCppBeside(r: ModelBench, flag: string, key: string, extra: string[] = [], spec = args.get(flag)!): string[] {
  const [lib, gguf, label = 'bf16'] = spec.split(':');
  const script = args.get('llamacpp-script') ?? '../shared/peers/llamacpp/bench_ctypes.py';
  const g = modelGrid();
  const argv = [script, '--lib', lib, '--model', gguf, '--ctx', g.contexts.join(','), '--batch', g.batches.filter((b) => b > 1).join(','), '--batch-ctx', g.contexts.join(','), '--prefill', String(g.prefill), ...extra];
  console.log(`\nllama.cpp: python3 ${argv.join(' ')}`);
  const p = spawnSync('python3', argv, { encoding: 'utf8', maxBuffer: 64 * 2 ** 20, env: { ...process.env, LD_LIBRARY_PATH: `${lib}:${process.env.LD_LIBRARY_PATH ?? ''}` } });
  const rows = (p.stdout ?? '').split('\n').filter((l) => l.startsWith('{')).map((l) => ({ ...JSON.parse(l), label }));
  if (p.status !== 0 || !rows.length) {
    const why = `llama.cpp failed (exit ${p.status}): ${(p.stderr ?? '').trim().split('\n').slice(-5).join(' / ')}`;
    console.log(why);
    return [why];
  }
  result[key] = {
    what: `llama.cpp through its C API (${script}, libraries ${lib}) on ${gguf}, in the same device call as the ${r.name} suite`,
    rows,
  };
  const find = (batch: number, context: number) => rows.find((x) => (batch === 1 ? x.kind === 'decode' : x.kind === 'batched')
    && x.batch === batch && x.context === context)?.tok_s as number | undefined;
  const lines = [`## Beside llama.cpp (${label}, same call)`, '', '| batch | context | webinfer tokens/s | llama.cpp tokens/s | ratio |', '|---|---|---|---|---|'];
  for (const d of r.decode) {
    const l = find(d.batch, d.context);
    lines.push(`| ${d.batch} | ${d.context} | ${d.tokensPerSecond.toFixed(0)} | ${l ? l.toFixed(0) : '-'} | ${l ? `${(d.tokensPerSecond / l).toFixed(2)}x` : '-'} |`);
  }
  const lp = rows.find((x) => x.kind === 'prefill')?.tok_s as number | undefined;
  if (r.prefill) lines.push(`| prefill ${r.prefill.tokens} | | ${r.prefill.tokensPerSecond.toFixed(0)} | ${lp ? lp.toFixed(0) : '-'} | ${lp ? `${(r.prefill.tokensPerSecond / lp).toFixed(2)}x` : '-'} |`);
  console.log(lines.join('\n'));
  return lines;
}

/** --model-ab=key=value|...: engine.tuning fields the model suites run under a second time. */
const modelAb: Partial<typeof engine.tuning> | null = tuningAb(args.get('model-ab'));
const abLabel = modelAb ? Object.entries(modelAb).map(([k, v]) => `${k}=${v}`).join(', ') : '';

if (suites.includes('model')) {
  const r = await benchModel(engine, ceilings, { config: quick ? SMALL_LLAMA : undefined, name: quick ? 'small Llama (--quick)' : undefined, ...modelGrid() });
  result.model = r;
  const lines = modelLines(r, 'model');
  if (modelAb) {
    const b = await withTuning(engine, modelAb, () => benchModel(engine, ceilings, { config: quick ? SMALL_LLAMA : undefined,
      name: `${quick ? 'small Llama (--quick)' : 'Llama-3.2-1B shape'} with ${abLabel}`, ...modelGrid(), kernels: false }));
    result.modelAb = { tuning: modelAb, ...b };
    lines.push('', `## The same with engine.tuning ${abLabel} (same call)`, '', ...modelLines(b, 'model').slice(4));
  }
  if (args.has('llamacpp')) lines.push('', ...llamaCppBeside(r, 'llamacpp', 'llamacpp'));
  mkdirSync(outDir, { recursive: true });
  writeFileSync(join(outDir, `model-${slug}.md`), `${lines.join('\n')}\n`);
  console.log(`\n${lines.slice(4).join('\n')}`);
}

if (suites.includes('gguf')) {
  // GGUF files (make_gguf.py on the GPU machine: random weights of real shapes), each loaded with its blocks
  // kept as they are, then llama.cpp on the same file.
  const runs: (ModelBench & { file: string; label: string })[] = [];
  const lines: string[] = [];
  for (const spec of (args.get('gguf') ?? '').split(',').filter(Boolean)) {
    const [file, label = file.replace(/^.*\//, '')] = spec.split(':');
    let config: Record<string, unknown> | null = null;
    const t0 = performance.now();
    // DeepSeek's latent cache in blocks of 64, as the deepseek suite (and FlashMLA) has it.
    const head = await loadGGUF(file);
    const mla = head.metadata.get('general.architecture') === 'deepseek2';
    await head.close?.();
    const opts = (name: string, kernels?: boolean) => ({
      config: undefined, name, dtype: label, ...modelGrid(), blockSize: mla ? 64 : undefined, kernels,
      load: async (o: Parameters<NonNullable<Parameters<typeof benchModel>[2]['load']>>[0]) => {
        const g = await loadGGUF(file);
        config = g.config as Record<string, unknown>;
        const m = await engine.loadModel({ weights: g, ...o });
        console.log(`loaded ${file} in ${((performance.now() - t0) / 1000).toFixed(1)} s: ${(m.weightBytes / 2 ** 30).toFixed(2)} GiB of weights on the GPU`);
        return m;
      },
      configOf: () => config,
    });
    const r = await benchModel(engine, ceilings, opts(`${label} (${file.replace(/^.*\//, '')})`));
    const run = { ...r, file, label };
    runs.push(run);
    const ls = modelLines(r, 'gguf');
    ls[0] = `# ${r.name}: GGUF weights (${label}), ${r.cache} KV cache, on ${deviceName}`;
    ls.splice(3, 0, `Weights on the GPU: ${fmt((r.weightBytes ?? NaN) / 2 ** 30, 3)} GiB (the file's blocks, repacked only to whole words).`, '');
    lines.push(...ls, '');
    console.log(`\n${ls.slice(4).join('\n')}`);
    if (modelAb) {
      // --model-ab: the same file once more under these tuning fields (an A/B in one call).
      const b = await withTuning(engine, modelAb, () => benchModel(engine, ceilings, opts(`${label} with ${abLabel}`, false)));
      (run as Record<string, unknown>).ab = { tuning: modelAb, ...b };
      const lb = modelLines(b, 'gguf').slice(4);
      lines.push(`## The same with engine.tuning ${abLabel} (same call)`, '', ...lb, '');
      console.log(`\n${lb.join('\n')}`);
    }
    if (args.has('gguf-llamacpp')) {
      const lb = llamaCppBeside(r, 'gguf-llamacpp', 'llamacppGguf', [], `${args.get('gguf-llamacpp')}:${file}:${label}`);
      (run as Record<string, unknown>).llamacpp = result.llamacppGguf;
      delete result.llamacppGguf;
      lines.push(...lb, '');
    }
  }
  result.gguf = runs;
  mkdirSync(outDir, { recursive: true });
  writeFileSync(join(outDir, `gguf-${slug}.md`), `${lines.join('\n')}`);
}

if (suites.includes('hfquant')) {
  // Issue 30: the Hub's quantized checkpoints (written here first where asked), Q4_K_M and bf16 beside them.
  const log = (s: string) => console.log(s);
  const write = (runs: HfqRun[], quiet: boolean) => writeHfQuantResults({ quiet,
    runs, outDir, slug, device: deviceName, cmd: `${benchCmd} ${process.argv.slice(2).join(' ')}`, runtime: String(result.runtime), ceilings,
    extra: { device: deviceName, date: result.date, runtime: result.runtime, adapter: a, dawnToggles },
    perRun: (r) => {
      const ls = modelLines(r, 'hfquant').slice(4);
      const load = r.source === 'random' ? 'random weights made on the GPU' : `loaded in ${fmt(r.loadSeconds ?? NaN, 1)} s from ${r.path}`
        + `${r.writeSeconds !== undefined ? ` (${fmt((r.fileBytes ?? NaN) / 2 ** 30, 2)} GiB of files, written in ${fmt(r.writeSeconds, 1)} s)` : ''}`;
      return [`## ${r.label}: ${r.cache} KV cache, ${fmt((r.weightBytes ?? NaN) / 2 ** 30, 2)} GiB of weights on the GPU, ${load}`, '', ...ls];
    },
  });
  // --hfquant-from=FILE,...: the runs of earlier calls' hfquant-<device>.json, kept ahead of this call's
  // (which is numbered after them) in the results written.
  const prev: HfqRun[] = (args.get('hfquant-from') ?? '').split(',').filter(Boolean)
    .flatMap((file) => {
      const j = JSON.parse(readFileSync(file, 'utf8')) as { hfquant: HfqRun[]; ceilings?: { readGBs: number } };
      return j.hfquant.map((r) => ({ ...r, call: r.call ?? 1, readGBs: r.readGBs ?? j.ceilings?.readGBs }));
    });
  const call = Math.max(0, ...prev.map((r) => r.call ?? 1)) + 1;
  // --hfquant-wait=S: how long a GGUF file another process is making is waited for (bench/device/issue30.sh).
  const runs = await runHfQuant(engine, ceilings, hfqEntries(args, log), modelGrid(), log,
    { waitSeconds: Number(args.get('hfquant-wait') ?? 0), onRun: (rs) => write([...prev, ...rs], true), call });
  result.hfquant = runs;
  write([...prev, ...runs], false);
}

if (suites.includes('layers')) {
  // Issue 31: BERT, Whisper and gpt-oss shapes with random weights (bench/layers.ts).
  result.layers = await runLayers(engine, ceilings, {
    quick: quick || args.has('layers-quick'), parts: (args.get('layers-parts') ?? 'bert,whisper,t5,gptoss').split(','),
    gptossExperts: (args.get('layers-gptoss') ?? 'mxfp4,bf16').split(',').filter(Boolean),
    outDir, slug, device: deviceName, commit: args.get('commit') ?? 'unknown', cmd: `${benchCmd} ${process.argv.slice(2).join(' ')}`, runtime: String(result.runtime),
    extra: { device: deviceName, date: result.date, runtime: result.runtime, adapter: a, features: engine.features, dawnToggles }, log: (s) => console.log(s),
  });
}

if (suites.includes('spec')) {
  // Issue 45 (bench/speculative.ts): a verification step's cost against a plain step, and batch-1 decoding
  // with an oracle's proposals at k 2/4/8 and forced acceptance 0.5/0.7/0.9, bf16 1B and each --spec-gguf file.
  const gguf = (args.get('spec-gguf') ?? '').split(',').filter(Boolean).map((s) => {
    const at = s.lastIndexOf(':');
    return at > 0 && !s.slice(at + 1).includes('/') ? { path: s.slice(0, at), label: s.slice(at + 1) } : { path: s, label: s.split('/').pop()! };
  });
  // --spec-draft=TARGET:DRAFT:LABEL,...: draft-model setups (GGUF files; a file as its own draft is right every time).
  const drafts = (args.get('spec-draft') ?? '').split(',').filter(Boolean).map((s) => {
    const [target, draft, label] = s.split(':');
    if (!target || !draft) throw new Error(`--spec-draft: expected TARGET.gguf:DRAFT.gguf[:LABEL], got '${s}'`);
    return { target, draft, label: label ?? `${target.split('/').pop()} with the draft ${draft.split('/').pop()}` };
  });
  // --spec-cases=k:rate,...: the end-to-end runs (default k 2/4/8 at 1, k 4 at 0.5/0.7/0.9).
  const specCases = (v: string | undefined) => v?.split(',').map((c) => {
    const [k, rate] = c.split(':').map(Number);
    if (!(Number.isInteger(k) && k > 0 && rate > 0 && rate <= 1)) throw new Error(`--spec-cases: expected k:rate pairs (k a positive integer, rate in (0, 1]), got '${c}'`);
    return { k, rate };
  });
  const r = await runSpeculative(engine, {
    quick, gguf, drafts, ab: modelAb, bf16: !args.has('spec-no-bf16'), cases: specCases(args.get('spec-cases')), log: (s) => console.log(s),
    device: deviceName, commit: args.get('commit') ?? 'unknown', cmd: `${benchCmd} ${process.argv.slice(2).join(' ')}`,
  });
  result.speculative = r.subjects;
  mkdirSync(outDir, { recursive: true });
  const tag = args.get('spec-tag') ? `-${args.get('spec-tag')}` : '';
  writeFileSync(join(outDir, `spec${tag}-${slug}.md`), r.markdown);
  writeFileSync(join(outDir, `spec${tag}-${slug}.svg`), r.svg);
}

if (suites.includes('vision')) {
  // --vision=TEXT.gguf:MMPROJ.gguf[:LABEL],...: llama.cpp's pairs (make_gguf.mjs --shape=gemma3-4b and gemma3-4b-mmproj).
  const pairs = (args.get('vision') ?? '').split(',').filter(Boolean).map((v) => {
    const [text, mmproj, label] = v.split(':');
    if (!text || !mmproj) throw new Error(`--vision: expected TEXT.gguf:MMPROJ.gguf[:LABEL] (pairs separated by commas, so a label holds none), got '${v}'`);
    return { text, mmproj, label: label ?? text.split('/').pop()! };
  });
  if (!pairs.length) throw new Error('--suite=vision: expected --vision=TEXT.gguf:MMPROJ.gguf[:LABEL]');
  const r = await runVision(engine, { pairs, device: deviceName, commit: args.get('commit') ?? 'unknown', cmd: `${benchCmd} ${process.argv.slice(2).join(' ')}`, log: (x) => console.log(x) });
  result.vision = r.results;
  mkdirSync(outDir, { recursive: true });
  writeFileSync(join(outDir, `vision-${slug}.md`), r.markdown);
}

if (suites.includes('deepseek')) {
  // DeepSeek-V2-Lite's shape, its latent cache in f16 and in FlashMLA's fp8_ds_mla (block 64, as FlashMLA).
  const runs: ModelBench[] = [];
  const lines: string[] = [];
  for (const cache of ['f16', 'fp8_ds_mla'] as const) {
    const r = await benchModel(engine, ceilings, { config: quick ? SMALL_DEEPSEEK : DEEPSEEK_V2_LITE, name: quick ? 'small DeepSeek (--quick)' : 'DeepSeek-V2-Lite shape',
      cache, blockSize: 64, ...modelGrid() });
    runs.push(r);
    const ls = modelLines(r, 'deepseek');
    lines.push(...ls, '');
    console.log(`\n${cache} cache:\n${ls.slice(4).join('\n')}`);
    if (modelAb && cache === 'f16') {
      const b = await withTuning(engine, modelAb, () => benchModel(engine, ceilings, { config: quick ? SMALL_DEEPSEEK : DEEPSEEK_V2_LITE,
        name: `${quick ? 'small DeepSeek (--quick)' : 'DeepSeek-V2-Lite shape'} with ${abLabel}`, cache, blockSize: 64, ...modelGrid() }));
      result.deepseekAb = { tuning: modelAb, ...b };
      const lb = modelLines(b, 'deepseek');
      lines.push(`## The same with engine.tuning ${abLabel} (same call)`, '', ...lb.slice(4), '');
      console.log(`\n${cache} cache with ${abLabel}:\n${lb.slice(4).join('\n')}`);
    }
  }
  result.deepseek = runs;
  // llama.cpp's MLA path on a deepseek2 GGUF beside the f16 latent cache's rows.
  if (args.has('llamacpp-deepseek')) lines.push('', ...llamaCppBeside(runs[0], 'llamacpp-deepseek', 'llamacppDeepseek', ['--gen', '32', '--reps', '3']));
  mkdirSync(outDir, { recursive: true });
  writeFileSync(join(outDir, `deepseek-${slug}.md`), `${lines.join('\n')}`);
}

if (args.has('explore-paged')) {
  // The decode kernels under each variant, lanes per row (KT), keys in flight (UK) and target grid,
  // on the decode shapes: --explore-configs=variant:KT:UK:target:prefetch:probe:HS:WG;... (blank fields: the
  // planner's; prefetch 0 turns it off; a sixth field, a diagnostic that leaves parts of the subgroup
  // kernel's work out (tuning.pagedDecodeProbe: 'loads' or 1 its reads alone, 2-4; its check fails by
  // design); then groups sharing a key row (HS), the workgroup size, and for 'subgroup-matrix' the
  // matrix tile's shape (plan.ts DECODE_MMA_SHAPES; its probe is the tile's, tuning.mlaMmaProbe)), then
  // optionally |key=value|... for any other tuning field.
  // Every configuration of a shape is checked and timed in the same interleaved rounds as 'auto'
  // (benchPagedDecode variants; --rounds, default 3 here), over one cache.
  const explorePaged: Record<string, unknown>[] = [];
  const configs = (args.get('explore-configs') ?? 'portable::::;subgroup::::;subgroup:8:::0;subgroup:::256:;subgroup:8::256:0').split(';');
  const saved = engine.tuning;
  // A configuration may end in |key=value|... : further engine.tuning fields (numbers, true/false, strings).
  const parseValue = (v: string): unknown => (v === 'true' ? true : v === 'false' ? false : v !== '' && Number.isFinite(Number(v)) ? Number(v) : v);
  const variants = configs.map((entry) => {
    const [cfg, ...extra] = entry.split('|');
    const [variant, KT, UK, target, pf, probe, HS, WG, shape] = cfg.split(':');
    return {
      name: entry,
      tuning: {
        ...Object.fromEntries(extra.map((kv) => { const [k, v] = kv.split('='); return [k, parseValue(v ?? '')]; })),
        // 'flash': one-token sequences through the flash tile instead of a decode kernel.
        pagedDecodeKernel: variant !== 'flash', pagedDecodeVariant: variant && variant !== 'flash' ? variant : 'auto', pagedDecodeKT: KT ? Number(KT) : undefined, pagedDecodeUK: UK ? Number(UK) : undefined,
        pagedTargetWorkgroups: target ? Number(target) : saved.pagedTargetWorkgroups, pagedDecodePrefetch: pf !== '0',
        pagedDecodeProbe: probe === 'loads' ? 1 : Number(probe || 0),
        pagedDecodeHeadSplit: HS ? Number(HS) : undefined, pagedDecodeWG: WG ? Number(WG) : saved.pagedDecodeWG,
        pagedDecodeMmaShape: shape ? Number(shape) : undefined,
        mlaMmaProbe: variant === 'subgroup-matrix' && probe ? (probe === 'loads' ? 1 : Number(probe)) : saved.mlaMmaProbe,
      },
    };
  });
  const exploreRounds = args.has('rounds') ? rounds : 3;
  for (const sh of llamaDecodeShapes([1, 16, 64], [4096, 32768]).filter((x) => x.batch * x.context <= 16 * 32768)) {
    const r = await benchPagedDecode(engine, sh, ceilings, 5, { rounds: exploreRounds, variants });
    const line = (name: string, ms: number | undefined, spreadPct: number | undefined, pass: boolean, kernel?: string, error?: string) => {
      const gbs = r.kvBytes / ((ms ?? NaN) * 1e6);
      explorePaged.push({ ...sh, cfg: name, ms, spreadPct, gbs, pass, kernel, error });
      console.log(`explore-paged batch ${sh.batch} context ${sh.context} ${name}: ${error ?? `${fmt(ms ?? NaN, 3)} ms, spread ${fmt(spreadPct ?? NaN, 1)}%, `
        + `${fmt(gbs, 0)} GB/s (${fmt((100 * gbs) / ceilings.copyGBs, 1)}%) ${pass ? '' : 'FAIL '}[${kernel ?? '?'}]`}`);
    };
    line('auto', r.timing?.medianMs, r.timing?.spreadPct, r.pass, r.kernel, r.error);
    for (const [name, v] of Object.entries(r.variants ?? {})) line(name, v.timing?.medianMs, v.timing?.spreadPct, v.pass, v.kernel, v.error);
  }
  result.explorePaged = explorePaged;
}

if (args.has('explore')) {
  // Flash under each variant and storage budget the planner can be held to, on one shape: which plan
  // the adapter's limits should pick (notes for tuning, not part of the committed table).
  const L = Number(args.get('explore') === 'true' ? 4096 : args.get('explore'));
  const explore: Record<string, unknown>[] = [];
  for (const flashVariant of ['subgroup', 'portable'] as const) {
    for (const [flashSmemBytes, grids] of [[Infinity, [0, 1, 2, 3, 4, 5, 6]], [32768, [undefined]], [16384, [undefined]]] as const) {
      for (const flashGrid of grids) {
        Object.assign(engine.tuning, { flashVariant, flashSmemBytes, flashGrid });
        const plan = planFlash(engine.limits, engine.features, 64, 64, flashVariant, flashSmemBytes, flashGrid);
        if (!plan) continue;
        const [f] = await benchSdpaShape(engine, { B: 1, Hq: 8, Hkv: 8, Lq: L, Lk: L, D: 64, Dv: 64, dtype: 'f32' }, ['flash'], ceilings, { samples: 5 });
        explore.push({ flashVariant, flashSmemBytes, flashGrid, plan, ms: f.timing?.medianMs, tflops: f.tflops, pass: f.pass });
        console.log(`explore L${L} ${flashVariant} smem<=${flashSmemBytes} grid ${flashGrid ?? 'auto'}: ${JSON.stringify(plan)} -> ${fmt(f.timing?.medianMs ?? NaN, 3)} ms, ${fmt(f.tflops)} TFLOP/s ${f.pass ? '' : `FAIL ${f.error ?? ''}`}`);
      }
    }
  }
  Object.assign(engine.tuning, { flashVariant: 'auto', flashSmemBytes: Infinity, flashGrid: undefined });
  result.explore = explore;
}

/** What the sdpa and paged tables' times are: rounds, warm-ups, spread, the adapter's toggles. */
const roundsText = (what: string, samples: number, perSample: string) => `Each shape is timed in ${rounds} round${rounds > 1 ? 's' : ''} that alternate ${what}: `
  + `within a round each takes ${samples} samples (${perSample}) after a warm-up of its own (≥ 300 ms in the first round, ≥ 100 ms in later ones, so the clocks stay up `
  + `between contenders and shapes). ms is the median of every sample of every round; spread = (max − min of the rounds' medians) / ms. `
  + `Dawn toggles: ${dawnToggles.map((t) => `\`${t}\``).join(', ') || 'none'}.`;
const portableText = (knobs: string) => ` Portable: the same kernels held to their portable variant (${knobs}: no subgroups), checked the same way and timed in the same rounds; `
  + '(x of subgroup) = portable ms / ms of the default (subgroup) path.';

if (sdpaShapes.length) {
  const rows = sdpaRows;
  result.sdpa = rows.map(sdpaJson);
  const withPeer = byShape.some((x) => x.o);
  const withPortable = byShape.some((x) => x.f.portable);
  const withMma = !!ceilings.mmaTflops;
  const lines = [
    `# Dense SDPA: flash vs naive${withPeer ? ' vs ONNX Runtime Web' : ''} on ${deviceName}`, '',
    `Measured ${new Date().toISOString().slice(0, 10)} with \`${benchCmd} --suite=sdpa\` (${result.runtime}). Ceilings measured through WebGPU in the same run: `
    + `f32 FMA ${fmt(ceilings.fmaTflops)} TFLOP/s, copy ${fmt(ceilings.copyGBs, 0)} GB/s, read ${fmt(ceilings.readGBs, 0)} GB/s`
    + (withMma ? `, subgroup matrix (f16 → f32 ${ceilings.mmaConfig}, register-resident multiply-accumulate loop) ${fmt(ceilings.mmaTflops!, 1)} TFLOP/s` : '') + '. '
    + (withMma ? 'Flash tile: f16 rows run the subgroup-matrix tile (flash_mma_core.wgsl) where the adapter offers it; "scalar tile" is the same call held to the scalar subgroup tile (engine.tuning.flashVariant \'subgroup\'), checked and timed in the same rounds, (x) = its ms / flash ms. ' : '')
    + `Times are GPU timestamps per call, inputs rotated over 3 sets; every case was checked against the float64 reference first. `
    + roundsText(`flash${withPortable ? ', flash portable' : ''}, naive${withPeer ? ' and the peer' : ''}`, sdpaSamples, `webinfer's each the mean of 1-20 calls by cost${withPeer ? '; the peer\'s as many calls, each call its own sample' : ''}`)
    + (withPortable ? portableText("engine.tuning.flashVariant 'portable'") : '')
    + (withPeer ? ` The peer is ONNX Runtime Web (${peerInfo?.notes[0] ?? ''}): com.microsoft MultiHeadAttention on the same inputs (q as [B, L, H·D], k and v as [B, H, L, D]), `
      + `the same check, its time the sum of its GPU kernels per call; its device made from the same GPU object (same adapter and toggles), alive beside webinfer's; "vs ORT" is ORT ms / flash ms.`
      + (peerInfo?.notes.slice(1).length ? ` Here: ${peerInfo.notes.slice(1).join('; ')}.` : '')
      + (peerInfo && !peerInfo.f16 ? ' The peer\'s device has no shader-f16: its f16 rows ran in f32 storage (marked).' : '') : ''), '',
    `| dtype | causal | L | flash tile | flash ms | spread | flash TFLOP/s | % of FMA ceiling |${withMma ? ' % of matrix ceiling | scalar tile ms (x) |' : ''}${withPortable ? ' portable ms (x of default) | portable spread |' : ''} naive ms | naive spread | speedup |`
    + `${withPeer ? ' ORT ms | ORT spread | ORT TFLOP/s | speedup vs ORT |' : ''} checks |`,
    `|---|---|---|---|---|---|---|---|${withMma ? '---|---|' : ''}${withPortable ? '---|---|' : ''}---|---|---|${withPeer ? '---|---|---|---|' : ''}---|`,
  ];
  for (const { f, n, o } of byShape) {
    const p = f.portable;
    const portableCols = withPortable
      ? (p?.timing ? ` ${fmt(p.timing.medianMs, 3)} (${fmt(p.timing.medianMs / ms(f), 2)}x) | ${spread(p.timing)} |` : ` ${p?.error ?? '-'} | - |`)
      : '';
    const peerCols = withPeer
      ? (o?.timing ? ` ${fmt(ms(o), 3)}${o.peerDtype ? ` (${o.peerDtype})` : ''} | ${spread(o.timing)} | ${fmt(o.tflops)} | ${speedup(ms(o), ms(f))}x |` : ` ${o?.error ?? '-'} | - | - | - |`)
      : '';
    const sc = f.scalar;
    const mmaCols = withMma
      ? ` ${f.tile?.startsWith('subgroup-matrix') ? fmt((100 * f.tflops) / ceilings.mmaTflops!, 1) : '-'} | ${sc?.timing ? `${fmt(sc.timing.medianMs, 3)} (${fmt(sc.timing.medianMs / ms(f), 2)}x)` : sc?.error ?? '-'} |`
      : '';
    const checks = [f, n, ...(p?.timing ? [p] : []), ...(sc?.timing ? [sc] : []), ...(o?.timing ? [o] : [])].every((r) => r.pass) ? 'pass' : 'FAIL';
    lines.push(`| ${f.shape.dtype} | ${f.shape.causal ? 'yes' : 'no'} | ${f.shape.Lq} | ${f.tile ?? '-'} | ${fmt(ms(f), 3)} | ${spread(f.timing)} | ${fmt(f.tflops)} | ${fmt(f.pctFma, 1)} |`
      + `${mmaCols}${portableCols} ${fmt(ms(n), 3)} | ${spread(n.timing)} | ${fmt(ms(n) / ms(f), 1)}x |${peerCols} ${checks} |`);
  }
  mkdirSync(outDir, { recursive: true });
  writeFileSync(join(outDir, `sdpa-${slug}.md`), `${lines.join('\n')}\n`);
  console.log(`\n${lines.slice(4).join('\n')}`);
}

if (pagedShapes.length) {
  const rows = pagedRows;
  result.paged = rows.map(pagedJson);
  const withPeer = rows.some((r) => r.peer);
  const withPaged = rows.some((r) => r.peerPaged);
  const withPortable = rows.some((r) => r.portable);
  const withFma = rows.some((r) => r.variants?.fma);
  // PagedAttention's kernels, as the first shape it ran reports them.
  const pagedKernels = rows.find((r) => r.peerPaged?.timing?.kernels.length)?.peerPaged?.timing?.kernels;
  const lines = [
    `# Paged decode (Llama-3-8B attention: Hq 32, Hkv 8, D 128, f16 cache, block 16) on ${deviceName}`, '',
    `Measured ${new Date().toISOString().slice(0, 10)} with \`${benchCmd} --suite=paged\` (${result.runtime}). Copy bandwidth measured through WebGPU in the same run: `
    + `${fmt(ceilings.copyGBs, 0)} GB/s (read ${fmt(ceilings.readGBs, 0)} GB/s). KV bytes = batch · context · Hkv · (D + Dv) · 2 B, read once. `
    + 'GPU timestamps per call; small caches rotate over three block sets; sequence 0 checked against the float64 reference first. '
    + roundsText(`webinfer${withPortable ? ', its portable decode' : ''}${withPeer ? ` and the peer${withPaged ? '\'s two ops' : ''}` : ''}`, pagedSamples, `webinfer's each the mean of 3 calls${withPeer ? '; the peer\'s 3 calls each, each call its own sample' : ''}`)
    + (withPortable ? portableText("engine.tuning.pagedDecodeVariant and flashVariant 'portable'") : '')
    + (withFma ? ' Kernel: the decode kernel \'auto\' ran (paged_mla_mma: GQA decode on the subgroup-matrix tile, mla_mma_core.wgsl; paged_decode_sg: the FMA subgroup kernel). '
      + 'FMA ms: the same call held to the FMA subgroup kernel (engine.tuning.pagedDecodeVariant \'subgroup\'), checked the same way and timed in the same rounds.' : '')
    + (withPeer ? ` The peer is ONNX Runtime Web (${peerInfo?.notes[0] ?? ''}): com.microsoft GroupQueryAttention, one decode step per sequence over the same K/V values `
      + 'and query, with the same check. **It reads a dense, contiguous [batch, Hkv, context, D] cache** (no block table: the op has none), '
      + 'its new token written in place (present bound to past); its GB/s count its own cache bytes; "vs ORT" is ORT ms / webinfer ms. '
      + `Its device is made from the same GPU object (same adapter and toggles). Interleaved: timed in the same rounds as webinfer, every cache alive (where together they take at most ${togetherMaxBytes / 2 ** 30} GiB); `
      + '"no": its rounds ran after webinfer\'s cache was freed.'
      + (peerInfo?.notes.slice(1).length ? ` Here: ${peerInfo.notes.slice(1).join('; ')}.` : '')
      + (peerInfo && !peerInfo.f16 ? ' The peer\'s device has no shader-f16, so its cache is f32 (twice the bytes; marked).' : '') : '')
    + (withPaged ? ' ORT paged: the same step as com.microsoft PagedAttention (f16 only) over a paged [blocks, 16, Hkv, D] cache read through the same shuffled block tables, '
      + 'the same check; it also writes the new token\'s K/V into the cache (ScatterKVToPagedCache), which webinfer\'s timed decode does not: '
      + '"ms" is every kernel of its step, "attn ms" all but that write; its GB/s count the KV bytes above over its whole step; "vs ORT paged" is its ms / webinfer ms.'
      + (pagedKernels ? ` Its kernels per step: ${pagedKernels.map((k) => `\`${k}\``).join(', ')}.` : '') : ''), '',
    `| batch | context | KV MB | ms | spread | GB/s of KV | % of copy |${withFma ? ' kernel | FMA ms (x) | FMA spread |' : ''}${withPortable ? ' portable ms (x of default) | portable spread |' : ''}`
    + `${withPeer ? ' ORT ms | ORT spread | ORT GB/s | speedup vs ORT | interleaved |' : ''}`
    + `${withPaged ? ' ORT paged ms | ORT paged attn ms | ORT paged spread | ORT paged GB/s | speedup vs ORT paged |' : ''} check |`,
    `|---|---|---|---|---|---|---|${withFma ? '---|---|---|' : ''}${withPortable ? '---|---|' : ''}${withPeer ? '---|---|---|---|---|' : ''}${withPaged ? '---|---|---|---|---|' : ''}---|`,
    ...rows.map((r) => {
      const p = r.peer, pt = r.portable, pp = r.peerPaged, fm = r.variants?.fma;
      const fmaCols = withFma
        ? ` ${r.kernel?.split(':')[0] ?? '-'} | ${fm?.timing ? `${fmt(fm.timing.medianMs, 3)} (${fmt(fm.timing.medianMs / (r.timing?.medianMs ?? NaN), 2)}x) | ${spread(fm.timing)}` : `${fm?.error ?? '-'} | -`} |`
        : '';
      const portableCols = withPortable
        ? (pt?.timing ? ` ${fmt(pt.timing.medianMs, 3)} (${fmt(pt.timing.medianMs / (r.timing?.medianMs ?? NaN), 2)}x) | ${spread(pt.timing)} |` : ` ${pt?.error ?? '-'} | - |`)
        : '';
      const peerCols = withPeer
        ? (p?.timing ? ` ${fmt(p.timing.medianMs, 3)}${p.dtype !== 'f16' ? ` (${p.dtype})` : ''} | ${spread(p.timing)} | ${fmt(p.gbs, 0)} | ${speedup(p.timing.medianMs, r.timing?.medianMs)}x | ${p.interleaved ? 'yes' : 'no'} |`
          : ` ${p?.error ?? '-'} | - | - | - | ${p ? (p.interleaved ? 'yes' : 'no') : '-'} |`)
        : '';
      const pagedCols = withPaged
        ? (pp?.timing ? ` ${fmt(pp.timing.medianMs, 3)}${pp.interleaved ? '' : ' (not interleaved)'} | ${fmt(pp.timing.restMs ?? NaN, 3)} | ${spread(pp.timing)} | ${fmt(pp.gbs, 0)} | `
          + `${speedup(pp.timing.medianMs, r.timing?.medianMs)}x |` : ` ${pp?.error ?? '-'} | - | - | - | - |`)
        : '';
      const checks = r.pass && (!pt?.timing || pt.pass) && (!fm?.timing || fm.pass) && (!p?.timing || p.pass) && (!pp?.timing || pp.pass) ? 'pass' : 'FAIL';
      return r.error
        ? `| ${r.shape.batch} | ${r.shape.context} | ${fmt(r.kvBytes / 1e6, 1)} | ${r.error} | - | - | - |${fmaCols}${portableCols}${peerCols}${pagedCols} - |`
        : `| ${r.shape.batch} | ${r.shape.context} | ${fmt(r.kvBytes / 1e6, 1)} | ${fmt(r.timing?.medianMs ?? NaN, 3)} | ${spread(r.timing)} | ${fmt(r.gbs, 0)} | ${fmt(r.pctCopy, 1)} |`
          + `${fmaCols}${portableCols}${peerCols}${pagedCols} ${checks} |`;
    }),
  ];
  if (prefillRows.length) {
    lines.push('', 'Paged prefill: one sequence of L new tokens over an f16 cache (Hq 32, Hkv 8, D 128, block 16), f16 queries, causal; '
      + `the last 8 rows of the first and last head checked against the float64 reference; timed in ${rounds} rounds alternating the tile and the scalar tile, `
      + `${quick ? 3 : 5} samples a round after a warm-up (≥ 300 ms, then ≥ 100 ms); ms is the median over every round. `
      + '"scalar" is the same call held to the scalar subgroup tile.', '',
      '| L | tile | ms | spread | TFLOP/s | scalar tile ms (x) | scalar spread | check |', '|---|---|---|---|---|---|---|---|',
      ...prefillRows.map((r) => (r.error ? `| ${r.L} | - | ${r.error} | - | - | - | - | - |`
        : `| ${r.L} | ${r.tile} | ${fmt(r.ms, 3)} | ${fmt(r.spreadPct ?? NaN, 1)}% | ${fmt(r.tflops)} | ${Number.isFinite(r.scalarMs) ? `${fmt(r.scalarMs, 3)} (${fmt(r.scalarMs / r.ms, 2)}x)` : '-'} | `
          + `${Number.isFinite(r.scalarMs) ? `${fmt(r.scalarSpreadPct ?? NaN, 1)}%` : '-'} | ${r.pass && (!Number.isFinite(r.scalarMs) || r.scalarPass) ? 'pass' : 'FAIL'} |`)));
  }
  mkdirSync(outDir, { recursive: true });
  writeFileSync(join(outDir, `paged-${slug}.md`), `${lines.join('\n')}\n`);
  console.log(`\n${lines.slice(4).join('\n')}`);
}

if (args.has('compare')) {
  // How much two runs differ: this run's sdpa and paged times against an earlier results file.
  const before = args.get('compare')!;
  try {
    const prev = JSON.parse(readFileSync(before, 'utf8')) as RunLike;
    const c = compareRuns(prev, result as RunLike);
    result.compare = { file: before, date: prev.date, ...c };
    console.log(`\nthis run against ${before} (${prev.date ?? 'undated'}): ${c.rows.length} times in both, median |change| ${fmt(c.medianAbsPct, 1)}%, largest ${fmt(c.maxAbsPct, 1)}%`);
    for (const r of c.rows) console.log(`  ${r.what}: ${fmt(r.beforeMs, 4)} -> ${fmt(r.afterMs, 4)} ms (${r.changePct >= 0 ? '+' : ''}${fmt(r.changePct, 1)}%)`);
  } catch (e) {
    console.log(`--compare: could not read ${before}: ${(e as Error).message}`);
  }
}

mkdirSync(outDir, { recursive: true });
const file = join(outDir, `${slug}.json`);
// Another run's results in the same folder (several bench calls of one device script write one file):
// its suites this run did not measure stay, this run's header and suites replace the rest.
try {
  const prev = JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
  const kept = Object.keys(prev).filter((k) => !(k in result));
  for (const k of kept) (result as Record<string, unknown>)[k] = prev[k];
  if (kept.length) console.log(`\n${file}: kept ${kept.join(', ')} of the run that wrote it before`);
} catch (e) {
  if ((e as NodeJS.ErrnoException).code !== 'ENOENT') console.log(`${file}: not merged (${(e as Error).message}): written over`);
}
writeFileSync(file, `${JSON.stringify(result, null, 1)}\n`);
for (const [name, svg] of Object.entries(plotResults(result as unknown as ResultsFile))) {
  writeFileSync(join(outDir, `${slug}-${name}`), svg);
}
console.log(`\nwrote ${file} in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
await peer?.destroy();
engine.destroy();
// Leave now: a peer whose kernel never finished (see bench/ort.ts) would keep the process alive, and
// V8 would otherwise finish optimizing ORT's wasm in the background before exiting.
process.exit(process.exitCode ?? 0);
