#pragma once
// One checkpoint = one HDF5 file, written collectively by all ranks with parallel HDF5
// (MPI-IO, collective transfers). Each tensor is one *global* dataset (full logical
// shape, float32, chunked, Fletcher32 checksum); every rank writes a hyperslab of it. Readers may use any number of
// ranks: they read what they need of the global datasets. Attributes on the root group carry scalars and strings (step,
// deck, layout).
//
// This level knows files and tensors, not models: src/train maps parameters to names.
#include <hdf5.h>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "comm/mpi_handle.hpp"

namespace strata {

// A box of a tensor: start and count per dimension.
struct Hyperslab {
  std::vector<int64_t> start, count;
};

// The flat range [begin, end) of a row-major box of extents `count` as at most
// 2 x dims - 1 boxes (relative to the box's corner), in row-major order: a part of a
// tensor that is contiguous in memory but not a box (ZeRO-1's block of the moments).
std::vector<Hyperslab> flat_range_hyperslabs(const std::vector<int64_t>& count, int64_t begin, int64_t end);

// Writing never throws once the file is open. A failed write, flush or close (disk full,
// quota, I/O error) cannot be agreed on afterwards: parallel HDF5's error path leaves the
// collective calls of the rank that failed out of step with the others' (seen here: one
// rank in MPI_File_set_view, the other in a truncate's broadcast, for ever). So
// `on_write_failure`, when given, is called with the reason at the moment of the failure,
// from an MPI-IO error handler on the file or after the HDF5 call that failed, and the
// caller ends the job; without it the first reason is kept (error()), which is safe only
// where a single rank writes.
class CheckpointWriter {
 public:
  // Creates path (truncating it) collectively over comm; error() says if it failed.
  CheckpointWriter(const std::string& path, MPI_Comm comm,
                   std::function<void(const std::string&)> on_write_failure = nullptr);
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // Collective: dataset `name` (e.g. "/params/wte") of global shape `shape`; this rank
  // writes the hyperslab (start, count per dimension) from host memory `data` (row-major,
  // prod(count) values). A count of 0 in any dimension writes nothing.
  void write_tensor(const std::string& name, const std::vector<int64_t>& shape, const std::vector<int64_t>& start,
                    const std::vector<int64_t>& count, const float* data);
  // ... or the union of disjoint boxes, whose values `data` holds in the tensor's row-major
  // order (none: this rank writes nothing).
  void write_tensor(const std::string& name, const std::vector<int64_t>& shape, const std::vector<Hyperslab>& boxes,
                    const float* data);
  // Collective: a one-dimensional dataset of bytes (e.g. "/tokenizer/model"), checksummed
  // like the tensors; identical and not empty on every rank, written by rank 0.
  void write_bytes(const std::string& name, const std::string& bytes);
  // Collective, identical values on all ranks.
  void write_attribute(const std::string& name, const std::string& value);
  void write_attribute(const std::string& name, int64_t value);
  void write_attribute(const std::string& name, double value);
  // Collective; flushes (MPI_File_sync, i.e. fsync) and closes; every result is checked.
  // Called by the destructor if not called before.
  void close();
  // The first failure on this rank ("" if none): what failed and, where HDF5 or MPI-IO
  // says, why (e.g. "No space left on device").
  const std::string& error() const { return error_; }
  // Called by the file's MPI-IO error handler.
  void mpi_io_failed(const std::string& why);

 private:
  void write_dataset(const std::string& name, const std::vector<int64_t>& shape, const std::vector<Hyperslab>& boxes,
                     hid_t file_type, hid_t memory_type, const void* data);
  hid_t group_for(const std::string& dataset_name);
  void fail(const std::string& what);
  void write_failed(const std::string& what);
  std::function<void(const std::string&)> on_write_failure_;
  std::string path_, error_;
  hid_t file_ = -1;
  int rank_ = 0;
};

class CheckpointReader {
 public:
  // Opens path read-only on this rank alone (each rank reads what it needs). Throws
  // UserError naming the file when it is missing, truncated or not HDF5.
  explicit CheckpointReader(const std::string& path);
  ~CheckpointReader();
  CheckpointReader(const CheckpointReader&) = delete;
  CheckpointReader& operator=(const CheckpointReader&) = delete;

  bool has_tensor(const std::string& name) const;
  // Throws UserError when the dataset is missing.
  std::vector<int64_t> shape(const std::string& name) const;
  // Reads the whole dataset into out (prod(shape) floats), or the hyperslab (start, count)
  // into out (prod(count) floats, row-major); the Fletcher32 checksum of every chunk read
  // is verified. Throws UserError naming the file and tensor on failure.
  void read_tensor(const std::string& name, float* out) const;
  void read_tensor(const std::string& name, const std::vector<int64_t>& start, const std::vector<int64_t>& count,
                   float* out) const;
  // ... or the union of disjoint boxes, into out in the tensor's row-major order.
  void read_tensor(const std::string& name, const std::vector<Hyperslab>& boxes, float* out) const;
  // A byte dataset written by write_bytes, its checksums verified. Throws UserError naming
  // the file and dataset when it is missing or corrupt.
  std::string read_bytes(const std::string& name) const;
  // Names of the datasets under a group (e.g. "/params"), in creation order.
  std::vector<std::string> tensor_names(const std::string& group) const;

  bool has_attribute(const std::string& name) const;
  std::string string_attribute(const std::string& name) const;
  int64_t int_attribute(const std::string& name) const;
  double double_attribute(const std::string& name) const;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  hid_t file_ = -1;
};

}  // namespace strata
