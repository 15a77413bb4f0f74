// Every program's WGSL through Tint (Dawn's null adapter, in Node through the webgpu package): parse,
// types and uniformity, as written and with its loops written out. The subgroup-matrix programs are the
// reason: no CPU adapter here runs them (SwiftShader and lavapipe lack the feature), but the null
// adapter offers chromium-experimental-subgroup-matrix with allow_unsafe_apis, so their shaders are
// validated on every run. (It validates shader modules only: it has no matrix configurations, so
// pipelines of them are made on the GPU machine, tests/device/run.ts.)
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROGRAMS, SHADER_FILES } from '../../src/core/shaders';
import { specializeConsts } from '../../src/core/pipeline';
import { unrollConstLoops } from '../../src/core/unroll';

let device: GPUDevice | null = null;
let why = '';
// dawn.node tears its instance down when the object from create() is collected: held for the file.
let gpuRef: unknown = null;

beforeAll(async () => {
  try {
    const webgpu = await import('webgpu');
    Object.assign(globalThis, webgpu.globals);
    const gpu = webgpu.create(['backend=null', 'enable-dawn-features=allow_unsafe_apis']);
    gpuRef = gpu;
    const adapter = await gpu.requestAdapter();
    if (!adapter) throw new Error('no null adapter');
    device = await adapter.requestDevice({ requiredFeatures: ['shader-f16', 'subgroups', 'chromium-experimental-subgroup-matrix'] as GPUFeatureName[] });
  } catch (e) {
    why = (e as Error).message;
  }
});
afterAll(() => {
  device?.destroy();
  void gpuRef;
});

/** The enables a program needs, from what it uses. */
function enables(src: string): string {
  return [/\bf16\b/.test(src) ? 'f16' : '', /subgroup/.test(src) ? 'subgroups' : '', /subgroup_matrix/.test(src) ? 'chromium_experimental_subgroup_matrix' : '']
    .filter(Boolean).map((e) => `enable ${e};\n`).join('');
}

async function errors(code: string): Promise<string[]> {
  const m = device!.createShaderModule({ code });
  const info = await m.getCompilationInfo();
  return info.messages.filter((x) => x.type === 'error').map((x) => `${x.lineNum}:${x.linePos} ${x.message}`);
}

