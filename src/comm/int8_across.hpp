#pragma once
// parallel.grad_compression = "int8": the part of the replicas' sum node by node that
// crosses the network (Comm::sum_by_node: each rank's block of the gradients over the ranks
// at its place on every node) sent as 8-bit integers, a scale per chunk of kChunk values,
// with error feedback.
//
// Quantisation (linear, per chunk; Dettmers' seed paper offers it beside a dynamic tree):
// x = the block plus what the last quantisation of this block lost; per chunk the scale
// s = max |x| / 127, q = round(x / s) in [-127, 127], sent = q s, kept = x - q s, which is
// exact (Sterbenz: where q != 0, q s is within a factor 2 of x), so sent + kept = x bit for
// bit, and kept is added to the block's next sum. Linear, not the tree: with error
// feedback, a chunk's scale set by its largest value does not lose the small ones for good,
// and the linear code decodes with one multiply. The nodes' (q, s) are all-gathered and
// every rank adds the nodes' sent blocks in node order, so every replica gets the same sum.
// Across n nodes each rank sends m + 4 m / kChunk bytes (m values) to every other node,
// where an all-reduce of floats sends 8 (n - 1) / n m: 4x less at n = 2, and none saved past
// n = 8 (a reduce-scatter of codes, re-quantised, would keep the 4x: not built).
#include <cstdint>
#include <vector>

#include "comm/across_codec.hpp"

namespace strata {

// x[0..n) into codes q and a scale per chunk of kChunk (scales: ceil(n / kChunk)); kept =
// x - q s, exactly.
void quantize_int8(const float* x, int64_t n, int8_t* q, float* scales, float* kept);
// out[i] += q[i] s (the sent values)
void add_dequantized(const int8_t* q, const float* scales, int64_t n, float* out);

// Its state per block: what the last quantisation of the block lost (as many values).
class Int8Across : public AcrossCodec {
 public:
  static constexpr int64_t kChunk = 256;
  void sum(Comm& across, V1<float> block) override;
  std::string name() const override { return "int8"; }
  // The bytes one rank sends per sum of m values (its codes and scales).
  static int64_t payload_bytes(int64_t m) { return m + int64_t(sizeof(float)) * ((m + kChunk - 1) / kChunk); }

 private:
  std::vector<float> x_, scales_, node_scales_;  // (kept between sums: no allocation per step)
  std::vector<char> mine_, all_;
};

}  // namespace strata
