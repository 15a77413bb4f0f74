// Mixture-of-experts in float64 (SPEC §7, DeepSeek V2/V3 as HF transformers 5 computes them): the router's
// expert choice and weights (routeRef), and the routed experts' weighted sum (moeRef). What ops.route and
// ops.moe compute.
//
// Routing of one token from its router logits l [E] (transformers' DeepseekV2Moe.route_tokens_to_experts
// and DeepseekV3MoE.route_tokens_to_experts / DeepseekV3TopkRouter):
//   score   = softmax(l) (V2) or sigmoid(l) (V3)
//   choice  = score + bias (V3's e_score_correction_bias; no bias: choice = score)
//   groups  (method 'group_limited_greedy' or 'noaux_tc'): the E experts form nGroup consecutive groups,
//           ranked by max(choice) over the group ('group_limited_greedy', V2) or by the sum of its two
//           largest choices ('noaux_tc', V3); the topkGroup best are kept, and every expert of the other
//           groups gets choice -inf (V3: transformers 5's DeepseekV3TopkRouter, masked_fill(~mask,
//           -inf), so only kept experts are chosen even where the bias makes their choice negative;
//           transformers 4 filled 0.0 there, and a dropped expert then outranked a negative kept one)
//           or 0.0 (V2's DeepseekV2TopkRouter, masked_fill(~mask, 0.0): softmax scores are positive,
//           so a kept expert always outranks it)
//   ids     = the topK largest choices
//   weights = score[ids] (unbiased), then by family:
//             deepseek_v2: weights · routedScalingFactor (transformers' V2 never reads norm_topk_prob)
//             deepseek_v3: weights / (Σ weights + 1e-20) when normTopkProb, then · routedScalingFactor
//             gpt_oss:     weights / Σ weights (GptOssTopKRouter: top-k by logit, then a softmax over
//                          the k chosen: the same numbers), then · routedScalingFactor (1)
// Order and ties: ids are listed by decreasing (masked) choice, equal choices by increasing expert index,
// and groups likewise; NaN ranks below everything, -0 equals +0. transformers calls torch.topk with
// sorted=False, whose order (and choice among exact ties) is unspecified: only the set of ids and each
// id's weight are HF's.
//
// Experts (transformers' DeepseekV2Experts / DeepseekV3NaiveMoe, packed layout): for expert e,
// gateUp[e] is [2I, H] (gate rows first, then up), down[e] is [H, I];
//   out[t] = init[t] + Σ_j weights[t, j] · down_e · (silu(gate_e · x[t]) ⊙ (up_e · x[t])),  e = ids[t, j]
// with silu(g) = g / (1 + exp(-g)); an id outside [0, E) contributes nothing. gpt-oss (GptOssExperts):
// gate and up get the expert's gate_up bias first, silu(g)·u becomes (clamp(u, ±limit) + 1)·g·sigmoid(alpha·g)
// with g = min(gate, limit), and down's output gets the expert's down bias before the weighting.
import { checkInt, checkMinLen } from './util.js';

export type MoeScoring = 'softmax' | 'sigmoid';
export type MoeTopkMethod = 'greedy' | 'group_limited_greedy' | 'noaux_tc';
export type MoeFamily = 'deepseek_v2' | 'deepseek_v3' | 'gpt_oss' | 'qwen3_moe';

/** A MoE router's configuration (from config.json: scoring_func, topk_method, num_experts_per_tok,
 *  n_group, topk_group, norm_topk_prob, routed_scaling_factor, and the model's family). */
export interface MoeRouting {
  scoring: MoeScoring;
  method: MoeTopkMethod;
  topK: number;
  /** Groups of experts (methods 'group_limited_greedy' and 'noaux_tc'); ignored by 'greedy'. */
  nGroup: number | null;
  /** Groups kept per token (grouped methods); ignored by 'greedy'. */
  topkGroup: number | null;
  /** Normalize the chosen weights to sum to 1 (deepseek_v3 only: transformers' V2 ignores it). */
  normTopkProb: boolean;
  routedScalingFactor: number;
  /** Which transformers model's weight rule applies (see the top of this file; gpt_oss always normalizes). */
  family: MoeFamily;
}

