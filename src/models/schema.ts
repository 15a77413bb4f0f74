// The tensors an HF checkpoint of each architecture holds, declared as name templates with symbolic
// shapes, and the check that a set of safetensors files matches them before any GPU memory is taken.
//
// Names follow transformers' state dicts (`model.layers.{i}.self_attn.q_proj.weight`, nn.Linear
// weights [out, in]). Routed experts come in either layout: one module per expert as the Hub stores
// them (`mlp.experts.{e}.gate_proj.weight` ...) or packed as transformers 5 writes them
// (`mlp.experts.gate_up_proj` [E, 2·I, H], gate rows first, and `mlp.experts.down_proj` [E, H, I]).
//
// Ignored, as transformers ignores them on load: `*.rotary_emb.inv_freq` (a buffer old checkpoints
// carried), and for DeepSeek V3 every `model.layers.{i}.*` with i >= num_hidden_layers (the
// multi-token-prediction layers the Hub checkpoints append, which inference never runs). A tied
// model's checkpoint may carry `lm_head.weight`; it is accepted (with the embedding's shape) and unused.

import { fail, shapeStr } from '../core/errors.js';
import type { ModelConfig } from './config.js';

/** When a template applies: a flag computed from the config (see `flags`). */
type Flag =
  | 'always'
  | 'untied'
  | 'qkvBias'
  | 'oBias'
  | 'mlpBias'
  | 'qkNorm'
  | 'qLora'
  | 'qLoraBias'
  | 'noQLora'
  | 'shared'
  | 'sharedBias'
  | 'eScoreBias'
  | 'sandwich'
  | 'sinks'
  | 'ossFloat'
  | 'ossMxfp4';
/** [name template, shape in symbols (products/sums of config dims, see `dims`), when]. */
/** [name template, shape in symbols, when, the dtypes it takes where not the caller's list]. */
type Dtypes = readonly string[];
type Template = readonly [string, readonly string[], Flag?, Dtypes?];

const GLOBAL: readonly Template[] = [
  ['model.embed_tokens.weight', ['V', 'H']],
  ['model.norm.weight', ['H']],
  ['lm_head.weight', ['V', 'H'], 'untied'],
];

const GQA_ATTENTION: readonly Template[] = [
  ['self_attn.q_proj.weight', ['Hq*D', 'H']],
  ['self_attn.q_proj.bias', ['Hq*D'], 'qkvBias'],
  ['self_attn.k_proj.weight', ['Hkv*D', 'H']],
  ['self_attn.k_proj.bias', ['Hkv*D'], 'qkvBias'],
  ['self_attn.v_proj.weight', ['Hkv*D', 'H']],
  ['self_attn.v_proj.bias', ['Hkv*D'], 'qkvBias'],
  ['self_attn.o_proj.weight', ['H', 'Hq*D']],
  ['self_attn.o_proj.bias', ['H'], 'oBias'],
  ['self_attn.q_norm.weight', ['D'], 'qkNorm'],
  ['self_attn.k_norm.weight', ['D'], 'qkNorm'],
  ['self_attn.sinks', ['Hq'], 'sinks'],
];

const MLA_ATTENTION: readonly Template[] = [
  ['self_attn.q_proj.weight', ['Hq*(P+R)', 'H'], 'noQLora'],
  ['self_attn.q_a_proj.weight', ['QL', 'H'], 'qLora'],
  ['self_attn.q_a_proj.bias', ['QL'], 'qLoraBias'],
  ['self_attn.q_a_layernorm.weight', ['QL'], 'qLora'],
  ['self_attn.q_b_proj.weight', ['Hq*(P+R)', 'QL'], 'qLora'],
  ['self_attn.kv_a_proj_with_mqa.weight', ['KVL+R', 'H']],
  ['self_attn.kv_a_proj_with_mqa.bias', ['KVL+R'], 'qkvBias'],
  ['self_attn.kv_a_layernorm.weight', ['KVL']],
  ['self_attn.kv_b_proj.weight', ['Hq*(P+Vd)', 'KVL']],
  ['self_attn.o_proj.weight', ['H', 'Hq*Vd']],
  ['self_attn.o_proj.bias', ['H'], 'oBias'],
];

