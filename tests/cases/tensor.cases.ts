// Tensors: upload and read-back of every dtype, converters on the way, pool reuse, destroy.
import { decodeBf16, decodeF16, decodeFp8e4m3, encodeBf16, encodeF16, encodeFp8e4m3, Tensor } from '../../src/index';
import { assert, defineCases, equalArrays, expectThrows, randInt, randn } from './harness';

export const tensorCases = defineCases('tensor', [
  {
    name: 'f32, i32 and u32 upload and read back bit-exactly (odd sizes)',
    async run({ engine }) {
      const f = randn(37, 11);
      const i = randInt(37, 12, -1 << 30, 1 << 30);
      const u = Uint32Array.from(randInt(37, 13, 0, 1 << 30), (x) => (x * 3) >>> 0);
      const tf = engine.tensor(f, [37]);
      const ti = engine.tensor(i, [37], 'i32');
      const tu = engine.tensor(u, [1, 37], 'u32');
      equalArrays('f32', await tf.toArray(), f);
      equalArrays('i32', await ti.toArray(), i);
      equalArrays('u32', await tu.toArray(), u);
      equalArrays('i32 as float', await ti.toFloat32(), Float32Array.from(i));
      for (const t of [tf, ti, tu]) t.destroy();
    },
  },
  {
    name: 'f16 / bf16 / fp8e4m3 from bit patterns and from Float32Array (converted RNE on upload)',
    async run({ engine }) {
      for (const n of [1, 2, 3, 5, 64, 129]) {
        const x = randn(n, 100 + n, 3);
        const h = engine.tensor(x, [n], 'f16');
        equalArrays(`f16 bits n=${n}`, await h.toArray(), encodeF16(x));
        equalArrays(`f16 values n=${n}`, await h.toFloat32(), decodeF16(encodeF16(x)));
        const hb = engine.tensor(encodeF16(x), [n], 'f16');
        equalArrays(`f16 from bits n=${n}`, await hb.toArray(), encodeF16(x));
        const b = engine.tensor(x, [n], 'bf16');
        equalArrays(`bf16 values n=${n}`, await b.toFloat32(), decodeBf16(encodeBf16(x)));
        const big = x.map((v) => v * 200);   // beyond ±448: saturates
        const e = engine.tensor(big, [n], 'fp8e4m3');
        equalArrays(`fp8 bits n=${n}`, await e.toArray(), encodeFp8e4m3(big));
        equalArrays(`fp8 values n=${n}`, await e.toFloat32(), decodeFp8e4m3(encodeFp8e4m3(big)));
        const e2 = engine.tensor(encodeFp8e4m3(big), [n]);
        assert(e2.dtype === 'fp8e4m3', `Uint8Array defaults to fp8e4m3, got ${e2.dtype}`);
        for (const t of [h, hb, b, e, e2]) t.destroy();
      }
    },
  },
  {
    name: 'known bit patterns survive the GPU round trip (NaN, ±0, subnormals, fp8 saturation)',
    async run({ engine }) {
      const special = new Float32Array([0, -0, 1, -2, 65504, 2 ** -24, 448, 1e9, -1e9, Number.NaN, 2 ** -9]);
      const h = await engine.tensor(special, [special.length], 'f16').toArray();
      equalArrays('f16 specials', Array.from(h).slice(0, 7), [0x0000, 0x8000, 0x3c00, 0xc000, 0x7bff, 0x0001, 0x5f00]);
      const e = await engine.tensor(special, [special.length], 'fp8e4m3').toArray();
      equalArrays('fp8 specials', Array.from(e), [0x00, 0x80, 0x38, 0xc0, 0x7e, 0x00, 0x7e, 0x7e, 0xfe, 0x7f, 0x01]);
      const back = await engine.tensor(special, [special.length], 'bf16').toFloat32();
      assert(Number.isNaN(back[9]) && Object.is(back[1], -0) && back[2] === 1, `bf16 specials: ${Array.from(back)}`);
    },
  },
  {
    name: 'zeros gives zeros of every dtype, even in a reused (dirty) buffer',
    async run({ engine }) {
      const dirty = engine.tensor(randn(300, 5), [300]);
      await dirty.toArray();
      dirty.destroy();
      await engine.sync();   // the freed buffer is now reusable
      for (const dt of ['f32', 'f16', 'bf16', 'fp8e4m3', 'i32', 'u32'] as const) {
        const z = engine.zeros([3, 100], dt);
        const a = await z.toFloat32();
        assert(a.length === 300 && a.every((x) => x === 0), `zeros(${dt}) not all zero`);
        z.destroy();
      }
    },
  },
  {
    name: 'the buffer pool reuses freed buffers only after submission',
    async run({ engine }) {
      await engine.sync();
      const before = { ...engine.pool.stats };
      const a = engine.tensor(randn(1000, 1), [1000]);
      a.destroy();
      const b = engine.tensor(randn(1000, 2), [1000]);   // not yet submitted: must not reuse a's buffer
      assert(a.destroyed && b.buffer !== undefined, 'tensor state');
      engine.flush();
      const c = engine.tensor(randn(990, 3), [990]);     // same size class, after submit: reused
      const after = engine.pool.stats;
      assert(after.reused > before.reused, `expected a reuse, stats ${JSON.stringify(after)}`);
      equalArrays('b intact', await b.toArray(), randn(1000, 2));
      equalArrays('c intact', await c.toArray(), randn(990, 3));
      b.destroy(); c.destroy();
    },
  },
  {
    name: 'destroy is idempotent and a destroyed tensor cannot be read or used',
    async run({ engine }) {
      const t = engine.tensor(randn(8, 9), [2, 4]);
      t.destroy();
      t.destroy();
      assert(t instanceof Tensor && t.destroyed, 'destroyed flag');
      await expectThrows(() => t.toArray(), 'used after destroy()');
      const q = engine.tensor(randn(16, 1), [1, 1, 2, 8]);
      await expectThrows(() => engine.sdpa(q, t, q), "sdpa: k: expected a live tensor, got a destroyed tensor");
    },
  },
]);
