#!/usr/bin/env bash
# Prepares the folder scripts/device-check.sh runs from on a GPU machine (which has CUDA
# but none of Debian's libraries): the CUDA build's executables, the shared libraries they
# need that are not CUDA's own (MPICH, UCX and its modules, libstdc++ ...; collected with
# ldd and stripped), MPICH's launcher, the fortunes text the check trains on (the GPU
# machine has no Debian packages), and the CPU reference runs of inputs/device-check.toml
# in fp32 and in bf16.
# Output: .device/strata-device.tar.xz (git-ignored; xz because MPICH alone is 41 MB),
# which must stay well under the 64 MiB a device call may carry. Usage: scripts/bundle-device.sh
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh >/dev/null        # the CPU build, for the reference run
scripts/build-cuda.sh >/dev/null   # the GPU build
out=build/device-bundle
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib/ucx" "$out/cpu-reference" "$out/text"

bins=(build/cuda/bin/strata build/cuda/tests/test_kernels build/cuda/tests/test_units build/cuda/tests/test_mpi
      build/cuda/tests/attention_io build/cuda/bench/bench_kernels /usr/bin/mpiexec.hydra /usr/bin/hydra_pmi_proxy)
cp "${bins[@]}" "$out/bin/"
cp tests/kernels/check_attention_torch.py "$out/bin/"   # run where the GPU machine's python3 has torch
cp /usr/lib/x86_64-linux-gnu/ucx/libuct_cma.so.0 "$out/lib/ucx/"

# Libraries from the executables' ldd, except the C runtime and CUDA's own (the GPU
# machine has CUDA 13, and cuBLAS/NCCL are far too big to carry).
for b in "${bins[@]}" "$out"/lib/ucx/*; do
  ldd "$b" | awk '$3 ~ /^\// {print $3}'
done | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|libresolv.so*|ld-linux*) continue ;;
    libcuda*|libcublas*|libnccl*|libcudart*) continue ;;
  esac
  cp -L "$lib" "$out/lib/"
done
strip --strip-unneeded "$out"/bin/* "$out"/lib/*.so* "$out"/lib/ucx/*.so* 2>/dev/null || true

# The deck's text (fortune's indexes and UTF-8 duplicates are not read).
for f in /usr/share/games/fortunes/*; do
  case $f in *.dat|*.u8) ;; *) [ -f "$f" ] && cp -L "$f" "$out/text/" ;; esac
done

# CPU half of the comparison: the same deck and text, one rank, on this machine; fp32 and
# bf16 (this CPU's oneDNN products; the GPU's come from cuBLAS).
for precision in fp32 bf16; do
  OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 build/release/bin/strata train inputs/device-check.toml \
    --set run.out_dir="$out/cpu-reference" --set "data.files=[\"$out/text/*\"]" \
    --set model.precision=$precision > "$out/cpu-reference/log-$precision.txt"
  cp "$out/cpu-reference/device-check/metrics.csv" "$out/cpu-reference/metrics-$precision.csv"
  rm -rf "$out/cpu-reference/device-check"
done
# ... and a mixture-of-experts GPT (the deck's keys in device-check.sh's `moe` list)
OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 build/release/bin/strata train inputs/device-check.toml \
  --set run.out_dir="$out/cpu-reference" --set "data.files=[\"$out/text/*\"]" \
  --set model.moe_experts=4 --set model.moe_every=2 > "$out/cpu-reference/log-moe.txt"
cp "$out/cpu-reference/device-check/metrics.csv" "$out/cpu-reference/metrics-moe.csv"
rm -rf "$out/cpu-reference/device-check"

mkdir -p .device
tar -C "$out" -cJf .device/strata-device.tar.xz bin lib cpu-reference text
size=$(du -m .device/strata-device.tar.xz | cut -f1)
echo "bundle-device: .device/strata-device.tar.xz is ${size} MiB ($(du -sm "$out" | cut -f1) MiB unpacked, $(ls "$out/lib" | wc -l) libraries)"
if [ "$size" -ge 48 ]; then echo "bundle-device: error: too big to carry with the tree (64 MiB in all)" >&2; exit 1; fi
