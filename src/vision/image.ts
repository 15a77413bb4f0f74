// Images as a caller hands them over (API.md "Images in": ImageInput), decoded to 8-bit RGB.
//
// Where each form is decoded:
// - raw pixels { width, height, data, channels? }: copied (RGBA loses its alpha, as PIL's convert('RGB')).
// - PNG / JPEG bytes (Uint8Array, ArrayBuffer, Blob): browsers decode with the platform
//   (createImageBitmap, read back through an OffscreenCanvas 2d context); Node and Deno with pure-JS
//   libraries, fast-png and jpeg-js. Deno has createImageBitmap but no 2d context to read pixels back
//   from (OffscreenCanvas.getContext('2d') is null there), so it takes the libraries as Node does.
// - strings: data: URLs everywhere; http(s) URLs through fetch with a timeout and a byte cap; file: URLs
//   and paths in Node and Deno when the caller allows files (the server does not, for its clients).
//
// JPEGs are turned upright by their EXIF orientation, as HF's load_image and browsers do.
//
// Bounded work: bytes past `maxBytes` are refused before they are read whole, and an image whose header
// says more than `maxPixels` is refused before its pixels are decoded.
import { fmt, WebinferError } from '../core/errors.js';
import { nodeFs } from '../formats/safetensors.js';

/** An image as the API takes it: raw RGB(A) pixels, encoded PNG/JPEG bytes, or a URL / data: URL / path. */
export type ImageInput =
  | { width: number; height: number; data: Uint8Array | Uint8ClampedArray; channels?: 3 | 4 }
  | Uint8Array | ArrayBuffer | Blob | string;

/** 8-bit RGB pixels, row-major, 3 bytes a pixel. */
export interface RgbImage {
  width: number;
  height: number;
  data: Uint8Array;
}

export interface DecodeOptions {
  /** Pixels (width × height) at most. Default 2^25 (about 5800 × 5800). */
  maxPixels?: number;
  /** Encoded bytes at most (a file, a download, a data: URL's payload). Default 32 MiB. */
  maxBytes?: number;
  /** Milliseconds an http(s) download may take. Default 20 000. */
  timeoutMs?: number;
  /** Whether http(s) URLs are fetched. Default true. */
  allowHttp?: boolean;
  /** Whether paths and file: URLs are read (Node, Deno). Default true; a server sets it false for its clients. */
  allowFiles?: boolean;
  /** The argument's name in messages. Default 'image'. */
  name?: string;
  /** Cancels a download. */
  signal?: AbortSignal;
  /** Decode with the libraries even where the platform has a decoder (tests compare the two). */
  forceLibrary?: boolean;
}

export const DEFAULT_MAX_PIXELS = 1 << 25;
export const DEFAULT_MAX_BYTES = 32 << 20;
export const DEFAULT_TIMEOUT_MS = 20_000;

function bad(op: string, name: string, expected: string, got: string): never {
  throw new WebinferError(`${op}: ${name}: expected ${expected}, got ${got}`);
}

interface Limits { maxPixels: number; maxBytes: number; name: string }

function limitsOf(op: string, o: DecodeOptions): Limits {
  const maxPixels = o.maxPixels ?? DEFAULT_MAX_PIXELS;
  const maxBytes = o.maxBytes ?? DEFAULT_MAX_BYTES;
  if (!Number.isSafeInteger(maxPixels) || maxPixels < 1) bad(op, 'maxPixels', 'a positive integer', fmt(maxPixels));
  if (!Number.isSafeInteger(maxBytes) || maxBytes < 1) bad(op, 'maxBytes', 'a positive integer', fmt(maxBytes));
  return { maxPixels, maxBytes, name: o.name ?? 'image' };
}

function checkPixels(op: string, l: Limits, width: number, height: number): void {
  if (width * height > l.maxPixels) {
    bad(op, l.name, `an image of at most ${l.maxPixels} pixels`, `${width} × ${height} = ${width * height} pixels`);
  }
}

