// The small ops of a decoder layer against the float64 reference: RMSNorm (dense rows, per-head and
// slice views, in place, both reductions), RoPE (both pairings, strided views, two views in one call,
// clamped device positions), add and siluMul (in place, extremes), embedding (f32/f16/bf16, split
// tables, out-of-range ids), argmax (ties, NaN, -inf) and sampling (exact against the reference's
// inverse-CDF draw, determinism, frequencies against the filtered probabilities), with every unused
// row pre-filled with a sentinel that must survive, and every validation error.
import { ops, reference, roundToDType, type Engine, type Tensor } from '../../src/index';
import { assert, assertClose, defineCases, equalArrays, expectThrows, randn, rng, spreadOverSoftware, type CaseContext } from './harness';

const SENTINEL = 777.25;

type WDtype = 'f32' | 'f16' | 'bf16';

/** The subgroup and portable reductions where the adapter has subgroups, else the portable one (noted). */
function variants(ctx: { engine: Engine; note(m: string): void }, what: string): ('subgroup' | 'portable')[] {
  const f = ctx.engine.features;
  if (f.subgroups) {
    ctx.note(`${what}: the subgroup (size ${f.subgroupMinSize ?? '?'}-${f.subgroupMaxSize ?? '?'}) and portable reductions both ran`);
    return ['subgroup', 'portable'];
  }
  ctx.note(`${what}: the adapter has no subgroups; the portable reduction ran alone`);
  return ['portable'];
}

/** Flat indices a (token, head) view touches: [offset + m·ts + h·hs + from, .. + len). */
function viewIndices(v: { rows: number; heads: number; offset: number; ts: number; hs: number }, from: number, len: number): Set<number> {
  const s = new Set<number>();
  for (let m = 0; m < v.rows; m++) for (let h = 0; h < v.heads; h++) for (let j = 0; j < len; j++) s.add(v.offset + m * v.ts + h * v.hs + from + j);
  return s;
}

/** Everything outside `touched` is bit-for-bit what it was. */
function assertUntouched(what: string, actual: Float32Array, before: Float32Array, touched: Set<number>): void {
  let checked = 0;
  for (let i = 0; i < actual.length; i++) {
    if (touched.has(i)) continue;
    checked++;
    if (!Object.is(actual[i], before[i])) throw new Error(`${what}[${i}]: ${actual[i]}, but nothing may write there (was ${before[i]})`);
  }
  assert(checked > 0, `${what}: no untouched element to check`);
}

/** A host copy of the buffer, with the rows of a dense [rows, heads, n] reference written into the view. */
function scatter(base: Float32Array, ref: Float64Array, v: { rows: number; heads: number; offset: number; ts: number; hs: number }, n: number): Float64Array {
  const out = Float64Array.from(base);
  for (let m = 0; m < v.rows; m++) for (let h = 0; h < v.heads; h++) for (let j = 0; j < n; j++) {
    out[v.offset + m * v.ts + h * v.hs + j] = ref[(m * v.heads + h) * n + j];
  }
  return out;
}

function filled(n: number, value = SENTINEL): Float32Array {
  return new Float32Array(n).fill(value);
}

// ------------------------------------------------------------------------------------------ RMSNorm

