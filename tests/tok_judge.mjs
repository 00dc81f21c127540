// tok_judge.mjs - the judges of hf/ for tests/mount_tokenizer.py: llama.cpp
// (node-llama-cpp, loading the GGUF vocabulary only) and transformers.js
// (@huggingface/transformers, AutoTokenizer on the hf/ directory, local
// files only) tokenize each text of a corpus; prints one JSON object:
//   {"llama": [[ids]...], "addBos": bool, "addEos": bool,
//    "hf": [[ids]...] or null, "hfAdded": [[ids]...], "hfError": "...",
//    "bos": id or null, "eos": id or null (llama.cpp's), "sep": its SEP id or null}
// Texts are tokenized with special tokens parsed and none added; hfAdded
// is transformers.js's with its special tokens added (its post-processor),
// to be llama's ids with the BOS and EOS llama.cpp adds (addBos, addEos).
// The corpus is a JSON list of hex strings: each text's bytes, decoded as
// UTF-8 here (bytes that are not UTF-8 become U+FFFD, as any UTF-8 reader
// makes them: neither tokenizer takes other than a string of characters).
// usage: node tok_judge.mjs NODE_MODULES_DIR MODEL.gguf HF_DIR CORPUS_JSON
// Exit 0, 3 if a judge cannot be loaded, 1 otherwise.
import path from "node:path";
import {pathToFileURL} from "node:url";

const [mods, modelPath, hfDir, corpusJson] = process.argv.slice(2);
const corpus = JSON.parse(corpusJson).map(
    (h) => new TextDecoder("utf-8").decode(Buffer.from(h, "hex")));
const load = async (p) => import(pathToFileURL(path.join(mods, p)).href);
let lib, tf;
try {
    lib = await load("node-llama-cpp/dist/index.js");
    tf = await load("@huggingface/transformers/dist/transformers.node.mjs");
} catch (e) {
    console.error("cannot load a judge from " + mods + ": " + e.message);
    process.exit(3);
}
const out = {llama: [], addBos: null, addEos: null, hf: null, hfAdded: null,
             hfError: null};
const llama = await lib.getLlama({gpu: false, build: "never", skipDownload: true,
                                  logLevel: lib.LlamaLogLevel.error});
const model = await llama.loadModel({modelPath, vocabOnly: true});
for (const t of corpus)
    out.llama.push(Array.from(model.tokenize(t, true)));
out.addBos = model.tokens.shouldPrependBosToken;
out.addEos = model.tokens.shouldAppendEosToken;
out.bos = model.tokens.bos;
out.eos = model.tokens.eos;
out.sep = model.tokens.sep;
await model.dispose();
await llama.dispose();
try {
    tf.env.allowRemoteModels = false;
    tf.env.localModelPath = "/";
    const tok = await tf.AutoTokenizer.from_pretrained(hfDir, {local_files_only: true});
    out.hf = corpus.map((t) => Array.from(tok.encode(t, {add_special_tokens: false})));
    out.hfAdded = corpus.map((t) => Array.from(tok.encode(t)));
} catch (e) {
    out.hfError = String(e && e.message || e);
}
process.stdout.write(JSON.stringify(out) + "\n");
