// The source layout's rules (README, "Layout"): no import cycles among src/ modules (type-only imports
// count: a cycle of types still ties two modules' designs together), the lower layers never import
// the upper ones (serve/ above models/, models/ above formats/ and text/), and every WGSL file under
// shaders/ belongs to a program.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { PROGRAMS, SHADER_FILES } from '../../src/core/shaders';

const root = join(dirname(fileURLToPath(import.meta.url)), '../..');
const src = join(root, 'src');

function walk(dir: string, ext: string): string[] {
  return readdirSync(dir).flatMap((f) => {
    const p = join(dir, f);
    return statSync(p).isDirectory() ? walk(p, ext) : p.endsWith(ext) ? [p] : [];
  });
}

/** module (path under src, no extension) -> the src modules it imports (with `dynamic`, import() calls too). */
function importGraph(dynamic = false): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  const re = /(?:^|\n)\s*(?:import|export)\b[^'";]*?from\s*['"](\.{1,2}\/[^'"?]+)['"]/g;
  const dyn = /\bimport\s*\(\s*['"`](\.{1,2}\/[^'"`?]+)['"`]/g;
  for (const file of walk(src, '.ts')) {
    const mod = relative(src, file).replace(/\.ts$/, '');
    const text = readFileSync(file, 'utf8');
    const deps: string[] = [];
    for (const m of [...text.matchAll(re), ...(dynamic ? text.matchAll(dyn) : [])]) {
      const target = relative(src, normalize(join(dirname(file), m[1]))).replace(/\.(js|ts)$/, '');
      if (!target.startsWith('..')) deps.push(target);
    }
    graph.set(mod, deps);
  }
  return graph;
}

function findCycle(graph: Map<string, string[]>): string[] | null {
  const state = new Map<string, 'open' | 'done'>();
  const stack: string[] = [];
  const visit = (m: string): string[] | null => {
    if (state.get(m) === 'done') return null;
    if (state.get(m) === 'open') return [...stack.slice(stack.indexOf(m)), m];
    state.set(m, 'open');
    stack.push(m);
    for (const d of graph.get(m) ?? []) {
      const c = visit(d);
      if (c) return c;
    }
    stack.pop();
    state.set(m, 'done');
    return null;
  };
  for (const m of graph.keys()) {
    const c = visit(m);
    if (c) return c;
  }
  return null;
}

describe('source layout', () => {
  const graph = importGraph();

  it('has no import cycles in src/ (type-only imports included)', () => {
    expect(graph.size).toBeGreaterThan(10);
    const cycle = findCycle(graph);
    expect(cycle && cycle.join(' -> ')).toBeNull();
  });

  it('finds a cycle where there is one (the checker itself)', () => {
    expect(findCycle(new Map([['a', ['b']], ['b', ['c']], ['c', ['a']]]))).toEqual(['a', 'b', 'c', 'a']);
    expect(findCycle(new Map([['a', ['b']], ['b', []], ['c', ['a', 'b']]]))).toBeNull();
  });

  it('keeps the layers in order: core and reference import nothing above them; kernel families never import the engine', () => {
    const layer = (m: string) => m.split('/')[0];
    const allowed: Record<string, string[]> = {
      core: ['core'],
      reference: ['reference', 'core'],
      attention: ['attention', 'core', 'reference'],
      ops: ['ops', 'core', 'reference'],
      // Tokenizers and chat templates: what the models and the OpenAI surface both read.
      text: ['text', 'core'],
      // File formats and checkpoint sources: bytes to tensors and configs, knowing no model.
      formats: ['formats', 'core', 'reference'],
      // Images in: decoding, resizing and the image processors, up to the pixel tensor; no model.
      vision: ['vision', 'core', 'formats'],
      // Architectures, the forward pass behind the step contract, loading: no request, block or server.
      models: ['models', 'core', 'reference', 'attention', 'ops', 'text', 'formats', 'vision'],
      // The request engine, blocks, the OpenAI surface and the servers: above the models they serve.
      serve: ['serve', 'core', 'reference', 'attention', 'ops', 'text', 'formats', 'models', 'vision'],
    };
    // Programs over a whole model (the HTTP server, its command line, the worker host and its page
    // client) sit on top of everything, as an application would.
    const APPLICATIONS = new Set(['serve/http', 'serve/cli', 'serve/worker', 'serve/worker_client']);
    for (const [m, deps] of graph) {
      if (APPLICATIONS.has(m)) continue;
      const ok = allowed[layer(m)];
      if (!ok) continue;
      for (const d of deps) expect(ok.includes(layer(d)), `${m} imports ${d}`).toBe(true);
    }
  });

  it('never imports serve/ from models/: a model answers "run this step" and knows nothing of requests', () => {
    const up = [...importGraph(true)].flatMap(([m, deps]) => m.startsWith('models/') ? deps.filter((d) => d.startsWith('serve/')).map((d) => `${m} imports ${d}`) : []);
    expect([...graph.keys()].some((m) => m.startsWith('models/'))).toBe(true);
    expect(up).toEqual([]);
  });

  it('never imports models/ or serve/ from formats/: an architecture never learns which format its weights came from', () => {
    const up = [...importGraph(true)].flatMap(([m, deps]) => m.startsWith('formats/')
      ? deps.filter((d) => d.startsWith('models/') || d.startsWith('serve/')).map((d) => `${m} imports ${d}`) : []);
    expect([...graph.keys()].some((m) => m.startsWith('formats/'))).toBe(true);
    expect(up).toEqual([]);
  });

  it('assembles every shader file into a program, and every program from files that exist', () => {
    const used = new Set(Object.values(PROGRAMS).flat());
    const onDisk = walk(join(root, 'shaders'), '.wgsl').map((p) => relative(join(root, 'shaders'), p));
    // ops/quant/group.wgsl is the body of every group type's decoder file (core/shaders.ts writes them).
    const groupBody = [...used].some((f) => SHADER_FILES[f]?.endsWith(SHADER_FILES['ops/quant/group.wgsl']) && f !== 'ops/quant/group.wgsl');
    for (const f of onDisk) expect(used.has(f) || (f === 'ops/quant/group.wgsl' && groupBody), `${f} is in no program`).toBe(true);
    for (const f of used) expect(SHADER_FILES[f], `${f} missing`).toBeTypeOf('string');
  });
});
