#!/usr/bin/env bash
# Outside CTest: runs each named CTest test N times in turn (with the suite's leak check
# after each), and prints how many runs of each passed. A test that fails once in N is
# flaky: run it with the machine busy (a build beside it), as docs/tests.md records.
# Usage: tests/scripts/repeat-tests.sh BUILD_DIR N TEST...
# e.g.   tests/scripts/repeat-tests.sh build/release 20 faults mpi_np2 mpi_np4 slurm_jobs cli_errors
set -u
build=$1
n=$2
shift 2
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
log=$(mktemp -d)
status=0
for t in "$@"; do
  passed=0
  for i in $(seq 1 "$n"); do
    if ctest --test-dir "$build" -R "^$t\$" --output-on-failure > "$log/$t-$i.log" 2>&1; then
      passed=$((passed + 1))
    else
      echo "repeat-tests: $t run $i failed:"; grep -E "FAIL|Failed|\*\*\*" "$log/$t-$i.log" | head -10
      status=1
    fi
  done
  echo "repeat-tests: $t: $passed of $n passed ($(date -u +%FT%TZ))"
done
rm -rf "$log"
exit $status
