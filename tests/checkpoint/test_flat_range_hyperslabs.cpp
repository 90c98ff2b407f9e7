// flat_range_hyperslabs: a flat range of a row-major box as boxes. For every range of
// boxes of 1, 2 and 3 dimensions, the boxes, walked in row-major order one after the
// other, list exactly the range's elements in order (so ZeRO-1's block of a tensor's
// moments is written and read as one selection of its global dataset).
#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

#include "checkpoint/checkpoint_file.hpp"

using namespace strata;

namespace {

// Row-major indices of the elements of box b inside a box of extents `count`.
std::vector<int64_t> elements(const std::vector<int64_t>& count, const Hyperslab& b) {
  std::vector<int64_t> out;
  std::vector<int64_t> at(count.size(), 0);
  int64_t total = 1;
  for (auto c : b.count) total *= c;
  for (int64_t k = 0; k < total; ++k) {
    int64_t rest = k, flat = 0;
    for (size_t d = count.size(); d-- > 0;) {
      at[d] = b.start[d] + rest % b.count[d];
      rest /= b.count[d];
    }
    for (size_t d = 0; d < count.size(); ++d) flat = flat * count[d] + at[d];
    out.push_back(flat);
  }
  return out;
}

}  // namespace

TEST_CASE("a flat range of a box is listed by its hyperslabs in order", "[io][zero]") {
  for (const std::vector<int64_t>& count :
       std::vector<std::vector<int64_t>>{{7}, {3, 5}, {2, 3, 4}, {1, 4, 3}, {3, 1, 5}}) {
    int64_t n = 1;
    for (auto c : count) n *= c;
    for (int64_t begin = 0; begin <= n; ++begin)
      for (int64_t end = begin; end <= n; ++end) {
        const auto boxes = flat_range_hyperslabs(count, begin, end);
        INFO("count of " << count.size() << " dims, range [" << begin << ", " << end << ")");
        CHECK(boxes.size() <= 2 * count.size() - 1);
        std::vector<int64_t> listed;
        for (const auto& b : boxes) {
          REQUIRE(b.start.size() == count.size());
          for (size_t d = 0; d < count.size(); ++d) {
            CHECK(b.count[d] >= 1);
            CHECK(b.start[d] + b.count[d] <= count[d]);
          }
          const auto e = elements(count, b);
          listed.insert(listed.end(), e.begin(), e.end());
        }
        std::vector<int64_t> expected;
        for (int64_t i = begin; i < end; ++i) expected.push_back(i);
        CHECK(listed == expected);
      }
  }
}
