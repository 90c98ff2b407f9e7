#include "model/lm_head.hpp"

#include <stdexcept>
#include <type_traits>
#include <utility>

#include "kernels/products.hpp"
#include "parallel/tp_layers.hpp"
#include "parallel/tp_traffic.hpp"
#include "parallel/vocab_parallel.hpp"
#include "state/tensor_shard.hpp"

namespace strata {

template <class T>
LMHead<T>::LMHead(ParamStore<T>& store, const TensorParallel& tp, kernels::ProductPrecision precision, int wte_index,
                  int64_t c, int64_t vocab, bool held)
    : store_(store), tp_(tp), precision_(precision), wte_(wte_index), c_(c), vocab_(vocab) {
  const Shard shard = held ? tensor_shard(tp, {c}, -1, -1, 0, Split3D{0, -1, -1}) : not_held({c});
  lnf_w_ = store.add("lnf.weight", {c}, Init::Ones, 0, false, shard);
  lnf_b_ = store.add("lnf.bias", {c}, Init::Zeros, 0, false, shard);
}

template <class T>
double LMHead<T>::forward(const BlockContext& ctx, V2<const T> x, V1<const int32_t> targets, LMHeadCache<T>& k,
                          const UnitHooks* units, V2<T> chunk) const {
  const auto& s = store_;
  // the logits block has as many vocabulary columns as the wte shard has rows
  const int split = tp_.row_split();
  const int64_t v_local = s.infos()[wte_].count[0];
  k.ensure(ctx.rows(), split, x.extent(1), v_local);
  k.x_in = x;
  k.targets = targets;
  if (units) {
    if (!tp_.traits().whole_activations)
      throw std::logic_error("LMHead: vocabulary chunks under a 2D or 3D split or sequence parallelism");
    units->step();
    tp_layernorm_forward<T>(tp_, c_, k.lnf, k.lnf_mean, k.lnf_rstd, x, s.param(lnf_w_), s.param(lnf_b_));
    for (const auto& [r0, r1] : vocab_chunks(v_local, units->chunk_rows)) {  // (BT, C)(C, V_chunk)
      units->step();
      const V2<T> part(chunk.data(), k.logits.extent(0), r1 - r0);
      kernels::product<T>(precision_, "N", "T", k.lnf, s.param_rows(wte_, r0, r1), T(0), part);
      Kokkos::deep_copy(Kokkos::subview(k.logits, Kokkos::ALL, std::make_pair(r0, r1)), part);
    }
  } else if (split > 1) {  // the layer norm on this rank's rows, the logits on every row
    tp_layernorm_forward<T>(tp_, c_, k.lnf_local, k.lnf_mean, k.lnf_rstd, x, s.param(lnf_w_), s.param(lnf_b_));
    tp_gather_rows<T>(tp_, k.lnf, k.lnf_local);
  } else {
    tp_layernorm_forward<T>(tp_, c_, k.lnf, k.lnf_mean, k.lnf_rstd, x, s.param(lnf_w_), s.param(lnf_b_));
  }
  if (!units) tp_head_logits<T>(tp_, precision_, k.logits, k.lnf, s.param2(wte_));  // (BT, C')(C', V') -> (BT, V')
  if (store_.infos()[wte_].shape[0] > vocab_) tp_mask_padded_logits<T>(tp_, k.logits, vocab_);
  return tp_cross_entropy_forward<T>(tp_, k.losses, k.lse, k.logits, targets);
}

template <class T>
void LMHead<T>::backward_input(T dloss_scale, V2<T> dx, V2<T> dlnf, LMHeadCache<T>& k, V2<T> rows) const {
  tp_cross_entropy_backward<T>(tp_, k.logits, k.lse, k.targets, dloss_scale);  // logits := dlogits
  backward_from_dlogits(dx, dlnf, k, rows);
}

template <class T>
void LMHead<T>::backward_from_dlogits(V2<T> dx, V2<T> dlnf, LMHeadCache<T>& k, V2<T> rows) const {
  const auto& s = store_;
  tp_head_backward_input<T>(tp_, precision_, dlnf, k.logits, s.param2(wte_), rows);
  tp_layernorm_backward<T>(tp_, c_, dx, s.grad(lnf_w_), s.grad(lnf_b_), dlnf, k.x_in, s.param(lnf_w_), k.lnf_mean,
                           k.lnf_rstd, false);
}

template <class T>
void LMHead<T>::backward_weight(LMHeadCache<T>& k) const {
  tp_head_backward_weight<T>(tp_, precision_, store_.grad2(wte_), k.logits, k.lnf);
}

template <class T>
void LMHead<T>::backward(T dloss_scale, V2<T> dx, V2<T> dlnf, LMHeadCache<T>& k, V2<T> rows, const UnitHooks* units,
                         V2<T> chunk) const {
  if (units) {
    backward_chunks(dloss_scale, dx, dlnf, k, *units, chunk);
    return;
  }
  // the dlogits rounded once for both products; where only products that look them up read
  // them (no 2D or 3D split: SUMMA and the depth group's blocks read the floats), the
  // cross-entropy writes them into the copy as bf16 only (the logits stay in the cache)
  const auto dlogits_once = kernels::round_for_pass(precision_, k.logits.data(), int64_t(k.logits.size()));
  if constexpr (std::is_same_v<T, float>) {
    if (dlogits_once && tp_.traits().bf16_dlogits) {
      tp_cross_entropy_backward_bf16(tp_, dlogits_once->fill(), k.logits, k.lse, k.targets, dloss_scale);
      backward_from_dlogits(dx, dlnf, k, rows);
      backward_weight(k);
      return;
    }
  }
  backward_input(dloss_scale, dx, dlnf, k, rows);  // the copy made at the first product that reads it
  backward_weight(k);
}

// Each chunk's dlogits copied out of the cache's, then dlnf += dlogits_chunk wte_chunk and
// dwte_chunk += dlogits_chunk^T lnf(x); the sum over the vocabulary in chunks, last first.
template <class T>
void LMHead<T>::backward_chunks(T dloss_scale, V2<T> dx, V2<T> dlnf, LMHeadCache<T>& k, const UnitHooks& units,
                                V2<T> chunk) const {
  const auto& s = store_;
  tp_cross_entropy_backward<T>(tp_, k.logits, k.lse, k.targets, dloss_scale);  // logits := dlogits
  const auto chunks = vocab_chunks(s.infos()[wte_].count[0], units.chunk_rows);
  for (size_t j = chunks.size(); j-- > 0;) {
    const auto [r0, r1] = chunks[j];
    units.step();
    const V2<T> part(chunk.data(), k.logits.extent(0), r1 - r0);
    Kokkos::deep_copy(part, Kokkos::subview(k.logits, Kokkos::ALL, std::make_pair(r0, r1)));
    kernels::product<T>(precision_, "N", "N", V2<const T>(part), s.param_rows(wte_, r0, r1),
                        T(j + 1 == chunks.size() ? 0 : 1), dlnf);
    kernels::product<T>(precision_, "T", "N", V2<const T>(part), V2<const T>(k.lnf), T(1), s.grad_rows(wte_, r0, r1));
    units.done(int(j));
  }
  if (Comm* vocab = tp_.vocab_comm()) vocab->allreduce_sum(V1<T>(dlnf.data(), dlnf.size()));
  units.step();
  tp_layernorm_backward<T>(tp_, c_, dx, s.grad(lnf_w_), s.grad(lnf_b_), dlnf, k.x_in, s.param(lnf_w_), k.lnf_mean,
                           k.lnf_rstd, false);
}

template <class T>
int64_t LMHead<T>::product_stack_elements(int64_t rows) const {
  if (!std::is_same_v<T, float> || precision_.type != Precision::BF16 || !precision_.round_once ||
      !kernels::RoundedCopy::pays())
    return 0;
  const auto n = [](int64_t values) { return kernels::ProductWorkspace::stack_elements(values); };
  const int64_t c = store_.infos()[lnf_w_].count[0], v = store_.infos()[wte_].count[0];
  if (tp_.traits().head_multiplies_moved_blocks)  // the dlogits' copy, and SUMMA's blocks: dlogits with wte or x
    return 2 * n(rows * v) + std::max(n(v * c), n(rows * c));
  return n(rows * v) + n(rows * c);  // dlogits (copied or rounded) with x for dwte += dlogits^T x
}

template <class T>
void LMHead<T>::traffic(const BlockContext& ctx, Traffic& out) const {
  const auto& wte = store_.infos()[wte_];
  const int64_t n = ctx.rows(), c = store_.infos()[lnf_w_].count[0], v = wte.count[0], e = sizeof(T);
  tp_layernorm_forward_traffic(out, tp_, n, e);
  tp_head_logits_traffic(out, tp_, n, c, v, e);
  tp_cross_entropy_forward_traffic(out, tp_, n, e);
  tp_head_backward_traffic(out, tp_, n, c, v, e);
  tp_layernorm_backward_traffic(out, tp_, n, c, e);
}

template struct LMHeadCache<float>;
template struct LMHeadCache<double>;
template class LMHead<float>;
template class LMHead<double>;

}  // namespace strata
