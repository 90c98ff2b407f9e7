#include "comm/grid.hpp"

#include "comm/int8_across.hpp"
#include "comm/powersgd_across.hpp"

#include <algorithm>

#include "comm/control.hpp"
#include "comm/node_map.hpp"
#include "core/error.hpp"

namespace strata {

Grid::Grid(const Layout& cfg, MPI_Comm parent) : shape_(cfg) {
  int size = 1;
  MPI_Comm_size(parent, &size);
  const bool three_d = cfg.tensor_axonn();
  if (cfg.ranks() != size) {
    const std::string tensor = three_d ? std::to_string(cfg.tensor_x) + " x " + std::to_string(cfg.tensor_y) + " x " +
                                             std::to_string(cfg.tensor_depth)
                                       : std::to_string(cfg.tensor_rows) + " x " + std::to_string(cfg.tensor_cols);
    const std::string layout = std::to_string(cfg.data) + " x " + std::to_string(cfg.pipeline) + " x " +
                               std::to_string(cfg.context) + " x " + tensor;
    throw UserError(std::string("parallel layout data x pipeline x context x ") +
                    (three_d ? "tensor_x x tensor_y x tensor_depth" : "tensor_rows x tensor_cols") + " = " + layout +
                    " = " + std::to_string(cfg.ranks()) + " ranks, but the job has " + std::to_string(size) +
                    (cfg.ranks() == cfg.data ? " (use mpirun -n " + std::to_string(cfg.ranks()) +
                                                   " or --set parallel.data=" + std::to_string(size) + ")"
                                             : " (use mpirun -n " + std::to_string(cfg.ranks()) + ")"));
  }
  const CommBackend backend = cfg.comm_backend;
  // the grid's numbering: node order, or the launcher's (rank 0 stays rank 0 either way)
  const NodeMap nodes = node_map(parent);
  std::vector<int> order(size_t(size), 0);  // grid rank -> parent rank
  for (int i = 0; i < size; ++i) order[size_t(i)] = i;
  if (cfg.placement == Placement::Nodes) order = nodes.by_node();
  int parent_rank = 0;
  MPI_Comm_rank(parent, &parent_rank);
  const int position = int(std::find(order.begin(), order.end(), parent_rank) - order.begin());
  MPI_Comm_split(parent, 0, position, &world_);
  MPI_Comm_dup(world_, &control_);
  MPI_Comm_rank(world_, &world_rank_);
  nodes_ = nodes.nodes();
  nodes_line_ = nodes.describe(order);
  std::vector<int> node_of_grid_rank(size_t(size), 0);
  for (int i = 0; i < size; ++i) {
    node_of_grid_rank[size_t(i)] = nodes.node_of[size_t(order[size_t(i)])];
    reordered_ = reordered_ || order[size_t(i)] != i;
  }
  world_size_ = size;
  rows_ = three_d ? 1 : int(cfg.tensor_rows);
  cols_ = three_d ? int(cfg.tensor_size()) : int(cfg.tensor_cols);
  const int C = cols_, R = rows_, X = int(cfg.context), P = int(cfg.pipeline);
  coords_.col = world_rank_ % C;
  coords_.row = (world_rank_ / C) % R;
  coords_.context = (world_rank_ / (C * R)) % X;
  coords_.pipeline = (world_rank_ / (C * R * X)) % P;
  coords_.data = world_rank_ / (C * R * X * P);
  const auto& g = coords_;
  const int dx = g.data * X + g.context;  // the model replica
  // color = the coordinates the group shares; key = the position along the group's axis
  const auto split = [&](int color, int key, CommBackend b = CommBackend::Mpi) -> std::unique_ptr<Comm> {
    MPI_Comm c = MPI_COMM_NULL;
    MPI_Comm_split(world_, color, key, &c);
    if (c == MPI_COMM_NULL) return nullptr;
    owned_.push_back(c);
    return std::make_unique<Comm>(c, b);
  };
  everyone_ = std::make_unique<Comm>(world_);
  replicas_ = split((g.pipeline * R + g.row) * C + g.col, dx, backend);
  // with a 1D or 3D tensor split the tensor ranks are expert ranks too (each routes its
  // share of the rows): the expert group is then (d % e, c) at the same (d / e, p, x)
  const int E = int(cfg.expert), de = g.data / E;
  const bool tensor_experts = !cfg.tensor_grid() && C > 1;
  const int T = tensor_experts ? C : 1;
  coords_.expert = g.data % E * T + (tensor_experts ? g.col : 0);
  experts_ = split(tensor_experts ? (de * P + g.pipeline) * X + g.context
                                  : (((de * P + g.pipeline) * X + g.context) * R + g.row) * C + g.col,
                   coords_.expert, E * T > 1 ? backend : CommBackend::Mpi);  // the rows go device to device with NCCL
  expert_data_ = split((((de * P + g.pipeline) * X + g.context) * R + g.row) * C + g.col, g.data % E);
  expert_replicas_ = split(((g.data % E * P + g.pipeline) * R + g.row) * C + g.col, de * X + g.context, backend);
  context_ = split(((g.data * P + g.pipeline) * R + g.row) * C + g.col, g.context);
  pipeline_ = split((dx * R + g.row) * C + g.col, g.pipeline);
  pipeline_reversed_ = split((dx * R + g.row) * C + g.col, P - 1 - g.pipeline);
  const int dpx = (g.data * P + g.pipeline) * X + g.context;  // one tensor grid
  row_ = split(dpx * R + g.row, g.col);
  col_ = split(dpx * C + g.col, g.row);
  tensor_ = split(dpx, g.row * C + g.col);
  model_ = split(dx, (g.pipeline * R + g.row) * C + g.col);
  stage_peers_ = cfg.zero >= 2 ? split(g.pipeline, world_rank_) : split(de * P + g.pipeline, world_rank_);
  if (three_d) {
    const int TX = int(cfg.tensor_x), TY = int(cfg.tensor_y), TZ = int(cfg.tensor_depth);
    coords_.x = g.col % TX;
    coords_.y = g.col / TX % TY;
    coords_.depth = g.col / (TX * TY);
    x_ = split((dpx * TZ + g.depth) * TY + g.y, g.x);
    y_ = split((dpx * TZ + g.depth) * TX + g.x, g.y);
    depth_ = split((dpx * TY + g.y) * TX + g.x, g.depth);
  }
  const bool end_stage = P > 1 && (g.pipeline == 0 || g.pipeline == P - 1);
  embedding_ = split(end_stage ? (dx * R + g.row) * C + g.col : MPI_UNDEFINED, g.pipeline);
  if (cfg.grad_sum == GradSum::Nodes && replicas_->size() > 1)
    sum_replicas_by_node(node_of_grid_rank[size_t(world_rank_)]);
  find_node_spans(node_of_grid_rank);
}

// parallel.grad_sum = "nodes": the replicas on this rank's node (in replica order) and those
// at the same place on the other nodes; the replicas' vector sums then go through them.
void Grid::sum_replicas_by_node(int node) {
  MPI_Comm in = MPI_COMM_NULL, across = MPI_COMM_NULL;
  MPI_Comm_split(replicas_->raw(), node, replicas_->rank(), &in);
  int place = 0, here = 1;
  MPI_Comm_rank(in, &place);
  MPI_Comm_size(in, &here);
  MPI_Comm_split(replicas_->raw(), place, replicas_->rank(), &across);
  owned_.push_back(in);
  owned_.push_back(across);
  if (max_over(world_, here) != min_over(world_, here))  // every rank alike, so every rank throws
    throw UserError("parallel.grad_sum = \"nodes\" needs as many data replicas on every node, but the nodes hold " +
                    std::to_string(min_over(world_, here)) + " to " + std::to_string(max_over(world_, here)) +
                    " (start as many ranks on each node, or use grad_sum = \"flat\")");
  replicas_node_ = std::make_unique<Comm>(in);
  replicas_across_ = std::make_unique<Comm>(across);
  if (shape_.grad_compression == GradCompression::Int8) codec_ = std::make_unique<Int8Across>();
  if (shape_.grad_compression == GradCompression::PowerSgd)
    codec_ = std::make_unique<PowerSgdAcross>(int(shape_.powersgd_rank));
  replicas_->sum_by_node(*replicas_node_, *replicas_across_, codec_.get());
}

std::string Grid::across_codec_place(const std::string& layout) const {
  if (!codec_) return "";
  return codec_->name() + " error feedback of " + layout + " on " + std::to_string(world_size_) + " ranks, " +
         std::to_string(replicas_node_->size()) + (replicas_node_->size() == 1 ? " replica" : " replicas") + " a node";
}

// Each reported group kind: across nodes if any of its groups has ranks on two nodes. (Not
// every rank holds every kind, tied_emb only the end stages: a rank without one says -1.)
void Grid::find_node_spans(const std::vector<int>& node_of_grid_rank) {
  static const std::vector<std::string> kinds = {"tensor",       "grid_row", "grid_col", "tensor_x",     "tensor_y",
                                                 "tensor_depth", "context",  "expert",   "expert_peers", "expert_data",
                                                 "pipeline",     "tied_emb", "data",     "data_node",    "data_across"};
  std::vector<double> spans(kinds.size(), -1.0);  // -1: none here; 0 within a node; 1 across
  const int mine = node_of_grid_rank[size_t(world_rank_)];
  for (const auto& [name, c] : named_comms()) {
    const size_t k = size_t(std::find(kinds.begin(), kinds.end(), name) - kinds.begin());
    if (k < kinds.size()) spans[k] = max_over(c->raw(), mine) != min_over(c->raw(), mine) ? 1.0 : 0.0;
  }
  max_over(world_, spans);
  for (size_t k = 0; k < kinds.size(); ++k) {
    if (spans[k] > 0.5) across_.push_back(kinds[k]);
    if (spans[k] == 0.0) within_.push_back(kinds[k]);
  }
}

int Grid::rank_of(const GridCoords& g) const {
  return (((g.data * int(shape_.pipeline) + g.pipeline) * int(shape_.context) + g.context) * rows_ + g.row) * cols_ +
         g.col;
}

std::vector<std::pair<std::string, const Comm*>> Grid::reported_comms() const {
  std::vector<std::pair<std::string, const Comm*>> out;
  for (const auto& [name, c] : named_comms()) out.emplace_back(name, c);
  return out;
}

void Grid::set_trace(TraceRecorder* trace) const {
  for (const auto& [name, c] : named_comms()) c->set_trace(trace, name);
}

std::vector<std::pair<std::string, Comm*>> Grid::named_comms() const {
  std::vector<std::pair<std::string, Comm*>> out = {{"data", replicas_.get()}};
  if (replicas_node_) {
    out.emplace_back("data_node", replicas_node_.get());
    out.emplace_back("data_across", replicas_across_.get());
  }
  if (shape_.pipeline > 1) out.emplace_back("pipeline", pipeline_.get());
  if (embedding_) out.emplace_back("tied_emb", embedding_.get());
  if (experts_->size() > 1) {
    out.emplace_back("expert", experts_.get());
    if (expert_data_->size() != experts_->size()) out.emplace_back("expert_peers", expert_data_.get());
    out.emplace_back("expert_data", expert_replicas_.get());
  }
  if (shape_.context > 1) out.emplace_back("context", context_.get());
  const bool two_d = shape_.tensor_grid();  // even at q = 1: the 2D code path
  if (two_d || cols_ > 1) out.emplace_back("tensor", tensor_.get());
  if (two_d) {
    out.emplace_back("grid_row", row_.get());
    out.emplace_back("grid_col", col_.get());
  }
  if (x_) {
    out.emplace_back("tensor_x", x_.get());
    out.emplace_back("tensor_y", y_.get());
    out.emplace_back("tensor_depth", depth_.get());
  }
  return out;
}

Grid::~Grid() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  for (auto* c :
       {&everyone_, &replicas_, &replicas_node_, &replicas_across_, &experts_, &expert_data_, &expert_replicas_,
        &context_, &pipeline_, &pipeline_reversed_, &tensor_, &row_, &col_, &x_, &y_, &depth_, &model_, &embedding_})
    c->reset();
  for (MPI_Comm& c : owned_) MPI_Comm_free(&c);
  MPI_Comm_free(&control_);
  MPI_Comm_free(&world_);
}

}  // namespace strata
