// What the server tests share about the official openai client.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import { byteTokenizerConfig, byteTokenizerJson } from '../cases/text_fixture';

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
