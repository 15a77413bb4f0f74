// Beyond one machine (issue 43): two `webinfer serve` processes behind a load balancer already in use,
// Debian's haproxy (`balance leastconn`, health checks on /health), all on loopback and started here.
// 64 chat completions from the official openai client through the balancer:
//   1. 24 at once: every reply is the golden's greedy tokens, and both servers served some (the
//      balancer's response header says which; each server's own /metrics counts the same);
//   2. 16 long streams at once; once each has its first chunk, one server is killed (SIGKILL): the
//      streams it was serving fail, and only those; the other server's streams finish correctly;
//   3. 24 more right after the kill, all served correctly by the survivor.
// The chat template here renders the message's text alone and the tokenizer is bytes (id = byte), so
// a message spelling the golden's prompt 2 (all ASCII) is exactly that prompt: its greedy tokens are HF's.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import { expect, it } from 'vitest';
import { byteTokenizerConfig } from '../cases/text_fixture';
import { checkpointFolder, llamaGqa } from './client';
import { parseExposition, sample, type Family } from './prometheus';

const root = join(dirname(fileURLToPath(import.meta.url)), '../..');
const HAPROXY = ['/usr/sbin/haproxy', '/usr/bin/haproxy'].find((p) => existsSync(p));
const ID = 'llama-gqa';
const HEADER = 'x-webinfer-backend';

/** A port free on loopback now (the balancer binds it a moment later). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      s.close(() => (typeof a === 'object' && a ? resolve(a.port) : reject(new Error(`no port: ${String(a)}`))));
    });
  });
}

interface Proc { child: ChildProcess; out: () => string; exited: Promise<number | null> }

function start(cmd: string, args: string[]): Proc {
  const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  return { child, out: () => out, exited: new Promise((resolve) => child.on('close', resolve)) };
}

/** `webinfer serve` on a free port (its warm-up on, so no client waits for a compile); resolves with its URL. */
async function webinfer(dir: string): Promise<Proc & { url: string }> {
  const p = start(process.execPath, [join(root, 'bin/webinfer.mjs'), 'serve', dir, '--port', '0']);
  let exited = false;
  void p.exited.then(() => (exited = true));
  for (let t = 0; t < 3000 && !exited; t++) {
    const m = /serving 'llama-gqa' on (http:\/\/127\.0\.0\.1:\d+)/.exec(p.out());
    if (m) return { ...p, url: m[1]! };
    await new Promise((r) => setTimeout(r, 100));
  }
  p.child.kill('SIGKILL');
  throw new Error(`webinfer serve did not print its URL (exited: ${exited}):\n${p.out()}`);
}

/** A chat request's outcome: its backend (the balancer's header) and its tokens, or what it threw. */
interface Outcome { i: number; backend: string | null; ids: number[] | null; error: string | null; finish: string | null; endedAt: number }

