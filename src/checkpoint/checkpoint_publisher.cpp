#include "checkpoint/checkpoint_publisher.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>

#include "comm/agree.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/timers.hpp"
#include "kernels/sum_squares.hpp"

namespace strata {
CheckpointPublisher::CheckpointPublisher(const std::string& dir, MPI_Comm world, int64_t keep,
                                         const std::string& protect)
    : dir_(dir), world_(world), keep_(keep), protect_(protect) {
  MPI_Comm_rank(world, &rank_);
}

CheckpointPublisher::Written CheckpointPublisher::publish(const TrainState& state, ParamStore<float>& params,
                                                          const Deck& deck, const std::string& layout,
                                                          const ReplicaPlace& place, bool pause_midway) {
  const int64_t step = state.step;
  const std::string name = CheckpointDirectory::file_name(step);
  // What is still true after a failure, for the one line every rank will throw.
  const auto still = [&] {
    const auto latest = dir_.latest_name();
    return latest ? "; LATEST still names " + *latest + ", nothing was deleted" : "; nothing was deleted";
  };
  // Runs a phase on every rank; on any failure every rank throws the same error, with
  // the rank that saw it and what stands, after rank 0 removed the temporary file.
  const auto phase = [&](const std::function<void()>& work) {
    try {
      agreed(world_, [&] {
        try {
          work();
        } catch (const StrataError& e) {
          throw_error(e.exit_code(), "rank " + std::to_string(rank_) + ": " + e.what(), false);
        }
      });
    } catch (const StrataError& e) {
      if (rank_ == 0) dir_.discard(step);
      throw_error(e.exit_code(), "checkpoint " + name + " not published: " + e.what() + still(), true);
    }
  };

  const double t0 = Timers::now();
  const int64_t bytes = checkpoint_bytes(params);
  phase([&] {
    if (rank_ == 0) {
      const int64_t free = dir_.free_bytes();
      const int64_t need = bytes + bytes / 20 + (1 << 20);  // HDF5's metadata and chunk index on top
      if (free >= 0 && free < need)
        throw IoError(strfmt("no room: it needs about %.1f MiB and the file system of %s has %.1f MiB free",
                             double(need) / (1 << 20), dir_.dir().c_str(), double(free) / (1 << 20)));
    }
    const double sq = kernels::sum_of_squares<float>(params.param_values());
    if (!std::isfinite(sq) || !std::isfinite(state.val_loss))
      throw DivergedError(std::isfinite(sq) ? strfmt("the validation loss is %g", state.val_loss)
                                            : std::string("the parameters are not finite"));
  });
  // A rank whose tensor write fails cannot rejoin the others' collective calls
  // (CheckpointWriter): it removes the file and ends the job itself, with the one line.
  const auto end_job = [&](const std::string& why) {
    static bool ending = false;  // the abort's own exit may trip the handler again
    if (ending) return;
    ending = true;
    dir_.discard(step);
    std::fprintf(stderr,
                 "strata: error: checkpoint %s not published: rank %d: %s; a failed collective write "
                 "cannot be undone, so the job ends%s\n",
                 name.c_str(), rank_, why.c_str(), still().c_str());
    abort_job(world_, kExitIoError);
  };
  const double t1 = Timers::now();
  phase([&] {
    write_model_checkpoint(dir_.temp_path(step), world_, place, params, state, deck, layout, pause_midway, end_job);
  });
  const double t2 = Timers::now();
  double read_back = 0;
  phase([&] {
    if (rank_ != 0) return;
    const std::string problem = check_checkpoint_file(dir_.temp_path(step), params, step);
    if (!problem.empty()) throw IoError("the written file does not read back: " + problem);
    read_back = Timers::now() - t2;
    dir_.publish(step);
  });
  written_.push_back(step);
  Written out{dir_.final_path(step), bytes, Timers::now() - t0, t1 - t0 + read_back};
  if (rank_ == 0) dir_.prune(keep_, written_, protect_);
  return out;
}

}  // namespace strata
