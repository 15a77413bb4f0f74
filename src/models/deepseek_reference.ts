// A whole DeepSeek V2 / V3 model in float64 (SPEC §5 and §7, as HF transformers computes it), composed
// on the host from the reference ops: the differential oracle the engine's DeepSeek path is fuzzed
// against (tests/cases/deepseek_fuzz.cases.ts), and the router's view of each token, so that a
// disagreement can be told apart as a genuine router near-tie or a defect.
//
// Per layer, for the whole sequence at once (full causal attention, MLA computed the up-projecting way
// HF does, not absorbed):
//   x      = rmsNorm(h, input_layernorm)
//   q      = q_proj(x), or q_b_proj(rmsNorm(q_a_proj(x), q_a_layernorm)) when q_lora_rank is set;
//            per head [q_nope (P) | q_pe (R)]
//   [kv_c | k_pe] = kv_a_proj_with_mqa(x); kv_c = rmsNorm(kv_c, kv_a_layernorm)
//   RoPE on q_pe and k_pe (the config's pairing: interleaved for DeepSeek; its scaling, YaRN's in the
//   table, YaRN's softmax factor in the config's attention scale)
//   h     += o_proj(mlaPrefillRef(...))  (k = [W_UK·kv_c | k_pe], v = W_UV·kv_c, causal)
//   x      = rmsNorm(h, post_attention_layernorm)
//   h     += mlp(x): dense (layers before first_k_dense_replace), or routed experts (routeTokenRef,
//            moeRef) plus the shared experts
// then logits = lm_head(rmsNorm(h, norm)). Weights are HF's names and layouts, already dequantized
// (float64 or any numbers); experts per module (`mlp.experts.{e}.gate_proj.weight` ...) or packed
// (`mlp.experts.gate_up_proj` [E, 2I, H], `mlp.experts.down_proj` [E, H, I]). Biases are added where
// the weights hold them (attention_bias, V2's mlp_bias).
import type { ModelConfig } from './config.js';
import { ropeParameters } from './rope.js';
import { linearRef } from '../reference/linear.js';
import { mlaPrefillRef } from '../reference/mla.js';
import { routeTokenRef, moeRef, type MoeRouting, type RouteDetailRef } from '../reference/moe.js';
import { embeddingRef, ropeRef, rmsNormRef } from '../reference/ops.js';
import { checkInt } from '../reference/util.js';

/** HF tensor names to their values (a Map works). */
export interface DeepseekWeightsRef {
  get(name: string): ArrayLike<number> | undefined;
}

/** One MoE layer's routing of every position (routeTokenRef). */
export interface DeepseekRoutesRef {
  layer: number;
  tokens: RouteDetailRef[];
}

export interface DeepseekResultRef {
  /** [T, vocab]: the logits at every position. */
  logits: Float64Array;
  /** Per MoE layer, the router's scores, choices and margins at every position. */
  routes: DeepseekRoutesRef[];
}

/** A router decision closer than `rel` (relative to the largest |choice| or |group score|) to changing. */
export interface NearTieRef {
  layer: number;
  position: number;
  /** margin / max|choice| (or groupMargin / max|group score|). */
  relMargin: number;
  kind: 'experts' | 'groups';
}

/** The routing configuration a config's MoE layers use (the same object src/models/deepseek.ts gives ops.route). */
export function deepseekRoutingRef(cfg: ModelConfig): MoeRouting {
  const m = cfg.moe;
  if (!m) throw new Error('cfg: expected a config with MoE layers (cfg.moe), got none');
  return {
    family: cfg.family as 'deepseek_v2' | 'deepseek_v3', scoring: m.scoringFunc, method: m.topkMethod, topK: m.numExpertsPerTok,
    nGroup: m.nGroup, topkGroup: m.topkGroup, normTopkProb: m.normTopkProb, routedScalingFactor: m.routedScalingFactor,
  };
}

/** cos and sin [positions, R/2] of the config's rope (HF's f32 inverse frequencies and scaling), in float64. */
function ropeTables(cfg: ModelConfig, positions: number): { cos: Float64Array; sin: Float64Array; half: number } {
  const { invFreq, attentionScaling } = ropeParameters(cfg.rope);
  const half = invFreq.length;
  const cos = new Float64Array(positions * half), sin = new Float64Array(positions * half);
  for (let p = 0; p < positions; p++) {
    for (let i = 0; i < half; i++) {
      cos[p * half + i] = Math.cos(p * invFreq[i]) * attentionScaling;
      sin[p * half + i] = Math.sin(p * invFreq[i]) * attentionScaling;
    }
  }
  return { cos, sin, half };
}

/** [rows, a] and [rows, b] side by side: [rows, a + b]. */
function sideBySide(x: ArrayLike<number>, a: number, y: ArrayLike<number>, b: number, rows: number): Float64Array {
  const out = new Float64Array(rows * (a + b));
  for (let t = 0; t < rows; t++) {
    for (let i = 0; i < a; i++) out[t * (a + b) + i] = x[t * a + i];
    for (let i = 0; i < b; i++) out[t * (a + b) + a + i] = y[t * b + i];
  }
  return out;
}

