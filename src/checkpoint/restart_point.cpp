#include "checkpoint/restart_point.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <ctime>

#include "checkpoint/checkpoint_dir.hpp"
#include "checkpoint/model_checkpoint.hpp"
#include "comm/agree.hpp"
#include "comm/control.hpp"
#include "core/error.hpp"

namespace strata {
namespace {

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

RestartPoint decide(const std::string& restart, bool fresh, const std::string& run_dir,
                    const ParamStore<float>& params) {
  if (fresh && !restart.empty())
    throw UserError("--fresh starts over; it cannot be combined with --restart " + restart);
  if (restart.empty() || restart == "latest") {
    if (run_dir.empty()) {
      if (restart == "latest") throw UserError("--restart latest needs the run directory (outputs are off)");
      return {};
    }
  }
  const CheckpointDirectory dir(run_dir + "/checkpoints");
  if (restart.empty()) {
    const auto steps = run_dir.empty() ? std::vector<int64_t>{} : dir.complete_steps();
    if (steps.empty() && !dir.latest_name()) return {};
    const std::string newest = steps.empty() ? "LATEST" : CheckpointDirectory::file_name(steps.back());
    if (!fresh)
      throw UserError("run directory '" + run_dir + "' already has checkpoints (newest " + newest +
                      "): resume with --restart latest, or start over with --fresh (which keeps them aside)");
    char when[32];
    const std::time_t now = std::time(nullptr);
    std::strftime(when, sizeof when, "%Y%m%d-%H%M%S", std::localtime(&now));
    const std::string aside = run_dir + "/checkpoints.replaced-" + when;
    if (std::rename(dir.dir().c_str(), aside.c_str()) != 0)
      throw UserError("--fresh: cannot move " + dir.dir() + " aside to " + aside);
    return {"", "--fresh: the previous checkpoints are kept in " + aside};
  }
  if (restart != "latest") return {restart, ""};
  const auto latest = dir.latest_name();
  if (latest && !latest->empty() && exists(dir.dir() + "/" + *latest)) return {dir.dir() + "/" + *latest, ""};
  auto steps = dir.complete_steps();
  const std::string why = latest ? "LATEST names '" + *latest + "', which does not exist" : "there is no LATEST file";
  if (steps.empty()) return {"", "no checkpoint in " + dir.dir() + ": starting fresh"};
  std::string rejected;
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    const std::string path = dir.final_path(*it);
    const std::string problem = check_checkpoint_file(path, params, *it);
    if (problem.empty())
      return {path, why + ": restarting from the newest checkpoint that checks out, " +
                        CheckpointDirectory::file_name(*it) +
                        (rejected.empty() ? "" : " (passed over:" + rejected + ")")};
    rejected += " " + CheckpointDirectory::file_name(*it) + ": " + problem + ";";
  }
  throw UserError("--restart latest: " + why + ", and no checkpoint in " + dir.dir() + " checks out:" + rejected);
}

}  // namespace

RestartPoint choose_restart_point(const std::string& restart, bool fresh, const std::string& run_dir,
                                  const ParamStore<float>& params, MPI_Comm world) {
  int rank = 0;
  MPI_Comm_rank(world, &rank);
  RestartPoint p;
  agreed(world, [&] {
    if (rank == 0) p = decide(restart, fresh, run_dir, params);
  });
  broadcast_string(world, p.path);
  broadcast_string(world, p.note);
  return p;
}

}  // namespace strata
