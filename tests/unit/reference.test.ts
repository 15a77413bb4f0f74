import { describe, it, expect } from 'vitest';
import {
  broadcastStrides,
  fp8DsMlaDecodeRow,
  fp8DsMlaEncodeRow,
  fp8DsMlaRowBytes,
  mergeAttnStatesRef,
  mlaAbsorbRef,
  mlaCacheWriteRef,
  mlaDecodeRef,
  mlaDecodeUnabsorbedRef,
  mlaPrefillRef,
  mlaSparseRef,
  pagedAttentionRef,
  reshapeAndCacheRef,
  sdpaRef,
  type AttnOptionsRef,
  type SdpaDims,
} from '../../src/reference/index.js';

import { rng } from '../../src/core/random';

// ---- seeded random data --------------------------------------------------------------------


function randn(seed: number, n: number, std = 1): Float64Array {
  const u = rng(seed);
  const out = new Float64Array(n);
  for (let i = 0; i < n; i += 2) {
    const r = Math.sqrt(-2 * Math.log(1 - u()));
    const th = 2 * Math.PI * u();
    out[i] = std * r * Math.cos(th);
    if (i + 1 < n) out[i + 1] = std * r * Math.sin(th);
  }
  return out;
}

function shuffled(seed: number, n: number): number[] {
  const u = rng(seed);
  const a = Array.from({ length: n }, (_, i) => i);
  for (let i = n - 1; i > 0; i--) {
    const j = Math.floor(u() * (i + 1));
    [a[i], a[j]] = [a[j]!, a[i]!];
  }
  return a;
}

function expectClose(a: ArrayLike<number>, b: ArrayLike<number>, tol = 1e-12, what = ''): void {
  expect(a.length, `${what} length`).toBe(b.length);
  let worst = 0;
  let at = -1;
  for (let i = 0; i < a.length; i++) {
    const x = a[i]!;
    const y = b[i]!;
    if (Object.is(x, y) || x === y) continue;
    const e = Math.abs(x - y) / (1 + Math.abs(y));
    if (!(e <= worst)) {
      worst = e;
      at = i;
    }
  }
  expect(worst, `${what} worst rel err at ${at}: ${a[at]} vs ${b[at]}`).toBeLessThanOrEqual(tol);
}

/** [1,H,Lq,X] (B=1 sdpa layout) -> [Lq,H,X] (token-major). */
function headMajorToTokenMajor(a: ArrayLike<number>, H: number, L: number, X: number): Float64Array {
  const o = new Float64Array(H * L * X);
  for (let h = 0; h < H; h++) for (let t = 0; t < L; t++) for (let x = 0; x < X; x++) o[(t * H + h) * X + x] = a[(h * L + t) * X + x]!;
  return o;
}

// ---- dense sdpa ------------------------------------------------------------------------------

describe('sdpaRef: hand-computed', () => {
  const q = [1, 0];
  const k = [1, 0, 0, 1];
  const v = [1, 2, 3, 4];
  const dims: SdpaDims = { B: 1, Hq: 1, Hkv: 1, Lq: 1, Lk: 2, D: 2, Dv: 2 };

  it('1 query, 2 keys: known softmax', () => {
    const { out, lse } = sdpaRef(q, k, v, dims, { scale: 1 });
    const p = Math.E / (Math.E + 1);
    expectClose(out, [p * 1 + (1 - p) * 3, p * 2 + (1 - p) * 4], 1e-15);
    expectClose(lse, [Math.log(Math.E + 1)], 1e-15);
  });

  it('default scale is 1/sqrt(D)', () => {
    const a = sdpaRef(q, k, v, dims);
    const b = sdpaRef(q, k, v, dims, { scale: Math.SQRT1_2 });
    expectClose(a.out, b.out, 0);
    expectClose(a.lse, [Math.log(Math.exp(Math.SQRT1_2) + 1)], 1e-15);
  });

  it('sink joins max and denominator only', () => {
    const sink = 0.7;
    const { out, lse } = sdpaRef(q, k, v, dims, { scale: 1, sinks: [sink] });
    const den = Math.E + 1 + Math.exp(sink);
    expectClose(out, [(Math.E * 1 + 3) / den, (Math.E * 2 + 4) / den], 1e-15);
    expectClose(lse, [Math.log(den)], 1e-15);
  });

  it('softcap before ALiBi (i_abs = 1)', () => {
    const cap = 0.5;
    const slope = 0.3;
    const { out, lse } = sdpaRef(q, k, v, dims, { scale: 2, softcap: cap, alibiSlopes: [slope] });
    const s0 = cap * Math.tanh(2 / cap) + slope * (0 - 1);
    const s1 = cap * Math.tanh(0) + slope * (1 - 1);
    const den = Math.exp(s0) + Math.exp(s1);
    expectClose(out, [(Math.exp(s0) * 1 + Math.exp(s1) * 3) / den, (Math.exp(s0) * 2 + Math.exp(s1) * 4) / den], 1e-15);
    expectClose(lse, [Math.log(den)], 1e-15);
  });

  it('additive mask added after softcap; -inf excludes', () => {
    const cap = 0.5;
    const m = { data: [0.25, -Infinity], shape: [2], kind: 'additive' as const };
    const { out, lse } = sdpaRef(q, k, v, dims, { scale: 1, softcap: cap, mask: m });
    expectClose(out, [1, 2], 1e-15);
    expectClose(lse, [cap * Math.tanh(1 / cap) + 0.25], 1e-15);
  });
});

