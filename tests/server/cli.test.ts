// The command line of `webinfer serve`: its arguments (each bad one named with what was expected and
// what came) and bin/webinfer.mjs's dispatch. CPU only; the command serving a model is server.test.ts.
import { spawn, spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parseServeArgs, shellWord, sourceName, USAGE, webgpuMissing } from '../../src/serve/cli';

const bin = join(dirname(fileURLToPath(import.meta.url)), '../../bin/webinfer.mjs');

describe('webinfer serve: the command line', () => {
  it('parses the checkpoint and every option, in both --flag value and --flag=value forms', () => {
    expect(parseServeArgs(['/m/llama'])).toEqual({ source: '/m/llama', port: 8000, host: '127.0.0.1', warmup: true });
    expect(parseServeArgs(['--port', '0', 'x.gguf', '--host=0.0.0.0', '--dtype', 'q4', '--max-queue=8', '--kv-blocks', '64', '--name', 'tiny', '--api-key', 'k',
      '--cors', 'http://localhost:5173', '--allowed-hosts=a.test,10.0.0.5', '--body-timeout', '5', '--stream-stall=7', '--no-warmup', '--speculative', 'ngram']))
      .toEqual({ source: 'x.gguf', port: 0, host: '0.0.0.0', dtype: 'q4', maxQueue: 8, kvBlocks: 64, name: 'tiny', apiKey: 'k', speculative: 'ngram',
        cors: 'http://localhost:5173', allowedHosts: ['a.test', '10.0.0.5'], bodyTimeoutMs: 5000, streamStallMs: 7000, warmup: false });
    expect((parseServeArgs(['m', '--host', '[::1]']) as { host: string }).host).toBe('::1');
    expect((parseServeArgs(['m', '--speculative=draft:/m/small.gguf']) as { speculative: unknown }).speculative).toEqual({ draft: '/m/small.gguf' });
    expect((parseServeArgs(['m', '--image-urls']) as { imageUrls?: boolean }).imageUrls).toBe(true);
    expect((parseServeArgs(['m']) as { imageUrls?: boolean }).imageUrls).toBeUndefined();
    // The model id defaults to the file's or folder's name, never the path as typed.
    expect([sourceName('/home/me/models/tiny-q4_k_m.gguf'), sourceName('./Llama-3.2-1B/'), sourceName('hf:org/repo'), sourceName('C:\\m\\x.gguf')])
      .toEqual(['tiny-q4_k_m.gguf', 'Llama-3.2-1B', 'repo', 'x.gguf']);
    expect(parseServeArgs(['m', '--help'])).toBe('help');
    expect(USAGE).toContain('--kv-blocks');
  });

  it('refuses bad arguments by name: the flag, what it takes, what came', () => {
    const cases: [string[], string][] = [
      [[], "webinfer serve: <checkpoint>: expected a checkpoint folder or a .gguf file, got none"],
      [['a', 'b'], "webinfer serve: <checkpoint>: expected one checkpoint folder or .gguf file, got a second one, 'b'"],
      [['m', '--port', 'http'], "webinfer serve: --port: expected an integer from 0 to 65535 (0: any free port), got 'http'"],
      [['m', '--port', '70000'], "--port: expected an integer from 0 to 65535 (0: any free port), got '70000'"],
      [['m', '--port'], 'webinfer serve: --port: expected a value, got none'],
      [['m', '--port', '--host', 'h'], 'webinfer serve: --port: expected a value, got none'],
      [['m', '--dtype', 'int4'], "webinfer serve: --dtype: expected one of checkpoint, f32, f16, bf16, q8, q4, got 'int4'"],
      [['m', '--max-queue', '0'], "webinfer serve: --max-queue: expected a positive integer, got '0'"],
      [['m', '--kv-blocks=1.5'], "webinfer serve: --kv-blocks: expected a positive integer, got '1.5'"],
      [['m', '--speculative', 'draft:'], "webinfer serve: --speculative: expected 'ngram' (n-gram lookup in each request's prompt and output) or 'draft:PATH' (a draft model's folder or .gguf), got 'draft:'"],
      [['m', '--prot', '80'], 'webinfer serve: --prot: expected one of the options --port, --host, --dtype, --max-queue, --kv-blocks, --speculative, --name, --api-key, --cors, --allowed-hosts, --body-timeout, --stream-stall, --image-urls, --no-warmup, --help, got an unknown option'],
      // A bad address is the host's problem, not the port's.
      [['m', '--host', '256.1.1.1'], "webinfer serve: --host: expected an address (127.0.0.1, 0.0.0.0, ::) or a host name, got '256.1.1.1'"],
      [['m', '--host', 'a b'], "webinfer serve: --host: expected an address (127.0.0.1, 0.0.0.0, ::) or a host name, got 'a b'"],
      [['m', '--cors', 'localhost:5173/x'], "webinfer serve: --cors: expected an origin (scheme://host[:port], e.g. http://localhost:5173) or '*', got 'localhost:5173/x'"],
      [['m', '--body-timeout', '0'], "webinfer serve: --body-timeout: expected a whole number of seconds from 1 to 86400, got '0'"],
    ];
    for (const [argv, message] of cases) expect(() => parseServeArgs(argv), argv.join(' ')).toThrow(message);
  });

  it('bin/webinfer.mjs: usage and exit 2 for no command or an unknown one; serve with a bad flag exits 2 naming it', () => {
    const run = (...args: string[]) => spawnSync(process.execPath, [bin, ...args], { encoding: 'utf8' });
    const none = run();
    expect([none.status, none.stderr]).toEqual([2, expect.stringContaining('Usage: webinfer <command>')]);
    const unknown = run('sevre', 'x');
    expect(unknown.status).toBe(2);
    expect(unknown.stderr).toContain("webinfer: command: expected one of serve, got 'sevre'");
    const help = run('--help');
    expect([help.status, help.stdout]).toEqual([0, expect.stringContaining('serve <checkpoint folder | file.gguf>')]);
    // Needs dist/serve.js (npm run build).
    const bad = run('serve', 'm', '--dtype', 'int4');
    expect(bad.stderr).toContain("webinfer serve: --dtype: expected one of checkpoint, f32, f16, bf16, q8, q4, got 'int4'");
    expect(bad.status).toBe(2);
  });

  it('with no adapter named and no GPU, `webinfer serve` finds a software driver and says which, or fails saying what to install (Node)', async () => {
    // As a new user runs it: no VK_ICD_FILENAMES, no XDG_RUNTIME_DIR. Needs dist/serve.js (npm run build).
    const env = { ...process.env };
    delete env.VK_ICD_FILENAMES;
    delete env.VK_DRIVER_FILES;
    delete env.XDG_RUNTIME_DIR;
    delete env.WEBINFER_SOFTWARE_ADAPTER;
    const golden = join(dirname(fileURLToPath(import.meta.url)), '../../../shared/goldens/llama-gqa');
    // With the golden as its own draft model (--speculative draft:PATH loads it first, on the same adapter).
    const child = spawn(process.execPath, [bin, 'serve', golden, '--port', '0', '--no-warmup', '--speculative', `draft:${golden}`], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
    let code: number | null | undefined;
    void exited.then((c) => (code = c));
    for (let t = 0; t < 1200 && code === undefined && !/serving 'llama-gqa' on/.test(out); t++) await new Promise((r) => setTimeout(r, 100));
    if (code === undefined) {
      // It serves: on this machine's GPU, or on a software driver it names.
      expect(out).toMatch(/serving 'llama-gqa' on http:\/\/127\.0\.0\.1:\d+/);
      expect(err).toMatch(/adapter: /);
      expect(err).toMatch(/loaded the draft llama-gqa in [\d.]+ s/);
      if (/software: slow/.test(err) && !/VK_ICD_FILENAMES/.test(JSON.stringify(process.env.VK_ICD_FILENAMES ?? ''))) {
        expect(err).toMatch(/running on the CPU with the software driver \S+|adapter: .*software/);
      }
      child.kill('SIGINT');
      expect(await exited).toBe(0);
    } else {
      expect(code).toBe(1);
      expect(err).toContain('no WebGPU adapter is available');
      expect(err).toContain('apt-get install mesa-vulkan-drivers');
    }
    // Mesa's notice about XDG_RUNTIME_DIR is ours to silence.
    expect(err).not.toContain('XDG_RUNTIME_DIR is invalid');
  }, 150_000);

  it("without the 'webgpu' package, `webinfer serve` names the exact command that runs the same invocation with it", () => {
    // The message: the user's own arguments, quoted for the shell; npx (npm_command=exec) gets npx with both packages.
    expect(shellWord("it's here")).toBe(`'it'\\''s here'`);
    expect(shellWord('./models/tiny-q4.gguf')).toBe('./models/tiny-q4.gguf');
    const argv = ['/m/my model', '--port', '0'];
    expect(webgpuMissing(argv, { npm_command: 'exec' }, 'cannot find webgpu'))
      .toContain("run it with both packages: npx -p webinfer -p webgpu webinfer serve '/m/my model' --port 0;");
    expect(webgpuMissing(argv, {}, 'cannot find webgpu'))
      .toContain("install it beside webinfer (npm install webgpu), then run again: npx webinfer serve '/m/my model' --port 0;");
    // The installed command, as a user without webgpu has it: bin/ and the built dist/ (self-contained
    // bundles) in a folder with no node_modules above it. Needs dist/ (npm run build).
    const dir = mkdtempSync(join(tmpdir(), 'webinfer-nogpu-'));
    try {
      const root = join(dirname(fileURLToPath(import.meta.url)), '../..');
      mkdirSync(join(dir, 'bin'));
      mkdirSync(join(dir, 'dist'));
      copyFileSync(bin, join(dir, 'bin/webinfer.mjs'));
      for (const f of ['serve.js', 'webinfer.js']) copyFileSync(join(root, 'dist', f), join(dir, 'dist', f));
      const env: Record<string, string | undefined> = { ...process.env, npm_command: 'exec' };
      delete env.NODE_PATH;
      const r = spawnSync(process.execPath, [join(dir, 'bin/webinfer.mjs'), 'serve', 'tiny.gguf', '--port', '0'], { encoding: 'utf8', env, cwd: dir });
      expect(r.status).toBe(1);
      expect(r.stderr).toContain("webinfer serve: WebGPU: expected the 'webgpu' package (dawn.node) beside webinfer in Node, got none");
      expect(r.stderr).toContain('npx -p webinfer -p webgpu webinfer serve tiny.gguf --port 0;');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
