// Compute pipelines built from the WGSL itself: wgsl_reflect reads each entry point's bindings and the
// layout of its uniform struct, so no binding table or uniform offset is kept by hand. Pipelines are
// cached by (shader, entry point, override constants).
import { WgslReflect, ResourceType, type VariableInfo, type FunctionInfo } from 'wgsl_reflect';
import { WebinferError } from './errors.js';
import { unrollConstLoops } from './unroll.js';

export type BindingKind = 'uniform' | 'read-only-storage' | 'storage';

export interface BindingInfo {
  readonly name: string;
  readonly group: number;
  readonly binding: number;
  readonly kind: BindingKind;
}

export interface UniformMember {
  readonly offset: number;
  readonly type: 'u32' | 'i32' | 'f32';
  readonly count: number;   // 1 for scalars, n for vecN / array<T, n>
  readonly stride: number;  // bytes between values: 4 in a vector, the array stride in an array
}

export interface UniformLayout {
  readonly name: string;
  readonly size: number;
  readonly members: ReadonlyMap<string, UniformMember>;
}

/** One compiled entry point with everything needed to bind and dispatch it. */
export interface Kernel {
  readonly shader: string;
  readonly entry: string;
  readonly key: string;
  readonly pipeline: GPUComputePipeline;
  readonly groups: readonly GPUBindGroupLayout[];
  readonly bindings: readonly BindingInfo[];
  readonly uniform: UniformLayout | null;
}

interface ParsedShader {
  readonly source: string;
  readonly reflect: WgslReflect;
  /** First line (1-based) of each file in the assembled source, for mapping compile errors back. */
  readonly lineMap: readonly { file: string; start: number }[];
  module: GPUShaderModule | null;
}

export type OverrideConstants = Readonly<Record<string, number | boolean>>;

/** How one pipeline specializes its program. */
export interface KernelSpec {
  /** WGSL `override` constants (pipeline constants: no recompilation of the module). */
  readonly overrides?: OverrideConstants;
  /** Values for module-scope `const` declarations, for what WGSL needs as const (array sizes); a
   *  string value replaces the type of a module-scope `alias` of that name (the element type of a tile). */
  readonly consts?: Readonly<Record<string, number | boolean | string>>;
  /** Extensions to enable (`f16`, `subgroups`), prepended as directives. */
  readonly enables?: readonly string[];
  /** Write constant-trip loops out (src/core/unroll.ts) for this kernel whatever the runtime's setting. */
  readonly unroll?: boolean;
}

function constLiteral(v: number | boolean, type: string | undefined): string {
  if (typeof v === 'boolean') return String(v);
  if (type === 'f32' || (!type && !Number.isInteger(v))) return `${Number.isInteger(v) ? `${v}.0` : v}`;
  if (type === 'i32') return `${v}i`;
  return `${v}u`;
}

/**
 * The source as wgsl_reflect can read it: its parser knows no subgroup-matrix types or templated
 * builtin calls (chromium_experimental_subgroup_matrix), which live only inside function bodies and
 * never change the bindings, uniforms or entry points it reports. Those become plain u32 and plain calls.
 */
export function reflectable(source: string): string {
  if (!source.includes('subgroup_matrix')) return source;
  return source
    .replace(/subgroup_matrix_(left|right|result)<[^<>]*>/g, 'u32')
    .replace(/\b(subgroupMatrix\w*)<[^<>()]*>\(/g, '$1(')
    .replace(/^\s*enable\s+chromium_experimental_subgroup_matrix\s*;/m, '')
    .replace(/@diagnostic\([^)]*\)/g, '');
}

/** Replaces `const NAME[: type] = ...;` (or, for a string, `alias NAME = ...;`) at module scope. */
export function specializeConsts(source: string, consts: Readonly<Record<string, number | boolean | string>>, where: string): string {
  let out = source;
  for (const [name, value] of Object.entries(consts)) {
    if (typeof value === 'string') {
      const ra = new RegExp(`^alias\\s+${name}\\s*=[^;]*;`, 'm');
      if (!ra.test(out)) throw new WebinferError(`${where}: no module-scope alias '${name}' to specialize`);
      if (!/^[\w<>, ]+$/.test(value)) throw new WebinferError(`${where}: alias '${name}': '${value}' is not a type`);
      out = out.replace(ra, `alias ${name} = ${value};`);
      continue;
    }
    const re = new RegExp(`^const\\s+${name}\\s*(?::\\s*(\\w+))?\\s*=[^;]*;`, 'm');
    const m = re.exec(out);
    if (!m) throw new WebinferError(`${where}: no module-scope const '${name}' to specialize`);
    out = out.replace(re, `const ${name}${m[1] ? `: ${m[1]}` : ''} = ${constLiteral(value, m[1])};`);
  }
  return out;
}

