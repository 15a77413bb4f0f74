// SVG plots of a benchmark results file, dependency-free so the CLI, the demo page and Deno can all
// draw them: line charts with a log-2 x axis (length, context), a dashed ceiling line, and legends.
//   sdpa:  flash and naive (and the peer, where measured) TFLOP/s against length, per dtype and masking,
//          under the FMA ceiling; flash over naive; flash over the peer
//   paged: KV GB/s against context, per batch (the peer's GroupQueryAttention dotted, its PagedAttention
//          dash-dotted), under the copy ceiling; webinfer over each of the peer's ops
//   mla:   absorbed and unabsorbed milliseconds per shape (log y), MLA's FMA tile dotted where the default ran
//          on the subgroup matrices (no peer: ORT has no MLA)
//   model, deepseek: decode tokens/s against batch per context (and cache), and the share of the bandwidth roofline
//   gemm:  TFLOP/s against rows M per layer shape, FMA (dashed) and the subgroup-matrix GEMM (split solid,
//          f16 x dotted), under the subgroup-matrix ceiling (the FMA one where there are no matrices)
// Peer fields are optional: results written without a peer (or by older versions) plot as before.

export interface Series {
  name: string; points: [number, number][]; color: string;
  dashed?: boolean;
  /** An explicit SVG dash pattern (wins over `dashed`), e.g. the peer's dotted line. */
  dash?: string;
}

/** The peer's series: dotted, so flash (solid) and naive (dashed) stay told apart. */
const PEER_DASH = '2 3';
/** The peer's second paged-decode op (PagedAttention): dash-dotted. */
const PEER_PAGED_DASH = '8 3 2 3';

export interface ChartOptions {
  title: string; xLabel: string; yLabel: string;
  series: Series[];
  /** A horizontal reference line (a ceiling), labelled. */
  ceiling?: { value: number; label: string };
  logX?: boolean; logY?: boolean;
  width?: number; height?: number;
}

const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#17becf', '#7f7f7f'];

function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

function niceTicks(lo: number, hi: number, n = 5): number[] {
  const span = hi - lo || Math.abs(hi) || 1;
  const step = 10 ** Math.floor(Math.log10(span / n));
  const mult = [1, 2, 5, 10].find((m) => span / (m * step) <= n) ?? 10;
  const s = mult * step;
  const out: number[] = [];
  for (let v = Math.ceil(lo / s) * s; v <= hi + 1e-9 * span; v += s) out.push(Number(v.toPrecision(12)));
  return out;
}

function fmtTick(v: number): string {
  if (v === 0) return '0';
  if (Math.abs(v) >= 1000) return v >= 1024 && Number.isInteger(Math.log2(v)) ? `${v / 1024}k` : `${+(v / 1000).toPrecision(3)}k`;
  return `${+v.toPrecision(3)}`;
}

