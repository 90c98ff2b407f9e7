#pragma once
// The run's modes as enums, parsed once from the deck (deck_keys.cpp) and passed as values
// from there on: the pipeline schedule, the tensor split, the products' precision.
#include <string>
#include <utility>
#include <vector>

namespace strata {

// How the ranks along the layer axis (parallel.pipeline) work through the model: the
// pipeline schedules (engine/pipeline/schedule.hpp generates their instruction lists:
// GPipe, 1F1B, interleaved 1F1B, the zero-bubble ZB-H1 and ZB-H2, XPipe), or MGRIT, which solves the
// residual network's layers like time steps (engine/layerpar/).
enum class Schedule { GPipe, OneFOneB, Interleaved, ZBH1, ZBH2, XPipe, MGRIT };
// How one model replica's layers are split over its tensor group (parallel/tensor_parallel.hpp):
// Serial is no split; the deck selects OneD (Megatron) or TwoD (Optimus).
enum class TensorMode { Serial, OneD, TwoD };

// The precision of the matrix products: fp32, or bf16 operands with fp32 accumulation
// (parameters, gradients and everything else stay fp32).
enum class Precision { FP32, BF16 };

// What the backward recomputes instead of keeping from the forward: nothing; (selective)
// the attention probabilities and the MLP's GELU output, whose memory grows with T^2 and
// 4C per token, from the activations they were made of; or (full) every block's forward,
// from the block's input, which is all a block keeps.
enum class Recompute { None, Selective, Full };

// Each value with the name the deck and the logs use.
inline const std::vector<std::pair<Schedule, std::string>>& schedule_names() {
  static const std::vector<std::pair<Schedule, std::string>> names = {
      {Schedule::GPipe, "gpipe"}, {Schedule::OneFOneB, "1f1b"},  {Schedule::Interleaved, "interleaved"},
      {Schedule::ZBH1, "zb-h1"},  {Schedule::ZBH2, "zb-h2"},     {Schedule::XPipe, "xpipe"},
      {Schedule::MGRIT, "mgrit"}};
  return names;
}
// The schedules that run the backward as two halves (input, then weight gradients).
inline bool splits_backward(Schedule s) { return s == Schedule::ZBH1 || s == Schedule::ZBH2; }
// The schedules that are instruction lists (all but MGRIT).
inline bool is_pipeline_schedule(Schedule s) { return s != Schedule::MGRIT; }
inline const std::vector<std::pair<TensorMode, std::string>>& tensor_mode_names() {
  static const std::vector<std::pair<TensorMode, std::string>> names = {
      {TensorMode::Serial, "serial"}, {TensorMode::OneD, "1d"}, {TensorMode::TwoD, "2d"}};
  return names;
}

inline const std::vector<std::pair<Precision, std::string>>& precision_names() {
  static const std::vector<std::pair<Precision, std::string>> names = {{Precision::FP32, "fp32"},
                                                                         {Precision::BF16, "bf16"}};
  return names;
}

inline const std::vector<std::pair<Recompute, std::string>>& recompute_names() {
  static const std::vector<std::pair<Recompute, std::string>> names = {{Recompute::None, "none"},
                                                                         {Recompute::Selective, "selective"},
                                                                         {Recompute::Full, "full"}};
  return names;
}

template <class E>
const std::string& name_in(const std::vector<std::pair<E, std::string>>& names, E value) {
  for (const auto& [v, name] : names)
    if (v == value) return name;
  return names.front().second;  // unreachable for a complete table
}
inline const std::string& to_string(Schedule s) { return name_in(schedule_names(), s); }
inline const std::string& to_string(TensorMode m) { return name_in(tensor_mode_names(), m); }
inline const std::string& to_string(Precision p) { return name_in(precision_names(), p); }
inline const std::string& to_string(Recompute r) { return name_in(recompute_names(), r); }

}  // namespace strata
