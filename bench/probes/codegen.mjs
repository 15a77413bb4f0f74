// Codegen probe: why do our portable flash / paged-decode kernels run ~5x slower under Deno (wgpu,
// naga -> SPIR-V) than under Node + dawn.node (Dawn, Tint -> SPIR-V) on the same NVIDIA driver, while
// the naive kernel (no local arrays) runs the same?
//
// Self-contained: plain JS, no imports but `webgpu` in Node (dynamic import; node:fs only for
// --out/--compare). Times tiny WGSL micro-kernels, each a pair (or family) identical but for the one
// construct under test, with GPU timestamp queries (wall clock around onSubmittedWorkDone where the
// adapter has none); median of --samples (7) after warm-up.
//
//   node bench/probes/codegen.mjs [--quick] [--only=A4,C.] [--samples=7] [--scale=1] [--out=x.json]
//   deno run -A bench/probes/codegen.mjs [same flags]
//   node bench/probes/codegen.mjs --compare=node.json,deno.json     (ratios B/A per variant; no GPU)
//   node bench/probes/codegen.mjs --dump [--only=A4.nagashape]        (print the WGSL; no GPU)
//   Node only: --enable-dawn=t1,t2 --disable-dawn=t3 (Dawn toggles, e.g. disable_robustness)
//
// Variants (group.variant; `ref` is what the ratio column divides by):
//   D  controls, no arrays: D.stream (bandwidth), D.fma (FMA chains, straight-line), D.fma.loop (the
//      same FMAs inside a constant-bound `for` of 8: loop overhead / unrolling without arrays).
//   A4 flash "S = Q.K^T" register tile: s: array<f32,16>, a: array<vec4,4> in constant-bound nested
//      `for` loops (as flash_core.wgsl), vs .unrolled (scalars, no arrays, no loops), .literal (the
//      arrays kept, every index a literal), .loop (`loop { if (i >= N) {break;} continuing {i++;} }`),
//      .uniform (loop bounds read from a uniform: nobody can unroll -> the cost of a demoted array),
//      .nagabound (the `for` version plus, written in WGSL, the 64-bit loop counter that naga's
//      SPIR-V backend injects into every loop when force_loop_bounding is on, as wgpu does by default,
//      tested after the condition), .breakfirst (`for (;;)` with `if (i < N) {} else { break; }`: the
//      shape naga's front end gives every `for`), .nagashape (breakfirst with the counter test first:
//      the order of naga's SPIR-V; lets Dawn reproduce naga's loops), .nagareset (nagashape with the
//      counter reset on each loop entry).
//   A8 flash "O += P.V" register tile: acc: array<vec4,16> (8x8), a[i/4][i%4] dynamic vector-component
//      reads; same family (.unrolled, .literal, .uniform, .nagabound, .breakfirst, .nagashape, .nagareset).
//   C  workgroup staging like flash: per iteration 2 barriers, one vec4 staged per thread, 8 reads;
//      C.wg4k (4 KiB tile) vs C.wg32k (same accesses, 32 KiB declared: zero-init cost), .4bar (2 extra
//      barriers), .short (2 iterations per workgroup: zero-init dominated).
//   E  E.divmod: u32 / and % by a runtime divisor (naga and Tint both polyfill division).
// Each thread-compute kernel runs the uniform-bound outer loop p.k times (as flash's key-tile loop).

const isDeno = !!globalThis.Deno;
const argv = isDeno ? Deno.args : process.argv.slice(2);
const arg = (k, d) => {
  const a = argv.find((x) => x === `--${k}` || x.startsWith(`--${k}=`));
  if (!a) return d;
  return a.includes('=') ? a.slice(a.indexOf('=') + 1) : 'true';
};
const quick = arg('quick', null) !== null;
const samples = Number(arg('samples', quick ? 3 : 7));
const scale = Number(arg('scale', 1));
const only = arg('only', '').split(',').filter(Boolean);
const outFile = arg('out', '');
const compare = arg('compare', '');

async function readText(f) {
  if (isDeno) return Deno.readTextFileSync(f);
  const fs = await import('node:fs');
  return fs.readFileSync(f, 'utf8');
}
async function writeText(f, s) {
  if (isDeno) return Deno.writeTextFileSync(f, s);
  const fs = await import('node:fs');
  fs.writeFileSync(f, s);
}
function exit(code) { if (isDeno) Deno.exit(code); else process.exit(code); }