const rmsNormCases = [
  {
    name: 'rmsNorm: dense rows of several lengths, f32/f16/bf16 weights, rows < tensor rows, both reductions',
    async run(ctx: { engine: Engine; note(m: string): void }) {
      const { engine } = ctx;
      const eps = 1e-6;
      // n spans threads per row from 1 (n 5) through 4 (64), 8 (100), 64 (1000) to 1024 where the
      // adapter allows it (8300; 256 on SwiftShader, in chunks), so the butterfly (and, below, 2 threads
      // for n 24) and the multi-subgroup path of the subgroup reduction run at subgroup sizes 4 and 8;
      // 20000 goes in chunks everywhere.
      for (const variant of variants(ctx, 'rmsNorm')) {
        for (const [n, wd, R, rows, seed] of [[5, 'f32', 3, 3, 1], [100, 'f16', 4, 3, 3], [1000, 'f32', 3, 2, 4],
          [64, 'bf16', 300, 299, 5], [8300, 'bf16', 3, 2, 6], [20000, 'f32', 1, 1, 7]] as const) {
          const x = randn(R * n, seed, 2);
          const w = roundToDType(randn(n, seed + 50, 1).map((v) => 1 + 0.5 * v), wd as WDtype);
          const out = engine.tensor(filled(R * n), [R, n]);
          ops.rmsNorm(engine, engine.tensor(x, [R, n]), engine.tensor(w, [n], wd as WDtype), eps, { rows, out, variant });
          const got = await out.toFloat32();
          const ref = reference.rmsNormRef(x, w, eps, { rows, n });
          assertClose(`rmsNorm ${variant} n=${n} ${wd}`, got.subarray(0, rows * n), ref, 'f32');
          for (let i = rows * n; i < R * n; i++) assert(got[i] === SENTINEL, `rmsNorm ${variant} n=${n}: unused row element ${i} was written (${got[i]})`);
        }
        // Default output: a new [rows, ...] tensor of x's trailing shape; large and tiny rows (no NaN).
        const n = 48;
        const x = Float32Array.from(randn(3 * n, 9), (v, i) => (i < n ? v * 1e4 : i < 2 * n ? v * 1e-4 : v));
        const w = roundToDType(randn(n / 2, 10), 'f32');
        const y = ops.rmsNorm(engine, engine.tensor(x, [3, 2, n / 2]), engine.tensor(w, [n / 2]), 1e-5, { variant });
        assert(y.shape.join() === '3,2,24', `rmsNorm: default output shape [${y.shape}]`);
        assertClose(`rmsNorm ${variant} extremes`, await y.toFloat32(), reference.rmsNormRef(x, w, 1e-5, { rows: 3, n: n / 2, heads: 2 }), 'f32');
      }
    },
  },
  {
    name: "rmsNorm: per-head views (Qwen3's q/k norm in a fused qkv row) in place, DeepSeek's kv_a slice, strided outputs",
    async run(ctx: { engine: Engine; note(m: string): void }) {
      const { engine } = ctx;
      const [T, Hq, Hkv, D, rows] = [6, 4, 2, 16, 5];
      const W = (Hq + 2 * Hkv) * D;
      for (const variant of variants(ctx, 'rmsNorm views')) {
        for (const wd of ['f32', 'bf16'] as const) {
          const qkv = randn(T * W, 11, 1.5);
          const buf = engine.tensor(qkv, [T, W]);
          const wq = roundToDType(randn(D, 12), wd), wk = roundToDType(randn(D, 13), wd);
          const qv = { tensor: buf, offset: 0, tokenStride: W, heads: Hq, headStride: D };
          const kv = { tensor: buf, offset: Hq * D, tokenStride: W, heads: Hkv, headStride: D };
          ops.rmsNorm(engine, qv, engine.tensor(wq, [D], wd), 1e-6, { rows, out: qv, variant });
          ops.rmsNorm(engine, kv, engine.tensor(wk, [D], wd), 1e-6, { rows, out: kv, variant });
          const got = await buf.toFloat32();
          const lq = { rows, heads: Hq, offset: 0, ts: W, hs: D }, lk = { rows, heads: Hkv, offset: Hq * D, ts: W, hs: D };
          let exp = scatter(qkv, reference.rmsNormRef(qkv, wq, 1e-6, { rows, n: D, heads: Hq, tokenStride: W, headStride: D }), lq, D);
          exp = scatter(Float32Array.from(exp), reference.rmsNormRef(qkv, wk, 1e-6, { rows, n: D, heads: Hkv, offset: Hq * D, tokenStride: W, headStride: D }), lk, D);
          const touched = new Set([...viewIndices(lq, 0, D), ...viewIndices(lk, 0, D)]);
          assertClose(`q/k norm in place ${variant} ${wd}`, got, exp, 'f32', (i) => !touched.has(i));
          assertUntouched(`q/k norm ${variant}: v and token ${rows}`, got, qkv, touched);
        }
        // DeepSeek: kv_a_proj_with_mqa gives [T, L + R]; kv_a_layernorm normalizes the first L of each row.
        const [L, R] = [40, 8];
        const kva = randn(T * (L + R), 21);
        const w = roundToDType(randn(L, 22), 'f16');
        const src = engine.tensor(kva, [T, L + R]);
        const dense = ops.rmsNorm(engine, { tensor: src, tokenStride: L + R }, engine.tensor(w, [L], 'f16'), 1e-6, { rows, variant });
        const ref = reference.rmsNormRef(kva, w, 1e-6, { rows, n: L, tokenStride: L + R });
        assert(dense.shape.join() === `${rows},${L}`, `kv_a norm: output shape [${dense.shape}]`);
        assertClose(`kv_a slice norm ${variant}`, await dense.toFloat32(), ref, 'f32');
        // ... into a strided output of another buffer (row stride 50, offset 3), the rest untouched.
        const before = filled(T * 50 + 3);
        const dst = engine.tensor(before, [T * 50 + 3]);
        ops.rmsNorm(engine, { tensor: src, tokenStride: L + R }, engine.tensor(w, [L], 'f16'), 1e-6, { rows, variant, out: { tensor: dst, offset: 3, tokenStride: 50 } });
        const g2 = await dst.toFloat32();
        const lo = { rows, heads: 1, offset: 3, ts: 50, hs: L };
        const touched = viewIndices(lo, 0, L);
        assertClose(`kv_a norm to a strided out ${variant}`, g2, scatter(before, ref, lo, L), 'f32', (i) => !touched.has(i));
        assertUntouched(`kv_a strided out ${variant}`, g2, before, touched);
        assertUntouched(`kv_a source ${variant}`, await src.toFloat32(), kva, new Set());
      }
    },
  },
  {
    name: 'rmsNorm: validation',
    async run({ engine }: { engine: Engine }) {
      const x = engine.tensor(randn(24, 1), [3, 8]);
      const w = engine.tensor(randn(8, 2), [8]);
      await expectThrows(() => ops.rmsNorm(engine, x, engine.tensor(randn(6, 2), [6]), 1e-6), 'rmsNorm: x: expected shape [R, ...] with a multiple of n=6');
      await expectThrows(() => ops.rmsNorm(engine, x, w, -1), 'rmsNorm: eps: expected a number >= 0, got -1');
      await expectThrows(() => ops.rmsNorm(engine, x, w, NaN), 'rmsNorm: eps: expected a finite number, got NaN');
      await expectThrows(() => ops.rmsNorm(engine, x, engine.tensor(new Int32Array(8), [8]), 1e-6), "rmsNorm: weight.dtype: expected 'f32', 'f16' or 'bf16', got 'i32'");
      await expectThrows(() => ops.rmsNorm(engine, engine.tensor(randn(24, 1), [3, 8], 'f16'), w, 1e-6), "rmsNorm: x.dtype: expected 'f32', got 'f16'");
      await expectThrows(() => ops.rmsNorm(engine, x, w, 1e-6, { rows: 4 }), "rmsNorm: o.rows: expected at most 3 (the tensor's first dimension), got 4");
      await expectThrows(() => ops.rmsNorm(engine, x, w, 1e-6, { out: engine.tensor(randn(16, 1), [2, 8]) }), 'rmsNorm: o.out: expected at least 24 elements ([rows=3, 8]), got [2, 8]');
      await expectThrows(() => ops.rmsNorm(engine, { tensor: x, tokenStride: 8, offset: 4 }, w, 1e-6), "rmsNorm: x: expected rows within the tensor's 24 elements (3 rows reach element 27)");
      await expectThrows(() => ops.rmsNorm(engine, { tensor: x, tokenStride: 8, heads: 2, headStride: 4 }, engine.tensor(randn(4, 2), [4]), 1e-6, { out: { tensor: x, tokenStride: 8, heads: 2, headStride: 2 } }),
        'rmsNorm: o.out.headStride: expected >= 4 (heads written must not overlap), got 2');
      await expectThrows(() => ops.rmsNorm(engine, { tensor: x, tokenStride: 8 }, w, 1e-6, { rows: 2, out: { tensor: x, offset: 8, tokenStride: 8 } }),
        "rmsNorm: o.out: expected x's own layout (in place) or a buffer other than x's");
      await expectThrows(() => ops.rmsNorm(engine, x, w, 1e-6, { variant: 'fast' as never }), "rmsNorm: o.variant: expected 'auto', 'subgroup' or 'portable', got 'fast'");
      if (!engine.features.subgroups) {
        await expectThrows(() => ops.rmsNorm(engine, x, w, 1e-6, { variant: 'subgroup' }), 'rmsNorm: o.variant: expected \'auto\' or \'portable\' (the adapter has no subgroups)');
      }
      await expectThrows(() => ops.rmsNorm(engine, x, 3 as never, 1e-6), 'rmsNorm: weight: expected a Tensor, got 3');
    },
  },
];

// ------------------------------------------------------------------------------------- LayerNorm

