// A run's stages.csv as the simulator's stage costs (plan/measured_stage_costs.hpp): the
// per-pass costs are the median over steps (the first two left out) of the stage's ranks'
// mean seconds over the run's own micro-batches (the file's column); the time outside the pipeline leaves out passes,
// waits and the collectives' waits; with those costs 1F1B's simulated step is its formula
// plus that time; and a file that is not a pipeline run's stages.csv of the deck's stages
// is refused in one line.
#include <unistd.h>
#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <string>

#include "core/error.hpp"
#include "engine/pipeline/schedule.hpp"
#include "plan/measured_stage_costs.hpp"

using namespace strata;

namespace {

std::string write_csv(const std::string& name, const std::string& text) {
  const std::string path = "/tmp/strata-test-" + std::to_string(::getpid()) + "-" + name;
  std::ofstream(path) << text;
  return path;
}

// 2 stages; stage 0 on ranks 0 and 2 (data parallel), stage 1 on rank 1; steps 1 and 2
// warm up, step 5 is an outlier.
const char* kHeader = "step,rank,stage,compute_s,wait_s,comm_s,forward_s,backward_s,step_s,micro_batches\n";
const char* kRows =
    "1,0,0,9,9,0,9,9,40,4\n1,1,1,9,9,0,9,9,40,4\n1,2,0,9,9,0,9,9,40,4\n"
    "2,0,0,8,8,0,8,8,30,4\n2,1,1,8,8,0,8,8,30,4\n2,2,0,8,8,0,8,8,30,4\n"
    "3,0,0,3.0,0.9,0.05,1.0,2.0,4.0,4\n3,1,1,3.7,0.0,0.25,1.2,2.4,4.0,4\n3,2,0,3.0,0.9,0.05,1.2,1.8,4.0,4\n"
    "4,0,0,3.0,0.9,0.05,1.0,2.0,4.0,4\n4,1,1,3.7,0.0,0.25,1.2,2.4,4.0,4\n4,2,0,3.0,0.9,0.05,1.2,1.8,4.0,4\n"
    "5,0,0,3.0,0.9,0.05,3.0,6.0,4.0,4\n5,1,1,3.7,0.0,0.25,3.6,7.2,4.0,4\n5,2,0,3.0,0.9,0.05,3.0,6.0,4.0,4\n";

}  // namespace

TEST_CASE("measured stage costs: medians per stage over the steps after the first two, per micro-batch",
          "[plan][ready]") {
  const std::string path = write_csv("stages.csv", std::string(kHeader) + kRows);
  const MeasuredStages m = read_stage_costs(path, 2);
  CHECK(m.first_step == 3);
  CHECK(m.last_step == 5);
  // stage 0: ranks 0 and 2 average to F 1.1, B 1.9 in steps 3 and 4 (step 5 is the outlier)
  CHECK(m.costs.forward_of(0) == Approx(1.1 / 4));
  CHECK(m.costs.backward_of(0) == Approx(1.9 / 4));
  CHECK(m.costs.forward_of(1) == Approx(1.2 / 4));
  CHECK(m.costs.backward_of(1) == Approx(2.4 / 4));
  // outside: the mean of step - compute - wait - comm (0.05, 0.05, 0.05), and the
  // collective's 0.05 s on the ranks that came last to it (rank 1's 0.25 s waited for them)
  CHECK(m.outside == Approx(0.05 + 0.05));
  CHECK(m.step == Approx(4.0));
  // 1F1B, 2 stages, m = 4, no transfers: stage 1 the bottleneck, so the step is stage 0's
  // first forward, stage 1's m forwards and backwards, and stage 0's last backward
  const PipeSimulation sim = simulate_schedule(make_schedule(Schedule::OneFOneB, 2, 4, 1, 1), m.costs);
  CHECK(sim.makespan ==
        Approx(m.costs.forward_of(0) + 4 * (m.costs.forward_of(1) + m.costs.backward_of(1)) + m.costs.backward_of(0)));
  std::remove(path.c_str());
}

TEST_CASE("measured stage costs: what is not the deck's pipeline run's stages.csv is refused in one line",
          "[plan][ready]") {
  const auto refused = [](const std::string& text, int stages, const std::string& says) {
    const std::string path = write_csv("bad.csv", text);
    try {
      read_stage_costs(path, stages);
      FAIL("accepted: " << text);
    } catch (const UserError& e) {
      INFO(e.what());
      CHECK(std::string(e.what()).find(says) != std::string::npos);
      CHECK(std::string(e.what()).find('\n') == std::string::npos);
    }
    std::remove(path.c_str());
  };
  refused("step,loss\n1,2\n", 2, "has no column \"stage\"");
  refused(kHeader, 2, "has no rows");
  refused(std::string(kHeader) + "2,0,0,3,1,0,1,2,4,4\n", 2, "has no row of stage 1");
  refused(std::string(kHeader) + kRows, 1, "has stage 1; the deck has 1 stages");
  refused(std::string(kHeader) + "2,0,0,3,1,0,x,2,4,4\n", 1, "line 2 holds a value that is not a number");
  refused(std::string(kHeader) + "2,0,0,3\n", 1, "line 2 is not a row");
  refused(std::string(kHeader) + "2,0,0,3,1,0,1,2,4,0\n", 1, "has a row of step 2 with micro_batches below 1");
  try {
    read_stage_costs("/nonexistent/stages.csv", 2);
    FAIL("a missing file was read");
  } catch (const UserError& e) {
    CHECK(std::string(e.what()) == "--stage-costs: cannot read /nonexistent/stages.csv");
  }
}
