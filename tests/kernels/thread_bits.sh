#!/usr/bin/env bash
# Every kernel gives the same bits with 1, 2 and 4 threads: runs thread_bits (one line per
# kernel: its name and a hash of its outputs) at each count and compares the lines.
#   thread_bits.sh THREAD_BITS_PROGRAM
set -euo pipefail
program=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
status=0
for n in 1 2 4; do
  "$program" --threads "$n" > "$dir/$n.txt" 2> "$dir/$n.err"
  # the pool the kernels ran on, as the program found it (Kokkos' concurrency): a --threads
  # that stopped taking effect would compare 1 thread with itself
  if ! grep -q "^thread_bits: $n threads\? (Kokkos OpenMP)" "$dir/$n.err"; then
    echo "thread_bits: asked for $n threads, ran on: $(grep '^thread_bits:' "$dir/$n.err")"
    status=1
  fi
done
for n in 2 4; do
  if ! diff "$dir/1.txt" "$dir/$n.txt" > "$dir/diff"; then
    echo "thread_bits: these kernels give other bits with $n threads than with 1:"
    grep '^>' "$dir/diff" | awk '{ $NF = ""; print "  " substr($0, 3) }'
    status=1
  fi
done
[ "$status" -eq 0 ] && echo "thread_bits: $(wc -l < "$dir/1.txt") kernels, the same bits with 1, 2 and 4 threads"
exit "$status"
