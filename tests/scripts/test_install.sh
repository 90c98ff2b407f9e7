#!/usr/bin/env bash
# strata installed as HPC software: `cmake --install BUILD --prefix P` into a temporary
# prefix, the environment module loaded with Debian's environment-modules (`module use
# P/share/modulefiles; module load strata`), and from a directory outside the source:
# `strata --version` names the commit and the build; the default deck
# ($STRATA_EXAMPLES/gpt-fortunes.toml) trains on 2 ranks with a checkpoint; the installed
# Python tools run from there (plot_metrics.py draws the run; ckpt_to_torch.py, which
# imports its PyTorch GPT from beside it, reproduces the checkpoint's validation loss); the
# installed workstation job script runs the installed strata; and `strata plan` finds the
# installed machine files with the source tree hidden (a tmpfs over it).
# Usage: test_install.sh BUILD_DIR MPIEXEC
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=$1
mpiexec=$2
source "$here/../support/test_lib.sh"
cd "$work"
prefix=$work/prefix

if cmake --install "$build" --prefix "$prefix" > install.log 2>&1; then
  ok "cmake --install: $(grep -c 'Installing' install.log) files into the prefix"
else
  fail "cmake --install"; tail -5 install.log; finish
fi
for f in bin/strata share/strata/inputs/gpt-fortunes.toml share/strata/jobscripts/slurm/train.sbatch \
         share/strata/machines/debian-2core-vm.toml share/strata/tools/ckpt_to_torch.py share/strata/tools/torch_gpt.py \
         share/doc/strata/README.md share/doc/strata/docs/design.md share/modulefiles/strata/*; do
  [ -e "$prefix"/$f ] || fail "not installed: $f"
done

modules_init=/usr/share/modules/init/bash
[ -r $modules_init ] || { fail "no environment-modules ($modules_init): scripts/install-deps.sh installs it"; finish; }
source $modules_init
module use "$prefix/share/modulefiles"
module load strata 2> module.err || { fail "module load strata"; cat module.err; finish; }
[ "$(command -v strata)" = "$prefix/bin/strata" ] && [ -d "$STRATA_EXAMPLES" ] && [ -x "$STRATA_TOOLS/plot_metrics.py" ] &&
  ok "module load strata: strata on PATH from the prefix, \$STRATA_EXAMPLES and \$STRATA_TOOLS set" ||
  fail "after module load: strata is '$(command -v strata)', STRATA_EXAMPLES '${STRATA_EXAMPLES:-}'"

version=$(strata --version 2>&1)
echo "$version" | grep -Eq "^strata [0-9.]+ \(git [0-9a-f]{12}(-dirty)?; CPU build Release, Kokkos [0-9.]+ [A-Za-z+]+, BLAS .*, bf16 products: " &&
  ok "strata --version: $version" || fail "strata --version: '$version'"

mkdir elsewhere && cd elsewhere
if timeout 120 "$mpiexec" -n 2 strata train "$STRATA_EXAMPLES/gpt-fortunes.toml" --set run.steps=20 \
     --set run.checkpoint_every=20 --set run.val_every=20 > train.log 2>&1 &&
   grep -q "^strata: done: 20 steps" train.log && [ -f runs/gpt-fortunes/checkpoints/ckpt_00000020.h5 ]; then
  ok "the default deck from the installed tree, outside the source: $(grep '^strata: done' train.log)"
else
  fail "training the installed default deck"; tail -5 train.log
fi
"$STRATA_TOOLS/plot_metrics.py" runs/gpt-fortunes/metrics.csv -o loss.png > plot.log 2>&1 && [ -s loss.png ] &&
  ok "the installed plot_metrics.py (its shebang) draws the run" || { fail "plot_metrics.py"; cat plot.log; }
timeout 300 "$STRATA_TOOLS/ckpt_to_torch.py" runs/gpt-fortunes/checkpoints/ckpt_00000020.h5 --check > torch.log 2>&1 &&
  ok "the installed ckpt_to_torch.py: $(grep -i 'loss' torch.log | head -1)" || { fail "ckpt_to_torch.py"; tail -5 torch.log; }
if DATA=2 timeout 120 "$STRATA_JOBSCRIPTS/workstation.sh" --set run.steps=5 --set run.out_dir="$work/ws" > ws.log 2>&1 &&
   grep -q "^strata: done: 5 steps" ws.log; then
  ok "the installed workstation.sh runs the installed strata on the installed deck"
else
  fail "workstation.sh from the prefix"; tail -5 ws.log
fi
# `strata plan` with the source tree out of sight (a tmpfs mounted over it in a mount
# namespace of its own): the machine file it reads can only be the installed one, not the
# source's machines/ that a binary of the build tree falls back to
source_tree=$(cd "$here/../.." && pwd)
hidden=(unshare --mount --propagation private)
"${hidden[@]}" true 2>/dev/null || hidden=(unshare --user --map-root-user --mount --propagation private)
if ! "${hidden[@]}" true 2>/dev/null; then
  fail "no mount namespace to hide the source tree in (unshare --mount, as root or in a user namespace)"
elif timeout 120 "${hidden[@]}" sh -c 'mount -t tmpfs tmpfs "$1" && [ ! -e "$1/machines" ] && shift && exec "$@"' \
       sh "$source_tree" strata plan "$STRATA_EXAMPLES/gpt-fortunes.toml" --ranks 2 > plan.log 2>&1 &&
     grep -q "^machine: debian-2core-vm" plan.log && grep -qi "recommend" plan.log; then
  ok "strata plan with the source tree hidden: the installed machine file ($(grep '^machine:' plan.log | cut -c1-60))"
else
  fail "strata plan with the source tree hidden"; tail -5 plan.log
fi
finish
