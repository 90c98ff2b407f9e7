// Pipeline schedules without MPI: order invariants, send/receive pairing, a discrete-event
// simulation (no deadlock, bubble and in-flight micro-batches as the formulas say), and
// XPipe's prediction steps derived from the list against the paper's closed form.
#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "engine/pipeline/schedule.hpp"
#include "engine/pipeline/simulate.hpp"

using namespace strata;

namespace {
std::vector<int> micro_batch_counts(int p) {
  std::vector<int> ms = {1, p - 1, p, 2 * p + 1};
  std::vector<int> out;
  for (int m : ms)
    if (m >= 1) out.push_back(m);
  return out;
}
}  // namespace

TEST_CASE("GPipe and 1F1B: valid, deadlock-free, bubble (p-1)/(m+p-1), in-flight m and min(p-r, m)",
          "[pipeline][schedule]") {
  for (const Schedule name : {Schedule::GPipe, Schedule::OneFOneB})
    for (int p = 1; p <= 4; ++p)
      for (int m : micro_batch_counts(p)) {
        INFO(to_string(name) << " p=" << p << " m=" << m);
        const PipeSchedule s = make_schedule(name, p, m);
        CHECK(check_schedule(s) == "");
        const PipeSimulation sim = simulate_schedule(s);
        REQUIRE_FALSE(sim.deadlock);
        CHECK(sim.bubble_fraction() == Approx(double(p - 1) / double(m + p - 1)).margin(1e-12));
        for (int r = 0; r < p; ++r) CHECK(sim.peak_in_flight[r] == (name == Schedule::GPipe ? m : std::min(p - r, m)));
      }
}

TEST_CASE("ZB-H1 and ZB-H2: valid, deadlock-free, the paper's bubble and memory, never slower than 1F1B",
          "[pipeline][schedule][zero_bubble]") {
  PipeCosts unit;  // F = I = W = 1, the paper's handcrafted case
  unit.backward = 2;
  PipeCosts slow_input = unit;  // I = 1.2, W = 0.8
  slow_input.weight_share = 0.4;
  for (int p = 1; p <= 8; ++p)
    for (int m : {1, std::max(1, p - 1), p, 2 * p - 1, 2 * p + 1, 4 * p}) {
      INFO("p=" << p << " m=" << m);
      const PipeSchedule h1 = make_schedule(Schedule::ZBH1, p, m), h2 = make_schedule(Schedule::ZBH2, p, m);
      const PipeSchedule base = make_schedule(Schedule::OneFOneB, p, m);
      CHECK(check_schedule(h1) == "");
      CHECK(check_schedule(h2) == "");
      const PipeSimulation s1 = simulate_schedule(h1, unit), s2 = simulate_schedule(h2, unit);
      const PipeSimulation sb = simulate_schedule(base, unit);
      REQUIRE_FALSE(s1.deadlock);
      REQUIRE_FALSE(s2.deadlock);
      CHECK(sb.makespan == 3.0 * (m + p - 1));  // 1F1B: (p - 1)(F + B) of bubble
      CHECK(s1.makespan <= sb.makespan);
      CHECK(s2.makespan <= sb.makespan);
      // ZB-H1: bubble (p - 1)(F + I - W) = p - 1; in flight p (1F1B's first stage) everywhere
      if (m >= p) {
        CHECK(s1.makespan == 3.0 * m + (p - 1));
        CHECK(s1.bubble_fraction() == Approx(double(p - 1) / double(3 * m + p - 1)).margin(1e-12));
        for (int r = 0; r < p; ++r) CHECK(s1.peak_in_flight[r] == p);
      }
      // ZB-H2: the same at F = I = W (a flush keeps (p - 1)F), 2p - 1 in flight
      if (m >= 2 * p - 1) {
        CHECK(s2.makespan == 3.0 * m + (p - 1));
        for (int r = 0; r < p; ++r) CHECK(s2.peak_in_flight[r] == 2 * p - 1);
      }
      // with the input half slower than the weight half, H2's extra warm-up pays (given
      // the micro-batches to fill it)
      const double t1 = simulate_schedule(h1, slow_input).makespan, t2 = simulate_schedule(h2, slow_input).makespan;
      if (p > 1 && m >= 2 * p - 1) CHECK(t2 < t1);
    }
  // the last stage runs each backward (input half) before its next forward, under 1F1B
  // and both zero-bubble lists, so it may keep one loss-layer cache; GPipe's does not
  for (const Schedule kind : {Schedule::OneFOneB, Schedule::ZBH1, Schedule::ZBH2})
    CHECK(one_forward_at_a_time(make_schedule(kind, 4, 8).programs[3]));
  CHECK_FALSE(one_forward_at_a_time(make_schedule(Schedule::GPipe, 4, 8).programs[3]));
  CHECK_FALSE(one_forward_at_a_time(make_schedule(Schedule::ZBH1, 4, 8).programs[0]));
  CHECK(peak_in_flight(make_schedule(Schedule::ZBH1, 4, 8).programs[2]) == 4);
  // the printed list: stage 1 of 2, ZB-H1, 3 micro-batches
  const std::string text = to_string(make_schedule(Schedule::ZBH1, 2, 3));
  CHECK(text.find("stage 1: RECV_ACT0<-0 F0 I0 SEND_GRAD0->0 RECV_ACT1<-0 F1 I1 SEND_GRAD1->0 W0 RECV_ACT2<-0 F2 I2 "
                  "SEND_GRAD2->0 W1 W2 STEP0") != std::string::npos);
}

