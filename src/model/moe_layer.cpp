#include "model/moe_layer.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <stdexcept>

#include "kernels/gelu.hpp"
#include "kernels/matmul.hpp"
#include "kernels/moe.hpp"
#include "kernels/moe_routing.hpp"
#include "kernels/residual.hpp"
#include "parallel/row_buffers.hpp"
#include "state/tensor_shard.hpp"

namespace strata {

namespace {
// The experts' row counts (the tokens routed to each) change at every step: their bf16
// products take them at run time (ProductWorkspace::RowsVary) while this lives.
std::unique_ptr<kernels::ProductWorkspace::RowsVary> rows_vary(const kernels::ProductPrecision& precision) {
  if (precision.type != Precision::BF16 || !precision.workspace) return nullptr;
  return std::make_unique<kernels::ProductWorkspace::RowsVary>(*precision.workspace);
}

}  // namespace

template <class T>
int64_t MoeCache<T>::bytes() const {
  const auto& r = routing;
  return view_bytes(xe, h, hg, yk, x_rows, r.probs, r.lse, r.expert, r.gate, r.row, r.send_token,
                    r.exchange.recv_place);
}

template <class T>
MoeLayer<T>::MoeLayer(ParamStore<T>& store, const TensorParallel& tp, const ExpertParallel& ep, const TokenPlace& place,
                      const ModelConfig& cfg, kernels::ProductPrecision precision, const std::string& prefix,
                      double std, double proj_std, bool held)
    : store_(store), tp_(tp), shared_(tp, cfg.n_embd), peers_(tp.size() > 1 ? tp.group() : nullptr), ep_(ep),
      place_(place), precision_(precision), c_(cfg.n_embd), f_(cfg.expert_hidden()), experts_(cfg.moe_experts),
      local_experts_(cfg.moe_experts / ep.size), top_k_(cfg.moe_top_k), capacity_factor_(cfg.moe_capacity_factor),
      aux_alpha_(cfg.moe_aux_loss), z_beta_(cfg.moe_z_loss), exchange_(ep, cfg.moe_experts, cfg.n_embd) {
  if (!tp.divisions().refuses_experts.empty())
    throw std::logic_error("MoeLayer: a tensor split that takes no experts");
  const auto expert_shard = [&](std::vector<int64_t> shape) {
    Shard s = held ? Shard{} : not_held(shape);
    if (held) {
      s.start.assign(shape.size(), 0);
      s.count = shape;
      s.start[0] = ep.rank * local_experts_;
      s.count[0] = local_experts_;
    }
    s.expert = true;
    return s;
  };
  const Shard router = held ? tensor_shard(tp, {c_, experts_}, -1, -1, -1) : not_held({c_, experts_});  // replicated
  router_ = store.add(prefix + "moe.router.weight", {c_, experts_}, Init::Normal, std, true, router);
  fc_w_ = store.add(prefix + "moe.fc.weight", {experts_, c_, f_}, Init::Normal, std, true,
                    expert_shard({experts_, c_, f_}));
  fc_b_ = store.add(prefix + "moe.fc.bias", {experts_, f_}, Init::Zeros, 0, false, expert_shard({experts_, f_}));
  proj_w_ = store.add(prefix + "moe.proj.weight", {experts_, f_, c_}, Init::Normal, proj_std, true,
                      expert_shard({experts_, f_, c_}));
  proj_b_ = store.add(prefix + "moe.proj.bias", {experts_, c_}, Init::Zeros, 0, false, expert_shard({experts_, c_}));
  reset_load();
}

template <class T>
double MoeLayer<T>::route(const BlockContext& ctx, V2<const T> x, MoeRouting<T>& r, bool count_load) const {
  const int64_t n = x.extent(0), k = top_k_;
  if (int64_t(r.probs.extent(0)) != n) {
    r.probs = Tensor2<T>("moe.probs", n, experts_);
    r.lse = Tensor1<T>("moe.lse", n);
    r.expert = Tensor2<int32_t>("moe.expert", n, k);
    r.gate = Tensor2<T>("moe.gate", n, k);
    r.row = Tensor2<int32_t>("moe.row", n, k);
  }
  kernels::router_forward<T>(r.probs, r.lse, x, store_.param2(router_));
  Kokkos::fence();
  const auto hp = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), r.probs);
  const auto hlse = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), r.lse);
  auto he = Kokkos::create_mirror_view(r.expert);
  auto hg = Kokkos::create_mirror_view(r.gate);
  const std::vector<int64_t> assigned = kernels::choose_top_k<T>(hp, he, hg, top_k_);
  // f_i over the global micro-batch: the assignments summed over the ranks that hold it
  const std::vector<int64_t> global = summed_over_routing_ranks(assigned);
  const int64_t tokens = int64_t(place_.data_size) * ctx.batch * ctx.seq_len * place_.context_size;
  r.aux.assign(size_t(experts_), 0.0);
  for (int64_t i = 0; i < experts_; ++i)
    r.aux[size_t(i)] = aux_alpha_ * double(experts_) * double(global[size_t(i)]) / (double(tokens) * double(k));
  // these rows' auxiliary losses, per unit of the loss scale
  double aux = 0;
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t i = 0; i < experts_; ++i) aux += r.aux[size_t(i)] * double(hp(t, i));
    aux += z_beta_ * double(hlse(t)) * double(hlse(t));
  }
  int64_t dropped_global = 0;
  const std::vector<char> kept = kept_within_capacity(ctx, he, global, tokens, dropped_global);
  if (count_load) {
    for (int64_t i = 0; i < experts_; ++i) load_.assigned[size_t(i)] += global[size_t(i)];
    load_.dropped += dropped_global;
    for (char kept_one : kept) dropped_here_ += kept_one ? 0 : 1;
  }
  const std::vector<int64_t> per_expert =
      kernels::dispatch_order(he, kept, experts_, r.row, r.send_token, r.dispatched);
  exchange_.count(per_expert, r.dispatched, r.exchange);
  Kokkos::deep_copy(r.expert, he);
  Kokkos::deep_copy(r.gate, hg);
  return aux;
}

