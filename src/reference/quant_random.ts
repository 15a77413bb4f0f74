// Seeded random blocks of ggml's quantized formats (SPEC §8), for kernel tests: every quant, scale-index
// and high-bit field is random bits, so every code path of a decoder is exercised; only the f16 (and
// E8M0) scale fields are drawn as numbers, so that no block holds Inf or NaN and magnitudes stay sane.
import { QUANT_FORMATS, type GgmlQuantType, type QuantType } from '../core/quant.js';
import { f32ToBf16Bits, f32ToF16Bits } from '../core/dtype.js';
import { rng } from '../core/random.js';
import { quantRowsBytes } from './quant.js';

export interface RandomQuantOptions {
  /** |scale| is log-uniform in this range (f16 fields: d, m, dmin). Default [1e-3, 1e-1]. */
  scaleRange?: readonly [number, number];
  /** E8M0 exponents (MXFP4) uniform in this inclusive range; scale 2^(e − 128). Default [118, 126]:
   *  half-scales 2^-10 .. 2^-2, so |w| <= 3. */
  e8m0Range?: readonly [number, number];
}

/** The f16 fields of each format's block: byte offset and whether a random sign is drawn (the formats
 *  whose ggml quantizer can write a negative value there); the others are positive, as ggml writes them
 *  (asymmetric formats' d and dmin are non-negative: the min is subtracted). */
const F16_FIELDS: Readonly<Record<GgmlQuantType, readonly (readonly [offset: number, signed: boolean])[]>> = {
  Q8_0: [[0, true]],
  Q4_0: [[0, true]],
  Q4_1: [[0, false], [2, true]],       // d, m (m = the block's min: either sign)
  Q5_0: [[0, true]],
  Q5_1: [[0, false], [2, true]],
  Q2_K: [[80, false], [82, false]],    // d, dmin
  Q3_K: [[108, true]],
  Q4_K: [[0, false], [2, false]],
  Q5_K: [[0, false], [2, false]],
  Q6_K: [[208, true]],
  IQ4_NL: [[0, true]],
  IQ4_XS: [[0, true]],
  MXFP4: [],
};

/**
 * `rows` rows of K values of `type` as random valid blocks in the GGUF layout, deterministic from `seed`
 * (mulberry32, core/random.ts). All bits random except the f16 scale fields (finite, |value| log-uniform in
 * `scaleRange`, sign as F16_FIELDS says) and MXFP4's E8M0 exponent (uniform in `e8m0Range`).
 */
export function randomQuantRows(type: QuantType, rows: number, K: number, seed: number,
                                o: RandomQuantOptions = {}): Uint8Array {
  const n = quantRowsBytes(type, rows, K, 'randomQuantRows');
  const [lo, hi] = o.scaleRange ?? [1e-3, 1e-1];
  const [elo, ehi] = o.e8m0Range ?? [118, 126];
  if (!(lo > 0 && hi >= lo && hi <= 65504)) throw new RangeError(`randomQuantRows: scaleRange: expected 0 < lo <= hi <= 65504, got [${lo}, ${hi}]`);
  if (!(Number.isInteger(elo) && Number.isInteger(ehi) && elo >= 0 && ehi >= elo && ehi <= 255)) {
    throw new RangeError(`randomQuantRows: e8m0Range: expected integers 0 <= lo <= hi <= 255, got [${elo}, ${ehi}]`);
  }
  const r = rng(seed);
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i++) out[i] = (r() * 256) >>> 0;
  const f = QUANT_FORMATS[type];
  const lnLo = Math.log(lo), lnHi = Math.log(hi);
  const g = f.group;
  if (g) {
    // Group types (core/quant.ts): random bodies (FP8's NaN bytes 0x7f / 0xff moved one down); the
    // scale log-uniform in scaleRange (either sign for A and F, positive for Z as AWQ/GPTQ write it);
    // A's bias uniform in ±8·scale, Z's zero any integer of its bits.
    const dv = new DataView(out.buffer);
    for (let o0 = 0; o0 < n; o0 += f.blockBytes) {
      if (g.kind === 'F') for (let i = o0; i < o0 + g.bodyBytes; i++) if ((out[i]! & 0x7f) === 0x7f) out[i]! -= 1;
      let v = Math.exp(lnLo + (lnHi - lnLo) * r());
      if (g.kind !== 'Z' && r() < 0.5) v = -v;
      const h = o0 + g.bodyBytes;
      const second = g.kind === 'A' ? (r() * 2 - 1) * 8 * Math.abs(v) : g.kind === 'Z' ? Math.floor(r() * (1 << g.bits)) : 0;
      if (g.scale === 'F32') {
        dv.setFloat32(h, v, true);
        if (g.kind === 'A') dv.setFloat32(h + 4, second, true);
        else if (g.kind === 'Z') dv.setUint32(h + 4, second, true);
      } else {
        const enc = g.scale === 'F16' ? f32ToF16Bits : f32ToBf16Bits;
        dv.setUint16(h, enc(v), true);
        dv.setUint16(h + 2, g.kind === 'A' ? enc(second) : second, true);
      }
    }
    return out;
  }
  const fields = F16_FIELDS[type as GgmlQuantType];
  for (let o0 = 0; o0 < n; o0 += f.blockBytes) {
    for (const [off, signed] of fields) {
      let v = Math.exp(lnLo + (lnHi - lnLo) * r());
      if (signed && r() < 0.5) v = -v;
      const h = f32ToF16Bits(v);
      out[o0 + off] = h & 0xff;
      out[o0 + off + 1] = h >> 8;
    }
    if (type === 'MXFP4') out[o0] = elo + Math.min(ehi - elo, Math.floor(r() * (ehi - elo + 1)));
  }
  return out;
}