describe('sdpaRef: invariants', () => {
  const B = 2, Hq = 6, Hkv = 2, Lq = 5, Lk = 7, D = 8, Dv = 4;
  const dims: SdpaDims = { B, Hq, Hkv, Lq, Lk, D, Dv };
  const q = randn(1, B * Hq * Lq * D);
  const k = randn(2, B * Hkv * Lk * D);
  const v = randn(3, B * Hkv * Lk * Dv);

  it('GQA equals explicitly repeated K/V (repeat_interleave)', () => {
    const rep = Hq / Hkv;
    const kr = new Float64Array(B * Hq * Lk * D);
    const vr = new Float64Array(B * Hq * Lk * Dv);
    for (let b = 0; b < B; b++) for (let h = 0; h < Hq; h++) {
      const g = Math.floor(h / rep);
      kr.set(k.subarray((b * Hkv + g) * Lk * D, (b * Hkv + g + 1) * Lk * D), (b * Hq + h) * Lk * D);
      vr.set(v.subarray((b * Hkv + g) * Lk * Dv, (b * Hkv + g + 1) * Lk * Dv), (b * Hq + h) * Lk * Dv);
    }
    for (const o of [{}, { causal: true }, { causal: true, slidingWindow: 3, softcap: 2 }] as AttnOptionsRef[]) {
      const a = sdpaRef(q, k, v, dims, o);
      const r = sdpaRef(q, kr, vr, { ...dims, Hkv: Hq }, o);
      expectClose(a.out, r.out, 0, 'out');
      expectClose(a.lse, r.lse, 0, 'lse');
    }
  });

  it('causal (bottom-right, Lq < Lk and Lq == Lk) equals a manual bool mask and an additive -inf mask', () => {
    for (const lq of [Lq, Lk]) {
      const qq = randn(10 + lq, B * Hq * lq * D);
      const d2 = { ...dims, Lq: lq };
      const boolM = new Float64Array(lq * Lk);
      const addM = new Float64Array(lq * Lk);
      for (let i = 0; i < lq; i++) for (let j = 0; j < Lk; j++) {
        const vis = j <= i + Lk - lq;
        boolM[i * Lk + j] = vis ? 1 : 0;
        addM[i * Lk + j] = vis ? 0 : -Infinity;
      }
      const c = sdpaRef(qq, k, v, d2, { causal: true });
      const mb = sdpaRef(qq, k, v, d2, { mask: { data: boolM, shape: [lq, Lk], kind: 'bool' } });
      const ma = sdpaRef(qq, k, v, d2, { mask: { data: addM, shape: [1, 1, lq, Lk], kind: 'additive' } });
      expectClose(c.out, mb.out, 0);
      expectClose(c.lse, mb.lse, 0);
      expectClose(c.out, ma.out, 1e-15);
      expectClose(c.lse, ma.lse, 1e-15);
      // and it really masks: differs from the unmasked result
      const u = sdpaRef(qq, k, v, d2);
      expect(Math.abs(u.lse[0]! - c.lse[0]!)).toBeGreaterThan(1e-6);
    }
  });

  it('sliding window with causal equals a manual band mask', () => {
    const W = 3;
    const m = new Float64Array(Lq * Lk);
    for (let i = 0; i < Lq; i++) for (let j = 0; j < Lk; j++) {
      const ia = i + Lk - Lq;
      m[i * Lk + j] = j <= ia && ia - j < W ? 1 : 0;
    }
    const a = sdpaRef(q, k, v, dims, { causal: true, slidingWindow: W });
    const b = sdpaRef(q, k, v, dims, { mask: { data: m, shape: [Lq, Lk], kind: 'bool' } });
    expectClose(a.out, b.out, 0);
    expectClose(a.lse, b.lse, 0);
  });

  it('bool mask of all ones and additive mask of zeros equal no mask', () => {
    const base = sdpaRef(q, k, v, dims, { softcap: 3, alibiSlopes: [0.1, 0.2, 0.3, 0.4, 0.5, 0.6] });
    const ones = sdpaRef(q, k, v, dims, {
      softcap: 3, alibiSlopes: [0.1, 0.2, 0.3, 0.4, 0.5, 0.6],
      mask: { data: new Uint8Array(B * Hq * Lq * Lk).fill(1), shape: [B, Hq, Lq, Lk], kind: 'bool' },
    });
    const zeros = sdpaRef(q, k, v, dims, {
      softcap: 3, alibiSlopes: [0.1, 0.2, 0.3, 0.4, 0.5, 0.6],
      mask: { data: new Float32Array(B * 1 * Lq * Lk), shape: [B, 1, Lq, Lk], kind: 'additive' },
    });
    expectClose(ones.out, base.out, 0);
    expectClose(ones.lse, base.lse, 0);
    expectClose(zeros.out, base.out, 0);
    expectClose(zeros.lse, base.lse, 0);
  });

  it('a broadcast mask equals its materialized copy', () => {
    const small = randn(20, Hq * Lk); // shape [Hq, 1, Lk]
    const full = new Float64Array(B * Hq * Lq * Lk);
    for (let b = 0; b < B; b++) for (let h = 0; h < Hq; h++) for (let i = 0; i < Lq; i++) for (let j = 0; j < Lk; j++) {
      full[((b * Hq + h) * Lq + i) * Lk + j] = small[h * Lk + j]!;
    }
    const a = sdpaRef(q, k, v, dims, { mask: { data: small, shape: [Hq, 1, Lk], kind: 'additive' } });
    const b = sdpaRef(q, k, v, dims, { mask: { data: full, shape: [B, Hq, Lq, Lk], kind: 'additive' } });
    expectClose(a.out, b.out, 0);
    expectClose(a.lse, b.lse, 0);
  });

  it('numerical extremes (std 10 and 1e-4) stay finite', () => {
    for (const std of [10, 1e-4]) {
      const r = sdpaRef(randn(30, q.length, std), randn(31, k.length, std), v, dims, { causal: true });
      for (const x of r.out) expect(Number.isFinite(x)).toBe(true);
      for (const x of r.lse) expect(Number.isFinite(x)).toBe(true);
    }
  });
});

