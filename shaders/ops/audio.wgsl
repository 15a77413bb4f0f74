// Whisper's log-mel front end (WhisperFeatureExtractor's torch path), for `chunks` windows of `chunk`
// samples each (the host pads or cuts the audio to whole windows):
//
//   logmel_main: one workgroup per (window c, frame f). The frame's NFFT samples start at f·hop − NFFT/2
//     (center padding, reflected at the window's ends: index −i reads i, index chunk−1+i reads
//     chunk−1−i), multiplied by the periodic Hann window; a direct DFT (NFFT need not be a power of two:
//     400) gives the power |X_k|² of bins k < n_freq = NFFT/2 + 1 against a table of cos/sin(2π j/NFFT),
//     j = k·n mod NFFT; then mel_m = Σ_k filters[k, m] · power_k and out[c, m, f] = log10(max(mel_m, 1e-10)).
//     The STFT's last frame (f = chunk/hop) is dropped, as the extractor does: frames = chunk / hop.
//   lognorm_main: one workgroup per window: its largest value mx, then every value becomes
//     (max(x, mx − 8) + 4) / 4, in place.

const NFFT: u32 = 400u;           // specialized: the extractor's n_fft
const NFREQ: u32 = NFFT / 2u + 1u;
const WG: u32 = 256u;

struct Params { chunks: u32, chunk: u32, hop: u32, frames: u32, n_mels: u32 }

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> pcm: array<f32>;
@group(0) @binding(2) var<storage, read> window: array<f32>;
@group(0) @binding(3) var<storage, read> twiddle: array<f32>;    // cos(2πj/NFFT) for j < NFFT, then sin
@group(0) @binding(4) var<storage, read> filters: array<f32>;    // [NFREQ, n_mels]
@group(0) @binding(5) var<storage, read_write> out: array<f32>;  // [chunks, n_mels, frames]

var<workgroup> xs: array<f32, NFFT>;
var<workgroup> cs: array<f32, NFFT>;
var<workgroup> sn: array<f32, NFFT>;
var<workgroup> pw: array<f32, NFREQ>;

@compute @workgroup_size(WG)
fn logmel_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
  let g = wid.y * nwg.x + wid.x;
  // Uniform control flow: every invocation of a workgroup takes the same branch.
  if (g >= params.chunks * params.frames) { return; }
  let c = g / params.frames;
  let f = g % params.frames;
  let n_len = i32(params.chunk);
  let base = c * params.chunk;
  for (var n = lid; n < NFFT; n += WG) {
    var i = i32(f * params.hop + n) - i32(NFFT / 2u);
    if (i < 0) { i = -i; }
    if (i >= n_len) { i = 2 * (n_len - 1) - i; }
    i = clamp(i, 0, n_len - 1);
    xs[n] = pcm[base + u32(i)] * window[n];
    cs[n] = twiddle[n];
    sn[n] = twiddle[NFFT + n];
  }
  workgroupBarrier();
  for (var k = lid; k < NFREQ; k += WG) {
    var re = 0.0;
    var im = 0.0;
    var j = 0u;
    for (var n = 0u; n < NFFT; n++) {
      re += xs[n] * cs[j];
      im -= xs[n] * sn[j];
      j += k;
      if (j >= NFFT) { j -= NFFT; }
    }
    pw[k] = re * re + im * im;
  }
  workgroupBarrier();
  let M = params.n_mels;
  for (var m = lid; m < M; m += WG) {
    var s = 0.0;
    for (var k = 0u; k < NFREQ; k++) { s += filters[k * M + m] * pw[k]; }
    out[(c * M + m) * params.frames + f] = log2(max(s, 1e-10)) * 0.30102999566398120;
  }
}

var<workgroup> red: array<f32, WG>;

@compute @workgroup_size(WG)
fn lognorm_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let c = wid.x;
  if (c >= params.chunks) { return; }
  let n = params.n_mels * params.frames;
  let base = c * n;
  var mx = -3.0e38;
  for (var i = lid; i < n; i += WG) { mx = max(mx, out[base + i]); }
  red[lid] = mx;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (lid < s) { red[lid] = max(red[lid], red[lid + s]); }
    workgroupBarrier();
  }
  let floor_v = red[0] - 8.0;
  for (var i = lid; i < n; i += WG) { out[base + i] = (max(out[base + i], floor_v) + 4.0) / 4.0; }
}