/** Order used for every ranking here: larger first, NaN last, -0 == +0, ties to the lower index. */
function before(a: number, ia: number, b: number, ib: number): boolean {
  const na = Number.isNaN(a), nb = Number.isNaN(b);
  if (na !== nb) return nb;
  if (!na && a !== b) return a > b;
  return ia < ib;
}

/** Indices of the k best values by `before`. */
function topIndices(v: ArrayLike<number>, k: number): number[] {
  const idx = Array.from({ length: v.length }, (_, i) => i);
  idx.sort((i, j) => (before(v[i], i, v[j], j) ? -1 : 1));
  return idx.slice(0, k);
}

/** Checks a routing configuration for E experts; throws naming the field. */
export function checkRoutingRef(r: MoeRouting, E: number): void {
  if (r.scoring !== 'softmax' && r.scoring !== 'sigmoid') throw new Error(`scoring: expected 'softmax' or 'sigmoid', got ${r.scoring}`);
  if (!['greedy', 'group_limited_greedy', 'noaux_tc'].includes(r.method)) throw new Error(`method: expected 'greedy', 'group_limited_greedy' or 'noaux_tc', got ${r.method}`);
  if (!['deepseek_v2', 'deepseek_v3', 'gpt_oss', 'qwen3_moe'].includes(r.family)) throw new Error(`family: expected 'deepseek_v2', 'deepseek_v3', 'gpt_oss' or 'qwen3_moe', got ${r.family}`);
  checkInt(r.topK, 'topK', 1);
  if (r.topK > E) throw new Error(`topK: expected at most E=${E}, got ${r.topK}`);
  if (r.method !== 'greedy') {
    checkInt(r.nGroup as number, 'nGroup', 1);
    checkInt(r.topkGroup as number, 'topkGroup', 1);
    if (E % r.nGroup! !== 0) throw new Error(`nGroup: expected a divisor of E=${E}, got ${r.nGroup}`);
    if (r.topkGroup! > r.nGroup!) throw new Error(`topkGroup: expected at most nGroup=${r.nGroup}, got ${r.topkGroup}`);
    if (r.method === 'noaux_tc' && E / r.nGroup! < 2) throw new Error(`nGroup: expected at most E/2=${E / 2} (groups are ranked by their two best experts), got ${r.nGroup}`);
  }
}

/** One token's routing and what decided it (routeTokenRef). */
export interface RouteDetailRef {
  /** The unbiased scores [E] (softmax or sigmoid): the chosen experts' weights come from them. */
  scores: Float64Array;
  /** What the top-k ranks [E]: score + bias, then -inf (V3) or 0.0 (V2) for the experts of dropped groups. */
  choice: Float64Array;
  /** Each group's score [nGroup] (its max, or the sum of its two best choices); null for 'greedy'. */
  groupScores: Float64Array | null;
  /** The groups kept, best first; null for 'greedy'. */
  keptGroups: number[] | null;
  /** The topK experts, by decreasing choice, and their weights. */
  ids: number[];
  weights: number[];
  /**
   * choice of the last chosen expert minus the best unchosen one's (>= 0): how far the selection is from
   * changing. 0 is an exact tie (settled by the lower index here; torch.topk's pick among ties is its
   * own); Infinity when every expert is chosen, or every one left out is a dropped group's (V3's -inf).
   */
  margin: number;
  /** The same for the groups (the last kept group's score minus the best dropped one's); null without groups or when all are kept. */
  groupMargin: number | null;
}

/**
 * The routing of one token from its router logits logits[offset .. offset+E) (see the top of this file),
 * with the scores, choices and margins that decided it (routeRef's per-token step). bias: [E] or none.
 */
