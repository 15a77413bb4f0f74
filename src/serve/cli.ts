// `webinfer serve <checkpoint folder | file.gguf>`: loads a checkpoint on the GPU and serves it over HTTP
// with OpenAI's routes (serve() in http.ts). Built to dist/serve.js, which imports the library from
// ./webinfer.js beside it: `npx webinfer serve ...` runs it in Node (bin/webinfer.mjs calls main), and
// `deno run -A dist/serve.js ...` runs it in Deno (import.meta.main). Everything comes from the public
// entry point, so the bundle shares the library's classes (an OpenAIError is one class in both).
import { dawnNodeFlags } from './dawn.js';
import { createEngine, loadCheckpoint, serve, warmup, WebinferError, type Engine, type Model, type ServeLoadOptions } from '../index.js';
import { isBadIPv4, isCorsOrigin } from './addresses.js';

export const USAGE = `Usage: webinfer serve <checkpoint folder | file.gguf> [options]
       deno run -A dist/serve.js <checkpoint folder | file.gguf> [options]

Loads the checkpoint on the GPU and serves it over HTTP with OpenAI's API:
POST /v1/chat/completions, POST /v1/completions, GET /v1/models, GET /health, and GET /metrics
(Prometheus, under vLLM's metric names, for routers and dashboards).

Options:
  --port N          port to listen on (default 8000; 0 takes any free port)
  --host ADDR       address to listen on (default 127.0.0.1, this machine only; 0.0.0.0 for every
                    interface: then set --api-key)
  --dtype D         weights on the GPU: checkpoint (default), f32, f16, bf16, q8, q4
  --max-queue N     requests waiting or running at most, past it 503 (default 256)
  --kv-blocks N     blocks of the KV cache (default: the model's own choice)
  --speculative M   speculative decoding, verified in the step (output unchanged): ngram (prompt
                    lookup: proposals from each request's own prompt and output), or draft:PATH (a
                    smaller model of the same tokenizer, a folder or .gguf like SOURCE, proposes)
  --name ID         the model id clients send (default: the folder's or file's name, without its path)
  --api-key KEY     ask clients for "Authorization: Bearer KEY" (default: no key)
  --cors ORIGIN     let web pages of ORIGIN (e.g. http://localhost:5173, or * for any) call the server
                    (default: off, so a page you visit cannot use your model)
  --allowed-hosts H names a client may reach the server by, comma-separated (default: loopback names
                    when bound to loopback, any otherwise)
  --body-timeout S  seconds a client has to send its request body (default 30)
  --stream-stall S  seconds a stream waits for a client that stopped reading before ending it (default 30)
  --image-urls      download the http(s) image URLs clients send (default: data: URLs only; a client
                    could otherwise make the server reach any address it can, its own network's too)
  --no-warmup       listen at once, without first running the common request shapes (their GPU
                    pipelines then compile on the first requests, which wait for them)
  -h, --help        this text

In Node the GPU comes from the 'webgpu' package (dawn.node); Deno has its own.
`;

const OP = 'webinfer serve';
const DTYPES = ['checkpoint', 'f32', 'f16', 'bf16', 'q8', 'q4'] as const;

/** A bad command line: the message names the argument, what was expected and what came; exit 2. */
export class UsageError extends WebinferError {
  constructor(arg: string, expected: string, got: string) {
    super(`${OP}: ${arg}: expected ${expected}, got ${got}`);
    this.name = 'UsageError';
  }
}

export interface ServeArgs {
  source: string;
  port: number;
  host: string;
  dtype?: (typeof DTYPES)[number];
  maxQueue?: number;
  kvBlocks?: number;
  speculative?: 'ngram' | { draft: string };
  name?: string;
  apiKey?: string;
  cors?: string;
  allowedHosts?: string[];
  bodyTimeoutMs?: number;
  streamStallMs?: number;
  imageUrls?: boolean;
  warmup: boolean;
}

const shown = (s: string | undefined): string => (s === undefined ? 'none' : `'${s}'`);

function integer(flag: string, v: string, min: number, max: number, what: string): number {
  const n = /^\d+$/.test(v) ? Number(v) : NaN;
  if (!(Number.isSafeInteger(n) && n >= min && n <= max)) throw new UsageError(flag, what, shown(v));
  return n;
}

