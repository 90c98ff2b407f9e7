#include "plan/layout.hpp"

#include <algorithm>
#include <tuple>

#include "core/error.hpp"

namespace strata {

std::string Layout::name() const {
  const std::string n = layout_name(applied_to(Deck{}).parallel);
  if (!mgrit) return n;
  const size_t at = n.find(":mgrit");  // the levels beside the schedule
  return n.substr(0, at + 6) + ":L" + std::to_string(levels) + n.substr(at + 6);
}

Deck Layout::applied_to(const Deck& deck) const {
  Deck d = deck;
  auto& p = d.parallel;
  p.data = data;
  p.pipeline = pipeline;
  p.context = context;
  p.context_mode = context > 1 ? context_mode : ContextMode::Ring;  // (acts only with a context split)
  p.tensor_mode = tensor == TensorMode::TwoD || tensor == TensorMode::ThreeD ? tensor : TensorMode::OneD;
  p.tensor_rows = tensor == TensorMode::TwoD ? q : 1;
  p.tensor_cols = tensor == TensorMode::TwoD ? q : tensor == TensorMode::OneD ? t : 1;
  const bool three_d = tensor == TensorMode::ThreeD;
  p.tensor_x = three_d ? tx : 1;
  p.tensor_y = three_d ? ty : 1;
  p.tensor_depth = three_d ? tz : 1;
  p.sequence_parallel = sequence && tensor == TensorMode::OneD;
  p.schedule = schedule;
  p.virtual_stages = schedule == Schedule::Interleaved ? virtual_stages : 1;
  p.micro_batches = micro_batches;
  p.recompute = recompute;
  p.zero = zero;
  p.expert = expert;
  p.layer_method = mgrit ? LayerMethod::MGRIT : LayerMethod::Pipeline;
  if (mgrit) d.layerpar.levels = levels;
  return d;
}

Layout layout_of(const Deck& deck) {
  const auto& p = deck.parallel;
  Layout l;
  l.data = int(p.data);
  l.pipeline = int(p.pipeline);
  l.context = int(p.context);
  l.context_mode = p.context_mode;
  if (p.tensor_mode == TensorMode::TwoD) {
    l.tensor = TensorMode::TwoD;
    l.q = int(p.tensor_rows);
  } else if (p.tensor_mode == TensorMode::ThreeD) {
    l.tensor = TensorMode::ThreeD;
    l.tx = int(p.tensor_x), l.ty = int(p.tensor_y), l.tz = int(p.tensor_depth);
  } else if (p.tensor_cols > 1) {
    l.tensor = TensorMode::OneD;
    l.t = int(p.tensor_cols);
    l.sequence = p.sequence_parallel;
  }
  l.schedule = p.schedule;
  l.virtual_stages = int(p.virtual_stages);
  l.micro_batches = int(p.micro_batches);
  l.recompute = p.recompute;
  l.zero = int(p.zero);
  l.expert = int(p.expert);
  l.mgrit = p.mgrit();
  l.levels = l.mgrit ? int(deck.layerpar.levels) : 1;
  return l;
}

std::vector<std::string> Layout::overrides() const {
  const Deck d = applied_to(Deck{});
  const auto& p = d.parallel;
  std::vector<std::string> out = {"parallel.data=" + std::to_string(p.data),
                                  "parallel.pipeline=" + std::to_string(p.pipeline),
                                  "parallel.context=" + std::to_string(p.context),
                                  "parallel.context_mode=" + to_string(p.context_mode),
                                  "parallel.tensor_mode=" + to_string(p.tensor_mode),
                                  "parallel.tensor_rows=" + std::to_string(p.tensor_rows),
                                  "parallel.tensor_cols=" + std::to_string(p.tensor_cols),
                                  "parallel.tensor_x=" + std::to_string(p.tensor_x),
                                  "parallel.tensor_y=" + std::to_string(p.tensor_y),
                                  "parallel.tensor_depth=" + std::to_string(p.tensor_depth),
                                  std::string("parallel.sequence_parallel=") + (p.sequence_parallel ? "true" : "false"),
                                  "parallel.schedule=" + (mgrit ? std::string("mgrit") : to_string(p.schedule)),
                                  "parallel.virtual_stages=" + std::to_string(p.virtual_stages),
                                  "parallel.micro_batches=" + std::to_string(p.micro_batches),
                                  "parallel.recompute=" + to_string(p.recompute),
                                  "parallel.zero=" + std::to_string(p.zero),
                                  "parallel.expert=" + std::to_string(p.expert)};
  if (mgrit) out.push_back("layerpar.levels=" + std::to_string(levels));
  return out;
}

}  // namespace strata
