#!/usr/bin/env bash
# The layer rules of docs/design.md, checked over the source text:
#  1. a level includes only itself and the levels below it (the order of the table below,
#     the same as docs/design.md's and src/CMakeLists.txt's);
#  2. MPI's communication (collectives, point to point, waits, communicator splits) is
#     called in src/comm only; elsewhere a rank may ask for its rank and size, app/main.cpp
#     starts and ends MPI, and the checkpoint file sets MPI-IO's error handler.
# Prints every violation as file:line: what; exits 1 if there is any.
# Usage: check_layers.sh REPO_DIR
set -u
cd "$1" || exit 2
levels=(src/core kernels src/comm src/parallel src/model src/optim src/engine io src/checkpoint src/plan src/train src/cli app)
level_of_include() {  # the first path component of an include, as a level index (or -1: not a level)
  case $1 in
    core) echo 0 ;; kernels) echo 1 ;; comm) echo 2 ;; parallel) echo 3 ;; model) echo 4 ;; optim) echo 5 ;;
    engine) echo 6 ;; io) echo 7 ;; checkpoint) echo 8 ;; plan) echo 9 ;; train) echo 10 ;; cli) echo 11 ;;
    *) echo -1 ;;
  esac
}
bad=0
for i in "${!levels[@]}"; do
  dir=${levels[$i]}
  [ -d "$dir" ] || { echo "check_layers: no folder $dir (update the table)"; bad=1; continue; }
  while IFS= read -r hit; do
    file=${hit%%:*}; rest=${hit#*:}; line=${rest%%:*}
    inc=$(sed -E 's/.*#include "([^"/]+)\/.*/\1/' <<<"$rest")
    l=$(level_of_include "$inc")
    if [ "$l" -gt "$i" ]; then
      echo "$file:$line: includes $inc/ (level ${levels[$l]}) from level $dir, which is below it"
      bad=1
    fi
  done < <(grep -rnE '^#include "[^"/]+/' "$dir" --include='*.hpp' --include='*.cpp' --include='*.h' --include='*.c' || true)
done
# MPI calls outside src/comm
allowed_everywhere='MPI_Comm_rank|MPI_Comm_size'
while IFS= read -r hit; do
  file=${hit%%:*}
  for call in $(grep -oE 'MPI_[A-Z][A-Za-z_]*\(' <<<"${hit#*:}" | tr -d '('); do
    [[ $call =~ ^($allowed_everywhere)$ ]] && continue
    [[ $file == app/main.cpp && $call =~ ^MPI_(Init|Finalize|Abort)$ ]] && continue
    [[ $file == src/checkpoint/checkpoint_file.cpp && $call =~ ^MPI_(Error_string|File_create_errhandler|File_set_errhandler|Errhandler_free)$ ]] && continue
    echo "${hit%%:*}:$(cut -d: -f2 <<<"$hit"): $call outside src/comm (comm/control.hpp has the run's control collectives)"
    bad=1
  done
done < <(grep -rnE 'MPI_[A-Z][A-Za-z_]*\(' src kernels io app --include='*.hpp' --include='*.cpp' | grep -v '^src/comm/' || true)
[ $bad -eq 0 ] && echo "check_layers: ${#levels[@]} levels, includes only downward, MPI communication in src/comm only"
exit $bad
