"""strata's data pipeline in Python, for tools that must see the exact batches strata saw:
the counter-based hash (src/core/rng.hpp), the byte-level text dataset with its chunked
train/validation split (io/text_dataset.cpp) and random tokens (io/random_tokens.hpp)."""
import glob
import os

import numpy as np

MASK = (1 << 64) - 1
TRAIN, VALIDATION = 1, 2
CHUNK_BYTES = 4096


def mix64(x):
    x = (x + 0x9E3779B97F4A7C15) & MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


def counter_hash(seed, stream, index):
    return mix64(mix64(seed ^ mix64(stream)) ^ mix64((index + 0x632BE59BD9B4E019) & MASK))


def expand(patterns):
    files = set()
    for pat in patterns:
        matched = [p for p in glob.glob(pat)
                   if not p.endswith((".dat", ".u8")) and os.path.isfile(p)]
        if not matched:
            raise SystemExit(f"data.files: '{pat}' matches no readable text file")
        files.update(matched)
    return sorted(files, key=lambda s: s.encode())


class TextDataset:
    def __init__(self, patterns, val_fraction, seed):
        data = b"".join(open(f, "rb").read() for f in expand(patterns))
        threshold = int(val_fraction * 1e6)
        train, val = [], []
        for chunk, start in enumerate(range(0, len(data), CHUNK_BYTES)):
            part = data[start:start + CHUNK_BYTES]
            (val if counter_hash(0x5EED5A17, 0, chunk) % 1000000 < threshold else train).append(part)
        self.splits = {TRAIN: np.frombuffer(b"".join(train), dtype=np.uint8),
                       VALIDATION: np.frombuffer(b"".join(val), dtype=np.uint8)}
        self.seed = seed

    def sequence(self, split, step, index, seq_len):
        src = self.splits[split]
        start = counter_hash(self.seed ^ split, step, index) % (len(src) - seq_len)
        window = src[start:start + seq_len + 1].astype(np.int64)
        return window[:-1], window[1:]


class RandomTokens:
    def __init__(self, vocab, seed):
        self.vocab, self.seed = vocab, seed

    def sequence(self, split, step, index, seq_len):
        toks = np.array([counter_hash(self.seed ^ split, step, index * (seq_len + 1) + t) % self.vocab
                         for t in range(seq_len + 1)], dtype=np.int64)
        return toks[:-1], toks[1:]


def make_source(deck):
    data, seed = deck["data"], deck["run"]["seed"]
    if data["kind"] == "text":
        return TextDataset(data["files"], data["val_fraction"], seed)
    return RandomTokens(deck["model"]["vocab_size"], seed)


def batch(source, split, step, batch_size, seq_len):
    """The global batch of (split, step): sequences 0..batch_size-1."""
    pairs = [source.sequence(split, step, i, seq_len) for i in range(batch_size)]
    return np.stack([p[0] for p in pairs]), np.stack([p[1] for p in pairs])
