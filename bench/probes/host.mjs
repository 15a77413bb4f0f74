// What the host pays to record GPU work (issue 27, "a host that keeps up"): one dispatch, and a whole
// decode step of a model. Runs in Node (the `webgpu` package), Deno (navigator.gpu) or a page (Chrome,
// Firefox: import this module and call run(navigator.gpu)) against the built dist/webinfer.js:
//   node bench/probes/host.mjs [--json=path] [--model=small|llama1b] [--steps=N]
//   deno run -A bench/probes/host.mjs ...
// Part 1, one dispatch: N dispatches of a trivial kernel in one compute pass, bind groups made before,
// timed on the host as (a) recording: setPipeline + setBindGroup + dispatchWorkgroups, (b) the submit:
// encoder.finish() + queue.submit(), where Dawn turns the pass into the backend's commands, and (c) the
// same with one 16-byte queue.writeBuffer per dispatch (a uniform rewritten per step). Reported in µs
// per dispatch, the median of 7 samples.
// Part 2, a model step: decode steps of a Llama of 16 layers (the 1B's layer count and dispatches; its
// widths with --model=llama1b, tiny ones by default so software adapters keep up), batch 1, as generate
// records them: the host's ms a step, the dispatches a step, and their quotient.
const isDeno = typeof Deno !== 'undefined';
const isNode = !isDeno && typeof process !== 'undefined' && !!process.versions?.node;

export async function run(gpu, o = {}) {
  const { createEngine, createRandomModel } = await import(o.dist ?? new URL('../../dist/webinfer.js', import.meta.url).href);
  const engine = await createEngine(gpu ? { gpu } : {});
  const rt = engine.runtime ?? engine;
  const device = engine.device;
  const out = { runtime: o.runtime, adapter: engine.adapter, dispatch: null, model: null };
  const median = (a) => [...a].sort((x, y) => x - y)[a.length >> 1];

  // ---- Part 1: one dispatch
  const module = device.createShaderModule({ code: `
    @group(0) @binding(0) var<storage, read_write> buf: array<u32>;
    @group(0) @binding(1) var<uniform> u: vec4<u32>;
    @compute @workgroup_size(32) fn main(@builtin(global_invocation_id) g: vec3<u32>) {
      if (g.x == 0u) { buf[u.x] = buf[u.x] + 1u; }
    }` });
  const pipes = [0, 1].map(() => device.createComputePipeline({ layout: 'auto', compute: { module, entryPoint: 'main' } }));
  const storage = device.createBuffer({ size: 1024, usage: GPUBufferUsage.STORAGE });
  const uniforms = Array.from({ length: 64 }, () => device.createBuffer({ size: 16, usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST }));
  const groups = pipes.map((p) => uniforms.map((ub) => device.createBindGroup({ layout: p.getBindGroupLayout(0), entries: [{ binding: 0, resource: { buffer: storage } }, { binding: 1, resource: { buffer: ub } }] })));
  const word = new Uint32Array(4);
  const N = o.dispatches ?? 1000;
  const once = (write, alternate) => {
    const t0 = performance.now();
    const enc = device.createCommandEncoder();
    const pass = enc.beginComputePass();
    for (let i = 0; i < N; i++) {
      const p = alternate ? i & 1 : 0;
      if (write) { word[0] = i & 255; device.queue.writeBuffer(uniforms[i & 63], 0, word); }
      pass.setPipeline(pipes[p]);
      pass.setBindGroup(0, groups[p][i & 63]);
      pass.dispatchWorkgroups(1);
    }
    pass.end();
    const t1 = performance.now();
    device.queue.submit([enc.finish()]);
    const t2 = performance.now();
    return { record: t1 - t0, submit: t2 - t1 };
  };
  const dispatch = {};
  for (const [name, write, alt] of [['same pipeline', false, false], ['alternating pipelines', false, true], ['with a 16-byte writeBuffer each', true, true]]) {
    const rec = [], sub = [];
    for (let s = 0; s < 9; s++) {
      const r = once(write, alt);
      await device.queue.onSubmittedWorkDone();
      if (s >= 2) { rec.push(r.record); sub.push(r.submit); }
    }
    dispatch[name] = { recordUs: 1000 * median(rec) / N, submitUs: 1000 * median(sub) / N, totalUs: 1000 * (median(rec) + median(sub)) / N };
  }
  out.dispatch = { dispatches: N, ...dispatch };
  for (const b of [storage, ...uniforms]) b.destroy();

  // ---- Part 2: a model's decode step
  const base = {
    architectures: ['LlamaForCausalLM'], hidden_size: 2048, intermediate_size: 8192, num_hidden_layers: 16,
    num_attention_heads: 32, num_key_value_heads: 8, head_dim: 64, vocab_size: 128256, rms_norm_eps: 1e-5,
    max_position_embeddings: 8192, tie_word_embeddings: true, rope_theta: 500000, bos_token_id: 1, eos_token_id: 2,
  };
  const cfg = o.model === 'llama1b' ? base
    : { ...base, hidden_size: 256, intermediate_size: 512, num_attention_heads: 8, num_key_value_heads: 2, head_dim: 32, vocab_size: 2048 };
  const model = await createRandomModel(engine, { config: cfg, dtype: engine.features.f16 ? 'f16' : 'f32', kvCache: { numBlocks: 64, blockSize: 16 } });
  try {
    const rows = [];
    for (const context of o.contexts ?? [64, 512]) {
      const p = await model.profileDecode({ batch: 1, context, steps: o.steps ?? 40, warmup: 5 });
      rows.push({ batch: 1, context, hostMs: p.hostMs, wallMs: p.wallMs, gpuMs: p.gpuMs, dispatches: p.dispatches, hostUsPerDispatch: 1000 * p.hostMs / p.dispatches });
    }
    out.model = { layers: cfg.num_hidden_layers, hidden: cfg.hidden_size, rows };
  } finally {
    model.destroy();
    engine.destroy();
  }
  return out;
}

