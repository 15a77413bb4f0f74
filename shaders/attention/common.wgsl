// Constants every attention kernel shares. The option flags mirror FLAGS in src/attention/common.ts.

const FLAG_CAUSAL: u32 = 1u;
const FLAG_WINDOW: u32 = 2u;
const FLAG_SOFTCAP: u32 = 4u;
const FLAG_ALIBI: u32 = 8u;
const FLAG_SINKS: u32 = 16u;
const FLAG_MASK_BOOL: u32 = 32u;
const FLAG_MASK_ADD: u32 = 64u;
// Paged kernels over a cache split across buffers: this dispatch reads one part (kv_scale words 2-4).
const FLAG_SPLIT: u32 = 128u;
// With FLAG_WINDOW: the window limits the keys after the row too (|i_abs - j| < window), a bidirectional
// encoder's local attention.
const FLAG_WINDOW_BOTH: u32 = 256u;

// Scores of invisible keys. Finite on purpose: WGSL lets implementations assume no infinities, so a
// masked score is a sentinel below any real one, and "visible" means above VISIBLE_MIN.
const MASKED: f32 = -3.0e38;
const VISIBLE_MIN: f32 = -2.0e38;
const LOG2E: f32 = 1.4426950408889634;
const LN2: f32 = 0.6931471805599453;

// Paged attention plans (src/attention/plan.ts): the plan buffer starts with a header (flash item count,
// decode item count, largest partition count, any partition) and holds work items of ITEM_WORDS words:
// sequence, kv head, row tile, partition, first key, end key, partial (a state for the merge), 0.
const ITEM_WORDS: u32 = 8u;
