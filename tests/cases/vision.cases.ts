// Images in, in every runtime (Node and Deno decode with fast-png / jpeg-js, a browser with
// createImageBitmap): the goldens' PNGs decode to the bytes their pixel_values came from, the platform
// and the libraries agree on PNG exactly, a JPEG made from seeded pixels decodes close to them, and the
// Gemma 3 and Qwen2.5-VL processors give the goldens' pixel_values (within 1e-6, the resize case
// included). No GPU work: the processors run on the host.
import * as jpeg from 'jpeg-js';
import { decodeImage, gemma3ImageProcessor, qwen2VLImageProcessor, readPreprocessorConfig, rng } from '../../src/index';
import { assert, defineCases, type CaseContext } from './harness';

type Nested = number | Nested[];
const flat = (x: Nested): number[] => (Array.isArray(x) ? x.flatMap(flat) : [x]);
const text = async (ctx: CaseContext, path: string): Promise<unknown> => JSON.parse(new TextDecoder().decode(await ctx.fixture(path)));

function worst(a: ArrayLike<number>, b: ArrayLike<number>): number {
  assert(a.length === b.length, `lengths ${a.length} and ${b.length}`);
  let m = 0;
  for (let i = 0; i < a.length; i++) {
    const d = Math.abs(a[i] - b[i]);
    if (!(d <= m)) m = Number.isNaN(d) ? Infinity : d;
  }
  return m;
}

const DIR = 'goldens-arch';

/** A JPEG at quality 95: jpeg-js's encoder where Buffer exists (Node, Deno), the page's canvas encoder in a
 *  browser (jpeg-js's encoder writes a Buffer; its decoder, the one the library uses, does not need one). */
async function encodeJpeg(width: number, height: number, rgba: Uint8Array, ctx?: CaseContext): Promise<Uint8Array> {
  if (typeof (globalThis as { Buffer?: unknown }).Buffer === 'function') return new Uint8Array(jpeg.encode({ width, height, data: rgba }, 95).data);
  ctx?.note('vision: the JPEG is encoded by the page\'s canvas (jpeg-js\'s encoder needs Buffer)');
  const canvas = new OffscreenCanvas(width, height);
  const c2d = canvas.getContext('2d')!;
  c2d.putImageData(new ImageData(new Uint8ClampedArray(rgba), width, height), 0, 0);
  return new Uint8Array(await (await canvas.convertToBlob({ type: 'image/jpeg', quality: 0.95 })).arrayBuffer());
}

