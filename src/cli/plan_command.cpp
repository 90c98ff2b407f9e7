// strata plan DECK --schedule [--set ...]
// strata plan DECK --ranks N [--machine MACHINE.toml] [--top K] [--set ...]
#include <iostream>

#include "cli/build_info.hpp"
#include "cli/command.hpp"
#include "cli/plan_schedule.hpp"
#include "core/error.hpp"
#include "model/model_kind.hpp"
#include "plan/machine_file.hpp"
#include "plan/plan_report.hpp"

namespace strata {
namespace {

class PlanCommand : public Command {
 public:
  CLI::App* add_to(CLI::App& app) override {
    auto* sub = app.add_subcommand("plan", "print what a deck would run, without running it");
    deck_.add_to(*sub);
    sub->add_flag("--schedule", schedule_,
                  "the pipeline schedule: every stage's instructions and a unit-cost simulation of them");
    sub->add_option("--ranks", ranks_,
                    "predict every layout data x pipeline x tensor (1D, 2D) x schedule of N ranks and recommend one")
        ->check(CLI::PositiveNumber);
    sub->add_option("--machine", machine_, "machine file (strata calibrate; machines/*.toml)")->capture_default_str();
    sub->add_option("--top", top_, "layouts to show, fastest first (0: all)")->capture_default_str();
    return sub;
  }

  int run(int rank) override {
    if (schedule_ == (ranks_ > 0))
      throw UserError(
          "strata plan: say what to plan: --schedule (the deck's pipeline schedule) or --ranks N "
          "(the best layout for N ranks)");
    if (schedule_) {
      const Deck deck = load_model_deck(deck_.path, deck_.overrides);
      if (rank == 0) print_schedule_plan(deck, std::cout);
      return kExitOk;
    }
    // the deck's own [parallel] layout need not fit N ranks: the planner chooses one
    std::vector<std::string> serial = {"parallel.data=1",        "parallel.pipeline=1",      "parallel.tensor_rows=1",
                                       "parallel.tensor_cols=1", "parallel.micro_batches=1", "parallel.expert=1"};
    serial.insert(serial.end(), deck_.overrides.begin(), deck_.overrides.end());
    const Deck deck = load_model_deck(deck_.path, serial);
    if (!deck.model.is_gpt()) throw UserError("strata plan --ranks: plans GPT decks (model.kind = \"gpt\")");
    const MachineFile machine = read_machine_file(machine_);
    if (rank == 0) print_layout_plan(deck, ranks_, machine, std::cout, top_);
    return kExitOk;
  }

 private:
  DeckArgs deck_;
  bool schedule_ = false;
  int ranks_ = 0, top_ = 20;
  std::string machine_ = machines_dir() + "/debian-2core-vm.toml";
};

}  // namespace

std::unique_ptr<Command> plan_command() { return std::make_unique<PlanCommand>(); }

}  // namespace strata
