#!/usr/bin/python3
"""strata's fused causal attention (kernels/attention.hpp) against PyTorch's written-out
attention (Q K^T / sqrt(hs), causal mask, softmax, P V, as bench/peers/torch_gpt.py runs
it), forward (out, logsumexp) and backward (dQ, dK, dV) by autograd:
  strata fp64 against torch float64 to 1e-10, strata fp32 against torch float64 to 1e-5,
  strata bf16 against torch's bf16 autocast (products in bf16, softmax in fp32) within
  the tolerance of the other bf16 tests (2e-2 forward, 3e-2 backward; tests/kernels/
  test_matmul_bf16.cpp), where this CPU runs bf16 products.
T in {1, 7, 64, 129, 1000, 2048} (none a multiple of the blocks but 64 and 2048), H in
{1, 3, 8}, head sizes 16 to 128. Errors are max |a - b| / max(1, max |b|), as in the C++
tests. Usage: check_attention_torch.py ATTENTION_IO_EXECUTABLE [PRECISIONS] (a comma list,
default fp64,fp32; CTest runs bf16 as a test of its own, which exits 77, skipped, where
bf16 products cannot run)."""
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

CASES = [  # (B, T, H, hs)
    (2, 1, 1, 16),
    (2, 7, 3, 16),
    (1, 64, 8, 32),
    (2, 129, 3, 64),
    (1, 1000, 3, 128),
    (1, 1000, 1, 16),
    (1, 2048, 2, 64),
]
TOL = {"fp64": (1e-10, 1e-10), "fp32": (1e-5, 1e-5), "bf16": (2e-2, 3e-2)}


def torch_attention(qkv, dout, b, t, h, hs, bf16):
    """out (B*T, C), lse (B*H, T), dqkv (B*T, 3C) from PyTorch's autograd."""
    c = h * hs
    x = qkv.clone().requires_grad_(True)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        q, k, v = (z.reshape(b, t, h, hs).transpose(1, 2) for z in x.reshape(b, t, 3 * c).split(c, dim=2))
        s = (q @ k.transpose(-2, -1)).float() / math.sqrt(hs) if bf16 else (q @ k.transpose(-2, -1)) / math.sqrt(hs)
        mask = torch.ones(t, t, dtype=torch.bool).tril()
        s = s.masked_fill(~mask, float("-inf"))
        lse = torch.logsumexp(s, dim=-1)
        p = s.softmax(dim=-1)
        y = (p @ v).transpose(1, 2).reshape(b * t, c)
    y.backward(dout.to(y.dtype))
    return y.detach().double(), lse.detach().double().reshape(b * h, t), x.grad.double()


def rel(a, b):
    return float((a - b).abs().max() / max(1.0, float(b.abs().max())))


def main():
    exe = sys.argv[1]
    precisions = sys.argv[2].split(",") if len(sys.argv) > 2 else ["fp64", "fp32"]
    failures = ran = 0
    gen = torch.Generator().manual_seed(7)
    with tempfile.TemporaryDirectory() as d:
        for b, t, h, hs in CASES:
            c = h * hs
            qkv = torch.randn(b * t, 3 * c, generator=gen, dtype=torch.float64)
            dout = torch.randn(b * t, c, generator=gen, dtype=torch.float64)
            qkv.numpy().tofile(os.path.join(d, "qkv.bin"))
            dout.numpy().tofile(os.path.join(d, "dout.bin"))
            exact = torch_attention(qkv, dout, b, t, h, hs, bf16=False)
            for precision in precisions:
                r = subprocess.run([exe, d, str(b), str(t), str(h), str(hs), precision], capture_output=True, text=True)
                if r.returncode == 77:
                    print(f"  skipped {precision}: {r.stdout.strip()}")
                    continue
                ran += 1
                if r.returncode != 0:
                    print(f"attention_io failed ({r.returncode}): {r.stderr.strip()}")
                    return 1
                ours = [torch.from_numpy(np.fromfile(os.path.join(d, f + ".bin"), dtype=np.float64))
                        for f in ("out", "lse", "dqkv")]
                ref = torch_attention(qkv.float(), dout.float(), b, t, h, hs, bf16=True) if precision == "bf16" else exact
                err = [rel(o, w.reshape(-1)) for o, w in zip(ours, ref)]
                fwd_tol, bwd_tol = TOL[precision]
                ok = err[0] < fwd_tol and err[1] < fwd_tol and err[2] < bwd_tol
                if precision == "bf16":  # the products did round: bf16 is not fp32
                    ok = ok and rel(ours[0], exact[0].reshape(-1)) > 1e-5
                failures += not ok
                print(f"{'ok  ' if ok else 'FAIL'} B={b} T={t} H={h} hs={hs} {precision}: "
                      f"out {err[0]:.2e}, lse {err[1]:.2e}, dqkv {err[2]:.2e}")
    if ran == 0:
        print("nothing ran: every case was skipped")
        return 77  # CTest's SKIP_RETURN_CODE
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
