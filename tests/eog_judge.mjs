// eog_judge.mjs - llama.cpp's special tokens of a GGUF, for
// tests/mount_hffiles.py (issue 36: hf/generation_config.json): loads the
// vocabulary only through node-llama-cpp and prints one JSON object
//   {"bos": id|null, "eos": id|null, "eot": id|null,
//    "eog": [ids llama.cpp ends a generation on: llama_vocab_is_eog]}
// usage: node eog_judge.mjs NODE_MODULES_DIR MODEL.gguf
// Exit 0; 3 if node-llama-cpp cannot be loaded; 1 otherwise.
import path from "node:path";
import {pathToFileURL} from "node:url";

const [mods, modelPath] = process.argv.slice(2);
let lib;
try {
    lib = await import(pathToFileURL(path.join(mods, "node-llama-cpp/dist/index.js")).href);
} catch (e) {
    console.error("cannot load node-llama-cpp from " + mods + ": " + e.message);
    process.exit(3);
}
const llama = await lib.getLlama({gpu: false, build: "never", skipDownload: true,
                                  logLevel: lib.LlamaLogLevel.error});
const model = await llama.loadModel({modelPath, vocabOnly: true});
const eog = [];
// llama.cpp's own llama_vocab_is_eog (the addon's); LlamaModel.isEogToken
// adds node-llama-cpp's EOS and EOT, which llama.cpp may have dropped
// (gpt-oss's <|end|>)
for (const t of model.iterateAllTokens())
    if (model._model.isEogToken(t))
        eog.push(t);
const out = {bos: model.tokens.bos, eos: model.tokens.eos, eot: model.tokens.eot, eog};
await model.dispose();
await llama.dispose();
process.stdout.write(JSON.stringify(out) + "\n");
