// strata deck DECK [--set ...]   |   strata deck --reference
#include <iostream>

#include "cli/command.hpp"
#include "core/deck.hpp"
#include "core/deck_keys.hpp"
#include "core/error.hpp"
#include "model/model_kind.hpp"

namespace strata {
namespace {

class DeckCommand : public Command {
 public:
  CLI::App* add_to(CLI::App& app) override {
    auto* sub = app.add_subcommand(
        "deck", "check a deck and print it resolved (defaults and --set applied), or print the reference of every key");
    deck_.add_to(*sub, "deck file (TOML)", false);
    sub->add_flag("--reference", reference_,
                  "print every key's type, default, allowed values and meaning (Markdown; docs/deck.md)");
    return sub;
  }

  int run(int rank) override {
    if (reference_ == !deck_.path.empty()) throw UserError("strata deck: give a deck file, or --reference (not both)");
    const std::string text = reference_ ? deck_reference(model_deck_keys()) + model_kinds_reference()
                                        : load_model_deck(deck_.path, deck_.overrides).resolved_toml;
    if (rank == 0) std::cout << text << std::flush;
    return kExitOk;
  }

 private:
  DeckArgs deck_;
  bool reference_ = false;
};

}  // namespace

std::unique_ptr<Command> deck_command() { return std::make_unique<DeckCommand>(); }

}  // namespace strata