// ------------------------------------------------------------------------------------ compare mode
if (compare) {
  const [fa, fb] = compare.split(',');
  const load = async (f) => {
    const t = await readText(f);
    const line = t.split('\n').find((l) => l.startsWith('JSON '));
    return JSON.parse(line ? line.slice(5) : t);
  };
  const A = await load(fa), B = await load(fb);
  console.log(`A: ${A.runtime} | ${A.adapter}\nB: ${B.runtime} | ${B.adapter}`);
  console.log(`${'variant'.padEnd(18)} ${'A ms'.padStart(9)} ${'B ms'.padStart(9)}  B/A   A vs ref  B vs ref`);
  for (const r of A.results) {
    const s = B.results.find((x) => x.name === r.name);
    if (!s) continue;
    console.log(`${r.name.padEnd(18)} ${r.ms.toFixed(3).padStart(9)} ${s.ms.toFixed(3).padStart(9)} ${(s.ms / r.ms).toFixed(2).padStart(5)}`
      + `  ${(r.vsRef ?? NaN).toFixed(2).padStart(8)}  ${(s.vsRef ?? NaN).toFixed(2).padStart(8)}`);
  }
  exit(0);
}

// ------------------------------------------------------------------------------------ device
const dump = arg('dump', null) !== null;   // --dump: print the WGSL of the chosen variants, no GPU needed
let gpu, runtime, adapter, adapterName, hasTs, L, device;
const keepAlive = setInterval(() => {}, 1000);   // dawn.node resolves promises from its own thread
if (dump) {
  L = { maxStorageBufferBindingSize: 1 << 27, maxComputeWorkgroupStorageSize: 32768 };
} else {
  if (isDeno) {
    gpu = navigator.gpu;
    runtime = `deno ${Deno.version.deno} (wgpu)`;
  } else {
    const webgpu = await import('webgpu');
    Object.assign(globalThis, webgpu.globals);
    const en = arg('enable-dawn', '');
    const dis = ['timestamp_quantization', ...arg('disable-dawn', '').split(',').filter(Boolean)];
    const toggles = [...(en ? [`enable-dawn-features=${en}`] : []), `disable-dawn-features=${dis.join(',')}`];
    gpu = webgpu.create(toggles);
    runtime = `node ${process.version} (dawn.node; toggles ${toggles.join(' ')})`;
  }
  if (!gpu) { console.error('no WebGPU in this runtime'); exit(1); }
  adapter = await gpu.requestAdapter({ powerPreference: 'high-performance' });
  if (!adapter) { console.error('requestAdapter returned null'); exit(1); }
  const info = adapter.info ?? {};
  adapterName = [info.vendor, info.architecture, info.device, info.description].filter(Boolean).join(' / ') || 'unknown adapter';
  hasTs = adapter.features.has('timestamp-query') && arg('wall', null) === null;
  L = adapter.limits;
  device = await adapter.requestDevice({
    requiredFeatures: hasTs ? ['timestamp-query'] : [],
    requiredLimits: {
      maxComputeWorkgroupStorageSize: L.maxComputeWorkgroupStorageSize,
      maxStorageBufferBindingSize: L.maxStorageBufferBindingSize,
      maxBufferSize: L.maxBufferSize,
    },
  });
  // dawn.node tears its instance down when the GPU object is collected, crashing devices made from it
  globalThis.__codegenProbeRetained = [gpu, adapter, device];
  device.addEventListener?.('uncapturederror', (e) => console.error('uncaptured:', e.error?.message ?? e));
  console.log(`runtime: ${runtime}`);
  console.log(`adapter: ${adapterName}`);
  console.log(`timing: ${hasTs ? 'GPU timestamps (pass begin/end)' : 'wall clock (submit -> onSubmittedWorkDone)'}, median of ${samples}; ${quick ? 'quick' : 'full'} sizes, scale ${scale}; workgroup storage limit ${L.maxComputeWorkgroupStorageSize} B`);
}

