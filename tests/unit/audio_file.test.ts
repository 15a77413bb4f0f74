// WAV decoding, resampling and multipart bodies for /v1/audio/transcriptions (src/serve/audio_file.ts,
// src/serve/multipart.ts): every sample format against its formula, resampling against the band-limited
// signal it should give (and aliasing filtered out), multipart parts as the openai client sends them.
import { describe, expect, it } from 'vitest';
import { audioToPcm, decodeWav, encodeWav, resample } from '../../src/serve/audio_file';
import { multipartBoundary, parseMultipart } from '../../src/serve/multipart';

/** A WAV file of interleaved raw sample bytes. */
function wav(format: number, channels: number, rate: number, bits: number, data: Uint8Array, extensible = false): Uint8Array {
  const fmtSize = extensible ? 40 : 16;
  const out = new Uint8Array(12 + 8 + fmtSize + 8 + data.length + 10);
  const dv = new DataView(out.buffer);
  const put = (at: number, s: string) => { for (let i = 0; i < 4; i++) out[at + i] = s.charCodeAt(i); };
  put(0, 'RIFF'); dv.setUint32(4, out.length - 8, true); put(8, 'WAVE');
  put(12, 'fmt '); dv.setUint32(16, fmtSize, true);
  dv.setUint16(20, extensible ? 0xfffe : format, true); dv.setUint16(22, channels, true); dv.setUint32(24, rate, true);
  dv.setUint32(28, rate * channels * bits / 8, true); dv.setUint16(32, channels * bits / 8, true); dv.setUint16(34, bits, true);
  if (extensible) { dv.setUint16(36, 22, true); dv.setUint16(44, format, true); }
  const d = 20 + fmtSize;
  put(d, 'data'); dv.setUint32(d + 4, data.length, true);
  out.set(data, d + 8);
  put(d + 8 + data.length, 'LIST');   // a trailing chunk the decoder must not read as samples
  return out;
}

describe('decodeWav', () => {
  it('reads 8/16/24/32-bit PCM and 32/64-bit floats, mixes channels to mono, and EXTENSIBLE headers', () => {
    const b16 = new Uint8Array(8); const v16 = new DataView(b16.buffer);
    [-32768, 32767, 16384, -1].forEach((s, i) => v16.setInt16(2 * i, s, true));
    const a = decodeWav(wav(1, 2, 22050, 16, b16));
    expect(a.sampleRate).toBe(22050);
    expect(a.channels).toBe(2);
    expect(Array.from(a.pcm)).toEqual([(-1 + 32767 / 32768) / 2, (0.5 - 1 / 32768) / 2]);
    const b24 = Uint8Array.from([0x00, 0x00, 0x80, 0xff, 0xff, 0x7f, 0x01, 0x00, 0x00]);
    expect(Array.from(decodeWav(wav(1, 1, 8000, 24, b24, true)).pcm)).toEqual([-1, 8388607 / 8388608, 1 / 8388608]);
    expect(Array.from(decodeWav(wav(1, 1, 8000, 8, Uint8Array.from([0, 128, 255]))).pcm)).toEqual([-1, 0, 127 / 128]);
    const b32 = new Uint8Array(8); new DataView(b32.buffer).setInt32(0, -2147483648, true); new DataView(b32.buffer).setInt32(4, 1073741824, true);
    expect(Array.from(decodeWav(wav(1, 1, 8000, 32, b32)).pcm)).toEqual([-1, 0.5]);
    const f32 = new Uint8Array(new Float32Array([0.25, -0.75]).buffer);
    expect(Array.from(decodeWav(wav(3, 1, 16000, 32, f32)).pcm)).toEqual([0.25, -0.75]);
    const f64 = new Uint8Array(new Float64Array([0.125]).buffer);
    expect(Array.from(decodeWav(wav(3, 1, 16000, 64, f64)).pcm)).toEqual([0.125]);
    const rt = decodeWav(encodeWav(new Float32Array([0.5, -0.25, 0]), 16000, 32));
    expect(Array.from(rt.pcm)).toEqual([0.5, -0.25, 0]);
  });

  it('refuses other containers and formats by name', () => {
    expect(() => decodeWav(Uint8Array.from([0x49, 0x44, 0x33, 4, 0, 0]), 'file')).toThrow('decodeWav: file: expected a WAV file (RIFF/WAVE; decode other formats to 16 kHz PCM first');
    expect(() => decodeWav(Uint8Array.from([0x49, 0x44, 0x33, 4, 0, 0]))).toThrow('got mp3 (ID3) data');
    expect(() => decodeWav(new TextEncoder().encode('OggS....'))).toThrow('got ogg data');
    expect(() => decodeWav(Uint8Array.from([0x1a, 0x45, 0xdf, 0xa3, 1]))).toThrow('got webm/matroska data');
    expect(() => decodeWav(wav(2, 1, 8000, 4, new Uint8Array(4)))).toThrow('expected PCM integers of 8/16/24/32 bits or IEEE floats of 32/64 bits, got format 2 with 4 bits');
    const noData = wav(1, 1, 8000, 16, new Uint8Array(0)).subarray(0, 36);
    expect(() => decodeWav(noData)).toThrow('expected a data chunk, got none');
  });
});

