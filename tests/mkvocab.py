#!/usr/bin/env python3
"""mkvocab.py - a vocabulary-only GGUF made from a real Hugging Face
tokenizer (tokenizer.json + tokenizer_config.json) as llama.cpp's converter
(convert_hf_to_gguf.py) makes it for a byte-level BPE model
(ModelBase._set_vocab_gpt2: get_vocab_base, get_vocab_base_pre, then
gguf-py's SpecialVocab with load_merges):

  tokens     every id below the vocabulary's size in id order (the model's
             vocabulary and the added tokens), a hole as "[PAD<i>]" (type
             unused);
  types      an added token special, or looking special (does_token_look_
             special: "<|...|>", "<｜...｜>", "<unused...>", <pad>, <mask>,
             <2mass>, [@BOS@]), is control; another added token is
             user_defined (its U+2581 written as a space); the rest normal;
  pre        tokenizer.ggml.pre from the hash of the tokenization of
             llama.cpp's check text (chkhsh: sha256 of str(list of ids),
             the ids as Python's transformers gives them with its special
             tokens): the table below holds the hashes of
             get_vocab_base_pre that the tests use; another hash is refused
             (as the converter refuses it) unless --pre names one;
  merges     model.merges, a pair ["a","b"] written "a b" (a space inside
             a part as U+0120);
  special    SpecialVocab: bos/eos/unk/sep/pad/cls/mask ids from
             tokenizer_config.json's *_token texts looked up in
             added_tokens (the first token of that text); add_bos/add_eos
             from the post-processor's TemplateProcessing (its first and
             last special token), then tokenizer_config.json's
             add_*_token where it is a bool.

The check text's ids come from the caller (the converter runs Python's
transformers; the tests run transformers.js, tests/vocab_ids.mjs): --chk
FILE holds {"plain": [ids without special tokens], "framed": [ids with the
post-processor's]}.  Python's LlamaTokenizerFast (tokenizer_class
LlamaTokenizerFast or LlamaTokenizer) rebuilds its post-processor from
add_bos_token (default true) and add_eos_token, so for it the framed ids
are the plain ones with those added; for the others they are "framed".

Not done (not needed by byte-level BPE vocabularies of the tests): an
added token with normalized false is written as it is (the converter
writes decode(encode(token)), the same text for these vocabularies); the
vocabulary's size is the largest id + 1 unless --vocab-size gives
config.json's.

Python 3 alone; the GGUF (version 3) is written here.
usage: mkvocab.py HF_DIR OUT.gguf --chk FILE [--pre NAME] [--name NAME]
                  [--arch ARCH] [--vocab-size N] [--print-pre]
"""
import argparse
import array
import hashlib
import json
import os
import struct
import sys


# chkhsh -> tokenizer.ggml.pre: entries of llama.cpp's get_vocab_base_pre
# (conversion/base.py), the model each was computed from in the comment.
CHKHSH = {
    "0ef9807a4087ebef797fc749390439009c3b9eda9ad1a097abbe738f486c01e5": "llama-bpe",  # Meta-Llama-3-8B
    "c136ed14d01c2745d4f60a9596ae66800e2b61fa45643e72436041855ad4089d": "smaug-bpe",  # Smaug-Llama-3-70B
    "e636dc30a262dcc0d8c323492e32ae2b70728f4df7dfe9737d9f920a282b8aea": "qwen2",  # Qwen1.5-7B
    "d4540891389ea895b53b399da6ac824becc30f2fba0e9ddbb98f92e55ca0e97c": "qwen2",  # Qwen3-Embedding-0.6B
    "877081d19cf6996e2c4ff0e1236341e9b7bde288f5311a56a937f0afbbb3aeb5": "deepseek-v3",  # DeepSeek-V3
    "b4b8ca1f9769494fbd956ebc4c249de6131fb277a4a3345a7a92c7dd7a55808d": "joyai-llm",  # JoyAI-LLM-Flash
    "ccc2ef013c104be7bae2965776d611e1d7a8a2a9c547dd93a682c9a9fc80352e": "gpt-4o",  # Xenova/gpt-4o
}