// ------------------------------------------------------------------------------------ sizes
const WG = 256;
const INP_VEC4 = 1 << 16;                                  // 1 MiB input, L2-resident
const THREAD_WGS = quick ? 16 : 2048;                      // workgroups for thread-compute kernels
const K = (n) => Math.max(2, Math.round(n * scale));
const K_A = K(quick ? 16 : 1024);
const K_D = K(quick ? 16 : 512);
const K_C = K(quick ? 8 : 64);
const C_WGS = quick ? 8 : 8192;
const C_SHORT_WGS = quick ? 32 : 65536;
const STREAM_VEC4 = quick ? (1 << 14) : Math.min(1 << 23, Math.floor(L.maxStorageBufferBindingSize / 16));
const STREAM_DISPATCHES = quick ? 2 : 16;
const OUT_VEC4 = Math.max(STREAM_VEC4, THREAD_WGS * WG, C_SHORT_WGS * WG, C_WGS * WG);

// ------------------------------------------------------------------------------------ WGSL
const PRELUDE = `
struct P { k: u32, n4: u32, n2: u32, n8: u32, mask: u32, div: u32, a: f32, b: f32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> inp: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> out: array<vec4<f32>>;
`;
const ENTRY = (body, decls = '') => `${PRELUDE}${decls}
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
  let wg = wid.y * nwg.x + wid.x;
  let gid = wg * ${WG}u + li;
  let o0 = (wg * 64u) & p.mask;
  let ty = li / 16u;
  let tx = li % 16u;
${body}
}
`;
const range = (n) => [...Array(n).keys()];

// Loop writers. style:
//   'for'        for (var i = 0u; i < N; i++) { body }
//   'loop'       { var i = 0u; loop { if (i >= N) { break; } body continuing { i++; } } }
//   'uniform'    'for' with N read from the uniform p (2, 4, 8): nobody can unroll it
//   'nagabound'  'for' + naga's 64-bit down-counter (declared at function scope, as naga's OpVariable
//                is, so not reset when the loop is entered again), checked after the condition
//   'breakfirst' for (var i = 0u; ; i++) { if (i < N) {} else { break; } body }: the shape naga's WGSL
//                front end gives every `for` (condition as an if/break inside the body)
//   'nagashape'  'breakfirst' with naga's counter check placed first, exactly the order of naga's
//                SPIR-V (counter test in the loop header, then the condition, then the body)
//   'nagareset'  'nagashape' with the counter declared just before the loop (reset on each entry)
function mkLoops(style) {
  const decls = [];
  let id = 0;
  const bound = (n) => (style === 'uniform' && [2, 4, 8].includes(n) ? `p.n${n}` : `${n}u`);
  const MAX2 = 'vec2<u32>(4294967295u, 4294967295u)';
  const check = (c) => `if (all(${c} == vec2<u32>(0u))) { break; } ${c} -= vec2<u32>(select(0u, 1u, ${c}.y == 0u), 1u);`;
  const stmt = (v, b, body) => {
    switch (style) {
      case 'loop': return `{ var ${v} = 0u; loop { if (${v} >= ${b}) { break; }\n${body}\n continuing { ${v}++; } } }`;
      case 'nagabound': { const c = `lb${id++}`; decls.push(`var ${c} = ${MAX2};`);
        return `for (var ${v} = 0u; ${v} < ${b}; ${v}++) { ${check(c)}\n${body}\n}`; }
      case 'breakfirst': return `for (var ${v} = 0u; ; ${v}++) { if (${v} < ${b}) {} else { break; }\n${body}\n}`;
      case 'nagashape': { const c = `lb${id++}`; decls.push(`var ${c} = ${MAX2};`);
        return `for (var ${v} = 0u; ; ${v}++) { ${check(c)} if (${v} < ${b}) {} else { break; }\n${body}\n}`; }
      case 'nagareset': { const c = `lb${id++}`;
        return `{ var ${c} = ${MAX2}; for (var ${v} = 0u; ; ${v}++) { ${check(c)} if (${v} < ${b}) {} else { break; }\n${body}\n} }`; }
      default: return `for (var ${v} = 0u; ${v} < ${b}; ${v}++) {\n${body}\n}`;
    }
  };
  const L = (v, n, body) => stmt(v, bound(n), body);
  const outer = (body) => stmt('k', 'p.k', body);
  return { L, outer, decls: () => decls.map((d) => `  ${d}`).join('\n') };
}

