// llama_eval.mjs - a real GGUF client for tests/mount_llama.py: loads a
// model with node-llama-cpp (llama.cpp's loader and CPU kernels), evaluates
// a fixed token sequence greedily and prints one JSON object on stdout:
//   {"tokens": [...], "confidences": [...], "name": ..., "chatTemplate": ...,
//    "note": ..., "text": ...}
// usage: node llama_eval.mjs NODE_MODULES_DIR MODEL.gguf TOKENS_JSON N [nommap]
// nommap: load with useMmap false (llama.cpp's --no-mmap: the weights are
// read(2) into memory instead of mapped).
// Exit 0 on success, 3 if node-llama-cpp cannot be loaded, 1 otherwise.
import path from "node:path";
import {pathToFileURL} from "node:url";

const [modulesDir, modelPath, tokensJson, nArg, mapArg] = process.argv.slice(2);
if (!modulesDir || !modelPath || !tokensJson) {
    console.error("usage: node llama_eval.mjs NODE_MODULES_DIR MODEL.gguf TOKENS_JSON [N]");
    process.exit(2);
}
const nGen = Number(nArg || 8);

let lib;
try {
    lib = await import(pathToFileURL(path.join(modulesDir, "node-llama-cpp", "dist", "index.js")).href);
} catch (e) {
    console.error("cannot load node-llama-cpp from " + modulesDir + ": " + e.message);
    process.exit(3);
}

const {getLlama, LlamaLogLevel} = lib;
try {
    // Prebuilt CPU binaries only: never build from source, never download.
    const llama = await getLlama({gpu: false, build: "never", skipDownload: true,
                                  logLevel: LlamaLogLevel.error});
    const model = await llama.loadModel({modelPath, useMmap: mapArg !== "nommap"});
    const ctx = await model.createContext({contextSize: 128, threads: 1, batchSize: 64});
    const seq = ctx.getSequence();
    const prompt = JSON.parse(tokensJson);
    const tokens = [], confidences = [];
    for await (const out of seq.evaluateWithMetadata(prompt, {confidence: true},
                                                     {temperature: 0, yieldEogToken: true})) {
        tokens.push(out.token);
        confidences.push(out.confidence);
        if (tokens.length >= nGen)
            break;
    }
    const meta = model.fileInfo.metadata || {};
    const general = meta.general || {};
    const tok = meta.tokenizer || {};
    const mytool = meta.mytool || {};
    const result = {
        tokens,
        confidences,
        name: general.name ?? null,
        chatTemplate: tok.chat_template ?? null,
        note: mytool.note ?? null,
        text: model.detokenize(tokens),
    };
    await ctx.dispose();
    await model.dispose();
    await llama.dispose();
    process.stdout.write(JSON.stringify(result) + "\n");
    process.exit(0);
} catch (e) {
    console.error("llama_eval: " + (e && e.stack || e));
    process.exit(1);
}