function scalarType(name: string): 'u32' | 'i32' | 'f32' | null {
  const base = name.replace(/^vec\d/, '').replace(/[<>]/g, '');
  if (base === 'u32' || base === 'u' || base === 'bool') return 'u32';
  if (base === 'i32' || base === 'i') return 'i32';
  if (base === 'f32' || base === 'f') return 'f32';
  return null;
}

function uniformLayout(v: VariableInfo, shader: string): UniformLayout {
  const members = new Map<string, UniformMember>();
  for (const m of v.members ?? []) {
    const tname = m.type.isArray ? (m.format?.name ?? '') : m.type.getTypeName();
    const type = scalarType(tname);
    if (!type) throw new WebinferError(`${shader}: uniform member '${m.name}' has unsupported type ${m.type.getTypeName()}`);
    const vecN = /^vec(\d)/.exec(m.type.getTypeName());
    const count = m.type.isArray ? m.count : vecN ? Number(vecN[1]) : 1;
    members.set(m.name, { offset: m.offset, type, count, stride: m.type.isArray ? m.stride : 4 });
  }
  return { name: v.name, size: Math.max(16, Math.ceil(v.size / 16) * 16), members };
}

function bindingKind(v: VariableInfo): BindingKind {
  if (v.resourceType === ResourceType.Uniform) return 'uniform';
  if (v.resourceType === ResourceType.Storage) return v.access === 'read' ? 'read-only-storage' : 'storage';
  throw new Error(`unsupported resource ${v.name}`);
}

/** Formats WGSL compilation messages as `file:line:col: type: message`, lines mapped to their file. */
export function formatCompilationMessages(shader: string, messages: readonly GPUCompilationMessage[],
                                          lineMap: readonly { file: string; start: number }[] = []): string {
  const locate = (line: number): string => {
    let hit: { file: string; start: number } | undefined;
    for (const p of lineMap) if (p.start <= line) hit = p;
    return hit ? `${hit.file}:${line - hit.start + 1}` : `${shader}:${line}`;
  };
  return messages
    .filter((m) => m.type === 'error' || m.type === 'warning')
    .map((m) => `${locate(m.lineNum)}:${m.linePos}: ${m.type}: ${m.message}`)
    .join('\n');
}

export class PipelineCache {
  private readonly files = new Map<string, string>();
  private readonly programs = new Map<string, readonly string[]>();
  private readonly parsed = new Map<string, ParsedShader>();
  private readonly kernels = new Map<string, Kernel>();
  private readonly fastKeys = new Map<string, Kernel>();
  /** Number of pipelines compiled so far (the cache's misses). */
  compiled = 0;
  /** Write constant-bound loops out before compiling (src/core/unroll.ts: for wgpu, whose loop bounding
   *  keeps NVIDIA's compiler from unrolling them). Part of every cache key. */
  unrollLoops = false;
  /** One layout object per distinct group descriptor: kernels whose groups look alike share them, so a
   *  bind group made for one (a cache's K/V, a plan's metadata) serves the others, and bind-group
   *  caches can key on the layout object. */
  private readonly layouts = new Map<string, GPUBindGroupLayout>();
  private checks = new Set<Promise<void>>();

  constructor(
    private readonly device: GPUDevice,
    files: Readonly<Record<string, string>>,
    programs: Readonly<Record<string, readonly string[]>>,
    /** Receives asynchronous compile and validation failures; the engine rethrows them at sync. */
    private readonly onError: (e: Error) => void,
  ) {
    for (const [name, src] of Object.entries(files)) this.files.set(name, src);
    for (const [name, parts] of Object.entries(programs)) this.programs.set(name, parts);
  }

