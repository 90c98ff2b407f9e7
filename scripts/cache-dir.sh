#!/bin/sh
# Prints strata's cache folder, where what is built once per machine lies: the Kokkos
# built for OpenMP and CUDA (scripts/build-kokkos.sh), Debian's trilinos source it comes from,
# and the compiler cache (scripts/compiler-launcher.sh). $STRATA_CACHE_DIR if set, else
# ${XDG_CACHE_HOME:-$HOME/.cache}/strata. Every clone of strata on the machine shares it;
# deleting it costs only a rebuild.
echo "${STRATA_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/strata}"
