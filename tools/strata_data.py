"""strata's data pipeline in Python, for tools that must see the exact batches strata saw:
the counter-based hash (src/core/rng.hpp), the byte-level text dataset with its chunked
train/validation split (io/text_dataset.cpp), token shards (io/token_shard.hpp: strata's
.tok files and llm.c's .bin files, memory-mapped) with the same split over their tokens
(io/token_corpus.cpp), and random tokens (io/random_tokens.hpp)."""
import glob
import os

import numpy as np

MASK = (1 << 64) - 1
TRAIN, VALIDATION = 1, 2
CHUNK_BYTES = 4096
CHUNK_TOKENS = 4096
SHARD_MAGIC = b"STRATATK"
LLMC_MAGIC = 20240520


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


def read_shard(path):
    """A token shard's tokens as a read-only memory map (strata .tok or llm.c .bin)."""
    raw = np.memmap(path, dtype=np.uint8, mode="r")
    if len(raw) >= 64 and bytes(raw[:8]) == SHARD_MAGIC:
        version, width = (int(x) for x in raw[8:16].view("<u4"))
        count, vocab = (int(x) for x in raw[16:32].view("<u8"))
        if version != 1 or width not in (2, 4):
            raise SystemExit(f"{path}: token shard version {version}, width {width}: not one this tool reads")
        header = 64
    elif len(raw) >= 1024 and int(raw[:4].view("<i4")[0]) == LLMC_MAGIC:
        version, count = (int(x) for x in raw[4:12].view("<i4"))
        if version != 1:
            raise SystemExit(f"{path}: llm.c token file version {version}: not one this tool reads")
        width, vocab, header = 2, 0, 1024
    else:
        raise SystemExit(f"{path}: not a token shard (neither strata's nor llm.c's header)")
    if len(raw) != header + count * width:
        raise SystemExit(f"{path}: {len(raw)} bytes, the header says {header + count * width}")
    return np.memmap(path, dtype="<u2" if width == 2 else "<u4", mode="r", offset=header, shape=(count,)), vocab


def write_shard(path, tokens, vocab):
    """Writes tokens (any integer array) as a strata shard: uint16 when every token is below
    65536, else uint32. Any flat token file becomes a shard this way, e.g.
      write_shard("train.tok", np.fromfile("train.bin", dtype=np.uint16), 50257)"""
    tokens = np.asarray(tokens)
    width = 2 if tokens.size == 0 or int(tokens.max()) < 65536 else 4
    header = np.zeros(64, dtype=np.uint8)
    header[:8] = np.frombuffer(SHARD_MAGIC, dtype=np.uint8)
    header[8:16] = np.array([1, width], dtype="<u4").view(np.uint8)
    header[16:32] = np.array([tokens.size, vocab], dtype="<u8").view(np.uint8)
    with open(path + ".tmp", "wb") as f:
        f.write(header.tobytes())
        f.write(tokens.astype("<u2" if width == 2 else "<u4").tobytes())
    os.replace(path + ".tmp", path)


def expand_shards(patterns):
    files = set()
    for pat in patterns:
        matched = [p for p in glob.glob(pat) if os.path.isfile(p)]
        if not matched:
            raise SystemExit(f"data.shards: '{pat}' matches no readable token shard")
        files.update(matched)
    return sorted(files, key=lambda s: s.encode())


class TokenCorpus:
    """Token shards cut into chunks of CHUNK_TOKENS numbered across the shards, each chunk in
    validation or training by the text dataset's rule (or validation from val_shards).
    The shards stay memory-mapped: a split is a list of views, never copied whole."""

    def __init__(self, shards, val_shards, val_fraction, seed):
        self.pieces = {TRAIN: [], VALIDATION: []}
        if val_shards:
            self.pieces[TRAIN] = [read_shard(p)[0] for p in expand_shards(shards)]
            self.pieces[VALIDATION] = [read_shard(p)[0] for p in expand_shards(val_shards)]
        else:
            threshold = int(val_fraction * 1e6)
            chunk = 0
            for p in expand_shards(shards):
                tokens = read_shard(p)[0]
                for start in range(0, len(tokens), CHUNK_TOKENS):
                    split = VALIDATION if counter_hash(0x5EED5A17, 0, chunk) % 1000000 < threshold else TRAIN
                    self.pieces[split].append(tokens[start:start + CHUNK_TOKENS])
                    chunk += 1
        self.starts = {k: np.cumsum([0] + [len(v) for v in pieces]) for k, pieces in self.pieces.items()}
        self.seed = seed

    def sequence(self, split, step, index, seq_len):
        starts, pieces = self.starts[split], self.pieces[split]
        start = counter_hash(self.seed ^ split, step, index) % (int(starts[-1]) - seq_len)
        out, pos, end = [], start, start + seq_len + 1
        while pos < end:
            k = int(np.searchsorted(starts, pos, side="right")) - 1
            take = min(end, int(starts[k + 1])) - pos
            out.append(np.asarray(pieces[k][pos - starts[k]:pos - starts[k] + take], dtype=np.int64))
            pos += take
        window = np.concatenate(out)
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
    if data["kind"] == "tokens":
        shards = data.get("shards") or [os.path.join(data["token_dir"], "shard_*.tok")]
        return TokenCorpus(shards, data.get("val_shards", []), data["val_fraction"], seed)
    return RandomTokens(deck["model"]["vocab_size"], seed)


def batch(source, split, step, batch_size, seq_len):
    """The global batch of (split, step): sequences 0..batch_size-1."""
    pairs = [source.sequence(split, step, i, seq_len) for i in range(batch_size)]
    return np.stack([p[0] for p in pairs]), np.stack([p[1] for p in pairs])
