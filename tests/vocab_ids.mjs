// vocab_ids.mjs - transformers.js (@huggingface/transformers) tokenizing
// texts with a Hugging Face tokenizer directory, for tests/mkvocab.py
// (the check text of llama.cpp's converter) and tests/mount_hfvocab.py
// (the corpus, judged against the original tokenizer.json).  Prints one
// JSON object {"plain": [[ids]...], "framed": [[ids]...]}: each text with
// special tokens parsed and none added, and with the post-processor's.
// usage: node vocab_ids.mjs NODE_MODULES_DIR HF_DIR TEXTS_JSON_FILE
//   TEXTS_JSON_FILE: a JSON list of strings.
// Exit 0, 3 if transformers.js cannot be loaded, 1 otherwise.
import fs from "node:fs";
import path from "node:path";
import {pathToFileURL} from "node:url";

const [mods, dir, textsFile] = process.argv.slice(2);
let tf;
try {
    tf = await import(pathToFileURL(path.join(mods, "@huggingface/transformers/dist/transformers.node.mjs")).href);
} catch (e) {
    console.error("cannot load transformers.js from " + mods + ": " + e.message);
    process.exit(3);
}
tf.env.allowRemoteModels = false;
tf.env.localModelPath = "/";
const texts = JSON.parse(fs.readFileSync(textsFile, "utf8"));
const tok = await tf.AutoTokenizer.from_pretrained(dir, {local_files_only: true});
const out = {
    plain: texts.map((t) => Array.from(tok.encode(t, {add_special_tokens: false}))),
    framed: texts.map((t) => Array.from(tok.encode(t))),
};
process.stdout.write(JSON.stringify(out) + "\n");
