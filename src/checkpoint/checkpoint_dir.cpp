#include "checkpoint/checkpoint_dir.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "core/error.hpp"

namespace strata {

void make_directories(const std::string& path) {
  std::string cur;
  for (size_t i = 0; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/') {
      if (!cur.empty() && ::mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST)
        throw UserError("cannot create run directory '" + path + "': " + std::strerror(errno));
    }
    if (i < path.size()) cur += path[i];
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw UserError("cannot create run directory '" + path + "': a file of that name is in the way");
}

namespace {

[[noreturn]] void io_failure(const std::string& what) { throw IoError(what + ": " + std::strerror(errno)); }

void fsync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) io_failure("cannot open " + path + " to sync it");
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    errno = err;
    io_failure("fsync of " + path + " failed");
  }
  if (::close(fd) != 0) io_failure("closing " + path + " failed");
}

void rename_or_throw(const std::string& from, const std::string& to) {
  if (std::rename(from.c_str(), to.c_str()) != 0) io_failure("cannot rename " + from + " to " + to);
}

void write_file(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) io_failure("cannot create " + path);
  const ssize_t n = ::write(fd, text.data(), text.size());
  if (n != ssize_t(text.size())) {
    const int err = n < 0 ? errno : ENOSPC;  // a short write: the device is full
    ::close(fd);
    errno = err;
    io_failure("cannot write " + path);
  }
  if (::close(fd) != 0) io_failure("closing " + path + " failed");
}

}  // namespace

std::string CheckpointDirectory::file_name(int64_t step) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "ckpt_%08lld.h5", static_cast<long long>(step));
  return buf;
}

void CheckpointDirectory::publish(int64_t step) const {
  const std::string tmp = temp_path(step), final_file = final_path(step), latest = dir_ + "/LATEST",
                    latest_tmp = latest + ".tmp";
  const std::optional<std::string> previous = latest_name();
  bool renamed = false, latest_replaced = false;
  try {
    fsync_path(tmp);
    rename_or_throw(tmp, final_file);
    renamed = true;
    fsync_path(dir_);
    write_file(latest_tmp, file_name(step) + "\n");
    fsync_path(latest_tmp);
    rename_or_throw(latest_tmp, latest);
    latest_replaced = true;
    fsync_path(dir_);
  } catch (...) {
    // Undo: LATEST names the previous checkpoint again and the new file goes, so nothing
    // is left whose publication was not confirmed by the file system (best effort: the
    // file system is failing).
    if (latest_replaced) {
      if (previous) {
        std::ofstream(latest_tmp, std::ios::trunc) << *previous << "\n";
        std::rename(latest_tmp.c_str(), latest.c_str());
      } else {
        std::remove(latest.c_str());
      }
    }
    std::remove(latest_tmp.c_str());
    std::remove(tmp.c_str());
    if (renamed) std::remove(final_file.c_str());
    throw;
  }
}

void CheckpointDirectory::discard(int64_t step) const { std::remove(temp_path(step).c_str()); }

std::vector<int64_t> CheckpointDirectory::complete_steps() const {
  std::vector<int64_t> steps;
  const size_t len = file_name(0).size();
  if (DIR* d = ::opendir(dir_.c_str())) {
    while (dirent* e = ::readdir(d)) {
      const std::string n = e->d_name;
      if (n.size() == len && n.rfind("ckpt_", 0) == 0 && n.compare(n.size() - 3, 3, ".h5") == 0 &&
          std::all_of(n.begin() + 5, n.end() - 3, [](char c) { return c >= '0' && c <= '9'; }))
        steps.push_back(std::atoll(n.c_str() + 5));
    }
    ::closedir(d);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

std::vector<std::string> CheckpointDirectory::prune(int64_t keep, const std::vector<int64_t>& written,
                                                    const std::string& protect) const {
  // oldest first: what was here before this run (by step), then this run's, as written
  std::vector<int64_t> order;
  for (int64_t s : complete_steps())
    if (std::find(written.begin(), written.end(), s) == written.end()) order.push_back(s);
  for (int64_t s : written)
    if (std::find(order.begin(), order.end(), s) == order.end()) order.push_back(s);
  const auto canonical = [](const std::string& path) {
    char buf[PATH_MAX];
    return ::realpath(path.c_str(), buf) ? std::string(buf) : path;
  };
  const std::string keep_always = protect.empty() ? "" : canonical(protect);
  // the protected file is kept on top of `keep`
  std::vector<int64_t> candidates;
  for (int64_t s : order)
    if (::access(final_path(s).c_str(), F_OK) == 0 && canonical(final_path(s)) != keep_always) candidates.push_back(s);
  std::vector<std::string> deleted;
  int64_t remaining = int64_t(candidates.size());
  for (size_t i = 0; i < candidates.size() && remaining > keep; ++i) {
    const std::string path = final_path(candidates[i]);
    if (std::remove(path.c_str()) == 0) {
      deleted.push_back(file_name(candidates[i]));
      --remaining;
    }
  }
  return deleted;
}

std::optional<std::string> CheckpointDirectory::latest_name() const {
  std::ifstream in(dir_ + "/LATEST");
  if (!in) return std::nullopt;
  std::string name;
  std::getline(in, name);
  return name;
}

int64_t CheckpointDirectory::free_bytes() const {
  struct statvfs fs {};
  if (::statvfs(dir_.c_str(), &fs) != 0) return -1;
  return int64_t(fs.f_bavail) * int64_t(fs.f_frsize);
}

}  // namespace strata
