#include "comm/powersgd_across.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "comm/comm.hpp"

namespace strata {

LowRankPlan plan_low_rank(const std::vector<MatrixSpan>& matrices, int64_t begin, int64_t end, int rank) {
  LowRankPlan plan;
  int64_t at = begin;  // the first value not yet placed
  const auto as_floats = [&](int64_t from, int64_t to) {
    if (to <= from) return;
    plan.rest.emplace_back(from - begin, to - begin);
    plan.rest_values += to - from;
  };
  for (const MatrixSpan& s : matrices) {
    const int64_t s_end = s.offset + s.rows * s.cols;
    if (s.cols <= 0 || s_end <= begin) continue;
    if (s.offset >= end) break;
    const int64_t first = (std::max(begin, s.offset) - s.offset + s.cols - 1) / s.cols,
                  last = (std::min(end, s_end) - s.offset) / s.cols, rows = last - first;
    if (rows <= 0 || (rows + s.cols) * rank >= rows * s.cols) continue;  // no whole row, or nothing gained
    const int64_t from = s.offset + first * s.cols;
    as_floats(at, from);
    plan.pieces.push_back({from - begin, rows, s.cols});
    plan.p_values += rows * rank;
    plan.q_values += s.cols * rank;
    at = from + rows * s.cols;
  }
  as_floats(at, end);
  return plan;
}

// The products in float over lanes of kLanes values, added in a fixed order at the end:
// the compiler vectorizes them without reassociating a sum, so the bits are the same on
// every node running the same binary (each node expands P Q^T itself).
constexpr int64_t kLanes = 16;

void low_rank_project(const float* m, int64_t rows, int64_t cols, const float* q, int r, float* p) {
  for (int64_t a = 0; a < rows; ++a) {
    const float* row = m + a * cols;
    for (int j = 0; j < r; ++j) {
      const float* qj = q + int64_t(j) * cols;
      float lanes[kLanes] = {};
      int64_t b = 0;
      for (; b + kLanes <= cols; b += kLanes)
        for (int64_t l = 0; l < kLanes; ++l) lanes[l] += row[b + l] * qj[b + l];
      float s = 0;
      for (int64_t l = 0; l < kLanes; ++l) s += lanes[l];
      for (; b < cols; ++b) s += row[b] * qj[b];
      p[a * r + j] = s;
    }
  }
}

void orthonormalize_columns(float* p, int64_t rows, int r) {
  std::vector<double> col(static_cast<size_t>(rows)),
      done(static_cast<size_t>(rows * r));  // done: the columns so far, in double
  for (int j = 0; j < r; ++j) {
    double before = 0;
    for (int64_t a = 0; a < rows; ++a) {
      col[size_t(a)] = p[a * r + j];
      before += col[size_t(a)] * col[size_t(a)];
    }
    for (int i = 0; i < j; ++i) {  // modified Gram-Schmidt
      double dot = 0;
      for (int64_t a = 0; a < rows; ++a) dot += done[size_t(a) * size_t(r) + size_t(i)] * col[size_t(a)];
      for (int64_t a = 0; a < rows; ++a) col[size_t(a)] -= dot * done[size_t(a) * size_t(r) + size_t(i)];
    }
    double squares = 0;
    for (double v : col) squares += v * v;
    // a column in the others' span (what is left of it is rounding) or zero: zero
    const double scale = squares > 1e-24 * before && squares > 0 ? 1.0 / std::sqrt(squares) : 0.0;
    for (int64_t a = 0; a < rows; ++a) {
      done[size_t(a) * size_t(r) + size_t(j)] = col[size_t(a)] * scale;
      p[a * r + j] = float(col[size_t(a)] * scale);
    }
  }
}

void low_rank_back(const float* m, int64_t rows, int64_t cols, const float* p, int r, float* q) {
  std::fill(q, q + int64_t(r) * cols, 0.0f);
  for (int64_t a = 0; a < rows; ++a) {
    const float* row = m + a * cols;
    for (int j = 0; j < r; ++j) {
      const float pj = p[a * r + j];
      float* qj = q + int64_t(j) * cols;
      for (int64_t b = 0; b < cols; ++b) qj[b] += pj * row[b];
    }
  }
}

void low_rank_expand(const float* x, int64_t rows, int64_t cols, const float* p, const float* q, int r, int nodes,
                     float* out, float* kept) {
  const float share = 1.0f / float(nodes);  // (nodes a power of two: exact)
  for (int64_t a = 0; a < rows; ++a) {
    float* o = out + a * cols;
    std::fill(o, o + cols, 0.0f);
    for (int j = 0; j < r; ++j) {
      const float pj = p[a * r + j];
      const float* qj = q + int64_t(j) * cols;
      for (int64_t b = 0; b < cols; ++b) o[b] += pj * qj[b];
    }
    const float* xa = x + a * cols;
    float* k = kept + a * cols;
    for (int64_t b = 0; b < cols; ++b) k[b] = xa[b] - o[b] * share;
  }
}

namespace {

// A Q to start from: values in [-1, 1) from a counter-based hash (splitmix64) of the
// piece and the value, the same on every node.
void draw_q(int64_t piece, float* q, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint64_t z = (uint64_t(piece) << 40) ^ uint64_t(i) ^ 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    q[i] = float(double(z >> 11) * 0x1.0p-52 - 1.0);
  }
}

bool all_finite(const float* v, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(v[i])) return false;
  return true;
}

}  // namespace