/** One line chart as a standalone SVG document. */
export function lineChart(o: ChartOptions): string {
  const W = o.width ?? 640, H = o.height ?? 400;
  const m = { l: 64, r: 16, t: 40, b: 52 };
  const pw = W - m.l - m.r, ph = H - m.t - m.b;
  const pts = o.series.flatMap((s) => s.points).filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y) && (!o.logY || y > 0));
  if (!pts.length) throw new Error(`lineChart '${o.title}': no finite points`);
  const tx = (x: number) => (o.logX ? Math.log2(x) : x);
  const ty = (y: number) => (o.logY ? Math.log10(y) : y);
  const xs = pts.map(([x]) => tx(x));
  const ys = pts.map(([, y]) => ty(y)).concat(o.ceiling ? [ty(o.ceiling.value)] : []);
  const x0 = Math.min(...xs), x1 = Math.max(...xs);
  const y0 = o.logY ? Math.floor(Math.min(...ys)) : 0, y1 = o.logY ? Math.ceil(Math.max(...ys)) : Math.max(...ys) * 1.08;
  const X = (x: number) => m.l + ((tx(x) - x0) / (x1 - x0 || 1)) * pw;
  const Y = (y: number) => m.t + ph - ((ty(y) - y0) / (y1 - y0 || 1)) * ph;
  const parts: string[] = [];
  parts.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`);
  parts.push(`<rect width="${W}" height="${H}" fill="white"/>`);
  parts.push(`<text x="${W / 2}" y="22" text-anchor="middle" font-size="14" font-weight="bold">${esc(o.title)}</text>`);
  // Axes and grid.
  const xticks = o.logX ? Array.from({ length: Math.round(x1 - x0) + 1 }, (_, i) => 2 ** (x0 + i)) : niceTicks(x0, x1);
  for (const v of xticks) {
    const x = X(v);
    parts.push(`<line x1="${x}" y1="${m.t}" x2="${x}" y2="${m.t + ph}" stroke="#eee"/>`);
    parts.push(`<text x="${x}" y="${m.t + ph + 16}" text-anchor="middle">${fmtTick(v)}</text>`);
  }
  const yticks = o.logY ? Array.from({ length: y1 - y0 + 1 }, (_, i) => 10 ** (y0 + i)) : niceTicks(0, y1);
  for (const v of yticks) {
    const y = Y(v);
    parts.push(`<line x1="${m.l}" y1="${y}" x2="${m.l + pw}" y2="${y}" stroke="#eee"/>`);
    parts.push(`<text x="${m.l - 6}" y="${y + 4}" text-anchor="end">${fmtTick(v)}</text>`);
  }
  parts.push(`<rect x="${m.l}" y="${m.t}" width="${pw}" height="${ph}" fill="none" stroke="#444"/>`);
  parts.push(`<text x="${m.l + pw / 2}" y="${H - 12}" text-anchor="middle">${esc(o.xLabel)}</text>`);
  parts.push(`<text transform="translate(16 ${m.t + ph / 2}) rotate(-90)" text-anchor="middle">${esc(o.yLabel)}</text>`);
  if (o.ceiling) {
    const y = Y(o.ceiling.value);
    parts.push(`<line x1="${m.l}" y1="${y}" x2="${m.l + pw}" y2="${y}" stroke="#000" stroke-dasharray="6 4"/>`);
    parts.push(`<text x="${m.l + pw - 4}" y="${y - 5}" text-anchor="end">${esc(o.ceiling.label)}</text>`);
  }
  // Series, then the legend over a light background (so lines crossing it leave its text readable).
  const legend: string[] = [];
  let longest = 0;
  o.series.forEach((s, i) => {
    const p = s.points.filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y) && (!o.logY || y > 0));
    if (!p.length) return;
    const d = p.map(([x, y], j) => `${j ? 'L' : 'M'}${X(x).toFixed(1)},${Y(y).toFixed(1)}`).join(' ');
    const dash = s.dash ?? (s.dashed ? '5 3' : undefined);
    parts.push(`<path d="${d}" fill="none" stroke="${s.color}" stroke-width="2"${dash ? ` stroke-dasharray="${dash}"` : ''}/>`);
    for (const [x, y] of p) parts.push(`<circle cx="${X(x).toFixed(1)}" cy="${Y(y).toFixed(1)}" r="3" fill="${s.color}"/>`);
    const ly = m.t + 10 + 16 * i;
    legend.push(`<line x1="${m.l + 10}" y1="${ly}" x2="${m.l + 30}" y2="${ly}" stroke="${s.color}" stroke-width="2"${dash ? ` stroke-dasharray="${dash}"` : ''}/>`);
    legend.push(`<text x="${m.l + 36}" y="${ly + 4}">${esc(s.name)}</text>`);
    longest = Math.max(longest, s.name.length);
  });
  if (legend.length) {
    // About 6.5 px a character at 12 px sans-serif.
    parts.push(`<rect x="${m.l + 4}" y="${m.t + 2}" width="${Math.ceil(38 + 6.5 * longest)}" height="${16 * o.series.length}" fill="white" fill-opacity="0.85"/>`);
    parts.push(...legend);
  }
  parts.push('</svg>');
  return `${parts.join('\n')}\n`;
}

export interface ResultsFile {
  device: string;
  ceilings: { fmaTflops: number; copyGBs: number; readGBs: number; mmaTflops?: number };
  /** backend 'flash', 'naive', or 'ort' (the peer; optional). */
  sdpa?: { dtype: string; causal?: boolean; Lq: number; backend: string; tflops: number; medianMs?: number; peerDtype?: string; B?: number; Hq?: number; D?: number }[];
  /** ort*: the peer's decode of the same step as GroupQueryAttention, ortPaged*: as PagedAttention (optional). */
  paged?: { batch: number; context: number; gbs: number; medianMs?: number; ortMs?: number; ortGbs?: number; ortDtype?: string; ortPagedMs?: number; ortPagedGbs?: number }[];
  peer?: { name: string; error?: string };
  mla?: { N: number; batch: number; context?: number; absorbedMs?: number; unabsorbedMs?: number; pctRoofline?: number;
          tile?: string; tiles?: Record<string, { ms: number }> }[];
  /** Whole-model decode (bench/model.ts). */
  model?: { name: string; cache?: string; decode: { batch: number; context: number; tokensPerSecond: number; pctRooflineGpu: number; pctRooflineWall: number }[] };
  /** DeepSeek-V2-Lite-shaped decode, one run per latent cache dtype (bench/model.ts). */
  deepseek?: NonNullable<ResultsFile['model']>[];
  /** The prefill GEMM (bench/gemm.ts): contenders 'fma', 'mma split', 'mma f16 x' per layer shape. */
  gemm?: { shape: { M: number; N: number; K: number; what: string }; contenders: { name: string; tflops: number }[] }[];
  /** llama.cpp's whole-model rows on the same shape (../shared/peers/llamacpp/bench_ctypes.py: 'decode' at batch 1,
   *  'batched' above), measured in the same device call as `model`. */
  llamacpp?: { what?: string; rows: { kind: string; batch?: number; context?: number; tok_s: number }[] };
  /** The same beside `deepseek`, on a deepseek2 GGUF (llama.cpp's MLA path). */
  llamacppDeepseek?: ResultsFile['llamacpp'];
  /** A serving step's host cost (bench/step.ts). */
  step?: { batch: number; context: number; gpuHostMs: number; gpuDeviceMs: number }[];
}

/** A value with three significant digits at most (ceilings of software adapters are small). */
function sig(x: number): string {
  if (!Number.isFinite(x)) return '?';
  return x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x >= 1 ? x.toFixed(2) : x.toPrecision(2);
}

/** "B1 H8 D64" when every row shares one (B, Hq, D); else the lengths vary only in L anyway. */
function sdpaShapeLabel(rows: NonNullable<ResultsFile['sdpa']>): string {
  const one = (k: 'B' | 'Hq' | 'D') => { const v = [...new Set(rows.map((x) => x[k]))]; return v.length === 1 && v[0] !== undefined ? String(v[0]) : '?'; };
  return `B${one('B')} H${one('Hq')} D${one('D')}`;
}

type ModelRun = NonNullable<ResultsFile['model']>;

/**
 * A whole model's decode: tokens/s against batch, and the share of the bandwidth roofline against the
 * GPU and the wall time; one series per context (and per KV cache, when runs differ in it).
 */
function modelPlots(prefix: string, runs: ModelRun[], device: string, peer?: ResultsFile['llamacpp']): Record<string, string> {
  const tag = (m: ModelRun, c: number) => (runs.length > 1 ? `${m.cache ?? '?'} cache, context ${c}` : `context ${c}`);
  const lines = runs.flatMap((m) => [...new Set(m.decode.map((x) => x.context))].map((c) => ({ m, c, d: m.decode.filter((x) => x.context === c) })));
  const name = runs[0].name;
  // The peer at the same contexts, dashed in the same colours.
  const peerRows = (peer?.rows ?? []).filter((x) => (x.kind === 'decode' || x.kind === 'batched') && x.context !== undefined);
  // (Beside the first run's lines only: the peer keeps its own cache, whatever webinfer's runs differ in.)
  const peerSeries: Series[] = lines.flatMap(({ m, c }, i) => {
    if (m !== runs[0]) return [];
    const pts = peerRows.filter((x) => x.context === c).map((x) => [x.batch ?? 1, x.tok_s] as [number, number]).sort((a, b) => a[0] - b[0]);
    return pts.length ? [{ name: `llama.cpp, context ${c}`, color: COLORS[i % COLORS.length], dash: PEER_DASH, points: pts }] : [];
  });
  return {
    [`${prefix}-decode.svg`]: lineChart({
      title: `${name} decode${peerSeries.length ? ', webinfer and llama.cpp' : ''} — ${device}`, xLabel: 'batch (sequences)', yLabel: 'tokens/s (log)', logX: true, logY: true,
      series: [...lines.map(({ m, c, d }, i) => ({ name: `${peerSeries.length ? 'webinfer, ' : ''}${tag(m, c)}`, color: COLORS[i % COLORS.length], points: d.map((x) => [x.batch, x.tokensPerSecond] as [number, number]) })),
        ...peerSeries],
    }),
    [`${prefix}-roofline.svg`]: lineChart({
      title: `${name} decode: share of the bandwidth roofline — ${device}`, xLabel: 'batch (sequences)', yLabel: '% of roofline (weights + K/V read / read ceiling)', logX: true,
      series: lines.flatMap(({ m, c, d }, i) => [
        { name: `GPU time, ${tag(m, c)}`, color: COLORS[i % COLORS.length], points: d.map((x) => [x.batch, x.pctRooflineGpu] as [number, number]) },
        { name: `wall time, ${tag(m, c)}`, color: COLORS[i % COLORS.length], dashed: true, points: d.map((x) => [x.batch, x.pctRooflineWall] as [number, number]) },
      ]),
      ceiling: { value: 100, label: 'roofline' },
    }),
  };
}

/** The SVG plots of one results file, by file name. */
export function plotResults(r: ResultsFile): Record<string, string> {
  const out: Record<string, string> = {};
  if (r.sdpa?.length) {
    const sdpa = r.sdpa;
    const key = (x: { dtype: string; causal?: boolean }) => `${x.dtype}${x.causal ? ' causal' : ''}`;
    const groups = [...new Set(sdpa.map(key))];
    const hasPeer = sdpa.some((x) => x.backend === 'ort' && Number.isFinite(x.tflops));
    const series: Series[] = [];
    groups.forEach((g, i) => {
      for (const backend of ['flash', 'naive', 'ort']) {
        const rows = sdpa.filter((x) => key(x) === g && x.backend === backend);
        const pts = rows.map((x) => [x.Lq, x.tflops] as [number, number]);
        const peerDtype = rows.find((x) => x.peerDtype)?.peerDtype;
        const name = backend === 'ort' ? `ORT ${g}${peerDtype ? ` (ran ${peerDtype})` : ''}` : `${backend} ${g}`;
        if (pts.some(([, y]) => Number.isFinite(y))) {
          series.push({ name, points: pts, color: COLORS[i % COLORS.length], dashed: backend === 'naive', ...(backend === 'ort' ? { dash: PEER_DASH } : {}) });
        }
      }
    });
    out['sdpa-throughput.svg'] = lineChart({
      title: `Dense SDPA, ${sdpaShapeLabel(sdpa)}${hasPeer ? ', webinfer and ONNX Runtime Web' : ''} — ${r.device}`, xLabel: 'sequence length L (Lq = Lk)', yLabel: 'TFLOP/s',
      series, logX: true, ceiling: { value: r.ceilings.fmaTflops, label: `f32 FMA ceiling ${sig(r.ceilings.fmaTflops)} TFLOP/s` },
      ...(series.length > 12 ? { height: 400 + 16 * (series.length - 12) } : {}),
    });
    // Speedup of flash over another backend at the same shape, from throughput (same FLOP count).
    const over = (other: string) => groups.map((g, i) => ({
      name: g, color: COLORS[i % COLORS.length],
      points: sdpa.filter((x) => key(x) === g && x.backend === 'flash').map((f) => {
        const o = sdpa.find((x) => x.backend === other && key(x) === g && x.Lq === f.Lq);
        return [f.Lq, o ? f.tflops / o.tflops : NaN] as [number, number];
      }),
    }));
    out['sdpa-speedup.svg'] = lineChart({
      title: `Flash over naive — ${r.device}`, xLabel: 'sequence length L', yLabel: 'speedup (x)', logX: true,
      series: over('naive'),
    });
    if (hasPeer) {
      out['sdpa-speedup-vs-peer.svg'] = lineChart({
        title: `Flash over ONNX Runtime Web (MultiHeadAttention) — ${r.device}`, xLabel: 'sequence length L', yLabel: 'speedup (x; above 1: webinfer faster)', logX: true,
        series: over('ort'), ceiling: { value: 1, label: 'parity' },
      });
    }
  }
  if (r.paged?.length) {
    const paged = r.paged;
    const batches = [...new Set(paged.map((x) => x.batch))];
    const hasPeer = paged.some((x) => Number.isFinite(x.ortGbs ?? NaN));
    const hasPaged = paged.some((x) => Number.isFinite(x.ortPagedGbs ?? NaN));
    const peerF32 = paged.some((x) => x.ortDtype === 'f32');
    const ofBatch = (b: number, y: (x: typeof paged[number]) => number | undefined) => paged.filter((x) => x.batch === b).map((x) => [x.context, y(x) ?? NaN] as [number, number]);
    const series = batches.flatMap((b, i) => [
      { name: `batch ${b}`, color: COLORS[i % COLORS.length], points: ofBatch(b, (x) => x.gbs) },
      ...(hasPeer ? [{ name: `ORT GQA batch ${b} (dense${peerF32 ? ' f32' : ''} cache)`, color: COLORS[i % COLORS.length], dash: PEER_DASH, points: ofBatch(b, (x) => x.ortGbs) }] : []),
      ...(hasPaged ? [{ name: `ORT PagedAttention batch ${b}`, color: COLORS[i % COLORS.length], dash: PEER_PAGED_DASH, points: ofBatch(b, (x) => x.ortPagedGbs) }] : []),
    ]);
    out['paged-decode.svg'] = lineChart({
      title: `Paged decode, Hq32 Hkv8 D128 f16 — ${r.device}`, xLabel: 'context (tokens)', yLabel: 'GB/s of KV read', logX: true, series,
      ceiling: { value: r.ceilings.copyGBs, label: `copy bandwidth ${sig(r.ceilings.copyGBs)} GB/s` },
      ...(series.length > 12 ? { height: 400 + 16 * (series.length - 12) } : {}),
    });
    if (hasPeer || hasPaged) {
      const ops = [...(hasPeer ? ['GroupQueryAttention'] : []), ...(hasPaged ? ['PagedAttention'] : [])];
      out['paged-speedup-vs-peer.svg'] = lineChart({
        title: `Paged decode over ONNX Runtime Web (${ops.join(', ')}) — ${r.device}`, xLabel: 'context (tokens)',
        yLabel: 'speedup, ORT ms / webinfer ms', logX: true, ceiling: { value: 1, label: 'parity' },
        series: batches.flatMap((b, i) => [
          ...(hasPeer ? [{ name: `batch ${b}${hasPaged ? ', vs GQA' : ''}`, color: COLORS[i % COLORS.length], points: ofBatch(b, (x) => (x.ortMs ?? NaN) / (x.medianMs ?? NaN)) }] : []),
          ...(hasPaged ? [{ name: `batch ${b}, vs PagedAttention`, color: COLORS[i % COLORS.length], dash: PEER_PAGED_DASH,
            points: ofBatch(b, (x) => (x.ortPagedMs ?? NaN) / (x.medianMs ?? NaN)) }] : []),
        ]),
      });
    }
  }
  if (r.mla?.length) {
    const heads = [...new Set(r.mla.map((x) => x.N))];
    out['mla-decode.svg'] = lineChart({
      title: `MLA decode, context ${[...new Set(r.mla.map((x) => x.context ?? NaN))].filter(Number.isFinite).join('/') || '?'} — ${r.device}`, xLabel: 'batch', yLabel: 'milliseconds per call (log)', logX: true, logY: true,
      series: heads.flatMap((N, i) => {
        const rows = r.mla!.filter((x) => x.N === N);
        // Where the default ran on the subgroup matrices, MLA's own (FMA) tile timed in the same rounds.
        const fma = rows.map((x) => [x.batch, Object.entries(x.tiles ?? {}).find(([k]) => k.startsWith('mla tile') && !k.endsWith('(default)'))?.[1].ms ?? NaN] as [number, number]);
        const onMatrices = rows.some((x) => x.tile?.startsWith('subgroup-matrix'));
        return [
          { name: `absorbed N${N}${onMatrices ? ' (subgroup-matrix tile)' : ''}`, color: COLORS[i % COLORS.length], points: rows.map((x) => [x.batch, x.absorbedMs ?? NaN] as [number, number]) },
          ...(fma.some(([, ms]) => Number.isFinite(ms)) ? [{ name: `absorbed N${N}, MLA's FMA tile`, color: COLORS[i % COLORS.length], dash: PEER_DASH, points: fma }] : []),
          { name: `unabsorbed N${N}`, color: COLORS[i % COLORS.length], dashed: true, points: rows.map((x) => [x.batch, x.unabsorbedMs ?? NaN] as [number, number]) },
        ];
      }),
    });
  }
  if (r.gemm?.length) {
    const gemm = r.gemm;
    const layers = [...new Set(gemm.map((x) => x.shape.what))];
    const names = [...new Set(gemm.flatMap((x) => x.contenders.map((c) => c.name)))];
    const style = (n: string): Partial<Series> => (n === 'fma' ? { dashed: true } : n === 'mma split' ? {} : { dash: PEER_DASH });
    const series: Series[] = layers.flatMap((l, i) => names.map((n) => ({
      name: `${l} ${n}`, color: COLORS[i % COLORS.length], ...style(n),
      points: gemm.filter((x) => x.shape.what === l).map((x) => [x.shape.M, x.contenders.find((c) => c.name === n)?.tflops ?? NaN] as [number, number]),
    }))).filter((s) => s.points.some(([, y]) => Number.isFinite(y)));
    const mma = r.ceilings.mmaTflops;
    out['gemm-throughput.svg'] = lineChart({
      title: `Prefill GEMM, Llama-3-8B layers, bf16 W — ${r.device}`,
      xLabel: 'rows M (tokens)', yLabel: 'TFLOP/s', logX: true, series,
      ceiling: mma ? { value: mma, label: `subgroup-matrix ceiling ${sig(mma)} TFLOP/s (f32 FMA: ${sig(r.ceilings.fmaTflops)})` }
        : { value: r.ceilings.fmaTflops, label: `f32 FMA ceiling ${sig(r.ceilings.fmaTflops)} TFLOP/s` },
      ...(series.length > 12 ? { height: 400 + 16 * (series.length - 12) } : {}),
    });
  }
  if (r.model?.decode?.length) Object.assign(out, modelPlots('model', [r.model], r.device, r.llamacpp));
  const ds = (r.deepseek ?? []).filter((m) => m.decode?.length);
  if (ds.length) Object.assign(out, modelPlots('deepseek', ds, r.device, r.llamacppDeepseek));
  return out;
}
