// Compute pipelines built from the WGSL itself: wgsl_reflect reads each entry point's bindings and the
// layout of its uniform struct, so no binding table or uniform offset is kept by hand. Pipelines are
// cached by (shader, entry point, override constants).
//
// get() compiles synchronously (a step is recorded synchronously), and the JS event loop waits for the
// driver meanwhile: minutes of a first request on a software adapter. prepare() and a trace
// (deferCompiles, then compileDeferred) compile with createComputePipelineAsync instead, for a warm-up
// (src/serve/warmup.ts) to have every pipeline before requests come, with the event loop running.
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

/** A kernel as get() and prepare() take it. */
export interface KernelRequest {
  readonly shader: string;
  readonly entry: string;
  readonly spec?: KernelSpec;
}

/** A kernel resolved up to its pipeline. */
interface Described {
  readonly key: string;
  readonly kernel: Omit<Kernel, 'pipeline'>;
  readonly parsed: ParsedShader;
  readonly constants: Record<string, number>;
}

/** Resolves on a later turn of the event loop, after its timers and I/O (setImmediate in Node). */
function nextTurn(): Promise<void> {
  const g = globalThis as { setImmediate?: (f: () => void) => void };
  return new Promise((resolve) => (g.setImmediate ? g.setImmediate(resolve) : setTimeout(resolve, 0)));
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
  /** Called before prepare() and a trace so that the settings above follow their owner's (the Runtime
   *  sets them from its tuning at each kernel request, and here). */
  onSettings: (() => void) | null = null;
  /** One layout object per distinct group descriptor: kernels whose groups look alike share them, so a
   *  bind group made for one (a cache's K/V, a plan's metadata) serves the others, and bind-group
   *  caches can key on the layout object. */
  private readonly layouts = new Map<string, GPUBindGroupLayout>();
  private checks = new Set<Promise<void>>();
  /** The trace's kernels (deferCompiles), holding stand-in pipelines until compileDeferred. */
  private deferred: Map<string, { kernel: Kernel; d: Described }> | null = null;
  private readonly standIns = new Map<string, GPUComputePipeline>();
  private readonly layoutIds = new Map<GPUBindGroupLayout, number>();
  private standInModule: GPUShaderModule | null = null;
  /** Every kernel get() handed out, as asked for (requests()). */
  private readonly asked: KernelRequest[] = [];

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
    if (this.deferred) for (const k of [...this.deferred.keys()]) if (k.startsWith(`${name}|`)) this.deferred.delete(k);
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
    const hit = this.kernels.get(this.keyOf(shader, entry, spec));
    if (hit) {
      this.fastKeys.set(fast, hit);
      return hit;
    }
    const d = this.describe(shader, entry, spec);
    let kernel: Kernel;
    if (this.deferred) {
      kernel = { ...d.kernel, pipeline: this.standIn(d.kernel.groups) };
      this.deferred.set(d.key, { kernel, d });
    } else {
      kernel = { ...d.kernel, pipeline: this.compileSync(d) };
    }
    this.kernels.set(d.key, kernel);
    this.fastKeys.set(fast, kernel);
    this.asked.push({ shader, entry, spec: { ...spec, unroll } });
    return kernel;
  }

  /** The canonical cache key, which equal specs share. */
  private keyOf(shader: string, entry: string, spec: KernelSpec): string {
    const constants = spec.overrides ?? {};
    const ckeys = Object.keys(constants).sort();
    return `${shader}|${entry}|${ckeys.map((k) => `${k}=${Number(constants[k])}`).join(',')}|${JSON.stringify(spec.consts ?? {})}|${(spec.enables ?? []).join(',')}${this.unrolls(spec) ? '|unrolled' : ''}`;
  }

  /** Everything of a kernel but its pipeline: parsed, reflected and checked, nothing compiled. */
  private describe(shader: string, entry: string, spec: KernelSpec): Described {
    const unroll = this.unrolls(spec);
    const constants = spec.overrides ?? {};
    const consts = spec.consts ?? {};
    const enables = spec.enables ?? [];
    const ckeys = Object.keys(constants).sort();
    const key = this.keyOf(shader, entry, spec);
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
    const kernel = { shader, entry, key, groups, bindings, uniform };
    return { key, kernel, parsed: p, constants: Object.fromEntries(ckeys.map((k) => [k, Number(constants[k])])) };
  }

  /** The pipeline's descriptor, its shader module created on first use (inside the caller's error scope). */
  private descriptor(d: Described): GPUComputePipelineDescriptor {
    const p = d.parsed;
    if (!p.module) p.module = this.device.createShaderModule({ label: d.kernel.shader, code: p.source });
    return {
      label: `${d.kernel.shader}:${d.kernel.entry}`,
      layout: this.device.createPipelineLayout({ bindGroupLayouts: d.kernel.groups }),
      compute: { module: p.module, entryPoint: d.kernel.entry, constants: d.constants },
    };
  }

  /** The compile failure of a kernel as users read it: the WGSL messages mapped to their files. */
  private async failure(d: Described, message: string): Promise<WebinferError> {
    let detail = '';
    try {
      if (d.parsed.module) detail = formatCompilationMessages(d.kernel.shader, (await d.parsed.module.getCompilationInfo()).messages, d.parsed.lineMap);
    } catch { /* the device may be gone; the message still says enough */ }
    return new WebinferError(`pipeline ${d.kernel.shader}:${d.kernel.entry} failed to compile${detail ? `:\n${detail}` : ''}\n${message}`);
  }

  /** Compiles on the calling thread (the JS event loop waits for the driver); errors reach onError. */
  private compileSync(d: Described): GPUComputePipeline {
    this.device.pushErrorScope('validation');
    const pipeline = this.device.createComputePipeline(this.descriptor(d));
    this.compiled++;
    const checked = this.device.popErrorScope().then(async (err) => {
      if (err) this.onError(await this.failure(d, err.message));
    }, () => { /* device lost: reported by the engine */ });
    this.checks.add(checked);
    void checked.finally(() => this.checks.delete(checked));
    return pipeline;
  }

  /**
   * Compiles with createComputePipelineAsync: the driver's compile runs off the JS thread where the
   * runtime does so (dawn.node: Dawn's worker pool). Parsing the WGSL into its module (the first kernel
   * of a module) stays on the calling thread, so the kernels start one per turn of the event loop,
   * each compiling while the next starts. Failures have the same message as a synchronous compile's.
   */
  private async compileAll(list: readonly Described[], done: (d: Described, pipeline: GPUComputePipeline) => void,
                           failed?: (d: Described, e: Error) => void): Promise<PromiseSettledResult<void>[]> {
    const running: Promise<void>[] = [];
    for (const d of list) {
      if (running.length) await nextTurn();
      this.device.pushErrorScope('validation');
      let desc: GPUComputePipelineDescriptor;
      try {
        desc = this.descriptor(d);
      } finally {
        // A module that fails to parse is an error here and again as the pipeline's rejection: one report.
        void this.device.popErrorScope().catch(() => undefined);
      }
      running.push(this.device.createComputePipelineAsync(desc).then((pipeline) => {
        this.compiled++;
        done(d, pipeline);
      }, async (e: unknown) => {
        const err = await this.failure(d, (e as Error)?.message ?? String(e));
        failed?.(d, err);
        throw err;
      }));
    }
    return Promise.allSettled(running);
  }

  /** Whether the device can compile asynchronously (every current runtime; a test double may not). */
  get canCompileAsync(): boolean {
    return typeof (this.device as Partial<GPUDevice>).createComputePipelineAsync === 'function';
  }

  /**
   * Compiles the kernels not cached yet, all at once, with createComputePipelineAsync, so the JS event
   * loop keeps running meanwhile; a later get() of the same (shader, entry, spec) finds them. `spec.unroll`
   * as get()'s (requests() hands back what a run needed, to prepare a later one). Resolves with how many
   * it compiled; rejects with the first failure's WGSL messages (the others still land in the cache).
   */
  async prepare(kernels: readonly KernelRequest[]): Promise<number> {
    this.onSettings?.();
    const todo = new Map<string, Described>();
    for (const r of kernels) {
      const key = this.keyOf(r.shader, r.entry, r.spec ?? {});
      if (!this.kernels.has(key) && !todo.has(key)) todo.set(key, this.describe(r.shader, r.entry, r.spec ?? {}));
    }
    const results = await this.compileAll([...todo.values()], (d, pipeline) => {
      // A get() meanwhile compiled it synchronously: keep the object call sites already hold.
      if (!this.kernels.has(d.key)) this.kernels.set(d.key, { ...d.kernel, pipeline });
    });
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
    return todo.size;
  }

  /**
   * Starts a trace: until compileDeferred(), a kernel get() has not compiled is handed out at once with
   * a stand-in pipeline (an empty entry point over the same bind group layouts: dispatching it computes
   * nothing, so what the traced work writes is garbage), and noted. A warm-up runs its requests under a
   * trace to learn which kernels they need without waiting for any compile.
   */
  deferCompiles(): void {
    this.onSettings?.();
    this.deferred ??= new Map();
  }

  /** Whether a trace (deferCompiles) is running. */
  get deferring(): boolean {
    return this.deferred !== null;
  }

  /** Kernels the running trace handed out with stand-ins: what compileDeferred() will compile. */
  get pendingCompiles(): number {
    return this.deferred?.size ?? 0;
  }

  /**
   * Ends the trace: compiles every kernel handed out with a stand-in, all at once with
   * createComputePipelineAsync, and puts each real pipeline in its kernel object (recorded step graphs
   * hold those objects and dispatch what they hold). Resolves with how many it compiled. A kernel that
   * fails to compile leaves the cache (its next get() compiles, and fails, synchronously) and its error
   * goes to onError as well, so a step that already holds its stand-in fails at the engine's next sync.
   */
  async compileDeferred(): Promise<number> {
    const deferred = this.deferred;
    this.deferred = null;
    if (!deferred) return 0;
    const kernels = new Map([...deferred.values()].map(({ kernel, d }) => [d, kernel]));
    const results = await this.compileAll([...kernels.keys()], (d, pipeline) => {
      (kernels.get(d) as { pipeline: GPUComputePipeline }).pipeline = pipeline;
    }, (d, e) => {
      this.forget(d.key);
      this.onError(e);
    });
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
    return deferred.size;
  }

  /** The kernels get() has handed out, in order, as prepare() takes them. */
  requests(): KernelRequest[] {
    return this.asked.map((r) => ({ shader: r.shader, entry: r.entry, spec: r.spec }));
  }

  private forget(key: string): void {
    this.kernels.delete(key);
    for (const [k, v] of this.fastKeys) if (v.key === key) this.fastKeys.delete(k);
  }

  /** One empty pipeline per set of bind group layouts: what a traced dispatch binds to. */
  private standIn(groups: readonly GPUBindGroupLayout[]): GPUComputePipeline {
    let ids = '';
    for (const g of groups) {
      let id = this.layoutIds.get(g);
      if (id === undefined) this.layoutIds.set(g, id = this.layoutIds.size);
      ids += `${id},`;
    }
    let p = this.standIns.get(ids);
    if (!p) {
      this.standInModule ??= this.device.createShaderModule({ label: 'webinfer stand-in', code: '@compute @workgroup_size(1) fn main() {}' });
      p = this.device.createComputePipeline({
        label: 'webinfer stand-in (a trace: computes nothing)',
        layout: this.device.createPipelineLayout({ bindGroupLayouts: [...groups] }),
        compute: { module: this.standInModule, entryPoint: 'main' },
      });
      this.standIns.set(ids, p);
    }
    return p;
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
