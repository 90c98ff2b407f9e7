#pragma once
// A model's training state <-> one checkpoint file (io/checkpoint_file.hpp).
//
// Layout of the file (h5ls -r shows it):
//   /params/<global name>          float32, the parameter's global shape
//   /optim/adam_m/<global name>    AdamW first moment, same shape
//   /optim/adam_v/<global name>    AdamW second moment, same shape
//   attributes on /: format, step, optim_steps, tokens_seen, seed, val_loss, deck (the
//   resolved TOML), layout (e.g. "data=2"), ranks, sampler, init_from (what model.init_from
//   read at step 0, carried through restarts; absent when the run started from its seed),
//   engine (the engine's decisions a restart continues with, e.g. MGRIT's gradient control
//   "switched at step 120"; absent when there are none), grad_compression (where the codec
//   state below is valid; absent without parallel.grad_compression)
//   /comm/grad_compression         float32 [ranks, n]: each rank's codec state (TrainState)
// Every dataset is chunked with a Fletcher32 checksum per chunk.
#include <functional>
#include <string>

#include "comm/mpi_handle.hpp"
#include "core/deck.hpp"
#include "state/param_store.hpp"

namespace strata {

struct TrainState {
  int64_t step = 0;         // optimizer steps completed
  int64_t optim_steps = 0;  // AdamW's update count (bias correction)
  int64_t tokens_seen = 0;
  double val_loss = 0;    // validation loss at this step (NaN if not computed)
  std::string deck;       // read_model_checkpoint: the resolved deck the checkpoint was written with
  std::string tokenizer;  // the data's SentencePiece model, as /tokenizer/model ("": none)
  std::string init_from;  // where the run's first weights came from (model.init_from; "": its seed)
  std::string engine;     // what the engine decided that a restart continues with (TrainEngine::checkpoint_state)
  // parallel.grad_compression's state (comm/across_codec.hpp): where it is valid
  // (Grid::across_codec_place; "": none) and, written, this rank's values; the file holds
  // them as /comm/grad_compression [ranks, the longest rank's values], a row per rank
  // (zero-padded), and the place as the attribute grad_compression
  std::string codec_place;
  std::vector<float> codec_state;
};

// The SentencePiece model a checkpoint carries ("" when it has none: byte-level or random
// data, or a checkpoint older than the dataset). Throws UserError when it is corrupt.
std::string read_checkpoint_tokenizer(const std::string& path);

// Format 2: the qkv weight is [C, 3, C] and its bias [3, C] (format 1 had [C, 3C], [3C]).
constexpr const char* kCheckpointFormat = "strata-checkpoint-2";

// Which of the ranks that hold the same values this one is: among the replicas (the data
// x context ranks of its stage and tensor coordinates), and among the expert replicas
// (those that hold the same experts: the replicas without expert parallelism).
struct ReplicaPlace {
  int rank = 0, size = 1;
  int expert_rank = 0, expert_size = 1;
};

// Collective over comm (every rank of the run). Each rank holds shards (ParamInfo::start,
// count); the ranks that hold the same shard (its tensor-group replicas times the data
// replicas, or for an expert's parameter its expert replicas: `place`) split its rows between them, so every value is
// written once; with ZeRO-1 each data rank writes the moments it keeps (ParamStore::shard_moments). If pause_midway,
// sleeps for a long time after half the tensors (--inject-fault pause-checkpoint: a rehearsal or a test kills the job inside the write). Returns bytes of
// (global) tensor data. A failed flush or close throws IoError on the ranks that saw it, after every collective call
// was made (the caller agrees on the outcome and discards the file); a failed tensor or attribute write calls
// on_write_failure (CheckpointWriter says why it cannot be agreed).
int64_t write_model_checkpoint(const std::string& path, MPI_Comm comm, const ReplicaPlace& place,
                               ParamStore<float>& store, const TrainState& state, const Deck& deck,
                               const std::string& layout, bool pause_midway = false,
                               const std::function<void(const std::string&)>& on_write_failure = nullptr);

// Reads this rank's shards of a checkpoint into store (any layout may read any checkpoint;
// with ZeRO-1 each rank reads the moments of its block). Throws
// UserError naming the file and tensor for a missing tensor, a shape that does not match
// the deck's model, or a failed checksum; nothing is modified before all checks passed.
TrainState read_model_checkpoint(const std::string& path, ParamStore<float>& store);

// This rank's row of a checkpoint's /comm/grad_compression (its codec state, padded), read
// by this rank alone; empty where the file has none. Throws UserError on a failed checksum.
std::vector<float> read_codec_state(const std::string& path, int rank);

// model.init_from of a strata checkpoint: reads this rank's shards of its /params only
// (its moments, step and sampler are not wanted), after checking every shape against
// store's and its deck's model.n_head against n_head. Returns "step N of a run of layout L".
std::string read_checkpoint_params(const std::string& path, ParamStore<float>& store, int64_t n_head);

// Checks, without reading tensor data, that path is a complete checkpoint of this
// format with every tensor store declares, in its global shape, and (step >= 0) of that
// step. Returns "" when it is, else why not (one phrase). Any rank may call it alone.
std::string check_checkpoint_file(const std::string& path, const ParamStore<float>& store, int64_t step = -1);

// Bytes of a checkpoint of store's model (tensor data; HDF5's own metadata comes on top).
int64_t checkpoint_bytes(const ParamStore<float>& store);

}  // namespace strata
