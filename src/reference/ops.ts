// The float64 reference of the model-building ops beside attention (SPEC §7): RMSNorm, rotary position
// embedding, residual add, the SiLU-gated MLP product, embedding lookup, argmax and sampling (with the
// counter-based PRNG the sampling kernel uses, so a draw can be replayed on the CPU).
//
// Conventions as in attention.ts: flat row-major inputs already rounded to their storage dtype, explicit
// dims, fresh Float64Array outputs, errors that name the argument. Strided row views address rows as
// (token m, head h) at element `offset + m·tokenStride + h·headStride`, as the kernels do.
import { checkInt } from './util.js';

/** Rows of a flat array seen as (token m < rows, head h < heads), each `n` long. */
export interface RowsRef {
  rows: number;
  n: number;
  heads?: number;
  offset?: number;
  /** Default: heads · headStride (dense tokens). */
  tokenStride?: number;
  /** Default: n (dense heads). */
  headStride?: number;
}

interface Layout { rows: number; heads: number; offset: number; ts: number; hs: number }

function layout(v: { rows: number; heads?: number; offset?: number; tokenStride?: number; headStride?: number }, n: number,
                len: number, name: string): Layout {
  checkInt(v.rows, `${name}.rows`, 0);
  const heads = v.heads ?? 1;
  checkInt(heads, `${name}.heads`, 1);
  const offset = v.offset ?? 0;
  checkInt(offset, `${name}.offset`, 0);
  const hs = v.headStride ?? n;
  const ts = v.tokenStride ?? heads * hs;
  checkInt(hs, `${name}.headStride`, 0);
  checkInt(ts, `${name}.tokenStride`, 0);
  const last = v.rows === 0 ? 0 : offset + (v.rows - 1) * ts + (heads - 1) * hs + n;
  if (last > len) throw new Error(`${name}: rows reach element ${last - 1}, past the ${len} elements given`);
  return { rows: v.rows, heads, offset, ts, hs };
}

// ---------------------------------------------------------------------------------------------
// RMSNorm

/**
 * RMSNorm of every row of a (possibly strided) view: y = x / sqrt(mean(x²) + eps) · w, the math of
 * HF's LlamaRMSNorm (and Qwen3's per-head q_norm/k_norm, DeepSeek's q_a/kv_a layernorms over a slice).
 * Returns [rows, heads, n] dense, in (m, h, j) order.
 */
export function rmsNormRef(x: ArrayLike<number>, weight: ArrayLike<number>, eps: number, view: RowsRef): Float64Array {
  const n = view.n;
  checkInt(n, 'n', 1);
  if (weight.length !== n) throw new Error(`weight: expected ${n} elements, got ${weight.length}`);
  if (!(eps >= 0)) throw new Error(`eps: expected a number >= 0, got ${eps}`);
  const L = layout(view, n, x.length, 'x');
  const out = new Float64Array(L.rows * L.heads * n);
  for (let m = 0; m < L.rows; m++) {
    for (let h = 0; h < L.heads; h++) {
      const b = L.offset + m * L.ts + h * L.hs;
      let ss = 0;
      for (let j = 0; j < n; j++) ss += x[b + j]! * x[b + j]!;
      const inv = 1 / Math.sqrt(ss / n + eps);
      const o = (m * L.heads + h) * n;
      for (let j = 0; j < n; j++) out[o + j] = weight[j]! * (x[b + j]! * inv);
    }
  }
  return out;
}

