#!/usr/bin/python3
"""Checks strata's exports against the formats' own definitions, written here from them
(not from strata's code), and makes the files the interop tests feed strata.

  hf DIR CKPT.h5 GRADS.h5   model.safetensors read by the reader below: every tensor equals
                            the checkpoint's (bit for bit, or its bf16 rounding); a GPT-2
                            forward written from Hugging Face's GPT2LMHeadModel gives
                            strata's loss of the batch in GRADS.h5 (ckpt_batch_grads) to 1e-5
  llmc FILE CKPT.h5         llm.c's header and offsets against its spec, every tensor against
                            the checkpoint (transposed, stacked, the padding zero)
  bad DIR HF_DIR LLMC_FILE  malformed files made from good ones (one fault each)
  synth-124m DIR            a GPT-2 124M-shaped Hugging Face folder of random weights and
                            llm.c token shards of random GPT-2 ids
  loss-124m DIR SHARD       the float64 GPT-2 loss of the shard's first sequence from DIR
"""
import json
import math
import os
import shutil
import struct
import sys

import h5py
import numpy as np

# PyTorch (1.5 s to import) only where a check needs it: the bf16 rounding and the
# GPT-2 forward; the llm.c checks of fp32 files, the bad files and the 124M files do not
torch = None


def need_torch():
    global torch
    if torch is None:
        import torch as t
        torch = t

DTYPES = {"F32": (np.float32, 4), "BF16": (np.uint16, 2), "F16": (np.float16, 2), "F64": (np.float64, 8)}


