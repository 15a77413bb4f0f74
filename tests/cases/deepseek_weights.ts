// A DeepSeek checkpoint's tensors as float64 values for deepseekRef, and the checkpoint
// variants the DeepSeek fuzz builds from the goldens' weights: F32, BF16 and block-FP8 tensors
// (`weight` float8_e4m3fn times its `weight_scale_inv` block, SPEC §8) read as the numbers HF uses.
import { bf16BitsToF32, fp8e4m3BitsToF32, type SafetensorsFile } from '../../src/index';

/** Every tensor of `file` as float64 values, block-FP8 weights dequantized with their scales (which are
 *  left out); `block` is the config's weight_block_size. */
export async function float64Weights(file: SafetensorsFile, block: [number, number] = [128, 128]): Promise<Map<string, Float64Array>> {
  const out = new Map<string, Float64Array>();
  const values = async (name: string): Promise<Float64Array> => {
    const info = file.tensors.get(name)!;
    const b = (await file.bytes(name)).slice();
    switch (info.dtype) {
      case 'F32': return Float64Array.from(new Float32Array(b.buffer));
      case 'BF16': return Float64Array.from(new Uint16Array(b.buffer), bf16BitsToF32);
      case 'F8_E4M3': {
        const [N, K] = info.shape, [bn, bk] = block;
        const scale = await values(name.replace(/\.weight$/, '.weight_scale_inv'));
        const cols = Math.ceil(K / bk);
        const v = new Float64Array(N * K);
        for (let n = 0; n < N; n++) {
          for (let k = 0; k < K; k++) v[n * K + k] = fp8e4m3BitsToF32(b[n * K + k]) * scale[Math.floor(n / bn) * cols + Math.floor(k / bk)];
        }
        return v;
      }
      default: throw new Error(`float64Weights: ${name}: expected dtype F32, BF16 or F8_E4M3, got ${info.dtype}`);
    }
  };
  for (const name of file.tensors.keys()) {
    if (name.endsWith('.weight_scale_inv')) continue;
    out.set(name, await values(name));
  }
  return out;
}
