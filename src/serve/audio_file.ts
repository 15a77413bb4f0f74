// Audio files as a transcription request brings them: RIFF/WAVE (PCM 8/16/24/32-bit integers, IEEE
// float 32/64, WAVE_FORMAT_EXTENSIBLE of those), mixed down to mono and resampled to the rate the
// model's feature extractor wants (Whisper: 16 kHz) with a windowed-sinc low-pass, so 44.1/48 kHz
// recordings do not alias into the speech band. Other containers (mp3, ogg, webm, m4a) are refused by
// name: decoding them needs a codec this package does not carry (a page can decode them with
// AudioContext.decodeAudioData and pass the PCM).
import { WebinferError } from '../core/errors.js';

export interface DecodedAudio {
  sampleRate: number;
  channels: number;
  /** Mono samples in [-1, 1] (channels averaged). */
  pcm: Float32Array;
}

const fourcc = (b: Uint8Array, at: number) => String.fromCharCode(b[at], b[at + 1], b[at + 2], b[at + 3]);

/** The container a file's first bytes name, for refusals ('mp3', 'ogg', ...), or null. */
function sniff(b: Uint8Array): string | null {
  if (b.length >= 3 && b[0] === 0x49 && b[1] === 0x44 && b[2] === 0x33) return 'mp3 (ID3)';
  if (b.length >= 2 && b[0] === 0xff && (b[1] & 0xe0) === 0xe0) return 'mp3 (MPEG audio)';
  if (b.length >= 4 && fourcc(b, 0) === 'OggS') return 'ogg';
  if (b.length >= 4 && fourcc(b, 0) === 'fLaC') return 'flac';
  if (b.length >= 4 && b[0] === 0x1a && b[1] === 0x45 && b[2] === 0xdf && b[3] === 0xa3) return 'webm/matroska';
  if (b.length >= 8 && fourcc(b, 4) === 'ftyp') return 'mp4/m4a';
  return null;
}

/** Decodes a WAV file's bytes to mono f32 samples. */
export function decodeWav(bytes: Uint8Array, what = 'file'): DecodedAudio {
  const bad = (expected: string, got: string): never => {
    throw new WebinferError(`decodeWav: ${what}: expected ${expected}, got ${got}`);
  };
  if (bytes.length < 12 || fourcc(bytes, 0) !== 'RIFF' || fourcc(bytes, 8) !== 'WAVE') {
    const kind = sniff(bytes);
    bad('a WAV file (RIFF/WAVE; decode other formats to 16 kHz PCM first, e.g. with AudioContext.decodeAudioData or ffmpeg -ar 16000 -ac 1 x.wav)',
      kind ? `${kind} data` : `${bytes.length} bytes that are not RIFF/WAVE`);
  }
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let fmt: { format: number; channels: number; rate: number; bits: number; align: number } | null = null;
  let data: Uint8Array | null = null;
  for (let at = 12; at + 8 <= bytes.length;) {
    const id = fourcc(bytes, at);
    const size = dv.getUint32(at + 4, true);
    const body = at + 8;
    if (id === 'fmt ') {
      if (size < 16 || body + size > bytes.length) bad('a fmt chunk of at least 16 bytes', `${size} bytes`);
      let format = dv.getUint16(body, true);
      if (format === 0xfffe && size >= 26) format = dv.getUint16(body + 24, true);   // EXTENSIBLE: the subformat GUID's first word
      fmt = { format, channels: dv.getUint16(body + 2, true), rate: dv.getUint32(body + 4, true), align: dv.getUint16(body + 12, true), bits: dv.getUint16(body + 14, true) };
    } else if (id === 'data') {
      // A streamed WAV may give 0 or 0xffffffff as its data size: the rest of the file.
      const end = size === 0 || size === 0xffffffff || body + size > bytes.length ? bytes.length : body + size;
      data = bytes.subarray(body, end);
      break;
    }
    at = body + size + (size & 1);
  }
  if (!fmt) return bad('a fmt chunk', 'none');
  if (!data) return bad('a data chunk', 'none');
  const { format, channels, rate, bits } = fmt;
  if (channels < 1) bad('at least 1 channel', String(channels));
  if (!(rate > 0)) bad('a positive sample rate', String(rate));
  const supported = (format === 1 && [8, 16, 24, 32].includes(bits)) || (format === 3 && (bits === 32 || bits === 64));
  if (!supported) bad('PCM integers of 8/16/24/32 bits or IEEE floats of 32/64 bits', `format ${format} with ${bits} bits`);
  const bps = bits / 8;
  const frame = channels * bps;
  const frames = Math.floor(data.length / frame);
  const ddv = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const read = (o: number): number => {
    if (format === 3) return bits === 32 ? ddv.getFloat32(o, true) : ddv.getFloat64(o, true);
    switch (bits) {
      case 8: return (ddv.getUint8(o) - 128) / 128;
      case 16: return ddv.getInt16(o, true) / 32768;
      case 24: return (((ddv.getUint8(o + 2) << 24) | (ddv.getUint8(o + 1) << 16) | (ddv.getUint8(o) << 8)) >> 8) / 8388608;
      default: return ddv.getInt32(o, true) / 2147483648;
    }
  };
  const pcm = new Float32Array(frames);
  for (let f = 0; f < frames; f++) {
    let s = 0;
    for (let c = 0; c < channels; c++) s += read(f * frame + c * bps);
    pcm[f] = s / channels;
  }
  return { sampleRate: rate, channels, pcm };
}

