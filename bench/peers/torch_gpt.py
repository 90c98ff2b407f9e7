#!/usr/bin/python3
"""An independent GPT in PyTorch (its own nn.Linear / nn.LayerNorm / nn.GELU layers, tied
LM head, torch.optim.AdamW), the same architecture strata trains. Two uses:

* the peer benchmark: `torch_gpt.py --config small --steps 20 [--precision bf16]` trains
  on random tokens and prints tokens/s and achieved FLOP/s, for bench/compare_torch.sh
  (bf16: the forward under torch.autocast("cpu", torch.bfloat16), fp32 weights and AdamW);
* the reference for tests/model/check_against_torch.py, which loads strata's weights
  into this model (load_strata_params) and compares losses, gradients and updates.
"""
import argparse
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

CONFIGS = {
    "tiny": dict(n_layer=4, n_embd=256, n_head=4, vocab_size=4096, seq_len=128, batch=8),
    "small": dict(n_layer=6, n_embd=384, n_head=6, vocab_size=8192, seq_len=256, batch=8),
}


class Block(nn.Module):
    def __init__(self, c, h):
        super().__init__()
        self.h = h
        self.ln1 = nn.LayerNorm(c)
        self.qkv = nn.Linear(c, 3 * c)
        self.proj = nn.Linear(c, c)
        self.ln2 = nn.LayerNorm(c)
        self.fc = nn.Linear(c, 4 * c)
        self.gelu = nn.GELU(approximate="tanh")
        self.fc_proj = nn.Linear(4 * c, c)

    def attention(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.h, c // self.h).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.h)
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        return self.proj((att @ v).transpose(1, 2).reshape(b, t, c))

    def forward(self, x):
        x = x + self.attention(self.ln1(x))
        return x + self.fc_proj(self.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, n_layer, n_embd, n_head, vocab_size, seq_len):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(seq_len, n_embd)
        self.blocks = nn.ModuleList(Block(n_embd, n_head) for _ in range(n_layer))
        self.lnf = nn.LayerNorm(n_embd)
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * n_layer) if name.endswith("proj.weight") else 0.02
                nn.init.normal_(p, 0.0, std)

    def forward(self, idx, targets):
        b, t = idx.shape
        x = self.wte(idx) + self.wpe(torch.arange(t, device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        logits = self.lnf(x) @ self.wte.weight.t()  # LM head tied to the embedding
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))


def strata_name_map(model):
    """strata global parameter name -> (torch parameter, transpose?). strata stores linear
    weights [in, out]; nn.Linear stores [out, in]."""
    out = {"wte": (model.wte.weight, False), "wpe": (model.wpe.weight, False),
           "lnf.weight": (model.lnf.weight, False), "lnf.bias": (model.lnf.bias, False)}
    for l, blk in enumerate(model.blocks):
        p = f"blocks.{l}."
        for sname, mod in (("ln1", blk.ln1), ("ln2", blk.ln2)):
            out[p + sname + ".weight"] = (mod.weight, False)
            out[p + sname + ".bias"] = (mod.bias, False)
        for sname, mod in (("attn.qkv", blk.qkv), ("attn.proj", blk.proj), ("mlp.fc", blk.fc),
                           ("mlp.proj", blk.fc_proj)):
            out[p + sname + ".weight"] = (mod.weight, True)
            out[p + sname + ".bias"] = (mod.bias, False)
    return out


def to_torch_layout(v, tensor, transpose):
    """A strata tensor as torch's parameter `tensor` holds it. strata keeps the qkv weight
    as [C, 3, C] and its bias as [3, C] (the q | k | v blocks, so a tensor-parallel rank's
    columns form one hyperslab); in memory these are torch's [C, 3C] and [3C]."""
    if transpose:
        return v.reshape(v.shape[0], -1).t()
    return v.reshape(tensor.shape)


def decay_groups(model, weight_decay):
    """Weight decay on 2D weights only, as strata does."""
    decay = [p for p in model.parameters() if p.dim() == 2]
    other = [p for p in model.parameters() if p.dim() != 2]
    return [{"params": decay, "weight_decay": weight_decay}, {"params": other, "weight_decay": 0.0}]


def flops_per_token(model, cfg):
    n = sum(p.numel() for p in model.parameters()) - model.wpe.weight.numel()
    return 6 * n + 12 * cfg["n_layer"] * cfg["seq_len"] * cfg["n_embd"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", choices=CONFIGS, default="tiny")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                    help="bf16: autocast's bf16 products (oneDNN), fp32 masters")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    cfg = CONFIGS[args.config]
    model = GPT(cfg["n_layer"], cfg["n_embd"], cfg["n_head"], cfg["vocab_size"], cfg["seq_len"])
    opt = torch.optim.AdamW(decay_groups(model, 0.1), lr=3e-4, betas=(0.9, 0.95), eps=1e-8)
    b, t = cfg["batch"], cfg["seq_len"]
    g = torch.Generator().manual_seed(1)

    def step():
        data = torch.randint(cfg["vocab_size"], (b, t + 1), generator=g)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.precision == "bf16"):
            loss = model(data[:, :-1], data[:, 1:])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss.item()

    for _ in range(args.warmup):
        step()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        loss = step()
    dt = (time.perf_counter() - t0) / args.steps
    tok_s = b * t / dt
    gflops = flops_per_token(model, cfg) * tok_s / 1e9
    print(f"torch {args.config} {args.precision}: {dt * 1e3:.1f} ms/step {tok_s:.0f} tok/s {gflops:.1f} GFLOP/s "
          f"threads={torch.get_num_threads()} loss={loss:.4f} torch={torch.__version__}")


if __name__ == "__main__":
    sys.exit(main())