template <class T>
std::vector<int64_t> MoeLayer<T>::summed_over_routing_ranks(std::vector<int64_t> counts) const {
  if (peers_) peers_->allreduce_sum(counts);  // the tensor ranks' shares of the rows
  if (ep_.tokens) ep_.tokens->allreduce_sum(counts);
  return counts;
}

// Capacity: each assignment's rank among its expert's, in the order (slot, sequence of the
// global micro-batch, chunk of the sequence, position), from a table of counts per (slot,
// sequence, chunk, tensor part, expert) summed over the ranks.
template <class T>
std::vector<char> MoeLayer<T>::kept_within_capacity(const BlockContext& ctx, const HostRows<int32_t>& he,
                                                    const std::vector<int64_t>& global, int64_t tokens,
                                                    int64_t& dropped_global) const {
  const int64_t n = he.extent(0), E = experts_, k = top_k_;
  if (capacity_factor_ <= 0) return std::vector<char>(size_t(n * k), 1);
  const int64_t cap = int64_t(std::ceil(capacity_factor_ * double(tokens) * double(k) / double(E)));
  const int64_t X = place_.context_size, chunks = X == 1 ? 1 : 2 * X, half = ctx.seq_len / 2;
  const int64_t sequences = int64_t(place_.data_size) * ctx.batch;
  // a tensor rank's rows are [part N/t, (part+1) N/t) of the replica's (3D: of the depth
  // rank's): (chunk, part) orders them as (chunk, position) does
  const int64_t row0 = shared_.part() * (ctx.rows() / shared_.parts());
  const auto key = [&](int64_t t, int64_t j) {
    const int64_t b = (row0 + t) / ctx.seq_len, p = (row0 + t) % ctx.seq_len;
    const int64_t chunk = X == 1 ? 0 : p < half ? place_.context_rank : 2 * X - 1 - place_.context_rank;
    return ((j * sequences + place_.data_rank * ctx.batch + b) * chunks + chunk) * shared_.parts() + shared_.part();
  };
  std::vector<int64_t> table(size_t(k * sequences * chunks * shared_.parts() * E), 0);
  for (int64_t j = 0; j < k; ++j)
    for (int64_t t = 0; t < n; ++t) ++table[size_t(key(t, j) * E + he(t, j))];
  std::vector<char> kept = kernels::kept_within_capacity(he, summed_over_routing_ranks(std::move(table)), E, cap, key);
  for (int64_t i = 0; i < E; ++i) dropped_global += std::max<int64_t>(0, global[size_t(i)] - cap);
  return kept;
}

