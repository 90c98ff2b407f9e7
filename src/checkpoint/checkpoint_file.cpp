#include "checkpoint/checkpoint_file.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace strata {
namespace {

// HDF5 prints its own error stacks by default; strata reports one line instead.
void silence_hdf5() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

// The most specific description on HDF5's error stack: for a failed MPI-IO call it holds
// the MPI error string, which names the system error (e.g. "No space left on device").
std::string hdf5_error_detail() {
  std::string detail;
  H5Ewalk2(
      H5E_DEFAULT, H5E_WALK_UPWARD,
      [](unsigned n, const H5E_error2_t* e, void* out) -> herr_t {
        auto& d = *static_cast<std::string*>(out);
        if (n == 0 && e->desc) d = e->desc;  // the innermost error comes first upward
        return 0;
      },
      &detail);
  for (auto& c : detail)
    if (c == '\n') c = ' ';
  return detail;
}

// The writer whose MPI-IO file is open. MPI's error handlers are C callbacks without user
// data, so the one writer a rank has open at a time is found here.
CheckpointWriter* g_open_writer = nullptr;

extern "C" void on_mpi_io_error(MPI_File*, int* code, ...) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(*code, text, &len);
  // "Other I/O error , error stack: ADIOI_GEN_WRITECONTIG(80): Other I/O error No space
  // left on device": the system's words are at the end
  std::string why(text, size_t(len));
  for (auto& c : why)
    if (c == '\n') c = ' ';
  std::string call;  // the MPI-IO routine that failed, in the system's terms
  const auto innermost = why.rfind("): ");
  if (innermost != std::string::npos) {
    const auto open = why.rfind('(', innermost), begin = why.rfind(' ', open);
    const std::string routine = why.substr(begin == std::string::npos ? 0 : begin + 1, open - begin - 1);
    call = routine.find("FLUSH") != std::string::npos   ? "fsync"
           : routine.find("WRITE") != std::string::npos ? "write"
                                                        : routine;
    why = why.substr(innermost + 3);
  }
  const std::string generic = "Other I/O error ";
  if (why.rfind(generic, 0) == 0 && why.size() > generic.size()) why = why.substr(generic.size());
  if (!call.empty()) why = call + ": " + why;
  if (g_open_writer) g_open_writer->mpi_io_failed(why);
}

// {start, count}, or none when a count is 0
std::vector<Hyperslab> one_box(const std::vector<int64_t>& start, const std::vector<int64_t>& count) {
  for (auto c : count)
    if (c == 0) return {};
  return {Hyperslab{start, count}};
}

int64_t values_in(const std::vector<Hyperslab>& boxes) {
  int64_t n = 0;
  for (const auto& b : boxes) {
    int64_t v = 1;
    for (auto c : b.count) v *= c;
    n += v;
  }
  return n;
}

// The boxes' values side by side in memory (an empty selection for none).
hid_t memory_space(const std::vector<Hyperslab>& boxes) {
  const hsize_t n = hsize_t(values_in(boxes));
  const hsize_t dims = std::max<hsize_t>(n, 1);
  hid_t mem = H5Screate_simple(1, &dims, nullptr);
  if (n == 0) H5Sselect_none(mem);
  return mem;
}

// Selects the union of the boxes in a dataset's space; HDF5 walks it in row-major order.
void select(hid_t space, const std::vector<Hyperslab>& boxes) {
  if (boxes.empty()) {
    H5Sselect_none(space);
    return;
  }
  for (size_t i = 0; i < boxes.size(); ++i) {
    std::vector<hsize_t> start(boxes[i].start.begin(), boxes[i].start.end());
    std::vector<hsize_t> count(boxes[i].count.begin(), boxes[i].count.end());
    H5Sselect_hyperslab(space, i == 0 ? H5S_SELECT_SET : H5S_SELECT_OR, start.data(), nullptr, count.data(), nullptr);
  }
}

}  // namespace