/** The format of encoded bytes by their signature, or null. */
export function sniffImage(b: Uint8Array): 'png' | 'jpeg' | null {
  if (b.length >= 8 && b[0] === 0x89 && b[1] === 0x50 && b[2] === 0x4e && b[3] === 0x47 && b[4] === 0x0d && b[5] === 0x0a && b[6] === 0x1a && b[7] === 0x0a) return 'png';
  if (b.length >= 3 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff) return 'jpeg';
  return null;
}

function describeBytes(b: Uint8Array): string {
  const head = Array.from(b.subarray(0, 8), (x) => x.toString(16).padStart(2, '0')).join(' ');
  if (b.length >= 4 && b[0] === 0x52 && b[1] === 0x49 && b[2] === 0x46 && b[3] === 0x46) return `${b.length} bytes of RIFF (WebP?) data`;
  if (b.length >= 3 && b[0] === 0x47 && b[1] === 0x49 && b[2] === 0x46) return `${b.length} bytes of GIF data`;
  return `${b.length} bytes starting ${head || '(none)'}`;
}

/**
 * Width and height from an encoded image's header, without decoding it: PNG's IHDR, JPEG's first
 * start-of-frame segment. Null when the header cannot be found (the decoder then says why).
 */
export function imageHeaderSize(b: Uint8Array): { width: number; height: number } | null {
  const kind = sniffImage(b);
  if (kind === 'png') {
    if (b.length < 24) return null;
    const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
    return { width: dv.getUint32(16), height: dv.getUint32(20) };
  }
  if (kind === 'jpeg') {
    let at = 2;
    while (at + 4 <= b.length) {
      if (b[at] !== 0xff) return null;
      const marker = b[at + 1];
      if (marker === 0xff) { at++; continue; }   // fill bytes
      if (marker === 0xd8 || (marker >= 0xd0 && marker <= 0xd7) || marker === 0x01) { at += 2; continue; }
      const len = (b[at + 2] << 8) | b[at + 3];
      // SOF0..SOF15 except DHT (c4), JPG (c8) and DAC (cc).
      if (marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc) {
        if (at + 9 > b.length) return null;
        return { height: (b[at + 5] << 8) | b[at + 6], width: (b[at + 7] << 8) | b[at + 8] };
      }
      if (marker === 0xda || len < 2) return null;   // scan data before a frame header: malformed
      at += 2 + len;
    }
  }
  return null;
}

/**
 * A JPEG's EXIF orientation (1-8; 1 when it has none): how a camera's pixels must turn to stand
 * upright. HF's load_image applies it (PIL's ImageOps.exif_transpose) and so does a browser's
 * createImageBitmap; jpeg-js does not, so the library path applies it here.
 */
export function jpegOrientation(b: Uint8Array): number {
  if (sniffImage(b) !== 'jpeg') return 1;
  let at = 2;
  while (at + 4 <= b.length && b[at] === 0xff) {
    const marker = b[at + 1];
    const len = (b[at + 2] << 8) | b[at + 3];
    if (marker === 0xda || len < 2) return 1;
    const body = at + 4;
    if (marker === 0xe1 && len >= 16 && body + len - 2 <= b.length
      && b[body] === 0x45 && b[body + 1] === 0x78 && b[body + 2] === 0x69 && b[body + 3] === 0x66 && b[body + 4] === 0 && b[body + 5] === 0) {
      const tiff = body + 6;
      const end = body + len - 2;
      const le = b[tiff] === 0x49;
      const u16 = (o: number): number => (o + 2 > end ? -1 : le ? b[o] | (b[o + 1] << 8) : (b[o] << 8) | b[o + 1]);
      const u32 = (o: number): number => (o + 4 > end ? -1 : le ? (b[o] | (b[o + 1] << 8) | (b[o + 2] << 16)) + b[o + 3] * 2 ** 24 : b[o] * 2 ** 24 + ((b[o + 1] << 16) | (b[o + 2] << 8) | b[o + 3]));
      const ifd = tiff + u32(tiff + 4);
      const count = u16(ifd);
      for (let i = 0; i < count && i < 512; i++) {
        const e = ifd + 2 + i * 12;
        if (u16(e) === 0x0112) {
          const v = u16(e + 8);
          return v >= 1 && v <= 8 ? v : 1;
        }
      }
      return 1;
    }
    at = body + len - 2;
  }
  return 1;
}

