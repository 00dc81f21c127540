// Dumps what @huggingface/gguf (an independent GGUF parser) reads from a
// file, as JSON: every key with its value (bigints and numbers as strings,
// arrays as their length), the tensor infos and the data offset.
import { gguf } from "@huggingface/gguf";
const r = await gguf(process.argv[2], { allowLocalFile: true });
const kv = [];
for (const [k, v] of Object.entries(r.metadata)) {
  if (k === "version" || k === "tensor_count" || k === "kv_count") continue;
  kv.push([k, Array.isArray(v) ? { n: v.length } : Object.is(v, -0) ? "-0" : String(v)]);
}
console.log(JSON.stringify({
  kv,
  tensors: r.tensorInfos.map((t) => [t.name, t.shape.map(String), String(t.offset)]),
  data_offset: String(r.tensorDataOffset),
}));
