// Compute pipelines built from the WGSL itself: wgsl_reflect reads each entry point's bindings and the
// layout of its uniform struct, so no binding table or uniform offset is kept by hand. Pipelines are
// cached by (shader, entry point, override constants).
import { WgslReflect, ResourceType, type VariableInfo, type FunctionInfo } from 'wgsl_reflect';
import { WebinferError } from './errors';

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
  module: GPUShaderModule | null;
}

export type OverrideConstants = Readonly<Record<string, number | boolean>>;

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

/** Formats WGSL compilation messages as `shader:line:col: type: message`. */
export function formatCompilationMessages(shader: string, messages: readonly GPUCompilationMessage[]): string {
  return messages
    .filter((m) => m.type === 'error' || m.type === 'warning')
    .map((m) => `${shader}:${m.lineNum}:${m.linePos}: ${m.type}: ${m.message}`)
    .join('\n');
}

export class PipelineCache {
  private readonly sources = new Map<string, string>();
  private readonly parsed = new Map<string, ParsedShader>();
  private readonly kernels = new Map<string, Kernel>();
  /** Number of pipelines compiled so far (the cache's misses). */
  compiled = 0;
  private checks = new Set<Promise<void>>();

  constructor(
    private readonly device: GPUDevice,
    sources: Readonly<Record<string, string>>,
    /** Receives asynchronous compile and validation failures; the engine rethrows them at sync. */
    private readonly onError: (e: Error) => void,
  ) {
    for (const [name, src] of Object.entries(sources)) this.sources.set(name, src);
  }

  /** Adds or replaces a shader source (used by tests and by generated variants). */
  register(name: string, source: string): void {
    this.sources.set(name, source);
    this.parsed.delete(name);
    for (const key of [...this.kernels.keys()]) if (key.startsWith(`${name}|`)) this.kernels.delete(key);
  }

  private parse(name: string): ParsedShader {
    let p = this.parsed.get(name);
    if (p) return p;
    const source = this.sources.get(name);
    if (source === undefined) throw new WebinferError(`unknown shader '${name}'`);
    let reflect: WgslReflect;
    try {
      reflect = new WgslReflect(source);
    } catch (e) {
      throw new WebinferError(`${name}: WGSL parse error: ${(e as Error).message ?? e}`);
    }
    p = { source, reflect, module: null };
    this.parsed.set(name, p);
    return p;
  }

  /** Names of the override constants a shader declares (for validating constant maps). */
  overrides(name: string): string[] {
    return this.parse(name).reflect.overrides.map((o) => o.name);
  }

  get(shader: string, entry: string, constants: OverrideConstants = {}): Kernel {
    const ckeys = Object.keys(constants).sort();
    const key = `${shader}|${entry}|${ckeys.map((k) => `${k}=${Number(constants[k])}`).join(',')}`;
    const hit = this.kernels.get(key);
    if (hit) return hit;

    const p = this.parse(shader);
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
    for (let g = 0; g <= maxGroup; g++) {
      groups.push(this.device.createBindGroupLayout({
        label: `${shader}:${entry}:g${g}`,
        entries: bindings.filter((b) => b.group === g).map((b) => ({
          binding: b.binding,
          visibility: GPUShaderStage.COMPUTE,
          buffer: { type: b.kind },
        })),
      }));
    }

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
        detail = formatCompilationMessages(shader, (await module.getCompilationInfo()).messages);
      } catch { /* the device may be gone; the scope's message still says enough */ }
      this.onError(new WebinferError(
        `pipeline ${shader}:${entry} failed to compile${detail ? `:\n${detail}` : ''}\n${err.message}`));
    }, () => { /* device lost: reported by the engine */ });
    this.checks.add(checked);
    void checked.finally(() => this.checks.delete(checked));

    const kernel: Kernel = { shader, entry, key, pipeline, groups, bindings, uniform };
    this.kernels.set(key, kernel);
    return kernel;
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
export function packUniform(layout: UniformLayout, values: Readonly<Record<string, number | readonly number[]>>, where: string): ArrayBuffer {
  const buf = new ArrayBuffer(layout.size);
  const dv = new DataView(buf);
  for (const [name, val] of Object.entries(values)) {
    const m = layout.members.get(name);
    if (!m) throw new WebinferError(`${where}: uniform ${layout.name} has no member '${name}'`);
    const arr = typeof val === 'number' ? [val] : val;
    if (arr.length > m.count) throw new WebinferError(`${where}: uniform member '${name}' holds ${m.count} values, got ${arr.length}`);
    for (let i = 0; i < arr.length; i++) {
      const off = m.offset + m.stride * i;
      if (m.type === 'f32') dv.setFloat32(off, arr[i], true);
      else if (m.type === 'i32') dv.setInt32(off, arr[i], true);
      else dv.setUint32(off, arr[i] >>> 0, true);
    }
  }
  return buf;
}
