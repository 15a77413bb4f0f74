// Faults and bad input on the loading side (issue 29's list, each found trying the API as a hostile
// user would): a KV cache no device can hold, a GPU allocation that fails mid-load, token ids that
// wrap or convert, NaN and ±Inf weights, files left open, misspelt options. Each is refused with a
// named error before anything is taken, or after everything taken is released, and the engine serves
// the golden afterwards.
import { BufferPool, createRandomModel, loadGGUF, loadSafetensors, type Engine, type Model, type SafetensorsFile } from '../../src/index';
import { assert, defineCases, equalArrays, expectThrows, type CaseContext } from './harness';

interface Golden { config: Record<string, unknown>; weights: Uint8Array; prompts: number[][]; greedy: number[][] }

const text = (b: Uint8Array) => new TextDecoder().decode(b);
let llama: Promise<Golden> | null = null;

/** The llama-gqa golden (f32 weights, vocab 256, 2 layers of 2 KV heads of 16). */
function golden(ctx: CaseContext): Promise<Golden> {
  llama ??= (async () => {
    const g = JSON.parse(text(await ctx.fixture('goldens/llama-gqa/golden.json'))) as { prompts: number[][]; greedy: number[][] };
    return {
      config: JSON.parse(text(await ctx.fixture('goldens/llama-gqa/config.json'))),
      weights: await ctx.fixture('goldens/llama-gqa/model.safetensors'),
      prompts: g.prompts,
      greedy: g.greedy,
    };
  })();
  return llama;
}

/** Buffers created and bytes handed out by the engine: unchanged by a call refused before it takes anything. */
function taken(engine: Engine): string {
  return `${engine.counters.createBuffer} buffers created, ${engine.pool.stats.acquiredBytes} bytes acquired`;
}

async function refusedBeforeTaking(engine: Engine, fn: () => unknown, ...fragments: string[]): Promise<void> {
  const before = taken(engine);
  await expectThrows(fn, ...fragments);
  assert(taken(engine) === before, `refused, yet ${taken(engine)} (before: ${before}): ${fragments[0]}`);
}

/**
 * Runs a load that must fail after taking GPU memory, and checks that every buffer it made is back in
 * the pool, free (the weights of a layer read partway included).
 */
async function failsReleasingAll(engine: Engine, load: () => Promise<unknown>, ...fragments: string[]): Promise<void> {
  const device = engine.device, create = device.createBuffer;
  const made: GPUBuffer[] = [];
  engine.pool.trim();   // every buffer of the load made anew
  device.createBuffer = function (d: GPUBufferDescriptor): GPUBuffer {
    const b = create.call(device, d);
    made.push(b);
    return b;
  };
  try {
    await expectThrows(load, ...fragments);
  } finally {
    device.createBuffer = create;
  }
  engine.flush();   // released buffers become free once the recorded work is submitted
  const taken = made.filter((b) => !engine.pool.take(b) || (engine.pool.release(b), false));
  assert(made.length > 0 && taken.length === 0, `${taken.length} of the ${made.length} buffers the failed load made are still taken`);
}

async function greedyIsGolden(model: Model, g: Golden, what: string): Promise<void> {
  const got = await model.generate(g.prompts, { maxNewTokens: 8, stopTokens: [] });
  got.forEach((seq, i) => equalArrays(`${what}: prompt ${i}`, seq, g.greedy[i]));
}

/** A copy of the golden's checkpoint with `edit` applied to one tensor's f32 values. */
async function editedWeights(g: Golden, tensor: string, edit: (values: DataView) => void): Promise<SafetensorsFile> {
  const copy = new Uint8Array(g.weights);
  const view = await (await loadSafetensors(copy)).bytes(tensor);   // in-memory sources hand out views of the copy
  edit(new DataView(view.buffer, view.byteOffset, view.byteLength));
  return loadSafetensors(copy);
}