/** The arguments after `serve`; 'help' for -h/--help. Throws UsageError. */
export function parseServeArgs(argv: readonly string[]): ServeArgs | 'help' {
  const flags = ['--port', '--host', '--dtype', '--max-queue', '--kv-blocks', '--speculative', '--name', '--api-key', '--cors', '--allowed-hosts', '--body-timeout', '--stream-stall'];
  const out: Partial<ServeArgs> = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '-h' || a === '--help') return 'help';
    if (a === '--no-warmup' || a === '--warmup') { out.warmup = a === '--warmup'; continue; }
    if (a === '--image-urls') { out.imageUrls = true; continue; }
    if (!a.startsWith('-') || a === '-') {
      if (out.source !== undefined) throw new UsageError('<checkpoint>', 'one checkpoint folder or .gguf file', `a second one, ${shown(a)}`);
      out.source = a;
      continue;
    }
    const eq = a.indexOf('=');
    const flag = eq < 0 ? a : a.slice(0, eq);
    if (!flags.includes(flag)) throw new UsageError(flag.slice(0, 64), `one of the options ${flags.join(', ')}, --image-urls, --no-warmup, --help`, 'an unknown option');
    let v: string | undefined;
    if (eq >= 0) v = a.slice(eq + 1);
    else {
      v = argv[i + 1];
      // A flag followed by another flag (or nothing) has no value; a negative number is not a flag.
      if (v !== undefined && v.startsWith('--')) v = undefined;
      else i++;
    }
    if (v === undefined || v === '') throw new UsageError(flag, 'a value', 'none');
    switch (flag) {
      case '--port': out.port = integer(flag, v, 0, 65535, 'an integer from 0 to 65535 (0: any free port)'); break;
      case '--host':
        if (isBadIPv4(v) || !/^(\[?[0-9a-fA-F:.]+\]?|[A-Za-z0-9.-]+)$/.test(v)) {
          throw new UsageError(flag, 'an address (127.0.0.1, 0.0.0.0, ::) or a host name', shown(v));
        }
        out.host = v.replace(/^\[(.*)\]$/, '$1');
        break;
      case '--cors':
        if (!isCorsOrigin(v)) throw new UsageError(flag, "an origin (scheme://host[:port], e.g. http://localhost:5173) or '*'", shown(v));
        out.cors = v;
        break;
      case '--allowed-hosts': {
        const hosts = v.split(',').map((h) => h.trim()).filter(Boolean);
        if (!hosts.length || hosts.some((h) => /[\s/]/.test(h))) throw new UsageError(flag, "host names or addresses without ports, comma-separated (or '*')", shown(v));
        out.allowedHosts = hosts;
        break;
      }
      case '--body-timeout': out.bodyTimeoutMs = integer(flag, v, 1, 86400, 'a whole number of seconds from 1 to 86400') * 1000; break;
      case '--stream-stall': out.streamStallMs = integer(flag, v, 1, 86400, 'a whole number of seconds from 1 to 86400') * 1000; break;
      case '--dtype':
        if (!(DTYPES as readonly string[]).includes(v)) throw new UsageError(flag, `one of ${DTYPES.join(', ')}`, shown(v));
        out.dtype = v as ServeArgs['dtype'];
        break;
      case '--max-queue': out.maxQueue = integer(flag, v, 1, 1e9, 'a positive integer'); break;
      case '--kv-blocks': out.kvBlocks = integer(flag, v, 1, 1e9, 'a positive integer'); break;
      case '--speculative':
        if (v === 'ngram') out.speculative = v;
        else if (v.startsWith('draft:') && v.length > 6) out.speculative = { draft: v.slice(6) };
        else throw new UsageError(flag, "'ngram' (n-gram lookup in each request's prompt and output) or 'draft:PATH' (a draft model's folder or .gguf)", shown(v));
        break;
      case '--name': out.name = v; break;
      case '--api-key': out.apiKey = v; break;
    }
  }
  if (out.source === undefined) throw new UsageError('<checkpoint>', 'a checkpoint folder or a .gguf file', 'none');
  return { port: 8000, host: '127.0.0.1', warmup: true, ...out } as ServeArgs;
}

// ---------------------------------------------------------------------------------- the runtime

