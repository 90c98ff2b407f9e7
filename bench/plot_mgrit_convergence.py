#!/usr/bin/python3
"""Loss against step for bench/mgrit_gpt_convergence.sh's runs: the training loss of the
logged steps (lines) and the validation loss (dots), the byte-level runs on the left, the
BPE runs on the right; a dotted line where a gradient control acted.
Usage: /usr/bin/python3 bench/plot_mgrit_convergence.py [OUT (runs/mgrit-convergence)] [PNG (docs/gpt-mgrit-convergence.png)]"""
import csv
import io
import os
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from PIL import Image

out = sys.argv[1] if len(sys.argv) > 1 else "runs/mgrit-convergence"
png = sys.argv[2] if len(sys.argv) > 2 else "docs/gpt-mgrit-convergence.png"
labels = {"serial": "serial (exact)", "L2P2": "MGRIT 2 levels, 2 ranks", "L3P2": "MGRIT 3 levels, 2 ranks",
          "L2P4": "MGRIT 2 levels, 4 ranks", "switch": "MGRIT + switch (0.25)", "switch02": "MGRIT + switch (0.2)",
          "tighten": "MGRIT + tighten (0.25)"}


def curve(run, column):
    steps, losses = [], []
    with open(os.path.join(out, run, "metrics.csv")) as f:
        for row in csv.DictReader(f):
            if row.get(column):
                steps.append(int(row["step"]))
                losses.append(float(row[column]))
    return steps, losses


def acted_at(run):
    with open(os.path.join(out, run + ".log")) as f:
        for line in f:
            m = re.match(r"step +(\d+)/\d+ .*gradient control", line)
            if m:
                return int(m.group(1))
    return None


fig, axes = plt.subplots(2, 2, figsize=(11, 7.5), sharex=True, gridspec_kw={"height_ratios": [3, 2]})
for col, (data, title) in enumerate(zip(["bytes", "bpe"], ["byte-level", "BPE (4096 pieces)"])):
    ax, diff = axes[0][col], axes[1][col]
    serial = dict(zip(*curve(f"{data}-serial", "loss")))
    for key, label in labels.items():
        run = f"{data}-{key}"
        if not os.path.exists(os.path.join(out, run, "metrics.csv")):
            continue
        steps, losses = curve(run, "loss")
        line, = ax.plot(steps, losses, label=label, linewidth=2.2 if key == "serial" else 1.0, alpha=0.8)
        vsteps, vlosses = curve(run, "val_loss")
        ax.plot(vsteps, vlosses, "o", color=line.get_color(), markersize=5 if key == "serial" else 3.5)
        # the same batches at every step: each run's training loss against the serial run's
        pairs = [(s_, 100 * (l - serial[s_]) / serial[s_]) for s_, l in zip(steps, losses) if s_ in serial]
        diff.plot([p[0] for p in pairs], [p[1] for p in pairs], color=line.get_color(), linewidth=1.0)
        at = acted_at(run)
        if at is not None:
            for a in (ax, diff):
                a.axvline(at, color=line.get_color(), linestyle=":", linewidth=1)
    ax.set_title(f"32-block GPT, width 128, {title}")
    ax.set_ylabel("loss (nats/token): training, validation (dots)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    diff.set_xlabel("step")
    diff.set_ylabel("training loss vs serial (%)")
    diff.grid(alpha=0.3)
fig.tight_layout()
# a 256-colour palette: a line plot loses nothing, and the file kept in docs/ is a third
# of the full-colour one
buf = io.BytesIO()
fig.savefig(buf, dpi=100)
Image.open(buf).convert("RGB").quantize(colors=256, method=Image.Quantize.FASTOCTREE).save(png, optimize=True)
print("wrote", png)