def read_safetensors(path):
    """{name: float32 array} and the metadata, by the format's definition."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {})
    base = 8 + n
    out, dtypes = {}, {}
    for name, e in header.items():
        b, end = e["data_offsets"]
        np_type, size = DTYPES[e["dtype"]]
        raw = np.frombuffer(blob, dtype=np_type, count=(end - b) // size, offset=base + b)
        assert raw.size * size == end - b and raw.size == int(np.prod(e["shape"], dtype=np.int64))
        if e["dtype"] == "BF16":
            raw = (raw.astype(np.uint32) << 16).view(np.float32)
        out[name] = raw.astype(np.float32).reshape(e["shape"])
        dtypes[name] = e["dtype"]
    return out, dtypes, meta


def bf16_rounded(a):
    need_torch()
    return torch.from_numpy(np.ascontiguousarray(a)).to(torch.bfloat16).to(torch.float32).numpy()


def ckpt_params(path):
    with h5py.File(path, "r") as f:
        params = {k: np.array(v) for k, v in f["params"].items()}
        deck = f.attrs["deck"]
    return params, deck


def strata_names(n_layer):
    """HF name -> strata name (strata's names per its checkpoint, HF's per GPT2LMHeadModel)."""
    m = {"transformer.wte.weight": "wte", "transformer.wpe.weight": "wpe",
         "transformer.ln_f.weight": "lnf.weight", "transformer.ln_f.bias": "lnf.bias"}
    pairs = [("ln_1", "ln1"), ("attn.c_attn", "attn.qkv"), ("attn.c_proj", "attn.proj"), ("ln_2", "ln2"),
             ("mlp.c_fc", "mlp.fc"), ("mlp.c_proj", "mlp.proj")]
    for l in range(n_layer):
        for hf, st in pairs:
            for kind in ("weight", "bias"):
                m[f"transformer.h.{l}.{hf}.{kind}"] = f"blocks.{l}.{st}.{kind}"
    return m


def gelu_new(x):
    need_torch()
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))))


def gpt2_loss(w, cfg, tokens, targets):
    """GPT2LMHeadModel's forward (pre-LN blocks, Conv1D weights [in, out], tied head),
    float64, mean cross-entropy over every position."""
    need_torch()
    C, H, eps = cfg["n_embd"], cfg["n_head"], cfg["layer_norm_epsilon"]
    t = {k: torch.from_numpy(v).double() for k, v in w.items()}
    B, T = tokens.shape
    ln = lambda x, p: torch.nn.functional.layer_norm(x, (C,), t[p + ".weight"], t[p + ".bias"], eps)
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
    x = t["transformer.wte.weight"][tokens] + t["transformer.wpe.weight"][torch.arange(T)]
    for l in range(cfg["n_layer"]):
        p = f"transformer.h.{l}."
        qkv = ln(x, p + "ln_1") @ t[p + "attn.c_attn.weight"] + t[p + "attn.c_attn.bias"]
        q, k, v = (z.view(B, T, H, C // H).transpose(1, 2) for z in qkv.split(C, dim=2))
        att = (q @ k.transpose(-2, -1)).mul_(1 / math.sqrt(C // H)).masked_fill_(mask, float("-inf"))
        y = (torch.softmax(att, dim=-1) @ v).transpose(1, 2).reshape(B, T, C)
        x = x + y @ t[p + "attn.c_proj.weight"] + t[p + "attn.c_proj.bias"]
        h = gelu_new(ln(x, p + "ln_2") @ t[p + "mlp.c_fc.weight"] + t[p + "mlp.c_fc.bias"])
        x = x + h @ t[p + "mlp.c_proj.weight"] + t[p + "mlp.c_proj.bias"]
    logits = ln(x, "transformer.ln_f") @ t["transformer.wte.weight"].T
    return torch.nn.functional.cross_entropy(logits.view(B * T, -1), targets.view(-1)).item()


def check_hf(folder, ckpt, grads):
    cfg = json.load(open(os.path.join(folder, "config.json")))
    assert cfg["model_type"] == "gpt2" and cfg["architectures"] == ["GPT2LMHeadModel"], cfg
    assert cfg["activation_function"] == "gelu_new" and cfg["tie_word_embeddings"] is True, cfg
    w, dtypes, meta = read_safetensors(os.path.join(folder, "model.safetensors"))
    assert meta.get("format") == "pt", meta
    params, _ = ckpt_params(ckpt)
    names = strata_names(cfg["n_layer"])
    assert set(w) == set(names), sorted(set(w) ^ set(names))
    bf16 = set(dtypes.values()) == {"BF16"}
    V = cfg["vocab_size"]
    for hf, st in names.items():
        want = params[st]
        if st == "wte":
            want = want[:V]
        want = want.reshape(w[hf].shape)
        if bf16:
            want = bf16_rounded(want)
        if not np.array_equal(w[hf], want):
            sys.exit(f"FAIL: {hf} differs from the checkpoint's {st}")
    print(f"model.safetensors: {len(w)} tensors ({'BF16' if bf16 else 'F32'}) equal the checkpoint's "
          f"{'bf16-rounded ' if bf16 else ''}parameters bit for bit")
    if grads:
        need_torch()
        with h5py.File(grads, "r") as f:
            tokens = torch.from_numpy(np.array(f["batch/tokens"])).long()
            targets = torch.from_numpy(np.array(f["batch/targets"])).long()
            strata_loss = float(f.attrs["loss"])
        loss = gpt2_loss(w, cfg, tokens, targets)
        rel = abs(loss - strata_loss) / abs(strata_loss)
        print(f"batch of {tuple(tokens.shape)}: strata loss {strata_loss:.8f}, PyTorch GPT-2 from model.safetensors "
              f"{loss:.8f}, relative difference {rel:.2e}")
        if rel > 1e-5:
            sys.exit("FAIL: the losses differ by more than 1e-5")


def read_llmc(path):
    """llm.c's GPT-2 model file per train_gpt2.c: header, then 16 tensors in order."""
    with open(path, "rb") as f:
        blob = f.read()
    h = np.frombuffer(blob[:1024], dtype=np.int32)
    assert h[0] == 20240326, f"magic {h[0]}"
    assert h[1] in (3, 5), f"version {h[1]}"
    maxT, V, L, NH, C, Vp = (int(x) for x in h[2:8])
    assert not h[8:].any(), "header words 8-255 must be zero"
    shapes = [("wte", (Vp, C)), ("wpe", (maxT, C)), ("ln1w", (L, C)), ("ln1b", (L, C)),
              ("qkvw", (L, 3 * C, C)), ("qkvb", (L, 3 * C)), ("attprojw", (L, C, C)), ("attprojb", (L, C)),
              ("ln2w", (L, C)), ("ln2b", (L, C)), ("fcw", (L, 4 * C, C)), ("fcb", (L, 4 * C)),
              ("fcprojw", (L, C, 4 * C)), ("fcprojb", (L, C)), ("lnfw", (C,)), ("lnfb", (C,))]
    size = 2 if h[1] == 5 else 4
    at, out = 1024, {}
    for name, shape in shapes:
        n = int(np.prod(shape))
        raw = np.frombuffer(blob[at:at + n * size], dtype=np.uint16 if size == 2 else np.float32)
        if size == 2:
            raw = (raw.astype(np.uint32) << 16).view(np.float32)
        out[name] = raw.reshape(shape)
        at += n * size
    assert at == len(blob), f"the tensors end at {at}, the file at {len(blob)}"
    return dict(version=int(h[1]), maxT=maxT, V=V, L=L, NH=NH, C=C, Vp=Vp), out