/** Phi3: q|k|v fused in one projection (rows: q, k, v), gate|up in another (rows: gate, up). */
const PHI3_ATTENTION: readonly Template[] = [
  ['self_attn.qkv_proj.weight', ['Hq*D+2*Hkv*D', 'H']],
  ['self_attn.o_proj.weight', ['H', 'Hq*D']],
];
const PHI3_MLP: readonly Template[] = [
  ['mlp.gate_up_proj.weight', ['2*I', 'H']],
  ['mlp.down_proj.weight', ['H', 'I']],
];

/**
 * LFM2 (Lfm2ForCausalLM): every layer has operator_norm (before the attention or convolution) and
 * ffn_norm, and the feed-forward w1 (gate), w3 (up), w2 (down); an attention layer q/k/v, out_proj and
 * per-head q/k norms; a conv layer in_proj (rows B | C | x), the depthwise conv.conv [H, 1, L] and
 * out_proj. The final norm is model.embedding_norm (applied after the last layer despite its name).
 */
const LFM2_GLOBAL: readonly Template[] = [
  ['model.embed_tokens.weight', ['V', 'H']],
  ['model.embedding_norm.weight', ['H']],
  ['lm_head.weight', ['V', 'H'], 'untied'],
];
const LFM2_LAYER: readonly Template[] = [
  ['operator_norm.weight', ['H']],
  ['ffn_norm.weight', ['H']],
  ['feed_forward.w1.weight', ['I', 'H']],
  ['feed_forward.w3.weight', ['I', 'H']],
  ['feed_forward.w2.weight', ['H', 'I']],
];
const LFM2_ATTENTION: readonly Template[] = [
  ['self_attn.q_proj.weight', ['Hq*D', 'H']],
  ['self_attn.k_proj.weight', ['Hkv*D', 'H']],
  ['self_attn.v_proj.weight', ['Hkv*D', 'H']],
  ['self_attn.out_proj.weight', ['H', 'Hq*D']],
  ['self_attn.q_layernorm.weight', ['D']],
  ['self_attn.k_layernorm.weight', ['D']],
];
const LFM2_CONV: readonly Template[] = [
  ['conv.in_proj.weight', ['3*H', 'H']],
  ['conv.conv.weight', ['H', '1', 'L']],
  ['conv.out_proj.weight', ['H', 'H']],
];

const NORMS: readonly Template[] = [
  ['input_layernorm.weight', ['H']],
  ['post_attention_layernorm.weight', ['H']],
  // Gemma2's norms of the MLP's input and output (post_attention_layernorm: of the attention's output).
  ['pre_feedforward_layernorm.weight', ['H'], 'sandwich'],
  ['post_feedforward_layernorm.weight', ['H'], 'sandwich'],
];

const DENSE_MLP: readonly Template[] = [
  ['mlp.gate_proj.weight', ['I', 'H']],
  ['mlp.gate_proj.bias', ['I'], 'mlpBias'],
  ['mlp.up_proj.weight', ['I', 'H']],
  ['mlp.up_proj.bias', ['I'], 'mlpBias'],
  ['mlp.down_proj.weight', ['H', 'I']],
  ['mlp.down_proj.bias', ['H'], 'mlpBias'],
];

const MOE_ROUTER_AND_SHARED: readonly Template[] = [
  ['mlp.gate.weight', ['E', 'H']],
  ['mlp.gate.e_score_correction_bias', ['E'], 'eScoreBias'],
  ['mlp.shared_experts.gate_proj.weight', ['S*MI', 'H'], 'shared'],
  ['mlp.shared_experts.gate_proj.bias', ['S*MI'], 'sharedBias'],
  ['mlp.shared_experts.up_proj.weight', ['S*MI', 'H'], 'shared'],
  ['mlp.shared_experts.up_proj.bias', ['S*MI'], 'sharedBias'],
  ['mlp.shared_experts.down_proj.weight', ['H', 'S*MI'], 'shared'],
  ['mlp.shared_experts.down_proj.bias', ['H'], 'sharedBias'],
];

const EXPERT_PER_MODULE: readonly Template[] = [
  ['mlp.experts.{e}.gate_proj.weight', ['MI', 'H']],
  ['mlp.experts.{e}.up_proj.weight', ['MI', 'H']],
  ['mlp.experts.{e}.down_proj.weight', ['H', 'MI']],
];

const EXPERT_PACKED: readonly Template[] = [
  ['mlp.experts.gate_up_proj', ['E', '2*MI', 'H']],
  ['mlp.experts.down_proj', ['E', 'H', 'MI']],
];

