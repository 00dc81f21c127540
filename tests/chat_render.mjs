// chat_render.mjs - hf/tokenizer_config.json's chat_template rendered by
// @huggingface/jinja (as transformers.js does) for tests/mount_tokenizer.py;
// the messages are tests/chatdump.c's, add_generation_prompt true.
// usage: node chat_render.mjs NODE_MODULES_DIR TOKENIZER_CONFIG_JSON [TEMPLATE]
// With TEMPLATE (hf/chat_template.jinja, issue 36) the template is that
// file's, else tokenizer_config.json's chat_template.
// Prints the text; exit 3 if @huggingface/jinja cannot be loaded.
import fs from "node:fs";
import path from "node:path";
import {pathToFileURL} from "node:url";

const [mods, cfgPath, tmplPath] = process.argv.slice(2);
let jinja;
try {
    jinja = await import(pathToFileURL(path.join(mods, "@huggingface/jinja/dist/index.js")).href);
} catch (e) {
    console.error("cannot load @huggingface/jinja: " + e.message);
    process.exit(3);
}
const cfg = JSON.parse(fs.readFileSync(cfgPath, "utf8"));
const messages = [
    {role: "system", content: "You are terse."},
    {role: "user", content: "Hello, \"world\" \\ caf\u00e9 \u{1f600}\nline two"},
    {role: "assistant", content: "Hi."},
    {role: "user", content: "Again?"},
];
const t = new jinja.Template(tmplPath ? fs.readFileSync(tmplPath, "utf8") : cfg.chat_template);
process.stdout.write(t.render({messages, add_generation_prompt: true,
                               bos_token: cfg.bos_token ?? "", eos_token: cfg.eos_token ?? ""}));
