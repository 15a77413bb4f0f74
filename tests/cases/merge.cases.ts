// mergeAttnStates (SPEC §4) against the float64 reference: random states, empty states (-inf, +inf),
// both empty, and the identity that merging the states of two key halves gives attention over all keys.
import { reference, roundToDType } from '../../src/index';
import { assertClose, defineCases, expectThrows, randn, rng } from './harness';

function states(T: number, H: number, Dv: number, seed: number, dtype: 'f32' | 'f16' | 'bf16') {
  const o = roundToDType(randn(T * H * Dv, seed), dtype);
  const r = rng(seed + 1);
  const lse = Float32Array.from({ length: H * T }, () => {
    const x = r();
    return x < 0.1 ? -Infinity : x < 0.15 ? Infinity : (r() - 0.5) * 20;
  });
  return { o, lse };
}

export const mergeCases = defineCases('merge', [
  {
    name: 'random states with empty ones (-inf, +inf, both), f32 / f16 / bf16, odd sizes',
    async run({ engine }) {
      for (const [dtype, T, H, Dv, seed] of [['f32', 7, 3, 16, 1], ['f16', 5, 2, 7, 2], ['bf16', 9, 4, 8, 3], ['f32', 1, 1, 1, 4]] as const) {
        const a = states(T, H, Dv, seed, dtype), b = states(T, H, Dv, seed + 10, dtype);
        const ref = reference.mergeAttnStatesRef(a.o, a.lse, b.o, b.lse, T, H, Dv);
        const r = engine.mergeAttnStates(engine.tensor(a.o, [T, H, Dv], dtype), engine.tensor(a.lse, [H, T]),
          engine.tensor(b.o, [T, H, Dv], dtype), engine.tensor(b.lse, [H, T]));
        assertClose(`merge out ${dtype}`, await r.out.toFloat32(), ref.out, dtype);
        assertClose(`merge lse ${dtype}`, await r.lse.toFloat32(), ref.lse, 'f32');
      }
    },
  },
  {
    name: 'merging the states of two key halves equals attention over all keys',
    async run({ engine }) {
      const [H, T, L, D] = [3, 5, 20, 16];
      const q = randn(H * T * D, 7), k = randn(H * L * D, 8), v = randn(H * L * D, 9);
      const half = (lo: number, hi: number) => {
        const ks = new Float32Array(H * (hi - lo) * D), vs = new Float32Array(H * (hi - lo) * D);
        for (let h = 0; h < H; h++) {
          ks.set(k.subarray((h * L + lo) * D, (h * L + hi) * D), h * (hi - lo) * D);
          vs.set(v.subarray((h * L + lo) * D, (h * L + hi) * D), h * (hi - lo) * D);
        }
        const r = reference.sdpaRef(q, ks, vs, { B: 1, Hq: H, Hkv: H, Lq: T, Lk: hi - lo, D, Dv: D });
        // [H, T, Dv] -> [T, H, Dv]; lse [H, T] already.
        const o = new Float32Array(T * H * D);
        for (let h = 0; h < H; h++) for (let t = 0; t < T; t++) o.set(r.out.subarray((h * T + t) * D, (h * T + t + 1) * D), (t * H + h) * D);
        return { o, lse: Float32Array.from(r.lse) };
      };
      const a = half(0, 8), b = half(8, L);
      const whole = reference.sdpaRef(q, k, v, { B: 1, Hq: H, Hkv: H, Lq: T, Lk: L, D, Dv: D });
      const expected = new Float64Array(T * H * D);
      for (let h = 0; h < H; h++) for (let t = 0; t < T; t++) expected.set(whole.out.subarray((h * T + t) * D, (h * T + t + 1) * D), (t * H + h) * D);
      const r = engine.mergeAttnStates(engine.tensor(a.o, [T, H, D]), engine.tensor(a.lse, [H, T]), engine.tensor(b.o, [T, H, D]), engine.tensor(b.lse, [H, T]));
      assertClose('merged halves', await r.out.toFloat32(), expected, 'f32');
      assertClose('merged lse', await r.lse.toFloat32(), whole.lse, 'f32');
    },
  },
  {
    name: 'validation: shapes and dtypes of both states',
    async run({ engine }) {
      const o = engine.tensor(randn(24, 1), [2, 3, 4]);
      const l = engine.tensor(randn(6, 2), [3, 2]);
      await expectThrows(() => engine.mergeAttnStates(engine.tensor(randn(24, 1), [6, 4]), l, o, l), 'mergeAttnStates: oA: expected shape [T, H, Dv], got [6, 4]');
      await expectThrows(() => engine.mergeAttnStates(o, l, engine.tensor(randn(24, 1), [2, 4, 3]), l), 'mergeAttnStates: oB: expected shape [T=2, H=3, Dv=4] (that of oA), got [2, 4, 3]');
      await expectThrows(() => engine.mergeAttnStates(o, engine.tensor(randn(6, 2), [2, 3]), o, l), 'mergeAttnStates: lseA: expected shape [H=3, T=2], got [2, 3]');
      await expectThrows(() => engine.mergeAttnStates(o, l, o, engine.tensor(randn(6, 2), [3, 2], 'f16')), "mergeAttnStates: lseB.dtype: expected 'f32', got 'f16'");
      await expectThrows(() => engine.mergeAttnStates(o, l, engine.tensor(randn(24, 1), [2, 3, 4], 'bf16'), l), "mergeAttnStates: oB.dtype: expected 'f32' (the dtype of oA), got 'bf16'");
      await expectThrows(() => engine.mergeAttnStates(o, l, o, 7 as never), 'mergeAttnStates: lseB: expected a Tensor, got 7');
    },
  },
]);
