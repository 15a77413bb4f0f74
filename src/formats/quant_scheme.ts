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
  /** HF's [out, in]: N rows of K values (or [E, N, K]: a MoE layer's experts, hf_mxfp4.ts). */
  readonly shape: readonly [number, number] | readonly [number, number, number];
  /** The presented tensor's name (default `<prefix>.weight`). */
  readonly name?: string;
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

export const isObject = (x: unknown): x is Record<string, unknown> => x !== null && typeof x === 'object' && !Array.isArray(x);

/** A copy of a checkpoint tensor's bytes in a buffer of its own (the bytes may sit at any offset, where
 *  no wider typed array can view them). */
export async function ownBytes(ckpt: CheckpointTensors, name: string): Promise<Uint8Array> {
  const b = await ckpt.bytes(name);
  const c = new Uint8Array(b.byteLength);
  c.set(b);
  return c;
}

/**
 * compressed-tensors' `config_groups`, each read by `parse` (given the group, its `weights` and where it
 * is, for messages) and given its `targets` (default ['Linear']). A missing or empty config_groups, or
 * a group without a `weights` object, is a named error.
 */
export function configGroups<T>(qc: Record<string, unknown>, parse: (g: Record<string, unknown>, w: Record<string, unknown>, at: string) => T): (T & { targets: string[] })[] {
  const cg = qc.config_groups;
  if (!isObject(cg) || !Object.keys(cg).length) throw new WebinferError(`loadModel: quantization_config.config_groups: expected an object of quantization groups, got ${JSON.stringify(cg)}`);
  return Object.entries(cg).map(([key, g]) => {
    const at = `quantization_config.config_groups.${key}`;
    if (!isObject(g) || !isObject(g.weights)) throw new WebinferError(`loadModel: ${at}.weights: expected an object, got ${JSON.stringify(isObject(g) ? g.weights : g)}`);
    return { ...parse(g, g.weights, at), targets: Array.isArray(g.targets) ? g.targets.map(String) : ['Linear'] };
  });
}
