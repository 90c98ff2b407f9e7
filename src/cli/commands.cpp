#include "cli/command.hpp"

namespace strata {

std::unique_ptr<Command> train_command();
std::unique_ptr<Command> plan_command();
std::unique_ptr<Command> calibrate_command();
std::unique_ptr<Command> deck_command();
std::unique_ptr<Command> inspect_command();
std::unique_ptr<Command> generate_command();
std::unique_ptr<Command> export_command();
std::unique_ptr<Command> tokenize_command();

const char* const kHelpFooter =
    "--threads N (before or after the sub-command): the threads each rank runs (Kokkos, OpenBLAS and oneDNN "
    "alike); default OMP_NUM_THREADS, else the CPUs the launcher gave the rank.\nKokkos' options "
    "(--kokkos-device-id, ...) are accepted too: strata --kokkos-help lists them.\nExit codes: 0 done (also a stop "
    "with a checkpoint), 1 internal error, 2 bad input, 3 corrupt "
    "checkpoint (inspect), 4 an output could not be written, 5 diverged, 128 + signal ended without a checkpoint.";

void DeckArgs::add_to(CLI::App& sub, const char* what, bool required) {
  auto* deck = sub.add_option("deck", path, what);
  if (required) deck->required();
  sub.add_option("--set", overrides, "override a deck key: section.key=value (repeatable)");
}

std::vector<std::unique_ptr<Command>> strata_commands() {
  std::vector<std::unique_ptr<Command>> all;
  all.push_back(train_command());
  all.push_back(plan_command());
  all.push_back(calibrate_command());
  all.push_back(deck_command());
  all.push_back(inspect_command());
  all.push_back(generate_command());
  all.push_back(export_command());
  all.push_back(tokenize_command());
  return all;
}

}  // namespace strata
