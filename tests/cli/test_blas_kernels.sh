#!/usr/bin/env bash
# strata runs OpenBLAS's kernels for the CPU's own vector units where OpenBLAS, not knowing
# the CPU, picked older ones (core/blas_library.hpp): on a CPU with AVX-512 (F, BW, DQ, VL)
# `strata --version` names an AVX-512 family, with AVX2 and FMA at least Haswell's; a
# training run says when strata chose them, naming them; OPENBLAS_CORETYPE set by the
# user stands.
set -eu
strata=$1 deck=$(dirname "$0")/../../inputs/bench-gpt-tiny.toml
flags=$(grep -m1 '^flags' /proc/cpuinfo)
has() { for f in "$@"; do [[ " $flags " == *" $f "* ]] || return 1; done; }
kernels() { "$@" --version | sed -nE 's/.*BLAS OpenBLAS ([A-Za-z0-9]+) kernels.*/\1/p'; }
got=$(kernels env -u OPENBLAS_CORETYPE -u STRATA_BLAS_CHOSEN "$strata")
[ -n "$got" ] || { echo "skip: the BLAS is not OpenBLAS"; exit 0; }
if has avx512f avx512bw avx512dq avx512vl; then
  want="SkylakeX Cooperlake SapphireRapids"
elif has avx2 fma; then
  want="Haswell Zen SkylakeX Cooperlake SapphireRapids"
else
  want=$got
fi
[[ " $want " == *" $got "* ]] || { echo "FAIL: OpenBLAS runs $got kernels on a CPU for $want"; exit 1; }
echo "ok: OpenBLAS runs $got kernels (the CPU's own: $want)"
# the user's choice stands, and is not reported as strata's
user=$(OPENBLAS_CORETYPE=Prescott kernels "$strata")
[ "$user" = Prescott ] || { echo "FAIL: OPENBLAS_CORETYPE=Prescott ran $user kernels"; exit 1; }
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
env -u OPENBLAS_CORETYPE -u STRATA_BLAS_CHOSEN "$strata" train "$deck" --set run.steps=1 --set run.out_dir="\"$d/runs\"" \
  > "$d/own.txt" 2>&1

# where strata chose, the run says so, naming the kernels it runs
if grep -q "chosen by strata" "$d/own.txt"; then
  grep "strata: OpenBLAS: $got kernels chosen by strata" "$d/own.txt" ||
    { echo "FAIL: the run's note does not name $got"; cat "$d/own.txt"; exit 1; }
fi
echo "ok: OPENBLAS_CORETYPE=Prescott stands"
