#include "comm/control.hpp"

#include <unistd.h>

namespace strata {
namespace {

template <class T>
MPI_Datatype control_type();
template <>
MPI_Datatype control_type<int>() {
  return MPI_INT;
}
template <>
MPI_Datatype control_type<double>() {
  return MPI_DOUBLE;
}

template <class T>
T reduce_one(MPI_Comm comm, T x, MPI_Op op) {
  MPI_Allreduce(MPI_IN_PLACE, &x, 1, control_type<T>(), op, comm);
  return x;
}

// every rank's string: lengths first, then the characters, concatenated
std::vector<std::string> split_joined(const std::string& all, const std::vector<int>& lengths) {
  std::vector<std::string> out;
  size_t at = 0;
  for (int n : lengths) {
    out.push_back(all.substr(at, size_t(n)));
    at += size_t(n);
  }
  return out;
}

std::vector<int> offsets_of(const std::vector<int>& lengths, size_t& total) {
  std::vector<int> offsets(lengths.size(), 0);
  for (size_t r = 1; r < lengths.size(); ++r) offsets[r] = offsets[r - 1] + lengths[r - 1];
  total = lengths.empty() ? 0 : size_t(offsets.back() + lengths.back());
  return offsets;
}

}  // namespace

int max_over(MPI_Comm comm, int x) { return reduce_one(comm, x, MPI_MAX); }
double max_over(MPI_Comm comm, double x) { return reduce_one(comm, x, MPI_MAX); }
int min_over(MPI_Comm comm, int x) { return reduce_one(comm, x, MPI_MIN); }

void max_over(MPI_Comm comm, std::vector<double>& xs) {
  MPI_Allreduce(MPI_IN_PLACE, xs.data(), int(xs.size()), MPI_DOUBLE, MPI_MAX, comm);
}

void sum_over(MPI_Comm comm, std::vector<int64_t>& xs) {
  MPI_Allreduce(MPI_IN_PLACE, xs.data(), int(xs.size()), MPI_INT64_T, MPI_SUM, comm);
}

void sum_over(MPI_Comm comm, std::vector<double>& xs) {
  MPI_Allreduce(MPI_IN_PLACE, xs.data(), int(xs.size()), MPI_DOUBLE, MPI_SUM, comm);
}

double broadcast_value(MPI_Comm comm, double x, int root) {
  MPI_Bcast(&x, 1, MPI_DOUBLE, root, comm);
  return x;
}

void broadcast_string(MPI_Comm comm, std::string& s, int root) {
  uint64_t n = s.size();
  MPI_Bcast(&n, 1, MPI_UINT64_T, root, comm);
  s.resize(size_t(n));
  MPI_Bcast(s.data(), int(n), MPI_CHAR, root, comm);
}

std::vector<std::string> gather_strings(MPI_Comm comm, const std::string& mine, int root) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const int length = int(mine.size());
  std::vector<int> lengths(size_t(size), 0);
  MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, root, comm);
  size_t total = 0;
  const std::vector<int> offsets = offsets_of(lengths, total);
  std::string all(rank == root ? total : 0, '\0');
  MPI_Gatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR, root, comm);
  return rank == root ? split_joined(all, lengths) : std::vector<std::string>{};
}

std::vector<std::string> allgather_strings(MPI_Comm comm, const std::string& mine) {
  int size = 1;
  MPI_Comm_size(comm, &size);
  const int length = int(mine.size());
  std::vector<int> lengths(size_t(size), 0);
  MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, comm);
  size_t total = 0;
  const std::vector<int> offsets = offsets_of(lengths, total);
  std::string all(total, '\0');
  MPI_Allgatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR, comm);
  return split_joined(all, lengths);
}

void barrier(MPI_Comm comm) { MPI_Barrier(comm); }

void idle_barrier(MPI_Comm comm) {
  MPI_Request request;
  MPI_Ibarrier(comm, &request);
  for (int done = 0; !done;) {
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (!done) ::usleep(500);
  }
}

MPI_Comm first_ranks(MPI_Comm comm, int n) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm out = MPI_COMM_NULL;
  MPI_Comm_split(comm, rank < n ? 0 : MPI_UNDEFINED, rank, &out);
  return out;
}

void free_ranks(MPI_Comm& comm) {
  if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
}

NodeShare node_share(MPI_Comm comm) {
  MPI_Comm node;
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  NodeShare s;
  MPI_Comm_rank(node, &s.local_rank);
  MPI_Comm_size(node, &s.local_size);
  MPI_Comm_free(&node);
  return s;
}

StopVotes::StopVotes(MPI_Comm comm, int slots)
    : comm_(comm), flags_(size_t(slots), 0), requests_(size_t(slots), MPI_REQUEST_NULL) {}

StopVotes::~StopVotes() { finish(); }

void StopVotes::post(int slot, bool stop) {
  flags_[size_t(slot)] = stop ? 1 : 0;
  MPI_Iallreduce(MPI_IN_PLACE, &flags_[size_t(slot)], 1, MPI_INT, MPI_MAX, comm_, &requests_[size_t(slot)]);
}

bool StopVotes::result(int slot) {
  MPI_Wait(&requests_[size_t(slot)], MPI_STATUS_IGNORE);
  return flags_[size_t(slot)] != 0;
}

void StopVotes::finish() {
  if (!requests_.empty()) MPI_Waitall(int(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
}

}  // namespace strata
