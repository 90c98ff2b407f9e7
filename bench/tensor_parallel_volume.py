#!/usr/bin/python3
"""Communication volume of 1D (Megatron) and 2D (Optimus) tensor parallelism, measured
by strata's Comm counters and set beside the papers' formulas (elements per layer,
forward + backward, per rank):
    V1D = 8 (p-1)/p * b s h            V2D = 3 (q-1)/q^2 * (7 b s h + 12 h^2)
Each layout runs inputs/bench-tp-volume.toml twice, with L and 2L layers; the difference
of the two runs' bytes per step, divided by L, is the measured volume of one transformer
layer, free of the embedding/LM-head/loss and scalar terms, which are reported apart.
Counted bytes are "wire" bytes: what the bandwidth-optimal algorithm of each collective
sends per rank (see src/comm/comm.hpp). Oversubscribed runs (more ranks than cores) give
true byte counts and memory, but their step times only show the oversubscription.

    bench/tensor_parallel_volume.py [--ranks 4 16] [--layers 2] [--strata PATH]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DECK = os.path.join(ROOT, "inputs", "bench-tp-volume.toml")


def run(strata, ranks, layout, layers):
    sets = {"model.n_layer": layers, **layout}
    cmd = ["mpiexec", "-n", str(ranks), strata, "train", DECK]
    for k, v in sets.items():
        cmd += ["--set", f"{k}={v}"]
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    with tempfile.TemporaryDirectory() as run_dir:  # the run directory strata writes
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1200, cwd=run_dir)
    if out.returncode != 0:
        sys.exit(f"strata failed ({' '.join(cmd)}):\n{out.stdout}\n{out.stderr}")
    text = out.stdout + out.stderr
    steps = int(re.search(r"done: (\d+) steps in ([0-9.]+) s", text).group(1))
    seconds = float(re.search(r"done: (\d+) steps in ([0-9.]+) s", text).group(2))
    wire = float(re.search(r"communication \(rank 0\): .* ([0-9.]+) MiB/step sent", text).group(1))
    mem = re.search(r"memory \(rank 0\): parameters ([0-9.]+) MiB .* activations ([0-9.]+) MiB", text)
    return {"wire_mib": wire, "param_mib": float(mem.group(1)), "act_mib": float(mem.group(2)),
            "ms_per_step": 1e3 * seconds / steps}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, nargs="+", default=[4, 16])
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--strata", default=os.path.join(ROOT, "build", "release", "bin", "strata"))
    a = ap.parse_args()
    deck = open(DECK).read()
    h = int(re.search(r"n_embd = (\d+)", deck).group(1))
    s = int(re.search(r"seq_len = (\d+)", deck).group(1))
    b = int(re.search(r"batch_size = (\d+)", deck).group(1))
    mib = 1 << 20
    vocab = re.search(r"vocab_size = (\d+)", deck).group(1)
    print(f"model: h={h}, s={s}, b={b}, vocab {vocab}; "
          f"per layer = ({a.layers}+{a.layers} layers) - ({a.layers} layers), divided by {a.layers}")
    print("| ranks | layout | measured per layer (MiB/step/rank) | formula per layer | measured/formula "
          f"| rest of the model (MiB) | params/rank (MiB) | activations/rank (MiB) | ms/step |")
    print("|---|---|---|---|---|---|---|---|---|")
    for p in a.ranks:
        q = int(round(p ** 0.5))
        layouts = [("1D t=%d" % p, {"parallel.tensor_cols": p},
                    8 * (p - 1) / p * b * s * h)]
        if q * q == p:
            layouts.append(("2D %dx%d" % (q, q),
                            {"parallel.tensor_mode": "2d", "parallel.tensor_rows": q, "parallel.tensor_cols": q},
                            3 * (q - 1) / q ** 2 * (7 * b * s * h + 12 * h * h)))
        for name, layout, formula_elems in layouts:
            small = run(a.strata, p, layout, a.layers)
            big = run(a.strata, p, layout, 2 * a.layers)
            per_layer = (big["wire_mib"] - small["wire_mib"]) / a.layers
            formula = formula_elems * 4 / mib
            rest = small["wire_mib"] - a.layers * per_layer
            print(f"| {p} | {name} | {per_layer:.3f} | {formula:.3f} | {per_layer / formula:.3f} | {rest:.3f} "
                  f"| {small['param_mib']:.2f} | {small['act_mib']:.2f} | {small['ms_per_step']:.0f} |", flush=True)


if __name__ == "__main__":
    main()
