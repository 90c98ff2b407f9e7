#!/usr/bin/python3
"""Interleaved 1F1B and the zero-bubble schedules against 1F1B on the fortunes pipeline deck: measured bubble
(from each run's trace, as tools/plot_trace.py measures it) against the schedule's
simulated one (strata plan --schedule: unit cost per forward, 1 per backward half),
throughput, micro-batches in flight per stage and the activation memory of rank 0; the
median of --repeats runs (this VM's speed moves by 10% between runs).

Each (schedule, m) trains inputs/gpt-fortunes-pipeline.toml on `--ranks` ranks (all
pipeline stages) for `--steps` steps with parallel.micro_batches = m.

    bench/zero_bubble.py [--ranks 2] [--micro-batches 2 4 8] [--steps 40] [--schedules 1f1b interleaved:2 zb-h1 zb-h2]
                         [--repeats 3] [--set model.n_layer=8 ...]
"""
import argparse
import importlib.util
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DECK = os.path.join(ROOT, "inputs", "gpt-fortunes-pipeline.toml")
spec = importlib.util.spec_from_file_location("plot_trace", os.path.join(ROOT, "tools", "plot_trace.py"))
plot_trace = importlib.util.module_from_spec(spec)
spec.loader.exec_module(plot_trace)


def strata_cmd(strata, ranks, command, sets):
    cmd = (["mpiexec", "-n", str(ranks)] if ranks > 1 else []) + [strata, command, DECK]
    for k, v in sets.items():
        cmd += ["--set", f"{k}={v}"]
    return cmd


def run(cmd, env):
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        sys.exit(f"failed ({' '.join(cmd)}):\n{out.stdout}\n{out.stderr}")
    return out.stdout + out.stderr


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--micro-batches", type=int, nargs="+", default=[2, 4, 8])
    ap.add_argument("--schedules", nargs="+", default=["1f1b", "interleaved:2", "zb-h1", "zb-h2"],
                    help='schedule names; "interleaved:V" for V chunks per stage')
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--repeats", type=int, default=3, help="runs per row: the median tokens/s and bubble")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="another deck override")
    ap.add_argument("--strata", default=os.path.join(ROOT, "build", "release", "bin", "strata"))
    args = ap.parse_args()
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    print(f"fortunes GPT pipeline deck, {args.ranks} stages, {args.steps} steps")
    print("| schedule | m | simulated bubble | measured bubble | in flight per stage | activations rank 0 (MiB) | tokens/s |")
    print("|---|---|---|---|---|---|---|")
    for m in args.micro_batches:
        for schedule in args.schedules:
            name, _, v = schedule.partition(":")  # "interleaved:2": 2 chunks per stage
            sets = {"parallel.pipeline": args.ranks, "parallel.micro_batches": m, "parallel.schedule": f'"{name}"'}
            if v:
                sets["parallel.virtual_stages"] = v
            sets.update(kv.split("=", 1) for kv in args.set)
            plan = run(strata_cmd(args.strata, 1, "plan", sets) + ["--schedule"], env)
            simulated = float(re.search(r"makespan [0-9.]+, bubble ([0-9.]+)", plan).group(1))
            in_flight = re.search(r"micro-batches in flight per stage: ([0-9 ]+)", plan).group(1).strip()
            bubbles, speeds = [], []
            for _ in range(args.repeats):
                with tempfile.TemporaryDirectory() as run_dir:
                    trace = os.path.join(run_dir, "trace.json")
                    sets.update({"run.steps": args.steps, "run.checkpoint_every": 0, "run.val_every": 0,
                                 "run.out_dir": f'"{run_dir}"', "run.name": '"bench"'})
                    text = run(strata_cmd(args.strata, args.ranks, "train", sets) + ["--trace", trace, "--fresh"], env)
                    rows, events = plot_trace.load(trace)
                    bubbles.append(plot_trace.measured_bubble(rows, events))
                speeds.append(float(re.search(r"done: \d+ steps in [0-9.]+ s, ([0-9.]+) tokens/s", text).group(1)))
            bubble, tok_s = statistics.median(bubbles), statistics.median(speeds)
            act = float(re.search(r"activations ([0-9.]+) MiB", text).group(1))
            print(f"| {schedule} | {m} | {simulated:.3f} | {bubble:.3f} | {in_flight} | {act:.1f} | {tok_s:.0f} |",
                  flush=True)


if __name__ == "__main__":
    main()
