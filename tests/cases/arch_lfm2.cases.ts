// LFM2 (Lfm2ForCausalLM) against HF transformers 5.17 (../shared/goldens-arch/lfm2, SPEC §7.1): short
// gated convolutions with a per-sequence conv state beside the paged cache, attention with per-head q/k
// norms, the adjusted feed-forward width, embedding_norm last. The conv kernel against the float64
// reference (prefill rows with their states, decode rows of many sequences, a fresh row whose slot holds
// garbage, a row with no slot); the golden's prefill logits at every position and greedy tokens,
// together and alone; the engine under preemption, with the prefix cache (a hit starts from the conv
// state snapshot of its last cached block: kv_manager.ts), and with n choices forked from one prompt
// (the state copied).
import { GREEDY } from '../../src/serve/engine';
import { rng } from '../../src/core/random';
import { encodeSafetensors, loadGGUF, loadSafetensors, ops, quantizeRows, reference, writeGGUF, type EncodableTensor, type Model, type SafetensorsFile } from '../../src/index';
import { assert, assertClose, defineCases, equalArrays, expectThrows, randn, type TestCase, wholeModelCases } from './harness';
import { checkAgainstDequantized, checkGreedy, checkLogits, dequantizedWant, golden, quantizedValues, type GoldenModel } from './model.cases';
import { byteTokenizerConfig, byteTokenizerJson } from './text_fixture';

const SENTINEL = 777.25;
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

async function lfm2(ctx: Parameters<TestCase['run']>[0], kvCache?: { numBlocks: number; blockSize: number }, maxSeqsPerStep?: number): Promise<{ g: GoldenModel; model: Model }> {
  const g = await golden(ctx, 'lfm2', 'goldens-arch');
  const model = await ctx.engine.loadModel({ config: g.config, weights: await loadSafetensors(g.weights), ...(kvCache ? { kvCache } : {}), ...(maxSeqsPerStep ? { maxSeqsPerStep } : {}) });
  return { g, model };
}

/**
 * The golden as llama.cpp's convert_hf_to_gguf.py (LFM2Model) writes it: GGUF `lfm2`, tensor names
 * token_embd, token_embd_norm (the final embedding_norm), blk.i.{attn_norm, ffn_norm, ffn_gate (w1),
 * ffn_up (w3), ffn_down (w2)}, attention layers' attn_q/k/v/output and attn_q_norm/attn_k_norm,
 * conv layers' shortconv.{in_proj, conv (squeezed to ne [L, H]), out_proj}; metadata with
 * head_count_kv per layer (0 on conv layers), shortconv.l_cache and the adjusted feed_forward_length.
 * Matrices as `type` (F32, or Q8_0 with their dequantized values returned as an HF checkpoint).
 */