def check_llmc(path, ckpt):
    h, t = read_llmc(path)
    params, deck = ckpt_params(ckpt)
    C, L, V = h["C"], h["L"], h["V"]
    assert params["wte"].shape[1] == C and params["wpe"].shape == (h["maxT"], C), (h, params["wpe"].shape)
    assert h["Vp"] % 128 == 0 or h["Vp"] == params["wte"].shape[0], h
    conv = bf16_rounded if h["version"] == 5 else (lambda a: a)
    want = {"wte": np.concatenate([params["wte"][:V], np.zeros((h["Vp"] - V, C), np.float32)]),
            "wpe": params["wpe"], "lnfw": params["lnf.weight"], "lnfb": params["lnf.bias"]}
    per_layer = {"ln1w": ("ln1.weight", False), "ln1b": ("ln1.bias", False), "qkvw": ("attn.qkv.weight", True),
                 "qkvb": ("attn.qkv.bias", False), "attprojw": ("attn.proj.weight", True),
                 "attprojb": ("attn.proj.bias", False), "ln2w": ("ln2.weight", False), "ln2b": ("ln2.bias", False),
                 "fcw": ("mlp.fc.weight", True), "fcb": ("mlp.fc.bias", False),
                 "fcprojw": ("mlp.proj.weight", True), "fcprojb": ("mlp.proj.bias", False)}
    for name, (st, transposed) in per_layer.items():
        layers = []
        for l in range(L):
            a = params[f"blocks.{l}.{st}"]
            a = a.reshape(a.shape[0], -1).T if transposed else a.reshape(-1)  # llm.c: [out, in]
            layers.append(a)
        want[name] = np.stack(layers)
    for name, a in t.items():
        if not np.array_equal(a, conv(want[name].reshape(a.shape))):
            sys.exit(f"FAIL: llm.c tensor {name} differs from the checkpoint")
    print(f"{os.path.basename(path)}: llm.c header {h} per the spec; 16 tensors equal the checkpoint's "
          f"{'bf16-rounded ' if h['version'] == 5 else ''}parameters ([out, in], stacked, padding zero)")


def write_safetensors(path, tensors, dtypes=None, order=None, tamper=None):
    """tensors: {name: float32 array}; tamper(header) may edit the header dict."""
    names = order or list(tensors)
    header, at, arrays = {"__metadata__": {"format": "pt"}}, 0, []
    for name in names:
        a = np.ascontiguousarray(tensors[name], dtype=np.float32)
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [at, at + a.nbytes]}
        arrays.append(a)
        at += a.nbytes
    if tamper:
        tamper(header)
    text = json.dumps(header).encode()
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    with open(path, "wb") as f:  # each array's memory written as it is, not copied into one blob
        f.write(struct.pack("<Q", len(text)) + text)
        for a in arrays:
            f.write(memoryview(a).cast("B"))


def make_bad(out, hf_dir, llmc_file):
    os.makedirs(out, exist_ok=True)
    good = os.path.join(hf_dir, "model.safetensors")
    w, _, _ = read_safetensors(good)
    names = list(w)
    blob = open(good, "rb").read()
    open(os.path.join(out, "truncated.safetensors"), "wb").write(blob[:len(blob) - 1000])

    def overlap(h):
        h[names[1]]["data_offsets"] = [h[names[0]]["data_offsets"][0] + 4,
                                       h[names[0]]["data_offsets"][0] + 4 + (lambda e: e[1] - e[0])(h[names[1]]["data_offsets"])]
    write_safetensors(os.path.join(out, "overlap.safetensors"), w, tamper=overlap)

    def past_end(h):
        e = h[names[-1]]["data_offsets"]
        h[names[-1]]["data_offsets"] = [e[0] + 8, e[1] + 8]
    write_safetensors(os.path.join(out, "past-end.safetensors"), w, tamper=past_end)

    def int32(h):
        h[names[2]]["dtype"] = "I32"
    write_safetensors(os.path.join(out, "dtype.safetensors"), w, tamper=int32)
    missing = {k: v for k, v in w.items() if k != "transformer.h.0.mlp.c_fc.bias"}
    write_safetensors(os.path.join(out, "missing.safetensors"), missing)
    shaped = dict(w)
    k = "transformer.h.0.attn.c_attn.weight"
    shaped[k] = w[k].reshape(w[k].shape[1], w[k].shape[0])  # the same bytes, [3C, C]
    write_safetensors(os.path.join(out, "shape.safetensors"), shaped)
    lb = bytearray(open(llmc_file, "rb").read())
    bad_magic = bytearray(lb)
    bad_magic[0:4] = struct.pack("<i", 20240520)  # a token shard's magic
    open(os.path.join(out, "magic.bin"), "wb").write(bad_magic)
    bad_version = bytearray(lb)
    bad_version[4:8] = struct.pack("<i", 4)
    open(os.path.join(out, "version.bin"), "wb").write(bad_version)
    open(os.path.join(out, "truncated.bin"), "wb").write(bytes(lb[:len(lb) - 4]))
    print("bad files written to", out)


