// An HF checkpoint folder as the Hub lays it out: config.json, the weights (model.safetensors, or
// model.safetensors.index.json and its shards), and the optional tokenizer.json,
// tokenizer_config.json and generation_config.json. The folder can be a directory (Node, Deno), a
// base URL (browser), what a browser folder picker returns, or a map of names to Blobs. Or a GGUF
// file (a path or URL ending in .gguf, or picked File(s): split parts in order), whose metadata holds
// the config, tokenizer and chat template (loadGGUF).

import { check, fail } from '../core/errors.js';
import { hasFileSystem, isUrl, loadSafetensors, loadShardedSafetensors, nodeFs, type SafetensorsFile } from './safetensors.js';
import { loadGGUF, type GGUFFile } from './gguf.js';

export interface Checkpoint {
  /** The parsed config.json (give it to parseConfig). */
  config: object;
  /** The safetensors files, or the GGUF file (give either to loadModel). */
  weights: SafetensorsFile[] | GGUFFile;
  tokenizer?: object;
  tokenizerConfig?: object;
  generationConfig?: object;
  /** The folder's name (directory or URL basename, the picked folder's name), for messages and UIs. */
  name: string;
}

export type CheckpointSource = string | FileList | File[] | { [name: string]: Blob };

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
  return {
    where: `directory '${base}'`,
    name: basename(base),
    async text(file) {
      const fs = await nodeFs();
      try {
        return new TextDecoder().decode(await fs.readFile(path(file)));
      } catch (e) {
        if (missing(e)) return null;
        fail(OP, file, `a readable file in directory '${base}'`, (e as Error).message);
      }
    },
    async safetensors(file) {
      const fs = await nodeFs();
      try {
        await fs.stat(path(file));
      } catch (e) {
        if (missing(e)) return null;
        throw e;
      }
      return loadSafetensors(path(file));
    },
  };
}

function urlFolder(url: string): Folder {
  const base = url.replace(/\/+$/, '');
  const get = async (file: string): Promise<Response | null> => {
    let res: Response;
    try {
      res = await fetch(`${base}/${file}`);
    } catch (e) {
      fail(OP, file, `a reachable URL ${base}/${file}`, (e as Error).message);
    }
    if (res.status === 404) return null;
    check(res.ok, OP, file, `a successful response from ${base}/${file}`, `HTTP ${res.status} ${res.statusText}`.trim());
    return res;
  };
  return {
    where: `'${base}'`,
    name: basename(base.replace(/^[a-z]+:\/\/[^/]*/i, '')) || base,
    async text(file) {
      const res = await get(file);
      return res ? res.text() : null;
    },
    async safetensors(file) {
      const res = await get(file);
      return res ? loadSafetensors(res) : null;
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

function folderOf(src: CheckpointSource): Folder {
  if (typeof src === 'string') {
    check(src.length > 0, OP, 'src', 'a directory path or base URL', src);
    return !isUrl(src) && hasFileSystem() ? directoryFolder(src) : urlFolder(src);
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

/**
 * Reads a checkpoint folder: config.json, the safetensors weights (headers only: tensor bytes stay
 * where they are until a loader asks for them) and the optional tokenizer and generation files.
 * Like transformers, a single model.safetensors wins over a sharded index.
 */
export async function loadCheckpoint(src: CheckpointSource): Promise<Checkpoint> {
  const gguf = ggufSource(src);
  if (gguf) {
    const g = await loadGGUF(gguf);
    const out: Checkpoint = { config: g.config, weights: g, name: g.name };
    if (g.tokenizer) out.tokenizer = g.tokenizer;
    if (g.tokenizerConfig) out.tokenizerConfig = g.tokenizerConfig;
    return out;
  }
  const folder = folderOf(src);
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
  const [tokenizer, tokenizerConfig, generationConfig] = await Promise.all([
    json(folder, 'tokenizer.json', false),
    json(folder, 'tokenizer_config.json', false),
    json(folder, 'generation_config.json', false),
  ]);
  const out: Checkpoint = { config, weights, name: folder.name };
  if (tokenizer) out.tokenizer = tokenizer;
  if (tokenizerConfig) out.tokenizerConfig = tokenizerConfig;
  if (generationConfig) out.generationConfig = generationConfig;
  return out;
}