/**
 * gpt-oss (GptOssMLP): a router with a bias and packed experts with biases, gate_up_proj [E, H, 2·I]
 * input-major with gate and up interleaved (columns 0, 2, ...: gate), down_proj [E, I, H]; an MXFP4
 * checkpoint's experts as formats/hf_mxfp4.ts presents them: rows of blocks, [E, 2·I, H] (gate rows, then up
 * rows) and [E, H, I].
 */
const GPT_OSS_MOE: readonly Template[] = [
  ['mlp.router.weight', ['E', 'H']],
  ['mlp.router.bias', ['E']],
  ['mlp.experts.gate_up_proj', ['E', 'H', '2*MI'], 'ossFloat'],
  ['mlp.experts.gate_up_proj', ['E', '2*MI', 'H'], 'ossMxfp4', ['MXFP4']],
  ['mlp.experts.gate_up_proj_bias', ['E', '2*MI']],
  ['mlp.experts.down_proj', ['E', 'MI', 'H'], 'ossFloat'],
  ['mlp.experts.down_proj', ['E', 'H', 'MI'], 'ossMxfp4', ['MXFP4']],
  ['mlp.experts.down_proj_bias', ['E', 'H']],
];

export interface SchemaEntry {
  name: string;
  shape: number[];
  /** The dtypes this tensor takes, where not the checkpoint's list (gpt-oss's MXFP4 experts: MXFP4 only). */
  dtypes?: readonly string[];
}

/** The routed experts of one MoE layer: exactly one layout must be present, completely. */
export interface ExpertChoice {
  layer: number;
  perExpert: SchemaEntry[];
  packed: SchemaEntry[];
}

export interface CheckpointSchema {
  /** Tensors every checkpoint of this config has. */
  required: SchemaEntry[];
  /** Accepted when present (lm_head of a tied model). */
  optional: SchemaEntry[];
  experts: ExpertChoice[];
  /** Names dropped without complaint (see the header comment). */
  ignored(name: string): boolean;
}

/** Floating dtypes a model loader converts to f32/f16/bf16 on upload. */
export const WEIGHT_DTYPES: readonly string[] = Object.freeze(['F32', 'F16', 'BF16']);

function dims(cfg: ModelConfig): Record<string, number> {
  const d: Record<string, number> = {
    V: cfg.vocabSize,
    H: cfg.hiddenSize,
    I: cfg.intermediateSize,
    Hq: cfg.numHeads,
    Hkv: cfg.numKvHeads,
    D: cfg.headDim,
  };
  if (cfg.mla) Object.assign(d, { QL: cfg.mla.qLoraRank ?? 0, KVL: cfg.mla.kvLoraRank, P: cfg.mla.qkNopeHeadDim, R: cfg.mla.qkRopeHeadDim, Vd: cfg.mla.vHeadDim });
  if (cfg.convLCache !== null) d.L = cfg.convLCache;
  if (cfg.moe) Object.assign(d, { E: cfg.moe.numRoutedExperts, MI: cfg.moe.moeIntermediateSize, S: cfg.moe.numSharedExperts });
  return d;
}

/** Evaluates a shape symbol: integers and dims combined with *, + and parentheses. */
function evalDim(expr: string, d: Record<string, number>): number {
  const tokens = expr.match(/[A-Za-z]+|\d+|[()*+]/g) ?? [];
  let at = 0;
  const sum = (): number => {
    let v = product();
    while (tokens[at] === '+') {
      at++;
      v += product();
    }
    return v;
  };
  const product = (): number => {
    let v = atom();
    while (tokens[at] === '*') {
      at++;
      v *= atom();
    }
    return v;
  };
  const atom = (): number => {
    const t = tokens[at++];
    if (t === '(') {
      const v = sum();
      at++; // ')'
      return v;
    }
    if (t !== undefined && /^\d+$/.test(t)) return Number(t);
    const v = t === undefined ? undefined : d[t];
    if (v === undefined) throw new Error(`schema: unknown dimension '${t}' in '${expr}'`);
    return v;
  };
  const v = sum();
  if (at !== tokens.length) throw new Error(`schema: cannot parse '${expr}'`);
  return v;
}

