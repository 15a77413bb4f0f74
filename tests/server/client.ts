// What the server tests share about the official openai client.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import { byteTokenizerConfig, byteTokenizerJson } from '../cases/text_fixture';
import { createEngine, loadCheckpoint, serve, type Engine, type Model, type Server } from '../../src/index';

/** The HTTP status a call's APIError carries, 'no error' when it succeeded, or what else it threw. */
export async function statusOf(p: Promise<unknown>): Promise<number | string> {
  try {
    await p;
    return 'no error';
  } catch (e) {
    return e instanceof OpenAI.APIError ? (e.status ?? 'no status') : `not an APIError: ${e}`;
  }
}

/** The llama-gqa golden (f32, vocab 256) and what HF computed for it. */
export const LLAMA_GQA = join(dirname(fileURLToPath(import.meta.url)), '../../../shared/goldens/llama-gqa');
export const llamaGqa = (): { prompts: number[][]; greedy: number[][] } => JSON.parse(readFileSync(join(LLAMA_GQA, 'golden.json'), 'utf8'));

/** The golden's files beside the byte tokenizer's, in a folder named after the model (its id, 'llama-gqa'). */
export function checkpointFolder(prefix = 'webinfer-serve-'): { dir: string; remove(): void } {
  const tmp = mkdtempSync(join(tmpdir(), prefix));
  const dir = join(tmp, 'llama-gqa');
  mkdirSync(dir);
  for (const f of ['config.json', 'generation_config.json', 'model.safetensors']) symlinkSync(join(LLAMA_GQA, f), join(dir, f));
  writeFileSync(join(dir, 'tokenizer.json'), JSON.stringify(byteTokenizerJson()));
  writeFileSync(join(dir, 'tokenizer_config.json'), JSON.stringify(byteTokenizerConfig()));
  return { dir, remove: () => rmSync(tmp, { recursive: true, force: true }) };
}

/** The golden served in process: its checkpoint folder loaded, served on a free port, an openai client for it. */
export interface ServedGolden { engine: Engine; model: Model; server: Server; client: OpenAI; close(): Promise<void> }

/** checkpointFolder's model loaded on `gpu` and served by serve() on port 0; close() undoes it all. */
export async function servedGolden(gpu: GPU, prefix?: string): Promise<ServedGolden> {
  const folder = checkpointFolder(prefix);
  let engine: Engine | undefined;
  let model: Model | undefined;
  const close = async (server?: Server) => {
    await server?.close();
    model?.destroy();
    engine?.destroy();
    folder.remove();
  };
  try {
    engine = await createEngine({ gpu });
    model = await engine.loadModel({ ...(await loadCheckpoint(folder.dir)) });
    const server = await serve(model, { port: 0 });
    const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    return { engine, model, server, client, close: () => close(server) };
  } catch (e) {
    await close();
    throw e;
  }
}
