// An HF checkpoint folder as the Hub lays it out: config.json, the weights (model.safetensors, or
// model.safetensors.index.json and its shards), and the optional tokenizer.json,
// tokenizer_config.json and generation_config.json (and a speech or vision model's preprocessor_config.json). The folder can be a directory (Node, Deno), a
// base URL (browser), what a browser folder picker returns, or a map of names to Blobs. Or a GGUF
// file (a path or URL ending in .gguf, or picked File(s): split parts in order), whose metadata holds
// the config, tokenizer and chat template (loadGGUF). Or a Hugging Face Hub id, 'hf:<org>/<name>'
// (hub.ts: fetched under <host>/<org>/<name>/resolve/main/, kept in the browser's weight cache).

import { check, fail, fmt } from '../core/errors.js';
import { hasFileSystem, isUrl, loadSafetensors, loadShardedSafetensors, nodeFs, type SafetensorsFile } from './safetensors.js';
import { loadGGUF, type GGUFFile } from './gguf.js';
import { DEFAULT_HUB_HOST, download, ggufParts, hasWeightCache, hubBaseUrl, parseHubId, type DownloadProgress } from './hub.js';

export interface Checkpoint {
  /** The parsed config.json (give it to parseConfig). */
  config: object;
  /** The safetensors files, or the GGUF file (give either to loadModel). */
  weights: SafetensorsFile[] | GGUFFile;
  tokenizer?: object;
  tokenizerConfig?: object;
  generationConfig?: object;
  /** preprocessor_config.json: a speech model's feature extractor or a vision model's image processor
   *  (read for Whisper checkpoints and configs with a vision_config). */
  preprocessorConfig?: object;
  /** The folder's name (directory or URL basename, the picked folder's name), for messages and UIs. */
  name: string;
}

export type CheckpointSource = string | FileList | File[] | { [name: string]: Blob };

/** How loadCheckpoint fetches URLs and Hub ids (a directory, files or blobs ignore these). */
export interface CheckpointOptions {
  /** Where 'hf:' ids are fetched from (default https://huggingface.co): a mirror, or a test server. */
  hubHost?: string;
  /** Keep downloaded files in the browser's Cache Storage ('webinfer-weights') and read them from there
   *  on the next load. Default: true for 'hf:' ids in a browser, false for URLs (a URL is often a
   *  server being worked on) and in Node and Deno. */
  cache?: boolean;
  /** Each downloaded file's progress (from the network, or once for a file read from the cache). */
  onDownload?: (p: DownloadProgress) => void;
}

/** One way of reaching the folder's files; missing files come back as null. */
interface Folder {
  where: string;
  name: string;
  text(file: string): Promise<string | null>;
  safetensors(file: string): Promise<SafetensorsFile | null>;
  /** What is there, when it can be listed (for the missing-weights message). */
  listing?: string[];
}

const OP = 'loadCheckpoint';

function basename(p: string): string {
  const parts = p.split(/[\\/]/).filter(Boolean);
  return parts[parts.length - 1] ?? p;
}

function directoryFolder(dir: string): Folder {
  const base = dir.replace(/[\\/]+$/, '') || dir;
  const path = (file: string) => `${base}/${file}`;
  const missing = (e: unknown) => (e as { code?: string }).code === 'ENOENT' || (e as { name?: string }).name === 'NotFound';
  const code = (e: unknown) => (e as { code?: string }).code;
  // The folder itself first, so that a file or a missing path is said as such rather than as a
  // missing config.json (ENOTDIR) or the system's EISDIR.
  let isDirectory: Promise<void> | null = null;
  const directory = () => (isDirectory ??= (async () => {
    const expected = 'a checkpoint directory (config.json and model.safetensors) or a .gguf file';
    let st: { isDirectory?(): boolean };
    try {
      st = await (await nodeFs()).stat(base);
    } catch (e) {
      fail(OP, 'src', expected, `'${base}' (${missing(e) ? 'no such directory' : (e as Error).message})`);
    }
    if (st.isDirectory && !st.isDirectory()) fail(OP, 'src', expected, `'${base}' (a file${/\.safetensors$/i.test(base) ? ': loadSafetensors reads one' : ''})`);
  })());
  return {
    where: `directory '${base}'`,
    name: basename(base),
    async text(file) {
      await directory();
      const fs = await nodeFs();
      try {
        return new TextDecoder().decode(await fs.readFile(path(file)));
      } catch (e) {
        if (missing(e)) return null;
        fail(OP, file, `a readable file in directory '${base}'`, code(e) === 'EISDIR' ? 'a directory' : (e as Error).message);
      }
    },
    async safetensors(file) {
      await directory();
      const fs = await nodeFs();
      let st: { isDirectory?(): boolean };
      try {
        st = await fs.stat(path(file));
      } catch (e) {
        if (missing(e)) return null;
        fail(OP, file, `a readable file in directory '${base}'`, (e as Error).message);
      }
      if (st.isDirectory?.()) fail(OP, file, `a safetensors file in directory '${base}'`, 'a directory');
      return loadSafetensors(path(file));
    },
  };
}

