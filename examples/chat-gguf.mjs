// Chat with a GGUF file: its tokenizer and chat template come from the file's metadata.
//   node examples/chat-gguf.mjs model.gguf ["your message"]
import { loadCheckpoint } from 'webinfer';
import { modelArg, nodeEngine } from './_engine.mjs';

const file = modelArg('node examples/chat-gguf.mjs <file.gguf> ["message"]');
const engine = await nodeEngine();
const model = await engine.loadModel(await loadCheckpoint(file));
const stream = await model.chat.completions.create({
  messages: [{ role: 'user', content: process.argv[3] ?? 'Name three rivers.' }],
  max_tokens: 32, temperature: 0, stream: true,
});
for await (const chunk of stream) process.stdout.write(chunk.choices[0]?.delta?.content ?? '');
process.stdout.write('\n');
model.destroy();
engine.destroy();
