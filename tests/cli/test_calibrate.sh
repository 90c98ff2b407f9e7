#!/usr/bin/env bash
# `strata calibrate` on 2 ranks writes a machine file that has every section, positive
# GEMM rate, bandwidth and link costs, and prints the measured and fitted times it came
# from and each rate's spread over its repeats; on 1 rank (of 2 threads) it says no link
# costs were measured; beside CPU burners (another job on the node) it refuses to write
# (exit 7, one line naming the other processes and the spread past --max-spread) and
# leaves the existing machine file as it was, and with --accept-noisy writes one that says
# it is noisy; an unwritable --out is refused before measuring (exit 2, one line). On the
# node without burners: --max-spread 0 refuses on the spread alone, and the defaults write
# (each skipped, and said so, where calibrate found the node busy or a rate's spread past
# the default bound).
# The runs that must write pass --accept-noisy: whether this machine is quiet while the
# suite runs is not what they test.
# Usage: test_calibrate.sh STRATA MPIEXEC DECK
set -u
strata=$1
mpiexec=$2
deck=$3
source "$(dirname "$0")/../support/test_lib.sh"

if timeout 120 "$mpiexec" -n 2 "$strata" calibrate "$deck" --out "$work/m.toml" --name test-box --repeats 2 --accept-noisy >"$work/out.log" 2>&1; then
  value() { sed -nE "s/^$1 = ([-0-9.e+]+).*/\1/p" "$work/m.toml"; }
  bad=
  for key in gemm_flops attention_flops memory_bandwidth memory_capacity activation_rate send_alpha send_beta allreduce_alpha allreduce_beta broadcast_alpha broadcast_beta; do
    v=$(value $key)
    awk -v v="$v" 'BEGIN { exit !(v + 0 > 0) }' || bad="$bad $key=$v"
  done
  if [ -z "$bad" ] && grep -q '^name = "test-box"' "$work/m.toml" && grep -q '^ranks_per_node = 2' "$work/m.toml" &&
     grep -q "^intra allreduce .* 8388608 " "$work/out.log" && grep -qE "^  gemm_flops +[0-9.e+]+ +[0-9.e+]+ +[0-9.]+%" "$work/out.log" &&
     grep -q "^repeats (2; the best is kept" "$work/out.log" && grep -q "^other processes: " "$work/out.log"; then
    ok "calibrate on 2 ranks: a complete machine file with positive costs ($(value gemm_flops) FLOP/s, allreduce $(value allreduce_beta) s/byte)"
  else
    fail "machine file:$bad"; cat "$work/m.toml" "$work/out.log"
  fi
else
  fail "calibrate on 2 ranks"; cat "$work/out.log"
fi

# one rank of 2 threads: its rates per thread count, 1 and 2, in the [threads] table (the
# elementwise kernels' row measured on a one-thread partition of the rank's pool)
if timeout 120 "$mpiexec" -n 1 "$strata" calibrate "$deck" --threads 2 --repeats 1 --accept-noisy --out "$work/t2.toml" >"$work/t2.log" 2>&1 &&
   grep -q '^threads_per_rank = 2' "$work/t2.toml" && grep -qE '^cores_per_node = [0-9]+' "$work/t2.toml" &&
   grep -q '^counts = \[1, 2\]' "$work/t2.toml" && grep -qE '^gemm = \[1\.0, [0-9.]+\]' "$work/t2.toml" &&
   grep -qE '^memory = \[1\.0, [0-9.]+\]' "$work/t2.toml" && grep -qE '^activation = \[1\.0, [0-9.]+\]' "$work/t2.toml" &&
   "$strata" plan "$(dirname "$deck")/../plan/plan-tiny.toml" --cores 2 --machine "$work/t2.toml" >"$work/t2plan.log" 2>&1 &&
   grep -q '^recommended: ' "$work/t2plan.log" && grep -q "one rank: no link costs measured" "$work/t2.toml"; then
  ok "calibrate as 1 rank of 2 threads: [threads] at 1 and 2 ($(grep '^gemm = ' "$work/t2.toml")), plan --cores reads it, and one rank says it measured no link costs"
else
  fail "calibrate --threads 2"; cat "$work/t2.log" "$work/t2.toml" "$work/t2plan.log" 2>/dev/null
fi

# Without burners (CTest runs this test alone: PROCESSORS 2), calibrate judges the node by
# what it prints: the other processes' share of the cores (at most 10%) and each rate's
# spread over its repeats (at most --max-spread, 0.5 by default). The checks below read
# the printed figures, so a refusal must name a figure past its bound, and a node that
# calibrate found busy is reported as skipped, not passed.
other_load() { sed -nE "s/^other processes: ([0-9.]+)% of the node's cores.*/\1/p" "$1"; }
widest_spread() { awk '/^  rate +best/ { on = 1; next } on && /%/ { sub(/%.*/, ""); v = $NF; if (v > m) m = v } END { print m + 0 }' "$1"; }
quiet() { awk -v l="$(other_load "$1")" 'BEGIN { exit !(l != "" && l <= 10) }'; }

