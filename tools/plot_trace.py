#!/usr/bin/python3
"""Draws a strata timeline (strata train ... --trace FILE, Chrome/Perfetto JSON) as a PNG
Gantt chart, one row per rank, and prints the measured pipeline bubble:
    bubble = 1 - (time in forward and backward passes) / (ranks x time in steps),
over all steps but the first (allocations). With equal stages and free communication it
would be (p-1)/(m+p-1) for GPipe and 1F1B; strata's timeline shows the real one.

    tools/plot_trace.py trace.json -o trace.png [--title TEXT] [--steps K]
"""
import argparse
import json
import sys

COLOURS = {"forward": "#4c72b0", "backward": "#55a868", "pipeline_wait": "#dd8452", "grad_allreduce": "#c44e52",
           "optimizer": "#8172b3", "validation": "#937860", "checkpoint": "#da8bc3", "data": "#8c8c8c",
           "weight_prediction": "#ccb974"}


IN_FLIGHT_ROW = 10000  # tids from here: a rank's transfers in flight (io/trace_file.hpp), not drawn


def load(path):
    with open(path) as f:
        doc = json.load(f)
    rows, events = {}, []
    for e in doc["traceEvents"]:
        if e.get("ph") == "M" and e.get("name") == "thread_name" and e["tid"] < IN_FLIGHT_ROW:
            rows[e["tid"]] = e["args"]["name"]
        elif e.get("ph") == "X":
            events.append(e)
    return rows, events


def measured_bubble(rows, events, skip_steps=1):
    busy = step_time = 0.0
    for tid in rows:
        steps = sorted((e for e in events if e["tid"] == tid and e["cat"] == "step"), key=lambda e: e["ts"])[skip_steps:]
        for s in steps:
            lo, hi = s["ts"], s["ts"] + s["dur"]
            step_time += s["dur"]
            busy += sum(e["dur"] for e in events if e["tid"] == tid and e["cat"] in ("forward", "backward")
                        and lo <= e["ts"] < hi)
    return 1.0 - busy / step_time if step_time > 0 else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--title", default="")
    ap.add_argument("--steps", type=int, default=0, help="draw only the first K steps (0 = all)")
    a = ap.parse_args()
    rows, events = load(a.trace)
    if not rows or not events:
        sys.exit(f"{a.trace}: no timeline events")
    bubble = measured_bubble(rows, events)
    print(f"{len(rows)} ranks, {sum(1 for e in events if e['cat'] == 'step') // len(rows)} steps; "
          f"measured bubble {bubble:.3f}")

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    end = None
    if a.steps > 0:
        first_row = min(rows)
        steps = sorted((e for e in events if e["tid"] == first_row and e["cat"] == "step"), key=lambda e: e["ts"])
        if len(steps) >= a.steps:
            end = steps[a.steps - 1]["ts"] + steps[a.steps - 1]["dur"]
    tids = sorted(rows)
    fig, ax = plt.subplots(figsize=(12, 0.6 * len(tids) + 1.5))
    for y, tid in enumerate(tids):
        for e in events:
            if e["tid"] != tid or e["cat"] not in COLOURS or (end is not None and e["ts"] > end):
                continue
            ax.broken_barh([(e["ts"] / 1e3, e["dur"] / 1e3)], (y - 0.4, 0.8), facecolors=COLOURS[e["cat"]])
            if e["cat"] in ("forward", "backward") and e["dur"] > 0:
                ax.text((e["ts"] + e["dur"] / 2) / 1e3, y, e["name"], ha="center", va="center", fontsize=7,
                        color="white")
    ax.set_yticks(range(len(tids)))
    ax.set_yticklabels([rows[t] for t in tids], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("ms")
    ax.set_title((a.title + "  " if a.title else "") + f"measured bubble {bubble:.3f}")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in COLOURS.values()]
    ax.legend(handles, list(COLOURS), loc="upper center", bbox_to_anchor=(0.5, -0.25), ncol=len(COLOURS), fontsize=8)
    fig.tight_layout()
    fig.savefig(a.output, dpi=110)


if __name__ == "__main__":
    main()
