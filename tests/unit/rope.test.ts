import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { rng } from '../../src/core/random';
import { parseConfig } from '../../src/models/config';
import { ropeParameters, ropeTable, SUPPORTED_ROPE_TYPES, yarnGetMscale, type RopeConfig } from '../../src/models/rope';

const goldens = join(dirname(fileURLToPath(import.meta.url)), '../../../shared/goldens');

function rope(o: Partial<RopeConfig>): RopeConfig {
  return {
    type: 'default',
    theta: 10000,
    rotaryDim: 8,
    interleaved: false,
    maxPositionEmbeddings: 2048,
    factor: null,
    originalMaxPositionEmbeddings: null,
    lowFreqFactor: null,
    highFreqFactor: null,
    betaFast: null,
    betaSlow: null,
    mscale: null,
    mscaleAllDim: null,
    attentionFactor: null,
    truncate: true,
    ...o,
  };
}

/** |a - b| <= rel·|b| elementwise. */
function expectRel(a: ArrayLike<number>, b: number[], rel: number) {
  expect(a.length).toBe(b.length);
  for (let i = 0; i < b.length; i++) expect(Math.abs(a[i]! - b[i]!), `element ${i}: ${a[i]} vs ${b[i]}`).toBeLessThanOrEqual(rel * Math.abs(b[i]!));
}

