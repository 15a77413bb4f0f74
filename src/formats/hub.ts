// Checkpoints on the Hugging Face Hub and downloads kept in the browser.
//
// A Hub model is named `hf:<org>/<name>` (a checkpoint folder), `hf:<org>/<name>@<revision>`, or
// `hf:<org>/<name>[@<revision>]/<path>.gguf` (one GGUF file of the repository). Its files are fetched
// from `<host>/<org>/<name>/resolve/<revision>/<file>` (the Hub's download URL, which answers with
// CORS headers and redirects to its CDN); the host defaults to https://huggingface.co and can name a
// mirror or a test server. The `hf:` prefix keeps an id apart from a relative URL or a local path
// ('org/name' is both).
//
// Downloads can be kept in Cache Storage (the cache named 'webinfer-weights', one entry per file URL),
// so a second visit reads the files from disk: a cached response's Blob is backed by the cache's own
// file, and the loaders read it a tensor at a time. A revision such as 'main' moves on the Hub; the
// cache keeps what was fetched first until clearWeightCache() empties it.
import { check, fail, WebinferError } from '../core/errors.js';

export const WEIGHT_CACHE = 'webinfer-weights';
export const DEFAULT_HUB_HOST = 'https://huggingface.co';

export interface HubId {
  /** 'org/name'. */
  repo: string;
  /** A branch, tag or commit ('main' unless the id names one). */
  revision: string;
  /** A file of the repository (a .gguf), or null for the checkpoint folder at its root. */
  file: string | null;
}

const OP = 'loadCheckpoint';
// The Hub's own rule for a repository name part: letters, digits, '-', '_', '.', not starting with '.'.
const PART = '[A-Za-z0-9_-][A-Za-z0-9._-]*';
const HUB_ID = new RegExp(`^hf:(${PART})/(${PART})(?:@([^/\\s]+))?(?:/(\\S+))?$`);

/** The Hub id a string names, or null when it does not start with 'hf:'; 'hf:' with a bad id is an error. */
export function parseHubId(src: string): HubId | null {
  if (!src.startsWith('hf:')) return null;
  const m = HUB_ID.exec(src);
  check(m !== null, OP, 'src', "a Hub id 'hf:<org>/<name>', 'hf:<org>/<name>@<revision>' or 'hf:<org>/<name>/<file>.gguf'", `'${src}'`);
  const file = m[4] ?? null;
  check(file === null || /\.gguf$/i.test(file), OP, 'src', 'a Hub id whose file part names a .gguf file (a folder id has none)', `'${src}'`);
  check(file === null || !file.split('/').includes('..'), OP, 'src', "a Hub file path without '..'", `'${src}'`);
  return { repo: `${m[1]}/${m[2]}`, revision: m[3] ?? 'main', file };
}

