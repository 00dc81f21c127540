#!/usr/bin/env python3
"""A GGUF with a SentencePiece vocabulary of Gemma 3's size (262,144
tokens) that gets an hf/tokenizer.json, for bench/run's tokenizer group
(issue 36: the largest vocabulary people run, rendered on the first open).

    bench/vocab262k.py OUT.gguf [N_TOKENS]

Gemma 3's layout: <pad> <eos> <bos> <unk>, its turn tokens, the 256 byte
tokens, then the pieces: single characters (U+2581, ASCII letters and
digits, 2,000 CJK ideographs), then pieces made by joining two earlier
ones (at most 24 bytes, 8 on the average), each with a score below every earlier one, so
that llama.cpp and a BPE merge list merge alike (vocab/hfcheck.c's rule).
Deterministic (a fixed seed).  The GGUF is written by tests/mount_hffiles.py's
gguf_bytes; no tensors."""
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from mount_hffiles import ARR, BOOL, F32, I32, STR, U32, gguf_bytes  # noqa: E402


def vocab(n):
    toks = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"]
    types = [3, 3, 3, 2, 3, 3]
    toks += ["<0x%02X>" % b for b in range(256)]
    types += [6] * 256
    chars = ["\u2581"] + [chr(c) for c in range(0x21, 0x7f)] + [chr(0x4e00 + i) for i in range(2000)]
    first = len(toks)
    toks += chars
    types += [1] * len(chars)
    seen = set(toks)
    rng = random.Random(36)
    pieces = list(chars)
    while len(toks) < n:
        # early (short) pieces the more likely: 8 bytes a piece on the
        # average, about as Gemma 3's many-script vocabulary
        t = pieces[int(len(pieces) * rng.random() ** 3)] + pieces[int(len(pieces) * rng.random() ** 3)]
        if len(t.encode()) > 24 or t in seen:
            continue
        seen.add(t)
        toks.append(t)
        pieces.append(t)
        types.append(1)
    scores = [0.0] * first + [-float(i) for i in range(len(toks) - first)]
    return toks, types, scores


def make(path, n=262144):
    toks, types, scores = vocab(n)
    a = "gemma3."
    kvs = [("general.architecture", STR, "gemma3"), (a + "context_length", U32, 131072),
           (a + "embedding_length", U32, 2560), (a + "block_count", U32, 34),
           (a + "feed_forward_length", U32, 10240), (a + "attention.head_count", U32, 8),
           (a + "attention.head_count_kv", U32, 4), (a + "attention.key_length", U32, 256),
           (a + "attention.layer_norm_rms_epsilon", F32, 1e-6), (a + "attention.sliding_window", U32, 1024),
           ("tokenizer.ggml.model", STR, "llama"), ("tokenizer.ggml.tokens", ARR, (STR, toks)),
           ("tokenizer.ggml.scores", ARR, (F32, scores)), ("tokenizer.ggml.token_type", ARR, (I32, types)),
           ("tokenizer.ggml.bos_token_id", U32, 2), ("tokenizer.ggml.eos_token_id", U32, 1),
           ("tokenizer.ggml.unknown_token_id", U32, 3), ("tokenizer.ggml.padding_token_id", U32, 0),
           ("tokenizer.ggml.eot_token_id", U32, 5), ("tokenizer.ggml.add_bos_token", BOOL, 1)]
    with open(path + ".tmp", "wb") as f:
        f.write(gguf_bytes(kvs))
    os.rename(path + ".tmp", path)


if __name__ == "__main__":
    make(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 262144)