/** An image turned upright by its EXIF orientation (as PIL's ImageOps.exif_transpose). */
export function applyOrientation(img: RgbImage, orientation: number): RgbImage {
  if (orientation <= 1 || orientation > 8) return img;
  const { width: W, height: H, data } = img;
  const swap = orientation >= 5;
  const ow = swap ? H : W, oh = swap ? W : H;
  const out = new Uint8Array(data.length);
  for (let y = 0; y < oh; y++) {
    for (let x = 0; x < ow; x++) {
      let sx: number, sy: number;
      switch (orientation) {
        case 2: sx = W - 1 - x; sy = y; break;            // mirrored
        case 3: sx = W - 1 - x; sy = H - 1 - y; break;    // turned 180°
        case 4: sx = x; sy = H - 1 - y; break;            // flipped
        case 5: sx = y; sy = x; break;                    // transposed
        case 6: sx = y; sy = H - 1 - x; break;            // turned 90° clockwise
        case 7: sx = W - 1 - y; sy = H - 1 - x; break;    // transversed
        default: sx = W - 1 - y; sy = x; break;           // 8: turned 90° counter-clockwise
      }
      const o = (y * ow + x) * 3, i = (sy * W + sx) * 3;
      out[o] = data[i]; out[o + 1] = data[i + 1]; out[o + 2] = data[i + 2];
    }
  }
  return { width: ow, height: oh, data: out };
}

/** Raw pixels checked and copied to RGB. */
export function rgbFromRaw(op: string, image: { width: unknown; height: unknown; data: unknown; channels?: unknown }, o: DecodeOptions = {}): RgbImage {
  const l = limitsOf(op, o);
  const { width, height, data, channels } = image;
  if (typeof width !== 'number' || !Number.isSafeInteger(width) || width < 1) bad(op, `${l.name}.width`, 'a positive integer', fmt(width));
  if (typeof height !== 'number' || !Number.isSafeInteger(height) || height < 1) bad(op, `${l.name}.height`, 'a positive integer', fmt(height));
  checkPixels(op, l, width, height);
  if (!(data instanceof Uint8Array || data instanceof Uint8ClampedArray)) bad(op, `${l.name}.data`, 'a Uint8Array or Uint8ClampedArray of pixels', fmt(data));
  if (channels !== undefined && channels !== 3 && channels !== 4) bad(op, `${l.name}.channels`, '3 (RGB) or 4 (RGBA)', fmt(channels));
  const n = width * height;
  // Without `channels`, the length tells RGB from RGBA (canvas ImageData is RGBA).
  const c = channels ?? (data.length === n * 4 ? 4 : 3);
  if (data.length !== n * c) {
    bad(op, `${l.name}.data`, `${n * c} bytes (${width} × ${height} × ${c} channels${channels === undefined ? ', or × 4 for RGBA' : ''})`, `${data.length} bytes`);
  }
  return { width, height, data: toRgb(data, n, c) };
}

function toRgb(data: ArrayLike<number>, n: number, c: number): Uint8Array {
  const out = new Uint8Array(n * 3);
  if (c === 3) { out.set(data as Uint8Array); return out; }
  for (let i = 0; i < n; i++) {
    if (c === 1 || c === 2) { const v = data[i * c]; out[i * 3] = v; out[i * 3 + 1] = v; out[i * 3 + 2] = v; }
    else { out[i * 3] = data[i * c]; out[i * 3 + 1] = data[i * c + 1]; out[i * 3 + 2] = data[i * c + 2]; }
  }
  return out;
}

