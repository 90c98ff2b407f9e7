#!/usr/bin/env bash
# tools/plot_metrics.py writes a PNG from a metrics.csv with and without validation rows.
set -eu
tool=$1
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
printf 'step,loss,val_loss,lr,grad_norm,ms_per_step,tokens_per_s,gflops_per_s,peak_rss_mib\n1,5.5,,1e-4,6,100,1000,50,90\n10,4.0,4.1,1e-3,2,90,1100,55,91\n20,3.5,,1e-3,1,90,1100,55,91\n' > "$d/metrics.csv"
/usr/bin/python3 "$tool" "$d/metrics.csv" -o "$d/out.png"
[ "$(head -c 8 "$d/out.png" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] && echo "ok: PNG written"
