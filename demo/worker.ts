// The demo's Web Worker: webinfer's engine, the loaded model and its request engine live here
// (serveInWorker); the page drives them through WorkerModel (main.ts).
import { serveInWorker } from 'webinfer';

serveInWorker();