/** A folder at a base URL; `hub` names the Hub id it came from (its name and messages use it). */
function urlFolder(url: string, o: CheckpointOptions & { cache: boolean }, hub?: { id: string; name: string }): Folder {
  const base = url.replace(/\/+$/, '');
  // Files come whole, as Blobs (the cache's file on disk, or the download in memory).
  const get = (file: string) => download(`${base}/${file}`, file, o);
  return {
    where: hub ? `'${hub.id}' (${base})` : `'${base}'`,
    name: hub?.name ?? (basename(base.replace(/^[a-z]+:\/\/[^/]*/i, '')) || base),
    async text(file) {
      const blob = await get(file);
      return blob ? blob.text() : null;
    },
    async safetensors(file) {
      const blob = await get(file);
      return blob ? loadSafetensors(new File([blob], file)) : null;
    },
  };
}

/** A folder picker's files (webkitRelativePath 'folder/config.json') or a name → Blob map. */
function blobFolder(entries: { path: string; blob: Blob }[], what: string): Folder {
  // The folder is where the shallowest config.json lies; files are looked up beside it.
  const configs = entries.filter((e) => basename(e.path) === 'config.json').sort((a, b) => a.path.length - b.path.length);
  const root = configs.length ? configs[0]!.path.slice(0, configs[0]!.path.length - 'config.json'.length) : '';
  const byName = new Map<string, Blob>();
  for (const e of entries) if (e.path.startsWith(root) && !byName.has(e.path.slice(root.length))) byName.set(e.path.slice(root.length), e.blob);
  const folderName = root ? basename(root) : 'model';
  return {
    where: `${what}${root ? ` (folder '${root.replace(/\/$/, '')}')` : ''}`,
    name: folderName,
    listing: [...byName.keys()],
    async text(file) {
      const b = byName.get(file);
      return b ? b.text() : null;
    },
    async safetensors(file) {
      const b = byName.get(file);
      if (!b) return null;
      return loadSafetensors(b);
    },
  };
}

/** The GGUF file(s) a source names: a path or URL ending in .gguf, or picked files all named *.gguf. */
function ggufSource(src: CheckpointSource): string | Blob[] | null {
  const isGguf = (name: string) => /\.gguf(\?.*)?$/i.test(name);
  if (typeof src === 'string') return isGguf(src) ? src : null;
  const isFileList = typeof FileList !== 'undefined' && src instanceof FileList;
  if (isFileList || Array.isArray(src)) {
    const files = Array.from(src as ArrayLike<File>);
    return files.length > 0 && files.every((f) => f && typeof f.name === 'string' && isGguf(f.name)) ? files : null;
  }
  return null;
}

function folderOf(src: CheckpointSource, o: CheckpointOptions): Folder {
  if (typeof src === 'string') {
    check(src.length > 0, OP, 'src', 'a directory path, base URL or Hub id', src);
    const hub = parseHubId(src);
    if (hub) return urlFolder(hubBaseUrl(hub, o.hubHost ?? DEFAULT_HUB_HOST), { ...o, cache: o.cache ?? browserCache() }, { id: src, name: hub.repo.split('/')[1]! });
    return !isUrl(src) && hasFileSystem() ? directoryFolder(src) : urlFolder(src, { ...o, cache: o.cache ?? false });
  }
  const isFileList = typeof FileList !== 'undefined' && src instanceof FileList;
  if (isFileList || Array.isArray(src)) {
    const files = Array.from(src as ArrayLike<File>);
    for (const f of files) check(typeof Blob !== 'undefined' && f instanceof Blob, OP, 'src', 'File objects', f);
    const entries = files.map((f) => ({ path: (f as { webkitRelativePath?: string }).webkitRelativePath || f.name, blob: f as Blob }));
    return blobFolder(entries, `the selected files (${files.length})`);
  }
  check(typeof src === 'object' && src !== null, OP, 'src', 'a path/URL, a FileList, File[] or { name: Blob }', src);
  const entries = Object.entries(src).map(([path, blob]) => {
    check(typeof Blob !== 'undefined' && blob instanceof Blob, OP, `src['${path}']`, 'a Blob', blob);
    return { path, blob };
  });
  return blobFolder(entries, `the given blobs (${entries.length})`);
}

async function json(folder: Folder, file: string, required: boolean): Promise<object | undefined> {
  const text = await folder.text(file);
  if (text === null) {
    if (required) fail(OP, file, `a file named ${file} in ${folder.where}`, 'none');
    return undefined;
  }
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    fail(OP, `${file} in ${folder.where}`, 'valid JSON', (e as Error).message);
  }
  check(typeof v === 'object' && v !== null && !Array.isArray(v), OP, `${file} in ${folder.where}`, 'a JSON object', v);
  return v as object;
}

/** Downloads are cached by default where a browser offers Cache Storage (not Deno's, not Node). */
function browserCache(): boolean {
  return hasWeightCache() && !hasFileSystem();
}

/** A GGUF URL or Hub file, as loadGGUF takes it: the URL itself, read a tensor at a time with Range
 *  requests (the upload's progress is the download's), or when cached, every part downloaded whole
 *  into the cache. */
