#!/usr/bin/env node
// `npm run plot -- bench/results/<device>.json`: writes the results file's SVG plots beside it.
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { plotResults } = await import(join(root, '.cache/bundles/plot.js'));
const files = process.argv.slice(2);
if (!files.length) {
  console.error('usage: npm run plot -- bench/results/<device>.json [...]');
  process.exit(2);
}
for (const f of files) {
  const results = JSON.parse(readFileSync(f, 'utf8'));
  const stem = f.replace(/\.json$/, '');
  for (const [name, svg] of Object.entries(plotResults(results))) {
    const out = `${stem}-${name}`;
    writeFileSync(out, svg);
    console.log(`wrote ${out}`);
  }
}