/** The base URL a Hub id's files are fetched under: `<host>/<org>/<name>/resolve/<revision>`. */
export function hubBaseUrl(id: HubId, host = DEFAULT_HUB_HOST): string {
  check(/^https?:\/\//i.test(host), OP, 'o.hubHost', 'an http(s) URL such as https://huggingface.co', `'${host}'`);
  return `${host.replace(/\/+$/, '')}/${id.repo}/resolve/${encodeURIComponent(id.revision)}`;
}

/** The URLs of a GGUF model's parts: the URL alone, or every part when it names part 1 of a split
 *  model ('-00001-of-00003.gguf', llama.cpp's gguf-split names, which loadGGUF also follows). */
export function ggufParts(url: string): string[] {
  const m = /-00001-of-(\d{5})\.gguf(?=$|[?#])/i.exec(url);
  if (!m || Number(m[1]) <= 1) return [url];
  const at = (i: number) => `${url.slice(0, m.index)}-${String(i).padStart(5, '0')}-of-${m[1]}.gguf${url.slice(m.index + m[0].length)}`;
  return Array.from({ length: Number(m[1]) }, (_, i) => at(i + 1));
}

// -------------------------------------------------------------------------------------- downloads

/** One file's download: bytes so far of total (null when the server does not say). */
export interface DownloadProgress {
  /** The file's name within its checkpoint ('model.safetensors'). */
  file: string;
  url: string;
  loaded: number;
  total: number | null;
  /** True when the bytes came from the browser's weight cache, not the network. */
  cached: boolean;
}

export interface DownloadOptions {
  /** Keep the file in (and read it from) the 'webinfer-weights' cache. */
  cache: boolean;
  onDownload?: (p: DownloadProgress) => void;
}

type CacheStorageLike = { open(name: string): Promise<Cache>; delete(name: string): Promise<boolean>; has(name: string): Promise<boolean> };

/** Cache Storage where this runtime has it (a browser page or worker in a secure context). */
function cacheStorage(): CacheStorageLike | null {
  const c = (globalThis as { caches?: CacheStorageLike }).caches;
  return c && typeof c.open === 'function' ? c : null;
}

/** True where downloads can be kept (a browser's Cache Storage). */
export function hasWeightCache(): boolean {
  return cacheStorage() !== null;
}

/** A mark stored for a file the server does not have, so a cached checkpoint loads offline too. */
const MISSING = 'x-webinfer-missing';

async function request(url: string, file: string): Promise<Response> {
  try {
    return await fetch(url);
  } catch (e) {
    fail(OP, file, `a reachable URL ${url}`, `a network error (${(e as Error).message})`);
  }
}

function httpError(url: string, file: string, res: Response): never {
  const status = `HTTP ${res.status} ${res.statusText}`.trim();
  // The Hub answers 401 both for a repository that does not exist and for a gated or private one.
  if (res.status === 401 || res.status === 403) {
    fail(OP, file, `a public file at ${url}`, `${status} (the repository does not exist, or is gated or private: files are fetched without credentials)`);
  }
  fail(OP, file, `a successful response from ${url}`, status);
}

/** The body read a chunk at a time, each chunk reported. A connection that breaks errors the stream
 *  with a named error, kept in `broken` too (Cache.put rejects with its own vaguer one). */
function counted(res: Response, url: string, file: string, onDownload?: (p: DownloadProgress) => void): { stream: ReadableStream<Uint8Array>; broken: () => Error | null } {
  const header = res.headers.get('content-length');
  // A compressed body's Content-Length counts the compressed bytes, not the ones read here.
  const total = header === null || res.headers.get('content-encoding') || !(Number(header) >= 0) ? null : Number(header);
  const reader = res.body!.getReader();
  let loaded = 0;
  let broken: Error | null = null;
  onDownload?.({ file, url, loaded, total, cached: false });
  const stream = new ReadableStream<Uint8Array>({
    async pull(controller) {
      let r: ReadableStreamReadResult<Uint8Array>;
      try {
        r = await reader.read();
      } catch (e) {
        broken = new WebinferError(`${OP}: ${file}: expected the whole of ${url}${total === null ? '' : ` (${total} bytes)`}, `
          + `got a download that broke after ${loaded} bytes (${(e as Error).message})`);
        controller.error(broken);
        return;
      }
      if (r.done) {
        controller.close();
        return;
      }
      loaded += r.value.byteLength;
      onDownload?.({ file, url, loaded, total, cached: false });
      controller.enqueue(r.value);
    },
    cancel(reason) {
      return reader.cancel(reason);
    },
  });
  return { stream, broken: () => broken };
}

/** Reads a stream whole into a Blob (the in-memory path, where nothing is cached). */
async function collect(stream: ReadableStream<Uint8Array>): Promise<Blob> {
  const parts: Uint8Array[] = [];
  const reader = stream.getReader();
  for (let r = await reader.read(); !r.done; r = await reader.read()) parts.push(r.value);
  return new Blob(parts as BlobPart[]);
}

/**
 * One file as a Blob: from the weight cache when it holds the URL, else downloaded (and stored in the
 * cache first when o.cache, then read back from it, so the Blob is the cache's file on disk and the
 * download is never held in memory). A 404 gives null (a missing optional file; remembered in the
 * cache); other HTTP failures and network errors are named errors.
 */
export async function download(url: string, file: string, o: DownloadOptions): Promise<Blob | null> {
  const storage = o.cache ? cacheStorage() : null;
  let cache: Cache | null = null;
  if (storage) {
    try {
      cache = await storage.open(WEIGHT_CACHE);
    } catch (e) {
      // A private window or a storage policy can refuse the cache the page asked for by name.
      fail(OP, file, `the browser's Cache Storage for '${WEIGHT_CACHE}'`, `${(e as Error).message} (load with { cache: false } to download without keeping)`);
    }
  }
  if (cache) {
    const hit = await cache.match(url);
    if (hit) {
      if (hit.headers.get(MISSING)) return null;
      const blob = await hit.blob();
      o.onDownload?.({ file, url, loaded: blob.size, total: blob.size, cached: true });
      return blob;
    }
  }
  const res = await request(url, file);
  if (res.status === 404) {
    await res.body?.cancel();
    await cache?.put(url, new Response(null, { status: 200, headers: { [MISSING]: '1' } }));
    return null;
  }
  if (!res.ok) httpError(url, file, res);
  if (!res.body) return new Blob([]);
  const body = counted(res, url, file, o.onDownload);
  if (!cache) return collect(body.stream);
  const headers: Record<string, string> = { 'content-type': res.headers.get('content-type') ?? 'application/octet-stream' };
  try {
    await cache.put(url, new Response(body.stream, { headers }));
  } catch (e) {
    const err = body.broken() ?? (e as Error);
    if (err.name === 'QuotaExceededError') {
      const est = await (globalThis as { navigator?: { storage?: { estimate(): Promise<{ usage?: number; quota?: number }> } } }).navigator?.storage?.estimate().catch(() => null);
      const room = est?.quota ? ` (${((est.usage ?? 0) / 1e6).toFixed(0)} MB of ${(est.quota / 1e6).toFixed(0)} MB used)` : '';
      fail(OP, file, `room in the browser's storage for ${url}${room}`, `${err.message}: clear the weight cache (clearWeightCache()) or load with { cache: false }`);
    }
    throw err;
  }
  const stored = await cache.match(url);
  check(stored !== undefined, OP, file, `the downloaded ${url} in the '${WEIGHT_CACHE}' cache`, 'no entry (the browser dropped it)');
  return stored.blob();
}

// ------------------------------------------------------------------------------ the cache itself

/** What the weight cache holds: its files and their bytes (0 and 0 where there is no cache). */
export async function weightCacheSize(): Promise<{ files: number; bytes: number }> {
  const storage = cacheStorage();
  if (!storage || !(await storage.has(WEIGHT_CACHE))) return { files: 0, bytes: 0 };
  const cache = await storage.open(WEIGHT_CACHE);
  let files = 0, bytes = 0;
  for (const req of await cache.keys()) {
    const res = await cache.match(req);
    if (!res || res.headers.get(MISSING)) continue;
    files++;
    // A cached body's Blob refers to the cache's file: its size is known without reading it.
    bytes += (await res.blob()).size;
  }
  return { files, bytes };
}

/** Empties the browser's weight cache; the next load downloads again. False where there was none. */
export async function clearWeightCache(): Promise<boolean> {
  const storage = cacheStorage();
  return storage ? storage.delete(WEIGHT_CACHE) : false;
}
