#pragma once
// The checkpoints/ folder of a run and its crash-safe protocol:
//   1. all ranks write ckpt_<step>.h5.tmp (a killed job leaves only a .tmp behind);
//   2. rank 0 fsyncs it, renames it to ckpt_<step>.h5 and fsyncs the folder;
//   3. rank 0 writes LATEST.tmp (the file name), fsyncs, renames it to LATEST, fsyncs;
//   4. only then are complete checkpoints beyond the newest `keep` deleted.
// At every moment LATEST names a complete checkpoint (or does not exist yet).
#include <cstdint>
#include <optional>
#include <string>

namespace strata {

// mkdir -p: creates path and its missing parents; throws UserError naming path.
void make_directories(const std::string& path);

class CheckpointDirectory {
 public:
  explicit CheckpointDirectory(std::string dir) : dir_(std::move(dir)) {}
  const std::string& dir() const { return dir_; }
  static std::string file_name(int64_t step);  // ckpt_00000100.h5
  std::string temp_path(int64_t step) const { return dir_ + "/" + file_name(step) + ".tmp"; }
  std::string final_path(int64_t step) const { return dir_ + "/" + file_name(step); }

  // Rank 0 only, after every rank has closed the temporary file: steps 2 to 4 above.
  void publish(int64_t step, int64_t keep) const;
  // The checkpoint LATEST names, if LATEST exists (throws UserError if it names a
  // missing file).
  std::optional<std::string> latest() const;

 private:
  std::string dir_;
};

}  // namespace strata
