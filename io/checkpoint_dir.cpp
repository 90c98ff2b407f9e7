#include "io/checkpoint_dir.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <vector>

#include "core/error.hpp"

namespace strata {

void make_directories(const std::string& path) {
  std::string cur;
  for (size_t i = 0; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/') {
      if (!cur.empty() && ::mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST)
        throw UserError("cannot create run directory '" + path + "'");
    }
    if (i < path.size()) cur += path[i];
  }
}

namespace {

void fsync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw std::runtime_error("cannot open " + path + " to sync it");
  ::fsync(fd);
  ::close(fd);
}

void rename_or_throw(const std::string& from, const std::string& to) {
  if (std::rename(from.c_str(), to.c_str()) != 0) throw std::runtime_error("cannot rename " + from + " to " + to);
}

}  // namespace

std::string CheckpointDirectory::file_name(int64_t step) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "ckpt_%08lld.h5", static_cast<long long>(step));
  return buf;
}

void CheckpointDirectory::publish(int64_t step, int64_t keep) const {
  const std::string tmp = temp_path(step), final_file = final_path(step);
  fsync_path(tmp);
  rename_or_throw(tmp, final_file);
  fsync_path(dir_);
  const std::string latest_tmp = dir_ + "/LATEST.tmp";
  {
    std::ofstream out(latest_tmp, std::ios::trunc);
    out << file_name(step) << "\n";
    if (!out) throw std::runtime_error("cannot write " + latest_tmp);
  }
  fsync_path(latest_tmp);
  rename_or_throw(latest_tmp, dir_ + "/LATEST");
  fsync_path(dir_);
  // Prune complete checkpoints beyond the newest `keep` (the one just published counts).
  std::vector<std::string> complete;
  if (DIR* d = ::opendir(dir_.c_str())) {
    while (dirent* e = ::readdir(d)) {
      const std::string n = e->d_name;
      if (n.size() == file_name(0).size() && n.rfind("ckpt_", 0) == 0 && n.compare(n.size() - 3, 3, ".h5") == 0)
        complete.push_back(n);
    }
    ::closedir(d);
  }
  std::sort(complete.begin(), complete.end());
  for (size_t i = 0; keep > 0 && i + size_t(keep) < complete.size(); ++i)
    if (complete[i] != file_name(step)) std::remove((dir_ + "/" + complete[i]).c_str());
}

std::optional<std::string> CheckpointDirectory::latest() const {
  std::ifstream in(dir_ + "/LATEST");
  if (!in) return std::nullopt;
  std::string name;
  std::getline(in, name);
  const std::string path = dir_ + "/" + name;
  if (name.empty() || !std::ifstream(path))
    throw UserError(dir_ + "/LATEST names '" + name + "', which does not exist");
  return path;
}

}  // namespace strata