// A4: s[i*4+n] += dot(a[i], kv_n), a = 4 query-row vec4s (per ty), kv = 4 key vec4s (per tx).
function a4(style) {
  if (style === 'unrolled' || style === 'literal') {
    const arr = style === 'literal';
    const S = (c) => (arr ? `s[${c}]` : `s${c}`);
    const A = (i) => (arr ? `a[${i}]` : `a${i}`);
    const init = arr ? `  var s: array<f32, 16>;\n${range(16).map((c) => `  s[${c}] = f32(li) * 1e-6 + ${c}e-3;`).join('\n')}`
      : range(16).map((c) => `  var s${c} = f32(li) * 1e-6 + ${c}e-3;`).join('\n');
    const loads = arr ? `    var a: array<vec4<f32>, 4>;\n${range(4).map((i) => `    a[${i}] = inp[(o + ty * 4u + ${i}u) & p.mask];`).join('\n')}`
      : range(4).map((i) => `    let a${i} = inp[(o + ty * 4u + ${i}u) & p.mask];`).join('\n');
    const body = range(4).map((n) => `    let kv${n} = inp[(o + 64u + tx * 4u + ${n}u) & p.mask];\n`
      + range(4).map((i) => `    ${S(i * 4 + n)} += dot(${A(i)}, kv${n});`).join('\n')).join('\n');
    const fin = range(16).map((c) => `${S(c)} * ${c + 1}.0`).join(' + ');
    return ENTRY(`${init}
  for (var k = 0u; k < p.k; k++) {
    let o = o0 + k * 8u;
${loads}
${body}
  }
  out[gid] = vec4<f32>(${fin}, ${S(0)}, ${S(5)}, ${S(15)});`);
  }
  const { L, outer, decls } = mkLoops(style);
  const initLoop = L('c', 16, 's[c] = f32(li) * 1e-6 + f32(c) * 1e-3;');
  const inner = outer(`    let o = o0 + k * 8u;
    var a: array<vec4<f32>, 4>;
    ${L('i', 4, 'a[i] = inp[(o + ty * 4u + i) & p.mask];')}
    ${L('n', 4, `let kv = inp[(o + 64u + tx * 4u + n) & p.mask]; ${L('i', 4, 's[i * 4u + n] += dot(a[i], kv);')}`)}`);
  const finLoop = L('c', 16, 'r += s[c] * f32(c + 1u);');
  const body = `  var s: array<f32, 16>;
  ${initLoop}
  ${inner}
  var r = 0.0;
  ${finLoop}
  out[gid] = vec4<f32>(r, s[0], s[5], s[15]);`;
  return ENTRY(`${decls()}\n${body}`);
}