function flags(cfg: ModelConfig): Record<Flag, boolean> {
  const moe = cfg.moe;
  return {
    always: true,
    untied: !cfg.tieWordEmbeddings,
    qkvBias: cfg.attentionBias.qkv,
    oBias: cfg.attentionBias.o,
    mlpBias: cfg.mlpBias,
    qkNorm: cfg.qkNorm,
    qLora: cfg.mla !== null && cfg.mla.qLoraRank !== null,
    qLoraBias: cfg.mla !== null && cfg.mla.qLoraRank !== null && cfg.attentionBias.qkv,
    noQLora: cfg.mla !== null && cfg.mla.qLoraRank === null,
    shared: moe !== null && moe.numSharedExperts > 0,
    sharedBias: moe !== null && moe.numSharedExperts > 0 && cfg.mlpBias,
    eScoreBias: moe !== null && moe.eScoreCorrectionBias,
    sandwich: cfg.sandwichNorms,
    sinks: cfg.sinks,
    ossFloat: moe?.gptOss?.mxfp4 === false,
    ossMxfp4: moe?.gptOss?.mxfp4 === true,
  };
}

/** Qwen2.5-VL's vision tower (`visual.*`): patch embedding, blocks, the patch merger. */
function visionSchema(cfg: ModelConfig): SchemaEntry[] {
  const v = cfg.vision!;
  const C = v.hiddenSize, I = v.intermediateSize, M = C * v.spatialMergeSize * v.spatialMergeSize;
  const out: SchemaEntry[] = [{ name: 'visual.patch_embed.proj.weight', shape: [C, v.inChannels, v.temporalPatchSize, v.patchSize, v.patchSize] }];
  for (let b = 0; b < v.depth; b++) {
    const p = `visual.blocks.${b}.`;
    out.push(
      { name: `${p}norm1.weight`, shape: [C] }, { name: `${p}norm2.weight`, shape: [C] },
      { name: `${p}attn.qkv.weight`, shape: [3 * C, C] }, { name: `${p}attn.qkv.bias`, shape: [3 * C] },
      { name: `${p}attn.proj.weight`, shape: [C, C] }, { name: `${p}attn.proj.bias`, shape: [C] },
      { name: `${p}mlp.gate_proj.weight`, shape: [I, C] }, { name: `${p}mlp.gate_proj.bias`, shape: [I] },
      { name: `${p}mlp.up_proj.weight`, shape: [I, C] }, { name: `${p}mlp.up_proj.bias`, shape: [I] },
      { name: `${p}mlp.down_proj.weight`, shape: [C, I] }, { name: `${p}mlp.down_proj.bias`, shape: [C] },
    );
  }
  out.push(
    { name: 'visual.merger.ln_q.weight', shape: [C] },
    { name: 'visual.merger.mlp.0.weight', shape: [M, M] }, { name: 'visual.merger.mlp.0.bias', shape: [M] },
    { name: 'visual.merger.mlp.2.weight', shape: [v.outHiddenSize, M] }, { name: 'visual.merger.mlp.2.bias', shape: [v.outHiddenSize] },
  );
  return out;
}

/**
 * A checkpoint tensor's name in the schema. Gemma3ForConditionalGeneration's checkpoints nest the text
 * model under `language_model.` (transformers 4.50-4.52 and the goldens) or `model.language_model.`
 * (later), and the tower under `vision_tower.vision_model.`, `model.vision_tower.` or `vision_tower.`:
 * each is read as `model.*` / `lm_head.*`, `vision_tower.*` and `multi_modal_projector.*`.
 */
export function schemaName(cfg: ModelConfig, name: string): string {
  if (!cfg.siglip) return name;
  let n = name;
  if (n.startsWith('model.language_model.')) n = `model.${n.slice('model.language_model.'.length)}`;
  else if (n.startsWith('language_model.model.')) n = `model.${n.slice('language_model.model.'.length)}`;
  else if (n.startsWith('language_model.lm_head.')) n = `lm_head.${n.slice('language_model.lm_head.'.length)}`;
  else if (n.startsWith('model.vision_tower.')) n = n.slice('model.'.length);
  else if (n.startsWith('model.multi_modal_projector.')) n = n.slice('model.'.length);
  if (n.startsWith('vision_tower.vision_model.')) n = `vision_tower.${n.slice('vision_tower.vision_model.'.length)}`;
  return n;
}

