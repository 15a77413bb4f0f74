// An OpenAI-compatible server in your own program, and the official openai client talking to it.
//   node examples/server.mjs path/to/model(.gguf)
import OpenAI from 'openai';
import { loadCheckpoint, serve } from 'webinfer';
import { modelArg, nodeEngine } from './_engine.mjs';

const source = modelArg('node examples/server.mjs <checkpoint folder | file.gguf>');
const engine = await nodeEngine();
const model = await engine.loadModel({ ...(await loadCheckpoint(source)), name: 'local' });
const server = await serve(model, { port: 0 });   // 127.0.0.1, any free port
console.error(`serving on ${server.url}/v1`);
const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused' });
const prompt = model.tokenizer ? 'WebGPU is' : [1, 2, 3, 4];
const r = await client.completions.create({ model: 'local', prompt, max_tokens: 8, temperature: 0 });
console.log(JSON.stringify(r.choices[0].text), `(${r.usage.completion_tokens} tokens)`);
await server.close();
model.destroy();
engine.destroy();
