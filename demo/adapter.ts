// Finding WebGPU and describing the adapter: what it is, what it offers, what a missing feature costs.
import { createEngine, type Engine } from 'webinfer';
import { bytes, el } from './ui';

export interface AdapterReport {
  vendor: string;
  architecture: string;
  device: string;
  description: string;
  /** A CPU implementation (SwiftShader, llvmpipe/lavapipe, or the browser says it is a fallback). */
  software: boolean;
  /** Every feature the adapter lists (the engine requests the ones it uses). */
  adapterFeatures: string[];
}

export type Startup =
  | { ok: true; engine: Engine; report: AdapterReport }
  | { ok: false; reason: string };

/** Finds WebGPU and creates the engine, or says plainly why it cannot. */
export async function start(onWarning: (m: string) => void): Promise<Startup> {
  const gpu = (navigator as Navigator & { gpu?: GPU }).gpu;
  if (!gpu) {
    const insecure = !window.isSecureContext;
    return {
      ok: false,
      reason: insecure
        ? 'WebGPU needs a secure context: open this page over https:// or from http://localhost, not from a plain http:// address.'
        : 'This browser does not offer WebGPU (navigator.gpu is missing). Chrome and Edge have it from version 113 on macOS, Windows '
          + 'and ChromeOS; Safari has it from Safari 26 (on older Safari, turn on "WebGPU" under Develop → Feature Flags); Firefox from '
          + 'version 141 on Windows. Nothing on this page can run without it.',
    };
  }
  let adapter: GPUAdapter | null;
  try {
    adapter = await gpu.requestAdapter({ powerPreference: 'high-performance' });
  } catch (e) {
    return { ok: false, reason: `navigator.gpu.requestAdapter() failed: ${(e as Error).message ?? e}` };
  }
  if (!adapter) {
    return {
      ok: false,
      reason: 'WebGPU is present but gave no adapter (requestAdapter() returned null): the GPU may be blocklisted or the GPU '
        + 'process crashed. In Chrome see chrome://gpu; try a restart, or enable "Override software rendering list".',
    };
  }
  // adapter.info is recent (older Safari and Chrome lack it): describe what there is.
  const info = ((adapter as { info?: GPUAdapterInfo }).info ?? { vendor: '', architecture: '', device: '', description: '' }) as GPUAdapterInfo;
  const legacyFallback = (adapter as GPUAdapter & { isFallbackAdapter?: boolean }).isFallbackAdapter;
  let engine: Engine;
  try {
    engine = await createEngine({ powerPreference: 'high-performance', onWarning });
  } catch (e) {
    return { ok: false, reason: `the adapter was found but createEngine failed: ${(e as Error).message ?? e}` };
  }
  const report: AdapterReport = {
    vendor: info.vendor, architecture: info.architecture, device: info.device, description: info.description,
    // The engine's own judgement (info.isFallbackAdapter or a software adapter's name), and older
    // browsers' adapter.isFallbackAdapter.
    software: engine.adapter.software || !!legacyFallback,
    adapterFeatures: [...adapter.features].map(String).sort(),
  };
  return { ok: true, engine, report };
}

interface FeatureLine { name: string; on: boolean; detail: string; cost: string }

function featureLines(engine: Engine): FeatureLine[] {
  const f = engine.features;
  const sg = f.subgroupMinSize === f.subgroupMaxSize ? `${f.subgroupMinSize ?? '?'}` : `${f.subgroupMinSize ?? '?'}–${f.subgroupMaxSize ?? '?'}`;
  return [
    {
      name: 'shader-f16', on: f.f16, detail: f.f16 ? 'f16 arithmetic in shaders' : 'absent',
      cost: f.f16 ? 'f16 data is staged as f16 tiles in workgroup memory: larger tiles fit.'
        : 'f16 and bf16 data still work (loaded through unpack2x16float), but tiles are staged as f32: smaller tiles, more passes over K/V. (SwiftShader, in Chromium or Firefox, offers none.)',
    },
    {
      name: 'subgroups', on: f.subgroups, detail: f.subgroups ? `subgroup size ${sg}` : 'absent',
      cost: f.subgroups ? 'the flash kernel reduces row maxima and sums with subgroup operations.'
        : 'the portable flash and paged-decode kernels run instead (reductions through workgroup memory and barriers): same results, somewhat slower. Firefox and Deno (wgpu) offer no subgroups yet.',
    },
    {
      name: 'subgroup-matrix', on: f.subgroupMatrix.length > 0,
      detail: f.subgroupMatrix.length ? f.subgroupMatrix.filter((c) => c.componentType === 'f16').map((c) => `${c.componentType}→${c.resultComponentType} ${c.M}×${c.N}×${c.K}`).join(', ') || 'no f16 configuration' : 'absent',
      cost: f.subgroupMatrix.length ? 'f16 attention runs the flash tile built on them (f32 attention without the LSE too, each value split into two f16 halves), and MLA decode (f16, bf16 and fp8_ds_mla latent rows) and paged decode of 16-bit queries over f16/bf16 caches a matrix tile of their own (the tensor units: several times the scalar tiles).'
        : 'f16 attention runs the scalar flash tile and MLA decode its FMA tile. Chrome offers chromium-experimental-subgroup-matrix with --enable-unsafe-webgpu (on Apple M-series GPUs, for one); Firefox offers none.',
    },
    {
      name: 'timestamp-query', on: f.timestampQuery, detail: f.timestampQuery ? 'GPU timestamps' : 'absent',
      cost: f.timestampQuery ? 'the benchmark times kernels on the GPU clock.'
        : 'the benchmark times with the wall clock around a drained queue: submission overhead is included, small shapes look slower.',
    },
  ];
}