void PowerSgdAcross::describe(const float* buffer, int64_t n, const std::function<std::vector<MatrixSpan>()>& spans) {
  if (buffers_.count(buffer)) return;
  Buffer b{n, spans()};
  std::sort(b.matrices.begin(), b.matrices.end(),
            [](const MatrixSpan& x, const MatrixSpan& y) { return x.offset < y.offset; });
  buffers_.emplace(buffer, std::move(b));
}

// The plan of a block: from the described buffer that holds it, else all of it as floats.
const LowRankPlan& PowerSgdAcross::plan_for(const float* block, int64_t m) {
  if (auto it = plans_.find(block); it != plans_.end()) return it->second;
  static const std::vector<MatrixSpan> none;
  const std::vector<MatrixSpan>* matrices = &none;
  int64_t begin = 0;
  if (auto it = buffers_.upper_bound(block); it != buffers_.begin()) {
    --it;
    const int64_t at = block - it->first;
    if (at + m <= it->second.n) {
      matrices = &it->second.matrices;
      begin = at;
    }
  }
  return plans_.emplace(block, plan_low_rank(*matrices, begin, begin + m, rank_)).first->second;
}

void PowerSgdAcross::sum(Comm& across, V1<float> block) {
  const int64_t m = block.extent(0);
  if (m == 0) return;
  const LowRankPlan& plan = plan_for(block.data(), m);
  Kokkos::fence();
  auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), block);
  std::vector<float>& state = block_state(block.data(), m + plan.q_values);
  float *kept = state.data(), *qs = state.data() + m;
  x_.resize(size_t(m));
  for (int64_t i = 0; i < m; ++i) x_[size_t(i)] = host(i) + kept[i];
  project(plan, qs);
  if (!p_.empty()) across.allreduce_sum(p_);
  const std::vector<char> finite = back(plan);
  if (!sums_.empty()) across.allreduce_sum(sums_);
  expand(plan, finite, across.size(), qs, kept, host.data());
  Kokkos::deep_copy(block, host);
}

void PowerSgdAcross::project(const LowRankPlan& plan, float* qs) {
  p_.assign(size_t(plan.p_values), 0.0f);
  int64_t po = 0, qo = 0;
  for (size_t k = 0; k < plan.pieces.size(); ++k) {
    const MatrixSpan& s = plan.pieces[k];
    float* q = qs + qo;
    if (std::all_of(q, q + s.cols * rank_, [](float v) { return v == 0.0f; })) draw_q(int64_t(k), q, s.cols * rank_);
    low_rank_project(x_.data() + s.offset, s.rows, s.cols, q, rank_, p_.data() + po);
    po += s.rows * rank_;
    qo += s.cols * rank_;
  }
}

std::vector<char> PowerSgdAcross::back(const LowRankPlan& plan) {
  std::vector<char> finite(plan.pieces.size());
  sums_.assign(size_t(plan.q_values + plan.rest_values), 0.0f);
  int64_t po = 0, qo = 0;
  for (size_t k = 0; k < plan.pieces.size(); ++k) {
    const MatrixSpan& s = plan.pieces[k];
    finite[k] = all_finite(p_.data() + po, s.rows * rank_);  // the same on every node: P is their sum
    if (finite[k]) {
      orthonormalize_columns(p_.data() + po, s.rows, rank_);
      low_rank_back(x_.data() + s.offset, s.rows, s.cols, p_.data() + po, rank_, sums_.data() + qo);
    }
    po += s.rows * rank_;
    qo += s.cols * rank_;
  }
  float* rest = sums_.data() + plan.q_values;
  for (const auto& [from, to] : plan.rest) rest = std::copy(x_.data() + from, x_.data() + to, rest);
  return finite;
}

void PowerSgdAcross::expand(const LowRankPlan& plan, const std::vector<char>& finite, int nodes, float* qs, float* kept,
                            float* out) {
  int64_t po = 0, qo = 0;
  for (size_t k = 0; k < plan.pieces.size(); ++k) {
    const MatrixSpan& s = plan.pieces[k];
    float *q = qs + qo, *o = out + s.offset, *e = kept + s.offset;
    const int64_t values = s.rows * s.cols, q_values = s.cols * rank_;
    if (finite[k] && all_finite(sums_.data() + qo, q_values)) {
      std::copy(sums_.data() + qo, sums_.data() + qo + q_values, q);  // the next step's warm start
      low_rank_expand(x_.data() + s.offset, s.rows, s.cols, p_.data() + po, q, rank_, nodes, o, e);
    } else {  // sent as NaN (the step is skipped); its error and Q start again
      std::fill(o, o + values, std::numeric_limits<float>::quiet_NaN());
      std::fill(e, e + values, 0.0f);
      std::fill(q, q + q_values, 0.0f);
    }
    po += s.rows * rank_;
    qo += q_values;
  }
  const float* rest = sums_.data() + plan.q_values;
  for (const auto& [from, to] : plan.rest) {
    std::copy(rest, rest + (to - from), out + from);
    rest += to - from;
  }
}

}  // namespace strata
