#pragma once
// The checkpoints/ folder of a run and its crash-safe protocol:
//   1. all ranks write ckpt_<step>.h5.tmp (a killed job leaves only a .tmp behind);
//   2. rank 0 fsyncs it, renames it to ckpt_<step>.h5 and fsyncs the folder;
//   3. rank 0 writes LATEST.tmp (the file name), fsyncs, renames it to LATEST, fsyncs;
//   4. only then are complete checkpoints beyond the newest `keep` deleted (prune()).
// At every moment LATEST names a complete checkpoint (or does not exist yet). Every
// fsync, write and rename is checked: a failure throws IoError after undoing steps 2-3,
// so LATEST still names the previous checkpoint and nothing has been deleted.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

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

  // Rank 0 only, after every rank has written and closed the temporary file: steps 2
  // and 3 above. Throws IoError (naming the call and errno's text) after undoing them.
  void publish(int64_t step) const;
  // Removes the temporary file of `step` (a write that failed on some rank).
  void discard(int64_t step) const;
  // Step 4: deletes complete checkpoints, oldest first, until `keep` remain. Files found
  // in the folder count as older than those this run wrote (`written`, in the order it
  // wrote them); `protect` (the file this run restarted from) is never deleted and does
  // not count against `keep`.
  // Returns the names deleted.
  std::vector<std::string> prune(int64_t keep, const std::vector<int64_t>& written, const std::string& protect) const;

  // The file name LATEST holds, if LATEST exists.
  std::optional<std::string> latest_name() const;
  // Steps of the complete checkpoints in the folder (ckpt_<step>.h5), ascending.
  std::vector<int64_t> complete_steps() const;
  // Bytes free for an unprivileged writer on the folder's file system.
  int64_t free_bytes() const;

 private:
  std::string dir_;
};

}  // namespace strata
