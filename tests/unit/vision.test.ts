// Images in (src/vision/): decoding, resizing and the two image processors against the goldens of
// ../shared/goldens-arch (gemma3-vision, qwen2.5-vl), on the libraries Node decodes with.
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import * as jpeg from 'jpeg-js';
import { encode as encodePng } from 'fast-png';
import { applyOrientation, decodeImage, imageHeaderSize, jpegOrientation, type RgbImage } from '../../src/vision/image.js';
import { resizeRgb } from '../../src/vision/resize.js';
import { gemma3ImageProcessor, preprocessImage, qwen2VLImageGrid, qwen2VLImageProcessor, readPreprocessorConfig, smartResize, type Qwen2VLProcessorConfig } from '../../src/vision/processors.js';
import { rng as seededRandom } from '../../src/core/random.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '../../../shared/goldens-arch');
const file = (dir: string, name: string): Uint8Array<ArrayBuffer> => new Uint8Array(readFileSync(join(root, dir, name)));
const json = (dir: string, name: string): Record<string, unknown> => JSON.parse(readFileSync(join(root, dir, name), 'utf8')) as Record<string, unknown>;
type Nested = number | Nested[];
const flat = (x: Nested): number[] => (Array.isArray(x) ? x.flatMap(flat) : [x]);

function maxDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  expect(a.length).toBe(b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}

/** A poisoned output is not needed here (the processors allocate their result); a NaN would fail maxDiff's comparison anyway. */
function expectClose(a: ArrayLike<number>, b: ArrayLike<number>, tol: number): void {
  const d = maxDiff(a, b);
  expect(Number.isNaN(d) ? Infinity : d).toBeLessThanOrEqual(tol);
}

