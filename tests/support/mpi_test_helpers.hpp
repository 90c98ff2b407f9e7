#pragma once
// Helpers shared by the MPI equivalence tests: ranks, quiet trainer options, layout
// descriptions, deterministic token batches and differences of gathered parameters.
#include <mpi.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "core/deck.hpp"
#include "core/deck_reading.hpp"
#include "core/tensor.hpp"
#include "engine/data_parallel.hpp"
#include "model/gpt.hpp"
#include "model/model_kind.hpp"
#include "model/resnet.hpp"
#include "support/test_images.hpp"
#include "train/run_loop.hpp"
#include "train/train_job.hpp"

namespace strata {

// A training run as `strata train` makes one: the job, then the loop over it.
class Training {
 public:
  Training(const Deck& deck, MPI_Comm world, TrainOptions opts = {})
      : deck_(deck), opts_(std::move(opts)), job_(deck_, world, opts_.job) {}
  TrainResult run() { return RunLoop(deck_, opts_, job_).run(); }
  TrainJob& job() { return job_; }
  StageModel<float>& model() { return job_.model(); }
  const Grid& grid() const { return job_.grid(); }
  ParamStore<float>& params() { return job_.params(); }

 private:
  Deck deck_;
  TrainOptions opts_;
  TrainJob job_;
};

namespace test {

inline int world_size() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}
inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

// The small fortunes GPT the MPI tests train (2 layers, C=32, 4 heads, T=16, global
// batch 8, AdamW with warmup, cosine decay and clipping), with overrides on top
// ("section.key=value", as --set takes them).
inline Deck small_gpt_deck(const std::vector<std::string>& overrides) {
  const std::string text = R"(
[model]
n_layer = 2
n_embd = 32
n_head = 4
vocab_size = 256
seq_len = 16
[data]
files = ["/usr/share/games/fortunes/*"]
batch_size = 8
[optim]
lr = 3e-3
min_lr = 3e-4
warmup_steps = 3
grad_clip = 0.5
)";
  return parse_model_deck(text, "test deck", overrides);
}

// 6 dense steps of width 16 (or 3x3 convolutions of 2 channels), batch 12, 6 steps with
// two evaluations; exact backpropagation (no MGRIT).
inline Deck small_resnet_deck(const std::vector<std::string>& overrides) {
  const std::string text = R"(
[run]
steps = 6
val_every = 3
val_batches = 1
seed = 9
[model]
kind = "resnet"
steps = 6
width = 16
t_final = 2.0
init_std = 0.1
step_init_std = 0.2
[data]
kind = "images"
batch_size = 12
[optim]
lr = 3e-3
min_lr = 3e-4
warmup_steps = 2
grad_clip = 1.0
)";
  std::vector<std::string> with_data = {"data.dir=" + test_image_dir()};
  with_data.insert(with_data.end(), overrides.begin(), overrides.end());
  return parse_model_deck(text, "resnet test deck", with_data);
}

// No printing, no GEMM probe; outputs (run directory, checkpoints) only when asked.
inline TrainOptions quiet(bool outputs = false, const std::string& restart = "") {
  TrainOptions o;
  o.job.print = false;
  o.job.probe_gemm = false;
  o.write_outputs = outputs;
  o.restart = restart;
  return o;
}

inline std::string describe(const std::vector<std::string>& overrides) {
  std::string s;
  for (const auto& o : overrides) s += (s.empty() ? "" : " ") + o;
  return s;
}

// max |a_i - b_i| / |b_i|: how far a loss sequence strays from a reference one.
inline double max_rel_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]) / std::abs(b[i]));
  return m;
}
inline double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}
// A parallel run against the serial one (Catch2 checks): the same number of steps and
// validations, the validation losses equal to relative val_eps and the accuracies
// exactly; returns the largest relative difference of their training losses.
inline double compare_runs(const TrainResult& r, const TrainResult& ser, double val_eps = 3e-7) {
  REQUIRE(r.losses.size() == ser.losses.size());
  double worst = 0;
  for (size_t s = 0; s < r.losses.size(); ++s)
    worst = std::max(worst, std::abs(r.losses[s] - ser.losses[s]) / ser.losses[s]);
  REQUIRE(r.val.size() == ser.val.size());
  for (size_t s = 0; s < r.val.size(); ++s) CHECK(r.val[s].second == Approx(ser.val[s].second).epsilon(val_eps));
  REQUIRE(r.accuracy.size() == ser.accuracy.size());
  for (size_t s = 0; s < r.accuracy.size(); ++s) CHECK(r.accuracy[s].second == ser.accuracy[s].second);
  return worst;
}

inline double max_abs(const std::vector<double>& a) {
  double m = 0;
  for (double x : a) m = std::max(m, std::abs(x));
  return m;
}

// n tokens and n targets in [0, vocab), a fixed pattern, on the device.
inline std::pair<Tensor1<int32_t>, Tensor1<int32_t>> pattern_tokens(int64_t n, int64_t vocab) {
  Tensor1<int32_t> tokens("tokens", n), targets("targets", n);
  auto ht = Kokkos::create_mirror_view(tokens), hg = Kokkos::create_mirror_view(targets);
  for (int64_t i = 0; i < n; ++i) {
    ht(i) = int32_t((i * 7 + 3) % vocab);
    hg(i) = int32_t((i * 11 + 5) % vocab);
  }
  Kokkos::deep_copy(tokens, ht);
  Kokkos::deep_copy(targets, hg);
  return {tokens, targets};
}

}  // namespace test
}  // namespace strata
