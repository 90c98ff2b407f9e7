#pragma once
// parallel.grad_compression = "powersgd" (Vogels, Karimireddy and Jaggi, "PowerSGD:
// Practical low-rank gradient compression for distributed optimization", NeurIPS 2019):
// the part of the replicas' sum node by node that crosses the network (each rank's block
// of the gradients, summed over the ranks at its place on every node) as rank-r factors.
//
// Per block, each matrix's whole rows inside it (MatrixSpan, from the parameters' shapes:
// AcrossCodec::describe) where (rows + cols) r < rows cols is a piece M; the rest of the
// block (vectors, rows cut by the block's edges, matrices too small to gain) crosses as
// floats. With x = the block plus its error feedback, per piece:
//   P = M Q                  (Q: cols x r, the last step's, warm)
//   P summed over the nodes, its columns made orthonormal (Gram-Schmidt, in double)
//   Q = M^T P                summed over the nodes (with the floats: one all-reduce)
//   the sum is P Q^T; the error kept is M - P Q^T / nodes
// so the errors of the nodes plus the sum sent are the nodes' x (to one rounding per value).
// Every node computes the same P and Q, so every replica gets the same sum. Each rank
// sends (sum of rows + cols) r + the rest's floats, against all its values uncompressed.
// A Q that is all zero (new, or after a non-finite step) is drawn again from a fixed
// counter-based hash, the same on every node. A piece whose P is not finite is sent as NaN
// (the step is then skipped as non-finite), and its error and Q start again.
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "comm/across_codec.hpp"

namespace strata {

// How a block [begin, end) of a buffer with these matrices (sorted by offset) is sent.
struct LowRankPlan {
  std::vector<MatrixSpan> pieces;                       // offsets from the block's start
  std::vector<std::pair<int64_t, int64_t>> rest;        // [from, to) from the block's start, as floats
  int64_t p_values = 0, q_values = 0, rest_values = 0;  // sum of rows r, of cols r, and the floats
};
LowRankPlan plan_low_rank(const std::vector<MatrixSpan>& matrices, int64_t begin, int64_t end, int rank);

// One piece's steps on the host (exposed for the unit tests and calibrate): m is rows x
// cols and p rows x r, row-major; q is Q^T, r x cols (each column of Q contiguous).
void low_rank_project(const float* m, int64_t rows, int64_t cols, const float* q, int r, float* p);  // P = M Q
void orthonormalize_columns(float* p, int64_t rows, int r);
void low_rank_back(const float* m, int64_t rows, int64_t cols, const float* p, int r, float* q);  // Q = M^T P
// out = P Q^T; kept = x - out / nodes
void low_rank_expand(const float* x, int64_t rows, int64_t cols, const float* p, const float* q, int r, int nodes,
                     float* out, float* kept);

class PowerSgdAcross : public AcrossCodec {
 public:
  explicit PowerSgdAcross(int rank) : rank_(rank) {}
  void describe(const float* buffer, int64_t n, const std::function<std::vector<MatrixSpan>()>& spans) override;
  // Its state per block: the error (as many values), then each piece's Q.
  void sum(Comm& across, V1<float> block) override;
  std::string name() const override { return "powersgd"; }

 private:
  const LowRankPlan& plan_for(const float* block, int64_t m);
  // P = M Q for each piece of x_ into p_ (a Q all zero drawn first)
  void project(const LowRankPlan& plan, float* qs);
  // For the pieces whose summed P is finite: P orthonormal, Q = M^T P into sums_; then the
  // floats after the Qs. Returns which pieces were finite.
  std::vector<char> back(const LowRankPlan& plan);
  // The sum into out: each piece's P Q^T (Q kept warm) and its error, or NaN; the floats.
  void expand(const LowRankPlan& plan, const std::vector<char>& finite, int nodes, float* qs, float* kept, float* out);
  int rank_;
  struct Buffer {
    int64_t n = 0;
    std::vector<MatrixSpan> matrices;
  };
  std::map<const float*, Buffer> buffers_;
  std::map<const float*, LowRankPlan> plans_;
  std::vector<float> x_, p_, sums_;  // (kept between sums: no allocation per step)
};

}  // namespace strata
