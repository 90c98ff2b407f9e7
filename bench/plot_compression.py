#!/usr/bin/python3
"""Loss against wall time for the runs bench/compression.sh kept (KEEP=DIR): one line per
metrics.csv (its training loss over the summed ms_per_step), validation losses as points.
Usage: bench/plot_compression.py DIR/*.csv -o out.png [--title T]"""
import argparse
import csv

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("metrics", nargs="+")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--title", default="")
    args = ap.parse_args()
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for path in args.metrics:
        with open(path) as f:
            rows = list(csv.DictReader(f))
        t, seconds, loss, val_t, val = 0.0, [], [], [], []
        for r in rows:
            t += float(r["ms_per_step"]) / 1e3
            seconds.append(t)
            loss.append(float(r["loss"]))
            if r["val_loss"]:
                val_t.append(t)
                val.append(float(r["val_loss"]))
        label = path.rsplit("/", 1)[-1].removesuffix(".csv")
        (line,) = ax.plot(seconds, loss, label=f"{label} (train)")
        if val:
            ax.plot(val_t, val, "o", color=line.get_color(), label=f"{label} (validation {val[-1]:.4f})")
    ax.set_xlabel("wall time of the steps (s)")
    ax.set_ylabel("loss")
    ax.set_title(args.title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.output, dpi=80)
    print(f"plot_compression: wrote {args.output}")


if __name__ == "__main__":
    main()