  /** Adds or replaces a single-file program (used by tests). */
  register(name: string, source: string): void {
    this.files.set(name, source);
    this.programs.set(name, [name]);
    for (const k of [...this.parsed.keys()]) if (k.startsWith(`${name}|`)) this.parsed.delete(k);
    for (const k of [...this.kernels.keys()]) if (k.startsWith(`${name}|`)) this.kernels.delete(k);
    for (const k of [...this.fastKeys.keys()]) if (k.startsWith(`${name}|`)) this.fastKeys.delete(k);
  }

  private parse(program: string, consts: Readonly<Record<string, number | boolean | string>>, enables: readonly string[],
                unroll = this.unrollLoops): ParsedShader {
    const key = `${program}|${JSON.stringify(consts)}|${enables.join(',')}|${unroll ? 'unrolled' : ''}`;
    let p = this.parsed.get(key);
    if (p) return p;
    const parts = this.programs.get(program);
    if (!parts) throw new WebinferError(`unknown shader '${program}'`);
    const lineMap: { file: string; start: number }[] = [];
    let source = enables.map((e) => `enable ${e};\n`).join('');
    let line = enables.length + 1;
    for (const file of parts) {
      const text = this.files.get(file);
      if (text === undefined) throw new WebinferError(`${program}: missing shader file '${file}'`);
      lineMap.push({ file, start: line });
      const body = text.endsWith('\n') ? text : `${text}\n`;
      source += body;
      line += body.split('\n').length - 1;
    }
    source = specializeConsts(source, consts, program);
    // (Unrolled, the source's lines no longer match the files': compile errors then name the program's
    // line in this source, not the file's.)
    if (unroll) source = unrollConstLoops(source);
    let reflect: WgslReflect;
    try {
      reflect = new WgslReflect(reflectable(source));
    } catch (e) {
      throw new WebinferError(`${program}: WGSL parse error: ${(e as Error).message ?? e}`);
    }
    p = { source, reflect, lineMap: unroll ? [] : lineMap, module: null };
    this.parsed.set(key, p);
    return p;
  }

  /** The assembled WGSL of a program (for inspection and tests). */
  source(program: string, spec: KernelSpec = {}): string {
    return this.parse(program, spec.consts ?? {}, spec.enables ?? [], this.unrolls(spec)).source;
  }

  /** Whether a kernel's loops are written out: the cache's setting, or the kernel's own. */
  private unrolls(spec: KernelSpec): boolean {
    return this.unrollLoops || !!spec.unroll;
  }