const layerNormCases = [
  {
    name: 'layerNorm: dense rows (one chunk and chunked), f32/bf16 weight and bias, no bias, strided in place, offset mean, validation',
    async run({ engine }: { engine: Engine }) {
      // A row of 1000 runs in chunks (T·16 < n on a 256-thread workgroup? no: T grows to 64, NPT 16), a
      // row of 40 is one chunk of a few threads; values sit on an offset of 50 so a variance taken as
      // E[x²] - mean² would lose digits.
      for (const [n, R, rows, wd, withBias, seed] of [[40, 5, 4, 'f32', true, 11], [1000, 3, 3, 'bf16', true, 12], [96, 4, 2, 'f32', false, 13]] as const) {
        const x = randn(R * n, seed, 2).map((v) => v + 50);
        const w = roundToDType(randn(n, seed + 1, 1), wd);
        const b = withBias ? roundToDType(randn(n, seed + 2, 1), wd) : null;
        const out = engine.tensor(filled(R * n), [R, n]);
        ops.layerNorm(engine, engine.tensor(x, [R, n]), engine.tensor(w, [n], wd), b ? engine.tensor(b, [n], wd) : null, 1e-5, { rows, out });
        const got = await out.toFloat32();
        assertClose(`layerNorm n=${n} ${wd}${b ? '' : ' no bias'}`, got.subarray(0, rows * n), reference.layerNormRef(x, w, b, 1e-5, { rows, n }), 'f32');
        for (let i = rows * n; i < R * n; i++) assert(got[i] === SENTINEL, `layerNorm n=${n}: unused row element ${i} was written (${got[i]})`);
      }
      // In place over a strided view (the middle 32 of rows of 48), everything else untouched.
      const [n, T, ts, off] = [32, 3, 48, 8];
      const base = randn(T * ts, 21, 1);
      const w = randn(n, 22, 1), b = randn(n, 23, 1);
      const t = engine.tensor(base, [T, ts]);
      const v = { tensor: t, offset: off, tokenStride: ts };
      ops.layerNorm(engine, v, engine.tensor(w, [n]), engine.tensor(b, [n]), 1e-12, { out: v });
      const got = await t.toFloat32();
      const geo = { rows: T, heads: 1, offset: off, ts, hs: n };
      assertClose('layerNorm in place', got, scatter(base, reference.layerNormRef(base, w, b, 1e-12, { rows: T, n, offset: off, tokenStride: ts }), geo, n), 'f32');
      assertUntouched('layerNorm in place', got, base, viewIndices(geo, 0, n));

      const x = engine.tensor(randn(2 * n, 1), [2, n]);
      await expectThrows(() => ops.layerNorm(engine, x, engine.tensor(w, [n]), engine.tensor(randn(n - 1, 1), [n - 1]), 1e-5), `layerNorm: bias: expected ${n} elements (the weight's), got [${n - 1}]`);
      await expectThrows(() => ops.layerNorm(engine, x, engine.tensor(randn(n - 1, 1), [n - 1]), null, 1e-5), `layerNorm: x: expected shape [R, ...] with a multiple of n=${n - 1}`);
      await expectThrows(() => ops.layerNorm(engine, x, engine.tensor(w, [n]), null, -1), 'layerNorm: eps: expected a number >= 0, got -1');
      await expectThrows(() => ops.layerNorm(engine, x, engine.tensor(w, [n]), 5 as never, 1e-5), 'layerNorm: bias: expected a Tensor, got 5');
    },
  },
];

// --------------------------------------------------------------------------------------------- RoPE

/** A cos/sin table as the model builds it: cos/sin(p · θ^(-2i/d)), times a scaling. */
function ropeTable(P: number, half: number, theta: number, scaling = 1): { cos: Float32Array; sin: Float32Array } {
  const cos = new Float32Array(P * half), sin = new Float32Array(P * half);
  for (let p = 0; p < P; p++) for (let i = 0; i < half; i++) {
    const a = p * theta ** (-i / half);
    cos[p * half + i] = Math.cos(a) * scaling;
    sin[p * half + i] = Math.sin(a) * scaling;
  }
  return { cos, sin };
}

/**
 * HF transformers' own formulations on one head's rotary part x (d = 2·half) at table row (c, s):
 * Llama's `x·cat(c,c) + rotate_half(x)·cat(s,s)`, DeepSeek V2's complex product on (x[2i], x[2i+1]),
 * and DeepSeek V3's rope_interleave (de-interleave to [x0 x2 .. | x1 x3 ..], then rotate_half).
 */
function hfRope(x: number[], c: number[], s: number[], kind: 'llama' | 'v2' | 'v3'): number[] {
  const half = c.length;
  const rotateHalf = (v: number[]) => [...v.slice(half).map((e) => -e), ...v.slice(0, half)];
  const viaHalf = (v: number[]) => { const r = rotateHalf(v); return v.map((e, j) => e * c[j % half] + r[j] * s[j % half]); };
  if (kind === 'llama') return viaHalf(x);
  if (kind === 'v3') return viaHalf([...x.filter((_, j) => j % 2 === 0), ...x.filter((_, j) => j % 2 === 1)]);
  const out: number[] = [];
  for (let i = 0; i < half; i++) out.push(x[2 * i] * c[i] - x[2 * i + 1] * s[i], x[2 * i] * s[i] + x[2 * i + 1] * c[i]);
  return out;
}