/** What main needs of Node or Deno. */
interface Host {
  write(stream: 'out' | 'err', text: string): void;
  isTerminal(stream: 'err'): boolean;
  /** Calls f on SIGINT and SIGTERM. */
  onSignal(f: (name: string) => void): void;
  exit(code: number): never;
  /** The GPU entry point; `argv` (serve's arguments) lets a missing dependency's message give the exact command to run. */
  gpu(argv: readonly string[]): Promise<GPU>;
  /**
   * With no adapter from the system's drivers: a GPU entry point on a software Vulkan driver (Mesa's
   * lavapipe, else Chromium's SwiftShader), or null when there is none to try (or one was named already).
   * The Vulkan loader reads VK_ICD_FILENAMES each time an instance is made, so setting it and making a
   * new instance in this process is enough.
   */
  softwareGpu?(say: (line: string) => void): Promise<GPU | null>;
}

/** Software Vulkan drivers to try, best first: Mesa 25 lavapipe as .ci/install.sh unpacks it in a
 *  checkout, then Chromium's SwiftShader. (A system lavapipe in /usr/share/vulkan/icd.d is one the
 *  loader has already offered: Dawn takes Mesa 24 and later, and refuses Debian 12's Mesa 22.) */
function softwareDrivers(packageRoot: string, exists: (p: string) => boolean): string[] {
  return [`${packageRoot}/.cache/lavapipe25/lvp_icd.json`, '/usr/lib/chromium/vk_swiftshader_icd.json'].filter(exists);
}

interface DenoHost {
  args: string[];
  stdout: { writeSync(b: Uint8Array): number };
  stderr: { writeSync(b: Uint8Array): number; isTerminal(): boolean };
  addSignalListener(sig: string, f: () => void): void;
  exit(code: number): never;
  build: { os: string };
}
interface NodeProcess {
  stdout: { write(s: string): boolean };
  stderr: { write(s: string): boolean; isTTY?: boolean };
  once(sig: string, f: () => void): unknown;
  on(sig: string, f: () => void): unknown;
  exit(code: number): never;
}