describe('decodeImage', () => {
  it("decodes gemma3-vision's image.png to the bytes its pixel_values came from", async () => {
    const g = json('gemma3-vision', 'golden.json');
    const img = await decodeImage(file('gemma3-vision', 'image.png'));
    expect([img.height, img.width]).toEqual(g.image_size_hw);
    // pixel_values = rgb / 127.5 - 1, channels first: the bytes are (pv + 1) · 127.5.
    const pv = flat(g.pixel_values as Nested);
    const H = img.height, W = img.width;
    for (let c = 0; c < 3; c++) {
      for (let i = 0; i < H * W; i++) {
        if (img.data[i * 3 + c] !== Math.round((pv[c * H * W + i] + 1) * 127.5)) throw new Error(`pixel ${i} channel ${c}: ${img.data[i * 3 + c]} vs ${pv[c * H * W + i]}`);
      }
    }
  });

  it('takes the same PNG as an ArrayBuffer, a Blob, a data: URL, a path and a file: URL', async () => {
    const bytes = file('qwen2.5-vl', 'image.png');
    const ref = await decodeImage(bytes);
    const path = join(root, 'qwen2.5-vl', 'image.png');
    const b64 = Buffer.from(bytes).toString('base64');
    for (const input of [bytes.slice().buffer, new Blob([bytes]), `data:image/png;base64,${b64}`, path, pathToFileURL(path).href]) {
      const img = await decodeImage(input);
      expect([img.width, img.height]).toEqual([ref.width, ref.height]);
      expect(img.data).toEqual(ref.data);
    }
  });

  // Decoding a JPEG close to its seeded pixels is a shared case (tests/cases/vision.cases.ts), run in
  // Node, the pages and Deno; here the header read that bounds work before any decode.
  it("reads a JPEG's size from its header, before decoding it", async () => {
    const W = 40, H = 24;
    const rgba = new Uint8Array(W * H * 4).fill(128);
    const encoded = new Uint8Array(jpeg.encode({ width: W, height: H, data: rgba }, 95).data);
    expect(imageHeaderSize(encoded)).toEqual({ width: W, height: H });
    const img = await decodeImage(encoded);
    expect([img.width, img.height]).toEqual([W, H]);
  });

  it("turns a JPEG upright by its EXIF orientation, as PIL's exif_transpose", async () => {
    const W = 24, H = 16;
    const rgba = new Uint8Array(W * H * 4);
    for (let i = 0; i < W * H; i++) { rgba[i * 4] = (i % W) * 10; rgba[i * 4 + 1] = Math.floor(i / W) * 15; rgba[i * 4 + 2] = 60; rgba[i * 4 + 3] = 255; }
    const plain = new Uint8Array(jpeg.encode({ width: W, height: H, data: rgba }, 95).data);
    // APP1 Exif, big-endian TIFF, IFD0 with one entry: Orientation (0x0112), SHORT, 6 (turn 90° clockwise).
    const exif = (o: number): Uint8Array => new Uint8Array([0xff, 0xe1, 0, 34, 0x45, 0x78, 0x69, 0x66, 0, 0, 0x4d, 0x4d, 0, 42, 0, 0, 0, 8,
      0, 1, 0x01, 0x12, 0, 3, 0, 0, 0, 1, 0, o, 0, 0, 0, 0, 0, 0]);
    const upright = await decodeImage(plain);
    expect(jpegOrientation(plain)).toBe(1);
    for (const o of [1, 2, 3, 4, 5, 6, 7, 8]) {
      const withExif = new Uint8Array([...plain.subarray(0, 2), ...exif(o), ...plain.subarray(2)]);
      expect(jpegOrientation(withExif)).toBe(o);
      const img = await decodeImage(withExif);
      expect([img.width, img.height]).toEqual(o >= 5 ? [H, W] : [W, H]);
      expect(img).toEqual(applyOrientation(upright, o));
    }
    // 6 is a clockwise quarter turn: the output's top-left pixel is the input's bottom-left.
    const turned = applyOrientation({ width: 2, height: 3, data: new Uint8Array([1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 5, 5, 5, 6, 6, 6]) }, 6);
    expect([turned.width, turned.height]).toEqual([3, 2]);
    expect(Array.from(turned.data.filter((_, i) => i % 3 === 0))).toEqual([5, 3, 1, 6, 4, 2]);
    const ccw = applyOrientation({ width: 2, height: 3, data: new Uint8Array([1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 5, 5, 5, 6, 6, 6]) }, 8);
    expect(Array.from(ccw.data.filter((_, i) => i % 3 === 0))).toEqual([2, 4, 6, 1, 3, 5]);
  });

  it('takes raw RGB and RGBA pixels, and 16-bit and gray PNGs', async () => {
    const rgba = new Uint8ClampedArray([1, 2, 3, 255, 4, 5, 6, 0]);
    expect(Array.from((await decodeImage({ width: 2, height: 1, data: rgba })).data)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(Array.from((await decodeImage({ width: 1, height: 2, data: new Uint8Array([7, 8, 9, 10, 11, 12]), channels: 3 })).data)).toEqual([7, 8, 9, 10, 11, 12]);
    const gray = encodePng({ width: 2, height: 1, data: new Uint8Array([0, 200]), channels: 1, depth: 8 });
    expect(Array.from((await decodeImage(gray)).data)).toEqual([0, 0, 0, 200, 200, 200]);
    const deep = encodePng({ width: 1, height: 1, data: new Uint16Array([0x1234, 0xff00, 0x0080]), channels: 3, depth: 16 });
    expect(Array.from((await decodeImage(deep)).data)).toEqual([0x12, 0xff, 0x00]);
  });

  it('refuses bad inputs by name', async () => {
    const png = file('gemma3-vision', 'image.png');
    await expect(decodeImage(new Uint8Array([1, 2, 3, 4]))).rejects.toThrow(/decodeImage: image: expected PNG or JPEG bytes.*got 4 bytes starting 01 02 03 04/);
    await expect(decodeImage(png, { maxPixels: 1000 })).rejects.toThrow(/image: expected an image of at most 1000 pixels, got 64 × 64 = 4096 pixels/);
    await expect(decodeImage(png, { maxBytes: 100 })).rejects.toThrow(/image: expected an encoded image of at most 100 bytes, got \d+ bytes/);
    await expect(decodeImage({ width: 2, height: 2, data: new Uint8Array(5) })).rejects.toThrow(/image\.data: expected 12 bytes \(2 × 2 × 3 channels, or × 4 for RGBA\), got 5 bytes/);
    await expect(decodeImage({ width: 0, height: 2, data: new Uint8Array(0) })).rejects.toThrow(/image\.width: expected a positive integer, got 0/);
    await expect(decodeImage({ width: 1, height: 1, data: new Uint8Array(3), channels: 2 as 3 })).rejects.toThrow(/image\.channels: expected 3 \(RGB\) or 4 \(RGBA\), got 2/);
    await expect(decodeImage('data:image/gif;base64,R0lGOD', { name: 'messages[0].content[1]' })).rejects.toThrow(/messages\[0\]\.content\[1\]: expected a data: URL of image\/png or image\/jpeg/);
    await expect(decodeImage('ftp://example.com/x.png')).rejects.toThrow(/expected a data: URL, an http\(s\) URL, a file: URL or a path, got a URL of scheme 'ftp:'/);
    await expect(decodeImage('/etc/passwd', { allowFiles: false })).rejects.toThrow(/paths are not read here/);
    await expect(decodeImage('https://example.com/a.png', { allowHttp: false })).rejects.toThrow(/http\(s\) URLs are not fetched here/);
    await expect(decodeImage(join(root, 'no-such.png'))).rejects.toThrow(/expected a readable image file/);
    await expect(decodeImage(42 as unknown as string)).rejects.toThrow(/image: expected raw pixels/);
    // A truncated PNG: its header passes, the decoder refuses the rest by name.
    await expect(decodeImage(png.subarray(0, 60))).rejects.toThrow(/image: expected a valid PNG image/);
    // A data: URL bigger than the cap is refused from its length, before decoding.
    await expect(decodeImage(`data:image/png;base64,${'A'.repeat(4000)}`, { maxBytes: 1000 })).rejects.toThrow(/at most 1000 bytes, got a data: URL of about 3000 bytes/);
  });

  it('refuses a PNG whose pixel data inflates past its header (a decompression bomb) before decoding it', async () => {
    const { deflateSync } = await import('node:zlib');
    const crc = (await import('node:zlib')).crc32;
    const chunk = (type: string, data: Uint8Array): Buffer => {
      const head = Buffer.alloc(8);
      head.writeUInt32BE(data.length, 0);
      head.write(type, 4, 'latin1');
      const tail = Buffer.alloc(4);
      tail.writeUInt32BE(crc(Buffer.concat([head.subarray(4), data])) >>> 0, 0);
      return Buffer.concat([head, data, tail]);
    };
    const ihdr = Buffer.alloc(13);
    ihdr.writeUInt32BE(4, 0); ihdr.writeUInt32BE(4, 4);
    ihdr[8] = 8; ihdr[9] = 2;   // 8-bit RGB, 4 × 4: 4 · (1 + 12) = 52 bytes of rows
    const sig = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
    const bomb = Buffer.concat([sig, chunk('IHDR', ihdr), chunk('IDAT', deflateSync(Buffer.alloc(64 << 20))), chunk('IEND', new Uint8Array(0))]);
    expect(bomb.length).toBeLessThan(100_000);
    await expect(decodeImage(new Uint8Array(bomb))).rejects.toThrow(/image: expected a PNG whose pixel data inflates to at most 220 bytes \(4 × 4, 3 × 8-bit samples\), got more/);
    // The same header with its true 52 bytes of rows decodes.
    const ok = Buffer.concat([sig, chunk('IHDR', ihdr), chunk('IDAT', deflateSync(Buffer.alloc(52, 0))), chunk('IEND', new Uint8Array(0))]);
    expect((await decodeImage(new Uint8Array(ok))).data).toEqual(new Uint8Array(48));
  });

  it('fetches http(s) URLs with a byte cap and a timeout', async () => {
    const http = await import('node:http');
    const png = file('gemma3-vision', 'image.png');
    const server = http.createServer((req, res) => {
      if (req.url === '/slow') return;   // never answers
      if (req.url === '/missing') { res.writeHead(404); res.end(); return; }
      res.writeHead(200, { 'content-type': 'image/png' });
      res.end(png);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    try {
      expect((await decodeImage(`${base}/a.png`)).width).toBe(64);
      await expect(decodeImage(`${base}/a.png`, { maxBytes: 200 })).rejects.toThrow(/at most 200 bytes/);
      await expect(decodeImage(`${base}/missing`)).rejects.toThrow(/expected a URL answering 200, got .* answered 404/);
      await expect(decodeImage(`${base}/slow`, { timeoutMs: 200 })).rejects.toThrow(/no answer within 200 ms/);
    } finally {
      server.closeAllConnections();
      server.close();
    }
  });
});

describe('image processors', () => {
  it("Gemma3ImageProcessor gives gemma3-vision's pixel_values", async () => {
    const g = json('gemma3-vision', 'golden.json');
    const cfg = readPreprocessorConfig(json('gemma3-vision', 'preprocessor_config.json'));
    const out = gemma3ImageProcessor(await decodeImage(file('gemma3-vision', 'image.png')), cfg);
    expect(out.shape).toEqual([3, 64, 64]);
    expectClose(out.pixelValues, flat(g.pixel_values as Nested), 1e-6);
    // processor_config.json holds the same processor under image_processor.
    expect(readPreprocessorConfig(json('gemma3-vision', 'processor_config.json'))).toEqual(cfg);
  });

  it("resizes gemma3-vision's resize case (72×96 → 64×64, bilinear with antialiasing) as torchvision does, byte for byte", async () => {
    const g = json('gemma3-vision', 'golden.json');
    const rc = g.resize_case as { image: string; image_size_hw: number[]; pixel_values: Nested };
    const img = await decodeImage(file('gemma3-vision', rc.image));
    expect([img.height, img.width]).toEqual(rc.image_size_hw);
    const out = gemma3ImageProcessor(img, json('gemma3-vision', 'preprocessor_config.json'));
    expect(out.shape).toEqual([3, 64, 64]);
    // The README allows one 8-bit level (0.0078 here) for PIL's rounding; torchvision's fixed point gives the same bytes.
    expectClose(out.pixelValues, flat(rc.pixel_values), 1e-6);
  });

  it("Qwen2VLImageProcessor gives qwen2.5-vl's pixel_values, grid and image tokens", async () => {
    const g = json('qwen2.5-vl', 'golden.json');
    const cfg = readPreprocessorConfig(json('qwen2.5-vl', 'preprocessor_config.json')) as Qwen2VLProcessorConfig;
    const out = qwen2VLImageProcessor(await decodeImage(file('qwen2.5-vl', 'image.png')), cfg);
    expect(out.shape).toEqual([48, 384]);
    expect([out.grid]).toEqual(g.image_grid_thw);
    expect(out.imageTokens).toBe(12);
    expect((g.prompts as number[][])[0].filter((t) => t === g.image_token_id).length).toBe(out.imageTokens);
    expectClose(out.pixelValues, flat(g.pixel_values as Nested), 1e-6);
    expect(qwen2VLImageGrid(64, 48, cfg).tokens).toBe(12);
    // preprocessImage: the same from the file's path and the parsed config.json.
    const viaPath = await preprocessImage(join(root, 'qwen2.5-vl', 'image.png'), json('qwen2.5-vl', 'preprocessor_config.json'));
    expect(viaPath.shape).toEqual([48, 384]);
    expect(viaPath.grid).toEqual([1, 6, 8]);
    expect(viaPath.pixelValues).toEqual(out.pixelValues);
  });

  it("Qwen2VLImageProcessor resizes with bicubic to smart_resize's size", async () => {
    const cfg = readPreprocessorConfig(json('qwen2.5-vl', 'preprocessor_config.json')) as Qwen2VLProcessorConfig;
    // Rounded to multiples of 16 (Python's round: halves to even), then kept within [1024, 16384] pixels.
    expect(smartResize(48, 64, 16, 1024, 16384)).toEqual({ height: 48, width: 64 });
    expect(smartResize(40, 72, 16, 1024, 16384)).toEqual({ height: 32, width: 64 });   // 2.5 → 2, 4.5 → 4
    expect(smartResize(24, 24, 16, 1024, 16384)).toEqual({ height: 32, width: 32 });
    expect(smartResize(300, 500, 16, 1024, 16384)).toEqual({ height: 96, width: 160 });
    const img = await decodeImage(file('gemma3-vision', 'image-resize.png'));   // 96 × 72
    const out = qwen2VLImageProcessor(img, cfg);
    expect(out.grid).toEqual([1, 8, 12]);
    expect(out.shape).toEqual([96, 384]);
    expect(out.imageTokens).toBe(24);
    // The patches hold the bicubic resize in merge-window order: patch 1 of merged token 0 starts at x = 8.
    const resized = resizeRgb(img, 96, 64, 'bicubic');
    const mean = cfg.mean[0], std = cfg.std[0];
    for (const [row, y, x] of [[0, 0, 0], [1, 0, 8], [2, 8, 0], [4, 0, 16], [95, 56, 88]]) {
      const want = (resized.data[(y * 96 + x) * 3] / 255 - mean) / std;
      expect(Math.abs(out.pixelValues[row * 384] - want)).toBeLessThan(1e-6);
      expect(Math.abs(out.pixelValues[row * 384 + 64] - want)).toBeLessThan(1e-6);   // the repeated frame
    }
  });

  it('resizes as a float64 separable filter would (bilinear and bicubic, shrinking and growing)', () => {
    const rnd = seededRandom(7);
    // Values in [40, 215]: bicubic's overshoot stays inside [0, 255], so no pass clips.
    const src: RgbImage = { width: 13, height: 9, data: new Uint8Array(13 * 9 * 3).map(() => 40 + Math.floor(rnd() * 176)) };
    // The same antialiased filter in float64 with no intermediate rounding: the two passes' roundings
    // (half a level each, the first carried through weights whose magnitudes sum to at most 1.2) apart.
    const ref = (f: 'bilinear' | 'bicubic', W: number, H: number): Float64Array => {
      const k = (x: number): number => {
        x = Math.abs(x);
        if (f === 'bilinear') return Math.max(0, 1 - x);
        return x < 1 ? (1.5 * x - 2.5) * x * x + 1 : x < 2 ? ((-0.5 * x + 2.5) * x - 4) * x + 2 : 0;
      };
      const axis = (n: number, m: number): number[][] => Array.from({ length: m }, (_, o) => {
        const s = n / m, fs = Math.max(s, 1), c = (o + 0.5) * s;
        const w = Array.from({ length: n }, (_, i) => k((i + 0.5 - c) / fs));
        const sum = w.reduce((a, b) => a + b, 0);
        return w.map((v) => v / sum);
      });
      const ax = axis(src.width, W), ay = axis(src.height, H);
      const out = new Float64Array(W * H * 3);
      for (let y = 0; y < H; y++) for (let x = 0; x < W; x++) for (let ch = 0; ch < 3; ch++) {
        let v = 0;
        for (let j = 0; j < src.height; j++) for (let i = 0; i < src.width; i++) v += ay[y][j] * ax[x][i] * src.data[(j * src.width + i) * 3 + ch];
        out[(y * W + x) * 3 + ch] = Math.min(255, Math.max(0, v));
      }
      return out;
    };
    for (const f of ['bilinear', 'bicubic'] as const) {
      for (const [W, H] of [[5, 4], [20, 17], [13, 3]]) {
        expectClose(resizeRgb(src, W, H, f).data, ref(f, W, H), f === 'bicubic' ? 1.1 : 1.0);
      }
    }
  });

  it('refuses bad configs and images by name', () => {
    const gem = json('gemma3-vision', 'preprocessor_config.json');
    expect(() => readPreprocessorConfig(null)).toThrow(/readPreprocessorConfig: preprocessorConfig: expected an object/);
    expect(() => readPreprocessorConfig({ ...gem, image_processor_type: 'SiglipImageProcessor' })).toThrow(/image_processor_type: expected one of Gemma3ImageProcessor.*got 'SiglipImageProcessor'/);
    expect(() => readPreprocessorConfig({ ...gem, resample: 1 })).toThrow(/resample: expected 2 \(bilinear\) or 3 \(bicubic\), got 1 \(lanczos\)/);
    expect(() => readPreprocessorConfig({ ...gem, image_mean: [0.5, 0.5] })).toThrow(/image_mean: expected three numbers/);
    expect(() => readPreprocessorConfig({ ...gem, image_std: [0.5, 0, 0.5] })).toThrow(/image_std: expected three nonzero numbers/);
    expect(() => readPreprocessorConfig({ ...gem, size: { height: 64 } })).toThrow(/size\.width: expected a positive integer, got undefined/);
    expect(() => readPreprocessorConfig({ ...gem, do_pan_and_scan: true })).toThrow(/do_pan_and_scan: expected false/);
    const qw = json('qwen2.5-vl', 'preprocessor_config.json');
    expect(() => readPreprocessorConfig({ ...qw, patch_size: 0 })).toThrow(/patch_size: expected a positive integer, got 0/);
    expect(() => readPreprocessorConfig({ ...qw, size: { shortest_edge: 9000, longest_edge: 100 } })).toThrow(/min_pixels: expected at most max_pixels \(100\), got 9000/);
    expect(() => gemma3ImageProcessor({ width: 2, height: 2, data: new Uint8Array(3) }, gem)).toThrow(/gemma3ImageProcessor: image\.data: expected 12 bytes of RGB \(2 × 2 × 3\), got 3 bytes/);
    expect(() => qwen2VLImageProcessor({ width: 2, height: 2, data: new Uint8Array(12) }, gem)).toThrow(/qwen2VLImageProcessor: preprocessorConfig: expected a Qwen2VLImageProcessor config, got 'gemma3'/);
    expect(() => smartResize(1, 300, 16, 1024, 16384)).toThrow(/smartResize: image: expected an aspect ratio of at most 200/);
  });
});