describe('sdpaRef: empty rows', () => {
  const D = 4, Dv = 3;
  it('bottom-right causal with Lq > Lk: leading rows give out 0, lse -inf', () => {
    const Lq = 4, Lk = 2;
    const r = sdpaRef(randn(40, Lq * D), randn(41, Lk * D), randn(42, Lk * Dv), { B: 1, Hq: 1, Hkv: 1, Lq, Lk, D, Dv }, { causal: true });
    // i_abs = i - 2: rows 0, 1 see nothing, row 2 sees key 0, row 3 sees both
    expect(Array.from(r.out.subarray(0, 2 * Dv))).toEqual(new Array(2 * Dv).fill(0));
    expect(r.lse[0]).toBe(-Infinity);
    expect(r.lse[1]).toBe(-Infinity);
    expect(Number.isFinite(r.lse[2]!)).toBe(true);
  });

  it('all-false bool mask: out 0, lse -inf, with a sink too (SPEC: a row that sees no key)', () => {
    const dims = { B: 1, Hq: 2, Hkv: 1, Lq: 1, Lk: 3, D, Dv };
    const mask = { data: [0, 0, 0], shape: [3], kind: 'bool' as const };
    const a = sdpaRef(randn(43, 2 * D), randn(44, 3 * D), randn(45, 3 * Dv), dims, { mask });
    expect(Array.from(a.out)).toEqual(new Array(2 * Dv).fill(0));
    expect(Array.from(a.lse)).toEqual([-Infinity, -Infinity]);
    const s = sdpaRef(randn(43, 2 * D), randn(44, 3 * D), randn(45, 3 * Dv), dims, { mask, sinks: [0.5, -Infinity] });
    expect(Array.from(s.out)).toEqual(new Array(2 * Dv).fill(0));
    expect(Array.from(s.lse)).toEqual([-Infinity, -Infinity]);
  });

  it('Lk = 0', () => {
    const r = sdpaRef(randn(46, D), [], [], { B: 1, Hq: 1, Hkv: 1, Lq: 1, Lk: 0, D, Dv });
    expect(Array.from(r.out)).toEqual([0, 0, 0]);
    expect(r.lse[0]).toBe(-Infinity);
  });
});

describe('broadcastStrides', () => {
  it('right-aligned numpy rules', () => {
    expect(broadcastStrides([5, 7], [2, 6, 5, 7])).toEqual([0, 0, 7, 1]);
    expect(broadcastStrides([6, 1, 7], [2, 6, 5, 7])).toEqual([0, 7, 0, 1]);
    expect(broadcastStrides([2, 6, 5, 7], [2, 6, 5, 7])).toEqual([210, 35, 7, 1]);
    expect(broadcastStrides([1, 1, 1, 1], [2, 6, 5, 7])).toEqual([0, 0, 0, 0]);
    expect(() => broadcastStrides([3, 7], [2, 6, 5, 7], 'mask')).toThrow(/mask/);
    expect(() => broadcastStrides([6, 5, 8], [2, 6, 5, 7])).toThrow();
  });
});

// ---- merge -----------------------------------------------------------------------------------

