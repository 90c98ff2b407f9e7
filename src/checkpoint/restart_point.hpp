#pragma once
// Where a run starts, decided once by rank 0 and told to every rank (collective):
//   --restart PATH     that file;
//   --restart latest   the file LATEST names; if LATEST is missing or names a missing
//                      file, the newest checkpoint in the folder that checks out
//                      (check_checkpoint_file), and the note says so; no checkpoint at
//                      all: a fresh start;
//   neither            a fresh start, but not over a run that has checkpoints: that is
//                      refused (UserError) unless `fresh`, which moves the old
//                      checkpoints aside (checkpoints.replaced-<time>) rather than
//                      deleting them.
#include <string>

#include "comm/mpi_handle.hpp"
#include "state/param_store.hpp"

namespace strata {

struct RestartPoint {
  std::string path;  // "" for a fresh start
  std::string note;  // what rank 0 had to decide, for the log ("" if nothing to say)
};

// run_dir: out_dir/name, or "" when the run writes no outputs. Rank 0 must hold the run
// directory's lock. Throws the same UserError on every rank when the request cannot be met.
RestartPoint choose_restart_point(const std::string& restart, bool fresh, const std::string& run_dir,
                                  const ParamStore<float>& params, MPI_Comm world);

}  // namespace strata
