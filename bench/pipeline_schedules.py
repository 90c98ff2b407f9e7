#!/usr/bin/python3
"""XPipe against the synchronous pipeline on the fortunes GPT: validation loss curves over
a few seeds, throughput, and XPipe's weight staleness with and without prediction.

Each (schedule, seed) trains inputs/gpt-fortunes-xpipe.toml on 2 ranks (2 stages, 4
micro-batches per step, 300 steps) with parallel.schedule set to "gpipe", "1f1b" or
"xpipe" (and "xpipe" without weight prediction); run.seed changes the initial weights
and the data order. GPipe and 1F1B compute the same numbers (the synchronous run), so
1F1B is run once per seed for its throughput only when --with-1f1b is given. XPipe runs
also measure staleness (parallel.measure_staleness: per pass, |W_used - W_target| /
|W_target|, where the target is the stage's weights when the first stage finishes the
pass's step); the measurement copies weights and slows the run, so XPipe's throughput
comes from a second run without it (same numbers otherwise).

    bench/pipeline_schedules.py [--seeds 1337 1 2] [--steps 300] [--plot curves.png]
"""
import argparse
import csv
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DECK = os.path.join(ROOT, "inputs", "gpt-fortunes-xpipe.toml")

CONFIGS = {
    "gpipe": {"parallel.schedule": '"gpipe"', "parallel.weight_prediction": "true"},
    "1f1b": {"parallel.schedule": '"1f1b"', "parallel.weight_prediction": "true"},
    "xpipe": {"parallel.schedule": '"xpipe"', "parallel.weight_prediction": "true"},
    "xpipe, no prediction": {"parallel.schedule": '"xpipe"', "parallel.weight_prediction": "false"},
}


def run(strata, config, seed, steps, staleness):
    sets = dict(CONFIGS[config])
    sets.update({"run.seed": seed, "run.steps": steps, "run.val_every": 25, "run.log_every": 25,
                 "run.checkpoint_every": 0, "run.name": '"bench"'})
    if config.startswith("xpipe"):
        sets["parallel.measure_staleness"] = "true" if staleness else "false"
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    with tempfile.TemporaryDirectory() as run_dir:
        cmd = ["mpiexec", "-n", "2", strata, "train", DECK, "--set", f'run.out_dir="{run_dir}"']
        for k, v in sets.items():
            cmd += ["--set", f"{k}={v}"]
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
        if out.returncode != 0:
            sys.exit(f"strata failed ({' '.join(cmd)}):\n{out.stdout}\n{out.stderr}")
        with open(os.path.join(run_dir, "bench", "metrics.csv")) as f:
            val = [(int(r["step"]), float(r["val_loss"])) for r in csv.DictReader(f) if r["val_loss"] not in ("", "nan")]
    text = out.stdout + out.stderr
    tok_s = float(re.search(r"done: \d+ steps in [0-9.]+ s, ([0-9.]+) tokens/s", text).group(1))
    # the weights the passes ran on: predicted ones, or the current ones without prediction
    stale = [float(m.group(1) or m.group(2))
             for m in re.finditer(r"xpipe staleness stage \d+: .*?: (?:predicted ([0-9.e+-]+)|current ([0-9.e+-]+))", text)]
    return val, tok_s, stale


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, nargs="+", default=[1337, 1, 2])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--strata", default=os.path.join(ROOT, "build", "release", "bin", "strata"))
    ap.add_argument("--plot", help="write the validation curves to this PNG")
    ap.add_argument("--with-1f1b", action="store_true", help="also time 1F1B (same numbers as GPipe)")
    args = ap.parse_args()
    configs = ["gpipe"] + (["1f1b"] if args.with_1f1b else []) + ["xpipe", "xpipe, no prediction"]
    curves = {}
    print(f"fortunes GPT, 2 stages x 4 micro-batches, {args.steps} steps, seeds {args.seeds}")
    print("| schedule | seed | val loss at steps 100 / 200 / final | tokens/s | staleness per stage (mean over passes with s > 0) |")
    print("|---|---|---|---|---|")
    for config in configs:
        for seed in args.seeds:
            xpipe = config.startswith("xpipe")
            val, tok_s, stale = run(args.strata, config, seed, args.steps, staleness=xpipe)
            if xpipe:  # the same run without the measurement, for its speed
                _, tok_s, _ = run(args.strata, config, seed, args.steps, staleness=False)
            curves[(config, seed)] = val
            at = dict(val)
            picks = " / ".join(f"{at[s]:.4f}" for s in (100, 200, args.steps) if s in at)
            st = ", ".join(f"{x:.2e}" for x in stale) if stale else "-"
            print(f"| {config} | {seed} | {picks} | {tok_s:.0f} | {st} |", flush=True)
    print("\nfinal validation loss, mean over seeds (min .. max):")
    for config in configs:
        finals = [curves[(config, s)][-1][1] for s in args.seeds]
        print(f"  {config:22s} {sum(finals) / len(finals):.4f} ({min(finals):.4f} .. {max(finals):.4f})")
    if args.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(7, 4.5))
        colors = {"gpipe": "tab:blue", "1f1b": "tab:cyan", "xpipe": "tab:red", "xpipe, no prediction": "tab:orange"}
        for (config, seed), val in curves.items():
            ax.plot([s for s, _ in val], [v for _, v in val], color=colors[config], alpha=0.8,
                    label=config if seed == args.seeds[0] else None)
        ax.set_xlabel("step")
        ax.set_ylabel("validation loss")
        ax.set_title("fortunes GPT, 2 stages: XPipe vs GPipe (one line per seed)")
        ax.legend()
        fig.tight_layout()
        fig.savefig(args.plot, dpi=110)
        print(f"wrote {args.plot}")


if __name__ == "__main__":
    main()
