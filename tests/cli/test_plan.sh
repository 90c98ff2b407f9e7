#!/usr/bin/env bash
# `strata plan DECK --ranks N`: a table of every feasible layout, fastest first, and a
# recommendation whose "run it with" overrides really train; a batch too big for a rank's
# memory is planned with gradient accumulation or recomputation, and the 1.3B deck with a batch of 2M tokens
# on 64 H100s fits only with a pipeline or with accumulation (memory-bound, said so; at its
# own 1M tokens plain data parallelism fits since attention keeps no T x T probabilities);
# one sequence of 131072 tokens is planned with context parallelism;
# --schedule's dispatch lines (ready against order on paper); one-line errors (exit 2) for
# no question asked, an unreadable machine file and a rank count no layout fits.
# Usage: test_plan.sh STRATA MPIEXEC SOURCE_DIR
set -u
strata=$1
mpiexec=$2
src=$3
source "$(dirname "$0")/../support/test_lib.sh"
deck=$src/tests/plan/plan-tiny.toml
vm=$src/machines/debian-2core-vm.toml

if timeout 60 "$strata" plan "$deck" --ranks 4 --machine "$vm" --top 0 >"$work/p4.log" 2>&1; then
  rows=$(grep -cE '^ +[0-9]+[ !] +data=' "$work/p4.log")
  said=$(sed -nE 's/^([0-9]+) layouts fit.*/\1/p' "$work/p4.log")
  if [ "$rows" -eq 142 ] && [ "$said" = 142 ] && grep -q 'data=1 tensor=2d:2x2' "$work/p4.log" &&
     grep -q 'data=1 pipeline=4:mgrit:L2 ' "$work/p4.log" && grep -q 'data=2 pipeline=2:mgrit:L1 ' "$work/p4.log" &&
     grep -q '^(mgrit: layer ranks solved by MGRIT' "$work/p4.log" &&
     grep -q 'data=1 tensor=3d:' "$work/p4.log" && grep -q 'data=2 tensor=3d:' "$work/p4.log" &&
     [ "$(grep -cE '^  (none|1d|2d|3d) +data=' "$work/p4.log")" -eq 4 ] &&
     grep -qE '^  why: the fastest layout that fits; the best of the next split, .* is [0-9.]+% slower' "$work/p4.log" &&
     grep -q 'data=1 context=4 ' "$work/p4.log" && grep -q 'data=2 context=2 ' "$work/p4.log" &&
     grep -q 'data=1 pipeline=4:xpipe:8mb' "$work/p4.log" && grep -q 'data=1 pipeline=4:zb-h1:8mb' "$work/p4.log" && grep -q '^recommended: ' "$work/p4.log"; then
    ok "4 ranks of the tiny deck: all 142 layouts (data, pipeline x 6 schedules x micro-batches, layer-parallel MGRIT with 1 and 2 levels and its caveat, context, 1D, 2D, the best 3D splits), the best of each split and a recommendation"
  else
    fail "plan --ranks 4: $rows rows, '$said' said"; cat "$work/p4.log"
  fi
  # the table is sorted by step time
  if grep -E '^ +[0-9]+[ !] +data=' "$work/p4.log" | awk '{ for (i = 1; i <= NF; ++i) if ($i == "ms" || $i == "s") { t = $(i-1) * ($i == "s" ? 1000 : 1); break }
                                                          if (t < last) bad = 1; last = t } END { exit bad }'; then
    ok "sorted by predicted step time"
  else
    fail "not sorted"; cat "$work/p4.log"
  fi
else
  fail "plan --ranks 4"; cat "$work/p4.log"
fi

# the recommended layout for 2 ranks trains with the overrides it prints (XPipe, 8 micro-batches:
# two steps once hung in the summary, where the stages had different timers)
if timeout 60 "$strata" plan "$deck" --ranks 2 --machine "$vm" >"$work/p2.log" 2>&1; then
  sets=$(sed -nE 's/^  run it with: (.*)/\1/p' "$work/p2.log")
  if [ -n "$sets" ] && (cd "$work" && timeout -k 10 120 "$mpiexec" -n 2 "$strata" train "$deck" $sets --set run.steps=2 >"$work/t.log" 2>&1) &&
     grep -q "done: 2 steps" "$work/t.log"; then
    ok "the recommendation for 2 ranks trains: $(sed -nE 's/^recommended: ([^(]*).*/\1/p' "$work/p2.log")"
  else
    fail "recommended layout did not train: $sets"; cat "$work/p2.log" "$work/t.log"
  fi
else
  fail "plan --ranks 2"; cat "$work/p2.log"