template <class T>
double MoeLayer<T>::forward(const BlockContext& ctx, V2<const T> x, V2<T> out, MoeCache<T>& k, bool count_load) const {
  if (!shared_.shared()) return forward_rows(ctx, x, out, k, count_load);
  // this tensor rank's share of the rows, then every rank's outputs
  const int64_t n = x.extent(0), rows = n / shared_.parts(), C = c_;
  V2<const T> in = as_matrix(shared_.whole_rows(x).data() + shared_.part() * rows * C, rows, C);
  if (shared_.joins_columns()) {  // kept for the backward (the whole rows are scratch)
    ensure_row_capacity(k.x_rows, "moe.x_rows", rows, C);
    Kokkos::deep_copy(leading_rows(k.x_rows, rows), in);
    in = leading_rows(k.x_rows, rows);
  }
  ensure_row_capacity(slice_, "moe.slice", rows, C);
  const V2<T> mine = leading_rows(slice_, rows);
  const double aux = forward_rows(ctx, in, mine, k, count_load);
  shared_.gather(mine, out);
  return aux;
}

template <class T>
double MoeLayer<T>::forward_rows(const BlockContext& ctx, V2<const T> x, V2<T> out, MoeCache<T>& k,
                                 bool count_load) const {
  auto& r = k.routing;
  const double aux = route(ctx, x, r, count_load);
  const int64_t S = r.dispatched, R = r.exchange.received, C = c_, F = f_;
  ensure_row_capacity(k.xe, "moe.xe", R, C);
  ensure_row_capacity(k.h, "moe.h", R, F);
  ensure_row_capacity(k.hg, "moe.hg", R, F);
  ensure_row_capacity(k.yk, "moe.yk", S, C);
  const V2<T> xe = leading_rows(k.xe, R), yk = leading_rows(k.yk, S);
  if (ep_.active()) {
    ensure_row_capacity(send_, "moe.send", S, C);
    ensure_row_capacity(work_, "moe.work", R, C);
    kernels::gather_rows<T>(leading_rows(send_, S), x, r.send_token);
    exchange_.to_experts(leading_rows(send_, S), xe, r.exchange);
  } else {
    kernels::gather_rows<T>(xe, x, r.send_token);
  }
  const V2<T> ye = ep_.active() ? leading_rows(work_, R) : yk;
  const auto vary = rows_vary(precision_);
  int64_t o = 0;
  for (int64_t l = 0; l < local_experts_; ++l) {
    const int64_t rows = r.exchange.expert_rows[size_t(l)];
    if (rows > 0) {
      const V2<T> xl = as_matrix(xe.data() + o * C, rows, C), hl = as_matrix(k.h.data() + o * F, rows, F);
      const V2<T> gl = as_matrix(k.hg.data() + o * F, rows, F), yl = as_matrix(ye.data() + o * C, rows, C);
      const ExpertWeights w = expert_params(l);
      kernels::matmul_forward<T>(hl, xl, w.fc_w, w.fc_b, precision_);
      kernels::gelu_forward<T>(values_of(gl), values_of(V2<const T>(hl)));
      kernels::matmul_forward<T>(yl, gl, w.proj_w, w.proj_b, precision_);
    }
    o += rows;
  }
  if (ep_.active()) exchange_.from_experts(ye, yk, r.exchange);
  kernels::combine_rows<T>(out, yk, r.row, r.gate);
  return aux;
}

