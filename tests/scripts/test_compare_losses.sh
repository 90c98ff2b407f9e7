#!/usr/bin/env bash
# scripts/compare-losses.sh (used by the GPU check) accepts agreeing runs and rejects a
# first-step mismatch, a later drift and a missing step.
set -u
cmp=$1
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
printf 'step,loss,val_loss\n1,8.0,\n2,7.0,\n3,6.0,\n' > "$d/ref.csv"
printf 'step,loss,val_loss\n1,8.00001,\n2,7.001,\n3,6.002,\n' > "$d/close.csv"
printf 'step,loss,val_loss\n1,8.01,\n2,7.0,\n3,6.0,\n' > "$d/first.csv"
printf 'step,loss,val_loss\n1,8.0,\n2,7.0,\n3,6.5,\n' > "$d/drift.csv"
printf 'step,loss,val_loss\n1,8.0,\n2,7.0,\n' > "$d/short.csv"
fail=0
"$cmp" "$d/ref.csv" "$d/close.csv" 1e-5 2e-3 || { echo "FAIL: close runs rejected"; fail=1; }
for bad in first drift short; do
  if "$cmp" "$d/ref.csv" "$d/$bad.csv" 1e-5 2e-3; then echo "FAIL: $bad accepted"; fail=1; fi
done
exit $fail