const ropeCases = [
  {
    name: "rope: the reference's pairings are HF's rotate_half, DeepSeek V2's complex product and V3's de-interleaved layout",
    async run() {
      const half = 6, P = 5;
      const { cos, sin } = ropeTable(P, half, 1e4, 1.1);
      const x = Array.from(randn(2 * half, 3));
      const pos = Int32Array.from([3]);
      const c = Array.from(cos.subarray(3 * half, 4 * half)), s = Array.from(sin.subarray(3 * half, 4 * half));
      const view = [{ rows: 1, tokenStride: 2 * half }];
      const rh = reference.ropeRef(x, pos, cos, sin, half, view, 'half');
      const inter = reference.ropeRef(x, pos, cos, sin, half, view, 'interleaved');
      // V3 keeps the results de-interleaved: its element i is ours at 2i, its i + half ours at 2i + 1.
      const ours3 = [...Array.from(inter).filter((_, j) => j % 2 === 0), ...Array.from(inter).filter((_, j) => j % 2 === 1)];
      assertClose('ropeRef half vs HF rotate_half', rh, hfRope(x, c, s, 'llama'), 'f32');
      assertClose('ropeRef interleaved vs HF DeepSeek V2', inter, hfRope(x, c, s, 'v2'), 'f32');
      assertClose('ropeRef interleaved (de-interleaved) vs HF DeepSeek V3', ours3, hfRope(x, c, s, 'v3'), 'f32');
    },
  },
  {
    name: 'rope: half pairing on the q and k heads of a fused qkv buffer in one call, host and device positions (clamped), rows < tensor rows',
    async run({ engine }: { engine: Engine }) {
      const [T, Hq, Hkv, D, rows, P] = [7, 4, 2, 16, 6, 40];
      const W = (Hq + 2 * Hkv) * D;
      const { cos, sin } = ropeTable(P, D / 2, 1e4);
      const cosT = engine.tensor(cos, [P, D / 2]), sinT = engine.tensor(sin, [P, D / 2]);
      const qv = { rows, heads: Hq, offset: 0, tokenStride: W, headStride: D };
      const kv = { rows, heads: Hkv, offset: Hq * D, tokenStride: W, headStride: D };
      const touched = new Set([...viewIndices({ ...qv, ts: W, hs: D }, 0, D), ...viewIndices({ ...kv, ts: W, hs: D }, 0, D)]);
      // Device positions past the table (and negative) are clamped, as the reference does.
      for (const [how, pos] of [['host', Int32Array.from([0, 1, 5, 17, 39, 2, 99])], ['device', Int32Array.from([3, 0, 39, 45, -4, 7, 1000])]] as const) {
        const x = randn(T * W, how === 'host' ? 31 : 32, 2);
        const buf = engine.tensor(x, [T, W]);
        ops.rope(engine, [{ tensor: buf, ...qv }, { tensor: buf, ...kv }], how === 'host' ? pos : engine.tensor(pos, [T]), cosT, sinT, { rows });
        const got = await buf.toFloat32();
        const exp = reference.ropeRef(x, pos, cos, sin, D / 2, [qv, kv], 'half');
        assertClose(`rope half (${how} positions)`, got, exp, 'f32', (i) => !touched.has(i));
        assertUntouched(`rope half (${how} positions): v and token ${rows}`, got, x, touched);
      }
      // A dense [T, H, D] tensor, partial rotary dim (table width 4 of D 16: the first 8 rotate).
      const x = randn(T * Hq * D, 33);
      const small = ropeTable(P, 4, 500);
      const t = engine.tensor(x, [T, Hq, D]);
      const pos = Int32Array.from([9, 8, 7, 6, 5, 4, 3]);
      ops.rope(engine, t, engine.tensor(pos, [T]), engine.tensor(small.cos, [P, 4]), engine.tensor(small.sin, [P, 4]));
      assertClose('rope on a dense [T, H, D] tensor, partial rotary', await t.toFloat32(),
        reference.ropeRef(x, pos, small.cos, small.sin, 4, [{ rows: T, heads: Hq, tokenStride: Hq * D, headStride: D }]), 'f32');
    },
  },
  {
    name: "rope: interleaved pairs (DeepSeek): q_pe after q_nope in each head, k_pe after the latent, a YaRN-scaled table",
    async run({ engine }: { engine: Engine }) {
      const [T, N, Pn, R, L, rows, P] = [5, 3, 8, 8, 24, 4, 64];
      const { cos, sin } = ropeTable(P, R / 2, 1e4, 1.2);
      const cosT = engine.tensor(cos, [P, R / 2]), sinT = engine.tensor(sin, [P, R / 2]);
      const pos = Int32Array.from([60, 0, 31, 2, 63]);
      const q = randn(T * N * (Pn + R), 41), kva = randn(T * (L + R), 42);
      const qt = engine.tensor(q, [T, N * (Pn + R)]), kt = engine.tensor(kva, [T, L + R]);
      const qv = { rows, heads: N, tokenStride: N * (Pn + R), headStride: Pn + R, rotaryOffset: Pn };
      const kv = { rows, offset: L, tokenStride: L + R };
      // Two buffers: two dispatches, one call.
      ops.rope(engine, [{ tensor: qt, ...qv }, { tensor: kt, ...kv }], pos, cosT, sinT, { pairing: 'interleaved', rows });
      const gq = await qt.toFloat32(), gk = await kt.toFloat32();
      const tq = viewIndices({ rows, heads: N, offset: 0, ts: N * (Pn + R), hs: Pn + R }, Pn, R);
      const tk = viewIndices({ rows, heads: 1, offset: L, ts: L + R, hs: R }, 0, R);
      assertClose('rope interleaved q_pe', gq, reference.ropeRef(q, pos, cos, sin, R / 2, [qv], 'interleaved'), 'f32', (i) => !tq.has(i));
      assertClose('rope interleaved k_pe', gk, reference.ropeRef(kva, pos, cos, sin, R / 2, [kv], 'interleaved'), 'f32', (i) => !tk.has(i));
      assertUntouched('rope interleaved: q_nope and token 4', gq, q, tq);
      assertUntouched('rope interleaved: the latent and token 4', gk, kva, tk);
      // The pairing matters: the half-pairing reference differs.
      const half = reference.ropeRef(kva, pos, cos, sin, R / 2, [kv], 'half');
      let diff = 0;
      for (const i of tk) diff = Math.max(diff, Math.abs(half[i] - gk[i]));
      assert(diff > 1e-2, `rope: interleaved and half pairings agree (${diff}): the test cannot tell them apart`);
    },
  },
  {
    name: 'rope: validation',
    async run({ engine }: { engine: Engine }) {
      const x = engine.tensor(randn(3 * 2 * 8, 1), [3, 2, 8]);
      const cos = engine.tensor(randn(40, 2), [10, 4]), sin = engine.tensor(randn(40, 3), [10, 4]);
      const pos = Int32Array.from([0, 1, 2]);
      await expectThrows(() => ops.rope(engine, x, Int32Array.from([0, 10, 2]), cos, sin), 'rope: positions[1]: expected a position in [0, 10) (the table\'s rows), got 10');
      await expectThrows(() => ops.rope(engine, x, Int32Array.from([0, 1]), cos, sin), 'rope: positions: expected at least rows=3 entries, got 2');
      await expectThrows(() => ops.rope(engine, x, pos, cos, engine.tensor(randn(36, 3), [9, 4])), 'rope: sin: expected shape [10, 4] (that of cos), got [9, 4]');
      await expectThrows(() => ops.rope(engine, x, pos, engine.tensor(randn(50, 2), [10, 5]), engine.tensor(randn(50, 2), [10, 5])), 'rope: x: expected a head size >= rotaryDim=10');
      await expectThrows(() => ops.rope(engine, x, pos, cos, sin, { pairing: 'neox' as never }), "rope: o.pairing: expected 'half' or 'interleaved', got 'neox'");
      await expectThrows(() => ops.rope(engine, x, engine.tensor(randn(3, 1), [3]), cos, sin), "rope: positions.dtype: expected 'i32', got 'f32'");
      await expectThrows(() => ops.rope(engine, { tensor: x, tokenStride: 16, heads: 2, headStride: 6 }, pos, cos, sin), 'rope: x.headStride: expected >= 8 (heads written must not overlap), got 6');
      await expectThrows(() => ops.rope(engine, [x, { tensor: x, tokenStride: 16, rotaryOffset: 12 }], pos, cos, sin), "rope: x[1]: expected rows within the tensor's 48 elements (3 rows reach element 51)");
      await expectThrows(() => ops.rope(engine, x, pos, cos, sin, { rows: 4 }), "rope: o.rows: expected at most 3 (the tensor's first dimension), got 4");
    },
  },
];

// -------------------------------------------------------------------------------------- elementwise

