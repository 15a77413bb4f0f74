// Every WGSL source, inlined at build time from shaders/**/*.wgsl (vite's import.meta.glob with ?raw),
// so the very same text reaches the browser bundle, Deno (through dist/webinfer.js) and Node (vitest
// runs through vite). Files are named by their path under shaders/ ('attention/paged.wgsl'); a
// program is the concatenation of a few files (shared helpers first), and compile errors are mapped
// back to file:line.
import { GROUP_QUANT_TYPES, QUANT_DOT_TYPES, QUANT_FORMATS } from './quant.js';

const sources = import.meta.glob('../../shaders/**/*.wgsl', { query: '?raw', import: 'default', eager: true }) as Record<string, string>;

const FILES: Record<string, string> = Object.fromEntries(
  Object.entries(sources).map(([path, text]) => [path.replace(/^.*?shaders\//, ''), text]));

/** The group types' decoder files (ops/quant/<type>.wgsl): their constants, then ops/quant/group.wgsl. */
for (const t of GROUP_QUANT_TYPES) {
  const f = QUANT_FORMATS[t], g = f.group!;
  FILES[`ops/quant/${t.toLowerCase()}.wgsl`] = `// ${t} (core/quant.ts's group types): ops/quant/group.wgsl with these constants.\n`
    + `const Q_TYPE: u32 = ${f.code}u;\nconst QK: u32 = ${g.size}u;\nconst QB: u32 = ${g.bodyBytes}u;\n`
    + `const QG_KIND: u32 = ${'AZF'.indexOf(g.kind)}u;\nconst QG_BITS: u32 = ${g.bits}u;\n`
    + `const QG_SCALE: u32 = ${['F16', 'BF16', 'F32'].indexOf(g.scale)}u;\nconst QG_PW: u32 = ${g.headBytes / 4}u;\n`
    + FILES['ops/quant/group.wgsl'];
}

export const SHADER_FILES: Readonly<Record<string, string>> = FILES;

const DTYPE = 'core/dtype.wgsl';
const COMMON = 'attention/common.wgsl';
const flash = (addressing: string, reduce: 'portable' | 'subgroup') =>
  [DTYPE, COMMON, `attention/${addressing}.wgsl`, 'attention/flash_core.wgsl', 'attention/flash_scores.wgsl', `attention/reduce_${reduce}.wgsl`];
const decode = (kernel: string) => [DTYPE, COMMON, 'attention/paged_decode_io.wgsl', `attention/${kernel}.wgsl`];

/** Every quantized type by its decoder file under ops/quant/ (QUANT_FORMATS' types, lower case): ggml's, then the group types'. */
export const QUANT_FILES: readonly string[] = ['q8_0', 'q4_0', 'q4_1', 'q5_0', 'q5_1', 'q2_k', 'q3_k', 'q4_k', 'q5_k', 'q6_k', 'iq4_nl', 'iq4_xs', 'mxfp4',
  ...GROUP_QUANT_TYPES.map((t) => t.toLowerCase())];

/** The types whose decoder files give the GEMV's dot path (q_unit_q, q_xscale: ops/gemv_qdot.wgsl). */
const QUANT_DOT_FILES: readonly string[] = QUANT_DOT_TYPES.map((t) => t.toLowerCase());

/**
 * The linear-layer and expert programs (and the quantized embedding): `gemv`, `ops_moe_gemv` ... for
 * 16/32-bit weights, and `gemv.q4_k` ... for each quantized type, with only that type's decoder
 * (ops/quant/<type>.wgsl).
 */
function linearPrograms(): Record<string, readonly string[]> {
  const out: Record<string, readonly string[]> = {};
  for (const q of ['none', ...QUANT_FILES]) {
    const tail = q === 'none' ? '' : `.${q}`;
    const quant = ['ops/quant.wgsl', `ops/quant/${q}.wgsl`];
    const dot = QUANT_DOT_FILES.includes(q);
    const stage = ['ops/gemv_xstage.wgsl'];
    const gq = q === 'none' ? ['ops/gemv_words.wgsl'] : [...stage, ...(dot ? ['ops/qdot.wgsl', 'ops/gemv_qdot.wgsl'] : ['ops/gemv_quant.wgsl'])];
    out[`gemv${tail}`] = [DTYPE, 'ops/gemm_io.wgsl', ...quant, 'ops/weight_words.wgsl', 'ops/gemv.wgsl', ...gq, 'ops/gemv_portable.wgsl'];
    out[`gemv_subgroup${tail}`] = [DTYPE, 'ops/gemm_io.wgsl', ...quant, 'ops/weight_words.wgsl', 'ops/gemv.wgsl', ...gq, 'ops/gemv_subgroup.wgsl'];
    if (dot) {
      // 8-bit activations and integer dot products (PlanLinearOptions.quantPath 'idot'): their own
      // programs, since only adapters whose WGSL has dot4I8Packed compile them.
      const idot = [DTYPE, 'ops/gemm_io.wgsl', ...quant, `ops/quant/${q}_i8.wgsl`, 'ops/weight_words.wgsl', 'ops/gemv.wgsl', ...stage, 'ops/gemv_idot.wgsl'];
      out[`gemv_idot${tail}`] = [...idot, 'ops/gemv_portable.wgsl'];
      out[`gemv_subgroup_idot${tail}`] = [...idot, 'ops/gemv_subgroup.wgsl'];
      // The decode path for these types too (PlanLinearOptions.quantPath 'decode'): the A/B the bench runs.
      out[`gemv_dq${tail}`] = [DTYPE, 'ops/gemm_io.wgsl', ...quant, 'ops/weight_words.wgsl', 'ops/gemv.wgsl', ...stage, 'ops/gemv_quant.wgsl', 'ops/gemv_portable.wgsl'];
      out[`gemv_subgroup_dq${tail}`] = [DTYPE, 'ops/gemm_io.wgsl', ...quant, 'ops/weight_words.wgsl', 'ops/gemv.wgsl', ...stage, 'ops/gemv_quant.wgsl', 'ops/gemv_subgroup.wgsl'];
      out[`ops_moe_gemv_dq${tail}`] = [DTYPE, 'ops/moe_io.wgsl', ...quant, 'ops/weight_words.wgsl', 'ops/moe_gemv.wgsl', 'ops/moe_gemv_words.wgsl'];
    }
    out[`gemm${tail}`] = [DTYPE, 'ops/gemm_io.wgsl', ...quant, 'ops/weight_words.wgsl', 'ops/gemm.wgsl'];
    out[`gemm_mma${tail}`] = ['ops/gemm_io.wgsl', ...quant, 'ops/gemm_mma.wgsl', 'ops/gemm_mma_scalar.wgsl', 'ops/gemm_mma_linear.wgsl'];
    out[`gemm_mma_vec${tail}`] = ['ops/gemm_io.wgsl', ...quant, 'ops/gemm_mma.wgsl', 'ops/gemm_mma_vec.wgsl', 'ops/gemm_mma_linear.wgsl'];
    if (q !== 'none') out[`ops_embedding_q${tail}`] = ['ops/embedding_q.wgsl', ...quant];
    out[`ops_moe_gemv${tail}`] = [DTYPE, 'ops/moe_io.wgsl', ...quant, 'ops/weight_words.wgsl',
      'ops/moe_gemv.wgsl', ...(dot ? ['ops/qdot.wgsl', 'ops/moe_gemv_qdot.wgsl'] : ['ops/moe_gemv_words.wgsl'])];
    out[`ops_moe_gemm${tail}`] = [DTYPE, 'ops/moe_io.wgsl', ...quant, 'ops/weight_words.wgsl', 'ops/moe_gemm.wgsl'];
    out[`ops_moe_gemm_mma${tail}`] = ['ops/moe_io.wgsl', ...quant, 'ops/gemm_mma.wgsl', 'ops/gemm_mma_vec.wgsl', 'ops/moe_gemm_mma.wgsl'];
  }
  return out;
}

/** Programs by name: the files each is assembled from, in order. */
export const PROGRAMS: Readonly<Record<string, readonly string[]>> = {
  sdpa_naive: [DTYPE, COMMON, 'attention/sdpa_naive.wgsl'],
  sdpa_flash: flash('flash', 'portable'),
  sdpa_flash_subgroup: flash('flash', 'subgroup'),
  sdpa_flash_mma: [DTYPE, COMMON, 'attention/flash.wgsl', 'attention/flash_mma_core.wgsl', 'attention/flash_scores.wgsl'],
  merge: [DTYPE, 'attention/merge.wgsl'],
  paged_cache: [DTYPE, 'attention/cache_word.wgsl', 'attention/paged_cache.wgsl'],
  rope_cache: [DTYPE, 'attention/cache_word.wgsl', 'attention/rope_cache.wgsl'],
  paged_flash: flash('paged', 'portable'),
  paged_flash_subgroup: flash('paged', 'subgroup'),
  paged_flash_mma: [DTYPE, COMMON, 'attention/paged.wgsl', 'attention/flash_mma_core.wgsl', 'attention/flash_scores.wgsl'],
  paged_mla: [DTYPE, COMMON, 'attention/paged.wgsl', 'attention/mla_core.wgsl'],
  paged_mla_mma: [DTYPE, COMMON, 'attention/paged.wgsl', 'attention/mla_mma_core.wgsl'],
  paged_decode: decode('paged_decode'),
  paged_decode_sg: decode('paged_decode_sg'),
  paged_plan: [COMMON, 'attention/plan.wgsl'],
  mla: [DTYPE, 'attention/mla.wgsl'],
  model_step: ['models/step.wgsl'],
  bench_ceiling: ['bench/ceiling.wgsl'],
  bench_ceiling_mma: ['bench/ceiling_mma.wgsl'],
  ...linearPrograms(),
  gemm_splitk: ['ops/gemm_io.wgsl', 'ops/gemm_splitk.wgsl'],
  gemm_init: [DTYPE, 'ops/gemm_init.wgsl'],
  ops_gather_cols: ['ops/gather_cols.wgsl'],
  ops_norm: [DTYPE, 'ops/norm.wgsl'],
  ops_norm_subgroup: [DTYPE, 'ops/norm.wgsl', 'ops/norm_subgroup.wgsl'],
  ops_rope: ['ops/rope.wgsl'],
  ops_elementwise: ['ops/activation.wgsl', 'ops/elementwise.wgsl'],
  ops_audio: ['ops/audio.wgsl'],
  ops_conv: ['ops/activation.wgsl', 'ops/conv.wgsl'],
  ops_pool: ['ops/pool.wgsl'],
  ops_short_conv: ['ops/short_conv.wgsl'],
  ops_embedding: [DTYPE, 'ops/embedding.wgsl'],
  ops_sample: ['core/order.wgsl', 'ops/sample.wgsl'],
  ops_logits: ['ops/logits.wgsl'],
  ops_moe_route: ['core/order.wgsl', 'ops/moe_route.wgsl'], ops_moe_sort: ['ops/moe_sort.wgsl'], ops_moe_combine: ['ops/moe_combine.wgsl'],
};
