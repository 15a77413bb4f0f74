// Hugging Face Hub ids and downloads (src/formats/hub.ts through loadCheckpoint): which URLs an id
// names, the progress a download reports, and the named errors of a server that refuses, a network
// that fails and a connection that breaks. Node has no Cache Storage, so the in-memory path runs here;
// the browser's cache is driven in the demo suite (tests/demo).
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ggufParts, hubBaseUrl, parseHubId, type DownloadProgress } from '../../src/formats/hub';
import { loadCheckpoint } from '../../src/formats/checkpoint';
import type { SafetensorsFile } from '../../src/formats/safetensors';
import { byteTokenizerConfig, byteTokenizerJson } from '../cases/text_fixture';

const golden = join(dirname(fileURLToPath(import.meta.url)), '../../../shared/goldens/llama-gqa');

afterEach(() => {
  vi.unstubAllGlobals();
});

describe('Hub ids', () => {
  it('names a folder, a revision or a GGUF file of a repository', () => {
    expect(parseHubId('hf:Qwen/Qwen3-0.6B')).toEqual({ repo: 'Qwen/Qwen3-0.6B', revision: 'main', file: null });
    expect(parseHubId('hf:org/name@v1.2')).toEqual({ repo: 'org/name', revision: 'v1.2', file: null });
    expect(parseHubId('hf:org/name-GGUF/q4/model-Q4_K_M.gguf')).toEqual({ repo: 'org/name-GGUF', revision: 'main', file: 'q4/model-Q4_K_M.gguf' });
    expect(parseHubId('org/name')).toBeNull();
    expect(parseHubId('https://huggingface.co/org/name')).toBeNull();
    expect(hubBaseUrl(parseHubId('hf:org/name')!)).toBe('https://huggingface.co/org/name/resolve/main');
    expect(hubBaseUrl(parseHubId('hf:org/name@refs/pr/1'.replace('refs/pr/1', 'pr1'))!, 'http://mirror.test/')).toBe('http://mirror.test/org/name/resolve/pr1');
  });

  it('refuses ids it cannot fetch, saying what an id looks like', () => {
    expect(() => parseHubId('hf:name-only')).toThrow("loadCheckpoint: src: expected a Hub id 'hf:<org>/<name>', 'hf:<org>/<name>@<revision>' or 'hf:<org>/<name>/<file>.gguf', got 'hf:name-only'");
    expect(() => parseHubId('hf:org/name/config.json')).toThrow('expected a Hub id whose file part names a .gguf file');
    expect(() => parseHubId('hf:org/name/../x.gguf')).toThrow("expected a Hub file path without '..'");
    expect(() => hubBaseUrl(parseHubId('hf:org/name')!, 'ftp://x')).toThrow("loadCheckpoint: o.hubHost: expected an http(s) URL such as https://huggingface.co, got 'ftp://x'");
  });

  it('opens every part of a split GGUF model', () => {
    expect(ggufParts('https://h/a/m-00001-of-00003.gguf')).toEqual(['https://h/a/m-00001-of-00003.gguf', 'https://h/a/m-00002-of-00003.gguf', 'https://h/a/m-00003-of-00003.gguf']);
    expect(ggufParts('https://h/a/m-00002-of-00003.gguf')).toEqual(['https://h/a/m-00002-of-00003.gguf']);
    expect(ggufParts('https://h/a/m.gguf?download=1')).toEqual(['https://h/a/m.gguf?download=1']);
  });
});