const elementwiseCases = [
  {
    name: 'add: out of place, in place into a or b, a + a, rows < tensor rows',
    async run({ engine }: { engine: Engine }) {
      const [R, N, rows] = [5, 37, 4];
      const a = randn(R * N, 51), b = randn(R * N, 52, 3);
      const ref = reference.addRef(a.subarray(0, rows * N), b.subarray(0, rows * N));
      const check = async (what: string, t: Tensor, exp: Float64Array, base: Float32Array) => {
        const got = await t.toFloat32();
        assertClose(what, got.subarray(0, rows * N), exp, 'f32');
        equalArrays(`${what}: row ${rows}`, got.subarray(rows * N), base.subarray(rows * N));
      };
      const out = engine.tensor(filled(R * N), [R, N]);
      ops.add(engine, engine.tensor(a, [R, N]), engine.tensor(b, [R, N]), { rows, out });
      await check('add', out, ref, filled(R * N));
      const ta = engine.tensor(a, [R, N]);
      assert(ops.add(engine, ta, engine.tensor(b, [R, N]), { rows, out: ta }) === ta, 'add in place returns a');
      await check('add in place into a', ta, ref, a);
      const tb = engine.tensor(b, [R, N]);
      ops.add(engine, engine.tensor(a, [R, N]), tb, { rows, out: tb });
      await check('add in place into b', tb, ref, b);
      const t2 = engine.tensor(a, [R, N]);
      ops.add(engine, t2, t2, { rows, out: t2 });
      await check('a + a in place', t2, reference.addRef(a.subarray(0, rows * N), a.subarray(0, rows * N)), a);
      const d = ops.add(engine, engine.tensor(a, [R, N]), engine.tensor(b, [R, N]));
      assertClose('add, new output', await d.toFloat32(), reference.addRef(a, b), 'f32');
    },
  },
  {
    name: 'avgPoolGrid: windows of 1, 2, 3 and 4 cells a side over grids with more rows than the grid, into a poisoned output and a new one, against float64; validation',
    async run({ engine }: { engine: Engine }) {
      for (const [G, k, C, seed] of [[12, 3, 20, 61], [8, 4, 33, 62], [6, 2, 5, 63], [5, 1, 7, 64]] as const) {
        const rows = G * G + 3, S = G / k;
        const xv = randn(rows * C, seed);
        const want = new Float64Array(S * S * C);
        for (let ty = 0; ty < S; ty++) for (let tx = 0; tx < S; tx++) for (let c = 0; c < C; c++) {
          let sum = 0;
          for (let dy = 0; dy < k; dy++) for (let dx = 0; dx < k; dx++) sum += xv[((ty * k + dy) * G + tx * k + dx) * C + c];
          want[(ty * S + tx) * C + c] = sum / (k * k);
        }
        const x = engine.tensor(xv, [rows, C]);
        // Poisoned past the output too: nothing beyond S·S rows is written.
        const out = engine.tensor(filled(S * S * C + C), [S * S + 1, C]);
        assert(ops.avgPoolGrid(engine, x, { grid: G, window: k, out }) === out, 'avgPoolGrid returns o.out');
        const got = await out.toFloat32();
        assertClose(`avgPoolGrid G ${G} window ${k} C ${C}`, got.subarray(0, S * S * C), want, 'f32');
        equalArrays(`avgPoolGrid G ${G}: the row past the output`, got.subarray(S * S * C), filled(S * S * C + C).subarray(S * S * C));
        const fresh = ops.avgPoolGrid(engine, x, { grid: G, window: k });
        assert(fresh.shape[0] === S * S && fresh.shape[1] === C, `avgPoolGrid's new output is [${S * S}, ${C}], got [${fresh.shape}]`);
        assertClose(`avgPoolGrid G ${G} window ${k}, new output`, await fresh.toFloat32(), want, 'f32');
      }
      const x = engine.tensor(randn(64 * 4, 65), [64, 4]);
      await expectThrows(() => ops.avgPoolGrid(engine, x, { grid: 8, window: 3 }), 'avgPoolGrid', 'o.window', 'dividing o.grid=8', '3');
      await expectThrows(() => ops.avgPoolGrid(engine, x, { grid: 9, window: 3 }), 'avgPoolGrid', 'x', 'at least grid² = 81 rows');
      await expectThrows(() => ops.avgPoolGrid(engine, x, { grid: 0, window: 1 }), 'avgPoolGrid', 'o.grid', 'positive integer');
      await expectThrows(() => ops.avgPoolGrid(engine, x, { grid: 8, window: 2, out: engine.tensor(new Float32Array(10), [10]) }), 'avgPoolGrid', 'o.out', 'at least 64 elements');
      await expectThrows(() => ops.avgPoolGrid(engine, x, { grid: 8, window: 2, out: x }), 'avgPoolGrid', 'o.out', 'other than x');
      await expectThrows(() => ops.avgPoolGrid(engine, engine.tensor(new Float32Array(64), [64]), { grid: 8, window: 2 }), 'avgPoolGrid', 'x', '[G·G, C]');
    },
  },
  {
    name: 'siluMul: [gate | up] rows, extreme gates (no NaN), rows < tensor rows, validation',
    async run({ engine }: { engine: Engine }) {
      const [M, I, rows] = [6, 45, 5];
      const gu = randn(M * 2 * I, 61, 2);
      for (const [j, g] of [[0, 100], [1, -100], [2, 88.7], [3, -88.8], [4, 1e-30], [5, -1e30]] as const) gu[j] = g;
      const out = engine.tensor(filled(M * I), [M, I]);
      ops.siluMul(engine, engine.tensor(gu, [M, 2 * I]), I, { rows, out });
      const got = await out.toFloat32();
      assertClose('siluMul', got.subarray(0, rows * I), reference.siluMulRef(gu, rows, I), 'f32');
      for (let i = rows * I; i < M * I; i++) assert(got[i] === SENTINEL, `siluMul: unused row element ${i} was written (${got[i]})`);
      const y = ops.siluMul(engine, engine.tensor(gu, [M, 2 * I]), I);
      assert(y.shape.join() === `${M},${I}`, `siluMul: output shape [${y.shape}]`);

      const t = engine.tensor(gu, [M, 2 * I]);
      await expectThrows(() => ops.siluMul(engine, t, 44), 'siluMul: gu: expected shape [M, 2·I=88], got [6, 90]');
      await expectThrows(() => ops.siluMul(engine, t, I, { out: t }), 'siluMul: o.out: expected a tensor other than gu');
      await expectThrows(() => ops.siluMul(engine, t, I, { out: engine.tensor(randn(10, 1), [10]) }), 'siluMul: o.out: expected at least 270 elements ([rows=6, I=45]), got [10]');
      await expectThrows(() => ops.siluMul(engine, t, 0), 'siluMul: I: expected a positive integer, got 0');
      await expectThrows(() => ops.add(engine, t, engine.tensor(randn(M * 2 * I, 1), [2 * I, M])), 'add: b: expected shape [6, 90] (that of a), got [90, 6]');
      await expectThrows(() => ops.add(engine, t, engine.tensor(randn(M * 2 * I, 1), [M, 2 * I], 'bf16')), "add: b.dtype: expected 'f32', got 'bf16'");
      await expectThrows(() => ops.add(engine, t, t, { rows: 0 }), 'add: o.rows: expected a positive integer <= 6, got 0');
    },
  },
];