describe('mergeAttnStatesRef', () => {
  it('merging two key halves equals attention over all keys', () => {
    const H = 3, Lq = 4, Lk = 9, D = 8, Dv = 5, half = 4;
    const q = randn(50, H * Lq * D);
    const k = randn(51, H * Lk * D);
    const v = randn(52, H * Lk * Dv);
    const sub = (a: Float64Array, X: number, from: number, to: number): Float64Array => {
      const o = new Float64Array(H * (to - from) * X);
      for (let h = 0; h < H; h++) o.set(a.subarray((h * Lk + from) * X, (h * Lk + to) * X), h * (to - from) * X);
      return o;
    };
    const dims = (lk: number): SdpaDims => ({ B: 1, Hq: H, Hkv: H, Lq, Lk: lk, D, Dv });
    const all = sdpaRef(q, k, v, dims(Lk));
    const a = sdpaRef(q, sub(k, D, 0, half), sub(v, Dv, 0, half), dims(half));
    const b = sdpaRef(q, sub(k, D, half, Lk), sub(v, Dv, half, Lk), dims(Lk - half));
    // sdpa's lse [1,H,Lq] is already [H,T]; outputs need [T,H,Dv]
    const m = mergeAttnStatesRef(headMajorToTokenMajor(a.out, H, Lq, Dv), a.lse, headMajorToTokenMajor(b.out, H, Lq, Dv), b.lse, Lq, H, Dv);
    expectClose(m.out, headMajorToTokenMajor(all.out, H, Lq, Dv), 1e-14);
    expectClose(m.lse, all.lse, 1e-14);
  });

  it('empty-state rules: -inf contributes nothing, +inf is -inf, both empty -> 0 / -inf', () => {
    const oA = [1, 2, 3, 4, NaN, NaN];
    const oB = [NaN, NaN, 5, 6, 7, 8];
    const r = mergeAttnStatesRef(oA, [0.3, Infinity, -Infinity], oB, [-Infinity, Infinity, 1.2], 3, 1, 2);
    expect(Array.from(r.out)).toEqual([1, 2, 0, 0, 7, 8]);
    expect(Array.from(r.lse)).toEqual([0.3, -Infinity, 1.2]);
    const e = mergeAttnStatesRef([1, 1], [-Infinity], [2, 2], [-Infinity], 1, 1, 2);
    expect(Array.from(e.out)).toEqual([0, 0]);
  });

  it('equal LSEs average', () => {
    const r = mergeAttnStatesRef([1, 3], [0.5], [3, 5], [0.5], 1, 1, 2);
    expectClose(r.out, [2, 4], 1e-15);
    expectClose(r.lse, [0.5 + Math.log(2)], 1e-15);
  });
});

// ---- paged -----------------------------------------------------------------------------------

