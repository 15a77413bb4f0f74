// What an HF quantization scheme is to the checkpoint reader (src/models/hf_quant.ts reads the integer
// formats, hf_fp8.ts the FP8 ones): a factory from config.json's quantization settings to a QuantScheme,
// which names the quantized modules among the checkpoint's tensors and presents each one as the engine
// takes it. Apart from both readers, so that neither imports the other's module for its types.
import { WebinferError } from '../core/errors.js';
import type { QuantType } from '../core/quant.js';
import type { SafetensorsTensorInfo } from './safetensors.js';

/** One quantized module as the engine takes it. */
export interface PresentedWeight {
  /** Its type ('Z4G128_F16', 'F8G128_BF16', ...: one validateCheckpoint accepts). */
  readonly type: QuantType;
  /** HF's [out, in]: N rows of K values. */
  readonly shape: readonly [number, number];
  /** The checkpoint tensors it is made of (none of them is shown to the schema check). */
  readonly parts: readonly string[];
  /** The engine's blocks: N rows of K values of `type` (stored column order: see perm). */
  bytes(): Promise<Uint8Array>;
  /** Stored column j holds input column perm[j] (GPTQ desc_act); absent where the order is the input's. */
  readonly perm?: Int32Array;
}

/** The checkpoint's tensors over all its files, as a scheme reads them. */
export interface CheckpointTensors {
  readonly tensors: ReadonlyMap<string, SafetensorsTensorInfo>;
  bytes(name: string): Promise<Uint8Array>;
  /** Where it came from, for messages. */
  readonly name: string;
}

/** A quantization scheme (one quant_method, or MLX's `quantization`). */
export interface QuantScheme {
  /** For messages: 'mlx', 'awq', 'gptq', 'compressed-tensors', 'fp8'. */
  readonly name: string;
  /** The prefixes of the quantized modules among the checkpoint's tensor names. */
  modules(ckpt: CheckpointTensors): string[];
  /** One module, checked against the settings (throws a WebinferError naming what is wrong). Small
   *  tensors (g_idx, weight_shape) may be read here; the weight's bytes only in bytes(). */
  present(prefix: string, ckpt: CheckpointTensors): Promise<PresentedWeight>;
}

/** Makes a scheme from config.json's quantization settings (`qc`) and the whole config. */
export type QuantSchemeFactory = (qc: Record<string, unknown>, config: Record<string, unknown>) => QuantScheme;

/** compressed-tensors' config group whose `targets` name module `prefix` ('Linear', the prefix itself,
 *  or 're:<regex>'); the only group when there is one. */
export function configGroupFor<T extends { targets: string[] }>(groups: readonly T[], prefix: string): T {
  if (groups.length === 1) return groups[0];
  const hit = groups.find((g) => g.targets.some((t) => t === 'Linear' || t === prefix || (t.startsWith('re:') && new RegExp(`^(?:${t.slice(3)})`).test(prefix))));
  if (!hit) throw new WebinferError(`loadModel: ${prefix}: no quantization_config.config_groups entry targets it`);
  return hit;
}
