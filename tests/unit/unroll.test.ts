// The loop unroller that wgpu's implementations get (src/core/unroll.ts): which loops it writes out,
// which it leaves, and that every assembled program still parses.
import { describe, expect, it } from 'vitest';
import { WgslReflect } from 'wgsl_reflect';
import { evalConst, moduleConsts, unrollConstLoops } from '../../src/core/unroll';
import { PROGRAMS, SHADER_FILES } from '../../src/core/shaders';
import { reflectable } from '../../src/core/pipeline';

const strip = (s: string) => s.replace(/\s+/g, ' ').trim();

describe('evalConst', () => {
  const consts = new Map<string, number | boolean>([['A', 8], ['B', 3], ['T', true]]);
  it('evaluates integer arithmetic, shifts, comparisons, min/max/select and named constants', () => {
    expect(evalConst('A / (B - 1u)', consts)).toBe(4);
    expect(evalConst('A % B + (A << 2u) - (A >> 1u)', consts)).toBe(2 + 32 - 4);
    expect(evalConst('select(1u, A, T)', consts)).toBe(8);
    expect(evalConst('max(A, min(B, 2u)) * u32(2)', consts)).toBe(16);
    expect(evalConst('A == 8u && !(B > 3u)', consts)).toBe(true);
    expect(evalConst('-B + 1i', consts)).toBe(-2);
  });
  it('gives up on what is not a constant', () => {
    expect(evalConst('A * n', consts)).toBeNull();
    expect(evalConst('1.5 * A', consts)).toBeNull();
    expect(evalConst('f(A)', consts)).toBeNull();
    expect(evalConst('A / 0u', consts)).toBeNull();
    expect(evalConst('(A', consts)).toBeNull();
  });
  it('reads module-scope constants in order, each from those before it', () => {
    const c = moduleConsts('const D: u32 = 128u;\nconst KT: u32 = 16u;\nconst CK: u32 = D / (8u * KT);\nconst F: f32 = 1.5;\nconst S = select(1u, KT, D > 64u);\n');
    expect([...c]).toEqual([['D', 128], ['KT', 16], ['CK', 1], ['S', 16]]);
  });
});

describe('unrollConstLoops', () => {
  it('writes out constant-bound loops, nested ones too, each copy a block with its counter', () => {
    const src = 'const N: u32 = 2u;\nfn f() {\n  var a: array<f32, 4>;\n  for (var i = 0u; i < N; i++) {\n    for (var j = 0u; j < 2u; j++) { a[i * 2u + j] += 1.0; }\n  }\n}\n';
    const out = strip(unrollConstLoops(src));
    expect(out).not.toContain('for');
    for (const j of [0, 1]) expect(out).toContain(`{ let j: u32 = ${j}u; a[i * 2u + j] += 1.0; }`);
    expect(out.indexOf('let i: u32 = 0u;')).toBeLessThan(out.indexOf('let i: u32 = 1u;'));
    expect(out.match(/let j: u32/g)).toHaveLength(4);
  });
  it('takes shifts and steps and i32 counters', () => {
    const out = strip(unrollConstLoops('const KT: u32 = 16u;\nfn f(x: array<f32, 16>) { for (var off = KT / 2u; off > 0u; off >>= 1u) { y += x[off]; } for (var k = 0; k < 6; k += 3) { y += x[k]; } }\n'));
    expect(out).toContain('{ let off: u32 = 8u; y += x[off]; } { let off: u32 = 4u; y += x[off]; } { let off: u32 = 2u; y += x[off]; } { let off: u32 = 1u; y += x[off]; }');
    expect(out).toContain('{ let k: i32 = 0i; y += x[k]; } { let k: i32 = 3i; y += x[k]; }');
  });
  it('leaves loops that index no register array by their counter (workgroup or storage arrays, none at all)', () => {
    const keep = [
      'var<workgroup> t: array<f32, 64>;\nfn f() { for (var i = 0u; i < 4u; i++) { y += t[i]; } }',
      'fn f() { var a: array<f32, 4>; for (var i = 0u; i < 4u; i++) { y += a[0] * f32(i); } }',
    ];
    for (const s of keep) expect(strip(unrollConstLoops(s))).toBe(strip(s));
  });
  it('leaves loops it cannot write out: run-time bounds, break or continue of their own, a counter assigned, too many trips', () => {
    const keep = [
      'fn f(n: u32, a: array<f32, 8>) { for (var i = 0u; i < n; i++) { x += a[i]; } }',
      'fn f(a: array<f32, 8>) { for (var i = 0u; i < 4u; i++) { if (a[i] > 1.0) { break; } } }',
      'fn f(a: array<f32, 8>) { for (var i = 0u; i < 4u; i++) { if (a[i] > 1.0) { continue; } x += 1.0; } }',
      'fn f(a: array<f32, 8>) { for (var i = 0u; i < 4u; i++) { x += a[i]; i += 1u; } }',
      'fn f(a: array<f32, 8>) { for (var i = 0u; i < 1000u; i++) { x += a[i % 8u]; } }',
    ];
    for (const s of keep) expect(strip(unrollConstLoops(s))).toBe(strip(s));
  });
  it('unrolls a loop whose nested loop breaks or continues (that belongs to the nested loop)', () => {
    const out = strip(unrollConstLoops('fn f(n: u32) { var s: array<f32, 2>; for (var g = 0u; g < 2u; g++) { for (var u = 0u; u < n; u++) { if (u == 1u) { continue; } s[g] += 1.0; } } }'));
    expect(out.match(/let g: u32/g)).toHaveLength(2);
    expect(out.match(/for \(var u/g)).toHaveLength(2);
  });
  it('ignores break or continue in comments', () => {
    expect(strip(unrollConstLoops('fn f(a: array<f32, 2>) { for (var i = 0u; i < 2u; i++) { // no break here\n x += a[i]; } }'))).not.toContain('for');
  });
  it('keeps every program parseable, and removes the constant-bound loops of the kernels that need it', () => {
    for (const [name, files] of Object.entries(PROGRAMS)) {
      const src = files.map((f) => SHADER_FILES[f]).join('\n');
      const out = unrollConstLoops(src);
      expect(() => new WgslReflect(reflectable(out)), name).not.toThrow();
    }
    // The subgroup-matrix tile's loops over its matrix arrays (Q, O, and O's chunks) are gone.
    const mma = unrollConstLoops(PROGRAMS.sdpa_flash_mma.map((f) => SHADER_FILES[f]).join('\n'));
    expect(mma).not.toMatch(/for \(var (i|j|jj) = 0u; (i < NQ|j < NO|jj < NS);/);
    const flash = unrollConstLoops(PROGRAMS.sdpa_flash.map((f) => SHADER_FILES[f]).join('\n'));
    // flash_core's register-tile loops (TM, TN, OP rows and columns) are gone.
    expect(flash).not.toMatch(/for \(var i = 0u; i < TM;/);
    expect(flash).not.toMatch(/for \(var n = 0u; n < TN;/);
  });
});
