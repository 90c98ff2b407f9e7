#include "core/layout.hpp"

namespace strata {

std::string layout_name(const Layout& p) {
  std::string s = "data=" + std::to_string(p.data);
  if (p.mgrit()) {
    s += " pipeline=" + std::to_string(p.pipeline) + ":mgrit";
  } else if (p.pipeline > 1) {
    s += " pipeline=" + std::to_string(p.pipeline) + ":" + to_string(p.schedule);
    if (p.schedule == Schedule::Interleaved) s += ":v" + std::to_string(p.virtual_stages);
    s += ":" + std::to_string(p.micro_batches) + "mb";
  } else if (p.micro_batches > 1) {
    s += ":" + std::to_string(p.micro_batches) + "mb";  // gradient accumulation
  }
  if (p.context > 1)
    s += " context=" + std::to_string(p.context) + (p.context_mode == ContextMode::AllToAll ? ":a2a" : "");
  if (p.tensor_mode == TensorMode::TwoD)
    s += " tensor=2d:" + std::to_string(p.tensor_rows) + "x" + std::to_string(p.tensor_cols);
  else if (p.tensor_mode == TensorMode::ThreeD)
    s += " tensor=3d:" + std::to_string(p.tensor_x) + "x" + std::to_string(p.tensor_y) + "x" +
         std::to_string(p.tensor_depth);
  else if (p.tensor_cols > 1)
    s += " tensor=1d:" + std::to_string(p.tensor_cols) + (p.sequence_parallel ? ":sp" : "");
  if (p.recompute != Recompute::None) s += " recompute=" + to_string(p.recompute);
  if (p.expert > 1) s += " expert=" + std::to_string(p.expert);
  if (p.zero > 0) s += " zero=" + std::to_string(p.zero);
  return s;
}

}  // namespace strata