/** Fills the adapter panel. */
export function renderAdapter(root: HTMLElement, engine: Engine, report: AdapterReport): void {
  root.replaceChildren();
  const name = [report.vendor, report.architecture].filter(Boolean).join(' / ') || 'unnamed adapter';
  const facts = el('dl', { class: 'facts' });
  const fact = (k: string, v: string) => facts.append(el('dt', {}, k), el('dd', {}, v || '–'));
  fact('vendor', report.vendor);
  fact('architecture', report.architecture);
  if (report.device) fact('device', report.device);
  if (report.description) fact('description', report.description);
  fact('kind', report.software ? 'software (runs on the CPU)' : 'hardware GPU');
  root.append(el('h3', { id: 'adapter-name' }, name), facts);
  if (report.software) {
    root.append(el('p', { class: 'message warn' },
      'This is a software adapter: everything runs on the CPU, shader compiles take up to a second each, and the numbers say nothing '
      + 'about a GPU. The benchmark defaults to its quick shapes here.'));
  }

  const ft = el('table', { class: 'features', id: 'features' },
    el('thead', {}, el('tr', {}, el('th', {}, 'feature'), el('th', {}, 'here'), el('th', {}, 'what it means for webinfer'))));
  const body = el('tbody');
  for (const l of featureLines(engine)) {
    body.append(el('tr', { 'data-feature': l.name },
      el('td', {}, el('code', {}, l.name)),
      el('td', { class: l.on ? 'pass' : 'absent' }, l.on ? `yes — ${l.detail}` : 'no'),
      el('td', {}, l.cost)));
  }
  ft.append(body);
  root.append(el('h4', {}, 'Features'), el('div', { class: 'table-wrap' }, ft));

  const lim = engine.limits;
  const lt = el('table', { class: 'limits', id: 'limits' },
    el('thead', {}, el('tr', {}, el('th', {}, 'limit'), el('th', {}, 'value'), el('th', {}, 'why it matters'))));
  const lb = el('tbody');
  const row = (n: string, v: string, why: string) => lb.append(el('tr', {}, el('td', {}, el('code', {}, n)), el('td', { class: 'num' }, v), el('td', {}, why)));
  row('maxComputeWorkgroupStorageSize', bytes(lim.maxComputeWorkgroupStorageSize),
    lim.maxComputeWorkgroupStorageSize < 32768 ? 'below 32 KiB: the flash kernel plans smaller tiles' : 'sets the flash kernel\'s tile sizes');
  row('maxStorageBufferBindingSize', bytes(lim.maxStorageBufferBindingSize), 'the largest K/V cache one kernel can bind');
  row('maxBufferSize', bytes(lim.maxBufferSize), 'the largest tensor');
  row('maxComputeInvocationsPerWorkgroup', String(lim.maxComputeInvocationsPerWorkgroup), 'threads per workgroup');
  row('maxStorageBuffersPerShaderStage', String(lim.maxStorageBuffersPerShaderStage), 'buffers one kernel binds');
  lt.append(lb);
  root.append(el('h4', {}, 'Limits (the adapter\'s own, requested by the engine)'), el('div', { class: 'table-wrap' }, lt));

  const extra = report.adapterFeatures.filter((f) => !['shader-f16', 'subgroups', 'timestamp-query', 'chromium-experimental-subgroup-matrix'].includes(f));
  if (extra.length) root.append(el('p', { class: 'small' }, `Other adapter features: ${extra.join(', ')}.`));
}