fi

# --cores: the same cores as ranks x threads, each split's best layout, one recommended,
# and what it recommends trains
if timeout 60 "$strata" plan "$deck" --cores 2 --machine "$vm" >"$work/c2.log" 2>&1 &&
   [ "$(grep -cE '^ +[0-9]+ +[0-9]+  ' "$work/c2.log")" -eq 2 ] && grep -qE '^ +2 +1  ' "$work/c2.log" &&
   grep -qE '^ +1 +2  ' "$work/c2.log" && grep -q "^recommended: [12] ranks x [12] threads" "$work/c2.log"; then
  np=$(sed -nE 's/^  run it with: mpiexec -n ([0-9]+) .*/\1/p' "$work/c2.log")
  threads=$(sed -nE 's/^  run it with: .* --threads ([0-9]+).*/\1/p' "$work/c2.log")
  sets=$(sed -nE 's/^  run it with: .* --threads [0-9]+ ?//p' "$work/c2.log")
  # shellcheck disable=SC2086
  if timeout 120 "$mpiexec" -n "$np" "$strata" train "$deck" --threads "$threads" $sets --set run.steps=2 \
       --set run.out_dir="\"$work/cores\"" >"$work/c2t.log" 2>&1 && grep -q "$threads thread" "$work/c2t.log"; then
    ok "2 cores as 2 x 1 and 1 x 2: $(grep '^recommended' "$work/c2.log"), and it trains"
  else
    fail "the --cores recommendation did not train"; cat "$work/c2.log" "$work/c2t.log"
  fi
else
  fail "plan --cores 2"; cat "$work/c2.log"
fi

if timeout 60 "$strata" plan "$src/inputs/bench-gpt-small.toml" --ranks 2 --machine "$vm" --set data.batch_size=512 \
     >"$work/acc.log" 2>&1 && grep -qE '^ +[0-9]+! +data=2 +12.35 GiB' "$work/acc.log" &&
   grep -qE '^recommended: (data=2(:2mb| recompute=selective)|data=1:2mb tensor=3d:1x1x2) ' "$work/acc.log" &&
   grep -qE 'memory-bound: without (gradient accumulation|recomputation)( and ZeRO-1)? it needs 12\.(35|46) GiB per rank' "$work/acc.log"; then
  ok "a batch of 512 on 2 ranks: $(grep '^recommended' "$work/acc.log")"
else
  fail "memory-bound plan"; cat "$work/acc.log"
fi

# (16 ranks and 512K tokens: 64 ranks and 2M tokens searched for 20 s of the suite's budget)
if timeout 120 "$strata" plan "$src/inputs/gpt-1.3b.toml" --ranks 16 --machine "$src/machines/h100-dgx-cluster.toml" \
     --set data.batch_size=256 --top 0 >"$work/big.log" 2>&1 &&
   grep -qE '^recommended: .*(pipeline=|[0-9]mb)' "$work/big.log" && grep -qE '^ +[0-9]+! +data=16 ' "$work/big.log" &&
   { grep -qE '^recommended: .*pipeline=' "$work/big.log" || grep -q '^  memory-bound: ' "$work/big.log"; }; then
  ok "1.3B, 512K tokens on 16 H100s: $(grep '^recommended' "$work/big.log")"
else
  fail "1.3B plan"; cat "$work/big.log"
fi

# one sequence of 131072 tokens on 64 H100s: no replica or 2D batch block can be made, and
# the fastest layout that fits splits the sequence
if timeout 120 "$strata" plan "$src/inputs/gpt-1.3b.toml" --ranks 64 --machine "$src/machines/h100-dgx-cluster.toml" \
     --set model.seq_len=131072 --set data.batch_size=1 >"$work/long.log" 2>&1 &&
   grep -qE '^recommended: data=1 context=[0-9]+ ' "$work/long.log" && grep -qE -- '--set parallel.context=[0-9]+' "$work/long.log"; then
  ok "1.3B, one sequence of 131072 on 64 H100s: $(grep '^recommended' "$work/long.log")"
else
  fail "long-sequence plan"; cat "$work/long.log"
fi