TEST_CASE("interleaved 1F1B: valid, deadlock-free, bubble (p-1)/(v m + p - 1), Megatron's warm-up in flight",
          "[pipeline][schedule][interleaved]") {
  PipeCosts costs;  // a stage's whole forward 1 and backward 2; a chunk's 1/v of them
  costs.backward = 2;
  for (int p = 2; p <= 4; ++p)
    for (int v = 1; v <= 3; ++v)
      for (int m : {p, 2 * p, 4 * p}) {
        INFO("p=" << p << " v=" << v << " m=" << m);
        PipeSchedule s = interleaved_schedule(p, m, v);
        insert_communication(s);
        CHECK(check_schedule(s) == "");
        const PipeSimulation sim = simulate_schedule(s, costs);
        REQUIRE_FALSE(sim.deadlock);
        if (v == 1) CHECK(s.programs == make_schedule(Schedule::OneFOneB, p, m).programs);  // 1F1B itself
        if (m > p) {  // m = p runs every forward first (GPipe's order, Megatron's choice)
          CHECK(sim.bubble_fraction() == Approx(double(p - 1) / double(v * m + p - 1)).margin(1e-12));
          for (int r = 0; r < p; ++r)
            CHECK(sim.peak_in_flight[r] == (v == 1 ? p - r : std::min(v * m, 2 * (p - r - 1) + (v - 1) * p + 1)));
        }
        CHECK(sim.makespan <= simulate_schedule(make_schedule(Schedule::OneFOneB, p, m), costs).makespan + 1e-12);
      }
  // the model's parts in order: stage 1's chunk 0 hands on to stage 0's chunk 1, whose
  // gradient goes back the same way
  PipeSchedule s = interleaved_schedule(2, 2, 2);
  insert_communication(s);
  CHECK(
      to_string(s) ==
      "interleaved: 2 stages x 2 chunks, 2 micro-batches\n"
      "stage 0: F0 SEND_ACT0->1 F1 SEND_ACT1->1 RECV_ACT0.1<-1 F0.1 SEND_ACT0.1->1 RECV_ACT1.1<-1 F1.1 SEND_ACT1.1->1 "
      "RECV_GRAD0.1<-1 B0.1 SEND_GRAD0.1->1 RECV_GRAD1.1<-1 B1.1 SEND_GRAD1.1->1 RECV_GRAD0<-1 B0 RECV_GRAD1<-1 B1 "
      "STEP0\n"
      "stage 1: RECV_ACT0<-0 F0 SEND_ACT0->0 RECV_ACT1<-0 F1 SEND_ACT1->0 RECV_ACT0.1<-0 F0.1 RECV_ACT1.1<-0 F1.1 B0.1 "
      "SEND_GRAD0.1->0 B1.1 SEND_GRAD1.1->0 RECV_GRAD0<-0 B0 SEND_GRAD0->0 RECV_GRAD1<-0 B1 SEND_GRAD1->0 STEP0\n");
  // the caches per chunk, as the engine sizes them from the list: on stage 0 of 2, chunk 0
  // holds micro-batches 0-3 before its first backward, chunk 1 two at a time; their peaks
  // fall at different times (5 chunk passes at once at most), the engine keeps 4 + 2
  const PipeSchedule four = interleaved_schedule(2, 4, 2);
  CHECK(peak_in_flight(four.programs[0], 0) == 4);
  CHECK(peak_in_flight(four.programs[0], 1) == 2);
  CHECK_THROWS_AS(interleaved_schedule(2, 3, 2), UserError);  // m not a multiple of p
  CHECK_THROWS_AS(interleaved_schedule(1, 4, 2), UserError);
  // a chunk's message sent to the wrong chunk is caught
  PipeSchedule wrong = interleaved_schedule(2, 4, 2);
  insert_communication(wrong);
  for (auto& in : wrong.programs[1])
    if (in.op == PipeOp::RecvAct && in.chunk == 1 && in.mb == 2) in.chunk = 0;
  CHECK(check_schedule(wrong) != "");
}