/** Whether this runtime decodes images itself and can read the pixels back (browsers, not Deno). */
function platformDecoder(): boolean {
  if (typeof createImageBitmap !== 'function' || typeof OffscreenCanvas !== 'function') return false;
  if ((globalThis as { Deno?: unknown }).Deno !== undefined) return false;
  try {
    return new OffscreenCanvas(1, 1).getContext('2d') !== null;
  } catch {
    return false;
  }
}

async function decodeWithPlatform(op: string, l: Limits, bytes: Uint8Array, kind: 'png' | 'jpeg'): Promise<RgbImage> {
  let bitmap: ImageBitmap;
  try {
    bitmap = await createImageBitmap(new Blob([bytes as Uint8Array<ArrayBuffer>], { type: `image/${kind}` }),
      { colorSpaceConversion: 'none', premultiplyAlpha: 'none', imageOrientation: 'from-image' });
  } catch (e) {
    return bad(op, l.name, `a ${kind.toUpperCase()} image the browser can decode`, `${bytes.length} bytes it refused (${(e as Error).message})`);
  }
  try {
    checkPixels(op, l, bitmap.width, bitmap.height);
    const canvas = new OffscreenCanvas(bitmap.width, bitmap.height);
    const ctx = canvas.getContext('2d', { willReadFrequently: true }) as OffscreenCanvasRenderingContext2D | null;
    if (!ctx) return bad(op, l.name, 'a 2d canvas to read the decoded pixels from', 'none in this runtime');
    ctx.drawImage(bitmap, 0, 0);
    const px = ctx.getImageData(0, 0, bitmap.width, bitmap.height).data;
    return { width: bitmap.width, height: bitmap.height, data: toRgb(px, bitmap.width * bitmap.height, 4) };
  } finally {
    bitmap.close();
  }
}

/**
 * Refuses a PNG whose compressed pixel data inflates past what its header's size needs (a
 * decompression bomb: a few MiB of IDAT can inflate to gigabytes, and fast-png inflates whatever it
 * is given). The IDAT stream is inflated once through the platform's DecompressionStream, counting.
 */
async function checkPngInflation(op: string, l: Limits, b: Uint8Array): Promise<void> {
  if (b.length < 33 || typeof DecompressionStream !== 'function') return;
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const width = dv.getUint32(16), height = dv.getUint32(20), depth = b[24], colorType = b[25];
  const channels = ({ 0: 1, 2: 3, 3: 1, 4: 2, 6: 4 } as Record<number, number>)[colorType] ?? 4;
  // Rows with their filter byte; Adam7's seven passes add at most a filter byte and a partial byte per row each.
  const need = height * (1 + Math.ceil((width * channels * depth) / 8)) + 14 * (height + 8);
  const idat: Uint8Array[] = [];
  for (let at = 8; at + 8 <= b.length;) {
    const len = dv.getUint32(at);
    const type = String.fromCharCode(b[at + 4], b[at + 5], b[at + 6], b[at + 7]);
    if (type === 'IDAT') idat.push(b.subarray(at + 8, Math.min(at + 8 + len, b.length)));
    if (type === 'IEND') break;
    at += 12 + len;
  }
  const ds = new DecompressionStream('deflate');
  const writer = ds.writable.getWriter();
  const written = (async () => {
    try {
      for (const chunk of idat) await writer.write(chunk as Uint8Array<ArrayBuffer>);
      await writer.close();
    } catch { /* the reader cancelled, or the data is malformed: the decoder says which below */ }
  })();
  try {
    await readCapped(ds.readable, need, false,
      () => bad(op, l.name, `a PNG whose pixel data inflates to at most ${need} bytes (${width} × ${height}, ${channels} × ${depth}-bit samples)`, 'more (a decompression bomb?)'));
  } catch (e) {
    if (e instanceof WebinferError) throw e;   // malformed data: fast-png names the fault
  } finally {
    await written;
  }
}

