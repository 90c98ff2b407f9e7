// The checkpoints folder's bookkeeping without MPI: publication, undo on failure, pruning
// in the order a run wrote its checkpoints, never the one it restarted from.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "checkpoint/checkpoint_dir.hpp"
#include "core/error.hpp"
#include "io/run_lock.hpp"

using namespace strata;

namespace {
std::string fresh_dir(const std::string& name) {
  const std::string dir =
      std::filesystem::temp_directory_path().string() + "/strata-test-" + name + "-" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  make_directories(dir);
  return dir;
}
void touch(const std::string& path) { std::ofstream(path) << "x"; }
bool exists(const std::string& path) { return std::filesystem::exists(path); }
}  // namespace

TEST_CASE("publish renames, updates LATEST and keeps the rest; prune keeps this run's newest and the restart",
          "[io][checkpoint]") {
  const std::string dir = fresh_dir("ckdir");
  const CheckpointDirectory d(dir);
  // found in the folder: steps 300 and 400 of an earlier (diverged) trajectory, and 200
  for (int s : {200, 300, 400}) touch(d.final_path(s));
  touch(d.temp_path(250));
  d.publish(250);
  CHECK(*d.latest_name() == "ckpt_00000250.h5");
  CHECK_FALSE(exists(d.temp_path(250)));
  CHECK(d.complete_steps() == std::vector<int64_t>{200, 250, 300, 400});
  // this run restarted from 200 and wrote 250 and 260: keep 2 -> this run's two stay,
  // the files found before go first, and 200 is kept on top
  touch(d.temp_path(260));
  d.publish(260);
  const auto deleted = d.prune(2, {250, 260}, d.final_path(200));
  CHECK(deleted == std::vector<std::string>{"ckpt_00000300.h5", "ckpt_00000400.h5"});
  CHECK(d.complete_steps() == std::vector<int64_t>{200, 250, 260});
  // publishing a step whose temporary file is missing fails, and LATEST stays
  CHECK_THROWS_AS(d.publish(270), IoError);
  CHECK(*d.latest_name() == "ckpt_00000260.h5");
  CHECK(d.free_bytes() > 0);
  std::filesystem::remove_all(dir);
}

TEST_CASE("a run directory's lock admits one holder and names it", "[io][lock]") {
  const std::string dir = fresh_dir("lock");
  {
    RunLock first(dir);
    try {
      RunLock second(dir);  // flock locks are per open file: a second open in one process conflicts too
      FAIL("the second lock was granted");
    } catch (const UserError& e) {
      CHECK(std::string(e.what()).find("is in use by another job (host ") != std::string::npos);
      CHECK(std::string(e.what()).find("pid " + std::to_string(::getpid())) != std::string::npos);
    }
  }
  RunLock again(dir);  // released with its holder
  std::filesystem::remove_all(dir);
}
