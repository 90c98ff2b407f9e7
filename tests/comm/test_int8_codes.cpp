// The int8 codes of the sum across nodes (comm/int8_across.hpp): error feedback is exact,
// what is sent (code x scale) plus what is kept equals the value bit for bit, over values
// of every magnitude a gradient has, chunks of zeros, a chunk whose largest value sets a
// scale the others round to zero, and a chunk that is not finite (sent as NaN, nothing
// kept, so the step is seen non-finite and the next one starts clean).
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "comm/int8_across.hpp"

using namespace strata;

TEST_CASE("int8 codes: sent plus kept is the value, bit for bit", "[comm][int8]") {
  const int64_t chunk = Int8Across::kChunk, n = 7 * chunk + 77;  // a last chunk cut short
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-6, 2);
  const size_t count = size_t(n), chunks = size_t((n + chunk - 1) / chunk);
  std::vector<float> x(count);
  for (auto& v : x) v = std::ldexp(normal(rng), exponent(rng));
  for (int64_t i = chunk; i < 2 * chunk; ++i) x[size_t(i)] = 0.0f;    // a chunk of zeros
  x[size_t(3 * chunk)] = 1e30f;                                       // one value drowns its chunk
  x[size_t(5 * chunk + 3)] = std::numeric_limits<float>::infinity();  // a chunk not finite
  std::vector<int8_t> q(count);
  std::vector<float> scales(chunks), kept(count);
  quantize_int8(x.data(), n, q.data(), scales.data(), kept.data());
  std::vector<float> sent(count, 0.0f);
  add_dequantized(q.data(), scales.data(), n, sent.data());
  int64_t exact = 0, nonzero_codes = 0;
  for (int64_t i = 0; i < n; ++i) {
    const size_t k = size_t(i);
    if (i / chunk == 5) {  // the chunk with infinity: NaN sent, nothing kept
      CHECK(std::isnan(sent[k]));
      CHECK(kept[k] == 0.0f);
      continue;
    }
    exact += sent[k] + kept[k] == x[k] ? 1 : 0;
    nonzero_codes += q[k] != 0 ? 1 : 0;
    CHECK(std::abs(kept[k]) <= 0.5f * scales[k / size_t(chunk)]);
  }
  CHECK(exact == n - chunk);
  CHECK(nonzero_codes > n / 4);                                    // the codes carry the values (not all rounded away)
  CHECK(scales[1] == 0.0f);                                        // zeros: scale 0, codes 0, nothing kept
  CHECK(kept[size_t(3 * chunk + 1)] == x[size_t(3 * chunk + 1)]);  // rounded to zero: all of it kept
}
