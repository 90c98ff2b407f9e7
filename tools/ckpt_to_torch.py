#!/usr/bin/python3
"""Load a strata checkpoint with h5py into an independent PyTorch GPT (PyTorch's own
nn.Linear / nn.LayerNorm / nn.GELU layers, bench/peers/torch_gpt.py) and reproduce
strata's validation loss on the same validation batches (mixture-of-experts layers
included: bench/peers/torch_gpt.py's MoE, its experts' [E, ...] tensors read as they are) (tools/strata_data.py rebuilds
them for every data kind: byte-level text, token shards, random tokens; relative paths in
the checkpoint's deck are read from the current directory, as strata read them).

  tools/ckpt_to_torch.py CKPT.h5                   # print both validation losses
  tools/ckpt_to_torch.py CKPT.h5 --grads G.h5      # also compare gradients strata wrote
                                                   # (tests/tools/ckpt_batch_grads)
  tools/ckpt_to_torch.py CKPT.h5 --check           # exit 1 unless they agree
  tools/ckpt_to_torch.py CKPT.h5 --grads G.h5 --bf16   # G.h5 from strata's bf16 products

Agreement: strata computes in float32, the reference in float64. Tolerances: validation
loss 1e-5 relative; gradients max |difference| <= 1e-4 x max |gradient| per tensor.

--bf16: the gradients strata wrote with bf16 products (ckpt_batch_grads ... bf16) against
the float64 reference and against PyTorch's bf16 autocast of the same weights (float32
model, torch.autocast("cpu", torch.bfloat16)); both errors are printed per tensor. The
check: strata's bf16 gradients within BF16_GRAD_RTOL of the float64 ones, and no further
from them than PyTorch's autocast gradients are (times BF16_VS_TORCH).
"""
import argparse
import copy
import os
import sys
import tomllib

import h5py
import numpy as np
import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "bench", "peers"))
sys.path.insert(0, here)
from strata_data import VALIDATION, batch, make_source  # noqa: E402
from torch_gpt import GPT, strata_name_map, to_torch_layout  # noqa: E402

LOSS_RTOL = 1e-5
GRAD_RTOL = 1e-4
BF16_GRAD_RTOL = 5e-2
BF16_VS_TORCH = 1.5


def attr_str(f, name):
    v = f.attrs[name]
    return v.decode() if isinstance(v, bytes) else str(v)


def load(path):
    with h5py.File(path, "r") as f:
        deck = tomllib.loads(attr_str(f, "deck"))
        m = deck["model"]
        moe = None
        if m.get("moe_experts", 0) > 0:  # mixtures of experts (the optim section holds their losses' weights)
            o = deck.get("optim", {})
            moe = (m["moe_every"], dict(experts=m["moe_experts"], top_k=m["moe_top_k"],
                                        hidden=m["moe_ffn_hidden"] or 4 * m["n_embd"],
                                        capacity=m["moe_capacity_factor"], alpha=o.get("moe_aux_loss", 0.0),
                                        beta=o.get("moe_z_loss", 0.0)))
        model = GPT(m["n_layer"], m["n_embd"], m["n_head"], m["vocab_size"], m["seq_len"], moe,
                    m.get("padded_vocab_size", 0)).double()
        names = strata_name_map(model)
        with torch.no_grad():
            for name, (tensor, transpose) in names.items():
                v = torch.from_numpy(f["/params/" + name][...].astype(np.float64))
                tensor.copy_(to_torch_layout(v, tensor, transpose))
        return model, deck, float(f.attrs["val_loss"]), int(f.attrs["step"])


def validation_loss(model, deck):
    source = make_source(deck)
    b, t = deck["data"]["batch_size"], deck["model"]["seq_len"]
    losses = []
    with torch.no_grad():
        for j in range(deck["run"]["val_batches"]):
            x, y = batch(source, VALIDATION, j, b, t)
            losses.append(model(torch.from_numpy(x), torch.from_numpy(y)).item())
    return sum(losses) / len(losses)


