#pragma once
// Checkpoint publication, all or nothing, decided by all ranks (io/checkpoint_dir.hpp
// has the file protocol):
//   1. rank 0 checks that the file system has room for one more checkpoint, every rank
//      that its parameters are finite;
//   2. every rank writes its part of ckpt_<step>.h5.tmp; every write, flush and close
//      result is checked, and all ranks agree on the outcome;
//   3. rank 0 checks the file's structure (format, step, every tensor in its shape),
//      fsyncs, renames and updates LATEST; all ranks agree on the outcome;
//   4. only then does rank 0 delete checkpoints beyond run.keep_checkpoints, never the one
//      the run restarted from, oldest first in the order this run wrote them.
// A failure at 1-3 on any rank removes the temporary file, leaves LATEST and every
// existing checkpoint alone, and throws the same IoError (exit 4) or DivergedError
// (exit 5) on every rank, naming the rank and the cause.
#include <string>
#include <vector>

#include "checkpoint/checkpoint_dir.hpp"
#include "checkpoint/model_checkpoint.hpp"
#include "comm/mpi_handle.hpp"
#include "core/deck.hpp"
#include "state/param_store.hpp"

namespace strata {

class CheckpointPublisher {
 public:
  // protect: the checkpoint this run restarted from ("" if none); it is never pruned.
  CheckpointPublisher(const std::string& dir, MPI_Comm world, int64_t keep, const std::string& protect);
  const CheckpointDirectory& directory() const { return dir_; }

  struct Written {
    std::string path;
    int64_t bytes = 0;
    double seconds = 0;        // all of it
    double check_seconds = 0;  // of it, the checks before the write and the read-back after it
  };
  // Collective. place: this rank among the ranks that hold the same values (they share the writing).
  // pause_midway: --inject-fault pause-checkpoint (write_model_checkpoint).
  Written publish(const TrainState& state, ParamStore<float>& params, const Deck& deck, const std::string& layout,
                  const ReplicaPlace& place, bool pause_midway = false);

 private:
  CheckpointDirectory dir_;
  MPI_Comm world_;
  int rank_ = 0;
  int64_t keep_;
  std::string protect_;           // path, or ""
  std::vector<int64_t> written_;  // steps this run published, in order
};

}  // namespace strata