describe('loadCheckpoint from the Hub', () => {
  const files: Record<string, Uint8Array> = {
    'config.json': readFileSync(join(golden, 'config.json')),
    'model.safetensors': readFileSync(join(golden, 'model.safetensors')),
    'tokenizer.json': new TextEncoder().encode(JSON.stringify(byteTokenizerJson())),
    'tokenizer_config.json': new TextEncoder().encode(JSON.stringify(byteTokenizerConfig())),
  };
  /** A Hub at http://hub.test serving test-org/tiny-chat, its body in chunks of 64 KiB. */
  function hub(requested: string[], o: { breakAfter?: number } = {}) {
    return vi.fn(async (url: string) => {
      requested.push(url);
      const m = /^http:\/\/hub\.test\/test-org\/tiny-chat\/resolve\/main\/(.+)$/.exec(url);
      const body = m ? files[m[1]!] : undefined;
      if (!body) return new Response('Repository Not Found', { status: m ? 404 : 401, statusText: m ? 'Not Found' : 'Unauthorized' });
      let at = 0;
      const stream = new ReadableStream<Uint8Array>({
        pull(c) {
          if (o.breakAfter !== undefined && at >= o.breakAfter) {
            c.error(new TypeError('network error'));
            return;
          }
          if (at >= body.length) return c.close();
          c.enqueue(body.slice(at, at + 65536));
          at += 65536;
        },
      });
      return new Response(stream, { headers: { 'content-length': String(body.length) } });
    });
  }

  it('fetches the folder under <host>/<id>/resolve/main/, reporting each file\'s bytes', async () => {
    const requested: string[] = [];
    vi.stubGlobal('fetch', hub(requested));
    const seen: DownloadProgress[] = [];
    const ck = await loadCheckpoint('hf:test-org/tiny-chat', { hubHost: 'http://hub.test', onDownload: (p) => seen.push(p) });
    expect(ck.name).toBe('tiny-chat');
    expect(requested).toContain('http://hub.test/test-org/tiny-chat/resolve/main/config.json');
    expect(requested).toContain('http://hub.test/test-org/tiny-chat/resolve/main/generation_config.json');
    expect(ck.generationConfig).toBeUndefined();   // 404: an optional file that is not there
    expect(ck.tokenizer).toEqual(byteTokenizerJson());
    expect(ck.tokenizerConfig).toEqual(byteTokenizerConfig());
    const w = (ck.weights as SafetensorsFile[])[0]!;
    expect(w.tensors.get('model.embed_tokens.weight')?.shape[0]).toBe(256);
    const weights = seen.filter((p) => p.file === 'model.safetensors');
    const size = files['model.safetensors']!.length;
    expect(weights[0]).toMatchObject({ loaded: 0, total: size, cached: false, url: 'http://hub.test/test-org/tiny-chat/resolve/main/model.safetensors' });
    expect(weights.at(-1)).toMatchObject({ loaded: size, total: size });
    expect(weights.length).toBe(1 + Math.ceil(size / 65536));   // the start, then each chunk
    for (let i = 1; i < weights.length; i++) expect(weights[i]!.loaded).toBeGreaterThan(weights[i - 1]!.loaded);
    // The bytes are the file's: a tensor read back equals the same range of the golden file.
    const head = new DataView(files['model.safetensors']!.buffer, files['model.safetensors']!.byteOffset).getUint32(0, true);
    const info = JSON.parse(new TextDecoder().decode(files['model.safetensors']!.subarray(8, 8 + head)))['model.norm.weight'];
    const got = await w.bytes('model.norm.weight');
    expect(Array.from(got)).toEqual(Array.from(files['model.safetensors']!.subarray(8 + head + info.data_offsets[0], 8 + head + info.data_offsets[1])));
  });

  it('reads a GGUF file of a repository with Range requests when nothing is cached', async () => {
    const gguf = readFileSync(join(golden, '../../goldens-quant/gguf-llama-q4-k-m/model.gguf'));
    const ranges: string[] = [];
    vi.stubGlobal('fetch', vi.fn(async (url: string, init?: RequestInit) => {
      expect(url).toBe('http://hub.test/org/tiny-GGUF/resolve/v2/q/model.gguf');
      const range = /^bytes=(\d+)-(\d+)$/.exec(new Headers(init?.headers).get('range') ?? '');
      if (!range) return new Response(gguf);
      ranges.push(range[0]);
      const [b, e] = [Number(range[1]), Math.min(Number(range[2]), gguf.length - 1)];
      return new Response(gguf.subarray(b, e + 1), { status: 206, headers: { 'content-range': `bytes ${b}-${e}/${gguf.length}` } });
    }));
    const ck = await loadCheckpoint('hf:org/tiny-GGUF@v2/q/model.gguf', { hubHost: 'http://hub.test', onDownload: () => { throw new Error('no whole download'); } });
    expect((ck.config as { architectures: string[] }).architectures).toEqual(['LlamaForCausalLM']);
    expect(ck.tokenizer).toBeDefined();
    expect(ranges[0]).toBe('bytes=0-1048575');
  });

  it('names the failure: a refused repository, an unreachable host, a download that breaks', async () => {
    vi.stubGlobal('fetch', hub([]));
    await expect(loadCheckpoint('hf:other/model', { hubHost: 'http://hub.test' })).rejects.toThrow(
      'loadCheckpoint: config.json: expected a public file at http://hub.test/other/model/resolve/main/config.json, got HTTP 401 Unauthorized (the repository does not exist, or is gated or private: files are fetched without credentials)');
    vi.stubGlobal('fetch', vi.fn(async () => { throw new TypeError('fetch failed'); }));
    await expect(loadCheckpoint('hf:test-org/tiny-chat', { hubHost: 'http://hub.test' })).rejects.toThrow(
      'loadCheckpoint: config.json: expected a reachable URL http://hub.test/test-org/tiny-chat/resolve/main/config.json, got a network error (fetch failed)');
    vi.stubGlobal('fetch', hub([], { breakAfter: 65536 * 3 }));
    const size = files['model.safetensors']!.length;
    await expect(loadCheckpoint('hf:test-org/tiny-chat', { hubHost: 'http://hub.test' })).rejects.toThrow(
      `loadCheckpoint: model.safetensors: expected the whole of http://hub.test/test-org/tiny-chat/resolve/main/model.safetensors (${size} bytes), got a download that broke after ${65536 * 3} bytes (network error)`);
  });

  it('refuses options it does not know and bad Hub ids before fetching anything', async () => {
    const f = vi.fn();
    vi.stubGlobal('fetch', f);
    await expect(loadCheckpoint('hf:test-org/tiny-chat', { hubhost: 'http://hub.test' } as object)).rejects.toThrow('loadCheckpoint: o: expected only the options hubHost, cache, onDownload, got hubhost');
    await expect(loadCheckpoint('hf:test-org', {})).rejects.toThrow("got 'hf:test-org'");
    await expect(loadCheckpoint('hf:test-org/tiny-chat', { cache: 'yes' } as object)).rejects.toThrow("loadCheckpoint: o.cache: expected a boolean, got 'yes'");
    expect(f).not.toHaveBeenCalled();
  });
});
