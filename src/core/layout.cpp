#include "core/layout.hpp"

#include "core/error.hpp"

namespace strata {

namespace {
const std::vector<std::pair<TensorMode, std::string>>& tensor_mode_names() {
  static const std::vector<std::pair<TensorMode, std::string>> names = {
      {TensorMode::Serial, "serial"}, {TensorMode::OneD, "1d"}, {TensorMode::TwoD, "2d"}, {TensorMode::ThreeD, "3d"}};
  return names;
}
}  // namespace

const std::string& to_string(TensorMode m) { return name_in(tensor_mode_names(), m); }

std::vector<std::pair<TensorMode, std::string>> tensor_mode_choices() {
  return {tensor_mode_names().begin() + 1, tensor_mode_names().end()};
}

void Layout::split_whole() { split_columns(1, false); }

void Layout::split_columns(int64_t t, bool sequence) {
  tensor_mode = TensorMode::OneD;
  tensor_rows = tensor_x = tensor_y = tensor_depth = 1;
  tensor_cols = t;
  sequence_parallel = sequence;
}

void Layout::split_grid(int64_t q) {
  split_whole();
  tensor_mode = TensorMode::TwoD;
  tensor_rows = tensor_cols = q;
}

void Layout::split_axonn(int64_t x, int64_t y, int64_t depth) {
  split_whole();
  tensor_mode = TensorMode::ThreeD;
  tensor_x = x, tensor_y = y, tensor_depth = depth;
}

TensorMode Layout::tensor_split() const {
  return tensor_mode == TensorMode::OneD && tensor_cols == 1 ? TensorMode::Serial : tensor_mode;
}
bool Layout::tensor_grid() const { return tensor_mode == TensorMode::TwoD; }
bool Layout::tensor_axonn() const { return tensor_mode == TensorMode::ThreeD; }

void check_tensor_keys(const Layout& p, const std::string& origin) {
  const auto check = [&](bool ok, const std::string& key, const std::string& why) {
    if (!ok) throw UserError(origin + ": " + key + " " + why);
  };
  const std::string grid = std::to_string(p.tensor_rows) + " x " + std::to_string(p.tensor_cols);
  if (p.tensor_axonn())  // (tensor_x, tensor_y, ... act only with "3d": deck_keys.cpp)
    check(p.tensor_rows == 1 && p.tensor_cols == 1, "parallel.tensor_rows",
          "and tensor_cols must be 1 for tensor_mode = \"3d\" (got " + grid +
              "; its groups are tensor_x, tensor_y and tensor_depth)");
  if (p.tensor_grid())
    check(p.tensor_rows == p.tensor_cols, "parallel.tensor_cols",
          "must equal tensor_rows for tensor_mode = \"2d\": the grid " + grid + " is not square");
  else if (!p.tensor_axonn())
    check(p.tensor_rows == 1, "parallel.tensor_rows",
          "must be 1 for tensor_mode = \"1d\" (got " + grid + "; t is tensor_cols)");
  if (p.sequence_parallel && p.tensor_split() != TensorMode::OneD)
    throw UserError(origin + ": parallel.sequence_parallel applies to tensor_mode = \"1d\" with tensor_cols > 1" +
                    (p.tensor_grid()
                         ? std::string(": the 2D split keeps every activation in (batch / q) x (C / q) blocks "
                                       "already, with no region replicated over the tensor group to split")
                     : p.tensor_axonn() ? std::string(": the 3D split keeps the residual stream in (batch / depth) x "
                                                      "(C / x) blocks already")
                                        : std::string(": without a tensor split no region is replicated")));
}

std::string layout_name(const Layout& p) {
  std::string s = "data=" + std::to_string(p.data);
  if (p.mgrit()) {
    s += " pipeline=" + std::to_string(p.pipeline) + ":mgrit";
  } else if (p.pipeline > 1) {
    s += " pipeline=" + std::to_string(p.pipeline) + ":" + to_string(p.schedule);
    if (p.schedule == Schedule::Interleaved) s += ":v" + std::to_string(p.virtual_stages);
    s += ":" + std::to_string(p.micro_batches) + "mb";
    if (p.last_stage_layers > 0) s += ":last" + std::to_string(p.last_stage_layers);
  } else if (p.micro_batches > 1) {
    s += ":" + std::to_string(p.micro_batches) + "mb";  // gradient accumulation
  }
  if (p.context > 1)
    s += " context=" + std::to_string(p.context) + (p.context_mode == ContextMode::AllToAll ? ":a2a" : "");
  if (p.tensor_grid())
    s += " tensor=2d:" + std::to_string(p.tensor_rows) + "x" + std::to_string(p.tensor_cols);
  else if (p.tensor_axonn())
    s += " tensor=3d:" + std::to_string(p.tensor_x) + "x" + std::to_string(p.tensor_y) + "x" +
         std::to_string(p.tensor_depth);
  else if (p.tensor_cols > 1)
    s += " tensor=1d:" + std::to_string(p.tensor_cols) + (p.sequence_parallel ? ":sp" : "");
  if (p.recompute != Recompute::None) s += " recompute=" + to_string(p.recompute);
  if (p.expert > 1) s += " expert=" + std::to_string(p.expert);
  if (p.zero > 0) s += " zero=" + std::to_string(p.zero);
  if (p.grad_sum == GradSum::Nodes)
    s += " sum=nodes" +
         (p.grad_compression == GradCompression::None ? std::string() : ":" + to_string(p.grad_compression)) +
         (p.grad_compression == GradCompression::PowerSgd ? std::to_string(p.powersgd_rank) : "");
  return s;
}

}  // namespace strata
