// Gemma 3 (Gemma3ForCausalLM) as transformers computes it (SPEC §7.1; ../shared/goldens-arch README):
// Gemma 2's layer (gemma2.ts: the scaled embedding, four (1 + w) RMSNorms a layer, GELU-tanh MLP,
// scores × query_pre_attn_scalar^-0.5, windows on the layers layer_types names) with
// - a (1 + w) RMSNorm on each head of q and k before RoPE (q_norm, k_norm: cfg.qkNorm, in gemma2.ts);
// - two RoPEs: the full layers rotate by cfg.rope (rope_parameters.full_attention, with its linear
//   scaling in Gemma 3 4B-27B), the sliding layers by cfg.slidingRope (rope_parameters.sliding_attention,
//   older configs' rope_local_base_freq). The runner's tables are the full layers'; this file keeps the
//   sliding layers' table beside them, with as many positions, grown when the runner's grow;
// - no soft caps unless the config sets them (gemma2.ts applies them where it does).
import { WebinferError } from '../core/errors.js';
import type { Tensor } from '../core/tensor.js';
import { gqaAttention } from './llama.js';
import { Gemma2Family } from './gemma2.js';
import { ropeTable } from './rope.js';
import type { StepContext } from './step.js';

export class Gemma3Family extends Gemma2Family {
  /** The sliding layers' RoPE table, [positions, rotaryDim/2] each, for the runner's positions. */
  private local: { cos: Tensor; sin: Tensor } | null = null;

  /** The step's attention plans, and the sliding layers' table grown to the runner's positions (host work, once per step). */
  override plan(s: StepContext): void {
    super.plan(s);
    const P = s.cos.shape[0];
    if (this.local && this.local.cos.shape[0] === P) return;
    const rope = this.cfg.slidingRope;
    if (!rope) throw new WebinferError('Gemma3Family: cfg.slidingRope: expected the sliding layers\' RoPE (parseConfig sets it for Gemma3ForCausalLM), got null');
    const t = ropeTable(rope, P);
    this.local?.cos.destroy();
    this.local?.sin.destroy();
    this.local = { cos: this.rt.tensor(t.cos, [P, t.cos.length / P], 'f32'), sin: this.rt.tensor(t.sin, [P, t.sin.length / P], 'f32') };
  }

  override signature(s: StepContext): string | null {
    const sig = super.signature(s);
    return sig === null || !this.local ? sig : `${sig}|local ${this.rt.idOf(this.local.cos.buffer)},${this.rt.idOf(this.local.sin.buffer)}`;
  }

  protected override attend(s: StepContext, l: number, qkv: Tensor, attn: Tensor): void {
    const window = this.cfg.layers[l].slidingWindow;
    const tables = window !== null ? { ...s, cos: this.local!.cos, sin: this.local!.sin } : s;
    gqaAttention(this.rt, tables, this.cfg, qkv, attn, this.caches[l], this.plans.get(window ?? 0)!);
  }

  override destroy(): void {
    super.destroy();
    this.local?.cos.destroy();
    this.local?.sin.destroy();
    this.local = null;
  }
}
