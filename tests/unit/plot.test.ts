import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { lineChart, plotResults } from '../../bench/plot';

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

  it('plots every suite of the committed H200 results', () => {
    const r = JSON.parse(readFileSync('bench/results/nvidia-h200.json', 'utf8'));
    const svgs = plotResults(r);
    expect(Object.keys(svgs).sort()).toEqual(['mla-decode.svg', 'paged-decode.svg', 'sdpa-speedup.svg', 'sdpa-throughput.svg']);
    // 16 SDPA shapes: 8 series (flash and naive per dtype and masking), each with 4 lengths.
    expect(svgs['sdpa-throughput.svg'].match(/<circle /g)?.length).toBe(32);
  });
});
