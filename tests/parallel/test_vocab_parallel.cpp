// The vocabulary end under 1D (t = all ranks) and 2D (q = 2 on 4 ranks) against the serial
// kernels, operator by operator, in double precision with sizes B*T = 30 (6 x 5), C = 12,
// vocab 40: embedding output and its wte/wpe gradients; tied-head logits; the
// vocabulary-parallel cross-entropy's losses, log-sum-exp and dlogits; the head's input
// gradient and wte gradient.
#include <mpi.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "comm/grid.hpp"
#include "kernels/cross_entropy.hpp"
#include "kernels/embedding.hpp"
#include "kernels/gemm.hpp"
#include "parallel/vocab_parallel.hpp"
#include "support/host_views.hpp"
#include "support/mpi_test_helpers.hpp"

using namespace strata;
using namespace strata::test;

namespace {

constexpr int64_t kB = 6, kT = 5, kN = kB * kT, kC = 12, kV = 40;

// rows [r0, r0 + nr) x cols [c0, c0 + nc) of a row-major (rows x cols) host matrix
std::vector<double> slab(const std::vector<double>& m, int64_t cols, int64_t r0, int64_t nr, int64_t c0, int64_t nc) {
  std::vector<double> out(size_t(nr * nc));
  for (int64_t r = 0; r < nr; ++r)
    for (int64_t c = 0; c < nc; ++c) out[size_t(r * nc + c)] = m[size_t((r0 + r) * cols + c0 + c)];
  return out;
}

std::vector<double> host(const Tensor1<double>& t) { return to_host<double>(t); }

}  // namespace

