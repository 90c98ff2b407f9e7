#pragma once
// The parallel layout: how a run's ranks divide its work. One type, made once from the
// deck (its [parallel] keys and layerpar.levels) and read by everything that needs the
// layout: the deck's rules, the Grid, the memory check, the planner's search and
// predictions (whose candidate layouts are values of it) and the engines. A candidate the
// planner recommends is run by setting the deck's keys to it (layout_overrides).
#include <cstdint>
#include <string>

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
  TensorMode tensor_mode = TensorMode::OneD;
  int64_t tensor_x = 1, tensor_y = 1, tensor_depth = 1;  // 3D (AxoNN): the X, Y and depth (Z) groups
  bool tensor_overlap = true;      // 3D: the depth group's gathers and reduce-scatters in flight under the products
  bool sequence_parallel = false;  // 1D: the layer norms' and residual stream's rows split over the tensor group
  int64_t expert = 1;              // ranks of the data group the experts are split over (expert parallelism)
  Placement placement = Placement::Nodes;  // grid coordinates given in node order, or in the launcher's rank order
  CommBackend comm_backend = CommBackend::Mpi;
  double grad_bucket_mb = 4.0;
  int64_t micro_batches = 1;
  LayerMethod layer_method = LayerMethod::Pipeline;  // parallel.schedule = "mgrit": MGRIT
  Schedule schedule = Schedule::OneFOneB;            // the pipeline's, otherwise
  int64_t mgrit_levels = 1;                          // MGRIT's levels (the deck's layerpar.levels)
  int64_t virtual_stages = 1;                        // model chunks per pipeline stage (schedule = "interleaved")
  bool weight_prediction = true;
  bool measure_staleness = false;
  Recompute recompute = Recompute::None;
  int64_t zero = 0;               // ZeRO stage (0 to 3)
  int64_t zero_prefetch = 1;      // ZeRO-3: the steps of a pass whose gathers are posted ahead
  bool zero_keep_params = false;  // ZeRO-3: gathered units kept from their first use to the update

  bool mgrit() const { return layer_method == LayerMethod::MGRIT; }
  // The split the tensor group runs: Serial for 1D over one column (a tensor group of one
  // rank), else the mode (2D runs its code path at q = 1 too).
  TensorMode tensor_split() const {
    return tensor_mode == TensorMode::OneD && tensor_cols == 1 ? TensorMode::Serial : tensor_mode;
  }
  int64_t tensor_size() const {
    return tensor_mode == TensorMode::ThreeD ? tensor_x * tensor_y * tensor_depth : tensor_rows * tensor_cols;
  }
  int64_t ranks() const { return data * pipeline * context * tensor_size(); }
  int64_t replicas() const { return data * context; }  // the ranks holding the same parameters
  // The ranks a mixture layer's experts are split over: parallel.expert, times the tensor
  // ranks under a 1D or 3D split (each routes a share of the rows).
  int64_t expert_ranks() const { return expert * (tensor_mode == TensorMode::TwoD ? 1 : tensor_size()); }
};

// The layout as the logs print it: "data=2 pipeline=2:1f1b:4mb tensor=1d:2".
std::string layout_name(const Layout& p);

}  // namespace strata