function host(): Host {
  const deno = (globalThis as { Deno?: DenoHost }).Deno;
  if (deno) {
    const enc = new TextEncoder();
    return {
      write: (s, t) => void (s === 'out' ? deno.stdout : deno.stderr).writeSync(enc.encode(t)),
      isTerminal: () => deno.stderr.isTerminal(),
      onSignal: (f) => {
        deno.addSignalListener('SIGINT', () => f('SIGINT'));
        // Windows has no SIGTERM listener in Deno.
        if (deno.build.os !== 'windows') deno.addSignalListener('SIGTERM', () => f('SIGTERM'));
      },
      exit: (c) => deno.exit(c),
      async gpu() {
        const gpu = (globalThis as { navigator?: { gpu?: GPU } }).navigator?.gpu;
        if (!gpu) throw new WebinferError(`${OP}: WebGPU: expected navigator.gpu in Deno, got none (a Deno without WebGPU)`);
        return gpu;
      },
    };
  }
  const proc = (globalThis as { process?: NodeProcess }).process;
  if (!proc) throw new WebinferError(`${OP}: runtime: expected Node or Deno, got neither`);
  return {
    write: (s, t) => void (s === 'out' ? proc.stdout : proc.stderr).write(t),
    isTerminal: () => proc.stderr.isTTY === true,
    onSignal: (f) => {
      proc.on('SIGINT', () => f('SIGINT'));
      proc.on('SIGTERM', () => f('SIGTERM'));
    },
    exit: (c) => proc.exit(c),
    async softwareGpu(say) {
      const env = (globalThis as { process?: { env: Record<string, string | undefined> } }).process!.env;
      if (env.VK_ICD_FILENAMES || env.VK_DRIVER_FILES) return null;
      const fs = 'node:fs';
      const { existsSync } = (await import(/* @vite-ignore */ fs)) as { existsSync(p: string): boolean };
      // dist/serve.js's folder's parent (written without `new URL('..', import.meta.url)`, which the
      // bundler would take for an asset to inline).
      const here = decodeURIComponent(String(import.meta.url).replace(/^file:\/\//, ''));
      const root = here.split('/').slice(0, -2).join('/');
      const driver = softwareDrivers(root, existsSync)[0];
      if (!driver) return null;
      say(`no adapter from the system's Vulkan drivers: running on the CPU with the software driver ${driver} (slow; set VK_ICD_FILENAMES to choose another)\n`);
      env.VK_ICD_FILENAMES = driver;
      return this.gpu([]);
    },
    async gpu(argv) {
      // dawn.node: not a dependency of the library (a page never needs it), loaded only here.
      const specifier = 'webgpu';
      let mod: { create(flags: string[]): GPU; globals: object };
      try {
        mod = (await import(/* @vite-ignore */ specifier)) as typeof mod;
      } catch (e) {
        const env = (globalThis as { process?: { env: Record<string, string | undefined> } }).process!.env;
        throw new WebinferError(webgpuMissing(argv, env, (e as Error).message));
      }
      Object.assign(globalThis, mod.globals);
      // f16 and the subgroup matrices where Dawn hides them (serve/dawn.ts).
      return mod.create(dawnNodeFlags());
    },
  };
}

/** A word as a POSIX shell reads it back unchanged: bare when it is safe, else in single quotes. */
export function shellWord(w: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(w) ? w : `'${w.replaceAll("'", `'\\''`)}'`;
}

/**
 * What `webinfer serve` says in Node when the 'webgpu' package (dawn.node) cannot be imported: the exact
 * command that runs this same invocation with it. webgpu stays an optional peer dependency rather than a
 * dependency: a page or a Deno program that installs webinfer never needs a native Dawn build for its
 * platform, so only the command line asks for it. npm sets npm_command=exec under npx (and `npm exec`),
 * whose packages live in a cache no `npm install` reaches: there the command is npx with both packages.
 */
export function webgpuMissing(argv: readonly string[], env: Record<string, string | undefined>, cause: string): string {
  const args = ['serve', ...argv].map(shellWord).join(' ');
  const how = env.npm_command === 'exec'
    ? `run it with both packages: npx -p webinfer -p webgpu webinfer ${args}`
    : `install it beside webinfer (npm install webgpu), then run again: npx webinfer ${args}`;
  return `${OP}: WebGPU: expected the 'webgpu' package (dawn.node) beside webinfer in Node, got none (${cause}); ${how}; or run in Deno, which has WebGPU built in (deno run -A dist/serve.js ${argv.map(shellWord).join(' ')})`;
}

const mb = (n: number): string => (n / 1e6).toFixed(1);

/** The last part of a path or URL (a trailing slash dropped): 'model.gguf', 'Llama-3.2-1B'. */
export function sourceName(source: string): string {
  const parts = source.replace(/[?#].*$/, '').split(/[\\/]/).filter(Boolean);
  return parts[parts.length - 1] ?? source;
}

/**
 * Runs `webinfer serve` with the arguments after `serve`; resolves with the exit code once the server has
 * stopped (0 after SIGINT/SIGTERM, 1 when loading or listening failed, 2 for a bad command line).
 */
export async function main(argv: readonly string[]): Promise<number> {
  const h = host();
  const err = (t: string): void => h.write('err', t);
  let args: ServeArgs | 'help';
  try {
    args = parseServeArgs(argv);
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    err(`${e.message}\n\n${USAGE}`);
    return 2;
  }
  if (args === 'help') {
    h.write('out', USAGE);
    return 0;
  }

  let engine: Engine | undefined;
  let model: Model | undefined;
  let draft: Model | undefined;
  const release = (): void => {
    model?.destroy();
    draft?.destroy();
    engine?.destroy();
  };
  try {
    try {
      engine = await createEngine({ gpu: await h.gpu(argv), powerPreference: 'high-performance' });
    } catch (e) {
      if (!(e instanceof WebinferError && /no WebGPU adapter/.test(e.message)) || !h.softwareGpu) throw e;
      const soft = await h.softwareGpu(err);
      if (soft === null) throw e;
      engine = await createEngine({ gpu: soft, powerPreference: 'high-performance' });
    }
    const a = engine.adapter;
    err(`adapter: ${[a.vendor, a.architecture, a.description].filter(Boolean).join(' / ') || 'unknown'}${a.software ? ' (software: slow)' : ''}\n`);
    const ckpt = await loadCheckpoint(args.source);
    const o: ServeLoadOptions = { ...ckpt, onProgress: progress(h, ckpt.name) };
    if (args.speculative === 'ngram') o.speculative = { method: 'ngram' };
    else if (args.speculative) {
      // The draft first, in the same weights' form as the target (--dtype), with its own cache.
      const d = await loadCheckpoint(args.speculative.draft);
      const t1 = Date.now();
      draft = await engine.loadModel({ ...d, onProgress: progress(h, d.name), name: `${sourceName(args.speculative.draft)} (draft)`, ...(args.dtype ? { dtype: args.dtype } : {}) });
      err(`loaded the draft ${d.name} in ${((Date.now() - t1) / 1000).toFixed(1)} s: ${mb(draft.weightBytes)} MB of weights on the GPU\n`);
      o.speculative = { method: 'draft', draft };
    }
    if (args.dtype) o.dtype = args.dtype;
    if (args.kvBlocks) o.kvCache = { numBlocks: args.kvBlocks };
    // The id clients send: the name given, else the file's or folder's own name, never its path (a
    // path tells every client where the user keeps their files).
    o.name = args.name ?? sourceName(args.source);
    const t0 = Date.now();
    model = await engine.loadModel(o);
    err(`loaded ${ckpt.name} in ${((Date.now() - t0) / 1000).toFixed(1)} s: ${mb(model.weightBytes)} MB of weights on the GPU\n`);
  } catch (e) {
    err(`\n${e instanceof WebinferError ? e.message : (e as Error)?.stack ?? String(e)}\n`);
    release();
    return 1;
  }

  const stop = new AbortController();
  let stopping = false;
  h.onSignal((sig) => {
    if (stopping) {
      err(`${sig} again: exiting now\n`);
      h.exit(130);
    }
    stopping = true;
    err(`${sig}: stopping (the requests in flight are ended; ${sig} again exits at once)\n`);
    stop.abort();
  });
  if (args.warmup) {
    // Before listening: the common request shapes run once, so no client waits for their pipelines.
    try {
      await warmup(model, { onProgress: (line) => err(`${line}\n`), signal: stop.signal });
    } catch (e) {
      if (!stop.signal.aborted) err(`warm-up failed (serving anyway; first requests compile what they need): ${e instanceof Error ? e.message : String(e)}\n`);
    }
    if (stop.signal.aborted) {
      release();
      err('stopped\n');
      return 0;
    }
  }
  let server;
  try {
    server = await serve(model, {
      port: args.port, hostname: args.host, signal: stop.signal, log: (line) => err(`${line}\n`),
      ...(args.maxQueue ? { maxQueue: args.maxQueue } : {}), ...(args.apiKey ? { apiKey: args.apiKey } : {}),
      ...(args.cors ? { cors: args.cors } : {}), ...(args.allowedHosts ? { allowedHosts: args.allowedHosts } : {}),
      ...(args.bodyTimeoutMs ? { bodyTimeoutMs: args.bodyTimeoutMs } : {}), ...(args.streamStallMs ? { streamStallMs: args.streamStallMs } : {}),
      ...(args.imageUrls ? { imageUrls: true } : {}),
    });
  } catch (e) {
    err(`${e instanceof Error ? e.message : String(e)}\n`);
    release();
    return 1;
  }
  h.write('out', `serving '${model.id}' on ${server.url} (OpenAI base URL: ${server.url}/v1; Ctrl-C stops)\n`);
  await new Promise<void>((resolve) => (stop.signal.aborted ? resolve() : stop.signal.addEventListener('abort', () => resolve(), { once: true })));
  await server.close();
  release();
  err('stopped\n');
  return 0;
}

/** Load progress on stderr: one line redrawn on a terminal, a line per tenth in a log. */
function progress(h: Host, name: string): (loaded: number, total: number) => void {
  const tty = h.isTerminal('err');
  let lastTenth = -1;
  return (loaded, total) => {
    const pct = total > 0 ? Math.floor((100 * loaded) / total) : 100;
    const line = `loading ${name}: ${pct}% (${mb(loaded)} of ${mb(total)} MB)`;
    if (tty) h.write('err', `\r${line}${loaded >= total ? '\n' : ''}`);
    else if (Math.floor(pct / 10) > lastTenth) {
      lastTenth = Math.floor(pct / 10);
      h.write('err', `${line}\n`);
    }
  };
}

// `deno run -A dist/serve.js ...`: Deno marks the module it was started with.
const denoMain = (globalThis as { Deno?: DenoHost }).Deno;
if (denoMain && (import.meta as ImportMeta & { main?: boolean }).main) {
  void main(denoMain.args).then((code) => denoMain.exit(code), (e) => {
    console.error(e);
    denoMain.exit(1);
  });
}