def synth_124m(out):
    rng = np.random.default_rng(124)
    L, C, V, T = 12, 768, 50257, 1024
    w = {"transformer.wte.weight": rng.normal(0, 0.02, (V, C)), "transformer.wpe.weight": rng.normal(0, 0.01, (T, C))}
    for l in range(L):
        p = f"transformer.h.{l}."
        w[p + "ln_1.weight"] = 1 + rng.normal(0, 0.05, C)
        w[p + "ln_1.bias"] = rng.normal(0, 0.01, C)
        w[p + "attn.c_attn.weight"] = rng.normal(0, 0.02, (C, 3 * C))
        w[p + "attn.c_attn.bias"] = rng.normal(0, 0.01, 3 * C)
        w[p + "attn.c_proj.weight"] = rng.normal(0, 0.02 / math.sqrt(2 * L), (C, C))
        w[p + "attn.c_proj.bias"] = rng.normal(0, 0.01, C)
        w[p + "ln_2.weight"] = 1 + rng.normal(0, 0.05, C)
        w[p + "ln_2.bias"] = rng.normal(0, 0.01, C)
        w[p + "mlp.c_fc.weight"] = rng.normal(0, 0.02, (C, 4 * C))
        w[p + "mlp.c_fc.bias"] = rng.normal(0, 0.01, 4 * C)
        w[p + "mlp.c_proj.weight"] = rng.normal(0, 0.02 / math.sqrt(2 * L), (4 * C, C))
        w[p + "mlp.c_proj.bias"] = rng.normal(0, 0.01, C)
    w["transformer.ln_f.weight"] = 1 + rng.normal(0, 0.05, C)
    w["transformer.ln_f.bias"] = rng.normal(0, 0.01, C)
    os.makedirs(out, exist_ok=True)
    # the hub's file names its tensors without "transformer.", and carries the attention's
    # mask buffers, which a reader leaves aside
    bare = {k[len("transformer."):]: v.astype(np.float32) for k, v in w.items()}
    for l in range(L):
        bare[f"h.{l}.attn.bias"] = np.tril(np.ones((1, 1, 8, 8), np.float32))
    write_safetensors(os.path.join(out, "model.safetensors"), bare)
    json.dump({"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "n_layer": L, "n_head": 12, "n_embd": C,
               "n_positions": T, "n_ctx": T, "vocab_size": V, "activation_function": "gelu_new",
               "layer_norm_epsilon": 1e-5}, open(os.path.join(out, "config.json"), "w"))
    # "one": a train split of exactly T + 1 tokens, whose only sequence starts at 0: a
    # run's first loss is then that of tokens [0, T) against [1, T], which loss_124m
    # computes independently
    for split, n in (("val", 8192), ("one", T + 1)):
        header = np.zeros(256, np.int32)
        header[:3] = (20240520, 1, n)
        ids = rng.integers(0, V, n, dtype=np.uint16)
        with open(os.path.join(out, f"synth_{split}.bin"), "wb") as f:
            f.write(header.tobytes() + ids.tobytes())
    print(f"GPT-2 124M-shaped model.safetensors ({sum(v.size for v in w.values()) / 1e6:.1f}M parameters) and token "
          f"shards written to {out}")


def loss_124m(folder, shard):
    """The float64 GPT-2 loss of the shard's first sequence (tokens [0, T), targets [1, T])
    from the folder's model.safetensors (names with or without "transformer.")."""
    cfg = json.load(open(os.path.join(folder, "config.json")))
    w, _, _ = read_safetensors(os.path.join(folder, "model.safetensors"))
    w = {k if k.startswith("transformer.") else "transformer." + k: v for k, v in w.items()}
    T = cfg["n_positions"]
    ids = np.fromfile(shard, np.uint16, offset=256 * 4).astype(np.int64)
    assert ids.size >= T + 1, (shard, ids.size)
    need_torch()
    tokens = torch.from_numpy(ids[:T]).view(1, T)
    targets = torch.from_numpy(ids[1:T + 1]).view(1, T)
    print(f"{gpt2_loss(w, cfg, tokens, targets):.10f}")


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "hf":
        check_hf(sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else None)
    elif mode == "llmc":
        check_llmc(sys.argv[2], sys.argv[3])
    elif mode == "bad":
        make_bad(sys.argv[2], sys.argv[3], sys.argv[4])
    elif mode == "synth-124m":
        synth_124m(sys.argv[2])
    elif mode == "loss-124m":
        loss_124m(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