std::vector<Hyperslab> flat_range_hyperslabs(const std::vector<int64_t>& count, int64_t begin, int64_t end) {
  std::vector<Hyperslab> out;
  if (begin >= end) return out;
  if (count.size() == 1) return {Hyperslab{{begin}, {end - begin}}};
  const std::vector<int64_t> inner_count(count.begin() + 1, count.end());
  int64_t inner = 1;
  for (auto c : inner_count) inner *= c;
  // a part of one row (of the dimensions after the first): the inner box's range, in row r
  const auto part_of_row = [&](int64_t r, int64_t lo, int64_t hi) {
    for (auto b : flat_range_hyperslabs(inner_count, lo, hi)) {
      b.start.insert(b.start.begin(), r);
      b.count.insert(b.count.begin(), 1);
      out.push_back(std::move(b));
    }
  };
  if (begin % inner != 0) {  // the first row's tail
    const int64_t r = begin / inner, row_end = std::min(end, (r + 1) * inner);
    part_of_row(r, begin - r * inner, row_end - r * inner);
    begin = row_end;
  }
  const int64_t full_begin = begin / inner, full_end = end / inner;
  if (begin < end && full_end > full_begin) {  // whole rows
    Hyperslab b{std::vector<int64_t>(count.size(), 0), count};
    b.start[0] = full_begin;
    b.count[0] = full_end - full_begin;
    out.push_back(std::move(b));
    begin = full_end * inner;
  }
  if (begin < end) part_of_row(begin / inner, 0, end - begin / inner * inner);  // the last row's head
  return out;
}

// ---- writer ---------------------------------------------------------------------------

CheckpointWriter::CheckpointWriter(const std::string& path, MPI_Comm comm,
                                   std::function<void(const std::string&)> on_write_failure)
    : on_write_failure_(std::move(on_write_failure)), path_(path) {
  MPI_Comm_rank(comm, &rank_);
  silence_hdf5();
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  H5Pset_fapl_mpio(fapl, comm, MPI_INFO_NULL);
  H5Pset_all_coll_metadata_ops(fapl, true);
  H5Pset_coll_metadata_write(fapl, true);
  file_ = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
  if (file_ < 0) {
    H5Pclose(fapl);
    fail("cannot create checkpoint file '" + path + "'");
    return;
  }
  // MPI-IO failures go to on_write_failure at the moment they happen, before parallel
  // HDF5's error path can take this rank out of step with the others.
  void* handle = nullptr;
  if (on_write_failure_ && H5Fget_vfd_handle(file_, fapl, &handle) >= 0 && handle) {
    MPI_Errhandler handler;
    MPI_File_create_errhandler(on_mpi_io_error, &handler);
    MPI_File_set_errhandler(*static_cast<MPI_File*>(handle), handler);
    MPI_Errhandler_free(&handler);
    g_open_writer = this;
  }
  H5Pclose(fapl);
}

CheckpointWriter::~CheckpointWriter() { close(); }

void CheckpointWriter::mpi_io_failed(const std::string& why) { write_failed("MPI-IO on " + path_ + " failed: " + why); }

void CheckpointWriter::fail(const std::string& what) {
  if (!error_.empty()) return;
  const std::string detail = hdf5_error_detail();
  error_ = what + (detail.empty() ? "" : " (" + detail + ")");
}

void CheckpointWriter::write_failed(const std::string& what) {
  fail(what);
  if (on_write_failure_) on_write_failure_(error_);
}

void CheckpointWriter::close() {
  if (file_ < 0) return;
  if (H5Fflush(file_, H5F_SCOPE_GLOBAL) < 0) write_failed("flushing " + path_ + " to disk");
  if (H5Fclose(file_) < 0) write_failed("closing " + path_);
  file_ = -1;
  if (g_open_writer == this) g_open_writer = nullptr;
}