// The gated products and activations of issue 31's models: each kind is its own pipeline, so the
// software runtimes share them out (spreadOverSoftware); a GPU runs them all.
const GATED: readonly ['silu' | 'gelu' | 'gelu_tanh' | 'swiglu_oai', 'halves' | 'interleaved'][] = [
  ['gelu', 'halves'], ['gelu_tanh', 'halves'], ['swiglu_oai', 'interleaved'], ['silu', 'interleaved'], ['swiglu_oai', 'halves'],
];
const ACTS: readonly ['none' | 'gelu' | 'gelu_tanh' | 'relu' | 'tanh' | 'softcap', { cap?: number; scale?: number }][] = [
  ['gelu', {}], ['softcap', { cap: 3 }], ['none', { scale: 11.3137 }], ['gelu_tanh', { scale: 0.5 }], ['tanh', {}], ['relu', {}],
];

const activationCases = [
  {
    name: 'gatedAct and activate: every kind against float64 (extremes, both layouts, in place, rows < tensor rows), validation',
    async run(ctx: CaseContext) {
      const { engine } = ctx;
      const [M, I, rows] = [5, 37, 4];
      const gu = randn(M * 2 * I, 71, 3);
      // Past the clamps, large and tiny magnitudes, both signs, on gate and up positions of both layouts.
      for (const [j, g] of [[0, 100], [1, -100], [2, 8.5], [3, -9], [4, 1e-30], [5, -30], [40, 7.5], [41, -7.5], [80, 40], [81, -40]] as const) gu[j] = g;
      for (const [kind, layout] of spreadOverSoftware(ctx, GATED, 'gatedAct kinds', ([k, l]) => `${k}/${l}`)) {
        const out = engine.tensor(filled(M * I), [M, I]);
        ops.gatedAct(engine, engine.tensor(gu, [M, 2 * I]), I, kind, { rows, out, layout });
        const got = await out.toFloat32();
        assertClose(`gatedAct ${kind} ${layout}`, got.subarray(0, rows * I), reference.gatedActRef(gu, rows, I, kind, { layout }), 'f32');
        for (let i = rows * I; i < M * I; i++) assert(got[i] === SENTINEL, `gatedAct ${kind}: unused row element ${i} was written (${got[i]})`);
      }
      const x = randn(M * I, 72, 4);
      for (const [j, v] of [[0, 90], [1, -90], [2, 1e-20], [3, -12], [4, 12]] as const) x[j] = v;
      for (const [kind, opts] of spreadOverSoftware(ctx, ACTS, 'activate kinds', ([k]) => k)) {
        const t = engine.tensor(x, [M, I]);
        ops.activate(engine, t, kind, { ...opts, out: t, rows });   // in place over the first rows
        const got = await t.toFloat32();
        assertClose(`activate ${kind}`, got.subarray(0, rows * I), reference.activateRef(x.subarray(0, rows * I), kind, opts), 'f32');
        for (let i = rows * I; i < M * I; i++) assert(Object.is(got[i], x[i]), `activate ${kind}: element ${i} past the rows changed`);
      }
      const t = engine.tensor(gu, [M, 2 * I]);
      await expectThrows(() => ops.gatedAct(engine, t, I, 'swish' as never), "gatedAct: kind: expected 'silu', 'gelu', 'gelu_tanh', 'swiglu_oai', got 'swish'");
      await expectThrows(() => ops.gatedAct(engine, t, I, 'gelu', { limit: 7 }), "gatedAct: o.alpha: expected no alpha or limit (they belong to 'swiglu_oai', not 'gelu')");
      await expectThrows(() => ops.gatedAct(engine, t, I, 'silu', { layout: 'zip' as never }), "gatedAct: o.layout: expected 'halves' or 'interleaved', got 'zip'");
      await expectThrows(() => ops.gatedAct(engine, t, I, 'silu', { act: 1 } as never), 'gatedAct: o');
      await expectThrows(() => ops.activate(engine, t, 'softcap'), "activate: o.cap: expected a cap > 0 for 'softcap', got none");
      await expectThrows(() => ops.activate(engine, t, 'softcap', { cap: -1 }), 'activate: o.cap: expected a number > 0, got -1');
      await expectThrows(() => ops.activate(engine, t, 'relu', { cap: 2 }), "activate: o.cap: expected no cap (it belongs to 'softcap', not 'relu')");
      await expectThrows(() => ops.activate(engine, t, 'relu', { out: engine.tensor(randn(4, 1), [4]) }), 'activate: o.out: expected at least 370 elements');
    },
  },
];

// ---------------------------------------------------------------------------------------- embedding

const embeddingCases = [
  {
    name: 'embedding: f32/f16/bf16 tables, a table split over parts, out-of-range device ids give zeros, rows < ids',
    async run({ engine }: { engine: Engine }) {
      const [V, H] = [23, 13];
      for (const dt of ['f32', 'f16', 'bf16'] as const) {
        const table = roundToDType(randn(V * H, 71), dt);
        const ids = Int32Array.from([3, 0, 22, 7, 7, 15, 1]);
        const rows = 6;
        const out = engine.tensor(filled(ids.length * H), [ids.length, H]);
        ops.embedding(engine, ids, engine.tensor(table, [V, H], dt), { rows, out });
        const got = await out.toFloat32();
        assertClose(`embedding ${dt}`, got.subarray(0, rows * H), reference.embeddingRef(ids.subarray(0, rows), table, V, H), 'f32');
        for (let i = rows * H; i < ids.length * H; i++) assert(got[i] === SENTINEL, `embedding ${dt}: unused row element ${i} was written`);
        // Split rows [0, 9), [9, 10), [10, 23), parts given out of order; device ids, some out of range.
        const dev = Int32Array.from([22, -1, 9, 8, 23, 10, 0, 1 << 30, 9]);
        const parts = [[10, 13], [0, 9], [9, 1]].map(([row0, r]) => ({ tensor: engine.tensor(table.slice(row0 * H, (row0 + r) * H), [r, H], dt), row0, rows: r }));
        const e = ops.embedding(engine, engine.tensor(dev, [dev.length]), { parts, N: V, K: H, dtype: dt });
        const ge = await e.toFloat32();
        assertClose(`embedding ${dt}, split table`, ge, reference.embeddingRef(dev, table, V, H), 'f32');
        for (const r of [1, 4, 7]) for (let j = 0; j < H; j++) assert(ge[r * H + j] === 0, `embedding ${dt}: id ${dev[r]} gave ${ge[r * H + j]}, not 0`);
      }
    },
  },
  {
    name: 'embedding: validation',
    async run({ engine }: { engine: Engine }) {
      const t = engine.tensor(randn(40, 1), [10, 4]);
      await expectThrows(() => ops.embedding(engine, Int32Array.from([1, 10]), t), 'embedding: ids[1]: expected a token id in [0, 10), got 10');
      await expectThrows(() => ops.embedding(engine, Int32Array.from([-1]), t), 'embedding: ids[0]: expected a token id in [0, 10), got -1');
      await expectThrows(() => ops.embedding(engine, engine.tensor(randn(2, 1), [2]), t), "embedding: ids.dtype: expected 'i32', got 'f32'");
      await expectThrows(() => ops.embedding(engine, Int32Array.from([1]), engine.tensor(randn(40, 1), [40])), 'embedding: table: expected shape [V, H], got [40]');
      await expectThrows(() => ops.embedding(engine, Int32Array.from([1, 2]), t, { rows: 3 }), 'embedding: o.rows: expected a positive integer <= 2 (the number of ids), got 3');
      await expectThrows(() => ops.embedding(engine, Int32Array.from([1]), t, { out: engine.tensor(randn(3, 1), [3]) }), 'embedding: o.out: expected at least 4 elements ([rows=1, H=4]), got [3]');
      const p = (row0: number, rows: number) => ({ tensor: engine.tensor(randn(rows * 4, 2), [rows, 4]), row0, rows });
      await expectThrows(() => ops.embedding(engine, Int32Array.from([1]), { parts: [p(0, 4), p(5, 5)], N: 10, K: 4, dtype: 'f32' }), 'embedding: table.parts[1].row0: expected 4 (parts cover rows 0..N-1 in order, without gaps), got 5');
      await expectThrows(() => ops.embedding(engine, Int32Array.from([1]), { parts: [p(0, 4), p(4, 5)], N: 10, K: 4, dtype: 'f32' }), 'embedding: table.parts: expected rows adding up to N=10, got 9');
      await expectThrows(() => ops.embedding(engine, Int32Array.from([1]), { parts: [p(0, 10)], N: 10, K: 4, dtype: 'f16' }), "embedding: table.parts[0].tensor.dtype: expected 'f16' (table.dtype), got 'f32'");
    },
  },
];