/**
 * The logits of every position of `tokens` and the routing of every MoE layer (see the top of this
 * file). cfg: parseConfig's normalization of a DeepseekV2/V3 config.json.
 */
export function deepseekRef(cfg: ModelConfig, w: DeepseekWeightsRef, tokens: ArrayLike<number>): DeepseekResultRef {
  const a = cfg.mla;
  if (!a || (cfg.family !== 'deepseek_v2' && cfg.family !== 'deepseek_v3')) {
    throw new Error(`cfg: expected a DeepSeek V2/V3 config (family deepseek_v2 or deepseek_v3 with MLA), got family ${cfg.family}`);
  }
  const T = tokens.length;
  checkInt(T, 'tokens.length', 1);
  const { hiddenSize: H, numHeads: N, vocabSize: Vocab, rmsEps: eps } = cfg;
  const { qkNopeHeadDim: P, qkRopeHeadDim: R, vHeadDim: V, kvLoraRank: L, qLoraRank: QL } = a;
  const need = (name: string, n: number): ArrayLike<number> => {
    const v = w.get(name);
    if (!v) throw new Error(`weights: missing ${name}`);
    if (v.length !== n) throw new Error(`weights: ${name}: expected ${n} values, got ${v.length}`);
    return v;
  };
  const linear = (x: ArrayLike<number>, name: string, N_: number, K: number, o: { accumulateInto?: ArrayLike<number>; act?: 'silu_mul' } = {}) =>
    linearRef(x, need(`${name}.weight`, N_ * K), T, N_, K, { bias: w.get(`${name}.bias`) ?? null, ...o });
  const rows = (n: number) => ({ rows: T, n });
  const positions = Int32Array.from({ length: T }, (_, i) => i);
  const { cos, sin, half } = ropeTables(cfg, T);
  if (2 * half !== R) throw new Error(`cfg.rope.rotaryDim: expected qk_rope_head_dim ${R}, got ${2 * half}`);
  const pairing = cfg.rope.interleaved ? 'interleaved' : 'half';
  const routing = cfg.moe ? deepseekRoutingRef(cfg) : null;
  const routes: DeepseekRoutesRef[] = [];

  /** down(silu(gate(x)) · up(x)) added into h: a dense MLP or the shared experts (prefix ends in '.'). */
  const mlp = (x: Float64Array, h: Float64Array, prefix: string, I: number): Float64Array => {
    const g = linear(x, `${prefix}gate_proj`, I, H), u = linear(x, `${prefix}up_proj`, I, H);
    return linearRef(sideBySide(g, I, u, I, T), need(`${prefix}down_proj.weight`, H * I), T, H, I,
      { act: 'silu_mul', bias: w.get(`${prefix}down_proj.bias`) ?? null, accumulateInto: h });
  };

  let h = embeddingRef(tokens, need('model.embed_tokens.weight', Vocab * H), Vocab, H);
  for (let i = 0; i < cfg.numLayers; i++) {
    const p = `model.layers.${i}.`, at = `${p}self_attn.`;
    const x = rmsNormRef(h, need(`${p}input_layernorm.weight`, H), eps, rows(H));
    let q: Float64Array;
    if (QL !== null) {
      const qa = rmsNormRef(linear(x, `${at}q_a_proj`, QL, H), need(`${at}q_a_layernorm.weight`, QL), eps, rows(QL));
      q = linear(qa, `${at}q_b_proj`, N * (P + R), QL);
    } else {
      q = linear(x, `${at}q_proj`, N * (P + R), H);
    }
    const qNope = new Float64Array(T * N * P);
    const qPeRaw = new Float64Array(T * N * R);
    for (let t = 0; t < T; t++) {
      for (let n = 0; n < N; n++) {
        const src = (t * N + n) * (P + R);
        qNope.set(q.subarray(src, src + P), (t * N + n) * P);
        qPeRaw.set(q.subarray(src + P, src + P + R), (t * N + n) * R);
      }
    }
    const qPe = ropeRef(qPeRaw, positions, cos, sin, half, [{ rows: T, heads: N, tokenStride: N * R }], pairing);
    // The latent rows [kv_c | k_pe] of every position: the whole sequence as one cache block.
    const kv = linear(x, `${at}kv_a_proj_with_mqa`, L + R, H);
    const kvC = rmsNormRef(kv, need(`${at}kv_a_layernorm.weight`, L), eps, { rows: T, n: L, tokenStride: L + R });
    const kPe = ropeRef(kv, positions, cos, sin, half, [{ rows: T, tokenStride: L + R, rotaryOffset: L }], pairing);
    const cache = new Float64Array(T * (L + R));
    for (let t = 0; t < T; t++) {
      cache.set(kvC.subarray(t * L, (t + 1) * L), t * (L + R));
      cache.set(kPe.subarray(t * (L + R) + L, (t + 1) * (L + R)), t * (L + R) + L);
    }
    const attn = mlaPrefillRef(qNope, qPe, cache, need(`${at}kv_b_proj.weight`, N * (P + V) * L),
      { T, N, L, P, R, V, numBlocks: 1, blockSize: T },
      { queryStartLoc: [0, T], seqLens: [T], blockTable: [0], maxBlocksPerSeq: 1 }, cfg.attentionScale).out;
    h = linear(attn, `${at}o_proj`, H, N * V, { accumulateInto: h });
    const x2 = rmsNormRef(h, need(`${p}post_attention_layernorm.weight`, H), eps, rows(H));
    if (!cfg.layers[i].moe) {
      h = mlp(x2, h, `${p}mlp.`, cfg.intermediateSize);
      continue;
    }
    const m = cfg.moe!, E = m.numRoutedExperts, I = m.moeIntermediateSize, K = m.numExpertsPerTok;
    const logits = linearRef(x2, need(`${p}mlp.gate.weight`, E * H), T, E, H);
    const bias = m.eScoreCorrectionBias ? need(`${p}mlp.gate.e_score_correction_bias`, E) : null;
    const detail = Array.from({ length: T }, (_, t) => routeTokenRef(logits, t * E, E, routing!, bias));
    routes.push({ layer: i, tokens: detail });
    const { gateUp, down } = expertsOf(w, `${p}mlp.experts.`, E, H, I);
    const ids = Int32Array.from(detail.flatMap((d) => d.ids));
    const weights = Float64Array.from(detail.flatMap((d) => d.weights));
    h = moeRef(x2, ids, weights, gateUp, down, { rows: T, E, H, I, topK: K, accumulateInto: h });
    if (m.numSharedExperts > 0) h = mlp(x2, h, `${p}mlp.shared_experts.`, m.numSharedExperts * I);
  }
  const xf = rmsNormRef(h, need('model.norm.weight', H), eps, rows(H));
  const head = cfg.tieWordEmbeddings ? need('model.embed_tokens.weight', Vocab * H) : need('lm_head.weight', Vocab * H);
  return { logits: linearRef(xf, head, T, Vocab, H), routes };
}

