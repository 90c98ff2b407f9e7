#include "parallel/splits/whole_tensors.hpp"

#include "kernels/embedding.hpp"
#include "kernels/layernorm.hpp"
#include "kernels/matmul.hpp"

namespace strata {

template <class T, class Y>
void WholeTensors::layernorm_forward(const LayerNormCall<T, Y>& c) const {
  kernels::layernorm_forward<T>(c.y, c.mean, c.rstd, c.x, c.w, c.b);
}
template <class T>
void WholeTensors::layernorm_backward(const LayerNormBackwardCall<T>& c) const {
  kernels::layernorm_backward<T>(c.dx, c.dw, c.db, c.dy, c.x, c.w, c.mean, c.rstd, c.accumulate);
}
template <class T, class X>
void WholeTensors::linear_in_forward(const LinearCall<T, X>& c) const {
  kernels::matmul_forward<T>(c.y, c.x, c.w, c.b, c.precision);
}
template <class T>
void WholeTensors::linear_in_backward_input(const LinearInputCall<T>& c) const {
  kernels::matmul_backward_input<T>(c.dx, c.dy, c.w, c.precision);
}
template <class T, class X>
void WholeTensors::linear_out_forward(const LinearCall<T, X>& c) const {
  linear_in_forward<T, X>(c);  // whole tensors: both kinds of linear are the product
}
template <class T>
void WholeTensors::linear_out_backward_input(const LinearInputCall<T>& c) const {
  linear_in_backward_input<T>(c);
}
template <class T, class X>
void WholeTensors::linear_backward_weight(const LinearWeightCall<T, X>& c) const {
  kernels::matmul_backward_weight<T>(c.dw, c.db, c.dy, c.x, c.precision);
}
template <class T>
void WholeTensors::embedding_forward(const EmbeddingCall<T>& c) const {
  kernels::embedding_forward<T>(c.out, c.tokens, c.wte, c.wpe, c.t_len);
}
template <class T>
void WholeTensors::embedding_backward(const EmbeddingBackwardCall<T>& c) const {
  kernels::embedding_backward<T>(c.dwte, c.dwpe, c.dout, c.tokens, c.t_len);
}
template <class T>
void WholeTensors::head_logits(const HeadLogitsCall<T>& c) const {
  kernels::product<T>(c.precision, "N", "T", c.x, c.wte, T(0), c.logits);  // (BT, C)(C, V) -> (BT, V)
}
template <class T>
void WholeTensors::head_backward_input(const HeadInputCall<T>& c) const {
  kernels::product<T>(c.precision, "N", "N", c.dlogits, c.wte, T(0), c.dx);  // dx = dlogits wte
}
template <class T>
void WholeTensors::head_backward_weight(const HeadWeightCall<T>& c) const {
  kernels::product<T>(c.precision, "T", "N", c.dlogits, c.x, T(1), c.dwte);  // dwte += dlogits^T x  (V, C)
}

STRATA_TENSOR_SPLIT_INSTANTIATE(WholeTensors)

// no traffic
void WholeTensors::loss_sum_traffic(Traffic&) const {}
void WholeTensors::layernorm_forward_traffic(Traffic&, int64_t, int64_t) const {}
void WholeTensors::layernorm_backward_traffic(Traffic&, int64_t, int64_t, int64_t) const {}
void WholeTensors::linear_in_forward_traffic(Traffic&, int64_t, int64_t, int64_t, int64_t) const {}
void WholeTensors::linear_in_backward_traffic(Traffic&, int64_t, int64_t, int64_t, int64_t) const {}
void WholeTensors::linear_out_forward_traffic(Traffic&, int64_t, int64_t, int64_t, int64_t) const {}
void WholeTensors::linear_out_backward_traffic(Traffic&, int64_t, int64_t, int64_t, int64_t) const {}
void WholeTensors::embedding_forward_traffic(Traffic&, int64_t, int64_t, int64_t) const {}
void WholeTensors::embedding_backward_traffic(Traffic&, int64_t, int64_t, int64_t) const {}
void WholeTensors::head_logits_traffic(Traffic&, int64_t, int64_t, int64_t, int64_t) const {}
void WholeTensors::head_backward_traffic(Traffic&, int64_t, int64_t, int64_t, int64_t) const {}
void WholeTensors::cross_entropy_forward_traffic(Traffic&, int64_t, int64_t) const {}
void WholeTensors::gather_rows_traffic(Traffic&, int64_t, int64_t, int64_t) const {}

}  // namespace strata