def compare_grads(model, deck, grads_path):
    """Gradients of validation batch 0's mean loss, against those strata wrote."""
    source = make_source(deck)
    x, y = batch(source, VALIDATION, 0, deck["data"]["batch_size"], deck["model"]["seq_len"])
    model.zero_grad()
    loss = model(torch.from_numpy(x), torch.from_numpy(y))
    (loss + model.aux_loss()).backward()  # mixtures: their auxiliary losses enter the gradients
    worst, failures = 0.0, []
    with h5py.File(grads_path, "r") as g:
        strata_loss = float(g.attrs["loss"])
        for name, (tensor, transpose) in strata_name_map(model).items():
            s = torch.from_numpy(g["/grads/" + name][...].astype(np.float64))
            s = to_torch_layout(s, tensor, transpose)
            rel = (s - tensor.grad).abs().max().item() / max(tensor.grad.abs().max().item(), 1e-30)
            worst = max(worst, rel)
            if rel > GRAD_RTOL:
                failures.append(f"{name}: {rel:.2e}")
    loss_rel = abs(strata_loss - loss.item()) / abs(loss.item())
    print(f"batch loss: strata {strata_loss:.7f}  torch {loss.item():.7f}  (relative {loss_rel:.1e})")
    print(f"gradients: {len(strata_name_map(model))} tensors, worst relative difference {worst:.1e} (tol {GRAD_RTOL:g})")
    for f in failures:
        print("  FAIL", f)
    return not failures and loss_rel <= LOSS_RTOL


def batch_grads(model, deck, autocast=False):
    """Loss and gradients of validation batch 0's mean loss, by strata's global names."""
    source = make_source(deck)
    x, y = batch(source, VALIDATION, 0, deck["data"]["batch_size"], deck["model"]["seq_len"])
    model.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        loss = model(torch.from_numpy(x), torch.from_numpy(y))
    (loss + model.aux_loss()).backward()
    return loss.item(), {name: (t.grad.double(), t, tr) for name, (t, tr) in strata_name_map(model).items()}


def rel_error(got, want):
    return (got - want).abs().max().item() / max(want.abs().max().item(), 1e-30)


def compare_bf16_grads(model, deck, grads_path):
    """strata's bf16 gradients against float64 and against PyTorch's bf16 autocast."""
    exact_loss, exact = batch_grads(model, deck)
    autocast_model = copy.deepcopy(model).float()
    torch_loss, autocast = batch_grads(autocast_model, deck, autocast=True)
    worst_strata, worst_torch, worst_between, failures = 0.0, 0.0, 0.0, []
    with h5py.File(grads_path, "r") as g:
        strata_loss = float(g.attrs["loss"])
        for name, (want, tensor, transpose) in exact.items():
            s = to_torch_layout(torch.from_numpy(g["/grads/" + name][...].astype(np.float64)), tensor, transpose)
            e_strata, e_torch = rel_error(s, want), rel_error(autocast[name][0], want)
            worst_strata, worst_torch = max(worst_strata, e_strata), max(worst_torch, e_torch)
            worst_between = max(worst_between, rel_error(s, autocast[name][0]))
            print(f"  {name:28s} strata bf16 {e_strata:.2e}  torch autocast {e_torch:.2e}")
            if e_strata > BF16_GRAD_RTOL:
                failures.append(f"{name}: strata bf16 {e_strata:.2e} from float64 (tol {BF16_GRAD_RTOL:g})")
    print(f"batch loss: float64 {exact_loss:.7f}  strata bf16 {strata_loss:.7f}  torch autocast {torch_loss:.7f}")
    print(f"gradients against float64, worst relative difference: strata bf16 {worst_strata:.2e}, "
          f"torch autocast {worst_torch:.2e}; strata bf16 against torch autocast {worst_between:.2e}")
    if worst_strata > BF16_VS_TORCH * worst_torch:
        failures.append(f"strata bf16 ({worst_strata:.2e}) further from float64 than {BF16_VS_TORCH:g} x torch "
                        f"autocast ({worst_torch:.2e})")
    for f in failures:
        print("  FAIL", f)
    return not failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("checkpoint")
    ap.add_argument("--grads", help="HDF5 file of strata's gradients of validation batch 0")
    ap.add_argument("--check", action="store_true", help="exit 1 unless strata and PyTorch agree")
    ap.add_argument("--bf16", action="store_true",
                    help="--grads holds bf16-product gradients: compare with float64 and with autocast")
    args = ap.parse_args()
    torch.set_num_threads(1)
    model, deck, strata_val, step = load(args.checkpoint)
    torch_val = validation_loss(model, deck)
    rel = abs(torch_val - strata_val) / abs(strata_val)
    print(f"step {step}: validation loss strata {strata_val:.7f}  torch {torch_val:.7f}  (relative {rel:.1e}, tol {LOSS_RTOL:g})")
    ok = rel <= LOSS_RTOL
    if args.grads:
        compare = compare_bf16_grads if args.bf16 else compare_grads
        ok = compare(model, deck, args.grads) and ok
    print("agree" if ok else "DISAGREE")
    return 0 if ok or not args.check else 1


if __name__ == "__main__":
    sys.exit(main())