/**
 * Reads a stream to its end (its chunks kept when `keep`); past `max` bytes it cancels the stream and
 * calls `over`, which throws: a download's size cap, a PNG's inflation bound.
 */
async function readCapped(stream: ReadableStream<Uint8Array>, max: number, keep: boolean, over: () => never): Promise<Uint8Array[]> {
  const reader = stream.getReader();
  const parts: Uint8Array[] = [];
  let n = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return parts;
    n += value.length;
    if (n > max) {
      await reader.cancel();
      over();
    }
    if (keep) parts.push(value);
  }
}

async function decodeWithLibrary(op: string, l: Limits, bytes: Uint8Array, kind: 'png' | 'jpeg'): Promise<RgbImage> {
  if (kind === 'png') {
    await checkPngInflation(op, l, bytes);
    const png = await import('fast-png');
    let img: ReturnType<typeof png.decode>;
    try {
      img = png.decode(bytes);
    } catch (e) {
      return bad(op, l.name, 'a valid PNG image', `${bytes.length} bytes it could not decode (${(e as Error).message})`);
    }
    checkPixels(op, l, img.width, img.height);
    const n = img.width * img.height;
    if (img.palette) {
      const rgb = png.convertIndexedToRgb(img);
      return { width: img.width, height: img.height, data: toRgb(rgb, n, rgb.length / n) };
    }
    if (img.depth === 16) {
      // 16-bit samples keep their high byte (as PIL's convert('RGB') of a 16-bit PNG).
      const d = img.data as Uint16Array;
      const hi = new Uint8Array(d.length);
      for (let i = 0; i < d.length; i++) hi[i] = d[i] >> 8;
      return { width: img.width, height: img.height, data: toRgb(hi, n, img.channels) };
    }
    if (img.depth !== 8) return bad(op, l.name, 'a PNG of 8 or 16 bits a sample, or a palette', `${img.depth}-bit grayscale samples`);
    return { width: img.width, height: img.height, data: toRgb(img.data, n, img.channels) };
  }
  // jpeg-js is CommonJS: its functions are the default export under ES module interop, else the module.
  type JpegJs = { decode: typeof import('jpeg-js').decode };
  const jpegModule = (await import('jpeg-js')) as unknown as JpegJs & { default?: JpegJs };
  const jpeg = jpegModule.default ?? jpegModule;
  try {
    const img = jpeg.decode(bytes, { useTArray: true, formatAsRGBA: false, maxResolutionInMP: Math.ceil(l.maxPixels / 1e6), maxMemoryUsageInMB: 1024 });
    checkPixels(op, l, img.width, img.height);
    const rgb = { width: img.width, height: img.height, data: toRgb(img.data, img.width * img.height, img.data.length / (img.width * img.height)) };
    return applyOrientation(rgb, jpegOrientation(bytes));
  } catch (e) {
    if (e instanceof WebinferError) throw e;
    return bad(op, l.name, 'a valid baseline or progressive JPEG image', `${bytes.length} bytes it could not decode (${(e as Error).message})`);
  }
}

/** Encoded PNG or JPEG bytes decoded to RGB, refused by size before decoding. */
export async function decodeImageBytes(bytes: Uint8Array, o: DecodeOptions = {}, op = 'decodeImage'): Promise<RgbImage> {
  const l = limitsOf(op, o);
  if (bytes.length > l.maxBytes) bad(op, l.name, `an encoded image of at most ${l.maxBytes} bytes`, `${bytes.length} bytes`);
  const kind = sniffImage(bytes);
  if (!kind) bad(op, l.name, 'PNG or JPEG bytes (other formats: decode them to raw { width, height, data } first)', describeBytes(bytes));
  const size = imageHeaderSize(bytes);
  if (size) checkPixels(op, l, size.width, size.height);
  return !o.forceLibrary && platformDecoder() ? decodeWithPlatform(op, l, bytes, kind) : decodeWithLibrary(op, l, bytes, kind);
}

