// Speech to text with a Whisper checkpoint: a WAV file (any rate, mono or stereo), resampled to 16 kHz.
//   node examples/transcribe.mjs path/to/whisper clip.wav
import { readFile } from 'node:fs/promises';
import { audioToPcm, loadCheckpoint } from 'webinfer';
import { modelArg, nodeEngine } from './_engine.mjs';

const folder = modelArg('node examples/transcribe.mjs <whisper folder> <file.wav>');
const wav = process.argv[3];
if (!wav) { console.error('usage: node examples/transcribe.mjs <whisper folder> <file.wav>'); process.exit(2); }
const engine = await nodeEngine();
const model = await engine.loadModel(await loadCheckpoint(folder));
const pcm = audioToPcm(new Uint8Array(await readFile(wav)), 16000, wav);
const r = await model.transcribe(pcm, { timestamps: true });
console.log(JSON.stringify(r.text));
for (const s of r.segments ?? []) console.log(`[${s.start.toFixed(2)} -> ${s.end.toFixed(2)}] ${s.text}`);
model.destroy();
engine.destroy();