it('two `webinfer serve` behind haproxy (leastconn): 64 chat completions all correct, both serve, a killed server loses only its in-flight streams', async () => {
  if (!existsSync(join(root, 'dist/serve.js'))) throw new Error('dist/serve.js missing: run npm run build first');
  if (!HAPROXY) throw new Error('haproxy missing: .ci/install.sh installs it (apt-get install haproxy)');
  const golden = llamaGqa();
  const prompt = golden.prompts[2]!;
  const want = golden.greedy[2]!;
  expect(prompt.every((t) => t > 0 && t < 128), "prompt 2 is ASCII: a message's text can spell it").toBe(true);
  const content = String.fromCharCode(...prompt);

  const folder = checkpointFolder('webinfer-lb-');
  writeFileSync(join(folder.dir, 'tokenizer_config.json'), JSON.stringify({ ...byteTokenizerConfig(), chat_template: '{% for message in messages %}{{ message.content }}{% endfor %}' }));
  const work = mkdtempSync(join(tmpdir(), 'webinfer-haproxy-'));
  const procs: Proc[] = [];
  try {
    const [a, b] = await Promise.all([webinfer(folder.dir), webinfer(folder.dir)]);
    procs.push(a, b);
    const port = await freePort();
    // Health checks send Host: the servers take loopback names only. A refused connection (a dead
    // server) is retried on the other server at once (redispatch 1); a stream already running is not.
    const cfg = [
      'global', '  maxconn 512',
      'defaults', '  mode http', '  timeout connect 2s', '  timeout client 300s', '  timeout server 300s', '  timeout check 5s',
      '  retries 3', '  option redispatch 1',
      'frontend webinfer', `  bind 127.0.0.1:${port}`, '  default_backend servers',
      'backend servers', '  balance leastconn',
      '  option httpchk', '  http-check send meth GET uri /health ver HTTP/1.1 hdr Host localhost', '  http-check expect status 200',
      `  http-response set-header ${HEADER} %s`,
      `  server a ${new URL(a.url).host} check inter 300ms fall 1 rise 1`,
      `  server b ${new URL(b.url).host} check inter 300ms fall 1 rise 1`,
      '',
    ].join('\n');
    const cfgPath = join(work, 'haproxy.cfg');
    writeFileSync(cfgPath, cfg);
    const valid = spawnSync(HAPROXY, ['-c', '-f', cfgPath], { encoding: 'utf8' });
    expect(valid.status, `haproxy -c:\n${valid.stdout}${valid.stderr}`).toBe(0);
    const lb = start(HAPROXY, ['-db', '-f', cfgPath]);
    procs.push(lb);
    const base = `http://127.0.0.1:${port}`;
    for (let t = 0; t < 100; t++) {
      const ok = await fetch(`${base}/health`).then((r) => r.ok, () => false);
      if (ok) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 240_000 });
    const scrape = async (url: string): Promise<Map<string, Family>> => parseExposition(await (await fetch(`${url}/metrics`)).text());
    const served = (m: Map<string, Family>): number => ['stop', 'length', 'abort', 'error'].reduce((s, r) => s + sample(m, 'vllm:request_success_total', { finished_reason: r }), 0);

    /** One chat completion through the balancer; `onStart` runs once its response has begun. */
    const chat = async (i: number, stream: boolean, maxTokens: number, onStart?: () => void): Promise<Outcome> => {
      const req = { model: ID, messages: [{ role: 'user' as const, content }], max_tokens: maxTokens, temperature: 0, return_token_ids: true, ignore_eos: true };
      let backend: string | null = null;
      try {
        if (!stream) {
          const { data, response } = await client.chat.completions.create(req as OpenAI.ChatCompletionCreateParamsNonStreaming).withResponse();
          backend = response.headers.get(HEADER);
          onStart?.();
          const c = data.choices[0] as unknown as { token_ids?: number[]; finish_reason: string };
          expect((data as unknown as { prompt_token_ids?: number[] }).prompt_token_ids, 'the rendered prompt is the golden\'s').toEqual(prompt);
          return { i, backend, ids: c.token_ids ?? [], error: null, finish: c.finish_reason, endedAt: performance.now() };
        }
        const { data, response } = await client.chat.completions.create({ ...req, stream: true } as OpenAI.ChatCompletionCreateParamsStreaming).withResponse();
        backend = response.headers.get(HEADER);
        onStart?.();
        const ids: number[] = [];
        let finish: string | null = null;
        for await (const chunk of data) {
          for (const c of chunk.choices as unknown as { token_ids?: number[]; finish_reason?: string | null }[]) {
            // Each chunk carries the ids produced since the last one (vLLM's return_token_ids).
            if (c.token_ids) ids.push(...c.token_ids);
            finish = c.finish_reason ?? finish;
          }
        }
        return { i, backend, ids, error: null, finish, endedAt: performance.now() };
      } catch (e) {
        onStart?.();
        return { i, backend, ids: null, error: e instanceof Error ? `${e.name}: ${e.message}` : String(e), finish: null, endedAt: performance.now() };
      }
    };
    const correct = (o: Outcome, n: number): void => {
      expect(o.error, `request ${o.i} (backend ${o.backend})`).toBeNull();
      expect(o.ids!.length, `request ${o.i}: tokens`).toBe(n);
      expect(o.ids!.slice(0, want.length), `request ${o.i}: the golden's greedy tokens`).toEqual(want);
      expect(o.finish, `request ${o.i}: finish`).toBe('length');
    };

    // 1. 24 at once, half streamed: all correct, both servers take some.
    const [ma0, mb0] = await Promise.all([scrape(a.url), scrape(b.url)]);
    const first = await Promise.all(Array.from({ length: 24 }, (_, i) => chat(i, i % 2 === 1, want.length)));
    for (const o of first) correct(o, want.length);
    const count = (os: Outcome[], s: string) => os.filter((o) => o.backend === s).length;
    expect(count(first, 'a') + count(first, 'b'), 'every reply names its backend').toBe(24);
    expect(count(first, 'a'), 'requests server a served').toBeGreaterThan(0);
    expect(count(first, 'b'), 'requests server b served').toBeGreaterThan(0);
    // Each server's own count agrees with the balancer's.
    const [ma1, mb1] = await Promise.all([scrape(a.url), scrape(b.url)]);
    expect([served(ma1) - served(ma0), served(mb1) - served(mb0)]).toEqual([count(first, 'a'), count(first, 'b')]);

    // 2. 16 long streams; once every one has begun, server a is killed.
    const LONG = 300;
    let begun = 0;
    let allBegun!: () => void;
    const started = new Promise<void>((r) => (allBegun = r));
    const long = Array.from({ length: 16 }, (_, i) => chat(24 + i, true, LONG, () => { if (++begun === 16) allBegun(); }));
    await started;
    const killedAt = performance.now();
    a.child.kill('SIGKILL');
    await a.exited;
    // 3. 24 more after the kill, half streamed: the survivor serves them all.
    const after = await Promise.all(Array.from({ length: 24 }, (_, i) => chat(40 + i, i % 2 === 1, want.length)));
    const streams = await Promise.all(long);

    const onA = streams.filter((o) => o.backend === 'a');
    const onB = streams.filter((o) => o.backend === 'b');
    expect(onA.length + onB.length, 'every stream named its backend').toBe(16);
    expect(onA.length, 'streams on the killed server').toBeGreaterThan(0);
    expect(onB.length, 'streams on the survivor').toBeGreaterThan(0);
    // The killed server's streams still running at the kill end with an error; one that had ended
    // before it (300 tokens: none on a software adapter) is whole. At least one was cut.
    const cut = onA.filter((o) => o.error !== null);
    expect(cut.length, 'streams cut by the kill').toBeGreaterThan(0);
    for (const o of onA) if (o.endedAt < killedAt) correct(o, LONG);
    for (const o of onB) correct(o, LONG);
    for (const o of after) {
      correct(o, want.length);
      expect(o.backend, `request ${o.i} after the kill`).toBe('b');
    }
    const failed = [...first, ...streams, ...after].filter((o) => o.error !== null);
    expect(failed.map((o) => o.i), "the failed requests: the killed server's streams in flight at the kill, no other").toEqual(cut.map((o) => o.i));
    for (const o of cut) expect(o.endedAt, `stream ${o.i} failed after the kill`).toBeGreaterThanOrEqual(killedAt);
    const mb2 = await scrape(b.url);
    expect(served(mb2) - served(mb1), "the survivor's count").toBe(onB.length + after.length);
    expect(sample(mb2, 'vllm:num_requests_running'), 'the survivor is idle').toBe(0);
  } finally {
    for (const p of procs) p.child.kill('SIGKILL');
    await Promise.all(procs.map((p) => p.exited));
    rmSync(work, { recursive: true, force: true });
    folder.remove();
  }
}, 400_000);