function format(r) {
  const f = (x) => x.toFixed(2);
  const lines = [`# ${r.runtime}: ${[r.adapter.vendor, r.adapter.architecture, r.adapter.description].filter(Boolean).join(' / ')}`];
  lines.push(`one dispatch (${r.dispatch.dispatches} in a pass), µs: record | submit | total`);
  for (const [k, v] of Object.entries(r.dispatch)) if (typeof v === 'object') lines.push(`  ${k.padEnd(34)} ${f(v.recordUs)} | ${f(v.submitUs)} | ${f(v.totalUs)}`);
  lines.push(`decode step, ${r.model.layers} layers × hidden ${r.model.hidden}, batch 1:`);
  for (const m of r.model.rows) lines.push(`  context ${m.context}: host ${f(m.hostMs)} ms a step, ${m.dispatches} dispatches, ${f(m.hostUsPerDispatch)} µs each (wall ${f(m.wallMs)} ms${m.gpuMs != null ? `, GPU ${f(m.gpuMs)} ms` : ''})`);
  return lines.join('\n');
}

if (isDeno || isNode) {
  const argv = isDeno ? Deno.args : process.argv.slice(2);
  const arg = (k) => argv.find((a) => a.startsWith(`--${k}=`))?.slice(k.length + 3);
  let gpu;
  let runtime = 'deno';
  if (isNode) {
    const { create, globals } = await import('webgpu');
    Object.assign(globalThis, globals);
    gpu = create(['enable-dawn-features=allow_unsafe_apis,vulkan_enable_f16_on_nvidia', 'disable-dawn-features=timestamp_quantization']);
    runtime = `node ${process.version}`;
  } else {
    runtime = `deno ${Deno.version.deno}`;
  }
  const r = await run(gpu, { runtime, model: arg('model'), steps: arg('steps') ? Number(arg('steps')) : undefined });
  console.log(format(r));
  const json = arg('json');
  if (json) {
    const text = JSON.stringify(r, null, 1) + '\n';
    if (isDeno) Deno.writeTextFileSync(json, text);
    else (await import('node:fs')).writeFileSync(json, text);
  }
  if (isNode) process.exit(0);
}
export { format };