/** A layer's routed experts packed as moeRef takes them: gateUp [E, 2I, H] (gate rows first), down [E, H, I]. */
function expertsOf(w: DeepseekWeightsRef, prefix: string, E: number, H: number, I: number): { gateUp: ArrayLike<number>; down: ArrayLike<number> } {
  const packedGU = w.get(`${prefix}gate_up_proj`), packedD = w.get(`${prefix}down_proj`);
  if (packedGU && packedD) {
    if (packedGU.length !== E * 2 * I * H) throw new Error(`weights: ${prefix}gate_up_proj: expected ${E * 2 * I * H} values, got ${packedGU.length}`);
    if (packedD.length !== E * H * I) throw new Error(`weights: ${prefix}down_proj: expected ${E * H * I} values, got ${packedD.length}`);
    return { gateUp: packedGU, down: packedD };
  }
  const gateUp = new Float64Array(E * 2 * I * H), down = new Float64Array(E * H * I);
  for (let e = 0; e < E; e++) {
    const part = (name: string, n: number) => {
      const v = w.get(`${prefix}${e}.${name}.weight`);
      if (!v) throw new Error(`weights: missing ${prefix}${e}.${name}.weight (and no packed ${prefix}gate_up_proj / down_proj)`);
      if (v.length !== n) throw new Error(`weights: ${prefix}${e}.${name}.weight: expected ${n} values, got ${v.length}`);
      return v;
    };
    gateUp.set(part('gate_proj', I * H), e * 2 * I * H);
    gateUp.set(part('up_proj', I * H), (e * 2 + 1) * I * H);
    down.set(part('down_proj', H * I), e * H * I);
  }
  return { gateUp, down };
}

/**
 * Router decisions of a deepseekRef result closer than `rel` to changing (relative margin), in
 * position order: a logit disagreement at or after the first of them may be the tie's, not a defect's.
 */
export function deepseekNearTiesRef(r: DeepseekResultRef, rel = 1e-4): NearTieRef[] {
  const out: NearTieRef[] = [];
  for (const { layer, tokens } of r.routes) {
    tokens.forEach((d, position) => {
      // (V3's dropped experts hold -inf: the scale is the finite choices'.)
      const maxChoice = d.choice.reduce((m, v) => (Number.isFinite(v) ? Math.max(m, Math.abs(v)) : m), 0);
      const em = d.margin / Math.max(maxChoice, 1e-30);
      if (em < rel) out.push({ layer, position, relMargin: em, kind: 'experts' });
      if (d.groupMargin !== null && d.groupScores) {
        const maxGroup = d.groupScores.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
        const gm = d.groupMargin / Math.max(maxGroup, 1e-30);
        if (gm < rel) out.push({ layer, position, relMargin: gm, kind: 'groups' });
      }
    });
  }
  return out.sort((x, y) => x.position - y.position || x.layer - y.layer);
}