// A8: acc[i*2+j] += a[i/4][i%4] * b[j]; 8 rows (ty) x 8 columns (2 vec4, tx).
function a8(style) {
  if (style === 'unrolled' || style === 'literal') {
    const arr = style === 'literal';
    const C = (c) => (arr ? `acc[${c}]` : `acc${c}`);
    const A = (i4) => (arr ? `a[${i4}]` : `a${i4}`);
    const B = (j) => (arr ? `b[${j}]` : `b${j}`);
    const comp = ['x', 'y', 'z', 'w'];
    const init = arr ? `  var acc: array<vec4<f32>, 16>;\n${range(16).map((c) => `  acc[${c}] = vec4<f32>(f32(li) * 1e-6 + ${c}e-3);`).join('\n')}`
      : range(16).map((c) => `  var acc${c} = vec4<f32>(f32(li) * 1e-6 + ${c}e-3);`).join('\n');
    const loads = arr
      ? `    var a: array<vec4<f32>, 2>;\n    var b: array<vec4<f32>, 2>;\n${range(2).map((i) => `    a[${i}] = inp[(o + ty * 2u + ${i}u) & p.mask];`).join('\n')}\n`
        + range(2).map((j) => `    b[${j}] = inp[(o + 64u + tx * 2u + ${j}u) & p.mask];`).join('\n')
      : range(2).map((i) => `    let a${i} = inp[(o + ty * 2u + ${i}u) & p.mask];`).join('\n') + '\n'
        + range(2).map((j) => `    let b${j} = inp[(o + 64u + tx * 2u + ${j}u) & p.mask];`).join('\n');
    const body = range(8).map((i) => range(2).map((j) =>
      `    ${C(i * 2 + j)} += ${A(i >> 2)}${arr ? `[${i & 3}]` : `.${comp[i & 3]}`} * ${B(j)};`).join('\n')).join('\n');
    const fin = range(16).map((c) => `${C(c)} * ${c + 1}.0`).join(' + ');
    return ENTRY(`${init}
  for (var k = 0u; k < p.k; k++) {
    let o = o0 + k * 4u;
${loads}
${body}
  }
  out[gid] = ${fin};`);
  }
  const { L, outer, decls } = mkLoops(style);
  const inner = outer(`    let o = o0 + k * 4u;
    var a: array<vec4<f32>, 2>;
    var b: array<vec4<f32>, 2>;
    ${L('i', 2, 'a[i] = inp[(o + ty * 2u + i) & p.mask];')}
    ${L('j', 2, 'b[j] = inp[(o + 64u + tx * 2u + j) & p.mask];')}
    ${L('i', 8, L('j', 2, 'acc[i * 2u + j] += a[i / 4u][i % 4u] * b[j];'))}`);
  const body = `  var acc: array<vec4<f32>, 16>;
  ${L('c', 16, 'acc[c] = vec4<f32>(f32(li) * 1e-6 + f32(c) * 1e-3);')}
  ${inner}
  var r = vec4<f32>(0.0);
  ${L('c', 16, 'r += acc[c] * f32(c + 1u);')}
  out[gid] = r;`;
  return ENTRY(`${decls()}\n${body}`);
}

// D.fma: 4 vec4 FMA chains, 8 steps per k, straight-line or in a constant-bound for.
function dfma(loop) {
  const step = range(4).map((j) => `x${j} = fma(x${j}, va, vb);`).join(' ');
  const steps = loop ? `    for (var j = 0u; j < 8u; j++) { ${step} }` : range(8).map(() => `    ${step}`).join('\n');
  return ENTRY(`  let va = vec4<f32>(p.a);
  let vb = vec4<f32>(p.b);
${range(4).map((j) => `  var x${j} = vec4<f32>(f32(li) * 1e-6 + ${j}e-3);`).join('\n')}
  for (var k = 0u; k < p.k; k++) {
${steps}
  }
  out[gid] = x0 + x1 + x2 + x3;`);
}

const dstream = () => ENTRY(`  if (gid < arrayLength(&out)) { out[gid] = out[gid] * p.a + vec4<f32>(p.b); }`);

// C: staging through workgroup memory, 2 barriers per iteration (+2 for .4bar); `size` vec4 declared,
// the first 256 used in every variant.
function cwg(size, bars) {
  const reads = range(8).map((r) => `    acc += t[(li + ${r * 37 + 1}u) & 255u];`);
  if (bars === 4) { reads.splice(6, 0, '    workgroupBarrier();'); reads.splice(2, 0, '    workgroupBarrier();'); }
  return ENTRY(`  var acc = vec4<f32>(f32(li) * 1e-6);
  for (var k = 0u; k < p.k; k++) {
    workgroupBarrier();
    t[li] = inp[(o0 + k * 256u + li) & p.mask];
    workgroupBarrier();
${reads.join('\n')}
  }
  out[gid] = acc;`, `var<workgroup> t: array<vec4<f32>, ${size}>;\n`);
}

const edivmod = () => ENTRY(`  var x = 0u;
  var y = 0u;
  for (var k = 0u; k < p.k; k++) {
    let v = gid + k * 7919u;
    x += v / p.div;
    y += (v ^ x) % p.div;
  }
  out[gid] = vec4<f32>(f32(x), f32(y), 0.0, 1.0);`);

// ------------------------------------------------------------------------------------ variants
const T = THREAD_WGS * WG;
const sig = (x) => (x >= 100 ? x.toFixed(0) : x.toPrecision(3));
const tflops = (fmaPerThread, threads) => (ms) => `${sig(2 * fmaPerThread * threads / ms / 1e9)} TFLOP/s`;
const V = [];
const add = (name, ref, what, wgsl, wgs, k, rate, extra = {}) => V.push({ name, ref, what, wgsl, wgs, k, rate, ...extra });