describe('paged KV cache', () => {
  const Hq = 4, Hkv = 2, D = 8, Dv = 6, bs = 4, numBlocks = 12, maxBlocks = 4;
  // decode (qLen 1, context 9), prefill without context, chunked prefill with context, empty query
  const qLens = [1, 5, 3, 0];
  const seqLens = [10, 5, 11, 6];
  const S = qLens.length;
  const qsl = [0];
  for (const l of qLens) qsl.push(qsl[qsl.length - 1]! + l);
  const T = qsl[S]! + 2; // two padding rows
  const perm = shuffled(60, numBlocks);
  const blockTable = new Int32Array(S * maxBlocks).fill(-1);
  let next = 0;
  for (let i = 0; i < S; i++) for (let n = 0; n < Math.ceil(seqLens[i]! / bs); n++) blockTable[i * maxBlocks + n] = perm[next++]!;
  const seqK = seqLens.map((l, i) => randn(100 + i, Hkv * l * D)); // dense [1,Hkv,l,D] per sequence
  const seqV = seqLens.map((l, i) => randn(200 + i, Hkv * l * Dv));
  const query = randn(61, T * Hq * D);
  const pd = { Hq, Hkv, D, Dv, numBlocks, blockSize: bs };

  // fill every sequence's tokens through reshapeAndCacheRef (one call, all tokens), plus padding slots
  let kc: Float64Array = randn(62, numBlocks * Hkv * bs * D);
  let vc: Float64Array = randn(63, numBlocks * Hkv * bs * Dv);
  {
    const tot = seqLens.reduce((a, b) => a + b, 0) + 2;
    const key = new Float64Array(tot * Hkv * D);
    const value = new Float64Array(tot * Hkv * Dv);
    const slots = new Int32Array(tot).fill(-1);
    let t = 0;
    for (let i = 0; i < S; i++) for (let j = 0; j < seqLens[i]!; j++, t++) {
      slots[t] = blockTable[i * maxBlocks + Math.floor(j / bs)]! * bs + (j % bs);
      for (let g = 0; g < Hkv; g++) {
        key.set(seqK[i]!.subarray((g * seqLens[i]! + j) * D, (g * seqLens[i]! + j + 1) * D), (t * Hkv + g) * D);
        value.set(seqV[i]!.subarray((g * seqLens[i]! + j) * Dv, (g * seqLens[i]! + j + 1) * Dv), (t * Hkv + g) * Dv);
      }
    }
    key.fill(1e30, t * Hkv * D); // padding tokens (slot -1) must not land anywhere
    const w = reshapeAndCacheRef(key, value, slots, kc, vc, { ...pd, T: tot });
    kc = w.keyCache;
    vc = w.valueCache;
  }

  it('reshapeAndCacheRef writes (slot//bs, :, slot%bs, :), skips negative slots, copies', () => {
    const key = randn(70, 2 * Hkv * D);
    const value = randn(71, 2 * Hkv * Dv);
    const kc0 = new Float64Array(numBlocks * Hkv * bs * D);
    const vc0 = new Float64Array(numBlocks * Hkv * bs * Dv);
    const r = reshapeAndCacheRef(key, value, [7 * bs + 3, -1], kc0, vc0, { ...pd, T: 2 });
    expect(kc0.every((x) => x === 0)).toBe(true);
    for (let g = 0; g < Hkv; g++) {
      expect(Array.from(r.keyCache.subarray(((7 * Hkv + g) * bs + 3) * D, ((7 * Hkv + g) * bs + 4) * D))).toEqual(Array.from(key.subarray(g * D, (g + 1) * D)));
      expect(Array.from(r.valueCache.subarray(((7 * Hkv + g) * bs + 3) * Dv, ((7 * Hkv + g) * bs + 4) * Dv))).toEqual(Array.from(value.subarray(g * Dv, (g + 1) * Dv)));
    }
    let nz = 0;
    for (const x of r.keyCache) if (x !== 0) nz++;
    expect(nz).toBe(Hkv * D);
  });

  const optsList: AttnOptionsRef[] = [
    {},
    { scale: 0.3, softcap: 1.5 },
    { slidingWindow: 3 },
    { alibiSlopes: [0.5, 0.25, 0.125, 0.0625], sinks: [0.1, -0.4, 1.3, 0] },
  ];
  for (const opts of optsList) {
    it(`equals sdpaRef per sequence (causal bottom-right), opts ${JSON.stringify(opts)}`, () => {
      const r = pagedAttentionRef(query, kc, vc, { ...pd, T }, { queryStartLoc: qsl, seqLens, blockTable, maxBlocksPerSeq: maxBlocks }, opts);
      for (let i = 0; i < S; i++) {
        const ql = qLens[i]!;
        if (ql === 0) continue;
        const q = new Float64Array(Hq * ql * D); // [1,Hq,ql,D]
        for (let h = 0; h < Hq; h++) for (let r2 = 0; r2 < ql; r2++) {
          q.set(query.subarray(((qsl[i]! + r2) * Hq + h) * D, ((qsl[i]! + r2) * Hq + h + 1) * D), (h * ql + r2) * D);
        }
        const ref = sdpaRef(q, seqK[i]!, seqV[i]!, { B: 1, Hq, Hkv, Lq: ql, Lk: seqLens[i]!, D, Dv }, { ...opts, causal: true });
        const o = headMajorToTokenMajor(ref.out, Hq, ql, Dv);
        expectClose(r.out.subarray(qsl[i]! * Hq * Dv, qsl[i + 1]! * Hq * Dv), o, 1e-14, `seq ${i} out`);
        for (let h = 0; h < Hq; h++) for (let r2 = 0; r2 < ql; r2++) {
          expect(Math.abs(r.lse[h * T + qsl[i]! + r2]! - ref.lse[h * ql + r2]!)).toBeLessThan(1e-13);
        }
      }
      // padding rows stay NaN
      for (let t = qsl[S]!; t < T; t++) {
        for (let x = 0; x < Hq * Dv; x++) expect(r.out[t * Hq * Dv + x]).toBeNaN();
        for (let h = 0; h < Hq; h++) expect(r.lse[h * T + t]).toBeNaN();
      }
    });
  }

  it('rejects a block outside the cache', () => {
    const bad = Int32Array.from(blockTable);
    bad[1] = numBlocks;
    expect(() => pagedAttentionRef(query, kc, vc, { ...pd, T }, { queryStartLoc: qsl, seqLens, blockTable: bad, maxBlocksPerSeq: maxBlocks })).toThrow(/blockTable/);
  });
});

// ---- MLA -------------------------------------------------------------------------------------