/**
 * Resamples mono samples from one rate to another: a Hann-windowed sinc of 32 zero crossings a side,
 * its cutoff at the lower of the two Nyquist rates (so downsampling filters out what would alias).
 */
export function resample(pcm: Float32Array, from: number, to: number): Float32Array {
  if (!(from > 0) || !(to > 0)) throw new WebinferError(`resample: rates: expected positive sample rates, got ${from} -> ${to}`);
  if (from === to) return pcm;
  const ratio = to / from;
  const cutoff = Math.min(1, ratio);            // of the input's Nyquist rate
  const zeros = 32;
  const half = Math.ceil(zeros / cutoff);          // taps a side, in input samples
  const n = Math.floor(pcm.length * ratio);
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    const x = i / ratio;                           // the output sample's position in input samples
    const c = Math.floor(x);
    let acc = 0, wsum = 0;
    for (let j = c - half + 1; j <= c + half; j++) {
      const d = x - j;
      const t = d * cutoff;
      const sinc = t === 0 ? 1 : Math.sin(Math.PI * t) / (Math.PI * t);
      const w = Math.abs(d) >= half ? 0 : 0.5 + 0.5 * Math.cos(Math.PI * d / half);
      const k = sinc * w;
      wsum += k;
      if (j >= 0 && j < pcm.length) acc += pcm[j] * k;
    }
    out[i] = wsum !== 0 ? acc / wsum : 0;
  }
  return out;
}

/** A WAV file's samples as mono f32 at `rate` Hz. */
export function audioToPcm(bytes: Uint8Array, rate: number, what = 'file'): Float32Array {
  const a = decodeWav(bytes, what);
  return resample(a.pcm, a.sampleRate, rate);
}

/** A mono f32 WAV file of samples (for tests, the demo's recordings and round trips). */
export function encodeWav(pcm: Float32Array, rate: number, bits: 16 | 32 = 16): Uint8Array {
  const bps = bits / 8;
  const out = new Uint8Array(44 + pcm.length * bps);
  const dv = new DataView(out.buffer);
  const put = (at: number, s: string) => { for (let i = 0; i < 4; i++) out[at + i] = s.charCodeAt(i); };
  put(0, 'RIFF'); dv.setUint32(4, 36 + pcm.length * bps, true); put(8, 'WAVE');
  put(12, 'fmt '); dv.setUint32(16, 16, true); dv.setUint16(20, bits === 32 ? 3 : 1, true); dv.setUint16(22, 1, true);
  dv.setUint32(24, rate, true); dv.setUint32(28, rate * bps, true); dv.setUint16(32, bps, true); dv.setUint16(34, bits, true);
  put(36, 'data'); dv.setUint32(40, pcm.length * bps, true);
  for (let i = 0; i < pcm.length; i++) {
    if (bits === 32) dv.setFloat32(44 + 4 * i, pcm[i], true);
    else dv.setInt16(44 + 2 * i, Math.max(-32768, Math.min(32767, Math.round(pcm[i] * 32768))), true);
  }
  return out;
}