add('D.stream', null, 'control: streaming, no arrays/loops', dstream(), STREAM_VEC4 / WG, 0,
  (ms) => `${sig(2 * 16 * STREAM_VEC4 * STREAM_DISPATCHES / ms / 1e6)} GB/s`, { dispatches: STREAM_DISPATCHES, noCheck: true });
add('D.fma', null, 'control: FMA chains, straight-line', dfma(false), THREAD_WGS, K_D, tflops(128 * K_D * 4, T));
add('D.fma.loop', 'D.fma', 'same FMAs in const-bound for(8), no arrays', dfma(true), THREAD_WGS, K_D, tflops(128 * K_D * 4, T));
for (const [st, what] of [['unrolled', 'scalars, no arrays, no loops'], ['for', 'arrays in const-bound nested for (flash)'],
  ['loop', 'arrays, loop{} + continuing'], ['literal', 'arrays, literal indices, no loops'],
  ['uniform', 'arrays, loop bounds from uniform (cannot unroll)'], ['nagabound', 'for + naga-style 64-bit loop counter in WGSL'],
  ['breakfirst', 'for(;;) + if (i < N) {} else {break;} (naga IR shape)'], ['nagashape', 'breakfirst + counter test first (naga SPIR-V order)'],
  ['nagareset', 'nagashape, counter reset on loop entry']]) {
  add(`A4.${st}`, st === 'unrolled' ? null : 'A4.unrolled', `4x4 dot tile: ${what}`, a4(st), THREAD_WGS, K_A, tflops(64 * K_A, T));
}
for (const [st, what] of [['unrolled', 'vec4 vars, no arrays, no loops'], ['for', 'arrays in const-bound nested for (flash P.V)'],
  ['literal', 'arrays, literal indices, no loops'], ['uniform', 'arrays, loop bounds from uniform'],
  ['nagabound', 'for + naga-style 64-bit loop counter in WGSL'], ['breakfirst', 'for(;;) + if/else break (naga IR shape)'],
  ['nagashape', 'breakfirst + counter test first (naga SPIR-V order)'], ['nagareset', 'nagashape, counter reset on loop entry']]) {
  add(`A8.${st}`, st === 'unrolled' ? null : 'A8.unrolled', `8x8 outer tile: ${what}`, a8(st), THREAD_WGS, K_A, tflops(64 * K_A, T));
}
const iters = (wgs, k) => (ms) => `${sig(wgs * k / ms / 1e6)} G wg-iter/s`;
add('C.wg4k', null, 'wg staging, 2 barriers/iter, 4 KiB', cwg(256, 2), C_WGS, K_C, iters(C_WGS, K_C));
add('C.wg4k.4bar', 'C.wg4k', 'same + 2 extra barriers/iter', cwg(256, 4), C_WGS, K_C, iters(C_WGS, K_C));
add('C.wg32k', 'C.wg4k', 'same accesses, 32 KiB declared (zero-init)', cwg(2048, 2), C_WGS, K_C, iters(C_WGS, K_C));
add('C.wg4k.short', null, '2 iters/workgroup, 4 KiB', cwg(256, 2), C_SHORT_WGS, 2, iters(C_SHORT_WGS, 2));
add('C.wg32k.short', 'C.wg4k.short', '2 iters/workgroup, 32 KiB declared', cwg(2048, 2), C_SHORT_WGS, 2, iters(C_SHORT_WGS, 2));
add('E.divmod', null, 'u32 / and % by runtime divisor', edivmod(), THREAD_WGS, K_A,
  (ms) => `${sig(2 * K_A * T / ms / 1e9)} T divmod/s`);

const chosen = V.filter((v) => !only.length || only.some((o) => v.name.startsWith(o)));
if (dump) { for (const v of chosen) console.log(`// ---- ${v.name}\n${v.wgsl}`); exit(0); }

