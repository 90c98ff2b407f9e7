#!/usr/bin/python3
"""Validation loss against step for bench/mgrit_gpt_convergence.sh's runs: the byte-level
runs on the left, the BPE runs on the right; a marker where a gradient control acted.
Usage: /usr/bin/python3 bench/plot_mgrit_convergence.py [OUT (runs/mgrit-convergence)] [PNG (docs/gpt-mgrit-convergence.png)]"""
import csv
import os
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

out = sys.argv[1] if len(sys.argv) > 1 else "runs/mgrit-convergence"
png = sys.argv[2] if len(sys.argv) > 2 else "docs/gpt-mgrit-convergence.png"
labels = {"serial": "serial (exact)", "L2P2": "MGRIT 2 levels, 2 ranks", "L3P2": "MGRIT 3 levels, 2 ranks",
          "L2P4": "MGRIT 2 levels, 4 ranks", "switch": "MGRIT + switch", "tighten": "MGRIT + tighten"}


def val_curve(run):
    steps, losses = [], []
    with open(os.path.join(out, run, "metrics.csv")) as f:
        for row in csv.DictReader(f):
            if row.get("val_loss"):
                steps.append(int(row["step"]))
                losses.append(float(row["val_loss"]))
    return steps, losses


def acted_at(run):
    with open(os.path.join(out, run + ".log")) as f:
        for line in f:
            m = re.match(r"step +(\d+)/\d+ .*gradient control", line)
            if m:
                return int(m.group(1))
    return None


fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
for ax, data, title in zip(axes, ["bytes", "bpe"], ["byte-level", "BPE (4096 pieces)"]):
    for key, label in labels.items():
        run = f"{data}-{key}"
        if not os.path.exists(os.path.join(out, run, "metrics.csv")):
            continue
        steps, losses = val_curve(run)
        line, = ax.plot(steps, losses, marker=".", label=label, linewidth=2.2 if key == "serial" else 1.2)
        at = acted_at(run)
        if at is not None:
            ax.axvline(at, color=line.get_color(), linestyle=":", linewidth=1)
    ax.set_title(f"32-block GPT, width 128, {title}")
    ax.set_xlabel("step")
    ax.set_ylabel("validation loss (nats per token)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
fig.tight_layout()
fig.savefig(png, dpi=110)
print("wrote", png)
