#pragma once
// A model's training state <-> one checkpoint file (io/checkpoint_file.hpp).
//
// Layout of the file (h5ls -r shows it):
//   /params/<global name>          float32, the parameter's global shape
//   /optim/adam_m/<global name>    AdamW first moment, same shape
//   /optim/adam_v/<global name>    AdamW second moment, same shape
//   attributes on /: format, step, optim_steps, tokens_seen, seed, val_loss, deck (the
//   resolved TOML), layout (e.g. "data=2"), ranks, sampler
// Every dataset is chunked with a Fletcher32 checksum per chunk.
#include <mpi.h>

#include <string>

#include "core/deck.hpp"
#include "model/param_store.hpp"

namespace strata {

struct TrainingState {
  int64_t step = 0;         // optimizer steps completed
  int64_t optim_steps = 0;  // AdamW's update count (bias correction)
  int64_t tokens_seen = 0;
  double val_loss = 0;      // validation loss at this step (NaN if not computed)
};

// Format 2: the qkv weight is [C, 3, C] and its bias [3, C] (format 1 had [C, 3C], [3C]).
constexpr const char* kCheckpointFormat = "strata-checkpoint-2";

// Collective over comm (every rank of the run). Each rank holds shards (ParamInfo::start,
// count); the ranks that hold the same shard (its tensor-group replicas times the data
// replicas, data_size of them) split its rows between them, so every value is written
// once. If pause_midway, sleeps for a long time after half the tensors (a test hook: a
// test kills the job inside the write). Returns bytes of (global) tensor data.
int64_t write_model_checkpoint(const std::string& path, MPI_Comm comm, int data_rank, int data_size,
                               ParamStore<float>& store, const TrainingState& state, const Deck& deck,
                               const std::string& layout, bool pause_midway = false);

// Reads this rank's shards of a checkpoint into store (any layout may read any checkpoint). Throws
// UserError naming the file and tensor for a missing tensor, a shape that does not match
// the deck's model, or a failed checksum; nothing is modified before all checks passed.
TrainingState read_model_checkpoint(const std::string& path, ParamStore<float>& store);

}  // namespace strata
