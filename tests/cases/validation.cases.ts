// Every validation error: the message names the operation, the argument, the expectation and what came,
// and nothing is recorded on the GPU when it throws.
import type { Engine, Tensor } from '../../src/index';
import { assert, defineCases, expectThrows, randn } from './harness';

function t(engine: Engine, shape: number[], dtype: 'f32' | 'f16' | 'bf16' | 'u32' | 'i32' = 'f32'): Tensor {
  const n = shape.reduce((a, b) => a * b, 1);
  if (dtype === 'u32') return engine.tensor(new Uint32Array(n).fill(1), shape, 'u32');
  if (dtype === 'i32') return engine.tensor(new Int32Array(n).fill(1), shape, 'i32');
  return engine.tensor(randn(n, n), shape, dtype);
}

export const validationCases = defineCases('validation', [
  {
    name: 'tensor(): shape, dtype and data are checked',
    async run({ engine }) {
      await expectThrows(() => engine.tensor(new Float32Array(6), [2, 4]), 'tensor: data: expected 8 elements for shape [2, 4], got 6 elements');
      await expectThrows(() => engine.tensor(new Float32Array(6), [2, 0, 3]), 'tensor: shape: expected a non-empty array of positive integers, got [2, 0, 3]');
      await expectThrows(() => engine.tensor(new Float32Array(6), [] as number[]), 'tensor: shape: expected a non-empty array of positive integers');
      await expectThrows(() => engine.tensor(new Float32Array(6), [6.5] as number[]), 'tensor: shape:', '6.5');
      await expectThrows(() => engine.tensor(new Float32Array(6), [6], 'f64' as never), "tensor: dtype: expected one of f32, f16, bf16, fp8e4m3, i32, u32, got 'f64'");
      await expectThrows(() => engine.tensor(new Uint16Array(6), [6]), "tensor: dtype: expected a dtype ('f16' or 'bf16') for Uint16Array data");
      await expectThrows(() => engine.tensor(new Int32Array(6), [6], 'f32'), "tensor: data: expected a Float32Array for dtype 'f32', got Int32Array(6)");
      await expectThrows(() => engine.tensor(new Float32Array(6), [6], 'i32'), "tensor: data: expected an Int32Array for dtype 'i32', got Float32Array(6)");
      await expectThrows(() => engine.tensor(new Int32Array(6), [6], 'f16'), "tensor: data: expected a Uint16Array of bit patterns or a Float32Array for dtype 'f16'");
      await expectThrows(() => engine.tensor([1, 2] as never, [2]), 'tensor: data: expected a Float32Array, Uint16Array, Uint8Array, Int32Array or Uint32Array');
      await expectThrows(() => engine.zeros([3, -1]), 'zeros: shape: expected a non-empty array of positive integers, got [3, -1]');
      await expectThrows(() => engine.zeros([3], 'x' as never), "zeros: dtype: expected one of");
    },
  },
  {
    name: 'sdpa(): tensor ranks, shapes and dtypes',
    async run({ engine }) {
      const q = t(engine, [1, 4, 3, 8]);
      const k = t(engine, [1, 2, 5, 8]);
      const v = t(engine, [1, 2, 5, 6]);
      await expectThrows(() => engine.sdpa(t(engine, [4, 3, 8]), k, v), 'sdpa: q: expected shape [B, Hq, Lq, D], got [4, 3, 8]');
      await expectThrows(() => engine.sdpa(q, t(engine, [1, 3, 5, 8]), v), 'sdpa: k: expected shape [B=1, Hkv dividing Hq=4, Lk, D=8], got [1, 3, 5, 8]');
      await expectThrows(() => engine.sdpa(q, t(engine, [1, 2, 5, 16]), v), 'sdpa: k:', 'D=8', 'got [1, 2, 5, 16]');
      await expectThrows(() => engine.sdpa(q, t(engine, [2, 2, 5, 8]), v), 'sdpa: k:', 'B=1');
      await expectThrows(() => engine.sdpa(q, t(engine, [1, 2, 5]), v), 'sdpa: k: expected shape [B=1, Hkv, Lk, D=8], got [1, 2, 5]');
      await expectThrows(() => engine.sdpa(q, k, t(engine, [1, 2, 4, 6])), 'sdpa: v: expected shape [B=1, Hkv=2, Lk=5, Dv], got [1, 2, 4, 6]');
      await expectThrows(() => engine.sdpa(q, k, t(engine, [1, 1, 5, 6])), 'sdpa: v:', 'Hkv=2');
      await expectThrows(() => engine.sdpa(q, k, t(engine, [1, 2, 5, 6], 'f16')), "sdpa: v.dtype: expected 'f32' (the dtype of q), got 'f16'");
      await expectThrows(() => engine.sdpa(q, t(engine, [1, 2, 5, 8], 'bf16'), v), "sdpa: k.dtype: expected 'f32' (the dtype of q), got 'bf16'");
      const qi = t(engine, [1, 4, 3, 8], 'i32');
      await expectThrows(() => engine.sdpa(qi, k, v), "sdpa: q.dtype: expected 'f32', 'f16' or 'bf16', got 'i32'");
      await expectThrows(() => engine.sdpa({} as never, k, v), 'sdpa: q: expected a Tensor, got Object');
      await expectThrows(() => engine.sdpaWithLse(q, k, null as never), 'sdpaWithLse: v: expected a Tensor, got null');
    },
  },
  {
    name: 'sdpa(): options',
    async run({ engine }) {
      const q = t(engine, [1, 4, 3, 8]);
      const k = t(engine, [1, 2, 5, 8]);
      await expectThrows(() => engine.sdpa(q, k, k, { scale: Number.NaN }), 'sdpa: opts.scale: expected a finite number, got NaN');
      await expectThrows(() => engine.sdpa(q, k, k, { causal: 1 as never }), 'sdpa: opts.causal: expected a boolean, got 1');
      await expectThrows(() => engine.sdpa(q, k, k, { softcap: Infinity }), 'sdpa: opts.softcap: expected a finite number, got Infinity');
      await expectThrows(() => engine.sdpa(q, k, k, { slidingWindow: 0 }), 'sdpa: opts.slidingWindow: expected a positive integer, got 0');
      await expectThrows(() => engine.sdpa(q, k, k, { slidingWindow: 2.5 }), 'sdpa: opts.slidingWindow: expected a positive integer, got 2.5');
      await expectThrows(() => engine.sdpa(q, k, k, { alibiSlopes: [1, 2, 3] }), 'sdpa: opts.alibiSlopes: expected 4 values (one per query head), got 3 values');
      await expectThrows(() => engine.sdpa(q, k, k, { sinks: new Float32Array(5) }), 'sdpa: opts.sinks: expected 4 values (one per query head), got 5 values');
      await expectThrows(() => engine.sdpa(q, k, k, { sinks: [0, 1, Number.NaN, 2] }), 'sdpa: opts.sinks: expected finite values');
      await expectThrows(() => engine.sdpa(q, k, k, { alibiSlopes: 'x' as never }), 'sdpa: opts.alibiSlopes: expected a Float32Array or number[]');
      await expectThrows(() => engine.sdpa(q, k, k, { backend: 'fast' as never }), "sdpa: opts.backend: expected 'auto', 'flash' or 'naive', got 'fast'");
      await expectThrows(() => engine.sdpa(q, k, k, { casual: true } as never), "sdpa: opts: expected only causal", "unknown option 'casual'");
      await expectThrows(() => engine.sdpa(q, k, k, { mask: t(engine, [3, 5], 'i32') }), "sdpa: opts.mask.dtype: expected 'u32' (bool, 1 = attend) or 'f32' (additive), got 'i32'");
      await expectThrows(() => engine.sdpa(q, k, k, { mask: t(engine, [3, 4], 'u32') }), 'sdpa: opts.mask: expected a shape broadcastable to [B=1, Hq=4, Lq=3, Lk=5], got [3, 4]');
      await expectThrows(() => engine.sdpa(q, k, k, { mask: t(engine, [2, 4, 3, 5], 'u32') }), 'sdpa: opts.mask: expected a shape broadcastable', 'got [2, 4, 3, 5]');
      await expectThrows(() => engine.sdpa(q, k, k, { mask: t(engine, [1, 1, 1, 3, 5], 'u32') }), 'sdpa: opts.mask:', 'got [1, 1, 1, 3, 5]');
      await expectThrows(() => engine.sdpa(q, k, k, { mask: 5 as never }), 'sdpa: opts.mask: expected a Tensor, got 5');
    },
  },
  {
    name: 'a rejected call records no GPU work and leaves no output behind',
    async run({ engine }) {
      const q = t(engine, [1, 1, 2, 8]);
      await engine.sync();
      const created = engine.pool.stats.created + engine.pool.stats.reused;
      await expectThrows(() => engine.sdpa(q, q, q, { slidingWindow: -1 }), 'opts.slidingWindow');
      assert(engine.pool.stats.created + engine.pool.stats.reused === created, 'no buffer was taken for a rejected call');
    },
  },
]);
