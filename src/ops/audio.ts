// Whisper's log-mel front end on the GPU (shaders/ops/audio.wgsl): WhisperFeatureExtractor's torch path,
// 16 kHz mono PCM in windows of chunk samples -> [mels × frames] features per window. The mel filter bank
// (Slaney scale and area norm), the Hann window and the DFT table are made on the host in float64 from
// the preprocessor config, as the extractor makes its filters, and uploaded once (MelFrontEnd).
import { check, checkPosInt, fmt, isPosInt, shapeStr } from '../core/errors.js';
import type { Runtime } from '../core/runtime.js';
import { checkTensor, type Tensor } from '../core/tensor.js';

const WG = 256;

/** Slaney's mel scale (librosa's default, the extractor's): linear below 1 kHz, logarithmic above. */
function hzToMel(f: number): number {
  const minLogHz = 1000, minLogMel = 15, logstep = 27 / Math.log(6.4);
  return f >= minLogHz ? minLogMel + Math.log(f / minLogHz) * logstep : (3 * f) / 200;
}

function melToHz(m: number): number {
  const minLogHz = 1000, minLogMel = 15, logstep = Math.log(6.4) / 27;
  return m >= minLogMel ? minLogHz * Math.exp(logstep * (m - minLogMel)) : (200 * m) / 3;
}

function linspace(a: number, b: number, n: number): Float64Array {
  const out = new Float64Array(n);
  // numpy's linspace: a + i·step, the last point exactly b.
  const step = (b - a) / (n - 1);
  for (let i = 0; i < n; i++) out[i] = a + i * step;
  if (n > 1) out[n - 1] = b;
  return out;
}

/**
 * The extractor's filter bank [nFreq][nMels] (row-major): triangular filters between mel-spaced edges
 * from fMin to fMax on Slaney's scale over the nFreq = nFft/2 + 1 bins from 0 to sr/2, each scaled by
 * 2 / (its upper edge − its lower edge) (Slaney's area norm). Float64, as transformers' mel_filter_bank.
 */
export function melFilterBank(nFreq: number, nMels: number, samplingRate: number, fMin = 0, fMax = 8000): Float64Array {
  const op = 'melFilterBank';
  checkPosInt(nFreq, op, 'nFreq');
  checkPosInt(nMels, op, 'nMels');
  checkPosInt(samplingRate, op, 'samplingRate');
  check(Number.isFinite(fMin) && Number.isFinite(fMax) && fMin >= 0 && fMax > fMin, op, 'fMax', `a frequency above fMin=${fMin}`, fMax);
  const melEdges = linspace(hzToMel(fMin), hzToMel(fMax), nMels + 2);
  const edges = melEdges.map(melToHz);
  const bins = linspace(0, Math.floor(samplingRate / 2), nFreq);
  const out = new Float64Array(nFreq * nMels);
  for (let m = 0; m < nMels; m++) {
    const lo = edges[m], mid = edges[m + 1], hi = edges[m + 2];
    const enorm = 2 / (hi - lo);
    for (let k = 0; k < nFreq; k++) {
      const down = -(lo - bins[k]) / (mid - lo);
      const up = (hi - bins[k]) / (hi - mid);
      out[k * nMels + m] = Math.max(0, Math.min(down, up)) * enorm;
    }
  }
  return out;
}

/** The extractor's settings (preprocessor_config.json) the front end uses. */
export interface MelConfig {
  /** Mel bins (feature_size): 80 or 128. */
  nMels: number;
  nFft: number;
  hopLength: number;
  samplingRate: number;
  /** Samples of one window (n_samples = chunk_length · sampling_rate). */
  chunkSamples: number;
}

/** Reads a preprocessor_config.json of a WhisperFeatureExtractor. */
export function parseMelConfig(pre: unknown, op = 'parseMelConfig'): MelConfig {
  check(pre !== null && typeof pre === 'object', op, 'preprocessor config', 'a parsed preprocessor_config.json object', pre);
  const p = pre as Record<string, unknown>;
  const num = (k: string, d?: number) => {
    const v = p[k] ?? d;
    check(isPosInt(v), op, `preprocessor config ${k}`, 'a positive integer', v);
    return v;
  };
  const samplingRate = num('sampling_rate', 16000);
  const nFft = num('n_fft', 400);
  const hopLength = num('hop_length', 160);
  const nMels = num('feature_size', 80);
  const chunkSamples = p.n_samples !== undefined ? num('n_samples') : num('chunk_length', 30) * samplingRate;
  check(chunkSamples % hopLength === 0, op, 'preprocessor config n_samples', `a multiple of hop_length=${hopLength}`, chunkSamples);
  check(chunkSamples > nFft / 2, op, 'preprocessor config n_samples', `more than n_fft/2=${nFft / 2} samples (reflect padding)`, chunkSamples);
  check(nFft % 2 === 0 && nFft <= 1024, op, 'preprocessor config n_fft', 'an even number up to 1024', nFft);
  return { nMels, nFft, hopLength, samplingRate, chunkSamples };
}