export const faultCases = defineCases('faults', [
  {
    name: 'loadModel and createRandomModel refuse misspelt options and wrong types (did you mean ...) before taking anything',
    async run(ctx) {
      const g = await golden(ctx);
      const e = ctx.engine;
      const weights = await loadSafetensors(g.weights);
      await refusedBeforeTaking(e, () => e.loadModel({ config: g.config, weights, maxTokens: 64 } as never),
        "loadModel: o: expected only the options config, weights, dtype, kvCache,", "got 'maxTokens' (did you mean 'maxTokensPerStep'?)");
      await refusedBeforeTaking(e, () => e.loadModel({ config: g.config, weights, kvCache: { numblocks: 8 } } as never),
        "loadModel: o.kvCache: expected only the options numBlocks, blockSize, dtype, got 'numblocks' (did you mean 'numBlocks'?)");
      await refusedBeforeTaking(e, () => e.loadModel({ config: g.config, weights, kvCache: [] as never }), 'loadModel: o.kvCache: expected { numBlocks?, blockSize?, dtype? }');
      await refusedBeforeTaking(e, () => e.loadModel({ config: g.config, weights, allowNonFinite: 'yes' as never }), "loadModel: o.allowNonFinite: expected a boolean, got 'yes'");
      await refusedBeforeTaking(e, () => e.loadModel({ config: g.config, weights, maxTokensPerStep: '512' as never }), 'loadModel: o.maxTokensPerStep: expected a positive integer, got 512');
      await refusedBeforeTaking(e, () => createRandomModel(e, { config: g.config, seeed: 3 } as never),
        "createRandomModel: o: expected only the options config, dtype, seed, kvCache, maxTokensPerStep, maxSeqsPerStep, got 'seeed' (did you mean 'seed'?)");
      await refusedBeforeTaking(e, () => createRandomModel(e, { config: g.config, seed: -1 }), 'createRandomModel: o.seed: expected an integer in [0, 2^32), got -1');
      await refusedBeforeTaking(e, () => createRandomModel(e, { config: g.config, kvCache: { blockSize: 0 } }), 'createRandomModel: o.kvCache.blockSize: expected a positive integer, got 0');
      await refusedBeforeTaking(e, () => createRandomModel(e, { config: g.config, kvCache: 5 as never }), 'createRandomModel: o.kvCache: expected { numBlocks?, blockSize?, dtype? }, got 5');
      await refusedBeforeTaking(e, () => createRandomModel(e, { config: g.config, maxSeqsPerStep: 2.5 }), 'createRandomModel: o.maxSeqsPerStep: expected a positive integer, got 2.5');
    },
  },
  {
    name: 'a KV cache the device cannot hold is refused before anything is taken, with the most blocks that fit (kvCache: { numBlocks: 1e9 })',
    async run(ctx) {
      const g = await golden(ctx);
      const e = ctx.engine;
      // Slots are i32: at most (2^31 − 1) / 16 blocks of 16.
      await refusedBeforeTaking(e, async () => e.loadModel({ config: g.config, weights: await loadSafetensors(g.weights), kvCache: { numBlocks: 1e9 } }),
        'loadModel: o.kvCache.numBlocks: expected at most 134217727 blocks (cache slots are i32: blocks × blockSize 16 below 2^31), got 1000000000');
      await refusedBeforeTaking(e, () => createRandomModel(e, { config: g.config, dtype: 'f32', kvCache: { numBlocks: 1e9, blockSize: 4 } }),
        'createRandomModel: o.kvCache.numBlocks: expected at most 536870911 blocks (cache slots are i32: blocks × blockSize 4 below 2^31), got 1000000000');
      // Within the slots, past memory: a software adapter's buffers are the host's memory, which Node and
      // Deno can tell (WebGPU tells nothing of a GPU's: there a failed allocation is caught, next case).
      const memory = await e.memoryBytes();
      if (memory === null) {
        ctx.note(`the device's memory is not known here (${e.adapter.software ? 'a software adapter in a page' : 'a GPU'}): the memory bound is checked where it is`);
        return;
      }
      const perBlock = 2 * 2 * 2 * 16 * 16 * 4;   // layers × (K, V) × KV heads × block × head size × f32
      const most = Math.floor(memory / perBlock);
      await refusedBeforeTaking(e, async () => e.loadModel({ config: g.config, weights: await loadSafetensors(g.weights), kvCache: { numBlocks: 134217727 } }),
        `loadModel: o.kvCache.numBlocks: expected at most ${most} blocks (a software adapter keeps the cache in the host's memory`, `a block of 16 tokens takes ${perBlock} bytes over 2 layers), got 134217727`);
    },
  },
  {
    name: 'a GPU allocation that fails while loading is a named error, every buffer the load made is destroyed, and the engine then loads and serves the golden',
    async run(ctx) {
      const g = await golden(ctx);
      const e = ctx.engine;
      {
        const device = e.device;
        const create = device.createBuffer;
        const made: { destroyed: boolean }[] = [];
        let fail: ((d: GPUBufferDescriptor) => boolean) | null = null;
        // The allocation `fail` picks comes back invalid, as one the device could not make (of its size,
        // with no usage: a validation error where running out would be an out-of-memory one, the same
        // scopes' path); every buffer made is watched for its destroy().
        device.createBuffer = function (d: GPUBufferDescriptor): GPUBuffer {
          const bad = fail?.(d) ?? false;
          if (bad) fail = null;
          const b = create.call(device, bad ? { ...d, usage: 0 } : d);
          const rec = { destroyed: false };
          const destroy = b.destroy.bind(b);
          b.destroy = () => { rec.destroyed = true; destroy(); };
          made.push(rec);
          return b;
        };
        try {
          // One in the weights (the fused gate|up projection, 256 KiB, the first past 200 KB), one in the
          // cache (300 blocks of 2 KiB a part: the step buffers come after it).
          const cachePart = BufferPool.sizeClass(300 * 2 * 16 * 16 * 4);
          for (const [where, pick] of [['weights', (d: GPUBufferDescriptor) => d.size >= 200_000], ['cache', (d: GPUBufferDescriptor) => d.size === cachePart]] as const) {
            e.pool.trim();   // every buffer of the load made anew, the one picked among them
            made.length = 0;
            fail = pick;
            await expectThrows(async () => e.loadModel({ config: g.config, weights: await loadSafetensors(g.weights), kvCache: { numBlocks: 300 } }),
              'loadModel: the GPU refused an allocation or upload of the model; everything it had taken is released');
            assert(fail === null, `${where}: no allocation was picked to fail`);
            const kept = made.filter((m) => !m.destroyed).length;
            assert(kept === 0, `${where}: ${kept} of the ${made.length} buffers the failed load made were not destroyed`);
            await e.sync();   // nothing of the failed load is left to surface later
          }
        } finally {
          device.createBuffer = create;
        }
        const model = await e.loadModel({ config: g.config, weights: await loadSafetensors(g.weights), kvCache: { numBlocks: 300 } });
        try {
          await greedyIsGolden(model, g, 'after two failed loads');
        } finally {
          model.destroy();
        }
        await e.sync();
      }
    },
  },
  {
    name: 'token ids are range-checked as numbers before any conversion (2^32 + 1 no longer wraps to 1)',
    async run(ctx) {
      const g = await golden(ctx);
      const model = await ctx.engine.loadModel({ config: g.config, weights: await loadSafetensors(g.weights) });
      try {
        for (const [bad, shown] of [[2 ** 32 + 1, '4294967297'], [NaN, 'NaN'], [1.5, '1.5'], ['3', "'3'"], [-1, '-1'], [256, '256'], [Infinity, 'Infinity']] as const) {
          await expectThrows(() => model.logits([5, bad as number]), `Model.logits: tokens[1]: expected a token id in [0, 256), got ${shown}`);
          await expectThrows(() => model.generate([[5], [bad as number]]), `Model.generate: prompts[1][0]: expected a token id in [0, 256), got ${shown}`);
        }
        await greedyIsGolden(model, g, 'after refused ids');
      } finally {
        model.destroy();
      }
    },
  },
  {
    name: 'NaN and ±Inf weights are refused with the tensor\'s name (f32, overflowing f16, a GGUF block\'s scale); allowNonFinite loads them as they are',
    async run(ctx) {
      const g = await golden(ctx);
      const e = ctx.engine;
      // The last weight of a layer: the layer's other weights, read already, are released too.
      const nan = await editedWeights(g, 'model.layers.1.mlp.down_proj.weight', (v) => v.setFloat32(4 * 1234, NaN, true));
      await failsReleasingAll(e, () => e.loadModel({ config: g.config, weights: nan }),
        "loadModel: tensor 'model.layers.1.mlp.down_proj.weight': expected finite weights (or allowNonFinite: true to load them as they are), got NaN at element 1234");
      const inf = await editedWeights(g, 'model.layers.0.self_attn.k_proj.weight', (v) => v.setFloat32(4 * 4095, -Infinity, true));
      await expectThrows(() => e.loadModel({ config: g.config, weights: inf, dtype: 'bf16' }), "tensor 'model.layers.0.self_attn.k_proj.weight'", 'got -Infinity at element 4095');
      // Finite in the checkpoint, past what f16 holds.
      const big = await editedWeights(g, 'model.embed_tokens.weight', (v) => v.setFloat32(4 * 7, 1e6, true));
      await expectThrows(() => e.loadModel({ config: g.config, weights: big, dtype: 'f16' }),
        "loadModel: tensor 'model.embed_tokens.weight': expected values f16 holds (load with dtype 'f32' or 'bf16', or allowNonFinite: true to keep them), got 1000000 at element 7 (F32), which is Infinity as f16");
      const bf16 = await e.loadModel({ config: g.config, weights: big, dtype: 'bf16' });
      bf16.destroy();
      // Opted out: loaded as they are (a NaN norm weight makes every logit NaN).
      const normNaN = await editedWeights(g, 'model.norm.weight', (v) => v.setFloat32(0, NaN, true));
      const model = await e.loadModel({ config: g.config, weights: normNaN, allowNonFinite: true });
      try {
        const logits = await model.logits([1, 2]);
        assert(logits.every(Number.isNaN), 'allowNonFinite: the NaN norm weight did not reach the GPU (finite logits)');
      } finally {
        model.destroy();
      }
      // A quantized block whose f16 scale is NaN (the first Q8_0 tensor's first block).
      const q8 = new Uint8Array(await ctx.fixture('goldens-quant/gguf-llama-q8-0/model.gguf'));
      const first = [...(await loadGGUF(q8)).tensors.values()].find((t) => t.type === 'Q8_0');
      assert(first, 'the Q8_0 golden has a Q8_0 tensor');
      q8[first.offset + 1] = 0x7e;   // d = 0x7e00, an f16 NaN
      await expectThrows(async () => e.loadModel({ weights: await loadGGUF(q8) }),
        'expected finite weights (or allowNonFinite: true to load them as they are), got a Q8_0 block (elements 0..31) whose scale at byte 0 is NaN');
      // The engine serves after every refusal.
      const after = await e.loadModel({ config: g.config, weights: await loadSafetensors(g.weights) });
      try {
        await greedyIsGolden(after, g, 'after refused weights');
      } finally {
        after.destroy();
      }
    },
  },
  {
    name: 'loadModel closes the files it read once the weights are on the GPU, or the load failed; a closed file loads again',
    async run(ctx) {
      const g = await golden(ctx);
      const log: string[] = [];
      const watched = (inner: SafetensorsFile): SafetensorsFile => ({
        tensors: inner.tensors,
        metadata: inner.metadata,
        name: inner.name,
        bytes: (t) => { log.push('read'); return inner.bytes(t); },
        close: async () => { log.push('close'); },
      });
      const file = watched(await loadSafetensors(g.weights));
      const closedAfterReads = (what: string) => {
        assert(log.at(-1) === 'close' && log.filter((x) => x === 'close').length === 1, `${what}: ${log.filter((x) => x === 'close').length} closes, last ${log.at(-1)}`);
        assert(log.indexOf('read') >= 0, `${what}: nothing read`);
        log.length = 0;
      };
      const a = await ctx.engine.loadModel({ config: g.config, weights: file });
      a.destroy();
      closedAfterReads('first load');
      const b = await ctx.engine.loadModel({ config: g.config, weights: file });
      try {
        closedAfterReads('the same file loaded again');
        await greedyIsGolden(b, g, 'a file loaded a second time');
      } finally {
        b.destroy();
      }
      const nan = watched(await editedWeights(g, 'model.norm.weight', (v) => v.setFloat32(0, NaN, true)));
      await expectThrows(() => ctx.engine.loadModel({ config: g.config, weights: nan }), "tensor 'model.norm.weight': expected finite weights");
      closedAfterReads('a load that failed after reading');
      // The encoder, speech and T5 loaders close theirs too (Whisper's were left to the garbage
      // collector: Node warned "Closing file descriptor ... on garbage collection").
      for (const dir of ['goldens-layers/bert-padded-batch', 'goldens-layers/whisper-tiny-random', 'goldens-layers/t5-relbias']) {
        const config = JSON.parse(text(await ctx.fixture(`${dir}/config.json`)));
        const m = await ctx.engine.loadModel({ config, weights: watched(await loadSafetensors(await ctx.fixture(`${dir}/model.safetensors`))) });
        m.destroy();
        closedAfterReads(dir);
      }
    },
  },
]);
