// The GGUF forms of the goldens (tests/cases/gguf_arch.cases.ts writes them in llama.cpp's names and
// metadata) give back the golden's own config: parseConfig of the config ggufConfig builds from the
// metadata equals parseConfig of the golden's config.json in every field the model runs on. The GPU
// cases compare their logits.
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { loadGGUF } from '../../src/formats/gguf';
import { loadSafetensors } from '../../src/formats/safetensors';
import { parseConfig, type ModelConfig } from '../../src/models/config';
import { ggufCheckpoint } from '../../src/models/gguf_weights';
import { validateCheckpoint, WEIGHT_DTYPES } from '../../src/models/schema';
import { QUANT_TYPES } from '../../src/core/quant';
import { ARCH_PLANS, gptOssGGUF, planGGUF } from '../cases/gguf_arch.cases';

const SHARED = join(dirname(fileURLToPath(import.meta.url)), '../../../shared');

/** Without the fields a GGUF does not carry for these files: the checkpoint's dtype (general.file_type
 *  names none for a mixed file) and the pad token (no tokenizer in the goldens' files). */
function comparable(c: ModelConfig): Record<string, unknown> {
  const { dtype: _d, padTokenId: _p, ...rest } = c;
  return rest;
}

const cases: [string, string, (file: Awaited<ReturnType<typeof loadSafetensors>>, config: Record<string, unknown>) => Promise<{ gguf: Uint8Array }>][] = [
  ['gpt-oss', 'goldens-layers/gptoss-sinks-window-moe', (f, c) => gptOssGGUF(f, c)],
  ...Object.entries(ARCH_PLANS).map(([arch, a]) => [arch, `goldens-arch/${a.folder}`, (f: Awaited<ReturnType<typeof loadSafetensors>>, c: Record<string, unknown>) => planGGUF(f, c, a.plan(c as Record<string, number & boolean>))] as [string, string, (file: Awaited<ReturnType<typeof loadSafetensors>>, config: Record<string, unknown>) => Promise<{ gguf: Uint8Array }>]),
];

describe.skipIf(!existsSync(SHARED))('GGUF forms of the goldens: the config back from the metadata', () => {
  for (const [arch, dir, build] of cases) {
    it(`${arch} (${dir}): parseConfig equal to the golden's; the checkpoint check passes`, async () => {
      const config = JSON.parse(readFileSync(join(SHARED, dir, 'config.json'), 'utf8')) as Record<string, unknown>;
      const file = await loadSafetensors(new Uint8Array(readFileSync(join(SHARED, dir, 'model.safetensors'))));
      const { gguf } = await build(file, config);
      const g = await loadGGUF(gguf);
      const got = parseConfig(g.config), want = parseConfig(config);
      // gpt-oss's experts are MXFP4 in the file (the golden's are f32): the config says so.
      if (want.moe?.gptOss) want.moe.gptOss.mxfp4 = true;
      expect(comparable(got)).toEqual(comparable(want));
      validateCheckpoint(got, [ggufCheckpoint(g, got)], [...WEIGHT_DTYPES, ...QUANT_TYPES]);
    });
  }
});
