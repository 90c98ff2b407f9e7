#pragma once
// A codec for the part of the replicas' sum node by node that crosses the network
// (Comm::sum_by_node; parallel.grad_compression): it sums one rank's block over the ranks
// at its place on every node, sending less than the floats, and keeps per block what its
// code lost (error feedback) for the block's next sum. That state is the run's: the
// checkpoint carries it (state(), restore()), so a restart on the same layout continues bit
// for bit; onto another layout it starts from zero (train/run_loop.cpp says which).
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/tensor.hpp"

namespace strata {

class Comm;

// A matrix in a flat buffer: rows x cols values, row-major, from offset.
struct MatrixSpan {
  int64_t offset = 0, rows = 0, cols = 0;
};

class AcrossCodec {
 public:
  virtual ~AcrossCodec() = default;
  // Sums block over across (its ranks each holding their node's block at this place);
  // every rank gets the same sum.
  virtual void sum(Comm& across, V1<float> block) = 0;
  // The deck's name of the code ("int8").
  virtual std::string name() const = 0;
  // The matrices of a buffer of n values whose blocks will be summed (a codec that
  // compresses matrices uses them; spans is called once per buffer).
  virtual void describe(const float* buffer, int64_t n, const std::function<std::vector<MatrixSpan>()>& spans) {
    (void)buffer;
    (void)n;
    (void)spans;
  }
  // This rank's state, the blocks' in the order they were first summed.
  std::vector<float> state() const;
  // A state() to continue from: the next blocks to be summed for the first time take its
  // values in that order (as a run on the same layout sums them).
  void restore(std::vector<float> values);

 protected:
  // The state of the block at this address, of size values (zeros, or the restored values
  // when the block is new).
  std::vector<float>& block_state(const float* block, int64_t values);

 private:
  std::map<const float*, size_t> index_;  // block -> its place in states_
  std::vector<std::vector<float>> states_;
  std::vector<float> restored_;
  size_t restored_used_ = 0;
};

}  // namespace strata
