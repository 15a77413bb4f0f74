#!/usr/bin/env node
// `npm start`: the default workload on the default adapter. Every kernel family (attention, GEMV/GEMM
// per weight type, RMSNorm, RoPE, MoE, sampling) is checked against the float64 reference, then timed;
// a table is printed; then a small Llama-shaped model generates, in bf16 and in q4. Exits 1 if any
// check or model fails. A progress line says what runs whenever something takes over a second (on a
// terminal one line redrawn, else a line every ~10 s).
//
// Adapter: the system's Vulkan driver (a GPU where there is one), or the one VK_ICD_FILENAMES names.
// Where the system offers none that Dawn accepts, the software drivers that .ci/install.sh provides
// are used (Mesa 25 lavapipe, else SwiftShader).
//
// The script runs twice: a launcher (no WebGPU in it) and the workload in a child. dawn.node prints its
// warnings about adapters and limits straight to file descriptor 2 (with its CI's source paths; nothing
// a user can act on): only a parent can filter them, and a refused driver's reason is said in one line
// instead. The child gets a valid XDG_RUNTIME_DIR (a private temp dir where it is unset), so that the
// drivers' Wayland probe stays quiet. The child sends its lines and its progress over IPC and the
// launcher draws them: the progress line keeps counting while the child's thread compiles a pipeline.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { constants, tmpdir } from 'node:os';
import { dirname, isAbsolute, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const CHILD = 'WEBINFER_START_CHILD';
/** The child's exit status when no adapter came: the launcher may try a software driver. */
const NO_ADAPTER = 3;

// --------------------------------------------------------------------------------------------- launcher

async function launch() {
  const env = { ...process.env, [CHILD]: '1' };
  let xdg = null;
  const cur = process.env.XDG_RUNTIME_DIR;
  if (!cur || !isAbsolute(cur) || !isDir(cur)) env.XDG_RUNTIME_DIR = xdg = mkdtempSync(join(tmpdir(), 'webinfer-xdg-'));   // mode 0700
  // Ctrl-C reaches the child too (one process group); a signal to the launcher alone is passed on.
  // Either way the launcher ends when the child has, with its status.
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(sig, () => current?.kill(sig));
  const progress = createProgress(process.stdout);
  let status;
  try {
    const first = await runChild(env, progress);
    status = first.status;
    if (status === NO_ADAPTER) {
      const soft = [join(root, '.cache/lavapipe25/lvp_icd.json'), '/usr/lib/chromium/vk_swiftshader_icd.json'].find(existsSync);
      const why = first.refused.length ? `Dawn refused them: ${[...new Set(first.refused)].join('; ')}` : 'requestAdapter returned null';
      if (process.env.VK_ICD_FILENAMES || process.env.VK_DRIVER_FILES || !soft) {
        progress.log(`${first.noAdapter ?? 'no WebGPU adapter'}${first.refused.length ? `\n(${why})` : ''}`, process.stderr);
        status = 1;
      } else {
        progress.log(`no adapter from the system's Vulkan drivers (${why}); falling back to the software adapter ${relative(root, soft).startsWith('..') ? soft : relative(root, soft)}`);
        status = (await runChild({ ...env, VK_ICD_FILENAMES: soft }, progress)).status;
        if (status === NO_ADAPTER) status = 1;
      }
    }
  } finally {
    progress.stop();
    if (xdg) rmSync(xdg, { recursive: true, force: true });
  }
  process.exit(status ?? 1);
}

function isDir(p) {
  try {
    return statSync(p).isDirectory();
  } catch {
    return false;
  }
}

/** The workload child while it runs (signals to the launcher go to it). */
let current = null;

/** Splits a stream's text into lines for `line`; returns the function that ends it (a last partial line). */
function eachLine(stream, line) {
  let pending = '';
  stream.setEncoding('utf8');
  stream.on('data', (chunk) => {
    pending += chunk;
    let nl;
    while ((nl = pending.indexOf('\n')) >= 0) {
      line(pending.slice(0, nl));
      pending = pending.slice(nl + 1);
    }
  });
  return () => {
    if (pending) line(pending);
    pending = '';
  };
}

/**
 * Runs this script as the workload child: its IPC messages (lines, progress) and stdout drawn through
 * `progress`, its stderr line by line through a filter of dawn.node's adapter noise. Resolves with its
 * status, the reasons Dawn gave for the drivers it refused, and the child's no-adapter message, if any.
 */
function runChild(env, progress) {
  return new Promise((resolve) => {
    const child = current = spawn(process.execPath, process.argv.slice(1), { stdio: ['inherit', 'pipe', 'pipe', 'ipc'], env });
    const refused = [];
    let noAdapter = null;
    child.on('message', (m) => {
      if (m.t === 'log') progress.log(m.s);
      else if (m.t === 'start') progress.start(m.s);
      else if (m.t === 'detail') progress.detail(m.s);
      else if (m.t === 'stop') progress.stop();
      else if (m.t === 'no-adapter') noAdapter = m.s;
    });
    const endOut = eachLine(child.stdout, (l) => progress.log(l));
    const err = (l) => progress.log(l, process.stderr);
    /** A "Warning: ..." line held until the next one says whether it opens an adapter's block. */
    let held = null, heldTimer = null;
    let inBlock = false;
    const flushHeld = () => {
      if (held !== null) err(held);
      held = null;
    };
    const line = (l) => {
      clearTimeout(heldTimer);
      if (inBlock) {
        // The block's indented lines (" - While ...", "    at InitializeImpl (/home/runner/...)"), then a blank one.
        const indented = /^\s/.test(l);
        if (!indented || !l.trim()) inBlock = false;
        if (indented || !l.trim()) return;
      }
      if (held !== null && /^\s*- While initializing adapter/.test(l)) {
        refused.push(held.replace(/^Warning:\s*/, ''));
        held = null;
        inBlock = true;
        return;
      }
      flushHeld();
      // Lavapipe reports a million dynamic buffers; Dawn says each time that it caps them at 16.
      if (/^Warning: .* artificially reduced from \d+ to \d+ to fit dynamic offset allocation limit\.?$/.test(l)) return;
      if (/^Warning: /.test(l)) {
        // An adapter's block comes in one write: a warning alone for long is an ordinary one.
        held = l;
        heldTimer = setTimeout(flushHeld, 200);
        return;
      }
      err(l);
    };
    const endErr = eachLine(child.stderr, line);
    // Done when the process has ended, its pipes are drained and its IPC channel is closed (its last
    // messages read).
    const closed = new Promise((r) => child.on('close', (code, signal) => r(code ?? 128 + (constants.signals[signal] ?? 0))));
    const disconnected = new Promise((r) => child.on('disconnect', r));
    Promise.all([closed, disconnected]).then(([status]) => {
      endOut();
      endErr();
      clearTimeout(heldTimer);
      flushHeld();
      current = null;
      resolve({ status, refused, noAdapter });
    });
  });
}

// --------------------------------------------------------------------------------------------- progress

/**
 * One line about what runs now and for how long, shown once it has run a second: on a terminal
 * redrawn in place, else printed every ~10 s without other output. log() prints a line of output
 * (to `out`, or to the stream given) around it.
 */
function createProgress(out = process.stdout) {
  const tty = !!out.isTTY;
  let label = null, detail = '', t0 = 0, shown = false, lastLine = Date.now();
  const text = () => `… ${label}${detail ? `: ${detail}` : ''} (${Math.floor((Date.now() - t0) / 1000)} s)`;
  const clear = () => {
    if (shown) out.write('\r\x1b[2K');
    shown = false;
  };
  const tick = () => {
    if (label === null || Date.now() - t0 < 1000) return;
    if (tty) {
      const t = text();
      const w = (out.columns || 100) - 1;
      out.write(`\r\x1b[2K${t.length > w ? `${t.slice(0, w - 1)}…` : t}`);
      shown = true;
    } else if (Date.now() - lastLine >= 10_000) {
      out.write(`  ${text()}\n`);
      lastLine = Date.now();
    }
  };
  setInterval(tick, tty ? 250 : 1000).unref();
  return {
    start(l) { label = l; detail = ''; t0 = Date.now(); },
    detail(d) { detail = d; },
    stop() { clear(); label = null; },
    log(s, stream = out) {
      clear();
      stream.write(`${s}\n`);
      lastLine = Date.now();
    },
  };
}

/** The child's side of the progress line: everything to the launcher, in order, over IPC. */
function ipcProgress() {
  let last = Promise.resolve();
  const send = (t, s) => { last = new Promise((r) => process.send({ t, s }, () => r())); };
  return {
    start: (l) => send('start', l),
    detail: (d) => send('detail', d),
    stop: () => send('stop'),
    log: (s) => send('log', s),
    noAdapter: (s) => send('no-adapter', s),
    /** Resolves when every message has been handed to the channel (before process.exit). */
    flush: () => last,
  };
}

const secs = (ms) => (ms < 60_000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.floor(ms / 60_000)} min ${((ms % 60_000) / 1000).toFixed(0)} s`);

// --------------------------------------------------------------------------------------------- workload

async function workload() {
  const tStart = Date.now();
  // Run alone (WEBINFER_START_CHILD=1 node scripts/start.mjs), it draws its own progress line.
  const progress = process.send ? ipcProgress() : createProgress();
  const log = (s = '') => progress.log(s);
  const exit = async (code) => {
    await progress.flush?.();
    process.exit(code);
  };
  const { create, globals } = await import('webgpu');
  Object.assign(globalThis, globals);
  const { createEngine } = await import('webinfer');
  const { runDefaultWorkload, runModelWorkload, formatTable, sig3 } = await import(join(root, '.cache/bundles/workload.js'));

  let engine;
  try {
    engine = await createEngine({ gpu: create([]), powerPreference: 'high-performance' });
  } catch (e) {
    if (!/no WebGPU adapter/.test(e.message)) throw e;
    if (progress.noAdapter) progress.noAdapter(e.message);
    else process.stderr.write(`${e.message}\n`);
    await exit(NO_ADAPTER);
  }
  const f = engine.features;
  const a = engine.adapter;
  log(`adapter: ${[a.vendor, a.architecture, a.description].filter(Boolean).join(' / ') || 'unknown'}`);
  log(`features: shader-f16 ${f.f16 ? 'yes' : 'no'}, subgroups ${f.subgroups ? `yes (size ${f.subgroupSize ?? `${f.subgroupMinSize}-${f.subgroupMaxSize}`})` : 'no'}, timestamp-query ${f.timestampQuery ? 'yes' : 'no'}`);
  log(`limits: workgroup storage ${engine.limits.maxComputeWorkgroupStorageSize} B, storage binding ${(engine.limits.maxStorageBufferBindingSize / 2 ** 20).toFixed(0)} MiB`);
  log('\neach operation, checked against the float64 reference, then timed:');

  const t0 = Date.now();
  const rows = await runDefaultWorkload(engine, {
    onStart: (label, i, n) => progress.start(`[${i + 1}/${n}] ${label}`),
    onProgress: (d) => progress.detail(d),
    onRow: (row, i, n) => {
      progress.stop();
      const verdict = row.error ? `ERROR: ${row.error}` : `${row.pass ? 'pass' : 'FAIL'}, ${sig3(row.medianMs)} ms`;
      log(`[${i + 1}/${n}] ${row.op} ${row.backend} ${row.dtype} ${row.shape}: ${verdict}`);
    },
  });
  log(`\n${formatTable(rows)}\n`);
  const bad = rows.filter((r) => !r.pass);
  log(`${rows.length - bad.length} of ${rows.length} checks passed in ${secs(Date.now() - t0)}`);
  log('check: the worst error over the SPEC §6 tolerance, pass ≤ 1 (argmax, sample: 0 when every id is the reference\'s)');
  log('median ms: wall clock around a drained queue, median of 3-5 calls after a warm-up; GFLOP/s, GB/s: the FLOPs counted '
    + 'and the least bytes the kernel must move, over that time');

  // A model: a small Llama-shaped one serves a batch of prompts, with bf16 random weights made on the GPU,
  // then quantized on load (q4) from random f32 weights.
  let modelFailed = false;
  for (const dtype of ['bf16', 'q4']) {
    const what = dtype === 'bf16' ? 'bf16 random weights made on the GPU' : 'random weights quantized on load to 4 bits';
    log(`\ngenerating with a small Llama-shaped model (${what})...`);
    const tm = Date.now();
    progress.start(`model ${dtype}`);
    try {
      const m = await runModelWorkload(engine, { dtype, onProgress: (d) => progress.detail(d) });
      progress.stop();
      log(`model: ${m.config}`);
      log(`${m.prompts} prompts (${m.promptTokens} tokens) served together: ${m.generated} new tokens in ${m.seconds.toFixed(2)} s = `
        + `${m.tokensPerSecond.toFixed(1)} tokens/s; ${m.steps} steps of ${sig3(m.stepMs)} ms on average, the host ${(100 * m.hostShare).toFixed(0)}% of a step `
        + `(${secs(Date.now() - tm)} with making the weights and compiling)`);
      if (!(m.tokensPerSecond > 0)) throw new Error(`no tokens generated (${m.generated})`);
    } catch (e) {
      progress.stop();
      modelFailed = true;
      log(`model (${dtype}): FAILED: ${e.message}`);
    }
  }
  engine.destroy();
  log(`\nnpm start: ${bad.length || modelFailed ? 'FAILED' : 'all passed'} in ${secs(Date.now() - tStart)}`);
  await exit(bad.length || modelFailed ? 1 : 0);
}

if (process.env[CHILD]) await workload();
else await launch();
