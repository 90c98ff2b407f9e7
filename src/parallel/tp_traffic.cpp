#include "parallel/tp_traffic.hpp"

// Each declaration is its split's (parallel/splits/).
namespace strata {

void tp_layernorm_forward_traffic(Traffic& out, const TensorParallel& tp, int64_t rows, int64_t e) {
  tp.visit([&](const auto& s) { s.layernorm_forward_traffic(out, rows, e); });
}

void tp_layernorm_backward_traffic(Traffic& out, const TensorParallel& tp, int64_t rows, int64_t c_local, int64_t e) {
  tp.visit([&](const auto& s) { s.layernorm_backward_traffic(out, rows, c_local, e); });
}

void tp_linear_in_forward_traffic(Traffic& out, const TensorParallel& tp, int64_t rows, int64_t in, int64_t out_w,
                                  int64_t e) {
  tp.visit([&](const auto& s) { s.linear_in_forward_traffic(out, rows, in, out_w, e); });
}

void tp_linear_in_backward_traffic(Traffic& out, const TensorParallel& tp, int64_t rows, int64_t in, int64_t out_w,
                                   int64_t e) {
  tp.visit([&](const auto& s) { s.linear_in_backward_traffic(out, rows, in, out_w, e); });
}

void tp_linear_out_forward_traffic(Traffic& out, const TensorParallel& tp, int64_t rows, int64_t in, int64_t out_w,
                                   int64_t e) {
  tp.visit([&](const auto& s) { s.linear_out_forward_traffic(out, rows, in, out_w, e); });
}

void tp_linear_out_backward_traffic(Traffic& out, const TensorParallel& tp, int64_t rows, int64_t in, int64_t out_w,
                                    int64_t e) {
  tp.visit([&](const auto& s) { s.linear_out_backward_traffic(out, rows, in, out_w, e); });
}

void tp_embedding_forward_traffic(Traffic& out, const TensorParallel& tp, int64_t rows, int64_t c, int64_t e) {
  tp.visit([&](const auto& s) { s.embedding_forward_traffic(out, rows, c, e); });
}

void tp_embedding_backward_traffic(Traffic& out, const TensorParallel& tp, int64_t rows, int64_t c, int64_t e) {
  tp.visit([&](const auto& s) { s.embedding_backward_traffic(out, rows, c, e); });
}

void tp_head_logits_traffic(Traffic& out, const TensorParallel& tp, int64_t rows, int64_t c, int64_t v, int64_t e) {
  tp.visit([&](const auto& s) { s.head_logits_traffic(out, rows, c, v, e); });
}

void tp_head_backward_traffic(Traffic& out, const TensorParallel& tp, int64_t rows, int64_t c, int64_t v, int64_t e) {
  tp.visit([&](const auto& s) { s.head_backward_traffic(out, rows, c, v, e); });
}

void tp_cross_entropy_forward_traffic(Traffic& out, const TensorParallel& tp, int64_t rows, int64_t e) {
  tp.visit([&](const auto& s) { s.cross_entropy_forward_traffic(out, rows, e); });
}

void tp_gather_rows_traffic(Traffic& out, const TensorParallel& tp, int64_t rows, int64_t c, int64_t e) {
  tp.visit([&](const auto& s) { s.gather_rows_traffic(out, rows, c, e); });
}

}  // namespace strata