/** A data: URL's payload (base64 or percent-encoded). */
function dataUrlBytes(op: string, l: Limits, url: string): Uint8Array {
  const comma = url.indexOf(',');
  if (comma < 0) bad(op, l.name, "a data: URL of the form 'data:image/png;base64,...'", fmt(url.slice(0, 64)));
  const meta = url.slice(5, comma).toLowerCase();
  const body = url.slice(comma + 1);
  const mime = meta.split(';')[0];
  if (mime !== '' && mime !== 'image/png' && mime !== 'image/jpeg' && mime !== 'image/jpg' && mime !== 'application/octet-stream') {
    bad(op, l.name, 'a data: URL of image/png or image/jpeg', `one of ${fmt(mime.slice(0, 64))}`);
  }
  if (meta.endsWith(';base64')) {
    // 4 characters carry 3 bytes: the size is known before decoding.
    const clean = body.replace(/[\s]/g, '');
    const n = Math.floor((clean.length * 3) / 4);
    if (n > l.maxBytes + 3) bad(op, l.name, `an encoded image of at most ${l.maxBytes} bytes`, `a data: URL of about ${n} bytes`);
    if (!/^[A-Za-z0-9+/_-]*={0,2}$/.test(clean)) bad(op, l.name, 'a data: URL whose payload is base64', 'characters outside base64');
    const bin = atob(clean.replace(/-/g, '+').replace(/_/g, '/'));
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  }
  if (body.length > l.maxBytes * 3) bad(op, l.name, `an encoded image of at most ${l.maxBytes} bytes`, `a data: URL of ${body.length} characters`);
  let text: string;
  try { text = decodeURIComponent(body); } catch { return bad(op, l.name, 'a data: URL with valid percent-encoding', 'malformed escapes'); }
  const out = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) out[i] = text.charCodeAt(i) & 0xff;
  return out;
}

/** An http(s) download with a timeout and a byte cap, read as a stream so the cap holds mid-body. */
async function fetchBytes(op: string, l: Limits, url: string, o: DecodeOptions): Promise<Uint8Array> {
  const timeoutMs = o.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const signals = [AbortSignal.timeout(timeoutMs)];
  if (o.signal) signals.push(o.signal);
  const signal = AbortSignal.any(signals);
  let res: Response;
  try {
    res = await fetch(url, { signal, redirect: 'follow' });
  } catch (e) {
    const why = signal.aborted && !o.signal?.aborted ? `no answer within ${timeoutMs} ms` : (e as Error).message;
    return bad(op, l.name, 'a URL that can be downloaded', `${fmt(url.slice(0, 200))}: ${why}`);
  }
  if (!res.ok) { await res.body?.cancel(); return bad(op, l.name, 'a URL answering 200', `${fmt(url.slice(0, 200))} answered ${res.status}`); }
  const declared = Number(res.headers.get('content-length'));
  if (Number.isFinite(declared) && declared > l.maxBytes) {
    await res.body?.cancel();
    bad(op, l.name, `an encoded image of at most ${l.maxBytes} bytes`, `${fmt(url.slice(0, 200))} of ${declared} bytes`);
  }
  if (!res.body) return new Uint8Array(await res.arrayBuffer());
  let parts: Uint8Array[];
  try {
    parts = await readCapped(res.body, l.maxBytes, true,
      () => bad(op, l.name, `an encoded image of at most ${l.maxBytes} bytes`, `${fmt(url.slice(0, 200))} of more than ${l.maxBytes} bytes`));
  } catch (e) {
    if (e instanceof WebinferError) throw e;
    const why = signal.aborted && !o.signal?.aborted ? `not downloaded within ${timeoutMs} ms` : (e as Error).message;
    return bad(op, l.name, 'a URL that can be downloaded', `${fmt(url.slice(0, 200))}: ${why}`);
  }
  const out = new Uint8Array(parts.reduce((a, p) => a + p.length, 0));
  let at = 0;
  for (const p of parts) { out.set(p, at); at += p.length; }
  return out;
}

