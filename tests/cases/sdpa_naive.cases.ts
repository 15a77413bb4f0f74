// Naive SDPA across the shared SPEC §6 matrix, plus what is particular to the naive kernel.
import { reference } from '../../src/index';
import { assert, assertClose, defineCases, equalArrays, randn, withTuning, type TestCase } from './harness';
import { checkSdpa } from './sdpa';
import { SDPA_MATRIX } from './sdpa_matrix';

const b = 'naive' as const;

export const sdpaNaiveCases = defineCases('sdpa naive', [
  ...SDPA_MATRIX.map((g): TestCase => ({
    name: g.name,
    async run({ engine }) { for (const spec of g.specs) await checkSdpa(engine, spec, b); },
  })),
  {
    name: 'row chunking: a small score budget gives the same result (f32 and f16 with odd Dv)',
    async run({ engine }) {
      await withTuning(engine, { naiveScoreBytes: 4 * 7 * 3 }, async () => {   // 3 rows of Lk 7 per chunk
        await checkSdpa(engine, { B: 2, Hq: 3, Lq: 5, Lk: 7, D: 8, causal: true, seed: 1500 }, b);
        await checkSdpa(engine, { B: 1, Hq: 3, Lq: 5, Lk: 7, D: 8, Dv: 3, dtype: 'f16', seed: 1501 }, b);
      });
      await withTuning(engine, { naiveScoreBytes: 4 * 6 }, async () => {       // below one row: a clear error
        const q = engine.tensor(randn(8, 1), [1, 1, 1, 8]);
        const k = engine.tensor(randn(56, 2), [1, 1, 7, 8]);
        let msg = '';
        try { engine.sdpa(q, k, k, { backend: b }); } catch (e) { msg = (e as Error).message; }
        assert(msg.includes('Lk=7') && msg.includes('budget'), `expected a budget error, got '${msg}'`);
      });
    },
  },
  {
    name: 'sdpa equals sdpaWithLse.out',
    async run({ engine }) {
      const q = engine.tensor(randn(2 * 3 * 16, 1), [1, 2, 3, 16]);
      const k = engine.tensor(randn(2 * 5 * 16, 2), [1, 2, 5, 16]);
      const a = await engine.sdpa(q, k, k, { causal: true, backend: b }).toFloat32();
      const r = engine.sdpaWithLse(q, k, k, { causal: true, backend: b });
      equalArrays('sdpa vs sdpaWithLse', a, await r.out.toFloat32());
      for (const t of [q, k, r.out, r.lse]) t.destroy();
    },
  },
  {
    name: 'recorded work keeps reading its inputs after they are destroyed and their buffers reused',
    async run({ engine }) {
      const shape = [1, 2, 4, 16];
      const q = randn(128, 1), k = randn(128, 2), v = randn(128, 3);
      const tq = engine.tensor(q, shape), tk = engine.tensor(k, shape), tv = engine.tensor(v, shape);
      const out = engine.sdpa(tq, tk, tv, { backend: b });   // recorded, not submitted
      tk.destroy(); tv.destroy();
      const junk = [engine.tensor(randn(128, 9), shape), engine.tensor(randn(128, 10), shape)];
      const ref = reference.sdpaRef(q, k, v, { B: 1, Hq: 2, Hkv: 2, Lq: 4, Lk: 4, D: 16, Dv: 16 });
      assertClose('out', await out.toFloat32(), ref.out, 'f32');
      for (const t of [tq, out, ...junk]) t.destroy();
    },
  },
]);