describe('MLA', () => {
  const md = { N: 3, L: 16, P: 8, R: 4, V: 6 };
  const { N, L, P, R, V } = md;
  const bs = 4, numBlocks = 10, maxBlocks = 4;
  const kvBProj = randn(80, N * (P + V) * L, 0.3);
  const cd = { ...md, numBlocks, blockSize: bs };

  it('mlaAbsorbRef layouts: wUKT[n,p,l] = W_UK[n][p][l], wUV[n,l,v] = W_UV[n][v][l]', () => {
    const { wUKT, wUV } = mlaAbsorbRef(kvBProj, md);
    for (let n = 0; n < N; n++) for (let l = 0; l < L; l++) {
      for (let p = 0; p < P; p++) expect(wUKT[(n * P + p) * L + l]).toBe(kvBProj[(n * (P + V) + p) * L + l]);
      for (let v = 0; v < V; v++) expect(wUV[(n * L + l) * V + v]).toBe(kvBProj[(n * (P + V) + P + v) * L + l]);
    }
  });

  // two sequences, shuffled blocks; tokens written through mlaCacheWriteRef
  const seqLens = [7, 13];
  const perm = shuffled(81, numBlocks);
  const blockTable = new Int32Array(2 * maxBlocks).fill(-1);
  let nb = 0;
  for (let i = 0; i < 2; i++) for (let n = 0; n < Math.ceil(seqLens[i]! / bs); n++) blockTable[i * maxBlocks + n] = perm[nb++]!;
  const tot = seqLens[0]! + seqLens[1]!;
  const kvC = randn(82, tot * L);
  const kPe = randn(83, tot * R);
  const slots = new Int32Array(tot + 1).fill(-1); // last token is padding
  {
    let t = 0;
    for (let i = 0; i < 2; i++) for (let j = 0; j < seqLens[i]!; j++) slots[t++] = blockTable[i * maxBlocks + Math.floor(j / bs)]! * bs + (j % bs);
  }
  const cache = mlaCacheWriteRef(
    Float64Array.from([...kvC, ...new Array(L).fill(1e30)]),
    Float64Array.from([...kPe, ...new Array(R).fill(1e30)]),
    slots,
    randn(84, numBlocks * bs * (L + R)),
    { ...md, T: tot + 1, numBlocks, blockSize: bs },
  );
  const tokOffset = [0, seqLens[0]!];
  const scale = 0.17;

  it('mlaCacheWriteRef stores [kv_c | k_pe] at the slot', () => {
    const t = tokOffset[1]! + 5;
    const slot = slots[t]!;
    expect(Array.from(cache.subarray(slot * (L + R), slot * (L + R) + L))).toEqual(Array.from(kvC.subarray(t * L, (t + 1) * L)));
    expect(Array.from(cache.subarray(slot * (L + R) + L, (slot + 1) * (L + R)))).toEqual(Array.from(kPe.subarray(t * R, (t + 1) * R)));
    expect(cache.every((x) => x !== 1e30)).toBe(true);
  });

  /** explicit per-head dense attention over the sequence's tokens (independent of the MLA code). */
  function explicitMla(qN: ArrayLike<number>, qP: ArrayLike<number>, qRow: number, seq: number, upto: number): { out: Float64Array; lse: Float64Array } {
    const len = upto;
    const q = new Float64Array(N * (P + R));
    const k = new Float64Array(N * len * (P + R));
    const v = new Float64Array(N * len * V);
    for (let n = 0; n < N; n++) {
      q.set(Array.from(qN).slice((qRow * N + n) * P, (qRow * N + n + 1) * P), n * (P + R));
      q.set(Array.from(qP).slice((qRow * N + n) * R, (qRow * N + n + 1) * R), n * (P + R) + P);
      for (let j = 0; j < len; j++) {
        const t = tokOffset[seq]! + j;
        for (let p = 0; p < P; p++) {
          let s = 0;
          for (let l = 0; l < L; l++) s += kvBProj[(n * (P + V) + p) * L + l]! * kvC[t * L + l]!;
          k[(n * len + j) * (P + R) + p] = s;
        }
        for (let r = 0; r < R; r++) k[(n * len + j) * (P + R) + P + r] = kPe[t * R + r]!;
        for (let vv = 0; vv < V; vv++) {
          let s = 0;
          for (let l = 0; l < L; l++) s += kvBProj[(n * (P + V) + P + vv) * L + l]! * kvC[t * L + l]!;
          v[(n * len + j) * V + vv] = s;
        }
      }
    }
    return sdpaRef(q, k, v, { B: 1, Hq: N, Hkv: N, Lq: 1, Lk: len, D: P + R, Dv: V }, { scale });
  }

  const B = 2;
  const qNope = randn(85, B * N * P);
  const qPe = randn(86, B * N * R);
  const dmeta = { seqLens, blockTable, maxBlocksPerSeq: maxBlocks };

  it('absorbed decode equals unabsorbed decode within 1e-9, and explicit attention', () => {
    const a = mlaDecodeRef(qNope, qPe, cache, kvBProj, { ...cd, B }, dmeta, scale);
    const u = mlaDecodeUnabsorbedRef(qNope, qPe, cache, kvBProj, { ...cd, B }, dmeta, scale);
    expectClose(a.out, u.out, 1e-9, 'out');
    expectClose(a.lse, u.lse, 1e-9, 'lse');
    for (let b = 0; b < B; b++) {
      const e = explicitMla(qNope, qPe, b, b, seqLens[b]!);
      expectClose(a.out.subarray(b * N * V, (b + 1) * N * V), e.out, 1e-9, 'explicit out');
      for (let n = 0; n < N; n++) expect(Math.abs(a.lse[n * B + b]! - e.lse[n]!)).toBeLessThan(1e-9);
    }
  });

  it('decode of an empty sequence: out 0, lse -inf', () => {
    const a = mlaDecodeRef(qNope, qPe, cache, kvBProj, { ...cd, B }, { ...dmeta, seqLens: [0, 3] }, scale);
    expect(Array.from(a.out.subarray(0, N * V))).toEqual(new Array(N * V).fill(0));
    for (let n = 0; n < N; n++) expect(a.lse[n * B]).toBe(-Infinity);
  });

  it('prefill (chunked, with context) equals explicit causal attention; last row equals decode', () => {
    const qLens = [3, 13]; // seq 0: context 4; seq 1: no context
    const qsl = [0, 3, 16];
    const T = 17; // one padding row
    const qN = randn(87, T * N * P);
    const qP = randn(88, T * N * R);
    const r = mlaPrefillRef(qN, qP, cache, kvBProj, { ...cd, T }, { queryStartLoc: qsl, seqLens, blockTable, maxBlocksPerSeq: maxBlocks }, scale);
    for (let i = 0; i < 2; i++) {
      const ctx = seqLens[i]! - qLens[i]!;
      for (let rr = 0; rr < qLens[i]!; rr++) {
        const t = qsl[i]! + rr;
        const e = explicitMla(qN, qP, t, i, ctx + rr + 1);
        expectClose(r.out.subarray(t * N * V, (t + 1) * N * V), e.out, 1e-9, `prefill t=${t}`);
        for (let n = 0; n < N; n++) expect(Math.abs(r.lse[n * T + t]! - e.lse[n]!)).toBeLessThan(1e-9);
      }
    }
    for (let x = 0; x < N * V; x++) expect(r.out[16 * N * V + x]).toBeNaN();
    // the last query of each sequence sees the whole sequence, like decode
    const lastN = new Float64Array(B * N * P);
    const lastP = new Float64Array(B * N * R);
    for (let i = 0; i < 2; i++) {
      lastN.set(qN.subarray((qsl[i + 1]! - 1) * N * P, qsl[i + 1]! * N * P), i * N * P);
      lastP.set(qP.subarray((qsl[i + 1]! - 1) * N * R, qsl[i + 1]! * N * R), i * N * R);
    }
    const dec = mlaDecodeRef(lastN, lastP, cache, kvBProj, { ...cd, B }, dmeta, scale);
    for (let i = 0; i < 2; i++) {
      expectClose(r.out.subarray((qsl[i + 1]! - 1) * N * V, qsl[i + 1]! * N * V), dec.out.subarray(i * N * V, (i + 1) * N * V), 1e-9);
    }
  });

  it('sparse over all positions (plus invalid ones) equals decode; a subset equals decode on a gathered cache', () => {
    const topk = 16;
    const T = 3;
    const qN = randn(89, T * N * P);
    const qP = randn(90, T * N * R);
    const reqOfToken = [1, 0, 1];
    const indices = new Int32Array(T * topk).fill(-1);
    // token 0: every position of request 1, shuffled, plus -1 and out-of-range (block 4 >= maxBlocks)
    shuffled(91, 13).forEach((p, k) => (indices[k] = p));
    indices[13] = maxBlocks * bs + 1;
    // token 1: positions 6, 2, 3 of request 0
    indices.set([6, 2, 3], topk);
    // token 2: nothing valid
    indices.set([-1, -5, 99], 2 * topk);
    const r = mlaSparseRef(qN, qP, cache, kvBProj, { ...cd, T, topk }, { reqOfToken, blockTable, maxBlocksPerSeq: maxBlocks, indices }, scale);

    const d0 = mlaDecodeRef(qN.subarray(0, N * P), qP.subarray(0, N * R), cache, kvBProj, { ...cd, B: 1 },
      { seqLens: [13], blockTable: blockTable.subarray(maxBlocks), maxBlocksPerSeq: maxBlocks }, scale);
    expectClose(r.out.subarray(0, N * V), d0.out, 1e-12);
    for (let n = 0; n < N; n++) expect(Math.abs(r.lse[n * T]! - d0.lse[n]!)).toBeLessThan(1e-12);

    // gathered cache: request 0's positions 6, 2, 3 copied into a fresh single-block sequence
    const g = new Float64Array(numBlocks * bs * (L + R));
    [6, 2, 3].forEach((p, j) => {
      const src = (blockTable[Math.floor(p / bs)]! * bs + (p % bs)) * (L + R);
      g.set(cache.subarray(src, src + L + R), (5 * bs + j) * (L + R));
    });
    const d1 = mlaDecodeRef(qN.subarray(N * P, 2 * N * P), qP.subarray(N * R, 2 * N * R), g, kvBProj, { ...cd, B: 1 },
      { seqLens: [3], blockTable: [5], maxBlocksPerSeq: 1 }, scale);
    expectClose(r.out.subarray(N * V, 2 * N * V), d1.out, 1e-12);
    for (let n = 0; n < N; n++) expect(Math.abs(r.lse[n * T + 1]! - d1.lse[n]!)).toBeLessThan(1e-12);

    expect(Array.from(r.out.subarray(2 * N * V))).toEqual(new Array(N * V).fill(0));
    for (let n = 0; n < N; n++) expect(r.lse[n * T + 2]).toBe(-Infinity);
  });
});