hid_t CheckpointWriter::group_for(const std::string& name) {
  // Create intermediate groups ("/optim/adam_m/x" -> /optim, /optim/adam_m) as needed.
  const auto slash = name.rfind('/');
  const std::string parent = slash == 0 ? "/" : name.substr(0, slash);
  if (parent == "/") return H5Gopen2(file_, "/", H5P_DEFAULT);
  hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
  H5Pset_create_intermediate_group(lcpl, 1);
  hid_t g = H5Lexists(file_, parent.c_str(), H5P_DEFAULT) > 0
                ? H5Gopen2(file_, parent.c_str(), H5P_DEFAULT)
                : H5Gcreate2(file_, parent.c_str(), lcpl, H5P_DEFAULT, H5P_DEFAULT);
  H5Pclose(lcpl);
  return g;
}

void CheckpointWriter::write_tensor(const std::string& name, const std::vector<int64_t>& shape,
                                    const std::vector<int64_t>& start, const std::vector<int64_t>& count,
                                    const float* data) {
  write_tensor(name, shape, one_box(start, count), data);
}

void CheckpointWriter::write_tensor(const std::string& name, const std::vector<int64_t>& shape,
                                    const std::vector<Hyperslab>& boxes, const float* data) {
  write_dataset(name, shape, boxes, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, data);
}

void CheckpointWriter::write_bytes(const std::string& name, const std::string& bytes) {
  const int64_t n = int64_t(bytes.size());
  const std::vector<Hyperslab> boxes = rank_ == 0 ? one_box({0}, {n}) : std::vector<Hyperslab>{};
  write_dataset(name, {n}, boxes, H5T_STD_U8LE, H5T_NATIVE_UCHAR, bytes.data());
}

void CheckpointWriter::write_dataset(const std::string& name, const std::vector<int64_t>& shape,
                                     const std::vector<Hyperslab>& boxes, hid_t file_type, hid_t memory_type,
                                     const void* data) {
  if (file_ < 0) return;
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  hsize_t row_size = 1;
  for (size_t d = 1; d < dims.size(); ++d) row_size *= dims[d];
  // Chunks of whole rows, at most about 1M values each: Fletcher32 (like every filter)
  // needs a chunked layout, and each chunk carries its own checksum. The rows are shared
  // evenly between the chunks, since HDF5 stores a partial last chunk at full size.
  std::vector<hsize_t> chunk = dims;
  const hsize_t target = 1u << 20, total = dims[0] * row_size;
  const hsize_t n_chunks = std::max<hsize_t>(1, (total + target - 1) / target);
  chunk[0] = std::max<hsize_t>(1, (dims[0] + n_chunks - 1) / n_chunks);
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(dcpl, int(chunk.size()), chunk.data());
  H5Pset_fletcher32(dcpl);
  hid_t space = H5Screate_simple(int(dims.size()), dims.data(), nullptr);
  hid_t group = group_for(name);
  if (group < 0) write_failed("creating the group of " + name + " in " + path_);
  const std::string leaf = name.substr(name.rfind('/') + 1);
  hid_t dset = group < 0 ? -1 : H5Dcreate2(group, leaf.c_str(), file_type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  H5Pclose(dcpl);
  if (group >= 0) H5Gclose(group);
  if (dset < 0) {
    H5Sclose(space);
    write_failed("creating dataset " + name + " in " + path_);
    return;
  }
  // This rank's boxes; an empty selection still takes part in the collective write.
  hid_t mem = memory_space(boxes);
  select(space, boxes);
  hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
  H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE);
  const herr_t st = H5Dwrite(dset, memory_type, mem, space, dxpl, data);
  if (st < 0) write_failed("writing " + name + " to " + path_);
  H5Pclose(dxpl);
  H5Sclose(mem);
  H5Sclose(space);
  if (H5Dclose(dset) < 0) write_failed("closing dataset " + name + " in " + path_);
}

