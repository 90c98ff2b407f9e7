#!/usr/bin/env bash
# Compares the loss columns of two metrics.csv files step by step:
#   compare-losses.sh REFERENCE.csv OTHER.csv FIRST_STEP_RTOL ALL_STEPS_RTOL
# The first logged step (same weights, same batch: only summation order differs) must
# agree within FIRST_STEP_RTOL, every step within ALL_STEPS_RTOL. Prints one line per
# file pair and exits non-zero on a mismatch or on different step lists.
set -euo pipefail
ref=$1 other=$2 first_tol=$3 all_tol=$4
awk -F, -v ft="$first_tol" -v at="$all_tol" -v ref="$ref" -v other="$other" '
  FNR == 1 { for (i = 1; i <= NF; i++) if ($i == "loss") col[FILENAME] = i; next }
  FILENAME == ref { want[$1] = $col[ref]; order[++n] = $1; next }
  { got[$1] = $col[other] }
  END {
    if (n == 0) { print "compare-losses: no steps in " ref; exit 1 }
    worst = 0; bad = 0
    for (k = 1; k <= n; k++) {
      s = order[k]
      if (!(s in got)) { print "compare-losses: step " s " missing from " other; exit 1 }
      d = got[s] - want[s]; if (d < 0) d = -d
      r = d / (want[s] < 0 ? -want[s] : want[s])
      if (r > worst) worst = r
      if ((k == 1 && r > ft) || r > at) { bad = 1; printf "compare-losses: step %s: %s vs %s (relative %.2e)\n", s, want[s], got[s], r }
    }
    printf "%s: %d steps, first-step relative difference %.2e (tol %g), worst %.2e (tol %g)\n",
      bad ? "FAIL" : "ok", n, (got[order[1]] - want[order[1]]) / want[order[1]], ft, worst, at
    exit bad
  }' "$ref" "$other"