TEST_CASE("an evaluation's forward-only list: every part's forwards in model order, deadlock-free",
          "[pipeline][schedule]") {
  for (int p = 1; p <= 4; ++p)
    for (int v = 1; v <= 3; ++v)
      for (int m : {1, 3}) {
        INFO("p=" << p << " v=" << v << " m=" << m);
        const PipeSchedule s = forward_only_schedule(p, m, v);
        REQUIRE_FALSE(simulate_schedule(s).deadlock);
        for (int r = 0; r < p; ++r) {
          int forwards = 0;
          for (const auto& in : s.programs[size_t(r)]) {
            CHECK((in.op == PipeOp::Forward || in.op == PipeOp::SendAct || in.op == PipeOp::RecvAct));
            forwards += in.op == PipeOp::Forward;
          }
          CHECK(forwards == v * m);
        }
      }
  // stage 1's chunk 0 hands on to stage 0's chunk 1
  CHECK(to_string(forward_only_schedule(2, 1, 2)) ==
        "interleaved: 2 stages x 2 chunks, 1 micro-batches\n"
        "stage 0: F0 SEND_ACT0->1 RECV_ACT0.1<-1 F0.1 SEND_ACT0.1->1\n"
        "stage 1: RECV_ACT0<-0 F0 SEND_ACT0->0 RECV_ACT0.1<-0 F0.1\n");
}