TEST_CASE("vocabulary-parallel embedding, tied head and cross-entropy equal serial", "[mpi][vocab_parallel]") {
  const int n = world_size();
  // serial reference, on every rank
  const auto wte = random_vector<double>(size_t(kV * kC), 1), wpe = random_vector<double>(size_t(kT * kC), 2);
  const auto x = random_vector<double>(size_t(kN * kC), 3), dout = random_vector<double>(size_t(kN * kC), 4);
  const auto [tokens, targets] = pattern_tokens(kN, kV);
  const double scale = 1.0 / double(kN);
  Tensor1<double> d_wte = to_device(wte), d_wpe = to_device(wpe), d_x = to_device(x), d_dout = to_device(dout);
  Tensor1<double> emb("emb", kN * kC), dwte_e("dwte_e", kV * kC), dwpe("dwpe", kT * kC), logits("logits", kN * kV),
      losses("losses", kN), lse("lse", kN), dx("dx", kN * kC), dwte_h("dwte_h", kV * kC);
  kernels::embedding_forward<double>(mat(emb, kN, kC), tokens, mat(d_wte, kV, kC), mat(d_wpe, kT, kC), kT);
  kernels::embedding_backward<double>(mat(dwte_e, kV, kC), mat(dwpe, kT, kC), mat(d_dout, kN, kC), tokens, kT);
  kernels::gemm<double>("N", "T", 1.0, mat(d_x, kN, kC), mat(d_wte, kV, kC), 0.0, mat(logits, kN, kV));
  kernels::cross_entropy_forward<double>(losses, lse, mat(logits, kN, kV), targets);
  kernels::cross_entropy_backward<double>(mat(logits, kN, kV), mat(logits, kN, kV), lse, targets, scale);
  kernels::gemm<double>("N", "N", 1.0, mat(logits, kN, kV), mat(d_wte, kV, kC), 0.0, mat(dx, kN, kC));
  kernels::gemm<double>("T", "N", 1.0, mat(logits, kN, kV), mat(d_x, kN, kC), 0.0, mat(dwte_h, kV, kC));
  const auto s_emb = host(emb), s_dwte_e = host(dwte_e), s_dwpe = host(dwpe), s_dlogits = host(logits),
             s_losses = host(losses), s_lse = host(lse), s_dx = host(dx), s_dwte_h = host(dwte_h);

  std::vector<std::string> modes = {"1d"};
  if (n == 4) modes.push_back("2d");
  for (const auto& mode : modes) {
    Layout pc;
    pc.tensor_mode = mode == "2d" ? TensorMode::TwoD : TensorMode::OneD;
    pc.tensor_rows = mode == "2d" ? 2 : 1;
    pc.tensor_cols = mode == "2d" ? 2 : n;
    Grid grid(pc, MPI_COMM_WORLD);
    Comm &group = grid.tensor(), &row = grid.tensor_row(), &col = grid.tensor_col();
    const bool two_d = mode == "2d";
    const int i = grid.coords().row, j = grid.coords().col;
    // (1D even on one rank: the 1D code path)
    const TensorParallel tp = two_d ? TensorParallel(OptimusSplit{&group, &row, &col, 2, i, j})
                                    : TensorParallel(ColumnSplit{&group, n, j, false});
    // this rank's rows, hidden columns, wte rows (embedding) and logits columns (head)
    const int64_t nr = two_d ? kN / 2 : kN, r0 = two_d ? i * nr : 0;
    const int64_t nc = two_d ? kC / 2 : kC, c0 = two_d ? j * nc : 0;
    const int64_t nv = kV / (two_d ? 2 : n), v0 = wte_vocab_begin(tp, nv), lv0 = logits_vocab_begin(tp, nv);
    INFO(mode << " on " << n << " ranks");

    Tensor1<double> w = to_device(slab(wte, kC, v0, nv, c0, nc)), p = to_device(slab(wpe, kC, 0, kT, c0, nc));
    Tensor2<double> scratch;
    Tensor1<double> out("out", nr * nc);
    tp_embedding_forward<double>(tp, mat(out, nr, nc), tokens, mat(w, nv, nc), mat(p, kT, nc), kT, scratch);
    CHECK(max_rel_error(host(out), slab(s_emb, kC, r0, nr, c0, nc)) < 1e-14);

    Tensor1<double> g_w("g_w", nv * nc), g_p("g_p", kT * nc), d_local = to_device(slab(dout, kC, r0, nr, c0, nc));
    tp_embedding_backward<double>(tp, mat(g_w, nv, nc), mat(g_p, kT, nc), mat(d_local, nr, nc), tokens, kT, scratch);
    CHECK(max_rel_error(host(g_w), slab(s_dwte_e, kC, v0, nv, c0, nc)) < 1e-13);
    CHECK(max_rel_error(host(g_p), slab(s_dwpe, kC, 0, kT, c0, nc)) < 1e-13);

    Tensor1<double> x_local = to_device(slab(x, kC, r0, nr, c0, nc)), lg("lg", nr * nv), ls("ls", nr), lz("lz", nr);
    tp_head_logits<double>(tp, Precision::FP32, mat(lg, nr, nv), mat(x_local, nr, nc), mat(w, nv, nc));
    const double loss_sum = tp_cross_entropy_forward<double>(tp, ls, lz, mat(lg, nr, nv),
                                                             Kokkos::subview(targets, std::make_pair(r0, r0 + nr)));
    double want = 0;
    for (int64_t r = r0; r < r0 + nr; ++r) want += s_losses[size_t(r)];
    CHECK(loss_sum == Approx(want).epsilon(1e-13));
    CHECK(max_rel_error(host(ls), slab(s_losses, 1, r0, nr, 0, 1)) < 1e-13);
    CHECK(max_rel_error(host(lz), slab(s_lse, 1, r0, nr, 0, 1)) < 1e-13);
    tp_cross_entropy_backward<double>(tp, mat(lg, nr, nv), lz, Kokkos::subview(targets, std::make_pair(r0, r0 + nr)),
                                      scale);
    CHECK(max_rel_error(host(lg), slab(s_dlogits, kV, r0, nr, lv0, nv)) < 1e-13);

    Tensor1<double> hx("hx", nr * nc), hw("hw", nv * nc);
    tp_head_backward<double>(tp, Precision::FP32, mat(hx, nr, nc), mat(hw, nv, nc), mat(lg, nr, nv),
                             mat(x_local, nr, nc), mat(w, nv, nc));
    CHECK(max_rel_error(host(hx), slab(s_dx, kC, r0, nr, c0, nc)) < 1e-13);
    CHECK(max_rel_error(host(hw), slab(s_dwte_h, kC, v0, nv, c0, nc)) < 1e-13);
  }
}
