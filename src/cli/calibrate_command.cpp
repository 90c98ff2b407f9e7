// strata calibrate DECK [--out MACHINE.toml] [--name NAME] [--repeats N] [--max-spread F]
//                       [--accept-noisy]   (with the ranks of one node, or of 2 or more)
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "cli/command.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "io/atomic_file.hpp"
#include "model/model_kind.hpp"
#include "plan/calibrate.hpp"
#include "plan/machine_file.hpp"

namespace strata {
namespace {

// Above this share of the node's core time in other processes, the node was not quiet.
constexpr double kMostOtherLoad = 0.10;
// A rate whose repeats spread more than this gets a warning line.
constexpr double kWarnSpread = 0.10;

class CalibrateCommand : public Command {
 public:
  CLI::App* add_to(CLI::App& app) override {
    auto* sub = app.add_subcommand(
        "calibrate",
        "measure this machine's GEMM rate at a deck's shapes, memory bandwidth and MPI costs (alpha, "
        "beta) and write a machine file for the planner; run with the ranks of one node (one per core or GPU), "
        "or of 2 or more nodes to measure the links between nodes too");
    deck_.add_to(*sub, "deck file (TOML): the model whose shapes to measure");
    sub->add_option("--out", out_, "machine file to write (default: print it)");
    sub->add_option("--name", name_, "the machine's name in the file");
    sub->add_option("--repeats", repeats_, "measure each rate this many times and keep the best (default 5)")
        ->check(CLI::Range(1, 100));
    sub->add_option("--max-spread", max_spread_,
                    "refuse to write the file when a rate's repeats differ by more than this fraction of the best "
                    "(default 0.5)")
        ->check(CLI::Range(0.0, 1.0));
    sub->add_flag("--accept-noisy", accept_noisy_,
                  "write the file from a noisy node (other processes busy, or rates past --max-spread) all the same");
    return sub;
  }

  // Every rank measures and reaches the same verdict; rank 0 prints the measurements and
  // writes the machine file.
  int run(int rank) override {
    const Deck deck = load_model_deck(deck_.path, deck_.overrides);
    if (!out_.empty() && rank == 0) {  // refuse an unwritable folder before measuring (the file goes in whole)
      const std::filesystem::path folder = std::filesystem::path(out_).parent_path();
      if (::access(folder.empty() ? "." : folder.c_str(), W_OK | X_OK) != 0)
        throw UserError("cannot write the machine file '" + out_ + "'");
    }
    Calibration cal = calibrate(deck, MPI_COMM_WORLD, name_, repeats_);
    const std::string noise = noise_of(cal);
    if (rank == 0) print(cal);
    if (!noise.empty() && !accept_noisy_)
      throw StrataError("the node was not quiet while calibrate measured it: " + noise +
                            "; no machine file written (run it on a quiet node, or pass --accept-noisy)",
                        kExitNoisyMeasurement, true);
    if (!noise.empty()) cal.machine.source += "; noisy, written with --accept-noisy: " + noise;
    if (rank != 0) return kExitOk;
    if (!noise.empty()) std::printf("strata: warning: %s; the machine file is written all the same\n", noise.c_str());
    const std::string toml = to_toml(cal.machine);
    if (out_.empty()) {
      std::printf("\n%s", toml.c_str());
    } else {
      write_file_atomically(out_, toml.data(), toml.size());
      std::printf("strata: machine file %s written\n", out_.c_str());
    }
    return kExitOk;
  }

 private:
  // What made the measurements noisy, in words; "" for a quiet node.
  std::string noise_of(const Calibration& cal) const {
    std::string why;
    const auto add = [&](const std::string& s) { why += (why.empty() ? "" : "; ") + s; };
    if (cal.other_load > kMostOtherLoad)
      add(strfmt("other processes used %.0f%% of the node's cores (at most %.0f%%)", 100 * cal.other_load,
                 100 * kMostOtherLoad));
    for (const auto& r : cal.repeated)
      if (r.spread() > max_spread_)
        add(strfmt("%s moved %.0f%% between its %d repeats (--max-spread %.2f)", r.name.c_str(), 100 * r.spread(),
                   cal.repeats, max_spread_));
    return why;
  }

  static void print(const Calibration& cal) {
    std::printf("gemm at the model's shapes (GFLOP/s, one rank, the best repeat):\n");
    for (const auto& [shape, gf] : cal.gemm) std::printf("  %-24s %8.1f\n", shape.c_str(), gf);
    std::printf("repeats (%d; the best is kept, the ranks' mean in each):\n  %-30s %12s %12s %8s\n", cal.repeats,
                "rate", "best", "worst", "spread");
    for (const auto& r : cal.repeated)
      std::printf("  %-30s %12.4g %12.4g %7.1f%%%s\n", r.name.c_str(), r.best, r.worst, 100 * r.spread(),
                  r.spread() > kWarnSpread ? "  (over 10%: a busy minute?)" : "");
    if (cal.other_load >= 0)
      std::printf("other processes: %.1f%% of the node's cores while calibrate measured\n", 100 * cal.other_load);
    else
      std::printf("other processes: not measured (no /proc/stat)\n");
    if (!cal.samples.empty()) {
      std::printf("%-16s %12s %14s %14s\n", "link", "bytes", "measured_us", "fitted_us");
      for (const auto& s : cal.samples)
        std::printf("%-16s %12.0f %14.2f %14.2f\n", s.kind.c_str(), s.bytes, s.seconds * 1e6, s.fitted * 1e6);
    }
  }

  DeckArgs deck_;
  std::string out_, name_ = "this machine";
  int repeats_ = 5;
  double max_spread_ = 0.5;
  bool accept_noisy_ = false;
};

}  // namespace

std::unique_ptr<Command> calibrate_command() { return std::make_unique<CalibrateCommand>(); }

}  // namespace strata