void CheckpointWriter::write_attribute(const std::string& name, const std::string& value) {
  if (file_ < 0) return;
  hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, std::max<size_t>(1, value.size()));
  H5Tset_strpad(type, H5T_STR_NULLPAD);
  hid_t space = H5Screate(H5S_SCALAR);
  hid_t attr = H5Acreate2(file_, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT);
  const herr_t st = attr < 0 ? -1 : H5Awrite(attr, type, value.empty() ? "" : value.data());
  if (attr >= 0) H5Aclose(attr);
  H5Sclose(space);
  H5Tclose(type);
  if (st < 0) write_failed("writing attribute " + name + " to " + path_);
}

namespace {
herr_t write_scalar_attribute(hid_t file, const std::string& name, hid_t file_type, hid_t mem_type, const void* value) {
  hid_t space = H5Screate(H5S_SCALAR);
  hid_t attr = H5Acreate2(file, name.c_str(), file_type, space, H5P_DEFAULT, H5P_DEFAULT);
  const herr_t st = attr < 0 ? -1 : H5Awrite(attr, mem_type, value);
  if (attr >= 0) H5Aclose(attr);
  H5Sclose(space);
  return st;
}
}  // namespace

void CheckpointWriter::write_attribute(const std::string& name, int64_t value) {
  if (file_ >= 0 && write_scalar_attribute(file_, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &value) < 0)
    write_failed("writing attribute " + name + " to " + path_);
}

void CheckpointWriter::write_attribute(const std::string& name, double value) {
  if (file_ >= 0 && write_scalar_attribute(file_, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &value) < 0)
    write_failed("writing attribute " + name + " to " + path_);
}

// ---- reader ---------------------------------------------------------------------------

CheckpointReader::CheckpointReader(const std::string& path) : path_(path) {
  silence_hdf5();
  if (H5Fis_hdf5(path.c_str()) <= 0)
    throw UserError("checkpoint '" + path + "' is missing or not an HDF5 file (truncated or corrupt?)");
  file_ = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file_ < 0) throw UserError("checkpoint '" + path + "' cannot be opened (truncated or corrupt?)");
}

CheckpointReader::~CheckpointReader() {
  if (file_ >= 0) H5Fclose(file_);
}

bool CheckpointReader::has_tensor(const std::string& name) const {
  // H5Lexists needs every intermediate group to exist
  std::string partial;
  size_t pos = 1;
  while (true) {
    pos = name.find('/', pos);
    partial = name.substr(0, pos);
    if (H5Lexists(file_, partial.c_str(), H5P_DEFAULT) <= 0) return false;
    if (pos == std::string::npos) return true;
    ++pos;
  }
}

std::vector<int64_t> CheckpointReader::shape(const std::string& name) const {
  if (!has_tensor(name)) throw UserError("checkpoint '" + path_ + "' has no tensor " + name);
  hid_t dset = H5Dopen2(file_, name.c_str(), H5P_DEFAULT);
  if (dset < 0) throw UserError("checkpoint '" + path_ + "': cannot open tensor " + name + " (corrupt?)");
  hid_t space = H5Dget_space(dset);
  const int rank = H5Sget_simple_extent_ndims(space);
  std::vector<hsize_t> dims(std::max(rank, 0));
  if (rank > 0) H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  H5Sclose(space);
  H5Dclose(dset);
  if (rank < 0) throw UserError("checkpoint '" + path_ + "': tensor " + name + " has an unreadable shape (corrupt?)");
  return {dims.begin(), dims.end()};
}

void CheckpointReader::read_tensor(const std::string& name, float* out) const {
  const auto dims = shape(name);
  read_tensor(name, std::vector<int64_t>(dims.size(), 0), dims, out);
}

void CheckpointReader::read_tensor(const std::string& name, const std::vector<int64_t>& start,
                                   const std::vector<int64_t>& count, float* out) const {
  read_tensor(name, one_box(start, count), out);
}