template <class T>
typename MoeLayer<T>::ExpertWeights MoeLayer<T>::expert_slices(int64_t l, bool grads) const {
  const int64_t C = c_, F = f_;
  const auto flat = [&](int i) { return grads ? store_.grad(i) : store_.param(i); };
  return {as_matrix(flat(fc_w_).data() + l * C * F, C, F), as_matrix(flat(proj_w_).data() + l * F * C, F, C),
          V1<T>(flat(fc_b_).data() + l * F, F), V1<T>(flat(proj_b_).data() + l * C, C)};
}

template <class T>
void MoeLayer<T>::backward(V2<const T> x, V2<const T> dout, V2<T> dx, T dloss_scale, MoeCache<T>& k) const {
  if (!shared_.shared()) return backward_rows(x, dout, dx, dloss_scale, k);
  const int64_t rows = dout.extent(0) / shared_.parts(), C = c_, at = shared_.part() * rows * C;
  const V2<const T> in =
      shared_.joins_columns() ? V2<const T>(leading_rows(k.x_rows, rows)) : as_matrix(x.data() + at, rows, C);
  ensure_row_capacity(slice_, "moe.slice", rows, C);
  const V2<T> mine = leading_rows(slice_, rows);
  backward_rows(in, as_matrix(shared_.whole_rows(dout).data() + at, rows, C), mine, dloss_scale, k);
  shared_.gather(mine, dx);
}

template <class T>
void MoeLayer<T>::backward_rows(V2<const T> x, V2<const T> dout, V2<T> dx, T dloss_scale, MoeCache<T>& k) const {
  auto& r = k.routing;
  const int64_t n = x.extent(0), S = r.dispatched, R = r.exchange.received, C = c_, F = f_;
  ensure_row_capacity(send_, "moe.send", S, C);
  const V2<T> dyk = leading_rows(send_, S);
  Tensor2<T> dgate(Kokkos::view_alloc(Kokkos::WithoutInitializing, "moe.dgate"), n, top_k_);
  kernels::combine_backward<T>(dgate, dyk, dout, leading_rows(k.yk, S), r.row, r.gate);
  V2<T> dye = dyk;
  if (ep_.active()) {
    ensure_row_capacity(work_, "moe.work", R, C);
    dye = leading_rows(work_, R);
    exchange_.to_experts(dyk, dye, r.exchange);
  }
  const V2<T> xe = leading_rows(k.xe, R);
  const auto vary = rows_vary(precision_);
  int64_t o = 0;
  for (int64_t l = 0; l < local_experts_; ++l) {
    const int64_t rows = r.exchange.expert_rows[size_t(l)];
    if (rows > 0) {
      const V2<T> xl = as_matrix(xe.data() + o * C, rows, C), hl = as_matrix(k.h.data() + o * F, rows, F);
      const V2<T> gl = as_matrix(k.hg.data() + o * F, rows, F), dyl = as_matrix(dye.data() + o * C, rows, C);
      const ExpertWeights w = expert_params(l), dw = expert_grads(l);
      kernels::matmul_backward_weight<T>(dw.proj_w, dw.proj_b, dyl, gl, precision_);
      kernels::matmul_backward_input<T>(gl, dyl, w.proj_w, precision_);  // hg := dL/d(hg)
      kernels::gelu_backward<T>(values_of(gl), values_of(V2<const T>(hl)), values_of(V2<const T>(gl)));  // hg := dL/dh
      kernels::matmul_backward_weight<T>(dw.fc_w, dw.fc_b, gl, xl, precision_);
      kernels::matmul_backward_input<T>(xl, gl, w.fc_w, precision_);  // xe := dL/d(xe)
    }
    o += rows;
  }
  V2<T> dxk = xe;
  if (ep_.active()) {
    dxk = dyk;
    exchange_.from_experts(xe, dxk, r.exchange);
  }
  kernels::sum_expert_rows<T>(dx, dxk, r.row);
  // the router: its probabilities' gradients to the logits, then to Wr and x
  Tensor1<T> aux("moe.aux", size_t(experts_));
  auto ha = Kokkos::create_mirror_view(aux);
  for (int64_t i = 0; i < experts_; ++i) ha(i) = T(r.aux[size_t(i)] * double(dloss_scale));
  Kokkos::deep_copy(aux, ha);
  Tensor2<T> dlogits(Kokkos::view_alloc(Kokkos::WithoutInitializing, "moe.dlogits"), n, experts_);
  kernels::router_backward<T>(dlogits, r.probs, r.lse, r.expert, r.gate, dgate, aux,
                              T(2.0 * z_beta_ * double(dloss_scale)), top_k_ > 1);
  kernels::product<T>(Precision::FP32, "N", "T", dlogits, store_.param2(router_), T(1), dx);
  if (peers_) {  // this micro-batch's router gradient from every tensor rank's rows
    if (router_grad_.extent(0) != size_t(c_)) router_grad_ = Tensor2<T>("moe.router_grad", c_, experts_);
    Kokkos::deep_copy(router_grad_, T(0));
    kernels::matmul_backward_weight<T>(router_grad_, V1<T>(), dlogits, x, Precision::FP32);
    peers_->allreduce_sum(V1<T>(router_grad_.data(), router_grad_.size()));
    kernels::residual_accumulate<T>(store_.grad(router_), V1<const T>(router_grad_.data(), router_grad_.size()));
  } else {
    kernels::matmul_backward_weight<T>(store_.grad2(router_), V1<T>(), dlogits, x, Precision::FP32);
  }
}