# llama.cpp's check text (get_vocab_base_pre's chktxt).
CHKTXT = ("\n \n\n \n\n\n \t \t\t \t\n  \n   \n    \n     \n\U0001f680 (normal) \U0001f636\u200d\U0001f32b\ufe0f "
          "(multiple emojis concatenated) \u2705 \U0001f999\U0001f999 3 33 333 3333 33333 333333 3333333 "
          "33333333 3.3 3..3 3...3 \u1780\u17b6\u1793\u17cb\u178f\u17c2\u1796\u17b7\u179f\u17c1\u179f"
          "\u17a2\u17b6\u1785\U0001f601 ?\u6211\u60f3\u5728apple\u5de5\u4f5c1314151\u5929\uff5e "
          "------======= \u043d\u0435\u0449\u043e \u043d\u0430 \u0411\u044a\u043b\u0433\u0430\u0440\u0441"
          "\u043a\u0438 ''''''```````\"\"\"\"......!!!!!!?????? I've been 'told he's there, 'RE you sure? "
          "'M not sure I'll make it, 'D you like some tea? We'Ve a'lL")

NORMAL, CONTROL, USER_DEFINED, UNUSED = 1, 3, 4, 5
SPECIAL_TYPES = ("bos", "eos", "unk", "sep", "pad", "cls", "mask")
KEY_OF = {"bos": "bos_token_id", "eos": "eos_token_id", "unk": "unknown_token_id",
          "sep": "seperator_token_id", "pad": "padding_token_id", "cls": "cls_token_id",
          "mask": "mask_token_id"}


def looks_special(t):
    """convert_hf_to_gguf's does_token_look_special."""
    return (t in ("<pad>", "<mask>", "<2mass>", "[@BOS@]") or
            (t.startswith("<|") and t.endswith("|>")) or
            (t.startswith("<\uff5c") and t.endswith("\uff5c>")) or
            (t.startswith("<unused") and t.endswith(">")))


def chk_ids(chk, cfg, ids):
    """The ids Python's transformers gives the check text (see above)."""
    cls = cfg.get("tokenizer_class", "")
    if cls in ("LlamaTokenizerFast", "LlamaTokenizer"):
        bos = cfg.get("add_bos_token", True) and "bos" in ids
        eos = cfg.get("add_eos_token", False) and "eos" in ids
        return ([ids["bos"]] if bos else []) + chk["plain"] + ([ids["eos"]] if eos else [])
    return chk["framed"]


def vocab(tok, size):
    """tokens and types (get_vocab_base)."""
    rev = {i: t for t, i in tok["model"]["vocab"].items()}
    added = {a["id"]: a for a in tok.get("added_tokens", [])}
    for i, a in added.items():
        rev[i] = a["content"]
    if size is None:
        size = max(rev) + 1
    tokens, types = [], []
    for i in range(size):
        if i not in rev:
            tokens.append("[PAD%d]" % i)
            types.append(UNUSED)
            continue
        t = rev[i]
        if i in added:
            if added[i].get("special") or looks_special(t):
                types.append(CONTROL)
            else:
                t = t.replace("\u2581", " ")
                types.append(USER_DEFINED)
        else:
            types.append(NORMAL)
        tokens.append(t)
    return tokens, types


def merges_of(tok):
    m = tok["model"].get("merges") or []
    if m and isinstance(m[0], list):
        return [" ".join("".join(chr(ord(c) + 256) if c == " " else c for c in p) for p in pair) for pair in m]
    return list(m)


def special(tok, cfg):
    """SpecialVocab._try_load_from_tokenizer_json: ids and add_* flags."""
    ids, add = {}, {}
    added = tok.get("added_tokens", [])
    cfg = dict(cfg)
    sb, sc, se, ss = (cfg.get(k) for k in ("bos_token", "cls_token", "eos_token", "sep_token"))
    if not sb and sc:
        cfg["bos_token"] = sb = sc
    if not se and ss:
        cfg["eos_token"] = se = ss
    pp = tok.get("post_processor") or {}
    for p in pp.get("processors", [pp]):
        if p.get("type") == "TemplateProcessing":
            single = p.get("single", [])
            if len(single) > 1:
                first = single[0].get("SpecialToken", {}).get("id")
                if first:
                    if first not in (sb, sc) and not sb:
                        cfg["bos_token"] = sb = first
                    add["bos"] = first in (sb, sc)
                last = single[-1].get("SpecialToken", {}).get("id")
                if last:
                    if last != se:
                        cfg["eos_token"] = se = last
                    add["eos"] = last == se
    for typ in SPECIAL_TYPES:
        e = cfg.get("add_%s_token" % typ)
        if isinstance(e, bool):
            add[typ] = e
        e = cfg.get("%s_token" % typ)
        text = e if isinstance(e, str) else e.get("content") if isinstance(e, dict) else None
        if not isinstance(text, str):
            continue
        tid = next((a["id"] for a in added if a.get("content") == text), None)
        if isinstance(tid, int) and typ not in ids:
            ids[typ] = tid
    return ids, add


