// llama.cpp's vision pair: a text GGUF and its `mmproj` GGUF (the vision tower and projector, as
// convert_hf_to_gguf.py --mmproj writes them: general.architecture `clip`, the tower's sizes under
// clip.vision.*, the projector's kind in clip.projector_type). This reads the projector type `gemma3`
// (Gemma 3's SigLIP tower and pooling projector; Gemma3VisionModel in the converter): the HF config of
// Gemma3ForConditionalGeneration it stands for, from the text file's config and tokens and the mmproj's
// keys. Other projector types (Qwen2.5-VL's `qwen2.5vl_merger`, LLaVA's `mlp`, ...) are refused by name.
import { WebinferError } from '../core/errors.js';
import type { GGUFFile } from './gguf.js';

/** The mmproj projector types read. */
export const MMPROJ_PROJECTORS = Object.freeze(['gemma3'] as const);

const OP = 'loadModel';

function need(g: GGUFFile, key: string, kind: 'int' | 'num'): number {
  const v = g.metadata.get(key);
  const n = typeof v === 'bigint' ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isFinite(n) || (kind === 'int' && (!Number.isInteger(n) || n <= 0)) || n <= 0) {
    throw new WebinferError(`${OP}: o.mmproj: ${g.name}: ${key}: expected a positive ${kind === 'int' ? 'integer' : 'number'}, got ${v === undefined ? 'none' : String(v)}`);
  }
  return n;
}

/**
 * The config.json of Gemma3ForConditionalGeneration for a `gemma3` text GGUF and its mmproj: the text
 * file's config as text_config, the tower's sizes from clip.vision.*, mm_tokens_per_image from the patch
 * grid over clip.vision.projector.scale_factor (4 when absent, as llama.cpp assumes), and the image, boi
 * and eoi token ids found by their text in the text file's vocabulary.
 */
export function gemma3MmprojConfig(text: GGUFFile, mmproj: GGUFFile): Record<string, unknown> {
  const arch = text.metadata.get('general.architecture');
  if (arch !== 'gemma3') throw new WebinferError(`${OP}: o.weights: expected a gemma3 text GGUF beside an mmproj of projector type gemma3, got general.architecture ${String(arch)}`);
  const image = need(mmproj, 'clip.vision.image_size', 'int'), patch = need(mmproj, 'clip.vision.patch_size', 'int');
  const scaleRaw = mmproj.metadata.get('clip.vision.projector.scale_factor');
  const scale = scaleRaw === undefined ? 4 : need(mmproj, 'clip.vision.projector.scale_factor', 'int');
  if (image % patch || (image / patch) % scale) {
    throw new WebinferError(`${OP}: o.mmproj: ${mmproj.name}: clip.vision.image_size ${image}: expected a multiple of patch_size ${patch} whose patch grid divides by projector.scale_factor ${scale}`);
  }
  const tokens = text.metadata.get('tokenizer.ggml.tokens');
  const id = (t: string) => {
    const i = Array.isArray(tokens) ? tokens.indexOf(t) : -1;
    if (i < 0) throw new WebinferError(`${OP}: o.weights: ${text.name}: tokenizer.ggml.tokens: expected Gemma 3's image token '${t}', got a vocabulary without it`);
    return i;
  };
  const { architectures: _a, ...textConfig } = text.config as Record<string, unknown>;
  const side = image / patch / scale;
  return {
    architectures: ['Gemma3ForConditionalGeneration'],
    model_type: 'gemma3',
    text_config: textConfig,
    vision_config: {
      model_type: 'siglip_vision_model', hidden_act: 'gelu_pytorch_tanh', vision_use_head: false, num_channels: 3,
      hidden_size: need(mmproj, 'clip.vision.embedding_length', 'int'), intermediate_size: need(mmproj, 'clip.vision.feed_forward_length', 'int'),
      num_hidden_layers: need(mmproj, 'clip.vision.block_count', 'int'), num_attention_heads: need(mmproj, 'clip.vision.attention.head_count', 'int'),
      layer_norm_eps: need(mmproj, 'clip.vision.attention.layer_norm_epsilon', 'num'), image_size: image, patch_size: patch,
    },
    mm_tokens_per_image: side * side,
    image_token_index: id('<image_soft_token>'), boi_token_index: id('<start_of_image>'), eoi_token_index: id('<end_of_image>'),
    tie_word_embeddings: textConfig.tie_word_embeddings ?? true,
  };
}

/** Checks an mmproj file's kind: a clip file with a vision encoder and a projector type this reads. */
export function checkMmproj(mmproj: GGUFFile): (typeof MMPROJ_PROJECTORS)[number] {
  const arch = mmproj.metadata.get('general.architecture');
  if (arch !== 'clip') throw new WebinferError(`${OP}: o.mmproj: ${mmproj.name}: general.architecture: expected 'clip' (llama.cpp's mmproj file), got ${String(arch)}`);
  const kind = mmproj.metadata.get('clip.projector_type') ?? mmproj.metadata.get('clip.vision.projector_type');
  if (!(MMPROJ_PROJECTORS as readonly unknown[]).includes(kind)) {
    throw new WebinferError(`${OP}: o.mmproj: ${mmproj.name}: clip.projector_type: expected one of ${MMPROJ_PROJECTORS.join(', ')} (the mmproj projectors read), got ${kind === undefined ? 'none' : String(kind)}`);
  }
  return kind as (typeof MMPROJ_PROJECTORS)[number];
}

/**
 * The preprocessor_config.json an mmproj stands for (projector type gemma3): Gemma3ImageProcessor at the
 * tower's image size, bilinear, rescale 1/255, normalized by clip.vision.image_mean / image_std (0.5
 * each where absent, Gemma 3's).
 */
export function gemma3MmprojPreprocessor(mmproj: GGUFFile): Record<string, unknown> {
  const size = need(mmproj, 'clip.vision.image_size', 'int');
  const triple = (key: string): number[] => {
    const v = mmproj.metadata.get(key);
    if (v === undefined) return [0.5, 0.5, 0.5];
    if (!Array.isArray(v) || v.length !== 3 || !v.every((x) => typeof x === 'number' && Number.isFinite(x))) {
      throw new WebinferError(`${OP}: o.mmproj: ${mmproj.name}: ${key}: expected three numbers (R, G, B), got ${String(v)}`);
    }
    return v as number[];
  };
  return {
    image_processor_type: 'Gemma3ImageProcessor', do_resize: true, size: { height: size, width: size }, resample: 2,
    do_rescale: true, rescale_factor: 1 / 255, do_normalize: true, image_mean: triple('clip.vision.image_mean'), image_std: triple('clip.vision.image_std'),
    do_convert_rgb: true, do_pan_and_scan: false,
  };
}