describe('resample', () => {
  it('keeps a tone below both Nyquist rates and removes one above the output\'s (48 kHz -> 16 kHz)', () => {
    const from = 48000, to = 16000, n = 48000;
    const tone = (f: number, rate: number, len: number) => Float32Array.from({ length: len }, (_, i) => Math.sin(2 * Math.PI * f * i / rate));
    const out = resample(tone(1000, from, n), from, to);
    expect(out.length).toBe(16000);
    const want = tone(1000, to, out.length);
    let worst = 0;
    for (let i = 200; i < out.length - 200; i++) worst = Math.max(worst, Math.abs(out[i] - want[i]));
    expect(worst).toBeLessThan(2e-3);
    // 11 kHz is past 8 kHz: sampled at 16 kHz without a filter it would alias to 5 kHz at full amplitude.
    const hi = resample(tone(11000, from, n), from, to);
    let peak = 0;
    for (let i = 200; i < hi.length - 200; i++) peak = Math.max(peak, Math.abs(hi[i]));
    expect(peak).toBeLessThan(0.02);
  });

  it('upsamples (8 kHz -> 16 kHz) and passes equal rates through', () => {
    const x = Float32Array.from({ length: 8000 }, (_, i) => Math.sin(2 * Math.PI * 440 * i / 8000));
    const y = resample(x, 8000, 16000);
    expect(y.length).toBe(16000);
    let worst = 0;
    for (let i = 400; i < y.length - 400; i++) worst = Math.max(worst, Math.abs(y[i] - Math.sin(2 * Math.PI * 440 * i / 16000)));
    expect(worst).toBeLessThan(2e-3);
    expect(resample(x, 8000, 8000)).toBe(x);
    expect(audioToPcm(encodeWav(x, 8000, 32), 8000).length).toBe(8000);
    expect(() => resample(x, 0, 16000)).toThrow('resample: rates: expected positive sample rates, got 0 -> 16000');
  });
});

describe('parseMultipart', () => {
  it('reads fields and files as FormData encodes them (Request bodies), and refuses malformed bodies', async () => {
    const fd = new FormData();
    fd.append('model', 'whisper-tiny');
    fd.append('language', 'en');
    const audio = Uint8Array.from([0, 1, 2, 13, 10, 45, 45, 255]);
    fd.append('file', new Blob([audio], { type: 'audio/wav' }), 'clip "1".wav');
    const req = new Request('http://x/', { method: 'POST', body: fd });
    const type = req.headers.get('content-type');
    const boundary = multipartBoundary(type)!;
    expect(boundary).toBeTruthy();
    const parts = parseMultipart(new Uint8Array(await req.arrayBuffer()), boundary);
    expect(parts.map((p) => p.name)).toEqual(['model', 'language', 'file']);
    expect(new TextDecoder().decode(parts[0].bytes)).toBe('whisper-tiny');
    expect(parts[0].filename).toBeNull();
    expect(parts[2].filename).toMatch(/clip .*1.*\.wav/);
    expect(parts[2].contentType).toBe('audio/wav');
    expect(Array.from(parts[2].bytes)).toEqual(Array.from(audio));
    expect(multipartBoundary('application/json')).toBeNull();
    expect(multipartBoundary('multipart/form-data; boundary="a b"')).toBe('a b');
    expect(() => parseMultipart(new TextEncoder().encode('nothing here'), 'xyz')).toThrow('parseMultipart: body: expected a part starting with --xyz, got none');
    expect(() => parseMultipart(new TextEncoder().encode('--xyz\r\nContent-Disposition: form-data; name="a"\r\n\r\nvalue'), 'xyz')).toThrow('expected part 0 to end with --xyz');
    expect(() => parseMultipart(new TextEncoder().encode('--xyz\r\nX: y\r\n\r\nv\r\n--xyz--'), 'xyz')).toThrow('expected part 0 to have a Content-Disposition header');
  });
});