TEST_CASE("XPipe: valid, deadlock-free, and its derived prediction steps match the paper for T = 1",
          "[pipeline][schedule][xpipe]") {
  for (int p = 1; p <= 4; ++p) {
    const int mini_batches = 3 * p + 2;
    const PipeSchedule s = xpipe_schedule(p, 1, mini_batches);
    INFO("p=" << p << "\n" << to_string(s));
    CHECK(check_schedule(s) == "");
    REQUIRE_FALSE(simulate_schedule(s).deadlock);
    for (int r = 0; r < p; ++r) {
      StageProgram prog;  // compute only: each PREDICT directly before its pass
      for (const auto& in : s.programs[r])
        if (in.op != PipeOp::RecvAct && in.op != PipeOp::RecvGrad && in.op != PipeOp::SendAct &&
            in.op != PipeOp::SendGrad)
          prog.push_back(in);
      for (size_t k = 0; k + 1 < prog.size(); ++k) {
        if (prog[k].op != PipeOp::PredictWeights) continue;
        const int n = prog[k + 1].mb;
        if (n < p || n >= mini_batches - p) continue;  // steady state only (no fill, no drain)
        const bool forward = prog[k + 1].op == PipeOp::Forward;
        INFO("stage " << r << ", " << to_string(prog[k + 1]));
        // Forward: the paper's s_f = p-1-floor(r/2) on every stage. Backward: the paper's
        // s_b = floor(r/2) on even stages; on odd stages the list's timing puts the stage's
        // own update of this mini-batch before stage 0 finishes it, one more (docs/parallelism.md).
        CHECK(prog[k].steps == (forward ? p - 1 - r / 2 : r / 2 + r % 2));
      }
    }
  }
  for (int p = 2; p <= 4; ++p)
    for (int t : {2, 3}) {
      const PipeSchedule s = xpipe_schedule(p, t, 4);
      INFO("p=" << p << " T=" << t);
      CHECK(check_schedule(s) == "");
      CHECK_FALSE(simulate_schedule(s).deadlock);
    }
}

TEST_CASE("XPipe: the tied embedding goes from the last stage to the first and back", "[pipeline][schedule][xpipe]") {
  CHECK(to_string(xpipe_schedule(1, 2, 3)).find("TIED") == std::string::npos);  // one stage holds both ends
  for (int p = 2; p <= 4; ++p)
    for (int t = 1; t <= 3; ++t) {
      const int k = 5;
      const PipeSchedule s = xpipe_schedule(p, t, k);
      INFO("p=" << p << " T=" << t << "\n" << to_string(s));
      // first stage: the last stage's share arrives just before each update, the new version leaves after it
      const auto& first = s.programs[0];
      int steps = 0;
      for (size_t i = 0; i < first.size(); ++i)
        if (first[i].op == PipeOp::OptimizerStep) {
          REQUIRE(i > 0);
          REQUIRE(i + 1 < first.size());
          CHECK(first[i - 1] == PipeInstr{PipeOp::RecvTiedGrad, first[i].mb, p - 1});
          CHECK(first[i + 1] == PipeInstr{PipeOp::SendTiedWeights, first[i].mb, p - 1});
          ++steps;
        }
      CHECK(steps == k);
      // last stage: version n is taken after its own share of n left, in order, never inside
      // a predicted pass, all of them by the end; and every pass looks ahead from the version
      // it holds to the first stage's version at the target, which is n for mini-batch n
      const auto& last = s.programs[p - 1];
      int shares = 0, taken = 0;
      bool in_pass = false;
      for (size_t i = 0; i < last.size(); ++i) {
        const PipeInstr& in = last[i];
        if (in.op == PipeOp::SendTiedGrad) CHECK(in.mb == shares++);
        if (in.op == PipeOp::RecvTiedWeights) {
          CHECK(in.mb == taken++);
          CHECK(taken <= shares);
          CHECK_FALSE(in_pass);
        }
        if (in.op == PipeOp::PredictWeights) {
          in_pass = true;
          size_t pass = i + 1;
          while (last[pass].op != PipeOp::Forward && last[pass].op != PipeOp::Backward) ++pass;
          CHECK(in.tied_steps >= 0);
          CHECK(taken + in.tied_steps == last[pass].mb / t);
        }
        if (in.op == PipeOp::RestoreWeights) in_pass = false;
      }
      CHECK(taken == k);
      CHECK(check_schedule(s) == "");
    }
}

