// llama_load.mjs - bench/run's llama.cpp client: loads MODEL.gguf with
// node-llama-cpp (llama.cpp's loader, mmap on, CPU), evaluates one token
// (every weight is read once) and prints "LOAD_MS EVAL_MS" on stdout.
// usage: node llama_load.mjs NODE_MODULES_DIR MODEL.gguf
import path from "node:path";
import {pathToFileURL} from "node:url";

const [modulesDir, modelPath] = process.argv.slice(2);
const lib = await import(pathToFileURL(path.join(modulesDir, "node-llama-cpp", "dist", "index.js")).href);
const {getLlama, LlamaLogLevel} = lib;
const llama = await getLlama({gpu: false, build: "never", skipDownload: true,
                              logLevel: LlamaLogLevel.error});
const t0 = performance.now();
const model = await llama.loadModel({modelPath});
const t1 = performance.now();
const ctx = await model.createContext({contextSize: 64, threads: 2, batchSize: 8});
const seq = ctx.getSequence();
for await (const _ of seq.evaluate([1], {temperature: 0})) break;
const t2 = performance.now();
await ctx.dispose();
await model.dispose();
await llama.dispose();
process.stdout.write(`${(t1 - t0).toFixed(1)} ${(t2 - t1).toFixed(1)}\n`);