// ------------------------------------------------------------------------------------ buffers
const inpData = new Float32Array(INP_VEC4 * 4);
for (let i = 0; i < inpData.length; i++) inpData[i] = ((i * 2654435761) % 1000) / 1000 * 1e-3;
const inpBuf = device.createBuffer({ size: inpData.byteLength, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST });
device.queue.writeBuffer(inpBuf, 0, inpData);
const outBuf = device.createBuffer({ size: OUT_VEC4 * 16, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST });
const CHECK_BYTES = 4096 * 16;
const checkBuf = device.createBuffer({ size: CHECK_BYTES, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
const paramBufs = new Map();
function params(k) {
  if (!paramBufs.has(k)) {
    const b = device.createBuffer({ size: 32, usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST });
    const u = new Uint32Array(8);
    u.set([k, 4, 2, 8, INP_VEC4 - 1, 13]);
    new Float32Array(u.buffer).set([0.9999, 1e-4], 6);
    device.queue.writeBuffer(b, 0, u);
    paramBufs.set(k, b);
  }
  return paramBufs.get(k);
}
const bgl = device.createBindGroupLayout({ entries: [
  { binding: 0, visibility: GPUShaderStage.COMPUTE, buffer: { type: 'uniform' } },
  { binding: 1, visibility: GPUShaderStage.COMPUTE, buffer: { type: 'read-only-storage' } },
  { binding: 2, visibility: GPUShaderStage.COMPUTE, buffer: { type: 'storage' } },
] });
const layout = device.createPipelineLayout({ bindGroupLayouts: [bgl] });
const qs = hasTs ? device.createQuerySet({ type: 'timestamp', count: 2 * samples }) : null;
const resolveBuf = hasTs ? device.createBuffer({ size: 16 * samples, usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC }) : null;
const tsRead = hasTs ? device.createBuffer({ size: 16 * samples, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST }) : null;

const grid = (wgs) => { const x = Math.min(wgs, 32768); return [x, Math.ceil(wgs / x)]; };
const median = (a) => { const s = [...a].sort((x, y) => x - y); const m = s.length >> 1; return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };

function encodeRun(pipe, bg, v, tsIndex) {
  const enc = device.createCommandEncoder();
  const desc = tsIndex === undefined ? {} : { timestampWrites: { querySet: qs, beginningOfPassWriteIndex: 2 * tsIndex, endOfPassWriteIndex: 2 * tsIndex + 1 } };
  const pass = enc.beginComputePass(desc);
  pass.setPipeline(pipe);
  pass.setBindGroup(0, bg);
  const [x, y] = grid(v.wgs);
  for (let d = 0; d < (v.dispatches ?? 1); d++) pass.dispatchWorkgroups(x, y);
  pass.end();
  return enc;
}

async function build(v) {
  device.pushErrorScope('validation');
  const t0 = performance.now();
  const module = device.createShaderModule({ code: v.wgsl, label: v.name });
  const msgs = module.getCompilationInfo ? (await module.getCompilationInfo()).messages.filter((m) => m.type === 'error') : [];
  if (msgs.length) throw new Error(`${v.name}: ${msgs.map((m) => `${m.lineNum}:${m.linePos} ${m.message}`).join('; ')}`);
  const pipe = await device.createComputePipelineAsync({ layout, compute: { module, entryPoint: 'main' } });
  const err = await device.popErrorScope();
  if (err) throw new Error(`${v.name}: ${err.message}`);
  return { pipe, compileMs: performance.now() - t0 };
}

async function run(v) {
  const { pipe, compileMs } = await build(v);
  const bg = device.createBindGroup({ layout: bgl, entries: [
    { binding: 0, resource: { buffer: params(v.k) } },
    { binding: 1, resource: { buffer: inpBuf } },
    { binding: 2, resource: { buffer: outBuf } },
  ] });
  // warm-up: at least 2 runs and (full size) 150 ms, so clocks are up
  const w0 = performance.now();
  for (let i = 0; i < 2 || (!quick && performance.now() - w0 < 150); i++) {
    device.queue.submit([encodeRun(pipe, bg, v).finish()]);
    await device.queue.onSubmittedWorkDone();
  }
  let times = [];
  const t0 = performance.now();
  if (hasTs) {
    for (let s = 0; s < samples; s++) device.queue.submit([encodeRun(pipe, bg, v, s).finish()]);
    const enc = device.createCommandEncoder();
    enc.resolveQuerySet(qs, 0, 2 * samples, resolveBuf, 0);
    enc.copyBufferToBuffer(resolveBuf, 0, tsRead, 0, 16 * samples);
    device.queue.submit([enc.finish()]);
    await device.queue.onSubmittedWorkDone();
    const wallMs = (performance.now() - t0) / samples;
    await tsRead.mapAsync(GPUMapMode.READ);
    const ts = new BigInt64Array(tsRead.getMappedRange().slice(0));
    tsRead.unmap();
    for (let s = 0; s < samples; s++) times.push(Number(ts[2 * s + 1] - ts[2 * s]) / 1e6);
    v.wallMs = wallMs;
  } else {
    for (let s = 0; s < samples; s++) {
      const a = performance.now();
      device.queue.submit([encodeRun(pipe, bg, v).finish()]);
      await device.queue.onSubmittedWorkDone();
      times.push(performance.now() - a);
    }
    v.wallMs = median(times);
  }
  // checksum of the first outputs (variants of one family must agree)
  let chk = null;
  if (!v.noCheck) {
    const enc = device.createCommandEncoder();
    enc.copyBufferToBuffer(outBuf, 0, checkBuf, 0, CHECK_BYTES);
    device.queue.submit([enc.finish()]);
    await checkBuf.mapAsync(GPUMapMode.READ);
    const f = new Float32Array(checkBuf.getMappedRange().slice(0));
    checkBuf.unmap();
    chk = 0;
    for (let i = 0; i < f.length; i++) chk += f[i];
  }
  return { ms: median(times), minMs: Math.min(...times), compileMs, chk };
}

// global warm-up so the first variant does not pay for clock ramp-up
if (!quick) {
  const w = V.find((v) => v.name === 'D.fma');
  const { pipe } = await build(w);
  const bg = device.createBindGroup({ layout: bgl, entries: [
    { binding: 0, resource: { buffer: params(w.k) } }, { binding: 1, resource: { buffer: inpBuf } }, { binding: 2, resource: { buffer: outBuf } }] });
  const w0 = performance.now();
  while (performance.now() - w0 < 500) { device.queue.submit([encodeRun(pipe, bg, w).finish()]); await device.queue.onSubmittedWorkDone(); }
}

const results = [];
console.log(`${'variant'.padEnd(16)} ${'ms'.padStart(9)} ${'rate'.padStart(20)}  ${'vs ref'.padStart(6)} ${'wall'.padStart(8)} ${'build'.padStart(7)}  chk   what`);
for (const v of chosen) {
  let r;
  try {
    r = await run(v);
  } catch (e) {
    console.log(`${v.name.padEnd(16)} FAILED: ${e.message}`);
    results.push({ name: v.name, error: String(e.message) });
    continue;
  }
  const ref = v.ref && results.find((x) => x.name === v.ref && x.ms);
  const vsRef = ref ? r.ms / ref.ms : null;
  let chkOk = '';
  if (r.chk !== null && ref && ref.chk !== null) chkOk = Math.abs(r.chk - ref.chk) <= 1e-3 * Math.abs(ref.chk) + 1e-6 ? 'ok' : 'DIFF';
  const rate = v.rate(r.ms);
  console.log(`${v.name.padEnd(16)} ${r.ms.toFixed(3).padStart(9)} ${rate.padStart(20)}  ${vsRef === null ? '     -' : vsRef.toFixed(2).padStart(6)}`
    + ` ${v.wallMs.toFixed(2).padStart(8)} ${r.compileMs.toFixed(0).padStart(6)}ms  ${chkOk.padEnd(4)}  ${v.what}`);
  results.push({ name: v.name, ms: r.ms, minMs: r.minMs, rate, vsRef, wallMs: v.wallMs, compileMs: r.compileMs, chk: r.chk, chkOk, ref: v.ref, what: v.what });
}
const summary = { runtime, adapter: adapterName, quick, scale, samples, method: hasTs ? 'timestamp' : 'wall', date: new Date().toISOString(), results };
console.log(`JSON ${JSON.stringify(summary)}`);
if (outFile) await writeText(outFile, JSON.stringify(summary, null, 1));
clearInterval(keepAlive);
device.destroy?.();
exit(0);