TEST_CASE("XPipe: a stream can end early, every stage switching lists where the stop is known",
          "[pipeline][schedule][xpipe]") {
  for (int p = 2; p <= 4; ++p)
    for (int t : {1, 2, 4})
      for (int k = 2; k <= 9; ++k) {
        const PipeSchedule full = make_schedule(Schedule::XPipe, p, t, k);
        const int lookahead = xpipe_stop_lookahead(full);
        CHECK(lookahead >= 1);
        CHECK(lookahead <= (p + t - 1) / t + 1);  // about p / T mini-batches: the stop costs little
        for (int shorter = lookahead + 1; shorter < k; ++shorter) {
          const PipeSchedule cut = make_schedule(Schedule::XPipe, p, t, shorter);
          for (int r = 0; r < p; ++r) {
            INFO("p=" << p << " T=" << t << " k=" << k << " stopped at " << shorter << " stage " << r);
            const StageProgram& a = full.programs[r];
            const StageProgram& b = cut.programs[r];
            const size_t at = forward_pass_start(a, t * shorter - 1);
            REQUIRE(at < b.size());
            // up to the switch the lists agree in everything but the predictions' look-ahead
            for (size_t i = 0; i <= at; ++i) {
              CHECK(a[i].op == b[i].op);
              CHECK(a[i].mb == b[i].mb);
              CHECK(a[i].peer == b[i].peer);
            }
            // the update whose stop agreement decides this switch was made before it
            size_t update = a.size();
            for (size_t i = 0; i < a.size(); ++i)
              if (a[i].op == PipeOp::OptimizerStep && a[i].mb == shorter - 1 - lookahead) update = i;
            CHECK(update < at);
          }
        }
      }
}

TEST_CASE("the checks catch broken schedules", "[pipeline][schedule]") {
  PipeSchedule s = make_schedule(Schedule::OneFOneB, 3, 4);
  PipeSchedule again = s;
  insert_communication(again);
  CHECK(again.programs == s.programs);  // the pass is idempotent

  // stage 1 receives micro-batches 0 and 1 in the wrong order
  PipeSchedule swapped = s;
  auto& prog = swapped.programs[1];
  auto first = std::find(prog.begin(), prog.end(), PipeInstr{PipeOp::RecvAct, 0, 0});
  auto second = std::find(prog.begin(), prog.end(), PipeInstr{PipeOp::RecvAct, 1, 0});
  REQUIRE(first != prog.end());
  REQUIRE(second != prog.end());
  std::iter_swap(first, second);
  CHECK(check_schedule(swapped) != "");

  // the last stage runs its backwards before its forwards: a backward without forward
  PipeSchedule backwards_first = gpipe_schedule(2, 2);
  std::reverse(backwards_first.programs[1].begin(), backwards_first.programs[1].end() - 1);
  CHECK(check_schedule(backwards_first) != "");

  // stage 0 waits for a gradient before sending the activation it depends on: deadlock
  PipeSchedule stuck = make_schedule(Schedule::GPipe, 2, 1);
  stuck.programs[0].insert(stuck.programs[0].begin(), PipeInstr{PipeOp::RecvGrad, 0, 1});
  const PipeSimulation sim = simulate_schedule(stuck);
  CHECK(sim.deadlock);
  CHECK(sim.deadlock_report.find("stage 0 waits at RECV_GRAD0<-1") != std::string::npos);

  // a weight half before its input half, and one missing
  PipeSchedule early = zb_h1_schedule(2, 2);
  auto& p0 = early.programs[0];
  auto input0 = std::find(p0.begin(), p0.end(), PipeInstr{PipeOp::BackwardInput, 0});
  auto weight0 = std::find(p0.begin(), p0.end(), PipeInstr{PipeOp::BackwardWeight, 0});
  REQUIRE(input0 < weight0);
  std::iter_swap(input0, weight0);
  CHECK(check_schedule(early).find("W0 before its input half") != std::string::npos);
  PipeSchedule missing = zb_h1_schedule(2, 2);
  missing.programs[1].erase(
      std::find(missing.programs[1].begin(), missing.programs[1].end(), PipeInstr{PipeOp::BackwardWeight, 1}));
  CHECK(check_schedule(missing).find("micro-batch 1 runs 1 forwards, 0 backwards and 1 + 0 halves") !=
        std::string::npos);
}