/** Gemma 3's SigLIP tower and projector (schemaName's names). */
function siglipSchema(cfg: ModelConfig): SchemaEntry[] {
  const v = cfg.siglip!;
  const C = v.hiddenSize, I = v.intermediateSize, P = v.patchSize, N = (v.imageSize / P) ** 2;
  const e = 'vision_tower.embeddings.';
  const out: SchemaEntry[] = [
    { name: `${e}patch_embedding.weight`, shape: [C, v.numChannels, P, P] }, { name: `${e}patch_embedding.bias`, shape: [C] },
    { name: `${e}position_embedding.weight`, shape: [N, C] },
  ];
  for (let l = 0; l < v.numLayers; l++) {
    const p = `vision_tower.encoder.layers.${l}.`;
    for (const n of ['layer_norm1', 'layer_norm2']) out.push({ name: `${p}${n}.weight`, shape: [C] }, { name: `${p}${n}.bias`, shape: [C] });
    for (const n of ['q_proj', 'k_proj', 'v_proj', 'out_proj']) out.push({ name: `${p}self_attn.${n}.weight`, shape: [C, C] }, { name: `${p}self_attn.${n}.bias`, shape: [C] });
    out.push({ name: `${p}mlp.fc1.weight`, shape: [I, C] }, { name: `${p}mlp.fc1.bias`, shape: [I] }, { name: `${p}mlp.fc2.weight`, shape: [C, I] }, { name: `${p}mlp.fc2.bias`, shape: [C] });
  }
  out.push({ name: 'vision_tower.post_layernorm.weight', shape: [C] }, { name: 'vision_tower.post_layernorm.bias', shape: [C] },
    { name: 'multi_modal_projector.mm_soft_emb_norm.weight', shape: [C] },
    { name: 'multi_modal_projector.mm_input_projection_weight', shape: [C, cfg.hiddenSize] });
  return out;
}

/** The expected tensor names and shapes of a checkpoint for this config. */
export function checkpointSchema(cfg: ModelConfig): CheckpointSchema {
  const d = dims(cfg);
  const on = flags(cfg);
  const expand = (list: readonly Template[], prefix: string, out: SchemaEntry[], expert = '') => {
    for (const [name, shape, flag = 'always', types] of list) {
      if (on[flag]) out.push({ name: prefix + name.replace('{e}', expert), shape: shape.map((s) => evalDim(s, d)), ...(types ? { dtypes: types } : {}) });
    }
  };
  const required: SchemaEntry[] = [];
  const optional: SchemaEntry[] = [];
  const experts: ExpertChoice[] = [];
  expand(cfg.family === 'lfm2' ? LFM2_GLOBAL : GLOBAL, '', required);
  if (cfg.tieWordEmbeddings) optional.push({ name: 'lm_head.weight', shape: [cfg.vocabSize, cfg.hiddenSize] });
  if (cfg.family === 'lfm2') {
    for (let i = 0; i < cfg.numLayers; i++) {
      const p = `model.layers.${i}.`;
      expand(LFM2_LAYER, p, required);
      expand(cfg.layers[i]!.conv ? LFM2_CONV : LFM2_ATTENTION, p, required);
    }
    return { required, optional, experts, ignored: (name) => /(^|\.)rotary_emb\.inv_freq$/.test(name) };
  }
  const attention = cfg.mla ? MLA_ATTENTION : cfg.family === 'phi3' ? PHI3_ATTENTION : GQA_ATTENTION;
  for (let i = 0; i < cfg.numLayers; i++) {
    const p = `model.layers.${i}.`;
    expand(attention, p, required);
    expand(NORMS, p, required);
    if (!cfg.layers[i]!.moe) {
      expand(cfg.family === 'phi3' ? PHI3_MLP : DENSE_MLP, p, required);
      continue;
    }
    if (cfg.moe!.gptOss) {
      expand(GPT_OSS_MOE, p, required);
      continue;
    }
    expand(MOE_ROUTER_AND_SHARED, p, required);
    const perExpert: SchemaEntry[] = [];
    for (let e = 0; e < cfg.moe!.numRoutedExperts; e++) expand(EXPERT_PER_MODULE, p, perExpert, String(e));
    const packed: SchemaEntry[] = [];
    expand(EXPERT_PACKED, p, packed);
    experts.push({ layer: i, perExpert, packed });
  }
  if (cfg.vision) required.push(...visionSchema(cfg));
  if (cfg.siglip) required.push(...siglipSchema(cfg));
  const mtpFrom = cfg.family === 'deepseek_v3' ? cfg.numLayers : Infinity;
  return {
    required,
    optional,
    experts,
    ignored(name: string): boolean {
      if (/(^|\.)rotary_emb\.inv_freq$/.test(name)) return true;
      const m = /^model\.layers\.(\d+)\./.exec(name);
      return m !== null && Number(m[1]) >= mtpFrom;
    },
  };
}