// ---- fp8_ds_mla codec ------------------------------------------------------------------------

describe('fp8_ds_mla row codec', () => {
  it('row sizes', () => {
    expect(fp8DsMlaRowBytes(512, 64)).toBe(656);
    expect(fp8DsMlaRowBytes(256, 32)).toBe(256 + 8 + 64);
    expect(() => fp8DsMlaRowBytes(100, 32)).toThrow(/L/);
  });

  it('round trip: kv_c within e4m3 tolerance, scales = max/448, k_pe exact bf16', () => {
    const L = 256, R = 32;
    const nb = fp8DsMlaRowBytes(L, R);
    const f32 = new Float32Array(1);
    const u32 = new Uint32Array(f32.buffer);
    for (const [seed, std] of [[100, 1], [101, 10], [102, 1e-3]] as const) {
      const row = Float32Array.from(randn(seed, L + R, std));
      const bytes = new Uint8Array(nb + 3).fill(0xaa);
      fp8DsMlaEncodeRow(row, L, R, bytes, 3);
      expect(bytes[0]).toBe(0xaa); // nothing before the offset touched
      const out = new Float64Array(L + R + 1).fill(NaN);
      fp8DsMlaDecodeRow(bytes, 3, L, R, out, 1);
      const dv = new DataView(bytes.buffer);
      for (let g = 0; g < L / 128; g++) {
        let amax = 0;
        for (let i = g * 128; i < (g + 1) * 128; i++) amax = Math.max(amax, Math.abs(row[i]!));
        const sc = dv.getFloat32(3 + L + 4 * g, true);
        expect(sc).toBe(Math.fround(amax / 448));
        for (let i = g * 128; i < (g + 1) * 128; i++) {
          const x = row[i]!;
          const y = out[1 + i]!;
          // e4m3: 3 mantissa bits -> half-ulp relative 2^-4 for normals; subnormal step 2^-9 * scale
          expect(Math.abs(x - y)).toBeLessThanOrEqual(Math.max(Math.abs(x) * 2 ** -4, 2 ** -10 * sc) * (1 + 1e-6));
        }
      }
      for (let r = 0; r < R; r++) {
        const x = row[L + r]!;
        const y = out[1 + L + r]!;
        f32[0] = y;
        expect(u32[0]! & 0xffff).toBe(0); // a bf16 value
        expect(Math.abs(x - y)).toBeLessThanOrEqual(Math.abs(x) * 2 ** -8);
      }
      // values already in bf16 come back exactly
      const bfRow = Float32Array.from(out.subarray(1, 1 + L + R));
      const bytes2 = new Uint8Array(nb);
      fp8DsMlaEncodeRow(bfRow, L, R, bytes2, 0);
      const out2 = new Float64Array(L + R);
      fp8DsMlaDecodeRow(bytes2, 0, L, R, out2, 0);
      expect(Array.from(out2.subarray(L))).toEqual(Array.from(bfRow.subarray(L)));
    }
  });

  it('known codes: group max 448 -> scale 1, 1.0 -> 0x38, -448 -> 0xFE, 0.0625/2^-9 subnormals; zero group -> zeros', () => {
    const L = 256, R = 2;
    const row = new Float64Array(L + R);
    row[0] = 448;
    row[1] = 1;
    row[2] = -448;
    row[3] = 2 ** -9;
    row[4] = 1.0625; // tie between 1 and 1.125 -> even mantissa (1.0)
    row[5] = 1.1875; // tie between 1.125 and 1.25 -> 1.25
    row[L] = 1 + 2 ** -8; // bf16 tie -> 1
    row[L + 1] = -3.5;
    const bytes = new Uint8Array(fp8DsMlaRowBytes(L, R));
    fp8DsMlaEncodeRow(row, L, R, bytes, 0);
    expect(Array.from(bytes.subarray(0, 6))).toEqual([0x7e, 0x38, 0xfe, 0x01, 0x38, 0x3a]);
    const dv = new DataView(bytes.buffer);
    expect(dv.getFloat32(L, true)).toBe(1);
    expect(dv.getFloat32(L + 4, true)).toBe(0); // all-zero second group
    expect(Array.from(bytes.subarray(128, 256)).every((b) => b === 0)).toBe(true);
    expect(dv.getUint16(L + 8, true)).toBe(0x3f80);
    expect(dv.getUint16(L + 10, true)).toBe(0xc060);
    const out = new Float64Array(L + R);
    fp8DsMlaDecodeRow(bytes, 0, L, R, out, 0);
    expect(Array.from(out.subarray(0, 6))).toEqual([448, 1, -448, 2 ** -9, 1, 1.25]);
    expect(out.subarray(128, 256).every((x) => x === 0)).toBe(true);
    expect(Array.from(out.subarray(L))).toEqual([1, -3.5]);
  });
});
