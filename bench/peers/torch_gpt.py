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
    # GPT-2 124M at llm.c's CPU trainer's batch, its vocabulary padded as llm.c pads it
    "gpt2-llmc": dict(n_layer=12, n_embd=768, n_head=12, vocab_size=50304, seq_len=64, batch=4),
}


class MoE(nn.Module):
    """A mixture-of-experts MLP as strata's model.moe_* keys define it (docs/parallelism.md),
    written here from its definition: a bias-free router, softmax, the top k (k = 2:
    renormalised; k = 1: the probability), first choices before second ones and then token
    order against the capacity, and each expert a tanh-GELU MLP. The experts' weights are
    3D tensors in strata's layout ([E, C, F], [E, F], [E, F, C], [E, C]). After a forward,
    self.aux holds the layer's load-balancing loss alpha E sum_i f_i P_i and z-loss
    beta mean(logsumexp^2) over the tokens of that forward (one micro-batch)."""

    def __init__(self, c, experts, top_k, hidden, capacity, alpha, beta):
        super().__init__()
        self.e, self.k, self.capacity, self.alpha, self.beta = experts, top_k, capacity, alpha, beta
        self.router = nn.Linear(c, experts, bias=False)
        self.w1 = nn.Parameter(torch.empty(experts, c, hidden))
        self.b1 = nn.Parameter(torch.zeros(experts, hidden))
        self.w2 = nn.Parameter(torch.empty(experts, hidden, c))
        self.b2 = nn.Parameter(torch.zeros(experts, c))
        self.aux = torch.zeros(())

    def forward(self, x):
        b, t, c = x.shape
        xs = x.reshape(-1, c)
        n = xs.shape[0]
        logits = self.router(xs)
        probs = logits.softmax(-1)
        top_p, top_i = probs.topk(self.k, dim=-1)
        gates = top_p / top_p.sum(-1, keepdim=True) if self.k > 1 else top_p
        f = F.one_hot(top_i, self.e).sum((0, 1)).to(x.dtype) / (n * self.k)
        self.aux = self.alpha * self.e * (f * probs.mean(0)).sum() + self.beta * (logits.logsumexp(-1) ** 2).mean()
        keep = torch.ones_like(top_i, dtype=torch.bool)
        if self.capacity > 0:
            cap = math.ceil(self.capacity * n * self.k / self.e)
            taken = torch.zeros(self.e, dtype=torch.long)
            for j in range(self.k):
                onehot = F.one_hot(top_i[:, j], self.e)
                place = ((onehot.cumsum(0) - 1 + taken) * onehot).sum(-1)
                keep[:, j] = place < cap
                taken += onehot.sum(0)
        out = torch.zeros_like(xs)
        for i in range(self.e):
            for j in range(self.k):
                rows = ((top_i[:, j] == i) & keep[:, j]).nonzero().squeeze(-1)
                if rows.numel() == 0:
                    continue
                h = F.gelu(xs[rows] @ self.w1[i] + self.b1[i], approximate="tanh")
                out = out.index_add(0, rows, gates[rows, j:j + 1] * (h @ self.w2[i] + self.b2[i]))
        return out.view(b, t, c)


class Block(nn.Module):
    def __init__(self, c, h, moe=None):
        super().__init__()
        self.h = h
        self.ln1 = nn.LayerNorm(c)
        self.qkv = nn.Linear(c, 3 * c)
        self.proj = nn.Linear(c, c)
        self.ln2 = nn.LayerNorm(c)
        self.moe = MoE(c, **moe) if moe else None
        if not moe:
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
        if self.moe is not None:
            return x + self.moe(self.ln2(x))
        return x + self.fc_proj(self.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    """moe: None, or (every, dict of MoE's arguments): block l (from 0) is a mixture when
    (l + 1) % every == 0. After a forward, aux_loss() sums the mixtures' auxiliary losses."""

    def __init__(self, n_layer, n_embd, n_head, vocab_size, seq_len, moe=None, padded_vocab_size=0):
        super().__init__()
        # a padded vocabulary (model.padded_vocab_size): more embedding rows, whose logits
        # the loss leaves out (as strata and llm.c do)
        self.vocab_size = vocab_size
        self.wte = nn.Embedding(max(vocab_size, padded_vocab_size), n_embd)
        self.wpe = nn.Embedding(seq_len, n_embd)
        self.blocks = nn.ModuleList(
            Block(n_embd, n_head, moe[1] if moe and (l + 1) % moe[0] == 0 else None) for l in range(n_layer))
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
        logits = (self.lnf(x) @ self.wte.weight.t())[..., :self.vocab_size]  # LM head tied to the embedding
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))

    def aux_loss(self):
        return sum((blk.moe.aux for blk in self.blocks if blk.moe is not None), torch.zeros(()))


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
        mlp = (("mlp.fc", blk.fc), ("mlp.proj", blk.fc_proj)) if blk.moe is None else ()
        for sname, mod in (("attn.qkv", blk.qkv), ("attn.proj", blk.proj)) + mlp:
            out[p + sname + ".weight"] = (mod.weight, True)
            out[p + sname + ".bias"] = (mod.bias, False)
        if blk.moe is not None:
            m = blk.moe
            out[p + "moe.router.weight"] = (m.router.weight, True)
            for sname, t in (("moe.fc.weight", m.w1), ("moe.fc.bias", m.b1), ("moe.proj.weight", m.w2),
                             ("moe.proj.bias", m.b2)):
                out[p + sname] = (t, False)
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