export interface ResolvedTensor {
  /** Index into the files given to validateCheckpoint. */
  file: number;
  /** Its name in the file, where that differs from the schema's (checkpointName). */
  source?: string;
  dtype: string;
  shape: number[];
}

/** Lines of the error; the full count is reported even when the list is cut. */
const MAX_LISTED = 20;

/**
 * Checks the checkpoint against the config's schema and resolves every tensor the model needs to
 * the file holding it. Throws one error naming every missing, unexpected, duplicated, wrongly
 * shaped or wrongly typed tensor (the first 20, and how many more), before anything is uploaded.
 */
export function validateCheckpoint(
  cfg: ModelConfig,
  files: readonly { tensors: ReadonlyMap<string, { dtype: string; shape: number[] }>; name?: string }[],
  dtypes: readonly string[] = WEIGHT_DTYPES,
): Map<string, ResolvedTensor> {
  const schema = checkpointSchema(cfg);
  const inFile = (i: number) => (typeof files[i]!.name === 'string' ? `file ${i}: ${files[i]!.name}` : `file ${i}`);
  const found = new Map<string, ResolvedTensor>();
  const problems: string[] = [];
  files.forEach((f, file) => {
    for (const [source, info] of f.tensors) {
      const name = schemaName(cfg, source);
      const prev = found.get(name);
      if (prev) problems.push(`duplicate ${name}: in ${inFile(prev.file)} and ${inFile(file)}`);
      else found.set(name, { file, dtype: info.dtype, shape: info.shape.slice(), ...(name !== source ? { source } : {}) });
    }
  });
  const resolved = new Map<string, ResolvedTensor>();
  const accept = (e: SchemaEntry, mustExist: boolean) => {
    const t = found.get(e.name);
    if (!t) {
      if (mustExist) problems.push(`missing ${e.name} ${shapeStr(e.shape)}`);
      return;
    }
    if (t.shape.length !== e.shape.length || t.shape.some((s, k) => s !== e.shape[k])) {
      problems.push(`wrong shape ${e.name}: expected ${shapeStr(e.shape)}, got ${shapeStr(t.shape)} (${inFile(t.file)})`);
    } else if (!(e.dtypes ?? dtypes).includes(t.dtype)) {
      problems.push(`wrong dtype ${e.name}: expected one of ${(e.dtypes ?? dtypes).join(', ')}, got ${t.dtype} (${inFile(t.file)})`);
    }
    resolved.set(e.name, t);
  };
  for (const e of schema.required) accept(e, true);
  for (const e of schema.optional) accept(e, false);
  for (const c of schema.experts) {
    const hasPer = c.perExpert.some((e) => found.has(e.name));
    const hasPacked = c.packed.some((e) => found.has(e.name));
    if (hasPer && hasPacked) {
      problems.push(`mixed expert layouts in layer ${c.layer}: per-expert mlp.experts.{e}.*_proj.weight and packed mlp.experts.gate_up_proj/down_proj both present`);
    }
    if (!hasPer && !hasPacked) {
      const E = cfg.moe!.numRoutedExperts;
      const [gu, dn] = c.packed;
      problems.push(
        `missing routed experts of layer ${c.layer}: expected model.layers.${c.layer}.mlp.experts.{0..${E - 1}}.{gate,up,down}_proj.weight, ` +
          `or packed ${gu!.name} ${shapeStr(gu!.shape)} and ${dn!.name} ${shapeStr(dn!.shape)}`,
      );
      continue;
    }
    for (const e of hasPer ? c.perExpert : c.packed) accept(e, true);
    if (hasPer && hasPacked) for (const e of c.packed) accept(e, false);
  }
  for (const [name, t] of found) {
    if (resolved.has(name) || schema.ignored(name)) continue;
    problems.push(`unexpected ${name} ${shapeStr(t.shape)} (${inFile(t.file)})`);
  }
  if (problems.length) {
    const shown = problems.slice(0, MAX_LISTED).map((p) => `\n  ${p}`).join('');
    const more = problems.length > MAX_LISTED ? `\n  ... and ${problems.length - MAX_LISTED} more` : '';
    fail(
      'validateCheckpoint',
      `weights of ${cfg.architecture}`,
      `the checkpoint schema of its config (${schema.required.length} tensors besides routed experts)`,
      `${problems.length} problem${problems.length > 1 ? 's' : ''}:${shown}${more}`,
    );
  }
  return resolved;
}
