#pragma once
// strata's sub-commands (train, plan, calibrate, deck, inspect, generate, export,
// tokenize): each one's options on the command line (CLI11) and its run, in a file of its
// own (*_command.cpp). app/main.cpp starts MPI and Kokkos, parses, runs the one given and
// turns its errors into exit codes.
#include <CLI/CLI.hpp>

#include <memory>
#include <string>
#include <vector>

namespace strata {

class Command {
 public:
  virtual ~Command() = default;
  // Adds the sub-command and its options to app.
  virtual CLI::App* add_to(CLI::App& app) = 0;
  // Runs it (every rank; after parsing). Returns the exit code (core/error.hpp).
  virtual int run(int rank) = 0;
  // Whether an error after set-up may be seen by one rank alone (a training run): that rank
  // reports it and the job is aborted. Elsewhere every rank sees the same errors.
  virtual bool rank_local_errors() const { return false; }
};

// Every sub-command, in the order --help lists them.
std::vector<std::unique_ptr<Command>> strata_commands();

// A deck argument and its --set overrides, as every sub-command that reads a deck takes them.
struct DeckArgs {
  std::string path;
  std::vector<std::string> overrides;
  void add_to(CLI::App& sub, const char* what = "deck file (TOML)", bool required = true);
};

// The footer of every help text: Kokkos' options and the exit codes.
extern const char* const kHelpFooter;

}  // namespace strata