  get(shader: string, entry: string, spec: KernelSpec = {}): Kernel {
    // A model step asks for ~200 kernels: first a key in the spec's own key order (no sorting, no
    // JSON), which a call site repeats exactly; then the canonical key, which equal specs share.
    const unroll = this.unrolls(spec);
    let fast = `${shader}|${entry}${unroll ? '|unrolled' : ''}`;
    for (const k in spec.overrides) fast += `|${k}=${Number(spec.overrides[k])}`;
    fast += '|';
    for (const k in spec.consts) fast += `|${k}=${spec.consts[k]}`;
    if (spec.enables) fast += `|${spec.enables.join(',')}`;
    const seen = this.fastKeys.get(fast);
    if (seen) return seen;
    const constants = spec.overrides ?? {};
    const consts = spec.consts ?? {};
    const enables = spec.enables ?? [];
    const ckeys = Object.keys(constants).sort();
    const key = `${shader}|${entry}|${ckeys.map((k) => `${k}=${Number(constants[k])}`).join(',')}|${JSON.stringify(consts)}|${enables.join(',')}${unroll ? '|unrolled' : ''}`;
    const hit = this.kernels.get(key);
    if (hit) {
      this.fastKeys.set(fast, hit);
      return hit;
    }

    const p = this.parse(shader, consts, enables, unroll);
    const fn: FunctionInfo | undefined = p.reflect.entry.compute.find((f) => f.name === entry);
    if (!fn) throw new WebinferError(`${shader}: no compute entry point '${entry}'`);
    const declared = new Set(p.reflect.overrides.map((o) => o.name));
    for (const k of ckeys) {
      if (!declared.has(k)) throw new WebinferError(`${shader}: unknown override constant '${k}'`);
    }

    const bindings: BindingInfo[] = fn.resources
      .filter((r) => r.resourceType === ResourceType.Uniform || r.resourceType === ResourceType.Storage)
      .map((r) => ({ name: r.name, group: r.group, binding: r.binding, kind: bindingKind(r) }))
      .sort((a, b) => a.group - b.group || a.binding - b.binding);
    const uniforms = fn.resources.filter((r) => r.resourceType === ResourceType.Uniform);
    if (uniforms.length > 1) throw new WebinferError(`${shader}:${entry}: at most one uniform struct per entry point`);
    const uniform = uniforms.length ? uniformLayout(uniforms[0], shader) : null;

    const maxGroup = bindings.reduce((m, b) => Math.max(m, b.group), -1);
    const groups: GPUBindGroupLayout[] = [];
    for (let g = 0; g <= maxGroup; g++) groups.push(this.groupLayout(bindings.filter((b) => b.group === g)));

    this.device.pushErrorScope('validation');
    if (!p.module) p.module = this.device.createShaderModule({ label: shader, code: p.source });
    const module = p.module;
    const pipeline = this.device.createComputePipeline({
      label: `${shader}:${entry}`,
      layout: this.device.createPipelineLayout({ bindGroupLayouts: groups }),
      compute: { module, entryPoint: entry, constants: Object.fromEntries(ckeys.map((k) => [k, Number(constants[k])])) },
    });
    this.compiled++;
    const checked = this.device.popErrorScope().then(async (err) => {
      if (!err) return;
      let detail = '';
      try {
        detail = formatCompilationMessages(shader, (await module.getCompilationInfo()).messages, p.lineMap);
      } catch { /* the device may be gone; the scope's message still says enough */ }
      this.onError(new WebinferError(
        `pipeline ${shader}:${entry} failed to compile${detail ? `:\n${detail}` : ''}\n${err.message}`));
    }, () => { /* device lost: reported by the engine */ });
    this.checks.add(checked);
    void checked.finally(() => this.checks.delete(checked));

    const kernel: Kernel = { shader, entry, key, pipeline, groups, bindings, uniform };
    this.kernels.set(key, kernel);
    this.fastKeys.set(fast, kernel);
    return kernel;
  }

  private groupLayout(bindings: readonly BindingInfo[]): GPUBindGroupLayout {
    const key = bindings.map((b) => `${b.binding}:${b.kind}`).join(',');
    let layout = this.layouts.get(key);
    if (!layout) {
      layout = this.device.createBindGroupLayout({
        label: `webinfer group [${key}]`,
        entries: bindings.map((b) => ({ binding: b.binding, visibility: GPUShaderStage.COMPUTE, buffer: { type: b.kind } })),
      });
      this.layouts.set(key, layout);
    }
    return layout;
  }

  /** Resolves once every pipeline created so far has been checked for compile errors. */
  async settled(): Promise<void> {
    await Promise.all([...this.checks]);
  }

  get size(): number {
    return this.kernels.size;
  }
}

/** Packs named values into a uniform buffer image using the reflected struct layout. */
export function packUniform(layout: UniformLayout, values: Readonly<Record<string, number | readonly number[]>>, where: string | (() => string),
                            into?: DataView): ArrayBuffer {
  const dv = into ?? new DataView(new ArrayBuffer(layout.size));
  if (into) for (let i = 0; i < layout.size; i += 4) dv.setUint32(i, 0);
  for (const name in values) {
    const val = values[name];
    const m = layout.members.get(name);
    if (!m) throw new WebinferError(`${typeof where === 'string' ? where : where()}: uniform ${layout.name} has no member '${name}'`);
    if (typeof val === 'number') {
      if (m.type === 'f32') dv.setFloat32(m.offset, val, true);
      else if (m.type === 'i32') dv.setInt32(m.offset, val, true);
      else dv.setUint32(m.offset, val >>> 0, true);
      continue;
    }
    if (val.length > m.count) throw new WebinferError(`${typeof where === 'string' ? where : where()}: uniform member '${name}' holds ${m.count} values, got ${val.length}`);
    for (let i = 0; i < val.length; i++) {
      const off = m.offset + m.stride * i;
      if (m.type === 'f32') dv.setFloat32(off, val[i], true);
      else if (m.type === 'i32') dv.setInt32(off, val[i], true);
      else dv.setUint32(off, val[i] >>> 0, true);
    }
  }
  return dv.buffer as ArrayBuffer;
}