/** LayerNorm over the rows of a view: (x - mean) / sqrt(var + eps) · w + b (biased variance; bias optional). */
export function layerNormRef(x: ArrayLike<number>, weight: ArrayLike<number>, bias: ArrayLike<number> | null, eps: number, view: RowsRef): Float64Array {
  const n = view.n;
  checkInt(n, 'n', 1);
  if (weight.length !== n) throw new Error(`weight: expected ${n} elements, got ${weight.length}`);
  if (bias && bias.length !== n) throw new Error(`bias: expected ${n} elements, got ${bias.length}`);
  const L = layout(view, n, x.length, 'x');
  const out = new Float64Array(L.rows * L.heads * n);
  for (let m = 0; m < L.rows; m++) {
    for (let h = 0; h < L.heads; h++) {
      const b = L.offset + m * L.ts + h * L.hs;
      let mean = 0;
      for (let j = 0; j < n; j++) mean += x[b + j]!;
      mean /= n;
      let v = 0;
      for (let j = 0; j < n; j++) v += (x[b + j]! - mean) ** 2;
      const inv = 1 / Math.sqrt(v / n + eps);
      for (let j = 0; j < n; j++) out[(m * L.heads + h) * n + j] = (x[b + j]! - mean) * inv * weight[j]! + (bias ? bias[j]! : 0);
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// RoPE

export type RopePairing = 'half' | 'interleaved';

/** A rotary view: rows as in RowsRef, the rotary part of each head starting at rotaryOffset. */
export interface RopeRowsRef {
  rows: number;
  heads?: number;
  offset?: number;
  tokenStride: number;
  /** Default: the rotary dim. */
  headStride?: number;
  rotaryOffset?: number;
}

/**
 * Rotary embedding applied in place to a copy of `x` (returned), on every view. cos/sin: [numPositions,
 * half] (rotary dim = 2·half), row p holding cos/sin(p · inv_freq[i]) (attention scaling folded in).
 * Pair i of a head's rotary part (elements a, b), table column i:
 *   'half'        (rotate_half: Llama, Mistral, Qwen)         a = i,  b = i + half
 *   'interleaved' (DeepSeek: V2's complex product on pairs)   a = 2i, b = 2i + 1
 * and x[a] ← x[a]·cos − x[b]·sin, x[b] ← x[b]·cos + x[a]·sin. HF's DeepSeek V3 (rope_interleave) gives
 * the same values but writes them de-interleaved (x[2i]'s result at i, x[2i+1]'s at i + half): a fixed
 * permutation of the rotary part, the same for q and k, so q·k (all attention reads) is unchanged.
 * Positions are clamped to the table, as the kernel does with positions it cannot check.
 */
export function ropeRef(x: ArrayLike<number>, positions: ArrayLike<number>, cos: ArrayLike<number>, sin: ArrayLike<number>,
                        half: number, views: readonly RopeRowsRef[], pairing: RopePairing = 'half'): Float64Array {
  checkInt(half, 'half', 1);
  if (cos.length % half !== 0 || cos.length === 0) throw new Error(`cos: expected [numPositions, ${half}], got ${cos.length} elements`);
  if (sin.length !== cos.length) throw new Error(`sin: expected ${cos.length} elements (those of cos), got ${sin.length}`);
  if (pairing !== 'half' && pairing !== 'interleaved') throw new Error(`pairing: expected 'half' or 'interleaved', got ${String(pairing)}`);
  const P = cos.length / half;
  const out = Float64Array.from(x);
  views.forEach((v, vi) => {
    const ro = v.rotaryOffset ?? 0;
    checkInt(ro, `views[${vi}].rotaryOffset`, 0);
    const L = layout({ ...v, offset: (v.offset ?? 0) + ro, headStride: v.headStride ?? 2 * half }, 2 * half, x.length, `views[${vi}]`);
    if (positions.length < L.rows) throw new Error(`positions: expected at least ${L.rows} entries, got ${positions.length}`);
    for (let m = 0; m < L.rows; m++) {
      const p = Math.min(Math.max(positions[m]!, 0), P - 1);
      for (let h = 0; h < L.heads; h++) {
        const base = L.offset + m * L.ts + h * L.hs;
        for (let i = 0; i < half; i++) {
          const a = base + (pairing === 'half' ? i : 2 * i);
          const b = base + (pairing === 'half' ? i + half : 2 * i + 1);
          const c = cos[p * half + i]!, s = sin[p * half + i]!;
          const xa = out[a]!, xb = out[b]!;
          out[a] = xa * c - xb * s;
          out[b] = xb * c + xa * s;
        }
      }
    }
  });
  return out;
}

// ---------------------------------------------------------------------------------------------
// elementwise

export function addRef(a: ArrayLike<number>, b: ArrayLike<number>): Float64Array {
  if (a.length !== b.length) throw new Error(`b: expected ${a.length} elements (those of a), got ${b.length}`);
  const out = new Float64Array(a.length);
  for (let i = 0; i < a.length; i++) out[i] = a[i]! + b[i]!;
  return out;
}

/** silu(g) = g / (1 + e^-g). */
export function siluRef(g: number): number {
  return g / (1 + Math.exp(-g));
}

/** gu [M, 2I] holding [gate | up] per row -> [M, I] = silu(gate) · up. */
export function siluMulRef(gu: ArrayLike<number>, M: number, I: number): Float64Array {
  checkInt(M, 'M', 0);
  checkInt(I, 'I', 1);
  if (gu.length < M * 2 * I) throw new Error(`gu: expected at least ${M * 2 * I} elements ([${M}, ${2 * I}]), got ${gu.length}`);
  const out = new Float64Array(M * I);
  for (let m = 0; m < M; m++) {
    for (let j = 0; j < I; j++) out[m * I + j] = siluRef(gu[m * 2 * I + j]!) * gu[m * 2 * I + I + j]!;
  }
  return out;
}

/** erf(x) in float64: its Maclaurin series below 3, the continued fraction of erfc above. */
export function erfRef(x: number): number {
  const a = Math.abs(x);
  if (a < 3) {
    // erf(x) = 2/√π · Σ (-1)^n x^(2n+1) / (n! (2n+1))
    let term = a, sum = a;
    for (let n = 1; n < 200; n++) {
      term *= -a * a / n;
      const add = term / (2 * n + 1);
      sum += add;
      if (Math.abs(add) < 1e-17 * Math.abs(sum)) break;
    }
    return Math.sign(x) * (2 / Math.sqrt(Math.PI)) * sum;
  }
  // erfc(a) = e^-a² / √π · 1 / (a + 1/2 / (a + 1 / (a + 3/2 / (a + 2 / ...))))
  let f = a;
  for (let k = 60; k >= 1; k--) f = a + (k / 2) / f;
  const erfc = Math.exp(-a * a) / Math.sqrt(Math.PI) / f;
  return Math.sign(x) * (1 - erfc);
}

/** Exact GELU, x/2 · (1 + erf(x/√2)). */
export function geluRef(x: number): number {
  return 0.5 * x * (1 + erfRef(x / Math.SQRT2));
}

/** GELU's tanh form (torch's approximate='tanh'). */
export function geluTanhRef(x: number): number {
  return 0.5 * x * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (x + 0.044715 * x * x * x)));
}

/** gatedAct: gu [M, 2I] holding gate and up per row ([gate | up] or interleaved) -> [M, I] = act(gate) · up. */
export function gatedActRef(gu: ArrayLike<number>, M: number, I: number, kind: 'silu' | 'gelu' | 'gelu_tanh' | 'swiglu_oai',
                            o: { layout?: 'halves' | 'interleaved'; alpha?: number; limit?: number } = {}): Float64Array {
  checkInt(M, 'M', 0);
  checkInt(I, 'I', 1);
  if (gu.length < M * 2 * I) throw new Error(`gu: expected at least ${M * 2 * I} elements ([${M}, ${2 * I}]), got ${gu.length}`);
  const alpha = o.alpha ?? 1.702, limit = o.limit ?? 7;
  const act = (g: number, u: number): number => {
    switch (kind) {
      case 'silu': return siluRef(g) * u;
      case 'gelu': return geluRef(g) * u;
      case 'gelu_tanh': return geluTanhRef(g) * u;
      case 'swiglu_oai': {
        const gc = Math.min(g, limit), uc = Math.min(Math.max(u, -limit), limit);
        return (uc + 1) * gc / (1 + Math.exp(-alpha * gc));
      }
    }
  };
  const out = new Float64Array(M * I);
  for (let m = 0; m < M; m++) {
    const b = m * 2 * I;
    for (let j = 0; j < I; j++) {
      out[m * I + j] = o.layout === 'interleaved' ? act(gu[b + 2 * j]!, gu[b + 2 * j + 1]!) : act(gu[b + j]!, gu[b + I + j]!);
    }
  }
  return out;
}

/** activate: f(x) · scale elementwise. */
export function activateRef(x: ArrayLike<number>, kind: 'none' | 'gelu' | 'gelu_tanh' | 'relu' | 'tanh' | 'softcap',
                            o: { cap?: number; scale?: number } = {}): Float64Array {
  const scale = o.scale ?? 1, cap = o.cap ?? 1;
  const f = (v: number): number => {
    switch (kind) {
      case 'none': return v;
      case 'gelu': return geluRef(v);
      case 'gelu_tanh': return geluTanhRef(v);
      case 'relu': return Math.max(v, 0);
      case 'tanh': return Math.tanh(v);
      case 'softcap': return cap * Math.tanh(v / cap);
    }
  };
  return Float64Array.from(x, (v) => f(v) * scale);
}

// ---------------------------------------------------------------------------------------------
// embedding

/** Rows `ids` of table [V, H]; an id outside [0, V) gives a row of zeros. */
export function embeddingRef(ids: ArrayLike<number>, table: ArrayLike<number>, V: number, H: number): Float64Array {
  checkInt(V, 'V', 1);
  checkInt(H, 'H', 1);
  if (table.length < V * H) throw new Error(`table: expected ${V * H} elements ([${V}, ${H}]), got ${table.length}`);
  const out = new Float64Array(ids.length * H);
  for (let r = 0; r < ids.length; r++) {
    const id = ids[r]!;
    if (!(Number.isInteger(id) && id >= 0 && id < V)) continue;
    for (let j = 0; j < H; j++) out[r * H + j] = table[id * H + j]!;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// argmax and sampling

/** Index of each row's largest value: ties to the lowest index, NaN never wins (-inf may), 0 for a row of NaN. */
export function argmaxRef(logits: ArrayLike<number>, rows: number, V: number): Int32Array {
  checkInt(rows, 'rows', 0);
  checkInt(V, 'V', 1);
  if (logits.length < rows * V) throw new Error(`logits: expected at least ${rows * V} elements, got ${logits.length}`);
  const out = new Int32Array(rows);
  for (let r = 0; r < rows; r++) out[r] = argmaxRow(logits, r * V, V);
  return out;
}

function argmaxRow(l: ArrayLike<number>, base: number, V: number): number {
  let best = -1;
  for (let j = 0; j < V; j++) {
    const v = l[base + j]!;
    if (Number.isNaN(v)) continue;
    if (best < 0 || v > l[base + best]!) best = j;
  }
  return Math.max(best, 0);
}

/** PCG's output permutation over one u32 (Jarzynski & Olano, "Hash Functions for GPU Rendering", 2020). */
export function pcgHash(x: number): number {
  const state = (Math.imul(x >>> 0, 747796405) + 2891336453) >>> 0;
  const word = Math.imul(((state >>> (((state >>> 28) + 4) >>> 0)) ^ state) >>> 0, 277803737) >>> 0;
  return ((word >>> 22) ^ word) >>> 0;
}

/**
 * The sampling kernel's random word for (seed, row, step): pcg(step ^ pcg(row ^ pcg(seed))). Counter
 * based, so any draw can be replayed; for a fixed (seed, row) it is a bijection of step, so two steps
 * never share a word.
 */
export function sampleHash(seed: number, row: number, step: number): number {
  return pcgHash((step ^ pcgHash((row ^ pcgHash(seed)) >>> 0)) >>> 0);
}

/** The uniform draw u in [0, 1) behind (seed, row, step): the hash's top 24 bits (exact in f32). */
export function sampleUniform(seed: number, row: number, step: number): number {
  return (sampleHash(seed, row, step) >>> 8) / 16777216;
}

export interface SampleOptionsRef {
  /** 0 = greedy. Default 1. */
  temperature?: number;
  /** Keep the topK largest (ties at the k-th value kept too); 0 = all. Default 0. */
  topK?: number;
  /** Keep the smallest set of largest probabilities whose mass reaches topP (ties kept); 1 = all. Default 1. */
  topP?: number;
  seed?: number;
  step?: number;
}

export interface SampleFilterRef {
  /** Renormalized probabilities over the kept tokens (0 elsewhere); null for a greedy row. */
  probs: Float64Array | null;
  /** Distance of the kept mass at the top-p cut (both sides) from topP, relative to the pre-cut mass:
   *  a GPU's sums may fall on the other side when this is tiny. Infinity without top-p. */
  topPMargin: number;
}

function checkSampleOptions(o: SampleOptionsRef): Required<SampleOptionsRef> {
  const temperature = o.temperature ?? 1, topK = o.topK ?? 0, topP = o.topP ?? 1, seed = o.seed ?? 0, step = o.step ?? 0;
  if (!(Number.isFinite(temperature) && temperature >= 0)) throw new Error(`temperature: expected a finite number >= 0, got ${temperature}`);
  checkInt(topK, 'topK', 0);
  if (!(topP > 0 && topP <= 1)) throw new Error(`topP: expected a number in (0, 1], got ${topP}`);
  for (const [name, v] of [['seed', seed], ['step', step]] as const) {
    if (!(Number.isInteger(v) && v >= 0 && v < 2 ** 32)) throw new Error(`${name}: expected an integer in [0, 2^32), got ${v}`);
  }
  return { temperature, topK, topP, seed, step };
}

/**
 * What a row is sampled from. Logits are scaled as the kernel does, in f32: z = fround(l · fround(1/T))
 * (so ties and order are the kernel's); p ∝ exp(z - max z); top-k keeps z ≥ the k-th largest z (NaN
 * excluded, -inf counted); top-p, over the renormalized top-k set, keeps z ≥ the largest value v whose
 * mass(z ≥ v) ≥ topP · mass. A greedy row (T 0, topK 1, no finite max, or an infinite scaled max) has
 * probs null.
 */
export function sampleFilterRef(row: ArrayLike<number>, opts: SampleOptionsRef): SampleFilterRef {
  const o = checkSampleOptions(opts);
  const V = row.length;
  if (o.temperature === 0 || o.topK === 1) return { probs: null, topPMargin: Infinity };
  const invT = Math.fround(1 / o.temperature);
  const z = new Float64Array(V);
  let m = -Infinity, nValid = 0;
  for (let j = 0; j < V; j++) {
    z[j] = Math.fround(row[j]! * invT);
    if (Number.isNaN(z[j])) continue;
    nValid++;
    if (z[j]! > m) m = z[j]!;
  }
  if (!Number.isFinite(m)) return { probs: null, topPMargin: Infinity };
  const valid = (j: number) => !Number.isNaN(z[j]!);
  const p = new Float64Array(V);
  for (let j = 0; j < V; j++) p[j] = valid(j) ? Math.exp(z[j]! - m) : 0;
  let tau = -Infinity;
  if (o.topK > 0 && o.topK < nValid) {
    const sorted = Array.from(z).filter((v) => !Number.isNaN(v)).sort((a, b) => b - a);
    tau = sorted[o.topK - 1]!;
  }
  let topPMargin = Infinity;
  if (o.topP < 1) {
    const kept = [];
    let S1 = 0;
    for (let j = 0; j < V; j++) if (valid(j) && z[j]! >= tau) { kept.push(j); S1 += p[j]!; }
    kept.sort((a, b) => z[b]! - z[a]!);
    let cum = 0;
    for (let i = 0; i < kept.length;) {
      const v = z[kept[i]!]!;
      const before = cum;
      while (i < kept.length && z[kept[i]!] === v) cum += p[kept[i++]!]!;
      if (cum >= o.topP * S1 || i === kept.length) {
        tau = v;
        topPMargin = Math.min(Math.abs(cum / S1 - o.topP), before > 0 ? Math.abs(before / S1 - o.topP) : Infinity);
        break;
      }
    }
  }
  let S = 0;
  for (let j = 0; j < V; j++) if (valid(j) && z[j]! >= tau) S += p[j]!;
  const probs = new Float64Array(V);
  for (let j = 0; j < V; j++) if (valid(j) && z[j]! >= tau) probs[j] = p[j]! / S;
  return { probs, topPMargin };
}

export interface SampleResultRef {
  ids: Int32Array;
  /** The uniform draw of each row (NaN for a greedy row). */
  u: Float64Array;
  /** Distance of u from the nearest CDF boundary of its row (Infinity for a greedy row). */
  margin: Float64Array;
  /** sampleFilterRef's topPMargin per row. */
  topPMargin: Float64Array;
}

/**
 * Samples each row of logits [rows, V]: the first token, in vocabulary order, whose cumulative kept
 * probability exceeds u = sampleUniform(seed, row, step) (inverse CDF); greedy rows take argmaxRef.
 */
export function sampleRef(logits: ArrayLike<number>, rows: number, V: number, opts: SampleOptionsRef): SampleResultRef {
  checkInt(rows, 'rows', 0);
  checkInt(V, 'V', 1);
  if (logits.length < rows * V) throw new Error(`logits: expected at least ${rows * V} elements, got ${logits.length}`);
  const o = checkSampleOptions(opts);
  const ids = new Int32Array(rows), u = new Float64Array(rows), margin = new Float64Array(rows), topPMargin = new Float64Array(rows);
  for (let r = 0; r < rows; r++) {
    const row = Array.prototype.slice.call(logits, r * V, (r + 1) * V) as number[];
    const f = sampleFilterRef(row, o);
    topPMargin[r] = f.topPMargin;
    if (!f.probs) {
      ids[r] = argmaxRow(row, 0, V);
      u[r] = NaN;
      margin[r] = Infinity;
      continue;
    }
    const ur = sampleUniform(o.seed, r, o.step);
    u[r] = ur;
    let cum = 0, pick = -1, mg = Infinity, last = -1;
    for (let j = 0; j < V; j++) {
      const q = f.probs[j]!;
      if (q === 0) continue;
      last = j;
      cum += q;
      mg = Math.min(mg, Math.abs(cum - ur));
      if (pick < 0 && cum > ur) pick = j;
    }
    ids[r] = pick >= 0 ? pick : last;
    margin[r] = mg;
  }
  return { ids, u, margin, topPMargin };
}

// ---------------------------------------------------------------------------------------------
// LFM2's short convolution

/**
 * The gated depthwise causal convolution of rows of a step (ops.shortConv): for each row (its first
 * token `start`, `tokens` tokens, state `slot` or -1, `fresh`: zeros before it), from in rows [B | C | x]
 * (`inStride` per token) and the weight [H, L], out[t, c] = C_t·Σ_k w[c, k]·Bx_{t−(L−1)+k}. `state`
 * [slots, L − 1, H] is read where a row is not fresh and is updated in place with each row's last L − 1
 * values of Bx (oldest first), as the kernel leaves it; with `snapshots`, the state after each token whose
 * cache slot is its block's last is written to snapshots.out [blocks, L − 1, H] at that block. Returns out
 * [tokens of the rows' span, H].
 */
export function shortConvRef(bcx: ArrayLike<number>, weight: ArrayLike<number>, state: Float64Array,
                             rows: readonly { start: number; tokens: number; slot: number; fresh: boolean }[],
                             H: number, L: number, inStride = 3 * H,
                             snapshots?: { slots: ArrayLike<number>; blockSize: number; out: Float64Array }): Float64Array {
  checkInt(H, 'H', 1);
  checkInt(L, 'L', 2);
  if (weight.length !== H * L) throw new Error(`shortConvRef: weight: expected ${H * L} values ([H, L]), got ${weight.length}`);
  const T = rows.reduce((a, r) => Math.max(a, r.start + r.tokens), 0);
  if (T * inStride > bcx.length + inStride - 3 * H) throw new Error(`shortConvRef: bcx: expected ${T} rows of ${inStride}, got ${bcx.length} values`);
  const out = new Float64Array(T * H);
  for (const r of rows) {
    for (let c = 0; c < H; c++) {
      // The sequence's Bx values: the state (or zeros), then this row's.
      const seq: number[] = [];
      for (let k = 0; k < L - 1; k++) seq.push(r.fresh || r.slot < 0 ? 0 : state[(r.slot * (L - 1) + k) * H + c]);
      for (let t = 0; t < r.tokens; t++) {
        const i = (r.start + t) * inStride;
        seq.push(bcx[i + c] * bcx[i + 2 * H + c]);
        let y = 0;
        for (let k = 0; k < L; k++) y += weight[c * L + k] * seq[seq.length - L + k];
        out[(r.start + t) * H + c] = bcx[i + H + c] * y;
        // The state at the end of a cache block (the token's slot its block's last): that block's snapshot.
        const slot = snapshots ? snapshots.slots[r.start + t] : -1;
        if (snapshots && slot >= 0 && slot % snapshots.blockSize === snapshots.blockSize - 1) {
          const b = Math.floor(slot / snapshots.blockSize);
          for (let k = 0; k < L - 1; k++) snapshots.out[(b * (L - 1) + k) * H + c] = seq[seq.length - (L - 1) + k];
        }
      }
      if (r.slot >= 0) for (let k = 0; k < L - 1; k++) state[(r.slot * (L - 1) + k) * H + c] = seq[seq.length - (L - 1) + k];
    }
  }
  return out;
}