# refused on the spread alone: --max-spread 0 on a node with no other load
printf 'name = "good"\n' >"$work/spread.toml"
timeout 120 "$mpiexec" -n 1 "$strata" calibrate "$deck" --repeats 2 --max-spread 0 --out "$work/spread.toml" >"$work/spread.log" 2>&1
rc=$?
if ! quiet "$work/spread.log"; then
  echo "skip: refusal on the spread alone: other processes used $(other_load "$work/spread.log")% of the cores (not a quiet node)"
elif [ $rc -eq 7 ] && grep -qE "^strata: error: the node was not quiet while calibrate measured it: [a-z_0-9 +-]+ moved [0-9]+% between its 2 repeats \(--max-spread 0.00\)" "$work/spread.log" &&
     ! grep -q "other processes used" <(grep '^strata: error' "$work/spread.log") &&
     [ "$(cat "$work/spread.toml")" = 'name = "good"' ]; then
  ok "a quiet node (other processes $(other_load "$work/spread.log")%), --max-spread 0: refused on the spread alone (exit 7), the existing file as it was"
else
  fail "calibrate --max-spread 0 on a quiet node: exit $rc"; cat "$work/spread.log"
fi

# the defaults on a quiet node: written, unless a rate's printed spread passed 0.5
timeout 120 "$mpiexec" -n 1 "$strata" calibrate "$deck" --repeats 2 --out "$work/defaults.toml" >"$work/defaults.log" 2>&1
rc=$?
widest=$(widest_spread "$work/defaults.log")
if ! quiet "$work/defaults.log"; then
  echo "skip: the defaults on a quiet node: other processes used $(other_load "$work/defaults.log")% of the cores"
elif awk -v w="$widest" 'BEGIN { exit !(w > 50) }'; then
  if [ $rc -eq 7 ] && grep -qE "^strata: error: .* moved [0-9]+% between its 2 repeats \(--max-spread 0.50\)" "$work/defaults.log"; then
    echo "skip: the defaults on a quiet node: a rate moved $widest% between repeats (this VM's speed moved), refused as it should be"
  else
    fail "calibrate with the defaults: a rate moved $widest%, exit $rc"; cat "$work/defaults.log"
  fi
elif [ $rc -eq 0 ] && grep -q "^strata: machine file $work/defaults.toml written" "$work/defaults.log" &&
     grep -qE '^gemm_flops = [0-9.e+]+' "$work/defaults.toml" && ! grep -q "noisy" "$work/defaults.toml"; then
  ok "the defaults on a quiet node (other processes $(other_load "$work/defaults.log")%, widest spread $widest%): written"
else
  fail "calibrate with the defaults on a quiet node (widest spread $widest%): exit $rc"; cat "$work/defaults.log"
fi

# another job on the node: a CPU burner per core, for as long as calibrate runs
burners=()
for _ in $(seq "$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)"); do  # (nproc alone counts OMP_NUM_THREADS)
  (while :; do :; done) &
  burners+=($!)
done
on_exit "kill ${burners[*]} 2>/dev/null"
printf 'name = "good"\n' >"$work/good.toml"
out=$(timeout 120 "$mpiexec" -n 1 "$strata" calibrate "$deck" --repeats 2 --max-spread 0 --out "$work/good.toml" 2>&1)
rc=$?
if [ $rc -eq 7 ] && [ "$(grep -c 'strata: error' <<<"$out")" -eq 1 ] &&
   grep -qE "strata: error: the node was not quiet while calibrate measured it: other processes used [0-9]+% of the node's cores \(at most 10%\); gemm_flops moved [0-9]+% between its 2 repeats \(--max-spread 0.00\).*no machine file written" <<<"$out" &&
   [ "$(cat "$work/good.toml")" = 'name = "good"' ] && [ ! -e "$work/good.toml.tmp" ]; then
  ok "beside a busy core per core: refused (exit 7, one line: $(grep -oE "other processes used [0-9]+%" <<<"$out")), the existing file as it was"
else
  fail "calibrate beside burners: exit $rc: $out"
fi
if timeout 120 "$mpiexec" -n 1 "$strata" calibrate "$deck" --repeats 1 --accept-noisy --out "$work/noisy.toml" >"$work/noisy.log" 2>&1 &&
   grep -q '^source = .*noisy, written with --accept-noisy: other processes used' "$work/noisy.toml" &&
   grep -q '^strata: warning: other processes used' "$work/noisy.log"; then
  ok "beside the burners with --accept-noisy: written, and its source line says it is noisy"
else
  fail "calibrate --accept-noisy beside burners"; cat "$work/noisy.log" "$work/noisy.toml" 2>/dev/null
fi
kill "${burners[@]}" 2>/dev/null
wait "${burners[@]}" 2>/dev/null

out=$(timeout 60 "$mpiexec" -n 1 "$strata" calibrate "$deck" --out /nonexistent/m.toml 2>&1 >/dev/null)
rc=$?
if [ $rc -eq 2 ] && [ "$(grep -c 'strata: error' <<<"$out")" -eq 1 ] && grep -q "cannot write the machine file '/nonexistent/m.toml'" <<<"$out"; then
  ok "an unwritable --out: one line, exit 2"
else
  fail "unwritable --out: exit $rc: $out"
fi

finish
