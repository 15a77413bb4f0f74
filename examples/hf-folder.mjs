// A Hugging Face checkpoint folder (config.json, *.safetensors): greedy tokens for a prompt of token
// ids, and the text too when the folder has a tokenizer.json.
//   node examples/hf-folder.mjs path/to/folder ["prompt" | 1,2,3]
import { loadCheckpoint } from 'webinfer';
import { modelArg, nodeEngine } from './_engine.mjs';

const folder = modelArg('node examples/hf-folder.mjs <checkpoint folder> ["prompt" | ids like 1,2,3]');
const engine = await nodeEngine();
const model = await engine.loadModel(await loadCheckpoint(folder));
const arg = process.argv[3] ?? '1,2,3,4';
const tok = model.tokenizer;
const prompt = /^\d+(,\d+)*$/.test(arg) ? arg.split(',').map(Number) : tok ? tok.encode(arg) : null;
if (!prompt) throw new Error(`${folder} has no tokenizer.json: give the prompt as token ids, e.g. 1,2,3`);
const [tokens] = await model.generate([prompt], { maxNewTokens: 8 });
console.log(`prompt ${JSON.stringify(prompt)} -> ${JSON.stringify(tokens)}`);
if (tok) console.log(JSON.stringify(tok.decode(tokens)));
model.destroy();
engine.destroy();