describe('WGSL through Tint (null adapter)', () => {
  it('validates the subgroup-matrix programs (flash dense and paged, MLA decode, the GEMM), as written and unrolled, at the shapes the planner makes', async () => {
    expect(device, `Dawn's null adapter with subgroup matrices: ${why}`).not.toBeNull();
    const shapes: Record<string, number | boolean>[] = [
      { M: 16, N: 16, K: 16, NSG: 4, SGW: 32, BC: 64, D: 64, DV: 64, WORDS: true },
      { M: 16, N: 8, K: 8, NSG: 2, SGW: 32, BC: 32, D: 72, DV: 40, RB: 2 },
      { M: 8, N: 8, K: 8, NSG: 4, SGW: 32, BC: 32, D: 128, DV: 128, WORDS: true },   // Apple's simdgroup matrices
      { M: 16, N: 16, K: 16, NSG: 4, SGW: 64, BC: 16, D: 256, DV: 256 },
      { M: 16, N: 16, K: 16, NSG: 4, SGW: 32, BC: 32, D: 128, DV: 128, RB: 2, WORDS: true },
      // f32 data as hi + lo halves (SPLIT)
      { M: 16, N: 16, K: 16, NSG: 4, SGW: 32, BC: 32, D: 64, DV: 64, SPLIT: true },
      { M: 16, N: 8, K: 8, NSG: 2, SGW: 32, BC: 32, D: 72, DV: 40, RB: 2, SPLIT: true },
      { M: 8, N: 8, K: 8, NSG: 4, SGW: 32, BC: 16, D: 128, DV: 128, SPLIT: true },
    ];
    for (const c of shapes) {
      const base = PROGRAMS.sdpa_flash_mma.map((f) => SHADER_FILES[f]).join('\n');
      for (const unroll of [false, true]) {
        let src = specializeConsts(base, c, 'sdpa_flash_mma');
        if (unroll) src = unrollConstLoops(src);
        expect(await errors(enables(src) + src), `${JSON.stringify(c)} unrolled ${unroll}`).toEqual([]);
      }
    }
    const paged = specializeConsts(PROGRAMS.paged_flash_mma.map((f) => SHADER_FILES[f]).join('\n'), shapes[0], 'paged_flash_mma');
    expect(await errors(enables(paged) + paged), 'paged_flash_mma').toEqual([]);
    // The subgroup-matrix GEMM: split and f16 x, 16×16×16, 16×8×16 and Apple's 8×8×8, 32- and 64-wide subgroups.
    const gemmShapes: Record<string, number | boolean>[] = [
      { SM: 16, SN: 16, SK: 16, SGW: 32, SGR: 2, SGC: 4, TMR: 4, TNC: 2, BK: 32, SPLIT: true },
      { SM: 16, SN: 8, SK: 16, SGW: 32, SGR: 2, SGC: 2, TMR: 4, TNC: 4, BK: 64, PF: 2, SPLIT: false },
      { SM: 8, SN: 8, SK: 8, SGW: 32, SGR: 2, SGC: 2, TMR: 2, TNC: 2, BK: 32, PF: 2, SPLIT: true },
      { SM: 16, SN: 16, SK: 16, SGW: 64, SGR: 2, SGC: 2, TMR: 4, TNC: 4, BK: 32, SPLIT: true },
      { SM: 16, SN: 16, SK: 16, SGW: 32, SGR: 2, SGC: 4, TMR: 4, TNC: 4, BK: 32, TW: true, SPLIT: false },
      { SM: 16, SN: 16, SK: 16, SGW: 32, SGR: 2, SGC: 4, TMR: 4, TNC: 4, BK: 32, VEC: true, SPLIT: true },
      // The decode tiles (LINEAR_MMA_DECODE_TILES): one row matrix a subgroup, 2 to 8 subgroups, BK up to 128.
      { SM: 16, SN: 16, SK: 16, SGW: 32, SGR: 1, SGC: 4, TMR: 1, TNC: 1, BK: 64, SPLIT: true },
      { SM: 16, SN: 16, SK: 16, SGW: 32, SGR: 1, SGC: 4, TMR: 1, TNC: 1, BK: 64, VEC: true, SPLIT: true },
      { SM: 16, SN: 16, SK: 16, SGW: 32, SGR: 1, SGC: 2, TMR: 1, TNC: 1, BK: 128, PF: 2, SPLIT: true },
      { SM: 16, SN: 16, SK: 16, SGW: 32, SGR: 2, SGC: 4, TMR: 2, TNC: 1, BK: 64, SPLIT: true },
    ];
    for (const c of gemmShapes) {
      for (const unroll of [false, true]) {
        const prog = c.VEC ? PROGRAMS.gemm_mma_vec : PROGRAMS.gemm_mma;
        const { VEC: _, ...consts } = c;
        let src = specializeConsts(prog.map((f) => SHADER_FILES[f]).join('\n'), consts, 'gemm_mma');
        if (unroll) src = unrollConstLoops(src);
        expect(await errors(enables(src) + src), `gemm_mma ${JSON.stringify(c)} unrolled ${unroll}`).toEqual([]);
      }
    }
    const moe = specializeConsts(PROGRAMS.ops_moe_gemm_mma.map((f) => SHADER_FILES[f]).join('\n'), { SGR: 2, SGC: 4, TMR: 2, TNC: 4, SPLIT: true }, 'ops_moe_gemm_mma');
    for (const src of [moe, unrollConstLoops(moe)]) expect(await errors(enables(src) + src), 'ops_moe_gemm_mma').toEqual([]);
    // MLA decode on the matrices: DeepSeek's 576/512 rows at each shape the planner offers, a padded
    // small shape (D 144: 9 k-steps over 4 slices), Apple's 8×8×8 and 64-wide subgroups.
    const mlaShapes: Record<string, number | boolean>[] = [
      { M: 16, N: 16, K: 16, NSG: 8, SGW: 32, RB: 1, BC: 32, DSPLIT: 4, D: 576, DV: 512 },
      { M: 16, N: 16, K: 16, NSG: 4, SGW: 32, RB: 1, BC: 32, DSPLIT: 4, D: 576, DV: 512 },
      { M: 16, N: 16, K: 16, NSG: 8, SGW: 32, RB: 2, BC: 16, DSPLIT: 8, D: 576, DV: 512, PROBE: 2 },
      { M: 16, N: 8, K: 16, NSG: 8, SGW: 32, RB: 1, BC: 32, DSPLIT: 4, D: 144, DV: 128 },
      { M: 8, N: 8, K: 8, NSG: 4, SGW: 32, RB: 2, BC: 32, DSPLIT: 2, D: 576, DV: 512 },
      { M: 16, N: 16, K: 16, NSG: 4, SGW: 64, RB: 1, BC: 32, DSPLIT: 2, D: 576, DV: 512 },
      // GQA decode on the same tile (V from the V cache): Llama's 128, a 64/96 pair padded, Apple's 8×8×8.
      { M: 16, N: 16, K: 16, NSG: 4, SGW: 32, RB: 1, BC: 64, DSPLIT: 1, D: 128, DV: 128, SEPV: true },
      { M: 16, N: 16, K: 16, NSG: 8, SGW: 32, RB: 1, BC: 64, DSPLIT: 2, D: 128, DV: 128, SEPV: true },
      { M: 16, N: 8, K: 16, NSG: 8, SGW: 32, RB: 1, BC: 128, DSPLIT: 1, D: 64, DV: 96, SEPV: true },
      { M: 8, N: 8, K: 8, NSG: 4, SGW: 32, RB: 1, BC: 64, DSPLIT: 1, D: 128, DV: 128, SEPV: true },
    ];
    for (const c of mlaShapes) {
      for (const unroll of [false, true]) {
        let src = specializeConsts(PROGRAMS.paged_mla_mma.map((f) => SHADER_FILES[f]).join('\n'), c, 'paged_mla_mma');
        if (unroll) src = unrollConstLoops(src);
        expect(await errors(enables(src) + src), `paged_mla_mma ${JSON.stringify(c)} unrolled ${unroll}`).toEqual([]);
      }
    }
    const ceiling = specializeConsts(PROGRAMS.bench_ceiling_mma.map((f) => SHADER_FILES[f]).join('\n'), { M: 16, N: 8, K: 16, SGW: 32 }, 'bench_ceiling_mma');
    expect(await errors(enables(ceiling) + ceiling)).toEqual([]);
  });

  it('rejects what it should: a matrix call in non-uniform control flow (so the check above can fail)', async () => {
    expect(device).not.toBeNull();
    const bad = `enable f16;\nenable subgroups;\nenable chromium_experimental_subgroup_matrix;
var<workgroup> a: array<f16, 256>;
@compute @workgroup_size(32) fn main(@builtin(local_invocation_index) li: u32) {
  if (li == 0u) { let m = subgroupMatrixLoad<subgroup_matrix_left<f16, 16, 16>, row_major>(&a, 0u, 16u); }
}`;
    expect((await errors(bad)).join(' ')).toMatch(/uniform/);
  });
});
