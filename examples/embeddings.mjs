// Sentence embeddings from an encoder (BERT, ModernBERT) in OpenAI's shape, and their cosine similarity.
// Inputs are texts, or token ids (1,2,3) for a checkpoint without a tokenizer.
//   node examples/embeddings.mjs path/to/encoder "first text" "second text"
import { loadCheckpoint } from 'webinfer';
import { modelArg, nodeEngine } from './_engine.mjs';

const folder = modelArg('node examples/embeddings.mjs <encoder folder> <text or ids> <text or ids> ...');
const engine = await nodeEngine();
const model = await engine.loadModel(await loadCheckpoint(folder));
const args = process.argv.slice(3);
const inputs = (args.length ? args : ['1,2,3,4', '1,2,3,5']).map((a) => (/^\d+(,\d+)*$/.test(a) ? a.split(',').map(Number) : a));
const r = await model.embeddings.create({ input: inputs });
const v = r.data.map((d) => d.embedding);
const dot = (a, b) => a.reduce((s, x, i) => s + x * b[i], 0);
console.log(`${v.length} embeddings of ${v[0].length} dimensions (${r.usage.prompt_tokens} tokens)`);
for (let i = 1; i < v.length; i++) console.log(`cosine(0, ${i}) = ${(dot(v[0], v[i]) / Math.sqrt(dot(v[0], v[0]) * dot(v[i], v[i]))).toFixed(4)}`);
model.destroy();
engine.destroy();
