// The Web Worker: webinfer's engine, the model and its request engine live here.
import { serveInWorker } from '/webinfer.js';

serveInWorker();