export function routeTokenRef(logits: ArrayLike<number>, offset: number, E: number, r: MoeRouting,
                              bias?: ArrayLike<number> | null): RouteDetailRef {
  checkInt(E, 'E', 1);
  checkRoutingRef(r, E);
  checkInt(offset, 'offset', 0);
  checkMinLen(logits, offset + E, 'logits');
  if (bias) checkMinLen(bias, E, 'bias');
  const K = r.topK;
  const score = new Float64Array(E);
  const choice = new Float64Array(E);
  const l = (e: number) => logits[offset + e];
  if (r.scoring === 'softmax') {
    let m = -Infinity;
    for (let e = 0; e < E; e++) m = Math.max(m, l(e));
    let s = 0;
    for (let e = 0; e < E; e++) s += (score[e] = Math.exp(l(e) - m));
    for (let e = 0; e < E; e++) score[e] /= s;
  } else {
    for (let e = 0; e < E; e++) score[e] = 1 / (1 + Math.exp(-l(e)));
  }
  for (let e = 0; e < E; e++) choice[e] = score[e] + (bias ? bias[e] : 0);
  let groupScores: Float64Array | null = null, keptGroups: number[] | null = null, groupMargin: number | null = null;
  if (r.method !== 'greedy') {
    const G = r.nGroup!, gs = E / G;
    groupScores = new Float64Array(G);
    for (let g = 0; g < G; g++) {
      const members = choice.subarray(g * gs, (g + 1) * gs);
      const best = topIndices(members, r.method === 'noaux_tc' ? 2 : 1);
      groupScores[g] = best.reduce((acc, i) => acc + members[i], 0);
    }
    const ranked = topIndices(groupScores, G);
    keptGroups = ranked.slice(0, r.topkGroup!);
    if (r.topkGroup! < G) groupMargin = groupScores[ranked[r.topkGroup! - 1]] - groupScores[ranked[r.topkGroup!]];
    const kept = new Set(keptGroups);
    const dropped = r.method === 'noaux_tc' ? -Infinity : 0;
    for (let e = 0; e < E; e++) if (!kept.has(Math.floor(e / gs))) choice[e] = dropped;
  }
  const ranked = topIndices(choice, E);
  const ids = ranked.slice(0, K);
  const margin = K < E ? choice[ranked[K - 1]] - choice[ranked[K]] : Infinity;
  let sum = 0;
  for (const e of ids) sum += score[e];
  // gpt-oss (and Qwen3-MoE with norm_topk_prob): the chosen scores renormalized (no epsilon).
  const norm = r.family === 'gpt_oss' || (r.family === 'qwen3_moe' && r.normTopkProb) ? 1 / sum : r.family === 'deepseek_v3' && r.normTopkProb ? 1 / (sum + 1e-20) : 1;
  return { scores: score, choice, groupScores, keptGroups, ids, weights: ids.map((e) => score[e] * norm * r.routedScalingFactor), margin, groupMargin };
}

/**
 * The experts each of `rows` tokens is routed to, and their weights (see the top of this file).
 * logits: [rows, E] row-major; bias: [E] or none. Returns ids [rows, topK] and weights [rows, topK].
 */
export function routeRef(logits: ArrayLike<number>, rows: number, E: number, r: MoeRouting,
                         bias?: ArrayLike<number> | null): { ids: Int32Array; weights: Float64Array } {
  checkInt(rows, 'rows', 0);
  checkInt(E, 'E', 1);
  checkRoutingRef(r, E);
  checkMinLen(logits, rows * E, 'logits');
  if (bias) checkMinLen(bias, E, 'bias');
  const K = r.topK;
  const ids = new Int32Array(rows * K);
  const weights = new Float64Array(rows * K);
  for (let t = 0; t < rows; t++) {
    const d = routeTokenRef(logits, t * E, E, r, bias);
    ids.set(d.ids, t * K);
    weights.set(d.weights, t * K);
  }
  return { ids, weights };
}

