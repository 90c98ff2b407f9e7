#pragma once
// The parallel layout: how a run's ranks divide its work. One type, made once from the
// deck (its [parallel] keys and layerpar.levels) and read by everything that needs the
// layout: the deck's rules, the Grid, the memory check, the planner's search and
// predictions (whose candidate layouts are values of it) and the engines. A candidate the
// planner recommends is run by setting the deck's keys to it (layout_overrides).
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/deck_choices.hpp"

namespace strata {

struct Layout {
  // the rank grid: data x pipeline x context x tensor = rank count, the tensor group
  // tensor_rows x tensor_cols (1D, 2D) or tensor_x x tensor_y x tensor_depth (3D)
  int64_t data = 1;
  int64_t pipeline = 1;
  int64_t context = 1;  // ranks a sequence is split over (ring attention, causal load balance)
  ContextMode context_mode = ContextMode::Ring;
  int64_t tensor_rows = 1;
  int64_t tensor_cols = 1;
  TensorMode tensor_mode{};                              // "1d"
  int64_t tensor_x = 1, tensor_y = 1, tensor_depth = 1;  // 3D (AxoNN): the X, Y and depth (Z) groups
  bool tensor_overlap = true;      // 3D: the depth group's gathers and reduce-scatters in flight under the products
  bool sequence_parallel = false;  // 1D: the layer norms' and residual stream's rows split over the tensor group
  int64_t expert = 1;              // ranks of the data group the experts are split over (expert parallelism)
  Placement placement = Placement::Nodes;  // grid coordinates given in node order, or in the launcher's rank order
  CommBackend comm_backend = CommBackend::Mpi;
  double grad_bucket_mb = 4.0;
  GradSum grad_sum = GradSum::Flat;  // the replicas' gradient sum: flat, or node by node
  GradCompression grad_compression = GradCompression::None;  // node by node: what crosses the network
  int64_t powersgd_rank = 4;                                 // grad_compression = "powersgd": the factors' rank
  int64_t micro_batches = 1;
  LayerMethod layer_method = LayerMethod::Pipeline;  // parallel.schedule = "mgrit": MGRIT
  Schedule schedule = Schedule::OneFOneB;            // the pipeline's, otherwise
  int64_t mgrit_levels = 1;                          // MGRIT's levels (the deck's layerpar.levels)
  int64_t virtual_stages = 1;                        // model chunks per pipeline stage (schedule = "interleaved")
  int64_t last_stage_layers = 0;                     // gpt: layers on the last stage, with the head (0: even split)
  Dispatch dispatch = Dispatch::Order;               // a stage's next pass: the schedule's, or the first ready one
  int64_t dispatch_in_flight = 0;                    // ready: micro-batches in flight per stage (0: the schedule's peak)
  bool weight_prediction = true;
  bool measure_staleness = false;
  Recompute recompute = Recompute::None;
  int64_t zero = 0;               // ZeRO stage (0 to 3)
  int64_t zero_prefetch = 1;      // ZeRO-3: the steps of a pass whose gathers are posted ahead
  bool zero_keep_params = false;  // ZeRO-3: gathered units kept from their first use to the update

  bool mgrit() const { return layer_method == LayerMethod::MGRIT; }
  // The tensor keys, each split's as one change: none; 1D over t columns (with or without
  // sequence parallelism); 2D over a q x q grid; 3D over x x y x depth.
  void split_whole();
  void split_columns(int64_t t, bool sequence);
  void split_grid(int64_t q);
  void split_axonn(int64_t x, int64_t y, int64_t depth);
  // The split the tensor group runs: Serial for 1D over one column (a tensor group of one
  // rank), else the mode (2D runs its code path at q = 1 too). parallel/tensor_parallel.hpp
  // makes the split's type from it; the deck's rules and the Grid's groups ask the two
  // below, which tell the keys' groups apart.
  TensorMode tensor_split() const;
  bool tensor_grid() const;   // 2D: tensor_rows x tensor_cols, the grid's rows and columns
  bool tensor_axonn() const;  // 3D: tensor_x x tensor_y x tensor_depth
  int64_t tensor_size() const {
    return tensor_axonn() ? tensor_x * tensor_y * tensor_depth : tensor_rows * tensor_cols;
  }
  int64_t ranks() const { return data * pipeline * context * tensor_size(); }
  int64_t replicas() const { return data * context; }  // the ranks holding the same parameters
};

// parallel.tensor_mode's names, and its choices in a deck (no split is "1d" over one column)
const std::string& to_string(TensorMode m);
std::vector<std::pair<TensorMode, std::string>> tensor_mode_choices();

// The tensor keys' own rules (deck_reading.cpp): a UserError naming the key, from `origin`.
void check_tensor_keys(const Layout& p, const std::string& origin);

// The layout as the logs print it: "data=2 pipeline=2:1f1b:4mb tensor=1d:2".
std::string layout_name(const Layout& p);

}  // namespace strata