describe('RoPE inverse frequencies, by type (values derived by hand)', () => {
  it('default: theta^(-2i/d), rounded to f32 as torch does', () => {
    const { invFreq, attentionScaling } = ropeParameters(rope({ rotaryDim: 4 }));
    // 10000^0 = 1 and 10000^(-1/2) = 0.01
    expect(Array.from(invFreq)).toEqual([1, Math.fround(0.01)]);
    expect(attentionScaling).toBe(1);
    expectRel(ropeParameters(rope({ rotaryDim: 8 })).invFreq, [1, 0.1, 0.01, 0.001], 1e-7);
  });

  it('linear: every frequency divided by factor', () => {
    expectRel(ropeParameters(rope({ type: 'linear', factor: 4 })).invFreq, [0.25, 0.025, 0.0025, 0.00025], 1e-7);
  });

  it("llama3: the three bands (kept, smoothed, divided by factor)", () => {
    // d = 8, theta 1e4: freqs 1, 0.1, 0.01, 0.001; wavelengths 2π/f = 6.28, 62.8, 628.3, 6283.2.
    // original context 1024, low/high freq factors 1/4: long wavelength > 1024, short < 256.
    const r = rope({ type: 'llama3', factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositionEmbeddings: 1024 });
    const smooth = (1024 / ((2 * Math.PI) / 0.01) - 1) / (4 - 1); // 0.2099...
    const medium = ((1 - smooth) * 0.01) / 8 + smooth * 0.01; // 0.0030868...
    expect(medium).toBeCloseTo(0.0030868, 6);
    expectRel(ropeParameters(r).invFreq, [1, 0.1, medium, 0.001 / 8], 2e-7);
    expect(ropeParameters(r).attentionScaling).toBe(1);
  });

  it("yarn: the ramp between extrapolated and interpolated frequencies, and the mscale factor", () => {
    // DeepSeek V3 golden: d = 16, theta 1e4, factor 4, original context 64, beta 32/1.
    // correction dims: 16·ln(64/(2π·32))/(2 ln 1e4) = -0.994 -> floor -1 -> 0; 16·ln(64/2π)/(2 ln 1e4) = 2.016 -> ceil 3.
    // ramp(i) = clamp(i/3), inv = extra·(1 - ramp) + extra/4·ramp = extra·(1 - 0.75·ramp), extra = 10^(-i/2).
    const r = rope({ type: 'yarn', rotaryDim: 16, factor: 4, originalMaxPositionEmbeddings: 64, betaFast: 32, betaSlow: 1, mscale: 1, mscaleAllDim: 1 });
    const want = Array.from({ length: 8 }, (_, i) => Math.pow(10, -i / 2) * (1 - 0.75 * Math.min(1, i / 3)));
    expect(want.slice(0, 4).map((x) => +x.toPrecision(6))).toEqual([1, 0.237171, 0.05, 0.00790569]);
    const p = ropeParameters(r);
    expectRel(p.invFreq, want, 3e-7);
    expect(p.attentionScaling).toBe(1); // mscale / mscale_all_dim both 1: the ratio cancels
    // No mscale pair: 0.1·ln 4 + 1; with mscale only (mscale_all_dim 0): the same; explicit: itself.
    expect(ropeParameters({ ...r, mscale: null, mscaleAllDim: null }).attentionScaling).toBeCloseTo(1.1386294361, 10);
    expect(ropeParameters({ ...r, mscale: 1, mscaleAllDim: 0 }).attentionScaling).toBeCloseTo(1.1386294361, 10);
    expect(ropeParameters({ ...r, mscale: 0.707, mscaleAllDim: 1 }).attentionScaling).toBeCloseTo((0.0707 * Math.log(4) + 1) / (0.1 * Math.log(4) + 1), 12);
    expect(ropeParameters({ ...r, attentionFactor: 0.5 }).attentionScaling).toBe(0.5);
    // Defaults: beta 32/1, and a null factor is max_position_embeddings / original (256 / 64 = 4).
    expectRel(ropeParameters({ ...r, betaFast: null, betaSlow: null, factor: null, maxPositionEmbeddings: 256 }).invFreq, want, 3e-7);
    // Without truncation the ramp runs over [0, 2.016]: ramp(1) = 1/2.016.
    const hi = (16 * Math.log(64 / (2 * Math.PI))) / (2 * Math.log(10000));
    const untrunc = ropeParameters({ ...r, truncate: false }).invFreq;
    expect(untrunc[1]).toBeCloseTo(Math.pow(10, -0.5) * (1 - 0.75 / hi), 6);
    expect(untrunc[3]).toBeCloseTo(Math.pow(10, -1.5) / 4, 8);
  });

  it('yarn: a collapsed ramp (equal bounds) still moves from extrapolation to interpolation', () => {
    // beta_fast = beta_slow without truncation gives equal bounds; transformers widens them by 0.001.
    const r = rope({ type: 'yarn', rotaryDim: 16, factor: 4, originalMaxPositionEmbeddings: 64, betaFast: 2, betaSlow: 2, truncate: false });
    const lo = (16 * Math.log(64 / (2 * 2 * Math.PI))) / (2 * Math.log(10000)); // 16·ln(5.093)/18.42 = 1.4139
    const inv = ropeParameters(r).invFreq;
    expect(lo).toBeCloseTo(1.4139, 4);
    expect(inv[1]).toBeCloseTo(Math.pow(10, -0.5), 7); // below the bound: extrapolated
    expect(inv[2]).toBeCloseTo(0.1 / 4, 8); // above: interpolated
  });

  it('dynamic: the default frequencies up to max_position_embeddings, refused beyond', () => {
    const r = rope({ type: 'dynamic', factor: 2, maxPositionEmbeddings: 16 });
    expect(Array.from(ropeParameters(r).invFreq)).toEqual(Array.from(ropeParameters(rope({})).invFreq));
    expect(ropeTable(r, 16).cos.length).toBe(16 * 4);
    expect(() => ropeTable(r, 17)).toThrow(/ropeTable: numPositions: expected at most max_position_embeddings \(16\) for dynamic NTK RoPE .*unsupported.*, got 17/);
  });

  it('rejects unsupported types listing the supported ones, and malformed settings', () => {
    expect([...SUPPORTED_ROPE_TYPES]).toEqual(['default', 'linear', 'dynamic', 'yarn', 'llama3', 'longrope']);
    expect(() => ropeParameters(rope({ type: 'su' as 'default' }))).toThrow(
      "ropeParameters: rope.type: expected one of default, linear, dynamic, yarn, llama3, longrope, got su",
    );
    expect(() => ropeParameters(rope({ rotaryDim: 7 }))).toThrow(/rope\.rotaryDim: expected a positive even integer, got 7/);
    expect(() => ropeParameters(rope({ type: 'linear' }))).toThrow(/rope\.factor: expected a finite number \(the scaling factor of rope type 'linear'\), got null/);
    expect(() => ropeParameters(rope({ type: 'llama3', factor: 8 }))).toThrow(/rope\.lowFreqFactor/);
  });
});

