// Serves this page, the library and a model folder or .gguf file on 127.0.0.1, then prints the URL:
//   node examples/page-worker/serve.mjs <checkpoint folder | file.gguf> [--port 8080]
// Open the URL in a browser with WebGPU (Chrome, Edge, Safari 26, Firefox 141+): the page loads the
// model in a Web Worker and chats with it. In your own app, bundle main.js and worker.js with the
// `webinfer` package (vite, esbuild ...) instead of this server.
import { createReadStream, existsSync, statSync } from 'node:fs';
import { createServer } from 'node:http';
import { basename, dirname, extname, join, normalize, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const source = process.argv[2];
if (!source || !existsSync(source)) {
  console.error('usage: node examples/page-worker/serve.mjs <checkpoint folder | file.gguf> [--port N]');
  process.exit(2);
}
const portAt = process.argv.indexOf('--port');
const port = portAt > 0 ? Number(process.argv[portAt + 1]) : 8080;
const lib = fileURLToPath(import.meta.resolve('webinfer'));
const isFile = statSync(source).isFile();
const modelRoot = resolve(isFile ? dirname(source) : source);
const modelUrl = isFile ? `/model/${encodeURIComponent(basename(source))}` : '/model/';
const types = { '.html': 'text/html', '.js': 'text/javascript', '.json': 'application/json', '.map': 'application/json' };

createServer((req, res) => {
  const path = decodeURIComponent(new URL(req.url, 'http://x').pathname);
  let file = null;
  if (path === '/config.json') {
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ model: modelUrl }));
    return;
  }
  if (path === '/' || path === '/index.html') file = join(here, 'index.html');
  else if (path === '/main.js' || path === '/worker.js') file = join(here, path.slice(1));
  else if (path === '/webinfer.js' || path === '/webinfer.js.map') file = join(dirname(lib), basename(path));
  else if (path.startsWith('/model/')) {
    const f = normalize(join(modelRoot, path.slice('/model/'.length)));
    if (f.startsWith(modelRoot + sep) && existsSync(f) && statSync(f).isFile()) file = f;
  }
  if (!file || !existsSync(file)) {
    res.writeHead(404, { 'content-type': 'text/plain' }).end(`not found: ${path}`);
    return;
  }
  res.writeHead(200, { 'content-type': types[extname(file)] ?? 'application/octet-stream', 'content-length': statSync(file).size });
  createReadStream(file).pipe(res);
}).listen(port, '127.0.0.1', function () {
  console.log(`open http://127.0.0.1:${this.address().port}/ (the model: ${source}; Ctrl-C stops)`);
});