/** The front end's tables on the GPU for one config. */
export class MelFrontEnd {
  readonly frames: number;
  readonly window: Tensor;
  readonly twiddle: Tensor;
  readonly filters: Tensor;
  /** The filters as uploaded (f32 of the float64 bank): [nFreq, nMels]. */
  readonly filtersHost: Float32Array;

  constructor(private readonly rt: Runtime, readonly cfg: MelConfig) {
    const { nFft, nMels, samplingRate } = cfg;
    this.frames = cfg.chunkSamples / cfg.hopLength;
    const win = new Float32Array(nFft), tw = new Float32Array(2 * nFft);
    for (let n = 0; n < nFft; n++) {
      win[n] = 0.5 - 0.5 * Math.cos((2 * Math.PI * n) / nFft);   // periodic Hann
      tw[n] = Math.cos((2 * Math.PI * n) / nFft);
      tw[nFft + n] = Math.sin((2 * Math.PI * n) / nFft);
    }
    this.filtersHost = Float32Array.from(melFilterBank(nFft / 2 + 1, nMels, samplingRate));
    this.window = rt.tensor(win, [nFft], 'f32');
    this.twiddle = rt.tensor(tw, [2, nFft], 'f32');
    this.filters = rt.tensor(this.filtersHost, [nFft / 2 + 1, nMels], 'f32');
  }

  /** Windows of chunkSamples each, from PCM of any length: cut into windows, the last zero-padded (at least one). */
  windows(pcm: Float32Array): Float32Array {
    const n = this.cfg.chunkSamples;
    const chunks = Math.max(1, Math.ceil(pcm.length / n));
    const out = new Float32Array(chunks * n);
    out.set(pcm);
    return out;
  }

  /**
   * Features of `pcm` (f32 [chunks · chunkSamples], whole windows) -> f32 [chunks, nMels, frames]
   * (into o.out when given).
   */
  run(pcm: Tensor, o: { out?: Tensor } = {}): Tensor {
    const op = 'logMel';
    const rt = this.rt;
    rt.assertAlive(op);
    checkTensor(pcm, op, 'pcm');
    const { chunkSamples, nMels, nFft, hopLength } = this.cfg;
    check(pcm.dtype === 'f32', op, 'pcm.dtype', "'f32'", fmt(pcm.dtype));
    check(pcm.numel > 0 && pcm.numel % chunkSamples === 0, op, 'pcm', `whole windows of ${chunkSamples} samples`, shapeStr(pcm.shape));
    const chunks = pcm.numel / chunkSamples;
    const n = chunks * nMels * this.frames;
    if (o.out) {
      checkTensor(o.out, op, 'o.out');
      check(o.out.dtype === 'f32' && o.out.numel >= n, op, 'o.out', `an f32 tensor of at least ${n} elements`, `${o.out.dtype} ${shapeStr(o.out.shape)}`);
    }
    const out = o.out ?? rt.emptyTensor([chunks, nMels, this.frames], 'f32');
    const u = { chunks, chunk: chunkSamples, hop: hopLength, frames: this.frames, n_mels: nMels };
    const mel = rt.kernel('ops_audio', 'logmel_main', { consts: { NFFT: nFft, WG } });
    rt.dispatch(mel, { pcm, window: this.window, twiddle: this.twiddle, filters: this.filters, out }, u, chunks * this.frames);
    const norm = rt.kernel('ops_audio', 'lognorm_main', { consts: { NFFT: nFft, WG } });
    rt.dispatch(norm, { out }, u, chunks);
    return out;
  }

  destroy(): void {
    this.window.destroy();
    this.twiddle.destroy();
    this.filters.destroy();
  }
}