async function ggufFromUrl(url: string, o: CheckpointOptions, cache: boolean): Promise<string | Blob[]> {
  if (!cache) return url;
  const blobs: Blob[] = [];
  for (const part of ggufParts(url)) {
    const file = basename(part.replace(/[?#].*$/, ''));
    const blob = await download(part, file, { cache, onDownload: o.onDownload });
    if (!blob) fail(OP, 'src', `a GGUF file at ${part}`, 'HTTP 404');
    // Named, so loadGGUF's messages and the checkpoint's name say which file.
    blobs.push(new File([blob], file));
  }
  return blobs;
}

/**
 * Reads a checkpoint folder: config.json, the safetensors weights (headers only: tensor bytes stay
 * where they are until a loader asks for them) and the optional tokenizer and generation files.
 * Like transformers, a single model.safetensors wins over a sharded index.
 *
 * A string 'hf:<org>/<name>' is a Hugging Face Hub model ('hf:<org>/<name>@<revision>' a revision of
 * it, 'hf:<org>/<name>/<file>.gguf' one GGUF file of it): its files come from
 * `<o.hubHost>/<org>/<name>/resolve/<revision>/`, kept in the browser's weight cache (see
 * CheckpointOptions.cache, clearWeightCache).
 */
export async function loadCheckpoint(src: CheckpointSource, o: CheckpointOptions = {}): Promise<Checkpoint> {
  check(o !== null && typeof o === 'object', OP, 'o', '{ hubHost?, cache?, onDownload? }', o);
  const unknown = Object.keys(o).filter((k) => !['hubHost', 'cache', 'onDownload'].includes(k));
  check(unknown.length === 0, OP, 'o', 'only the options hubHost, cache, onDownload', unknown.join(', '));
  check(o.cache === undefined || typeof o.cache === 'boolean', OP, 'o.cache', 'a boolean', fmt(o.cache));
  check(o.onDownload === undefined || typeof o.onDownload === 'function', OP, 'o.onDownload', 'a function', fmt(o.onDownload));
  check(o.hubHost === undefined || typeof o.hubHost === 'string', OP, 'o.hubHost', 'a URL string', fmt(o.hubHost));
  const hub = typeof src === 'string' ? parseHubId(src) : null;
  let gguf = ggufSource(src);
  if (hub?.file) gguf = await ggufFromUrl(`${hubBaseUrl(hub, o.hubHost ?? DEFAULT_HUB_HOST)}/${hub.file}`, o, o.cache ?? browserCache());
  else if (hub) gguf = null;
  else if (typeof gguf === 'string' && (isUrl(gguf) || !hasFileSystem())) gguf = await ggufFromUrl(gguf, o, o.cache ?? false);
  if (gguf) {
    const g = await loadGGUF(gguf);
    const out: Checkpoint = { config: g.config, weights: g, name: g.name };
    if (g.tokenizer) out.tokenizer = g.tokenizer;
    if (g.tokenizerConfig) out.tokenizerConfig = g.tokenizerConfig;
    return out;
  }
  const folder = folderOf(src, o);
  const config = (await json(folder, 'config.json', true))!;
  let weights: SafetensorsFile[];
  const single = await folder.safetensors('model.safetensors');
  if (single) weights = [single];
  else {
    const index = await json(folder, 'model.safetensors.index.json', false);
    if (!index) {
      const seen = folder.listing ? ` (found: ${folder.listing.slice(0, 12).join(', ')}${folder.listing.length > 12 ? ', ...' : ''})` : '';
      fail(OP, 'weights', `model.safetensors or model.safetensors.index.json in ${folder.where}`, `neither${seen}`);
    }
    weights = await loadShardedSafetensors(index, async (shard) => {
      const f = await folder.safetensors(shard);
      if (!f) fail(OP, shard, `the shard model.safetensors.index.json names, in ${folder.where}`, 'none');
      return f;
    });
  }
  // A feature extractor's or image processor's settings only where the model has one (a speech
  // architecture, or a vision tower): one fewer request, and no 404 in a page's console, for every text model.
  const archs = (config as { architectures?: unknown }).architectures;
  const processor = (Array.isArray(archs) && archs.some((a) => typeof a === 'string' && /^Whisper/.test(a)))
    || (config as { vision_config?: unknown }).vision_config !== undefined;
  const [tokenizer, tokenizerConfig, generationConfig, preprocessorConfig] = await Promise.all([
    json(folder, 'tokenizer.json', false),
    json(folder, 'tokenizer_config.json', false),
    json(folder, 'generation_config.json', false),
    processor ? json(folder, 'preprocessor_config.json', false) : Promise.resolve(null),
  ]);
  const out: Checkpoint = { config, weights, name: folder.name };
  if (tokenizer) out.tokenizer = tokenizer;
  if (tokenizerConfig) out.tokenizerConfig = tokenizerConfig;
  if (generationConfig) out.generationConfig = generationConfig;
  if (preprocessorConfig) out.preprocessorConfig = preprocessorConfig;
  return out;
}