describe('RoPE table', () => {
  it('is cos/sin of position × frequency, [positions, rotaryDim/2], with f32 angles', () => {
    const r = rope({ rotaryDim: 4 });
    const { cos, sin } = ropeTable(r, 5);
    expect(cos.length).toBe(10);
    expect(cos[0]).toBe(1);
    expect(sin[0]).toBe(0);
    // position 3: angles 3 and 0.03 (f32 0.01 × 3)
    expect(cos[3 * 2 + 0]).toBe(Math.fround(Math.cos(3)));
    expect(sin[3 * 2 + 1]).toBe(Math.fround(Math.sin(Math.fround(Math.fround(0.01) * 3))));
    expect(ropeTable(r, 0).cos.length).toBe(0);
  });

  it('matches an independent f32 pipeline (Float32Array stores) at large positions and theta 1e6', () => {
    const r = rope({ rotaryDim: 128, theta: 1e6 });
    const { invFreq } = ropeParameters(r);
    const { cos, sin } = ropeTable(r, 4096);
    const f32 = new Float32Array(4);
    const rand = rng(5);
    for (let k = 0; k < 200; k++) {
      const p = Math.floor(rand() * 4096);
      const i = Math.floor(rand() * 64);
      f32[0] = 1e6;
      f32[1] = (2 * i) / 128;
      f32[3] = Math.pow(f32[0], f32[1]);
      f32[2] = 1 / f32[3]; // inv_freq
      f32[3] = f32[2] * p; // the f32 angle
      expect(invFreq[i]).toBe(f32[2]);
      expect(cos[p * 64 + i]).toBe(Math.fround(Math.cos(f32[3]!)));
      expect(sin[p * 64 + i]).toBe(Math.fround(Math.sin(f32[3]!)));
    }
    // The rounding matters: at position 4000 an f64 angle differs from torch's f32 one.
    const exact = Math.cos(4000 * Math.pow(1e6, -2 / 128));
    expect(Math.abs(cos[4000 * 64 + 1]! - exact)).toBeGreaterThan(1e-6);
  });

  it('multiplies cos and sin by the attention scaling factor (YaRN without the mscale pair)', () => {
    const r = rope({ type: 'yarn', rotaryDim: 16, factor: 4, originalMaxPositionEmbeddings: 64 });
    const s = Math.fround(1.1386294361);
    const { cos, sin } = ropeTable(r, 40);
    const plain = ropeTable({ ...r, attentionFactor: 1 }, 40);
    expect(cos[0]).toBeCloseTo(s, 6);
    for (let k = 0; k < cos.length; k++) {
      expect(cos[k]).toBe(Math.fround(plain.cos[k]! * s));
      expect(sin[k]).toBe(Math.fround(plain.sin[k]! * s));
      expect(cos[k]! ** 2 + sin[k]! ** 2).toBeCloseTo(s * s, 5);
    }
  });

  it('checks numPositions', () => {
    expect(() => ropeTable(rope({}), -1)).toThrow('ropeTable: numPositions: expected an integer in [0, 2^24], got -1');
    expect(() => ropeTable(rope({}), 1.5)).toThrow(/numPositions/);
  });
});

describe('DeepSeek V3 softmax scale (YaRN mscale²)', () => {
  it('is qk_head_dim^-0.5 · yarn_get_mscale(factor, mscale_all_dim)²', () => {
    expect(yarnGetMscale(1, 5)).toBe(1);
    expect(yarnGetMscale(0.5)).toBe(1);
    expect(yarnGetMscale(40, 1)).toBeCloseTo(0.1 * Math.log(40) + 1, 14); // DeepSeek-V3's own: 1.3689
    const cfg = parseConfig(JSON.parse(readFileSync(join(goldens, 'deepseek-v3-yarn-moe', 'config.json'), 'utf8')));
    const m = yarnGetMscale(4, 1);
    expect(m).toBeCloseTo(1.1386294361, 10);
    expect(cfg.attentionScale).toBe(Math.pow(48, -0.5) * m * m);
    // The table of that golden is unscaled: mscale and mscale_all_dim cancel.
    expect(ropeParameters(cfg.rope).attentionScaling).toBe(1);
  });
});
