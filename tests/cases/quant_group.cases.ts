// The group types (core/quant.ts: the HF quantized safetensors formats as the GPU holds them): random
// valid blocks against the float64 reference of their dequantized weights, on the GEMV, the FMA GEMM
// and the subgroup-matrix GEMM.
import { ops, reference, roundToDType, QUANT_FORMATS, type Engine, type QuantType } from '../../src/index';
import { assertClose, assertWithinPlain, defineCases, randn, spreadOverSoftware } from './harness';

async function checkGroup(engine: Engine, type: QuantType, M: number, seed: number, kernel: 'gemv' | 'gemm' | 'gemm-mma', N = 37, K = 256): Promise<void> {
  const bytes = reference.randomQuantRows(type, N, K, seed);
  const wv = reference.dequantizeRows(type, bytes, N, K);
  const xv = randn(M * K, seed + 1);
  const w = ops.createQuantLinear(engine, { data: bytes, N, K, type });
  try {
    const plan = ops.planLinear(engine, { M, N, K, dtype: type, kernel });
    const got = await ops.linear(engine, engine.tensor(xv, [M, K]), w, { plan }).toFloat32();
    const label = `linear ${type} M${M} N${N} K${K} ${plan.kernel}`;
    if (kernel === 'gemm-mma') assertClose(label, got, reference.linearRef(xv, roundToDType(Float32Array.from(wv), 'f16'), M, N, K), 'f16');
    else assertWithinPlain(label, got, reference.linearRef(xv, wv, M, N, K), () => reference.linearRef(xv, wv, M, N, K, { precision: 'f32' }));
  } finally {
    w.destroy();
  }
}

const SAMPLE: readonly QuantType[] = ['A4G64_BF16', 'Z4G128_F16', 'F8G128_F32', 'A3G32_F16', 'A8G64_BF16', 'F8G64_BF16', 'Z2G64_F16', 'A6G128_F32', 'Z8G32_BF16', 'A5G32_BF16'];

export const quantGroupCases = defineCases('quant', [
  {
    name: 'group types (MLX affine, AWQ/GPTQ integer zeros, FP8 blocks) on the GEMV and the FMA GEMM against the float64 reference of their dequantized weights',
    async run(ctx) {
      for (const type of spreadOverSoftware(ctx, SAMPLE, 'group types')) {
        const i = SAMPLE.indexOf(type);
        void QUANT_FORMATS;
        await checkGroup(ctx.engine, type, 1, 700 + 10 * i, 'gemv');
        await checkGroup(ctx.engine, type, 5, 701 + 10 * i, 'gemv');
        await checkGroup(ctx.engine, type, 70, 702 + 10 * i, 'gemm');
      }
    },
  },
]);