// ------------------------------------------------------------------------------------ argmax, sample

/** Logits with the hazards a model may produce: exact ties at the top, NaN, -inf, +-0. */
function hazardRows(V: number, seed: number): { logits: Float32Array; rows: number } {
  const rows = 9;
  const l = randn(rows * V, seed, 3);
  const r = rng(seed + 1);
  const at = (row: number, j: number, v: number) => { l[row * V + j] = v; };
  // row 0: a tie at the maximum (lowest index wins), row 1: NaN everywhere but one, row 2: all NaN,
  // row 3: all -inf, row 4: NaN at the maximum's neighbours and a big NaN-free max, row 5: -0 vs +0 tie
  // at the top, row 6: +inf, rows 7-8: plain.
  const j0 = Math.floor(r() * (V - 10)) + 5;
  at(0, j0, 50); at(0, j0 + 3, 50); at(0, V - 1, 50);
  for (let j = 0; j < V; j++) at(1, j, NaN);
  at(1, V - 2, -1e30);
  for (let j = 0; j < V; j++) { at(2, j, NaN); at(3, j, -Infinity); }
  at(4, 0, NaN); at(4, 2, 60); at(4, 1, NaN); at(4, 3, NaN);
  for (let j = 0; j < V; j++) l[5 * V + j] = -Math.abs(l[5 * V + j]) - 1;
  at(5, 7, -0); at(5, 4, 0);
  at(6, 11, Infinity); at(6, 12, NaN);
  return { logits: l, rows };
}

/** GPU ids against the reference's inverse-CDF choice: equal, or (u within 1e-5 of a CDF boundary or
 *  the top-p cut within 1e-4 of topP) a token the reference keeps. Returns how many matched exactly. */
function checkDraws(what: string, got: Int32Array, logits: Float32Array, V: number, o: reference.SampleOptionsRef): number {
  const ref = reference.sampleRef(logits, got.length, V, o);
  let exact = 0;
  for (let r = 0; r < got.length; r++) {
    if (got[r] === ref.ids[r]) { exact++; continue; }
    const f = reference.sampleFilterRef(logits.subarray(r * V, (r + 1) * V), o);
    const near = ref.margin[r] < 1e-5 || ref.topPMargin[r] < 1e-4;
    if (!(near && f.probs && got[r] >= 0 && got[r] < V && f.probs[got[r]] > 0)) {
      throw new Error(`${what}: row ${r}: got token ${got[r]}, the reference draws ${ref.ids[r]} (u ${ref.u[r]}, margin ${ref.margin[r]}, top-p margin ${ref.topPMargin[r]})`);
    }
  }
  return exact;
}

