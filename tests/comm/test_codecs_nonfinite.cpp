// The codecs of the sum across nodes (comm/int8_across.hpp, comm/powersgd_across.hpp) on
// the ranks of the job taken as one rank a node: a value that is not finite on one node
// makes its chunk (int8) or its matrix (PowerSGD) NaN on every node, so every replica sees
// the step non-finite (run.on_nonfinite skips or stops it), and keeps nothing of it: the
// next sum, of finite values, is finite and the same on every rank, and for PowerSGD the
// other matrices of the block came through finite in both sums.
#include <mpi.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include "comm/comm.hpp"
#include "comm/int8_across.hpp"
#include "comm/powersgd_across.hpp"
#include "support/host_views.hpp"

using namespace strata;

namespace {

// A block of n values on this rank: rank-dependent, finite.
std::vector<float> block_values(int64_t n, int rank) {
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(std::sin(double(i) * 0.37 + rank)) * 1e-2f;
  return v;
}

// Sums values over the job through codec; returns the result on this rank.
std::vector<float> coded_sum(AcrossCodec& codec, Comm& across, Tensor1<float>& buf, const std::vector<float>& values) {
  auto host = Kokkos::create_mirror_view(buf);
  for (size_t i = 0; i < values.size(); ++i) host(i) = values[i];
  Kokkos::deep_copy(buf, host);
  codec.sum(across, V1<float>(buf));
  return test::to_host<float>(buf);
}

bool same_on_every_rank(const std::vector<float>& v) {
  std::vector<float> first = v;
  MPI_Bcast(first.data(), int(first.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
  int same = std::equal(v.begin(), v.end(), first.begin(),
                        [](float a, float b) { return a == b || (std::isnan(a) && std::isnan(b)); });
  MPI_Allreduce(MPI_IN_PLACE, &same, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return same == 1;
}

}  // namespace

TEST_CASE("codecs across nodes: a non-finite value is NaN everywhere, and the next sum clean", "[mpi][codecs]") {
  int size = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (size < 2) return;
  Comm across(MPI_COMM_WORLD);
  // two matrices of 40 x 64 (PowerSGD's pieces at r = 2), then a vector of 70
  const std::vector<MatrixSpan> matrices = {{0, 40, 64}, {2560, 40, 64}};
  const int64_t n = 2 * 2560 + 70;
  Tensor1<float> buf("codec_block", n);
  Int8Across int8;
  PowerSgdAcross powersgd(2);
  powersgd.describe(buf.data(), n, [&] { return matrices; });
  for (AcrossCodec* codec : {static_cast<AcrossCodec*>(&int8), static_cast<AcrossCodec*>(&powersgd)}) {
    INFO(codec->name());
    std::vector<float> bad = block_values(n, rank);
    if (rank == size - 1) bad[100] = std::numeric_limits<float>::infinity();  // in the first matrix, first chunk
    const std::vector<float> first = coded_sum(*codec, across, buf, bad);
    CHECK(same_on_every_rank(first));
    CHECK(std::isnan(first[100]));
    CHECK(std::isnan(first[0]));              // its whole chunk (int8) or matrix (PowerSGD)
    CHECK(std::isfinite(first[2560 + 100]));  // the second matrix's: a chunk, a matrix of its own
    CHECK(std::isfinite(first[n - 1]));       // the vector
    const std::vector<float> second = coded_sum(*codec, across, buf, block_values(n, rank));
    CHECK(same_on_every_rank(second));
    CHECK(std::all_of(second.begin(), second.end(), [](float v) { return std::isfinite(v); }));
    // nothing of the bad step kept: its state is finite
    const std::vector<float> state = codec->state();
    CHECK(std::all_of(state.begin(), state.end(), [](float v) { return std::isfinite(v); }));
  }
  MPI_Barrier(MPI_COMM_WORLD);
}
