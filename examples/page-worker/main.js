// The page: the model lives in a Web Worker (worker.js runs serveInWorker), so loading and generating
// never block this thread; WorkerModel gives the same chat.completions.create as an in-process model.
import { WorkerModel } from '/webinfer.js';

const $ = (id) => document.getElementById(id);
const { model: source } = await (await fetch('/config.json')).json();
const worker = new Worker(new URL('./worker.js', import.meta.url), { type: 'module' });
let model;
try {
  model = await WorkerModel.load(worker, new URL(source, location.href).href, {
    onProgress: (p) => { $('status').textContent = `loading: ${p.phase ?? ''} ${p.total ? Math.round((100 * p.loaded) / p.total) : 0}%`; },
  });
} catch (e) {
  $('status').textContent = `could not load the model: ${e.message}`;
  throw e;
}
$('status').textContent = `${model.id} (${model.architecture}) is ready`;
const button = $('ask').querySelector('button');
button.disabled = false;
const messages = [];
$('ask').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const text = $('msg').value.trim();
  if (!text) return;
  button.disabled = true;
  messages.push({ role: 'user', content: text });
  $('log').textContent += `you: ${text}\nmodel: `;
  let reply = '';
  try {
    for await (const chunk of model.chat.completions.create({ messages, max_tokens: 32, temperature: 0, stream: true })) {
      const delta = chunk.choices[0]?.delta?.content ?? '';
      reply += delta;
      $('log').textContent += delta;
    }
    messages.push({ role: 'assistant', content: reply });
  } catch (e) {
    $('log').textContent += `[error: ${e.message}]`;
  }
  $('log').textContent += '\n';
  document.body.dataset.replies = String(messages.filter((m) => m.role === 'assistant').length);
  button.disabled = false;
});
