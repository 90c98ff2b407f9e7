// strata calibrate DECK [--out MACHINE.toml] [--name NAME]   (with the ranks of one node)
#include <cstdio>
#include <fstream>

#include "cli/command.hpp"
#include "core/error.hpp"
#include "model/model_kind.hpp"
#include "plan/calibrate.hpp"
#include "plan/machine_file.hpp"

namespace strata {
namespace {

class CalibrateCommand : public Command {
 public:
  CLI::App* add_to(CLI::App& app) override {
    auto* sub = app.add_subcommand(
        "calibrate",
        "measure this machine's GEMM rate at a deck's shapes, memory bandwidth and MPI costs (alpha, "
        "beta) and write a machine file for the planner; run with the ranks of one node");
    deck_.add_to(*sub, "deck file (TOML): the model whose shapes to measure");
    sub->add_option("--out", out_, "machine file to write (default: print it)");
    sub->add_option("--name", name_, "the machine's name in the file");
    return sub;
  }

  // Every rank measures; rank 0 prints the measurements and writes the machine file.
  int run(int rank) override {
    const Deck deck = load_model_deck(deck_.path, deck_.overrides);
    if (!out_.empty() && rank == 0) {  // refuse an unwritable path before measuring
      std::ofstream probe(out_, std::ios::app);
      if (!probe) throw UserError("cannot write the machine file '" + out_ + "'");
    }
    const Calibration cal = calibrate(deck, MPI_COMM_WORLD, name_);
    if (rank != 0) return kExitOk;
    std::printf("gemm at the model's shapes (GFLOP/s, one rank):\n");
    for (const auto& [shape, gf] : cal.gemm) std::printf("  %-24s %8.1f\n", shape.c_str(), gf);
    if (!cal.samples.empty()) {
      std::printf("%-10s %12s %14s %14s\n", "link", "bytes", "measured_us", "fitted_us");
      for (const auto& s : cal.samples)
        std::printf("%-10s %12.0f %14.2f %14.2f\n", s.kind.c_str(), s.bytes, s.seconds * 1e6, s.fitted * 1e6);
    }
    const std::string toml = to_toml(cal.machine);
    if (out_.empty()) {
      std::printf("\n%s", toml.c_str());
    } else {
      std::ofstream os(out_);
      os << toml;
      if (!os) throw UserError("cannot write the machine file '" + out_ + "'");
      std::printf("strata: machine file %s written\n", out_.c_str());
    }
    return kExitOk;
  }

 private:
  DeckArgs deck_;
  std::string out_, name_ = "this machine";
};

}  // namespace

std::unique_ptr<Command> calibrate_command() { return std::make_unique<CalibrateCommand>(); }

}  // namespace strata