async function lfm2GGUF(file: SafetensorsFile, c: Record<string, unknown>, type: 'F32' | 'Q8_0', alsoOutputNorm = false): Promise<{ gguf: Uint8Array; dequantized: Record<string, EncodableTensor> }> {
  const tensors: { name: string; type: string; shape: number[]; data: Uint8Array }[] = [];
  const dequantized: Record<string, EncodableTensor> = {};
  const read = async (n: string) => new Float32Array((await file.bytes(n)).slice().buffer);
  const f32 = (v: Float32Array) => new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
  const put = async (hf: string, gguf: string, matrix: boolean) => {
    const v = await read(hf);
    const shape = file.tensors.get(hf)!.shape;
    if (matrix && type === 'Q8_0') {
      const [rows, K] = shape;
      const bytes = quantizeRows('Q8_0', v, rows, K);
      tensors.push({ name: gguf, type, shape: [K, rows], data: bytes });
      dequantized[hf] = { dtype: 'F32', shape, data: Float32Array.from(reference.dequantizeRows('Q8_0', bytes, rows, K)) };
      return;
    }
    // ne: fastest dimension first; the conv taps [H, 1, L] squeezed to [H, L] as the converter does.
    const ne = hf.endsWith('conv.conv.weight') ? [shape[2], shape[0]] : shape.slice().reverse();
    tensors.push({ name: gguf, type: 'F32', shape: ne, data: f32(v) });
    dequantized[hf] = { dtype: 'F32', shape, data: v };
  };
  await put('model.embed_tokens.weight', 'token_embd.weight', true);
  await put('model.embedding_norm.weight', 'token_embd_norm.weight', false);
  if (alsoOutputNorm) await put('model.embedding_norm.weight', 'output_norm.weight', false);
  const types = c.layer_types as string[];
  for (const [i, t] of types.entries()) {
    const p = `model.layers.${i}.`, b = `blk.${i}.`;
    await put(`${p}operator_norm.weight`, `${b}attn_norm.weight`, false);
    await put(`${p}ffn_norm.weight`, `${b}ffn_norm.weight`, false);
    await put(`${p}feed_forward.w1.weight`, `${b}ffn_gate.weight`, true);
    await put(`${p}feed_forward.w3.weight`, `${b}ffn_up.weight`, true);
    await put(`${p}feed_forward.w2.weight`, `${b}ffn_down.weight`, true);
    if (t === 'conv') {
      await put(`${p}conv.in_proj.weight`, `${b}shortconv.in_proj.weight`, true);
      await put(`${p}conv.conv.weight`, `${b}shortconv.conv.weight`, false);
      await put(`${p}conv.out_proj.weight`, `${b}shortconv.out_proj.weight`, true);
    } else {
      for (const [hf, g] of [['q_proj', 'attn_q'], ['k_proj', 'attn_k'], ['v_proj', 'attn_v'], ['out_proj', 'attn_output']]) await put(`${p}self_attn.${hf}.weight`, `${b}${g}.weight`, true);
      await put(`${p}self_attn.q_layernorm.weight`, `${b}attn_q_norm.weight`, false);
      await put(`${p}self_attn.k_layernorm.weight`, `${b}attn_k_norm.weight`, false);
    }
  }
  const a = 'lfm2';
  const rope = (c.rope_parameters as { rope_theta: number }).rope_theta;
  const metadata: [string, unknown, 'f32'?][] = [
    ['general.architecture', a],
    ['general.name', 'lfm2 golden'],
    [`${a}.block_count`, types.length],
    [`${a}.context_length`, c.max_position_embeddings],
    [`${a}.embedding_length`, c.hidden_size],
    // The adjusted width (int(2·160/3) = 106 → 128), as LFM2Model._add_feed_forward_length writes it.
    [`${a}.feed_forward_length`, 128],
    [`${a}.attention.head_count`, c.num_attention_heads],
    [`${a}.attention.head_count_kv`, Uint32Array.from(types, (t) => (t === 'conv' ? 0 : c.num_key_value_heads as number))],
    [`${a}.rope.freq_base`, rope, 'f32'],
    [`${a}.attention.layer_norm_rms_epsilon`, c.norm_eps, 'f32'],
    [`${a}.vocab_size`, c.vocab_size],
    [`${a}.shortconv.l_cache`, c.conv_L_cache],
    ['tokenizer.ggml.bos_token_id', c.bos_token_id],
    ['tokenizer.ggml.eos_token_id', c.eos_token_id],
  ];
  return { gguf: writeGGUF({ metadata, tensors }), dequantized };
}