export const visionCases = defineCases('vision', [
  {
    name: "decodes the goldens' PNGs as their pixel_values say, platform and library alike",
    async run(ctx) {
      const g = await text(ctx, `${DIR}/gemma3-vision/golden.json`) as { pixel_values: Nested; image_size_hw: number[] };
      const bytes = await ctx.fixture(`${DIR}/gemma3-vision/image.png`);
      const img = await decodeImage(bytes);
      assert(img.height === g.image_size_hw[0] && img.width === g.image_size_hw[1], `size ${img.width} × ${img.height}`);
      const pv = flat(g.pixel_values);
      const n = img.width * img.height;
      for (let c = 0; c < 3; c++) {
        for (let i = 0; i < n; i++) {
          const want = Math.round((pv[c * n + i] + 1) * 127.5);
          assert(img.data[i * 3 + c] === want, `pixel ${i} channel ${c}: ${img.data[i * 3 + c]}, the golden's ${want}`);
        }
      }
      if (ctx.runtime === 'chromium' || ctx.runtime === 'firefox') {
        // A page has no file system: a path is refused by name, not fetched.
        let message = 'no error';
        await decodeImage('images/cat.png').catch((e: Error) => { message = e.message; });
        assert(/decodeImage: image: expected a data: or http\(s\) URL \(a page or worker cannot read paths\), got 'images\/cat.png'/.test(message), `a path in a page: ${message}`);
      }
      for (const path of [`${DIR}/gemma3-vision/image-resize.png`, `${DIR}/qwen2.5-vl/image.png`]) {
        const b = await ctx.fixture(path);
        const a = await decodeImage(new Blob([b as Uint8Array<ArrayBuffer>]));
        const lib = await decodeImage(b, { forceLibrary: true });
        assert(a.width === lib.width && a.height === lib.height && worst(a.data, lib.data) === 0, `${path}: the platform's decode differs from the library's by ${worst(a.data, lib.data)}`);
      }
    },
  },
  {
    name: 'decodes a JPEG made from seeded pixels close to them, turned upright by its EXIF orientation',
    async run(ctx) {
      const rnd = rng(44);
      const W = 40, H = 24;
      const rgba = new Uint8Array(W * H * 4);
      for (let y = 0; y < H; y++) for (let x = 0; x < W; x++) {
        const o = (y * W + x) * 4;
        rgba[o] = Math.round((x / W) * 200 + rnd() * 8);
        rgba[o + 1] = Math.round((y / H) * 200 + rnd() * 8);
        rgba[o + 2] = 100;
        rgba[o + 3] = 255;
      }
      const encoded = await encodeJpeg(W, H, rgba, ctx);
      const img = await decodeImage(encoded);
      assert(img.width === W && img.height === H, `size ${img.width} × ${img.height}`);
      let sum = 0, most = 0;
      for (let i = 0; i < W * H; i++) for (let c = 0; c < 3; c++) {
        const d = Math.abs(img.data[i * 3 + c] - rgba[i * 4 + c]);
        sum += d; most = Math.max(most, d);
      }
      assert(sum / (W * H * 3) < 3 && most < 24, `mean difference ${sum / (W * H * 3)}, worst ${most}`);
      // EXIF orientation 6 (a quarter turn clockwise) in an APP1 segment after SOI: the platform (a
      // browser's createImageBitmap) and the library path both stand the image upright.
      const exif = [0xff, 0xe1, 0, 34, 0x45, 0x78, 0x69, 0x66, 0, 0, 0x4d, 0x4d, 0, 42, 0, 0, 0, 8, 0, 1, 0x01, 0x12, 0, 3, 0, 0, 0, 1, 0, 6, 0, 0, 0, 0, 0, 0];
      const turned = new Uint8Array([...encoded.subarray(0, 2), ...exif, ...encoded.subarray(2)]);
      const a = await decodeImage(turned);
      const b = await decodeImage(turned, { forceLibrary: true });
      assert(a.width === H && a.height === W && b.width === H && b.height === W, `oriented sizes ${a.width} × ${a.height} and ${b.width} × ${b.height}, expected ${H} × ${W}`);
      let diff = 0;
      for (let i = 0; i < a.data.length; i++) diff += Math.abs(a.data[i] - b.data[i]);
      assert(diff / a.data.length < 3, `the platform's oriented decode differs from the library's by ${diff / a.data.length} a sample`);
      // Its top-left pixel is the source's bottom-left: red near 0, green near 200.
      assert(b.data[0] < 24 && b.data[1] > 170, `top-left pixel ${b.data[0]}, ${b.data[1]} after the turn`);
    },
  },
  {
    name: "Gemma 3's and Qwen2.5-VL's processors give the goldens' pixel_values",
    async run(ctx) {
      const gem = await text(ctx, `${DIR}/gemma3-vision/golden.json`) as { pixel_values: Nested; resize_case: { image: string; pixel_values: Nested } };
      const gemCfg = readPreprocessorConfig(await text(ctx, `${DIR}/gemma3-vision/preprocessor_config.json`));
      const a = gemma3ImageProcessor(await decodeImage(await ctx.fixture(`${DIR}/gemma3-vision/image.png`)), gemCfg);
      const da = worst(a.pixelValues, flat(gem.pixel_values));
      assert(da <= 1e-6, `gemma3-vision pixel_values: worst difference ${da}`);
      const r = gemma3ImageProcessor(await decodeImage(await ctx.fixture(`${DIR}/gemma3-vision/${gem.resize_case.image}`)), gemCfg);
      const dr = worst(r.pixelValues, flat(gem.resize_case.pixel_values));
      assert(dr <= 1e-6, `gemma3-vision resize case: worst difference ${dr} (torchvision's uint8 resize gives the same bytes)`);
      const qw = await text(ctx, `${DIR}/qwen2.5-vl/golden.json`) as { pixel_values: Nested; image_grid_thw: number[][] };
      const q = qwen2VLImageProcessor(await decodeImage(await ctx.fixture(`${DIR}/qwen2.5-vl/image.png`)), await text(ctx, `${DIR}/qwen2.5-vl/preprocessor_config.json`));
      assert(q.grid.join() === qw.image_grid_thw[0].join() && q.imageTokens === 12, `grid ${q.grid}, ${q.imageTokens} tokens`);
      const dq = worst(q.pixelValues, flat(qw.pixel_values));
      assert(dq <= 1e-6, `qwen2.5-vl pixel_values: worst difference ${dq}`);
    },
  },
]);
