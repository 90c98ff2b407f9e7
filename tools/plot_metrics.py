#!/usr/bin/python3
"""Plot a strata run's metrics.csv: training and validation loss against step, and
throughput (tokens/s) against step, into one PNG.

  tools/plot_metrics.py runs/gpt-fortunes/metrics.csv [-o loss.png] [--title TEXT]
"""
import argparse
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def column(rows, name):
    return [(int(r["step"]), float(r[name])) for r in rows if r.get(name) not in (None, "")]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("metrics")
    ap.add_argument("-o", "--output", default=None, help="PNG path (default: next to metrics.csv)")
    ap.add_argument("--title", default=None)
    args = ap.parse_args()
    with open(args.metrics) as f:
        rows = list(csv.DictReader(f))
    if not rows:
        print(f"plot_metrics: {args.metrics} has no rows", file=sys.stderr)
        return 2
    out = args.output or args.metrics.rsplit(".", 1)[0] + ".png"
    fig, (ax_loss, ax_tok) = plt.subplots(1, 2, figsize=(11, 4))
    train, val = column(rows, "loss"), column(rows, "val_loss")
    ax_loss.plot(*zip(*train), label="training loss")
    if val:
        ax_loss.plot(*zip(*val), "o-", label="validation loss")
    ax_loss.set_xlabel("step")
    ax_loss.set_ylabel("cross-entropy (nats/token)")
    ax_loss.legend()
    ax_loss.grid(alpha=0.3)
    tok = column(rows, "tokens_per_s")
    ax_tok.plot(*zip(*tok), color="tab:green")
    ax_tok.set_xlabel("step")
    ax_tok.set_ylabel("tokens/s")
    ax_tok.set_ylim(bottom=0)
    ax_tok.grid(alpha=0.3)
    fig.suptitle(args.title or args.metrics)
    fig.tight_layout()
    fig.savefig(out, dpi=80)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
