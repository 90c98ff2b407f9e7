#pragma once
// Every choice key of the deck as an enum, with the names the deck and the logs use:
// parsed once, in the key table (deck_keys.cpp), and passed as values from there on.
#include <string>
#include <utility>
#include <vector>

namespace strata {

// What data.kind reads: bytes of text files, token shards, uniform random tokens (a
// language model's); IDX image files (an image classifier's).
enum class DataKind { Text, Tokens, Random, Images };
// Which library sums vectors over ranks (parallel.comm_backend): MPI, or NCCL in the GPU
// build (scalars and control messages stay on MPI).
enum class CommBackend { Mpi, Nccl };
// How the data replicas' gradients are summed (parallel.grad_sum): one all-reduce over all
// of them, or node by node (a reduce-scatter inside each node, an all-reduce of the shards
// across the nodes, an all-gather inside each node: comm/node_aware_sum.hpp).
enum class GradSum { Flat, Nodes };
// What crosses the network in the sum node by node (parallel.grad_compression): the
// gradients' floats, 8-bit codes with error feedback (comm/int8_across.hpp), or rank-r
// factors of each matrix with error feedback (comm/powersgd_across.hpp).
enum class GradCompression { None, Int8, PowerSgd };
// What a step with a non-finite loss or gradient norm does (run.on_nonfinite).
enum class OnNonfinite { Stop, Skip };
// MGRIT's relaxation on the finest level (layerpar.relaxation): F, or F then C then F.
enum class Relaxation { F, FCF };
// layerpar.control: what layer-parallel training does once its inexact gradients hurt
enum class GradientControl { None, Switch, Tighten };
// The SentencePiece model strata tokenize trains (data.tokenizer_type).
enum class TokenizerType { BPE, Unigram };

// How the ranks along the layer axis (parallel.pipeline) work through the model: as a
// pipeline, by a schedule's instruction lists, or by MGRIT, which solves the residual
// network's layers like time steps (engine/layer_parallel/). The deck names both in one key,
// parallel.schedule ("mgrit" or a schedule's name).
enum class LayerMethod { Pipeline, MGRIT };
// The pipeline schedules (engine/pipeline/schedule.hpp generates their instruction lists):
// GPipe, 1F1B, interleaved 1F1B, the zero-bubble ZB-H1 and ZB-H2, XPipe.
enum class Schedule { GPipe, OneFOneB, Interleaved, ZBH1, ZBH2, XPipe };
// How a pipeline stage picks its next pass (engine/pipeline/ready_dispatch.hpp): the
// schedule's order (Order), or the highest-ranked pass of it whose inputs have arrived
// (Ready: readiness-first, the schedule a hint).
enum class Dispatch { Order, Ready };
inline const std::vector<std::pair<Dispatch, std::string>>& dispatch_names() {
  static const std::vector<std::pair<Dispatch, std::string>> names = {{Dispatch::Order, "order"},
                                                                      {Dispatch::Ready, "ready"}};
  return names;
}
// How [variability] draws a pass's injected slowdown (engine/pipeline/pass_delays.hpp):
// uniform in [slowdown_min, slowdown_max], or spikes (slowdown_max with spike_chance,
// else none).
enum class SlowdownDraw { Uniform, Spikes };
inline const std::vector<std::pair<SlowdownDraw, std::string>>& slowdown_draw_names() {
  static const std::vector<std::pair<SlowdownDraw, std::string>> names = {{SlowdownDraw::Uniform, "uniform"},
                                                                          {SlowdownDraw::Spikes, "spikes"}};
  return names;
}
// How one model replica's layers are split over its tensor group (parallel/tensor_parallel.hpp):
// Serial is no split; the deck selects OneD (Megatron) or TwoD (Optimus).
// (named in core/layout.cpp, where the deck's tensor keys are read, and
// parallel/tensor_parallel.cpp, where the split is made; OneD first: a Layout's default)
enum class TensorMode { OneD, TwoD, ThreeD, Serial };

// How context parallelism runs attention: keys and values round a ring (Ring), or an
// all-to-all from sequence-split to head-split and back (AllToAll, DeepSpeed-Ulysses).
// parallel.placement: how ranks take their grid coordinates
enum class Placement { Nodes, Launcher };
inline const std::vector<std::pair<Placement, std::string>>& placement_names() {
  static const std::vector<std::pair<Placement, std::string>> names = {{Placement::Nodes, "nodes"},
                                                                       {Placement::Launcher, "launcher"}};
  return names;
}

enum class ContextMode { Ring, AllToAll };
inline const std::vector<std::pair<ContextMode, std::string>>& context_mode_names() {
  static const std::vector<std::pair<ContextMode, std::string>> names = {{ContextMode::Ring, "ring"},
                                                                         {ContextMode::AllToAll, "all-to-all"}};
  return names;
}

// The precision of the matrix products: fp32, or bf16 operands with fp32 accumulation
// (parameters, gradients and everything else stay fp32).
enum class Precision { FP32, BF16 };

// What the backward recomputes instead of keeping from the forward: nothing; (selective)
// the MLP's GELU output, 4C per token, from its input (the fused attention keeps only its
// output and a logsumexp per row, nothing worth remaking); or (full) every block's
// forward, from the block's input, which is all a block keeps.
enum class Recompute { None, Selective, Full };

// Each value with the name the deck and the logs use.
inline const std::vector<std::pair<Schedule, std::string>>& schedule_names() {
  static const std::vector<std::pair<Schedule, std::string>> names = {
      {Schedule::GPipe, "gpipe"}, {Schedule::OneFOneB, "1f1b"}, {Schedule::Interleaved, "interleaved"},
      {Schedule::ZBH1, "zb-h1"},  {Schedule::ZBH2, "zb-h2"},    {Schedule::XPipe, "xpipe"}};
  return names;
}
// The schedules that run the backward as two halves (input, then weight gradients).
inline bool splits_backward(Schedule s) { return s == Schedule::ZBH1 || s == Schedule::ZBH2; }

inline const std::vector<std::pair<Precision, std::string>>& precision_names() {
  static const std::vector<std::pair<Precision, std::string>> names = {{Precision::FP32, "fp32"},
                                                                       {Precision::BF16, "bf16"}};
  return names;
}

inline const std::vector<std::pair<Recompute, std::string>>& recompute_names() {
  static const std::vector<std::pair<Recompute, std::string>> names = {
      {Recompute::None, "none"}, {Recompute::Selective, "selective"}, {Recompute::Full, "full"}};
  return names;
}

inline const std::vector<std::pair<DataKind, std::string>>& data_kind_names() {
  static const std::vector<std::pair<DataKind, std::string>> names = {{DataKind::Text, "text"},
                                                                      {DataKind::Tokens, "tokens"},
                                                                      {DataKind::Random, "random"},
                                                                      {DataKind::Images, "images"}};
  return names;
}
inline const std::vector<std::pair<CommBackend, std::string>>& comm_backend_names() {
  static const std::vector<std::pair<CommBackend, std::string>> names = {{CommBackend::Mpi, "mpi"},
                                                                         {CommBackend::Nccl, "nccl"}};
  return names;
}
inline const std::vector<std::pair<GradSum, std::string>>& grad_sum_names() {
  static const std::vector<std::pair<GradSum, std::string>> names = {{GradSum::Flat, "flat"},
                                                                     {GradSum::Nodes, "nodes"}};
  return names;
}
inline const std::vector<std::pair<GradCompression, std::string>>& grad_compression_names() {
  static const std::vector<std::pair<GradCompression, std::string>> names = {
      {GradCompression::None, "none"}, {GradCompression::Int8, "int8"}, {GradCompression::PowerSgd, "powersgd"}};
  return names;
}
inline const std::vector<std::pair<OnNonfinite, std::string>>& on_nonfinite_names() {
  static const std::vector<std::pair<OnNonfinite, std::string>> names = {{OnNonfinite::Stop, "stop"},
                                                                         {OnNonfinite::Skip, "skip"}};
  return names;
}
inline const std::vector<std::pair<Relaxation, std::string>>& relaxation_names() {
  static const std::vector<std::pair<Relaxation, std::string>> names = {{Relaxation::F, "F"}, {Relaxation::FCF, "FCF"}};
  return names;
}
inline const std::vector<std::pair<TokenizerType, std::string>>& tokenizer_type_names() {
  static const std::vector<std::pair<TokenizerType, std::string>> names = {{TokenizerType::BPE, "bpe"},
                                                                           {TokenizerType::Unigram, "unigram"}};
  return names;
}

template <class E>
const std::string& name_in(const std::vector<std::pair<E, std::string>>& names, E value) {
  for (const auto& [v, name] : names)
    if (v == value) return name;
  return names.front().second;  // unreachable for a complete table
}
inline const std::string& to_string(Schedule s) { return name_in(schedule_names(), s); }
inline const std::string& to_string(Dispatch d) { return name_in(dispatch_names(), d); }
inline const std::string& to_string(ContextMode m) { return name_in(context_mode_names(), m); }
inline const std::string& to_string(Precision p) { return name_in(precision_names(), p); }
inline const std::string& to_string(Recompute r) { return name_in(recompute_names(), r); }
inline const std::string& to_string(DataKind k) { return name_in(data_kind_names(), k); }
inline const std::string& to_string(CommBackend b) { return name_in(comm_backend_names(), b); }
inline const std::string& to_string(GradSum g) { return name_in(grad_sum_names(), g); }
inline const std::string& to_string(GradCompression g) { return name_in(grad_compression_names(), g); }
inline const std::string& to_string(OnNonfinite o) { return name_in(on_nonfinite_names(), o); }
inline const std::string& to_string(Relaxation r) { return name_in(relaxation_names(), r); }
inline const std::vector<std::pair<GradientControl, std::string>>& gradient_control_names() {
  static const std::vector<std::pair<GradientControl, std::string>> names = {
      {GradientControl::None, "none"}, {GradientControl::Switch, "switch"}, {GradientControl::Tighten, "tighten"}};
  return names;
}
inline const std::string& to_string(GradientControl c) { return name_in(gradient_control_names(), c); }
inline const std::string& to_string(TokenizerType t) { return name_in(tokenizer_type_names(), t); }

}  // namespace strata