expect_error() {  # message, then the command
  local want=$1
  shift
  out=$(timeout 60 "$@" 2>&1 >/dev/null)
  rc=$?
  if [ $rc -eq 2 ] && [ "$(grep -c 'strata: error' <<<"$out")" -eq 1 ] && grep -qF "$want" <<<"$out"; then
    ok "error: $want"
  else
    fail "expected '$want' (exit 2), got exit $rc: $out"
  fi
}
# Gradient sums across nodes, on this VM's two Slurm nodes at 200 Mbit/s as calibrate
# measured them: the recommended layout keeps data inside the nodes, so the lines are for
# the fastest one whose replicas cross, and PowerSGD pays; its verdict names the fastest
# of the four lines it printed. With the link 1000x faster nothing pays; without the
# codecs' rates in the file their time is left out, and it says so.
slow=$src/machines/debian-vm-2nodes-200mbit.toml
sums_plan() {  # MACHINE: the gradient-sum lines of strata plan for "small" on 4 ranks
  timeout 60 "$strata" plan "$src/inputs/bench-gpt-small.toml" --ranks 4 --machine "$1" 2>&1 | grep -A7 "^gradient sums"
}
out=$(sums_plan "$slow")
fastest=$(sed -nE 's/^  ([a-z].*[^ ]) +([0-9.]+) ms .*/\2 \1/p' <<<"$out" | sort -n | head -1 | cut -d' ' -f2-)
if grep -q "^gradient sums across nodes, for the fastest layout whose data replicas cross nodes, data=" <<<"$out" &&
   [ "$(grep -cE '^  (flat|nodes|nodes \+ int8|nodes \+ powersgd r=4) +[0-9.]+ ms' <<<"$out")" -eq 4 ] &&
   grep -q "^  compression pays: $fastest, .* --set parallel.grad_compression=powersgd --set parallel.powersgd_rank=4$" <<<"$out"; then
  ok "plan on two nodes at 200 Mbit/s: $(grep '^  compression pays' <<<"$out" | cut -d';' -f1 | sed 's/^ *//')"
else
  fail "plan's gradient sums at 200 Mbit/s (fastest line: '$fastest'): $out"
fi
sed 's/_beta = \([0-9.]*\)e-08/_beta = \1e-11/' "$slow" >"$work/fast-link.toml"
grep -q "^  compression does not pay here: the flat sum is the fastest" <<<"$(sums_plan "$work/fast-link.toml")" &&
  ok "plan with the link 1000x faster: compression does not pay" || fail "plan, fast link: $(sums_plan "$work/fast-link.toml")"
grep -v "^int8_rate\|^powersgd_rate" "$slow" >"$work/no-codec-rates.toml"
grep -q "^  (no rate for int8 and powersgd in the machine file: its own time is left out; strata calibrate measures it)" \
  <<<"$(sums_plan "$work/no-codec-rates.toml")" && ok "plan without the codecs' rates: their time left out, said" ||
  fail "plan without codec rates: $(sums_plan "$work/no-codec-rates.toml")"

# --schedule weighs ready dispatch against the fixed order on paper (the simulator): under
# spikes on every stage of 4 stages of 1F1B, with room for 8 micro-batches in flight, it pays
if out=$(timeout 60 "$strata" plan "$deck" --schedule --set parallel.pipeline=4 --set parallel.micro_batches=8 \
           --set data.batch_size=8 --set variability.slowdown_max=2 --set variability.draw=spikes \
           --set variability.spike_chance=0.2 2>&1) &&
   grep -qE '^dispatch under slowdowns of 200% with chance 0.20 of each pass on every stage \(20 steps. draws\): "ready" is [0-9.]+x "order", [0-9.]+x with room for 8 in flight' <<<"$out" &&
   grep -qE '^dispatch: "ready" pays here \(up to 1\.[0-9]+x\), with micro-batches in flight beyond' <<<"$out"; then
  ok "plan --schedule: $(grep '^dispatch under' <<<"$out" | cut -d: -f2-)"
else
  fail "plan --schedule's dispatch lines: $out"
fi
expect_error "say what to plan, one of: --schedule" "$strata" plan "$deck"
expect_error "say what to plan, one of: --schedule" "$strata" plan "$deck" --ranks 2 --cores 2
expect_error "cannot open machine file '/nonexistent.toml': No such file or directory" "$strata" plan "$deck" --ranks 2 --machine /nonexistent.toml
# machine files go through the deck's bounded reader: no hang on a device, no crash on nesting
expect_error "machine file '/dev/zero' is a character device, not a regular file" "$strata" plan "$deck" --ranks 2 --machine /dev/zero
python3 -c "print('[machine]'); print('name = ' + '[' * 100000 + ']' * 100000)" > "$work/nested-machine.toml"
expect_error "nested-machine.toml:2: not valid TOML: nested more than 64 levels deep" "$strata" plan "$deck" --ranks 2 --machine "$work/nested-machine.toml"
expect_error "no layout of 5 ranks fits the deck's model and batch" "$strata" plan "$deck" --ranks 5 --machine "$vm"

finish
