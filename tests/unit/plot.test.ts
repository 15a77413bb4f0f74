import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { lineChart, plotResults } from '../../bench/plot';

/** The committed H200 results with the peer's rows and fields taken out. */
function withoutPeer() {
  const r = JSON.parse(readFileSync('bench/results/nvidia-h200.json', 'utf8'));
  r.sdpa = r.sdpa.filter((x: { backend: string }) => x.backend !== 'ort');
  r.paged = r.paged.map((x: Record<string, unknown>) => Object.fromEntries(Object.entries(x).filter(([k]) => !k.startsWith('ort'))));
  delete r.peer;
  delete r.llamacpp;
  delete r.llamacppDeepseek;
  return r;
}

describe('benchmark plots', () => {
  it('draws one path and legend entry per series, the ceiling, and log ticks', () => {
    const svg = lineChart({
      title: 'T <1>', xLabel: 'x', yLabel: 'y', logX: true,
      series: [{ name: 'a', color: '#f00', points: [[1024, 1], [2048, 2], [4096, 3]] }, { name: 'b', color: '#00f', dashed: true, points: [[1024, 0.5], [4096, NaN]] }],
      ceiling: { value: 10, label: 'ceiling 10' },
    });
    expect(svg.startsWith('<svg')).toBe(true);
    expect(svg.match(/<path /g)?.length).toBe(2);
    expect(svg).toContain('T &lt;1&gt;');
    expect(svg).toContain('ceiling 10');
    expect(svg).toContain('>2k<');
    expect(svg).toContain('stroke-dasharray="5 3"');
  });

  it('refuses a chart with no finite point', () => {
    expect(() => lineChart({ title: 'empty', xLabel: 'x', yLabel: 'y', series: [{ name: 'a', color: '#000', points: [[1, NaN]] }] })).toThrow("lineChart 'empty': no finite points");
  });

  it('plots every suite of the committed H200 results, with the peer', () => {
    const r = JSON.parse(readFileSync('bench/results/nvidia-h200.json', 'utf8'));
    const svgs = plotResults(r);
    expect(Object.keys(svgs).sort()).toEqual(['deepseek-decode.svg', 'deepseek-roofline.svg', 'gemm-throughput.svg', 'mla-decode.svg', 'model-decode.svg', 'model-roofline.svg', 'paged-decode.svg', 'paged-speedup-vs-peer.svg', 'sdpa-speedup-vs-peer.svg', 'sdpa-speedup.svg', 'sdpa-throughput.svg']);
    // 16 SDPA shapes: 8 webinfer series (flash and naive per dtype and masking) and 4 of the peer, 4 lengths each.
    expect(svgs['sdpa-throughput.svg'].match(/<circle /g)?.length).toBe(48);
    expect(svgs['sdpa-speedup-vs-peer.svg'].match(/<circle /g)?.length).toBe(16);
    // One point per decode shape that both engines ran, for each of the peer's operators (GroupQueryAttention, PagedAttention).
    type Row = { medianMs?: number; ortMs?: number; ortPagedMs?: number };
    const both = r.paged.filter((x: Row) => Number.isFinite(x.medianMs) && Number.isFinite(x.ortMs)).length;
    const bothPaged = r.paged.filter((x: Row) => Number.isFinite(x.medianMs) && Number.isFinite(x.ortPagedMs)).length;
    expect(both).toBeGreaterThan(0);
    expect(bothPaged).toBeGreaterThan(0);
    expect(svgs['paged-speedup-vs-peer.svg'].match(/<circle /g)?.length).toBe(both + bothPaged);
  });

  it('plots the GEMM suite: TFLOP/s against M per layer and contender, under the subgroup-matrix ceiling (the FMA one without it)', () => {
    const r = withoutPeer();
    const layers = new Set(r.gemm.map((x: { shape: { what: string } }) => x.shape.what)).size;
    const names = new Set(r.gemm.flatMap((x: { contenders: { name: string }[] }) => x.contenders.map((c) => c.name))).size;
    let svg = plotResults(r)['gemm-throughput.svg'];
    expect(svg.match(/<circle /g)?.length).toBe(r.gemm.length * names);
    expect(svg.match(/<path /g)?.length).toBe(layers * names);
    expect(svg).toContain('>gate|up mma split<');
    expect(svg).toContain('subgroup-matrix ceiling 600 TFLOP/s (f32 FMA: 59.2)');
    delete r.ceilings.mmaTflops;
    svg = plotResults(r)['gemm-throughput.svg'];
    expect(svg).toContain('f32 FMA ceiling 59.2 TFLOP/s');
  });

  it('titles and ceiling labels come from the results (shape, context; small ceilings keep their digits)', () => {
    const r = withoutPeer();
    let svgs = plotResults(r);
    expect(svgs['sdpa-throughput.svg']).toContain('Dense SDPA, B1 H8 D64');
    expect(svgs['mla-decode.svg']).toContain('MLA decode, context 4096');
    // The committed run has the default on the subgroup matrices and MLA's FMA tile timed beside it.
    expect(svgs['mla-decode.svg']).toContain('absorbed N128 (subgroup-matrix tile)');
    expect(svgs['mla-decode.svg']).toContain("absorbed N128, MLA's FMA tile");
    // A software adapter's run: other context, tiny ceilings.
    r.mla = r.mla.map((x: object) => ({ ...x, context: 64 }));
    r.ceilings = { ...r.ceilings, fmaTflops: 0.0089, copyGBs: 3.2 };
    svgs = plotResults(r);
    expect(svgs['mla-decode.svg']).toContain('MLA decode, context 64');
    expect(svgs['sdpa-throughput.svg']).toContain('f32 FMA ceiling 0.0089 TFLOP/s');
    expect(svgs['paged-decode.svg']).toContain('copy bandwidth 3.20 GB/s');
  });

  it('plots results without a peer (the demo page, --peer=none) as the nine webinfer plots (attention, the GEMM and the two whole models)', () => {
    const r = withoutPeer();
    const svgs = plotResults(r);
    expect(Object.keys(svgs).sort()).toEqual(['deepseek-decode.svg', 'deepseek-roofline.svg', 'gemm-throughput.svg', 'mla-decode.svg', 'model-decode.svg', 'model-roofline.svg', 'paged-decode.svg', 'sdpa-speedup.svg', 'sdpa-throughput.svg']);
    expect(svgs['sdpa-throughput.svg'].match(/<circle /g)?.length).toBe(32);
  });

  it('draws the peer as dotted series and adds the speedup-over-peer plots when peer fields are present', () => {
    const r = withoutPeer();
    // The peer at half of flash's throughput on every shape, and at 4x webinfer's decode time.
    const flash = r.sdpa.filter((x: { backend: string }) => x.backend === 'flash');
    r.sdpa.push(...flash.map((x: { tflops: number }) => ({ ...x, backend: 'ort', tflops: x.tflops / 2 })));
    r.paged = r.paged.map((x: { medianMs: number; gbs: number }) => ({ ...x, ortMs: 4 * x.medianMs, ortGbs: x.gbs / 4, ortDtype: 'f16' }));
    const svgs = plotResults(r);
    expect(Object.keys(svgs).sort()).toEqual(['deepseek-decode.svg', 'deepseek-roofline.svg', 'gemm-throughput.svg', 'mla-decode.svg', 'model-decode.svg', 'model-roofline.svg', 'paged-decode.svg', 'paged-speedup-vs-peer.svg', 'sdpa-speedup-vs-peer.svg', 'sdpa-speedup.svg', 'sdpa-throughput.svg']);
    expect(svgs['sdpa-throughput.svg'].match(/<circle /g)?.length).toBe(48);
    expect(svgs['sdpa-throughput.svg']).toContain('stroke-dasharray="2 3"');
    expect(svgs['sdpa-throughput.svg']).toContain('>ORT f32 causal<');
    // Every speedup point is exactly 2 (flash over the peer) and 4 (decode): the y axis tops out near them.
    expect(svgs['sdpa-speedup-vs-peer.svg'].match(/<circle /g)?.length).toBe(16);
    expect(svgs['sdpa-speedup-vs-peer.svg']).toContain('>parity<');
    expect(svgs['paged-speedup-vs-peer.svg'].match(/<circle /g)?.length).toBe(r.paged.filter((x: { gbs?: number }) => Number.isFinite(x.gbs)).length);
    expect(svgs['paged-decode.svg']).toContain('ORT GQA batch 16 (dense cache)');
  });

  it('draws the peer\'s PagedAttention dash-dotted beside its GQA, with its own speedup series', () => {
    const r = withoutPeer();
    r.paged = r.paged.map((x: { medianMs: number; gbs: number }) => ({ ...x, ortMs: 4 * x.medianMs, ortGbs: x.gbs / 4, ortDtype: 'f16', ortPagedMs: 2 * x.medianMs, ortPagedGbs: x.gbs / 2 }));
    const svgs = plotResults(r);
    const shapes = r.paged.filter((x: { gbs?: number }) => Number.isFinite(x.gbs)).length;
    expect(svgs['paged-decode.svg']).toContain('>ORT PagedAttention batch 16<');
    expect(svgs['paged-decode.svg']).toContain('stroke-dasharray="8 3 2 3"');
    expect(svgs['paged-decode.svg'].match(/<circle /g)?.length).toBe(3 * shapes);
    expect(svgs['paged-speedup-vs-peer.svg']).toContain('(GroupQueryAttention, PagedAttention)');
    expect(svgs['paged-speedup-vs-peer.svg']).toContain('>batch 16, vs PagedAttention<');
    expect(svgs['paged-speedup-vs-peer.svg'].match(/<circle /g)?.length).toBe(2 * shapes);
    // PagedAttention alone (GQA failed everywhere): its speedup plot still drawn.
    r.paged = r.paged.map((x: Record<string, unknown>) => ({ ...x, ortMs: undefined, ortGbs: undefined }));
    const alone = plotResults(r);
    expect(alone['paged-speedup-vs-peer.svg']).toContain('ONNX Runtime Web (PagedAttention)');
    expect(alone['paged-speedup-vs-peer.svg'].match(/<circle /g)?.length).toBe(shapes);
  });

  it('leaves the peer plots out when the peer failed on every shape', () => {
    const r = withoutPeer();
    r.sdpa.push({ ...r.sdpa[0], backend: 'ort', tflops: null, error: 'ORT: something' });
    r.paged = r.paged.map((x: object) => ({ ...x, ortError: 'skipped' }));
    expect(Object.keys(plotResults(r)).sort()).toEqual(['deepseek-decode.svg', 'deepseek-roofline.svg', 'gemm-throughput.svg', 'mla-decode.svg', 'model-decode.svg', 'model-roofline.svg', 'paged-decode.svg', 'sdpa-speedup.svg', 'sdpa-throughput.svg']);
  });

  it('plots DeepSeek runs of two latent caches as one series per cache and context', () => {
    const r = withoutPeer();
    const m = r.model;
    r.deepseek = [{ ...m, name: 'DeepSeek-V2-Lite shape', cache: 'f16' }, { ...m, name: 'DeepSeek-V2-Lite shape', cache: 'fp8_ds_mla', decode: m.decode.map((x: { tokensPerSecond: number }) => ({ ...x, tokensPerSecond: 1.5 * x.tokensPerSecond })) }];
    const svgs = plotResults(r);
    expect(Object.keys(svgs)).toEqual(expect.arrayContaining(['deepseek-decode.svg', 'deepseek-roofline.svg', 'model-decode.svg']));
    const contexts = new Set(m.decode.map((x: { context: number }) => x.context)).size;
    expect(svgs['deepseek-decode.svg'].match(/<path /g)?.length).toBe(2 * contexts);
    expect(svgs['deepseek-decode.svg']).toContain('>fp8_ds_mla cache, context 4096<');
    expect(svgs['deepseek-roofline.svg']).toContain('>wall time, f16 cache, context 1024<');
    expect(svgs['model-decode.svg']).toContain('>context 4096<');
  });

  it("draws llama.cpp's whole-model rows beside the model's decode, dashed, at the same contexts", () => {
    const r = withoutPeer();
    const contexts = [...new Set(r.model.decode.map((x: { context: number }) => x.context))] as number[];
    r.llamacpp = { rows: [
      { kind: 'prefill', tokens: 512, tok_s: 15000 },
      ...contexts.flatMap((context) => [{ kind: 'decode', batch: 1, context, tok_s: 600 }, { kind: 'batched', batch: 8, context, tok_s: 1300 }, { kind: 'batched', batch: 32, context, tok_s: 4000 }]),
    ] };
    const svg = plotResults(r)['model-decode.svg'];
    expect(svg.match(/<path /g)?.length).toBe(2 * contexts.length);
    expect(svg).toContain(`>llama.cpp, context ${contexts[0]}<`);
    expect(svg).toContain(`>webinfer, context ${contexts[0]}<`);
    expect(svg).toContain('webinfer and llama.cpp');
    // Without the peer's rows the legend names the contexts alone.
    delete r.llamacpp;
    expect(plotResults(r)['model-decode.svg']).not.toContain('llama.cpp');
  });

  it("draws llama.cpp's deepseek2 rows once beside DeepSeek's two latent caches", () => {
    const r = withoutPeer();
    const m = r.model;
    r.deepseek = [{ ...m, name: 'DeepSeek-V2-Lite shape', cache: 'f16' }, { ...m, name: 'DeepSeek-V2-Lite shape', cache: 'fp8_ds_mla' }];
    const contexts = [...new Set(m.decode.map((x: { context: number }) => x.context))] as number[];
    r.llamacppDeepseek = { rows: contexts.flatMap((context) => [{ kind: 'decode', batch: 1, context, tok_s: 250 }, { kind: 'batched', batch: 8, context, tok_s: 200 }]) };
    const svg = plotResults(r)['deepseek-decode.svg'];
    expect(svg.match(/<path /g)?.length).toBe(3 * contexts.length);
    expect(svg.match(/>llama\.cpp, context /g)?.length).toBe(contexts.length);
    expect(svg).toContain('>webinfer, f16 cache, context');
    expect(plotResults(r)['model-decode.svg']).not.toContain('llama.cpp');
  });
});