export interface MoeRefOptions {
  rows: number;
  E: number;
  H: number;
  I: number;
  /** Experts per token: ids and weights hold [rows, topK]. */
  topK: number;
  /** The output's previous contents ([>= rows, H]): the result is added to them (the residual stream). */
  accumulateInto?: ArrayLike<number> | null;
  /** gpt-oss: 'swiglu_oai' (clamp(u, ±limit) + 1)·g·sigmoid(alpha·g), g = min(gate, limit), in place of silu(g)·u. */
  act?: 'silu' | 'swiglu_oai';
  alpha?: number;
  limit?: number;
  /** gpt-oss's expert biases: [E, 2I] added to gate|up (gate then up), [E, H] to down's output. */
  gateUpBias?: ArrayLike<number> | null;
  downBias?: ArrayLike<number> | null;
  /** 'f32': every product and sum rounded to f32 as a plain f32 implementation computes them (the
   *  error such an implementation makes, for tolerances of badly conditioned sums). Default 'f64'. */
  precision?: 'f64' | 'f32';
}

/**
 * Σ_j weights[t, j] · expert_{ids[t, j]}(x[t]) for t < rows (see the top of this file), in float64.
 * x [>= rows, H]; gateUp [E, 2I, H]; down [E, H, I]. Returns [rows, H].
 */
export function moeRef(x: ArrayLike<number>, ids: ArrayLike<number>, weights: ArrayLike<number>, gateUp: ArrayLike<number>,
                       down: ArrayLike<number>, o: MoeRefOptions): Float64Array {
  const { rows, E, H, I, topK } = o;
  checkInt(rows, 'rows', 0);
  checkInt(E, 'E', 1);
  checkInt(H, 'H', 1);
  checkInt(I, 'I', 1);
  checkInt(topK, 'topK', 1);
  checkMinLen(x, rows * H, 'x');
  checkMinLen(ids, rows * topK, 'ids');
  checkMinLen(weights, rows * topK, 'weights');
  checkMinLen(gateUp, E * 2 * I * H, 'gateUp');
  checkMinLen(down, E * H * I, 'down');
  if (o.accumulateInto) checkMinLen(o.accumulateInto, rows * H, 'accumulateInto');
  const out = new Float64Array(rows * H);
  const h = new Float64Array(I);
  const r = o.precision === 'f32' ? Math.fround : (v: number) => v;
  const oai = o.act === 'swiglu_oai', alpha = o.alpha ?? 1.702, limit = o.limit ?? 7;
  if (o.gateUpBias) checkMinLen(o.gateUpBias, E * 2 * I, 'gateUpBias');
  if (o.downBias) checkMinLen(o.downBias, E * H, 'downBias');
  for (let t = 0; t < rows; t++) {
    const acc = out.subarray(t * H, (t + 1) * H);
    for (let j = 0; j < topK; j++) {
      const e = ids[t * topK + j];
      if (!Number.isInteger(e) || e < 0 || e >= E) continue;
      const wt = weights[t * topK + j];
      const gu = e * 2 * I * H;
      for (let n = 0; n < I; n++) {
        let g = 0, u = 0;
        for (let k = 0; k < H; k++) {
          g = r(g + r(gateUp[gu + n * H + k] * x[t * H + k]));
          u = r(u + r(gateUp[gu + (I + n) * H + k] * x[t * H + k]));
        }
        if (o.gateUpBias) {
          g = r(g + o.gateUpBias[e * 2 * I + n]);
          u = r(u + o.gateUpBias[e * 2 * I + I + n]);
        }
        if (oai) {
          const gc = Math.min(g, limit), uc = Math.min(Math.max(u, -limit), limit);
          h[n] = r(r(uc + 1) * r(gc * r(1 / r(1 + r(Math.exp(-r(alpha * gc)))))));
        } else {
          h[n] = r(r(g / r(1 + r(Math.exp(-g)))) * u);
        }
      }
      const d = e * H * I;
      for (let c = 0; c < H; c++) {
        let s = 0;
        for (let n = 0; n < I; n++) s = r(s + r(down[d + c * I + n] * h[n]));
        if (o.downBias) s = r(s + o.downBias[e * H + c]);
        acc[c] = r(acc[c] + r(wt * s));
      }
    }
    if (o.accumulateInto) for (let c = 0; c < H; c++) acc[c] = r(acc[c] + o.accumulateInto[t * H + c]);
  }
  return out;
}
