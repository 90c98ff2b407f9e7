#!/usr/bin/python3
"""strata's GPT against PyTorch's own layers (bench/peers/torch_gpt.py), in float64:
the same initial weights (loaded by global name) and batches must give the same loss and
gradients, and the same parameters after several AdamW steps with warmup/cosine and
gradient clipping. Usage: check_against_torch.py DUMPER_EXECUTABLE"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "peers"))
from torch_gpt import GPT, decay_groups, strata_name_map, to_torch_layout  # noqa: E402

TOL = 1e-9


def main():
    dumper = sys.argv[1]
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([dumper, d], check=True)
        meta = json.load(open(os.path.join(d, "meta.json")))
        init = np.fromfile(os.path.join(d, "init.bin"), dtype=np.float64)
        grads0 = np.fromfile(os.path.join(d, "grads0.bin"), dtype=np.float64)
        final = np.fromfile(os.path.join(d, "final.bin"), dtype=np.float64)

    torch.set_default_dtype(torch.float64)
    model = GPT(meta["n_layer"], meta["n_embd"], meta["n_head"], meta["vocab_size"], meta["seq_len"])
    names = strata_name_map(model)
    assert len(names) == len(meta["params"]) == len(list(model.parameters())), "parameter sets differ"

    def strata_view(flat, p):
        n = int(np.prod(p["shape"]))
        return torch.from_numpy(flat[p["offset"]:p["offset"] + n].reshape(p["shape"]).copy())

    with torch.no_grad():
        for p in meta["params"]:
            tensor, transpose = names[p["name"]]
            v = strata_view(init, p)
            tensor.copy_(to_torch_layout(v, tensor, transpose))

    opt = torch.optim.AdamW(decay_groups(model, meta["weight_decay"]), lr=1.0,
                            betas=(meta["beta1"], meta["beta2"]), eps=meta["eps"])
    failures = []

    def compare(what, got, want):
        err = (got - want).abs().max().item() / max(1.0, want.abs().max().item())
        status = "ok" if err < TOL else "FAIL"
        print(f"{status}: {what}: max relative difference {err:.2e}")
        if err >= TOL:
            failures.append(what)

    b, t = meta["batch"], meta["seq_len"]
    for s, step in enumerate(meta["steps"]):
        tokens = torch.tensor(step["tokens"]).view(b, t)
        targets = torch.tensor(step["targets"]).view(b, t)
        opt.zero_grad()
        loss = model(tokens, targets)
        loss.backward()
        compare(f"step {s + 1} loss", torch.tensor(step["loss"]), loss.detach())
        if s == 0:
            for p in meta["params"]:
                tensor, transpose = names[p["name"]]
                g = strata_view(grads0, p)
                compare(f"gradient of {p['name']}", to_torch_layout(g, tensor, transpose), tensor.grad)
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), meta["grad_clip"])
        compare(f"step {s + 1} gradient norm", torch.tensor(step["grad_norm"]), norm)
        for group in opt.param_groups:
            group["lr"] = step["lr"]
        opt.step()

    for p in meta["params"]:
        tensor, transpose = names[p["name"]]
        v = strata_view(final, p)
        compare(f"after {len(meta['steps'])} AdamW steps: {p['name']}", to_torch_layout(v, tensor, transpose), tensor.detach())
    print(f"{len(failures)} failures" if failures else "strata matches PyTorch")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