# --- a minimal GGUF (version 3) writer: metadata only, no tensors ---
T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR = 4, 5, 6, 7, 8, 9


def gstr(s):
    b = s.encode("utf-8") if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def kv(key, typ, val):
    out = gstr(key) + struct.pack("<I", typ)
    if typ == T_STR:
        return out + gstr(val)
    if typ == T_U32:
        return out + struct.pack("<I", val)
    if typ == T_F32:
        return out + struct.pack("<f", val)
    if typ == T_BOOL:
        return out + struct.pack("<B", 1 if val else 0)
    raise ValueError(typ)


def kv_arr(key, et, vals):
    out = gstr(key) + struct.pack("<IIQ", T_ARR, et, len(vals))
    if et == T_STR:
        return out + b"".join(gstr(v) for v in vals)
    if et == T_I32:
        a = array.array("i", vals)
        if sys.byteorder != "little":
            a.byteswap()
        return out + a.tobytes()
    raise ValueError(et)


def write_gguf(path, kvs):
    body = b"".join(kvs)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs)) + body)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("hf_dir")
    ap.add_argument("out")
    ap.add_argument("--chk", help="JSON file: the check text's ids (plain, framed)")
    ap.add_argument("--pre", help="tokenizer.ggml.pre when the hash is not in the table")
    ap.add_argument("--name", default=None)
    ap.add_argument("--arch", default="llama")
    ap.add_argument("--vocab-size", type=int, default=None)
    ap.add_argument("--print-chktxt", action="store_true")
    a = ap.parse_args()
    if a.print_chktxt:
        sys.stdout.write(json.dumps(CHKTXT))
        return 0
    with open(os.path.join(a.hf_dir, "tokenizer.json"), encoding="utf-8") as f:
        tok = json.load(f)
    cfg = {}
    if os.path.exists(os.path.join(a.hf_dir, "tokenizer_config.json")):
        with open(os.path.join(a.hf_dir, "tokenizer_config.json"), encoding="utf-8") as f:
            cfg = json.load(f)
    if tok["model"]["type"] != "BPE":
        sys.exit("mkvocab: %s: model %s: only byte-level BPE is made here" % (a.hf_dir, tok["model"]["type"]))
    pre = a.pre
    ids, add = special(tok, cfg)
    if a.chk:
        with open(a.chk) as f:
            chk = chk_ids(json.load(f), cfg, ids)
        h = hashlib.sha256(str(chk).encode()).hexdigest()
        pre = CHKHSH.get(h, pre)
        if pre is None:
            sys.exit("mkvocab: %s: chkhsh %s is not in the table (the converter refuses it too)" % (a.hf_dir, h))
    if pre is None:
        sys.exit("mkvocab: give --chk or --pre")
    tokens, types = vocab(tok, a.vocab_size)
    ar = a.arch
    kvs = [kv("general.architecture", T_STR, ar),
           kv("general.name", T_STR, a.name or os.path.basename(os.path.normpath(a.hf_dir))),
           kv(ar + ".block_count", T_U32, 1), kv(ar + ".context_length", T_U32, 4096),
           kv(ar + ".embedding_length", T_U32, 64), kv(ar + ".feed_forward_length", T_U32, 128),
           kv(ar + ".attention.head_count", T_U32, 4), kv(ar + ".attention.head_count_kv", T_U32, 4),
           kv(ar + ".rope.freq_base", T_F32, 10000.0),
           kv(ar + ".attention.layer_norm_rms_epsilon", T_F32, 1e-6),
           kv("tokenizer.ggml.model", T_STR, "gpt2"), kv("tokenizer.ggml.pre", T_STR, pre),
           kv_arr("tokenizer.ggml.tokens", T_STR, tokens), kv_arr("tokenizer.ggml.token_type", T_I32, types),
           kv_arr("tokenizer.ggml.merges", T_STR, merges_of(tok))]
    for typ in SPECIAL_TYPES:
        if typ in ids and ids[typ] < len(tokens):
            kvs.append(kv("tokenizer.ggml." + KEY_OF[typ], T_U32, ids[typ]))
    for typ, v in add.items():
        if typ in ("bos", "eos", "sep"):
            kvs.append(kv("tokenizer.ggml.add_%s_token" % typ, T_BOOL, v))
    write_gguf(a.out, kvs)
    sys.stdout.write("%s: pre %s, %d tokens, ids %s, add %s\n" % (a.out, pre, len(tokens), ids, add))
    return 0


if __name__ == "__main__":
    sys.exit(main())