template <class T>
void MoeLayer<T>::traffic(const BlockContext& ctx, Traffic& out, bool forward) const {
  const int64_t n = ctx.rows() / shared_.parts(), es = int64_t(sizeof(T));  // n: the rows this rank routes
  const int peers = tp_.size();
  if (peers > 1) {  // the tensor group: the routing statistics, the router's gradient
    const int64_t chunks = place_.context_size == 1 ? 1 : 2 * place_.context_size;
    if (forward) out.add("tensor", "allreduce", Collective::AllReduce, peers, experts_ * int64_t(sizeof(int64_t)));
    if (forward && capacity_factor_ > 0)
      out.add("tensor", "allreduce", Collective::AllReduce, peers,
              top_k_ * place_.data_size * ctx.batch * chunks * shared_.parts() * experts_ * int64_t(sizeof(int64_t)));
    if (!forward) out.add("tensor", "allreduce", Collective::AllReduce, peers, c_ * experts_ * es);
  }
  shared_.traffic(out, ctx.rows(), es);
  if (forward && ep_.token_ranks > 1) {
    const int ranks = ep_.token_ranks;
    out.add("data", "allreduce", Collective::AllReduce, ranks, experts_ * int64_t(sizeof(int64_t)));
    if (capacity_factor_ > 0) {
      const int64_t chunks = place_.context_size == 1 ? 1 : 2 * place_.context_size;
      out.add("data", "allreduce", Collective::AllReduce, ranks,
              top_k_ * place_.data_size * ctx.batch * chunks * shared_.parts() * experts_ * int64_t(sizeof(int64_t)));
    }
  }
  exchange_.traffic(out, n * top_k_, forward);  // every assignment, at a balanced routing
}

template <class T>
int64_t MoeLayer<T>::cache_bytes_for(const BlockContext& ctx) const {
  // the assignments a rank's experts take: N k at a balanced routing, with a capacity
  // factor f > 1 up to f N k (the margin the capacity allows an expert above its share)
  const int64_t n = ctx.rows() / shared_.parts(), es = int64_t(sizeof(T)), E = experts_,
                k = top_k_;  // the rows this rank routes
  const int64_t a = int64_t(std::ceil(double(n * k) * std::max(1.0, capacity_factor_)));
  // probs, lse, expert, gate, row; send_token, recv_place; xe, h, hg, yk; x_rows
  return n * E * es + n * es + n * k * (4 + es + 4) + a * 4 * 2 + (a * c_ * 2 + a * f_ * 2) * es +
         (shared_.joins_columns() ? n * c_ * es : 0);
}

template struct MoeCache<float>;
template struct MoeCache<double>;
template class MoeLayer<float>;
template class MoeLayer<double>;

}  // namespace strata
