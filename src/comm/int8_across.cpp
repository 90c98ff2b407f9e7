#include "comm/int8_across.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "comm/comm.hpp"

namespace strata {

void quantize_int8(const float* x, int64_t n, int8_t* q, float* scales, float* kept) {
  const int64_t chunk = Int8Across::kChunk;
  for (int64_t c = 0; c * chunk < n; ++c) {
    const int64_t begin = c * chunk, end = std::min(n, begin + chunk);
    float top = 0;
    for (int64_t i = begin; i < end; ++i) top = std::max(top, std::abs(x[i]));
    if (!std::isfinite(top)) {  // sent as NaN (the step's norm says so), nothing kept
      scales[c] = std::numeric_limits<float>::quiet_NaN();
      std::fill(q + begin, q + end, int8_t(0));
      std::fill(kept + begin, kept + end, 0.0f);
      continue;
    }
    const float s = top / 127.0f;
    scales[c] = s;
    for (int64_t i = begin; i < end; ++i) {
      const float code = s > 0 ? std::nearbyint(std::clamp(x[i] / s, -127.0f, 127.0f)) : 0.0f;
      q[i] = int8_t(code);
      kept[i] = x[i] - code * s;
    }
  }
}

void add_dequantized(const int8_t* q, const float* scales, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] += float(q[i]) * scales[i / Int8Across::kChunk];
}

void Int8Across::sum(Comm& across, V1<float> block) {
  const int64_t m = block.extent(0), chunks = (m + kChunk - 1) / kChunk, bytes = payload_bytes(m);
  if (m == 0) return;
  Kokkos::fence();
  auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), block);
  std::vector<float>& kept = block_state(block.data(), m);
  x_.resize(size_t(m));
  for (int64_t i = 0; i < m; ++i) x_[size_t(i)] = host(i) + kept[size_t(i)];
  // this rank's payload: the codes, then the scales (copied: m may be odd)
  mine_.resize(size_t(bytes));
  all_.resize(size_t(bytes) * size_t(across.size()));
  scales_.resize(size_t(chunks));
  node_scales_.resize(size_t(chunks));
  quantize_int8(x_.data(), m, reinterpret_cast<int8_t*>(mine_.data()), scales_.data(), kept.data());
  std::memcpy(mine_.data() + m, scales_.data(), size_t(chunks) * sizeof(float));
  across.allgather_bytes(mine_.data(), bytes, all_.data());
  std::fill(host.data(), host.data() + m, 0.0f);
  for (int k = 0; k < across.size(); ++k) {  // in node order: the same sum on every rank
    const char* payload = all_.data() + size_t(k) * size_t(bytes);
    std::memcpy(node_scales_.data(), payload + m, size_t(chunks) * sizeof(float));
    add_dequantized(reinterpret_cast<const int8_t*>(payload), node_scales_.data(), m, host.data());
  }
  Kokkos::deep_copy(block, host);
}

}  // namespace strata
