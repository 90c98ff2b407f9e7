// strata plan DECK --schedule [--stage-costs RUN/stages.csv] [--set ...]
// strata plan DECK --ranks N [--machine MACHINE.toml] [--top K] [--set ...]
// strata plan DECK --cores C [--machine MACHINE.toml] [--set ...]
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
    sub->add_option("--stage-costs", stage_costs_,
                    "with --schedule: a pipeline run's stages.csv; simulate the deck's schedule with the stage "
                    "costs that run measured and print the seconds per step of \"order\" and \"ready\"");
    sub->add_option("--ranks", ranks_,
                    "predict every layout data x pipeline x tensor (1D, 2D) x schedule of N ranks and recommend one")
        ->check(CLI::PositiveNumber);
    sub->add_option("--cores", cores_,
                    "weigh C cores as ranks x threads (every thread count that divides a node's cores) and "
                    "recommend one")
        ->check(CLI::PositiveNumber);
    sub->add_option("--machine", machine_, "machine file (strata calibrate; machines/*.toml)")->capture_default_str();
    sub->add_option("--top", top_, "layouts to show, fastest first (0: all)")->capture_default_str();
    return sub;
  }

  int run(int rank) override {
    if (!stage_costs_.empty() && !schedule_) throw UserError("strata plan: --stage-costs goes with --schedule");
    if (int(schedule_) + int(ranks_ > 0) + int(cores_ > 0) != 1)
      throw UserError(
          "strata plan: say what to plan, one of: --schedule (the deck's pipeline schedule), --ranks N "
          "(the best layout for N ranks), --cores C (the best ranks x threads for C cores)");
    if (schedule_) {
      const Deck deck = load_model_deck(deck_.path, deck_.overrides);
      if (rank == 0) print_schedule_plan(deck, std::cout, stage_costs_);
      return kExitOk;
    }
    // the deck's own [parallel] layout need not fit N ranks: the planner chooses one
    std::vector<std::string> serial = {"parallel.data=1",        "parallel.pipeline=1",      "parallel.tensor_rows=1",
                                       "parallel.tensor_cols=1", "parallel.micro_batches=1", "parallel.expert=1"};
    serial.insert(serial.end(), deck_.overrides.begin(), deck_.overrides.end());
    const Deck deck = load_model_deck(deck_.path, serial, KeyEffect::Ignore);  // (its layout keys are the planner's)
    if (!is_gpt(deck.model)) throw UserError("strata plan --ranks/--cores: plans GPT decks (model.kind = \"gpt\")");
    const MachineFile machine = read_machine_file(machine_);
    if (rank == 0 && cores_ > 0) print_thread_plan(deck, cores_, machine, std::cout);
    if (rank == 0 && ranks_ > 0) print_layout_plan(deck, ranks_, machine, std::cout, top_);
    return kExitOk;
  }

 private:
  DeckArgs deck_;
  bool schedule_ = false;
  std::string stage_costs_;
  int ranks_ = 0, cores_ = 0, top_ = 20;
  std::string machine_ = machines_dir() + "/debian-2core-vm.toml";
};

}  // namespace

std::unique_ptr<Command> plan_command() { return std::make_unique<PlanCommand>(); }

}  // namespace strata