void CheckpointReader::read_tensor(const std::string& name, const std::vector<Hyperslab>& boxes, float* out) const {
  (void)shape(name);  // existence
  hid_t dset = H5Dopen2(file_, name.c_str(), H5P_DEFAULT);
  hid_t space = H5Dget_space(dset);
  hid_t mem = memory_space(boxes);
  select(space, boxes);
  const herr_t st = H5Dread(dset, H5T_NATIVE_FLOAT, mem, space, H5P_DEFAULT, out);
  H5Sclose(mem);
  H5Sclose(space);
  H5Dclose(dset);
  if (st < 0)
    throw UserError("checkpoint '" + path_ + "': tensor " + name +
                    " cannot be read: checksum mismatch or truncated data (corrupt file)");
}

std::string CheckpointReader::read_bytes(const std::string& name) const {
  const auto dims = shape(name);  // existence
  std::string out(dims.size() == 1 ? size_t(dims[0]) : 0, '\0');
  hid_t dset = H5Dopen2(file_, name.c_str(), H5P_DEFAULT);
  const herr_t st = dims.size() != 1 ? -1 : H5Dread(dset, H5T_NATIVE_UCHAR, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data());
  H5Dclose(dset);
  if (st < 0)
    throw UserError("checkpoint '" + path_ + "': dataset " + name +
                    " cannot be read: checksum mismatch or truncated data (corrupt file)");
  return out;
}

std::vector<std::string> CheckpointReader::tensor_names(const std::string& group) const {
  std::vector<std::string> names;
  if (!has_tensor(group)) return names;
  hid_t g = H5Gopen2(file_, group.c_str(), H5P_DEFAULT);
  H5G_info_t info;
  H5Gget_info(g, &info);
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    // HDF5 tracks creation order only when asked; name order is fine for listing.
    const ssize_t n = H5Lget_name_by_idx(g, ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
    std::string s(size_t(std::max<ssize_t>(n, 0)), '\0');
    H5Lget_name_by_idx(g, ".", H5_INDEX_NAME, H5_ITER_INC, i, s.data(), s.size() + 1, H5P_DEFAULT);
    names.push_back(s);
  }
  H5Gclose(g);
  return names;
}

bool CheckpointReader::has_attribute(const std::string& name) const { return H5Aexists(file_, name.c_str()) > 0; }

std::string CheckpointReader::string_attribute(const std::string& name) const {
  hid_t attr = H5Aopen(file_, name.c_str(), H5P_DEFAULT);
  if (attr < 0) throw UserError("checkpoint '" + path_ + "' has no attribute '" + name + "'");
  hid_t type = H5Aget_type(attr);
  const size_t size = H5Tget_size(type);
  std::string value(size, '\0');
  hid_t mem = H5Tcopy(H5T_C_S1);
  H5Tset_size(mem, size);
  H5Tset_strpad(mem, H5T_STR_NULLPAD);
  const herr_t st = H5Aread(attr, mem, value.data());
  H5Tclose(mem);
  H5Tclose(type);
  H5Aclose(attr);
  if (st < 0) throw UserError("checkpoint '" + path_ + "': attribute '" + name + "' is unreadable");
  value.resize(value.find_last_not_of('\0') + 1);
  return value;
}

namespace {
void read_scalar_attribute(hid_t file, const std::string& path, const std::string& name, hid_t mem_type, void* out) {
  hid_t attr = H5Aopen(file, name.c_str(), H5P_DEFAULT);
  if (attr < 0) throw UserError("checkpoint '" + path + "' has no attribute '" + name + "'");
  const herr_t st = H5Aread(attr, mem_type, out);
  H5Aclose(attr);
  if (st < 0) throw UserError("checkpoint '" + path + "': attribute '" + name + "' is unreadable");
}
}  // namespace

int64_t CheckpointReader::int_attribute(const std::string& name) const {
  int64_t v = 0;
  read_scalar_attribute(file_, path_, name, H5T_NATIVE_INT64, &v);
  return v;
}

double CheckpointReader::double_attribute(const std::string& name) const {
  double v = 0;
  read_scalar_attribute(file_, path_, name, H5T_NATIVE_DOUBLE, &v);
  return v;
}

}  // namespace strata