const sampleCases = [
  {
    name: 'argmax: ties to the lowest index, NaN never wins, -inf and +-0 rows, rows < tensor rows',
    async run({ engine }: { engine: Engine }) {
      // 70000: a workgroup of 1024 where the adapter allows one (the size model vocabularies get).
      for (const V of [300, 1000, 70000]) {
        const { logits, rows } = hazardRows(V, 80 + V);
        const out = engine.tensor(new Int32Array(rows + 2).fill(-5), [rows + 2]);
        ops.argmax(engine, engine.tensor(logits, [rows, V]), { out, rows: rows - 1 });
        const got = await out.toArray() as Int32Array;
        const ref = reference.argmaxRef(logits, rows - 1, V);
        equalArrays(`argmax V=${V}`, got.subarray(0, rows - 1), ref);
        equalArrays(`argmax V=${V}: unused`, got.subarray(rows - 1), [-5, -5, -5]);
        assert(ref[2] === 0 && ref[3] === 0 && ref[4] === 2 && ref[5] === 4 && ref[6] === 11, `argmax reference: hazard rows gave ${Array.from(ref)}`);
        const g = await ops.argmax(engine, engine.tensor(logits, [rows, V])).toArray() as Int32Array;
        equalArrays(`argmax V=${V}, all rows`, g, reference.argmaxRef(logits, rows, V));
      }
    },
  },
  {
    name: 'sample: the reference draw exactly, with temperature, topK, topP and both, hazard rows; greedy settings are argmax',
    async run({ engine }: { engine: Engine }) {
      let exact = 0, total = 0;
      for (const [V, rows, seed] of [[257, 24, 1], [3000, 6, 2], [70001, 2, 3]] as const) {
        // Peaked rows (std 3) make top-p cut few tokens; flat rows (std 0.3) many.
        const logits = Float32Array.from(randn(rows * V, 90 + seed, 1), (v, i) => v * (Math.floor(i / V) % 2 ? 3 : 0.3));
        const t = engine.tensor(logits, [rows, V]);
        for (const o of [
          { seed: 7, step: 0 }, { temperature: 0.7, seed: 7, step: 3 }, { topK: 5, seed: 1234567, step: 1 },
          { topK: 1000, temperature: 1.3, seed: 9, step: 2 }, { topP: 0.9, seed: 5, step: 11 }, { topP: 0.3, topK: 40, temperature: 0.8, seed: 2 ** 32 - 1, step: 2 ** 32 - 1 },
          { topP: 0.05, seed: 3, step: 4 }, { topK: 600, topP: 0.7, seed: 8, step: 6 },
        ]) {
          const got = await ops.sample(engine, t, o).toArray() as Int32Array;
          exact += checkDraws(`sample V=${V} ${JSON.stringify(o)}`, got, logits, V, o);
          total += rows;
        }
      }
      assert(exact >= total - 3, `sample: only ${exact} of ${total} draws equal the reference's`);
      // Hazard rows: NaN never drawn, all-NaN / all -inf / +inf rows fall back to argmax.
      const V = 300;
      const { logits, rows } = hazardRows(V, 95);
      for (const o of [{ seed: 1 }, { topK: 3, topP: 0.5, seed: 2, step: 5 }]) {
        const out = engine.tensor(new Int32Array(rows + 1).fill(-5), [rows + 1]);
        ops.sample(engine, engine.tensor(logits, [rows, V]), o, { out, rows });
        const got = await out.toArray() as Int32Array;
        checkDraws(`sample hazards ${JSON.stringify(o)}`, got.subarray(0, rows), logits, V, o);
        assert(got[rows] === -5, 'sample: the unused output element was written');
      }
      // temperature 0 and topK 1 are argmax.
      const t = engine.tensor(logits, [rows, V]);
      for (const o of [{ temperature: 0, seed: 3 }, { topK: 1, topP: 0.5, seed: 3 }]) {
        equalArrays(`sample ${JSON.stringify(o)} is argmax`, await ops.sample(engine, t, o).toArray() as Int32Array, reference.argmaxRef(logits, rows, V));
      }
    },
  },
  {
    name: 'sample: the same (seed, step) gives the same ids, another step other ones',
    async run({ engine }: { engine: Engine }) {
      const [V, rows] = [500, 64];
      const t = engine.tensor(randn(rows * V, 101, 0.5), [rows, V]);
      const ids = async (step: number, seed = 42) => await ops.sample(engine, t, { seed, step, topP: 0.95 }).toArray() as Int32Array;
      const a = await ids(17), b = await ids(17), c = await ids(18), d = await ids(17, 43);
      equalArrays('sample: same seed and step', a, b);
      let diffStep = 0, diffSeed = 0;
      for (let r = 0; r < rows; r++) { diffStep += a[r] !== c[r] ? 1 : 0; diffSeed += a[r] !== d[r] ? 1 : 0; }
      assert(diffStep > rows / 2 && diffSeed > rows / 2, `sample: another step changed ${diffStep} of ${rows} draws, another seed ${diffSeed}`);
      let same = 0;
      for (let r = 1; r < rows; r++) same += reference.sampleUniform(42, r, 17) === reference.sampleUniform(42, 0, 17) ? 1 : 0;
      assert(same === 0, 'sample: rows share a draw');
    },
  },
  {
    name: 'sample: frequencies over many draws match the filtered probabilities (chi-square), nothing outside top-k / top-p',
    async run({ engine }: { engine: Engine }) {
      const V = 12;
      // Probabilities ~ .32 .22 .15 .1 .07 ...: topP 0.8 keeps the first five, topK 4 the first four.
      const base = Float32Array.from({ length: V }, (_, j) => -0.38 * j + (j % 3) * 0.01);
      // Each row is a workgroup of 256 threads: SwiftShader takes ~5 ms a row, so 500 draws a setting.
      const rows = 500;
      const logits = new Float32Array(rows * V);
      for (let r = 0; r < rows; r++) logits.set(base, r * V);
      const t = engine.tensor(logits, [rows, V]);
      for (const o of [{ topP: 0.8 }, { topK: 4, temperature: 1.5 }]) {
        const counts = new Float64Array(V);
        const got = await ops.sample(engine, t, { ...o, seed: 2024, step: 5 }).toArray() as Int32Array;
        for (const id of got) counts[id]++;
        const q = reference.sampleFilterRef(base, o).probs!;
        const n = rows;
        let chi2 = 0, df = -1;
        for (let j = 0; j < V; j++) {
          if (q[j] === 0) {
            assert(counts[j] === 0, `sample ${JSON.stringify(o)}: token ${j} is filtered out but was drawn ${counts[j]} times`);
            continue;
          }
          chi2 += (counts[j] - n * q[j]) ** 2 / (n * q[j]);
          df++;
        }
        const kept = o.topP ? 5 : 4;
        assert(df + 1 === kept, `sample ${JSON.stringify(o)}: the reference keeps ${df + 1} tokens, expected ${kept}`);
        // Far above the 1e-6 quantile for df ≤ 11 (≈ 40), far below what one misplaced token gives.
        assert(chi2 < 45, `sample ${JSON.stringify(o)}: chi-square ${chi2.toFixed(1)} over ${df} degrees of freedom (counts ${Array.from(counts)})`);
      }
    },
  },
  {
    name: 'argmax, sample: validation',
    async run({ engine }: { engine: Engine }) {
      const t = engine.tensor(randn(20, 1), [2, 10]);
      await expectThrows(() => ops.argmax(engine, engine.tensor(randn(20, 1), [20])), 'argmax: logits: expected shape [rows, V], got [20]');
      await expectThrows(() => ops.argmax(engine, t, { out: engine.tensor(randn(2, 1), [2]) }), "argmax: o.out.dtype: expected 'i32', got 'f32'");
      await expectThrows(() => ops.argmax(engine, t, { out: engine.tensor(new Int32Array(1), [1]) }), 'argmax: o.out: expected at least rows=2 elements, got [1]');
      await expectThrows(() => ops.sample(engine, t, { temperature: -1 }), 'sample: p.temperature: expected a finite number >= 0, got -1');
      await expectThrows(() => ops.sample(engine, t, { topK: 1.5 }), 'sample: p.topK: expected an integer >= 0, got 1.5');
      await expectThrows(() => ops.sample(engine, t, { topP: 0 }), 'sample: p.topP: expected a number in (0, 1], got 0');
      await expectThrows(() => ops.sample(engine, t, { topP: 1.5 }), 'sample: p.topP: expected a number in (0, 1], got 1.5');
      await expectThrows(() => ops.sample(engine, t, { seed: -1 }), 'sample: p.seed: expected an integer in [0, 2^32), got -1');
      await expectThrows(() => ops.sample(engine, t, { step: 2 ** 32 }), 'sample: p.step: expected an integer in [0, 2^32), got 4294967296');
      await expectThrows(() => ops.sample(engine, engine.tensor(randn(20, 1), [2, 10], 'f16'), {}), "sample: logits.dtype: expected 'f32', got 'f16'");
    },
  },
];

export const opsCases = defineCases('ops', [...rmsNormCases, ...layerNormCases, ...ropeCases, ...elementwiseCases, ...activationCases, ...embeddingCases, ...sampleCases]);
