#!/bin/sh
# The CMake presets' compiler launcher (CMAKE_<LANG>_COMPILER_LAUNCHER): compiles through
# ccache when it is installed, so that a second clone of strata on the same machine, or a
# rebuild after `rm -rf build`, takes its objects from the cache instead of compiling them
# again (the CPU build's 5 minutes and the GPU build's 6-10 become about one). Paths under
# the clone are hashed relative to it (CCACHE_BASEDIR), so every clone shares the objects;
# the cache lies in strata's cache folder beside the built dependencies (scripts/cache-dir.sh),
# or in $CCACHE_DIR if set. STRATA_CCACHE=0, or no ccache, compiles directly.
here=$(cd "$(dirname "$0")/.." && pwd)
if [ "${STRATA_CCACHE:-1}" != 0 ] && command -v ccache >/dev/null 2>&1; then
  CCACHE_BASEDIR=$here
  CCACHE_NOHASHDIR=1
  CCACHE_DIR=${CCACHE_DIR:-$("$here/scripts/cache-dir.sh")/ccache}
  export CCACHE_BASEDIR CCACHE_NOHASHDIR CCACHE_DIR
  exec ccache "$@"
fi
exec "$@"