export const archLfm2Cases: TestCase[] = defineCases('lfm2', [
  {
    name: 'shortConv: prefill rows with their states, decode rows of many sequences, a fresh row over a garbage slot, a row with no slot; widths 2, 3 and 4; with and without block-end snapshots; out, states and snapshots against the float64 reference, unused rows, slots and blocks untouched',
    async run(ctx) {
      const rt = ctx.engine;
      for (const [L, snapshots] of [[2, false], [3, false], [3, true], [4, true]] as const) {
        const H = 40, slots = 7, seed = 100 * L + (snapshots ? 1 : 0);
        // Rows: a prefill of 5 tokens continuing slot 2; 1-token decodes of slots 0, 4, 5; a fresh prompt
        // of 4 tokens in slot 6 (which holds garbage); a fresh row of 2 tokens with no slot; a 1-token
        // row starting its sequence in slot 3 (fresh with one token).
        const rows = [
          { start: 0, tokens: 1, slot: 0, fresh: false }, { start: 1, tokens: 1, slot: 4, fresh: false }, { start: 2, tokens: 1, slot: 5, fresh: false },
          { start: 3, tokens: 5, slot: 2, fresh: false }, { start: 8, tokens: 4, slot: 6, fresh: true }, { start: 12, tokens: 2, slot: -1, fresh: true },
          { start: 14, tokens: 1, slot: 3, fresh: true },
        ];
        const T = 15, Tpad = 17, inStride = 3 * H + 5;
        const bcx = randn(Tpad * inStride, seed);
        const w = randn(H * L, seed + 1);
        const st0 = randn(slots * (L - 1) * H, seed + 2);
        // Slot 1 is no row's: it must keep its values.
        const state = rt.tensor(st0, [slots, L - 1, H], 'f32');
        const out = rt.tensor(new Float32Array(Tpad * H).fill(SENTINEL), [Tpad, H], 'f32');
        const meta = rt.tensor(ops.shortConvMeta(rows), [4 * rows.length], 'i32');
        const x = rt.tensor(bcx, [Tpad, inStride], 'f32'), wt = rt.tensor(w, [H, L], 'f32');
        // Snapshots: token t's cache slot 3t + 1 (blocks of 4): tokens 2, 6, 10 and 14 end blocks 1, 4, 7 and 10.
        const bs = 4, blocks = 12;
        const tokSlots = Int32Array.from({ length: Tpad }, (_, t) => (t < T ? 3 * t + 1 : -1));
        const snapT = rt.tensor(new Float32Array(blocks * (L - 1) * H).fill(SENTINEL), [blocks, L - 1, H], 'f32');
        const slotsT = rt.tensor(tokSlots, [Tpad], 'i32');
        try {
          ops.shortConv(rt, x, wt, state, { H, L, rows: rows.length, meta, out, inStride, ...(snapshots ? { snapshots: { slots: slotsT, blockSize: bs, out: snapT } } : {}) });
          const refState = Float64Array.from(st0);
          const refSnap = new Float64Array(blocks * (L - 1) * H).fill(SENTINEL);
          const ref = reference.shortConvRef(bcx, w, refState, rows, H, L, inStride, snapshots ? { slots: tokSlots, blockSize: bs, out: refSnap } : undefined);
          const gotSnap = await snapT.toFloat32();
          if (snapshots) {
            assertClose(`shortConv L=${L} snapshots`, gotSnap, refSnap, 'f32');
            assert(refSnap.filter((v) => v !== SENTINEL).length === 4 * (L - 1) * H, `shortConv L=${L}: the reference wrote ${refSnap.filter((v) => v !== SENTINEL).length} snapshot values`);
          } else {
            assert(gotSnap.every((v) => v === SENTINEL), `shortConv L=${L}: snapshots written though none were asked for`);
          }
          const got = await out.toFloat32();
          assertClose(`shortConv L=${L} out`, got.subarray(0, T * H), ref, 'f32');
          for (let i = T * H; i < Tpad * H; i++) assert(got[i] === SENTINEL, `shortConv L=${L}: out[${i}] past the rows written (${got[i]})`);
          const gotState = await state.toFloat32();
          assertClose(`shortConv L=${L} states`, gotState, refState, 'f32');
          for (let i = 0; i < (L - 1) * H; i++) assert(gotState[(L - 1) * H + i] === st0[(L - 1) * H + i], `shortConv L=${L}: slot 1 (no row's) changed`);
          // The decode of a row continues a prefill exactly: the state of slot 2 after its 5 tokens is
          // its last L − 1 values of B·x (the reference's), checked above; a fresh row ignored slot 6's garbage.
          const fresh = reference.shortConvRef(bcx, w, new Float64Array(slots * (L - 1) * H), [{ ...rows[4], slot: -1 }], H, L, inStride);
          assertClose(`shortConv L=${L}: the fresh row equals one over zeros`, got.subarray(8 * H, 12 * H), fresh.subarray(8 * H, 12 * H), 'f32');
        } finally {
          for (const t of [state, out, meta, x, wt, snapT, slotsT]) t.destroy();
        }
      }
      const t = rt.tensor(new Float32Array(12), [4, 3], 'f32'), m = rt.tensor(new Int32Array(4), [4], 'i32'), w6 = rt.tensor(new Float32Array(6), [2, 3], 'f32');
      try {
        await expectThrows(() => ops.shortConv(rt, t, t, t, { H: 1, L: 9, rows: 1, meta: m, out: t }), 'o.L', 'from 2 to 8');
        await expectThrows(() => ops.shortConv(rt, t, t, t, { H: 4, L: 2, rows: 1, meta: m, out: t }), 'weight', '[4, 2]');
        await expectThrows(() => ops.shortConv(rt, t, t, t, { H: 4, L: 3, rows: 1, meta: m, out: t }), 'state', '[slots, 2, 4]');
        await expectThrows(() => ops.shortConv(rt, t, w6, t, { H: 2, L: 3, rows: 2, meta: m, out: t }), 'o.meta', '8 values');
        await expectThrows(() => ops.shortConv(rt, t, m, t, { H: 4, L: 3, rows: 1, meta: m, out: t }), 'weight.dtype');
      } finally {
        for (const x of [t, m, w6]) x.destroy();
      }
    },
  },
  // The whole-model cases, where goldenRunsHere says.
  ...wholeModelCases([{
    name: 'lfm2 (goldens-arch): prefill logits at every position within 1e-3·max|logit| of HF; greedy tokens identical (decode steps read the conv state), together and alone; no state slot leaked',
    async run(ctx) {
      const { g, model } = await lfm2(ctx);
      try {
        assert(model.architecture === 'Lfm2ForCausalLM', `architecture ${model.architecture}`);
        assert(model.config.intermediateSize === 128, `feed-forward width ${model.config.intermediateSize}, HF's 128 (block_auto_adjust_ff_dim)`);
        const worst = await checkLogits(model, g, 'lfm2');
        const r0 = model.graphStats.replayed;
        await checkGreedy(model, g, 'lfm2');
        // Decode steps repeat their recording (step graphs): the conv rows' table is an upload, not a recording.
        const replayed = model.graphStats.replayed - r0;
        assert(!ctx.engine.tuning.stepGraphs || replayed > 0, `lfm2: no step replayed its recording (${model.graphStats.recorded} recorded)`);
        model.kv.checkInvariants();
        assert(model.kv.freeStateSlots === model.kv.stateSlots, `${model.kv.stateSlots - model.kv.freeStateSlots} conv state slots still held`);
        ctx.note(`lfm2: worst logit error ${worst.toExponential(2)} of max|logit|; greedy tokens identical together and alone (${replayed} steps replayed)`);
      } finally {
        model.destroy();
      }
    },
  },
  {
    name: 'lfm2 engine: output unchanged under preemption (a cache of 14 blocks of 4), with prefix-cache hits (repeats start from the conv state snapshot of their last cached block; without the restore they miss), and with n = 3 choices forked from one prompt (greedy and sampled equal to single requests); no block or state slot leaked',
    async run(ctx) {
      const { g, model } = await lfm2(ctx, { numBlocks: 14, blockSize: 4 });
      try {
        assert(model.kv.prefixCaching && model.kv.stateSlots > 0, `prefix caching ${model.kv.prefixCaching}, state slots ${model.kv.stateSlots}`);
        // The three prompts (7, 3, 41 tokens + 8 each) need 4 + 3 + 13 blocks: some must be preempted.
        const p0 = model.engine.counters.preemptions;
        const got = await model.generate(g.golden.prompts, { maxNewTokens: 8, stopTokens: [] });
        got.forEach((t, i) => equalArrays(`lfm2 under preemption: prompt ${i}`, t, g.golden.greedy[i]));
        const preempted = model.engine.counters.preemptions - p0;
        assert(preempted > 0, 'lfm2: the three prompts together were never preempted (cache too large for the case)');
        // The long prompt again, alone: its first 10 blocks come from the prefix cache and its conv layers
        // start from the snapshot of the 10th.
        const h0 = model.kv.stats.hits;
        const again = await model.generate([g.golden.prompts[2]], { maxNewTokens: 8, stopTokens: [] });
        equalArrays('lfm2 repeat of the 41-token prompt', again[0], g.golden.greedy[2]);
        const hits = model.kv.stats.hits - h0;
        assert(hits === 40, `lfm2 repeat: ${hits} prompt tokens from the prefix cache (40: ten blocks of 4)`);
        // The same with the restore skipped (the slot keeps whatever it held): the case sees the snapshot.
        const arch = (model as unknown as { arch: { restoreStates: (p: readonly (readonly [number, number])[]) => void } }).arch;
        const restore = arch.restoreStates;
        arch.restoreStates = () => {};
        let without: number[];
        try {
          without = (await model.generate([g.golden.prompts[2]], { maxNewTokens: 8, stopTokens: [] }))[0];
        } finally {
          arch.restoreStates = restore;
        }
        assert(without.join() !== g.golden.greedy[2].join(), 'lfm2: the repeat without its state restored still gave HF\'s tokens (the case would not see the snapshot)');
        const hits2 = model.kv.stats.hits - h0 - hits;
        assert(hits2 === 40, `lfm2 repeat without restore: ${hits2} cached tokens`);
        // n choices: the prompt computed once, each choice's conv state a copy of the prompt's.
        for (const [p, prompt] of [[0, g.golden.prompts[0]], [1, g.golden.prompts[1]]] as const) {
          const c0 = { ...model.engine.counters };
          const r = await model.engine.submit({ prompt: Int32Array.from(prompt), maxTokens: 8, n: 3, sampling: GREEDY }).result;
          for (let i = 0; i < 3; i++) equalArrays(`lfm2 n=3 greedy, prompt ${p}, choice ${i}`, r.tokens[i], g.golden.greedy[p]);
          assert(model.engine.counters.prefillTokens - c0.prefillTokens === prompt.length, `lfm2 n=3: ${model.engine.counters.prefillTokens - c0.prefillTokens} prompt tokens computed (once: ${prompt.length})`);
          const sampling = { ...GREEDY, temperature: 1, seed: 11 + p };
          const singles: number[][] = [];
          for (let i = 0; i < 3; i++) singles.push((await model.engine.submit({ prompt: Int32Array.from(prompt), maxTokens: 8, sampling, stream: i }).result).tokens[0]);
          const n = await model.engine.submit({ prompt: Int32Array.from(prompt), maxTokens: 8, n: 3, sampling }).result;
          for (let i = 0; i < 3; i++) equalArrays(`lfm2 n=3 sampled, prompt ${p}, choice ${i} against a single request of stream ${i}`, n.tokens[i], singles[i]);
        }
        model.kv.checkInvariants();
        assert(model.kv.usedBlocks === 0, `${model.kv.usedBlocks} blocks still held`);
        assert(model.kv.freeStateSlots === model.kv.stateSlots, `${model.kv.stateSlots - model.kv.freeStateSlots} conv state slots still held`);
        ctx.note(`lfm2 engine: ${preempted} preemptions, greedy unchanged; a repeat with 40 cached tokens equal (and unequal without its state restored); n=3 forks equal single requests`);
      } finally {
        model.destroy();
      }
    },
  },
  {
    name: 'lfm2 GGUF (llama.cpp names, writeGGUF): its own config; F32 equal to the safetensors form (logits bit for bit, greedy identical); Q8_0 matrices within 2e-3·max|logit| of the model on the dequantized values, greedy identical; a file with both token_embd_norm and output_norm refused',
    async run(ctx) {
      const g = await golden(ctx, 'lfm2', 'goldens-arch');
      const st = await loadSafetensors(g.weights);
      const ref = await ctx.engine.loadModel({ config: g.config, weights: st, dtype: 'f32' });
      try {
        const f = await lfm2GGUF(st, g.config, 'F32');
        const m = await ctx.engine.loadModel({ weights: await loadGGUF(f.gguf), dtype: 'f32' });
        try {
          assert(m.architecture === 'Lfm2ForCausalLM' && m.config.intermediateSize === 128 && m.config.layers.map((l) => !!l.conv).join() === 'true,true,false,true',
            `GGUF lfm2 config: ${m.architecture}, ff ${m.config.intermediateSize}, conv ${m.config.layers.map((l) => !!l.conv)}`);
          for (const [p, prompt] of g.golden.prompts.entries()) equalArrays(`lfm2 GGUF F32 logits of prompt ${p}`, await m.logits(prompt), await ref.logits(prompt));
          await checkGreedy(m, g, 'lfm2 GGUF F32');
        } finally {
          m.destroy();
        }
      } finally {
        ref.destroy();
      }
      const q = await lfm2GGUF(st, g.config, 'Q8_0');
      const want = await dequantizedWant(ctx, { ...g, weights: encodeSafetensors(q.dequantized) });
      const qm = await ctx.engine.loadModel({ weights: await loadGGUF(q.gguf) });
      try {
        const worst = await checkAgainstDequantized(qm, g, want, 'lfm2 GGUF Q8_0');
        ctx.note(`lfm2 GGUF: F32 logits bit for bit the safetensors model's; Q8_0 worst ${worst.toExponential(2)} of max|logit| against the dequantized model, greedy identical`);
      } finally {
        qm.destroy();
      }
      // output_norm is read as the final norm too, but a file with both names is refused by name.
      const extra = await lfm2GGUF(st, g.config, 'F32', true);
      await expectThrows(async () => ctx.engine.loadModel({ weights: await loadGGUF(extra.gguf) }), 'unexpected output_norm.weight');
    },
  },
  {
    name: 'lfm2 engine: requests beyond the free conv state slots (maxSeqsPerStep 2: 4 slots, 3 held) wait for a slot and get their tokens alone',
    async run(ctx) {
      const { g, model } = await lfm2(ctx, undefined, 2);
      try {
        assert(model.kv.stateSlots === 4, `state slots ${model.kv.stateSlots}`);
        // Three of the four slots held by sequences that never run: the three prompts, submitted at once,
        // can only run one at a time, each waiting for the slot the one before frees.
        const holds = ['hold0', 'hold1', 'hold2'];
        for (const h of holds) model.kv.addSequence(h);
        let least = model.kv.stateSlots, most = 0;
        try {
          const got = await Promise.all(g.golden.prompts.map((p) => model.engine.submit({ prompt: Int32Array.from(p), maxTokens: 8, sampling: GREEDY,
            onTokens: () => { least = Math.min(least, model.kv.freeStateSlots); most = Math.max(most, model.engine.pending); } }).result));
          got.forEach((r, i) => equalArrays(`lfm2 with one free slot: prompt ${i}`, r.tokens[0], g.golden.greedy[i]));
        } finally {
          for (const h of holds) model.kv.freeSequence(h);
        }
        assert(least === 0 && most === 3, `lfm2 with one free slot: ${least} slots free at least, ${most} requests pending at most`);
        assert(model.kv.freeStateSlots === 4, `${4 - model.kv.freeStateSlots} slots still held`);
        model.kv.checkInvariants();
      } finally {
        model.destroy();
      }
    },
  },
  {
    name: 'lfm2 engine fuzz: random arrivals and cancellations over a cache that forces preemption, eviction and prefix hits, prompt chunks of 3 beside decodes (the conv state carried across chunks, restored at hits, rebuilt after preemption); each request gets its tokens alone; no block or state slot leaked',
    async run(ctx) {
      const { g, model } = await lfm2(ctx, { numBlocks: 16, blockSize: 4 });
      try {
        // Prompts that share prefixes: the goldens', with their greedy continuations, and cut short.
        const base = g.golden.prompts.map((p, i) => [...p, ...g.golden.greedy[i].slice(0, 4)]);
        const prompts = [...g.golden.prompts, ...base, ...g.golden.prompts.map((p) => p.slice(0, Math.max(2, p.length - 3)))];
        const alone = new Map<string, number[]>();
        for (const p of prompts) alone.set(p.join(','), (await model.generate([p], { maxNewTokens: 10, stopTokens: [] }))[0]);
        const r = rng(44);
        const h0 = model.kv.stats.hits, p0 = model.engine.counters.preemptions, e0 = model.kv.stats.evictions;
        model.engine.prefillBudget = 3;
        const runs: Promise<void>[] = [];
        let checked = 0;
        for (let i = 0; i < 14; i++) {
          const prompt = prompts[Math.floor(r() * prompts.length)];
          const want = alone.get(prompt.join(','))!;
          const maxTokens = 3 + Math.floor(r() * 8);
          const cancelAt = r() < 0.2 ? 1 + Math.floor(r() * 3) : -1;
          const delay = Math.floor(r() * 20);
          runs.push((async () => {
            await sleep(delay);
            const ac = new AbortController();
            let seen = 0;
            const h = model.engine.submit({ prompt: Int32Array.from(prompt), maxTokens, signal: ac.signal,
              onTokens: (_c, toks) => { seen += toks.length; if (cancelAt >= 0 && seen >= cancelAt) ac.abort(new Error('cancelled by the test')); } });
            try {
              const res = await h.result;
              equalArrays(`lfm2 fuzz request ${i} (prompt of ${prompt.length}, max ${maxTokens}) against alone`, res.tokens[0], want.slice(0, maxTokens));
              checked++;
            } catch (e) {
              if (!(cancelAt >= 0 && (e as Error).message === 'cancelled by the test')) throw e;
            }
          })());
        }
        await Promise.all(runs);
        await sleep(0);
        assert(checked >= 8, `only ${checked} requests ran to their end`);
        assert(model.engine.pending === 0, `${model.engine.pending} requests still pending`);
        model.kv.checkInvariants();
        assert(model.kv.freeBlocks === model.numBlocks, `blocks leaked: ${model.kv.freeBlocks} of ${model.numBlocks} free`);
        assert(model.kv.freeStateSlots === model.kv.stateSlots, `${model.kv.stateSlots - model.kv.freeStateSlots} conv state slots leaked`);
        const preempted = model.engine.counters.preemptions - p0, hits = model.kv.stats.hits - h0;
        assert(preempted > 0, 'the lfm2 fuzz never preempted (cache too large for it)');
        assert(hits > 0, 'the lfm2 fuzz never hit the prefix cache');
        const evictions = model.kv.stats.evictions - e0;
        assert(evictions > 0, 'the lfm2 fuzz never evicted a cached block');
        ctx.note(`lfm2 fuzz: ${checked} requests equal alone; ${preempted} preemptions, ${hits} prompt tokens from the prefix cache, ${evictions} evictions`);
      } finally {
        model.destroy();
      }
    },
  },
  {
    name: 'lfm2 weights in f16 and bf16 (greedy identical to HF), and quantized on load (q8: within 2e-3·max|logit| of the model on the dequantized values, greedy identical)',
    async run(ctx) {
      const g = await golden(ctx, 'lfm2', 'goldens-arch');
      const st = await loadSafetensors(g.weights);
      for (const dtype of ['f16', 'bf16'] as const) {
        const m = await ctx.engine.loadModel({ config: g.config, weights: st, dtype });
        try {
          const got = await m.generate(g.golden.prompts, { maxNewTokens: 8, stopTokens: [] });
          got.forEach((t, i) => equalArrays(`lfm2 ${dtype} greedy, prompt ${i}`, t, g.golden.greedy[i]));
        } finally {
          m.destroy();
        }
      }
      const want = await dequantizedWant(ctx, { ...g, weights: encodeSafetensors(await quantizedValues(st, 'q8')) });
      const q8 = await ctx.engine.loadModel({ config: g.config, weights: st, dtype: 'q8' });
      try {
        const worst = await checkAgainstDequantized(q8, g, want, 'lfm2 q8');
        ctx.note(`lfm2: f16 and bf16 greedy identical to HF; q8 on load worst ${worst.toExponential(2)} of max|logit| against the dequantized model, greedy identical`);
      } finally {
        q8.destroy();
      }
    },
  },
  {
    name: 'lfm2 through the OpenAI API in process: completions of token-id prompts, concurrent and streamed, give HF\'s greedy tokens; a repeat reports its cached prompt tokens',
    async run(ctx) {
      const g = await golden(ctx, 'lfm2', 'goldens-arch');
      const model = await ctx.engine.loadModel({ config: g.config, weights: await loadSafetensors(g.weights), tokenizer: byteTokenizerJson(), tokenizerConfig: byteTokenizerConfig(), name: 'lfm2' });
      type Json = { choices: { token_ids?: number[] }[]; usage?: { prompt_tokens_details?: { cached_tokens?: number } } };
      try {
        const reqs = g.golden.prompts.map((p, i) => ({ prompt: p, max_tokens: 8, temperature: 0, ignore_eos: true, return_token_ids: true, stream: i === 1 }));
        const outs = await Promise.all(reqs.map(async (req) => {
          const r = model.completions.create(req);
          if (!req.stream) return ((await r) as Json).choices[0].token_ids as number[];
          const ids: number[] = [];
          for await (const c of r as AsyncIterable<Json>) if (c.choices[0]?.token_ids) ids.push(...c.choices[0].token_ids);
          return ids;
        }));
        outs.forEach((t, i) => equalArrays(`lfm2 completions, prompt ${i}`, t, g.golden.greedy[i]));
        const again = (await model.completions.create({ ...reqs[2], stream: false })) as Json;
        equalArrays('lfm2 completions repeat of prompt 2', again.choices[0].token_ids!, g.golden.greedy[2]);
        const cached = again.usage?.prompt_tokens_details?.cached_tokens ?? 0;
        assert(cached > 0, `lfm2 completions repeat: ${cached} cached prompt tokens`);
        ctx.note(`lfm2 OpenAI completions: HF's greedy tokens concurrently and streamed; the repeat had ${cached} cached prompt tokens`);
      } finally {
        model.destroy();
      }
    },
  }]),
]);
