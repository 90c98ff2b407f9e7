#include "plan/layout.hpp"

#include "core/deck_reading.hpp"
#include "model/model_kind.hpp"

namespace strata {

std::string plan_name(const Layout& l) {
  const std::string n = layout_name(l);
  if (!l.mgrit()) return n;
  const size_t at = n.find(":mgrit");  // the levels beside the schedule
  return n.substr(0, at + 6) + ":L" + std::to_string(l.mgrit_levels) + n.substr(at + 6);
}

Deck with_layout(const Deck& deck, const Layout& l) {
  Deck d = deck;
  d.parallel = l;
  return d;
}

Layout unsplit_layout(const Deck& deck) {
  Layout l = deck.parallel;
  l.data = l.pipeline = l.context = 1;
  l.context_mode = ContextMode::Ring;
  l.split_whole();
  l.expert = 1;
  l.layer_method = LayerMethod::Pipeline;
  l.schedule = Schedule::OneFOneB;
  l.virtual_stages = l.micro_batches = l.mgrit_levels = 1;
  return l;
}

std::vector<std::string> layout_overrides(const Layout& p) {
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
                                  "parallel.schedule=" + (p.mgrit() ? std::string("mgrit") : to_string(p.schedule)),
                                  "parallel.virtual_stages=" + std::to_string(p.virtual_stages),
                                  "parallel.micro_batches=" + std::to_string(p.micro_batches),
                                  "parallel.recompute=" + to_string(p.recompute),
                                  "parallel.zero=" + std::to_string(p.zero),
                                  "parallel.expert=" + std::to_string(p.expert)};
  out.push_back("layerpar.levels=" + std::to_string(p.mgrit_levels));
  return out;
}

std::vector<std::string> run_overrides(const Deck& deck, const Layout& l) {
  std::vector<std::string> out = layout_overrides(l);
  for (auto& reset : inert_key_resets(with_layout(deck, l), model_deck_keys())) out.push_back(std::move(reset));
  return out;
}

}  // namespace strata