/** Node or Deno: the runtimes with a file system (a page or a worker has none). */
const hasFiles = (): boolean => typeof (globalThis as { Deno?: unknown }).Deno !== 'undefined'
  || typeof (globalThis as { process?: { versions?: { node?: string } } }).process?.versions?.node === 'string';

async function fileBytes(op: string, l: Limits, spec: string): Promise<Uint8Array> {
  if (!hasFiles()) bad(op, l.name, 'a data: or http(s) URL (a page or worker cannot read paths)', fmt(spec.slice(0, 200)));
  let path = spec;
  if (spec.startsWith('file:')) {
    const specifier = 'node:url';
    const { fileURLToPath } = (await import(/* @vite-ignore */ specifier)) as { fileURLToPath(u: string): string };
    path = fileURLToPath(spec);
  }
  const fs = await nodeFs();
  let size: number;
  try {
    const st = await fs.stat(path);
    if (st.isDirectory?.()) bad(op, l.name, 'an image file', `the directory ${fmt(path)}`);
    size = st.size;
  } catch (e) {
    if (e instanceof WebinferError) throw e;
    return bad(op, l.name, 'a readable image file (a path or file: URL)', `${fmt(path)}: ${(e as Error).message}`);
  }
  if (size > l.maxBytes) bad(op, l.name, `an encoded image of at most ${l.maxBytes} bytes`, `${fmt(path)} of ${size} bytes`);
  return new Uint8Array(await fs.readFile(path));
}

/**
 * Any ImageInput decoded to 8-bit RGB. Raw pixels are checked and copied; bytes, Blobs, URLs and paths
 * are read within the limits and decoded.
 */
export async function decodeImage(input: ImageInput, o: DecodeOptions = {}): Promise<RgbImage> {
  const op = 'decodeImage';
  const l = limitsOf(op, o);
  if (typeof input === 'string') {
    const lower = input.slice(0, 8).toLowerCase();
    if (lower.startsWith('data:')) return decodeImageBytes(dataUrlBytes(op, l, input), o, op);
    if (lower.startsWith('http://') || lower.startsWith('https://')) {
      if (o.allowHttp === false) bad(op, l.name, 'a data: URL (http(s) URLs are not fetched here)', fmt(input.slice(0, 200)));
      return decodeImageBytes(await fetchBytes(op, l, input, o), o, op);
    }
    if (input.length === 0) bad(op, l.name, 'a data: URL, an http(s) URL or a path', "''");
    if (/^[a-z][a-z0-9+.-]*:/i.test(input) && !lower.startsWith('file:') && !/^[a-z]:[\\/]/i.test(input)) {
      bad(op, l.name, 'a data: URL, an http(s) URL, a file: URL or a path', `a URL of scheme ${fmt(input.slice(0, input.indexOf(':') + 1))}`);
    }
    if (o.allowFiles === false) bad(op, l.name, o.allowHttp === false ? 'a data: URL (paths are not read here)' : 'a data: or http(s) URL (paths are not read here)', fmt(input.slice(0, 200)));
    return decodeImageBytes(await fileBytes(op, l, input), o, op);
  }
  if (input instanceof Uint8Array) return decodeImageBytes(input, o, op);
  if (input instanceof ArrayBuffer) return decodeImageBytes(new Uint8Array(input), o, op);
  if (typeof Blob !== 'undefined' && input instanceof Blob) {
    if (input.size > l.maxBytes) bad(op, l.name, `an encoded image of at most ${l.maxBytes} bytes`, `a Blob of ${input.size} bytes`);
    return decodeImageBytes(new Uint8Array(await input.arrayBuffer()), o, op);
  }
  if (input !== null && typeof input === 'object' && 'data' in input && 'width' in input) return rgbFromRaw(op, input, o);
  return bad(op, l.name, 'raw pixels { width, height, data, channels? }, PNG/JPEG bytes (Uint8Array, ArrayBuffer, Blob), or a URL / data: URL / path', fmt(input));
}
