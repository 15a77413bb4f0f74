// Seeded random inputs, identical in every runtime: tests, the workload, the benchmark and the demo
// draw from here so a failure reproduces anywhere from its seed.

/** mulberry32: small, fast, and the same sequence everywhere. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** n normal samples (Box-Muller), mean 0, standard deviation `std`. */
export function randn(n: number, seed: number, std = 1): Float32Array {
  const r = rng(seed);
  const out = new Float32Array(n);
  for (let i = 0; i < n; i += 2) {
    const u = Math.max(r(), 1e-12);
    const v = r();
    const m = std * Math.sqrt(-2 * Math.log(u));
    out[i] = m * Math.cos(2 * Math.PI * v);
    if (i + 1 < n) out[i + 1] = m * Math.sin(2 * Math.PI * v);
  }
  return out;
}

/** n integers uniform in [lo, hi). */
export function randInt(n: number, seed: number, lo: number, hi: number): Int32Array {
  const r = rng(seed);
  return Int32Array.from({ length: n }, () => lo + Math.floor(r() * (hi - lo)));
}
