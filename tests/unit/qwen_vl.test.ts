// Qwen2.5-VL's host side (models/qwen_vl.ts): M-RoPE positions of prompts with several images, the
// window index of other grids than the golden's, the refusals, and the image digest the prefix cache keys on.
// (The golden's own prompts, windows and features are checked against HF in tests/cases/arch_qwen_vl.cases.ts.)
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/models/config';
import { imageDigest, mropePositions, qwenImageTokens, qwenWindows, type QwenImageInput } from '../../src/models/qwen_vl';

const dir = join(dirname(fileURLToPath(import.meta.url)), '../../../shared/goldens-arch/qwen2.5-vl');
const v = parseConfig(JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8')) as object).vision!;
const IMG = v.imageTokenId;

describe('mropePositions', () => {
  it('two images of different grids with text between and after: t = s, h = s + row, w = s + col, text continuing at s + max(h, w)', () => {
    // grid [1, 4, 6] merges to 2×3 = 6 tokens; [1, 2, 2] to 1×1 = 1.
    const tokens = [7, 8, ...Array(6).fill(IMG), 9, IMG, 10, 11];
    const p = mropePositions(v, 'op', 'images', tokens, [[1, 4, 6], [1, 2, 2]]);
    expect(Array.from(p.t)).toEqual([0, 1, 2, 2, 2, 2, 2, 2, 5, 6, 7, 8]);
    expect(Array.from(p.h)).toEqual([0, 1, 2, 2, 2, 3, 3, 3, 5, 6, 7, 8]);
    expect(Array.from(p.w)).toEqual([0, 1, 2, 3, 4, 2, 3, 4, 5, 6, 7, 8]);
    // Largest position 8 + 1 − 12 tokens.
    expect(p.ropeDelta).toBe(-3);
    expect(p.runs).toEqual([{ start: 2, count: 6, featureRow: 0 }, { start: 9, count: 1, featureRow: 6 }]);
    expect(qwenImageTokens(v, [1, 4, 6])).toBe(6);
  });
  it('a text prompt: every axis at its index, delta 0', () => {
    const p = mropePositions(v, 'op', 'images', [1, 2, 3], []);
    expect([Array.from(p.t), Array.from(p.h), Array.from(p.w), p.ropeDelta]).toEqual([[0, 1, 2], [0, 1, 2], [0, 1, 2], 0]);
  });
  it('refuses runs without images, images without runs, and runs of the wrong length, by name', () => {
    expect(() => mropePositions(v, 'Model.logits', 'o.images', [1, IMG, IMG, 2], [])).toThrow(
      `Model.logits: o.images: expected as many runs of the image token ${IMG} as images (0), got a run of 2 image tokens at position 1 with no image left for it`);
    expect(() => mropePositions(v, 'Model.logits', 'o.images', [1, 2], [[1, 2, 2]])).toThrow(
      `Model.logits: o.images: expected a run of the image token ${IMG} for each of the 1 images, got 0 runs`);
    expect(() => mropePositions(v, 'Model.logits', 'o.images', [1, IMG, IMG, 2], [[1, 2, 2]])).toThrow(
      'Model.logits: o.images: expected 1 image tokens for image 0 (grid [1, 2, 2] merged 2×2), got a run of 2 at position 1');
  });
});

describe('qwenWindows', () => {
  it('an 8×8-patch image (4×4 merged) tiles exactly into four windows of 2×2 merged tokens', () => {
    const w = qwenWindows(v, [1, 8, 8]);
    expect(Array.from(w.windowIndex)).toEqual([0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15]);
    expect(w.cuSeqlens).toEqual([0, 16, 32, 48, 64]);
  });
  it('two frames: each frame tiled on its own, the second offset by a frame of merged tokens', () => {
    const w = qwenWindows(v, [2, 2, 6]);
    expect(Array.from(w.windowIndex)).toEqual([0, 1, 2, 3, 4, 5]);
    expect(w.cuSeqlens).toEqual([0, 8, 12, 20, 24]);
  });
});

describe('imageDigest', () => {
  const image = (seed: number, grid: [number, number, number] = [1, 2, 2]): QwenImageInput => {
    const px = Float32Array.from({ length: 4 * 384 }, (_, i) => Math.sin(i * 0.37 + seed));
    return { pixelValues: px, shape: [4, 384], grid };
  };
  it('equal for equal images; different for one changed value, another grid, or another order', () => {
    expect(imageDigest([image(1)])).toBe(imageDigest([image(1)]));
    const b = image(1);
    b.pixelValues[777] = Math.fround(b.pixelValues[777] * (1 + 2 ** -20));
    expect(imageDigest([b])).not.toBe(imageDigest([image(1)]));
    expect(imageDigest([image(1, [1, 4, 1] as never)])).not.toBe(imageDigest([image(1)]));
    expect(imageDigest([image(1), image(2)])).not.toBe(imageDigest([image(2), image(1)]));
    expect(imageDigest([image(1)])).toMatch(/^[0-9a-f]{32}$/);
  });
});
