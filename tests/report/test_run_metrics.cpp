// The language model's RunMetrics (report/run_metrics.hpp): a dense model's columns and
// fields, and a mixture's, whose routing since the last progress line it takes once per
// line from the function it was given and reports as each expert's share of the
// assignments (their least and most) and the share the capacity dropped.
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "report/run_metrics.hpp"

using namespace strata;

namespace {

ProgressFigures window() {
  ProgressFigures w;
  w.window_steps = 2;
  w.seconds = 0.5;  // 0.25 s a step
  w.lr = 1e-3;
  w.grad_norm = 0.5;
  return w;
}

}  // namespace

TEST_CASE("a dense language model reports tokens/s and no expert columns", "[report]") {
  const LanguageModelMetrics metrics(1000, 6.0, 0.0, 2);
  const std::vector<std::string> columns = metrics.columns();
  CHECK(columns.size() == 8);
  CHECK(columns[5] == "tokens_per_s");
  std::vector<double> row;
  const std::string line = metrics.progress(window(), row);
  REQUIRE(row.size() == columns.size());
  CHECK(row[5] == Approx(4000.0));  // 1000 tokens per 0.25 s
  CHECK(line.find("4000 tok/s") != std::string::npos);
  CHECK(line.find("experts") == std::string::npos);
  CHECK(metrics.done_line({4, 2.0, 2.5, NAN}) == ", 2000 tokens/s, final loss 2.5000");
}

TEST_CASE("a mixture's progress line reports the routing since the last line, once per line", "[report]") {
  int calls = 0;
  const LanguageModelMetrics metrics(1000, 6.0, 0.0, 2, [&] {
    ++calls;
    ExpertLoad load;
    load.assigned = {10, 30, 20, 40};  // shares 0.1, 0.3, 0.2, 0.4 of 100
    load.dropped = 5;
    return load;
  });
  const std::vector<std::string> columns = metrics.columns();
  REQUIRE(columns.size() == 11);
  CHECK(columns[8] == "expert_load_min");
  CHECK(columns[9] == "expert_load_max");
  CHECK(columns[10] == "dropped");
  CHECK(calls == 0);  // the columns take no routing
  std::vector<double> row;
  const std::string line = metrics.progress(window(), row);
  CHECK(calls == 1);
  REQUIRE(row.size() == columns.size());
  CHECK(row[8] == Approx(0.1));
  CHECK(row[9] == Approx(0.4));
  CHECK(row[10] == Approx(0.05));
  CHECK(line.find("| experts 10/30/20/40% dropped 5.0%") != std::string::npos);
}
