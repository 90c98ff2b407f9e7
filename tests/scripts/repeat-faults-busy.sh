#!/usr/bin/env bash
# Outside CTest: the faults test N times in a loop beside a CPU burner (the machine busy, as
# docs/tests.md's flakiness loops are run), from a copy of the executable and shims so a
# rebuild meanwhile does not change them. Prints each run's outcome and the count.
# Usage: tests/scripts/repeat-faults-busy.sh BUILD_DIR N
set -u
build=$(realpath "$1")
n=$2
here=$(cd "$(dirname "$0")/.." && pwd)
copy=$(mktemp -d)
trap 'kill $burner 2>/dev/null; rm -rf "$copy"' EXIT
cp "$build/bin/strata" "$build/tests/mpi_yield_shim.so" "$build/tests/io_fault_shim.so" "$copy/"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive LD_PRELOAD=$copy/mpi_yield_shim.so
( while :; do :; done ) &
burner=$!
pass=0
for i in $(seq 1 "$n"); do
  start=$(date +%s)
  if bash "$here/train/test_faults.sh" "$copy/strata" "$(command -v mpiexec)" "$copy/io_fault_shim.so" >"$copy/run$i.log" 2>&1; then
    pass=$((pass + 1)); echo "run $i: pass in $(( $(date +%s) - start )) s"
  else
    echo "run $i: FAIL in $(( $(date +%s) - start )) s:"; grep '^FAIL' -A3 "$copy/run$i.log"
  fi
done
echo "faults: $pass of $n passed"
[ "$pass" -eq "$n" ]
